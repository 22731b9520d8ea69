/*
 * rwlock.c - the keyspace's per-key readers-writer lock, in one 32-bit word.
 *
 * Why not pthread_rwlock_t: it takes 56 bytes, which a server holding
 * millions of small keys pays for each of them (issue 29), and glibc's
 * default prefers readers, so a key read without pause can keep a writer
 * out for ever.
 *
 * The word (also the futex every waiter sleeps on):
 *   bits  0..10  R   readers holding the lock
 *   bits 11..20  RQ  readers queued for the next readers' turn
 *   bits 21..29  WQ  writers queued
 *   bit  30      W   a writer holds the lock
 *   bit  31      G   flipped at each readers' turn
 *
 * Turns (phase-fair: neither side starves)
 *   - A reader comes in at once (R + 1) when no writer holds the lock and
 *     none is queued. Otherwise it queues (RQ + 1), notes G and sleeps
 *     until G flips: the writer that releases the lock next lets every
 *     queued reader in at once (R = RQ, RQ = 0, G flipped), ahead of the
 *     queued writers. So readers that come after a queued writer never
 *     overtake it, and a queued reader waits for one writer at most.
 *   - A writer comes in when nothing holds the lock. Otherwise it queues
 *     (WQ + 1, once) and sleeps; the last reader out and every writer's
 *     release wake it to try again.
 *   RQ > 0 only while a writer holds the lock or is queued (readers queue
 *   for no other reason, and a writer's release empties RQ), so queued
 *   readers are always let in by someone. G cannot flip twice under a
 *   queued reader: the next flip needs a writer to come in, which needs
 *   R = 0, which needs the readers let in (it among them) to have left.
 *
 * Waking: a release makes a system call (FUTEX_WAKE of every sleeper of
 * the word) only when someone is queued, so an uncontended lock never
 * enters the kernel. A sleeper woken for nothing checks again and sleeps
 * on; one that goes to sleep on a word that changed returns at once.
 *
 * Limits: the counters are bounded by the threads that can wait on one
 * key at once (the workers and a few others, far fewer than 2047 / 1023 /
 * 511); should one be full, the thread yields and retries instead of
 * overflowing it.
 *
 * Memory order: coming in is an acquire (the CAS that enters, or a queued
 * reader's load that sees G flip), leaving a release (the read-modify-
 * write that leaves or hands over). Every change of the word is a
 * read-modify-write, so an acquire that reads a later value still
 * synchronises with the release before it.
 */
#include <limits.h>      /* INT_MAX */
#include <linux/futex.h> /* FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE */
#include <sched.h>       /* sched_yield */
#include <stddef.h>      /* NULL */
#include <sys/syscall.h> /* SYS_futex */
#include <unistd.h>      /* syscall */

#include "rwlock.h"

#define R_MASK 0x7FFu
#define RQ_SHIFT 11
#define RQ_MASK 0x3FFu
#define RQ_ONE (1u << RQ_SHIFT)
#define WQ_SHIFT 21
#define WQ_MASK 0x1FFu
#define WQ_ONE (1u << WQ_SHIFT)
#define W (1u << 30)
#define G (1u << 31)

static inline uint32_t readers(uint32_t s) { return s & R_MASK; }
static inline uint32_t queued_readers(uint32_t s) { return (s >> RQ_SHIFT) & RQ_MASK; }
static inline uint32_t queued_writers(uint32_t s) { return (s >> WQ_SHIFT) & WQ_MASK; }

/* Sleep while *word == seen (returns at once if it is not). EINTR and
 * spurious wakes are fine: every caller checks again. */
static void futex_wait(_Atomic uint32_t *word, uint32_t seen)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline uint32_t load(bks_rwlock *l, memory_order mo)
{
    return atomic_load_explicit(&l->state, mo);
}

static inline int cas(bks_rwlock *l, uint32_t *seen, uint32_t next, memory_order mo)
{
    return atomic_compare_exchange_weak_explicit(&l->state, seen, next, mo,
                                                 memory_order_relaxed);
}

void bks_rwlock_rdlock(bks_rwlock *l)
{
    uint32_t s = load(l, memory_order_relaxed);
    for (;;) {
        if (!(s & W) && queued_writers(s) == 0) {
            if (readers(s) == R_MASK) {
                sched_yield();
                s = load(l, memory_order_relaxed);
            } else if (cas(l, &s, s + 1, memory_order_acquire)) {
                return;
            }
        } else if (queued_readers(s) == RQ_MASK) {
            sched_yield();
            s = load(l, memory_order_relaxed);
        } else if (cas(l, &s, s + RQ_ONE, memory_order_relaxed)) {
            break;
        }
    }
    /* queued: the writer's release that flips G has counted us in R */
    uint32_t g = s & G;
    s += RQ_ONE;
    while ((s & G) == g) {
        futex_wait(&l->state, s);
        s = load(l, memory_order_acquire);
    }
}

void bks_rwlock_wrlock(bks_rwlock *l)
{
    int queued = 0;
    uint32_t s = load(l, memory_order_relaxed);
    for (;;) {
        if (!(s & W) && readers(s) == 0) {
            if (cas(l, &s, (s | W) - (queued ? WQ_ONE : 0), memory_order_acquire)) return;
            continue;
        }
        if (!queued) {
            if (queued_writers(s) == WQ_MASK) {
                sched_yield();
                s = load(l, memory_order_relaxed);
                continue;
            }
            if (!cas(l, &s, s + WQ_ONE, memory_order_relaxed)) continue;
            queued = 1;
            s += WQ_ONE;
        }
        futex_wait(&l->state, s);
        s = load(l, memory_order_relaxed);
    }
}

void bks_rwlock_unlock(bks_rwlock *l)
{
    /* W is set exactly when a writer holds it, and only that writer clears
     * it: the caller's own way of holding the lock */
    uint32_t s = load(l, memory_order_relaxed);
    if (!(s & W)) {
        uint32_t left = atomic_fetch_sub_explicit(&l->state, 1, memory_order_release) - 1;
        if (readers(left) == 0 && queued_writers(left) > 0) futex_wake_all(&l->state);
        return;
    }
    uint32_t next;
    do {
        uint32_t rq = queued_readers(s);
        next = s & ~W;
        if (rq > 0) /* the readers' turn: R = RQ (R is 0 under a writer) */
            next = ((next & ~(RQ_MASK << RQ_SHIFT)) + rq) ^ G;
    } while (!cas(l, &s, next, memory_order_release));
    if (queued_readers(s) > 0 || queued_writers(s) > 0) futex_wake_all(&l->state);
}
