// Philox4x32-10 and the Generator handle.
#include "flambeau/core/generator.h"

#include <cstring>
#include <mutex>

#include "flambeau/core/tensor.h"

namespace flambeau {

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kM0) * c[0], p1 = uint64_t(kM1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

struct Generator::Impl {
  mutable std::mutex mu;
  uint64_t seed = kDefaultSeed, offset = 0;
};

Generator::Generator(uint64_t seed) : impl_(std::make_shared<Impl>()) { impl_->seed = seed; }

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->seed = seed;
  impl_->offset = 0;
}

uint64_t Generator::initial_seed() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->seed;
}

uint64_t Generator::offset() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->offset;
}

void Generator::set_offset(uint64_t offset) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->offset = offset;
}

uint64_t Generator::reserve(uint64_t blocks, std::array<uint32_t, 2>* key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  *key = {uint32_t(impl_->seed), uint32_t(impl_->seed >> 32)};
  const uint64_t first = impl_->offset;
  impl_->offset += blocks;
  return first;
}

Tensor Generator::get_state() const {
  Tensor state = make_tensor(Storage::allocate(16, kCPU), kUInt8, {16});
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (int i = 0; i < 8; ++i) {
    state.data<uint8_t>()[i] = uint8_t(impl_->seed >> (8 * i));
    state.data<uint8_t>()[8 + i] = uint8_t(impl_->offset >> (8 * i));
  }
  return state;
}

void Generator::set_state(const Tensor& state) {
  FLB_CHECK(state.dtype() == kUInt8 && state.numel() == 16, ValueError,
            "[set_state] expected a uint8 tensor of 16 bytes (seed, offset), got ", dtype_name(state.dtype()),
            " of shape ", shape_str(state.sizes()));
  const uint8_t* p = state.data<uint8_t>();
  auto byte = [&](int64_t i) {  // element i in row-major order, whatever the strides
    int64_t at = 0;
    for (int64_t d = state.dim() - 1; d >= 0; --d) {
      at += (i % state.size(d)) * state.stride(d);
      i /= state.size(d);
    }
    return uint64_t(p[at]);
  };
  uint64_t seed = 0, offset = 0;
  for (int i = 0; i < 8; ++i) {
    seed |= byte(i) << (8 * i);
    offset |= byte(8 + i) << (8 * i);
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->seed = seed;
  impl_->offset = offset;
}

Generator& default_generator() {
  static Generator* g = new Generator();  // never destroyed: usable during static teardown
  return *g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace flambeau
