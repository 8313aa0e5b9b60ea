// ValidateNodeFaults: which node-fault schedules a cluster survives, and for the rest one line
// saying why not. Kept apart from SimMembership, which carries them out: the bench layer asks it
// before any cluster exists (bench/run_faults.cc draws random schedules within it).
#include <algorithm>
#include <string>
#include <vector>

#include "pond/cluster.h"
#include "pond/cluster/membership.h"
#include "pond/node/sim_membership.h"

namespace pond {

Status ValidateNodeFaults(const ClusterConfig& c, const std::vector<NodeFault>& faults) {
  if (!faults.empty()) POND_RETURN_IF_ERROR(CheckMembershipScale(c, "node faults"));
  int alive = c.cns;
  int mns_down = 0;
  int mns_out = 0;   // while the service is down: MNs down, and those restarted since it went
  int cns_away = 0;  // CNs down or cut off
  // A CN renews its lease on beats LeaseQuorum MNs take, or on the configuration it read, and a
  // CM declares a CN only once it has read the MNs any such beat reaches (docs/recovery.md
  // "Fencing"): without the service, or with a CN to declare, more MNs down stop the cluster.
  const int mns_out_max = std::max(0, c.mns - cluster::LeaseQuorum(c.mns, c.replication));
  auto quorum_limit = [&](const std::string& which, int out, const char* when) {
    return InvalidArgument(which + std::to_string(out) + " MNs down while " + when +
                           ", more than the " + std::to_string(mns_out_max) +
                           " the cluster survives (too few MNs left for a lease without the "
                           "coordination service, or for a CM to declare a CN)");
  };
  bool cn_crashes = false, partitions = false, coord_down = false;
  std::vector<bool> cn_down(c.cns > 0 ? static_cast<size_t>(c.cns) : 0, false);
  std::vector<bool> cn_cut(cn_down.size(), false);
  std::vector<int> restarts(cn_down.size(), 0);
  std::vector<bool> mn_down(c.mns > 0 ? static_cast<size_t>(c.mns) : 0, false);
  // By host (CN N with MN N): cut off by partition-host, its CN counted cut and its MN down.
  const int hosts = std::max(0, std::min(c.cns, c.mns));
  std::vector<bool> host_cut(static_cast<size_t>(hosts), false);
  auto is_host_cut = [&](uint16_t n) { return n < host_cut.size() && host_cut[n]; };
  // By host: the other host of its cut-hosts, or -1.
  std::vector<int> cut_from(static_cast<size_t>(hosts), -1);
  auto in_pair_cut = [&](uint16_t n) { return n < cut_from.size() && cut_from[n] >= 0; };
  // After a cut that takes nodes away (a host's, or two hosts' apart): what every count allows.
  auto cut_leaves = [&](const std::string& prefix, const std::string& counted) -> Status {
    if (coord_down && ++mns_out > mns_out_max) {
      return quorum_limit(prefix, mns_out, "the coordination service is down");
    }
    if (mns_down > mns_out_max) return quorum_limit(prefix, mns_down, "a CN is down or cut off");
    if (mns_down > c.replication - 1) {
      return InvalidArgument(prefix + "at most " + std::to_string(c.replication - 1) +
                             " MNs may be down at once with replication " +
                             std::to_string(c.replication) + " (" + counted +
                             "; each replica group must keep one copy)");
    }
    if (alive < 2) return InvalidArgument(prefix + "at least 2 CNs must stay up and connected");
    return Status::Ok();
  };
  for (size_t i = 0; i < faults.size(); i++) {
    const NodeFault& f = faults[i];
    const std::string which = "fault " + std::to_string(i + 1) + ": ";
    if (f.step != CommitStep::kNone &&
        (f.kind != NodeFaultKind::kCrashCn || static_cast<int>(f.step) >= kCommitSteps)) {
      return InvalidArgument(which + "only crash-cn may be aimed at a commit step");
    }
    switch (f.kind) {
      case NodeFaultKind::kCrashCoord:
      case NodeFaultKind::kRestartCoord: {
        const bool crash = f.kind == NodeFaultKind::kCrashCoord;
        const char* word = crash ? "crash-coord: " : "restart-coord: ";
        if (coord_down == crash) {
          return InvalidArgument(which + word + "the coordination service is already " +
                                 (crash ? "down" : "up"));
        }
        coord_down = crash;
        mns_out = mns_down;
        if (crash && mns_out > mns_out_max) {
          return quorum_limit(which + word, mns_out, "the coordination service is down");
        }
        continue;
      }
      case NodeFaultKind::kCrashCn:
        break;
      case NodeFaultKind::kRestartCn:
        if (f.node >= c.cns) {
          return InvalidArgument(which + "restart-cn: no CN " + std::to_string(f.node) +
                                 " (the cluster has " + std::to_string(c.cns) + ")");
        }
        if (!cn_down[f.node]) {
          return InvalidArgument(which + "restart-cn: CN " + std::to_string(f.node) +
                                 (is_host_cut(f.node)
                                      ? " is cut off with its host (heal-host brings it back)"
                                  : cn_cut[f.node] ? " is partitioned (heal-cn brings it back)"
                                                   : " is up, and restart-cn needs it down"));
        }
        // A worker's transaction numbers carry the incarnation in 8 bits of the writer tag.
        if (++restarts[f.node] > 255) {
          return InvalidArgument(which + "restart-cn: CN " + std::to_string(f.node) +
                                 " restarts more than 255 times");
        }
        cn_down[f.node] = false;
        cns_away--;
        alive++;
        continue;
      case NodeFaultKind::kCrashMn:
      case NodeFaultKind::kPartitionHost:  // below, beside crash-mn
      case NodeFaultKind::kHealHost:
        break;
      case NodeFaultKind::kCutHosts:
      case NodeFaultKind::kHealHosts: {
        // Each CN may fence (it cannot reach the other host's MN, which the rest reach), and the
        // CM, if it is one of them, declares the MN it cannot read: two CNs away, one MN down.
        const bool cut = f.kind == NodeFaultKind::kCutHosts;
        const std::string word = cut ? "cut-hosts: " : "heal-hosts: ";
        const uint16_t x = f.node, y = f.peer;
        const std::string xy = std::to_string(x) + "-" + std::to_string(y);
        if (x >= hosts || y >= hosts || x == y) {
          return InvalidArgument(which + word + "no hosts " + xy + " (two hosts of 0 to " +
                                 std::to_string(hosts - 1) + ": host N is CN N with MN N)");
        }
        for (uint16_t h : {x, y}) {
          const bool busy = cn_down[h] || cn_cut[h] || mn_down[h];
          if (cut && busy) {
            return InvalidArgument(which + word + "host " + std::to_string(h) +
                                   " is not up (its CN or MN is crashed or cut off)");
          }
        }
        if (!cut && cut_from[x] != y) {
          return InvalidArgument(which + word + "hosts " + xy + " are not cut apart");
        }
        for (uint16_t h : {x, y}) {
          if (!cut && ++restarts[h] > 255) {
            return InvalidArgument(which + word + "CN " + std::to_string(h) +
                                   " restarts more than 255 times");
          }
          cn_cut[h] = mn_down[h] = cut;
        }
        cut_from[x] = cut ? y : -1;
        cut_from[y] = cut ? x : -1;
        cns_away += cut ? 2 : -2;
        mns_down += cut ? 1 : -1;
        alive += cut ? -2 : 2;
        partitions = true;
        if (!cut) continue;
        POND_RETURN_IF_ERROR(cut_leaves(which + word, "two hosts cut apart count one"));
        continue;
      }
      case NodeFaultKind::kRestartMn:
        if (f.node >= c.mns) {
          return InvalidArgument(which + "restart-mn: no MN " + std::to_string(f.node) +
                                 " (the cluster has " + std::to_string(c.mns) + ")");
        }
        if (in_pair_cut(f.node)) {
          return InvalidArgument(which + "restart-mn: MN " + std::to_string(f.node) +
                                 " is on a host cut from another (heal-hosts brings it back)");
        }
        if (!mn_down[f.node] || is_host_cut(f.node)) {
          return InvalidArgument(which + "restart-mn: MN " + std::to_string(f.node) +
                                 (is_host_cut(f.node)
                                      ? " is cut off with its host (heal-host brings it back)"
                                      : " is up, and restart-mn needs it down"));
        }
        // Its lane cursors and sub-indexes are brought into step by the restart; the replica
        // count of its groups comes back once the copy is done (a crash meanwhile waits for it).
        mn_down[f.node] = false;
        mns_down--;
        continue;
      case NodeFaultKind::kPartitionCn:
      case NodeFaultKind::kHealCn: {
        // A cut-off CN fences itself once the others' reports show it cut off, which is a
        // crash; heal brings it back (a restart if it fenced). Counted as away while cut, as a
        // crashed CN is.
        const bool cut = f.kind == NodeFaultKind::kPartitionCn;
        const char* word = cut ? "partition-cn: " : "heal-cn: ";
        if (f.node >= c.cns) {
          return InvalidArgument(which + word + "no CN " + std::to_string(f.node) +
                                 " (the cluster has " + std::to_string(c.cns) + ")");
        }
        if (cut && (cn_down[f.node] || cn_cut[f.node])) {
          return InvalidArgument(which + word + "CN " + std::to_string(f.node) + " is already " +
                                 (cn_cut[f.node] ? "partitioned" : "crashed"));
        }
        if (!cut && !cn_cut[f.node]) {
          return InvalidArgument(which + word + "CN " + std::to_string(f.node) +
                                 " is not partitioned");
        }
        if (!cut && in_pair_cut(f.node)) {
          return InvalidArgument(which + word + "CN " + std::to_string(f.node) +
                                 " is on a host cut from another (heal-hosts heals it)");
        }
        if (!cut && is_host_cut(f.node)) {
          return InvalidArgument(which + word + "CN " + std::to_string(f.node) +
                                 " is cut off with its host (heal-host heals it)");
        }
        if (!cut && ++restarts[f.node] > 255) {
          return InvalidArgument(which + word + "CN " + std::to_string(f.node) +
                                 " restarts more than 255 times");
        }
        cn_cut[f.node] = cut;
        cns_away += cut ? 1 : -1;
        if (cut && mns_down > mns_out_max) {
          return quorum_limit(which + word, mns_down, "a CN is down or cut off");
        }
        partitions = true;
        alive += cut ? -1 : 1;
        if (alive < 2) {
          return InvalidArgument(which + word + "at least 2 CNs must stay up and connected");
        }
        continue;
      }
    }
    if (f.kind == NodeFaultKind::kPartitionHost || f.kind == NodeFaultKind::kHealHost) {
      // Host N is CN N with MN N. Its CN is away as a partitioned one is (it fences once the
      // lease rule says so, and heal brings it back, a restart if it fenced); its MN is down for
      // every count (nobody else reaches it; declared, it comes back as a restarted MN).
      const bool cut = f.kind == NodeFaultKind::kPartitionHost;
      const std::string word = cut ? "partition-host: " : "heal-host: ";
      const std::string n = std::to_string(f.node);
      if (f.node >= hosts) {
        return InvalidArgument(which + word + "no host " + n + " (host N is CN N with MN N: the " +
                               "cluster has " + std::to_string(c.cns) + " CNs and " +
                               std::to_string(c.mns) + " MNs)");
      }
      if (cut && (cn_down[f.node] || cn_cut[f.node])) {
        return InvalidArgument(which + word + "CN " + n + " is already " +
                               (cn_cut[f.node] ? "partitioned" : "crashed"));
      }
      if (cut && mn_down[f.node]) {
        return InvalidArgument(which + word + "MN " + n + " is already crashed");
      }
      if (!cut && !host_cut[f.node]) {
        return InvalidArgument(which + word + "host " + n + " is not cut off");
      }
      if (!cut && ++restarts[f.node] > 255) {
        return InvalidArgument(which + word + "CN " + n + " restarts more than 255 times");
      }
      host_cut[f.node] = cut;
      cn_cut[f.node] = cut;
      mn_down[f.node] = cut;
      cns_away += cut ? 1 : -1;
      mns_down += cut ? 1 : -1;
      alive += cut ? -1 : 1;
      partitions = true;
      if (!cut) continue;
      POND_RETURN_IF_ERROR(cut_leaves(which + word, "a cut host's MN counts"));
      continue;
    }
    if (f.kind == NodeFaultKind::kCrashMn) {
      if (f.node >= c.mns) {
        return InvalidArgument(which + "crash-mn: no MN " + std::to_string(f.node) +
                               " (the cluster has " + std::to_string(c.mns) + ")");
      }
      if (mn_down[f.node]) {
        return InvalidArgument(which + "crash-mn: MN " + std::to_string(f.node) +
                               (is_host_cut(f.node) ? " is cut off with its host (heal it first)"
                                                    : " is already crashed"));
      }
      mn_down[f.node] = true;
      if (coord_down && ++mns_out > mns_out_max) {
        return quorum_limit(which + "crash-mn: ", mns_out, "the coordination service is down");
      }
      if (cns_away > 0 && mns_down + 1 > mns_out_max) {
        return quorum_limit(which + "crash-mn: ", mns_down + 1, "a CN is down or cut off");
      }
      if (++mns_down > c.replication - 1) {
        return InvalidArgument(which + "crash-mn: at most " + std::to_string(c.replication - 1) +
                               " MNs may be down at once with replication " +
                               std::to_string(c.replication) +
                               " (each replica group must keep "
                               "one copy)");
      }
      continue;
    }
    cn_crashes = true;
    if (f.node >= c.cns) {
      return InvalidArgument(which + "crash-cn: no CN " + std::to_string(f.node) +
                             " (the cluster has " + std::to_string(c.cns) + ")");
    }
    if (cn_down[f.node] || cn_cut[f.node]) {
      return InvalidArgument(which + "crash-cn: CN " + std::to_string(f.node) + " is already " +
                             (cn_cut[f.node] ? "partitioned (heal it first)" : "crashed"));
    }
    cn_down[f.node] = true;
    cns_away++;
    if (mns_down > mns_out_max) {
      return quorum_limit(which + "crash-cn: ", mns_down, "a CN is down or cut off");
    }
    if (--alive < 2) {
      return InvalidArgument(which + "crash-cn: at least 2 CNs must stay alive");
    }
  }
  if (coord_down) {
    return InvalidArgument(
        "crash-coord: needs a restart-coord after it (without the coordination service no "
        "failure is declared, and the run could not end)");
  }
  // With lock words on the MNs, recovery finishes a half-done commit by copying a backup's
  // writes to the primary (cluster/mn_lock_recovery.h): it needs one.
  if ((cn_crashes || partitions) && !c.protocol.cn_locks && c.replication < 2) {
    return InvalidArgument(std::string(cn_crashes ? "crash-cn" : "partition-cn") + ": protocol " +
                           c.protocol.name +
                           " needs --replication of at least 2 to recover a CN (a commit cut "
                           "short is finished from its backups)");
  }
  if ((cn_crashes || partitions) && !c.protocol.single_version && c.versions < 2) {
    return InvalidArgument(
        "crash-cn: needs at least 2 versions per key (a rolled-back "
        "transaction's cell may have held the only version)");
  }
  return Status::Ok();
}

}  // namespace pond
