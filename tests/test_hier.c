/*
 * test_hier.c - the hierarchical counting filter (bit layer + counter
 * layer): parameters, counts and removes against an exact multiset,
 * measured false-positive rates (full and after churn), stuck counters,
 * what a batch reports, clear, and the allocations of a create. Batches
 * against single adds, clones, files and allocation failures on the
 * generic handle are tests/test_conformance.c's.
 */
#define TU_FAMILY hier
#define TU_MODEL_RULE {.name = "hier", .count_cap = 15, .add_is_new = 1, .removes_div = 4}
#define TU_CREATE_ALLOCS 4
#include "deleting_family.h"

/* The bit layer is a blocked filter: the same keys give the same bits,
 * so the same answers for 100000 absent keys; removing every key leaves
 * no bit set. */
static void test_layer_is_blocked(void **state)
{
    (void)state;
    char key[TU_KEY_LEN];
    bk_hier *h;
    bk_blocked *b;
    assert_int_equal(bk_hier_create(&h, 5000, 0.01, 77), BK_OK);
    assert_int_equal(bk_blocked_create(&b, 5000, 0.01, 77), BK_OK);
    bk_filter *f = bk_hier_as_filter(h);
    for (uint64_t i = 0; i < 5000; i++) {
        tu_key(key, i, 1);
        bk_filter_add(f, key, sizeof(key));
        bk_blocked_add(b, key, sizeof(key));
    }
    for (uint64_t i = 0; i < 100000; i++) {
        tu_key(key, i, 2);
        assert_int_equal(bk_filter_contains(f, key, sizeof(key)),
                         bk_blocked_contains(b, key, sizeof(key)));
    }
    for (uint64_t i = 0; i < 5000; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_filter_remove(f, key, sizeof(key)), BK_OK);
    }
    bk_delete_stats st;
    assert_int_equal(bk_hier_get_stats(h, &st), BK_OK);
    assert_true(st.fpr_now == 0.0);
    bk_blocked_free(b);
    bk_filter_free(f);
}

/* Counts up to 14 are exact for a lone key, 15 sticks: removes leave the
 * key present for ever, and the event is counted. */
static void test_counts(void **state)
{
    (void)state;
    bk_filter *f = lone_key_counts(7);
    stuck_key(f, 20, -1, 30);
    bk_filter_free(f);
}

/* The bit layer is a blocked Bloom filter: its bits are those of
 * bk_blocked's sizing within 10%; the whole costs 5x that. */
static void sizing(double p)
{
    uint64_t blocks;
    uint32_t k;
    bk_blocked *b;
    assert_int_equal(bk_hier_optimal(1000000, p, &blocks, &k), BK_OK);
    assert_int_equal(bk_blocked_create(&b, 1000000, p, 1), BK_OK);
    double bits = 512.0 * (double)blocks, bbits = (double)bk_blocked_bits(b);
    print_message("hier p=%g: k=%u, bit layer %.2f bits/key (blocked %.2f), total %.2f\n", p, k,
                  bits / 1e6, bbits / 1e6, 5 * bits / 1e6);
    assert_true(bits <= 1.1 * bbits && bits >= 0.9 * bbits);
    bk_blocked_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        TU_DELETING_FAMILY_TESTS,
        cmocka_unit_test(test_layer_is_blocked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
