// The elementwise engine. An ElemLoop walks an output and its inputs (broadcast to the
// output's shape) row by row: dims are put innermost-first in the output's memory order
// and merged where every operand allows, so contiguous tensors become one long row.
// typed_row() feeds an op's chunk kernel contiguous arrays of its compute type, converting
// dtypes and gathering strided or broadcast operands in small stack buffers on the way.
#pragma once
#include <algorithm>
#include <initializer_list>

#include "flambeau/core/parallel.h"
#include "flambeau/core/tensor.h"
#include "flambeau/kernels/cpu/cast.h"

namespace flambeau::ops {

inline constexpr int kMaxOperands = 4;       // the output and up to three inputs
inline constexpr int64_t kElemGrain = 32768;  // elements below which ops run on one thread

struct ElemLoop {
  int n_ops = 0;
  Dims shape;                      // innermost first
  Dims strides[kMaxOperands];      // in bytes, innermost first
  char* base[kMaxOperands] = {};
  DType dtype[kMaxOperands] = {};
  int64_t numel = 0;
};

// The layout a result computed from t keeps: suggest_memory_format(t) for a tensor that is
// not row-major, else Contiguous (one test for row-major tensors, the common case).
inline MemoryFormat kept_memory_format(const Tensor& t) {
  return t.is_contiguous() ? MemoryFormat::Contiguous : suggest_memory_format(t);
}

// The result of an elementwise op: channels-last when the first input of the result's shape
// is (as torch's TensorIterator, which follows its operands' layout), else row-major.
Tensor empty_result(const Dims& shape, DType dtype, std::initializer_list<std::reference_wrapper<const Tensor>> inputs);

// `inputs` must broadcast to out's shape.
ElemLoop make_elem_loop(const Tensor& out, std::initializer_list<std::reference_wrapper<const Tensor>> inputs);

// Calls row(ptrs, inner_strides, n) on every innermost run; rows are split among threads.
template <class Row>
void for_each_row(const ElemLoop& L, const Row& row, int64_t grain = kElemGrain) {
  if (L.numel == 0) return;
  const int64_t nd = int64_t(L.shape.size()), inner = L.shape[0];
  parallel_for(0, L.numel, grain, [&](int64_t begin, int64_t end) {
    int64_t idx[16] = {};  // position in L.shape; dims beyond 16 cannot coalesce away
    std::vector<int64_t> big;
    int64_t* pos_idx = idx;
    if (nd > 16) {
      big.assign(size_t(nd), 0);
      pos_idx = big.data();
    }
    int64_t rem = begin;
    for (int64_t d = 0; d < nd; ++d) {
      pos_idx[d] = rem % L.shape[d];
      rem /= L.shape[d];
    }
    char* ptrs[kMaxOperands];
    int64_t inner_st[kMaxOperands];
    for (int op = 0; op < L.n_ops; ++op) inner_st[op] = L.strides[op][0];
    int64_t pos = begin;
    while (pos < end) {
      const int64_t n = std::min(inner - pos_idx[0], end - pos);
      for (int op = 0; op < L.n_ops; ++op) {
        char* p = L.base[op];
        for (int64_t d = 0; d < nd; ++d) p += pos_idx[d] * L.strides[op][d];
        ptrs[op] = p;
      }
      row(static_cast<char* const*>(ptrs), static_cast<const int64_t*>(inner_st), n);
      pos += n;
      pos_idx[0] += n;
      for (int64_t d = 0; d + 1 < nd && pos_idx[d] == L.shape[d]; ++d) {
        pos_idx[d] = 0;
        ++pos_idx[d + 1];
      }
    }
  });
}

// One row of an op whose kernel is chunk(OutT* out, const CT* const* in, int64_t m).
template <class CT, class OutT, int NIn, class Chunk>
void typed_row(char* const* p, const int64_t* st, const DType* dt, int64_t n, const Chunk& chunk) {
  constexpr DType ct = dtype_v<CT>, ot = dtype_v<OutT>;
  bool out_direct = dt[0] == ot && st[0] == int64_t(sizeof(OutT));
  bool in_direct[NIn > 0 ? NIn : 1];
  bool all_direct = out_direct;
  for (int k = 0; k < NIn; ++k) {
    in_direct[k] = dt[k + 1] == ct && st[k + 1] == int64_t(sizeof(CT));
    all_direct = all_direct && in_direct[k];
  }
  const CT* in[NIn > 0 ? NIn : 1];
  if (all_direct) {
    for (int k = 0; k < NIn; ++k) in[k] = reinterpret_cast<const CT*>(p[k + 1]);
    chunk(reinterpret_cast<OutT*>(p[0]), in, n);
    return;
  }
  constexpr int64_t B = 256;
  alignas(64) CT ibuf[NIn > 0 ? NIn : 1][B];
  alignas(64) OutT obuf[B];
  for (int64_t i = 0; i < n; i += B) {
    int64_t m = std::min(B, n - i);
    for (int k = 0; k < NIn; ++k) {
      const char* src = p[k + 1] + i * st[k + 1];
      if (in_direct[k]) {
        in[k] = reinterpret_cast<const CT*>(src);
      } else {
        kernels::convert(src, dt[k + 1], st[k + 1], ibuf[k], ct, sizeof(CT), m);
        in[k] = ibuf[k];
      }
    }
    char* dst = p[0] + i * st[0];
    chunk(out_direct ? reinterpret_cast<OutT*>(dst) : obuf, in, m);
    if (!out_direct) kernels::convert(obuf, ot, sizeof(OutT), dst, dt[0], st[0], m);
  }
}

// Runs out = f(in...) elementwise with compute type CT and kernel result type OutT, where
// f takes NIn values of CT. The common path for ops without a SIMD kernel.
template <class CT, class OutT, int NIn, class F>
void map_elementwise(const ElemLoop& loop, const F& f) {
  for_each_row(loop, [&](char* const* p, const int64_t* st, int64_t n) {
    typed_row<CT, OutT, NIn>(p, st, loop.dtype, n, [&](OutT* o, const CT* const* in, int64_t m) {
      if constexpr (NIn == 1) {
        const CT* a = in[0];
        for (int64_t i = 0; i < m; ++i) o[i] = f(a[i]);
      } else if constexpr (NIn == 2) {
        const CT *a = in[0], *b = in[1];
        for (int64_t i = 0; i < m; ++i) o[i] = f(a[i], b[i]);
      } else {
        const CT *a = in[0], *b = in[1], *c = in[2];
        for (int64_t i = 0; i < m; ++i) o[i] = f(a[i], b[i], c[i]);
      }
    });
  });
}

// The compute type of a dtype: float for the 16-bit floats, itself otherwise.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

// Calls f.template operator()<CT>() with CT = compute type of `dtype`.
template <class F>
decltype(auto) visit_compute_type(DType dtype, F&& f) {
  return visit_dtype(dtype, [&]<class T>() { return f.template operator()<compute_t<T>>(); });
}

// The derivatives of digamma (trigamma) and i0 (i1), elementwise in double (backward
// functions run without recording, so they need no derivative of their own).
enum class SpecialFn { trigamma, i1 };
Tensor special_unary(SpecialFn fn, const Tensor& x);

// `in` itself, or a copy of it when it shares memory with `out` through another layout
// (a.add_(a.t())): reading it while `out` is written would see half-updated values.
Tensor unalias(const Tensor& out, const Tensor& in);

// Checks that `out` (an in-place target) can hold the result dtype and shape of `op`.
void check_inplace(const char* op, const Tensor& out, DType result, const Dims& shape);

}  // namespace flambeau::ops
