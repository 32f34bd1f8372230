#pragma once

// IEEE half and bfloat16 bits <-> float, rounding to nearest even (what PyTorch's conversions do):
// for the CPU kernels and for callers reading float16/bfloat16 outputs.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace executorch {
namespace runtime {

// A float's bits, and the float of given bits.
inline uint32_t float_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}
inline float bits_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: value = mant * 2^-24
    bits = float_bits(static_cast<float>(mant) * 5.9604644775390625e-8f) | sign;
  }
  return bits_float(bits);
}

inline uint16_t float_to_half(float f) {
  uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | 0x7c00 | (x > 0x7f800000u ? 0x200 : 0);  // inf, NaN
  if (x >= 0x477ff000u) return sign | 0x7c00;                                  // rounds past 65504
  if (x < 0x38800000u) {  // half subnormal or zero: in units of 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(bits_float(x) * 16777216.f));
  }
  const uint32_t rounded = x + 0xfff + ((x >> 13) & 1);
  return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
}

inline float bfloat16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bfloat16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN stays NaN
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

}  // namespace runtime
}  // namespace executorch
