/*
 * internal.h - helpers shared by the library's source files. Not installed.
 *
 * Everything here is static inline or bk__-prefixed and hidden: the public
 * surface is include/bloomkit.h alone.
 */
#ifndef BK_INTERNAL_H
#define BK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h> /* memcpy */

#include "bloomkit.h"

#if defined(__GNUC__)
#  define BK_HIDDEN __attribute__((visibility("hidden")))
#  define BK_LIKELY(x) __builtin_expect(!!(x), 1)
#  define BK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#  if defined(__x86_64__) || defined(__i386__)
/* An asm statement, not __builtin_prefetch: GCC 12 judges a small helper
 * made only of __builtin_prefetch calls (cuckoo.c's prefetch_position,
 * fuse.c's and bloomier.c's prefetch_hash) a const function and deletes
 * every call to it, so those batches prefetched nothing. A volatile asm is
 * never deleted; the "m" operand only names the address. */
#    define BK_PREFETCH_READ(p) \
        __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)(p)))
#    if defined(__PRFCHW__)
#      define BK_PREFETCH_WRITE(p) \
          __asm__ volatile("prefetchw %0" : : "m"(*(const char *)(p)))
#    else
#      define BK_PREFETCH_WRITE(p) BK_PREFETCH_READ(p)
#    endif
#  else
#    define BK_PREFETCH_READ(p) __builtin_prefetch((p), 0, 3)
#    define BK_PREFETCH_WRITE(p) __builtin_prefetch((p), 1, 3)
#  endif
#else
#  define BK_HIDDEN
#  define BK_LIKELY(x) (x)
#  define BK_UNLIKELY(x) (x)
#  define BK_PREFETCH_READ(p) ((void)(p))
#  define BK_PREFETCH_WRITE(p) ((void)(p))
#endif

#define BK_CACHE_LINE 64

/*--------------------------------------------------------------------------
 * CPU features that SIMD paths chosen per call need, found once
 * (lib/common.c). Paths chosen once per process (an impl table) may ask
 * __builtin_cpu_supports themselves.
 *--------------------------------------------------------------------------*/

enum {
    BK_CPU_AVX512F = 1 << 0,
    BK_CPU_AVX512BW = 1 << 1,
    BK_CPU_AVX512VL = 1 << 2,
    BK_CPU_AVX512VPOPCNTDQ = 1 << 3,
    BK_CPU_BMI2 = 1 << 4,
};

BK_HIDDEN extern int bk__cpu_bits; /* the BK_CPU_* this CPU has; -1: not yet found */
BK_HIDDEN int bk__cpu_find(void);  /* finds and keeps them; 0 off x86-64 */

/* Whether this CPU has every feature in `all`. Thread-safe (the first
 * calls may all find the bits: they find the same). */
static inline int bk__cpu_has(int all)
{
    int v = __atomic_load_n(&bk__cpu_bits, __ATOMIC_RELAXED);
    if (BK_UNLIKELY(v < 0)) v = bk__cpu_find();
    return (v & all) == all;
}

/*--------------------------------------------------------------------------
 * Memory: every allocation goes through the allocator hook (lib/common.c).
 *--------------------------------------------------------------------------*/

BK_HIDDEN void *bk__malloc(size_t size);
BK_HIDDEN void *bk__calloc(size_t count, size_t size);
BK_HIDDEN void bk__free(void *ptr);

/* size bytes, zeroed, aligned to BK_CACHE_LINE; released by
 * bk__free_aligned. The hook knows nothing of alignment, so this allocates
 * size + 64 bytes and keeps the raw pointer just below the aligned one. */
BK_HIDDEN void *bk__calloc_aligned(size_t size);
BK_HIDDEN void bk__free_aligned(void *ptr);

/* The allocation behind an aligned block, and the bytes asked for it (for
 * bk_filter_memory_usage). */
static inline const void *bk__aligned_raw(const void *ptr) { return ((void *const *)ptr)[-1]; }
static inline size_t bk__aligned_asked(size_t size) { return size + 64 + sizeof(void *); }

/* Ask for transparent huge pages over the 2 MiB pages wholly inside
 * [p, p + len) (Linux, THP in "madvise" mode). Filters and construction
 * arrays are read at random: with 4 KiB pages nearly every access of a
 * large table is also a TLB miss and a page walk. bk__calloc_aligned does
 * it for every table of 4 MiB and up. Advice only: ignored where
 * unsupported. */
BK_HIDDEN void bk__advise_huge(void *p, size_t len);

/*--------------------------------------------------------------------------
 * The process-wide SIMD level (bk_blocked_set_simd_level), for families
 * whose hot paths ask it per key: one relaxed load instead of a call.
 *--------------------------------------------------------------------------*/

BK_HIDDEN extern int bk__simd_level_now; /* -1 until detected (blocked.c) */

static inline int bk__simd_level(void)
{
    int level = __atomic_load_n(&bk__simd_level_now, __ATOMIC_RELAXED);
    return level >= 0 ? level : bk_blocked_simd_level();
}

/*--------------------------------------------------------------------------
 * Arithmetic
 *--------------------------------------------------------------------------*/

/* Fast range (Lemire, 2019): maps a uniform 64-bit x to [0, n) with the
 * high half of the 128-bit product x * n. Uniform for any n up to 2^64,
 * unlike x % n of a 32-bit hash, and no division. */
static inline uint64_t bk__fastrange64(uint64_t x, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)x * n) >> 64);
}

/* a * b into *out, returning 1 on overflow. */
static inline int bk__mul_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

/* Sizing: the fewest blocks in [1, most] at which fits(ctx, blocks)
 * holds, or 0 when `most` blocks do not fit. fits must hold for every
 * count above one where it holds (a rate that falls as blocks grow). The
 * search doubles from `start` (0 is taken as 1; a count near the answer
 * saves evaluations of fits), then bisects. counting.c, morris.c,
 * hybrid.c and varcount.c size with it; static inline, so that each one's
 * predicate is inlined. Never on a key's path. */
static inline uint64_t bk__fewest_blocks(uint64_t start, uint64_t most,
                                         int (*fits)(const void *ctx, uint64_t blocks),
                                         const void *ctx)
{
    uint64_t lo = 0, hi = start ? start : 1; /* lo: 0 (never tried) or too few */
    while (!fits(ctx, hi)) {
        lo = hi;
        if (hi >= most) return 0;
        hi *= 2;
    }
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (fits(ctx, mid)) hi = mid;
        else lo = mid;
    }
    return hi <= most ? hi : 0;
}

/*--------------------------------------------------------------------------
 * Little-endian fields of serialized images (format.c, iblt.c, rbloom.c):
 * byte by byte, so the bytes are the same on any host.
 *--------------------------------------------------------------------------*/

static inline void bk__put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static inline void bk__put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t bk__get_le32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static inline uint64_t bk__get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* The same for hot paths: 8 bytes at any address in one load or store
 * (payloads of packed entries: cuckoo.c, ttl.c), byte-swapped only on a
 * big-endian host. */
static inline uint64_t bk__loadu_le64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void bk__storeu_le64(unsigned char *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, sizeof(v));
}

static inline void bk__put_le_f64(unsigned char *p, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof(v));
    bk__put_le64(p, v);
}

static inline double bk__get_le_f64(const unsigned char *p)
{
    uint64_t v = bk__get_le64(p);
    double d;
    memcpy(&d, &v, sizeof(d));
    return d;
}

/*--------------------------------------------------------------------------
 * Atomics on shared 64-bit words. Relaxed ordering: a filter's bits only ever
 * go from 0 to 1 during adds, so no ordering between words is needed for
 * correctness; callers that hand a filter between threads synchronise
 * themselves (a mutex, a join, a queue), which orders the bits too.
 *--------------------------------------------------------------------------*/

static inline uint64_t bk__load64(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static inline uint64_t bk__fetch_or64(uint64_t *p, uint64_t v)
{
    return __atomic_fetch_or(p, v, __ATOMIC_RELAXED);
}

static inline void bk__add64(uint64_t *p, uint64_t v)
{
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

static inline uint64_t bk__popcount64(uint64_t x)
{
    return (uint64_t)__builtin_popcountll(x);
}

/*--------------------------------------------------------------------------
 * Probe positions: enhanced double hashing (Kirsch & Mitzenmacher 2006;
 * Dillinger & Manolios 2004). With h = (lo, hi):
 *     x_0 = lo, y_0 = hi | 1,  x_{i+1} = x_i + y_i,  y_{i+1} = y_i + i + 1
 * i.e. x_i = lo + i*y_0 + (i^3 - i)/6 (mod 2^64); probe i is
 * fastrange(x_i, m). The step is forced odd so that it is never zero, and
 * the cubic term keeps probes apart even when y_0 is small; all arithmetic
 * is on 64 bits and only the reduction looks at m, so a filter of more than
 * 2^32 bits is exactly as accurate as a small one.
 *--------------------------------------------------------------------------*/

typedef struct bk__probe {
    uint64_t x;
    uint64_t y;
    uint64_t i;
} bk__probe;

static inline bk__probe bk__probe_start(bk_hash h)
{
    bk__probe p;
    p.x = h.lo;
    p.y = h.hi | 1;
    p.i = 0;
    return p;
}

static inline uint64_t bk__probe_next(bk__probe *p, uint64_t m)
{
    uint64_t pos = bk__fastrange64(p->x, m);
    p->x += p->y;
    p->i++;
    p->y += p->i;
    return pos;
}

/*--------------------------------------------------------------------------
 * Validation shared by constructors
 *--------------------------------------------------------------------------*/

/* BK_OK when p is in (0, 1), else BK_EFPR (NaN included). */
static inline int bk__check_fpr(double p)
{
    return (p > 0.0 && p < 1.0) ? BK_OK : BK_EFPR;
}

#endif /* BK_INTERNAL_H */
