/*
 * test_scalable_bound.c - the scalable filter's compound rate and its size.
 *
 * A filter created for 100 keys at p = 1% (BK_SCALABLE_BOUNDED, as BF.ADD
 * makes it) is grown to 1e4, 1e6 and 1e7 distinct keys with expansions 1,
 * 2 and 4; the rate measured on keys never added must stay under the
 * filter's own compound bound 1 - prod(1 - p_i) (which the schedule keeps
 * under p) within 5 binomial standard deviations of the trials (a correct
 * filter fails with probability ~3e-7; fixed seeds make a run
 * reproducible). Expansion 1 is tested at 1e4 keys only: 1e6 would need
 * 10^4 stages of 100 keys (more than BK_SCALABLE_MAX_STAGES, and a rate of
 * 0.9^10^4 for the last one), which no scalable filter can hold usefully.
 * The 1e7 cases take a few seconds in the release build and are skipped
 * under the sanitizers (where they would take minutes); the 1e6 cases run
 * everywhere.
 */
#include "testutil.h"

#define TAG_IN 1u
#define TAG_OUT 2u

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define SANITIZED 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#    define SANITIZED 1
#  endif
#endif
#ifndef SANITIZED
#  define SANITIZED 0
#endif

static void check_bound(uint32_t expansion, uint64_t n, uint64_t trials,
                        uint64_t seed)
{
    const double p = 0.01;
    char key[TU_KEY_LEN];
    bk_scalable *f;
    assert_int_equal(bk_scalable_create(&f, 100, p, expansion, BK_SCALABLE_BOUNDED, seed),
                     BK_OK);
    uint64_t added = 0;
    for (uint64_t i = 0; i < n; i++) {
        tu_key(key, i, TAG_IN);
        int r = bk_scalable_add(f, key, sizeof(key));
        if (r < 0) fail_msg("add %llu: %s", (unsigned long long)i, bk_errname(r));
        added += (uint64_t)r;
    }
    /* no false negatives (a sample of the oldest and the newest keys) */
    uint64_t sample = n < 50000 ? n : 50000;
    for (uint64_t i = 0; i < sample; i++) {
        tu_key(key, i, TAG_IN);
        assert_int_equal(bk_scalable_contains(f, key, sizeof(key)), 1);
        tu_key(key, n - 1 - i, TAG_IN);
        assert_int_equal(bk_scalable_contains(f, key, sizeof(key)), 1);
    }

    bk_scalable_stats st = tu_scalable_stats(f);
    double sum = 0.0;
    for (uint32_t i = 0; i < st.stages; i++) sum += tu_scalable_stage(f, i).target_fpr;
    /* the schedule: the union bound itself is under p */
    assert_true(sum < p);
    assert_true(st.fpr_bound <= sum);
    assert_true(st.fpr_limit == p);

    uint64_t found = 0;
    for (uint64_t i = 0; i < trials; i++) {
        tu_key(key, i, TAG_OUT);
        found += (uint64_t)bk_scalable_contains(f, key, sizeof(key));
    }
    double measured = (double)found / (double)trials;
    double tol = tu_tolerance(st.fpr_bound, trials, 5);
    print_message("expansion %u, %llu keys: %u stages, %.2f bits/key, "
                  "measured %.5f (bound %.5f + tol %.5f), union bound %.5f\n",
                  expansion, (unsigned long long)n, st.stages,
                  8.0 * (double)st.bytes / (double)added, measured,
                  st.fpr_bound, tol, sum);
    assert_true(measured <= st.fpr_bound + tol);
    assert_true(measured <= p + tu_tolerance(p, trials, 5));
    bk_scalable_free(f);
}

static void test_bound_1e4(void **state)
{
    (void)state;
    check_bound(1, 10000, 1000000, 101);
    check_bound(2, 10000, 1000000, 102);
    check_bound(4, 10000, 1000000, 104);
}

static void test_bound_1e6(void **state)
{
    (void)state;
    check_bound(2, 1000000, 1000000, 202);
    check_bound(4, 1000000, 1000000, 204);
}

static void test_bound_1e7(void **state)
{
    (void)state;
    if (SANITIZED) {
        print_message("skipped under the sanitizers (release build only)\n");
        return;
    }
    check_bound(2, 10000000, 1000000, 302);
    check_bound(4, 10000000, 1000000, 304);
}

/* BF.ADD's default filter (100 keys at 1%) is at most RedisBloom's 240
 * bytes, and each later stage's extra cost is what the header says. */
static void test_small_filter_size(void **state)
{
    (void)state;
    bk_scalable *f;
    assert_int_equal(bk_scalable_create(&f, BK_SCALABLE_DEFAULT_CAPACITY,
                                        BK_SCALABLE_DEFAULT_ERROR,
                                        BK_SCALABLE_DEFAULT_EXPANSION,
                                        BK_SCALABLE_BOUNDED, BK_DEFAULT_SEED),
                     BK_OK);
    size_t bytes = bk_scalable_bytes(f);
    size_t estimate = 0;
    assert_int_equal(bk_scalable_estimate_bytes(100, 0.01, BK_SCALABLE_BOUNDED, &estimate),
                     BK_OK);
    print_message("100 keys at 1%%: %zu bytes\n", bytes);
    assert_true(bytes == estimate);
    assert_true(bytes <= 240);
    bk_scalable_stage_stats ss;
    assert_int_equal(bk_scalable_get_stage_stats(f, 0, &ss), BK_OK);
    assert_true(ss.target_fpr == 0.005);
    assert_true(bytes - ss.bytes <= 96); /* the handle and stage 0's record */

    /* later stages: bits + at most 87 bytes, directory < 32 bytes a stage */
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; bk_scalable_stages(f) < 10; i++) {
        tu_key(key, i, TAG_IN);
        assert_true(bk_scalable_add(f, key, sizeof(key)) >= 0);
    }
    size_t stage_bytes = 0, bit_bytes = 0;
    for (uint32_t i = 0; i < 10; i++) {
        ss = tu_scalable_stage(f, i);
        stage_bytes += ss.bytes;
        bit_bytes += (size_t)((ss.bits + 63) / 64 * 8);
    }
    assert_true(stage_bytes - bit_bytes <= 9 * 87);
    assert_true(bk_scalable_bytes(f) - stage_bytes <= 96 + 10 * 32);
    bk_scalable_free(f);

    /* NONSCALING: one stage at the rate asked for, not half of it */
    assert_int_equal(bk_scalable_create(&f, 1000, 0.01, 2,
                                        BK_SCALABLE_BOUNDED | BK_SCALABLE_NONSCALING, 1),
                     BK_OK);
    assert_int_equal(bk_scalable_get_stage_stats(f, 0, &ss), BK_OK);
    assert_true(ss.target_fpr == 0.01);
    /* the classic size for 1% (9.59 bits per key), whole words */
    assert_true(ss.bits == 9600); /* ceil(1000 * 9.585) = 9586 bits */
    bk_scalable_free(f);
}

/* The AVX-512 lookup (where the CPU has it) and the scalar one give the
 * same answer for every key, one at a time and in batches. */
int bk__scalable_simd(int allowed); /* lib/scalable.c, hidden: tests only */

static void test_scalar_and_simd_agree(void **state)
{
    (void)state;
    bk_scalable *f;
    char key[TU_KEY_LEN];
    assert_int_equal(bk_scalable_create(&f, 100, 0.01, 2, BK_SCALABLE_BOUNDED, 9), BK_OK);
    for (uint64_t i = 0; i < 200000; i++) {
        tu_key(key, i, TAG_IN);
        assert_true(bk_scalable_add(f, key, sizeof(key)) >= 0);
    }
    enum { N = 300000, B = 1000 };
    static uint8_t simd[N], scalar[N], batch[B];
    static char keys[B][TU_KEY_LEN];
    const void *ptrs[B];
    size_t lens[B];
    uint64_t hits = 0;
    for (int pass = 0; pass < 2; pass++) {
        bk__scalable_simd(pass == 0);
        uint8_t *out = pass == 0 ? simd : scalar;
        for (uint64_t i = 0; i < N; i++) { /* two thirds absent, one present */
            tu_key(key, i % 3 ? i : i / 3, i % 3 ? TAG_OUT : TAG_IN);
            out[i] = (uint8_t)bk_scalable_contains(f, key, sizeof(key));
        }
        for (uint64_t i = 0; i < N; i += B) {
            for (int j = 0; j < B; j++) {
                uint64_t k = i + (uint64_t)j;
                tu_key(keys[j], k % 3 ? k : k / 3, k % 3 ? TAG_OUT : TAG_IN);
                ptrs[j] = keys[j];
                lens[j] = TU_KEY_LEN;
            }
            assert_true(bk_scalable_contains_batch(f, ptrs, lens, B, batch) >= 0);
            for (int j = 0; j < B; j++) assert_int_equal(batch[j], out[i + (uint64_t)j]);
        }
    }
    bk__scalable_simd(1);
    for (uint64_t i = 0; i < N; i++) {
        assert_int_equal(simd[i], scalar[i]);
        hits += simd[i];
    }
    /* every present key found, and some false positives among the absent */
    assert_true(hits >= N / 3 && hits < N / 3 + N / 50);
    bk_scalable_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_filter_size),
        cmocka_unit_test(test_scalar_and_simd_agree),
        cmocka_unit_test(test_bound_1e4),
        cmocka_unit_test(test_bound_1e6),
        cmocka_unit_test(test_bound_1e7),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
