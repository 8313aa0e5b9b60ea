#include "pond/bench/list_append_plan.h"

#include <cstddef>
#include <cstring>
#include <string>

#include "pond/base/assert.h"
#include "pond/bench/list_append.h"

namespace pond::bench {

Result<std::vector<uint64_t>> DecodeList(std::span<const std::byte> v) {
  uint64_t n = 0;
  if (v.size() >= 8) std::memcpy(&n, v.data(), 8);
  if (v.size() < 8 || n > (v.size() - 8) / 8) {
    return Corruption("a row of the lists table holds no list (a count of " + std::to_string(n) +
                      " in " + std::to_string(v.size()) + " bytes)");
  }
  std::vector<uint64_t> out(n);
  if (n > 0) std::memcpy(out.data(), v.data() + 8, n * 8);
  return out;
}

void EncodeList(const std::vector<uint64_t>& list, std::vector<std::byte>* v) {
  uint64_t n = list.size();
  POND_CHECK(8 + n * 8 <= v->size());
  std::fill(v->begin(), v->end(), std::byte{0});
  std::memcpy(v->data(), &n, 8);
  if (n > 0) std::memcpy(v->data() + 8, list.data(), n * 8);
}

namespace {

// One plan in one transaction. Every step Executes what it added (a no-op when nothing new was
// added), so a plan of k steps calls Execute at least k times, each time with keys chosen from
// what the steps before it read.
class Runner {
 public:
  Runner(Txn& t, uint16_t table, uint32_t max_appends, PlanLog* log)
      : t_(t), table_(table), max_(max_appends), log_(log), value_(8 * (1 + max_appends)) {}

  Task<Status> Run(const Plan& plan) {
    if (plan.upfront) {
      for (const PlanMop& m : plan.mops) {
        if (plan.read_only || m.kind == PlanMop::kRead || plan.promote) {
          t_.AddRO(table_, LiveRow(m.key));
        } else {
          t_.AddRW(table_, LiveRow(m.key));
        }
      }
      if (Status s = co_await t_.Execute(); !s.ok()) co_return s;
    }
    for (const PlanMop& m : plan.mops) {
      Status s;
      switch (m.kind) {
        case PlanMop::kRead:
          s = co_await LogRead(m.key);
          break;
        case PlanMop::kAppend:
          s = co_await Append(m);
          break;
        case PlanMop::kDelete:
          s = co_await Delete(m);
          break;
      }
      if (!s.ok()) co_return s;
    }
    co_return Status::Ok();
  }

 private:
  // L's list as this transaction sees it. Adds the live row (read-write if `write`) and, only if
  // that row is absent, the graveyard row: a key computed from what was read.
  Task<Status> ReadList(uint64_t key, bool write, std::vector<uint64_t>* list, bool* live) {
    const uint64_t row = LiveRow(key);
    if (write) {
      t_.AddRW(table_, row);
    } else {
      t_.AddRO(table_, row);
    }
    if (Status s = co_await t_.Execute(); !s.ok()) co_return s;
    Result<std::span<const std::byte>> v = t_.Read(table_, row);
    if (v.ok()) {
      Result<std::vector<uint64_t>> l = DecodeList(*v);
      if (!l.ok()) co_return l.status();
      *list = std::move(*l);
      *live = true;
      co_return Status::Ok();
    }
    POND_CHECK_MSG(v.status().code() == Code::kNotFound, v.status().ToString().c_str());
    *live = false;
    t_.AddRO(table_, GraveRow(key));
    if (Status s = co_await t_.Execute(); !s.ok()) co_return s;
    Result<std::span<const std::byte>> g = t_.Read(table_, GraveRow(key));
    if (g.ok()) {
      Result<std::vector<uint64_t>> l = DecodeList(*g);
      if (!l.ok()) co_return l.status();
      *list = std::move(*l);
    } else {
      POND_CHECK_MSG(g.status().code() == Code::kNotFound, g.status().ToString().c_str());
      list->clear();
    }
    co_return Status::Ok();
  }

  // A step that cannot append gives the transaction up: skipping it would make what a
  // committed plan appended depend on what it read (list_append_plan.h).
  static Status Full(uint64_t key) {
    return Aborted("list " + std::to_string(key) + " is full: the plan gives up");
  }

  Task<Status> LogRead(uint64_t key) {
    std::vector<uint64_t> list;
    bool live = false;
    if (Status s = co_await ReadList(key, false, &list, &live); !s.ok()) co_return s;
    Logged(key, list);
    co_return Status::Ok();
  }

  void Logged(uint64_t key, const std::vector<uint64_t>& list) {
    if (list.size() >= max_) log_->full.push_back(key);
    log_->mops.push_back(LoggedMop{.append = false, .key = key, .element = 0, .list = list});
  }

  // Sets `row` to `list`: a Write if the row exists in this transaction's view, else an Insert
  // (which needs an Execute for its locks, and fails if another transaction inserted it first).
  Task<Status> Put(uint64_t row, const std::vector<uint64_t>& list, bool exists) {
    EncodeList(list, &value_);
    if (exists) {
      Status w = t_.Write(table_, row, value_);
      POND_CHECK_MSG(w.ok(), w.ToString().c_str());
      co_return Status::Ok();
    }
    t_.Insert(table_, row, value_);
    co_return co_await t_.Execute();
  }

  // Sets `row` to `list`, whether or not it exists: added read-write, then written or inserted.
  Task<Status> PutRow(uint64_t row, const std::vector<uint64_t>& list) {
    t_.AddRW(table_, row);
    if (Status s = co_await t_.Execute(); !s.ok()) co_return s;
    co_return co_await Put(row, list, t_.Read(table_, row).ok());
  }

  Task<Status> Append(const PlanMop& m) {
    std::vector<uint64_t> list;
    bool live = false;
    if (Status s = co_await ReadList(m.key, true, &list, &live); !s.ok()) co_return s;
    Logged(m.key, list);
    if (list.size() >= max_) co_return Full(m.key);
    list.push_back(m.element);
    if (!live) {
      // Re-creating the live row writes the graveyard row too. Under SI, conflicts are between
      // writes of one row, so every transaction that changes a key must write a row all the
      // others write: with the live row absent, that is the graveyard row (a delete writes it as
      // well; one that deletes a row it inserted itself writes nothing else).
      if (Status s = co_await PutRow(GraveRow(m.key), list); !s.ok()) co_return s;
    }
    if (Status s = co_await Put(LiveRow(m.key), list, live); !s.ok()) co_return s;
    log_->mops.push_back(LoggedMop{.append = true, .key = m.key, .element = m.element, .list = {}});
    co_return co_await LogRead(m.key);  // read-your-writes
  }

  Task<Status> Delete(const PlanMop& m) {
    std::vector<uint64_t> list;
    bool live = false;
    if (Status s = co_await ReadList(m.key, true, &list, &live); !s.ok()) co_return s;
    Logged(m.key, list);
    if (list.size() >= max_) co_return Full(m.key);
    list.push_back(m.element);
    if (Status s = co_await PutRow(GraveRow(m.key), list); !s.ok()) co_return s;
    // Of an absent live row too: its absence is then guarded until the commit.
    t_.Delete(table_, LiveRow(m.key));
    if (Status s = co_await t_.Execute(); !s.ok()) co_return s;
    log_->mops.push_back(LoggedMop{.append = true, .key = m.key, .element = m.element, .list = {}});
    co_return co_await LogRead(m.key);  // the live row must now read as absent
  }

  Txn& t_;
  const uint16_t table_;
  const uint32_t max_;
  PlanLog* log_;
  std::vector<std::byte> value_;
};

// Wire form of a routed call's arguments (in-process only: it carries a pointer).
struct CallHead {
  uint32_t magic;
  uint16_t mops;
  uint8_t read_only, upfront, promote, reserved[3];
  uint64_t log;  // PlanLog*
};
struct CallMop {
  uint64_t key, element;
  uint8_t kind, reserved[7];
};
constexpr uint32_t kCallMagic = 0x504c414e;  // "PLAN"
// docs/formats.md "Served list-append": clients in other languages build these bytes.
static_assert(sizeof(CallHead) == 24 && offsetof(CallHead, log) == 16);
static_assert(sizeof(CallMop) == 24 && offsetof(CallMop, kind) == 16);

}  // namespace

Task<Status> RunPlan(Txn& t, uint16_t table, uint32_t max_appends, const Plan& plan, PlanLog* log) {
  Runner r(t, table, max_appends, log);
  co_return co_await r.Run(plan);
}

std::vector<std::pair<uint64_t, uint64_t>> PlanAppends(const Plan& plan) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const PlanMop& m : plan.mops) {
    if (m.kind != PlanMop::kRead) out.emplace_back(m.key, m.element);
  }
  return out;
}

std::vector<std::byte> EncodeCall(const Plan& plan, PlanLog* log) {
  std::vector<std::byte> out(sizeof(CallHead) + plan.mops.size() * sizeof(CallMop));
  CallHead h{kCallMagic,
             static_cast<uint16_t>(plan.mops.size()),
             plan.read_only,
             plan.upfront,
             plan.promote,
             {0, 0, 0},
             reinterpret_cast<uint64_t>(log)};
  std::memcpy(out.data(), &h, sizeof(h));
  for (size_t i = 0; i < plan.mops.size(); i++) {
    CallMop m{plan.mops[i].key, plan.mops[i].element, plan.mops[i].kind, {}};
    std::memcpy(out.data() + sizeof(h) + i * sizeof(m), &m, sizeof(m));
  }
  return out;
}

namespace {

Status DecodeHead(std::span<const std::byte> bytes, CallHead* head) {
  CallHead& h = *head;
  if (bytes.size() < sizeof(h)) return InvalidArgument("plan call too short");
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.magic != kCallMagic || bytes.size() != sizeof(h) + h.mops * sizeof(CallMop)) {
    return InvalidArgument("not a plan call");
  }
  return Status::Ok();
}

}  // namespace

Status DecodeCall(std::span<const std::byte> bytes, Plan* plan, PlanLog** log) {
  CallHead h;
  POND_RETURN_IF_ERROR(DecodeHead(bytes, &h));
  plan->read_only = h.read_only != 0;
  plan->upfront = h.upfront != 0;
  plan->promote = h.promote != 0;
  plan->mops.resize(h.mops);
  for (size_t i = 0; i < h.mops; i++) {
    CallMop m;
    std::memcpy(&m, bytes.data() + sizeof(h) + i * sizeof(m), sizeof(m));
    if (m.kind > PlanMop::kDelete) return InvalidArgument("plan call with a bad step");
    plan->mops[i] = PlanMop{static_cast<PlanMop::Kind>(m.kind), m.key, m.element};
  }
  *log = reinterpret_cast<PlanLog*>(h.log);
  return Status::Ok();
}

Plan DrawPlan(Rng& rng, const Zipf& zipf, uint64_t base, const ListAppendOptions& o,
              std::atomic<uint64_t>* next_element) {
  Plan p;
  p.read_only = rng.Chance(o.read_only_fraction);
  p.upfront = rng.Chance(o.upfront_fraction);
  p.promote = p.upfront && rng.Chance(o.promote_fraction);
  uint32_t count = 1 + static_cast<uint32_t>(rng.Uniform(o.mops_max));
  for (uint32_t i = 0; i < count; i++) {
    PlanMop m;
    m.key = base + zipf.Next(rng);
    if (!p.read_only && rng.Chance(0.5)) {
      m.kind = rng.Chance(o.delete_fraction) ? PlanMop::kDelete : PlanMop::kAppend;
      m.element = next_element->fetch_add(1);
    }
    p.mops.push_back(m);
  }
  return p;
}

std::vector<std::byte> EncodePlan(const Plan& plan) { return EncodeCall(plan, nullptr); }

Status DecodePlan(std::span<const std::byte> bytes, Plan* plan) {
  CallHead h;
  POND_RETURN_IF_ERROR(DecodeHead(bytes, &h));
  if (h.log != 0) return InvalidArgument("a served plan carries no log pointer");
  if (h.mops < 1 || h.mops > kPlanMopsMax) {
    return InvalidArgument("a plan has 1 to " + std::to_string(kPlanMopsMax) + " steps");
  }
  PlanLog* unused = nullptr;
  return DecodeCall(bytes, plan, &unused);
}

namespace {

// The reply's grammar (docs/formats.md): u32 mops, u32 full; per mop: u8 append, 7 reserved,
// u64 key, u64 element, u64 list length, that many u64 elements; then `full` u64 keys.
void PutU64(std::vector<std::byte>* out, uint64_t v) {
  const size_t at = out->size();
  out->resize(at + 8);
  std::memcpy(out->data() + at, &v, 8);
}

struct LogReader {
  std::span<const std::byte> in;
  bool Get(uint64_t* v) {
    if (in.size() < 8) return false;
    std::memcpy(v, in.data(), 8);
    in = in.subspan(8);
    return true;
  }
};

}  // namespace

std::vector<std::byte> EncodeLog(const PlanLog& log) {
  std::vector<std::byte> out;
  PutU64(&out, log.mops.size() | (uint64_t{log.full.size()} << 32));
  for (const LoggedMop& m : log.mops) {
    PutU64(&out, m.append ? 1 : 0);
    PutU64(&out, m.key);
    PutU64(&out, m.element);
    PutU64(&out, m.list.size());
    for (uint64_t e : m.list) PutU64(&out, e);
  }
  for (uint64_t k : log.full) PutU64(&out, k);
  return out;
}

Status DecodeLog(std::span<const std::byte> bytes, PlanLog* log) {
  LogReader r{bytes};
  uint64_t counts = 0;
  const Status bad = InvalidArgument("not a plan's log");
  if (!r.Get(&counts)) return bad;
  const uint64_t mops = counts & 0xffffffff, full = counts >> 32;
  // Every mop takes 32 bytes at least, every full key 8: counts past that are not a log.
  if (mops > r.in.size() / 32 || full > r.in.size() / 8) return bad;
  log->mops.clear();
  log->full.clear();
  for (uint64_t i = 0; i < mops; i++) {
    LoggedMop m;
    uint64_t append = 0, n = 0;
    if (!r.Get(&append) || append > 1 || !r.Get(&m.key) || !r.Get(&m.element) || !r.Get(&n) ||
        n > r.in.size() / 8) {
      return bad;
    }
    m.append = append == 1;
    m.list.resize(n);
    for (uint64_t& e : m.list) r.Get(&e);
    log->mops.push_back(std::move(m));
  }
  for (uint64_t i = 0; i < full; i++) {
    uint64_t k = 0;
    if (!r.Get(&k)) return bad;
    log->full.push_back(k);
  }
  if (!r.in.empty()) return bad;
  return Status::Ok();
}

}  // namespace pond::bench
