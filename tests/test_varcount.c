/*
 * test_varcount.c - the filter with variable-length (unary) counters:
 * parameters, counts and removes against an exact multiset, measured
 * false-positive rates (full and after churn), the freeze rule of a block
 * that overflows, what a batch reports, clear, and the allocations of a
 * create. Batches against single adds, clones, files and allocation
 * failures on the generic handle are tests/test_conformance.c's.
 */
#include "testutil.h"

static bk_filter *make(uint64_t n, double p, uint64_t seed)
{
    bk_varcount *v;
    assert_int_equal(bk_varcount_create(&v, n, p, seed), BK_OK);
    return bk_varcount_as_filter(v);
}

static void test_invalid_parameters(void **state)
{
    (void)state;
    bk_varcount *f = (bk_varcount *)1;
    assert_int_equal(bk_varcount_create(NULL, 10, 0.01, 1), BK_EINVAL);
    assert_int_equal(bk_varcount_create(&f, 0, 0.01, 1), BK_ECAPACITY);
    assert_null(f);
    assert_int_equal(bk_varcount_create(&f, 10, 0.0, 1), BK_EFPR);
    assert_int_equal(bk_varcount_create(&f, 10, NAN, 1), BK_EFPR);
    assert_int_equal(bk_varcount_create(&f, UINT64_MAX, 0.01, 1), BK_ESIZE);
    assert_int_equal(bk_varcount_get_stats(NULL, NULL), BK_EINVAL);
    bk_varcount_free(NULL);
    assert_null(bk_filter_as_varcount(NULL));
}

/* The sizing meets both bounds and beats 0.6 x the 4-bit counting filter's
 * bits (the goal) by the formulas. */
static void test_sizing(void **state)
{
    (void)state;
    const double rates[] = {0.01, 0.001};
    for (int i = 0; i < 2; i++) {
        uint64_t blocks, cblocks;
        uint32_t c, k, ck;
        assert_int_equal(bk_varcount_optimal(1000000, rates[i], &blocks, &c, &k), BK_OK);
        assert_int_equal(bk_counting_optimal(1000000, rates[i], 4, &cblocks, &ck), BK_OK);
        double bits = 512.0 * (double)blocks / 1e6, cbits = 512.0 * (double)cblocks / 1e6;
        print_message("varcount p=%g: k=%u C=%u %.2f bits/key; 4-bit counting %.2f (%.2fx)\n",
                      rates[i], k, c, bits, cbits, bits / cbits);
        assert_true(bits <= 0.6 * cbits);
        assert_true(c + k * 0 < 511 && k >= 1);
    }
}

/* Model-based (tu_deleting_model): counts never below the truth but in a
 * frozen block, which answers 1 for a present key; no present key missed. */
static int count_ok(int64_t c, uint32_t truth)
{
    return c >= (int64_t)truth || (c == 1 && truth > 0);
}

static void run_model(uint64_t capacity, double p, uint64_t universe, uint64_t ops,
                      uint64_t seed)
{
    tu_deleting_model(make(capacity, p, seed), capacity, universe, ops, seed, count_ok);
}

static void test_model(void **state)
{
    (void)state;
    run_model(5000, 0.01, 10000, 200000, 11);
    run_model(5000, 0.001, 10000, 200000, 12);
    /* overfilled 10x: blocks freeze, nothing is missed */
    run_model(300, 0.01, 6000, 100000, 13);
}

/* A key added many times: its count is exact in a lone block; counts rise
 * past 15 (no fixed width), and removes bring them back. */
static void test_counts(void **state)
{
    (void)state;
    bk_filter *f = make(1000, 0.01, 3);
    assert_int_equal(bk_filter_remove(f, "never", 5), BK_ENOTFOUND);
    assert_int_equal(bk_filter_add(f, "x", 1), 1);
    for (int i = 0; i < 39; i++) assert_int_equal(bk_filter_add(f, "x", 1), 0);
    assert_int_equal(bk_filter_count(f, "x", 1), 40);
    for (int i = 0; i < 39; i++) assert_int_equal(bk_filter_remove(f, "x", 1), BK_OK);
    assert_int_equal(bk_filter_count(f, "x", 1), 1);
    assert_int_equal(bk_filter_remove(f, "x", 1), BK_OK);
    assert_int_equal(bk_filter_contains(f, "x", 1), 0);
    assert_int_equal(bk_filter_remove(f, "x", 1), BK_ENOTFOUND);
    bk_filter_free(f);
}

/* Overflow: one key added until its block cannot hold it freezes the
 * block; the key stays present, a remove answers OK but clears nothing,
 * the count is 1. */
static void test_freeze(void **state)
{
    (void)state;
    bk_varcount *v;
    bk_delete_stats st;
    assert_int_equal(bk_varcount_create(&v, 1000, 0.01, 5), BK_OK);
    bk_filter *f = bk_varcount_as_filter(v);
    uint32_t c = bk_varcount_counters(v), k = bk_varcount_hashes(v);
    uint32_t fits = (511 - c) / k; /* copies the empty block can take */
    for (uint32_t i = 0; i < fits; i++) bk_filter_add(f, "hot", 3);
    assert_int_equal(bk_filter_count(f, "hot", 3), fits);
    assert_int_equal(bk_varcount_get_stats(v, &st), BK_OK);
    assert_int_equal(st.overflows, 0);
    assert_int_equal(bk_filter_add(f, "hot", 3), 0);
    assert_int_equal(bk_varcount_get_stats(v, &st), BK_OK);
    assert_int_equal(st.overflows, 1);
    assert_int_equal(bk_filter_count(f, "hot", 3), 1);
    assert_int_equal(bk_filter_remove(f, "hot", 3), BK_OK);
    assert_int_equal(bk_filter_contains(f, "hot", 3), 1);
    bk_filter_free(f);
}

/* Measured rates, full and after churn (tu_fpr_churn). */
static void stats(const bk_filter *f, bk_delete_stats *st)
{
    assert_int_equal(bk_varcount_get_stats(bk_filter_as_varcount((bk_filter *)f), st), BK_OK);
}

static void test_fpr(void **state)
{
    (void)state;
    tu_fpr_churn(make(TU_CHURN_KEYS, 0.01, 21), "varcount", 0.01, stats);
    tu_fpr_churn(make(TU_CHURN_KEYS, 0.001, 21), "varcount", 0.001, stats);
}

/* What a batch reports and clear (tu_batch_items_clear), and the
 * allocations of a create. Batches as single adds, clones, files, and
 * allocation failures of clones and loads: tests/test_conformance.c. */
static void test_batch_items_clear(void **state)
{
    (void)state;
    tu_batch_items_clear(make(TU_BCF_KEYS, 0.01, 17));
}

static int attempt_create(void *ctx)
{
    (void)ctx;
    bk_varcount *f;
    int rc = bk_varcount_create(&f, 1000, 0.01, 1);
    bk_varcount_free(f);
    return rc;
}

static void test_out_of_memory(void **state)
{
    (void)state;
    assert_int_equal(tu_oom_loop(attempt_create, NULL), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_parameters),
        cmocka_unit_test(test_sizing),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_freeze),
        cmocka_unit_test(test_fpr),
        cmocka_unit_test(test_batch_items_clear),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
