/*
 * test_hybrid.c - the hybrid filter (bit layer, cells migrating to
 * counter slots past 1): parameters, counts and removes against an exact
 * multiset, measured false-positive rates (full and after churn), stuck
 * counts and frozen blocks, batches, clone/clear, the file format and
 * allocation failures.
 */
#include "testutil.h"

static bk_filter *make(uint64_t n, double p, uint64_t seed)
{
    bk_hybrid *v;
    assert_int_equal(bk_hybrid_create(&v, n, p, seed), BK_OK);
    return bk_hybrid_as_filter(v);
}

static void test_invalid_parameters(void **state)
{
    (void)state;
    bk_hybrid *f = (bk_hybrid *)1;
    assert_int_equal(bk_hybrid_create(NULL, 10, 0.01, 1), BK_EINVAL);
    assert_int_equal(bk_hybrid_create(&f, 0, 0.01, 1), BK_ECAPACITY);
    assert_null(f);
    assert_int_equal(bk_hybrid_create(&f, 10, 0.0, 1), BK_EFPR);
    assert_int_equal(bk_hybrid_create(&f, 10, NAN, 1), BK_EFPR);
    assert_int_equal(bk_hybrid_create(&f, UINT64_MAX, 0.01, 1), BK_ESIZE);
    assert_int_equal(bk_hybrid_get_stats(NULL, NULL), BK_EINVAL);
    bk_hybrid_free(NULL);
    assert_null(bk_filter_as_hybrid(NULL));
}

/* Sizing: the memory beside the 4-bit counting filter's. */
static void test_sizing(void **state)
{
    (void)state;
    const double rates[] = {0.01, 0.001};
    for (int i = 0; i < 2; i++) {
        uint64_t blocks, cblocks;
        uint32_t k, lines, ck;
        assert_int_equal(bk_hybrid_optimal(1000000, rates[i], &blocks, &k, &lines), BK_OK);
        assert_int_equal(bk_counting_optimal(1000000, rates[i], 4, &cblocks, &ck), BK_OK);
        double bits = 512.0 * (1 + lines) * (double)blocks / 1e6;
        double cbits = 512.0 * (double)cblocks / 1e6;
        print_message("hybrid p=%g: k=%u L=%u, %.2f bits/key; 4-bit counting %.2f (%.2fx)\n",
                      rates[i], k, lines, bits, cbits, bits / cbits);
        assert_true(bits < cbits);
    }
}

/* Model-based: counts never below the truth, no present key missed. */
static void run_model(uint64_t capacity, double p, uint64_t universe,
                      uint64_t ops, uint64_t seed)
{
    bk_filter *f = make(capacity, p, seed);
    tu_multiset model;
    char key[TU_KEY_LEN];
    uint64_t rng = seed, removes = 0;
    tu_multiset_init(&model, universe, ops + 1);
    for (uint64_t op = 0; op < ops; op++) {
        uint64_t r = tu_next(&rng) % 100;
        uint64_t add_share = model.size < capacity ? 50 : 30;
        if (r < add_share) {
            uint64_t id = tu_next(&rng) % universe;
            tu_key(key, id, 1);
            int rc = bk_filter_add(f, key, sizeof(key));
            assert_true(rc == 0 || rc == 1);
            if (model.count[id] > 0) assert_int_equal(rc, 0);
            tu_multiset_add(&model, id);
        } else if (r < 80 && model.size > 0) {
            uint64_t id = tu_multiset_take(&model, tu_next(&rng) % model.size);
            tu_key(key, id, 1);
            assert_int_equal(bk_filter_remove(f, key, sizeof(key)), BK_OK);
            removes++;
        } else {
            uint64_t id = tu_next(&rng) % universe;
            tu_key(key, id, 1);
            if (model.count[id] > 0)
                assert_int_equal(bk_filter_contains(f, key, sizeof(key)), 1);
            int64_t c = bk_filter_count(f, key, sizeof(key));
            /* a frozen block answers 1 for a present key */
            assert_true(c >= (int64_t)model.count[id] || (c == 1 && model.count[id] > 0));
        }
        if (op % 20000 == 0 || op == ops - 1) {
            for (size_t i = 0; i < model.size; i++) {
                tu_key(key, model.instances[i], 1);
                assert_int_equal(bk_filter_contains(f, key, sizeof(key)), 1);
            }
        }
    }
    assert_true(removes > ops / 4);
    tu_multiset_free(&model);
    bk_filter_free(f);
}

static void test_model(void **state)
{
    (void)state;
    run_model(5000, 0.01, 10000, 200000, 11);
    run_model(5000, 0.001, 10000, 200000, 12);
    /* overfilled 10x: blocks freeze, nothing is missed */
    run_model(300, 0.01, 6000, 100000, 13);
}

/* Counts are exact for a lone key (its cells migrate to slots); at 127
 * they stick; a block whose slots run out freezes. */
static void test_counts(void **state)
{
    (void)state;
    bk_hybrid *h;
    bk_delete_stats st;
    char key[TU_KEY_LEN];
    assert_int_equal(bk_hybrid_create(&h, 1000, 0.01, 3), BK_OK);
    bk_filter *f = bk_hybrid_as_filter(h);
    assert_int_equal(bk_filter_remove(f, "never", 5), BK_ENOTFOUND);
    assert_int_equal(bk_filter_add(f, "x", 1), 1);
    assert_int_equal(bk_filter_count(f, "x", 1), 1);
    for (int i = 0; i < 39; i++) assert_int_equal(bk_filter_add(f, "x", 1), 0);
    assert_int_equal(bk_filter_count(f, "x", 1), 40);
    for (int i = 0; i < 39; i++) assert_int_equal(bk_filter_remove(f, "x", 1), BK_OK);
    assert_int_equal(bk_filter_count(f, "x", 1), 1);
    assert_int_equal(bk_filter_remove(f, "x", 1), BK_OK);
    assert_int_equal(bk_filter_contains(f, "x", 1), 0);
    assert_int_equal(bk_filter_remove(f, "x", 1), BK_ENOTFOUND);
    for (int i = 0; i < 130; i++) bk_filter_add(f, "y", 1);
    assert_int_equal(bk_filter_count(f, "y", 1), 127);
    assert_int_equal(bk_hybrid_get_stats(h, &st), BK_OK);
    assert_true(st.overflows >= 1);
    for (int i = 0; i < 200; i++) assert_int_equal(bk_filter_remove(f, "y", 1), BK_OK);
    assert_int_equal(bk_filter_contains(f, "y", 1), 1);
    bk_filter_free(f);
    /* 2000 keys twice into a filter for 20: slots run out, blocks freeze */
    assert_int_equal(bk_hybrid_create(&h, 20, 0.01, 3), BK_OK);
    f = bk_hybrid_as_filter(h);
    for (int r = 0; r < 2; r++)
        for (uint64_t i = 0; i < 2000; i++) {
            tu_key(key, i, 1);
            bk_filter_add(f, key, sizeof(key));
        }
    assert_int_equal(bk_hybrid_get_stats(h, &st), BK_OK);
    assert_true(st.overflows >= 1);
    for (uint64_t i = 0; i < 2000; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_filter_remove(f, key, sizeof(key)), BK_OK);
        assert_int_equal(bk_filter_contains(f, key, sizeof(key)), 1);
    }
    bk_filter_free(f);
}

/*==========================================================================
 * Measured rates: full, then after churn (remove half, add as many new)
 *==========================================================================*/

static double measure(const bk_filter *f, uint64_t queries, uint64_t tag)
{
    char key[TU_KEY_LEN];
    uint64_t hits = 0;
    for (uint64_t i = 0; i < queries; i++) {
        tu_key(key, i, tag);
        hits += (uint64_t)bk_filter_contains(f, key, sizeof(key));
    }
    return (double)hits / (double)queries;
}

static void measure_fpr(double target)
{
    const uint64_t n = 200000, queries = 1000000;
    char key[TU_KEY_LEN];
    bk_hybrid *v;
    bk_delete_stats st;
    assert_int_equal(bk_hybrid_create(&v, n, target, 21), BK_OK);
    bk_filter *f = bk_hybrid_as_filter(v);
    for (uint64_t i = 0; i < n; i++) {
        tu_key(key, i, 1);
        assert_true(bk_filter_add(f, key, sizeof(key)) >= 0);
    }
    assert_int_equal(bk_hybrid_get_stats(v, &st), BK_OK);
    double measured = measure(f, queries, 2);
    print_message("hybrid p=%g: k=%u, %.2f bits/key, measured %.5f, "
                  "formula %.5f, from bits %.5f\n",
                  target, st.hashes, st.bits_per_key,
                  measured, st.fpr_at_capacity, st.fpr_now);
    assert_true(st.fpr_at_capacity <= target);
    assert_true(measured <= st.fpr_at_capacity + tu_tolerance(st.fpr_at_capacity, queries, 5.0));
    assert_true(fabs(measured - st.fpr_now) <= tu_tolerance(st.fpr_now, queries, 5.0));
    assert_int_equal(st.overflows, 0);

    for (uint64_t i = 0; i < n / 2; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_filter_remove(f, key, sizeof(key)), BK_OK);
    }
    for (uint64_t i = 0; i < n / 2; i++) {
        tu_key(key, i, 3);
        assert_true(bk_filter_add(f, key, sizeof(key)) >= 0);
    }
    for (uint64_t i = n / 2; i < n; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_filter_contains(f, key, sizeof(key)), 1);
    }
    for (uint64_t i = 0; i < n / 2; i++) {
        tu_key(key, i, 3);
        assert_int_equal(bk_filter_contains(f, key, sizeof(key)), 1);
    }
    assert_int_equal(bk_hybrid_get_stats(v, &st), BK_OK);
    assert_int_equal(st.overflows, 0);
    measured = measure(f, queries, 2);
    assert_true(fabs(measured - st.fpr_now) <= tu_tolerance(st.fpr_now, queries, 5.0));
    bk_filter_free(f);
}

static void test_fpr(void **state)
{
    (void)state;
    measure_fpr(0.01);
    measure_fpr(0.001);
}

/*==========================================================================
 * Batches, clone, clear, the file format
 *==========================================================================*/

static void test_batch_clone_format(void **state)
{
    (void)state;
    tu_batch_clone_format(make(TU_BCF_KEYS, 0.01, 17), BK_FAMILY_HYBRID);
}

/*==========================================================================
 * Allocation failures
 *==========================================================================*/

static int attempt_create(void *ctx)
{
    (void)ctx;
    bk_hybrid *f;
    int rc = bk_hybrid_create(&f, 1000, 0.01, 1);
    bk_hybrid_free(f);
    return rc;
}

static void test_out_of_memory(void **state)
{
    (void)state;
    assert_int_equal(tu_oom_loop(attempt_create, NULL), 2);
    bk_filter *src = make(100, 0.01, 1);
    bk_filter_add(src, "x", 1);
    tu_oom_clone_and_load(src);
    bk_filter_free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_parameters),
        cmocka_unit_test(test_sizing),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_fpr),
        cmocka_unit_test(test_batch_clone_format),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
