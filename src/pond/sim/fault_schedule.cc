#include "pond/sim/fault_schedule.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <system_error>

#include "pond/base/printable.h"

namespace pond::sim {

namespace {

constexpr std::array<std::string_view, kFaultKindCount> kKindNames = {
    "crash-cn",    "restart-cn",    "crash-mn",       "restart-mn", "partition-cn", "heal-cn",
    "crash-coord", "restart-coord", "partition-host", "heal-host",  "cut-hosts",    "heal-hosts"};

constexpr std::array<std::string_view, kFaultStepCount> kStepNames = {
    "", "locked", "read", "logged", "timestamped", "visible", "unlocked"};
constexpr std::string_view kAllSteps = "locked, read, logged, timestamped, visible, unlocked";

constexpr std::string_view kItemForms =
    "KIND:NODE@TIME, crash-cn:NODE@[TIME+]step=STEP, crash-coord@TIME, restart-coord@TIME, "
    "cut-hosts:X-Y@TIME, heal-hosts:X-Y@TIME, drop:P, duplicate:P, delay:P@MIN-MAX or "
    "jitter:TIME";
constexpr std::string_view kAllKinds =
    "crash-cn, restart-cn, crash-mn, restart-mn, partition-cn, heal-cn, crash-coord, "
    "restart-coord, partition-host, heal-host, cut-hosts, heal-hosts, drop, duplicate, delay, "
    "jitter";

struct Unit {
  std::string_view name;
  uint64_t ns;
  int zeros;  // log10(ns)
};
// Largest first: ToString picks the first that divides a time.
constexpr std::array<Unit, 4> kUnits = {
    {{"s", 1'000'000'000, 9}, {"ms", 1'000'000, 6}, {"us", 1'000, 3}, {"ns", 1, 0}}};

bool IsDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// DIGITS ["." DIGITS]: the only number syntax a spec has (no sign, exponent, inf or nan).
bool IsDecimal(std::string_view s) {
  size_t dot = s.find('.');
  if (dot == std::string_view::npos) return IsDigits(s);
  return IsDigits(s.substr(0, dot)) && IsDigits(s.substr(dot + 1));
}

// The decimal digits as an integer, saturating at `cap` + 1 so that any length is safe.
uint64_t DigitsValue(std::string_view digits, uint64_t cap) {
  uint64_t v = 0;
  for (char c : digits) {
    v = v * 10 + static_cast<uint64_t>(c - '0');
    if (v > cap) return cap + 1;
  }
  return v;
}

uint64_t Pow10(int n) {
  uint64_t v = 1;
  while (n-- > 0) v *= 10;
  return v;
}

std::string FormatTime(uint64_t ns) {
  for (const Unit& u : kUnits) {
    if (ns % u.ns == 0) return std::to_string(ns / u.ns) + std::string(u.name);
  }
  return std::to_string(ns) + "ns";  // not reached: ns divides every time
}

// The shortest fixed-point decimal that from_chars reads back to exactly `p`.
std::string FormatProbability(double p) {
  char buf[400];  // fixed notation of the smallest positive double needs ~330 characters
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, p, std::chars_format::fixed);
  assert(ec == std::errc());
  (void)ec;
  return std::string(buf, end);
}

// KIND:NODE@TIME, or for a crash aimed at a step KIND:NODE@step=S when armed from the start and
// KIND:NODE@TIME+step=S otherwise.
std::string FormatEvent(const FaultEvent& e) {
  if (IsCoordFault(e.kind)) return std::string(FaultKindName(e.kind)) + "@" + FormatTime(e.at_ns);
  std::string out = std::string(FaultKindName(e.kind)) + ":" + std::to_string(e.node) +
                    (IsHostPairFault(e.kind) ? "-" + std::to_string(e.peer) : "") + "@";
  if (e.step == FaultStep::kNone) return out + FormatTime(e.at_ns);
  if (e.at_ns != 0) out += FormatTime(e.at_ns) + "+";
  return out + "step=" + std::string(kStepNames[static_cast<size_t>(e.step)]);
}

// Parsing one item: each helper returns the reason (without the item prefix) or fills `out`.
using Reason = std::string;

Reason ParseTime(std::string_view s, uint64_t* out) {
  if (!s.empty() && s[0] == '-') return "negative time '" + std::string(s) + "'";
  size_t unit_at = s.find_first_not_of("0123456789.");
  std::string_view number = s.substr(0, unit_at);
  std::string_view unit_name = unit_at == std::string_view::npos ? "" : s.substr(unit_at);
  const std::string form =
      " (a decimal number and a unit: ns, us, ms or s, e.g. 1.5ms; no sign or exponent)";
  if (number.empty() || !IsDecimal(number)) return "bad time '" + std::string(s) + "'" + form;
  const Unit* unit = nullptr;
  for (const Unit& u : kUnits) {
    if (u.name == unit_name) unit = &u;
  }
  if (unit == nullptr) {
    return "bad unit '" + std::string(unit_name) + "' in time '" + std::string(s) +
           "' (units: ns, us, ms, s)";
  }
  size_t dot = number.find('.');
  std::string_view whole = number.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? "" : number.substr(dot + 1);
  // Trailing zeros of the fraction do not change the value; what is left must fit the unit's
  // zeros, else the time falls between two nanoseconds (its last digit is not zero).
  while (!frac.empty() && frac.back() == '0') frac.remove_suffix(1);
  if (static_cast<int>(frac.size()) > unit->zeros) {
    return "time '" + std::string(s) + "' is not a whole number of nanoseconds";
  }
  // whole <= limit + 1 and unit <= 1e9, so the product is below 2^64.
  uint64_t ns = DigitsValue(whole, kFaultTimeNsLimit) * unit->ns;
  ns += DigitsValue(frac, kFaultTimeNsLimit) * Pow10(unit->zeros - static_cast<int>(frac.size()));
  if (ns > kFaultTimeNsLimit) {
    return "time '" + std::string(s) + "' exceeds the limit of " + FormatTime(kFaultTimeNsLimit);
  }
  *out = ns;
  return {};
}

Reason ParseProbability(std::string_view s, double* out) {
  if (!s.empty() && s[0] == '-') return "negative probability '" + std::string(s) + "'";
  if (!IsDecimal(s)) {
    return "bad probability '" + std::string(s) + "' (a decimal number in [0, 1], e.g. 0.01)";
  }
  double p = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), p, std::chars_format::fixed);
  if (ec != std::errc() || end != s.data() + s.size() || !(p >= 0.0 && p <= 1.0)) {
    return "probability '" + std::string(s) + "' is not in [0, 1]";
  }
  *out = p;
  return {};
}

Reason ParseNode(std::string_view s, uint16_t* out) {
  constexpr uint64_t kMax = UINT16_MAX;
  uint64_t v = IsDigits(s) ? DigitsValue(s, kMax) : kMax + 1;
  if (v > kMax) return "bad node '" + std::string(s) + "' (a decimal node id, 0 to 65535)";
  *out = static_cast<uint16_t>(v);
  return {};
}

// Which message-fault items were given, and as which item, to refuse a second one.
struct Seen {
  int drop = 0, duplicate = 0, delay = 0, jitter = 0;
};

// WHEN := TIME | "step=" STEP | TIME "+step=" STEP
Reason ParseWhen(std::string_view s, FaultEvent* e) {
  constexpr std::string_view kStepPrefix = "step=";
  size_t step_at = s.find(kStepPrefix);
  if (step_at == std::string_view::npos) return ParseTime(s, &e->at_ns);
  if (e->kind != FaultKind::kCrashCn) {
    return "only crash-cn may be aimed at a step (" + std::string(FaultKindName(e->kind)) +
           " takes a time)";
  }
  if (step_at != 0) {
    if (s[step_at - 1] != '+') {
      return "bad time '" + std::string(s) + "' (TIME+step=STEP, e.g. 5ms+step=logged)";
    }
    Reason r = ParseTime(s.substr(0, step_at - 1), &e->at_ns);
    if (!r.empty()) return r;
  }
  std::string_view name = s.substr(step_at + kStepPrefix.size());
  auto it = std::find(kStepNames.begin() + 1, kStepNames.end(), name);
  if (it == kStepNames.end()) {
    return "unknown step '" + std::string(name) + "' (steps: " + std::string(kAllSteps) + ")";
  }
  e->step = static_cast<FaultStep>(it - kStepNames.begin());
  return {};
}

Reason ParseItem(std::string_view item, int index, FaultSchedule* s, Seen* seen) {
  if (item.empty()) return "empty item (two commas in a row, or a comma at an end)";
  if (item.find_first_of(" \t\r\n") != std::string_view::npos) {
    return "spaces are not allowed (items are separated by a comma alone)";
  }
  Reason r;
  if (item == kRandomFaultSpec) {
    return "'random' stands alone: it draws a whole schedule and cannot be mixed with items";
  }
  // The coordination service's faults name no node: KIND@TIME.
  for (FaultKind k : {FaultKind::kCrashCoord, FaultKind::kRestartCoord}) {
    const std::string_view name = FaultKindName(k);
    if (item.substr(0, name.size()) != name) continue;
    std::string_view rest = item.substr(name.size());
    const std::string form = std::string(name) + "@TIME, e.g. " + std::string(name) + "@5ms";
    if (!rest.empty() && rest[0] == ':') return std::string(name) + " names no node (" + form + ")";
    if (rest.empty() || rest[0] != '@') return "missing '@' (" + form + ")";
    FaultEvent e{k, 0, 0};
    if (!(r = ParseWhen(rest.substr(1), &e)).empty()) return r;
    s->events.push_back(e);
    return {};
  }
  size_t colon = item.find(':');
  if (colon == std::string_view::npos) {
    return "missing ':' (items: " + std::string(kItemForms) + ")";
  }
  std::string_view head = item.substr(0, colon), rest = item.substr(colon + 1);

  auto once = [&](int* first, std::string_view name) -> Reason {
    if (*first != 0) {
      return std::string(name) + " given twice (first as item " + std::to_string(*first) + ")";
    }
    *first = index;
    return {};
  };
  if (head == "drop" || head == "duplicate") {
    bool drop = head == "drop";
    if (!(r = once(drop ? &seen->drop : &seen->duplicate, head)).empty()) return r;
    return ParseProbability(
        rest, drop ? &s->messages.drop_probability : &s->messages.duplicate_probability);
  }
  if (head == "jitter") {
    if (!(r = once(&seen->jitter, head)).empty()) return r;
    if (!(r = ParseTime(rest, &s->jitter_ns)).empty()) return r;
    if (s->jitter_ns > kFaultJitterNsMax) {
      return "jitter above " + FormatTime(kFaultJitterNsMax) + " (one-sided batches, e.g. 2us)";
    }
    return {};
  }
  if (head == "delay") {
    if (!(r = once(&seen->delay, head)).empty()) return r;
    size_t at = rest.find('@');
    if (at == std::string_view::npos) return "missing '@' (delay:P@MIN-MAX)";
    double p = 0;
    if (!(r = ParseProbability(rest.substr(0, at), &p)).empty()) return r;
    std::string_view range = rest.substr(at + 1);
    // A time has no '-' of its own, so the first '-' after the first character splits the
    // range; a leading one is a sign, which ParseTime names.
    size_t dash = range.empty() ? std::string_view::npos : range.find('-', 1);
    if (dash == std::string_view::npos) {
      if (!range.empty() && range[0] == '-') {
        return "negative time '" + std::string(range) + "'";
      }
      return "missing '-' between the delay bounds (delay:P@MIN-MAX, e.g. delay:0.01@1us-200us)";
    }
    uint64_t lo = 0, hi = 0;
    if (!(r = ParseTime(range.substr(0, dash), &lo)).empty()) return r;
    if (!(r = ParseTime(range.substr(dash + 1), &hi)).empty()) return r;
    if (lo > hi) {
      return "delay minimum " + FormatTime(lo) + " exceeds the maximum " + FormatTime(hi);
    }
    if (p > 0 && hi == 0) return "a delay needs a maximum above 0";
    s->messages.delay_probability = p;
    s->messages.delay_ns_min = lo;
    s->messages.delay_ns_max = hi;
    return {};
  }
  auto name = std::find(kKindNames.begin(), kKindNames.end(), head);
  if (name == kKindNames.end()) {
    return "unknown kind '" + std::string(head) + "' (kinds: " + std::string(kAllKinds) + ")";
  }
  size_t at = rest.find('@');
  if (at == std::string_view::npos) {
    return "missing '@' (" + std::string(head) + ":NODE@TIME, e.g. " + std::string(head) +
           ":1@5ms)";
  }
  FaultEvent e{static_cast<FaultKind>(name - kKindNames.begin()), 0, 0};
  if (IsHostPairFault(e.kind)) {
    // X-Y: two hosts, named in either order and kept lower first, so that a spec prints one way.
    const std::string form =
        " (" + std::string(head) + ":X-Y@TIME, e.g. " + std::string(head) + ":1-2@5ms)";
    std::string_view hosts = rest.substr(0, at);
    const size_t dash = hosts.find('-');
    if (dash == std::string_view::npos) return "missing '-' between the two hosts" + form;
    if (!(r = ParseNode(hosts.substr(0, dash), &e.node)).empty()) return r;
    if (!(r = ParseNode(hosts.substr(dash + 1), &e.peer)).empty()) return r;
    if (e.node == e.peer) return "host " + std::to_string(e.node) + " named twice" + form;
    if (e.node > e.peer) std::swap(e.node, e.peer);
  } else if (!(r = ParseNode(rest.substr(0, at), &e.node)).empty()) {
    return r;
  }
  if (!(r = ParseWhen(rest.substr(at + 1), &e)).empty()) return r;
  s->events.push_back(e);
  return {};
}

enum class NodeState : unsigned char { kUp, kDown, kPartitioned };
constexpr std::array<std::string_view, 3> kStateNames = {"up", "down", "partitioned"};

const std::string* FindReason(const std::vector<std::pair<FaultKind, std::string>>& v,
                              FaultKind k) {
  for (const auto& [kind, reason] : v) {
    if (kind == k) return &reason;
  }
  return nullptr;
}

const std::string* FindReason(const std::vector<std::pair<uint16_t, std::string>>& v,
                              uint16_t node) {
  for (const auto& [n, reason] : v) {
    if (n == node) return &reason;
  }
  return nullptr;
}

}  // namespace

std::string_view FaultKindName(FaultKind kind) {
  auto i = static_cast<size_t>(kind);
  assert(i < kKindNames.size());
  return kKindNames[i];
}

std::string_view FaultStepName(FaultStep step) {
  auto i = static_cast<size_t>(step);
  assert(i < kStepNames.size());
  return kStepNames[i];
}

bool IsCoordFault(FaultKind kind) {
  return kind == FaultKind::kCrashCoord || kind == FaultKind::kRestartCoord;
}

bool IsHostFault(FaultKind kind) {
  return kind == FaultKind::kPartitionHost || kind == FaultKind::kHealHost;
}

bool IsHostPairFault(FaultKind kind) {
  return kind == FaultKind::kCutHosts || kind == FaultKind::kHealHosts;
}

bool IsCnFault(FaultKind kind) {
  return kind == FaultKind::kCrashCn || kind == FaultKind::kRestartCn ||
         kind == FaultKind::kPartitionCn || kind == FaultKind::kHealCn;
}

Result<FaultSchedule> FaultSchedule::Parse(std::string_view spec) {
  FaultSchedule s;
  if (spec.empty()) return s;
  Seen seen;
  int index = 1;
  for (size_t begin = 0;; index++) {
    size_t comma = spec.find(',', begin);
    std::string_view item = spec.substr(
        begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
    Reason r = ParseItem(item, index, &s, &seen);
    if (!r.empty()) {
      return InvalidArgument("--faults item " + std::to_string(index) + " '" + Printable(item) +
                             "': " + r);
    }
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  std::stable_sort(s.events.begin(), s.events.end(),
                   [](const FaultEvent& a, const FaultEvent& b) { return a.at_ns < b.at_ns; });
  return s;
}

Status FaultSchedule::Validate(const FaultLimits& limits) const {
  std::vector<NodeState> cn(limits.cns, NodeState::kUp), mn(limits.mns, NodeState::kUp);
  int cns_up = limits.cns, mns_down = 0;
  uint64_t prev_ns = 0;
  bool coord_down = false;
  FaultEvent coord_crash{};
  int mns_out = 0;   // while the service is down: MNs down, and those restarted since it went
  int cns_away = 0;  // CNs down or partitioned
  // By host: cut by partition-host (its CN and MN both partitioned, healed only together).
  std::vector<bool> host_cut(std::min(limits.cns, limits.mns), false);
  // By host: the other host of its cut-hosts, or -1.
  std::vector<int> cut_from(std::min(limits.cns, limits.mns), -1);
  auto quorum_limit = [&](int out, const char* when) {
    return std::to_string(out) + " MNs down while " + when + ", more than the " +
           std::to_string(limits.max_mns_down_quorum) +
           " the cluster survives (too few MNs left for a lease without the coordination "
           "service, or for a CM to declare a CN)";
  };
  for (const FaultEvent& e : events) {
    auto fail = [&](const std::string& why) {
      return InvalidArgument("--faults item '" + FormatEvent(e) + "': " + why);
    };
    const bool is_cn = IsCnFault(e.kind);
    const std::string who = (is_cn ? "CN " : "MN ") + std::to_string(e.node);
    // After a cut that takes nodes away (a host's, or two hosts' apart), what every count allows:
    // the reason it does not, or "".
    auto cut_leaves = [&](const std::string& counted) -> std::string {
      if (mns_down > limits.max_mns_down) {
        return "leaves " + std::to_string(mns_down) + " MNs down (" + counted +
               "), more than the " + std::to_string(limits.max_mns_down) + " the cluster survives";
      }
      if (mns_down > limits.max_mns_down_quorum) {
        return quorum_limit(mns_down, "a CN is down or cut off");
      }
      if (coord_down && ++mns_out > limits.max_mns_down_quorum) {
        return quorum_limit(mns_out, "the coordination service is down");
      }
      if (cns_up < limits.min_cns_up) {
        return "leaves " + std::to_string(cns_up) + " CNs up and unpartitioned, fewer than the " +
               std::to_string(limits.min_cns_up) + " the cluster needs";
      }
      return {};
    };
    if (const std::string* why = FindReason(limits.refused, e.kind)) {
      return fail(std::string(FaultKindName(e.kind)) + ": " + *why);
    }
    if (IsCoordFault(e.kind)) {
      if (e.at_ns < prev_ns) return fail("out of time order (events must be sorted by time)");
      prev_ns = e.at_ns;
      if (limits.horizon_ns != 0 && e.at_ns >= limits.horizon_ns) {
        return fail("at or after the end of the run (" + FormatTime(limits.horizon_ns) + ")");
      }
      const bool crash = e.kind == FaultKind::kCrashCoord;
      if (coord_down == crash) {
        return fail(std::string("the coordination service is ") + (coord_down ? "down" : "up") +
                    ", and " + std::string(FaultKindName(e.kind)) + " needs it " +
                    (crash ? "up" : "down"));
      }
      coord_down = crash;
      if (crash) coord_crash = e;
      mns_out = mns_down;
      if (crash && mns_out > limits.max_mns_down_quorum) {
        return fail(quorum_limit(mns_out, "the coordination service is down"));
      }
      continue;
    }
    const bool is_host = IsHostFault(e.kind) || IsHostPairFault(e.kind);
    const uint16_t count = is_host ? std::min(limits.cns, limits.mns)
                           : is_cn ? limits.cns
                                   : limits.mns;
    if (e.node >= count || (IsHostPairFault(e.kind) && e.peer >= count)) {
      if (is_host) {
        return fail("no host " + std::to_string(e.node >= count ? e.node : e.peer) +
                    " (host N is CN N with MN N: the cluster has " + std::to_string(limits.cns) +
                    " CNs and " + std::to_string(limits.mns) + " MNs, so hosts 0 to " +
                    std::to_string(count - 1) + ")");
      }
      return fail("no " + who + " (the cluster has " + std::to_string(count) +
                  (is_cn ? " CNs" : " MNs") + ")");
    }
    if (e.at_ns < prev_ns) return fail("out of time order (events must be sorted by time)");
    prev_ns = e.at_ns;
    if (e.at_ns > kFaultTimeNsLimit) {
      return fail("time exceeds the limit of " + FormatTime(kFaultTimeNsLimit));
    }
    if (limits.horizon_ns != 0 && e.at_ns >= limits.horizon_ns) {
      return fail("at or after the end of the run (" + FormatTime(limits.horizon_ns) + ")");
    }
    if (e.kind == FaultKind::kCrashCn || e.kind == FaultKind::kPartitionCn ||
        e.kind == FaultKind::kPartitionHost || e.kind == FaultKind::kCutHosts) {
      for (uint16_t c : {e.node, e.kind == FaultKind::kCutHosts ? e.peer : e.node}) {
        if (const std::string* why = FindReason(limits.protected_cns, c)) {
          return fail("CN " + std::to_string(c) + " may not be crashed or partitioned: " + *why);
        }
      }
    }
    if (IsHostPairFault(e.kind)) {
      // The four nodes of the two hosts move together, up to partitioned and back: each CN may
      // fence (it cannot reach the other host's MN), and the CM may declare one of the MNs.
      const uint16_t x = e.node, y = e.peer;
      const std::string xy = std::to_string(x) + "-" + std::to_string(y);
      const bool cut = e.kind == FaultKind::kCutHosts;
      if (cut) {
        for (uint16_t h : {x, y}) {
          for (const auto& [states, kind] : {std::pair{&cn, "CN "}, std::pair{&mn, "MN "}}) {
            const NodeState st = (*states)[h];
            if (st != NodeState::kUp) {
              return fail(kind + std::to_string(h) + " is " +
                          std::string(kStateNames[static_cast<size_t>(st)]) +
                          ", and cut-hosts needs every node of hosts " + xy + " up");
            }
          }
        }
      } else if (cut_from[x] != y) {
        return fail("hosts " + xy + " are not cut apart, and heal-hosts needs a cut-hosts before");
      }
      cut_from[x] = cut ? y : -1;
      cut_from[y] = cut ? x : -1;
      const NodeState to = cut ? NodeState::kPartitioned : NodeState::kUp;
      cn[x] = cn[y] = mn[x] = mn[y] = to;
      cns_away += cut ? 2 : -2;
      cns_up += cut ? -2 : 2;
      mns_down += cut ? 1 : -1;
      if (!cut) continue;
      if (const std::string why = cut_leaves("two hosts cut apart count one"); !why.empty()) {
        return fail(why);
      }
      continue;
    }
    if (is_host) {
      // Both of the host's nodes move together: up to partitioned and back. Its CN then counts
      // as a partitioned CN and its MN as an MN down (nobody else reaches it, and the CM will
      // declare it), for every count below.
      const std::string h = std::to_string(e.node);
      const bool cut = e.kind == FaultKind::kPartitionHost;
      if (cut) {
        for (const auto& [states, kind] : {std::pair{&cn, "CN "}, std::pair{&mn, "MN "}}) {
          const NodeState st = (*states)[e.node];
          if (st != NodeState::kUp) {
            return fail(kind + h + " is " + std::string(kStateNames[static_cast<size_t>(st)]) +
                        ", and partition-host needs both nodes of host " + h + " up");
          }
        }
      } else if (!host_cut[e.node]) {
        return fail("host " + h +
                    " is not cut off, and heal-host needs it partitioned by "
                    "partition-host");
      }
      host_cut[e.node] = cut;
      cn[e.node] = mn[e.node] = cut ? NodeState::kPartitioned : NodeState::kUp;
      cns_away += cut ? 1 : -1;
      cns_up += cut ? -1 : 1;
      mns_down += cut ? 1 : -1;
      if (!cut) continue;
      if (const std::string why = cut_leaves("a cut host's counts"); !why.empty()) return fail(why);
      continue;
    }
    if (e.kind == FaultKind::kHealCn && host_cut[e.node]) {
      return fail(who + " is cut off with its host, and only heal-host heals it");
    }
    if (e.kind == FaultKind::kHealCn && e.node < cut_from.size() && cut_from[e.node] >= 0) {
      return fail(who + " is cut from host " + std::to_string(cut_from[e.node]) +
                  ", and only heal-hosts heals it");
    }
    NodeState& st = is_cn ? cn[e.node] : mn[e.node];
    NodeState from = NodeState::kUp, to = NodeState::kDown;
    std::string_view needs = "up";
    switch (e.kind) {
      case FaultKind::kCrashCn:
      case FaultKind::kCrashMn:
        break;
      case FaultKind::kRestartCn:
      case FaultKind::kRestartMn:
        from = NodeState::kDown, to = NodeState::kUp, needs = "down";
        break;
      case FaultKind::kPartitionCn:
        to = NodeState::kPartitioned;
        break;
      case FaultKind::kHealCn:
        from = NodeState::kPartitioned, to = NodeState::kUp, needs = "partitioned";
        break;
      case FaultKind::kCrashCoord:
      case FaultKind::kRestartCoord:
      case FaultKind::kPartitionHost:
      case FaultKind::kHealHost:
      case FaultKind::kCutHosts:
      case FaultKind::kHealHosts:
        assert(false);  // handled above: they name no node, or two
        break;
    }
    if (st != from) {
      return fail(who + " is " + std::string(kStateNames[static_cast<size_t>(st)]) + ", and " +
                  std::string(FaultKindName(e.kind)) + " needs it " + std::string(needs));
    }
    st = to;
    if (is_cn) {
      cns_away += to == NodeState::kUp ? -1 : 1;
      if (to != NodeState::kUp && mns_down > limits.max_mns_down_quorum) {
        return fail(quorum_limit(mns_down, "a CN is down or cut off"));
      }
      cns_up += to == NodeState::kUp ? 1 : -1;
      if (cns_up < limits.min_cns_up) {
        return fail("leaves " + std::to_string(cns_up) +
                    " CNs up and unpartitioned, fewer than the " +
                    std::to_string(limits.min_cns_up) + " the cluster needs");
      }
    } else {
      mns_down += to == NodeState::kDown ? 1 : -1;
      if (mns_down > limits.max_mns_down) {
        return fail("leaves " + std::to_string(mns_down) + " MNs down, more than the " +
                    std::to_string(limits.max_mns_down) + " the cluster survives");
      }
      if (coord_down && to == NodeState::kDown && ++mns_out > limits.max_mns_down_quorum) {
        return fail(quorum_limit(mns_out, "the coordination service is down"));
      }
      if (cns_away > 0 && mns_down > limits.max_mns_down_quorum) {
        return fail(quorum_limit(mns_down, "a CN is down or cut off"));
      }
    }
  }
  if (coord_down) {
    return InvalidArgument("--faults item '" + FormatEvent(coord_crash) +
                           "': needs a restart-coord after it (without the coordination service "
                           "no failure is declared, and the run could not end)");
  }
  Status m = messages.Validate();
  if (!m.ok()) return InvalidArgument("--faults message faults: " + m.message());
  if (messages.delay_distribution != DelayDistribution::kUniform) {
    return InvalidArgument("--faults message faults: a spec can only say uniform delays");
  }
  return Status::Ok();
}

std::string FaultSchedule::ToString() const {
  std::string out;
  auto add = [&out](const std::string& item) {
    if (!out.empty()) out += ',';
    out += item;
  };
  for (const FaultEvent& e : events) add(FormatEvent(e));
  // Parse() sets a field only from its item, so an unset field needs no item; a delay item
  // with probability 0 but bounds is kept so the bounds round-trip too.
  if (messages.drop_probability != 0) add("drop:" + FormatProbability(messages.drop_probability));
  if (messages.duplicate_probability != 0) {
    add("duplicate:" + FormatProbability(messages.duplicate_probability));
  }
  if (messages.delay_probability != 0 || messages.delay_ns_min != 0 || messages.delay_ns_max != 0) {
    add("delay:" + FormatProbability(messages.delay_probability) + "@" +
        FormatTime(messages.delay_ns_min) + "-" + FormatTime(messages.delay_ns_max));
  }
  if (jitter_ns != 0) add("jitter:" + FormatTime(jitter_ns));
  return out;
}

bool operator==(const FaultSchedule& a, const FaultSchedule& b) {
  const FaultConfig &x = a.messages, &y = b.messages;
  return a.events == b.events && a.jitter_ns == b.jitter_ns &&
         x.drop_probability == y.drop_probability &&
         x.duplicate_probability == y.duplicate_probability &&
         x.delay_probability == y.delay_probability &&
         x.delay_distribution == y.delay_distribution && x.delay_ns_min == y.delay_ns_min &&
         x.delay_ns_max == y.delay_ns_max && x.delay_ns_mean == y.delay_ns_mean;
}

}  // namespace pond::sim
