/*
 * race.h - writers and a reader racing on one filter, for the *_threads
 * tests (run under ThreadSanitizer by the TSan build).
 *
 * Writer w adds keys tu_key(i, tag + w), i < per_writer, through add();
 * it checks each key right after adding it and then publishes its
 * progress, so that the reader, which looks up keys it knows were added,
 * must find them. The reader also calls check() every 256 lookups (the
 * statistics a front end reads meanwhile). Every key not found, every
 * add error and every failed check counts in misses.
 */
#ifndef BK_RACE_H
#define BK_RACE_H

#include <pthread.h>

#include "testutil.h"

#define TU_RACE_MAX_WRITERS 8

typedef struct tu_race {
    /* set by the caller */
    void *ctx;
    int (*add)(void *ctx, const char *key, size_t len);      /* 1, 0 or < 0 */
    int (*contains)(void *ctx, const char *key, size_t len); /* 1 or 0 */
    int (*check)(void *ctx);                                 /* 1: fine; may be NULL */
    uint64_t tag;        /* writer w's keys: tu_key(i, tag + w) */
    int writers;         /* at most TU_RACE_MAX_WRITERS */
    uint64_t per_writer;
    int reader;          /* 1: run the reader thread */
    /* results */
    uint64_t added;      /* adds that answered 1 */
    uint64_t misses;
    /* internal */
    uint64_t progress[TU_RACE_MAX_WRITERS];
    uint64_t added_by[TU_RACE_MAX_WRITERS];
    int stop;
} tu_race;

typedef struct tu__race_writer {
    tu_race *r;
    uint64_t id;
} tu__race_writer;

static inline void *tu__race_write(void *vp)
{
    tu__race_writer *a = vp;
    tu_race *r = a->r;
    char key[TU_KEY_LEN];
    uint64_t added = 0, misses = 0;
    for (uint64_t i = 0; i < r->per_writer; i++) {
        tu_key(key, i, r->tag + a->id);
        int rc = r->add(r->ctx, key, sizeof(key));
        if (rc < 0) {
            misses++;
            continue;
        }
        added += (uint64_t)rc;
        misses += !r->contains(r->ctx, key, sizeof(key));
        __atomic_store_n(&r->progress[a->id], i + 1, __ATOMIC_RELEASE);
    }
    r->added_by[a->id] = added;
    __atomic_fetch_add(&r->misses, misses, __ATOMIC_RELAXED);
    return NULL;
}

static inline void *tu__race_read(void *vp)
{
    tu_race *r = vp;
    char key[TU_KEY_LEN];
    uint64_t state = 99, misses = 0, lookups = 0;
    while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        uint64_t w = tu_next(&state) % (uint64_t)r->writers;
        uint64_t done = __atomic_load_n(&r->progress[w], __ATOMIC_ACQUIRE);
        if (done == 0) continue;
        tu_key(key, tu_next(&state) % done, r->tag + w);
        misses += !r->contains(r->ctx, key, sizeof(key));
        if ((++lookups & 255) == 0 && r->check != NULL) misses += !r->check(r->ctx);
    }
    __atomic_fetch_add(&r->misses, misses, __ATOMIC_RELAXED);
    return NULL;
}

/* Run the writers (and the reader) to the end; then every key must be
 * found. Fills r->added and r->misses (those during the race plus the keys
 * missing after it). */
static inline void tu_race_run(tu_race *r)
{
    assert_true(r->writers >= 1 && r->writers <= TU_RACE_MAX_WRITERS);
    pthread_t wt[TU_RACE_MAX_WRITERS], rt;
    tu__race_writer args[TU_RACE_MAX_WRITERS];
    if (r->reader) assert_int_equal(pthread_create(&rt, NULL, tu__race_read, r), 0);
    for (int w = 0; w < r->writers; w++) {
        args[w].r = r;
        args[w].id = (uint64_t)w;
        assert_int_equal(pthread_create(&wt[w], NULL, tu__race_write, &args[w]), 0);
    }
    for (int w = 0; w < r->writers; w++) pthread_join(wt[w], NULL);
    __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
    if (r->reader) pthread_join(rt, NULL);
    r->added = 0;
    for (int w = 0; w < r->writers; w++) r->added += r->added_by[w];
    char key[TU_KEY_LEN];
    for (uint64_t w = 0; w < (uint64_t)r->writers; w++)
        for (uint64_t i = 0; i < r->per_writer; i++) {
            tu_key(key, i, r->tag + w);
            r->misses += !r->contains(r->ctx, key, sizeof(key));
        }
}

/*--------------------------------------------------------------------------
 * Threads over jobs, and adders that publish their progress to a reader
 *--------------------------------------------------------------------------*/

#define TU_MAX_THREADS 16

/* Run fn(job i) for n jobs (stride bytes apart from jobs) in n threads
 * and wait for them all; each must return NULL. */
static inline void tu_run_threads(void *(*fn)(void *), void *jobs, size_t stride, int n)
{
    pthread_t tid[TU_MAX_THREADS];
    assert_true(n >= 1 && n <= TU_MAX_THREADS);
    for (int t = 0; t < n; t++)
        assert_int_equal(pthread_create(&tid[t], NULL, fn, (char *)jobs + (size_t)t * stride), 0);
    for (int t = 0; t < n; t++) {
        void *result;
        pthread_join(tid[t], &result);
        assert_null(result);
    }
}

/* An adder's keys tu_key(first + i, tag), i < count, of which the first
 * `published` are added (stored with release order once they are). */
typedef struct tu_progress {
    uint64_t first;
    uint64_t count;
    uint64_t published;
} tu_progress;

static inline void tu_publish(tu_progress *p, uint64_t done)
{
    __atomic_store_n(&p->published, done, __ATOMIC_RELEASE);
}

/* An adder's work in batches of up to TU_BATCH keys: fn(job, keys, lens,
 * n) for each batch of p's keys (of `tag`), then the batch is published.
 * Returns NULL, or (void *)1 as soon as fn answers nonzero. */
#define TU_BATCH 64u
typedef int (*tu_batch_fn)(void *job, const void *const *keys, const size_t *lens, uint64_t n);

static inline void *tu_add_batches(tu_progress *p, uint64_t tag, tu_batch_fn fn, void *job)
{
    char store[TU_BATCH][TU_KEY_LEN];
    const void *keys[TU_BATCH];
    size_t lens[TU_BATCH];
    for (uint64_t i = 0; i < p->count; i += TU_BATCH) {
        uint64_t n = p->count - i < TU_BATCH ? p->count - i : TU_BATCH;
        for (uint64_t j = 0; j < n; j++) {
            tu_key(store[j], p->first + i + j, tag);
            keys[j] = store[j];
            lens[j] = TU_KEY_LEN;
        }
        if (fn(job, keys, lens, n) != 0) return (void *)1;
        tu_publish(p, i + n);
    }
    return NULL;
}

/* A job whose work is tu_add_batches of its keys (of tag 1) through fn,
 * with the job itself as fn's job; tu_batch_adder is its thread. A worker
 * of tu_progress_run that starts with a tu_adder is such a job. */
typedef struct tu_adder {
    tu_progress p; /* first, where tu_reader finds it */
    tu_batch_fn fn;
} tu_adder;

static inline void *tu_batch_adder(void *arg)
{
    tu_adder *a = arg;
    return tu_add_batches(&a->p, 1, a->fn, a);
}

/* n adders' jobs, stride bytes apart from workers, each starting with its
 * tu_progress; the reader looks up their published keys (of `tag`) with
 * found(ctx, key, len), which answers 1 when the filter has the key. */
typedef struct tu_reader {
    void *workers;
    size_t stride;
    int n;
    uint64_t tag;
    int (*found)(const void *ctx, const char *key, size_t len);
    const void *ctx;
} tu_reader;

static inline tu_progress *tu__progress_of(const tu_reader *r, int t)
{
    return (tu_progress *)((char *)r->workers + (size_t)t * r->stride);
}

/* Reads while the adders run: every key an adder has published must be
 * found (the add happened before the release store the reader acquired).
 * Returns NULL when all were, after every adder finished. */
static inline void *tu__progress_read(void *arg)
{
    const tu_reader *r = arg;
    char key[TU_KEY_LEN];
    for (uint64_t round = 0;; round++) {
        int all_done = 1;
        for (int t = 0; t < r->n; t++) {
            const tu_progress *p = tu__progress_of(r, t);
            uint64_t done = __atomic_load_n(&p->published, __ATOMIC_ACQUIRE);
            if (done < p->count) all_done = 0;
            if (done == 0) continue;
            tu_key(key, p->first + (round * 7919) % done, r->tag);
            if (!r->found(r->ctx, key, sizeof(key))) return (void *)1;
        }
        if (all_done) return NULL;
    }
}

/* Run adder over r's jobs in r->n threads, with the reader beside them when
 * with_reader; every adder must return NULL. Returns the reader's result
 * (NULL: it found every key it looked up; NULL too without a reader). */
static inline void *tu_progress_run(void *(*adder)(void *), tu_reader *r, int with_reader)
{
    pthread_t tid[TU_MAX_THREADS], rtid;
    void *result = NULL;
    assert_true(r->n >= 1 && r->n <= TU_MAX_THREADS);
    for (int t = 0; t < r->n; t++)
        assert_int_equal(pthread_create(&tid[t], NULL, adder, tu__progress_of(r, t)), 0);
    if (with_reader) assert_int_equal(pthread_create(&rtid, NULL, tu__progress_read, r), 0);
    for (int t = 0; t < r->n; t++) {
        pthread_join(tid[t], &result);
        assert_null(result);
    }
    if (with_reader) pthread_join(rtid, &result);
    return result;
}

#endif /* BK_RACE_H */
