// `pond bench tpcc` and `pond sim tpcc`: TPC-C (bench/tpcc.h) on real threads or on the simulated
// cluster, then the consistency conditions 1-4. Exit 0 if they hold, 1 (with one line on stderr)
// if one does not, 2 on bad input. The simulated form prints only what the seed determines on
// stdout, except one last wall-clock line; progress goes to stderr.
#include <algorithm>
#include <memory>
#include <string>

#include "pond/bench/tpcc.h"
#include "pond/bench/tpcc_schema.h"
#include "pond/tools/command.h"
#include "pond/tools/compare.h"
#include "pond/tools/connect_bench.h"
#include "pond/tools/kvs_flags.h"
#include "pond/tools/run_command.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

// TPC-C's flags; ResolveTpccFlags: the defaults that depend on the cluster.
void AddTpccFlags(CLI::App* cmd, bench::TpccParams* p, const std::string& prefix);
void ResolveTpccFlags(const CLI::App& cmd, ClusterConfig* c, bench::TpccParams* p);

namespace {

struct TpccArgs {
  bench::RunOptions run;
  bench::TpccParams p;
  std::string isolation = "sr";
  std::string model = "cx3";
  std::string protocol = "lotus";
  std::string json_path;
  std::string sweep;     // KvsSweep grammar: run through RunCompare with this protocol as its row
  std::string faults;    // --faults (simulated)
  ConnectFlags connect;  // --connect (real threads)
};

int RunTpccCommand(TpccArgs& a, const CLI::App& cmd, bool simulate) {
  const char* what = simulate ? "sim tpcc" : "bench tpcc";
  if (Status c = CheckConnectFlags(cmd, a.connect); !c.ok()) return Fail(what, c.message());
  if (!a.connect.address.empty()) {
    return RunConnected(what, bench::TpccWorkload(a.p), a.connect, a.run.seconds,
                        a.run.cluster.seed, a.json_path);
  }
  ResolveTpccFlags(cmd, &a.run.cluster, &a.p);
  if (!a.sweep.empty() && !a.faults.empty()) {
    return Fail(what, "--faults applies to one run; not with --sweep");
  }
  if (!a.sweep.empty()) {
    // Through `compare`, with this command's protocol as the only row.
    CompareArgs c = SingleProtocolSweep(std::make_unique<bench::TpccWorkload>(a.p), a.run,
                                        a.isolation, a.model, a.protocol, a.sweep, a.json_path);
    return RunCompare(c, simulate);
  }
  bench::RunOptions& o = a.run;
  Status resolved = ResolveRunFlags(&o, a.isolation, a.model, a.protocol, simulate);
  if (resolved.ok()) resolved = ResolveFaults(&o, a.faults);
  if (!resolved.ok()) return Fail(what, resolved.message());
  bench::TpccWorkload w(a.p);
  return RunOnce(what, w, o, a.json_path, "");
}

}  // namespace

void AddTpccFlags(CLI::App* cmd, bench::TpccParams* p, const std::string& prefix) {
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
}

void ResolveTpccFlags(const CLI::App& cmd, ClusterConfig* c, bench::TpccParams* p) {
  if (cmd.count("--warehouses") == 0) p->warehouses = static_cast<uint32_t>(c->cns);
  if (cmd.count("--region-mib") == 0 && p->warehouses >= 1 &&
      p->warehouses <= bench::tpcc::kWarehousesMax) {
    // Enough for the tables under any protocol (ford keeps its records in the index).
    ClusterConfig sv = *c;
    sv.protocol.single_version = true;
    c->region_mib =
        std::max({c->region_mib, bench::TpccRegionMib(*p, *c), bench::TpccRegionMib(*p, sv)});
  }
}

void AddTpccCommand(CLI::App& parent, CommandAction* action, bool simulate) {
  auto a = std::make_shared<TpccArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "tpcc", simulate ? "TPC-C (five transactions, nine tables, range scans, consistency "
                         "conditions 1-4) on the simulated cluster (virtual time)"
                       : "TPC-C: the five transactions in the standard mix on an embedded "
                         "cluster, then the consistency conditions 1-4");
  AddClusterFlags(cmd, &a->run.cluster, &a->run.coros, &a->run.seconds, &a->isolation, &a->model,
                  simulate);
  AddTpccFlags(cmd, &a->p, "");
  cmd->get_option("--region-mib")
      ->description("MiB of memory per MN (default: what the tables need)");
  cmd->add_option("--protocol", a->protocol, "transaction protocol: " + ProtocolChoices())
      ->capture_default_str();
  if (simulate) AddFaultsFlag(cmd, &a->faults, &a->run.allow_unplayed_faults);
  if (!simulate) AddConnectFlags(cmd, &a->connect);
  AddOltpSweepFlag(cmd, &a->sweep);
  cmd->add_option("--json", a->json_path, "also write the results as JSON to this file");
  cmd->callback([a, action, cmd, simulate] {
    *action = [a, cmd, simulate] { return RunTpccCommand(*a, *cmd, simulate); };
  });
}

}  // namespace pond::tools
