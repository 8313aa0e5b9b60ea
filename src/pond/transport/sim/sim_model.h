// SimModel: the numbers the simulated cluster runs on — network latency, what each memory node's
// NIC can serve, and what the compute nodes' CPUs spend on each step. Every value has a source
// (docs/simulator.md "Network, NIC and CPU model"); presets `cx3` (the Lotus testbed) and `cx5`
// are built in, and a JSON file may override any field. models/cx3.json and models/cx5.json hold
// the presets with the source of every value beside it (a test keeps them equal to the code).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pond/sim/faults.h"
#include "pond/status.h"

namespace pond {

struct SimModel {
  std::string name = "cx3";

  // Network: one-way latency of a small message or one-sided op between any two nodes, and the
  // link rate that adds size / rate for payload bytes.
  uint64_t one_way_ns = 1000;
  double link_gbps = 56;

  // Each MN's NIC is a FIFO server: a one-sided op occupies it 1e3 / Mops ns by verb kind, plus
  // its payload at the link rate.
  double mn_read_mops = 35;
  double mn_write_mops = 35;
  double mn_atomic_mops = 2.5;

  // CN CPU: a worker is one core. A scheduling round costs cpu_round_ns, plus per coroutine
  // resumed, per one-sided op posted, per doorbell batch, and per CN message sent or received.
  // Calibrated against `pond bench kvs` on this machine (docs/simulator.md "Calibration").
  uint64_t cpu_round_ns = 60;
  uint64_t cpu_resume_ns = 370;
  uint64_t cpu_op_ns = 60;
  uint64_t cpu_batch_ns = 120;
  uint64_t cpu_message_ns = 370;

  // Faults of CN-to-CN messages; all off by default.
  sim::FaultConfig faults;

  Status Validate() const;
  // Service time of one op of `verb_kind` (0 READ, 1 WRITE, 2 CAS, 3 FAA) carrying `bytes`.
  uint64_t NicServiceNs(int verb_kind, uint32_t bytes) const;
  uint64_t WireNs(uint64_t bytes) const {
    return static_cast<uint64_t>(static_cast<double>(bytes) * 8.0 / link_gbps);
  }

  // "cx3" or "cx5"; InvalidArgument otherwise.
  static Result<SimModel> Preset(const std::string& name);
  // A preset (the file's "base", default cx3) with the file's fields applied; the model's name
  // is the path. Besides fields, a file may hold notes, which are ignored: "<field>_source" (a
  // string: where the field's value comes from; models/cx3.json) and any key starting with "_".
  // InvalidArgument, naming the file and the key, on a bad value or an unknown key.
  static Result<SimModel> Load(const std::string& path);
  // `cx3`, `cx5` or a file path.
  static Result<SimModel> FromFlag(const std::string& flag);
  // The names of every field a file may set and ToJson() prints (besides "name"), in order.
  static const std::vector<std::string>& FieldNames();
  // One line: the name and every field.
  std::string ToJson() const;
};

}  // namespace pond
