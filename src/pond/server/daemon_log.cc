#include "pond/server/daemon_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace pond::server {

void DaemonLog::Write(const std::string& line) const {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  // One write per line, so that lines of several threads never interleave.
  std::string out = fmt::format("{}.{:03}Z {}: {}\n", stamp, ms, who_, line);
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
}

}  // namespace pond::server
