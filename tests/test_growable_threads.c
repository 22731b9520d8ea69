/*
 * test_growable_threads.c - concurrent adds into the growable filter as
 * bloomkit-server runs them (run under ThreadSanitizer by the TSan build).
 *
 * Writers add disjoint key ranges with bk_growable_add_nogrow under a
 * shared lock and, for the keys it refuses (a doubling, the stash), with
 * bk_growable_add under the exclusive one: the key locks of the server.
 * The filter starts at 100 keys, so it doubles many times while they race.
 * Each writer checks its key right after adding it and publishes its
 * progress; a reader checks keys it knows were added (it must find them)
 * and reads the statistics meanwhile. At the end nothing is missing, the
 * counts add up, and the filter saves and loads (the loader checks every
 * bucket and that W is the sum of the entries' weights).
 */
#include <pthread.h>

#include "testutil.h"

#define WRITERS 3
#define PER_WRITER 40000u

typedef struct shared {
    bk_growable *f;
    pthread_rwlock_t lock;      /* the server's key lock */
    uint64_t progress[WRITERS]; /* keys [0, progress) of writer w are in */
    uint64_t added[WRITERS];
    uint64_t refused[WRITERS];  /* keys add_nogrow sent to the exclusive path */
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
    shared *sh = a->sh;
    char key[TU_KEY_LEN];
    uint64_t added = 0, refused = 0, misses = 0;
    for (uint64_t i = 0; i < PER_WRITER; i++) {
        tu_key(key, i, 20 + a->id);
        pthread_rwlock_rdlock(&sh->lock);
        int r = bk_growable_add_nogrow(sh->f, key, sizeof(key));
        pthread_rwlock_unlock(&sh->lock);
        if (r == BK_EFULL) {
            refused++;
            pthread_rwlock_wrlock(&sh->lock);
            r = bk_growable_add(sh->f, key, sizeof(key));
            pthread_rwlock_unlock(&sh->lock);
        }
        if (r < 0) {
            misses++;
            continue;
        }
        added += (uint64_t)r;
        pthread_rwlock_rdlock(&sh->lock);
        misses += !bk_growable_contains(sh->f, key, sizeof(key));
        pthread_rwlock_unlock(&sh->lock);
        __atomic_store_n(&sh->progress[a->id], i + 1, __ATOMIC_RELEASE);
    }
    sh->added[a->id] = added;
    sh->refused[a->id] = refused;
    __atomic_fetch_add(&sh->misses, misses, __ATOMIC_RELAXED);
    return NULL;
}

static void *reader(void *vp)
{
    shared *sh = vp;
    char key[TU_KEY_LEN];
    uint64_t state = 77, misses = 0, checks = 0;
    while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
        uint64_t w = tu_next(&state) % WRITERS;
        uint64_t done = __atomic_load_n(&sh->progress[w], __ATOMIC_ACQUIRE);
        if (done == 0) continue;
        tu_key(key, tu_next(&state) % done, 20 + w);
        pthread_rwlock_rdlock(&sh->lock);
        misses += !bk_growable_contains(sh->f, key, sizeof(key));
        if ((++checks & 255) == 0) { /* what BF.INFO and BF.CARD read */
            bk_filter_info info;
            if (bk_filter_get_info(bk_growable_as_filter(sh->f), &info) != BK_OK ||
                info.items > bk_growable_capacity(sh->f) || info.fill > 1.0 ||
                bk_growable_fpr_now(sh->f) > 0.01 || bk_growable_bytes(sh->f) == 0)
                misses++;
        }
        pthread_rwlock_unlock(&sh->lock);
    }
    __atomic_fetch_add(&sh->misses, misses, __ATOMIC_RELAXED);
    return NULL;
}

static void test_concurrent_adds(void **state)
{
    (void)state;
    shared sh;
    memset(&sh, 0, sizeof(sh));
    assert_int_equal(pthread_rwlock_init(&sh.lock, NULL), 0);
    assert_int_equal(bk_growable_create(&sh.f, 100, 0.01, 9), BK_OK);
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

    uint64_t added = 0, refused = 0, missing = 0;
    for (int w = 0; w < WRITERS; w++) added += sh.added[w], refused += sh.refused[w];
    char key[TU_KEY_LEN];
    for (uint64_t w = 0; w < WRITERS; w++)
        for (uint64_t i = 0; i < PER_WRITER; i++) {
            tu_key(key, i, 20 + w);
            missing += !bk_growable_contains(sh.f, key, sizeof(key));
        }
    print_message("%u doublings, %llu items, %llu refused by add_nogrow, %llu misses during, "
                  "%llu missing after\n",
                  bk_growable_doublings(sh.f), (unsigned long long)bk_growable_items(sh.f),
                  (unsigned long long)refused, (unsigned long long)sh.misses,
                  (unsigned long long)missing);
    assert_true(sh.misses == 0);
    assert_true(missing == 0);
    assert_true(bk_growable_items(sh.f) == added);
    /* keys differ, so only 15-bit tags meeting in a bucket answer 0 */
    assert_true(added > (uint64_t)WRITERS * PER_WRITER * 99 / 100);
    assert_true(bk_growable_doublings(sh.f) >= 9);
    assert_true(refused >= bk_growable_doublings(sh.f));

    /* a consistent table: the loader checks every bucket and W */
    size_t len;
    unsigned char *img = tu_serialize(bk_growable_as_filter(sh.f), &len);
    bk_filter *back = NULL;
    assert_int_equal(bk_filter_deserialize(&back, img, len), BK_OK);
    bk_filter_free(back);
    free(img);
    bk_growable_free(sh.f);
    pthread_rwlock_destroy(&sh.lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_adds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
