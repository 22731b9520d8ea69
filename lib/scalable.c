/*
 * scalable.c - the scalable Bloom filter (Almeida, Baquero, Preguica &
 * Hutchison, "Scalable Bloom Filters", Information Processing Letters 101,
 * 2007), with RedisBloom's parameters (BF.RESERVE: error, capacity,
 * EXPANSION, NONSCALING).
 *
 * Structure
 *   A chain of Bloom filters, the "stages", all hashing with the filter's
 *   seed, so a key is hashed once (XXH3-128, h = (lo, hi)) and the same h
 *   probes every stage. Stage i is sized for n_i = n_0 * expansion^i items
 *   (so BF.INFO's Capacity and Number of filters are RedisBloom's) at the
 *   rate p_i of the schedule below. Each stage counts the new items written
 *   into it; when the newest stage's count has reached n_i, the next new
 *   item creates stage i + 1. Only the newest stage is ever written.
 *
 * Rate schedule (compound rate <= the error P asked for)
 *   A lookup of an absent key is wrong when some stage is wrong, so by the
 *   union bound, whatever the correlation between stages, the compound rate
 *   is at most sum_i p_i. Stage 0 takes half the budget and the stages after
 *   it share the other half geometrically with ratio r = 0.9:
 *       p_0 = P / 2,   p_i = (P / 2) (1 - r) r^(i-1)  (i >= 1),
 *   so sum_i p_i = P (1 - r^(n-1) / 2) < P for any number of stages.
 *   Almeida et al. (section 5) recommend r = 0.8 ... 0.9 for growth 2 ... 4:
 *   a stage needs log2(1 / p_i) / ln 2 bits per key, which grows by only
 *   log2(1 / r) / ln 2 = 0.22 bits per stage at r = 0.9 against 1.44 at
 *   RedisBloom's r = 0.5, and most keys live in the newest stages. Grown
 *   from 100 keys to 3e6 (15 stages) that is ~22 bits per key against
 *   RedisBloom's 32.5 for the same bound (bench/bench_grow.c). Stage 0 at
 *   P / 2 is RedisBloom's own first stage, so a reserved filter costs what
 *   RedisBloom's does. A NONSCALING filter has one stage at P itself.
 *   Without BK_SCALABLE_BOUNDED the budget is P for stage 0 and P again for
 *   the rest (compound < 2P, RedisBloom 1.x's bound).
 *   Files written before this schedule (header param[3] = 0) keep theirs:
 *   p_i = p_0 0.5^i, p_0 = P / 2 (bounded) or P.
 *
 * Stage layouts
 *   Each stage is one of two layouts, chosen when it is made and recorded
 *   per part in the file:
 *   - blocked: 512-bit blocks, one cache line per key, exactly the layout
 *     of lib/blocked.c (block = fastrange(lo, blocks), in-block positions
 *     (x SALT[i]) >> 23 with x the low 32 bits of hi), sized by
 *     bk_blocked_optimal. One cache line per stage per lookup, but the
 *     uneven load of blocks costs bits: 4% more than classic at 1%, 14% at
 *     1e-4, 34% at 1e-6.
 *   - classic: m bits, k independent probes (classic_probe below), sized
 *     by bk_bloom_optimal with m rounded up to whole words (and a margin
 *     for small filters). Fewest bits, but k cache lines per present key.
 *   Stage 0 is classic (the capacity the user asked for costs exactly the
 *   bits RedisBloom's would, and a 100-key filter fits in 240 bytes); a
 *   later stage is classic only when blocked would take more than 1.2x the
 *   bits (rates under ~3e-5), otherwise blocked, so that a lookup costs one
 *   line test per stage. A filter grown from 100 keys at 1% is classic for
 *   stage 0 and blocked after.
 *
 * Lookups
 *   The key is hashed once; every stage's line is located and prefetched,
 *   then stages are tested newest first (where most keys live). Blocked
 *   stages share the in-block pattern (same x, same salts), so the key's
 *   512-bit mask is built once per k and each stage test is one line
 *   compared with it, without branches on the data (one AVX-512 load and
 *   test where the CPU has it); the stages' cache misses overlap instead of
 *   following each other. Classic stages test four probes at a time.
 *   Batches prefetch the lines of keys ahead for all stages.
 *
 * Adds
 *   An add looks the key up in every stage first. Found anywhere: the
 *   answer is 0 and nothing is written, which makes items a count of
 *   distinct keys (BF.CARD) and keeps older stages at their capacity.
 *   Found nowhere: the key goes into the newest stage (after growing, if
 *   that one is full) and is counted.
 *
 * Memory (what bk_scalable_bytes reports: bytes asked of the allocator)
 *   One allocation holds the handle (96 bytes), stage 0's record and stage
 *   0's bits, so a filter of 100 items at 1% is 96 + 144 = 240 bytes (its
 *   1115 bits in whole words). Each later stage is one allocation of its
 *   bits, its 16-byte record and up to 87 bytes of alignment and
 *   bookkeeping; the stage directory (8 bytes a slot, doubling, the
 *   smaller ones kept until free because lock-free readers may hold them)
 *   adds under 32 bytes per stage. A loaded filter reports the same bytes
 *   as the same filter built by adds (it holds the file's payload block
 *   instead), so BF.INFO Size survives a save and a reload.
 *
 * Limits
 *   At most BK_SCALABLE_MAX_STAGES stages (settable lower) and an optional
 *   cap on total bytes; both are checked before anything is allocated, and
 *   a new stage is published only once fully built, so every failure of a
 *   growing add (BK_ELIMIT, BK_ESIZE, BK_ENOMEM) leaves the filter as it
 *   was. A non-scaling filter has one stage and refuses new keys once it
 *   holds its capacity (BK_EFULL, RedisBloom's "non scaling filter is
 *   full"); keys already present still answer 0.
 *
 * Concurrency
 *   Stage 0 lives in the handle; stages 1.. are reached through a
 *   directory of pointers. A stage is built completely, then installed
 *   with a compare-and-swap of its directory slot from NULL (acquire-
 *   release), then made visible by raising nstages (release). A full
 *   directory is replaced by a copy twice its size with a compare-and-swap
 *   of the directory pointer; it is only ever replaced when all its slots
 *   are published, so no install is lost, and the old one is kept until
 *   free. Readers load nstages (acquire) and then the directory, which
 *   holds at least that many stages: lookups are lock-free and safe during
 *   growth. Two adds that find the newest stage full both build a stage;
 *   the CAS picks one, the other frees its copy, helps raise nstages and
 *   retries. Stage capacity is checked with relaxed counters, so a stage
 *   may take a few items more than its capacity under concurrent adds
 *   (one per racing thread).
 *
 * What it cannot do
 *   Delete or forget (see the window filter); blocked stages do not reach
 *   rates below about 1e-9 (32 hash bits place a key's bits in a block);
 *   classic stages stop at 64 probes (rates near 1e-19).
 */
#include <math.h>   /* pow, log, log1p, expm1, fabs */
#include <stdio.h>  /* snprintf */
#include <string.h> /* memset, memcpy */

#include "family_util.h"
#include "hash.h"

/* The AVX-512 stage test (a vector load of the line: not under TSan,
 * which sees only the scalar path's atomic loads). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#  define SCALABLE_AVX512 1
#  include <immintrin.h>
#else
#  define SCALABLE_AVX512 0
#endif

/*==========================================================================
 * Types
 *==========================================================================*/

/* The schedule (see above). */
#define RATIO 0.9        /* r: each stage after stage 1 at r times the last */
#define LEGACY_RATIO 0.5 /* files without the schedule field */

/* Layout choice after stage 0: classic when blocked needs more than
 * BLOCKED_MAX_COST times the classic bits. */
#define BLOCKED_MAX_COST 1.2

#define BLOCK_BITS 512
#define BLOCK_WORDS 8
#define BLOCKED_MAX_HASHES 16 /* BK_BLOCKED_MAX_HASHES */
#define CLASSIC_MAX_HASHES 64 /* BK_MAX_HASHES */

/* Internal flag: the filter follows the legacy schedule (loaded from a
 * file written before it). Never set in a file. */
#define F_LEGACY 0x80u
#define PUBLIC_FLAGS (BK_SCALABLE_NONSCALING | BK_SCALABLE_BOUNDED)

/* A stage record: 16 bytes, followed in memory by the stage's bits (or, with
 * SH_POINTER, by a pointer to them). shape = units << 16 | k << 8 | flags,
 * units being bits (classic) or blocks (blocked). */
typedef struct stage {
    uint64_t items; /* new items written into it; relaxed atomic */
    uint64_t shape;
} stage;

#define SH_CLASSIC 1u /* else blocked */
#define SH_POINTER 2u /* the bits are elsewhere (a loaded payload) */

typedef struct stage_dir {
    struct stage_dir *retired; /* the smaller directory this one replaced */
    uint32_t cap;
    stage *slot[];             /* cap entries; slot[0] is the handle's stage 0 */
} stage_dir;

struct bk_scalable {
    bk__object obj;       /* first: a bk_scalable is also a bk_filter */
    stage_dir *dir;       /* NULL while only stage 0 exists; acquire/release */
    uint64_t seed;
    double error;         /* P, as created */
    uint64_t capacity;    /* n_0 */
    size_t max_bytes;     /* 0: no cap; relaxed atomic */
    uint16_t expansion;   /* 1 ... BK_SCALABLE_MAX_EXPANSION */
    uint16_t ratio_q;     /* r as q / 65536 (bk_scalable_set_tightening); 0:
                             RATIO (the two bytes a double would have grown
                             a 240-byte filter by are the expansion's own) */
    uint8_t nstages;      /* published count; release/acquire */
    uint8_t max_stages;   /* relaxed atomic */
    uint8_t flags;        /* BK_SCALABLE_* | F_LEGACY */
    uint8_t single_writer; /* adds use plain stores (bk_scalable_set_single_writer) */
    stage first;          /* stage 0; its bits (or a pointer) follow */
};

/* Stage 0's record must be the last member: its bits follow the struct. */
_Static_assert(sizeof(struct bk_scalable) ==
                   offsetof(struct bk_scalable, first) + sizeof(stage),
               "stage 0's bits follow the handle");

/* Bytes a stage allocation adds to its bits: the raw pointer, the record
 * and the worst alignment of the bits to a cache line. */
#define STAGE_SLACK (sizeof(void *) + sizeof(stage) + BK_CACHE_LINE - 1)

/* In-block salts of the blocked layout: lib/blocked.c's, part of the file
 * format (docs/FORMAT.md, family 2). Never change them. */
static const uint32_t SALT[BLOCKED_MAX_HASHES] = {
    0xe220a839u, 0x6e789e6bu, 0x06c45d19u, 0xf88bb8a9u,
    0x1b39896bu, 0x53cb9f0du, 0x2c829abfu, 0xc584133bu,
    0x3ee57891u, 0xf3b8488du, 0x657eecddu, 0xc2d326e1u,
    0x8621a03fu, 0x8e1f7555u, 0xb54e0f17u, 0x84bb3f97u,
};

/* Keys hashed ahead in a batch lookup: each brings up to one miss per
 * large stage. */
#define BATCH_AHEAD 8

static const bk__family_ops scalable_ops; /* at the end of this file */

/*==========================================================================
 * Internals: stage shapes and memory
 *==========================================================================*/

static inline uint64_t shape_units(uint64_t shape) { return shape >> 16; }
static inline uint32_t shape_k(uint64_t shape) { return (uint32_t)(shape >> 8) & 0xffu; }
static inline int shape_classic(uint64_t shape) { return (shape & SH_CLASSIC) != 0; }

static inline uint64_t make_shape(uint64_t units, uint32_t k, unsigned flags)
{
    return units << 16 | (uint64_t)k << 8 | flags;
}

/* Payload bytes of a shape: whole 64-bit words (classic) or blocks. */
static uint64_t shape_bytes(uint64_t shape)
{
    uint64_t units = shape_units(shape);
    return shape_classic(shape) ? (units + 63) / 64 * 8 : units * BK_CACHE_LINE;
}

static uint64_t shape_bits(uint64_t shape)
{
    return shape_classic(shape) ? shape_units(shape) : shape_units(shape) * BLOCK_BITS;
}

static inline uint64_t *stage_words(const stage *s)
{
    if (s->shape & SH_POINTER) {
        uint64_t *p;
        memcpy(&p, s + 1, sizeof(p));
        return p;
    }
    return (uint64_t *)(uintptr_t)(s + 1);
}

/* Free a stage of index >= 1: its raw allocation pointer sits just below it. */
static void stage_free(stage *s)
{
    if (s == NULL) return;
    void *raw;
    memcpy(&raw, (const char *)s - sizeof(void *), sizeof(raw));
    bk__free(raw);
}

/* A stage of index >= 1 with room for `bytes` bytes of bits (0 with
 * SH_POINTER: room for the pointer), the bits cache-line aligned. */
static stage *stage_alloc(uint64_t bytes, uint64_t shape)
{
    size_t room = (shape & SH_POINTER) ? sizeof(void *) : (size_t)bytes;
    unsigned char *raw = bk__calloc(1, room + STAGE_SLACK);
    if (raw == NULL) return NULL;
    uintptr_t bits = (uintptr_t)raw + sizeof(void *) + sizeof(stage);
    bits = (bits + BK_CACHE_LINE - 1) & ~(uintptr_t)(BK_CACHE_LINE - 1);
    stage *s = (stage *)bits - 1;
    memcpy((char *)s - sizeof(void *), &raw, sizeof(raw));
    s->shape = shape;
    bk__advise_huge((void *)bits, room); /* one TLB entry per 2 MB of bits */
    return s;
}

static uint64_t dir_bytes(uint32_t cap)
{
    return sizeof(stage_dir) + (uint64_t)cap * sizeof(stage *);
}

/*==========================================================================
 * Internals: atomics on the stage array
 *==========================================================================*/

static inline uint32_t load_nstages(const bk_scalable *f)
{
    return __atomic_load_n(&f->nstages, __ATOMIC_ACQUIRE);
}

static inline stage_dir *load_dir(const bk_scalable *f)
{
    return __atomic_load_n(&f->dir, __ATOMIC_ACQUIRE);
}

/* Stage i < a published count (or a slot being installed: may be NULL). */
static inline stage *load_stage(const bk_scalable *f, uint32_t i)
{
    if (i == 0) return (stage *)(uintptr_t)&f->first;
    stage_dir *d = load_dir(f);
    if (d == NULL || i >= d->cap) return NULL;
    return __atomic_load_n(&d->slot[i], __ATOMIC_ACQUIRE);
}

static inline size_t load_size(const size_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static inline uint64_t stage_items(const stage *s)
{
    return __atomic_load_n(&s->items, __ATOMIC_RELAXED);
}

/*==========================================================================
 * Internals: the schedule and sizing
 *==========================================================================*/

/* Stage 0's rate. */
static double first_rate(double error, unsigned flags)
{
    /* legacy files built non-scaling bounded filters at half the rate */
    if ((flags & BK_SCALABLE_NONSCALING) && !(flags & F_LEGACY)) return error;
    return (flags & BK_SCALABLE_BOUNDED) ? error / 2 : error;
}

/* The ratio r of the schedule. */
static double ratio_of(const bk_scalable *f)
{
    return f->ratio_q ? (double)f->ratio_q / 65536.0 : RATIO;
}

/* Rate of stage i. */
static double stage_rate(const bk_scalable *f, uint32_t i)
{
    double p0 = first_rate(f->error, f->flags);
    if (f->flags & F_LEGACY) return p0 * pow(LEGACY_RATIO, (double)i);
    if (i == 0) return p0;
    double rest = (f->flags & BK_SCALABLE_BOUNDED) ? f->error / 2 : f->error;
    double r = ratio_of(f);
    return rest * (1.0 - r) * pow(r, (double)(i - 1));
}

/* Capacity of stage i, or BK_ESIZE when it overflows. */
static int stage_capacity(const bk_scalable *f, uint32_t i, uint64_t *out)
{
    uint64_t c = f->capacity;
    for (uint32_t j = 0; j < i; j++)
        if (bk__mul_overflow(c, f->expansion, &c)) return BK_ESIZE;
    *out = c;
    return BK_OK;
}

/* The shape of a new stage of n items at rate p (index i). */
static int plan_stage(uint64_t n, double p, uint32_t i, uint64_t *shape)
{
    uint64_t m;
    uint32_t k;
    if (!(p > 0.0)) return BK_ESIZE; /* underflow: unreachable rates */
    int rc = bk_bloom_optimal(n, p, &m, &k);
    if (rc == BK_EHASHES) return BK_ESIZE;
    if (rc != BK_OK) return rc;
    /* whole words: the bits the allocation holds anyway, and a lower rate */
    if (m > BK_MAX_BITS - 63) return BK_ESIZE;
    if ((double)k * k > 0.001 * (double)m) {
        /* A small filter with many probes misses its rate: probes of one
         * key collide (about k^2 / 2m of them) and the fill varies, each
         * costing ~k^2 / 2m of relative rate (measured +8% at 100 keys,
         * k = 8; +20% at k = 23). Size it for p / (1 + k^2 / m). */
        double margin = 1.0 + (double)k * k / (double)m;
        rc = bk_bloom_optimal(n, p / margin, &m, &k);
        if (rc == BK_EHASHES) return BK_ESIZE;
        if (rc != BK_OK) return rc;
        if (m > BK_MAX_BITS - 63) return BK_ESIZE;
    }
    m = (m + 63) / 64 * 64;
    double kr = round((double)m / (double)n * 0.6931471805599453);
    k = kr < 1.0 ? 1u : kr > CLASSIC_MAX_HASHES ? CLASSIC_MAX_HASHES : (uint32_t)kr;
    if (i > 0) {
        uint64_t bm;
        uint32_t bk;
        if (bk_blocked_optimal(n, p, &bm, &bk) == BK_OK &&
            (double)bm <= BLOCKED_MAX_COST * (double)m) {
            *shape = make_shape(bm / BLOCK_BITS, bk, 0);
            return BK_OK;
        }
    }
    *shape = make_shape(m, k, SH_CLASSIC);
    return BK_OK;
}

/*==========================================================================
 * Internals: probing a stage
 *==========================================================================*/

/* Probe i of a classic stage: z_i = lo + (i + 1) (hi | 1), mixed by a
 * 64-bit finaliser (Stafford's mix 13), then fast range to [0, m). The
 * double hashing of lib/bloom.c (x_i = lo + i y + ...) is not used here:
 * when y maps to less than one bit of a small filter all of a key's
 * probes fall on one or two bits, and such keys (about 2 / m of them) put
 * a floor near 1 / m under the rate, far above the rates of late stages
 * (measured: 3e-5 instead of 1e-7 at m = 3400). Mixed probes are
 * independent for every key. */
static inline uint64_t classic_probe(bk_hash h, uint32_t i, uint64_t m)
{
    uint64_t z = h.lo + (uint64_t)(i + 1) * (h.hi | 1);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    return bk__fastrange64(z, m);
}

/* Prefetch what a lookup or an add of h reads in stage s: a blocked
 * stage's line, a classic stage's words of its first 8 probes (a lookup
 * tests them 4 at a time). */
static inline void prefetch_stage(const stage *s, bk_hash h)
{
    uint64_t shape = s->shape;
    const uint64_t *w = stage_words(s);
    if (shape_classic(shape)) {
        uint32_t k = shape_k(shape) < 8 ? shape_k(shape) : 8;
        uint64_t m = shape_units(shape);
        for (uint32_t i = 0; i < k; i++) BK_PREFETCH_READ(w + (classic_probe(h, i, m) >> 6));
        return;
    }
    BK_PREFETCH_READ(w + bk__fastrange64(h.lo, shape_units(shape)) * BLOCK_WORDS);
}

/* The address a lookup of h reads first in a stage (to prefetch). */
static inline const uint64_t *first_line(const stage *s, bk_hash h)
{
    uint64_t shape = s->shape;
    const uint64_t *w = stage_words(s);
    if (shape_classic(shape)) return w + (classic_probe(h, 0, shape_units(shape)) >> 6);
    return w + bk__fastrange64(h.lo, shape_units(shape)) * BLOCK_WORDS;
}

/* The k in-block bits of x as a 512-bit mask. Every blocked stage places
 * a key's bits with the same x and salts, so one mask serves all stages
 * of the same k: a stage test is then one line compared with the mask. */
static inline void build_mask(uint32_t x, uint32_t k, uint64_t mask[BLOCK_WORDS])
{
    for (int j = 0; j < BLOCK_WORDS; j++) mask[j] = 0;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t pos = (uint32_t)(x * SALT[i]) >> 23;
        mask[pos >> 6] |= UINT64_C(1) << (pos & 63);
    }
}

#if SCALABLE_AVX512
static inline int have_avx512(void) { return bk__cpu_has(BK_CPU_AVX512F); }
#endif

static inline int line_has(const uint64_t *line, const uint64_t *mask)
{
    uint64_t missing = 0;
    for (int j = 0; j < BLOCK_WORDS; j++) missing |= mask[j] & ~bk__load64(&line[j]);
    return missing == 0;
}

static inline int classic_test(const uint64_t *w, uint64_t m, uint32_t k, bk_hash h)
{
    uint64_t ok = 1;
    for (uint32_t i = 0; i < k; i++) {
        uint64_t pos = classic_probe(h, i, m);
        ok &= bk__load64(&w[pos >> 6]) >> (pos & 63);
        if ((i & 3) == 3 && !(ok & 1)) return 0;
    }
    return (int)(ok & 1);
}

static inline void set_bit(uint64_t *word, uint64_t bit)
{
    if (!(bk__load64(word) & bit)) bk__fetch_or64(word, bit);
}

/* Add h to stage s. Concurrent (single 0): each word that misses bits
 * gets an atomic OR. Single-writer: plain ORs, which let the cache misses
 * of consecutive adds overlap (an atomic is a full barrier on x86). */
static void stage_add(stage *s, bk_hash h, int single)
{
    uint64_t shape = s->shape;
    uint32_t k = shape_k(shape);
    uint64_t *w = stage_words(s);
    if (shape_classic(shape)) {
        uint64_t m = shape_units(shape);
        if (single) {
            for (uint32_t i = 0; i < k; i++) {
                uint64_t pos = classic_probe(h, i, m);
                w[pos >> 6] |= UINT64_C(1) << (pos & 63);
            }
            return;
        }
        /* All k words are read first, so that their cache misses overlap;
         * then the atomic ORs find their lines in the cache. In groups of
         * 8, the most kept at once. */
        for (uint32_t i0 = 0; i0 < k; i0 += 8) {
            uint32_t n = k - i0 < 8 ? k - i0 : 8;
            uint64_t pos[8], seen[8];
            for (uint32_t j = 0; j < n; j++) {
                pos[j] = classic_probe(h, i0 + j, m);
                seen[j] = bk__load64(&w[pos[j] >> 6]);
            }
            for (uint32_t j = 0; j < n; j++) {
                uint64_t bit = UINT64_C(1) << (pos[j] & 63);
                if (!(seen[j] & bit)) set_bit(&w[pos[j] >> 6], bit);
            }
        }
        return;
    }
    uint64_t *line = w + bk__fastrange64(h.lo, shape_units(shape)) * BLOCK_WORDS;
    uint64_t mask[BLOCK_WORDS];
    build_mask((uint32_t)h.hi, k, mask);
    for (int j = 0; j < BLOCK_WORDS; j++) {
        if (single) line[j] |= mask[j];
        else if (mask[j] && (bk__load64(&line[j]) & mask[j]) != mask[j])
            bk__fetch_or64(&line[j], mask[j]);
    }
}

/* Bits set, estimated keys and the current rate of a stage. */
typedef struct census {
    uint64_t bits_set;
    double estimated_items;
    double fpr_now;
} census;

static census stage_census(const stage *s)
{
    census c = {0, 0.0, 0.0};
    uint64_t shape = s->shape, units = shape_units(shape);
    uint32_t k = shape_k(shape);
    const uint64_t *w = stage_words(s);
    if (shape_classic(shape)) {
        uint64_t words = (units + 63) / 64;
        for (uint64_t j = 0; j < words; j++) c.bits_set += bk__popcount64(bk__load64(&w[j]));
        double fill = (double)c.bits_set / (double)units;
        c.estimated_items = fill >= 1.0 ? INFINITY
                                        : -((double)units / k) * log1p(-fill);
        c.fpr_now = pow(fill, (double)k);
        return c;
    }
    for (uint64_t b = 0; b < units; b++) {
        uint64_t t = 0;
        for (int j = 0; j < BLOCK_WORDS; j++)
            t += bk__popcount64(bk__load64(&w[b * BLOCK_WORDS + j]));
        c.bits_set += t;
        c.estimated_items += t >= BLOCK_BITS ? INFINITY
                                             : -((double)BLOCK_BITS / k) *
                                                   log1p(-(double)t / BLOCK_BITS);
        c.fpr_now += pow((double)t / BLOCK_BITS, (double)k);
    }
    c.fpr_now /= (double)units;
    return c;
}

/*==========================================================================
 * Internals: lookups and adds
 *==========================================================================*/

/* Test stages n-1 .. 0 of h, at[i] being stage i's line (blocked): 1 when
 * one has every bit. Scalar: the key's 512-bit mask, built once per k,
 * compared with each line without branches on the data. */
static int test_stages(const stage *const *st, const uint64_t *const *at, uint32_t n,
                       bk_hash h)
{
    uint64_t mask[BLOCK_WORDS];
    uint32_t mask_k = 0;
    for (uint32_t i = n; i-- > 0;) {
        uint64_t shape = st[i]->shape;
        int hit;
        if (shape_classic(shape)) {
            hit = classic_test(stage_words(st[i]), shape_units(shape), shape_k(shape), h);
        } else {
            if (shape_k(shape) != mask_k) {
                mask_k = shape_k(shape);
                build_mask((uint32_t)h.hi, mask_k, mask);
            }
            hit = line_has(at[i], mask);
        }
        if (hit) return 1;
    }
    return 0;
}

#if SCALABLE_AVX512
/* The same with AVX-512: the 16 in-block positions of the key in 32-bit
 * lanes, computed once; per stage each lane's word of the line is brought
 * in with one permute, shifted and tested, and the first k lanes must all
 * be set (RocksDB's FastLocalBloom tests its probes this way). Bit pos of
 * a block is bit pos % 32 of its 32-bit word pos / 32 on this
 * little-endian CPU, the layout's numbering. */
__attribute__((target("avx512f"))) static int test_stages_avx512(
    const stage *const *st, const uint64_t *const *at, uint32_t n, bk_hash h)
{
    __m512i salts = _mm512_loadu_si512((const void *)SALT);
    __m512i pos = _mm512_srli_epi32(
        _mm512_mullo_epi32(_mm512_set1_epi32((int)(uint32_t)h.hi), salts), 23);
    __m512i idx = _mm512_srli_epi32(pos, 5);
    __m512i sh = _mm512_and_si512(pos, _mm512_set1_epi32(31));
    __m512i one = _mm512_set1_epi32(1);
    for (uint32_t i = n; i-- > 0;) {
        uint64_t shape = st[i]->shape;
        if (shape_classic(shape)) {
            if (classic_test(stage_words(st[i]), shape_units(shape), shape_k(shape), h))
                return 1;
            continue;
        }
        __m512i w = _mm512_permutexvar_epi32(idx, _mm512_loadu_si512((const void *)at[i]));
        __mmask16 set = _mm512_test_epi32_mask(_mm512_srlv_epi32(w, sh), one);
        __mmask16 need = (__mmask16)((1u << shape_k(shape)) - 1);
        if ((set & need) == need) return 1;
    }
    return 0;
}
#endif

static inline int test_all(const stage *const *st, const uint64_t *const *at, uint32_t n,
                           bk_hash h, int simd)
{
#if SCALABLE_AVX512
    if (simd) return test_stages_avx512(st, at, n, h);
#else
    (void)simd;
#endif
    return test_stages(st, at, n, h);
}

/* Tests force the scalar path with bk__scalable_simd(0). */
static int simd_allowed = 1;

BK_HIDDEN int bk__scalable_simd(int allowed)
{
    int was = __atomic_load_n(&simd_allowed, __ATOMIC_RELAXED);
    __atomic_store_n(&simd_allowed, allowed, __ATOMIC_RELAXED);
    return was;
}

static inline int use_simd(void)
{
#if SCALABLE_AVX512
    return __atomic_load_n(&simd_allowed, __ATOMIC_RELAXED) && have_avx512();
#else
    return 0;
#endif
}

/* Stages 0 ... n-1 into st (stage 0 lives in the handle). */
static void load_stages(const bk_scalable *f, uint32_t n, const stage **st)
{
    st[0] = &f->first;
    if (n > 1) {
        stage_dir *d = load_dir(f);
        for (uint32_t i = 1; i < n; i++) st[i] = __atomic_load_n(&d->slot[i], __ATOMIC_ACQUIRE);
    }
}

/* Every stage's line (blocked) or first probe's word (classic) is located
 * and prefetched, then the stages are tested newest first. */
static int contains_in(const bk_scalable *f, uint32_t n, bk_hash h)
{
    const stage *st[BK_SCALABLE_MAX_STAGES];
    const uint64_t *at[BK_SCALABLE_MAX_STAGES];
    load_stages(f, n, st);
    for (uint32_t i = 0; i < n; i++) {
        at[i] = first_line(st[i], h);
        BK_PREFETCH_READ(at[i]);
    }
    return test_all(st, at, n, h, use_simd());
}

static int contains_hash(const bk_scalable *f, bk_hash h)
{
    return contains_in(f, load_nstages(f), h);
}

/* Bytes the filter holds: the handle with stage 0's bits, each later
 * stage's allocation and the directories growth made (4, 8, ... slots, the
 * smaller ones retired but kept). Exact for a filter built by adds; a
 * loaded filter reports the same figure for the same stages (it holds
 * the file's payload block instead of one allocation per stage), so Size
 * does not change across a save and a reload. */
static size_t total_bytes(const bk_scalable *f)
{
    uint64_t total = sizeof(*f) + shape_bytes(f->first.shape);
    uint32_t n = load_nstages(f);
    for (uint32_t i = 1; i < n; i++)
        total += shape_bytes(load_stage(f, i)->shape) + STAGE_SLACK;
    for (uint32_t cap = 4; n > 1; cap *= 2) {
        total += dir_bytes(cap > BK_SCALABLE_MAX_STAGES ? BK_SCALABLE_MAX_STAGES : cap);
        if (cap >= n || cap >= BK_SCALABLE_MAX_STAGES) break;
    }
    return total > SIZE_MAX ? SIZE_MAX : (size_t)total;
}

/* Make the directory hold slot n (n = the published count). */
static int ensure_dir(bk_scalable *f, uint32_t n)
{
    for (;;) {
        stage_dir *d = load_dir(f);
        if (d != NULL && d->cap > n) return BK_OK;
        uint32_t cap = d ? 2 * d->cap : 4;
        if (cap > BK_SCALABLE_MAX_STAGES) cap = BK_SCALABLE_MAX_STAGES;
        stage_dir *nd = bk__calloc(1, (size_t)dir_bytes(cap));
        if (nd == NULL) return BK_ENOMEM;
        nd->cap = cap;
        nd->retired = d;
        nd->slot[0] = &f->first;
        /* a directory is replaced only when full: all its slots are set */
        for (uint32_t i = 1; d != NULL && i < d->cap; i++)
            nd->slot[i] = __atomic_load_n(&d->slot[i], __ATOMIC_ACQUIRE);
        if (__atomic_compare_exchange_n(&f->dir, &d, nd, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return BK_OK;
        bk__free(nd); /* another add replaced it first */
    }
}

/* Make stage n exist, n being the number of stages the caller saw. BK_OK
 * when it exists afterwards (built here or by a racing add). */
static int grow(bk_scalable *f, uint32_t n)
{
    stage *fresh = NULL, *expected = NULL;
    uint64_t capacity, shape;
    int rc;

    if (n >= BK_SCALABLE_MAX_STAGES) return BK_ELIMIT;
    if (load_stage(f, n) != NULL) goto publish; /* a racing add grew it */
    if (n >= __atomic_load_n(&f->max_stages, __ATOMIC_RELAXED)) return BK_ELIMIT;
    rc = stage_capacity(f, n, &capacity);
    if (rc != BK_OK) return rc;
    rc = plan_stage(capacity, stage_rate(f, n), n, &shape);
    if (rc != BK_OK) return rc;
    uint64_t bytes = shape_bytes(shape);
    if (bytes > SIZE_MAX / 2) return BK_ESIZE;
    uint64_t need = bytes + STAGE_SLACK;
    stage_dir *d = load_dir(f);
    if (d == NULL || d->cap <= n) need += dir_bytes(d ? 2 * d->cap : 4);
    size_t cap = load_size(&f->max_bytes);
    size_t used = total_bytes(f);
    if (cap != 0 && (used > cap || need > cap - used)) return BK_ELIMIT;

    fresh = stage_alloc(bytes, shape);
    if (fresh == NULL) return BK_ENOMEM;
    rc = ensure_dir(f, n);
    if (rc != BK_OK) {
        stage_free(fresh);
        return rc;
    }
    d = load_dir(f);
    if (!__atomic_compare_exchange_n(&d->slot[n], &expected, fresh, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        stage_free(fresh); /* another add installed stage n first */
publish:;
    uint32_t seen = n;
    uint8_t want = (uint8_t)seen;
    __atomic_compare_exchange_n(&f->nstages, &want, (uint8_t)(n + 1), 0,
                                __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    return BK_OK;
}

/* may_grow 0: a new key that needs a new stage gets BK_EFULL instead. */
static int add_hash(bk_scalable *f, bk_hash h, int may_grow)
{
    uint32_t n = load_nstages(f);
    if (contains_in(f, n, h)) return 0;

    /* New: find (or make) a newest stage with room. Stages that appeared
     * since the scan above were empty when it started or took keys added
     * concurrently; RedisBloom checks only the stages it saw, as we do. */
    stage *cur;
    for (;;) {
        cur = load_stage(f, n - 1);
        uint64_t capacity = 0;
        stage_capacity(f, n - 1, &capacity); /* it exists: no overflow */
        if (stage_items(cur) < capacity) break;
        if ((f->flags & BK_SCALABLE_NONSCALING) || !may_grow) return BK_EFULL;
        int rc = grow(f, n);
        if (rc != BK_OK) return rc;
        n = load_nstages(f);
    }
    stage_add(cur, h, f->single_writer);
    if (f->single_writer) cur->items++;
    else __atomic_fetch_add(&cur->items, 1, __ATOMIC_RELAXED);
    return 1;
}

/*==========================================================================
 * API: life cycle
 *==========================================================================*/

static int check_create(uint64_t capacity, double error, uint32_t expansion,
                        unsigned flags)
{
    if (capacity == 0) return BK_ECAPACITY;
    if (bk__check_fpr(error) != BK_OK) return BK_EFPR;
    if (expansion == 0 || expansion > BK_SCALABLE_MAX_EXPANSION) return BK_EPARAM;
    if (flags & ~PUBLIC_FLAGS) return BK_EPARAM;
    return BK_OK;
}

int bk_scalable_estimate_bytes(uint64_t capacity, double error, unsigned flags,
                               size_t *bytes)
{
    uint64_t shape;
    if (bytes == NULL) return BK_EINVAL;
    *bytes = 0;
    int rc = check_create(capacity, error, 1, flags);
    if (rc != BK_OK) return rc;
    rc = plan_stage(capacity, first_rate(error, flags), 0, &shape);
    if (rc != BK_OK) return rc;
    if (shape_bytes(shape) > SIZE_MAX / 2) return BK_ESIZE;
    *bytes = sizeof(bk_scalable) + (size_t)shape_bytes(shape);
    return BK_OK;
}

int bk_scalable_create(bk_scalable **out, uint64_t capacity, double error,
                       uint32_t expansion, unsigned flags, uint64_t seed)
{
    uint64_t shape;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    int rc = check_create(capacity, error, expansion, flags);
    if (rc != BK_OK) return rc;
    rc = plan_stage(capacity, first_rate(error, flags), 0, &shape);
    if (rc != BK_OK) return rc;
    uint64_t bytes = shape_bytes(shape);
    if (bytes > SIZE_MAX / 2) return BK_ESIZE;

    bk_scalable *f = bk__calloc(1, sizeof(*f) + (size_t)bytes);
    if (f == NULL) return BK_ENOMEM;
    bk__advise_huge(f + 1, (size_t)bytes);
    bk__object_init(&f->obj, &scalable_ops);
    f->max_stages = (flags & BK_SCALABLE_NONSCALING) ? 1 : BK_SCALABLE_MAX_STAGES;
    f->seed = seed;
    f->capacity = capacity;
    f->error = error;
    f->expansion = (uint16_t)expansion;
    f->flags = (uint8_t)flags;
    f->first.shape = shape;
    f->nstages = 1;
    *out = f;
    return BK_OK;
}

static void free_stages(bk_scalable *f, uint32_t from)
{
    stage_dir *d = f->dir;
    if (d == NULL) return;
    for (uint32_t i = from; i < d->cap; i++) {
        stage_free(d->slot[i]);
        d->slot[i] = NULL;
    }
}

static void free_dirs(bk_scalable *f)
{
    stage_dir *d = f->dir;
    while (d != NULL) {
        stage_dir *next = d->retired;
        bk__free(d);
        d = next;
    }
    f->dir = NULL;
}

void bk_scalable_free(bk_scalable *f)
{
    if (f == NULL) return;
    free_stages(f, 1);
    free_dirs(f);
    bk__object_release(&f->obj);
    bk__free(f);
}

void bk_scalable_clear(bk_scalable *f)
{
    if (f == NULL) return;
    free_stages(f, 1);
    free_dirs(f);
    f->nstages = 1;
    memset(stage_words(&f->first), 0, (size_t)shape_bytes(f->first.shape));
    f->first.items = 0;
}

int bk_scalable_set_max_bytes(bk_scalable *f, size_t max_bytes)
{
    if (f == NULL) return BK_EINVAL;
    __atomic_store_n(&f->max_bytes, max_bytes, __ATOMIC_RELAXED);
    return BK_OK;
}

size_t bk_scalable_max_bytes(const bk_scalable *f)
{
    return load_size(&f->max_bytes);
}

int bk_scalable_set_max_stages(bk_scalable *f, uint32_t max_stages)
{
    if (f == NULL) return BK_EINVAL;
    if (max_stages == 0 || max_stages > BK_SCALABLE_MAX_STAGES) return BK_EPARAM;
    if (f->flags & BK_SCALABLE_NONSCALING) return BK_OK; /* always one */
    __atomic_store_n(&f->max_stages, (uint8_t)max_stages, __ATOMIC_RELAXED);
    return BK_OK;
}

uint32_t bk_scalable_max_stages(const bk_scalable *f)
{
    return __atomic_load_n(&f->max_stages, __ATOMIC_RELAXED);
}

/*==========================================================================
 * API: keys
 *==========================================================================*/

int bk_scalable_add_hash(bk_scalable *f, bk_hash h)
{
    if (f == NULL) return BK_EINVAL;
    return add_hash(f, h, 1);
}

int bk_scalable_contains_hash(const bk_scalable *f, bk_hash h)
{
    if (f == NULL) return 0;
    return contains_hash(f, h);
}

int bk_scalable_add(bk_scalable *f, const void *key, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    return add_hash(f, bk__hash(key, len, f->seed), 1);
}

int bk_scalable_add_nogrow(bk_scalable *f, const void *key, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    return add_hash(f, bk__hash(key, len, f->seed), 0);
}

int bk_scalable_contains(const bk_scalable *f, const void *key, size_t len)
{
    if (f == NULL) return 0;
    return contains_hash(f, bk__hash(key, len, f->seed));
}

int64_t bk_scalable_add_batch(bk_scalable *f, const void *const *keys,
                              const size_t *lens, size_t n, int *results)
{
    int64_t added = 0;
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    for (size_t i = 0; i < n; i++) {
        int r = add_hash(f, bk__hash(keys[i], lens[i], f->seed), 1);
        if (r == 1) added++;
        if (results != NULL) results[i] = r;
    }
    return added;
}

int64_t bk_scalable_add_nogrow_batch(bk_scalable *f, const void *const *keys,
                                     const size_t *lens, size_t n, int *results)
{
    const stage *st[BK_SCALABLE_MAX_STAGES];
    bk_hash ring[BATCH_AHEAD];
    if (f == NULL || results == NULL || (n > 0 && (keys == NULL || lens == NULL)))
        return BK_EINVAL;
    /* the stages as they are now: only for prefetching (a stage added
     * meanwhile is found by the adds themselves) */
    uint32_t ns = load_nstages(f);
    load_stages(f, ns, st);
    size_t ahead = n < BATCH_AHEAD ? n : BATCH_AHEAD;
    for (size_t i = 0; i < ahead; i++) {
        ring[i] = bk__hash(keys[i], lens[i], f->seed);
        for (uint32_t s = 0; s < ns; s++) prefetch_stage(st[s], ring[i]);
    }
    for (size_t i = 0; i < n; i++) {
        size_t slot = i % BATCH_AHEAD;
        int r = add_hash(f, ring[slot], 0);
        if (r < 0) return (int64_t)i;
        results[i] = r;
        size_t next = i + BATCH_AHEAD;
        if (next < n) {
            ring[slot] = bk__hash(keys[next], lens[next], f->seed);
            for (uint32_t s = 0; s < ns; s++) prefetch_stage(st[s], ring[slot]);
        }
    }
    return (int64_t)n;
}

/* Keys are hashed BATCH_AHEAD ahead and their lines in every stage are
 * prefetched then, so the misses of several keys and stages overlap. */
int64_t bk_scalable_contains_batch(const bk_scalable *f,
                                   const void *const *keys, const size_t *lens,
                                   size_t n, uint8_t *results)
{
    const stage *st[BK_SCALABLE_MAX_STAGES];
    bk_hash ring[BATCH_AHEAD];
    const uint64_t *at[BATCH_AHEAD][BK_SCALABLE_MAX_STAGES]; /* lines located ahead */
    int64_t found = 0;
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    uint32_t ns = load_nstages(f);
    load_stages(f, ns, st);
    int simd = use_simd();
    size_t ahead = n < BATCH_AHEAD ? n : BATCH_AHEAD;
    for (size_t i = 0; i < ahead; i++) {
        ring[i] = bk__hash(keys[i], lens[i], f->seed);
        for (uint32_t s = 0; s < ns; s++) {
            at[i][s] = first_line(st[s], ring[i]);
            prefetch_stage(st[s], ring[i]);
        }
    }
    for (size_t i = 0; i < n; i++) {
        size_t slot = i % BATCH_AHEAD;
        int r = test_all(st, at[slot], ns, ring[slot], simd);
        found += r;
        if (results != NULL) results[i] = (uint8_t)r;
        size_t next = i + BATCH_AHEAD;
        if (next < n) {
            ring[slot] = bk__hash(keys[next], lens[next], f->seed);
            for (uint32_t s = 0; s < ns; s++) {
                at[slot][s] = first_line(st[s], ring[slot]);
                prefetch_stage(st[s], ring[slot]);
            }
        }
    }
    return found;
}

/*==========================================================================
 * API: statistics
 *==========================================================================*/

uint64_t bk_scalable_seed(const bk_scalable *f) { return f->seed; }
uint32_t bk_scalable_stages(const bk_scalable *f) { return load_nstages(f); }
double bk_scalable_error(const bk_scalable *f) { return f->error; }
size_t bk_scalable_bytes(const bk_scalable *f) { return total_bytes(f); }

uint64_t bk_scalable_items(const bk_scalable *f)
{
    uint64_t total = 0;
    uint32_t n = load_nstages(f);
    for (uint32_t i = 0; i < n; i++) total += stage_items(load_stage(f, i));
    return total;
}

int bk_scalable_set_tightening(bk_scalable *f, double r)
{
    if (f == NULL) return BK_EINVAL;
    if (!(r > 0.0 && r < 1.0)) return BK_EPARAM;
    double q = floor(r * 65536.0 + 0.5);
    if (q < 1) q = 1;
    if (q > 65535) q = 65535;
    if (f->flags & F_LEGACY) return BK_ENOTSUP;
    if (load_nstages(f) > 1) return BK_EINVAL; /* stage 1's rate is set */
    /* the default stays the default: 0.9 is no multiple of 1/65536 */
    f->ratio_q = fabs(r - RATIO) < 1.0 / 131072.0 ? 0 : (uint16_t)q;
    return BK_OK;
}

double bk_scalable_tightening(const bk_scalable *f)
{
    if (f == NULL) return 0;
    return (f->flags & F_LEGACY) ? LEGACY_RATIO : ratio_of(f);
}

uint32_t bk_scalable_expansion(const bk_scalable *f)
{
    return (f->flags & BK_SCALABLE_NONSCALING) ? 0 : f->expansion;
}

uint64_t bk_scalable_capacity(const bk_scalable *f)
{
    uint64_t total = 0;
    uint32_t n = load_nstages(f);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t c = UINT64_MAX;
        stage_capacity(f, i, &c);
        total = total > UINT64_MAX - c ? UINT64_MAX : total + c;
    }
    return total;
}

int bk_scalable_get_stage_stats(const bk_scalable *f, uint32_t i,
                                bk_scalable_stage_stats *out)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    if (i >= load_nstages(f)) return BK_EPARAM;
    const stage *s = load_stage(f, i);
    census c = stage_census(s);
    memset(out, 0, sizeof(*out));
    stage_capacity(f, i, &out->capacity);
    out->target_fpr = stage_rate(f, i);
    out->items = stage_items(s);
    out->bits = shape_bits(s->shape);
    out->hashes = shape_k(s->shape);
    out->fill = (double)c.bits_set / (double)out->bits;
    out->estimated_items = c.estimated_items;
    out->fpr_now = c.fpr_now;
    out->bytes = (size_t)shape_bytes(s->shape) + (i == 0 ? 0 : STAGE_SLACK);
    return BK_OK;
}

/* The statistics, and the fill of all stages together (bits set / bits). */
static int collect_stats(const bk_scalable *f, bk_scalable_stats *out,
                         double *fill)
{
    memset(out, 0, sizeof(*out));
    out->seed = f->seed;
    out->initial_capacity = f->capacity;
    out->error = f->error;
    out->expansion = bk_scalable_expansion(f);
    out->nonscaling = (f->flags & BK_SCALABLE_NONSCALING) != 0;
    out->bounded = (f->flags & BK_SCALABLE_BOUNDED) != 0;
    out->max_stages = bk_scalable_max_stages(f);
    out->max_bytes = bk_scalable_max_bytes(f);
    out->items = bk_scalable_items(f);
    out->bytes = bk_scalable_bytes(f);
    double p0 = first_rate(f->error, f->flags);
    if (out->nonscaling) out->fpr_limit = p0;
    else if (f->flags & F_LEGACY) out->fpr_limit = p0 / (1.0 - LEGACY_RATIO);
    else out->fpr_limit = p0 + ((f->flags & BK_SCALABLE_BOUNDED) ? f->error / 2 : f->error);

    /* Products of (1 - p) as sums of log1p(-p): exact for tiny rates. */
    double log_miss_bound = 0.0, log_miss_now = 0.0, bits_set = 0.0;
    uint64_t bits = 0;
    uint32_t n = load_nstages(f);
    for (uint32_t i = 0; i < n; i++) {
        bk_scalable_stage_stats st;
        int rc = bk_scalable_get_stage_stats(f, i, &st);
        if (rc != BK_OK) return rc;
        out->capacity = out->capacity > UINT64_MAX - st.capacity
                            ? UINT64_MAX
                            : out->capacity + st.capacity;
        out->estimated_items += st.estimated_items;
        log_miss_bound += log1p(-st.target_fpr);
        log_miss_now += log1p(-st.fpr_now);
        bits += st.bits;
        bits_set += st.fill * (double)st.bits;
    }
    out->stages = n;
    out->fpr_bound = -expm1(log_miss_bound);
    out->fpr_now = -expm1(log_miss_now);
    *fill = bits ? bits_set / (double)bits : 0.0;
    return BK_OK;
}

int bk_scalable_get_stats(const bk_scalable *f, bk_scalable_stats *out)
{
    double fill;
    if (f == NULL || out == NULL) return BK_EINVAL;
    return collect_stats(f, out, &fill);
}

/*==========================================================================
 * The generic filter and the file format
 *
 * Image: one part per stage; header: capacity n_0, fpr = the error asked
 * for, items, param[0] = expansion, param[1] = the stage cap, param[2] =
 * the memory cap, param[3] = the ratio r as binary64 bits (0: the legacy
 * schedule), flags = BK_SCALABLE_* flags. A part is a blocked filter's part
 * (param = 512, m = bits, k) or a classic filter's (param = 1: "blocks of
 * one bit", m = bits, k, payload ceil(m / 64) words with the bits past m
 * zero); its capacity, fpr and items are the stage's own. Restore checks
 * that the stages follow the growth rule. Clone goes through the format
 * (filter.c); merge is stage by stage and needs identical stages.
 *==========================================================================*/

BK__FAMILY_CASTS(scalable, scalable_ops)

static int ops_create(const bk_filter_config *cfg, void **out)
{
    bk_scalable *f;
    uint32_t expansion = cfg->expansion ? cfg->expansion
                                        : BK_SCALABLE_DEFAULT_EXPANSION;
    /* The generic constructor keeps the compound rate under the rate asked
     * for (BK_SCALABLE_BOUNDED): a filter answers for the fpr it was given. */
    unsigned flags = BK_SCALABLE_BOUNDED | (cfg->nonscaling ? BK_SCALABLE_NONSCALING : 0);
    int rc = bk_scalable_create(&f, cfg->capacity, cfg->fpr, expansion, flags,
                                cfg->seed);
    if (rc == BK_OK) *out = f;
    return rc;
}

static int64_t ops_contains_batch(const void *f, const void *const *keys,
                                  const size_t *lens, size_t n,
                                  uint8_t *results)
{
    return bk_scalable_contains_batch(f, keys, lens, n, results);
}

static void ops_clear(void *f) { bk_scalable_clear(f); }
static int ops_add(void *f, bk_hash h) { return add_hash(f, h, 1); }
static int ops_contains(const void *f, bk_hash h) { return contains_hash(f, h); }
BK__OPS_SEED_DESTROY(scalable)

static int ops_info(const void *vf, bk_filter_info *out)
{
    bk_scalable_stats st;
    double fill;
    int rc = collect_stats(vf, &st, &fill);
    if (rc != BK_OK) return rc;
    out->seed = st.seed;
    out->capacity = st.capacity;
    out->target_fpr = st.error;
    out->items = st.items;
    out->estimated_items = st.estimated_items;
    out->fpr_now = st.fpr_now;
    out->fpr_at_capacity = st.fpr_bound;
    out->fill = fill;
    out->bytes = st.bytes;
    out->parts = st.stages;
    out->single_writer = ((const bk_scalable *)vf)->single_writer;
    return BK_OK;
}

int bk_scalable_set_single_writer(bk_scalable *f, int single_writer)
{
    if (f == NULL) return BK_EINVAL;
    f->single_writer = single_writer != 0;
    return BK_OK;
}

int bk_scalable_single_writer(const bk_scalable *f)
{
    return f != NULL && f->single_writer;
}

static void ops_set_single_writer(void *f, int single_writer)
{
    bk_scalable_set_single_writer(f, single_writer);
}

static uint32_t ops_nparts(const void *f) { return load_nstages(f); }

static uint64_t ratio_bits(double r)
{
    uint64_t u;
    memcpy(&u, &r, sizeof(u));
    return u;
}

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_scalable *f = vf;
    if (img->nparts != load_nstages(f)) return BK_EINVAL;
    img->seed = f->seed;
    img->capacity = f->capacity;
    img->fpr = f->error;
    img->items = bk_scalable_items(f);
    img->param[0] = f->expansion;
    img->param[1] = f->max_stages;
    img->param[2] = f->max_bytes;
    img->param[3] = (f->flags & F_LEGACY) ? 0 : ratio_bits(ratio_of(f));
    img->flags = f->flags & PUBLIC_FLAGS;
    for (uint32_t i = 0; i < img->nparts; i++) {
        const stage *st = load_stage(f, i);
        bk__part *p = &img->parts[i];
        p->m = shape_bits(st->shape);
        p->k = shape_k(st->shape);
        p->param = shape_classic(st->shape) ? 1 : BLOCK_BITS;
        stage_capacity(f, i, &p->capacity);
        p->fpr = stage_rate(f, i);
        p->items = stage_items(st);
        p->data = stage_words(st);
        p->length = shape_bytes(st->shape);
    }
    return BK_OK;
}

/* Stage rates are computed with pow: equal up to rounding, which may
 * differ in the last bits between machines. */
static int same_rate(double a, double b)
{
    return fabs(a - b) <= 1e-12 * fabs(b);
}

/* The shape of a stored part, or 0 when the part is not a valid stage. */
static uint64_t part_shape(const bk__part *p, int legacy)
{
    /* stages have no part flags (a blocked part's flag 1 would be the
     * split layout, which stages never use) */
    if (p->flags != 0) return 0;
    if (p->param == BLOCK_BITS) {
        if (p->m == 0 || p->m % BLOCK_BITS != 0 || p->m / BLOCK_BITS > (UINT64_C(1) << 40))
            return 0;
        if (p->k == 0 || p->k > BLOCKED_MAX_HASHES) return 0;
        if (p->length != p->m / 8) return 0;
        return make_shape(p->m / BLOCK_BITS, p->k, SH_POINTER);
    }
    if (p->param == 1 && !legacy) {
        if (p->m == 0 || p->m > BK_MAX_BITS) return 0;
        if (p->k == 0 || p->k > CLASSIC_MAX_HASHES) return 0;
        if (p->length != (p->m + 63) / 64 * 8) return 0;
        if (p->m % 64) { /* bits past m are never set */
            const unsigned char *last = (const unsigned char *)p->data + p->length - 8;
            for (unsigned b = (unsigned)(p->m % 64); b < 64; b++)
                if (last[b / 8] >> (b % 8) & 1) return 0;
        }
        return make_shape(p->m, p->k, SH_CLASSIC | SH_POINTER);
    }
    return 0;
}

static int ops_restore(const bk__image *img, void **out)
{
    bk_scalable *f = NULL;
    int rc = BK_ECORRUPT;
    int legacy = img->param[3] == 0;
    /* the ratio: RATIO, or one bk_scalable_set_tightening can have set
     * (a multiple of 1 / 65536 in (0, 1)) */
    uint16_t ratio_q = 0;
    if (!legacy && img->param[3] != ratio_bits(RATIO)) {
        double r;
        uint64_t bits = img->param[3];
        memcpy(&r, &bits, sizeof(r));
        if (!(r > 0.0 && r < 1.0) || r * 65536.0 != floor(r * 65536.0)) return BK_ECORRUPT;
        ratio_q = (uint16_t)(r * 65536.0);
    }
    if (img->nparts == 0 || img->nparts > BK_SCALABLE_MAX_STAGES) return BK_ECORRUPT;
    if (img->capacity == 0 || !(img->fpr > 0.0 && img->fpr < 1.0)) return BK_ECORRUPT;
    if (img->param[0] == 0 || img->param[0] > BK_SCALABLE_MAX_EXPANSION) return BK_ECORRUPT;
    if (img->param[1] == 0 || img->param[1] > BK_SCALABLE_MAX_STAGES ||
        img->nparts > img->param[1] || img->param[2] > SIZE_MAX)
        return BK_ECORRUPT;
    if (img->flags & ~(uint64_t)PUBLIC_FLAGS) return BK_ECORRUPT;
    if ((img->flags & BK_SCALABLE_NONSCALING) && img->param[1] != 1) return BK_ECORRUPT;

    f = bk__calloc(1, sizeof(*f) + sizeof(void *));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &scalable_ops);
    f->seed = img->seed;
    f->capacity = img->capacity;
    f->error = img->fpr;
    f->expansion = (uint16_t)img->param[0];
    f->ratio_q = ratio_q;
    f->max_stages = (uint8_t)img->param[1];
    f->max_bytes = (size_t)img->param[2];
    f->flags = (uint8_t)(img->flags | (legacy ? F_LEGACY : 0));
    f->nstages = 1;
    if (img->nparts > 1) {
        uint32_t cap = 4;
        while (cap < img->nparts) cap *= 2;
        f->dir = bk__calloc(1, (size_t)dir_bytes(cap));
        if (f->dir == NULL) { rc = BK_ENOMEM; goto fail; }
        f->dir->cap = cap;
        f->dir->slot[0] = &f->first;
    }

    uint64_t items = 0;
    for (uint32_t i = 0; i < img->nparts; i++) {
        const bk__part *p = &img->parts[i];
        uint64_t capacity, shape = part_shape(p, legacy);
        rc = BK_ECORRUPT;
        if (shape == 0 || stage_capacity(f, i, &capacity) != BK_OK ||
            p->capacity != capacity || !same_rate(p->fpr, stage_rate(f, i)) ||
            p->items > capacity + 64) /* a few over: concurrent adds */
            goto fail;
        stage *st;
        if (i == 0) {
            st = &f->first;
            st->shape = shape;
        } else {
            st = stage_alloc(0, shape);
            if (st == NULL) { rc = BK_ENOMEM; goto fail; }
            f->dir->slot[i] = st;
        }
        memcpy(st + 1, &p->data, sizeof(void *));
        st->items = p->items;
        f->nstages = (uint8_t)(i + 1);
        items += p->items;
    }
    if (items != img->items) { rc = BK_ECORRUPT; goto fail; }
    *out = f;
    return BK_OK;

fail:
    bk_scalable_free(f);
    return rc;
}

static int ops_incompatibility(const void *va, const void *vb, char *buf, size_t cap)
{
    const bk_scalable *a = va, *b = vb;
    uint32_t na = load_nstages(a), nb = load_nstages(b);
    if (na != nb) {
        snprintf(buf, cap, "stage counts differ: %u vs %u", na, nb);
        return 1;
    }
    for (uint32_t i = 0; i < na; i++) {
        uint64_t x = load_stage(a, i)->shape & ~(uint64_t)SH_POINTER;
        uint64_t y = load_stage(b, i)->shape & ~(uint64_t)SH_POINTER;
        if (x != y) {
            snprintf(buf, cap, "stage %u differs: %s %llu bits, %u hashes vs %s %llu bits, %u hashes",
                     i, shape_classic(x) ? "classic" : "blocked",
                     (unsigned long long)shape_bits(x), shape_k(x),
                     shape_classic(y) ? "classic" : "blocked",
                     (unsigned long long)shape_bits(y), shape_k(y));
            return 1;
        }
    }
    return 0;
}

/* Stage by stage; a stage's count becomes its cardinality estimate. */
static int ops_merge(void *vd, const void *vs, int op)
{
    bk_scalable *d = vd;
    const bk_scalable *s = vs;
    char why[8];
    if (bk_filter_incompatibility((const bk_filter *)d, (const bk_filter *)s, why, sizeof(why)))
        return BK_EINCOMPAT;
    uint32_t n = load_nstages(d);
    for (uint32_t i = 0; i < n; i++) {
        stage *x = load_stage(d, i);
        const stage *y = load_stage(s, i);
        uint64_t *wx = stage_words(x);
        const uint64_t *wy = stage_words(y);
        uint64_t words = shape_bytes(x->shape) / 8;
        for (uint64_t j = 0; j < words; j++) wx[j] = op ? wx[j] & wy[j] : wx[j] | wy[j];
        double e = stage_census(x).estimated_items;
        x->items = e < 9.0e18 ? (uint64_t)(e + 0.5) : UINT64_C(9000000000000000000);
    }
    return BK_OK;
}


/* The handle (with stage 0's bits, or a pointer to them in a loaded
 * block), each later stage's allocation, and every directory (the retired
 * ones too: they are kept until free). */
static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_scalable *f = vf;
    int loaded = (f->first.shape & SH_POINTER) != 0;
    visit(ctx, f, sizeof(*f) + (loaded ? sizeof(void *) : (size_t)shape_bytes(f->first.shape)));
    uint32_t n = load_nstages(f);
    for (uint32_t i = 1; i < n; i++) {
        const stage *s = load_stage(f, i);
        void *raw;
        memcpy(&raw, (const char *)s - sizeof(void *), sizeof(raw));
        size_t room = (s->shape & SH_POINTER) ? sizeof(void *) : (size_t)shape_bytes(s->shape);
        visit(ctx, raw, room + STAGE_SLACK);
    }
    for (const stage_dir *d = load_dir(f); d != NULL; d = d->retired)
        visit(ctx, d, (size_t)dir_bytes(d->cap));
}

static const bk__family_ops scalable_ops = {
    .family = BK_FAMILY_SCALABLE,
    .name = "scalable",
    BK__OPS_STANDARD,
    .contains_batch = ops_contains_batch, .lockfree_add = 1, .clear = ops_clear,
    .set_single_writer = ops_set_single_writer, .merge = ops_merge,
    .incompatibility = ops_incompatibility,
    /* no add_batch: its results cannot carry BK_EFULL / BK_ELIMIT (a loop) */
    /* no clone: one goes through the file format (filter.c) */
};

const bk__family_ops *const bk__scalable_family = &scalable_ops;
