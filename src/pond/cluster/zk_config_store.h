// ZkConfigStore: the coordination service's interface (membership.h's ConfigStore) on ZooKeeper,
// through its C client (Debian's libzookeeper-mt). Lotus §6 keeps its configuration there, as
// FaRM does; failures are still found by Pond's own millisecond leases, since a ZooKeeper
// session lasts seconds (docs/recovery.md "The pieces").
//
// A key is a znode path ("/pond/configuration"); its parents are created on the first put. A
// version here is the znode's version plus one, so that 0 still means "absent" as in the
// interface: a conditional put is ZooKeeper's create (expected 0) or versioned set.
//
// A cluster's znodes are guarded by its secret (ZkGuard, docs/deploy.md "Security"): a session
// that holds it authenticates as ZooKeeper's digest user "pond" with it, and creates the
// cluster's root and everything below it writable by that user alone and readable by anyone;
// without it, a write there is refused (PermissionDenied). Parents above the root ("/pond") are
// shared by clusters of different secrets: anyone may read them and create below them, no more.
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

// Who may change a cluster's znodes.
struct ZkGuard {
  // The cluster's root znode ("/pond/NAME", directory.h's ClusterRoot): what Connect checks.
  // Empty: nothing is checked (a tool that only reads).
  std::string root;
  // The cluster's secret (server/certs.h's cluster.secret). Empty: znodes are created open to
  // anyone, as a cluster started with --insecure has them.
  std::string secret;
};

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
  // The same, guarded: with a secret, the session authenticates with it and Connect refuses
  // (PermissionDenied) a root that anyone else may change — a znode at or below it that grants
  // more than reading to anyone but the secret's holders, or that they may not write (another
  // secret's cluster). Without one, it refuses a root that is closed (a secured cluster, which
  // this process could not write to).
  static Result<std::unique_ptr<ZkConfigStore>> Connect(const std::string& hosts,
                                                        const ZkGuard& guard,
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
  // Authenticates the session with the guard's secret, and checks its root (Connect's rules).
  Status Authenticate(const ZkGuard& guard);
  // Connect's check of `path` and, with a secret, of every znode below it.
  Status CheckGuarded(const std::string& path, int depth) const;
  // The ACL of a znode created at `path`: open without a secret; with one, the root and below
  // for the secret's holders (read for all), parents above it readable and creatable by all.
  const struct ACL_vector* AclFor(const std::string& path) const;

  zhandle_t* zh_ = nullptr;
  ZkGuard guard_;
  std::string digest_id_;  // "pond:" + base64(SHA-1("pond:" + secret)), as ZooKeeper names it
  // AclFor's answers with a secret; their ids point into digest_id_.
  struct ACL closed_acl_[2] = {}, above_acl_[2] = {};
  struct ACL_vector closed_ = {}, above_ = {};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int state_ = 0;  // the session's last state (ZOO_CONNECTED_STATE, ...); guarded by mu_
  std::vector<std::unique_ptr<Watcher>> watchers_;
};

}  // namespace pond::cluster
