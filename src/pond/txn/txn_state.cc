#include "pond/txn/txn_state.h"

#include "pond/base/assert.h"
#include "pond/txn/mvcc_txn.h"
#include "pond/txn/sv_txn.h"

namespace pond::txn {

std::unique_ptr<TxnState> NewTxnState(WorkerContext& w, TxnKind kind) {
  if (w.cluster.config.protocol.single_version) return std::make_unique<SvTxn>(w, kind);
  return std::make_unique<MvccTxn>(w, kind);
}

TxnState::TxnState(WorkerContext& w, TxnKind kind)
    : w_(w), kind_(kind), isolation_(w.cluster.config.isolation) {
  owner_ = lock::LockOwner{w.cn_id(), (uint64_t{w.index} << 48) | w.next_txn_id++};
}

Item* TxnState::Find(uint16_t table, uint64_t key) {
  for (auto& it : items_) {
    if (it.lk.table == table && it.lk.key == key) return &it;
  }
  return nullptr;
}

const Item* TxnState::Find(uint16_t table, uint64_t key) const {
  return const_cast<TxnState*>(this)->Find(table, key);
}

Status TxnState::Fail(Status s, uint64_t* counter) {
  if (counter != nullptr) (*counter)++;
  Abort();
  return s;
}

void TxnState::Add(uint16_t table, uint64_t key, Access access, std::span<const std::byte> value) {
  const store::TableInfo* t = w_.cluster.Table(table);
  POND_CHECK_MSG(t != nullptr, "transaction uses a table that does not exist");
  Item* it = Find(table, key);
  if (it == nullptr) {
    items_.emplace_back();
    it = &items_.back();
    it->lk = lock::LockKey::Record(table, key);
    it->table = t;
    it->access = access;
  } else if (access != Access::kRead && it->access == Access::kRead) {
    // Promoted from read-only to read-write: lock and read it again in the next Execute.
    it->access = access;
    it->executed = false;
  } else if (access != Access::kRead) {
    it->access = access;
  }
  if (access == Access::kInsert) {
    it->new_value.assign(value.begin(), value.end());
    it->dirty = true;
  }
}

std::vector<size_t> TxnState::Unexecuted() const {
  std::vector<size_t> todo;
  for (size_t i = 0; i < items_.size(); i++) {
    if (!items_[i].executed) todo.push_back(i);
  }
  return todo;
}

Status TxnState::CheckCommittable() const {
  if (finished_) return InvalidArgument("transaction already finished");
  for (const auto& it : items_) {
    if (!it.executed) return InvalidArgument("commit before Execute of every key");
  }
  return Status::Ok();
}

std::vector<size_t> TxnState::Writes() const {
  std::vector<size_t> writes;
  for (size_t i = 0; i < items_.size(); i++) {
    const Item& it = items_[i];
    if ((it.access == Access::kWrite && it.dirty) || it.access == Access::kInsert ||
        (it.access == Access::kDelete && it.exists())) {
      writes.push_back(i);
    }
  }
  return writes;
}

Result<std::span<const std::byte>> TxnState::Read(uint16_t table, uint64_t key) const {
  const Item* it = Find(table, key);
  if (it == nullptr || !it->executed) {
    return InvalidArgument("key was not added and executed in this transaction");
  }
  if (it->dirty) {
    if (it->access == Access::kDelete) return NotFound("deleted in this transaction");
    return std::span<const std::byte>(it->new_value);
  }
  if (!it->exists()) return NotFound("key does not exist");
  return std::span<const std::byte>(it->value);
}

Status TxnState::Write(uint16_t table, uint64_t key, std::span<const std::byte> value) {
  Item* it = Find(table, key);
  if (it == nullptr || !it->executed || it->access == Access::kRead) {
    return InvalidArgument("write of a key not added read-write and executed");
  }
  if (it->access == Access::kDelete) return InvalidArgument("write of a key being deleted");
  if (value.size() != it->table->value_bytes) {
    return InvalidArgument("value size does not match the table");
  }
  if (it->access == Access::kWrite && !it->exists()) {
    return NotFound("write of a key that does not exist (use Insert)");
  }
  it->new_value.assign(value.begin(), value.end());
  it->dirty = true;
  return Status::Ok();
}

uint64_t TxnState::OwnerWord() const {
  // CN ids are below 64 and txn ids below 2^54 (worker index << 48 | counter), so the word is
  // unique per transaction and never 0.
  return (uint64_t{owner_.cn} + 1) << 56 | (owner_.txn_id & ((uint64_t{1} << 56) - 1));
}

GAddr TxnState::BucketLockWord(const Item& it) const {
  return it.table->BucketAddr(w_.cluster.placement.Primary(it.lk.key), 0,
                              store::HomeBucket(*it.table, it.lk.key)) +
         offsetof(store::CvtHeader, lock);
}

namespace {

const uint64_t kFreeLockWord = 0;

Task<void> FlushPosted(Endpoint* ep) {
  Status s = co_await ep->Flush();
  POND_CHECK_MSG(s.ok(), s.ToString().c_str());
}

}  // namespace

void TxnState::PostUnlocks() {
  for (GAddr a : mn_held_) w_.ep->Write(a, &kFreeLockWord, sizeof(kFreeLockWord));
  mn_held_.clear();
}

void TxnState::ReleaseMnLocksDetached() {
  if (mn_held_.empty()) return;
  // Posted now, the unlocks precede whatever this worker posts next (the caller's next
  // transaction, say), so it cannot find its own old locks in its way; the task makes sure they
  // leave even if no coroutine of this worker flushes again soon.
  PostUnlocks();
  w_.sched.Spawn(FlushPosted(w_.ep.get()));
}

}  // namespace pond::txn
