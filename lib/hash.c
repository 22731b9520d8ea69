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
