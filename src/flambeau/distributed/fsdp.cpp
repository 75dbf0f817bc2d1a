// See fsdp.h.
#include "flambeau/distributed/fsdp.h"

#include <cstring>

#include "flambeau/core/allocator.h"
#include "flambeau/core/error.h"
#include "flambeau/core/shape.h"

namespace flambeau::distributed::fsdp {

namespace {
void check_whole(const Tensor& t, const char* op) {
  FLB_CHECK(t.defined() && t.is_contiguous() && t.storage_offset() == 0 && t.device() == kCPU, ValueError, "[", op,
            "] expects a contiguous CPU tensor that starts its storage");
}
}  // namespace

void release_memory(const Tensor& t) {
  check_whole(t, "fsdp.release_memory");
  Storage& s = *t.storage();
  if (s.deleter) s.deleter(s.data, s.nbytes, s.ctx);
  s.data = nullptr;
  s.nbytes = 0;
  s.deleter = nullptr;
  s.ctx = nullptr;
}

void allocate_memory(const Tensor& t) {
  check_whole(t, "fsdp.allocate_memory");
  Storage& s = *t.storage();
  const size_t nbytes = size_t(t.numel()) * t.element_size();
  if (s.nbytes >= nbytes) return;
  release_memory(t);
  s.data = memory::allocate(nbytes);
  s.nbytes = nbytes;
  s.deleter = [](void* p, size_t n, void*) { memory::release(p, n); };
}

bool has_memory(const Tensor& t) { return t.numel() == 0 || t.storage()->nbytes > 0; }

void fill_without_version(const Tensor& dst, const Tensor& src) {
  FLB_CHECK(dst.is_contiguous() && src.is_contiguous() && dst.dtype() == src.dtype() && dst.numel() == src.numel(),
            ValueError, "[fsdp.fill] expects contiguous tensors of one dtype and size, got ", shape_str(dst.sizes()),
            " and ", shape_str(src.sizes()));
  FLB_CHECK(has_memory(dst) && has_memory(src), ValueError, "[fsdp.fill] a tensor without memory");
  std::memcpy(dst.data_ptr(), src.data_ptr(), size_t(dst.numel()) * dst.element_size());
}

}  // namespace flambeau::distributed::fsdp
