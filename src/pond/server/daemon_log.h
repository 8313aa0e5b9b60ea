// The daemons' log: one line per event that matters, on stderr (which `pond up` sends to the
// daemon's log file): "2026-11-24T15:04:05.123Z pond mn 2: serving ...". Daemons read real
// time for it; protocol code never does.
#pragma once

#include <fmt/core.h>

#include <string>

namespace pond::server {

class DaemonLog {
 public:
  explicit DaemonLog(std::string who) : who_(std::move(who)) {}
  template <typename... Args>
  void operator()(fmt::format_string<Args...> f, Args&&... args) const {
    Write(fmt::format(f, std::forward<Args>(args)...));
  }
  void Write(const std::string& line) const;

 private:
  std::string who_;  // "pond mn 2"
};

}  // namespace pond::server
