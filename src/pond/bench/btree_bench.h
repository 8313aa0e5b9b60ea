// The B+Tree benchmark (Sherman §5): one tree in the memory pool, every CN's workers running
// lookups, inserts (a third new keys, two thirds updates of present ones, as Sherman's) and range
// queries in one of Sherman's five mixes, uniform or zipf-skewed, on real threads (`pond bench
// btree`, the local transport) or on the simulated cluster (`pond sim btree`, virtual time, one
// seed per run). `--ablation` turns Sherman's techniques on one at a time, after its Fig. 11:
// each step is a run of its own on the same seed, and the report gives each step's ratio to the
// first.
//
// Keys: the key space is 1.5 x `keys` ranks, rank r being key 1 + (r * kKeyStride) mod space —
// a bijection that spreads the hot ranks of a zipf draw over the tree, as YCSB's hashed keys do —
// and the first `keys` ranks are loaded before the measured run. A range query of `range_size`
// starts at a drawn key and asks for that many entries.
//
// Thread rules: RunBtreeBench is called from one thread; it makes the threads it needs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pond/base/histogram.h"
#include "pond/btree/btree.h"
#include "pond/status.h"
#include "pond/testbed.h"

namespace pond::bench {

// Sherman's Table 3, in percent.
struct BtreeMix {
  const char* name;
  int insert_pct, lookup_pct, range_pct;
};
// write-only, write-intensive, read-intensive, range-only, range-write.
const std::vector<BtreeMix>& BtreeMixes();

struct BtreeBenchOptions {
  std::string mix = "write-intensive";
  uint16_t mns = 2;
  uint16_t cns = 2;
  int workers = 2;  // threads (cores) per CN
  int coros = 8;    // client coroutines per worker
  uint64_t keys = 100'000;
  double theta = 0;  // zipf skew of the key draws; 0: uniform
  uint32_t range_size = 100;
  double seconds = 2;  // measured run: wall seconds, or virtual seconds when simulated
  uint64_t region_mib = 256;
  uint32_t lock_words = 32768;  // per MN: 256 KiB, the size of ConnectX-5's on-chip memory
  // Simulated: the lock words are in the NIC's device memory (SimFabric::MarkDeviceMemory).
  bool device_locks = true;
  btree::TreeOptions tree;
  std::optional<Testbed> sim;  // set: `pond sim btree`
  uint64_t seed = 1;
};

// InvalidArgument naming the flag.
Status ValidateBtreeOptions(const BtreeBenchOptions& o);

// One step of the ablation (Sherman Fig. 11), cumulative: baseline (none of the techniques, lock
// words in host memory), +combine, +on-chip (lock words in device memory), +hierarchical (local
// lock tables and hand-over), +two-level versions (= Sherman).
struct BtreeStep {
  const char* name;
  void (*apply)(BtreeBenchOptions&);
};
const std::vector<BtreeStep>& BtreeAblationSteps();

struct BtreeBenchResult {
  uint64_t ops = 0, inserts = 0, lookups = 0, ranges = 0;
  uint64_t found = 0;          // lookups that found their key
  uint64_t range_entries = 0;  // entries the range queries returned
  double elapsed_s = 0;        // the measured window (virtual when simulated): what ended in it
                               // counts, operations still under way at its end do not
  double wall_s = 0;
  double load_wall_s = 0;
  Histogram latency_ns;
  btree::TreeStats tree;      // summed over workers, measured run only
  uint64_t verb_ops[4] = {};  // READ, WRITE, CAS, FAA posted during the measured run
  uint64_t verb_bytes[4] = {};
  uint64_t handovers = 0, local_waits = 0;
  uint64_t device_atomics = 0;      // simulated: atomics served from device memory
  uint64_t events = 0;              // simulated: engine events of the measured run
  int levels = 0;                   // the tree's height after the run
  uint64_t nodes = 0, entries = 0;  // the tree's nodes (1 KiB each) and entries after the run
};

// Loads the keys, then runs the mix for o.seconds. `progress` (may be empty) is called about
// once a second of measured time with (elapsed s, ops so far).
Result<BtreeBenchResult> RunBtreeBench(const BtreeBenchOptions& o,
                                       const std::function<void(double, uint64_t)>& progress);

}  // namespace pond::bench
