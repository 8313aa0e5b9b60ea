// TxnState: a transaction's working set and the Lotus lock-first protocol that runs it (§5).
//
// Execution, for the items added since the last Execute:
//   1. lock   — write locks for read-write items (and the index bucket of inserts), read locks
//               for read-only items under SR, none under SI; no waiting: a refusal aborts;
//   2. CVT    — from the VT cache (locally managed keys), else one READ of the slot named by the
//               address cache, else one READ of the key's home bucket; all items in one batch;
//   3. choose — the newest version older than the start timestamp; abort if a locked item has a
//               committed version newer than the start (a conflict the locks cannot undo);
//   4. record — READ the chosen versions, one batch; check their cacheline versions.
// Commit: WRITE new records and their cells as INVISIBLE on every replica and the commit log,
// get the commit timestamp, WRITE it into the cells (visible), unlock. Read-only transactions
// run steps 2–4 only, at their start timestamp. docs/protocol.md gives the reasoning.
//
// Thread rules: used only by the coroutine that owns the Txn, on its worker's thread.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "pond/cluster.h"
#include "pond/lock/lock_client.h"
#include "pond/store/hash_index.h"
#include "pond/txn/worker_context.h"

namespace pond::txn {

enum class Access : uint8_t { kRead, kWrite, kInsert, kDelete };

// Limits on the waits and retries of one Execute.
inline constexpr int kReadAttemptsMax = 8;        // re-reads after a torn CVT or record
inline constexpr int kInvisibleWaitsMax = 20000;  // re-reads while a cell is INVISIBLE
inline constexpr uint64_t kInvisibleWaitNs = 1000;

struct Item {
  lock::LockKey lk;
  const store::TableInfo* table = nullptr;
  Access access = Access::kRead;
  bool executed = false;
  bool locked = false;  // holds a lock on lk (read or write)

  // What Execute found.
  bool have_slot = false;  // the key has a CVT in the index
  store::SlotRef ref;
  store::Cvt cvt;      // the primary's CVT as read (or cached)
  int read_cell = -1;  // the version read; -1 if the key does not exist at the snapshot
  std::vector<std::byte> value;

  // What Commit writes.
  bool dirty = false;
  std::vector<std::byte> new_value;
  int write_cell = -1;
  store::Cell new_cell;  // the primary's new cell
  std::vector<std::byte> record_buf;
  std::array<store::CvtCell, store::kReplicationMax> raw_cells;
  uint64_t live_meta = 0;

  bool exists() const { return read_cell >= 0; }
};

class TxnState {
 public:
  TxnState(WorkerContext& w, TxnKind kind);
  ~TxnState();

  void Add(uint16_t table, uint64_t key, Access access, std::span<const std::byte> value = {});
  Task<Status> Execute();
  Result<std::span<const std::byte>> Read(uint16_t table, uint64_t key) const;
  Status Write(uint16_t table, uint64_t key, std::span<const std::byte> value);
  Task<Status> Commit();
  void Abort();

  TxnKind kind() const { return kind_; }
  uint64_t start_ts() const { return start_ts_; }
  uint64_t commit_ts() const { return commit_ts_; }

 private:
  Item* Find(uint16_t table, uint64_t key);
  const Item* Find(uint16_t table, uint64_t key) const;
  bool LocalShard(const Item& it) const;
  Status Fail(Status s, uint64_t* counter);  // aborts, counts, and passes `s` on
  Task<Status> Lock(std::vector<size_t>& todo);
  Task<Status> ReadItems(std::vector<size_t> todo);
  Status ChooseVersion(Item& it);
  Task<Status> WriteInvisible(std::vector<size_t>& writes);

  WorkerContext& w_;
  TxnKind kind_;
  Isolation isolation_;
  lock::LockOwner owner_;
  uint64_t start_ts_ = 0;
  uint64_t commit_ts_ = 0;
  bool finished_ = false;
  std::vector<Item> items_;
  std::vector<lock::LockRequest> held_;
  std::vector<std::byte> log_buf_;
};

}  // namespace pond::txn
