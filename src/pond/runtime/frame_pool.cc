#include "pond/runtime/frame_pool.h"

#include "pond/task.h"

namespace pond::detail {

void* AllocateFrame(size_t bytes) { return FramePool::ForThisThread().Allocate(bytes); }
void FreeFrame(void* p, size_t bytes) noexcept { FramePool::ForThisThread().Free(p, bytes); }

}  // namespace pond::detail
