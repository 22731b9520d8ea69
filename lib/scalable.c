/*
 * scalable.c - the scalable Bloom filter (Almeida, Baquero, Preguica &
 * Hutchison, "Scalable Bloom Filters", Information Processing Letters 101,
 * 2007), with RedisBloom's parameters (BF.RESERVE: error, capacity,
 * EXPANSION, NONSCALING).
 *
 * Structure
 *   A chain of cache-blocked filters (lib/blocked.c), the "stages", all
 *   hashing with the scalable filter's seed, so a key is hashed once and
 *   the same bk_hash is handed to every stage. Stage i is sized for
 *       n_i = n_0 * expansion^i items at rate p_i = p_0 * r^i,  r = 0.5,
 *   with p_0 = error (RedisBloom's rule) or error * (1 - r) with
 *   BK_SCALABLE_BOUNDED (Almeida et al.'s rule). Each stage carries the
 *   count of new items written into it; when the newest stage's count has
 *   reached n_i, the next new item creates stage i + 1. Only the newest
 *   stage is ever written.
 *
 * Adds
 *   An add looks the key up in every existing stage first (newest first,
 *   where most keys live; the order changes no answer). Found anywhere: the answer is 0 and nothing is written,
 *   which is what makes items a count of distinct keys (BF.CARD) and keeps
 *   older stages from receiving more than their capacity. Found nowhere:
 *   the key goes into the newest stage (after growing, if that one is full)
 *   and is counted.
 *
 * False positives
 *   A lookup of an absent key is wrong when some stage is wrong. By the
 *   union bound, whatever the correlation between stages, the compound
 *   rate with every stage at capacity is
 *       P <= sum_i p_0 r^i < p_0 / (1 - r),
 *   and with independent stages P = 1 - prod_i (1 - p_i) (what the stats
 *   report). The stages are nearly independent: a key lands in a different
 *   block of each (fast range over different sizes); only its in-block
 *   pattern, from the same 32 hash bits, is shared. The bound is Almeida
 *   et al.'s (2007, section 4). With p_0 = error that is 2 * error
 *   in the limit (RedisBloom's behaviour, reported as fpr_limit); with
 *   BK_SCALABLE_BOUNDED, p_0 = error (1 - r) and P < error for any number
 *   of stages. Tighter stages cost more bits per key: stage i needs about
 *   (log2(1 / p_0) + i) / ln 2 bits per key with a classic filter, and a
 *   blocked stage ~1.3x that at rates near 1e-6 (bk_blocked_optimal: 35
 *   bits per key at 2.4e-6 against 27). Most keys live in the newest
 *   stages, so bits per key grow by ~1.44 (classic) or ~2 (blocked) per
 *   doubling of n over the first capacity; and the newest stage, about
 *   half of all memory, is only partly used. Measured (test_scalable.c): 1e6 keys from
 *   capacity 100 take 14 stages and ~58 bits per key at p = 1%, against
 *   9.9 for a blocked filter sized for 1e6 in advance. Start near the
 *   expected size: growth is for the unexpected.
 *
 * Limits
 *   At most BK_SCALABLE_MAX_STAGES stages (settable lower) and an optional
 *   cap on total bytes; both are checked before anything is allocated, and
 *   a new stage is published only once fully built, so every failure of a
 *   growing add (BK_ELIMIT, BK_ESIZE, BK_ENOMEM) leaves the filter as it
 *   was. A non-scaling filter has one stage and refuses new keys once it
 *   holds its capacity (BK_EFULL, RedisBloom's "non scaling filter is
 *   full"); keys already present still answer 0.
 *
 * Concurrency
 *   The stage pointers live in a fixed array inside the struct. A stage is
 *   built completely, then installed with a compare-and-swap of its slot
 *   from NULL (acquire-release), then made visible by raising nstages
 *   (release). Readers load nstages (acquire) and use stages[0 .. n-1],
 *   which never change until clear or free: lookups are lock-free and
 *   safe during growth. Two adds that find the newest stage full both
 *   build a stage; the CAS picks one, the other frees its copy, helps
 *   raise nstages and retries. Stage capacity is checked with relaxed
 *   counters, so a stage may take a few items more than its capacity
 *   under concurrent adds (one per racing thread).
 *
 * Memory accounting
 *   bk_blocked has no byte accessor that does not count bits, so a stage's
 *   bytes are computed when it is made: its payload (bits / 8), the
 *   aligned allocation's slack (64 + a pointer), this file's stage record
 *   and a fixed allowance for the blocked filter's handle. The cap is
 *   checked against that sum.
 *
 * What it cannot do
 *   Delete or forget (see the window filter); stage rates below about 1e-9
 *   are not reached (a blocked filter places bits with 32 hash bits).
 */
#include <math.h>   /* pow, log1p, expm1, fabs */
#include <stdio.h>  /* snprintf */
#include <string.h> /* memset */

#include "filter.h"
#include "hash.h"

/*==========================================================================
 * Types
 *==========================================================================*/

/* Allowance for a bk_blocked handle, whose size is private to blocked.c. */
#define BLOCKED_HANDLE_BYTES 128

typedef struct stage {
    bk_blocked *filter;
    uint64_t capacity;  /* n_i */
    double fpr;         /* p_i */
    size_t bytes;       /* accounted memory of this stage */
    uint64_t items;     /* new items written into it; relaxed atomic */
} stage;

struct bk_scalable {
    bk__object obj;       /* first: a bk_scalable is also a bk_filter */
    stage *stages[BK_SCALABLE_MAX_STAGES]; /* a prefix of nstages is set */
    uint32_t nstages;     /* published count; release/acquire */
    uint32_t max_stages;
    size_t max_bytes;     /* 0: no cap */
    size_t bytes;         /* struct + stages; relaxed atomic */
    uint64_t items;       /* adds that returned 1; relaxed atomic */
    uint64_t seed;
    uint64_t capacity;    /* n_0 */
    double error;         /* as created */
    double first_fpr;     /* p_0 */
    uint32_t expansion;
    unsigned flags;
};

static const bk__family_ops scalable_ops; /* at the end of this file */

/*==========================================================================
 * Internals: atomics on the stage array
 *==========================================================================*/

static inline uint32_t load_nstages(const bk_scalable *f)
{
    return __atomic_load_n(&f->nstages, __ATOMIC_ACQUIRE);
}

static inline stage *load_stage(const bk_scalable *f, uint32_t i)
{
    return __atomic_load_n(&f->stages[i], __ATOMIC_ACQUIRE);
}

static inline size_t load_size(const size_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/*==========================================================================
 * Internals: stages
 *==========================================================================*/

static size_t stage_bytes(uint64_t bits)
{
    return (size_t)(bits / 8) + BK_CACHE_LINE + sizeof(void *) +
           sizeof(stage) + BLOCKED_HANDLE_BYTES;
}

/* Parameters of the stage after `prev` (or stage 0 when prev is NULL).
 * BK_ESIZE when its capacity overflows. */
static int next_params(const bk_scalable *f, const stage *prev,
                       uint64_t *capacity, double *fpr)
{
    if (prev == NULL) {
        *capacity = f->capacity;
        *fpr = f->first_fpr;
        return BK_OK;
    }
    if (bk__mul_overflow(prev->capacity, f->expansion, capacity))
        return BK_ESIZE;
    *fpr = prev->fpr * BK_SCALABLE_TIGHTENING;
    if (!(*fpr > 0.0)) return BK_ESIZE; /* underflow: unreachable rates */
    return BK_OK;
}

static void stage_free(stage *s)
{
    if (s == NULL) return;
    bk_blocked_free(s->filter);
    bk__free(s);
}

/* Build (not publish) a stage of `capacity` items at `fpr`, checking the
 * memory cap against `used` bytes first. */
static int stage_create(stage **out, const bk_scalable *f, uint64_t capacity,
                        double fpr, size_t used)
{
    stage *s = NULL;
    uint64_t bits;
    int rc = bk_blocked_optimal(capacity, fpr, &bits, NULL);
    *out = NULL;
    if (rc != BK_OK) goto fail;
    if (bits / 8 > SIZE_MAX / 2) { rc = BK_ESIZE; goto fail; }
    size_t bytes = stage_bytes(bits);
    size_t cap = load_size(&f->max_bytes);
    if (cap != 0 && (used > cap || bytes > cap - used)) {
        rc = BK_ELIMIT;
        goto fail;
    }
    s = bk__calloc(1, sizeof(*s));
    if (s == NULL) { rc = BK_ENOMEM; goto fail; }
    rc = bk_blocked_create(&s->filter, capacity, fpr, f->seed);
    if (rc != BK_OK) goto fail;
    s->capacity = capacity;
    s->fpr = fpr;
    s->bytes = bytes;
    *out = s;
    return BK_OK;

fail:
    stage_free(s);
    return rc;
}

/* Make stage n exist, n being the number of stages the caller saw. BK_OK
 * when it exists afterwards (built here or by a racing add). */
static int grow(bk_scalable *f, uint32_t n)
{
    stage *fresh = NULL, *expected = NULL;
    uint64_t capacity;
    double fpr;
    int rc;

    if (n >= BK_SCALABLE_MAX_STAGES) return BK_ELIMIT;
    if (load_stage(f, n) != NULL) goto publish; /* a racing add grew it */
    if (n >= __atomic_load_n(&f->max_stages, __ATOMIC_RELAXED))
        return BK_ELIMIT;
    rc = next_params(f, load_stage(f, n - 1), &capacity, &fpr);
    if (rc != BK_OK) return rc;
    rc = stage_create(&fresh, f, capacity, fpr, load_size(&f->bytes));
    if (rc != BK_OK) return rc;

    /* Count the bytes before publishing so that a racing check of the cap
     * never sees the stage without them. */
    __atomic_fetch_add(&f->bytes, fresh->bytes, __ATOMIC_RELAXED);
    if (!__atomic_compare_exchange_n(&f->stages[n], &expected, fresh, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        __atomic_fetch_sub(&f->bytes, fresh->bytes, __ATOMIC_RELAXED);
        stage_free(fresh); /* another add installed stage n first */
    }
publish:;
    /* Publish (or help publish) stage n. */
    uint32_t seen = n;
    __atomic_compare_exchange_n(&f->nstages, &seen, n + 1, 0,
                                __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    return BK_OK;
}

/* Newest stage first: with expansion 2 the newest two stages hold about
 * three quarters of the keys, so a present key is usually found at once.
 * An absent key costs one probe per stage whatever the order. */
static int contains_in(const bk_scalable *f, uint32_t n, bk_hash h)
{
    for (uint32_t i = n; i-- > 0;)
        if (bk_blocked_contains_hash(load_stage(f, i)->filter, h)) return 1;
    return 0;
}

static int contains_hash(const bk_scalable *f, bk_hash h)
{
    return contains_in(f, load_nstages(f), h);
}

/* may_grow 0: a new key that needs a new stage gets BK_EFULL instead. */
static int add_hash(bk_scalable *f, bk_hash h, int may_grow)
{
    uint32_t n = load_nstages(f);
    if (contains_in(f, n, h)) return 0;

    /* New: find (or make) a newest stage with room. Stages that appeared
     * since the scan above were empty when it started or took keys added
     * concurrently; RedisBloom checks only the stages it saw, as we do. */
    stage *cur;
    for (;;) {
        cur = load_stage(f, n - 1);
        if (__atomic_load_n(&cur->items, __ATOMIC_RELAXED) < cur->capacity)
            break;
        if ((f->flags & BK_SCALABLE_NONSCALING) || !may_grow) return BK_EFULL;
        int rc = grow(f, n);
        if (rc != BK_OK) return rc;
        n = load_nstages(f);
    }
    bk_blocked_add_hash(cur->filter, h);
    __atomic_fetch_add(&cur->items, 1, __ATOMIC_RELAXED);
    bk__add64(&f->items, 1);
    return 1;
}

/*==========================================================================
 * API: life cycle
 *==========================================================================*/

int bk_scalable_create(bk_scalable **out, uint64_t capacity, double error,
                       uint32_t expansion, unsigned flags, uint64_t seed)
{
    bk_scalable *f = NULL;
    stage *first = NULL;
    int rc;

    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (capacity == 0) return BK_ECAPACITY;
    if (bk__check_fpr(error) != BK_OK) return BK_EFPR;
    if (expansion == 0) return BK_EPARAM;
    if (flags & ~(BK_SCALABLE_NONSCALING | BK_SCALABLE_BOUNDED))
        return BK_EPARAM;

    f = bk__calloc(1, sizeof(*f));
    if (f == NULL) { rc = BK_ENOMEM; goto fail; }
    bk__object_init(&f->obj, &scalable_ops);
    f->max_stages = (flags & BK_SCALABLE_NONSCALING) ? 1 : BK_SCALABLE_MAX_STAGES;
    f->seed = seed;
    f->capacity = capacity;
    f->error = error;
    f->first_fpr = (flags & BK_SCALABLE_BOUNDED)
                       ? error * (1.0 - BK_SCALABLE_TIGHTENING)
                       : error;
    f->expansion = expansion;
    f->flags = flags;
    f->bytes = sizeof(*f);

    rc = stage_create(&first, f, capacity, f->first_fpr, f->bytes);
    if (rc != BK_OK) goto fail;
    f->stages[0] = first;
    f->nstages = 1;
    f->bytes += first->bytes;
    *out = f;
    return BK_OK;

fail:
    bk__free(f);
    return rc;
}

void bk_scalable_free(bk_scalable *f)
{
    if (f == NULL) return;
    for (uint32_t i = 0; i < f->nstages; i++) stage_free(f->stages[i]);
    bk__object_release(&f->obj);
    bk__free(f);
}

void bk_scalable_clear(bk_scalable *f)
{
    if (f == NULL) return;
    for (uint32_t i = 1; i < f->nstages; i++) {
        f->bytes -= f->stages[i]->bytes;
        stage_free(f->stages[i]);
        f->stages[i] = NULL;
    }
    f->nstages = 1;
    bk_blocked_clear(f->stages[0]->filter);
    f->stages[0]->items = 0;
    f->items = 0;
}

int bk_scalable_set_max_bytes(bk_scalable *f, size_t max_bytes)
{
    if (f == NULL) return BK_EINVAL;
    __atomic_store_n(&f->max_bytes, max_bytes, __ATOMIC_RELAXED);
    return BK_OK;
}

size_t bk_scalable_max_bytes(const bk_scalable *f)
{
    return load_size(&f->max_bytes);
}

int bk_scalable_set_max_stages(bk_scalable *f, uint32_t max_stages)
{
    if (f == NULL) return BK_EINVAL;
    if (max_stages == 0 || max_stages > BK_SCALABLE_MAX_STAGES) return BK_EPARAM;
    if (f->flags & BK_SCALABLE_NONSCALING) return BK_OK; /* always one */
    __atomic_store_n(&f->max_stages, max_stages, __ATOMIC_RELAXED);
    return BK_OK;
}

uint32_t bk_scalable_max_stages(const bk_scalable *f)
{
    return __atomic_load_n(&f->max_stages, __ATOMIC_RELAXED);
}

/*==========================================================================
 * API: keys
 *==========================================================================*/

int bk_scalable_add_hash(bk_scalable *f, bk_hash h)
{
    if (f == NULL) return BK_EINVAL;
    return add_hash(f, h, 1);
}

int bk_scalable_contains_hash(const bk_scalable *f, bk_hash h)
{
    if (f == NULL) return 0;
    return contains_hash(f, h);
}

int bk_scalable_add(bk_scalable *f, const void *key, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    return add_hash(f, bk__hash(key, len, f->seed), 1);
}

int bk_scalable_add_nogrow(bk_scalable *f, const void *key, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    return add_hash(f, bk__hash(key, len, f->seed), 0);
}

int bk_scalable_contains(const bk_scalable *f, const void *key, size_t len)
{
    if (f == NULL) return 0;
    return contains_hash(f, bk__hash(key, len, f->seed));
}

int64_t bk_scalable_add_batch(bk_scalable *f, const void *const *keys,
                              const size_t *lens, size_t n, int *results)
{
    int64_t added = 0;
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    for (size_t i = 0; i < n; i++) {
        int r = add_hash(f, bk__hash(keys[i], lens[i], f->seed), 1);
        if (r == 1) added++;
        if (results != NULL) results[i] = r;
    }
    return added;
}

int64_t bk_scalable_contains_batch(const bk_scalable *f,
                                   const void *const *keys, const size_t *lens,
                                   size_t n, uint8_t *results)
{
    int64_t found = 0;
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    for (size_t i = 0; i < n; i++) {
        int r = contains_hash(f, bk__hash(keys[i], lens[i], f->seed));
        found += r;
        if (results != NULL) results[i] = (uint8_t)r;
    }
    return found;
}

/*==========================================================================
 * API: statistics
 *==========================================================================*/

uint64_t bk_scalable_seed(const bk_scalable *f) { return f->seed; }
uint32_t bk_scalable_stages(const bk_scalable *f) { return load_nstages(f); }
uint64_t bk_scalable_items(const bk_scalable *f) { return bk__load64(&f->items); }
double bk_scalable_error(const bk_scalable *f) { return f->error; }
size_t bk_scalable_bytes(const bk_scalable *f) { return load_size(&f->bytes); }

uint32_t bk_scalable_expansion(const bk_scalable *f)
{
    return (f->flags & BK_SCALABLE_NONSCALING) ? 0 : f->expansion;
}

uint64_t bk_scalable_capacity(const bk_scalable *f)
{
    uint64_t total = 0;
    uint32_t n = load_nstages(f);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t c = load_stage(f, i)->capacity;
        total = total > UINT64_MAX - c ? UINT64_MAX : total + c;
    }
    return total;
}

int bk_scalable_get_stage_stats(const bk_scalable *f, uint32_t i,
                                bk_scalable_stage_stats *out)
{
    bk_blocked_stats bs;
    if (f == NULL || out == NULL) return BK_EINVAL;
    if (i >= load_nstages(f)) return BK_EPARAM;
    const stage *s = load_stage(f, i);
    int rc = bk_blocked_get_stats(s->filter, &bs);
    if (rc != BK_OK) return rc;
    memset(out, 0, sizeof(*out));
    out->capacity = s->capacity;
    out->target_fpr = s->fpr;
    out->items = __atomic_load_n(&s->items, __ATOMIC_RELAXED);
    out->bits = bs.bits;
    out->hashes = bs.hashes;
    out->fill = bs.fill;
    out->estimated_items = bs.estimated_items;
    out->fpr_now = bs.fpr_now;
    out->bytes = s->bytes;
    return BK_OK;
}

/* The statistics, and the fill of all stages together (bits set / bits). */
static int collect_stats(const bk_scalable *f, bk_scalable_stats *out,
                         double *fill)
{
    memset(out, 0, sizeof(*out));
    out->seed = f->seed;
    out->initial_capacity = f->capacity;
    out->error = f->error;
    out->expansion = bk_scalable_expansion(f);
    out->nonscaling = (f->flags & BK_SCALABLE_NONSCALING) != 0;
    out->bounded = (f->flags & BK_SCALABLE_BOUNDED) != 0;
    out->max_stages = bk_scalable_max_stages(f);
    out->max_bytes = bk_scalable_max_bytes(f);
    out->items = bk_scalable_items(f);
    out->bytes = bk_scalable_bytes(f);
    out->fpr_limit = out->nonscaling
                         ? f->first_fpr
                         : f->first_fpr / (1.0 - BK_SCALABLE_TIGHTENING);

    /* Products of (1 - p) as sums of log1p(-p): exact for tiny rates. */
    double log_miss_bound = 0.0, log_miss_now = 0.0, bits_set = 0.0;
    uint64_t bits = 0;
    uint32_t n = load_nstages(f);
    for (uint32_t i = 0; i < n; i++) {
        bk_scalable_stage_stats st;
        int rc = bk_scalable_get_stage_stats(f, i, &st);
        if (rc != BK_OK) return rc;
        out->capacity = out->capacity > UINT64_MAX - st.capacity
                            ? UINT64_MAX
                            : out->capacity + st.capacity;
        out->estimated_items += st.estimated_items;
        log_miss_bound += log1p(-st.target_fpr);
        log_miss_now += log1p(-st.fpr_now);
        bits += st.bits;
        bits_set += st.fill * (double)st.bits;
    }
    out->stages = n;
    out->fpr_bound = -expm1(log_miss_bound);
    out->fpr_now = -expm1(log_miss_now);
    *fill = bits ? bits_set / (double)bits : 0.0;
    return BK_OK;
}

int bk_scalable_get_stats(const bk_scalable *f, bk_scalable_stats *out)
{
    double fill;
    if (f == NULL || out == NULL) return BK_EINVAL;
    return collect_stats(f, out, &fill);
}

/*==========================================================================
 * The generic filter and the file format
 *
 * Image: one part per stage, each a blocked filter's part (blocked.c) whose
 * capacity, fpr and items are the stage's own; header: capacity n_0, fpr =
 * the error asked for, items, param[0] = expansion, param[1] = the stage
 * cap, param[2] = the memory cap, flags = BK_SCALABLE_* flags. Restore
 * checks that the stages follow the growth rule. Clone goes through the
 * format (filter.c); merge is stage by stage and needs identical stages.
 *==========================================================================*/

BK__FAMILY_CASTS(scalable, scalable_ops)

static int ops_create(const bk_filter_config *cfg, void **out)
{
    bk_scalable *f;
    uint32_t expansion = cfg->expansion ? cfg->expansion
                                        : BK_SCALABLE_DEFAULT_EXPANSION;
    /* The generic constructor keeps the compound rate under the rate asked
     * for (BK_SCALABLE_BOUNDED): a filter answers for the fpr it was given. */
    unsigned flags = BK_SCALABLE_BOUNDED | (cfg->nonscaling ? BK_SCALABLE_NONSCALING : 0);
    int rc = bk_scalable_create(&f, cfg->capacity, cfg->fpr, expansion, flags,
                                cfg->seed);
    if (rc == BK_OK) *out = f;
    return rc;
}

static int64_t ops_contains_batch(const void *f, const void *const *keys,
                                  const size_t *lens, size_t n,
                                  uint8_t *results)
{
    return bk_scalable_contains_batch(f, keys, lens, n, results);
}

static void ops_clear(void *f) { bk_scalable_clear(f); }
static int ops_add(void *f, bk_hash h) { return add_hash(f, h, 1); }
static int ops_contains(const void *f, bk_hash h) { return contains_hash(f, h); }
static uint64_t ops_seed(const void *f) { return ((const bk_scalable *)f)->seed; }
static void ops_destroy(void *f) { bk_scalable_free(f); }

static int ops_info(const void *vf, bk_filter_info *out)
{
    bk_scalable_stats st;
    double fill;
    int rc = collect_stats(vf, &st, &fill);
    if (rc != BK_OK) return rc;
    out->seed = st.seed;
    out->capacity = st.capacity;
    out->target_fpr = st.error;
    out->items = st.items;
    out->estimated_items = st.estimated_items;
    out->fpr_now = st.fpr_now;
    out->fpr_at_capacity = st.fpr_bound;
    out->fill = fill;
    out->bytes = st.bytes;
    out->parts = st.stages;
    return BK_OK;
}

static uint32_t ops_nparts(const void *f) { return load_nstages(f); }

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_scalable *f = vf;
    if (img->nparts != load_nstages(f)) return BK_EINVAL;
    img->seed = f->seed;
    img->capacity = f->capacity;
    img->fpr = f->error;
    img->items = bk__load64(&f->items);
    img->param[0] = f->expansion;
    img->param[1] = f->max_stages;
    img->param[2] = f->max_bytes;
    img->flags = f->flags;
    for (uint32_t i = 0; i < img->nparts; i++) {
        const stage *st = load_stage(f, i);
        bk__part *p = &img->parts[i];
        bk__blocked_describe_part(st->filter, p);
        p->capacity = st->capacity;
        p->fpr = st->fpr;
        p->items = __atomic_load_n(&st->items, __ATOMIC_RELAXED);
    }
    return BK_OK;
}

/* Stage rates follow p_i = p_0 * 0.5^i: equal up to rounding of the
 * multiplications, which may differ in the last bits between machines. */
static int same_rate(double a, double b)
{
    return fabs(a - b) <= 1e-12 * fabs(b);
}

static int ops_restore(const bk__image *img, void **out)
{
    bk_scalable *f = NULL;
    int rc = BK_ECORRUPT;
    if (img->nparts == 0 || img->nparts > BK_SCALABLE_MAX_STAGES) return BK_ECORRUPT;
    if (img->capacity == 0 || !(img->fpr > 0.0 && img->fpr < 1.0)) return BK_ECORRUPT;
    if (img->param[0] == 0 || img->param[0] > UINT32_MAX) return BK_ECORRUPT;
    if (img->param[1] == 0 || img->param[1] > BK_SCALABLE_MAX_STAGES ||
        img->nparts > img->param[1] || img->param[2] > SIZE_MAX)
        return BK_ECORRUPT;
    if (img->flags & ~(uint64_t)(BK_SCALABLE_NONSCALING | BK_SCALABLE_BOUNDED))
        return BK_ECORRUPT;
    if ((img->flags & BK_SCALABLE_NONSCALING) && img->param[1] != 1) return BK_ECORRUPT;

    f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &scalable_ops);
    f->seed = img->seed;
    f->capacity = img->capacity;
    f->error = img->fpr;
    f->first_fpr = (img->flags & BK_SCALABLE_BOUNDED)
                       ? img->fpr * (1.0 - BK_SCALABLE_TIGHTENING)
                       : img->fpr;
    f->expansion = (uint32_t)img->param[0];
    f->max_stages = (uint32_t)img->param[1];
    f->max_bytes = (size_t)img->param[2];
    f->flags = (unsigned)img->flags;
    f->items = img->items;
    f->bytes = sizeof(*f);

    uint64_t items = 0;
    for (uint32_t i = 0; i < img->nparts; i++) {
        const bk__part *p = &img->parts[i];
        uint64_t capacity;
        double fpr;
        rc = next_params(f, i ? f->stages[i - 1] : NULL, &capacity, &fpr);
        if (rc != BK_OK || p->capacity != capacity || !same_rate(p->fpr, fpr)) {
            rc = BK_ECORRUPT;
            goto fail;
        }
        stage *st = bk__calloc(1, sizeof(*st));
        if (st == NULL) { rc = BK_ENOMEM; goto fail; }
        rc = bk__blocked_restore_part(p, img->seed, &st->filter);
        if (rc != BK_OK) {
            bk__free(st);
            goto fail;
        }
        st->capacity = p->capacity;
        st->fpr = p->fpr;
        st->items = p->items;
        st->bytes = stage_bytes(p->m);
        f->stages[i] = st;
        f->nstages = i + 1;
        f->bytes += st->bytes;
        items += p->items;
    }
    if (items != img->items) { rc = BK_ECORRUPT; goto fail; }
    *out = f;
    return BK_OK;

fail:
    bk_scalable_free(f);
    return rc;
}

static int ops_incompatibility(const void *va, const void *vb, char *buf, size_t cap)
{
    const bk_scalable *a = va, *b = vb;
    uint32_t na = load_nstages(a), nb = load_nstages(b);
    if (a->seed != b->seed) {
        snprintf(buf, cap, "seeds differ: %llu vs %llu",
                 (unsigned long long)a->seed, (unsigned long long)b->seed);
        return 1;
    }
    if (na != nb) {
        snprintf(buf, cap, "stage counts differ: %u vs %u", na, nb);
        return 1;
    }
    for (uint32_t i = 0; i < na; i++) {
        const bk_blocked *x = load_stage(a, i)->filter, *y = load_stage(b, i)->filter;
        if (bk_blocked_bits(x) != bk_blocked_bits(y) ||
            bk_blocked_hashes(x) != bk_blocked_hashes(y)) {
            snprintf(buf, cap, "stage %u differs: %llu bits, %u hashes vs %llu bits, %u hashes",
                     i, (unsigned long long)bk_blocked_bits(x), bk_blocked_hashes(x),
                     (unsigned long long)bk_blocked_bits(y), bk_blocked_hashes(y));
            return 1;
        }
    }
    return 0;
}

/* Stage by stage; a stage's count becomes its cardinality estimate. */
static int ops_merge(void *vd, const void *vs, int op)
{
    bk_scalable *d = vd;
    const bk_scalable *s = vs;
    char why[8];
    if (ops_incompatibility(d, s, why, sizeof(why))) return BK_EINCOMPAT;
    uint64_t items = 0;
    for (uint32_t i = 0; i < d->nstages; i++) {
        stage *x = d->stages[i];
        const bk_blocked *y = load_stage(s, i)->filter;
        int rc = op ? bk_blocked_intersect(x->filter, y) : bk_blocked_union(x->filter, y);
        if (rc != BK_OK) return rc;
        x->items = bk_blocked_items(x->filter);
        items += x->items;
    }
    d->items = items;
    return BK_OK;
}

static const bk__family_ops scalable_ops = {
    .family = BK_FAMILY_SCALABLE,
    .name = "scalable",
    .add = ops_add,
    .contains = ops_contains,
    .remove = NULL,
    .count = NULL,
    .add_batch = NULL, /* results cannot carry BK_EFULL / BK_ELIMIT: a loop */
    .contains_batch = ops_contains_batch,
    .lockfree_add = 1,
    .seed = ops_seed,
    .destroy = ops_destroy,
    .info = ops_info,
    .create = ops_create,
    .clone = NULL, /* through the format: filter.c */
    .clear = ops_clear,
    .merge = ops_merge,
    .incompatibility = ops_incompatibility,
    .nparts = ops_nparts,
    .describe = ops_describe,
    .restore = ops_restore,
};

const bk__family_ops *const bk__scalable_family = &scalable_ops;
