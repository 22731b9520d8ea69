/*
 * test_filter.c - the generic bk_filter handle: every family through the
 * same functions (create from a config, add, contains, remove, count,
 * clone, clear, merge, intersect, info).
 */
#include "testutil.h"

/* One row per family: how to configure it, and what it can do. */
typedef struct family_case {
    bk_family family;
    void (*configure)(bk_filter_config *cfg);
    int can_remove;
    int can_merge;
    int lockfree_add;
} family_case;

static void cfg_plain(bk_filter_config *cfg) { (void)cfg; }
static void cfg_counting8(bk_filter_config *cfg) { cfg->counter_bits = 8; }
static void cfg_nonscaling(bk_filter_config *cfg) { cfg->nonscaling = 1; }
static void cfg_window(bk_filter_config *cfg)
{
    cfg->window = 60000; /* a minute of milliseconds; the clock stays at 0 */
    cfg->generations = 4;
}
static void cfg_window_count(bk_filter_config *cfg)
{
    cfg->window_by_count = 1;
    cfg->window = cfg->capacity; /* the last `capacity` insertions */
}
static void cfg_cuckoo2(bk_filter_config *cfg)
{
    cfg->bucket_size = 2; /* RedisBloom's CF defaults */
    cfg->max_kicks = 20;
}

static const family_case cases[] = {
    {BK_FAMILY_BLOOM, cfg_plain, 0, 1, 1},
    {BK_FAMILY_BLOCKED, cfg_plain, 0, 1, 1},
    {BK_FAMILY_COUNTING, cfg_plain, 1, 0, 1},
    {BK_FAMILY_COUNTING, cfg_counting8, 1, 0, 1},
    {BK_FAMILY_DELETABLE, cfg_plain, 1, 0, 1},
    {BK_FAMILY_CUCKOO, cfg_plain, 1, 0, 0},
    {BK_FAMILY_CUCKOO, cfg_cuckoo2, 1, 0, 0},
    {BK_FAMILY_SCALABLE, cfg_plain, 0, 1, 1},
    {BK_FAMILY_SCALABLE, cfg_nonscaling, 0, 1, 1},
    {BK_FAMILY_WINDOW, cfg_window, 0, 0, 0},
    {BK_FAMILY_WINDOW, cfg_window_count, 0, 0, 0},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static bk_filter *make(const family_case *c, uint64_t capacity, uint64_t seed)
{
    bk_filter_config cfg = tu_config(c->family, capacity, 0.01);
    cfg.seed = seed;
    c->configure(&cfg);
    bk_filter *f = NULL;
    int rc = bk_filter_create(&f, &cfg);
    if (rc != BK_OK) fail_msg("create %s: %s", bk_family_name(c->family), bk_strerror(rc));
    assert_int_equal(bk_filter_family(f), c->family);
    assert_true(bk_filter_seed(f) == seed);
    return f;
}

static void test_names(void **state)
{
    (void)state;
    for (int fam = BK_FAMILY_BLOOM; fam <= BK_FAMILY_WINDOW; fam++) {
        const char *name = bk_family_name((bk_family)fam);
        assert_non_null(name);
        assert_int_equal(bk_family_from_name(name), fam);
    }
    assert_null(bk_family_name((bk_family)0));
    assert_null(bk_family_name((bk_family)99));
    assert_int_equal(bk_family_from_name("nope"), 0);
    assert_int_equal(bk_family_from_name(NULL), 0);
}

/* Every case: the summary agrees with the info on every field it
 * promises; clear answers BK_OK and empties the filter; the batches refuse
 * missing arrays and a missing filter. (What each case can do, adds,
 * counts, removes, clones, clear on a copy, merges, batches against
 * single calls and allocation failures: tests/test_conformance.c, one row
 * per case here but the one of test_beyond_conformance.) */
static void test_every_family_summary(void **state)
{
    (void)state;
    static const void *keys[2] = {"a", "b"};
    static const size_t lens[2] = {1, 1};
    uint8_t got[2];
    for (size_t i = 0; i < NCASES; i++) {
        const family_case *c = &cases[i];
        bk_filter *f = make(c, 10000, 3);
        assert_int_equal(bk_filter_contains(f, "a", 1), 0);
        assert_int_equal(bk_filter_add(f, "a", 1), 1);
        tu_add_keys(f, 0, 5000, 1);
        bk_filter_info info, sum;
        assert_int_equal(bk_filter_get_info(f, &info), BK_OK);
        assert_int_equal(bk_filter_get_summary(f, &sum), BK_OK);
        assert_int_equal(sum.family, info.family);
        assert_int_equal(sum.seed, info.seed);
        assert_int_equal(sum.capacity, info.capacity);
        assert_true(sum.target_fpr == info.target_fpr);
        assert_int_equal(sum.items, info.items);
        assert_true(sum.fpr_at_capacity == info.fpr_at_capacity);
        assert_int_equal(sum.bytes, info.bytes);
        assert_int_equal(sum.parts, info.parts);
        assert_int_equal(sum.can_remove, info.can_remove);
        assert_int_equal(sum.lockfree_add, info.lockfree_add);
        assert_int_equal(sum.single_writer, info.single_writer);
        assert_int_equal(sum.mapped, info.mapped);
        assert_true(bk_filter_add_batch(f, NULL, lens, 2, got) == BK_EINVAL);
        assert_true(bk_filter_contains_batch(NULL, keys, lens, 2, got) == BK_EINVAL);
        assert_int_equal(bk_filter_clear(f), BK_OK);
        assert_true(tu_count_found(f, 0, 5000, 1) == 0);
        assert_int_equal(bk_filter_contains(f, "a", 1), 0);
        bk_filter_free(f);
    }
}

/* The intersection of two filters, and a filter of another size refused
 * (the union and a filter of another seed: tests/test_conformance.c). */
static void test_every_family_intersect(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES; i++) {
        const family_case *c = &cases[i];
        if (!c->can_merge) continue;
        bk_filter *a = make(c, 20000, 5), *b = make(c, 20000, 5);
        tu_add_keys(a, 0, 6000, 1);
        tu_add_keys(b, 3000, 9000, 1);
        assert_int_equal(bk_filter_intersect(a, b), BK_OK);
        assert_true(tu_count_found(a, 3000, 6000, 1) == 3000);
        assert_true(tu_count_found(a, 0, 3000, 1) < 300); /* A-only keys mostly gone */
        char why[128];
        bk_filter *other_size = make(c, 50000, 5);
        assert_int_equal(bk_filter_merge(b, other_size), BK_EINCOMPAT);
        assert_int_equal(bk_filter_incompatibility(b, other_size, why, sizeof(why)), 1);
        assert_true(strlen(why) > 5);
        bk_filter_free(other_size);
        bk_filter_free(a);
        bk_filter_free(b);
    }
}

static int try_create(void *ctx)
{
    const family_case *c = ctx;
    bk_filter_config cfg = tu_config(c->family, 1000, 0.01);
    c->configure(&cfg);
    bk_filter *f;
    int rc = bk_filter_create(&f, &cfg);
    if (rc != BK_OK) return rc;
    bk_filter *g;
    rc = bk_filter_clone(&g, f);
    bk_filter_free(g);
    bk_filter_free(f);
    return rc;
}

/* The cases tests/test_conformance.c has no row for (the cuckoo filter
 * with RedisBloom's bucket size 2) go through what its rows check of the
 * others: adds, counts, info, remove, clone and clear, merge refused or
 * made, batches as single calls, allocation failures of create and clone. */
static void test_beyond_conformance(void **state)
{
    (void)state;
    enum { N = 3000 };
    static char storage[2 * N][TU_KEY_LEN];
    static const void *keys[2 * N];
    static size_t lens[2 * N];
    static uint8_t got[2 * N];
    for (size_t i = 0; i < 2 * N; i++) {
        tu_key(storage[i], i, 7);
        keys[i] = storage[i];
        lens[i] = TU_KEY_LEN;
    }
    for (size_t i = 0; i < NCASES; i++) {
        const family_case *c = &cases[i];
        if (c->configure != cfg_cuckoo2) continue;
        bk_filter *f = make(c, 10000, 3);
        assert_int_equal(bk_filter_add(f, "a", 1), 1);
        assert_int_equal(bk_filter_contains(f, "a", 1), 1);
        assert_true(bk_filter_count(f, "a", 1) >= 1);
        assert_true(bk_filter_count(f, "zz-absent", 9) == bk_filter_contains(f, "zz-absent", 9));
        tu_add_keys(f, 0, 5000, 1);
        assert_true(tu_count_found(f, 0, 5000, 1) == 5000);
        bk_filter_info info;
        assert_int_equal(bk_filter_get_info(f, &info), BK_OK);
        assert_int_equal(info.family, c->family);
        assert_int_equal(info.can_remove, c->can_remove);
        assert_int_equal(info.lockfree_add, c->lockfree_add);
        assert_true(info.items >= 4900 && info.items <= 5001);
        assert_true(info.capacity == 10000);
        assert_true(info.target_fpr == 0.01);
        assert_true(info.bytes > 0 && info.parts >= 1);
        assert_false(info.mapped || info.read_only);
        assert_int_equal(bk_filter_remove(f, "a", 1), c->can_remove ? BK_OK : BK_ENOTSUP);
        assert_int_equal(bk_filter_contains(f, "a", 1), !c->can_remove);
        bk_filter *copy;
        assert_int_equal(bk_filter_clone(&copy, f), BK_OK);
        assert_true(tu_count_found(copy, 0, 5000, 1) == 5000);
        assert_int_equal(bk_filter_clear(f), BK_OK);
        assert_true(tu_count_found(copy, 0, 5000, 1) == 5000);
        bk_filter_free(copy);
        bk_filter_free(f);

        bk_filter *a = make(c, 20000, 5), *b = make(c, 20000, 5);
        tu_add_keys(a, 0, 6000, 1);
        tu_add_keys(b, 3000, 9000, 1);
        char why[128];
        assert_int_equal(bk_filter_incompatibility(a, b, why, sizeof(why)), !c->can_merge);
        assert_int_equal(bk_filter_merge(a, b), c->can_merge ? BK_OK : BK_ENOTSUP);
        if (!c->can_merge) assert_non_null(strstr(why, "cannot be combined"));
        assert_true(tu_count_found(a, 0, c->can_merge ? 9000 : 6000, 1) ==
                    (c->can_merge ? 9000 : 6000));
        bk_filter_free(a);
        bk_filter_free(b);

        a = make(c, 10000, 9);
        b = make(c, 10000, 9);
        int64_t fresh = bk_filter_add_batch(a, keys, lens, N, got);
        int64_t fresh_single = 0;
        for (size_t j = 0; j < N; j++) {
            int r = bk_filter_add(b, keys[j], lens[j]);
            assert_int_equal(got[j], r);
            fresh_single += r;
        }
        assert_true(fresh == fresh_single);
        int64_t found = bk_filter_contains_batch(a, keys, lens, 2 * N, got);
        int64_t found_single = 0;
        for (size_t j = 0; j < 2 * N; j++) {
            int r = bk_filter_contains(b, keys[j], lens[j]);
            assert_int_equal(got[j], r);
            found_single += r;
        }
        assert_true(found == found_single && found >= N);
        bk_filter_free(a);
        bk_filter_free(b);

        assert_true(tu_oom_loop(try_create, (void *)c) >= 2);
    }
}

static void test_cross_family(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES; i++) {
        for (size_t j = 0; j < NCASES; j++) {
            if (cases[i].family == cases[j].family) continue;
            bk_filter *a = make(&cases[i], 1000, 1), *b = make(&cases[j], 1000, 1);
            char why[128];
            assert_int_equal(bk_filter_merge(a, b), BK_EINCOMPAT);
            assert_int_equal(bk_filter_intersect(a, b), BK_EINCOMPAT);
            assert_int_equal(bk_filter_incompatibility(a, b, why, sizeof(why)), 1);
            assert_non_null(strstr(why, "family differs"));
            bk_filter_free(a);
            bk_filter_free(b);
        }
    }
}

static void test_errors(void **state)
{
    (void)state;
    bk_filter_config cfg;
    bk_filter *f = (bk_filter *)&f;
    bk_filter_config_init(&cfg);
    assert_int_equal(cfg.family, BK_FAMILY_BLOCKED);
    assert_true(cfg.seed == BK_DEFAULT_SEED);
    cfg.family = BK_FAMILY_BLOOM;
    /* capacity and fpr must be set */
    assert_int_equal(bk_filter_create(&f, &cfg), BK_ECAPACITY);
    assert_null(f);
    cfg.capacity = 100;
    assert_int_equal(bk_filter_create(&f, &cfg), BK_EFPR);
    cfg.fpr = 0.01;
    cfg.family = (bk_family)42;
    assert_int_equal(bk_filter_create(&f, &cfg), BK_EFAMILY);
    assert_int_equal(bk_filter_create(NULL, &cfg), BK_EINVAL);
    assert_int_equal(bk_filter_create(&f, NULL), BK_EINVAL);
    bk_filter_config_init(NULL);

    assert_int_equal(bk_filter_add(NULL, "x", 1), BK_EINVAL);
    assert_int_equal(bk_filter_contains(NULL, "x", 1), BK_EINVAL);
    assert_int_equal(bk_filter_remove(NULL, "x", 1), BK_EINVAL);
    assert_true(bk_filter_count(NULL, "x", 1) == BK_EINVAL);
    assert_int_equal(bk_filter_clone(&f, NULL), BK_EINVAL);
    assert_int_equal(bk_filter_clear(NULL), BK_EINVAL);
    assert_int_equal(bk_filter_merge(NULL, NULL), BK_EINVAL);
    assert_int_equal(bk_filter_get_info(NULL, NULL), BK_EINVAL);
    assert_int_equal(bk_filter_get_summary(NULL, NULL), BK_EINVAL);
    assert_int_equal(bk_filter_family(NULL), 0);
    char why[64];
    assert_int_equal(bk_filter_incompatibility(NULL, NULL, why, sizeof(why)), 1);
    bk_filter_free(NULL);
}

/*--------------------------------------------------------------------------
 * Memory beyond the bits: the figures each family's section of bloomkit.h
 * states (bk_filter_get_info().bytes minus the payload of the file image,
 * summed over its parts without the padding between them), checked at two
 * sizes since they must not depend on the size.
 *--------------------------------------------------------------------------*/

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* bytes - sum of the image's part lengths (docs/FORMAT.md: nparts at 16,
 * part descriptors of 64 bytes from 128, each length at +8) */
static long long beyond_payload(const bk_filter *f)
{
    uint64_t n = bk_filter_serialized_size(f);
    unsigned char *buf = malloc((size_t)n);
    assert_non_null(buf);
    assert_int_equal(bk_filter_serialize(f, buf, (size_t)n), BK_OK);
    uint32_t nparts = (uint32_t)(buf[16] | buf[17] << 8 | buf[18] << 16 | (uint32_t)buf[19] << 24);
    uint64_t payload = 0;
    for (uint32_t i = 0; i < nparts; i++) payload += le64(buf + 128 + 64 * (size_t)i + 8);
    free(buf);
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(f, &info), BK_OK);
    return (long long)info.bytes - (long long)payload;
}

static void test_memory_beyond_bits(void **state)
{
    (void)state;
    static const struct {
        bk_family family;
        long long beyond;
    } stated[] = {
        {BK_FAMILY_BLOOM, 176},    {BK_FAMILY_BLOCKED, 328},  {BK_FAMILY_COUNTING, 336},
        {BK_FAMILY_DELETABLE, 208}, {BK_FAMILY_CUCKOO, 104},  {BK_FAMILY_SCALABLE, 96},
        {BK_FAMILY_WINDOW, 160 + 4 * 208}, {BK_FAMILY_DLEFT, 168}, {BK_FAMILY_VARCOUNT, 168},
        {BK_FAMILY_HIER, 312},     {BK_FAMILY_HYBRID, 168},   {BK_FAMILY_MORRIS, 192},
    };
    for (size_t i = 0; i < sizeof(stated) / sizeof(stated[0]); i++) {
        for (uint64_t cap = 100; cap <= 100000; cap *= 1000) {
            bk_filter_config cfg;
            bk_filter_config_init(&cfg);
            cfg.family = stated[i].family;
            cfg.capacity = cap;
            cfg.fpr = 0.01;
            if (cfg.family == BK_FAMILY_WINDOW) cfg_window(&cfg);
            bk_filter *f;
            assert_int_equal(bk_filter_create(&f, &cfg), BK_OK);
            long long got = beyond_payload(f);
            if (got != stated[i].beyond)
                fail_msg("%s at %llu: %lld bytes beyond the payload, bloomkit.h says %lld",
                         bk_family_name(stated[i].family), (unsigned long long)cap, got,
                         stated[i].beyond);
            bk_filter_free(f);
        }
    }
    /* window: 160 + 208 per generation */
    for (uint32_t g = 2; g <= 8; g *= 2) {
        bk_window *w;
        assert_int_equal(bk_window_create(&w, 1000, 0.01, 1000, g, 0, 1), BK_OK);
        assert_int_equal(beyond_payload(bk_window_as_filter(w)), 160 + 208 * (long long)g);
        bk_window_free(w);
    }
    /* cuckoo: 8 more per stage after the first */
    bk_cuckoo *cf;
    assert_int_equal(bk_cuckoo_create_params(&cf, 32, 2, 8, 20, 1), BK_OK);
    for (uint32_t j = 1; j < 5; j++) assert_int_equal(bk_cuckoo_add_stage(cf, 32), BK_OK);
    assert_int_equal(beyond_payload(bk_cuckoo_as_filter(cf)), 104 + 8 * 4);
    assert_int_equal(bk_cuckoo_bytes(cf), BK_CUCKOO_OVERHEAD_BYTES + 5 * 60 +
                                              4 * BK_CUCKOO_STAGE_BYTES);
    bk_cuckoo_free(cf);
    /* scalable: 87 per later stage, plus the directory (16 + 8 c bytes for
     * c = 4, 8, ... up to the first c holding every stage) */
    bk_scalable *sf;
    assert_int_equal(bk_scalable_create(&sf, 100, 0.01, 2, 0, 1), BK_OK);
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; bk_scalable_stages(sf) < 10; i++) {
        tu_key(key, i, 1);
        assert_true(bk_scalable_add(sf, key, sizeof(key)) >= 0);
        uint32_t n = bk_scalable_stages(sf);
        long long want = 96 + 87 * (long long)(n - 1);
        for (uint32_t c = 4; n > 1; c *= 2) {
            want += 16 + 8 * (long long)c;
            if (c >= n) break;
        }
        if (i % 97 == 0) assert_int_equal(beyond_payload(bk_scalable_as_filter(sf)), want);
    }
    bk_scalable_free(sf);
    /* the static families, built from keys */
    static char kb[1000][TU_KEY_LEN];
    const void *keys[1000];
    size_t lens[1000];
    uint32_t values[1000];
    for (uint32_t n = 100; n <= 1000; n *= 10) {
        for (uint32_t i = 0; i < n; i++) {
            tu_key(kb[i], i, 1);
            keys[i] = kb[i];
            lens[i] = TU_KEY_LEN;
            values[i] = i & 255;
        }
        bk_static *st;
        assert_int_equal(bk_static_build(&st, keys, lens, n, 8, 1), BK_OK);
        assert_int_equal(beyond_payload(bk_static_as_filter(st)), 184);
        bk_filter_free(bk_static_as_filter(st));
        bk_map *m;
        uint64_t conflict;
        assert_int_equal(bk_map_build(&m, keys, lens, values, n, 8, 7, 1, &conflict), BK_OK);
        assert_int_equal(beyond_payload(bk_map_as_filter(m)), 128);
        bk_filter_free(bk_map_as_filter(m));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_every_family_summary),
        cmocka_unit_test(test_every_family_intersect),
        cmocka_unit_test(test_beyond_conformance),
        cmocka_unit_test(test_cross_family),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_memory_beyond_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
