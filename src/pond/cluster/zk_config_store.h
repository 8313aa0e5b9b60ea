// ZkConfigStore: the coordination service's interface (membership.h's ConfigStore) on ZooKeeper,
// through its C client (Debian's libzookeeper-mt). Lotus §6 keeps its configuration there, as
// FaRM does; failures are still found by Pond's own millisecond leases, since a ZooKeeper
// session lasts seconds (docs/recovery.md "The pieces").
//
// A key is a znode path ("/pond/configuration"); its parents are created on the first put. A
// version here is the znode's version plus one, so that 0 still means "absent" as in the
// interface: a conditional put is ZooKeeper's create (expected 0) or versioned set.
//
// Thread rules: Get and PutIf may be called from any thread (the client is thread-safe), but not
// from a Watch callback: those run on the client's completion thread, which a synchronous call
// would wait on. Callbacks of all watches run on that one thread, one at a time.
#pragma once

#include <zookeeper/zookeeper.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pond/cluster/membership.h"

namespace pond::cluster {

class ZkConfigStore final : public ConfigStore {
 public:
  // ZooKeeper refuses bigger znodes (its jute.maxbuffer is 1 MiB; leave room for the request).
  static constexpr size_t kValueBytesMax = 1'000'000;

  // Opens a session with one of `hosts` ("127.0.0.1:2181", or several, comma-separated).
  // Unavailable if none answers within `connect_timeout_ms`. The session ends if the servers are
  // unreachable for `session_timeout_ms`; calls then fail Unavailable for good (connect again).
  static Result<std::unique_ptr<ZkConfigStore>> Connect(const std::string& hosts,
                                                        int session_timeout_ms = 10'000,
                                                        int connect_timeout_ms = 10'000);
  ~ZkConfigStore() override;
  ZkConfigStore(const ZkConfigStore&) = delete;
  ZkConfigStore& operator=(const ZkConfigStore&) = delete;

  Result<Versioned> Get(const std::string& key) const override;
  Result<uint64_t> PutIf(const std::string& key, std::span<const std::byte> value,
                         uint64_t expected) override;
  void Watch(const std::string& key, std::function<void(const Versioned&)> fn) override;

  // The session ended: the servers were unreachable for its timeout, and they may have let
  // everything it owned go (its watches, what it put as ephemeral). Calls fail from now on.
  bool expired() const;

 private:
  struct Watcher;
  ZkConfigStore() = default;
  // The session's events: connected, or lost for good.
  static void OnSessionEvent(zhandle_t* zh, int type, int state, const char* path, void* ctx);
  // Reads the key and sets the watch again (asynchronously: it runs on the completion thread).
  static void Arm(Watcher* w);
  static void OnWatchEvent(zhandle_t* zh, int type, int state, const char* path, void* ctx);
  static void OnData(int rc, const char* value, int len, const struct Stat* stat, const void* data);
  static void OnExists(int rc, const struct Stat* stat, const void* data);
  // Creates every missing parent of `key`.
  Status CreateParents(const std::string& key);

  zhandle_t* zh_ = nullptr;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int state_ = 0;  // the session's last state (ZOO_CONNECTED_STATE, ...); guarded by mu_
  std::vector<std::unique_ptr<Watcher>> watchers_;
};

}  // namespace pond::cluster
