/*
 * test_scalable_threads.c - concurrent adds, lookups and growth of the
 * scalable filter (run under ThreadSanitizer by the TSan build).
 *
 * Writers add disjoint key ranges into a filter that starts at capacity
 * 100, so that it grows through many stages while they race; each writer
 * checks its own key right after adding it, and publishes its progress so
 * that a reader thread can check keys it knows were added before (a reader
 * that synchronises with an add must find the key). At the end nothing is
 * missing and the counts add up.
 */
#include <pthread.h>

#include "testutil.h"

#define WRITERS 3
#define PER_WRITER 40000u

typedef struct shared {
    bk_scalable *f;
    uint64_t progress[WRITERS]; /* keys [0, progress) of writer w are in */
    uint64_t added[WRITERS];
    uint64_t misses;            /* by writers and the reader */
    int stop;
} shared;

typedef struct writer_arg {
    shared *sh;
    uint64_t id;
} writer_arg;

static void *writer(void *vp)
{
    writer_arg *a = vp;
    char key[TU_KEY_LEN];
    uint64_t added = 0, misses = 0;
    for (uint64_t i = 0; i < PER_WRITER; i++) {
        tu_key(key, i, 10 + a->id);
        int r = bk_scalable_add(a->sh->f, key, sizeof(key));
        if (r < 0) { misses++; continue; }
        added += (uint64_t)r;
        misses += !bk_scalable_contains(a->sh->f, key, sizeof(key));
        __atomic_store_n(&a->sh->progress[a->id], i + 1, __ATOMIC_RELEASE);
    }
    a->sh->added[a->id] = added;
    __atomic_fetch_add(&a->sh->misses, misses, __ATOMIC_RELAXED);
    return NULL;
}

static void *reader(void *vp)
{
    shared *sh = vp;
    char key[TU_KEY_LEN];
    uint64_t state = 99, misses = 0, checks = 0;
    while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
        uint64_t w = tu_next(&state) % WRITERS;
        uint64_t done = __atomic_load_n(&sh->progress[w], __ATOMIC_ACQUIRE);
        if (done == 0) continue;
        tu_key(key, tu_next(&state) % done, 10 + w);
        misses += !bk_scalable_contains(sh->f, key, sizeof(key));
        checks++;
        if ((checks & 1023) == 0) {
            bk_scalable_stats st; /* statistics during growth */
            bk_scalable_get_stats(sh->f, &st);
            if (st.stages == 0 || st.stages > BK_SCALABLE_MAX_STAGES) misses++;
        }
    }
    __atomic_fetch_add(&sh->misses, misses, __ATOMIC_RELAXED);
    return NULL;
}

static void run(uint32_t expansion)
{
    shared sh;
    memset(&sh, 0, sizeof(sh));
    assert_int_equal(bk_scalable_create(&sh.f, 100, 0.01, expansion, 0, 5),
                     BK_OK);
    pthread_t wt[WRITERS], rt;
    writer_arg args[WRITERS];
    assert_int_equal(pthread_create(&rt, NULL, reader, &sh), 0);
    for (int w = 0; w < WRITERS; w++) {
        args[w].sh = &sh;
        args[w].id = (uint64_t)w;
        assert_int_equal(pthread_create(&wt[w], NULL, writer, &args[w]), 0);
    }
    for (int w = 0; w < WRITERS; w++) pthread_join(wt[w], NULL);
    __atomic_store_n(&sh.stop, 1, __ATOMIC_RELEASE);
    pthread_join(rt, NULL);

    uint64_t added = 0;
    for (int w = 0; w < WRITERS; w++) added += sh.added[w];
    bk_scalable_stats st;
    assert_int_equal(bk_scalable_get_stats(sh.f, &st), BK_OK);
    uint64_t stage_items = 0;
    for (uint32_t i = 0; i < st.stages; i++) {
        bk_scalable_stage_stats ss;
        assert_int_equal(bk_scalable_get_stage_stats(sh.f, i, &ss), BK_OK);
        stage_items += ss.items;
        /* racing adds may overfill a stage by one key per writer */
        assert_true(ss.items <= ss.capacity + WRITERS);
    }
    char key[TU_KEY_LEN];
    uint64_t missing = 0;
    for (uint64_t w = 0; w < WRITERS; w++)
        for (uint64_t i = 0; i < PER_WRITER; i++) {
            tu_key(key, i, 10 + w);
            missing += !bk_scalable_contains(sh.f, key, sizeof(key));
        }
    print_message("expansion %u: %u stages, %llu items, %llu misses during, "
                  "%llu missing after\n",
                  expansion, st.stages, (unsigned long long)st.items,
                  (unsigned long long)sh.misses, (unsigned long long)missing);
    assert_true(sh.misses == 0);
    assert_true(missing == 0);
    assert_true(st.items == added);
    assert_true(stage_items == added);
    assert_true(added > (uint64_t)WRITERS * PER_WRITER * 95 / 100);
    bk_scalable_free(sh.f);
}

static void test_concurrent_growth(void **state) { (void)state; run(2); }

/* Expansion 1: a new stage every 2000 keys (60 stages for the 120000
 * keys, under the cap of 64), so adds race to install stages all along. */
static void test_frequent_growth(void **state)
{
    (void)state;
    shared sh;
    memset(&sh, 0, sizeof(sh));
    assert_int_equal(bk_scalable_create(&sh.f, 2000, 0.01, 1, 0, 6), BK_OK);
    pthread_t wt[WRITERS];
    writer_arg args[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        args[w].sh = &sh;
        args[w].id = (uint64_t)w;
        assert_int_equal(pthread_create(&wt[w], NULL, writer, &args[w]), 0);
    }
    for (int w = 0; w < WRITERS; w++) pthread_join(wt[w], NULL);
    uint64_t added = 0;
    for (int w = 0; w < WRITERS; w++) added += sh.added[w];
    print_message("expansion 1: %u stages, %llu items, %llu misses\n",
                  bk_scalable_stages(sh.f),
                  (unsigned long long)bk_scalable_items(sh.f),
                  (unsigned long long)sh.misses);
    assert_true(sh.misses == 0);
    assert_true(bk_scalable_items(sh.f) == added);
    assert_true(bk_scalable_stages(sh.f) >= 55);
    bk_scalable_free(sh.f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_growth),
        cmocka_unit_test(test_frequent_growth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
