/*
 * batch.h - the hash-ahead batch loop of the families that locate a key by
 * its hash alone: bloom.c, deletable.c, counting.c, and the one-table
 * counting families through table_family.h (hybrid.c, varcount.c,
 * morris.c, hier.c). Not installed.
 *
 * A batch overlaps its keys' cache misses: each key is hashed `ahead` keys
 * before its turn, kept in a ring, and its lines prefetched then; when its
 * turn comes it is added or looked up. Static inline and always inlined,
 * so that in each family's batch the callbacks are constants and are
 * called directly: the loop compiles as if written in place.
 */
#ifndef BK_BATCH_H
#define BK_BATCH_H

#include "hash.h"

#define BK__AHEAD_MAX 32 /* the largest `ahead` a family asks for */

/* Add (is_add) or look up keys[0 .. n) of f, whose keys hash with `seed`;
 * results[i] when results is not NULL. Returns the hits (adds that changed
 * something, lookups that matched). prefetch(f, h, adding) asks for key
 * h's lines: `adding` is is_add, except for the first `ahead` keys, which
 * get first_adding (a family may skip asking for write access there, as
 * no work could cover the fetch). ahead is at most BK__AHEAD_MAX. */
__attribute__((always_inline)) static inline int64_t bk__hash_ahead_batch(
    void *f, uint64_t seed, const void *const *keys, const size_t *lens, size_t n,
    uint8_t *results, int is_add, size_t ahead, int first_adding,
    void (*prefetch)(const void *f, bk_hash h, int adding), int (*add)(void *f, bk_hash h),
    int (*contains)(const void *f, bk_hash h))
{
    bk_hash ring[BK__AHEAD_MAX];
    int64_t hits = 0;
    size_t first = n < ahead ? n : ahead;
    for (size_t i = 0; i < first; i++) {
        ring[i] = bk_hash_key(keys[i], lens[i], seed);
        prefetch(f, ring[i], first_adding);
    }
    for (size_t i = 0; i < n; i++) {
        bk_hash h = ring[i % ahead];
        size_t next = i + ahead;
        if (next < n) {
            bk_hash hn = bk_hash_key(keys[next], lens[next], seed);
            ring[i % ahead] = hn;
            prefetch(f, hn, is_add);
        }
        int r = is_add ? add(f, h) : contains(f, h);
        hits += r;
        if (results != NULL) results[i] = (uint8_t)r;
    }
    return hits;
}

#endif /* BK_BATCH_H */
