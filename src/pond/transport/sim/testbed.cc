#include "pond/testbed.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <vector>

#include "pond/base/printable.h"
#include "pond/transport/sim/sim_model.h"

namespace pond {

Status Testbed::Validate() const {
  if (one_way_ns == 0 || one_way_ns > 1'000'000'000) {
    return InvalidArgument("one_way_ns must be 1 ns to 1 s");
  }
  if (jitter_ns > 10'000'000) return InvalidArgument("jitter_ns must be at most 10 ms");
  if (!(link_gbps > 0 && link_gbps <= 10'000))
    return InvalidArgument("link_gbps must be in (0, 10000]");
  for (double m : {mn_read_mops, mn_write_mops, mn_atomic_mops, mn_device_atomic_mops}) {
    if (!(m > 0 && m <= 10'000)) return InvalidArgument("NIC rates (Mops) must be in (0, 10000]");
  }
  for (uint64_t c : {cpu_round_ns, cpu_resume_ns, cpu_op_ns, cpu_batch_ns, cpu_message_ns}) {
    if (c > 1'000'000) return InvalidArgument("CPU costs must be at most 1 ms");
  }
  if (mn_atomic_serial_ns > 1'000'000 || mn_device_atomic_serial_ns > 1'000'000) {
    return InvalidArgument("atomic serialization times must be at most 1 ms");
  }
  if (faults.delay_distribution != DelayDistribution::kUniform &&
      faults.delay_distribution != DelayDistribution::kExponential) {
    return InvalidArgument("unknown delay_distribution");
  }
  return FaultConfigOf(faults).Validate();
}

Result<Testbed> Testbed::Preset(const std::string& name) {
  Testbed m;
  if (name == "cx3") return m;  // the defaults are the Lotus testbed
  if (name == "cx5") {
    m.name = "cx5";
    m.link_gbps = 100;
    m.one_way_ns = 800;
    m.mn_read_mops = 110;
    m.mn_write_mops = 110;
    m.mn_atomic_mops = 8;
    m.mn_device_atomic_mops = 110;
    m.mn_atomic_serial_ns = 1000;
    m.mn_device_atomic_serial_ns = 10;
    return m;
  }
  if (name == "lotus-testbed") {
    // The fit and its sources: models/lotus-testbed.json, docs/simulator.md "The lotus-testbed
    // preset".
    m.name = "lotus-testbed";
    m.cpu_round_ns = 192;
    m.cpu_resume_ns = 1184;
    m.cpu_op_ns = 192;
    m.cpu_batch_ns = 384;
    m.cpu_message_ns = 1184;
    m.mn_atomic_mops = 0.9;
    m.mn_device_atomic_mops = 0.9;
    m.mn_atomic_serial_ns = 1111;
    m.mn_device_atomic_serial_ns = 1111;
    return m;
  }
  return InvalidArgument("unknown model '" + Printable(name) +
                         "' (cx3, cx5, lotus-testbed or a JSON file)");
}

const std::vector<std::string>& Testbed::PresetNames() {
  static const std::vector<std::string> names = {"cx3", "cx5", "lotus-testbed"};
  return names;
}

namespace {

// Every numeric field of a model, by its name in model files and in ToJson(): one table, so the
// loader and the printer cannot disagree about what a model holds.
struct FieldRef {
  const char* name;
  uint64_t* u64;  // exactly one of the two is set
  double* dbl;
};

std::vector<FieldRef> Fields(Testbed& m) {
  return {{"one_way_ns", &m.one_way_ns, nullptr},
          {"link_gbps", nullptr, &m.link_gbps},
          {"jitter_ns", &m.jitter_ns, nullptr},
          {"mn_read_mops", nullptr, &m.mn_read_mops},
          {"mn_write_mops", nullptr, &m.mn_write_mops},
          {"mn_atomic_mops", nullptr, &m.mn_atomic_mops},
          {"mn_device_atomic_mops", nullptr, &m.mn_device_atomic_mops},
          {"mn_atomic_serial_ns", &m.mn_atomic_serial_ns, nullptr},
          {"mn_device_atomic_serial_ns", &m.mn_device_atomic_serial_ns, nullptr},
          {"cpu_round_ns", &m.cpu_round_ns, nullptr},
          {"cpu_resume_ns", &m.cpu_resume_ns, nullptr},
          {"cpu_op_ns", &m.cpu_op_ns, nullptr},
          {"cpu_batch_ns", &m.cpu_batch_ns, nullptr},
          {"cpu_message_ns", &m.cpu_message_ns, nullptr},
          {"drop_probability", nullptr, &m.faults.drop_probability},
          {"duplicate_probability", nullptr, &m.faults.duplicate_probability},
          {"delay_probability", nullptr, &m.faults.delay_probability},
          {"delay_ns_min", &m.faults.delay_ns_min, nullptr},
          {"delay_ns_max", &m.faults.delay_ns_max, nullptr},
          {"delay_ns_mean", &m.faults.delay_ns_mean, nullptr}};
}

// The one field that is not a number.
constexpr const char* kDistributionField = "delay_distribution";

const char* DistributionName(DelayDistribution d) {
  return d == DelayDistribution::kExponential ? "exponential" : "uniform";
}

constexpr std::string_view kSourceSuffix = "_source";

// The field a "<field>_source" key annotates, or "" if `key` is not of that form.
std::string SourcedField(const std::string& key) {
  if (key.size() <= kSourceSuffix.size() || !key.ends_with(kSourceSuffix)) return "";
  return key.substr(0, key.size() - kSourceSuffix.size());
}

}  // namespace

const std::vector<std::string>& Testbed::FieldNames() {
  static const std::vector<std::string> names = [] {
    Testbed m;
    std::vector<std::string> out;
    for (const FieldRef& f : Fields(m)) out.emplace_back(f.name);
    out.emplace_back(kDistributionField);
    return out;
  }();
  return names;
}

Result<Testbed> Testbed::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("cannot read model file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return FromJson(text.str(), path);
}

Result<Testbed> Testbed::FromJson(std::string_view text, const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(path + ": not a JSON object");
  std::string base = "cx3";
  if (j.contains("base")) {
    if (!j["base"].is_string()) return InvalidArgument(path + ": base must be a preset's name");
    base = j["base"].get<std::string>();
  }
  Result<Testbed> r = Preset(base);
  if (!r.ok()) return InvalidArgument(path + ": " + r.status().message());
  Testbed m = *r;
  m.name = path;
  std::vector<FieldRef> fields = Fields(m);
  auto known = [&](const std::string& key) {
    const auto& names = FieldNames();
    return std::find(names.begin(), names.end(), key) != names.end();
  };
  for (auto& item : j.items()) {
    // Named, not a structured binding: clang 14 (the fuzz build's) cannot capture one.
    const std::string& key = item.key();
    nlohmann::json& value = item.value();
    if (key == "base" || key.rfind('_', 0) == 0) continue;  // "_comment": a note
    if (std::string field = SourcedField(key); !field.empty() && known(field)) {
      // "<field>_source": where the field's value comes from, for the reader only.
      if (!value.is_string()) return InvalidArgument(path + ": " + key + " must be a string");
      continue;
    }
    if (key == kDistributionField) {
      std::string d = value.is_string() ? value.get<std::string>() : "";
      if (d == "uniform") {
        m.faults.delay_distribution = DelayDistribution::kUniform;
      } else if (d == "exponential") {
        m.faults.delay_distribution = DelayDistribution::kExponential;
      } else {
        return InvalidArgument(path + ": " + key + " must be \"uniform\" or \"exponential\"");
      }
      continue;
    }
    auto f = std::find_if(fields.begin(), fields.end(),
                          [&](const FieldRef& f) { return key == f.name; });
    if (f == fields.end()) {
      std::string list;
      for (const std::string& n : FieldNames()) list += (list.empty() ? "" : ", ") + n;
      return InvalidArgument(path + ": unknown field '" + Printable(key) + "' (fields: base, " +
                             list + "; a field's note is FIELD_source, other notes start with _)");
    }
    if (f->u64 != nullptr) {
      if (!value.is_number_unsigned()) {
        return InvalidArgument(path + ": " + key + " must be a non-negative integer");
      }
      *f->u64 = value.get<uint64_t>();
    } else {
      if (!value.is_number()) return InvalidArgument(path + ": " + key + " must be a number");
      *f->dbl = value.get<double>();
    }
  }
  Status v = m.Validate();
  if (!v.ok()) return InvalidArgument(path + ": " + v.message());
  return m;
}

Result<Testbed> Testbed::FromName(const std::string& flag) {
  const auto& presets = PresetNames();
  if (std::find(presets.begin(), presets.end(), flag) != presets.end()) return Preset(flag);
  return Load(flag);
}

std::string Testbed::ToJson() const {
  Testbed copy = *this;  // Fields() hands out pointers into a model
  nlohmann::json j = {{"name", name}};
  for (const FieldRef& f : Fields(copy)) {
    if (f.u64 != nullptr) {
      j[f.name] = *f.u64;
    } else {
      j[f.name] = *f.dbl;
    }
  }
  j[kDistributionField] = DistributionName(faults.delay_distribution);
  return j.dump();
}

}  // namespace pond
