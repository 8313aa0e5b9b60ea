// FreeLoopbackPort: a TCP port on 127.0.0.1 that the kernel reports free now. The socket is closed
// again, so whoever binds it next (a ZooKeeper, a daemon's metrics server) races anyone else on
// the host for it; callers say so when the bind fails.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "pond/status.h"

namespace pond {

inline Result<uint16_t> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int e = errno;
    close(fd);
    return Unavailable(std::string("cannot find a free port: ") + std::strerror(e));
  }
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace pond
