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

#endif /* BK_RACE_H */
