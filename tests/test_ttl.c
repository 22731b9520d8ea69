/*
 * test_ttl.c - the per-item TTL filter, driven by a controlled clock.
 *
 * Checks:
 *   - the guarantee under a stream of mixed TTLs (short, uniform, the
 *     longest, re-adds that extend, clock jumps and times given earlier
 *     than the clock): every key is found at every instant before its
 *     expiry that the test looks at (each key every 7 ticks, and always at
 *     its last instant, expiry - 1), and it is looked up once at
 *     expiry + gran - 1, where it must be gone but for false positives;
 *   - rates: keys past expiry + gran - 1 and keys never added are found no
 *     more often than the filter's bound p * L / n, L the live keys (at
 *     most p); tolerance 5 binomial standard deviations of the trials at p
 *     (a correct filter fails with probability ~3e-7; seeds are fixed);
 *   - the worst spread (capacity keys with one TTL at once: one generation
 *     of g - 1 full segments) and the even spread keep the rate at p;
 *   - the table's live count (TF.INFO's) equals a pass over its entries
 *     through adds, moves near full, sweeps, clock jumps, loads, clear;
 *   - batches equal single calls; save, load, map, clone and clear;
 *     damaged images are refused; every allocation failure is BK_ENOMEM
 *     and leaks nothing.
 */
#include "testutil.h"
#include "damage.h"

#define TAG_IN 1u
#define TAG_OUT 2u

static int add_key(bk_ttl *f, uint64_t i, uint64_t tag, uint64_t ttl, uint64_t now)
{
    char key[TU_KEY_LEN];
    tu_key(key, i, tag);
    int r = bk_ttl_add(f, key, sizeof(key), ttl, now);
    if (r < 0) fail_msg("add %llu: %s", (unsigned long long)i, bk_errname(r));
    return r;
}

TU_HAS_KEY_AT(has_key, bk_ttl, bk_ttl_contains)

uint64_t bk__ttl_live_scan(const bk_ttl *f, uint64_t now); /* lib/ttl.c, hidden: tests only */
int bk__ttl_set_vec16(bk_ttl *f, int on);                   /* the same */

/* The table's live count (kept by adds, moves and sweeps, summed per
 * slot) against a pass over every entry, at the filter's clock. */
static uint64_t check_live(const bk_ttl *f)
{
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    if (st.layout == BK_TTL_LAYOUT_TABLE) {
        uint64_t scan = bk__ttl_live_scan(f, 0);
        if (st.live_items != scan)
            fail_msg("live count %llu, a pass finds %llu", (unsigned long long)st.live_items,
                     (unsigned long long)scan);
    }
    return st.live_items;
}

/*--------------------------------------------------------------------------*/

static void test_create_errors(void **state)
{
    (void)state;
    /* no out pointer, no capacity, a rate outside (0, 1) */
    TU_CREATE_ARG_CHECKS_N(bk_ttl, bk_ttl_create, 100, 10, 4, 0, 1);
    bk_ttl *f;
    assert_int_equal(bk_ttl_create(&f, 100, 0.01, 0, 4, 0, 1), BK_EPARAM);
    assert_int_equal(bk_ttl_create(&f, 100, 0.01, BK_TTL_MAX_TTL + 1, 4, 0, 1), BK_EPARAM);
    assert_int_equal(bk_ttl_create(&f, 100, 0.01, 10, 1, 0, 1), BK_EPARAM);
    assert_int_equal(bk_ttl_create(&f, 100, 0.01, 10, BK_TTL_MAX_GENERATIONS + 1, 0, 1),
                     BK_EPARAM);
    assert_int_equal(bk_ttl_create(&f, UINT64_C(1) << 60, 0.01, 10, 4, 0, 1), BK_ESIZE);
    bk_ttl_free(NULL);

    /* g = 17, gran = ceil(1000 / 16) = 63, c = ceil(3000 / 16) */
    assert_int_equal(bk_ttl_create(&f, 3000, 0.01, 1000, 17, 5, 77), BK_OK);
    assert_int_equal(bk_ttl_generations(f), BK_TTL_DEFAULT_GENERATIONS);
    assert_true(bk_ttl_max_ttl(f) == 1000);
    assert_true(bk_ttl_granularity(f) == 63);
    assert_true(bk_ttl_now(f) == 5);
    assert_true(bk_ttl_seed(f) == 77);
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    assert_true(st.segment_capacity == 188);
    assert_true(fabs(st.segment_fpr - 0.01 / 16) < 1e-15);
    assert_true(st.segments == 17 && st.live_segments == 0 && st.live_items == 0);
    assert_true(st.fpr_now == 0.0 && st.fpr_bound == 0.0);
    assert_true(st.bytes == bk_ttl_bytes(f));

    /* TTLs out of range, and the calls on NULL */
    assert_int_equal(bk_ttl_add(f, "x", 1, 0, 5), BK_EPARAM);
    assert_int_equal(bk_ttl_add(f, "x", 1, 1001, 5), BK_EPARAM);
    assert_int_equal(bk_ttl_add_until(f, "x", 1, 5 + 1001, 5), BK_EPARAM);
    assert_int_equal(bk_ttl_add_until(f, "x", 1, 5, 5), 0); /* expired already */
    assert_int_equal(bk_ttl_contains(f, "x", 1, 5), 0);
    assert_int_equal(bk_ttl_add(f, "x", 1, 1000, 5), 1);
    assert_int_equal(bk_ttl_add(NULL, "x", 1, 1, 0), BK_EINVAL);
    assert_int_equal(bk_ttl_add_until(NULL, "x", 1, 1, 0), BK_EINVAL);
    assert_int_equal(bk_ttl_advance(NULL, 0), BK_EINVAL);
    assert_int_equal(bk_ttl_set_max_bytes(NULL, 0), BK_EINVAL);
    assert_int_equal(bk_ttl_contains(NULL, "x", 1, 0), 0);
    assert_int_equal(bk_ttl_get_stats(NULL, &st), BK_EINVAL);
    assert_true(bk_ttl_expiry(f, 10, 0) == 15); /* the clock is 5 */
    assert_true(bk_ttl_expiry(f, 10, 100) == 110);
    bk_ttl_free(f);

    /* a clock so late that clock + TTL overflows */
    assert_int_equal(bk_ttl_create(&f, 10, 0.01, 100, 2, UINT64_MAX - 50, 1), BK_OK);
    assert_int_equal(bk_ttl_add(f, "x", 1, 100, 0), BK_EPARAM);
    assert_true(bk_ttl_expiry(f, 100, 0) == UINT64_MAX);
    bk_ttl_free(f);
}

/* The exact boundary: gran = 10 (M = 40, g = 5); a key added at 23 with
 * TTL 7 expires at 30 = a slot end: found through 29, gone at 30. With TTL
 * 8 (expiry 31) it lives through slot [30, 40): found at 39, gone at 40 =
 * 31 + gran - 1. */
static void check_boundaries(bk_ttl *f)
{
    assert_true(bk_ttl_granularity(f) == 10);
    assert_int_equal(bk_ttl_add(f, "a", 1, 7, 23), 1);
    assert_int_equal(bk_ttl_add(f, "b", 1, 8, 23), 1);
    assert_int_equal(bk_ttl_add(f, "c", 1, 40, 23), 1); /* the longest: 63 */
    for (uint64_t t = 23; t < 30; t++) assert_int_equal(bk_ttl_contains(f, "a", 1, t), 1);
    assert_int_equal(bk_ttl_contains(f, "a", 1, 30), 0);
    assert_int_equal(bk_ttl_contains(f, "b", 1, 39), 1);
    assert_int_equal(bk_ttl_contains(f, "b", 1, 40), 0);
    assert_int_equal(bk_ttl_contains(f, "c", 1, 69), 1);
    assert_int_equal(bk_ttl_contains(f, "c", 1, 70), 0);

    /* re-adding: a shorter TTL changes nothing (0, nothing written); a
     * longer one extends the life */
    assert_int_equal(bk_ttl_add(f, "b", 1, 2, 25), 0);
    assert_int_equal(bk_ttl_contains(f, "b", 1, 40), 0);
    assert_int_equal(bk_ttl_add(f, "b", 1, 30, 25), 0);
    assert_int_equal(bk_ttl_contains(f, "b", 1, 54), 1);
    assert_int_equal(bk_ttl_contains(f, "b", 1, 60), 0);

    /* a time earlier than the clock is the clock: an add at 0 now expires
     * at 25 + ttl, a lookup at 0 looks at 25 */
    assert_int_equal(bk_ttl_add(f, "d", 1, 5, 0), 1);
    assert_true(bk_ttl_now(f) == 25);
    assert_int_equal(bk_ttl_contains(f, "d", 1, 0), 1);
    assert_int_equal(bk_ttl_contains(f, "d", 1, 29), 1);
    assert_int_equal(bk_ttl_contains(f, "d", 1, 30), 0);
    assert_int_equal(bk_ttl_contains(f, "a", 1, 0), 1); /* at 25: a lives until 30 */

    /* absolute expiries: exactly as the relative add that made them */
    assert_int_equal(bk_ttl_add_until(f, "e", 1, 31, 25), 1);
    assert_int_equal(bk_ttl_contains(f, "e", 1, 39), 1);
    assert_int_equal(bk_ttl_contains(f, "e", 1, 40), 0);
    bk_ttl_free(f);
}

/* The same boundaries in both layouts: g = 5 generations, or 4 slots. */
static void test_boundaries(void **state)
{
    (void)state;
    bk_ttl *f;
    assert_int_equal(bk_ttl_create(&f, 100, 0.001, 40, 5, 0, 3), BK_OK);
    check_boundaries(f);
    assert_int_equal(bk_ttl_create_table(&f, 100, 0.001, 40, 4, 0, 3), BK_OK);
    assert_int_equal(bk_ttl_layout(f), BK_TTL_LAYOUT_TABLE);
    check_boundaries(f);
}

/*--------------------------------------------------------------------------
 * The stream of mixed TTLs
 *--------------------------------------------------------------------------*/

typedef struct stream_key {
    uint64_t expiry; /* latest expiry given (0: never added) */
    int gone_checked; /* looked up once past expiry + gran - 1 */
} stream_key;

/* A TTL of the mix: a quarter short (1..gran), a quarter the longest, half
 * uniform in 1..M. */
static uint64_t draw_ttl(uint64_t *rng, uint64_t M, uint64_t gran)
{
    uint64_t r = tu_next(rng);
    switch (r & 3) {
    case 0: return 1 + (r >> 8) % gran;
    case 1: return M;
    default: return 1 + (r >> 8) % M;
    }
}

/* g generations, or (g = 0) the table layout with `slots` slots. */
static void check_stream(uint32_t g, uint32_t slots, uint64_t M, uint64_t capacity, double p,
                         uint64_t ticks, uint64_t seed)
{
    bk_ttl *f;
    if (g > 0) assert_int_equal(bk_ttl_create(&f, capacity, p, M, g, 1000, seed), BK_OK);
    else assert_int_equal(bk_ttl_create_table(&f, capacity, p, M, slots, 1000, seed), BK_OK);
    const uint64_t gran = bk_ttl_granularity(f);
    /* keys per tick so that about 0.8 capacity are held: a key is held
     * from its add until its slot ends, about its TTL plus gran / 2; the
     * mean TTL of the mix is about (gran / 2 + M + M / 2) / 4 */
    const uint64_t mean_ttl = (gran / 2 + M + M / 2) / 4 + 1;
    const uint64_t per_tick = capacity * 8 / 10 / (mean_ttl + gran) + 1;
    const uint64_t nkeys = per_tick * ticks + 1;
    stream_key *keys = calloc(nkeys, sizeof(*keys));
    assert_non_null(keys);
    uint64_t rng = seed, next = 0, clock = 1000, fclock = 1000; /* fclock: the filter's */
    uint64_t misses = 0, checks = 0, expired_checked = 0, expired_found = 0;
    uint64_t absent_checked = 0, absent_found = 0, next_absent = 0, max_live = 0;
    double bound_sum = 0.0;

    for (uint64_t tick = 0; tick < ticks; tick++) {
        /* the clock: mostly one step, sometimes a jump of up to M / 2 */
        uint64_t r = tu_next(&rng);
        clock += (r % 97 == 0) ? 1 + (r >> 16) % (M / 2) : 1;
        /* sometimes the caller passes a time earlier than the clock */
        uint64_t given = (r % 13 == 0 && clock > 30) ? clock - 30 : clock;
        if (given > fclock) fclock = given;
        for (uint64_t j = 0; j < per_tick; j++) {
            uint64_t ttl = draw_ttl(&rng, M, gran);
            uint64_t id;
            if (next > 0 && tu_next(&rng) % 8 == 0) {
                id = tu_next(&rng) % next; /* re-add, maybe of a live key */
            } else {
                id = next++;
            }
            add_key(f, id, TAG_IN, ttl, given);
            if (fclock + ttl > keys[id].expiry) {
                keys[id].expiry = fclock + ttl;
                keys[id].gone_checked = 0;
            }
        }
        /* the guarantee: each live key every 7 ticks and at its last instant
         * (lookups at `given` act at fclock); the expired ones once, at
         * expiry + gran - 1 or the first tick after. `held` counts the keys the filter still holds
         * (their slot has not ended): what capacity is about. */
        uint64_t live = 0;
        for (uint64_t id = 0; id < next; id++) {
            uint64_t e = keys[id].expiry;
            if (e > fclock) {
                if ((id + tick) % 7 == 0 || e - 1 == fclock) {
                    checks++;
                    misses += !has_key(f, id, TAG_IN, given);
                }
            } else if (e + gran - 1 <= fclock && !keys[id].gone_checked) {
                keys[id].gone_checked = 1;
                expired_checked++;
                expired_found += (uint64_t)has_key(f, id, TAG_IN, fclock);
            }
            if (e != 0 && ((e - 1) / gran + 1) * gran > fclock) live++;
        }
        if (live > max_live) max_live = live;
        for (int a = 0; a < 4; a++) {
            absent_found += (uint64_t)has_key(f, next_absent++, TAG_OUT, fclock);
            absent_checked++;
        }
        bk_ttl_stats st;
        check_live(f);
        assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
        bound_sum += st.fpr_bound;
        assert_true(st.fpr_now <= st.fpr_bound * (1 + 1e-9) + 1e-15);
    }
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    double expired = (double)expired_found / (double)expired_checked;
    double absent = (double)absent_found / (double)absent_checked;
    double mean_bound = bound_sum / (double)ticks;
    print_message("g=%u slots=%u M=%llu gran=%llu cap=%llu: %llu keys, max live %llu; %llu checks, "
                  "misses %llu; expired found %.5f of %llu; absent found %.5f of %llu "
                  "(mean bound %.5f, p %.3f); segments %llu, %.2f bits per capacity key\n",
                  g, st.slots, (unsigned long long)M, (unsigned long long)gran,
                  (unsigned long long)capacity, (unsigned long long)next,
                  (unsigned long long)max_live, (unsigned long long)checks,
                  (unsigned long long)misses, expired, (unsigned long long)expired_checked,
                  absent, (unsigned long long)absent_checked, mean_bound, p,
                  (unsigned long long)st.segments, 8.0 * (double)st.bytes / (double)capacity);
    assert_true(misses == 0);
    assert_true(checks > 10 * next);
    assert_true(expired_checked > next / 2);
    assert_true(max_live <= capacity); /* the bound below is for L <= n */
    assert_true(expired < p + tu_tolerance(p, expired_checked, 5));
    assert_true(absent < p + tu_tolerance(p, absent_checked, 5));
    free(keys);
    bk_ttl_free(f);
}

static void test_stream_g17(void **state) { (void)state; check_stream(17, 0, 1600, 4000, 0.01, 6000, 11); }
static void test_stream_g5(void **state) { (void)state; check_stream(5, 0, 400, 3000, 0.02, 3000, 12); }
static void test_stream_g2(void **state) { (void)state; check_stream(2, 0, 300, 2000, 0.01, 2000, 13); }
/* the table: the default 12 slots (sweeps every 4), one slot (a sweep
 * every slot), 64 slots (7 expiry bits) */
static void test_stream_table(void **state)
{
    (void)state;
    check_stream(0, 12, 1600, 4000, 0.01, 6000, 14);
    check_stream(0, 1, 300, 2000, 0.01, 2000, 15);
    check_stream(0, 64, 1600, 3000, 0.001, 3000, 16);
}

/*--------------------------------------------------------------------------
 * Spreads
 *--------------------------------------------------------------------------*/

/* Every key with one TTL at once: one generation takes them all, in g - 1
 * full segments; the rate of never-added keys stays within p. At the slot's
 * end they are all gone: no live generation is left, so nothing is found. */
static void test_worst_spread(void **state)
{
    (void)state;
    const uint64_t n = 32000, M = 16000;
    const double p = 0.01;
    bk_ttl *f;
    assert_int_equal(bk_ttl_create(&f, n, p, M, 17, 0, 5), BK_OK);
    for (uint64_t i = 0; i < n; i++) add_key(f, i, TAG_IN, M, 500);
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    assert_int_equal(st.live_generations, 1);
    assert_true(st.live_segments >= 16 && st.live_segments <= 17);
    const uint64_t trials = 400000;
    uint64_t found = 0;
    for (uint64_t i = 0; i < trials; i++) found += (uint64_t)has_key(f, i, TAG_OUT, 600);
    double measured = (double)found / (double)trials;
    print_message("worst spread: %llu segments in one generation, rate %.5f (model %.5f, "
                  "bound %.5f)\n",
                  (unsigned long long)st.live_segments, measured, st.fpr_now, st.fpr_bound);
    assert_true(measured < p + tu_tolerance(p, trials, 5));
    assert_true(st.fpr_now <= p);
    /* expiry 16500: slot [16000, 17000) */
    uint64_t missed = 0;
    for (uint64_t i = 0; i < n; i += 7) missed += !has_key(f, i, TAG_IN, 16499);
    assert_true(missed == 0);
    for (uint64_t i = 0; i < 1000; i++) assert_int_equal(has_key(f, i, TAG_IN, 17000), 0);
    /* the clock moving on gives the extra segments back */
    assert_int_equal(bk_ttl_advance(f, 17000), (int)st.live_segments - 1);
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    assert_true(st.segments == 17 && st.live_items == 0);
    bk_ttl_free(f);
}

/* A stream with the longest TTL at the sized rate: the keys spread evenly,
 * one segment per generation. Rate within p; memory against one blocked
 * filter of n keys at p (printed for the design notes, bounded here by
 * what bloomkit.h states). */
static void test_even_spread_memory(void **state)
{
    (void)state;
    const uint64_t n = 64000, M = 1600;
    const double p = 0.01;
    bk_ttl *f;
    assert_int_equal(bk_ttl_create(&f, n, p, M, 17, 0, 6), BK_OK);
    /* n held: keys stay until their slot ends, up to gran after expiry */
    const uint64_t per_tick = n / (M + M / 16);
    uint64_t id = 0;
    for (uint64_t t = 0; t < 2 * M; t++)
        for (uint64_t j = 0; j < per_tick; j++) add_key(f, id++, TAG_IN, M, t);
    const uint64_t now = 2 * M - 1;
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    uint64_t trials = 400000, found = 0;
    for (uint64_t i = 0; i < trials; i++) found += (uint64_t)has_key(f, i, TAG_OUT, now);
    double measured = (double)found / (double)trials;
    uint64_t plain_bits;
    assert_int_equal(bk_blocked_optimal(n, p, &plain_bits, NULL), BK_OK);
    double ratio = 8.0 * (double)st.bytes / (double)plain_bits;
    print_message("even spread: live %llu in %u generations, %llu segments; rate %.5f "
                  "(model %.5f); %.2fx the bits of one blocked filter\n",
                  (unsigned long long)st.live_items, st.live_generations,
                  (unsigned long long)st.segments, measured, st.fpr_now, ratio);
    assert_true(st.live_items <= n);
    assert_true(st.segments <= 18); /* one per generation, a boundary at most */
    assert_true(measured < p + tu_tolerance(p, trials, 5));
    assert_true(ratio > 1.0 && ratio < 2.0);
    bk_ttl_free(f);
}

/* Memory against generations (printed for the design notes): bytes at
 * creation (one segment per generation: the even spread) against one
 * blocked filter of n keys at p, and the granularity. */
static void test_memory_tradeoff(void **state)
{
    (void)state;
    const uint64_t n = 1000000;
    const double p = 0.01;
    uint64_t plain_bits;
    assert_int_equal(bk_blocked_optimal(n, p, &plain_bits, NULL), BK_OK);
    static const uint32_t gs[] = {2, 3, 5, 9, 17, 33, 64};
    for (size_t i = 0; i < sizeof(gs) / sizeof(gs[0]); i++) {
        bk_ttl *f;
        assert_int_equal(bk_ttl_create(&f, n, p, 3600000, gs[i], 0, 1), BK_OK);
        double ratio = 8.0 * (double)bk_ttl_bytes(f) / (double)plain_bits;
        print_message("g=%2u: %.2fx the bits of one blocked filter (%.2f bits per key), "
                      "granularity %.1f%% of max TTL\n",
                      gs[i], ratio, 8.0 * (double)bk_ttl_bytes(f) / (double)n,
                      100.0 * (double)bk_ttl_granularity(f) / 3600000.0);
        /* g / (g - 1) * log2((g - 1) / p) / log2(1 / p), and blocked sizing
         * a little above it at the smaller rate */
        double model = gs[i] / (gs[i] - 1.0) * log2((gs[i] - 1) / p) / log2(1 / p);
        assert_true(ratio > 0.95 * model && ratio < 1.25 * model);
        bk_ttl_free(f);
    }
}

/* Past capacity the filter keeps taking keys: segments are added and the
 * bound grows as p L / n. A memory cap answers BK_ELIMIT and changes
 * nothing; BK_TTL_MAX_SEGMENTS segments in all answer BK_EFULL. */
static void test_past_capacity(void **state)
{
    (void)state;
    char key[TU_KEY_LEN];
    bk_ttl *f;
    assert_int_equal(bk_ttl_create(&f, 1000, 0.01, 100, 5, 0, 8), BK_OK);
    for (uint64_t i = 0; i < 3000; i++) add_key(f, i, TAG_IN, 100, 0);
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    assert_true(st.live_items >= 2900 && st.live_items <= 3000); /* less false positives */
    assert_true(st.live_segments == (st.live_items + 249) / 250); /* c = 250 */
    assert_true(fabs(st.fpr_bound - 0.01 * (double)st.live_items / 1000) < 1e-12);
    assert_true(st.fpr_now <= st.fpr_bound);
    size_t bytes = st.bytes;
    assert_int_equal(bk_ttl_set_max_bytes(f, bytes), BK_OK);
    assert_true(bk_ttl_max_bytes(f) == bytes);
    /* the last segment's room, then the cap */
    uint64_t i = 3000, room = st.live_segments * 250 - st.live_items, taken = 0;
    int rc;
    for (;; i++) {
        tu_key(key, i, TAG_IN);
        if ((rc = bk_ttl_add(f, key, sizeof(key), 100, 0)) < 0) break;
        taken += (uint64_t)rc;
    }
    assert_int_equal(rc, BK_ELIMIT);
    assert_true(taken == room);
    assert_true(bk_ttl_bytes(f) == bytes);
    bk_ttl_stats after;
    assert_int_equal(bk_ttl_get_stats(f, &after), BK_OK);
    assert_true(after.live_items == st.live_items + room);
    bk_ttl_free(f);

    /* segments of one key (capacity 4 in 4 + 1 generations): the limit */
    assert_int_equal(bk_ttl_create(&f, 4, 0.01, 100, 5, 0, 9), BK_OK);
    uint64_t added = 0;
    for (i = 0;; i++) {
        tu_key(key, i, TAG_IN);
        if ((rc = bk_ttl_add(f, key, sizeof(key), 100, 0)) < 0) break;
        added += (uint64_t)rc;
    }
    assert_int_equal(rc, BK_EFULL);
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    assert_true(st.segments == BK_TTL_MAX_SEGMENTS);
    print_message("one-key segments: BK_EFULL after %llu new keys (%llu adds)\n",
                  (unsigned long long)added, (unsigned long long)i);
    /* the file format takes every one of them */
    bk_filter *copy = tu_reload(bk_ttl_as_filter(f));
    tu_same_image(bk_ttl_as_filter(f), copy);
    bk_filter_free(copy);
    bk_ttl_free(f);
}

/*--------------------------------------------------------------------------
 * Batches, files, clones, clear, the generic handle
 *--------------------------------------------------------------------------*/

enum { BATCH_N = 3000 };
static char batch_keys[BATCH_N][TU_KEY_LEN];
static const void *batch_ptrs[BATCH_N];
static size_t batch_lens[BATCH_N];

/* keys 0 .. BATCH_N - 1 of the ids i % distinct, tag `tag` */
static void batch_make(uint64_t distinct, uint64_t tag)
{
    for (int i = 0; i < BATCH_N; i++) {
        tu_key(batch_keys[i], (uint64_t)i % distinct, tag);
        batch_ptrs[i] = batch_keys[i];
        batch_lens[i] = TU_KEY_LEN;
    }
}

static void test_batches(void **state)
{
    (void)state;
    bk_ttl *a, *b;
    uint8_t ra[BATCH_N], rb[BATCH_N];
    assert_int_equal(bk_ttl_create(&a, 2000, 0.01, 1000, 9, 50, 21), BK_OK);
    assert_int_equal(bk_ttl_create(&b, 2000, 0.01, 1000, 9, 50, 21), BK_OK);
    /* three rounds of relative adds at rising times, then absolute ones */
    const uint64_t ttls[] = {900, 37, 1000};
    for (int round = 0; round < 3; round++) {
        batch_make(2500, TAG_IN + (uint64_t)round);
        uint64_t now = 100 + 200 * (uint64_t)round;
        int64_t na = bk_ttl_add_batch(a, batch_ptrs, batch_lens, BATCH_N, ttls[round], now, ra);
        int64_t nb = 0;
        for (int i = 0; i < BATCH_N; i++) {
            int r = bk_ttl_add(b, batch_ptrs[i], batch_lens[i], ttls[round], now);
            assert_true(r >= 0);
            rb[i] = (uint8_t)r;
            nb += r;
        }
        assert_true(na == nb);
        assert_memory_equal(ra, rb, BATCH_N);
    }
    batch_make(2500, 7);
    int64_t na = bk_ttl_add_until_batch(a, batch_ptrs, batch_lens, BATCH_N, 1200, 500, ra);
    int64_t nb = 0;
    for (int i = 0; i < BATCH_N; i++) {
        rb[i] = (uint8_t)bk_ttl_add_until(b, batch_ptrs[i], batch_lens[i], 1200, 500);
        nb += rb[i];
    }
    assert_true(na == nb && na > 2400);
    assert_memory_equal(ra, rb, BATCH_N);
    tu_same_image(bk_ttl_as_filter(a), bk_ttl_as_filter(b));

    /* lookups of every tag at several times: batch == single */
    const uint64_t times[] = {0, 500, 540, 1100, 1199, 1200, 1400, 5000};
    for (uint64_t tag = TAG_IN; tag <= 7; tag++) {
        batch_make(BATCH_N, tag);
        for (size_t t = 0; t < sizeof(times) / sizeof(times[0]); t++) {
            int64_t found = bk_ttl_contains_batch(a, batch_ptrs, batch_lens, BATCH_N,
                                                  times[t], ra);
            int64_t single = 0;
            for (int i = 0; i < BATCH_N; i++) {
                rb[i] = (uint8_t)bk_ttl_contains(a, batch_ptrs[i], batch_lens[i], times[t]);
                single += rb[i];
            }
            assert_true(found == single);
            assert_memory_equal(ra, rb, BATCH_N);
        }
    }
    /* small batches (fewer keys than the look-ahead) and errors */
    assert_true(bk_ttl_contains_batch(a, batch_ptrs, batch_lens, 3, 0, ra) ==
                bk_ttl_contains(a, batch_ptrs[0], TU_KEY_LEN, 0) +
                    bk_ttl_contains(a, batch_ptrs[1], TU_KEY_LEN, 0) +
                    bk_ttl_contains(a, batch_ptrs[2], TU_KEY_LEN, 0));
    assert_true(bk_ttl_contains_batch(a, batch_ptrs, batch_lens, 0, 0, NULL) == 0);
    assert_true(bk_ttl_add_batch(a, batch_ptrs, batch_lens, 1, 0, 0, NULL) == BK_EPARAM);
    assert_true(bk_ttl_add_batch(a, batch_ptrs, batch_lens, 1, 1001, 0, NULL) == BK_EPARAM);
    assert_true(bk_ttl_add_batch(a, NULL, batch_lens, 1, 1, 0, NULL) == BK_EINVAL);
    assert_true(bk_ttl_add_until_batch(NULL, batch_ptrs, batch_lens, 1, 1, 0, NULL) ==
                BK_EINVAL);
    assert_true(bk_ttl_contains_batch(a, batch_ptrs, NULL, 1, 0, NULL) == BK_EINVAL);
    bk_ttl_free(a);
    bk_ttl_free(b);
}

/* The sample of the file tests: g = 5, M = 400 (gran 100), capacity 1000
 * (c = 250), made at 100000; 900 keys of mixed TTLs, of which 400 with
 * the longest TTL at once (two segments in their generation). */
static bk_ttl *make_sample(void)
{
    bk_ttl *f;
    uint64_t rng = 99;
    assert_int_equal(bk_ttl_create(&f, 1000, 0.01, 400, 5, 100000, 31), BK_OK);
    for (uint64_t i = 0; i < 400; i++) add_key(f, i, TAG_IN, 400, 100000);
    for (uint64_t i = 400; i < 900; i++)
        add_key(f, i, TAG_IN, 1 + tu_next(&rng) % 400, 100000 + i / 10);
    assert_true(bk_ttl_add(f, "x", 1, 400, 100100) >= 0);
    return f;
}

static void test_files_clone_clear(void **state)
{
    (void)state;
    bk_ttl *f = make_sample();
    bk_filter *g = bk_ttl_as_filter(f);
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    assert_true(st.segments >= 6);
    tu_check_save_load_map(g, TAG_IN, TAG_OUT);

    /* a loaded copy keeps the clock and the expiries, and goes on alike */
    bk_filter *copy = tu_reload(g);
    bk_ttl *c = bk_filter_as_ttl(copy);
    assert_non_null(c);
    assert_true(bk_ttl_now(c) == bk_ttl_now(f));
    for (uint64_t t = 100090; t < 100600; t += 9)
        for (uint64_t i = 0; i < 900; i += 3)
            assert_int_equal(has_key(c, i, TAG_IN, t), has_key(f, i, TAG_IN, t));
    for (uint64_t i = 900; i < 1400; i++) {
        assert_int_equal(add_key(c, i, TAG_IN, 1 + i % 400, 100200 + i),
                         add_key(f, i, TAG_IN, 1 + i % 400, 100200 + i));
    }
    tu_same_image(g, copy);
    bk_filter_free(copy);

    /* clone: the same answers, then independent */
    bk_filter *cl = NULL;
    assert_int_equal(bk_filter_clone(&cl, g), BK_OK);
    tu_same_image(g, cl);
    assert_int_equal(bk_ttl_add(bk_filter_as_ttl(cl), "only-in-clone", 13, 50, 0), 1);
    assert_int_equal(bk_ttl_contains(f, "only-in-clone", 13, 0), 0);
    bk_filter_free(cl);

    /* the generic handle: the longest TTL at the clock */
    assert_true(bk_filter_as_ttl(g) == f);
    assert_null(bk_filter_as_window(g));
    assert_int_equal(bk_filter_family(g), BK_FAMILY_TTL);
    assert_string_equal(bk_family_name(BK_FAMILY_TTL), "ttl");
    assert_int_equal(bk_family_from_name("ttl"), BK_FAMILY_TTL);
    uint64_t clock = bk_ttl_now(f);
    assert_int_equal(bk_filter_add(g, "fresh", 5), 1);
    assert_int_equal(bk_filter_contains(g, "fresh", 5), 1);
    assert_int_equal(bk_ttl_contains(f, "fresh", 5, clock + 399), 1);
    assert_int_equal(bk_filter_remove(g, "fresh", 5), BK_ENOTSUP);
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(g, &info), BK_OK);
    assert_true(info.capacity == 1000 && info.target_fpr == 0.01);
    assert_true(info.bytes == bk_ttl_bytes(f));
    assert_true(info.fill > 0.0 && info.fill < 1.0);

    /* clear: nothing found, the clock stays, one segment per generation */
    assert_int_equal(bk_filter_clear(g), BK_OK);
    assert_true(bk_ttl_now(f) == clock);
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    assert_true(st.segments == 5 && st.live_items == 0 && st.added == 0);
    for (uint64_t i = 0; i < 900; i++) assert_int_equal(has_key(f, i, TAG_IN, clock), 0);
    assert_int_equal(bk_ttl_add(f, "again", 5, 10, clock), 1);
    bk_ttl_clear(NULL);
    bk_ttl_free(f);
}

/* Damaged images, resealed so that only the family's checks stand in the
 * way: every one is BK_ECORRUPT. */
static void test_corrupt_images(void **state)
{
    (void)state;
    bk_ttl *f = make_sample();
    size_t len;
    unsigned char *good = tu_serialize(bk_ttl_as_filter(f), &len);
    const size_t H = 0, P0 = 128; /* header, first descriptor */
    const size_t table = len - 16 * 5; /* the last part: 5 x (slot, count) */
    uint64_t slot0 = 0, count0 = 0;
    for (int b = 7; b >= 0; b--) slot0 = (slot0 << 8) | good[table + (size_t)b];
    for (int b = 7; b >= 0; b--) count0 = (count0 << 8) | good[table + 8 + (size_t)b];
    assert_true(slot0 % 5 == 0 && count0 >= 1);
    double fpr2 = 0.02;
    uint64_t fpr2_bits;
    memcpy(&fpr2_bits, &fpr2, 8);
    const tu_damage cases[] = {
        {H + 56 + 24, 1, 8},                   /* g below 2 */
        {H + 56 + 24, 65, 8},                  /* g above 64 */
        {H + 56 + 24, 6, 8},                   /* g not the table's */
        {H + 56, 0, 8},                        /* max TTL 0 */
        {H + 56, (UINT64_C(1) << 62) + 1, 8},  /* max TTL too long */
        {H + 56 + 8, UINT64_MAX - 10, 8},      /* clock + max TTL overflows */
        {H + 56 + 8, 0, 8},                    /* slots after what the clock allows */
        {H + 88, 1, 8},                        /* flags */
        {H + 32, 0, 8},                        /* capacity 0 */
        {H + 32, 2000, 8},                     /* capacity: segment shape differs */
        {H + 40, fpr2_bits, 8},                /* rate: segment rate differs */
        {H + 48, 12345, 8},                    /* items: not the segments' sum */
        {table, slot0 + 1, 8},                 /* slot in the wrong generation */
        {table, slot0 + 5 * 1000, 8},          /* slot beyond the clock's reach */
        {table + 8, 0, 8},                     /* a generation without segments */
        {table + 8, count0 + 1, 8},            /* counts not the parts */
        {P0 + 48, 251, 8},                     /* a segment past its capacity */
        {P0 + 24, 3, 4},                       /* another k */
        {P0 + 32, 251, 8},                     /* another segment capacity */
    };
    tu_expect_corrupt(good, len, cases, sizeof(cases) / sizeof(cases[0]));
    /* every truncation is refused, the image itself loads */
    for (size_t cut = 0; cut < len; cut += 61) {
        bk_filter *g = NULL;
        assert_true(bk_filter_deserialize(&g, good, cut) < 0);
        assert_null(g);
    }
    bk_filter *g = NULL;
    assert_int_equal(bk_filter_deserialize(&g, good, len), BK_OK);
    bk_filter_free(g);
    free(good);
    bk_ttl_free(f);
}


/*--------------------------------------------------------------------------
 * The table layout
 *--------------------------------------------------------------------------*/

/* Defaults and shape: 12 slots, f = 10 and x = 4 bits at 1%; bad slots and
 * rates too low for 32-bit entries. */
static void test_table_create(void **state)
{
    (void)state;
    bk_ttl *f;
    assert_int_equal(bk_ttl_create(&f, 3800, 0.01, 1200, 0, 5, 77), BK_OK);
    assert_int_equal(bk_ttl_layout(f), BK_TTL_LAYOUT_TABLE);
    assert_int_equal(bk_ttl_generations(f), 0);
    assert_true(bk_ttl_granularity(f) == 100 && bk_ttl_now(f) == 5 && bk_ttl_seed(f) == 77);
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    assert_true(st.layout == BK_TTL_LAYOUT_TABLE && st.slots == 12 && st.generations == 0);
    assert_true(st.fingerprint_bits == 10 && st.expiry_bits == 4 && st.buckets == 1000);
    assert_true(st.segments == 1 && st.live_items == 0 && st.fpr_now == 0.0);
    /* 4000 entries of 14 bits, the pad and the handle */
    assert_true(st.bytes >= 7000 + 8 && st.bytes < 7000 + 8 + 1024);
    assert_true(st.bytes == bk_ttl_bytes(f));
    bk_ttl_free(f);
    assert_int_equal(bk_ttl_create_table(&f, 100, 0.01, 100, BK_TTL_MAX_SLOTS + 1, 0, 1),
                     BK_EPARAM);
    assert_int_equal(bk_ttl_create_table(&f, 100, 0.01, 0, 4, 0, 1), BK_EPARAM);
    assert_int_equal(bk_ttl_create_table(&f, 0, 0.01, 100, 4, 0, 1), BK_ECAPACITY);
    assert_int_equal(bk_ttl_create_table(&f, 100, 1e-9, 100, 12, 0, 1), BK_EFPR);
    assert_int_equal(bk_ttl_create_table(&f, 100, 1.5, 100, 12, 0, 1), BK_EFPR);
    assert_int_equal(bk_ttl_create_table(NULL, 100, 0.01, 100, 12, 0, 1), BK_EINVAL);
    assert_int_equal(bk_ttl_create_table(&f, UINT64_C(1) << 60, 0.01, 100, 12, 0, 1),
                     BK_ESIZE);
    /* 64 slots: 2^7 >= 64 + 16 */
    assert_int_equal(bk_ttl_create_table(&f, 100, 0.01, 6400, 64, 0, 1), BK_OK);
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    assert_true(st.expiry_bits == 7 && bk_ttl_granularity(f) == 100);
    bk_ttl_free(f);
}

/* Memory and rate at capacity: n keys with mixed TTLs all live, the rate
 * of never-added keys within p, the bytes within 1.5x one blocked filter
 * of n keys at p. */
static void test_table_memory_rate(void **state)
{
    (void)state;
    const uint64_t n = 200000;
    const double p = 0.01;
    bk_ttl *f;
    uint64_t rng = 5;
    assert_int_equal(bk_ttl_create(&f, n, p, 3600000, 0, 0, 41), BK_OK);
    uint64_t fresh = 0;
    for (uint64_t i = 0; i < n; i++)
        fresh += (uint64_t)add_key(f, i, TAG_IN, 1 + tu_next(&rng) % 3600000, 0);
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    /* an add answers 0 when a live entry of its buckets has its
     * fingerprint: a false positive among the keys before it */
    assert_true(st.live_items == fresh && fresh > n - n * p);
    uint64_t trials = 400000, found = 0, missed = 0;
    for (uint64_t i = 0; i < trials; i++) found += (uint64_t)has_key(f, i, TAG_OUT, 0);
    for (uint64_t i = 0; i < n; i++) missed += !has_key(f, i, TAG_IN, 0);
    double measured = (double)found / (double)trials;
    uint64_t plain_bits;
    assert_int_equal(bk_blocked_optimal(n, p, &plain_bits, NULL), BK_OK);
    double ratio = 8.0 * (double)st.bytes / (double)plain_bits;
    print_message("table at capacity: %llu live, rate %.5f (model %.5f, p %.3f), %.2f bits "
                  "per key, %.3fx one blocked filter; %llu moves\n",
                  (unsigned long long)st.live_items, measured, st.fpr_now, p,
                  8.0 * (double)st.bytes / (double)n, ratio, (unsigned long long)st.kicks);
    assert_true(missed == 0);
    assert_true(st.fpr_now <= p);
    assert_true(measured < st.fpr_now + tu_tolerance(st.fpr_now, trials, 5));
    assert_true(measured > st.fpr_now - tu_tolerance(st.fpr_now, trials, 5));
    assert_true(ratio < 1.5);
    bk_ttl_free(f);
}

/* Full: the table takes keys until no walk finds room (beyond capacity),
 * then answers BK_EFULL and loses nothing; keys whose slot ended make
 * room again, with no sweep needed. */
static void test_table_full(void **state)
{
    (void)state;
    char key[TU_KEY_LEN];
    bk_ttl *f;
    assert_int_equal(bk_ttl_create_table(&f, 1000, 0.01, 1200, 12, 0, 8), BK_OK);
    uint64_t accepted = 0, fresh, i;
    int rc = 0;
    for (i = 0; i < 5000; i++) {
        tu_key(key, i, TAG_IN);
        if ((rc = bk_ttl_add(f, key, sizeof(key), 1200, 0)) < 0) break;
        accepted += (uint64_t)rc;
    }
    assert_int_equal(rc, BK_EFULL);
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    print_message("table full after %llu keys of capacity 1000 (%.1f%% of %llu entries)\n",
                  (unsigned long long)accepted, 100.0 * (double)accepted / (4.0 * (double)st.buckets),
                  (unsigned long long)(4 * st.buckets));
    assert_true(accepted >= 1000 && st.live_items == accepted);
    assert_true(check_live(f) == accepted && st.kicks > 0);
    assert_true(st.fpr_bound > 0.01); /* past capacity: p * live / n */
    for (uint64_t j = 0; j < i; j++) assert_int_equal(has_key(f, j, TAG_IN, 1199), 1);
    assert_int_equal(has_key(f, i, TAG_IN, 1199), 0); /* the refused key */
    /* a key present already is still answered (0), full or not */
    assert_int_equal(add_key(f, 0, TAG_IN, 100, 0), 0);
    /* at 1200 every key has ended: all gone, and the room is back */
    for (uint64_t j = 0; j < i; j++) assert_int_equal(has_key(f, j, TAG_IN, 1200), 0);
    fresh = 0;
    for (uint64_t j = 0; j < 1000; j++) fresh += (uint64_t)add_key(f, j, TAG_OUT, 50, 1200);
    assert_true(fresh > 980);
    for (uint64_t j = 0; j < 1000; j++) assert_int_equal(has_key(f, j, TAG_OUT, 1249), 1);
    assert_true(check_live(f) == fresh);
    bk_ttl_free(f);
}

/* Reach: an add searches for the shortest chain of moves that frees an
 * entry (breadth-first), so a table takes keys well past its capacity
 * before the first BK_EFULL: 1.0257-1.0270x capacity at 1e5 keys (about
 * 97.5% of the entries), 1.021x at 1e7 and 1e8. The cuckoo filter's walk
 * of up to 500 random moves, the table's first search, took 1.0165-1.0174x
 * at 1e5 and 1.0002-1.0055x at 1e8 (HISTORY section 30). Every key taken
 * is still there after all the moves, and the live count agrees with a
 * pass. */
static void test_table_reach(void **state)
{
    (void)state;
    const uint64_t n = 100000;
    bk_ttl *f;
    assert_int_equal(bk_ttl_create_table(&f, n, 0.01, 1000, 12, 0, 12), BK_OK);
    char key[TU_KEY_LEN];
    uint64_t accepted = 0, i;
    int rc = 0;
    for (i = 0; i < 2 * n; i++) {
        tu_key(key, i, TAG_IN);
        if ((rc = bk_ttl_add(f, key, sizeof(key), 1000, 0)) < 0) break;
        accepted += (uint64_t)rc;
    }
    assert_int_equal(rc, BK_EFULL);
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    print_message("first BK_EFULL after %llu new keys: %.4fx capacity, %.2f%% of the entries; "
                  "%llu moves\n",
                  (unsigned long long)accepted, (double)accepted / (double)n,
                  100.0 * (double)accepted / (4.0 * (double)st.buckets),
                  (unsigned long long)st.kicks);
    assert_true((double)accepted >= 1.022 * (double)n);
    assert_true(check_live(f) == accepted);
    for (uint64_t j = 0; j < i; j++) assert_int_equal(has_key(f, j, TAG_IN, 999), 1);
    bk_ttl_free(f);
}

/* The clock far ahead with no add: a lookup needs no sweep to see that
 * every entry ended, whatever the ring's wrap; adds then sweep once. */
static void test_table_clock_jumps(void **state)
{
    (void)state;
    bk_ttl *f;
    assert_int_equal(bk_ttl_create_table(&f, 2000, 0.01, 1200, 12, 0, 9), BK_OK);
    for (uint64_t i = 0; i < 1000; i++) add_key(f, i, TAG_IN, 1 + i % 1200, 0);
    check_live(f);
    /* lookups at every slot up to several rings (R = 16) later: a key is
     * found before its expiry; past its slot's end, found only as a false
     * positive */
    uint64_t late = 0, late_found = 0;
    for (uint64_t t = 0; t < 10000; t += 50) {
        for (uint64_t i = 0; i < 1000; i++) {
            uint64_t e = 1 + i % 1200, end = ((e - 1) / 100 + 1) * 100;
            if (e > t) {
                assert_int_equal(has_key(f, i, TAG_IN, t), 1);
            } else if (t >= end) {
                late++;
                late_found += (uint64_t)has_key(f, i, TAG_IN, t);
            }
        }
    }
    assert_true(late > 100000 && late_found < late / 100);
    uint64_t found = 0;
    for (uint64_t i = 0; i < 1000; i++) found += (uint64_t)has_key(f, i, TAG_IN, 1300);
    assert_true(found == 0);
    assert_int_equal(bk_ttl_advance(f, 50000), 0);
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    assert_true(st.live_items == 0);
    uint64_t fresh = 0;
    for (uint64_t i = 0; i < 1000; i++) fresh += (uint64_t)add_key(f, i, TAG_IN, 700, 50000);
    assert_true(fresh > 980);
    for (uint64_t i = 0; i < 1000; i++) assert_int_equal(has_key(f, i, TAG_IN, 50699), 1);
    assert_true(check_live(f) == fresh);
    bk_ttl_free(f);
}

/* Slot arithmetic at the ends of the clock's range: a lookup beyond the
 * clock's slot finds its slot by a multiply (ttl.c, tt_slot_of), exact for
 * every granularity and time. */
static void test_table_far_clock(void **state)
{
    (void)state;
    static const uint64_t grans[] = {1, 3, 7, 1000, 999983};
    for (size_t g = 0; g < sizeof(grans) / sizeof(grans[0]); g++) {
        const uint64_t gran = grans[g], M = 12 * gran;
        for (uint64_t base = 0; base < (UINT64_C(1) << 62); base += (UINT64_C(1) << 60) + 12345) {
            bk_ttl *f;
            assert_int_equal(bk_ttl_create_table(&f, 100, 0.01, M, 12, base, 3), BK_OK);
            assert_true(bk_ttl_granularity(f) == gran);
            /* expiry e = base + d: found at e - 1, gone at the slot's end */
            for (uint64_t d = 1; d <= M; d += (M + 6) / 7) {
                char key[24];
                snprintf(key, sizeof(key), "k%llu", (unsigned long long)d);
                assert_true(bk_ttl_add(f, key, strlen(key), d, base) >= 0);
                uint64_t e = base + d, end = ((e - 1) / gran + 1) * gran;
                assert_int_equal(bk_ttl_contains(f, key, strlen(key), e - 1), 1);
                assert_int_equal(bk_ttl_contains(f, key, strlen(key), end - 1), 1);
                assert_int_equal(bk_ttl_contains(f, key, strlen(key), end), 0);
            }
            bk_ttl_free(f);
        }
    }
}

/* Sweeps: a steady stream of adds empties ended entries in steps and
 * never makes the whole pass; a jump of the clock past the ring makes it
 * once. Every live key is found throughout. */
static void test_table_sweeps(void **state)
{
    (void)state;
    bk_ttl *f;
    const uint64_t n = 20000, M = 1200; /* gran 100, R - S = 4 */
    assert_int_equal(bk_ttl_create_table(&f, n, 0.01, M, 12, 0, 10), BK_OK);
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    /* n / 2 held: n / 2 / (M + gran) keys per time unit, TTL M */
    const uint64_t per_tick = n / 2 / (M + 100);
    uint64_t id = 0;
    for (uint64_t t = 0; t < 10 * M; t++) {
        for (uint64_t j = 0; j < per_tick; j++) add_key(f, id++, TAG_IN, M, t);
        if (t % 97 == 0) check_live(f); /* sweeps in steps under way */
    }
    uint64_t missed = 0;
    for (uint64_t i = id - per_tick * (M - 1); i < id; i += 3)
        missed += !has_key(f, i, TAG_IN, 10 * M - 1);
    assert_true(missed == 0);
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    print_message("sweeps: %llu keys over 10 max TTLs, %llu whole passes, %llu live\n",
                  (unsigned long long)id, (unsigned long long)st.full_sweeps,
                  (unsigned long long)st.live_items);
    assert_true(st.full_sweeps == 0);
    assert_true(st.live_items <= n / 2 + per_tick * 100);
    /* the clock 20 slots on, then one add: one whole pass */
    add_key(f, 0, TAG_OUT, 10, 12 * M);
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    assert_true(st.full_sweeps == 1 && st.live_items == 1 && check_live(f) == 1);
    bk_ttl_free(f);
}

/* Files, clone and clear of the table; its damaged images refused. */
static bk_ttl *make_table_sample(void)
{
    bk_ttl *f;
    uint64_t rng = 77;
    assert_int_equal(bk_ttl_create_table(&f, 1000, 0.01, 400, 4, 100000, 32), BK_OK);
    for (uint64_t i = 0; i < 900; i++)
        add_key(f, i, TAG_IN, 1 + tu_next(&rng) % 400, 100000 + i / 2);
    assert_true(bk_ttl_add(f, "x", 1, 400, 100450) >= 0); /* for the OOM loops */
    return f;
}

static void test_table_files(void **state)
{
    (void)state;
    bk_ttl *f = make_table_sample();
    bk_filter *g = bk_ttl_as_filter(f);
    tu_check_save_load_map(g, TAG_IN, TAG_OUT);
    bk_filter *copy = tu_reload(g);
    bk_ttl *c = bk_filter_as_ttl(copy);
    assert_int_equal(bk_ttl_layout(c), BK_TTL_LAYOUT_TABLE);
    assert_true(bk_ttl_now(c) == bk_ttl_now(f));
    assert_true(check_live(c) == check_live(f) && check_live(f) > 0);
    for (uint64_t t = 100400; t < 101000; t += 7)
        for (uint64_t i = 0; i < 900; i += 3)
            assert_int_equal(has_key(c, i, TAG_IN, t), has_key(f, i, TAG_IN, t));
    /* the copy goes on alike, sweeps included */
    for (uint64_t i = 900; i < 3000; i++)
        assert_int_equal(add_key(c, i, TAG_IN, 1 + i % 400, 100400 + i),
                         add_key(f, i, TAG_IN, 1 + i % 400, 100400 + i));
    tu_same_image(g, copy);
    assert_true(check_live(c) == check_live(f));
    bk_filter_free(copy);
    bk_filter *cl = NULL;
    assert_int_equal(bk_filter_clone(&cl, g), BK_OK);
    tu_same_image(g, cl);
    bk_filter_free(cl);
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(g, &info), BK_OK);
    assert_true(info.fill > 0.0 && info.fill < 1.0 && info.bytes == bk_ttl_bytes(f));
    uint64_t clock = bk_ttl_now(f);
    bk_ttl_clear(f);
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    assert_true(st.live_items == 0 && st.added == 0 && bk_ttl_now(f) == clock);
    for (uint64_t i = 0; i < 3000; i++) assert_int_equal(has_key(f, i, TAG_IN, clock), 0);
    for (uint64_t i = 0; i < 500; i++) add_key(f, i, TAG_OUT, 1 + i % 400, clock + i);
    check_live(f); /* counts start again from zero after a clear */
    bk_ttl_free(f);

    f = make_table_sample();
    size_t len;
    unsigned char *good = tu_serialize(bk_ttl_as_filter(f), &len);
    const size_t H = 0, P0 = 128, data = len - 700; /* 1000 entries of 14 bits (4 slots: x = 3) */
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    assert_true(st.fingerprint_bits == 10 && st.expiry_bits == 3 && st.buckets == 264);
    (void)data;
    const tu_damage cases[] = {
        {H + 56 + 24, 0, 8},                   /* no slots */
        {H + 56 + 24, 65, 8},                  /* too many slots */
        {H + 56 + 24, 5, 8},                   /* slots: another shape */
        {H + 56, 0, 8},                        /* max TTL 0 */
        {H + 56 + 8, UINT64_MAX - 10, 8},      /* clock + max TTL overflows */
        {H + 56 + 8, 0, 8},                    /* clock before the ring's base */
        {H + 56 + 8, 1000000, 8},              /* clock beyond the ring */
        {H + 32, 0, 8},                        /* capacity 0 */
        {H + 32, 2000, 8},                     /* capacity: another shape */
        {H + 48, 12345, 8},                    /* items: not the part's */
        {P0 + 48, 12345, 8},                   /* part items: not the entries */
        {P0 + 24, 11, 4},                      /* another f */
    };
    tu_expect_corrupt(good, len, cases, sizeof(cases) / sizeof(cases[0]));
    /* batches answer as single lookups, at every distance of the clock */
    batch_make(BATCH_N, TAG_IN);
    uint8_t ra[BATCH_N];
    for (uint64_t t = 100000; t < 101200; t += 37) {
        int64_t hits = bk_ttl_contains_batch(f, batch_ptrs, batch_lens, BATCH_N, t, ra);
        int64_t single = 0;
        for (int i = 0; i < BATCH_N; i++) {
            int r = bk_ttl_contains(f, batch_ptrs[i], batch_lens[i], t);
            assert_int_equal(ra[i], r);
            single += r;
        }
        assert_true(hits == single);
    }
    tu_oom_clone_and_load(bk_ttl_as_filter(f));
    for (size_t cut = 0; cut < len; cut += 37) {
        bk_filter *h = NULL;
        assert_true(bk_filter_deserialize(&h, good, cut) < 0);
        assert_null(h);
    }
    free(good);
    bk_ttl_free(f);
}

/* The lookup with pdep and AVX-512BW (where the CPU has them) answers as
 * the portable one: single and batched, keys added (live or ended) and
 * never added, at every distance of the clock, for 13-bit entries (4
 * slots: buckets at any bit) and the default 14-bit ones. */
static void check_vec16_same(bk_ttl *f, uint64_t from, uint64_t to, uint64_t step)
{
    uint8_t ra[BATCH_N], rb[BATCH_N];
    uint64_t hits = 0, checked = 0;
    for (int tag = 0; tag < 2; tag++) {
        batch_make(BATCH_N, tag ? TAG_OUT : TAG_IN);
        for (uint64_t t = from; t < to; t += step) {
            bk__ttl_set_vec16(f, 0);
            int64_t na = bk_ttl_contains_batch(f, batch_ptrs, batch_lens, BATCH_N, t, ra);
            int vec = bk__ttl_set_vec16(f, 1);
            int64_t nb = bk_ttl_contains_batch(f, batch_ptrs, batch_lens, BATCH_N, t, rb);
            assert_true(na == nb);
            for (int i = 0; i < BATCH_N; i++) {
                bk_hash h = bk_hash_key(batch_ptrs[i], batch_lens[i], bk_ttl_seed(f));
                assert_int_equal(ra[i], rb[i]);
                assert_int_equal(bk_ttl_contains(f, batch_ptrs[i], batch_lens[i], t), rb[i]);
                assert_int_equal(bk_ttl_contains_hash(f, h, t), rb[i]);
                bk__ttl_set_vec16(f, 0);
                assert_int_equal(bk_ttl_contains(f, batch_ptrs[i], batch_lens[i], t), ra[i]);
                assert_int_equal(bk_ttl_contains_hash(f, h, t), ra[i]);
                bk__ttl_set_vec16(f, vec);
            }
            hits += (uint64_t)na;
            checked += BATCH_N;
        }
    }
    if (!bk__ttl_set_vec16(f, 1)) print_message("no BMI2 + AVX-512BW here: portable both ways\n");
    print_message("%llu of %llu lookups found\n", (unsigned long long)hits,
                  (unsigned long long)checked);
    assert_true(hits < checked / 2);
    if (from < 10000) assert_true(hits > checked / 100); /* both answers, often */
}

static void test_table_vec16(void **state)
{
    (void)state;
    bk_ttl *f = make_table_sample(); /* 4 slots: 13-bit entries */
    check_vec16_same(f, 100000, 102000, 41);
    bk_ttl_free(f);
    uint64_t rng = 3;
    assert_int_equal(bk_ttl_create_table(&f, 3000, 0.01, 1200, 12, 0, 5), BK_OK);
    for (uint64_t i = 0; i < 2900; i++) add_key(f, i, TAG_IN, 1 + tu_next(&rng) % 1200, i / 3);
    bk_ttl_stats st;
    assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
    assert_true(st.fingerprint_bits + st.expiry_bits == 14);
    check_vec16_same(f, 960, 2500, 23);
    check_vec16_same(f, 40000, 140000, 25000); /* the clock far past every slot */
    bk_ttl_free(f);
}

/*--------------------------------------------------------------------------
 * Allocation failures
 *--------------------------------------------------------------------------*/

/* Create (g = 5), fill one segment and add the key that needs a second. */
static int attempt_create_grow(void *ctx)
{
    (void)ctx;
    bk_ttl *f;
    int rc = bk_ttl_create(&f, 400, 0.01, 100, 5, 0, 1);
    if (rc != BK_OK) return rc;
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; rc >= 0 && i < 101; i++) {
        tu_key(key, i, TAG_IN);
        rc = bk_ttl_add(f, key, sizeof(key), 100, 0);
    }
    if (rc >= 0) {
        bk_ttl_stats st;
        assert_int_equal(bk_ttl_get_stats(f, &st), BK_OK);
        assert_true(st.segments == 6);
        rc = BK_OK;
    } else {
        /* a failed add leaves the filter usable */
        assert_int_equal(bk_ttl_contains(f, key, sizeof(key), 0), 0);
        tu_key(key, 0, TAG_IN);
        assert_int_equal(bk_ttl_contains(f, key, sizeof(key), 0), 1);
    }
    bk_ttl_free(f);
    return rc;
}

static void test_oom(void **state)
{
    (void)state;
    long n = tu_oom_report("create and grow (g = 5)", attempt_create_grow, NULL);
    assert_true(n >= 3 + 5 * 3 + 2);
    bk_ttl *f = make_sample();
    tu_oom_clone_and_load(bk_ttl_as_filter(f));
    bk_ttl_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_boundaries),
        cmocka_unit_test(test_stream_g17),
        cmocka_unit_test(test_stream_g5),
        cmocka_unit_test(test_stream_g2),
        cmocka_unit_test(test_stream_table),
        cmocka_unit_test(test_table_create),
        cmocka_unit_test(test_table_memory_rate),
        cmocka_unit_test(test_table_full),
        cmocka_unit_test(test_table_reach),
        cmocka_unit_test(test_table_vec16),
        cmocka_unit_test(test_table_clock_jumps),
        cmocka_unit_test(test_table_sweeps),
        cmocka_unit_test(test_table_far_clock),
        cmocka_unit_test(test_table_files),
        cmocka_unit_test(test_worst_spread),
        cmocka_unit_test(test_even_spread_memory),
        cmocka_unit_test(test_memory_tradeoff),
        cmocka_unit_test(test_past_capacity),
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_files_clone_clear),
        cmocka_unit_test(test_corrupt_images),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
