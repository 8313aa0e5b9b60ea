// Single-version slots (the ford protocol): encoding, and loading a key.
//
// The slot layout and why a reader can trust what it copied are in layout.h ("Single-version
// slots") and docs/formats.md. Slots are found and claimed exactly as CVT slots are
// (ScanBucket, ClaimSlot in hash_index.h): key and meta sit at the same offsets.
#pragma once

#include <cstdint>
#include <span>

#include "pond/status.h"
#include "pond/store/catalog.h"
#include "pond/store/hash_index.h"
#include "pond/store/placement.h"
#include "pond/task.h"
#include "pond/transport/endpoint.h"

namespace pond::store {

// Writes a whole slot image (t.cvt_bytes) into `out`: `h`, then `value` in lines stamped with
// the low byte of h.version.
void EncodeSvSlot(const TableInfo& t, const SvHeader& h, std::span<const std::byte> value,
                  std::span<std::byte> out);

// Reads a copied slot: its header into *h and its value into `value`; TornRead unless every
// line carries the header's version.
Status DecodeSvSlot(const TableInfo& t, std::span<const std::byte> slot, SvHeader* h,
                    std::span<std::byte> value);

// Finds a key's slot on MN `mn` (replica 0) by probing from its home bucket; NotFound if absent.
Task<Result<SlotRef>> SvLocate(Endpoint& ep, const TableInfo& t, MnId mn, int replica,
                               uint64_t key);

// Inserts a new key with `value` (version 1) on every replica, before transactions run.
Task<Result<SlotRef>> SvInsert(Endpoint& ep, const TableInfo& t, const Placement& placement,
                               uint64_t key, std::span<const std::byte> value);

}  // namespace pond::store
