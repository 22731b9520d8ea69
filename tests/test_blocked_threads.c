/*
 * test_blocked_threads.c - concurrent use of one blocked filter without
 * locks. Labelled "threads": `make test` also runs it under ThreadSanitizer.
 */
#include <pthread.h>

#include "testutil.h"

#define THREADS 4
#define PER_THREAD 40000u
#define BATCH 64u

typedef struct {
    bk_blocked *f;
    uint64_t first;
    uint64_t count;
    int use_batch;
    uint64_t published; /* keys [first, first + published) are added */
} worker;

static void *adder(void *arg)
{
    worker *w = arg;
    char keys[BATCH][TU_KEY_LEN];
    const void *ptrs[BATCH];
    size_t lens[BATCH];
    for (uint64_t i = 0; i < w->count; i += BATCH) {
        uint64_t n = w->count - i < BATCH ? w->count - i : BATCH;
        for (uint64_t j = 0; j < n; j++) {
            tu_key(keys[j], w->first + i + j, 1);
            ptrs[j] = keys[j];
            lens[j] = TU_KEY_LEN;
            if (!w->use_batch) bk_blocked_add(w->f, keys[j], TU_KEY_LEN);
        }
        if (w->use_batch) bk_blocked_add_batch(w->f, ptrs, lens, n, NULL);
        __atomic_store_n(&w->published, i + n, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Reads while the adders run: every key an adder has published must be
 * found (the add happened before the release store the reader acquired). */
static void *reader(void *arg)
{
    worker *ws = arg;
    char key[TU_KEY_LEN];
    uint64_t round = 0;
    for (;;) {
        int all_done = 1;
        for (int t = 0; t < THREADS; t++) {
            uint64_t done = __atomic_load_n(&ws[t].published, __ATOMIC_ACQUIRE);
            if (done < ws[t].count) all_done = 0;
            if (done == 0) continue;
            tu_key(key, ws[t].first + (round * 7919) % done, 1);
            if (!bk_blocked_contains(ws[t].f, key, sizeof(key))) return (void *)1;
        }
        round++;
        if (all_done) return NULL;
    }
}

/* Switches the SIMD level back and forth while the others run: every level
 * sets the same bits, so the result must not change. */
static int stop_switching;

static void *switcher(void *arg)
{
    (void)arg;
    int best = bk_blocked_simd_best(), level = 0;
    while (!__atomic_load_n(&stop_switching, __ATOMIC_ACQUIRE)) {
        bk_blocked_set_simd_level(level);
        level = level >= best ? 0 : level + 1;
    }
    return NULL;
}

/* 1 when a and b hold exactly the same bits (see test_blocked.c). */
static int same_bits(const bk_blocked *a, const bk_blocked *b)
{
    bk_blocked *both;
    bk_blocked_stats sa, sb, sboth;
    assert_int_equal(bk_blocked_clone(&both, a), BK_OK);
    assert_int_equal(bk_blocked_intersect(both, b), BK_OK);
    bk_blocked_get_stats(a, &sa);
    bk_blocked_get_stats(b, &sb);
    bk_blocked_get_stats(both, &sboth);
    bk_blocked_free(both);
    return sa.bits_set == sb.bits_set && sboth.bits_set == sa.bits_set;
}

static void concurrent_adds_lose_nothing(int split)
{
    const uint64_t n = (uint64_t)THREADS * PER_THREAD;
    bk_blocked *shared, *serial;
    int (*create)(bk_blocked **, uint64_t, double, uint64_t) =
        split ? bk_blocked_create_split : bk_blocked_create;
    /* a small filter (few blocks) so that threads often hit the same line */
    assert_int_equal(create(&shared, n, 0.01, 21), BK_OK);
    assert_int_equal(create(&serial, n, 0.01, 21), BK_OK);

    pthread_t tid[THREADS], rtid, stid;
    worker ws[THREADS];
    for (int t = 0; t < THREADS; t++) {
        ws[t].f = shared;
        ws[t].first = (uint64_t)t * PER_THREAD;
        ws[t].count = PER_THREAD;
        ws[t].use_batch = t % 2;
        ws[t].published = 0;
    }
    __atomic_store_n(&stop_switching, 0, __ATOMIC_RELEASE);
    assert_int_equal(pthread_create(&stid, NULL, switcher, NULL), 0);
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&tid[t], NULL, adder, &ws[t]), 0);
    assert_int_equal(pthread_create(&rtid, NULL, reader, ws), 0);
    for (int t = 0; t < THREADS; t++) pthread_join(tid[t], NULL);
    void *reader_result;
    pthread_join(rtid, &reader_result);
    __atomic_store_n(&stop_switching, 1, __ATOMIC_RELEASE);
    pthread_join(stid, NULL);
    assert_true(bk_blocked_set_simd_level(bk_blocked_simd_best()) >= 0);
    assert_null(reader_result);

    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < n; i++) {
        tu_key(key, i, 1);
        bk_blocked_add(serial, key, sizeof(key));
    }
    /* the concurrent filter has exactly the bits of the serial one */
    assert_true(same_bits(shared, serial));
    for (uint64_t i = 0; i < n; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_blocked_contains(shared, key, sizeof(key)), 1);
    }
    /* every key counted once at most; nearly all were certainly new */
    assert_true(bk_blocked_items(shared) <= n);
    assert_true(bk_blocked_items(shared) > n - n / 20);
    bk_blocked_free(shared);
    bk_blocked_free(serial);
}

static void test_concurrent_adds_lose_nothing(void **state)
{
    (void)state;
    concurrent_adds_lose_nothing(0);
}

/* The same for the split layout's atomic adds. */
static void test_concurrent_adds_lose_nothing_split(void **state)
{
    (void)state;
    concurrent_adds_lose_nothing(1);
}

/* Many threads add_if_absent the same keys: each key ends up present, and
 * the returned 1s count at least the keys that were not false positives
 * when first tried (so at least 90% of them at this rate) and at most
 * one per thread per key. */
typedef struct {
    bk_blocked *f;
    uint64_t count;
    uint64_t added;
} racer;

static void *race_if_absent(void *arg)
{
    racer *r = arg;
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < r->count; i++) {
        tu_key(key, i, 2);
        r->added += (uint64_t)bk_blocked_add_if_absent(r->f, key, sizeof(key));
    }
    return NULL;
}

static void test_concurrent_add_if_absent(void **state)
{
    (void)state;
    const uint64_t n = 50000;
    bk_blocked *f;
    assert_int_equal(bk_blocked_create(&f, n, 0.01, 5), BK_OK);
    pthread_t tid[THREADS];
    racer rs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        rs[t].f = f;
        rs[t].count = n;
        rs[t].added = 0;
        assert_int_equal(pthread_create(&tid[t], NULL, race_if_absent, &rs[t]), 0);
    }
    uint64_t added = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(tid[t], NULL);
        added += rs[t].added;
    }
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < n; i++) {
        tu_key(key, i, 2);
        assert_int_equal(bk_blocked_contains(f, key, sizeof(key)), 1);
    }
    assert_true(added >= n - n / 10 && added <= (uint64_t)THREADS * n);
    assert_true(bk_blocked_items(f) == added);
    bk_blocked_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_adds_lose_nothing),
        cmocka_unit_test(test_concurrent_adds_lose_nothing_split),
        cmocka_unit_test(test_concurrent_add_if_absent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
