/*
 * hash.c - the public face of the key hash.
 *
 * A key is hashed once, with XXH3-128 and the filter's 64-bit seed; every
 * probe position of every filter family is derived from those 128 bits (see
 * bk__probe_* in internal.h and each family's file). XXH3's output is frozen
 * by its authors across versions and platforms, so a filter saved on one
 * machine answers identically on another.
 */
#include "hash.h"
#include "internal.h"

bk_hash bk_hash_key(const void *key, size_t len, uint64_t seed)
{
    /* XXH3 reads nothing when len is 0, but a NULL pointer with a length
     * would be a caller bug we cannot detect; an empty key is valid. */
    static const char empty[1] = {0};
    if (key == NULL) key = empty, len = 0;
    return bk__hash(key, len, seed);
}

/*--------------------------------------------------------------------------
 * Austin Appleby's MurmurHash2 (public domain algorithms), the hashes of
 * RedisBloom's layouts (rbloom.c, rcuckoo.c). Written from the published
 * algorithm; words are read little-endian, as RedisBloom reads them on the
 * x86 and ARM machines its data comes from.
 *--------------------------------------------------------------------------*/

static uint64_t read_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

uint64_t bk__murmur64a(const void *key, size_t len, uint64_t seed)
{
    const uint64_t mul = UINT64_C(0xc6a4a7935bd1e995);
    const unsigned char *p = key;
    /* RedisBloom passes the length as an int: the same bits for any item
     * a Redis string can hold (at most 512 MB) */
    uint64_t h = seed ^ ((uint64_t)len * mul);
    size_t words = len / 8;
    for (size_t i = 0; i < words; i++, p += 8) {
        uint64_t w = read_le64(p) * mul;
        w ^= w >> 47;
        w *= mul;
        h ^= w;
        h *= mul;
    }
    size_t rest = len & 7;
    if (rest) {
        for (size_t i = rest; i-- > 0;) h ^= (uint64_t)p[i] << (8 * i);
        h *= mul;
    }
    h ^= h >> 47;
    h *= mul;
    h ^= h >> 47;
    return h;
}

uint32_t bk__murmur2_32(const void *key, size_t len, uint32_t seed)
{
    const uint32_t mul = 0x5bd1e995u;
    const unsigned char *p = key;
    uint32_t h = seed ^ (uint32_t)len;
    while (len >= 4) {
        uint32_t w = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24;
        w *= mul;
        w ^= w >> 24;
        w *= mul;
        h *= mul;
        h ^= w;
        p += 4;
        len -= 4;
    }
    if (len) {
        for (size_t i = len; i-- > 0;) h ^= (uint32_t)p[i] << (8 * i);
        h *= mul;
    }
    h ^= h >> 13;
    h *= mul;
    h ^= h >> 15;
    return h;
}
