/*
 * test_bloom.c - the classic Bloom filter.
 *
 * False-positive tests measure the rate on keys that were never added and
 * compare it with (1 - e^(-kn/m))^k for the m and k the filter chose; the
 * tolerance is 5 binomial standard deviations of the number of trials
 * (a correct filter fails with probability ~6e-7 per check; the seeds are
 * fixed, so a run is reproducible either way).
 */
#include "testutil.h"

#define N_KEYS 1000000u
#define TAG_IN 1u
#define TAG_OUT 2u

TU_ADD_RANGE(add_range, bk_bloom, bk_bloom_add)
TU_COUNT_FOUND(count_found, bk_bloom, bk_bloom_contains)

/*--------------------------------------------------------------------------*/

static void test_no_false_negatives(void **state)
{
    (void)state;
    static const uint64_t seeds[] = {1, 0xDEADBEEF, BK_DEFAULT_SEED};
    for (size_t s = 0; s < 3; s++) {
        bk_bloom *f;
        assert_int_equal(bk_bloom_create(&f, N_KEYS, 0.01, seeds[s]), BK_OK);
        assert_true(bk_bloom_seed(f) == seeds[s]);
        add_range(f, 0, N_KEYS, TAG_IN);
        assert_true(count_found(f, 0, N_KEYS, TAG_IN) == N_KEYS);
        bk_bloom_free(f);
    }
}

static void check_fpr(double p)
{
    bk_bloom *f;
    assert_int_equal(bk_bloom_create(&f, N_KEYS, p, 99), BK_OK);
    add_range(f, 0, N_KEYS, TAG_IN);
    const uint64_t trials = 1000000;
    double measured = (double)count_found(f, 0, trials, TAG_OUT) / trials;
    double expected = bk_bloom_fpr(N_KEYS, bk_bloom_bits(f), bk_bloom_hashes(f));
    double tol = tu_tolerance(expected, trials, 5);
    print_message("p=%g: m=%llu k=%u expected %.6f measured %.6f (tol %.6f)\n",
                  p, (unsigned long long)bk_bloom_bits(f), bk_bloom_hashes(f),
                  expected, measured, tol);
    assert_true(fabs(measured - expected) < tol);

    /* the filter's own view agrees: fill^k within the same tolerance */
    bk_bloom_stats st;
    assert_int_equal(bk_bloom_get_stats(f, &st), BK_OK);
    assert_true(fabs(st.fpr_now - expected) < tol);
    assert_true(fabs(st.fpr_at_capacity - expected) < 1e-12);
    bk_bloom_free(f);
}

static void test_fpr_1_percent(void **state) { (void)state; check_fpr(0.01); }
static void test_fpr_01_percent(void **state) { (void)state; check_fpr(0.001); }

/* 6e9 bits, more than 2^32. With k = 1 and 1e6 keys the rate is
 * 1 - e^(-n/m) = 1.67e-4, measurable with 1e7 absent keys (5 sigma = 12%).
 * Were positions truncated to 32 bits, only 2^32 bits would be used and the
 * rate would be 2.33e-4: 16 sigma away. A k = 3 filter of the same size
 * checks multi-probe keys for false negatives. */
static void test_more_than_2_32_bits(void **state)
{
    (void)state;
    const uint64_t m = UINT64_C(6000000000);
    bk_bloom *f;
    int rc = bk_bloom_create_mk(&f, m, 1, 5);
    if (rc == BK_ENOMEM) skip(); /* 750 MB not available here */
    assert_int_equal(rc, BK_OK);
    add_range(f, 0, N_KEYS, TAG_IN);
    assert_true(count_found(f, 0, N_KEYS, TAG_IN) == N_KEYS);
    const uint64_t trials = 10000000;
    double measured = (double)count_found(f, 0, trials, TAG_OUT) / trials;
    double expected = bk_bloom_fpr(N_KEYS, m, 1);
    double truncated = bk_bloom_fpr(N_KEYS, UINT64_C(1) << 32, 1);
    double tol = tu_tolerance(expected, trials, 5);
    print_message("6e9 bits, k=1: expected %.3g measured %.3g (tol %.2g; "
                  "32-bit truncation would give %.3g)\n",
                  expected, measured, tol, truncated);
    assert_true(fabs(measured - expected) < tol);
    assert_true(fabs(truncated - expected) > 3 * tol);
    bk_bloom_free(f);

    assert_int_equal(bk_bloom_create_mk(&f, m, 3, 6), BK_OK);
    add_range(f, 0, N_KEYS, TAG_IN);
    assert_true(count_found(f, 0, N_KEYS, TAG_IN) == N_KEYS);
    bk_bloom_stats st;
    assert_int_equal(bk_bloom_get_stats(f, &st), BK_OK);
    /* 3e6 probes into 6e9 bits: about 750 collide, so bits_set ~ 3e6 - 750 */
    assert_true(st.bits_set > 3000000 - 1500 && st.bits_set <= 3000000);
    bk_bloom_free(f);
}

/* Estimate -(m/k) ln(1 - t/m) within 2% at 10%, 50% and 100% of capacity. */
static void test_cardinality_estimate(void **state)
{
    (void)state;
    bk_bloom *f;
    assert_int_equal(bk_bloom_create(&f, N_KEYS, 0.01, 11), BK_OK);
    static const uint64_t checkpoints[] = {N_KEYS / 10, N_KEYS / 2, N_KEYS};
    uint64_t added = 0;
    for (size_t c = 0; c < 3; c++) {
        add_range(f, added, checkpoints[c], TAG_IN);
        added = checkpoints[c];
        double est = bk_bloom_estimate_items(f);
        print_message("%llu added, estimated %.0f\n", (unsigned long long)added,
                      est);
        assert_true(fabs(est - (double)added) < 0.02 * (double)added);
        /* items counts adds that returned 1: every key but the few that were
         * false positives when added (at most the FPR at capacity, ~1%) */
        uint64_t items = bk_bloom_items(f);
        assert_true(items <= added && items >= added - added / 50);
    }
    bk_bloom_free(f);
}

static void test_add_and_add_if_absent(void **state)
{
    (void)state;
    bk_bloom *f;
    bk_bloom_stats before, after;
    assert_int_equal(bk_bloom_create(&f, 1000, 0.01, 3), BK_OK);
    assert_int_equal(bk_bloom_contains(f, "apple", 5), 0);
    assert_int_equal(bk_bloom_add(f, "apple", 5), 1);
    assert_int_equal(bk_bloom_add(f, "apple", 5), 0);
    assert_int_equal(bk_bloom_contains(f, "apple", 5), 1);
    assert_int_equal(bk_bloom_add_if_absent(f, "pear", 4), 1);
    assert_int_equal(bk_bloom_get_stats(f, &before), BK_OK);
    assert_int_equal(bk_bloom_add_if_absent(f, "pear", 4), 0);
    assert_int_equal(bk_bloom_add_if_absent(f, "apple", 5), 0);
    assert_int_equal(bk_bloom_get_stats(f, &after), BK_OK);
    assert_true(before.bits_set == after.bits_set);
    assert_true(bk_bloom_items(f) == 2);
    /* empty and NULL keys are valid and equal */
    assert_int_equal(bk_bloom_add(f, NULL, 0), 1);
    assert_int_equal(bk_bloom_contains(f, "", 0), 1);
    /* the _hash variants are the same operations */
    bk_hash h = bk_hash_key("plum", 4, bk_bloom_seed(f));
    assert_int_equal(bk_bloom_contains_hash(f, h), 0);
    assert_int_equal(bk_bloom_add_if_absent_hash(f, h), 1);
    assert_int_equal(bk_bloom_add_hash(f, h), 0);
    assert_int_equal(bk_bloom_contains(f, "plum", 4), 1);
    bk_bloom_free(f);
}

/* Batch answers equal single answers, in order, with keys of 0..47 bytes;
 * the batch-built filter has the same bits as the one built key by key. */
static void test_batch_equals_single(void **state)
{
    (void)state;
    enum { N = 50000 };
    static char storage[2 * N][48];
    static const void *keys[2 * N];
    static size_t lens[2 * N];
    static uint8_t got[2 * N];
    uint64_t rng = 5;
    for (size_t i = 0; i < 2 * N; i++) {
        lens[i] = (size_t)(tu_next(&rng) % 48);
        for (size_t j = 0; j < lens[i]; j++) storage[i][j] = (char)tu_next(&rng);
        keys[i] = storage[i];
    }
    bk_bloom *single, *batch;
    assert_int_equal(bk_bloom_create(&single, N, 0.01, 8), BK_OK);
    assert_int_equal(bk_bloom_create(&batch, N, 0.01, 8), BK_OK);

    int64_t fresh = 0;
    int64_t batch_fresh = bk_bloom_add_batch(batch, keys, lens, N, got);
    for (size_t i = 0; i < N; i++) {
        int r = bk_bloom_add(single, keys[i], lens[i]);
        fresh += r;
        assert_int_equal(got[i], r);
    }
    assert_true(batch_fresh == fresh);
    assert_true(bk_bloom_equal(single, batch));
    assert_true(bk_bloom_items(single) == bk_bloom_items(batch));

    int64_t found = bk_bloom_contains_batch(batch, keys, lens, 2 * N, got);
    int64_t single_found = 0;
    for (size_t i = 0; i < 2 * N; i++) {
        int r = bk_bloom_contains(single, keys[i], lens[i]);
        single_found += r;
        assert_int_equal(got[i], r);
        if (i < N) assert_int_equal(r, 1);
    }
    assert_true(found == single_found);
    /* results may be NULL; n = 0 is a no-op; missing arrays are errors */
    assert_true(bk_bloom_contains_batch(batch, keys, lens, 2 * N, NULL) == found);
    assert_true(bk_bloom_add_batch(batch, NULL, NULL, 0, NULL) == 0);
    assert_true(bk_bloom_add_batch(batch, NULL, lens, 3, NULL) == BK_EINVAL);
    assert_true(bk_bloom_contains_batch(batch, keys, NULL, 3, got) == BK_EINVAL);
    assert_true(bk_bloom_add_batch(NULL, keys, lens, 3, got) == BK_EINVAL);
    bk_bloom_free(single);
    bk_bloom_free(batch);
}

static void test_union_and_intersection(void **state)
{
    (void)state;
    enum { N = 100000 };
    bk_bloom *a, *b, *u, *x;
    assert_int_equal(bk_bloom_create(&a, 2 * N, 0.01, 4), BK_OK);
    assert_int_equal(bk_bloom_create(&b, 2 * N, 0.01, 4), BK_OK);
    add_range(a, 0, N, TAG_IN);          /* A = [0, N)      */
    add_range(b, N / 2, N + N / 2, TAG_IN); /* B = [N/2, 3N/2) */

    assert_int_equal(bk_bloom_clone(&u, a), BK_OK);
    assert_int_equal(bk_bloom_union(u, b), BK_OK);
    assert_true(count_found(u, 0, N + N / 2, TAG_IN) == N + N / 2);
    /* the union of two filters is the filter of the union */
    bk_bloom *direct;
    assert_int_equal(bk_bloom_create(&direct, 2 * N, 0.01, 4), BK_OK);
    add_range(direct, 0, N + N / 2, TAG_IN);
    assert_true(bk_bloom_equal(u, direct));
    assert_true(fabs((double)bk_bloom_items(u) - 1.5 * N) < 0.02 * 1.5 * N);

    assert_int_equal(bk_bloom_clone(&x, a), BK_OK);
    assert_int_equal(bk_bloom_intersect(x, b), BK_OK);
    assert_true(count_found(x, N / 2, N, TAG_IN) == N / 2); /* A and B */
    /* keys only in A survive only where B happens to cover all their bits:
     * at B's fill (~26% at half capacity, k = 7) about 1e-4, far under 1% */
    uint64_t only_a = count_found(x, 0, N / 2, TAG_IN);
    assert_true(only_a < N / 200);

    /* incompatible filters are refused and left unchanged */
    bk_bloom *other_m, *other_k, *other_seed;
    assert_int_equal(bk_bloom_create(&other_m, 3 * N, 0.01, 4), BK_OK);
    assert_int_equal(bk_bloom_create_mk(&other_k, bk_bloom_bits(a), 3, 4), BK_OK);
    assert_int_equal(bk_bloom_create(&other_seed, 2 * N, 0.01, 5), BK_OK);
    assert_int_equal(bk_bloom_union(a, other_m), BK_EINCOMPAT);
    assert_int_equal(bk_bloom_union(a, other_k), BK_EINCOMPAT);
    assert_int_equal(bk_bloom_intersect(a, other_seed), BK_EINCOMPAT);
    assert_int_equal(bk_bloom_union(a, NULL), BK_EINVAL);
    assert_int_equal(bk_bloom_intersect(NULL, a), BK_EINVAL);
    assert_true(count_found(a, 0, N, TAG_IN) == N);

    bk_bloom_free(other_m);
    bk_bloom_free(other_k);
    bk_bloom_free(other_seed);
    bk_bloom_free(direct);
    bk_bloom_free(a);
    bk_bloom_free(b);
    bk_bloom_free(u);
    bk_bloom_free(x);
}

static void test_clear_and_clone(void **state)
{
    (void)state;
    bk_bloom *f, *c;
    assert_int_equal(bk_bloom_create(&f, 10000, 0.01, 1), BK_OK);
    add_range(f, 0, 10000, TAG_IN);
    assert_int_equal(bk_bloom_clone(&c, f), BK_OK);
    assert_true(bk_bloom_equal(f, c));
    assert_true(bk_bloom_items(c) == bk_bloom_items(f));
    bk_bloom_clear(f);
    assert_true(count_found(f, 0, 10000, TAG_IN) == 0);
    assert_true(bk_bloom_items(f) == 0);
    assert_false(bk_bloom_equal(f, c));
    assert_true(count_found(c, 0, 10000, TAG_IN) == 10000); /* independent */
    bk_bloom_stats st;
    assert_int_equal(bk_bloom_get_stats(f, &st), BK_OK);
    assert_true(st.bits_set == 0 && st.fill == 0.0 && st.fpr_now == 0.0);
    assert_true(st.estimated_items == 0.0);
    bk_bloom_free(c);
    bk_bloom_clear(NULL);
    bk_bloom_free(NULL);
    assert_int_equal(bk_bloom_clone(&c, NULL), BK_EINVAL);
    assert_null(c);
    assert_int_equal(bk_bloom_clone(NULL, f), BK_EINVAL);
    assert_false(bk_bloom_equal(f, NULL));
    bk_bloom_free(f);
}

static void test_stats(void **state)
{
    (void)state;
    bk_bloom *f;
    bk_bloom_stats st;
    assert_int_equal(bk_bloom_create(&f, 100000, 0.001, 77), BK_OK);
    add_range(f, 0, 50000, TAG_IN);
    assert_int_equal(bk_bloom_get_stats(f, &st), BK_OK);
    assert_true(st.bits == 1437759);
    assert_int_equal(st.hashes, 10);
    assert_true(st.seed == 77);
    assert_true(st.capacity == 100000);
    assert_true(st.target_fpr == 0.001);
    assert_true(st.items == bk_bloom_items(f));
    assert_true(fabs(st.fill - (double)st.bits_set / (double)st.bits) < 1e-15);
    assert_true(fabs(st.fpr_now - pow(st.fill, 10)) < 1e-15);
    assert_true(fabs(st.fpr_at_capacity - bk_bloom_fpr(100000, st.bits, 10)) < 1e-15);
    assert_true(st.bytes >= st.bits / 8);
    assert_true(st.bytes < st.bits / 8 + 1024);
    assert_int_equal(bk_bloom_get_stats(f, NULL), BK_EINVAL);
    assert_int_equal(bk_bloom_get_stats(NULL, &st), BK_EINVAL);
    bk_bloom_free(f);

    /* a filter made from (m, k) has no capacity and no FPR at capacity */
    assert_int_equal(bk_bloom_create_mk(&f, 1000, 3, 0), BK_OK);
    assert_int_equal(bk_bloom_get_stats(f, &st), BK_OK);
    assert_true(st.capacity == 0 && st.target_fpr == 0 && st.fpr_at_capacity == 0);
    assert_true(st.bits == 1000);
    /* when every bit is set the estimate is infinite, not a crash */
    add_range(f, 0, 100000, TAG_IN);
    assert_int_equal(bk_bloom_get_stats(f, &st), BK_OK);
    assert_true(st.bits_set == 1000);
    assert_true(isinf(st.estimated_items));
    assert_true(st.fpr_now == 1.0);
    bk_bloom_free(f);
}

static void test_invalid_parameters(void **state)
{
    (void)state;
    bk_bloom *f = (bk_bloom *)&f; /* must be reset to NULL on failure */
    assert_int_equal(bk_bloom_create(&f, 1000, 0.0, 0), BK_EFPR);
    assert_null(f);
    assert_int_equal(bk_bloom_create(&f, 1000, 1.0, 0), BK_EFPR);
    assert_int_equal(bk_bloom_create(&f, 1000, -1.0, 0), BK_EFPR);
    assert_int_equal(bk_bloom_create(&f, 1000, NAN, 0), BK_EFPR);
    assert_int_equal(bk_bloom_create(&f, 0, 0.01, 0), BK_ECAPACITY);
    assert_int_equal(bk_bloom_create(&f, UINT64_C(1000000000000000), 1e-9, 0),
                     BK_ESIZE);
    assert_int_equal(bk_bloom_create(&f, 1000, 1e-30, 0), BK_EHASHES);
    assert_int_equal(bk_bloom_create(NULL, 1000, 0.01, 0), BK_EINVAL);
    assert_int_equal(bk_bloom_create_mk(&f, 0, 3, 0), BK_ESIZE);
    assert_int_equal(bk_bloom_create_mk(&f, BK_MAX_BITS + 1, 3, 0), BK_ESIZE);
    assert_int_equal(bk_bloom_create_mk(&f, 1000, 0, 0), BK_EHASHES);
    assert_int_equal(bk_bloom_create_mk(&f, 1000, BK_MAX_HASHES + 1, 0), BK_EHASHES);
    assert_int_equal(bk_bloom_create_mk(NULL, 1000, 3, 0), BK_EINVAL);
    /* the largest legal size (32 TiB) cannot be allocated here: ENOMEM */
    assert_int_equal(bk_bloom_create_mk(&f, BK_MAX_BITS, 3, 0), BK_ENOMEM);
    assert_null(f);
    /* the edges that are legal */
    assert_int_equal(bk_bloom_create_mk(&f, 1, 1, 0), BK_OK);
    assert_int_equal(bk_bloom_add(f, "a", 1), 1);
    assert_int_equal(bk_bloom_contains(f, "zzz", 3), 1); /* one bit: all set */
    bk_bloom_free(f);
    assert_int_equal(bk_bloom_create_mk(&f, 64, BK_MAX_HASHES, 0), BK_OK);
    bk_bloom_free(f);
}

/*--------------------------------------------------------------------------
 * Allocation failures: every constructor fails cleanly at every allocation.
 *--------------------------------------------------------------------------*/

TU_OOM_ATTEMPT(try_create, bk_bloom, bk_bloom_create(&f, 5000, 0.01, 1), bk_bloom_free)
TU_OOM_ATTEMPT(try_create_mk, bk_bloom, bk_bloom_create_mk(&f, 100000, 4, 1), bk_bloom_free)

static int try_clone(void *ctx)
{
    bk_bloom *c;
    int rc = bk_bloom_clone(&c, ctx);
    if (rc == BK_OK) {
        rc = bk_bloom_equal(c, ctx) ? BK_OK : BK_EINVAL;
        bk_bloom_free(c);
    }
    return rc;
}

static void test_allocation_failures(void **state)
{
    (void)state;
    assert_true(tu_oom_loop(try_create, NULL) >= 1);
    assert_true(tu_oom_loop(try_create_mk, NULL) >= 1);
    bk_bloom *src;
    assert_int_equal(bk_bloom_create(&src, 1000, 0.01, 1), BK_OK);
    add_range(src, 0, 500, TAG_IN);
    assert_true(tu_oom_loop(try_clone, src) >= 1);
    bk_bloom_free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_false_negatives),
        cmocka_unit_test(test_fpr_1_percent),
        cmocka_unit_test(test_fpr_01_percent),
        cmocka_unit_test(test_more_than_2_32_bits),
        cmocka_unit_test(test_cardinality_estimate),
        cmocka_unit_test(test_add_and_add_if_absent),
        cmocka_unit_test(test_batch_equals_single),
        cmocka_unit_test(test_union_and_intersection),
        cmocka_unit_test(test_clear_and_clone),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_invalid_parameters),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
