/*
 * test_iblt.c - set reconciliation (lib/iblt.c): IBLT subtract and decode
 * give exactly the symmetric difference, too small a table says so, the
 * strata estimator lands within a factor of two, bk_reconcile recovers
 * both sides' missing ids with its byte counts, the wire formats round
 * trip and reject damage, and allocation failures are clean.
 */
#include "testutil.h"

/* ids: A = [0, common + only_a), B = [0, common) + [big, big + only_b),
 * mixed so they look random. */
static uint64_t id_of(uint64_t i)
{
    uint64_t z = i + UINT64_C(0x632BE59BD9B4E019);
    z = (z ^ (z >> 31)) * UINT64_C(0x7FB5D329728EA185);
    z = (z ^ (z >> 27)) * UINT64_C(0x81DADEF4BC2DD44D);
    return z ^ (z >> 33);
}

#define BIG (UINT64_C(1) << 40)

typedef struct sets {
    uint64_t *a, *b;
    size_t na, nb;
} sets;

static void sets_make(sets *s, size_t common, size_t only_a, size_t only_b)
{
    s->na = common + only_a;
    s->nb = common + only_b;
    s->a = malloc((s->na + 1) * sizeof(uint64_t));
    s->b = malloc((s->nb + 1) * sizeof(uint64_t));
    assert_true(s->a && s->b);
    for (size_t i = 0; i < s->na; i++) s->a[i] = id_of(i);
    for (size_t i = 0; i < common; i++) s->b[i] = id_of(i);
    for (size_t i = 0; i < only_b; i++) s->b[common + i] = id_of(BIG + i);
}

static void sets_free(sets *s)
{
    free(s->a);
    free(s->b);
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* got (n entries) is exactly `want` ids id_of(first + i), any order. */
static void assert_ids(uint64_t *got, size_t n, uint64_t first, size_t want)
{
    assert_int_equal(n, want);
    uint64_t *expect = malloc((want + 1) * sizeof(uint64_t));
    assert_non_null(expect);
    for (size_t i = 0; i < want; i++) expect[i] = id_of(first + i);
    qsort(expect, want, sizeof(uint64_t), cmp_u64);
    qsort(got, n, sizeof(uint64_t), cmp_u64);
    assert_memory_equal(got, expect, want * sizeof(uint64_t));
    free(expect);
}

static bk_iblt *table_of(const uint64_t *ids, size_t n, uint64_t cells)
{
    bk_iblt *t;
    assert_int_equal(bk_iblt_create(&t, cells, 0, 77), BK_OK);
    for (size_t i = 0; i < n; i++) bk_iblt_insert(t, ids[i]);
    return t;
}

/*--------------------------------------------------------------------------
 * Tables
 *--------------------------------------------------------------------------*/

static void test_decode_exact(void **state)
{
    (void)state;
    sets s;
    sets_make(&s, 100000, 700, 300);
    uint64_t cells = bk_iblt_cells_for(1000);
    bk_iblt *a = table_of(s.a, s.na, cells), *b = table_of(s.b, s.nb, cells);
    assert_int_equal(bk_iblt_subtract(a, b), BK_OK);
    size_t room = bk_iblt_cells(a), na, nb;
    uint64_t *oa = malloc(room * 8), *ob = malloc(room * 8);
    assert_true(oa && ob);
    assert_int_equal(bk_iblt_decode(a, oa, &na, ob, &nb, room), BK_OK);
    assert_ids(oa, na, 100000, 700);
    assert_ids(ob, nb, BIG, 300);
    /* decode left the table as it was: decoding again gives the same */
    assert_int_equal(bk_iblt_decode(a, oa, &na, ob, &nb, room), BK_OK);
    assert_int_equal(na + nb, 1000);
    assert_int_equal(bk_iblt_decode(a, oa, &na, ob, &nb, room - 1), BK_ESIZE);
    free(oa);
    free(ob);
    bk_iblt_free(a);
    bk_iblt_free(b);
    sets_free(&s);
}

static void test_table_too_small(void **state)
{
    (void)state;
    sets s;
    sets_make(&s, 1000, 500, 500);
    bk_iblt *a = table_of(s.a, s.na, 400), *b = table_of(s.b, s.nb, 400);
    assert_int_equal(bk_iblt_subtract(a, b), BK_OK);
    size_t na, nb;
    uint64_t oa[400], ob[400];
    assert_int_equal(bk_iblt_decode(a, oa, &na, ob, &nb, 400), BK_EDECODE);
    assert_true(na + nb < 1000);
    bk_iblt_free(a);
    bk_iblt_free(b);
    sets_free(&s);
}

static void test_insert_delete_and_shapes(void **state)
{
    (void)state;
    bk_iblt *t, *u;
    assert_int_equal(bk_iblt_create(&t, 10, 3, 1), BK_OK);
    assert_int_equal(bk_iblt_cells(t), 12); /* a multiple of k */
    assert_int_equal(bk_iblt_hashes(t), 3);
    bk_iblt_insert(t, 42);
    bk_iblt_delete(t, 42);
    uint64_t oa[12], ob[12];
    size_t na, nb;
    assert_int_equal(bk_iblt_decode(t, oa, &na, ob, &nb, 12), BK_OK);
    assert_int_equal(na + nb, 0);
    bk_iblt_delete(t, 7); /* a lone delete decodes as "only in B" */
    assert_int_equal(bk_iblt_decode(t, oa, &na, ob, &nb, 12), BK_OK);
    assert_int_equal(nb, 1);
    assert_int_equal(ob[0], 7);
    assert_int_equal(bk_iblt_create(&u, 12, 4, 1), BK_OK);
    assert_int_equal(bk_iblt_subtract(t, u), BK_EINCOMPAT);
    bk_iblt_free(u);
    assert_int_equal(bk_iblt_create(&u, 12, 3, 2), BK_OK);
    assert_int_equal(bk_iblt_subtract(t, u), BK_EINCOMPAT);
    bk_iblt_free(u);
    assert_int_equal(bk_iblt_create(&u, 12, 2, 1), BK_EPARAM);
    assert_int_equal(bk_iblt_create(&u, 12, 9, 1), BK_EPARAM);
    assert_int_equal(bk_iblt_create(&u, UINT64_C(1) << 33, 4, 1), BK_ESIZE);
    assert_int_equal(bk_iblt_create(NULL, 12, 4, 1), BK_EINVAL);
    bk_iblt_free(t);
    bk_iblt_free(NULL);
}

/*--------------------------------------------------------------------------
 * The estimator and the exchange
 *--------------------------------------------------------------------------*/

static void test_strata_estimate(void **state)
{
    (void)state;
    const size_t diffs[] = {0, 10, 100, 1000, 10000, 50000};
    for (size_t k = 0; k < sizeof(diffs) / sizeof(diffs[0]); k++) {
        size_t d = diffs[k];
        sets s;
        sets_make(&s, 200000, d / 2, d - d / 2);
        bk_strata *a, *b;
        assert_int_equal(bk_strata_create(&a, 5), BK_OK);
        assert_int_equal(bk_strata_create(&b, 5), BK_OK);
        for (size_t i = 0; i < s.na; i++) bk_strata_insert(a, s.a[i]);
        for (size_t i = 0; i < s.nb; i++) bk_strata_insert(b, s.b[i]);
        uint64_t est;
        assert_int_equal(bk_strata_estimate(a, b, &est), BK_OK);
        /* small differences decode exactly in every stratum; larger ones
         * are scaled from a sample of a few hundred: within 2x */
        if (d <= 100) assert_int_equal(est, d);
        else if (est < d / 2 || est > 2 * d)
            fail_msg("d=%zu: estimate %llu", d, (unsigned long long)est);
        bk_strata_free(a);
        bk_strata_free(b);
        sets_free(&s);
    }
}

static void check_reconcile(size_t common, size_t only_a, size_t only_b)
{
    sets s;
    sets_make(&s, common, only_a, only_b);
    uint64_t *oa = malloc((s.na + 1) * 8), *ob = malloc((s.nb + 1) * 8);
    assert_true(oa && ob);
    size_t na, nb;
    bk_reconcile_stats st;
    assert_int_equal(bk_reconcile(s.a, s.na, s.b, s.nb, 9, oa, &na, ob, &nb, &st), BK_OK);
    assert_ids(oa, na, common, only_a);
    assert_ids(ob, nb, BIG, only_b);
    assert_int_equal(st.strata_bytes, 32 + 32 * 80 * 16 + 8);
    assert_true(st.rounds >= 1);
    assert_true(st.iblt_bytes >= 32 + 16 * st.cells + 8);
    assert_int_equal(st.request_bytes, 8 * only_b);
    free(oa);
    free(ob);
    sets_free(&s);
}

static void test_reconcile(void **state)
{
    (void)state;
    check_reconcile(0, 0, 0);
    check_reconcile(1000, 0, 0);
    check_reconcile(0, 5, 0);
    check_reconcile(0, 0, 7);
    check_reconcile(100000, 1000, 1000);
    check_reconcile(100000, 3000, 10);
    check_reconcile(50, 20000, 20000); /* almost disjoint */
}

/* An estimate far below the truth costs rounds, not correctness. */
static void test_reconcile_retries(void **state)
{
    (void)state;
    /* with 1e5 differences the sparsest strata decode but the estimate
     * is a scaled sample; whatever it says, the rounds get there */
    check_reconcile(10000, 60000, 60000);
}

/*--------------------------------------------------------------------------
 * Wire formats
 *--------------------------------------------------------------------------*/

static void test_wire_formats(void **state)
{
    (void)state;
    sets s;
    sets_make(&s, 500, 30, 20);
    bk_iblt *t = table_of(s.a, s.na, 100);
    size_t len = bk_iblt_serialized_size(t);
    assert_int_equal(len, 32 + 16 * 100 + 8);
    unsigned char *buf = malloc(len);
    assert_non_null(buf);
    assert_int_equal(bk_iblt_serialize(t, buf, len - 1), BK_ESIZE);
    assert_int_equal(bk_iblt_serialize(t, buf, len), BK_OK);
    bk_iblt *u;
    assert_int_equal(bk_iblt_deserialize(&u, buf, len), BK_OK);
    assert_int_equal(bk_iblt_subtract(u, t), BK_OK); /* identical: all zero */
    uint64_t oa[100], ob[100];
    size_t na, nb;
    assert_int_equal(bk_iblt_decode(u, oa, &na, ob, &nb, 100), BK_OK);
    assert_int_equal(na + nb, 0);
    bk_iblt_free(u);
    u = (bk_iblt *)1;
    assert_int_equal(bk_iblt_deserialize(&u, buf, len - 1), BK_ETRUNC);
    assert_null(u);
    assert_int_equal(bk_iblt_deserialize(&u, buf, 10), BK_ETRUNC);
    buf[100] ^= 1;
    assert_int_equal(bk_iblt_deserialize(&u, buf, len), BK_ECHECKSUM);
    buf[100] ^= 1;
    buf[0] = 'x';
    assert_int_equal(bk_iblt_deserialize(&u, buf, len), BK_EMAGIC);
    buf[0] = 0x89;
    buf[8] = 2;
    assert_int_equal(bk_iblt_deserialize(&u, buf, len), BK_EVERSION);
    buf[8] = 1;
    buf[12] = 2; /* k = 2 */
    assert_int_equal(bk_iblt_deserialize(&u, buf, len), BK_ECORRUPT);
    buf[12] = 4;
    buf[16] = 99; /* cells not a multiple of k */
    assert_int_equal(bk_iblt_deserialize(&u, buf, len), BK_ECORRUPT);
    free(buf);
    bk_iblt_free(t);

    bk_strata *a, *b;
    assert_int_equal(bk_strata_create(&a, 3), BK_OK);
    for (size_t i = 0; i < s.na; i++) bk_strata_insert(a, s.a[i]);
    len = bk_strata_serialized_size(a);
    buf = malloc(len);
    assert_non_null(buf);
    assert_int_equal(bk_strata_serialize(a, buf, len), BK_OK);
    assert_int_equal(bk_strata_deserialize(&b, buf, len), BK_OK);
    uint64_t est = 1;
    assert_int_equal(bk_strata_estimate(a, b, &est), BK_OK);
    assert_int_equal(est, 0);
    bk_strata_free(b);
    assert_int_equal(bk_strata_deserialize(&b, buf, len + 1 > len ? len - 1 : len), BK_ETRUNC);
    buf[20] = 81; /* cells per stratum */
    assert_int_equal(bk_strata_deserialize(&b, buf, len), BK_ECORRUPT);
    assert_null(b);
    free(buf);
    bk_strata_create(&b, 4);
    assert_int_equal(bk_strata_estimate(a, b, &est), BK_EINCOMPAT);
    bk_strata_free(a);
    bk_strata_free(b);
    sets_free(&s);
}

/*--------------------------------------------------------------------------
 * Allocation failures
 *--------------------------------------------------------------------------*/

static int try_reconcile(void *ctx)
{
    sets *s = ctx;
    uint64_t *oa = malloc((s->na + 1) * 8), *ob = malloc((s->nb + 1) * 8);
    assert_true(oa && ob);
    size_t na, nb;
    int rc = bk_reconcile(s->a, s->na, s->b, s->nb, 1, oa, &na, ob, &nb, NULL);
    if (rc == BK_OK && na + nb != 40) rc = BK_EINVAL;
    free(oa);
    free(ob);
    return rc;
}

static void test_allocation_failures(void **state)
{
    (void)state;
    sets s;
    sets_make(&s, 2000, 20, 20);
    assert_true(tu_oom_loop(try_reconcile, &s) >= 4);
    sets_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_exact),
        cmocka_unit_test(test_table_too_small),
        cmocka_unit_test(test_insert_delete_and_shapes),
        cmocka_unit_test(test_strata_estimate),
        cmocka_unit_test(test_reconcile),
        cmocka_unit_test(test_reconcile_retries),
        cmocka_unit_test(test_wire_formats),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
