/*
 * counting.c - the counting Bloom filter (Fan, Cao, Almeida & Broder 2000,
 * "Summary cache"), cache-blocked (Putze, Sanders & Singler 2007).
 *
 * Structure
 *   A Bloom filter whose cells are w-bit counters (w = 4 or 8) instead of
 *   bits: an add increments a key's k counters, a remove decrements them, a
 *   lookup asks whether all are nonzero. The counters are grouped in blocks
 *   of one cache line (64 bytes = 8 words of 64 bits = C counters, C = 128
 *   for w = 4 and 64 for w = 8). A key's hash (XXH3-128, filter seed)
 *   chooses one block with fastrange(lo, blocks) and k *distinct* counters
 *   inside it from log2(C)-bit draws of hi (then of a splitmix64 stream
 *   seeded from both halves), rejecting repeats: the k counters are a
 *   uniform k-subset of the block, so the count estimate (their minimum)
 *   counts each add once and the block statistics follow the
 *   hypergeometric law used by get_stats. Counter j of a block lives in word j / (64 / w) at bit
 *   (j % (64 / w)) * w; the layout is little-endian within the word.
 *
 * False positives
 *   A block receives a Poisson(lambda = n / blocks) number i of keys. After
 *   i keys that each pick k of C counters, a counter is zero with
 *   probability (1 - k/C)^i, so
 *       fpr = sum_i Poisson(i; lambda) (1 - (1 - k/C)^i)^k
 *   (Putze et al. 2007, section 3; independence of the k counters slightly
 *   overstates it, so the sizing is conservative). bk_counting_optimal
 *   searches k and the number of blocks for the least memory meeting p.
 *   Because C depends on w, the width changes the sizing twice: 8-bit
 *   counters cost twice the memory and their 64-counter blocks vary more.
 *
 * Overflow
 *   A counter at its maximum (2^w - 1) is saturated: increments leave it and
 *   decrements skip it, so it stays nonzero for ever. A saturated counter can
 *   never cause a false negative, only a permanently set cell. With Poisson
 *   load ln 2 per counter at the optimal k, reaching 16 has probability
 *   ~1e-17 (seed 002); repeated adds of one key are what really saturate.
 *
 * Concurrency
 *   The w-bit fields of a word are updated together by one compare-and-swap
 *   per touched word: the new word is computed with SWAR masks (which
 *   fields are zero, which saturated) and the CAS retried on contention.
 *   Adds, removes and lookups are therefore lock-free and never lose an
 *   update; a key's k counters (up to 8 words) are not updated as one unit,
 *   so a concurrent lookup of that key may see part of the change. A remove
 *   first checks that all counters are nonzero (else BK_ENOTFOUND, nothing
 *   written) and then decrements; a field found zero at decrement time
 *   (only possible when keys never added are removed) is left at zero
 *   rather than wrapping.
 *
 * Write modes and code paths
 *   The above is the concurrent mode (the default). In the single-writer
 *   mode (bk_counting_set_single_writer) adds and removes change the k
 *   fields with plain loads and stores: the caller guarantees no other
 *   thread uses the filter meanwhile. Lookups never branch on the line's
 *   contents; with AVX-512 (and AVX512CD) the draws (repeats rejected
 *   without a branch) and the field tests run in vector lanes, for every
 *   operation and both modes. The single writer's adds and removes then
 *   change the line in registers: the k increments become one vector of
 *   each counter's lowest bit, masked by the saturated fields and added to
 *   the line at once; the concurrent ones take each touched word's bits
 *   from that vector into their compare-and-swap. Every mode and path
 *   touches the same counters.
 *
 * What it cannot do
 *   Tell a false positive from a present key: removing a key that was never
 *   added corrupts other keys' counters (the header states this hazard).
 *   It costs w times the memory of a Bloom filter (4x at w = 4); the cuckoo
 *   filter deletes in less space. It cannot grow or merge.
 */
#include <math.h>   /* exp, log, lgamma, pow */
#include <string.h> /* memset, memcpy */

#include "batch.h"
#include "family_util.h"
#include "hash.h"

#if defined(__x86_64__) && defined(__GNUC__)
#  define BK_COUNTING_X86 1
#  include <immintrin.h> /* AVX-512 intrinsics, used in target() functions */
#else
#  define BK_COUNTING_X86 0
#endif

/* ThreadSanitizer builds read lines through atomics only (as blocked.c). */
#if defined(__SANITIZE_THREAD__)
#  define BK_COUNTING_TSAN 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define BK_COUNTING_TSAN 1
#  endif
#endif
#ifndef BK_COUNTING_TSAN
#  define BK_COUNTING_TSAN 0
#endif

/*==========================================================================
 * Types
 *==========================================================================*/

#define WORDS_PER_BLOCK 8 /* 64 bytes */

/* Everything that depends on the counter width, looked up once. */
typedef struct width_info {
    uint32_t bits;          /* w */
    uint32_t fields_log2;   /* log2(64 / w): fields per word */
    uint32_t counters_log2; /* log2(C): counters per block */
    uint32_t draws_per_word; /* 64 / log2(C): counter draws in 64 hash bits */
    uint64_t max;           /* 2^w - 1: the saturated value */
    uint64_t low_bits;      /* the lowest bit of every field */
} width_info;

static const width_info WIDTHS[] = {
    {4, 4, 7, 9, 15, UINT64_C(0x1111111111111111)},
    {8, 3, 6, 10, 255, UINT64_C(0x0101010101010101)},
};

struct bk_counting {
    bk__object obj;           /* first: a bk_counting is also a bk_filter */
    uint64_t *words;          /* blocks * 8 words, 64-byte aligned */
    uint64_t blocks;
    const width_info *width;
    uint32_t k;
    uint64_t seed;
    bk__hash_keys keys;       /* the seed's share of the key hash (lib/hash.h) */
    uint64_t capacity;        /* 0 if unknown */
    double target_fpr;        /* 0 if unknown */
    int owns_mem;             /* 0 when the arrays live in a loaded block or mapping */
    int single_writer;        /* plain stores (bk_counting_set_single_writer) */
    char pad[BK_CACHE_LINE];  /* items on its own line: written by adds */
    uint64_t items;           /* atomic unless single_writer */
};

static const bk__family_ops counting_ops; /* at the end of this file */


/* Keys hashed ahead in batches: the misses in flight (as blocked.c). */
#define BATCH_AHEAD 32

/*==========================================================================
 * Internals: widths and SWAR masks
 *==========================================================================*/

static const width_info *find_width(uint32_t bits)
{
    if (bits == 0) bits = BK_COUNTING_DEFAULT_COUNTER_BITS;
    for (size_t i = 0; i < sizeof(WIDTHS) / sizeof(WIDTHS[0]); i++)
        if (WIDTHS[i].bits == bits) return &WIDTHS[i];
    return NULL;
}

/* The lowest bit of every nonzero field of v: the OR of each field's bits
 * folded onto its lowest bit in log2(w) shifts. */
static inline uint64_t nonzero_fields(const width_info *w, uint64_t v)
{
    uint64_t any = v | (v >> 1);
    any |= any >> 2;
    if (w->bits == 8) any |= any >> 4;
    return any & w->low_bits;
}

/* The lowest bit of every saturated (all-ones) field of v. */
static inline uint64_t saturated_fields(const width_info *w, uint64_t v)
{
    uint64_t all = v & (v >> 1);
    all &= all >> 2;
    if (w->bits == 8) all &= all >> 4;
    return all & w->low_bits;
}

static inline uint64_t rotl64(uint64_t x, unsigned r)
{
    return (x << r) | (x >> (64 - r));
}

static inline int cas64(uint64_t *p, uint64_t *expected, uint64_t desired)
{
    return __atomic_compare_exchange_n(p, expected, desired, 1,
                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* Concurrent +1 or -1 on the fields of *word whose lowest bits are in
 * touched, all with one compare-and-swap, retried on contention: saturated
 * fields stay and (for -1) zero fields are left at zero rather than
 * wrapping. Returns the touched fields that were zero before. */
static inline uint64_t update_word_atomic(const width_info *w, uint64_t *word,
                                          uint64_t touched, int delta)
{
    uint64_t old = bk__load64(word), next, zero_here;
    do {
        uint64_t nonzero = nonzero_fields(w, old);
        uint64_t change = touched & ~saturated_fields(w, old);
        /* no carry (no changed field is at max), no borrow (only nonzero
         * fields are decremented) */
        next = delta > 0 ? old + change : old - (change & nonzero);
        zero_here = touched & ~nonzero;
        if (next == old) break;
    } while (!cas64(word, &old, next));
    return zero_here;
}

/*==========================================================================
 * Internals: a key's counters
 *==========================================================================*/

static inline uint64_t *block_of(const bk_counting *f, bk_hash h)
{
    return f->words + bk__fastrange64(h.lo, f->blocks) * WORDS_PER_BLOCK;
}

/* Draws of log2(C) bits come from h.hi, then from a splitmix64 stream
 * seeded with both halves; a draw that repeats a counter already taken is
 * rejected, so the k counters are a uniform k-subset of the block (the
 * hypergeometric model of get_stats). After REJECT_LIMIT draws, which no
 * real key reaches, the next free counter is taken instead. */
#define REJECT_LIMIT 256

static inline uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* A key's counters: its block and, in draw order, the bit offset c * w of
 * each of its k counters within the block (counter c of a block is the
 * w-bit field at bit c * w: word c * w / 64, shift c * w % 64). */
typedef struct key_counters {
    uint64_t *block;
    uint16_t offset[BK_COUNTING_MAX_HASHES];
} key_counters;

/* The general draw, the definition of the layout. */
static void draw_slow(const bk_counting *f, bk_hash h, key_counters *kc)
{
    const width_info *w = f->width;
    const uint32_t draw_bits = w->counters_log2;
    const uint32_t counters = 1u << draw_bits;
    const uint32_t per_word = w->draws_per_word;
    uint64_t taken[2] = {0, 0}; /* C <= 128 */
    uint64_t stream = h.hi ^ rotl64(h.lo, 32);
    uint64_t pool = h.hi;
    uint32_t left = per_word, draws = 0;

    for (uint32_t i = 0; i < f->k; i++) {
        uint32_t c;
        for (;;) {
            if (left == 0) pool = splitmix64(&stream), left = per_word;
            c = (uint32_t)(pool & (counters - 1));
            pool >>= draw_bits;
            left--;
            if (((taken[c >> 6] >> (c & 63)) & 1) == 0) break;
            if (++draws >= REJECT_LIMIT) {
                while ((taken[c >> 6] >> (c & 63)) & 1)
                    c = (c + 1) & (counters - 1);
                break;
            }
        }
        taken[c >> 6] |= UINT64_C(1) << (c & 63);
        kc->offset[i] = (uint16_t)(c * w->bits);
    }
}

/*--------------------------------------------------------------------------
 * AVX-512 (F and CD): with k <= 8, every draw of h.hi sits in a 32-bit
 * lane after one variable shift per half; vpconflictd and vpcompressd keep
 * the first k that do not repeat (the general draw's rejection, without a
 * branch), and a lookup fetches each of those lanes' word of the line with
 * one permute, shifts its field down and tests all lanes at once. Used
 * when the process-wide SIMD level (bk_blocked_set_simd_level) is AVX-512
 * and the CPU has AVX512CD; the same counters as the scalar code, so
 * answers never depend on the path. A line read with one vector load is
 * safe beside concurrent writers for the reason given in blocked.c (each
 * aligned 8-byte element is read whole); TSan builds assemble it from
 * relaxed atomic loads.
 *--------------------------------------------------------------------------*/

#if BK_COUNTING_X86
/* Where draw i sits in h.hi, for the draws_per_word draws of each width
 * (then padding: those lanes are masked off). */
static const int64_t DRAW_SHIFTS[2][16] = {
    {0, 7, 14, 21, 28, 35, 42, 49, 56, 0, 0, 0, 0, 0, 0, 0}, /* 4-bit: 9 draws of 7 bits */
    {0, 6, 12, 18, 24, 30, 36, 42, 48, 54, 0, 0, 0, 0, 0, 0}, /* 8-bit: 10 draws of 6 bits */
};

static int simd_supported = -1; /* -1: not detected yet */

__attribute__((noinline, cold)) static int detect_simd(void)
{
    __builtin_cpu_init();
    int ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd");
    __atomic_store_n(&simd_supported, ok, __ATOMIC_RELAXED);
    return ok;
}

/* Inlined into every entry point: two relaxed loads and a compare. */
static inline int use_simd(const bk_counting *f)
{
    int ok = __atomic_load_n(&simd_supported, __ATOMIC_RELAXED);
    if (BK_UNLIKELY(ok < 0)) ok = detect_simd();
    return ok && f->k <= 8 && bk__simd_level() == BK_SIMD_AVX512;
}

/* The k counters' bit offsets in 64-bit lanes 0..k-1, exactly the general
 * draw's: all draws of h.hi sit in 32-bit lanes, vpconflictd marks each
 * lane equal to an earlier one (the general draw rejects it: it repeats an
 * accepted counter), and vpcompressd keeps the first k accepted in order.
 * No branch depends on a repeat, so the 15% of keys (k = 7 of 128) whose
 * first k draws repeat take this path too. Returns 0 only when h.hi holds
 * fewer than k distinct draws (under 1% of keys): the general draw, which
 * goes on with its splitmix64 stream, decides then. */
__attribute__((target("avx512f,avx512cd")))
static inline int offsets_avx512(const bk_counting *f, bk_hash h, __m512i *offsets)
{
    const width_info *w = f->width;
    const int wide = w->bits == 8;
    __m512i hi = _mm512_set1_epi64((long long)h.hi);
    __m512i mask = _mm512_set1_epi64((long long)((1u << w->counters_log2) - 1));
    __m512i d0 = _mm512_and_si512(
        _mm512_srlv_epi64(hi, _mm512_loadu_si512((const void *)&DRAW_SHIFTS[wide][0])), mask);
    __m512i d1 = _mm512_and_si512(
        _mm512_srlv_epi64(hi, _mm512_loadu_si512((const void *)&DRAW_SHIFTS[wide][8])), mask);
    __m512i draws = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(d0)),
                                       _mm512_cvtepi64_epi32(d1), 1);
    const __mmask16 valid = (__mmask16)((1u << w->draws_per_word) - 1);
    __m512i earlier = _mm512_maskz_conflict_epi32(valid, draws);
    __mmask16 accepted = _mm512_mask_testn_epi32_mask(valid, earlier, earlier);
    if ((uint32_t)__builtin_popcount(accepted) < f->k) return 0;
    __m512i first = _mm512_maskz_compress_epi32(accepted, draws);
    __m512i c = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(first));
    *offsets = wide ? _mm512_slli_epi64(c, 3) : _mm512_slli_epi64(c, 2);
    return 1;
}

__attribute__((target("avx512f")))
static inline __m512i load_line_avx512(const uint64_t *line)
{
#if BK_COUNTING_TSAN
    return _mm512_setr_epi64((long long)bk__load64(&line[0]), (long long)bk__load64(&line[1]),
                             (long long)bk__load64(&line[2]), (long long)bk__load64(&line[3]),
                             (long long)bk__load64(&line[4]), (long long)bk__load64(&line[5]),
                             (long long)bk__load64(&line[6]), (long long)bk__load64(&line[7]));
#else
    return _mm512_load_si512((const void *)line);
#endif
}

/* 1 when the k counters at the offsets in off are all nonzero. */
__attribute__((target("avx512f")))
static inline int all_nonzero_avx512(const bk_counting *f, const uint64_t *line, __m512i off)
{
    const __mmask8 live = (__mmask8)((1u << f->k) - 1);
    __m512i words = _mm512_permutexvar_epi64(_mm512_srli_epi64(off, 6),
                                             load_line_avx512(line));
    __m512i field = _mm512_and_si512(
        _mm512_srlv_epi64(words, _mm512_and_si512(off, _mm512_set1_epi64(63))),
        _mm512_set1_epi64((long long)f->width->max));
    return _mm512_mask_testn_epi64_mask(live, field, field) == 0;
}

/* Sets *present; returns 0 (nothing set) when the general draw must run. */
__attribute__((target("avx512f,avx512cd")))
static inline int contains_avx512(const bk_counting *f, bk_hash h, int *present)
{
    __m512i off;
    if (!offsets_avx512(f, h, &off)) return 0;
    *present = all_nonzero_avx512(f, block_of(f, h), off);
    return 1;
}

/* The lowest bit of each of the key's k counters, in its word's lane: the
 * +1 of all k at once (the counters are distinct, so no field receives two
 * and nothing carries). Built in registers: lane i of off is broadcast by a
 * permute, and a shift by (offset - 64 j) is 0 in every lane j but its
 * own (vpsllvq gives 0 for counts of 64 and up, negative ones included). */
__attribute__((target("avx512f")))
static inline __m512i lowbits_avx512(__m512i off, uint32_t k)
{
    const __m512i base = _mm512_setr_epi64(0, 64, 128, 192, 256, 320, 384, 448);
    const __m512i one = _mm512_set1_epi64(1);
    __m512i acc = _mm512_setzero_si512();
    for (uint32_t i = 0; i < k; i++) {
        __m512i o = _mm512_permutexvar_epi64(_mm512_set1_epi64((long long)i), off);
        acc = _mm512_or_si512(acc, _mm512_sllv_epi64(one, _mm512_sub_epi64(o, base)));
    }
    return acc;
}

/* The concurrent +1 (delta > 0) or -1 of a key's counters, the same change
 * as update_atomic: the offsets and each word's touched fields come from
 * registers, then one compare-and-swap per touched word. A remove first
 * checks that every counter is nonzero. Returns 0 (nothing done) when the
 * general draw must decide; else sets *result as update_plain_avx512. */
__attribute__((target("avx512f,avx512cd")))
static inline int update_atomic_avx512(const bk_counting *f, bk_hash h, int delta,
                                       int *result)
{
    __m512i off;
    if (!offsets_avx512(f, h, &off)) return 0;
    uint64_t *line = block_of(f, h);
    if (delta < 0 && !all_nonzero_avx512(f, line, off)) {
        *result = 0;
        return 1;
    }
    __m512i touched = lowbits_avx512(off, f->k);
    uint32_t words = _mm512_test_epi64_mask(touched, touched);
    uint64_t was_zero = 0;
    while (words != 0) {
        uint32_t i = (uint32_t)__builtin_ctz(words);
        words &= words - 1;
        uint64_t t = (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(
            _mm512_permutexvar_epi64(_mm512_set1_epi64((long long)i), touched)));
        was_zero |= update_word_atomic(f->width, &line[i], t, delta);
    }
    *result = delta > 0 ? was_zero != 0 : 1;
    return 1;
}

/* nonzero_fields and saturated_fields of a whole line. */
__attribute__((target("avx512f")))
static inline __m512i fold_fields_avx512(const width_info *w, __m512i v, int all)
{
    __m512i x = all ? _mm512_and_si512(v, _mm512_srli_epi64(v, 1))
                    : _mm512_or_si512(v, _mm512_srli_epi64(v, 1));
    x = all ? _mm512_and_si512(x, _mm512_srli_epi64(x, 2))
            : _mm512_or_si512(x, _mm512_srli_epi64(x, 2));
    if (w->bits == 8)
        x = all ? _mm512_and_si512(x, _mm512_srli_epi64(x, 4))
                : _mm512_or_si512(x, _mm512_srli_epi64(x, 4));
    return _mm512_and_si512(x, _mm512_set1_epi64((long long)w->low_bits));
}

/* The single writer's +1 of a key's counters, the same change as
 * update_plain, with the offsets kept in registers and the line changed by
 * one add. *was_zero: with count 0, whether any of the k counters was zero
 * before (folded from the line: the plain add's answer); with count 1, how
 * many were (what auto-clear counts: fill_add), found as all_nonzero_avx512
 * finds them and counted on a mask register. count is a constant at each
 * call, so each caller gets only its own test. Returns 0 (nothing done)
 * when the general draw must decide. */
#if !BK_COUNTING_TSAN /* TSan builds keep to the scalar update */
__attribute__((target("avx512f,avx512cd"), always_inline))
static inline void add_plain_off_avx512(const bk_counting *f, uint64_t *line, __m512i off,
                                        int count, uint32_t *was_zero)
{
    __m512i touched = lowbits_avx512(off, f->k);
    __m512i old = _mm512_load_si512((const void *)line);
    if (count) {
        __m512i words = _mm512_permutexvar_epi64(_mm512_srli_epi64(off, 6), old);
        __m512i field = _mm512_and_si512(
            _mm512_srlv_epi64(words, _mm512_and_si512(off, _mm512_set1_epi64(63))),
            _mm512_set1_epi64((long long)f->width->max));
        __mmask8 zero =
            _mm512_mask_testn_epi64_mask((__mmask8)((1u << f->k) - 1), field, field);
        *was_zero = (uint32_t)__builtin_popcount((unsigned)zero);
    } else {
        __m512i zero = _mm512_andnot_si512(fold_fields_avx512(f->width, old, 0), touched);
        *was_zero = _mm512_test_epi64_mask(zero, zero) != 0;
    }
    __m512i change = _mm512_andnot_si512(fold_fields_avx512(f->width, old, 1), touched);
    _mm512_store_si512((void *)line, _mm512_add_epi64(old, change));
}

__attribute__((target("avx512f,avx512cd"), always_inline))
static inline int add_plain_avx512(const bk_counting *f, bk_hash h, int count,
                                   uint32_t *was_zero)
{
    __m512i off;
    if (!offsets_avx512(f, h, &off)) return 0;
    add_plain_off_avx512(f, block_of(f, h), off, count, was_zero);
    return 1;
}

__attribute__((target("avx512f,avx512cd")))
static inline int add_counted_avx512(const bk_counting *f, bk_hash h, uint32_t *was_zero)
{
    return add_plain_avx512(f, h, 1, was_zero);
}

/* Rotate mode's add (auto-clear): add_counted_avx512 into f, and whether
 * the key's counters are all nonzero in prev (f's shape: the same block
 * and offsets), from the one draw. */
__attribute__((target("avx512f,avx512cd")))
static int add_rotate_avx512(const bk_counting *f, const bk_counting *prev, bk_hash h,
                             uint32_t *was_zero, int *in_prev)
{
    __m512i off;
    if (!offsets_avx512(f, h, &off)) return 0;
    *in_prev = all_nonzero_avx512(prev, block_of(prev, h), off);
    add_plain_off_avx512(f, block_of(f, h), off, 1, was_zero);
    return 1;
}

/* The single writer's +1 (delta > 0: add_plain_avx512) or -1 of a key's
 * counters. A remove first checks that every counter is nonzero, then
 * changes the line by one subtract. Returns 0 (nothing done) when the
 * general draw must decide; else sets *result: for +1 whether a counter
 * was zero before, for -1 1 when the key was removed and 0 when a counter
 * was zero (BK_ENOTFOUND). */
__attribute__((target("avx512f,avx512cd")))
static inline int update_plain_avx512(const bk_counting *f, bk_hash h, int delta,
                                      int *result)
{
    if (delta > 0) {
        uint32_t any_zero;
        if (!add_plain_avx512(f, h, 0, &any_zero)) return 0;
        *result = (int)any_zero;
        return 1;
    }
    __m512i off;
    if (!offsets_avx512(f, h, &off)) return 0;
    uint64_t *line = block_of(f, h);
    __m512i touched = lowbits_avx512(off, f->k);
    __m512i old = _mm512_load_si512((const void *)line);
    __m512i zero = _mm512_andnot_si512(fold_fields_avx512(f->width, old, 0), touched);
    if (_mm512_test_epi64_mask(zero, zero) != 0) {
        *result = 0;
        return 1;
    }
    __m512i change = _mm512_andnot_si512(fold_fields_avx512(f->width, old, 1), touched);
    _mm512_store_si512((void *)line, _mm512_sub_epi64(old, change));
    *result = 1;
    return 1;
}
#define BK_COUNTING_ADD_COUNTED 1
#endif
#endif /* BK_COUNTING_X86 */

/* The same counters, fast: when k draws fit in h.hi (k <= 64 / log2(C):
 * 9 for 4-bit and 10 for 8-bit counters, every rate down to ~0.2%) and
 * none repeats (85-90% of keys at k = 6 or 7), the general draw takes
 * exactly draws 0..k-1 of h.hi, in one pass with no branch but the loop's.
 * Anything else goes to draw_slow. */
static inline void draw(const bk_counting *f, bk_hash h, key_counters *kc)
{
    const width_info *w = f->width;
    const uint32_t draw_bits = w->counters_log2;
    kc->block = block_of(f, h);
    /* Scalar on every level: the offsets go to memory and the update reads
     * them back. Written by one vector store (draw_avx512), those 16-bit
     * reads are not forwarded from the store buffer: they wait until the
     * store retires, that is until the previous key's miss is served, and
     * consecutive adds stop overlapping (an add at 1e8 keys cost a full
     * memory latency). Scalar stores forward. */
    if (f->k <= w->draws_per_word) {
        const uint64_t draw_mask = (UINT64_C(1) << draw_bits) - 1;
        uint64_t pool = h.hi, taken[2] = {0, 0}, repeat = 0;
        for (uint32_t i = 0; i < f->k; i++) {
            uint32_t c = (uint32_t)(pool & draw_mask);
            pool >>= draw_bits;
            repeat |= taken[c >> 6] >> (c & 63);
            taken[c >> 6] |= UINT64_C(1) << (c & 63);
            kc->offset[i] = (uint16_t)(c * w->bits);
        }
        if (BK_LIKELY((repeat & 1) == 0)) return;
    }
    draw_slow(f, h, kc);
}

/* The scalar lookup for k <= draws per word, with the width's constants
 * (bits, draw_bits, max) inlined: the draw of draw() fused with the field
 * tests of all_nonzero(), branch-free on the line's data. Returns 0 (and
 * sets nothing) when two of the k draws repeat: the general draw decides. */
__attribute__((always_inline))
static inline int contains_fast_width(const bk_counting *f, bk_hash h,
                                      int *present, const uint32_t bits,
                                      const uint32_t draw_bits, const uint64_t max)
{
    const uint64_t *block = block_of(f, h);
    uint64_t pool = h.hi, taken[2] = {0, 0}, repeat = 0, zero = 0;
    for (uint32_t i = 0; i < f->k; i++) {
        uint32_t c = (uint32_t)(pool & ((UINT64_C(1) << draw_bits) - 1));
        pool >>= draw_bits;
        repeat |= taken[c >> 6] >> (c & 63);
        taken[c >> 6] |= UINT64_C(1) << (c & 63);
        uint32_t at = c * bits;
        zero |= ((bk__load64(&block[at >> 6]) >> (at & 63)) & max) == 0;
    }
    if (BK_UNLIKELY(repeat & 1)) return 0;
    *present = zero == 0;
    return 1;
}

static inline int contains_fast(const bk_counting *f, bk_hash h, int *present)
{
    if (f->k > f->width->draws_per_word) return 0;
    return f->width->bits == 4 ? contains_fast_width(f, h, present, 4, 7, 15)
                               : contains_fast_width(f, h, present, 8, 6, 255);
}

/* The value of the counter at bit offset `at` of a word. */
static inline uint64_t field_at(const width_info *w, uint64_t word, uint32_t at)
{
    return (word >> (at & 63)) & w->max;
}

/* 1 when all k counters are nonzero. Branch-free: a lookup's answer is
 * unpredictable, and a mispredicted early exit waits for the miss. */
static inline int all_nonzero(const bk_counting *f, const key_counters *kc)
{
    uint64_t zero = 0;
    for (uint32_t i = 0; i < f->k; i++) {
        uint32_t at = kc->offset[i];
        zero |= field_at(f->width, bk__load64(&kc->block[at >> 6]), at) == 0;
    }
    return zero == 0;
}

/* Single-writer +1 (delta > 0) or -1 on each counter with plain loads and
 * stores; saturated counters stay, and -1 is only applied after
 * all_nonzero (the counters are distinct, so none is zero). Returns how
 * many counters crossed zero: were zero before +1, or one before -1 (so
 * nonzero when an add found a counter at zero). */
static inline uint32_t update_plain(const bk_counting *f, const key_counters *kc,
                                    int delta)
{
    const width_info *w = f->width;
    const uint64_t crossing = delta > 0 ? 0 : 1;
    uint32_t crossed = 0;
    for (uint32_t i = 0; i < f->k; i++) {
        uint32_t at = kc->offset[i];
        uint64_t *word = &kc->block[at >> 6];
        uint64_t v = *word, field = field_at(w, v, at);
        uint64_t step = (uint64_t)(field != w->max) << (at & 63);
        crossed += field == crossing;
        *word = delta > 0 ? v + step : v - step;
    }
    return crossed;
}

/* Concurrent +1 or -1: the touched fields of each word (their lowest
 * bits) change together with one compare-and-swap, retried on contention;
 * saturated fields stay and (for -1) zero fields are left at zero rather
 * than wrapping. Returns 1 when a touched field was zero before. */
static int update_atomic(const bk_counting *f, const key_counters *kc,
                         int delta)
{
    uint64_t lsb[WORDS_PER_BLOCK] = {0}, was_zero = 0;
    for (uint32_t i = 0; i < f->k; i++)
        lsb[kc->offset[i] >> 6] |= UINT64_C(1) << (kc->offset[i] & 63);
    for (int i = 0; i < WORDS_PER_BLOCK; i++)
        if (lsb[i] != 0) was_zero |= update_word_atomic(f->width, &kc->block[i], lsb[i], delta);
    return was_zero != 0;
}

static inline int update(const bk_counting *f, const key_counters *kc, int delta)
{
    return f->single_writer ? update_plain(f, kc, delta) != 0
                            : update_atomic(f, kc, delta);
}

static inline uint32_t min_field(const bk_counting *f, const key_counters *kc)
{
    const width_info *w = f->width;
    uint64_t best = w->max;
    for (uint32_t i = 0; i < f->k; i++) {
        uint32_t at = kc->offset[i];
        uint64_t field = field_at(w, bk__load64(&kc->block[at >> 6]), at);
        if (field < best) best = field;
    }
    return (uint32_t)best;
}

/* Count items: plain for the single writer, else atomic. */
static inline void items_add(bk_counting *f, uint64_t n)
{
    if (f->single_writer) f->items += n;
    else if (n) bk__add64(&f->items, n);
}

/*==========================================================================
 * Internals: false-positive maths
 *==========================================================================*/

/* sum_i Poisson(i; lambda) g(i), g(i) = (1 - (1 - k/C)^i)^k, over the
 * Poisson mass that matters (mean +- 12 sd, terms from the mode outwards by
 * the ratio p(i+1)/p(i) = lambda/(i+1)). */
static double blocked_fpr(double lambda, double counters, double k)
{
    const double zero_one = 1.0 - k / counters; /* a counter survives a key */
    if (lambda <= 0.0) return 0.0;
    /* hopelessly overfull blocks: the Poisson mass is relatively narrow and
     * g is flat near 1 there, so g(lambda) is the sum to double precision
     * (and the loops below would run for ever) */
    if (lambda > 1e5) return pow(1.0 - pow(zero_one, lambda), k);
    double mode = floor(lambda);
    double spread = 12.0 * sqrt(lambda) + 20.0;
    double p_mode = exp(-lambda + mode * log(lambda) - lgamma(mode + 1.0));
    double sum = 0.0, p = p_mode;
    for (double i = mode; i <= mode + spread; i += 1.0) {
        sum += p * pow(1.0 - pow(zero_one, i), k);
        p *= lambda / (i + 1.0);
    }
    p = p_mode;
    for (double i = mode; i >= 1.0 && i >= mode - spread; i -= 1.0) {
        p *= i / lambda; /* p(i-1) = p(i) i / lambda */
        sum += p * pow(1.0 - pow(zero_one, i - 1.0), k);
    }
    return sum;
}

double bk_counting_fpr(uint64_t n, uint64_t blocks, uint32_t counter_bits,
                       uint32_t k)
{
    const width_info *w = find_width(counter_bits);
    if (w == NULL || blocks == 0 || k == 0 || k > BK_COUNTING_MAX_HASHES)
        return NAN;
    return blocked_fpr((double)n / (double)blocks,
                       (double)(1u << w->counters_log2), (double)k);
}

/* A sizing: n keys at rate p with k of `counters` counters a block. */
typedef struct sizing {
    uint64_t n;
    double p, counters;
    uint32_t k;
} sizing;

static int sizing_fits(const void *ctx, uint64_t blocks)
{
    const sizing *z = ctx;
    return blocked_fpr((double)z->n / (double)blocks, z->counters, z->k) <= z->p;
}

/* Fewest blocks with fpr <= p for this k, or 0 when above the maximum. */
static uint64_t blocks_for(uint64_t n, double p, double counters, uint32_t k)
{
    const sizing z = {n, p, counters, k};
    return bk__fewest_blocks(1, BK_COUNTING_MAX_BLOCKS, sizing_fits, &z);
}

int bk_counting_optimal(uint64_t n, double p, uint32_t counter_bits,
                        uint64_t *blocks, uint32_t *k)
{
    if (n == 0) return BK_ECAPACITY;
    if (bk__check_fpr(p) != BK_OK) return BK_EFPR;
    const width_info *w = find_width(counter_bits);
    if (w == NULL) return BK_EPARAM;
    const double counters = (double)(1u << w->counters_log2);

    /* The classic optimum is k = log2(1/p); blocking moves it down by one
     * or two, so a window around it contains the best k. */
    int k_classic = (int)ceil(-log2(p));
    int k_lo = k_classic - 5 > 1 ? k_classic - 5 : 1;
    int k_hi = k_classic + 2 < BK_COUNTING_MAX_HASHES ? k_classic + 2
                                                     : BK_COUNTING_MAX_HASHES;
    uint64_t best_blocks = 0;
    uint32_t best_k = 0;
    for (int kk = k_lo; kk <= k_hi; kk++) {
        uint64_t b = blocks_for(n, p, counters, (uint32_t)kk);
        if (b != 0 && (best_blocks == 0 || b < best_blocks))
            best_blocks = b, best_k = (uint32_t)kk;
    }
    if (best_blocks == 0) return BK_ESIZE;
    if (blocks != NULL) *blocks = best_blocks;
    if (k != NULL) *k = best_k;
    return BK_OK;
}

/*==========================================================================
 * API: life cycle
 *==========================================================================*/

static int create_filter(bk_counting **out, uint64_t blocks,
                         uint32_t counter_bits, uint32_t k, uint64_t seed,
                         uint64_t capacity, double target_fpr)
{
    bk_counting *f = NULL;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (blocks == 0 || blocks > BK_COUNTING_MAX_BLOCKS) return BK_ESIZE;
    const width_info *w = find_width(counter_bits);
    if (w == NULL) return BK_EPARAM;
    if (k == 0 || k > BK_COUNTING_MAX_HASHES) return BK_EHASHES;
    if (blocks > SIZE_MAX / BK_COUNTING_BLOCK_BYTES) return BK_ESIZE;

    f = bk__calloc(1, sizeof(*f));
    if (f == NULL) goto fail;
    f->words = bk__calloc_aligned((size_t)blocks * BK_COUNTING_BLOCK_BYTES);
    if (f->words == NULL) goto fail;
    bk__object_init(&f->obj, &counting_ops);
    f->owns_mem = 1;
    f->blocks = blocks;
    f->width = w;
    f->k = k;
    f->seed = seed;
    bk__hash_keys_init(&f->keys, seed);
    f->capacity = capacity;
    f->target_fpr = target_fpr;
    *out = f;
    return BK_OK;

fail:
    bk__free(f);
    return BK_ENOMEM;
}

int bk_counting_create(bk_counting **out, uint64_t capacity, double fpr,
                       uint32_t counter_bits, uint64_t seed)
{
    uint64_t blocks;
    uint32_t k;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    int rc = bk_counting_optimal(capacity, fpr, counter_bits, &blocks, &k);
    if (rc != BK_OK) return rc;
    return create_filter(out, blocks, counter_bits, k, seed, capacity, fpr);
}

int bk_counting_create_params(bk_counting **out, uint64_t blocks,
                              uint32_t counter_bits, uint32_t k,
                              uint64_t seed)
{
    return create_filter(out, blocks, counter_bits, k, seed, 0, 0.0);
}

void bk_counting_free(bk_counting *f)
{
    if (f == NULL) return;
    bk__free_handle(&f->obj, f->owns_mem, f->words);
}

int bk_counting_clone(bk_counting **out, const bk_counting *src)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (src == NULL) return BK_EINVAL;
    int rc = create_filter(out, src->blocks, src->width->bits, src->k,
                           src->seed, src->capacity, src->target_fpr);
    if (rc != BK_OK) return rc;
    uint64_t nwords = src->blocks * WORDS_PER_BLOCK;
    for (uint64_t i = 0; i < nwords; i++)
        (*out)->words[i] = bk__load64(&src->words[i]);
    (*out)->items = bk__load64(&src->items);
    return BK_OK;
}

void bk_counting_clear(bk_counting *f)
{
    if (f == NULL) return;
    memset(f->words, 0, (size_t)f->blocks * BK_COUNTING_BLOCK_BYTES);
    f->items = 0;
}

int bk_counting_set_single_writer(bk_counting *f, int single_writer)
{
    if (f == NULL) return BK_EINVAL;
    f->single_writer = single_writer != 0;
    return BK_OK;
}

int bk_counting_single_writer(const bk_counting *f)
{
    return f->single_writer;
}

/*==========================================================================
 * API: single keys
 *==========================================================================*/

/* The general paths: any k, any CPU, either write mode. Out of line, so
 * that the AVX-512 entry points below keep a frame without spills. */
__attribute__((noinline)) static int add_general(bk_counting *f, bk_hash h)
{
    key_counters kc;
    draw(f, h, &kc);
    return update(f, &kc, +1);
}

/* items counts keys believed present; it never goes below zero even if a
 * caller removes what it did not add. */
static void items_remove_one(bk_counting *f)
{
    if (f->single_writer) {
        f->items -= f->items > 0;
        return;
    }
    uint64_t items = bk__load64(&f->items);
    while (items > 0 &&
           !__atomic_compare_exchange_n(&f->items, &items, items - 1, 1,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

__attribute__((noinline)) static int remove_general(bk_counting *f, bk_hash h)
{
    key_counters kc;
    draw(f, h, &kc);
    if (!all_nonzero(f, &kc)) return BK_ENOTFOUND;
    update(f, &kc, -1);
    items_remove_one(f);
    return BK_OK;
}

__attribute__((noinline)) static int contains_general(const bk_counting *f, bk_hash h)
{
    int present;
    if (BK_LIKELY(contains_fast(f, h, &present))) return present;
    key_counters kc;
    draw(f, h, &kc);
    return all_nonzero(f, &kc);
}

/* The AVX-512 entry points: the draw, the test or the single writer's
 * update in one small frame, the general path out of line for the keys
 * whose first k draws repeat. With the hash inlined into the public
 * function, a call is one level deep and carries no spills, so the CPU
 * keeps consecutive calls' lines in flight (as in blocked.c). */
#if BK_COUNTING_X86
__attribute__((target("avx512f,avx512cd"), noinline))
static int contains_entry_avx512(const bk_counting *f, bk_hash h)
{
    int present;
    if (BK_LIKELY(contains_avx512(f, h, &present))) return present;
    return contains_general(f, h);
}

/* +1 (delta > 0) or -1 of the key's counters in the filter's write mode:
 * returns 0 when the general draw must decide, else sets *result as
 * update_plain_avx512 does. TSan builds keep the single writer's update
 * scalar (its line store is not an atomic one). */
__attribute__((target("avx512f,avx512cd")))
static inline int update_avx512(bk_counting *f, bk_hash h, int delta, int *result)
{
#if !BK_COUNTING_TSAN
    if (f->single_writer) return update_plain_avx512(f, h, delta, result);
#else
    if (f->single_writer) return 0;
#endif
    return update_atomic_avx512(f, h, delta, result);
}

__attribute__((target("avx512f,avx512cd"), noinline))
static int remove_entry_avx512(bk_counting *f, bk_hash h)
{
    int removed;
    if (BK_UNLIKELY(!update_avx512(f, h, -1, &removed))) return remove_general(f, h);
    if (!removed) return BK_ENOTFOUND;
    items_remove_one(f);
    return BK_OK;
}

__attribute__((target("avx512f,avx512cd"), noinline))
static int add_avx512(bk_counting *f, bk_hash h)
{
    int fresh;
    if (BK_LIKELY(update_avx512(f, h, +1, &fresh))) return fresh;
    return add_general(f, h);
}
#endif

/* Which path: AVX-512 or general. An add returns 1 when a counter was
 * zero (the key was new) and leaves the item count to its caller (a batch
 * counts once at the end). */
static inline int add_uncounted(bk_counting *f, bk_hash h)
{
#if BK_COUNTING_X86
    if (use_simd(f)) return add_avx512(f, h);
#endif
    return add_general(f, h);
}

static inline int add_one(bk_counting *f, bk_hash h)
{
    int fresh = add_uncounted(f, h);
    items_add(f, (uint64_t)fresh);
    return fresh;
}

static inline int remove_one(bk_counting *f, bk_hash h)
{
#if BK_COUNTING_X86
    if (use_simd(f)) return remove_entry_avx512(f, h);
#endif
    return remove_general(f, h);
}

static inline int contains_one(const bk_counting *f, bk_hash h)
{
#if BK_COUNTING_X86
    if (use_simd(f)) return contains_entry_avx512(f, h);
#endif
    return contains_general(f, h);
}

int bk_counting_add_hash(bk_counting *f, bk_hash h) { return add_one(f, h); }
int bk_counting_remove_hash(bk_counting *f, bk_hash h) { return remove_one(f, h); }
int bk_counting_contains_hash(const bk_counting *f, bk_hash h) { return contains_one(f, h); }

uint32_t bk_counting_count_hash(const bk_counting *f, bk_hash h)
{
    key_counters kc;
    draw(f, h, &kc);
    return min_field(f, &kc);
}

int bk_counting_add_if_absent_hash(bk_counting *f, bk_hash h)
{
    key_counters kc;
    draw(f, h, &kc);
    if (all_nonzero(f, &kc)) return 0;
    update(f, &kc, +1);
    items_add(f, 1);
    return 1;
}

/* The key entry points hash inline (bk__hash), one call deep. */
int bk_counting_add(bk_counting *f, const void *key, size_t len)
{
    return add_one(f, bk__hash_keyed(&f->keys, key, len));
}

int bk_counting_remove(bk_counting *f, const void *key, size_t len)
{
    return remove_one(f, bk__hash_keyed(&f->keys, key, len));
}

int bk_counting_contains(const bk_counting *f, const void *key, size_t len)
{
    return contains_one(f, bk__hash_keyed(&f->keys, key, len));
}

uint32_t bk_counting_count(const bk_counting *f, const void *key, size_t len)
{
    return bk_counting_count_hash(f, bk_hash_key(key, len, f->seed));
}

int bk_counting_add_if_absent(bk_counting *f, const void *key, size_t len)
{
    return bk_counting_add_if_absent_hash(f, bk_hash_key(key, len, f->seed));
}

/*==========================================================================
 * API: batches (one cache line per key: hash ahead, prefetch the block)
 *==========================================================================*/

/* The loop's callbacks (batch.h): constants once inlined. Adds are
 * counted once for the batch (items_add). */
static void batch_prefetch(const void *f, bk_hash h, int adding)
{
    if (adding) BK_PREFETCH_WRITE(block_of(f, h));
    else BK_PREFETCH_READ(block_of(f, h));
}
static int batch_add(void *f, bk_hash h) { return add_uncounted(f, h); }
static int batch_contains(const void *f, bk_hash h) { return bk_counting_contains_hash(f, h); }

static int64_t run_batch(bk_counting *f, const void *const *keys,
                         const size_t *lens, size_t n, uint8_t *results,
                         int is_add)
{
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    int64_t hits = bk__hash_ahead_batch(f, f->seed, keys, lens, n, results, is_add, BATCH_AHEAD,
                                        is_add, batch_prefetch, batch_add, batch_contains);
    if (is_add) items_add(f, (uint64_t)hits);
    return hits;
}

int64_t bk_counting_add_batch(bk_counting *f, const void *const *keys,
                              const size_t *lens, size_t n, uint8_t *results)
{
    return run_batch(f, keys, lens, n, results, 1);
}

int64_t bk_counting_contains_batch(const bk_counting *f,
                                   const void *const *keys,
                                   const size_t *lens, size_t n,
                                   uint8_t *results)
{
    /* run_batch writes nothing to f when is_add is 0 */
    return run_batch((bk_counting *)f, keys, lens, n, results, 0);
}

/*==========================================================================
 * API: statistics
 *==========================================================================*/

uint64_t bk_counting_blocks(const bk_counting *f) { return f->blocks; }
uint32_t bk_counting_counter_bits(const bk_counting *f) { return f->width->bits; }
uint32_t bk_counting_hashes(const bk_counting *f) { return f->k; }
uint64_t bk_counting_seed(const bk_counting *f) { return f->seed; }
uint64_t bk_counting_items(const bk_counting *f) { return bk__load64(&f->items); }

size_t bk_counting_bytes(const bk_counting *f)
{
    return sizeof(*f) + (size_t)f->blocks * BK_COUNTING_BLOCK_BYTES +
           BK_CACHE_LINE + sizeof(void *);
}

/* P(k distinct counters drawn from C all land on the z nonzero ones):
 * C(z, k) / C(C, k). */
static double block_hit_probability(uint32_t z, uint32_t counters, uint32_t k)
{
    double p = 1.0;
    for (uint32_t j = 0; j < k; j++) {
        if (z <= j) return 0.0;
        p *= (double)(z - j) / (double)(counters - j);
    }
    return p;
}

int bk_counting_get_stats(const bk_counting *f, bk_counting_stats *out)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    const width_info *w = f->width;
    const uint32_t per_block = 1u << w->counters_log2;
    memset(out, 0, sizeof(*out));
    out->blocks = f->blocks;
    out->counters = f->blocks * per_block;
    out->counter_bits = w->bits;
    out->hashes = f->k;
    out->seed = f->seed;
    out->capacity = f->capacity;
    out->target_fpr = f->target_fpr;
    out->items = bk__load64(&f->items);

    double fpr_sum = 0.0;
    for (uint64_t b = 0; b < f->blocks; b++) {
        uint32_t nonzero = 0;
        for (int i = 0; i < WORDS_PER_BLOCK; i++) {
            uint64_t v = bk__load64(&f->words[b * WORDS_PER_BLOCK + i]);
            nonzero += (uint32_t)bk__popcount64(nonzero_fields(w, v));
            out->counters_saturated += bk__popcount64(saturated_fields(w, v));
        }
        out->counters_nonzero += nonzero;
        fpr_sum += block_hit_probability(nonzero, per_block, f->k);
    }
    out->fill = (double)out->counters_nonzero / (double)out->counters;
    out->fpr_now = fpr_sum / (double)f->blocks;
    out->fpr_at_capacity =
        f->capacity ? bk_counting_fpr(f->capacity, f->blocks, w->bits, f->k)
                    : 0.0;
    out->bytes = bk_counting_bytes(f);
    double table = (double)f->blocks * BK_COUNTING_BLOCK_BYTES;
    out->bytes_per_item = out->items ? table / (double)out->items : 0.0;
    out->bytes_per_capacity_item =
        f->capacity ? table / (double)f->capacity : 0.0;
    return BK_OK;
}

/*==========================================================================
 * The generic filter and the file format
 *==========================================================================*/

BK__FAMILY_CASTS(counting, counting_ops)

BK__OPS_SEED_DESTROY(counting)
BK__OPS_ONE_PART
BK__OPS_CLEAR_CLONE(counting)
BK__OPS_BATCHES(counting)

/* Image: one part; m = blocks, k, width = counter bits, the counters as
 * 64-bit little-endian words (blocks * 8 of them). */

#define LOCKFREE_ADD 1 /* CAS on words */

static int ops_add(void *f, bk_hash h) { return bk_counting_add_hash(f, h); }
static int ops_contains(const void *f, bk_hash h) { return bk_counting_contains_hash(f, h); }
static int ops_remove(void *f, bk_hash h) { return bk_counting_remove_hash(f, h); }
static int64_t ops_count(const void *f, bk_hash h) { return bk_counting_count_hash(f, h); }

/* ops_info's fields that need no pass over the counters. */
static int ops_summary(const void *vf, bk_filter_info *out)
{
    const bk_counting *f = vf;
    out->seed = f->seed;
    out->capacity = f->capacity;
    out->target_fpr = f->target_fpr;
    out->items = bk__load64(&f->items);
    out->fpr_at_capacity = f->capacity ? bk_counting_fpr(f->capacity, f->blocks,
                                                         f->width->bits, f->k)
                                       : 0.0;
    out->bytes = bk_counting_bytes(f);
    out->parts = 1;
    out->single_writer = f->single_writer;
    return BK_OK;
}

static int ops_info(const void *vf, bk_filter_info *out)
{
    bk_counting_stats st;
    int rc = bk_counting_get_stats(vf, &st);
    if (rc != BK_OK) return rc;
    BK__INFO_FROM_STATS(out, st, (double)st.items);
    out->single_writer = ((const bk_counting *)vf)->single_writer;
    return BK_OK;
}

static void ops_set_single_writer(void *f, int single_writer)
{
    bk_counting_set_single_writer(f, single_writer);
}

static int ops_create(const bk_filter_config *cfg, void **out)
{
    uint32_t bits = cfg->counter_bits ? cfg->counter_bits : BK_COUNTING_DEFAULT_COUNTER_BITS;
    return bk_counting_create((bk_counting **)out, cfg->capacity, cfg->fpr, bits, cfg->seed);
}

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_counting *f = vf;
    bk__part *p = &img->parts[0];
    img->seed = f->seed;
    img->capacity = p->capacity = f->capacity;
    img->fpr = p->fpr = f->target_fpr;
    img->items = p->items = bk__load64(&f->items);
    p->m = f->blocks;
    p->k = f->k;
    p->width = (uint8_t)f->width->bits;
    p->data = f->words;
    p->length = f->blocks * BK_COUNTING_BLOCK_BYTES;
    return BK_OK;
}

static int ops_restore(const bk__image *img, void **out)
{
    const bk__part *p = &img->parts[0];
    if (img->nparts != 1) return BK_ECORRUPT;
    const width_info *w = find_width(p->width);
    if (w == NULL || p->m == 0 || p->m > BK_COUNTING_MAX_BLOCKS ||
        p->length != p->m * BK_COUNTING_BLOCK_BYTES)
        return BK_ECORRUPT;
    if (p->k == 0 || p->k > BK_COUNTING_MAX_HASHES || p->k > (UINT32_C(1) << w->counters_log2))
        return BK_ECORRUPT;
    if (!bk__valid_stored_fpr(img->fpr) || (img->fpr == 0.0) != (img->capacity == 0))
        return BK_ECORRUPT;
    bk_counting *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &counting_ops);
    f->words = p->data;
    f->owns_mem = 0;
    f->blocks = p->m;
    f->width = w;
    f->k = p->k;
    f->seed = img->seed;
    bk__hash_keys_init(&f->keys, img->seed);
    f->capacity = img->capacity;
    f->target_fpr = img->fpr;
    f->items = img->items;
    *out = f;
    return BK_OK;
}


/* The handle and, unless borrowed from a loaded block, the counters. */
static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_counting *f = vf;
    bk__visit_handle(f, sizeof(*f), f->owns_mem, f->words,
                     (size_t)f->blocks * BK_COUNTING_BLOCK_BYTES, visit, ctx);
}

/* Auto-clear's view (filter.h): counters, and updates that count the
 * counters they made nonzero (an add) or zero (a remove). Plain stores: the
 * auto-clear filter is the only writer. */
static uint64_t fill_units(const void *vf)
{
    const bk_counting *f = vf;
    return f->blocks << f->width->counters_log2;
}

static uint64_t fill_count_set(const void *vf)
{
    const bk_counting *f = vf;
    uint64_t t = 0, nwords = f->blocks * WORDS_PER_BLOCK;
    for (uint64_t i = 0; i < nwords; i++)
        t += bk__popcount64(nonzero_fields(f->width, bk__load64(&f->words[i])));
    return t;
}

__attribute__((always_inline)) static inline int fill_add_inline(bk_counting *f, bk_hash h,
                                                                 uint64_t *newly_set)
{
#ifdef BK_COUNTING_ADD_COUNTED
    uint32_t zero;
    if (use_simd(f) && add_counted_avx512(f, h, &zero)) {
        f->items += zero != 0;
        *newly_set = zero;
        return zero != 0;
    }
#endif
    key_counters kc;
    draw(f, h, &kc);
    uint64_t n = update_plain(f, &kc, +1);
    f->items += n != 0;
    *newly_set = n;
    return n != 0;
}

static int fill_add(void *f, bk_hash h, uint64_t *newly_set)
{
    return fill_add_inline(f, h, newly_set);
}

/* The hash and the fill add in one call (auto-clear's bk_filter_add). */
static int fill_add_key(void *vf, const void *key, size_t len, bk__fill_counts *c)
{
    bk_counting *f = vf;
    uint64_t n;
    int rc = fill_add_inline(f, bk__hash_keyed(&f->keys, key, len), &n);
    c->set += n;
    c->items += (uint64_t)rc;
    return rc;
}

/* Rotate mode's add (auto-clear): the key into f, its block in prev (the
 * same place: the same shape and seed) fetched alongside, and tested when
 * the key was new in f; with AVX-512 from the one draw of its counters. */
static int fill_add_key_rotate(void *vf, const void *vprev, const void *key, size_t len,
                               bk__fill_counts *c)
{
    bk_counting *f = vf;
    const bk_counting *prev = vprev;
    bk_hash h = bk__hash_keyed(&f->keys, key, len);
#ifdef BK_COUNTING_ADD_COUNTED
    uint32_t zero;
    int in_prev;
    if (use_simd(f) && add_rotate_avx512(f, prev, h, &zero, &in_prev)) {
        uint64_t fresh = zero != 0;
        f->items += fresh;
        c->items += fresh;
        c->set += zero;
        return (int)fresh & !in_prev;
    }
#endif
    BK_PREFETCH_READ(block_of(prev, h));
    uint64_t n;
    int rc = fill_add_inline(f, h, &n);
    c->set += n;
    c->items += (uint64_t)rc;
    if (rc == 1 && contains_one(prev, h)) rc = 0;
    return rc;
}

static int fill_remove(void *vf, bk_hash h, uint64_t *newly_clear)
{
    bk_counting *f = vf;
    key_counters kc;
    draw(f, h, &kc);
    *newly_clear = 0;
    if (!all_nonzero(f, &kc)) return BK_ENOTFOUND;
    *newly_clear = update_plain(f, &kc, -1);
    f->items -= f->items > 0;
    return BK_OK;
}

/* A counter is touched by a key when the key picks its block (1 / b) and
 * it is one of the key's k distinct counters there (k / C). */
static double fill_at(const void *vf, uint64_t n)
{
    const bk_counting *f = vf;
    double per_block = (double)(1u << f->width->counters_log2);
    double touch = (double)f->k / per_block / (double)f->blocks;
    return -expm1((double)n * log1p(-touch));
}

static const bk__fill_ops counting_fill = {fill_units,  fill_count_set, fill_at,
                                           fill_add,    fill_remove,    fill_add_key,
                                           fill_add_key_rotate};

static const bk__family_ops counting_ops = {
    .family = BK_FAMILY_COUNTING,
    .name = "counting",
    BK__OPS_STANDARD,
    .remove = ops_remove, .count = ops_count, .add_batch = ops_add_batch,
    .contains_batch = ops_contains_batch, .lockfree_add = LOCKFREE_ADD,
    .set_single_writer = ops_set_single_writer, .summary = ops_summary, .clone = ops_clone,
    .clear = ops_clear, .fill = &counting_fill,
};

const bk__family_ops *const bk__counting_family = &counting_ops;
