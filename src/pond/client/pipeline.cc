// Client::Pipeline: many one-shot requests on Pipeline streams (client.h) — one to the address
// in use, and one to each CN that routed calls went to. The rules for a failed stream are the
// unary calls' (client.cc): nothing is sent twice unless it cannot have changed anything, and
// nothing that may have is answered otherwise than UNKNOWN.
//
// The streams are gRPC's asynchronous ones on one completion queue, all driven by the thread
// that calls Receive: waiting on several streams at once is what the blocking API cannot do.
// Each stream has at most one write and one read outstanding (gRPC allows no more), and a stream
// is finished, and forgotten, only once neither is: its tags then point at nothing.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <utility>

#include "pond/base/assert.h"
#include "pond/client/client.h"
#include "pond/client/client_internal.h"
#include "pond/v1/pond.grpc.pb.h"

namespace pond::client {

using detail::FromProto;
using detail::Make;
using detail::Values;

namespace {

// Bytes one request adds to a PipelineRequest beyond its own (tags, lengths, the id).
constexpr size_t kRequestFramingBytes = 32;

enum class Op : uint8_t { kStart, kRead, kWrite, kFinish };

PipelinedReply Local(uint64_t id, Answer a) {
  PipelinedReply r;
  r.id = id;
  r.answer = std::move(a);
  return r;
}

}  // namespace

struct Pipeline::Completions {
  grpc::CompletionQueue cq;
};

struct Pipeline::Stream {
  // A completion's tag: which stream, which operation.
  struct Tag {
    Stream* stream;
    Op op;
  };
  explicit Stream(size_t a)
      : address(a),
        start_tag{this, Op::kStart},
        read_tag{this, Op::kRead},
        write_tag{this, Op::kWrite},
        finish_tag{this, Op::kFinish} {}

  size_t address;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::PipelineRequest, v1::PipelineResponse>> rw;
  Tag start_tag, read_tag, write_tag, finish_tag;
  v1::PipelineRequest out;            // the message being written
  v1::PipelineResponse in;            // the message being read
  grpc::Status status;                // how it ended (Finish)
  std::vector<uint64_t> queued;       // ids waiting for a write, in order
  std::vector<uint64_t> writing_ids;  // the ids of the message being written
  size_t in_flight = 0;               // written, not answered
  bool started = false;               // the call is open: writes and reads may go
  bool starting = true;               // the start has not completed
  bool writing = false;               // a write is outstanding
  bool reading = false;               // a read is outstanding
  bool ended = false;      // no more reads will come: finish once no write is outstanding
  bool finishing = false;  // Finish is outstanding
  bool closing = false;    // the server said it is stopping: write no more here
};

struct Pipeline::Sent {
  v1::PipelinedRequest req;
  bool safe = false;             // cannot have changed anything: may be sent again
  std::optional<size_t> home;    // a routed call's CN, by address
  std::optional<size_t> stream;  // the stream it is queued or written on
  bool sent = false;             // written on that stream
  size_t streams = 0;            // streams it was meant for that ended before it was answered
};

std::unique_ptr<Pipeline> Client::OpenPipeline() {
  return std::unique_ptr<Pipeline>(new Pipeline(this));
}

Pipeline::Pipeline(Client* c) : c_(c), cq_(std::make_unique<Completions>()) {}

Pipeline::~Pipeline() {
  // Cancelled, every stream's outstanding operations complete (failed), and each stream is
  // finished; only then may the streams and the queue go.
  dropping_ = true;
  for (auto& [address, s] : streams_) s->ctx.TryCancel();
  while (!streams_.empty()) Next();
  cq_->cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq_->cq.Next(&tag, &ok)) {
  }
}

uint64_t Pipeline::Execute(const Request& r) {
  auto req = std::make_unique<v1::PipelinedRequest>();
  *req->mutable_execute() = *r.r_;
  return Queue(std::move(req), r.read_only());
}

uint64_t Pipeline::Call(std::string_view procedure, std::string_view args,
                        std::optional<uint64_t> route_key) {
  const std::vector<std::string>& ro = c_->read_only_procedures_;
  const bool read_only = std::find(ro.begin(), ro.end(), procedure) != ro.end();
  auto req = std::make_unique<v1::PipelinedRequest>();
  v1::CallRequest* call = req->mutable_call();
  call->set_procedure(std::string(procedure));
  call->set_args(std::string(args));
  if (route_key) call->set_route_key(*route_key);
  // A read-only call runs where it arrives (hybrid routing sends only read-write calls on).
  std::optional<size_t> home;
  if (route_key && !read_only) home = c_->RouteAddress(*route_key);
  return Queue(std::move(req), read_only, home);
}

uint64_t Pipeline::Queue(std::unique_ptr<v1::PipelinedRequest> r, bool safe,
                         std::optional<size_t> home) {
  const uint64_t id = next_id_++;
  r->set_id(id);
  // Refused here, as the unary calls refuse it: a message past the server's limit is never
  // sent, so it is never UNKNOWN.
  if (c_->send_bytes_max_ > 0 && r->ByteSizeLong() + kRequestFramingBytes > c_->send_bytes_max_) {
    ready_.push_back(Local(id, Make(Outcome::kRejected, AbortReason::kNone,
                                    "the request is larger than the server's message limit (" +
                                        std::to_string(c_->send_bytes_max_) + " bytes)")));
    return id;
  }
  auto sent = std::make_unique<Sent>();
  sent->req = std::move(*r);
  sent->safe = safe;
  sent->home = home;
  requests_.emplace(id, std::move(sent));
  Enqueue(id);
  return id;
}

size_t Pipeline::Target(const Sent& s) const {
  if (s.home && !(*s.home < unrouted_.size() && unrouted_[*s.home])) return *s.home;
  return c_->current_;
}

void Pipeline::Enqueue(uint64_t id) {
  Sent& s = *requests_.at(id);
  Stream& st = StreamTo(Target(s));
  s.stream = st.address;
  s.sent = false;
  st.queued.push_back(id);
}

Pipeline::Stream& Pipeline::StreamTo(size_t address) {
  auto it = streams_.find(address);
  if (it != streams_.end()) return *it->second;
  if (address == c_->current_) {
    c_->SkipFailedChannels();
    address = c_->current_;
    it = streams_.find(address);
    if (it != streams_.end()) return *it->second;
  }
  auto s = std::make_unique<Stream>(address);
  s->rw = c_->ChannelAt(address).stub->PrepareAsyncPipeline(&s->ctx, &cq_->cq);
  s->rw->StartCall(&s->start_tag);
  return *streams_.emplace(address, std::move(s)).first->second;
}

void Pipeline::Flush() {
  for (auto& [address, s] : streams_) Send(*s);
}

void Pipeline::Send(Stream& s) {
  // Sent on the next stream, once this one has ended, if it is closing.
  if (dropping_ || !s.started || s.writing || s.ended || s.closing || s.queued.empty()) return;
  const size_t bytes_max = c_->send_bytes_max_ > 0 ? c_->send_bytes_max_ : (4u << 20);
  // No more in flight than the server runs at once: past that it stops reading the stream.
  const size_t in_flight_max = c_->pipeline_in_flight_max_;
  s.out.Clear();
  size_t bytes = 0, next = 0;
  for (; next < s.queued.size() && s.in_flight < in_flight_max &&
         s.out.requests_size() < static_cast<int>(c_->pipeline_batch_max_);
       next++) {
    Sent& r = *requests_.at(s.queued[next]);
    const size_t b = r.req.ByteSizeLong() + kRequestFramingBytes;
    if (s.out.requests_size() > 0 && bytes + b > bytes_max) break;
    *s.out.add_requests() = r.req;
    bytes += b;
    // Written from here on: if the stream fails now, the server may have it.
    r.sent = true;
    s.in_flight++;
    s.writing_ids.push_back(s.queued[next]);
  }
  if (next == 0) return;
  s.queued.erase(s.queued.begin(), s.queued.begin() + static_cast<ptrdiff_t>(next));
  s.writing = true;
  s.rw->Write(s.out, &s.write_tag);
}

std::vector<PipelinedReply> Pipeline::Receive() {
  Flush();
  while (ready_.empty() && !requests_.empty()) Next();
  return std::exchange(ready_, {});
}

void Pipeline::Next() {
  void* tag = nullptr;
  bool ok = false;
  POND_CHECK_MSG(cq_->cq.Next(&tag, &ok), "a pipeline's completion queue shut down under it");
  auto* t = static_cast<Stream::Tag*>(tag);
  Stream& s = *t->stream;
  switch (t->op) {
    case Op::kStart:
      s.starting = false;
      if (ok) {
        s.started = true;
        s.reading = true;
        s.rw->Read(&s.in, &s.read_tag);
        Send(s);
      } else {
        s.ended = true;  // the call never opened: nothing was written, nothing will be read
      }
      break;
    case Op::kRead:
      s.reading = false;
      if (ok && !dropping_) {
        Take(s, s.in);
        s.reading = true;
        s.rw->Read(&s.in, &s.read_tag);
        Send(s);
      } else {
        s.ended = true;
      }
      break;
    case Op::kWrite:
      s.writing = false;
      if (ok) {
        s.writing_ids.clear();
        Send(s);
      } else {
        // The message never left (the stream had closed): its requests were not sent, and go
        // out again when the stream's end is known (the read that fails with it).
        for (uint64_t id : s.writing_ids) {
          if (auto it = requests_.find(id);
              it != requests_.end() && it->second->stream == s.address) {
            it->second->sent = false;
            s.in_flight--;
          }
        }
        s.queued.insert(s.queued.begin(), s.writing_ids.begin(), s.writing_ids.end());
        s.writing_ids.clear();
      }
      break;
    case Op::kFinish:
      Broke(s.address);
      return;
  }
  if (s.ended && !s.writing && !s.reading && !s.starting && !s.finishing) {
    s.finishing = true;
    s.rw->Finish(&s.status, &s.finish_tag);
  }
}

void Pipeline::Take(Stream& s, v1::PipelineResponse& resp) {
  for (v1::PipelinedResponse& r : *resp.mutable_responses()) {
    auto it = requests_.find(r.id());
    // Not this stream's to answer (a server must answer only what it was sent).
    if (it == requests_.end() || it->second->stream != s.address || !it->second->sent) continue;
    s.in_flight--;
    PipelinedReply out;
    out.id = r.id();
    if (r.has_execute()) {
      out.answer = FromProto(r.execute().answer());
      out.values = Values(r.execute().values());
    } else {
      out.answer = FromProto(r.call().answer());
      out.reply = std::move(*r.mutable_call()->mutable_reply());
    }
    // The server ran nothing: send it again once this stream has ended, at the next address.
    if (out.answer.outcome == Outcome::kAborted && out.answer.reason == AbortReason::kStopping &&
        it->second->streams + 1 < c_->addresses_.size()) {
      s.closing = true;
      it->second->sent = false;
      s.queued.push_back(r.id());
      continue;
    }
    requests_.erase(it);
    ready_.push_back(std::move(out));
  }
}

void Pipeline::Broke(size_t address) {
  std::unique_ptr<Stream> s = std::move(streams_.at(address));
  streams_.erase(address);
  if (dropping_) return;
  if (address == c_->current_) c_->FailOver();
  // Calls routed to this CN go through the address in use from now on.
  if (unrouted_.size() <= address) unrouted_.resize(address + 1);
  unrouted_[address] = true;
  const grpc::Status& st = s->status;
  const std::string& name = c_->addresses_[address];
  // INVALID_ARGUMENT: the server answered every request it took before it refused one; the
  // rest never ran. Any other end may have come while a request ran.
  const bool refused = st.error_code() == grpc::StatusCode::INVALID_ARGUMENT;
  std::vector<uint64_t> again;
  for (auto it = requests_.begin(); it != requests_.end();) {
    Sent& r = *it->second;
    if (r.stream != address) {
      ++it;
      continue;
    }
    const bool was_sent = std::exchange(r.sent, false);
    r.stream.reset();
    // Each address is tried once, as by the unary calls.
    if (++r.streams < c_->addresses_.size() && (r.safe || !was_sent) && !refused) {
      again.push_back(it->first);
      ++it;
      continue;
    }
    Answer a;
    if (refused) {
      a = detail::FromRpcFailure(st, name, /*may_have_run=*/false);
    } else if (!was_sent) {
      a = Make(Outcome::kAborted, AbortReason::kNotSent,
               "could not be sent: " + name + ": " + st.error_message());
    } else {
      a = detail::FromRpcFailure(st, name, /*may_have_run=*/!r.safe);
      a.outcome = Outcome::kUnknown;  // a reset stream may have run it, whatever its code
    }
    ready_.push_back(Local(it->first, std::move(a)));
    it = requests_.erase(it);
  }
  // In the order they were first queued (ids grow), behind what their new streams hold.
  std::sort(again.begin(), again.end());
  for (uint64_t id : again) Enqueue(id);
  Flush();
}

}  // namespace pond::client
