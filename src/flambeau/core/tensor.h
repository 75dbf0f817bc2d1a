// Tensor: a strided view (sizes, strides, offset, dtype) over a Storage shared between
// views. Copying a Tensor copies a handle, as in PyTorch; clone() copies the data.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "flambeau/core/device.h"
#include "flambeau/core/dtype.h"
#include "flambeau/core/scalar.h"
#include "flambeau/core/shape.h"
#include "flambeau/core/op_list.h"

namespace flambeau {

namespace autograd {
struct AutogradMeta;
class Node;
}  // namespace autograd

// A block of memory that tensors view. `deleter(data, nbytes, ctx)` frees it (nullptr: not
// owned); ctx carries whatever the owner needs (a mapping handle, say).
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  void (*deleter)(void* data, size_t nbytes, void* ctx) = nullptr;
  void* ctx = nullptr;
  // Bumped by every in-place write through any view; autograd checks that tensors saved
  // for backward still have the version they were saved at.
  std::atomic<uint32_t> version{0};
  // Allocation order (1, 2, ... by allocate(); 0 for memory from elsewhere): the compiler's
  // tracer tells the tensors made during a trace from older ones by it.
  uint64_t serial = 0;
  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (deleter) deleter(data, nbytes, ctx);
  }
  // Allocates `nbytes` from the device's allocator.
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);
  // The serial the next allocate() gives.
  static uint64_t next_serial();
};

// How a tensor's elements are laid out (torch.memory_format). Contiguous: row-major.
// ChannelsLast: a 4-d N, C, H, W tensor stored N, H, W, C; ChannelsLast3d: a 5-d
// N, C, D, H, W tensor stored N, D, H, W, C. Preserve (copies only): the source's strides
// where it is dense and non-overlapping, else its suggest_memory_format().
enum class MemoryFormat : uint8_t { Contiguous, Preserve, ChannelsLast, ChannelsLast3d };
// "contiguous_format", "preserve_format", "channels_last", "channels_last_3d" (torch's names).
const char* memory_format_name(MemoryFormat format);

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Dims sizes, strides;  // strides in elements
  int64_t offset = 0;   // in elements
  DType dtype = DType::Float32;
  bool contiguous = true;  // row-major dense; set by make_tensor (geometry never changes after)
  // True for a 0-dim tensor made from a Scalar by an op: it promotes like a Python number.
  bool wrapped_number = false;
  // Autograd state (requires_grad, grad, grad_fn); null for tensors autograd never saw.
  std::shared_ptr<autograd::AutogradMeta> autograd;
  // For a view made by a view op: the tensor that owns the memory (never itself a view).
  // An in-place write into the view gives the base its new history (CopySlices).
  std::shared_ptr<TensorImpl> view_base;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  // A number passed where a tensor is expected becomes a 0-dim "wrapped number" tensor
  // that promotes like a Python scalar: int_tensor + 2.5 is float32. (For a plain 0-dim
  // tensor use scalar_tensor().)
  Tensor(Scalar s);
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Tensor(T v) : Tensor(Scalar(v)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  // Points this handle at other's data (storage, geometry, dtype), keeping its identity
  // and autograd state (nn.Module.to converts parameters in place with it).
  void set_data(const Tensor& other) const;
  // The tensor this one is a view of (undefined if it is not a view).
  Tensor view_base() const { return Tensor(impl_->view_base); }
  const std::shared_ptr<Storage>& storage() const { return impl_->storage; }

  int64_t dim() const { return int64_t(impl_->sizes.size()); }
  const Dims& sizes() const { return impl_->sizes; }
  const Dims& shape() const { return impl_->sizes; }
  const Dims& strides() const { return impl_->strides; }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const { return numel_of(impl_->sizes); }
  int64_t storage_offset() const { return impl_->offset; }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->storage->device; }
  size_t element_size() const { return itemsize(dtype()); }
  bool is_contiguous() const { return impl_->contiguous; }
  // Dense in `format`'s order (torch's rule: size-1 dims are ignored). Preserve is not a layout.
  bool is_contiguous(MemoryFormat format) const;
  bool is_floating_point() const { return is_floating(dtype()); }

  // Address of the first element.
  void* data_ptr() const {
    return static_cast<char*>(impl_->storage->data) + impl_->offset * int64_t(element_size());
  }
  // Typed address of the first element; TypeError if T is not the dtype's type.
  template <class T>
  T* data() const {
    FLB_CHECK(dtype_v<T> == dtype(), TypeError, "[data] expected dtype ", dtype_name(dtype_v<T>),
              " but the tensor is ", dtype_name(dtype()));
    return static_cast<T*>(data_ptr());
  }

  // The value of a one-element tensor.
  Scalar item() const;
  template <class T>
  T item() const {
    return item().to<T>();
  }
  // PyTorch-style repr: tensor([[1., 2.], [3., 4.]]) (summarised above 1000 elements).
  std::string str() const;

  // Views (share storage).
  Tensor view(const Dims& shape) const;
  Tensor reshape(const Dims& shape) const;
  Tensor permute(const Dims& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor expand(const Dims& shape) const;
  Tensor broadcast_to(const Dims& shape) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start = {}, std::optional<int64_t> end = {},
               int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Dims& sizes) const;
  Tensor as_strided(const Dims& size, const Dims& stride, std::optional<int64_t> offset = {}) const;
  Tensor operator[](int64_t index) const { return select(0, index); }

  // Autograd (autograd/variable.cpp).
  bool requires_grad() const;
  // Marks a leaf as requiring grad (or not); ValueError on non-leaves and non-float dtypes.
  Tensor& requires_grad_(bool enabled = true);
  // The accumulated gradient of a leaf (undefined until a backward reaches it).
  Tensor grad() const;
  void set_grad(const Tensor& grad);
  // The node that computes this tensor's gradient inputs (null for leaves).
  std::shared_ptr<autograd::Node> grad_fn() const;
  bool is_leaf() const;
  // Backpropagates from this tensor (gradient defaults to 1 for one-element tensors);
  // create_graph: the gradients get a graph of their own (double backward).
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false, bool create_graph = false) const;
  // The same data with no autograd history.
  Tensor detach() const;
  // Keeps .grad() for this non-leaf after backward.
  void retain_grad() const;
  uint32_t version() const { return impl_->storage->version.load(std::memory_order_relaxed); }
  // Records an in-place write (checked against tensors saved for backward).
  void bump_version() const { impl_->storage->version.fetch_add(1, std::memory_order_relaxed); }

  // Copies.
  Tensor contiguous() const;
  // *this when it is contiguous in `format` already, else a copy laid out so.
  Tensor contiguous(MemoryFormat format) const;
  // A copy. clone() is row-major; torch's default (Python's Tensor.clone()) is Preserve.
  Tensor clone(MemoryFormat format = MemoryFormat::Contiguous) const;
  // Returns *this when the dtype already matches; a copy keeps a channels-last layout.
  Tensor to(DType dtype) const;
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(Scalar value);
  Tensor& zero_();

  // Elementwise ops as methods (see ops.h for their meaning).
#define FLB_DECL_UNARY(name, kind, ...) \
  Tensor name() const;             \
  Tensor& name##_();
  FLB_UNARY_OPS(FLB_DECL_UNARY)
#undef FLB_DECL_UNARY
  Tensor add(const Tensor& other, Scalar alpha = 1) const;
  Tensor sub(const Tensor& other, Scalar alpha = 1) const;
  Tensor div(const Tensor& other) const;
  Tensor& add_(const Tensor& other, Scalar alpha = 1);
  Tensor& sub_(const Tensor& other, Scalar alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& div_(const Tensor& other);
#define FLB_DECL_BINARY(name) Tensor name(const Tensor& other) const;
#define FLB_DECL_BINARY_(name) Tensor& name##_(const Tensor& other);
  FLB_BINARY_OPS(FLB_DECL_BINARY)
  FLB_BINARY_INPLACE_OPS(FLB_DECL_BINARY_)
#undef FLB_DECL_BINARY_
  FLB_COMPARE_OPS(FLB_DECL_BINARY)
  FLB_LOGICAL_OPS(FLB_DECL_BINARY)
#undef FLB_DECL_BINARY
  Tensor logical_not() const;
  Tensor clamp(std::optional<Tensor> min, std::optional<Tensor> max = {}) const;
  Tensor& clamp_(std::optional<Tensor> min, std::optional<Tensor> max = {});

  // Reductions (dims empty: all dims).
  Tensor sum(const Dims& dims = {}, bool keepdim = false) const;
  Tensor mean(const Dims& dims = {}, bool keepdim = false) const;
  Tensor prod(const Dims& dims = {}, bool keepdim = false) const;
  Tensor amax(const Dims& dims = {}, bool keepdim = false) const;
  Tensor amin(const Dims& dims = {}, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = {}, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = {}, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// The layout ops give their results for t (torch's suggest_memory_format): ChannelsLast for a
// 4-d (ChannelsLast3d for a 5-d) tensor whose strides order the dims as that format does,
// else Contiguous.
MemoryFormat suggest_memory_format(const Tensor& t);
// Dense strides for `sizes` in `format` (Contiguous, ChannelsLast with 4 dims, ChannelsLast3d
// with 5; else ValueError naming `op`).
Dims memory_format_strides(const Dims& sizes, MemoryFormat format, const char* op);
// No two elements share memory and the elements fill a block without holes (any dim order).
bool is_non_overlapping_and_dense(const Tensor& t);

// Makes a tensor over `storage`. Strides default to contiguous.
Tensor make_tensor(std::shared_ptr<Storage> storage, DType dtype, Dims sizes, Dims strides = {},
                   int64_t offset = 0);

}  // namespace flambeau
