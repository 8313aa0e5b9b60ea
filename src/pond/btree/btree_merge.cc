// Merges of empty leaves into their right siblings (docs/btree.md "Merges"). Every write is one
// line's write-back under its word, and each prefix of a merge's writes leaves a tree that every
// reader walks: a merging leaf is empty and still covers its range; its sibling may already
// cover it too; a merged leaf covers nothing and sends every reader right, as a split does. A
// merger that dies leaves its merging leaf to the next writer that takes its word.
#include <algorithm>

#include "pond/btree/btree.h"

namespace pond::btree {

Task<Status> BTree::MergeEmptyLeaf(uint64_t lo) {
  Result<Found> f = co_await Descend(lo, 0, /*fresh=*/true);
  if (!f.ok()) co_return f.status();
  if (f->short_tree || f->parent.null()) co_return Status::Ok();  // the root leaf stays
  const GAddr e = f->node, p = f->parent;
  NodeBuffer en, rn, pn;
  std::vector<GAddr> held;
  // Gives up: every line held is released, nothing having been written.
  auto give_up = [&](Status why) -> Task<Status> {
    for (auto it = held.rbegin(); it != held.rend(); ++it) (void)co_await UnlockNow(*it);
    stats_.merges_given_up++;
    co_return why.code() == Code::kAborted ? Status::Ok() : why;
  };
  auto lock_and_read = [&](GAddr a, NodeBuffer* n, bool wait) -> Task<Status> {
    POND_CO_RETURN_IF_ERROR(co_await Lock(a, wait));
    held.push_back(a);
    co_return co_await ReadNode(a, n);
  };

  // E first, waited for as by any writer; R and P after it only if free now (left to right,
  // then up: no operation holds a leaf while it waits for another).
  if (Status s = co_await lock_and_read(e, &en, true); !s.ok()) co_return co_await give_up(s);
  if (!en.valid() || en.h.level != 0 || en.h.state != kNodeLive || en.h.lower != lo ||
      en.h.sibling == 0 || !en.leaf.empty()) {
    co_return co_await give_up(Status::Ok());
  }
  const GAddr r{en.h.sibling};
  const uint64_t hi = en.h.upper;
  const GAddr we = WordOf(e), wr = WordOf(r), wp = WordOf(p);
  if (we == wr || we == wp || wr == wp) co_return co_await give_up(Status::Ok());
  if (Status s = co_await lock_and_read(r, &rn, false); !s.ok()) co_return co_await give_up(s);
  if (!rn.valid() || rn.h.level != 0 || rn.h.state != kNodeLive || rn.h.lower != hi) {
    co_return co_await give_up(Status::Ok());
  }
  if (Status s = co_await lock_and_read(p, &pn, false); !s.ok()) co_return co_await give_up(s);
  // P must name E at lo and R at hi, next to each other: E's entry goes, and R's key becomes lo.
  InternalNode& in = pn.internal;
  int at = -2;  // R's entry; E is in the entry before it, or P's leftmost child (-1)
  if (pn.valid() && in.h.level == 1 && in.h.lower <= lo && lo < in.h.upper) {
    if (GAddr{in.h.leftmost} == e && in.h.lower == lo) {
      at = 0;
    } else {
      for (int i = 0; i < in.h.count; i++) {
        if (in.entries[i].key == lo && GAddr{in.entries[i].child} == e) at = i + 1;
      }
    }
  }
  if (at < 0 || at >= in.h.count || in.entries[at].key != hi || GAddr{in.entries[at].child} != r) {
    co_return co_await give_up(Status::Ok());
  }

  // From here on the merge only goes forward: each write is a step a dead merger may stop at.
  en.h.state = kNodeMerging;
  en.BumpVersion();
  if (Status s = co_await WriteHeld(e, en); !s.ok()) co_return co_await give_up(s);
  held.erase(held.begin(), held.begin() + 2);  // E and R are released by HandOverRange
  if (Status s = co_await HandOverRange(e, &en, r, &rn); !s.ok()) {
    (void)co_await UnlockNow(p);
    co_return s;
  }
  if (at == 0 && GAddr{in.h.leftmost} == e) {
    in.h.leftmost = r.raw;
    std::copy(in.entries + 1, in.entries + in.h.count, in.entries);
  } else {
    in.entries[at - 1].child = r.raw;
    std::copy(in.entries + at + 1, in.entries + in.h.count, in.entries + at);
  }
  in.h.count--;
  pn.BumpVersion();
  cache_.Drop(p);
  stats_.leaf_merges++;
  co_return co_await Publish(p, Piece{p, &pn, kNodeBytes});
}

Task<Status> BTree::HandOverRange(GAddr e, NodeBuffer* en, GAddr r, NodeBuffer* rn) {
  Status s;
  if (rn->h.lower == en->h.upper) {
    // R covers E's range too, and takes its removal stamp: a snapshot scan older than a key
    // taken out of E must still be told so.
    rn->h.lower = en->h.lower;
    rn->h.leftmost = std::max(rn->h.leftmost, en->h.leftmost);
    rn->BumpVersion();
    s = co_await Publish(r, Piece{r, rn, kNodeBytes});
  } else {
    s = co_await UnlockNow(r);  // a merger that died after this step
  }
  if (!s.ok()) {
    (void)co_await UnlockNow(e);  // still merging: the next writer to take it finishes
    co_return s;
  }
  en->h.upper = en->h.lower;
  en->h.sibling = r.raw;  // past merged leaves a finishing writer skipped
  en->h.state = kNodeMerged;
  en->BumpVersion();
  co_return co_await Publish(e, Piece{e, en, kNodeBytes});
}

Task<Status> BTree::FinishMerge(GAddr e, NodeBuffer* en) {
  // E's range goes to the first leaf right of it that is not merged: while E was merging, its
  // sibling may have merged on into the next (merged leaves are written no more, so they are
  // read without their locks).
  GAddr r{en->h.sibling};
  NodeBuffer rn;
  Status s;
  for (uint32_t hops = 0; s.ok(); hops++) {
    s = co_await ReadNode(r, &rn);
    if (!s.ok() || rn.h.state != kNodeMerged) break;
    if (hops >= options_.sibling_hops_max) s = Aborted("too many merged leaves in a row");
    r = GAddr{rn.h.sibling};
  }
  if (s.ok() && WordOf(r) == WordOf(e)) {
    s = Internal("a merging leaf shares its lock word with the leaf that is to cover its range");
  }
  if (s.ok()) s = co_await Lock(r, /*wait=*/false);
  if (!s.ok()) {
    (void)co_await UnlockNow(e);
    co_return s;
  }
  s = co_await ReadNode(r, &rn);
  if (s.ok() && rn.valid() && rn.h.level == 0 && rn.h.state != kNodeLive) {
    // It merged meanwhile, or it is merging too and its merger died: finish that one first, and
    // let the caller come back to E.
    if (rn.h.state == kNodeMerging) {
      (void)co_await FinishMerge(r, &rn);
    } else {
      (void)co_await UnlockNow(r);
    }
    (void)co_await UnlockNow(e);
    co_return Aborted("the leaf that is to cover a merging leaf's range changed");
  }
  // It begins where E ends, or where E begins if the merger died after step 3.
  if (s.ok() && (!rn.valid() || rn.h.level != 0 ||
                 (rn.h.lower != en->h.upper && rn.h.lower != en->h.lower))) {
    s = Corruption("a merging leaf's sibling does not continue its range");
  }
  if (!s.ok()) {
    (void)co_await UnlockNow(r);
    (void)co_await UnlockNow(e);
    co_return s;
  }
  stats_.merges_finished++;
  co_return co_await HandOverRange(e, en, r, &rn);
}

Task<Status> BTree::Unlink(GAddr l, GAddr e) {
  POND_CO_RETURN_IF_ERROR(co_await Lock(l, /*wait=*/false));
  NodeBuffer ln, en;
  Status s = co_await ReadNode(l, &ln);
  // A merged leaf is written no more, so it is read without its lock.
  if (s.ok()) s = co_await ReadNode(e, &en);
  if (!s.ok() || !ln.valid() || ln.h.level != 0 || ln.h.state != kNodeLive ||
      GAddr{ln.h.sibling} != e || en.h.state != kNodeMerged) {
    Status released = co_await UnlockNow(l);
    co_return s.ok() ? released : s;
  }
  ln.h.sibling = en.h.sibling;
  ln.BumpVersion();
  stats_.merged_unlinked++;
  co_return co_await Publish(l, Piece{l, &ln, kNodeBytes});
}

}  // namespace pond::btree
