/*
 * deleting_family.h - the tests that tests/test_hier.c, test_hybrid.c and
 * test_varcount.c run alike on their family (whose calls are bk_<f>_create
 * (&out, n, p, seed), bk_<f>_get_stats, bk_<f>_free, bk_<f>_as_filter and
 * bk_filter_as_<f>). Define before including it:
 *
 *   TU_FAMILY          f, as the API spells it (hier)
 *   TU_MODEL_RULE      the tu_model_rule of its model runs
 *   TU_CREATE_ALLOCS   the allocations bk_<f>_create(1000 keys, 1%) makes
 *
 * It defines make(n, p, seed) (a generic handle), lone_key_counts and
 * stuck_key for the family's test_counts, and the tests
 * test_invalid_parameters, test_sizing (of the family's sizing(p)),
 * test_model, test_fpr, test_batch_items_clear and test_out_of_memory:
 * TU_DELETING_FAMILY_TESTS lists them with test_counts for main. Batches
 * against single adds, clones, files and allocation failures on the
 * generic handle are tests/test_conformance.c's.
 */
#ifndef BK_DELETING_FAMILY_H
#define BK_DELETING_FAMILY_H

#include "testutil.h"

#define TU__PASTE(a, b, c) a##b##c
#define TU__NAME(a, b, c) TU__PASTE(a, b, c)
#define TU_FN(suffix) TU__NAME(bk_, TU_FAMILY, suffix)
#define TU_TYPE TU__NAME(bk_, TU_FAMILY, )
#define TU__STRING(x) #x
#define TU__QUOTE(x) TU__STRING(x)
#define TU_FAMILY_NAME TU__QUOTE(TU_FAMILY)

static bk_filter *make(uint64_t n, double p, uint64_t seed)
{
    TU_TYPE *v;
    assert_int_equal(TU_FN(_create)(&v, n, p, seed), BK_OK);
    return TU_FN(_as_filter)(v);
}

/* Each family's file defines these: its sizing for 10^6 keys at rate p,
 * and its counts of single keys. */
static void sizing(double p);
static void test_counts(void **state);

static void test_sizing(void **state)
{
    (void)state;
    sizing(0.01);
    sizing(0.001);
}

/* The bits per key of the 4-bit counting filter for 10^6 keys at p. */
static inline double counting_bits_per_key(double p)
{
    uint64_t blocks;
    uint32_t k;
    assert_int_equal(bk_counting_optimal(1000000, p, 4, &blocks, &k), BK_OK);
    return 512.0 * (double)blocks / 1e6;
}

static void test_invalid_parameters(void **state)
{
    (void)state;
    TU_CREATE_ARG_CHECKS(TU_TYPE, TU_FN(_create), 1);
    TU_TYPE *f = (TU_TYPE *)1;
    assert_int_equal(TU_FN(_create)(&f, UINT64_MAX, 0.01, 1), BK_ESIZE);
    assert_int_equal(TU_FN(_get_stats)(NULL, NULL), BK_EINVAL);
    TU_FN(_free)(NULL);
    assert_null(TU__NAME(bk_filter_as_, TU_FAMILY, )(NULL));
}

/* Model-based (tu_deleting_model, as TU_MODEL_RULE says): counts never
 * below the truth (up to where a counter sticks, or 1 in a frozen block);
 * no present key missed, also in the last run, overfilled 10x. */
static void test_model(void **state)
{
    (void)state;
    const tu_model_rule rule = TU_MODEL_RULE;
    tu_deleting_model(make(5000, 0.01, 11), 5000, 10000, 200000, 11, &rule);
    tu_deleting_model(make(5000, 0.001, 12), 5000, 10000, 200000, 12, &rule);
    tu_deleting_model(make(300, 0.01, 13), 300, 6000, 100000, 13, &rule);
}

/* Measured rates, full and after churn (tu_fpr_churn). */
static void stats(const bk_filter *f, bk_delete_stats *st)
{
    assert_int_equal(TU_FN(_get_stats)(TU__NAME(bk_filter_as_, TU_FAMILY, )((bk_filter *)f), st),
                     BK_OK);
}

static void test_fpr(void **state)
{
    (void)state;
    tu_fpr_churn(make(TU_CHURN_KEYS, 0.01, 21), TU_FAMILY_NAME, 0.01, stats);
    tu_fpr_churn(make(TU_CHURN_KEYS, 0.001, 21), TU_FAMILY_NAME, 0.001, stats);
}

/* A lone key "x" in a filter for 1000 keys at 1% (seed 3): removing a
 * key never added is BK_ENOTFOUND; "x" added `copies` times answers 1 (a
 * count of 1), then 0, and counts `copies`; as many removes bring it back
 * to a count of 1, then absent, then BK_ENOTFOUND. Returns the filter. */
static inline bk_filter *lone_key_counts(int copies)
{
    bk_filter *f = make(1000, 0.01, 3);
    assert_int_equal(bk_filter_remove(f, "never", 5), BK_ENOTFOUND);
    assert_int_equal(bk_filter_add(f, "x", 1), 1);
    assert_int_equal(bk_filter_count(f, "x", 1), 1);
    for (int i = 1; i < copies; i++) assert_int_equal(bk_filter_add(f, "x", 1), 0);
    assert_int_equal(bk_filter_count(f, "x", 1), copies);
    for (int i = 1; i < copies; i++) assert_int_equal(bk_filter_remove(f, "x", 1), BK_OK);
    assert_int_equal(bk_filter_count(f, "x", 1), 1);
    assert_int_equal(bk_filter_remove(f, "x", 1), BK_OK);
    assert_int_equal(bk_filter_contains(f, "x", 1), 0);
    assert_int_equal(bk_filter_remove(f, "x", 1), BK_ENOTFOUND);
    return f;
}

/* "y" added `adds` times sticks (counting `stuck` when >= 0) and the
 * overflow is counted; `removes` removes all answer BK_OK and leave it
 * present. */
static inline void stuck_key(bk_filter *f, int adds, int64_t stuck, int removes)
{
    bk_delete_stats st;
    for (int i = 0; i < adds; i++) bk_filter_add(f, "y", 1);
    if (stuck >= 0) assert_int_equal(bk_filter_count(f, "y", 1), stuck);
    stats(f, &st);
    assert_true(st.overflows >= 1);
    for (int i = 0; i < removes; i++) assert_int_equal(bk_filter_remove(f, "y", 1), BK_OK);
    assert_int_equal(bk_filter_contains(f, "y", 1), 1);
}

/* What a batch reports and clear (tu_batch_items_clear), and the
 * allocations of a create. */
static void test_batch_items_clear(void **state)
{
    (void)state;
    tu_batch_items_clear(make(TU_BCF_KEYS, 0.01, 17));
}

TU_OOM_ATTEMPT(attempt_create, TU_TYPE, TU_FN(_create)(&f, 1000, 0.01, 1), TU_FN(_free))

static void test_out_of_memory(void **state)
{
    (void)state;
    assert_int_equal(tu_oom_loop(attempt_create, NULL), TU_CREATE_ALLOCS);
}

/* The tests above, for the family's main(). */
#define TU_DELETING_FAMILY_TESTS                                                   \
    cmocka_unit_test(test_invalid_parameters), cmocka_unit_test(test_sizing),      \
        cmocka_unit_test(test_model), cmocka_unit_test(test_counts),               \
        cmocka_unit_test(test_fpr), cmocka_unit_test(test_batch_items_clear),      \
        cmocka_unit_test(test_out_of_memory)

#endif /* BK_DELETING_FAMILY_H */
