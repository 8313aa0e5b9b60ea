#include "pond/client/client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "pond/client/client_internal.h"
#include "pond/v1/pond.grpc.pb.h"

namespace pond::client {

using detail::FromProto;
using detail::FromRpcFailure;
using detail::Make;
using detail::Values;

namespace {

// What a client accepts in one message: more than any server sends (its limit is 4 MiB by
// default), so that an answer is never lost to the client's own limit.
constexpr int kReceiveBytesMax = 64 << 20;
// A channel whose server went away tries again soon: fail-over back to a restarted server must
// not wait for gRPC's default backoff (up to two minutes).
constexpr int kReconnectBackoffMs = 100, kReconnectBackoffMaxMs = 1000;
// A server that goes silent without closing its connection (its host cut off, its process
// stopped) is noticed by a ping it does not answer: within kKeepaliveTimeMs + kKeepaliveTimeoutMs
// the channel fails, and a pipeline waiting on it (which has no deadline) fails over as after a
// reset. Pings go only while a call is open, and go on without data: a pipeline waiting for a
// slow answer sends none. The server accepts pings this often (client_server.cc).
constexpr int kKeepaliveTimeMs = 2000, kKeepaliveTimeoutMs = 3000;
// How long Connect keeps asking a cluster that does not answer yet (Client::Connect).
constexpr uint32_t kConnectRetryMs = 2000;

constexpr const char* kReasonWords[] = {
    "none",      "lock conflict",  "newer version",    "snapshot too old",
    "torn read", "invisible wait", "duplicate key",    "validation",
    "user",      "MN unreachable", "condition failed", "disconnected",
    "stopping",  "other",          "table full",       "not sent"};
static_assert(std::size(kReasonWords) == static_cast<size_t>(AbortReason::kNotSent) + 1);
static_assert(static_cast<int>(AbortReason::kOther) == v1::OTHER &&
              static_cast<int>(AbortReason::kTableFull) == v1::TABLE_FULL &&
              static_cast<int>(AbortReason::kNotSent) == v1::NOT_SENT);

std::chrono::system_clock::time_point Deadline(uint32_t ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

void SetKey(v1::Key* k, std::string_view table, uint64_t key) {
  k->set_table(std::string(table));
  k->set_key(key);
}

void SetKeyValue(v1::KeyValue* kv, std::string_view table, uint64_t key, std::string_view value) {
  kv->set_table(std::string(table));
  kv->set_key(key);
  kv->set_value(std::string(value));
}

}  // namespace

namespace detail {

Answer FromProto(const v1::Answer& a) {
  Answer out;
  switch (a.outcome()) {
    case v1::COMMITTED:
      out.outcome = Outcome::kCommitted;
      break;
    case v1::ABORTED:
      out.outcome = Outcome::kAborted;
      break;
    case v1::REJECTED:
      out.outcome = Outcome::kRejected;
      break;
    case v1::OPEN:
      out.outcome = Outcome::kOpen;
      break;
    default:
      // UNKNOWN, or an outcome this client does not know: nothing can be assumed.
      out.outcome = Outcome::kUnknown;
      break;
  }
  if (out.outcome == Outcome::kAborted) {
    const int r = static_cast<int>(a.reason());
    // A reason newer than this client is "other": the message still names it.
    out.reason = r > 0 && r <= static_cast<int>(AbortReason::kNotSent) ? static_cast<AbortReason>(r)
                                                                       : AbortReason::kOther;
  }
  out.message = a.message();
  return out;
}

Answer Make(Outcome o, AbortReason r, std::string message) {
  Answer a;
  a.outcome = o;
  a.reason = r;
  a.message = std::move(message);
  return a;
}

Answer FromRpcFailure(const grpc::Status& s, const std::string& address, bool may_have_run) {
  const std::string why = address + ": " + s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::UNIMPLEMENTED:
      return Make(Outcome::kRejected, AbortReason::kNone, why);
    default:
      return Make(Outcome::kUnknown, AbortReason::kNone,
                  may_have_run ? "no answer from " + why + " (the outcome is unknown)"
                               : "no answer from " + why);
  }
}

std::vector<Value> Values(const google::protobuf::RepeatedPtrField<v1::Value>& vs) {
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(vs.size()));
  for (const v1::Value& v : vs) out.push_back(Value{v.table(), v.key(), v.found(), v.value()});
  return out;
}

}  // namespace detail

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kCommitted:
      return "COMMITTED";
    case Outcome::kAborted:
      return "ABORTED";
    case Outcome::kRejected:
      return "REJECTED";
    case Outcome::kOpen:
      return "OPEN";
    default:
      return "UNKNOWN";
  }
}

const char* AbortReasonWords(AbortReason r) { return kReasonWords[static_cast<size_t>(r)]; }

std::string Answer::ToString() const {
  std::string s = OutcomeName(outcome);
  if (outcome == Outcome::kAborted) s += std::string(" (") + AbortReasonWords(reason) + ")";
  if (!message.empty()) s += ": " + message;
  return s;
}

const TableInfo* Description::Table(std::string_view name) const {
  for (const TableInfo& t : tables) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const ProcedureInfo* Description::Procedure(std::string_view name) const {
  for (const ProcedureInfo& p : procedures) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const std::string& Routing::AddressOf(uint64_t route_key) const {
  static const std::string kNone;
  const uint64_t shard = route_key & ((uint64_t{1} << shard_bits) - 1);
  if (shard >= shard_cns.size() || shard_cns[shard] >= cn_address_by_id.size()) return kNone;
  return cn_address_by_id[shard_cns[shard]];
}

namespace {

// A server's map, if it holds together: every shard named, every CN it names listed. A map that
// does not is not used (calls then go through the address in use, as without one); a client
// must not fail, or index past a vector, on what a server sent.
std::optional<Routing> RoutingOf(const v1::DescribeResponse& resp) {
  if (!resp.has_routing()) return std::nullopt;
  const v1::Routing& r = resp.routing();
  if (r.shard_bits() == 0 || r.shard_bits() > 16 ||
      static_cast<uint64_t>(r.shard_cns_size()) != (uint64_t{1} << r.shard_bits())) {
    return std::nullopt;
  }
  Routing out;
  out.shard_bits = static_cast<int>(r.shard_bits());
  out.version = r.version();
  out.cn_address_by_id.assign(r.cn_address_by_id().begin(), r.cn_address_by_id().end());
  out.shard_cns.reserve(static_cast<size_t>(r.shard_cns_size()));
  for (uint32_t cn : r.shard_cns()) {
    if (cn >= out.cn_address_by_id.size()) return std::nullopt;
    out.shard_cns.push_back(static_cast<uint16_t>(cn));
  }
  return out;
}

}  // namespace

// ---- Request ---------------------------------------------------------------------------------

Request::Request(bool read_only) : r_(std::make_unique<v1::ExecuteRequest>()) {
  r_->set_read_only(read_only);
}
Request::~Request() = default;
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&&) noexcept = default;
Request::Request(const Request& other) : r_(std::make_unique<v1::ExecuteRequest>(*other.r_)) {}
Request& Request::operator=(const Request& other) {
  r_ = std::make_unique<v1::ExecuteRequest>(*other.r_);
  return *this;
}

bool Request::read_only() const { return r_->read_only(); }

Request& Request::Read(std::string_view table, uint64_t key) {
  SetKey(r_->add_reads(), table, key);
  return *this;
}

Request& Request::Put(std::string_view table, uint64_t key, std::string_view value) {
  v1::Write* w = r_->add_writes();
  w->set_kind(v1::Write::PUT);
  w->set_table(std::string(table));
  w->set_key(key);
  w->set_value(std::string(value));
  return *this;
}

Request& Request::Insert(std::string_view table, uint64_t key, std::string_view value) {
  Put(table, key, value);
  r_->mutable_writes()->rbegin()->set_kind(v1::Write::INSERT);
  return *this;
}

Request& Request::Delete(std::string_view table, uint64_t key) {
  Put(table, key, "");
  r_->mutable_writes()->rbegin()->set_kind(v1::Write::DELETE);
  return *this;
}

Request& Request::IfEquals(std::string_view table, uint64_t key, std::string_view value) {
  v1::Condition* c = r_->add_conditions();
  c->set_table(std::string(table));
  c->set_key(key);
  c->set_equals(std::string(value));
  return *this;
}

Request& Request::IfAbsent(std::string_view table, uint64_t key) {
  v1::Condition* c = r_->add_conditions();
  c->set_table(std::string(table));
  c->set_key(key);
  c->set_absent(true);
  return *this;
}

// ---- Client ----------------------------------------------------------------------------------

struct Transaction::Stream {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::InteractiveRequest, v1::InteractiveResponse>> rw;
  std::string address;
  bool finished = false;

  // Ends the call and returns its status (once).
  grpc::Status Finish() {
    if (finished) return grpc::Status::OK;
    finished = true;
    rw->WritesDone();
    return rw->Finish();
  }
};

Client::Client(std::vector<std::string> addresses, ClientOptions o)
    : o_(o), addresses_(std::move(addresses)) {
  channels_.resize(addresses_.size());
}

Client::~Client() = default;

std::shared_ptr<grpc::ChannelCredentials> Client::Credentials() {
  if (creds_ == nullptr) {
    if (o_.insecure) {
      creds_ = grpc::InsecureChannelCredentials();
    } else {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = o_.tls->ca_pem;
      ssl.pem_private_key = o_.tls->key_pem;
      ssl.pem_cert_chain = o_.tls->cert_pem;
      creds_ = grpc::SslCredentials(ssl);
      if (!o_.bearer_token.empty()) {
        creds_ = grpc::CompositeChannelCredentials(creds_,
                                                   grpc::AccessTokenCredentials(o_.bearer_token));
      }
    }
  }
  return creds_;
}

Result<std::unique_ptr<Client>> Client::Connect(const std::string& address, ClientOptions options) {
  return Connect(std::vector<std::string>{address}, options);
}

Result<std::unique_ptr<Client>> Client::Connect(std::vector<std::string> addresses,
                                                ClientOptions options) {
  std::erase(addresses, std::string());
  if (addresses.empty()) return InvalidArgument("no address to connect to");
  if (options.insecure && !options.bearer_token.empty()) {
    return InvalidArgument("a bearer token goes only over TLS, never in plaintext");
  }
  if (options.tls.has_value() == options.insecure) {
    return InvalidArgument(options.insecure
                               ? "both TLS credentials and insecure (plaintext) given: pick one"
                               : "no TLS credentials: give the cluster's CA and a client "
                                 "certificate, or ask for plaintext by name (insecure)");
  }
  std::unique_ptr<Client> c(new Client(std::move(addresses), options));
  // The first request may meet a server still starting, or a first connection attempt that
  // failed for a moment (a loaded machine): Connect asks again, with backoff, for up to
  // kConnectRetryMs (the request timeout, if shorter) before it says the cluster is unreachable.
  // Describe changes nothing, so asking again is safe.
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(std::min(kConnectRetryMs, options.timeout_ms));
  auto backoff = std::chrono::milliseconds(kReconnectBackoffMs);
  Result<Description> d = c->Describe();
  while (!d.ok() && d.status().code() == Code::kUnavailable &&
         std::chrono::steady_clock::now() + backoff < give_up) {
    std::this_thread::sleep_for(backoff);
    backoff = std::min(2 * backoff, std::chrono::milliseconds(kReconnectBackoffMaxMs));
    d = c->Describe();
  }
  if (d.status().code() == Code::kUnavailable) {
    // A TLS handshake that fails looks like a server that is not there; say which to check.
    return Unavailable(d.status().message() +
                       (options.insecure ? " (is it up, and does it take plaintext clients?)"
                                         : " (is it up, and does it take TLS with this "
                                           "client's certificate and CA?)"));
  }
  if (!d.ok()) return d.status();
  // gRPC refuses to send a message past the limit, before a byte of it leaves: a server cuts a
  // large one off only after taking part of it, and may drop the connection with it.
  if (d->message_bytes_max > 0) {
    c->send_bytes_max_ = d->message_bytes_max;
    c->channels_[c->current_].reset();  // made again, with the limit, at the next request
  }
  if (options.follow_cns) {
    for (const std::string& a : d->cn_addresses) {
      if (std::find(c->addresses_.begin(), c->addresses_.end(), a) == c->addresses_.end()) {
        c->addresses_.push_back(a);
        c->channels_.emplace_back();
      }
    }
  }
  return c;
}

const std::string& Client::address() const { return addresses_[current_]; }

std::optional<size_t> Client::RouteAddress(uint64_t route_key) const {
  if (!routing_) return std::nullopt;
  const std::string& a = routing_->AddressOf(route_key);
  if (a.empty()) return std::nullopt;
  const auto it = std::find(addresses_.begin(), addresses_.end(), a);
  if (it == addresses_.end()) return std::nullopt;
  return static_cast<size_t>(it - addresses_.begin());
}

Client::Channel& Client::ChannelAt(size_t address) {
  std::unique_ptr<Channel>& ch = channels_[address];
  if (ch == nullptr) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kReceiveBytesMax);
    if (send_bytes_max_ > 0) args.SetMaxSendMessageSize(static_cast<int>(send_bytes_max_));
    // A connection of its own, not shared with other Clients of this process: clients on
    // separate threads then run in parallel, as separate client processes would.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kReconnectBackoffMs);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kReconnectBackoffMs);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kReconnectBackoffMaxMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    ch = std::make_unique<Channel>();
    ch->channel = grpc::CreateCustomChannel(addresses_[address], Credentials(), args);
    ch->stub = v1::Pond::NewStub(ch->channel);
  }
  return *ch;
}

void Client::FailOver() {
  if (addresses_.size() < 2) return;
  current_ = (current_ + 1) % addresses_.size();
  failovers_++;
}

void Client::SkipFailedChannels() {
  for (size_t i = 0; i + 1 < addresses_.size(); i++) {
    const grpc_connectivity_state s = Current().channel->GetState(/*try_to_connect=*/true);
    if (s != GRPC_CHANNEL_TRANSIENT_FAILURE && s != GRPC_CHANNEL_SHUTDOWN) return;
    FailOver();
  }
}

Result<Description> Client::Describe() {
  std::string last;
  for (size_t attempt = 0; attempt < addresses_.size(); attempt++) {
    if (attempt == 0) SkipFailedChannels();
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(o_.timeout_ms));
    v1::DescribeResponse resp;
    const grpc::Status s = Current().stub->Describe(&ctx, v1::DescribeRequest(), &resp);
    if (s.ok()) {
      Description d;
      d.cluster = resp.cluster();
      d.isolation = resp.isolation();
      d.cn_addresses.assign(resp.cn_addresses().begin(), resp.cn_addresses().end());
      for (const v1::TableInfo& t : resp.tables()) {
        d.tables.push_back(TableInfo{t.name(), t.id(), t.value_bytes(), t.capacity()});
      }
      for (const v1::ProcedureInfo& p : resp.procedures()) {
        d.procedures.push_back(ProcedureInfo{p.name(), p.read_only(), p.args_bytes()});
      }
      d.keys_per_request_max = resp.keys_per_request_max();
      d.message_bytes_max = resp.message_bytes_max();
      d.pipeline_batch_max = resp.pipeline_batch_max();
      d.pipeline_in_flight_max = resp.pipeline_in_flight_max();
      d.routing = RoutingOf(resp);
      // Routing sends calls to other CNs' addresses, which a client told to keep to one does
      // not go to.
      routing_ = o_.follow_cns ? d.routing : std::nullopt;
      pipeline_batch_max_ = std::max<uint32_t>(1, resp.pipeline_batch_max());
      pipeline_in_flight_max_ = std::max<uint32_t>(1, resp.pipeline_in_flight_max());
      read_only_procedures_.clear();
      for (const ProcedureInfo& p : d.procedures) {
        if (p.read_only) read_only_procedures_.push_back(p.name);
      }
      return d;
    }
    last = address() + ": " + s.error_message();
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
        s.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      return PermissionDenied(last);  // the server is there and said no: no other CN says yes
    }
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return Unavailable(last);
    FailOver();
  }
  return Unavailable("cannot reach " + last);
}

Reply Client::Execute(const Request& r) {
  return Unary<Reply>(r.read_only(), [&](grpc::ClientContext* ctx, Reply* out) {
    v1::ExecuteResponse resp;
    const grpc::Status s = Current().stub->Execute(ctx, *r.r_, &resp);
    if (s.ok()) {
      out->answer = FromProto(resp.answer());
      out->values = Values(resp.values());
    }
    return s;
  });
}

CallReply Client::Call(std::string_view procedure, std::string_view args,
                       std::optional<uint64_t> route_key) {
  const bool read_only = std::find(read_only_procedures_.begin(), read_only_procedures_.end(),
                                   procedure) != read_only_procedures_.end();
  v1::CallRequest req;
  req.set_procedure(std::string(procedure));
  req.set_args(std::string(args));
  if (route_key) req.set_route_key(*route_key);
  return Unary<CallReply>(read_only, [&](grpc::ClientContext* ctx, CallReply* out) {
    v1::CallResponse resp;
    const grpc::Status s = Current().stub->Call(ctx, req, &resp);
    if (s.ok()) {
      out->answer = FromProto(resp.answer());
      out->reply = std::move(*resp.mutable_reply());
    }
    return s;
  });
}

// One request with fail-over: `rpc` on the address in use; on UNAVAILABLE the client moves to the
// next address and, if the request is `safe` to send again, sends it there (each address once).
// An answer ABORTED for STOPPING means the server ran nothing: sent again too, whatever it is.
template <typename R, typename Rpc>
R Client::Unary(bool safe, const Rpc& rpc) {
  R out;
  for (size_t attempt = 0; attempt < addresses_.size(); attempt++) {
    SkipFailedChannels();
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(o_.timeout_ms));
    out = R{};
    const grpc::Status s = rpc(&ctx, &out);
    if (s.ok()) {
      if (out.answer.outcome == Outcome::kAborted && out.answer.reason == AbortReason::kStopping &&
          attempt + 1 < addresses_.size()) {
        FailOver();
        continue;
      }
      return out;
    }
    out.answer = FromRpcFailure(s, address(), /*may_have_run=*/!safe);
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return out;
    FailOver();
    if (!safe) return out;
  }
  return out;
}

std::unique_ptr<Transaction> Client::Begin(bool read_only) {
  SkipFailedChannels();
  auto s = std::make_unique<Transaction::Stream>();
  s->address = address();
  s->ctx.set_deadline(Deadline(o_.timeout_ms));
  s->rw = Current().stub->Interactive(&s->ctx);
  return std::unique_ptr<Transaction>(new Transaction(this, std::move(s), read_only));
}

// ---- Transaction -----------------------------------------------------------------------------

Transaction::Transaction(Client* c, std::unique_ptr<Stream> s, bool read_only)
    : c_(c), s_(std::move(s)), read_only_(read_only) {}

Transaction::~Transaction() {
  if (!s_->finished) {
    // The server aborts a transaction whose stream is cancelled.
    if (open_) s_->ctx.TryCancel();
    s_->Finish();
  }
}

namespace {

std::unique_ptr<v1::InteractiveRequest> NewStep() {
  return std::make_unique<v1::InteractiveRequest>();
}

}  // namespace

void Transaction::AddRO(std::string_view table, uint64_t key) {
  SetKey(PendingAdd()->add_read_only(), table, key);
}
void Transaction::AddRW(std::string_view table, uint64_t key) {
  SetKey(PendingAdd()->add_read_write(), table, key);
}
void Transaction::Insert(std::string_view table, uint64_t key, std::string_view value) {
  SetKeyValue(PendingAdd()->add_inserts(), table, key, value);
}
void Transaction::Delete(std::string_view table, uint64_t key) {
  SetKey(PendingAdd()->add_deletes(), table, key);
}

void Transaction::Write(std::string_view table, uint64_t key, std::string_view value) {
  if (pending_.empty() || !pending_.back()->has_write()) {
    pending_.push_back(NewStep());
    pending_.back()->mutable_write();
  }
  SetKeyValue(pending_.back()->mutable_write()->add_puts(), table, key, value);
}

v1::Add* Transaction::PendingAdd() {
  if (pending_.empty() || !pending_.back()->has_add()) {
    pending_.push_back(NewStep());
    pending_.back()->mutable_add();
  }
  return pending_.back()->mutable_add();
}

Reply Transaction::Execute() {
  auto step = NewStep();
  step->mutable_execute();
  return Send(std::move(step), /*commit=*/false);
}

Answer Transaction::Commit() {
  auto step = NewStep();
  step->mutable_commit();
  return Send(std::move(step), /*commit=*/true).answer;
}

Answer Transaction::Abort() {
  if (!begun_ && open_) {
    // Nothing reached the server: cancelling the stream is all there is to do.
    open_ = false;
    s_->ctx.TryCancel();
    s_->Finish();
    return Make(Outcome::kAborted, AbortReason::kUser, "aborted by the client");
  }
  auto step = NewStep();
  step->mutable_abort();
  return Send(std::move(step), /*commit=*/false).answer;
}

Reply Transaction::Send(std::unique_ptr<v1::InteractiveRequest> last, bool commit) {
  Reply out;
  if (!open_) {
    out.answer = Make(Outcome::kRejected, AbortReason::kNone, "the transaction has ended");
    return out;
  }
  std::vector<std::unique_ptr<v1::InteractiveRequest>> steps;
  if (!begun_) {
    steps.push_back(NewStep());
    steps.back()->mutable_begin()->set_read_only(read_only_);
    begun_ = true;
  }
  for (auto& p : pending_) steps.push_back(std::move(p));
  pending_.clear();
  steps.push_back(std::move(last));
  // Pipelined: every step is written before the first answer is read.
  size_t sent = 0;
  while (sent < steps.size() && s_->rw->Write(*steps[sent])) sent++;
  for (size_t i = 0; i < sent; i++) {
    v1::InteractiveResponse resp;
    if (!s_->rw->Read(&resp)) break;
    Answer a = FromProto(resp.answer());
    if (a.outcome != Outcome::kOpen) {
      open_ = false;
      s_->Finish();
      out.answer = std::move(a);
      return out;
    }
    if (i + 1 == steps.size()) {
      out.answer = std::move(a);
      out.values = Values(resp.values());
      return out;
    }
  }
  // The stream broke before every step was answered. The server aborts a transaction whose
  // stream ends, so only a commit that was sent can have taken effect.
  open_ = false;
  const grpc::Status st = s_->Finish();
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE) c_->FailOver();
  const bool commit_sent = commit && sent == steps.size();
  if (commit_sent) {
    out.answer = FromRpcFailure(st, s_->address, /*may_have_run=*/true);
    out.answer.outcome = Outcome::kUnknown;
  } else if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    out.answer = FromRpcFailure(st, s_->address, false);  // refused at the door: REJECTED
  } else {
    out.answer = Make(Outcome::kAborted, AbortReason::kDisconnected,
                      "the stream to " + s_->address + " ended before commit (" +
                          st.error_message() + "); nothing was committed");
  }
  return out;
}

}  // namespace pond::client
