// Daemons as `pond up` starts them: the process group exists as soon as SpawnDaemon returns (a
// check right after it must not find the daemon dead), a program that cannot run is an error,
// and a stopped group is gone.
#include "pond/server/process.h"

#include <gtest/gtest.h>

#include <chrono>

#include "pond/base/temp_dir.h"

namespace pond::server {
namespace {

TEST(ProcessTest, AGroupIsAliveAsSoonAsItIsSpawned) {
  TempDir dir("pond-process-test");
  for (int i = 0; i < 50; i++) {
    Result<pid_t> pid = SpawnDaemon({"/bin/sleep", "30"}, dir.path() + "/log");
    ASSERT_TRUE(pid.ok()) << pid.status().ToString();
    EXPECT_TRUE(GroupAlive(*pid)) << "spawn " << i;
    EXPECT_TRUE(StopGroups({*pid}, std::chrono::milliseconds(2000)));
    EXPECT_FALSE(GroupAlive(*pid));
  }
}

TEST(ProcessTest, AProgramThatCannotRunIsAnError) {
  TempDir dir("pond-process-test");
  Result<pid_t> pid = SpawnDaemon({"/no/such/program"}, dir.path() + "/log");
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find("/no/such/program"), std::string::npos);
}

}  // namespace
}  // namespace pond::server
