#include "pond/cluster/membership.h"

#include <cstddef>
#include <cstring>
#include <string>

namespace pond::cluster {

namespace {
constexpr uint32_t kConfigMagic = 0x47464e43;  // "CNFG"
struct ConfigHeader {
  uint32_t magic;
  uint16_t cns;
  uint16_t mns;
  uint64_t epoch;
};
static_assert(sizeof(ConfigHeader) == 16);
struct CnEntry {
  uint8_t alive;
  uint8_t flags;  // kHostsTso
  uint16_t incarnation;
  uint32_t moves;         // CnStatus::moves
  uint64_t failed_epoch;  // CnStatus::failed_epoch
};
static_assert(sizeof(CnEntry) == 16);
static_assert(offsetof(CnEntry, flags) == 1 && offsetof(CnEntry, incarnation) == 2 &&
              offsetof(CnEntry, failed_epoch) == 8);
constexpr uint8_t kHostsTso = 1;
struct MnEntry {
  uint8_t alive;
  uint8_t rejoin;   // MnStatus::Rejoin; 0 unless alive
  uint8_t leaving;  // MnStatus::leaving; 0 unless alive and not rejoining
  uint8_t reserved;
  uint16_t incarnation;  // MnStatus::incarnation
  uint16_t reserved2;
};
static_assert(sizeof(MnEntry) == 8);
static_assert(offsetof(MnEntry, rejoin) == 1 && offsetof(MnEntry, leaving) == 2 &&
              offsetof(MnEntry, incarnation) == 4);
}  // namespace

std::vector<std::byte> Configuration::Encode() const {
  std::vector<std::byte> out(sizeof(ConfigHeader) + cns.size() * sizeof(CnEntry) +
                             mns.size() * sizeof(MnEntry));
  ConfigHeader h{kConfigMagic, static_cast<uint16_t>(cns.size()), static_cast<uint16_t>(mns.size()),
                 epoch};
  std::memcpy(out.data(), &h, sizeof(h));
  std::byte* at = out.data() + sizeof(h);
  for (size_t i = 0; i < cns.size(); i++) {
    const CnStatus& cn = cns[i];
    CnEntry e{static_cast<uint8_t>(cn.alive ? 1 : 0), i == tso_host ? kHostsTso : uint8_t{0},
              cn.incarnation, cn.moves, cn.alive ? 0 : cn.failed_epoch};
    std::memcpy(at, &e, sizeof(e));
    at += sizeof(e);
  }
  for (const MnStatus& mn : mns) {
    MnEntry e{static_cast<uint8_t>(mn.alive ? 1 : 0),
              static_cast<uint8_t>(mn.rejoin),
              static_cast<uint8_t>(mn.leaving ? 1 : 0),
              0,
              mn.incarnation,
              0};
    std::memcpy(at, &e, sizeof(e));
    at += sizeof(e);
  }
  return out;
}

Result<Configuration> Configuration::Decode(std::span<const std::byte> bytes) {
  ConfigHeader h;
  if (bytes.size() < sizeof(h)) return Corruption("configuration shorter than its header");
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.magic != kConfigMagic) return Corruption("configuration has a bad magic");
  if (bytes.size() !=
      sizeof(h) + size_t{h.cns} * sizeof(CnEntry) + size_t{h.mns} * sizeof(MnEntry)) {
    return Corruption("configuration size does not match its CN and MN counts");
  }
  Configuration c;
  c.epoch = h.epoch;
  c.cns.resize(h.cns);
  int tso_hosts = 0;
  for (size_t i = 0; i < c.cns.size(); i++) {
    CnEntry e;
    std::memcpy(&e, bytes.data() + sizeof(h) + i * sizeof(e), sizeof(e));
    if (e.alive > 1) return Corruption("configuration CN entry has a bad alive flag");
    if ((e.flags & ~kHostsTso) != 0) return Corruption("configuration CN entry has unknown flags");
    if (e.flags & kHostsTso) {
      tso_hosts++;
      c.tso_host = static_cast<uint16_t>(i);
    }
    if (e.failed_epoch > h.epoch || (e.alive == 1 && e.failed_epoch != 0)) {
      return Corruption("configuration CN entry has a bad failed epoch");
    }
    c.cns[i] = CnStatus{e.alive == 1, e.incarnation, e.failed_epoch, e.moves};
  }
  if (!c.cns.empty() && tso_hosts != 1) {
    return Corruption("configuration names " + std::to_string(tso_hosts) +
                      " timestamp oracle hosts, not 1");
  }
  c.mns.resize(h.mns);
  const std::byte* mn_at = bytes.data() + sizeof(h) + c.cns.size() * sizeof(CnEntry);
  for (size_t i = 0; i < c.mns.size(); i++) {
    MnEntry e;
    std::memcpy(&e, mn_at + i * sizeof(e), sizeof(e));
    if (e.alive > 1) return Corruption("configuration MN entry has a bad alive flag");
    if (e.rejoin > static_cast<uint8_t>(MnStatus::Rejoin::kSwitched) ||
        (e.rejoin != 0 && e.alive == 0)) {
      return Corruption("configuration MN entry has a bad rejoin state");
    }
    if (e.leaving > 1 || (e.leaving == 1 && (e.alive == 0 || e.rejoin != 0))) {
      return Corruption("configuration MN entry has a bad leaving flag");
    }
    if (e.reserved != 0 || e.reserved2 != 0) {
      return Corruption("configuration MN entry has reserved bytes set");
    }
    c.mns[i] = MnStatus{e.alive == 1, static_cast<MnStatus::Rejoin>(e.rejoin), e.leaving == 1,
                        e.incarnation};
  }
  return c;
}

bool Configuration::AcceptsPacketFrom(uint16_t cn, uint16_t incarnation) const {
  if (cn >= cns.size()) return true;
  const CnStatus& s = cns[cn];
  return s.alive && s.incarnation == incarnation;
}

std::vector<uint16_t> Configuration::Alive() const {
  std::vector<uint16_t> out;
  for (size_t i = 0; i < cns.size(); i++) {
    if (cns[i].alive) out.push_back(static_cast<uint16_t>(i));
  }
  return out;
}

Status CheckConfigKey(const std::string& key) {
  if (key.size() < 2 || key[0] != '/' || key.back() == '/' || key.find("//") != std::string::npos) {
    return InvalidArgument("configuration key '" + key +
                           "' is not an absolute path like /pond/configuration");
  }
  return Status::Ok();
}

Result<Versioned> InMemoryConfigStore::Get(const std::string& key) const {
  POND_RETURN_IF_ERROR(CheckConfigKey(key));
  auto it = data_.find(key);
  return it == data_.end() ? Versioned{} : it->second;
}

Result<uint64_t> InMemoryConfigStore::PutIf(const std::string& key,
                                            std::span<const std::byte> value, uint64_t expected) {
  POND_RETURN_IF_ERROR(CheckConfigKey(key));
  auto it = data_.find(key);
  const uint64_t version = it == data_.end() ? 0 : it->second.version;
  if (version != expected) {
    return Conflict("version of " + key + " is " + std::to_string(version) + ", not " +
                    std::to_string(expected));
  }
  Versioned& v = data_[key];
  v.value.assign(value.begin(), value.end());
  v.version++;
  puts_++;
  auto [begin, end] = watches_.equal_range(key);
  for (auto it = begin; it != end; ++it) it->second(v);
  return v.version;
}

void InMemoryConfigStore::Watch(const std::string& key, std::function<void(const Versioned&)> fn) {
  watches_.emplace(key, std::move(fn));
}

}  // namespace pond::cluster
