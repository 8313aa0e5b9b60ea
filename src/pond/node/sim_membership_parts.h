// SimMembership's own parts, shared by its two files (sim_membership.cc: the machines, the
// coordination service and the controls; sim_membership_faults.cc: the schedule's faults carried
// out). Not for anyone else: include sim_membership.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "pond/base/assert.h"
#include "pond/cluster/directory.h"
#include "pond/node/sim_membership.h"

namespace pond::node {

// The cluster's name in the simulated coordination service.
inline constexpr const char* kClusterName = "sim";
// How often a fault that must wait is tried again.
inline constexpr uint64_t kRetryNs = 10'000;

// One incarnation of a CN's membership: the machine, the core and endpoint its beat half uses
// (a daemon's membership thread), and the controls it acts through.
struct SimMembership::Node {
  uint16_t cn = 0, incarnation = 0;
  std::unique_ptr<Scheduler> sched;  // first: destroyed last
  std::unique_ptr<Endpoint> ep;
  std::unique_ptr<Controls> controls;
  std::unique_ptr<CnStore> store;
  recovery::MembershipCounts counts;
  std::unique_ptr<recovery::CnMembership> machine;
  bool crashed = false;
  bool serving = false;  // let in: alive in an epoch it applied, its clients running

  ~Node();  // sim_membership.cc, where Controls and CnStore are complete
};

// The coordination service as every simulated CN reaches it; each configuration put is shown
// to the simulator, which knows the truth the machines can only infer.
class SimMembership::Store final : public cluster::ConfigStore {
 public:
  Store(SimMembership& m, cluster::InMemoryConfigStore& base) : m_(m), base_(base) {}
  Result<cluster::Versioned> Get(const std::string& key) const override {
    if (down) return Down();
    return base_.Get(key);
  }
  Result<uint64_t> PutIf(const std::string& key, std::span<const std::byte> value,
                         uint64_t expected) override {
    if (down) return Down();
    Result<uint64_t> v = base_.PutIf(key, value, expected);
    if (v.ok() && key == cluster::ConfigKey(kClusterName)) {
      Result<cluster::Configuration> c = cluster::Configuration::Decode(value);
      POND_CHECK_MSG(c.ok(), "a machine put a configuration it cannot read back");
      m_.OnConfig(*c);
    }
    return v;
  }
  void Watch(const std::string& key, std::function<void(const cluster::Versioned&)> fn) override {
    base_.Watch(key, std::move(fn));
  }

  // crash-coord to restart-coord: every call fails as a lost ZooKeeper session's do; what the
  // service held is kept.
  bool down = false;

 private:
  static Status Down() { return Unavailable("the coordination service is down"); }
  SimMembership& m_;
  cluster::InMemoryConfigStore& base_;
};

}  // namespace pond::node
