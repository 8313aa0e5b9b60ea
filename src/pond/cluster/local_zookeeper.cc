#include "pond/cluster/local_zookeeper.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "pond/base/loopback_port.h"

namespace pond::cluster {

namespace {

bool Accepts(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

// The last lines of the server's log, for an error message on one line.
std::string LogTail(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last.empty() ? "(its log is empty)" : "last log line: " + last;
}

}  // namespace

Result<std::unique_ptr<LocalZooKeeper>> LocalZooKeeper::Start(const std::string& dir, uint16_t port,
                                                              int start_timeout_ms) {
  if (access(kServerScript, X_OK) != 0) {
    return Unavailable(std::string("ZooKeeper is not installed (no ") + kServerScript +
                       "; scripts/install-deps.sh installs Debian's zookeeper)");
  }
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Unavailable("cannot create " + dir + ": " + std::strerror(errno));
  }
  if (port == 0) {
    Result<uint16_t> p = FreeLoopbackPort();
    if (!p.ok()) return p.status();
    port = *p;
  }
  const std::string cfg = dir + "/zoo.cfg", log = dir + "/zookeeper.log";
  {
    std::ofstream out(cfg);
    // Loopback only; no admin web server (it would take port 8080); a short tick, so that a
    // session's least timeout (2 ticks) suits tests. Sessions still last what clients ask.
    out << "tickTime=500\n"
        << "dataDir=" << dir << "/data\n"
        << "clientPort=" << port << "\n"
        << "clientPortAddress=127.0.0.1\n"
        << "admin.enableServer=false\n"
        << "maxClientCnxns=200\n";
    if (!out) return Unavailable("cannot write " + cfg);
  }
  std::unique_ptr<LocalZooKeeper> zk(new LocalZooKeeper());
  zk->dir_ = dir;
  zk->port_ = port;
  const pid_t pid = fork();
  if (pid < 0) return Unavailable(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Its own process group: Stop ends the launcher script and the JVM it starts together.
    setpgid(0, 0);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    // A small heap: the configuration is a few hundred bytes. The JVM's optimising compiler
    // (C2) and its parallel collector are for long, hot programs: started beside a cluster on a
    // small host, C2 alone took ~1 s of a core in the first seconds of a run (bench/up_threads.sh).
    // ZooKeeper's load here is a few reads a second, which the quick compiler serves.
    setenv("SERVER_JVMFLAGS", "-Xmx128m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC", 1);
    setenv("ZOO_LOG_DIR", dir.c_str(), 1);
    execl(kServerScript, kServerScript, "start-foreground", cfg.c_str(), nullptr);
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so that Stop never races the child's own call
  zk->pid_ = pid;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(start_timeout_ms);
  while (!Accepts(port)) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      zk->pid_ = -1;
      return Unavailable("ZooKeeper exited before it accepted connections on port " +
                         std::to_string(port) + "; " + LogTail(log));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      zk->Stop();
      return Unavailable("ZooKeeper did not accept connections on port " + std::to_string(port) +
                         " within " + std::to_string(start_timeout_ms) + " ms; " + LogTail(log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return zk;
}

LocalZooKeeper::~LocalZooKeeper() { Stop(); }

void LocalZooKeeper::Stop() {
  if (pid_ <= 0) return;
  kill(-pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // The JVM may outlive the launcher by a moment: the group goes for good.
  kill(-pid_, SIGKILL);
  pid_ = -1;
}

}  // namespace pond::cluster
