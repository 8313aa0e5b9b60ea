#include "pond/lock/lock_table.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <string>
#include <unordered_map>

#include "pond/base/assert.h"
#include "pond/base/hash.h"

namespace pond::lock {

namespace {

// Stripes bound the mutexes (and lock-state maps) to a few per worker thread's worth of
// parallelism, whatever the table size; a stripe covers buckets b with b % stripes == index.
constexpr uint32_t kStripesMax = 1024;

struct alignas(64) Bucket {
  std::atomic<uint64_t> slot[kSlotsPerBucket];
};
static_assert(sizeof(Bucket) == 64, "a lock bucket is one cache line (Lotus §4.1)");

struct Holder {
  LockOwner owner;
  LockMode mode;
};

struct KeyHash {
  size_t operator()(const LockKey& k) const { return static_cast<size_t>(k.Hash()); }
};

// One mutex for the slots of its buckets *and* the lock state of the keys in them: see the
// header and docs/locks.md "Races" for why the slot CAS and the state update must be one step.
struct alignas(64) Stripe {
  mutable std::mutex mu;
  std::unordered_map<LockKey, std::vector<Holder>, KeyHash> state;
};

uint8_t Contribution(LockMode mode) { return mode == LockMode::kWrite ? kWriteLocked : 2; }

// The slot word can only change under the stripe mutex, which the caller holds, so the CAS
// cannot lose; a loss would mean someone wrote a slot without the mutex.
void CasSlot(std::atomic<uint64_t>& slot, uint64_t expected, uint64_t desired) {
  bool swapped = slot.compare_exchange_strong(expected, desired, std::memory_order_acq_rel,
                                              std::memory_order_acquire);
  POND_ASSERT_MSG(swapped, "lock slot changed outside its stripe mutex");
  (void)swapped;
}

constexpr uint64_t kVoteCount = (uint64_t{1} << 48) - 1;

// One request by CN `cn` in a Boyer–Moore vote: its own count up, another's down, a vote at 0
// taken over.
void Vote(std::atomic<uint64_t>& vote, uint16_t cn) {
  uint64_t w = vote.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t count = w & kVoteCount;
    uint64_t next = 0;
    if (count == 0) {
      next = uint64_t{cn} << 48 | 1;
    } else if (w >> 48 == cn) {
      next = count == kVoteCount ? w : w + 1;
    } else {
      next = w - 1;
    }
    if (vote.compare_exchange_weak(w, next, std::memory_order_relaxed)) return;
  }
}

}  // namespace

struct LockTable::Impl {
  uint32_t buckets;
  uint16_t cn;
  uint32_t stripes;
  std::unique_ptr<Bucket[]> table;
  std::unique_ptr<Stripe[]> stripe;
  std::array<std::atomic<uint64_t>, kShards / 64> managed{};
  // Requests per managed shard, while counted (CountShards): the load policy's heat.
  std::atomic<bool> counting{false};
  std::array<std::atomic<uint64_t>, kShards> requests{};
  // Each shard's vote: the CN named in the top 16 bits, its count below (kVoteCount).
  std::array<std::atomic<uint64_t>, kShards> votes{};

  // Bucket from a remix of the hash, fingerprint from its low 56 bits: the two are independent,
  // so keys that share a bucket still differ in all 56 fingerprint bits.
  uint32_t BucketIndex(uint64_t h) const {
    return static_cast<uint32_t>(((Mix64(h) >> 32) * buckets) >> 32);
  }
  Stripe& StripeOf(uint32_t b) const { return stripe[b % stripes]; }

  // The slot of `fp` in bucket b, or -1. At most one slot holds a fingerprint (invariant).
  int FindSlot(uint32_t b, uint64_t fp) const {
    for (int i = 0; i < kSlotsPerBucket; i++) {
      uint64_t w = table[b].slot[i].load(std::memory_order_acquire);
      if (w != 0 && SlotFingerprint(w) == fp) return i;
    }
    return -1;
  }

  // Removes one hold's contribution from its slot. Caller holds the stripe mutex and has checked
  // that the hold exists, so the slot must carry it.
  void DropContribution(uint32_t b, uint64_t fp, LockMode mode) {
    int i = FindSlot(b, fp);
    POND_ASSERT_MSG(i >= 0, "held lock has no slot");
    std::atomic<uint64_t>& slot = table[b].slot[i];
    uint64_t w = slot.load(std::memory_order_acquire);
    uint8_t c = SlotCounter(w);
    uint64_t desired;
    if (mode == LockMode::kWrite) {
      POND_ASSERT_MSG(c == kWriteLocked, "write hold on a slot that is not write-locked");
      desired = 0;
    } else {
      POND_ASSERT_MSG(c >= 2 && c % 2 == 0, "read hold on a slot without readers");
      // The last reader frees the whole word, fingerprint included: a write lock claims only an
      // all-zero slot (Algorithm 1 line 12).
      desired = c == 2 ? 0 : PackSlot(fp, static_cast<uint8_t>(c - 2));
    }
    CasSlot(slot, w, desired);
  }
};

LockTable::LockTable(uint32_t buckets, uint16_t cn) : impl_(std::make_unique<Impl>()) {
  POND_CHECK_MSG(buckets >= 1 && buckets <= kLockBucketsMax, "lock table bucket count");
  impl_->buckets = buckets;
  impl_->cn = cn;
  impl_->stripes = std::min(buckets, kStripesMax);
  // Value-initialised: every slot starts free (0).
  impl_->table = std::make_unique<Bucket[]>(buckets);
  for (uint32_t b = 0; b < buckets; b++) {
    for (auto& s : impl_->table[b].slot) s.store(0, std::memory_order_relaxed);
  }
  impl_->stripe = std::make_unique<Stripe[]>(impl_->stripes);
  for (auto& w : impl_->managed) w.store(0, std::memory_order_relaxed);
}

LockTable::~LockTable() = default;

void LockTable::SetManaged(uint32_t shard, bool managed) {
  POND_CHECK(shard < kShards);
  uint64_t bit = uint64_t{1} << (shard % 64);
  if (managed) {
    impl_->managed[shard / 64].fetch_or(bit, std::memory_order_acq_rel);
  } else {
    impl_->managed[shard / 64].fetch_and(~bit, std::memory_order_acq_rel);
  }
}

void LockTable::CountShards(bool on) { impl_->counting.store(on, std::memory_order_relaxed); }

std::vector<uint64_t> LockTable::ShardRequests() const {
  std::vector<uint64_t> out(kShards);
  for (uint32_t s = 0; s < kShards; s++) {
    out[s] = impl_->requests[s].load(std::memory_order_relaxed);
  }
  return out;
}

std::vector<LockTable::Majority> LockTable::TakeShardMajorities() {
  std::vector<Majority> out(kShards);
  for (uint32_t s = 0; s < kShards; s++) {
    const uint64_t w = impl_->votes[s].exchange(0, std::memory_order_relaxed);
    out[s] = Majority{static_cast<uint16_t>(w >> 48), w & kVoteCount};
  }
  return out;
}

bool LockTable::Manages(uint32_t shard) const {
  POND_ASSERT(shard < kShards);
  return (impl_->managed[shard / 64].load(std::memory_order_acquire) >> (shard % 64)) & 1;
}

uint64_t LockTable::FingerprintOf(const LockKey& key) {
  uint64_t fp = key.Hash() & kFingerprintMask;
  // 0 is the free slot; the one fingerprint in 2^56 that hashes to 0 shares 1's (a false
  // conflict at worst).
  return fp == 0 ? 1 : fp;
}

uint32_t LockTable::BucketOf(const LockKey& key) const { return impl_->BucketIndex(key.Hash()); }

uint64_t LockTable::SlotWord(uint32_t bucket, int slot) const {
  POND_CHECK(bucket < impl_->buckets && slot >= 0 && slot < kSlotsPerBucket);
  return impl_->table[bucket].slot[slot].load(std::memory_order_acquire);
}

uint32_t LockTable::buckets() const { return impl_->buckets; }
uint16_t LockTable::cn() const { return impl_->cn; }

Status LockTable::Acquire(const LockKey& key, LockMode mode, const LockOwner& owner) {
  const uint32_t b = BucketOf(key);
  const uint64_t fp = FingerprintOf(key);
  Stripe& st = impl_->StripeOf(b);
  std::lock_guard guard(st.mu);
  // Checked under the stripe mutex, so "SetManaged(s, false), then look at every stripe" sees
  // every grant of shard s that will ever happen: the cut resharding needs to drain a shard.
  if (!Manages(key.shard())) {
    stats_.wrong_shard.fetch_add(1, std::memory_order_relaxed);
    return WrongShard("shard " + std::to_string(key.shard()) + " not managed by CN " +
                      std::to_string(impl_->cn));
  }
  if (impl_->counting.load(std::memory_order_relaxed)) {
    impl_->requests[key.shard()].fetch_add(1, std::memory_order_relaxed);
    Vote(impl_->votes[key.shard()], owner.cn);
  }

  // Line 5 of Algorithm 1: does this owner already hold the key?
  auto it = st.state.find(key);
  if (it != st.state.end()) {
    for (Holder& h : it->second) {
      if (!(h.owner == owner)) continue;
      if (h.mode == LockMode::kWrite || mode == LockMode::kRead) {
        stats_.repeated.fetch_add(1, std::memory_order_relaxed);
        return Status::Ok();
      }
      // Upgrade. The owner's read contributes 2 to the slot, so a counter of exactly 2 means no
      // one else reads this slot (a colliding key's readers included).
      int i = impl_->FindSlot(b, fp);
      POND_ASSERT_MSG(i >= 0, "held lock has no slot");
      std::atomic<uint64_t>& slot = impl_->table[b].slot[i];
      uint64_t w = slot.load(std::memory_order_acquire);
      if (SlotCounter(w) != 2) {
        stats_.conflicts.fetch_add(1, std::memory_order_relaxed);
        return Conflict("upgrade to write lock needs the sole reader");
      }
      CasSlot(slot, w, PackSlot(fp, kWriteLocked));
      h.mode = LockMode::kWrite;
      stats_.upgraded.fetch_add(1, std::memory_order_relaxed);
      return Status::Ok();
    }
  }

  // Lines 7-10: find the key's slot, or a free one.
  int match = -1, free_slot = -1;
  uint64_t w = 0;
  for (int i = 0; i < kSlotsPerBucket; i++) {
    uint64_t x = impl_->table[b].slot[i].load(std::memory_order_acquire);
    if (x == 0) {
      if (free_slot < 0) free_slot = i;
    } else if (SlotFingerprint(x) == fp) {
      match = i;
      w = x;
      break;
    }
  }
  int at;
  uint64_t desired;
  if (match >= 0) {
    uint8_t c = SlotCounter(w);
    if (mode == LockMode::kWrite || c == kWriteLocked) {
      stats_.conflicts.fetch_add(1, std::memory_order_relaxed);
      return Conflict(mode == LockMode::kWrite ? "key is locked" : "key is write-locked");
    }
    if (c >= kReadCounterMax) {
      stats_.counter_full.fetch_add(1, std::memory_order_relaxed);
      return Conflict("read-lock counter full");
    }
    at = match;
    desired = PackSlot(fp, static_cast<uint8_t>(c + 2));
  } else if (free_slot >= 0) {
    at = free_slot;
    w = 0;
    desired = PackSlot(fp, Contribution(mode));
  } else {
    stats_.bucket_full.fetch_add(1, std::memory_order_relaxed);
    return Conflict("lock bucket full");
  }

  // Lines 11-21: the CAS, then the lock state, inside one critical section.
  CasSlot(impl_->table[b].slot[at], w, desired);
  auto& holders = it != st.state.end() ? it->second : st.state[key];
  POND_ASSERT(holders.size() < kReadCounterMax / 2 + 1u);
  holders.push_back(Holder{owner, mode});
  stats_.acquired.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status LockTable::Release(const LockKey& key, LockMode mode, const LockOwner& owner) {
  const uint32_t b = BucketOf(key);
  const uint64_t fp = FingerprintOf(key);
  Stripe& st = impl_->StripeOf(b);
  std::lock_guard guard(st.mu);
  auto it = st.state.find(key);
  if (it != st.state.end()) {
    auto& holders = it->second;
    for (size_t j = 0; j < holders.size(); j++) {
      if (!(holders[j].owner == owner) || holders[j].mode != mode) continue;
      impl_->DropContribution(b, fp, mode);
      holders[j] = holders.back();
      holders.pop_back();
      if (holders.empty()) st.state.erase(it);
      stats_.released.fetch_add(1, std::memory_order_relaxed);
      return Status::Ok();
    }
  }
  stats_.stray_releases.fetch_add(1, std::memory_order_relaxed);
  return NotFound("no such lock held by this owner");
}

size_t LockTable::ReleaseAllOf(uint16_t cn) {
  size_t n = 0;
  for (uint32_t s = 0; s < impl_->stripes; s++) {
    Stripe& st = impl_->stripe[s];
    std::lock_guard guard(st.mu);
    for (auto it = st.state.begin(); it != st.state.end();) {
      const LockKey& key = it->first;
      auto& holders = it->second;
      const uint32_t b = BucketOf(key);
      const uint64_t fp = FingerprintOf(key);
      for (size_t j = 0; j < holders.size();) {
        if (holders[j].owner.cn != cn) {
          j++;
          continue;
        }
        impl_->DropContribution(b, fp, holders[j].mode);
        holders[j] = holders.back();
        holders.pop_back();
        n++;
      }
      it = holders.empty() ? st.state.erase(it) : std::next(it);
    }
  }
  stats_.released.fetch_add(n, std::memory_order_relaxed);
  return n;
}

size_t LockTable::HeldIn(const std::vector<uint32_t>& shards) const {
  size_t held = 0;
  for (const Held& h : HeldLocks()) {
    held += std::binary_search(shards.begin(), shards.end(), h.key.shard());
  }
  return held;
}

std::vector<LockTable::Held> LockTable::HeldLocks() const {
  std::vector<Held> out;
  for (uint32_t s = 0; s < impl_->stripes; s++) {
    Stripe& st = impl_->stripe[s];
    std::lock_guard guard(st.mu);
    for (const auto& [key, holders] : st.state) {
      for (const Holder& h : holders) out.push_back(Held{key, h.mode, h.owner});
    }
  }
  return out;
}

Status LockTable::VerifyInvariants() const {
  for (uint32_t s = 0; s < impl_->stripes; s++) {
    Stripe& st = impl_->stripe[s];
    std::lock_guard guard(st.mu);
    // Expected counter of every (bucket, fingerprint), summed from the lock state.
    std::unordered_map<uint32_t, std::unordered_map<uint64_t, uint32_t>> by_bucket;
    for (const auto& [key, holders] : st.state) {
      const uint32_t b = BucketOf(key);
      if (b % impl_->stripes != s) return Internal("lock state kept in the wrong stripe");
      if (holders.empty()) return Internal("lock state keeps a key with no holders");
      int writers = 0;
      for (size_t j = 0; j < holders.size(); j++) {
        if (holders[j].mode == LockMode::kWrite) writers++;
        for (size_t k = j + 1; k < holders.size(); k++) {
          if (holders[j].owner == holders[k].owner) return Internal("owner holds a key twice");
        }
        by_bucket[b][FingerprintOf(key)] += Contribution(holders[j].mode);
      }
      if (writers > 0 && holders.size() > 1) {
        return Internal("key held by a writer and someone else");
      }
    }
    for (uint32_t b = s; b < impl_->buckets; b += impl_->stripes) {
      auto found = by_bucket.find(b);
      size_t matched = 0;
      for (int i = 0; i < kSlotsPerBucket; i++) {
        uint64_t w = impl_->table[b].slot[i].load(std::memory_order_acquire);
        if (w == 0) continue;
        uint8_t c = SlotCounter(w);
        uint64_t fp = SlotFingerprint(w);
        if (c == 0) return Internal("slot with a fingerprint but counter 0");
        for (int k = i + 1; k < kSlotsPerBucket; k++) {
          uint64_t x = impl_->table[b].slot[k].load(std::memory_order_acquire);
          if (x != 0 && SlotFingerprint(x) == fp) {
            return Internal("fingerprint in two slots of bucket " + std::to_string(b));
          }
        }
        uint32_t want = 0;
        if (found != by_bucket.end()) {
          auto f = found->second.find(fp);
          if (f != found->second.end()) {
            want = f->second;
            matched++;
          }
        }
        if (c == kWriteLocked ? want != kWriteLocked : (c % 2 != 0 || want != c)) {
          return Internal("slot counter " + std::to_string(c) + " but holders add up to " +
                          std::to_string(want) + " in bucket " + std::to_string(b));
        }
      }
      if (found != by_bucket.end() && matched != found->second.size()) {
        return Internal("held lock without a slot in bucket " + std::to_string(b));
      }
    }
  }
  return Status::Ok();
}

}  // namespace pond::lock
