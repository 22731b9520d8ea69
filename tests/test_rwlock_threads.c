/*
 * test_rwlock_threads.c - the keyspace's per-key lock (server/rwlock.c):
 * readers share it, a writer has it alone, and neither side starves the
 * other. Run under ThreadSanitizer by `make test` (a lock that did not
 * order its holders' accesses shows up as a data race on `guarded`).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "rwlock.h"
#include "testutil.h"

/* The word's fields (rwlock.c), read to wait until a thread has queued. */
#define QUEUED_READERS(s) (((s) >> 11) & 0x3FFu)
#define QUEUED_WRITERS(s) (((s) >> 21) & 0x1FFu)

static bks_rwlock lock;
static _Atomic int readers_in, writers_in, stop;
static _Atomic int violations; /* counted in the threads, checked by the test */
static uint64_t guarded; /* written by writers, read by readers: the lock orders them */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void wait_for(int (*cond)(void))
{
    double deadline = now_s() + 10;
    while (!cond()) {
        assert_true(now_s() < deadline);
        sched_yield();
    }
}

static void read_section(void)
{
    bks_rwlock_rdlock(&lock);
    atomic_fetch_add(&readers_in, 1);
    if (atomic_load(&writers_in) != 0) atomic_fetch_add(&violations, 1);
    volatile uint64_t seen = guarded;
    (void)seen;
    atomic_fetch_sub(&readers_in, 1);
    bks_rwlock_unlock(&lock);
}

static void write_section(void)
{
    bks_rwlock_wrlock(&lock);
    if (atomic_fetch_add(&writers_in, 1) != 0 || atomic_load(&readers_in) != 0)
        atomic_fetch_add(&violations, 1);
    guarded++;
    atomic_fetch_sub(&writers_in, 1);
    bks_rwlock_unlock(&lock);
}

static void reset(void)
{
    bks_rwlock_init(&lock);
    atomic_store(&readers_in, 0);
    atomic_store(&writers_in, 0);
    atomic_store(&stop, 0);
    atomic_store(&violations, 0);
    guarded = 0;
}

/* The lock is free and nobody is queued (G, bit 31, may be either). */
static void assert_free(void)
{
    assert_int_equal(atomic_load(&lock.state) & 0x7FFFFFFFu, 0);
    assert_int_equal(atomic_load(&violations), 0);
}

/*==========================================================================
 * Exclusion under a mix of readers and writers
 *==========================================================================*/

static void *mixed(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg;
    for (int i = 0; i < 20000; i++) {
        if (tu_next(&rng) % 4 == 0) write_section();
        else read_section();
    }
    return NULL;
}

static void test_exclusion(void **state)
{
    (void)state;
    enum { T = 6 };
    pthread_t t[T];
    reset();
    for (uintptr_t i = 0; i < T; i++)
        assert_int_equal(pthread_create(&t[i], NULL, mixed, (void *)(i + 1)), 0);
    for (int i = 0; i < T; i++) pthread_join(t[i], NULL);
    assert_free();
    assert_true(guarded > 0);
}

/*==========================================================================
 * Readers share it
 *==========================================================================*/

static _Atomic int inside;

static void *hold_read(void *arg)
{
    (void)arg;
    bks_rwlock_rdlock(&lock);
    atomic_fetch_add(&inside, 1);
    while (!atomic_load(&stop)) sched_yield();
    bks_rwlock_unlock(&lock);
    return NULL;
}

static int three_inside(void) { return atomic_load(&inside) == 3; }

static void test_readers_share(void **state)
{
    (void)state;
    pthread_t t[3];
    reset();
    atomic_store(&inside, 0);
    for (int i = 0; i < 3; i++) assert_int_equal(pthread_create(&t[i], NULL, hold_read, NULL), 0);
    wait_for(three_inside); /* all three hold it at once */
    atomic_store(&stop, 1);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    assert_free();
}

/*==========================================================================
 * Turns: a queued writer goes before later readers; readers queued under
 * a writer go, all of them, before the next writer
 *==========================================================================*/

static _Atomic int order_next;
static _Atomic int late_reader_at, writer_at;

/* A thread that takes the lock (to write, or to read) and records in *at
 * when its turn came. */
typedef struct turn {
    int write;
    _Atomic int *at;
} turn;

static void *take_turn(void *arg)
{
    const turn *t = arg;
    if (t->write) bks_rwlock_wrlock(&lock);
    else bks_rwlock_rdlock(&lock);
    atomic_store(t->at, atomic_fetch_add(&order_next, 1));
    bks_rwlock_unlock(&lock);
    return NULL;
}

static turn queued_writer = {1, &writer_at}, late_reader = {0, &late_reader_at};

static int one_writer_queued(void) { return QUEUED_WRITERS(atomic_load(&lock.state)) == 1; }
static int one_reader_queued(void) { return QUEUED_READERS(atomic_load(&lock.state)) == 1; }

static void test_queued_writer_first(void **state)
{
    (void)state;
    pthread_t w, r;
    reset();
    atomic_store(&order_next, 0);
    bks_rwlock_rdlock(&lock); /* a reader holds it */
    assert_int_equal(pthread_create(&w, NULL, take_turn, &queued_writer), 0);
    wait_for(one_writer_queued);
    /* a reader that comes now queues behind the writer (with a lock that
     * prefers readers, glibc's default, it would come in at once and a
     * stream of them would keep the writer out for ever) */
    assert_int_equal(pthread_create(&r, NULL, take_turn, &late_reader), 0);
    wait_for(one_reader_queued);
    bks_rwlock_unlock(&lock);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    assert_int_equal(atomic_load(&writer_at), 0);
    assert_int_equal(atomic_load(&late_reader_at), 1);
    assert_free();
}

static _Atomic int batch_entered, second_writer_saw;

static void *batch_reader(void *arg)
{
    (void)arg;
    bks_rwlock_rdlock(&lock);
    atomic_fetch_add(&batch_entered, 1);
    bks_rwlock_unlock(&lock);
    return NULL;
}

static void *second_writer(void *arg)
{
    (void)arg;
    bks_rwlock_wrlock(&lock);
    atomic_store(&second_writer_saw, atomic_load(&batch_entered));
    bks_rwlock_unlock(&lock);
    return NULL;
}

static int three_readers_queued(void) { return QUEUED_READERS(atomic_load(&lock.state)) == 3; }

static void test_queued_readers_before_next_writer(void **state)
{
    (void)state;
    pthread_t r[3], w;
    reset();
    atomic_store(&batch_entered, 0);
    atomic_store(&second_writer_saw, -1);
    bks_rwlock_wrlock(&lock); /* a writer holds it */
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&r[i], NULL, batch_reader, NULL), 0);
    wait_for(three_readers_queued);
    assert_int_equal(pthread_create(&w, NULL, second_writer, NULL), 0);
    wait_for(one_writer_queued);
    bks_rwlock_unlock(&lock); /* the readers' turn, all three, then the writer */
    for (int i = 0; i < 3; i++) pthread_join(r[i], NULL);
    pthread_join(w, NULL);
    assert_int_equal(atomic_load(&second_writer_saw), 3);
    assert_free();
}

/*==========================================================================
 * Neither side starves under a stream of the other
 *==========================================================================*/

static void *reader_stream(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) read_section();
    return NULL;
}

static void *writer_stream(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) write_section();
    return NULL;
}

static void starve_check(void *(*stream)(void *), void (*section)(void))
{
    enum { T = 4, TURNS = 200 };
    pthread_t t[T];
    reset();
    for (int i = 0; i < T; i++) assert_int_equal(pthread_create(&t[i], NULL, stream, NULL), 0);
    double start = now_s();
    for (int i = 0; i < TURNS; i++) section();
    double took = now_s() - start;
    atomic_store(&stop, 1);
    for (int i = 0; i < T; i++) pthread_join(t[i], NULL);
    assert_free();
    /* each turn waits for one turn of the other side at most: far under
     * a second for all of them, even under a sanitizer on a loaded machine */
    assert_true(took < 10.0);
}

static void test_writer_not_starved(void **state)
{
    (void)state;
    starve_check(reader_stream, write_section);
}

static void test_reader_not_starved(void **state)
{
    (void)state;
    starve_check(writer_stream, read_section);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exclusion),
        cmocka_unit_test(test_readers_share),
        cmocka_unit_test(test_queued_writer_first),
        cmocka_unit_test(test_queued_readers_before_next_writer),
        cmocka_unit_test(test_writer_not_starved),
        cmocka_unit_test(test_reader_not_starved),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
