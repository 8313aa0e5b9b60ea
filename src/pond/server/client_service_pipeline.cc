// The client service's pipelines: one stream carries many one-shot requests, each run as soon as
// it arrives and answered as soon as it finishes. A stream belongs to one CN worker: it is
// accepted on that worker's completion queue (gRPC's asynchronous API), which the worker polls at
// the top of every round (Cluster::AttachSource), so its reads complete on the worker, its
// requests start on it in the same round (SubmitToWorker), and its answers are written from it.
// No thread hands a request to the worker. A request routed to another CN (a `pond serve` that
// fronts several) runs there, and that CN's worker queues its answer on the stream.
//
// Answers are batched where they queue: one write is in flight at a time, and the answers that
// finish meanwhile go out together in the next message, as many as fit the message limit. A
// worker does not start a write for each answer it gives: it starts one at the end of its round
// (Session::AtRoundEnd), for every answer its round finished. gRPC writes on the thread that
// starts the write, so a write per answer cost the worker a system call per transaction (half a
// CN daemon's worker's time, sampled). So a busy stream costs one message for many answers, an
// idle one a message per answer.
//
// The stream reads one message at a time, and reads the next only while fewer than
// pipeline_in_flight_max of its requests are unanswered or their answers unwritten: a client that
// sends faster than the CN runs, or reads slower, is held back by gRPC's flow control, not
// buffered here. It ends (Finish) when the client has closed its side, a message broke the
// rules or the server stops, once every request it took has been answered — or, if the client
// went away, has finished running (its answer then goes nowhere). Its Finish completing is its
// end on gRPC's side, and the stream is freed once no worker is still inside it (Hold).
#include <fmt/core.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_set>

#include "pond/base/assert.h"
#include "pond/server/client_service.h"
#include "pond/server/outcome.h"

namespace pond::server {

namespace {

// What one answer adds to a PipelineResponse beyond its own bytes: the field's tag and length,
// the id, the body's tag and length (at most 1 + 5 + 1 + 10 + 1 + 5).
constexpr size_t kAnswerFramingBytes = 32;

}  // namespace

// A tag on a pipeline queue: what completed, and for which stream.
struct ClientService::PipelineTag {
  enum Kind : uint8_t { kAccept, kRead, kWrite, kFinish };
  PipelineStream* stream;
  Kind kind;
};

// One worker's completion queue for pipelines, polled by that worker (or, once detached, drained
// by the thread that stops the service).
class ClientService::PipelineQueue final : public Cluster::WorkerSource {
 public:
  PipelineQueue(ClientService& service, uint16_t cn, uint16_t worker,
                std::unique_ptr<grpc::ServerCompletionQueue> cq)
      : service_(service), cn_(cn), worker_(worker), cq_(std::move(cq)) {}

  // Asks gRPC for the next stream on this queue, unless the service is stopping.
  void Accept();

  bool Poll() override {
    void* tag = nullptr;
    bool ok = false;
    bool took = false;
    // Bounded, so that a flood of completions still leaves the worker its rounds.
    for (int i = 0; i < kEventsPerPoll; i++) {
      if (cq_->AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC)) !=
          grpc::CompletionQueue::GOT_EVENT) {
        break;
      }
      Dispatch(static_cast<PipelineTag*>(tag), ok);
      took = true;
    }
    return took;
  }

  // Once the worker has let go (StopPipelines): handles what completes within `most` on this
  // thread.
  void PollFor(std::chrono::milliseconds most) {
    void* tag = nullptr;
    bool ok = false;
    if (cq_->AsyncNext(&tag, &ok, std::chrono::system_clock::now() + most) ==
        grpc::CompletionQueue::GOT_EVENT) {
      Dispatch(static_cast<PipelineTag*>(tag), ok);
    }
  }

  // Once every stream has ended: ends the queue and frees what is left on it — the request for
  // a next stream, failed by the server's shutdown, or a stream accepted just before it, never
  // started (freeing its context cancels it).
  void ShutDownAndDrain();

  uint16_t cn() const { return cn_; }
  uint16_t worker() const { return worker_; }

 private:
  static constexpr int kEventsPerPoll = 64;
  void Dispatch(PipelineTag* tag, bool ok);

  ClientService& service_;
  const uint16_t cn_, worker_;
  const std::unique_ptr<grpc::ServerCompletionQueue> cq_;
};

class ClientService::PipelineStream final {
 public:
  PipelineStream(ClientService& service, PipelineQueue& queue)
      : service_(service), queue_(queue), stream_(&ctx_) {}

  void OnAccepted() {
    // Who the stream's caller is does not change while it is open (its token is sent once, with
    // the call): one grant serves every request on it.
    grant_ = service_.Authorize(ctx_);
    service_.RegisterPipeline(this);
    Step();
  }

  void OnReadDone(bool ok) {
    {
      // The read has ended, though reading_ stays set until its message is taken (no new read
      // may fill in_ meanwhile): a worker's Step must not cancel it — that would end the stream
      // CANCELLED, not with the error Take may be about to set.
      std::lock_guard lock(mu_);
      taking_ = true;
    }
    if (ok) {
      Take();
    } else {
      std::lock_guard lock(mu_);
      read_closed_ = true;
    }
    {
      std::lock_guard lock(mu_);
      reading_ = taking_ = false;
    }
    Step();
  }

  void OnWriteDone(bool ok) {
    {
      std::lock_guard lock(mu_);
      writing_ = false;
      out_.pop_front();
      out_bytes_.pop_front();
      if (!ok) {
        // The client is gone: what it is still owed goes nowhere; what runs still finishes.
        broken_ = true;
        out_.clear();
        out_bytes_.clear();
      }
    }
    Step();
  }

  // The stream's Finish has completed: gRPC is done with it. It is freed once no thread is
  // inside it (Hold).
  void OnFinished() {
    service_.DeregisterPipeline(this);
    bool free;
    {
      std::lock_guard lock(mu_);
      done_ = true;
      free = holds_ == 0;
    }
    if (free) delete this;
  }

  // The server is stopping: read no more, and end once nothing is owed. A read may be pending
  // on a client that sends nothing more, which only a cancel ends: done here if nothing is owed,
  // else by the Step of the last answer. Never finishes the stream itself: the service's lock
  // is held.
  void Stop() {
    bool cancel = false;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      if (reading_ && !taking_ && !Owes() && !cancelled_ && !finished_) cancelled_ = cancel = true;
    }
    if (cancel) ctx_.TryCancel();
  }

  PipelineTag accept_tag_{this, PipelineTag::kAccept};

 private:
  friend class PipelineQueue;
  // Keeps the stream from being freed while a thread is inside it other than to handle one of
  // its completions: a worker answering (its own, from a request's coroutine, or another CN's).
  // Its answer may be the last one owed, after which another thread's Step may finish the
  // stream, and the Finish complete, before this thread has left. Handling a completion needs
  // none: the poller frees the stream itself, on the Finish's completion.
  class Hold {
   public:
    explicit Hold(PipelineStream* r) : r_(r) {
      std::lock_guard lock(r_->mu_);
      r_->holds_++;
    }
    ~Hold() {
      bool free;
      {
        std::lock_guard lock(r_->mu_);
        free = --r_->holds_ == 0 && r_->done_;
      }
      if (free) delete r_;
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    PipelineStream* const r_;
  };

  // One request, from its arrival until its answer is queued: the request stays here because a
  // body reads it (a Call's arguments) while it runs.
  struct Pending {
    v1::PipelinedRequest req;
    v1::PipelinedResponse resp;
  };

  // Takes the message just read: checks it whole, then hands each request to a CN. A message
  // that breaks a rule is refused whole — none of its requests runs — and ends the stream.
  void Take() {
    std::string broke = Check();
    if (!broke.empty()) {
      in_.Clear();
      std::lock_guard lock(mu_);
      if (!error_) error_ = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, broke);
      return;
    }
    for (v1::PipelinedRequest& r : *in_.mutable_requests()) {
      auto p = std::make_unique<Pending>();
      p->req.Swap(&r);
      Run(std::move(p));
    }
    in_.Clear();
  }

  // Why the message just read breaks the rules, or "". If it does not, its ids are taken.
  std::string Check() {
    const uint32_t n = static_cast<uint32_t>(in_.requests_size());
    if (n > service_.o_.pipeline_batch_max) {
      return fmt::format("{} requests in one message; at most {}", n,
                         service_.o_.pipeline_batch_max);
    }
    for (const v1::PipelinedRequest& r : in_.requests()) {
      if (r.body_case() == v1::PipelinedRequest::BODY_NOT_SET) {
        return fmt::format("request {} has no body (execute or call)", r.id());
      }
    }
    std::lock_guard lock(mu_);
    for (uint32_t i = 0; i < n; i++) {
      const uint64_t id = in_.requests(static_cast<int>(i)).id();
      if (!ids_.insert(id).second) {
        for (uint32_t j = 0; j < i; j++) ids_.erase(in_.requests(static_cast<int>(j)).id());
        return fmt::format("request id {} is already in flight on this stream", id);
      }
    }
    return "";
  }

  // Runs one request on a CN; its answer comes back through Answer, from the worker. A request
  // refused by its checks, or by a stopping cluster, is answered here at once.
  void Run(std::unique_ptr<Pending> p) {
    const uint64_t id = p->req.id();
    p->resp.set_id(id);
    const bool execute = p->req.has_execute();
    uint16_t cn = 0;
    Body run =
        execute ? service_.PrepareExecute(p->req.execute(), p->resp.mutable_execute(), &cn, grant_)
                : service_.PrepareCall(p->req.call(), p->resp.mutable_call(), &cn, grant_);
    bool stopping;
    {
      std::lock_guard lock(mu_);
      stopping = stopping_;
    }
    if (run && !stopping) {
      Pending* raw = p.release();
      auto call = [this, raw, run = std::move(run)](Session& s) -> Task<void> {
        co_await run(s);
        Answer(std::unique_ptr<Pending>(raw), &s);
      };
      // On this stream's own worker when it runs the CN, so the request starts in this round.
      const bool taken =
          cn == queue_.cn() ? service_.cluster_.SubmitToWorker(cn, queue_.worker(), std::move(call))
                            : service_.cluster_.Submit(cn, std::move(call));
      if (taken) return;
      p.reset(raw);
    }
    if (run) {  // it was not taken: the cluster is stopping
      v1::Answer* a = execute ? p->resp.mutable_execute()->mutable_answer()
                              : p->resp.mutable_call()->mutable_answer();
      Abort(v1::STOPPING, "the server is stopping; nothing ran", a);
    }
    Answer(std::move(p));
  }

  // Queues `p`'s answer: into the message waiting to be written, if it fits, else a new one.
  // From a worker (`worker` set), the write starts at the end of the worker's round.
  void Answer(std::unique_ptr<Pending> p, Session* worker = nullptr) {
    Hold hold(this);
    if (p->resp.has_execute()) {
      service_.FinishExecute(p->resp.mutable_execute());
    } else {
      service_.Count(p->resp.call().answer());
    }
    const size_t bytes = p->resp.ByteSizeLong() + kAnswerFramingBytes;
    {
      std::lock_guard lock(mu_);
      ids_.erase(p->req.id());
      if (!broken_) {
        // The first message is being written while writing_: it takes no more answers.
        const bool open = out_.size() > (writing_ ? 1u : 0u);
        if (!open || out_bytes_.back() + bytes > service_.o_.message_bytes_max) {
          out_.emplace_back();
          out_bytes_.push_back(0);
        }
        out_.back().add_responses()->Swap(&p->resp);
        out_bytes_.back() += bytes;
      }
      if (worker != nullptr) {
        if (!step_at_round_end_) {
          step_at_round_end_ = true;
          holds_++;  // let go by the Step below
          worker->AtRoundEnd([this] { StepAtRoundEnd(); });
        }
        return;
      }
    }
    Step();
  }

  // The Step a worker put off to the end of its round; it held the stream until now.
  void StepAtRoundEnd() {
    {
      std::lock_guard lock(mu_);
      step_at_round_end_ = false;
    }
    Step();
    bool free;
    {
      std::lock_guard lock(mu_);
      free = --holds_ == 0 && done_;
    }
    if (free) delete this;
  }

  // Starts what can start now — a write, a read, the stream's end — each outside the lock:
  // its completion may be handled on the queue's poller before the call that started it returns.
  void Step() {
    v1::PipelineResponse* write = nullptr;  // out_'s first; a deque's push_back moves no element
    bool read = false, cancel = false;
    std::optional<grpc::Status> finish;
    {
      std::lock_guard lock(mu_);
      if (finished_) return;
      if (!writing_ && !out_.empty()) {
        writing_ = true;
        write = &out_.front();
      }
      const bool ending = read_closed_ || error_ || stopping_ || broken_;
      if (!reading_ && !ending && ids_.size() + Queued() < service_.o_.pipeline_in_flight_max) {
        reading_ = read = true;
      }
      if (!Owes() && ending) {
        if (!reading_) {
          finished_ = true;
          finish = error_ ? *error_ : grpc::Status::OK;
          if (stopping_ && !error_) {
            finish = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is stopping");
          }
        } else if (!cancelled_ && !taking_) {
          // A read is pending and will not end by itself: cancelling fails it (OnReadDone).
          cancelled_ = cancel = true;
        }
      }
    }
    if (write != nullptr) stream_.Write(*write, &write_tag_);
    if (read) stream_.Read(&in_, &read_tag_);
    if (cancel) ctx_.TryCancel();
    // Last: once finished, the poller may free this at any moment.
    if (finish) stream_.Finish(*finish, &finish_tag_);
  }

  // Whether an answer is still to be given or sent. REQUIRES: mu_ held.
  bool Owes() const { return !ids_.empty() || writing_ || !out_.empty(); }
  // Answers given, not yet written: they count against the in-flight limit too, so that a
  // client that sends and never reads is not answered into this process's memory without end.
  // REQUIRES: mu_ held.
  size_t Queued() const {
    size_t n = 0;
    for (const v1::PipelineResponse& m : out_) n += static_cast<size_t>(m.responses_size());
    return n;
  }

  ClientService& service_;
  PipelineQueue& queue_;
  grpc::ServerContext ctx_;
  Grant grant_;  // the caller's, set once accepted
  grpc::ServerAsyncReaderWriter<v1::PipelineResponse, v1::PipelineRequest> stream_;
  PipelineTag read_tag_{this, PipelineTag::kRead};
  PipelineTag write_tag_{this, PipelineTag::kWrite};
  PipelineTag finish_tag_{this, PipelineTag::kFinish};
  v1::PipelineRequest in_;  // the message being read; only the read's completion touches it

  std::mutex mu_;
  std::unordered_set<uint64_t> ids_;      // guarded by mu_: requests taken, not yet answered
  std::deque<v1::PipelineResponse> out_;  // guarded by mu_: the first is being written if writing_
  std::deque<size_t> out_bytes_;          // guarded by mu_: bytes of each message of out_
  bool reading_ = false, writing_ = false;     // guarded by mu_
  bool taking_ = false;                        // guarded by mu_: OnReadDone is under way
  bool read_closed_ = false, broken_ = false;  // guarded by mu_
  bool stopping_ = false, cancelled_ = false;  // guarded by mu_
  bool finished_ = false;                      // guarded by mu_
  int holds_ = 0;  // guarded by mu_: threads inside (Hold), and a Step put off to a round's end
  bool step_at_round_end_ = false;     // guarded by mu_: a worker will Step
  bool done_ = false;                  // guarded by mu_: the Finish has completed
  std::optional<grpc::Status> error_;  // guarded by mu_
};

void ClientService::PipelineQueue::Accept() {
  {
    std::lock_guard lock(service_.mu_);
    if (service_.stopping_) return;
  }
  auto* s = new PipelineStream(service_, *this);
  service_.RequestPipeline(&s->ctx_, &s->stream_, cq_.get(), cq_.get(), &s->accept_tag_);
}

void ClientService::PipelineQueue::ShutDownAndDrain() {
  cq_->Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    auto* t = static_cast<PipelineTag*>(tag);
    POND_CHECK_MSG(t->kind == PipelineTag::kAccept, "a pipeline outlived the service's stop");
    delete t->stream;
  }
}

void ClientService::PipelineQueue::Dispatch(PipelineTag* tag, bool ok) {
  PipelineStream* s = tag->stream;
  switch (tag->kind) {
    case PipelineTag::kAccept:
      if (!ok) {  // the server is shutting down: no stream came
        delete s;
        return;
      }
      Accept();
      s->OnAccepted();
      return;
    case PipelineTag::kRead:
      s->OnReadDone(ok);
      return;
    case PipelineTag::kWrite:
      s->OnWriteDone(ok);
      return;
    case PipelineTag::kFinish:
      s->OnFinished();
      return;
  }
}

void ClientService::AddPipelineQueues(grpc::ServerBuilder& builder) {
  for (uint16_t cn : o_.cns) {
    for (int w = 0; w < cluster_.WorkersOf(cn); w++) {
      queues_.push_back(
          new PipelineQueue(*this, cn, static_cast<uint16_t>(w), builder.AddCompletionQueue()));
    }
  }
}

Status ClientService::StartPipelines() {
  for (PipelineQueue* q : queues_) {
    POND_RETURN_IF_ERROR(cluster_.AttachSource(q->cn(), q->worker(), q));
    q->Accept();
  }
  return Status::Ok();
}

void ClientService::StopPipelines() {
  // The gRPC server's shutdown does not wait for a stream of the asynchronous API to end: it
  // fails its pending read, and the stream ends once it has answered what it owes. Those last
  // completions are handled here, on this thread, before the queues close: an operation started
  // on a closed queue is fatal.
  for (PipelineQueue* q : queues_) cluster_.DetachSource(q->cn(), q->worker(), q);
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (pipelines_.empty()) break;
    }
    for (PipelineQueue* q : queues_) q->PollFor(std::chrono::milliseconds(1));
  }
  for (PipelineQueue* q : queues_) {
    q->ShutDownAndDrain();
    delete q;
  }
  queues_.clear();
}

void ClientService::RegisterPipeline(PipelineStream* p) {
  std::lock_guard lock(mu_);
  pipelines_.insert(p);
  if (stopping_) StopPipeline(p);
}

void ClientService::DeregisterPipeline(PipelineStream* p) {
  std::lock_guard lock(mu_);
  pipelines_.erase(p);
}

void ClientService::StopPipeline(PipelineStream* p) { p->Stop(); }

}  // namespace pond::server
