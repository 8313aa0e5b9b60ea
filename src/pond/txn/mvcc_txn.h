// MvccTxn: lotus, motor, and the Lotus ablation steps between them, on the CVT store.
//
// One flow with the ProtocolConfig switches as its hooks:
//   cn_locks           lock-first on CN lock tables (lotus), or CAS on the CVT lock word on the
//                      primary MN in the same doorbell batch as the CVT READ (motor); then the
//                      commit timestamp comes first, read-only items of read-write transactions
//                      are validated (SR) before anything is written, and readers treat a taken
//                      lock word as lotus readers treat INVISIBLE;
//   log_and_visible    write INVISIBLE + commit log, then write visible (lotus), or write
//                      committed cells directly, behind a record of them (motor);
//   full_record_store  one READ/WRITE per version (lotus), or two (motor's value + delta);
//   vt_cache           serve locally managed CVTs from the VT cache;
//   latest_reads       read-write transactions under SR read the newest versions, with no start
//                      timestamp (pond);
//   early_ack          answer once the backups have the commit timestamp (pond).
// hybrid_routing acts in Session::Call, not here.
#pragma once

#include "pond/txn/txn_state.h"

namespace pond::txn {

class MvccTxn final : public TxnState {
 public:
  MvccTxn(TxnContext& w, TxnKind kind) : TxnState(w, kind) {}
  ~MvccTxn() override;

  Task<Status> Execute() override;
  Task<Status> Commit() override;
  void Abort() override;
  bool publishing() const override { return tail_; }

 private:
  // Whether this CN's VT cache covers the item's key: this CN manages the key's shard.
  bool LocalShard(const Item& it) const;
  bool MnLocks() const { return kind_ == TxnKind::kReadWrite && !protocol().cn_locks; }
  cache::VtCache* vt() const { return protocol().vt_cache ? w_.vt_cache() : nullptr; }
  Task<Status> LockOnCns(std::vector<size_t>& todo);
  // What one Execute's reads keep per item, across rounds.
  struct ItemRead {
    std::vector<std::byte> buf;  // the CVT, home bucket or record as READ
    GAddr cas_word;              // the lock word CASed this round, if cas_posted
    uint64_t cas_old = 0;
    uint64_t lock_seen = 0;     // a lock word READ by itself before the CVT or bucket
    bool whole_bucket = false;  // buf holds the home bucket (the slot was not known)
    bool read_cvt = false;      // this round READs the CVT (else the VT cache gave it)
    bool cas_posted = false;
    bool guard_absent = false;  // found absent: read the bucket's insert lock word first
    int rep = 0;                // the replica the CVT or bucket was READ from
    // The VT cache gave the value of this cell at this cv (value_cache; -1: none) into the
    // item's value: no record READ if that is the version chosen.
    int cached_cell = -1;
    uint8_t cached_cv = 0;
  };
  // One ReadItems call: its settings, the items' state, and the lists of the round under way.
  struct ReadPass {
    bool mn_locks = false;             // read-write items lock by CAS on the MN
    bool lock_word_matters = false;    // readers watch MN lock words (see ReadItems)
    uint64_t self = 0;                 // this transaction's owner word
    uint64_t gone_at = 0;              // TxnContext::gone_generation before the round's READs
    std::vector<ItemRead> items;       // by item index
    std::vector<std::byte> delta_buf;  // motor's second record READ lands here
    std::vector<size_t> need_cvt, to_read, fetch, retry;
    bool wait = false;    // an item waits for a writer
    bool failed = false;  // an item was read torn or at a stale address
    bool absent_but_locked = false;
    void NewRound() {
      need_cvt.clear();
      to_read.clear();
      fetch.clear();
      retry.clear();
      wait = failed = absent_but_locked = false;
    }
  };
  Task<Status> ReadItems(std::vector<size_t> todo);
  void PostCvtReads(const std::vector<size_t>& todo, ReadPass& p);
  Status BookLocks(ReadPass& p);
  Task<Status> DecodeCvts(ReadPass& p);
  void Absent(size_t i, ReadPass& p);
  Status ChooseVersions(ReadPass& p);
  Task<Status> ReadRecords(ReadPass& p);
  Status ChooseVersion(Item& it);
  // Slots for new keys, the cell to overwrite and record space: may take round trips.
  Task<Status> PrepareWrites(const std::vector<size_t>& writes);
  // Posts records and cells (commit_ts = `ts`, kInvisible for write-invisible) on `which`
  // replicas that are up.
  void PostWrites(const std::vector<size_t>& writes, uint64_t ts, Replicas which);
  // The record (kLogMagic: lotus and +log-visible; kMotorLogMagic: motor) naming every cell a
  // commit writes, ahead of them on each MN they go to (store/commit_log.h).
  void PostLogRecord(const std::vector<size_t>& writes, uint32_t magic);
  // Write-visible (the commit timestamp into the written cells) on the replica readers use, or
  // on every other replica up.
  void PostVisible(const std::vector<size_t>& writes, bool read_replica);
  // After the first write-visible round: whether every written key's timestamp is on a backup
  // up (with one replica, or every backup of a key down, there is none, and the answer waits).
  bool BackupsHoldTimestamp(const std::vector<size_t>& writes) const;
  // Whether some written key's readers use another replica than its primary (one is down): the
  // last write-visible round then reaches an MN other than the lock word's.
  bool AnyReadReplicaOffPrimary(const std::vector<size_t>& writes) const;
  // Motor: re-reads the CVTs of read-only items; Aborted if one changed since it was read.
  Task<Status> Validate();
  // The replica readers of `it` use: with MN lock words the one that holds them (readers watch
  // them), else the first readable one (Placement::ReadReplica).
  int ReaderReplica(const Item& it) const {
    return protocol().cn_locks ? w_.placement().ReadReplica(it.lk.key) : it.lock_rep;
  }
  void UpdateVtCache(const std::vector<size_t>& writes);
  // value_cache: after `it`'s record was read at its newest version, under its lock, on a key
  // this CN manages: the VT cache keeps the value beside the CVT.
  void CacheValue(const Item& it);
  // The commit is durable: counted, and what it wrote noted as acknowledged.
  void Answer(const std::vector<size_t>& writes);
  // After the first write-visible round: the one to the replicas readers use (lotus), deleted
  // keys out of their trees, and the unlocks.
  Task<void> Finish(const std::vector<size_t>& writes);
  // early_ack: Finish, run by a task of its own that keeps the transaction alive.
  static Task<void> Publish(std::shared_ptr<TxnState> self, std::vector<size_t> writes);
  // MNs down (docs/recovery.md "MN crash"). Cells name their record on their own replica's lane;
  // an Item's CVT always names it on the primary's (replica 0), whichever replica it came from.
  void ToPrimaryLane(store::Cvt& cvt, int rep) const;
  GAddr RecordAddr(const Item& it, const store::Cell& cell) const;

  std::vector<lock::LockRequest> held_;  // CN locks
  std::vector<std::byte> log_buf_;
  bool mid_visible_ = false;  // counted in the worker's commits_mid_visible()
  bool tail_ = false;         // answered early; Publish has not finished
};

}  // namespace pond::txn
