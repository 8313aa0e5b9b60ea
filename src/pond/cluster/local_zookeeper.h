// LocalZooKeeper: a ZooKeeper server on this host's loopback, started and stopped by Pond — by
// `pond up` for a local cluster and by tests — never a system-wide one. It is Debian's zookeeper
// package (scripts/install-deps.sh), run in the foreground in a process group of its own, with
// its data, configuration and log in one directory.
//
// Thread rules: one owner.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "pond/status.h"

namespace pond::cluster {

class LocalZooKeeper {
 public:
  // Debian's launcher for the server.
  static constexpr const char* kServerScript = "/usr/share/zookeeper/bin/zkServer.sh";

  // Starts a server on 127.0.0.1:`port` (0: a free port) keeping everything under `dir`
  // (created if missing), and waits until it accepts connections, at most `start_timeout_ms`.
  // Unavailable — with the end of its log — if it is not installed or does not come up.
  static Result<std::unique_ptr<LocalZooKeeper>> Start(const std::string& dir, uint16_t port = 0,
                                                       int start_timeout_ms = 30'000);
  ~LocalZooKeeper();  // Stop()
  LocalZooKeeper(const LocalZooKeeper&) = delete;
  LocalZooKeeper& operator=(const LocalZooKeeper&) = delete;

  // SIGTERM to its process group, SIGKILL if it has not exited 5 s later; waits for it. Twice
  // is harmless.
  void Stop();
  // Lets the server outlive this object (for `pond up`, whose servers `pond down` stops): returns
  // its pid, which is also its process group's id; the destructor then leaves it running.
  pid_t Detach() {
    const pid_t p = pid_;
    pid_ = -1;
    return p;
  }
  // "127.0.0.1:PORT", for ZkConfigStore::Connect.
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  LocalZooKeeper() = default;

  std::string dir_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace pond::cluster
