/*
 * cmd_window.c - WF.*: the time-window filter (our addition).
 *
 * "Was this item added within the last window_ms milliseconds?" A WF key
 * holds one bk_window filter: g generations (default 4) of cache-blocked
 * filters, each covering window_ms / (g - 1) of time; the oldest is cleared
 * as the clock moves on, so items are forgotten between window_ms and
 * window_ms + window_ms / (g - 1) after their last add, and an endless
 * stream never fills the filter (capacity is items per window).
 *
 * Time is the host's clock, ctx->now_ms, and only moves forward (an
 * earlier time is taken as the latest seen). WF.ADD writes at now_ms;
 * WF.EXISTS looks at the window ending at now_ms without moving the clock.
 *
 * There is no natural default window, so adds do not create keys: WF.ADD
 * on a missing key answers "ERR not found"; create with WF.RESERVE.
 *
 * Replay: WF.ADD is propagated as sent (no timestamp in argv), so a replay
 * re-adds each item at the replaying host's now_ms. See docs/COMMANDS.md.
 *
 * Locking: adds rotate generations in place: WRITE. Lookups: READ.
 */
#include <math.h>

#include "cmd_internal.h"

#define ERR_BAD_WINDOW "ERR bad window"
/* The longest window: ten years. Longer ones are surely a unit mistake, and
 * the generation arithmetic (now_ms + window) must not overflow. */
#define MAX_WINDOW_MS 315360000000LL
#define ERR_WINDOW_RANGE "ERR bad window: at most 315360000000 ms (10 years)"

/* Bytes the filter will take: g generations of a blocked filter sized like
 * bk_window_create sizes them. UINT64_MAX when too large. */
static uint64_t window_bytes(uint64_t items, double fpr, uint64_t window, uint32_t g)
{
    uint64_t slice = window / (g - 1) + (window % (g - 1) != 0);
    double gen_items = ceil((double)items * (double)slice / (double)window);
    if (gen_items < 1) gen_items = 1;
    if (gen_items > 1e18) return UINT64_MAX;
    double gen_fpr = 1 - pow(1 - fpr, 1.0 / g);
    uint64_t bits = 0;
    if (bk_blocked_optimal((uint64_t)gen_items, gen_fpr, &bits, NULL) != BK_OK)
        return UINT64_MAX;
    if (bits / 8 > UINT64_MAX / g) return UINT64_MAX;
    return bits / 8 * g + 1024;
}

/* A new window filter in a value, or NULL after replying (too large for
 * the memory budget, the library's refusal). */
static bkc_value *wf_create(bkc_ctx *c, uint64_t capacity, double error, uint64_t window,
                            uint32_t g)
{
    if (!bkc__may_make(c, window_bytes(capacity, error, window, g))) return NULL;
    bk_window *wf = NULL;
    int rc = bk_window_create(&wf, capacity, error, window, g, c->now_ms, BK_DEFAULT_SEED);
    return bkc__made(c, rc, BKC_KIND_WINDOW, bk_window_as_filter(wf));
}

void bkc_cmd_wf_reserve(bkc_ctx *c, int argc, const bkc_str *argv)
{
    double error;
    uint64_t capacity, window;
    long long g = BK_WINDOW_DEFAULT_GENERATIONS, w;
    if (!bkc__arg_error_rate(c, argv[2], &error)) return;
    if (!bkc__arg_capacity(c, argv[3], &capacity)) return;
    if (bkc_parse_ll(argv[4], &w) && w > MAX_WINDOW_MS) {
        bkc__err(c, ERR_WINDOW_RANGE);
        return;
    }
    if (!bkc_parse_ll(argv[4], &w) || w <= 0) {
        bkc__err(c, ERR_BAD_WINDOW);
        return;
    }
    window = (uint64_t)w;
    bkc__int_option gen = {"GENERATIONS", "generations", BK_WINDOW_MIN_GENERATIONS,
                           BK_WINDOW_MAX_GENERATIONS, &g, 0};
    if (!bkc__arg_int_options(c, argc, argv, 5, &gen, 1)) return;
    bkc_key *k;
    if (bkc__open_new(c, argv[1], BKC_KIND_WINDOW, 0, &k))
        bkc__store_new(c, argc, argv, k, wf_create(c, capacity, error, window, (uint32_t)g));
}

static void add_items(bkc_ctx *c, int argc, const bkc_str *argv, int array)
{
    bkc_key *k;
    bkc_value *v;
    if ((v = bkc__open_found(c, argv[1], BKC_OPEN_WRITE, BKC_KIND_WINDOW, &k)) == NULL) return;
    bk_window *w = bk_filter_as_window(v->filters[0]);
    if (array) bkc__array(c, (size_t)(argc - 2));
    for (int i = 2; i < argc; i++) {
        int rc = bk_window_add(w, argv[i].ptr, argv[i].len, c->now_ms);
        if (rc < 0) bkc__lib_error(c, rc);
        else bkc__int(c, rc);
    }
    bkc__wrote(c, argc, argv); /* an add always writes (it refreshes) */
    bkc__close(c, k);
}

void bkc_cmd_wf_add(bkc_ctx *c, int argc, const bkc_str *argv)
{
    add_items(c, argc, argv, 0);
}

void bkc_cmd_wf_madd(bkc_ctx *c, int argc, const bkc_str *argv)
{
    add_items(c, argc, argv, 1);
}

/* At the command's clock (bkc__reply_contains_many). */
void bkc_cmd_wf_exists(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__cmd_lookups(c, argc, argv, BKC_KIND_WINDOW, 0, 0);
}

void bkc_cmd_wf_mexists(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__cmd_lookups(c, argc, argv, BKC_KIND_WINDOW, 1, 0);
}

enum { F_CAPACITY, F_SIZE, F_ITEMS, F_ERROR, F_WINDOW, F_GENERATIONS, F_COUNT };
static const bkc__info_field info_fields[F_COUNT] = {
    {"CAPACITY", "Capacity"},
    {"SIZE", "Size"},
    {"ITEMS", "Number of items inserted"},
    {"ERROR", "Error rate"},
    {"WINDOW", "Window"},
    {"GENERATIONS", "Generations"},
};

static void info_value(bkc_ctx *c, const void *src, int field)
{
    const bk_window_stats *st = src;
    switch (field) {
    case F_CAPACITY: bkc__int(c, (long long)st->items_per_window); break;
    case F_SIZE: bkc__int(c, (long long)st->bytes); break;
    case F_ITEMS: bkc__int(c, (long long)st->items); break;
    case F_ERROR: c->reply->vt->dbl(c->reply, st->target_fpr); break;
    case F_WINDOW: bkc__int(c, (long long)st->window); break;
    default: bkc__int(c, (long long)st->generations); break;
    }
}

void bkc_cmd_wf_info(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    bkc_value *v;
    bk_window_stats stats;
    if ((v = bkc__open_info(c, argc, argv, BKC_KIND_WINDOW, &k)) == NULL) return;
    if (bk_window_get_stats(bk_filter_as_window(v->filters[0]), &stats) != BK_OK)
        bkc__lib_error(c, BK_EINVAL);
    else
        bkc__reply_info(c, argc, argv, info_fields, F_COUNT, info_value, &stats);
    bkc__close(c, k);
}

void bkc_cmd_wf_scandump(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__scandump(c, argc, argv, BKC_KIND_WINDOW);
}

void bkc_cmd_wf_loadchunk(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__loadchunk(c, argc, argv, BKC_KIND_WINDOW);
}
