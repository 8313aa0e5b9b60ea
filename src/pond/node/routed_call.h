// RoutedCalls: one worker's side of routed procedure calls (hybrid routing, Lotus §4.3), as the
// caller and as the callee.
//
// A caller sends kMsgCall to worker i of the target CN (from its own worker i) and waits for
// kMsgCallResult. The callee runs the procedure once however often the request arrives
// (call_table.h: ids and the caller's floor) and answers with its Status code — and, when the
// request asks for it (kCallWantsReply), the Status message and the procedure's reply bytes. The
// caller takes the first answer for a call it awaits and drops every other. Wire formats:
// docs/formats.md "Routed calls".
//
// Thread rules: one RoutedCalls per worker, used from that worker's thread only. It registers
// itself as the handler of kMsgCall and kMsgCallResult on the worker's endpoint and must outlive
// the calls it serves and makes.
#pragma once

#include <coroutine>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "pond/cluster.h"
#include "pond/node/call_table.h"
#include "pond/runtime/scheduler.h"
#include "pond/status.h"
#include "pond/task.h"
#include "pond/transport/endpoint.h"

namespace pond::node {

// Message kinds 0x03xx: routed procedure calls (docs/formats.md "Message kinds").
inline constexpr uint16_t kMsgCall = 0x0301;
inline constexpr uint16_t kMsgCallResult = 0x0302;

// CallHeader::flags: answer with the Status message and the reply bytes. Without it the answer
// is the bare 16-byte CallResult, as before replies existed, so Status-only calls cost the
// same bytes (and a simulated run the same time).
inline constexpr uint16_t kCallWantsReply = 1;
// call_id := incarnation:16 n:48 (docs/formats.md "Routed calls").
inline constexpr uint64_t kCallIdIncarnationShift = 48;
// Longer Status messages are cut: a message explains, it does not carry data.
inline constexpr size_t kCallMessageBytesMax = 1024;

// InvalidArgument if a reply of `bytes` is longer than kReplyBytesMax; checked wherever the
// procedure ran, so a call fails alike on this CN and on another.
inline Status CheckReplyBytes(size_t bytes) {
  if (bytes <= kReplyBytesMax) return Status::Ok();
  return InvalidArgument("reply of " + std::to_string(bytes) + " bytes exceeds kReplyBytesMax (" +
                         std::to_string(kReplyBytesMax) + ")");
}

struct CallHeader {
  uint64_t call_id;  // 1, 2, ... per calling worker
  uint64_t floor;    // the lowest call id the caller still awaits (call_table.h)
  uint16_t proc;
  uint16_t flags;  // kCallWantsReply or 0
  uint16_t reserved[2];
};
static_assert(sizeof(CallHeader) == 24 && offsetof(CallHeader, floor) == 8 &&
              offsetof(CallHeader, proc) == 16 && offsetof(CallHeader, flags) == 18);
// Followed by message_bytes of Status message, then reply_bytes of reply; both 0 unless the
// request carried kCallWantsReply.
struct CallResult {
  uint64_t call_id;
  uint8_t code;  // pond::Code
  uint8_t reserved;
  uint16_t message_bytes;  // at most kCallMessageBytesMax
  uint32_t reply_bytes;    // at most kReplyBytesMax
};
static_assert(sizeof(CallResult) == 16 && offsetof(CallResult, code) == 8 &&
              offsetof(CallResult, message_bytes) == 10 && offsetof(CallResult, reply_bytes) == 12);

struct RoutedCallStats {
  uint64_t calls = 0;          // made by this worker
  uint64_t answers = 0;        // taken for a call awaited
  uint64_t answer_copies = 0;  // answers for no call awaited (copies, or late): dropped
  uint64_t malformed = 0;      // messages whose sizes or values do not add up: dropped
  uint64_t resends = 0;        // requests sent again, unanswered for kResendAfterNs
};

class RoutedCalls : public Alarm {
 public:
  // Runs procedure `proc` here with `args` (the callee side), putting what it answers in
  // *reply (null: the caller does not want it); a Status for an unknown procedure is the
  // runner's to give.
  using Runner = std::function<Task<Status>(ProcedureId proc, std::span<const std::byte> args,
                                            std::vector<std::byte>* reply)>;

  // Calls are numbered from `first_id`: a restarted CN's workers start past every id their
  // earlier incarnations used (high bits: the incarnation), so a late answer to a call of the
  // dead incarnation matches none of the new one's.
  RoutedCalls(Endpoint& ep, Scheduler& sched, Runner run, uint64_t first_id = 1);
  ~RoutedCalls() override;
  RoutedCalls(const RoutedCalls&) = delete;
  RoutedCalls& operator=(const RoutedCalls&) = delete;

  // Runs `proc` on `target` and returns its Status (code and "remote call failed").
  Task<Status> Call(WorkerAddr target, ProcedureId proc, std::span<const std::byte> args);
  // Runs `proc` on `target` and returns its reply, or its Status with the callee's message.
  Task<Result<std::vector<std::byte>>> CallWithReply(WorkerAddr target, ProcedureId proc,
                                                     std::span<const std::byte> args);

  // The message handlers (public so that tests can feed them one message at a time).
  void OnCall(const Message& m);
  void OnResult(const Message& m);
  // Resends every request unanswered for kResendAfterNs, with the floor as it is now: the
  // callee runs a call once however often its request arrives (CallTable).
  void OnAlarm() override;

  // Membership: CN `cn` failed. Every call awaited from it ends with Unknown — the callee may
  // have run it, committed, and died before answering — and none is resent; a later call to it
  // is refused without being sent, as an abort ("not sent: ...": known not to have run).
  // Returns how many calls ended Unknown.
  size_t PeerFailed(uint16_t cn);
  // CN `cn` came back as a new incarnation: calls to it are sent again.
  void PeerRestarted(uint16_t cn) {
    if (cn < failed_.size()) failed_[cn] = false;
  }

  const CallTable& table() const { return table_; }
  const RoutedCallStats& stats() const { return stats_; }
  size_t awaited() const { return pending_.size(); }

 private:
  struct Pending {
    std::coroutine_handle<> waiter;
    CallOutcome outcome;
    WorkerAddr target;
    std::vector<std::byte> request;  // header and arguments, as sent
    uint64_t sent_ns = 0;            // when the request last left
  };
  void ArmAlarm();
  bool Failed(uint16_t cn) const { return cn < failed_.size() && failed_[cn]; }
  static Status FailedPeer(uint16_t cn);
  // Sends the request of a new call that `p` will await.
  void Send(WorkerAddr target, ProcedureId proc, uint16_t flags, std::span<const std::byte> args,
            Pending* p);
  Task<void> Serve(WorkerAddr from, CallHeader h, std::vector<std::byte> args);
  void Answer(WorkerAddr to, uint64_t call_id, const CallOutcome& outcome);

  Endpoint& ep_;
  Scheduler& sched_;
  Runner run_;
  // Calls awaited, by id; ordered, so that the first is the floor every request carries.
  std::map<uint64_t, Pending*> pending_;
  uint64_t next_id_ = 1;
  CallTable table_;  // calls other workers made to this one
  RoutedCallStats stats_;
  bool alarm_set_ = false;
  std::vector<bool> failed_;  // CNs declared failed, by id
};

}  // namespace pond::node
