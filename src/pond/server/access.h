// Who a client is and what it may do (docs/clients.md "Roles").
//
// A client is known by its certificate (the subject's CN, which mutual TLS has checked against
// the cluster's CA) or by a bearer token it sends as `authorization: Bearer TOKEN`. Each identity
// has a role; each role may do what the one below it may, and more:
//
//   read-only    Describe, read-only requests, read-only procedures and read-only interactive
//                transactions
//   read-write   any transaction and procedure
//   admin        all of it, and whatever changes the cluster (the API has no such call yet)
//
// The rules come from an access file, TOML, that a CN reads when it starts:
//
//   [users]                       # client certificates, by identity
//   root = "admin"
//   reader = "read-only"
//
//   [[tokens]]                    # bearer tokens (`pond token` adds them)
//   name = "loader"
//   role = "read-write"
//   sha256 = "9f86d0..."          # of the token: the file holds no token itself
//   expires = 2027-01-01T00:00:00Z
//
// Without an access file every client the CA signed is admin: TLS alone decides who gets in.
// With one, an identity it does not name gets nothing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pond/status.h"

namespace pond::server {

enum class Role : uint8_t { kNone = 0, kReadOnly = 1, kReadWrite = 2, kAdmin = 3 };

const char* RoleName(Role r);
// "read-only", "read-write" or "admin"; InvalidArgument naming them otherwise.
Result<Role> RoleByName(const std::string& name);

// Who made a request, as the transport saw it.
struct Caller {
  std::string certificate_identity;  // the client certificate's subject CN; empty: none shown
  std::string bearer_token;          // from `authorization: Bearer ...`; empty: none sent
};

// What a request may do, and in whose name.
struct Grant {
  Role role = Role::kNone;
  std::string identity;  // "cert:root", "token:loader", or "anyone" without rules
  std::string why_not;   // with kNone: why, in one line for the client
};

class Access {
 public:
  // Every caller is admin: no access file (TLS, if on, has let in only the CA's clients).
  static Access Open();
  // Rules from an access file's text; `name` names it in errors (InvalidArgument, one line,
  // naming the key or entry that is wrong).
  static Result<Access> Parse(const std::string& text, const std::string& name);
  static Result<Access> Load(const std::string& file);

  // The role of `c` at `now_unix_s`: its certificate's identity if it showed one the rules name,
  // else its token if valid and unexpired. A certificate the rules do not name does not stop a
  // valid token.
  Grant Identify(const Caller& c, int64_t now_unix_s) const;

  bool open() const { return open_; }
  bool has_tokens() const { return !tokens_.empty(); }

 private:
  struct Token {
    std::string name;
    Role role = Role::kNone;
    int64_t expires_unix_s = 0;
  };
  bool open_ = false;
  std::map<std::string, Role> users_;
  std::map<std::string, Token> tokens_;  // by the SHA-256 of the token, lowercase hex
};

// The SHA-256 of `token`, lowercase hex: what the access file keeps.
std::string TokenHash(const std::string& token);
// A new token: 32 random bytes, hex. Unavailable if the system has no randomness to give.
Result<std::string> NewToken();
// The [[tokens]] entry that grants `token` to `name` with `role` until `expires_unix_s`, as TOML
// text to append to an access file.
std::string TokenEntry(const std::string& name, Role role, const std::string& token,
                       int64_t expires_unix_s);

}  // namespace pond::server
