// The backend registry (built-in engines plus any registered at run time) and the
// elementwise reduction every engine uses for its reduce steps.
#include "flambeau/distributed/backend.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "flambeau/distributed/comm_internal.h"
#include "flambeau/distributed/engines.h"
#include "flambeau/kernels/cpu/simd.h"

namespace flambeau::distributed {

namespace {
struct Registry {
  std::mutex mutex;
  std::map<std::string, BackendFactory> factories{{"gloo", make_gloo_backend},
                                                  {"mpi", make_mpi_backend}};
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

void register_backend(const std::string& name, BackendFactory factory) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  FLB_CHECK(!r.factories.count(name), ValueError, "[register_backend] a backend named '", name,
            "' is already registered");
  r.factories.emplace(name, std::move(factory));
}

bool is_backend_registered(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.factories.count(name) > 0;
}

bool is_backend_available(const std::string& name) {
  if (name == "gloo") return gloo_available();
  if (name == "mpi") return mpi_available();
  return is_backend_registered(name);
}

std::vector<std::string> backend_names() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (auto& [n, f] : r.factories) names.push_back(n);
  return names;
}

std::unique_ptr<Backend> Backend::remake(int, int, const std::string&, Millis) {
  throw NotImplementedError(detail::str_cat("[reconfigure] the ", version(),
                                            " backend cannot rebuild a group after a failure"));
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendInit& init) {
  BackendFactory factory;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.factories.find(name);
    if (it == r.factories.end()) {
      std::string known;
      for (auto& [n, f] : r.factories) known += (known.empty() ? "" : ", ") + n;
      throw ValueError(detail::str_cat("[new_comm] unknown backend '", name, "' (known: ",
                                       known, ")"));
    }
    factory = it->second;
  }
  return factory(init);
}

namespace {
template <class T, class F>
void combine(void* out, const void* a, const void* b, size_t n, F f) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
}

// Reduced floats: through float32, one rounding per element.
template <class T, class F>
void combine_reduced(void* out, const void* a, const void* b, size_t n, F f) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = T(f(float(x[i]), float(y[i])));
}

// bfloat16 / float16 SUM, PRODUCT, MIN, MAX with the SIMD kernels: blocks widened to
// float32, combined, rounded once (the same bits as combine_reduced).
template <class T>
bool simd_reduced(void* out, const void* a, const void* b, size_t n, RedOpType op) {
  using kernels::SimdBinaryOp;
  SimdBinaryOp k;
  switch (op) {
    case RedOpType::SUM: k = SimdBinaryOp::add; break;
    case RedOpType::PRODUCT: k = SimdBinaryOp::mul; break;
    case RedOpType::MIN: k = SimdBinaryOp::minimum; break;
    case RedOpType::MAX: k = SimdBinaryOp::maximum; break;
    default: return false;
  }
  constexpr size_t kBlock = 2048;
  float x[kBlock], y[kBlock];
  for (size_t at = 0; at < n; at += kBlock) {
    const int64_t m = int64_t(std::min(kBlock, n - at));
    const T* pa = static_cast<const T*>(a) + at;
    const T* pb = static_cast<const T*>(b) + at;
    T* po = static_cast<T*>(out) + at;
    if constexpr (std::is_same_v<T, BFloat16>) {
      kernels::bf16_to_f32(pa, x, m), kernels::bf16_to_f32(pb, y, m);
      kernels::binary_f32(k, x, y, x, m);
      kernels::f32_to_bf16(x, po, m);
    } else {
      kernels::f16_to_f32(pa, x, m), kernels::f16_to_f32(pb, y, m);
      kernels::binary_f32(k, x, y, x, m);
      kernels::f32_to_f16(x, po, m);
    }
  }
  return true;
}

template <class T>
void reduce_typed(void* out, const void* a, const void* b, size_t n, RedOpType op) {
  constexpr bool reduced = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
  if constexpr (reduced)
    if (simd_reduced<T>(out, a, b, n, op)) return;
  using C = std::conditional_t<reduced, float, T>;  // compute type
  auto run = [&](auto f) {
    if constexpr (reduced) combine_reduced<T>(out, a, b, n, f);
    else combine<T>(out, a, b, n, f);
  };
  switch (op) {
    case RedOpType::SUM:
      if constexpr (std::is_same_v<T, bool>) return run([](bool x, bool y) { return x || y; });
      else return run([](C x, C y) { return C(x + y); });
    case RedOpType::PRODUCT:
      if constexpr (std::is_same_v<T, bool>) return run([](bool x, bool y) { return x && y; });
      else return run([](C x, C y) { return C(x * y); });
    // NaN wins, as torch.minimum / maximum.
    case RedOpType::MIN:
      return run([](C x, C y) { return x != x ? x : (y != y ? y : (y < x ? y : x)); });
    case RedOpType::MAX:
      return run([](C x, C y) { return x != x ? x : (y != y ? y : (y > x ? y : x)); });
    case RedOpType::BAND:
    case RedOpType::BOR:
    case RedOpType::BXOR:
      if constexpr (std::is_integral_v<T>) {
        if (op == RedOpType::BAND) return run([](T x, T y) { return T(x & y); });
        if (op == RedOpType::BOR) return run([](T x, T y) { return T(x | y); });
        return run([](T x, T y) { return T(x ^ y); });
      }
      break;
    case RedOpType::AVG:
    case RedOpType::PREMUL_SUM:
      break;
  }
  throw TypeError(detail::str_cat("[reduce] ", red_op_name(op), " is not defined for ",
                                  dtype_name(dtype_v<T>)));
}
}  // namespace

void reduce_buffers(void* out, const void* a, const void* b, size_t n, DType dtype,
                    RedOpType op) {
  visit_dtype(dtype, [&]<class T>() { reduce_typed<T>(out, a, b, n, op); });
}

}  // namespace flambeau::distributed

namespace flambeau::distributed {
void scale_buffer(void* data, size_t n, DType dtype, double factor, bool divide) {
  visit_dtype(dtype, [&]<class T>() {
    T* p = static_cast<T*>(data);
    if constexpr (std::is_same_v<T, bool>) {
      throw TypeError("[reduce] AVG and PREMUL_SUM are not defined for bool");
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      float f = float(factor);
      for (size_t i = 0; i < n; ++i) p[i] = T(divide ? float(p[i]) / f : float(p[i]) * f);
    } else if constexpr (std::is_integral_v<T>) {
      for (size_t i = 0; i < n; ++i) p[i] = T(divide ? double(p[i]) / factor : double(p[i]) * factor);
    } else {
      T f = T(factor);
      for (size_t i = 0; i < n; ++i) p[i] = divide ? p[i] / f : p[i] * f;
    }
  });
}
}  // namespace flambeau::distributed
