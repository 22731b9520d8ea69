/*
 * test_bumped.c - the bumped static filter (lib/bumped.c): no false
 * negatives, false-positive rate within binomial tolerance of 2^-w, bits
 * per key, layers of bumped keys, duplicates, tiny sets, every SIMD level
 * giving the same answers, batch equal to single calls, the retry path,
 * the generic handle, the file format (round trip, mapping, damaged
 * fields) and allocation failures. Its golden file is in test_format.
 */
#include <fcntl.h>
#include <unistd.h>

#include "testutil.h"
#include "static_family.h"

/* lib/bumped.c, hidden: tests only */
int bk__bumped_simd(int most);
void bk__bumped_layer_limit(uint32_t limit);

#define TAG_IN 1
#define TAG_OUT 2
#define GOLDEN BK_SOURCE_DIR "/tests/golden/bumped-v1.bkf"

typedef tu_keyset keyset;

static bk_bumped *build(const keyset *ks, uint32_t w, uint64_t seed)
{
    bk_bumped *f = NULL;
    assert_int_equal(bk_bumped_build(&f, ks->keys, ks->lens, ks->n, w, seed), BK_OK);
    assert_non_null(f);
    return f;
}

TU_STATIC_MAKE(make, bk_bumped, bk_bumped_build, bk_bumped_as_filter)

static void stats_of(const bk_filter *g, bk_bumped_stats *st)
{
    assert_int_equal(bk_bumped_get_stats(bk_filter_as_bumped((bk_filter *)g), st), BK_OK);
}

/* The family's items (its statistics', which bk_bumped_items repeats) and
 * duplicates. */
static void counts(const bk_filter *g, uint64_t *items, uint64_t *duplicates)
{
    bk_bumped_stats st;
    stats_of(g, &st);
    assert_int_equal(bk_bumped_items(bk_filter_as_bumped((bk_filter *)g)), st.items);
    *items = st.items;
    *duplicates = st.duplicates;
}

static tu_static_ops ops = {make, counts};

/*--------------------------------------------------------------------------
 * Accuracy and space
 *--------------------------------------------------------------------------*/

/* tu_static_rate, and the statistics of the build. */
static void rate_stats(const bk_filter *g, uint64_t n, uint32_t w)
{
    uint64_t items, duplicates;
    counts(g, &items, &duplicates);
    assert_int_equal(items, n);
    assert_int_equal(duplicates, 0);
    bk_bumped_stats st;
    stats_of(g, &st);
    assert_int_equal(st.fingerprint_bits, w);
    assert_true(st.fpr == ldexp(1.0, -(int)w));
}

/* The space claim at 10^6 keys: within 1.15 w bits per key (the layers
 * included), construction memory 8 bytes per key plus the sort's 48 KB,
 * and the layers of bumped keys as the header describes them: each much
 * smaller than the one before, the first holding most keys, a few percent
 * of absent keys reading a second line. */
static void test_bits_and_layers(void **state)
{
    (void)state;
    keyset ks;
    tu_keyset_make(&ks, 1000000, 0, TAG_IN);
    for (uint32_t w = 8; w <= 16; w += 8) {
        bk_bumped *f = build(&ks, w, 7);
        bk_bumped_stats st;
        assert_int_equal(bk_bumped_get_stats(f, &st), BK_OK);
        if (st.bits_per_key > 1.15 * w || st.bits_per_key < 1.0 * w)
            fail_msg("w=%u: %.3f bits per key", w, st.bits_per_key);
        assert_true((double)st.build_memory / (double)ks.n < 8.1);
        assert_int_equal(st.build_memory, bk_bumped_build_memory(ks.n));
        assert_true(st.layers >= 3 && st.layers <= 10);
        assert_true(st.first_layer_items > ks.n * 85 / 100 && st.first_layer_items < ks.n);
        double lo = w == 8 ? 0.01 : 0.05, hi = w == 8 ? 0.07 : 0.15;
        if (st.second_reads < lo || st.second_reads > hi)
            fail_msg("w=%u: %.4f of absent keys read a second line", w, st.second_reads);
        assert_int_equal(st.bytes, st.lines * 64 + (st.bytes - st.lines * 64));
        assert_true(st.bytes > st.lines * 64 && st.bytes < st.lines * 64 + 2048);
        assert_int_equal(st.attempts, 1);
        bk_bumped_free(f);
    }
    tu_keyset_free(&ks);
}

/*--------------------------------------------------------------------------
 * Key sets: duplicates, tiny sets, retries
 *--------------------------------------------------------------------------*/

/* The empty set's one line keeps no rank: not even the empty key. */
static void empty_set(const bk_filter *g)
{
    assert_int_equal(bk_bumped_contains(bk_filter_as_bumped((bk_filter *)g), NULL, 0), 0);
}

static uint32_t layers(const bk_filter *g)
{
    bk_bumped_stats st;
    stats_of(g, &st);
    return st.layers;
}

/* Every size from 1 to 300, both widths, several seeds: every key found;
 * some of them bump keys into further layers. */
static void test_tiny_sets(void **state)
{
    (void)state;
    static const uint32_t widths[] = {16, 8};
    tu_static_tiny_sets(make, counts, empty_set, 300, 4, widths, 2, layers, 3);
}

/* With too few layers allowed every seed fails: BK_EBUILD after the 64
 * attempts, nothing leaked; with enough, a later seed may succeed. */
static void test_retries(void **state)
{
    (void)state;
    keyset ks;
    tu_keyset_make(&ks, 20000, 0, TAG_IN);
    bk_bumped *f = (bk_bumped *)1;
    bk__bumped_layer_limit(1);
    tu_install_failing_allocator(0); /* counts, never fails */
    assert_int_equal(bk_bumped_build(&f, ks.keys, ks.lens, ks.n, 16, 3), BK_EBUILD);
    assert_null(f);
    assert_int_equal(tu_outstanding, 0);
    tu_restore_allocator();
    /* 2 layers at w = 8: the second layer of ~700 keys (12 lines) bumps
     * nothing in some attempts and something in others */
    bk__bumped_layer_limit(2);
    uint32_t retried = 0;
    for (uint64_t seed = 0; seed < 8; seed++) {
        int rc = bk_bumped_build(&f, ks.keys, ks.lens, ks.n, 8, seed);
        if (rc == BK_EBUILD) continue;
        assert_int_equal(rc, BK_OK);
        bk_bumped_stats st;
        assert_int_equal(bk_bumped_get_stats(f, &st), BK_OK);
        assert_true(st.layers <= 2);
        if (st.attempts > 1) retried++;
        assert_int_equal(tu_count_found(bk_bumped_as_filter(f), 0, ks.n, TAG_IN), ks.n);
        if (st.attempts > 1) assert_true(bk_bumped_seed(f) != seed);
        bk_bumped_free(f);
    }
    assert_true(retried > 0);
    bk__bumped_layer_limit(0); /* back to the default */
    tu_keyset_free(&ks);
}

/*--------------------------------------------------------------------------
 * Lookups: every level the same, batches the same as single calls
 *--------------------------------------------------------------------------*/

static void test_levels_and_batches(void **state)
{
    (void)state;
    keyset in, probe;
    tu_keyset_make(&in, 60000, 0, TAG_IN);
    tu_keyset_make(&probe, 120000, 30000, TAG_IN); /* half present */
    for (uint64_t i = 0; i < probe.n; i += 3) tu_key(probe.store + i * TU_KEY_LEN, i, TAG_OUT);
    uint8_t *want = malloc(probe.n), *got = malloc(probe.n);
    assert_non_null(want);
    assert_non_null(got);
    int top = bk__bumped_simd(2);
    for (uint32_t w = 8; w <= 16; w += 8) {
        bk_bumped *f = build(&in, w, 3);
        int64_t hits = -1;
        for (int level = top; level >= 0; level--) {
            bk__bumped_simd(level);
            uint8_t *res = level == top ? want : got;
            int64_t h = bk_bumped_contains_batch(f, probe.keys, probe.lens, probe.n, res);
            assert_int_equal(bk_bumped_contains_batch(f, probe.keys, probe.lens, probe.n, NULL), h);
            if (level == top) hits = h;
            assert_int_equal(h, hits);
            if (level != top) assert_memory_equal(res, want, probe.n);
            int64_t single = 0;
            for (uint64_t i = 0; i < probe.n; i++) {
                int r = bk_bumped_contains(f, probe.keys[i], probe.lens[i]);
                assert_int_equal(r, want[i]);
                assert_int_equal(bk_bumped_contains_hash(
                                     f, bk_bumped_hash_key(f, probe.keys[i], probe.lens[i])),
                                 r);
                single += r;
            }
            assert_int_equal(single, hits);
        }
        /* every member found, whichever layer kept it */
        int64_t members = 0;
        for (uint64_t i = 0; i < probe.n; i++)
            if (i % 3 != 0 && i + 30000 < in.n) members++;
        assert_true(hits >= members);
        /* the generic batch */
        assert_int_equal(bk_filter_contains_batch(bk_bumped_as_filter(f), probe.keys,
                                                  probe.lens, probe.n, NULL),
                         hits);
        bk_bumped_free(f);
    }
    bk__bumped_simd(top);
    free(want);
    free(got);
    tu_keyset_free(&in);
    tu_keyset_free(&probe);
}

/*--------------------------------------------------------------------------
 * The generic handle, parameters
 *--------------------------------------------------------------------------*/

/* The handle is the filter, the family's name is "bumped", and its fill is
 * reported (what the handle refuses and reports otherwise:
 * test_conformance.c, its row "bumped"). */
static void test_generic_handle(void **state)
{
    (void)state;
    keyset ks;
    tu_keyset_make(&ks, 1000, 0, TAG_IN);
    bk_bumped *f = build(&ks, 8, 5);
    bk_filter *g = bk_bumped_as_filter(f);
    assert_ptr_equal(bk_filter_as_bumped(g), f);
    assert_null(bk_filter_as_static(g));
    assert_string_equal(bk_family_name(BK_FAMILY_BUMPED), "bumped");
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(g, &info), BK_OK);
    assert_true(info.fill > 0.5 && info.fill < 1.0);
    bk_bumped_free(f);
    tu_keyset_free(&ks);
}

static void test_invalid_parameters(void **state)
{
    (void)state;
    bk_bumped *f = (bk_bumped *)1;
    const void *k[2] = {"a", NULL};
    size_t l[2] = {1, 3};
    assert_int_equal(bk_bumped_build(NULL, k, l, 1, 8, 0), BK_EINVAL);
    assert_int_equal(bk_bumped_build(&f, NULL, l, 1, 8, 0), BK_EINVAL);
    assert_null(f);
    assert_int_equal(bk_bumped_build(&f, k, NULL, 1, 8, 0), BK_EINVAL);
    assert_int_equal(bk_bumped_build(&f, k, l, 2, 8, 0), BK_EINVAL); /* NULL key, length 3 */
    assert_int_equal(bk_bumped_build(&f, k, l, 1, 12, 0), BK_EPARAM);
    assert_int_equal(bk_bumped_build(&f, k, l, 1, 32, 0), BK_EPARAM);
    assert_int_equal(bk_bumped_build(&f, k, l, 1, 0, 0), BK_EPARAM);
    assert_int_equal(bk_bumped_build(&f, k, l, UINT64_MAX / 4, 8, 0), BK_ESIZE);
    assert_int_equal(bk_bumped_contains_batch(NULL, k, l, 1, NULL), BK_EINVAL);
    assert_int_equal(bk_bumped_contains(NULL, "a", 1), 0);
    assert_int_equal(bk_bumped_get_stats(NULL, NULL), BK_EINVAL);
    bk_bumped_free(NULL);
}

/*--------------------------------------------------------------------------
 * File format
 *--------------------------------------------------------------------------*/

/* some keys were bumped: several parts */
static void several_parts(const bk_filter *g)
{
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(g, &info), BK_OK);
    assert_true(info.parts >= 2);
}

static void test_round_trip_and_map(void **state)
{
    (void)state;
    tu_static_round_trip(make, 8, 16, 8, several_parts);
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes; i-- > 0;) v = v << 8 | p[i];
    return v;
}

/* A filter of three layers or more (w = 16, 3000 keys): its image is
 * tests/golden/bumped-v1.bkf (TU_STATIC_GOLDEN_TEST). The allocation
 * failures (TU_STATIC_FAILURES_TEST) load it too, after builds of 20000
 * keys that make the hashes, the sort, and one allocation per layer. */
static bk_filter *layered_filter(void)
{
    bk_filter *g = tu_static_make_keys(make, 3000, 16, 2026);
    bk_bumped_stats st;
    stats_of(g, &st);
    assert_true(st.layers >= 3);
    return g;
}

/* Damaged fields, resealed so the checksums pass: the family's checks
 * reject each one with BK_ECORRUPT. Part descriptors start at 128. */
static void test_damaged_fields(void **state)
{
    (void)state;
    bk_filter *f = layered_filter();
    size_t len;
    unsigned char *good = tu_serialize(f, &len);
    uint64_t items1 = get_le(good + 128 + 64 + 48, 8);
    uint64_t lines0 = get_le(good + 128 + 16, 8);
    const tu_damage cases[] = {
        {20, 1, 4},                     /* hash algorithm XXH3-128 */
        {128 + 28, 8, 1},               /* first layer's width 8, the others 16 */
        {128 + 28, 12, 1},              /* width 12 */
        {128 + 24, 3, 4},               /* k = 3 */
        {128 + 56, 1, 8},               /* a part param */
        {128 + 16, lines0 + 1, 8},      /* lines not what its keys need */
        {56, 33, 8},                    /* load: the lines no longer fit it */
        {56, 0, 8},                     /* load 0 */
        {64, 1, 8},                     /* param[1] */
        {88, 1, 8},                     /* flags */
        {48, 2999, 8},                  /* items not the layers' sum */
        {32, 2999, 8},                  /* capacity not the items */
        {40, 0, 8},                     /* target fpr not 2^-16 */
        {128 + 64 + 48, items1 + 1, 8}, /* a layer's items not its capacity */
        {128 + 64 + 40, 0, 8},          /* a layer's fpr */
    };
    tu_expect_corrupt(good, len, cases, sizeof(cases) / sizeof(cases[0]));
    /* any line content is a table: flipped payload bits, resealed, load,
     * and lookups stay in bounds (ASan) */
    unsigned char *flipped = malloc(len);
    assert_non_null(flipped);
    memcpy(flipped, good, len);
    size_t payload = (size_t)get_le(good + 96, 8);
    for (size_t at = payload; at < len; at += 37) flipped[at] ^= 0xA5;
    reseal(flipped, len);
    bk_filter *g = NULL;
    assert_int_equal(bk_filter_deserialize(&g, flipped, len), BK_OK);
    assert_true(tu_count_found(g, 0, 20000, TAG_OUT) < 20000);
    bk_filter_free(g);
    free(flipped);
    free(good);
    bk_filter_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_STATIC_RATE_TEST("test_fpr_8", make, rate_stats, 8, 100000, 1000000),
        TU_STATIC_RATE_TEST("test_fpr_16", make, rate_stats, 16, 100000, 3000000),
        cmocka_unit_test(test_bits_and_layers),
        TU_STATIC_DUPLICATES_TEST(&ops),
        cmocka_unit_test(test_tiny_sets),
        cmocka_unit_test(test_retries),
        cmocka_unit_test(test_levels_and_batches),
        cmocka_unit_test(test_generic_handle),
        cmocka_unit_test(test_invalid_parameters),
        cmocka_unit_test(test_round_trip_and_map),
        TU_STATIC_GOLDEN_TEST(layered_filter, GOLDEN, BK_FAMILY_BUMPED, 3000),
        cmocka_unit_test(test_damaged_fields),
        TU_STATIC_FAILURES_TEST(make, 16, 9, 20000, 4, layered_filter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
