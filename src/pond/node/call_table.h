// CallTable: the callee's memory of routed calls, which makes each call run at most once.
//
// A caller numbers its calls 1, 2, ... (per worker) and sends with each request its *floor*: the
// lowest id it still awaits an answer for (every lower id is answered). The callee keeps, per
// caller, each call at or above the floor: running, or done with its outcome. So a request that
// arrives twice (the network duplicated it, or later a retry) is run only the first time; a copy
// that comes while the call runs is dropped (the answer will follow), one that comes after it is
// answered again from the stored outcome — code, and for a caller that asked for them the
// Status message and reply bytes — and one below the floor — its caller already has the
// answer — is dropped. Memory per caller is bounded by the calls it has outstanding, each with
// at most kReplyBytesMax bytes of reply.
//
// Thread rules: one CallTable per worker, used from that worker's thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "pond/status.h"
#include "pond/transport/endpoint.h"

namespace pond::node {

enum class CallAdmission : uint8_t {
  kRun,       // new: run the procedure, then Finish
  kRunning,   // a copy of a call that is still running: drop it
  kAnswered,  // a copy of a finished call: answer it again with `code`
  kStale,     // below the caller's floor: the caller has its answer; drop it
};

// What a finished call answered. message and reply are empty unless its caller asked for them
// (kCallWantsReply, routed_call.h), so an answer without them keeps its 16 bytes.
struct CallOutcome {
  Code code = Code::kOk;
  std::string message;
  std::vector<std::byte> reply;
};

struct CallTableStats {
  uint64_t runs = 0;
  uint64_t copies_running = 0;
  uint64_t copies_answered = 0;
  uint64_t stale = 0;
};

class CallTable {
 public:
  struct Admit {
    CallAdmission what;
    // kAnswered: the stored outcome, valid until the table's next Request or Finish.
    const CallOutcome* outcome = nullptr;
  };
  // A request `id` from `caller` whose floor is `floor` (floor <= id for a well-formed caller).
  Admit Request(WorkerAddr caller, uint64_t id, uint64_t floor);
  // A call admitted with kRun has finished with `outcome`.
  void Finish(WorkerAddr caller, uint64_t id, CallOutcome outcome);

  size_t entries() const;  // calls remembered, over all callers
  const CallTableStats& stats() const { return stats_; }

 private:
  struct Entry {
    bool done = false;
    CallOutcome outcome;
  };
  struct Caller {
    uint64_t floor = 0;
    std::map<uint64_t, Entry> calls;  // ids >= floor
  };
  std::unordered_map<uint32_t, Caller> callers_;  // by WorkerAddr::Packed()
  CallTableStats stats_;
};

}  // namespace pond::node
