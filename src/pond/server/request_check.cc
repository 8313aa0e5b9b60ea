#include "pond/server/request_check.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

namespace pond::server {

namespace {

// What one value read adds to an answer besides its bytes: the table name's bytes are counted
// apart; this covers the key, the flags and protobuf's tags and lengths, generously.
constexpr size_t kValueOverheadBytes = 32;
// Room left in an answer for everything but the values.
constexpr size_t kAnswerSlackBytes = 4096;

std::vector<std::byte> Bytes(const std::string& s) {
  std::vector<std::byte> v(s.size());
  if (!s.empty()) std::memcpy(v.data(), s.data(), s.size());
  return v;
}

Result<PlannedKey> Resolve(const std::string& table, uint64_t key, const ServiceDirectory& dir) {
  const ServedTable* t = dir.Table(table);
  if (t == nullptr) {
    return InvalidArgument(fmt::format("no table \"{}\" (Describe lists them)", Printable(table)));
  }
  return PlannedKey{t, key};
}

Status CheckValueSize(const PlannedKey& k, size_t bytes, const char* what) {
  if (bytes == k.table->value_bytes) return Status::Ok();
  return InvalidArgument(fmt::format("{} {} {}: {} bytes, but the table's values have {}", what,
                                     k.table->name, k.key, bytes, k.table->value_bytes));
}

Status CheckCount(size_t keys, const ClientServiceOptions& o, const char* what) {
  if (keys <= o.keys_per_request_max) return Status::Ok();
  return InvalidArgument(
      fmt::format("{} {} keys; at most {} in one request", what, keys, o.keys_per_request_max));
}

// Values of `reads` must fit one answer.
Status CheckAnswerSize(const std::vector<PlannedKey>& reads, const ClientServiceOptions& o) {
  size_t bytes = kAnswerSlackBytes;
  for (const PlannedKey& k : reads) {
    bytes += k.table->value_bytes + k.table->name.size() + kValueOverheadBytes;
  }
  if (bytes <= o.message_bytes_max) return Status::Ok();
  return InvalidArgument(
      fmt::format("the values read would take about {} bytes; an answer holds "
                  "at most {}",
                  bytes, o.message_bytes_max));
}

Result<PlannedWrite> PlanWrite(v1::Write::Kind kind, const std::string& table, uint64_t key,
                               const std::string& value, const ServiceDirectory& dir) {
  Result<PlannedKey> k = Resolve(table, key, dir);
  if (!k.ok()) return k.status();
  if (kind == v1::Write::DELETE) {
    if (!value.empty()) {
      return InvalidArgument(
          fmt::format("delete of {} {} carries a value; a delete has none", k->table->name, key));
    }
  } else {
    POND_RETURN_IF_ERROR(
        CheckValueSize(*k, value.size(), kind == v1::Write::PUT ? "put of" : "insert of"));
  }
  return PlannedWrite{kind, *k, Bytes(value)};
}

}  // namespace

Result<ExecutePlan> PlanExecute(const v1::ExecuteRequest& req, const ServiceDirectory& dir,
                                const ClientServiceOptions& o) {
  ExecutePlan plan;
  plan.read_only = req.read_only();
  POND_RETURN_IF_ERROR(
      CheckCount(static_cast<size_t>(req.reads_size()) + req.writes_size() + req.conditions_size(),
                 o, "the request names"));
  if (plan.read_only && req.writes_size() > 0) {
    return InvalidArgument("a read-only request has writes");
  }
  for (const v1::Key& k : req.reads()) {
    Result<PlannedKey> p = Resolve(k.table(), k.key(), dir);
    if (!p.ok()) return p.status();
    plan.reads.push_back(*p);
  }
  std::set<std::pair<uint16_t, uint64_t>> written;
  for (const v1::Write& w : req.writes()) {
    if (!v1::Write::Kind_IsValid(w.kind())) {
      return InvalidArgument(fmt::format("a write of kind {}; kinds are PUT, INSERT, DELETE",
                                         static_cast<int>(w.kind())));
    }
    Result<PlannedWrite> p = PlanWrite(w.kind(), w.table(), w.key(), w.value(), dir);
    if (!p.ok()) return p.status();
    if (!written.emplace(p->key.table->id, p->key.key).second) {
      return InvalidArgument(
          fmt::format("{} {} is written twice in one request", p->key.table->name, p->key.key));
    }
    plan.writes.push_back(std::move(p).value());
  }
  for (const v1::Condition& c : req.conditions()) {
    Result<PlannedKey> k = Resolve(c.table(), c.key(), dir);
    if (!k.ok()) return k.status();
    PlannedCondition pc{*k, false, {}};
    switch (c.expect_case()) {
      case v1::Condition::kAbsent:
        if (!c.absent()) {
          return InvalidArgument(
              fmt::format("the condition on {} {} sets absent to false; say equals instead",
                          k->table->name, k->key));
        }
        pc.absent = true;
        break;
      case v1::Condition::kEquals:
        POND_RETURN_IF_ERROR(CheckValueSize(*k, c.equals().size(), "the condition on"));
        pc.equals = Bytes(c.equals());
        break;
      default:
        return InvalidArgument(
            fmt::format("the condition on {} {} expects nothing (set equals or "
                        "absent)",
                        k->table->name, k->key));
    }
    plan.conditions.push_back(std::move(pc));
  }
  POND_RETURN_IF_ERROR(CheckAnswerSize(plan.reads, o));
  return plan;
}

Result<PlannedAdd> PlanAdd(const v1::Add& add, bool read_only,
                           const std::vector<PlannedAdd>& pending, const ServiceDirectory& dir,
                           const ClientServiceOptions& o) {
  const size_t keys = static_cast<size_t>(add.read_only_size()) + add.read_write_size() +
                      add.inserts_size() + add.deletes_size();
  POND_RETURN_IF_ERROR(CheckCount(keys, o, "the add step names"));
  if (read_only && keys != static_cast<size_t>(add.read_only_size())) {
    return InvalidArgument("a read-only transaction may only add read-only keys");
  }
  PlannedAdd plan;
  for (const v1::Key& k : add.read_only()) {
    Result<PlannedKey> p = Resolve(k.table(), k.key(), dir);
    if (!p.ok()) return p.status();
    plan.read_only.push_back(*p);
  }
  for (const v1::Key& k : add.read_write()) {
    Result<PlannedKey> p = Resolve(k.table(), k.key(), dir);
    if (!p.ok()) return p.status();
    plan.read_write.push_back(*p);
  }
  for (const v1::KeyValue& kv : add.inserts()) {
    Result<PlannedWrite> p = PlanWrite(v1::Write::INSERT, kv.table(), kv.key(), kv.value(), dir);
    if (!p.ok()) return p.status();
    plan.inserts.push_back(std::move(p).value());
  }
  for (const v1::Key& k : add.deletes()) {
    Result<PlannedKey> p = Resolve(k.table(), k.key(), dir);
    if (!p.ok()) return p.status();
    plan.deletes.push_back(*p);
  }
  std::vector<PlannedKey> answered;
  auto answers = [&answered](const PlannedAdd& a) {
    answered.insert(answered.end(), a.read_only.begin(), a.read_only.end());
    answered.insert(answered.end(), a.read_write.begin(), a.read_write.end());
  };
  for (const PlannedAdd& a : pending) answers(a);
  answers(plan);
  POND_RETURN_IF_ERROR(CheckAnswerSize(answered, o));
  return plan;
}

Result<std::vector<PlannedWrite>> PlanPuts(const v1::WriteStep& w, const ServiceDirectory& dir,
                                           const ClientServiceOptions& o) {
  POND_RETURN_IF_ERROR(CheckCount(static_cast<size_t>(w.puts_size()), o, "the write step names"));
  std::vector<PlannedWrite> puts;
  for (const v1::KeyValue& kv : w.puts()) {
    Result<PlannedWrite> p = PlanWrite(v1::Write::PUT, kv.table(), kv.key(), kv.value(), dir);
    if (!p.ok()) return p.status();
    puts.push_back(std::move(p).value());
  }
  return puts;
}

Status FillValue(const Result<std::span<const std::byte>>& read, const PlannedKey& k,
                 v1::Value* out) {
  out->set_table(k.table->name);
  out->set_key(k.key);
  if (read.ok()) {
    out->set_found(true);
    out->set_value(reinterpret_cast<const char*>(read->data()), read->size());
    return Status::Ok();
  }
  if (read.status().code() == Code::kNotFound) {
    out->set_found(false);
    return Status::Ok();
  }
  return read.status();
}

}  // namespace pond::server
