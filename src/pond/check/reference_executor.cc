#include "pond/check/reference_executor.h"

#include <algorithm>
#include <vector>

#include "pond/base/hash.h"

namespace pond::check {

std::string_view ExecutorFlawName(ExecutorFlaw flaw) {
  switch (flaw) {
    case ExecutorFlaw::kNone:
      return "none";
    case ExecutorFlaw::kSnapshotIsolation:
      return "snapshot-isolation";
    case ExecutorFlaw::kStaleSnapshot:
      return "stale-snapshot";
    case ExecutorFlaw::kLostUpdate:
      return "lost-update";
    case ExecutorFlaw::kAbortedRead:
      return "aborted-read";
    case ExecutorFlaw::kIntermediateRead:
      return "intermediate-read";
  }
  return "?";
}

namespace {

// splitmix64: the checker layer has no Rng of its own to borrow (runtime/ sits beside it),
// and a test generator needs nothing stronger.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : x_(seed) {}
  uint64_t Next() { return Mix64(x_ += 0x9e3779b97f4a7c15ULL); }
  uint64_t Uniform(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  bool Chance(double p) { return static_cast<double>(Next() >> 11) * 0x1.0p-53 < p; }

 private:
  uint64_t x_;
};

struct PlannedMop {
  bool is_append;
  uint64_t key;
  uint64_t element;
};

struct KeyData {
  std::vector<uint64_t> elements;
  std::vector<uint64_t> commit_seq;  // parallel to elements, non-decreasing
  uint64_t next_element = 1;
  uint32_t appends_planned = 0;
};

struct Client {
  bool busy = false;
  uint32_t generation = 0;  // bumped after an info, so the process id is fresh (Jepsen's rule)
  std::vector<PlannedMop> mops;
  size_t done = 0;        // mops already executed (the intermediate-read flaw runs some early)
  uint64_t snapshot = 0;  // commit sequence visible to its reads (snapshot flaws)
  TxnRecorder rec;
};

class Executor {
 public:
  Executor(const ExecutorOptions& o, Recorder& rec) : o_(o), rec_(rec), rng_(o.seed) {}

  Result<ExecutorStats> Run() {
    if (o_.process_count == 0 || o_.active_key_count == 0 || o_.appends_per_key_max == 0 ||
        o_.mops_per_txn_min == 0 || o_.mops_per_txn_min > o_.mops_per_txn_max ||
        o_.mops_per_txn_max > 1024) {
      return InvalidArgument("reference executor: bad options");
    }
    clients_.resize(o_.process_count);
    for (uint32_t i = 0; i < o_.active_key_count; i++) active_.push_back(NewKey());
    uint64_t started = 0, completed = 0;
    while (completed < o_.txn_count) {
      now_ns_ += 1 + rng_.Uniform(100);
      uint32_t slot = static_cast<uint32_t>(rng_.Uniform(o_.process_count));
      Client& c = clients_[slot];
      if (!c.busy) {
        if (started == o_.txn_count) continue;
        started++;
        Start(slot, c);
      } else {
        completed++;
        Complete(c);
      }
    }
    POND_RETURN_IF_ERROR(rec_.Flush());
    return stats_;
  }

 private:
  bool Snapshot() const {
    return o_.flaw == ExecutorFlaw::kSnapshotIsolation || o_.flaw == ExecutorFlaw::kStaleSnapshot ||
           o_.flaw == ExecutorFlaw::kLostUpdate;
  }

  uint64_t NewKey() {
    keys_.emplace_back();
    return keys_.size() - 1;
  }

  // A random active key; retires it once it has had its share of appends so reads stay short.
  uint64_t PickKey(bool for_append) {
    size_t i = rng_.Uniform(active_.size());
    uint64_t k = active_[i];
    if (for_append && ++keys_[k].appends_planned >= o_.appends_per_key_max) active_[i] = NewKey();
    return k;
  }

  PlannedMop Append(uint64_t k) { return {true, k, keys_[k].next_element++}; }

  void Plan(Client& c) {
    c.mops.clear();
    uint32_t n = o_.mops_per_txn_min +
                 static_cast<uint32_t>(rng_.Uniform(o_.mops_per_txn_max - o_.mops_per_txn_min + 1));
    if (o_.flaw == ExecutorFlaw::kLostUpdate) {
      uint64_t k = PickKey(true);
      c.mops.push_back({false, k, 0});
      c.mops.push_back(Append(k));
    } else if (o_.flaw == ExecutorFlaw::kIntermediateRead && rng_.Chance(0.5)) {
      uint64_t k = PickKey(true);
      c.mops.push_back(Append(k));
      c.mops.push_back(Append(k));
    }
    while (c.mops.size() < n) {
      if (rng_.Chance(o_.read_fraction)) {
        c.mops.push_back({false, PickKey(false), 0});
      } else {
        c.mops.push_back(Append(PickKey(true)));
      }
    }
  }

  void Start(uint32_t slot, Client& c) {
    Plan(c);
    c.busy = true;
    c.done = 0;
    c.snapshot = commit_seq_;
    int64_t process = static_cast<int64_t>(slot) +
                      static_cast<int64_t>(c.generation) * static_cast<int64_t>(o_.process_count);
    c.rec = rec_.Begin(process, now_ns_);
    if (o_.flaw == ExecutorFlaw::kIntermediateRead) {
      // Run up to and including the first append that the txn later follows with another
      // append to the same key: that intermediate state is now visible to everyone.
      for (size_t i = 0; i < c.mops.size(); i++) {
        bool followed = false;
        for (size_t j = i + 1; j < c.mops.size() && c.mops[i].is_append; j++) {
          followed |= c.mops[j].is_append && c.mops[j].key == c.mops[i].key;
        }
        if (followed) {
          Execute(c, i + 1, /*apply=*/true);
          break;
        }
      }
    }
  }

  // Executes mops [c.done, end) against the current state, recording them; appends change the
  // state only if apply.
  void Execute(Client& c, size_t end, bool apply) {
    for (; c.done < end; c.done++) {
      const PlannedMop& m = c.mops[c.done];
      KeyData& k = keys_[m.key];
      if (m.is_append) {
        if (apply) {
          k.elements.push_back(m.element);
          k.commit_seq.push_back(++commit_seq_);
        }
        c.rec.Append(m.key, m.element);
      } else {
        c.rec.Read(m.key, k.elements);
      }
    }
  }

  void Complete(Client& c) {
    c.busy = false;
    Outcome outcome = Outcome::kOk;
    if (c.done == 0) {  // the intermediate-read flaw commits whatever it exposed
      if (rng_.Chance(o_.fail_fraction)) {
        outcome = Outcome::kFail;
      } else if (rng_.Chance(o_.info_fraction)) {
        outcome = Outcome::kInfo;
      }
    }
    if (Snapshot()) {
      CompleteSnapshot(c, outcome);
    } else {
      bool apply = outcome == Outcome::kOk ||
                   (outcome == Outcome::kFail && o_.flaw == ExecutorFlaw::kAbortedRead) ||
                   (outcome == Outcome::kInfo && rng_.Chance(0.5));
      if (apply) {
        Execute(c, c.mops.size(), true);
      } else {
        RecordAppendsOnly(c);
      }
    }
    c.rec.Finish(outcome, now_ns_);
    if (outcome == Outcome::kOk) stats_.ok++;
    if (outcome == Outcome::kFail) stats_.fail++;
    if (outcome == Outcome::kInfo) {
      stats_.info++;
      c.generation++;
    }
  }

  // A transaction that did not take effect: its reads returned nothing worth recording, its
  // appends are what it tried.
  void RecordAppendsOnly(Client& c) {
    for (; c.done < c.mops.size(); c.done++) {
      const PlannedMop& m = c.mops[c.done];
      if (m.is_append) c.rec.Append(m.key, m.element);
    }
  }

  // Reads see the begin-time snapshot plus the txn's own appends; appends take effect at
  // commit, all at one commit sequence number.
  void CompleteSnapshot(Client& c, Outcome& outcome) {
    bool conflict = false;
    if (outcome != Outcome::kFail && o_.flaw == ExecutorFlaw::kSnapshotIsolation) {
      for (const PlannedMop& m : c.mops) {
        const KeyData& k = keys_[m.key];
        conflict |= m.is_append && !k.commit_seq.empty() && k.commit_seq.back() > c.snapshot;
      }
    }
    // First committer wins: a conflicting commit fails (an info one then never took effect).
    if (conflict && outcome == Outcome::kOk) outcome = Outcome::kFail;
    bool apply =
        !conflict && (outcome == Outcome::kOk || (outcome == Outcome::kInfo && rng_.Chance(0.5)));
    if (!apply) {
      RecordAppendsOnly(c);
      return;
    }
    std::vector<uint64_t> view;
    for (size_t i = 0; i < c.mops.size(); i++) {
      const PlannedMop& m = c.mops[i];
      if (m.is_append) {
        c.rec.Append(m.key, m.element);
        continue;
      }
      const KeyData& k = keys_[m.key];
      size_t visible = std::upper_bound(k.commit_seq.begin(), k.commit_seq.end(), c.snapshot) -
                       k.commit_seq.begin();
      view.assign(k.elements.begin(), k.elements.begin() + static_cast<ptrdiff_t>(visible));
      for (size_t j = 0; j < i; j++) {
        if (c.mops[j].is_append && c.mops[j].key == m.key) view.push_back(c.mops[j].element);
      }
      c.rec.Read(m.key, view);
    }
    uint64_t seq = ++commit_seq_;
    for (const PlannedMop& m : c.mops) {
      if (!m.is_append) continue;
      keys_[m.key].elements.push_back(m.element);
      keys_[m.key].commit_seq.push_back(seq);
    }
    c.done = c.mops.size();
  }

  const ExecutorOptions& o_;
  Recorder& rec_;
  SplitMix rng_;
  uint64_t now_ns_ = 0;
  uint64_t commit_seq_ = 0;
  std::vector<KeyData> keys_;
  std::vector<uint64_t> active_;
  std::vector<Client> clients_;
  ExecutorStats stats_;
};

}  // namespace

Result<ExecutorStats> RunReferenceExecutor(const ExecutorOptions& options, Recorder& recorder) {
  return Executor(options, recorder).Run();
}

}  // namespace pond::check
