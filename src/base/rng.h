/* The counter-based RNG shared by every backend (and by generated code,
 * which embeds a copy of these functions): element k of a RANDOM node with
 * seed s is a pure function of (s, k), so results are identical across
 * backends, thread counts and kernel splits. */
#ifndef KILN_BASE_RNG_H
#define KILN_BASE_RNG_H

#include <math.h>
#include <stdint.h>

#include "kiln/kiln.h" /* kiln_dtype */

/* SplitMix64-style finalizer over (seed, counter): passes BigCrush for
 * sequential counters and is a handful of instructions. */
static inline uint64_t kiln_rng_bits(uint64_t seed, uint64_t k) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ULL + (k + 1) * 0xd1b54a32d192ed03ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
/* uniform in [0, 1) with 53 random bits */
static inline double kiln_rng_uniform(uint64_t seed, uint64_t k) {
  return (double)(kiln_rng_bits(seed, k) >> 11) * 0x1.0p-53;
}
/* The largest draw below 1 in float dtype dt, as the 53-bit integer that
 * kiln_rng_uniform scales by 2^-53: 1 - 2^-p for dt's precision p. A
 * uniform draw of dt is at most this: [0, 1) rounded to dt's precision
 * would make the draws of the top half-ulp 1.0 (1 in 2^25 for f32, 1 in 512
 * for bf16, 1 in 4096 for f16), which torch.rand never returns. The values
 * below stay as rounded. */
static inline int64_t kiln_rng_uniform_top(kiln_dtype dt) {
  int p = dt == KILN_F32 ? 24 : dt == KILN_BF16 ? 8 : dt == KILN_F16 ? 11 : 53;
  return ((int64_t)1 << 53) - ((int64_t)1 << (53 - p));
}
/* kiln_rng_uniform at most top * 2^-53 (clamping before the rounding to dt
 * is clamping after it: rounding is monotone and the top is representable).
 * The clamp is written without a select: in the generated kernels' copy of
 * this function a compare and select (of doubles or of integers) left the
 * dropout-mask loops scalar, "control flow in loop" (3-5x slower). */
static inline double kiln_rng_uniform_below(uint64_t seed, uint64_t k, int64_t top) {
  int64_t r = (int64_t)(kiln_rng_bits(seed, k) >> 11);
  r -= (r - top) & -(int64_t)(r > top);
  return (double)r * 0x1.0p-53;
}
/* standard normal by Box–Muller on two independent streams */
static inline double kiln_rng_normal(uint64_t seed, uint64_t k) {
  double u1 = ((double)(kiln_rng_bits(seed, 2 * k) >> 11) + 1.0) * 0x1.0p-53; /* (0,1] */
  double u2 = (double)(kiln_rng_bits(seed, 2 * k + 1) >> 11) * 0x1.0p-53;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
