/*
 * test_blocked.c - the cache-blocked Bloom filter.
 *
 * False-positive tests compare measured rates with bk_blocked_fpr (the sum
 * over binomial block loads) for the size and k the filter chose. Two
 * sources of spread are allowed for, each stated where it is used: the
 * binomial spread of the absent-key trials, and the spread of the filter's
 * own exact rate around the formula (block loads are random). Tolerances
 * are 5 standard deviations: a correct filter fails a check with
 * probability ~6e-7, and the seeds are fixed, so a run is reproducible.
 *
 * Every test that depends on the code path runs once per SIMD level the
 * CPU supports.
 */
#include "testutil.h"

#define XXH_INLINE_ALL
#include <xxhash.h> /* the split layout's model hashes with XXH3-64 itself */

#define N_KEYS 1000000u
#define TAG_IN 1u
#define TAG_OUT 2u
#define TAG_OTHER 3u

TU_ADD_RANGE(add_range, bk_blocked, bk_blocked_add)
TU_COUNT_FOUND(count_found, bk_blocked, bk_blocked_contains)

/* 1 when a and b hold exactly the same bits: popcount(a & b) equals both
 * popcounts only if neither has a bit the other lacks. */
static int same_bits(const bk_blocked *a, const bk_blocked *b)
{
    bk_blocked *both;
    bk_blocked_stats sa, sb, sboth;
    assert_int_equal(bk_blocked_clone(&both, a), BK_OK);
    assert_int_equal(bk_blocked_intersect(both, b), BK_OK);
    assert_int_equal(bk_blocked_get_stats(a, &sa), BK_OK);
    assert_int_equal(bk_blocked_get_stats(b, &sb), BK_OK);
    assert_int_equal(bk_blocked_get_stats(both, &sboth), BK_OK);
    bk_blocked_free(both);
    return sa.bits_set == sb.bits_set && sboth.bits_set == sa.bits_set;
}

/* Run body once per supported SIMD level, restoring the default after. */
#define FOR_EACH_LEVEL(level)                                                 \
    for (int level = BK_SIMD_SCALAR; level <= bk_blocked_simd_best(); level++) \
        if (bk_blocked_set_simd_level(level) >= 0)

static void restore_level(void)
{
    assert_true(bk_blocked_set_simd_level(bk_blocked_simd_best()) >= 0);
}

/*--------------------------------------------------------------------------
 * An independent model of the documented layout: block = fastrange(h.lo, b),
 * in-block positions (uint32)(x * SALT[i]) >> 23 with x = low 32 bits of
 * h.hi, bit p in word p / 64. It pins the layout: a change to it fails here
 * on every CPU.
 *--------------------------------------------------------------------------*/

static const uint32_t MODEL_SALT[16] = {
    0xe220a839u, 0x6e789e6bu, 0x06c45d19u, 0xf88bb8a9u,
    0x1b39896bu, 0x53cb9f0du, 0x2c829abfu, 0xc584133bu,
    0x3ee57891u, 0xf3b8488du, 0x657eecddu, 0xc2d326e1u,
    0x8621a03fu, 0x8e1f7555u, 0xb54e0f17u, 0x84bb3f97u,
};

static uint64_t model_block(bk_hash h, uint64_t nblocks)
{
    return (uint64_t)(((unsigned __int128)h.lo * nblocks) >> 64);
}

static void model_mask(bk_hash h, uint32_t k, uint64_t mask[8])
{
    uint32_t x = (uint32_t)h.hi;
    memset(mask, 0, 8 * sizeof(uint64_t));
    for (uint32_t i = 0; i < k; i++) {
        uint32_t pos = (uint32_t)(x * MODEL_SALT[i]) >> 23;
        mask[pos / 64] |= UINT64_C(1) << (pos % 64);
    }
}

/* The model's blocks, 8 words each (the tests with few blocks keep one,
 * test_layout_matches_model and test_split_matches_model): a key's mask
 * set in block b, whether a probe's mask is all set there, and the bits
 * set in all nblocks. */
static void model_set(uint64_t (*model)[8], uint64_t b, const uint64_t mask[8])
{
    for (int w = 0; w < 8; w++) model[b][w] |= mask[w];
}

static int model_has(uint64_t (*model)[8], uint64_t b, const uint64_t mask[8])
{
    uint64_t missing = 0;
    for (int w = 0; w < 8; w++) missing |= mask[w] & ~model[b][w];
    return missing == 0;
}

static uint64_t model_bits(uint64_t (*model)[8], uint64_t nblocks)
{
    uint64_t bits = 0;
    for (uint64_t b = 0; b < nblocks; b++)
        for (int w = 0; w < 8; w++) bits += (uint64_t)__builtin_popcountll(model[b][w]);
    return bits;
}

/* A key's place in the model for f's layout: the hash whose model_block
 * is its block, and its mask; `added` when the key is being added. */
typedef bk_hash (*model_key_fn)(const bk_blocked *f, const char *key, int added,
                                uint64_t mask[8]);

/* Keys 0 .. n - 1 (TAG_IN) added to f, of nblocks blocks, and to a model
 * of it; then each of `probes` absent keys (TAG_OUT) must be found iff
 * its mask is all set in its block of the model (a failure names `what`
 * and the SIMD level), and f's bits set must be the model's. Returns how
 * many probes were found. */
static uint64_t check_model(bk_blocked *f, int level, uint64_t nblocks, uint64_t n,
                            uint64_t probes, model_key_fn key_of, const char *what)
{
    uint64_t (*model)[8] = calloc(nblocks, sizeof(*model));
    assert_non_null(model);
    uint64_t mask[8];
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < n; i++) {
        tu_key(key, i, TAG_IN);
        bk_hash h = key_of(f, key, 1, mask);
        model_set(model, model_block(h, nblocks), mask);
        bk_blocked_add(f, key, sizeof(key));
    }
    uint64_t found = 0;
    for (uint64_t i = 0; i < probes; i++) {
        tu_key(key, i, TAG_OUT);
        bk_hash h = key_of(f, key, 0, mask);
        int want = model_has(model, model_block(h, nblocks), mask);
        found += (uint64_t)want;
        if (bk_blocked_contains(f, key, sizeof(key)) != want)
            fail_msg("%s, level %s, probe %llu: got %d want %d", what,
                     bk_blocked_simd_name(level), (unsigned long long)i, !want, want);
    }
    bk_blocked_stats st;
    assert_int_equal(bk_blocked_get_stats(f, &st), BK_OK);
    assert_true(st.bits_set == model_bits(model, nblocks));
    free(model);
    return found;
}

/*--------------------------------------------------------------------------*/

static void test_no_false_negatives(void **state)
{
    (void)state;
    static const uint64_t seeds[] = {1, 0xDEADBEEF, BK_DEFAULT_SEED};
    for (size_t s = 0; s < 3; s++) {
        bk_blocked *f;
        assert_int_equal(bk_blocked_create(&f, N_KEYS / 4, 0.01, seeds[s]),
                         BK_OK);
        assert_true(bk_blocked_seed(f) == seeds[s]);
        add_range(f, 0, N_KEYS / 4, TAG_IN);
        assert_true(count_found(f, 0, N_KEYS / 4, TAG_IN) == N_KEYS / 4);
        bk_blocked_free(f);
    }
}

/* Variance over random block loads of the rate of one block, sum_i P(i)
 * f(i)^2 - (sum_i P(i) f(i))^2 with Poisson loads of mean lambda (the
 * filters here have thousands of blocks, where Poisson and binomial agree).
 * The filter's exact rate is the mean of b such blocks, so its standard
 * deviation around the formula is sqrt(variance / b). */
static double block_rate_variance(double lambda, uint32_t k)
{
    double mean = 0.0, square = 0.0, log_p = -lambda;
    for (double i = 0.0; i < lambda + 20.0 * sqrt(lambda) + 50.0; i += 1.0) {
        double fill = -expm1(i * k * log1p(-1.0 / 512.0));
        double rate = pow(fill, (double)k);
        double weight = exp(log_p);
        mean += weight * rate;
        square += weight * rate * rate;
        log_p += log(lambda / (i + 1.0));
    }
    return square - mean * mean;
}

static void check_fpr(double p)
{
    bk_blocked *f;
    assert_int_equal(bk_blocked_create(&f, N_KEYS, p, 99), BK_OK);
    add_range(f, 0, N_KEYS, TAG_IN);
    const uint64_t trials = 1000000;
    double measured = (double)count_found(f, 0, trials, TAG_OUT) / trials;
    uint64_t m = bk_blocked_bits(f), b = bk_blocked_blocks(f);
    uint32_t k = bk_blocked_hashes(f);
    double expected = bk_blocked_fpr(N_KEYS, m, k);

    bk_blocked_stats st;
    assert_int_equal(bk_blocked_get_stats(f, &st), BK_OK);

    /* (1) Given the filter, each absent key is found with probability
     * exactly fpr_now: binomial spread only. */
    double tol_given = tu_tolerance(st.fpr_now, trials, 5);
    /* (2) Against the formula, add the spread of fpr_now itself. */
    double sd_filter = sqrt(block_rate_variance((double)N_KEYS / b, k) / b);
    double sd_trials = sqrt(expected * (1 - expected) / trials);
    double tol_formula = 5 * sqrt(sd_trials * sd_trials + sd_filter * sd_filter);
    print_message("p=%g: m=%llu (%.3f bits/key) k=%u expected %.6f "
                  "fpr_now %.6f measured %.6f (tol %.6f)\n",
                  p, (unsigned long long)m, (double)m / N_KEYS, k, expected,
                  st.fpr_now, measured, tol_formula);
    assert_true(fabs(measured - st.fpr_now) < tol_given);
    assert_true(fabs(measured - expected) < tol_formula);
    assert_true(fabs(st.fpr_now - expected) < 5 * sd_filter);
    /* the sizing meets its target */
    assert_true(expected <= p);
    assert_true(measured < p + tol_formula);
    assert_true(fabs(st.fpr_at_capacity - expected) < 1e-12);
    bk_blocked_free(f);
}

static void test_fpr_1_percent(void **state)
{
    (void)state;
    FOR_EACH_LEVEL(level) check_fpr(0.01);
    restore_level();
}

static void test_fpr_01_percent(void **state) { (void)state; check_fpr(0.001); }

/* The formula with its exact binomial loads, on filters of a few blocks
 * where the Poisson approximation would be off: the mean of fpr_now over
 * many independent filters must match bk_blocked_fpr. The sample standard
 * deviation of that mean is measured from the same filters. */
static void test_formula_on_small_filters(void **state)
{
    (void)state;
    static const struct { uint64_t blocks, n; uint32_t k; } cases[] = {
        {1, 40, 6}, {2, 100, 6}, {8, 400, 6}, {8, 300, 9}, {64, 3000, 4},
    };
    const int filters = 400;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        double sum = 0.0, sum_sq = 0.0;
        for (int s = 0; s < filters; s++) {
            bk_blocked *f;
            bk_blocked_stats st;
            assert_int_equal(bk_blocked_create_mk(&f, cases[c].blocks * 512,
                                                  cases[c].k, 1000 + s),
                             BK_OK);
            add_range(f, 0, cases[c].n, TAG_IN);
            assert_int_equal(bk_blocked_get_stats(f, &st), BK_OK);
            sum += st.fpr_now;
            sum_sq += st.fpr_now * st.fpr_now;
            bk_blocked_free(f);
        }
        double mean = sum / filters;
        double sd_mean = sqrt((sum_sq / filters - mean * mean) / filters);
        double expected = bk_blocked_fpr(cases[c].n, cases[c].blocks * 512,
                                         cases[c].k);
        print_message("b=%llu n=%llu k=%u: formula %.6f mean fpr_now %.6f "
                      "(sd of mean %.6f)\n",
                      (unsigned long long)cases[c].blocks,
                      (unsigned long long)cases[c].n, cases[c].k, expected,
                      mean, sd_mean);
        assert_true(fabs(mean - expected) < 5 * sd_mean + 1e-12);
    }
    /* k = 1 in one block: the rate is the expected fill, 1 - (1 - 1/B)^n,
     * exactly. For k > 1 it exceeds the classic approximation (the fill
     * varies and E[X^k] > E[X]^k), by a little. */
    assert_true(fabs(bk_blocked_fpr(40, 512, 1) - (1 - pow(511.0 / 512, 40))) < 1e-14);
    double one = bk_blocked_fpr(40, 512, 6);
    double classic = pow(-expm1(40.0 * 6 * log1p(-1.0 / 512)), 6);
    assert_true(one > classic && one < 1.05 * classic);
}

static void test_sizing(void **state)
{
    (void)state;
    uint64_t m, n;
    uint32_t k;
    /* the target: at most 10.5 bits per key for 1% */
    assert_int_equal(bk_blocked_optimal(N_KEYS, 0.01, &m, &k), BK_OK);
    assert_true((double)m / N_KEYS <= 10.5);
    assert_true(m % 512 == 0);
    /* minimal: one block fewer misses the target at every k */
    for (uint32_t j = 1; j <= BK_BLOCKED_MAX_HASHES; j++)
        assert_true(bk_blocked_fpr(N_KEYS, m - 512, j) > 0.01);
    assert_true(bk_blocked_fpr(N_KEYS, m, k) <= 0.01);
    /* blocking costs bits: more than the classic filter needs */
    uint64_t classic_m;
    assert_int_equal(bk_bloom_optimal(N_KEYS, 0.01, &classic_m, NULL), BK_OK);
    assert_true(m > classic_m);

    /* capacity inverts optimal: m holds at least N_KEYS, and one key more
     * than its capacity needs more blocks */
    assert_int_equal(bk_blocked_capacity(m, 0.01, &n), BK_OK);
    assert_true(n >= N_KEYS);
    uint64_t m_more;
    assert_int_equal(bk_blocked_optimal(n + 1, 0.01, &m_more, NULL), BK_OK);
    assert_true(m_more > m);
    assert_int_equal(bk_blocked_optimal(n, 0.01, &m_more, NULL), BK_OK);
    assert_true(m_more == m);
    /* outputs may be NULL */
    assert_int_equal(bk_blocked_optimal(1000, 0.001, NULL, NULL), BK_OK);
    assert_int_equal(bk_blocked_capacity(1 << 20, 0.001, NULL), BK_OK);
    /* the rate grows with n and falls with m */
    assert_true(bk_blocked_fpr(1000, 16384, 6) < bk_blocked_fpr(2000, 16384, 6));
    assert_true(bk_blocked_fpr(1000, 32768, 6) < bk_blocked_fpr(1000, 16384, 6));
    assert_true(bk_blocked_fpr(0, 512, 3) == 0.0);
    /* m is rounded up to whole blocks */
    assert_true(bk_blocked_fpr(100, 513, 6) == bk_blocked_fpr(100, 1024, 6));
}

/* The layout is the documented one, on every code path. Few keys in few
 * blocks, so that each probe's answer is predictable exactly: found iff
 * its mask lies within the union of the masks added to its block. */
/* The documented layout: bk_hash_key with f's seed, k = f's hashes. */
static bk_hash layout_key(const bk_blocked *f, const char *key, int added, uint64_t mask[8])
{
    (void)added;
    bk_hash h = bk_hash_key(key, TU_KEY_LEN, bk_blocked_seed(f));
    model_mask(h, bk_blocked_hashes(f), mask);
    return h;
}

static void test_layout_matches_model(void **state)
{
    (void)state;
    FOR_EACH_LEVEL(level) {
        for (uint32_t k = 1; k <= BK_BLOCKED_MAX_HASHES; k++) {
            const uint64_t nblocks = 4, n = 12, probes = 50000, seed = 7 + k;
            bk_blocked *f;
            assert_int_equal(bk_blocked_create_mk(&f, nblocks * 512, k, seed),
                             BK_OK);
            assert_int_equal(bk_blocked_hashes(f), k);
            assert_true(bk_blocked_seed(f) == seed);
            char what[16];
            snprintf(what, sizeof(what), "k=%u", k);
            uint64_t found = check_model(f, level, nblocks, n, probes, layout_key, what);
            /* the check is not vacuous: some probes are found, most not */
            if (k <= 3) assert_true(found > 0);
            assert_true(found < probes);
            bk_blocked_free(f);
        }
    }
    restore_level();
}

/* The keys of the path tests: n added (TAG_IN; with `repeats`, every fifth
 * repeats an earlier one, so that some adds find all their bits), then
 * probes - n absent (TAG_OUT), with pointer and length arrays for the
 * batch calls and result buffers. */
typedef struct probe_set {
    tu_keyset ks; /* the keys, with their pointers and lengths */
    uint8_t *want_add, *want, *got;
} probe_set;

static probe_set probes_make(uint64_t n, uint64_t probes, int repeats)
{
    probe_set p;
    tu_keyset_make(&p.ks, probes, 0, TAG_IN);
    p.want_add = malloc(n);
    p.want = malloc(probes);
    p.got = malloc(probes);
    assert_true(p.want_add && p.want && p.got);
    for (uint64_t i = 0; i < probes; i++) {
        uint64_t id = repeats && i < n && i % 5 == 4 ? i / 2 : i;
        tu_key(p.ks.store + i * TU_KEY_LEN, id, i < n ? TAG_IN : TAG_OUT);
    }
    return p;
}

static void probes_free(probe_set *p)
{
    tu_keyset_free(&p->ks);
    free(p->want_add);
    free(p->want);
    free(p->got);
}

/* Every level builds the same bits and gives the same answers, for every
 * k, with single and batch calls. */
static void test_levels_identical(void **state)
{
    (void)state;
    const uint64_t n = 20000, probes = 200000;
    probe_set ps = probes_make(n, probes, 0);
    char (*keys)[TU_KEY_LEN] = (char (*)[TU_KEY_LEN])ps.ks.store;
    const void **ptrs = ps.ks.keys;
    size_t *lens = ps.ks.lens;
    uint8_t *want = ps.want, *got = ps.got;
    for (uint32_t k = 1; k <= BK_BLOCKED_MAX_HASHES; k++) {
        bk_blocked *ref;
        assert_int_equal(bk_blocked_set_simd_level(BK_SIMD_SCALAR) >= 0, 1);
        assert_int_equal(bk_blocked_create_mk(&ref, 64 * 512, k, 5), BK_OK);
        for (uint64_t i = 0; i < n; i++) bk_blocked_add(ref, keys[i], TU_KEY_LEN);
        for (uint64_t i = 0; i < probes; i++)
            want[i] = (uint8_t)bk_blocked_contains(ref, keys[i], TU_KEY_LEN);
        FOR_EACH_LEVEL(level) {
            bk_blocked *single, *batch;
            assert_int_equal(bk_blocked_simd_level(), level);
            assert_int_equal(bk_blocked_create_mk(&single, 64 * 512, k, 5), BK_OK);
            assert_int_equal(bk_blocked_create_mk(&batch, 64 * 512, k, 5), BK_OK);
            for (uint64_t i = 0; i < n; i++)
                bk_blocked_add(single, keys[i], TU_KEY_LEN);
            assert_true(bk_blocked_add_batch(batch, (const void *const *)ptrs,
                                             lens, n, NULL) >= 0);
            assert_true(same_bits(ref, single));
            assert_true(same_bits(ref, batch));
            memset(got, 0xFF, probes);
            int64_t hits = bk_blocked_contains_batch(single,
                                                     (const void *const *)ptrs,
                                                     lens, probes, got);
            int64_t want_hits = 0;
            for (uint64_t i = 0; i < probes; i++) want_hits += want[i];
            assert_true(hits == want_hits);
            assert_memory_equal(got, want, probes);
            for (uint64_t i = 0; i < probes; i += 7)
                assert_int_equal(bk_blocked_contains(batch, keys[i], TU_KEY_LEN),
                                 want[i]);
            bk_blocked_free(single);
            bk_blocked_free(batch);
        }
        bk_blocked_free(ref);
    }
    restore_level();
    probes_free(&ps);
}

/* Sizing results are remembered per (n, p) pair (a small cache): repeated
 * and interleaved calls, past the cache's size so that entries are
 * replaced, give what the first call computed, for neighbouring n and p
 * that must not be confused with each other. */
static void test_sizing_cache(void **state)
{
    (void)state;
    enum { PAIRS = 40 };
    uint64_t n[PAIRS], m[PAIRS], m2;
    double p[PAIRS];
    uint32_t k[PAIRS], k2;
    for (int i = 0; i < PAIRS; i++) {
        n[i] = 1000 + (uint64_t)(i / 2);       /* pairs share n ... */
        p[i] = i % 2 ? 0.01 : 0.0100000001;   /* ... and nearly p */
        if (i % 4 == 3) p[i] = 0.001;
        assert_int_equal(bk_blocked_optimal(n[i], p[i], &m[i], &k[i]), BK_OK);
    }
    for (int round = 0; round < 3; round++) {
        for (int j = 0; j < PAIRS; j++) {
            int i = (j * 7 + round * 3) % PAIRS;
            assert_int_equal(bk_blocked_optimal(n[i], p[i], &m2, &k2), BK_OK);
            assert_true(m2 == m[i]);
            assert_int_equal(k2, k[i]);
        }
    }
    /* a cached pair still meets its target, and one block less does not */
    assert_true(bk_blocked_fpr(n[5], m[5], k[5]) <= p[5]);
    uint64_t m_only;
    assert_int_equal(bk_blocked_optimal(n[5], p[5], &m_only, NULL), BK_OK);
    assert_true(m_only == m[5]);
}

/* The serialized bytes of f (header, descriptor, blocks): what must not
 * depend on the code path or the write mode. */
static unsigned char *serialized(const bk_blocked *f, uint64_t *size)
{
    const bk_filter *g = bk_blocked_as_filter((bk_blocked *)f);
    *size = bk_filter_serialized_size(g);
    unsigned char *buf = malloc((size_t)*size);
    assert_non_null(buf);
    assert_int_equal(bk_filter_serialize(g, buf, (size_t)*size), BK_OK);
    return buf;
}

/* Every SIMD level in both write modes, through single adds, batch adds and
 * add_if_absent, stores byte for byte what the scalar concurrent reference
 * stores (bits and item count), answers each add as it does, and answers
 * lookups (single and batch) as it does. 20000 keys in 64 blocks: blocks
 * fill up, so adds of keys whose bits are all set (nothing written) are
 * common for every k. */
/* A create of the filter the paths run on (arg: its parameters). */
typedef int (*blocked_create_fn)(bk_blocked **f, const void *arg);

/* The checks of both tests below: a reference made by create with the
 * scalar level gives each add's answer for ps's n keys and each lookup's
 * for its probes; then every level in both write modes, through single
 * adds, batch adds, add_if_absent (and, with hows == 4, _add_hash), stores
 * byte for byte what the reference stores, answers each add as it does and
 * each lookup (single, batch, and _contains_hash with hows == 4) as it
 * does. label names the case in messages. Returns the adds that answered
 * 1 (fresh). */
static uint64_t paths_identical(const probe_set *ps, uint64_t n, uint64_t probes,
                                blocked_create_fn create, const void *arg, int hows,
                                const char *label)
{
    char (*keys)[TU_KEY_LEN] = (char (*)[TU_KEY_LEN])ps->ks.store;
    const void **ptrs = ps->ks.keys;
    size_t *lens = ps->ks.lens;
    uint8_t *want_add = ps->want_add, *want = ps->want, *got = ps->got;
    bk_blocked *ref;
    uint64_t ref_size, size, fresh = 0;
    assert_true(bk_blocked_set_simd_level(BK_SIMD_SCALAR) >= 0);
    assert_int_equal(create(&ref, arg), BK_OK);
    for (uint64_t i = 0; i < n; i++) {
        want_add[i] = (uint8_t)bk_blocked_add(ref, keys[i], TU_KEY_LEN);
        fresh += want_add[i];
    }
    for (uint64_t i = 0; i < probes; i++)
        want[i] = (uint8_t)bk_blocked_contains(ref, keys[i], TU_KEY_LEN);
    unsigned char *ref_bytes = serialized(ref, &ref_size);
    FOR_EACH_LEVEL(level) {
        for (int mode = 0; mode <= 1; mode++) {
            for (int how = 0; how < hows; how++) { /* single, batch, if_absent, _hash */
                bk_blocked *f;
                assert_int_equal(create(&f, arg), BK_OK);
                assert_int_equal(bk_blocked_set_single_writer(f, mode), BK_OK);
                assert_int_equal(bk_blocked_single_writer(f), mode);
                memset(got, 0xFF, n);
                if (how == 1) {
                    assert_true(bk_blocked_add_batch(f, (const void *const *)ptrs, lens, n,
                                                     got) == (int64_t)fresh);
                } else {
                    for (uint64_t i = 0; i < n; i++)
                        got[i] = (uint8_t)(how == 0 ? bk_blocked_add(f, keys[i], TU_KEY_LEN)
                                           : how == 2
                                               ? bk_blocked_add_if_absent(f, keys[i], TU_KEY_LEN)
                                               : bk_blocked_add_hash(
                                                     f, bk_blocked_hash_key(f, keys[i],
                                                                            TU_KEY_LEN)));
                }
                if (memcmp(got, want_add, n) != 0)
                    fail_msg("%s level %s mode %d how %d: add answers differ", label,
                             bk_blocked_simd_name(level), mode, how);
                unsigned char *bytes = serialized(f, &size);
                assert_true(size == ref_size);
                if (memcmp(bytes, ref_bytes, (size_t)size) != 0)
                    fail_msg("%s level %s mode %d how %d: stored bytes differ", label,
                             bk_blocked_simd_name(level), mode, how);
                free(bytes);
                memset(got, 0xFF, probes);
                int64_t hits = bk_blocked_contains_batch(f, (const void *const *)ptrs, lens,
                                                         probes, got);
                assert_memory_equal(got, want, probes);
                int64_t want_hits = 0;
                for (uint64_t i = 0; i < probes; i++) {
                    want_hits += want[i];
                    if (i % 3 != 0) continue;
                    assert_int_equal(bk_blocked_contains(f, keys[i], TU_KEY_LEN), want[i]);
                    if (hows == 4) {
                        bk_hash h = bk_blocked_hash_key(f, keys[i], TU_KEY_LEN);
                        assert_int_equal(bk_blocked_contains_hash(f, h), want[i]);
                    }
                }
                assert_true(hits == want_hits);
                bk_blocked_free(f);
            }
        }
    }
    free(ref_bytes);
    bk_blocked_free(ref);
    return fresh;
}

static int create_mk(bk_blocked **f, const void *arg)
{
    return bk_blocked_create_mk(f, 64 * 512, *(const uint32_t *)arg, 9);
}

static void test_paths_and_modes_identical(void **state)
{
    (void)state;
    const uint64_t n = 20000, probes = 60000;
    probe_set ps = probes_make(n, probes, 1);
    for (uint32_t k = 1; k <= BK_BLOCKED_MAX_HASHES; k++) {
        char label[16];
        snprintf(label, sizeof(label), "k=%u", k);
        uint64_t fresh = paths_identical(&ps, n, probes, create_mk, &k, 3, label);
        assert_true(fresh < n); /* some adds found every bit set */
    }
    restore_level();
    probes_free(&ps);
}

/* The write mode through the generic handle: chosen by the config or the
 * setter, reported by bk_filter_info, refused by one-mode families. */
static void test_write_mode_api(void **state)
{
    (void)state;
    bk_filter_config cfg;
    bk_filter *f, *g;
    bk_filter_info info;
    bk_filter_config_init(&cfg);
    cfg.capacity = 1000;
    cfg.fpr = 0.01;
    assert_int_equal(bk_filter_create(&f, &cfg), BK_OK);
    assert_int_equal(bk_filter_get_info(f, &info), BK_OK);
    assert_int_equal(info.single_writer, 0);
    assert_int_equal(info.lockfree_add, 1);
    assert_int_equal(bk_filter_set_single_writer(f, 1), BK_OK);
    assert_int_equal(bk_blocked_single_writer(bk_filter_as_blocked(f)), 1);
    assert_int_equal(bk_filter_get_info(f, &info), BK_OK);
    assert_int_equal(info.single_writer, 1);
    assert_int_equal(info.lockfree_add, 0);
    assert_int_equal(bk_filter_add(f, "a", 1), 1);
    assert_int_equal(bk_filter_add(f, "a", 1), 0);
    assert_int_equal(bk_filter_contains(f, "a", 1), 1);
    /* a clone starts concurrent, as a loaded filter does */
    assert_int_equal(bk_filter_clone(&g, f), BK_OK);
    assert_int_equal(bk_filter_get_info(g, &info), BK_OK);
    assert_int_equal(info.single_writer, 0);
    assert_int_equal(bk_filter_contains(g, "a", 1), 1);
    bk_filter_free(g);
    assert_int_equal(bk_filter_set_single_writer(f, 0), BK_OK);
    assert_int_equal(bk_filter_get_info(f, &info), BK_OK);
    assert_int_equal(info.single_writer, 0);
    bk_filter_free(f);

    cfg.single_writer = 1;
    assert_int_equal(bk_filter_create(&f, &cfg), BK_OK);
    assert_int_equal(bk_filter_get_info(f, &info), BK_OK);
    assert_int_equal(info.single_writer, 1);
    bk_filter_free(f);
    /* a family with one mode ignores the config and refuses the setter */
    cfg.family = BK_FAMILY_BLOOM;
    assert_int_equal(bk_filter_create(&f, &cfg), BK_OK);
    assert_int_equal(bk_filter_get_info(f, &info), BK_OK);
    assert_int_equal(info.single_writer, 0);
    assert_int_equal(bk_filter_set_single_writer(f, 1), BK_ENOTSUP);
    bk_filter_free(f);
    assert_int_equal(bk_filter_set_single_writer(NULL, 1), BK_EINVAL);
    assert_int_equal(bk_blocked_set_single_writer(NULL, 1), BK_EINVAL);
}

static void test_batch_equals_single(void **state)
{
    (void)state;
    /* sizes around the look-ahead window, and keys of varied lengths */
    static const size_t sizes[] = {0, 1, 5, 31, 32, 33, 100, 5000};
    char buf[5000][40];
    const void *ptrs[5000];
    size_t lens[5000];
    uint64_t rng = 11;
    for (size_t i = 0; i < 5000; i++) {
        lens[i] = (size_t)(tu_next(&rng) % 40);
        for (size_t j = 0; j < lens[i]; j++) buf[i][j] = (char)tu_next(&rng);
        ptrs[i] = buf[i];
    }
    FOR_EACH_LEVEL(level) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            size_t n = sizes[s];
            bk_blocked *a, *b;
            uint8_t ra[5000], rb[5000];
            assert_int_equal(bk_blocked_create(&a, 2000, 0.01, 3), BK_OK);
            assert_int_equal(bk_blocked_create(&b, 2000, 0.01, 3), BK_OK);
            int64_t new_single = 0;
            for (size_t i = 0; i < n; i++) {
                ra[i] = (uint8_t)bk_blocked_add(a, ptrs[i], lens[i]);
                new_single += ra[i];
            }
            int64_t new_batch = bk_blocked_add_batch(b, ptrs, lens, n, rb);
            assert_true(new_batch == new_single);
            assert_memory_equal(ra, rb, n);
            assert_true(same_bits(a, b));
            assert_true(bk_blocked_items(a) == bk_blocked_items(b));
            /* lookups: the batch answers what single calls answer */
            int64_t found = bk_blocked_contains_batch(b, ptrs, lens, 5000, rb);
            int64_t found_single = 0;
            for (size_t i = 0; i < 5000; i++) {
                ra[i] = (uint8_t)bk_blocked_contains(a, ptrs[i], lens[i]);
                found_single += ra[i];
            }
            assert_memory_equal(ra, rb, 5000);
            assert_true(found == found_single);
            assert_true(bk_blocked_contains_batch(b, ptrs, lens, 5000, NULL) ==
                        found);
            bk_blocked_free(a);
            bk_blocked_free(b);
        }
    }
    restore_level();
}

static void test_add_and_add_if_absent(void **state)
{
    (void)state;
    bk_blocked *f;
    assert_int_equal(bk_blocked_create(&f, 1000, 0.01, 1), BK_OK);
    assert_int_equal(bk_blocked_add(f, "apple", 5), 1);
    assert_int_equal(bk_blocked_add(f, "apple", 5), 0);
    assert_int_equal(bk_blocked_contains(f, "apple", 5), 1);
    assert_int_equal(bk_blocked_add_if_absent(f, "apple", 5), 0);
    assert_int_equal(bk_blocked_add_if_absent(f, "pear", 4), 1);
    assert_int_equal(bk_blocked_contains(f, "pear", 4), 1);
    assert_int_equal(bk_blocked_add_if_absent(f, "pear", 4), 0);
    assert_true(bk_blocked_items(f) == 2);
    /* the empty key, with or without a pointer */
    assert_int_equal(bk_blocked_contains(f, "", 0), 0);
    assert_int_equal(bk_blocked_add(f, NULL, 0), 1);
    assert_int_equal(bk_blocked_contains(f, "", 0), 1);
    /* the _hash variants agree with the key variants */
    bk_hash h = bk_hash_key("plum", 4, bk_blocked_seed(f));
    assert_int_equal(bk_blocked_contains_hash(f, h), 0);
    assert_int_equal(bk_blocked_add_if_absent_hash(f, h), 1);
    assert_int_equal(bk_blocked_contains(f, "plum", 4), 1);
    assert_int_equal(bk_blocked_add_hash(f, h), 0);
    assert_true(bk_blocked_items(f) == 4);
    bk_blocked_free(f);
}

static void test_union_and_intersection(void **state)
{
    (void)state;
    const uint64_t n = 20000;
    bk_blocked *a, *b, *u, *x;
    assert_int_equal(bk_blocked_create(&a, 2 * n, 0.01, 17), BK_OK);
    assert_int_equal(bk_blocked_create(&b, 2 * n, 0.01, 17), BK_OK);
    add_range(a, 0, n, TAG_IN);              /* A = [0, n) */
    add_range(b, n / 2, n + n / 2, TAG_IN);  /* B = [n/2, 3n/2) */

    assert_int_equal(bk_blocked_clone(&u, a), BK_OK);
    assert_int_equal(bk_blocked_union(u, b), BK_OK);
    assert_true(count_found(u, 0, n + n / 2, TAG_IN) == n + n / 2);
    /* the union's count is the estimate of |A u B| = 1.5 n; the estimator's
     * relative error at this load is well under 2% */
    assert_true(fabs((double)bk_blocked_items(u) - 1.5 * n) < 0.03 * 1.5 * n);

    assert_int_equal(bk_blocked_clone(&x, a), BK_OK);
    assert_int_equal(bk_blocked_intersect(x, b), BK_OK);
    assert_true(count_found(x, n / 2, n, TAG_IN) == n / 2);
    /* keys only in A are mostly gone from the intersection */
    assert_true(count_found(x, 0, n / 2, TAG_IN) < n / 10);
    assert_true(bk_blocked_items(x) < bk_blocked_items(a));

    /* union is idempotent: the same bits again */
    bk_blocked *u2;
    assert_int_equal(bk_blocked_clone(&u2, u), BK_OK);
    assert_int_equal(bk_blocked_union(u2, a), BK_OK);
    assert_true(same_bits(u, u2));
    bk_blocked_free(u2);
    bk_blocked_free(a);
    bk_blocked_free(b);
    bk_blocked_free(u);
    bk_blocked_free(x);
}

static void test_clear_and_clone(void **state)
{
    (void)state;
    bk_blocked *f, *c;
    assert_int_equal(bk_blocked_create(&f, 10000, 0.001, 4), BK_OK);
    add_range(f, 0, 10000, TAG_IN);
    assert_int_equal(bk_blocked_clone(&c, f), BK_OK);
    assert_true(same_bits(f, c));
    assert_true(bk_blocked_items(c) == bk_blocked_items(f));
    assert_true(bk_blocked_bits(c) == bk_blocked_bits(f));
    assert_true(bk_blocked_hashes(c) == bk_blocked_hashes(f));
    assert_true(bk_blocked_seed(c) == 4);
    bk_blocked_clear(f);
    assert_true(bk_blocked_items(f) == 0);
    assert_true(count_found(f, 0, 10000, TAG_IN) == 0);
    assert_true(count_found(c, 0, 10000, TAG_IN) == 10000); /* independent */
    bk_blocked_stats st;
    assert_int_equal(bk_blocked_get_stats(f, &st), BK_OK);
    assert_true(st.bits_set == 0 && st.fpr_now == 0.0);
    bk_blocked_clear(NULL);
    bk_blocked_free(f);
    bk_blocked_free(c);
    bk_blocked_free(NULL);
}

static void test_stats_and_estimate(void **state)
{
    (void)state;
    const uint64_t n = 100000;
    bk_blocked *f;
    bk_blocked_stats st;
    assert_int_equal(bk_blocked_create(&f, n, 0.01, 8), BK_OK);
    assert_int_equal(bk_blocked_get_stats(f, &st), BK_OK);
    assert_true(st.bits == bk_blocked_bits(f));
    assert_true(st.blocks * 512 == st.bits);
    assert_true(st.blocks == bk_blocked_blocks(f));
    assert_true(st.hashes == bk_blocked_hashes(f));
    assert_true(st.capacity == n && st.target_fpr == 0.01);
    assert_true(st.items == 0 && st.bits_set == 0 && st.estimated_items == 0.0);
    assert_true(st.bytes >= st.bits / 8);

    add_range(f, 0, n, TAG_IN);
    assert_int_equal(bk_blocked_get_stats(f, &st), BK_OK);
    /* items counts adds that set a new bit: all but the rare key whose
     * bits were all set already (probability ~ the rate, 1%) */
    assert_true(st.items <= n && st.items > n - n / 20);
    assert_true(st.bits_set <= st.bits);
    assert_true(fabs(st.fill - (double)st.bits_set / st.bits) < 1e-15);
    assert_true(st.fullest_block_bits <= 512 && st.fullest_block_bits > 0);
    /* the per-block estimate: its relative error at this load is about
     * 0.5%; 3% is far outside it */
    assert_true(fabs(st.estimated_items - (double)n) < 0.03 * n);
    assert_true(st.estimated_items == bk_blocked_estimate_items(f));
    assert_true(st.fpr_at_capacity == bk_blocked_fpr(n, st.bits, st.hashes));

    /* a full block makes the estimate infinite */
    bk_blocked *tiny;
    assert_int_equal(bk_blocked_create_mk(&tiny, 512, 16, 1), BK_OK);
    add_range(tiny, 0, 5000, TAG_IN);
    assert_true(isinf(bk_blocked_estimate_items(tiny)));
    assert_int_equal(bk_blocked_get_stats(tiny, &st), BK_OK);
    assert_true(st.fullest_block_bits == 512 && st.fpr_now == 1.0);
    assert_int_equal(bk_blocked_union(tiny, tiny), BK_OK);
    assert_true(bk_blocked_items(tiny) > 0);
    bk_blocked_free(tiny);
    bk_blocked_free(f);
}

static void test_simd_level_api(void **state)
{
    (void)state;
    int best = bk_blocked_simd_best();
    assert_true(best >= BK_SIMD_SCALAR && best <= BK_SIMD_AVX512);
    assert_int_equal(bk_blocked_simd_level(), best); /* the default */
    assert_int_equal(bk_blocked_set_simd_level(BK_SIMD_SCALAR), best);
    assert_int_equal(bk_blocked_simd_level(), BK_SIMD_SCALAR);
    assert_int_equal(bk_blocked_set_simd_level(best), BK_SIMD_SCALAR);
    assert_int_equal(bk_blocked_set_simd_level(-1), BK_EINVAL);
    assert_int_equal(bk_blocked_set_simd_level(3), BK_EINVAL);
    if (best < BK_SIMD_AVX512)
        assert_int_equal(bk_blocked_set_simd_level(BK_SIMD_AVX512), BK_ENOTSUP);
    assert_int_equal(bk_blocked_simd_level(), best);
    assert_string_equal(bk_blocked_simd_name(BK_SIMD_SCALAR), "scalar");
    assert_string_equal(bk_blocked_simd_name(BK_SIMD_AVX2), "avx2");
    assert_string_equal(bk_blocked_simd_name(BK_SIMD_AVX512), "avx512");
    assert_string_equal(bk_blocked_simd_name(9), "unknown");
}

/*--------------------------------------------------------------------------
 * The split layout (bk_blocked_create_split): an independent model of its
 * definition (XXH3-64 of the key, block = fastrange(h, b), bit
 * (x * SALT[i]) >> 26 of word i for i < 8, x = low 32 bits of h), every
 * path and write mode storing the same bytes, its rate against its
 * formula, and its place beside the default layout.
 *--------------------------------------------------------------------------*/

static void split_model_mask(uint64_t h, uint64_t mask[8])
{
    uint32_t x = (uint32_t)h;
    for (int i = 0; i < 8; i++)
        mask[i] = UINT64_C(1) << ((uint32_t)(x * MODEL_SALT[i]) >> 26);
}

/* The split layout: XXH3-64 with f's seed, both halves of the hash; an
 * added key's hash must be the filter's own. */
static bk_hash split_key(const bk_blocked *f, const char *key, int added, uint64_t mask[8])
{
    uint64_t h = XXH3_64bits_withSeed(key, TU_KEY_LEN, bk_blocked_seed(f));
    bk_hash fh = {h, h};
    if (added) {
        fh = bk_blocked_hash_key(f, key, TU_KEY_LEN);
        assert_true(fh.lo == h && fh.hi == h);
    }
    split_model_mask(h, mask);
    return fh;
}

static void test_split_matches_model(void **state)
{
    (void)state;
    FOR_EACH_LEVEL(level) {
        const uint64_t n = 60, probes = 50000, seed = 77;
        bk_blocked *f;
        assert_int_equal(bk_blocked_create_split(&f, 40, 0.01, seed), BK_OK);
        assert_int_equal(bk_blocked_split(f), 1);
        assert_int_equal(bk_blocked_hashes(f), BK_BLOCKED_SPLIT_HASHES);
        assert_true(bk_blocked_seed(f) == seed);
        uint64_t nblocks = bk_blocked_blocks(f);
        assert_true(nblocks >= 1 && nblocks <= 8);
        /* n is 1.5x capacity: some probes are found */
        uint64_t found = check_model(f, level, nblocks, n, probes, split_key, "split");
        assert_true(found > 0 && found < probes); /* not vacuous */
        bk_blocked_free(f);
    }
    restore_level();
}

/* Keys of every length from 0 to 300 bytes (the split layout's hash has
 * an inline path up to 32 bytes and a call beyond): the hash is XXH3-64,
 * and every key added is found, at every level, by every entry point. */
static void test_split_key_lengths(void **state)
{
    (void)state;
    unsigned char key[300];
    for (size_t i = 0; i < sizeof(key); i++) key[i] = (unsigned char)(i * 131 + 7);
    FOR_EACH_LEVEL(level) {
        bk_blocked *f;
        assert_int_equal(bk_blocked_create_split(&f, 1000, 0.001, 5), BK_OK);
        for (size_t len = 0; len <= sizeof(key); len++) {
            bk_hash h = bk_blocked_hash_key(f, key, len);
            assert_true(h.lo == XXH3_64bits_withSeed(key, len, 5) && h.hi == h.lo);
            assert_int_equal(bk_blocked_add(f, key, len), 1);
        }
        for (size_t len = 0; len <= sizeof(key); len++) {
            assert_int_equal(bk_blocked_contains(f, key, len), 1);
            assert_int_equal(bk_blocked_contains_hash(f, bk_blocked_hash_key(f, key, len)), 1);
            assert_int_equal(bk_blocked_add(f, key, len), 0);
        }
        assert_true(bk_blocked_items(f) == sizeof(key) + 1);
        bk_blocked_free(f);
    }
    restore_level();
}

/* As test_paths_and_modes_identical, for the split layout: 20000 keys in
 * a filter sized for 3000, so that many adds find all their bits; the
 * fourth way of adding goes through bk_blocked_hash_key and _add_hash. */
static int create_split(bk_blocked **f, const void *arg)
{
    (void)arg;
    return bk_blocked_create_split(f, 3000, 0.01, 9);
}

static void test_split_paths_identical(void **state)
{
    (void)state;
    const uint64_t n = 20000, probes = 60000;
    probe_set ps = probes_make(n, probes, 1);
    uint64_t fresh = paths_identical(&ps, n, probes, create_split, NULL, 4, "split");
    assert_true(fresh < n && fresh > n / 2);
    restore_level();
    probes_free(&ps);
}

/* Variance of a split block's exact rate when its load is Poisson(lambda). */
static double split_rate_variance(double lambda)
{
    double mean = 0.0, square = 0.0, log_p = -lambda;
    for (double i = 0.0; i < lambda + 20.0 * sqrt(lambda) + 50.0; i += 1.0) {
        double rate = pow(-expm1(i * log1p(-1.0 / 64.0)), 8.0);
        double weight = exp(log_p);
        mean += weight * rate;
        square += weight * rate * rate;
        log_p += log(lambda / (i + 1.0));
    }
    return square - mean * mean;
}

/* 1e6 keys at 1%: the measured rate against the filter's exact current
 * rate (binomial spread of the trials) and against the formula (plus the
 * spread of the filter's own rate), the sizing's bits, and the estimate. */
static void test_split_fpr(void **state)
{
    (void)state;
    const double p = 0.01;
    bk_blocked *f;
    assert_int_equal(bk_blocked_create_split(&f, N_KEYS, p, 99), BK_OK);
    add_range(f, 0, N_KEYS, TAG_IN);
    assert_true(count_found(f, 0, N_KEYS, TAG_IN) == N_KEYS); /* no false negative */
    const uint64_t trials = 1000000;
    double measured = (double)count_found(f, 0, trials, TAG_OUT) / trials;
    uint64_t m = bk_blocked_bits(f), b = bk_blocked_blocks(f);
    double expected = bk_blocked_split_fpr(N_KEYS, m);
    bk_blocked_stats st;
    assert_int_equal(bk_blocked_get_stats(f, &st), BK_OK);
    double tol_given = tu_tolerance(st.fpr_now, trials, 5);
    double sd_filter = sqrt(split_rate_variance((double)N_KEYS / b) / b);
    double sd_trials = sqrt(expected * (1 - expected) / trials);
    double tol_formula = 5 * sqrt(sd_trials * sd_trials + sd_filter * sd_filter);
    print_message("split p=%g: m=%llu (%.3f bits/key) expected %.6f fpr_now %.6f "
                  "measured %.6f (tol %.6f), estimate %.0f\n",
                  p, (unsigned long long)m, (double)m / N_KEYS, expected, st.fpr_now,
                  measured, tol_formula, st.estimated_items);
    assert_true(fabs(measured - st.fpr_now) < tol_given);
    assert_true(fabs(measured - expected) < tol_formula);
    assert_true(fabs(st.fpr_now - expected) < 5 * sd_filter);
    assert_true(expected <= p);
    /* the smallest size that meets p: one block less would not */
    assert_true(bk_blocked_split_fpr(N_KEYS, m - 512) > p);
    assert_true((double)m / N_KEYS < 10.2); /* 10.10 by the formula */
    assert_true(fabs(st.fpr_at_capacity - expected) < 1e-12);
    assert_int_equal(st.hashes, BK_BLOCKED_SPLIT_HASHES);
    /* each word holds one bit per key: the mean of eight per-word
     * estimates, within 1% of the keys at this load */
    assert_true(fabs(st.estimated_items - N_KEYS) < 0.01 * N_KEYS);
    bk_blocked_free(f);
}

/* Set operations between split filters; none across layouts; the hash of
 * the default layout stays bk_hash_key; bad parameters. */
static void test_split_beside_default(void **state)
{
    (void)state;
    const uint64_t n = 20000;
    bk_blocked *a, *b, *plain, *f = (bk_blocked *)&f;
    char key[TU_KEY_LEN];
    assert_int_equal(bk_blocked_create_split(&a, 2 * n, 0.01, 17), BK_OK);
    assert_int_equal(bk_blocked_create_split(&b, 2 * n, 0.01, 17), BK_OK);
    add_range(a, 0, n, TAG_IN);
    add_range(b, n / 2, n + n / 2, TAG_IN);
    assert_int_equal(bk_blocked_union(a, b), BK_OK);
    assert_true(count_found(a, 0, n + n / 2, TAG_IN) == n + n / 2);
    assert_true(fabs((double)bk_blocked_items(a) - 1.5 * n) < 0.03 * 1.5 * n);
    /* a default filter of the same blocks, k and seed is still another layout */
    assert_int_equal(bk_blocked_create_mk(&plain, bk_blocked_bits(a), 8, 17), BK_OK);
    assert_int_equal(bk_blocked_split(plain), 0);
    assert_int_equal(bk_blocked_union(plain, a), BK_EINCOMPAT);
    assert_int_equal(bk_blocked_intersect(a, plain), BK_EINCOMPAT);
    tu_key(key, 1, TAG_IN);
    bk_hash h1 = bk_blocked_hash_key(plain, key, sizeof(key)), h2 = bk_hash_key(key, sizeof(key), 17);
    assert_true(h1.lo == h2.lo && h1.hi == h2.hi);
    /* a clone keeps the layout */
    bk_blocked *c;
    assert_int_equal(bk_blocked_clone(&c, a), BK_OK);
    assert_int_equal(bk_blocked_split(c), 1);
    assert_true(same_bits(a, c));
    bk_blocked_free(c);
    bk_blocked_free(plain);
    bk_blocked_free(a);
    bk_blocked_free(b);

    uint64_t m;
    assert_int_equal(bk_blocked_create_split(NULL, 100, 0.01, 0), BK_EINVAL);
    assert_int_equal(bk_blocked_create_split(&f, 0, 0.01, 0), BK_ECAPACITY);
    assert_null(f);
    assert_int_equal(bk_blocked_create_split(&f, 100, 0.0, 0), BK_EFPR);
    assert_int_equal(bk_blocked_create_split(&f, 100, NAN, 0), BK_EFPR);
    assert_int_equal(bk_blocked_create_split(&f, UINT64_MAX, 0.01, 0), BK_ESIZE);
    assert_int_equal(bk_blocked_optimal_split(10, 1.5, &m), BK_EFPR);
    assert_true(isnan(bk_blocked_split_fpr(10, 0)));
    assert_true(bk_blocked_split_fpr(0, 512) == 0.0);
}

static void test_invalid_parameters(void **state)
{
    (void)state;
    bk_blocked *f = (bk_blocked *)&f; /* any non-NULL value: must be reset */
    uint64_t m, n;
    uint32_t k;
    const double nan = NAN;

    assert_int_equal(bk_blocked_create(NULL, 100, 0.01, 0), BK_EINVAL);
    assert_int_equal(bk_blocked_create(&f, 0, 0.01, 0), BK_ECAPACITY);
    assert_null(f);
    assert_int_equal(bk_blocked_create(&f, 100, 0.0, 0), BK_EFPR);
    assert_int_equal(bk_blocked_create(&f, 100, 1.0, 0), BK_EFPR);
    assert_int_equal(bk_blocked_create(&f, 100, -0.5, 0), BK_EFPR);
    assert_int_equal(bk_blocked_create(&f, 100, nan, 0), BK_EFPR);
    assert_int_equal(bk_blocked_create(&f, UINT64_MAX, 0.01, 0), BK_ESIZE);
    assert_null(f);

    assert_int_equal(bk_blocked_create_mk(NULL, 512, 3, 0), BK_EINVAL);
    assert_int_equal(bk_blocked_create_mk(&f, 0, 3, 0), BK_ESIZE);
    assert_int_equal(bk_blocked_create_mk(&f, BK_MAX_BITS + 1, 3, 0), BK_ESIZE);
    assert_int_equal(bk_blocked_create_mk(&f, 512, 0, 0), BK_EHASHES);
    assert_int_equal(bk_blocked_create_mk(&f, 512, BK_BLOCKED_MAX_HASHES + 1, 0),
                     BK_EHASHES);
    assert_null(f);
    assert_int_equal(bk_blocked_create_mk(&f, 1, BK_BLOCKED_MAX_HASHES, 0), BK_OK);
    assert_true(bk_blocked_bits(f) == 512); /* rounded up to one block */

    assert_int_equal(bk_blocked_optimal(0, 0.01, &m, &k), BK_ECAPACITY);
    assert_int_equal(bk_blocked_optimal(10, 0.0, &m, &k), BK_EFPR);
    assert_int_equal(bk_blocked_optimal(10, nan, &m, &k), BK_EFPR);
    assert_int_equal(bk_blocked_optimal(UINT64_MAX / 2, 1e-9, &m, &k), BK_ESIZE);
    assert_true(isnan(bk_blocked_fpr(10, 0, 3)));
    assert_true(isnan(bk_blocked_fpr(10, 512, 0)));
    assert_true(isnan(bk_blocked_fpr(10, 512, BK_BLOCKED_MAX_HASHES + 1)));
    assert_int_equal(bk_blocked_capacity(512, 1.5, &n), BK_EFPR);
    assert_int_equal(bk_blocked_capacity(0, 0.01, &n), BK_ESIZE);
    assert_int_equal(bk_blocked_capacity(BK_MAX_BITS + 1, 0.01, &n), BK_ESIZE);
    /* one key in one block at k <= 16 cannot reach 1e-30 */
    assert_int_equal(bk_blocked_capacity(512, 1e-30, &n), BK_ECAPACITY);

    /* set operations */
    bk_blocked *g, *h;
    assert_int_equal(bk_blocked_union(NULL, f), BK_EINVAL);
    assert_int_equal(bk_blocked_union(f, NULL), BK_EINVAL);
    assert_int_equal(bk_blocked_intersect(NULL, f), BK_EINVAL);
    assert_int_equal(bk_blocked_create_mk(&g, 1024, BK_BLOCKED_MAX_HASHES, 0), BK_OK);
    assert_int_equal(bk_blocked_union(f, g), BK_EINCOMPAT);       /* size */
    assert_int_equal(bk_blocked_intersect(f, g), BK_EINCOMPAT);
    bk_blocked_free(g);
    assert_int_equal(bk_blocked_create_mk(&g, 512, 3, 0), BK_OK);
    assert_int_equal(bk_blocked_union(f, g), BK_EINCOMPAT);       /* k */
    bk_blocked_free(g);
    assert_int_equal(bk_blocked_create_mk(&h, 512, BK_BLOCKED_MAX_HASHES, 1), BK_OK);
    assert_int_equal(bk_blocked_intersect(f, h), BK_EINCOMPAT);   /* seed */

    /* clone, stats, batches */
    assert_int_equal(bk_blocked_clone(NULL, f), BK_EINVAL);
    assert_int_equal(bk_blocked_clone(&g, NULL), BK_EINVAL);
    assert_null(g);
    bk_blocked_stats st;
    assert_int_equal(bk_blocked_get_stats(NULL, &st), BK_EINVAL);
    assert_int_equal(bk_blocked_get_stats(f, NULL), BK_EINVAL);
    size_t len = 1;
    const void *key = "a";
    assert_true(bk_blocked_add_batch(NULL, &key, &len, 1, NULL) == BK_EINVAL);
    assert_true(bk_blocked_add_batch(f, NULL, &len, 1, NULL) == BK_EINVAL);
    assert_true(bk_blocked_add_batch(f, &key, NULL, 1, NULL) == BK_EINVAL);
    assert_true(bk_blocked_contains_batch(NULL, &key, &len, 1, NULL) == BK_EINVAL);
    assert_true(bk_blocked_contains_batch(f, NULL, &len, 1, NULL) == BK_EINVAL);
    assert_true(bk_blocked_contains_batch(f, &key, NULL, 1, NULL) == BK_EINVAL);
    assert_true(bk_blocked_add_batch(f, NULL, NULL, 0, NULL) == 0);
    assert_true(bk_blocked_contains_batch(f, NULL, NULL, 0, NULL) == 0);
    bk_blocked_free(h);
    bk_blocked_free(f);
}

/*--------------------------------------------------------------------------
 * Allocation failures: every constructor, each allocation in turn.
 *--------------------------------------------------------------------------*/

/* The end of an attempt (tu_oom_loop) of a constructor that answered rc
 * and made f: on failure f is NULL; on success f, once check(f) has run
 * (when given), is freed. */
static int settle(int rc, bk_blocked *f, void (*check)(bk_blocked *f))
{
    if (rc == BK_OK) {
        if (check != NULL) check(f);
        bk_blocked_free(f);
    } else {
        assert_null(f);
    }
    return rc;
}

static void adds_x(bk_blocked *f) { assert_int_equal(bk_blocked_add(f, "x", 1), 1); }

static void finds_y(bk_blocked *f) { assert_int_equal(bk_blocked_contains(f, "y", 1), 1); }

static int try_create(void *ctx)
{
    (void)ctx;
    bk_blocked *f;
    int rc = bk_blocked_create(&f, 1000, 0.01, 1);
    return settle(rc, f, adds_x);
}

static int try_create_mk(void *ctx)
{
    (void)ctx;
    bk_blocked *f;
    int rc = bk_blocked_create_mk(&f, 4096, 5, 1);
    return settle(rc, f, NULL);
}

static int try_clone(void *ctx)
{
    bk_blocked *c;
    int rc = bk_blocked_clone(&c, ctx);
    return settle(rc, c, finds_y);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    assert_true(tu_oom_loop(try_create, NULL) == 2);
    assert_true(tu_oom_loop(try_create_mk, NULL) == 2);
    bk_blocked *f;
    assert_int_equal(bk_blocked_create(&f, 100, 0.01, 2), BK_OK);
    bk_blocked_add(f, "y", 1);
    /* f was made with the default allocator; the clone alone runs under the
     * failing one, and tu_oom_loop counts only what the clone holds */
    assert_true(tu_oom_loop(try_clone, f) == 2);
    bk_blocked_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simd_level_api),
        cmocka_unit_test(test_paths_and_modes_identical),
        cmocka_unit_test(test_write_mode_api),
        cmocka_unit_test(test_sizing_cache),
        cmocka_unit_test(test_no_false_negatives),
        cmocka_unit_test(test_fpr_1_percent),
        cmocka_unit_test(test_fpr_01_percent),
        cmocka_unit_test(test_formula_on_small_filters),
        cmocka_unit_test(test_sizing),
        cmocka_unit_test(test_layout_matches_model),
        cmocka_unit_test(test_levels_identical),
        cmocka_unit_test(test_batch_equals_single),
        cmocka_unit_test(test_add_and_add_if_absent),
        cmocka_unit_test(test_union_and_intersection),
        cmocka_unit_test(test_clear_and_clone),
        cmocka_unit_test(test_stats_and_estimate),
        cmocka_unit_test(test_invalid_parameters),
        cmocka_unit_test(test_split_matches_model),
        cmocka_unit_test(test_split_key_lengths),
        cmocka_unit_test(test_split_paths_identical),
        cmocka_unit_test(test_split_fpr),
        cmocka_unit_test(test_split_beside_default),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
