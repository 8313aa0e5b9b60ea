// The client API's request checks (server/request_check.h) on arbitrary bytes. The first byte
// picks one of pond.proto's messages — every one, by the file's descriptor, so that a message
// added later is fuzzed without a change here — and the rest is parsed as it, as gRPC would
// parse what a client sent. What the service plans from (an Execute, an interactive add or write
// step, alone or inside an interactive or pipelined request) is then planned against a small
// directory: a plan or a REJECTED line, never a crash, and a plan keeps the limits it checks.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "pond/server/request_check.h"

namespace {

using namespace pond;
using namespace pond::server;

void Check(bool holds) {
  if (!holds) __builtin_trap();
}

const ServiceDirectory& Directory() {
  static const ServiceDirectory dir = [] {
    ServiceDirectory d;
    Check(d.AddTable({"kv", 1, 8, 1 << 20}).ok());
    Check(d.AddTable({"wide", 2, 4096, 1 << 10}).ok());
    return d;
  }();
  return dir;
}

ClientServiceOptions Options() {
  ClientServiceOptions o;
  o.keys_per_request_max = 64;  // small, so that inputs reach the limits
  o.interactive_keys_max = 128;
  o.message_bytes_max = 64 << 10;
  return o;
}

void Execute(const v1::ExecuteRequest& req) {
  const ClientServiceOptions o = Options();
  Result<ExecutePlan> plan = PlanExecute(req, Directory(), o);
  if (!plan.ok()) return;
  Check(plan->reads.size() + plan->writes.size() + plan->conditions.size() <=
        o.keys_per_request_max);
  for (const PlannedWrite& w : plan->writes) {
    Check(w.key.table != nullptr);
    Check(w.kind == v1::Write::DELETE ? w.value.empty()
                                      : w.value.size() == w.key.table->value_bytes);
  }
}

void Interactive(const v1::InteractiveRequest& req, bool read_only) {
  const ClientServiceOptions o = Options();
  if (req.has_add()) {
    Result<PlannedAdd> add = PlanAdd(req.add(), read_only, {}, Directory(), o);
    if (add.ok()) {
      Check(add->keys() <= o.keys_per_request_max);
      if (read_only) Check(add->read_write.empty() && add->inserts.empty() && add->deletes.empty());
    }
  } else if (req.has_write()) {
    Result<std::vector<PlannedWrite>> puts = PlanPuts(req.write(), Directory(), o);
    if (puts.ok()) Check(puts->size() <= o.keys_per_request_max);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const google::protobuf::FileDescriptor* file = v1::ExecuteRequest::descriptor()->file();
  const google::protobuf::Descriptor* type =
      file->message_type(data[0] % file->message_type_count());
  std::unique_ptr<google::protobuf::Message> m(
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(type)->New());
  if (!m->ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  const bool read_only = (data[0] / file->message_type_count()) % 2 == 1;
  if (auto* e = dynamic_cast<v1::ExecuteRequest*>(m.get())) {
    Execute(*e);
  } else if (auto* a = dynamic_cast<v1::Add*>(m.get())) {
    v1::InteractiveRequest r;
    *r.mutable_add() = *a;
    Interactive(r, read_only);
  } else if (auto* w = dynamic_cast<v1::WriteStep*>(m.get())) {
    v1::InteractiveRequest r;
    *r.mutable_write() = *w;
    Interactive(r, read_only);
  } else if (auto* i = dynamic_cast<v1::InteractiveRequest*>(m.get())) {
    Interactive(*i, read_only);
  } else if (auto* p = dynamic_cast<v1::PipelineRequest*>(m.get())) {
    for (const v1::PipelinedRequest& r : p->requests()) {
      if (r.has_execute()) Execute(r.execute());
    }
  }
  return 0;
}
