/*
 * rwlock.h - the per-key readers-writer lock of the keyspace: 4 bytes
 * (pthread_rwlock_t takes 56), readers share, writers are exclusive, and
 * neither starves (rwlock.c).
 */
#ifndef BKS_RWLOCK_H
#define BKS_RWLOCK_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct bks_rwlock {
    _Atomic uint32_t state; /* rwlock.c; 0: free */
} bks_rwlock;

/* A free lock: zeroed memory is one too (calloc). */
static inline void bks_rwlock_init(bks_rwlock *l) { atomic_init(&l->state, 0); }

/* Take it shared / exclusive, sleeping while it cannot be had. Not
 * recursive: a thread holding it must not take it again. */
void bks_rwlock_rdlock(bks_rwlock *l);
void bks_rwlock_wrlock(bks_rwlock *l);

/* Release it, whichever way the caller holds it. */
void bks_rwlock_unlock(bks_rwlock *l);

#endif /* BKS_RWLOCK_H */
