/*
 * test_cuckoo.c - the cuckoo filter: parameters, bit packing, duplicates
 * (the 2b limit), fullness with nothing lost, load reached before the first
 * failure, a model-based random sequence against an exact multiset,
 * measured false-positive rates and allocation failures; stages (growth,
 * lookups and deletes across stages, the same tables as a chain of
 * separate filters, serialisation, damaged several-stage images).
 *
 * Tolerances: measured rates over Q absent keys must lie within 5 binomial
 * standard deviations sqrt(p (1 - p) / Q) of bk_cuckoo_fpr at the load
 * reached (fixed seeds: a run always passes or always fails).
 */
#include "testutil.h"

TU_COUNT_FOUND(count_found, bk_cuckoo, bk_cuckoo_contains)

/*==========================================================================
 * Parameters and sizing
 *==========================================================================*/

static void test_invalid_parameters(void **state)
{
    (void)state;
    bk_cuckoo *f = (bk_cuckoo *)&f;
    bk_cuckoo_options o = {3, 0, 0};
    assert_int_equal(bk_cuckoo_create(NULL, 10, 0.01, NULL, 1), BK_EINVAL);
    assert_int_equal(bk_cuckoo_create(&f, 0, 0.01, NULL, 1), BK_ECAPACITY);
    assert_null(f);
    assert_int_equal(bk_cuckoo_create(&f, 10, 0.0, NULL, 1), BK_EFPR);
    assert_int_equal(bk_cuckoo_create(&f, 10, NAN, NULL, 1), BK_EFPR);
    assert_int_equal(bk_cuckoo_create(&f, 10, 1e-12, NULL, 1), BK_EFPR);
    assert_int_equal(bk_cuckoo_create(&f, 10, 0.01, &o, 1), BK_EPARAM);
    o.bucket_size = 4, o.fingerprint_bits = 3;
    assert_int_equal(bk_cuckoo_create(&f, 10, 0.01, &o, 1), BK_EPARAM);
    o.fingerprint_bits = 33;
    assert_int_equal(bk_cuckoo_create(&f, 10, 0.01, &o, 1), BK_EPARAM);
    o.fingerprint_bits = 0, o.max_kicks = BK_CUCKOO_MAX_KICKS + 1;
    assert_int_equal(bk_cuckoo_create(&f, 10, 0.01, &o, 1), BK_EPARAM);
    assert_int_equal(bk_cuckoo_create(&f, UINT64_MAX, 0.01, NULL, 1), BK_ESIZE);
    assert_int_equal(bk_cuckoo_create_params(&f, 0, 4, 8, 0, 1), BK_ESIZE);
    assert_int_equal(bk_cuckoo_create_params(&f, 12, 4, 8, 0, 1), BK_ESIZE);
    assert_int_equal(
        bk_cuckoo_create_params(&f, BK_CUCKOO_MAX_BUCKETS * 2, 4, 8, 0, 1),
        BK_ESIZE);
    assert_int_equal(bk_cuckoo_create_params(&f, 16, 0, 8, 0, 1), BK_EPARAM);
    assert_int_equal(bk_cuckoo_create_params(&f, 16, 16, 8, 0, 1), BK_EPARAM);
    assert_int_equal(bk_cuckoo_create_params(&f, 16, 4, 0, 0, 1), BK_EPARAM);
    assert_null(f);
    assert_true(isnan(bk_cuckoo_fpr(1, 0, 4, 8)));
    assert_true(isnan(bk_cuckoo_fpr(1, 4, 5, 8)));
    bk_cuckoo_free(NULL);
    assert_int_equal(bk_cuckoo_clone(&f, NULL), BK_EINVAL);
    assert_int_equal(bk_cuckoo_get_stats(NULL, NULL), BK_EINVAL);
}

static void test_sizing(void **state)
{
    (void)state;
    uint64_t buckets;
    uint32_t fp;
    /* 1%: 12-bit fingerprints; 0.1%: 12 bits is not enough at 95% load */
    assert_int_equal(bk_cuckoo_optimal(3800, 0.01, 4, 0, &buckets, &fp), BK_OK);
    assert_int_equal(buckets, 1024);
    assert_int_equal(fp, 12);
    assert_int_equal(bk_cuckoo_optimal(3800, 0.001, 4, 0, &buckets, &fp), BK_OK);
    assert_int_equal(fp, 16);
    assert_int_equal(bk_cuckoo_optimal(3800, 0.05, 4, 0, &buckets, &fp), BK_OK);
    assert_int_equal(fp, 8);
    assert_int_equal(bk_cuckoo_optimal(3800, 0.001, 4, 13, &buckets, &fp), BK_OK);
    assert_int_equal(fp, 13);
    assert_int_equal(bk_cuckoo_optimal(3800, 1e-6, 4, 0, &buckets, &fp), BK_OK);
    assert_true(fp > 16 && bk_cuckoo_fpr(3800, buckets, 4, fp) <= 1e-6);
    /* half-empty after rounding up to a power of two: load decides f */
    assert_int_equal(bk_cuckoo_optimal(4000, 0.001, 4, 0, &buckets, &fp), BK_OK);
    assert_int_equal(buckets, 2048);
    assert_int_equal(fp, 12);
    assert_int_equal(bk_cuckoo_optimal(1000, 0.01, 2, 0, &buckets, &fp), BK_OK);
    assert_true((double)1000 / (buckets * 2) <= 0.84);
    assert_int_equal(bk_cuckoo_optimal(1000, 0.01, 5, 0, NULL, NULL), BK_EPARAM);
}

/* 12-bit fingerprints cost 12 bits: the table is buckets * b * f / 8 bytes. */
static void test_packing(void **state)
{
    (void)state;
    const uint32_t widths[] = {8, 12, 16, 13, 4, 32};
    const uint32_t sizes[] = {2, 4, 8};
    for (size_t w = 0; w < 6; w++) {
        for (size_t s = 0; s < 3; s++) {
            bk_cuckoo *f, *g;
            char key[TU_KEY_LEN];
            uint64_t buckets = 256;
            assert_int_equal(bk_cuckoo_create_params(&f, buckets, sizes[s],
                                                     widths[w], 0, 5),
                             BK_OK);
            assert_int_equal(bk_cuckoo_create_params(&g, buckets * 2, sizes[s],
                                                     widths[w], 0, 5),
                             BK_OK);
            /* doubling the buckets adds exactly their packed size (b 2,
             * f 8: two fingerprints of 1..254 in a 15-bit pair code) */
            uint64_t bucket_bits = sizes[s] == 2 && widths[w] == 8 ? 15 : sizes[s] * widths[w];
            assert_int_equal(bk_cuckoo_bytes(g) - bk_cuckoo_bytes(f),
                             buckets * bucket_bits / 8);
            /* fill to 80%, every key readable through its neighbours */
            uint64_t n = buckets * sizes[s] * 8 / 10;
            if (sizes[s] == 2) n = buckets * sizes[s] * 7 / 10;
            for (uint64_t i = 0; i < n; i++) {
                tu_key(key, i, 1);
                assert_int_equal(bk_cuckoo_add(f, key, sizeof(key)), BK_OK);
            }
            for (uint64_t i = 0; i < n; i++) {
                tu_key(key, i, 1);
                assert_int_equal(bk_cuckoo_contains(f, key, sizeof(key)), 1);
            }
            for (uint64_t i = 0; i < n; i += 2) {
                tu_key(key, i, 1);
                assert_int_equal(bk_cuckoo_remove(f, key, sizeof(key)), BK_OK);
            }
            for (uint64_t i = 1; i < n; i += 2) {
                tu_key(key, i, 1);
                assert_int_equal(bk_cuckoo_contains(f, key, sizeof(key)), 1);
            }
            assert_int_equal(bk_cuckoo_items(f), n / 2);
            bk_cuckoo_free(f);
            bk_cuckoo_free(g);
        }
    }
}

/*==========================================================================
 * Single keys, duplicates
 *==========================================================================*/

static void test_basic(void **state)
{
    (void)state;
    bk_cuckoo *f;
    assert_int_equal(bk_cuckoo_create(&f, 1000, 0.01, NULL, 3), BK_OK);
    assert_int_equal(bk_cuckoo_bucket_size(f), 4);
    assert_int_equal(bk_cuckoo_max_kicks(f), 500);
    assert_int_equal(bk_cuckoo_fingerprint_bits(f), 12);
    assert_int_equal(bk_cuckoo_seed(f), 3);
    assert_int_equal(bk_cuckoo_contains(f, "a", 1), 0);
    assert_int_equal(bk_cuckoo_remove(f, "a", 1), BK_ENOTFOUND);
    assert_int_equal(bk_cuckoo_add(f, "a", 1), BK_OK);
    assert_int_equal(bk_cuckoo_add(f, "a", 1), BK_OK);
    assert_int_equal(bk_cuckoo_count(f, "a", 1), 2);
    assert_int_equal(bk_cuckoo_add_unique(f, "a", 1), 0);
    assert_int_equal(bk_cuckoo_add_unique(f, "", 0), 1);
    assert_int_equal(bk_cuckoo_contains(f, "", 0), 1);
    assert_int_equal(bk_cuckoo_items(f), 3);
    assert_int_equal(bk_cuckoo_remove(f, "a", 1), BK_OK);
    assert_int_equal(bk_cuckoo_contains(f, "a", 1), 1);
    assert_int_equal(bk_cuckoo_remove(f, "a", 1), BK_OK);
    assert_int_equal(bk_cuckoo_contains(f, "a", 1), 0);
    /* the _hash variants are the same operations */
    TU_HASH_VARIANTS(cuckoo, f, "b", 1, BK_OK, bk_cuckoo_add_unique_hash);
    bk_cuckoo_free(f);
}

/* A key fits 2b times; the next add is BK_ECOPIES and changes nothing. */
static void test_copies(void **state)
{
    (void)state;
    const uint32_t sizes[] = {2, 4, 8};
    for (size_t s = 0; s < 3; s++) {
        bk_cuckoo *f;
        uint32_t b = sizes[s];
        assert_int_equal(bk_cuckoo_create_params(&f, 1024, b, 12, 0, 1), BK_OK);
        /* find a key whose two buckets differ (almost every key) */
        char key[TU_KEY_LEN];
        tu_key(key, 0, 3);
        for (uint32_t i = 0; i < 2 * b; i++)
            assert_int_equal(bk_cuckoo_add(f, key, sizeof(key)), BK_OK);
        assert_int_equal(bk_cuckoo_count(f, key, sizeof(key)), 2 * b);
        bk_cuckoo_stats before, after;
        assert_int_equal(bk_cuckoo_get_stats(f, &before), BK_OK);
        assert_int_equal(bk_cuckoo_add(f, key, sizeof(key)), BK_ECOPIES);
        assert_int_equal(bk_cuckoo_get_stats(f, &after), BK_OK);
        assert_memory_equal(&before, &after, sizeof(before));
        assert_int_equal(bk_cuckoo_count(f, key, sizeof(key)), 2 * b);
        for (uint32_t i = 0; i < 2 * b; i++)
            assert_int_equal(bk_cuckoo_remove(f, key, sizeof(key)), BK_OK);
        assert_int_equal(bk_cuckoo_remove(f, key, sizeof(key)), BK_ENOTFOUND);
        bk_cuckoo_free(f);
    }
}

/*==========================================================================
 * Fullness: load reached, nothing lost
 *==========================================================================*/

/* Fill until the first BK_EFULL; return the load reached and check that
 * every key added before is still found and the failed add changed
 * nothing. */
static double fill_until_full(uint64_t buckets, uint32_t b, uint32_t fp_bits,
                              uint64_t seed)
{
    bk_cuckoo *f;
    char key[TU_KEY_LEN];
    assert_int_equal(bk_cuckoo_create_params(&f, buckets, b, fp_bits, 0, seed),
                     BK_OK);
    uint64_t added = 0;
    int rc = BK_OK;
    for (uint64_t i = 0; rc == BK_OK; i++) {
        tu_key(key, i, seed);
        rc = bk_cuckoo_add(f, key, sizeof(key));
        if (rc == BK_OK) added++;
    }
    assert_int_equal(rc, BK_EFULL);
    assert_int_equal(bk_cuckoo_items(f), added);
    /* the failed add was undone: the rejected key is found only as a
     * false positive would be, and every stored key is still there */
    for (uint64_t i = 0; i < added; i++) {
        tu_key(key, i, seed);
        assert_int_equal(bk_cuckoo_contains(f, key, sizeof(key)), 1);
    }
    /* further adds keep failing or succeeding, never losing anything */
    for (uint64_t i = added + 1; i < added + 50; i++) {
        tu_key(key, i, seed);
        rc = bk_cuckoo_add(f, key, sizeof(key));
        assert_true(rc == BK_OK || rc == BK_EFULL);
    }
    uint64_t total = bk_cuckoo_items(f);
    for (uint64_t i = 0; i < added; i++) {
        tu_key(key, i, seed);
        assert_int_equal(bk_cuckoo_contains(f, key, sizeof(key)), 1);
    }
    assert_true(total >= added);
    double load = (double)added / (double)(buckets * b);
    bk_cuckoo_free(f);
    return load;
}

static void test_load_before_full(void **state)
{
    (void)state;
    double min4 = 1.0, min2 = 1.0, min8 = 1.0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        double l4 = fill_until_full(UINT64_C(1) << 15, 4, 12, seed);
        double l2 = fill_until_full(UINT64_C(1) << 15, 2, 12, seed);
        double l8 = fill_until_full(UINT64_C(1) << 14, 8, 16, seed);
        min4 = fmin(min4, l4), min2 = fmin(min2, l2), min8 = fmin(min8, l8);
    }
    print_message("first failure at load: b=2 %.4f, b=4 %.4f, b=8 %.4f\n",
                  min2, min4, min8);
    assert_true(min4 >= 0.95);
    assert_true(min2 >= 0.84);
    assert_true(min8 >= 0.97);
}

/* A filter that fills its buckets from only a few keys' worth of room:
 * tiny tables, with 1 and 2 buckets (i1 == i2 for every key). */
static void test_tiny_tables(void **state)
{
    (void)state;
    for (uint64_t buckets = 1; buckets <= 2; buckets++) {
        bk_cuckoo *f;
        char key[TU_KEY_LEN];
        assert_int_equal(bk_cuckoo_create_params(&f, buckets, 4, 16, 10, 1),
                         BK_OK);
        uint64_t added = 0;
        for (uint64_t i = 0; i < 20; i++) {
            tu_key(key, i, 1);
            int rc = bk_cuckoo_add(f, key, sizeof(key));
            assert_true(rc == BK_OK || rc == BK_EFULL);
            if (rc == BK_OK) added++;
        }
        assert_true(added <= buckets * 4);
        assert_int_equal(bk_cuckoo_items(f), added);
        bk_cuckoo_free(f);
    }
}

/*==========================================================================
 * Model-based: random add / remove / lookup against an exact multiset
 *==========================================================================*/

/* tu_deleting_model near 90% load: adds refused as full or as too many
 * copies change nothing, the items are the model's copies after every add,
 * counts are never below the truth, no present key is missed. */
static void run_model(uint32_t b, uint32_t fp_bits, uint64_t buckets,
                      uint64_t universe, uint64_t ops, uint64_t seed)
{
    bk_cuckoo *f;
    const tu_model_rule rule = {.name = "cuckoo", .count_cap = UINT32_MAX, .refusals = 2,
                                .items_exact = 1, .removes_div = 4};
    assert_int_equal(bk_cuckoo_create_params(&f, buckets, b, fp_bits, 0, seed), BK_OK);
    print_message("cuckoo model b=%u f=%u\n", b, fp_bits);
    tu_deleting_model(bk_cuckoo_as_filter(f), buckets * b * 9 / 10, universe, ops, seed, &rule);
}

static void test_model(void **state)
{
    (void)state;
    run_model(4, 12, 1024, 8000, 200000, 31);  /* repeats, near full */
    run_model(2, 8, 512, 600, 100000, 32);     /* many copies, 8 bits */
    run_model(8, 16, 128, 20000, 100000, 33);
    run_model(4, 4, 64, 300, 100000, 34);      /* 4-bit: collisions galore */
}

/*==========================================================================
 * Measured false-positive rates
 *==========================================================================*/

static void measure_fpr(double target, uint32_t fp_bits_given)
{
    const uint64_t n = 120000, queries = 1000000;
    char key[TU_KEY_LEN];
    bk_cuckoo *f;
    bk_cuckoo_stats st;
    bk_cuckoo_options o = {4, fp_bits_given, 0};
    assert_int_equal(bk_cuckoo_create(&f, n, target, &o, 41), BK_OK);
    for (uint64_t i = 0; i < n; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_cuckoo_add(f, key, sizeof(key)), BK_OK);
    }
    uint64_t hits = count_found(f, 0, queries, 2);
    assert_int_equal(bk_cuckoo_get_stats(f, &st), BK_OK);
    double measured = (double)hits / (double)queries;
    print_message("cuckoo p=%g f=%u: load %.3f, %.2f bits/key, measured "
                  "%.5f, formula %.5f\n",
                  target, st.fingerprint_bits, st.load_factor,
                  st.bits_per_item, measured, st.fpr_now);
    if (fp_bits_given == 0) assert_true(st.fpr_now <= target);
    assert_true(fabs(measured - st.fpr_now) <=
                tu_tolerance(st.fpr_now, queries, 5.0));
    bk_cuckoo_free(f);
}

static void test_fpr(void **state)
{
    (void)state;
    measure_fpr(0.01, 0);    /* 12-bit fingerprints */
    measure_fpr(0.001, 0);   /* 16-bit */
    measure_fpr(0.001, 13);  /* 13-bit, given */
    measure_fpr(0.01, 8);    /* 8-bit, given: above target */
}

/*==========================================================================
 * Batches, clone, clear, statistics
 *==========================================================================*/

static void test_batch_clone_stats(void **state)
{
    (void)state;
    enum { N = 3000 };
    int rcs[2 * N];
    tu_keyset ks;
    tu_keyset_make_split(&ks, 2 * N, N);
    const void **keys = ks.keys;
    const size_t *lens = ks.lens;
    bk_cuckoo *f, *copy;
    assert_int_equal(bk_cuckoo_create(&f, N, 0.001, NULL, 17), BK_OK);
    assert_int_equal(bk_cuckoo_add_batch(NULL, keys, lens, 1, NULL), BK_EINVAL);
    assert_int_equal(bk_cuckoo_add_batch(f, NULL, lens, 1, NULL), BK_EINVAL);
    assert_int_equal(bk_cuckoo_contains_batch(f, keys, NULL, 1, NULL), BK_EINVAL);
    assert_int_equal(bk_cuckoo_add_batch(f, keys, lens, N, rcs), N);
    for (size_t i = 0; i < N; i++) assert_int_equal(rcs[i], BK_OK);
    /* (batches as single calls and a clone's answers, through the generic
     * handle that calls these functions: tests/test_conformance.c) */

    assert_int_equal(bk_cuckoo_clone(&copy, f), BK_OK);
    bk_cuckoo_stats a, b;
    assert_int_equal(bk_cuckoo_get_stats(f, &a), BK_OK);
    assert_int_equal(bk_cuckoo_get_stats(copy, &b), BK_OK);
    assert_memory_equal(&a, &b, sizeof(a));
    assert_int_equal(a.items, N);
    assert_int_equal(a.slots, a.buckets * 4);
    assert_float_equal(a.load_factor, (double)N / a.slots, 1e-12);
    assert_float_equal(a.bits_per_item, (double)a.slots * a.fingerprint_bits / N,
                       1e-9);
    assert_int_equal(a.bytes, bk_cuckoo_bytes(f));
    bk_cuckoo_clear(copy);
    assert_int_equal(bk_cuckoo_items(copy), 0);
    assert_int_equal(bk_cuckoo_contains_batch(copy, keys, lens, 2 * N, NULL), 0);
    assert_int_equal(bk_cuckoo_contains(f, keys[0], lens[0]), 1);
    bk_cuckoo_free(copy);
    bk_cuckoo_free(f);
    tu_keyset_free(&ks);
}

/*==========================================================================
 * Allocation failures
 *==========================================================================*/

TU_OOM_ATTEMPT(attempt_create, bk_cuckoo, bk_cuckoo_create(&f, 1000, 0.01, NULL, 1),
               bk_cuckoo_free)
TU_OOM_ATTEMPT(attempt_create_params, bk_cuckoo, bk_cuckoo_create_params(&f, 64, 2, 12, 20, 1),
               bk_cuckoo_free)
TU_OOM_CLONE_ATTEMPT(attempt_clone, bk_cuckoo, bk_cuckoo_clone, bk_cuckoo_contains,
                     bk_cuckoo_free)

/* Bucket size 2 with 8-bit fingerprints (RedisBloom's CF shape) is stored
 * as 15-bit pair codes: RedisBloom's CF.RESERVE k 1000 (512 buckets) in at
 * most its 1080 bytes; kicks that fail restore the table exactly although
 * a write may reorder a bucket; the rate matches the formula with 254
 * fingerprint values; the image round-trips. */
static void test_paired_buckets(void **state)
{
    (void)state;
    bk_cuckoo *f, *g;
    char key[TU_KEY_LEN];
    assert_int_equal(bk_cuckoo_create_params(&f, 512, 2, 8, 20, 3), BK_OK);
    print_message("512 buckets of 2 x 8 bits: %zu bytes\n", bk_cuckoo_bytes(f));
    assert_true(bk_cuckoo_bytes(f) <= 1080);
    assert_true(bk_cuckoo_bytes(f) >= 512 * 15 / 8);
    uint64_t n = 0;
    for (;; n++) {
        tu_key(key, n, 1);
        int rc = bk_cuckoo_add(f, key, sizeof(key));
        if (rc == BK_EFULL) break;
        assert_int_equal(rc, BK_OK);
    }
    double load = (double)n / 1024.0;
    print_message("paired: first failure at load %.3f (20 kicks)\n", load);
    assert_true(load > 0.6);
    assert_true(bk_cuckoo_items(f) == n);
    for (uint64_t i = 0; i < n; i++) { /* the failed add lost nothing */
        tu_key(key, i, 1);
        assert_int_equal(bk_cuckoo_contains(f, key, sizeof(key)), 1);
    }
    /* the rate at this load: 1 - (1 - 1/254)^(4 load) */
    const uint64_t queries = 400000;
    uint64_t found = 0;
    for (uint64_t i = 0; i < queries; i++) {
        tu_key(key, i, 2);
        found += (uint64_t)bk_cuckoo_contains(f, key, sizeof(key));
    }
    double want = bk_cuckoo_fpr(n, 512, 2, 8);
    double measured = (double)found / (double)queries;
    print_message("paired: measured %.5f, formula %.5f\n", measured, want);
    assert_true(fabs(measured - want) < tu_tolerance(want, queries, 5.0));
    assert_true(fabs(want - -expm1(4.0 * load * log1p(-1.0 / 254))) < 1e-12);
    /* the image keeps the pairing and the answers */
    bk_filter *img = tu_reload(bk_cuckoo_as_filter(f));
    g = bk_filter_as_cuckoo(img);
    assert_non_null(g);
    for (uint64_t i = 0; i < 5000; i++) {
        tu_key(key, i, i & 1 ? 1 : 2);
        assert_int_equal(bk_cuckoo_contains(g, key, sizeof(key)),
                         bk_cuckoo_contains(f, key, sizeof(key)));
    }
    /* removals from either slot of a pair */
    for (uint64_t i = 0; i < n; i += 2) {
        tu_key(key, i, 1);
        assert_int_equal(bk_cuckoo_remove(g, key, sizeof(key)), BK_OK);
    }
    for (uint64_t i = 1; i < n; i += 2) {
        tu_key(key, i, 1);
        assert_int_equal(bk_cuckoo_contains(g, key, sizeof(key)), 1);
    }
    bk_filter_free(img);
    bk_cuckoo_free(f);
}

static void test_out_of_memory(void **state)
{
    (void)state;
    /* two allocations: the handle, and the table with its padding */
    bk_cuckoo *src;
    assert_int_equal(bk_cuckoo_create(&src, 100, 0.01, NULL, 1), BK_OK);
    assert_int_equal(bk_cuckoo_add(src, "x", 1), BK_OK);
    tu_oom_create_clone(attempt_create, attempt_create_params, 2, attempt_clone, src, 2);
    bk_cuckoo_free(src);
}

/*==========================================================================
 * Stages
 *==========================================================================*/

#define ST_KEYS 1200

/* Grow as the CF commands do: add to the newest stage; on BK_EFULL or
 * BK_ECOPIES add a stage of twice the newest one's buckets. stage_of[i]
 * records where key i went. */
static bk_cuckoo *grown_filter_f(uint32_t b, uint32_t fbits, uint64_t first_buckets,
                                  uint32_t *stage_of)
{
    bk_cuckoo *f;
    char key[TU_KEY_LEN];
    assert_int_equal(bk_cuckoo_create_params(&f, first_buckets, b, fbits, 20, 7), BK_OK);
    for (uint64_t i = 0; i < ST_KEYS; i++) {
        tu_key(key, i, 1);
        int rc;
        while ((rc = bk_cuckoo_add(f, key, sizeof(key))) != BK_OK) {
            assert_true(rc == BK_EFULL || rc == BK_ECOPIES);
            uint32_t n = bk_cuckoo_stages(f);
            assert_int_equal(bk_cuckoo_add_stage(f, 2 * bk_cuckoo_stage_buckets(f, n - 1)),
                             BK_OK);
        }
        if (stage_of) stage_of[i] = bk_cuckoo_stages(f) - 1;
    }
    return f;
}

static bk_cuckoo *grown_filter(uint32_t b, uint64_t first_buckets, uint32_t *stage_of)
{
    return grown_filter_f(b, 8, first_buckets, stage_of);
}

/* The same adds into a chain of separate filters (the CF value before
 * stages), joined with bk_cuckoo_append. */
static bk_cuckoo *chain_filter(uint32_t b, uint64_t first_buckets)
{
    bk_cuckoo *chain[BK_CUCKOO_MAX_STAGES];
    uint32_t n = 1;
    char key[TU_KEY_LEN];
    assert_int_equal(bk_cuckoo_create_params(&chain[0], first_buckets, b, 8, 20, 7), BK_OK);
    for (uint64_t i = 0; i < ST_KEYS; i++) {
        tu_key(key, i, 1);
        while (bk_cuckoo_add(chain[n - 1], key, sizeof(key)) != BK_OK) {
            assert_int_equal(bk_cuckoo_create_params(&chain[n], 2 * bk_cuckoo_buckets(chain[n - 1]),
                                                     b, 8, 20, 7),
                             BK_OK);
            n++;
        }
    }
    for (uint32_t i = 1; i < n; i++) {
        assert_int_equal(bk_cuckoo_append(chain[0], chain[i]), BK_OK);
        bk_cuckoo_free(chain[i]);
    }
    return chain[0];
}

static unsigned char *image_of(bk_cuckoo *f, size_t *len)
{
    return tu_serialize(bk_cuckoo_as_filter(f), len);
}

/* bytes = the stated overhead + the packed tables + 8 per older stage */
static void check_bytes(const bk_cuckoo *f)
{
    uint64_t tables = 0;
    uint32_t bits = bk_cuckoo_bucket_size(f) == 2 && bk_cuckoo_fingerprint_bits(f) == 8
                        ? 15 : bk_cuckoo_bucket_size(f) * bk_cuckoo_fingerprint_bits(f);
    for (uint32_t j = 0; j < bk_cuckoo_stages(f); j++)
        tables += (bk_cuckoo_stage_buckets(f, j) * bits + 7) / 8;
    assert_int_equal(bk_cuckoo_bytes(f),
                     BK_CUCKOO_OVERHEAD_BYTES + tables +
                         BK_CUCKOO_STAGE_BYTES * (bk_cuckoo_stages(f) - 1));
}

static void assert_same_filter(bk_cuckoo *a, bk_cuckoo *b)
{
    tu_same_image(bk_cuckoo_as_filter(a), bk_cuckoo_as_filter(b));
}

static void test_stages(void **state)
{
    (void)state;
    static uint32_t stage_of[ST_KEYS];
    char key[TU_KEY_LEN];
    bk_cuckoo *f = grown_filter(2, 16, stage_of);
    uint32_t n = bk_cuckoo_stages(f);
    assert_true(n >= 4); /* 1200 keys from 16 buckets of 2, doubling */
    uint64_t buckets = 0, items = 0;
    for (uint32_t j = 0; j < n; j++) {
        assert_int_equal(bk_cuckoo_stage_buckets(f, j), UINT64_C(16) << j);
        buckets += bk_cuckoo_stage_buckets(f, j);
        items += bk_cuckoo_stage_items(f, j);
    }
    assert_int_equal(bk_cuckoo_stage_buckets(f, n), 0);
    assert_int_equal(bk_cuckoo_buckets(f), buckets);
    assert_int_equal(items, ST_KEYS);
    assert_int_equal(bk_cuckoo_items(f), ST_KEYS);
    check_bytes(f);
    bk_cuckoo_stats st;
    assert_int_equal(bk_cuckoo_get_stats(f, &st), BK_OK);
    assert_int_equal(st.stages, n);
    assert_int_equal(st.buckets, buckets);
    assert_true(st.fpr_now > bk_cuckoo_fpr(bk_cuckoo_stage_items(f, n - 1),
                                           bk_cuckoo_stage_buckets(f, n - 1), 2, 8));

    /* no false negatives across stages; the unique add sees older stages */
    for (uint64_t i = 0; i < ST_KEYS; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_cuckoo_contains(f, key, sizeof(key)), 1);
        assert_true(bk_cuckoo_count(f, key, sizeof(key)) >= 1);
        assert_int_equal(bk_cuckoo_add_unique(f, key, sizeof(key)), 0);
    }
    /* a second copy of a stage-0 key goes to the newest stage; a remove
     * takes the newest copy first, then the stage-0 one */
    tu_key(key, 0, 1);
    assert_int_equal(stage_of[0], 0);
    uint64_t s0 = bk_cuckoo_stage_items(f, 0), last = bk_cuckoo_stage_items(f, n - 1);
    uint32_t copies = bk_cuckoo_count(f, key, sizeof(key));
    assert_int_equal(bk_cuckoo_add(f, key, sizeof(key)), BK_OK);
    assert_int_equal(bk_cuckoo_count(f, key, sizeof(key)), copies + 1);
    assert_int_equal(bk_cuckoo_stage_items(f, n - 1), last + 1);
    assert_int_equal(bk_cuckoo_remove(f, key, sizeof(key)), BK_OK);
    assert_int_equal(bk_cuckoo_stage_items(f, n - 1), last);
    assert_int_equal(bk_cuckoo_stage_items(f, 0), s0);

    /* deletes in older stages: every key of stage 0 and 1 goes; the rest
     * stay. With 8-bit fingerprints a remove may take a newer stage's
     * matching fingerprint instead (the documented hazard), so this part
     * uses 32-bit ones: a false match then has a chance of about 2^-29
     * per key and stage. */
    bk_cuckoo_free(f);
    f = grown_filter_f(4, 32, 8, stage_of);
    n = bk_cuckoo_stages(f);
    assert_true(n >= 4);
    uint64_t removed = 0;
    for (uint64_t i = 0; i < ST_KEYS; i++) {
        if (stage_of[i] > 1) continue;
        tu_key(key, i, 1);
        assert_int_equal(bk_cuckoo_remove(f, key, sizeof(key)), BK_OK);
        removed++;
    }
    assert_int_equal(bk_cuckoo_items(f), ST_KEYS - removed);
    assert_int_equal(bk_cuckoo_stage_items(f, 0) + bk_cuckoo_stage_items(f, 1), 0);
    for (uint64_t i = 0; i < ST_KEYS; i++) {
        if (stage_of[i] <= 1) continue;
        tu_key(key, i, 1);
        assert_int_equal(bk_cuckoo_contains(f, key, sizeof(key)), 1);
    }
    /* a batch lookup answers as single ones */
    const void *keys[64];
    size_t lens[64];
    uint8_t res[64];
    static char kb[64][TU_KEY_LEN];
    for (int i = 0; i < 64; i++) {
        tu_key(kb[i], (uint64_t)i * 19, 1);
        keys[i] = kb[i];
        lens[i] = TU_KEY_LEN;
    }
    int64_t hits = bk_cuckoo_contains_batch(f, keys, lens, 64, res);
    int64_t want = 0;
    for (int i = 0; i < 64; i++) {
        assert_int_equal(res[i], bk_cuckoo_contains(f, kb[i], TU_KEY_LEN));
        want += res[i];
    }
    assert_int_equal(hits, want);

    /* clear keeps the stages, empties them */
    bk_cuckoo *c;
    assert_int_equal(bk_cuckoo_clone(&c, f), BK_OK);
    assert_same_filter(c, f);
    bk_cuckoo_clear(c);
    assert_int_equal(bk_cuckoo_stages(c), n);
    assert_int_equal(bk_cuckoo_items(c), 0);
    for (uint32_t j = 0; j < n; j++) assert_int_equal(bk_cuckoo_stage_items(c, j), 0);
    tu_key(key, ST_KEYS - 1, 1);
    assert_int_equal(bk_cuckoo_contains(c, key, sizeof(key)), 0);
    bk_cuckoo_free(c);
    bk_cuckoo_free(f);
}

/* A grown filter holds exactly the tables of the chain of separate
 * filters the same adds made before stages existed. */
static void test_stages_match_chain(void **state)
{
    (void)state;
    for (uint32_t b = 2; b <= 4; b += 2) {
        bk_cuckoo *g = grown_filter(b, 8, NULL);
        bk_cuckoo *c = chain_filter(b, 8);
        assert_int_equal(bk_cuckoo_stages(g), bk_cuckoo_stages(c));
        assert_same_filter(g, c);
        bk_cuckoo_free(g);
        bk_cuckoo_free(c);
    }
    /* what append refuses */
    bk_cuckoo *a, *d;
    assert_int_equal(bk_cuckoo_create_params(&a, 8, 2, 8, 20, 7), BK_OK);
    assert_int_equal(bk_cuckoo_create_params(&d, 8, 4, 8, 20, 7), BK_OK);
    assert_int_equal(bk_cuckoo_append(a, d), BK_EINVAL);
    assert_int_equal(bk_cuckoo_append(a, a), BK_EINVAL);
    bk_cuckoo_free(d);
    assert_int_equal(bk_cuckoo_create_params(&d, 8, 2, 8, 20, 8), BK_OK); /* seed */
    assert_int_equal(bk_cuckoo_append(a, d), BK_EINVAL);
    bk_cuckoo_free(d);
    assert_int_equal(bk_cuckoo_add_stage(a, 3), BK_ESIZE);
    assert_int_equal(bk_cuckoo_add_stage(a, 0), BK_ESIZE);
    for (uint32_t j = 1; j < BK_CUCKOO_MAX_STAGES; j++)
        assert_int_equal(bk_cuckoo_add_stage(a, 1), BK_OK);
    assert_int_equal(bk_cuckoo_add_stage(a, 1), BK_ESIZE);
    assert_int_equal(bk_cuckoo_stages(a), BK_CUCKOO_MAX_STAGES);
    check_bytes(a);
    bk_cuckoo_free(a);
}

/* Several stages are one image of one part per stage; it loads back to the
 * same filter (same bytes, same answers, growing the same way after). */
static void test_stages_format(void **state)
{
    (void)state;
    char key[TU_KEY_LEN];
    bk_cuckoo *f = grown_filter(2, 16, NULL);
    size_t len;
    unsigned char *buf = image_of(f, &len);
    bk_filter *g;
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_OK);
    bk_cuckoo *gc = bk_filter_as_cuckoo(g);
    assert_non_null(gc);
    assert_int_equal(bk_cuckoo_stages(gc), bk_cuckoo_stages(f));
    assert_int_equal(bk_cuckoo_bytes(gc), bk_cuckoo_bytes(f));
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(g, &info), BK_OK);
    assert_int_equal(info.parts, bk_cuckoo_stages(f));
    assert_int_equal(info.bytes, bk_cuckoo_bytes(f));
    assert_same_filter(gc, f);
    for (uint64_t i = 0; i < 3000; i++) {
        tu_key(key, i, i < ST_KEYS ? 1 : 2);
        assert_int_equal(bk_filter_contains(g, key, sizeof(key)),
                         bk_cuckoo_contains(f, key, sizeof(key)));
    }
    /* both go on the same way: more keys, one more stage */
    for (uint64_t i = 0; i < 200; i++) {
        tu_key(key, i, 3);
        int a = bk_cuckoo_add(f, key, sizeof(key)), b = bk_cuckoo_add(gc, key, sizeof(key));
        assert_int_equal(a, b);
    }
    uint64_t next = 2 * bk_cuckoo_stage_buckets(f, bk_cuckoo_stages(f) - 1);
    assert_int_equal(bk_cuckoo_add_stage(f, next), BK_OK);
    assert_int_equal(bk_cuckoo_add_stage(gc, next), BK_OK);
    assert_same_filter(gc, f);
    bk_filter_free(g);

    /* damaged several-part images are refused (the payload checksum is
     * resealed so that the cuckoo checks themselves are reached: fuzz
     * seeds cover the rest) */
    assert_int_equal(bk_filter_deserialize(&g, buf, len - 1), BK_ETRUNC);
    /* one stage of the same filter loads and borrows nothing after growth */
    bk_cuckoo *one;
    assert_int_equal(bk_cuckoo_create_params(&one, 16, 2, 8, 20, 7), BK_OK);
    tu_key(key, 1, 1);
    assert_int_equal(bk_cuckoo_add(one, key, sizeof(key)), BK_OK);
    free(buf);
    buf = image_of(one, &len);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_OK);
    gc = bk_filter_as_cuckoo(g);
    assert_int_equal(bk_cuckoo_add_stage(gc, 32), BK_OK);
    assert_int_equal(bk_cuckoo_add_stage(one, 32), BK_OK);
    assert_int_equal(bk_cuckoo_contains(gc, key, sizeof(key)), 1);
    assert_same_filter(gc, one);
    check_bytes(gc);
    bk_filter_free(g);
    bk_cuckoo_free(one);
    free(buf);
    bk_cuckoo_free(f);
}

static int attempt_add_stage(void *ctx)
{
    bk_cuckoo *f;
    int rc = bk_cuckoo_clone(&f, ctx);
    if (rc != BK_OK) return rc;
    rc = bk_cuckoo_add_stage(f, 64);
    if (rc == BK_OK) {
        assert_int_equal(bk_cuckoo_stages(f), bk_cuckoo_stages(ctx) + 1);
        assert_int_equal(bk_cuckoo_contains(f, "x", 1), 1);
    } else {
        assert_int_equal(bk_cuckoo_stages(f), bk_cuckoo_stages(ctx)); /* unchanged */
        assert_int_equal(bk_cuckoo_contains(f, "x", 1), 1);
    }
    bk_cuckoo_free(f);
    return rc;
}

static int attempt_append(void *ctx)
{
    bk_cuckoo *f;
    int rc = bk_cuckoo_create_params(&f, 8, 2, 8, 20, 7);
    if (rc != BK_OK) return rc;
    rc = bk_cuckoo_append(f, ctx);
    assert_int_equal(bk_cuckoo_stages(f), rc == BK_OK ? 1 + bk_cuckoo_stages(ctx) : 1);
    bk_cuckoo_free(f);
    return rc;
}

static void test_stages_out_of_memory(void **state)
{
    (void)state;
    bk_cuckoo *src = grown_filter(2, 16, NULL);
    assert_int_equal(bk_cuckoo_add(src, "x", 1), BK_OK);
    assert_int_equal(tu_oom_loop(attempt_add_stage, src), 3);
    assert_int_equal(tu_oom_loop(attempt_append, src), 3);
    tu_oom_clone_and_load(bk_cuckoo_as_filter(src));
    bk_cuckoo_free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_parameters),
        cmocka_unit_test(test_sizing),
        cmocka_unit_test(test_packing),
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_load_before_full),
        cmocka_unit_test(test_tiny_tables),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_fpr),
        cmocka_unit_test(test_batch_clone_stats),
        cmocka_unit_test(test_paired_buckets),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_stages),
        cmocka_unit_test(test_stages_match_chain),
        cmocka_unit_test(test_stages_format),
        cmocka_unit_test(test_stages_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
