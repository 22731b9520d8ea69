/*
 * static_family.h - what tests/test_fuse.c and test_bumped.c check alike on
 * their static filters (built once from a key set, at 2^-w), through the
 * generic handle: the measured rate, duplicates, tiny sets, files and the
 * golden file. Include after testutil.h.
 */
#ifndef BK_STATIC_FAMILY_H
#define BK_STATIC_FAMILY_H

#include "testutil.h"
#include "damage.h"

/* (tu_static_make_fn, a family's build of ks at width w from seed as a
 * generic handle, is in testutil.h.) */

/* static int name(bk_filter **out, const tu_keyset *ks, uint32_t w,
 * uint64_t seed), a tu_static_make_fn calling build(&f, keys, lens, n, w,
 * seed) of a T. */
#define TU_STATIC_MAKE(name, T, build, as_filter)                                  \
    static int name(bk_filter **out, const tu_keyset *ks, uint32_t w, uint64_t seed) \
    {                                                                              \
        T *f = NULL;                                                               \
        int rc = build(&f, ks->keys, ks->lens, ks->n, w, seed);                    \
        *out = rc == BK_OK ? as_filter(f) : NULL;                                  \
        return rc;                                                                 \
    }

static inline bk_filter *tu_static_make(tu_static_make_fn make, const tu_keyset *ks, uint32_t w,
                                        uint64_t seed)
{
    bk_filter *g = NULL;
    assert_int_equal(make(&g, ks, w, seed), BK_OK);
    assert_non_null(g);
    return g;
}

/* The family's statistics of f: items and duplicates. */
typedef void (*tu_static_counts_fn)(const bk_filter *f, uint64_t *items, uint64_t *duplicates);

/* The rate: n keys (tag 1) built at width w (seed 42) are all found, and
 * of `probes` absent keys (tag 2) the share found is within 5 binomial sd
 * of 2^-w; then check(f, n, w) (the family's statistics). */
static inline void tu_static_rate(tu_static_make_fn make, uint32_t w, uint64_t n,
                                  uint64_t probes,
                                  void (*check)(const bk_filter *f, uint64_t n, uint32_t w))
{
    tu_keyset ks;
    tu_keyset_make(&ks, n, 0, 1);
    bk_filter *f = tu_static_make(make, &ks, w, 42);
    assert_int_equal(tu_count_found(f, 0, n, 1), n); /* no false negatives */
    double p = ldexp(1.0, -(int)w);
    double measured = (double)tu_count_found(f, 0, probes, 2) / (double)probes;
    double tol = tu_tolerance(p, probes, 5.0);
    if (fabs(measured - p) > tol)
        fail_msg("w=%u: measured %.6g, expected %.6g +- %.3g", w, measured, p, tol);
    check(f, n, w);
    bk_filter_free(f);
    tu_keyset_free(&ks);
}

/* A tu_static_rate case, run by tu_static_rate_test as the initial state
 * of a test named `name` (TU_STATIC_RATE_TEST, in main's list). */
typedef struct tu_rate_case {
    tu_static_make_fn make;
    void (*check)(const bk_filter *f, uint64_t n, uint32_t w);
    uint32_t w;
    uint64_t n, probes;
} tu_rate_case;

static inline void tu_static_rate_test(void **state)
{
    const tu_rate_case *c = *state;
    tu_static_rate(c->make, c->w, c->n, c->probes, c->check);
}

#define TU_STATIC_RATE_TEST(name, make, check, w, n, probes)                       \
    {name, tu_static_rate_test, NULL, NULL, &(tu_rate_case){make, check, w, n, probes}}

/* Duplicates: 20000 distinct keys given three times each (w = 8, seed 1)
 * make 20000 items and 40000 duplicates, all found; 60000 copies of one key
 * (w = 16) make one item, found. */
static inline void tu_static_duplicates(tu_static_make_fn make, tu_static_counts_fn counts)
{
    const uint64_t distinct = 20000;
    uint64_t items, duplicates;
    tu_keyset ks;
    tu_keyset_make(&ks, distinct * 3, 0, 1);
    /* key i, i + distinct and i + 2 distinct are the same string */
    for (uint64_t i = 0; i < ks.n; i++) tu_key(ks.store + i * TU_KEY_LEN, i % distinct, 1);
    bk_filter *f = tu_static_make(make, &ks, 8, 1);
    counts(f, &items, &duplicates);
    assert_int_equal(items, distinct);
    assert_int_equal(duplicates, 2 * distinct);
    assert_int_equal(tu_count_found(f, 0, distinct, 1), distinct);
    bk_filter_free(f);

    /* every key the same */
    for (uint64_t i = 0; i < ks.n; i++) ks.keys[i] = ks.store;
    f = tu_static_make(make, &ks, 16, 1);
    counts(f, &items, &duplicates);
    assert_int_equal(items, 1);
    assert_int_equal(bk_filter_contains(f, ks.store, TU_KEY_LEN), 1);
    bk_filter_free(f);
    tu_keyset_free(&ks);
}

/* A family's make and counts, as the initial state of the test
 * TU_STATIC_DUPLICATES_TEST puts in main's list. */
typedef struct tu_static_ops {
    tu_static_make_fn make;
    tu_static_counts_fn counts;
} tu_static_ops;

static inline void tu_static_duplicates_test(void **state)
{
    const tu_static_ops *o = *state;
    tu_static_duplicates(o->make, o->counts);
}

#define TU_STATIC_DUPLICATES_TEST(ops)                                             \
    {"test_duplicates", tu_static_duplicates_test, NULL, NULL, ops}

/* Tiny sets: the empty set (w = 8, seed 1) holds no item, finds none of
 * 100000 absent keys and reports a rate of 0 (then empty(f), when given);
 * every size n from 1 to max_n, at width widths[n % nwidths], from seeds 0
 * to seeds - 1, holds n items, all found. The largest metric(f) over them
 * (layers, attempts) is at least `least`. */
static inline void tu_static_tiny_sets(tu_static_make_fn make, tu_static_counts_fn counts,
                                       void (*empty)(const bk_filter *f), uint64_t max_n,
                                       uint64_t seeds, const uint32_t *widths, uint64_t nwidths,
                                       uint32_t (*metric)(const bk_filter *f), uint32_t least)
{
    uint64_t items, duplicates;
    tu_keyset ks;
    tu_keyset_make(&ks, max_n, 0, 1);
    tu_keyset none = {NULL, NULL, NULL, 0}; /* NULL arrays */
    bk_filter *f = tu_static_make(make, &none, 8, 1);
    counts(f, &items, &duplicates);
    assert_int_equal(items, 0);
    assert_int_equal(tu_count_found(f, 0, 100000, 2), 0);
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(f, &info), BK_OK);
    assert_true(info.fpr_now == 0.0);
    if (empty != NULL) empty(f);
    bk_filter_free(f);

    uint32_t most = 0;
    for (uint64_t n = 1; n <= max_n; n++) {
        for (uint64_t seed = 0; seed < seeds; seed++) {
            tu_keyset part = ks;
            part.n = n;
            f = tu_static_make(make, &part, widths[n % nwidths], seed);
            counts(f, &items, &duplicates);
            assert_int_equal(items, n);
            assert_int_equal(tu_count_found(f, 0, n, 1), n);
            uint32_t m = metric(f);
            if (m > most) most = m;
            bk_filter_free(f);
        }
    }
    assert_true(most >= least);
    tu_keyset_free(&ks);
}

/* Files: 30000 keys built at each width from w_lo to w_hi (step w_step,
 * seed 11), check(f) when given, then saved, loaded and mapped answering
 * alike (tu_check_save_load_map, tags 1 and 2). */
static inline void tu_static_round_trip(tu_static_make_fn make, uint32_t w_lo, uint32_t w_hi,
                                        uint32_t w_step, void (*check)(const bk_filter *f))
{
    tu_keyset ks;
    tu_keyset_make(&ks, 30000, 0, 1);
    for (uint32_t w = w_lo; w <= w_hi; w += w_step) {
        bk_filter *g = tu_static_make(make, &ks, w, 11);
        if (check != NULL) check(g);
        tu_check_save_load_map(g, 1, 2);
        bk_filter_free(g);
    }
    tu_keyset_free(&ks);
}

/* f's image is the golden file at path (tu_golden); returns the filter
 * loaded from the golden bytes, of family `family`. */
static inline bk_filter *tu_golden_reload(const bk_filter *f, const char *path, bk_family family)
{
    size_t len, glen;
    unsigned char *buf = tu_serialize(f, &len);
    unsigned char *golden = tu_golden(path, buf, len, &glen);
    bk_filter *g;
    assert_int_equal(bk_filter_deserialize(&g, golden, glen), BK_OK);
    assert_int_equal(bk_filter_family(g), family);
    free(golden);
    free(buf);
    return g;
}

/* tu_static_make of the n keys tu_key(i, 1), i < n. */
static inline bk_filter *tu_static_make_keys(tu_static_make_fn make, uint64_t n, uint32_t w,
                                             uint64_t seed)
{
    tu_keyset ks;
    tu_keyset_make(&ks, n, 0, 1);
    bk_filter *g = tu_static_make(make, &ks, w, seed);
    tu_keyset_free(&ks);
    return g;
}

/* The filter make() returns, built from the keys tu_key(i, 1), i < n, pins
 * its format with the golden file at path (tu_golden_reload, a filter of
 * `family`), whose filter finds them all: the test TU_STATIC_GOLDEN_TEST
 * puts in main's list. */
typedef struct tu_golden_case {
    bk_filter *(*make)(void);
    const char *path;
    bk_family family;
    uint64_t n;
} tu_golden_case;

static inline void tu_static_golden_test(void **state)
{
    const tu_golden_case *c = *state;
    bk_filter *f = c->make();
    bk_filter *g = tu_golden_reload(f, c->path, c->family);
    assert_int_equal(tu_count_found(g, 0, c->n, 1), c->n);
    bk_filter_free(g);
    bk_filter_free(f);
}

#define TU_STATIC_GOLDEN_TEST(make, path, family, n)                               \
    {"test_golden_file", tu_static_golden_test, NULL, NULL,                        \
     &(tu_golden_case){make, path, family, n}}

/* Allocation failures (tu_static_make_failures) of make's builds of n keys
 * at width w from seed, over at least `least` allocations, and of loading
 * the image of the filter image() returns: the test
 * TU_STATIC_FAILURES_TEST puts in main's list. */
typedef struct tu_failures_case {
    tu_static_make_fn make;
    uint32_t w;
    uint64_t seed, n;
    long least;
    bk_filter *(*image)(void);
} tu_failures_case;

static inline void tu_static_failures_test(void **state)
{
    const tu_failures_case *c = *state;
    bk_filter *f = c->image();
    tu_static_make_failures(c->make, c->w, c->seed, c->n, c->least, f);
    bk_filter_free(f);
}

#define TU_STATIC_FAILURES_TEST(make, w, seed, n, least, image)                    \
    {"test_allocation_failures", tu_static_failures_test, NULL, NULL,              \
     &(tu_failures_case){make, w, seed, n, least, image}}

/* Each damaged field of f's image alone is refused (tu_expect_corrupt). */
static inline void tu_expect_corrupt_image(const bk_filter *f, const tu_damage *cases, size_t n)
{
    size_t len;
    unsigned char *good = tu_serialize(f, &len);
    tu_expect_corrupt(good, len, cases, n);
    free(good);
}

#endif /* BK_STATIC_FAMILY_H */
