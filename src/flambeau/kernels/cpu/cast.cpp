// The conversion loop behind copy_, to() and every mixed-dtype op. Contiguous
// float32 <-> bfloat16/float16 go through SIMD kernels; the rest are plain loops that the
// compiler vectorises where it can.
#include "flambeau/kernels/cpu/cast.h"

#include <cstring>

#include "flambeau/kernels/cpu/simd.h"

namespace flambeau::kernels {
namespace {

template <class S, class D>
void convert_typed(const char* src, int64_t ss, char* dst, int64_t ds, int64_t n) {
  if (ss == sizeof(S) && ds == sizeof(D)) {
    const S* s = reinterpret_cast<const S*>(src);
    D* d = reinterpret_cast<D*>(dst);
    if constexpr (std::is_same_v<S, D>) {
      std::memcpy(d, s, n * sizeof(S));
    } else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, BFloat16>) {
      f32_to_bf16(s, d, n);
    } else if constexpr (std::is_same_v<S, BFloat16> && std::is_same_v<D, float>) {
      bf16_to_f32(s, d, n);
    } else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, Half>) {
      f32_to_f16(s, d, n);
    } else if constexpr (std::is_same_v<S, Half> && std::is_same_v<D, float>) {
      f16_to_f32(s, d, n);
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = cast_value<D>(s[i]);
    }
    return;
  }
  if (ss == 0) {
    D v = cast_value<D>(*reinterpret_cast<const S*>(src));
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<D*>(dst + i * ds) = v;
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    *reinterpret_cast<D*>(dst + i * ds) = cast_value<D>(*reinterpret_cast<const S*>(src + i * ss));
}

}  // namespace

void convert(const void* src, DType sdt, int64_t sstride, void* dst, DType ddt, int64_t dstride,
             int64_t n) {
  visit_dtype(sdt, [&]<class S>() {
    visit_dtype(ddt, [&]<class D>() {
      convert_typed<S, D>(static_cast<const char*>(src), sstride, static_cast<char*>(dst), dstride, n);
    });
  });
}

}  // namespace flambeau::kernels
