/*
 * deleting.h - helpers shared by the deleting/counting families of issue 15
 * (dleft.c, varcount.c, hier.c, morris.c). Not installed.
 *
 *   - bk__dl_mix64: a splitmix64 step, the stream of in-block draws;
 *   - bk__dl_blocked_fpr: the false-positive rate of a blocked filter
 *     (Putze, Sanders & Singler 2007), sum_i Poisson(i; lambda) *
 *     (1 - (1 - k/C)^i)^k, the same formula lib/counting.c uses;
 *   - bk__dl_draw: k distinct positions in [0, C) from a key's hash;
 *   - bit fields of up to 56 bits at any bit offset of a byte array that
 *     carries 8 bytes of padding after its last field.
 */
#ifndef BK_DELETING_H
#define BK_DELETING_H

#include <math.h> /* exp, log, lgamma, pow, floor, sqrt */

#include "internal.h"

static inline uint64_t bk__dl_mix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* A value of a 64-bit hash word mixed with a salt (for derived choices). */
static inline uint64_t bk__dl_hash64(uint64_t x, uint64_t salt)
{
    uint64_t s = x ^ salt;
    return bk__dl_mix64(&s);
}

/* x^k for the small integer k of a filter (by squaring), else pow. */
static inline double bk__dl_powk(double x, double k)
{
    unsigned n = (unsigned)k;
    if ((double)n != k || n > 64) return pow(x, k);
    double r = 1.0;
    while (n) {
        if (n & 1) r *= x;
        x *= x;
        n >>= 1;
    }
    return r;
}

/* sum_i Poisson(i; lambda) (1 - (1 - k/C)^i)^k over the Poisson mass that
 * matters (mode +- 12 sd), walking out from the mode by p(i+1)/p(i) and
 * s^(i+1) = s^i s (s = 1 - k/C): no pow or exp per term. */
static inline double bk__dl_blocked_fpr(double lambda, double counters, double k)
{
    const double survive = 1.0 - k / counters;
    if (lambda <= 0.0) return 0.0;
    if (lambda > 1e5) return pow(1.0 - pow(survive, lambda), k);
    double mode = floor(lambda);
    double spread = 12.0 * sqrt(lambda) + 20.0;
    double p_mode = exp(-lambda + mode * log(lambda) - lgamma(mode + 1.0));
    double s_mode = pow(survive, mode);
    double sum = 0.0, p = p_mode, s = s_mode;
    for (double i = mode; i <= mode + spread; i += 1.0) {
        sum += p * bk__dl_powk(1.0 - s, k);
        p *= lambda / (i + 1.0);
        s *= survive;
    }
    p = p_mode;
    s = s_mode;
    for (double i = mode; i >= 1.0 && i >= mode - spread; i -= 1.0) {
        p *= i / lambda;
        /* s^(i-1) = s^i / s, unless s^i underflowed (or s is 0) */
        s = (s > 0.0 && survive > 0.0) ? s / survive : pow(survive, i - 1.0);
        sum += p * bk__dl_powk(1.0 - s, k);
    }
    return sum;
}

/* P(X > limit) for X ~ Poisson(lambda). */
static inline double bk__dl_poisson_tail(double lambda, double limit)
{
    if (lambda <= 0.0) return 0.0;
    double i0 = floor(limit) + 1.0;
    if (i0 < 0.0) i0 = 0.0;
    double p = exp(-lambda + i0 * log(lambda) - lgamma(i0 + 1.0));
    double sum = 0.0;
    for (double i = i0; i < i0 + 12.0 * sqrt(lambda) + 60.0; i += 1.0) {
        sum += p;
        p *= lambda / (i + 1.0);
    }
    return sum;
}

/* The smallest i >= ceil(lambda) with P(X > i) <= bound, X ~ Poisson(lambda):
 * one pass down from far in the tail, adding p(i) = p(i+1) (i+1)/lambda. */
static inline double bk__dl_poisson_quantile(double lambda, double bound)
{
    double lo = ceil(lambda);
    double i = lo + floor(12.0 * sqrt(lambda) + 60.0);
    double p = exp(-lambda + i * log(lambda) - lgamma(i + 1.0)); /* p(i) */
    double tail = 0.0; /* P(X > i) */
    while (i > lo) {
        if (tail + p > bound) return i; /* P(X > i - 1) would exceed it */
        tail += p;
        p *= i / lambda;
        i -= 1.0;
    }
    return lo;
}

/* k distinct positions in [0, counters) (counters a power of two up to
 * 2^16, k <= counters) from hash word `hi` and then a splitmix64 stream
 * seeded from both halves; a repeat is drawn again, so the positions are a
 * uniform k-subset. Returned in pos[0..k). */
static inline void bk__dl_draw(bk_hash h, uint32_t counters_log2, uint32_t k,
                               uint16_t *pos)
{
    const uint32_t mask = (1u << counters_log2) - 1;
    const uint32_t per_word = 64 / counters_log2;
    uint64_t stream = h.hi ^ ((h.lo << 32) | (h.lo >> 32));
    uint64_t pool = h.hi;
    uint32_t left = per_word;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t c, tries = 0;
        for (;;) {
            if (left == 0) pool = bk__dl_mix64(&stream), left = per_word;
            c = (uint32_t)(pool & mask);
            pool >>= counters_log2;
            left--;
            uint32_t j = 0;
            while (j < i && pos[j] != c) j++;
            if (j == i) break;
            if (++tries > 256) { /* unreachable for real keys: next free */
                for (;;) {
                    c = (c + 1) & mask;
                    for (j = 0; j < i && pos[j] != c; j++) {}
                    if (j == i) break;
                }
                break;
            }
        }
        pos[i] = (uint16_t)c;
    }
}

/* Bit fields of `bits` <= 56 bits at bit offset `at` of a byte array. */
static inline uint64_t bk__dl_get_field(const unsigned char *base, uint64_t at,
                                        unsigned bits)
{
    uint64_t w;
    memcpy(&w, base + (at >> 3), 8);
    return (w >> (at & 7)) & ((UINT64_C(1) << bits) - 1);
}

static inline void bk__dl_put_field(unsigned char *base, uint64_t at,
                                    unsigned bits, uint64_t value)
{
    uint64_t w, mask = ((UINT64_C(1) << bits) - 1) << (at & 7);
    memcpy(&w, base + (at >> 3), 8);
    w = (w & ~mask) | ((value << (at & 7)) & mask);
    memcpy(base + (at >> 3), &w, 8);
}

#endif /* BK_DELETING_H */
