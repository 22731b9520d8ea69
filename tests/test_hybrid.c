/*
 * test_hybrid.c - the hybrid filter (bit layer, cells migrating to
 * counter slots past 1): parameters, counts and removes against an exact
 * multiset, measured false-positive rates (full and after churn), stuck
 * counts and frozen blocks, what a batch reports, clear, and the
 * allocations of a create. Batches against single adds, clones, files and
 * allocation failures on the generic handle are tests/test_conformance.c's.
 */
#define TU_FAMILY hybrid
#define TU_MODEL_RULE {.name = "hybrid", .count_cap = UINT32_MAX, .frozen_one = 1, \
    .add_is_new = 1, .removes_div = 4}
#define TU_CREATE_ALLOCS 2
#include "deleting_family.h"

/* Counts are exact for a lone key (its cells migrate to slots); at 127
 * they stick; a block whose slots run out freezes. */
static void test_counts(void **state)
{
    (void)state;
    bk_hybrid *h;
    bk_delete_stats st;
    char key[TU_KEY_LEN];
    bk_filter *f = lone_key_counts(40);
    stuck_key(f, 130, 127, 200);
    bk_filter_free(f);
    /* 2000 keys twice into a filter for 20: slots run out, blocks freeze */
    assert_int_equal(bk_hybrid_create(&h, 20, 0.01, 3), BK_OK);
    f = bk_hybrid_as_filter(h);
    for (int r = 0; r < 2; r++)
        for (uint64_t i = 0; i < 2000; i++) {
            tu_key(key, i, 1);
            bk_filter_add(f, key, sizeof(key));
        }
    assert_int_equal(bk_hybrid_get_stats(h, &st), BK_OK);
    assert_true(st.overflows >= 1);
    for (uint64_t i = 0; i < 2000; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_filter_remove(f, key, sizeof(key)), BK_OK);
        assert_int_equal(bk_filter_contains(f, key, sizeof(key)), 1);
    }
    bk_filter_free(f);
}

/* Sizing: the memory beside the 4-bit counting filter's. */
static void sizing(double p)
{
    uint64_t blocks;
    uint32_t k, lines;
    assert_int_equal(bk_hybrid_optimal(1000000, p, &blocks, &k, &lines), BK_OK);
    double bits = 512.0 * (1 + lines) * (double)blocks / 1e6, cbits = counting_bits_per_key(p);
    print_message("hybrid p=%g: k=%u L=%u, %.2f bits/key; 4-bit counting %.2f (%.2fx)\n", p, k,
                  lines, bits, cbits, bits / cbits);
    assert_true(bits < cbits);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_DELETING_FAMILY_TESTS,
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
