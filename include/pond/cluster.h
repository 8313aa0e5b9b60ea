// Cluster: an embedded Pond cluster — memory nodes, compute nodes with worker threads, the
// timestamp service and the lock tables — inside this process, on the `local` transport.
//
//   ClusterConfig cfg;                               // 3 MNs, 3 CNs, SR, R = 3 ...
//   auto cluster = Cluster::Start(cfg).value();
//   uint16_t kv = cluster->CreateTable({.name = "kv", .value_bytes = 40, .capacity = 1 << 20})
//                     .value();
//   cluster->Load(kv, n, [](uint64_t i, uint64_t* key, std::span<std::byte> value) {...});
//   cluster->Run(2, [&](Session& s) -> Task<void> { ... s.Begin(...) ... });
//
// Run() starts one thread per worker; every worker runs `clients` client coroutines of the
// given function, each with its own Session, and serves lock, timestamp and routed requests from
// other CNs until every client of every worker has returned.
//
// Thread rules: Start, CreateTable, Load, RegisterProcedure and Run are called from one
// controlling thread, never concurrently; Session and Txn are used inside Run's coroutines.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pond/clock.h"
#include "pond/cluster_config.h"
#include "pond/rng.h"
#include "pond/status.h"
#include "pond/task.h"
#include "pond/testbed.h"
#include "pond/txn.h"

namespace pond {

struct TableOptions {
  std::string name;
  uint32_t value_bytes = 40;
  uint64_t capacity = 1 << 16;  // keys the table must hold
  bool critical_field = false;  // keys carry a shard number in bits 0..11 (Lotus §4.2)
  // An ordered table also answers Txn::Scan: a B+Tree in the memory pool indexes its keys
  // (docs/protocol.md "Ordered tables and range scans"). Keys are 1..2^64-2; with a critical
  // field, keys are ordered by shard first, then by the bits above it. The name has at most 21
  // characters (the hidden table of its stripe rows is named after it).
  bool ordered = false;
  // Ordered tables: a scan under SR reads one hidden row per stripe of 2^stripe_bits consecutive
  // keys it covers (counting the bits above the shard), and every insert or delete writes its
  // key's stripe row. Wide stripes make scans cheap and inserts into one stripe conflict.
  int stripe_bits = 10;
  // Ordered tables: leave the tree entries of deleted keys in place, as before the tree cleaned
  // itself — every later scan then reads them again. Only to measure what cleaning buys
  // (`pond sim tpcc --keep-deleted-entries`; docs/btree.md "The tree cleans itself").
  bool keep_deleted_entries = false;
  // Ordered tables: leave leaves that deletes empty on their level, as before leaves merged —
  // a scan then crosses each. Only to measure what merging buys (`pond sim tpcc
  // --keep-empty-leaves`; docs/btree.md "Merges").
  bool keep_empty_leaves = false;
};

// Where hybrid routing (Lotus §4.3) sends a call: read-write transactions to the CN managing the
// shard of their first key; read-only ones stay on the calling CN (clients are spread evenly
// over CNs, so that CN is as good as any: the load-balancing half of Lotus's second level).
struct RouteHint {
  TxnKind kind = TxnKind::kReadWrite;
  uint16_t table = 0;
  uint64_t first_key = 0;
};

class Session;
// A stored procedure: runs (usually one transaction) on the CN routing chose, with `args`.
using Procedure = std::function<Task<Status>(Session&, std::span<const std::byte> args)>;
// A stored procedure that answers with bytes (e.g. the values its transaction read): the caller
// of Session::CallWithReply gets them, or the procedure's Status if it fails.
using ReplyProcedure =
    std::function<Task<Result<std::vector<std::byte>>>(Session&, std::span<const std::byte> args)>;
using ProcedureId = uint16_t;
// The most bytes a ReplyProcedure may answer with: a reply is a result, not a bulk transfer.
inline constexpr size_t kReplyBytesMax = 64 * 1024;

struct AbortCounts {
  // Every reason, in the order reports list them: the words a report prints, the key its JSON
  // uses, and the counter. Totals, differences, printed breakdowns and JSON all go through this
  // table, so a new reason is counted everywhere once it is listed here.
  struct Reason {
    const char* words;  // "lock conflict"
    const char* key;    // "lock_conflict"
    uint64_t AbortCounts::*count;
  };
  static const std::vector<Reason>& Reasons();

  uint64_t lock_conflict = 0;
  uint64_t newer_version = 0;     // a version newer than the start timestamp was committed
  uint64_t snapshot_too_old = 0;  // the version the snapshot needs was recycled
  uint64_t torn_read = 0;         // a concurrent writer was caught mid-write too often
  uint64_t invisible_wait = 0;    // a writer stayed between write-invisible and visible too long
  uint64_t duplicate_key = 0;
  uint64_t validation = 0;      // a read-only item changed before commit (motor, ford)
  uint64_t user = 0;            // the transaction body gave up
  uint64_t mn_unreachable = 0;  // an MN it read from did not answer (it was down)
  uint64_t Total() const;
};

// Latencies counted in fixed buckets, the shape a Prometheus histogram has: counts[i] holds
// those in (kBoundsNs[i-1], kBoundsNs[i]], and the last count those above every bound.
struct LatencyBuckets {
  // 1 us (a commit over shared memory) to 1 s (one stuck behind a failure's recovery).
  static constexpr std::array<uint64_t, 19> kBoundsNs = {
      1'000,      2'000,       5'000,       10'000,      20'000,       50'000,     100'000,
      200'000,    500'000,     1'000'000,   2'000'000,   5'000'000,    10'000'000, 20'000'000,
      50'000'000, 100'000'000, 200'000'000, 500'000'000, 1'000'000'000};
  std::array<uint64_t, kBoundsNs.size() + 1> counts{};
  uint64_t sum_ns = 0;

  // The bucket a latency of `ns` counts in.
  static size_t BucketOf(uint64_t ns) {
    size_t i = 0;
    while (i < kBoundsNs.size() && ns > kBoundsNs[i]) i++;
    return i;
  }
  uint64_t count() const;
};

struct ClusterStats {
  uint64_t committed = 0;
  uint64_t committed_read_only = 0;
  AbortCounts aborts;
  uint64_t remote_calls = 0;  // routed to another CN
  // MN lock words left by a failed, recovered CN that transactions met and freed (motor, ford).
  uint64_t gone_lock_words_freed = 0;
  // B+Tree node lock words left by a failed, recovered CN that workers met and took.
  uint64_t gone_tree_words_taken = 0;
  // Commit rounds posted again to an MN that had not answered them and was not declared down (a
  // link between hosts down for a while: MvccTxn::CommitFlush).
  uint64_t commit_rounds_posted_again = 0;
  // Ordered tables: entries of deleted keys taken out of their B+Trees by the deleting commit,
  // and those it could not take out (an MN did not answer; the entry stays, read as absent).
  uint64_t tree_entries_removed = 0, tree_entries_kept = 0;
  // Leaves those deletes emptied and merged into their right siblings (docs/btree.md "Merges").
  uint64_t tree_leaf_merges = 0;
  uint64_t scan_leaves_read = 0;  // B+Tree leaves read by transactions' scans
  // Keys scans found in a B+Tree and then read as absent (deleted, or an insert that aborted):
  // each cost the scan a row read for nothing.
  uint64_t scan_entries_absent = 0;
  // Transport totals over all workers.
  uint64_t reads = 0, writes = 0, cas = 0, faa = 0, batches = 0, messages = 0, packets = 0;
  // CN-to-CN packets and messages dropped unread as malformed (EndpointStats): a sender's bug,
  // or a member of the cluster that is not Pond.
  uint64_t messages_malformed = 0;
  // Timestamp requests over all workers: blocks asked of the oracle (or granted on its CN), and
  // requests of other workers that relays answered from their blocks (tso-combine).
  uint64_t tso_requests = 0, tso_relayed = 0;
  // Caches over all CNs.
  uint64_t vt_hits = 0, vt_misses = 0, vt_invalidations = 0;
  uint64_t addr_hits = 0, addr_misses = 0;
  // Of every committed transaction, read-only ones too: from Begin to the end of its Commit, by
  // the cluster's clock (virtual time when simulated).
  LatencyBuckets commit_latency;

  // What happened between `before` and this snapshot (both from Cluster::Stats()): every counter
  // subtracted, so a benchmark can report its measured run without the load before it.
  ClusterStats Since(const ClusterStats& before) const;
};

namespace node {
class WorkerContext;
class ClusterImpl;
}  // namespace node

// A client coroutine's handle on the worker it runs on.
class Session {
 public:
  Txn Begin(TxnKind kind);

  // Runs `body` in a transaction of `kind` until it commits, retrying an aborted attempt after
  // a randomized, exponentially growing backoff, at most `attempts` times. `body` adds keys,
  // Executes and writes; RunTxn commits. Returns the last attempt's Status.
  Task<Status> RunTxn(TxnKind kind, std::function<Task<Status>(Txn&)> body, int attempts = 32);

  // Calls a registered procedure on the CN hybrid routing picks for `hint` (maybe this one). A
  // call routed to another CN returns the code of the procedure's Status, with the message
  // "remote call failed"; a reply procedure's bytes are dropped.
  Task<Status> Call(ProcedureId proc, std::span<const std::byte> args, const RouteHint& hint);
  // The same call, returning what the procedure answered wherever it ran: a ReplyProcedure's
  // bytes (none from a Procedure), or its Status whole — code and message. A reply longer than
  // kReplyBytesMax fails with InvalidArgument.
  Task<Result<std::vector<std::byte>>> CallWithReply(ProcedureId proc,
                                                     std::span<const std::byte> args,
                                                     const RouteHint& hint);

  // co_await SleepFor(ns): resumes after `ns` ns of the cluster's clock (virtual time when
  // simulated); the worker runs its other coroutines meanwhile. Never block a worker thread
  // instead (std::this_thread::sleep_for stalls every coroutine of the worker).
  Task<void> SleepFor(uint64_t ns);
  // co_await Yield(): lets the worker's other ready coroutines run first.
  Task<void> Yield();
  // Runs `fn` on this worker's thread at the end of the worker's current round: what many
  // calls finishing in one round leave to do for one front end (a message of answers to write)
  // is then done once. `fn` must not block.
  void AtRoundEnd(std::function<void()> fn);

  uint16_t cn() const;
  uint16_t worker() const;
  int client() const { return client_; }  // index of this client coroutine on its worker
  Rng& rng();
  Clock& clock();

 private:
  friend class Cluster;
  friend class node::ClusterImpl;  // a restarted CN's clients
  friend class node::WorkerContext;
  Session(node::WorkerContext* w, int client) : w_(w), client_(client) {}
  node::WorkerContext* w_;
  int client_;
  // The transaction of this session answered early last, which may still be publishing: the
  // session's next ones wait for that before they execute a key it wrote (TxnState::After).
  std::shared_ptr<std::weak_ptr<txn::TxnState>> answered_early_ =
      std::make_shared<std::weak_ptr<txn::TxnState>>();
};

// What a simulated cluster's hardware did (StartSimulated only).
struct SimStats {
  uint64_t virtual_ns = 0;  // now, in virtual time
  uint64_t events = 0;      // engine events run so far
  struct Nic {
    uint64_t busy_ns[4] = {};  // by verb: READ, WRITE, CAS, FAA, since ResetSimStats
    uint64_t ops[4] = {};
  };
  std::vector<Nic> mn_nics;
  uint64_t cpu_busy_ns = 0;  // over all worker cores, since start
  // Each simulated core's CPU time since start. A CN's cores are its workers and, past their
  // indexes, any core of its own (its membership's).
  struct Core {
    uint16_t cn = 0;
    uint16_t worker = 0;
    uint64_t busy_ns = 0;
  };
  std::vector<Core> cores;
  uint64_t cpu_rounds = 0;  // scheduling rounds run, since start
  uint64_t fault_drops = 0, fault_duplicates = 0, fault_delays = 0;
};

// Cluster::CheckReplicas's findings.
struct ReplicaCheck {
  uint64_t slots = 0;     // live slots compared over all their replicas
  uint64_t versions = 0;  // visible versions whose records were compared
  uint64_t acked = 0;     // committed writes looked for
  uint64_t disagreements = 0, invisible = 0, locked = 0, lost_commits = 0;
  uint64_t lost_groups = 0;           // slots whose every replica is on a down MN
  std::vector<std::string> problems;  // the first few, one line each
  uint64_t tree_nodes = 0;            // ordered tables' B+Tree nodes compared over their copies
  bool ok() const {
    return disagreements == 0 && invisible == 0 && locked == 0 && lost_commits == 0 &&
           lost_groups == 0;
  }
};

// One CN, while it serves (Cluster::GetCnStats): its lock table now, and what the membership of a
// cluster of processes (docs/recovery.md "Processes") did as this CN saw it, since it started.
struct CnStats {
  uint64_t lock_slots = 0;  // the lock table's size: buckets x 8
  uint64_t locks_held = 0;  // holds now: granted less released (a read-locked slot may hold many)
  uint64_t lock_acquired = 0, lock_released = 0;
  uint64_t lock_conflicts = 0, lock_bucket_full = 0, lock_counter_full = 0, lock_wrong_shard = 0;
  uint64_t epoch = 0;           // the membership's newest epoch applied here
  uint64_t cns_failed = 0;      // CNs declared failed
  uint64_t mns_failed = 0;      // MNs declared failed
  uint64_t cns_back = 0;        // restarted CNs let back in
  uint64_t recoveries = 0;      // failed CNs whose recovery finished here (their shards opened)
  uint64_t logs_recovered = 0;  // commit logs of failed CNs this CN replayed
  uint64_t tso_moves = 0;       // the timestamp oracle moved to another CN
  bool coordination_up = true;  // the coordination service answered this CN's last read
  // Nodes whose beat stopped two leases ago that no epoch has declared failed (the service
  // unreachable, or more MNs down than can be declared): transactions needing them wait.
  uint32_t failures_undeclared = 0;
};

// What membership and recovery did in a simulated run with node faults (docs/recovery.md).
struct FailoverStats {
  struct Failure {
    uint16_t cn = 0;
    uint64_t crash_ns = 0;      // virtual time of the crash (from the start of the run)
    uint64_t detected_ns = 0;   // its lease expired; the new epoch was decided
    uint64_t recovered_ns = 0;  // its logs were recovered and its locks released everywhere
    uint64_t open_ns = 0;       // its shards were served again, by the survivors
    uint64_t rolled_forward = 0, rolled_back = 0, log_records = 0;
    // restart-cn: when the new incarnation was running clients (0: never restarted), and when
    // the shards it managed before were its own again (0: not, or not all of them).
    uint64_t restart_ns = 0;
    uint64_t returned_ns = 0;
    bool fenced = false;  // it stopped itself: a partition outlasted its lease
  };
  std::vector<Failure> failures;
  // partition-cn: the CN cut off from the others and the configuration manager.
  struct Partition {
    uint16_t cn = 0;
    uint64_t cut_ns = 0;     // virtual time of the cut (from the start of the run)
    uint64_t fenced_ns = 0;  // it fenced itself: stopped serving (0: healed before)
    uint64_t healed_ns = 0;  // heal-cn or heal-host (0: not within the run)
    bool host = false;       // partition-host: MN `cn` was cut off with it
    int apart_from = -1;     // cut-hosts: the host its own was cut apart from (-1: none)
  };
  std::vector<Partition> partitions;
  struct MnFailure {
    uint16_t mn = 0;
    uint64_t crash_ns = 0;     // virtual time of the crash (from the start of the run)
    uint64_t detected_ns = 0;  // its lease expired; the new epoch was decided
    uint64_t down_ns = 0;      // every CN reads the replicas left and writes skip it
    // restart-mn (0: never restarted, or not that far): the MN came back blank and took writes;
    // the copy of its replicas began and ended; it was readable again, R copies restored.
    uint64_t restart_ns = 0;
    uint64_t copy_start_ns = 0;
    uint64_t copied_ns = 0;
    uint64_t readable_ns = 0;
    uint64_t slots_copied = 0;  // key slots copied onto it
    // Declared while cut off with its host (partition-host), running: crash_ns is the cut, and
    // it came back as a restarted MN once healed.
    bool cut = false;
  };
  std::vector<MnFailure> mn_failures;
  // crash-coord: the coordination service stopped answering every CN; restart-coord: it
  // answered again (0: not within the run).
  struct CoordOutage {
    uint64_t down_ns = 0;
    uint64_t up_ns = 0;
  };
  std::vector<CoordOutage> coord_outages;
  uint64_t epoch = 0;               // the configuration's epoch at the end
  uint64_t faults_not_reached = 0;  // scheduled after the run had ended: never happened
  // Crashes aimed at a commit step (NodeFault::step), by the step they hit (index: CommitStep),
  // and those that found no transaction at their step within kStepCrashWaitNsMax (they crashed
  // then, at no particular step).
  uint64_t step_crashes[kCommitSteps] = {};
  uint64_t step_crashes_unaimed = 0;
  // Partitions (host or CN), CN crashes and MN crashes given up after kMnsOutWaitNsMax: carried
  // out, they would have left more MNs unread than the cluster survives (with their heal or
  // restart).
  uint64_t faults_given_up = 0;
  uint64_t config_puts = 0;     // conditional puts to the coordination service
  uint64_t unknown_calls = 0;   // calls that ended Unknown: their CN failed under them
  uint16_t tso_host = 0;        // the CN hosting the timestamp oracle at the end
  uint64_t tso_moves = 0;       // times the oracle moved: its CN failed
  uint64_t lost_packets = 0;    // packets to or from a crashed CN
  uint64_t landed_batches = 0;  // a crashed CN's batches that reached their MN after the crash
  uint64_t cut_batches = 0;     // of those, landed only in part (a prefix of their ops and words)
  uint64_t lost_batches = 0;    // and those that did not
  uint64_t cut_packets = 0;     // packets to or from a partitioned CN
  // Shard moves for load (docs/resharding.md), over every CN as their holder: made by an epoch,
  // given up (not drained within the bound), called off (the receiver failed first); and how
  // long the moved shards' locks were granted by nobody, in all and at most.
  uint64_t shard_moves = 0, moves_given_up = 0, moves_called_off = 0;
  uint64_t shards_moved = 0;  // in the moves made
  uint64_t move_closed_ns_total = 0, move_closed_ns_max = 0;
  // When each move was made, on clock(), in order (the first 4096 of each CN's).
  std::vector<uint64_t> move_made_ns;
};

class Cluster {
 public:
  // An embedded cluster on real threads and shared memory (the `local` transport).
  static Result<std::unique_ptr<Cluster>> Start(const ClusterConfig& config);
  // The same cluster simulated on one thread in virtual time (the `sim` transport): config.seed
  // seeds the whole run, and the testbed gives latencies, NIC rates, CPU costs and message
  // faults. Run() then runs in virtual time, and Session::clock() is the virtual clock.
  static Result<std::unique_ptr<Cluster>> StartSimulated(const ClusterConfig& config,
                                                         const Testbed& testbed);
  ~Cluster();

  // Creates a table on every MN; returns its id. A CN of a cluster of processes that started
  // after the tables were made (every CN but CN 0 at its first start) opens the table of that
  // name instead: its id, or InvalidArgument if there is none or its options differ.
  Result<uint16_t> CreateTable(const TableOptions& options);
  // Inserts `count` keys before any transaction runs: gen(i, &key, value) fills key i. On a CN
  // that opened its tables (above) it does nothing: they were loaded when they were made.
  Status Load(
      uint16_t table, uint64_t count,
      const std::function<void(uint64_t i, uint64_t* key, std::span<std::byte> value)>& gen);

  // A table by its name (TableOptions.name): its id, or NotFound.
  Result<uint16_t> FindTable(std::string_view name) const;

  // Procedures and reply procedures share one space of ids; either kind may be called with
  // Call or CallWithReply.
  ProcedureId RegisterProcedure(Procedure p);
  ProcedureId RegisterProcedure(ReplyProcedure p);

  // Runs `clients` coroutines of `client` on every worker of every CN until all return.
  void Run(int clients, const std::function<Task<void>(Session&)>& client);

  // Serving: the cluster run by a front end that hands it calls from threads of its own (the
  // way a network service runs it), rather than by Run. Not for simulated clusters; Run is not
  // called while serving. StartServing starts the worker threads. Submit, from any thread, runs
  // `call` as a coroutine with a Session of its own on a worker of CN `cn` (its workers in
  // turn); false if the cluster is not serving, is stopping or does not run CN `cn` (a CN of a
  // cluster of processes runs only its own). StopServing lets every submitted
  // call finish, then stops the threads; the destructor does it too. A CN of a cluster of
  // processes also serves the other CNs' requests until it stops, and waits at most `grace_ms`
  // for the answers its own calls await from them (they may have stopped first); then it holds
  // them failed, so what still waits ends (a transaction aborts, a routed call is Unknown).
  // A CN of a cluster of processes reports what its membership thread does — failures
  // declared, recoveries, rejoins, a lost lease — one line each to `log`, from that thread. Set
  // before StartServing.
  void SetEventLog(std::function<void(const std::string&)> log);
  Status StartServing();
  bool Submit(uint16_t cn, std::function<Task<void>(Session&)> call);
  // The CN a procedure called on CN `cn` with `hint` runs on (hybrid routing, by CN `cn`'s
  // shard map as it is now): a front end that fronts that CN too submits the call there and
  // saves the hop. Only a hint: the call routes itself again where it runs. Any thread, while
  // serving; `cn` if the cluster does not run it.
  uint16_t CallCn(uint16_t cn, const RouteHint& hint) const;
  // The same map whole, for a client that routes calls itself (a client service's Describe):
  // shard s (a route key's low `shard_bits` bits) is managed by CN owners[s], as CN `cn` sees it
  // now. `owners` is empty when calls are not routed (the protocol has no hybrid routing) or `cn`
  // is not run here. Any thread, while serving.
  struct CallShards {
    int shard_bits = 0;
    uint64_t version = 0;  // the map's; grows with each change
    std::vector<uint16_t> owners;
  };
  CallShards CallShardMap(uint16_t cn) const;
  void StopServing(uint64_t grace_ms = 2'000);
  bool serving() const;

  // Calls that must share one worker: the steps of an interactive transaction, whose Txn lives
  // between them and belongs to the worker that began it. Pin picks a worker of CN `cn` (its
  // workers in turn, as Submit does) and holds the cluster serving until Unpin: StopServing
  // waits for every pin as for a running call, and SubmitTo on a held pin is accepted even while
  // stopping, so a transaction begun before StopServing can still finish or abort. Pin returns
  // nullopt if the cluster is not serving, is stopping, or does not run CN `cn`. SubmitTo runs
  // `call` as Submit does, on the pinned worker; false (and nothing runs) if the pin names no
  // worker of a serving cluster. Each pin is unpinned once, after the last call submitted to it
  // returned.
  struct WorkerPin {
    uint16_t cn = 0;
    uint16_t worker = 0;
  };
  std::optional<WorkerPin> Pin(uint16_t cn);
  bool SubmitTo(const WorkerPin& pin, std::function<Task<void>(Session&)> call);
  void Unpin(const WorkerPin& pin);

  // A front end's requests taken by the worker that runs them, with no thread between: a source
  // attached to a worker is polled on that worker's thread at the top of every round (a network
  // front end's completion queue), and what it takes it submits to the same worker
  // (SubmitToWorker), whose call then starts in that round; a worker may poll several (one per
  // front end). Workers of CN `cn`: WorkersOf(cn), 0 if this cluster does not run it.
  // AttachSource: InvalidArgument if the cluster is not serving, names no worker, or the worker
  // polls `source` already. DetachSource returns once the worker polls `source` no more; the
  // source may then go. SubmitToWorker is Submit to one given worker; false as Submit's. Any
  // thread, while serving.
  class WorkerSource {
   public:
    virtual ~WorkerSource() = default;
    // Takes what has arrived; true if anything had.
    virtual bool Poll() = 0;
  };
  int WorkersOf(uint16_t cn) const;
  Status AttachSource(uint16_t cn, uint16_t worker, WorkerSource* source);
  void DetachSource(uint16_t cn, uint16_t worker, WorkerSource* source);
  bool SubmitToWorker(uint16_t cn, uint16_t worker, std::function<Task<void>(Session&)> call);

  // Simulated clusters only: node faults for the next Run (times count from its start). Refused
  // with InvalidArgument, naming the fault and why, if this cluster cannot survive one: today
  // CN crashes are survived under the lotus protocol with at least 2 CNs alive throughout,
  // except of CN 0 (it hosts the timestamp oracle); restarts, MN crashes and partitions are not
  // yet.
  // It also turns on the bookkeeping CheckReplicas needs (every write committed from then on).
  Status ScheduleFaults(std::vector<NodeFault> faults);
  FailoverStats GetFailoverStats() const;
  // After a Run: whether every replica of every record agrees (versions, cells and bytes), no
  // cell is left INVISIBLE and no lock word held, and — since ScheduleFaults — every write a
  // transaction committed is still there (docs/recovery.md). Not while a Run is going on nor while
  // the cluster serves (a check failure then), and only when the MNs' memory is in this process
  // (not for MN daemons reached by transport.coord).
  ReplicaCheck CheckReplicas() const;

  // What the cluster counted so far (every CN this process runs). Callable from any thread,
  // also during a Run or while serving: each count is read on its own, so a snapshot taken then
  // is not one instant (a commit may show before the ops it made).
  ClusterStats Stats() const;
  // What CN `cn` of a cluster of processes (this process's CN) reports for its daemon's metrics:
  // its lock table and what its membership saw. Callable from any thread, as Stats is.
  CnStats GetCnStats(uint16_t cn) const;
  const ClusterConfig& config() const;
  // The CN that manages shard `shard`'s locks (0..4095), as the newest epoch this process knows
  // says: where routing sends a read-write call whose first key is in it.
  uint16_t ShardOwner(uint32_t shard) const;
  bool simulated() const;
  // Simulated clusters only.
  SimStats GetSimStats() const;
  void ResetSimStats();
  // The cluster's clock: real time, or the simulation's virtual time.
  Clock& clock();

 private:
  explicit Cluster(std::unique_ptr<node::ClusterImpl> impl);
  std::unique_ptr<node::ClusterImpl> impl_;
};

}  // namespace pond
