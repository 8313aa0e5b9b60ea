// Test support: one worker — a scheduler on the system clock and an endpoint — driven by the
// test's own thread. The transport's, the store's and the tree's tests all drive endpoints so.
// For tests only.
#pragma once

#include <memory>
#include <optional>
#include <utility>

#include "pond/base/assert.h"
#include "pond/runtime/clocks.h"
#include "pond/runtime/scheduler.h"
#include "pond/transport/fabric.h"

namespace pond::testing_transport {

struct Worker {
  Scheduler sched{SystemClock::Get()};
  std::unique_ptr<Endpoint> ep;
  Worker(Fabric& f, WorkerAddr a) : ep(f.CreateEndpoint(a, sched)) {}

  // Runs a task to completion and returns its result.
  template <typename T>
  T Run(Task<T> task) {
    std::optional<T> out;
    sched.Spawn([](Task<T> t, std::optional<T>* o) -> Task<void> {
      o->emplace(co_await std::move(t));
    }(std::move(task), &out));
    sched.RunUntilIdle();
    POND_CHECK(out.has_value());
    return std::move(*out);
  }
  void Run(Task<void> task) {
    sched.Spawn(std::move(task));
    sched.RunUntilIdle();
  }
  // Runs rounds until `done()` holds (a packet over a network takes a few), at most a million;
  // returns done().
  template <typename F>
  bool RunUntil(F done) {
    for (int i = 0; i < 1000000 && !done(); i++) sched.RunOnce();
    return done();
  }
};

}  // namespace pond::testing_transport
