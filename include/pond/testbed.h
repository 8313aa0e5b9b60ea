// Testbed: the hardware a simulated cluster (Cluster::StartSimulated) runs on — network latency
// and link rate, what each memory node's NIC serves per second, what a compute node's CPU spends
// on each step — and, for testing, the faults of messages between compute nodes.
//
//   Testbed t = Testbed::Preset("cx5").value();   // or Testbed{} (cx3), or Testbed::Load(file)
//   t.faults.duplicate_probability = 0.01;
//   auto cluster = Cluster::StartSimulated(config, t);
//
// Every value has a source (docs/simulator.md "Network, NIC and CPU model"). The presets are
// `cx3` (the Lotus testbed's NICs, ConnectX-3, with CPU costs fitted to this machine; the
// defaults below), `cx5` (ConnectX-5, Sherman's testbed) and `lotus-testbed` (cx3 with CPU costs
// and the atomic rate fitted to the Lotus paper's own absolute throughputs); a JSON model file
// names a preset as its base and overrides any field (models/<preset>.json hold the presets with
// the source of every value beside it).
//
// Thread rules: a Testbed is a plain value; copy it freely. The static functions may be called
// from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pond/status.h"

namespace pond {

enum class DelayDistribution : uint8_t {
  kUniform,      // uniform in [delay_ns_min, delay_ns_max]
  kExponential,  // delay_ns_min + Exp(mean delay_ns_mean), capped at delay_ns_max
};

// What may go wrong with a message between two compute nodes (lock requests and replies,
// timestamps, routed calls); one-sided operations on memory nodes are never faulted. All off by
// default. Each message draws its fate from the run's seed, so a faulty run replays exactly.
// Delays reorder messages: one delayed past the next on its link is overtaken. Pond survives all
// three: a request unanswered for 1 ms is resent, and receivers tell copies from live requests;
// a lost message costs its transaction that millisecond. Pond's seed tests run with them.
struct MessageFaults {
  double drop_probability = 0;       // the message is lost
  double duplicate_probability = 0;  // it is delivered twice; the copy draws its own delay
  double delay_probability = 0;      // it gets an extra delay from the distribution
  DelayDistribution delay_distribution = DelayDistribution::kUniform;
  uint64_t delay_ns_min = 0;
  uint64_t delay_ns_max = 0;   // at most 10 virtual seconds
  uint64_t delay_ns_mean = 0;  // kExponential only
};

// A node fault of a simulated run (docs/fault_schedules.md), at a virtual time counted from the
// start of the next Cluster::Run. A crashed CN stops between two events: its volatile state
// (lock table, caches, running transactions and clients) is gone; its commit logs and data in
// the memory pool are not. Cluster::ScheduleFaults says which kinds a cluster can survive.
enum class NodeFaultKind : unsigned char {
  kCrashCn,
  kRestartCn,
  kCrashMn,
  kRestartMn,
  kPartitionCn,
  kHealCn,
  // The coordination service stops answering every CN, then answers again holding what it held
  // (`node` unused). CNs declare and recover nothing while it is down.
  kCrashCoord,
  kRestartCoord,
  // Host N (CN N and MN N, as scripts/hosts.sh deploys them) is cut off from everyone else: CN N
  // as by kPartitionCn and reaching MN N alone; every other CN's one-sided ops to MN N fail as
  // to a crashed MN. MN N keeps running and keeps its memory. kHealHost brings the links back.
  kPartitionHost,
  kHealHost,
  // Hosts `node` and `peer` lose the link between them alone: CN `node` and CN `peer` lose each
  // other's messages, and each CN's one-sided ops to the other host's MN fail as to a crashed MN.
  // Both reach everyone else and the coordination service. kHealHosts brings the link back.
  kCutHosts,
  kHealHosts,
};
// The steps of a read-write transaction's commit path that a crash may be aimed at
// (`crash-cn:N@step=S`, docs/fault_schedules.md "Crashes aimed at a step"): the CN crashes right
// after one of its transactions reaches the step, before anything it posts next is acknowledged.
// Where each step is under lotus: locks taken (Execute, CN locks granted); records read (Execute
// done); logged (commit log and write-invisible flushed on every replica); timestamped (commit
// timestamp granted); visible (write-visible flushed on the replicas readers do not use); unlocked
// (locks released; the client hears in the same round, before the crash). Under motor: read
// (Execute done, its MN lock words taken), timestamped, logged (its record and the backups'
// cells flushed), unlocked. Under ford: read, logged (undo record and validation flushed),
// visible (the backups written), unlocked.
enum class CommitStep : unsigned char {
  kNone,
  kLocked,
  kRead,
  kLogged,
  kTimestamped,
  kVisible,
  kUnlocked,
};
inline constexpr int kCommitSteps = 7;  // kNone included

struct NodeFault {
  NodeFaultKind kind = NodeFaultKind::kCrashCn;
  uint16_t node = 0;
  uint64_t at_ns = 0;
  // crash-cn only: not at at_ns but at the first `step` one of the CN's transactions reaches at
  // or after it (or at_ns + kStepCrashWaitNsMax if none does by then).
  CommitStep step = CommitStep::kNone;
  // kCutHosts and kHealHosts only: the other host (above `node`).
  uint16_t peer = 0;
};
inline constexpr uint64_t kStepCrashWaitNsMax = 1'000'000;
// The longest a simulated partition (host or CN), crash-cn or crash-mn waits for the cluster to
// survive it — for an MN that restarted to be read again, or a CN to be back — before it is given
// up, never carried out (FailoverStats::faults_given_up): a schedule's check counts a restarted
// MN up from its restart, the simulator only once its copy ends (docs/recovery.md "Partitions and
// fencing").
// Far above a copy's length: one of the fault seeds' 72,610 slots takes 170 ms of virtual time,
// and TPC-C's 53,000 slots and tree nodes up to 1.3 s while its clients hold the hot rows.
inline constexpr uint64_t kMnsOutWaitNsMax = 5'000'000'000;

struct Testbed {
  std::string name = "cx3";

  // Network: one-way latency of a small message or one-sided op between any two nodes, and the
  // link rate that adds size / rate for payload bytes.
  uint64_t one_way_ns = 1000;
  double link_gbps = 56;
  // One-sided ops: each doorbell batch, and each Flush's completion back, takes up to jitter_ns
  // more on its way (uniform, drawn from the run's seed); one draw in kStragglerOneIn is a
  // straggler, up to kStragglerTimes x jitter_ns. A queue pair keeps its order — a batch never
  // overtakes an earlier one of the same worker to the same MN — but batches to different MNs,
  // and completions, then arrive in any order, as they may on real hardware: what a protocol must
  // not rely on. 0 in the presets (every batch of a round arrives at once, which the calibration
  // assumes); the seed tests and `--faults random` turn it on.
  uint64_t jitter_ns = 0;
  static constexpr uint64_t kStragglerOneIn = 32;
  static constexpr uint64_t kStragglerTimes = 64;

  // Each MN's NIC is a FIFO server: a one-sided op occupies it 1e3 / Mops ns by verb kind, plus
  // its payload at the link rate.
  double mn_read_mops = 35;
  double mn_write_mops = 35;
  double mn_atomic_mops = 2.5;
  // Atomics on the NIC's own memory (ConnectX-5 and later expose 256 KiB of it; ranges the
  // fabric marks, SimFabric::MarkDeviceMemory): no PCIe round trip to host memory, so far more of
  // them per second (Sherman §4.3: ~110 M CAS/s). A NIC without it (cx3) has the host rate.
  double mn_device_atomic_mops = 2.5;
  // Atomics to one address do not overlap: a NIC keeps 4096 lock buckets, chosen by an address's
  // 12 low bits, and an atomic waits until the one before it in its bucket has done its
  // read-modify-write of memory (Sherman §2.3). Each holds its bucket this long — the two PCIe
  // transactions of host memory, less on the NIC's own — so ops to one hot word complete at most
  // one per this long, however idle the rest of the NIC. 0: no such limit. In cx3 it is the
  // atomic's whole service time (1 / mn_atomic_mops), which the FIFO NIC already spaces atomics
  // by, so it changes nothing there.
  uint64_t mn_atomic_serial_ns = 400;
  uint64_t mn_device_atomic_serial_ns = 400;

  // CN CPU: a worker is one core. A scheduling round costs cpu_round_ns, plus per coroutine
  // resumed, per one-sided op posted, per doorbell batch, and per CN message sent or received.
  // Calibrated against `pond bench kvs` (docs/simulator.md "Calibration").
  uint64_t cpu_round_ns = 60;
  uint64_t cpu_resume_ns = 370;
  uint64_t cpu_op_ns = 60;
  uint64_t cpu_batch_ns = 120;
  uint64_t cpu_message_ns = 370;

  MessageFaults faults;

  // InvalidArgument naming the first bad field; StartSimulated refuses such a testbed.
  Status Validate() const;

  // "cx3", "cx5" or "lotus-testbed"; InvalidArgument otherwise.
  static Result<Testbed> Preset(const std::string& name);
  // A preset (the file's "base", default cx3) with the file's fields applied; the testbed's
  // name is the path. Besides fields, a file may hold notes, which are ignored: "<field>_source"
  // (a string: where the field's value comes from; models/cx3.json) and any key starting with
  // "_". InvalidArgument, naming the file and the key, on a bad value or an unknown key.
  static Result<Testbed> Load(const std::string& path);
  // The same from the file's text; `name` stands for the path in the testbed and in errors.
  static Result<Testbed> FromJson(std::string_view text, const std::string& name);
  // A preset's name (PresetNames()) or a model file's path.
  static Result<Testbed> FromName(const std::string& preset_or_path);
  static const std::vector<std::string>& PresetNames();
  // The names of every field a file may set and ToJson() prints (besides "name"), in order.
  static const std::vector<std::string>& FieldNames();
  // One line of JSON: the name and every field.
  std::string ToJson() const;
};

}  // namespace pond
