// How much of each MN's region a set of tables needs, so that `pond serve`, `pond up` and the
// runs can size the region themselves when --region-mib is not given, and refuse one too small
// before anything starts, instead of failing with OutOfSpace half-way through a load.
//
// The sizes follow the region's layout (store/catalog.cc, store/layout.h): each table's hash
// index — R replica groups of buckets at a load factor of 0.6 — and, for an ordered table, its
// tree, all in the general heap (a quarter of the region; three quarters under FORD), and the
// records, one per version, in the rest.
#pragma once

#include <cstdint>
#include <span>

#include "pond/cluster.h"

namespace pond::bench {

// A table as a workload creates it, and the rows its load and its clients put in it.
struct TableNeed {
  TableOptions options;
  uint64_t rows = 0;
};

struct RegionNeed {
  // What the tables take, with nothing to spare: a region below this cannot hold them.
  uint64_t least_mib = 0;
  // What to give them: a tenth more, 64 MiB for what is not a table, rounded up to 256 MiB.
  uint64_t mib = 0;
};

RegionNeed RegionNeedFor(std::span<const TableNeed> tables, const ClusterConfig& c);

}  // namespace pond::bench
