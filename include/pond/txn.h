// Txn: one transaction, in the Lotus interface (Lotus §7.3): add keys to the read-only and
// read-write sets, Execute (lock, then read), use the values, Commit.
//
//   Txn t = session.Begin(TxnKind::kReadWrite);
//   t.AddRW(accounts, from);
//   t.AddRW(accounts, to);
//   if (Status s = co_await t.Execute(); !s.ok()) co_return s;   // aborted: locks released
//   ... t.Read(accounts, from) ... t.Write(accounts, from, new_value) ...
//   co_return co_await t.Commit();
//
// Execute may be called again after adding more keys (e.g. keys computed from values read).
// Every failure after Begin is an abort: the Status has code kAborted (or kAlreadyExists for an
// insert of a present key) and the transaction holds no locks afterwards. A Txn dropped without
// Commit aborts.
//
// A key may be added more than once; the calls compose as they read (docs/api.md, "Keys added
// more than once"). Read always returns what this transaction would leave: its own Write or
// Insert, NotFound after its Delete. A key read and then added again with stronger intent
// (AddRO, then AddRW, Insert or Delete) is promoted: the next Execute locks it and reads it again,
// and aborts if it changed since the first read; until then Read of it returns InvalidArgument.
//
// Read-only transactions (TxnKind::kReadOnly) take no locks: they read the snapshot at their
// start timestamp, and AddRW, Write, Insert and Delete are refused.
//
// Misuse is refused, never fatal: a call that returns a Status says so at once (Write,
// Read: InvalidArgument); one that returns nothing (AddRO, AddRW, Insert, Delete — a read-only
// transaction's AddRW, a table that does not exist, an Insert whose value has the wrong size)
// makes the next Execute or Commit abort the transaction with InvalidArgument.
//
// Thread rules: a Txn belongs to the coroutine that began it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "pond/status.h"
#include "pond/task.h"

namespace pond {

enum class TxnKind : uint8_t { kReadWrite, kReadOnly };
enum class ScanOrder : uint8_t { kAscending, kDescending };

// A key a Scan found, with its value in this transaction's view.
struct ScanRow {
  uint64_t key = 0;
  std::vector<std::byte> value;
};

namespace txn {
class TxnState;
}

class Txn {
 public:
  Txn(Txn&&) noexcept;
  Txn& operator=(Txn&&) noexcept;
  ~Txn();

  // Keys to read only / to read and possibly write. A key added twice is one item; a key in both
  // sets is read-write.
  void AddRO(uint16_t table, uint64_t key);
  void AddRW(uint16_t table, uint64_t key);
  // A new key with its value; the next Execute fails with kAlreadyExists if the key exists in
  // this transaction's view (as read, or written by it). After this transaction's own Delete of
  // the key, an Insert sets it again.
  void Insert(uint16_t table, uint64_t key, std::span<const std::byte> value);
  // Removes a key (read-write); Execute finds whether it exists. A Delete of a key this
  // transaction inserted undoes the insert.
  void Delete(uint16_t table, uint64_t key);

  // Locks (read-write transactions) and reads every key added since the last Execute.
  Task<Status> Execute();

  // The value read for a key: NotFound if the key does not exist in this transaction's snapshot
  // (or was deleted by it), InvalidArgument if the key was not added and executed.
  Result<std::span<const std::byte>> Read(uint16_t table, uint64_t key) const;
  // Sets the new value of a read-write key (after Execute), including one this transaction
  // inserted; NotFound if the key does not exist in this transaction's view (use Insert).
  Status Write(uint16_t table, uint64_t key, std::span<const std::byte> value);

  // The keys of ordered table `table` with low <= key < high that exist in this transaction's
  // view, with their values: at most `limit`, the lowest (kAscending) or the highest
  // (kDescending), in that order. It executes every key added so far first, as Execute does, and
  // adds each key it returns as read-only (Read answers for it). Under SR a read-write
  // transaction's range is protected until commit: a transaction that inserts or deletes a key
  // in it is ordered before or after this one, never both (no phantoms). Under SI, and in
  // read-only transactions, the scan reads the snapshot. On a table with a critical field, low
  // and high must be in one shard, and the range is that shard's keys whose bits above the shard
  // are between low's (included) and high's (excluded); the key after k there is k + 4096. Keys
  // deleted since the table was made still cost a scan a read each (docs/btree.md). A failure
  // aborts, as Execute's does; misuse (a table that is not ordered, low >= high) is InvalidArgument
  // and aborts too.
  Task<Result<std::vector<ScanRow>>> Scan(uint16_t table, uint64_t low, uint64_t high, size_t limit,
                                          ScanOrder order = ScanOrder::kAscending);

  // Makes the writes durable on every replica and visible at the commit timestamp, then
  // releases the locks. Read-only transactions just finish.
  Task<Status> Commit();
  // Releases locks and ends the transaction without writing.
  void Abort();

  uint64_t start_ts() const;
  uint64_t commit_ts() const;  // 0 until committed (and always for read-only transactions)

 private:
  friend class Session;
  explicit Txn(std::shared_ptr<txn::TxnState> s);
  std::shared_ptr<txn::TxnState> s_;
};

}  // namespace pond
