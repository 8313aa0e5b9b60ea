#include "pond/tools/run_flags.h"

#include <fmt/core.h>

#include <string>
#include <utility>

#include "pond/bench/run_faults.h"
#include "pond/cluster/directory.h"
#include "pond/cluster/zk_config_store.h"
#include "pond/server/certs.h"
#include "pond/server/cluster_spec.h"

namespace pond::tools {

void AddReshardFlags(CLI::App* cmd, ReshardConfig* r) {
  cmd->add_option_function<std::string>(
         "--reshard", [r](const std::string& v) { r->policy = *ReshardPolicyByName(v); },
         "move shards' lock management between CNs at run time (docs/resharding.md): none; load "
         "(an overloaded CN hands its hottest shards to the least loaded, Lotus 4.3); locality "
         "(a shard goes to the CN whose transactions request it most, Zeus); or both")
      ->check(CLI::IsMember({"none", "load", "locality", "both"}))
      ->default_str("none");
  const auto ms = [](uint64_t* ns) {
    return [ns](double v) { *ns = v < 0 ? 0 : static_cast<uint64_t>(v * 1e6); };
  };
  cmd->add_option_function<double>("--reshard-interval-ms", ms(&r->interval_ns),
                                   "load policy: each CN measures and publishes its load this "
                                   "often, in (virtual) ms")
      ->default_str("100");
  cmd->add_option("--reshard-over", r->over,
                  "load policy: a CN is overloaded above this times the CNs' mean latency")
      ->capture_default_str();
  cmd->add_option("--reshard-intervals", r->intervals,
                  "load policy: ...for this many intervals in a row; locality: one CN's majority "
                  "of a shard's requests this many in a row")
      ->capture_default_str();
  cmd->add_option_function<double>("--reshard-drain-ms", ms(&r->drain_ns),
                                   "a move whose shards are not drained this long after it began "
                                   "is given up, in (virtual) ms")
      ->default_str("10");
}

namespace {

// --coord, --cluster and --secret-file: the MN daemons an embedded run uses.
void AddCoordFlags(CLI::App* cmd, TransportConfig* t) {
  cmd->add_option("--coord", t->coord,
                  "run against the `pond mn` daemons registered with this ZooKeeper "
                  "(HOST:PORT, as pond up prints); implies --transport ucx, and --mns, "
                  "--replication, --region-mib and --ucx-* come from the cluster's spec");
  cmd->add_option("--cluster", t->cluster, "the daemons' cluster name, with --coord")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--secret-file",
         [t](const std::string& path) {
           Result<std::string> secret = server::ReadSecretFile(path);
           if (!secret.ok()) throw CLI::ValidationError("--secret-file", secret.status().message());
           t->coord_secret = std::move(secret).value();
         },
         "with --coord: the cluster's secret (pond up's DIR/certs/cluster.secret), without "
         "which a cluster not started --insecure refuses this process")
      ->type_name("FILE");
}

}  // namespace

void AddClusterFlags(CLI::App* cmd, ClusterConfig* c, int* coros, double* seconds,
                     std::string* isolation, std::string* model, bool simulate) {
  if (simulate) {
    // The Lotus testbed (§8.1): 3 MNs, 9 CNs of 8 cores, 6 coroutines each, N = 2 versions.
    c->cns = 9;
    c->workers_per_cn = 8;
    *coros = 6;
    c->versions = 2;
    *seconds = 0.01;
  }
  cmd->add_option("--mns", c->mns, "memory nodes")->capture_default_str();
  cmd->add_option("--cns", c->cns, "compute nodes")->capture_default_str();
  cmd->add_option("--workers", c->workers_per_cn, "worker threads (cores) per CN")
      ->capture_default_str();
  if (coros != nullptr) {
    cmd->add_option("--coros", *coros, "client coroutines per worker")->capture_default_str();
  }
  if (seconds != nullptr) {
    cmd->add_option(simulate ? "--virtual-seconds" : "--seconds", *seconds,
                    simulate ? "measured run time, in virtual seconds" : "measured run time")
        ->capture_default_str();
  }
  cmd->add_option("--isolation", *isolation, "sr (serializable) or si (snapshot isolation)")
      ->check(CLI::IsMember({"sr", "si"}, CLI::ignore_case))
      ->capture_default_str();
  cmd->add_option("--replication", c->replication, "copies of each record")->capture_default_str();
  cmd->add_option("--versions", c->versions, "version cells per record")->capture_default_str();
  cmd->add_option("--region-mib", c->region_mib, "MiB of memory per MN")->capture_default_str();
  cmd->add_option("--lock-buckets", c->lock_buckets, "lock table buckets per CN, 8 locks each")
      ->capture_default_str();
  cmd->add_option("--vt-cache-entries", c->vt_cache_entries,
                  "version-table cache entries per CN (0: none)")
      ->capture_default_str();
  cmd->add_option("--addr-cache-entries", c->addr_cache_entries,
                  "address cache entries per CN (0: none)")
      ->capture_default_str();
  cmd->add_option("--seed", c->seed, "seed for keys, routing (and the whole simulation)")
      ->capture_default_str();
  if (simulate) AddReshardFlags(cmd, &c->reshard);
  if (!simulate) {
    cmd->add_option("--transport", c->transport.kind,
                    "local (shared memory of this process) or ucx (UCX, MNs as UCX memory nodes "
                    "in this process); docs/transports.md")
        ->check(CLI::IsMember({"local", "ucx"}))
        ->capture_default_str();
    cmd->add_option("--ucx-tls", c->transport.ucx_tls,
                    "UCX transports for --transport ucx (UCX_TLS: shm, tcp, rc,sm, ...; "
                    "default UCX's choice)");
    cmd->add_option("--ucx-net-devices", c->transport.ucx_net_devices,
                    "network devices for --transport ucx (UCX_NET_DEVICES: lo, mlx5_0:1, ...)");
    AddCoordFlags(cmd, &c->transport);
  }
  if (simulate) {
    cmd->add_option(
           "--model", *model,
           "cx3, cx5, lotus-testbed or a JSON model file (models/cx3.json shows every field)")
        ->capture_default_str();
  }
}

// With --coord: the MN side of the config is the daemons' cluster spec.
Status AdoptDaemonsSpec(ClusterConfig* c) {
  POND_RETURN_IF_ERROR(cluster::CheckClusterName(c->transport.cluster));
  auto store = cluster::ZkConfigStore::Connect(
      c->transport.coord,
      cluster::ZkGuard{cluster::ClusterRoot(c->transport.cluster), c->transport.coord_secret},
      10'000, 5'000);
  if (store.status().code() == Code::kPermissionDenied) {
    return PermissionDenied(store.status().message() +
                            (c->transport.coord_secret.empty()
                                 ? " (give --secret-file DIR/certs/cluster.secret)"
                                 : " (is --secret-file this cluster's?)"));
  }
  if (!store.ok()) {
    return Unavailable("cannot reach the coordination service at " + c->transport.coord + ": " +
                       store.status().message());
  }
  const std::string key = cluster::SpecKey(c->transport.cluster);
  Result<cluster::Versioned> v = (*store)->Get(key);
  if (!v.ok()) return v.status();
  if (v->version == 0) {
    return NotFound("no cluster \"" + c->transport.cluster + "\" at " + c->transport.coord +
                    " (nothing at " + key + ")");
  }
  Result<server::ClusterSpec> spec = server::ClusterSpec::FromJson(
      std::string_view(reinterpret_cast<const char*>(v->value.data()), v->value.size()));
  if (!spec.ok()) return spec.status();
  const ClusterConfig& s = spec->config;
  c->mns = s.mns;
  c->replication = s.replication;
  c->region_mib = s.region_mib;
  c->transport.kind = "ucx";
  c->transport.ucx_tls = s.transport.ucx_tls;
  c->transport.ucx_net_devices = s.transport.ucx_net_devices;
  return Status::Ok();
}

Status ResolveClusterFlags(ClusterConfig* c, std::optional<Testbed>* sim,
                           const std::string& isolation, const std::string& model, bool simulate) {
  c->isolation =
      (isolation == "si" || isolation == "SI") ? Isolation::kSnapshot : Isolation::kSerializable;
  if (c->transport.coord.empty() && !c->transport.coord_secret.empty()) {
    return InvalidArgument("--secret-file goes with --coord");
  }
  if (!simulate && !c->transport.coord.empty()) POND_RETURN_IF_ERROR(AdoptDaemonsSpec(c));
  if (simulate) {
    Result<Testbed> m = Testbed::FromName(model);
    if (!m.ok()) return m.status();
    *sim = *m;
  }
  return Status::Ok();
}

void AddRunFlags(CLI::App* cmd, RunFlags* f, bool simulate) {
  AddClusterFlags(cmd, &f->run.cluster, &f->run.coros, &f->run.seconds, &f->isolation, &f->model,
                  simulate);
}

Status ResolveClusterFlags(RunFlags* f, bool simulate) {
  return ResolveClusterFlags(&f->run.cluster, &f->run.sim, f->isolation, f->model, simulate);
}

Status ResolveRunFlags(RunFlags* f, bool simulate) {
  POND_RETURN_IF_ERROR(ResolveClusterFlags(f, simulate));
  Result<ProtocolConfig> p = ProtocolByName(f->protocol);
  if (!p.ok()) return p.status();
  f->run.cluster.protocol = *p;
  return Status::Ok();
}

void AddFaultsFlag(CLI::App* cmd, std::string* spec, bool* allow_unplayed) {
  if (allow_unplayed != nullptr) {
    cmd->add_flag("--allow-unplayed-faults", *allow_unplayed,
                  "exit 0 even if faults of the schedule fall after the run's end (else exit 3)");
  }
  cmd->add_option("--faults", *spec,
                  "fault schedule: KIND:NODE@TIME,... (kinds crash-cn, restart-cn, crash-mn, "
                  "restart-mn, partition-cn, heal-cn, partition-host, heal-host; TIME like 5ms), "
                  "crash-cn:NODE@[TIME+]"
                  "step=STEP (locked, read, logged, timestamped, visible, unlocked), "
                  "crash-coord@TIME, restart-coord@TIME, drop:P, "
                  "duplicate:P, delay:P@MIN-MAX, jitter:TIME, or 'random' (drawn from the "
                  "seed); docs/fault_schedules.md");
}

Status ResolveFaults(bench::RunOptions* o, const std::string& spec) {
  return bench::ResolveFaults(o, spec);
}

std::function<void(const bench::KvsProgress&)> KvsProgressPrinter(FILE* out, bool simulate,
                                                                  std::string label) {
  return [out, simulate, label = std::move(label),
          last = bench::KvsProgress{0, 0, 0}](const bench::KvsProgress& p) mutable {
    double dt = p.elapsed_s - last.elapsed_s;
    uint64_t dc = p.committed - last.committed, da = p.aborted - last.aborted;
    std::fprintf(
        out, "  %s%s%8.4f %ss  %10.0f committed/s  abort rate %5.2f%%\n", label.c_str(),
        label.empty() ? "" : "  ", p.elapsed_s, simulate ? "virtual " : "",
        dt > 0 ? static_cast<double>(dc) / dt : 0.0,
        dc + da > 0 ? 100.0 * static_cast<double>(da) / static_cast<double>(dc + da) : 0.0);
    std::fflush(out);
    last = p;
  };
}

std::string ProtocolChoices() {
  std::string s;
  for (const std::string& p : ProtocolNames()) s += p + ", ";
  for (const std::string& step : PondSteps()) s += "lotus+" + step + ", ";
  for (const std::string& step : PondSteps()) s += "pond-" + step + ", ";
  s += "or an ablation step:";
  for (const std::string& step : AblationSteps()) {
    if (step.starts_with("+")) s += " " + step;
  }
  return s;
}

}  // namespace pond::tools
