/*
 * cmd_cuckoo.c - CF.*: RedisBloom's cuckoo filter commands.
 *
 * A CF key holds one cuckoo filter of one or more stages (lib/cuckoo.c,
 * bk_cuckoo_add_stage). Stage i is sized for capacity * expansion^i items
 * with the key's bucket size and max iterations (RedisBloom's defaults: 2
 * and 20; expansion 1 adds stages of the first one's size; expansion 0
 * never grows). A stage is sized as RedisBloom sizes it: capacity / bucket
 * size buckets (integer division) rounded up to a power of two, 8-bit
 * fingerprints (with bucket size 2 stored as 15-bit pairs), so it reports
 * full at about its capacity, and CF.INFO's buckets follow RedisBloom's
 * (its Size is RedisBloom's figure: below). The stages share one allocation with 8 bytes of
 * bookkeeping each, so many small stages cost about their tables (a key
 * saved before stages existed, a chain of separate filters, is joined
 * into one filter when it is decoded: value.c).
 *
 * Adds go to the newest stage; when it is full (or holds too many copies
 * of the key), a new stage is added if the expansion and the stage cap
 * (BKC_CF_MAX_STAGES) allow and it fits in memory; otherwise the filter is
 * full. Lookups check every stage; DEL removes one copy from the newest
 * stage that has the key; COUNT sums the stages.
 *
 * Locking: lookups READ; every add and DEL WRITE (cuckoo writers need
 * exclusive access: kicks move fingerprints).
 *
 * A key an add creates without CAPACITY (CF.ADD, CF.ADDNX, CF.INSERT and
 * CF.INSERTNX with the default size) holds a growable multiset instead
 * (lib/growable.c, bk_growable_create_multiset), when
 * bkc_defaults_in_force.cf_growable says so (server --cf-growable, module
 * CF_GROWABLE; on by default), or any key CF.RESERVE / CF.INSERT makes
 * with GROWABLE (ours). RedisBloom's default there, a chain of 1024-item
 * stages, fails every add from about 31,000 items ("Maximum expansions
 * reached") and its rate grows with every stage (34% at 1e5); the
 * growable filter doubles instead, answers every lookup from one cache
 * line and keeps the rate under CF_GROWABLE_ERROR to its last doubling
 * (docs/COMMANDS.md). It holds copies, counts and deletes as a cuckoo
 * filter does; CF.INFO reports its bytes, its capacity / bucket size as
 * the buckets, one filter and expansion 2 (it doubles). Its growth is
 * capped at the memory budget for the duration of one command.
 *
 * A CF.RESERVE with a bucket size our chain does not have (1 to 255 but
 * 2, 4 and 8) makes RedisBloom's own layout instead (lib/rcuckoo.c,
 * bk_rcuckoo_create with the same capacity, bucket size, max iterations
 * and expansion), so the key answers, grows, fills and reports exactly as
 * RedisBloom's would; keys taken over from RedisBloom hold one too. Its
 * options are checked in RedisBloom's order and refused with RedisBloom's
 * texts (RedisBloom 2.6, src/rebloom.c CF.RESERVE): MAXITERATIONS 1 to
 * 65535, BUCKETSIZE 1 to 255, EXPANSION 0 to 32768, then a capacity of at
 * least twice the bucket size.
 *
 * CF.INFO's Size of a chain is RedisBloom's figure for the same reserve
 * and the same number of stages (rb_info_size), not the smaller bytes it
 * really holds (MEMORY USAGE gives those); a growable key reports its
 * bytes (it has no RedisBloom shape). CF.DEBUG gives RedisBloom's one-line
 * summary with the numbers CF.INFO reports, for every layout.
 *
 * Replay: a cuckoo add draws from the stage's own deterministic generator
 * even when it fails, so every command that reached an add is propagated
 * (wrote), failed ones included; replaying it reproduces the same state.
 * An add that created its key is logged as the CF.INSERT / CF.INSERTNX
 * that creates the same filter whatever the replaying side's defaults say
 * (CAPACITY, and GROWABLE for a growable one: wrote_created).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h> /* strlen */

#include "cmd_internal.h"

/* the defaults of a new chain: bkc_defaults_in_force (command.c) */
#define CF_MAX_EXPANSION 32768
#define CF_MAX_ITERATIONS 65535

#define CF_MAX_BUCKET_SIZE 255

/* RedisBloom's texts (src/rebloom.c: CF.RESERVE, CF.INSERT's CAPACITY) */
#define ERR_BAD_CAPACITY "Bad capacity"
#define ERR_SMALL_CAPACITY "Capacity must be at least (BucketSize * 2)"
#define ERR_BAD_BUCKET "Couldn't parse BUCKETSIZE"
#define ERR_BUCKET_RANGE "BUCKETSIZE: value must be an integer between 1 and 255, inclusive."
#define ERR_BAD_ITERATIONS "Couldn't parse MAXITERATIONS"
#define ERR_ITERATIONS_RANGE \
    "MAXITERATIONS: value must be an integer between 1 and 65535, inclusive."
#define ERR_BAD_EXPANSION "Couldn't parse EXPANSION"
#define ERR_EXPANSION_RANGE \
    "EXPANSION: value must be an integer between 0 and 32768, inclusive."
#define ERR_FULL "Filter is full"
#define ERR_MAX_EXPANSIONS "ERR Maximum expansions reached"
#define ERR_DEL_MISSING "Not found"
#define ERR_GROWABLE_OPTIONS \
    "ERR growable filters take no BUCKETSIZE, MAXITERATIONS or EXPANSION"

/* A growable key keeps its compound rate under this, and so doubles about
 * 24 times from 1024 items (bk_growable_reach): 1.7e10 items. Its measured
 * rate is far lower (about 0.1% + 0.033% per doubling: 0.65% at 1e8). */
#define CF_GROWABLE_ERROR 0.01
#define CF_GROWABLE_EXPANSION 2

/*==========================================================================
 * Stages
 *==========================================================================*/

#define CF_FP_BITS 8 /* RedisBloom's fingerprints */

/* RedisBloom's bucket count: capacity / bucket size, rounded up to a power
 * of two (0 when that exceeds BK_CUCKOO_MAX_BUCKETS). */
static uint64_t stage_buckets(uint64_t capacity, uint32_t bucket_size)
{
    uint64_t want = capacity / bucket_size, buckets = 1;
    while (buckets < want && buckets <= BK_CUCKOO_MAX_BUCKETS) buckets <<= 1;
    return buckets > BK_CUCKOO_MAX_BUCKETS ? 0 : buckets;
}

/* Bytes a stage adds, for the memory checks before it is made: its table
 * (as if unpaired) and BK_CUCKOO_OVERHEAD_BYTES, the handle and padding of
 * a first stage, which also covers the 8-byte record of a later one. The
 * growth itself briefly holds the old and the new tables (one arena is
 * copied into the next, lib/cuckoo.c). */
uint64_t bkc__cf_stage_bytes(uint64_t capacity, uint32_t bucket_size)
{
    uint64_t buckets = stage_buckets(capacity, bucket_size);
    if (buckets == 0) return UINT64_MAX;
    return buckets * bucket_size * CF_FP_BITS / 8 + BK_CUCKOO_OVERHEAD_BYTES;
}

/* Capacity of stage i, or 0 when it overflows. */
static uint64_t stage_capacity(const bkc_value *v, uint32_t i)
{
    uint64_t cap = v->cf->capacity;
    for (uint32_t j = 0; j < i; j++) {
        if (v->cf->expansion > 1 && cap > UINT64_MAX / v->cf->expansion) return 0;
        cap *= v->cf->expansion ? v->cf->expansion : 1;
    }
    return cap;
}

/* Buckets of stage i (0 when it cannot exist). */
static uint64_t stage_buckets_of(const bkc_value *v, uint32_t i)
{
    uint64_t capacity = stage_capacity(v, i);
    return capacity ? stage_buckets(capacity, v->cf->bucket_size) : 0;
}

int bkc__cf_stage_create(const bkc_value *v, uint32_t stage, bk_filter **out)
{
    bk_cuckoo *f = NULL;
    uint64_t buckets = stage_buckets_of(v, stage);
    *out = NULL;
    if (buckets == 0) return BK_ESIZE;
    int rc = bk_cuckoo_create_params(&f, buckets, v->cf->bucket_size, CF_FP_BITS,
                                     v->cf->max_iterations, BK_DEFAULT_SEED);
    if (rc == BK_OK) *out = bk_cuckoo_as_filter(f);
    return rc;
}

/* RedisBloom's first stage: capacity / bucket size buckets (integer
 * division) rounded up to a power of two; 0 past 2^63. */
static uint64_t rb_buckets(uint64_t capacity, uint32_t bucket_size)
{
    uint64_t want = capacity / bucket_size, n = 1;
    while (n < want) {
        if (n > UINT64_MAX / 2) return 0;
        n <<= 1;
    }
    return n;
}

/* RedisBloom's CF.INFO Size of a chain reserved with v's settings once it
 * has `stages` stages: its 40-byte handle, a 16-byte record a stage and
 * the tables, one byte a slot, stage i of n0 e^i buckets (e the expansion
 * rounded up to a power of two, as RedisBloom rounds it). The same sum as
 * bk_rcuckoo_size; saturates at UINT64_MAX. */
#define RB_INFO_HANDLE 40u
#define RB_INFO_STAGE 16u

static uint64_t rb_info_size(const bkc_value *v, uint32_t stages)
{
    uint64_t bs = v->cf->bucket_size, e = 1;
    while (e < v->cf->expansion) e <<= 1;   /* 0 and 1 stay */
    if (v->cf->expansion == 0) e = 0;
    uint64_t n = rb_buckets(v->cf->capacity, v->cf->bucket_size);
    uint64_t total = RB_INFO_HANDLE + (uint64_t)RB_INFO_STAGE * stages;
    for (uint32_t i = 0; i < stages; i++) {
        if (n == 0 || n > (UINT64_MAX - total) / bs) return UINT64_MAX;
        total += n * bs;
        if (e > 1 && n > UINT64_MAX / e) n = 0;   /* the next one overflows */
        else n *= e;
    }
    return total;
}

/* The key's filter: a cuckoo filter (every stage), or a growable one
 * (NULL from the other). */
static bk_cuckoo *cf_of(const bkc_value *v)
{
    return bk_filter_as_cuckoo(v->filters[0]);
}

static bk_growable *growable_of(const bkc_value *v)
{
    return bk_filter_as_growable(v->filters[0]);
}

/* A filter taken over from RedisBloom, in its layout (lib/rcuckoo.c). */
static bk_rcuckoo *rcuckoo_of(const bkc_value *v)
{
    return bk_filter_as_rcuckoo(v->filters[0]);
}

/* The text of a failed add of RedisBloom's layout: as RedisBloom words
 * it, "Maximum expansions reached" once the chain has all its stages (32),
 * "Filter is full" for one that never grows. */
static const char *rcuckoo_error(bkc_ctx *c, const bk_rcuckoo *r, int rc)
{
    switch (rc) {
    case BK_EFULL: return bk_rcuckoo_stages(r) >= BKC_CF_MAX_STAGES ? ERR_MAX_EXPANSIONS : ERR_FULL;
    case BK_ELIMIT:
        return c->host_vt->memory_left(c->host) != SIZE_MAX ? BKC_ERR_MAXMEMORY : BKC_ERR_TOO_LARGE;
    case BK_ESIZE: return BKC_ERR_TOO_LARGE;
    default: return BKC_ERR_OOM;
    }
}

/* NULL when `bytes` more fit in memory, else the error text. */
static const char *fit_error(bkc_ctx *c, uint64_t bytes)
{
    size_t left = c->host_vt->memory_left(c->host);
    if (bytes <= bkc__memory_budget(c)) return NULL;
    return (left != SIZE_MAX && bytes > left) ? BKC_ERR_MAXMEMORY : BKC_ERR_TOO_LARGE;
}

/* Add the next stage. Returns NULL, or the error text (ERR_FULL when the
 * filter never grows, ERR_MAX_EXPANSIONS when it has all its stages). */
static const char *grow(bkc_ctx *c, bkc_key *k, bkc_value *v)
{
    bk_cuckoo *cf = cf_of(v);
    uint32_t stages = bk_cuckoo_stages(cf);
    if (v->cf->expansion == 0) return ERR_FULL;
    if (stages >= BKC_CF_MAX_STAGES || stages >= bkc_defaults_in_force.cf_max_expansions)
        return ERR_MAX_EXPANSIONS;
    uint64_t cap = stage_capacity(v, stages);
    if (cap == 0) return ERR_FULL;
    const char *err = fit_error(c, bkc__cf_stage_bytes(cap, v->cf->bucket_size));
    if (err) return err;
    int rc = bk_cuckoo_add_stage(cf, stage_buckets_of(v, stages));
    if (rc == BK_ESIZE) return BKC_ERR_TOO_LARGE;
    if (rc == BK_ENOMEM) return BKC_ERR_OOM;
    if (rc != BK_OK) return "ERR cannot create a cuckoo filter stage";
    if (k) c->host_vt->resized(k);
    return NULL;
}

static int cf_contains(const bkc_value *v, bkc_str item)
{
    return bk_filter_contains(v->filters[0], item.ptr, item.len) == 1;
}

enum { CF_ADDED = 1, CF_PRESENT = 0, CF_NOROOM = -1 };

/* Add one item (nx: only when absent). Returns CF_ADDED, CF_PRESENT or
 * CF_NOROOM with *err set (ERR_FULL or a memory error). *attempted is set
 * once an add reached a stage. */
/* An item's hash made ahead (a run's prefetch), with the seed it took:
 * used only by a cuckoo filter of that seed. */
typedef struct cf_hashed {
    bk_hash h;
    uint64_t seed;
} cf_hashed;

static int cf_add_one(bkc_ctx *c, bkc_key *k, bkc_value *v, bkc_str item, int nx,
                      const char **err, int *attempted, const cf_hashed *ahead)
{
    *err = NULL;
    if (nx && cf_contains(v, item)) return CF_PRESENT;
    bk_rcuckoo *r = rcuckoo_of(v);
    if (r != NULL) {   /* RedisBloom's own adds, growth within the budget */
        *attempted = 1;
        size_t before = bk_rcuckoo_bytes(r);
        uint64_t budget = bkc__memory_budget(c);
        uint64_t cap = before + budget < before ? UINT64_MAX : before + budget;
        bk_rcuckoo_set_max_bytes(r, cap < SIZE_MAX ? (size_t)cap : 0);
        int rc = nx ? bk_rcuckoo_add_unique(r, item.ptr, item.len)
                    : bk_rcuckoo_add(r, item.ptr, item.len);
        bk_rcuckoo_set_max_bytes(r, 0);
        if (k != NULL && bk_rcuckoo_bytes(r) != before) {
            bkc__cf_settings_sync(v);
            c->host_vt->resized(k);
        }
        if (rc >= 0) return rc == 1 ? CF_ADDED : CF_PRESENT;
        *err = rcuckoo_error(c, r, rc);
        return CF_NOROOM;
    }
    bk_growable *g = growable_of(v);
    if (g != NULL) {
        *attempted = 1;
        int rc = bk_growable_insert(g, item.ptr, item.len);
        if (rc == BK_OK) return CF_ADDED;
        /* BK_EFULL: a doubling past its rate, after about 24 of them */
        *err = rc == BK_EFULL    ? ERR_MAX_EXPANSIONS
               : rc == BK_ELIMIT ? (c->host_vt->memory_left(c->host) != SIZE_MAX
                                        ? BKC_ERR_MAXMEMORY
                                        : BKC_ERR_TOO_LARGE)
               : rc == BK_ENOMEM ? BKC_ERR_OOM
                                 : ERR_FULL;
        return CF_NOROOM;
    }
    for (;;) {
        *attempted = 1;
        bk_cuckoo *cf = ahead ? bk_filter_as_cuckoo(v->filters[0]) : NULL;
        int rc = cf != NULL && bk_cuckoo_seed(cf) == ahead->seed
                     ? bk_cuckoo_add_hash(cf, ahead->h)
                     : bk_filter_add(v->filters[0], item.ptr, item.len);
        if (rc >= 0) return CF_ADDED;
        if (rc != BK_EFULL && rc != BK_ECOPIES) {
            *err = rc == BK_ENOMEM ? BKC_ERR_OOM : ERR_FULL;
            return CF_NOROOM;
        }
        *err = grow(c, k, v);
        if (*err) return CF_NOROOM;
    }
}

/* A growable key's growth may take the memory budget and no more for one
 * command: cap_begin before its adds, cap_end after (which tells the host
 * when the bytes changed; a chain's grow() does that itself). */
static size_t cap_begin(bkc_ctx *c, bkc_value *v)
{
    bk_growable *g = growable_of(v);
    if (g == NULL) return 0;
    size_t before = bk_growable_bytes(g);
    uint64_t budget = bkc__memory_budget(c);
    uint64_t cap = before + budget < before ? UINT64_MAX : before + budget;
    if (cap < SIZE_MAX) bk_growable_set_max_bytes(g, (size_t)cap);
    return before;
}

static void cap_end(bkc_ctx *c, bkc_key *k, bkc_value *v, size_t before)
{
    bk_growable *g = growable_of(v);
    if (g == NULL) return;
    bk_growable_set_max_bytes(g, 0);
    if (bk_growable_bytes(g) != before) c->host_vt->resized(k);
}

/*==========================================================================
 * Creating
 *==========================================================================*/

typedef struct cf_opts {
    uint64_t capacity;
    uint32_t bucket_size, max_iterations, expansion;
    int capacity_given; /* CAPACITY (CF.INSERT), or CF.RESERVE */
    int growable;       /* GROWABLE (ours): a growable filter */
} cf_opts;

static void opts_default(cf_opts *o)
{
    o->capacity = bkc_defaults_in_force.cf_initial_size;
    o->bucket_size = bkc_defaults_in_force.cf_bucket_size;
    o->max_iterations = bkc_defaults_in_force.cf_max_iterations;
    o->expansion = bkc_defaults_in_force.cf_expansion;
    o->capacity_given = 0;
    o->growable = 0;
}

/* Whether a key made with o holds a growable filter (by_add: an add
 * creates it): GROWABLE, or an add with the default size. */
static int wants_growable(const cf_opts *o, int by_add)
{
    return o->growable ||
           (by_add && bkc_defaults_in_force.cf_growable && !o->capacity_given);
}

/* A capacity that is not an integer is "Bad capacity"; one below 1 is
 * kept as 0, for RedisBloom's later "at least (BucketSize * 2)". */
static int parse_capacity(bkc_ctx *c, bkc_str s, uint64_t *out)
{
    long long v;
    if (!bkc_parse_ll(s, &v)) {
        bkc__err(c, ERR_BAD_CAPACITY);
        return 0;
    }
    *out = v > 0 ? (uint64_t)v : 0;
    return 1;
}

/* Whether a key made with o holds RedisBloom's own layout: a bucket size
 * our chain does not have. */
static int wants_rcuckoo(const cf_opts *o)
{
    return !o->growable && o->bucket_size != 2 && o->bucket_size != 4 && o->bucket_size != 8;
}

/* RedisBloom's filter for o, into *out. */
static int rcuckoo_create(const cf_opts *o, bk_filter **out)
{
    bk_rcuckoo *r = NULL;
    int rc = bk_rcuckoo_create(&r, o->capacity, o->bucket_size, o->max_iterations, o->expansion);
    *out = rc == BK_OK ? bk_rcuckoo_as_filter(r) : NULL;
    return rc;
}

/* A growable multiset holding at least o->capacity items before it first
 * doubles, into *out. */
static int growable_create(const cf_opts *o, bk_filter **out)
{
    bk_growable *g = NULL;
    int rc = bk_growable_create_multiset(&g, o->capacity, CF_GROWABLE_ERROR, BK_DEFAULT_SEED);
    *out = rc == BK_OK ? bk_growable_as_filter(g) : NULL;
    return rc;
}

/* Build a new key's filter: a chain of one stage, or a growable filter
 * (wants_growable). Replies on failure. */
static bkc_value *cf_create(bkc_ctx *c, const cf_opts *o, int by_add)
{
    int growable = wants_growable(o, by_add);
    int rb = !growable && wants_rcuckoo(o);
    if (o->capacity < 2ull * o->bucket_size) {
        bkc__err(c, ERR_SMALL_CAPACITY);
        return NULL;
    }
    uint64_t bytes = bkc__cf_stage_bytes(o->capacity, o->bucket_size);
    if (growable) {
        size_t b = 0;
        bytes = bk_growable_estimate_bytes(o->capacity, &b) == BK_OK ? b : UINT64_MAX;
    } else if (rb) {
        /* one byte a slot; the handle and its stage record besides */
        uint64_t n = rb_buckets(o->capacity, o->bucket_size);
        bytes = n == 0 || n > (UINT64_MAX - BK_CUCKOO_OVERHEAD_BYTES) / o->bucket_size
                    ? UINT64_MAX
                    : n * o->bucket_size + BK_CUCKOO_OVERHEAD_BYTES;
    }
    if (!bkc__fits_create(c, bytes)) return NULL;
    bkc_value *v = bkc_value_new(BKC_KIND_CUCKOO);
    if (v == NULL) {
        bkc__err(c, BKC_ERR_OOM);
        return NULL;
    }
    v->cf->capacity = o->capacity;
    v->cf->bucket_size = o->bucket_size;
    v->cf->max_iterations = o->max_iterations;
    v->cf->expansion = growable ? CF_GROWABLE_EXPANSION : o->expansion;
    bk_filter *f = NULL;
    int rc = growable ? growable_create(o, &f)
             : rb     ? rcuckoo_create(o, &f)
                      : bkc__cf_stage_create(v, 0, &f);
    if (rc == BK_OK && bkc_value_push(v, f) != BK_OK) {
        bk_filter_free(f);
        rc = BK_ENOMEM;
    }
    if (rc != BK_OK) {
        bkc_value_free(v);
        if (rc == BK_ESIZE || rc == BK_ENOMEM) bkc__err(c, BKC_ERR_CREATE_MEM);
        else bkc__lib_error(c, rc);
        return NULL;
    }
    return v;
}


/* Open WRITE for adds, creating with o when missing unless nocreate.
 * NULL: replied and closed. */
static bkc_value *open_for_add(bkc_ctx *c, bkc_str name, const cf_opts *o, int nocreate,
                               bkc_key **k, int *created)
{
    bkc_value *v;
    *created = 0;
    int st = bkc__open(c, name, BKC_OPEN_WRITE, BKC_KIND_CUCKOO, k, &v);
    if (st == BKC__FAILED) return NULL;
    if (st == BKC__WRONG) {
        bkc__err(c, BKC_ERR_WRONGTYPE);
    } else if (st == BKC__FOUND) {
        return v;
    } else if (nocreate) {
        bkc__err(c, BKC_ERR_NOT_FOUND);
    } else {
        bkc_value *nv = cf_create(c, o, 1);
        if (nv != NULL && bkc__store(c, *k, nv)) {
            *created = 1;
            return c->host_vt->value(*k);
        }
    }
    bkc__close(c, *k);
    return NULL;
}

/*==========================================================================
 * Commands
 *==========================================================================*/

/* CF.RESERVE's numeric options in the order RedisBloom checks them (the
 * first one wrong is the error; src/rebloom.c), with its limits and texts.
 * Each is read from its first occurrence, as RedisBloom reads it. */
static const struct reserve_option {
    const char *keyword;
    long long min, max;
    const char *not_integer, *out_of_range;
} reserve_options[] = {
    {"MAXITERATIONS", 1, CF_MAX_ITERATIONS, ERR_BAD_ITERATIONS, ERR_ITERATIONS_RANGE},
    {"BUCKETSIZE", 1, CF_MAX_BUCKET_SIZE, ERR_BAD_BUCKET, ERR_BUCKET_RANGE},
    {"EXPANSION", 0, CF_MAX_EXPANSION, ERR_BAD_EXPANSION, ERR_EXPANSION_RANGE},
};
enum { RESERVE_OPTIONS = sizeof(reserve_options) / sizeof(reserve_options[0]) };

void bkc_cmd_cf_reserve(bkc_ctx *c, int argc, const bkc_str *argv)
{
    cf_opts o;
    const bkc_str *given[RESERVE_OPTIONS] = {NULL};
    opts_default(&o);
    uint32_t *field[RESERVE_OPTIONS] = {&o.max_iterations, &o.bucket_size, &o.expansion};
    if (!parse_capacity(c, argv[2], &o.capacity)) return;
    o.capacity_given = 1;
    int tuned = 0; /* BUCKETSIZE, MAXITERATIONS or EXPANSION given */
    for (int i = 3; i < argc; i += 2) {
        if (bkc_streq(argv[i], "GROWABLE")) {
            o.growable = 1;
            i--; /* a flag: no value */
            continue;
        }
        int j = 0;
        while (j < RESERVE_OPTIONS && !bkc_streq(argv[i], reserve_options[j].keyword)) j++;
        if (j == RESERVE_OPTIONS) {
            bkc__err(c, BKC_ERR_UNKNOWN_ARG);
            return;
        }
        if (i + 1 >= argc) {
            bkc__arity_error(c, argv);
            return;
        }
        if (given[j] == NULL) given[j] = &argv[i + 1];
        tuned = 1;
    }
    for (int j = 0; j < RESERVE_OPTIONS; j++) {
        const struct reserve_option *opt = &reserve_options[j];
        long long x;
        if (given[j] == NULL) continue;
        if (!bkc_parse_ll(*given[j], &x)) {
            bkc__err(c, opt->not_integer);
            return;
        }
        if (x < opt->min || x > opt->max) {
            bkc__err(c, opt->out_of_range);
            return;
        }
        *field[j] = (uint32_t)x;
    }
    if (o.growable && tuned) {
        bkc__err(c, ERR_GROWABLE_OPTIONS);
        return;
    }
    if (o.capacity < 2ull * o.bucket_size) {
        bkc__err(c, ERR_SMALL_CAPACITY);
        return;
    }
    bkc_key *k;
    if (bkc__open_new(c, argv[1], BKC_KIND_CUCKOO, 1, &k))
        bkc__store_new(c, argc, argv, k, cf_create(c, &o, 0));
}

/* An add that created its key is logged (and replicated) as the CF.INSERT
 * (nx: CF.INSERTNX) that makes the same filter whatever the replaying
 * side's cf_growable says: its CAPACITY, GROWABLE for a growable one (a
 * chain's other settings are the defaults, as they were here), and the
 * same items. One record: one change, whole or not at all. */
static void wrote_created(bkc_ctx *c, int argc, const bkc_str *sent, const bkc_value *v,
                          int nx, const bkc_str *items, size_t n)
{
    char capacity[24];
    bkc_str head[6];
    int k = 0;
    head[k++] = nx ? (bkc_str){"CF.INSERTNX", 11} : (bkc_str){"CF.INSERT", 9};
    head[k++] = sent[1];
    snprintf(capacity, sizeof(capacity), "%llu", (unsigned long long)v->cf->capacity);
    head[k++] = (bkc_str){"CAPACITY", 8};
    head[k++] = (bkc_str){capacity, strlen(capacity)};
    if (growable_of(v) != NULL) head[k++] = (bkc_str){"GROWABLE", 8};
    head[k++] = (bkc_str){"ITEMS", 5};
    bkc__wrote_as(c, argc, sent, head, k, items, n);
}

/* One CF.ADD / CF.ADDNX of an open key: its reply and its log record. */
/* Add one item and answer it; 1 when the add was attempted (the filter
 * may have changed: the caller logs it). */
static int add_answer(bkc_ctx *c, bkc_key *k, bkc_value *v, bkc_str item, int nx,
                      const cf_hashed *ahead)
{
    int attempted = 0;
    const char *err;
    size_t before = cap_begin(c, v);
    int r = cf_add_one(c, k, v, item, nx, &err, &attempted, ahead);
    cap_end(c, k, v, before);
    if (r == CF_NOROOM) bkc__err(c, err);
    else bkc__bool(c, r);
    return attempted;
}

static void add_item(bkc_ctx *c, bkc_key *k, bkc_value *v, const bkc_str *argv, int nx,
                     int created)
{
    int attempted = add_answer(c, k, v, argv[2], nx, NULL);
    if (created) wrote_created(c, 3, argv, v, nx, argv + 2, 1);
    else if (attempted) bkc__wrote(c, 3, argv);
}

/* The log records of a run of adds to one existing key: up to RUN_LOG
 * attempted items become one "CF.INSERT[NX] key NOCREATE ITEMS ..." record,
 * which replays as the same adds in the same order (CF.INSERT runs each
 * item through cf_add_one as CF.ADD does, errors included), instead of one
 * record each: encoding and checksumming a record costs more than the add. */
enum { RUN_LOG = 64 };
typedef struct run_log {
    bkc_str argv[4 + RUN_LOG];
    const bkc_str *last;   /* the last item's own CF.ADD (a record of one) */
    size_t n;
} run_log;

static void run_log_flush(bkc_ctx *c, run_log *l)
{
    if (l->n == 1) bkc__wrote(c, 3, l->last);
    else if (l->n > 1) bkc__wrote(c, 4 + (int)l->n, l->argv);
    l->n = 0;
}

static void run_log_add(bkc_ctx *c, run_log *l, const bkc_str *argv)
{
    l->argv[4 + l->n++] = argv[2];
    l->last = argv;
    if (l->n == RUN_LOG) run_log_flush(c, l);
}

static void add_single(bkc_ctx *c, int argc, const bkc_str *argv, int nx)
{
    cf_opts o;
    bkc_key *k;
    int created;
    (void)argc;
    opts_default(&o);
    bkc_value *v = open_for_add(c, argv[1], &o, 0, &k, &created);
    if (v == NULL) return;
    add_item(c, k, v, argv, nx, created);
    bkc__close(c, k);
}

void bkc_cf_add_many(bkc_ctx *c, const bkc_str *const *argvs, size_t n, int nx)
{
    cf_opts o;
    bkc_key *k;
    int created;
    if (n == 0) return;
    opts_default(&o);
    bkc_value *v = open_for_add(c, argvs[0][1], &o, 0, &k, &created);
    if (v == NULL) {
        /* the first got the error; each of the others gets its own */
        for (size_t i = 1; i < n; i++) add_single(c, 3, argvs[i], nx);
        return;
    }
    /* A chain's adds are answered one by one (a full stage grows before
     * the next item), so they cannot be one library batch: the buckets of
     * the item AHEAD places on are hinted instead, overlapping the misses. */
    enum { AHEAD = 6 };
    bk_cuckoo *cf = growable_of(v) ? NULL : bk_filter_as_cuckoo(v->filters[0]);
    cf_hashed ring[AHEAD];   /* the hashes made for the prefetch, used by the add */
    for (size_t i = 0; cf && i < AHEAD && i < n; i++) {
        ring[i].seed = bk_cuckoo_seed(cf);
        ring[i].h = bk_hash_key(argvs[i][2].ptr ? argvs[i][2].ptr : "", argvs[i][2].len,
                                ring[i].seed);
        bk_cuckoo_prefetch_hash(cf, ring[i].h);
    }
    run_log log = {.argv = {{nx ? "CF.INSERTNX" : "CF.INSERT", nx ? 11u : 9u},
                            argvs[0][1], {"NOCREATE", 8}, {"ITEMS", 5}}};
    for (size_t i = 0; i < n; i++) {
        cf_hashed mine;
        const cf_hashed *ahead = NULL;
        if (cf) {   /* this item's hash, then the one AHEAD items on */
            mine = ring[i % AHEAD];
            ahead = &mine;
            if (i + AHEAD < n) {
                const bkc_str *it = &argvs[i + AHEAD][2];
                cf_hashed *next = &ring[i % AHEAD];
                next->seed = bk_cuckoo_seed(cf);
                next->h = bk_hash_key(it->ptr ? it->ptr : "", it->len, next->seed);
                bk_cuckoo_prefetch_hash(cf, next->h);
            }
        }
        if (created && i == 0) add_item(c, k, v, argvs[0], nx, 1);   /* logs the creation */
        else if (add_answer(c, k, v, argvs[i][2], nx, ahead)) run_log_add(c, &log, argvs[i]);
        if (cf && bk_filter_as_cuckoo(v->filters[0]) != cf) cf = NULL;   /* replaced */
    }
    run_log_flush(c, &log);   /* under the key's lock, as every record */
    bkc__close(c, k);
}

void bkc_cmd_cf_add(bkc_ctx *c, int argc, const bkc_str *argv)
{
    add_single(c, argc, argv, 0);
}

void bkc_cmd_cf_addnx(bkc_ctx *c, int argc, const bkc_str *argv)
{
    add_single(c, argc, argv, 1);
}

/* One of CF.INSERT's options before ITEMS (bkc__option_fn). */
static int insert_option(bkc_ctx *c, int argc, const bkc_str *argv, int *i, void *vo)
{
    cf_opts *o = vo;
    if (bkc_streq(argv[*i], "GROWABLE")) {
        o->growable = 1;
        return 1;
    }
    if (!bkc_streq(argv[*i], "CAPACITY")) {
        bkc__err(c, BKC_ERR_UNKNOWN_ARG);
        return 0;
    }
    if (*i + 1 >= argc) {
        bkc__arity_error(c, argv);
        return 0;
    }
    if (!parse_capacity(c, argv[++*i], &o->capacity)) return 0;
    o->capacity_given = 1;
    /* RedisBloom checks this before looking at the key, so an existing key
     * answers it too */
    if (o->capacity < 2ull * o->bucket_size) {
        bkc__err(c, ERR_SMALL_CAPACITY);
        return 0;
    }
    return 1;
}

static void insert(bkc_ctx *c, int argc, const bkc_str *argv, int nx)
{
    cf_opts o;
    int nocreate;
    opts_default(&o);
    int i = bkc__insert_options(c, argc, argv, &nocreate, insert_option, &o);
    if (i == 0) return;
    bkc_key *k;
    int created, attempted = 0;
    size_t n = (size_t)(argc - i);
    int *res = bkc__malloc(n * sizeof(int));
    if (res == NULL) {
        bkc__err(c, BKC_ERR_OOM);
        return;
    }
    bkc_value *v = open_for_add(c, argv[1], &o, nocreate, &k, &created);
    if (v == NULL) {
        bkc__free(res);
        return;
    }
    const char *err;
    size_t before = cap_begin(c, v);
    for (size_t j = 0; j < n; j++)
        res[j] = cf_add_one(c, k, v, argv[i + (int)j], nx, &err, &attempted, NULL);
    cap_end(c, k, v, before);
    bkc__array(c, n);
    /* RESP3: CF.INSERT's elements are booleans (-1, no room, stays an
     * integer); CF.INSERTNX's stay integers, as in RedisBloom */
    for (size_t j = 0; j < n; j++) {
        if (nx || res[j] == CF_NOROOM) bkc__int(c, res[j]);
        else bkc__bool(c, res[j]);
    }
    if (created) wrote_created(c, argc, argv, v, nx, argv + i, n);
    else if (attempted) bkc__wrote(c, argc, argv);
    bkc__close(c, k);
    bkc__free(res);
}

void bkc_cmd_cf_insert(bkc_ctx *c, int argc, const bkc_str *argv)
{
    insert(c, argc, argv, 0);
}

void bkc_cmd_cf_insertnx(bkc_ctx *c, int argc, const bkc_str *argv)
{
    insert(c, argc, argv, 1);
}

/* Lookups: a missing key or another kind answers "absent". */
void bkc_cmd_cf_exists(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    int st;
    (void)argc;
    bkc_value *v = bkc__open_lookup(c, argv[1], BKC_KIND_CUCKOO, &k, &st);
    if (st == BKC__FAILED) return;
    bkc__bool(c, v ? cf_contains(v, argv[2]) : 0);
    bkc__close(c, k);
}

void bkc_cmd_cf_mexists(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__cmd_mexists(c, argc, argv, BKC_KIND_CUCKOO, 1);
}

void bkc_cmd_cf_count(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__cmd_count(c, argc, argv, BKC_KIND_CUCKOO);
}

void bkc_cmd_cf_del(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    bkc_value *v;
    int st = bkc__open(c, argv[1], BKC_OPEN_WRITE, BKC_KIND_CUCKOO, &k, &v);
    if (st == BKC__FAILED) return;
    if (st == BKC__MISSING) {
        bkc__err(c, ERR_DEL_MISSING);
    } else if (st == BKC__WRONG) {
        bkc__err(c, BKC_ERR_WRONGTYPE);
    } else {
        /* the newest stage holding the item loses one copy (a growable
         * filter: the longest matching entry) */
        int removed = rcuckoo_of(v) ? bk_rcuckoo_remove(rcuckoo_of(v), argv[2].ptr, argv[2].len) == 1
                                    : bk_filter_remove(v->filters[0], argv[2].ptr, argv[2].len) == BK_OK;
        if (removed) {
            v->cf->deleted++;
            bkc__cf_settings_sync(v); /* RedisBloom's layout counts its own */
            bkc__wrote(c, argc, argv);
        }
        bkc__bool(c, removed);
    }
    bkc__close(c, k);
}

/* RedisBloom's sizing rounds capacity / bucket size up to a power of two
 * of buckets, so a capacity just past a power of two pays for almost twice
 * the slots it asked for. When the first stage's slots would be under 60%
 * used at its capacity, CF.INFO says so in one extra pair ("Warning") after
 * RedisBloom's eight (redis-py's CFInfo and node-redis 5's CF.INFO build a
 * dict of the pairs, so both ignore it; docs/COMMANDS.md). 1 and the text
 * in buf, or 0. */
#define CF_WASTE_BELOW_PERCENT 60

static int waste_note(const bkc_value *v, char *buf, size_t cap)
{
    uint64_t buckets = stage_buckets_of(v, 0);
    uint64_t slots = buckets * v->cf->bucket_size;
    if (buckets == 0 || v->cf->capacity * 100 >= slots * CF_WASTE_BELOW_PERCENT) return 0;
    snprintf(buf, cap,
             "capacity %llu fills %llu%% of %llu slots (%llu buckets of %u: bucket "
             "counts are powers of two); a capacity of up to %llu costs the same",
             (unsigned long long)v->cf->capacity,
             (unsigned long long)(v->cf->capacity * 100 / slots), (unsigned long long)slots,
             (unsigned long long)buckets, v->cf->bucket_size,
             (unsigned long long)(slots + v->cf->bucket_size - 1));
    return 1;
}

/* What CF.INFO (and CF.DEBUG) report of a key, whatever its layout. */
typedef struct cf_figures {
    uint64_t size, buckets, items, deleted;
    uint32_t filters, bucket_size, expansion, max_iterations;
} cf_figures;

static void figures_of(const bkc_value *v, cf_figures *out)
{
    const bk_rcuckoo *r = rcuckoo_of(v);
    const bk_growable *g = growable_of(v);
    const bk_cuckoo *cf = cf_of(v);
    if (r != NULL) {   /* RedisBloom's own numbers */
        *out = (cf_figures){bk_rcuckoo_size(r),        bk_rcuckoo_buckets(r),
                            bk_rcuckoo_items(r),       bk_rcuckoo_deleted(r),
                            bk_rcuckoo_stages(r),      bk_rcuckoo_bucket_size(r),
                            bk_rcuckoo_expansion(r),   bk_rcuckoo_max_iterations(r)};
        return;
    }
    out->deleted = v->cf->deleted;
    out->bucket_size = v->cf->bucket_size;
    out->expansion = v->cf->expansion;
    out->max_iterations = v->cf->max_iterations;
    if (g != NULL) {   /* its bytes; its capacity in buckets of the key's size; one filter */
        out->size = bk_growable_bytes(g);
        out->buckets = bk_growable_capacity(g) / v->cf->bucket_size;
        out->items = bk_growable_items(g);
        out->filters = 1;
    } else {           /* RedisBloom's Size for the same reserve and stages */
        out->filters = bk_cuckoo_stages(cf);
        out->size = rb_info_size(v, out->filters);
        out->buckets = bk_cuckoo_buckets(cf);
        out->items = bk_cuckoo_items(cf);
    }
}

/* CF.INFO and CF.DEBUG: argv[1] opened for reading, its figures taken
 * and reply() answering from them; missing or another kind answered by
 * bkc__open_found. */
static void reply_figures(bkc_ctx *c, const bkc_str *argv,
                          void (*reply)(bkc_ctx *c, const bkc_value *v, const cf_figures *f))
{
    bkc_key *k;
    cf_figures f;
    bkc_value *v = bkc__open_found(c, argv[1], BKC_OPEN_READ, BKC_KIND_CUCKOO, &k);
    if (v == NULL) return;
    figures_of(v, &f);
    reply(c, v, &f);
    bkc__close(c, k);
}

static void info_reply(bkc_ctx *c, const bkc_value *v, const cf_figures *f)
{
    static const char *const labels[8] = {
        "Size", "Number of buckets", "Number of filters", "Number of items inserted",
        "Number of items deleted", "Bucket size", "Expansion rate", "Max iterations"};
    char note[200];
    int noted = cf_of(v) != NULL && waste_note(v, note, sizeof(note));
    long long vals[8] = {(long long)f->size,  (long long)f->buckets, f->filters,
                         (long long)f->items, (long long)f->deleted, f->bucket_size,
                         f->expansion,        f->max_iterations};
    c->reply->vt->map(c->reply, 8 + (size_t)noted);
    for (int i = 0; i < 8; i++) {
        bkc__simple(c, labels[i]);
        bkc__int(c, vals[i]);
    }
    if (noted) {
        bkc__simple(c, "Warning");
        c->reply->vt->bulk(c->reply, note, strlen(note));
    }
}

void bkc_cmd_cf_info(bkc_ctx *c, int argc, const bkc_str *argv)
{
    (void)argc;
    reply_figures(c, argv, info_reply);
}

void bkc_cmd_cf_scandump(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__scandump(c, argc, argv, BKC_KIND_CUCKOO);
}

void bkc_cmd_cf_loadchunk(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__loadchunk(c, argc, argv, BKC_KIND_CUCKOO);
}

/* RedisBloom's CF.DEBUG: one bulk string of the filter's settings and
 * counts, in its words and order; here the numbers CF.INFO reports. */
static void debug_reply(bkc_ctx *c, const bkc_value *v, const cf_figures *f)
{
    (void)v;
    char line[200];
    int n = snprintf(line, sizeof(line),
                     "bktsize:%u buckets:%llu items:%llu deletes:%llu filters:%u "
                     "max_iterations:%u expansion:%u",
                     f->bucket_size, (unsigned long long)f->buckets,
                     (unsigned long long)f->items, (unsigned long long)f->deleted, f->filters,
                     f->max_iterations, f->expansion);
    c->reply->vt->bulk(c->reply, line, (size_t)n);
}

void bkc_cmd_cf_debug(bkc_ctx *c, int argc, const bkc_str *argv)
{
    (void)argc;
    reply_figures(c, argv, debug_reply);
}
