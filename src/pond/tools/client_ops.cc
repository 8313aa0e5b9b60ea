// `pond client`'s shared parsing and printing (client_ops.h).
#include "pond/tools/client_ops.h"

#include <fmt/core.h>

#include <charconv>
#include <cstdio>
#include <cstring>

namespace pond::tools {

Result<uint64_t> ParseKey(const std::string& s) {
  uint64_t k = 0;
  const bool hex = s.starts_with("0x") || s.starts_with("0X");
  const char* b = s.data() + (hex ? 2 : 0);
  const char* e = s.data() + s.size();
  auto [end, ec] = std::from_chars(b, e, k, hex ? 16 : 10);
  if (b == e || ec != std::errc() || end != e) {
    return InvalidArgument("key \"" + s + "\" is not a number (decimal, or hex after 0x)");
  }
  return k;
}

// BYTES: hex:HEX, i64:N or u64:N (8 bytes, little-endian), or the text itself.
Result<std::string> ParseBytes(const std::string& s) {
  if (s.starts_with("hex:")) {
    const std::string h = s.substr(4);
    if (h.size() % 2 != 0) return InvalidArgument("\"" + s + "\": an odd number of hex digits");
    std::string out;
    for (size_t i = 0; i < h.size(); i += 2) {
      unsigned v = 0;
      auto [end, ec] = std::from_chars(h.data() + i, h.data() + i + 2, v, 16);
      if (ec != std::errc() || end != h.data() + i + 2) {
        return InvalidArgument("\"" + s + "\" is not hex after hex:");
      }
      out += static_cast<char>(v);
    }
    return out;
  }
  if (s.starts_with("i64:") || s.starts_with("u64:")) {
    const std::string n = s.substr(4);
    char buf[8];
    std::errc ec;
    const char* end;
    if (s[0] == 'i') {
      int64_t x = 0;
      auto r = std::from_chars(n.data(), n.data() + n.size(), x);
      ec = r.ec;
      end = r.ptr;
      std::memcpy(buf, &x, 8);
    } else {
      uint64_t x = 0;
      auto r = std::from_chars(n.data(), n.data() + n.size(), x);
      ec = r.ec;
      end = r.ptr;
      std::memcpy(buf, &x, 8);
    }
    if (n.empty() || ec != std::errc() || end != n.data() + n.size()) {
      return InvalidArgument("\"" + s + "\" is not a 64-bit number after " + s.substr(0, 4));
    }
    return std::string(buf, 8);
  }
  return s;
}

// A value for `table`: BYTES, zero-padded to the table's value size.
Result<std::string> ParseValue(const std::string& s, const client::TableInfo& t) {
  Result<std::string> b = ParseBytes(s);
  if (!b.ok()) return b.status();
  if (b->size() > t.value_bytes) {
    return InvalidArgument(
        fmt::format("the value has {} bytes; table {} holds {}", b->size(), t.name, t.value_bytes));
  }
  b->resize(t.value_bytes, '\0');
  return b;
}

// hex:..., then ("text") if it reads as text (three or more printable characters, trailing
// zeros aside), else its whole 8-byte words as i64 (a balance, a counter).
std::string Show(const std::string& v) {
  std::string out = "hex:";
  for (unsigned char c : v) out += fmt::format("{:02x}", c);
  std::string text = v;
  while (!text.empty() && text.back() == '\0') text.pop_back();
  bool printable = text.size() >= 3;
  for (unsigned char c : text) printable = printable && c >= 0x20 && c < 0x7f;
  if (printable) return out + " (\"" + text + "\")";
  std::string words;
  for (size_t i = 0; i + 8 <= v.size() && i < 64; i += 8) {
    int64_t x;
    std::memcpy(&x, v.data() + i, 8);
    words += fmt::format("{}{}", words.empty() ? "" : " ", x);
  }
  return words.empty() ? out : out + " (i64 " + words + ")";
}

int ExitFor(const client::Answer& a) {
  switch (a.outcome) {
    case client::Outcome::kCommitted:
      return 0;
    case client::Outcome::kAborted:
      return kExitAborted;
    case client::Outcome::kRejected:
      return kExitRejected;
    default:
      return kExitUnknown;
  }
}

// Prints a transaction's outcome: COMMITTED on stdout, anything else as one line on stderr.
int Report(const client::Answer& a) {
  if (a.committed()) {
    std::printf("COMMITTED\n");
  } else {
    std::fprintf(stderr, "pond client: %s\n", a.ToString().c_str());
  }
  return ExitFor(a);
}

void PrintValues(const std::vector<client::Value>& values, const std::string& prefix) {
  for (const client::Value& v : values) {
    if (v.found) {
      std::printf("%s%s %lu = %s\n", prefix.c_str(), v.table.c_str(),
                  static_cast<unsigned long>(v.key), Show(v.bytes).c_str());
    } else {
      std::printf("%s%s %lu: not found\n", prefix.c_str(), v.table.c_str(),
                  static_cast<unsigned long>(v.key));
    }
  }
}

// A txn operation, OP:TABLE:KEY[:VALUE], added to `r`.
Status AddOp(const std::string& op, const client::Description& d, client::Request* r) {
  const size_t a = op.find(':');
  const size_t b = a == std::string::npos ? a : op.find(':', a + 1);
  if (b == std::string::npos) return InvalidArgument("\"" + op + "\" is not OP:TABLE:KEY[:VALUE]");
  const std::string kind = op.substr(0, a), table = op.substr(a + 1, b - a - 1);
  const size_t c = op.find(':', b + 1);
  const std::string key_text =
      op.substr(b + 1, c == std::string::npos ? std::string::npos : c - b - 1);
  const bool has_value = kind == "put" || kind == "insert" || kind == "if";
  if (has_value != (c != std::string::npos)) {
    return InvalidArgument(
        "\"" + op + "\": " + kind +
        (has_value ? " takes a value (OP:TABLE:KEY:VALUE)" : " takes no value (OP:TABLE:KEY)"));
  }
  const client::TableInfo* t = d.Table(table);
  if (t == nullptr) return InvalidArgument("the server has no table \"" + table + "\"");
  Result<uint64_t> key = ParseKey(key_text);
  if (!key.ok()) return key.status();
  Result<std::string> value = has_value ? ParseValue(op.substr(c + 1), *t) : std::string();
  if (!value.ok()) return value.status();
  if (kind == "get") {
    r->Read(table, *key);
  } else if (kind == "put") {
    r->Put(table, *key, *value);
  } else if (kind == "insert") {
    r->Insert(table, *key, *value);
  } else if (kind == "delete") {
    r->Delete(table, *key);
  } else if (kind == "if") {
    r->IfEquals(table, *key, *value);
  } else if (kind == "absent") {
    r->IfAbsent(table, *key);
  } else {
    return InvalidArgument("\"" + kind + "\" is not get, put, insert, delete, if or absent");
  }
  return Status::Ok();
}

}  // namespace pond::tools
