// A cluster's UCX workers closed to strangers (peer_token.h): an MN gives its region key only to
// a peer that shows the cluster's token, applies only batches that carry it, and a CN takes only
// packets that carry it — each refusal beside the same exchange with the right token, which goes
// through, so that a test passes only because the token made the difference.
#include "pond/transport/ucx/peer_token.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "pond/base/assert.h"
#include "pond/transport/test_worker.h"
#include "pond/transport/ucx/batch_message.h"
#include "pond/transport/ucx/memory_node.h"
#include "pond/transport/ucx/ucx_fabric.h"

namespace pond::ucx {
namespace {

using TestWorker = testing_transport::Worker;

constexpr std::chrono::milliseconds kWait{2000};

UcxOptions Tcp(const PeerToken& token) {
  UcxOptions o;
  o.tls = "tcp";
  o.net_devices = "lo";
  o.peer_token = token;
  return o;
}

TEST(PeerTokenTest, OnePerClusterAndSecretAndNeverOpen) {
  EXPECT_TRUE(IsOpen(DerivePeerToken("", "pond")));
  const PeerToken t = DerivePeerToken("s3cret-s3cret-s3cret-s3cret-s3cret", "pond");
  EXPECT_FALSE(IsOpen(t));
  EXPECT_EQ(t, DerivePeerToken("s3cret-s3cret-s3cret-s3cret-s3cret", "pond"));
  EXPECT_NE(t, DerivePeerToken("s3cret-s3cret-s3cret-s3cret-s3creT", "pond")) << "another secret";
  EXPECT_NE(t, DerivePeerToken("s3cret-s3cret-s3cret-s3cret-s3cret", "pond2")) << "another cluster";

  AmHeader h{77, t};
  EXPECT_EQ(Admit(&h, sizeof(h), t), std::optional<uint64_t>(77));
  EXPECT_FALSE(Admit(&h, sizeof(h) - 1, t).has_value()) << "a short header";
  h.token[31] ^= std::byte{1};
  EXPECT_FALSE(Admit(&h, sizeof(h), t).has_value()) << "one bit off";
  const uint64_t old_header = 77;  // what Pond's messages carried before tokens
  EXPECT_FALSE(Admit(&old_header, sizeof(old_header), t).has_value());
}

class SealedMnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto mn = UcxMemoryNode::Start(0, 1 << 20, Tcp(token_));
    ASSERT_TRUE(mn.ok()) << mn.status().ToString();
    mn_ = std::move(mn).value();
  }
  const PeerToken token_ = DerivePeerToken("the-cluster-secret-of-this-test-0123", "pond");
  const PeerToken stranger_ = DerivePeerToken("a-secret-some-other-cluster-uses-456", "pond");
  std::unique_ptr<UcxMemoryNode> mn_;
};

TEST_F(SealedMnTest, AStrangerGetsNoRegionKey) {
  const MnDescriptor published = mn_->published_descriptor();
  EXPECT_TRUE(published.rkey.empty()) << "what ZooKeeper holds has no region key";
  EXPECT_FALSE(mn_->descriptor().rkey.empty());
  auto ctx = Context::Create(Tcp(stranger_));
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  for (const PeerToken& wrong : {stranger_, PeerToken{}}) {
    Result<std::vector<std::byte>> key = AskRegionKey(**ctx, published, wrong, true, kWait);
    ASSERT_FALSE(key.ok());
    EXPECT_EQ(key.status().code(), Code::kPermissionDenied) << key.status().ToString();
  }
  Result<std::vector<std::byte>> key = AskRegionKey(**ctx, published, token_, true, kWait);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(*key, mn_->descriptor().rkey);

  // A fabric of another cluster is refused at Connect; one of this cluster reads and writes.
  auto refused = UcxFabric::Connect({published}, Tcp(stranger_));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kPermissionDenied) << refused.status().ToString();
  auto member = UcxFabric::Connect({published}, Tcp(token_));
  ASSERT_TRUE(member.ok()) << member.status().ToString();
  TestWorker w(**member, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    uint64_t v = 42, back = 0;
    ep->Write(GAddr::Make(0, 64), &v, sizeof(v));
    ep->Read(GAddr::Make(0, 64), &back, sizeof(back));
    Status st = co_await ep->Flush();
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(back, 42u);
  }(w.ep.get()));
}

// A stranger that speaks UCX itself, not through Pond's CN code (which would refuse an answer
// without its own token and so hide what the MN gave away): one UCP worker and endpoint, and
// what comes back to it, answers of either kind alike.
class Stranger {
 public:
  explicit Stranger(const MnDescriptor& mn) {
    auto ctx = Context::Create(Tcp(PeerToken{}));
    POND_CHECK(ctx.ok());
    ctx_ = std::move(ctx).value();
    auto worker = Worker::Create(*ctx_);
    POND_CHECK(worker.ok());
    worker_ = std::move(worker).value();
    for (unsigned id : {kBatchReplyAmId, kHelloReplyAmId}) {
      ucp_am_handler_param_t hp{};
      hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
      hp.id = id;
      hp.flags = UCP_AM_FLAG_WHOLE_MSG;
      hp.cb = [](void* arg, const void* header, size_t header_length, void* data, size_t length,
                 const ucp_am_recv_param_t*) {
        auto* self = static_cast<Stranger*>(arg);
        self->answers++;
        self->data.assign(static_cast<const std::byte*>(data),
                          static_cast<const std::byte*>(data) + length);
        self->header = AmHeader{};
        if (header_length == sizeof(AmHeader)) std::memcpy(&self->header, header, header_length);
        return UCS_OK;
      };
      hp.arg = this;
      POND_CHECK(ucp_worker_set_am_recv_handler(worker_->get(), &hp) == UCS_OK);
    }
    Status st;
    ep_ = CreateEp(worker_->get(), mn.worker_address, true, &st);
    POND_CHECK(st.ok());
  }
  ~Stranger() {
    ucp_request_param_t cp{};
    cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
    Wait(ucp_ep_close_nbx(ep_, &cp));
  }

  // Sends active message `id` with `token` in its header and waits up to half a second for an
  // answer; answers counts them.
  void Send(unsigned id, const PeerToken& token, const PacketBuffer& bytes) {
    const int before = answers;
    const AmHeader h{1, token};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
    ucs_status_ptr_t r = ucp_am_send_nbx(ep_, id, &h, sizeof(h), bytes.data(), bytes.size(), &p);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (std::chrono::steady_clock::now() < until && answers == before) {
      if (ucp_worker_progress(worker_->get()) == 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    Wait(r);
  }

  // Writes `word` at `offset` of the MN's region with UCX's own PUT, as anyone holding the
  // region key can (an open descriptor, or a stolen key), and waits up to a second for UCX to
  // say it is done; true if it did.
  bool Put(const MnDescriptor& mn, uint64_t offset, uint64_t word) {
    ucp_rkey_h rkey = nullptr;
    if (ucp_ep_rkey_unpack(ep_, mn.rkey.data(), &rkey) != UCS_OK) return false;
    ucp_request_param_t p{};
    Wait(ucp_put_nbx(ep_, &word, sizeof(word), mn.base + offset, rkey, &p));
    ucs_status_ptr_t r = ucp_ep_flush_nbx(ep_, &p);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (r != nullptr && !UCS_PTR_IS_ERR(r) && ucp_request_check_status(r) == UCS_INPROGRESS &&
           std::chrono::steady_clock::now() < until) {
      ucp_worker_progress(worker_->get());
    }
    const bool done = r == nullptr || (!UCS_PTR_IS_ERR(r) && ucp_request_check_status(r) == UCS_OK);
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) ucp_request_free(r);  // UCX frees it once it ends
    ucp_rkey_destroy(rkey);
    return done;
  }

  int answers = 0;
  AmHeader header{};            // the last answer's
  std::vector<std::byte> data;  // the last answer's

 private:
  void Wait(ucs_status_ptr_t r) {
    if (r == nullptr || UCS_PTR_IS_ERR(r)) return;
    while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker_->get());
    ucp_request_free(r);
  }
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<Worker> worker_;
  ucp_ep_h ep_ = nullptr;
};

// The peer hello without the token is answered with nothing: no key, and no token in the header
// either; with the token, the key.
TEST_F(SealedMnTest, AStrangersHelloGetsAnEmptyAnswer) {
  Stranger s(mn_->descriptor());
  s.Send(kHelloAmId, stranger_, {});
  ASSERT_EQ(s.answers, 1) << "a refusal is answered, so that a member with a wrong secret knows";
  EXPECT_TRUE(s.data.empty()) << "the region key went to a stranger";
  EXPECT_TRUE(IsOpen(s.header.token)) << "the cluster's token went to a stranger";
  s.Send(kHelloAmId, token_, {});
  ASSERT_EQ(s.answers, 2);
  EXPECT_EQ(s.data, mn_->descriptor().rkey) << "the member (same hello, the token) gets the key";
}

// A stranger that has the region key anyway (stolen, or guessed) and sends the MN a batch
// message: nothing is applied and nothing is answered, while the same batch with the token is.
TEST_F(SealedMnTest, AStrangersBatchIsNeitherAppliedNorAnswered) {
  Stranger s(mn_->descriptor());
  uint64_t word = 0x5354524e47523421;  // what the batch writes
  std::vector<Op> ops(1);
  ops[0].verb = Verb::kWrite;
  ops[0].addr = GAddr::Make(0, 128);
  ops[0].local = &word;
  ops[0].len = sizeof(word);
  PacketBuffer request;
  EncodeBatch(ops, &request);
  s.Send(kBatchAmId, stranger_, request);
  uint64_t there = 0;
  std::memcpy(&there, mn_->region() + 128, sizeof(there));
  EXPECT_EQ(there, 0u) << "a stranger's batch was applied";
  EXPECT_EQ(s.answers, 0) << "a stranger's batch was answered";

  s.Send(kBatchAmId, token_, request);
  std::memcpy(&there, mn_->region() + 128, sizeof(there));
  EXPECT_EQ(there, word) << "the member's batch (same bytes, the token) is applied";
  EXPECT_EQ(s.answers, 1);
}

// Over TCP the MN carries out no one-sided verb of UCX's: a peer holding the region key (here
// an open cluster's, from its descriptor) that PUTs to the region through UCX, not through the
// MN's batch messages, changes nothing there. UCX's emulation would write wherever the PUT said.
TEST(OpenMnTest, AUcxPutOverTcpDoesNotLand) {
  auto mn = UcxMemoryNode::Start(0, 1 << 20, Tcp(PeerToken{}));
  ASSERT_TRUE(mn.ok()) << mn.status().ToString();
  Stranger s((*mn)->descriptor());
  EXPECT_FALSE(s.Put((*mn)->descriptor(), 256, 0x5354524e47523421)) << "UCX said the PUT was done";
  uint64_t there = 0;
  std::memcpy(&there, (*mn)->region() + 256, sizeof(there));
  EXPECT_EQ(there, 0u) << "a UCX PUT wrote into the region";
}

// A CN that starts while an MN's daemon is dead (killed, not yet declared) comes up with that MN
// down, as with unsealed descriptors (UcxFabricTest.AnMnDeadAtStartIsDownNotFatal), and reaches
// it once its restart replaces the descriptor.
TEST_F(SealedMnTest, AnMnDeadAtStartIsDownAndReachedOnceReplaced) {
  auto dead = UcxMemoryNode::Start(1, 1 << 20, Tcp(token_));
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  const MnDescriptor gone = (*dead)->published_descriptor();
  dead->reset();
  auto f = UcxFabric::Connect({mn_->published_descriptor(), gone}, Tcp(token_));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  TestWorker w(**f, {0, 0});
  w.Run([](Endpoint* ep) -> Task<void> {
    uint64_t back = 0;
    ep->Read(GAddr::Make(1, 64), &back, sizeof(back));
    Endpoint::FlushResult r = co_await ep->FlushReporting();
    EXPECT_EQ(r.status.code(), Code::kUnavailable) << r.status.ToString();
    EXPECT_EQ(r.unreachable, uint64_t{1} << 1);
  }(w.ep.get()));
  auto back = UcxMemoryNode::Start(1, 1 << 20, Tcp(token_));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE((*f)->ReplaceMn((*back)->published_descriptor()).ok());
  w.Run([](Endpoint* ep) -> Task<void> {
    uint64_t v = 9, read = 0;
    ep->Write(GAddr::Make(1, 64), &v, sizeof(v));
    ep->Read(GAddr::Make(1, 64), &read, sizeof(read));
    Status st = co_await ep->Flush();
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(read, 9u);
  }(w.ep.get()));
}

// CN to CN: a packet from a process of another cluster (which read this CN's workers' addresses
// from ZooKeeper) never reaches the handlers; one from a member does.
TEST_F(SealedMnTest, AStrangersPacketIsDropped) {
  const MnDescriptor full = mn_->descriptor();
  auto home = UcxFabric::Connect({full}, Tcp(token_));
  ASSERT_TRUE(home.ok()) << home.status().ToString();
  TestWorker target(**home, {0, 0});
  auto described = (*home)->Describe(0, 1);
  ASSERT_TRUE(described.ok()) << described.status().ToString();
  int got = 0;
  target.ep->OnMessage(3, [&](const Message&) { got++; });

  auto deliver = [&](const PeerToken& token) {
    auto other = UcxFabric::Connect({full}, Tcp(token));
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    ASSERT_TRUE((*other)->AddRemoteCn(*described).ok());
    TestWorker sender(**other, {1, 0});
    const std::vector<std::byte> payload(16, std::byte{7});
    sender.ep->Send({0, 0}, 3, payload);
    sender.ep->EndRound();
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (std::chrono::steady_clock::now() < until && got == 0) {
      sender.sched.RunOnce();
      target.sched.RunOnce();
    }
  };
  ASSERT_NO_FATAL_FAILURE(deliver(stranger_));
  EXPECT_EQ(got, 0) << "a stranger's packet reached the CN's handlers";
  ASSERT_NO_FATAL_FAILURE(deliver(token_));
  EXPECT_EQ(got, 1) << "a member's packet (same bytes, the token) arrives";
}

}  // namespace
}  // namespace pond::ucx
