/*
 * test_counting_threads.c - concurrent adds, removes and lookups on one
 * counting filter in the concurrent write mode (the default), without
 * locks. Labelled "threads": `make test` also runs it under
 * ThreadSanitizer.
 *
 * The checks are exact and independent of the interleaving: with 8-bit
 * counters and a lightly loaded filter no counter reaches its maximum, so
 * every counter ends at (adds - removes) of the keys that touch it. A lost
 * update (two read-modify-writes of one word racing) would leave some
 * counter off by one.
 */
#include <pthread.h>

#include "testutil.h"

#define THREADS 4
#define KEYS 20000u
#define BATCH 64u

typedef struct {
    bk_counting *f;
    int use_batch;
    int remove;
    uint64_t published; /* keys [0, published) were added by this thread */
} worker;

static void *adder(void *arg)
{
    worker *w = arg;
    char keys[BATCH][TU_KEY_LEN];
    const void *ptrs[BATCH];
    size_t lens[BATCH];
    for (uint64_t i = 0; i < KEYS; i += BATCH) {
        uint64_t n = KEYS - i < BATCH ? KEYS - i : BATCH;
        for (uint64_t j = 0; j < n; j++) {
            tu_key(keys[j], i + j, 1);
            ptrs[j] = keys[j];
            lens[j] = TU_KEY_LEN;
            if (w->remove) {
                if (bk_counting_remove(w->f, keys[j], TU_KEY_LEN) != BK_OK)
                    return (void *)1;
            } else if (!w->use_batch) {
                bk_counting_add(w->f, keys[j], TU_KEY_LEN);
            }
        }
        if (!w->remove && w->use_batch)
            bk_counting_add_batch(w->f, ptrs, lens, n, NULL);
        __atomic_store_n(&w->published, i + n, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* While the adders run, every key an adder has published must be found
 * and counted at least once. */
static void *reader(void *arg)
{
    worker *ws = arg;
    char key[TU_KEY_LEN];
    for (uint64_t round = 0;; round++) {
        int all_done = 1;
        for (int t = 0; t < THREADS; t++) {
            uint64_t done = __atomic_load_n(&ws[t].published, __ATOMIC_ACQUIRE);
            if (done < KEYS) all_done = 0;
            if (done == 0) continue;
            tu_key(key, (round * 7919) % done, 1);
            if (!bk_counting_contains(ws[t].f, key, sizeof(key)) ||
                bk_counting_count(ws[t].f, key, sizeof(key)) == 0)
                return (void *)1;
        }
        if (all_done) return NULL;
    }
}

static void run(worker *ws, int with_reader)
{
    pthread_t tid[THREADS], rtid;
    void *result;
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&tid[t], NULL, adder, &ws[t]), 0);
    if (with_reader) assert_int_equal(pthread_create(&rtid, NULL, reader, ws), 0);
    for (int t = 0; t < THREADS; t++) {
        pthread_join(tid[t], &result);
        assert_null(result);
    }
    if (with_reader) {
        pthread_join(rtid, &result);
        assert_null(result);
    }
}

/* The payload (the last blocks * 64 bytes of the serialization). */
static unsigned char *payload_of(const bk_counting *f, uint64_t *len)
{
    const bk_filter *g = bk_counting_as_filter((bk_counting *)f);
    uint64_t size = bk_filter_serialized_size(g);
    unsigned char *buf = malloc((size_t)size);
    assert_non_null(buf);
    assert_int_equal(bk_filter_serialize(g, buf, (size_t)size), BK_OK);
    *len = bk_counting_blocks(f) * BK_COUNTING_BLOCK_BYTES;
    memmove(buf, buf + (size - *len), (size_t)*len);
    return buf;
}

static void test_concurrent_adds_and_removes_exact(void **state)
{
    (void)state;
    bk_counting *shared, *serial;
    /* capacity 4x the keys: light load, no counter near 255 */
    assert_int_equal(bk_counting_create(&shared, 4 * KEYS, 0.01, 8, 3), BK_OK);
    assert_int_equal(bk_counting_create(&serial, 4 * KEYS, 0.01, 8, 3), BK_OK);
    assert_int_equal(bk_counting_single_writer(shared), 0);
    worker ws[THREADS];
    for (int t = 0; t < THREADS; t++) {
        ws[t].f = shared;
        ws[t].use_batch = t % 2;
        ws[t].remove = 0;
        ws[t].published = 0;
    }
    /* every thread adds the same keys: the same words race all the time */
    run(ws, 1);
    char key[TU_KEY_LEN];
    for (int t = 0; t < THREADS; t++)
        for (uint64_t i = 0; i < KEYS; i++) {
            tu_key(key, i, 1);
            bk_counting_add(serial, key, sizeof(key));
        }
    uint64_t len_a, len_b;
    unsigned char *a = payload_of(shared, &len_a), *b = payload_of(serial, &len_b);
    assert_true(len_a == len_b);
    assert_memory_equal(a, b, (size_t)len_a); /* no update lost */
    free(a);
    free(b);
    for (uint64_t i = 0; i < KEYS; i++) {
        tu_key(key, i, 1);
        assert_true(bk_counting_count(shared, key, sizeof(key)) >= THREADS);
    }

    /* every thread removes every key once: all counters return to zero */
    for (int t = 0; t < THREADS; t++) {
        ws[t].remove = 1;
        ws[t].published = 0;
    }
    run(ws, 0);
    a = payload_of(shared, &len_a);
    for (uint64_t i = 0; i < len_a; i++)
        if (a[i] != 0) fail_msg("byte %llu is %u after all removes",
                                (unsigned long long)i, a[i]);
    free(a);
    assert_true(bk_counting_items(shared) == 0);
    bk_counting_free(shared);
    bk_counting_free(serial);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_adds_and_removes_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
