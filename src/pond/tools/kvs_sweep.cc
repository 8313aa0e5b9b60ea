#include "pond/tools/kvs_sweep.h"

#include <fmt/core.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace pond::tools {

namespace {

struct KeyInfo {
  const char* name;
  const char* key;
  bool integer;
};

constexpr KeyInfo kKeys[] = {{"coros", "coros", true},        {"workers", "workers", true},
                             {"threads", "workers", true},    {"cns", "cns", true},
                             {"rw-ratio", "rw-ratio", false}, {"theta", "theta", false}};

constexpr const char* kKeyList = "coros, workers (or threads), cns, rw-ratio or theta";

const KeyInfo* FindKey(std::string_view name) {
  for (const KeyInfo& k : kKeys) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

// The whole of `s` as a finite number.
bool ParseNumber(std::string_view s, double* out) {
  std::string text(s);
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool ParseInteger(std::string_view s, long long* out) {
  double v;
  if (!ParseNumber(s, &v) || v != std::floor(v) || std::fabs(v) > 1e15) return false;
  *out = static_cast<long long>(v);
  return true;
}

// Adds one value token ("4", "0.5" or "1..6") to `axis`.
Status AddValues(const KeyInfo& k, std::string_view token, SweepAxis* axis) {
  if (token.empty()) return InvalidArgument(fmt::format("--sweep {}: empty value", k.name));
  size_t dots = token.find("..");
  if (dots != std::string_view::npos) {
    long long a, b;
    if (!ParseInteger(token.substr(0, dots), &a) || !ParseInteger(token.substr(dots + 2), &b)) {
      return InvalidArgument(
          fmt::format("--sweep {}: range '{}' must be A..B with integers A and B", k.name, token));
    }
    if (a > b) {
      return InvalidArgument(fmt::format("--sweep {}: range '{}' is empty (A > B)", k.name, token));
    }
    if (b - a >= static_cast<long long>(kSweepPointsMax)) {
      return InvalidArgument(fmt::format("--sweep {}: range '{}' has more than {} values", k.name,
                                         token, kSweepPointsMax));
    }
    for (long long v = a; v <= b; v++) axis->values.push_back(static_cast<double>(v));
    return Status::Ok();
  }
  double v;
  if (!ParseNumber(token, &v)) {
    return InvalidArgument(fmt::format("--sweep {}: '{}' is not a number", k.name, token));
  }
  if (k.integer && v != std::floor(v)) {
    return InvalidArgument(fmt::format("--sweep {}: '{}' is not an integer", k.name, token));
  }
  axis->values.push_back(v);
  return Status::Ok();
}

}  // namespace

size_t KvsSweep::PointCount() const {
  if (axes.empty()) return 0;
  size_t n = 1;
  for (const SweepAxis& a : axes) n *= a.values.size();
  return n;
}

std::vector<double> KvsSweep::Point(size_t i) const {
  std::vector<double> p(axes.size());
  for (size_t k = axes.size(); k-- > 0;) {
    const std::vector<double>& v = axes[k].values;
    p[k] = v[i % v.size()];
    i /= v.size();
  }
  return p;
}

std::string KvsSweep::PointName(size_t i) const {
  std::vector<double> p = Point(i);
  std::string s;
  for (size_t k = 0; k < p.size(); k++) {
    s += fmt::format("{}{}={}", k ? " " : "", axes[k].name, p[k]);
  }
  return s;
}

nlohmann::json KvsSweep::PointJson(size_t i) const {
  std::vector<double> p = Point(i);
  nlohmann::json at = nlohmann::json::object();
  for (size_t k = 0; k < p.size(); k++) {
    if (axes[k].integer) {
      at[axes[k].name] = static_cast<int64_t>(p[k]);
    } else {
      at[axes[k].name] = p[k];
    }
  }
  return at;
}

namespace {
// The keys a sweep sets on the cluster (the rest are the workload's: Workload::Set).
bool IsClusterKey(const std::string& key) {
  return key == "coros" || key == "workers" || key == "cns";
}
}  // namespace

Status KvsSweep::Apply(size_t i, bench::RunOptions* run, bench::Workload* w) const {
  std::vector<double> p = Point(i);
  for (size_t k = 0; k < axes.size(); k++) {
    const std::string& key = axes[k].key;
    double v = p[k];
    if (key == "coros") {
      run->coros = static_cast<int>(v);
    } else if (key == "workers") {
      run->cluster.workers_per_cn = static_cast<int>(v);
    } else if (key == "cns") {
      run->cluster.cns = static_cast<int>(v);
    } else {
      POND_RETURN_IF_ERROR(w->Set(key, v));
    }
  }
  return Status::Ok();
}

Status KvsSweep::CheckWorkload(const bench::Workload& w) const {
  std::unique_ptr<bench::Workload> probe = w.Clone();
  for (const SweepAxis& a : axes) {
    if (IsClusterKey(a.key) || probe->Set(a.key, a.values.front()).ok()) continue;
    return InvalidArgument(fmt::format(
        "--sweep {} is not a setting of the {} workload; it takes coros, workers (or threads) "
        "or cns",
        a.name, w.name()));
  }
  return Status::Ok();
}

Result<KvsSweep> ParseKvsSweep(std::string_view spec) {
  KvsSweep sweep;
  const KeyInfo* current = nullptr;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string_view::npos) comma = spec.size();
    std::string_view token = spec.substr(start, comma - start);
    start = comma + 1;
    size_t eq = token.find('=');
    if (eq != std::string_view::npos) {
      std::string_view name = token.substr(0, eq);
      current = FindKey(name);
      if (current == nullptr) {
        return InvalidArgument(
            fmt::format("--sweep key must be {}; got '{}' in '{}'", kKeyList, name, spec));
      }
      for (const SweepAxis& a : sweep.axes) {
        if (a.key == current->key) {
          return InvalidArgument(fmt::format("--sweep names {} twice in '{}'", current->key, spec));
        }
      }
      sweep.axes.push_back(SweepAxis{current->name, current->key, current->integer, {}});
      token = token.substr(eq + 1);
    } else if (current == nullptr) {
      return InvalidArgument(
          fmt::format("--sweep must be KEY=V1,V2,... or KEY=A..B[,KEY2=...]; got '{}'", spec));
    }
    POND_RETURN_IF_ERROR(AddValues(*current, token, &sweep.axes.back()));
    if (sweep.PointCount() > kSweepPointsMax) {
      return InvalidArgument(
          fmt::format("--sweep '{}' has more than {} points", spec, kSweepPointsMax));
    }
  }
  return sweep;
}

}  // namespace pond::tools
