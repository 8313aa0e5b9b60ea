// Client::Pipeline: many one-shot requests on one Pipeline stream (client.h). The rules for a
// failed stream are the unary calls' (client.cc): nothing is sent twice unless it cannot have
// changed anything, and nothing that may have is answered otherwise than UNKNOWN.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <utility>

#include "pond/client/client.h"
#include "pond/client/client_internal.h"
#include "pond/v1/pond.grpc.pb.h"

namespace pond::client {

using detail::FromProto;
using detail::Make;
using detail::Values;

struct Pipeline::Stream {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::PipelineRequest, v1::PipelineResponse>> rw;
  std::string address;
  bool closing = false;  // the server said it is stopping: send no more here
};

struct Pipeline::Sent {
  v1::PipelinedRequest req;
  bool safe = false;   // cannot have changed anything: may be sent again after a failure
  bool sent = false;   // on the current stream
  size_t streams = 0;  // streams it was meant for that ended before it was answered
};

namespace {

// Bytes one request adds to a PipelineRequest beyond its own (tags, lengths, the id).
constexpr size_t kRequestFramingBytes = 32;

PipelinedReply Local(uint64_t id, Answer a) {
  PipelinedReply r;
  r.id = id;
  r.answer = std::move(a);
  return r;
}

}  // namespace

std::unique_ptr<Pipeline> Client::OpenPipeline() {
  return std::unique_ptr<Pipeline>(new Pipeline(this));
}

Pipeline::Pipeline(Client* c) : c_(c) {}

Pipeline::~Pipeline() {
  if (s_ != nullptr) {
    s_->ctx.TryCancel();
    s_->rw->Finish();
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
  return Queue(std::move(req), read_only);
}

uint64_t Pipeline::Queue(std::unique_ptr<v1::PipelinedRequest> r, bool safe) {
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
  requests_.emplace(id, std::move(sent));
  queued_.push_back(id);
  return id;
}

void Pipeline::Flush() {
  if (queued_.empty()) return;
  if (s_ == nullptr) {
    c_->SkipFailedChannels();
    s_ = std::make_unique<Stream>();
    s_->address = c_->address();
    s_->rw = c_->Current().stub->Pipeline(&s_->ctx);
  }
  if (s_->closing) return;  // sent on the next stream, once this one has ended
  const size_t bytes_max = c_->send_bytes_max_ > 0 ? c_->send_bytes_max_ : (4u << 20);
  // No more in flight than the server runs at once: past that it stops reading the stream, and
  // a Write here would wait for a read this thread is not doing.
  const size_t in_flight_max = c_->pipeline_in_flight_max_;
  size_t in_flight = requests_.size() - queued_.size();
  size_t next = 0;
  while (next < queued_.size() && in_flight < in_flight_max) {
    v1::PipelineRequest msg;
    size_t bytes = 0;
    const size_t first = next;
    for (; next < queued_.size() && in_flight < in_flight_max &&
           msg.requests_size() < static_cast<int>(c_->pipeline_batch_max_);
         next++, in_flight++) {
      Sent& s = *requests_.at(queued_[next]);
      const size_t b = s.req.ByteSizeLong() + kRequestFramingBytes;
      if (msg.requests_size() > 0 && bytes + b > bytes_max) break;
      *msg.add_requests() = s.req;
      bytes += b;
    }
    if (!s_->rw->Write(msg)) {
      // The stream is closed: this message and what follows never left; they go out on the
      // next stream. Receive finds out why it closed.
      next = first;
      break;
    }
    for (size_t i = first; i < next; i++) requests_.at(queued_[i])->sent = true;
  }
  queued_.erase(queued_.begin(), queued_.begin() + static_cast<ptrdiff_t>(next));
}

std::vector<PipelinedReply> Pipeline::Receive() {
  Flush();
  while (ready_.empty() && !requests_.empty()) {
    if (s_ == nullptr) {
      Flush();
      continue;
    }
    v1::PipelineResponse resp;
    if (s_->rw->Read(&resp)) {
      Take(resp);
    } else {
      Broke();
      Flush();
    }
  }
  return std::exchange(ready_, {});
}

void Pipeline::Take(v1::PipelineResponse& resp) {
  for (v1::PipelinedResponse& r : *resp.mutable_responses()) {
    auto it = requests_.find(r.id());
    if (it == requests_.end() || !it->second->sent) continue;  // not this stream's to answer
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
      s_->closing = true;
      it->second->sent = false;
      queued_.push_back(r.id());
      continue;
    }
    requests_.erase(it);
    ready_.push_back(std::move(out));
  }
}

void Pipeline::Broke() {
  const grpc::Status st = s_->rw->Finish();
  const std::string address = s_->address;
  s_.reset();
  c_->FailOver();
  // INVALID_ARGUMENT: the server answered every request it took before it refused one; the
  // rest never ran. Any other end may have come while a request ran.
  const bool refused = st.error_code() == grpc::StatusCode::INVALID_ARGUMENT;
  std::vector<uint64_t> again;
  for (auto it = requests_.begin(); it != requests_.end();) {
    Sent& s = *it->second;
    const bool was_sent = std::exchange(s.sent, false);
    // Each address is tried once, as by the unary calls.
    if (++s.streams < c_->addresses_.size() && (s.safe || !was_sent) && !refused) {
      again.push_back(it->first);
      ++it;
      continue;
    }
    Answer a;
    if (refused) {
      a = detail::FromRpcFailure(st, address, /*may_have_run=*/false);
    } else if (!was_sent) {
      a = Make(Outcome::kAborted, AbortReason::kNotSent,
               "could not be sent: " + address + ": " + st.error_message());
    } else {
      a = detail::FromRpcFailure(st, address, /*may_have_run=*/!s.safe);
      a.outcome = Outcome::kUnknown;  // a reset stream may have run it, whatever its code
    }
    ready_.push_back(Local(it->first, std::move(a)));
    it = requests_.erase(it);
  }
  // In the order they were first queued (ids grow).
  std::sort(again.begin(), again.end());
  queued_ = std::move(again);
}

}  // namespace pond::client
