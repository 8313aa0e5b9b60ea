#include "pond/server/daemon_common.h"

#include <signal.h>

#include <chrono>
#include <ctime>

#include "pond/cluster/directory.h"

namespace pond::server {

namespace {

sigset_t StopSignals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  return stop;
}

}  // namespace

void BlockStopSignals() {
  const sigset_t stop = StopSignals();
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
}

int WaitForStop(int ms) {
  const sigset_t stop = StopSignals();
  if (ms < 0) {
    int sig = 0;
    while (sigwait(&stop, &sig) != 0) {
    }
    return sig;
  }
  timespec ts{ms / 1000, (ms % 1000) * 1'000'000L};
  const int sig = sigtimedwait(&stop, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

Result<std::optional<std::vector<std::byte>>> AwaitKey(cluster::ConfigStore& store,
                                                       const std::string& key, double wait_s,
                                                       const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1e3));
  for (;;) {
    Result<cluster::Versioned> v = store.Get(key);
    if (!v.ok()) return Unavailable("cannot read " + key + ": " + v.status().message());
    if (!v->value.empty()) return std::optional(std::move(v->value));
    if (std::chrono::steady_clock::now() > deadline) {
      return Unavailable("no " + what + " at " + key + " after " + fmt::format("{:g}", wait_s) +
                         " s");
    }
    if (WaitForStop(100) != 0) return std::optional<std::vector<std::byte>>();
  }
}

Result<std::optional<ClusterSpec>> AwaitSpec(cluster::ConfigStore& store,
                                             const std::string& cluster, double wait_s) {
  const std::string key = cluster::SpecKey(cluster);
  auto bytes = AwaitKey(store, key, wait_s, "cluster spec (pond up writes it; docs/deploy.md)");
  if (!bytes.ok()) return bytes.status();
  if (!bytes->has_value()) return std::optional<ClusterSpec>();
  const std::string text(reinterpret_cast<const char*>((*bytes)->data()), (*bytes)->size());
  Result<ClusterSpec> spec = ClusterSpec::FromJson(text);
  if (!spec.ok()) return InvalidArgument("bad spec at " + key + ": " + spec.status().message());
  return std::optional(std::move(spec).value());
}

}  // namespace pond::server
