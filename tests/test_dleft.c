/*
 * test_dleft.c - the d-left counting Bloom filter: parameters, counts and
 * removes against an exact multiset, measured false-positive rates (full
 * and after churn), overflow, what a batch reports, clear, a remove from a
 * loaded filter and the allocations of a create. Batches against single
 * adds, clones, files and allocation failures on the generic handle are
 * tests/test_conformance.c's.
 */
#include "testutil.h"

static bk_filter *make(uint64_t n, double p, uint32_t w, uint64_t seed)
{
    bk_dleft *d;
    assert_int_equal(bk_dleft_create(&d, n, p, w, seed), BK_OK);
    return bk_dleft_as_filter(d);
}

static void test_invalid_parameters(void **state)
{
    (void)state;
    TU_CREATE_ARG_CHECKS(bk_dleft, bk_dleft_create, 0, 1);
    bk_dleft *f = (bk_dleft *)1;
    assert_int_equal(bk_dleft_create(&f, 10, 0.01, 9, 1), BK_EPARAM);
    /* a rate needing more than 32 - w remainder bits */
    assert_int_equal(bk_dleft_create(&f, 10, 1e-12, 8, 1), BK_EPARAM);
    assert_int_equal(bk_dleft_create(&f, UINT64_MAX, 0.01, 0, 1), BK_ESIZE);
    assert_int_equal(bk_dleft_get_stats(NULL, NULL), BK_EINVAL);
    bk_dleft_free(NULL);
    assert_null(bk_filter_as_dleft(NULL));
}

/* The sizing rule of the header: 75% load, r the fewest bits. */
static void test_sizing(void **state)
{
    (void)state;
    bk_dleft *f;
    bk_delete_stats st;
    assert_int_equal(bk_dleft_create(&f, 1000000, 0.01, 0, 1), BK_OK);
    assert_int_equal(bk_dleft_remainder_bits(f), 12);
    assert_int_equal(bk_dleft_buckets(f), 41667); /* ceil(1e6 / 24) */
    assert_int_equal(bk_dleft_get_stats(f, &st), BK_OK);
    assert_int_equal(st.table_bits, 41667ull * 4 * 8 * 14);
    assert_true(st.bits_per_key > 18.6 && st.bits_per_key < 18.8);
    assert_true(st.fpr_at_capacity <= 0.01 && st.fpr_at_capacity > 0.005);
    assert_int_equal(st.hashes, 4);
    bk_dleft_free(f);
    assert_int_equal(bk_dleft_create(&f, 1000000, 0.001, 0, 1), BK_OK);
    assert_int_equal(bk_dleft_remainder_bits(f), 15);
    bk_dleft_free(f);
}

/* Model-based (tu_deleting_model): counts are never below the truth (up
 * to saturation at 2^w - 1) and no present key is missed. */
static void run_model(uint64_t capacity, double p, uint32_t w, uint64_t universe,
                      uint64_t ops, uint64_t seed)
{
    /* with w = 2, adds refused as full (cells leaked by saturation) */
    const tu_model_rule rule = {.name = "dleft", .count_cap = (1u << w) - 1, .refusals = w == 2,
                                .add_is_new = 1, .removes_div = 4};
    tu_deleting_model(make(capacity, p, w, seed), capacity, universe, ops, seed, &rule);
}

/* With w = 2 a key present 4 times saturates its cell, which is then never
 * freed: this model (keys repeated up to ~8 times) leaks cells until adds
 * are refused, which the w = 2 run tolerates (and reports); with w = 4 no
 * add is refused. */
static void test_model(void **state)
{
    (void)state;
    run_model(5000, 0.01, 2, 10000, 200000, 11);
    run_model(5000, 0.001, 4, 10000, 200000, 12);
    run_model(20000, 0.01, 4, 100000, 200000, 13);
}

/* A never-added key that matches nothing is refused and changes nothing;
 * a saturated counter sticks. */
static void test_remove_absent_and_saturation(void **state)
{
    (void)state;
    bk_dleft *d;
    bk_delete_stats st;
    assert_int_equal(bk_dleft_create(&d, 1000, 0.001, 2, 3), BK_OK);
    bk_filter *f = bk_dleft_as_filter(d);
    assert_int_equal(bk_filter_remove(f, "never", 5), BK_ENOTFOUND);
    assert_int_equal(bk_filter_add(f, "x", 1), 1);
    for (int i = 0; i < 4; i++) assert_int_equal(bk_filter_add(f, "x", 1), 0);
    assert_int_equal(bk_filter_count(f, "x", 1), 3);
    assert_int_equal(bk_dleft_get_stats(d, &st), BK_OK);
    assert_int_equal(st.overflows, 2); /* adds 4 and 5 found it saturated */
    for (int i = 0; i < 10; i++) assert_int_equal(bk_filter_remove(f, "x", 1), BK_OK);
    assert_int_equal(bk_filter_count(f, "x", 1), 3);
    assert_int_equal(bk_filter_add(f, "y", 1), 1);
    assert_int_equal(bk_filter_remove(f, "y", 1), BK_OK);
    assert_int_equal(bk_filter_contains(f, "y", 1), 0);
    assert_int_equal(bk_filter_remove(f, "y", 1), BK_ENOTFOUND);
    bk_filter_free(f);
}

/* Every bucket full: BK_EFULL, nothing changed. A filter for 24 keys has 1
 * bucket per subtable, 32 cells. */
static void test_full(void **state)
{
    (void)state;
    bk_dleft *d;
    bk_delete_stats st;
    char key[TU_KEY_LEN];
    assert_int_equal(bk_dleft_create(&d, 24, 0.01, 2, 3), BK_OK);
    assert_int_equal(bk_dleft_buckets(d), 1);
    bk_filter *f = bk_dleft_as_filter(d);
    uint64_t stored = 0, refused = 0;
    for (uint64_t i = 0; i < 100; i++) {
        tu_key(key, i, 1);
        int rc = bk_filter_add(f, key, sizeof(key));
        if (rc == BK_EFULL) refused++;
        else stored += (uint64_t)rc;
    }
    assert_int_equal(stored, 32);
    assert_int_equal(bk_dleft_get_stats(d, &st), BK_OK);
    assert_int_equal(st.items, 32);
    assert_true(refused >= 60);
    assert_int_equal(st.overflows, refused);
    bk_filter_free(f);
}

/* Measured rates, full and after churn (tu_fpr_churn). */
static void stats(const bk_filter *f, bk_delete_stats *st)
{
    assert_int_equal(bk_dleft_get_stats(bk_filter_as_dleft((bk_filter *)f), st), BK_OK);
}

static void test_fpr(void **state)
{
    (void)state;
    tu_fpr_churn(make(TU_CHURN_KEYS, 0.01, 0, 21), "dleft", 0.01, stats);
    tu_fpr_churn(make(TU_CHURN_KEYS, 0.001, 0, 21), "dleft", 0.001, stats);
}

/* What a batch reports and clear (tu_batch_items_clear), a remove from a
 * loaded filter, and the allocations of a create. Batches as single adds,
 * clones, files, and allocation failures of clones and loads:
 * tests/test_conformance.c. */
static void test_batch_items_clear(void **state)
{
    (void)state;
    tu_batch_items_clear(make(TU_BCF_KEYS, 0.01, 0, 17));
}

/* A loaded filter keeps working: a key removed from it is gone. */
static void test_loaded_remove(void **state)
{
    (void)state;
    tu_keyset ks;
    tu_keyset_make(&ks, TU_BCF_KEYS, 0, 1);
    bk_filter *f = make(TU_BCF_KEYS, 0.01, 0, 17);
    assert_true(bk_filter_add_batch(f, ks.keys, ks.lens, ks.n, NULL) > 0);
    bk_filter *loaded = tu_reload(f);
    assert_int_equal(bk_filter_remove(loaded, ks.keys[0], ks.lens[0]), BK_OK);
    assert_int_equal(bk_filter_contains(loaded, ks.keys[0], ks.lens[0]), 0);
    bk_filter_free(loaded);
    bk_filter_free(f);
    tu_keyset_free(&ks);
}

TU_OOM_ATTEMPT(attempt_create, bk_dleft, bk_dleft_create(&f, 1000, 0.01, 0, 1), bk_dleft_free)

static int attempt_generic(void *ctx)
{
    (void)ctx;
    bk_filter_config cfg;
    bk_filter *f = NULL;
    bk_filter_config_init(&cfg);
    cfg.family = BK_FAMILY_DLEFT;
    cfg.capacity = 500;
    cfg.fpr = 0.001;
    int rc = bk_filter_create(&f, &cfg);
    bk_filter_free(f);
    return rc;
}

static void test_out_of_memory(void **state)
{
    (void)state;
    assert_int_equal(tu_oom_loop(attempt_create, NULL), 2);
    assert_int_equal(tu_oom_loop(attempt_generic, NULL), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_parameters),
        cmocka_unit_test(test_sizing),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_remove_absent_and_saturation),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_fpr),
        cmocka_unit_test(test_batch_items_clear),
        cmocka_unit_test(test_loaded_remove),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
