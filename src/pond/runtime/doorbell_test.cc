#include "pond/runtime/doorbell.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace pond {
namespace {

using Clock = std::chrono::steady_clock;

TEST(DoorbellTest, ARingBeforeTheWaitIsNotLost) {
  Doorbell bell;
  bell.Ring();
  const auto start = Clock::now();
  bell.Wait(std::chrono::seconds(60));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  // The ring was taken: the next wait sleeps its bound.
  const auto again = Clock::now();
  bell.Wait(std::chrono::milliseconds(20));
  EXPECT_GE(Clock::now() - again, std::chrono::milliseconds(20));
}

TEST(DoorbellTest, ARingWakesASleeperBeforeItsBound) {
  Doorbell bell;
  std::atomic<bool> woke{false};
  std::thread sleeper([&] {
    bell.Wait(std::chrono::seconds(60));
    woke = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(woke.load()) << "woken without a ring";
  const auto rung = Clock::now();
  bell.Ring();
  sleeper.join();
  EXPECT_LT(Clock::now() - rung, std::chrono::seconds(10));
}

// Rings from many threads while the owner sleeps and wakes over and over: none is lost for
// long, so every round ends well before the bound.
TEST(DoorbellTest, EveryRingFromOtherThreadsWakesTheOwner) {
  Doorbell bell;
  std::atomic<int> turn{0};
  constexpr int kRounds = 2000;
  std::thread ringer([&] {
    for (int i = 0; i < kRounds; i++) {
      while (turn.load() != i) std::this_thread::yield();
      bell.Ring();
    }
  });
  const auto start = Clock::now();
  for (int i = 0; i < kRounds; i++) {
    turn = i;
    bell.Wait(std::chrono::seconds(60));
  }
  ringer.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
}  // namespace pond
