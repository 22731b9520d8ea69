/*
 * keyspace.c - the server's named values, their locks, memory and expiry.
 *
 * Layout
 * ------
 * 1024 stripes, each an independent chained hash table (power-of-two
 * buckets, doubled when it holds more entries than buckets, never shrunk)
 * behind its own mutex. A name's 64-bit hash picks the stripe (low bits)
 * and the bucket (the bits above). A stripe mutex is held only to find,
 * insert or unlink an entry: never while a command works on a value.
 *
 * Each entry carries a reader-writer lock (rwlock.c: 4 bytes, phase-fair),
 * a reference count and a "dead" flag. Opening a key (bkc_host_vt.open):
 *   1. stripe locked: find the entry, take a reference; stripe unlocked;
 *   2. READ takes the entry's read lock (lookups run side by side); ADD,
 *      WRITE and WHOLE take the write lock. Adds hold the key alone, so the
 *      filters of every stored value are in the library's single-writer
 *      mode (bkc_value_single_writer): plain stores, whose cache misses
 *      overlap, instead of an atomic OR per word, a full barrier each on
 *      x86. Pipelined adds to one key come as one batch under one lock
 *      (hostcmd.c), so two workers hand the key over once a batch;
 *   3. if the entry died while we waited (deleted, renamed, expired), let
 *      go and start again: it is no longer the key of that name.
 * A WRITE open of a missing name inserts a placeholder entry (no value)
 * already write-locked by its creator, so two creators of one name queue
 * on the same lock and the second finds the first's value. A placeholder
 * left without a value is unlinked when its creator closes it. Readers
 * treat it as missing.
 *
 * An entry is unlinked (dead = 1) only by someone holding its write lock
 * (or with the whole server paused); the value is freed at once, the entry
 * itself when the last reference goes.
 *
 * Memory: `used` is what the keys cost the allocator: for each key, its
 * entry (name included), its expiry block if any, and its value with
 * everything in it (bkc_value_bytes: the value, its side blocks, the
 * filter's blocks), each block counted as glibc's usable size plus its
 * chunk header (bks_block_bytes), which is what RSS grows by; plus the
 * stripes' bucket arrays. MEMORY USAGE answers a key's share (e->bytes),
 * used_memory the sum. set() refuses a value that would take it past
 * maxmemory (BK_ELIMIT), and memory_left() tells creation commands what
 * still fits.
 *
 * Small keys are most keys (one Bloom filter per user or tenant), so the
 * entry is kept small: 55 bytes and the name. What only some keys need
 * (an expiry, a mapped snapshot's guard, the snapshot file a big value
 * still equals) is a block of its own, made the
 * first time a key needs it and kept until the entry is freed, so that
 * lock-free readers of the expiry never see it freed.
 *
 * Expiry: extra->expire_at (absolute ms, 0 or no extra = none). Lazily on
 * open, and actively:
 * worker 0's timer samples stripes with keys that have an expiry (Redis's
 * approach). An expired key is deleted under its write lock and the
 * deletion logged as "DEL name", as Redis propagates expiry, so replaying
 * the log gives the same keyspace; while the log is replayed nothing
 * expires (the keyspace is "loading").
 *
 * Writes are logged (wrote() -> bks_persist_append) while the key's lock is
 * held, so the log orders the writes of one key as they happened; the
 * thread waits for its records to reach the file (bks_log_settle) once per
 * batch of requests, after the locks are let go and before it answers.
 */
#include <malloc.h> /* malloc_usable_size */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h> /* offsetof */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h> /* getrandom: the hash seed */

#include "ops.h"
#include "rwlock.h"
#include "server_int.h"

/*==========================================================================
 * Types
 *==========================================================================*/

#define NSTRIPES_LOG2 10
#define NSTRIPES (1u << NSTRIPES_LOG2)

/* What few keys need: made on first need, freed with the entry. */
typedef struct ks_extra {
    _Atomic uint64_t expire_at;     /* ms since the epoch, 0 = none */
    _Atomic(bks_guard *) guard;     /* mapped data not yet verified, or corrupt */
    _Atomic uint64_t origin;        /* the value's filter file in the installed
                                     * snapshot, unchanged since (0: none) */
} ks_extra;

typedef struct ks_entry {
    struct ks_entry *next;
    uint64_t hash;
    bkc_value *value;               /* under lock */
    _Atomic(ks_extra *) extra;      /* NULL: no expiry, no guard */
    _Atomic size_t bytes;           /* counted in ks->used; 0 without a value */
    bks_rwlock lock;
    _Atomic uint32_t refs;
    uint32_t nlen;                  /* names are at most proto-max-bulk-len */
    _Atomic uint8_t kind;           /* BKC_KIND_NONE while a placeholder */
    _Atomic uint8_t dead;
    _Atomic uint8_t wepoch;         /* ks->epoch when last opened to write */
    char name[];                    /* nlen bytes, not NUL-terminated */
} ks_entry;

typedef struct ks_stripe {
    pthread_mutex_t mu;
    ks_entry **buckets;
    size_t mask;          /* buckets - 1; buckets == NULL when empty */
    size_t count;         /* entries, placeholders included */
    size_t expires;       /* entries with an expiry */
} __attribute__((aligned(64))) ks_stripe;

struct bks_keyspace {
    ks_stripe stripes[NSTRIPES];
    uint64_t seed;
    uint64_t maxmemory;
    _Atomic uint64_t used;       /* keys and bucket arrays (see Memory above) */
    _Atomic uint64_t nkeys;      /* entries holding a value */
    _Atomic uint64_t nexpires;
    _Atomic int loading;
    _Atomic uint8_t epoch;       /* bumped at each snapshot's paused instant */
    unsigned expire_cursor;      /* active expiry: next stripe (worker 0 only) */
};

struct bkc_key {
    bks_keyspace *ks;
    bks_session *s;
    ks_entry *e;                 /* NULL: missing (READ / ADD) */
    bkc_open_mode mode;
};

/*==========================================================================
 * Memory
 *==========================================================================*/

size_t bks_block_bytes(const void *p)
{
    /* glibc: a chunk is its usable bytes and one size_t of header (the
     * next chunk's prev_size field is part of the usable bytes) */
    return p ? malloc_usable_size((void *)(uintptr_t)p) + sizeof(size_t) : 0;
}

static size_t server_block_bytes(void *opaque, const void *p)
{
    (void)opaque;
    return bks_block_bytes(p);
}


/* The entry's own blocks: itself (name included) and its extra. */
static size_t entry_cost(const ks_entry *e)
{
    return bks_block_bytes(e) + bks_block_bytes(atomic_load(&e->extra));
}

/* Count e's value (and e) in ks->used again: what they cost now, less what
 * was counted. Caller holds e's lock (write, or read for a value growing
 * by lock-free adds: bytes is exchanged atomically). */
static void entry_recount(bks_keyspace *ks, ks_entry *e)
{
    size_t nb = e->value ? entry_cost(e) + bkc_value_bytes(e->value) : 0;
    size_t ob = atomic_exchange(&e->bytes, nb);
    atomic_fetch_add(&ks->used, nb - ob);
}

static uint64_t entry_expire_at(const ks_entry *e)
{
    ks_extra *x = atomic_load_explicit(&e->extra, memory_order_acquire);
    return x ? atomic_load_explicit(&x->expire_at, memory_order_relaxed) : 0;
}

static bks_guard *entry_guard(const ks_entry *e)
{
    ks_extra *x = atomic_load_explicit(&e->extra, memory_order_acquire);
    return x ? atomic_load(&x->guard) : NULL;
}

/* e's extra, made if needed (NULL when out of memory). Caller holds e's
 * write lock, or e is not yet published. A new extra is counted in the
 * key's bytes when the key holds a value. */
static ks_extra *entry_extra(bks_keyspace *ks, ks_entry *e)
{
    ks_extra *x = atomic_load(&e->extra);
    if (x != NULL)
        return x;
    x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    atomic_store_explicit(&e->extra, x, memory_order_release);
    if (e->value) {
        size_t add = bks_block_bytes(x);
        atomic_fetch_add(&e->bytes, add);
        atomic_fetch_add(&ks->used, add);
    }
    return x;
}

/* Clear e's guard (it has none without an extra). */
static void entry_clear_guard(ks_entry *e)
{
    ks_extra *x = atomic_load(&e->extra);
    if (x)
        atomic_store(&x->guard, NULL);
}

static uint64_t entry_origin(const ks_entry *e)
{
    ks_extra *x = atomic_load_explicit(&e->extra, memory_order_acquire);
    return x ? atomic_load(&x->origin) : 0;
}

/* e is about to change (or to get a new value): its value no longer
 * equals its snapshot file, and the snapshot being written (if any) does
 * not hold what comes next (bks_keyspace_adopt). Caller holds e's lock. */
static void entry_touch(bks_keyspace *ks, ks_entry *e)
{
    uint8_t now = atomic_load_explicit(&ks->epoch, memory_order_relaxed);
    if (atomic_load_explicit(&e->wepoch, memory_order_relaxed) != now)   /* mostly equal */
        atomic_store_explicit(&e->wepoch, now, memory_order_relaxed);
    ks_extra *x = atomic_load_explicit(&e->extra, memory_order_acquire);
    if (x && atomic_load_explicit(&x->origin, memory_order_relaxed))
        atomic_store(&x->origin, 0);
}

/*==========================================================================
 * Hashing and the tables
 *==========================================================================*/

static uint64_t ks_hash(uint64_t seed, const char *p, size_t n)
{
    const uint64_t m = 0x9FB21C651E98DF25ULL;
    uint64_t h = seed ^ (n * 0xFF51AFD7ED558CCDULL);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * m;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ w ^ 0x5555) * m;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ULL;
    h ^= h >> 32;
    return h;
}

static inline ks_stripe *stripe_of(bks_keyspace *ks, uint64_t h)
{
    return &ks->stripes[h & (NSTRIPES - 1)];
}

static inline size_t bucket_of(const ks_stripe *st, uint64_t h)
{
    return (size_t)(h >> NSTRIPES_LOG2) & st->mask;
}

static ks_entry *stripe_find(ks_stripe *st, uint64_t h, bkc_str name)
{
    if (!st->buckets)
        return NULL;
    for (ks_entry *e = st->buckets[bucket_of(st, h)]; e; e = e->next)
        if (e->hash == h && e->nlen == name.len && !memcmp(e->name, name.ptr, name.len))
            return e;
    return NULL;
}

/* Double st's buckets (counted in ks->used). Stripe locked. */
static int stripe_grow(bks_keyspace *ks, ks_stripe *st)
{
    size_t n = st->buckets ? (st->mask + 1) * 2 : 4;
    ks_entry **b = calloc(n, sizeof *b);
    if (!b)
        return -1;
    atomic_fetch_add(&ks->used, bks_block_bytes(b) - bks_block_bytes(st->buckets));
    if (st->buckets) {
        for (size_t i = 0; i <= st->mask; i++) {
            ks_entry *e = st->buckets[i];
            while (e) {
                ks_entry *next = e->next;
                size_t j = (size_t)(e->hash >> NSTRIPES_LOG2) & (n - 1);
                e->next = b[j];
                b[j] = e;
                e = next;
            }
        }
        free(st->buckets);
    }
    st->buckets = b;
    st->mask = n - 1;
    return 0;
}

/* Insert e (not present). Stripe locked. */
static int stripe_insert(bks_keyspace *ks, ks_stripe *st, ks_entry *e)
{
    if ((!st->buckets || st->count > st->mask) && stripe_grow(ks, st) < 0 && !st->buckets)
        return -1;
    size_t i = bucket_of(st, e->hash);
    e->next = st->buckets[i];
    st->buckets[i] = e;
    st->count++;
    return 0;
}

static void stripe_remove(ks_stripe *st, ks_entry *e)
{
    ks_entry **pp = &st->buckets[bucket_of(st, e->hash)];
    while (*pp && *pp != e)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = e->next;
        st->count--;
    }
}

static ks_entry *entry_new(uint64_t h, bkc_str name)
{
    if (name.len > UINT32_MAX)
        return NULL;
    ks_entry *e = calloc(1, offsetof(ks_entry, name) + name.len);
    if (!e)
        return NULL;
    bks_rwlock_init(&e->lock);
    atomic_store(&e->refs, 1);   /* the table's, once linked */
    e->hash = h;
    e->nlen = (uint32_t)name.len;
    memcpy(e->name, name.ptr, name.len);
    return e;
}

/* Keys a client can see: a *.LOADCHUNK in progress is hidden from
 * EXISTS, TYPE, KEYS, SCAN and DBSIZE. */
static inline int kind_visible(int kind)
{
    return kind != BKC_KIND_NONE && kind != BKC_KIND_LOADING;
}

static void entry_destroy(ks_entry *e)
{
    free(atomic_load(&e->extra));
    free(e);
}

/* References: the table holds one while the entry is linked, and every
 * open holds one. A lookup takes its reference under the stripe mutex
 * while the entry is linked, so a count that reached 0 never rises again:
 * whoever drops the last one frees the entry. */
static void entry_unref(ks_entry *e)
{
    if (atomic_fetch_sub(&e->refs, 1) == 1)
        entry_destroy(e);
}

/* Drop e's value (accounting). Caller holds e's write lock or the server
 * is paused. */
static void entry_drop_value(bks_keyspace *ks, ks_entry *e)
{
    int kind = atomic_load(&e->kind);
    if (kind != BKC_KIND_NONE) {
        if (kind_visible(kind))
            atomic_fetch_sub(&ks->nkeys, 1);
        atomic_fetch_sub(&ks->used, atomic_exchange(&e->bytes, 0));
        atomic_store(&e->kind, BKC_KIND_NONE);
    }
    bkc_value_free(e->value);
    e->value = NULL;
}

/* Unlink e from its stripe and free its value. Caller holds e's write lock
 * and a reference (the entry is freed by the last unref). */
static void entry_unlink(bks_keyspace *ks, ks_entry *e)
{
    ks_stripe *st = stripe_of(ks, e->hash);
    int unlinked = 0;
    pthread_mutex_lock(&st->mu);
    if (!atomic_load(&e->dead)) {
        stripe_remove(st, e);
        if (entry_expire_at(e)) {
            st->expires--;
            atomic_fetch_sub(&ks->nexpires, 1);
        }
        atomic_store(&e->dead, 1);
        unlinked = 1;
    }
    pthread_mutex_unlock(&st->mu);
    entry_drop_value(ks, e);
    if (unlinked)
        entry_unref(e);      /* the table's reference; the caller still has one */
}

/* Set e's expiry (0: none). Caller holds e's write lock. -1 when out of
 * memory (nothing changed). */
static int set_expire_locked(bks_keyspace *ks, ks_entry *e, uint64_t at)
{
    ks_extra *x = at ? entry_extra(ks, e) : atomic_load(&e->extra);
    if (!x)
        return at ? -1 : 0;
    ks_stripe *st = stripe_of(ks, e->hash);
    pthread_mutex_lock(&st->mu);
    uint64_t old = atomic_load(&x->expire_at);
    if (!old && at) {
        st->expires++;
        atomic_fetch_add(&ks->nexpires, 1);
    } else if (old && !at) {
        st->expires--;
        atomic_fetch_sub(&ks->nexpires, 1);
    }
    atomic_store(&x->expire_at, at);
    pthread_mutex_unlock(&st->mu);
    return 0;
}

/*==========================================================================
 * Logging writes
 *==========================================================================*/

_Thread_local int bks_tl_log_failed;
_Thread_local uint64_t bks_tl_log_ticket;
_Thread_local uint64_t bks_tl_cmd_ms;
static _Thread_local bks_persist *tl_log_persist;

static void log_failed(void)
{
    bks_tl_log_failed = 1;
    if (!atomic_exchange(&g_srv.write_error, 1))
        bks_log(BKS_LOG_ERROR, "cannot append to the log: refusing writes until it recovers");
}

/* The record joins the log's buffer now, under the key's lock; the thread
 * waits for it to reach the file in bks_log_settle, before it answers. */
static void log_argv(bks_session *s, int argc, const bkc_str *argv)
{
    /* WATCHes see every write; inside EXEC the write joins the
     * transaction's one record (multi.c) */
    if (bks_multi_wrote(argc, argv))
        return;
    if (!s || !s->persist)
        return;
    uint64_t ticket;
    if (bks_persist_append(s->persist, argc, argv, bks_tl_cmd_ms, &ticket) < 0) {
        log_failed();
        return;
    }
    if (ticket) {
        bks_tl_log_ticket = ticket;
        tl_log_persist = s->persist;
    }
}

int bks_log_wait_ticket(uint64_t ticket)
{
    if (!ticket || !tl_log_persist)
        return 0;
    if (bks_persist_wait(tl_log_persist, ticket) < 0) {
        log_failed();
        return -1;
    }
    return 0;
}

int bks_log_settle(void)
{
    uint64_t ticket = bks_tl_log_ticket;
    bks_tl_log_ticket = 0;
    return bks_log_wait_ticket(ticket);
}

static void log_del(bks_session *s, const char *name, size_t len)
{
    bkc_str argv[2] = {{"DEL", 3}, {name, len}};
    log_argv(s, 2, argv);
}

/*==========================================================================
 * Keyspace life
 *==========================================================================*/

int bks_keyspace_create(bks_keyspace **out, uint64_t maxmemory)
{
    bks_keyspace *ks = calloc(1, sizeof *ks);
    if (!ks)
        return BK_ENOMEM;
    /* values are counted as the blocks they are (process-wide: there is
     * one keyspace): the command layer allocates with malloc as the
     * library does; what its blocks cost is what bks_block_bytes says */
    bkc_allocator alloc = bkc_std_allocator;
    alloc.size_fn = server_block_bytes;
    bkc_set_allocator(&alloc);
    for (unsigned i = 0; i < NSTRIPES; i++)
        pthread_mutex_init(&ks->stripes[i].mu, NULL);
    if (getrandom(&ks->seed, sizeof ks->seed, 0) != sizeof ks->seed)
        ks->seed = (uint64_t)(uintptr_t)ks ^ bks_now_ms();
    ks->maxmemory = maxmemory;
    ks->loading = 1;
    *out = ks;
    return BK_OK;
}

void bks_keyspace_loaded(bks_keyspace *ks)
{
    atomic_store(&ks->loading, 0);
}

void bks_ks_flush(bks_keyspace *ks)
{
    for (unsigned i = 0; i < NSTRIPES; i++) {
        ks_stripe *st = &ks->stripes[i];
        pthread_mutex_lock(&st->mu);
        if (st->buckets) {
            for (size_t b = 0; b <= st->mask; b++) {
                ks_entry *e = st->buckets[b];
                while (e) {
                    ks_entry *next = e->next;
                    entry_drop_value(ks, e);
                    entry_destroy(e);
                    e = next;
                }
            }
            atomic_fetch_sub(&ks->used, bks_block_bytes(st->buckets));
            free(st->buckets);
        }
        st->buckets = NULL;
        st->mask = 0;
        st->count = 0;
        st->expires = 0;
        pthread_mutex_unlock(&st->mu);
    }
    atomic_store(&ks->nexpires, 0);
}

void bks_keyspace_free(bks_keyspace *ks)
{
    if (!ks)
        return;
    bks_ks_flush(ks);
    for (unsigned i = 0; i < NSTRIPES; i++)
        pthread_mutex_destroy(&ks->stripes[i].mu);
    free(ks);
}

int bks_keyspace_load(bks_keyspace *ks, bkc_str name, bkc_value *v, uint64_t expire_at_ms,
                      bks_guard *guard, uint64_t origin)
{
    if (!v)
        return BK_EINVAL;
    uint64_t h = ks_hash(ks->seed, name.ptr, name.len);
    ks_stripe *st = stripe_of(ks, h);
    pthread_mutex_lock(&st->mu);
    if (stripe_find(st, h, name)) {
        pthread_mutex_unlock(&st->mu);
        return BK_EINVAL;
    }
    ks_entry *e = entry_new(h, name);
    ks_extra *x = NULL;
    if (e && (expire_at_ms || guard || origin) && !(x = entry_extra(ks, e))) {
        entry_destroy(e);
        e = NULL;
    }
    if (!e || stripe_insert(ks, st, e) < 0) {
        pthread_mutex_unlock(&st->mu);
        if (e)
            entry_destroy(e);
        return BK_ENOMEM;
    }
    bkc_value_single_writer(v);   /* not yet seen by any other thread */
    e->value = v;
    if (x) {
        atomic_store(&x->guard, guard);
        atomic_store(&x->origin, origin);
    }
    atomic_store(&e->kind, (uint8_t)v->kind);
    entry_recount(ks, e);
    if (kind_visible((int)v->kind))
        atomic_fetch_add(&ks->nkeys, 1);
    if (expire_at_ms) {
        atomic_store(&x->expire_at, expire_at_ms);
        st->expires++;
        atomic_fetch_add(&ks->nexpires, 1);
    }
    pthread_mutex_unlock(&st->mu);
    return BK_OK;
}

int bks_keyspace_foreach(bks_keyspace *ks, bks_key_fn fn, void *arg)
{
    for (unsigned i = 0; i < NSTRIPES; i++) {
        ks_stripe *st = &ks->stripes[i];
        if (!st->buckets)
            continue;
        for (size_t b = 0; b <= st->mask; b++) {
            for (ks_entry *e = st->buckets[b]; e; e = e->next) {
                if (!e->value || atomic_load(&e->dead))
                    continue;
                bkc_str name = {e->name, e->nlen};
                int rc = fn(arg, name, e->value, entry_expire_at(e), entry_guard(e),
                            entry_origin(e));
                if (rc)
                    return rc;
            }
        }
    }
    return 0;
}

uint8_t bks_keyspace_next_epoch(bks_keyspace *ks)
{
    return (uint8_t)(atomic_fetch_add(&ks->epoch, 1) + 1);
}

int bks_keyspace_adopt(bks_keyspace *ks, bkc_str name, const bkc_value *v, uint8_t epoch,
                       uint64_t origin)
{
    uint64_t h = ks_hash(ks->seed, name.ptr, name.len);
    ks_stripe *st = stripe_of(ks, h);
    pthread_mutex_lock(&st->mu);
    ks_entry *e = stripe_find(st, h, name);
    if (e)
        atomic_fetch_add(&e->refs, 1);
    pthread_mutex_unlock(&st->mu);
    if (!e)
        return 0;
    int adopted = 0;
    bks_rwlock_wrlock(&e->lock);
    /* the same value, not opened to write since the snapshot's instant (an
     * entry made since, by a create or a RENAME, has that epoch too) */
    if (!atomic_load(&e->dead) && e->value == v && atomic_load(&e->wepoch) != epoch) {
        ks_extra *x = entry_extra(ks, e);
        if (x) {
            atomic_store(&x->origin, origin);
            adopted = 1;
        }
    }
    bks_rwlock_unlock(&e->lock);
    entry_unref(e);
    return adopted;
}

uint64_t bks_keyspace_size(bks_keyspace *ks) { return atomic_load(&ks->nkeys); }
void bks_keyspace_set_maxmemory(bks_keyspace *ks, uint64_t maxmemory) { ks->maxmemory = maxmemory; }
uint64_t bks_keyspace_memory(bks_keyspace *ks) { return atomic_load(&ks->used); }
uint64_t bks_ks_expires(bks_keyspace *ks) { return atomic_load(&ks->nexpires); }

/*==========================================================================
 * Opening keys
 *==========================================================================*/

static int is_expired(bks_keyspace *ks, ks_entry *e, uint64_t now)
{
    uint64_t at = entry_expire_at(e);
    return at && at <= now && !atomic_load_explicit(&ks->loading, memory_order_relaxed);
}

/* Delete e if it is (still) expired. Caller holds the write lock. */
static int expire_if_due(bks_keyspace *ks, bks_session *s, ks_entry *e, uint64_t now)
{
    if (atomic_load(&e->dead) || !is_expired(ks, e, now))
        return 0;
    int had_value = atomic_load(&e->kind) != BKC_KIND_NONE;
    entry_unlink(ks, e);
    if (had_value) {
        atomic_fetch_add(&g_srv.expired_keys, 1);
        log_del(s, e->name, e->nlen);
    }
    return 1;
}

/* Find name and lock it in mode. With create (WRITE only), a missing name
 * gets a write-locked placeholder. Returns the entry (locked, referenced)
 * or NULL for missing; *oom on allocation failure. */
static ks_entry *ks_acquire(bks_keyspace *ks, bks_session *s, bkc_str name,
                            bkc_open_mode mode, int create, int *oom)
{
    uint64_t h = ks_hash(ks->seed, name.ptr, name.len);
    ks_stripe *st = stripe_of(ks, h);
    *oom = 0;
    for (;;) {
        pthread_mutex_lock(&st->mu);
        ks_entry *e = stripe_find(st, h, name);
        if (!e) {
            pthread_mutex_unlock(&st->mu);
            if (!create)
                return NULL;
            /* The placeholder is write-locked before it is published, so
             * that entry locks are never taken under a stripe mutex (the
             * lock order is always entry, then stripe). */
            ks_entry *n = entry_new(h, name);
            if (!n) {
                *oom = 1;
                return NULL;
            }
            atomic_store(&n->refs, 2);   /* the table's and the creator's */
            bks_rwlock_wrlock(&n->lock);
            pthread_mutex_lock(&st->mu);
            if (stripe_find(st, h, name)) {          /* another creator won */
                pthread_mutex_unlock(&st->mu);
                bks_rwlock_unlock(&n->lock);
                entry_destroy(n);
                continue;
            }
            if (stripe_insert(ks, st, n) < 0) {
                pthread_mutex_unlock(&st->mu);
                bks_rwlock_unlock(&n->lock);
                entry_destroy(n);
                *oom = 1;
                return NULL;
            }
            pthread_mutex_unlock(&st->mu);
            return n;
        }
        atomic_fetch_add(&e->refs, 1);
        pthread_mutex_unlock(&st->mu);

        if (mode != BKC_OPEN_READ)   /* ADD: single-writer adds; WHOLE: no add at once */
            bks_rwlock_wrlock(&e->lock);
        else
            bks_rwlock_rdlock(&e->lock);
        if (atomic_load(&e->dead)) {
            bks_rwlock_unlock(&e->lock);
            entry_unref(e);
            continue;
        }
        /* the clock is read only for a key with an expiry */
        uint64_t now = entry_expire_at(e) ? bks_now_ms() : 0;
        if (now && is_expired(ks, e, now)) {
            if (mode == BKC_OPEN_READ) {
                bks_rwlock_unlock(&e->lock);
                bks_rwlock_wrlock(&e->lock);
            }
            expire_if_due(ks, s, e, now);
            bks_rwlock_unlock(&e->lock);
            entry_unref(e);
            continue;
        }
        if (mode != BKC_OPEN_WRITE && atomic_load(&e->kind) == BKC_KIND_NONE) {
            /* a placeholder whose creator stored nothing: missing */
            bks_rwlock_unlock(&e->lock);
            entry_unref(e);
            return NULL;
        }
        return e;
    }
}

static void ks_release(bks_keyspace *ks, ks_entry *e, bkc_open_mode mode)
{
    if (mode == BKC_OPEN_WRITE && !atomic_load(&e->dead) &&
        atomic_load(&e->kind) == BKC_KIND_NONE)
        entry_unlink(ks, e);          /* an unused placeholder */
    bks_rwlock_unlock(&e->lock);
    entry_unref(e);
}

/*==========================================================================
 * bkc_host_vt
 *==========================================================================*/

/* Why the last host_open of this thread returned NULL ("" : memory). */
static _Thread_local char open_error[640];

/* Key handles come from a per-thread pool (bkc_pool) before malloc. */
static _Thread_local bkc_pool key_pool;
_Static_assert(sizeof(bkc_key) <= BKC_POOL_BYTES, "a key handle fits a pool slot");

static bkc_key *key_alloc(void)
{
    bkc_key *k = bkc_pool_get(&key_pool);
    return k ? k : malloc(sizeof(bkc_key));
}

static void key_free(bkc_key *k)
{
    if (!bkc_pool_put(&key_pool, k))
        free(k);
}

static bkc_key *host_open(void *host, bkc_str name, bkc_open_mode mode)
{
    bks_session *s = host;
    open_error[0] = '\0';
    bkc_key *k = key_alloc();
    if (!k)
        return NULL;
    int oom;
    k->ks = s->ks;
    k->s = s;
    k->mode = mode;
    k->e = ks_acquire(s->ks, s, name, mode, mode == BKC_OPEN_WRITE, &oom);
    if (oom) {
        key_free(k);
        return NULL;
    }
    /* A value mapped from the snapshot is used only once its payload has
     * been verified (synchronously here if the verifier has not reached
     * it); a corrupt one is refused, naming its file. */
    bks_guard *g = k->e ? entry_guard(k->e) : NULL;
    if (g) {
        if (bks_guard_check(g, name, open_error, sizeof open_error) != 0) {
            ks_release(k->ks, k->e, mode);
            key_free(k);
            return NULL;
        }
        entry_clear_guard(k->e);   /* verified: never asked again */
    }
    if (k->e && (mode == BKC_OPEN_ADD || mode == BKC_OPEN_WRITE))
        entry_touch(s->ks, k->e);
    if ((mode == BKC_OPEN_READ || mode == BKC_OPEN_WHOLE) && s->client)
        bks_ops_lookup(k->e != NULL);    /* INFO keyspace_hits / keyspace_misses */
    return k;
}

static const char *host_open_error(void *host)
{
    (void)host;
    return open_error[0] ? open_error : NULL;
}

static bkc_kind host_kind(bkc_key *k)
{
    return k->e ? (bkc_kind)atomic_load(&k->e->kind) : BKC_KIND_NONE;
}

static bkc_value *host_value(bkc_key *k)
{
    return k->e ? k->e->value : NULL;
}

static int host_set(bkc_key *k, bkc_value *v)
{
    ks_entry *e = k->e;
    if (!e || k->mode != BKC_OPEN_WRITE) {
        bkc_value_free(v);
        return BK_EINVAL;
    }
    bks_keyspace *ks = k->ks;
    if (!v) {
        if (!atomic_load(&e->dead))
            entry_unlink(ks, e);
        return BK_OK;
    }
    if (v == e->value) {
        int was = kind_visible(atomic_load(&e->kind)), now = kind_visible((int)v->kind);
        if (!was && now)
            atomic_fetch_add(&ks->nkeys, 1);
        else if (was && !now)
            atomic_fetch_sub(&ks->nkeys, 1);
        atomic_store(&e->kind, (uint8_t)v->kind);
        entry_recount(ks, e);
        return BK_OK;
    }
    size_t nb = entry_cost(e) + bkc_value_bytes(v);
    size_t ob = atomic_load(&e->bytes);
    uint64_t cur = atomic_load(&ks->used);
    for (;;) {
        uint64_t next = cur - ob + nb;
        if (ks->maxmemory && nb > ob && next > ks->maxmemory) {
            bkc_value_free(v);
            return BK_ELIMIT;
        }
        if (atomic_compare_exchange_weak(&ks->used, &cur, next))
            break;
    }
    atomic_store(&e->bytes, nb);
    int was = kind_visible(atomic_load(&e->kind)), now = kind_visible((int)v->kind);
    if (!was && now)
        atomic_fetch_add(&ks->nkeys, 1);
    else if (was && !now)
        atomic_fetch_sub(&ks->nkeys, 1);
    bkc_value *old = e->value;
    bkc_value_single_writer(v);   /* under the write lock */
    e->value = v;
    entry_clear_guard(e);   /* a new value: nothing of the snapshot's */
    entry_touch(ks, e);
    atomic_store(&e->kind, (uint8_t)v->kind);
    bkc_value_free(old);
    return BK_OK;
}

static void host_resized(bkc_key *k)
{
    ks_entry *e = k->e;
    if (!e || !e->value)
        return;
    entry_recount(k->ks, e);
}

size_t bks_ks_key_bytes(bkc_key *k)
{
    return k && k->e ? atomic_load(&k->e->bytes) : 0;
}

static void host_close(bkc_key *k)
{
    if (!k)
        return;
    if (k->e)
        ks_release(k->ks, k->e, k->mode);
    key_free(k);
}

static void host_wrote(void *host, int argc, const bkc_str *argv)
{
    log_argv(host, argc, argv);
}

static size_t host_memory_left(void *host)
{
    bks_session *s = host;
    bks_keyspace *ks = s->ks;
    if (!ks->maxmemory)
        return SIZE_MAX;
    uint64_t used = atomic_load(&ks->used);
    if (used >= ks->maxmemory)
        return 0;
    uint64_t left = ks->maxmemory - used;
    return left > SIZE_MAX ? SIZE_MAX : (size_t)left;
}

const bkc_host_vt bks_host_vt = {
    .open = host_open,
    .kind = host_kind,
    .value = host_value,
    .set = host_set,
    .resized = host_resized,
    .close = host_close,
    .wrote = host_wrote,
    .memory_left = host_memory_left,
    .open_error = host_open_error,
};

/*==========================================================================
 * For the host commands
 *==========================================================================*/

int bks_ks_kind(bks_keyspace *ks, bks_session *s, bkc_str name)
{
    int oom;
    ks_entry *e = ks_acquire(ks, s, name, BKC_OPEN_READ, 0, &oom);
    if (!e)
        return -1;
    int kind = atomic_load(&e->kind);
    ks_release(ks, e, BKC_OPEN_READ);
    return kind_visible(kind) ? kind : -1;
}

int bks_ks_delete(bks_keyspace *ks, bks_session *s, bkc_str name)
{
    int oom;
    ks_entry *e = ks_acquire(ks, s, name, BKC_OPEN_WRITE, 0, &oom);
    if (!e)
        return 0;
    int had = atomic_load(&e->kind) != BKC_KIND_NONE;
    entry_unlink(ks, e);
    if (had)
        log_del(s, name.ptr, name.len);
    ks_release(ks, e, BKC_OPEN_WRITE);
    return had;
}

int64_t bks_ks_get_expire(bks_keyspace *ks, bks_session *s, bkc_str name)
{
    int oom;
    ks_entry *e = ks_acquire(ks, s, name, BKC_OPEN_READ, 0, &oom);
    if (!e)
        return -2;
    int64_t at = (int64_t)entry_expire_at(e);
    ks_release(ks, e, BKC_OPEN_READ);
    return at;
}

int bks_ks_set_expire(bks_keyspace *ks, bks_session *s, bkc_str name,
                      uint64_t at_ms, int flags)
{
    int oom;
    ks_entry *e = ks_acquire(ks, s, name, BKC_OPEN_WRITE, 0, &oom);
    if (!e)
        return 0;
    int done = 0;
    uint64_t cur = entry_expire_at(e);
    if (atomic_load(&e->kind) == BKC_KIND_NONE)
        goto out;
    if (at_ms == 0) {                       /* PERSIST */
        if (cur) {
            set_expire_locked(ks, e, 0);
            bkc_str argv[2] = {{"PERSIST", 7}, name};
            log_argv(s, 2, argv);
            done = 1;
        }
        goto out;
    }
    if ((flags & BKS_EXP_NX) && cur)
        goto out;
    if ((flags & BKS_EXP_XX) && !cur)
        goto out;
    if ((flags & BKS_EXP_GT) && (!cur || at_ms <= cur))
        goto out;
    if ((flags & BKS_EXP_LT) && cur && at_ms >= cur)
        goto out;
    if (at_ms <= bks_now_ms() && !atomic_load(&ks->loading)) {
        entry_unlink(ks, e);
        log_del(s, name.ptr, name.len);
        done = 1;
        goto out;
    }
    if (set_expire_locked(ks, e, at_ms) < 0) {
        done = -1;                          /* out of memory: unchanged */
        goto out;
    }
    char num[32];
    int n = snprintf(num, sizeof num, "%llu", (unsigned long long)at_ms);
    bkc_str argv[3] = {{"PEXPIREAT", 9}, name, {num, (size_t)n}};
    log_argv(s, 3, argv);
    done = 1;
out:
    ks_release(ks, e, BKC_OPEN_WRITE);
    return done;
}

int bks_ks_rename(bks_keyspace *ks, bks_session *s, bkc_str src, bkc_str dst, int nx)
{
    /* The server is paused: no command holds a key, no reference is out. */
    uint64_t now = bks_now_ms();
    uint64_t hs = ks_hash(ks->seed, src.ptr, src.len);
    ks_stripe *ss = stripe_of(ks, hs);
    pthread_mutex_lock(&ss->mu);
    ks_entry *e = stripe_find(ss, hs, src);
    pthread_mutex_unlock(&ss->mu);
    if (!e || atomic_load(&e->kind) == BKC_KIND_NONE)
        return -1;
    if (is_expired(ks, e, now)) {
        atomic_fetch_add(&e->refs, 1);
        bks_rwlock_wrlock(&e->lock);
        expire_if_due(ks, s, e, now);
        bks_rwlock_unlock(&e->lock);
        entry_unref(e);
        return -1;
    }
    if (src.len == dst.len && !memcmp(src.ptr, dst.ptr, src.len))
        return nx ? 0 : 1;

    uint64_t hd = ks_hash(ks->seed, dst.ptr, dst.len);
    ks_stripe *ds = stripe_of(ks, hd);
    pthread_mutex_lock(&ds->mu);
    ks_entry *d = stripe_find(ds, hd, dst);
    pthread_mutex_unlock(&ds->mu);
    if (d && is_expired(ks, d, now)) {
        atomic_fetch_add(&d->refs, 1);
        bks_rwlock_wrlock(&d->lock);
        expire_if_due(ks, s, d, now);
        bks_rwlock_unlock(&d->lock);
        entry_unref(d);
        d = NULL;
    }
    if (d && nx && atomic_load(&d->kind) != BKC_KIND_NONE)
        return 0;

    ks_entry *n = entry_new(hd, dst);
    uint64_t exp = entry_expire_at(e);
    bks_guard *guard = entry_guard(e);
    uint64_t origin = entry_origin(e);
    ks_extra *nx_extra = NULL;
    if (n && (exp || guard || origin) && !(nx_extra = entry_extra(ks, n))) {
        entry_destroy(n);
        n = NULL;
    }
    if (!n)
        return -2;
    if (d) {                                   /* overwrite dst */
        atomic_fetch_add(&d->refs, 1);
        bks_rwlock_wrlock(&d->lock);
        entry_unlink(ks, d);
        bks_rwlock_unlock(&d->lock);
        entry_unref(d);
    }
    /* move the value from e to n (n's entry may cost other bytes) */
    n->value = e->value;
    if (nx_extra) {   /* the guard and the file go with the value */
        atomic_store(&nx_extra->guard, guard);
        atomic_store(&nx_extra->origin, origin);
    }
    /* a new entry: the snapshot being written has the value under the old
     * name, so it is not adopted under this one (bks_keyspace_adopt) */
    atomic_store(&n->wepoch, atomic_load(&ks->epoch));
    entry_clear_guard(e);
    atomic_store(&n->kind, atomic_load(&e->kind));
    atomic_store(&n->bytes, atomic_load(&e->bytes));
    entry_recount(ks, n);
    e->value = NULL;
    atomic_store(&e->kind, BKC_KIND_NONE);
    atomic_store(&e->bytes, 0);
    atomic_fetch_add(&e->refs, 1);
    bks_rwlock_wrlock(&e->lock);
    entry_unlink(ks, e);                        /* value already moved */
    bks_rwlock_unlock(&e->lock);
    entry_unref(e);
    pthread_mutex_lock(&ds->mu);
    if (stripe_insert(ks, ds, n) < 0) {
        /* cannot happen after the unlink freed room; keep it simple */
        pthread_mutex_unlock(&ds->mu);
        bkc_value_free(n->value);
        atomic_fetch_sub(&ks->nkeys, 1);
        atomic_fetch_sub(&ks->used, atomic_load(&n->bytes));
        entry_destroy(n);
        return -2;
    }
    if (exp) {
        atomic_store(&nx_extra->expire_at, exp);
        ds->expires++;
        atomic_fetch_add(&ks->nexpires, 1);
    }
    pthread_mutex_unlock(&ds->mu);
    bkc_str argv[3] = {{nx ? "RENAMENX" : "RENAME", nx ? 8u : 6u}, src, dst};
    log_argv(s, 3, argv);
    return 1;
}

void bks_ks_each(bks_keyspace *ks, bks_name_fn fn, void *arg)
{
    uint64_t now = bks_now_ms();
    for (unsigned i = 0; i < NSTRIPES; i++) {
        ks_stripe *st = &ks->stripes[i];
        pthread_mutex_lock(&st->mu);
        int stop = 0;
        if (st->buckets) {
            for (size_t b = 0; b <= st->mask && !stop; b++) {
                for (ks_entry *e = st->buckets[b]; e && !stop; e = e->next) {
                    int kind = atomic_load(&e->kind);
                    if (!kind_visible(kind) || is_expired(ks, e, now))
                        continue;
                    stop = fn(arg, e->name, e->nlen, (bkc_kind)kind);
                }
            }
        }
        pthread_mutex_unlock(&st->mu);
        if (stop)
            return;
    }
}

static uint64_t rev64(uint64_t v)
{
    v = ((v >> 1) & 0x5555555555555555ULL) | ((v & 0x5555555555555555ULL) << 1);
    v = ((v >> 2) & 0x3333333333333333ULL) | ((v & 0x3333333333333333ULL) << 2);
    v = ((v >> 4) & 0x0F0F0F0F0F0F0F0FULL) | ((v & 0x0F0F0F0F0F0F0F0FULL) << 4);
    v = ((v >> 8) & 0x00FF00FF00FF00FFULL) | ((v & 0x00FF00FF00FF00FFULL) << 8);
    v = ((v >> 16) & 0x0000FFFF0000FFFFULL) | ((v & 0x0000FFFF0000FFFFULL) << 16);
    return (v >> 32) | (v << 32);
}

/* The cursor: low NSTRIPES_LOG2 bits the stripe, the rest the stripe's
 * bucket cursor in reverse-binary order (Redis's SCAN: tables that grew
 * between calls do not make it miss keys that were there throughout). */
uint64_t bks_ks_scan(bks_keyspace *ks, uint64_t cursor, uint64_t count,
                     bks_name_fn fn, void *arg)
{
    uint64_t now = bks_now_ms();
    unsigned si = (unsigned)(cursor & (NSTRIPES - 1));
    uint64_t v = cursor >> NSTRIPES_LOG2;
    uint64_t emitted = 0, visits = 0, max_visits = count * 10 + 16;
    if (count == 0)
        count = 10;
    while (si < NSTRIPES && emitted < count && visits < max_visits) {
        ks_stripe *st = &ks->stripes[si];
        pthread_mutex_lock(&st->mu);
        if (!st->buckets) {
            pthread_mutex_unlock(&st->mu);
            si++;
            v = 0;
            continue;
        }
        uint64_t mask = st->mask;
        for (ks_entry *e = st->buckets[v & mask]; e; e = e->next) {
            int kind = atomic_load(&e->kind);
            if (!kind_visible(kind) || is_expired(ks, e, now))
                continue;
            fn(arg, e->name, e->nlen, (bkc_kind)kind);
            emitted++;
        }
        pthread_mutex_unlock(&st->mu);
        visits++;
        v |= ~mask;
        v = rev64(v);
        v++;
        v = rev64(v);
        if (v == 0)
            si++;
    }
    if (si >= NSTRIPES)
        return 0;
    return (v << NSTRIPES_LOG2) | si;
}

uint64_t bks_ks_active_expire(bks_keyspace *ks, bks_session *s, uint64_t now_ms)
{
    if (atomic_load(&ks->loading) || atomic_load(&ks->nexpires) == 0)
        return 0;
    enum { BATCH = 20, STRIPES_PER_RUN = 64 };
    uint64_t deleted = 0;
    for (unsigned n = 0; n < STRIPES_PER_RUN; n++) {
        ks_stripe *st = &ks->stripes[ks->expire_cursor];
        ks->expire_cursor = (ks->expire_cursor + 1) & (NSTRIPES - 1);
        ks_entry *due[BATCH];
        size_t ndue = 0;
        pthread_mutex_lock(&st->mu);
        if (st->expires && st->buckets) {
            for (size_t b = 0; b <= st->mask && ndue < BATCH; b++) {
                for (ks_entry *e = st->buckets[b]; e && ndue < BATCH; e = e->next) {
                    uint64_t at = entry_expire_at(e);
                    if (at && at <= now_ms) {
                        atomic_fetch_add(&e->refs, 1);
                        due[ndue++] = e;
                    }
                }
            }
        }
        pthread_mutex_unlock(&st->mu);
        for (size_t i = 0; i < ndue; i++) {
            ks_entry *e = due[i];
            bks_rwlock_wrlock(&e->lock);
            deleted += (uint64_t)expire_if_due(ks, s, e, now_ms);
            bks_rwlock_unlock(&e->lock);
            entry_unref(e);
        }
    }
    return deleted;
}

/*==========================================================================
 * Glob matching (KEYS, SCAN MATCH, CONFIG GET): Redis's rules
 *==========================================================================*/

static int lower(int c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

/* Does the one-character token at p[i] ('?', '[...]', '\\x' or a literal)
 * match c? *adv gets the token's length. */
static int token_match(const char *p, size_t pl, size_t i, unsigned char c, int nocase,
                       size_t *adv)
{
    if (p[i] == '?') {
        *adv = 1;
        return 1;
    }
    if (p[i] == '[') {
        size_t j = i + 1;
        int neg = j < pl && p[j] == '^';
        if (neg)
            j++;
        int match = 0;
        while (j < pl && p[j] != ']') {
            if (p[j] == '\\' && j + 1 < pl) {
                j++;
                if ((unsigned char)p[j] == c)
                    match = 1;
            } else if (j + 2 < pl && p[j + 1] == '-' && p[j + 2] != ']') {
                int a = (unsigned char)p[j], b = (unsigned char)p[j + 2], x = c;
                if (a > b) { int t = a; a = b; b = t; }
                if (nocase) { a = lower(a); b = lower(b); x = lower(x); }
                if (x >= a && x <= b)
                    match = 1;
                j += 2;
            } else if (nocase ? lower((unsigned char)p[j]) == lower(c)
                              : (unsigned char)p[j] == c) {
                match = 1;
            }
            j++;
        }
        if (j < pl)
            j++;   /* ']' */
        *adv = j - i;
        return neg ? !match : match;
    }
    size_t k = i;
    if (p[k] == '\\' && k + 1 < pl)
        k++;
    *adv = k - i + 1;
    return nocase ? lower((unsigned char)p[k]) == lower(c) : (unsigned char)p[k] == c;
}

/* Iterative matching with backtracking to the last '*': O(len(p) * len(s))
 * at worst, whatever the pattern (no exponential blow-up on "*a*a*a*b"). */
static int glob_iter(const char *p, size_t pl, const char *s, size_t sl, int nocase)
{
    size_t pi = 0, si = 0, star_p = SIZE_MAX, star_s = 0;
    while (si < sl) {
        if (pi < pl && p[pi] == '*') {
            while (pi < pl && p[pi] == '*')
                pi++;
            if (pi == pl)
                return 1;
            star_p = pi;
            star_s = si;
            continue;
        }
        size_t adv;
        if (pi < pl && token_match(p, pl, pi, (unsigned char)s[si], nocase, &adv)) {
            pi += adv;
            si++;
            continue;
        }
        if (star_p == SIZE_MAX)
            return 0;
        pi = star_p;
        si = ++star_s;
    }
    while (pi < pl && p[pi] == '*')
        pi++;
    return pi == pl;
}

int bks_glob_match(const char *pat, size_t plen, const char *s, size_t slen, int nocase)
{
    return glob_iter(pat, plen, s, slen, nocase);
}
