/*
 * test_hash.c - the key hash, fast range and the probe sequence.
 */
#include "testutil.h"

#include "internal.h"
#include "hash.h"
#define XXH_INLINE_ALL
#include <xxhash.h>

/* Pinned outputs: the hash of a key under a seed never changes, or every
 * saved filter would stop answering. The empty key under seed 0 is XXH3-128's
 * published reference value (0x99aa06d3014798d86001c324468d497f). */
static const struct {
    uint64_t seed;
    const char *key;
    uint64_t lo, hi;
} golden[] = {
    {0, "", UINT64_C(0x6001c324468d497f), UINT64_C(0x99aa06d3014798d8)},
    {0, "bloomkit", UINT64_C(0xfe09b719cb5b4d66), UINT64_C(0x900b50efb331a798)},
    {0, "the quick brown fox jumps over the lazy dog",
     UINT64_C(0x15c21eead63fa21f), UINT64_C(0xe9a1932627d7f46d)},
    {BK_DEFAULT_SEED, "", UINT64_C(0x4ca5176998171787),
     UINT64_C(0xd142977a2cca554b)},
    {BK_DEFAULT_SEED, "bloomkit", UINT64_C(0x91a854545289c62b),
     UINT64_C(0xe914109ef26ad998)},
    {BK_DEFAULT_SEED, "the quick brown fox jumps over the lazy dog",
     UINT64_C(0xfc0dffaca1fb4cbe), UINT64_C(0x104178ebcc64a0da)},
};

static void test_golden_values(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(golden) / sizeof(golden[0]); i++) {
        bk_hash h = bk_hash_key(golden[i].key, strlen(golden[i].key),
                                golden[i].seed);
        assert_true(h.lo == golden[i].lo);
        assert_true(h.hi == golden[i].hi);
    }
}

static void test_matches_xxh3_128(void **state)
{
    (void)state;
    uint64_t rng = 42;
    unsigned char buf[300];
    for (int t = 0; t < 2000; t++) {
        size_t len = (size_t)(tu_next(&rng) % sizeof(buf));
        for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)tu_next(&rng);
        uint64_t seed = tu_next(&rng);
        bk_hash h = bk_hash_key(buf, len, seed);
        XXH128_hash_t x = XXH3_128bits_withSeed(buf, len, seed);
        assert_true(h.lo == x.low64 && h.hi == x.high64);
    }
}

/* The split layout's keyed XXH3-64 is XXH3_64bits_withSeed for every input
 * of 0..BK__XXH64_SHORT bytes: each length (each of XXH3's short paths and
 * their edges), seeds at the ends of the range and random ones, random
 * bytes. */
/* The seeds the keyed hashes are checked under: the ends of the range and
 * of 32 bits, then random ones. */
#define KEYED_SEEDS 206
static uint64_t keyed_seed(size_t s, uint64_t *rng)
{
    static const uint64_t fixed[] = {0, 1, BK_DEFAULT_SEED, UINT64_C(0xffffffff),
                                     UINT64_C(0x100000000), UINT64_MAX};
    return s < sizeof(fixed) / sizeof(fixed[0]) ? fixed[s] : tu_next(rng);
}

static void test_xxh64_keyed_matches_xxh3_64(void **state)
{
    (void)state;
    uint64_t rng = 43;
    unsigned char buf[BK__XXH64_SHORT];
    for (size_t s = 0; s < KEYED_SEEDS; s++) {
        uint64_t seed = keyed_seed(s, &rng);
        bk__xxh64_keys keys;
        bk__xxh64_keys_init(&keys, seed);
        for (size_t len = 0; len <= BK__XXH64_SHORT; len++) {
            for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)tu_next(&rng);
            assert_true(bk__xxh64_keyed(&keys, buf, len) == XXH3_64bits_withSeed(buf, len, seed));
        }
    }
    bk__xxh64_keys keys;
    bk__xxh64_keys_init(&keys, 7);
    assert_true(bk__xxh64_keyed(&keys, NULL, 0) == XXH3_64bits_withSeed("", 0, 7));
}

/* And the keyed XXH3-128 is XXH3_128bits_withSeed, for short keys by its
 * own code and for longer ones by falling back. */
static void test_hash_keyed_matches_xxh3_128(void **state)
{
    (void)state;
    uint64_t rng = 44;
    unsigned char buf[3 * BK__XXH64_SHORT];
    for (size_t s = 0; s < KEYED_SEEDS; s++) {
        uint64_t seed = keyed_seed(s, &rng);
        bk__hash_keys keys;
        bk__hash_keys_init(&keys, seed);
        for (size_t len = 0; len <= sizeof(buf); len++) {
            for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)tu_next(&rng);
            bk_hash h = bk__hash_keyed(&keys, buf, len);
            XXH128_hash_t x = XXH3_128bits_withSeed(buf, len, seed);
            assert_true(h.lo == x.low64 && h.hi == x.high64);
        }
    }
}

static void test_null_key_is_empty_key(void **state)
{
    (void)state;
    bk_hash a = bk_hash_key(NULL, 0, 7), b = bk_hash_key("", 0, 7);
    assert_true(a.lo == b.lo && a.hi == b.hi);
}

static void test_seed_changes_hash(void **state)
{
    (void)state;
    bk_hash a = bk_hash_key("x", 1, 1), b = bk_hash_key("x", 1, 2);
    assert_true(a.lo != b.lo || a.hi != b.hi);
}

/* fastrange64 stays in range and spreads uniformly over ranges wider than
 * 2^32: a chi-square test over 64 equal buckets of [0, 6e9). With 64 buckets
 * (63 degrees of freedom) the statistic exceeds 120 with probability ~1e-5. */
static void test_fastrange_uniform_beyond_32_bits(void **state)
{
    (void)state;
    const uint64_t range = UINT64_C(6000000000);
    const int buckets = 64;
    const uint64_t draws = 640000;
    uint64_t counts[64] = {0};
    uint64_t rng = 7, max_seen = 0;
    for (uint64_t i = 0; i < draws; i++) {
        uint64_t v = bk__fastrange64(tu_next(&rng), range);
        assert_true(v < range);
        if (v > max_seen) max_seen = v;
        counts[(v * (uint64_t)buckets) / range]++;
    }
    assert_true(max_seen > (UINT64_C(1) << 32));
    double expected = (double)draws / buckets, chi2 = 0;
    for (int b = 0; b < buckets; b++) {
        double d = (double)counts[b] - expected;
        chi2 += d * d / expected;
    }
    assert_true(chi2 < 120.0);
}

static void test_fastrange_edges(void **state)
{
    (void)state;
    assert_true(bk__fastrange64(0, 10) == 0);
    assert_true(bk__fastrange64(UINT64_MAX, 10) == 9);
    assert_true(bk__fastrange64(UINT64_MAX, 1) == 0);
    assert_true(bk__fastrange64(UINT64_MAX, UINT64_MAX) == UINT64_MAX - 1);
}

/* A zero second hash must not collapse the probes onto one position. */
static void test_probe_zero_step(void **state)
{
    (void)state;
    bk_hash h = {12345, 0};
    bk__probe p = bk__probe_start(h);
    uint64_t first = bk__probe_next(&p, UINT64_MAX);
    int distinct = 0;
    for (int i = 1; i < 16; i++)
        if (bk__probe_next(&p, UINT64_MAX) != first) distinct++;
    assert_int_equal(distinct, 15);
}

/* Probes of random keys over m = 6e9 bits land above 2^32 in the right
 * proportion: (m - 2^32) / m = 28.4%, checked to 6 standard deviations. */
static void test_probes_reach_high_bits(void **state)
{
    (void)state;
    const uint64_t m = UINT64_C(6000000000);
    uint64_t high = 0, total = 0;
    for (uint64_t i = 0; i < 100000; i++) {
        bk__probe p = bk__probe_start(bk_hash_key(&i, sizeof(i), 3));
        for (int j = 0; j < 7; j++) {
            uint64_t pos = bk__probe_next(&p, m);
            assert_true(pos < m);
            high += pos >= (UINT64_C(1) << 32);
            total++;
        }
    }
    double want = (double)(m - (UINT64_C(1) << 32)) / (double)m;
    double got = (double)high / (double)total;
    assert_true(fabs(got - want) < tu_tolerance(want, total, 6));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_values),
        cmocka_unit_test(test_matches_xxh3_128),
        cmocka_unit_test(test_xxh64_keyed_matches_xxh3_64),
        cmocka_unit_test(test_hash_keyed_matches_xxh3_128),
        cmocka_unit_test(test_null_key_is_empty_key),
        cmocka_unit_test(test_seed_changes_hash),
        cmocka_unit_test(test_fastrange_uniform_beyond_32_bits),
        cmocka_unit_test(test_fastrange_edges),
        cmocka_unit_test(test_probe_zero_step),
        cmocka_unit_test(test_probes_reach_high_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
