// NameThisThread: what `top -H`, gdb and /proc/PID/task/TID/comm call the calling thread. A
// daemon runs a dozen threads; a stall is found by sampling them, and a sample that says
// "pond-beat" needs no guess. Linux keeps 15 bytes of the name; longer names are cut.
#pragma once

#include <pthread.h>

#include <string>

namespace pond {

inline void NameThisThread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace pond
