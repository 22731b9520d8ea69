/*
 * test_bloom_threads.c - concurrent use of one classic filter without locks.
 * Labelled "threads": `make test` also runs it under ThreadSanitizer.
 */
#include <pthread.h>

#include "testutil.h"

#define THREADS 4
#define PER_THREAD 50000u

typedef struct {
    bk_bloom *f;
    uint64_t first;
    uint64_t count;
    uint64_t published; /* keys [first, first + published) are added */
} worker;

static void *adder(void *arg)
{
    worker *w = arg;
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < w->count; i++) {
        tu_key(key, w->first + i, 1);
        bk_bloom_add(w->f, key, sizeof(key));
        __atomic_store_n(&w->published, i + 1, __ATOMIC_RELEASE);
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
            if (!bk_bloom_contains(ws[t].f, key, sizeof(key))) return (void *)1;
        }
        round++;
        if (all_done) return NULL;
    }
}

static void test_concurrent_adds_lose_nothing(void **state)
{
    (void)state;
    const uint64_t n = (uint64_t)THREADS * PER_THREAD;
    bk_bloom *shared, *serial;
    assert_int_equal(bk_bloom_create(&shared, n, 0.01, 21), BK_OK);
    assert_int_equal(bk_bloom_create(&serial, n, 0.01, 21), BK_OK);

    pthread_t tid[THREADS], rtid;
    worker ws[THREADS];
    for (int t = 0; t < THREADS; t++) {
        ws[t] = (worker){shared, (uint64_t)t * PER_THREAD, PER_THREAD, 0};
    }
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&tid[t], NULL, adder, &ws[t]), 0);
    assert_int_equal(pthread_create(&rtid, NULL, reader, ws), 0);
    void *reader_result;
    for (int t = 0; t < THREADS; t++) pthread_join(tid[t], NULL);
    pthread_join(rtid, &reader_result);
    assert_null(reader_result);

    /* the same keys added by one thread give the very same bits */
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < n; i++) {
        tu_key(key, i, 1);
        bk_bloom_add(serial, key, sizeof(key));
    }
    assert_true(bk_bloom_equal(shared, serial));
    for (uint64_t i = 0; i < n; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_bloom_contains(shared, key, sizeof(key)), 1);
    }
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
    pthread_t tid[THREADS];
    batch_worker ws[THREADS];
    for (int t = 0; t < THREADS; t++) {
        ws[t] = (batch_worker){f, (uint64_t)t * PER_THREAD, t % 2};
        assert_int_equal(pthread_create(&tid[t], NULL, batch_adder, &ws[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(tid[t], NULL);
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < n; i++) {
        tu_key(key, i, 2);
        assert_int_equal(bk_bloom_contains(f, key, sizeof(key)), 1);
    }
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
