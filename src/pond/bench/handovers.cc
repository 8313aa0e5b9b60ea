#include "pond/bench/handovers.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "pond/base/hash.h"

namespace pond::bench {

namespace {

constexpr uint64_t kPhonesMax = uint64_t{1} << 40;
constexpr uint64_t kCellsMax = 1 << 16;
constexpr uint64_t kScanBatch = 64;  // rows per read-only transaction of the check
// phone: number, cell, connected (0 or 1), operations so far, then the rest of its context.
// cell: number, phones attached, phones connected.
constexpr uint32_t kPhoneWords = 4, kCellBytes = 24;
constexpr uint32_t kContextMin = 8 * kPhoneWords, kContextMax = 1024;

struct Args {
  uint64_t phone = 0;
  uint64_t step = 0;  // Handover: +1 or -1 (as u64), the neighbour it moves to
};

uint64_t Word(std::span<const std::byte> v, int i) {
  uint64_t x;
  std::memcpy(&x, v.data() + 8 * i, 8);
  return x;
}

std::vector<std::byte> PhoneRow(std::span<const std::byte> old, uint64_t cell, uint64_t connected) {
  std::vector<std::byte> row(old.begin(), old.end());
  const uint64_t ops = Word(old, 3) + 1;
  std::memcpy(row.data() + 8, &cell, 8);
  std::memcpy(row.data() + 16, &connected, 8);
  std::memcpy(row.data() + 24, &ops, 8);
  // The rest of the context changes too, as a 3GPP procedure rewrites much of it.
  for (size_t i = 8 * kPhoneWords; i + 8 <= row.size(); i += 8) {
    const uint64_t w = Mix64(ops ^ i);
    std::memcpy(row.data() + i, &w, 8);
  }
  return row;
}

std::array<std::byte, kCellBytes> CellRow(uint64_t cell, uint64_t attached, uint64_t connected) {
  std::array<std::byte, kCellBytes> v;
  const uint64_t w[3] = {cell, attached, connected};
  std::memcpy(v.data(), w, sizeof(w));
  return v;
}

}  // namespace

uint64_t CellKey(uint64_t cell) { return (cell << 12) | (Mix64(cell + 0x63656c6c) & 0xfff); }
uint64_t HomeCell(uint64_t phone, uint64_t cells) { return Mix64(phone ^ 0x70686f6e65) % cells; }

// Per worker: commits by operation, booked by the worker that ran the procedure.
struct alignas(64) HandoversCounters {
  std::array<std::atomic<uint64_t>, kHandoversTxnCount> by_txn{};
};

HandoversWorkload::HandoversWorkload(const HandoversParams& p) : p_(p) {}
HandoversWorkload::~HandoversWorkload() = default;

Status HandoversWorkload::Validate(const RunOptions& o) const {
  if (o.record) return InvalidArgument("the Handovers workload records no history");
  if (p_.phones < 1 || p_.phones > kPhonesMax) return InvalidArgument("--phones must be 1 to 2^40");
  if (p_.cells < 2 || p_.cells > kCellsMax) {
    return InvalidArgument(fmt::format("--cells must be 2 to {}", kCellsMax));
  }
  if (!(p_.mobile_share > 0 && p_.mobile_share <= 1)) {
    return InvalidArgument("--mobile-share must be above 0 and at most 1");
  }
  if (!(p_.handover_pct >= 0 && p_.handover_pct <= 100)) {
    return InvalidArgument("--handover-pct must be 0 to 100");
  }
  if (p_.context_bytes < kContextMin || p_.context_bytes > kContextMax) {
    return InvalidArgument(
        fmt::format("--context-bytes must be {} to {}", kContextMin, kContextMax));
  }
  return Status::Ok();
}

std::string HandoversWorkload::Settings() const {
  return fmt::format("{} phones ({:g}% mobile), {} cells, {:g}% handovers, {}-byte contexts",
                     p_.phones, 100 * p_.mobile_share, p_.cells, p_.handover_pct, p_.context_bytes);
}

nlohmann::json HandoversWorkload::SettingsJson() const {
  return {{"phones", p_.phones},
          {"cells", p_.cells},
          {"mobile_share", p_.mobile_share},
          {"handover_pct", p_.handover_pct},
          {"context_bytes", p_.context_bytes}};
}

Status HandoversWorkload::Setup(Cluster& cluster, RunContext& ctx) {
  Result<uint16_t> tp = cluster.CreateTable({.name = "phone",
                                             .value_bytes = p_.context_bytes,
                                             .capacity = p_.phones,
                                             .critical_field = true});
  if (!tp.ok()) return tp.status();
  Result<uint16_t> tc = cluster.CreateTable(
      {.name = "cell", .value_bytes = kCellBytes, .capacity = p_.cells, .critical_field = true});
  if (!tc.ok()) return tc.status();
  const uint16_t tphone = tphone_ = *tp, tcell = tcell_ = *tc;
  const uint64_t cells = p_.cells;
  std::vector<uint64_t> attached(cells, 0);
  for (uint64_t x = 0; x < p_.phones; x++) attached[HomeCell(x, cells)]++;
  POND_RETURN_IF_ERROR(
      cluster.Load(tphone, p_.phones, [cells](uint64_t x, uint64_t* key, std::span<std::byte> v) {
        *key = PhoneKey(x, cells);
        const uint64_t w[kPhoneWords] = {x, HomeCell(x, cells), 0, 0};
        std::memcpy(v.data(), w, sizeof(w));
      }));
  POND_RETURN_IF_ERROR(
      cluster.Load(tcell, cells, [&attached](uint64_t c, uint64_t* key, std::span<std::byte> v) {
        *key = CellKey(c);
        auto row = CellRow(c, attached[c], 0);
        std::memcpy(v.data(), row.data(), row.size());
      }));
  counters_ = std::vector<HandoversCounters>(ctx.workers());

  RunContext* c = &ctx;
  std::vector<HandoversCounters>* counters = &counters_;
  // A procedure: reads the phone, then its cell (and for a handover the neighbour), and lets
  // `apply` write them; apply returns which operation it was, counted once the commit is done.
  using Apply = std::function<Result<HandoversTxn>(
      Txn&, uint64_t phone, std::span<const std::byte> row, uint64_t cell,
      std::span<const std::byte> cell_row, uint64_t to, std::span<const std::byte> to_row)>;
  auto add = [&](bool handover, Apply apply) {
    procs_.push_back(
        cluster.RegisterProcedure([=](Session& s, std::span<const std::byte> args) -> Task<Status> {
          Args a;
          std::memcpy(&a, args.data(), sizeof(a));
          Txn t = s.Begin(TxnKind::kReadWrite);
          const uint64_t pk = PhoneKey(a.phone, cells);
          t.AddRW(tphone, pk);
          POND_CO_RETURN_IF_ERROR(co_await t.Execute());
          Result<std::span<const std::byte>> p = t.Read(tphone, pk);
          if (!p.ok()) co_return p.status();
          if (Word(*p, 0) != a.phone || Word(*p, 1) >= cells) {
            co_return Internal(fmt::format("phone {}'s row is not its own", a.phone));
          }
          const uint64_t cell = Word(*p, 1), to = (cell + cells + a.step) % cells;
          t.AddRW(tcell, CellKey(cell));
          if (handover) t.AddRW(tcell, CellKey(to));
          POND_CO_RETURN_IF_ERROR(co_await t.Execute());
          Result<std::span<const std::byte>> cr = t.Read(tcell, CellKey(cell));
          if (!cr.ok()) co_return cr.status();
          Result<std::span<const std::byte>> tr = cr;
          if (handover) tr = t.Read(tcell, CellKey(to));
          if (!tr.ok()) co_return tr.status();
          Result<HandoversTxn> kind = apply(t, a.phone, *p, cell, *cr, to, *tr);
          if (!kind.ok()) co_return kind.status();
          Status st = co_await t.Commit();
          if (st.ok()) {
            (*counters)[c->Worker(s)].by_txn[static_cast<size_t>(*kind)].fetch_add(
                1, std::memory_order_relaxed);
          }
          co_return st;
        }));
  };
  procs_.clear();
  // The phone's next request: a service request if it is idle (it connects, and its cell counts
  // one more connected), a release if it is connected (the reverse) — a phone alternates.
  add(false,
      [=](Txn& t, uint64_t x, std::span<const std::byte> row, uint64_t cell,
          std::span<const std::byte> cr, uint64_t,
          std::span<const std::byte>) -> Result<HandoversTxn> {
        const uint64_t conn = Word(row, 2);
        POND_RETURN_IF_ERROR(t.Write(tphone, PhoneKey(x, cells), PhoneRow(row, cell, 1 - conn)));
        POND_RETURN_IF_ERROR(
            t.Write(tcell, CellKey(cell), CellRow(cell, Word(cr, 1), Word(cr, 2) + 1 - 2 * conn)));
        return conn == 0 ? HandoversTxn::kServiceRequest : HandoversTxn::kRelease;
      });
  // A handover: detached from its cell, attached to the neighbour, its connection carried over.
  add(true,
      [=](Txn& t, uint64_t x, std::span<const std::byte> row, uint64_t cell,
          std::span<const std::byte> cr, uint64_t to,
          std::span<const std::byte> tr) -> Result<HandoversTxn> {
        const uint64_t conn = Word(row, 2);
        POND_RETURN_IF_ERROR(t.Write(tphone, PhoneKey(x, cells), PhoneRow(row, to, conn)));
        POND_RETURN_IF_ERROR(
            t.Write(tcell, CellKey(cell), CellRow(cell, Word(cr, 1) - 1, Word(cr, 2) - conn)));
        POND_RETURN_IF_ERROR(
            t.Write(tcell, CellKey(to), CellRow(to, Word(tr, 1) + 1, Word(tr, 2) + conn)));
        return HandoversTxn::kHandover;
      });
  return Status::Ok();
}

Task<void> HandoversWorkload::RunClient(Session& s, RunContext& ctx) {
  Rng& rng = s.rng();
  const uint64_t mobile =
      std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(p_.mobile_share * p_.phones)));
  while (ctx.NextCall(s)) {
    const bool handover = rng.Chance(p_.handover_pct / 100);
    Args a;
    if (handover) {
      a.phone = rng.Uniform(mobile);  // the mobile phones are the first ones
      a.step = rng.Chance(0.5) ? 1 : ~uint64_t{0};
    } else {
      a.phone = rng.Uniform(p_.phones);
    }
    // Routed to the CN managing the phone's shard, its home cell's (Lotus §4.3).
    RouteHint hint{TxnKind::kReadWrite, tphone_, PhoneKey(a.phone, p_.cells)};
    uint64_t t0 = s.clock().NowNs();
    Status st = co_await s.Call(procs_[handover ? 1 : 0], std::as_bytes(std::span(&a, 1)), hint);
    uint64_t t1 = s.clock().NowNs();
    if (!ctx.Book(s, st, t0, t1, true)) break;
  }
}

Status HandoversWorkload::Finish(Cluster& cluster, RunContext& ctx, RunResult* r) {
  // The clients take batches of phones in turn and count, per cell, the phones naming it; the
  // first done reads the cells. Clients of a CN that a fault schedule left down do not run.
  const uint64_t cells = p_.cells;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> counted{false};
  const uint64_t batches = (p_.phones + kScanBatch - 1) / kScanBatch;
  std::mutex mu;
  std::vector<uint64_t> attached(cells, 0), connected(cells, 0);      // guarded by mu
  std::vector<uint64_t> said_attached(cells), said_connected(cells);  // guarded by mu
  std::string detail;                                                 // guarded by mu
  std::atomic<bool> failed{false};
  auto fail = [&](const std::string& why) {
    failed = true;
    std::lock_guard lock(mu);
    if (detail.empty()) detail = why;
  };
  cluster.Run(ctx.options().coros, [&](Session& s) -> Task<void> {
    for (uint64_t b = next++; b < batches && !failed; b = next++) {
      const uint64_t lo = b * kScanBatch, hi = std::min(p_.phones, lo + kScanBatch);
      std::vector<std::pair<uint64_t, uint64_t>> seen;  // (cell, connected) per phone
      Status st = co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& t) -> Task<Status> {
        for (uint64_t x = lo; x < hi; x++) t.AddRO(tphone_, PhoneKey(x, cells));
        POND_CO_RETURN_IF_ERROR(co_await t.Execute());
        seen.clear();
        for (uint64_t x = lo; x < hi; x++) {
          Result<std::span<const std::byte>> row = t.Read(tphone_, PhoneKey(x, cells));
          if (!row.ok()) co_return row.status();
          if (Word(*row, 0) != x || Word(*row, 1) >= cells || Word(*row, 2) > 1) {
            co_return Internal(fmt::format("phone {}'s row is not its own or names no cell", x));
          }
          seen.emplace_back(Word(*row, 1), Word(*row, 2));
        }
        co_return Status::Ok();
      });
      if (!st.ok()) {
        fail("check read failed: " + st.ToString());
        break;
      }
      std::lock_guard lock(mu);
      for (const auto& [cell, conn] : seen) {
        attached[cell]++;
        connected[cell] += conn;
      }
    }
    if (counted.exchange(true)) co_return;
    for (uint64_t lo = 0; lo < cells && !failed; lo += kScanBatch) {
      const uint64_t hi = std::min(cells, lo + kScanBatch);
      Status st = co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& t) -> Task<Status> {
        for (uint64_t c = lo; c < hi; c++) t.AddRO(tcell_, CellKey(c));
        POND_CO_RETURN_IF_ERROR(co_await t.Execute());
        for (uint64_t c = lo; c < hi; c++) {
          Result<std::span<const std::byte>> row = t.Read(tcell_, CellKey(c));
          if (!row.ok()) co_return row.status();
          if (Word(*row, 0) != c) co_return Internal(fmt::format("cell {}'s row names another", c));
          std::lock_guard lock(mu);
          said_attached[c] = Word(*row, 1);
          said_connected[c] = Word(*row, 2);
        }
        co_return Status::Ok();
      });
      if (!st.ok()) fail("check read failed: " + st.ToString());
    }
  });

  uint64_t total_connected = 0;
  std::array<uint64_t, kHandoversTxnCount> by_txn{};
  for (HandoversCounters& c : counters_) {
    for (size_t k = 0; k < c.by_txn.size(); k++) by_txn[k] += c.by_txn[k].load();
  }
  std::string why = detail;
  for (uint64_t c = 0; c < cells && why.empty(); c++) {
    if (said_attached[c] != attached[c] || said_connected[c] != connected[c]) {
      why = fmt::format("cell {} counts {} attached and {} connected, its phones {} and {}", c,
                        said_attached[c], said_connected[c], attached[c], connected[c]);
    }
    total_connected += connected[c];
  }
  r->loaded = fmt::format("{} phones, {} cells", p_.phones, cells);
  for (int k = 0; k < kHandoversTxnCount; k++) {
    r->committed_by_txn.emplace_back(kHandoversTxnNames[static_cast<size_t>(k)],
                                     by_txn[static_cast<size_t>(k)]);
  }
  WorkloadCheck check;
  check.name = "attachment check";
  check.label = "attach check";
  check.json_key = "attachment_check";
  check.ok = why.empty();
  check.detail = why;
  check.summary = fmt::format(
      "every phone on one cell, each cell's counts its phones'; {} "
      "connected at the end, {} handovers",
      total_connected, by_txn[static_cast<size_t>(HandoversTxn::kHandover)]);
  check.brief = fmt::format("{} connected, {} handovers", total_connected,
                            by_txn[static_cast<size_t>(HandoversTxn::kHandover)]);
  check.json = {{"ok", check.ok},
                {"connected", total_connected},
                {"handovers", by_txn[static_cast<size_t>(HandoversTxn::kHandover)]},
                {"detail", check.detail}};
  r->check = std::move(check);
  return Status::Ok();
}

}  // namespace pond::bench
