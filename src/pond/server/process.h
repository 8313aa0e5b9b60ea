// Processes of a local cluster: started as daemons by `pond up`, stopped by `pond down` — which
// is another process, so nothing here assumes the daemons are its children.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "pond/base/loopback_port.h"  // FreeLoopbackPort, for the daemons it starts
#include "pond/status.h"

namespace pond::server {

// Starts `argv` (argv[0] a path) in a new session — its own process group, no terminal — with
// stdin from /dev/null and stdout and stderr appended to `log_path`. Returns its pid, which is
// also its process group's id; the group exists when it returns (GroupAlive holds until the
// daemon exits). Unavailable if `argv[0]` cannot be run.
Result<pid_t> SpawnDaemon(const std::vector<std::string>& argv, const std::string& log_path);

// Whether process group `pgid` still has a process. A group led by a child of ours that has
// exited is reaped here first, so that a zombie does not count.
bool GroupAlive(pid_t pgid);

// SIGTERM to every process of the groups `pgids`, at once; SIGKILL to what is left after
// `grace`. Returns false if it had to kill. Waits until every group is gone.
bool StopGroups(const std::vector<pid_t>& pgids, std::chrono::milliseconds grace);

// The last non-empty line of a log file, for a one-line error ("(empty)" if none).
std::string LastLogLine(const std::string& path);

// This program's own path (/proc/self/exe), for starting more of itself.
std::string SelfPath();

}  // namespace pond::server
