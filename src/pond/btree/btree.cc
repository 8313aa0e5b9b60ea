// The read side of BTree (creation, descent, lookup, scan) and the HOCL lock steps; the write
// side (insert, splits, root growth) is btree_insert.cc.
#include "pond/btree/btree.h"

#include <algorithm>
#include <cstring>

namespace pond::btree {

Task<Status> CreateTree(Endpoint& ep, const TreeSpace& space) {
  POND_CO_RETURN_IF_ERROR(Validate(space));
  SpaceLayout layout(space);
  // The root leaf takes the first node of range 0; every cursor starts past what is taken. Every
  // copy of every range is written alike (all MNs are up at creation).
  const GAddr root = GAddr::Make(space.ranges[0].mn, layout.NodesBegin(0));
  NodeBuffer leaf;
  InitNode(leaf, 0, 0, kKeyInfinity);
  std::vector<RangeHeader> headers(space.ranges.size());
  std::vector<uint64_t> zero_locks(space.lock_count, 0);
  for (int k = 0; k < space.replication; k++) ep.Write(layout.Copy(root, k), &leaf, kNodeBytes);
  for (size_t r = 0; r < space.ranges.size(); r++) {
    RangeHeader& h = headers[r];
    std::memset(&h, 0, sizeof(h));
    h.magic = kTreeMagic;
    h.chunk_cursor = layout.NodesBegin(r) + (r == 0 ? kNodeBytes : 0);
    h.root = r == 0 ? root.raw : 0;
    for (int k = 0; k < space.replication; k++) {
      ep.Write(layout.Copy(layout.LockBase(r), k), zero_locks.data(), space.lock_count * 8);
      // Posted after the root leaf (on its MN; other MNs' batches wait for the Flush below): the
      // root word never names an unwritten node.
      if (r != 0) ep.Write(layout.Copy(layout.Header(r), k), &h, sizeof(h));
    }
  }
  POND_CO_RETURN_IF_ERROR(co_await ep.Flush());
  for (int k = 0; k < space.replication; k++) {
    ep.Write(layout.Copy(layout.Header(0), k), &headers[0], sizeof(RangeHeader));
  }
  co_return co_await ep.Flush();
}

BTree::BTree(Endpoint& ep, const TreeSpace& space, TreeOptions options)
    : ep_(ep),
      layout_(space),
      options_(options),
      holder_id_(store::LockOwnerWord(
          ep.self().cn, uint64_t{ep.self().worker} << 48 | uint64_t{ep.incarnation()}
                                                               << store::kSeqIncarnationShift)),
      alloc_(layout_, size_t{ep.self().cn} + ep.self().worker,
             [this](size_t r) { return TakeChunk(r); }),
      locks_(ep.scheduler(), options.handover_max),
      cache_(options.index_cache_nodes_max) {
  POND_CHECK(Validate(space).ok());
  POND_CHECK(options_.leaf_fill_max >= 2 && options_.leaf_fill_max <= kLeafEntries);
  POND_CHECK(options_.internal_fill_max >= 2 && options_.internal_fill_max <= kInternalEntries);
}

Task<Status> BTree::ReadNode(GAddr a, NodeBuffer* n) {
  for (uint32_t i = 0; i < options_.read_retry_count_max; i++) {
    ep_.Read(ReadAddr(a), n, kNodeBytes);
    POND_CO_RETURN_IF_ERROR(co_await ep_.Flush());
    if (n->whole()) co_return Status::Ok();
    stats_.torn_node_reads++;
  }
  co_return Aborted("a tree node stayed torn over every retry");
}

Task<Status> BTree::GetInternal(GAddr a, NodeBuffer* n, bool* from_cache, bool fresh) {
  if (const InternalNode* c = fresh ? nullptr : cache_.Find(a)) {
    n->internal = *c;
    *from_cache = true;
    co_return Status::Ok();
  }
  *from_cache = false;
  POND_CO_RETURN_IF_ERROR(co_await ReadNode(a, n));
  if (n->valid() && n->h.level >= 1) cache_.Put(a, n->internal);
  co_return Status::Ok();
}

Task<Result<GAddr>> BTree::ReadRootWord() {
  uint64_t raw = 0;
  ep_.Read(ReadAddr(layout_.RootWord()), &raw, 8);
  POND_CO_RETURN_IF_ERROR(co_await ep_.Flush());
  if (raw == 0) co_return InvalidArgument("no tree in this space: CreateTree first");
  co_return GAddr{raw};
}

Task<Result<BTree::Found>> BTree::Descend(uint64_t key, uint8_t level, bool fresh) {
  NodeBuffer n;
  for (uint32_t restart = 0; restart < options_.restart_count_max; restart++) {
    if (restart > 0) stats_.restarts++;
    if (root_.null()) {
      Result<GAddr> r = co_await ReadRootWord();
      if (!r.ok()) co_return r.status();
      root_ = *r;
    }
    GAddr a = root_, parent = GAddr::Null();
    int expect_level = -1;  // unknown at the root
    for (uint32_t hops = 0; hops < options_.sibling_hops_max;) {
      bool from_cache = false;
      POND_CO_RETURN_IF_ERROR(co_await GetInternal(a, &n, &from_cache, fresh));
      if (!n.valid() || key < n.h.lower || (expect_level >= 0 && n.h.level != expect_level)) {
        // A copy that led here was outdated: forget it and start over from a fresh root word.
        if (from_cache) cache_.Drop(a);
        if (!parent.null()) cache_.Drop(parent);
        root_ = GAddr::Null();
        break;
      }
      if (key >= n.h.upper) {
        if (from_cache) {
          cache_.Drop(a);  // read the node itself afresh: its sibling may be newer too
          continue;
        }
        stats_.sibling_moves++;
        hops++;
        if (!fresh && hops > kShortWalkHops) {
          // Far from where a stale root or cached copy put us: descend again, fresh.
          fresh = true;
          root_ = GAddr::Null();
          break;
        }
        if (a == root_) root_ = GAddr::Null();  // the root split: the root word may be newer
        if (!parent.null()) cache_.Drop(parent);
        parent = GAddr::Null();
        a = GAddr{n.h.sibling};
        POND_ASSERT_MSG(!a.null(), "the rightmost node of a level has an infinite upper fence");
        expect_level = n.h.level;
        continue;
      }
      if (n.h.level == level) co_return Found{a, parent};
      if (n.h.level < level) co_return Found{a, parent, true};
      GAddr child = n.internal.ChildFor(key);
      if (n.h.level == level + 1) co_return Found{child, a};
      parent = a;
      a = child;
      expect_level = n.h.level - 1;
    }
  }
  co_return Aborted("a tree descent restarted too often");
}

Task<Result<bool>> BTree::ReadLeafFor(uint64_t key, GAddr* a, GAddr* parent, NodeBuffer* n,
                                      uint32_t* hops, bool fresh, GAddr* merged) {
  for (bool first = true;; first = false) {
    POND_CO_RETURN_IF_ERROR(co_await ReadNode(*a, n));
    if (!n->valid() || n->h.level != 0 || key < n->h.lower) {
      if (!parent->null()) cache_.Drop(*parent);
      root_ = GAddr::Null();
      co_return false;
    }
    if (key < n->h.upper) co_return true;
    if (first && merged != nullptr && n->h.state == kNodeMerged) *merged = *a;
    if (++*hops > options_.sibling_hops_max) co_return Aborted("too many sibling moves");
    if (!fresh && *hops > kShortWalkHops) {
      if (!parent->null()) cache_.Drop(*parent);
      root_ = GAddr::Null();
      co_return false;
    }
    stats_.sibling_moves++;
    if (!parent->null()) cache_.Drop(*parent);
    *parent = GAddr::Null();
    *a = GAddr{n->h.sibling};
  }
}

Task<Result<uint64_t>> BTree::Lookup(uint64_t key) {
  stats_.lookups++;
  NodeBuffer n;
  bool fresh = false;
  for (uint32_t restart = 0; restart < options_.restart_count_max; restart++) {
    Result<Found> f = co_await Descend(key, 0, fresh);
    if (!f.ok()) co_return f.status();
    GAddr a = f->node, parent = f->parent;
    uint32_t torn = 0, hops = 0;
    for (;;) {
      Result<bool> at = co_await ReadLeafFor(key, &a, &parent, &n, &hops, fresh);
      if (!at.ok()) co_return at.status();
      if (!*at) {
        fresh = true;  // descend again, without the copies that sent this one astray
        break;
      }
      const LeafEntry* hit = nullptr;
      for (const LeafEntry& e : n.leaf.entries) {
        if (e.key() == key) {
          hit = &e;
          break;
        }
      }
      if (hit == nullptr) co_return NotFound("key not in the tree");
      if (hit->whole()) co_return hit->value();
      // The entry is being rewritten; its key bytes matched, maybe by a tear: read again.
      stats_.torn_entry_reads++;
      if (++torn > options_.read_retry_count_max) co_return Aborted("a leaf entry stayed torn");
    }
  }
  co_return Aborted("a lookup restarted too often");
}

Task<Status> BTree::Scan(uint64_t low, uint64_t high, size_t limit, std::vector<KeyValue>* out,
                         uint64_t* removed_max) {
  stats_.scans++;
  std::vector<std::pair<GAddr, GAddr>> unlink;
  Status s = co_await ScanWalk(low, high, limit, out, removed_max, &unlink);
  // After the walk, so that what it returns waits on no lock: the merged leaves it crossed are
  // linked past, and later scans read them no more.
  for (const auto& [l, e] : unlink) {
    if (!s.ok()) break;
    Status u = co_await Unlink(l, e);
    if (u.code() != Code::kAborted) s = u;  // Aborted: l was busy, and stays for a later scan
  }
  co_return s;
}

Task<Status> BTree::ScanWalk(uint64_t low, uint64_t high, size_t limit, std::vector<KeyValue>* out,
                             uint64_t* removed_max, std::vector<std::pair<GAddr, GAddr>>* unlink) {
  const size_t start = out->size();
  uint64_t cursor = low;  // every key below it was collected
  NodeBuffer n;
  std::vector<KeyValue> leaf_entries;
  bool fresh = false;
  for (uint32_t restart = 0; restart < options_.restart_count_max; restart++) {
    if (cursor >= high || out->size() - start >= limit) co_return Status::Ok();
    Result<Found> f = co_await Descend(cursor, 0, fresh);
    if (!f.ok()) co_return f.status();
    // left: the leaf taken last, whose sibling is read next; merged: a merged leaf met there.
    GAddr a = f->node, parent = f->parent, left = GAddr::Null(), merged = GAddr::Null();
    uint32_t torn = 0, hops = 0;
    for (;;) {
      Result<bool> at = co_await ReadLeafFor(cursor, &a, &parent, &n, &hops, fresh, &merged);
      if (!at.ok()) co_return at.status();
      if (!*at) {
        fresh = true;
        break;
      }
      // Every entry is needed, so every entry must be whole (empty ones too: a torn empty slot
      // may be an insert in progress).
      bool whole = true;
      for (const LeafEntry& e : n.leaf.entries) whole = whole && e.whole();
      if (!whole) {
        stats_.torn_entry_reads++;
        if (++torn > options_.read_retry_count_max) co_return Aborted("a leaf stayed torn");
        continue;
      }
      torn = 0;
      if (!left.null() && !merged.null() && options_.merge_empty_leaves) {
        unlink->emplace_back(left, merged);
      }
      left = merged = GAddr::Null();
      TakeLeaf(n, cursor, high, removed_max, &leaf_entries);
      for (const KeyValue& kv : leaf_entries) {
        if (out->size() - start >= limit) co_return Status::Ok();
        out->push_back(kv);
      }
      if (n.h.upper >= high || n.h.sibling == 0) co_return Status::Ok();
      cursor = n.h.upper;
      parent = GAddr::Null();
      left = a;
      a = GAddr{n.h.sibling};
    }
  }
  co_return Aborted("a scan restarted too often");
}

Task<Status> BTree::ScanDescending(uint64_t low, uint64_t high, size_t limit,
                                   std::vector<KeyValue>* out, uint64_t* removed_max) {
  stats_.scans++;
  const size_t start = out->size();
  uint64_t cursor = high;  // every key at or above it (below `high`) was collected
  NodeBuffer n;
  std::vector<KeyValue> leaf_entries;
  bool fresh = false;
  uint32_t restarts = 0;
  while (cursor > low && out->size() - start < limit) {
    // The leaf holding the key below the cursor: a descent (from the cache, mostly) each time.
    const uint64_t key = cursor - 1;
    Result<Found> f = co_await Descend(key, 0, fresh);
    if (!f.ok()) co_return f.status();
    GAddr a = f->node, parent = f->parent;
    uint32_t torn = 0, hops = 0;
    bool at_leaf = false;
    for (;;) {
      Result<bool> at = co_await ReadLeafFor(key, &a, &parent, &n, &hops, fresh);
      if (!at.ok()) co_return at.status();
      if (!*at) break;
      bool whole = true;
      for (const LeafEntry& e : n.leaf.entries) whole = whole && e.whole();
      if (whole) {
        at_leaf = true;
        break;
      }
      stats_.torn_entry_reads++;
      if (++torn > options_.read_retry_count_max) co_return Aborted("a leaf stayed torn");
    }
    if (!at_leaf) {
      if (++restarts >= options_.restart_count_max) co_return Aborted("a scan restarted too often");
      fresh = true;
      continue;
    }
    fresh = false;
    TakeLeaf(n, low, cursor, removed_max, &leaf_entries);
    std::reverse(leaf_entries.begin(), leaf_entries.end());
    for (const KeyValue& kv : leaf_entries) {
      if (out->size() - start >= limit) co_return Status::Ok();
      out->push_back(kv);
    }
    cursor = n.h.lower;
  }
  co_return Status::Ok();
}

void BTree::TakeLeaf(const NodeBuffer& n, uint64_t low, uint64_t high, uint64_t* removed_max,
                     std::vector<KeyValue>* entries) {
  stats_.leaves_read++;
  if (removed_max != nullptr) *removed_max = std::max(*removed_max, n.h.leftmost);
  entries->clear();
  for (const LeafEntry& e : n.leaf.entries) {
    const uint64_t k = e.key();
    if (k != kKeyEmpty && k >= low && k < high) entries->emplace_back(k, e.value());
  }
  std::sort(entries->begin(), entries->end());
}

}  // namespace pond::btree
