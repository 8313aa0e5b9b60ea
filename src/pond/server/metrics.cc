#include "pond/server/metrics.h"

#include <openssl/crypto.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <sstream>
#include <vector>

namespace pond::server {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Families in the order they are added; a sample is added to the family named last.
class Families {
 public:
  Families& Family(const std::string& name, MetricType type, const std::string& help) {
    all_.push_back(MetricFamily{name, help, type, {}});
    return *this;
  }
  Families& Sample(double value, std::vector<ClientMetric::Label> labels = {}) {
    ClientMetric m;
    m.label = std::move(labels);
    if (all_.back().type == MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    all_.back().metric.push_back(std::move(m));
    return *this;
  }
  Families& Histogram(const LatencyBuckets& b) {
    ClientMetric m;
    uint64_t cumulative = 0;
    for (size_t i = 0; i < b.counts.size(); i++) {
      cumulative += b.counts[i];
      const double le = i < LatencyBuckets::kBoundsNs.size()
                            ? static_cast<double>(LatencyBuckets::kBoundsNs[i]) / 1e9
                            : std::numeric_limits<double>::infinity();
      m.histogram.bucket.push_back(ClientMetric::Bucket{cumulative, le});
    }
    m.histogram.sample_count = cumulative;
    m.histogram.sample_sum = static_cast<double>(b.sum_ns) / 1e9;
    all_.back().metric.push_back(std::move(m));
    return *this;
  }
  std::vector<MetricFamily> Take() { return std::move(all_); }

 private:
  std::vector<MetricFamily> all_;
};

auto d(uint64_t v) { return static_cast<double>(v); }

void AddCn(Families& f, const ClusterStats& s, const ClusterStats& before, const CnStats& c) {
  f.Family("pond_commits_total", MetricType::Counter,
           "Transactions committed by this CN's workers, by kind")
      .Sample(d(s.committed), {{"kind", "read_write"}})
      .Sample(d(s.committed_read_only), {{"kind", "read_only"}});
  f.Family("pond_aborts_total", MetricType::Counter,
           "Transaction attempts aborted by this CN's workers, by reason");
  for (const AbortCounts::Reason& r : AbortCounts::Reasons()) {
    f.Sample(d(s.aborts.*r.count), {{"reason", r.key}});
  }
  f.Family("pond_commit_latency_seconds", MetricType::Histogram,
           "From Begin to the end of Commit, of every committed transaction")
      .Histogram(s.commit_latency);
  f.Family("pond_remote_calls_total", MetricType::Counter,
           "Calls hybrid routing sent to another CN")
      .Sample(d(s.remote_calls));
  f.Family("pond_commit_rounds_posted_again_total", MetricType::Counter,
           "Commit rounds posted again to an MN that had not answered them and was not declared")
      .Sample(d(s.commit_rounds_posted_again));
  // By phase: "loading" until the CN served (CN 0 writes every table's rows then), "serving"
  // since, so that operations per commit are read off the second alone.
  const ClusterStats since = s.Since(before);
  f.Family("pond_one_sided_ops_total", MetricType::Counter,
           "One-sided operations on the memory pool posted by this CN's workers, by verb and "
           "phase (loading: before it served)");
  for (const auto& [phase, n] : {std::pair{"loading", &before}, std::pair{"serving", &since}}) {
    f.Sample(d(n->reads), {{"verb", "read"}, {"phase", phase}})
        .Sample(d(n->writes), {{"verb", "write"}, {"phase", phase}})
        .Sample(d(n->cas), {{"verb", "cas"}, {"phase", phase}})
        .Sample(d(n->faa), {{"verb", "faa"}, {"phase", phase}});
  }
  f.Family("pond_doorbell_batches_total", MetricType::Counter,
           "Batches of one-sided operations sent, one per MN per flush, by phase")
      .Sample(d(before.batches), {{"phase", "loading"}})
      .Sample(d(since.batches), {{"phase", "serving"}});
  f.Family("pond_messages_sent_total", MetricType::Counter,
           "Messages to other CNs: lock, timestamp and routed-call requests and answers")
      .Sample(d(s.messages));
  f.Family("pond_messages_malformed_total", MetricType::Counter,
           "Messages from other CNs dropped unread: they did not parse (a bug, or not Pond)")
      .Sample(d(s.messages_malformed));
  f.Family("pond_vt_cache_lookups_total", MetricType::Counter, "Version table cache lookups")
      .Sample(d(s.vt_hits), {{"result", "hit"}})
      .Sample(d(s.vt_misses), {{"result", "miss"}});
  f.Family("pond_lock_slots", MetricType::Gauge, "Slots of this CN's lock table")
      .Sample(d(c.lock_slots));
  f.Family("pond_locks_held", MetricType::Gauge,
           "Locks held in this CN's lock table now (granted less released)")
      .Sample(d(c.locks_held));
  f.Family("pond_lock_grants_total", MetricType::Counter, "Locks granted by this CN's lock table")
      .Sample(d(c.lock_acquired));
  f.Family("pond_lock_releases_total", MetricType::Counter,
           "Locks released in this CN's lock table, by their holders or by recovery")
      .Sample(d(c.lock_released));
  f.Family("pond_lock_refusals_total", MetricType::Counter,
           "Lock requests this CN's lock table refused, by reason")
      .Sample(d(c.lock_conflicts), {{"reason", "conflict"}})
      .Sample(d(c.lock_bucket_full), {{"reason", "bucket_full"}})
      .Sample(d(c.lock_counter_full), {{"reason", "counter_full"}})
      .Sample(d(c.lock_wrong_shard), {{"reason", "wrong_shard"}});
  f.Family("pond_membership_epoch", MetricType::Gauge,
           "The newest membership epoch this CN applied")
      .Sample(d(c.epoch));
  f.Family("pond_failures_declared_total", MetricType::Counter,
           "CNs and MNs declared failed, as this CN heard it")
      .Sample(d(c.cns_failed), {{"node", "cn"}})
      .Sample(d(c.mns_failed), {{"node", "mn"}});
  f.Family("pond_recoveries_total", MetricType::Counter,
           "Failed CNs whose recovery finished here (their shards served again)")
      .Sample(d(c.recoveries));
  f.Family("pond_logs_recovered_total", MetricType::Counter,
           "Commit logs of failed CNs this CN replayed")
      .Sample(d(c.logs_recovered));
  f.Family("pond_cns_rejoined_total", MetricType::Counter,
           "Restarted CNs let back into the cluster")
      .Sample(d(c.cns_back));
  f.Family("pond_oracle_moves_total", MetricType::Counter,
           "Times the timestamp oracle moved to another CN")
      .Sample(d(c.tso_moves));
  f.Family("pond_coordination_up", MetricType::Gauge,
           "1 if the coordination service answered this CN's last read of the configuration")
      .Sample(c.coordination_up ? 1 : 0);
  f.Family("pond_failures_undeclared", MetricType::Gauge,
           "Nodes whose beat stopped two leases ago and that no epoch has declared failed")
      .Sample(d(c.failures_undeclared));
}

std::vector<MetricFamily> BuildFamilies(const DaemonMetrics& m) {
  Families f;
  f.Family("pond_info", MetricType::Gauge, "Which daemon this is: always 1")
      .Sample(1, {{"role", m.role}, {"id", std::to_string(m.id)}, {"cluster", m.cluster}});
  f.Family("pond_uptime_seconds", MetricType::Gauge, "Seconds since the daemon started")
      .Sample(m.uptime_s);
  if (m.role == "cn") {
    // Serving means able to: a CN whose cluster has a failure it cannot get past (a node gone
    // undeclared) commits only what does not touch that node, and says so.
    const bool whole = m.cn.has_value() && m.cn->failures_undeclared == 0;
    f.Family("pond_serving", MetricType::Gauge,
             "1 while this CN serves and no node is failed undeclared; 0 before it serves, as it "
             "stops, and while a failure cannot be declared")
        .Sample(m.totals.has_value() && whole ? 1 : 0);
    if (m.totals.has_value() && m.cn.has_value()) AddCn(f, *m.totals, m.before_serving, *m.cn);
    if (m.clients.has_value()) {
      f.Family("pond_client_requests_total", MetricType::Counter,
               "Client requests this CN answered: Execute, Call and interactive steps")
          .Sample(d(m.clients->requests));
      f.Family("pond_client_rejected_total", MetricType::Counter,
               "Client requests answered REJECTED: refused before anything ran")
          .Sample(d(m.clients->rejected));
      f.Family("pond_client_refused_total", MetricType::Counter,
               "Client requests and streams refused by the access rules: a caller they do not "
               "know, or a request beyond its role")
          .Sample(d(m.clients->refused_unauthenticated), {{"reason", "unauthenticated"}})
          .Sample(d(m.clients->refused_role), {{"reason", "role"}});
    }
  } else {
    f.Family("pond_region_bytes", MetricType::Gauge, "Bytes of the region this MN serves")
        .Sample(d(m.region_bytes));
    f.Family("pond_mn_beats_total", MetricType::Counter,
             "Beats this MN counted in its region, which the CNs watch")
        .Sample(d(m.beats));
    f.Family("pond_mn_incarnation", MetricType::Gauge,
             "The incarnation this MN serves as (one more at every restart)")
        .Sample(d(m.incarnation));
    f.Family("pond_mn_declared_alive_total", MetricType::Counter,
             "Times the configuration declared this MN down while it lived, and it restarted "
             "blank")
        .Sample(d(m.declared_alive));
  }
  return f.Take();
}

// "HOST:PORT", split; false if it is not that.
bool SplitAddress(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return false;
  const std::string digits = address.substr(colon + 1);
  if (digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  *port = std::stoi(digits);
  *host = address.substr(0, colon);
  return *port <= 65535;
}

}  // namespace

std::string MetricsText(const DaemonMetrics& m) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, BuildFamilies(m));
  return out.str();
}

// What the exposer asks at each scrape, on its thread.
class MetricsServer::Collector : public prometheus::Collectable {
 public:
  explicit Collector(const MetricsServer& server) : server_(server) {}
  std::vector<MetricFamily> Collect() const override { return BuildFamilies(server_.Snapshot()); }

 private:
  const MetricsServer& server_;
};

MetricsServer::MetricsServer(std::string role, int id, std::string cluster)
    : role_(std::move(role)), cluster_(std::move(cluster)), id_(id), started_ns_(SteadyNs()) {}

MetricsServer::~MetricsServer() = default;

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address,
                                                            const std::string& role, int id,
                                                            const std::string& cluster,
                                                            const MetricsSecurity& security) {
  std::string host;
  int port = 0;
  if (!SplitAddress(address, &host, &port)) {
    return InvalidArgument("--metrics " + address + " is not HOST:PORT");
  }
  std::unique_ptr<MetricsServer> s(new MetricsServer(role, id, cluster));
  // A connection holds a server thread until it has sent its request or the timeout has
  // passed: several threads and a short timeout, so that no idle or slow client (a port
  // scanner, a stuck scraper) keeps the metrics from the next scrape.
  std::vector<std::string> options = {"num_threads", std::to_string(kMetricsThreads),
                                      "request_timeout_ms",
                                      std::to_string(kMetricsRequestTimeoutMs)};
  // With TLS the exposer serves loopback alone, and the TLS front (tls_front.h) the address.
  options.insert(options.end(),
                 {"listening_ports", security.tls.has_value() ? "127.0.0.1:0" : address});
  try {
    s->exposer_ = std::make_unique<prometheus::Exposer>(options);
  } catch (const std::exception& e) {
    return Unavailable("cannot serve metrics at " + address + ": " + e.what());
  }
  const std::vector<int> ports = s->exposer_->GetListeningPorts();
  if (ports.empty()) return Unavailable("cannot serve metrics at " + address + ": no port bound");
  s->address_ = host + ":" + std::to_string(ports.front());
  if (security.tls.has_value()) {
    Result<std::unique_ptr<TlsFront>> front =
        TlsFront::Start(*security.tls, host, port, ports.front());
    if (!front.ok()) return front.status();
    s->front_ = std::move(front).value();
    s->address_ = host + ":" + std::to_string(s->front_->port());
  }
  // The check first: until the collector is registered, /metrics answers nothing at all.
  if (!security.token.empty()) {
    // The same time for every wrong password of the token's length.
    s->exposer_->RegisterAuth(
        [token = security.token](const std::string&, const std::string& password) {
          return password.size() == token.size() &&
                 CRYPTO_memcmp(password.data(), token.data(), token.size()) == 0;
        },
        "pond");
  }
  s->collector_ = std::make_shared<Collector>(*s);
  s->exposer_->RegisterCollectable(s->collector_);
  return s;
}

DaemonMetrics MetricsServer::Snapshot() const {
  DaemonMetrics m;
  m.role = role_;
  m.id = id_;
  m.cluster = cluster_;
  m.uptime_s = static_cast<double>(SteadyNs() - started_ns_) / 1e9;
  m.region_bytes = region_bytes_.load(std::memory_order_relaxed);
  m.beats = beats_.load(std::memory_order_relaxed);
  m.incarnation = incarnation_.load(std::memory_order_relaxed);
  m.declared_alive = declared_alive_.load(std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  if (attached_ != nullptr) {
    m.totals = attached_->Stats();
    m.cn = attached_->GetCnStats(cn_);
    m.before_serving = attached_stats_;
    if (clients_) m.clients = clients_();
  }
  return m;
}

void MetricsServer::AttachCluster(const Cluster* cluster, uint16_t cn) {
  std::lock_guard lock(mu_);
  attached_ = cluster;
  cn_ = cn;
  attached_stats_ = cluster->Stats();
}

void MetricsServer::AttachClients(std::function<ClientCounts()> counts) {
  std::lock_guard lock(mu_);
  clients_ = std::move(counts);
}

void MetricsServer::DetachCluster() {
  std::lock_guard lock(mu_);
  attached_ = nullptr;
  clients_ = nullptr;
}

}  // namespace pond::server
