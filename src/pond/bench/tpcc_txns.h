// TPC-C's five transactions as Pond procedures, and how a terminal draws their inputs (clause
// 2.4–2.8). Internal to the workload (tpcc.cc registers them); each procedure runs one attempt
// of one transaction on the session it is given and returns:
//   OK           committed;
//   kAborted     aborted (a conflict): the terminal retries the same input;
//   kNotFound    New-Order only: rolled back on its unused item (clause 2.4.2.3), nothing written;
//   anything else a broken invariant seen in flight (a missing row, an order whose lines do not
//                all show in one snapshot): the run fails with it.
//
// Thread rules: the procedures run on any worker; what they share (TpccEnv) is fixed after Setup
// except the counters, which are atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "pond/bench/tpcc.h"
#include "pond/bench/tpcc_schema.h"

namespace pond::bench {

// One New-Order line's input: the item, its supplying warehouse and the quantity.
struct TpccLine {
  uint32_t i_id = 0;
  uint16_t supply_w = 0;
  uint8_t quantity = 0;
  uint8_t pad = 0;
};
static_assert(sizeof(TpccLine) == 8);

// Every transaction's input, as it travels to the procedure: the header, then `ol_cnt` lines
// (New-Order only; the others send the header alone). Host byte order: caller and callee are
// one build.
struct TpccArgs {
  uint64_t tag = 0;    // unique per input (client + 1) << 32 | call: a Payment's history key
  int64_t amount = 0;  // Payment: cents
  uint32_t c_id = 0;   // New-Order, Payment, Order-Status: the customer; 0 = by last name
  uint16_t w = 0;      // the terminal's warehouse
  uint16_t d = 0;      // the district (Stock-Level: the terminal's own)
  uint16_t c_w = 0;    // Payment: the customer's warehouse and district
  uint16_t c_d = 0;
  uint16_t last = 0;      // by last name: the name's number
  uint8_t kind = 0;       // TpccTxn
  uint8_t ol_cnt = 0;     // New-Order: lines
  uint8_t carrier = 0;    // Delivery: 1..10
  uint8_t threshold = 0;  // Stock-Level: 10..20
  uint8_t pad[2] = {};
  TpccLine lines[tpcc::kOrderLinesMax];
};
inline constexpr size_t kTpccArgsHeaderBytes = offsetof(TpccArgs, lines);
static_assert(kTpccArgsHeaderBytes == 36 && sizeof(TpccArgs) == 160);

// The bytes of `a` a call sends.
inline std::span<const std::byte> TpccArgsBytes(const TpccArgs& a) {
  return std::as_bytes(std::span(&a, 1)).first(kTpccArgsHeaderBytes + sizeof(TpccLine) * a.ol_cnt);
}

// What the procedures share.
struct TpccEnv {
  TpccTables t;
  TpccParams p;
  TpccNuRand nu;
  const RunContext* ctx = nullptr;
  std::vector<TpccCounters>* counters = nullptr;
};

// NURand(A, x, y) with constant C (clause 2.1.6).
inline uint32_t NuRand(Rng& rng, uint32_t a, uint32_t x, uint32_t y, uint32_t c) {
  const uint64_t r = rng.Uniform(uint64_t{a} + 1) | (x + rng.Uniform(uint64_t{y} - x + 1));
  return static_cast<uint32_t>((r + c) % (uint64_t{y} - x + 1) + x);
}
// NURand's A for a population scaled from the spec's `spec_n` (where A is `spec_a`) down to n:
// the same share of the population, as a power of two minus one.
uint32_t ScaledNuRandA(uint32_t spec_a, uint32_t spec_n, uint32_t n);
// How many of the 1000 last names a district's customers use.
inline uint32_t TpccLastNames(const TpccParams& p) {
  return p.customers < tpcc::kLastNames ? p.customers : tpcc::kLastNames;
}

// A terminal's next input of `kind` for home warehouse w and district d.
TpccArgs DrawTpccArgs(Rng& rng, const TpccEnv& e, TpccTxn kind, uint32_t w, uint32_t d,
                      uint64_t tag);

// Whether `args` are a well-formed input of `kind` for a database of scale `p` (a served call's,
// from the network): InvalidArgument naming the first field out of range.
Status CheckTpccArgs(TpccTxn kind, std::span<const std::byte> args, const TpccParams& p);

Task<Status> TpccNewOrder(Session& s, TpccEnv& e, const TpccArgs& a);
Task<Status> TpccPayment(Session& s, TpccEnv& e, const TpccArgs& a);
Task<Status> TpccOrderStatus(Session& s, TpccEnv& e, const TpccArgs& a);
Task<Status> TpccDelivery(Session& s, TpccEnv& e, const TpccArgs& a);
Task<Status> TpccStockLevel(Session& s, TpccEnv& e, const TpccArgs& a);

}  // namespace pond::bench
