/*
 * hash.h - the one key hash, inlined into the filter files. Not installed.
 *
 * XXH3-128 from Debian's libxxhash, compiled in with XXH_INLINE_ALL so the
 * hot paths pay no call. The public bk_hash_key() (lib/hash.c) is the same
 * function for callers outside the library.
 */
#ifndef BK_HASH_H
#define BK_HASH_H

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "bloomkit.h"

static inline bk_hash bk__hash(const void *key, size_t len, uint64_t seed)
{
    XXH128_hash_t h = XXH3_128bits_withSeed(key, len, seed);
    bk_hash out;
    out.lo = h.low64;
    out.hi = h.high64;
    return out;
}

/* XXH3-64, the checksum of the file format. */
static inline uint64_t bk__xxh64(const void *data, size_t len, uint64_t seed)
{
    return XXH3_64bits_withSeed(data, len, seed);
}

/* XXH3_64bits_withSeed for inputs of at most BK__XXH64_SHORT bytes, with
 * the seed's work done once per filter instead of once per key: for short
 * inputs XXH3 adds the seed to (or subtracts it from) words of its default
 * secret, and those sums are all a given seed ever uses. bk__xxh64_keys
 * holds them; bk__xxh64_keyed is then the same function (the same bits for
 * every input, tests/test_hash.c), forced inline. It is the key hash of
 * the blocked filter's split layout, whose single calls are what it is
 * for: on a filter far larger than the caches a call overlaps with its
 * neighbours only as far as its instructions leave room, and the seeded
 * constants were a fifth of them (bench/HISTORY.md section 15). Callers
 * take bk__xxh64 above for longer keys. */
#define BK__XXH64_SHORT 32

typedef struct bk__xxh64_keys {
    uint64_t k17[4]; /* 17..32 bytes: the four words of the two 16-byte mixes */
    uint64_t k9[2];  /* 9..16 bytes */
    uint64_t k4;     /* 4..8 bytes */
    uint64_t k1;     /* 1..3 bytes */
    uint64_t k0;     /* the hash of the empty input itself */
} bk__xxh64_keys;

static inline void bk__xxh64_keys_init(bk__xxh64_keys *x, uint64_t seed)
{
    const xxh_u8 *s = XXH3_kSecret;
    x->k17[0] = XXH_readLE64(s) + seed;
    x->k17[1] = XXH_readLE64(s + 8) - seed;
    x->k17[2] = XXH_readLE64(s + 16) + seed;
    x->k17[3] = XXH_readLE64(s + 24) - seed;
    x->k9[0] = (XXH_readLE64(s + 24) ^ XXH_readLE64(s + 32)) + seed;
    x->k9[1] = (XXH_readLE64(s + 40) ^ XXH_readLE64(s + 48)) - seed;
    uint64_t seed4 = seed ^ ((uint64_t)XXH_swap32((xxh_u32)seed) << 32);
    x->k4 = (XXH_readLE64(s + 8) ^ XXH_readLE64(s + 16)) - seed4;
    x->k1 = (uint64_t)(XXH_readLE32(s) ^ XXH_readLE32(s + 4)) + seed;
    x->k0 = XXH3_64bits_withSeed(NULL, 0, seed);
}

__attribute__((always_inline))
static inline uint64_t bk__xxh64_keyed(const bk__xxh64_keys *x, const void *data, size_t len)
{
    const xxh_u8 *in = (const xxh_u8 *)data;
    if (len > 16) {
        uint64_t acc = len * XXH_PRIME64_1;
        acc += XXH3_mul128_fold64(XXH_readLE64(in) ^ x->k17[0], XXH_readLE64(in + 8) ^ x->k17[1]);
        acc += XXH3_mul128_fold64(XXH_readLE64(in + len - 16) ^ x->k17[2],
                                  XXH_readLE64(in + len - 8) ^ x->k17[3]);
        return XXH3_avalanche(acc);
    }
    if (len > 8) {
        uint64_t lo = XXH_readLE64(in) ^ x->k9[0];
        uint64_t hi = XXH_readLE64(in + len - 8) ^ x->k9[1];
        return XXH3_avalanche(len + XXH_swap64(lo) + hi + XXH3_mul128_fold64(lo, hi));
    }
    if (len >= 4) {
        uint64_t v = XXH_readLE32(in + len - 4) + ((uint64_t)XXH_readLE32(in) << 32);
        return XXH3_rrmxmx(v ^ x->k4, len);
    }
    if (len > 0) {
        uint32_t c = ((uint32_t)in[0] << 16) | ((uint32_t)in[len >> 1] << 24) |
                     (uint32_t)in[len - 1] | ((uint32_t)len << 8);
        return XXH64_avalanche((uint64_t)c ^ x->k1);
    }
    return x->k0;
}

/* The same for the key hash itself, XXH3-128: for inputs of at most
 * BK__XXH64_SHORT bytes bk__hash_keyed is XXH3_128bits_withSeed with the
 * seed's sums worked out once (bk__hash_keys_init); longer keys go to
 * bk_hash_key (lib/hash.c), out of line so callers stay small. For the
 * single-key calls of the families that keep their keys in few cache lines
 * (tests/test_hash.c checks every length). */
typedef struct bk__hash_keys {
    uint64_t seed;
    uint64_t k17[4]; /* 17..32 bytes: the words of the two 16-byte mixes */
    uint64_t k9[2];  /* 9..16 bytes */
    uint64_t k4;     /* 4..8 bytes */
    uint64_t k1[2];  /* 1..3 bytes */
    bk_hash k0;      /* the hash of the empty input itself */
} bk__hash_keys;

static inline void bk__hash_keys_init(bk__hash_keys *x, uint64_t seed)
{
    const xxh_u8 *s = XXH3_kSecret;
    x->seed = seed;
    x->k17[0] = XXH_readLE64(s) + seed;
    x->k17[1] = XXH_readLE64(s + 8) - seed;
    x->k17[2] = XXH_readLE64(s + 16) + seed;
    x->k17[3] = XXH_readLE64(s + 24) - seed;
    x->k9[0] = (XXH_readLE64(s + 32) ^ XXH_readLE64(s + 40)) - seed;
    x->k9[1] = (XXH_readLE64(s + 48) ^ XXH_readLE64(s + 56)) + seed;
    uint64_t seed4 = seed ^ ((uint64_t)XXH_swap32((xxh_u32)seed) << 32);
    x->k4 = (XXH_readLE64(s + 16) ^ XXH_readLE64(s + 24)) + seed4;
    x->k1[0] = (uint64_t)(XXH_readLE32(s) ^ XXH_readLE32(s + 4)) + seed;
    x->k1[1] = (uint64_t)(XXH_readLE32(s + 8) ^ XXH_readLE32(s + 12)) - seed;
    x->k0 = bk__hash(NULL, 0, seed);
}

__attribute__((always_inline))
static inline bk_hash bk__hash_keyed(const bk__hash_keys *x, const void *data, size_t len)
{
    const xxh_u8 *in = (const xxh_u8 *)data;
    bk_hash h;
    if (len > BK__XXH64_SHORT) return bk_hash_key(data, len, x->seed);
    if (len > 16) {
        const xxh_u8 *in2 = in + len - 16;
        uint64_t lo = len * XXH_PRIME64_1, hi;
        lo += XXH3_mul128_fold64(XXH_readLE64(in) ^ x->k17[0], XXH_readLE64(in + 8) ^ x->k17[1]);
        lo ^= XXH_readLE64(in2) + XXH_readLE64(in2 + 8);
        hi = XXH3_mul128_fold64(XXH_readLE64(in2) ^ x->k17[2], XXH_readLE64(in2 + 8) ^ x->k17[3]);
        hi ^= XXH_readLE64(in) + XXH_readLE64(in + 8);
        h.lo = XXH3_avalanche(lo + hi);
        h.hi = (uint64_t)0 - XXH3_avalanche(lo * XXH_PRIME64_1 + hi * XXH_PRIME64_4 +
                                            (len - x->seed) * XXH_PRIME64_2);
        return h;
    }
    if (len > 8) {
        uint64_t in_lo = XXH_readLE64(in), in_hi = XXH_readLE64(in + len - 8);
        XXH128_hash_t m = XXH_mult64to128(in_lo ^ in_hi ^ x->k9[0], XXH_PRIME64_1);
        m.low64 += (uint64_t)(len - 1) << 54;
        in_hi ^= x->k9[1];
        m.high64 += in_hi + XXH_mult32to64((xxh_u32)in_hi, XXH_PRIME32_2 - 1);
        m.low64 ^= XXH_swap64(m.high64);
        XXH128_hash_t r = XXH_mult64to128(m.low64, XXH_PRIME64_2);
        r.high64 += m.high64 * XXH_PRIME64_2;
        h.lo = XXH3_avalanche(r.low64);
        h.hi = XXH3_avalanche(r.high64);
        return h;
    }
    if (len >= 4) {
        uint64_t v = XXH_readLE32(in) + ((uint64_t)XXH_readLE32(in + len - 4) << 32);
        XXH128_hash_t m = XXH_mult64to128(v ^ x->k4, XXH_PRIME64_1 + (len << 2));
        m.high64 += m.low64 << 1;
        m.low64 ^= m.high64 >> 3;
        m.low64 = XXH_xorshift64(m.low64, 35);
        m.low64 *= 0x9FB21C651E98DF25ULL;
        h.lo = XXH_xorshift64(m.low64, 28);
        h.hi = XXH3_avalanche(m.high64);
        return h;
    }
    if (len > 0) {
        uint32_t c = ((uint32_t)in[0] << 16) | ((uint32_t)in[len >> 1] << 24) |
                     (uint32_t)in[len - 1] | ((uint32_t)len << 8);
        uint32_t ch = XXH_rotl32(XXH_swap32(c), 13);
        h.lo = XXH64_avalanche((uint64_t)c ^ x->k1[0]);
        h.hi = XXH64_avalanche((uint64_t)ch ^ x->k1[1]);
        return h;
    }
    return x->k0;
}

/* MurmurHash64A and the 32-bit MurmurHash2 (lib/hash.c): the item hashes
 * of RedisBloom's layouts, bit for bit as RedisBloom computes them (little-
 * endian words; the length folded in as RedisBloom's int). */
uint64_t bk__murmur64a(const void *key, size_t len, uint64_t seed);
uint32_t bk__murmur2_32(const void *key, size_t len, uint32_t seed);

#endif /* BK_HASH_H */
