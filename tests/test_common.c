/*
 * test_common.c - version, error strings and sizing maths.
 */
#include "testutil.h"

static void test_version(void **state)
{
    (void)state;
    char want[32];
    snprintf(want, sizeof(want), "%d.%d.%d", BK_VERSION_MAJOR,
             BK_VERSION_MINOR, BK_VERSION_PATCH);
    assert_string_equal(bk_version_string(), want);
    assert_int_equal(bk_version_number(), BK_VERSION_NUMBER);
}

/* Every code has its own name and a sentence; unknown codes are named so. */
static void test_error_strings(void **state)
{
    (void)state;
    static const int codes[] = {
#define CODE(name, value, text) BK_##name,
        BK_ERRNO_MAP(CODE)
#undef CODE
    };
    size_t n = sizeof(codes) / sizeof(codes[0]);
    assert_int_equal(codes[n - 1], BK__ERR_LAST);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(codes[i], -(int)i); /* dense, pinned from 0 down */
        assert_true(strlen(bk_strerror(codes[i])) > 5);
        assert_string_not_equal(bk_errname(codes[i]), "UNKNOWN");
        for (size_t j = 0; j < i; j++) {
            assert_string_not_equal(bk_strerror(codes[i]), bk_strerror(codes[j]));
            assert_string_not_equal(bk_errname(codes[i]), bk_errname(codes[j]));
        }
    }
    assert_string_equal(bk_errname(BK_EFULL), "EFULL");
    assert_string_equal(bk_strerror(BK_OK), "success");
    assert_string_equal(bk_strerror(1), "unknown error");
    assert_string_equal(bk_strerror(-1000), "unknown error");
    assert_string_equal(bk_errname(-1000), "UNKNOWN");
}

/* m = ceil(-n ln p / ln^2 2), k = round(m/n ln 2): worked by hand for the
 * two rates the issue names. */
static void test_optimal_known_values(void **state)
{
    (void)state;
    uint64_t m;
    uint32_t k;
    assert_int_equal(bk_bloom_optimal(1000000, 0.01, &m, &k), BK_OK);
    assert_true(m == 9585059);
    assert_int_equal(k, 7);
    assert_int_equal(bk_bloom_optimal(1000000, 0.001, &m, &k), BK_OK);
    assert_true(m == 14377588);
    assert_int_equal(k, 10);
    /* one item at a loose rate: at least one bit and one hash */
    assert_int_equal(bk_bloom_optimal(1, 0.9, &m, &k), BK_OK);
    assert_true(m >= 1);
    assert_true(k >= 1);
    /* outputs may be NULL */
    assert_int_equal(bk_bloom_optimal(10, 0.5, NULL, NULL), BK_OK);
}

static void test_optimal_errors(void **state)
{
    (void)state;
    uint64_t m;
    uint32_t k;
    assert_int_equal(bk_bloom_optimal(0, 0.01, &m, &k), BK_ECAPACITY);
    assert_int_equal(bk_bloom_optimal(10, 0.0, &m, &k), BK_EFPR);
    assert_int_equal(bk_bloom_optimal(10, 1.0, &m, &k), BK_EFPR);
    assert_int_equal(bk_bloom_optimal(10, -0.5, &m, &k), BK_EFPR);
    assert_int_equal(bk_bloom_optimal(10, 2.0, &m, &k), BK_EFPR);
    assert_int_equal(bk_bloom_optimal(10, NAN, &m, &k), BK_EFPR);
    assert_int_equal(bk_bloom_optimal(10, INFINITY, &m, &k), BK_EFPR);
    /* 1e15 items at 1e-9 need 4.3e16 bits > BK_MAX_BITS */
    assert_int_equal(bk_bloom_optimal(UINT64_C(1000000000000000), 1e-9, &m, &k),
                     BK_ESIZE);
    assert_int_equal(bk_bloom_optimal(UINT64_MAX, 0.5, &m, &k), BK_ESIZE);
    /* 1e-30 needs k = 100 > BK_MAX_HASHES */
    assert_int_equal(bk_bloom_optimal(1000, 1e-30, &m, &k), BK_EHASHES);
}

static void test_fpr_formula(void **state)
{
    (void)state;
    double want = pow(1.0 - exp(-7.0 * 1e6 / 9585059.0), 7.0);
    assert_true(fabs(bk_bloom_fpr(1000000, 9585059, 7) - want) < 1e-12);
    assert_true(bk_bloom_fpr(0, 100, 3) == 0.0);
    assert_true(isnan(bk_bloom_fpr(10, 0, 3)));
    assert_true(isnan(bk_bloom_fpr(10, 100, 0)));
    /* more items never lowers the rate */
    double prev = 0;
    for (uint64_t n = 0; n <= 2000000; n += 100000) {
        double p = bk_bloom_fpr(n, 9585059, 7);
        assert_true(p >= prev);
        prev = p;
    }
}

/* Capacity is the inverse of sizing: the answer meets p with the optimal k,
 * and lies within 2% of the continuous m ln^2 2 / -ln p. */
static void test_capacity(void **state)
{
    (void)state;
    static const double rates[] = {0.1, 0.01, 0.001, 1e-6};
    for (size_t i = 0; i < 4; i++) {
        uint64_t m = UINT64_C(80000000), n;
        double p = rates[i];
        assert_int_equal(bk_bloom_capacity(m, p, &n), BK_OK);
        uint32_t k = (uint32_t)fmax(1, round((double)m / (double)n * log(2)));
        assert_true(bk_bloom_fpr(n, m, k) <= p);
        double continuous = (double)m * log(2) * log(2) / -log(p);
        assert_true(fabs((double)n - continuous) < 0.02 * continuous);
    }
    uint64_t n;
    assert_int_equal(bk_bloom_capacity(0, 0.01, &n), BK_ESIZE);
    assert_int_equal(bk_bloom_capacity(BK_MAX_BITS + 1, 0.01, &n), BK_ESIZE);
    assert_int_equal(bk_bloom_capacity(1000, 0.0, &n), BK_EFPR);
    assert_int_equal(bk_bloom_capacity(1000, NAN, &n), BK_EFPR);
    assert_int_equal(bk_bloom_capacity(2, 1e-6, &n), BK_ECAPACITY);
    /* sizing then capacity gives back the n we started from, nearly */
    uint64_t m;
    assert_int_equal(bk_bloom_optimal(1000000, 0.001, &m, NULL), BK_OK);
    assert_int_equal(bk_bloom_capacity(m, 0.001, &n), BK_OK);
    assert_true(n > 990000 && n <= 1000000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_error_strings),
        cmocka_unit_test(test_optimal_known_values),
        cmocka_unit_test(test_optimal_errors),
        cmocka_unit_test(test_fpr_formula),
        cmocka_unit_test(test_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
