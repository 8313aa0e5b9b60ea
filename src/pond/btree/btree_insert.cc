// The write side of BTree: insert or update in a leaf, leaf and internal splits, root growth.
#include <algorithm>
#include <array>
#include <cstring>

#include "pond/btree/btree.h"

namespace pond::btree {

Task<Result<bool>> BTree::LockNodeFor(uint64_t key, uint8_t level, GAddr* a, GAddr* parent,
                                      NodeBuffer* n, bool fresh) {
  for (uint32_t hops = 0;; hops++) {
    if (hops > options_.sibling_hops_max) co_return Aborted("too many sibling moves");
    if (!fresh && hops > kShortWalkHops) {
      // A stale copy sent this far left of the key (ReadLeafFor says why): descend again.
      if (!parent->null()) cache_.Drop(*parent);
      root_ = GAddr::Null();
      co_return false;
    }
    POND_CO_RETURN_IF_ERROR(co_await Lock(*a));
    // Under the lock no one writes this node, and the last holder's writes completed before its
    // release (same batch, in order): the copy is whole unless memory lies.
    Status s = co_await ReadNode(*a, n);
    if (!s.ok()) {
      (void)co_await UnlockNow(*a);
      co_return s;
    }
    if (!n->valid() || n->h.level != level || key < n->h.lower) {
      POND_CO_RETURN_IF_ERROR(co_await UnlockNow(*a));
      if (!parent->null()) cache_.Drop(*parent);
      root_ = GAddr::Null();
      co_return false;
    }
    if (key < n->h.upper) co_return true;
    POND_CO_RETURN_IF_ERROR(co_await UnlockNow(*a));
    stats_.sibling_moves++;
    if (!parent->null()) cache_.Drop(*parent);
    *parent = GAddr::Null();
    *a = GAddr{n->h.sibling};
  }
}

Task<Result<GAddr>> BTree::LockLeafFor(uint64_t key, NodeBuffer* n) {
  bool fresh = false;
  for (uint32_t restart = 0; restart < options_.restart_count_max; restart++) {
    Result<Found> f = co_await Descend(key, 0, fresh);
    if (!f.ok()) co_return f.status();
    GAddr a = f->node, parent = f->parent;
    Result<bool> locked = co_await LockNodeFor(key, 0, &a, &parent, n, fresh);
    if (!locked.ok()) co_return locked.status();
    if (*locked) co_return a;
    fresh = true;  // descend again, without the copies that sent this one astray
  }
  co_return Aborted("a write restarted too often");
}

Task<Status> BTree::WriteBackEntry(GAddr a, NodeBuffer* n, int slot) {
  // The entry alone goes back, with new entry versions; the node versions stay. Without
  // two-level versions the whole leaf goes back, with new node versions.
  LeafEntry& e = n->leaf.entries[slot];
  e.BumpVersion();
  if (options_.entry_writeback) {
    stats_.entry_writebacks++;
    co_return co_await Publish(a, Piece{a + LeafEntryOffset(slot), &e, sizeof(LeafEntry)});
  }
  n->BumpVersion();
  stats_.node_writebacks++;
  co_return co_await Publish(a, Piece{a, n, kNodeBytes});
}

Task<Status> BTree::Insert(uint64_t key, uint64_t value) {
  if (key < kKeyMin || key > kKeyMax) co_return InvalidArgument("key outside 1 .. 2^64 - 2");
  NodeBuffer n;
  Result<GAddr> locked = co_await LockLeafFor(key, &n);
  for (uint32_t finishing = 0; locked.ok() && n.h.state == kNodeMerging; finishing++) {
    // No insert goes into a merging leaf, and its merger, if alive, would hold its word: the
    // merger died, and its sibling is to cover the key. Finish the merge, then look again.
    if (finishing >= options_.restart_count_max) co_return Aborted("a leaf stayed merging");
    Status s = co_await FinishMerge(*locked, &n);
    if (!s.ok() && s.code() != Code::kAborted) co_return s;
    locked = co_await LockLeafFor(key, &n);
  }
  if (!locked.ok()) co_return locked.status();
  const GAddr a = *locked;
  int slot = -1, empty = -1, used = 0;
  for (int i = 0; i < kLeafEntries; i++) {
    const LeafEntry& e = n.leaf.entries[i];
    if (e.key() == key) {
      slot = i;
    } else if (e.empty()) {
      if (empty < 0) empty = i;
    } else {
      used++;
    }
  }
  if (slot >= 0) {
    stats_.updates++;
  } else {
    stats_.inserts++;
    if (empty >= 0 && used < options_.leaf_fill_max) slot = empty;
  }
  if (slot < 0) {
    uint64_t sep = 0;
    GAddr right;
    POND_CO_RETURN_IF_ERROR(co_await SplitLeaf(a, &n, key, value, &sep, &right));
    co_return co_await InsertInternal(sep, right, 1);
  }
  n.leaf.entries[slot].set_key(key);
  n.leaf.entries[slot].set_value(value);
  co_return co_await WriteBackEntry(a, &n, slot);
}

Task<Status> BTree::Delete(uint64_t key, uint64_t removed_at) {
  if (key < kKeyMin || key > kKeyMax) co_return InvalidArgument("key outside 1 .. 2^64 - 2");
  NodeBuffer n;
  Result<GAddr> locked = co_await LockLeafFor(key, &n);
  if (!locked.ok()) co_return locked.status();
  for (int i = 0; i < kLeafEntries; i++) {
    LeafEntry& e = n.leaf.entries[i];
    if (e.key() != key) continue;
    // An empty entry is key 0; a reader that catches the clearing half done sees the entry's
    // versions disagree and reads again.
    e.set_key(kKeyEmpty);
    e.set_value(0);
    stats_.deletes++;
    Status s;
    if (removed_at > n.h.leftmost) {
      // The stamp and the cleared entry in one copy: a whole-leaf write with new node versions.
      n.h.leftmost = removed_at;
      e.BumpVersion();
      n.BumpVersion();
      stats_.node_writebacks++;
      s = co_await Publish(*locked, Piece{*locked, &n, kNodeBytes});
    } else {
      s = co_await WriteBackEntry(*locked, &n, i);
    }
    if (s.ok() && n.leaf.empty() && n.h.sibling != 0 && options_.merge_empty_leaves) {
      // Best effort, after the delete, which is done either way: a merge that cannot go on now
      // (a lock busy, the leaf or its parent changed) leaves the leaf empty on its level.
      (void)co_await MergeEmptyLeaf(n.h.lower);
    }
    co_return s;
  }
  POND_CO_RETURN_IF_ERROR(co_await UnlockNow(*locked));
  co_return NotFound("key not in the tree");
}

Task<Status> BTree::SplitLeaf(GAddr a, NodeBuffer* n, uint64_t key, uint64_t value, uint64_t* sep,
                              GAddr* right_addr) {
  Result<GAddr> r = co_await alloc_.Allocate();
  if (!r.ok()) {
    (void)co_await UnlockNow(a);
    co_return r.status();
  }
  std::array<LeafEntry, kLeafEntries + 1> all;
  int m = 0;
  for (const LeafEntry& e : n->leaf.entries) {
    if (!e.empty()) all[m++] = e;
  }
  LeafEntry fresh{};
  fresh.set_key(key);
  fresh.set_value(value);
  all[m++] = fresh;
  std::sort(all.begin(), all.begin() + m,
            [](const LeafEntry& x, const LeafEntry& y) { return x.key() < y.key(); });
  const int half = m / 2;
  *sep = all[half].key();
  *right_addr = *r;

  NodeBuffer right;
  InitNode(right, 0, *sep, n->h.upper);
  right.h.sibling = n->h.sibling;
  right.h.leftmost = n->h.leftmost;  // both halves keep the removal stamp
  std::copy(all.begin() + half, all.begin() + m, right.leaf.entries);

  std::memset(n->leaf.entries, 0, sizeof(n->leaf.entries));
  std::copy(all.begin(), all.begin() + half, n->leaf.entries);
  n->h.upper = *sep;
  n->h.sibling = r->raw;
  n->BumpVersion();
  stats_.leaf_splits++;
  co_return co_await WriteSplit(a, *n, *r, right);
}

Task<Status> BTree::WriteSplit(GAddr left_addr, const NodeBuffer& left, GAddr right_addr,
                               const NodeBuffer& right) {
  // The right node must be in memory before the left one points to it, on every copy. One MN
  // applies a batch in order, and the copies of one range share their MNs: then both go in one
  // write-back, the right one first. Two ranges' copies are on other MNs, whose batches are not
  // ordered: then the right one goes to every copy first.
  stats_.node_writebacks += 2;
  if (layout_.Range(right_addr.mn()) == layout_.Range(left_addr.mn())) {
    co_return co_await Publish(left_addr, Piece{right_addr, &right, kNodeBytes},
                               Piece{left_addr, &left, kNodeBytes});
  }
  if (Status s = co_await WriteNew(right_addr, right); !s.ok()) {
    (void)co_await UnlockNow(left_addr);
    co_return s;
  }
  co_return co_await Publish(left_addr, Piece{left_addr, &left, kNodeBytes});
}

Task<Status> BTree::InsertInternal(uint64_t key, GAddr child, uint8_t level) {
  NodeBuffer n;
  bool fresh = false;
  for (uint32_t restart = 0; restart < options_.restart_count_max; restart++) {
    Result<Found> f = co_await Descend(key, level, fresh);
    if (!f.ok()) co_return f.status();
    if (f->short_tree) {
      Result<bool> grown = co_await GrowRoot(key, child, level);
      if (!grown.ok()) co_return grown.status();
      if (*grown) co_return Status::Ok();
      continue;  // someone else grew the tree: insert into the new level
    }
    GAddr a = f->node, parent = f->parent;
    Result<bool> locked = co_await LockNodeFor(key, level, &a, &parent, &n, fresh);
    if (!locked.ok()) co_return locked.status();
    if (!*locked) {
      fresh = true;
      continue;
    }
    InternalNode& in = n.internal;
    const int count = in.h.count;
    const InternalEntry* pos_it =
        std::upper_bound(in.entries, in.entries + count, key,
                         [](uint64_t k, const InternalEntry& e) { return k < e.key; });
    const int pos = static_cast<int>(pos_it - in.entries);
    // A separator is the first key of a node born in a split, and nodes never merge, so no
    // separator is inserted twice.
    POND_ASSERT_MSG(pos == 0 || in.entries[pos - 1].key != key, "separator inserted twice");
    std::array<InternalEntry, kInternalEntries + 1> all;
    std::copy(in.entries, in.entries + pos, all.begin());
    all[pos] = InternalEntry{key, child.raw};
    std::copy(in.entries + pos, in.entries + count, all.begin() + pos + 1);
    const int total = count + 1;

    if (total <= options_.internal_fill_max) {
      std::copy(all.begin(), all.begin() + total, in.entries);
      in.h.count = static_cast<uint8_t>(total);
      n.BumpVersion();
      stats_.node_writebacks++;
      Status w = co_await Publish(a, Piece{a, &n, kNodeBytes});
      if (w.ok()) cache_.Put(a, in);
      co_return w;
    }

    // Split: the middle separator moves up; its child becomes the right node's leftmost.
    Result<GAddr> r = co_await alloc_.Allocate();
    if (!r.ok()) {
      (void)co_await UnlockNow(a);
      co_return r.status();
    }
    const int mid = total / 2;
    const uint64_t sep = all[mid].key;
    NodeBuffer right;
    InitNode(right, level, sep, in.h.upper);
    right.h.sibling = in.h.sibling;
    right.h.leftmost = all[mid].child;
    right.h.count = static_cast<uint8_t>(total - mid - 1);
    std::copy(all.begin() + mid + 1, all.begin() + total, right.internal.entries);

    std::memset(in.entries, 0, sizeof(in.entries));
    std::copy(all.begin(), all.begin() + mid, in.entries);
    in.h.count = static_cast<uint8_t>(mid);
    in.h.upper = sep;
    in.h.sibling = r->raw;
    n.BumpVersion();
    stats_.internal_splits++;
    POND_CO_RETURN_IF_ERROR(co_await WriteSplit(a, n, *r, right));
    cache_.Put(a, in);
    cache_.Put(*r, right.internal);
    co_return co_await InsertInternal(sep, *r, static_cast<uint8_t>(level + 1));
  }
  co_return Aborted("an internal insert restarted too often");
}

Task<Result<bool>> BTree::GrowRoot(uint64_t key, GAddr child, uint8_t level) {
  Result<GAddr> old = co_await ReadRootWord();
  if (!old.ok()) co_return old.status();
  NodeBuffer root;
  POND_CO_RETURN_IF_ERROR(co_await ReadNode(*old, &root));
  if (root.h.level >= level) {
    root_ = *old;  // the descent began at an old root; the tree is tall enough
    co_return false;
  }
  // The root word names the leftmost node of the top level, so the node that split is the root
  // or right of it, and the new root's leftmost child covers everything left of `key`.
  if (root.h.level + 1 != level) co_return Internal("the tree skipped a level");
  Result<GAddr> r = co_await alloc_.Allocate();
  if (!r.ok()) co_return r.status();
  NodeBuffer fresh;
  InitNode(fresh, level, 0, kKeyInfinity);
  fresh.h.leftmost = old->raw;
  fresh.h.count = 1;
  fresh.internal.entries[0] = InternalEntry{key, child.raw};
  // The new root is on every copy before the root word (possibly another MN's) names it.
  POND_CO_RETURN_IF_ERROR(co_await WriteNew(*r, fresh));
  // The root word changes under its header's lock (on every copy alike, which a CAS on each
  // could not promise): it is read again under the lock and written if it did not move.
  const GAddr header = layout_.Header(0);
  POND_CO_RETURN_IF_ERROR(co_await Lock(header));
  uint64_t seen = 0;
  ep_.Read(ReadAddr(layout_.RootWord()), &seen, 8);
  if (Status s = co_await ep_.Flush(); !s.ok()) {
    (void)co_await UnlockNow(header);
    co_return s;
  }
  const uint64_t new_root = r->raw;
  Status published;  // (not one co_await per arm of a ?: — GCC 12 destroys the wrong temporary)
  if (seen == old->raw) {
    published = co_await Publish(header, Piece{layout_.RootWord(), &new_root, 8});
  } else {
    published = co_await UnlockNow(header);
  }
  POND_CO_RETURN_IF_ERROR(published);
  if (seen != old->raw) {
    // Another CN grew the tree first; this node stays unlinked (space is not reclaimed).
    stats_.root_cas_lost++;
    root_ = GAddr{seen};
    co_return false;
  }
  stats_.root_growths++;
  root_ = *r;
  cache_.Put(*r, fresh.internal);
  co_return true;
}

}  // namespace pond::btree
