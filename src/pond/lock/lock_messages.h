// Wire format of lock RPCs between CNs (docs/formats.md "Lock messages"). A request batch holds
// every lock, unlock and end request one worker has for one CN in one scheduling round, across
// all of that worker's transactions (Dandelion's batching); the reply batch answers the lock and
// end requests (unlocks are not answered: they are asynchronous, Lotus §5.1).
//
// Messages may be lost, duplicated and delayed, so a request is sent again until answered, and
// the server must tell a late copy from a live request: every batch carries the sender's floor
// (its oldest transaction not yet ended), and a transaction that took locks at a CN ends there
// with an end request, which releases whatever it still holds and is remembered; a lock request
// of an ended transaction, or one below the floor, is refused and takes nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

namespace pond::lock {

// Message kinds (docs/formats.md "Message kinds"): 0x01xx belongs to the lock layer.
inline constexpr uint16_t kMsgLockRequests = 0x0101;
inline constexpr uint16_t kMsgLockReplies = 0x0102;

inline constexpr uint8_t kOpLock = 0;
inline constexpr uint8_t kOpUnlock = 1;
inline constexpr uint8_t kOpEnd = 2;  // the transaction is over: release all it holds here

struct BatchHeader {
  uint32_t count;     // entries that follow
  uint32_t reserved;  // zero
  // Requests: every transaction of the sender below this id has ended (ids of one worker grow).
  // Replies: zero.
  uint64_t floor;
};
static_assert(sizeof(BatchHeader) == 16 && offsetof(BatchHeader, floor) == 8);

struct LockRequestEntry {
  uint64_t txn_id;  // with the sender's CN id, the owner
  uint64_t key;     // LockKey.key
  uint16_t table;   // LockKey.table (bit 15: index-bucket lock)
  uint8_t op;       // kOpLock, kOpUnlock or kOpEnd
  uint8_t mode;     // LockMode (kOpEnd: zero)
  uint32_t req_id;  // echoed in the reply; chosen by the sender (kOpUnlock: zero)
};
static_assert(sizeof(LockRequestEntry) == 24);
static_assert(offsetof(LockRequestEntry, table) == 16 && offsetof(LockRequestEntry, req_id) == 20);

struct LockReplyEntry {
  uint32_t req_id;
  uint8_t code;  // pond::Code of the outcome: kOk, kConflict or kWrongShard (kOpEnd: kOk)
  uint8_t reserved[3];
};
static_assert(sizeof(LockReplyEntry) == 8);

inline constexpr uint32_t kLockBatchEntriesMax = 4096;

// The header of a batch of `entry_size`-byte entries, or nullopt if `payload` is not one: short,
// more than kLockBatchEntriesMax entries, or a size that does not match its count. A receiver
// drops a batch that is not (Endpoint::CountMalformed): it comes from another process.
inline std::optional<BatchHeader> ReadBatchHeader(std::span<const std::byte> payload,
                                                  size_t entry_size) {
  BatchHeader bh;
  if (payload.size() < sizeof(bh)) return std::nullopt;
  std::memcpy(&bh, payload.data(), sizeof(bh));
  if (bh.count > kLockBatchEntriesMax ||
      payload.size() != sizeof(bh) + size_t{bh.count} * entry_size) {
    return std::nullopt;
  }
  return bh;
}

// Entry `i` of a batch ReadBatchHeader accepted.
template <typename Entry>
Entry BatchEntry(std::span<const std::byte> payload, uint32_t i) {
  Entry e;
  std::memcpy(&e, payload.data() + sizeof(BatchHeader) + size_t{i} * sizeof(e), sizeof(e));
  return e;
}

}  // namespace pond::lock
