// ClientService: Pond's client API (proto/pond/v1/pond.proto, docs/clients.md) over a serving
// cluster — the gRPC service a `pond serve` process, and later each CN daemon, offers. It is
// handed a Cluster that serves (Cluster::StartServing) and a ServiceDirectory, and runs every
// request as a call submitted to a CN it fronts (options.cns, in turn), its gRPC thread waiting
// for the answer: one-shot Execute and Call as one call each, an Interactive transaction as one
// call per step on one pinned worker (Cluster::Pin), where its Txn lives between steps.
//
// Every request is checked before anything runs (tables and procedures by name, value and
// argument sizes, key counts, the order of interactive steps), and every answer carries an
// outcome (outcome.h). A client that goes away mid-transaction, or leaves it idle longer than
// options.interactive_idle_ms, has its stream cancelled and its transaction aborted, its locks
// released; so is one open longer than options.interactive_lifetime_ms.
//
// Thread rules: the gRPC server calls the handlers from its threads, concurrently. The cluster
// must serve from construction until CancelStreams and the gRPC server's shutdown have returned
// (ClientServer does it in that order); the directory is fixed at construction.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pond/cluster.h"
#include "pond/server/access.h"
#include "pond/server/certs.h"
#include "pond/server/service_directory.h"
#include "pond/v1/pond.grpc.pb.h"

namespace pond::server {

struct ClientServiceOptions {
  // The CNs this service runs requests on, in turn: a CN daemon's own; every CN of an embedded
  // cluster. Must be non-empty.
  std::vector<uint16_t> cns = {0};
  // Keys in one Execute (reads + writes + conditions), or in one interactive add or write step.
  uint32_t keys_per_request_max = 1024;
  // Keys one interactive transaction adds over all its steps.
  uint32_t interactive_keys_max = 4096;
  // Interactive transactions open at once; one more is refused (RESOURCE_EXHAUSTED).
  uint32_t interactive_streams_max = 64;
  // An interactive transaction whose client sends nothing for this long is aborted, and so is
  // one open for longer than interactive_lifetime_ms however busy: locks are not held forever.
  uint32_t interactive_idle_ms = 10'000;
  uint32_t interactive_lifetime_ms = 60'000;
  // Pipeline: requests in one message (more ends the stream INVALID_ARGUMENT), and requests of
  // one stream unanswered at once, past which the server reads no more of that stream until some
  // are answered (one message may take it past by up to pipeline_batch_max - 1).
  uint32_t pipeline_batch_max = 1024;
  uint32_t pipeline_in_flight_max = 4096;
  // Every gRPC message, either way.
  uint32_t message_bytes_max = 4 << 20;
  // Memory gRPC may hold for messages on their way in and out (a grpc::ResourceQuota). gRPC
  // checks message_bytes_max only once a message is whole, so without this a 100 MB request is
  // buffered whole before it is refused; with it, gRPC stops reading past the quota and resets
  // the stream (RESOURCE_EXHAUSTED), which the client answers REJECTED. Streams at work when the
  // quota is reached may be reset too: it must hold many messages of the largest size.
  uint64_t buffer_bytes_max = 64 << 20;
  // gRPC threads (grpc::ResourceQuota): each running request, and each open interactive
  // transaction, holds one.
  int threads_max = 256;
  // TLS with this certificate, taking only clients that show a certificate its CA signed; or
  // plaintext, only when `insecure` says so by name. ClientServer::Start refuses neither or both
  // (docs/clients.md "Security").
  std::optional<ServerTls> tls;
  bool insecure = false;
  // Who may do what (access.h): every caller is admin unless an access file gives rules. Rules
  // with tokens make a client certificate optional at the TLS handshake (a token stands for it).
  Access access = Access::Open();
};

// InvalidArgument naming the field, or OK, for a cluster of `cns` CNs.
Status ValidateServiceOptions(const ClientServiceOptions& o, int cns);

// What the service has answered, for a server's log and for tests.
struct ServiceCounters {
  uint64_t requests = 0;  // Execute, Call and interactive steps
  uint64_t committed = 0, aborted = 0, unknown = 0, rejected = 0;
  uint64_t streams = 0;            // interactive transactions begun
  uint64_t streams_abandoned = 0;  // of them, aborted because the client went away or idled
  uint64_t streams_refused = 0;    // refused at the limit or while stopping
  // Requests and streams refused because the caller is unknown to the access rules, or asked
  // beyond its role (also counted among `rejected` when answered REJECTED).
  uint64_t refused_unauthenticated = 0, refused_role = 0;
};

// The unary methods and Interactive run on gRPC's threads (the synchronous API). Pipeline uses
// gRPC's asynchronous API, on a completion queue per CN worker that the worker polls itself, so
// that a pipelined request goes from the network to the worker that runs it with no thread
// between (client_service_pipeline.cc).
class ClientService final : public v1::Pond::WithAsyncMethod_Pipeline<v1::Pond::Service> {
 public:
  // REQUIRES: ValidateServiceOptions(options, cluster.config().cns) is OK.
  ClientService(Cluster& cluster, ServiceDirectory directory, ClientServiceOptions options);
  ~ClientService() override;
  ClientService(const ClientService&) = delete;
  ClientService& operator=(const ClientService&) = delete;

  // The address Describe names first when the directory lists no CN addresses (a server alone).
  void SetSelfAddress(std::string address);
  // Replaces the directory's CN addresses (known only once every server has bound its port).
  void SetCnAddresses(std::vector<std::string> addresses);
  // Where Describe learns the CN addresses at every call instead (a CN daemon's: what the
  // coordination service holds now), indexed by CN id, "" for a CN that takes no clients; with
  // them Describe gives clients the shard map to route calls by. An answer with no address
  // falls back to the addresses set above.
  void SetCnAddressSource(std::function<std::vector<std::string>()> source);
  // Refuses new interactive transactions and cancels every open one (each then aborts): the
  // first step of stopping, before the gRPC server shuts down.
  void CancelStreams();

  // Pipelines, around the gRPC server's life: AddPipelineQueues before it is built (a completion
  // queue for every worker of every CN the service fronts); StartPipelines once it has started
  // (each worker polls its queue from then on); StopPipelines once it has shut down and Wait has
  // returned (the workers let go, and what is left on the queues is handled). The cluster serves
  // throughout.
  void AddPipelineQueues(grpc::ServerBuilder& builder);
  Status StartPipelines();
  void StopPipelines();

  const ClientServiceOptions& options() const { return o_; }
  ServiceCounters counters() const;

  grpc::Status Describe(grpc::ServerContext* ctx, const v1::DescribeRequest* req,
                        v1::DescribeResponse* resp) override;
  grpc::Status Execute(grpc::ServerContext* ctx, const v1::ExecuteRequest* req,
                       v1::ExecuteResponse* resp) override;
  grpc::Status Interactive(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::InteractiveResponse, v1::InteractiveRequest>* stream) override;
  grpc::Status Call(grpc::ServerContext* ctx, const v1::CallRequest* req,
                    v1::CallResponse* resp) override;

 private:
  struct StreamState;    // client_service_stream.cc
  struct PipelineTag;    // client_service_pipeline.cc
  class PipelineQueue;   // client_service_pipeline.cc
  class PipelineStream;  // client_service_pipeline.cc
  // What a request runs on a worker: it fills the answer the caller gave it.
  using Body = std::function<Task<void>(Session&)>;
  struct OpenStream {
    grpc::ServerContext* ctx;
    uint64_t opened_ms;
    uint64_t last_active_ms;
    bool cancelled;  // by the watchdog
  };

  uint16_t NextCn();
  // Runs `body` as a call on CN `cn` and waits until it has returned; false if the cluster
  // refused it (stopping). What `body` answers it writes where the caller can read it after.
  bool RunOn(uint16_t cn, const Body& body);
  // The same on a pinned worker.
  bool RunOnPin(const Cluster::WorkerPin& pin, const Body& body);
  void Count(const v1::Answer& a);
  // Who calls through `ctx` and what it may do, by the access rules (access.h).
  Grant Authorize(const grpc::ServerContext& ctx) const;
  // Whether `g` may not run a request that `writes` or not: if so `answer` is REJECTED saying why,
  // and the refusal is counted.
  bool RefuseBeyondRole(const Grant& g, bool writes, v1::Answer* answer);

  // A one-shot request checked: what to run and on which CN (*cn), or nothing if it was refused
  // (REJECTED, said in `resp`). `req` and `resp` must outlive the body. A procedure goes to the
  // CN it would be routed to, if this service fronts it. FinishExecute trims an Execute's answer
  // to what its outcome allows and counts it.
  // `g`: the caller's grant (Authorize); a request beyond its role is REJECTED.
  Body PrepareExecute(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp, uint16_t* cn,
                      const Grant& g);
  Body PrepareCall(const v1::CallRequest& req, v1::CallResponse* resp, uint16_t* cn,
                   const Grant& g);
  void FinishExecute(v1::ExecuteResponse* resp);

  // Pipelines: registered while open, so that CancelStreams can end them.
  void RegisterPipeline(PipelineStream* p);
  void DeregisterPipeline(PipelineStream* p);
  // Makes `p` read no more and end once it owes no answer. Called under mu_.
  static void StopPipeline(PipelineStream* p);

  // Interactive steps (client_service_stream.cc); each fills `resp` and returns whether the
  // transaction has ended.
  bool StepBegin(StreamState& st, const v1::Begin& b, v1::InteractiveResponse* resp);
  bool StepAdd(StreamState& st, const v1::Add& add, v1::InteractiveResponse* resp);
  bool StepExecute(StreamState& st, v1::InteractiveResponse* resp);
  bool StepWrite(StreamState& st, const v1::WriteStep& w, v1::InteractiveResponse* resp);
  bool StepEnd(StreamState& st, bool commit, v1::InteractiveResponse* resp);
  // Drops the stream's transaction on its worker (aborting it if open) and unpins.
  void Release(StreamState& st);

  // Streams: registered while open, so the idle watchdog and CancelStreams can reach them.
  bool Register(grpc::ServerContext* ctx, uint64_t* id);
  void Touch(uint64_t id);
  void Deregister(uint64_t id);
  void Watchdog();

  Cluster& cluster_;
  const ServiceDirectory dir_;
  const ClientServiceOptions o_;
  std::atomic<uint32_t> next_cn_{0};

  mutable std::mutex mu_;
  std::string self_address_;               // guarded by mu_
  std::vector<std::string> cn_addresses_;  // guarded by mu_; from the directory at first
  std::function<std::vector<std::string>()> cn_address_source_;  // guarded by mu_
  std::map<uint64_t, OpenStream> streams_;                       // guarded by mu_
  std::set<PipelineStream*> pipelines_;                          // guarded by mu_
  uint64_t next_stream_id_ = 0;                                  // guarded by mu_
  bool stopping_ = false;                                        // guarded by mu_
  std::condition_variable watchdog_cv_;

  struct AtomicCounters {
    std::atomic<uint64_t> requests{0}, committed{0}, aborted{0}, unknown{0}, rejected{0};
    std::atomic<uint64_t> streams{0}, streams_abandoned{0}, streams_refused{0};
    std::atomic<uint64_t> refused_unauthenticated{0}, refused_role{0};
  } counters_;

  // The controlling thread's; owned, freed by StopPipelines (which the destructor calls).
  std::vector<PipelineQueue*> queues_;

  std::thread watchdog_;  // last: starts when everything above is set
};

}  // namespace pond::server
