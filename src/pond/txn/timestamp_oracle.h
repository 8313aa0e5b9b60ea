// The timestamp service of the compute pool (Lotus §5, "scalable timestamp service").
//
// TimestampOracle hands out 64-bit timestamps that strictly increase across all grants and carry
// a physical-clock component: ts = (clock µs << kLogicalBits) | logical. The physical part lets
// garbage collection reason about a version's age (Lotus §7.1); the logical part keeps grants
// unique when many come in one microsecond. One oracle serves the cluster; it lives on one CN
// (the "TSO host"). When that CN fails, a new oracle starts on a survivor from its own clock
// (docs/recovery.md "The timestamp oracle"): its grants exceed every grant of the old one because
// an oracle runs ahead of its clock only by the grants of one microsecond (65,536 of them would
// be needed to reach the next) or by its clock stepping back, and the new one starts a lease
// after the old one could last grant. The simulator checks it at every move.
//
// TsoClient is a worker's access to it. All Get() calls of a worker's coroutines in one
// scheduling round become one request for a block of timestamps — one message and one round trip
// for the whole worker, not one per transaction. On the TSO host itself the client calls the
// oracle directly. With the protocol's tso_combine, a client keeps one request in flight (those
// who ask meanwhile go in the next, sent when it is answered), and the workers of a group on a
// CN send their requests to one of them, the group's relay, whose client adds them to its own
// block and hands each its part of the grant: the oracle hears from the relays alone, and the
// busier it is, the more each request carries. A grant still comes after each request it serves
// was made, so it is as fresh as a direct one.
//
// Thread rules: TimestampOracle is thread-safe. TsoClient and TsoServer belong to one worker.
#pragma once

#include <algorithm>
#include <atomic>
#include <coroutine>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "pond/base/relaxed_counter.h"
#include "pond/clock.h"
#include "pond/runtime/scheduler.h"
#include "pond/task.h"
#include "pond/transport/endpoint.h"

namespace pond::txn {

inline constexpr int kLogicalBits = 16;
// Message kinds 0x02xx belong to the timestamp service (docs/formats.md "Message kinds").
inline constexpr uint16_t kMsgTsoRequest = 0x0201;
inline constexpr uint16_t kMsgTsoReply = 0x0202;

// The most timestamps one request asks for: a worker asking for more in one round sends more
// requests. A grant runs the oracle ahead of its clock by its size, and the oracle's move after a
// failure relies on that lead staying far below a lease (see above); a request for more, or for
// none, is dropped unanswered.
inline constexpr uint32_t kTsoBlockMax = 4096;

struct TsoRequest {
  uint32_t count;  // timestamps wanted: 1 to kTsoBlockMax
  uint32_t seq;    // echoed in the reply, so replies may arrive in any order
};
static_assert(sizeof(TsoRequest) == 8);
struct TsoReply {
  uint64_t first;  // the granted block is [first, first + count)
  uint32_t count;
  uint32_t seq;
};
static_assert(sizeof(TsoReply) == 16);

class TimestampOracle {
 public:
  explicit TimestampOracle(Clock& clock) : clock_(clock) {}
  // Grants `n` >= 1 consecutive timestamps and returns the first.
  uint64_t Grant(uint32_t n);
  // The last timestamp granted (0: none), and the least the next grant can be.
  uint64_t last() const { return last_.load(std::memory_order_acquire); }
  uint64_t NextAtLeast() const {
    return std::max(last() + 1, (clock_.NowNs() / 1000) << kLogicalBits);
  }

 private:
  Clock& clock_;
  std::atomic<uint64_t> last_{0};
};

// Read by Cluster::Stats from any thread while the worker counts (RelaxedCounter).
struct TsoClientStats {
  RelaxedCounter timestamps;
  RelaxedCounter requests;  // blocks asked for (messages to the host, or direct grants there)
  RelaxedCounter resends;   // requests sent again, unanswered for kResendAfterNs
  RelaxedCounter relayed;   // requests of other workers of this CN answered from this one's blocks
};

class TsoClient : public Poller, public Alarm {
 public:
  // `host` is the TSO host worker; `local` is the oracle if this worker's CN is the host.
  TsoClient(Endpoint& ep, WorkerAddr host, TimestampOracle* local);
  ~TsoClient() override;
  TsoClient(const TsoClient&) = delete;
  TsoClient& operator=(const TsoClient&) = delete;

  // co_await client.Get(): one fresh timestamp.
  auto Get() {
    struct Awaiter {
      TsoClient* c;
      uint64_t ts = 0;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<> h) {
        c->waiting_.push_back({h, &ts});
        c->waiting_count_++;
      }
      uint64_t await_resume() const noexcept { return ts; }
    };
    return Awaiter{this};
  }

  // A request of worker `from` of this CN (TsoRequest `seq`, `count` timestamps), which this
  // worker relays: it joins this round's block, and `from` hears its part of the grant.
  void Relay(WorkerAddr from, uint32_t seq, uint32_t count);

  bool Poll() override { return false; }
  void EndRound() override;
  // The oracle moved (its CN failed): requests go to `host` from now on (`local` if this
  // worker's CN is the new host), and those awaiting the old one are sent there at once — the
  // old host's answers, if any were on their way, died with it. Nothing changes if `host` and
  // `local` are this client's already (a relay's clients ask it wherever the oracle is).
  void SetHost(WorkerAddr host, TimestampOracle* local);
  // Resends every request unanswered for kResendAfterNs (the request or its reply was lost).
  void OnAlarm() override;
  const TsoClientStats& stats() const { return stats_; }
  // Requests sent and not answered yet.
  size_t awaiting() const { return sent_.size(); }
  // With `on`, a round's askers wait while a request is unanswered and ask together once it
  // is: one request in flight, so the busier the oracle, the more each request carries.
  void SetOneInFlight(bool on) { one_in_flight_ = on; }

 private:
  struct Waiter {
    std::coroutine_handle<> h;  // null: a request relayed for `from`
    uint64_t* out = nullptr;
    WorkerAddr from{};
    uint32_t seq = 0;
    uint32_t count = 1;  // timestamps wanted
  };
  struct Sent {
    std::vector<Waiter> waiters;
    uint32_t count;    // their timestamps: 1 to kTsoBlockMax
    uint64_t sent_ns;  // when the request last left
  };
  // Gives the block's waiters their timestamps from `first` on, in the order they asked.
  void Hand(std::vector<Waiter> batch, uint64_t first);
  // One request for `block` (`count` timestamps, at most kTsoBlockMax), or a grant here on the
  // host.
  void Ask(std::vector<Waiter> block, uint32_t count);
  void OnReply(const Message& m);
  void SendRequest(uint32_t seq, const Sent& s);
  void ArmAlarm();

  Endpoint& ep_;
  Scheduler& sched_;
  WorkerAddr host_;
  TimestampOracle* local_;
  std::vector<Waiter> waiting_;    // asked this round, not yet sent
  uint64_t waiting_count_ = 0;     // their timestamps
  std::map<uint32_t, Sent> sent_;  // by request seq, answered by none of its copies yet
  bool alarm_set_ = false;
  bool one_in_flight_ = false;
  uint32_t next_seq_ = 0;
  TsoClientStats stats_;
};

// The handler for timestamp requests from other workers. Every worker has one; it grants only
// on the TSO host (`oracle` set). Elsewhere it hands a request from a worker of its own CN to
// `relay` if there is one (tso_combine), and drops any other — one sent to a CN that has not heard
// yet that it hosts the oracle now — and the asker resends it.
class TsoServer {
 public:
  TsoServer(Endpoint& ep, TimestampOracle* oracle, TsoClient* relay = nullptr);
  void SetOracle(TimestampOracle* oracle) { oracle_ = oracle; }
  uint64_t dropped() const { return dropped_; }

 private:
  Endpoint& ep_;
  TimestampOracle* oracle_;
  TsoClient* relay_;
  uint64_t dropped_ = 0;
};

}  // namespace pond::txn
