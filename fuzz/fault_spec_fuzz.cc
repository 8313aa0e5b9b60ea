// The fault-spec parser (sim/fault_schedule.h) on arbitrary text: a schedule or one line, never a
// crash. What it accepts must print canonically and read back to the same schedule
// (Parse(ToString()) == the schedule), and Validate must judge it against a small cluster
// without crashing either way.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pond/sim/fault_schedule.h"

using pond::sim::FaultLimits;
using pond::sim::FaultSchedule;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view spec(reinterpret_cast<const char*>(data), size);
  pond::Result<FaultSchedule> s = FaultSchedule::Parse(spec);
  if (!s.ok()) {
    if (s.status().message().find('\n') != std::string_view::npos) __builtin_trap();
    return 0;
  }
  pond::Result<FaultSchedule> again = FaultSchedule::Parse(s->ToString());
  if (!again.ok() || !(*again == *s)) __builtin_trap();
  FaultLimits limits;
  limits.cns = 3;
  limits.mns = 3;
  limits.max_mns_down = 1;
  (void)s->Validate(limits);
  return 0;
}
