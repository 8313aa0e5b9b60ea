// TPC-C under every protocol, on real threads and in the simulator, SR and SI (ford only SR):
// every transaction kind commits and the consistency conditions 1-4 hold after the run. The
// check itself is shown able to fail: rows corrupted through transactions break exactly the
// condition each one should. And the keys and the input draws are what the spec asks.
#include "pond/bench/tpcc.h"

#include <gtest/gtest.h>

#include <string>

#include "pond/bench/test_run.h"
#include "pond/bench/tpcc_check.h"
#include "pond/bench/tpcc_schema.h"
#include "pond/bench/tpcc_txns.h"

namespace pond::bench {
namespace {

using namespace tpcc;  // NOLINT: the schema's names

// Few items and customers, so that a short run reuses rows and collides; four warehouses, so
// that remote lines and payments happen and a warehouse or two has one terminal. Stock-Level
// reads most of a warehouse's stock, and under FORD it aborts on any stock row a New-Order holds
// locked: with every warehouse shared by three terminals it committed 3 in 500 tries on a slow
// (ThreadSanitizer) run, and sometimes none.
TpccParams SmallParams() {
  return {.warehouses = 4, .items = 200, .customers = 30, .order_room = 200};
}

// The small test cluster, with room for five ordered tables: each takes a few MiB of tree space
// on every MN however small it is.
RunOptions TestRun(const std::string& protocol, Isolation iso, bool simulate, double seconds) {
  RunOptions o = SmallTestRun(protocol, iso, simulate, seconds);
  o.cluster.region_mib = 256;
  // Bounded however fast the machine is (ThreadSanitizer, or not): 3000 calls place about 70 orders
  // a district, well within the room the tables are sized for.
  o.calls_max = 3000;
  return o;
}

uint64_t Committed(const RunResult& r, TpccTxn t) {
  return r.committed_by_txn.at(static_cast<size_t>(t)).second;
}

void RunAndCheck(const std::string& protocol, Isolation iso, bool simulate) {
  SCOPED_TRACE(protocol + " " + IsolationName(iso) + (simulate ? " sim" : " local"));
  TpccWorkload w(SmallParams());
  Result<RunResult> r = ValidateAndRun(w, TestRun(protocol, iso, simulate, simulate ? 0.02 : 5));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->check.has_value());
  EXPECT_TRUE(r->check->ok) << r->check->detail;
  for (int k = 0; k < kTpccTxnCount; k++) {
    EXPECT_GT(Committed(*r, static_cast<TpccTxn>(k)), 0u)
        << kTpccTxnNames[static_cast<size_t>(k)] << ": " << r->check->json["by_txn"].dump()
        << ", gave up " << r->check->json["gave_up"] << ", " << r->committed << " committed in "
        << r->elapsed_s << " s";
  }
  ASSERT_TRUE(r->headline.has_value());
  EXPECT_EQ(r->headline->committed, Committed(*r, TpccTxn::kNewOrder));
  // Every New-Order and Payment is read-write, Order-Status and Stock-Level are not.
  EXPECT_EQ(r->committed_rw, Committed(*r, TpccTxn::kNewOrder) + Committed(*r, TpccTxn::kPayment) +
                                 Committed(*r, TpccTxn::kDelivery));
  const nlohmann::json& j = r->check->json;
  // The orders placed during the run are all there: the load's plus every committed New-Order.
  EXPECT_EQ(j["orders"].get<uint64_t>(),
            uint64_t{SmallParams().warehouses} * kDistrictsPerWarehouse * 30 +
                Committed(*r, TpccTxn::kNewOrder));
  EXPECT_GT(j["by_last_name"].get<uint64_t>(), 0u);
}

class TpccTest : public testing::TestWithParam<std::string> {};
// SI runs: the protocols that have snapshots (ford is single-version and refuses SI).
class TpccTestSnapshot : public testing::TestWithParam<std::string> {};

TEST_P(TpccTest, ConsistentOnThreadsSerializable) {
  RunAndCheck(GetParam(), Isolation::kSerializable, false);
}
TEST_P(TpccTestSnapshot, ConsistentOnThreadsSnapshot) {
  RunAndCheck(GetParam(), Isolation::kSnapshot, false);
}
TEST_P(TpccTest, ConsistentSimulatedSerializable) {
  RunAndCheck(GetParam(), Isolation::kSerializable, true);
}
TEST_P(TpccTestSnapshot, ConsistentSimulatedSnapshot) {
  RunAndCheck(GetParam(), Isolation::kSnapshot, true);
}

INSTANTIATE_TEST_SUITE_P(Protocols, TpccTest, testing::ValuesIn(ProtocolNames()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });
INSTANTIATE_TEST_SUITE_P(Protocols, TpccTestSnapshot, testing::ValuesIn(SnapshotProtocolNames()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

// The check must be able to fail: each corruption below, written through a transaction, breaks
// one condition in one place, and the check names exactly that.
TEST(TpccCheckTest, CorruptedRowsFailTheirCondition) {
  const TpccParams p{.warehouses = 4, .items = 50, .customers = 20, .order_room = 10};
  RunOptions o = TestRun("lotus", Isolation::kSerializable, /*simulate=*/true, 0.001);
  auto cluster = Cluster::StartSimulated(o.cluster, *o.sim);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  TpccWorkload w(p);
  RunContext ctx(o, nullptr);
  Status setup = w.Setup(**cluster, ctx);
  ASSERT_TRUE(setup.ok()) << setup.ToString();
  const TpccTables& t = w.tables();
  const uint32_t undelivered_first = p.customers - TpccNewOrdersAtLoad(p) + 1;
  {
    const TpccCheckResult clean = CheckTpccConsistency(**cluster, t, p.warehouses, 1);
    ASSERT_TRUE(clean.ok()) << clean.Detail();
    EXPECT_EQ(clean.conditions[0].checked, 4u);
    EXPECT_EQ(clean.conditions[3].checked, 40u);
  }
  Status corrupted;
  (*cluster)->Run(1, [&](Session& s) -> Task<void> {
    if (s.cn() != 0 || s.worker() != 0) co_return;
    corrupted = co_await s.RunTxn(TxnKind::kReadWrite, [&](Txn& tx) -> Task<Status> {
      // 1: one cent more in a district of warehouse 1 than its warehouse knows of.
      tx.AddRW(t.district, DistrictKey(1, 3));
      // 2: a district of warehouse 2 whose next order id skips one.
      tx.AddRW(t.district, DistrictKey(2, 5));
      // 3: a gap in warehouse 3's new orders (not the first or last, so max and min stay).
      tx.Delete(t.new_order, NewOrderKey(3, 7, undelivered_first + 1));
      // 4: an order line of warehouse 4 gone.
      tx.Delete(t.order_line, OrderLineKey(4, 1, 2, 1));
      POND_CO_RETURN_IF_ERROR(co_await tx.Execute());
      DistrictRow d13 = Decode<DistrictRow>(*tx.Read(t.district, DistrictKey(1, 3)));
      d13.ytd += 1;
      POND_CO_RETURN_IF_ERROR(tx.Write(t.district, DistrictKey(1, 3), Bytes(d13)));
      DistrictRow d25 = Decode<DistrictRow>(*tx.Read(t.district, DistrictKey(2, 5)));
      d25.next_o_id += 1;
      co_return tx.Write(t.district, DistrictKey(2, 5), Bytes(d25));
    });
  });
  ASSERT_TRUE(corrupted.ok()) << corrupted.ToString();
  const TpccCheckResult r = CheckTpccConsistency(**cluster, t, p.warehouses, 2);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.read_error.empty()) << r.read_error;
  for (const TpccCondition& c : r.conditions) EXPECT_EQ(c.failed, 1u) << c.clause;
  EXPECT_NE(r.conditions[0].first_failure.find("warehouse 1:"), std::string::npos)
      << r.conditions[0].first_failure;
  EXPECT_NE(r.conditions[1].first_failure.find("warehouse 2 district 5"), std::string::npos)
      << r.conditions[1].first_failure;
  EXPECT_NE(r.conditions[2].first_failure.find("warehouse 3 district 7"), std::string::npos)
      << r.conditions[2].first_failure;
  EXPECT_NE(r.conditions[3].first_failure.find("warehouse 4 district 1"), std::string::npos)
      << r.conditions[3].first_failure;
  const WorkloadCheck wc = TpccWorkloadCheck(r);
  EXPECT_FALSE(wc.ok);
  EXPECT_NE(wc.detail.find("3.3.2.1"), std::string::npos) << wc.detail;
  EXPECT_NE(wc.summary.find("3.3.2.4 FAILED x1"), std::string::npos) << wc.summary;
}

TEST(TpccKeyTest, WarehousesSpreadOverCnsAndRangesAreContiguous) {
  // The shard is the warehouse reversed: consecutive warehouses fall in distant shard ranges.
  EXPECT_EQ(Shard(1), 2048u);
  EXPECT_EQ(Shard(3), 3072u);
  for (uint32_t w : {1u, 2u, 77u, 4095u}) {
    EXPECT_EQ(WarehouseOf(StockKey(w, 99)), w);
    EXPECT_EQ(OrderLineKey(w, 10, kOrderIdsMax - 1, 15) & 0xfff, Shard(w));
  }
  // A district's new orders, orders and lines lie inside its range, ascending by order id.
  EXPECT_LT(NewOrderKey(5, 3, 1), NewOrderKey(5, 3, 2));
  EXPECT_GE(NewOrderKey(5, 3, 1), DistrictLow(5, 3, kOrderIdBits));
  EXPECT_LT(NewOrderKey(5, 3, kOrderIdsMax - 1), DistrictHigh(5, 3, kOrderIdBits));
  EXPECT_LT(OrderLineKey(5, 3, 9, 15), OrderLineKey(5, 3, 10, 1));
  EXPECT_LT(OrderLineKey(5, 3, kOrderIdsMax - 1, 15), DistrictHigh(5, 3, kOrderLineStripeBits));
  // One customer's orders, one last name's customers: contiguous and ordered.
  EXPECT_LT(OrderByCustomerKey(5, 3, 7, kOrderIdsMax - 1), OrderByCustomerKey(5, 3, 8, 0));
  EXPECT_LT(CustomerNameKey(5, 3, 999, 4095), CustomerNameKey(5, 4, 0, 0));
  EXPECT_EQ(CustomerIdOfNameKey(CustomerNameKey(5, 3, 123, 456)), 456u);
  EXPECT_EQ(OrderIdOf(OrderByCustomerKey(5, 3, 7, 1234)), 1234u);
  // Ordered keys with a critical field are below 2^60.
  EXPECT_LT(OrderByCustomerKey(4095, 10, 4095, kOrderIdsMax - 1), uint64_t{1} << 60);
}

// The draws follow the spec's rates (clauses 2.4.1, 2.5.1): 1% of lines remote, 1% of
// New-Orders rolled back, 15% of Payments remote, 60% by last name.
TEST(TpccDrawTest, RatesAreTheSpecs) {
  TpccEnv e;
  e.p = {.warehouses = 5, .items = 1000, .customers = 300};
  e.nu = {.c_last_load = 10, .c_last = 90, .c_id = 17, .i_id = 33};
  Rng rng(42);
  uint64_t lines = 0, remote_lines = 0, rollbacks = 0, payments_remote = 0, by_name = 0;
  constexpr int kN = 100'000;
  for (int i = 0; i < kN; i++) {
    TpccArgs no = DrawTpccArgs(rng, e, TpccTxn::kNewOrder, 2, 4, 1);
    ASSERT_GE(no.ol_cnt, kOrderLinesMin);
    ASSERT_LE(no.ol_cnt, kOrderLinesMax);
    ASSERT_GE(no.c_id, 1u);
    ASSERT_LE(no.c_id, e.p.customers);
    for (uint32_t l = 0; l < no.ol_cnt; l++) {
      lines++;
      remote_lines += no.lines[l].supply_w != 2 ? 1 : 0;
      ASSERT_GE(no.lines[l].supply_w, 1);
      ASSERT_LE(no.lines[l].supply_w, 5);
    }
    rollbacks += no.lines[no.ol_cnt - 1].i_id > e.p.items ? 1 : 0;
    TpccArgs pay = DrawTpccArgs(rng, e, TpccTxn::kPayment, 2, 4, 1);
    payments_remote += pay.c_w != 2 ? 1 : 0;
    by_name += pay.c_id == 0 ? 1 : 0;
    ASSERT_LT(pay.last, 300);
    ASSERT_GE(pay.amount, 100);
    ASSERT_LE(pay.amount, 500'000);
    TpccArgs sl = DrawTpccArgs(rng, e, TpccTxn::kStockLevel, 2, 4, 1);
    ASSERT_EQ(sl.d, 4);
  }
  EXPECT_NEAR(static_cast<double>(remote_lines) / static_cast<double>(lines), 0.01, 0.002);
  EXPECT_NEAR(static_cast<double>(rollbacks) / kN, 0.01, 0.002);
  EXPECT_NEAR(static_cast<double>(payments_remote) / kN, 0.15, 0.01);
  EXPECT_NEAR(static_cast<double>(by_name) / kN, 0.60, 0.01);
  EXPECT_EQ(ScaledNuRandA(1023, 3000, 3000), 1023u);
  EXPECT_EQ(ScaledNuRandA(1023, 3000, 300), 63u);
}

TEST(TpccValidateTest, BadSettingsNameTheirFlag) {
  const RunOptions o = TestRun("lotus", Isolation::kSerializable, false, 1);
  auto message = [&o](TpccParams p) { return TpccWorkload(p).Validate(o).message(); };
  EXPECT_NE(message({.warehouses = 0}).find("--warehouses"), std::string::npos);
  EXPECT_NE(message({.warehouses = 4096}).find("--warehouses"), std::string::npos);
  EXPECT_NE(message({.items = 0}).find("--items"), std::string::npos);
  EXPECT_NE(message({.customers = 5000}).find("--customers"), std::string::npos);
  EXPECT_NE(message({.order_room = 1 << 24}).find("--order-room"), std::string::npos);
  EXPECT_TRUE(TpccWorkload(SmallParams()).Validate(o).ok());
}

// A served call's input comes from the network: every field out of range is refused with
// InvalidArgument before the procedure runs, and every input a terminal draws passes.
TEST(TpccArgsTest, ServedInputsAreCheckedFieldByField) {
  TpccEnv env;
  env.p = SmallParams();
  Rng rng(5);
  auto bytes = [](const TpccArgs& a) {
    std::span<const std::byte> b = TpccArgsBytes(a);
    return std::vector<std::byte>(b.begin(), b.end());
  };
  for (int k = 0; k < kTpccTxnCount; k++) {
    const auto kind = static_cast<TpccTxn>(k);
    for (int n = 0; n < 200; n++) {
      const TpccArgs a = DrawTpccArgs(rng, env, kind, 1 + n % 2, 1 + n % 10, n);
      const Status st = CheckTpccArgs(kind, bytes(a), env.p);
      ASSERT_TRUE(st.ok()) << kTpccTxnNames[static_cast<size_t>(k)] << ": " << st.ToString();
    }
  }
  const TpccArgs no = DrawTpccArgs(rng, env, TpccTxn::kNewOrder, 1, 1, 1);
  const TpccArgs pay = DrawTpccArgs(rng, env, TpccTxn::kPayment, 1, 1, 2);
  struct Bad {
    const char* what;
    TpccTxn kind;
    TpccArgs a;
  };
  std::vector<Bad> bad;
  auto add = [&](const char* what, TpccTxn kind, TpccArgs a, auto&& change) {
    change(a);
    bad.push_back({what, kind, a});
  };
  add("warehouse 0", TpccTxn::kNewOrder, no, [](TpccArgs& a) { a.w = 0; });
  add("warehouse beyond", TpccTxn::kNewOrder, no, [&](TpccArgs& a) { a.w = env.p.warehouses + 1; });
  add("district 11", TpccTxn::kNewOrder, no, [](TpccArgs& a) { a.d = 11; });
  add("another kind", TpccTxn::kPayment, no, [](TpccArgs&) {});
  add("4 lines", TpccTxn::kNewOrder, no, [](TpccArgs& a) { a.ol_cnt = 4; });
  add("customer 0", TpccTxn::kNewOrder, no, [](TpccArgs& a) { a.c_id = 0; });
  add("item beyond", TpccTxn::kNewOrder, no, [](TpccArgs& a) { a.lines[0].i_id = 202; });
  add("supplier 0", TpccTxn::kNewOrder, no, [](TpccArgs& a) { a.lines[1].supply_w = 0; });
  add("quantity 11", TpccTxn::kNewOrder, no, [](TpccArgs& a) { a.lines[2].quantity = 11; });
  add("amount 0", TpccTxn::kPayment, pay, [](TpccArgs& a) { a.amount = 0; });
  add("customer beyond", TpccTxn::kPayment, pay, [](TpccArgs& a) { a.c_id = 31; });
  add("last name beyond", TpccTxn::kPayment, pay, [](TpccArgs& a) {
    a.c_id = 0;
    a.last = 30;
  });
  add("customer's warehouse 0", TpccTxn::kPayment, pay, [](TpccArgs& a) { a.c_w = 0; });
  add("tag of 49 bits", TpccTxn::kPayment, pay, [](TpccArgs& a) { a.tag = uint64_t{1} << 48; });
  TpccArgs del = DrawTpccArgs(rng, env, TpccTxn::kDelivery, 1, 1, 3);
  add("carrier 0", TpccTxn::kDelivery, del, [](TpccArgs& a) { a.carrier = 0; });
  TpccArgs sl = DrawTpccArgs(rng, env, TpccTxn::kStockLevel, 1, 1, 4);
  add("threshold 21", TpccTxn::kStockLevel, sl, [](TpccArgs& a) { a.threshold = 21; });
  for (const Bad& b : bad) {
    const Status st = CheckTpccArgs(b.kind, bytes(b.a), env.p);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << b.what << ": " << st.ToString();
  }
  // Sizes: short of the header, and a New-Order whose lines do not match its count.
  std::vector<std::byte> b = bytes(no);
  EXPECT_EQ(CheckTpccArgs(TpccTxn::kNewOrder, std::span(b).first(20), env.p).code(),
            Code::kInvalidArgument);
  b.push_back(std::byte{0});
  EXPECT_EQ(CheckTpccArgs(TpccTxn::kNewOrder, b, env.p).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace pond::bench
