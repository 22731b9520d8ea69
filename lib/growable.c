/*
 * growable.c - the growable filter: a table of fingerprints that doubles
 * when it fills and answers every lookup from one cache line.
 *
 * Why not Bloom filters: a Bloom filter cannot be split when it grows (its
 * bits do not say which key set them), so the scalable filter (scalable.c)
 * grows by adding stages, and an absent key must be looked for in every
 * stage: 17 cache lines for a filter grown from 100 keys to 1e7. A table
 * of per-key fingerprints can be split: each entry knows enough of its key's
 * hash to say which half of its bucket it belongs to.
 *
 * Structure
 *   A key's 64-bit hash h (XXH3-64 of the key and the seed) gives its
 *   bucket, the top q bits of h (2^q buckets), and a 15-bit fingerprint,
 *   the next 15 bits. A bucket is one 64-byte line of 32 16-bit lanes:
 *   lanes 0..30 hold entries, lane 31 the bucket's metadata (own entries,
 *   foreign entries, two flags). When the table doubles, the fingerprint's
 *   first bit becomes the bucket's new last bit, so each entry moves to one
 *   of its bucket's two children and keeps one bit less. An entry made g
 *   doublings ago keeps 15 - g bits; one with none left (a "void") matches
 *   every key of its bucket and is copied into both children.
 *
 * Entries
 *   An entry of L fingerprint bits keeps them at the top, then a 1, then
 *   zeros: e = fp << (16 - L) | 1 << (15 - L). Its lowest set bit says L,
 *   and it matches a key whose next 15 bits are t exactly when
 *   ((t << 1) ^ e) & -(lowbit(e) << 1) == 0: all 31 lanes in one AVX-512BW
 *   pass, or a scalar loop with the same answers.
 *
 * Overflow
 *   Own entries fill a bucket from lane 0 up. A full bucket spills into the
 *   next one (foreign entries fill from lane 30 down) and is flagged, so its
 *   lookups read that line too; when the next one is full as well, the
 *   entry goes to the stash, a sorted list of (bucket, entry), and the
 *   bucket is flagged for that. At the doubling load (75%) a few buckets in
 *   a thousand spill and the stash holds a few entries in a million
 *   (bench/RESULTS.md section 15); a stash past 64 + n / 1024 entries
 *   doubles the table early.
 *
 * Rate
 *   A lookup of an absent key compares it with the entries of its bucket,
 *   each matching with probability 2^-L, so the rate is at most
 *   W / (2^15 buckets) with W the sum of 2^(15 - L) over all entries.
 *   A new entry adds 1 to W; a doubling doubles W and the buckets alike, so
 *   the rate only grows with adds: by about 0.03% per doubling at 1%.
 *   The filter keeps W and refuses (BK_EFULL) a doubling after which the
 *   rate, filled to the doubling load, would pass the rate it was created
 *   for. The lowest rate it takes is BK_GROWABLE_MIN_FPR (a first table
 *   filled to 75%); at 1% it doubles about 27 times (1e2 -> 1e10 keys).
 *
 * Concurrency
 *   bk_growable_add_nogrow runs in many threads at once, and with lookups.
 *   It never doubles the table nor touches the stash: a key that needs
 *   either gets BK_EFULL, and the caller adds it with bk_growable_add
 *   while nothing else runs. Adders take turns under a spin lock (`adding`)
 *   for the few stores of one add: a lock-free lookup first answers the
 *   keys already there without it. Lookups take no lock: an entry is
 *   stored before the bucket's count that makes it visible (release), and
 *   lookups read the count first (acquire), so a lookup sees an add whole
 *   or not at all. Everything else (bk_growable_add, merges, saving,
 *   copying) needs the filter to itself.
 */
#include <sched.h>  /* sched_yield */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* qsort */
#include <string.h> /* memset, memmove */

#include "filter.h"
#include "hash.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#  include <immintrin.h>
#  define GROWABLE_AVX512 1
#else
#  define GROWABLE_AVX512 0
#endif

#define LANES 32      /* 16-bit lanes of a bucket: one 64-byte line */
#define SLOTS 31      /* entries; lane 31 is the metadata */
#define OWN_MASK 31u  /* metadata bits 0-4: own entries */
#define FOREIGN_ONE 32u /* metadata bits 5-9: foreign entries (of the bucket before) */
#define SPILLED 0x8000u /* some own entries are in the next bucket */
#define STASHED 0x4000u /* some own entries are in the stash */
#define VOID_ENTRY 0x8000u
#define FP_BITS 15
#define MAX_Q 48      /* h must keep 15 bits below the bucket bits */
#define AHEAD 32      /* keys hashed ahead in batches */
#define MAX_STASH (UINT64_C(1) << 40) /* a stored stash longer is corrupt */

/* A stash entry: its home bucket << 16 | the entry, so that sorting the
 * words sorts by bucket (and the file holds them as they are). */
typedef uint64_t stashed;
#define ST_BUCKET(w) ((w) >> 16)
#define ST_ENTRY(w) ((uint16_t)(w))
#define ST_MAKE(b, e) ((uint64_t)(b) << 16 | (uint64_t)(e))

static const bk__family_ops growable_ops; /* at the end of this file */

struct bk_growable {
    bk__object obj;       /* first: a bk_growable is also a bk_filter */
    uint16_t *t;          /* 2^q buckets of LANES lanes, 64-byte aligned */
    stashed *stash;       /* sorted by bucket */
    size_t nstash, stash_cap;
    uint32_t q;
    uint32_t doublings;
    uint64_t items;       /* keys added (answers of 1) */
    uint64_t weight;      /* W: the sum of 2^(15 - L) over every entry */
    double target;        /* the rate it was created for */
    uint64_t capacity;    /* asked at creation */
    uint64_t seed;
    size_t max_bytes;     /* 0: no limit */
    uint32_t adding;      /* 1 while a bk_growable_add_nogrow stores */
    bk__xxh64_keys keys;  /* the seed's share of XXH3-64, worked out once */
};

/*==========================================================================
 * Internals: layout
 *==========================================================================*/

static inline uint64_t nbuckets(uint32_t q) { return (uint64_t)1 << q; }
static inline uint64_t bucket_of(uint32_t q, uint64_t h) { return q ? h >> (64 - q) : 0; }
static inline uint16_t tag_of(uint32_t q, uint64_t h)
{
    return (uint16_t)(((h << q) >> (64 - FP_BITS)) << 1);
}
static inline unsigned own_of(unsigned meta) { return meta & OWN_MASK; }
static inline unsigned foreign_of(unsigned meta) { return (meta >> 5) & OWN_MASK; }

/* Keys a table of 2^q buckets holds before it doubles: 75% of its slots. */
static inline uint64_t load_limit(uint32_t q) { return nbuckets(q) * SLOTS * 3 / 4; }

__attribute__((always_inline)) static inline uint64_t hash_key(const bk_growable *f,
                                                              const void *key, size_t len)
{
    return len <= BK__XXH64_SHORT ? bk__xxh64_keyed(&f->keys, key, len)
                                  : bk__xxh64(key, len, f->seed);
}

/* Lanes and metadata as bk_growable_add_nogrow publishes them (see
 * Concurrency above): plain moves on x86. */
static inline unsigned meta_load(const uint16_t *x)
{
    return __atomic_load_n(&x[SLOTS], __ATOMIC_ACQUIRE);
}
static inline void meta_store(uint16_t *x, unsigned meta)
{
    __atomic_store_n(&x[SLOTS], (uint16_t)meta, __ATOMIC_RELEASE);
}
static inline unsigned lane_load(const uint16_t *x, unsigned i)
{
    return __atomic_load_n(&x[i], __ATOMIC_RELAXED);
}
static inline void lane_store(uint16_t *x, unsigned i, uint16_t e)
{
    __atomic_store_n(&x[i], e, __ATOMIC_RELAXED);
}

static inline uint32_t lanes_between(unsigned from, unsigned to)
{
    return (uint32_t)(((uint64_t)1 << to) - ((uint64_t)1 << from));
}

/* 1 when an entry of `lanes` matches the key's tag. */
static inline int test_scalar(const uint16_t *line, uint16_t tag, uint32_t lanes)
{
    int hit = 0;
    for (unsigned i = 0; i < SLOTS; i++) {
        unsigned e = lane_load(line, i);
        uint16_t care = (uint16_t)(0u - ((e & (0u - e)) << 1));
        hit |= (int)((lanes >> i) & 1u) & (((e ^ tag) & care) == 0);
    }
    return hit;
}

#if GROWABLE_AVX512
__attribute__((target("avx512bw"))) static inline int test_avx512(const uint16_t *line,
                                                                 uint16_t tag, uint32_t lanes)
{
    __m512i v = _mm512_load_si512((const void *)line);
    __m512i zero = _mm512_setzero_si512();
    __m512i low = _mm512_and_si512(v, _mm512_sub_epi16(zero, v));
    __m512i care = _mm512_sub_epi16(zero, _mm512_slli_epi16(low, 1));
    __m512i x = _mm512_xor_si512(v, _mm512_set1_epi16((short)tag));
    return _mm512_mask_testn_epi16_mask(lanes, x, care) != 0;
}

static int have_avx512bw(void)
{
    static int v = -1;
    int got = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (got < 0) {
        __builtin_cpu_init();
        got = __builtin_cpu_supports("avx512bw") ? 1 : 0;
        __atomic_store_n(&v, got, __ATOMIC_RELAXED);
    }
    return got;
}
#endif

/* 1: AVX-512BW tests, 0: scalar, -1: not decided yet. One relaxed load per
 * call; tests force the scalar path with bk__growable_simd(0). */
static int simd_mode = -1;

static int decide_simd(int allowed)
{
#if GROWABLE_AVX512
    int mode = allowed && have_avx512bw();
#else
    int mode = 0;
    (void)allowed;
#endif
    __atomic_store_n(&simd_mode, mode, __ATOMIC_RELAXED);
    return mode;
}

BK_HIDDEN int bk__growable_simd(int allowed)
{
    int was = __atomic_load_n(&simd_mode, __ATOMIC_RELAXED) != 0;
    decide_simd(allowed);
    return was;
}

static inline int test_lanes(const uint16_t *line, uint16_t tag, uint32_t lanes, int simd)
{
#if GROWABLE_AVX512
    if (simd) return test_avx512(line, tag, lanes);
#endif
    (void)simd;
    return test_scalar(line, tag, lanes);
}

static inline int use_simd(void)
{
    int mode = __atomic_load_n(&simd_mode, __ATOMIC_RELAXED);
    return mode >= 0 ? mode : decide_simd(1);
}

/*==========================================================================
 * Internals: the stash
 *==========================================================================*/

/* The first of the n sorted stash entries of bucket b or after it. */
static size_t stash_find(const stashed *st, size_t n, uint64_t b)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ST_BUCKET(st[mid]) < b) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Room for more than n entries (n of them kept). */
static int stash_reserve(stashed **v, size_t *cap, size_t n)
{
    if (n < *cap) return BK_OK;
    size_t ncap = *cap ? 2 * *cap : 2; /* most filters never stash */
    while (ncap <= n) {
        if (ncap > SIZE_MAX / 2 / sizeof(stashed)) return BK_ENOMEM;
        ncap *= 2;
    }
    stashed *nv = bk__malloc(ncap * sizeof(*nv));
    if (nv == NULL) return BK_ENOMEM;
    if (*v) memcpy(nv, *v, n * sizeof(*nv));
    bk__free(*v);
    *v = nv;
    *cap = ncap;
    return BK_OK;
}

static size_t stash_limit(uint64_t items) { return 64 + (size_t)(items / 1024); }

/*==========================================================================
 * Internals: lookups and placement
 *==========================================================================*/

/* The rare part of a lookup: the next bucket's foreign lanes, the stash. */
__attribute__((noinline)) static int overflow_hit(const bk_growable *f, uint64_t b, uint16_t tag,
                                                 unsigned meta, int simd)
{
    int hit = 0;
    if (meta & SPILLED) {
        const uint16_t *y = f->t + ((b + 1) & (nbuckets(f->q) - 1)) * LANES;
        unsigned fo = foreign_of(meta_load(y));
        hit |= test_lanes(y, tag, lanes_between(SLOTS - fo, SLOTS), simd);
    }
    if (meta & STASHED)
        for (size_t i = stash_find(f->stash, f->nstash, b);
             i < f->nstash && ST_BUCKET(f->stash[i]) == b; i++) {
            unsigned e = ST_ENTRY(f->stash[i]);
            uint16_t care = (uint16_t)(0u - ((e & (0u - e)) << 1));
            hit |= ((e ^ tag) & care) == 0;
        }
    return hit;
}

__attribute__((always_inline)) static inline int contains_body(const bk_growable *f, uint64_t h,
                                                             int simd)
{
    uint64_t b = bucket_of(f->q, h);
    const uint16_t *x = f->t + b * LANES;
    uint16_t tag = tag_of(f->q, h);
    unsigned meta = meta_load(x);
    int hit = test_lanes(x, tag, lanes_between(0, own_of(meta)), simd);
    if (meta & (SPILLED | STASHED)) hit |= overflow_hit(f, b, tag, meta, simd);
    return hit;
}

/* The whole call of each level in one function, the hash and the test
 * inlined: a single lookup on a large table overlaps with its neighbours
 * only as far as its instructions leave room (bench/RESULTS.md section 12),
 * and a call into the AVX-512 test from a generic caller cost about a
 * fifth of it. */
static int contains_scalar(const bk_growable *f, uint64_t h) { return contains_body(f, h, 0); }
static int contains_key_scalar(const bk_growable *f, const void *key, size_t len)
{
    return contains_body(f, hash_key(f, key, len), 0);
}

#if GROWABLE_AVX512
__attribute__((target("avx512bw"))) static int contains_avx512(const bk_growable *f, uint64_t h)
{
    return contains_body(f, h, 1);
}

__attribute__((target("avx512bw"))) static int contains_key_avx512(const bk_growable *f,
                                                                  const void *key, size_t len)
{
    return contains_body(f, hash_key(f, key, len), 1);
}
#endif

static inline int contains_h(const bk_growable *f, uint64_t h)
{
#if GROWABLE_AVX512
    if (use_simd()) return contains_avx512(f, h);
#endif
    return contains_scalar(f, h);
}

/* Put e (of home bucket b) into table t of 2^q buckets: b itself, else the
 * next bucket. 0 when both are full. Each entry is stored before the count
 * that shows it, a foreign one before its bucket's SPILLED flag. */
static int place_in_table(uint16_t *t, uint32_t q, uint64_t b, uint16_t e)
{
    uint16_t *x = t + b * LANES;
    unsigned meta = x[SLOTS];
    if (own_of(meta) + foreign_of(meta) < SLOTS) {
        lane_store(x, own_of(meta), e);
        meta_store(x, meta + 1);
        return 1;
    }
    uint16_t *y = t + ((b + 1) & (nbuckets(q) - 1)) * LANES;
    unsigned ym = y[SLOTS];
    if (y != x && own_of(ym) + foreign_of(ym) < SLOTS) {
        lane_store(y, SLOTS - 1 - foreign_of(ym), e);
        meta_store(y, ym + FOREIGN_ONE);
        meta_store(x, meta | SPILLED);
        return 1;
    }
    return 0;
}

/* Put e as place_in_table, else into the stash (kept sorted when
 * `sorted`), which must have room for one more. */
static void place(uint16_t *t, uint32_t q, stashed *stash, size_t *nstash, uint64_t b,
                  uint16_t e, int sorted)
{
    if (place_in_table(t, q, b, e)) return;
    uint16_t *x = t + b * LANES;
    size_t at = *nstash;
    if (sorted) {
        while (at > 0 && stash[at - 1] > ST_MAKE(b, e)) at--;
        memmove(stash + at + 1, stash + at, (*nstash - at) * sizeof(*stash));
    }
    stash[at] = ST_MAKE(b, e);
    (*nstash)++;
    x[SLOTS] = (uint16_t)(x[SLOTS] | STASHED);
}

static int cmp_stashed(const void *a, const void *b)
{
    uint64_t x = *(const stashed *)a, y = *(const stashed *)b;
    return (x > y) - (x < y);
}

/* One entry of home bucket `home` (of the table being doubled) into the
 * doubled table. */
static int move_entry(uint16_t *t, uint32_t q, stashed **stash, size_t *n, size_t *cap,
                      uint64_t home, uint16_t e)
{
    if (stash_reserve(stash, cap, *n + 2) != BK_OK) return BK_ENOMEM;
    if (e == VOID_ENTRY) {
        place(t, q, *stash, n, 2 * home, e, 0);
        place(t, q, *stash, n, 2 * home + 1, e, 0);
    } else {
        place(t, q, *stash, n, 2 * home + (e >> 15), (uint16_t)(e << 1), 0);
    }
    return BK_OK;
}

static size_t table_bytes(uint32_t q) { return (size_t)nbuckets(q) * BK_CACHE_LINE; }

/* The handle, the table with its alignment slack, and the stash's entries
 * (not its spare room, which depends on how the filter was made: built by
 * adds or loaded, the same filter reports the same bytes). */
static size_t total_bytes(const bk_growable *f)
{
    return sizeof(*f) + table_bytes(f->q) + BK_CACHE_LINE + f->nstash * sizeof(stashed);
}

/* The rate after a doubling, filled to its load: W doubles with the
 * buckets, and each key added after it adds 1. */
static double rate_after_doubling(const bk_growable *f)
{
    double w = 2.0 * (double)f->weight + (double)(load_limit(f->q + 1) - f->items);
    return w / ((double)(1u << FP_BITS) * (double)nbuckets(f->q + 1));
}

/* Doubles the table, all or nothing. */
static int double_table(bk_growable *f)
{
    if (f->q >= MAX_Q) return BK_ELIMIT;
    if (rate_after_doubling(f) > f->target) return BK_EFULL;
    if (f->max_bytes != 0 &&
        total_bytes(f) + table_bytes(f->q + 1) + BK_CACHE_LINE > f->max_bytes)
        return BK_ELIMIT;
    uint32_t q = f->q + 1;
    uint64_t nb = nbuckets(f->q);
    uint16_t *t = bk__calloc_aligned(table_bytes(q));
    if (t == NULL) return BK_ENOMEM;
    stashed *stash = NULL;
    size_t n = 0, cap = 0;
    for (uint64_t b = 0; b < nb; b++) {
        const uint16_t *x = f->t + b * LANES;
        unsigned own = own_of(x[SLOTS]), fo = foreign_of(x[SLOTS]);
        uint64_t prev = (b + nb - 1) & (nb - 1);
        for (unsigned i = 0; i < SLOTS; i++) {
            if (i >= own && i < SLOTS - fo) continue;
            if (move_entry(t, q, &stash, &n, &cap, i < own ? b : prev, x[i]) != BK_OK)
                goto nomem;
        }
    }
    for (size_t i = 0; i < f->nstash; i++)
        if (move_entry(t, q, &stash, &n, &cap, ST_BUCKET(f->stash[i]), ST_ENTRY(f->stash[i])) !=
            BK_OK)
            goto nomem;
    if (n > 1) qsort(stash, n, sizeof(*stash), cmp_stashed);
    bk__free_aligned(f->t);
    bk__free(f->stash);
    f->t = t;
    f->q = q;
    f->stash = stash;
    f->nstash = n;
    f->stash_cap = cap;
    f->weight *= 2;
    f->doublings++;
    return BK_OK;

nomem:
    bk__free_aligned(t);
    bk__free(stash);
    return BK_ENOMEM;
}

static int add_h(bk_growable *f, uint64_t h)
{
    if (contains_h(f, h)) return 0;
    if (f->items + 1 > load_limit(f->q)) {
        int rc = double_table(f);
        if (rc != BK_OK) return rc;
    }
    int rc = stash_reserve(&f->stash, &f->stash_cap, f->nstash + 1);
    if (rc != BK_OK) return rc;
    place(f->t, f->q, f->stash, &f->nstash, bucket_of(f->q, h),
          (uint16_t)(tag_of(f->q, h) | 1u), 1);
    f->items++;
    f->weight++;
    /* a long stash doubles early; if it cannot, the key stays in the stash */
    if (f->nstash > stash_limit(f->items)) (void)double_table(f);
    return 1;
}

static void adders_lock(bk_growable *f)
{
    while (__atomic_exchange_n(&f->adding, 1, __ATOMIC_ACQUIRE))
        for (unsigned spins = 0; __atomic_load_n(&f->adding, __ATOMIC_RELAXED); spins++)
            if (spins >= 64) sched_yield(); /* the holder may be descheduled */
}

static void adders_unlock(bk_growable *f) { __atomic_store_n(&f->adding, 0, __ATOMIC_RELEASE); }

/* add_h without doubling or stashing (see Concurrency above); the counts
 * change as in add_h, so a filter filled this way doubles after the same
 * number of keys as one filled by add_h. */
static int add_nogrow_h(bk_growable *f, uint64_t h)
{
    if (contains_h(f, h)) return 0;
    int rc;
    adders_lock(f);
    if (contains_h(f, h)) {
        rc = 0; /* another adder put it there meanwhile */
    } else if (f->items + 1 > load_limit(f->q) ||
               !place_in_table(f->t, f->q, bucket_of(f->q, h),
                               (uint16_t)(tag_of(f->q, h) | 1u))) {
        rc = BK_EFULL;
    } else {
        __atomic_store_n(&f->items, f->items + 1, __ATOMIC_RELAXED);
        __atomic_store_n(&f->weight, f->weight + 1, __ATOMIC_RELAXED);
        rc = 1;
    }
    adders_unlock(f);
    return rc;
}

/*==========================================================================
 * API
 *==========================================================================*/

/* The first table's q for a capacity, or BK_ESIZE. */
static int first_q(uint64_t capacity, uint32_t *q)
{
    *q = 0;
    while (*q < MAX_Q && load_limit(*q) < capacity) (*q)++;
    return load_limit(*q) < capacity ? BK_ESIZE : BK_OK;
}

int bk_growable_estimate_bytes(uint64_t capacity, size_t *bytes)
{
    uint32_t q;
    if (bytes == NULL) return BK_EINVAL;
    *bytes = 0;
    if (capacity == 0) return BK_ECAPACITY;
    if (first_q(capacity, &q) != BK_OK) return BK_ESIZE;
    *bytes = sizeof(bk_growable) + table_bytes(q) + BK_CACHE_LINE;
    return BK_OK;
}

/* The doubling rule of double_table, applied to a filter filled key by key
 * from empty: before each doubling it holds load_limit(q) keys, each added
 * with weight 1, and a doubling doubles W. */
uint32_t bk_growable_reach(uint64_t capacity, double fpr)
{
    uint32_t q, d = 0;
    if (capacity == 0 || !(fpr >= BK_GROWABLE_MIN_FPR && fpr < 1.0)) return 0;
    if (first_q(capacity, &q) != BK_OK) return 0;
    double w = (double)load_limit(q);
    while (q < MAX_Q) {
        double next = 2.0 * w + (double)(load_limit(q + 1) - load_limit(q));
        if (next / ((double)(1u << FP_BITS) * (double)nbuckets(q + 1)) > fpr) break;
        w = next;
        q++;
        d++;
    }
    return d;
}

int bk_growable_create(bk_growable **out, uint64_t capacity, double fpr, uint64_t seed)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (capacity == 0) return BK_ECAPACITY;
    if (!(fpr >= BK_GROWABLE_MIN_FPR && fpr < 1.0)) return BK_EFPR;
    uint32_t q;
    if (first_q(capacity, &q) != BK_OK) return BK_ESIZE;
    bk_growable *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    f->t = bk__calloc_aligned(table_bytes(q));
    if (f->t == NULL) {
        bk__free(f);
        return BK_ENOMEM;
    }
    bk__object_init(&f->obj, &growable_ops);
    f->q = q;
    f->target = fpr;
    f->capacity = capacity;
    f->seed = seed;
    bk__xxh64_keys_init(&f->keys, seed);
    *out = f;
    return BK_OK;
}

void bk_growable_free(bk_growable *f)
{
    if (f == NULL) return;
    bk__object_release(&f->obj);
    bk__free_aligned(f->t);
    bk__free(f->stash);
    bk__free(f);
}

int bk_growable_set_max_bytes(bk_growable *f, size_t max_bytes)
{
    if (f == NULL) return BK_EINVAL;
    f->max_bytes = max_bytes;
    return BK_OK;
}

int bk_growable_add_hash(bk_growable *f, uint64_t h)
{
    if (f == NULL) return BK_EINVAL;
    return add_h(f, h);
}

int bk_growable_add_nogrow(bk_growable *f, const void *key, size_t len)
{
    if (f == NULL || (key == NULL && len != 0)) return BK_EINVAL;
    return add_nogrow_h(f, hash_key(f, key, len));
}

int bk_growable_add_nogrow_hash(bk_growable *f, uint64_t h)
{
    if (f == NULL) return BK_EINVAL;
    return add_nogrow_h(f, h);
}

int bk_growable_contains_hash(const bk_growable *f, uint64_t h)
{
    if (f == NULL) return 0;
    return contains_h(f, h);
}

uint64_t bk_growable_hash_key(const bk_growable *f, const void *key, size_t len)
{
    static const char empty[1] = {0};
    if (key == NULL) key = empty, len = 0;
    return hash_key(f, key, len);
}

int bk_growable_add(bk_growable *f, const void *key, size_t len)
{
    if (f == NULL || (key == NULL && len != 0)) return BK_EINVAL;
    return add_h(f, hash_key(f, key, len));
}

int bk_growable_contains(const bk_growable *f, const void *key, size_t len)
{
    if (f == NULL || (key == NULL && len != 0)) return 0;
#if GROWABLE_AVX512
    if (use_simd()) return contains_key_avx512(f, key, len);
#endif
    return contains_key_scalar(f, key, len);
}

int64_t bk_growable_add_batch(bk_growable *f, const void *const *keys, const size_t *lens,
                              size_t n, int *results)
{
    int64_t added = 0;
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    for (size_t i = 0; i < n; i++) {
        int r = keys[i] == NULL && lens[i] != 0 ? BK_EINVAL : add_h(f, hash_key(f, keys[i], lens[i]));
        if (r == 1) added++;
        if (results != NULL) results[i] = r;
    }
    return added;
}

/* Keys are hashed AHEAD ahead and their lines prefetched then. */
__attribute__((always_inline)) static inline int64_t
batch_body(const bk_growable *f, const void *const *keys, const size_t *lens, size_t n,
           uint8_t *results, int simd)
{
    uint64_t ring[AHEAD];
    int64_t found = 0;
    size_t ahead = n < AHEAD ? n : AHEAD;
    for (size_t i = 0; i < ahead; i++) {
        ring[i] = bk_growable_hash_key(f, keys[i], lens[i]);
        BK_PREFETCH_READ(f->t + bucket_of(f->q, ring[i]) * LANES);
    }
    for (size_t i = 0; i < n; i++) {
        size_t slot = i % AHEAD;
        int r = contains_body(f, ring[slot], simd);
        found += r;
        if (results != NULL) results[i] = (uint8_t)r;
        size_t next = i + AHEAD;
        if (next < n) {
            ring[slot] = bk_growable_hash_key(f, keys[next], lens[next]);
            BK_PREFETCH_READ(f->t + bucket_of(f->q, ring[slot]) * LANES);
        }
    }
    return found;
}

static int64_t batch_scalar(const bk_growable *f, const void *const *keys, const size_t *lens,
                            size_t n, uint8_t *results)
{
    return batch_body(f, keys, lens, n, results, 0);
}

#if GROWABLE_AVX512
__attribute__((target("avx512bw"))) static int64_t
batch_avx512(const bk_growable *f, const void *const *keys, const size_t *lens, size_t n,
             uint8_t *results)
{
    return batch_body(f, keys, lens, n, results, 1);
}
#endif

int64_t bk_growable_contains_batch(const bk_growable *f, const void *const *keys,
                                   const size_t *lens, size_t n, uint8_t *results)
{
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
#if GROWABLE_AVX512
    if (use_simd()) return batch_avx512(f, keys, lens, n, results);
#endif
    return batch_scalar(f, keys, lens, n, results);
}

uint64_t bk_growable_items(const bk_growable *f)
{
    return f ? __atomic_load_n(&f->items, __ATOMIC_RELAXED) : 0;
}
uint64_t bk_growable_capacity(const bk_growable *f) { return f ? load_limit(f->q) : 0; }
uint64_t bk_growable_initial_capacity(const bk_growable *f) { return f ? f->capacity : 0; }
uint32_t bk_growable_doublings(const bk_growable *f) { return f ? f->doublings : 0; }
uint64_t bk_growable_seed(const bk_growable *f) { return f ? f->seed : 0; }
double bk_growable_error(const bk_growable *f) { return f ? f->target : 0.0; }
size_t bk_growable_bytes(const bk_growable *f) { return f ? total_bytes(f) : 0; }
size_t bk_growable_stashed(const bk_growable *f) { return f ? f->nstash : 0; }

double bk_growable_fpr_now(const bk_growable *f)
{
    if (f == NULL) return 0.0;
    return (double)__atomic_load_n(&f->weight, __ATOMIC_RELAXED) /
           ((double)(1u << FP_BITS) * (double)nbuckets(f->q));
}

/*==========================================================================
 * The generic handle and the file format
 *==========================================================================*/

BK__FAMILY_CASTS(growable, growable_ops)

static bk_hash ops_hash(const void *f, const void *key, size_t len)
{
    bk_hash h;
    h.lo = h.hi = bk_growable_hash_key(f, key, len);
    return h;
}

static int ops_add(void *f, bk_hash h) { return add_h(f, h.lo); }
static int ops_contains(const void *f, bk_hash h) { return contains_h(f, h.lo); }

static int64_t ops_add_batch(void *f, const void *const *keys, const size_t *lens, size_t n,
                             uint8_t *results)
{
    int64_t added = 0;
    for (size_t i = 0; i < n; i++) {
        int r = add_h(f, bk_growable_hash_key(f, keys[i], lens[i]));
        if (r < 0) return r;
        added += r;
        if (results != NULL) results[i] = (uint8_t)r;
    }
    return added;
}

static int64_t ops_contains_batch(const void *f, const void *const *keys, const size_t *lens,
                                  size_t n, uint8_t *results)
{
    return bk_growable_contains_batch(f, keys, lens, n, results);
}

static uint64_t ops_seed(const void *f) { return ((const bk_growable *)f)->seed; }
static void ops_destroy(void *f) { bk_growable_free(f); }
/* The stash is a part only when it holds entries (parts are never empty). */
static uint32_t ops_nparts(const void *f) { return ((const bk_growable *)f)->nstash ? 2 : 1; }

static int ops_info(const void *vf, bk_filter_info *out)
{
    const bk_growable *f = vf;
    uint64_t used = 0, slots = nbuckets(f->q) * SLOTS;
    uint64_t items = __atomic_load_n(&f->items, __ATOMIC_RELAXED);
    uint64_t weight = __atomic_load_n(&f->weight, __ATOMIC_RELAXED);
    for (uint64_t b = 0; b < nbuckets(f->q); b++) {
        unsigned meta = meta_load(f->t + b * LANES);
        used += own_of(meta) + foreign_of(meta);
    }
    /* capacity: what the table holds before it doubles (the file keeps the
     * capacity asked at creation), and the rate once it holds that many */
    out->seed = f->seed;
    out->capacity = load_limit(f->q);
    out->target_fpr = f->target;
    out->items = items;
    out->estimated_items = (double)items;
    out->fpr_now = (double)weight / ((double)(1u << FP_BITS) * (double)nbuckets(f->q));
    out->fpr_at_capacity = ((double)weight + (double)(load_limit(f->q) - items)) /
                           ((double)(1u << FP_BITS) * (double)nbuckets(f->q));
    out->fill = (double)used / (double)slots;
    out->bytes = total_bytes(f);
    out->parts = 1;
    return BK_OK;
}

static int ops_create(const bk_filter_config *cfg, void **out)
{
    return bk_growable_create((bk_growable **)out, cfg->capacity, cfg->fpr, cfg->seed);
}

static int ops_clone(const void *vf, void **out)
{
    const bk_growable *src = vf;
    bk_growable *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    *f = *src;
    bk__object_init(&f->obj, &growable_ops);
    f->max_bytes = src->max_bytes;
    f->t = bk__calloc_aligned(table_bytes(src->q));
    f->stash = NULL;
    f->stash_cap = 0;
    if (f->t == NULL || stash_reserve(&f->stash, &f->stash_cap, src->nstash) != BK_OK) {
        bk__free_aligned(f->t);
        bk__free(f);
        return BK_ENOMEM;
    }
    memcpy(f->t, src->t, table_bytes(src->q));
    if (src->nstash) memcpy(f->stash, src->stash, src->nstash * sizeof(stashed));
    *out = f;
    return BK_OK;
}

/* Empty, at the table's current size (its doublings stay counted). */
static void ops_clear(void *vf)
{
    bk_growable *f = vf;
    memset(f->t, 0, table_bytes(f->q));
    f->nstash = 0;
    f->items = 0;
    f->weight = 0;
}

/* 1 when entry d's bits are a prefix of entry e's: d matches every key e
 * matches (a void entry is a prefix of all). */
static inline int covers(uint16_t d, uint16_t e)
{
    unsigned ld = d & (0u - d), le = e & (0u - e);
    return ld >= le && ((d ^ e) & (uint16_t)(0u - (ld << 1))) == 0;
}

/* Entry e of home bucket b joins x. If x has an entry of that bucket that
 * covers e, e adds nothing; if e covers one, e takes its place (the union
 * matches what e matches); either way the key counts once. Otherwise e is
 * placed and counted in *added. *resort: a stash entry changed. */
static int join_entry(bk_growable *x, uint64_t b, uint16_t e, uint64_t *added, int *resort)
{
    uint16_t *t = x->t + b * LANES, *hit = NULL;
    unsigned meta = t[SLOTS];
    for (unsigned i = 0; i < own_of(meta) && hit == NULL; i++)
        if (covers(t[i], e) || covers(e, t[i])) hit = &t[i];
    if (hit == NULL && (meta & SPILLED)) {
        uint16_t *y = x->t + ((b + 1) & (nbuckets(x->q) - 1)) * LANES;
        for (unsigned i = SLOTS - foreign_of(y[SLOTS]); i < SLOTS && hit == NULL; i++)
            if (covers(y[i], e) || covers(e, y[i])) hit = &y[i];
    }
    if (hit != NULL) {
        if (!covers(*hit, e)) {
            x->weight += (uint64_t)(e & (0u - e)) - (uint64_t)(*hit & (0u - *hit));
            *hit = e;
        }
        return BK_OK;
    }
    if (meta & STASHED)
        for (size_t i = stash_find(x->stash, x->nstash, b);
             i < x->nstash && ST_BUCKET(x->stash[i]) == b; i++) {
            uint16_t d = ST_ENTRY(x->stash[i]);
            if (covers(d, e)) return BK_OK;
            if (covers(e, d)) {
                x->weight += (uint64_t)(e & (0u - e)) - (uint64_t)(d & (0u - d));
                x->stash[i] = ST_MAKE(b, e);
                *resort = 1;
                return BK_OK;
            }
        }
    if (stash_reserve(&x->stash, &x->stash_cap, x->nstash + 1) != BK_OK) return BK_ENOMEM;
    place(x->t, x->q, x->stash, &x->nstash, b, e, 1);
    x->weight += e & (0u - e); /* 2^(15 - L) */
    (*added)++;
    return BK_OK;
}

/* Union (op 0): every entry of src joins dst (join_entry). The smaller
 * table is first doubled to the larger one's size (its entries move as in
 * any doubling). The work is done on a copy of dst that replaces it at the
 * end: a failure changes nothing. BK_EFULL when the union would pass
 * dst's rate filled to its load, BK_ELIMIT past dst's max_bytes,
 * BK_ENOMEM. items becomes dst's plus the entries placed: the size of the
 * union but for keys of src whose entry met an unrelated one of dst with
 * the same bits (at the filter's rate). Intersection (op 1) is not
 * offered: BK_ENOTSUP. */
static int ops_merge(void *vd, const void *vs, int op)
{
    bk_growable *d = vd;
    const bk_growable *s = vs;
    bk_growable *x = NULL, *y = NULL;
    uint64_t added = 0;
    int resort = 0;
    if (op) return BK_ENOTSUP;
    if (d->seed != s->seed) return BK_EINCOMPAT;
    int rc = ops_clone(d, (void **)&x);
    if (rc == BK_OK) rc = ops_clone(s, (void **)&y);
    if (rc != BK_OK) goto out;
    y->target = 1.0; /* src only moves down to dst's size */
    y->max_bytes = 0;
    while (rc == BK_OK && x->q < y->q) rc = double_table(x);
    while (rc == BK_OK && y->q < x->q) rc = double_table(y);
    uint64_t nb = nbuckets(y->q);
    for (uint64_t b = 0; rc == BK_OK && b < nb; b++) {
        const uint16_t *t = y->t + b * LANES;
        unsigned own = own_of(t[SLOTS]), fo = foreign_of(t[SLOTS]);
        for (unsigned i = 0; rc == BK_OK && i < SLOTS; i++) {
            if (i >= own && i < SLOTS - fo) continue;
            rc = join_entry(x, i < own ? b : (b + nb - 1) & (nb - 1), t[i], &added, &resort);
        }
    }
    for (size_t i = 0; rc == BK_OK && i < y->nstash; i++)
        rc = join_entry(x, ST_BUCKET(y->stash[i]), ST_ENTRY(y->stash[i]), &added, &resort);
    if (rc != BK_OK) goto out;
    if (resort && x->nstash > 1) qsort(x->stash, x->nstash, sizeof(*x->stash), cmp_stashed);
    x->items += added;
    while (rc == BK_OK && x->items > load_limit(x->q)) rc = double_table(x);
    if (rc != BK_OK) goto out;
    if ((double)x->weight > x->target * (double)(1u << FP_BITS) * (double)nbuckets(x->q)) {
        rc = BK_EFULL;
        goto out;
    }
    if (x->nstash > stash_limit(x->items)) (void)double_table(x);
    /* x's table, stash and counts replace d's */
    bk__free_aligned(d->t);
    bk__free(d->stash);
    d->t = x->t;
    d->stash = x->stash;
    d->nstash = x->nstash;
    d->stash_cap = x->stash_cap;
    d->q = x->q;
    d->doublings = x->doublings;
    d->items = x->items;
    d->weight = x->weight;
    x->t = NULL;
    x->stash = NULL;
out:
    bk_growable_free(x);
    bk_growable_free(y);
    return rc;
}

/* Any two growable filters of one seed combine (bk_filter_incompatibility
 * checks the seed). */
static int ops_incompatibility(const void *va, const void *vb, char *buf, size_t cap)
{
    (void)va;
    (void)vb;
    (void)buf;
    (void)cap;
    return 0;
}

/* Image: header capacity, fpr, items, hash XXH3-64, param[0] = doublings,
 * param[1] = W; part 0 the table (m = buckets, param = q, width 16, slots
 * 31), part 1, when the stash holds entries, the stash (m = entries, 8
 * bytes each). */
static int ops_describe(const void *vf, bk__image *img)
{
    const bk_growable *f = vf;
    bk__part *p = &img->parts[0];
    img->seed = f->seed;
    img->capacity = p->capacity = f->capacity;
    img->fpr = p->fpr = f->target;
    img->items = p->items = f->items;
    img->hash = BK__HASH_XXH3_64;
    img->param[0] = f->doublings;
    img->param[1] = f->weight;
    p->m = nbuckets(f->q);
    p->width = 16;
    p->slots = SLOTS;
    p->param = f->q;
    p->data = f->t;
    p->length = table_bytes(f->q);
    if (f->nstash) {
        bk__part *s = &img->parts[1];
        s->m = f->nstash;
        s->width = 64;
        s->data = f->stash;
        s->length = f->nstash * sizeof(stashed);
    }
    return BK_OK;
}

/* A table is valid when every bucket's counts fit, its unused lanes are
 * zero and its used ones are not, a foreign entry has a spilled bucket
 * before it, and W is the sum of the entries' weights. The stash must be
 * sorted, in range, of flagged buckets, and every flagged bucket must have
 * entries there. */
static int valid_image(const uint16_t *t, uint32_t q, const stashed *st, uint64_t nst,
                       uint64_t weight)
{
    uint64_t nb = nbuckets(q), w = 0;
    for (uint64_t b = 0; b < nb; b++) {
        const uint16_t *x = t + b * LANES;
        unsigned meta = x[SLOTS], own = own_of(meta), fo = foreign_of(meta);
        if ((meta & 0x3c00u) != 0 || own + fo > SLOTS) return 0;
        if (fo > 0 && !(t[((b + nb - 1) & (nb - 1)) * LANES + SLOTS] & SPILLED)) return 0;
        if (nb == 1 && fo > 0) return 0;
        for (unsigned i = 0; i < SLOTS; i++) {
            int used = i < own || i >= SLOTS - fo;
            if (used != (x[i] != 0)) return 0;
            if (used) w += UINT64_C(1) << __builtin_ctz(x[i]);
        }
    }
    uint64_t last = 0;
    for (uint64_t i = 0; i < nst; i++) {
        uint64_t b = ST_BUCKET(st[i]);
        if (b >= nb || ST_ENTRY(st[i]) == 0 || (i > 0 && st[i] < last)) return 0;
        if (!(t[b * LANES + SLOTS] & STASHED)) return 0;
        w += UINT64_C(1) << __builtin_ctz(ST_ENTRY(st[i]));
        last = st[i];
    }
    for (uint64_t b = 0; b < nb; b++) {
        if (!(t[b * LANES + SLOTS] & STASHED)) continue;
        size_t at = stash_find(st, (size_t)nst, b);
        if (at == nst || ST_BUCKET(st[at]) != b) return 0;
    }
    return w == weight;
}

/* The payload is copied (a doubling replaces the table; a copy keeps the
 * handle the only owner of what it frees). */
static int ops_restore(const bk__image *img, void **out)
{
    static const bk__part none = {0};
    if (img->nparts < 1 || img->nparts > 2 || img->hash != BK__HASH_XXH3_64) return BK_ECORRUPT;
    const bk__part *p = &img->parts[0], *s = img->nparts == 2 ? &img->parts[1] : &none;
    if (img->nparts == 2 && (s->m == 0 || s->width != 64)) return BK_ECORRUPT;
    if (p->param > MAX_Q || p->m != nbuckets((uint32_t)p->param) || p->width != 16 ||
        p->slots != SLOTS || p->length != table_bytes((uint32_t)p->param))
        return BK_ECORRUPT;
    if (s->m > MAX_STASH || s->length != s->m * sizeof(stashed)) return BK_ECORRUPT;
    if (img->capacity == 0 || !(img->fpr >= BK_GROWABLE_MIN_FPR && img->fpr < 1.0) ||
        img->param[0] > MAX_Q || img->param[1] > (UINT64_C(1) << 53) ||
        img->items > load_limit((uint32_t)p->param))
        return BK_ECORRUPT;
    if (!valid_image(p->data, (uint32_t)p->param, s->data, s->m, img->param[1]))
        return BK_ECORRUPT;
    bk_growable *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &growable_ops);
    f->t = bk__calloc_aligned(table_bytes((uint32_t)p->param));
    if (f->t == NULL || stash_reserve(&f->stash, &f->stash_cap, (size_t)s->m) != BK_OK) {
        bk__free_aligned(f->t);
        bk__free(f);
        return BK_ENOMEM;
    }
    memcpy(f->t, p->data, (size_t)p->length);
    if (s->m) memcpy(f->stash, s->data, (size_t)s->length);
    f->obj.payload_copied = 1;
    f->nstash = (size_t)s->m;
    f->q = (uint32_t)p->param;
    f->doublings = (uint32_t)img->param[0];
    f->items = img->items;
    f->weight = img->param[1];
    f->target = img->fpr;
    f->capacity = img->capacity;
    f->seed = img->seed;
    bk__xxh64_keys_init(&f->keys, img->seed);
    *out = f;
    return BK_OK;
}

static const bk__family_ops growable_ops = {
    .family = BK_FAMILY_GROWABLE,
    .name = "growable",
    .hash = ops_hash,
    .add = ops_add,
    .contains = ops_contains,
    .remove = NULL,
    .count = NULL,
    .add_batch = ops_add_batch,
    .contains_batch = ops_contains_batch,
    .lockfree_add = 0,
    .seed = ops_seed,
    .destroy = ops_destroy,
    .info = ops_info,
    .create = ops_create,
    .clone = ops_clone,
    .clear = ops_clear,
    .merge = ops_merge,
    .incompatibility = ops_incompatibility,
    .nparts = ops_nparts,
    .describe = ops_describe,
    .restore = ops_restore,
};

const bk__family_ops *const bk__growable_family = &growable_ops;
