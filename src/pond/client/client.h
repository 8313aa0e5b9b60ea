// pond::client: a C++ client of Pond's client API (proto/pond/v1/pond.proto, docs/clients.md),
// synchronous, for programs outside the cluster — `pond client`, `pond bench ... --connect`.
//
//   auto c = client::Client::Connect("127.0.0.1:7400").value();
//   client::Reply r = c->Execute(client::Request().Read("checking", 4097).Put("kv", 1, "x..."));
//   if (r.answer.committed()) ... r.values[0] ...
//   auto t = c->Begin();                       // one interactive transaction
//   t->AddRW("checking", 4097);
//   client::Reply e = t->Execute();            // the values read; answer OPEN while it goes on
//   t->Write("checking", 4097, new_value);
//   client::Answer done = t->Commit();
//
// Every answer has an outcome (Outcome): COMMITTED, ABORTED (with a reason), UNKNOWN (it may or
// may not have committed: find out by reading), REJECTED (refused before anything ran).
//
// Fail-over: Connect asks the server for every CN's client address (Describe). When the address
// in use fails (its channel is down, or a call on it fails UNAVAILABLE), the client moves to the
// next one. What cannot have changed anything — Describe, read-only requests and procedures, a
// request the server refused unrun because it was stopping — is sent again there; what may have
// (a read-write request or procedure in flight, an interactive commit) is answered UNKNOWN and
// never resent. An interactive transaction whose connection fails before its commit was sent is
// ABORTED (reason DISCONNECTED): the server aborts a transaction whose stream ends.
//
// Pipelines: Client::OpenPipeline gives a stream on which many one-shot requests go out without
// waiting, several to a message, and come back as they finish (Pipeline below). A cluster of CN
// daemons also says which CN manages each shard (Describe's routing), and a pipeline then sends
// a read-write call with a route key straight to that CN, on a stream of its own, rather than
// through the CN it reached, which would send it on.
//
// Thread rules: a Client, and a Transaction or Pipeline, are used by one thread at a time (one
// Client per thread for concurrency: each has its own connection). A Transaction must not outlive
// its Client.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pond/status.h"

namespace grpc {
class ChannelCredentials;
}

namespace pond::v1 {
class Add;
class ExecuteRequest;
class InteractiveRequest;
class PipelinedRequest;
class PipelineResponse;
}  // namespace pond::v1

namespace pond::client {

enum class Outcome : uint8_t { kCommitted, kAborted, kUnknown, kRejected, kOpen };
// "COMMITTED", "ABORTED", "UNKNOWN", "REJECTED", "OPEN".
const char* OutcomeName(Outcome o);

// pond.v1.AbortReason, in its order.
enum class AbortReason : uint8_t {
  kNone,
  kLockConflict,
  kNewerVersion,
  kSnapshotTooOld,
  kTornRead,
  kInvisibleWait,
  kDuplicateKey,
  kValidation,
  kUser,
  kMnUnreachable,
  kConditionFailed,
  kDisconnected,
  kStopping,
  kOther,
  kTableFull,
  kNotSent,
};
// "lock conflict", ...: the words of AbortCounts for Pond's own reasons.
const char* AbortReasonWords(AbortReason r);

struct Answer {
  Outcome outcome = Outcome::kUnknown;
  AbortReason reason = AbortReason::kNone;  // kAborted only
  std::string message;                      // why, unless committed or open
  bool committed() const { return outcome == Outcome::kCommitted; }
  // "COMMITTED", "ABORTED (lock conflict): lock conflict", "REJECTED: no table \"x\"".
  std::string ToString() const;
};

// A value read: `found` false if the key does not exist.
struct Value {
  std::string table;
  uint64_t key = 0;
  bool found = false;
  std::string bytes;
};

struct Reply {
  Answer answer;
  std::vector<Value> values;  // Execute: the reads' values, in order
};

struct CallReply {
  Answer answer;
  std::string reply;  // what the procedure answered
};

struct TableInfo {
  std::string name;
  uint32_t id = 0;
  uint32_t value_bytes = 0;
  uint64_t capacity = 0;
};

struct ProcedureInfo {
  std::string name;
  bool read_only = false;
  uint32_t args_bytes = 0;  // 0: any size
};

// Which CN manages each shard, and where clients reach it (pond.v1.Routing).
struct Routing {
  int shard_bits = 0;
  std::vector<uint16_t> shard_cns;            // 1 << shard_bits of them
  std::vector<std::string> cn_address_by_id;  // "" for a CN taking no clients
  uint64_t version = 0;
  // The client address of the CN managing `route_key`'s shard; "" if none is known.
  const std::string& AddressOf(uint64_t route_key) const;
};

struct Description {
  std::string cluster;
  std::vector<std::string> cn_addresses;
  std::vector<TableInfo> tables;
  std::vector<ProcedureInfo> procedures;
  uint32_t keys_per_request_max = 0;
  uint32_t message_bytes_max = 0;
  uint32_t pipeline_batch_max = 0;      // requests in one Pipeline message
  uint32_t pipeline_in_flight_max = 0;  // a Pipeline's requests the server runs at once
  std::string isolation;                // "sr" or "si"
  // Absent when calls are not routed by clients (one server fronts every CN, or the protocol
  // does not route), or when the server's map did not hold together (then it is not used).
  std::optional<Routing> routing;
  const TableInfo* Table(std::string_view name) const;
  const ProcedureInfo* Procedure(std::string_view name) const;
};

// A one-shot transaction (Client::Execute), built by chaining. Values are bytes in a string of
// exactly the table's value size.
class Request {
 public:
  explicit Request(bool read_only = false);
  ~Request();
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  Request(const Request& other);
  Request& operator=(const Request& other);

  Request& Read(std::string_view table, uint64_t key);
  Request& Put(std::string_view table, uint64_t key, std::string_view value);
  Request& Insert(std::string_view table, uint64_t key, std::string_view value);
  Request& Delete(std::string_view table, uint64_t key);
  // Conditions on values as read: the transaction aborts (CONDITION_FAILED) unless they hold.
  Request& IfEquals(std::string_view table, uint64_t key, std::string_view value);
  Request& IfAbsent(std::string_view table, uint64_t key);
  bool read_only() const;

 private:
  friend class Client;
  friend class Pipeline;
  std::unique_ptr<v1::ExecuteRequest> r_;
};

// TLS toward the CNs (docs/clients.md "Security"), as PEM text: the library reads no files.
struct ClientTls {
  std::string ca_pem;  // the cluster's CA: a CN must show a certificate it signed
  // This client's certificate and key, which the CN checks; empty for a client that proves who
  // it is with a bearer token instead (ClientOptions::bearer_token).
  std::string cert_pem, key_pem;
};

struct ClientOptions {
  uint32_t timeout_ms = 10'000;  // each request's deadline
  // Learn every CN's address from Describe and fail over to them; else only the one given.
  bool follow_cns = true;
  // TLS with these credentials; or plaintext, only when `insecure` says so by name. Connect
  // refuses options with neither (InvalidArgument), as a CN refuses to serve plaintext unasked.
  std::optional<ClientTls> tls;
  bool insecure = false;
  // Sent as `authorization: Bearer TOKEN` with every call (over TLS only): who this client is,
  // for a CN whose access rules name the token (docs/clients.md "Roles").
  std::string bearer_token;
};

class Client;

// One answer of a Pipeline, under the id its request was given.
struct PipelinedReply {
  uint64_t id = 0;
  Answer answer;
  std::vector<Value> values;  // an Execute's: its reads' values, in order
  std::string reply;          // a Call's: what the procedure answered
};

// Many one-shot requests on one stream: Execute and Call queue a request and name it by an id,
// Flush sends what is queued (as few messages as the server's limits allow), and Receive waits
// for answers, which come in the order the requests finish. Each answer is the one the unary
// Client::Execute or Call would give, fail-over included: when the stream fails, a request in
// flight that cannot have changed anything (read-only, a read-only procedure, or answered
// STOPPING) is sent again on the next address, one that may have is answered UNKNOWN, and one
// never sent goes out on the new stream. There is no deadline per request; the pipeline is
// cancelled when dropped (the server still runs what it was sent).
//
// Routed calls (a read-write Call with a route key, when the client has a routing map) go on a
// stream to the CN managing the key's shard, one stream per such CN. When one of those streams
// fails, the same rules hold for what it carried, and the pipeline sends that CN's calls
// through the address in use from then on, as an unrouted client would.
class Pipeline {
 public:
  ~Pipeline();
  uint64_t Execute(const Request& r);
  uint64_t Call(std::string_view procedure, std::string_view args,
                std::optional<uint64_t> route_key = std::nullopt);
  void Flush();
  // Flushes, then returns every answer that has come, waiting for one if none has. Empty only
  // when nothing is in flight.
  std::vector<PipelinedReply> Receive();
  // Requests queued or sent and not yet answered.
  size_t in_flight() const { return requests_.size(); }

 private:
  friend class Client;
  struct Stream;
  struct Sent;
  struct Completions;
  explicit Pipeline(Client* c);
  // `home`: the address a routed call goes to (an index into the client's addresses).
  uint64_t Queue(std::unique_ptr<v1::PipelinedRequest> r, bool safe,
                 std::optional<size_t> home = std::nullopt);
  // Where a request goes now: its home, unless that CN's stream failed, else the address in use.
  size_t Target(const Sent& s) const;
  // Puts request `id` on the stream to its target (opened if there is none).
  void Enqueue(uint64_t id);
  Stream& StreamTo(size_t address);
  // Writes what `s` has queued, one message at a time, as far as the server's limits allow.
  void Send(Stream& s);
  // Handles one completion of any stream; waits for it.
  void Next();
  // Takes one message's answers into ready_.
  void Take(Stream& s, v1::PipelineResponse& resp);
  // Ends a stream that has finished: answers or requeues its requests, and moves on from its
  // address (the next one, if it was the address in use; that CN's calls unrouted, if not).
  void Broke(size_t address);

  Client* c_;
  std::unique_ptr<Completions> cq_;
  std::map<size_t, std::unique_ptr<Stream>> streams_;   // by address index
  std::map<uint64_t, std::unique_ptr<Sent>> requests_;  // unanswered, by id
  std::vector<bool> unrouted_;                          // by address: its routed stream failed
  std::vector<PipelinedReply> ready_;                   // answered, not yet returned
  uint64_t next_id_ = 1;
  bool dropping_ = false;  // being destroyed: streams are only wound down
};

// One interactive transaction: one gRPC stream. Adds and writes are kept here and sent with the
// next Execute or Commit, so a transaction costs one round trip per Execute and one for Commit;
// an add or write the server refuses is answered by that Execute or Commit. Dropping an open
// Transaction cancels its stream, which the server aborts.
class Transaction {
 public:
  ~Transaction();
  void AddRO(std::string_view table, uint64_t key);
  void AddRW(std::string_view table, uint64_t key);
  void Insert(std::string_view table, uint64_t key, std::string_view value);
  void Delete(std::string_view table, uint64_t key);
  // Locks (read-write) and reads the keys added since the last Execute. OPEN with their values
  // (read-only keys first, then read-write, per Add... call order), or the answer that ended
  // the transaction.
  Reply Execute();
  void Write(std::string_view table, uint64_t key, std::string_view value);
  Answer Commit();
  Answer Abort();
  bool open() const { return open_; }

 private:
  friend class Client;
  struct Stream;
  Transaction(Client* c, std::unique_ptr<Stream> s, bool read_only);
  // Sends the pending steps and `last`, reads their answers; the first that is not OPEN ends
  // the transaction. `commit`: `last` is the commit (a lost answer is then UNKNOWN).
  Reply Send(std::unique_ptr<v1::InteractiveRequest> last, bool commit);
  // The add step being built (a new one after anything else).
  v1::Add* PendingAdd();

  Client* c_;
  std::unique_ptr<Stream> s_;
  bool read_only_;
  bool begun_ = false;
  bool open_ = true;
  std::vector<std::unique_ptr<v1::InteractiveRequest>> pending_;
};

class Client {
 public:
  // Connects to `address` ("HOST:PORT") and asks it to Describe the cluster. Unavailable with
  // one line if it cannot be reached.
  static Result<std::unique_ptr<Client>> Connect(const std::string& address,
                                                 ClientOptions options = {});
  // As above, trying `addresses` in order until one answers: the first is preferred, the rest
  // are where to go if it is down (a client placed on a CN that has just failed).
  static Result<std::unique_ptr<Client>> Connect(std::vector<std::string> addresses,
                                                 ClientOptions options = {});
  ~Client();

  Result<Description> Describe();
  Reply Execute(const Request& r);
  // A registered procedure by name; `route_key` runs it where that key's shard is managed.
  CallReply Call(std::string_view procedure, std::string_view args,
                 std::optional<uint64_t> route_key = std::nullopt);
  std::unique_ptr<Transaction> Begin(bool read_only = false);
  // A pipeline on this client's connection; it must not outlive the client.
  std::unique_ptr<Pipeline> OpenPipeline();

  // The address in use, and every address known (the first one given first).
  const std::string& address() const;
  const std::vector<std::string>& addresses() const { return addresses_; }
  // Times the client moved to another address.
  uint64_t failovers() const { return failovers_; }

 private:
  friend class Transaction;
  friend class Pipeline;
  struct Channel;
  Client(std::vector<std::string> addresses, ClientOptions o);
  Channel& Current() { return ChannelAt(current_); }
  Channel& ChannelAt(size_t address);
  // The credentials every channel is made with, from o_ (made once).
  std::shared_ptr<grpc::ChannelCredentials> Credentials();
  // The index of the address of the CN managing `route_key`'s shard, if routing is on and it
  // is known.
  std::optional<size_t> RouteAddress(uint64_t route_key) const;
  // Moves to the next address (after a failure on the current one).
  void FailOver();
  // Before a request: skips addresses whose channel is known to be down, one round at most.
  void SkipFailedChannels();
  template <typename R, typename Rpc>
  R Unary(bool safe, const Rpc& rpc);

  ClientOptions o_;
  std::shared_ptr<grpc::ChannelCredentials> creds_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<Channel>> channels_;  // by address, made on first use
  size_t current_ = 0;
  uint64_t failovers_ = 0;
  // The servers' message limit (Describe at Connect; 0 before): a larger request is refused
  // here, REJECTED, never sent, so that it is never UNKNOWN.
  uint32_t send_bytes_max_ = 0;
  uint32_t pipeline_batch_max_ = 1;                // from Describe
  uint32_t pipeline_in_flight_max_ = 1;            // from Describe
  std::vector<std::string> read_only_procedures_;  // from the last Describe: safe to resend
  std::optional<Routing> routing_;                 // from the last Describe
};

}  // namespace pond::client
