/*
 * bumped.c - the bumped static filter: one cache line per lookup.
 *
 * Structure
 *   Layers of 64-byte lines. A line is w planes of B = 512 / w bits (w = 8:
 *   8 planes of 64 bits; w = 16: 16 planes of 32 bits). Bits 0 .. B-2 of
 *   the planes are the solution of a small system: row r of the line is the
 *   w-bit value made of bit r of each plane. Bit B-1 of plane j is bit j of
 *   the line's threshold t (w bits).
 *
 * A key in a layer
 *   From the layer's 64-bit hash h (layer 0: XXH3-64 of the key with the
 *   seed; layer l+1: remix(h, l+1) of layer l's hash):
 *     line = high half of h * lines        (fast range)
 *     rank = the top 32 bits of the low half of that product, scaled to
 *            [0, 2^w - 1): ((low >> 32) * (2^w - 1)) >> 32
 *     c    = mix(h) >> (65 - B)            (B - 1 coefficient bits)
 *     fp   = h & (2^w - 1)
 *   The key is kept in this layer when rank < t; it then matches when, for
 *   every plane j, parity(c & plane_j) equals bit j of fp. Otherwise it was
 *   bumped: the lookup goes on to the next layer, and a key bumped from the
 *   last layer is absent. t = 2^w - 1 keeps every rank, t = 0 none.
 *
 * Construction
 *   Hash and sort the keys (duplicates removed). Sorted hashes come in line
 *   order, and within a line in rank order (both grow with h). For each
 *   line, insert the keys' rows (c, fp) into a Gaussian elimination one
 *   rank group at a time; the first group that makes the system
 *   inconsistent is taken back, and t becomes its rank: it and every key
 *   after it are bumped. Back-substitution gives the planes (free
 *   variables 0). The bumped hashes are written to the front of the same
 *   array, remixed for the next layer, sorted, and the next layer is built
 *   from them, sized like the first (load keys per line). A layer that
 *   bumps nothing is the last. A line that keeps no key gets t = 0, so an
 *   empty set (one empty line) answers absent.
 *
 * False positives
 *   An absent key is answered in the first layer whose line keeps its
 *   rank, by comparing fp, independent of everything the line holds, with
 *   the parities: probability 2^-w.
 *
 * Why one line
 *   The binary fuse filter (fuse.c) reads three cells in three random
 *   lines; a lookup here reads one line, and a second for the few keys
 *   that rank above their line's threshold. A dense system of B - 1
 *   columns is solvable for up to about B - 3 random rows, so lines sized
 *   for `load` keys (60 of 63 rows at w = 8, 32 of 31 at w = 16: Poisson
 *   loads above the rows are bumped) use 1.12 x w bits per key at w = 8
 *   and 1.14 x at w = 16 (bench/RESULTS.md, bench_static).
 */
#include <math.h>   /* ldexp, ceil */
#include <string.h> /* memset, memcpy, memmove */

#include "filter.h"
#include "hash.h"
#include "peel.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#  include <immintrin.h>
#  define BUMPED_X86 1
#else
#  define BUMPED_X86 0
#endif

#define LINE 64               /* bytes per line */
#define MAX_LAYERS 24         /* a build needing more is retried */
#define LOAD8 60              /* keys per line the layers are sized for, w = 8 */
#define LOAD16 32             /* w = 16 */
#define AHEAD 32              /* batch: keys hashed ahead of their tests */

/*==========================================================================
 * Types
 *==========================================================================*/

struct bk_bumped {
    bk__object obj;            /* first: a bk_bumped is also a bk_filter */
    uint32_t width;            /* fingerprint bits: 8 or 16 */
    uint32_t layers;
    const unsigned char *t[MAX_LAYERS]; /* each layer's lines */
    uint64_t lines[MAX_LAYERS];
    uint64_t stored[MAX_LAYERS];/* keys kept in each layer */
    bk__xxh64_keys keys;       /* the seed's share of the key hash */
    uint64_t seed;
    uint32_t load;             /* keys per line the layers were sized for */
    int owns_lines;            /* 0 when they live in a loaded block or mapping */
    uint64_t items;            /* distinct keys */
    uint64_t duplicates;       /* dropped at construction */
    uint32_t attempts;         /* construction attempts (0 when loaded) */
    uint64_t temp_bytes;       /* construction's temporary memory */
};

static const bk__family_ops bumped_ops; /* at the end of this file */

/*==========================================================================
 * Internals: a key in a layer
 *==========================================================================*/

/* A bijective 64-bit mix (the splitmix64 finalizer). */
static inline uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* The hash of a key in layer l + 1 from its hash in layer l (bijective:
 * distinct keys stay distinct). */
static inline uint64_t remix(uint64_t h, uint32_t layer)
{
    return mix(h ^ ((uint64_t)layer * UINT64_C(0x9E3779B97F4A7C15)));
}

static inline uint32_t rows_of(uint32_t w) { return 512 / w - 1; }
static inline uint32_t all_of(uint32_t w) { return (UINT32_C(1) << w) - 1; }

typedef struct where {
    uint64_t line;
    uint32_t rank;
} where;

static inline where where_of(uint64_t h, uint64_t lines, uint32_t w)
{
    unsigned __int128 p = (unsigned __int128)h * lines;
    where x;
    x.line = (uint64_t)(p >> 64);
    x.rank = (uint32_t)((((uint64_t)p >> 32) * all_of(w)) >> 32);
    return x;
}

static inline uint64_t coeffs_of(uint64_t h, uint32_t w)
{
    return mix(h) >> (65 - 512 / w);
}

__attribute__((always_inline)) static inline uint64_t hash_key(const bk_bumped *f,
                                                              const void *key, size_t len)
{
    return len <= BK__XXH64_SHORT ? bk__xxh64_keyed(&f->keys, key, len)
                                  : bk__xxh64(key, len, f->seed);
}

/*==========================================================================
 * Internals: testing a line
 *
 * test8 / test16 return the line's threshold in the high half and the
 * parities of c against its planes in the low half. Three versions: plain
 * C, the same with the POPCNT instruction, and AVX-512 (VPOPCNTDQ: one
 * AND, one population count and one test for all planes). Tests compare
 * them; bk__bumped_simd forces a level.
 *==========================================================================*/

static inline uint64_t load64(const unsigned char *x, int j)
{
    uint64_t v;
    memcpy(&v, x + 8 * j, 8);
    return v;
}

static inline uint32_t load32(const unsigned char *x, int j)
{
    uint32_t v;
    memcpy(&v, x + 4 * j, 4);
    return v;
}

__attribute__((always_inline)) static inline uint64_t test8_c(const unsigned char *x, uint64_t c)
{
    uint32_t t = 0, r = 0;
    for (int j = 0; j < 8; j++) {
        uint64_t v = load64(x, j);
        t |= (uint32_t)(v >> 63) << j;
        r |= (uint32_t)(__builtin_popcountll(v & c) & 1) << j;
    }
    return (uint64_t)t << 32 | r;
}

__attribute__((always_inline)) static inline uint64_t test16_c(const unsigned char *x, uint64_t c)
{
    uint32_t t = 0, r = 0;
    for (int j = 0; j < 16; j++) {
        uint32_t v = load32(x, j);
        t |= (v >> 31) << j;
        r |= (uint32_t)(__builtin_popcount(v & (uint32_t)c) & 1) << j;
    }
    return (uint64_t)t << 32 | r;
}

#if BUMPED_X86
#  define AVX512_TARGET __attribute__((target("avx512f,avx512dq,avx512vpopcntdq")))
AVX512_TARGET static inline uint64_t
test8_avx512(const unsigned char *x, uint64_t c)
{
    __m512i v = _mm512_loadu_si512((const void *)x);
    __m512i pc = _mm512_popcnt_epi64(_mm512_and_si512(v, _mm512_set1_epi64((long long)c)));
    uint32_t r = _mm512_test_epi64_mask(pc, _mm512_set1_epi64(1));
    uint32_t t = _mm512_movepi64_mask(v);
    return (uint64_t)t << 32 | r;
}

AVX512_TARGET static inline uint64_t
test16_avx512(const unsigned char *x, uint64_t c)
{
    __m512i v = _mm512_loadu_si512((const void *)x);
    __m512i pc = _mm512_popcnt_epi32(_mm512_and_si512(v, _mm512_set1_epi32((int)c)));
    uint32_t r = _mm512_test_epi32_mask(pc, _mm512_set1_epi32(1));
    uint32_t t = _mm512_movepi32_mask(v);
    return (uint64_t)t << 32 | r;
}
#endif

enum { LEVEL_C = 0, LEVEL_POPCNT = 1, LEVEL_AVX512 = 2 };

/* The level every call uses (-1: not decided yet): one relaxed load. */
static int simd_level = -1;

static int best_level(void)
{
#if BUMPED_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vpopcntdq"))
        return LEVEL_AVX512;
    if (__builtin_cpu_supports("popcnt")) return LEVEL_POPCNT;
#endif
    return LEVEL_C;
}

static inline int level(void)
{
    int l = __atomic_load_n(&simd_level, __ATOMIC_RELAXED);
    if (l < 0) {
        l = best_level();
        __atomic_store_n(&simd_level, l, __ATOMIC_RELAXED);
    }
    return l;
}

/* Tests: use at most level `most` (higher than the machine has is capped);
 * returns the level used before. */
BK_HIDDEN int bk__bumped_simd(int most)
{
    int was = level();
    int best = best_level();
    __atomic_store_n(&simd_level, most < best ? most : best, __ATOMIC_RELAXED);
    return was;
}

/*==========================================================================
 * Internals: lookups
 *==========================================================================*/

/* The test of layer-l hash h in its line of layer l: 1 or 0 when the line
 * keeps the key's rank, else BUMPED. `lvl` is a constant where this is
 * inlined. */
#define BUMPED 2

__attribute__((always_inline)) static inline int test_in(const bk_bumped *f, uint64_t h,
                                                        uint32_t l, int lvl, uint32_t w)
{
    where x = where_of(h, f->lines[l], w);
    const unsigned char *line = f->t[l] + x.line * LINE;
    uint64_t c = coeffs_of(h, w), tr;
#if BUMPED_X86
    if (lvl == LEVEL_AVX512)
        tr = w == 8 ? test8_avx512(line, c) : test16_avx512(line, c);
    else
#endif
        tr = w == 8 ? test8_c(line, c) : test16_c(line, c);
    (void)lvl;
    int hit = (uint32_t)tr == (h & all_of(w));
    return x.rank < (uint32_t)(tr >> 32) ? hit : BUMPED;
}

/* The key of layer-1 hash h, from layer 1 on (the rare part of a lookup). */
__attribute__((always_inline)) static inline int from_layer1(const bk_bumped *f, uint64_t h,
                                                            int lvl, uint32_t w)
{
    for (uint32_t l = 1;; h = remix(h, l)) {
        int r = test_in(f, h, l, lvl, w);
        if (r != BUMPED) return r;
        if (++l == f->layers) return 0;
    }
}

static inline void prefetch_in(const bk_bumped *f, uint64_t h, uint32_t l)
{
    BK_PREFETCH_READ(f->t[l] + bk__fastrange64(h, f->lines[l]) * LINE);
}

#define BLOCK 64 /* bumped keys a batch notes before it answers them */

typedef struct deferred {
    size_t i;   /* the key's place in the batch */
    uint64_t h; /* its layer-0 hash */
} deferred;

__attribute__((always_inline)) static inline uint64_t batch_hash(const bk_bumped *f,
                                                                const void *key, size_t len)
{
    static const char empty[1] = {0};
    return key != NULL ? hash_key(f, key, len) : hash_key(f, empty, 0);
}

/* The keys of a block that their first line bumped, layer by layer: all
 * of a layer's lines prefetched, then tested without branching on them;
 * those bumped again go on to the next layer. */
__attribute__((always_inline)) static inline int64_t
second_pass(const bk_bumped *f, deferred *d, size_t nd, uint8_t *results, int lvl, uint32_t w)
{
    int64_t found = 0;
    for (uint32_t l = 1; nd > 0 && l < f->layers; l++) {
        const size_t more = l + 1 < f->layers;
        for (size_t j = 0; j < nd; j++) {
            d[j].h = remix(d[j].h, l);
            prefetch_in(f, d[j].h, l);
        }
        size_t kept = 0;
        for (size_t j = 0; j < nd; j++) {
            int r = test_in(f, d[j].h, l, lvl, w);
            found += r & 1;
            if (results != NULL) results[d[j].i] = (uint8_t)(r & 1);
            d[kept] = d[j];
            kept += (size_t)(r == BUMPED) & more;
        }
        nd = kept;
    }
    return found;
}

/* Keys are hashed AHEAD ahead and their first lines prefetched then. The
 * test of the first line does not branch on what it read (a mispredicted
 * branch would wait for the line): a bumped key is answered 0 and noted,
 * and every BLOCK keys a second pass answers the noted ones. */
__attribute__((always_inline)) static inline int64_t
batch_body(const bk_bumped *f, const void *const *keys, const size_t *lens, size_t n,
           uint8_t *results, int lvl, uint32_t w,
           int64_t (*second)(const bk_bumped *, deferred *, size_t, uint8_t *))
{
    uint64_t ring[AHEAD];
    deferred bumped[BLOCK];
    size_t nb = 0;
    int64_t found = 0;
    const size_t more = f->layers > 1;
    size_t ahead = n < AHEAD ? n : AHEAD;
    for (size_t i = 0; i < ahead; i++) {
        ring[i] = batch_hash(f, keys[i], lens[i]);
        prefetch_in(f, ring[i], 0);
    }
    for (size_t i = 0; i < n; i++) {
        size_t slot = i % AHEAD;
        uint64_t h = ring[slot];
        int r = test_in(f, h, 0, lvl, w);
        found += r & 1;
        if (results != NULL) results[i] = (uint8_t)(r & 1);
        bumped[nb].i = i;
        bumped[nb].h = h;
        nb += (size_t)(r == BUMPED) & more;
        if (nb == BLOCK) {
            found += second(f, bumped, nb, results);
            nb = 0;
        }
        size_t next = i + AHEAD;
        if (next < n) {
            ring[slot] = batch_hash(f, keys[next], lens[next]);
            prefetch_in(f, ring[slot], 0);
        }
    }
    return found + (nb ? second(f, bumped, nb, results) : 0);
}

/* Each level's functions: a single lookup (the first layer inline, the
 * rest out of line), the second pass and a batch. */
#define BUMPED_LEVEL(suffix, attr, lvl)                                          \
    attr __attribute__((noinline)) static int rest_##suffix(const bk_bumped *f,  \
                                                            uint64_t h)         \
    {                                                                           \
        return f->width == 8 ? from_layer1(f, remix(h, 1), lvl, 8)              \
                             : from_layer1(f, remix(h, 1), lvl, 16);            \
    }                                                                           \
    attr static int contains_##suffix(const bk_bumped *f, uint64_t h)           \
    {                                                                           \
        int r = f->width == 8 ? test_in(f, h, 0, lvl, 8) : test_in(f, h, 0, lvl, 16); \
        if (r != BUMPED) return r;                                              \
        return f->layers == 1 ? 0 : rest_##suffix(f, h);                        \
    }                                                                           \
    attr static int contains_key_##suffix(const bk_bumped *f, const void *key,  \
                                          size_t len)                           \
    {                                                                           \
        uint64_t h = hash_key(f, key, len);                                     \
        int r = f->width == 8 ? test_in(f, h, 0, lvl, 8) : test_in(f, h, 0, lvl, 16); \
        if (r != BUMPED) return r;                                              \
        return f->layers == 1 ? 0 : rest_##suffix(f, h);                        \
    }                                                                           \
    attr __attribute__((noinline)) static int64_t                               \
    second_##suffix(const bk_bumped *f, deferred *d, size_t nd, uint8_t *results) \
    {                                                                           \
        return f->width == 8 ? second_pass(f, d, nd, results, lvl, 8)           \
                             : second_pass(f, d, nd, results, lvl, 16);         \
    }                                                                           \
    attr static int64_t batch_##suffix(const bk_bumped *f,                      \
                                       const void *const *keys,                 \
                                       const size_t *lens, size_t n,            \
                                       uint8_t *results)                        \
    {                                                                           \
        return f->width == 8                                                    \
                   ? batch_body(f, keys, lens, n, results, lvl, 8, second_##suffix) \
                   : batch_body(f, keys, lens, n, results, lvl, 16, second_##suffix); \
    }

BUMPED_LEVEL(c, , LEVEL_C)
#if BUMPED_X86
BUMPED_LEVEL(popcnt, __attribute__((target("popcnt"))), LEVEL_POPCNT)
BUMPED_LEVEL(avx512, AVX512_TARGET, LEVEL_AVX512)
#endif

static inline int contains_h(const bk_bumped *f, uint64_t h)
{
#if BUMPED_X86
    switch (level()) {
    case LEVEL_AVX512: return contains_avx512(f, h);
    case LEVEL_POPCNT: return contains_popcnt(f, h);
    default: break;
    }
#endif
    return contains_c(f, h);
}

/*==========================================================================
 * Internals: construction
 *==========================================================================*/

/* Solve one line of layer `lines` lines from its k keys' hashes h[0..k)
 * (sorted, so in rank order), writing its planes and threshold to `out`.
 * Returns the number of keys kept: h[kept..k) are bumped. */
static uint64_t solve_line(const uint64_t *h, uint64_t k, uint64_t lines, uint32_t w,
                           unsigned char *out)
{
    const uint32_t rows = rows_of(w);
    uint64_t prow[64];
    uint32_t pval[64];
    uint64_t have = 0; /* bit r: a row with lowest set bit r is in prow[r] */
    uint64_t i = 0;
    uint32_t t = all_of(w);
    while (i < k) {
        uint32_t rank = where_of(h[i], lines, w).rank;
        uint64_t added = 0, j = i;
        int ok = 1;
        for (; j < k && where_of(h[j], lines, w).rank == rank; j++) {
            uint64_t c = coeffs_of(h[j], w);
            uint32_t v = (uint32_t)(h[j] & all_of(w));
            while (c != 0) {
                unsigned p = (unsigned)__builtin_ctzll(c);
                if (!(have >> p & 1)) {
                    prow[p] = c;
                    pval[p] = v;
                    have |= UINT64_C(1) << p;
                    added |= UINT64_C(1) << p;
                    break;
                }
                c ^= prow[p];
                v ^= pval[p];
            }
            if (c == 0 && v != 0) { /* inconsistent: this group cannot stay */
                ok = 0;
                break;
            }
        }
        if (!ok) {
            have &= ~added;
            t = rank;
            break;
        }
        i = j;
    }
    if (i == 0) t = 0; /* keeps no key: every rank goes on */

    /* back-substitution, highest pivot first; free variables stay 0 */
    uint64_t plane[16] = {0};
    for (int r = (int)rows - 1; r >= 0; r--) {
        if (!(have >> r & 1)) continue;
        uint32_t v = pval[r];
        for (uint32_t j = 0; j < w; j++)
            v ^= (uint32_t)(__builtin_popcountll(prow[r] & plane[j]) & 1) << j;
        for (uint32_t j = 0; j < w; j++) plane[j] |= (uint64_t)(v >> j & 1) << r;
    }
    for (uint32_t j = 0; j < w; j++) {
        if (w == 8) {
            uint64_t x = plane[j] | (uint64_t)(t >> j & 1) << 63;
            memcpy(out + 8 * j, &x, 8);
        } else {
            uint32_t x = (uint32_t)plane[j] | (t >> j & 1) << 31;
            memcpy(out + 4 * j, &x, 4);
        }
    }
    return i;
}

/* Layers a build may use before it tries another seed (tests lower it). */
static uint32_t layer_limit = MAX_LAYERS;

BK_HIDDEN void bk__bumped_layer_limit(uint32_t limit)
{
    layer_limit = limit >= 1 && limit <= MAX_LAYERS ? limit : MAX_LAYERS;
}

static uint64_t layer_lines(uint64_t keys, uint32_t load)
{
    return keys == 0 ? 1 : (keys - 1) / load + 1;
}

static void free_layers(bk_bumped *f)
{
    if (f->owns_lines)
        for (uint32_t l = 0; l < f->layers; l++) bk__free_aligned((void *)f->t[l]);
    f->layers = 0;
}

/* Build the layers from the n sorted, distinct layer-0 hashes h (which it
 * overwrites). BK_EBUILD when MAX_LAYERS do not hold them all. */
static int build_layers(bk_bumped *f, uint64_t *h, uint64_t n)
{
    bk__peel sorter;
    f->owns_lines = 1;
    for (uint32_t l = 0;; l++) {
        if (l == layer_limit) return BK_EBUILD;
        uint64_t lines = layer_lines(n, f->load);
        if (lines > SIZE_MAX / LINE) return BK_ESIZE;
        unsigned char *t = bk__calloc_aligned((size_t)(lines * LINE));
        if (t == NULL) return BK_ENOMEM;
        bk__advise_huge(t, (size_t)(lines * LINE));
        f->t[l] = t;
        f->lines[l] = lines;
        f->layers = l + 1;
        uint64_t i = 0, bumped = 0;
        for (uint64_t line = 0; line < lines; line++) {
            uint64_t a = i;
            while (i < n && where_of(h[i], lines, f->width).line == line) i++;
            uint64_t kept = solve_line(h + a, i - a, lines, f->width, t + line * LINE);
            uint64_t go = i - a - kept;
            memmove(h + bumped, h + a + kept, (size_t)go * sizeof(*h));
            bumped += go;
        }
        f->stored[l] = n - bumped;
        if (bumped == 0) return BK_OK;
        for (uint64_t j = 0; j < bumped; j++) h[j] = remix(h[j], l + 1);
        memset(&sorter, 0, sizeof(sorter));
        sorter.hashes = h;
        int rc = bk__peel_sort_dedupe(&sorter, bumped, NULL);
        if (rc != BK_OK) return rc;
        n = bumped;
    }
}

/*==========================================================================
 * API: construction
 *==========================================================================*/

uint64_t bk_bumped_build_memory(uint64_t n)
{
    return (n > 0 ? n : 1) * 8 + 3 * 2048 * sizeof(size_t);
}

int bk_bumped_build(bk_bumped **out, const void *const *keys, const size_t *lens,
                    uint64_t n, uint32_t fingerprint_bits, uint64_t seed)
{
    static const char empty[1] = {0};
    uint64_t *h = NULL;
    bk_bumped *f = NULL;
    int rc;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (n > 0 && (keys == NULL || lens == NULL)) return BK_EINVAL;
    if (fingerprint_bits != 8 && fingerprint_bits != 16) return BK_EPARAM;
    if (n > SIZE_MAX / sizeof(uint64_t)) return BK_ESIZE;
    for (uint64_t i = 0; i < n; i++)
        if (keys[i] == NULL && lens[i] != 0) return BK_EINVAL;

    f = bk__calloc(1, sizeof(*f));
    h = bk__malloc((size_t)(n > 0 ? n : 1) * sizeof(*h));
    if (f == NULL || h == NULL) { rc = BK_ENOMEM; goto fail; }
    bk__advise_huge(h, (size_t)(n > 0 ? n : 1) * sizeof(*h));
    bk__object_init(&f->obj, &bumped_ops);
    f->width = fingerprint_bits;
    f->load = fingerprint_bits == 8 ? LOAD8 : LOAD16;
    f->temp_bytes = bk_bumped_build_memory(n);
    rc = BK_EBUILD;
    for (uint32_t a = 0; a < BK__PEEL_MAX_ATTEMPTS && rc == BK_EBUILD; a++) {
        bk__peel sorter;
        free_layers(f);
        f->attempts = a + 1;
        f->seed = bk__peel_attempt_seed(seed, a);
        bk__xxh64_keys_init(&f->keys, f->seed);
        for (uint64_t i = 0; i < n; i++)
            h[i] = keys[i] ? hash_key(f, keys[i], lens[i]) : hash_key(f, empty, 0);
        memset(&sorter, 0, sizeof(sorter));
        sorter.hashes = h;
        rc = bk__peel_sort_dedupe(&sorter, n, NULL);
        if (rc != BK_OK) goto fail;
        f->items = sorter.n;
        f->duplicates = sorter.duplicates;
        rc = build_layers(f, h, sorter.n);
    }
    if (rc != BK_OK) goto fail;
    bk__free(h);
    *out = f;
    return BK_OK;

fail:
    bk__free(h);
    bk_bumped_free(f);
    return rc;
}

void bk_bumped_free(bk_bumped *f)
{
    if (f == NULL) return;
    free_layers(f);
    bk__object_release(&f->obj);
    bk__free(f);
}

/*==========================================================================
 * API: lookups
 *==========================================================================*/

uint64_t bk_bumped_hash_key(const bk_bumped *f, const void *key, size_t len)
{
    static const char empty[1] = {0};
    if (key == NULL) key = empty, len = 0;
    return hash_key(f, key, len);
}

int bk_bumped_contains_hash(const bk_bumped *f, uint64_t h)
{
    return f ? contains_h(f, h) : 0;
}

int bk_bumped_contains(const bk_bumped *f, const void *key, size_t len)
{
    if (f == NULL || (key == NULL && len != 0)) return 0;
    if (key == NULL) return contains_h(f, bk_bumped_hash_key(f, key, len));
#if BUMPED_X86
    switch (level()) {
    case LEVEL_AVX512: return contains_key_avx512(f, key, len);
    case LEVEL_POPCNT: return contains_key_popcnt(f, key, len);
    default: break;
    }
#endif
    return contains_key_c(f, key, len);
}

int64_t bk_bumped_contains_batch(const bk_bumped *f, const void *const *keys,
                                 const size_t *lens, size_t n, uint8_t *results)
{
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
#if BUMPED_X86
    switch (level()) {
    case LEVEL_AVX512: return batch_avx512(f, keys, lens, n, results);
    case LEVEL_POPCNT: return batch_popcnt(f, keys, lens, n, results);
    default: break;
    }
#endif
    return batch_c(f, keys, lens, n, results);
}

/*==========================================================================
 * API: statistics
 *==========================================================================*/

uint64_t bk_bumped_seed(const bk_bumped *f) { return f ? f->seed : 0; }
uint64_t bk_bumped_items(const bk_bumped *f) { return f ? f->items : 0; }

static uint64_t total_lines(const bk_bumped *f)
{
    uint64_t lines = 0;
    for (uint32_t l = 0; l < f->layers; l++) lines += f->lines[l];
    return lines;
}

int bk_bumped_get_stats(const bk_bumped *f, bk_bumped_stats *out)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    memset(out, 0, sizeof(*out));
    const uint32_t w = f->width;
    uint64_t lines = total_lines(f);
    double open = 0.0; /* sum over first-layer lines of the ranks not kept */
    for (uint64_t x = 0; x < f->lines[0]; x++) {
        uint64_t tr = w == 8 ? test8_c(f->t[0] + x * LINE, 0) : test16_c(f->t[0] + x * LINE, 0);
        open += (double)(all_of(w) - (uint32_t)(tr >> 32));
    }
    out->items = f->items;
    out->duplicates = f->duplicates;
    out->fingerprint_bits = w;
    out->layers = f->layers;
    out->load = f->load;
    out->lines = lines;
    out->first_layer_items = f->stored[0];
    out->second_reads = f->layers > 1 ? open / ((double)all_of(w) * (double)f->lines[0]) : 0.0;
    out->seed = f->seed;
    out->fpr = f->items ? ldexp(1.0, -(int)w) : 0.0;
    out->bits_per_key = f->items ? (double)lines * 512.0 / (double)f->items : 0.0;
    out->attempts = f->attempts;
    out->build_memory = f->attempts ? f->temp_bytes : 0;
    out->bytes = sizeof(*f) + (size_t)lines * LINE;
    return BK_OK;
}

/*==========================================================================
 * The generic filter and the file format
 *
 * Image: hash XXH3-64; param[0] = load; items (distinct keys) = capacity;
 * fpr 2^-w (0 for the empty set). One part per layer: m = lines, width =
 * w, k = 1, items = keys kept in the layer, payload m x 64 bytes.
 *==========================================================================*/

BK__FAMILY_CASTS(bumped, bumped_ops)

static bk_hash ops_hash(const void *f, const void *key, size_t len)
{
    bk_hash h;
    h.lo = h.hi = bk_bumped_hash_key(f, key, len);
    return h;
}

static int ops_add(void *f, bk_hash h)
{
    (void)f, (void)h;
    return BK_ESTATIC;
}

static int ops_contains(const void *f, bk_hash h) { return contains_h(f, h.lo); }

static int64_t ops_contains_batch(const void *f, const void *const *keys,
                                  const size_t *lens, size_t n, uint8_t *results)
{
    return bk_bumped_contains_batch(f, keys, lens, n, results);
}

static uint64_t ops_seed(const void *f) { return ((const bk_bumped *)f)->seed; }
static void ops_destroy(void *f) { bk_bumped_free(f); }
static uint32_t ops_nparts(const void *f) { return ((const bk_bumped *)f)->layers; }

static int ops_create(const bk_filter_config *cfg, void **out)
{
    (void)cfg, (void)out;
    return BK_ESTATIC; /* built from its keys: bk_bumped_build */
}

static int ops_info(const void *vf, bk_filter_info *out)
{
    const bk_bumped *f = vf;
    double fpr = f->items ? ldexp(1.0, -(int)f->width) : 0.0;
    uint64_t lines = total_lines(f);
    bk__static_info(f->seed, f->items, fpr, fpr, (double)lines * rows_of(f->width),
                    sizeof(*f) + (size_t)lines * LINE, f->layers, out);
    return BK_OK;
}

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_bumped *f = vf;
    double fpr = f->items ? ldexp(1.0, -(int)f->width) : 0.0;
    img->seed = f->seed;
    img->capacity = f->items;
    img->fpr = fpr;
    img->items = f->items;
    img->hash = BK__HASH_XXH3_64;
    img->param[0] = f->load;
    for (uint32_t l = 0; l < f->layers; l++) {
        bk__part *p = &img->parts[l];
        p->m = f->lines[l];
        p->k = 1;
        p->width = (uint8_t)f->width;
        p->capacity = f->stored[l];
        p->fpr = fpr;
        p->items = f->stored[l];
        p->data = (void *)f->t[l];
        p->length = f->lines[l] * LINE;
    }
    return BK_OK;
}

/* Every line content is a valid table; what must hold is the shape: each
 * layer sized for the keys that reach it, a layer after another only when
 * some key reaches it, and the counts adding up. */
static int ops_restore(const bk__image *img, void **out)
{
    const bk__part *p = img->parts;
    if (img->hash != BK__HASH_XXH3_64 || img->nparts < 1 || img->nparts > MAX_LAYERS ||
        img->flags != 0)
        return BK_ECORRUPT;
    uint32_t w = p[0].width;
    if (w != 8 && w != 16) return BK_ECORRUPT;
    uint64_t load = img->param[0];
    if (load < 1 || load > 64 || img->param[1] != 0 || img->param[2] != 0 ||
        img->param[3] != 0)
        return BK_ECORRUPT;
    double fpr = img->items ? ldexp(1.0, -(int)w) : 0.0;
    if (img->capacity != img->items || img->fpr != fpr) return BK_ECORRUPT;
    uint64_t reach = 0; /* keys kept in this layer and the ones after it */
    for (uint32_t l = img->nparts; l-- > 0;) {
        const bk__part *q = &p[l];
        if (q->width != w || q->k != 1 || q->slots != 0 || q->flags != 0 || q->param != 0 ||
            q->items != q->capacity || q->fpr != fpr)
            return BK_ECORRUPT;
        if (q->items > UINT64_MAX - reach) return BK_ECORRUPT;
        reach += q->items;
        if (l > 0 && reach == 0) return BK_ECORRUPT; /* a layer nothing reaches */
        if (q->m != layer_lines(reach, (uint32_t)load) || q->m > UINT64_MAX / LINE ||
            q->length != q->m * LINE)
            return BK_ECORRUPT;
    }
    if (reach != img->items) return BK_ECORRUPT;
    if (img->nparts > 1 && p[img->nparts - 1].items == 0) return BK_ECORRUPT;

    bk_bumped *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &bumped_ops);
    f->width = w;
    f->load = (uint32_t)load;
    f->layers = img->nparts;
    for (uint32_t l = 0; l < f->layers; l++) {
        f->t[l] = p[l].data;
        f->lines[l] = p[l].m;
        f->stored[l] = p[l].items;
    }
    f->owns_lines = 0;
    f->seed = img->seed;
    bk__xxh64_keys_init(&f->keys, img->seed);
    f->items = img->items;
    *out = f;
    return BK_OK;
}


/* The handle and, unless borrowed from a loaded block or a mapping, each
 * layer's lines. */
static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_bumped *f = vf;
    visit(ctx, f, sizeof(*f));
    if (f->owns_lines)
        for (uint32_t l = 0; l < f->layers; l++)
            visit(ctx, bk__aligned_raw(f->t[l]), bk__aligned_asked((size_t)(f->lines[l] * LINE)));
}

static const bk__family_ops bumped_ops = {
    .family = BK_FAMILY_BUMPED,
    .name = "bumped",
    BK__OPS_STANDARD,
    .hash = ops_hash, .add_batch = bk__static_add_batch, .contains_batch = ops_contains_batch,
    /* no clone: one goes through the file format (filter.c) */
};

const bk__family_ops *const bk__bumped_family = &bumped_ops;
