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
#include "hash.h"
#include "table_family.h"

/*==========================================================================
 * Types
 *==========================================================================*/

#define COUNTERS 64
#define COUNTERS_LOG2 6
#define COUNTER_MAX 255

struct bk_morris {
    bk__tf_head head;  /* first: a bk_morris is also a bk_filter */
    uint8_t *counters; /* blocks * 64 */
    uint64_t blocks;
    uint32_t k;
    double base;
    double log_base;   /* ln b */
    uint64_t rng;      /* the coins: a splitmix64 stream */
};

static const bk__tf_family morris_family;

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
        f->head.overflows++;
        return 0;
    }
    if (m > 0) {
        /* coin: a uniform double in [0, 1) against b^-m */
        double u = (double)(bk__dl_mix64(&f->rng) >> 11) * 0x1.0p-53;
        if (u >= exp(-(double)m * f->log_base)) return 0;
    }
    for (uint32_t j = 0; j < f->k; j++)
        if (b[pos[j]] == m) b[pos[j]] = (uint8_t)(m + 1);
    if (m + 1 == COUNTER_MAX) f->head.overflows++;
    if (m == 0) f->head.items++;
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

/* A sizing: n keys at rate p with k hashes. */
typedef struct sizing {
    uint64_t n;
    double p;
    uint32_t k;
} sizing;

static int sizing_fits(const void *ctx, uint64_t blocks)
{
    const sizing *z = ctx;
    return bk__dl_blocked_fpr((double)z->n / (double)blocks, COUNTERS, z->k) <= z->p;
}

static uint64_t blocks_for(uint64_t n, double p, uint32_t k)
{
    /* the rate falls as blocks grow: start at a mean load of one key per
     * counter (cheap sums) */
    const sizing z = {n, p, k};
    return bk__fewest_blocks(n / COUNTERS, BK_MORRIS_MAX_BLOCKS, sizing_fits, &z);
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

static size_t table_bytes(const void *f)
{
    return (size_t)((const bk_morris *)f)->blocks * COUNTERS;
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
    if (blocks > SIZE_MAX / COUNTERS) return BK_ESIZE;
    bk_morris *f = bk__tf_create(&morris_family, (size_t)blocks * COUNTERS, seed, capacity, fpr);
    if (f == NULL) return BK_ENOMEM;
    f->blocks = blocks;
    f->k = k;
    f->base = base;
    f->log_base = log(base);
    f->rng = seed ^ UINT64_C(0x4D6F727269730001); /* "Morris" */
    *out = f;
    return BK_OK;
}

void bk_morris_free(bk_morris *f) { bk__tf_free(f); }

double bk_morris_estimate(const bk_morris *f, const void *key, size_t len)
{
    return estimate(f, min_counter(f, bk_hash_key(key, len, f->head.seed)));
}

double bk_morris_relative_error(const bk_morris *f)
{
    return sqrt((f->base - 1.0) / 2.0);
}

double bk_morris_base(const bk_morris *f) { return f->base; }
uint64_t bk_morris_blocks(const bk_morris *f) { return f->blocks; }
uint32_t bk_morris_hashes(const bk_morris *f) { return f->k; }

static int stats_of(const void *vf, bk_delete_stats *out)
{
    const bk_morris *f = vf;
    if (f == NULL || out == NULL) return BK_EINVAL;
    double sum = 0.0;
    for (uint64_t b = 0; b < f->blocks; b++) {
        uint32_t nonzero = 0;
        for (uint32_t j = 0; j < COUNTERS; j++) nonzero += f->counters[b * COUNTERS + j] != 0;
        double hit = 1.0;
        for (uint32_t j = 0; j < f->k; j++)
            hit *= nonzero > j ? (double)(nonzero - j) / (double)(COUNTERS - j) : 0.0;
        sum += hit;
    }
    bk__tf_stats(&f->head, f->k, f->blocks * COUNTERS * 8,
                 sizeof(*f) + table_bytes(f) + BK_CACHE_LINE, out);
    out->fpr_at_capacity = f->head.capacity
        ? bk__dl_blocked_fpr((double)f->head.capacity / (double)f->blocks, COUNTERS, f->k)
        : 0.0;
    out->fpr_now = sum / (double)f->blocks;
    return BK_OK;
}

int bk_morris_get_stats(const bk_morris *f, bk_delete_stats *out) { return stats_of(f, out); }

/*==========================================================================
 * The generic filter and the file format
 *==========================================================================*/

BK__FAMILY_CASTS(morris, morris_family.ops)

static int ops_add(void *f, bk_hash h) { return add_hash(f, h); }
static int ops_contains(const void *f, bk_hash h) { return min_counter(f, h) > 0; }

static int64_t ops_count(const void *vf, bk_hash h)
{
    const bk_morris *f = vf;
    return (int64_t)llround(estimate(f, min_counter(f, h)));
}

static void prefetch_hash(const void *f, bk_hash h, int adding)
{
    (void)adding;
    BK_PREFETCH_WRITE(block_of(f, h));
}

BK__TF_HASH_BATCH_OPS(prefetch_hash, ops_add, ops_contains)

static void *table_of(const void *f) { return ((const bk_morris *)f)->counters; }
static void set_table(void *f, void *table) { ((bk_morris *)f)->counters = table; }

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
    bk__part *p = bk__tf_describe(f, img);
    img->param[1] = f->rng;
    memcpy(&img->param[2], &f->base, sizeof(double));
    p->m = f->blocks;
    p->k = f->k;
    p->width = 8;
    return BK_OK;
}

static int ops_restore(const bk__image *img, void **out)
{
    const bk__part *p = &img->parts[0];
    double base;
    memcpy(&base, &img->param[2], sizeof(double));
    if (!bk__tf_restorable(img)) return BK_ECORRUPT;
    if (p->m == 0 || p->m > BK_MORRIS_MAX_BLOCKS || p->length != p->m * COUNTERS ||
        p->k == 0 || p->k > BK_MORRIS_MAX_HASHES || p->width != 8 || !valid_base(base))
        return BK_ECORRUPT;
    bk_morris *f = bk__tf_adopt(&morris_family, img, p->data);
    if (f == NULL) return BK_ENOMEM;
    f->blocks = p->m;
    f->k = p->k;
    f->base = base;
    f->log_base = log(base);
    f->rng = img->param[1];
    *out = f;
    return BK_OK;
}

static const bk__tf_family morris_family = {
    .ops = {.family = BK_FAMILY_MORRIS, .name = "morris",
            .remove = NULL, /* see "What it cannot do" */
            BK__TF_OPS_STANDARD},
    BK__TF_HOOKS_STANDARD(bk_morris),
    .fill = bk__tf_fill_root_k,
};

const bk__family_ops *const bk__morris_family = &morris_family.ops;
