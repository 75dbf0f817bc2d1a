// 16-bit floating-point storage types: Half (IEEE binary16) and BFloat16.
// Arithmetic happens in float; conversion from float rounds to nearest even and keeps NaN.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>

namespace flambeau {

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(from_float(f)) {}
  operator float() const { return std::bit_cast<float>(uint32_t(bits) << 16); }
  static uint16_t from_float(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN, sign kept
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
  }
  static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(from_float(f)) {}
  operator float() const { return to_float(bits); }
  static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
  static float to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));  // inf / NaN
    if (exp == 0) {
      // zero or subnormal: value = man * 2^-24
      float v = float(man) * 0x1p-24f;
      return sign ? -v : v;
    }
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
  }
  static uint16_t from_float(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    uint16_t sign = uint16_t((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return uint16_t(sign | 0x7e00 | ((a >> 13) & 0x3ff));  // NaN stays NaN
    if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // rounds to inf (>= 65520)
    if (a < 0x38800000u) {
      // result is subnormal or zero: round a * 2^24 to the nearest integer, ties to even
      float v = std::bit_cast<float>(a) * 0x1p24f;
      uint32_t m = uint32_t(v);
      float rem = v - float(m);
      if (rem > 0.5f || (rem == 0.5f && (m & 1))) ++m;
      return uint16_t(sign | m);
    }
    // normal: rebias exponent and round the dropped 13 mantissa bits to nearest even
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return uint16_t(sign | (r >> 13));
  }
};

}  // namespace flambeau
