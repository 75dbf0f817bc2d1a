// Random numbers: the counter-based Philox4x32-10 generator (Salmon et al., "Parallel
// Random Numbers: As Easy as 1, 2, 3", SC'11) and Generator objects. An op that needs
// random numbers reserves a range of Philox blocks from a generator (seed = key, block
// index = counter) and derives element i from block base + i / per_block, so the numbers
// depend only on (seed, offset, element index): never on the thread count or chunking.
#pragma once
#include <array>
#include <cstdint>
#include <memory>

namespace flambeau {

class Tensor;

// One Philox4x32-10 block: 4 random 32-bit words for a 128-bit counter and 64-bit key.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// A handle to a random stream, shared when copied (like torch.Generator). Thread-safe.
class Generator {
 public:
  static constexpr uint64_t kDefaultSeed = 67280421310721ull;  // torch's default seed
  explicit Generator(uint64_t seed = kDefaultSeed);

  // Sets the seed and rewinds the stream.
  void manual_seed(uint64_t seed);
  uint64_t initial_seed() const;
  // Philox blocks consumed so far.
  uint64_t offset() const;
  void set_offset(uint64_t offset);
  // Reserves `blocks` blocks for one op; returns the index of the first and the key.
  uint64_t reserve(uint64_t blocks, std::array<uint32_t, 2>* key);
  // The state as a uint8 tensor of 16 bytes (seed, offset; little-endian), and back.
  Tensor get_state() const;
  void set_state(const Tensor& state);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// The generator ops use when none is given.
Generator& default_generator();
// Seeds the default generator (torch.manual_seed).
void manual_seed(uint64_t seed);

}  // namespace flambeau
