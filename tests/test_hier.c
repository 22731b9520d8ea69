/*
 * test_hier.c - the hierarchical counting filter (bit layer + counter
 * layer): parameters, counts and removes against an exact multiset,
 * measured false-positive rates (full and after churn), stuck counters,
 * what a batch reports, clear, and the allocations of a create. Batches
 * against single adds, clones, files and allocation failures on the
 * generic handle are tests/test_conformance.c's.
 */
#include "testutil.h"

static bk_filter *make(uint64_t n, double p, uint64_t seed)
{
    bk_hier *v;
    assert_int_equal(bk_hier_create(&v, n, p, seed), BK_OK);
    return bk_hier_as_filter(v);
}

static void test_invalid_parameters(void **state)
{
    (void)state;
    bk_hier *f = (bk_hier *)1;
    assert_int_equal(bk_hier_create(NULL, 10, 0.01, 1), BK_EINVAL);
    assert_int_equal(bk_hier_create(&f, 0, 0.01, 1), BK_ECAPACITY);
    assert_null(f);
    assert_int_equal(bk_hier_create(&f, 10, 0.0, 1), BK_EFPR);
    assert_int_equal(bk_hier_create(&f, 10, NAN, 1), BK_EFPR);
    assert_int_equal(bk_hier_create(&f, UINT64_MAX, 0.01, 1), BK_ESIZE);
    assert_int_equal(bk_hier_get_stats(NULL, NULL), BK_EINVAL);
    bk_hier_free(NULL);
    assert_null(bk_filter_as_hier(NULL));
}

/* The bit layer is a blocked Bloom filter: its bits are those of
 * bk_blocked's sizing within 10%; the whole costs 5x that. */
static void test_sizing(void **state)
{
    (void)state;
    const double rates[] = {0.01, 0.001};
    for (int i = 0; i < 2; i++) {
        uint64_t blocks;
        uint32_t k;
        bk_blocked *b;
        assert_int_equal(bk_hier_optimal(1000000, rates[i], &blocks, &k), BK_OK);
        assert_int_equal(bk_blocked_create(&b, 1000000, rates[i], 1), BK_OK);
        double bits = 512.0 * (double)blocks, bbits = (double)bk_blocked_bits(b);
        print_message("hier p=%g: k=%u, bit layer %.2f bits/key (blocked %.2f), total %.2f\n",
                      rates[i], k, bits / 1e6, bbits / 1e6, 5 * bits / 1e6);
        assert_true(bits <= 1.1 * bbits && bits >= 0.9 * bbits);
        bk_blocked_free(b);
    }
}

/* Model-based (tu_deleting_model): counts never below the truth up to 15, where a counter sticks; no present key
 * missed. */
static int count_ok(int64_t c, uint32_t truth)
{
    return c >= (int64_t)(truth < 15 ? truth : 15);
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
    /* overfilled 10x: counters stick, nothing is missed */
    run_model(300, 0.01, 6000, 100000, 13);
}

/* The bit layer is a blocked filter: the same keys give the same bits,
 * so the same answers for 100000 absent keys; removing every key leaves
 * no bit set. */
static void test_layer_is_blocked(void **state)
{
    (void)state;
    char key[TU_KEY_LEN];
    bk_hier *h;
    bk_blocked *b;
    assert_int_equal(bk_hier_create(&h, 5000, 0.01, 77), BK_OK);
    assert_int_equal(bk_blocked_create(&b, 5000, 0.01, 77), BK_OK);
    bk_filter *f = bk_hier_as_filter(h);
    for (uint64_t i = 0; i < 5000; i++) {
        tu_key(key, i, 1);
        bk_filter_add(f, key, sizeof(key));
        bk_blocked_add(b, key, sizeof(key));
    }
    for (uint64_t i = 0; i < 100000; i++) {
        tu_key(key, i, 2);
        assert_int_equal(bk_filter_contains(f, key, sizeof(key)),
                         bk_blocked_contains(b, key, sizeof(key)));
    }
    for (uint64_t i = 0; i < 5000; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_filter_remove(f, key, sizeof(key)), BK_OK);
    }
    bk_delete_stats st;
    assert_int_equal(bk_hier_get_stats(h, &st), BK_OK);
    assert_true(st.fpr_now == 0.0);
    bk_blocked_free(b);
    bk_filter_free(f);
}

/* Counts up to 14 are exact for a lone key, 15 sticks: removes leave the
 * key present for ever, and the event is counted. */
static void test_counts(void **state)
{
    (void)state;
    bk_hier *h;
    bk_delete_stats st;
    assert_int_equal(bk_hier_create(&h, 1000, 0.01, 3), BK_OK);
    bk_filter *f = bk_hier_as_filter(h);
    assert_int_equal(bk_filter_remove(f, "never", 5), BK_ENOTFOUND);
    assert_int_equal(bk_filter_add(f, "x", 1), 1);
    for (int i = 0; i < 6; i++) assert_int_equal(bk_filter_add(f, "x", 1), 0);
    assert_int_equal(bk_filter_count(f, "x", 1), 7);
    for (int i = 0; i < 6; i++) assert_int_equal(bk_filter_remove(f, "x", 1), BK_OK);
    assert_int_equal(bk_filter_count(f, "x", 1), 1);
    assert_int_equal(bk_filter_remove(f, "x", 1), BK_OK);
    assert_int_equal(bk_filter_contains(f, "x", 1), 0);
    assert_int_equal(bk_filter_remove(f, "x", 1), BK_ENOTFOUND);
    for (int i = 0; i < 20; i++) bk_filter_add(f, "y", 1);
    assert_int_equal(bk_hier_get_stats(h, &st), BK_OK);
    assert_true(st.overflows >= 1);
    for (int i = 0; i < 30; i++) assert_int_equal(bk_filter_remove(f, "y", 1), BK_OK);
    assert_int_equal(bk_filter_contains(f, "y", 1), 1);
    bk_filter_free(f);
}

/* Measured rates, full and after churn (tu_fpr_churn). */
static void stats(const bk_filter *f, bk_delete_stats *st)
{
    assert_int_equal(bk_hier_get_stats(bk_filter_as_hier((bk_filter *)f), st), BK_OK);
}

static void test_fpr(void **state)
{
    (void)state;
    tu_fpr_churn(make(TU_CHURN_KEYS, 0.01, 21), "hier", 0.01, stats);
    tu_fpr_churn(make(TU_CHURN_KEYS, 0.001, 21), "hier", 0.001, stats);
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
    bk_hier *f;
    int rc = bk_hier_create(&f, 1000, 0.01, 1);
    bk_hier_free(f);
    return rc;
}

static void test_out_of_memory(void **state)
{
    (void)state;
    assert_int_equal(tu_oom_loop(attempt_create, NULL), 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_parameters),
        cmocka_unit_test(test_sizing),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_layer_is_blocked),
        cmocka_unit_test(test_fpr),
        cmocka_unit_test(test_batch_items_clear),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
