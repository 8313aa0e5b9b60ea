// TempDir: a fresh directory under $TMPDIR (or /tmp), removed with everything in it when the
// object goes — for tests that start servers keeping files (ZooKeeper's data and log).
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "pond/base/assert.h"

namespace pond {

class TempDir {
 public:
  // `prefix` names it: "pond-zk" gives $TMPDIR/pond-zk-XXXXXX.
  explicit TempDir(const std::string& prefix) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/" + prefix + "-XXXXXX";
    POND_CHECK(mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace pond
