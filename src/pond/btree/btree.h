// BTree: one worker's handle on a B+Tree in the memory pool (Sherman's B-link tree), with 8-byte
// keys and 8-byte values. docs/btree.md explains the design; docs/formats.md "B+Tree nodes" the
// bytes.
//
// Reads take no lock: a lookup or scan READs nodes and retries a copy whose node versions (or,
// for the entry it needs, entry versions) disagree. Writes lock one node at a time: the node's
// global lock word on its MN (CAS), queued first in this worker's LocalLockTable, which may hand
// the lock to the worker's next waiter without a release. An insert that fits writes back only
// its 18-byte entry; the write-back and the lock's release go in one doorbell batch. A full node
// splits: the new right sibling is written first, then the old node with its new upper fence and
// sibling pointer (and the release), then the separator is inserted one level up; a split root
// grows the tree by a CAS on the root word.
//
// A replicated tree (TreeSpace::replication R > 1; btree_copies.cc, docs/btree.md "Replicated
// nodes") keeps R copies of every range: a lock is its word on every copy not down, a write-back
// goes to the copies readers do not use and then to the one they do, reads go to the first
// readable copy, and whoever takes a dead holder's word first recopies the line it names.
//
// Thread rules: a BTree belongs to one worker and its Endpoint; any number of that worker's
// coroutines may call it at once. Any number of workers, on any CNs, may use the same tree, each
// through a BTree of its own opened on the same TreeSpace.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "pond/base/relaxed_counter.h"
#include "pond/btree/chunk_allocator.h"
#include "pond/btree/index_cache.h"
#include "pond/btree/local_lock_table.h"
#include "pond/btree/node.h"
#include "pond/btree/tree_space.h"
#include "pond/status.h"
#include "pond/store/gone_holders.h"
#include "pond/store/placement.h"
#include "pond/task.h"
#include "pond/transport/endpoint.h"

namespace pond::btree {

struct TreeOptions {
  // Entries a node holds before it splits (<= kLeafEntries, kInternalEntries); tests lower them
  // to grow tall trees from few keys.
  int leaf_fill_max = kLeafEntries;
  int internal_fill_max = kInternalEntries;
  int handover_max = 4;  // HOCL: hand-overs in a row before a release to the MN
  // Sherman's techniques, each of which can be turned off to measure what it buys (`pond sim
  // btree --ablation`, Sherman §5.2's breakdown; handover_max 0 turns off hand-over):
  bool local_locks = true;      // HOCL's CN half: a worker's coroutines queue locally first
                                // (off: each one CASes the global word itself)
  bool combine = true;          // write-back and release in one doorbell batch (off: two)
  bool entry_writeback = true;  // two-level versions: an insert or update into a free or its own
                                // entry writes back that entry (off: the whole leaf)
  size_t index_cache_nodes_max = 4096;      // 0: no index cache
  uint32_t read_retry_count_max = 1 << 16;  // torn copies of one node in a row
  uint32_t lock_retry_count_max = 1 << 20;  // failed CASes on one global lock word in a row
  uint32_t restart_count_max = 1 << 12;     // descents from the root for one operation
  uint32_t sibling_hops_max = 1 << 12;      // right moves within one descent
  // The CN incarnations that failed and were recovered: a global lock word that names one of
  // them (its worker died holding it) is freed by the next CAS it refuses. Null: none ever is.
  const store::GoneHolders* gone = nullptr;
  // Also counts the words taken from gone holders (TreeStats::gone_words_taken), for a reader on
  // another thread; null: none.
  RelaxedCounter* gone_words_taken = nullptr;
  // A replicated tree (TreeSpace::replication > 1): which MNs are down or joining, so that
  // writes skip the down ones and reads go to a readable copy. Null: every MN is up.
  const store::Placement* placement = nullptr;
  // With lock words on MNs (motor, ford and their steps) a leaving MN goes down only once every
  // transaction from before it left has ended (docs/recovery.md "Lock words on MNs, and an MN
  // crash"), so a round of a transaction's tree operation must not wait for "down": a write
  // round counts a leaving MN that does not answer as written (read by nobody, as a commit
  // round does), and a lock round refuses (Unavailable), its transaction aborting. Off: every
  // round waits until such an MN is down.
  bool rounds_end_at_leaving = false;
  // A delete that leaves its leaf empty merges it into its right sibling, and scans unlink the
  // merged leaves they cross (docs/btree.md "Merges"). Off: empty leaves stay, to measure it.
  bool merge_empty_leaves = true;
};

// Sibling moves after a descent that trusted the cache before the operation descends again
// with fresh copies: concurrent splits since a fresh read take a move or two, a stale copy many.
inline constexpr uint32_t kShortWalkHops = 8;

struct TreeStats {
  uint64_t lookups = 0, inserts = 0, updates = 0, scans = 0, deletes = 0;
  uint64_t torn_node_reads = 0;   // copies whose node versions disagreed
  uint64_t torn_entry_reads = 0;  // copies whose needed entry's versions disagreed
  uint64_t sibling_moves = 0;     // a node's range ended below the key: moved right
  uint64_t restarts = 0;          // descents begun again from the root
  uint64_t leaf_splits = 0, internal_splits = 0, root_growths = 0, root_cas_lost = 0;
  uint64_t lock_cas_failed = 0;
  uint64_t gone_words_taken = 0;  // lock words held by a failed CN incarnation, taken from it
  uint64_t entry_writebacks = 0, node_writebacks = 0;
  uint64_t leaves_read = 0;     // by scans
  uint64_t lines_repaired = 0;  // lines a dead holder may have left on some copies only, recopied
  uint64_t rounds_posted_again = 0;  // to an MN that did not answer and was not declared down
  uint64_t leaf_merges = 0;          // empty leaves merged into their right siblings
  uint64_t merges_given_up = 0;      // a lock busy, or the leaf or its parent changed first
  uint64_t merges_finished = 0;      // merging leaves whose merger died, finished by a writer
  uint64_t merged_unlinked = 0;      // merged leaves a scan took off their level's chain
};

using KeyValue = std::pair<uint64_t, uint64_t>;

// Formats the tree's space and writes an empty root leaf. Run once, by one CN, before any BTree
// is opened on `space`.
Task<Status> CreateTree(Endpoint& ep, const TreeSpace& space);

class BTree {
 public:
  // `space` must be the one the tree was created with (Validate(space) holds).
  BTree(Endpoint& ep, const TreeSpace& space, TreeOptions options = {});
  BTree(const BTree&) = delete;
  BTree& operator=(const BTree&) = delete;

  // The value of `key`, or NotFound.
  Task<Result<uint64_t>> Lookup(uint64_t key);
  // Inserts `key` or overwrites its value. Keys are kKeyMin..kKeyMax.
  Task<Status> Insert(uint64_t key, uint64_t value);
  // Removes `key` (NotFound if absent): its entry is cleared in place. A leaf left empty is
  // merged into its right sibling (merge_empty_leaves; docs/btree.md "Merges"); its space is
  // not reused, so that a stale copy that leads to it stays harmless.
  // `removed_at` > 0 (a key deleted by a commit at that timestamp): the leaf's removal stamp is
  // raised to it in the same write, the whole leaf with new node versions, so that no copy shows
  // the entry gone without the stamp.
  Task<Status> Delete(uint64_t key, uint64_t removed_at = 0);
  // Appends the entries with low <= key < high to `out`, ascending, at most `limit` of them. Not
  // atomic against concurrent writers: each leaf is one consistent copy, taken in turn.
  // `removed_max` (if set) is raised to the removal stamp of every leaf the entries came from.
  Task<Status> Scan(uint64_t low, uint64_t high, size_t limit, std::vector<KeyValue>* out,
                    uint64_t* removed_max = nullptr);
  // The same, descending: the `limit` largest keys below `high`, largest first. Leaves link
  // rightwards only, so it moves left by descending again to the key below each leaf's lower
  // fence — through the index cache, about one READ a leaf, as an ascending scan pays: a scan
  // costs the leaves it returns from, not the range it covers.
  Task<Status> ScanDescending(uint64_t low, uint64_t high, size_t limit, std::vector<KeyValue>* out,
                              uint64_t* removed_max = nullptr);

  // A restarted MN's copy of a range (docs/btree.md "Replicated nodes"): copies lines
  // [first, end) of MN `range_mn`'s range — the header, then nodes up to the range's cursor —
  // from the readable copy onto copy `k`, whose MN is joining, each under its lock. Exact once
  // every tree operation that began before that MN was named joining has ended: every later one
  // writes its copy too. Returns the lines copied, or Unavailable once that MN is not joining.
  Task<Result<uint64_t>> CopyToJoining(MnId range_mn, int k, uint32_t first, uint32_t end);

  const TreeStats& stats() const { return stats_; }
  const LocalLockTable& local_locks() const { return locks_; }
  const IndexCache& index_cache() const { return cache_; }
  const ChunkAllocator& allocator() const { return alloc_; }

 private:
  // Where a descent ended: the node at the wanted level, and the internal node that pointed to
  // it (null if it is the root), so that a stale copy of that parent can be dropped. short_tree:
  // the tree has no node at the wanted level (yet).
  struct Found {
    GAddr node;
    GAddr parent;
    bool short_tree = false;
  };

  // READs the node at `a` into `n` until the copy is whole (node versions agree).
  Task<Status> ReadNode(GAddr a, NodeBuffer* n);
  // The internal node at `a`, from the cache or by READ (and then cached); `fresh`: by READ.
  Task<Status> GetInternal(GAddr a, NodeBuffer* n, bool* from_cache, bool fresh);
  Task<Result<GAddr>> ReadRootWord();
  // READs leaves from *a rightwards (sibling moves counted in *hops) until *n is the one whose
  // range holds `key`: true. False: a copy that led to *a was stale (dropped; descend again,
  // fresh) — or the walk grew long after a descent that was not `fresh`: a cached parent from
  // long ago can point many leaves to the left of the key, and walking there costs a READ a
  // leaf where a fresh descent costs one per level.
  // `merged` (if set): the first node read, if it was a merged leaf the walk moved past.
  Task<Result<bool>> ReadLeafFor(uint64_t key, GAddr* a, GAddr* parent, NodeBuffer* n,
                                 uint32_t* hops, bool fresh, GAddr* merged = nullptr);
  // Descends from the root to the node at `level` whose range holds `key`; reads the nodes above
  // that level (not the node itself, unless it is the root). `fresh`: READs every internal node
  // rather than trusting the cache (after a stale copy sent an operation astray).
  Task<Result<Found>> Descend(uint64_t key, uint8_t level, bool fresh = false);

  // Locks the node at *a and READs it into *n, moving right (unlocked again) while its range
  // ends at or below `key`: true with the node of `level` that holds `key` locked. False: a copy
  // that led to *a was stale (dropped, nothing locked; descend again).
  Task<Result<bool>> LockNodeFor(uint64_t key, uint8_t level, GAddr* a, GAddr* parent,
                                 NodeBuffer* n, bool fresh);
  // Descends to the leaf whose range holds `key`, locks it and reads it into *n: its address.
  Task<Result<GAddr>> LockLeafFor(uint64_t key, NodeBuffer* n);
  // Leaf *n (locked, at `a`) has a changed entry at `slot`: writes it back (the entry, or the
  // whole leaf without two-level versions) and unlocks.
  Task<Status> WriteBackEntry(GAddr a, NodeBuffer* n, int slot);
  // A scan took leaf `n` (whole): counts it, raises *removed_max (if set) to its removal stamp,
  // and puts its entries with low <= key < high into *entries, ascending.
  void TakeLeaf(const NodeBuffer& n, uint64_t low, uint64_t high, uint64_t* removed_max,
                std::vector<KeyValue>* entries);
  // ---- Locks and copies (btree_copies.cc; docs/btree.md "Replicated nodes") ----
  // A write of a locked line's bytes (or of a new node's), in copy-0 addresses.
  struct Piece {
    GAddr at;
    const void* from;
    uint32_t len;  // 0: no piece
  };
  // The copies of MN `mn`'s range that are written (bit k: copy k's MN is not down), and the one
  // readers use (the first readable).
  uint64_t WrittenCopies(MnId mn) const;
  int ReadCopy(MnId mn) const;
  GAddr ReadAddr(GAddr a) const { return layout_.Copy(a, ReadCopy(a.mn())); }
  // The global lock word of a line: the header's own word for a range header (a chunk or root
  // change may happen under a node's lock, so it must not share that node's word), else the
  // hashed word of the node.
  GAddr WordOf(GAddr line) const;
  // What this worker's CAS puts in the word of `line`: its owner word naming the line, with a
  // nonce of its own.
  uint64_t WordValue(GAddr line) {
    nonce_ = static_cast<uint8_t>(nonce_ + 1);
    return holder_id_ | uint64_t{layout_.LineOf(line)} << 8 | nonce_;
  }
  // Posts `ops`, flushes, and while an MN of theirs that did not answer is not declared down,
  // waits and posts its ops again: each op then took effect on every MN still up, or its MN is
  // out (the caller looks at WrittenCopies again). With rounds_end_at_leaving, a silent MN that
  // is leaving ends the wait too, and goes into *gave_up (if given): its ops may or may not
  // have taken effect.
  Task<Status> RunRound(const std::vector<Op>& ops, uint64_t* gave_up = nullptr);
  // HOCL: the line's global lock — the word on every written copy, taken in copy order — through
  // the local table. A word held by a dead holder is taken, and the line it names recopied.
  // `wait` false: for an operation that holds a line already (a merge) — no wait in the local
  // table and one CAS round, else Aborted at once, since words shared by lines could close a
  // cycle of waiters.
  Task<Status> Lock(GAddr line, bool wait = true);
  // The bytes of a line that change: the header's magic, cursor and root, or a whole node.
  static uint32_t LineBytes(uint32_t line) { return line == 0 ? 24 : kNodeBytes; }
  // Copies the line of range `range_mn` a dead holder's word named from the readable copy to the
  // others.
  Task<Status> Repair(MnId range_mn, uint64_t dead_word);
  // What a held lock took: the copies whose words hold `value`, and the placement's generation
  // then (the record stays with the lock on a hand-over and goes with its release).
  struct Held {
    uint64_t line = 0;
    uint64_t copies = 0;
    uint64_t value = 0;
    uint64_t generation = 0;
  };
  uint64_t Generation() const {
    return options_.placement == nullptr ? 0 : options_.placement->generation();
  }
  // Posts the release of every word `h` holds: a WRITE of 0 where the copy is written and no MN
  // went down or came back since they were taken, else a CAS from its value to 0 (the word may
  // be on an MN that came back blank, and someone else's by now; or on one that is down).
  void PostRelease(const Held& h, std::vector<Op>* ops);
  Held TakeHeld(GAddr line);
  // Writes `pieces` (the locked `line`'s, and maybe new nodes') to every written copy — the
  // copies readers do not use first, then the read copy — and releases the line's lock on every
  // copy with the last (unless it is handed over, or `release` is false: a merge writes a leaf
  // it goes on holding).
  Task<Status> Publish(GAddr line, Piece first, Piece second, bool release = true);
  Task<Status> Publish(GAddr line, Piece only) { return Publish(line, only, NoPiece()); }
  static Piece NoPiece() { return Piece{GAddr::Null(), nullptr, 0}; }
  // Writes a node no one can reach yet to every written copy.
  Task<Status> WriteNew(GAddr node, const NodeBuffer& n);
  Task<Status> WriteHeld(GAddr line, const NodeBuffer& n) {
    return Publish(line, Piece{line, &n, kNodeBytes}, NoPiece(), false);
  }
  // Releases the line's lock with nothing to write.
  Task<Status> UnlockNow(GAddr line) { return Publish(line, NoPiece(), NoPiece()); }
  // A chunk of range `r` for the allocator: by FAA on its cursor with one copy, else under the
  // header's lock (an FAA's answer from copies that disagree could hand a chunk out twice).
  Task<Result<uint64_t>> TakeChunk(size_t r);

  // Leaf `n` (locked, at `a`) is full: split it around the new entry and unlock it. Sets *sep
  // and *right to what the parent must learn.
  Task<Status> SplitLeaf(GAddr a, NodeBuffer* n, uint64_t key, uint64_t value, uint64_t* sep,
                         GAddr* right);
  // Inserts the separator `key` -> `child` into the tree's level `level` (>= 1).
  Task<Status> InsertInternal(uint64_t key, GAddr child, uint8_t level);
  // The tree has no node at `level`: the root (at level - 1) split; put a new root above it.
  // False if another CN grew the tree first (then retry the insert).
  Task<Result<bool>> GrowRoot(uint64_t key, GAddr child, uint8_t level);
  // Writes the new right node, then the left one with the release of its lock, ordered: the
  // right one in every copy before the left one in any.
  Task<Status> WriteSplit(GAddr left_addr, const NodeBuffer& left, GAddr right_addr,
                          const NodeBuffer& right);

  // ---- Merges (btree_merge.cc; docs/btree.md "Merges") ----
  // Merges the empty leaf whose range begins at `lo` into its right sibling, if both and their
  // parent can be locked now and are as a merge needs them; else leaves all as it is.
  Task<Status> MergeEmptyLeaf(uint64_t lo);
  // Leaf `e` (held, merging, read into *en) of a merger that died: takes its sibling (not
  // waiting) and finishes the merge, releasing both. Aborted (both released) if the sibling
  // was busy: the caller tries again.
  Task<Status> FinishMerge(GAddr e, NodeBuffer* en);
  // Steps 3 and 4 with `e` (merging) and `r` held and read: r covers e's range from then on,
  // and e is merged. Releases both.
  Task<Status> HandOverRange(GAddr e, NodeBuffer* en, GAddr r, NodeBuffer* rn);
  // `l`'s sibling is the merged leaf `e`: l links past it, if l is free now and unchanged.
  Task<Status> Unlink(GAddr l, GAddr e);
  // The walk of Scan, which notes each (leaf, merged sibling) pair it crosses in *unlink.
  Task<Status> ScanWalk(uint64_t low, uint64_t high, size_t limit, std::vector<KeyValue>* out,
                        uint64_t* removed_max, std::vector<std::pair<GAddr, GAddr>>* unlink);

  Endpoint& ep_;
  SpaceLayout layout_;
  TreeOptions options_;
  // What this worker's CAS puts in a global lock word: the owner word of its CN incarnation and
  // worker (store::LockOwnerWord, with transaction number 0), so that a word left by a worker that
  // died names who it was (docs/btree.md "Lock words that name their holder").
  uint64_t holder_id_;
  ChunkAllocator alloc_;
  LocalLockTable locks_;
  IndexCache cache_;
  GAddr root_ = GAddr::Null();  // last root seen; null: read the root word
  uint8_t nonce_ = 0;
  std::vector<Held> held_;                           // the locks this worker holds
  uint64_t release_seen_[kTreeReplicationMax] = {};  // CAS releases' answers, which nobody reads
  TreeStats stats_;
};

}  // namespace pond::btree
