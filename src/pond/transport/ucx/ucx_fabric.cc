#include "pond/transport/ucx/ucx_fabric.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "pond/base/assert.h"
#include "pond/transport/ucx/peer_token.h"
#include "pond/transport/ucx/ucx_endpoint.h"

namespace pond::ucx {

Result<std::unique_ptr<UcxFabric>> UcxFabric::CreateWithLocalMns(uint16_t num_mns,
                                                                 uint64_t region_bytes,
                                                                 const UcxOptions& options) {
  if (num_mns == 0) return InvalidArgument("need at least one MN");
  std::unique_ptr<UcxFabric> f(new UcxFabric());
  for (uint16_t i = 0; i < num_mns; i++) {
    auto mn = UcxMemoryNode::Start(i, region_bytes, options);
    if (!mn.ok()) return mn.status();
    f->mns_.push_back((*mn)->descriptor());
    f->local_mns_.push_back(std::move(mn).value());
  }
  POND_RETURN_IF_ERROR(f->Init(options));
  return f;
}

Result<std::unique_ptr<UcxFabric>> UcxFabric::Connect(std::vector<MnDescriptor> mns,
                                                      const UcxOptions& options) {
  if (mns.empty()) return InvalidArgument("need at least one MN");
  for (size_t i = 0; i < mns.size(); i++) {
    if (mns[i].mn != i) return InvalidArgument("MN descriptors must come in MN order");
    if (mns[i].bytes != mns[0].bytes) {
      return InvalidArgument("MN " + std::to_string(i) + "'s region differs in size from MN 0's");
    }
  }
  std::unique_ptr<UcxFabric> f(new UcxFabric());
  f->mns_ = std::move(mns);
  POND_RETURN_IF_ERROR(f->Init(options));
  for (MnDescriptor& d : f->mns_) {
    // An MN that does not answer (its daemon died, and the CN starts before it is declared) stays
    // sealed: down, not fatal, as an unsealed one is; its restart's ReplaceMn asks again. A
    // refusal is fatal: this process is not of the cluster.
    Status st = f->Unseal(d);
    if (!st.ok() && st.code() != Code::kUnavailable) return st;
  }
  return f;
}

Status UcxFabric::Init(const UcxOptions& options) {
  auto ctx = Context::Create(options);
  if (!ctx.ok()) return ctx.status();
  ctx_ = std::move(ctx).value();
  peer_errors_ = PeerErrorsHandled(options.tls);
  // A batch awaiting its answer learns of its MN's failure from peer error handling alone.
  verbs_by_message_ = peer_errors_ && VerbsByMessage(options.tls);
  peer_token_ = options.peer_token;
  return Status::Ok();
}

Status UcxFabric::Unseal(MnDescriptor& d) {
  if (!d.rkey.empty()) return Status::Ok();
  Result<std::vector<std::byte>> key =
      AskRegionKey(*ctx_, d, peer_token_, peer_errors_, kHelloWait);
  if (!key.ok()) return key.status();
  d.rkey = std::move(key).value();
  return Status::Ok();
}

void UcxFabric::Retire(Retired r) {
  std::lock_guard lock(directory_mu_);
  retired_.push_back(std::move(r));
}

void UcxFabric::Abandon(std::unique_ptr<Worker> w, std::unique_ptr<EpErrors> errors) {
  std::lock_guard lock(directory_mu_);
  abandoned_.push_back(std::move(w));
  static_cast<void>(errors.release());  // its worker may still report to it
}

UcxFabric::~UcxFabric() {
  // Every endpoint is gone (they are destroyed before their fabric): close all their UCP
  // endpoints at once and progress every worker until the closes are done, then destroy the
  // workers. The in-process MNs' threads answer meanwhile; they stop last.
  std::vector<std::pair<ucp_worker_h, ucs_status_ptr_t>> closing;
  ucp_request_param_t p{};
  for (Retired& r : retired_) {
    for (ucp_ep_h ep : r.eps) closing.emplace_back(r.worker->get(), ucp_ep_close_nbx(ep, &p));
  }
  const auto until = std::chrono::steady_clock::now() + kCloseWait;
  for (bool pending = true; pending && std::chrono::steady_clock::now() < until;) {
    pending = false;
    for (Retired& r : retired_) ucp_worker_progress(r.worker->get());
    for (auto& [w, req] : closing) {
      if (req == nullptr || UCS_PTR_IS_ERR(req)) continue;
      if (ucp_request_check_status(req) == UCS_INPROGRESS) {
        pending = true;
      } else {
        ucp_request_free(req);
        req = nullptr;
      }
    }
  }
  for (auto& [w, req] : closing) {
    if (req != nullptr && !UCS_PTR_IS_ERR(req)) ucp_request_free(req);
  }
  retired_.clear();
  // An abandoned worker is never destroyed, nor the context it lives in (UCX has no cleanup of a
  // context whose workers remain).
  if (!abandoned_.empty()) {
    for (std::unique_ptr<Worker>& w : abandoned_) static_cast<void>(w.release());
    static_cast<void>(ctx_.release());
  }
}

std::byte* UcxFabric::region(MnId mn) {
  return mn < local_mns_.size() ? local_mns_[mn]->region() : nullptr;
}

std::optional<UcxFabric::WorkerEntry> UcxFabric::FindWorker(WorkerAddr a) {
  std::lock_guard lock(directory_mu_);
  auto it = workers_.find(a.Packed());
  if (it == workers_.end()) return std::nullopt;
  return it->second;
}

Result<CnDescriptor> UcxFabric::Describe(uint16_t cn, uint16_t incarnation) {
  std::lock_guard lock(directory_mu_);
  CnDescriptor d;
  d.cn = cn;
  d.incarnation = incarnation;
  for (uint16_t i = 0;; i++) {
    auto it = workers_.find(WorkerAddr{cn, i}.Packed());
    if (it == workers_.end() || it->second.remote) break;
    d.workers.push_back(it->second.address);
  }
  if (d.workers.empty()) {
    return InvalidArgument("CN " + std::to_string(cn) + " has no workers in this process");
  }
  return d;
}

Status UcxFabric::AddRemoteCn(const CnDescriptor& d) {
  std::lock_guard lock(directory_mu_);
  for (uint16_t i = 0; i < d.workers.size(); i++) {
    auto [it, fresh] = workers_.try_emplace(WorkerAddr{d.cn, i}.Packed());
    if (!fresh && !it->second.remote) {
      return InvalidArgument("CN " + std::to_string(d.cn) + " is served by this process");
    }
    it->second = WorkerEntry{d.workers[i], true};
  }
  // Endpoints connected to the CN's earlier process reconnect at their next packet to it.
  generations_[d.cn].fetch_add(1, std::memory_order_acq_rel);
  open_.store(true, std::memory_order_release);
  return Status::Ok();
}

Status UcxFabric::ReplaceMn(MnDescriptor d) {
  // Asked before the lock: the MN's answer is a round trip the endpoints need not wait for.
  POND_RETURN_IF_ERROR(Unseal(d));
  std::lock_guard lock(directory_mu_);
  if (d.mn >= mns_.size()) return InvalidArgument("no MN " + std::to_string(d.mn));
  if (d.bytes != mns_[d.mn].bytes) {
    return InvalidArgument("MN " + std::to_string(d.mn) + " came back with " +
                           std::to_string(d.bytes) + " bytes, not " +
                           std::to_string(mns_[d.mn].bytes));
  }
  mns_[d.mn] = std::move(d);
  mn_generations_[d.mn].fetch_add(1, std::memory_order_acq_rel);
  return Status::Ok();
}

void UcxFabric::SetMnDown(MnId mn, bool down) {
  if (mn >= mn_down_.size()) return;
  if (mn_down_[mn].exchange(down, std::memory_order_acq_rel) == down) return;
  mn_down_changes_.fetch_add(1, std::memory_order_acq_rel);
}

MnDescriptor UcxFabric::MnNow(MnId mn) {
  std::lock_guard lock(directory_mu_);
  return mns_[mn];
}

std::unique_ptr<Endpoint> UcxFabric::CreateEndpoint(WorkerAddr self, Scheduler& sched) {
  auto worker = Worker::Create(*ctx_);
  POND_CHECK_MSG(worker.ok(), worker.status().ToString().c_str());
  {
    std::lock_guard lock(directory_mu_);
    auto [it, fresh] = workers_.emplace(self.Packed(), WorkerEntry{(*worker)->address(), false});
    POND_CHECK_MSG(fresh, "two endpoints for one worker address");
  }
  auto ep = std::make_unique<UcxEndpoint>(*this, self, sched, std::move(worker).value());
  Status s = ep->Init();
  POND_CHECK_MSG(s.ok(), s.ToString().c_str());
  sched.AddPoller(ep.get());
  return ep;
}

}  // namespace pond::ucx
