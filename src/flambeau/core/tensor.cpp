// Tensor basics: storage allocation, construction, metadata queries and item().
#include "flambeau/core/tensor.h"

#include <cmath>
#include <sstream>

#include "flambeau/core/allocator.h"
#include "flambeau/core/op_hook.h"

namespace flambeau {

Device::Device(const std::string& spec) {
  std::string kind = spec.substr(0, spec.find(':'));
  if (kind == "cpu") type = DeviceType::CPU;
  else if (kind == "cuda") type = DeviceType::CUDA;
  else throw ValueError("[device] unknown device '" + spec + "' (expected cpu or cuda)");
  if (spec.find(':') != std::string::npos) index = std::stoi(spec.substr(spec.find(':') + 1));
}

std::string Device::str() const {
  std::string s = type == DeviceType::CPU ? "cpu" : "cuda";
  return index >= 0 ? s + ":" + std::to_string(index) : s;
}

void check_device_available(const Device& d, const char* op) {
  FLB_CHECK(d.is_cpu(), NotImplementedError, "[", op, "] device ", d.str(),
            " is not available: this build of flambeau supports only the cpu");
}

std::string Scalar::str() const {
  if (kind_ == Kind::Bool) return i_ ? "True" : "False";
  if (kind_ == Kind::Int) return std::to_string(i_);
  std::ostringstream s;
  s << d_;
  return s.str();
}

namespace {
void fill_storage(Storage& s, size_t nbytes, Device device) {
  check_device_available(device, "allocate");
  s.data = memory::allocate(nbytes);
  s.nbytes = nbytes;
  s.device = device;
  s.deleter = [](void* p, size_t n, void*) { memory::release(p, n); };
}
}  // namespace

namespace {
std::atomic<uint64_t> g_allocations{0};
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  auto s = std::make_shared<Storage>();
  fill_storage(*s, nbytes, device);
  s->serial = g_allocations.fetch_add(1, std::memory_order_relaxed) + 1;
  return s;
}

uint64_t Storage::next_serial() { return g_allocations.load(std::memory_order_relaxed) + 1; }

namespace {
bool compute_contiguous(const Dims& sizes, const Dims& strides) {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return numel_of(sizes) == 0;
    expected *= sizes[i];
  }
  return true;
}
}  // namespace

void Tensor::set_data(const Tensor& other) const {
  TensorImpl& d = *impl_;
  const TensorImpl& s = *other.impl_;
  d.storage = s.storage;
  d.sizes = s.sizes;
  d.strides = s.strides;
  d.offset = s.offset;
  d.dtype = s.dtype;
  d.contiguous = s.contiguous;
  d.view_base = s.view_base;
}

Tensor make_tensor(std::shared_ptr<Storage> storage, DType dtype, Dims sizes, Dims strides,
                   int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->strides = strides.size() == sizes.size() ? std::move(strides) : contiguous_strides(sizes);
  impl->sizes = std::move(sizes);
  impl->offset = offset;
  impl->dtype = dtype;
  impl->contiguous = compute_contiguous(impl->sizes, impl->strides);
  return Tensor(std::move(impl));
}

Tensor::Tensor(Scalar s) {
  DType dt = s.dtype();
  Tensor t = make_tensor(Storage::allocate(itemsize(dt), kCPU), dt, {});
  visit_dtype(dt, [&]<class T>() { *static_cast<T*>(t.data_ptr()) = s.to<T>(); });
  t.impl()->wrapped_number = true;
  impl_ = t.impl_;
}

int64_t Tensor::size(int64_t d) const { return sizes()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }


// Reported to the op hook: a tracer must know the program read a tensor's value.
Scalar Tensor::item() const {
  return op_hook::op("item", *this)([&] {
    FLB_CHECK(numel() == 1, ValueError, "[item] a Tensor with ", numel(), " elements cannot be converted to Scalar");
    return visit_dtype(dtype(), [&]<class T>() -> Scalar { return Scalar(*static_cast<const T*>(data_ptr())); });
  });
}

}  // namespace flambeau
