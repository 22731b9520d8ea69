/*
 * test_deletable.c - the deletable Bloom filter: parameters, removal and
 * its refusals, the removable fraction, a model-based random sequence
 * against an exact multiset, measured false-positive rates and allocation
 * failures.
 *
 * Tolerances: a measured rate over Q absent keys must lie within 5 binomial
 * standard deviations sqrt(p (1 - p) / Q) of the expected p (fixed seeds).
 */
#include "testutil.h"

TU_ADD_RANGE(add_range, bk_deletable, bk_deletable_add)
TU_COUNT_FOUND(count_found, bk_deletable, bk_deletable_contains)

static void test_invalid_parameters(void **state)
{
    (void)state;
    TU_CREATE_ARG_CHECKS(bk_deletable, bk_deletable_create, 0, 1);
    bk_deletable *f = (bk_deletable *)&f;
    assert_int_equal(bk_deletable_create(&f, 10, 0.01, 1000000, 1), BK_EPARAM);
    assert_int_equal(bk_deletable_create_params(&f, 0, 3, 0, 1), BK_ESIZE);
    assert_int_equal(bk_deletable_create_params(&f, BK_MAX_BITS + 1, 3, 0, 1),
                     BK_ESIZE);
    assert_int_equal(bk_deletable_create_params(&f, 100, 0, 0, 1), BK_EHASHES);
    assert_int_equal(bk_deletable_create_params(&f, 100, 65, 0, 1), BK_EHASHES);
    assert_int_equal(bk_deletable_create_params(&f, 100, 3, 101, 1), BK_EPARAM);
    assert_null(f);
    bk_deletable_free(NULL);
    assert_int_equal(bk_deletable_clone(&f, NULL), BK_EINVAL);
    assert_int_equal(bk_deletable_get_stats(NULL, NULL), BK_EINVAL);
    /* regions: default m/4, effective count when m is not a multiple */
    assert_int_equal(bk_deletable_create_params(&f, 1000, 3, 0, 1), BK_OK);
    assert_int_equal(bk_deletable_regions(f), 250);
    bk_deletable_free(f);
    assert_int_equal(bk_deletable_create_params(&f, 1000, 3, 300, 1), BK_OK);
    assert_int_equal(bk_deletable_regions(f), 250); /* 4 bits each */
    bk_deletable_free(f);
    assert_int_equal(bk_deletable_create_params(&f, 1000, 3, 1000, 1), BK_OK);
    assert_int_equal(bk_deletable_regions(f), 1000);
    bk_deletable_free(f);
}

static void test_basic(void **state)
{
    (void)state;
    bk_deletable *f;
    assert_int_equal(bk_deletable_create(&f, 1000, 0.01, 0, 5), BK_OK);
    assert_int_equal(bk_deletable_hashes(f), 7);
    assert_int_equal(bk_deletable_remove(f, "a", 1), BK_ENOTFOUND);
    assert_int_equal(bk_deletable_add(f, "a", 1), 1);
    assert_int_equal(bk_deletable_contains(f, "a", 1), 1);
    assert_int_equal(bk_deletable_removable(f, "a", 1), 1);
    assert_int_equal(bk_deletable_remove(f, "a", 1), BK_OK);
    assert_int_equal(bk_deletable_contains(f, "a", 1), 0);
    assert_int_equal(bk_deletable_items(f), 0);
    /* a key added twice flags all its regions: it can no longer go */
    assert_int_equal(bk_deletable_add(f, "b", 1), 1);
    assert_int_equal(bk_deletable_add(f, "b", 1), 0);
    assert_int_equal(bk_deletable_removable(f, "b", 1), 0);
    bk_deletable_stats before, after;
    assert_int_equal(bk_deletable_get_stats(f, &before), BK_OK);
    assert_int_equal(bk_deletable_remove(f, "b", 1), BK_EUNDELETABLE);
    assert_int_equal(bk_deletable_get_stats(f, &after), BK_OK);
    assert_memory_equal(&before, &after, sizeof(before));
    assert_int_equal(bk_deletable_contains(f, "b", 1), 1);
    bk_hash h = bk_hash_key("c", 1, bk_deletable_seed(f));
    assert_int_equal(bk_deletable_add_hash(f, h), 1);
    assert_int_equal(bk_deletable_contains_hash(f, h), 1);
    assert_int_equal(bk_deletable_removable_hash(f, h), 1);
    assert_int_equal(bk_deletable_remove_hash(f, h), BK_OK);
    assert_int_equal(bk_deletable_contains_hash(f, h), 0);
    bk_deletable_clear(f);
    assert_int_equal(bk_deletable_contains(f, "b", 1), 0);
    bk_deletable_free(f);
}

/* Fill to capacity: the stats' removable fraction matches the fraction of
 * keys bk_deletable_removable accepts, and removing them all leaves every
 * unremovable key present and only those. */
static void test_removable_fraction(void **state)
{
    (void)state;
    const uint64_t n = 20000;
    const uint64_t region_sizes[] = {4, 8, 16};
    char key[TU_KEY_LEN];
    for (size_t r = 0; r < 3; r++) {
        bk_deletable *f;
        uint64_t m;
        uint32_t k;
        assert_int_equal(bk_bloom_optimal(n, 0.01, &m, &k), BK_OK);
        assert_int_equal(bk_deletable_create(&f, n, 0.01, m / region_sizes[r],
                                             9),
                         BK_OK);
        for (uint64_t i = 0; i < n; i++) {
            tu_key(key, i, 1);
            bk_deletable_add(f, key, sizeof(key));
        }
        bk_deletable_stats st;
        assert_int_equal(bk_deletable_get_stats(f, &st), BK_OK);
        uint64_t removable = 0;
        for (uint64_t i = 0; i < n; i++) {
            tu_key(key, i, 1);
            removable += (uint64_t)bk_deletable_removable(f, key, sizeof(key));
        }
        double measured = (double)removable / n;
        print_message("dlbf s=%llu: removable measured %.4f, estimated %.4f, "
                      "collided %llu/%llu occupied\n",
                      (unsigned long long)region_sizes[r], measured,
                      st.removable_fraction,
                      (unsigned long long)st.collided_regions,
                      (unsigned long long)st.occupied_regions);
        /* the estimate assumes a key's k regions independent; allow 5 sd of
         * a binomial of n keys plus 2 points of model error (the estimate
         * matched simulations with independent probes to 0.5 points) */
        assert_true(fabs(measured - st.removable_fraction) <=
                    tu_tolerance(measured, n, 5.0) + 0.02);
        /* a remove clears only bits of collision-free regions (each set by
         * one key) and raises no flag, so removing some keys changes no
         * other key's removability: exactly `removable` removes succeed */
        uint64_t removed = 0;
        for (uint64_t i = 0; i < n; i++) {
            tu_key(key, i, 1);
            int rc = bk_deletable_remove(f, key, sizeof(key));
            assert_true(rc == BK_OK || rc == BK_EUNDELETABLE);
            if (rc == BK_OK) {
                removed++;
                assert_int_equal(bk_deletable_contains(f, key, sizeof(key)), 0);
            }
        }
        assert_int_equal(removed, removable);
        for (uint64_t i = 0; i < n; i++) { /* the refused ones stay */
            tu_key(key, i, 1);
            if (bk_deletable_remove(f, key, sizeof(key)) != BK_ENOTFOUND)
                assert_int_equal(bk_deletable_contains(f, key, sizeof(key)), 1);
        }
        assert_int_equal(bk_deletable_items(f) <= n - removed, 1);
        bk_deletable_free(f);
    }
}

/*==========================================================================
 * Model-based: random add / remove / lookup against an exact multiset
 *==========================================================================*/

/* tu_deleting_model: a remove either clears a key present once or is
 * refused (BK_EUNDELETABLE, never ENOTFOUND), and flags accumulate, so few
 * removes succeed: over 1%. No present key is missed. */
static void run_model(uint64_t capacity, double fpr, uint64_t regions,
                      uint64_t universe, uint64_t ops, uint64_t seed)
{
    bk_deletable *f;
    const tu_model_rule rule = {.name = "dlbf", .add_is_new = 1, .undeletable = 1,
                                .removes_div = 100};
    assert_int_equal(bk_deletable_create(&f, capacity, fpr, regions, seed), BK_OK);
    tu_deleting_model(bk_deletable_as_filter(f), capacity, universe, ops, seed, &rule);
}

static void test_model(void **state)
{
    (void)state;
    run_model(5000, 0.01, 0, 20000, 200000, 51);
    uint64_t m;
    assert_int_equal(bk_bloom_optimal(2000, 0.001, &m, NULL), BK_OK);
    run_model(2000, 0.001, m / 2, 8000, 100000, 52); /* 2-bit regions */
}

/*==========================================================================
 * Measured false-positive rates: the classic filter's
 *==========================================================================*/

static void measure_fpr(double target)
{
    const uint64_t n = 100000, queries = 1000000;
    bk_deletable *f;
    bk_deletable_stats st;
    assert_int_equal(bk_deletable_create(&f, n, target, 0, 61), BK_OK);
    add_range(f, 0, n, 1);
    uint64_t hits = count_found(f, 0, queries, 2);
    assert_int_equal(bk_deletable_get_stats(f, &st), BK_OK);
    double measured = (double)hits / queries;
    print_message("dlbf p=%g: measured %.5f, formula %.5f, removable %.3f, "
                  "%.2f bits/key with flags\n",
                  target, measured, st.fpr_at_capacity, st.removable_fraction,
                  8.0 * (double)st.bytes / n);
    assert_true(fabs(measured - st.fpr_at_capacity) <=
                tu_tolerance(st.fpr_at_capacity, queries, 5.0));
    assert_true(st.fpr_at_capacity <= target * 1.05); /* k is rounded */
    bk_deletable_free(f);
}

static void test_fpr(void **state)
{
    (void)state;
    measure_fpr(0.01);
    measure_fpr(0.001);
}

/* The family's batch calls refuse missing arrays and count the new keys as
 * items; a clone has the same statistics, and removals in it leave the
 * original whole. */
static void test_batch_clone(void **state)
{
    (void)state;
    enum { N = 2000 };
    uint8_t results[2 * N];
    tu_keyset ks;
    tu_keyset_make_split(&ks, 2 * N, N);
    const void **keys = ks.keys;
    const size_t *lens = ks.lens;
    bk_deletable *f, *copy;
    assert_int_equal(bk_deletable_create(&f, N, 0.001, 0, 3), BK_OK);
    assert_int_equal(bk_deletable_add_batch(f, NULL, lens, 1, NULL), BK_EINVAL);
    assert_int_equal(bk_deletable_contains_batch(NULL, keys, lens, 1, NULL),
                     BK_EINVAL);
    int64_t added = bk_deletable_add_batch(f, keys, lens, N, results);
    assert_int_equal((uint64_t)added, bk_deletable_items(f));
    /* (batches as single calls, through the generic handle that calls these
     * functions: tests/test_conformance.c) */
    assert_int_equal(bk_deletable_clone(&copy, f), BK_OK);
    bk_deletable_stats a, b;
    assert_int_equal(bk_deletable_get_stats(f, &a), BK_OK);
    assert_int_equal(bk_deletable_get_stats(copy, &b), BK_OK);
    assert_memory_equal(&a, &b, sizeof(a));
    assert_int_equal(a.bits, bk_deletable_bits(f));
    assert_true(a.collided_regions <= a.occupied_regions);
    assert_true(a.occupied_regions <= a.regions);
    /* removals in the copy do not touch the original */
    for (size_t i = 0; i < N; i++) bk_deletable_remove(copy, keys[i], lens[i]);
    for (size_t i = 0; i < N; i++)
        assert_int_equal(bk_deletable_contains(f, keys[i], lens[i]), 1);
    bk_deletable_free(copy);
    bk_deletable_free(f);
    tu_keyset_free(&ks);
}

TU_OOM_ATTEMPT(attempt_create, bk_deletable, bk_deletable_create(&f, 1000, 0.01, 0, 1),
               bk_deletable_free)
TU_OOM_ATTEMPT(attempt_create_params, bk_deletable,
               bk_deletable_create_params(&f, 1000, 4, 100, 1), bk_deletable_free)
TU_OOM_CLONE_ATTEMPT(attempt_clone, bk_deletable, bk_deletable_clone, bk_deletable_contains,
                     bk_deletable_free)

static void test_out_of_memory(void **state)
{
    (void)state;
    bk_deletable *src;
    assert_int_equal(bk_deletable_create(&src, 100, 0.01, 0, 1), BK_OK);
    bk_deletable_add(src, "x", 1);
    tu_oom_create_clone(attempt_create, attempt_create_params, 2, attempt_clone, src, 2);
    bk_deletable_free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_parameters),
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_removable_fraction),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_fpr),
        cmocka_unit_test(test_batch_clone),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
