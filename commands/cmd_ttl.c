/*
 * cmd_ttl.c - TF.*: the per-item TTL filter (our addition).
 *
 * "Was this item added with a time to live that has not run out yet?" A
 * TF key holds one bk_ttl filter, of either layout (ttl.c):
 *   - the table (the default; SLOTS s, default 12): fingerprints stored
 *     with their expiry slot, two buckets per item, a fixed size; an add
 *     that finds no room among live items answers ERR_TABLE_FULL;
 *   - GENERATIONS g: g generations by expiry time, each a list of
 *     cache-blocked segments, growing past capacity.
 * An item added with TTL d ms is found until d ms after its add, and gone
 * (but for false positives) by d + granularity ms, granularity =
 * ceil(max_ttl / s), or ceil(max_ttl / (g - 1)).
 *
 * Time is the host's clock, ctx->now_ms, and only moves forward (an
 * earlier time is taken as the latest seen). TF.EXISTS looks at now_ms
 * without moving the clock.
 *
 * There is no natural default max TTL, so adds do not create keys: TF.ADD
 * on a missing key answers "ERR not found"; create with TF.RESERVE.
 *
 * Replay: an add is logged (propagated) as TF.ADDAT key expires_at item
 * ..., the absolute expiry in milliseconds since the epoch, so that a
 * replay at any later time (the module's AOF, a replica) or at the
 * record's own time (the server's log) gives every item the expiry it
 * had: restarts never extend a life. Only the items that were added are
 * logged (an item refused for memory is not).
 *
 * Growth (generations only): a generation that receives more than its
 * segment's share takes another segment (ttl.c): within the memory budget
 * (BKC_ERR_MAXMEMORY beyond it), reported to the host with resized().
 *
 * Locking: adds clear and allocate segments: WRITE. Lookups: READ.
 */
#include <stdio.h>  /* snprintf */
#include <string.h> /* strlen */

#include "cmd_internal.h"

#define ERR_BAD_MAX_TTL "ERR bad max TTL: a whole number of milliseconds, at least 1"
/* The longest max TTL: ten years (as WF.RESERVE's window). Longer ones are
 * surely a unit mistake, and now_ms + max TTL must not overflow. */
#define MAX_TTL_MS 315360000000LL
#define ERR_MAX_TTL_RANGE "ERR bad max TTL: at most 315360000000 ms (10 years)"
#define ERR_BAD_TTL "ERR bad TTL: a whole number of milliseconds, at least 1"
#define ERR_BAD_EXPIRY "ERR bad expiry time: a whole number of milliseconds since the epoch"
#define ERR_FULL "ERR TTL filter is full: 4095 segments"
#define ERR_TABLE_FULL \
    "ERR TTL filter is full: no room among its live items (reserve a larger capacity)"
#define ERR_TABLE_RATE "ERR error rate too low for the TTL table layout: use GENERATIONS"
#define ERR_LAYOUTS "ERR GENERATIONS and SLOTS cannot be given together"

/* Bytes the filter takes at creation: g segments of a blocked filter of
 * ceil(n / (g - 1)) keys at p / (g - 1). UINT64_MAX when too large. */
static uint64_t ttl_bytes(uint64_t capacity, double fpr, uint32_t g)
{
    uint64_t seg = capacity / (g - 1) + (capacity % (g - 1) != 0);
    uint64_t bits = 0;
    if (bk_blocked_optimal(seg, fpr / (double)(g - 1), &bits, NULL) != BK_OK)
        return UINT64_MAX;
    uint64_t per = bits / 8 + 512;
    if (per > UINT64_MAX / g) return UINT64_MAX;
    return per * g + 1024;
}

/* g generations, or (g = 0) the table with `slots` slots. */
static bkc_value *tf_create(bkc_ctx *c, uint64_t capacity, double error, uint64_t max_ttl,
                            uint32_t g, uint32_t slots)
{
    /* (a table too large or at a rate too low: no size; the create below
     * says which) */
    size_t table = g ? 0 : bk_ttl_table_size(capacity, error, slots);
    if ((g || table) && !bkc__may_make(c, g ? ttl_bytes(capacity, error, g) : table))
        return NULL;
    bk_ttl *f = NULL;
    int rc = g ? bk_ttl_create(&f, capacity, error, max_ttl, g, c->now_ms, BK_DEFAULT_SEED)
               : bk_ttl_create_table(&f, capacity, error, max_ttl, slots, c->now_ms,
                                     BK_DEFAULT_SEED);
    if (rc == BK_EFPR) { /* in (0, 1) (checked), but below 32-bit entries' reach */
        bkc__err(c, ERR_TABLE_RATE);
        return NULL;
    }
    return bkc__made(c, rc, BKC_KIND_TTL, bk_ttl_as_filter(f));
}

/* [GENERATIONS g | SLOTS s] from argv[from]: *g = 0 for the table. */
static int arg_layout(bkc_ctx *c, int argc, const bkc_str *argv, int from, long long *g,
                      long long *slots)
{
    *g = 0;
    *slots = BK_TTL_DEFAULT_SLOTS;
    bkc__int_option opts[] = {
        {"GENERATIONS", "generations", BK_TTL_MIN_GENERATIONS, BK_TTL_MAX_GENERATIONS, g, 0},
        {"SLOTS", "slots", 1, BK_TTL_MAX_SLOTS, slots, 0},
    };
    if (!bkc__arg_int_options(c, argc, argv, from, opts, 2)) return 0;
    if (opts[0].given && opts[1].given) {
        bkc__err(c, ERR_LAYOUTS);
        return 0;
    }
    return 1;
}

void bkc_cmd_tf_reserve(bkc_ctx *c, int argc, const bkc_str *argv)
{
    double error;
    uint64_t capacity;
    long long g, slots, max_ttl;
    if (!bkc__arg_error_rate(c, argv[2], &error)) return;
    if (!bkc__arg_capacity(c, argv[3], &capacity)) return;
    if (!bkc_parse_ll(argv[4], &max_ttl) || max_ttl <= 0) {
        bkc__err(c, ERR_BAD_MAX_TTL);
        return;
    }
    if (max_ttl > MAX_TTL_MS) {
        bkc__err(c, ERR_MAX_TTL_RANGE);
        return;
    }
    if (!arg_layout(c, argc, argv, 5, &g, &slots)) return;
    bkc_key *k;
    if (bkc__open_new(c, argv[1], BKC_KIND_TTL, 0, &k))
        bkc__store_new(c, argc, argv, k,
                       tf_create(c, capacity, error, (uint64_t)max_ttl, (uint32_t)g,
                                 (uint32_t)slots));
}

/* The reply text of a failed add. */
static void add_error(bkc_ctx *c, const bk_ttl *f, int rc)
{
    if (rc == BK_ELIMIT) bkc__err(c, BKC_ERR_MAXMEMORY);
    else if (rc == BK_EFULL)
        bkc__err(c, bk_ttl_layout(f) == BK_TTL_LAYOUT_TABLE ? ERR_TABLE_FULL : ERR_FULL);
    else if (rc == BK_ENOMEM) bkc__err(c, BKC_ERR_OOM);
    else bkc__lib_error(c, rc);
}

/* Add items[0 .. n) of an open TF key, all expiring at `expires_at`: one
 * reply each (array: as an array), then one log record TF.ADDAT key
 * expires_at with the items that were added. */
static void add_until(bkc_ctx *c, bkc_key *k, bk_ttl *f, int argc, const bkc_str *argv,
                      const bkc_str *items, size_t n, uint64_t expires_at, int array)
{
    size_t before = bk_ttl_bytes(f);
    /* growth may take the budget and no more, for this command */
    uint64_t budget = bkc__memory_budget(c);
    uint64_t cap = before + budget < before ? UINT64_MAX : before + budget;
    bk_ttl_set_max_bytes(f, cap < SIZE_MAX ? (size_t)cap : 0);
    bkc_str stack[16];
    bkc_str *logged = n <= 16 ? stack : bkc__malloc(n * sizeof(*logged));
    size_t nlogged = 0;
    if (array) bkc__array(c, n);
    for (size_t i = 0; i < n; i++) {
        int rc = bk_ttl_add_until(f, items[i].ptr, items[i].len, expires_at, c->now_ms);
        if (rc < 0) {
            add_error(c, f, rc);
            continue;
        }
        bkc__int(c, rc);
        if (logged != NULL) logged[nlogged] = items[i];
        nlogged++;
    }
    bk_ttl_set_max_bytes(f, 0);
    if (bk_ttl_bytes(f) != before) c->host_vt->resized(k);
    if (nlogged > 0) {
        char when[24];
        snprintf(when, sizeof(when), "%llu", (unsigned long long)expires_at);
        bkc_str head[3] = {{"TF.ADDAT", 8}, argv[1], {when, strlen(when)}};
        /* Without memory for the list, every item given (one refused then
         * may be added by a replay: only when memory ran out twice). */
        if (logged != NULL) bkc__wrote_as(c, argc, argv, head, 3, logged, nlogged);
        else bkc__wrote_as(c, argc, argv, head, 3, items, n);
    }
    if (logged != stack) bkc__free(logged);
}

/* The TTL argument: 1 ... , or 0 after replying. */
static int arg_ttl(bkc_ctx *c, bkc_str s, uint64_t *out)
{
    long long v;
    if (!bkc_parse_ll(s, &v) || v <= 0) {
        bkc__err(c, ERR_BAD_TTL);
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

/* Open a TF key to add: its filter, or NULL after replying. */
static bk_ttl *open_for_add(bkc_ctx *c, bkc_str name, bkc_key **k)
{
    bkc_value *v = bkc__open_found(c, name, BKC_OPEN_WRITE, BKC_KIND_TTL, k);
    return v ? bk_filter_as_ttl(v->filters[0]) : NULL;
}

/* TF.ADD key item ttl_ms and TF.MADD key ttl_ms item [item ...]. */
static void add_with_ttl(bkc_ctx *c, int argc, const bkc_str *argv, int multi)
{
    uint64_t ttl;
    if (!arg_ttl(c, multi ? argv[2] : argv[3], &ttl)) return;
    bkc_key *k;
    bk_ttl *f = open_for_add(c, argv[1], &k);
    if (f == NULL) return;
    if (ttl > bk_ttl_max_ttl(f)) {
        char msg[96];
        snprintf(msg, sizeof(msg), "ERR TTL %llu ms exceeds the filter's max TTL of %llu ms",
                 (unsigned long long)ttl, (unsigned long long)bk_ttl_max_ttl(f));
        bkc__err(c, msg);
    } else {
        uint64_t expires_at = bk_ttl_expiry(f, ttl, c->now_ms);
        if (multi) add_until(c, k, f, argc, argv, argv + 3, (size_t)(argc - 3), expires_at, 1);
        else add_until(c, k, f, argc, argv, argv + 2, 1, expires_at, 0);
    }
    bkc__close(c, k);
}

void bkc_cmd_tf_add(bkc_ctx *c, int argc, const bkc_str *argv)
{
    add_with_ttl(c, argc, argv, 0);
}

void bkc_cmd_tf_madd(bkc_ctx *c, int argc, const bkc_str *argv)
{
    add_with_ttl(c, argc, argv, 1);
}

/* TF.ADDAT key expires_at_ms item [item ...]: what adds are logged as. */
void bkc_cmd_tf_addat(bkc_ctx *c, int argc, const bkc_str *argv)
{
    long long when;
    if (!bkc_parse_ll(argv[2], &when) || when < 0) {
        bkc__err(c, ERR_BAD_EXPIRY);
        return;
    }
    bkc_key *k;
    bk_ttl *f = open_for_add(c, argv[1], &k);
    if (f == NULL) return;
    uint64_t reach = bk_ttl_expiry(f, bk_ttl_max_ttl(f), c->now_ms);
    if ((uint64_t)when > reach) {
        char msg[128];
        snprintf(msg, sizeof(msg),
                 "ERR expiry time is more than the max TTL (%llu ms) after the filter's clock",
                 (unsigned long long)bk_ttl_max_ttl(f));
        bkc__err(c, msg);
    } else {
        add_until(c, k, f, argc, argv, argv + 3, (size_t)(argc - 3), (uint64_t)when, 1);
    }
    bkc__close(c, k);
}

/* At the command's clock (bkc__reply_contains_many). */
void bkc_cmd_tf_exists(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__cmd_lookups(c, argc, argv, BKC_KIND_TTL, 0, 0);
}

void bkc_cmd_tf_mexists(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__cmd_lookups(c, argc, argv, BKC_KIND_TTL, 1, 0);
}

enum {
    F_CAPACITY, F_SIZE, F_ITEMS, F_LIVE, F_ERROR, F_MAXTTL, F_GRANULARITY, F_GENERATIONS,
    F_SEGMENTS, F_BOUND, F_LAYOUT, F_SLOTS, F_COUNT
};
static const bkc__info_field info_fields[F_COUNT] = {
    {"CAPACITY", "Capacity"},
    {"SIZE", "Size"},
    {"ITEMS", "Number of items inserted"},
    {"LIVE", "Live items"},
    {"ERROR", "Error rate"},
    {"MAXTTL", "Max TTL"},
    {"GRANULARITY", "Granularity"},
    {"GENERATIONS", "Generations"},
    {"SEGMENTS", "Segments"},
    {"BOUND", "Error bound now"},
    {"LAYOUT", "Layout"},
    {"SLOTS", "Slots"},
};

static void info_value(bkc_ctx *c, const void *src, int field)
{
    const bk_ttl_stats *st = src;
    switch (field) {
    case F_CAPACITY: bkc__int(c, (long long)st->capacity); break;
    case F_SIZE: bkc__int(c, (long long)st->bytes); break;
    case F_ITEMS: bkc__int(c, (long long)st->added); break;
    case F_LIVE: bkc__int(c, (long long)st->live_items); break;
    case F_ERROR: c->reply->vt->dbl(c->reply, st->target_fpr); break;
    case F_MAXTTL: bkc__int(c, (long long)st->max_ttl); break;
    case F_GRANULARITY: bkc__int(c, (long long)st->granularity); break;
    case F_GENERATIONS: bkc__int(c, (long long)st->generations); break;
    case F_SEGMENTS: bkc__int(c, (long long)st->segments); break;
    case F_LAYOUT:
        bkc__simple(c, st->layout == BK_TTL_LAYOUT_TABLE ? "table" : "generations");
        break;
    case F_SLOTS: bkc__int(c, (long long)st->slots); break;
    default: c->reply->vt->dbl(c->reply, st->fpr_bound); break;
    }
}

/* TF.INFO key [FIELD]: the live fields at the command's clock (a copy of
 * the statistics with the clock moved, the filter untouched). */
void bkc_cmd_tf_info(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    bkc_value *v;
    bk_ttl_stats stats;
    if ((v = bkc__open_info(c, argc, argv, BKC_KIND_TTL, &k)) == NULL) return;
    if (bk_ttl_get_stats_at(bk_filter_as_ttl(v->filters[0]), c->now_ms, &stats) != BK_OK)
        bkc__lib_error(c, BK_EINVAL);
    else
        bkc__reply_info(c, argc, argv, info_fields, F_COUNT, info_value, &stats);
    bkc__close(c, k);
}

void bkc_cmd_tf_scandump(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__scandump(c, argc, argv, BKC_KIND_TTL);
}

void bkc_cmd_tf_loadchunk(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__loadchunk(c, argc, argv, BKC_KIND_TTL);
}
