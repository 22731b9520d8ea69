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
    bk_filter_config cfg;
    bk_filter_config_init(&cfg);
    cfg.family = c->family;
    cfg.capacity = capacity;
    cfg.fpr = 0.01;
    cfg.seed = seed;
    c->configure(&cfg);
    bk_filter *f = NULL;
    int rc = bk_filter_create(&f, &cfg);
    if (rc != BK_OK) fail_msg("create %s: %s", bk_family_name(c->family), bk_strerror(rc));
    assert_int_equal(bk_filter_family(f), c->family);
    assert_true(bk_filter_seed(f) == seed);
    return f;
}

static void add_keys(bk_filter *f, uint64_t from, uint64_t to, uint64_t tag)
{
    char key[TU_KEY_LEN];
    for (uint64_t i = from; i < to; i++) {
        tu_key(key, i, tag);
        assert_true(bk_filter_add(f, key, sizeof(key)) >= 0);
    }
}

static uint64_t count_found(const bk_filter *f, uint64_t from, uint64_t to, uint64_t tag)
{
    char key[TU_KEY_LEN];
    uint64_t n = 0;
    for (uint64_t i = from; i < to; i++) {
        tu_key(key, i, tag);
        n += (uint64_t)bk_filter_contains(f, key, sizeof(key));
    }
    return n;
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

static void test_every_family_basic(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES; i++) {
        const family_case *c = &cases[i];
        bk_filter *f = make(c, 10000, 3);
        assert_int_equal(bk_filter_contains(f, "a", 1), 0);
        assert_int_equal(bk_filter_add(f, "a", 1), 1);
        assert_int_equal(bk_filter_contains(f, "a", 1), 1);
        assert_true(bk_filter_count(f, "a", 1) >= 1);
        assert_true(bk_filter_count(f, "zz-absent", 9) == bk_filter_contains(f, "zz-absent", 9));
        add_keys(f, 0, 5000, 1);
        assert_true(count_found(f, 0, 5000, 1) == 5000);

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

        int rc = bk_filter_remove(f, "a", 1);
        if (c->can_remove && rc == BK_EUNDELETABLE) {
            /* the deletable filter may refuse: the key then stays */
            assert_int_equal(c->family, BK_FAMILY_DELETABLE);
            assert_int_equal(bk_filter_contains(f, "a", 1), 1);
        } else if (c->can_remove) {
            assert_int_equal(rc, BK_OK);
            assert_int_equal(bk_filter_contains(f, "a", 1), 0);
        } else {
            assert_int_equal(rc, BK_ENOTSUP);
            assert_int_equal(bk_filter_contains(f, "a", 1), 1);
        }

        bk_filter *copy;
        assert_int_equal(bk_filter_clone(&copy, f), BK_OK);
        assert_true(count_found(copy, 0, 5000, 1) == 5000);
        assert_int_equal(bk_filter_clear(f), BK_OK);
        assert_true(count_found(f, 0, 5000, 1) == 0);
        assert_true(count_found(copy, 0, 5000, 1) == 5000);
        bk_filter_free(copy);
        bk_filter_free(f);
    }
}

static void test_every_family_merge(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES; i++) {
        const family_case *c = &cases[i];
        bk_filter *a = make(c, 20000, 5), *b = make(c, 20000, 5);
        add_keys(a, 0, 6000, 1);
        add_keys(b, 3000, 9000, 1);
        char why[128];
        assert_int_equal(bk_filter_incompatibility(a, b, why, sizeof(why)), !c->can_merge);
        bk_filter *u;
        assert_int_equal(bk_filter_clone(&u, a), BK_OK);
        if (!c->can_merge) {
            assert_non_null(strstr(why, "cannot be combined"));
            assert_int_equal(bk_filter_merge(u, b), BK_ENOTSUP);
            bk_filter_free(u);
            bk_filter_free(a);
            bk_filter_free(b);
            continue;
        }
        assert_int_equal(bk_filter_merge(u, b), BK_OK);
        assert_true(count_found(u, 0, 9000, 1) == 9000);
        assert_int_equal(bk_filter_intersect(a, b), BK_OK);
        assert_true(count_found(a, 3000, 6000, 1) == 3000);
        assert_true(count_found(a, 0, 3000, 1) < 300); /* A-only keys mostly gone */

        /* a different seed or size is refused, with the reason */
        bk_filter *other_seed = make(c, 20000, 6), *other_size = make(c, 50000, 5);
        assert_int_equal(bk_filter_merge(u, other_seed), BK_EINCOMPAT);
        assert_int_equal(bk_filter_incompatibility(u, other_seed, why, sizeof(why)), 1);
        assert_non_null(strstr(why, "seed"));
        assert_int_equal(bk_filter_merge(u, other_size), BK_EINCOMPAT);
        assert_int_equal(bk_filter_incompatibility(u, other_size, why, sizeof(why)), 1);
        assert_true(strlen(why) > 5);
        bk_filter_free(other_seed);
        bk_filter_free(other_size);
        bk_filter_free(u);
        bk_filter_free(a);
        bk_filter_free(b);
    }
}

/* Filters of different families never combine, whatever their order. */
/* Batches answer as single calls do. */
static void test_every_family_batch(void **state)
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
        bk_filter *a = make(&cases[i], 10000, 9), *b = make(&cases[i], 10000, 9);
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
        assert_true(bk_filter_add_batch(a, NULL, lens, 2, got) == BK_EINVAL);
        assert_true(bk_filter_contains_batch(NULL, keys, lens, 2, got) == BK_EINVAL);
        bk_filter_free(a);
        bk_filter_free(b);
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
    assert_int_equal(bk_filter_family(NULL), 0);
    char why[64];
    assert_int_equal(bk_filter_incompatibility(NULL, NULL, why, sizeof(why)), 1);
    bk_filter_free(NULL);
}

static int try_create(void *ctx)
{
    const family_case *c = ctx;
    bk_filter_config cfg;
    bk_filter_config_init(&cfg);
    cfg.family = c->family;
    cfg.capacity = 1000;
    cfg.fpr = 0.01;
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

static void test_allocation_failures(void **state)
{
    (void)state;
    for (size_t i = 0; i < NCASES; i++)
        assert_true(tu_oom_loop(try_create, (void *)&cases[i]) >= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_every_family_basic),
        cmocka_unit_test(test_every_family_merge),
        cmocka_unit_test(test_every_family_batch),
        cmocka_unit_test(test_cross_family),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
