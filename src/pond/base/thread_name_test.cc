#include "pond/base/thread_name.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

namespace pond {
namespace {

// What /proc says of the calling thread: what top -H and a sampling script read.
std::string CommOfThisThread() {
  std::ifstream in("/proc/self/task/" + std::to_string(syscall(SYS_gettid)) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

TEST(ThreadNameTest, ProcShowsTheNameAndALongOneIsCutTo15Bytes) {
  std::string short_name, long_name;
  std::thread([&] {
    NameThisThread("pond-beat");
    short_name = CommOfThisThread();
    NameThisThread("pond-w1234567890123");
    long_name = CommOfThisThread();
  }).join();
  EXPECT_EQ(short_name, "pond-beat");
  EXPECT_EQ(long_name, "pond-w123456789");
}

}  // namespace
}  // namespace pond
