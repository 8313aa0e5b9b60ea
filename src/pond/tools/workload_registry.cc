#include "pond/tools/workload_registry.h"

#include <algorithm>

#include "pond/bench/handovers.h"
#include "pond/bench/kvs_bench.h"
#include "pond/bench/smallbank.h"
#include "pond/bench/tatp.h"
#include "pond/bench/tpcc.h"
#include "pond/bench/tpcc_schema.h"
#include "pond/bench/voter.h"

namespace pond::tools {

namespace {

class KvsFlagSet : public WorkloadFlags {
 public:
  void Add(CLI::App* cmd, bool) override {
    cmd->add_option("--keys", p_.keys, "keys in the table")->capture_default_str();
    cmd->add_option("--rw-ratio", p_.rw_ratio, "fraction of UpdateOne (read-write) transactions")
        ->capture_default_str();
    cmd->add_option("--theta", p_.theta, "zipf skew of keys; 0 = uniform (the papers use 0.99)")
        ->capture_default_str();
  }
  std::unique_ptr<bench::Workload> Make() const override {
    return std::make_unique<bench::KvsWorkload>(p_);
  }

 private:
  bench::KvsParams p_;
};

class SmallBankFlagSet : public WorkloadFlags {
 public:
  void Add(CLI::App* cmd, bool compare) override {
    cmd->add_option(
           "--accounts", p_.accounts,
           compare ? "smallbank: accounts" : "accounts (rows in each of savings and checking)")
        ->capture_default_str();
    cmd->add_option(
           "--hot-fraction", p_.hot_fraction,
           std::string(compare ? "smallbank: " : "") + "share of the accounts in the hot set")
        ->capture_default_str();
    cmd->add_option("--hot-access", p_.hot_access,
                    std::string(compare ? "smallbank: " : "") +
                        "share of the account draws that go to the hot set")
        ->capture_default_str();
    cmd->add_option("--moving-hotspot-ms", p_.moving_hotspot_ms,
                    std::string(compare ? "smallbank: " : "") +
                        "the hot set in as few shards as hold it, on one CN, jumping to other "
                        "shards every this many ms (0: spread over every shard, still)")
        ->capture_default_str();
  }
  std::unique_ptr<bench::Workload> Make() const override {
    return std::make_unique<bench::SmallBankWorkload>(p_);
  }

 private:
  bench::SmallBankParams p_;
};

class TatpFlagSet : public WorkloadFlags {
 public:
  void Add(CLI::App* cmd, bool compare) override {
    cmd->add_option("--subscribers", p_.subscribers,
                    compare ? "tatp: subscribers" : "subscribers (rows of the subscriber table)")
        ->capture_default_str();
  }
  std::unique_ptr<bench::Workload> Make() const override {
    return std::make_unique<bench::TatpWorkload>(p_);
  }

 private:
  bench::TatpParams p_;
};

class TpccFlagSet : public WorkloadFlags {
 public:
  void Add(CLI::App* cmd, bool compare) override;
  // Without --warehouses one warehouse per CN; without --region-mib regions that hold the tables
  // (bench::TpccRegionMib; memory is taken as it is written).
  void Resolve(const CLI::App& cmd, ClusterConfig* c) override;
  std::unique_ptr<bench::Workload> Make() const override {
    return std::make_unique<bench::TpccWorkload>(p_);
  }

 private:
  bench::TpccParams p_;
};

void TpccFlagSet::Add(CLI::App* cmd, bool compare) {
  const std::string prefix = compare ? "tpcc: " : "";
  bench::TpccParams* p = &p_;
  cmd->add_option("--warehouses", p->warehouses,
                  prefix + "warehouses, 1 to 4095 (default: one per CN; the Lotus paper: 105)");
  cmd->add_option("--items", p->items, prefix + "items (the spec: 100000)")->capture_default_str();
  cmd->add_option("--customers", p->customers,
                  prefix + "customers per district, each with one initial order (the spec: 3000)")
      ->capture_default_str();
  cmd->add_option("--order-room", p->order_room,
                  prefix +
                      "orders each district may take during the run: the size of the "
                      "growing tables (default: as many as --customers)");
  cmd->add_option_function<std::vector<int>>(
         "--mix",
         [p](const std::vector<int>& pct) {
           if (pct.size() != p->mix.size()) {
             throw CLI::ValidationError("--mix", "needs 5 percentages, NO,P,OS,D,SL");
           }
           std::copy(pct.begin(), pct.end(), p->mix.begin());
         },
         prefix +
             "percent of New-Order, Payment, Order-Status, Delivery, Stock-Level, summing to 100 "
             "(default: the spec's 45,43,4,4,4)")
      ->delimiter(',');
  cmd->add_flag(
      "--keep-deleted-entries", p->keep_deleted_entries,
      prefix +
          "Deliveries leave their new orders' B+Tree entries in place, as before the tree "
          "cleaned itself: to measure what cleaning saves");
  cmd->add_flag("--keep-empty-leaves", p->keep_empty_leaves,
                prefix +
                    "leaves that Deliveries empty stay in the new_order B+Tree, as before leaves "
                    "merged: to measure what merging saves");
  cmd->get_option("--region-mib")
      ->description(compare ? "MiB of memory per MN (tpcc: at least what its tables need)"
                            : "MiB of memory per MN (default: what the tables need)");
}

void TpccFlagSet::Resolve(const CLI::App& cmd, ClusterConfig* c) {
  if (cmd.count("--warehouses") == 0) p_.warehouses = static_cast<uint32_t>(c->cns);
  if (cmd.count("--region-mib") == 0 && p_.warehouses >= 1 &&
      p_.warehouses <= bench::tpcc::kWarehousesMax) {
    // Enough for the tables under any protocol (ford keeps its records in the index).
    ClusterConfig sv = *c;
    sv.protocol.single_version = true;
    c->region_mib =
        std::max({c->region_mib, bench::TpccRegionMib(p_, *c), bench::TpccRegionMib(p_, sv)});
  }
}

class VoterFlagSet : public WorkloadFlags {
 public:
  void Add(CLI::App* cmd, bool compare) override {
    const std::string prefix = compare ? "voter: " : "";
    cmd->add_option("--voters", p_.voters, prefix + "voters (phone numbers; Zeus: 1 M)")
        ->capture_default_str();
    cmd->add_option("--contestants", p_.contestants, prefix + "contestants (Zeus: 20)")
        ->capture_default_str();
    cmd->add_option("--max-votes", p_.max_votes, prefix + "votes each voter may cast in the run")
        ->capture_default_str();
    cmd->add_option("--leaderboard-pct", p_.leaderboard_pct,
                    prefix + "percent of calls that read every tally (the rest vote)")
        ->capture_default_str();
    cmd->add_option("--hot-share", p_.hot_share,
                    prefix +
                        "share of the votes for contestant 0 (a popular contestant); the "
                        "rest uniform")
        ->capture_default_str();
  }
  std::unique_ptr<bench::Workload> Make() const override {
    return std::make_unique<bench::VoterWorkload>(p_);
  }

 private:
  bench::VoterParams p_;
};

class HandoversFlagSet : public WorkloadFlags {
 public:
  void Add(CLI::App* cmd, bool compare) override {
    const std::string prefix = compare ? "handovers: " : "";
    cmd->add_option("--phones", p_.phones, prefix + "phones (Zeus: 2 M)")->capture_default_str();
    cmd->add_option("--cells", p_.cells, prefix + "base stations (Zeus: 1000 for 2 M phones)")
        ->capture_default_str();
    cmd->add_option("--mobile-share", p_.mobile_share,
                    prefix + "share of the phones that move (Zeus: 0.2)")
        ->capture_default_str();
    cmd->add_option("--handover-pct", p_.handover_pct,
                    prefix + "percent of operations that are handovers (Zeus: 2.5 and 5)")
        ->capture_default_str();
    cmd->add_option("--context-bytes", p_.context_bytes,
                    prefix + "bytes of a phone's context, rewritten by every operation")
        ->capture_default_str();
  }
  std::unique_ptr<bench::Workload> Make() const override {
    return std::make_unique<bench::HandoversWorkload>(p_);
  }

 private:
  bench::HandoversParams p_;
};

template <class F>
std::unique_ptr<WorkloadFlags> New() {
  return std::make_unique<F>();
}

}  // namespace

const std::vector<WorkloadEntry>& Workloads() {
  static const std::vector<WorkloadEntry> entries = {
      {"kvs", nullptr, nullptr, true, 0, New<KvsFlagSet>},
      {"smallbank",
       "SmallBank: six banking transactions with hot-set skew on an embedded cluster, then a "
       "check that no money appeared or vanished",
       "SmallBank (six banking transactions, hot-set skew, money check) on the simulated "
       "cluster (virtual time)",
       true, bench::kSmallBankHistoryTxnsMax, New<SmallBankFlagSet>},
      {"tatp",
       "TATP: seven telecom transactions, 80% read-only, on an embedded cluster, then a "
       "referential check of every row",
       "TATP (seven telecom transactions, 80% read-only, referential check) on the simulated "
       "cluster (virtual time)",
       true, 0, New<TatpFlagSet>},
      {"tpcc",
       "TPC-C: the five transactions in the standard mix on an embedded cluster, then the "
       "consistency conditions 1-4",
       "TPC-C (five transactions, nine tables, range scans, consistency conditions 1-4) on the "
       "simulated cluster (virtual time)",
       true, 0, New<TpccFlagSet>},
      {"voter",
       "Voter: phone votes for contestants under a per-voter limit, and leaderboard reads, on an "
       "embedded cluster, then a check that every vote is counted once",
       "Voter (votes under a per-voter limit, leaderboard reads, vote check) on the simulated "
       "cluster (virtual time)",
       true, 0, New<VoterFlagSet>},
      {"handovers",
       "Handovers: a cellular control plane's service requests, releases and handovers between "
       "base stations on an embedded cluster, then a check that every phone is on one cell",
       "Handovers (service requests, releases, handovers between cells, attachment check) on "
       "the simulated cluster (virtual time)",
       true, 0, New<HandoversFlagSet>},
  };
  return entries;
}

const WorkloadEntry* FindWorkload(std::string_view name) {
  for (const WorkloadEntry& e : Workloads()) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

std::string CompareWorkloadChoices() {
  std::string s;
  for (const WorkloadEntry& e : Workloads()) {
    if (e.in_compare) s += (s.empty() ? "" : ", ") + std::string(e.name);
  }
  return s;
}

void CompareWorkloadFlags::Add(CLI::App* cmd) {
  for (const WorkloadEntry& e : Workloads()) {
    if (!e.in_compare) continue;
    sets_.emplace_back(&e, e.flags());
    sets_.back().second->Add(cmd, /*compare=*/true);
  }
}

std::unique_ptr<bench::Workload> CompareWorkloadFlags::Make(std::string_view name,
                                                            const CLI::App& cmd,
                                                            ClusterConfig* c) const {
  for (const auto& [e, flags] : sets_) {
    if (name != e->name) continue;
    flags->Resolve(cmd, c);
    return flags->Make();
  }
  return nullptr;
}

}  // namespace pond::tools
