// Memory formats (torch.memory_format): which layouts a tensor's strides describe, the
// strides of each layout, and the layout ops give their results. The rules are torch's
// (c10's MemoryFormat.h), so flambeau and torch agree on every tensor's format.
#include <algorithm>
#include <array>
#include <numeric>

#include "flambeau/core/error.h"
#include "flambeau/core/tensor.h"

namespace flambeau {

const char* memory_format_name(MemoryFormat format) {
  switch (format) {
    case MemoryFormat::Contiguous: return "contiguous_format";
    case MemoryFormat::Preserve: return "preserve_format";
    case MemoryFormat::ChannelsLast: return "channels_last";
    case MemoryFormat::ChannelsLast3d: return "channels_last_3d";
  }
  return "?";
}

namespace {

// The dims of a channels-last format from innermost to outermost: C, then the spatial
// dims from the last, then N.
constexpr std::array<int64_t, 4> kOrder2d = {1, 3, 2, 0};
constexpr std::array<int64_t, 5> kOrder3d = {1, 4, 3, 2, 0};

template <size_t N>
bool dense_in_order(const Dims& sizes, const Dims& strides, const std::array<int64_t, N>& order) {
  int64_t expected = 1;
  for (int64_t d : order) {
    if (sizes[size_t(d)] == 1) continue;
    if (strides[size_t(d)] != expected) return false;
    expected *= sizes[size_t(d)];
  }
  return true;
}

// Strides that order the dims as `order` does, dense or not (c10's
// is_channels_last_strides_*_s4). An ambiguous tensor (N, 1, 1, 1 with equal strides) reads
// as contiguous.
template <size_t N>
bool strides_like(const Dims& sizes, const Dims& strides, const std::array<int64_t, N>& order) {
  if (strides[1] == 0) return false;
  int64_t min = 0;
  for (int64_t d : order) {
    const size_t i = size_t(d);
    if (sizes[i] == 0 || strides[i] < min) return false;
    if (d == 0 && min == strides[1]) return false;
    min = strides[i];
    if (sizes[i] > 1) min *= sizes[i];
  }
  return true;
}

template <size_t N>
Dims strides_in_order(const Dims& sizes, const std::array<int64_t, N>& order) {
  Dims strides(sizes.size());
  int64_t next = 1;
  for (int64_t d : order) {
    strides[size_t(d)] = next;
    next *= sizes[size_t(d)];
  }
  return strides;
}

}  // namespace

bool Tensor::is_contiguous(MemoryFormat format) const {
  switch (format) {
    case MemoryFormat::Contiguous: return is_contiguous();
    case MemoryFormat::ChannelsLast: return dim() == 4 && dense_in_order(sizes(), strides(), kOrder2d);
    case MemoryFormat::ChannelsLast3d: return dim() == 5 && dense_in_order(sizes(), strides(), kOrder3d);
    case MemoryFormat::Preserve: break;
  }
  throw ValueError("[is_contiguous] preserve_format is not a layout a tensor can be contiguous in");
}

MemoryFormat suggest_memory_format(const Tensor& t) {
  if (t.dim() == 4 && strides_like(t.sizes(), t.strides(), kOrder2d)) return MemoryFormat::ChannelsLast;
  if (t.dim() == 5 && strides_like(t.sizes(), t.strides(), kOrder3d)) return MemoryFormat::ChannelsLast3d;
  return MemoryFormat::Contiguous;
}

Dims memory_format_strides(const Dims& sizes, MemoryFormat format, const char* op) {
  switch (format) {
    case MemoryFormat::Contiguous: return contiguous_strides(sizes);
    case MemoryFormat::ChannelsLast:
      FLB_CHECK(sizes.size() == 4, ValueError, "[", op, "] required rank 4 tensor to use channels_last format, got ",
                shape_str(sizes));
      return strides_in_order(sizes, kOrder2d);
    case MemoryFormat::ChannelsLast3d:
      FLB_CHECK(sizes.size() == 5, ValueError, "[", op,
                "] required rank 5 tensor to use channels_last_3d format, got ", shape_str(sizes));
      return strides_in_order(sizes, kOrder3d);
    case MemoryFormat::Preserve: break;
  }
  throw ValueError(std::string("[") + op + "] preserve_format names no layout of its own here");
}

bool is_non_overlapping_and_dense(const Tensor& t) {
  if (t.is_contiguous()) return true;
  const Dims &sizes = t.sizes(), &strides = t.strides();
  std::vector<size_t> dims(sizes.size());
  std::iota(dims.begin(), dims.end(), size_t(0));
  std::stable_sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t expected = 1;
  for (size_t d : dims) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

}  // namespace flambeau
