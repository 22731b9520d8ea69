/*
 * test_bloom_threads.c - concurrent use of one classic filter without locks.
 * Labelled "threads": `make test` also runs it under ThreadSanitizer.
 */
#include "race.h"

#define THREADS 4
#define PER_THREAD 50000u

typedef struct {
    tu_progress p; /* first */
    bk_bloom *f;
} worker;

static void *adder(void *arg)
{
    worker *w = arg;
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < w->p.count; i++) {
        tu_key(key, w->p.first + i, 1);
        bk_bloom_add(w->f, key, sizeof(key));
        tu_publish(&w->p, i + 1);
    }
    return NULL;
}

TU_ADD_RANGE(add_range, bk_bloom, bk_bloom_add)
TU_COUNT_FOUND(count_found, bk_bloom, bk_bloom_contains)

/* The reader's lookup (tu_progress_run): every key an adder has published
 * must be found. */
static int found(const void *f, const char *key, size_t len)
{
    return bk_bloom_contains(f, key, len);
}

static void test_concurrent_adds_lose_nothing(void **state)
{
    (void)state;
    const uint64_t n = (uint64_t)THREADS * PER_THREAD;
    bk_bloom *shared, *serial;
    assert_int_equal(bk_bloom_create(&shared, n, 0.01, 21), BK_OK);
    assert_int_equal(bk_bloom_create(&serial, n, 0.01, 21), BK_OK);

    worker ws[THREADS];
    for (int t = 0; t < THREADS; t++)
        ws[t] = (worker){{(uint64_t)t * PER_THREAD, PER_THREAD, 0}, shared};
    tu_reader r = {ws, sizeof(worker), THREADS, 1, found, shared};
    assert_null(tu_progress_run(adder, &r, 1));

    /* the same keys added by one thread give the very same bits */
    add_range(serial, 0, n, 1);
    assert_true(bk_bloom_equal(shared, serial));
    assert_int_equal(count_found(shared, 0, n, 1), n);
    /* items: each key counted at most once by the thread that added it */
    assert_true(bk_bloom_items(shared) <= n);
    assert_true(bk_bloom_items(shared) >= n - n / 50);
    bk_bloom_free(shared);
    bk_bloom_free(serial);
}

typedef struct {
    bk_bloom *f;
    uint64_t first;
    int use_batch;
} batch_worker;

static void *batch_adder(void *arg)
{
    batch_worker *w = arg;
    enum { B = 1000 };
    char storage[B][TU_KEY_LEN];
    const void *keys[B];
    size_t lens[B];
    for (uint64_t base = 0; base < PER_THREAD; base += B) {
        for (int j = 0; j < B; j++) {
            tu_key(storage[j], w->first + base + (uint64_t)j, 2);
            keys[j] = storage[j];
            lens[j] = TU_KEY_LEN;
        }
        if (w->use_batch)
            bk_bloom_add_batch(w->f, keys, lens, B, NULL);
        else
            for (int j = 0; j < B; j++) bk_bloom_add_if_absent(w->f, keys[j], lens[j]);
    }
    return NULL;
}

/* Batch adds and add-if-absent from several threads at once. */
static void test_concurrent_batch_and_if_absent(void **state)
{
    (void)state;
    const uint64_t n = (uint64_t)THREADS * PER_THREAD;
    bk_bloom *f;
    assert_int_equal(bk_bloom_create(&f, n, 0.001, 3), BK_OK);
    batch_worker ws[THREADS];
    for (int t = 0; t < THREADS; t++) ws[t] = (batch_worker){f, (uint64_t)t * PER_THREAD, t % 2};
    tu_run_threads(batch_adder, ws, sizeof(batch_worker), THREADS);
    assert_int_equal(count_found(f, 0, n, 2), n);
    bk_bloom_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_adds_lose_nothing),
        cmocka_unit_test(test_concurrent_batch_and_if_absent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
