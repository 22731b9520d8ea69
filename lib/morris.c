/*
 * morris.c - a frequency-estimating Bloom filter of probabilistic (Morris)
 * counters, minimum over k (seed 002, "Probabilistic Counting"; Morris
 * 1978, "Counting large numbers of events in small registers"; the
 * minimum and the conservative update as in the count-min sketch, Cormode
 * & Muthukrishnan 2005, and Estan & Varghese 2002).
 *
 * Structure
 *   Blocks of 64 bytes = 64 eight-bit counters; a key's hash picks a block
 *   (fastrange of lo) and k distinct counters in it (6-bit draws from hi,
 *   repeats drawn again). A counter holds an exponent c: it stands for
 *   n(c) = (b^c - 1) / (b - 1) events, b the base (1 < b <= 2).
 *
 *   Add (conservative update, one shared coin): let m be the smallest of
 *   the key's counters; with probability b^-m every counter of the key at
 *   m becomes m + 1 (all of them or none). Counters above m are left: they
 *   already count more than this key's share. Count: n(m) of the minimum.
 *   Lookup: all k counters nonzero (the first add of a key always
 *   increments, b^0 = 1, so an added key is never missed).
 *
 * Error
 *   Coupling: let M be the Morris counter the key's own adds would drive
 *   with the same coins. Whenever the minimum equals M both step together;
 *   when it is above M it steps less often, but M can only catch up. So the
 *   minimum is never below M, and the estimate never below n(M), whose
 *   expectation is the key's true count x with variance (b - 1) x (x - 1)/2
 *   (Morris 1978; Flajolet 1985): relative standard deviation
 *   sqrt((b - 1) / 2) = 20% for the default b = 1.08. Other keys sharing
 *   all k counters can only raise it (by at most the count-min excess).
 *   Range: 255 steps reach n = (b^255 - 1)/(b - 1) = 4.3e9 at b = 1.08; a
 *   counter at 255 stays there (an overflow event).
 *
 * False positives
 *   The nonzero counters form a blocked Bloom filter of 64 cells per block:
 *       fpr = sum_i Poisson(i; n/B) (1 - (1 - k/64)^i)^k
 *
 * What it cannot do
 *   Remove: the seed's verdict ("the probabilistic model does not support
 *   the inverse operation"). An unbiased probabilistic decrement exists
 *   (step down with probability b^-(c-1)), but it can take a counter that
 *   another present key relies on to zero: a false negative. So remove is
 *   not offered (BK_ENOTSUP). No concurrent writes (the coin generator is
 *   shared state), no merge.
 */
#include <string.h> /* memset, memcpy */

#include "deleting.h"
#include "filter.h"
#include "hash.h"

/*==========================================================================
 * Types
 *==========================================================================*/

#define COUNTERS 64
#define COUNTERS_LOG2 6
#define COUNTER_MAX 255
#define BATCH_AHEAD 16

struct bk_morris {
    bk__object obj;    /* first: a bk_morris is also a bk_filter */
    uint8_t *counters; /* blocks * 64 */
    uint64_t blocks;
    uint32_t k;
    double base;
    double log_base;   /* ln b */
    uint64_t rng;      /* the coins: a splitmix64 stream */
    uint64_t seed;
    uint64_t capacity;
    double target_fpr;
    uint64_t items;
    uint64_t overflows;
    int owns_mem;
};

static const bk__family_ops morris_ops;

/*==========================================================================
 * Internals
 *==========================================================================*/

static inline uint8_t *block_of(const bk_morris *f, bk_hash h)
{
    return f->counters + bk__fastrange64(h.lo, f->blocks) * COUNTERS;
}

static double estimate(const bk_morris *f, unsigned c)
{
    if (c == 0) return 0.0;
    return expm1((double)c * f->log_base) / (f->base - 1.0);
}

static int add_hash(bk_morris *f, bk_hash h)
{
    uint16_t pos[BK_MORRIS_MAX_HASHES];
    uint8_t *b = block_of(f, h);
    bk__dl_draw(h, COUNTERS_LOG2, f->k, pos);
    unsigned m = COUNTER_MAX;
    for (uint32_t j = 0; j < f->k; j++)
        if (b[pos[j]] < m) m = b[pos[j]];
    if (m == COUNTER_MAX) {
        f->overflows++;
        return 0;
    }
    if (m > 0) {
        /* coin: a uniform double in [0, 1) against b^-m */
        double u = (double)(bk__dl_mix64(&f->rng) >> 11) * 0x1.0p-53;
        if (u >= exp(-(double)m * f->log_base)) return 0;
    }
    for (uint32_t j = 0; j < f->k; j++)
        if (b[pos[j]] == m) b[pos[j]] = (uint8_t)(m + 1);
    if (m + 1 == COUNTER_MAX) f->overflows++;
    if (m == 0) f->items++;
    return m == 0;
}

static unsigned min_counter(const bk_morris *f, bk_hash h)
{
    uint16_t pos[BK_MORRIS_MAX_HASHES];
    const uint8_t *b = block_of(f, h);
    bk__dl_draw(h, COUNTERS_LOG2, f->k, pos);
    unsigned m = COUNTER_MAX;
    for (uint32_t j = 0; j < f->k && m > 0; j++)
        if (b[pos[j]] < m) m = b[pos[j]];
    return m;
}

/*==========================================================================
 * Sizing
 *==========================================================================*/

static uint64_t blocks_for(uint64_t n, double p, uint32_t k)
{
    /* the rate falls as blocks grow: start at a mean load of one key per
     * counter (cheap sums; lo = 0 is never evaluated) */
    uint64_t lo = 0, hi = n / COUNTERS ? n / COUNTERS : 1;
    while (bk__dl_blocked_fpr((double)n / (double)hi, COUNTERS, k) > p) {
        lo = hi;
        if (hi >= BK_MORRIS_MAX_BLOCKS) return 0;
        hi *= 2;
    }
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (bk__dl_blocked_fpr((double)n / (double)mid, COUNTERS, k) <= p) hi = mid;
        else lo = mid;
    }
    return hi <= BK_MORRIS_MAX_BLOCKS ? hi : 0;
}

int bk_morris_optimal(uint64_t n, double p, uint64_t *blocks, uint32_t *k)
{
    if (n == 0) return BK_ECAPACITY;
    if (bk__check_fpr(p) != BK_OK) return BK_EFPR;
    uint64_t best = 0;
    uint32_t best_k = 0;
    for (uint32_t kk = 1; kk <= BK_MORRIS_MAX_HASHES; kk++) {
        uint64_t b = blocks_for(n, p, kk);
        if (b != 0 && (best == 0 || b < best)) best = b, best_k = kk;
    }
    if (best == 0) return BK_ESIZE;
    if (blocks) *blocks = best;
    if (k) *k = best_k;
    return BK_OK;
}

/*==========================================================================
 * API
 *==========================================================================*/

static int valid_base(double base)
{
    return base > 1.0 && base <= 2.0; /* NaN fails too */
}

static int create_filter(bk_morris **out, uint64_t blocks, uint32_t k,
                         double base, uint64_t seed, uint64_t capacity,
                         double fpr)
{
    if (blocks > SIZE_MAX / COUNTERS) return BK_ESIZE;
    bk_morris *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) goto fail;
    f->counters = bk__calloc_aligned((size_t)blocks * COUNTERS);
    if (f->counters == NULL) goto fail;
    bk__object_init(&f->obj, &morris_ops);
    f->owns_mem = 1;
    f->blocks = blocks;
    f->k = k;
    f->base = base;
    f->log_base = log(base);
    f->rng = seed ^ UINT64_C(0x4D6F727269730001); /* "Morris" */
    f->seed = seed;
    f->capacity = capacity;
    f->target_fpr = fpr;
    *out = f;
    return BK_OK;

fail:
    bk__free(f);
    return BK_ENOMEM;
}

int bk_morris_create(bk_morris **out, uint64_t capacity, double fpr,
                     double base, uint64_t seed)
{
    uint64_t blocks;
    uint32_t k;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (base == 0.0) base = BK_MORRIS_DEFAULT_BASE;
    if (!valid_base(base)) return BK_EPARAM;
    int rc = bk_morris_optimal(capacity, fpr, &blocks, &k);
    if (rc != BK_OK) return rc;
    return create_filter(out, blocks, k, base, seed, capacity, fpr);
}

void bk_morris_free(bk_morris *f)
{
    if (f == NULL) return;
    if (f->owns_mem) bk__free_aligned(f->counters);
    bk__object_release(&f->obj);
    bk__free(f);
}

double bk_morris_estimate(const bk_morris *f, const void *key, size_t len)
{
    return estimate(f, min_counter(f, bk_hash_key(key, len, f->seed)));
}

double bk_morris_relative_error(const bk_morris *f)
{
    return sqrt((f->base - 1.0) / 2.0);
}

double bk_morris_base(const bk_morris *f) { return f->base; }
uint64_t bk_morris_blocks(const bk_morris *f) { return f->blocks; }
uint32_t bk_morris_hashes(const bk_morris *f) { return f->k; }

int bk_morris_get_stats(const bk_morris *f, bk_delete_stats *out)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    memset(out, 0, sizeof(*out));
    double sum = 0.0;
    for (uint64_t b = 0; b < f->blocks; b++) {
        uint32_t nonzero = 0;
        for (uint32_t j = 0; j < COUNTERS; j++) nonzero += f->counters[b * COUNTERS + j] != 0;
        double hit = 1.0;
        for (uint32_t j = 0; j < f->k; j++)
            hit *= nonzero > j ? (double)(nonzero - j) / (double)(COUNTERS - j) : 0.0;
        sum += hit;
    }
    out->capacity = f->capacity;
    out->target_fpr = f->target_fpr;
    out->seed = f->seed;
    out->hashes = f->k;
    out->items = f->items;
    out->table_bits = f->blocks * COUNTERS * 8;
    out->bits_per_key = f->capacity ? (double)out->table_bits / (double)f->capacity : 0.0;
    out->fpr_at_capacity = f->capacity
        ? bk__dl_blocked_fpr((double)f->capacity / (double)f->blocks, COUNTERS, f->k)
        : 0.0;
    out->fpr_now = sum / (double)f->blocks;
    out->overflows = f->overflows;
    out->bytes = sizeof(*f) + (size_t)f->blocks * COUNTERS + BK_CACHE_LINE;
    return BK_OK;
}

/*==========================================================================
 * The generic filter and the file format
 *==========================================================================*/

BK__FAMILY_CASTS(morris, morris_ops)

static int ops_add(void *f, bk_hash h) { return add_hash(f, h); }
static int ops_contains(const void *f, bk_hash h) { return min_counter(f, h) > 0; }

static int64_t ops_count(const void *vf, bk_hash h)
{
    const bk_morris *f = vf;
    return (int64_t)llround(estimate(f, min_counter(f, h)));
}

static int64_t run_batch(bk_morris *f, const void *const *keys,
                         const size_t *lens, size_t n, uint8_t *results,
                         int is_add)
{
    bk_hash ring[BATCH_AHEAD];
    int64_t hits = 0;
    size_t ahead = n < BATCH_AHEAD ? n : BATCH_AHEAD;
    for (size_t i = 0; i < ahead; i++) {
        ring[i] = bk_hash_key(keys[i], lens[i], f->seed);
        BK_PREFETCH_WRITE(block_of(f, ring[i]));
    }
    for (size_t i = 0; i < n; i++) {
        bk_hash h = ring[i % BATCH_AHEAD];
        size_t next = i + BATCH_AHEAD;
        if (next < n) {
            bk_hash hn = bk_hash_key(keys[next], lens[next], f->seed);
            ring[i % BATCH_AHEAD] = hn;
            BK_PREFETCH_WRITE(block_of(f, hn));
        }
        int r = is_add ? add_hash(f, h) : min_counter(f, h) > 0;
        hits += r;
        if (results != NULL) results[i] = (uint8_t)r;
    }
    return hits;
}

static int64_t ops_add_batch(void *f, const void *const *keys, const size_t *lens,
                             size_t n, uint8_t *results)
{
    return run_batch(f, keys, lens, n, results, 1);
}

static int64_t ops_contains_batch(const void *f, const void *const *keys,
                                  const size_t *lens, size_t n, uint8_t *results)
{
    /* run_batch writes nothing to f when is_add is 0 */
    return run_batch((bk_morris *)f, keys, lens, n, results, 0);
}

static uint64_t ops_seed(const void *f) { return ((const bk_morris *)f)->seed; }
static void ops_destroy(void *f) { bk_morris_free(f); }
static uint32_t ops_nparts(const void *f) { (void)f; return 1; }

static void ops_clear(void *vf)
{
    bk_morris *f = vf;
    memset(f->counters, 0, (size_t)f->blocks * COUNTERS);
    f->items = 0;
}

static int ops_clone(const void *vf, void **out)
{
    const bk_morris *src = vf;
    bk_morris *f;
    int rc = create_filter(&f, src->blocks, src->k, src->base, src->seed,
                           src->capacity, src->target_fpr);
    if (rc != BK_OK) return rc;
    memcpy(f->counters, src->counters, (size_t)src->blocks * COUNTERS);
    f->items = src->items;
    f->overflows = src->overflows;
    f->rng = src->rng;
    *out = f;
    return BK_OK;
}

static int ops_info(const void *vf, bk_filter_info *out)
{
    const bk_morris *f = vf;
    bk_delete_stats st;
    int rc = bk_morris_get_stats(f, &st);
    if (rc != BK_OK) return rc;
    bk__info_from_delete_stats(&st, pow(st.fpr_now, 1.0 / (double)f->k), out);
    return BK_OK;
}

static int ops_create(const bk_filter_config *cfg, void **out)
{
    return bk_morris_create((bk_morris **)out, cfg->capacity, cfg->fpr, 0.0, cfg->seed);
}

/* Image: one part; m = blocks, k, width = 8; header param[0] = overflow
 * events, param[1] = the coin generator's state, param[2] = the base b as
 * binary64 bits. Payload: blocks x 64 counters, one byte each. */
static int ops_describe(const void *vf, bk__image *img)
{
    const bk_morris *f = vf;
    bk__part *p = &img->parts[0];
    img->seed = f->seed;
    img->capacity = p->capacity = f->capacity;
    img->fpr = p->fpr = f->target_fpr;
    img->items = p->items = f->items;
    img->param[0] = f->overflows;
    img->param[1] = f->rng;
    memcpy(&img->param[2], &f->base, sizeof(double));
    p->m = f->blocks;
    p->k = f->k;
    p->width = 8;
    p->data = f->counters;
    p->length = f->blocks * COUNTERS;
    return BK_OK;
}

static int ops_restore(const bk__image *img, void **out)
{
    const bk__part *p = &img->parts[0];
    double base;
    memcpy(&base, &img->param[2], sizeof(double));
    if (img->nparts != 1) return BK_ECORRUPT;
    if (p->m == 0 || p->m > BK_MORRIS_MAX_BLOCKS || p->length != p->m * COUNTERS ||
        p->k == 0 || p->k > BK_MORRIS_MAX_HASHES || p->width != 8 || !valid_base(base))
        return BK_ECORRUPT;
    if (!bk__valid_stored_fpr(img->fpr) || (img->fpr == 0.0) != (img->capacity == 0))
        return BK_ECORRUPT;
    bk_morris *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &morris_ops);
    f->counters = p->data;
    f->owns_mem = 0;
    f->blocks = p->m;
    f->k = p->k;
    f->base = base;
    f->log_base = log(base);
    f->rng = img->param[1];
    f->seed = img->seed;
    f->capacity = img->capacity;
    f->target_fpr = img->fpr;
    f->items = img->items;
    f->overflows = img->param[0];
    *out = f;
    return BK_OK;
}


/* The handle and, unless borrowed from a loaded block, the counters. */
static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_morris *f = vf;
    visit(ctx, f, sizeof(*f));
    if (f->owns_mem)
        visit(ctx, bk__aligned_raw(f->counters), bk__aligned_asked((size_t)f->blocks * COUNTERS));
}

static const bk__family_ops morris_ops = {
    .family = BK_FAMILY_MORRIS,
    .name = "morris",
    .add = ops_add,
    .contains = ops_contains,
    .remove = NULL, /* see "What it cannot do" */
    .count = ops_count,
    .add_batch = ops_add_batch,
    .contains_batch = ops_contains_batch,
    .lockfree_add = 0,
    .seed = ops_seed,
    .destroy = ops_destroy,
    .info = ops_info,
    .allocations = ops_allocations,
    .create = ops_create,
    .clone = ops_clone,
    .clear = ops_clear,
    .merge = NULL,
    .incompatibility = NULL,
    .nparts = ops_nparts,
    .describe = ops_describe,
    .restore = ops_restore,
};

const bk__family_ops *const bk__morris_family = &morris_ops;
