/*
 * cmd_bloom.c - BF.*: RedisBloom's Bloom filter commands, and BF.MERGE.
 *
 * A BF key holds one filter of one of three families:
 * - bk_growable (lib/growable.c), when BF.RESERVE or BF.INSERT says
 *   GROWABLE (ours), or when an add creates the key with the
 *   default capacity (no CAPACITY, NONSCALING or other EXPANSION than 2)
 *   at an error rate the growable filter serves for at least
 *   BF_GROWABLE_MIN_REACH doublings (1%, RedisBloom's default, gives 26).
 *   Such a key was never sized by its user and is the one that grows: a
 *   growable filter answers every lookup from one cache line however often
 *   it doubled, where a chain grown from 100 keys to 1e7 reads 17. It
 *   keeps its compound rate under the error asked, like the chain. BF.INFO
 *   reports Capacity and Number of filters as RedisBloom's chain would have
 *   them for the same items; Size is the bytes it holds. The setting
 *   bkc_defaults_in_force.bf_growable (server --bf-growable, module
 *   BF_GROWABLE) turns this off. An add that created its key is logged as
 *   the BF.INSERT that makes the same filter whatever that setting says
 *   (wrote_created).
 * - bk_scalable, every other key (BF.RESERVE, CAPACITY, NONSCALING, other
 *   expansions, lower rates): a chain of stages, stage i sized for
 *   capacity * expansion^i items, the compound rate under the error asked
 *   for (lib/scalable.c has the rate schedule); stage 0 costs what
 *   RedisBloom's first filter does, to the byte.
 * - bk_rbloom (lib/rbloom.c), RedisBloom's own chain, bit for bit: a key
 *   taken over from RedisBloom (its DUMP payload, its SCANDUMP chunks or
 *   its RDB value), which keeps answering exactly as it did there.
 * RedisBloom's defaults (capacity 100, error 0.01, expansion 2) apply when
 * an add creates the key without options. BF.ADD answers 1 only when the
 * filter did not have the key, so the filter's item count is BF.CARD.
 *
 * Locking: lookups open the key READ. Adds open it WRITE: a scalable add
 * may grow the chain, and growth must be checked against the host's memory
 * budget (bk_scalable_set_max_bytes is exclusive) and reported (resized).
 * Adds that find the key already there first try the shared path
 * (add_shared, below), opened ADD: bk_scalable_add_nogrow on a chain,
 * bk_growable_add_nogrow on a growable filter; what they refuse (a new
 * stage, a doubling, a stashed entry) goes through the exclusive path.
 * Both hosts hold the key alone for ADD and put the filters they store
 * in the library's single-writer mode (bkc_value_single_writer), so these
 * adds use plain stores and the growable filter takes no lock of its own;
 * in the concurrent mode they would also be safe with each other and with
 * lookups. Whole-value reads (DUMP, merge sources) open WHOLE, so no
 * shared add runs while they copy.
 *
 * Memory: a new filter is sized with bk_scalable_estimate_bytes
 * before anything is allocated and refused when it does not fit; growth is
 * capped at the budget through bk_scalable_set_max_bytes for the duration
 * of one command, so an add that would outgrow it answers an error and
 * changes nothing.
 */
#include <stdio.h>  /* snprintf */
#include <stdlib.h>
#include <string.h>

#include "cmd_internal.h"

#define ERR_BAD_ERROR "ERR bad error rate"
#define ERR_ERROR_RANGE "ERR (0 < error rate range < 1) "
#define ERR_BAD_CAPACITY "ERR bad capacity"
#define ERR_CAPACITY_ZERO "ERR (capacity should be larger than 0)"
#define ERR_BAD_EXPANSION "ERR bad expansion"
#define ERR_EXPANSION_ZERO "ERR expansion should be greater or equal to 1"
#define ERR_NONSCALING_EXPANSION "ERR nonscaling filters cannot expand"
#define ERR_GROWABLE_NONSCALING "ERR growable filters always grow: GROWABLE takes no NONSCALING"
#define ERR_GROWABLE_EXPANSION "ERR growable filters double: GROWABLE takes EXPANSION 2 only"
#define ERR_FULL "ERR non scaling filter is full"
#define ERR_MAX_STAGES "ERR filter has reached its maximum number of sub-filters"
#define MAX_EXPANSION 32768
/* valkey-bloom's texts for its options (TIGHTENING, SEED, VALIDATESCALETO) */
#define ERR_BAD_TIGHTENING "ERR bad tightening ratio"
#define ERR_TIGHTENING_RANGE "ERR (0 < tightening ratio range < 1)"
#define ERR_GROWABLE_TIGHTENING "ERR growable filters double: GROWABLE takes no TIGHTENING"
#define ERR_BAD_SEED "ERR invalid seed"
#define ERR_SCALE_NONSCALING "ERR cannot use NONSCALING and VALIDATESCALETO options together"
#define ERR_SCALE_MEMORY "ERR provided VALIDATESCALETO causes bloom object to exceed memory limit"
#define ERR_SCALE_STAGES "ERR bloom object reached max number of filters"
#define ERR_SCALE_FPR "ERR provided VALIDATESCALETO causes false positive to degrade to 0"
#define ERR_AUTOCLEAR_GROWS                                                               \
    "ERR auto-clear filters do not grow: AUTOCLEAR takes no EXPANSION, GROWABLE, "   \
    "TIGHTENING or VALIDATESCALETO"
#define ERR_AUTOCLEAR_MERGE "ERR auto-clear filters cannot be merged"
/* valkey-bloom's SEED: 32 bytes, folded into our 64-bit seed (seed_of) */
#define SEED_BYTES 32

/* A key auto-created by an add holds a growable filter only when the rate
 * lets it double this many times: from 100 keys, 186 x 2^24 = 3e9 keys,
 * past any single key's memory here (about 28 bits per key). At 1% it
 * doubles 26 times; at 0.9%, 23 (bk_growable_reach). */
#define BF_GROWABLE_MIN_REACH 24
#define BF_GROWABLE_EXPANSION 2

/*==========================================================================
 * Options
 *==========================================================================*/

typedef struct bf_opts {
    double error;
    uint64_t capacity;
    uint32_t expansion;
    int nonscaling;
    int expansion_given;
    int capacity_given;
    int growable; /* GROWABLE (ours): a growable filter whatever the defaults */
    uint64_t seed;              /* SEED (valkey-bloom's), else BK_DEFAULT_SEED */
    double tightening;          /* TIGHTENING given (0: not given) */
    uint64_t validate_scale_to; /* VALIDATESCALETO (0: not given) */
    bkc__autoclear_opts ac;     /* AUTOCLEAR ratio [ROTATE] (ours) */
} bf_opts;

static void opts_default(bf_opts *o)
{
    o->error = bkc_defaults_in_force.bf_error_rate;
    o->capacity = bkc_defaults_in_force.bf_initial_size;
    o->expansion = bkc_defaults_in_force.bf_expansion;
    o->nonscaling = 0;
    if (o->expansion == 0) { /* bf-expansion-factor 0: NONSCALING (Redis 8) */
        o->expansion = BK_SCALABLE_DEFAULT_EXPANSION;
        o->nonscaling = 1;
    }
    o->seed = BK_DEFAULT_SEED;
    o->tightening = 0;
    o->validate_scale_to = 0;
    o->expansion_given = 0;
    o->capacity_given = 0;
    o->growable = 0;
    o->ac.ratio = 0;
    o->ac.rotate = 0;
}

/* The options' own conflicts (after parsing). Replies and returns 0. */
static int opts_valid(bkc_ctx *c, const bf_opts *o)
{
    char msg[96];
    if (!bkc__autoclear_valid(c, &o->ac)) return 0;
    if (o->ac.ratio != 0 && (o->expansion_given || o->growable || o->tightening != 0 ||
                             o->validate_scale_to)) {
        bkc__err(c, ERR_AUTOCLEAR_GROWS);
        return 0;
    }
    if (o->nonscaling && o->expansion_given) {
        bkc__err(c, ERR_NONSCALING_EXPANSION);
        return 0;
    }
    if (o->nonscaling && o->validate_scale_to) {
        bkc__err(c, ERR_SCALE_NONSCALING);
        return 0;
    }
    if (!o->growable) return 1;
    if (o->nonscaling) {
        bkc__err(c, ERR_GROWABLE_NONSCALING);
        return 0;
    }
    if (o->tightening != 0) {
        bkc__err(c, ERR_GROWABLE_TIGHTENING);
        return 0;
    }
    if (o->expansion != BF_GROWABLE_EXPANSION) {
        bkc__err(c, ERR_GROWABLE_EXPANSION);
        return 0;
    }
    if (o->error < BK_GROWABLE_MIN_FPR) {
        snprintf(msg, sizeof(msg), "ERR growable filters take error rates from %g",
                 BK_GROWABLE_MIN_FPR);
        bkc__err(c, msg);
        return 0;
    }
    return 1;
}

static int parse_error_rate(bkc_ctx *c, bkc_str s, double *out)
{
    if (!bkc_parse_double(s, out)) {
        bkc__err(c, ERR_BAD_ERROR);
        return 0;
    }
    if (!(*out > 0 && *out < 1)) {
        bkc__err(c, ERR_ERROR_RANGE);
        return 0;
    }
    return 1;
}

static int parse_capacity(bkc_ctx *c, bkc_str s, uint64_t *out)
{
    long long v;
    if (!bkc_parse_ll(s, &v)) {
        bkc__err(c, ERR_BAD_CAPACITY);
        return 0;
    }
    if (v <= 0) {
        bkc__err(c, ERR_CAPACITY_ZERO);
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

static int parse_expansion(bkc_ctx *c, bkc_str s, bf_opts *o)
{
    long long v;
    if (!bkc_parse_ll(s, &v) || v < 0 || v > MAX_EXPANSION) {
        bkc__err(c, ERR_BAD_EXPANSION);
        return 0;
    }
    if (v == 0) {
        /* Redis 8's meaning of expansion 0 (its bf-expansion-factor):
         * NONSCALING. RedisBloom 2.x refused it (ERR_EXPANSION_ZERO). */
        o->nonscaling = 1;
        return 1;
    }
    o->expansion = (uint32_t)v;
    o->expansion_given = 1;
    return 1;
}

/* valkey-bloom's TIGHTENING <ratio>: in (0, 1), the ratio of the rates of
 * consecutive stages. Our chain keeps stage 0 at P / 2 and shares the other
 * half geometrically at that ratio (lib/scalable.c, bk_scalable_set_
 * tightening; 0.9 when not given), so the compound rate stays under P. */
static int parse_tightening(bkc_ctx *c, bkc_str s, bf_opts *o)
{
    double v;
    if (!bkc_parse_double(s, &v)) {
        bkc__err(c, ERR_BAD_TIGHTENING);
        return 0;
    }
    if (!(v > 0 && v < 1)) {
        bkc__err(c, ERR_TIGHTENING_RANGE);
        return 0;
    }
    o->tightening = v;
    return 1;
}

/* valkey-bloom's SEED <32 bytes>: our filters take a 64-bit seed, the XOR
 * of the four little-endian words (a seed s is logged as s's 8 bytes and
 * 24 zero bytes, which fold back to s). */
static int parse_seed(bkc_ctx *c, bkc_str s, bf_opts *o)
{
    if (s.len != SEED_BYTES) {
        bkc__err(c, ERR_BAD_SEED);
        return 0;
    }
    uint64_t seed = 0;
    const unsigned char *p = (const unsigned char *)s.ptr;
    for (size_t i = 0; i < SEED_BYTES; i++) seed ^= (uint64_t)p[i] << (8 * (i % 8));
    o->seed = seed;
    return 1;
}

/* valkey-bloom's VALIDATESCALETO <capacity>: its capacity texts. */
static int parse_scale_to(bkc_ctx *c, bkc_str s, bf_opts *o)
{
    return parse_capacity(c, s, &o->validate_scale_to);
}

/* The options BF.RESERVE and BF.INSERT share beyond their own (valkey-
 * bloom's three, and our AUTOCLEAR ratio and ROTATE). Returns 1 parsed
 * (*i moved past the option's value), 0 not one of them, -1 replied. */
static int parse_valkey_option(bkc_ctx *c, int argc, const bkc_str *argv, int *i, bf_opts *o)
{
    int ac = bkc__parse_autoclear(c, argc, argv, i, &o->ac);
    if (ac != 0) return ac;
    int (*parse)(bkc_ctx *, bkc_str, bf_opts *) =
        bkc_streq(argv[*i], "TIGHTENING")        ? parse_tightening
        : bkc_streq(argv[*i], "SEED")            ? parse_seed
        : bkc_streq(argv[*i], "VALIDATESCALETO") ? parse_scale_to
                                                 : NULL;
    if (parse == NULL) return 0;
    if (*i + 1 >= argc) {
        bkc__arity_error(c, argv);
        return -1;
    }
    return parse(c, argv[++*i], o) ? 1 : -1;
}

/* parse_valkey_option, with any other word an unknown argument: 1 parsed,
 * 0 replied. */
static int valkey_option_or_unknown(bkc_ctx *c, int argc, const bkc_str *argv, int *i,
                                    bf_opts *o)
{
    int got = parse_valkey_option(c, argc, argv, i, o);
    if (got < 0) return 0;
    if (got == 0) {
        bkc__err(c, BKC_ERR_UNKNOWN_ARG);
        return 0;
    }
    return 1;
}

/*==========================================================================
 * Creating and adding
 *==========================================================================*/

static int scale_to_valid(bkc_ctx *c, const bf_opts *o, int growable); /* below */

/* Whether a key made with o is growable (above): GROWABLE, or an add that
 * creates it with the defaults. */
static int wants_growable(const bf_opts *o, int by_add)
{
    if (o->growable) return 1;
    return by_add && bkc_defaults_in_force.bf_growable && !o->nonscaling &&
           !o->capacity_given && o->expansion == BF_GROWABLE_EXPANSION && o->tightening == 0 &&
           bk_growable_reach(o->capacity, o->error) >= BF_GROWABLE_MIN_REACH;
}

/* Whether a filter of `bytes` (rc: what estimating them returned) may be
 * made now. Replies when not. */
static int may_create(bkc_ctx *c, int rc, size_t bytes)
{
    if (rc == BK_ESIZE) {
        bkc__err(c, BKC_ERR_CREATE_MEM);
        return 0;
    }
    if (rc != BK_OK) {
        bkc__lib_error(c, rc);
        return 0;
    }
    return bkc__fits_create(c, bytes);
}

/* The reply to a failed create. */
static bkc_value *create_failed(bkc_ctx *c, int rc)
{
    if (rc == BK_ESIZE || rc == BK_ENOMEM) bkc__err(c, BKC_ERR_CREATE_MEM);
    else bkc__lib_error(c, rc);
    return NULL;
}

static bkc_value *growable_create(bkc_ctx *c, const bf_opts *o)
{
    size_t bytes = 0;
    int rc = bk_growable_estimate_bytes(o->capacity, &bytes);
    if (!may_create(c, rc, bytes)) return NULL;
    bk_growable *g = NULL;
    rc = bk_growable_create(&g, o->capacity, o->error, o->seed);
    if (rc != BK_OK) return create_failed(c, rc);
    return bkc__value_of(c, BKC_KIND_BLOOM, bk_growable_as_filter(g));
}

/* AUTOCLEAR: one blocked filter (two with ROTATE) of the capacity and
 * error asked for, in an auto-clear filter (lib/autoclear.c). */
static bkc_value *autoclear_create(bkc_ctx *c, const bf_opts *o)
{
    uint64_t bits = 0;
    int rc = bk_blocked_optimal(o->capacity, o->error, &bits, NULL);
    uint64_t gens = o->ac.rotate ? 2 : 1;
    size_t bytes = rc == BK_OK && bits / 8 <= (SIZE_MAX - 4096) / gens ? bits / 8 * gens + 1024 : 0;
    if (!may_create(c, rc == BK_OK && bytes == 0 ? BK_ESIZE : rc, bytes)) return NULL;
    bk_blocked *b = NULL;
    rc = bk_blocked_create(&b, o->capacity, o->error, o->seed);
    if (rc != BK_OK) return create_failed(c, rc);
    bk_filter *f = bkc__autoclear_wrap(c, bk_blocked_as_filter(b), &o->ac);
    return f ? bkc__value_of(c, BKC_KIND_BLOOM, f) : NULL;
}

/* Create the filter of o, after checking it fits (by_add: an add creates
 * the key). Replies on failure. */
static bkc_value *bf_create(bkc_ctx *c, const bf_opts *o, int by_add)
{
    if (o->ac.ratio != 0) return autoclear_create(c, o);
    int growable = wants_growable(o, by_add);
    if (!scale_to_valid(c, o, growable)) return NULL;
    if (growable) return growable_create(c, o);
    /* BK_SCALABLE_BOUNDED: the whole chain stays under the error asked for,
     * however it grows (a NONSCALING filter is one stage at that error). */
    unsigned flags = BK_SCALABLE_BOUNDED | (o->nonscaling ? BK_SCALABLE_NONSCALING : 0);
    size_t bytes = 0;
    int rc = bk_scalable_estimate_bytes(o->capacity, o->error, flags, &bytes);
    if (!may_create(c, rc, bytes)) return NULL;
    bk_scalable *s = NULL;
    rc = bk_scalable_create(&s, o->capacity, o->error, o->expansion, flags, o->seed);
    if (rc == BK_OK && o->tightening != 0 && !o->nonscaling)
        rc = bk_scalable_set_tightening(s, o->tightening);
    if (rc != BK_OK) {
        bk_scalable_free(s);
        return create_failed(c, rc);
    }
    return bkc__value_of(c, BKC_KIND_BLOOM, bk_scalable_as_filter(s));
}

/*==========================================================================
 * How far a filter can grow (valkey-bloom's VALIDATESCALETO and
 * MAXSCALEDCAPACITY, on our limits)
 *==========================================================================*/

/* Rate of stage i of a bounded chain at error P (lib/scalable.c's
 * schedule: P / 2, then (P / 2)(1 - r) r^(i-1)). */
static double chain_stage_rate(double error, double r, uint32_t i)
{
    double half = error / 2;
    if (i == 0) return half;
    double p = half * (1 - r);
    for (uint32_t k = 1; k < i; k++) p *= r;
    return p;
}

/* Bytes of one stage of `capacity` items at `rate` (an estimate: the
 * library's size of a one-stage filter, handle included). 0 when it
 * cannot be made. */
static uint64_t stage_bytes(uint64_t capacity, double rate)
{
    size_t b = 0;
    if (bk_scalable_estimate_bytes(capacity, rate, BK_SCALABLE_NONSCALING, &b) != BK_OK) return 0;
    return b;
}

enum { SCALE_OK = 0, SCALE_MEMORY, SCALE_STAGES, SCALE_FPR };

/* The summed capacity of a chain (first stage `capacity`, growth
 * `expansion`, stage i at rate(i)) grown stage by stage while it stays
 * within `limit` bytes and `max_stages` stages, until it reaches `target`
 * (0: as far as it can). *cap gets the capacity reached; the result says
 * what stopped it short of target (SCALE_OK when reached or target 0). */
static int chain_reach(uint64_t capacity, uint32_t expansion, double error, int redisbloom,
                       double r, uint32_t max_stages, uint64_t limit, uint64_t target,
                       uint64_t *cap)
{
    uint64_t total = 0, bytes = 0, stage = capacity;
    double rate = error / 2;   /* RedisBloom's: halves per stage */
    for (uint32_t i = 0;; i++) {
        if (target != 0 && total >= target) break;
        if (i >= max_stages) {
            *cap = total;
            return target ? SCALE_STAGES : SCALE_OK;
        }
        double p = redisbloom ? rate : chain_stage_rate(error, r, i);
        if (!(p > 0)) {
            *cap = total;
            return target ? SCALE_FPR : SCALE_OK;
        }
        uint64_t b = stage_bytes(stage, p);
        if (b == 0 || bytes + b > limit) {
            *cap = total;
            return target ? SCALE_MEMORY : SCALE_OK;
        }
        bytes += b;
        total = total + stage < total ? UINT64_MAX : total + stage;
        if (stage > UINT64_MAX / (expansion ? expansion : 1)) {  /* no next stage */
            *cap = total;
            return target && total < target ? SCALE_MEMORY : SCALE_OK;
        }
        stage *= expansion;
        rate *= 0.5;
    }
    *cap = total;
    return SCALE_OK;
}

/* The same for a growable filter: levels of initial x 2^k keys, while its
 * rate allows (bk_growable_reach) and its bytes fit. */
static int growable_reach(uint64_t initial, double error, uint64_t limit, uint64_t target,
                          uint64_t *cap)
{
    uint32_t reach = bk_growable_reach(initial, error);
    uint64_t level = initial;
    for (uint32_t k = 0;; k++) {
        size_t b = 0;
        if (bk_growable_estimate_bytes(level, &b) != BK_OK || b > limit) {
            *cap = level / 2 >= initial ? level / 2 : 0;
            return target ? SCALE_MEMORY : SCALE_OK;
        }
        if ((target != 0 && level >= target) || k >= reach || level > UINT64_MAX / 2) {
            *cap = level;
            return target && level < target ? SCALE_FPR : SCALE_OK;
        }
        level *= 2;
    }
}

/* VALIDATESCALETO: refuse a filter that could not grow to o's target
 * within the memory the host allows now and the chain's stage limit.
 * Replies and returns 0 when it could not. */
static int scale_to_valid(bkc_ctx *c, const bf_opts *o, int growable)
{
    if (o->validate_scale_to == 0) return 1;
    uint64_t limit = bkc__memory_budget(c), reached;
    int why = growable ? growable_reach(o->capacity, o->error, limit, o->validate_scale_to,
                                        &reached)
                       : chain_reach(o->capacity, o->expansion, o->error, 0,
                                     o->tightening ? o->tightening : BK_SCALABLE_TIGHTENING,
                                     BK_SCALABLE_MAX_STAGES, limit, o->validate_scale_to,
                                     &reached);
    if (why == SCALE_OK) return 1;
    bkc__err(c, why == SCALE_STAGES ? ERR_SCALE_STAGES
                : why == SCALE_FPR  ? ERR_SCALE_FPR
                                    : ERR_SCALE_MEMORY);
    return 0;
}


/* The filter of a BF value: one of the four is set (r: a filter taken
 * over from RedisBloom, kept in its layout: lib/rbloom.c; a: AUTOCLEAR). */
typedef struct bf_filter {
    bk_scalable *s;
    bk_growable *g;
    bk_rbloom *r;
    bk_autoclear *a;
} bf_filter;

static bf_filter bf_of(bkc_value *v)
{
    bf_filter b;
    b.s = bk_filter_as_scalable(v->filters[0]);
    b.g = b.s ? NULL : bk_filter_as_growable(v->filters[0]);
    b.r = b.s || b.g ? NULL : bk_filter_as_rbloom(v->filters[0]);
    b.a = b.s || b.g || b.r ? NULL : bk_filter_as_autoclear(v->filters[0]);
    return b;
}

static bk_autoclear_stats autoclear_stats(const bk_autoclear *a)
{
    bk_autoclear_stats st;
    bk_autoclear_get_stats(a, &st);
    return st;
}

static int bf_contains(bf_filter b, bkc_str item)
{
    if (b.a) return bk_autoclear_contains(b.a, item.ptr, item.len);
    if (b.r) return bk_rbloom_contains(b.r, item.ptr, item.len);
    return b.g ? bk_growable_contains(b.g, item.ptr, item.len)
               : bk_scalable_contains(b.s, item.ptr, item.len);
}

static uint64_t bf_items(bf_filter b)
{
    if (b.a) {
        bk_autoclear_stats st = autoclear_stats(b.a);
        return st.items + st.previous_items;
    }
    if (b.r) return bk_rbloom_items(b.r);
    return b.g ? bk_growable_items(b.g) : bk_scalable_items(b.s);
}

static size_t bf_bytes(bf_filter b)
{
    if (b.a) return autoclear_stats(b.a).bytes;
    if (b.r) return bk_rbloom_bytes(b.r);
    return b.g ? bk_growable_bytes(b.g) : bk_scalable_bytes(b.s);
}

/* Cap the growth of b's filter at max_bytes (0: none). An auto-clear
 * filter never grows. */
static void bf_set_max_bytes(bf_filter b, size_t max_bytes)
{
    if (b.a) return;
    if (b.r) bk_rbloom_set_max_bytes(b.r, max_bytes);
    else if (b.s) bk_scalable_set_max_bytes(b.s, max_bytes);
    else bk_growable_set_max_bytes(b.g, max_bytes);
}

static int bf_add(bf_filter b, bkc_str item)
{
    if (b.a) return bk_autoclear_add(b.a, item.ptr, item.len);
    if (b.r) return bk_rbloom_add(b.r, item.ptr, item.len);
    return b.g ? bk_growable_add(b.g, item.ptr, item.len)
               : bk_scalable_add(b.s, item.ptr, item.len);
}

/* RedisBloom's chain for a growable filter's items: its stage count and
 * their summed capacity (stage i holds capacity * 2^i; a chain whose
 * stages are all full gets the next one with the next new item). */
static void growable_chain(const bk_growable *g, uint64_t *capacity, uint64_t *stages)
{
    uint64_t stage = bk_growable_initial_capacity(g), total = stage, n = 1;
    uint64_t items = bk_growable_items(g);
    while (total < items && stage <= UINT64_MAX / 2 && total <= UINT64_MAX - 2 * stage) {
        stage *= 2;
        total += stage;
        n++;
    }
    *capacity = total;
    *stages = n;
}

/* The error text of a failed add. */
static const char *add_error_text(bf_filter b, int rc, int capped)
{
    switch (rc) {
    case BK_EFULL:
        /* a growable filter refused a doubling that would pass its rate:
         * RedisBloom's words for a chain that may not grow */
        return b.g ? ERR_MAX_STAGES : ERR_FULL;
    case BK_ELIMIT:
        if (b.s && bk_scalable_stages(b.s) >= bk_scalable_max_stages(b.s)) return ERR_MAX_STAGES;
        return capped ? BKC_ERR_MAXMEMORY : BKC_ERR_TOO_LARGE;
    case BK_ESIZE: return BKC_ERR_TOO_LARGE;
    case BK_ENOMEM: return BKC_ERR_OOM;
    default: return NULL;
    }
}

/* Add n items; results[i] = 1/0 until the first error, whose text goes to
 * *err. Returns the number of items processed before an error (n when
 * none). Sets *changed when an item was added or the filter grew. */
static size_t bf_add_items(bkc_ctx *c, bkc_key *k, bkc_value *v, const bkc_str *items,
                           size_t n, int *results, const char **err, int *changed)
{
    bf_filter b = bf_of(v);
    size_t before = bf_bytes(b);
    /* a growable filter's cap is only ever set here */
    size_t old_cap = b.s ? bk_scalable_max_bytes(b.s) : 0;
    uint64_t budget = bkc__memory_budget(c);
    size_t left = c->host_vt->memory_left(c->host);
    int capped = left != SIZE_MAX;
    /* growth may take the budget and no more, for this command */
    uint64_t cap = before + budget < before ? UINT64_MAX : before + budget;
    if (cap < SIZE_MAX && (old_cap == 0 || cap < old_cap)) bf_set_max_bytes(b, (size_t)cap);
    size_t i;
    *err = NULL;
    for (i = 0; i < n; i++) {
        int rc = bf_add(b, items[i]);
        if (rc < 0) {
            *err = add_error_text(b, rc, capped);
            if (*err == NULL) *err = BKC_ERR_OOM;
            break;
        }
        results[i] = rc;
        /* an auto-clear filter may change on an add that answers 0 (a key
         * of its previous generation written into the current one): every
         * add is logged, so a replay clears exactly where it cleared */
        if (rc == 1 || b.a != NULL) *changed = 1;
    }
    bf_set_max_bytes(b, old_cap);
    if (bf_bytes(b) != before) {
        *changed = 1;
        c->host_vt->resized(k);
    }
    return i;
}

/* An add that created its key is logged (and replicated) as the BF.INSERT
 * that makes the same filter with every setting spelled out (GROWABLE for
 * a growable one) and the same items, so that a replay or a replica makes
 * the same filter whatever its own defaults and --bf-growable say. One
 * record: one change, whole or not at all. */
static void wrote_created(bkc_ctx *c, int argc, const bkc_str *sent, const bf_opts *o,
                          int growable, const bkc_str *items, size_t n)
{
    char error[32], capacity[24], expansion[16], seed[SEED_BYTES], tight[32], ratio[32];
    bkc_str argv[20];
    int k = 0;
    argv[k++] = (bkc_str){"BF.INSERT", 9};
    argv[k++] = sent[1];
    snprintf(capacity, sizeof(capacity), "%llu", (unsigned long long)o->capacity);
    argv[k++] = (bkc_str){"CAPACITY", 8};
    argv[k++] = (bkc_str){capacity, strlen(capacity)};
    snprintf(error, sizeof(error), "%.17g", o->error);
    argv[k++] = (bkc_str){"ERROR", 5};
    argv[k++] = (bkc_str){error, strlen(error)};
    if (o->ac.ratio != 0) {
        k += bkc__autoclear_argv(&o->ac, ratio, &argv[k]);
    } else if (o->nonscaling) {
        argv[k++] = (bkc_str){"NONSCALING", 10};
    } else {
        snprintf(expansion, sizeof(expansion), "%u", o->expansion);
        argv[k++] = (bkc_str){"EXPANSION", 9};
        argv[k++] = (bkc_str){expansion, strlen(expansion)};
    }
    if (growable) argv[k++] = (bkc_str){"GROWABLE", 8};
    if (o->seed != BK_DEFAULT_SEED) { /* valkey-bloom's form (parse_seed) */
        memset(seed, 0, sizeof(seed));
        for (int b = 0; b < 8; b++) seed[b] = (char)(o->seed >> (8 * b));
        argv[k++] = (bkc_str){"SEED", 4};
        argv[k++] = (bkc_str){seed, sizeof(seed)};
    }
    if (o->tightening != 0) {   /* as given: the library keeps it the same way again */
        snprintf(tight, sizeof(tight), "%.17g", o->tightening);
        argv[k++] = (bkc_str){"TIGHTENING", 10};
        argv[k++] = (bkc_str){tight, strlen(tight)};
    }
    argv[k++] = (bkc_str){"ITEMS", 5};
    bkc__wrote_as(c, argc, sent, argv, k, items, n);
}

/* Open key WRITE for an add, creating it with o when missing (unless
 * nocreate). Returns the value or NULL (replied, key closed). *created. */
static bkc_value *open_for_add(bkc_ctx *c, bkc_str name, const bf_opts *o, int nocreate,
                               bkc_key **k, int *created)
{
    bkc_value *v;
    *created = 0;
    int st = bkc__open(c, name, BKC_OPEN_WRITE, BKC_KIND_BLOOM, k, &v);
    if (st == BKC__FAILED) return NULL;
    if (st == BKC__WRONG) {
        bkc__err(c, BKC_ERR_WRONGTYPE);
        goto fail;
    }
    if (st == BKC__MISSING) {
        if (nocreate) {
            bkc__err(c, BKC_ERR_NOT_FOUND);
            goto fail;
        }
        bkc_value *nv = bf_create(c, o, 1);
        if (nv == NULL) goto fail;
        if (!bkc__store(c, *k, nv)) goto fail;
        *created = 1;
        v = c->host_vt->value(*k);
    }
    return v;
fail:
    bkc__close(c, *k);
    return NULL;
}

/* The shared path of an add: an existing BF key is opened BKC_OPEN_ADD
 * (which the hosts hold alone: see Locking above), and the nogrow adds run;
 * it stops at the first item that would need a new stage, a doubling or
 * the stash (growth is checked against the memory budget, under the
 * exclusive lock).
 * Fills results[0 .. done) and returns done: n when the whole command ran
 * here (the key was then logged while still open), 0 when the key is
 * missing or of another kind (the exclusive path answers those), or -1 when
 * the host could not open it (replied). */
static long add_shared(bkc_ctx *c, int argc, const bkc_str *argv, bkc_str name,
                       const bkc_str *items, size_t n, int *results, int *changed)
{
    bkc_key *k;
    bkc_value *v;
    int st = bkc__open(c, name, BKC_OPEN_ADD, BKC_KIND_BLOOM, &k, &v);
    if (st == BKC__FAILED) return -1;
    size_t i = 0;
    /* (RedisBloom's layout and auto-clear filters: exclusive) */
    bf_filter f = st == BKC__FOUND ? bf_of(v) : (bf_filter){0};
    if (f.s != NULL || f.g != NULL) {
        if (n == 1) {   /* BF.ADD: the single add, no batch to set up */
            const void *key = items[0].ptr ? items[0].ptr : "";
            int r = f.s ? bk_scalable_add_nogrow(f.s, key, items[0].len)
                        : bk_growable_add_nogrow(f.g, key, items[0].len);
            if (r >= 0) {
                results[0] = r;
                i = 1;
                if (r == 1) *changed = 1;
            }
        }
        while (i < n && n > 1) {   /* in chunks, prefetched ahead */
            enum { CHUNK = 64 };
            const void *keys[CHUNK];
            size_t lens[CHUNK], m = n - i < CHUNK ? n - i : CHUNK;
            for (size_t j = 0; j < m; j++) {
                keys[j] = items[i + j].ptr ? items[i + j].ptr : "";
                lens[j] = items[i + j].len;
            }
            int64_t done = f.s ? bk_scalable_add_nogrow_batch(f.s, keys, lens, m, results + i)
                               : bk_growable_add_nogrow_batch(f.g, keys, lens, m, results + i);
            if (done < 0) done = 0;
            for (int64_t j = 0; j < done; j++)
                if (results[i + (size_t)j] == 1) *changed = 1;
            i += (size_t)done;
            if ((size_t)done < m) break;   /* the rest: exclusive path */
        }
        if (i == n && *changed) bkc__wrote(c, argc, argv);
    }
    bkc__close(c, k);
    return (long)i;
}

/* Add items to the key and write the reply: an integer (BF.ADD, single) or
 * an array (MADD, INSERT) of the results up to the first error, then the
 * error in place of the rest. Items the shared path could not take go
 * through the exclusive one (create, grow); if the key vanished or changed
 * between the two, the command answers that error alone and logs nothing,
 * which matches what happened: its first adds went to the value that is
 * gone. */
static void add_items(bkc_ctx *c, int argc, const bkc_str *argv, bkc_str name,
                      const bf_opts *o, int nocreate, const bkc_str *items, size_t n,
                      int single)
{
    bkc_key *k = NULL;
    int created = 0, changed = 0;
    const char *err = NULL;
    int stack[64];   /* BF.ADD, and the server's runs of up to 64 */
    int *results = n <= 64 ? stack : malloc(n * sizeof(int));
    if (results == NULL) {
        bkc__err(c, BKC_ERR_OOM);
        return;
    }
    long fast = add_shared(c, argc, argv, name, items, n, results, &changed);
    if (fast < 0) goto done;
    size_t count = (size_t)fast;
    if (count < n) {
        bkc_value *v = open_for_add(c, name, o, nocreate, &k, &created);
        if (v == NULL) goto done; /* replied */
        count += bf_add_items(c, k, v, items + count, n - count, results + count, &err,
                              &changed);
    }
    if (single) {
        if (err) bkc__err(c, err);
        else bkc__bool(c, results[0]);
    } else {
        bkc__array(c, count + (err ? 1 : 0));
        for (size_t i = 0; i < count; i++) bkc__bool(c, results[i]);
        if (err) bkc__err(c, err);
    }
    if (k != NULL) {
        if (created)
            wrote_created(c, argc, argv, o, bf_of(c->host_vt->value(k)).g != NULL, items, n);
        else if (changed)
            bkc__wrote(c, argc, argv);
        bkc__close(c, k);
    }
done:
    if (results != stack) free(results);
}

/*==========================================================================
 * Commands
 *==========================================================================*/

void bkc_cmd_bf_reserve(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bf_opts o;
    opts_default(&o);
    if (!parse_error_rate(c, argv[2], &o.error)) return;
    if (!parse_capacity(c, argv[3], &o.capacity)) return;
    for (int i = 4; i < argc; i++) {
        if (bkc_streq(argv[i], "NONSCALING")) {
            o.nonscaling = 1;
        } else if (bkc_streq(argv[i], "GROWABLE")) {
            o.growable = 1;
        } else if (bkc_streq(argv[i], "EXPANSION")) {
            if (i + 1 >= argc) {
                bkc__arity_error(c, argv);
                return;
            }
            if (!parse_expansion(c, argv[++i], &o)) return;
        } else if (!valkey_option_or_unknown(c, argc, argv, &i, &o)) {
            return;
        }
    }
    if (!opts_valid(c, &o)) return;
    bkc_key *k;
    if (bkc__open_new(c, argv[1], BKC_KIND_BLOOM, 1, &k))
        bkc__store_new(c, argc, argv, k, bf_create(c, &o, 0));
}

void bkc_cmd_bf_add(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bf_opts o;
    opts_default(&o);
    add_items(c, argc, argv, argv[1], &o, 0, &argv[2], 1, 1);
}

void bkc_cmd_bf_madd(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bf_opts o;
    opts_default(&o);
    add_items(c, argc, argv, argv[1], &o, 0, &argv[2], (size_t)(argc - 2), 0);
}

/* One of BF.INSERT's options before ITEMS (bkc__option_fn). */
static int insert_option(bkc_ctx *c, int argc, const bkc_str *argv, int *ip, void *vo)
{
    bf_opts *o = vo;
    int i = *ip;
    if (bkc_streq(argv[i], "NONSCALING")) {
        o->nonscaling = 1;
    } else if (bkc_streq(argv[i], "GROWABLE")) {
        o->growable = 1;
    } else if (bkc_streq(argv[i], "CAPACITY") || bkc_streq(argv[i], "ERROR") ||
               bkc_streq(argv[i], "EXPANSION")) {
        if (i + 1 >= argc) {
            bkc__arity_error(c, argv);
            return 0;
        }
        int ok = bkc_streq(argv[i], "CAPACITY") ? parse_capacity(c, argv[i + 1], &o->capacity)
                 : bkc_streq(argv[i], "ERROR")  ? parse_error_rate(c, argv[i + 1], &o->error)
                                                : parse_expansion(c, argv[i + 1], o);
        if (!ok) return 0;
        if (bkc_streq(argv[i], "CAPACITY")) o->capacity_given = 1;
        i++;
    } else if (!valkey_option_or_unknown(c, argc, argv, &i, o)) {
        return 0;
    }
    *ip = i;
    return 1;
}

void bkc_cmd_bf_insert(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bf_opts o;
    int nocreate;
    opts_default(&o);
    int i = bkc__insert_options(c, argc, argv, &nocreate, insert_option, &o);
    if (i == 0) return;
    if (!opts_valid(c, &o)) return;
    add_items(c, argc, argv, argv[1], &o, nocreate, &argv[i], (size_t)(argc - i), 0);
}

/* Open for a lookup: the value, or NULL when missing or of another kind
 * (both answer "absent"). *failed when the host could not open it. */
void bkc_cmd_bf_exists(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    int st;
    (void)argc;
    bkc_value *v = bkc__open_lookup(c, argv[1], BKC_KIND_BLOOM, &k, &st);
    if (st == BKC__FAILED) return;
    bkc__bool(c, v ? bf_contains(bf_of(v), argv[2]) : 0);
    bkc__close(c, k);
}

void bkc_cmd_bf_mexists(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__cmd_mexists(c, argc, argv, BKC_KIND_BLOOM, 1);
}

void bkc_cmd_bf_card(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    bkc_value *v;
    (void)argc;
    int st = bkc__open(c, argv[1], BKC_OPEN_READ, BKC_KIND_BLOOM, &k, &v);
    if (st == BKC__FAILED) return;
    if (st == BKC__WRONG) bkc__err(c, BKC_ERR_WRONGTYPE);
    else bkc__int(c, v ? (long long)bf_items(bf_of(v)) : 0);
    bkc__close(c, k);
}

/* BF.INFO fields, in the order of the whole reply. */
enum { F_CAPACITY, F_SIZE, F_FILTERS, F_ITEMS, F_EXPANSION, F_COUNT };
static const bkc__info_field info_fields[F_COUNT] = {
    {"CAPACITY", "Capacity"},
    {"SIZE", "Size"},
    {"FILTERS", "Number of filters"},
    {"ITEMS", "Number of items inserted"},
    {"EXPANSION", "Expansion rate"},
};
/* an auto-clear filter's: the five, then its own (command.c) */
static bkc__info_field autoclear_info_fields[F_COUNT + BKC__AUTOCLEAR_FIELDS];

static void info_value(bkc_ctx *c, const void *src, int field)
{
    const bf_filter *b = src;
    bk_scalable *s = b->s;
    if (b->a != NULL) {   /* one generation (two with ROTATE) that never grows */
        bk_autoclear_stats st = autoclear_stats(b->a);
        switch (field) {
        case F_CAPACITY: bkc__int(c, (long long)st.capacity); break;
        case F_SIZE: bkc__int(c, (long long)st.bytes); break;
        case F_FILTERS: bkc__int(c, st.mode == BK_AUTOCLEAR_ROTATE ? 2 : 1); break;
        case F_ITEMS: bkc__int(c, (long long)(st.items + st.previous_items)); break;
        case F_EXPANSION: c->reply->vt->null(c->reply); break;
        default: bkc__autoclear_info_value(c, b->a, field - F_COUNT); break;
        }
        return;
    }
    if (b->r != NULL) {   /* RedisBloom's own numbers */
        switch (field) {
        case F_CAPACITY: bkc__int(c, (long long)bk_rbloom_capacity(b->r)); break;
        case F_SIZE: bkc__int(c, (long long)bk_rbloom_size(b->r)); break;
        case F_FILTERS: bkc__int(c, (long long)bk_rbloom_stages(b->r)); break;
        case F_ITEMS: bkc__int(c, (long long)bk_rbloom_items(b->r)); break;
        default:
            if (bk_rbloom_expansion(b->r) == 0) c->reply->vt->null(c->reply);
            else bkc__int(c, (long long)bk_rbloom_expansion(b->r));
            break;
        }
        return;
    }
    if (b->g != NULL) {
        uint64_t capacity, stages;
        growable_chain(b->g, &capacity, &stages);
        switch (field) {
        case F_CAPACITY: bkc__int(c, (long long)capacity); break;
        case F_SIZE: bkc__int(c, (long long)bk_growable_bytes(b->g)); break;
        case F_FILTERS: bkc__int(c, (long long)stages); break;
        case F_ITEMS: bkc__int(c, (long long)bk_growable_items(b->g)); break;
        default: bkc__int(c, BF_GROWABLE_EXPANSION); break;
        }
        return;
    }
    switch (field) {
    case F_CAPACITY: bkc__int(c, (long long)bk_scalable_capacity(s)); break;
    case F_SIZE: bkc__int(c, (long long)bk_scalable_bytes(s)); break;
    case F_FILTERS: bkc__int(c, (long long)bk_scalable_stages(s)); break;
    case F_ITEMS: bkc__int(c, (long long)bk_scalable_items(s)); break;
    default:
        if (bk_scalable_expansion(s) == 0) c->reply->vt->null(c->reply);
        else bkc__int(c, (long long)bk_scalable_expansion(s));
        break;
    }
}

/* valkey-bloom's fields beyond RedisBloom's five, asked for one at a time
 * (BF.INFO key ERROR | TIGHTENING | MAXSCALEDCAPACITY). They are not in
 * the whole reply: RedisBloom's clients read it (node-redis 4 by position).
 * Returns 1 when argv[2] named one (replied), else 0. */
static int info_extra(bkc_ctx *c, bkc_str field, bf_filter b)
{
    static const char *const labels[] = {"Error rate", "Tightening ratio",
                                         "Max scaled capacity"};
    int which = bkc_streq(field, "ERROR")               ? 0
                : bkc_streq(field, "TIGHTENING")        ? 1
                : bkc_streq(field, "MAXSCALEDCAPACITY") ? 2
                                                        : -1;
    if (which < 0) return 0;
    double error = 0, tightening = 0.5;
    uint32_t expansion = BF_GROWABLE_EXPANSION;
    if (b.a) {
        error = autoclear_stats(b.a).target_fpr;
        expansion = 0;
    } else if (b.s) {
        error = bk_scalable_error(b.s);
        expansion = bk_scalable_expansion(b.s);
        tightening = bk_scalable_tightening(b.s);
    } else if (b.g) {
        error = bk_growable_error(b.g);
        tightening = 1;   /* one table: no stages */
    } else {
        error = bk_rbloom_error(b.r);
        expansion = bk_rbloom_expansion(b.r);
    }
    if (which > 0 && expansion == 0) {  /* valkey-bloom: scaling filters only */
        bkc__err(c, "Invalid information value");
        return 1;
    }
    if (bkc__resp(c) >= 3) {
        c->reply->vt->map(c->reply, 1);
        bkc__simple(c, labels[which]);
    } else {
        bkc__array(c, 1);
    }
    if (which == 0) {
        c->reply->vt->dbl(c->reply, error);
    } else if (which == 1) {
        c->reply->vt->dbl(c->reply, tightening);
    } else {
        uint64_t cap = 0;
        uint64_t limit = bf_bytes(b) + bkc__memory_budget(c);
        if (b.g) {
            growable_reach(bk_growable_initial_capacity(b.g), error, limit, 0, &cap);
        } else if (b.s) {
            bk_scalable_stats st;
            bk_scalable_get_stats(b.s, &st);
            chain_reach(st.initial_capacity, expansion, error, 0, tightening, st.max_stages, limit, 0,
                        &cap);
        } else {
            bk_rbloom_stage first = {0};
            bk_rbloom_stage_info(b.r, 0, &first);
            chain_reach(first.capacity, expansion, error, 1, 0.5, BK_SCALABLE_MAX_STAGES, limit, 0, &cap);
        }
        bkc__int(c, cap > (uint64_t)INT64_MAX ? INT64_MAX : (long long)cap);
    }
    return 1;
}

void bkc_cmd_bf_info(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    bkc_value *v = bkc__open_info(c, argc, argv, BKC_KIND_BLOOM, &k);
    if (v == NULL) return;
    bf_filter b = bf_of(v);
    if (b.a != NULL && autoclear_info_fields[0].label == NULL) { /* built once */
        memcpy(autoclear_info_fields, info_fields, sizeof(info_fields));
        memcpy(autoclear_info_fields + F_COUNT, bkc__autoclear_fields,
               sizeof(bkc__autoclear_fields));
    }
    if (argc < 3 || !info_extra(c, argv[2], b))
        bkc__reply_info(c, argc, argv, b.a ? autoclear_info_fields : info_fields,
                        b.a ? F_COUNT + BKC__AUTOCLEAR_FIELDS : F_COUNT, info_value, &b);
    bkc__close(c, k);
}

void bkc_cmd_bf_scandump(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__scandump(c, argc, argv, BKC_KIND_BLOOM);
}

void bkc_cmd_bf_loadchunk(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__loadchunk(c, argc, argv, BKC_KIND_BLOOM);
}

/*==========================================================================
 * BF.MERGE dest src [src ...]
 *==========================================================================*/

static int name_less(bkc_str a, bkc_str b)
{
    size_t n = a.len < b.len ? a.len : b.len;
    int cmp = n ? memcmp(a.ptr, b.ptr, n) : 0;
    return cmp < 0 || (cmp == 0 && a.len < b.len);
}

static int name_eq(bkc_str a, bkc_str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* A copy of f through its file image (works for every family with a codec). */
static int filter_copy(bkc_ctx *c, const bk_filter *f, bk_filter **out)
{
    uint64_t n = bk_filter_serialized_size(f);
    if (n == 0) return BK_ENOTSUP;
    if (!bkc__fits(c, 2 * n)) return 1; /* replied */
    void *buf = malloc((size_t)n);
    if (buf == NULL) return BK_ENOMEM;
    int rc = bk_filter_serialize(f, buf, (size_t)n);
    if (rc == BK_OK) rc = bk_filter_deserialize(out, buf, (size_t)n);
    free(buf);
    return rc;
}

/* bk_filter_merge, a growable destination's growth held to the memory
 * budget (a chain's stages never change size). */
static int merge_into(bkc_ctx *c, bk_filter *dst, const bk_filter *src)
{
    bk_growable *g = bk_filter_as_growable(dst);
    if (g == NULL) return bk_filter_merge(dst, src);
    size_t before = bk_growable_bytes(g);
    uint64_t budget = bkc__memory_budget(c);
    uint64_t cap = before + budget < before ? UINT64_MAX : before + budget;
    bk_growable_set_max_bytes(g, cap < SIZE_MAX ? (size_t)cap : 0);
    int rc = bk_filter_merge(dst, src);
    bk_growable_set_max_bytes(g, 0);
    return rc;
}

void bkc_cmd_bf_merge(bkc_ctx *c, int argc, const bkc_str *argv)
{
    int nk = argc - 1;             /* argv[1] dest, argv[2..] sources */
    int *order = malloc((size_t)nk * sizeof(int));
    bkc_key **keys = calloc((size_t)nk, sizeof(bkc_key *));
    bkc_value **vals = calloc((size_t)nk, sizeof(bkc_value *));
    int *state = calloc((size_t)nk, sizeof(int));
    int *alias = malloc((size_t)nk * sizeof(int)); /* first argument of that name */
    char why[160], msg[220];
    if (!order || !keys || !vals || !state || !alias) {
        bkc__err(c, BKC_ERR_OOM);
        goto done;
    }
    /* Open each distinct name once, in byte order of the names, so that two
     * merges over the same keys can never wait for each other in a cycle. */
    int nd = 0;
    for (int i = 0; i < nk; i++) {
        alias[i] = i;
        for (int j = 0; j < i; j++)
            if (name_eq(argv[1 + i], argv[1 + j])) {
                alias[i] = j;
                break;
            }
        if (alias[i] == i) order[nd++] = i;
    }
    for (int i = 1; i < nd; i++) /* insertion sort: few keys */
        for (int j = i; j > 0 && name_less(argv[1 + order[j]], argv[1 + order[j - 1]]); j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int i = 0; i < nd; i++) {
        int a = order[i];
        state[a] = bkc__open(c, argv[1 + a], a == 0 ? BKC_OPEN_WRITE : BKC_OPEN_WHOLE,
                             BKC_KIND_BLOOM, &keys[a], &vals[a]);
        if (state[a] == BKC__FAILED) {
            keys[a] = NULL;
            goto done; /* replied */
        }
    }
    for (int i = 0; i < nk; i++) {
        state[i] = state[alias[i]];
        vals[i] = vals[alias[i]];
    }
    if (state[0] == BKC__WRONG) {
        bkc__err(c, BKC_ERR_WRONGTYPE);
        goto done;
    }
    for (int i = 1; i < nk; i++) {
        if (state[i] == BKC__MISSING) {
            bkc__err(c, BKC_ERR_NOT_FOUND);
            goto done;
        }
        if (state[i] == BKC__WRONG) {
            bkc__err(c, BKC_ERR_WRONGTYPE);
            goto done;
        }
    }
    for (int i = 0; i < nk; i++)
        if (vals[i] != NULL && bf_of(vals[i]).a != NULL) {
            bkc__err(c, ERR_AUTOCLEAR_MERGE);
            goto done;
        }
    const bk_filter *base = vals[0] ? vals[0]->filters[0] : vals[1]->filters[0];
    for (int i = 1; i < nk; i++) {
        if (vals[i]->filters[0] == base) continue; /* itself */
        if (bk_filter_incompatibility(base, vals[i]->filters[0], why, sizeof(why))) {
            snprintf(msg, sizeof(msg), "ERR incompatible filters: %s", why);
            bkc__err(c, msg);
            goto done;
        }
    }
    int rc = BK_OK;
    if (vals[0] == NULL) {
        /* the destination starts as a copy of the first source */
        bk_filter *copy = NULL;
        rc = filter_copy(c, vals[1]->filters[0], &copy);
        if (rc == 1) goto done; /* replied */
        for (int i = 2; i < nk && rc == BK_OK; i++)
            rc = merge_into(c, copy, vals[i]->filters[0]);
        bkc_value *nv = NULL;
        if (rc == BK_OK) {
            nv = bkc_value_new(BKC_KIND_BLOOM);
            if (nv == NULL || bkc_value_push(nv, copy) != BK_OK) rc = BK_ENOMEM;
            else copy = NULL;
        }
        bk_filter_free(copy);
        if (rc != BK_OK) {
            bkc_value_free(nv);
        } else if (!bkc__store(c, keys[0], nv)) {
            goto done; /* replied */
        }
    } else {
        /* a growable destination is merged as a copy that replaces it, so
         * that a source refused after another was taken changes nothing */
        bk_filter *dst = vals[0]->filters[0], *work = dst;
        if (bk_filter_as_growable(dst) != NULL) {
            rc = filter_copy(c, dst, &work);
            if (rc == 1) goto done; /* replied */
        }
        for (int i = 1; i < nk && rc == BK_OK; i++)
            if (alias[i] != 0) rc = merge_into(c, work, vals[i]->filters[0]);
        if (work != dst) {
            if (rc == BK_OK) {
                vals[0]->filters[0] = work;
                bk_filter_free(dst);
                c->host_vt->resized(keys[0]); /* it may have doubled */
            } else {
                bk_filter_free(work);
            }
        }
    }
    if (rc == BK_ELIMIT) {
        bkc__err(c, c->host_vt->memory_left(c->host) != SIZE_MAX ? BKC_ERR_MAXMEMORY
                                                                 : BKC_ERR_TOO_LARGE);
        goto done;
    }
    if (rc != BK_OK) {
        bkc__lib_error(c, rc);
        goto done;
    }
    bkc__ok(c);
    bkc__wrote(c, argc, argv);
done:
    if (keys && alias)
        for (int i = nk - 1; i >= 0; i--)
            if (alias[i] == i && keys[i] != NULL) bkc__close(c, keys[i]);
    free(order);
    free(keys);
    free(vals);
    free(state);
    free(alias);
}

/*==========================================================================
 * BF.DEBUG key: RedisBloom's view of the stages
 *
 * An array: "size:<items>", then one line per stage,
 * "bytes:B bits:M hashes:K hashwidth:W capacity:N size:S ratio:P" (bytes
 * and bits of its table, probes per key, bits of hash each probe comes
 * from, items it is sized for and holds, its error rate, printed %g).
 * - bk_rbloom: RedisBloom's own numbers, read from its header, so the
 *   reply is RedisBloom's to the byte.
 * - our chain: each stage's (bk_scalable_get_stage_stats), hashwidth 64
 *   (probes come from a 128-bit hash's 64-bit halves).
 * - a growable filter: one line for its one table: its bytes and bits,
 *   hashes 1 (one hash gives slot and fingerprint), capacity the keys it
 *   takes before it next doubles, ratio its rate now (bk_growable_fpr_now).
 *==========================================================================*/

static void debug_line(bkc_ctx *c, uint64_t bytes, uint64_t bits, uint32_t hashes,
                       unsigned width, uint64_t capacity, uint64_t size, double ratio)
{
    char line[200];
    int n = snprintf(line, sizeof(line),
                     "bytes:%llu bits:%llu hashes:%u hashwidth:%u capacity:%llu size:%llu "
                     "ratio:%g",
                     (unsigned long long)bytes, (unsigned long long)bits, hashes, width,
                     (unsigned long long)capacity, (unsigned long long)size, ratio);
    c->reply->vt->bulk(c->reply, line, (size_t)n);
}

static void debug_head(bkc_ctx *c, size_t stages, uint64_t items)
{
    char line[40];
    int n = snprintf(line, sizeof(line), "size:%llu", (unsigned long long)items);
    bkc__array(c, 1 + stages);
    c->reply->vt->bulk(c->reply, line, (size_t)n);
}

void bkc_cmd_bf_debug(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    (void)argc;
    bkc_value *v = bkc__open_found(c, argv[1], BKC_OPEN_WHOLE, BKC_KIND_BLOOM, &k);
    if (v == NULL) return;
    bf_filter b = bf_of(v);
    if (b.r != NULL) {
        uint32_t stages = bk_rbloom_stages(b.r);
        debug_head(c, stages, bk_rbloom_items(b.r));
        for (uint32_t i = 0; i < stages; i++) {
            bk_rbloom_stage s;
            bk_rbloom_stage_info(b.r, i, &s);
            debug_line(c, s.bytes, s.bits, s.hashes, s.hash_bits, s.capacity, s.items, s.error);
        }
    } else if (b.a != NULL) {   /* its generations: the current one first */
        bk_autoclear_stats st = autoclear_stats(b.a);
        const bk_blocked *cur = bk_filter_as_blocked((bk_filter *)bk_autoclear_current(b.a));
        uint32_t k = cur ? bk_blocked_hashes(cur) : 0;
        uint64_t prev = st.mode == BK_AUTOCLEAR_ROTATE;
        debug_head(c, 1 + prev, st.items + st.previous_items);
        debug_line(c, st.units / 8, st.units, k, 64, st.capacity, st.items, st.target_fpr);
        if (prev)
            debug_line(c, st.units / 8, st.units, k, 64, st.capacity, st.previous_items,
                       st.target_fpr);
    } else if (b.g != NULL) {
        size_t bytes = bk_growable_bytes(b.g);
        debug_head(c, 1, bk_growable_items(b.g));
        debug_line(c, bytes, (uint64_t)bytes * 8, 1, 64, bk_growable_capacity(b.g),
                   bk_growable_items(b.g), bk_growable_fpr_now(b.g));
    } else {
        uint32_t stages = bk_scalable_stages(b.s);
        debug_head(c, stages, bk_scalable_items(b.s));
        for (uint32_t i = 0; i < stages; i++) {
            bk_scalable_stage_stats s;
            memset(&s, 0, sizeof(s));
            (void)bk_scalable_get_stage_stats(b.s, i, &s);
            debug_line(c, (s.bits + 7) / 8, s.bits, s.hashes, 64, s.capacity, s.items,
                       s.target_fpr);
        }
    }
    bkc__close(c, k);
}
