// Recorder: how a workload writes the history of its transactions (history.h's format, Elle's
// list-append) while it runs, for `pond check` to judge afterwards.
//
// Use: per transaction, `TxnRecorder t = recorder.Begin(process, clock.NowNs());`, then
// `t.Read(key, elements)` for every read result and `t.Append(key, element)` for every append,
// in program order, and finally `t.Finish(Outcome::kOk, clock.NowNs())`. Elements must be
// unique per key across the whole run.
//
// Threads: one Recorder is shared by every worker thread; a TxnRecorder belongs to the thread
// (or coroutine) running its transaction. The recorder never reads a clock: times come from the
// caller's Clock, so recording works the same on real and simulated time.
//
// Cost: a disabled Recorder (default-constructed) hands out disabled TxnRecorders whose calls
// are one predictable branch. An enabled one keeps a transaction's micro-ops in its
// TxnRecorder, formats its two lines at Finish, and appends them to one buffer under a mutex;
// the buffer goes to the file when it reaches buffer_bytes_max. Memory is bounded by that buffer
// plus the transactions in flight.
//
// Output order: both lines of a transaction are written at Finish, so the file is ordered by
// completion, not invocation; `pond check` orders by "time" and does not care. Give a process
// that had an info outcome a fresh process id, as Jepsen does, so that Elle reads the file the
// same way.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pond/status.h"

namespace pond::check {

enum class Outcome : uint8_t {
  kOk,    // committed
  kFail,  // certainly did not commit
  kInfo,  // unknown: it may or may not have committed (e.g. the coordinator crashed)
};

// Processes from here up are given to info transactions, one each, apart from the clients'
// (Jepsen's rule above, for a transaction whose client is gone with its CN).
inline constexpr int64_t kInfoProcessBase = int64_t{1} << 40;

struct RecorderOptions {
  size_t buffer_bytes_max = size_t{1} << 20;
};

class TxnRecorder;

class Recorder {
 public:
  Recorder() = default;  // disabled: records nothing
  // Records to a stream the caller owns and keeps alive until Close.
  explicit Recorder(std::ostream* out, RecorderOptions options = {});
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Records to a new file (truncated if it exists).
  static Result<std::unique_ptr<Recorder>> OpenFile(const std::string& path,
                                                    RecorderOptions options = {});

  bool enabled() const { return out_ != nullptr; }
  TxnRecorder Begin(int64_t process, uint64_t time_ns);

  // Writes out the buffer; returns the first error any write or transaction met.
  Status Flush();
  // Flush, then close the file (if this recorder opened one). Later transactions are dropped.
  Status Close();

 private:
  friend class TxnRecorder;
  // Appends one transaction's two lines (each given without its leading "{\"index\":N,").
  void Write(std::string_view invoke, std::string_view completion);
  void NoteError(Status s);
  Status FlushLocked();

  std::ostream* out_ = nullptr;
  std::unique_ptr<std::ofstream> file_;
  RecorderOptions options_;
  std::mutex mu_;
  std::string buffer_;       // guarded by mu_
  uint64_t next_index_ = 0;  // guarded by mu_
  Status status_;            // guarded by mu_: the first error
};

class TxnRecorder {
 public:
  TxnRecorder() = default;  // disabled
  TxnRecorder(TxnRecorder&&) = default;
  TxnRecorder& operator=(TxnRecorder&&) = default;

  bool enabled() const { return rec_ != nullptr; }
  void Read(uint64_t key, std::span<const uint64_t> elements) {
    if (rec_ != nullptr) AddRead(key, elements);
  }
  void Append(uint64_t key, uint64_t element) {
    if (rec_ != nullptr) AddAppend(key, element);
  }
  // Writes the transaction; the recorder is disabled afterwards.
  void Finish(Outcome outcome, uint64_t time_ns) {
    if (rec_ != nullptr) Write(outcome, time_ns);
  }

 private:
  friend class Recorder;
  struct RecordedMop {
    bool is_append;
    uint64_t key;
    uint64_t value;   // append: element; read: offset into elements_
    uint32_t length;  // read: element count
  };
  TxnRecorder(Recorder* rec, int64_t process, uint64_t time_ns)
      : rec_(rec), process_(process), invoke_ns_(time_ns) {}
  void AddRead(uint64_t key, std::span<const uint64_t> elements);
  void AddAppend(uint64_t key, uint64_t element);
  void Write(Outcome outcome, uint64_t time_ns);

  Recorder* rec_ = nullptr;
  int64_t process_ = 0;
  uint64_t invoke_ns_ = 0;
  bool overflow_ = false;
  std::vector<RecordedMop> mops_;
  std::vector<uint64_t> elements_;
};

}  // namespace pond::check
