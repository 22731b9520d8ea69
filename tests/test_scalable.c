/*
 * test_scalable.c - the scalable Bloom filter.
 *
 * False-positive checks measure the rate on keys never added (tag 2) and
 * compare it with the filter's own bound; the tolerance is 5 binomial
 * standard deviations of the number of trials at that rate (a correct
 * filter fails a check with probability ~3e-7; the seeds are fixed, so a
 * run is reproducible either way).
 */
#include "testutil.h"

#define TAG_IN 1u
#define TAG_OUT 2u

/* Add keys [from, to); returns how many adds answered 1. Every add must
 * succeed. */
static uint64_t add_range(bk_scalable *f, uint64_t from, uint64_t to,
                          uint64_t tag)
{
    char key[TU_KEY_LEN];
    uint64_t added = 0;
    for (uint64_t i = from; i < to; i++) {
        tu_key(key, i, tag);
        int r = bk_scalable_add(f, key, sizeof(key));
        if (r < 0) fail_msg("add %llu: %s", (unsigned long long)i, bk_errname(r));
        added += (uint64_t)r;
    }
    return added;
}

TU_COUNT_FOUND(count_found, bk_scalable, bk_scalable_contains)

/* Add new keys (tag, from *next on) until an add fails; returns its code. */
static int add_until_error(bk_scalable *f, uint64_t tag, uint64_t *next)
{
    char key[TU_KEY_LEN];
    for (;;) {
        tu_key(key, *next, tag);
        int r = bk_scalable_add(f, key, sizeof(key));
        if (r < 0) return r;
        (*next)++;
    }
}

/*--------------------------------------------------------------------------*/

static void test_create_errors(void **state)
{
    (void)state;
    bk_scalable *f = (bk_scalable *)1;
    assert_int_equal(bk_scalable_create(NULL, 100, 0.01, 2, 0, 1), BK_EINVAL);
    assert_int_equal(bk_scalable_create(&f, 0, 0.01, 2, 0, 1), BK_ECAPACITY);
    assert_null(f);
    assert_int_equal(bk_scalable_create(&f, 100, 0.0, 2, 0, 1), BK_EFPR);
    assert_int_equal(bk_scalable_create(&f, 100, 1.0, 2, 0, 1), BK_EFPR);
    assert_int_equal(bk_scalable_create(&f, 100, NAN, 2, 0, 1), BK_EFPR);
    assert_int_equal(bk_scalable_create(&f, 100, 0.01, 0, 0, 1), BK_EPARAM);
    assert_int_equal(bk_scalable_create(&f, 100, 0.01, 2, 4u, 1), BK_EPARAM);
    assert_int_equal(bk_scalable_create(&f, UINT64_C(1) << 62, 0.01, 2, 0, 1),
                     BK_ESIZE);
    bk_scalable_free(NULL);

    /* RedisBloom's defaults */
    assert_int_equal(bk_scalable_create(&f, BK_SCALABLE_DEFAULT_CAPACITY,
                                        BK_SCALABLE_DEFAULT_ERROR,
                                        BK_SCALABLE_DEFAULT_EXPANSION, 0,
                                        BK_DEFAULT_SEED),
                     BK_OK);
    assert_true(bk_scalable_capacity(f) == 100);
    assert_true(bk_scalable_error(f) == 0.01);
    assert_int_equal(bk_scalable_expansion(f), 2);
    assert_int_equal(bk_scalable_stages(f), 1);
    assert_true(bk_scalable_items(f) == 0);
    assert_true(bk_scalable_seed(f) == BK_DEFAULT_SEED);
    assert_int_equal(bk_scalable_max_stages(f), BK_SCALABLE_MAX_STAGES);
    assert_true(bk_scalable_max_bytes(f) == 0);
    assert_int_equal(bk_scalable_set_max_stages(f, 0), BK_EPARAM);
    assert_int_equal(bk_scalable_set_max_stages(f, BK_SCALABLE_MAX_STAGES + 1),
                     BK_EPARAM);
    bk_scalable_stage_stats st;
    assert_int_equal(bk_scalable_get_stage_stats(f, 1, &st), BK_EPARAM);
    assert_int_equal(bk_scalable_get_stage_stats(f, 0, NULL), BK_EINVAL);
    assert_int_equal(bk_scalable_add(NULL, "x", 1), BK_EINVAL);
    assert_int_equal(bk_scalable_contains(NULL, "x", 1), 0);
    bk_scalable_free(f);
}

/* Grow from capacity 100 to 1e6 keys: 14 stages (100 (2^13 - 1) = 819100 <
 * 1e6 <= 100 (2^14 - 1)). No key added is ever missing, the stages follow
 * the rate schedule (lib/scalable.c), and the measured rate stays within
 * the compound bound 1 - prod (1 - p_i) (under 2p without
 * BK_SCALABLE_BOUNDED) or, with it, within p itself. */
static void check_growth(unsigned flags)
{
    const double p = 0.01;
    const uint64_t n = 1000000, trials = 1000000;
    bk_scalable *f;
    assert_int_equal(bk_scalable_create(&f, 100, p, 2, flags, 17), BK_OK);
    uint64_t added = add_range(f, 0, n, TAG_IN);
    assert_true(count_found(f, 0, n, TAG_IN) == n);

    bk_scalable_stats st = tu_scalable_stats(f);
    assert_true(st.items == added);
    assert_true(bk_scalable_items(f) == added);
    /* an add answers 0 only for a false positive: at most ~2% of them */
    assert_true(added > n - n / 40 && added <= n);
    assert_int_equal(st.stages, 14);
    assert_true(st.capacity == 100 * ((UINT64_C(1) << 14) - 1));
    assert_true(bk_scalable_capacity(f) == st.capacity);
    assert_true(st.bytes == bk_scalable_bytes(f));

    /* the schedule: stage 0 at half the budget (bounded) or p, the later
     * stages sharing the rest with ratio 0.9 */
    double p0 = (flags & BK_SCALABLE_BOUNDED) ? p / 2 : p;
    double rest = (flags & BK_SCALABLE_BOUNDED) ? p / 2 : p;
    uint64_t total = 0;
    size_t bytes = 0;
    for (uint32_t i = 0; i < st.stages; i++) {
        bk_scalable_stage_stats ss = tu_scalable_stage(f, i);
        assert_true(ss.capacity == (UINT64_C(100) << i));
        double want = i == 0 ? p0 : rest * (1 - 0.9) * pow(0.9, (double)(i - 1));
        assert_true(fabs(ss.target_fpr - want) < 1e-12 * want);
        if (i + 1 < st.stages) assert_true(ss.items == ss.capacity);
        else assert_true(ss.items <= ss.capacity && ss.items > 0);
        total += ss.items;
        bytes += ss.bytes;
        assert_true(ss.bits >= ss.capacity * 9); /* >= 9 bits per key */
    }
    assert_true(total == added);
    assert_true(bytes < st.bytes && st.bytes - bytes < 4096);

    double measured = (double)count_found(f, 0, trials, TAG_OUT) / trials;
    double tol = tu_tolerance(st.fpr_bound, trials, 5);
    print_message("flags=%u: %u stages, %.2f bits/key, measured %.5f, "
                  "fpr_now %.5f, bound %.5f (tol %.5f), limit %.4f, "
                  "estimate %.0f for %llu items\n",
                  flags, st.stages, 8.0 * (double)st.bytes / (double)added,
                  measured, st.fpr_now, st.fpr_bound, tol, st.fpr_limit,
                  st.estimated_items, (unsigned long long)added);
    assert_true(measured < st.fpr_bound + tol);
    assert_true(st.fpr_bound < st.fpr_limit);
    assert_true(fabs(measured - st.fpr_now) <
                tu_tolerance(st.fpr_now, trials, 5));
    if (flags & BK_SCALABLE_BOUNDED) {
        assert_true(st.fpr_limit == p);
        assert_true(measured < p + tu_tolerance(p, trials, 5));
    } else {
        assert_true(st.fpr_limit == 2 * p);
    }
    /* the estimate of distinct keys: within 3% */
    assert_true(fabs(st.estimated_items - (double)added) < 0.03 * (double)added);
    bk_scalable_free(f);
}

static void test_growth_redisbloom(void **state) { (void)state; check_growth(0); }
static void test_growth_bounded(void **state)
{
    (void)state;
    check_growth(BK_SCALABLE_BOUNDED);
}

/* Duplicates are not counted and do not grow the filter (BF.CARD). */
static void test_duplicates_not_counted(void **state)
{
    (void)state;
    bk_scalable *f;
    assert_int_equal(bk_scalable_create(&f, 100, 0.01, 2, 0, 3), BK_OK);
    uint64_t added = add_range(f, 0, 1000, TAG_IN);
    uint32_t stages = bk_scalable_stages(f);
    assert_true(add_range(f, 0, 1000, TAG_IN) == 0);
    assert_true(bk_scalable_items(f) == added);
    assert_int_equal(bk_scalable_stages(f), stages);
    bk_scalable_free(f);
}

/* Expansion 1: 64 stages of 100 keys, then BK_ELIMIT and nothing changes. */
static void test_stage_cap(void **state)
{
    (void)state;
    bk_scalable *f;
    uint64_t next = 0;
    char key[TU_KEY_LEN];
    assert_int_equal(bk_scalable_create(&f, 100, 0.01, 1, 0, 5), BK_OK);
    assert_int_equal(add_until_error(f, TAG_IN, &next), BK_ELIMIT);
    assert_int_equal(bk_scalable_stages(f), BK_SCALABLE_MAX_STAGES);
    assert_true(bk_scalable_items(f) == 100 * BK_SCALABLE_MAX_STAGES);
    assert_true(bk_scalable_capacity(f) == 100 * BK_SCALABLE_MAX_STAGES);
    size_t bytes = bk_scalable_bytes(f);
    /* the refused key is not there; the filter did not change */
    tu_key(key, next, TAG_IN);
    assert_int_equal(bk_scalable_contains(f, key, sizeof(key)), 0);
    assert_int_equal(bk_scalable_add(f, key, sizeof(key)), BK_ELIMIT);
    assert_int_equal(bk_scalable_contains(f, key, sizeof(key)), 0);
    assert_true(bk_scalable_items(f) == 100 * BK_SCALABLE_MAX_STAGES);
    assert_true(bk_scalable_bytes(f) == bytes);
    /* keys already present still answer 0, not an error */
    tu_key(key, 0, TAG_IN);
    assert_int_equal(bk_scalable_add(f, key, sizeof(key)), 0);
    assert_true(count_found(f, 0, next, TAG_IN) == next);
    bk_scalable_stats st = tu_scalable_stats(f);
    print_message("64 stages: %zu bytes, bound %.5f\n", st.bytes, st.fpr_bound);
    bk_scalable_free(f);

    /* a lower cap, set by the caller */
    assert_int_equal(bk_scalable_create(&f, 100, 0.01, 2, 0, 5), BK_OK);
    assert_int_equal(bk_scalable_set_max_stages(f, 3), BK_OK);
    next = 0;
    assert_int_equal(add_until_error(f, TAG_IN, &next), BK_ELIMIT);
    assert_int_equal(bk_scalable_stages(f), 3);
    assert_true(bk_scalable_items(f) == 700);
    /* raising it lets the filter grow again */
    assert_int_equal(bk_scalable_set_max_stages(f, 4), BK_OK);
    assert_int_equal(add_until_error(f, TAG_IN, &next), BK_ELIMIT);
    assert_true(bk_scalable_items(f) == 1500);
    bk_scalable_free(f);
}

/* NONSCALING: one stage; a new key beyond capacity is BK_EFULL. */
static void test_nonscaling(void **state)
{
    (void)state;
    bk_scalable *f;
    uint64_t next = 0;
    char key[TU_KEY_LEN];
    assert_int_equal(bk_scalable_create(&f, 100, 0.01, 2,
                                        BK_SCALABLE_NONSCALING, 7),
                     BK_OK);
    assert_int_equal(bk_scalable_expansion(f), 0);
    assert_int_equal(bk_scalable_max_stages(f), 1);
    assert_int_equal(add_until_error(f, TAG_IN, &next), BK_EFULL);
    assert_true(bk_scalable_items(f) == 100);
    assert_int_equal(bk_scalable_stages(f), 1);
    tu_key(key, next, TAG_IN);
    assert_int_equal(bk_scalable_add(f, key, sizeof(key)), BK_EFULL);
    assert_int_equal(bk_scalable_contains(f, key, sizeof(key)), 0);
    assert_true(bk_scalable_items(f) == 100);
    tu_key(key, 0, TAG_IN);
    assert_int_equal(bk_scalable_add(f, key, sizeof(key)), 0);
    /* the stage limit cannot be raised */
    assert_int_equal(bk_scalable_set_max_stages(f, 10), BK_OK);
    assert_int_equal(bk_scalable_max_stages(f), 1);
    bk_scalable_stats st = tu_scalable_stats(f);
    assert_int_equal(st.nonscaling, 1);
    assert_int_equal(st.expansion, 0);
    assert_true(st.fpr_limit == 0.01);
    bk_scalable_free(f);
}

/* The memory cap stops growth before allocating; 0 lifts it. */
static void test_memory_cap(void **state)
{
    (void)state;
    bk_scalable *f;
    uint64_t next = 0;
    assert_int_equal(bk_scalable_create(&f, 1000, 0.01, 2, 0, 9), BK_OK);
    size_t initial = bk_scalable_bytes(f);
    /* room for stage 1 (about 3.5 times stage 0: twice the keys at a tenth
     * of the rate) but not stage 2 (twice stage 1) */
    size_t cap = initial + 6 * initial + 1024;
    assert_int_equal(bk_scalable_set_max_bytes(f, cap), BK_OK);
    assert_true(bk_scalable_max_bytes(f) == cap);
    assert_int_equal(add_until_error(f, TAG_IN, &next), BK_ELIMIT);
    assert_int_equal(bk_scalable_stages(f), 2);
    assert_true(bk_scalable_bytes(f) <= cap);
    assert_true(bk_scalable_items(f) == 3000);
    assert_int_equal(bk_scalable_set_max_bytes(f, 0), BK_OK);
    add_range(f, next, next + 2000, TAG_IN);
    assert_int_equal(bk_scalable_stages(f), 3);
    bk_scalable_free(f);

    /* a cap below the current size only stops growth */
    assert_int_equal(bk_scalable_create(&f, 1000, 0.01, 2, 0, 9), BK_OK);
    assert_int_equal(bk_scalable_set_max_bytes(f, 1), BK_OK);
    next = 0;
    assert_int_equal(add_until_error(f, TAG_IN, &next), BK_ELIMIT);
    assert_true(bk_scalable_items(f) == 1000);
    assert_true(count_found(f, 0, next, TAG_IN) == next);
    bk_scalable_free(f);
}

static void test_clear(void **state)
{
    (void)state;
    bk_scalable *f;
    assert_int_equal(bk_scalable_create(&f, 100, 0.01, 2, 0, 11), BK_OK);
    size_t initial = bk_scalable_bytes(f);
    add_range(f, 0, 5000, TAG_IN);
    assert_true(bk_scalable_stages(f) > 1);
    bk_scalable_clear(f);
    assert_int_equal(bk_scalable_stages(f), 1);
    assert_true(bk_scalable_items(f) == 0);
    assert_true(bk_scalable_bytes(f) == initial);
    assert_true(count_found(f, 0, 5000, TAG_IN) == 0);
    assert_true(add_range(f, 0, 50, TAG_IN) >= 49);
    bk_scalable_clear(NULL);
    bk_scalable_free(f);
}

/* Batches and pre-hashed keys give what single calls give. */
static void test_batch_and_hash(void **state)
{
    (void)state;
    enum { N = 3000 };
    tu_keyset ks;
    tu_keyset_make_cycle(&ks, N, 2000, TAG_IN); /* 1000 duplicates */
    const void **ptrs = ks.keys;
    const size_t *lens = ks.lens;
    int results[N];
    uint8_t found[N];
    bk_scalable *a, *b;
    assert_int_equal(bk_scalable_create(&a, 100, 0.01, 2, 0, 13), BK_OK);
    assert_int_equal(bk_scalable_create(&b, 100, 0.01, 2, 0, 13), BK_OK);
    int64_t added = bk_scalable_add_batch(a, ptrs, lens, N, results);
    int64_t single = 0;
    for (int i = 0; i < N; i++) {
        int r = bk_scalable_add_hash(b, bk_hash_key(ptrs[i], TU_KEY_LEN, 13));
        assert_int_equal(r, results[i]);
        single += r;
        if (i >= 2000) assert_int_equal(r, 0);
    }
    assert_true(added == single);
    assert_true((uint64_t)added == bk_scalable_items(a));
    assert_true(bk_scalable_contains_batch(a, ptrs, lens, N, found) == N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(found[i], 1);
        assert_int_equal(bk_scalable_contains_hash(
                             a, bk_hash_key(ptrs[i], TU_KEY_LEN, 13)), 1);
    }
    assert_true(bk_scalable_add_batch(a, NULL, lens, 1, NULL) == BK_EINVAL);
    assert_true(bk_scalable_contains_batch(a, ptrs, NULL, 1, NULL) == BK_EINVAL);
    assert_true(bk_scalable_add_batch(a, NULL, NULL, 0, NULL) == 0);
    bk_scalable_free(a);
    bk_scalable_free(b);
    tu_keyset_free(&ks);
}

/* The generic handle: it is the filter, and its info is the filter's
 * stages, capacity, items, bytes and fill (its family, seed, removes
 * refused: test_conformance.c, rows "scalable"). */
static void test_generic(void **state)
{
    (void)state;
    bk_scalable *f;
    bk_bloom *other;
    char key[TU_KEY_LEN];
    assert_int_equal(bk_scalable_create(&f, 100, 0.01, 2, 0, 21), BK_OK);
    bk_filter *g = bk_scalable_as_filter(f);
    assert_true(bk_filter_as_scalable(g) == f);
    for (uint64_t i = 0; i < 1000; i++) {
        tu_key(key, i, TAG_IN);
        assert_true(bk_filter_add(g, key, sizeof(key)) >= 0);
        assert_int_equal(bk_filter_contains(g, key, sizeof(key)), 1);
    }
    assert_int_equal(bk_filter_count(g, key, sizeof(key)), 1); /* grown: stages */
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(g, &info), BK_OK);
    assert_int_equal(info.parts, bk_scalable_stages(f));
    assert_true(info.capacity == bk_scalable_capacity(f));
    assert_true(info.items == bk_scalable_items(f));
    assert_true(info.bytes == bk_scalable_bytes(f));
    assert_true(info.fill > 0.0 && info.fill < 1.0);

    assert_int_equal(bk_bloom_create(&other, 100, 0.01, 1), BK_OK);
    assert_null(bk_filter_as_scalable(bk_bloom_as_filter(other)));
    assert_null(bk_filter_as_scalable(NULL));
    bk_bloom_free(other);
    bk_filter_free(g);
}

/*--------------------------------------------------------------------------
 * Allocation failures: in the constructor, and in every growth step.
 *--------------------------------------------------------------------------*/

static int attempt_create(void *ctx)
{
    (void)ctx;
    bk_scalable *f;
    int rc = bk_scalable_create(&f, 1000, 0.01, 2, 0, 1);
    if (rc != BK_OK) return rc;
    bk_scalable_free(f);
    return BK_OK;
}

/* Grow to 4 stages; when an add fails it must be ENOMEM with nothing
 * changed: same items, same stages, the key absent, older keys present. */
static int attempt_growth(void *ctx)
{
    (void)ctx;
    bk_scalable *f;
    char key[TU_KEY_LEN];
    int rc = bk_scalable_create(&f, 10, 0.01, 2, 0, 1);
    if (rc != BK_OK) return rc;
    for (uint64_t i = 0; bk_scalable_stages(f) < 4; i++) {
        uint64_t items = bk_scalable_items(f);
        uint32_t stages = bk_scalable_stages(f);
        size_t bytes = bk_scalable_bytes(f);
        tu_key(key, i, TAG_IN);
        int was = bk_scalable_contains(f, key, sizeof(key));
        rc = bk_scalable_add(f, key, sizeof(key));
        if (rc < 0) {
            assert_int_equal(rc, BK_ENOMEM);
            assert_true(bk_scalable_items(f) == items);
            assert_int_equal(bk_scalable_stages(f), stages);
            assert_true(bk_scalable_bytes(f) == bytes);
            assert_int_equal(bk_scalable_contains(f, key, sizeof(key)), was);
            assert_true(count_found(f, 0, i, TAG_IN) == i);
            bk_scalable_free(f);
            return rc;
        }
    }
    bk_scalable_free(f);
    return BK_OK;
}

static void test_oom(void **state)
{
    (void)state;
    tu_oom_report("create", attempt_create, NULL);
    long n = tu_oom_report("create + 3 growth steps", attempt_growth, NULL);
    /* the handle with stage 0, then per stage one allocation, plus the
     * stage directory with the first one */
    assert_true(n >= 5);
}

/* add_nogrow never adds a stage: a new key past the newest stage's capacity
 * gets BK_EFULL with nothing changed; present keys still answer 0. */
/* The single-writer mode stores the same bits as the concurrent one, in
 * the classic first stage and the blocked stages after it. */
static void test_single_writer(void **state)
{
    (void)state;
    bk_scalable *a, *b;
    assert_int_equal(bk_scalable_create(&a, 1000, 0.01, 2, 0, 7), BK_OK);
    assert_int_equal(bk_scalable_create(&b, 1000, 0.01, 2, 0, 7), BK_OK);
    assert_int_equal(bk_scalable_single_writer(b), 0);
    assert_int_equal(bk_filter_set_single_writer(bk_scalable_as_filter(b), 1), BK_OK);
    assert_int_equal(bk_scalable_single_writer(b), 1);
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(bk_scalable_as_filter(b), &info), BK_OK);
    assert_int_equal(info.single_writer, 1);
    char key[32];
    for (int i = 0; i < 20000; i++) {
        int n = snprintf(key, sizeof key, "sw-%d", i);
        int ra = bk_scalable_add(a, key, (size_t)n), rb = bk_scalable_add(b, key, (size_t)n);
        assert_int_equal(ra, rb);
    }
    bk_scalable_stats sa, sb;
    assert_int_equal(bk_scalable_get_stats(a, &sa), BK_OK);
    assert_int_equal(bk_scalable_get_stats(b, &sb), BK_OK);
    assert_true(sa.stages >= 4);
    assert_int_equal(sa.stages, sb.stages);
    assert_int_equal(sa.items, sb.items);
    uint64_t size = bk_filter_serialized_size(bk_scalable_as_filter(a));
    assert_int_equal(size, bk_filter_serialized_size(bk_scalable_as_filter(b)));
    unsigned char *ba = malloc((size_t)size), *bb = malloc((size_t)size);
    assert_non_null(ba);
    assert_non_null(bb);
    assert_int_equal(bk_filter_serialize(bk_scalable_as_filter(a), ba, (size_t)size), BK_OK);
    assert_int_equal(bk_filter_serialize(bk_scalable_as_filter(b), bb, (size_t)size), BK_OK);
    assert_memory_equal(ba, bb, (size_t)size);
    free(ba);
    free(bb);
    bk_scalable_free(a);
    bk_scalable_free(b);
}

/* The prefetching batch of nogrow adds answers as the adds one by one and
 * stops where a new stage is needed. */
static void test_add_nogrow_batch(void **state)
{
    (void)state;
    bk_scalable *a, *b;
    assert_int_equal(bk_scalable_create(&a, 1000, 0.01, 2, 0, 9), BK_OK);
    assert_int_equal(bk_scalable_create(&b, 1000, 0.01, 2, 0, 9), BK_OK);
    enum { N = 1500 };
    static char text[N][16];
    const void *keys[N];
    size_t lens[N];
    int res[N];
    for (int i = 0; i < N; i++) {
        /* every tenth key repeats an earlier one: some answers are 0 */
        lens[i] = (size_t)snprintf(text[i], sizeof text[i], "nb-%d", i % 10 == 9 ? i / 2 : i);
        keys[i] = text[i];
    }
    int64_t done = bk_scalable_add_nogrow_batch(b, keys, lens, N, res);
    assert_true(done > 900 && done < N);   /* stage 0 holds 1000 new keys */
    for (int64_t i = 0; i < done; i++)
        assert_int_equal(res[i], bk_scalable_add_nogrow(a, keys[i], lens[i]));
    assert_true(bk_scalable_add_nogrow(a, keys[done], lens[done]) < 0);
    assert_int_equal(bk_scalable_items(a), bk_scalable_items(b));
    assert_int_equal(bk_scalable_add_nogrow_batch(NULL, keys, lens, 1, res), BK_EINVAL);
    assert_int_equal(bk_scalable_add_nogrow_batch(b, keys, lens, 1, NULL), BK_EINVAL);
    bk_scalable_free(a);
    bk_scalable_free(b);
}

/* bk_scalable_set_tightening: stage rates follow the ratio, the compound
 * bound holds, the ratio is saved and refused once stage 1 exists. */
static void test_tightening(void **state)
{
    (void)state;
    bk_scalable *f = NULL;
    assert_int_equal(bk_scalable_create(&f, 100, 0.01, 2, BK_SCALABLE_BOUNDED, 7), BK_OK);
    assert_true(bk_scalable_tightening(f) == BK_SCALABLE_TIGHTENING);
    assert_int_equal(bk_scalable_set_tightening(f, 0.0), BK_EPARAM);
    assert_int_equal(bk_scalable_set_tightening(f, 1.0), BK_EPARAM);
    assert_int_equal(bk_scalable_set_tightening(f, 0.5), BK_OK);
    assert_true(bk_scalable_tightening(f) == 0.5);
    assert_int_equal(bk_scalable_set_tightening(f, 0.7), BK_OK);
    assert_true(fabs(bk_scalable_tightening(f) - 0.7) <= 1.0 / 65536);
    assert_int_equal(bk_scalable_set_tightening(f, 0.5), BK_OK);
    char key[32];
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(key, sizeof(key), "k%d", i);
        assert_true(bk_scalable_add(f, key, (size_t)n) >= 0);
    }
    assert_true(bk_scalable_stages(f) >= 5);
    assert_int_equal(bk_scalable_set_tightening(f, 0.6), BK_EINVAL); /* stage 1 exists */
    /* absent keys: under the bound (0.01) within 5 sigma of 1e5 trials */
    int fp = 0;
    for (int i = 0; i < 100000; i++) {
        int n = snprintf(key, sizeof(key), "absent%d", i);
        fp += bk_scalable_contains(f, key, (size_t)n);
    }
    assert_true(fp <= 1000 + 5 * 32);
    /* saved and loaded with its ratio */
    bk_filter *g = bk_scalable_as_filter(f), *h = NULL;
    uint64_t size = bk_filter_serialized_size(g);
    unsigned char *buf = malloc((size_t)size);
    assert_non_null(buf);
    assert_int_equal(bk_filter_serialize(g, buf, (size_t)size), BK_OK);
    assert_int_equal(bk_filter_deserialize(&h, buf, (size_t)size), BK_OK);
    assert_true(bk_scalable_tightening(bk_filter_as_scalable(h)) == 0.5);
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(bk_filter_contains(h, key, (size_t)n), 1);
    }
    bk_filter_free(h);
    free(buf);
    bk_scalable_free(f);
    assert_int_equal(bk_scalable_create(&f, 100, 0.01, BK_SCALABLE_MAX_EXPANSION + 1, 0, 7),
                     BK_EPARAM);
}

static void test_add_nogrow(void **state)
{
    (void)state;
    bk_scalable *f;
    char key[TU_KEY_LEN];
    assert_int_equal(bk_scalable_create(&f, 100, 0.01, 2, BK_SCALABLE_BOUNDED, 3), BK_OK);
    uint64_t added = 0, i = 0;
    for (; added < 100; i++) { /* fill the first stage exactly */
        tu_key(key, i, 1);
        int rc = bk_scalable_add_nogrow(f, key, sizeof(key));
        assert_true(rc == 0 || rc == 1);
        added += (uint64_t)rc;
    }
    assert_true(bk_scalable_items(f) == 100);
    size_t bytes = bk_scalable_bytes(f);
    /* a new key now needs a second stage */
    int refused = 0;
    for (uint64_t j = 0; j < 50; j++) {
        tu_key(key, j, 2);
        int rc = bk_scalable_add_nogrow(f, key, sizeof(key));
        assert_true(rc == BK_EFULL || rc == 0); /* 0: a false positive, nothing written */
        refused += rc == BK_EFULL;
    }
    assert_true(refused >= 45);
    assert_int_equal(bk_scalable_stages(f), 1);
    assert_true(bk_scalable_items(f) == 100);
    assert_true(bk_scalable_bytes(f) == bytes);
    tu_key(key, 0, 1);
    assert_int_equal(bk_scalable_add_nogrow(f, key, sizeof(key)), 0); /* present */
    /* the ordinary add grows as before */
    tu_key(key, 0, 2);
    assert_int_equal(bk_scalable_add(f, key, sizeof(key)), 1);
    assert_int_equal(bk_scalable_stages(f), 2);
    assert_int_equal(bk_scalable_add_nogrow(NULL, key, 1), BK_EINVAL);
    bk_scalable_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_nogrow),
        cmocka_unit_test(test_tightening),
        cmocka_unit_test(test_single_writer),
        cmocka_unit_test(test_add_nogrow_batch),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_growth_redisbloom),
        cmocka_unit_test(test_growth_bounded),
        cmocka_unit_test(test_duplicates_not_counted),
        cmocka_unit_test(test_stage_cap),
        cmocka_unit_test(test_nonscaling),
        cmocka_unit_test(test_memory_cap),
        cmocka_unit_test(test_clear),
        cmocka_unit_test(test_batch_and_hash),
        cmocka_unit_test(test_generic),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
