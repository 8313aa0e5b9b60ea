#include "pond/server/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace pond::server {

Result<pid_t> SpawnDaemon(const std::vector<std::string>& argv, const std::string& log_path) {
  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return Unavailable("cannot open " + log_path + ": " + std::strerror(errno));
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The child's new session (its process group, which GroupAlive looks for) must exist before
  // this returns: otherwise a caller that checks at once finds no group and thinks the daemon
  // died. The pipe closes at the child's exec (close-on-exec), after its setsid; a failed exec
  // writes its errno first.
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) {
    close(log);
    return Unavailable(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(log);
    close(ready[0]);
    close(ready[1]);
    return Unavailable(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    close(ready[0]);
    setsid();
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    // The daemon starts with default signal handling and an empty mask whatever ours are.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    execv(args[0], args.data());
    const int e = errno;
    (void)!write(ready[1], &e, sizeof(e));
    _exit(127);
  }
  close(log);
  close(ready[1]);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(ready[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  close(ready[0]);
  if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
    waitpid(pid, nullptr, 0);
    return Unavailable("cannot run " + argv[0] + ": " + std::strerror(exec_errno));
  }
  return pid;
}

namespace {

// Whether some process of group `pgid` is running (not a zombie): a daemon killed after its
// starter exited is nobody's child but init's, and an init that does not reap (a container's)
// leaves it a zombie for good, which kill(2) still finds.
bool GroupHasLiveMember(pid_t pgid) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so parse after the
    // last ')'.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (!(rest >> state >> ppid >> pgrp)) continue;
    if (pgrp == pgid && state != 'Z' && state != 'X') return true;
  }
  return false;
}

}  // namespace

bool GroupAlive(pid_t pgid) {
  int status = 0;
  waitpid(pgid, &status, WNOHANG);  // reaps our exited child; harmless for anyone else's
  if (kill(-pgid, 0) != 0 && errno != EPERM) return false;
  return GroupHasLiveMember(pgid);
}

bool StopGroups(const std::vector<pid_t>& pgids, std::chrono::milliseconds grace) {
  for (pid_t g : pgids) {
    if (GroupAlive(g)) kill(-g, SIGTERM);
  }
  auto any_alive = [&pgids] {
    bool any = false;
    for (pid_t g : pgids) any |= GroupAlive(g);
    return any;
  };
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (any_alive()) {
    if (std::chrono::steady_clock::now() > deadline) {
      for (pid_t g : pgids) kill(-g, SIGKILL);
      while (any_alive()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::string LastLogLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last.empty() ? "(empty)" : last;
}

std::string SelfPath() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "pond";
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace pond::server
