// What a serving process serves and how — the workloads it loads with their procedures by name,
// empty tables, and the client service's limits — as flags shared by `pond serve` (an embedded
// cluster) and `pond cn` (one CN of a cluster of processes, which every CN sets up alike).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "pond/bench/kvs_bench.h"
#include "pond/bench/list_append.h"
#include "pond/bench/smallbank.h"
#include "pond/bench/tatp.h"
#include "pond/bench/tpcc.h"
#include "pond/bench/workload.h"
#include "pond/cluster.h"
#include "pond/server/client_service.h"
#include "pond/server/service_directory.h"

namespace pond::tools {

struct ServedFlags {
  std::vector<std::string> workloads;
  std::vector<std::string> tables;  // NAME:VALUE_BYTES:CAPACITY
  bench::SmallBankParams smallbank;
  bench::KvsParams kvs;
  bench::TatpParams tatp;
  bench::TpccParams tpcc;
  bench::ListAppendOptions lists;
  server::ClientServiceOptions service;
};

// --workload, --table, --accounts, --keys, --subscribers, --warehouses, --items, --customers,
// --order-room, --lists and the service's limits.
void AddServedFlags(CLI::App* cmd, ServedFlags* f);

// The workloads and tables the flags name, checked: InvalidArgument with one line.
struct Served {
  std::vector<std::unique_ptr<bench::Workload>> workloads;
  std::vector<TableOptions> tables;
};
Result<std::unique_ptr<Served>> PrepareServed(const ServedFlags& f);

// On the cluster (not serving yet): sets up every workload and table and names them in `dir`.
// Kept alive as long as the cluster serves: the workloads' procedures use them.
Status SetUpServed(Cluster& cluster, Served& served, server::ServiceDirectory* dir);

// Fits c->region_mib to what `served` serves on a cluster of shape `c` (bench/region_size.h):
// with --region-mib not `given`, raises it to what the tables need; given, refuses one below
// what they take, naming --region-mib and a size that fits (InvalidArgument, one line), so that
// a region too small fails before anything starts, not with OutOfSpace half-way through a load.
Status FitRegion(const Served& served, bool given, ClusterConfig* c);

// The same flags as arguments, every value spelt out: what `pond up` passes each `pond cn`.
std::vector<std::string> ServedArgs(const ServedFlags& f);

// "tables a (8 B x 100), b (...); 7 procedure(s)": for a log line.
std::string DescribeServed(const server::ServiceDirectory& dir);

}  // namespace pond::tools
