#include "pond/server/local_cluster.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "pond/cluster/directory.h"
#include "pond/cluster/local_zookeeper.h"
#include "pond/cluster/zk_config_store.h"
#include "pond/server/certs.h"
#include "pond/server/cluster_spec.h"
#include "pond/server/process.h"

namespace pond::server {

namespace fs = std::filesystem;

namespace {

struct Proc {
  std::string role;  // "zookeeper", "mn", "cn"
  int id = 0;
  pid_t pid = -1;
  std::string log;
  std::vector<std::string> args;  // its flags after --id (a restart passes them again)
  std::string metrics;            // where it serves its metrics (its --metrics)
};

// What DIR/cluster.json holds.
struct ClusterRecord {
  std::string cluster, coord;
  std::vector<Proc> procs;
};

nlohmann::ordered_json ToJson(const std::string& cluster, const std::string& coord,
                              const std::vector<Proc>& procs) {
  nlohmann::ordered_json j = {{"cluster", cluster}, {"coord", coord}};
  j["processes"] = nlohmann::json::array();
  for (const Proc& p : procs) {
    nlohmann::ordered_json proc = {
        {"role", p.role}, {"id", p.id}, {"pid", p.pid}, {"log", p.log}, {"args", p.args}};
    if (!p.metrics.empty()) proc["metrics"] = p.metrics;
    j["processes"].push_back(std::move(proc));
  }
  return j;
}

// Written whole or not at all: a reader never sees half a file.
Status WriteRecord(const std::string& file, const ClusterRecord& r) {
  const std::string tmp = file + ".tmp";
  {
    std::ofstream out(tmp);
    out << ToJson(r.cluster, r.coord, r.procs).dump(2) << "\n";
    if (!out) return Unavailable("cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) return Unavailable("cannot write " + file + ": " + ec.message());
  return Status::Ok();
}

Result<ClusterRecord> ReadRecord(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("no cluster there (no " + path + ")");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("processes") ||
      !j["processes"].is_array()) {
    return InvalidArgument(path + " is not a cluster file written by pond up");
  }
  ClusterRecord r;
  if (j.contains("cluster") && j["cluster"].is_string()) r.cluster = j["cluster"];
  if (j.contains("coord") && j["coord"].is_string()) r.coord = j["coord"];
  for (const auto& p : j["processes"]) {
    if (!p.is_object() || !p.contains("pid") || !p["pid"].is_number_integer() ||
        p["pid"].get<long long>() <= 1 || !p.contains("role") || !p["role"].is_string()) {
      return InvalidArgument(path + " names a process without a valid pid and role");
    }
    Proc proc{p["role"].get<std::string>(),
              p.value("id", 0),
              static_cast<pid_t>(p["pid"].get<long long>()),
              p.value("log", ""),
              {},
              p.value("metrics", "")};
    if (p.contains("args") && p["args"].is_array()) {
      for (const auto& a : p["args"]) {
        if (!a.is_string()) return InvalidArgument(path + " names a process with bad args");
        proc.args.push_back(a.get<std::string>());
      }
    }
    r.procs.push_back(std::move(proc));
  }
  return r;
}

Result<std::vector<Proc>> ReadProcs(const std::string& path) {
  Result<ClusterRecord> r = ReadRecord(path);
  if (!r.ok()) return r.status();
  return std::move(r->procs);
}

// Stops the CN daemons, all at once (each serves the others until it is done), then the MN
// daemons whose memory they use, then the coordination service. False if any had to be killed.
bool StopAll(const std::vector<Proc>& procs, std::chrono::milliseconds grace) {
  bool clean = true;
  for (const char* role : {"cn", "mn", "zookeeper"}) {
    std::vector<pid_t> groups;
    for (const Proc& p : procs) {
      if (p.role == role) groups.push_back(p.pid);
    }
    clean &= StopGroups(groups, grace);
  }
  return clean;
}

// Waits until `key` holds a value, while `p` runs: an error naming `what` if it exits first or
// the deadline passes.
std::string Describe(const Proc& p);

Status AwaitPublished(cluster::ConfigStore& store, const std::string& key, const Proc& p,
                      const std::string& what, std::chrono::steady_clock::time_point deadline,
                      double timeout_s, const std::vector<Proc>& started) {
  for (;;) {
    Result<cluster::Versioned> d = store.Get(key);
    if (!d.ok()) return d.status();
    if (!d->value.empty()) return Status::Ok();
    if (!GroupAlive(p.pid)) {
      return Unavailable(fmt::format("{} exited: {} ({})", what, LastLogLine(p.log), p.log));
    }
    // Another daemon that died leaves this one waiting for it (CN 0 waits for every CN): say
    // which, at once, rather than time out on the wrong one.
    for (const Proc& q : started) {
      if (q.pid == p.pid || GroupAlive(q.pid)) continue;
      return Unavailable(fmt::format("{} exited while {} was starting: {} ({})", Describe(q), what,
                                     LastLogLine(q.log), q.log));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Unavailable(fmt::format("{} did not come up within {} s: {} ({})", what, timeout_s,
                                     LastLogLine(p.log), p.log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Starts `pond ROLE --coord ... --id ID` with its log in DIR/ROLE-ID.log; with `metrics`, on a
// free loopback port.
Result<Proc> SpawnRole(const std::string& role, int id, const std::string& dir,
                       const std::string& coord, const std::string& cluster,
                       std::vector<std::string> extra, bool metrics) {
  std::string address;
  if (metrics) {
    Result<uint16_t> port = FreeLoopbackPort();
    if (!port.ok()) return port.status();
    address = fmt::format("127.0.0.1:{}", *port);
    extra.insert(extra.end(), {"--metrics", address});
  }
  Proc p{role, id, -1, fmt::format("{}/{}-{}.log", dir, role, id), extra, address};
  std::vector<std::string> argv = {SelfPath(),  role,    "--coord", coord,
                                   "--cluster", cluster, "--id",    std::to_string(id)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  Result<pid_t> pid = SpawnDaemon(argv, p.log);
  if (!pid.ok()) return pid.status();
  p.pid = *pid;
  return p;
}

std::string Describe(const Proc& p) {
  return p.role == "zookeeper" ? "ZooKeeper" : fmt::format("{} {}", p.role, p.id);
}

}  // namespace

std::string ClusterFile(const std::string& dir) { return dir + "/cluster.json"; }

namespace {
// Present while `pond down` stops the cluster in the folder: a `pond restart` waiting there then
// says so, rather than what the stop did to the process it waits for.
std::string StoppingFile(const std::string& dir) { return dir + "/stopping"; }
bool BeingStopped(const std::string& dir) {
  return std::filesystem::exists(StoppingFile(dir)) || !std::filesystem::exists(ClusterFile(dir));
}
}  // namespace

int Up(const UpOptions& o) {
  auto fail = [](const std::string& m, int code = 1) {
    std::fprintf(stderr, "pond up: %s\n", m.c_str());
    return code;
  };
  Status named = cluster::CheckClusterName(o.cluster);
  if (!named.ok()) return fail(named.message(), 2);
  ClusterConfig config = o.config;
  config.transport.kind = "ucx";
  Status valid = ValidateConfig(config);
  if (!valid.ok()) return fail(valid.message(), 2);
  std::error_code ec;
  fs::create_directories(o.dir, ec);
  if (ec) return fail("cannot create " + o.dir + ": " + ec.message());
  const std::string dir = fs::absolute(o.dir).string();
  const std::string file = ClusterFile(dir);
  if (Result<std::vector<Proc>> old = ReadProcs(file); old.ok()) {
    for (const Proc& p : *old) {
      if (GroupAlive(p.pid)) {
        return fail("a cluster is already up in " + dir + " (pond down --dir " + o.dir +
                    " stops it)");
      }
    }
  }
  // A new cluster: nothing of an earlier one's coordination data survives, nor the mark of a
  // `pond down` that was itself cut short.
  fs::remove_all(dir + "/zookeeper", ec);
  fs::remove(StoppingFile(dir), ec);

  std::vector<Proc> procs;
  auto abandon = [&](const std::string& m) {
    StopAll(procs, std::chrono::seconds(5));
    return fail(m);
  };
  // The cluster's security, made once per DIR and kept: a client holding DIR/certs/client.root.*
  // reaches every cluster started there, and every daemon proves it belongs with the secret.
  std::vector<std::string> security = {"--insecure"};
  std::string secret;
  if (!o.insecure) {
    const std::string certs = dir + "/certs";
    Status made = MakeCerts(certs, CertsOptions{});
    if (!made.ok()) return fail("certificates in " + certs + ": " + made.message());
    Result<std::string> read = ReadClusterSecret(certs);
    if (!read.ok()) return fail(read.status().message());
    secret = std::move(read).value();
    security = {"--certs-dir", certs};
  }
  const auto timeout_ms = static_cast<int>(o.timeout_s * 1e3);
  auto zk = cluster::LocalZooKeeper::Start(dir + "/zookeeper", 0, timeout_ms);
  if (!zk.ok()) return fail(zk.status().message());
  const std::string coord = (*zk)->address();
  procs.push_back(Proc{"zookeeper", 0, (*zk)->Detach(), dir + "/zookeeper/zookeeper.log"});
  std::printf("pond up: ZooKeeper at %s\n", coord.c_str());
  std::fflush(stdout);

  auto store = cluster::ZkConfigStore::Connect(
      coord, cluster::ZkGuard{cluster::ClusterRoot(o.cluster), secret});
  if (!store.ok()) return abandon(store.status().message());
  ClusterSpec spec{config};
  const std::string text = spec.ToJson();
  Result<uint64_t> put =
      (*store)->PutIf(cluster::SpecKey(o.cluster),
                      std::span(reinterpret_cast<const std::byte*>(text.data()), text.size()), 0);
  if (!put.ok()) return abandon("cannot write the spec: " + put.status().message());

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (int mn = 0; mn < config.mns; mn++) {
    std::error_code ignored;
    fs::remove(fmt::format("{}/mn-{}.log", dir, mn), ignored);
    Result<Proc> p = SpawnRole("mn", mn, dir, coord, o.cluster, security, o.metrics);
    if (!p.ok()) return abandon(p.status().message());
    procs.push_back(*p);
  }
  // Every MN is up once its descriptor is published.
  for (int mn = 0; mn < config.mns; mn++) {
    Status up = AwaitPublished(**store, cluster::MnKey(o.cluster, static_cast<uint16_t>(mn)),
                               procs[static_cast<size_t>(mn) + 1], fmt::format("MN {}", mn),
                               deadline, o.timeout_s, procs);
    if (!up.ok()) return abandon(up.message());
  }
  // CN 0 first: it makes the tables the others join.
  const size_t first_cn = procs.size();
  for (int cn = 0; cn < o.cn_daemons; cn++) {
    std::error_code ignored;
    fs::remove(fmt::format("{}/cn-{}.log", dir, cn), ignored);
    // A CN waits for CN 0's tables (loading them may take a while, over TCP) as long as this
    // waits for it.
    std::vector<std::string> args = o.cn_args;
    args.insert(args.end(), {"--wait", fmt::format("{:g}", o.timeout_s)});
    args.insert(args.end(), security.begin(), security.end());
    Result<Proc> p = SpawnRole("cn", cn, dir, coord, o.cluster, args, o.metrics);
    if (!p.ok()) return abandon(p.status().message());
    procs.push_back(*p);
  }
  // Every CN is up once its workers' addresses are published, and takes clients once its
  // client address is.
  for (int cn = 0; cn < o.cn_daemons; cn++) {
    const Proc& p = procs[first_cn + static_cast<size_t>(cn)];
    const auto id = static_cast<uint16_t>(cn);
    Status up = AwaitPublished(**store, cluster::CnKey(o.cluster, id), p, fmt::format("CN {}", cn),
                               deadline, o.timeout_s, procs);
    if (up.ok() && o.cn_clients) {
      up = AwaitPublished(**store, cluster::ClientKey(o.cluster, id), p, fmt::format("CN {}", cn),
                          deadline, o.timeout_s, procs);
    }
    if (!up.ok()) return abandon(up.message());
  }
  Status written = WriteRecord(file, ClusterRecord{o.cluster, coord, procs});
  if (!written.ok()) return abandon(written.message());
  const TransportConfig& t = config.transport;
  std::printf(
      "pond up: cluster %s in %s: %d MN daemon(s) of %lu MiB, R=%d, %d CN daemon(s) of %d "
      "worker(s), %s %s, UCX tls %s\n",
      o.cluster.c_str(), dir.c_str(), config.mns, static_cast<unsigned long>(config.region_mib),
      config.replication, o.cn_daemons, config.workers_per_cn, config.protocol.name.c_str(),
      config.isolation == Isolation::kSerializable ? "SR" : "SI",
      t.ucx_tls.empty() ? "(UCX's choice)" : t.ucx_tls.c_str());
  std::printf("coord %s\n", coord.c_str());
  if (o.cn_daemons == 0) {
    std::printf("run:  pond bench smallbank --coord %s%s %s\n", coord.c_str(),
                o.cluster == "pond" ? "" : (" --cluster " + o.cluster).c_str(),
                o.insecure ? "--insecure" : ("--certs-dir " + o.dir + "/certs").c_str());
  }
  // Where clients go: any CN will do, and each tells them of the others.
  std::string first;
  for (int cn = 0; cn < o.cn_daemons && o.cn_clients; cn++) {
    Result<cluster::Versioned> v =
        (*store)->Get(cluster::ClientKey(o.cluster, static_cast<uint16_t>(cn)));
    if (!v.ok() || v->value.empty()) continue;
    const std::string address(reinterpret_cast<const char*>(v->value.data()), v->value.size());
    if (first.empty()) first = address;
    std::printf("client %s (CN %d)\n", address.c_str(), cn);
  }
  for (const Proc& p : procs) {
    if (p.metrics.empty()) continue;
    std::printf("metrics http://%s/metrics (%s)\n", p.metrics.c_str(), Describe(p).c_str());
  }
  if (!first.empty()) {
    std::printf("try:  pond client %s --connect %s describe\n",
                o.insecure ? "--insecure" : ("--dir " + o.dir).c_str(), first.c_str());
  }
  std::printf("stop: pond down --dir %s\n", o.dir.c_str());
  return 0;
}

namespace {

int RestartFailed(const std::string& m, int code = 1) {
  std::fprintf(stderr, "pond restart: %s\n", m.c_str());
  return code;
}

// The record of the cluster in `dir` and its process `role` `id` ("CN 2", "ZooKeeper" as `name`),
// which must have stopped; else the exit status, said in one line.
Result<std::pair<ClusterRecord, size_t>> StoppedProcess(const std::string& dir,
                                                        const std::string& role, int id,
                                                        const std::string& name, int* exit) {
  Result<ClusterRecord> r = ReadRecord(ClusterFile(dir));
  if (!r.ok()) {
    *exit = RestartFailed(r.status().message());
    return r.status();
  }
  auto it = std::find_if(r->procs.begin(), r->procs.end(),
                         [&](const Proc& p) { return p.role == role && p.id == id; });
  if (it == r->procs.end()) {
    *exit = RestartFailed(fmt::format("the cluster in {} has no {}", dir, name), 2);
    return NotFound(name);
  }
  if (GroupAlive(it->pid)) {
    *exit = RestartFailed(fmt::format(
        "{} is still running (pid {}); it restarts once it has stopped", name, it->pid));
    return InvalidArgument(name);
  }
  const size_t at = static_cast<size_t>(it - r->procs.begin());
  return std::make_pair(std::move(r).value(), at);
}

// Starts process `at` of record `r` (role `role`, id `id`) again with the flags it had, its log
// appended to and its metrics port kept (a scraper's configuration stays right), and writes the
// record to `file` with the new process in its place.
Result<Proc> Respawn(ClusterRecord* r, size_t at, const std::string& role, int id,
                     const std::string& file) {
  Proc& old = r->procs[at];
  Result<Proc> p = SpawnRole(role, id, fs::path(old.log).parent_path().string(), r->coord,
                             r->cluster, old.args, false);
  if (!p.ok()) return p.status();
  p->metrics = old.metrics;
  old = *p;
  POND_RETURN_IF_ERROR(WriteRecord(file, *r));
  return p;
}

}  // namespace

int Restart(const std::string& dir, int cn, double timeout_s) {
  auto fail = [](const std::string& m, int code = 1) { return RestartFailed(m, code); };
  const std::string file = ClusterFile(dir);
  int exit = 1;
  auto stopped = StoppedProcess(dir, "cn", cn, fmt::format("CN {}", cn), &exit);
  if (!stopped.ok()) return exit;
  ClusterRecord* r = &stopped->first;
  auto it = r->procs.begin() + static_cast<std::ptrdiff_t>(stopped->second);
  auto store = cluster::ZkConfigStore::Connect(r->coord);
  if (!store.ok()) return fail(store.status().message());
  const std::string key = cluster::ClientKey(r->cluster, static_cast<uint16_t>(cn));
  // Its client address as the last process left it (a killed one's stays): the new process
  // publishes its own once it is back in.
  Result<cluster::Versioned> before = (*store)->Get(key);
  if (!before.ok()) return fail(before.status().message());
  // Its log is appended to: only what the new process writes counts.
  std::error_code ec;
  const auto old_size = static_cast<std::streamoff>(fs::file_size(it->log, ec));
  auto new_line = [&](const std::string& path) {
    std::ifstream in(path);
    in.seekg(ec ? 0 : old_size);
    std::string line, last;
    while (std::getline(in, line)) {
      if (!line.empty()) last = line;
    }
    return last;
  };
  Result<Proc> p = Respawn(r, stopped->second, "cn", cn, file);
  if (!p.ok()) return fail(p.status().message());
  // Back once it serves: it publishes its client address anew, or, without a front end, says
  // so in its log.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3));
  for (;;) {
    Result<cluster::Versioned> now = (*store)->Get(key);
    if (!now.ok()) return fail(now.status().message());
    if (now->version != before->version && !now->value.empty()) break;
    if (new_line(p->log).find("serving") != std::string::npos) break;
    if (!GroupAlive(p->pid)) {
      return fail(fmt::format("CN {} exited: {} ({})", cn, LastLogLine(p->log), p->log));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return fail(fmt::format("CN {} did not come back within {} s: {} ({})", cn, timeout_s,
                              LastLogLine(p->log), p->log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::printf("pond restart: CN %d is back (pid %d)\n", cn, static_cast<int>(p->pid));
  return 0;
}

int RestartMn(const std::string& dir, int mn, double timeout_s) {
  auto fail = [](const std::string& m, int code = 1) { return RestartFailed(m, code); };
  const std::string file = ClusterFile(dir);
  int exit = 1;
  auto stopped = StoppedProcess(dir, "mn", mn, fmt::format("MN {}", mn), &exit);
  if (!stopped.ok()) return exit;
  ClusterRecord* r = &stopped->first;
  auto store = cluster::ZkConfigStore::Connect(r->coord);
  if (!store.ok()) return fail(store.status().message());
  auto config = [&]() -> Result<cluster::Configuration> {
    Result<cluster::Versioned> v = (*store)->Get(cluster::ConfigKey(r->cluster));
    if (!v.ok()) return v.status();
    if (v->value.empty()) return NotFound("the cluster has no configuration yet");
    return cluster::Configuration::Decode(v->value);
  };
  Result<cluster::Configuration> before = config();
  if (!before.ok()) return fail(before.status().message());
  if (static_cast<size_t>(mn) >= before->mns.size()) {
    return fail(fmt::format("the cluster has no MN {}", mn), 2);
  }
  Result<Proc> p = Respawn(r, stopped->second, "mn", mn, file);
  if (!p.ok()) return fail(p.status().message());
  // Back once a newer incarnation is read like any replica; the steps on the way are said as the
  // configuration reaches them (the copy takes a while on a large region).
  const uint16_t was = before->mns[mn].incarnation;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3));
  int said = -1;
  const std::string stopped_first =
      fmt::format("the cluster in {} was stopped before MN {} was back", dir, mn);
  for (;;) {
    if (BeingStopped(dir)) return fail(stopped_first);
    Result<cluster::Configuration> now = config();
    if (!now.ok()) return fail(now.status().message());
    const cluster::MnStatus& m = now->mns[mn];
    if (m.incarnation > was && m.alive) {
      const int state = static_cast<int>(m.rejoin);
      if (state == 0 && !m.leaving) break;
      if (state != said) {
        static const char* const kSteps[] = {"", "copying its replicas back", "setting its cursors",
                                             "holding commits to switch reads",
                                             "switching reads to it"};
        std::printf("pond restart: MN %d (incarnation %u): %s\n", mn, m.incarnation, kSteps[state]);
        std::fflush(stdout);
        said = state;
      }
    }
    if (!GroupAlive(p->pid)) {
      if (BeingStopped(dir)) return fail(stopped_first);
      return fail(fmt::format("MN {} exited: {} ({})", mn, LastLogLine(p->log), p->log));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return fail(fmt::format("MN {} was not read again within {} s: {} ({})", mn, timeout_s,
                              LastLogLine(p->log), p->log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::printf("pond restart: MN %d is back (pid %d), read like any replica\n", mn,
              static_cast<int>(p->pid));
  return 0;
}

int RestartCoord(const std::string& dir, double timeout_s) {
  auto fail = [](const std::string& m, int code = 1) { return RestartFailed(m, code); };
  const std::string file = ClusterFile(dir);
  int exit = 1;
  auto stopped = StoppedProcess(dir, "zookeeper", 0, "ZooKeeper", &exit);
  if (!stopped.ok()) return exit;
  ClusterRecord* r = &stopped->first;
  auto it = r->procs.begin() + static_cast<std::ptrdiff_t>(stopped->second);
  // The same port, so every daemon's session finds it again, and the same data: the
  // configuration, the failures' steps and the daemons' descriptors are all there.
  const size_t colon = r->coord.rfind(':');
  const int port = colon == std::string::npos ? 0 : std::atoi(r->coord.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return fail("cluster.json names no port in " + r->coord);
  auto zk = cluster::LocalZooKeeper::Start(fs::path(it->log).parent_path().string(),
                                           static_cast<uint16_t>(port),
                                           static_cast<int>(timeout_s * 1e3));
  if (!zk.ok()) return fail(zk.status().message());
  it->pid = (*zk)->Detach();
  Status written = WriteRecord(file, *r);
  if (!written.ok()) return fail(written.message());
  std::printf("pond restart: ZooKeeper is back at %s (pid %d)\n", r->coord.c_str(),
              static_cast<int>(it->pid));
  return 0;
}

int Down(const std::string& dir, double grace_s) {
  const std::string file = ClusterFile(dir);
  Result<std::vector<Proc>> procs = ReadProcs(file);
  if (!procs.ok()) {
    std::fprintf(stderr, "pond down: %s\n", procs.status().message().c_str());
    return 1;
  }
  std::string names;
  int running = 0;
  for (const Proc& p : *procs) {
    if (p.role != "zookeeper" && p.role != "mn" && p.role != "cn") {
      std::fprintf(stderr, "pond down: %s names a process of unknown role \"%s\"\n", file.c_str(),
                   p.role.c_str());
      return 1;
    }
  }
  for (const Proc& p : *procs) {
    if (!GroupAlive(p.pid)) continue;
    running++;
    names += (names.empty() ? "" : ", ") + Describe(p);
  }
  std::error_code ec;
  std::ofstream(StoppingFile(dir)).close();
  const bool clean = StopAll(*procs, std::chrono::milliseconds(static_cast<int>(grace_s * 1e3)));
  fs::remove(file, ec);
  fs::remove(StoppingFile(dir), ec);
  std::printf("pond down: stopped %d process(es)%s%s%s\n", running, names.empty() ? "" : " (",
              names.c_str(), names.empty() ? "" : ")");
  if (!clean) std::printf("pond down: some did not stop within %.0f s and were killed\n", grace_s);
  return 0;
}

}  // namespace pond::server
