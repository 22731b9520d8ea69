/*
 * test_growable.c - the growable filter: no key lost through doublings,
 * the list, spills and the stash; its bytes follow the keys and stay under
 * RedisBloom's chain; the rate it reports is the rate measured; the rate
 * bound, the byte cap and allocation failures change nothing; every way of
 * looking up answers alike; damaged images are refused.
 */
#include "testutil.h"

#define XXH_INLINE_ALL
#include <xxhash.h> /* to reseal edited images */

/* lib/growable.c, hidden: tests only */
int bk__growable_lookup_mode(int allowed);
int bk__growable_contains_way(int mode, const bk_growable *f, const void *key, size_t len);
int64_t bk__growable_contains_batch_way(int mode, const bk_growable *f, const void *const *keys,
                                        const size_t *lens, size_t n, uint8_t *results);

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

/* Minis of the filter's level: 3/4 of the keys it holds (lib/growable.c). */
static uint64_t minis_of(const bk_growable *f) { return bk_growable_capacity(f) / 4 * 3; }

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
    size_t est = 1;
    assert_int_equal(bk_growable_estimate_bytes(UINT64_MAX, &est), BK_ESIZE);
    assert_int_equal(bk_growable_estimate_bytes(0, &est), BK_ECAPACITY);
    assert_int_equal(bk_growable_estimate_bytes(100, NULL), BK_EINVAL);
    assert_int_equal(bk_growable_create(&f, 100, 0.01, 1), BK_OK);
    assert_int_equal(bk_growable_capacity(f), 100);
    assert_int_equal(bk_growable_items(f), 0);
    assert_true(bk_growable_fpr_now(f) == 0.0);
    assert_int_equal(bk_growable_add(f, NULL, 3), BK_EINVAL);
    assert_int_equal(bk_growable_add(f, NULL, 0), 1); /* the empty key */
    assert_int_equal(bk_growable_contains(f, "", 0), 1);
    assert_int_equal(bk_growable_contains(NULL, "", 0), 0);
    bk_growable_free(f);
    bk_growable_free(NULL);
}

/*--------------------------------------------------------------------------
 * Sizes
 *--------------------------------------------------------------------------*/

/* RedisBloom 2.6's BF.INFO Size of a key BF.ADD made, after n distinct
 * items (its public sizing: stage i holds 100 x 2^i items at error
 * 0.005 x 0.5^i, floor(items x -ln(error) / ln(2)^2) bits rounded up to
 * 64-bit words, plus 32 bytes for the chain and 64 per stage). It gives
 * the sizes docs/COMMANDS.md quotes (240 B for 1 to 100 items, 2,976 for
 * 1,000, 289,488 for 1e5, 5,804,920 for 1e6). */
static uint64_t redisbloom_size(uint64_t n)
{
    uint64_t total = 0, held = 0, cap = 100, stages = 0;
    double err = 0.005;
    do {
        double bpe = -log(err) / 0.480453013918201;
        uint64_t bits = (uint64_t)((double)cap * bpe);
        total += (bits + 63) / 64 * 8;
        held += cap;
        stages++;
        cap *= 2;
        err *= 0.5;
    } while (held < n);
    return total + 32 + 64 * stages;
}

static void test_redisbloom_sizes_as_quoted(void **state)
{
    (void)state;
    assert_int_equal(redisbloom_size(1), 240);
    assert_int_equal(redisbloom_size(100), 240);
    assert_int_equal(redisbloom_size(1000), 2976);
    assert_int_equal(redisbloom_size(10000), 29584);
    assert_int_equal(redisbloom_size(100000), 289488);
    assert_int_equal(redisbloom_size(1000000), 5804920);
}

/* A small filter is a list that takes what its keys need: 96 bytes for
 * none or one, 112 for ten, 240 for a hundred; created bigger it starts
 * as blocks. bk_growable_estimate_bytes says what create makes. */
static void test_sizes_follow_the_keys(void **state)
{
    (void)state;
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 100, 0.01, 3), BK_OK);
    size_t est;
    assert_int_equal(bk_growable_estimate_bytes(100, &est), BK_OK);
    assert_int_equal(bk_growable_bytes(f), est);
    assert_int_equal(bk_growable_bytes(f), 96);
    add_keys(f, 1);
    assert_int_equal(bk_growable_bytes(f), 96);
    add_keys(f, 10);
    assert_int_equal(bk_growable_bytes(f), 112);
    add_keys(f, 100);
    assert_int_equal(bk_growable_items(f), 100);
    assert_int_equal(bk_growable_bytes(f), 240);
    assert_int_equal(bk_growable_capacity(f), 100);
    assert_int_equal(add_keys(f, 101), 1);
    assert_int_equal(bk_growable_capacity(f), 200);
    assert_int_equal(bk_growable_doublings(f), 1);
    /* a list up to 6,400 keys (level 6), then blocks: 400 lines at 12,800 */
    add_keys(f, 6500);
    assert_int_equal(bk_growable_capacity(f), 12800);
    assert_int_equal(bk_growable_bytes(f), 80 + 64 * 401 + 64);
    assert_all_present(f, 6500);
    bk_growable_free(f);

    assert_int_equal(bk_growable_create(&f, 10000, 0.01, 3), BK_OK);
    assert_int_equal(bk_growable_estimate_bytes(10000, &est), BK_OK);
    assert_int_equal(bk_growable_bytes(f), est);
    assert_int_equal(bk_growable_capacity(f), 12800);
    assert_int_equal(bk_growable_doublings(f), 0);
    bk_growable_free(f);
}

/* Grown key by key from RedisBloom's defaults, the filter never holds
 * more bytes than RedisBloom's chain for the same items, and at 1e5 at
 * most 0.75 of them. */
static void test_smaller_than_redisbloom(void **state)
{
    (void)state;
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 100, 0.01, 0x9E3779B97F4A7C15), BK_OK);
    char k[TU_KEY_LEN];
    uint64_t worst_n = 0;
    double worst = 0;
    for (uint64_t i = 0; i < 100000; i++) {
        key_of(k, i, 1);
        assert_true(bk_growable_add(f, k, sizeof(k)) >= 0);
        uint64_t n = bk_growable_items(f);
        double r = (double)bk_growable_bytes(f) / (double)redisbloom_size(n);
        if (r > worst) worst = r, worst_n = n;
    }
    print_message("largest ratio to RedisBloom %.3f at %llu items; at 1e5 %.3f\n", worst,
                  (unsigned long long)worst_n,
                  (double)bk_growable_bytes(f) / (double)redisbloom_size(bk_growable_items(f)));
    assert_true(worst <= 1.0);
    assert_true((double)bk_growable_bytes(f) <= 0.75 * (double)redisbloom_size(100000));
    bk_growable_free(f);
}

/*--------------------------------------------------------------------------
 * Keys and rates
 *--------------------------------------------------------------------------*/

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
    assert_int_equal(bk_growable_doublings(f), 12);
    assert_true(bk_growable_capacity(f) >= n);
    assert_all_present(f, n);
    assert_int_equal(add_keys(f, n), 0);
    assert_int_equal(bk_growable_items(f), added);
    assert_true(bk_growable_fpr_now(f) <= 0.01);
    bk_growable_free(f);
}

/* The rate measured on absent keys is the one reported: each entry of L
 * bits matches a random key of its mini with probability 2^-L, and the
 * report sums them (a union bound, close to the exact rate when minis
 * hold about one entry). Measured at the end of a level (the most
 * entries per mini, spills and stash included) and in the list.
 * Tolerance: 5 binomial standard deviations, and 2% for the union bound. */
static void check_rate(uint64_t n, uint64_t trials)
{
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 100, 0.01, 9), BK_OK);
    add_keys(f, n);
    double want = bk_growable_fpr_now(f);
    uint64_t hits = 0;
    char k[TU_KEY_LEN];
    for (uint64_t i = 0; i < trials; i++) {
        key_of(k, i, 2);
        hits += (uint64_t)bk_growable_contains(f, k, sizeof(k));
    }
    double got = (double)hits / (double)trials, tol = tu_tolerance(want, trials, 5);
    print_message("%llu keys (%zu stashed): measured %.4f%%, reported %.4f%%\n",
                  (unsigned long long)n, bk_growable_stashed(f), 100 * got, 100 * want);
    if (got > want + tol || got < 0.98 * want - tol)
        fail_msg("measured %.5f%%, reported %.5f%% (tolerance %.5f%%)", 100 * got, 100 * want,
                 100 * tol);
    bk_growable_free(f);
}

static void test_rate_is_measured(void **state)
{
    (void)state;
    check_rate(204000, 1000000); /* level 11 nearly full: 86% of its lanes */
    check_rate(3000, 2000000);   /* a list */
}

/* At a rate that allows two doublings, the third is refused: BK_EFULL,
 * nothing changes, and the rate stays under the one asked. */
static void test_rate_bound_refuses_growth(void **state)
{
    (void)state;
    const double p = 0.0015;
    assert_int_equal(bk_growable_reach(100, p), 2);
    assert_int_equal(bk_growable_reach(100, 0.01), 28);
    assert_int_equal(bk_growable_reach(100, BK_GROWABLE_MIN_FPR / 2), 0);
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
    assert_int_equal(bk_growable_doublings(f), 2);
    assert_int_equal(bk_growable_items(f), added);
    assert_int_equal(bk_growable_items(f), bk_growable_capacity(f));
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

/* At a rate of 50% from 100 keys, 2^20 keys take 14 doublings: the
 * oldest entries run out of bits ("voids" that match their whole mini
 * and are copied into both children) and still nothing is lost. */
static void test_entries_out_of_bits(void **state)
{
    (void)state;
    const uint64_t n = UINT64_C(1) << 20;
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 1, 0.5, 11), BK_OK);
    add_keys(f, n);
    assert_int_equal(bk_growable_doublings(f), 14);
    assert_all_present(f, n);
    assert_true(bk_growable_fpr_now(f) <= 0.5);
    bk_growable_free(f);
}

/* n hashes of mini q (of f's level) with fingerprints 2i + 1. */
static void hashes_of_mini(const bk_growable *f, uint64_t q, uint64_t *h, int n)
{
    for (int i = 0; i < n; i++) h[i] = tu_growable_hash(minis_of(f), q, (unsigned)(2 * i + 1));
}

/* A filter of 12800 keys at 1% (seed 5), and n hashes h of its mini 0. */
static bk_growable *with_mini0(uint64_t *h, int n)
{
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 12800, 0.01, 5), BK_OK);
    hashes_of_mini(f, 0, h, n);
    return f;
}

/* with_mini0's filter holding its n hashes, each new: 37 fill block 0, 15
 * more go to block 1 as pairs, the rest to the stash. */
static bk_growable *with_stash(uint64_t *h, int n)
{
    bk_growable *f = with_mini0(h, n);
    for (int i = 0; i < n; i++) assert_int_equal(bk_growable_add_hash(f, h[i]), 1);
    assert_int_equal(bk_growable_stashed(f), (size_t)(n - 37 - 15));
    return f;
}

/* Hashes chosen to land in mini 0 of a block table: 37 fill block 0, 15
 * more go to block 1 as pairs, the rest to the stash; all are found,
 * before and after the filter doubles, and other fingerprints of that
 * mini are not. */
static void test_spill_and_stash(void **state)
{
    (void)state;
    const int n = 70;
    uint64_t h[70];
    bk_growable *f = with_stash(h, n);
    for (int i = 0; i < n; i++) assert_int_equal(bk_growable_contains_hash(f, h[i]), 1);
    for (int i = 0; i < 200; i++)
        assert_int_equal(bk_growable_contains_hash(f, tu_growable_hash(minis_of(f), 0,
                                                                       (unsigned)(2 * i))),
                         0);
    /* and every way of looking up agrees */
    for (int mode = 0; mode <= 2; mode++) {
        bk__growable_lookup_mode(mode);
        for (int i = 0; i < n; i++) assert_int_equal(bk_growable_contains_hash(f, h[i]), 1);
    }
    bk__growable_lookup_mode(2);
    uint32_t before = bk_growable_doublings(f);
    add_keys(f, 20000);
    assert_true(bk_growable_doublings(f) > before);
    for (int i = 0; i < n; i++) assert_int_equal(bk_growable_contains_hash(f, h[i]), 1);
    assert_all_present(f, 20000);
    bk_growable_free(f);
}

/* bk_growable_add_nogrow, with bk_growable_add for what it refuses (as
 * bloomkit-server runs them), answers every key as bk_growable_add alone
 * and leaves the same filter, byte for byte, through many doublings. */
static void test_add_nogrow_as_add(void **state)
{
    (void)state;
    bk_growable *a, *b;
    assert_int_equal(bk_growable_create(&a, 100, 0.01, 8), BK_OK);
    assert_int_equal(bk_growable_create(&b, 100, 0.01, 8), BK_OK);
    char k[TU_KEY_LEN];
    uint64_t refused = 0;
    for (uint64_t i = 0; i < 60000; i++) {
        key_of(k, i % 50000, 1); /* the last 10000 again: answered 0 */
        int want = bk_growable_add(a, k, sizeof(k));
        int got = bk_growable_add_nogrow(b, k, sizeof(k));
        if (got == BK_EFULL) {
            refused++;
            assert_int_equal(bk_growable_items(b), bk_growable_items(a) - (uint64_t)want);
            got = bk_growable_add(b, k, sizeof(k));
        }
        assert_int_equal(got, want);
    }
    print_message("%u doublings, %llu keys refused by add_nogrow\n", bk_growable_doublings(a),
                  (unsigned long long)refused);
    assert_true(bk_growable_doublings(a) >= 8);
    assert_true(refused >= 3200); /* a list takes no add_nogrow */
    assert_int_equal(bk_growable_doublings(b), bk_growable_doublings(a));
    assert_int_equal(bk_growable_items(b), bk_growable_items(a));
    tu_same_image(bk_growable_as_filter(a), bk_growable_as_filter(b));
    assert_int_equal(bk_growable_add_nogrow(NULL, k, sizeof(k)), BK_EINVAL);
    assert_int_equal(bk_growable_add_nogrow(b, NULL, 1), BK_EINVAL);
    assert_int_equal(bk_growable_add_nogrow_hash(NULL, 1), BK_EINVAL);
    bk_growable_free(a);
    bk_growable_free(b);
}

/* f holds h[0 .. 37), all in one block: add_nogrow answers 0 for a key
 * it holds, and refuses h[37] (only a spill could take it) changing
 * nothing. */
static void refuses_full_block(bk_growable *f, const uint64_t *h)
{
    assert_int_equal(bk_growable_add_nogrow_hash(f, h[0]), 0);
    assert_int_equal(bk_growable_items(f), 37);
    double rate = bk_growable_fpr_now(f);
    assert_int_equal(bk_growable_add_nogrow_hash(f, h[37]), BK_EFULL);
    assert_int_equal(bk_growable_items(f), 37);
    assert_true(bk_growable_fpr_now(f) == rate);
    assert_int_equal(bk_growable_contains_hash(f, h[37]), 0);
}

/* add_nogrow fills a block, then refuses the entry only a spill could
 * take, changing nothing; bk_growable_add spills it, after which
 * add_nogrow finds it. A list refuses every new key. */
static void test_add_nogrow_refuses_a_full_block(void **state)
{
    (void)state;
    uint64_t h[38];
    bk_growable *f = with_mini0(h, 38);
    for (int i = 0; i < 37; i++) assert_int_equal(bk_growable_add_nogrow_hash(f, h[i]), 1);
    refuses_full_block(f, h);
    assert_int_equal(bk_growable_add_hash(f, h[37]), 1);
    assert_int_equal(bk_growable_add_nogrow_hash(f, h[37]), 0);
    for (int i = 0; i < 38; i++) assert_int_equal(bk_growable_contains_hash(f, h[i]), 1);
    bk_growable_free(f);

    assert_int_equal(bk_growable_create(&f, 100, 0.01, 5), BK_OK);
    assert_int_equal(bk_growable_add_nogrow_hash(f, 12345), BK_EFULL);
    assert_int_equal(bk_growable_add_hash(f, 12345), 1);
    assert_int_equal(bk_growable_add_nogrow_hash(f, 12345), 0);
    bk_growable_free(f);
}

/* Batches answer as single calls, in every way of looking up; keys of
 * every length, the long ones by the out-of-line hash. */
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
    for (uint64_t cap = 100; cap <= 12800; cap *= 128) { /* a list, then blocks */
        bk_growable *f;
        assert_int_equal(bk_growable_create(&f, cap, 0.01, 5), BK_OK);
        int64_t n_added = bk_growable_add_batch(f, keys, lens, N / 2, added);
        assert_true(n_added >= N / 2 - 15 && n_added <= N / 2); /* collisions at <= 1% */
        assert_int_equal(bk_growable_items(f), (uint64_t)n_added);
        for (int mode = 0; mode <= 2; mode++) {
            int64_t hits = bk__growable_contains_batch_way(mode, f, keys, lens, N, found);
            int64_t single = 0;
            for (int i = 0; i < N; i++) {
                int r = bk__growable_contains_way(mode, f, keys[i], lens[i]);
                assert_int_equal(found[i], r);
                assert_int_equal(bk_growable_contains(f, keys[i], lens[i]), r);
                if (i < N / 2) assert_int_equal(r, 1);
                single += r;
            }
            assert_int_equal(hits, single);
            assert_int_equal(bk__growable_contains_batch_way(mode, f, NULL, NULL, 1, NULL),
                             BK_EINVAL);
            assert_int_equal(bk__growable_contains_way(mode, NULL, "x", 1), 0);
        }
        assert_int_equal(bk_growable_contains_batch(f, NULL, NULL, 1, NULL), BK_EINVAL);
        assert_int_equal(bk_growable_hash_key(f, NULL, 0), bk_growable_hash_key(f, "", 0));
        bk_growable_free(f);
    }
}

/* Every way of looking up answers alike on a filter at the end of a level
 * (long runs, runs past lane 31, pairs, the stash), present and absent
 * keys alike. */
static void test_lookup_ways_agree(void **state)
{
    (void)state;
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 100, 0.05, 13), BK_OK);
    add_keys(f, 102000); /* level 10 nearly full */
    assert_true(bk_growable_stashed(f) > 0);
    char k[TU_KEY_LEN];
    uint64_t hits = 0;
    for (uint64_t i = 0; i < 300000; i++) {
        key_of(k, i, i < 100000 ? 1 : 2);
        int r0 = bk__growable_contains_way(0, f, k, sizeof(k));
        int r1 = bk__growable_contains_way(1, f, k, sizeof(k));
        int r2 = bk__growable_contains_way(2, f, k, sizeof(k));
        if (r0 != r1 || r0 != r2)
            fail_msg("key %llu: ways answer %d %d %d", (unsigned long long)i, r0, r1, r2);
        if (i >= 100000) hits += (uint64_t)r0;
    }
    assert_true(hits > 0); /* some false positives, so the match path ran */
    bk_growable_free(f);
}

/* Every allocation of creating and growing a filter fails in turn: each
 * failure is BK_ENOMEM, leaks nothing, and the keys added before it are
 * all still found. Through the list, into blocks, into the stash. */
static int attempt_grow(void *ctx)
{
    (void)ctx;
    bk_growable *f;
    int rc = bk_growable_create(&f, 10, 0.01, 3);
    if (rc != BK_OK) return rc;
    char k[TU_KEY_LEN];
    for (uint64_t i = 0; i < 8000; i++) {
        key_of(k, i, 1);
        rc = bk_growable_add(f, k, sizeof(k));
        if (rc < 0) {
            assert_all_present(f, i);
            bk_growable_free(f);
            return rc;
        }
    }
    uint64_t h[70];
    hashes_of_mini(f, 5, h, 70);
    for (int i = 0; i < 70; i++) {
        rc = bk_growable_add_hash(f, h[i]);
        if (rc < 0) {
            for (int j = 0; j < i; j++) assert_int_equal(bk_growable_contains_hash(f, h[j]), 1);
            assert_all_present(f, 8000);
            bk_growable_free(f);
            return rc;
        }
    }
    assert_all_present(f, 8000);
    bk_growable_free(f);
    return BK_OK;
}

static void test_allocation_failures(void **state)
{
    (void)state;
    assert_true(tu_oom_loop(attempt_grow, NULL) > 5);
}

/*--------------------------------------------------------------------------
 * The generic handle and the file format
 *--------------------------------------------------------------------------*/

static bk_filter *make_generic(uint64_t capacity, uint64_t keys)
{
    bk_filter_config cfg = tu_config(BK_FAMILY_GROWABLE, capacity, 0.01);
    bk_filter *f;
    assert_int_equal(bk_filter_create(&f, &cfg), BK_OK);
    char k[TU_KEY_LEN];
    for (uint64_t i = 0; i < keys; i++) {
        key_of(k, i, 1);
        assert_true(bk_filter_add(f, k, sizeof(k)) >= 0);
    }
    return f;
}

static uint64_t get64le(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void put64le(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Both checksums again after an edit (header fields: docs/FORMAT.md). */
static void reseal(unsigned char *buf)
{
    uint64_t off = get64le(buf + 96), len = get64le(buf + 104);
    put64le(buf + 112, XXH3_64bits_withSeed(buf + off, (size_t)len, 0));
    uint32_t nparts = (uint32_t)(buf[16] | buf[17] << 8);
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, buf, 120);
    XXH3_64bits_update(&st, buf + 128, 64 * (size_t)nparts);
    put64le(buf + 120, XXH3_64bits_digest(&st));
}

/* Through bk_filter: info, clone, clear, batches, memory, and a saved
 * filter that loads with the same answers and goes on growing; a list and
 * a block table alike. */
static void test_generic_handle(void **state)
{
    (void)state;
    const uint64_t sizes[2] = {4000, 20000};
    for (int s = 0; s < 2; s++) {
        const uint64_t n = sizes[s];
        bk_filter *f = make_generic(100, n), *g, *c;
        assert_int_equal(bk_filter_family(f), BK_FAMILY_GROWABLE);
        assert_string_equal(bk_family_name(BK_FAMILY_GROWABLE), "growable");
        assert_int_equal(bk_family_from_name("growable"), BK_FAMILY_GROWABLE);
        bk_growable *gf = bk_filter_as_growable(f);
        assert_non_null(gf);
        assert_ptr_equal(bk_growable_as_filter(gf), f);
        bk_filter_info info, summary;
        assert_int_equal(bk_filter_get_info(f, &info), BK_OK);
        assert_int_equal(bk_filter_get_summary(f, &summary), BK_OK);
        assert_int_equal(info.family, BK_FAMILY_GROWABLE);
        assert_int_equal(info.items, bk_growable_items(gf));
        assert_int_equal(info.capacity, bk_growable_capacity(gf));
        assert_int_equal(info.can_remove, 0);
        assert_int_equal(info.lockfree_add, 0);
        assert_true(info.fpr_now == bk_growable_fpr_now(gf));
        assert_true(info.fill > 0.3 && info.fill <= 0.9);
        assert_true(summary.fill > 0.3 && summary.fill <= 0.9);
        assert_int_equal(info.bytes, bk_growable_bytes(gf));
        /* the allocator's view: what was asked, plus the alignment slack */
        size_t asked = bk_filter_memory_usage(f, NULL, NULL);
        assert_true(asked >= info.bytes && asked <= info.bytes + 16);

        size_t len;
        unsigned char *buf = tu_serialize(f, &len);
        assert_int_equal(buf[20], 2); /* hash algorithm: XXH3-64 */
        assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_OK);
        bk_growable *gg = bk_filter_as_growable(g);
        assert_int_equal(bk_growable_items(gg), bk_growable_items(gf));
        assert_int_equal(bk_growable_doublings(gg), bk_growable_doublings(gf));
        assert_int_equal(bk_growable_bytes(gg), bk_growable_bytes(gf));
        assert_true(bk_growable_fpr_now(gg) == bk_growable_fpr_now(gf));
        char k[TU_KEY_LEN];
        for (uint64_t i = 0; i < 2 * n; i++) {
            key_of(k, i, i < n ? 1 : 2);
            assert_int_equal(bk_filter_contains(g, k, sizeof(k)), bk_filter_contains(f, k, sizeof(k)));
        }
        for (uint64_t i = n; i < 4 * n; i++) { /* the loaded copy grows on */
            key_of(k, i, 1);
            assert_true(bk_filter_add(g, k, sizeof(k)) >= 0);
        }
        assert_true(bk_growable_doublings(gg) > bk_growable_doublings(gf));
        assert_all_present(gg, 4 * n);
        assert_int_equal(bk_filter_remove(g, k, sizeof(k)), BK_ENOTSUP);

        assert_int_equal(bk_filter_clone(&c, f), BK_OK);
        assert_all_present(bk_filter_as_growable(c), n);
        assert_int_equal(bk_growable_bytes(bk_filter_as_growable(c)), bk_growable_bytes(gf));
        assert_int_equal(bk_filter_clear(c), BK_OK);
        key_of(k, 0, 1);
        assert_int_equal(bk_filter_contains(c, k, sizeof(k)), 0);
        assert_int_equal(bk_growable_items(bk_filter_as_growable(c)), 0);
        assert_true(bk_growable_fpr_now(bk_filter_as_growable(c)) == 0.0);
        add_keys(bk_filter_as_growable(c), n);
        assert_all_present(bk_filter_as_growable(c), n);
        free(buf);
        bk_filter_free(c);
        bk_filter_free(g);
        bk_filter_free(f);
    }
}

/* Union: lists and tables of different sizes, keys in one or both, the
 * rate bound, and what is refused. */
static void test_merge(void **state)
{
    (void)state;
    bk_growable *a, *b, *c, *tight;
    char k[TU_KEY_LEN];
    assert_int_equal(bk_growable_create(&a, 100, 0.01, 9), BK_OK);
    assert_int_equal(bk_growable_create(&b, 100, 0.01, 9), BK_OK);
    /* a: keys 0..29999 of tag 1; b: 20000..20999 of tag 1 (in both) and
     * 0..99 of tag 3 (new), far smaller (a list) */
    uint64_t na = add_keys(a, 30000);
    for (uint64_t i = 20000; i < 21000; i++) {
        key_of(k, i, 1);
        assert_true(bk_growable_add(b, k, sizeof(k)) >= 0);
    }
    for (uint64_t i = 0; i < 100; i++) {
        key_of(k, i, 3);
        assert_true(bk_growable_add(b, k, sizeof(k)) >= 0);
    }
    assert_true(bk_growable_doublings(a) > bk_growable_doublings(b));
    /* small into large, and large into small: the same keys answer */
    bk_filter *fa = bk_growable_as_filter(a), *fb = bk_growable_as_filter(b), *fc;
    assert_int_equal(bk_filter_clone(&fc, fb), BK_OK);
    c = bk_filter_as_growable(fc);
    assert_int_equal(bk_filter_merge(fa, fb), BK_OK);
    assert_int_equal(bk_filter_merge(fc, bk_growable_as_filter(a)), BK_OK);
    assert_all_present(a, 30000);
    assert_all_present(c, 30000);
    for (uint64_t i = 0; i < 100; i++) {
        key_of(k, i, 3);
        assert_true(bk_growable_contains(a, k, sizeof(k)));
        assert_true(bk_growable_contains(c, k, sizeof(k)));
    }
    /* keys in both count once: a's items grow by about b's new keys */
    assert_true(bk_growable_items(a) >= na + 95 && bk_growable_items(a) <= na + 110);
    assert_int_equal(bk_growable_doublings(c), bk_growable_doublings(a));
    /* the rate stays what it says: measured on absent keys, 5 sigma */
    uint64_t fp = 0, trials = 200000;
    for (uint64_t i = 0; i < trials; i++) {
        key_of(k, i, 2);
        fp += (uint64_t)bk_growable_contains(a, k, sizeof(k));
    }
    double p = bk_growable_fpr_now(a), sd = sqrt(p * (1 - p) / (double)trials);
    assert_true(fabs((double)fp / (double)trials - p) <= 5 * sd + 0.02 * p);
    assert_true(p <= 0.01);
    /* two lists make a list */
    bk_growable *l1, *l2;
    assert_int_equal(bk_growable_create(&l1, 100, 0.01, 9), BK_OK);
    assert_int_equal(bk_growable_create(&l2, 100, 0.01, 9), BK_OK);
    add_keys(l1, 50);
    for (uint64_t i = 0; i < 60; i++) {
        key_of(k, i, 4);
        assert_true(bk_growable_add(l2, k, sizeof(k)) >= 0);
    }
    assert_int_equal(bk_filter_merge(bk_growable_as_filter(l1), bk_growable_as_filter(l2)), BK_OK);
    assert_int_equal(bk_growable_capacity(l1), 200); /* 110 keys: doubled */
    assert_all_present(l1, 50);
    for (uint64_t i = 0; i < 60; i++) {
        key_of(k, i, 4);
        assert_true(bk_growable_contains(l1, k, sizeof(k)));
    }
    bk_growable_free(l1);
    bk_growable_free(l2);

    /* refused, nothing changed: AND, other seeds, a rate the union passes */
    size_t bytes = bk_growable_bytes(a);
    assert_int_equal(bk_filter_intersect(fa, fb), BK_ENOTSUP);
    bk_growable *other;
    assert_int_equal(bk_growable_create(&other, 100, 0.01, 10), BK_OK);
    assert_int_equal(bk_filter_merge(fa, bk_growable_as_filter(other)), BK_EINCOMPAT);
    char why[128];
    assert_int_equal(bk_filter_incompatibility(fa, bk_growable_as_filter(other), why,
                                               sizeof(why)), 1);
    assert_string_equal(why, "seeds differ: 9 vs 10");
    assert_int_equal(bk_filter_incompatibility(fa, fb, why, sizeof(why)), 0);
    assert_int_equal(bk_growable_create(&tight, 100, 0.0015, 9), BK_OK);
    uint64_t nt = add_keys(tight, 300); /* 0.0015: two doublings at most */
    uint32_t dt = bk_growable_doublings(tight);
    assert_int_equal(bk_filter_merge(bk_growable_as_filter(tight), fa), BK_EFULL);
    assert_int_equal(bk_growable_items(tight), nt);
    assert_int_equal(bk_growable_doublings(tight), dt);
    assert_all_present(tight, 300);
    assert_int_equal(bk_growable_bytes(a), bytes);
    bk_growable_free(tight);
    bk_growable_free(other);
    bk_filter_free(fc);
    bk_growable_free(b);
    bk_growable_free(a);
}

/* The payload's offset and part 0's length in an image. */
static uint64_t payload_of(const unsigned char *buf) { return get64le(buf + 96); }

static int loads(const unsigned char *buf, size_t len)
{
    bk_filter *g = NULL;
    int rc = bk_filter_deserialize(&g, buf, len);
    bk_filter_free(g);
    return rc;
}

/* Edited images, resealed so that only the family's checks can catch
 * them, are refused: of a block table, a count past the lanes, a stray
 * entry in an unused lane, a pair without a spilled block before it, the
 * writer's bit; of a list, a run count that does not add up, an entry out
 * of order; of both, a weight that does not add up, the wrong hash
 * algorithm, a rate under the minimum, a level the capacity cannot have. */
static void test_corrupt_images(void **state)
{
    (void)state;
    bk_filter *fb = make_generic(12800, 8000), *fl = make_generic(100, 2000);
    size_t len, llen;
    unsigned char *clean = tu_serialize(fb, &len), *buf = malloc(len);
    unsigned char *lclean = tu_serialize(fl, &llen), *lbuf = malloc(llen);
    uint64_t off = payload_of(clean), loff = payload_of(lclean);
    memcpy(buf, clean, len);
    reseal(buf);
    assert_int_equal(loads(buf, len), BK_OK); /* reseal is faithful */

    /* block 0's word 0: every unary bit set (61 ones: no mini ends) */
    memcpy(buf, clean, len);
    put64le(buf + off, (UINT64_C(1) << 61) - 1);
    reseal(buf);
    assert_int_equal(loads(buf, len), BK_ECORRUPT);
    /* an entry in block 0's last lane (bits 496-507), which no count covers */
    memcpy(buf, clean, len);
    buf[off + 62] |= 0x01;
    reseal(buf);
    assert_int_equal(loads(buf, len), BK_ECORRUPT);
    /* a pair in block 1 (count in bits 508-511) that block 0 never spilled */
    memcpy(buf, clean, len);
    assert_true((buf[off + 7] & 0x40) == 0); /* block 0 not SPILLED */
    buf[off + 64 + 63] |= 0x10;
    reseal(buf);
    assert_int_equal(loads(buf, len), BK_ECORRUPT);
    /* the writer's bit left in an image */
    memcpy(buf, clean, len);
    buf[off + 7] |= 0x80;
    reseal(buf);
    assert_int_equal(loads(buf, len), BK_ECORRUPT);
    /* W one off (header param[1]) */
    memcpy(buf, clean, len);
    put64le(buf + 64, get64le(buf + 64) + 1);
    reseal(buf);
    assert_int_equal(loads(buf, len), BK_ECORRUPT);
    /* XXH3-128 declared */
    memcpy(buf, clean, len);
    buf[20] = 1;
    reseal(buf);
    assert_int_equal(loads(buf, len), BK_ECORRUPT);
    /* a rate under the minimum */
    memcpy(buf, clean, len);
    {
        double p = BK_GROWABLE_MIN_FPR / 2;
        uint64_t bits;
        memcpy(&bits, &p, 8);
        put64le(buf + 40, bits);
    }
    reseal(buf);
    assert_int_equal(loads(buf, len), BK_ECORRUPT);
    /* capacity 1e6 asked: level 7 is below where it starts */
    memcpy(buf, clean, len);
    put64le(buf + 32, 1000000);
    reseal(buf);
    assert_int_equal(loads(buf, len), BK_ECORRUPT);
    /* another shape */
    memcpy(buf, clean, len);
    put64le(buf + 72, 7);
    reseal(buf);
    assert_int_equal(loads(buf, len), BK_ECORRUPT);

    /* the list: the first minis' runs rewritten as one run of them all */
    memcpy(lbuf, lclean, llen);
    reseal(lbuf);
    assert_int_equal(loads(lbuf, llen), BK_OK);
    memcpy(lbuf, lclean, llen);
    put64le(lbuf + loff, ~UINT64_C(0));
    reseal(lbuf);
    assert_int_equal(loads(lbuf, llen), BK_ECORRUPT);
    /* two entries of one run swapped: out of order (find a run of two) */
    {
        bk_growable *g = bk_filter_as_growable(fl);
        uint64_t minis = minis_of(g), n = bk_growable_items(g), bit = 0, idx = 0;
        int done = 0;
        for (uint64_t q = 0; q < minis && !done; q++, bit++) {
            uint64_t run = 0;
            while ((lclean[loff + (bit + run) / 8] >> ((bit + run) % 8)) & 1) run++;
            if (run >= 2) {
                /* lanes idx and idx + 1, 12 bits each, after minis + n bits */
                uint64_t base = (loff * 8) + minis + n + 12 * idx;
                uint64_t a = 0, b = 0;
                for (int i = 0; i < 12; i++) {
                    a |= (uint64_t)((lclean[(base + i) / 8] >> ((base + i) % 8)) & 1) << i;
                    b |= (uint64_t)((lclean[(base + 12 + i) / 8] >> ((base + 12 + i) % 8)) & 1) << i;
                }
                if (a != b) {
                    memcpy(lbuf, lclean, llen);
                    for (int i = 0; i < 12; i++) {
                        uint64_t p1 = base + i, p2 = base + 12 + i;
                        lbuf[p1 / 8] = (unsigned char)((lbuf[p1 / 8] & ~(1u << (p1 % 8))) |
                                                       (((b >> i) & 1) << (p1 % 8)));
                        lbuf[p2 / 8] = (unsigned char)((lbuf[p2 / 8] & ~(1u << (p2 % 8))) |
                                                       (((a >> i) & 1) << (p2 % 8)));
                    }
                    reseal(lbuf);
                    assert_int_equal(loads(lbuf, llen), BK_ECORRUPT);
                    done = 1;
                }
            }
            bit += run;
            idx += run;
        }
        assert_true(done);
    }
    free(lbuf);
    free(lclean);
    free(buf);
    free(clean);
    bk_filter_free(fl);
    bk_filter_free(fb);
}

/* A filter with a stash saves it as a second part (its hash table as it
 * is) and loads it back; a stash word of a block not flagged for it, of a
 * mini out of range, with no entry, or not reachable from its home is
 * refused. */
static void test_stash_in_the_file(void **state)
{
    (void)state;
    uint64_t h[70];
    bk_growable *f = with_stash(h, 70); /* 18 stashed */
    size_t len;
    unsigned char *clean = tu_serialize(bk_growable_as_filter(f), &len), *buf = malloc(len);
    assert_int_equal(clean[16], 2); /* two parts */
    bk_filter *g;
    assert_int_equal(bk_filter_deserialize(&g, clean, len), BK_OK);
    for (int i = 0; i < 70; i++)
        assert_int_equal(bk_growable_contains_hash(bk_filter_as_growable(g), h[i]), 1);
    bk_filter_free(g);
    uint64_t stash = payload_of(clean) + get64le(clean + 128 + 64); /* part 1's offset */
    uint64_t slots = get64le(clean + 128 + 64 + 16);
    /* the first occupied slot, and one empty slot */
    uint64_t used = slots, empty = slots;
    for (uint64_t i = 0; i < slots; i++) {
        uint64_t w = get64le(clean + stash + 8 * i);
        if (w != 0 && used == slots) used = i;
        if (w == 0 && empty == slots) empty = i;
    }
    assert_true(used < slots && empty < slots);
    uint64_t word = get64le(clean + stash + 8 * used);
    const uint64_t bad[3] = {
        word + (UINT64_C(1) << 16 << 6),                 /* mini of block 2: not flagged */
        (UINT64_C(9600) << 16) | (word & 0xffff),        /* mini 9600: past the last */
        word & ~UINT64_C(0xffff),                        /* no entry */
    };
    for (int i = 0; i < 3; i++) {
        memcpy(buf, clean, len);
        put64le(buf + stash + 8 * used, bad[i]);
        reseal(buf);
        if (loads(buf, len) != BK_ECORRUPT) fail_msg("bad stash word %d loaded", i);
    }
    /* moved to an empty slot before which its probe stops */
    memcpy(buf, clean, len);
    put64le(buf + stash + 8 * used, 0);
    put64le(buf + stash + 8 * empty, word);
    reseal(buf);
    int rc = loads(buf, len);
    /* legal only if the empty slot is on the word's probe path anyway */
    if (rc != BK_OK) assert_int_equal(rc, BK_ECORRUPT);
    free(buf);
    free(clean);
    bk_growable_free(f);
}

static void test_generic_allocation_failures(void **state)
{
    (void)state;
    bk_filter *f = make_generic(100, 3000);
    assert_true(bk_filter_add(f, "x", 1) >= 0);
    tu_oom_clone_and_load(f);
    bk_filter_free(f);
    f = make_generic(12800, 9000);
    assert_true(bk_filter_add(f, "x", 1) >= 0);
    tu_oom_clone_and_load(f);
    bk_filter_free(f);
}

/*--------------------------------------------------------------------------
 * Multisets (CF keys)
 *--------------------------------------------------------------------------*/

/* Against an exact multiset of key ids: inserts (with copies), removes of
 * present keys, from a list through doublings into blocks with spills and
 * a stash; a key with copies left is always found and counts at least
 * them; a removal of a present key succeeds; the item count is exact;
 * the rate of absent keys stays what the filter reports. The same after a
 * save and a load. */
static void test_multiset_model(void **state)
{
    (void)state;
    const size_t universe = 1000 + 300000 / 5;
    tu_multiset m;
    tu_multiset_init(&m, universe, 400000);
    bk_growable *f;
    assert_int_equal(bk_growable_create_multiset(&f, 1024, 0.01, 21), BK_OK);
    assert_true(bk_growable_is_multiset(f));
    assert_int_equal(bk_growable_capacity(f), 1600);
    uint64_t rng = 99;
    char k[TU_KEY_LEN];
    for (int step = 0; step < 300000; step++) {
        uint64_t r = tu_next(&rng);
        if (m.size > 0 && r % 4 == 0) {
            uint64_t id = tu_multiset_take(&m, (size_t)(tu_next(&rng) % m.size));
            key_of(k, id, 1);
            assert_int_equal(bk_growable_remove(f, k, sizeof(k)), 1);
        } else {
            /* ids drawn from a range that widens: many copies early on */
            uint64_t id = tu_next(&rng) % (1000 + (uint64_t)step / 5);
            tu_multiset_add(&m, id);
            key_of(k, id, 1);
            assert_int_equal(bk_growable_insert(f, k, sizeof(k)), BK_OK);
        }
        if (step % 50000 == 49999 || step == 2000) {
            assert_int_equal(bk_growable_items(f), m.size);
            for (uint64_t id = 0; id < universe; id++) {
                if (m.count[id] == 0) continue;
                key_of(k, id, 1);
                int64_t c = bk_growable_count(f, k, sizeof(k));
                if (c < m.count[id])
                    fail_msg("step %d: key %llu counts %lld of its %u copies", step,
                             (unsigned long long)id, (long long)c, m.count[id]);
                assert_int_equal(bk_growable_contains(f, k, sizeof(k)), 1);
            }
        }
    }
    print_message("%llu copies, %u doublings, %zu stashed, rate %.4f%%\n",
                  (unsigned long long)m.size, bk_growable_doublings(f), bk_growable_stashed(f),
                  100 * bk_growable_fpr_now(f));
    assert_true(bk_growable_doublings(f) >= 7);
    /* absent keys: at most the rate reported (5 sigma); copies of one key
     * are one entry value twice, which the report counts twice */
    uint64_t hits = 0, trials = 400000;
    for (uint64_t i = 0; i < trials; i++) {
        key_of(k, i, 2);
        hits += (uint64_t)bk_growable_contains(f, k, sizeof(k));
    }
    double want = bk_growable_fpr_now(f), got = (double)hits / (double)trials;
    print_message("absent keys: measured %.4f%%, reported %.4f%%\n", 100 * got, 100 * want);
    assert_true(got <= want + tu_tolerance(want, trials, 5));
    assert_true(hits > 0 && want <= 0.01);
    /* saved and loaded: the same counts */
    size_t len;
    unsigned char *buf = tu_serialize(bk_growable_as_filter(f), &len);
    bk_filter *g;
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_OK);
    bk_growable *gg = bk_filter_as_growable(g);
    assert_true(bk_growable_is_multiset(gg));
    for (uint64_t id = 0; id < universe; id += 7) {
        key_of(k, id, 1);
        assert_int_equal(bk_growable_count(gg, k, sizeof(k)), bk_growable_count(f, k, sizeof(k)));
    }
    /* every copy removed: the filter is empty again */
    while (m.size > 0) {
        uint64_t id = tu_multiset_take(&m, m.size - 1);
        key_of(k, id, 1);
        assert_int_equal(bk_growable_remove(gg, k, sizeof(k)), 1);
    }
    assert_int_equal(bk_growable_items(gg), 0);
    assert_true(bk_growable_fpr_now(gg) == 0.0);
    free(buf);
    bk_filter_free(g);
    tu_multiset_free(&m);
    bk_growable_free(f);
}

/* Through the generic handle a multiset adds copies, counts and removes;
 * what a set refuses; what is not offered. */
static void test_multiset_generic(void **state)
{
    (void)state;
    bk_growable *f, *s;
    assert_int_equal(bk_growable_create_multiset(&f, 100, 0.01, 4), BK_OK);
    assert_int_equal(bk_growable_create(&s, 100, 0.01, 4), BK_OK);
    bk_filter *ff = bk_growable_as_filter(f), *fs = bk_growable_as_filter(s);
    assert_ptr_equal(bk_filter_as_growable(ff), f);
    assert_int_equal(bk_filter_add(ff, "a", 1), 1);
    assert_int_equal(bk_filter_add(ff, "a", 1), 1);
    assert_int_equal(bk_filter_count(ff, "a", 1), 2);
    assert_int_equal(bk_growable_add(f, "a", 1), 0); /* add: only when absent */
    assert_int_equal(bk_filter_remove(ff, "a", 1), BK_OK);
    assert_int_equal(bk_filter_count(ff, "a", 1), 1);
    assert_int_equal(bk_filter_remove(ff, "b", 1), BK_ENOTFOUND);
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(ff, &info), BK_OK);
    assert_int_equal(info.can_remove, 1);
    assert_int_equal(info.items, 1);
    assert_int_equal(bk_filter_get_info(fs, &info), BK_OK);
    assert_int_equal(info.can_remove, 0);
    assert_int_equal(bk_growable_insert(s, "a", 1), BK_ENOTSUP);
    assert_int_equal(bk_growable_remove(s, "a", 1), BK_ENOTSUP);
    assert_int_equal(bk_filter_remove(fs, "a", 1), BK_ENOTSUP);
    assert_int_equal(bk_filter_merge(ff, ff), BK_ENOTSUP);
    char why[96];
    assert_int_equal(bk_filter_incompatibility(ff, fs, why, sizeof(why)), 1);
    assert_int_equal(bk_filter_merge(fs, ff), BK_EINCOMPAT);
    bk_filter *c;
    assert_int_equal(bk_filter_clone(&c, ff), BK_OK);
    assert_int_equal(bk_filter_count(c, "a", 1), 1);
    assert_true(bk_growable_is_multiset(bk_filter_as_growable(c)));
    bk_filter_free(c);
    assert_int_equal(bk_growable_insert(NULL, "a", 1), BK_EINVAL);
    assert_int_equal(bk_growable_count(f, NULL, 1), BK_EINVAL);
    assert_int_equal(bk_growable_remove(f, NULL, 1), BK_EINVAL);
    assert_int_equal(bk_growable_is_multiset(NULL), 0);
    bk_growable_free(f);
    bk_growable_free(s);
}

/* The prefetching batch of nogrow adds answers as the adds one by one,
 * takes nothing from a list, and stops where the exclusive path is needed. */
static void test_add_nogrow_batch(void **state)
{
    (void)state;
    bk_growable *a, *b, *small;
    assert_int_equal(bk_growable_create(&a, 100000, 0.01, 5), BK_OK);
    assert_int_equal(bk_growable_create(&b, 100000, 0.01, 5), BK_OK);
    enum { N = 30000 };
    static char text[N][16];
    static const void *keys[N];
    static size_t lens[N];
    static int res[N];
    for (int i = 0; i < N; i++) {
        lens[i] = (size_t)snprintf(text[i], sizeof text[i], "gb-%d", i % 7 == 6 ? i / 3 : i);
        keys[i] = text[i];
    }
    int64_t done = bk_growable_add_nogrow_batch(b, keys, lens, N, res);
    assert_true(done > 0);
    for (int64_t i = 0; i < done; i++)
        assert_int_equal(res[i], bk_growable_add_nogrow(a, keys[i], lens[i]));
    if (done < N) assert_true(bk_growable_add_nogrow(a, keys[done], lens[done]) < 0);
    assert_int_equal(bk_growable_items(a), bk_growable_items(b));
    assert_int_equal(bk_growable_create(&small, 100, 0.01, 5), BK_OK);
    assert_int_equal(bk_growable_add_nogrow_batch(small, keys, lens, 10, res), 0);   /* a list */
    assert_int_equal(bk_growable_add_nogrow_batch(a, keys, lens, 1, NULL), BK_EINVAL);
    bk_growable_free(a);
    bk_growable_free(b);
    bk_growable_free(small);
}

/* The single-writer mode (bk_growable_set_single_writer): the same keys
 * through bk_growable_add_nogrow, with bk_growable_add for what it refuses
 * (as bloomkit-server runs them), answer alike in both modes, count alike
 * and leave the same filter, byte for byte, through many doublings. */
static void test_single_writer_as_concurrent(void **state)
{
    (void)state;
    bk_growable *a, *b;
    assert_int_equal(bk_growable_create(&a, 100, 0.01, 8), BK_OK);
    assert_int_equal(bk_growable_create(&b, 100, 0.01, 8), BK_OK);
    assert_int_equal(bk_growable_set_single_writer(b, 1), BK_OK);
    char k[TU_KEY_LEN];
    uint64_t refused = 0, nogrow_added = 0;
    for (uint64_t i = 0; i < 60000; i++) {
        key_of(k, i % 50000, 1); /* the last 10000 again: answered 0 */
        int want = bk_growable_add_nogrow(a, k, sizeof(k));
        int got = bk_growable_add_nogrow(b, k, sizeof(k));
        assert_int_equal(got, want);
        if (got == 1) nogrow_added++;
        if (got == BK_EFULL) {
            refused++;
            want = bk_growable_add(a, k, sizeof(k));
            got = bk_growable_add(b, k, sizeof(k));
            assert_int_equal(got, want);
        }
        assert_int_equal(bk_growable_items(b), bk_growable_items(a));
    }
    print_message("%u doublings, %llu keys added by add_nogrow, %llu refused\n",
                  bk_growable_doublings(b), (unsigned long long)nogrow_added,
                  (unsigned long long)refused);
    assert_true(bk_growable_doublings(b) >= 8);
    assert_true(nogrow_added > 30000); /* most keys took the single-writer path */
    assert_int_equal(bk_growable_single_writer(b), 1); /* kept through doublings */
    assert_int_equal(bk_growable_single_writer(a), 0);
    assert_int_equal(bk_growable_doublings(b), bk_growable_doublings(a));
    assert_true(bk_growable_fpr_now(b) == bk_growable_fpr_now(a));
    assert_all_present(b, 50000);
    tu_same_image(bk_growable_as_filter(a), bk_growable_as_filter(b));
    bk_growable_free(a);
    bk_growable_free(b);
}

/* The batch of nogrow adds in the single-writer mode, in chunks as the
 * server's shared path sends them, each refused key added alone: the same
 * answers, stops and bytes as in the concurrent mode. */
static void test_single_writer_batch(void **state)
{
    (void)state;
    enum { N = 40000, CHUNK = 64 };
    static char text[N][16];
    static const void *keys[N];
    static size_t lens[N];
    static int ra[CHUNK], rb[CHUNK];
    for (int i = 0; i < N; i++) {
        lens[i] = (size_t)snprintf(text[i], sizeof text[i], "sw-%d", i % 7 == 6 ? i / 3 : i);
        keys[i] = text[i];
    }
    bk_growable *a, *b;
    assert_int_equal(bk_growable_create(&a, 100, 0.01, 3), BK_OK);
    assert_int_equal(bk_growable_create(&b, 100, 0.01, 3), BK_OK);
    assert_int_equal(bk_growable_set_single_writer(b, 1), BK_OK);
    size_t i = 0, batched = 0;
    while (i < N) {
        size_t m = N - i < CHUNK ? N - i : CHUNK;
        int64_t da = bk_growable_add_nogrow_batch(a, keys + i, lens + i, m, ra);
        int64_t db = bk_growable_add_nogrow_batch(b, keys + i, lens + i, m, rb);
        assert_int_equal(db, da);
        assert_true(da >= 0);
        assert_memory_equal(rb, ra, (size_t)da * sizeof(int));
        i += (size_t)da;
        batched += (size_t)da;
        if ((size_t)da < m) { /* the exclusive path, one key */
            assert_int_equal(bk_growable_add(b, keys[i], lens[i]),
                             bk_growable_add(a, keys[i], lens[i]));
            i++;
        }
        assert_int_equal(bk_growable_items(b), bk_growable_items(a));
    }
    assert_true(batched > N / 2);
    assert_true(bk_growable_doublings(b) >= 8);
    tu_same_image(bk_growable_as_filter(a), bk_growable_as_filter(b));
    bk_growable_free(a);
    bk_growable_free(b);
}

/* A full block in the single-writer mode: add_nogrow refuses the entry
 * only a spill could take and changes nothing, as in the concurrent mode. */
static void test_single_writer_full_block(void **state)
{
    (void)state;
    uint64_t h[38];
    bk_growable *f = with_mini0(h, 38), *g = with_mini0(h, 38);
    assert_int_equal(bk_growable_set_single_writer(f, 1), BK_OK);
    for (int i = 0; i < 37; i++) {
        assert_int_equal(bk_growable_add_nogrow_hash(f, h[i]), 1);
        assert_int_equal(bk_growable_add_nogrow_hash(g, h[i]), 1);
    }
    refuses_full_block(f, h);
    tu_same_image(bk_growable_as_filter(f), bk_growable_as_filter(g));
    assert_int_equal(bk_growable_add_hash(f, h[37]), 1); /* spilled */
    assert_int_equal(bk_growable_add_nogrow_hash(f, h[37]), 0);
    for (int i = 0; i < 38; i++) assert_int_equal(bk_growable_contains_hash(f, h[i]), 1);
    bk_growable_free(f);
    bk_growable_free(g);

    /* a list refuses every new key in this mode too */
    assert_int_equal(bk_growable_create(&f, 100, 0.01, 5), BK_OK);
    assert_int_equal(bk_growable_set_single_writer(f, 1), BK_OK);
    assert_int_equal(bk_growable_add_nogrow_hash(f, 12345), BK_EFULL);
    assert_int_equal(bk_growable_items(f), 0);
    assert_int_equal(bk_growable_add_hash(f, 12345), 1);
    assert_int_equal(bk_growable_add_nogrow_hash(f, 12345), 0);
    bk_growable_free(f);
}

/* The setter and getter, NULL, the generic handle (bk_filter_set_single_
 * writer, bk_filter_config.single_writer, bk_filter_info), and what keeps
 * the mode: doublings and clear do; a clone or a loaded copy starts
 * concurrent, as the blocked filter's do. */
static void test_single_writer_mode(void **state)
{
    (void)state;
    bk_growable *f;
    assert_int_equal(bk_growable_set_single_writer(NULL, 1), BK_EINVAL);
    assert_int_equal(bk_growable_single_writer(NULL), 0);
    assert_int_equal(bk_growable_create(&f, 20000, 0.01, 5), BK_OK);
    assert_int_equal(bk_growable_single_writer(f), 0); /* the default */
    assert_int_equal(bk_growable_set_single_writer(f, 7), BK_OK);
    assert_int_equal(bk_growable_single_writer(f), 1);
    assert_int_equal(bk_growable_set_single_writer(f, 0), BK_OK);
    assert_int_equal(bk_growable_single_writer(f), 0);

    /* through the generic handle */
    bk_filter *gf = bk_growable_as_filter(f);
    bk_filter_info info;
    assert_int_equal(bk_filter_set_single_writer(gf, 1), BK_OK);
    assert_int_equal(bk_growable_single_writer(f), 1);
    assert_int_equal(bk_filter_get_info(gf, &info), BK_OK);
    assert_int_equal(info.single_writer, 1);
    assert_int_equal(info.lockfree_add, 0);
    assert_int_equal(bk_filter_get_summary(gf, &info), BK_OK);
    assert_int_equal(info.single_writer, 1);
    add_keys(f, 5000);
    assert_int_equal(bk_filter_set_single_writer(gf, 0), BK_OK);
    assert_int_equal(bk_growable_single_writer(f), 0);
    assert_int_equal(bk_filter_get_info(gf, &info), BK_OK);
    assert_int_equal(info.single_writer, 0);
    assert_int_equal(bk_filter_set_single_writer(gf, 1), BK_OK);

    /* a clone and a loaded copy: the same filter, concurrent */
    bk_filter *c, *g;
    assert_int_equal(bk_filter_clone(&c, gf), BK_OK);
    assert_int_equal(bk_growable_single_writer(bk_filter_as_growable(c)), 0);
    assert_int_equal(bk_growable_single_writer(f), 1);
    tu_same_image(gf, c);
    size_t len;
    unsigned char *buf = tu_serialize(gf, &len);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_OK);
    assert_int_equal(bk_growable_single_writer(bk_filter_as_growable(g)), 0);
    tu_same_image(gf, g);
    free(buf);
    bk_filter_free(g);
    bk_filter_free(c);
    /* clear keeps it */
    assert_int_equal(bk_filter_clear(gf), BK_OK);
    assert_int_equal(bk_growable_single_writer(f), 1);
    bk_growable_free(f);

    /* made in the mode by bk_filter_create, a multiset too */
    bk_filter_config cfg = tu_config(BK_FAMILY_GROWABLE, 100, 0.01);
    cfg.single_writer = 1;
    assert_int_equal(bk_filter_create(&gf, &cfg), BK_OK);
    assert_int_equal(bk_growable_single_writer(bk_filter_as_growable(gf)), 1);
    bk_filter_free(gf);
    assert_int_equal(bk_growable_create_multiset(&f, 100, 0.01, 5), BK_OK);
    assert_int_equal(bk_filter_set_single_writer(bk_growable_as_filter(f), 1), BK_OK);
    assert_int_equal(bk_growable_single_writer(f), 1);
    bk_growable_free(f);
    assert_int_equal(bk_filter_set_single_writer(NULL, 1), BK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_add_nogrow_batch),
        cmocka_unit_test(test_single_writer_as_concurrent),
        cmocka_unit_test(test_single_writer_batch),
        cmocka_unit_test(test_single_writer_full_block),
        cmocka_unit_test(test_single_writer_mode),
        cmocka_unit_test(test_redisbloom_sizes_as_quoted),
        cmocka_unit_test(test_sizes_follow_the_keys),
        cmocka_unit_test(test_smaller_than_redisbloom),
        cmocka_unit_test(test_grows_without_losing_keys),
        cmocka_unit_test(test_rate_is_measured),
        cmocka_unit_test(test_rate_bound_refuses_growth),
        cmocka_unit_test(test_max_bytes),
        cmocka_unit_test(test_entries_out_of_bits),
        cmocka_unit_test(test_spill_and_stash),
        cmocka_unit_test(test_add_nogrow_as_add),
        cmocka_unit_test(test_add_nogrow_refuses_a_full_block),
        cmocka_unit_test(test_batches_and_lengths),
        cmocka_unit_test(test_lookup_ways_agree),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_generic_handle),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_corrupt_images),
        cmocka_unit_test(test_stash_in_the_file),
        cmocka_unit_test(test_generic_allocation_failures),
        cmocka_unit_test(test_multiset_model),
        cmocka_unit_test(test_multiset_generic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
