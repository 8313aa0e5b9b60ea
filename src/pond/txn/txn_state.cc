#include "pond/txn/txn_state.h"

#include "pond/base/assert.h"
#include "pond/base/node_set.h"
#include "pond/txn/mvcc_txn.h"
#include "pond/txn/ordered.h"
#include "pond/txn/sv_txn.h"

namespace pond::txn {

std::shared_ptr<TxnState> NewTxnState(TxnContext& w, TxnKind kind) {
  if (w.config().protocol.single_version) return std::make_shared<SvTxn>(w, kind);
  return std::make_shared<MvccTxn>(w, kind);
}

TxnState::TxnState(TxnContext& w, TxnKind kind)
    : w_(w), kind_(kind), isolation_(w.config().isolation), begin_ns_(w.clock().NowNs()) {
  owner_ = lock::LockOwner{w.cn_id(), (uint64_t{w.index()} << 48) | w.NextTxnId()};
  w.locks().Start(owner_);
}

TxnState::~TxnState() { EndLocks({}); }

void TxnState::EndLocks(std::span<const lock::LockRequest> held) {
  if (locks_ended_) {
    if (!held.empty()) w_.locks().Release(owner_, held);
    return;
  }
  locks_ended_ = true;
  w_.locks().Finish(owner_, held);
}

Item* TxnState::Find(uint16_t table, uint64_t key) {
  if (items_.size() <= kLinearFindMax) {
    for (auto& it : items_) {
      if (it.lk.table == table && it.lk.key == key) return &it;
    }
    return nullptr;
  }
  // Items are only ever appended, each with a key of its own: index the ones added since.
  for (size_t i = index_.size(); i < items_.size(); i++) {
    index_.emplace(ItemKey{items_[i].lk.table, items_[i].lk.key}, static_cast<uint32_t>(i));
  }
  auto found = index_.find(ItemKey{table, key});
  return found == index_.end() ? nullptr : &items_[found->second];
}

const Item* TxnState::Find(uint16_t table, uint64_t key) const {
  return const_cast<TxnState*>(this)->Find(table, key);
}

Status TxnState::Fail(Status s, RelaxedCounter* counter) {
  if (counter != nullptr) (*counter)++;
  Abort();
  return s;
}

void TxnState::CountCommit() {
  if (kind_ == TxnKind::kReadOnly) {
    w_.stats().committed_read_only++;
  } else {
    w_.stats().committed++;
  }
  w_.stats().RecordCommit(w_.clock().NowNs() - begin_ns_);
}

namespace {

// Raises an item's access; an item already read is read again, under the stronger locks, by the
// next Execute (a promotion), which compares that read with this one.
void Strengthen(Item& it, Access a, bool single_version) {
  if (a <= it.access) return;
  if (it.executed && !it.reread) {
    it.reread = true;
    it.first_exists = it.exists();
    it.first_version = single_version ? it.sv_version : it.read_ts;
  }
  it.executed = false;
  it.access = a;
}

}  // namespace

void TxnState::Add(uint16_t table, uint64_t key, AddOp op, std::span<const std::byte> value) {
  const store::TableInfo* t = w_.Table(table);
  if (t == nullptr) {
    Refuse(InvalidArgument("transaction uses table " + std::to_string(table) +
                           ", which does not exist"));
    return;
  }
  if (kind_ == TxnKind::kReadOnly && op != AddOp::kReadOnly) {
    Refuse(InvalidArgument("a read-only transaction may only read (AddRO)"));
    return;
  }
  if (op == AddOp::kInsert && value.size() != t->value_bytes) {
    Refuse(InvalidArgument("insert of a value whose size does not match the table"));
    return;
  }
  if (t->ordered && (op == AddOp::kInsert || op == AddOp::kDelete)) {
    if (!OrderedKeyAllowed(key)) {
      Refuse(InvalidArgument("an ordered table's keys are 1 to 2^64-2"));
      return;
    }
    AddStripeOf(*t, key);
  }
  const bool sv = protocol().single_version;
  Item* it = Find(table, key);
  if (it == nullptr) {
    items_.emplace_back();
    it = &items_.back();
    it->lk = lock::LockKey::Record(table, key);
    it->table = t;
  }
  switch (op) {
    case AddOp::kReadOnly:
      break;
    case AddOp::kReadWrite:
      Strengthen(*it, Access::kWrite, sv);
      break;
    case AddOp::kDelete:
      Strengthen(*it, Access::kWrite, sv);
      it->pending = Pending::kErase;
      break;
    case AddOp::kInsert:
      if (it->pending == Pending::kPut || (it->executed && it->visible())) {
        // The key exists in this transaction's view.
        Refuse(Status(Code::kAlreadyExists, "insert of a key that exists"));
        break;
      }
      // Unread and untouched, the key must turn out absent; deleted by this transaction, it is
      // absent in its view whatever storage holds.
      if (!it->executed && it->pending == Pending::kNone) it->expect_absent = true;
      // A key read with a slot (present, or a tombstone) is written in that slot under its write
      // lock; any other may need a new slot, and so the bucket's insert lock.
      Strengthen(*it, it->executed && it->have_slot ? Access::kWrite : Access::kInsert, sv);
      it->pending = Pending::kPut;
      it->new_value.assign(value.begin(), value.end());
      it->index_pending = t->ordered;
      any_index_pending_ = any_index_pending_ || t->ordered;
      break;
  }
}

void TxnState::Refuse(Status s) {
  if (deferred_.ok()) deferred_ = std::move(s);
}

Status TxnState::FailDeferred() {
  return Fail(deferred_, deferred_.code() == Code::kAlreadyExists ? &w_.stats().aborts.duplicate_key
                                                                  : &w_.stats().aborts.user);
}

Status TxnState::BeginExecute() {
  if (finished_) return InvalidArgument("transaction already finished");
  if (!deferred_.ok()) return FailDeferred();
  return Status::Ok();
}

Status TxnState::CheckRead(Item& it) {
  if (it.reread) {
    it.reread = false;
    const uint64_t version = protocol().single_version ? it.sv_version : it.read_ts;
    if (it.exists() != it.first_exists || version != it.first_version) {
      return Fail(Aborted("changed since read"), &w_.stats().aborts.validation);
    }
  }
  if (it.expect_absent && it.exists()) {
    return Fail(Status(Code::kAlreadyExists, "insert of a present key"),
                &w_.stats().aborts.duplicate_key);
  }
  return Status::Ok();
}

std::vector<size_t> TxnState::Unexecuted() const {
  std::vector<size_t> todo;
  for (size_t i = 0; i < items_.size(); i++) {
    if (!items_[i].executed) todo.push_back(i);
  }
  return todo;
}

Status TxnState::CheckCommittable() {
  if (finished_) return InvalidArgument("transaction already finished");
  if (!deferred_.ok()) return FailDeferred();
  for (const auto& it : items_) {
    if (!it.executed) {
      return Fail(InvalidArgument("commit before Execute of every key"), &w_.stats().aborts.user);
    }
  }
  return Status::Ok();
}

std::vector<size_t> TxnState::Writes() const {
  std::vector<size_t> writes;
  for (size_t i = 0; i < items_.size(); i++) {
    const Item& it = items_[i];
    if (it.access == Access::kRead) continue;
    if (it.pending == Pending::kPut || (it.pending == Pending::kErase && it.exists())) {
      writes.push_back(i);
    }
  }
  return writes;
}

std::vector<size_t> TxnState::Unprotected() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < items_.size(); i++) {
    if (!items_[i].locked && !items_[i].bucket_locked) out.push_back(i);
  }
  return out;
}

Result<std::span<const std::byte>> TxnState::Read(uint16_t table, uint64_t key) const {
  const Item* it = Find(table, key);
  if (it == nullptr || !it->executed) {
    return InvalidArgument("key was not added and executed in this transaction");
  }
  switch (it->pending) {
    case Pending::kPut:
      return std::span<const std::byte>(it->new_value);
    case Pending::kErase:
      return NotFound("deleted in this transaction");
    case Pending::kNone:
      break;
  }
  if (!it->exists()) return NotFound("key does not exist");
  return std::span<const std::byte>(it->value);
}

Status TxnState::Write(uint16_t table, uint64_t key, std::span<const std::byte> value) {
  Item* it = Find(table, key);
  if (it == nullptr || !it->executed || it->access == Access::kRead) {
    return InvalidArgument("write of a key not added read-write and executed");
  }
  if (value.size() != it->table->value_bytes) {
    return InvalidArgument("value size does not match the table");
  }
  if (!it->visible()) return NotFound("write of a key that does not exist (use Insert)");
  it->pending = Pending::kPut;
  it->new_value.assign(value.begin(), value.end());
  return Status::Ok();
}

uint64_t TxnState::OwnerWord() const { return store::LockOwnerWord(owner_.cn, owner_.txn_id); }

GAddr TxnState::BucketLockWord(const Item& it) const {
  POND_ASSERT(it.lock_rep_pinned);
  return it.table->BucketAddr(w_.placement().Replica(it.lk.key, it.lock_rep), it.lock_rep,
                              store::HomeBucket(*it.table, it.lk.key)) +
         offsetof(store::CvtHeader, lock);
}

Status TxnState::PinLockReplica(Item& it) {
  const int rep = w_.placement().LockReplica(it.lk.key);
  if (rep < 0)
    return Unavailable("the key's lock words are changing hands (an MN left or rejoins)");
  if (it.lock_rep_pinned && rep != it.lock_rep) return Unavailable("the key's lock words moved");
  it.lock_rep = rep;
  it.lock_rep_pinned = true;
  return Status::Ok();
}

namespace {

const uint64_t kFreeLockWord = 0;

// Makes sure the words an aborted transaction held (`held`, released by WRITE 0 already: see
// ReleaseMnLocksDetached) or may hold (`unknown`: a CAS its MN did not answer) are free. A host
// cut can swallow a release as well as the acknowledgement of a CAS, and an MN beyond it is not
// declared if the link comes back first: its words would stay taken for good. So each is freed
// by CAS (`owner` -> 0, never a later holder's) in a flush of this task's own, which says
// whether its MN answered, and again every kPostAgainEveryNs while it does not, until it
// answers or leaves, when its words are lost with it (it comes back blank: docs/recovery.md
// "Host cuts under lock words on MNs").
Task<void> ReleaseWords(TxnContext* w, std::vector<GAddr> words, uint64_t owner) {
  Endpoint& ep = w->ep();
  uint64_t silent = ~uint64_t{0};
  while (true) {
    for (GAddr a : words) ep.Cas(a, owner, 0, w->discard_word());
    Endpoint::FlushResult r = co_await ep.FlushReporting();
    POND_CHECK_MSG(r.status.ok() || r.status.code() == Code::kUnavailable,
                   r.status.ToString().c_str());
    const store::Placement& p = w->placement();
    silent &= r.unreachable & ~(p.down_mask() | p.joining_mask() | p.leaving_mask());
    std::erase_if(words, [silent](GAddr a) { return !MaskHas(silent, a.mn()); });
    if (words.empty()) co_return;
    co_await w->sched().SleepFor(kPostAgainEveryNs);
  }
}

}  // namespace

Status TxnState::FailUnreachable(const Status& s) {
  POND_CHECK_MSG(s.code() == Code::kUnavailable, s.ToString().c_str());
  return Fail(AbortedBecause("MN unreachable"), &w_.stats().aborts.mn_unreachable);
}

void TxnState::BeginRound() {
  if (w_.ep().Keeping(&round_)) return;
  w_.ep().KeepWrites(&round_);
  released_.clear();
}

Task<void> TxnState::CommitFlush() {
  Endpoint::FlushResult r = co_await w_.ep().FlushReporting();
  w_.ep().StopKeeping(&round_);
  // Its releases are never posted again as they were (BeginRound): see below.
  std::erase_if(round_, [](const Op& op) { return op.local == &kFreeLockWord; });
  if (r.unreachable == 0 || r.status.code() != Code::kUnavailable) {
    CheckOk(r.status);  // anything but an MN that did not answer is a bug
    round_.clear();
    released_.clear();
    co_return;
  }
  // Nothing is acknowledged and no lock goes free until the MNs that did not answer are
  // declared down: then every replica a reader may use has the writes (Placement::ReadReplica).
  // One that is rejoining is not read either: it is read only once a copy taken under this
  // transaction's locks — after it ends — is there (docs/recovery.md "MN restart").
  // Or until they answer the round posted again: one beyond a link that was down for less than
  // it takes to declare it is not declared at all (docs/recovery.md "Partitions and fencing").
  const store::Placement& placement = w_.placement();
  const uint64_t self = OwnerWord();
  uint64_t waited_ns = 0;
  while (true) {
    const uint64_t silent = r.unreachable & ~(placement.down_mask() | placement.joining_mask());
    if (silent == 0) break;
    if ((round_.empty() && released_.empty()) || waited_ns < kPostAgainEveryNs) {
      co_await w_.sched().SleepFor(kUnreachablePollNs);
      waited_ns += kUnreachablePollNs;
      continue;
    }
    waited_ns = 0;
    // A round that frees MN lock words: a batch to one MN keeps posting order, and the words go
    // last, so one word of an MN found no longer this transaction's says its release landed,
    // and everything before it in that batch too. To such an MN only the releases are posted
    // again; to one where every word is still this transaction's, the whole round — nobody but
    // it can have written those keys. Either way a release goes again as a CAS (ours -> 0), which
    // cannot free a later holder's word.
    uint64_t answered = silent, landed = 0;
    if (!released_.empty()) {
      std::vector<uint64_t> seen(released_.size(), self);
      for (size_t k = 0; k < released_.size(); k++) {
        if ((silent >> released_[k].mn()) & 1) {
          w_.ep().Read(released_[k], &seen[k], sizeof(uint64_t));
        }
      }
      Endpoint::FlushResult read = co_await w_.ep().FlushReporting();
      if (read.unreachable == 0 || read.status.code() != Code::kUnavailable) CheckOk(read.status);
      answered &= ~read.unreachable;
      for (size_t k = 0; k < released_.size(); k++) {
        const uint64_t bit = uint64_t{1} << released_[k].mn();
        if ((answered & bit) && seen[k] != self) landed |= bit;
      }
    }
    w_.ep().PostAgain(round_, answered & ~landed);
    for (GAddr a : released_) {
      if (MaskHas(answered, a.mn())) w_.ep().Cas(a, self, 0, w_.discard_word());
    }
    w_.stats().commit_rounds_posted_again++;
    Endpoint::FlushResult again = co_await w_.ep().FlushReporting();
    if (again.unreachable == 0 || again.status.code() != Code::kUnavailable) CheckOk(again.status);
    r.unreachable = again.unreachable | (silent & ~answered);
  }
  round_.clear();
  released_.clear();
}

void TxnState::PostUnlocks() {
  for (GAddr a : mn_held_) w_.ep().Write(a, &kFreeLockWord, sizeof(kFreeLockWord));
  if (w_.ep().Keeping(&round_)) released_.insert(released_.end(), mn_held_.begin(), mn_held_.end());
  mn_held_.clear();
}

void TxnState::ReleaseMnLocksDetached() {
  if (mn_held_.empty() && gone_words_.empty() && mn_unknown_.empty()) return;
  // The CASes' old values go to the worker's discard word: whichever flush carries them may
  // complete after this transaction is gone.
  for (const GoneWord& g : gone_words_) {
    w_.ep().Cas(g.addr, g.word, 0, w_.discard_word());
    w_.stats().gone_lock_words_freed++;
  }
  gone_words_.clear();
  // Posted now, the releases precede whatever this worker posts next (the caller's next
  // transaction, say), so it cannot find these words in its way. Whether they landed only a
  // flush of its own can say: a task frees them again by CAS, with those that may be held.
  std::vector<GAddr> words = mn_held_;
  PostUnlocks();
  words.insert(words.end(), mn_unknown_.begin(), mn_unknown_.end());
  mn_unknown_.clear();
  w_.sched().Spawn(ReleaseWords(&w_, std::move(words), OwnerWord()));
}

}  // namespace pond::txn
