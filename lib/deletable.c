/*
 * deletable.c - the deletable Bloom filter, DlBF (Rothenberg, Macapuna,
 * Verdi & Magalhaes, "The Deletable Bloom filter: a new member of the Bloom
 * family", IEEE Communications Letters, 2010).
 *
 * Structure
 *   A classic Bloom filter of m bits (probes as in bloom.c: one XXH3-128
 *   hash, enhanced double hashing, fast range) plus r collision flags. The
 *   bit array is cut into regions of s = ceil(m / r) consecutive bits (the
 *   last may be shorter); flag j is set when an add finds one of its bits in
 *   region j already set. One 64-byte-aligned allocation holds the bit words
 *   followed by the flag words.
 *
 * Why removal works
 *   While region j's flag is clear, every set bit in it was set by exactly
 *   one add (a second add of the same bit would have raised the flag). So a
 *   key whose bits are all set may clear those of its bits that lie in
 *   collision-free regions without touching any other key: if at least one
 *   such bit exists the key becomes absent. A key whose bits all lie in
 *   collided regions cannot be removed (BK_EUNDELETABLE) and stays present. A key
 *   whose two probes hit one bit flags that region itself, conservatively.
 *   Seed 002 describes a "DlBF" built from two Bloom filters; that is a
 *   different scheme, and this file follows the paper.
 *
 * False positives and deletability
 *   The bit array is a plain Bloom filter, so p = (1 - e^(-kn/m))^k and the
 *   sizing is bk_bloom_optimal's; the flags add r bits. At the optimal fill
 *   each bit receives Poisson(ln 2) probes. The region of one of a key's
 *   bits is collided when another probe hits that very bit (probability
 *   1/2) or two probes meet on one of the other s - 1 bits (1 - 0.847^(s-1)),
 *   so c ~ 0.70 for s = 4 and ~0.82 for s = 8, and a key is removable with
 *   probability ~1 - c^k. Simulated with independent probes at 1% (k = 7):
 *   90% removable at capacity for s = 4 (the default: m/4 flag bits, +25%
 *   memory), 64% for s = 8, 20% for s = 16. The fraction falls further as
 *   keys come and go, since flags are only cleared by clear.
 *   get_stats estimates the fraction as 1 - c^k, c the share of stored
 *   keys' probes that landed in collided regions. A set bit in a clean
 *   region was probed exactly once, so c = 1 - (set bits in clean regions)
 *   / (items k) (a simulation with independent probes matches the measured
 *   fraction to 0.5%; counting regions instead overstates it).
 *
 * Concurrency
 *   Adds set bits and flags with atomic fetch-or and lookups read with
 *   relaxed loads, as in bloom.c: lock-free among themselves. A remove
 *   clears bits with atomic fetch-and, but it decides from flags it read
 *   earlier: an add that collides with a bit being cleared would lose it.
 *   Removes therefore need external serialisation against adds and other
 *   removes; lookups may run alongside.
 *
 * What it cannot do
 *   Remove every key (collided regions only fill up: deletability decays as
 *   the filter ages and is restored only by clear), remove duplicates, or
 *   tell a false positive from a present key.
 */
#include <math.h>   /* pow, log1p */
#include <string.h> /* memset, memcpy */

#include "batch.h"
#include "family_util.h"
#include "hash.h"

/*==========================================================================
 * Types
 *==========================================================================*/

struct bk_deletable {
    bk__object obj;           /* first: a bk_deletable is also a bk_filter */
    uint64_t *words;       /* bit words, then flag words; one allocation */
    uint64_t *flags;       /* = words + nwords */
    uint64_t nwords;       /* ceil(m / 64) */
    uint64_t nflag_words;  /* ceil(r / 64) */
    uint64_t m;            /* bits */
    uint32_t k;
    uint64_t regions;      /* r, effective */
    uint64_t region_bits;  /* s */
    uint64_t seed;
    uint64_t capacity;     /* 0 if unknown */
    double target_fpr;     /* 0 if unknown */
    uint64_t items;        /* updated atomically */
    int owns_mem;             /* 0 when the arrays live in a loaded block or mapping */
};

static const bk__family_ops deletable_ops; /* at the end of this file */

#define BATCH_AHEAD 16

/*==========================================================================
 * Internals
 *==========================================================================*/

static inline int test_bit(const uint64_t *words, uint64_t bit)
{
    return (int)((bk__load64(&words[bit >> 6]) >> (bit & 63)) & 1);
}

static inline void set_bit(uint64_t *words, uint64_t bit)
{
    uint64_t mask = UINT64_C(1) << (bit & 63);
    if ((bk__load64(&words[bit >> 6]) & mask) == 0)
        bk__fetch_or64(&words[bit >> 6], mask);
}

static inline uint64_t region_of(const bk_deletable *f, uint64_t bit)
{
    return bit / f->region_bits;
}

static int create_filter(bk_deletable **out, uint64_t m, uint32_t k,
                         uint64_t regions, uint64_t seed, uint64_t capacity,
                         double target_fpr)
{
    bk_deletable *f = NULL;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (m == 0 || m > BK_MAX_BITS) return BK_ESIZE;
    if (k == 0 || k > BK_MAX_HASHES) return BK_EHASHES;
    if (regions > m) return BK_EPARAM;
    if (regions == 0)
        regions = (m + BK_DELETABLE_DEFAULT_REGION_BITS - 1) /
                  BK_DELETABLE_DEFAULT_REGION_BITS;

    uint64_t region_bits = (m + regions - 1) / regions;
    regions = (m + region_bits - 1) / region_bits; /* effective */
    uint64_t nwords = (m + 63) / 64;
    uint64_t nflag_words = (regions + 63) / 64;
    if (nwords + nflag_words > SIZE_MAX / sizeof(uint64_t)) return BK_ESIZE;

    f = bk__calloc(1, sizeof(*f));
    if (f == NULL) goto fail;
    f->words = bk__calloc_aligned((size_t)(nwords + nflag_words) *
                                  sizeof(uint64_t));
    if (f->words == NULL) goto fail;
    bk__object_init(&f->obj, &deletable_ops);
    f->owns_mem = 1;
    f->flags = f->words + nwords;
    f->nwords = nwords;
    f->nflag_words = nflag_words;
    f->m = m;
    f->k = k;
    f->regions = regions;
    f->region_bits = region_bits;
    f->seed = seed;
    f->capacity = capacity;
    f->target_fpr = target_fpr;
    *out = f;
    return BK_OK;

fail:
    bk__free(f);
    return BK_ENOMEM;
}

static int add_hash(bk_deletable *f, bk_hash h)
{
    bk__probe p = bk__probe_start(h);
    int was_new = 0;
    for (uint32_t i = 0; i < f->k; i++) {
        uint64_t bit = bk__probe_next(&p, f->m);
        uint64_t *word = &f->words[bit >> 6];
        uint64_t mask = UINT64_C(1) << (bit & 63);
        int collided = (bk__load64(word) & mask) != 0 ||
                       (bk__fetch_or64(word, mask) & mask) != 0;
        if (collided)
            set_bit(f->flags, region_of(f, bit));
        else
            was_new = 1;
    }
    if (was_new) bk__add64(&f->items, 1);
    return was_new;
}

/* What a remove of h would do: BK_ENOTFOUND, BK_EUNDELETABLE or BK_OK. */
static int classify(const bk_deletable *f, bk_hash h)
{
    bk__probe p = bk__probe_start(h);
    int removable = 0;
    for (uint32_t i = 0; i < f->k; i++) {
        uint64_t bit = bk__probe_next(&p, f->m);
        if (!test_bit(f->words, bit)) return BK_ENOTFOUND;
        if (!test_bit(f->flags, region_of(f, bit))) removable = 1;
    }
    return removable ? BK_OK : BK_EUNDELETABLE;
}

static int remove_hash(bk_deletable *f, bk_hash h)
{
    int rc = classify(f, h);
    if (rc != BK_OK) return rc;
    bk__probe p = bk__probe_start(h);
    for (uint32_t i = 0; i < f->k; i++) {
        uint64_t bit = bk__probe_next(&p, f->m);
        if (!test_bit(f->flags, region_of(f, bit)))
            __atomic_fetch_and(&f->words[bit >> 6],
                               ~(UINT64_C(1) << (bit & 63)), __ATOMIC_RELAXED);
    }
    if (bk__load64(&f->items) > 0) __atomic_fetch_sub(&f->items, 1, __ATOMIC_RELAXED);
    return BK_OK;
}

static inline int contains_hash(const bk_deletable *f, bk_hash h)
{
    bk__probe p = bk__probe_start(h);
    for (uint32_t i = 0; i < f->k; i++)
        if (!test_bit(f->words, bk__probe_next(&p, f->m))) return 0;
    return 1;
}

static inline void prefetch_hash(const bk_deletable *f, bk_hash h,
                                 int for_write)
{
    bk__probe p = bk__probe_start(h);
    for (uint32_t i = 0; i < f->k; i++) {
        const uint64_t *word = &f->words[bk__probe_next(&p, f->m) >> 6];
        if (for_write) BK_PREFETCH_WRITE(word); else BK_PREFETCH_READ(word);
    }
}

/* Set bits in [from, to). */
static uint64_t count_bits(const uint64_t *words, uint64_t from, uint64_t to)
{
    uint64_t n = 0;
    while (from < to) {
        uint64_t w = from >> 6, lo = from & 63;
        uint64_t hi = (to - (w << 6)) < 64 ? to - (w << 6) : 64;
        uint64_t mask = (hi == 64 ? ~UINT64_C(0) : (UINT64_C(1) << hi) - 1) &
                        ~((UINT64_C(1) << lo) - 1);
        n += bk__popcount64(bk__load64(&words[w]) & mask);
        from = (w + 1) << 6;
    }
    return n;
}

/*==========================================================================
 * API: life cycle
 *==========================================================================*/

int bk_deletable_create(bk_deletable **out, uint64_t capacity, double fpr,
                        uint64_t regions, uint64_t seed)
{
    uint64_t m;
    uint32_t k;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    int rc = bk_bloom_optimal(capacity, fpr, &m, &k);
    if (rc != BK_OK) return rc;
    return create_filter(out, m, k, regions, seed, capacity, fpr);
}

int bk_deletable_create_params(bk_deletable **out, uint64_t m_bits,
                               uint32_t k, uint64_t regions, uint64_t seed)
{
    return create_filter(out, m_bits, k, regions, seed, 0, 0.0);
}

void bk_deletable_free(bk_deletable *f)
{
    if (f == NULL) return;
    bk__free_handle(&f->obj, f->owns_mem, f->words);
}

int bk_deletable_clone(bk_deletable **out, const bk_deletable *src)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (src == NULL) return BK_EINVAL;
    int rc = create_filter(out, src->m, src->k, src->regions, src->seed,
                           src->capacity, src->target_fpr);
    if (rc != BK_OK) return rc;
    memcpy((*out)->words, src->words,
           (size_t)(src->nwords + src->nflag_words) * sizeof(uint64_t));
    (*out)->items = bk__load64(&src->items);
    return BK_OK;
}

void bk_deletable_clear(bk_deletable *f)
{
    if (f == NULL) return;
    memset(f->words, 0, (size_t)(f->nwords + f->nflag_words) * sizeof(uint64_t));
    f->items = 0;
}

/*==========================================================================
 * API: single keys
 *==========================================================================*/

int bk_deletable_add_hash(bk_deletable *f, bk_hash h) { return add_hash(f, h); }
int bk_deletable_remove_hash(bk_deletable *f, bk_hash h) { return remove_hash(f, h); }

int bk_deletable_contains_hash(const bk_deletable *f, bk_hash h)
{
    return contains_hash(f, h);
}

int bk_deletable_removable_hash(const bk_deletable *f, bk_hash h)
{
    return classify(f, h) == BK_OK;
}

int bk_deletable_add(bk_deletable *f, const void *key, size_t len)
{
    return add_hash(f, bk_hash_key(key, len, f->seed));
}

int bk_deletable_remove(bk_deletable *f, const void *key, size_t len)
{
    return remove_hash(f, bk_hash_key(key, len, f->seed));
}

int bk_deletable_contains(const bk_deletable *f, const void *key, size_t len)
{
    return contains_hash(f, bk_hash_key(key, len, f->seed));
}

int bk_deletable_removable(const bk_deletable *f, const void *key, size_t len)
{
    return bk_deletable_removable_hash(f, bk_hash_key(key, len, f->seed));
}

/*==========================================================================
 * API: batches (as bloom.c: hash ahead and prefetch the probed words)
 *==========================================================================*/

/* The loop's callbacks (batch.h): constants once inlined. */
static void batch_prefetch(const void *f, bk_hash h, int adding) { prefetch_hash(f, h, adding); }
static int batch_add(void *f, bk_hash h) { return add_hash(f, h); }
static int batch_contains(const void *f, bk_hash h) { return contains_hash(f, h); }

static int64_t run_batch(bk_deletable *f, const void *const *keys,
                         const size_t *lens, size_t n, uint8_t *results,
                         int is_add)
{
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    return bk__hash_ahead_batch(f, f->seed, keys, lens, n, results, is_add, BATCH_AHEAD, is_add,
                                batch_prefetch, batch_add, batch_contains);
}

int64_t bk_deletable_add_batch(bk_deletable *f, const void *const *keys,
                               const size_t *lens, size_t n, uint8_t *results)
{
    return run_batch(f, keys, lens, n, results, 1);
}

int64_t bk_deletable_contains_batch(const bk_deletable *f,
                                    const void *const *keys,
                                    const size_t *lens, size_t n,
                                    uint8_t *results)
{
    /* run_batch writes nothing to f when is_add is 0 */
    return run_batch((bk_deletable *)f, keys, lens, n, results, 0);
}

/*==========================================================================
 * API: statistics
 *==========================================================================*/

uint64_t bk_deletable_bits(const bk_deletable *f) { return f->m; }
uint32_t bk_deletable_hashes(const bk_deletable *f) { return f->k; }
uint64_t bk_deletable_regions(const bk_deletable *f) { return f->regions; }
uint64_t bk_deletable_seed(const bk_deletable *f) { return f->seed; }
uint64_t bk_deletable_items(const bk_deletable *f) { return bk__load64(&f->items); }

int bk_deletable_get_stats(const bk_deletable *f, bk_deletable_stats *out)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    memset(out, 0, sizeof(*out));
    out->bits = f->m;
    out->hashes = f->k;
    out->regions = f->regions;
    out->region_bits = f->region_bits;
    out->seed = f->seed;
    out->capacity = f->capacity;
    out->target_fpr = f->target_fpr;
    out->items = bk__load64(&f->items);
    for (uint64_t i = 0; i < f->nwords; i++)
        out->bits_set += bk__popcount64(bk__load64(&f->words[i]));
    for (uint64_t i = 0; i < f->nflag_words; i++)
        out->collided_regions += bk__popcount64(bk__load64(&f->flags[i]));
    uint64_t collided_bits = 0; /* set bits lying in collided regions */
    for (uint64_t r = 0; r < f->regions; r++) {
        uint64_t from = r * f->region_bits;
        uint64_t to = from + f->region_bits < f->m ? from + f->region_bits : f->m;
        uint64_t set = count_bits(f->words, from, to);
        out->occupied_regions += set > 0;
        if (test_bit(f->flags, r)) collided_bits += set;
    }
    out->fill = (double)out->bits_set / (double)f->m;
    /* a set bit in a clean region was probed exactly once, so the probes
     * of the stored keys that landed in clean regions are counted exactly;
     * the rest (of items * k) landed in collided ones */
    double probes = (double)out->items * f->k;
    double clean = (double)(out->bits_set - collided_bits);
    double collided_share = probes > 0 ? 1.0 - clean / probes : 0.0;
    if (collided_share < 0.0) collided_share = 0.0;
    out->removable_fraction = 1.0 - pow(collided_share, (double)f->k);
    out->fpr_now = pow(out->fill, (double)f->k);
    out->fpr_at_capacity =
        f->capacity ? bk_bloom_fpr(f->capacity, f->m, f->k) : 0.0;
    out->bytes = sizeof(*f) +
                 (size_t)(f->nwords + f->nflag_words) * sizeof(uint64_t) +
                 BK_CACHE_LINE + sizeof(void *);
    return BK_OK;
}

/*==========================================================================
 * The generic filter and the file format
 *==========================================================================*/

BK__FAMILY_CASTS(deletable, deletable_ops)

BK__OPS_SEED_DESTROY(deletable)
BK__OPS_ONE_PART
BK__OPS_CLEAR_CLONE(deletable)
BK__OPS_BATCHES(deletable)

/* Image: one part; m = bits, k, param = bits per region; the data is the
 * bit words followed by the collision-flag words, 64-bit little-endian.
 * Bits past m and flags past the last region must be zero. */

#define LOCKFREE_ADD 1 /* atomic OR, as the classic filter */

static int ops_add(void *f, bk_hash h) { return bk_deletable_add_hash(f, h); }
static int ops_contains(const void *f, bk_hash h) { return bk_deletable_contains_hash(f, h); }
static int ops_remove(void *f, bk_hash h) { return bk_deletable_remove_hash(f, h); }
static int64_t ops_count(const void *f, bk_hash h) { return bk_deletable_contains_hash(f, h); }

static int ops_info(const void *vf, bk_filter_info *out)
{
    bk_deletable_stats st;
    int rc = bk_deletable_get_stats(vf, &st);
    if (rc != BK_OK) return rc;
    /* -(m/k) ln(1 - t/m), as for the classic filter */
    double estimated = st.bits_set >= st.bits
                           ? INFINITY
                           : -((double)st.bits / st.hashes) *
                                 log1p(-(double)st.bits_set / (double)st.bits);
    BK__INFO_FROM_STATS(out, st, estimated);
    return BK_OK;
}

static int ops_create(const bk_filter_config *cfg, void **out)
{
    return bk_deletable_create((bk_deletable **)out, cfg->capacity, cfg->fpr,
                               cfg->regions, cfg->seed);
}

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_deletable *f = vf;
    bk__part *p = &img->parts[0];
    img->seed = f->seed;
    img->capacity = p->capacity = f->capacity;
    img->fpr = p->fpr = f->target_fpr;
    img->items = p->items = bk__load64(&f->items);
    p->m = f->m;
    p->k = f->k;
    p->param = f->region_bits;
    p->data = f->words;
    p->length = (f->nwords + f->nflag_words) * sizeof(uint64_t);
    return BK_OK;
}

static int ops_restore(const bk__image *img, void **out)
{
    const bk__part *p = &img->parts[0];
    if (img->nparts != 1) return BK_ECORRUPT;
    if (p->m == 0 || p->m > BK_MAX_BITS || p->k == 0 || p->k > BK_MAX_HASHES)
        return BK_ECORRUPT;
    if (p->param == 0 || p->param > p->m) return BK_ECORRUPT;
    uint64_t region_bits = p->param;
    uint64_t regions = (p->m + region_bits - 1) / region_bits;
    uint64_t nwords = (p->m + 63) / 64, nflag_words = (regions + 63) / 64;
    if (p->length != (nwords + nflag_words) * sizeof(uint64_t)) return BK_ECORRUPT;
    if (!bk__valid_stored_fpr(img->fpr) || (img->fpr == 0.0) != (img->capacity == 0))
        return BK_ECORRUPT;
    uint64_t *words = p->data;
    if ((p->m & 63) && (words[nwords - 1] >> (p->m & 63)) != 0) return BK_ECORRUPT;
    if ((regions & 63) && (words[nwords + nflag_words - 1] >> (regions & 63)) != 0)
        return BK_ECORRUPT;
    bk_deletable *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &deletable_ops);
    f->words = words;
    f->flags = words + nwords;
    f->owns_mem = 0;
    f->nwords = nwords;
    f->nflag_words = nflag_words;
    f->m = p->m;
    f->k = p->k;
    f->regions = regions;
    f->region_bits = region_bits;
    f->seed = img->seed;
    f->capacity = img->capacity;
    f->target_fpr = img->fpr;
    f->items = img->items;
    *out = f;
    return BK_OK;
}


/* The handle and, unless borrowed from a loaded block, the bits and
 * region flags (one block). */
static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_deletable *f = vf;
    bk__visit_handle(f, sizeof(*f), f->owns_mem, f->words,
                     (size_t)(f->nwords + f->nflag_words) * sizeof(uint64_t), visit, ctx);
}

static const bk__family_ops deletable_ops = {
    .family = BK_FAMILY_DELETABLE,
    .name = "deletable",
    BK__OPS_STANDARD,
    .remove = ops_remove, .count = ops_count, .add_batch = ops_add_batch,
    .contains_batch = ops_contains_batch, .lockfree_add = LOCKFREE_ADD, .clone = ops_clone,
    .clear = ops_clear,
};

const bk__family_ops *const bk__deletable_family = &deletable_ops;
