// Test support: a formatted in-process memory pool and single-thread workers to drive it.
// For tests only (it uses POND_CHECK on setup errors instead of returning them).
#pragma once

#include <memory>
#include <utility>

#include "pond/base/assert.h"
#include "pond/runtime/clocks.h"
#include "pond/runtime/scheduler.h"
#include "pond/store/catalog.h"
#include "pond/transport/local/local_fabric.h"
#include "pond/transport/test_worker.h"

namespace pond::store::testing {

struct Pool {
  std::unique_ptr<LocalFabric> fabric;
  PoolLayout layout;
  LocalFabric* operator->() { return fabric.get(); }
  LocalFabric& operator*() { return *fabric; }
};

inline Pool FormattedPool(uint16_t mns, uint64_t region_bytes, uint64_t chunk_bytes = 1 << 20,
                          int replication = 1) {
  auto f = LocalFabric::Create(mns, region_bytes);
  POND_CHECK_MSG(f.ok(), f.status().ToString().c_str());
  auto layout = MakeLayout(mns, replication, region_bytes, chunk_bytes);
  POND_CHECK_MSG(layout.ok(), layout.status().ToString().c_str());
  for (MnId mn = 0; mn < mns; mn++) FormatRegion((*f)->region(mn), *layout, mn);
  return Pool{std::move(f).value(), *layout};
}

using Worker = pond::testing_transport::Worker;

}  // namespace pond::store::testing
