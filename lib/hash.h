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
 * constants were a fifth of them (bench/RESULTS.md section 15). Callers
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

#endif /* BK_HASH_H */
