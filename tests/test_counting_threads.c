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
#include "race.h"

#define THREADS 4
#define KEYS 20000u

typedef struct {
    tu_adder a; /* first: keys [0, published) were added by this thread, through apply */
    bk_counting *f;
    int use_batch;
    int remove;
} worker;

/* Each batch removed key by key (a failed remove stops the thread), or
 * added in one call or key by key (tu_add_batches). */
static int apply(void *job, const void *const *keys, const size_t *lens, uint64_t n)
{
    worker *w = job;
    if (w->remove) {
        for (uint64_t j = 0; j < n; j++)
            if (bk_counting_remove(w->f, keys[j], lens[j]) != BK_OK) return 1;
    } else if (w->use_batch) {
        bk_counting_add_batch(w->f, keys, lens, n, NULL);
    } else {
        for (uint64_t j = 0; j < n; j++) bk_counting_add(w->f, keys[j], lens[j]);
    }
    return 0;
}

/* While the adders run, every key an adder has published must be found
 * and counted at least once. */
static int found(const void *f, const char *key, size_t len)
{
    return bk_counting_contains(f, key, len) && bk_counting_count(f, key, len) != 0;
}

static void run(worker *ws, int with_reader)
{
    tu_reader r = {ws, sizeof(worker), THREADS, 1, found, ws[0].f};
    assert_null(tu_progress_run(tu_batch_adder, &r, with_reader));
}

/* The filter's payload: the last blocks * 64 bytes of its serialization. */
static unsigned char *payload_of(const bk_counting *f, uint64_t *len)
{
    return tu_image_tail(bk_counting_as_filter((bk_counting *)f),
                         bk_counting_blocks(f) * BK_COUNTING_BLOCK_BYTES, len);
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
    for (int t = 0; t < THREADS; t++) ws[t] = (worker){{{0, KEYS, 0}, apply}, shared, t % 2, 0};
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
        ws[t].a.p.published = 0;
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
