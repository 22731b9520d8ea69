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

/* XXH3_64bits_withSeed for inputs of at most BK__XXH64_SHORT bytes, forced
 * inline (the functions it dispatches to by length: the same bits), for
 * the key hash of the blocked filter's split layout, whose single calls are
 * what it is for. The public function is too large for the compiler to
 * inline, and its call with four register saves is a fair share of such a
 * call; the paths for longer inputs, inlined, would make every caller save
 * registers too. Callers take bk__xxh64 above for longer keys. */
#define BK__XXH64_SHORT 32

__attribute__((always_inline))
static inline uint64_t bk__xxh64_short(const void *data, size_t len, uint64_t seed)
{
    if (len <= 16)
        return XXH3_len_0to16_64b((const xxh_u8 *)data, len, XXH3_kSecret, seed);
    /* 17..32 bytes: the compiler drops the branches for longer inputs */
    return XXH3_len_17to128_64b((const xxh_u8 *)data, len, XXH3_kSecret,
                                sizeof(XXH3_kSecret), seed);
}

#endif /* BK_HASH_H */
