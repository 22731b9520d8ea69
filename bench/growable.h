/*
 * growable.h - a prototype, for bench_grow only: a filter that grows by
 * doubling and answers every lookup from one cache line, to measure what
 * such a family would cost before it is designed into the library (issue
 * 12's scalable target: absent lookups within 1.5x of one blocked filter,
 * which a chain of Bloom filters cannot reach; bench/RESULTS.md section 8).
 *
 * Why fingerprints: a Bloom filter cannot be split when it grows (its bits
 * do not say which key set them), a table of per-key fingerprints can. A
 * key's 64-bit hash h gives its bucket (the top q bits, 2^q buckets) and a
 * 15-bit fingerprint (the next 15 bits). When the table doubles, the
 * fingerprint's first bit becomes the bucket's new last bit, so each entry
 * moves to one of its bucket's two children and keeps one bit less. An
 * entry made g doublings ago keeps 15 - g bits; one with none left (a
 * "void") matches every key of its bucket and is copied into both children.
 * The rate is the sum of 2^-bits over the entries a lookup compares: about
 * (entries per bucket) x (doublings + 1) x 2^-16, under 1% for 100 -> 1e7.
 *
 * Layout: a bucket is one 64-byte line of 32 16-bit lanes. Lanes 0..30 hold
 * entries, lane 31 the bucket's metadata (own count, foreign count, spilled
 * flag). An entry keeps its L fingerprint bits at the top, then a 1, then
 * zeros: e = fp << (16 - L) | 1 << (15 - L), so L is where its lowest set
 * bit is, and an entry matches a key whose next 15 bits t satisfy
 * ((t << 1) ^ e) & -(lowbit(e) << 1) == 0 (all lanes at once with AVX-512BW).
 * Own entries fill from lane 0 up. A full bucket spills into the next one,
 * whose foreign entries fill from lane 30 down, and is flagged so that its
 * lookups read the next line too (rare below 75% load). When the next one
 * is full as well, the entry goes to a small stash (a list of bucket and
 * entry) and the bucket is flagged for that too; the Poisson tail of 2^q
 * buckets would otherwise force a doubling long before the load is
 * reached.
 *
 * Not thread-safe, no file format, no deletes: a measurement, not a family.
 */
#ifndef BENCH_GROWABLE_H
#define BENCH_GROWABLE_H

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GP_LANES 32
#define GP_SLOTS 31 /* lane 31 is the metadata */
#define GP_SPILLED 0x8000u
#define GP_STASHED 0x4000u
#define GP_VOID 0x8000u /* an entry with no fingerprint bits left */

typedef struct {
    uint64_t bucket;
    uint16_t e;
} gp_stashed;

typedef struct {
    gp_stashed *v;
    size_t n, cap;
} gp_stash;

typedef struct {
    uint16_t *t;         /* 2^q buckets of GP_LANES lanes */
    gp_stash stash;      /* entries neither their bucket nor the next could hold */
    uint32_t q;
    uint64_t n;          /* keys added */
    double alpha;        /* load (of GP_SLOTS per bucket) that triggers doubling */
    uint32_t doublings;
    uint32_t early;      /* doublings forced by a stash past n / 256 */
} gp_filter;

static inline uint64_t gp_buckets(const gp_filter *f) { return (uint64_t)1 << f->q; }
static inline uint64_t gp_bucket_of(uint32_t q, uint64_t h) { return q ? h >> (64 - q) : 0; }
static inline uint16_t gp_tag(uint32_t q, uint64_t h) { return (uint16_t)(((h << q) >> 49) << 1); }
static inline unsigned gp_own(const uint16_t *b) { return b[GP_SLOTS] & 31u; }
static inline unsigned gp_foreign(const uint16_t *b) { return (b[GP_SLOTS] >> 5) & 31u; }

static int gp_alloc(gp_filter *f, uint32_t q)
{
    size_t bytes = ((size_t)1 << q) * GP_LANES * sizeof(uint16_t);
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0) return -1;
    memset(p, 0, bytes);
    f->t = p;
    f->q = q;
    return 0;
}

/* Put e into bucket b (own) or, when full, into b + 1 (foreign) or the
 * stash. */
static int gp_place(uint16_t *t, gp_stash *st, uint64_t nb, uint64_t b, uint16_t e)
{
    uint16_t *x = t + b * GP_LANES;
    if (gp_own(x) + gp_foreign(x) < GP_SLOTS) {
        x[gp_own(x)] = e;
        x[GP_SLOTS] = (uint16_t)(x[GP_SLOTS] + 1);
        return 0;
    }
    uint16_t *y = t + ((b + 1) & (nb - 1)) * GP_LANES;
    if (gp_own(y) + gp_foreign(y) >= GP_SLOTS) {
        if (st->n == st->cap) {
            size_t cap = st->cap ? 2 * st->cap : 64;
            gp_stashed *v = realloc(st->v, cap * sizeof(*v));
            if (v == NULL) return -1;
            st->v = v;
            st->cap = cap;
        }
        st->v[st->n].bucket = b;
        st->v[st->n].e = e;
        st->n++;
        x[GP_SLOTS] |= GP_STASHED;
        return 0;
    }
    y[GP_SLOTS - 1 - gp_foreign(y)] = e;
    y[GP_SLOTS] = (uint16_t)(y[GP_SLOTS] + 32);
    x[GP_SLOTS] |= GP_SPILLED;
    return 0;
}

/* An entry of bucket home (of nb) into the doubled table g. */
static int gp_move(gp_filter *g, uint64_t nb, uint64_t home, uint16_t e)
{
    if (e == GP_VOID)
        return gp_place(g->t, &g->stash, 2 * nb, 2 * home, e) |
               gp_place(g->t, &g->stash, 2 * nb, 2 * home + 1, e);
    return gp_place(g->t, &g->stash, 2 * nb, 2 * home + (e >> 15), (uint16_t)(e << 1));
}

/* Doubles the table: every entry moves to a child of its home bucket. */
static int gp_double(gp_filter *f)
{
    gp_filter g = *f;
    uint64_t nb = gp_buckets(f);
    if (gp_alloc(&g, f->q + 1) != 0) return -1;
    memset(&g.stash, 0, sizeof(g.stash));
    for (uint64_t b = 0; b < nb; b++) {
        const uint16_t *x = f->t + b * GP_LANES;
        for (unsigned i = 0; i < GP_SLOTS; i++) {
            unsigned own = gp_own(x), fo = gp_foreign(x);
            if (i >= own && i < GP_SLOTS - fo) continue;
            uint64_t home = i < own ? b : (b + nb - 1) & (nb - 1);
            uint16_t e = x[i];
            int rc;
            rc = gp_move(&g, nb, home, e);
            if (rc != 0) {
                free(g.t);
                free(g.stash.v);
                return -1;
            }
        }
    }
    for (size_t i = 0; i < f->stash.n; i++)
        if (gp_move(&g, nb, f->stash.v[i].bucket, f->stash.v[i].e) != 0) {
            free(g.t);
            free(g.stash.v);
            return -1;
        }
    free(f->t);
    free(f->stash.v);
    f->stash = g.stash;
    f->t = g.t;
    f->q = g.q;
    f->doublings++;
    return 0;
}

static int gp_create(gp_filter *f, uint64_t capacity, double alpha)
{
    uint32_t q = 0;
    memset(f, 0, sizeof(*f));
    f->alpha = alpha;
    while ((double)((uint64_t)1 << q) * GP_SLOTS * alpha < (double)capacity) q++;
    return gp_alloc(f, q);
}

static inline __mmask32 gp_lanes(unsigned from, unsigned to)
{
    return (__mmask32)(((uint64_t)1 << to) - ((uint64_t)1 << from));
}

__attribute__((target("avx512bw"))) static inline int gp_test(const uint16_t *line, uint16_t tag,
                                                             __mmask32 lanes)
{
    __m512i v = _mm512_load_si512((const void *)line);
    __m512i zero = _mm512_setzero_si512();
    __m512i low = _mm512_and_si512(v, _mm512_sub_epi16(zero, v));
    __m512i care = _mm512_sub_epi16(zero, _mm512_slli_epi16(low, 1));
    __m512i x = _mm512_xor_si512(v, _mm512_set1_epi16((short)tag));
    return _mm512_mask_testn_epi16_mask(lanes, x, care) != 0;
}

__attribute__((target("avx512bw"))) static inline int gp_contains_hash(const gp_filter *f,
                                                                      uint64_t h)
{
    uint64_t nb = gp_buckets(f), b = gp_bucket_of(f->q, h);
    const uint16_t *x = f->t + b * GP_LANES;
    uint16_t tag = gp_tag(f->q, h);
    unsigned meta = x[GP_SLOTS];
    int hit = gp_test(x, tag, gp_lanes(0, meta & 31u));
    if (meta & GP_SPILLED) {
        const uint16_t *y = f->t + ((b + 1) & (nb - 1)) * GP_LANES;
        hit |= gp_test(y, tag, gp_lanes(GP_SLOTS - gp_foreign(y), GP_SLOTS));
    }
    if (meta & GP_STASHED)
        for (size_t i = 0; i < f->stash.n; i++) {
            uint16_t e = f->stash.v[i].e;
            uint16_t care = (uint16_t)(0u - ((unsigned)(e & (0u - e)) << 1));
            hit |= f->stash.v[i].bucket == b && ((e ^ tag) & care) == 0;
        }
    return hit;
}

/* 1 added, 0 already (probably) there, -1 out of memory. */
__attribute__((target("avx512bw"))) static int gp_add_hash(gp_filter *f, uint64_t h)
{
    if (gp_contains_hash(f, h)) return 0;
    while (gp_place(f->t, &f->stash, gp_buckets(f), gp_bucket_of(f->q, h),
                    (uint16_t)(gp_tag(f->q, h) | 1)) != 0) {
        f->early++;
        if (gp_double(f) != 0) return -1;
    }
    f->n++;
    /* a stash past 1/256 of the keys doubles early: its scan is linear */
    while ((double)f->n > f->alpha * GP_SLOTS * (double)gp_buckets(f) ||
           f->stash.n * 256 > f->n + 256) {
        if (f->stash.n * 256 > f->n + 256) f->early++;
        if (gp_double(f) != 0) return -1;
    }
    return 1;
}

static inline uint64_t gp_bytes(const gp_filter *f)
{
    return gp_buckets(f) * GP_LANES * 2 + f->stash.cap * sizeof(gp_stashed);
}

#endif /* BENCH_GROWABLE_H */
