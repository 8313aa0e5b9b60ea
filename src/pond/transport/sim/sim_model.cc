#include "pond/transport/sim/sim_model.h"

#include <fstream>
#include <nlohmann/json.hpp>

namespace pond {

Status SimModel::Validate() const {
  if (one_way_ns == 0 || one_way_ns > 1'000'000'000) {
    return InvalidArgument("one_way_ns must be 1 ns to 1 s");
  }
  if (!(link_gbps > 0 && link_gbps <= 10'000))
    return InvalidArgument("link_gbps must be in (0, 10000]");
  for (double m : {mn_read_mops, mn_write_mops, mn_atomic_mops}) {
    if (!(m > 0 && m <= 10'000)) return InvalidArgument("NIC rates (Mops) must be in (0, 10000]");
  }
  for (uint64_t c : {cpu_round_ns, cpu_resume_ns, cpu_op_ns, cpu_batch_ns, cpu_message_ns}) {
    if (c > 1'000'000) return InvalidArgument("CPU costs must be at most 1 ms");
  }
  return faults.Validate();
}

uint64_t SimModel::NicServiceNs(int verb_kind, uint32_t bytes) const {
  double mops = verb_kind == 0 ? mn_read_mops : verb_kind == 1 ? mn_write_mops : mn_atomic_mops;
  return static_cast<uint64_t>(1000.0 / mops) + WireNs(bytes);
}

Result<SimModel> SimModel::Preset(const std::string& name) {
  SimModel m;
  if (name == "cx3") return m;  // the defaults are the Lotus testbed
  if (name == "cx5") {
    m.name = "cx5";
    m.link_gbps = 100;
    m.one_way_ns = 800;
    m.mn_read_mops = 110;
    m.mn_write_mops = 110;
    m.mn_atomic_mops = 8;
    return m;
  }
  return InvalidArgument("unknown model '" + name + "' (cx3, cx5 or a JSON file)");
}

Result<SimModel> SimModel::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("cannot read model file " + path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(path + ": not a JSON object");
  std::string base = j.value("base", std::string("cx3"));
  Result<SimModel> r = Preset(base);
  if (!r.ok()) return InvalidArgument(path + ": " + r.status().message());
  SimModel m = *r;
  m.name = path;
  for (auto& [key, value] : j.items()) {
    if (key == "base" || key.rfind("_", 0) == 0) continue;  // "_source" notes are comments
    auto u64 = [&](uint64_t* field) -> Status {
      if (!value.is_number_unsigned()) {
        return InvalidArgument(path + ": " + key + " must be a non-negative integer");
      }
      *field = value.get<uint64_t>();
      return Status::Ok();
    };
    auto dbl = [&](double* field) -> Status {
      if (!value.is_number()) return InvalidArgument(path + ": " + key + " must be a number");
      *field = value.get<double>();
      return Status::Ok();
    };
    Status s;
    if (key == "one_way_ns")
      s = u64(&m.one_way_ns);
    else if (key == "link_gbps")
      s = dbl(&m.link_gbps);
    else if (key == "mn_read_mops")
      s = dbl(&m.mn_read_mops);
    else if (key == "mn_write_mops")
      s = dbl(&m.mn_write_mops);
    else if (key == "mn_atomic_mops")
      s = dbl(&m.mn_atomic_mops);
    else if (key == "cpu_round_ns")
      s = u64(&m.cpu_round_ns);
    else if (key == "cpu_resume_ns")
      s = u64(&m.cpu_resume_ns);
    else if (key == "cpu_op_ns")
      s = u64(&m.cpu_op_ns);
    else if (key == "cpu_batch_ns")
      s = u64(&m.cpu_batch_ns);
    else if (key == "cpu_message_ns")
      s = u64(&m.cpu_message_ns);
    else if (key == "drop_probability")
      s = dbl(&m.faults.drop_probability);
    else if (key == "duplicate_probability")
      s = dbl(&m.faults.duplicate_probability);
    else if (key == "delay_probability")
      s = dbl(&m.faults.delay_probability);
    else if (key == "delay_ns_min")
      s = u64(&m.faults.delay_ns_min);
    else if (key == "delay_ns_max")
      s = u64(&m.faults.delay_ns_max);
    else
      s = InvalidArgument(path + ": unknown field " + key);
    if (!s.ok()) return s;
  }
  Status v = m.Validate();
  if (!v.ok()) return InvalidArgument(path + ": " + v.message());
  return m;
}

Result<SimModel> SimModel::FromFlag(const std::string& flag) {
  if (flag == "cx3" || flag == "cx5") return Preset(flag);
  return Load(flag);
}

std::string SimModel::ToJson() const {
  nlohmann::json j = {{"name", name},
                      {"one_way_ns", one_way_ns},
                      {"link_gbps", link_gbps},
                      {"mn_read_mops", mn_read_mops},
                      {"mn_write_mops", mn_write_mops},
                      {"mn_atomic_mops", mn_atomic_mops},
                      {"cpu_round_ns", cpu_round_ns},
                      {"cpu_resume_ns", cpu_resume_ns},
                      {"cpu_op_ns", cpu_op_ns},
                      {"cpu_batch_ns", cpu_batch_ns},
                      {"cpu_message_ns", cpu_message_ns},
                      {"drop_probability", faults.drop_probability},
                      {"duplicate_probability", faults.duplicate_probability},
                      {"delay_probability", faults.delay_probability}};
  return j.dump();
}

}  // namespace pond
