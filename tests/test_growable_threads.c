/*
 * test_growable_threads.c - concurrent adds into the growable filter as
 * bloomkit-server runs them (run under ThreadSanitizer by the TSan build).
 *
 * Writers add disjoint key ranges with bk_growable_add_nogrow under a
 * shared lock and, for the keys it refuses (a doubling, the stash), with
 * bk_growable_add under the exclusive one: the key locks of the server.
 * The filter starts at 100 keys, so it doubles many times while they race;
 * a reader looks up keys it knows were added and reads the statistics
 * (tests/race.h). At the end nothing is missing, the counts add up, and
 * the filter saves and loads (the loader checks every bucket and that W is
 * the sum of the entries' weights).
 *
 * The same in the single-writer mode, as bloomkit-server now runs adds:
 * every add (bk_growable_add_nogrow first) under the exclusive lock, only
 * lookups and statistics under the shared one: the plain stores race with
 * nothing.
 */
#include "race.h"

typedef struct shared {
    bk_growable *f;
    pthread_rwlock_t lock; /* the server's key lock */
    uint64_t refused;      /* keys add_nogrow sent to the exclusive path */
    int single_writer;     /* adds hold the lock alone, the filter knows it */
} shared;

static int add(void *ctx, const char *key, size_t len)
{
    shared *sh = ctx;
    if (sh->single_writer)
        pthread_rwlock_wrlock(&sh->lock);
    else
        pthread_rwlock_rdlock(&sh->lock);
    int r = bk_growable_add_nogrow(sh->f, key, len);
    pthread_rwlock_unlock(&sh->lock);
    if (r == BK_EFULL) {
        __atomic_fetch_add(&sh->refused, 1, __ATOMIC_RELAXED);
        pthread_rwlock_wrlock(&sh->lock);
        r = bk_growable_add(sh->f, key, len);
        pthread_rwlock_unlock(&sh->lock);
    }
    return r;
}

static int contains(void *ctx, const char *key, size_t len)
{
    shared *sh = ctx;
    pthread_rwlock_rdlock(&sh->lock);
    int r = bk_growable_contains(sh->f, key, len);
    pthread_rwlock_unlock(&sh->lock);
    return r;
}

/* What BF.INFO and BF.CARD read while adds run. */
static int check(void *ctx)
{
    shared *sh = ctx;
    bk_filter_info info;
    pthread_rwlock_rdlock(&sh->lock);
    int ok = bk_filter_get_info(bk_growable_as_filter(sh->f), &info) == BK_OK &&
             info.items <= bk_growable_capacity(sh->f) && info.fill <= 1.0 &&
             bk_growable_fpr_now(sh->f) <= 0.01 && bk_growable_bytes(sh->f) > 0;
    pthread_rwlock_unlock(&sh->lock);
    return ok;
}

static void run_adds(int single_writer)
{
    shared sh;
    memset(&sh, 0, sizeof(sh));
    assert_int_equal(pthread_rwlock_init(&sh.lock, NULL), 0);
    assert_int_equal(bk_growable_create(&sh.f, 100, 0.01, 9), BK_OK);
    sh.single_writer = single_writer;
    assert_int_equal(bk_growable_set_single_writer(sh.f, single_writer), BK_OK);
    tu_race r = {.ctx = &sh, .add = add, .contains = contains, .check = check,
                 .tag = 20, .writers = 3, .per_writer = 40000, .reader = 1};
    tu_race_run(&r);
    print_message("%u doublings, %llu items, %llu refused by add_nogrow, %llu misses\n",
                  bk_growable_doublings(sh.f), (unsigned long long)bk_growable_items(sh.f),
                  (unsigned long long)sh.refused, (unsigned long long)r.misses);
    assert_true(r.misses == 0);
    assert_true(bk_growable_items(sh.f) == r.added);
    /* keys differ, so only 15-bit tags meeting in a bucket answer 0 */
    assert_true(r.added > 3 * r.per_writer * 99 / 100);
    assert_true(bk_growable_doublings(sh.f) >= 9);
    assert_true(sh.refused >= bk_growable_doublings(sh.f));

    /* a consistent table: the loader checks every bucket and W */
    size_t len;
    unsigned char *img = tu_serialize(bk_growable_as_filter(sh.f), &len);
    bk_filter *back = NULL;
    assert_int_equal(bk_filter_deserialize(&back, img, len), BK_OK);
    bk_filter_free(back);
    free(img);
    assert_int_equal(bk_growable_single_writer(sh.f), single_writer);
    bk_growable_free(sh.f);
    pthread_rwlock_destroy(&sh.lock);
}

static void test_concurrent_adds(void **state)
{
    (void)state;
    run_adds(0);
}

static void test_single_writer_adds(void **state)
{
    (void)state;
    run_adds(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_adds),
        cmocka_unit_test(test_single_writer_adds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
