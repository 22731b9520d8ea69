/*
 * test_growable.c - the growable filter: no key lost through doublings,
 * spills and the stash; the rate it reports is the rate measured; the
 * rate bound, the byte cap and allocation failures change nothing.
 */
#include "testutil.h"

#define XXH_INLINE_ALL
#include <xxhash.h> /* to reseal edited images */

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

/* n hashes of bucket 0 of f's table with distinct tags (2i + 1) and low
 * bits that do not matter; returns the table's bucket bits q. */
static uint32_t one_bucket(const bk_growable *f, uint64_t *h, int n)
{
    uint64_t cap = bk_growable_capacity(f);
    uint32_t q = 0;
    while ((UINT64_C(31) << q) * 3 / 4 < cap) q++;
    for (int i = 0; i < n; i++) h[i] = ((uint64_t)(2 * i + 1) << (64 - q - 15)) | 0x5a5a;
    return q;
}

/* Hashes chosen to land in one bucket: 31 fill it, 31 more spill into the
 * next, the rest go to the stash; all are found, before and after the
 * table doubles, and other tags of that bucket are not. */
static void test_spill_and_stash(void **state)
{
    (void)state;
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 1000, 0.01, 5), BK_OK);
    const int n = 70;
    uint64_t h[70];
    uint32_t q = one_bucket(f, h, n);
    for (int i = 0; i < n; i++) assert_int_equal(bk_growable_add_hash(f, h[i]), 1);
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
    assert_true(refused >= bk_growable_doublings(a)); /* each doubling was one */
    assert_int_equal(bk_growable_doublings(b), bk_growable_doublings(a));
    assert_int_equal(bk_growable_items(b), bk_growable_items(a));
    size_t la, lb;
    unsigned char *sa = tu_serialize(bk_growable_as_filter(a), &la);
    unsigned char *sb = tu_serialize(bk_growable_as_filter(b), &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(sa, sb, la);
    free(sa);
    free(sb);
    assert_int_equal(bk_growable_add_nogrow(NULL, k, sizeof(k)), BK_EINVAL);
    assert_int_equal(bk_growable_add_nogrow(b, NULL, 1), BK_EINVAL);
    assert_int_equal(bk_growable_add_nogrow_hash(NULL, 1), BK_EINVAL);
    bk_growable_free(a);
    bk_growable_free(b);
}

/* add_nogrow fills a bucket and spills into the next, then refuses the
 * entry only the stash could take, changing nothing; bk_growable_add
 * stashes it, after which add_nogrow finds it. */
static void test_add_nogrow_refuses_the_stash(void **state)
{
    (void)state;
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 1000, 0.01, 5), BK_OK);
    uint64_t h[63];
    one_bucket(f, h, 63);
    for (int i = 0; i < 62; i++) assert_int_equal(bk_growable_add_nogrow_hash(f, h[i]), 1);
    assert_int_equal(bk_growable_add_nogrow_hash(f, h[0]), 0);
    assert_int_equal(bk_growable_items(f), 62);
    double rate = bk_growable_fpr_now(f);
    assert_int_equal(bk_growable_add_nogrow_hash(f, h[62]), BK_EFULL);
    assert_int_equal(bk_growable_items(f), 62);
    assert_true(bk_growable_fpr_now(f) == rate);
    assert_int_equal(bk_growable_stashed(f), 0);
    assert_int_equal(bk_growable_contains_hash(f, h[62]), 0);
    assert_int_equal(bk_growable_add_hash(f, h[62]), 1);
    assert_int_equal(bk_growable_stashed(f), 1);
    assert_int_equal(bk_growable_add_nogrow_hash(f, h[62]), 0);
    for (int i = 0; i < 63; i++) assert_int_equal(bk_growable_contains_hash(f, h[i]), 1);
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

/*--------------------------------------------------------------------------
 * The generic handle and the file format
 *--------------------------------------------------------------------------*/

static bk_filter *make_generic(uint64_t keys)
{
    bk_filter_config cfg;
    bk_filter_config_init(&cfg);
    cfg.family = BK_FAMILY_GROWABLE;
    cfg.capacity = 100;
    cfg.fpr = 0.01;
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

/* Through bk_filter: info, clone, clear, batches, and a saved filter that
 * loads with the same answers and goes on growing. */
static void test_generic_handle(void **state)
{
    (void)state;
    const uint64_t n = 20000;
    bk_filter *f = make_generic(n), *g, *c;
    assert_int_equal(bk_filter_family(f), BK_FAMILY_GROWABLE);
    assert_string_equal(bk_family_name(BK_FAMILY_GROWABLE), "growable");
    assert_int_equal(bk_family_from_name("growable"), BK_FAMILY_GROWABLE);
    bk_growable *gf = bk_filter_as_growable(f);
    assert_non_null(gf);
    assert_ptr_equal(bk_growable_as_filter(gf), f);
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(f, &info), BK_OK);
    assert_int_equal(info.family, BK_FAMILY_GROWABLE);
    assert_int_equal(info.items, bk_growable_items(gf));
    assert_int_equal(info.can_remove, 0);
    assert_int_equal(info.lockfree_add, 0);
    assert_true(info.fpr_now == bk_growable_fpr_now(gf));
    assert_true(info.fill > 0.3 && info.fill <= 0.75);
    assert_int_equal(info.bytes, bk_growable_bytes(gf));

    size_t len;
    unsigned char *buf = tu_serialize(f, &len);
    assert_int_equal(buf[20], 2); /* hash algorithm: XXH3-64 */
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_OK);
    bk_growable *gg = bk_filter_as_growable(g);
    assert_int_equal(bk_growable_items(gg), bk_growable_items(gf));
    assert_int_equal(bk_growable_doublings(gg), bk_growable_doublings(gf));
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
    assert_int_equal(bk_filter_clear(c), BK_OK);
    key_of(k, 0, 1);
    assert_int_equal(bk_filter_contains(c, k, sizeof(k)), 0);
    assert_int_equal(bk_growable_items(bk_filter_as_growable(c)), 0);
    free(buf);
    bk_filter_free(c);
    bk_filter_free(g);
    bk_filter_free(f);
}

/* Union: tables of different sizes, keys in one or both, the rate bound,
 * and what is refused. */
static void test_merge(void **state)
{
    (void)state;
    bk_growable *a, *b, *c, *tight;
    char k[TU_KEY_LEN];
    assert_int_equal(bk_growable_create(&a, 100, 0.01, 9), BK_OK);
    assert_int_equal(bk_growable_create(&b, 100, 0.01, 9), BK_OK);
    /* a: keys 0..29999 of tag 1; b: 20000..20999 of tag 1 (in both) and
     * 0..99 of tag 3 (new), far smaller */
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
    assert_true(fabs((double)fp / (double)trials - p) <= 5 * sd + 1e-9);
    assert_true(p <= 0.01);

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

/* Edited images, resealed so that only the family's checks can catch
 * them, are refused: a count past 31, a stray entry in an unused lane, a
 * weight that does not add up, the wrong hash algorithm. */
static void test_corrupt_images(void **state)
{
    (void)state;
    bk_filter *f = make_generic(5000), *g;
    size_t len;
    unsigned char *clean = tu_serialize(f, &len), *buf = malloc(len);
    uint64_t off = get64le(clean + 96);
    memcpy(buf, clean, len);
    reseal(buf);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_OK); /* reseal is faithful */
    bk_filter_free(g);

    /* bucket 0's metadata lane: own count 31 plus a foreign one */
    memcpy(buf, clean, len);
    buf[off + 62] = 31 | 1 << 5;
    reseal(buf);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_ECORRUPT);
    /* an entry in bucket 0's last lane, which no count covers */
    memcpy(buf, clean, len);
    buf[off + 61] = 0x80;
    reseal(buf);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_ECORRUPT);
    /* W one off (header param[1]) */
    memcpy(buf, clean, len);
    put64le(buf + 64, get64le(buf + 64) + 1);
    reseal(buf);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_ECORRUPT);
    /* XXH3-128 declared */
    memcpy(buf, clean, len);
    buf[20] = 1;
    reseal(buf);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_ECORRUPT);
    /* a rate under the minimum */
    memcpy(buf, clean, len);
    {
        double p = BK_GROWABLE_MIN_FPR / 2;
        uint64_t bits;
        memcpy(&bits, &p, 8);
        put64le(buf + 40, bits);
    }
    reseal(buf);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_ECORRUPT);
    free(buf);
    free(clean);
    bk_filter_free(f);
}

/* A filter with a stash saves it as a second part and loads it back; a
 * stash out of order, out of range, with an empty entry, or of a bucket
 * not flagged for it is refused. */
static void test_stash_in_the_file(void **state)
{
    (void)state;
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 1000, 0.01, 5), BK_OK);
    uint32_t q = 0;
    while ((UINT64_C(31) << q) * 3 / 4 < bk_growable_capacity(f)) q++;
    uint64_t h[70];
    for (int i = 0; i < 70; i++) {
        h[i] = (uint64_t)(2 * i + 1) << (64 - q - 15);
        assert_int_equal(bk_growable_add_hash(f, h[i]), 1);
    }
    assert_int_equal(bk_growable_stashed(f), 8);
    size_t len;
    unsigned char *clean = tu_serialize(bk_growable_as_filter(f), &len), *buf = malloc(len);
    assert_int_equal(clean[16], 2); /* two parts */
    bk_filter *g;
    assert_int_equal(bk_filter_deserialize(&g, clean, len), BK_OK);
    for (int i = 0; i < 70; i++)
        assert_int_equal(bk_growable_contains_hash(bk_filter_as_growable(g), h[i]), 1);
    bk_filter_free(g);
    uint64_t stash = get64le(clean + 96) + get64le(clean + 128 + 64); /* part 1's offset */
    uint64_t first = get64le(clean + stash), second = get64le(clean + stash + 8);
    const uint64_t bad[4][2] = {
        {second, first},                                   /* out of order */
        {(UINT64_C(1) << (q + 16)) | (first & 0xffff), second}, /* no such bucket */
        {first & ~UINT64_C(0xffff), second},               /* an empty entry */
        {first + (UINT64_C(1) << 16), second + (UINT64_C(1) << 16)}, /* bucket 1: not flagged */
    };
    for (int i = 0; i < 4; i++) {
        memcpy(buf, clean, len);
        put64le(buf + stash, bad[i][0]);
        put64le(buf + stash + 8, bad[i][1]);
        reseal(buf);
        if (bk_filter_deserialize(&g, buf, len) != BK_ECORRUPT) fail_msg("bad stash %d loaded", i);
    }
    free(buf);
    free(clean);
    bk_growable_free(f);
}

static void test_generic_allocation_failures(void **state)
{
    (void)state;
    bk_filter *f = make_generic(3000);
    assert_true(bk_filter_add(f, "x", 1) >= 0);
    tu_oom_clone_and_load(f);
    bk_filter_free(f);
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
        cmocka_unit_test(test_add_nogrow_as_add),
        cmocka_unit_test(test_add_nogrow_refuses_the_stash),
        cmocka_unit_test(test_batches_and_lengths),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_generic_handle),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_corrupt_images),
        cmocka_unit_test(test_stash_in_the_file),
        cmocka_unit_test(test_generic_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
