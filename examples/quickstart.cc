// Bank transfers on an embedded Pond cluster.
#include <atomic>
#include <cstdio>
#include <cstring>

#include "pond/cluster.h"

using pond::Status;
using pond::Task;
using pond::Txn;
using pond::TxnKind;

static uint64_t Get(const Txn& t, uint16_t table, uint64_t key) {
  uint64_t v = 0;
  std::memcpy(&v, t.Read(table, key)->data(), sizeof(v));
  return v;
}

static Status Put(Txn& t, uint16_t table, uint64_t key, uint64_t v) {
  std::byte value[8];
  std::memcpy(value, &v, sizeof(v));
  return t.Write(table, key, value);
}

int main() {
  pond::ClusterConfig config;  // 3 MNs, 3 CNs, 3 replicas, serializable
  config.region_mib = 64;
  auto cluster = pond::Cluster::Start(config);
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 1;
  }
  auto accounts = (*cluster)->CreateTable({.name = "accounts", .value_bytes = 8, .capacity = 100});
  if (!accounts.ok()) return 1;
  const uint16_t table = *accounts;
  constexpr uint64_t kAccounts = 10, kStart = 100;
  Status loaded =
      (*cluster)->Load(table, kAccounts, [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
        *key = i;
        uint64_t balance = kStart;
        std::memcpy(v.data(), &balance, sizeof(balance));
      });
  if (!loaded.ok()) return 1;

  std::atomic<bool> audit_failed{false};  // written by every worker thread
  (*cluster)->Run(2, [&](pond::Session& s) -> Task<void> {
    for (int i = 0; i < 200; i++) {
      uint64_t from = s.rng().Uniform(kAccounts),
               to = (from + 1 + s.rng().Uniform(kAccounts - 1)) % kAccounts;
      Status st = co_await s.RunTxn(TxnKind::kReadWrite, [&](Txn& t) -> Task<Status> {
        t.AddRW(table, from);
        t.AddRW(table, to);
        if (Status e = co_await t.Execute(); !e.ok()) co_return e;
        uint64_t a = Get(t, table, from), b = Get(t, table, to);
        if (a == 0) co_return Status::Ok();  // nothing to move; commits no writes
        if (Status w = Put(t, table, from, a - 1); !w.ok()) co_return w;
        co_return Put(t, table, to, b + 1);
      });
      if (!st.ok()) std::fprintf(stderr, "transfer gave up: %s\n", st.ToString().c_str());
    }
    uint64_t total = 0;
    Status st = co_await s.RunTxn(TxnKind::kReadOnly, [&](Txn& t) -> Task<Status> {
      for (uint64_t k = 0; k < kAccounts; k++) t.AddRO(table, k);
      if (Status e = co_await t.Execute(); !e.ok()) co_return e;
      total = 0;
      for (uint64_t k = 0; k < kAccounts; k++) total += Get(t, table, k);
      co_return Status::Ok();
    });
    if (!st.ok() || total != kAccounts * kStart) audit_failed.store(true);
  });

  pond::ClusterStats stats = (*cluster)->Stats();
  std::printf("%lu transactions committed, %lu aborted attempts, audits %s\n",
              static_cast<unsigned long>(stats.committed + stats.committed_read_only),
              static_cast<unsigned long>(stats.aborts.Total()), audit_failed ? "FAILED" : "ok");
  return audit_failed ? 1 : 0;
}
