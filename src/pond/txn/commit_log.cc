#include "pond/txn/commit_log.h"

#include "pond/base/assert.h"

namespace pond::txn {

GAddr CommitLog::Reserve(uint64_t record_bytes) {
  POND_CHECK_MSG(record_bytes <= bytes_, "commit log record larger than the log area");
  record_bytes = (record_bytes + 7) & ~uint64_t{7};
  if (cursor_ + record_bytes > bytes_) cursor_ = 0;
  GAddr at = area_ + cursor_;
  cursor_ += record_bytes;
  return at;
}

}  // namespace pond::txn
