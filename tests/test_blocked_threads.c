/*
 * test_blocked_threads.c - concurrent use of one blocked filter without
 * locks. Labelled "threads": `make test` also runs it under ThreadSanitizer.
 */
#include "race.h"

#define THREADS 4
#define PER_THREAD 40000u

typedef struct {
    tu_adder a; /* first: its keys, and add_batch */
    bk_blocked *f;
    int use_batch;
} worker;

/* Each batch in one call, or key by key (tu_add_batches). */
static int add_batch(void *job, const void *const *keys, const size_t *lens, uint64_t n)
{
    worker *w = job;
    if (w->use_batch) bk_blocked_add_batch(w->f, keys, lens, n, NULL);
    else
        for (uint64_t j = 0; j < n; j++) bk_blocked_add(w->f, keys[j], lens[j]);
    return 0;
}

/* The reader's lookup (tu_progress_run): every key an adder has published
 * must be found. */
static int found(const void *f, const char *key, size_t len)
{
    return bk_blocked_contains(f, key, len);
}

TU_ADD_RANGE(add_range, bk_blocked, bk_blocked_add)
TU_COUNT_FOUND(count_found, bk_blocked, bk_blocked_contains)

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

    pthread_t stid;
    worker ws[THREADS];
    for (int t = 0; t < THREADS; t++)
        ws[t] = (worker){{{(uint64_t)t * PER_THREAD, PER_THREAD, 0}, add_batch}, shared, t % 2};
    tu_reader r = {ws, sizeof(worker), THREADS, 1, found, shared};
    __atomic_store_n(&stop_switching, 0, __ATOMIC_RELEASE);
    assert_int_equal(pthread_create(&stid, NULL, switcher, NULL), 0);
    void *reader_result = tu_progress_run(tu_batch_adder, &r, 1);
    __atomic_store_n(&stop_switching, 1, __ATOMIC_RELEASE);
    pthread_join(stid, NULL);
    assert_true(bk_blocked_set_simd_level(bk_blocked_simd_best()) >= 0);
    assert_null(reader_result);

    add_range(serial, 0, n, 1);
    /* the concurrent filter has exactly the bits of the serial one */
    assert_true(same_bits(shared, serial));
    assert_int_equal(count_found(shared, 0, n, 1), n);
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
    racer rs[THREADS];
    for (int t = 0; t < THREADS; t++) rs[t] = (racer){f, n, 0};
    tu_run_threads(race_if_absent, rs, sizeof(racer), THREADS);
    uint64_t added = 0;
    for (int t = 0; t < THREADS; t++) added += rs[t].added;
    assert_int_equal(count_found(f, 0, n, 2), n);
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
