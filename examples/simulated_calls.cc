// Withdrawals on a simulated Pond cluster, through a stored procedure that answers with bytes.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "pond/cluster.h"

using pond::Result;
using pond::Session;
using pond::Status;
using pond::Task;
using pond::Txn;
using pond::TxnKind;

struct Withdrawal {
  uint64_t account, amount;
};

int main() {
  pond::ClusterConfig config;  // 3 MNs, 3 CNs, 3 replicas, serializable
  config.region_mib = 64;
  config.seed = 7;  // the whole simulated run follows from it
  pond::Testbed testbed = pond::Testbed::Preset("cx5").value();
  testbed.faults.duplicate_probability = 0.01;  // 1% of CN-to-CN messages arrive twice
  testbed.faults.delay_probability = 0.05;      // 5% arrive up to 20 us late
  testbed.faults.delay_ns_max = 20'000;
  auto cluster = pond::Cluster::StartSimulated(config, testbed);
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 1;
  }
  pond::Cluster& c = **cluster;
  auto accounts = c.CreateTable({.name = "accounts", .value_bytes = 8, .capacity = 100});
  if (!accounts.ok()) return 1;
  const uint16_t table = *accounts;
  Status loaded = c.Load(table, 10, [](uint64_t i, uint64_t* key, std::span<std::byte> v) {
    *key = i;
    uint64_t balance = 100 * i;
    std::memcpy(v.data(), &balance, sizeof(balance));
  });
  if (!loaded.ok()) return 1;

  // Runs on the CN that manages the account's lock; answers the new balance, or its own reason.
  pond::ProcedureId withdraw = c.RegisterProcedure(
      [table](Session& s, std::span<const std::byte> args) -> Task<Result<std::vector<std::byte>>> {
        Withdrawal w;
        std::memcpy(&w, args.data(), sizeof(w));
        uint64_t balance = 0;
        Status st = co_await s.RunTxn(TxnKind::kReadWrite, [&](Txn& t) -> Task<Status> {
          t.AddRW(table, w.account);
          if (Status e = co_await t.Execute(); !e.ok()) co_return e;
          std::memcpy(&balance, t.Read(table, w.account)->data(), sizeof(balance));
          if (balance < w.amount) {
            co_return pond::InvalidArgument("balance " + std::to_string(balance) + " too low");
          }
          balance -= w.amount;
          std::byte value[8];
          std::memcpy(value, &balance, sizeof(balance));
          co_return t.Write(table, w.account, value);
        });
        if (!st.ok()) co_return st;
        std::vector<std::byte> reply(sizeof(balance));
        std::memcpy(reply.data(), &balance, sizeof(balance));
        co_return reply;
      });

  std::string log;
  c.Run(1, [&](Session& s) -> Task<void> {
    // One client, on the last CN. Keys 0..9 are shards 0..9, whose locks CN 0 manages, so
    // hybrid routing sends every call there.
    if (s.cn() != config.cns - 1 || s.worker() != 0) co_return;
    for (uint64_t account : {3, 1, 9}) {
      Withdrawal w{account, 250};
      pond::RouteHint hint{TxnKind::kReadWrite, table, account};
      Result<std::vector<std::byte>> r =
          co_await s.CallWithReply(withdraw, std::as_bytes(std::span(&w, 1)), hint);
      uint64_t balance = 0;
      if (r.ok()) std::memcpy(&balance, r->data(), sizeof(balance));
      log += "account " + std::to_string(account) + ": " +
             (r.ok() ? "balance " + std::to_string(balance) : r.status().ToString()) + "\n";
      co_await s.SleepFor(10'000);  // 10 us of virtual time
    }
  });

  std::printf("%s%lu calls routed to another CN, %.1f virtual us\n", log.c_str(),
              static_cast<unsigned long>(c.Stats().remote_calls), c.clock().NowNs() / 1e3);
  const char* expected =
      "account 3: balance 50\n"
      "account 1: InvalidArgument: balance 100 too low\n"
      "account 9: balance 650\n";
  return log == expected ? 0 : 1;
}
