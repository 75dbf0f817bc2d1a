// Index validation and the offset-driven gather/put kernels shared by the indexing ops.
#include "flambeau/ops/index_kernels.h"

#include <climits>
#include <cstring>

#include "flambeau/ops/ops.h"

namespace flambeau::ops {

Tensor index_to_int64(const char* op, const Tensor& index, bool allow_int32) {
  const DType dt = index.dtype();
  FLB_CHECK(dt == kInt64 || (allow_int32 && dt == kInt32), TypeError, "[", op, "] expected dtype int64",
            allow_int32 ? " or int32" : "", " for index, but got ", dtype_name(dt));
  return index.to(kInt64).contiguous();
}

bool check_index_range(const char* op, const Tensor& index64, int64_t dim, int64_t size, bool wrap) {
  const int64_t* p = index64.data<int64_t>();
  const int64_t lo = wrap ? -size : 0;
  struct Range {
    int64_t min, max;
  };
  const Range r = parallel_reduce(
      0, index64.numel(), int64_t(1) << 16, Range{INT64_MAX, INT64_MIN},
      [&](int64_t b, int64_t e) {
        Range x{INT64_MAX, INT64_MIN};
        for (int64_t i = b; i < e; ++i) {
          x.min = p[i] < x.min ? p[i] : x.min;
          x.max = p[i] > x.max ? p[i] : x.max;
        }
        return x;
      },
      [](Range a, Range b) { return Range{std::min(a.min, b.min), std::max(a.max, b.max)}; });
  if (r.min >= lo && r.max < size) return r.min < 0;
  for (int64_t i = 0;; ++i)
    FLB_CHECK(p[i] >= lo && p[i] < size, IndexError, "[", op, "] index ", p[i],
              " is out of bounds for dimension ", dim, " with size ", size);
}

Tensor wrap_negative(const Tensor& index64, int64_t size, bool has_negative) {
  if (!has_negative) return index64;
  Tensor out = empty(index64.sizes(), kInt64);
  const int64_t* p = index64.data<int64_t>();
  int64_t* o = out.data<int64_t>();
  parallel_for(0, out.numel(), kElemGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) o[i] = p[i] < 0 ? p[i] + size : p[i];
  });
  return out;
}

Tensor restride(const Tensor& t, const Dims& sizes, const Dims& strides, int64_t offset) {
  return make_tensor(t.storage(), t.dtype(), sizes, strides, offset);
}

void gather_with_offsets(const Tensor& out, const Tensor& src, const Tensor& offsets, int64_t scale) {
  const ElemLoop L = make_elem_loop(out, {src, offsets});
  visit_bits(out.dtype(), [&]<class U>() {
    for_each_row(L, [&](char* const* p, const int64_t* st, int64_t n) {
      char* o = p[0];
      const char* s = p[1];
      const char* off = p[2];
      if (st[2] == 0) {  // one offset for the whole row (index_select, embedding)
        s += *reinterpret_cast<const int64_t*>(off) * scale;
        if (st[0] == int64_t(sizeof(U)) && st[1] == int64_t(sizeof(U))) {
          std::memcpy(o, s, size_t(n) * sizeof(U));
          return;
        }
        for (int64_t j = 0; j < n; ++j) *reinterpret_cast<U*>(o + j * st[0]) = *reinterpret_cast<const U*>(s + j * st[1]);
        return;
      }
      for (int64_t j = 0; j < n; ++j) {
        const int64_t k = *reinterpret_cast<const int64_t*>(off + j * st[2]);
        *reinterpret_cast<U*>(o + j * st[0]) = *reinterpret_cast<const U*>(s + j * st[1] + k * scale);
      }
    });
  });
}

void put_with_offsets(const Tensor& dst, const Tensor& values, const Tensor& offsets, int64_t scale,
                      bool accumulate) {
  const ElemLoop L = make_elem_loop(dst, {values, offsets});
  visit_dtype(dst.dtype(), [&]<class T>() {
    using CT = compute_t<T>;
    // Plain writes are independent; accumulation runs serially so that sums are ordered.
    const int64_t grain = accumulate ? L.numel : kElemGrain;
    for_each_row(
        L,
        [&](char* const* p, const int64_t* st, int64_t n) {
          for (int64_t j = 0; j < n; ++j) {
            const int64_t k = *reinterpret_cast<const int64_t*>(p[2] + j * st[2]);
            T* d = reinterpret_cast<T*>(p[0] + j * st[0] + k * scale);
            const T v = *reinterpret_cast<const T*>(p[1] + j * st[1]);
            if (accumulate) *d = T(CT(*d) + CT(v));
            else *d = v;
          }
        },
        grain);
  });
}

Tensor nonzero_flat(const Tensor& t) {
  const Tensor m = t.dtype() == kBool && t.is_contiguous() ? t : ne(t, 0);
  const uint8_t* p = static_cast<const uint8_t*>(m.data_ptr());
  const int64_t n = m.numel(), piece = int64_t(1) << 16, pieces = (n + piece - 1) / piece;
  std::vector<int64_t> start(size_t(pieces) + 1, 0);
  parallel_for(0, pieces, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      int64_t count = 0;
      for (int64_t i = c * piece, end = std::min(n, i + piece); i < end; ++i) count += p[i] != 0;
      start[size_t(c) + 1] = count;
    }
  });
  for (int64_t c = 0; c < pieces; ++c) start[size_t(c) + 1] += start[size_t(c)];
  Tensor out = empty({start.back()}, kInt64);
  int64_t* o = out.data<int64_t>();
  parallel_for(0, pieces, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      int64_t w = start[size_t(c)];
      for (int64_t i = c * piece, end = std::min(n, i + piece); i < end; ++i)
        if (p[i]) o[w++] = i;
    }
  });
  return out;
}

}  // namespace flambeau::ops
