// ClusterConfig: what a Pond cluster is made of and runs — its nodes, the protocol and isolation
// its transactions use, how CNs reach the memory pool, the moving of lock management — and the
// checks every way of starting one (Cluster::Start, StartSimulated, the daemons) applies to it.
// Kept apart from cluster.h, which says how a cluster is driven; include that one to run one.
//
// Thread rules: plain values and pure functions, callable from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pond/status.h"
#include "pond/testbed.h"

namespace pond {

enum class Isolation : uint8_t { kSerializable, kSnapshot };
const char* IsolationName(Isolation i);

// Which transaction protocol a cluster runs (docs/protocols.md). Lotus and Motor share the
// multi-version CVT store and one coordinator flow; the switches below are the steps of the
// Lotus ablation (Lotus §8.4, Fig. 14) that turn Motor into Lotus one at a time. FORD is the
// single-version protocol on its own record layout.
struct ProtocolConfig {
  std::string name = "lotus";
  bool single_version = false;    // ford: records in buckets, one version, undo log
  bool full_record_store = true;  // else Motor's value + delta layout: two READs/WRITEs a version
  bool log_and_visible = true;    // commit log + write-invisible/visible (else write committed)
  bool cn_locks = true;           // locks on CN lock tables (else CAS on the MN lock word)
  bool hybrid_routing = true;     // run read-write calls on the CN that manages their locks
  bool vt_cache = true;           // version table cache (needs cn_locks)
  // Pond's own steps past Lotus (docs/protocols.md "pond"), each needing cn_locks and
  // log_and_visible:
  // no start timestamp where none is needed: read-write transactions under SR lock every item
  // they read, so they read its newest version, which the lock keeps newest until their commit
  // timestamp; a read-only transaction's first Execute of one key reads it at its newest (a
  // snapshot of its own), and takes a snapshot only if it executes more;
  bool latest_reads = false;
  // a commit answers once its timestamp is on every backup (durable: recovery rolls it forward),
  // and writes the primaries and unlocks after the answer;
  bool early_ack = false;
  // the VT cache keeps the newest version's value beside its CVT (values up to 128 bytes), so a
  // reader of a locally managed key needs no record READ (needs vt_cache).
  bool value_cache = false;
  // timestamp requests are combined: a worker keeps one request to the oracle in flight (those
  // who ask meanwhile ask together when it is answered), and a CN's workers ask in groups of
  // about sqrt(CNs) through one of them, a relay (ClusterImpl::TsoAsk). The oracle's cores
  // hear far fewer requests: they were the bottleneck of every cluster past 9 CNs
  // (docs/perf.md "Scale-out").
  bool tso_combine = false;
};

// "lotus", "motor", "ford", "pond" (lotus with every step of PondSteps), lotus with one of them
// ("lotus+latest-reads", ...: each measured alone), pond without one ("pond-tso-combine", ...), or
// an ablation step:
// "+full-record", "+log-visible", "+lock-sharding", "+load-balancing", "+vt-cache" (= lotus);
// InvalidArgument otherwise.
Result<ProtocolConfig> ProtocolByName(std::string_view name);
// The four protocols; those that run under snapshot isolation too (ford has no snapshots); the
// ablation steps from motor to lotus, in order; Pond's steps past lotus ("latest-reads", ...).
const std::vector<std::string>& ProtocolNames();
const std::vector<std::string>& SnapshotProtocolNames();
const std::vector<std::string>& AblationSteps();
const std::vector<std::string>& PondSteps();

// How Cluster::Start reaches its memory nodes (docs/transports.md). The simulated cluster
// (StartSimulated) ignores it.
struct TransportConfig {
  // "local": the MNs' regions are memory of this process, reached by loads and stores.
  // "ucx": through UCX, each MN a UCX memory node served by a thread of this process — the
  // path separate MN daemons use, on one host.
  std::string kind = "local";
  std::string ucx_tls;          // for "ucx": UCX_TLS ("" = UCX's choice; "shm", "tcp", ...)
  std::string ucx_net_devices;  // for "ucx": UCX_NET_DEVICES ("" = all; "lo" = loopback)
  // For "ucx": reach the MNs of a cluster of `pond mn` daemons instead of starting them — the
  // ZooKeeper they registered with ("HOST:PORT") and the cluster's name there (docs/deploy.md).
  // Those MNs must be fresh: an embedded cluster creates and loads its own tables.
  std::string coord;
  std::string cluster = "pond";
  // With `coord`: the cluster's secret (docs/deploy.md "Security"), which its znodes are guarded
  // by; "" for a cluster started with --insecure.
  std::string coord_secret;
  // For "ucx" with `coord`: this process is CN `cn` alone of a cluster whose CNs are separate
  // processes (`pond cn` daemons; -1: this process is every CN). It publishes its workers'
  // addresses in the coordination service at Start and reaches the other CNs' workers by
  // theirs at StartServing, waiting up to `peers_wait_ms` for them. MNs that already hold
  // tables are joined, not refused: their catalog is read at Start, and CreateTable opens them.
  // Such a cluster only serves (StartServing); it does not Run.
  int cn = -1;
  int peers_wait_ms = 30'000;
  // Such a CN's lease (docs/recovery.md "Processes"): it beats every lease_ms / 10, is declared
  // failed once no beat was seen for lease_ms, and stops itself (exit 75) when it could not beat
  // for 0.9 lease_ms. Every CN of a cluster must use the same.
  int lease_ms = 100;
};

// Moving shards' lock management between CNs at run time (docs/resharding.md). Off by default;
// the numbers are Lotus's (§4.3).
struct ReshardConfig {
  enum class Policy : uint8_t {
    kNone,      // the shard map changes only by failures and restarts
    kLoad,      // an overloaded CN hands its hottest shard to the least loaded (Lotus)
    kLocality,  // a shard goes to the CN whose transactions make most of its requests (Zeus)
    kBoth,      // load first; locality when no CN is overloaded
  };
  Policy policy = Policy::kNone;
  uint64_t interval_ns = 100'000'000;  // each CN measures and publishes its load this often
  double over = 1.5;                   // overloaded: latency above this times the CNs' mean...
  int intervals = 3;                   // ...for this many intervals in a row (and locality:
                                       // one CN's majority of a shard's requests this many)
  uint64_t drain_ns = 10'000'000;      // a move not drained this long after it began is given up
};

// A policy's name as flags, cluster specs and reports spell it: none, load, locality, both.
const char* ReshardPolicyName(ReshardConfig::Policy p);
std::optional<ReshardConfig::Policy> ReshardPolicyByName(std::string_view name);

struct ClusterConfig {
  ProtocolConfig protocol;
  TransportConfig transport;
  int mns = 3;
  int cns = 3;
  int workers_per_cn = 1;  // threads per CN
  int replication = 3;     // copies of every record, on distinct MNs
  int versions = 4;        // version cells per record (N)
  Isolation isolation = Isolation::kSerializable;
  uint64_t region_mib = 1024;             // per MN (reserved lazily by the OS)
  uint32_t lock_buckets = 1 << 16;        // per CN, 8 locks each
  uint32_t vt_cache_entries = 1 << 20;    // per CN; 0 disables the VT cache
  uint32_t addr_cache_entries = 1 << 20;  // per CN; 0 disables the address cache
  uint64_t seed = 1;
  ReshardConfig reshard;
};

// The largest cluster: node ids go in NodeSets (src/pond/base/node_set.h, 256 bits), a cell's
// writer tag holds the CN in 8 bits and an MN lock word's owner word CN + 1 in 16
// (docs/formats.md "Cell", "Lock owner word").
inline constexpr int kCnsMax = 256;
inline constexpr int kMnsMax = 256;
// What runs the membership and recovery machine — node faults and resharding in the simulator,
// clusters of processes — keeps every CN's beat, report and load in each MN's lease page, which
// holds 64 CNs and masks of 64 CNs and 64 MNs (docs/formats.md "Lease page").
inline constexpr int kMembershipNodesMax = 64;

// Checks a config; InvalidArgument with a one-line reason.
Status ValidateConfig(const ClusterConfig& c);
// OK if a cluster of `c`'s size can run the membership machine; else InvalidArgument naming
// `what` (e.g. "node faults"), the flags and the limit.
Status CheckMembershipScale(const ClusterConfig& c, const std::string& what);
// Whether a simulated cluster with config `c` survives `faults` (in time order): the check of
// Cluster::ScheduleFaults. InvalidArgument with one line naming the fault and why.
Status ValidateNodeFaults(const ClusterConfig& c, const std::vector<NodeFault>& faults);

}  // namespace pond
