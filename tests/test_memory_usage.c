/*
 * test_memory_usage.c - bk_filter_memory_usage lists exactly the blocks a
 * filter holds.
 *
 * An allocator installed with bk_set_allocator records every live block
 * (pointer, bytes asked, when). For each family, fresh, grown, cloned and
 * reloaded, the filter is made while the record is open; then every live
 * block made since belongs to it, and bk_filter_memory_usage must
 *   - visit each of them exactly once and nothing else (the usable
 *     callback checks every pointer against the record),
 *   - with a NULL callback, sum the bytes asked for them.
 * A family that fell back to its nominal bytes, forgot a block, or counted
 * one twice fails here. The auto-clear and TTL filters (families made of
 * other families' filters) are checked the same way.
 */
#include <malloc.h> /* malloc_usable_size */

#include "testutil.h"
#include "static_family.h"

/*==========================================================================
 * A recording allocator
 *==========================================================================*/

static int setup(void **state)
{
    (void)state;
    tu_track_start();
    bk_set_allocator(&tu_track_allocator);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    bk_set_allocator(NULL);
    return 0;
}

/*==========================================================================
 * The check
 *==========================================================================*/

static uint64_t mark(void) { return tu_track_seq; }

/* The usable callback: each pointer a live block made since *ctx, once. */
static size_t usable_checked(void *ctx, const void *ptr)
{
    uint64_t since = *(const uint64_t *)ctx;
    tu_block *b = tu_track_find(ptr);
    assert_non_null(b);
    assert_true(b->seq >= since);
    assert_int_equal(b->mark, 0);
    b->mark = 1;
    return malloc_usable_size((void *)(uintptr_t)ptr);
}

/* f and nothing else was made since `since` (temporaries freed). */
static void check_usage(const bk_filter *f, uint64_t since)
{
    size_t asked = 0, usable = 0;
    tu_block *table = tu_track_table;
    for (size_t i = 0; i < TU_TRACK_SLOTS; i++) {
        table[i].mark = 0;
        if (tu_track_live(&table[i]) && table[i].seq >= since) {
            asked += table[i].asked;
            usable += malloc_usable_size((void *)(uintptr_t)table[i].ptr);
        }
    }
    assert_true(asked > 0);
    assert_int_equal(bk_filter_memory_usage(f, NULL, NULL), asked);
    assert_int_equal(bk_filter_memory_usage(f, usable_checked, &since), usable);
    for (size_t i = 0; i < TU_TRACK_SLOTS; i++)
        if (tu_track_live(&table[i]) && table[i].seq >= since) assert_int_equal(table[i].mark, 1);
    assert_int_equal(bk_filter_memory_usage(NULL, NULL, NULL), 0);
}

/* The copies of f a host makes: a clone, and a reload of its bytes (the
 * payload kept as one block, or copied out of it). */
static void check_copies(const bk_filter *f)
{
    uint64_t since = mark();
    bk_filter *c = NULL;
    int rc = bk_filter_clone(&c, f);
    if (rc != BK_ENOTSUP) {
        assert_int_equal(rc, BK_OK);
        check_usage(c, since);
        bk_filter_free(c);
    }
    size_t n;
    unsigned char *buf = tu_serialize(f, &n);
    since = mark();
    bk_filter *d = NULL;
    assert_int_equal(bk_filter_deserialize(&d, buf, n), BK_OK);
    check_usage(d, since);
    bk_filter_free(d);
    free(buf);
}

/* f, made since `since`, holds what it says, and so do its copies. */
static void check_made(bk_filter *f, uint64_t since)
{
    check_usage(f, since);
    check_copies(f);
    bk_filter_free(f);
}

/*==========================================================================
 * The families
 *==========================================================================*/

typedef struct usage_case {
    bk_family family;
    uint32_t counter_bits, bucket_size;
    int split, by_count;
    uint64_t capacity, adds; /* adds beyond capacity grow a growing family */
} usage_case;

static const usage_case cases[] = {
    {BK_FAMILY_BLOOM, 0, 0, 0, 0, 1000, 500},
    {BK_FAMILY_BLOCKED, 0, 0, 0, 0, 1000, 500},
    {BK_FAMILY_BLOCKED, 0, 0, 1, 0, 1000, 500},
    {BK_FAMILY_COUNTING, 4, 0, 0, 0, 1000, 500},
    {BK_FAMILY_COUNTING, 8, 0, 0, 0, 1000, 500},
    {BK_FAMILY_DELETABLE, 0, 0, 0, 0, 1000, 500},
    {BK_FAMILY_CUCKOO, 0, 2, 0, 0, 1000, 500},
    {BK_FAMILY_CUCKOO, 0, 4, 0, 0, 1000, 500},
    {BK_FAMILY_SCALABLE, 0, 0, 0, 0, 100, 0},
    {BK_FAMILY_SCALABLE, 0, 0, 0, 0, 100, 20000}, /* many stages, directories */
    {BK_FAMILY_WINDOW, 0, 0, 0, 0, 1000, 0},
    {BK_FAMILY_WINDOW, 0, 0, 0, 1, 1000, 5000},   /* rotated */
    {BK_FAMILY_DLEFT, 0, 0, 0, 0, 1000, 500},
    {BK_FAMILY_VARCOUNT, 0, 0, 0, 0, 1000, 500},
    {BK_FAMILY_HIER, 0, 0, 0, 0, 1000, 500},
    {BK_FAMILY_HYBRID, 0, 0, 0, 0, 1000, 500},
    {BK_FAMILY_MORRIS, 0, 0, 0, 0, 1000, 500},
    {BK_FAMILY_GROWABLE, 0, 0, 0, 0, 100, 10},
    {BK_FAMILY_GROWABLE, 0, 0, 0, 0, 100, 5000},  /* doubled */
};

/* The filter of a case; with auto_clear nonzero, wrapped in an auto-clear
 * filter (mode BK_AUTOCLEAR_ROTATE with `rotate`, else _CLEAR). */
static bk_filter *make(const usage_case *c, double auto_clear, int rotate)
{
    bk_filter_config cfg = tu_config(c->family, c->capacity, 0.01);
    cfg.counter_bits = c->counter_bits;
    cfg.bucket_size = c->bucket_size;
    cfg.blocked_split = c->split;
    cfg.auto_clear = auto_clear;
    cfg.auto_clear_mode = rotate ? BK_AUTOCLEAR_ROTATE : BK_AUTOCLEAR_CLEAR;
    if (c->family == BK_FAMILY_WINDOW) {
        cfg.window_by_count = c->by_count;
        cfg.window = c->by_count ? c->capacity : 60000;
        cfg.generations = 4;
    }
    if (c->family == BK_FAMILY_TTL) {
        cfg.window = 60000; /* the max TTL */
        cfg.generations = 5;
    }
    bk_filter *f = NULL;
    assert_int_equal(bk_filter_create(&f, &cfg), BK_OK);
    return f;
}

static void test_created_families(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        /* one filter of the case first: whatever families share between
         * filters (the growable family's parameters) exists before the
         * record of the second starts */
        bk_filter *anchor = make(&cases[i], 0, 0);
        uint64_t since = mark();
        bk_filter *f = make(&cases[i], 0, 0);
        tu_add_keys(f, 0, cases[i].adds, 1);
        check_made(f, since);
        bk_filter_free(anchor);
    }
}

/* Auto-clear filters (their wrapped generations: both with rotate, after
 * clears) and TTL filters (a generation grown past its first segment: every
 * key at the filter's clock with the max TTL lands in one generation). */
static void test_autoclear_and_ttl(void **state)
{
    (void)state;
    static const struct {
        bk_family family;
        double auto_clear;
        int rotate;
        uint64_t adds;
    } rows[] = {
        {BK_FAMILY_BLOOM, 0.5, 0, 5000},
        {BK_FAMILY_BLOCKED, 0.5, 1, 5000},
        {BK_FAMILY_COUNTING, 0.4, 1, 5000},
        {BK_FAMILY_TTL, 0, 0, 500},
        {BK_FAMILY_TTL, 0, 0, 5000},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        uint64_t since = mark();
        const usage_case c = {rows[i].family, 0, 0, 0, 0, 1000, rows[i].adds};
        bk_filter *f = make(&c, rows[i].auto_clear, rows[i].rotate);
        tu_add_keys(f, 0, rows[i].adds, 1);
        if (rows[i].auto_clear != 0) {
            bk_autoclear_stats st;
            assert_int_equal(bk_autoclear_get_stats(bk_filter_as_autoclear(f), &st), BK_OK);
            assert_true(st.clears > 0);
        }
        check_made(f, since);
    }
}

static void test_cuckoo_stages(void **state)
{
    (void)state;
    bk_cuckoo *anchor = NULL, *f = NULL;
    bk_cuckoo_options opts = {2, 0, 20};
    assert_int_equal(bk_cuckoo_create(&anchor, 1000, 0.01, &opts, 7), BK_OK);
    uint64_t since = mark();
    assert_int_equal(bk_cuckoo_create(&f, 1000, 0.01, &opts, 7), BK_OK);
    tu_add_keys(bk_cuckoo_as_filter(f), 0, 500, 1);
    for (int s = 0; s < 3; s++) {
        uint64_t buckets = (uint64_t)1024 << s;
        assert_int_equal(bk_cuckoo_add_stage(f, buckets), BK_OK);
        tu_add_keys(bk_cuckoo_as_filter(f), 1000 * (uint64_t)(s + 1), 1000 * (uint64_t)(s + 1) + 300, 1);
    }
    check_made(bk_cuckoo_as_filter(f), since);
    bk_cuckoo_free(anchor);
}

TU_STATIC_MAKE(make_static, bk_static, bk_static_build, bk_static_as_filter)
TU_STATIC_MAKE(make_bumped, bk_bumped, bk_bumped_build, bk_bumped_as_filter)

/* The static filter and the bumped one (2000 keys at w = 8, seed 3), and
 * the map of the same keys to i & 255 (8-bit values, 8 check bits). */
static void test_static_families(void **state)
{
    (void)state;
    enum { N = 2000 };
    tu_keyset ks;
    tu_keyset_make(&ks, N, 0, 1);
    static const tu_static_make_fn makes[] = {make_static, make_bumped};
    for (size_t i = 0; i < 2; i++) {
        uint64_t since = mark();
        check_made(tu_static_make(makes[i], &ks, 8, 3), since);
    }

    uint32_t values[N];
    for (uint32_t i = 0; i < N; i++) values[i] = i & 255;
    uint64_t since = mark();
    bk_map *m = NULL;
    assert_int_equal(bk_map_build(&m, ks.keys, ks.lens, values, N, 8, 8, 3, NULL), BK_OK);
    check_made(bk_map_as_filter(m), since);
    tu_keyset_free(&ks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_created_families, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuckoo_stages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_autoclear_and_ttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_static_families, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
