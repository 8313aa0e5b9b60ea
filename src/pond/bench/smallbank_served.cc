// SmallBank as a service and its remote driver (served.h): the six procedures served by name,
// each replying with the net deposit it committed, and a driver that draws the same calls as the
// embedded benchmark, adds up the replies, and does the money check through the client API —
// every balance read before and after the run.
#include <fmt/core.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>

#include "pond/bench/smallbank.h"
#include "pond/server/service_directory.h"

namespace pond::bench {

Status SmallBankWorkload::Serve(Cluster& cluster, server::ServiceDirectory* dir) {
  serving_ = true;
  RunContext& ctx = ServingContext(cluster);
  POND_RETURN_IF_ERROR(Validate(ctx.options()));
  POND_RETURN_IF_ERROR(Setup(cluster, ctx));
  POND_RETURN_IF_ERROR(dir->AddTable({"savings", ts_, 8, p_.accounts}));
  POND_RETURN_IF_ERROR(dir->AddTable({"checking", tc_, 8, p_.accounts}));
  for (int k = 0; k < kSmallBankTxnCount; k++) {
    const auto kind = static_cast<SmallBankTxn>(k);
    const bool ro = kind == SmallBankTxn::kBalance;
    const uint64_t accounts = p_.accounts;
    const uint16_t tc = tc_;
    POND_RETURN_IF_ERROR(dir->AddProcedure(
        {kSmallBankProcedureNames[static_cast<size_t>(k)], procs_[static_cast<size_t>(k)],
         sizeof(SmallBankArgs), ro,
         [kind, ro, accounts, tc](std::span<const std::byte> args) -> Result<RouteHint> {
           SmallBankArgs a;
           std::memcpy(&a, args.data(), sizeof(a));
           POND_RETURN_IF_ERROR(CheckSmallBankArgs(kind, a, accounts));
           // Hybrid routing, as the embedded clients route: on a0's shard.
           return RouteHint{ro ? TxnKind::kReadOnly : TxnKind::kReadWrite, tc, SmallBankKey(a.a0)};
         }}));
  }
  return Status::Ok();
}

namespace {

class SmallBankRemote final : public RemoteDriver {
 public:
  explicit SmallBankRemote(const SmallBankParams& p)
      : p_(p),
        hot_(std::max<uint64_t>(
            1, static_cast<uint64_t>(static_cast<double>(p.accounts) * p.hot_fraction))) {}

  std::string Settings() const override {
    return fmt::format("{} accounts (the server's), {:.0f}% of accesses to {:.1f}% hot",
                       p_.accounts, p_.hot_access * 100, p_.hot_fraction * 100);
  }

  std::vector<std::string> TxnNames() const override {
    return {kSmallBankTxnNames.begin(), kSmallBankTxnNames.end()};
  }

  Status Start(const RemoteStore& store) override {
    Result<int64_t> total = Total(store.read);
    if (!total.ok()) return total.status();
    before_ = *total;
    return Status::Ok();
  }

  RemoteCall Next(Rng& rng, uint64_t client, uint64_t n) override {
    const SmallBankCall c = DrawSmallBankCall(rng, p_, hot_, ((client + 1) << 32) | n);
    RemoteCall call;
    call.kind = static_cast<size_t>(c.kind);
    call.procedure = kSmallBankProcedureNames[call.kind];
    call.args.assign(reinterpret_cast<const char*>(&c.args), sizeof(c.args));
    call.read_write = c.kind != SmallBankTxn::kBalance;
    // Where Serve's route sends it: a0's shard.
    if (call.read_write) call.route_key = SmallBankKey(c.args.a0);
    return call;
  }

  bool Book(const RemoteCall& call, RemoteOutcome outcome, std::string_view reply) override {
    if (outcome == RemoteOutcome::kCommitted) {
      by_txn_[call.kind].fetch_add(1, std::memory_order_relaxed);
      if (reply.size() != kSmallBankReplyBytes) {
        bad_replies_.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
      // Balance answers the account's total, not a net deposit: it deposits nothing.
      if (static_cast<SmallBankTxn>(call.kind) != SmallBankTxn::kBalance) {
        int64_t net;
        std::memcpy(&net, reply.data(), sizeof(net));
        net_.fetch_add(net, std::memory_order_relaxed);
      }
      if (reply[8] != 0) declined_.fetch_add(1, std::memory_order_relaxed);
    } else if (outcome == RemoteOutcome::kUnknown) {
      // It took effect or it did not; if it did, its net is the one its arguments name — or,
      // for a WriteCheck that paid the penalty, one unit more out (only its reply could say).
      SmallBankArgs a;
      std::memcpy(&a, call.args.data(), sizeof(a));
      const auto kind = static_cast<SmallBankTxn>(call.kind);
      std::vector<int64_t> effects = {0};
      if (kind == SmallBankTxn::kDepositChecking || kind == SmallBankTxn::kTransactSavings) {
        effects = {a.amount};
      } else if (kind == SmallBankTxn::kWriteCheck) {
        effects = {-a.amount, -a.amount - 1};
      }
      std::lock_guard lock(mu_);
      in_doubt_.push_back(std::move(effects));
    }
    return true;
  }

  Status Finish(const RemoteStore& store, RunResult* r) override {
    Result<int64_t> after = Total(store.read);
    if (!after.ok()) return after.status();
    const int64_t net = net_.load();
    r->loaded = fmt::format("{} accounts (2 rows each), served", p_.accounts);
    r->declined = declined_.load();
    for (int k = 0; k < kSmallBankTxnCount; k++) {
      r->committed_by_txn.emplace_back(kSmallBankTxnNames[static_cast<size_t>(k)],
                                       by_txn_[static_cast<size_t>(k)].load());
    }
    WorkloadCheck check;
    check.name = check.label = "money check";
    check.json_key = "money_check";
    check.summary = fmt::format(
        "total {} = {} before the run + committed net deposits {}{}", *after, before_, net,
        in_doubt_.empty()
            ? ""
            : fmt::format(" (+ {} of unknown outcome, each taken or not)", in_doubt_.size()));
    check.brief = fmt::format("total {} = before {} + net deposits {}", *after, before_, net);
    if (bad_replies_.load() != 0) {
      check.detail =
          fmt::format("{} committed calls replied without their net deposit", bad_replies_.load());
    } else if (!SmallBankInDoubtExplainsAny(*after - before_ - net, in_doubt_)) {
      check.detail = fmt::format("balances total {}, expected {} before the run + {} committed",
                                 *after, before_, net);
    } else {
      check.ok = true;
    }
    check.json = {{"ok", check.ok},        {"total_before", before_},
                  {"net_deposits", net},   {"in_doubt", in_doubt_.size()},
                  {"final_total", *after}, {"detail", check.detail}};
    r->check = std::move(check);
    return Status::Ok();
  }

 private:
  // Every balance, read in read-only requests of kRemoteReadKeysMax accounts per table.
  Result<int64_t> Total(const RemoteReader& read) const {
    int64_t total = 0;
    for (uint64_t lo = 0; lo < p_.accounts; lo += kRemoteReadKeysMax) {
      std::vector<uint64_t> keys;
      for (uint64_t a = lo; a < std::min(p_.accounts, lo + kRemoteReadKeysMax); a++) {
        keys.push_back(SmallBankKey(a));
      }
      for (const char* table : {"savings", "checking"}) {
        Result<std::vector<std::optional<std::string>>> values = read(table, keys);
        if (!values.ok()) {
          return Internal("the SmallBank balance scan failed: " + values.status().ToString());
        }
        for (size_t i = 0; i < keys.size(); i++) {
          const std::optional<std::string>& v = (*values)[i];
          if (!v || v->size() != sizeof(int64_t)) {
            return Internal(
                fmt::format("the {} row of account {} is missing or malformed", table, lo + i));
          }
          int64_t x;
          std::memcpy(&x, v->data(), sizeof(x));
          total += x;
        }
      }
    }
    return total;
  }

  const SmallBankParams p_;
  const uint64_t hot_;
  int64_t before_ = 0;
  std::array<std::atomic<uint64_t>, kSmallBankTxnCount> by_txn_{};
  std::atomic<int64_t> net_{0};
  std::atomic<uint64_t> declined_{0}, bad_replies_{0};
  std::mutex mu_;
  // Each unknown call's effects if it was taken; guarded by mu_ (read by Finish, after every
  // Book).
  std::vector<std::vector<int64_t>> in_doubt_;
};

}  // namespace

Result<std::unique_ptr<RemoteDriver>> SmallBankWorkload::Remote(
    const std::vector<RemoteTable>& tables) const {
  Result<RemoteTable> savings = FindRemoteTable(tables, "savings", 8);
  if (!savings.ok()) return savings.status();
  Result<RemoteTable> checking = FindRemoteTable(tables, "checking", 8);
  if (!checking.ok()) return checking.status();
  if (savings->capacity != checking->capacity || savings->capacity < 2) {
    return InvalidArgument("the server's savings and checking tables do not hold one account set");
  }
  SmallBankParams p = p_;
  p.accounts = savings->capacity;
  POND_RETURN_IF_ERROR(SmallBankWorkload(p).Validate(RunOptions{}));
  return std::unique_ptr<RemoteDriver>(std::make_unique<SmallBankRemote>(p));
}

}  // namespace pond::bench
