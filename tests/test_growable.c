/*
 * test_growable.c - the growable filter: no key lost through doublings,
 * spills and the stash; the rate it reports is the rate measured; the
 * rate bound, the byte cap and allocation failures change nothing.
 */
#include "testutil.h"

int bk__growable_simd(int allowed); /* lib/growable.c, hidden: tests only */

static void key_of(char k[TU_KEY_LEN], uint64_t i, uint64_t tag) { tu_key(k, i, tag); }

/* Adds keys 0..n-1 of tag 1; returns how many answered 1. */
static uint64_t add_keys(bk_growable *f, uint64_t n)
{
    uint64_t added = 0;
    char k[TU_KEY_LEN];
    for (uint64_t i = 0; i < n; i++) {
        key_of(k, i, 1);
        int rc = bk_growable_add(f, k, sizeof(k));
        assert_true(rc == 0 || rc == 1);
        added += (uint64_t)rc;
    }
    return added;
}

static void assert_all_present(const bk_growable *f, uint64_t n)
{
    char k[TU_KEY_LEN];
    for (uint64_t i = 0; i < n; i++) {
        key_of(k, i, 1);
        if (!bk_growable_contains(f, k, sizeof(k))) fail_msg("key %llu lost", (unsigned long long)i);
    }
}

static void test_create_errors(void **state)
{
    (void)state;
    bk_growable *f = (bk_growable *)&f;
    assert_int_equal(bk_growable_create(NULL, 100, 0.01, 1), BK_EINVAL);
    assert_int_equal(bk_growable_create(&f, 0, 0.01, 1), BK_ECAPACITY);
    assert_null(f);
    assert_int_equal(bk_growable_create(&f, 100, BK_GROWABLE_MIN_FPR / 2, 1), BK_EFPR);
    assert_int_equal(bk_growable_create(&f, 100, 1.0, 1), BK_EFPR);
    assert_int_equal(bk_growable_create(&f, 100, NAN, 1), BK_EFPR);
    assert_int_equal(bk_growable_create(&f, UINT64_MAX, 0.01, 1), BK_ESIZE);
    assert_int_equal(bk_growable_create(&f, 100, 0.01, 1), BK_OK);
    assert_true(bk_growable_capacity(f) >= 100);
    assert_int_equal(bk_growable_items(f), 0);
    assert_true(bk_growable_fpr_now(f) == 0.0);
    assert_int_equal(bk_growable_add(f, NULL, 3), BK_EINVAL);
    assert_int_equal(bk_growable_add(f, NULL, 0), 1); /* the empty key */
    assert_int_equal(bk_growable_contains(f, "", 0), 1);
    bk_growable_free(f);
    bk_growable_free(NULL);
}

/* Grown from 100 keys to 3e5 (12 doublings): every key found, again-adds
 * answer 0, and the rate stays under the one asked. */
static void test_grows_without_losing_keys(void **state)
{
    (void)state;
    const uint64_t n = 300000;
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 100, 0.01, 7), BK_OK);
    uint64_t added = add_keys(f, n);
    assert_int_equal(bk_growable_items(f), added);
    /* a new key answers 0 when it collides with earlier ones: at most at the
     * rate bound, 1%, for every add */
    assert_true((double)added >= 0.99 * (double)n);
    assert_true(bk_growable_doublings(f) >= 11);
    assert_true(bk_growable_capacity(f) >= n);
    assert_all_present(f, n);
    assert_int_equal(add_keys(f, n), 0);
    assert_int_equal(bk_growable_items(f), added);
    assert_true(bk_growable_fpr_now(f) <= 0.01);
    bk_growable_free(f);
}

/* The measured rate on 1e6 absent keys is the reported one: each entry of L
 * bits matches a random key with probability 2^-L, and the report sums
 * them per bucket (a union bound, within 1% of the exact rate here).
 * Tolerance: 5 binomial standard deviations. */
static void test_rate_is_measured(void **state)
{
    (void)state;
    const uint64_t n = 200000, trials = 1000000;
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 100, 0.01, 9), BK_OK);
    add_keys(f, n);
    double want = bk_growable_fpr_now(f);
    assert_true(want > 0.002 && want < 0.01);
    uint64_t hits = 0;
    char k[TU_KEY_LEN];
    for (uint64_t i = 0; i < trials; i++) {
        key_of(k, i, 2);
        hits += (uint64_t)bk_growable_contains(f, k, sizeof(k));
    }
    double got = (double)hits / (double)trials, tol = tu_tolerance(want, trials, 5);
    if (got > want + tol || got < 0.99 * want - tol)
        fail_msg("measured %.5f%%, reported %.5f%% (tolerance %.5f%%)", 100 * got, 100 * want,
                 100 * tol);
    bk_growable_free(f);
}

/* The AVX-512BW and scalar tests answer alike, key by key. */
static void test_scalar_and_simd_agree(void **state)
{
    (void)state;
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 1000, 0.02, 3), BK_OK);
    add_keys(f, 100000);
    char k[TU_KEY_LEN];
    static uint8_t seen[200000];
    uint64_t hits = 0;
    for (int pass = 0; pass < 2; pass++) {
        bk__growable_simd(pass);
        for (uint64_t i = 0; i < 200000; i++) {
            key_of(k, i, 2);
            int r = bk_growable_contains(f, k, sizeof(k));
            if (pass == 0) seen[i] = (uint8_t)r, hits += (uint64_t)r;
            else if (seen[i] != r) fail_msg("absent key %llu: scalar %d, SIMD %d",
                                            (unsigned long long)i, seen[i], r);
        }
        assert_all_present(f, 100000);
    }
    bk__growable_simd(1);
    assert_true(hits > 0); /* some false positives, so the match path ran */
    bk_growable_free(f);
}

/* At a rate that allows two doublings, the third is refused: BK_EFULL,
 * nothing changes, and the rate stays under the one asked. */
static void test_rate_bound_refuses_growth(void **state)
{
    (void)state;
    const double p = 0.0015;
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 100, p, 5), BK_OK);
    char k[TU_KEY_LEN];
    uint64_t i, added = 0;
    int rc = 1;
    for (i = 0; i < 100000 && rc >= 0; i++) {
        key_of(k, i, 1);
        rc = bk_growable_add(f, k, sizeof(k));
        if (rc == 1) added++;
    }
    assert_int_equal(rc, BK_EFULL);
    uint64_t full_at = i - 1;
    assert_int_equal(bk_growable_doublings(f), 2); /* 0.07% + 2 x 0.035% */
    assert_int_equal(bk_growable_items(f), added);
    assert_true(bk_growable_fpr_now(f) <= p);
    assert_all_present(f, full_at);
    bk_growable_free(f);
}

/* A byte cap stops growth with BK_ELIMIT and loses nothing. */
static void test_max_bytes(void **state)
{
    (void)state;
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 100, 0.01, 5), BK_OK);
    assert_int_equal(bk_growable_set_max_bytes(f, 64 * 1024), BK_OK);
    assert_int_equal(bk_growable_set_max_bytes(NULL, 1), BK_EINVAL);
    char k[TU_KEY_LEN];
    uint64_t i;
    int rc = 1;
    for (i = 0; i < 100000 && rc >= 0; i++) {
        key_of(k, i, 1);
        rc = bk_growable_add(f, k, sizeof(k));
    }
    assert_int_equal(rc, BK_ELIMIT);
    assert_true(bk_growable_bytes(f) <= 64 * 1024);
    assert_all_present(f, i - 1);
    bk_growable_free(f);
}

/* From one bucket at a rate of 50%, 2^20 keys take 16 doublings:
 * the oldest entries run out of bits ("voids" that match their whole
 * bucket and are copied into both children) and still nothing is lost. */
static void test_entries_out_of_bits(void **state)
{
    (void)state;
    const uint64_t n = UINT64_C(1) << 20;
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 1, 0.5, 11), BK_OK);
    add_keys(f, n);
    assert_true(bk_growable_doublings(f) >= 16);
    assert_all_present(f, n);
    assert_true(bk_growable_fpr_now(f) <= 0.5);
    bk_growable_free(f);
}

/* Hashes chosen to land in one bucket: 31 fill it, 31 more spill into the
 * next, the rest go to the stash; all are found, before and after the
 * table doubles, and other tags of that bucket are not. */
static void test_spill_and_stash(void **state)
{
    (void)state;
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 1000, 0.01, 5), BK_OK);
    uint64_t cap = bk_growable_capacity(f);
    uint32_t q = 0;
    while ((UINT64_C(31) << q) * 3 / 4 < cap) q++; /* the table's bucket bits */
    const int n = 70;
    uint64_t h[70];
    for (int i = 0; i < n; i++) {
        /* bucket 0, tag 2i + 1 (distinct), low bits anything */
        h[i] = ((uint64_t)(2 * i + 1) << (64 - q - 15)) | 0x5a5a;
        assert_int_equal(bk_growable_add_hash(f, h[i]), 1);
    }
    assert_int_equal(bk_growable_stashed(f), (size_t)(n - 62));
    for (int i = 0; i < n; i++) assert_int_equal(bk_growable_contains_hash(f, h[i]), 1);
    for (int i = 0; i < n; i++)
        assert_int_equal(bk_growable_contains_hash(f, (uint64_t)(2 * i + 2) << (64 - q - 15)), 0);
    uint32_t before = bk_growable_doublings(f);
    add_keys(f, 20000);
    assert_true(bk_growable_doublings(f) > before);
    for (int i = 0; i < n; i++) assert_int_equal(bk_growable_contains_hash(f, h[i]), 1);
    assert_all_present(f, 20000);
    bk_growable_free(f);
}

/* Batches answer as single calls; keys of every length, the long ones by
 * the out-of-line hash. */
static void test_batches_and_lengths(void **state)
{
    (void)state;
    enum { N = 3000 };
    static char store[N][100];
    const void *keys[N];
    size_t lens[N];
    int added[N];
    uint8_t found[N];
    uint64_t rng = 17;
    for (int i = 0; i < N; i++) {
        lens[i] = 2 + (size_t)(i % 98); /* distinct: the first two bytes are i */
        for (size_t j = 0; j < lens[i]; j++) store[i][j] = (char)tu_next(&rng);
        store[i][0] = (char)(i & 0xff);
        store[i][1] = (char)(i >> 8);
        keys[i] = store[i];
    }
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 100, 0.01, 5), BK_OK);
    int64_t n_added = bk_growable_add_batch(f, keys, lens, N / 2, added);
    assert_true(n_added >= N / 2 - 15 && n_added <= N / 2); /* collisions at <= 1% */
    assert_int_equal(bk_growable_items(f), (uint64_t)n_added);
    int64_t hits = bk_growable_contains_batch(f, keys, lens, N, found);
    int64_t single = 0;
    for (int i = 0; i < N; i++) {
        int r = bk_growable_contains(f, keys[i], lens[i]);
        assert_int_equal(found[i], r);
        if (i < N / 2) assert_int_equal(r, 1);
        single += r;
    }
    assert_int_equal(hits, single);
    assert_int_equal(bk_growable_contains_batch(f, NULL, NULL, 1, NULL), BK_EINVAL);
    assert_int_equal(bk_growable_hash_key(f, NULL, 0), bk_growable_hash_key(f, "", 0));
    bk_growable_free(f);
}

/* Every allocation of creating and growing a filter fails in turn: each
 * failure is BK_ENOMEM, leaks nothing, and the keys added before it are
 * all still found. */
static int attempt_grow(void *ctx)
{
    (void)ctx;
    bk_growable *f;
    int rc = bk_growable_create(&f, 10, 0.01, 3);
    if (rc != BK_OK) return rc;
    char k[TU_KEY_LEN];
    for (uint64_t i = 0; i < 3000; i++) {
        key_of(k, i, 1);
        rc = bk_growable_add(f, k, sizeof(k));
        if (rc < 0) {
            assert_all_present(f, i);
            bk_growable_free(f);
            return rc;
        }
    }
    assert_all_present(f, 3000);
    bk_growable_free(f);
    return BK_OK;
}

static void test_allocation_failures(void **state)
{
    (void)state;
    assert_true(tu_oom_loop(attempt_grow, NULL) > 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_grows_without_losing_keys),
        cmocka_unit_test(test_rate_is_measured),
        cmocka_unit_test(test_scalar_and_simd_agree),
        cmocka_unit_test(test_rate_bound_refuses_growth),
        cmocka_unit_test(test_max_bytes),
        cmocka_unit_test(test_entries_out_of_bits),
        cmocka_unit_test(test_spill_and_stash),
        cmocka_unit_test(test_batches_and_lengths),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
