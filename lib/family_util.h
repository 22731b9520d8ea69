/*
 * family_util.h - the glue between a family's public functions and its ops
 * table (filter.h) that every family written on its own repeats: bloom.c,
 * blocked.c, counting.c, deletable.c, cuckoo.c, window.c, scalable.c (the
 * one-table families have theirs in table_family.h, the static ones in
 * peel.h). Not installed.
 *
 * Nothing here is on a key's path: the ops these macros define are the
 * same functions each family wrote out by hand, and the helpers run at
 * free, info and memory-usage time.
 */
#ifndef BK_FAMILY_UTIL_H
#define BK_FAMILY_UTIL_H

#include "filter.h"

/* ops_seed and ops_destroy of a family whose struct keeps its `seed` and
 * whose public free is bk_<fam>_free. */
#define BK__OPS_SEED_DESTROY(fam)                                            \
    static uint64_t ops_seed(const void *f) { return ((const bk_##fam *)f)->seed; } \
    static void ops_destroy(void *f) { bk_##fam##_free(f); }

/* ops_nparts of a family whose image is always one part. */
#define BK__OPS_ONE_PART                                                     \
    static uint32_t ops_nparts(const void *f) { (void)f; return 1; }

/* ops_clear and ops_clone: bk_<fam>_clear and bk_<fam>_clone. */
#define BK__OPS_CLEAR_CLONE(fam)                                             \
    static void ops_clear(void *f) { bk_##fam##_clear(f); }                  \
    static int ops_clone(const void *f, void **out) { return bk_##fam##_clone((bk_##fam **)out, f); }

/* ops_add_batch and ops_contains_batch: bk_<fam>_add_batch and
 * bk_<fam>_contains_batch. */
#define BK__OPS_BATCHES(fam)                                                 \
    static int64_t ops_add_batch(void *f, const void *const *keys, const size_t *lens, \
                                 size_t n, uint8_t *results)                 \
    {                                                                        \
        return bk_##fam##_add_batch(f, keys, lens, n, results);              \
    }                                                                        \
    static int64_t ops_contains_batch(const void *f, const void *const *keys, \
                                      const size_t *lens, size_t n, uint8_t *results) \
    {                                                                        \
        return bk_##fam##_contains_batch(f, keys, lens, n, results);         \
    }

/* ops_merge: bk_<fam>_union (op 0) or bk_<fam>_intersect (op 1). */
#define BK__OPS_MERGE(fam)                                                   \
    static int ops_merge(void *dst, const void *src, int op)                 \
    {                                                                        \
        return op ? bk_##fam##_intersect(dst, src) : bk_##fam##_union(dst, src); \
    }

/* The generic info of a one-part filter from its family's stats struct,
 * whose fields of the same meaning have the same names (seed, capacity,
 * target_fpr, items, fpr_now, fpr_at_capacity, fill, bytes: the classic,
 * blocked, counting and deletable filters); `estimated` is the family's
 * estimate of the distinct items. A macro: the stats are a different type
 * in each family. */
#define BK__INFO_FROM_STATS(out, st, estimated)                              \
    do {                                                                     \
        (out)->seed = (st).seed;                                             \
        (out)->capacity = (st).capacity;                                     \
        (out)->target_fpr = (st).target_fpr;                                 \
        (out)->items = (st).items;                                           \
        (out)->estimated_items = (estimated);                                \
        (out)->fpr_now = (st).fpr_now;                                       \
        (out)->fpr_at_capacity = (st).fpr_at_capacity;                       \
        (out)->fill = (st).fill;                                             \
        (out)->bytes = (st).bytes;                                           \
        (out)->parts = 1;                                                    \
    } while (0)

/* What a handle of handle_size bytes holds besides itself: one aligned
 * block (bk__calloc_aligned) of `bytes`, unless it is borrowed from a
 * loaded block or a mapping (owned 0). The allocations op of such a
 * family. */
static inline void bk__visit_handle(const void *handle, size_t handle_size, int owned,
                                    const void *block, size_t bytes,
                                    bk__visit_fn visit, void *ctx)
{
    visit(ctx, handle, handle_size);
    if (owned) visit(ctx, bk__aligned_raw(block), bk__aligned_asked(bytes));
}

/* Free such a handle (its object first member): the block when it is its
 * own, whatever the object holds, the handle. */
static inline void bk__free_handle(bk__object *obj, int owned, void *block)
{
    if (owned) bk__free_aligned(block);
    bk__object_release(obj);
    bk__free(obj);
}

#endif /* BK_FAMILY_UTIL_H */
