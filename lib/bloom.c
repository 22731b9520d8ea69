/*
 * bloom.c - the classic Bloom filter (Bloom, 1970).
 *
 * Structure
 *   An array of m bits stored as ceil(m / 64) little 64-bit words, 64-byte
 *   aligned. A key is hashed once (XXH3-128 with the filter's seed) and its
 *   k probe positions are derived by enhanced double hashing and reduced to
 *   [0, m) by fast range (internal.h). Bit b lives in word b / 64 at
 *   position b % 64. Bits past m in the last word are never set.
 *
 * False positives
 *   (1 - e^(-kn/m))^k after n distinct keys; sizing is in math.c. The
 *   number of distinct keys can be estimated from the number t of set bits:
 *   n ~ -(m/k) ln(1 - t/m) (Swamidass & Baldi; seed 000, 3.8).
 *
 * Concurrency
 *   Adds set bits with atomic fetch-or, lookups read words with relaxed
 *   atomic loads: any number of threads may add and look up at once with no
 *   lock. An add first reads the word and skips the locked OR when the bit
 *   is already set, which at the optimal fill (half the bits) saves half the
 *   bus-locked writes. The item counter is a relaxed atomic add done only
 *   for keys that were certainly new.
 *
 * What it cannot do
 *   Delete (a bit may be shared by many keys: see the counting, deletable
 *   and cuckoo filters), grow (see the scalable filter) or forget (see the
 *   window filter). Each probe of a large filter is a cache miss: the
 *   blocked filter keeps a key's probes in one cache line.
 */
#include <math.h>   /* log1p, pow, expm1 */
#include <stdio.h>  /* snprintf */
#include <string.h> /* memset, memcpy */

#include "batch.h"
#include "family_util.h"
#include "hash.h"

/*==========================================================================
 * Types
 *==========================================================================*/

struct bk_bloom {
    bk__object obj;     /* first: a bk_bloom is also a bk_filter */
    uint64_t *words;    /* nwords words, 64-byte aligned */
    uint64_t nwords;    /* ceil(m / 64) */
    uint64_t m;         /* bits */
    uint32_t k;         /* probes per key */
    uint64_t seed;      /* of the key hash */
    uint64_t capacity;  /* n it was sized for, 0 if unknown */
    double target_fpr;  /* p it was sized for, 0 if unknown */
    uint64_t items;     /* adds that returned 1; updated atomically */
    int owns_words;     /* 0 when words live in a loaded block or mapping */
};

static const bk__family_ops bloom_ops; /* at the end of this file */

/* Keys hashed ahead of the probes in the batch paths: enough misses in
 * flight to cover memory latency, few enough to stay in L1. */
#define BATCH_AHEAD 16

/*==========================================================================
 * Internals
 *==========================================================================*/

static int create_filter(bk_bloom **out, uint64_t m, uint32_t k, uint64_t seed,
                         uint64_t capacity, double target_fpr)
{
    bk_bloom *f = NULL;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (m == 0 || m > BK_MAX_BITS) return BK_ESIZE;
    if (k == 0 || k > BK_MAX_HASHES) return BK_EHASHES;

    uint64_t nwords = (m + 63) / 64;
    if (nwords > SIZE_MAX / sizeof(uint64_t)) return BK_ESIZE;

    f = bk__calloc(1, sizeof(*f));
    if (f == NULL) goto fail;
    f->words = bk__calloc_aligned((size_t)nwords * sizeof(uint64_t));
    if (f->words == NULL) goto fail;
    bk__object_init(&f->obj, &bloom_ops);
    f->owns_words = 1;
    f->nwords = nwords;
    f->m = m;
    f->k = k;
    f->seed = seed;
    f->capacity = capacity;
    f->target_fpr = target_fpr;
    *out = f;
    return BK_OK;

fail:
    bk__free(f);
    return BK_ENOMEM;
}

/* Set the k bits of h; returns 1 when at least one was clear. */
static inline int add_hash(bk_bloom *f, bk_hash h)
{
    bk__probe p = bk__probe_start(h);
    int was_new = 0;
    for (uint32_t i = 0; i < f->k; i++) {
        uint64_t bit = bk__probe_next(&p, f->m);
        uint64_t *word = &f->words[bit >> 6];
        uint64_t mask = UINT64_C(1) << (bit & 63);
        if ((bk__load64(word) & mask) == 0 &&
            (bk__fetch_or64(word, mask) & mask) == 0)
            was_new = 1;
    }
    if (was_new) bk__add64(&f->items, 1);
    return was_new;
}

static inline int contains_hash(const bk_bloom *f, bk_hash h)
{
    bk__probe p = bk__probe_start(h);
    for (uint32_t i = 0; i < f->k; i++) {
        uint64_t bit = bk__probe_next(&p, f->m);
        if ((bk__load64(&f->words[bit >> 6]) & (UINT64_C(1) << (bit & 63))) ==
            0)
            return 0;
    }
    return 1;
}

/* Prefetch every cache line h will touch. */
static inline void prefetch_hash(const bk_bloom *f, bk_hash h, int for_write)
{
    bk__probe p = bk__probe_start(h);
    for (uint32_t i = 0; i < f->k; i++) {
        const uint64_t *word = &f->words[bk__probe_next(&p, f->m) >> 6];
        if (for_write) BK_PREFETCH_WRITE(word); else BK_PREFETCH_READ(word);
    }
}

static uint64_t count_bits(const bk_bloom *f)
{
    uint64_t t = 0;
    for (uint64_t i = 0; i < f->nwords; i++) t += bk__popcount64(bk__load64(&f->words[i]));
    return t;
}

static double estimate_from_bits(uint64_t t, uint64_t m, uint32_t k)
{
    if (t >= m) return INFINITY;
    return -((double)m / (double)k) * log1p(-(double)t / (double)m);
}

/* An estimate as an item count: rounded, and capped where it is infinite
 * (every bit set) or beyond any meaningful count. */
static uint64_t estimate_to_count(double estimate)
{
    const double cap = 9.0e18; /* < 2^63: the conversion is always defined */
    return estimate < cap ? (uint64_t)(estimate + 0.5) : (uint64_t)cap;
}

static int compatible(const bk_bloom *a, const bk_bloom *b)
{
    if (a == NULL || b == NULL) return BK_EINVAL;
    if (a->m != b->m || a->k != b->k || a->seed != b->seed) return BK_EINCOMPAT;
    return BK_OK;
}

/*==========================================================================
 * API: life cycle
 *==========================================================================*/

int bk_bloom_create(bk_bloom **out, uint64_t capacity, double fpr,
                    uint64_t seed)
{
    uint64_t m;
    uint32_t k;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    int rc = bk_bloom_optimal(capacity, fpr, &m, &k);
    if (rc != BK_OK) return rc;
    return create_filter(out, m, k, seed, capacity, fpr);
}

int bk_bloom_create_mk(bk_bloom **out, uint64_t m_bits, uint32_t k,
                       uint64_t seed)
{
    return create_filter(out, m_bits, k, seed, 0, 0.0);
}

void bk_bloom_free(bk_bloom *f)
{
    if (f == NULL) return;
    bk__free_handle(&f->obj, f->owns_words, f->words);
}

int bk_bloom_clone(bk_bloom **out, const bk_bloom *src)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (src == NULL) return BK_EINVAL;
    int rc = create_filter(out, src->m, src->k, src->seed, src->capacity,
                           src->target_fpr);
    if (rc != BK_OK) return rc;
    memcpy((*out)->words, src->words, (size_t)src->nwords * sizeof(uint64_t));
    (*out)->items = bk__load64(&src->items);
    return BK_OK;
}

void bk_bloom_clear(bk_bloom *f)
{
    if (f == NULL) return;
    memset(f->words, 0, (size_t)f->nwords * sizeof(uint64_t));
    f->items = 0;
}

/*==========================================================================
 * API: single keys
 *==========================================================================*/

int bk_bloom_add_hash(bk_bloom *f, bk_hash h)
{
    return add_hash(f, h);
}

int bk_bloom_contains_hash(const bk_bloom *f, bk_hash h)
{
    return contains_hash(f, h);
}

int bk_bloom_add_if_absent_hash(bk_bloom *f, bk_hash h)
{
    if (contains_hash(f, h)) return 0;
    /* Another thread may have set some bits between the test and here; the
     * key was absent when tested, so it counts as new either way. */
    if (!add_hash(f, h)) bk__add64(&f->items, 1);
    return 1;
}

int bk_bloom_add(bk_bloom *f, const void *key, size_t len)
{
    return add_hash(f, bk_hash_key(key, len, f->seed));
}

int bk_bloom_contains(const bk_bloom *f, const void *key, size_t len)
{
    return contains_hash(f, bk_hash_key(key, len, f->seed));
}

int bk_bloom_add_if_absent(bk_bloom *f, const void *key, size_t len)
{
    return bk_bloom_add_if_absent_hash(f, bk_hash_key(key, len, f->seed));
}

/*==========================================================================
 * API: batches
 *
 * A window of BATCH_AHEAD hashes runs ahead of the probes: key i + AHEAD is
 * hashed and its lines prefetched while key i is probed, so up to
 * AHEAD * k misses are in flight instead of one.
 *==========================================================================*/

/* The loop's callbacks (batch.h): constants once inlined. */
static void batch_prefetch(const void *f, bk_hash h, int adding) { prefetch_hash(f, h, adding); }
static int batch_add(void *f, bk_hash h) { return add_hash(f, h); }
static int batch_contains(const void *f, bk_hash h) { return contains_hash(f, h); }

static int64_t run_batch(bk_bloom *f, const void *const *keys,
                         const size_t *lens, size_t n, uint8_t *results,
                         int is_add)
{
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    return bk__hash_ahead_batch(f, f->seed, keys, lens, n, results, is_add, BATCH_AHEAD, is_add,
                                batch_prefetch, batch_add, batch_contains);
}

int64_t bk_bloom_add_batch(bk_bloom *f, const void *const *keys,
                           const size_t *lens, size_t n, uint8_t *results)
{
    return run_batch(f, keys, lens, n, results, 1);
}

int64_t bk_bloom_contains_batch(const bk_bloom *f, const void *const *keys,
                                const size_t *lens, size_t n, uint8_t *results)
{
    /* run_batch writes nothing to f when is_add is 0 */
    return run_batch((bk_bloom *)f, keys, lens, n, results, 0);
}

/*==========================================================================
 * API: set operations
 *==========================================================================*/

int bk_bloom_union(bk_bloom *dst, const bk_bloom *src)
{
    int rc = compatible(dst, src);
    if (rc != BK_OK) return rc;
    for (uint64_t i = 0; i < dst->nwords; i++) dst->words[i] |= src->words[i];
    dst->items = estimate_to_count(
        estimate_from_bits(count_bits(dst), dst->m, dst->k));
    return BK_OK;
}

int bk_bloom_intersect(bk_bloom *dst, const bk_bloom *src)
{
    int rc = compatible(dst, src);
    if (rc != BK_OK) return rc;
    for (uint64_t i = 0; i < dst->nwords; i++) dst->words[i] &= src->words[i];
    dst->items = estimate_to_count(
        estimate_from_bits(count_bits(dst), dst->m, dst->k));
    return BK_OK;
}

int bk_bloom_equal(const bk_bloom *a, const bk_bloom *b)
{
    if (compatible(a, b) != BK_OK) return 0;
    return memcmp(a->words, b->words, (size_t)a->nwords * sizeof(uint64_t)) == 0;
}

/*==========================================================================
 * API: statistics
 *==========================================================================*/

uint64_t bk_bloom_bits(const bk_bloom *f) { return f->m; }
uint32_t bk_bloom_hashes(const bk_bloom *f) { return f->k; }
uint64_t bk_bloom_seed(const bk_bloom *f) { return f->seed; }
uint64_t bk_bloom_items(const bk_bloom *f) { return bk__load64(&f->items); }

double bk_bloom_estimate_items(const bk_bloom *f)
{
    return estimate_from_bits(count_bits(f), f->m, f->k);
}

int bk_bloom_get_stats(const bk_bloom *f, bk_bloom_stats *out)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    memset(out, 0, sizeof(*out));
    out->bits = f->m;
    out->hashes = f->k;
    out->seed = f->seed;
    out->capacity = f->capacity;
    out->target_fpr = f->target_fpr;
    out->items = bk__load64(&f->items);
    out->bits_set = count_bits(f);
    out->fill = (double)out->bits_set / (double)f->m;
    out->estimated_items = estimate_from_bits(out->bits_set, f->m, f->k);
    out->fpr_now = pow(out->fill, (double)f->k);
    out->fpr_at_capacity =
        f->capacity ? bk_bloom_fpr(f->capacity, f->m, f->k) : 0.0;
    out->bytes = sizeof(*f) + (size_t)f->nwords * sizeof(uint64_t) +
                 BK_CACHE_LINE + sizeof(void *);
    return BK_OK;
}

/*==========================================================================
 * The generic filter and the file format
 *
 * Image: one part holding the words; part.m = m, part.k = k; capacity,
 * target rate and item count in both the header and the part.
 *==========================================================================*/

BK__FAMILY_CASTS(bloom, bloom_ops)

static int ops_add(void *f, bk_hash h) { return add_hash(f, h); }
static int ops_contains(const void *f, bk_hash h) { return contains_hash(f, h); }
BK__OPS_BATCHES(bloom)
BK__OPS_SEED_DESTROY(bloom)
BK__OPS_ONE_PART
BK__OPS_CLEAR_CLONE(bloom)

static int ops_info(const void *vf, bk_filter_info *out)
{
    bk_bloom_stats st;
    int rc = bk_bloom_get_stats(vf, &st);
    if (rc != BK_OK) return rc;
    BK__INFO_FROM_STATS(out, st, st.estimated_items);
    return BK_OK;
}

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_bloom *f = vf;
    bk__part *p = &img->parts[0];
    img->seed = f->seed;
    img->capacity = f->capacity;
    img->fpr = f->target_fpr;
    img->items = bk__load64(&f->items);
    p->m = f->m;
    p->k = f->k;
    p->capacity = f->capacity;
    p->fpr = f->target_fpr;
    p->items = img->items;
    p->data = f->words;
    p->length = f->nwords * sizeof(uint64_t);
    return BK_OK;
}

static int ops_restore(const bk__image *img, void **out)
{
    const bk__part *p = &img->parts[0];
    if (img->nparts != 1) return BK_ECORRUPT;
    if (p->m == 0 || p->m > BK_MAX_BITS || p->k == 0 || p->k > BK_MAX_HASHES)
        return BK_ECORRUPT;
    uint64_t nwords = (p->m + 63) / 64;
    if (p->length != nwords * sizeof(uint64_t)) return BK_ECORRUPT;
    if (!bk__valid_stored_fpr(img->fpr) || (img->fpr == 0.0) != (img->capacity == 0))
        return BK_ECORRUPT;
    const uint64_t *words = p->data;
    if ((p->m & 63) != 0 && (words[nwords - 1] >> (p->m & 63)) != 0)
        return BK_ECORRUPT; /* bits past m are never set */

    bk_bloom *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &bloom_ops);
    f->words = p->data;
    f->owns_words = 0;
    f->nwords = nwords;
    f->m = p->m;
    f->k = p->k;
    f->seed = img->seed;
    f->capacity = img->capacity;
    f->target_fpr = img->fpr;
    f->items = img->items;
    *out = f;
    return BK_OK;
}

static int ops_create(const bk_filter_config *cfg, void **out)
{
    return bk_bloom_create((bk_bloom **)out, cfg->capacity, cfg->fpr, cfg->seed);
}

BK__OPS_MERGE(bloom)

static int ops_incompatibility(const void *va, const void *vb, char *buf, size_t cap)
{
    const bk_bloom *a = va, *b = vb;
    if (a->m != b->m)
        snprintf(buf, cap, "sizes differ: %llu vs %llu bits",
                 (unsigned long long)a->m, (unsigned long long)b->m);
    else if (a->k != b->k)
        snprintf(buf, cap, "hash counts differ: %u vs %u", a->k, b->k);
    else
        return 0;
    return 1;
}


/* The handle and, unless borrowed from a loaded block, the bits. */
static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_bloom *f = vf;
    bk__visit_handle(f, sizeof(*f), f->owns_words, f->words,
                     (size_t)f->nwords * sizeof(uint64_t), visit, ctx);
}

/* Auto-clear's view (filter.h): bits, and adds that count the bits they
 * set. Plain stores: the auto-clear filter is the only writer. */
static uint64_t fill_units(const void *f) { return ((const bk_bloom *)f)->m; }
static uint64_t fill_count_set(const void *f) { return count_bits(f); }

static int fill_add(void *vf, bk_hash h, uint64_t *newly_set)
{
    bk_bloom *f = vf;
    bk__probe p = bk__probe_start(h);
    uint64_t n = 0;
    for (uint32_t i = 0; i < f->k; i++) {
        uint64_t bit = bk__probe_next(&p, f->m);
        uint64_t *word = &f->words[bit >> 6], mask = UINT64_C(1) << (bit & 63);
        if ((*word & mask) == 0) {
            *word |= mask;
            n++;
        }
    }
    f->items += n != 0;
    *newly_set = n;
    return n != 0;
}

/* A bit escapes one key's k probes with probability (1 - 1/m)^k. */
static double fill_at(const void *vf, uint64_t n)
{
    const bk_bloom *f = vf;
    return -expm1((double)n * (double)f->k * log1p(-1.0 / (double)f->m));
}

static const bk__fill_ops bloom_fill = {fill_units, fill_count_set, fill_at, fill_add, NULL, NULL, NULL};

static const bk__family_ops bloom_ops = {
    .family = BK_FAMILY_BLOOM,
    .name = "bloom",
    BK__OPS_STANDARD,
    .add_batch = ops_add_batch, .contains_batch = ops_contains_batch, .lockfree_add = 1,
    .clone = ops_clone, .clear = ops_clear, .merge = ops_merge,
    .incompatibility = ops_incompatibility, .fill = &bloom_fill,
};

const bk__family_ops *const bk__bloom_family = &bloom_ops;
