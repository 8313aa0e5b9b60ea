// Ordered tables and Txn::Scan under every protocol: known answers (order, limits, both
// directions, a transaction's own inserts and deletes, shards, misuse), and a history that
// exposes a phantom to the isolation checker — which a scan without its stripe rows fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "pond/check/checker.h"
#include "pond/check/history.h"
#include "pond/check/recorder.h"
#include "pond/cluster.h"
#include "pond/txn/ordered.h"
#include "pond/txn/test_cluster.h"

namespace pond {
namespace {

using testing_cluster::AsU64;
using testing_cluster::Config;
using testing_cluster::RunOn;
using testing_cluster::U64Value;

std::vector<uint64_t> KeysOf(const std::vector<ScanRow>& rows) {
  std::vector<uint64_t> keys;
  for (const ScanRow& r : rows) keys.push_back(r.key);
  return keys;
}

// The keys a scan found; none (and a failure) if it failed.
std::vector<uint64_t> KeysOf(const Result<std::vector<ScanRow>>& rows) {
  if (!rows.ok()) {
    ADD_FAILURE() << rows.status().ToString();
    return {};
  }
  return KeysOf(*rows);
}

class OrderedTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OrderedTest, KnownAnswers) {
  auto c = Cluster::Start(Config(GetParam())).value();
  uint16_t t = *c->CreateTable(
      {.name = "o", .value_bytes = 16, .capacity = 1000, .ordered = true, .stripe_bits = 4});
  uint16_t plain = *c->CreateTable({.name = "p", .value_bytes = 16, .capacity = 100});
  // Keys 10, 20, ..., 1000, each holding itself.
  ASSERT_TRUE(c->Load(t, 100, [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
                 *key = (i + 1) * 10;
                 std::memcpy(v.data(), key, 8);
               }).ok());
  RunOn(*c, 0, [&](Session& s) -> Task<void> {
    Txn a = s.Begin(TxnKind::kReadWrite);
    a.Insert(t, 15, U64Value(15));
    a.Delete(t, 20);
    auto rows = co_await a.Scan(t, 1, 41, 10);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    if (!rows.ok()) co_return;
    EXPECT_EQ(KeysOf(*rows), (std::vector<uint64_t>{10, 15, 30, 40}))
        << "a scan sees its own transaction's insert and delete";
    EXPECT_EQ(AsU64((*rows)[1].value), 15u);
    EXPECT_EQ(AsU64(*a.Read(t, 30)), 30u) << "scanned keys are read-only keys of the transaction";
    Status cs = co_await a.Commit();
    EXPECT_TRUE(cs.ok()) << cs.ToString();
  });
  RunOn(*c, 1, [&](Session& s) -> Task<void> {
    Txn b = s.Begin(TxnKind::kReadWrite);
    auto up = co_await b.Scan(t, 1, 100, 3);
    EXPECT_EQ(KeysOf(up), (std::vector<uint64_t>{10, 15, 30}));
    auto down = co_await b.Scan(t, 1, 100, 2, ScanOrder::kDescending);
    EXPECT_EQ(KeysOf(down), (std::vector<uint64_t>{90, 80}));
    auto all = co_await b.Scan(t, 1, 2000, 1000);
    EXPECT_EQ(KeysOf(all).size(), 100u) << "one inserted, one deleted";
    auto none = co_await b.Scan(t, 1001, 5000, 10);
    EXPECT_TRUE(none.ok() && none->empty());
    EXPECT_TRUE((co_await b.Commit()).ok());

    Txn r = s.Begin(TxnKind::kReadOnly);
    auto snap = co_await r.Scan(t, 990, 2000, 10);
    EXPECT_EQ(KeysOf(snap), (std::vector<uint64_t>{990, 1000}));
    EXPECT_TRUE((co_await r.Commit()).ok());
  });
  // Misuse aborts with InvalidArgument.
  RunOn(*c, 2, [&](Session& s) -> Task<void> {
    Txn m1 = s.Begin(TxnKind::kReadWrite);
    EXPECT_EQ((co_await m1.Scan(plain, 1, 10, 1)).status().code(), Code::kInvalidArgument);
    Txn m2 = s.Begin(TxnKind::kReadWrite);
    EXPECT_EQ((co_await m2.Scan(t, 10, 10, 1)).status().code(), Code::kInvalidArgument);
    Txn m3 = s.Begin(TxnKind::kReadWrite);
    m3.Insert(t, 0, U64Value(0));
    EXPECT_EQ((co_await m3.Execute()).code(), Code::kInvalidArgument);
  });
}

TEST_P(OrderedTest, CriticalFieldOrdersByShardFirst) {
  auto c = Cluster::Start(Config(GetParam())).value();
  uint16_t t = *c->CreateTable({.name = "o",
                                .value_bytes = 16,
                                .capacity = 1000,
                                .critical_field = true,
                                .ordered = true,
                                .stripe_bits = 2});
  auto key = [](uint64_t high, uint64_t shard) { return (high << 12) | shard; };
  RunOn(*c, 0, [&](Session& s) -> Task<void> {
    Txn a = s.Begin(TxnKind::kReadWrite);
    for (uint64_t shard : {1, 2, 3}) {
      for (uint64_t high : {7, 0, 3, 100}) a.Insert(t, key(high, shard), U64Value(high));
    }
    Status e = co_await a.Execute();
    EXPECT_TRUE(e.ok()) << e.ToString();
    EXPECT_TRUE((co_await a.Commit()).ok());
    Txn b = s.Begin(TxnKind::kReadWrite);
    auto rows = co_await b.Scan(t, key(0, 2), key(50, 2), 10);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    if (rows.ok()) {
      EXPECT_EQ(KeysOf(*rows), (std::vector<uint64_t>{key(0, 2), key(3, 2), key(7, 2)}));
    }
    auto last = co_await b.Scan(t, key(0, 3), key(1000, 3), 1, ScanOrder::kDescending);
    EXPECT_EQ(KeysOf(last), (std::vector<uint64_t>{key(100, 3)}));
    EXPECT_TRUE((co_await b.Commit()).ok());
    Txn m = s.Begin(TxnKind::kReadWrite);
    EXPECT_EQ((co_await m.Scan(t, key(0, 1), key(5, 2), 10)).status().code(),
              Code::kInvalidArgument)
        << "a range across shards";
  });
}

TEST_P(OrderedTest, AScanConflictsWithAnInsertIntoItsRange) {
  // Under SR a scanner and an inserter into its range cannot both commit when they overlap.
  auto c = Cluster::Start(Config(GetParam())).value();
  uint16_t t = *c->CreateTable(
      {.name = "o", .value_bytes = 16, .capacity = 1000, .ordered = true, .stripe_bits = 8});
  RunOn(*c, 0, [&](Session& s) -> Task<void> {
    Txn scan = s.Begin(TxnKind::kReadWrite);
    auto rows = co_await scan.Scan(t, 1, 200, 10);
    EXPECT_TRUE(rows.ok() && rows->empty());
    Txn ins = s.Begin(TxnKind::kReadWrite);
    ins.Insert(t, 50, U64Value(50));
    Status ie = co_await ins.Execute();
    Status ic = ie;
    if (ie.ok()) ic = co_await ins.Commit();  // (not ?: — GCC 12 and co_await)
    Status sc = co_await scan.Commit();
    EXPECT_FALSE(ic.ok() && sc.ok()) << "both the scanner and the phantom's inserter committed";
  });
}

// Two ordered tables alike but for the cleaning: "c" cleans, "k" keeps deleted entries.
std::pair<uint16_t, uint16_t> CleanAndKeptTables(Cluster& c) {
  TableOptions o{
      .name = "c", .value_bytes = 16, .capacity = 1000, .ordered = true, .stripe_bits = 4};
  const uint16_t clean = *c.CreateTable(o);
  o.name = "k";
  o.keep_deleted_entries = true;
  return {clean, *c.CreateTable(o)};
}

TEST_P(OrderedTest, ACommittedDeleteTakesItsEntryOutOfTheTree) {
  // 200 keys, 190 of them deleted: a scan of the range then finds the 10 left in the tree and
  // reads those rows alone; a table that keeps deleted entries finds all 200 and reads every
  // row again. (Both walk the same leaves: emptied leaves stay until merges exist.)
  auto c = Cluster::Start(Config(GetParam())).value();
  const auto [clean, kept] = CleanAndKeptTables(*c);
  auto absent_found = [&](uint16_t t) {
    const uint64_t before = c->Stats().scan_entries_absent;
    std::vector<uint64_t> keys;
    RunOn(*c, 0, [&](Session& s) -> Task<void> {
      Txn x = s.Begin(TxnKind::kReadWrite);
      keys = KeysOf(co_await x.Scan(t, 1, 100'000, 1000));
      EXPECT_TRUE((co_await x.Commit()).ok());
    });
    EXPECT_EQ(keys.size(), 10u);
    return c->Stats().scan_entries_absent - before;
  };
  for (uint16_t t : {clean, kept}) {
    RunOn(*c, 0, [&](Session& s) -> Task<void> {
      for (uint64_t k = 1; k <= 200; k++) {
        Txn a = s.Begin(TxnKind::kReadWrite);
        a.Insert(t, k * 7, U64Value(k));
        EXPECT_TRUE((co_await a.Execute()).ok());
        EXPECT_TRUE((co_await a.Commit()).ok());
      }
      for (uint64_t k = 1; k <= 200; k++) {
        if (k % 20 == 0) continue;
        Txn d = s.Begin(TxnKind::kReadWrite);
        d.Delete(t, k * 7);
        EXPECT_TRUE((co_await d.Execute()).ok());
        EXPECT_TRUE((co_await d.Commit()).ok());
      }
    });
  }
  const uint64_t removed = c->Stats().tree_entries_removed;
  EXPECT_EQ(removed, 190u) << "the kept table's deletes removed entries too";
  EXPECT_EQ(absent_found(clean), 0u);
  EXPECT_EQ(absent_found(kept), 190u);
}

void ExpectSnapshotScansSeeKeysCleanedAfterTheirSnapshot(const std::string& protocol) {
  SCOPED_TRACE(protocol);
  auto c = Cluster::Start(Config(protocol, Isolation::kSnapshot)).value();
  const uint16_t plain = *c->CreateTable({.name = "p", .value_bytes = 16, .capacity = 100});
  const auto [clean, kept] = CleanAndKeptTables(*c);
  ASSERT_TRUE(
      c->Load(plain, 1, [](uint64_t, uint64_t* key, std::span<std::byte>) { *key = 1; }).ok());
  for (uint16_t t : {clean, kept}) {
    ASSERT_TRUE(c->Load(t, 3, [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
                   *key = (i + 1) * 10;
                   std::memcpy(v.data(), key, 8);
                 }).ok());
  }
  RunOn(*c, 0, [&](Session& s) -> Task<void> {
    for (uint16_t t : {clean, kept}) {
      for (TxnKind kind : {TxnKind::kReadOnly, TxnKind::kReadWrite}) {
        Txn old = s.Begin(kind);
        // Two keys: one alone would be read at its newest, with no snapshot yet (latest_reads).
        old.AddRO(plain, 1);
        old.AddRO(plain, 2);
        EXPECT_TRUE((co_await old.Execute()).ok());  // its snapshot is taken
        Txn del = s.Begin(TxnKind::kReadWrite);
        del.Delete(t, 20);
        EXPECT_TRUE((co_await del.Execute()).ok());
        EXPECT_TRUE((co_await del.Commit()).ok());
        {
          // A commit answered early (pond) takes the key out of the tree after the answer: a
          // transaction of the session that reads the key waits for that (Session::Begin).
          Txn after = s.Begin(TxnKind::kReadOnly);
          after.AddRO(t, 20);
          EXPECT_TRUE((co_await after.Execute()).ok());
        }
        auto rows = co_await old.Scan(t, 1, 100, 10);
        if (t == kept) {
          EXPECT_EQ(KeysOf(rows), (std::vector<uint64_t>{10, 20, 30}));
        } else {
          EXPECT_EQ(rows.status().code(), Code::kAborted) << "the cleaned leaf was trusted";
        }
        old.Abort();
        // Put it back for the next round.
        Txn ins = s.Begin(TxnKind::kReadWrite);
        ins.Insert(t, 20, U64Value(20));
        EXPECT_TRUE((co_await ins.Execute()).ok());
        EXPECT_TRUE((co_await ins.Commit()).ok());
      }
    }
  });
  EXPECT_GT(c->Stats().aborts.snapshot_too_old, 0u);
}

TEST(OrderedSnapshotTest, ASnapshotScanNeverMissesAKeyCleanedAfterItsSnapshot) {
  // A snapshot older than a delete must see the deleted key: its scan either finds it (the entry
  // is still there) or aborts as too old (the delete took the entry out, stamping the leaf).
  // The multi-version protocols; ford has no snapshots.
  for (const std::string& protocol : SnapshotProtocolNames()) {
    ExpectSnapshotScansSeeKeysCleanedAfterTheirSnapshot(protocol);
  }
}

INSTANTIATE_TEST_SUITE_P(All, OrderedTest, ::testing::ValuesIn(ProtocolNames()),
                         [](const auto& info) { return info.param; });

// ---- The phantom history ----------------------------------------------------------------------
//
// Ranges r = 0, 1, ... of an ordered table; per range a counter row C_r and a row Y_r in a plain
// table. An inserter into range r reads Y_r, takes sequence number C_r + 1, inserts a fresh key
// with it and writes C_r: recorded as a read of Y_r and an append of the key to list R_r. A scanner
// scans range r — recorded as a read of R_r, the keys in sequence order — then adds one to Y_r: an
// append to Y_r. A phantom (the scan misses an insert that is ordered before it) closes a cycle
// scanner -rw(R_r)-> inserter -rw(Y_r)-> scanner, which the checker reports.

constexpr uint64_t kRangeBits = 32;
uint64_t RangeLow(uint64_t r) { return (r << kRangeBits) + 1; }
uint64_t RangeHigh(uint64_t r) { return (r + 1) << kRangeBits; }
uint64_t CounterKey(uint64_t r) { return 2 * r; }
uint64_t YKey(uint64_t r) { return 2 * r + 1; }
// Keys of the recorded history.
uint64_t HistR(uint64_t r) { return 100 + r; }
uint64_t HistY(uint64_t r) { return 200 + r; }

struct PhantomRun {
  bool valid = false;
  uint64_t committed_scans = 0, committed_inserts = 0;
  uint64_t info = 0;  // outcomes unknown: a CN failed under them
  FailoverStats failover;
  std::string summary;
};

// The recorders of transactions in progress, outside their clients' frames: a client whose CN
// crashes never resumes, and its transaction (which recovery may have committed) is recorded as
// info when the run ends. An info scanner's append to Y_r is a count (y + 1), not an element
// unique over the run: if a committed transaction appended the same count, the info one cannot
// have committed without a lost update, so the only reading under which the history may hold
// is that it did not — and it is left out (the existential reading an info outcome gets).
class OpenTxns {
 public:
  check::TxnRecorder& Open(uint64_t* id, check::TxnRecorder h) {
    std::lock_guard<std::mutex> l(mu_);
    *id = next_++;
    return open_.emplace(*id, Txn{std::move(h)}).first->second.h;
  }
  void NoteCountAppend(uint64_t id, uint64_t key, uint64_t count) {
    std::lock_guard<std::mutex> l(mu_);
    open_.at(id).count_append = {key, count};
  }
  void Committed(uint64_t id, uint64_t time_ns) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = open_.find(id);
    if (it->second.count_append.first != 0) committed_counts_.insert(it->second.count_append);
    it->second.h.Finish(check::Outcome::kOk, time_ns);
    open_.erase(it);
  }
  void Unknown(uint64_t id, uint64_t time_ns) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = open_.find(id);
    it->second.end_ns = time_ns;
    info_.push_back(std::move(it->second));
    open_.erase(it);
  }
  // Forgets an aborted transaction: it did nothing.
  void Aborted(uint64_t id) {
    std::lock_guard<std::mutex> l(mu_);
    open_.erase(id);
  }
  // Every transaction still open is info too; records the info ones. How many.
  uint64_t CloseAll(uint64_t time_ns) {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [id, t] : open_) {
      t.end_ns = time_ns;
      info_.push_back(std::move(t));
    }
    open_.clear();
    for (Txn& t : info_) {
      if (committed_counts_.count(t.count_append) == 0) t.h.Finish(check::Outcome::kInfo, t.end_ns);
    }
    const uint64_t n = info_.size();
    info_.clear();
    return n;
  }

 private:
  struct Txn {
    check::TxnRecorder h;
    std::pair<uint64_t, uint64_t> count_append{0, 0};  // (history key, count); key 0: none
    uint64_t end_ns = 0;
  };
  std::mutex mu_;
  uint64_t next_ = 0;
  std::map<uint64_t, Txn> open_;
  std::vector<Txn> info_;
  std::set<std::pair<uint64_t, uint64_t>> committed_counts_;
};

// Each kind of transaction must commit more often than this in a run: the liveness half of every
// phantom test.
constexpr uint64_t kMinCommits = 20;

// `ranges` ranges, `clients` clients a worker, `calls` transactions in all (committed or not);
// `faults` (simulated clusters) are scheduled once the tables are loaded. On real threads the
// interleaving, and with it the abort rate, depends on the machine's load: a run that has not yet
// committed kMinCommits of each kind goes on, up to 4 * calls, so that a slow machine does not
// fail a liveness check that a livelock would still fail.
PhantomRun RunPhantomHistory(const ClusterConfig& cfg, const Testbed* sim, uint64_t ranges,
                             int clients, int calls, const std::vector<NodeFault>& faults = {}) {
  auto started = sim != nullptr ? Cluster::StartSimulated(cfg, *sim) : Cluster::Start(cfg);
  POND_CHECK_MSG(started.ok(), started.status().ToString().c_str());
  testing_cluster::TestCluster c = testing_cluster::Checked(std::move(started).value());
  // Stripes of 2^28 keys: a scan of a range reads 16 stripe rows.
  const uint16_t o = *c->CreateTable(
      {.name = "o", .value_bytes = 16, .capacity = 20000, .ordered = true, .stripe_bits = 28});
  const uint16_t rows = *c->CreateTable({.name = "c", .value_bytes = 16, .capacity = 100});
  POND_CHECK(c->Load(rows, 2 * ranges, [](uint64_t i, uint64_t* key, std::span<std::byte>) {
                *key = i;
              }).ok());
  if (!faults.empty()) {
    Status scheduled = c->ScheduleFaults(faults);
    POND_CHECK_MSG(scheduled.ok(), scheduled.ToString().c_str());
  }
  std::ostringstream out;
  check::Recorder rec(&out);
  OpenTxns open;
  std::atomic<uint64_t> end_ns{0};
  std::atomic<int> left{calls};
  std::atomic<int64_t> next_process{0};
  std::atomic<uint64_t> scans{0}, inserts{0};
  c->Run(clients, [&](Session& s) -> Task<void> {
    int64_t process = next_process++;
    uint64_t fresh = 0;
    while (left-- > 0 || (left > -3 * calls && (scans <= kMinCommits || inserts <= kMinCommits))) {
      const uint64_t r = s.rng().Uniform(ranges);
      uint64_t id = 0;
      check::TxnRecorder& h = open.Open(&id, rec.Begin(process, s.clock().NowNs()));
      Txn x = s.Begin(TxnKind::kReadWrite);
      Status st;
      if (s.rng().Chance(0.5)) {
        auto found = co_await x.Scan(o, RangeLow(r), RangeHigh(r), 1 << 20);
        if (found.ok()) {
          std::vector<std::pair<uint64_t, uint64_t>> by_seq;
          for (const ScanRow& row : *found) by_seq.push_back({AsU64(row.value), row.key});
          std::sort(by_seq.begin(), by_seq.end());
          std::vector<uint64_t> list;
          for (const auto& [seq, key] : by_seq) list.push_back(key);
          h.Read(HistR(r), list);
          x.AddRW(rows, YKey(r));
          st = co_await x.Execute();
          if (st.ok()) {
            const uint64_t y = AsU64(*x.Read(rows, YKey(r)));
            POND_CHECK(x.Write(rows, YKey(r), U64Value(y + 1)).ok());
            h.Append(HistY(r), y + 1);
            open.NoteCountAppend(id, HistY(r), y + 1);
            st = co_await x.Commit();
            if (st.ok()) scans++;
          }
        } else {
          st = found.status();
        }
      } else {
        x.AddRW(rows, CounterKey(r));
        x.AddRO(rows, YKey(r));
        st = co_await x.Execute();
        if (st.ok()) {
          const uint64_t seq = AsU64(*x.Read(rows, CounterKey(r))) + 1;
          const uint64_t y = AsU64(*x.Read(rows, YKey(r)));
          std::vector<uint64_t> ys;
          for (uint64_t e = 1; e <= y; e++) ys.push_back(e);
          h.Read(HistY(r), ys);
          // Unique per client, spread over the range's stripes.
          const uint64_t key = RangeLow(r) + ((uint64_t(process) << 20 | fresh++) * 0x9e3779b1u) %
                                                 (RangeHigh(r) - RangeLow(r));
          x.Insert(o, key, U64Value(seq));
          POND_CHECK(x.Write(rows, CounterKey(r), U64Value(seq)).ok());
          h.Append(HistR(r), key);
          st = co_await x.Execute();
          if (st.ok()) st = co_await x.Commit();
          if (st.ok()) inserts++;
        }
      }
      // An aborted transaction did nothing: only committed ones enter the history, whose appends
      // must be unique per key (Y_r's are unique exactly when its writers are serialized). One
      // whose CN failed under it may have committed: info, and the client goes on as a new
      // process (Jepsen's rule).
      if (st.ok()) {
        open.Committed(id, s.clock().NowNs());
      } else if (st.code() == Code::kUnknown) {
        open.Unknown(id, s.clock().NowNs());
        process = next_process++;
      } else {
        open.Aborted(id);
      }
      uint64_t now = s.clock().NowNs(), seen = end_ns.load();
      while (seen < now && !end_ns.compare_exchange_weak(seen, now)) {
      }
    }
  });
  const uint64_t info = open.CloseAll(end_ns.load() + 1);
  POND_CHECK(rec.Close().ok());
  std::istringstream in(out.str());
  Result<check::History> history = check::ParseHistory(in, "phantom");
  POND_CHECK_MSG(history.ok(), history.status().ToString().c_str());
  check::CheckerOptions co;
  co.model = cfg.isolation == Isolation::kSnapshot ? check::Model::kSnapshotIsolation
                                                   : check::Model::kStrictSerializable;
  check::CheckResult res = check::Check(*history, co);
  PhantomRun run;
  run.valid = res.valid;
  run.committed_scans = scans;
  run.committed_inserts = inserts;
  run.info = info;
  if (!faults.empty()) run.failover = c->GetFailoverStats();
  run.summary = check::FormatText(*history, res);
  return run;
}

class PhantomTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PhantomTest, ScansHaveNoPhantomsOnThreads) {
  PhantomRun run = RunPhantomHistory(Config(GetParam()), nullptr, 4, 2, 2000);
  EXPECT_TRUE(run.valid) << run.summary;
  EXPECT_GT(run.committed_scans, kMinCommits);
  EXPECT_GT(run.committed_inserts, kMinCommits);
}

TEST_P(PhantomTest, ScansHaveNoPhantomsInTheSimulator) {
  Testbed tb;
  PhantomRun run = RunPhantomHistory(Config(GetParam()), &tb, 4, 2, 3000);
  EXPECT_TRUE(run.valid) << run.summary;
  EXPECT_GT(run.committed_scans, kMinCommits);
  EXPECT_GT(run.committed_inserts, kMinCommits);
}

TEST_P(PhantomTest, ScansHaveNoPhantomsUnderMessageFaults) {
  // Lost, copied and late lock, timestamp and end messages (the tree's one-sided operations are
  // never faulted, as none are).
  Testbed tb;
  tb.faults.drop_probability = 0.05;
  tb.faults.duplicate_probability = 0.05;
  tb.faults.delay_probability = 0.2;
  tb.faults.delay_ns_max = 200'000;
  PhantomRun run = RunPhantomHistory(Config(GetParam()), &tb, 4, 2, 2000);
  EXPECT_TRUE(run.valid) << run.summary;
  EXPECT_GT(run.committed_scans, kMinCommits);
  EXPECT_GT(run.committed_inserts, kMinCommits);
}

TEST_P(PhantomTest, ScansHaveNoPhantomsThroughCnCrashesAndAPartition) {
  // CN 1 crashes mid-run (its scans, inserts and the node lock words it held with them cut
  // short) and comes back; then CN 2 is cut off and healed. The transactions it was running are
  // info; the history must still be free of phantoms, and commits go on.
  Testbed tb;
  const std::vector<NodeFault> faults = {
      {.kind = NodeFaultKind::kCrashCn, .node = 1, .at_ns = 1'000'000},
      {.kind = NodeFaultKind::kRestartCn, .node = 1, .at_ns = 2'500'000},
      {.kind = NodeFaultKind::kPartitionCn, .node = 2, .at_ns = 5'000'000},
      {.kind = NodeFaultKind::kHealCn, .node = 2, .at_ns = 6'000'000}};
  PhantomRun run = RunPhantomHistory(Config(GetParam()), &tb, 4, 2, 6000, faults);
  EXPECT_TRUE(run.valid) << run.summary;
  EXPECT_GT(run.committed_scans, kMinCommits);
  EXPECT_GT(run.committed_inserts, kMinCommits);
  ASSERT_GE(run.failover.failures.size(), 1u);
  EXPECT_EQ(run.failover.failures[0].cn, 1);
  EXPECT_NE(run.failover.failures[0].recovered_ns, 0u) << "CN 1's failure was never recovered";
  EXPECT_EQ(run.failover.partitions.size(), 1u);
  EXPECT_GT(run.info, 0u) << "no transaction was cut short by the crash";
}

TEST(PhantomFaultsTest, ScansHaveNoPhantomsThroughAnMnCrashAndItsRestart) {
  // Lotus (the protocol that survives MN crashes): MN 1 crashes mid-run and comes back blank;
  // the trees' ranges fail over to their copies and MN 1 gets its copies back, nodes and all,
  // while scans and inserts go on. The history must be free of phantoms, the copies agree at the
  // end (the replica check compares every reachable node), and commits go on.
  Testbed tb;
  const std::vector<NodeFault> faults = {
      {.kind = NodeFaultKind::kCrashMn, .node = 1, .at_ns = 1'000'000},
      {.kind = NodeFaultKind::kRestartMn, .node = 1, .at_ns = 3'000'000}};
  PhantomRun run = RunPhantomHistory(Config("lotus"), &tb, 4, 2, 6000, faults);
  EXPECT_TRUE(run.valid) << run.summary;
  EXPECT_GT(run.committed_scans, kMinCommits);
  EXPECT_GT(run.committed_inserts, kMinCommits);
  ASSERT_EQ(run.failover.mn_failures.size(), 1u);
  EXPECT_NE(run.failover.mn_failures[0].readable_ns, 0u) << "MN 1 was never readable again";
}

TEST_P(PhantomTest, TheCheckerCatchesAScanWithoutItsStripeRows) {
  txn::SetScansSkipStripesForTesting(true);
  Testbed tb;
  // Six ranges, so that inserters (whose read of Y every scanner invalidates) commit often enough
  // under ford, whose commit takes three round trips, for a phantom to be there to see.
  PhantomRun run = RunPhantomHistory(Config(GetParam()), &tb, 6, 4, 8000);
  txn::SetScansSkipStripesForTesting(false);
  EXPECT_FALSE(run.valid) << "the broken scan's phantoms went unseen: " << run.committed_scans
                          << " scans and " << run.committed_inserts << " inserts committed";
}

TEST(PhantomSnapshotTest, SnapshotScansReadTheSnapshot) {
  // The multi-version protocols (ford has no snapshots), judged as snapshot isolation: the
  // history's write skew is allowed there, a scan that misses a committed insert is not.
  for (const std::string& protocol : SnapshotProtocolNames()) {
    Testbed tb;
    PhantomRun run = RunPhantomHistory(Config(protocol, Isolation::kSnapshot), &tb, 4, 2, 3000);
    EXPECT_TRUE(run.valid) << protocol << ": " << run.summary;
    EXPECT_GT(run.committed_scans, kMinCommits) << protocol;
    EXPECT_GT(run.committed_inserts, kMinCommits) << protocol;
  }
}

TEST(PhantomSnapshotTest, SnapshotScansReadTheSnapshotThroughACnCrash) {
  // The same under SI, with CN 1 crashing and coming back mid-run.
  const std::vector<NodeFault> faults = {
      {.kind = NodeFaultKind::kCrashCn, .node = 1, .at_ns = 1'000'000},
      {.kind = NodeFaultKind::kRestartCn, .node = 1, .at_ns = 2'500'000}};
  for (const std::string& protocol : SnapshotProtocolNames()) {
    Testbed tb;
    PhantomRun run =
        RunPhantomHistory(Config(protocol, Isolation::kSnapshot), &tb, 4, 2, 6000, faults);
    EXPECT_TRUE(run.valid) << protocol << ": " << run.summary;
    EXPECT_GT(run.committed_scans, kMinCommits) << protocol;
    EXPECT_GT(run.committed_inserts, kMinCommits) << protocol;
    EXPECT_GT(run.info, 0u) << protocol << ": no transaction was cut short by the crash";
  }
}

INSTANTIATE_TEST_SUITE_P(All, PhantomTest, ::testing::ValuesIn(ProtocolNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pond
