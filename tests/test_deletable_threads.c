/*
 * test_deletable_threads.c - the concurrency promises of the filters that
 * delete (run under TSan by `make test`):
 *   - counting: adds, removes and lookups from several threads at once,
 *     lock-free; afterwards every counter equals the serial result;
 *   - deletable: concurrent adds and lookups;
 *   - cuckoo: concurrent readers of a filter no one writes.
 */
#include "race.h"

enum { THREADS = 4, PER_THREAD = 20000 };

/*==========================================================================
 * Counting: writers and readers together
 *==========================================================================*/

typedef struct counting_job {
    bk_counting *f;
    uint64_t tag;
    uint64_t lookups_found;
    uint64_t errors; /* checked by the main thread: cmocka asserts there */
} counting_job;

static void *counting_worker(void *arg)
{
    counting_job *job = arg;
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < PER_THREAD; i++) { /* add twice, remove once */
        tu_key(key, i, job->tag);
        bk_counting_add(job->f, key, sizeof(key));
        bk_counting_add(job->f, key, sizeof(key));
        job->errors += bk_counting_remove(job->f, key, sizeof(key)) != BK_OK;
        tu_key(key, i, job->tag % THREADS + 1); /* another thread's key */
        job->lookups_found += (uint64_t)bk_counting_contains(job->f, key,
                                                             sizeof(key));
    }
    return NULL;
}

static void test_counting_concurrent(void **state)
{
    (void)state;
    bk_counting *f, *serial;
    counting_job jobs[THREADS];
    char key[TU_KEY_LEN];
    /* Small on purpose: threads meet on the same words. 8-bit counters,
     * because a counter that saturates sticks, and whether it does depends
     * on the order of the operations: with no saturation, increments and
     * decrements commute and every counter must end as in a serial run
     * (checked below: nothing saturated in either). */
    assert_int_equal(bk_counting_create(&f, 5000, 0.01, 8, 3), BK_OK);
    assert_int_equal(bk_counting_create(&serial, 5000, 0.01, 8, 3), BK_OK);
    for (int t = 0; t < THREADS; t++) jobs[t] = (counting_job){f, (uint64_t)t + 1, 0, 0};
    tu_run_threads(counting_worker, jobs, sizeof(counting_job), THREADS);
    for (int t = 0; t < THREADS; t++) assert_int_equal(jobs[t].errors, 0);
    for (uint64_t t = 1; t <= THREADS; t++) {
        for (uint64_t i = 0; i < PER_THREAD; i++) {
            tu_key(key, i, t);
            bk_counting_add(serial, key, sizeof(key));
            bk_counting_add(serial, key, sizeof(key));
            bk_counting_remove(serial, key, sizeof(key));
        }
    }
    /* compare every key's minimum and the block statistics */
    for (uint64_t t = 1; t <= THREADS; t++) {
        for (uint64_t i = 0; i < PER_THREAD; i++) {
            tu_key(key, i, t);
            assert_int_equal(bk_counting_contains(f, key, sizeof(key)), 1);
            assert_int_equal(bk_counting_count(f, key, sizeof(key)),
                             bk_counting_count(serial, key, sizeof(key)));
        }
    }
    bk_counting_stats a, b;
    assert_int_equal(bk_counting_get_stats(f, &a), BK_OK);
    assert_int_equal(bk_counting_get_stats(serial, &b), BK_OK);
    assert_int_equal(a.counters_saturated, 0);
    assert_int_equal(b.counters_saturated, 0);
    assert_int_equal(a.counters_nonzero, b.counters_nonzero);
    bk_counting_free(f);
    bk_counting_free(serial);
}

/*==========================================================================
 * Deletable: concurrent adds and lookups
 *==========================================================================*/

typedef struct dlbf_job {
    bk_deletable *f;
    uint64_t tag;
    uint64_t errors;
} dlbf_job;

static void *dlbf_worker(void *arg)
{
    dlbf_job *job = arg;
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < PER_THREAD; i++) {
        tu_key(key, i, job->tag);
        bk_deletable_add(job->f, key, sizeof(key));
        job->errors += bk_deletable_contains(job->f, key, sizeof(key)) != 1;
    }
    return NULL;
}

static void test_deletable_concurrent_adds(void **state)
{
    (void)state;
    bk_deletable *f;
    dlbf_job jobs[THREADS];
    char key[TU_KEY_LEN];
    assert_int_equal(bk_deletable_create(&f, THREADS * PER_THREAD, 0.01, 0, 4),
                     BK_OK);
    for (int t = 0; t < THREADS; t++) jobs[t] = (dlbf_job){f, (uint64_t)t + 1, 0};
    tu_run_threads(dlbf_worker, jobs, sizeof(dlbf_job), THREADS);
    for (int t = 0; t < THREADS; t++) assert_int_equal(jobs[t].errors, 0);
    /* every key present; removes (serial now) never report absent */
    for (uint64_t t = 1; t <= THREADS; t++) {
        for (uint64_t i = 0; i < PER_THREAD; i++) {
            tu_key(key, i, t);
            assert_int_equal(bk_deletable_contains(f, key, sizeof(key)), 1);
            assert_int_not_equal(bk_deletable_remove(f, key, sizeof(key)),
                                 BK_ENOTFOUND);
        }
    }
    bk_deletable_free(f);
}

/*==========================================================================
 * Cuckoo: readers never block each other
 *==========================================================================*/

typedef struct cuckoo_job {
    const bk_cuckoo *f;
    uint64_t found;
} cuckoo_job;

static void *cuckoo_reader(void *arg)
{
    cuckoo_job *job = arg;
    char key[TU_KEY_LEN];
    for (uint64_t t = 1; t <= THREADS; t++) {
        for (uint64_t i = 0; i < PER_THREAD; i++) {
            tu_key(key, i, t);
            job->found += (uint64_t)bk_cuckoo_contains(job->f, key, sizeof(key));
            job->found += bk_cuckoo_count(job->f, key, sizeof(key)) > 0;
        }
    }
    return NULL;
}

static void test_cuckoo_concurrent_readers(void **state)
{
    (void)state;
    bk_cuckoo *f;
    cuckoo_job jobs[THREADS];
    char key[TU_KEY_LEN];
    assert_int_equal(bk_cuckoo_create(&f, THREADS * PER_THREAD, 0.01, NULL, 5),
                     BK_OK);
    for (uint64_t t = 1; t <= THREADS; t++) {
        for (uint64_t i = 0; i < PER_THREAD; i++) {
            tu_key(key, i, t);
            assert_int_equal(bk_cuckoo_add(f, key, sizeof(key)), BK_OK);
        }
    }
    for (int t = 0; t < THREADS; t++) jobs[t] = (cuckoo_job){f, 0};
    tu_run_threads(cuckoo_reader, jobs, sizeof(cuckoo_job), THREADS);
    for (int t = 0; t < THREADS; t++) assert_int_equal(jobs[t].found, 2 * THREADS * PER_THREAD);
    bk_cuckoo_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counting_concurrent),
        cmocka_unit_test(test_deletable_concurrent_adds),
        cmocka_unit_test(test_cuckoo_concurrent_readers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
