/*
 * test_scalable_threads.c - concurrent adds, lookups and growth of the
 * scalable filter (run under ThreadSanitizer by the TSan build).
 *
 * Writers add disjoint key ranges into a filter that starts at capacity
 * 100, so that it grows through many stages while they race; each writer
 * checks its own key right after adding it, and publishes its progress so
 * that a reader thread can check keys it knows were added before (a reader
 * that synchronises with an add must find the key; tests/race.h). At the
 * end nothing is missing and the counts add up.
 */
#include "race.h"

static int add(void *ctx, const char *key, size_t len) { return bk_scalable_add(ctx, key, len); }

static int contains(void *ctx, const char *key, size_t len)
{
    return bk_scalable_contains(ctx, key, len);
}

/* Statistics during growth. */
static int check(void *ctx)
{
    bk_scalable_stats st;
    return bk_scalable_get_stats(ctx, &st) == BK_OK && st.stages > 0 &&
           st.stages <= BK_SCALABLE_MAX_STAGES;
}

static void run(uint32_t expansion)
{
    bk_scalable *f;
    assert_int_equal(bk_scalable_create(&f, 100, 0.01, expansion, 0, 5), BK_OK);
    tu_race r = {.ctx = f, .add = add, .contains = contains, .check = check,
                 .tag = 10, .writers = 3, .per_writer = 40000, .reader = 1};
    tu_race_run(&r);
    bk_scalable_stats st = tu_scalable_stats(f);
    uint64_t stage_items = 0;
    for (uint32_t i = 0; i < st.stages; i++) {
        bk_scalable_stage_stats ss = tu_scalable_stage(f, i);
        stage_items += ss.items;
        /* racing adds may overfill a stage by one key per writer */
        assert_true(ss.items <= ss.capacity + (uint64_t)r.writers);
    }
    print_message("expansion %u: %u stages, %llu items, %llu misses\n", expansion, st.stages,
                  (unsigned long long)st.items, (unsigned long long)r.misses);
    assert_true(r.misses == 0);
    assert_true(st.items == r.added);
    assert_true(stage_items == r.added);
    assert_true(r.added > 3 * r.per_writer * 95 / 100);
    bk_scalable_free(f);
}

static void test_concurrent_growth(void **state) { (void)state; run(2); }

/* Expansion 1: a new stage every 2000 keys (60 stages for the 120000
 * keys, under the cap of 64), so adds race to install stages all along. */
static void test_frequent_growth(void **state)
{
    (void)state;
    bk_scalable *f;
    assert_int_equal(bk_scalable_create(&f, 2000, 0.01, 1, 0, 6), BK_OK);
    tu_race r = {.ctx = f, .add = add, .contains = contains,
                 .tag = 10, .writers = 3, .per_writer = 40000, .reader = 0};
    tu_race_run(&r);
    print_message("expansion 1: %u stages, %llu items, %llu misses\n", bk_scalable_stages(f),
                  (unsigned long long)bk_scalable_items(f), (unsigned long long)r.misses);
    assert_true(r.misses == 0);
    assert_true(bk_scalable_items(f) == r.added);
    assert_true(bk_scalable_stages(f) >= 55);
    bk_scalable_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_growth),
        cmocka_unit_test(test_frequent_growth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
