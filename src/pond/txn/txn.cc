// The public Txn: a thin wrapper over TxnState (txn_state.h), which holds the working set and
// the protocol's steps. Sessions (node/session.cc) begin them.
#include <utility>

#include "pond/txn.h"
#include "pond/txn/txn_state.h"

namespace pond {

Txn::Txn(std::shared_ptr<txn::TxnState> s) : s_(std::move(s)) {}
Txn::Txn(Txn&&) noexcept = default;
Txn& Txn::operator=(Txn&&) noexcept = default;
Txn::~Txn() = default;

void Txn::AddRO(uint16_t table, uint64_t key) { s_->Add(table, key, txn::AddOp::kReadOnly); }
void Txn::AddRW(uint16_t table, uint64_t key) { s_->Add(table, key, txn::AddOp::kReadWrite); }
void Txn::Insert(uint16_t table, uint64_t key, std::span<const std::byte> value) {
  s_->Add(table, key, txn::AddOp::kInsert, value);
}
void Txn::Delete(uint16_t table, uint64_t key) { s_->Add(table, key, txn::AddOp::kDelete); }
Task<Status> Txn::Execute() { return s_->ExecuteAll(); }
Task<Result<std::vector<ScanRow>>> Txn::Scan(uint16_t table, uint64_t low, uint64_t high,
                                             size_t limit, ScanOrder order) {
  return s_->Scan(table, low, high, limit, order);
}
Result<std::span<const std::byte>> Txn::Read(uint16_t table, uint64_t key) const {
  return s_->Read(table, key);
}
Status Txn::Write(uint16_t table, uint64_t key, std::span<const std::byte> value) {
  return s_->Write(table, key, value);
}
Task<Status> Txn::Commit() { return s_->Commit(); }
void Txn::Abort() { s_->Abort(); }
uint64_t Txn::start_ts() const { return s_->start_ts(); }
uint64_t Txn::commit_ts() const { return s_->commit_ts(); }

}  // namespace pond
