// TxnState: a transaction's working set, and the coordinator flow every protocol shares.
//
// The skeleton (DESIGN.md "The protocol skeleton"): Execute = [start timestamp] -> [lock] ->
// read; Commit = [validate] -> write (invisible + log, or committed) -> [commit timestamp] ->
// [write visible] -> unlock. TxnState holds what every protocol needs — the items, Read/Write,
// abort accounting, MN lock words — and two subclasses fill in the steps:
//
//   MvccTxn (mvcc_read.cc: Execute; mvcc_txn.cc: Commit): lotus, motor and the ablation steps
//     between them, on the CVT store.
//     Lotus (§5): lock-first on CN lock tables (write locks for read-write items, read locks for
//     read-only items under SR); CVT from the VT cache, the address cache or one bucket READ;
//     the newest version older than the start timestamp; commit writes INVISIBLE + log, takes
//     the commit timestamp, writes it visible, unlocks. Motor: CAS on the CVT's lock word on the
//     primary MN in one batch with the CVT READ, read-only items validated at commit.
//   SvTxn (sv_txn.cc): ford, single-version records in the buckets, CAS lock + READ batched,
//     validation of read-only items, undo log before the in-place update.
//
// docs/protocols.md gives round trips and ops per transaction for each; docs/protocol.md the
// correctness argument for lotus.
//
// Items (one per key a transaction added): `access` says which locks Execute takes, `pending`
// what Commit writes, and Read answers from the pending write before the value read. Adding a key
// again only ever strengthens its access; an item read before that is read again by the next
// Execute (see Item::reread). docs/api.md lists what each call does to a key already added.
//
// Thread rules: used only by the coroutine that owns the Txn, on its worker's thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "pond/base/assert.h"
#include "pond/cluster.h"
#include "pond/lock/lock_client.h"
#include "pond/store/hash_index.h"
#include "pond/store/placement.h"
#include "pond/txn/txn_context.h"

namespace pond::txn {

// What a transaction needs of a key, weakest first; Execute takes the locks it names. kRead:
// nothing (a read lock under lotus SR); kWrite: the key's write lock; kInsert: that and the insert
// lock of the key's home index bucket, because Commit may create the key (claim a slot).
enum class Access : uint8_t { kRead, kWrite, kInsert };
// What Commit will do to a key, which is also what Read returns meanwhile (read-your-writes).
enum class Pending : uint8_t { kNone, kPut, kErase };
// The public calls that add a key (Txn::AddRO, AddRW, Insert, Delete).
enum class AddOp : uint8_t { kReadOnly, kReadWrite, kInsert, kDelete };

// Aborts carry short fixed messages: they are frequent under contention, and a message that
// fits std::string's inline buffer costs no allocation.
inline Status AbortedBecause(const char* why) { return Aborted(why); }
// One-sided operations on Pond's own memory regions cannot fail on the transports Pond has; a
// failure is a bug (transport faults, when they come, will be handled where they happen).
inline void CheckOk(const Status& s) { POND_CHECK_MSG(s.ok(), s.ToString().c_str()); }

// Limits on the waits and retries of one Execute.
inline constexpr int kReadAttemptsMax = 8;        // re-reads after a torn CVT or record
inline constexpr int kInvisibleWaitsMax = 20000;  // re-reads while a cell is INVISIBLE
inline constexpr uint64_t kInvisibleWaitNs = 1000;
using store::kPostAgainEveryNs;
using store::kUnreachablePollNs;
// How often a commit held before write-visible looks again (a rejoining MN turning readable
// waits only for the commits already between their rounds: a few microseconds).
inline constexpr uint64_t kVisibleGatePollNs = 1'000;

struct Item {
  lock::LockKey lk;
  const store::TableInfo* table = nullptr;
  Access access = Access::kRead;
  Pending pending = Pending::kNone;
  bool expect_absent = false;  // an Insert: Execute fails with kAlreadyExists if the key exists
  bool executed = false;
  // Promoted after it was read (needs stronger locks): the next Execute reads it again, under
  // the new locks, and aborts if that read differs from the first (docs/protocol.md, Promotion).
  bool reread = false;
  bool first_exists = false;
  uint64_t first_version = 0;  // read_ts (mvcc) or sv_version (single-version) of the first read
  // Ordered tables: an Insert whose key is not in the table's B+Tree yet; put there by the
  // Execute that finds the key absent (docs/protocol.md "Ordered tables and range scans").
  bool index_pending = false;
  bool locked = false;  // holds a lock on lk (read or write; on a CN or an MN)
  // MN lock words: the replica that holds the key's words and serves its reads and validation,
  // fixed at the item's first access (TxnState::PinLockReplica). 0, the primary, under lotus.
  int lock_rep = 0;
  bool lock_rep_pinned = false;
  bool bucket_locked = false;  // MN-lock protocols: holds the insert lock of the home bucket

  // What Execute found.
  bool have_slot = false;  // the key has a slot in the index
  store::SlotRef ref;
  store::Cvt cvt;           // mvcc: the primary's CVT as read (or cached)
  int read_cell = -1;       // the version read; -1 if the key does not exist at the snapshot
  uint64_t read_ts = 0;     // mvcc: commit timestamp of the version read (0: none)
  uint64_t sv_version = 0;  // single-version: the slot's version as read
  std::vector<std::byte> value;

  // What Commit writes.
  std::vector<std::byte> new_value;  // pending == kPut
  int write_cell = -1;
  int visible_read_rep = 0;  // the replica readers used at the first write-visible round
  // The replicas (bit r: replica index r) the write-invisible round reached; write-visible
  // goes to these only (MvccTxn::PostVisible).
  uint32_t invisible_reps = 0;
  store::Cell new_cell;  // the primary's new cell
  std::vector<std::byte> record_buf;
  std::array<store::CvtCell, store::kReplicationMax> raw_cells;
  uint64_t live_meta = 0;

  bool exists() const { return read_cell >= 0; }  // in storage, at the snapshot read
  // Whether the key exists in this transaction's view: as read, then changed by its own writes.
  bool visible() const {
    return pending == Pending::kPut || (pending == Pending::kNone && exists());
  }
};

class TxnState : public std::enable_shared_from_this<TxnState> {
 public:
  TxnState(TxnContext& w, TxnKind kind);
  // Ends the transaction at the lock client if Commit or Abort has not (see EndLocks).
  virtual ~TxnState();

  void Add(uint16_t table, uint64_t key, AddOp op, std::span<const std::byte> value = {});
  // Txn::Execute: the protocol's Execute, then what ordered tables add (ordered.cc): the stripe
  // rows of inserts and deletes written, new keys entered into the B+Tree.
  Task<Status> ExecuteAll();
  // Txn::Scan (ordered.cc).
  Task<Result<std::vector<ScanRow>>> Scan(uint16_t table, uint64_t low, uint64_t high, size_t limit,
                                          ScanOrder order);
  // The protocol's own Execute: locks and reads every key added since the last one.
  virtual Task<Status> Execute() = 0;
  Result<std::span<const std::byte>> Read(uint16_t table, uint64_t key) const;
  Status Write(uint16_t table, uint64_t key, std::span<const std::byte> value);
  virtual Task<Status> Commit() = 0;
  virtual void Abort() = 0;

  // `answered_early` is where its session keeps the transaction it saw answered early last. Such
  // a commit (ProtocolConfig::early_ack) keeps its locks until it has published; the session's
  // next transactions would find their own client's last write locked and abort, so they wait
  // instead, if they execute a key it wrote (a client's dependent writes, back to back). A
  // transaction answered early puts itself there.
  void After(std::shared_ptr<std::weak_ptr<TxnState>> answered_early) {
    answered_early_ = std::move(answered_early);
  }
  // Answered, and still publishing and unlocking (early_ack).
  virtual bool publishing() const { return false; }

  TxnKind kind() const { return kind_; }
  uint64_t start_ts() const { return start_ts_; }
  uint64_t commit_ts() const { return commit_ts_; }

 protected:
  Item* Find(uint16_t table, uint64_t key);
  const Item* Find(uint16_t table, uint64_t key) const;
  Status Fail(Status s, RelaxedCounter* counter);  // aborts, counts, and passes `s` on
  // Counts a commit, read-only or not, and its latency since Begin.
  void CountCommit();
  // A call that cannot be carried out (misuse, or an Insert of a key this transaction sees):
  // the next Execute or Commit aborts the transaction with `s` (the first one refused).
  void Refuse(Status s);
  // An Insert or Delete of `key` in ordered table `t`: its stripe row joins the read-write set.
  void AddStripeOf(const store::TableInfo& t, uint64_t key);
  // Inserts into the B+Trees the keys of executed Inserts not there yet.
  Task<Status> IndexInserts();
  // Whether some of `writes` deletes a key of an ordered table that existed.
  bool DeletesIndexedKeys(const std::vector<size_t>& writes) const;
  // Takes the entries of the keys `writes` deleted out of their trees, stamping each leaf with
  // `removed_at`, the commit's timestamp (docs/btree.md "The tree cleans itself"). Called once
  // the commit can no longer be undone (recovery of this CN would finish it) and while the
  // keys' locks are still held, so that no insert of one of them is between its tree entry and
  // its commit. An entry that cannot be removed now stays: the tree is a superset index.
  Task<void> UnindexDeletes(const std::vector<size_t>& writes, uint64_t removed_at);
  Status FailDeferred();
  // Waits until the session's transaction answered early last has published, if it has not and
  // it wrote a key this one has (After).
  Task<void> AwaitPredecessor();
  // What every Execute checks first: the transaction is open and nothing was refused.
  Status BeginExecute();
  // After an item was read: a promoted item's second read must match its first (else abort);
  // an Insert's key must be absent.
  Status CheckRead(Item& it);
  // Commit's first check: as BeginExecute, and every key executed (else the transaction aborts).
  Status CheckCommittable();
  std::vector<size_t> Unexecuted() const;
  // Indexes of the items Commit must write: puts, and erases of keys that exist.
  std::vector<size_t> Writes() const;
  // Which replicas of a key a commit step writes: the backups first, then the primary in the
  // batch that frees its lock word (PostUnlocks). "The primary" is the replica that holds the
  // item's lock words (Item::lock_rep): replica 0 unless an MN is down.
  enum class Replicas : uint8_t { kAll, kBackups, kPrimary };
  static bool Includes(Replicas which, const Item& it, int replica) {
    return which == Replicas::kAll || (replica == it.lock_rep) == (which == Replicas::kPrimary);
  }
  // MN lock words: pins `it` to the replica that holds its words now (Placement::LockReplica).
  // Unavailable while they change hands between replicas, or if they did since the item's
  // first access: the transaction aborts as on an MN that did not answer.
  Status PinLockReplica(Item& it);
  // Items whose read no lock protects until commit (motor and ford validate them).
  std::vector<size_t> Unprotected() const;
  const ProtocolConfig& protocol() const { return w_.config().protocol; }
  // latest_reads: whether the Execute about to read `todo` (no start timestamp taken yet) may
  // read the newest versions instead of a snapshot (docs/protocol.md "Reading the newest"): a
  // read-write transaction under SR, which locks every key it reads (CN locks), and a read-only
  // transaction's first Execute of a single key, which is a snapshot of its own.
  bool MayReadLatest(const std::vector<size_t>& todo) const {
    if (!protocol().latest_reads) return false;
    if (kind_ == TxnKind::kReadWrite) return isolation_ == Isolation::kSerializable;
    return todo.size() == 1 && items_.size() == 1;
  }

  // A read batch an MN did not answer: the transaction aborts (it retries in the new epoch).
  Status FailUnreachable(const Status& s);
  // A commit batch: every MN up has it once this returns. One that did not answer is waited out
  // until it is declared down; the replicas up then hold the transaction's writes. The WRITEs
  // posted since BeginRound are posted again to it meanwhile, and once it answers them this
  // returns too.
  Task<void> CommitFlush();
  // The round posted from here to the next CommitFlush may be posted again: it writes only what
  // this transaction holds locked. With MN lock words a round may also release them (WRITE 0,
  // PostUnlocks): posted again blindly that could free a later holder's word, so CommitFlush
  // first reads the words on the MNs still silent (ReleasedElsewhere). A no-op while a round is
  // already being kept.
  void BeginRound();
  // MN lock words (motor, ford). The word a holder stores: never 0, unique per transaction.
  uint64_t OwnerWord() const;
  // Whether lock word value `word`, READ after `gone_at` (TxnContext::gone_generation) was
  // taken, keeps this transaction out: taken, not by it, and not by a CN incarnation that had
  // failed and been recovered before that (whose words are free: TxnContext::HolderGone). A
  // holder recovered since may have been mid-commit when the READ landed, and what it read
  // beside the word then predates the recovery: the word counts as held, and a retry reads anew.
  // (HolderGone is asked first: see store/gone_holders.h for why the order matters.)
  bool HeldByOther(uint64_t word, uint64_t gone_at) const {
    if (word == 0 || word == OwnerWord()) return false;
    return !(w_.HolderGone(word) && w_.gone_generation() == gone_at);
  }
  // A refused CAS on `addr` found `word`, of a recovered incarnation: the word is freed (CAS
  // word -> 0) with this transaction's unlocks, so that the retry takes it.
  void FreeGoneWord(GAddr addr, uint64_t word) { gone_words_.push_back({addr, word}); }
  // The insert lock of a key's home bucket: the lock word of the bucket's slot 0 on the
  // replica that holds the key's words (pinned). Sharing it with that slot's own lock only adds
  // conflicts, never removes one.
  GAddr BucketLockWord(const Item& it) const;
  // Posts WRITE 0 to every held lock word (after whatever the caller posted to the same MN).
  // The rule every caller keeps (docs/protocols.md "Replica order"): a lock word goes free only
  // once every replica's write of its key is complete. A batch to one MN keeps posting order and
  // batches to two MNs do not, so at the call the only writes still pending are to the lock
  // word's own MN — the key's primary — and every other replica's were flushed before.
  void PostUnlocks();
  // Releases held MN lock words without awaiting (Abort cannot): posts them and flushes from a
  // task of their own.
  void ReleaseMnLocksDetached();
  // Releases `held` CN locks and, the first time, ends the transaction at the lock client
  // (LockClient::Finish): the CNs it asked for locks then refuse late copies of its requests.
  void EndLocks(std::span<const lock::LockRequest> held);

  TxnContext& w_;
  TxnKind kind_;
  Isolation isolation_;
  lock::LockOwner owner_;
  uint64_t begin_ns_;  // by the worker's clock, for the commit latency
  uint64_t start_ts_ = 0;
  // Reads choose the newest version (MayReadLatest), not the newest below start_ts_.
  bool reads_latest_ = false;
  std::shared_ptr<std::weak_ptr<TxnState>> answered_early_;  // see After
  uint64_t commit_ts_ = 0;
  bool finished_ = false;
  bool locks_ended_ = false;  // see EndLocks
  Status deferred_;           // see Refuse
  std::vector<Item> items_;
  std::vector<GAddr> mn_held_;  // MN lock words this transaction holds
  // Lock words whose CAS an MN did not answer: taken or not, nobody knows. Released by CAS
  // (ours -> 0) with the rest, until their MN answers or leaves (ReleaseMnLocksDetached).
  std::vector<GAddr> mn_unknown_;
  std::vector<GAddr> released_;  // the words the round being kept frees (PostUnlocks)
  std::vector<Op> round_;        // BeginRound: the WRITEs CommitFlush may post again
  struct GoneWord {
    GAddr addr;
    uint64_t word;
  };
  std::vector<GoneWord> gone_words_;  // see FreeGoneWord
  // Stripe rows this transaction's inserts and deletes write; `written` once its Write (or
  // Insert, for a stripe with no row yet) is posted.
  struct StripeRow {
    uint16_t table;
    uint64_t key;
    bool written;
  };
  std::vector<StripeRow> stripes_;
  bool any_index_pending_ = false;  // some item may have index_pending (most have none)
  // Find looks through a few items in turn, and through this index of them past that (a scan
  // adds every key it finds).
  static constexpr size_t kLinearFindMax = 32;
  struct ItemKey {
    uint16_t table;
    uint64_t key;
    bool operator==(const ItemKey&) const = default;
  };
  struct ItemKeyHash {
    size_t operator()(const ItemKey& k) const {
      return std::hash<uint64_t>()(k.key * 0x9e3779b97f4a7c15 ^ k.table);
    }
  };
  mutable std::unordered_map<ItemKey, uint32_t, ItemKeyHash> index_;  // position in items_
};

// The transaction object of the cluster's protocol. Shared: a commit answered early
// (ProtocolConfig::early_ack) keeps it alive in a task of its own until it has unlocked.
std::shared_ptr<TxnState> NewTxnState(TxnContext& w, TxnKind kind);

}  // namespace pond::txn
