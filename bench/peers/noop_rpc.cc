// noop_rpc: a server of Pond's client API (proto/pond/v1/pond.proto) that runs nothing. It speaks
// the same gRPC transport and the same messages as `pond serve` and answers every request at
// once: COMMITTED, each read found and zero, each call's reply zero bytes. So a driver of Pond's
// service pointed at it measures what the transport and framing alone cost on this machine —
// the ceiling Pond's service is judged against (bench/peers/service_sitting.sh, docs/peers.md).
// It is a baseline, never a store: a driver's checks pass on it because every number is zero.
#include <grpcpp/grpcpp.h>

#include <csignal>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <CLI/CLI.hpp>

#include "pond/v1/pond.grpc.pb.h"

namespace {

using pond::v1::DescribeRequest;
using pond::v1::DescribeResponse;

class NoopService final : public pond::v1::Pond::CallbackService {
 public:
  NoopService(DescribeResponse d, uint32_t reply_bytes)
      : describe_(std::move(d)), reply_(reply_bytes, '\0') {
    for (const pond::v1::TableInfo& t : describe_.tables())
      value_bytes_[t.name()] = t.value_bytes();
  }

  grpc::ServerUnaryReactor* Describe(grpc::CallbackServerContext* ctx, const DescribeRequest*,
                                     DescribeResponse* resp) override {
    *resp = describe_;
    return Done(ctx);
  }
  grpc::ServerUnaryReactor* Execute(grpc::CallbackServerContext* ctx,
                                    const pond::v1::ExecuteRequest* req,
                                    pond::v1::ExecuteResponse* resp) override {
    Answer(*req, resp);
    return Done(ctx);
  }
  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const pond::v1::CallRequest*,
                                 pond::v1::CallResponse* resp) override {
    Answer(resp);
    return Done(ctx);
  }
  // Its own address, known once it listens, before any client can know it.
  void SetAddress(const std::string& address) {
    describe_.clear_cn_addresses();
    describe_.add_cn_addresses(address);
  }

  grpc::ServerBidiReactor<pond::v1::PipelineRequest, pond::v1::PipelineResponse>* Pipeline(
      grpc::CallbackServerContext*) override {
    return new PipelineReactor(this);
  }

 private:
  // Answers as it reads: each message's answers are queued, and whatever is queued when a write
  // ends goes out in the next, one write in flight at a time — as `pond serve` does, less the
  // transactions.
  class PipelineReactor final
      : public grpc::ServerBidiReactor<pond::v1::PipelineRequest, pond::v1::PipelineResponse> {
   public:
    explicit PipelineReactor(NoopService* s) : s_(s) { StartRead(&in_); }

    void OnReadDone(bool ok) override {
      std::lock_guard lock(mu_);
      if (!ok) {
        reading_ = false;
        MaybeFinish();
        return;
      }
      for (const pond::v1::PipelinedRequest& r : in_.requests()) {
        pond::v1::PipelinedResponse& a = queued_.emplace_back();
        a.set_id(r.id());
        if (r.has_execute()) {
          s_->Answer(r.execute(), a.mutable_execute());
        } else {
          s_->Answer(a.mutable_call());
        }
      }
      MaybeWrite();
      StartRead(&in_);
    }
    void OnWriteDone(bool ok) override {
      std::lock_guard lock(mu_);
      writing_ = false;
      if (!ok) {
        queued_.clear();
        failed_ = true;
      }
      MaybeWrite();
      MaybeFinish();
    }
    void OnDone() override { delete this; }

   private:
    void MaybeWrite() {
      if (writing_ || queued_.empty() || failed_) return;
      out_.Clear();
      for (pond::v1::PipelinedResponse& a : queued_) out_.add_responses()->Swap(&a);
      queued_.clear();
      writing_ = true;
      StartWrite(&out_);
    }
    void MaybeFinish() {
      if (reading_ || writing_ || finished_ || (!queued_.empty() && !failed_)) return;
      finished_ = true;
      Finish(grpc::Status::OK);
    }

    NoopService* s_;
    std::mutex mu_;
    pond::v1::PipelineRequest in_;
    pond::v1::PipelineResponse out_;
    std::deque<pond::v1::PipelinedResponse> queued_;
    bool reading_ = true, writing_ = false, failed_ = false, finished_ = false;
  };

  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx) {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  void Answer(const pond::v1::ExecuteRequest& req, pond::v1::ExecuteResponse* resp) const {
    resp->mutable_answer()->set_outcome(pond::v1::COMMITTED);
    for (const pond::v1::Key& k : req.reads()) {
      pond::v1::Value* v = resp->add_values();
      v->set_table(k.table());
      v->set_key(k.key());
      auto size = value_bytes_.find(k.table());
      v->set_found(size != value_bytes_.end());
      if (size != value_bytes_.end()) v->set_value(std::string(size->second, '\0'));
    }
  }
  void Answer(pond::v1::CallResponse* resp) const {
    resp->mutable_answer()->set_outcome(pond::v1::COMMITTED);
    resp->set_reply(reply_);
  }

  DescribeResponse describe_;
  const std::string reply_;
  std::map<std::string, uint32_t> value_bytes_;
};

// What the server says of itself: `like`'s Describe when given (its tables, procedures and
// limits, so that a driver of that workload runs unchanged), else a procedure "noop" alone.
bool Description(const std::string& like, DescribeResponse* d) {
  if (like.empty()) {
    d->set_cluster("noop");
    pond::v1::ProcedureInfo* p = d->add_procedures();
    p->set_name("noop");
    p->set_read_only(true);
    d->set_keys_per_request_max(1024);
    d->set_message_bytes_max(4 << 20);
    d->set_pipeline_batch_max(1024);
    d->set_pipeline_in_flight_max(4096);
    d->set_isolation("sr");
    return true;
  }
  auto stub =
      pond::v1::Pond::NewStub(grpc::CreateChannel(like, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status st = stub->Describe(&ctx, DescribeRequest(), d);
  if (!st.ok()) {
    std::fprintf(stderr, "noop_rpc: cannot describe %s: %s\n", like.c_str(),
                 st.error_message().c_str());
    return false;
  }
  d->set_cluster("noop (answers at once; tables and procedures of " + d->cluster() + ")");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "A server of Pond's client API that runs nothing: every request answered COMMITTED at "
      "once (reads found and zero, replies zero bytes), over the same gRPC transport and "
      "messages as pond serve. A baseline for drivers, never a store.");
  std::string listen = "127.0.0.1:0", like;
  uint32_t reply_bytes = 0;
  app.add_option("--listen", listen, "HOST:PORT to listen on (port 0: any free one)")
      ->capture_default_str();
  app.add_option("--like", like,
                 "describe itself as the server at HOST:PORT does (asked once, at start), so a "
                 "driver of its workload runs unchanged");
  app.add_option("--reply-bytes", reply_bytes,
                 "zero bytes each call replies (SmallBank's procedures reply 9)")
      ->check(CLI::Range(0u, 1u << 20))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  DescribeResponse d;
  if (!Description(like, &d)) return 1;
  // Signals waited for here, not handled: the gRPC threads start with them blocked.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  b.SetMaxReceiveMessageSize(static_cast<int>(d.message_bytes_max()));
  NoopService service(d, reply_bytes);
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "noop_rpc: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  service.SetAddress(host + ":" + std::to_string(port));
  std::printf("listening %s:%d\n", host.c_str(), port);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}
