/*
 * filter.h - the generic filter object, shared by every family and by the
 * file format. Not installed.
 *
 * Every family's struct begins with a bk__object, so a pointer to any
 * family handle is also a pointer to its bk__object, which is what the
 * public bk_filter is. The object points at its family's ops table (a
 * small table of functions, one per generic operation) and records where
 * its payload memory came from when it was loaded rather than created:
 * an aligned heap block or a file mapping, released with the object.
 *
 * The format code (format.c) talks to families only through two ops:
 * describe() turns a filter into a bk__image (header fields plus one
 * bk__part per sub-filter, each pointing at its payload bytes), and
 * restore() builds a filter from a validated image whose parts point into
 * memory the object owns (the family keeps those pointers and must not free
 * them: it only frees memory it allocated itself).
 */
#ifndef BK_FILTER_H
#define BK_FILTER_H

#include "internal.h"

/*--------------------------------------------------------------------------
 * Images: a filter as the file format sees it
 *--------------------------------------------------------------------------*/

/* One sub-filter (a classic filter has one; a scalable filter one per
 * stage). Field meanings per family are in docs/FORMAT.md. */
typedef struct bk__part {
    uint64_t m;         /* bits, counters, buckets ... */
    uint32_t k;         /* hash functions */
    uint8_t width;      /* counter bits, fingerprint bits */
    uint8_t slots;      /* bucket size */
    uint16_t flags;
    uint64_t capacity;
    double fpr;
    uint64_t items;
    uint64_t param;     /* family-specific */
    void *data;         /* payload bytes of this part */
    uint64_t length;    /* their length */
} bk__part;

#define BK__IMAGE_PARAMS 4

/* The header's hash algorithm field: every family hashes keys with
 * XXH3-128, except the blocked family's split layout, the growable family
 * and the bumped static filter (XXH3-64). */
#define BK__HASH_XXH3_128 1u
#define BK__HASH_XXH3_64 2u
/* MurmurHash64A as RedisBloom hashes (families 20 and 21, which require it) */
#define BK__HASH_MURMUR64A 3u

typedef struct bk__image {
    uint32_t family;
    uint64_t seed;
    uint64_t capacity;
    double fpr;
    uint64_t items;
    uint64_t flags;
    uint32_t hash;                    /* BK__HASH_*; 0 written as XXH3-128 */
    uint64_t param[BK__IMAGE_PARAMS]; /* family-specific */
    uint32_t nparts;
    bk__part *parts;                  /* nparts entries */
} bk__image;

/* Largest number of parts a file may declare (stages, generations). */
#define BK__MAX_PARTS 4096u

/*--------------------------------------------------------------------------
 * The object and its family table
 *--------------------------------------------------------------------------*/

enum bk__block_kind { BK__BLOCK_NONE = 0, BK__BLOCK_HEAP, BK__BLOCK_MAP };

typedef struct bk__family_ops bk__family_ops;

/* What the auto-clear filter (autoclear.c) needs of a family it wraps: the
 * filter's units (bits, or counters) and how many are set (nonzero), kept
 * up to date by adds and removes that say how many units they set or
 * cleared. These write with plain stores: the auto-clear filter is the
 * only writer of what it wraps. */
/* An auto-clear generation's counts, kept by its adds. */
typedef struct bk__fill_counts {
    uint64_t set;   /* units set */
    uint64_t items; /* adds that answered new */
} bk__fill_counts;

typedef struct bk__fill_ops {
    uint64_t (*units)(const void *f);
    uint64_t (*count_set)(const void *f);                  /* a pass */
    /* the expected share of units set by n distinct keys */
    double (*fill_at)(const void *f, uint64_t n);
    int (*add)(void *f, bk_hash h, uint64_t *newly_set);   /* 1, 0 or an error */
    /* BK_OK, BK_ENOTFOUND (nothing changed); NULL: cannot delete */
    int (*remove)(void *f, bk_hash h, uint64_t *newly_clear);
    /* add of a key not yet hashed, the family's hash and add in one call:
     * adds the units it set to c->set and, when the key was new, 1 to
     * c->items (NULL: the caller hashes and calls add) */
    int (*add_key)(void *f, const void *key, size_t len, bk__fill_counts *c);
    /* the same into f, answering 0 also when the key is in prev (a filter
     * of f's shape and seed: the key's line is the same place in both, so
     * both lines are fetched at once); NULL: as add_key (or add), then
     * contains on prev */
    int (*add_key_rotate)(void *f, const void *prev, const void *key, size_t len,
                          bk__fill_counts *c);
} bk__fill_ops;

/* What an allocations op calls for each block: ptr as the allocator
 * returned it (for bk__calloc_aligned blocks, bk__aligned_raw), and the
 * bytes asked for it. */
typedef void (*bk__visit_fn)(void *ctx, const void *ptr, size_t asked);

typedef struct bk__object {
    const bk__family_ops *ops;
    void *block;            /* payload memory borrowed by the family */
    size_t block_len;
    uint8_t block_kind;     /* enum bk__block_kind */
    uint8_t read_only;      /* adds through bk_filter_* are refused */
    uint8_t writable_map;   /* block is a MAP_SHARED file mapping */
    uint8_t payload_copied; /* restore() copied the payload and kept no
                               pointer into it: a heap block is freed at
                               once instead of adopted */
    uint8_t private_map;    /* made by a BK_MAP_PRIVATE mapping (kept, or let
                               go because the payload was copied): sync
                               answers BK_ENOTSUP, it never writes back */
} bk__object;

struct bk__family_ops {
    bk_family family;
    const char *name;
    /* the family's hash of a key (NULL: bk_hash_key with the seed) */
    bk_hash (*hash)(const void *f, const void *key, size_t len);
    /* key operations on a key hashed as above */
    int (*add)(void *f, bk_hash h);             /* 1, 0 or an error */
    /* bk_filter_add's whole add of a key in one call (NULL: hash, add) */
    int (*add_key)(void *f, const void *key, size_t len);
    int (*contains)(const void *f, bk_hash h);  /* 1 or 0 */
    int (*remove)(void *f, bk_hash h);          /* NULL: cannot delete */
    int64_t (*count)(const void *f, bk_hash h); /* NULL: use contains */
    /* batches as bk_<family>_add_batch / _contains_batch (NULL: a loop) */
    int64_t (*add_batch)(void *f, const void *const *keys, const size_t *lens,
                         size_t n, uint8_t *results);
    int64_t (*contains_batch)(const void *f, const void *const *keys,
                              const size_t *lens, size_t n, uint8_t *results);
    int lockfree_add;                           /* threads may add at once */
    /* choose the write mode (bk_filter_set_single_writer); NULL: one mode */
    void (*set_single_writer)(void *f, int single_writer);
    uint64_t (*seed)(const void *f);
    void (*destroy)(void *f);                   /* the family's free */
    int (*info)(const void *f, bk_filter_info *out);
    /* info's O(1) fields without a pass over the table (NULL: info) */
    int (*summary)(const void *f, bk_filter_info *out);
    /* every block of memory the filter holds, as the allocator returned it,
     * with the bytes asked (NULL: bk_filter_memory_usage answers info's
     * bytes) */
    void (*allocations)(const void *f, bk__visit_fn visit, void *ctx);
    /* whole-filter operations (NULL: BK_ENOTSUP) */
    int (*create)(const bk_filter_config *cfg, void **out);
    int (*clone)(const void *f, void **out);
    void (*clear)(void *f);
    /* dst op= src; op 0 union, 1 intersection. Both of this family. */
    int (*merge)(void *dst, const void *src, int op);
    /* 0 when a and b can be merged, else 1 and why in buf */
    int (*incompatibility)(const void *a, const void *b, char *buf, size_t cap);
    /* the file format */
    uint32_t (*nparts)(const void *f);
    int (*describe)(const void *f, bk__image *img); /* img->parts has nparts */
    int (*restore)(const bk__image *img, void **out);
    /* auto-clear's view of the family (NULL: it cannot be wrapped) */
    const bk__fill_ops *fill;
};

/* What every family's ops table names the same way: its static ops_add,
 * ops_contains, ops_seed, ops_destroy, ops_info, ops_allocations,
 * ops_create, ops_nparts, ops_describe and ops_restore. A table lists its
 * family and name, this, then what it has besides; a member left out is
 * NULL (or 0): no such operation, the generic fallback applies. */
#define BK__OPS_STANDARD                                                          \
    .add = ops_add, .contains = ops_contains, .seed = ops_seed, .destroy = ops_destroy, \
    .info = ops_info, .allocations = ops_allocations, .create = ops_create,          \
    .nparts = ops_nparts, .describe = ops_describe, .restore = ops_restore

/* Each family's ops table, defined in its own file. */
extern const bk__family_ops *const bk__bloom_family;
extern const bk__family_ops *const bk__blocked_family;
extern const bk__family_ops *const bk__counting_family;
extern const bk__family_ops *const bk__deletable_family;
extern const bk__family_ops *const bk__cuckoo_family;
extern const bk__family_ops *const bk__scalable_family;
extern const bk__family_ops *const bk__window_family;
extern const bk__family_ops *const bk__dleft_family;
extern const bk__family_ops *const bk__varcount_family;
extern const bk__family_ops *const bk__hier_family;
extern const bk__family_ops *const bk__hybrid_family;
extern const bk__family_ops *const bk__morris_family;
extern const bk__family_ops *const bk__static_family;
extern const bk__family_ops *const bk__map_family;
extern const bk__family_ops *const bk__growable_family;
extern const bk__family_ops *const bk__bumped_family;
extern const bk__family_ops *const bk__rbloom_family;   /* rbloom.c */
extern const bk__family_ops *const bk__rcuckoo_family;  /* rcuckoo.c */
extern const bk__family_ops *const bk__autoclear_family; /* autoclear.c */
extern const bk__family_ops *const bk__ttl_family;      /* ttl.c */

/* A blocked filter as one part of an image, and back (blocked.c): shared
 * by the families whose stages are blocked filters. restore_part borrows
 * p->data; a part of the split layout is corrupt unless allow_split (the
 * families that embed blocked filters hash once for all of them with
 * XXH3-128, so only a standalone blocked filter may be split). */
BK_HIDDEN void bk__blocked_describe_part(const bk_blocked *f, bk__part *p);
BK_HIDDEN int bk__blocked_restore_part(const bk__part *p, uint64_t seed,
                                       int allow_split, bk_blocked **out);
/* The blocks a blocked filter holds (its handle; its bits unless they are
 * borrowed), for the families that embed blocked filters. */
BK_HIDDEN void bk__blocked_allocations(const bk_blocked *f, bk__visit_fn visit, void *ctx);
/* The 512-bit mask of a key's k bits in its line (x: the low 32 bits of
 * h.hi), for the families that test one key against many blocked filters'
 * lines (ttl.c): built once, compared with each line. */
BK_HIDDEN void bk__blocked_key_mask(uint32_t x, uint32_t k, uint64_t mask[8]);

/* The two public casts of a family, bk_<fam>_as_filter and
 * bk_filter_as_<fam> (NULL when f is of another family): the family struct
 * begins with its bk__object, so both are the same pointer. */
#define BK__FAMILY_CASTS(fam, ops_table)                                     \
    bk_filter *bk_##fam##_as_filter(bk_##fam *f)                             \
    {                                                                        \
        return (bk_filter *)(void *)f;                                       \
    }                                                                        \
    bk_##fam *bk_filter_as_##fam(bk_filter *f)                               \
    {                                                                        \
        if (f == NULL || ((bk__object *)(void *)f)->ops != &(ops_table))     \
            return NULL;                                                     \
        return (bk_##fam *)(void *)f;                                        \
    }

/* Set up the object part of a new family struct. */
static inline void bk__object_init(bk__object *o, const bk__family_ops *ops)
{
    o->ops = ops;
    o->block = NULL;
    o->block_len = 0;
    o->block_kind = BK__BLOCK_NONE;
    o->read_only = 0;
    o->writable_map = 0;
    o->payload_copied = 0;
}

/* Release what the object holds (its heap block or mapping). Every
 * family's free calls it before freeing its own memory. */
BK_HIDDEN void bk__object_release(bk__object *o);

/* The generic info of a deleting family from its bk_delete_stats (the
 * fill, which each family defines its own way, given). */
static inline void bk__info_from_delete_stats(const bk_delete_stats *st, double fill,
                                              bk_filter_info *out)
{
    out->seed = st->seed;
    out->capacity = st->capacity;
    out->target_fpr = st->target_fpr;
    out->items = st->items;
    out->estimated_items = (double)st->items;
    out->fpr_now = st->fpr_now;
    out->fpr_at_capacity = st->fpr_at_capacity;
    out->fill = fill;
    out->bytes = st->bytes;
    out->parts = 1;
}

/* The ops of a family id, or NULL. */
BK_HIDDEN const bk__family_ops *bk__family_lookup(uint32_t family);

/*--------------------------------------------------------------------------
 * Validation helpers for restore()
 *--------------------------------------------------------------------------*/

/* A stored rate: 0 (unknown) or in (0, 1). */
static inline int bk__valid_stored_fpr(double p)
{
    return p == 0.0 || (p > 0.0 && p < 1.0);
}

#endif /* BK_FILTER_H */
