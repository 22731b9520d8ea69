/*
 * test_window.c - the time-window filter, driven by a fake clock.
 *
 * The stream: key number i (tag 1) is added at time i / rate, so the keys
 * of any age at any time are known without storing them. Checks:
 *   - no false negatives: at every step, keys of age 0, W - 1 and
 *     (g - 1) s - 1 (the last age the guarantee covers) are found;
 *   - expiry: keys of age g s (past the window plus one slice) are found
 *     no more often than the false-positive rate;
 *   - steady state: keys never added (tag 2) are found no more often than
 *     the target rate, while a plain filter of the same memory given the
 *     same stream answers "present" for nearly everything.
 * Rate checks allow 5 binomial standard deviations of the number of trials
 * at the target rate p (a correct filter fails a check with probability
 * ~3e-7; the seeds are fixed, so a run is reproducible either way).
 */
#include "testutil.h"

#define TAG_IN 1u
#define TAG_OUT 2u

static int add_key(bk_window *f, uint64_t i, uint64_t tag, uint64_t now)
{
    char key[TU_KEY_LEN];
    tu_key(key, i, tag);
    int r = bk_window_add(f, key, sizeof(key), now);
    if (r < 0) fail_msg("add %llu: %s", (unsigned long long)i, bk_errname(r));
    return r;
}

TU_HAS_KEY_AT(has_key, bk_window, bk_window_contains)

/*--------------------------------------------------------------------------*/

static void test_create_errors(void **state)
{
    (void)state;
    /* no out pointer, no capacity, a rate outside (0, 1) */
    TU_CREATE_ARG_CHECKS_N(bk_window, bk_window_create, 100, 10, 4, 0, 1);
    bk_window *f;
    assert_int_equal(bk_window_create(&f, 100, 0.01, 0, 4, 0, 1), BK_EPARAM);
    assert_int_equal(bk_window_create(&f, 100, 0.01, 10, 1, 0, 1), BK_EPARAM);
    assert_int_equal(bk_window_create(&f, 100, 0.01, 10,
                                      BK_WINDOW_MAX_GENERATIONS + 1, 0, 1),
                     BK_EPARAM);
    assert_int_equal(bk_window_create_count(&f, 0, 0.01, 4, 1), BK_ECAPACITY);
    assert_int_equal(bk_window_create(&f, UINT64_C(1) << 60, 0.01, 10, 4, 0, 1),
                     BK_ESIZE);
    bk_window_free(NULL);

    /* defaults and the slice: W = 1000, g = 4 gives s = ceil(1000 / 3) */
    assert_int_equal(bk_window_create(&f, 3000, 0.01, 1000, 0, 5, 77), BK_OK);
    assert_int_equal(bk_window_generations(f), BK_WINDOW_DEFAULT_GENERATIONS);
    assert_true(bk_window_window(f) == 1000);
    assert_true(bk_window_slice(f) == 334);
    assert_true(bk_window_now(f) == 5);
    assert_true(bk_window_seed(f) == 77);
    bk_window_stats st;
    assert_int_equal(bk_window_get_stats(f, &st), BK_OK);
    assert_int_equal(st.mode, BK_WINDOW_TIME);
    assert_true(st.generation_capacity == 1002); /* 3000 * 334 / 1000 */
    assert_true(fabs(st.fpr_bound - 0.01) < 1e-12);
    assert_true(st.generation_fpr < 0.01 / 4 + 1e-5);
    bk_window_generation_stats gs;
    assert_int_equal(bk_window_get_generation_stats(f, 4, &gs), BK_EPARAM);
    assert_int_equal(bk_window_get_generation_stats(f, 3, &gs), BK_OK);
    assert_int_equal(gs.live, 1);
    assert_int_equal(bk_window_add(NULL, "x", 1, 0), BK_EINVAL);
    assert_int_equal(bk_window_advance(NULL, 0), BK_EINVAL);
    assert_int_equal(bk_window_contains(NULL, "x", 1, 0), 0);
    bk_window_free(f);
}

/* Time mode at the sized rate: `rate` keys per time unit, n = rate * W per
 * window, for `windows` windows. Every key is found for (g - 1) s after
 * its add; keys of age g s are found at the false-positive rate at most. */
static void check_stream(uint32_t g, uint64_t W, uint64_t rate,
                         uint64_t windows, double p)
{
    bk_window *f;
    assert_int_equal(bk_window_create(&f, rate * W, p, W, g, 0, 31 + g),
                     BK_OK);
    const uint64_t s = bk_window_slice(f);
    const uint64_t last_found = (g - 1) * s - 1, gone = g * s;
    assert_true(last_found >= W - 1);
    uint64_t misses = 0, expired_checked = 0, expired_found = 0;
    uint64_t absent_checked = 0, absent_found = 0, next_absent = 0;

    for (uint64_t t = 0; t < windows * W; t++) {
        for (uint64_t j = 0; j < rate; j++) add_key(f, t * rate + j, TAG_IN, t);
        /* the guarantee: ages 0, W - 1 and (g - 1) s - 1 */
        const uint64_t ages[] = {0, W - 1, last_found};
        for (int a = 0; a < 3; a++) {
            if (ages[a] > t) continue;
            for (uint64_t j = 0; j < rate; j++)
                misses += !has_key(f, (t - ages[a]) * rate + j, TAG_IN, t);
        }
        /* expiry: age g s */
        if (t >= gone) {
            for (uint64_t j = 0; j < rate; j++) {
                expired_found += has_key(f, (t - gone) * rate + j, TAG_IN, t);
                expired_checked++;
            }
        }
        /* steady state (after the first window): never-added keys */
        if (t >= W) {
            for (uint64_t j = 0; j < rate; j++) {
                absent_found += has_key(f, next_absent++, TAG_OUT, t);
                absent_checked++;
            }
        }
    }
    bk_window_stats st;
    assert_int_equal(bk_window_get_stats(f, &st), BK_OK);
    double expired = (double)expired_found / (double)expired_checked;
    double absent = (double)absent_found / (double)absent_checked;
    double tol_e = tu_tolerance(p, expired_checked, 5);
    double tol_a = tu_tolerance(p, absent_checked, 5);
    print_message("g=%u W=%llu s=%llu: %llu keys, %.2f bits per key of a "
                  "window; misses %llu; expired found %.5f (tol %.5f); "
                  "absent found %.5f (tol %.5f); fpr_now %.5f; rotations "
                  "%llu (early %llu)\n",
                  g, (unsigned long long)W, (unsigned long long)s,
                  (unsigned long long)(windows * W * rate),
                  8.0 * (double)st.bytes / (double)(rate * W),
                  (unsigned long long)misses, expired, tol_e, absent, tol_a,
                  st.fpr_now, (unsigned long long)st.rotations,
                  (unsigned long long)st.early_rotations);
    assert_true(misses == 0);
    assert_true(expired < p + tol_e);
    assert_true(absent < p + tol_a);
    assert_true(st.early_rotations == 0);
    assert_true(st.fpr_now <= st.fpr_bound);
    bk_window_free(f);
}

static void test_stream_g4(void **state) { (void)state; check_stream(4, 1000, 3, 20, 0.01); }
static void test_stream_g2(void **state) { (void)state; check_stream(2, 500, 4, 20, 0.01); }
static void test_stream_g8(void **state) { (void)state; check_stream(8, 700, 3, 20, 0.02); }

/* A stream 100 times the per-window capacity. The window filter stays
 * within its target; a plain blocked filter of the same memory given the
 * same stream saturates. Both are shown. */
static void test_stream_100x_vs_plain(void **state)
{
    (void)state;
    const uint64_t W = 1000, rate = 10, n = rate * W, windows = 100;
    const double p = 0.01;
    bk_window *f;
    bk_blocked *plain;
    assert_int_equal(bk_window_create(&f, n, p, W, 4, 0, 41), BK_OK);
    bk_window_stats st;
    assert_int_equal(bk_window_get_stats(f, &st), BK_OK);
    bk_window_generation_stats gs;
    assert_int_equal(bk_window_get_generation_stats(f, 0, &gs), BK_OK);
    uint64_t bits = gs.bits * st.generations;
    assert_int_equal(bk_blocked_create_mk(&plain, bits, gs.hashes, 41), BK_OK);

    char key[TU_KEY_LEN];
    for (uint64_t t = 0; t < windows * W; t++)
        for (uint64_t j = 0; j < rate; j++) {
            tu_key(key, t * rate + j, TAG_IN);
            bk_window_add(f, key, sizeof(key), t);
            bk_blocked_add(plain, key, sizeof(key));
        }
    const uint64_t trials = 200000, now = windows * W - 1;
    uint64_t found_window = 0, found_plain = 0;
    for (uint64_t i = 0; i < trials; i++) {
        tu_key(key, i, TAG_OUT);
        found_window += (uint64_t)bk_window_contains(f, key, sizeof(key), now);
        found_plain += (uint64_t)bk_blocked_contains(plain, key, sizeof(key));
    }
    /* the last window's keys are all there */
    for (uint64_t i = (now - W + 1) * rate; i < (now + 1) * rate; i++)
        assert_int_equal(has_key(f, i, TAG_IN, now), 1);
    double fw = (double)found_window / trials, fp = (double)found_plain / trials;
    assert_int_equal(bk_window_get_stats(f, &st), BK_OK);
    print_message("stream of %llu keys (100 windows of %llu), %llu bits "
                  "each: window filter fpr %.5f (target %.2f, tol %.5f), "
                  "plain blocked filter fpr %.5f\n",
                  (unsigned long long)(windows * n), (unsigned long long)n,
                  (unsigned long long)bits, fw, p,
                  tu_tolerance(p, trials, 5), fp);
    assert_true(fw < p + tu_tolerance(p, trials, 5));
    assert_true(fp > 0.99);
    assert_true(st.rotations >= windows * 3 - 1);
    bk_blocked_free(plain);
    bk_window_free(f);
}

/* Count mode: the last N insertions. */
static void test_count_mode(void **state)
{
    (void)state;
    const uint64_t N = 1000, total = 100000;
    const uint32_t g = 5;
    const double p = 0.01;
    bk_window *f;
    assert_int_equal(bk_window_create_count(&f, N, p, g, 51), BK_OK);
    const uint64_t s = bk_window_slice(f);
    assert_true(s == 250);
    uint64_t misses = 0, expired_found = 0, expired_checked = 0;
    for (uint64_t i = 0; i < total; i++) {
        add_key(f, i, TAG_IN, 12345 /* ignored */);
        uint64_t made = i + 1;
        assert_true(bk_window_now(f) == made);
        /* the oldest of the last N insertions */
        if (made >= N) misses += !has_key(f, made - N, TAG_IN, 0);
        misses += !has_key(f, i, TAG_IN, 0);
        /* older than g s insertions: gone */
        if (made > g * s) {
            expired_found += has_key(f, made - 1 - g * s, TAG_IN, 0);
            expired_checked++;
        }
    }
    double expired = (double)expired_found / (double)expired_checked;
    double tol = tu_tolerance(p, expired_checked, 5);
    print_message("count mode N=%llu g=%u: misses %llu, expired found %.5f "
                  "(tol %.5f)\n",
                  (unsigned long long)N, g, (unsigned long long)misses,
                  expired, tol);
    assert_true(misses == 0);
    assert_true(expired < p + tol);
    assert_int_equal(bk_window_advance(f, UINT64_MAX), 0); /* no time here */
    bk_window_free(f);
}

/* Re-adding a key refreshes it; the answer says whether it was new. */
static void test_refresh(void **state)
{
    (void)state;
    bk_window *f;
    assert_int_equal(bk_window_create(&f, 100, 0.001, 100, 3, 0, 61), BK_OK);
    assert_int_equal(add_key(f, 1, TAG_IN, 0), 1);
    assert_int_equal(add_key(f, 1, TAG_IN, 10), 0);
    /* s = 50: at 120 the key (from slice 0) is in the oldest generation */
    assert_int_equal(add_key(f, 1, TAG_IN, 120), 0);
    /* gone from its first generation, but found: re-added at 120 */
    assert_int_equal(has_key(f, 1, TAG_IN, 200), 1);
    assert_int_equal(has_key(f, 1, TAG_IN, 120 + 3 * 50), 0);
    bk_window_free(f);
}

/* Jumps forward clear everything; backward times are the latest time. */
static void test_clock_jumps(void **state)
{
    (void)state;
    bk_window *f;
    const uint64_t start = UINT64_C(1) << 40;
    assert_int_equal(bk_window_create(&f, 1000, 0.01, 1000, 4, start, 71), BK_OK);
    const uint64_t s = bk_window_slice(f);
    for (uint64_t i = 0; i < 500; i++) add_key(f, i, TAG_IN, start + i);
    uint64_t now = start + 499;

    /* backwards: acts at the latest time; nothing is lost, no crash */
    assert_int_equal(add_key(f, 500, TAG_IN, 0), 1);
    assert_true(bk_window_now(f) == now);
    assert_int_equal(bk_window_advance(f, 3), 0);
    assert_true(bk_window_now(f) == now);
    for (uint64_t i = 0; i <= 500; i++)
        assert_int_equal(has_key(f, i, TAG_IN, 0), 1);

    /* a jump of g s from the current slice start clears every generation,
     * whatever its size; lookups at that time already see nothing */
    bk_window_stats st;
    assert_int_equal(bk_window_get_stats(f, &st), BK_OK);
    uint64_t jump = st.slice_start + 4 * s;
    uint64_t found = 0;
    for (uint64_t i = 0; i <= 500; i++) found += has_key(f, i, TAG_IN, jump);
    assert_true(found == 0);
    assert_int_equal(bk_window_advance(f, UINT64_MAX - 5), 4);
    assert_int_equal(bk_window_get_stats(f, &st), BK_OK);
    assert_true(st.items == 0);
    assert_true(st.now == UINT64_MAX - 5);
    assert_true(st.slice_start <= st.now && st.now - st.slice_start < s);
    /* and the filter works at the end of time */
    assert_int_equal(add_key(f, 7, TAG_IN, UINT64_MAX), 1);
    assert_int_equal(has_key(f, 7, TAG_IN, UINT64_MAX), 1);
    assert_int_equal(add_key(f, 7, TAG_IN, UINT64_MAX), 0);

    /* a jump of one slice rotates once */
    bk_window_free(f);
    assert_int_equal(bk_window_create(&f, 1000, 0.01, 300, 4, 0, 71), BK_OK);
    assert_int_equal(bk_window_advance(f, 99), 0);
    assert_int_equal(bk_window_advance(f, 100), 1);
    assert_int_equal(bk_window_advance(f, 350), 2);
    bk_window_generation_stats gs;
    for (uint32_t age = 0; age < 4; age++) {
        assert_int_equal(bk_window_get_generation_stats(f, age, &gs), BK_OK);
        assert_true(gs.start == (age < 3 ? 300 - 100 * age : 0));
    }
    bk_window_free(f);
}

/* A stream ten times faster than sized: generations fill and rotate early;
 * the rate stays within target and every key is still found for at least
 * n later insertions. */
static void test_early_rotation(void **state)
{
    (void)state;
    const uint64_t W = 1000, n = 2000, rate = 20; /* 10x n / W */
    const double p = 0.01;
    bk_window *f;
    assert_int_equal(bk_window_create(&f, n, p, W, 4, 0, 81), BK_OK);
    uint64_t misses = 0, absent = 0, trials = 0;
    for (uint64_t t = 0; t < 20 * W; t++) {
        for (uint64_t j = 0; j < rate; j++) add_key(f, t * rate + j, TAG_IN, t);
        uint64_t made = (t + 1) * rate;
        if (made >= n) misses += !has_key(f, made - n, TAG_IN, t);
        if (t >= W) {
            absent += has_key(f, trials++, TAG_OUT, t);
        }
    }
    bk_window_stats st;
    assert_int_equal(bk_window_get_stats(f, &st), BK_OK);
    double measured = (double)absent / (double)trials;
    print_message("10x too fast: %llu rotations, %llu early; misses within "
                  "n keys %llu; fpr %.5f (tol %.5f)\n",
                  (unsigned long long)st.rotations,
                  (unsigned long long)st.early_rotations,
                  (unsigned long long)misses, measured,
                  tu_tolerance(p, trials, 5));
    assert_true(st.early_rotations > 0);
    assert_true(misses == 0);
    assert_true(measured < p + tu_tolerance(p, trials, 5));
    bk_window_free(f);
}

static void test_batch_clear_generic(void **state)
{
    (void)state;
    enum { N = 500 };
    tu_keyset ks;
    tu_keyset_make_cycle(&ks, N, 400, TAG_IN);
    const void **ptrs = ks.keys;
    const size_t *lens = ks.lens;
    uint8_t res[N];
    bk_window *f;
    /* 3000 per window: one generation takes 1000, so no early rotation */
    assert_int_equal(bk_window_create(&f, 3000, 0.001, 60, 4, 0, 91), BK_OK);
    int64_t added = bk_window_add_batch(f, ptrs, lens, N, 5, res);
    assert_true(added >= 395 && added <= 400);
    for (int i = 400; i < N; i++) assert_int_equal(res[i], 0);
    assert_true(bk_window_contains_batch(f, ptrs, lens, N, 5, res) == N);
    assert_int_equal(bk_window_contains_hash(f, bk_hash_key(ptrs[3], TU_KEY_LEN, 91), 5), 1);
    assert_true(bk_window_add_batch(f, NULL, lens, 1, 0, NULL) == BK_EINVAL);
    assert_true(bk_window_contains_batch(f, ptrs, NULL, 1, 0, NULL) == BK_EINVAL);

    /* the generic handle acts at the filter's clock (5); (its family,
     * removes refused, capacity: test_conformance.c, rows "window") */
    bk_filter *g = bk_window_as_filter(f);
    assert_true(bk_filter_as_window(g) == f);
    assert_null(bk_filter_as_scalable(g));
    assert_int_equal(bk_filter_add(g, "fresh", 5), 1);
    assert_int_equal(bk_filter_contains(g, "fresh", 5), 1);
    assert_int_equal(bk_filter_add(g, "fresh", 5), 0);
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(g, &info), BK_OK);
    assert_int_equal(info.parts, 4);
    assert_true(info.items >= 396 && info.items <= 401);
    assert_true(info.bytes == bk_window_bytes(f));
    assert_true(fabs(info.fpr_at_capacity - 0.001) < 1e-12);

    bk_window_clear(f);
    assert_true(bk_window_contains_batch(f, ptrs, lens, N, 5, NULL) == 0);
    assert_int_equal(bk_filter_get_info(g, &info), BK_OK);
    assert_true(info.items == 0);
    bk_window_clear(NULL);
    bk_filter_free(g);
    tu_keyset_free(&ks);
}

/* Memory against generations (printed for the design notes): bits per key
 * of one window, against a plain blocked filter for one window's keys. */
static void test_memory_tradeoff(void **state)
{
    (void)state;
    const uint64_t n = 100000;
    const double p = 0.01;
    uint64_t plain_bits;
    assert_int_equal(bk_blocked_optimal(n, p, &plain_bits, NULL), BK_OK);
    static const uint32_t gs[] = {2, 3, 4, 6, 8, 12, 16};
    double ratio4 = 0.0;
    for (size_t i = 0; i < sizeof(gs) / sizeof(gs[0]); i++) {
        bk_window *f;
        bk_window_stats st;
        assert_int_equal(bk_window_create(&f, n, p, 600, gs[i], 0, 1), BK_OK);
        assert_int_equal(bk_window_get_stats(f, &st), BK_OK);
        double ratio = (double)st.bytes * 8.0 / (double)plain_bits;
        print_message("g=%2u: %.2f bits per window key (plain %.2f): %.2fx; "
                      "keys outlive W by at most %.1f%% of W\n",
                      gs[i], (double)st.bytes * 8.0 / n, (double)plain_bits / n,
                      ratio, 100.0 * (double)st.slice / 600.0);
        if (gs[i] == 4) ratio4 = ratio;
        bk_window_free(f);
    }
    assert_true(ratio4 > 1.0 && ratio4 < 2.5);
}

/*--------------------------------------------------------------------------*/

static int attempt_create(void *ctx)
{
    bk_window *f;
    int rc = ctx ? bk_window_create_count(&f, 5000, 0.01, 6, 1)
                 : bk_window_create(&f, 5000, 0.01, 100, 5, 0, 1);
    if (rc != BK_OK) return rc;
    bk_window_free(f);
    return BK_OK;
}

static void test_oom(void **state)
{
    (void)state;
    assert_true(tu_oom_report("create (g = 5)", attempt_create, NULL) >= 3 + 5);
    tu_oom_report("create_count (g = 6)", attempt_create, (void *)1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_stream_g4),
        cmocka_unit_test(test_stream_g2),
        cmocka_unit_test(test_stream_g8),
        cmocka_unit_test(test_stream_100x_vs_plain),
        cmocka_unit_test(test_count_mode),
        cmocka_unit_test(test_refresh),
        cmocka_unit_test(test_clock_jumps),
        cmocka_unit_test(test_early_rotation),
        cmocka_unit_test(test_batch_clear_generic),
        cmocka_unit_test(test_memory_tradeoff),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
