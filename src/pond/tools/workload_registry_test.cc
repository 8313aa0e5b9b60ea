// The workload registry: each entry makes the workload it names, its flags reach the workload,
// and compare's flags make the one --workload names, resolved against the cluster.
#include "pond/tools/workload_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace pond::tools {
namespace {

// Parses `args` (without the program's name) on `app`. Each app below first gets the one cluster
// flag a workload's flags touch: TPC-C rewrites --region-mib's help.
void Parse(CLI::App& app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  app.parse(args);
}

TEST(WorkloadRegistryTest, EveryEntryMakesTheWorkloadItNames) {
  for (const WorkloadEntry& e : Workloads()) {
    for (bool compare : {false, true}) {
      CLI::App app;
      uint64_t region_mib = 0;
      app.add_option("--region-mib", region_mib);
      std::unique_ptr<WorkloadFlags> flags = e.flags();
      flags->Add(&app, compare);
      Parse(app, {});
      EXPECT_STREQ(flags->Make()->name(), e.name) << "compare " << compare;
    }
    EXPECT_EQ(FindWorkload(e.name), &e);
  }
  EXPECT_EQ(FindWorkload("tpce"), nullptr);
}

TEST(WorkloadRegistryTest, FlagsReachTheWorkload) {
  CLI::App app;
  uint64_t region_mib = 0;
  app.add_option("--region-mib", region_mib);
  std::unique_ptr<WorkloadFlags> flags = FindWorkload("smallbank")->flags();
  flags->Add(&app, /*compare=*/false);
  Parse(app, {"--accounts", "123"});
  EXPECT_EQ(flags->Make()->SettingsJson()["accounts"], 123);
}

TEST(WorkloadRegistryTest, CompareMakesTheNamedWorkloadResolvedAgainstTheCluster) {
  CLI::App app;
  uint64_t region_mib = 0;
  app.add_option("--region-mib", region_mib);
  CompareWorkloadFlags workloads;
  workloads.Add(&app);
  Parse(app, {"--subscribers", "77"});
  ClusterConfig c;
  c.cns = 3;
  EXPECT_EQ(workloads.Make("tatp", app, &c)->SettingsJson()["subscribers"], 77);
  // TPC-C without --warehouses: one per CN.
  EXPECT_EQ(workloads.Make("tpcc", app, &c)->SettingsJson()["warehouses"], 3);
  EXPECT_EQ(workloads.Make("tpce", app, &c), nullptr);
  // The paper workloads first; later ones follow, in the registry's order.
  EXPECT_EQ(CompareWorkloadChoices().rfind("kvs, smallbank, tatp, tpcc", 0), 0u);
}

}  // namespace
}  // namespace pond::tools
