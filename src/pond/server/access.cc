#include "pond/server/access.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <toml++/toml.h>
#include <ctime>
#include <fstream>
#include <sstream>

#include "pond/base/printable.h"

namespace pond::server {

namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * n);
  for (size_t i = 0; i < n; i++) {
    s.push_back(kDigits[p[i] >> 4]);
    s.push_back(kDigits[p[i] & 15]);
  }
  return s;
}

bool IsHex64(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// A TOML offset date-time as seconds since the epoch (a local date-time, one without an offset,
// is taken as UTC: the file says when, not where).
int64_t UnixSeconds(const toml::date_time& dt) {
  std::tm tm{};
  tm.tm_year = dt.date.year - 1900;
  tm.tm_mon = dt.date.month - 1;
  tm.tm_mday = dt.date.day;
  tm.tm_hour = dt.time.hour;
  tm.tm_min = dt.time.minute;
  tm.tm_sec = dt.time.second;
  int64_t t = static_cast<int64_t>(timegm(&tm));
  if (dt.offset) t -= int64_t{dt.offset->minutes} * 60;
  return t;
}

std::string Rfc3339(int64_t unix_s) {
  const auto t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

const char* RoleName(Role r) {
  switch (r) {
    case Role::kReadOnly:
      return "read-only";
    case Role::kReadWrite:
      return "read-write";
    case Role::kAdmin:
      return "admin";
    case Role::kNone:
      break;
  }
  return "none";
}

Result<Role> RoleByName(const std::string& name) {
  for (Role r : {Role::kReadOnly, Role::kReadWrite, Role::kAdmin}) {
    if (name == RoleName(r)) return r;
  }
  return InvalidArgument("role \"" + Printable(name) + "\": read-only, read-write or admin");
}

Access Access::Open() {
  Access a;
  a.open_ = true;
  return a;
}

Result<Access> Access::Parse(const std::string& text, const std::string& name) {
  toml::table doc;
  try {
    doc = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    std::string what(e.description());
    for (char& c : what) {
      if (c == '\n') c = ' ';
    }
    return InvalidArgument(name + ":" + std::to_string(e.source().begin.line) +
                           ": not TOML: " + what);
  }
  Access a;
  for (const auto& [key, value] : doc) {
    const std::string k(key.str());
    if (k == "users") {
      const toml::table* users = value.as_table();
      if (users == nullptr) return InvalidArgument(name + ": users is a table: [users]");
      for (const auto& [user, role] : *users) {
        const std::string u(user.str());
        // Names go into messages made printable: a TOML key may hold a newline, a message not.
        const std::string shown = Printable(u);
        const auto* r = role.as_string();
        if (r == nullptr) return InvalidArgument(name + ": users." + shown + " takes a role name");
        Result<Role> parsed = RoleByName(r->get());
        if (!parsed.ok())
          return InvalidArgument(name + ": users." + shown + ": " + parsed.status().message());
        a.users_[u] = *parsed;
      }
    } else if (k == "tokens") {
      const toml::array* tokens = value.as_array();
      if (tokens == nullptr) return InvalidArgument(name + ": tokens is a list: [[tokens]]");
      int i = 0;
      for (const toml::node& n : *tokens) {
        const std::string where = name + ": tokens[" + std::to_string(i++) + "]";
        const toml::table* t = n.as_table();
        if (t == nullptr) return InvalidArgument(where + " is not a table");
        const auto token_name = (*t)["name"].value<std::string>();
        const auto role = (*t)["role"].value<std::string>();
        const auto hash = (*t)["sha256"].value<std::string>();
        const auto expires = (*t)["expires"].value<toml::date_time>();
        if (!token_name || token_name->empty()) return InvalidArgument(where + " has no name");
        const std::string shown = Printable(*token_name);
        if (!role) return InvalidArgument(where + " (" + shown + ") has no role");
        if (!hash || !IsHex64(*hash)) {
          return InvalidArgument(where + " (" + shown +
                                 "): sha256 must be 64 lowercase hex digits");
        }
        if (!expires) {
          return InvalidArgument(where + " (" + shown +
                                 "): expires must be a date-time, as 2027-01-01T00:00:00Z");
        }
        for (const auto& [field, _] : *t) {
          const std::string_view f = field.str();
          if (f != "name" && f != "role" && f != "sha256" && f != "expires") {
            return InvalidArgument(where + " (" + shown + "): unknown key " + Printable(f));
          }
        }
        Result<Role> parsed = RoleByName(*role);
        if (!parsed.ok()) return InvalidArgument(where + ": " + parsed.status().message());
        if (!a.tokens_.emplace(*hash, Token{*token_name, *parsed, UnixSeconds(*expires)}).second) {
          return InvalidArgument(where + " (" + shown + "): the same token twice");
        }
      }
    } else {
      return InvalidArgument(name + ": unknown key \"" + Printable(k) +
                             "\" (users and tokens only)");
    }
  }
  return a;
}

Result<Access> Access::Load(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return NotFound(file + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return Parse(text.str(), file);
}

Grant Access::Identify(const Caller& c, int64_t now_unix_s) const {
  if (open_) {
    return Grant{Role::kAdmin,
                 c.certificate_identity.empty() ? "anyone" : "cert:" + c.certificate_identity, ""};
  }
  std::string why = "no client certificate the access file names, and no bearer token";
  if (!c.certificate_identity.empty()) {
    const auto u = users_.find(c.certificate_identity);
    if (u != users_.end()) return Grant{u->second, "cert:" + c.certificate_identity, ""};
    why = "client certificate \"" + c.certificate_identity + "\" is not in the access file";
  }
  if (!c.bearer_token.empty()) {
    const auto t = tokens_.find(TokenHash(c.bearer_token));
    if (t == tokens_.end()) return Grant{Role::kNone, "", "the bearer token is not known"};
    if (now_unix_s >= t->second.expires_unix_s) {
      return Grant{Role::kNone, "",
                   "the bearer token \"" + t->second.name + "\" expired at " +
                       Rfc3339(t->second.expires_unix_s)};
    }
    return Grant{t->second.role, "token:" + t->second.name, ""};
  }
  return Grant{Role::kNone, "", why};
}

std::string TokenHash(const std::string& token) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(token.data(), token.size(), md, &n, EVP_sha256(), nullptr);
  return Hex(md, n);
}

Result<std::string> NewToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return Unavailable("no randomness for a token");
  return Hex(bytes, sizeof(bytes));
}

std::string TokenEntry(const std::string& name, Role role, const std::string& token,
                       int64_t expires_unix_s) {
  return "\n[[tokens]]\nname = \"" + name + "\"\nrole = \"" + RoleName(role) + "\"\nsha256 = \"" +
         TokenHash(token) + "\"\nexpires = " + Rfc3339(expires_unix_s) + "\n";
}

}  // namespace pond::server
