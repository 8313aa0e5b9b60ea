// The list-append workload (Elle's): every value is a list of unique elements; transactions read
// lists and append to them, and every one is recorded in a history that `pond check` judges.
// Because each append adds a unique element and reads return whole lists, the checker can
// recover each key's version order from the data and find any isolation anomaly.
//
// Keys are used a bounded number of times: a key takes at most `max_appends` elements, after
// which the window of active keys slides on (as Elle's generator retires keys), so contention
// stays high — zipf(theta) over `window` active keys — while values stay small.
//
// `write_skew` mode is the classic write-skew pattern instead: read both keys of a pair, append
// to one. Snapshot isolation lets two such transactions commit; serializability does not.
#pragma once

#include <cstdint>

#include "pond/check/recorder.h"
#include "pond/cluster.h"

namespace pond::bench {

struct ListAppendOptions {
  uint64_t keys = 20000;  // preloaded keys; the window must not run past them
  uint32_t window = 100;  // active keys (pairs in write-skew mode)
  double theta = 0.99;
  uint32_t max_appends = 32;  // elements a key holds
  uint32_t txns_per_client = 1000;
  double read_only_fraction = 0.25;
  uint32_t mops_max = 4;  // micro-ops per transaction: 1 to mops_max
  bool write_skew = false;
  uint64_t seed = 1;
};

struct ListAppendResult {
  uint64_t committed = 0;
  uint64_t failed = 0;
  uint64_t window_end = 0;  // the highest key the window reached
};

// Creates the table (named "lists") and loads `keys` empty lists; returns the table id.
Result<uint16_t> SetupListAppend(Cluster& cluster, const ListAppendOptions& o);
// Runs `clients` clients per worker until each has run txns_per_client transactions.
Result<ListAppendResult> RunListAppend(Cluster& cluster, uint16_t table, const ListAppendOptions& o,
                                       check::Recorder& recorder, int clients);

}  // namespace pond::bench
