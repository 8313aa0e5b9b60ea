#include "pond/check/recorder.h"

#include <fmt/format.h>

#include <charconv>
#include <ostream>

#include "pond/check/history.h"

namespace pond::check {

namespace {

template <typename Int>
void PutInt(std::string& s, Int v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  s.append(buf, end);
}

std::string_view OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kFail:
      return "fail";
    case Outcome::kInfo:
      return "info";
  }
  return "info";
}

}  // namespace

Recorder::Recorder(std::ostream* out, RecorderOptions options) : out_(out), options_(options) {
  buffer_.reserve(options_.buffer_bytes_max);
}

Recorder::~Recorder() { (void)Close(); }

Result<std::unique_ptr<Recorder>> Recorder::OpenFile(const std::string& path,
                                                     RecorderOptions options) {
  auto file = std::make_unique<std::ofstream>(path, std::ios::out | std::ios::trunc);
  if (!*file) return Unavailable(fmt::format("{}: cannot open for writing", path));
  auto rec = std::make_unique<Recorder>(file.get(), options);
  rec->file_ = std::move(file);
  return rec;
}

TxnRecorder Recorder::Begin(int64_t process, uint64_t time_ns) {
  if (out_ == nullptr) return {};
  return TxnRecorder(this, process, time_ns);
}

void Recorder::Write(std::string_view invoke, std::string_view completion) {
  std::lock_guard<std::mutex> lock(mu_);
  if (out_ == nullptr) return;  // closed
  // Indices are taken here, under the lock, so that they increase down the file as Elle
  // expects.
  buffer_ += "{\"index\":";
  PutInt(buffer_, next_index_++);
  buffer_ += ',';
  buffer_ += invoke;
  buffer_ += "{\"index\":";
  PutInt(buffer_, next_index_++);
  buffer_ += ',';
  buffer_ += completion;
  if (buffer_.size() >= options_.buffer_bytes_max) NoteError(FlushLocked());
}

void Recorder::NoteError(Status s) {
  if (status_.ok() && !s.ok()) status_ = std::move(s);
}

Status Recorder::FlushLocked() {
  if (out_ == nullptr || buffer_.empty()) return Status::Ok();
  out_->write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  buffer_.clear();
  if (!*out_) return Unavailable("history write failed");
  return Status::Ok();
}

Status Recorder::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  NoteError(FlushLocked());
  if (out_ != nullptr) out_->flush();
  return status_;
}

Status Recorder::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  NoteError(FlushLocked());
  if (out_ != nullptr) {
    out_->flush();
    if (!*out_) NoteError(Unavailable("history write failed"));
  }
  if (file_ != nullptr) {
    file_->close();
    if (file_->fail()) NoteError(Unavailable("history file close failed"));
    file_.reset();
  }
  out_ = nullptr;
  return status_;
}

void TxnRecorder::AddRead(uint64_t key, std::span<const uint64_t> elements) {
  if (mops_.size() >= kMopsPerTxnMax || elements.size() > kReadLengthMax) {
    overflow_ = true;
    return;
  }
  mops_.push_back({false, key, elements_.size(), static_cast<uint32_t>(elements.size())});
  elements_.insert(elements_.end(), elements.begin(), elements.end());
}

void TxnRecorder::AddAppend(uint64_t key, uint64_t element) {
  if (mops_.size() >= kMopsPerTxnMax) {
    overflow_ = true;
    return;
  }
  mops_.push_back({true, key, element, 0});
}

void TxnRecorder::Write(Outcome outcome, uint64_t time_ns) {
  Recorder* rec = rec_;
  rec_ = nullptr;
  if (overflow_) {
    // A truncated transaction would be checked as if it did less than it did; drop it and
    // make the recording fail instead.
    std::lock_guard<std::mutex> lock(rec->mu_);
    rec->NoteError(OutOfSpace(fmt::format(
        "a transaction of process {} exceeded {} micro-ops or a read of {} elements; not recorded",
        process_, kMopsPerTxnMax, kReadLengthMax)));
    return;
  }
  auto line = [&](std::string& s, std::string_view type, uint64_t time, bool with_reads) {
    s += "\"type\":\"";
    s += type;
    s += "\",\"process\":";
    PutInt(s, process_);
    s += ",\"time\":";
    PutInt(s, time);
    s += ",\"f\":\"txn\",\"value\":[";
    for (size_t i = 0; i < mops_.size(); i++) {
      const RecordedMop& m = mops_[i];
      if (i > 0) s += ',';
      s += m.is_append ? "[\"append\"," : "[\"r\",";
      PutInt(s, m.key);
      s += ',';
      if (m.is_append) {
        PutInt(s, m.value);
      } else if (!with_reads) {
        s += "null";
      } else {
        s += '[';
        for (uint32_t j = 0; j < m.length; j++) {
          if (j > 0) s += ',';
          PutInt(s, elements_[m.value + j]);
        }
        s += ']';
      }
      s += ']';
    }
    s += "]}\n";
  };
  // One scratch string per thread: formatting allocates nothing once it has grown.
  thread_local std::string invoke, completion;
  invoke.clear();
  completion.clear();
  line(invoke, "invoke", invoke_ns_, false);
  line(completion, OutcomeName(outcome), time_ns, true);
  rec->Write(invoke, completion);
}

}  // namespace pond::check
