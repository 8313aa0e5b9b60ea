# The workloads, the driver that runs and measures them, and their tests. Included from
# src/pond/CMakeLists.txt: paths are relative to src/pond/. A new workload adds its sources and
# its test here, and its entry to the registry (tools/workload_registry.cc).
add_library(pond_bench STATIC bench/raw_bench.cc bench/kvs_bench.cc bench/list_append.cc
            bench/list_append_plan.cc bench/list_append_served.cc bench/btree_bench.cc
            bench/smallbank.cc bench/smallbank_history.cc bench/smallbank_served.cc bench/tatp.cc
            bench/tpcc.cc bench/tpcc_load.cc bench/tpcc_txns.cc bench/tpcc_check.cc bench/tpcc_served.cc
            bench/measured_run.cc bench/report.cc bench/workload.cc bench/checked_run.cc
            bench/run_faults.cc bench/voter.cc bench/handovers.cc bench/region_size.cc)
target_link_libraries(pond_bench PUBLIC pond_deploy pond_btree pond_check nlohmann_json::nlohmann_json)
pond_internal(pond_bench)

pond_test(bench_test SOURCES bench/list_append_test.cc LIBS pond_bench LABELS stress)
pond_test(list_append_served_test SOURCES bench/list_append_served_test.cc LIBS pond_bench LABELS fast)
pond_test(btree_bench_test SOURCES bench/btree_bench_test.cc LIBS pond_bench LABELS fast)
pond_test(region_size_test SOURCES bench/region_size_test.cc LIBS pond_bench LABELS fast)
pond_test(sim_seed_test SOURCES bench/sim_seed_test.cc LIBS pond_bench LABELS stress)
pond_test(fault_seed_test SOURCES bench/fault_seed_test.cc bench/fault_cn_test.cc
          bench/fault_mn_host_test.cc bench/fault_workload_test.cc bench/fault_seed_common.cc LIBS pond_bench LABELS stress)
pond_test(list_append_fault_test SOURCES bench/list_append_fault_test.cc LIBS pond_bench LABELS stress)
pond_test(smallbank_test SOURCES bench/smallbank_test.cc LIBS pond_bench LABELS concurrent)
pond_test(ucx_run_test SOURCES bench/ucx_run_test.cc LIBS pond_bench LABELS ucx)
pond_test(smallbank_history_test SOURCES bench/smallbank_history_test.cc LIBS pond_bench)
pond_test(tatp_test SOURCES bench/tatp_test.cc LIBS pond_bench LABELS concurrent)
pond_test(tpcc_test SOURCES bench/tpcc_test.cc LIBS pond_bench LABELS concurrent)
pond_test(voter_test SOURCES bench/voter_test.cc LIBS pond_bench LABELS concurrent)
pond_test(handovers_test SOURCES bench/handovers_test.cc LIBS pond_bench LABELS concurrent)
