// The locks and copies of BTree (docs/btree.md "Replicated nodes"): which copies of a range are
// written and which one is read, rounds that outlast an MN that does not answer, HOCL locks
// taken on every copy, the repair of what a dead holder left on some copies only, write-backs in
// replica order, and chunks. With one copy (R = 1) each step is what Sherman's tree does: one
// CAS to lock, one batch to write back and release.
#include <bit>
#include <cstring>
#include <string>

#include "pond/btree/btree.h"

namespace pond::btree {

namespace {

// The source of every lock release: a WRITE's buffer must outlive its Flush.
const uint64_t kUnlockedWord = 0;

Op WriteOp(GAddr at, const void* from, uint32_t len) {
  return Op{Verb::kWrite, len, at, const_cast<void*>(from), 0, 0};
}
Op CasOp(GAddr at, uint64_t expected, uint64_t desired, uint64_t* old) {
  return Op{Verb::kCas, 8, at, old, expected, desired};
}

}  // namespace

uint64_t BTree::WrittenCopies(MnId mn) const {
  const int copies = layout_.replication();
  if (copies == 1) return 1;
  const uint64_t down = options_.placement == nullptr ? 0 : options_.placement->down_mask();
  const size_t n = layout_.num_ranges();
  uint64_t bits = 0;
  for (int k = 0; k < copies; k++) {
    if (((down >> ((mn + static_cast<size_t>(k)) % n)) & 1) == 0) bits |= uint64_t{1} << k;
  }
  return bits;
}

int BTree::ReadCopy(MnId mn) const {
  const store::Placement* p = options_.placement;
  if (layout_.replication() == 1 || p == nullptr) return 0;
  const size_t n = layout_.num_ranges();
  for (int k = 0; k < layout_.replication(); k++) {
    if (p->Readable(static_cast<MnId>((mn + static_cast<size_t>(k)) % n))) return k;
  }
  POND_CHECK_MSG(false, "no copy of a tree range is readable");
  return 0;
}

GAddr BTree::WordOf(GAddr line) const {
  const size_t r = layout_.Range(line.mn());
  if (line == layout_.Header(r)) return layout_.HeaderWord(r);
  return layout_.LockFor(line);
}

Task<Status> BTree::RunRound(const std::vector<Op>& ops, uint64_t* gave_up) {
  if (gave_up != nullptr) *gave_up = 0;
  if (ops.empty()) co_return Status::Ok();
  ep_.PostAgain(ops, ~uint64_t{0});  // (posts every op: the first time, here)
  if (layout_.replication() == 1 || options_.placement == nullptr) co_return co_await ep_.Flush();
  Endpoint::FlushResult r = co_await ep_.FlushReporting();
  // As a commit round does (txn/mvcc_txn.cc): an MN that did not answer may have taken the ops
  // or not, so the round is over only once it answers them posted again — beyond a link that was
  // down for a while — or is declared down, when what it holds no longer counts.
  uint64_t waited_ns = 0;
  while (r.unreachable != 0 && r.status.code() == Code::kUnavailable) {
    uint64_t silent = r.unreachable & ~options_.placement->down_mask();
    if (options_.rounds_end_at_leaving) {
      const uint64_t leaving = silent & options_.placement->leaving_mask();
      if (gave_up != nullptr) *gave_up |= leaving;
      silent &= ~leaving;
    }
    if (silent == 0) co_return Status::Ok();
    if (waited_ns < store::kPostAgainEveryNs) {
      co_await ep_.scheduler().SleepFor(store::kUnreachablePollNs);
      waited_ns += store::kUnreachablePollNs;
      continue;
    }
    waited_ns = 0;
    ep_.PostAgain(ops, silent);
    stats_.rounds_posted_again++;
    r = co_await ep_.FlushReporting();
  }
  co_return r.status;
}

Task<Status> BTree::Lock(GAddr line, bool wait) {
  const bool local = options_.local_locks;
  const GAddr word = WordOf(line);
  if (local && !wait && !locks_.TryAcquire(word.raw)) {
    co_return Aborted("a node's lock word is held by this worker");
  }
  if (local && wait && co_await locks_.Acquire(word.raw, line.raw)) co_return Status::Ok();
  const uint64_t mine = WordValue(line);
  auto copy_down = [&](int k) { return (WrittenCopies(line.mn()) >> k & 1) == 0; };
  auto gone = [&](uint64_t w) { return options_.gone != nullptr && options_.gone->Gone(w); };
  std::vector<Op> ops;
  uint64_t old[store::kReplicationMax] = {};
  uint64_t dead[store::kReplicationMax] = {};
  const uint32_t attempts = wait ? options_.lock_retry_count_max : 1;
  for (uint32_t attempt = 0; attempt < attempts; attempt++) {
    // Copies are taken in order, the first alone: whoever holds it holds the line, so the rest
    // are free for it — unless two CNs see different copies down for a moment, when the one that
    // meets a word held on a later copy lets go of all and tries again.
    Held h{line.raw, 0, mine, Generation()};
    const uint64_t copies = WrittenCopies(line.mn());
    const int first = std::countr_zero(copies);
    bool refused = false;
    Status s;
    for (int phase = 0; phase < 2 && !refused && s.ok(); phase++) {
      const uint64_t want = phase == 0 ? uint64_t{1} << first : copies & ~(uint64_t{1} << first);
      if (want == 0) continue;
      ops.clear();
      for (int k = 0; k < layout_.replication(); k++) {
        if (want >> k & 1) ops.push_back(CasOp(layout_.Copy(word, k), 0, mine, &old[k]));
      }
      uint64_t gave_up = 0;
      s = co_await RunRound(ops, &gave_up);
      // A word this CAS took is held even on a copy declared down meanwhile: its MN may be back
      // blank, and the word on it (PostRelease). A dead holder's word is taken from it by a
      // second CAS, as another CN may take it first. A copy on a leaving MN that did not answer
      // is neither held nor free: the words won on the others are let go, and the lock refused
      // (rounds_end_at_leaving).
      auto unanswered = [&](int k) { return (gave_up >> layout_.Copy(word, k).mn()) & 1; };
      bool unknown = false;
      ops.clear();
      for (int k = 0; k < layout_.replication() && s.ok(); k++) {
        if ((want >> k & 1) == 0) continue;
        if (unanswered(k)) {
          unknown = true;
        } else if (old[k] == 0 || old[k] == mine) {
          h.copies |= uint64_t{1} << k;
        } else if (copy_down(k)) {
          continue;
        } else if (gone(old[k])) {
          dead[k] = old[k];
          ops.push_back(CasOp(layout_.Copy(word, k), old[k], mine, &old[k]));
        } else {
          refused = true;
        }
      }
      // Not taken at all once a copy is unknown: the words won so far are let go below. Once
      // taken, each word the second CAS won is counted, unknown copies or not, so that it is
      // let go too.
      const bool taking = !unknown;
      if (s.ok() && taking) s = co_await RunRound(ops, &gave_up);
      for (int k = 0; k < layout_.replication() && s.ok() && taking; k++) {
        if ((want >> k & 1) == 0 || dead[k] == 0 || (h.copies >> k & 1)) continue;
        if (unanswered(k)) {
          unknown = true;
        } else if (old[k] == dead[k] || old[k] == mine) {
          h.copies |= uint64_t{1} << k;
          stats_.gone_words_taken++;
          if (options_.gone_words_taken != nullptr) (*options_.gone_words_taken)++;
        } else if (!copy_down(k)) {
          refused = true;
        }
      }
      if (s.ok() && unknown) {
        // What the words won so far hold is let go below; the dead holders' are not taken.
        std::fill(std::begin(dead), std::end(dead), 0);
        s = Unavailable("a copy of a tree lock word is on a leaving MN that did not answer");
      }
    }
    if (s.ok() && !refused) {
      held_.push_back(h);
      // What a dead holder may have written to some copies only is made one again, from the
      // copy readers use, before anything else is written under the word.
      for (int k = 0; k < layout_.replication(); k++) {
        if (dead[k] == 0) continue;
        s = co_await Repair(line.mn(), dead[k]);
        if (!s.ok()) {
          (void)co_await UnlockNow(line);
          co_return s;
        }
        for (int j = k + 1; j < layout_.replication(); j++) {
          if (dead[j] == dead[k]) dead[j] = 0;
        }
      }
      co_return Status::Ok();
    }
    std::fill(std::begin(dead), std::end(dead), 0);
    ops.clear();
    PostRelease(h, &ops);
    Status released = co_await RunRound(ops);
    if (!s.ok() || !released.ok()) {
      if (local) locks_.Abandon(word.raw);
      co_return s.ok() ? released : s;
    }
    stats_.lock_cas_failed++;
  }
  if (local) locks_.Abandon(word.raw);
  co_return Aborted("a node's global lock word stayed taken");
}

void BTree::PostRelease(const Held& h, std::vector<Op>* ops) {
  const GAddr word = WordOf(GAddr{h.line});
  const uint64_t written = WrittenCopies(GAddr{h.line}.mn());
  const bool same = Generation() == h.generation;
  for (int k = 0; k < layout_.replication(); k++) {
    if ((h.copies >> k & 1) == 0) continue;
    if (same && (written >> k & 1)) {
      ops->push_back(WriteOp(layout_.Copy(word, k), &kUnlockedWord, 8));
    } else {
      ops->push_back(CasOp(layout_.Copy(word, k), h.value, 0, &release_seen_[k]));
    }
  }
}

Task<Status> BTree::Repair(MnId range_mn, uint64_t dead_word) {
  if (layout_.replication() == 1) co_return Status::Ok();
  const uint32_t n = static_cast<uint32_t>(dead_word) >> 8 & ((uint32_t{1} << kLineBits) - 1);
  const GAddr line = layout_.LineAt(range_mn, n);
  const uint32_t len = LineBytes(n);
  NodeBuffer buf;
  // The copy read is the one every other is written from, even if another becomes the one
  // readers use meanwhile (a joining MN coming up): that one is then written too.
  const int read = ReadCopy(line.mn());
  ep_.Read(layout_.Copy(line, read), &buf, len);
  POND_CO_RETURN_IF_ERROR(co_await ep_.Flush());
  const uint64_t copies = WrittenCopies(line.mn());
  std::vector<Op> ops;
  for (int k = 0; k < layout_.replication(); k++) {
    if ((copies >> k & 1) && k != read) ops.push_back(WriteOp(layout_.Copy(line, k), &buf, len));
  }
  stats_.lines_repaired++;
  co_return co_await RunRound(ops);
}

Task<Status> BTree::Publish(GAddr line, Piece first, Piece second, bool release) {
  std::vector<Piece> pieces;
  for (const Piece& p : {first, second}) {
    if (p.len != 0) pieces.push_back(p);
  }
  const GAddr word = WordOf(line);
  const bool hand = release && options_.local_locks && locks_.WillHandOver(word.raw, line.raw);
  std::vector<Op> ops;
  // The copies readers do not use first: whatever a reader sees is then on every copy, and an
  // MN that fails leaves no reader with something the rest lack (the records' replica order).
  // The second round writes every copy the first did not, not the one read now: if a joining MN
  // came up between the rounds, readers moved to its copy, already written, and the copy they
  // used before must still be (docs/btree.md "Replicated nodes").
  uint64_t first_round[2] = {0, 0};
  for (size_t i = 0; i < pieces.size(); i++) {
    const Piece& p = pieces[i];
    first_round[i] = WrittenCopies(p.at.mn()) & ~(uint64_t{1} << ReadCopy(p.at.mn()));
    for (int k = 0; k < layout_.replication(); k++) {
      if (first_round[i] >> k & 1) ops.push_back(WriteOp(layout_.Copy(p.at, k), p.from, p.len));
    }
  }
  Status s = co_await RunRound(ops);
  ops.clear();
  for (size_t i = 0; i < pieces.size() && s.ok(); i++) {
    const Piece& p = pieces[i];
    const uint64_t rest = WrittenCopies(p.at.mn()) & ~first_round[i];
    for (int k = 0; k < layout_.replication(); k++) {
      if (rest >> k & 1) ops.push_back(WriteOp(layout_.Copy(p.at, k), p.from, p.len));
    }
  }
  if (release && !hand) {
    if (!options_.combine && !ops.empty()) {
      // Without command combination the release waits for the write-back: a round trip more.
      s = co_await RunRound(ops);
      ops.clear();
    }
    PostRelease(TakeHeld(line), &ops);
  }
  Status released = co_await RunRound(ops);
  if (release && options_.local_locks) locks_.Release(word.raw);
  co_return s.ok() ? released : s;
}

BTree::Held BTree::TakeHeld(GAddr line) {
  for (size_t i = 0; i < held_.size(); i++) {
    if (held_[i].line != line.raw) continue;
    const Held h = held_[i];
    held_[i] = held_.back();
    held_.pop_back();
    return h;
  }
  POND_CHECK_MSG(false, "a tree lock released that was not held");
  return {};
}

Task<Status> BTree::WriteNew(GAddr node, const NodeBuffer& n) {
  std::vector<Op> ops;
  const uint64_t copies = WrittenCopies(node.mn());
  for (int k = 0; k < layout_.replication(); k++) {
    if (copies >> k & 1) ops.push_back(WriteOp(layout_.Copy(node, k), &n, kNodeBytes));
  }
  co_return co_await RunRound(ops);
}

Task<Result<uint64_t>> BTree::TakeChunk(size_t r) {
  const uint64_t chunk = layout_.space().chunk_bytes;
  uint64_t old = 0;
  if (layout_.replication() == 1) {
    ep_.Faa(layout_.Cursor(r), chunk, &old);
    POND_CO_RETURN_IF_ERROR(co_await ep_.Flush());
    co_return old;
  }
  const GAddr header = layout_.Header(r);
  POND_CO_RETURN_IF_ERROR(co_await Lock(header));
  ep_.Read(ReadAddr(layout_.Cursor(r)), &old, 8);
  if (Status s = co_await ep_.Flush(); !s.ok()) {
    (void)co_await UnlockNow(header);
    co_return s;
  }
  const uint64_t next = old + chunk;
  POND_CO_RETURN_IF_ERROR(co_await Publish(header, Piece{layout_.Cursor(r), &next, 8}));
  co_return old;
}

Task<Result<uint64_t>> BTree::CopyToJoining(MnId range_mn, int k, uint32_t first, uint32_t end) {
  const store::Placement* p = options_.placement;
  const size_t r = layout_.Range(range_mn);
  const MnId to = static_cast<MnId>((range_mn + static_cast<size_t>(k)) % layout_.num_ranges());
  auto joining = [&] { return p != nullptr && p->IsJoining(to); };
  if (!joining()) co_return Unavailable("MN " + std::to_string(to) + " is not joining");
  // Nodes past the cursor as it is now are carved later, by operations that write `to` as well.
  uint64_t cursor = 0;
  ep_.Read(ReadAddr(layout_.Cursor(r)), &cursor, 8);
  POND_CO_RETURN_IF_ERROR(co_await ep_.Flush());
  uint64_t copied = 0;
  NodeBuffer buf;
  std::vector<Op> ops;
  for (uint32_t line = first; line < end; line++) {
    const GAddr a = layout_.LineAt(range_mn, line);
    if (line > 0 && a.offset() + kNodeBytes > cursor) break;
    if (!joining()) co_return Unavailable("MN " + std::to_string(to) + " is not joining");
    POND_CO_RETURN_IF_ERROR(co_await Lock(a));
    ep_.Read(ReadAddr(a), &buf, LineBytes(line));
    Status s = co_await ep_.Flush();
    if (s.ok()) {
      ops.assign(1, WriteOp(layout_.Copy(a, k), &buf, LineBytes(line)));
      s = co_await RunRound(ops);
    }
    Status released = co_await UnlockNow(a);
    POND_CO_RETURN_IF_ERROR(s);
    POND_CO_RETURN_IF_ERROR(released);
    copied++;
  }
  co_return copied;
}

}  // namespace pond::btree
