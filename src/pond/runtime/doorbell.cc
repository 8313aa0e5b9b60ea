#include "pond/runtime/doorbell.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "pond/base/assert.h"

namespace pond {

Doorbell::Doorbell() : event_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  POND_CHECK_MSG(event_fd_ >= 0, "eventfd for a doorbell failed");
}

Doorbell::~Doorbell() { close(event_fd_); }

void Doorbell::Wake() {
  const uint64_t one = 1;
  // The counter only grows; a full one (never, in practice) already wakes the sleeper.
  [[maybe_unused]] ssize_t n = write(event_fd_, &one, sizeof(one));
}

void Doorbell::Wait(std::chrono::microseconds most, int fd) {
  if (rung_.exchange(false)) return;
  sleeping_.store(true);
  // A ring between the exchange above and this store is seen here; one after it writes the
  // eventfd, which the poll sees.
  if (!rung_.load()) {
    pollfd fds[2] = {{event_fd_, POLLIN, 0}, {fd, POLLIN, 0}};
    const auto s = std::chrono::duration_cast<std::chrono::seconds>(most);
    const timespec timeout{static_cast<time_t>(s.count()),
                           static_cast<long>((most - s).count() * 1000)};
    const int n = ppoll(fds, fd < 0 ? 1 : 2, &timeout, nullptr);
    POND_CHECK_MSG(n >= 0 || errno == EINTR, "poll in a doorbell's wait failed");
  }
  sleeping_.store(false);
  rung_.store(false);
  uint64_t count;
  // Empties the eventfd for the next sleep (EAGAIN when no ring wrote it).
  [[maybe_unused]] ssize_t n = read(event_fd_, &count, sizeof(count));
}

}  // namespace pond
