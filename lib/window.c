/*
 * window.c - the time-window filter: "was this key added within the last
 * W?", for streams that never end.
 *
 * Structure
 *   A ring of g >= 2 generations, each a cache-blocked filter
 *   (lib/blocked.c) hashing with the window filter's seed, so a key is
 *   hashed once for all of them. One generation is current: it takes the
 *   adds. Time is the caller's (any uint64_t unit, passed in; no hidden
 *   clock) and is cut into slices of
 *       s = ceil(W / (g - 1)).
 *   Each generation records the time its slice started; the current one's
 *   is slice_start. When time reaches slice_start + s the oldest
 *   generation is cleared and becomes current, with slice_start advanced
 *   by s (the slice grid is kept, so a jump of d slices rotates d times,
 *   clearing min(d, g) generations: a jump of g slices or more clears them
 *   all, in O(size) whatever the jump). In count mode the clock is the
 *   number of insertions made and W = N: "the last N insertions".
 *
 * Which generations are live
 *   At time t with d = floor((t - slice_start) / s) rotations due, the
 *   generations of age a < g - d are live (age 0 is current). Adds advance
 *   the clock first, so d = 0 and all g are live; lookups do not move the
 *   clock (they are readers) and skip the d oldest instead, which gives the
 *   same answer the advance would.
 *
 * The guarantee
 *   A key added at time t goes into the current generation G, whose slice
 *   started at c with c <= t < c + s. G stays until it comes round again,
 *   at the g-th rotation after its start, at time c + g s at the earliest
 *   (rotations by time happen at c + s, c + 2s, ...). So the key is found
 *   at every t' < c + g s, and c + g s > t - s + g s = t + (g - 1) s >= t + W:
 *       found at every t' < t + W   (indeed < t + (g - 1) s).
 *   G is cleared at c + g s <= t + g s, so the key is gone (answers are
 *   then false positives only) from
 *       t' >= t + g s  = t + W + s when (g - 1) divides W.
 *   In count mode insertion number i (0-based) is "added at time i" and a
 *   lookup after c insertions is at time c: a key among the last N
 *   insertions (i >= c - N) is always found, and one older than g s
 *   insertions never is (but for false positives).
 *
 * Early rotation
 *   A generation is sized for its share of a window, n_g = ceil(n s / W)
 *   (about n / (g - 1)) distinct keys. If it receives them before its slice
 *   ends (the stream is faster than the filter was sized for), the next add
 *   rotates early and starts a new slice grid at that time: the
 *   false-positive rate stays within target, but the time guarantee above
 *   becomes "found until g - 1 further generations have each ended, by
 *   their slice running out or by receiving n_g new keys". When every
 *   rotation is early that is at least (g - 1) n_g >= n later new keys: the
 *   filter degrades into a "last n keys" window, never into a full one.
 *   stats.early_rotations counts these. Count mode never rotates early (a
 *   generation takes s = n_g insertions).
 *
 * False positives and memory
 *   A lookup checks up to g generations, each holding at most n_g keys
 *   and sized for rate q = 1 - (1 - p)^(1/g), so the compound rate is at
 *   most 1 - (1 - q)^g = p even when every generation is full (which is the
 *   steady state of a stream at the sized rate: g - 1 full generations
 *   plus the current one filling). The memory is g n_g keys at rate q:
 *   about g / (g - 1) * log2(g / p) / log2(1 / p) times a plain filter
 *   sized for one window (n keys at p). Measured with the blocked sizing at
 *   p = 1% (test_window.c, test_memory_tradeoff): 2.33x for g = 2, 1.90x
 *   for g = 3, 1.78x for g = 4, 1.73x for g = 6 (the minimum), 1.74x for
 *   g = 8, 1.84x for g = 16; in exchange keys outlive the window by at most
 *   one slice, W / (g - 1). g = 4..8 is the useful range; the default is 4.
 *
 * Time going backwards
 *   A time earlier than the latest seen is taken as the latest seen: the
 *   clock never goes back and nothing expires early or late because of it.
 *
 * Concurrency
 *   Adds rotate, and a rotation clears a generation in place, so adds,
 *   advance and clear are writers needing external serialisation, and a
 *   lookup concurrent with a writer needs the caller's lock. Lookups and
 *   statistics only read and may run concurrently with each other.
 *
 * What it cannot do
 *   Delete a key before its time, or count keys exactly (items sums the
 *   generations' new-key counts: a key re-added in two generations counts
 *   twice). Memory is fixed at creation.
 */
#include <math.h>   /* log1p, expm1 */
#include <string.h> /* memset */

#include "family_util.h"
#include "hash.h"

/*==========================================================================
 * Types
 *==========================================================================*/

/* Allowance for a bk_blocked handle, whose size is private to blocked.c. */
#define BLOCKED_HANDLE_BYTES 128

struct bk_window {
    bk__object obj;          /* first: a bk_window is also a bk_filter */
    bk_blocked **gens;       /* g generations, a ring */
    uint64_t *gen_start;     /* start of each generation's slice */
    uint32_t g;
    uint32_t current;        /* index of the current generation */
    int mode;                /* BK_WINDOW_TIME or BK_WINDOW_COUNT */
    uint64_t window;         /* W */
    uint64_t slice;          /* s = ceil(W / (g - 1)) */
    uint64_t items_per_window; /* n */
    uint64_t gen_capacity;   /* n_g = ceil(n s / W), about n / (g - 1) */
    double target_fpr;       /* p */
    double gen_fpr;          /* q = 1 - (1 - p)^(1/g) */
    uint64_t seed;
    uint64_t now;            /* latest time seen; count mode: insertions */
    uint64_t slice_start;    /* == gen_start[current] */
    uint64_t rotations;
    uint64_t early_rotations;
    size_t bytes;
};

static const bk__family_ops window_ops; /* at the end of this file */

/*==========================================================================
 * Internals
 *==========================================================================*/

static inline uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* Index of the generation of age a (0 = current). */
static inline uint32_t gen_index(const bk_window *f, uint32_t age)
{
    return (f->current + f->g - age) % f->g;
}

/* The time a call made at `now` acts at: never before the latest seen;
 * in count mode always the insertion clock. */
static inline uint64_t effective_time(const bk_window *f, uint64_t now)
{
    if (f->mode == BK_WINDOW_COUNT || now < f->now) return f->now;
    return now;
}

/* Rotations due at time t (>= slice_start). */
static inline uint64_t rotations_due(const bk_window *f, uint64_t t)
{
    return (t - f->slice_start) / f->slice;
}

/* Live generations at time t: all but the ones advancing would clear. */
static inline uint32_t live_at(const bk_window *f, uint64_t t)
{
    uint64_t due = rotations_due(f, t);
    return due >= f->g ? 0 : f->g - (uint32_t)due;
}

/* Make the oldest generation current, empty, starting at `start`. */
static void rotate(bk_window *f, uint64_t start)
{
    f->current = (f->current + 1) % f->g;
    bk_blocked_clear(f->gens[f->current]);
    f->gen_start[f->current] = start;
    f->slice_start = start;
    f->rotations++;
}

/* Move the clock to t; returns the generations cleared. */
static int advance_to(bk_window *f, uint64_t t)
{
    f->now = t;
    uint64_t due = rotations_due(f, t);
    if (due == 0) return 0;
    uint32_t cleared = due >= f->g ? f->g : (uint32_t)due;
    uint64_t base = f->slice_start;
    /* Generations skipped by a jump are cleared once each; the last one
     * cleared is current, at base + due * s (no overflow: <= t). The
     * others get the starts of the slices they stand for. */
    for (uint32_t j = 0; j < cleared; j++)
        rotate(f, base + (due - (cleared - 1 - j)) * f->slice);
    return (int)cleared;
}

static int contains_at(const bk_window *f, bk_hash h, uint64_t t)
{
    uint32_t live = live_at(f, t);
    for (uint32_t age = 0; age < live; age++)
        if (bk_blocked_contains_hash(f->gens[gen_index(f, age)], h)) return 1;
    return 0;
}

static int add_at(bk_window *f, bk_hash h, uint64_t now)
{
    uint64_t t = effective_time(f, now);
    advance_to(f, t);
    bk_blocked *cur = f->gens[f->current];
    if (f->mode == BK_WINDOW_TIME && bk_blocked_items(cur) >= f->gen_capacity) {
        rotate(f, t); /* full before its slice ended: a new grid from t */
        f->early_rotations++;
        cur = f->gens[f->current];
    }
    int found = contains_at(f, h, t);
    if (f->mode == BK_WINDOW_COUNT) f->now++;
    /* Written even when found elsewhere: re-adding refreshes the key. When
     * the current generation has it already, its bits are all set. */
    if (!found || !bk_blocked_contains_hash(cur, h)) bk_blocked_add_hash(cur, h);
    return !found;
}

static size_t generation_bytes(const bk_blocked *b)
{
    return (size_t)(bk_blocked_bits(b) / 8) + BK_CACHE_LINE + sizeof(void *) +
           BLOCKED_HANDLE_BYTES + sizeof(bk_blocked *) + sizeof(uint64_t);
}

static int create_window(bk_window **out, int mode, uint64_t items,
                         double fpr, uint64_t window, uint32_t generations,
                         uint64_t now, uint64_t seed)
{
    bk_window *f = NULL;
    int rc;

    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (items == 0) return BK_ECAPACITY;
    if (bk__check_fpr(fpr) != BK_OK) return BK_EFPR;
    if (generations == 0) generations = BK_WINDOW_DEFAULT_GENERATIONS;
    if (window == 0 || generations < BK_WINDOW_MIN_GENERATIONS ||
        generations > BK_WINDOW_MAX_GENERATIONS)
        return BK_EPARAM;

    f = bk__calloc(1, sizeof(*f));
    if (f == NULL) { rc = BK_ENOMEM; goto fail; }
    bk__object_init(&f->obj, &window_ops);
    f->g = generations;
    f->mode = mode;
    f->window = window;
    f->slice = ceil_div(window, generations - 1);
    f->items_per_window = items;
    /* A slice's share of a window, n s / W (n / (g - 1) before rounding s
     * up): a stream at the sized rate then never fills a generation early. */
    unsigned __int128 share = (unsigned __int128)items * f->slice;
    f->gen_capacity = (uint64_t)(share / window + (share % window != 0));
    f->target_fpr = fpr;
    f->gen_fpr = -expm1(log1p(-fpr) / generations);
    f->seed = seed;
    f->now = now;
    f->slice_start = now;
    f->bytes = sizeof(*f);

    f->gens = bk__calloc(generations, sizeof(*f->gens));
    f->gen_start = bk__calloc(generations, sizeof(*f->gen_start));
    if (f->gens == NULL || f->gen_start == NULL) { rc = BK_ENOMEM; goto fail; }
    for (uint32_t i = 0; i < generations; i++) {
        rc = bk_blocked_create(&f->gens[i], f->gen_capacity, f->gen_fpr, seed);
        if (rc != BK_OK) goto fail;
        f->gen_start[i] = now;
        f->bytes += generation_bytes(f->gens[i]);
    }
    *out = f;
    return BK_OK;

fail:
    bk_window_free(f);
    return rc;
}

/*==========================================================================
 * API: life cycle
 *==========================================================================*/

int bk_window_create(bk_window **out, uint64_t items_per_window, double fpr,
                     uint64_t window, uint32_t generations, uint64_t now,
                     uint64_t seed)
{
    return create_window(out, BK_WINDOW_TIME, items_per_window, fpr, window,
                         generations, now, seed);
}

int bk_window_create_count(bk_window **out, uint64_t window_insertions,
                           double fpr, uint32_t generations, uint64_t seed)
{
    return create_window(out, BK_WINDOW_COUNT, window_insertions, fpr,
                         window_insertions, generations, 0, seed);
}

void bk_window_free(bk_window *f)
{
    if (f == NULL) return;
    if (f->gens != NULL)
        for (uint32_t i = 0; i < f->g; i++) bk_blocked_free(f->gens[i]);
    bk__free(f->gens);
    bk__free(f->gen_start);
    bk__object_release(&f->obj);
    bk__free(f);
}

void bk_window_clear(bk_window *f)
{
    if (f == NULL) return;
    for (uint32_t i = 0; i < f->g; i++) {
        bk_blocked_clear(f->gens[i]);
        f->gen_start[i] = f->now;
    }
    f->slice_start = f->now;
}

int bk_window_advance(bk_window *f, uint64_t now)
{
    if (f == NULL) return BK_EINVAL;
    if (f->mode == BK_WINDOW_COUNT) return 0;
    return advance_to(f, effective_time(f, now));
}

/*==========================================================================
 * API: keys
 *==========================================================================*/

int bk_window_add_hash(bk_window *f, bk_hash h, uint64_t now)
{
    if (f == NULL) return BK_EINVAL;
    return add_at(f, h, now);
}

int bk_window_contains_hash(const bk_window *f, bk_hash h, uint64_t now)
{
    if (f == NULL) return 0;
    return contains_at(f, h, effective_time(f, now));
}

int bk_window_add(bk_window *f, const void *key, size_t len, uint64_t now)
{
    if (f == NULL) return BK_EINVAL;
    return add_at(f, bk__hash(key, len, f->seed), now);
}

int bk_window_contains(const bk_window *f, const void *key, size_t len,
                       uint64_t now)
{
    if (f == NULL) return 0;
    return contains_at(f, bk__hash(key, len, f->seed), effective_time(f, now));
}

int64_t bk_window_add_batch(bk_window *f, const void *const *keys,
                            const size_t *lens, size_t n, uint64_t now,
                            uint8_t *results)
{
    int64_t added = 0;
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    for (size_t i = 0; i < n; i++) {
        int r = add_at(f, bk__hash(keys[i], lens[i], f->seed), now);
        added += r;
        if (results != NULL) results[i] = (uint8_t)r;
    }
    return added;
}

int64_t bk_window_contains_batch(const bk_window *f, const void *const *keys,
                                 const size_t *lens, size_t n, uint64_t now,
                                 uint8_t *results)
{
    int64_t found = 0;
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    uint64_t t = effective_time(f, now);
    for (size_t i = 0; i < n; i++) {
        int r = contains_at(f, bk__hash(keys[i], lens[i], f->seed), t);
        found += r;
        if (results != NULL) results[i] = (uint8_t)r;
    }
    return found;
}

/*==========================================================================
 * API: statistics
 *==========================================================================*/

uint64_t bk_window_seed(const bk_window *f) { return f->seed; }
uint32_t bk_window_generations(const bk_window *f) { return f->g; }
uint64_t bk_window_window(const bk_window *f) { return f->window; }
uint64_t bk_window_slice(const bk_window *f) { return f->slice; }
uint64_t bk_window_now(const bk_window *f) { return f->now; }
int bk_window_mode(const bk_window *f) { return f->mode; }
size_t bk_window_bytes(const bk_window *f) { return f->bytes; }

int bk_window_get_generation_stats(const bk_window *f, uint32_t age,
                                   bk_window_generation_stats *out)
{
    bk_blocked_stats bs;
    if (f == NULL || out == NULL) return BK_EINVAL;
    if (age >= f->g) return BK_EPARAM;
    const bk_blocked *b = f->gens[gen_index(f, age)];
    int rc = bk_blocked_get_stats(b, &bs);
    if (rc != BK_OK) return rc;
    memset(out, 0, sizeof(*out));
    out->start = f->gen_start[gen_index(f, age)];
    out->live = age < live_at(f, f->now);
    out->items = bs.items;
    out->bits = bs.bits;
    out->hashes = bs.hashes;
    out->fill = bs.fill;
    out->estimated_items = bs.estimated_items;
    out->fpr_now = bs.fpr_now;
    out->bytes = generation_bytes(b);
    return BK_OK;
}

/* The statistics, and the fill of the live generations together. */
static int collect_stats(const bk_window *f, bk_window_stats *out,
                         double *fill)
{
    memset(out, 0, sizeof(*out));
    out->mode = f->mode;
    out->generations = f->g;
    out->window = f->window;
    out->slice = f->slice;
    out->items_per_window = f->items_per_window;
    out->generation_capacity = f->gen_capacity;
    out->target_fpr = f->target_fpr;
    out->generation_fpr = f->gen_fpr;
    out->seed = f->seed;
    out->now = f->now;
    out->slice_start = f->slice_start;
    out->rotations = f->rotations;
    out->early_rotations = f->early_rotations;
    out->fpr_bound = -expm1(f->g * log1p(-f->gen_fpr));
    out->bytes = f->bytes;

    double log_miss = 0.0, bits_set = 0.0;
    uint64_t bits = 0;
    for (uint32_t age = 0; age < f->g; age++) {
        bk_window_generation_stats gs;
        int rc = bk_window_get_generation_stats(f, age, &gs);
        if (rc != BK_OK) return rc;
        if (!gs.live) continue;
        out->items += gs.items;
        out->estimated_items += gs.estimated_items;
        log_miss += log1p(-gs.fpr_now);
        bits += gs.bits;
        bits_set += gs.fill * (double)gs.bits;
    }
    out->fpr_now = 0.0 - expm1(log_miss); /* +0, not -0, when empty */
    *fill = bits ? bits_set / (double)bits : 0.0;
    return BK_OK;
}

int bk_window_get_stats(const bk_window *f, bk_window_stats *out)
{
    double fill;
    if (f == NULL || out == NULL) return BK_EINVAL;
    return collect_stats(f, out, &fill);
}

/*==========================================================================
 * The generic filter
 *
 * add and contains act at the filter's clock. The file format is below
 * (ops_describe); clone goes through it (filter.c); no merge.
 *==========================================================================*/

BK__FAMILY_CASTS(window, window_ops)

/* From the generic config: capacity keys per window; window_by_count
 * selects count mode; a time window's clock starts at 0. */
static int ops_create(const bk_filter_config *cfg, void **out)
{
    bk_window *f;
    int rc = cfg->window_by_count
                 ? bk_window_create_count(&f, cfg->window, cfg->fpr,
                                          cfg->generations, cfg->seed)
                 : bk_window_create(&f, cfg->capacity, cfg->fpr, cfg->window,
                                    cfg->generations, 0, cfg->seed);
    if (rc == BK_OK) *out = f;
    return rc;
}

static int64_t ops_add_batch(void *vf, const void *const *keys,
                             const size_t *lens, size_t n, uint8_t *results)
{
    bk_window *f = vf;
    return bk_window_add_batch(f, keys, lens, n, f->now, results);
}

static int64_t ops_contains_batch(const void *vf, const void *const *keys,
                                  const size_t *lens, size_t n,
                                  uint8_t *results)
{
    const bk_window *f = vf;
    return bk_window_contains_batch(f, keys, lens, n, f->now, results);
}

static void ops_clear(void *f) { bk_window_clear(f); }

static int ops_add(void *vf, bk_hash h)
{
    bk_window *f = vf;
    return add_at(f, h, f->now);
}

static int ops_contains(const void *vf, bk_hash h)
{
    const bk_window *f = vf;
    return contains_at(f, h, f->now);
}

BK__OPS_SEED_DESTROY(window)

static int ops_info(const void *vf, bk_filter_info *out)
{
    bk_window_stats st;
    double fill;
    int rc = collect_stats(vf, &st, &fill);
    if (rc != BK_OK) return rc;
    out->seed = st.seed;
    out->capacity = st.items_per_window;
    out->target_fpr = st.target_fpr;
    out->items = st.items;
    out->estimated_items = st.estimated_items;
    out->fpr_now = st.fpr_now;
    out->fpr_at_capacity = st.fpr_bound;
    out->fill = fill;
    out->bytes = st.bytes;
    out->parts = st.generations;
    return BK_OK;
}

/* Image: parts 0 .. g-1 are the generations (blocked filters, in ring
 * order), part g is the ring's start times (g 64-bit little-endian
 * integers). Header: capacity = items per window, fpr = the target,
 * items = the sum of the generations' counts, param[0] = W, param[1] = the
 * clock, param[2] = rotations, param[3] = early rotations, flags = mode |
 * current generation << 8. Slice, generation capacity and rate are
 * recomputed as at creation and checked against the parts. */
static uint32_t ops_nparts(const void *vf)
{
    return ((const bk_window *)vf)->g + 1;
}

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_window *f = vf;
    if (img->nparts != f->g + 1) return BK_EINVAL;
    img->seed = f->seed;
    img->capacity = f->items_per_window;
    img->fpr = f->target_fpr;
    img->items = 0;
    img->param[0] = f->window;
    img->param[1] = f->now;
    img->param[2] = f->rotations;
    img->param[3] = f->early_rotations;
    img->flags = (uint64_t)f->mode | ((uint64_t)f->current << 8);
    for (uint32_t i = 0; i < f->g; i++) {
        bk__blocked_describe_part(f->gens[i], &img->parts[i]);
        img->items += img->parts[i].items;
    }
    bk__part *starts = &img->parts[f->g];
    starts->m = f->g;
    starts->data = f->gen_start;
    starts->length = (uint64_t)f->g * sizeof(uint64_t);
    return BK_OK;
}

static int ops_restore(const bk__image *img, void **out)
{
    bk_window *f = NULL;
    int rc = BK_ECORRUPT;
    uint32_t g = img->nparts - 1;
    int mode = (int)(img->flags & 0xff);
    uint64_t current = img->flags >> 8;
    if (img->nparts < 1 + BK_WINDOW_MIN_GENERATIONS ||
        img->nparts > 1 + BK_WINDOW_MAX_GENERATIONS)
        return BK_ECORRUPT;
    if ((mode != BK_WINDOW_TIME && mode != BK_WINDOW_COUNT) || current >= g)
        return BK_ECORRUPT;
    if (img->capacity == 0 || img->param[0] == 0 || !(img->fpr > 0.0 && img->fpr < 1.0))
        return BK_ECORRUPT;
    if (mode == BK_WINDOW_COUNT && img->param[0] != img->capacity) return BK_ECORRUPT;
    const bk__part *starts = &img->parts[g];
    if (starts->m != g || starts->length != (uint64_t)g * sizeof(uint64_t))
        return BK_ECORRUPT;

    f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &window_ops);
    f->g = g;
    f->mode = mode;
    f->window = img->param[0];
    f->slice = ceil_div(f->window, g - 1);
    f->items_per_window = img->capacity;
    unsigned __int128 share = (unsigned __int128)f->items_per_window * f->slice;
    f->gen_capacity = (uint64_t)(share / f->window + (share % f->window != 0));
    f->target_fpr = img->fpr;
    f->gen_fpr = img->parts[0].fpr; /* checked against the target below */
    f->seed = img->seed;
    f->now = img->param[1];
    f->current = (uint32_t)current;
    f->rotations = img->param[2];
    f->early_rotations = img->param[3];
    f->bytes = sizeof(*f);
    f->gens = bk__calloc(g, sizeof(*f->gens));
    f->gen_start = bk__calloc(g, sizeof(*f->gen_start));
    if (f->gens == NULL || f->gen_start == NULL) { rc = BK_ENOMEM; goto fail; }
    memcpy(f->gen_start, starts->data, (size_t)starts->length);
    double want_fpr = -expm1(log1p(-f->target_fpr) / g);
    if (!(fabs(f->gen_fpr - want_fpr) <= 1e-12 * want_fpr)) { rc = BK_ECORRUPT; goto fail; }
    for (uint32_t i = 0; i < g; i++) {
        const bk__part *p = &img->parts[i];
        if (p->capacity != f->gen_capacity || p->fpr != f->gen_fpr ||
            f->gen_start[i] > f->now) {
            rc = BK_ECORRUPT;
            goto fail;
        }
        rc = bk__blocked_restore_part(p, f->seed, 0, &f->gens[i]);
        if (rc != BK_OK) goto fail;
        f->bytes += generation_bytes(f->gens[i]);
    }
    f->slice_start = f->gen_start[f->current];
    *out = f;
    return BK_OK;

fail:
    bk_window_free(f);
    return rc;
}


/* The handle, the ring and the slice starts, and each generation (a
 * blocked filter). */
static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_window *f = vf;
    visit(ctx, f, sizeof(*f));
    visit(ctx, f->gens, f->g * sizeof(*f->gens));
    visit(ctx, f->gen_start, f->g * sizeof(*f->gen_start));
    for (uint32_t i = 0; i < f->g; i++) bk__blocked_allocations(f->gens[i], visit, ctx);
}

static const bk__family_ops window_ops = {
    .family = BK_FAMILY_WINDOW,
    .name = "window",
    BK__OPS_STANDARD,
    .add_batch = ops_add_batch, .contains_batch = ops_contains_batch, .clear = ops_clear,
    /* lockfree_add 0: adds rotate, so writers need serialising */
    /* no clone: one goes through the file format (filter.c) */
};

const bk__family_ops *const bk__window_family = &window_ops;
