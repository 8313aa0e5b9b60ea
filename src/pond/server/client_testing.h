// Helpers of the client service's tests: a small embedded cluster that serves, with a bank of
// accounts and a key-value table, two procedures, and a ClientServer on 127.0.0.1 (a free port).
//
//   acct  8-byte balances (i64), keys 0 .. kAccounts-1, each starting at kInitialBalance
//   kv    16-byte values, keys 0 .. kKvKeys-1 holding their key in the first 8 bytes
//   bank.transfer (24-byte args: from u64, to u64, amount i64; distinct accounts in range):
//       moves `amount`, replies the new balance of `from` (8 bytes)
//   bank.balance (8-byte args: account): read-only, replies the balance
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "pond/base/assert.h"
#include "pond/client/client.h"
#include "pond/server/client_server.h"

namespace pond::server::testing {

inline constexpr uint64_t kAccounts = 64;
inline constexpr int64_t kInitialBalance = 1000;
inline constexpr uint64_t kKvKeys = 100;

inline std::string I64(int64_t x) { return std::string(reinterpret_cast<const char*>(&x), 8); }
inline int64_t AsI64(std::string_view b) {
  int64_t x = 0;
  if (b.size() >= 8) std::memcpy(&x, b.data(), 8);
  return x;
}
inline std::string KvValue(uint64_t first, uint64_t second = 0) {
  std::string v(16, '\0');
  std::memcpy(v.data(), &first, 8);
  std::memcpy(v.data() + 8, &second, 8);
  return v;
}
inline std::string TransferArgs(uint64_t from, uint64_t to, int64_t amount) {
  std::string a(24, '\0');
  std::memcpy(a.data(), &from, 8);
  std::memcpy(a.data() + 8, &to, 8);
  std::memcpy(a.data() + 16, &amount, 8);
  return a;
}

struct Bank {
  std::unique_ptr<Cluster> cluster;
  ServiceDirectory dir;
  std::unique_ptr<ClientServer> server;
};

inline ClusterConfig SmallConfig() {
  ClusterConfig c;
  c.mns = 3;
  c.cns = 2;
  c.workers_per_cn = 1;
  c.replication = 2;
  c.versions = 3;
  c.region_mib = 64;
  c.lock_buckets = 1 << 12;
  c.vt_cache_entries = 1 << 12;
  c.addr_cache_entries = 1 << 12;
  return c;
}

// The cluster, loaded and serving, and its directory (no server yet).
inline Bank StartBank(const ClusterConfig& config = SmallConfig()) {
  Bank b;
  b.cluster = Cluster::Start(config).value();
  Cluster& c = *b.cluster;
  const uint16_t acct =
      c.CreateTable({.name = "acct", .value_bytes = 8, .capacity = 2 * kAccounts}).value();
  const uint16_t kv = c.CreateTable({.name = "kv", .value_bytes = 16, .capacity = 1024}).value();
  POND_CHECK(c.Load(acct, kAccounts, [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
                *key = i;
                std::memcpy(v.data(), &kInitialBalance, 8);
              }).ok());
  POND_CHECK(c.Load(kv, kKvKeys, [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
                *key = i;
                std::memset(v.data(), 0, v.size());
                std::memcpy(v.data(), &i, 8);
              }).ok());
  POND_CHECK(b.dir.AddTable({"acct", acct, 8, 2 * kAccounts}).ok());
  POND_CHECK(b.dir.AddTable({"kv", kv, 16, 1024}).ok());

  struct Transfer {
    uint64_t from, to;
    int64_t amount;
  };
  const ProcedureId transfer = c.RegisterProcedure(
      [acct](Session& s, std::span<const std::byte> args) -> Task<Result<std::vector<std::byte>>> {
        Transfer a;
        std::memcpy(&a, args.data(), sizeof(a));
        Txn t = s.Begin(TxnKind::kReadWrite);
        t.AddRW(acct, a.from);
        t.AddRW(acct, a.to);
        if (Status st = co_await t.Execute(); !st.ok()) co_return st;
        int64_t from = 0, to = 0;
        std::memcpy(&from, t.Read(acct, a.from)->data(), 8);
        std::memcpy(&to, t.Read(acct, a.to)->data(), 8);
        from -= a.amount;
        to += a.amount;
        POND_CO_RETURN_IF_ERROR(t.Write(acct, a.from, std::as_bytes(std::span(&from, 1))));
        POND_CO_RETURN_IF_ERROR(t.Write(acct, a.to, std::as_bytes(std::span(&to, 1))));
        POND_CO_RETURN_IF_ERROR(co_await t.Commit());
        std::vector<std::byte> reply(8);
        std::memcpy(reply.data(), &from, 8);
        co_return reply;
      });
  POND_CHECK(b.dir
                 .AddProcedure({"bank.transfer", transfer, 24, false,
                                [acct](std::span<const std::byte> args) -> Result<RouteHint> {
                                  Transfer a;
                                  std::memcpy(&a, args.data(), sizeof(a));
                                  if (a.from >= kAccounts || a.to >= kAccounts || a.from == a.to) {
                                    return InvalidArgument("two distinct accounts below 64");
                                  }
                                  return RouteHint{TxnKind::kReadWrite, acct, a.from};
                                }})
                 .ok());
  const ProcedureId balance = c.RegisterProcedure(
      [acct](Session& s, std::span<const std::byte> args) -> Task<Result<std::vector<std::byte>>> {
        uint64_t account;
        std::memcpy(&account, args.data(), 8);
        Txn t = s.Begin(TxnKind::kReadOnly);
        t.AddRO(acct, account);
        if (Status st = co_await t.Execute(); !st.ok()) co_return st;
        Result<std::span<const std::byte>> v = t.Read(acct, account);
        if (!v.ok()) co_return v.status();
        std::vector<std::byte> reply(v->begin(), v->end());
        POND_CO_RETURN_IF_ERROR(co_await t.Commit());
        co_return reply;
      });
  POND_CHECK(b.dir
                 .AddProcedure({"bank.balance", balance, 8, true,
                                [](std::span<const std::byte> args) -> Result<RouteHint> {
                                  uint64_t account;
                                  std::memcpy(&account, args.data(), 8);
                                  if (account >= kAccounts) return NotFound("no such account");
                                  return RouteHint{TxnKind::kReadOnly, 0, account};
                                }})
                 .ok());
  POND_CHECK(c.StartServing().ok());
  return b;
}

inline ClientServiceOptions TestOptions() {
  ClientServiceOptions o;
  o.cns = {0, 1};
  o.keys_per_request_max = 128;
  o.interactive_keys_max = 256;
  o.interactive_streams_max = 8;
  o.threads_max = 32;
  o.insecure = true;  // the TLS tests (client_tls_test.cc) set tls instead
  return o;
}

// A client of a TestOptions server: plaintext.
inline client::ClientOptions PlainClient() {
  client::ClientOptions o;
  o.insecure = true;
  return o;
}

}  // namespace pond::server::testing
