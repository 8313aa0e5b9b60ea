#include "pond/bench/list_append.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "pond/bench/zipf.h"

namespace pond::bench {

namespace {

uint32_t ValueBytes(const ListAppendOptions& o) { return 8 * (1 + o.max_appends); }

std::vector<uint64_t> DecodeList(std::span<const std::byte> v) {
  uint64_t n;
  std::memcpy(&n, v.data(), 8);
  std::vector<uint64_t> out(n);
  if (n > 0) std::memcpy(out.data(), v.data() + 8, n * 8);
  return out;
}

void EncodeList(const std::vector<uint64_t>& list, std::vector<std::byte>* v) {
  uint64_t n = list.size();
  std::fill(v->begin(), v->end(), std::byte{0});
  std::memcpy(v->data(), &n, 8);
  if (n > 0) std::memcpy(v->data() + 8, list.data(), n * 8);
}

struct Shared {
  std::atomic<uint64_t> base{0};          // first active key (pair in write-skew mode)
  std::atomic<uint64_t> next_element{1};  // elements are unique over the whole run
  std::atomic<uint64_t> committed{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> window_end{0};
  std::atomic<bool> exhausted{false};
};

struct Mop {
  bool append;
  uint64_t key;
};

}  // namespace

Result<uint16_t> SetupListAppend(Cluster& cluster, const ListAppendOptions& o) {
  if (o.max_appends < 1 || o.mops_max < 1 || o.window < 1 || o.keys < 2 * o.window) {
    return InvalidArgument("list-append options out of range");
  }
  Result<uint16_t> t = cluster.CreateTable(
      TableOptions{.name = "lists", .value_bytes = ValueBytes(o), .capacity = o.keys});
  if (!t.ok()) return t;
  Status s = cluster.Load(*t, o.keys, [](uint64_t i, uint64_t* key, std::span<std::byte>) {
    *key = i;  // the value stays all zero: an empty list
  });
  if (!s.ok()) return s;
  return t;
}

Result<ListAppendResult> RunListAppend(Cluster& cluster, uint16_t table, const ListAppendOptions& o,
                                       check::Recorder& recorder, int clients) {
  Shared shared;
  Zipf zipf(o.window, o.theta);
  const int workers = cluster.config().workers_per_cn;
  cluster.Run(clients, [&](Session& s) -> Task<void> {
    Rng rng(o.seed * 1000003 + (uint64_t{s.cn()} << 32) + (uint64_t{s.worker()} << 16) +
            static_cast<uint64_t>(s.client()));
    int64_t process = (static_cast<int64_t>(s.cn()) * workers + s.worker()) * clients + s.client();
    std::vector<std::byte> value(ValueBytes(o));
    for (uint32_t n = 0; n < o.txns_per_client && !shared.exhausted.load(); n++) {
      // Plan the micro-ops.
      bool read_only = !o.write_skew && rng.Chance(o.read_only_fraction);
      std::vector<Mop> mops;
      uint64_t base = shared.base.load();
      if (o.write_skew) {
        uint64_t pair = base + zipf.Next(rng);
        uint64_t a = 2 * pair, b = 2 * pair + 1;
        mops = {{false, a}, {false, b}, {true, rng.Chance(0.5) ? a : b}};
      } else {
        uint32_t count = 1 + static_cast<uint32_t>(rng.Uniform(o.mops_max));
        for (uint32_t i = 0; i < count; i++) {
          mops.push_back({!read_only && rng.Chance(0.5), base + zipf.Next(rng)});
        }
      }
      uint64_t top = 0;
      for (auto& m : mops) top = std::max(top, m.key);
      if (top >= o.keys) {
        shared.exhausted = true;  // the window ran past the loaded keys
        break;
      }
      uint64_t hw = shared.window_end.load();
      while (top > hw && !shared.window_end.compare_exchange_weak(hw, top)) {
      }

      check::TxnRecorder tr = recorder.Begin(process, s.clock().NowNs());
      Txn t = s.Begin(read_only ? TxnKind::kReadOnly : TxnKind::kReadWrite);
      for (auto& m : mops) {
        bool writes = false;
        for (auto& m2 : mops) writes |= m2.key == m.key && m2.append;
        if (writes) {
          t.AddRW(table, m.key);
        } else {
          t.AddRO(table, m.key);
        }
      }
      Status st = co_await t.Execute();
      std::vector<uint64_t> full;
      if (st.ok()) {
        for (auto& m : mops) {
          Result<std::span<const std::byte>> v = t.Read(table, m.key);
          POND_CHECK_MSG(v.ok(), v.status().ToString().c_str());
          std::vector<uint64_t> list = DecodeList(*v);
          if (!m.append || list.size() >= o.max_appends) {
            tr.Read(m.key, list);
            if (list.size() >= o.max_appends) full.push_back(m.key);
            continue;
          }
          uint64_t e = shared.next_element.fetch_add(1);
          list.push_back(e);
          EncodeList(list, &value);
          Status ws = t.Write(table, m.key, value);
          POND_CHECK_MSG(ws.ok(), ws.ToString().c_str());
          tr.Append(m.key, e);
        }
        st = co_await t.Commit();
      }
      tr.Finish(st.ok() ? check::Outcome::kOk : check::Outcome::kFail, s.clock().NowNs());
      if (!st.ok()) {
        POND_CHECK_MSG(st.code() == Code::kAborted, st.ToString().c_str());
        shared.failed++;
        continue;
      }
      shared.committed++;
      // Retire full keys: slide the window past them.
      for (uint64_t k : full) {
        uint64_t unit = o.write_skew ? k / 2 : k;
        uint64_t b = shared.base.load();
        while (unit >= b && !shared.base.compare_exchange_weak(b, unit + 1)) {
        }
      }
    }
  });
  if (shared.exhausted) {
    return OutOfSpace("list-append ran past its " + std::to_string(o.keys) +
                      " keys; load more keys");
  }
  return ListAppendResult{shared.committed.load(), shared.failed.load(), shared.window_end.load()};
}

}  // namespace pond::bench
