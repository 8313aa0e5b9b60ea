#include "pond/bench/region_size.h"

#include <algorithm>

#include "pond/store/layout.h"

namespace pond::bench {

RegionNeed RegionNeedFor(std::span<const TableNeed> tables, const ClusterConfig& c) {
  const double mns = c.mns, r = c.replication;
  const bool sv = c.protocol.single_version;
  // What the catalog carves for one table's hash index on one MN.
  auto index = [&](uint64_t capacity, uint32_t value_bytes) {
    const double slots = sv ? 22 : 4;
    const double slot_bytes = sv ? store::SvSlotBytes(value_bytes) : store::CvtBytes(c.versions);
    const double buckets = (static_cast<double>(capacity) / mns * 1.1 + 32) / 0.6 / slots + 1;
    return r * buckets * slots * slot_bytes;
  };
  double heap = 0, lanes = 0;
  for (const TableNeed& t : tables) {
    heap += index(t.options.capacity, t.options.value_bytes);
    if (t.options.ordered) {
      const double keys = static_cast<double>(t.options.capacity) / mns * 1.1 + 64;
      heap += (keys / 27 * 1024 * 1.1 + double{3 << 20}) * r;  // R copies of the tree
      heap += index(4096, 8);                                  // its stripe rows
    }
    // Records live outside the index, one per version: the loaded one and room for another.
    if (!sv) {
      lanes +=
          static_cast<double>(t.rows) * r / mns * store::RecordStride(t.options.value_bytes) * 2;
    }
  }
  // The general heap is a quarter of the region, three quarters under ford
  // (store::GeneralHeapBytes); the lanes are the rest.
  const double least = sv ? heap * 4 / 3 : std::max(heap * 4, lanes * 4 / 3);
  const double generous = least * 1.1 + double{64 << 20};
  const auto mib = static_cast<uint64_t>(generous / (1 << 20));
  return RegionNeed{.least_mib = static_cast<uint64_t>(least / (1 << 20)) + 1,
                    .mib = (mib + 255) / 256 * 256};
}

}  // namespace pond::bench
