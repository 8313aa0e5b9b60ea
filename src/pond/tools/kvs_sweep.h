// KvsSweep: `--sweep` of `pond bench|sim kvs|smallbank|tatp|compare` — one or more numeric
// settings, each over a list of values, run as the cartesian product of the lists (first key
// outermost), one fresh cluster per point. Grammar (commas separate tokens; a token with '=' starts
// a key, one without adds a value to the current key; a value is a number or an integer range
// A..B):
//
//   coros=1..6                 6 points
//   coros=1,2,4,threads=1..2   6 points: (1,1) (1,2) (2,1) (2,2) (4,1) (4,2)
//
// Keys: coros, workers (alias threads), cns, rw-ratio, theta. Every point must validate before
// anything runs; at most kSweepPointsMax points.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "pond/bench/workload.h"
#include "pond/status.h"

namespace pond::tools {

inline constexpr size_t kSweepPointsMax = 256;

struct SweepAxis {
  std::string name;      // as typed ("threads"), for the table's header
  std::string key;       // canonical ("workers")
  bool integer = false;  // every value is an integer (coros, workers, cns)
  std::vector<double> values;
};

struct KvsSweep {
  std::vector<SweepAxis> axes;  // empty: no sweep

  size_t PointCount() const;
  // The value of every axis at point i (0 <= i < PointCount()), the last axis varying fastest.
  std::vector<double> Point(size_t i) const;
  // "coros=4 threads=2": point i, for tables and messages.
  std::string PointName(size_t i) const;
  // {"coros": 4, "threads": 2}: point i for JSON results (integers where the key is one).
  nlohmann::json PointJson(size_t i) const;
  // Applies point i: the cluster's keys (coros, workers, cns) to *run, the rest to *w
  // (Workload::Set; its error if it has no such setting).
  Status Apply(size_t i, bench::RunOptions* run, bench::Workload* w) const;
  // OK if every key means something for `w`: rw-ratio and theta shape only the KVS workload's
  // mix and keys; else InvalidArgument naming the key.
  Status CheckWorkload(const bench::Workload& w) const;
};

// Parses a --sweep spec; InvalidArgument with a one-line reason that names the bad token.
Result<KvsSweep> ParseKvsSweep(std::string_view spec);

}  // namespace pond::tools
