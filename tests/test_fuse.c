/*
 * test_fuse.c - the static filter (binary fuse, lib/fuse.c): no false
 * negatives, false-positive rate within binomial tolerance of 2^-w, bits
 * per key, duplicates, tiny sets, the retry path, the generic handle (its
 * refusals and batches: test_conformance.c), the file format (round trip, mapping, golden file, damaged
 * fields) and allocation failures.
 */
#include <fcntl.h>
#include <unistd.h>

#include "testutil.h"
#include "static_family.h"
#include "peel.h" /* the construction internals (tests see lib/) */

#define TAG_IN 1
#define TAG_OUT 2
#define GOLDEN BK_SOURCE_DIR "/tests/golden/static-v1.bkf"

typedef tu_keyset keyset;

TU_STATIC_MAKE(make, bk_static, bk_static_build, bk_static_as_filter)

/* The family's items (its statistics', which bk_static_items repeats) and
 * duplicates. */
static void counts(const bk_filter *g, uint64_t *items, uint64_t *duplicates)
{
    const bk_static *f = bk_filter_as_static((bk_filter *)g);
    bk_static_stats st;
    assert_int_equal(bk_static_get_stats(f, &st), BK_OK);
    assert_int_equal(bk_static_items(f), st.items);
    *items = st.items;
    *duplicates = st.duplicates;
}

static tu_static_ops ops = {make, counts};

/*--------------------------------------------------------------------------
 * Accuracy
 *--------------------------------------------------------------------------*/

/* tu_static_rate, and the statistics of the build. */
static void rate_stats(const bk_filter *g, uint64_t n, uint32_t w)
{
    (void)w;
    uint64_t items, duplicates;
    counts(g, &items, &duplicates);
    assert_int_equal(items, n);
    assert_int_equal(duplicates, 0);
    bk_static_stats st;
    assert_int_equal(bk_static_get_stats(bk_filter_as_static((bk_filter *)g), &st), BK_OK);
    assert_true(st.attempts >= 1);
    assert_true(st.build_memory > 0);
    assert_true(st.build_memory == bk_static_build_memory(n));
}

/* The space claim: at 10^6 keys the table is ~1.125 w bits per key, within
 * 1.15 w of the information-theoretic log2(1/p) = w. */
static void test_bits_per_key(void **state)
{
    (void)state;
    keyset ks;
    tu_keyset_make(&ks, 1000000, 0, TAG_IN);
    for (uint32_t w = 8; w <= 16; w += 4) {
        bk_static *f;
        assert_int_equal(bk_static_build(&f, ks.keys, ks.lens, ks.n, w, 7), BK_OK);
        bk_static_stats st;
        assert_int_equal(bk_static_get_stats(f, &st), BK_OK);
        if (st.bits_per_key > 1.15 * w)
            fail_msg("w=%u: %.3f bits per key", w, st.bits_per_key);
        assert_true(st.bits_per_key >= 1.0 * w);
        /* the documented temporary memory: under 24 bytes per key */
        assert_true((double)st.build_memory / (double)ks.n < 24.0);
        bk_static_free(f);
    }
    tu_keyset_free(&ks);
}

/*--------------------------------------------------------------------------
 * Key sets: duplicates, tiny sets, retries
 *--------------------------------------------------------------------------*/

/* The attempts a build took. */
static uint32_t attempts(const bk_filter *g)
{
    bk_static_stats st;
    assert_int_equal(bk_static_get_stats(bk_filter_as_static((bk_filter *)g), &st), BK_OK);
    return st.attempts;
}

/* Every size from 1 to 200, three widths, several seeds: every key found,
 * and the retry path is taken on some of them (small graphs peel less
 * reliably). */
static void test_tiny_sets(void **state)
{
    (void)state;
    static const uint32_t widths[] = {8, 12, 16};
    tu_static_tiny_sets(make, counts, NULL, 200, 5, widths, 3, attempts, 2);
}

/*--------------------------------------------------------------------------
 * The generic handle
 *--------------------------------------------------------------------------*/

/* The handle is the filter, and the family's name is "static" (what the
 * handle refuses and reports, batches as single calls: test_conformance.c,
 * its row "static"). */
static void test_generic_handle(void **state)
{
    (void)state;
    keyset ks;
    tu_keyset_make(&ks, 1000, 0, TAG_IN);
    bk_static *f;
    assert_int_equal(bk_static_build(&f, ks.keys, ks.lens, ks.n, 8, 5), BK_OK);
    bk_filter *g = bk_static_as_filter(f);
    assert_ptr_equal(bk_filter_as_static(g), f);
    assert_string_equal(bk_family_name(BK_FAMILY_STATIC), "static");
    bk_static_free(f);
    tu_keyset_free(&ks);
}

static void test_invalid_parameters(void **state)
{
    (void)state;
    bk_static *f = (bk_static *)1;
    const void *k[1] = {"a"};
    size_t l[1] = {1};
    assert_int_equal(bk_static_build(NULL, k, l, 1, 8, 0), BK_EINVAL);
    assert_int_equal(bk_static_build(&f, NULL, l, 1, 8, 0), BK_EINVAL);
    assert_null(f);
    assert_int_equal(bk_static_build(&f, k, NULL, 1, 8, 0), BK_EINVAL);
    assert_int_equal(bk_static_build(&f, k, l, 1, 10, 0), BK_EPARAM);
    assert_int_equal(bk_static_build(&f, k, l, 1, 32, 0), BK_EPARAM);
    assert_int_equal(bk_static_build(&f, k, l, 1, 0, 0), BK_EPARAM);
    assert_int_equal(bk_static_build(&f, k, l, UINT64_C(1) << 40, 8, 0), BK_ESIZE);
    assert_int_equal(bk_static_contains_batch(NULL, k, l, 1, NULL), BK_EINVAL);
    bk_static_free(NULL);
}

/*--------------------------------------------------------------------------
 * File format
 *--------------------------------------------------------------------------*/

static void test_round_trip_and_map(void **state)
{
    (void)state;
    tu_static_round_trip(make, 8, 16, 4, NULL);
}

/* 100 keys at w = 8: its image is tests/golden/static-v1.bkf
 * (TU_STATIC_GOLDEN_TEST). */
static bk_filter *golden_filter(void)
{
    return tu_static_make_keys(make, 100, 8, 2026);
}

/* Damaged fields, resealed so the checksums pass: the family's checks
 * reject each one with BK_ECORRUPT. */
static void test_damaged_fields(void **state)
{
    (void)state;
    bk_filter *f = golden_filter();
    const tu_damage cases[] = {
        {128 + 28, 10, 1},        /* width 10 */
        {128 + 28, 16, 1},        /* width 16: the length no longer fits */
        {128 + 24, 4, 4},         /* k = 4 */
        {128 + 56, 3, 8},         /* segment length not a power of two */
        {128 + 56, 1u << 20, 8},  /* segment length too large */
        {128 + 16, 7, 8},         /* cells not a multiple of the segment */
        {48, 100000, 8},          /* more items than cells */
        {56, 1, 8},               /* a param that must be 0 */
        {40, 0, 8},               /* target fpr not 2^-8 */
    };
    tu_expect_corrupt_image(f, cases, sizeof(cases) / sizeof(cases[0]));
    bk_filter_free(f);
}

/*--------------------------------------------------------------------------
 * Construction internals: a graph that cannot peel is reported, not
 * looped on; sorting removes duplicates and finds conflicting values.
 *--------------------------------------------------------------------------*/

static void test_peel_internals(void **state)
{
    (void)state;
    bk__fuse_shape shape;
    assert_int_equal(bk__fuse_shape_for(1000, &shape), BK_OK);
    assert_int_equal(shape.array_length % shape.segment_length, 0);
    assert_true(shape.array_length >= 1000);
    bk__fuse_shape again;
    assert_int_equal(bk__fuse_shape_from(shape.segment_length, shape.array_length, &again),
                     BK_OK);
    assert_memory_equal(&again, &shape, sizeof(shape));
    assert_int_equal(bk__fuse_shape_from(3, 12, &again), BK_ECORRUPT);

    /* Two keys with the same hash share all three cells: each cell holds
     * two keys whose hashes cancel, so nothing ever peels. */
    bk__peel p;
    assert_int_equal(bk__peel_alloc(&p, 4, shape.array_length, 0), BK_OK);
    uint64_t rng = 99;
    p.hashes[0] = p.hashes[1] = tu_next(&rng);
    p.hashes[2] = tu_next(&rng);
    p.hashes[3] = tu_next(&rng);
    p.n = 4; /* not deduplicated on purpose */
    assert_int_equal(bk__peel_run(&p, &shape), 0);
    assert_true(p.peeled < 4);
    bk__peel_free(&p);

    /* sort + dedupe: duplicates removed, order ascending */
    assert_int_equal(bk__peel_alloc(&p, 10000, shape.array_length, 1), BK_OK);
    for (int i = 0; i < 10000; i++) {
        p.hashes[i] = tu_next(&rng) % 3000; /* many repeats */
        p.values[i] = (uint32_t)(p.hashes[i] * 7);
    }
    assert_int_equal(bk__peel_sort_dedupe(&p, 10000, NULL), BK_OK);
    for (uint64_t i = 1; i < p.n; i++) assert_true(p.hashes[i - 1] < p.hashes[i]);
    for (uint64_t i = 0; i < p.n; i++) assert_int_equal(p.values[i], p.hashes[i] * 7);
    assert_int_equal(p.n + p.duplicates, 10000);
    /* the same hash with two values is a conflict, naming the hash */
    for (int i = 0; i < 100; i++) {
        p.hashes[i] = (uint64_t)i;
        p.values[i] = 1;
    }
    p.values[57] = 2;
    p.hashes[99] = 57;
    uint64_t conflict = 0;
    assert_int_equal(bk__peel_sort_dedupe(&p, 100, &conflict), BK_ECONFLICT);
    assert_int_equal(conflict, 57);
    bk__peel_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_STATIC_RATE_TEST("test_fpr_8", make, rate_stats, 8, 100000, 1000000),
        TU_STATIC_RATE_TEST("test_fpr_12", make, rate_stats, 12, 100000, 2000000),
        TU_STATIC_RATE_TEST("test_fpr_16", make, rate_stats, 16, 100000, 2000000),
        cmocka_unit_test(test_bits_per_key),
        TU_STATIC_DUPLICATES_TEST(&ops),
        cmocka_unit_test(test_tiny_sets),
        cmocka_unit_test(test_generic_handle),
        cmocka_unit_test(test_invalid_parameters),
        cmocka_unit_test(test_round_trip_and_map),
        TU_STATIC_GOLDEN_TEST(golden_filter, GOLDEN, BK_FAMILY_STATIC, 100),
        cmocka_unit_test(test_damaged_fields),
        TU_STATIC_FAILURES_TEST(make, 16, 9, 5000, 2, golden_filter),
        cmocka_unit_test(test_peel_internals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
