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
#include "peel.h" /* the construction internals (tests see lib/) */

#define TAG_IN 1
#define TAG_OUT 2
#define GOLDEN BK_SOURCE_DIR "/tests/golden/static-v1.bkf"

/* n keys of tag `tag` in one block: keys[i] points into *store. */
typedef tu_keyset keyset;

static uint64_t count_present(const bk_static *f, uint64_t first, uint64_t n,
                              uint64_t tag)
{
    char key[TU_KEY_LEN];
    uint64_t hits = 0;
    for (uint64_t i = 0; i < n; i++) {
        tu_key(key, first + i, tag);
        hits += (uint64_t)bk_static_contains(f, key, sizeof(key));
    }
    return hits;
}

/*--------------------------------------------------------------------------
 * Accuracy
 *--------------------------------------------------------------------------*/

static void check_rate(uint32_t width, uint64_t n, uint64_t probes)
{
    keyset ks;
    tu_keyset_make(&ks, n, 0, TAG_IN);
    bk_static *f;
    assert_int_equal(bk_static_build(&f, ks.keys, ks.lens, n, width, 42), BK_OK);
    assert_int_equal(count_present(f, 0, n, TAG_IN), n); /* no false negatives */
    double p = ldexp(1.0, -(int)width);
    double measured = (double)count_present(f, 0, probes, TAG_OUT) / (double)probes;
    double tol = tu_tolerance(p, probes, 5.0);
    if (fabs(measured - p) > tol)
        fail_msg("w=%u: measured %.6g, expected %.6g +- %.3g", width, measured, p, tol);
    bk_static_stats st;
    assert_int_equal(bk_static_get_stats(f, &st), BK_OK);
    assert_int_equal(st.items, n);
    assert_int_equal(st.duplicates, 0);
    assert_true(st.attempts >= 1);
    assert_true(st.build_memory > 0);
    assert_true(st.build_memory == bk_static_build_memory(n));
    bk_static_free(f);
    tu_keyset_free(&ks);
}

static void test_fpr_8(void **state)
{
    (void)state;
    check_rate(8, 100000, 1000000);
}

static void test_fpr_12(void **state)
{
    (void)state;
    check_rate(12, 100000, 2000000);
}

static void test_fpr_16(void **state)
{
    (void)state;
    check_rate(16, 100000, 2000000);
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

static void test_duplicates(void **state)
{
    (void)state;
    const uint64_t distinct = 20000;
    keyset ks;
    tu_keyset_make(&ks, distinct * 3, 0, TAG_IN);
    /* key i, i + distinct and i + 2 distinct are the same string */
    for (uint64_t i = 0; i < ks.n; i++) tu_key(ks.store + i * TU_KEY_LEN, i % distinct, TAG_IN);
    bk_static *f;
    assert_int_equal(bk_static_build(&f, ks.keys, ks.lens, ks.n, 8, 1), BK_OK);
    bk_static_stats st;
    assert_int_equal(bk_static_get_stats(f, &st), BK_OK);
    assert_int_equal(st.items, distinct);
    assert_int_equal(st.duplicates, 2 * distinct);
    assert_int_equal(count_present(f, 0, distinct, TAG_IN), distinct);
    bk_static_free(f);

    /* every key the same */
    for (uint64_t i = 0; i < ks.n; i++) ks.keys[i] = ks.store;
    assert_int_equal(bk_static_build(&f, ks.keys, ks.lens, ks.n, 16, 1), BK_OK);
    assert_int_equal(bk_static_items(f), 1);
    assert_int_equal(bk_static_contains(f, ks.store, TU_KEY_LEN), 1);
    bk_static_free(f);
    tu_keyset_free(&ks);
}

static void test_tiny_sets(void **state)
{
    (void)state;
    keyset ks;
    tu_keyset_make(&ks, 200, 0, TAG_IN);
    /* the empty set contains nothing */
    bk_static *f;
    assert_int_equal(bk_static_build(&f, NULL, NULL, 0, 8, 1), BK_OK);
    assert_int_equal(bk_static_items(f), 0);
    assert_int_equal(count_present(f, 0, 100000, TAG_OUT), 0);
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(bk_static_as_filter(f), &info), BK_OK);
    assert_true(info.fpr_now == 0.0);
    bk_static_free(f);

    /* every size from 1 to 200, two widths, several seeds: every key found,
     * and the retry path is taken on some of them (small graphs peel less
     * reliably) */
    uint32_t max_attempts = 0;
    for (uint64_t n = 1; n <= 200; n++) {
        for (uint64_t seed = 0; seed < 5; seed++) {
            uint32_t w = 8 + 4 * (uint32_t)(n % 3);
            assert_int_equal(bk_static_build(&f, ks.keys, ks.lens, n, w, seed), BK_OK);
            assert_int_equal(bk_static_items(f), n);
            assert_int_equal(count_present(f, 0, n, TAG_IN), n);
            bk_static_stats st;
            assert_int_equal(bk_static_get_stats(f, &st), BK_OK);
            if (st.attempts > max_attempts) max_attempts = st.attempts;
            bk_static_free(f);
        }
    }
    assert_true(max_attempts >= 2);
    tu_keyset_free(&ks);
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
    keyset ks;
    tu_keyset_make(&ks, 30000, 0, TAG_IN);
    for (uint32_t w = 8; w <= 16; w += 4) {
        bk_static *f;
        assert_int_equal(bk_static_build(&f, ks.keys, ks.lens, ks.n, w, 11), BK_OK);
        tu_check_save_load_map(bk_static_as_filter(f), TAG_IN, TAG_OUT);
        bk_static_free(f);
    }
    tu_keyset_free(&ks);
}

static bk_static *golden_filter(void)
{
    keyset ks;
    tu_keyset_make(&ks, 100, 0, TAG_IN);
    bk_static *f;
    assert_int_equal(bk_static_build(&f, ks.keys, ks.lens, ks.n, 8, 2026), BK_OK);
    tu_keyset_free(&ks);
    return f;
}

/* tests/golden/static-v1.bkf pins the format (tu_golden), and loading it
 * answers for its 100 keys. */
static void test_golden_file(void **state)
{
    (void)state;
    bk_static *f = golden_filter();
    size_t len;
    unsigned char *buf = tu_serialize(bk_static_as_filter(f), &len);
    size_t glen;
    unsigned char *golden = tu_golden(GOLDEN, buf, len, &glen);
    bk_filter *g;
    assert_int_equal(bk_filter_deserialize(&g, golden, glen), BK_OK);
    assert_int_equal(bk_filter_family(g), BK_FAMILY_STATIC);
    for (uint64_t i = 0; i < 100; i++) {
        char key[TU_KEY_LEN];
        tu_key(key, i, TAG_IN);
        assert_int_equal(bk_filter_contains(g, key, sizeof(key)), 1);
    }
    bk_filter_free(g);
    free(golden);
    free(buf);
    bk_static_free(f);
}

#include "damage.h"

/* Damaged fields, resealed so the checksums pass: the family's checks
 * reject each one with BK_ECORRUPT. */
static void test_damaged_fields(void **state)
{
    (void)state;
    bk_static *f = golden_filter();
    size_t len;
    unsigned char *good = tu_serialize(bk_static_as_filter(f), &len);
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
    tu_expect_corrupt(good, len, cases, sizeof(cases) / sizeof(cases[0]));
    free(good);
    bk_static_free(f);
}

/*--------------------------------------------------------------------------
 * Allocation failures
 *--------------------------------------------------------------------------*/

static int build_w16(bk_filter **out, const keyset *ks)
{
    bk_static *f = NULL;
    int rc = bk_static_build(&f, ks->keys, ks->lens, ks->n, 16, 9);
    *out = rc == BK_OK ? bk_static_as_filter(f) : NULL;
    return rc;
}

static void test_allocation_failures(void **state)
{
    (void)state;
    bk_static *f = golden_filter();
    tu_static_allocation_failures(build_w16, 5000, 2, bk_static_as_filter(f));
    bk_static_free(f);
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
        cmocka_unit_test(test_fpr_8),
        cmocka_unit_test(test_fpr_12),
        cmocka_unit_test(test_fpr_16),
        cmocka_unit_test(test_bits_per_key),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_tiny_sets),
        cmocka_unit_test(test_generic_handle),
        cmocka_unit_test(test_invalid_parameters),
        cmocka_unit_test(test_round_trip_and_map),
        cmocka_unit_test(test_golden_file),
        cmocka_unit_test(test_damaged_fields),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_peel_internals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
