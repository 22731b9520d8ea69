/*
 * test_dleft.c - the d-left counting Bloom filter: parameters, counts and
 * removes against an exact multiset, measured false-positive rates (full
 * and after churn), overflow, batches, clone/clear, the file format and
 * allocation failures.
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
    bk_dleft *f = (bk_dleft *)1;
    assert_int_equal(bk_dleft_create(NULL, 10, 0.01, 0, 1), BK_EINVAL);
    assert_int_equal(bk_dleft_create(&f, 0, 0.01, 0, 1), BK_ECAPACITY);
    assert_null(f);
    assert_int_equal(bk_dleft_create(&f, 10, 0.0, 0, 1), BK_EFPR);
    assert_int_equal(bk_dleft_create(&f, 10, 1.0, 0, 1), BK_EFPR);
    assert_int_equal(bk_dleft_create(&f, 10, NAN, 0, 1), BK_EFPR);
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

/* Model-based: random adds, removes and lookups against a multiset. Counts
 * are never below the truth (up to saturation) and no present key is
 * missed. */
static void run_model(uint64_t capacity, double p, uint32_t w, uint64_t universe,
                      uint64_t ops, uint64_t seed)
{
    bk_filter *f = make(capacity, p, w, seed);
    tu_multiset model;
    char key[TU_KEY_LEN];
    uint64_t rng = seed, removes = 0, efull = 0;
    const uint32_t max = (1u << w) - 1;
    tu_multiset_init(&model, universe, ops + 1);
    for (uint64_t op = 0; op < ops; op++) {
        uint64_t r = tu_next(&rng) % 100;
        uint64_t add_share = model.size < capacity ? 50 : 30;
        if (r < add_share) {
            uint64_t id = tu_next(&rng) % universe;
            tu_key(key, id, 1);
            int rc = bk_filter_add(f, key, sizeof(key));
            if (rc == BK_EFULL && w == 2) { /* cells leaked by saturation */
                efull++;
                continue;
            }
            if (rc != 0 && rc != 1) fail_msg("add: %s at %zu", bk_errname(rc), model.size);
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
            uint32_t want = model.count[id] < max ? model.count[id] : max;
            if (model.count[id] > 0)
                assert_int_equal(bk_filter_contains(f, key, sizeof(key)), 1);
            assert_true(bk_filter_count(f, key, sizeof(key)) >= (int64_t)want);
        }
        if (op % 20000 == 0 || op == ops - 1) {
            for (size_t i = 0; i < model.size; i++) {
                tu_key(key, model.instances[i], 1);
                assert_int_equal(bk_filter_contains(f, key, sizeof(key)), 1);
            }
        }
    }
    assert_true(removes > ops / 4);
    print_message("dleft model w=%u: %lu adds refused (full)\n", w, (unsigned long)efull);
    tu_multiset_free(&model);
    bk_filter_free(f);
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
    bk_dleft *d;
    bk_delete_stats st;
    assert_int_equal(bk_dleft_create(&d, n, target, 0, 21), BK_OK);
    bk_filter *f = bk_dleft_as_filter(d);
    for (uint64_t i = 0; i < n; i++) {
        tu_key(key, i, 1);
        assert_true(bk_filter_add(f, key, sizeof(key)) >= 0);
    }
    assert_int_equal(bk_dleft_get_stats(d, &st), BK_OK);
    /* an add answers 0 when the new key matched a stored fingerprint */
    assert_true(st.items > n - n / 50);
    double measured = measure(f, queries, 2);
    double predicted = st.fpr_now;
    print_message("dleft p=%g: r=%u, %.2f bits/key, measured %.5f, formula %.5f\n",
                  target, bk_dleft_remainder_bits(d), st.bits_per_key, measured,
                  predicted);
    assert_true(st.fpr_at_capacity <= target);
    assert_true(fabs(measured - predicted) <= tu_tolerance(predicted, queries, 5.0));
    assert_int_equal(st.overflows, 0);

    /* churn: remove the first half, add as many new keys */
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
    assert_int_equal(bk_dleft_get_stats(d, &st), BK_OK);
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
    enum { N = 3000 };
    static char store[2 * N][TU_KEY_LEN];
    const void *keys[2 * N];
    size_t lens[2 * N];
    uint8_t results[2 * N];
    for (uint64_t i = 0; i < 2 * N; i++) {
        tu_key(store[i], i, i < N ? 1 : 2);
        keys[i] = store[i];
        lens[i] = TU_KEY_LEN;
    }
    bk_filter *f = make(N, 0.01, 0, 17), *copy, *loaded;
    int64_t added = bk_filter_add_batch(f, keys, lens, N, results);
    assert_true(added > N - 30 && added <= N);
    int64_t found = bk_filter_contains_batch(f, keys, lens, 2 * N, results);
    for (size_t i = 0; i < 2 * N; i++)
        assert_int_equal(results[i], bk_filter_contains(f, keys[i], lens[i]));
    assert_true(found >= N && found < N + 60);
    assert_int_equal(bk_filter_clone(&copy, f), BK_OK);
    uint64_t size = bk_filter_serialized_size(f);
    unsigned char *buf = malloc(size);
    assert_int_equal(bk_filter_serialize(f, buf, size), BK_OK);
    assert_int_equal(bk_filter_deserialize(&loaded, buf, size), BK_OK);
    assert_int_equal(bk_filter_family(loaded), BK_FAMILY_DLEFT);
    for (size_t i = 0; i < 2 * N; i++) {
        assert_int_equal(bk_filter_count(copy, keys[i], lens[i]),
                         bk_filter_count(f, keys[i], lens[i]));
        assert_int_equal(bk_filter_count(loaded, keys[i], lens[i]),
                         bk_filter_count(f, keys[i], lens[i]));
    }
    /* a loaded filter keeps working: remove, add */
    assert_int_equal(bk_filter_remove(loaded, keys[0], lens[0]), BK_OK);
    assert_int_equal(bk_filter_contains(loaded, keys[0], lens[0]), 0);
    /* damaged: a wrong remainder width is refused */
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(f, &info), BK_OK);
    assert_int_equal(info.items, (uint64_t)added);
    assert_int_equal(info.can_remove, 1);
    assert_int_equal(bk_filter_clear(copy), BK_OK);
    assert_int_equal(bk_filter_contains_batch(copy, keys, lens, 2 * N, NULL), 0);
    free(buf);
    bk_filter_free(loaded);
    bk_filter_free(copy);
    bk_filter_free(f);
}

/*==========================================================================
 * Allocation failures
 *==========================================================================*/

static int attempt_create(void *ctx)
{
    (void)ctx;
    bk_dleft *f;
    int rc = bk_dleft_create(&f, 1000, 0.01, 0, 1);
    bk_dleft_free(f);
    return rc;
}

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
    bk_filter *src = make(100, 0.01, 0, 1);
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
        cmocka_unit_test(test_remove_absent_and_saturation),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_fpr),
        cmocka_unit_test(test_batch_clone_format),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
