#include "pond/cluster/directory.h"

#include <bit>
#include <cstddef>
#include <cstring>

namespace pond::cluster {

namespace {

template <typename T>
void Append(std::vector<std::byte>* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(v));
  std::memcpy(out->data() + at, &v, sizeof(v));
}

template <typename T>
bool Take(std::span<const std::byte>* in, T* v) {
  if (in->size() < sizeof(*v)) return false;
  std::memcpy(v, in->data(), sizeof(*v));
  *in = in->subspan(sizeof(*v));
  return true;
}

}  // namespace

std::vector<std::byte> LogAreas::Encode() const {
  std::vector<std::byte> out;
  Append(&out, bytes);
  Append(&out, static_cast<uint16_t>(areas.size()));
  for (const std::vector<GAddr>& w : areas) {
    Append(&out, static_cast<uint16_t>(w.size()));
    for (GAddr a : w) Append(&out, a.raw);
  }
  return out;
}

Result<LogAreas> LogAreas::Decode(std::span<const std::byte> in) {
  LogAreas l;
  uint16_t workers = 0;
  if (!Take(&in, &l.bytes) || !Take(&in, &workers) || workers == 0 || workers > 64) {
    return InvalidArgument("log areas: bad header");
  }
  for (uint16_t i = 0; i < workers; i++) {
    uint16_t n = 0;
    if (!Take(&in, &n) || n == 0 || n > 64) return InvalidArgument("log areas: bad worker entry");
    std::vector<GAddr> w(n);
    for (GAddr& a : w) {
      if (!Take(&in, &a.raw)) return InvalidArgument("log areas: cut short");
    }
    l.areas.push_back(std::move(w));
  }
  if (!in.empty()) return InvalidArgument("log areas: trailing bytes");
  return l;
}

Result<LogAreas> ReadLogAreas(ConfigStore& store, const std::string& cluster, uint16_t cn,
                              uint16_t incarnation) {
  Result<Versioned> v = store.Get(LogsKey(cluster, cn, incarnation));
  if (!v.ok()) return v.status();
  if (v->version == 0) return NotFound(LogsKey(cluster, cn, incarnation) + " is absent");
  return LogAreas::Decode(v->value);
}

Status WriteShardMap(ConfigStore& store, const std::string& cluster, uint64_t epoch,
                     const std::vector<uint16_t>& owners) {
  std::vector<std::byte> bytes(owners.size() * 2);
  std::memcpy(bytes.data(), owners.data(), bytes.size());
  Result<uint64_t> put = store.PutIf(ShardsKey(cluster, epoch), bytes, 0);
  if (put.ok()) return Status::Ok();
  // Written already: by this CN before (a put whose answer was lost) or by a rival CM. Only a
  // map equal to ours lets this CM go on to the configuration.
  Result<std::vector<uint16_t>> there = ReadShardMap(store, cluster, epoch, owners.size());
  if (there.ok() && *there == owners) return Status::Ok();
  return put.status();
}

// The shard map and the shard list are copied as native integers (docs/formats.md).
static_assert(std::endian::native == std::endian::little, "stored formats are little-endian");

std::vector<std::byte> EncodeShardList(const std::vector<uint32_t>& ids) {
  const auto count = static_cast<uint32_t>(ids.size());
  std::vector<std::byte> out(4 + ids.size() * 4);
  std::memcpy(out.data(), &count, 4);
  // Not for an empty list: memcpy from a null pointer is undefined even for 0 bytes.
  if (!ids.empty()) std::memcpy(out.data() + 4, ids.data(), ids.size() * 4);
  return out;
}

Result<std::vector<uint32_t>> DecodeShardList(std::span<const std::byte> in, uint32_t shards) {
  uint32_t count = 0;
  if (in.size() < 4) return Corruption("shard list: shorter than its count");
  std::memcpy(&count, in.data(), 4);
  if (in.size() != 4 + uint64_t{count} * 4)
    return Corruption("shard list: length is not its count's");
  std::vector<uint32_t> ids(count);
  if (count != 0) std::memcpy(ids.data(), in.data() + 4, uint64_t{count} * 4);
  for (size_t i = 0; i < ids.size(); i++) {
    if (ids[i] >= shards || (i > 0 && ids[i] <= ids[i - 1])) {
      return Corruption("shard list: ids not ascending below " + std::to_string(shards));
    }
  }
  return ids;
}

namespace {
struct MoveHeader {
  uint32_t seq;
  uint16_t incarnation;
  uint16_t to;
  uint16_t to_incarnation;
  uint16_t reserved;
};
static_assert(sizeof(MoveHeader) == 12 && offsetof(MoveHeader, to_incarnation) == 8);
}  // namespace

std::vector<std::byte> MoveRecord::Encode() const {
  const MoveHeader h{seq, incarnation, to, to_incarnation, 0};
  const std::vector<std::byte> list = EncodeShardList(shards);
  std::vector<std::byte> out(sizeof(h) + list.size());
  std::memcpy(out.data(), &h, sizeof(h));
  std::memcpy(out.data() + sizeof(h), list.data(), list.size());
  return out;
}

Result<MoveRecord> MoveRecord::Decode(std::span<const std::byte> in, uint32_t shards) {
  MoveHeader h;
  if (in.size() < sizeof(h)) return Corruption("shard move: shorter than its header");
  std::memcpy(&h, in.data(), sizeof(h));
  if (h.seq == 0) return Corruption("shard move: number 0");
  if (h.reserved != 0) return Corruption("shard move: reserved bytes set");
  Result<std::vector<uint32_t>> list = DecodeShardList(in.subspan(sizeof(h)), shards);
  if (!list.ok()) return list.status();
  if (list->empty()) return Corruption("shard move: no shard");
  return MoveRecord{h.seq, h.incarnation, h.to, h.to_incarnation, std::move(*list)};
}

Result<std::vector<uint16_t>> ReadShardMap(ConfigStore& store, const std::string& cluster,
                                           uint64_t epoch, size_t shards) {
  Result<Versioned> v = store.Get(ShardsKey(cluster, epoch));
  if (!v.ok()) return v.status();
  if (v->value.size() != shards * 2) {
    return NotFound("no shard map of epoch " + std::to_string(epoch));
  }
  std::vector<uint16_t> owners(shards);
  std::memcpy(owners.data(), v->value.data(), v->value.size());
  return owners;
}

}  // namespace pond::cluster
