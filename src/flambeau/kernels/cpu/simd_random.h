// SIMD kernels behind the random ops (simd_random.cpp).
#pragma once
#include <array>
#include <cstdint>

namespace flambeau::kernels {

// The 4 words of each Philox4x32-10 block counter, counter + 1, ... (blocks of them).
void philox_words(uint64_t counter, std::array<uint32_t, 2> key, uint32_t* out, int64_t blocks);
// out[i] = min(from + span * u(words[i]), below), u: [0, 1) from the top 24 bits.
void uniform_f32(const uint32_t* words, float* out, int64_t n, float from, float span, float below);
// Box-Muller: words (2j, 2j + 1) give out[2j] = mean + std * r cos(t), out[2j + 1] with sin;
// n odd reads the word pair of the last element (words must hold n rounded up to even).
void box_muller_f32(const uint32_t* words, float* out, int64_t n, float mean, float std);

}  // namespace flambeau::kernels
