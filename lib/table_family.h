/*
 * table_family.h - the half of a family that is the same for every
 * one-table counting family: dleft.c, varcount.c, hybrid.c and morris.c
 * (all of it), hier.c (the head, the statistics, info and the add batch).
 * Not installed.
 *
 * Such a family's state is a handle (the family struct) and one table that
 * the handle either owns (an aligned block of its own: created or cloned)
 * or borrows (the payload of a loaded file, released with the object).
 * Every operation that does not look inside the table is therefore the same
 * code: free, clone, clear, the allocations, the seed, info from the
 * family's bk_delete_stats, and the header fields of its one-part image.
 * Those live here, once (table_family.c); the family keeps its key
 * operations, its sizing, its statistics pass and the geometry of its
 * image. The batch loop of the families that locate a key by its hash
 * alone is here too, static inline, so that each family's copy calls its
 * own key operations directly.
 *
 * The family struct begins with a bk__tf_head (its object and the fields
 * every one of them keeps), and its ops table is the first member of a
 * bk__tf_family, which adds what the shared code must know of the family:
 * where its table is and how large. The shared ops reach that descriptor
 * from the object's ops pointer (the ops table is its first member), so
 * they need no wrapper per family.
 */
#ifndef BK_TABLE_FAMILY_H
#define BK_TABLE_FAMILY_H

#include "batch.h"
#include "filter.h"

/* The first member of every one-table family's struct. */
typedef struct bk__tf_head {
    bk__object obj;      /* first: the family's handle is also a bk_filter */
    uint64_t seed;
    uint64_t capacity;
    double target_fpr;
    uint64_t items;
    uint64_t overflows;  /* the family's overflow events (image param[0]) */
    int owns_mem;        /* the table is ours, not borrowed from a block */
} bk__tf_head;

typedef struct bk__tf_family {
    bk__family_ops ops;  /* first: what the object's ops point at */
    size_t handle_size;  /* sizeof the family's struct */
    /* the table, and where a new one is kept */
    void *(*table)(const void *f);
    void (*set_table)(void *f, void *table);
    size_t (*table_bytes)(const void *f);
    /* the family's bk_delete_stats, and the fill info reports from them */
    int (*stats)(const void *f, bk_delete_stats *out);
    double (*fill)(const void *f, const bk_delete_stats *st);
} bk__tf_family;

/* The ops every one-table family shares: lists them in its ops table
 * (the key operations, create, describe and restore stay the family's).
 * No such family merges or adds from several threads at once. */
#define BK__TF_OPS_SHARED                                                    \
    .lockfree_add = 0, .seed = bk__tf_seed, .destroy = bk__tf_free,          \
    .info = bk__tf_info, .allocations = bk__tf_allocations,                  \
    .clone = bk__tf_clone, .clear = bk__tf_clear, .merge = NULL,             \
    .incompatibility = NULL, .nparts = bk__tf_one_part

/* A one-table family's ops table and hooks, written one way: with
 * functions of these names in its file, its definition is
 *
 *   static const bk__tf_family x_family = {
 *       .ops = {.family = BK_FAMILY_X, .name = "x", .remove = ops_remove,
 *               BK__TF_OPS_STANDARD},
 *       BK__TF_HOOKS_STANDARD(bk_x),
 *       .fill = fill_of,       (or bk__tf_fill_root_k)
 *   };
 *
 * (.remove: ops_remove, or NULL where the family cannot remove.) */
#define BK__TF_OPS_STANDARD                                                  \
    .add = ops_add, .contains = ops_contains, .count = ops_count,            \
    .add_batch = ops_add_batch, .contains_batch = ops_contains_batch,        \
    .create = ops_create, .describe = ops_describe, .restore = ops_restore,  \
    BK__TF_OPS_SHARED
#define BK__TF_HOOKS_STANDARD(type)                                          \
    .handle_size = sizeof(type), .table = table_of, .set_table = set_table,  \
    .table_bytes = table_bytes, .stats = stats_of

/* A new handle of the family with a zeroed table of table_bytes of its
 * own, the head set from (seed, capacity, fpr); NULL when out of memory.
 * The caller sets the geometry. */
BK_HIDDEN void *bk__tf_create(const bk__tf_family *fam, size_t table_bytes,
                              uint64_t seed, uint64_t capacity, double fpr);

/* A new handle for restore(): it borrows `table` (the part's payload) and
 * takes the head from the image (param[0] the overflow events); NULL when
 * out of memory. The caller sets the geometry. */
BK_HIDDEN void *bk__tf_adopt(const bk__tf_family *fam, const bk__image *img,
                             void *table);

/* 1 when an image has one part and a stored rate that is 0 exactly when
 * the capacity is (the checks every one-table family's restore makes
 * besides its geometry), else 0. */
BK_HIDDEN int bk__tf_restorable(const bk__image *img);

/* Fill the header and part 0 of an image from the head, and part 0's
 * payload (the table); returns part 0 for the geometry. */
BK_HIDDEN bk__part *bk__tf_describe(const void *f, bk__image *img);

/* The fields of bk_delete_stats that come from the head (and the table's
 * size): the caller adds fpr_at_capacity and fpr_now. */
BK_HIDDEN void bk__tf_stats(const bk__tf_head *h, uint32_t hashes,
                            uint64_t table_bits, size_t bytes,
                            bk_delete_stats *out);

/* The fill of a filter whose lookups test `hashes` cells of the same
 * kind: the rate's k-th root. */
BK_HIDDEN double bk__tf_fill_root_k(const void *f, const bk_delete_stats *st);

/* The shared ops (see BK__TF_OPS_SHARED). bk__tf_free accepts NULL: it is
 * each family's public free as well. */
BK_HIDDEN uint64_t bk__tf_seed(const void *f);
BK_HIDDEN void bk__tf_free(void *f);
BK_HIDDEN int bk__tf_info(const void *f, bk_filter_info *out);
BK_HIDDEN void bk__tf_allocations(const void *f, bk__visit_fn visit, void *ctx);
BK_HIDDEN int bk__tf_clone(const void *f, void **out);
BK_HIDDEN void bk__tf_clear(void *f);
BK_HIDDEN uint32_t bk__tf_one_part(const void *f);

/* Keys a batch hashes ahead of their operation, prefetching their lines. */
#define BK__TF_BATCH_AHEAD 16

/* The batch loop (batch.h) as the one-table families run it: 16 keys
 * ahead, the first ones prefetched for reading (prefetch's `adding` asks
 * for a key's counter lines too). */
__attribute__((always_inline)) static inline int64_t bk__tf_hash_batch(
    void *f, uint64_t seed, const void *const *keys, const size_t *lens, size_t n,
    uint8_t *results, int is_add, void (*prefetch)(const void *f, bk_hash h, int adding),
    int (*add)(void *f, bk_hash h), int (*contains)(const void *f, bk_hash h))
{
    return bk__hash_ahead_batch(f, seed, keys, lens, n, results, is_add, BK__TF_BATCH_AHEAD, 0,
                                prefetch, add, contains);
}

/* Define the family's ops_add_batch and ops_contains_batch over
 * bk__tf_hash_batch with its own prefetch, add and contains. A macro only
 * because C has no other way to give each family a copy of the loop with
 * its callbacks as constants. */
#define BK__TF_HASH_BATCH_OPS(prefetch, add, contains)                       \
    static int64_t ops_add_batch(void *f, const void *const *keys,           \
                                 const size_t *lens, size_t n,               \
                                 uint8_t *results)                           \
    {                                                                        \
        return bk__tf_hash_batch(f, ((bk__tf_head *)f)->seed, keys, lens, n, \
                                 results, 1, prefetch, add, contains);       \
    }                                                                        \
    /* nothing is written to f when is_add is 0 */                           \
    static int64_t ops_contains_batch(const void *f, const void *const *keys, \
                                      const size_t *lens, size_t n,          \
                                      uint8_t *results)                      \
    {                                                                        \
        return bk__tf_hash_batch((void *)f, ((const bk__tf_head *)f)->seed,  \
                                 keys, lens, n, results, 0, prefetch, add,   \
                                 contains);                                  \
    }

#endif /* BK_TABLE_FAMILY_H */
