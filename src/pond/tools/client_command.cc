// `pond client`: the client API from a shell (docs/clients.md) — describe a cluster, get and put
// a key, run a one-shot transaction of several operations, call a procedure by name. Output is
// one line per fact on stdout; a transaction that does not commit says why in one line on
// stderr, and each outcome has its own exit code (listed in --help).
#include <fmt/core.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pond/client/client.h"
#include "pond/tools/client_batch.h"
#include "pond/tools/client_ops.h"
#include "pond/tools/client_probe.h"
#include "pond/tools/client_security.h"
#include "pond/tools/command.h"
#include "pond/tools/grpc_log.h"
#include "pond/tools/tool_util.h"

namespace pond::tools {

namespace {

struct ClientArgs {
  std::string address;
  uint32_t timeout_ms = 10'000;
  std::string table, key, value;  // get, put
  bool read_only = false;         // txn
  std::vector<std::string> ops;   // txn
  std::string procedure;          // call
  std::vector<std::string> args;  // call
  std::string route_key;          // call
  ProbeArgs probe;
  BatchArgs batch;
  ClientSecurityFlags security;
};

// `pond client describe`: what the server serves, one line per item.
void PrintDescription(const client::Description& d) {
  std::printf("cluster %s\n", d.cluster.c_str());
  std::printf("isolation %s\n", d.isolation.c_str());
  for (const std::string& addr : d.cn_addresses) std::printf("cn %s\n", addr.c_str());
  for (const client::TableInfo& t : d.tables) {
    std::printf("table %s id %u value_bytes %u capacity %lu\n", t.name.c_str(), t.id, t.value_bytes,
                static_cast<unsigned long>(t.capacity));
  }
  for (const client::ProcedureInfo& p : d.procedures) {
    std::printf("procedure %s args_bytes %u %s\n", p.name.c_str(), p.args_bytes,
                p.read_only ? "read-only" : "read-write");
  }
  std::printf("limits keys_per_request %u message_bytes %u\n", d.keys_per_request_max,
              d.message_bytes_max);
  if (d.routing) {
    // Shards per CN id: how the map splits the keys, in one line.
    std::vector<size_t> per_cn(d.routing->cn_address_by_id.size());
    for (uint16_t cn : d.routing->shard_cns) per_cn[cn]++;
    std::string split;
    for (size_t cn = 0; cn < per_cn.size(); cn++) {
      split += (cn == 0 ? "" : " ") + std::to_string(cn) + ":" + std::to_string(per_cn[cn]);
    }
    std::printf("routing %zu shards version %lu shards_by_cn %s\n", d.routing->shard_cns.size(),
                static_cast<unsigned long>(d.routing->version), split.c_str());
  }
}

// Connects as `a` says, with options `*o` (its TLS or plaintext set here): 0 and the client in
// `*out`, or the exit code, said in one line on stderr — bad flags 2, refused by the server's
// access rules as REJECTED, unreachable otherwise.
int ConnectAs(const ClientArgs& a, const std::string& what, client::ClientOptions* o,
              std::unique_ptr<client::Client>* out) {
  o->timeout_ms = a.timeout_ms;
  if (Status st = ApplyClientSecurity(a.security, o); !st.ok()) {
    std::fprintf(stderr, "pond %s: %s\n", what.c_str(), st.message().c_str());
    return 2;
  }
  auto connected = client::Client::Connect(a.address, *o);
  if (!connected.ok()) {
    const Status& st = connected.status();
    const bool refused = st.code() == Code::kPermissionDenied;
    std::fprintf(stderr, "pond %s: %s%s\n", what.c_str(), refused ? "REJECTED: " : "",
                 st.message().c_str());
    return refused ? kExitRejected : kExitUnreachable;
  }
  *out = std::move(connected).value();
  return 0;
}

int RunClient(ClientArgs a, const std::string& sub) {
  const std::string what = "client " + sub;
  QuietGrpcLog();
  client::ClientOptions o;
  std::unique_ptr<client::Client> connected;
  if (const int rc = ConnectAs(a, what, &o, &connected); rc != 0) return rc;
  client::Client& c = *connected;
  Result<client::Description> d = c.Describe();
  if (!d.ok()) {
    std::fprintf(stderr, "pond %s: %s\n", what.c_str(), d.status().message().c_str());
    return kExitUnreachable;
  }
  if (sub == "describe") {
    PrintDescription(*d);
    return 0;
  }
  if (sub == "probe") {
    a.probe.timeout_ms = a.timeout_ms;
    a.probe.security = o;
    return RunProbe(*d, a.probe);
  }
  if (sub == "batch") return RunBatch(c, *d, a.batch);
  client::Request r(sub == "get" || (sub == "txn" && a.read_only));
  std::optional<uint64_t> route;
  std::string args;
  Status st;
  if (sub == "get") {
    st = AddOp("get:" + a.table + ":" + a.key, *d, &r);
  } else if (sub == "put") {
    st = AddOp("put:" + a.table + ":" + a.key + ":" + a.value, *d, &r);
  } else if (sub == "txn") {
    for (const std::string& op : a.ops) {
      if (st = AddOp(op, *d, &r); !st.ok()) break;
    }
  } else {
    if (d->Procedure(a.procedure) == nullptr) {
      return Fail(what, "the server has no procedure \"" + a.procedure + "\"");
    }
    for (const std::string& part : a.args) {
      Result<std::string> b = ParseBytes(part);
      if (!b.ok()) return Fail(what, b.status().message());
      args += *b;
    }
    if (!a.route_key.empty()) {
      Result<uint64_t> k = ParseKey(a.route_key);
      if (!k.ok()) return Fail(what, "--route-key: " + k.status().message());
      route = *k;
    }
  }
  if (!st.ok()) return Fail(what, st.message());
  if (sub == "call") {
    client::CallReply reply = c.Call(a.procedure, args, route);
    const int rc = Report(reply.answer);
    if (reply.answer.committed() && !reply.reply.empty()) {
      std::printf("reply %s\n", Show(reply.reply).c_str());
    }
    return rc;
  }
  client::Reply reply = c.Execute(r);
  if (sub == "get" && reply.answer.committed()) {
    PrintValues(reply.values);
    return !reply.values.empty() && reply.values[0].found ? 0 : kExitNotFound;
  }
  const int rc = Report(reply.answer);
  PrintValues(reply.values);
  return rc;
}

// The subcommands that send many requests: batch and probe.
template <typename On>
void AddManyCommands(CLI::App* cmd, ClientArgs* a, const On& on) {
  CLI::App* batch = cmd->add_subcommand(
      "batch",
      "Run many transactions and calls, one a line (txn OP..., ro OP..., call PROC ARGS...; # "
      "starts a comment), pipelined; each answer behind its line's number");
  batch->add_option("FILE", a->batch.file, "the lines; - for standard input")
      ->capture_default_str();
  batch->add_option("--in-flight", a->batch.in_flight, "requests sent and not yet answered")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  batch
      ->add_option("--retries", a->batch.retries,
                   "a line aborted by a conflict (it changed nothing) is sent again up to this "
                   "many times")
      ->check(CLI::Range(0u, 1000u))
      ->capture_default_str();
  batch->callback(on("batch"));
  CLI::App* probe = cmd->add_subcommand(
      "probe",
      "Through every CN, commit a put in every one of the 4096 shards (key (CN + 1) * 4096 + "
      "shard of TABLE, which must hold that many keys): is every shard writable everywhere?");
  probe->add_option("TABLE", a->probe.table, "a table the probe may write")->required();
  probe
      ->add_option("--within-ms", a->probe.within_ms,
                   "each CN's shards all commit within this, retried until then")
      ->check(CLI::Range(1u, 3'600'000u))
      ->capture_default_str();
  probe->add_option("--cn", a->probe.cns,
                    "through this CN's client address, HOST:PORT (repeatable; default: every CN "
                    "the server names)");
  probe->add_option("--threads", a->probe.threads, "connections per CN, each a thread")
      ->check(CLI::Range(1u, 64u))
      ->capture_default_str();
  probe->callback(on("probe"));
}

}  // namespace

void AddClientCommand(CLI::App& root, CommandAction* action) {
  auto a = std::make_shared<ClientArgs>();
  CLI::App* cmd = root.add_subcommand(
      "client",
      "Talk to a cluster that serves clients (pond serve): describe, get, put, txn, call, "
      "batch, probe");
  cmd->require_subcommand(1);
  cmd->add_option("--connect", a->address, "the server, HOST:PORT (as pond serve prints it)")
      ->required();
  cmd->add_option("--timeout-ms", a->timeout_ms, "each request's deadline")
      ->check(CLI::Range(1u, 3'600'000u))
      ->capture_default_str();
  AddClientSecurityFlags(cmd, &a->security);
  cmd->footer(
      "VALUE and ARGS: hex:HEX, i64:N or u64:N (8 bytes, little-endian), or text; a value is "
      "zero-padded to its table's size. KEY: decimal, or hex after 0x.\n"
      "Exit codes: 0 committed (or described); 1 get found no such key; 2 bad input; 3 "
      "ABORTED (probe: a shard did not commit in time); 4 REJECTED by the server; 5 UNKNOWN (it "
      "may or may not have committed); 6 no server reachable. batch: 0 if every line committed, "
      "else the code of the first line that did not.");
  auto on = [a, action](const std::string& sub) {
    return [a, action, sub] { *action = [a, sub] { return RunClient(*a, sub); }; };
  };
  cmd->add_subcommand("describe", "The cluster: its CNs' addresses, tables and procedures")
      ->callback(on("describe"));
  CLI::App* get = cmd->add_subcommand("get", "Read one key (exit 1 if absent)");
  get->add_option("TABLE", a->table)->required();
  get->add_option("KEY", a->key)->required();
  get->callback(on("get"));
  CLI::App* put = cmd->add_subcommand("put", "Set one key's value, creating it if absent");
  put->add_option("TABLE", a->table)->required();
  put->add_option("KEY", a->key)->required();
  put->add_option("VALUE", a->value)->required();
  put->callback(on("put"));
  CLI::App* txn = cmd->add_subcommand(
      "txn",
      "One transaction of several operations, all or nothing: get:T:K put:T:K:V insert:T:K:V "
      "delete:T:K, and conditions if:T:K:V (the value is V) absent:T:K (the key is absent)");
  txn->add_flag("--read-only", a->read_only, "a snapshot read: get, if and absent only");
  txn->add_option("OP", a->ops, "operations, in order")->required();
  txn->callback(on("txn"));
  CLI::App* call = cmd->add_subcommand("call", "Call a procedure by name with argument bytes");
  call->add_option("PROCEDURE", a->procedure)->required();
  call->add_option("ARGS", a->args, "argument bytes, concatenated in order");
  call->add_option("--route-key", a->route_key, "run it where this key's shard is managed");
  call->callback(on("call"));
  AddManyCommands(cmd, a.get(), on);
}

}  // namespace pond::tools
