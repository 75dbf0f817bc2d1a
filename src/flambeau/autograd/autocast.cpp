// Autocast's per-thread state, its RAII region and the casts (with torch's cache of the
// lowered float32 leaf parameters, dropped when the outermost region exits).
#include "flambeau/autograd/autocast.h"

#include <map>
#include <memory>

#include "flambeau/autograd/node.h"
#include "flambeau/core/error.h"

namespace flambeau::autocast {
namespace {

struct CacheEntry {
  std::weak_ptr<TensorImpl> source;  // the key's tensor, to tell a reused address apart
  uint32_t version;
  Tensor cast;
};

struct ThreadState {
  bool enabled = false, cache_enabled = true;
  DType dtype = kBFloat16;
  int depth = 0;  // nesting of regions
  // Keyed by (source, grad mode): a cast made without grad has no history to reuse.
  std::map<std::pair<const TensorImpl*, bool>, CacheEntry> cache;
};

thread_local ThreadState state;

void check_dtype(DType dt) {
  FLB_CHECK(dt == kBFloat16 || dt == kFloat16, TypeError,
            "[autocast] CPU autocast only supports bfloat16 and float16, got ", dtype_name(dt));
}

}  // namespace

bool is_enabled() { return state.enabled; }
DType dtype() { return state.dtype; }
bool is_cache_enabled() { return state.cache_enabled; }
void set_enabled(bool enabled) { state.enabled = enabled; }
void set_dtype(DType dt) {
  check_dtype(dt);
  state.dtype = dt;
}
void set_cache_enabled(bool enabled) { state.cache_enabled = enabled; }
void clear_cache() { state.cache.clear(); }

State enter(DType dt, bool enabled, bool cache_enabled) {
  if (enabled) check_dtype(dt);
  const State previous{state.enabled, state.cache_enabled, state.dtype};
  state.enabled = enabled;
  state.cache_enabled = cache_enabled;
  if (enabled) state.dtype = dt;
  ++state.depth;
  return previous;
}

void exit(const State& previous) {
  if (--state.depth == 0) clear_cache();
  state.enabled = previous.enabled;
  state.cache_enabled = previous.cache_enabled;
  state.dtype = previous.dtype;
}

AutocastGuard::AutocastGuard(DType dt, bool enabled, bool cache_enabled) {
  const State s = enter(dt, enabled, cache_enabled);
  enabled_ = s.enabled, cache_enabled_ = s.cache_enabled, dtype_ = s.dtype;
}

AutocastGuard::~AutocastGuard() { exit({enabled_, cache_enabled_, dtype_}); }

Tensor cast(Policy policy, const Tensor& t) {
  if (policy == Policy::fp32) return is_reduced_float(t.dtype()) ? t.to(kFloat32) : t;
  if (!(t.dtype() == kFloat32 || (is_reduced_float(t.dtype()) && t.dtype() != state.dtype))) return t;
  // As torch: only float32 leaves that require grad and are not views (the parameters).
  const bool cacheable = state.cache_enabled && t.dtype() == kFloat32 && t.is_leaf() && t.requires_grad() &&
                         !t.impl()->view_base;
  if (!cacheable) return t.to(state.dtype);
  const auto key = std::make_pair(static_cast<const TensorImpl*>(t.impl()), autograd::grad_mode_enabled());
  auto it = state.cache.find(key);
  if (it != state.cache.end() && it->second.source.lock() == t.impl_ptr() && it->second.version == t.version() &&
      it->second.cast.dtype() == state.dtype)
    return it->second.cast;
  Tensor c = t.to(state.dtype);
  state.cache[key] = CacheEntry{t.impl_ptr(), t.version(), c};
  return c;
}

}  // namespace flambeau::autocast
