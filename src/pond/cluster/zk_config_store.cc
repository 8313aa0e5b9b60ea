#include "pond/cluster/zk_config_store.h"

#include <openssl/evp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

#include "pond/base/assert.h"

namespace pond::cluster {

// One Watch: its key, its callback, the newest version the callback has seen.
struct ZkConfigStore::Watcher {
  ZkConfigStore* store;
  std::string key;
  std::function<void(const Versioned&)> fn;
  uint64_t seen;  // versions up to this one are not news
};

namespace {

std::string ZkError(const std::string& what, int rc) {
  return "zookeeper: " + what + ": " + zerror(rc);
}

// A result code that says the session could not serve the call: the server is gone or the
// session ended. ZCONNECTIONLOSS leaves a write's outcome unknown; the others come before it.
bool LostService(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED ||
         rc == ZINVALIDSTATE || rc == ZCLOSING;
}

// ZooKeeper's digest scheme names a user by "USER:" + base64(SHA-1("USER:PASSWORD")).
std::string DigestId(const std::string& user, const std::string& password) {
  const std::string text = user + ":" + password;
  unsigned char sha[EVP_MAX_MD_SIZE];
  unsigned int sha_len = 0;
  POND_CHECK(EVP_Digest(text.data(), text.size(), sha, &sha_len, EVP_sha1(), nullptr) == 1);
  std::string b64(4 * ((sha_len + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()), sha, sha_len);
  b64.resize(static_cast<size_t>(n));
  return user + ":" + b64;
}

// The digest user a cluster's daemons are: the secret is what tells clusters apart.
constexpr const char* kDigestUser = "pond";
// Below a root this deep the walk stops: Pond's keys are three levels under it.
constexpr int kGuardDepthMax = 8;

std::string PermsText(int perms) {
  std::string t;
  for (auto [bit, c] : {std::pair{ZOO_PERM_CREATE, 'c'}, std::pair{ZOO_PERM_DELETE, 'd'},
                        std::pair{ZOO_PERM_READ, 'r'}, std::pair{ZOO_PERM_WRITE, 'w'},
                        std::pair{ZOO_PERM_ADMIN, 'a'}}) {
    if ((perms & bit) != 0) t += c;
  }
  return t;
}

}  // namespace

Result<std::unique_ptr<ZkConfigStore>> ZkConfigStore::Connect(const std::string& hosts,
                                                              int session_timeout_ms,
                                                              int connect_timeout_ms) {
  return Connect(hosts, ZkGuard{}, session_timeout_ms, connect_timeout_ms);
}

Result<std::unique_ptr<ZkConfigStore>> ZkConfigStore::Connect(const std::string& hosts,
                                                              const ZkGuard& guard,
                                                              int session_timeout_ms,
                                                              int connect_timeout_ms) {
  if (hosts.empty()) return InvalidArgument("no ZooKeeper address (HOST:PORT) given");
  // The client logs to stderr by default, a line per failed connection attempt (30 a second).
  // Its failures come back as Status values here, which the daemons log in one line each; its
  // own log goes nowhere. (The setting is the process's: the library has no other.)
  static FILE* const quiet = std::fopen("/dev/null", "w");
  if (quiet != nullptr) zoo_set_log_stream(quiet);
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  std::unique_ptr<ZkConfigStore> s(new ZkConfigStore());
  s->zh_ = zookeeper_init(hosts.c_str(), &ZkConfigStore::OnSessionEvent, session_timeout_ms,
                          nullptr, s.get(), 0);
  if (s->zh_ == nullptr) {
    return InvalidArgument("zookeeper: cannot use '" + hosts + "': " + std::strerror(errno));
  }
  std::unique_lock<std::mutex> lock(s->mu_);
  const bool up = s->cv_.wait_for(lock, std::chrono::milliseconds(connect_timeout_ms), [&s] {
    return s->state_ == ZOO_CONNECTED_STATE || s->state_ == ZOO_EXPIRED_SESSION_STATE;
  });
  if (!up || s->state_ != ZOO_CONNECTED_STATE) {
    lock.unlock();
    return Unavailable("no ZooKeeper server answered at " + hosts + " within " +
                       std::to_string(connect_timeout_ms) + " ms");
  }
  lock.unlock();
  POND_RETURN_IF_ERROR(s->Authenticate(guard));
  return s;
}

Status ZkConfigStore::Authenticate(const ZkGuard& guard) {
  guard_ = guard;
  if (!guard_.secret.empty()) {
    digest_id_ = DigestId(kDigestUser, guard_.secret);
    // Written before anything reads them; the ids point into digest_id_, which stays put.
    char* digest = const_cast<char*>("digest");
    char* id = digest_id_.data();
    closed_acl_[0] = ACL{ZOO_PERM_ALL, Id{digest, id}};
    closed_acl_[1] = ACL{ZOO_PERM_READ, ZOO_ANYONE_ID_UNSAFE};
    above_acl_[0] = ACL{ZOO_PERM_ALL, Id{digest, id}};
    above_acl_[1] = ACL{ZOO_PERM_READ | ZOO_PERM_CREATE, ZOO_ANYONE_ID_UNSAFE};
    closed_ = ACL_vector{2, closed_acl_};
    above_ = ACL_vector{2, above_acl_};
    // The client keeps the credential and sends it again on every reconnection; a digest is
    // never refused, so the answer only says the server has it.
    struct Done {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      int rc = 0;
    };
    auto done = std::make_shared<Done>();
    auto* ctx = new std::shared_ptr<Done>(done);
    const std::string credential = std::string(kDigestUser) + ":" + guard_.secret;
    int rc = zoo_add_auth(
        zh_, "digest", credential.data(), static_cast<int>(credential.size()),
        [](int rc, const void* data) {
          auto* held = static_cast<std::shared_ptr<Done>*>(const_cast<void*>(data));
          {
            std::lock_guard<std::mutex> l((*held)->mu);
            (*held)->done = true;
            (*held)->rc = rc;
            (*held)->cv.notify_all();
          }
          delete held;
        },
        ctx);
    if (rc != ZOK) {
      delete ctx;
      return Unavailable(ZkError("authenticate", rc));
    }
    std::unique_lock<std::mutex> l(done->mu);
    if (!done->cv.wait_for(l, std::chrono::seconds(10), [&] { return done->done; })) {
      return Unavailable("zookeeper: authenticate: no answer within 10 s");
    }
    if (done->rc != ZOK) return Unavailable(ZkError("authenticate", done->rc));
  }
  if (guard_.root.empty()) return Status::Ok();
  POND_RETURN_IF_ERROR(CheckConfigKey(guard_.root));
  return CheckGuarded(guard_.root, 0);
}

Status ZkConfigStore::CheckGuarded(const std::string& path, int depth) const {
  struct ACL_vector acl {};
  struct Stat stat {};
  int rc = zoo_get_acl(zh_, path.c_str(), &acl, &stat);
  if (rc == ZNONODE) return Status::Ok();  // made later, guarded as this session makes it
  if (rc != ZOK) return Unavailable(ZkError("read the ACL of " + path, rc));
  bool ours = false, open = false;
  std::string other;
  for (int32_t i = 0; i < acl.count; i++) {
    const ACL& a = acl.data[i];
    const std::string scheme = a.id.scheme, id = a.id.id;
    if (scheme == "world" && id == "anyone" && (a.perms & ZOO_PERM_WRITE) != 0) open = true;
    if (scheme == "digest" && id == digest_id_) {
      ours = (a.perms & ZOO_PERM_WRITE) != 0;
    } else if ((a.perms & ~ZOO_PERM_READ) != 0 && other.empty()) {
      other = scheme + ":" + id + " may " + PermsText(a.perms);
    }
  }
  deallocate_ACL_vector(&acl);
  if (guard_.secret.empty()) {
    if (open) return Status::Ok();
    return PermissionDenied("the znodes of " + path +
                            " are closed to processes without the cluster's secret, and this "
                            "one has none");
  }
  if (!ours && other.starts_with("digest:")) {
    return PermissionDenied("znode " + path +
                            " is guarded by another secret than this process's: is the "
                            "certs directory this cluster's?");
  }
  if (!other.empty() || !ours) {
    return PermissionDenied("znode " + path + " is not guarded by the cluster's secret" +
                            (other.empty() ? "" : " alone (" + other + ")") +
                            ": whoever reaches ZooKeeper could change the cluster; delete it, "
                            "or start the cluster under another name");
  }
  if (depth >= kGuardDepthMax) return Status::Ok();
  struct String_vector children {};
  rc = zoo_get_children(zh_, path.c_str(), 0, &children);
  if (rc == ZNONODE) return Status::Ok();
  if (rc != ZOK) return Unavailable(ZkError("list " + path, rc));
  Status st = Status::Ok();
  for (int32_t i = 0; i < children.count && st.ok(); i++) {
    st = CheckGuarded(path + "/" + children.data[i], depth + 1);
  }
  deallocate_String_vector(&children);
  return st;
}

const struct ACL_vector* ZkConfigStore::AclFor(const std::string& path) const {
  if (guard_.secret.empty()) return &ZOO_OPEN_ACL_UNSAFE;
  // Below or at the root: the secret's holders'. Above it, and with no root named, a parent
  // other clusters share (a key outside any root is not one of a cluster's).
  const std::string& root = guard_.root;
  const bool guarded =
      !root.empty() && (path == root || (path.size() > root.size() && path.starts_with(root) &&
                                         path[root.size()] == '/'));
  return guarded || root.empty() ? &closed_ : &above_;
}

ZkConfigStore::~ZkConfigStore() {
  // Closing waits for the client's threads: no callback runs after it, so the watchers may go.
  if (zh_ != nullptr) zookeeper_close(zh_);
}

bool ZkConfigStore::expired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_ == ZOO_EXPIRED_SESSION_STATE;
}

void ZkConfigStore::OnSessionEvent(zhandle_t* /*zh*/, int type, int state, const char* /*path*/,
                                   void* ctx) {
  if (type != ZOO_SESSION_EVENT) return;
  auto* s = static_cast<ZkConfigStore*>(ctx);
  std::lock_guard<std::mutex> lock(s->mu_);
  s->state_ = state;
  s->cv_.notify_all();
}

Result<Versioned> ZkConfigStore::Get(const std::string& key) const {
  POND_RETURN_IF_ERROR(CheckConfigKey(key));
  // The size first, then the bytes; a put in between may change the size, so look again.
  for (int attempt = 0; attempt < 8; attempt++) {
    struct Stat stat {};
    int rc = zoo_exists(zh_, key.c_str(), 0, &stat);
    if (rc == ZNONODE) return Versioned{};
    if (rc != ZOK) return Unavailable(ZkError("get " + key, rc));
    Versioned v;
    v.value.resize(static_cast<size_t>(stat.dataLength));
    int len = stat.dataLength;
    rc = zoo_get(zh_, key.c_str(), 0, reinterpret_cast<char*>(v.value.data()), &len, &stat);
    if (rc == ZNONODE) return Versioned{};
    if (rc != ZOK) return Unavailable(ZkError("get " + key, rc));
    if (len < 0) len = 0;                  // a znode made with no data at all
    if (stat.dataLength != len) continue;  // it grew meanwhile: the bytes read are cut short
    v.value.resize(static_cast<size_t>(len));
    v.version = static_cast<uint64_t>(stat.version) + 1;
    return v;
  }
  return Unavailable("zookeeper: get " + key + ": its size kept changing under the read");
}

Status ZkConfigStore::CreateParents(const std::string& key) {
  for (size_t slash = key.find('/', 1); slash != std::string::npos;
       slash = key.find('/', slash + 1)) {
    const std::string parent = key.substr(0, slash);
    int rc =
        zoo_create(zh_, parent.c_str(), nullptr, -1, AclFor(parent), ZOO_PERSISTENT, nullptr, 0);
    if (rc == ZNOAUTH) {
      return PermissionDenied("zookeeper: create " + parent +
                              ": refused (this process does not hold the cluster's secret)");
    }
    if (rc != ZOK && rc != ZNODEEXISTS) {
      return Unavailable(ZkError("create " + parent, rc));
    }
  }
  return Status::Ok();
}

Result<uint64_t> ZkConfigStore::PutIf(const std::string& key, std::span<const std::byte> value,
                                      uint64_t expected) {
  POND_RETURN_IF_ERROR(CheckConfigKey(key));
  if (value.size() > kValueBytesMax) {
    return InvalidArgument("zookeeper: a value of " + std::to_string(value.size()) +
                           " bytes is over the " + std::to_string(kValueBytesMax) + " allowed");
  }
  const char* bytes = reinterpret_cast<const char*>(value.data());
  const int len = static_cast<int>(value.size());
  int rc;
  struct Stat stat {};
  if (expected == 0) {
    POND_RETURN_IF_ERROR(CreateParents(key));
    rc = zoo_create(zh_, key.c_str(), bytes, len, AclFor(key), ZOO_PERSISTENT, nullptr, 0);
    stat.version = 0;
  } else {
    if (expected > static_cast<uint64_t>(INT32_MAX)) {
      return Conflict("version of " + key + " cannot be " + std::to_string(expected));
    }
    rc = zoo_set2(zh_, key.c_str(), bytes, len, static_cast<int>(expected - 1), &stat);
  }
  if (rc == ZOK) return static_cast<uint64_t>(stat.version) + 1;
  if (rc == ZNOAUTH) {
    return PermissionDenied("zookeeper: put " + key +
                            ": refused (this process does not hold the cluster's secret)");
  }
  if (rc == ZNODEEXISTS || rc == ZBADVERSION || rc == ZNONODE) {
    return Conflict("version of " + key + " is not " + std::to_string(expected) + " (" +
                    zerror(rc) + ")");
  }
  if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
    return Unknown(ZkError("put " + key + " (it may or may not have happened)", rc));
  }
  if (LostService(rc)) return Unavailable(ZkError("put " + key, rc));
  return Internal(ZkError("put " + key, rc));
}

void ZkConfigStore::Watch(const std::string& key, std::function<void(const Versioned&)> fn) {
  // What is there now is not news: only versions after it reach `fn`. Read here, on the caller's
  // thread; a put between this read and the watch's own is still seen, its version being newer.
  Result<Versioned> now = Get(key);
  auto w = std::make_unique<Watcher>(
      Watcher{this, key, std::move(fn), now.ok() ? now->version : uint64_t{0}});
  Watcher* raw = w.get();
  {
    std::lock_guard<std::mutex> lock(mu_);
    watchers_.push_back(std::move(w));
  }
  Arm(raw);
}

void ZkConfigStore::Arm(Watcher* w) {
  zoo_awget(w->store->zh_, w->key.c_str(), &ZkConfigStore::OnWatchEvent, w, &ZkConfigStore::OnData,
            w);
}

void ZkConfigStore::OnWatchEvent(zhandle_t* /*zh*/, int type, int /*state*/, const char* /*path*/,
                                 void* ctx) {
  // A watch fires once: read again, which sets it again. Session events (a reconnect) leave the
  // watch in place; a session that expired has lost it, and the store with it.
  if (type == ZOO_CHANGED_EVENT || type == ZOO_CREATED_EVENT || type == ZOO_DELETED_EVENT) {
    Arm(static_cast<Watcher*>(ctx));
  }
}

void ZkConfigStore::OnData(int rc, const char* value, int len, const struct Stat* stat,
                           const void* data) {
  auto* w = static_cast<Watcher*>(const_cast<void*>(data));
  if (rc == ZNONODE) {
    // Not there (yet): watch for its creation instead.
    zoo_awexists(w->store->zh_, w->key.c_str(), &ZkConfigStore::OnWatchEvent, w,
                 &ZkConfigStore::OnExists, w);
    return;
  }
  if (rc != ZOK || stat == nullptr) return;
  const uint64_t version = static_cast<uint64_t>(stat->version) + 1;
  if (version <= w->seen) return;
  w->seen = version;
  Versioned v;
  const auto* bytes = reinterpret_cast<const std::byte*>(value);
  if (value != nullptr && len > 0) v.value.assign(bytes, bytes + len);
  v.version = version;
  w->fn(v);
}

void ZkConfigStore::OnExists(int rc, const struct Stat* /*stat*/, const void* data) {
  // Still absent: the watch fires on its creation (OnWatchEvent), and the read follows. Created
  // since the read that found it absent: read it now.
  if (rc == ZOK) Arm(static_cast<Watcher*>(const_cast<void*>(data)));
}

}  // namespace pond::cluster
