// After a run with faults: do the replicas agree, is nothing left half-committed, and is every
// commit a client heard of still there? (docs/recovery.md "Checks after a faulty run".)
//
// Reads the memory pool directly (the run is over; nothing else touches it) and walks every slot
// of every table on every replica of every replica group:
//   - replicas agree: a live slot has the same key and meta on every replica, and a lookup finds
//     it on each (no bucket of its probe path has a free slot there); each version cell
//     the same validity, commit timestamp, writer tag and cacheline version, and a record at the
//     same lane-relative offset holding the same bytes (MVCC tables); a single-version slot the
//     same bytes apart from its lock word;
//   - nothing half-committed: no cell is INVISIBLE, and no lock word is held;
//   - no lost commit: for every write a client was told committed, with timestamp T, every
//     replica's newest version of the key has a timestamp >= T;
//   - ordered tables' B+Trees (tree_copy_check.cc): every readable copy of a range holds the same
//     bytes for every node a reader can reach and for the header's cursor and root, and no tree
//     lock word is held — but for a dead holder's, whose line may differ until the word is taken.
// Replicas on MNs the placement holds down are gone and not compared; a replica group with none
// left up is a problem of its own (lost_groups).
//
// Thread rules: a pure function of memory that nothing writes while it runs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pond/store/catalog.h"
#include "pond/store/placement.h"

namespace pond::cluster {

// A write acknowledged as committed: the key of `table` has a version with `commit_ts` (a
// single-version table: the slot's version is at least that).
struct AckedWrite {
  uint16_t table = 0;
  uint64_t key = 0;
  uint64_t commit_ts = 0;
};

struct ReplicaReport {
  uint64_t slots = 0;     // live slots compared (each over all its replicas)
  uint64_t versions = 0;  // visible versions compared
  uint64_t acked = 0;     // acknowledged writes looked for
  uint64_t disagreements = 0;
  uint64_t invisible = 0;             // cells left INVISIBLE
  uint64_t locked = 0;                // lock words left held
  uint64_t lost_commits = 0;          // acknowledged writes not found
  uint64_t lost_groups = 0;           // slots with every replica down
  uint64_t tree_nodes = 0;            // B+Tree nodes compared (each over all its copies)
  std::vector<std::string> problems;  // the first few, one line each
  bool ok() const {
    return disagreements == 0 && invisible == 0 && locked == 0 && lost_commits == 0 &&
           lost_groups == 0;
  }
};

// `holder_gone(word)`: whether an MN lock word holding `word` is free, its holder a failed CN
// incarnation whose log was recovered (store::GoneHolders); nullptr: none is.
ReplicaReport CheckReplicas(const store::Catalog& catalog, const store::Placement& placement,
                            const std::function<const std::byte*(MnId)>& region,
                            const std::vector<AckedWrite>& acked,
                            const std::function<bool(uint64_t)>& holder_gone = nullptr);

// Counts a problem in *counter and keeps its line among the report's first few.
void AddProblem(ReplicaReport& r, uint64_t* counter, std::string what);

// The B+Tree part, which CheckReplicas runs too: adds to `r`.
void CheckTreeCopies(const store::Catalog& catalog, const store::Placement& placement,
                     const std::function<const std::byte*(MnId)>& region,
                     const std::function<bool(uint64_t)>& holder_gone, ReplicaReport& r);

}  // namespace pond::cluster
