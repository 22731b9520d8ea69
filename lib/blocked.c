/*
 * blocked.c - the cache-blocked Bloom filter (Putze, Sanders & Singler,
 * "Cache-, hash- and space-efficient Bloom filters", WEA 2007, section 3).
 *
 * Structure
 *   b blocks of 512 bits (one 64-byte cache line), stored as 8 * b 64-bit
 *   words, 64-byte aligned. A key is hashed once (XXH3-128 with the
 *   filter's seed, h = (lo, hi)); fast range on h.lo picks its block,
 *       block = fastrange64(h.lo, b),
 *   and the low 32 bits of h.hi, x, place its k bits inside that block by
 *   multiply-shift with k fixed odd 32-bit constants ("salts"):
 *       pos_i = (uint32_t)(x * SALT[i]) >> 23        (9 bits, 0..511)
 *   Bit pos of a block is bit (pos & 63) of its word pos >> 6. So a lookup
 *   reads one cache line, whatever k is, and an add writes one.
 *
 * The split layout (bk_blocked_create_split)
 *   A second layout, chosen at creation and recorded in the file (hash
 *   algorithm 2, part flag 1): the key is hashed with XXH3-64 (h.lo = h.hi
 *   = its 64 bits), the block is fastrange64(h, b) as above, and with x the
 *   low 32 bits the key sets exactly one bit in each of the block's eight
 *   64-bit words, bit (x * SALT[i]) >> 26 of word i (k = 8 always). The
 *   mask is then four vector instructions instead of about five per
 *   probe, and the hash half of XXH3-128's work: single calls on a filter
 *   far larger than the caches overlap more of their cache misses (a
 *   call's instructions, not its memory access, limit how many are in
 *   flight; bench/HISTORY.md sections 12-13). It costs bits: an absent key
 *   passes a block of i keys with probability (1 - (63/64)^i)^8, which at
 *   1% needs 10.1 bits per key against 9.9 here. Filters of the two
 *   layouts never combine (BK_EINCOMPAT), and only a standalone blocked
 *   filter may be split: the families that embed blocked filters hash once
 *   for all of them with XXH3-128.
 *
 * Layout promise
 *   The salts, the 512-bit block and the bit numbering above are part of
 *   the filter's definition: they never depend on the CPU. The scalar code
 *   is the reference; the AVX2 and AVX-512 paths build the same 512-bit
 *   mask (x86 is little-endian, so 32-bit lane L of a block holds bits
 *   32L..32L+31, exactly the bits the scalar code numbers that way). Which
 *   path runs is chosen once per process from the CPU (or forced with
 *   bk_blocked_set_simd_level); a filter built by one answers identically
 *   under any other, on any machine.
 *
 * False positives
 *   Keys fall into blocks unevenly: a block receives i keys with binomial
 *   probability P(i) = C(n, i) q^i (1 - q)^(n - i), q = 1 / b, and an
 *   absent key mapped to it is found with the rate r_k(i) of a 512-bit
 *   filter holding i keys. So (Putze et al. 2007, section 3)
 *       fpr(n, b, k) = sum_i P(i) r_k(i).
 *   Putze et al. take the Poisson load and the classic approximation
 *   r_k(i) ~ (1 - (1 - 1/512)^(ik))^k; we use the exact binomial (tiny
 *   filters are exact too) and the exact r_k(i) (see block_model below):
 *   on one cache line the approximation is 1-3% optimistic, enough for a
 *   filter sized by it to miss its target. Overloaded blocks cost more
 *   than underloaded ones save, so a blocked filter needs more bits than a
 *   classic one for the same rate (9.9 instead of 9.6 bits per key at 1%,
 *   15.5 instead of 14.4 at 0.1%) and a smaller k. Sizing searches the
 *   smallest b for which the best k in 1..BK_BLOCKED_MAX_HASHES meets the
 *   target (about a millisecond), and remembers the last 16 (n, p) pairs it
 *   answered, so that creating many filters of one shape costs
 *   microseconds each.
 *
 * Write modes and concurrency
 *   Lookups never write and never branch on the line's contents (see the
 *   SIMD section); they read words with relaxed atomic loads, or one vector
 *   load (safe for the reason given there). Adds first find which of the
 *   key's bits are missing and write nothing when none is. Otherwise:
 *     concurrent (the default): each 64-bit word that misses bits gets one
 *       relaxed atomic OR (`lock or`, its result unused), so concurrent adds
 *       and lookups are lock-free and free of data races; an add answers 1
 *       when a bit was missing when it read the line, so two threads adding
 *       the same new key at once may both answer 1 (and both count it);
 *     single-writer (bk_blocked_set_single_writer): plain loads and stores,
 *       writing only the words that change (AVX-512: one masked store).
 *       Locked instructions are full barriers, so only this mode lets
 *       consecutive adds overlap their cache misses; the caller guarantees
 *       that nothing else uses the filter while it adds.
 *   Both modes store the same bits and give the same answers. The item
 *   count sits on its own cache line so that adds do not evict the fields
 *   every call reads.
 *
 * Batches
 *   A window of keys is hashed ahead of the probes and their blocks are
 *   prefetched, so that up to BATCH_AHEAD cache misses are in flight at
 *   once instead of one: on a filter much larger than the caches this is
 *   where the speed comes from.
 *
 * What it cannot do
 *   Delete, grow or forget (see the counting, scalable and window filters).
 *   k is at most 16 (BK_BLOCKED_MAX_HASHES): very small rates are reached
 *   with more bits per key rather than more probes. Only 32 bits of hash
 *   place bits within a block, so two keys in one block have the same
 *   pattern with probability 2^-32: far below any rate the filter is sized
 *   for.
 */
#include <math.h>   /* log1p, log, pow, sqrt, exp */
#include <pthread.h> /* pthread_once: the sizing models are built once */
#include <stdio.h>  /* snprintf */
#include <string.h> /* memset, memcpy */

#include "family_util.h"
#include "hash.h"

#if defined(__x86_64__) && defined(__GNUC__)
#  define BK_BLOCKED_X86 1
#  include <immintrin.h> /* AVX2 / AVX-512 intrinsics, used in target() functions */
#else
#  define BK_BLOCKED_X86 0
#endif

/* ThreadSanitizer builds read lines through atomics only (see SIMD code). */
#if defined(__SANITIZE_THREAD__)
#  define BK_BLOCKED_TSAN 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define BK_BLOCKED_TSAN 1
#  endif
#endif
#ifndef BK_BLOCKED_TSAN
#  define BK_BLOCKED_TSAN 0
#endif

/*==========================================================================
 * Types
 *==========================================================================*/

#define BLOCK_BITS 512
#define BLOCK_WORDS 8 /* 64-bit words per block */
#define PART_SPLIT 1u /* part flag: the split layout */

struct bk_blocked {
    bk__object obj;     /* first: a bk_blocked is also a bk_filter */
    uint64_t *words;    /* 8 * nblocks words, 64-byte aligned */
    uint64_t nblocks;   /* b */
    uint32_t k;         /* bits per key, all in one block */
    uint32_t split;     /* 1: the split layout (XXH3-64, k = 8) */
    uint64_t seed;      /* of the key hash */
    union {             /* the seed's share of the key hash, worked out once */
        bk__hash_keys h;  /* XXH3-128: the default layout */
        bk__xxh64_keys x; /* XXH3-64: the split layout */
    } keys;
    uint64_t capacity;  /* n it was sized for, 0 if unknown */
    double target_fpr;  /* p it was sized for, 0 if unknown */
    int owns_words;     /* 0 when words live in a loaded block or mapping */
    int single_writer;  /* adds use plain stores (bk_blocked_set_single_writer) */
    /* items is written by every fresh add: on its own cache line, so that
     * concurrent adds do not evict the read-mostly fields above */
    char pad[BK_CACHE_LINE];
    uint64_t items;     /* adds that returned 1; atomic unless single_writer */
};

static const bk__family_ops blocked_ops; /* at the end of this file */

/* Odd multipliers for the in-block positions: the upper 32 bits of
 * splitmix64 outputs from state 0, forced odd. Part of the layout: never
 * change them. */
static const uint32_t SALT[BK_BLOCKED_MAX_HASHES] = {
    0xe220a839u, 0x6e789e6bu, 0x06c45d19u, 0xf88bb8a9u,
    0x1b39896bu, 0x53cb9f0du, 0x2c829abfu, 0xc584133bu,
    0x3ee57891u, 0xf3b8488du, 0x657eecddu, 0xc2d326e1u,
    0x8621a03fu, 0x8e1f7555u, 0xb54e0f17u, 0x84bb3f97u,
};

/* Keys hashed ahead of the probes in the batch paths. One miss per key, so
 * the window is the number of misses in flight; 32 covers DRAM latency with
 * room to spare and its hashes stay in L1. */
#define BATCH_AHEAD 32

/* The three per-key operations of one SIMD level, on the key's line (the 8
 * words of its block) and x, the 32 bits that place its k bits. The add
 * functions return 1 when at least one of the key's bits was clear (the
 * key was certainly new) and leave the item count to the caller. */
typedef int (*contains_fn)(const uint64_t *line, uint32_t x, uint32_t k);
typedef int (*add_fn)(uint64_t *line, uint32_t x, uint32_t k);

typedef int64_t (*batch_fn)(bk_blocked *f, const void *const *keys,
                            const size_t *lens, size_t n, uint8_t *results,
                            int is_add);

/* A whole single-key call (hash, line, test or add and count): the split
 * layout's bk_blocked_contains and bk_blocked_add jump straight into one. */
typedef int (*key_contains_fn)(const bk_blocked *f, const void *key, size_t len);
typedef int (*key_add_fn)(bk_blocked *f, const void *key, size_t len);

/* The per-key functions of one layout at one level. */
typedef struct layout_impl {
    contains_fn contains; /* branch-free test of the key's bits */
    add_fn add_plain;     /* single writer: plain loads and stores */
    add_fn add_atomic;    /* concurrent: atomic OR of the missing bits */
    batch_fn run_batch;
    key_contains_fn contains_key; /* split layout only (else NULL) */
    key_add_fn add_key;           /* split layout only (else NULL) */
} layout_impl;

/* One row per SIMD level: [0] the free layout, [1] the split one. */
typedef struct simd_impl {
    int level; /* BK_SIMD_* */
    layout_impl layout[2];
} simd_impl;

/* Bit i set for each of the k probe lanes. */
static inline uint32_t probe_lanes(uint32_t k)
{
    return (uint32_t)((UINT64_C(1) << k) - 1);
}

/*==========================================================================
 * Internals: the reference (scalar) code
 *==========================================================================*/

static inline uint32_t in_block_position(uint32_t x, uint32_t i)
{
    return (uint32_t)(x * SALT[i]) >> 23;
}

static inline void mask_scalar(uint32_t x, uint32_t k,
                               uint64_t mask[BLOCK_WORDS])
{
    for (int w = 0; w < BLOCK_WORDS; w++) mask[w] = 0;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t pos = in_block_position(x, i);
        mask[pos >> 6] |= UINT64_C(1) << (pos & 63);
    }
}

/* Branch-free: bit 0 of `clear` collects the complement of every probed
 * bit, so the loop runs k times whatever the line holds. */
static inline int contains_scalar(const uint64_t *line, uint32_t x, uint32_t k)
{
    uint64_t clear = 0;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t pos = in_block_position(x, i);
        clear |= ~bk__load64(&line[pos >> 6]) >> (pos & 63);
    }
    return (clear & 1) == 0;
}

/* ORs missing[w] into the words that need it: a relaxed atomic OR whose
 * result is unused (one `lock or`, no compare-and-swap loop), skipped for
 * words that already hold their bits. */
static inline void or_missing_atomic(uint64_t *line,
                                     const uint64_t missing[BLOCK_WORDS])
{
    for (int w = 0; w < BLOCK_WORDS; w++)
        if (missing[w]) (void)__atomic_fetch_or(&line[w], missing[w], __ATOMIC_RELAXED);
}

static inline int add_plain_scalar(uint64_t *line, uint32_t x, uint32_t k)
{
    uint64_t mask[BLOCK_WORDS], fresh = 0;
    mask_scalar(x, k, mask);
    for (int w = 0; w < BLOCK_WORDS; w++) {
        uint64_t old = line[w], missing = mask[w] & ~old;
        if (missing) line[w] = old | missing; /* only words that change */
        fresh |= missing;
    }
    return fresh != 0;
}

static inline int add_atomic_scalar(uint64_t *line, uint32_t x, uint32_t k)
{
    uint64_t mask[BLOCK_WORDS], missing[BLOCK_WORDS], fresh = 0;
    mask_scalar(x, k, mask);
    for (int w = 0; w < BLOCK_WORDS; w++) {
        missing[w] = mask[w] & ~bk__load64(&line[w]);
        fresh |= missing[w];
    }
    or_missing_atomic(line, missing);
    return fresh != 0;
}

/* The split layout (BK_BLOCKED_SPLIT): probe i sets one bit of 64-bit word
 * i, bit (x SALT[i]) >> 26, for i < 8, so the key's mask needs no search
 * for the word of each probe (the split-block design of Impala, Kudu and
 * Parquet, with 64-bit words in bloomkit's 512-bit lines). */
#define SPLIT_K 8

static inline uint64_t split_bit(uint32_t x, uint32_t i)
{
    return UINT64_C(1) << ((uint32_t)(x * SALT[i]) >> 26);
}

static inline int contains_split_scalar(const uint64_t *line, uint32_t x, uint32_t k)
{
    uint64_t clear = 0;
    (void)k;
    for (uint32_t i = 0; i < SPLIT_K; i++) clear |= split_bit(x, i) & ~bk__load64(&line[i]);
    return clear == 0;
}

static inline int add_plain_split_scalar(uint64_t *line, uint32_t x, uint32_t k)
{
    uint64_t fresh = 0;
    (void)k;
    for (uint32_t i = 0; i < SPLIT_K; i++) {
        uint64_t old = line[i], missing = split_bit(x, i) & ~old;
        if (missing) line[i] = old | missing;
        fresh |= missing;
    }
    return fresh != 0;
}

static inline int add_atomic_split_scalar(uint64_t *line, uint32_t x, uint32_t k)
{
    uint64_t missing[BLOCK_WORDS], fresh = 0;
    (void)k;
    for (uint32_t i = 0; i < SPLIT_K; i++) {
        missing[i] = split_bit(x, i) & ~bk__load64(&line[i]);
        fresh |= missing[i];
    }
    or_missing_atomic(line, missing);
    return fresh != 0;
}

/*==========================================================================
 * Internals: SIMD code
 *
 * Lookups (RocksDB's FastLocalBloom does the same with 8 probes): the k
 * positions are computed at once in 32-bit lanes (one vector multiply and
 * shift), the line is loaded into registers as 16 32-bit words, and each
 * lane fetches the word holding its bit with one permute (vpermd: AVX-512
 * over all 16 words; AVX2 over each half, then a blend on bit 3 of the word
 * number). One shift and one test per lane then answer for all k bits at
 * once, with no branch on the loaded data, so consecutive lookups overlap
 * their cache misses.
 *
 * Adds build the key's 512-bit mask: each probe's one-hot vector is a
 * variable shift of 1 by (pos - 32 L) in 32-bit lane L, in range only in
 * the lane that holds bit pos (a count of 32 or more, negative ones
 * included as unsigned, shifts the 1 out). The single-writer add then
 * writes only the 32-bit words that change (an AVX-512 masked store: no
 * write at all, and no branch, when the line already holds the key); the
 * concurrent add ORs each 64-bit word that misses bits with one atomic OR.
 *
 * Reading the line with a vector load while other threads OR bits in is
 * safe on x86: every aligned 8-byte element of the load is read as a whole
 * (Intel SDM vol. 3A, 9.1.1), and adds only set bits, so a lookup sees each
 * word as it was at some moment, exactly as with relaxed atomic loads.
 * ThreadSanitizer cannot know that, so a TSan build assembles the same
 * vector from eight relaxed atomic loads instead (same answers, slower).
 *==========================================================================*/

#if BK_BLOCKED_X86

__attribute__((target("avx2")))
static inline void load_halves_avx2(const uint64_t *line, __m256i *lo, __m256i *hi)
{
#if BK_BLOCKED_TSAN
    *lo = _mm256_setr_epi64x((long long)bk__load64(&line[0]), (long long)bk__load64(&line[1]),
                             (long long)bk__load64(&line[2]), (long long)bk__load64(&line[3]));
    *hi = _mm256_setr_epi64x((long long)bk__load64(&line[4]), (long long)bk__load64(&line[5]),
                             (long long)bk__load64(&line[6]), (long long)bk__load64(&line[7]));
#else
    *lo = _mm256_load_si256((const __m256i *)(const void *)line);
    *hi = _mm256_load_si256((const __m256i *)(const void *)(line + 4));
#endif
}

__attribute__((target("avx2")))
static inline __m256i positions_avx2(uint32_t x, int first)
{
    return _mm256_srli_epi32(
        _mm256_mullo_epi32(_mm256_set1_epi32((int)x),
                           _mm256_loadu_si256((const __m256i *)(const void *)&SALT[first])),
        23);
}

/* Bit i set when probe lane i (of 8) finds its bit clear. */
__attribute__((target("avx2")))
static inline uint32_t clear_lanes_avx2(__m256i lo, __m256i hi, __m256i pos)
{
    const __m256i one = _mm256_set1_epi32(1);
    __m256i word_no = _mm256_srli_epi32(pos, 5); /* 0..15; vpermd uses bits 0-2 */
    __m256 from_lo = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(lo, word_no));
    __m256 from_hi = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(hi, word_no));
    __m256 upper = _mm256_castsi256_ps(_mm256_slli_epi32(word_no, 28)); /* bit 3 -> sign */
    __m256i word = _mm256_castps_si256(_mm256_blendv_ps(from_lo, from_hi, upper));
    __m256i bit = _mm256_sllv_epi32(one, _mm256_and_si256(pos, _mm256_set1_epi32(31)));
    __m256i clear = _mm256_cmpeq_epi32(_mm256_and_si256(word, bit), _mm256_setzero_si256());
    return (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(clear));
}

__attribute__((target("avx2")))
static inline int contains_avx2(const uint64_t *line, uint32_t x, uint32_t k)
{
    __m256i lo, hi;
    load_halves_avx2(line, &lo, &hi);
    uint32_t clear = clear_lanes_avx2(lo, hi, positions_avx2(x, 0));
    if (k > 8) clear |= clear_lanes_avx2(lo, hi, positions_avx2(x, 8)) << 8;
    return (clear & probe_lanes(k)) == 0;
}

__attribute__((target("avx2")))
static inline void mask_avx2(uint32_t x, uint32_t k, __m256i *mask_lo,
                             __m256i *mask_hi)
{
    const __m256i lo_base = _mm256_setr_epi32(0, 32, 64, 96, 128, 160, 192, 224);
    const __m256i hi_base = _mm256_add_epi32(lo_base, _mm256_set1_epi32(256));
    const __m256i one = _mm256_set1_epi32(1);
    uint32_t pos[BK_BLOCKED_MAX_HASHES];
    _mm256_storeu_si256((__m256i *)(void *)&pos[0], positions_avx2(x, 0));
    _mm256_storeu_si256((__m256i *)(void *)&pos[8], positions_avx2(x, 8));
    __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
    for (uint32_t i = 0; i < k; i++) {
        __m256i p = _mm256_set1_epi32((int)pos[i]);
        lo = _mm256_or_si256(lo, _mm256_sllv_epi32(one, _mm256_sub_epi32(p, lo_base)));
        hi = _mm256_or_si256(hi, _mm256_sllv_epi32(one, _mm256_sub_epi32(p, hi_base)));
    }
    *mask_lo = lo;
    *mask_hi = hi;
}

/* The adds of both layouts, given the key's mask in two halves. */
__attribute__((target("avx2")))
static inline int add_plain_mask_avx2(uint64_t *line, __m256i mask_lo, __m256i mask_hi)
{
    __m256i *half = (__m256i *)(void *)line;
    __m256i old_lo = _mm256_load_si256(&half[0]), old_hi = _mm256_load_si256(&half[1]);
    /* all-ones where nothing is missing */
    int keep_lo = _mm256_testc_si256(old_lo, mask_lo);
    int keep_hi = _mm256_testc_si256(old_hi, mask_hi);
    if (!keep_lo) _mm256_store_si256(&half[0], _mm256_or_si256(old_lo, mask_lo));
    if (!keep_hi) _mm256_store_si256(&half[1], _mm256_or_si256(old_hi, mask_hi));
    return !(keep_lo & keep_hi);
}

__attribute__((target("avx2")))
static inline int add_atomic_mask_avx2(uint64_t *line, __m256i mask_lo, __m256i mask_hi)
{
    __m256i old_lo, old_hi;
    uint64_t missing[BLOCK_WORDS];
    load_halves_avx2(line, &old_lo, &old_hi);
    __m256i miss_lo = _mm256_andnot_si256(old_lo, mask_lo);
    __m256i miss_hi = _mm256_andnot_si256(old_hi, mask_hi);
    if (_mm256_testz_si256(miss_lo, miss_lo) & _mm256_testz_si256(miss_hi, miss_hi))
        return 0;
    _mm256_storeu_si256((__m256i *)(void *)&missing[0], miss_lo);
    _mm256_storeu_si256((__m256i *)(void *)&missing[4], miss_hi);
    or_missing_atomic(line, missing);
    return 1;
}

__attribute__((target("avx2")))
static inline int add_plain_avx2(uint64_t *line, uint32_t x, uint32_t k)
{
    __m256i mask_lo, mask_hi;
    mask_avx2(x, k, &mask_lo, &mask_hi);
    return add_plain_mask_avx2(line, mask_lo, mask_hi);
}

__attribute__((target("avx2")))
static inline int add_atomic_avx2(uint64_t *line, uint32_t x, uint32_t k)
{
    __m256i mask_lo, mask_hi;
    mask_avx2(x, k, &mask_lo, &mask_hi);
    return add_atomic_mask_avx2(line, mask_lo, mask_hi);
}

/* The split layout's mask as two halves of four 64-bit words. */
__attribute__((target("avx2")))
static inline void split_mask_avx2(uint32_t x, __m256i *lo, __m256i *hi)
{
    __m256i bit = _mm256_srli_epi32(positions_avx2(x, 0), 26 - 23); /* (x SALT) >> 26 */
    const __m256i one = _mm256_set1_epi64x(1);
    *lo = _mm256_sllv_epi64(one, _mm256_cvtepu32_epi64(_mm256_castsi256_si128(bit)));
    *hi = _mm256_sllv_epi64(one, _mm256_cvtepu32_epi64(_mm256_extracti128_si256(bit, 1)));
}

__attribute__((target("avx2")))
static inline int contains_split_avx2(const uint64_t *line, uint32_t x, uint32_t k)
{
    __m256i lo, hi, mask_lo, mask_hi;
    (void)k;
    load_halves_avx2(line, &lo, &hi);
    split_mask_avx2(x, &mask_lo, &mask_hi);
    return _mm256_testc_si256(lo, mask_lo) & _mm256_testc_si256(hi, mask_hi);
}

__attribute__((target("avx2")))
static inline int add_plain_split_avx2(uint64_t *line, uint32_t x, uint32_t k)
{
    __m256i mask_lo, mask_hi;
    (void)k;
    split_mask_avx2(x, &mask_lo, &mask_hi);
    return add_plain_mask_avx2(line, mask_lo, mask_hi);
}

__attribute__((target("avx2")))
static inline int add_atomic_split_avx2(uint64_t *line, uint32_t x, uint32_t k)
{
    __m256i mask_lo, mask_hi;
    (void)k;
    split_mask_avx2(x, &mask_lo, &mask_hi);
    return add_atomic_mask_avx2(line, mask_lo, mask_hi);
}

__attribute__((target("avx512f")))
static inline __m512i load_line_avx512(const uint64_t *line)
{
#if BK_BLOCKED_TSAN
    return _mm512_setr_epi64((long long)bk__load64(&line[0]), (long long)bk__load64(&line[1]),
                             (long long)bk__load64(&line[2]), (long long)bk__load64(&line[3]),
                             (long long)bk__load64(&line[4]), (long long)bk__load64(&line[5]),
                             (long long)bk__load64(&line[6]), (long long)bk__load64(&line[7]));
#else
    return _mm512_load_si512((const void *)line);
#endif
}

__attribute__((target("avx512f")))
static inline __m512i positions_avx512(uint32_t x)
{
    return _mm512_srli_epi32(
        _mm512_mullo_epi32(_mm512_set1_epi32((int)x),
                           _mm512_loadu_si512((const void *)SALT)),
        23);
}

__attribute__((target("avx512f")))
static inline int contains_avx512(const uint64_t *line, uint32_t x, uint32_t k)
{
    __m512i pos = positions_avx512(x);
    __m512i word = _mm512_permutexvar_epi32(_mm512_srli_epi32(pos, 5),
                                            load_line_avx512(line));
    /* 1 << (pos mod 32): a rotate takes its count mod 32, no mask needed */
    __m512i bit = _mm512_rolv_epi32(_mm512_set1_epi32(1), pos);
    uint32_t set = _mm512_test_epi32_mask(word, bit);
    return (~set & probe_lanes(k)) == 0;
}

__attribute__((target("avx512f")))
static inline __m512i mask_avx512(uint32_t x, uint32_t k)
{
    const __m512i base = _mm512_setr_epi32(0, 32, 64, 96, 128, 160, 192, 224,
                                           256, 288, 320, 352, 384, 416, 448,
                                           480);
    const __m512i one = _mm512_set1_epi32(1);
    uint32_t pos[BK_BLOCKED_MAX_HASHES];
    _mm512_storeu_si512((void *)pos, positions_avx512(x));
    __m512i acc = _mm512_setzero_si512();
    for (uint32_t i = 0; i < k; i++) {
        __m512i p = _mm512_set1_epi32((int)pos[i]);
        acc = _mm512_or_si512(acc, _mm512_sllv_epi32(one, _mm512_sub_epi32(p, base)));
    }
    return acc;
}

/* Branch-free: the masked store writes the 32-bit words that change, and
 * nothing when none does. */
__attribute__((target("avx512f")))
static inline int add_plain_mask_avx512(uint64_t *line, __m512i mask)
{
    __m512i old = _mm512_load_si512((const void *)line);
    __m512i next = _mm512_or_si512(old, mask);
    __mmask16 changed = _mm512_cmpneq_epi32_mask(next, old);
    _mm512_mask_store_epi32((void *)line, changed, next);
    return changed != 0;
}

__attribute__((target("avx512f")))
static inline int add_plain_avx512(uint64_t *line, uint32_t x, uint32_t k)
{
    return add_plain_mask_avx512(line, mask_avx512(x, k));
}

/* The concurrent add of both layouts, given the key's mask. */
__attribute__((target("avx512f")))
static inline int add_atomic_mask_avx512(uint64_t *line, __m512i mask)
{
    uint64_t missing[BLOCK_WORDS];
    __m512i miss = _mm512_andnot_si512(load_line_avx512(line), mask);
    if (_mm512_test_epi64_mask(miss, miss) == 0) return 0;
    _mm512_storeu_si512((void *)missing, miss);
    or_missing_atomic(line, missing);
    return 1;
}

__attribute__((target("avx512f")))
static inline int add_atomic_avx512(uint64_t *line, uint32_t x, uint32_t k)
{
    return add_atomic_mask_avx512(line, mask_avx512(x, k));
}

/* The split layout's mask: four instructions (a multiply, a shift, a
 * widening to 64-bit lanes and a variable shift). */
__attribute__((target("avx512f")))
static inline __m512i split_mask_avx512(uint32_t x)
{
    __m256i bit = _mm256_srli_epi32(
        _mm256_mullo_epi32(_mm256_set1_epi32((int)x),
                           _mm256_loadu_si256((const __m256i *)(const void *)SALT)),
        26);
    return _mm512_sllv_epi64(_mm512_set1_epi64(1), _mm512_cvtepu32_epi64(bit));
}

__attribute__((target("avx512f")))
static inline int contains_split_avx512(const uint64_t *line, uint32_t x, uint32_t k)
{
    __m512i mask = split_mask_avx512(x);
    (void)k;
    return _mm512_cmpneq_epi64_mask(_mm512_and_si512(load_line_avx512(line), mask), mask) == 0;
}

__attribute__((target("avx512f")))
static inline int add_plain_split_avx512(uint64_t *line, uint32_t x, uint32_t k)
{
    (void)k;
    return add_plain_mask_avx512(line, split_mask_avx512(x));
}

__attribute__((target("avx512f")))
static inline int add_atomic_split_avx512(uint64_t *line, uint32_t x, uint32_t k)
{
    (void)k;
    return add_atomic_mask_avx512(line, split_mask_avx512(x));
}

#endif /* BK_BLOCKED_X86 */

/*==========================================================================
 * Internals: one key
 *==========================================================================*/

/* A key's hash as the filter's layout defines it: XXH3-128 for the free
 * layout; for the split one XXH3-64, h.lo = h.hi = its 64 bits (the line
 * by fast range on all of them, x their low 32 bits). */
__attribute__((always_inline))
static inline bk_hash hash_of(const bk_blocked *f, const void *key, size_t len)
{
    if (!f->split) return bk__hash_keyed(&f->keys.h, key, len);
    bk_hash h;
    h.lo = h.hi = len <= BK__XXH64_SHORT ? bk__xxh64_keyed(&f->keys.x, key, len)
                                         : bk__xxh64(key, len, f->seed);
    return h;
}

static inline uint64_t block_of(const bk_blocked *f, bk_hash h)
{
    return bk__fastrange64(h.lo, f->nblocks);
}

static inline uint64_t *line_of(const bk_blocked *f, bk_hash h)
{
    return f->words + block_of(f, h) * BLOCK_WORDS;
}

/* Count `fresh` new items: a plain add for the single writer, else an
 * atomic one (skipped when there is nothing to add). */
static inline void count_items(bk_blocked *f, uint64_t fresh)
{
    if (f->single_writer) f->items += fresh;
    else if (fresh) bk__add64(&f->items, fresh);
}

/*==========================================================================
 * Internals: batches, one instance per SIMD level and write mode
 *
 * key i + AHEAD is hashed and its block prefetched while key i is probed.
 * batch_body is always inlined with constant per-key functions, so each
 * instance runs its own level's code with no indirect call per key, and
 * every key is answered without a branch on its line's contents: an absent
 * key costs what a present one does.
 *==========================================================================*/

typedef struct slot {
    uint64_t block;
    uint32_t x;
} slot;

static inline slot slot_of(const bk_blocked *f, const void *key, size_t len,
                           int is_add)
{
    bk_hash h = hash_of(f, key, len);
    slot s;
    s.block = block_of(f, h);
    s.x = (uint32_t)h.hi;
    const uint64_t *line = f->words + s.block * BLOCK_WORDS;
    if (is_add) BK_PREFETCH_WRITE(line); else BK_PREFETCH_READ(line);
    return s;
}

__attribute__((always_inline))
static inline int64_t batch_body(bk_blocked *f, const void *const *keys,
                                 const size_t *lens, size_t n,
                                 uint8_t *results, int is_add,
                                 contains_fn contains, add_fn add)
{
    slot ring[BATCH_AHEAD];
    int64_t hits = 0;
    const uint32_t k = f->k;

    size_t ahead = n < BATCH_AHEAD ? n : BATCH_AHEAD;
    for (size_t i = 0; i < ahead; i++)
        ring[i] = slot_of(f, keys[i], lens[i], is_add);
    for (size_t i = 0; i < n; i++) {
        slot s = ring[i % BATCH_AHEAD];
        size_t next = i + BATCH_AHEAD;
        if (next < n) ring[i % BATCH_AHEAD] = slot_of(f, keys[next], lens[next], is_add);
        uint64_t *line = f->words + s.block * BLOCK_WORDS;
        int r = is_add ? add(line, s.x, k) : contains(line, s.x, k);
        hits += r;
        if (results != NULL) results[i] = (uint8_t)r;
    }
    if (is_add) count_items(f, (uint64_t)hits);
    return hits;
}

/* The three instances of one level: lookups, single-writer adds and
 * concurrent adds. */
#define BATCH_INSTANCES(name)                                                   \
    {                                                                           \
        if (!is_add)                                                            \
            return batch_body(f, keys, lens, n, results, 0, contains_##name,    \
                              add_plain_##name);                                \
        if (f->single_writer)                                                   \
            return batch_body(f, keys, lens, n, results, 1, contains_##name,    \
                              add_plain_##name);                                \
        return batch_body(f, keys, lens, n, results, 1, contains_##name,        \
                          add_atomic_##name);                                   \
    }

#define BATCH_FN(name, attr)                                                    \
    attr static int64_t batch_##name(bk_blocked *f, const void *const *keys,    \
                                     const size_t *lens, size_t n,              \
                                     uint8_t *results, int is_add)              \
    BATCH_INSTANCES(name)

BATCH_FN(scalar, )
BATCH_FN(split_scalar, )
#if BK_BLOCKED_X86
BATCH_FN(avx2, __attribute__((target("avx2"))))
BATCH_FN(split_avx2, __attribute__((target("avx2"))))
BATCH_FN(avx512, __attribute__((target("avx512f"))))
BATCH_FN(split_avx512, __attribute__((target("avx512f"))))

/* The single-key entry points of each level and layout (not inlined:
 * called through the table). */
#define CALL_FNS(name, attr)                                                    \
    attr static int call_contains_##name(const uint64_t *l, uint32_t x, uint32_t k) \
    {                                                                           \
        return contains_##name(l, x, k);                                        \
    }                                                                           \
    attr static int call_add_plain_##name(uint64_t *l, uint32_t x, uint32_t k)  \
    {                                                                           \
        return add_plain_##name(l, x, k);                                       \
    }                                                                           \
    attr static int call_add_atomic_##name(uint64_t *l, uint32_t x, uint32_t k) \
    {                                                                           \
        return add_atomic_##name(l, x, k);                                      \
    }

CALL_FNS(avx2, __attribute__((target("avx2"))))
CALL_FNS(split_avx2, __attribute__((target("avx2"))))
CALL_FNS(avx512, __attribute__((target("avx512f"))))
CALL_FNS(split_avx512, __attribute__((target("avx512f"))))
#endif

/* The split layout's whole single calls, one function each with no call
 * inside: on a filter far larger than the caches a call overlaps with its
 * neighbours only as far as its instructions (loads above all) leave room,
 * and a dispatch to a per-key kernel cost these calls about a quarter of
 * their time (bench/HISTORY.md section 14). */
#define SPLIT_KEY_FNS(name, attr)                                               \
    attr static inline int split_contains_key_##name##_body(                    \
        const bk_blocked *f, uint64_t h)                                        \
    {                                                                           \
        const uint64_t *line = f->words + bk__fastrange64(h, f->nblocks) * BLOCK_WORDS; \
        return contains_split_##name(line, (uint32_t)h, SPLIT_K);               \
    }                                                                           \
    attr __attribute__((noinline)) static int split_contains_long_##name(       \
        const bk_blocked *f, const void *key, size_t len)                       \
    {                                                                           \
        return split_contains_key_##name##_body(f, bk__xxh64(key, len, f->seed)); \
    }                                                                           \
    attr static int split_contains_key_##name(const bk_blocked *f,              \
                                              const void *key, size_t len)      \
    {                                                                           \
        if (len > BK__XXH64_SHORT) return split_contains_long_##name(f, key, len); \
        return split_contains_key_##name##_body(f, bk__xxh64_keyed(&f->keys.x, key, len)); \
    }                                                                           \
    attr static inline int split_add_key_##name##_body(bk_blocked *f, uint64_t h) \
    {                                                                           \
        uint64_t *line = f->words + bk__fastrange64(h, f->nblocks) * BLOCK_WORDS; \
        int fresh = f->single_writer ? add_plain_split_##name(line, (uint32_t)h, SPLIT_K) \
                                     : add_atomic_split_##name(line, (uint32_t)h, SPLIT_K); \
        count_items(f, (uint64_t)fresh);                                        \
        return fresh;                                                           \
    }                                                                           \
    attr __attribute__((noinline)) static int split_add_long_##name(            \
        bk_blocked *f, const void *key, size_t len)                             \
    {                                                                           \
        return split_add_key_##name##_body(f, bk__xxh64(key, len, f->seed));    \
    }                                                                           \
    attr static int split_add_key_##name(bk_blocked *f, const void *key,        \
                                         size_t len)                            \
    {                                                                           \
        if (len > BK__XXH64_SHORT) return split_add_long_##name(f, key, len);   \
        return split_add_key_##name##_body(f, bk__xxh64_keyed(&f->keys.x, key, len)); \
    }

SPLIT_KEY_FNS(scalar, )
#if BK_BLOCKED_X86
SPLIT_KEY_FNS(avx2, __attribute__((target("avx2"))))
SPLIT_KEY_FNS(avx512, __attribute__((target("avx512f"))))
#endif

/*==========================================================================
 * Internals: SIMD dispatch
 *
 * The level is process-wide, detected on first use and stored as a relaxed
 * atomic: every level computes the same bits, so a change while other
 * threads run only changes how fast they go.
 *==========================================================================*/

static const simd_impl IMPLS[] = {
    {BK_SIMD_SCALAR,
     {{contains_scalar, add_plain_scalar, add_atomic_scalar, batch_scalar, NULL, NULL},
      {contains_split_scalar, add_plain_split_scalar, add_atomic_split_scalar,
       batch_split_scalar, split_contains_key_scalar, split_add_key_scalar}}},
#if BK_BLOCKED_X86
    {BK_SIMD_AVX2,
     {{call_contains_avx2, call_add_plain_avx2, call_add_atomic_avx2, batch_avx2,
       NULL, NULL},
      {call_contains_split_avx2, call_add_plain_split_avx2,
       call_add_atomic_split_avx2, batch_split_avx2, split_contains_key_avx2,
       split_add_key_avx2}}},
    {BK_SIMD_AVX512,
     {{call_contains_avx512, call_add_plain_avx512, call_add_atomic_avx512,
       batch_avx512, NULL, NULL},
      {call_contains_split_avx512, call_add_plain_split_avx512,
       call_add_atomic_split_avx512, batch_split_avx512, split_contains_key_avx512,
       split_add_key_avx512}}},
#endif
};
#define N_IMPLS ((int)(sizeof(IMPLS) / sizeof(IMPLS[0])))

static int detect_best_level(void)
{
#if BK_BLOCKED_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return BK_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2")) return BK_SIMD_AVX2;
#endif
    return BK_SIMD_SCALAR;
}

/* Until the first call the level is unknown: impl_now points at DETECT,
 * whose entries detect it, install the level's table and forward. Every
 * later call is one load of impl_now and an indirect call, with no branch
 * and no cold path in the hot functions (a cold call there costs each
 * single-key call saved registers). */
static const simd_impl DETECT;
static const simd_impl *impl_now = &DETECT;

/* The level of impl_now for other families (internal.h): -1 until the
 * first detection, then kept equal to impl_now->level. */
int bk__simd_level_now = -1;

static void publish(const simd_impl *impl)
{
    __atomic_store_n(&impl_now, impl, __ATOMIC_RELAXED);
    __atomic_store_n(&bk__simd_level_now, impl->level, __ATOMIC_RELAXED);
}

static const simd_impl *resolve_impl(void)
{
    const simd_impl *want = &IMPLS[detect_best_level()];
    const simd_impl *expected = &DETECT;
    /* a bk_blocked_set_simd_level that came first wins */
    __atomic_compare_exchange_n(&impl_now, &expected, want, 0,
                                __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    const simd_impl *now = __atomic_load_n(&impl_now, __ATOMIC_RELAXED);
    __atomic_store_n(&bk__simd_level_now, now->level, __ATOMIC_RELAXED);
    return now;
}

#define DETECT_FNS(L)                                                           \
    static int detect_contains_##L(const uint64_t *l, uint32_t x, uint32_t k)   \
    {                                                                           \
        return resolve_impl()->layout[L].contains(l, x, k);                     \
    }                                                                           \
    static int detect_add_plain_##L(uint64_t *l, uint32_t x, uint32_t k)        \
    {                                                                           \
        return resolve_impl()->layout[L].add_plain(l, x, k);                    \
    }                                                                           \
    static int detect_add_atomic_##L(uint64_t *l, uint32_t x, uint32_t k)       \
    {                                                                           \
        return resolve_impl()->layout[L].add_atomic(l, x, k);                   \
    }                                                                           \
    static int64_t detect_batch_##L(bk_blocked *f, const void *const *keys,     \
                                    const size_t *lens, size_t n,               \
                                    uint8_t *results, int is_add)               \
    {                                                                           \
        return resolve_impl()->layout[L].run_batch(f, keys, lens, n, results,   \
                                                   is_add);                     \
    }

DETECT_FNS(0)
DETECT_FNS(1)

static int detect_contains_key(const bk_blocked *f, const void *key, size_t len)
{
    return resolve_impl()->layout[1].contains_key(f, key, len);
}
static int detect_add_key(bk_blocked *f, const void *key, size_t len)
{
    return resolve_impl()->layout[1].add_key(f, key, len);
}

static const simd_impl DETECT = {
    -1,
    {{detect_contains_0, detect_add_plain_0, detect_add_atomic_0, detect_batch_0, NULL,
      NULL},
     {detect_contains_1, detect_add_plain_1, detect_add_atomic_1, detect_batch_1,
      detect_contains_key, detect_add_key}}};

static inline const simd_impl *current_impl(void)
{
    return __atomic_load_n(&impl_now, __ATOMIC_RELAXED);
}

/* The current level's functions for f's layout. */
static inline const layout_impl *impl_for(const bk_blocked *f)
{
    return &current_impl()->layout[f->split];
}

/*==========================================================================
 * Internals: sizing maths
 *==========================================================================*/

/* The exact rate of one 512-bit block that received j = i k bit-sets.
 * An absent key's k positions are uniform draws with replacement; let D be
 * how many distinct ones there are, P(D = d) = B!/(B-d)! S(k, d) / B^k
 * (S: Stirling numbers of the second kind). d given bits are all set after
 * j uniform bit-sets with probability sum_s (-1)^s C(d, s) (1 - s/B)^j
 * (inclusion-exclusion). Gathering the terms by s:
 *     rate(j) = sum_{s=0..k} coef_s (1 - s/B)^j,
 *     coef_s  = (-1)^s sum_{d=s..k} P(D = d) C(d, s).
 * The alternating sum cancels badly while the block is nearly empty, so up
 * to DP_BITSETS bit-sets the rate comes instead from the distribution of
 * the number T of bits set, P(T = t) by dynamic programming, as
 * sum_t P(T = t) (t/B)^k (positive terms only); past it the sum's relative
 * error is below 1e-6 for every k <= 16.
 * Putze et al. use (1 - (1 - 1/B)^j)^k instead, which is low by 1-3% at
 * B = 512 (it ignores the spread of T, and E[X^k] > E[X]^k); the tests see
 * that bias, so sizing uses the exact form. */
#define DP_BITSETS 256

typedef struct block_model {
    uint32_t k;
    uint32_t table_keys;                /* loads i with i k <= DP_BITSETS */
    double coef[BK_BLOCKED_MAX_HASHES + 1];
    double log_keep[BK_BLOCKED_MAX_HASHES + 1]; /* ln(1 - s/B) */
    double table[DP_BITSETS + 1];       /* rate of a block with i keys */
} block_model;

static void block_model_init(block_model *bm, uint32_t k)
{
    double stirling[BK_BLOCKED_MAX_HASHES + 1] = {1.0}; /* S(0, d) */
    double p_distinct[BK_BLOCKED_MAX_HASHES + 1];
    for (uint32_t row = 1; row <= k; row++) { /* S(row, d), d downwards */
        for (uint32_t d = row; d >= 1; d--)
            stirling[d] = (double)d * stirling[d] + stirling[d - 1];
        stirling[0] = 0.0;
    }
    double falling = 1.0; /* B (B-1) ... (B-d+1) / B^d */
    for (uint32_t d = 0; d <= k; d++) {
        p_distinct[d] = falling * stirling[d] * pow(1.0 / BLOCK_BITS, (double)(k - d));
        falling *= (double)(BLOCK_BITS - d) / BLOCK_BITS;
    }
    bm->k = k;
    for (uint32_t s = 0; s <= k; s++) {
        double sum = 0.0, choose = 1.0; /* C(d, s), starting at d = s */
        for (uint32_t d = s; d <= k; d++) {
            sum += p_distinct[d] * choose;
            choose = choose * (double)(d + 1) / (double)(d + 1 - s);
        }
        bm->coef[s] = (s & 1) ? -sum : sum;
        bm->log_keep[s] = log1p(-(double)s / BLOCK_BITS);
    }

    /* P(T = t) after j bit-sets: a set lands on one of the t set bits with
     * probability t / B, else sets a new one. */
    double occupied[DP_BITSETS + 1] = {1.0};
    bm->table_keys = DP_BITSETS / k;
    for (uint32_t j = 0;; j++) {
        if (j % k == 0) {
            double rate = 0.0;
            for (uint32_t t = 1; t <= j; t++)
                rate += occupied[t] * pow((double)t / BLOCK_BITS, (double)k);
            bm->table[j / k] = rate;
            if (j / k == bm->table_keys) break;
        }
        for (uint32_t t = j + 1; t >= 1; t--)
            occupied[t] = occupied[t] * t / BLOCK_BITS +
                          occupied[t - 1] * (double)(BLOCK_BITS - t + 1) / BLOCK_BITS;
        occupied[0] = 0.0;
    }
}

/* Rate of a block holding i keys. */
static double block_fpr(const block_model *bm, double i)
{
    if (i <= (double)bm->table_keys) return bm->table[(uint32_t)i];
    double j = i * (double)bm->k, rate = 0.0;
    for (uint32_t s = 0; s <= bm->k; s++) rate += bm->coef[s] * exp(j * bm->log_keep[s]);
    return rate < 0.0 ? 0.0 : rate > 1.0 ? 1.0 : rate;
}

/* The sum of the header over the binomial load of a block. Terms are
 * walked from i = 0 in log space, log P(i+1) = log P(i) + log((n-i)/(i+1))
 * + log(q/(1-q)), up to 12 standard deviations above the mean (the tail
 * beyond weighs less than 1e-30); each term is at most 1, so nothing is
 * lost. O(k * mean load) time. */
typedef double (*load_rate_fn)(const void *ctx, double keys);

static double free_rate(const void *bm, double keys) { return block_fpr(bm, keys); }

/* The split layout: a block with i keys holds i bits, one per key, in each
 * of its eight 64-bit words, so an absent key passes all eight with
 * probability (1 - (63/64)^i)^8 exactly. */
static double split_rate(const void *ctx, double keys)
{
    (void)ctx;
    return pow(-expm1(keys * log1p(-1.0 / 64.0)), (double)SPLIT_K);
}

static double load_sum(uint64_t n, uint64_t nblocks, load_rate_fn rate, const void *ctx)
{
    if (nblocks == 1) return rate(ctx, (double)n);
    double q = 1.0 / (double)nblocks;
    double mean = (double)n * q;
    /* With 1e5 keys per block of 512 bits nothing is left clear. */
    if (mean > 1e5) return 1.0;
    double sd = sqrt(mean * (1.0 - q));
    double last = fmin((double)n, ceil(mean + 12.0 * sd + 30.0));
    double log_odds = log(q) - log1p(-q);
    double log_p = (double)n * log1p(-q); /* log P(0) */
    double sum = 0.0;
    for (double i = 0.0; i <= last; i += 1.0) {
        if (log_p > -745.0) sum += exp(log_p) * rate(ctx, i);
        log_p += log(((double)n - i) / (i + 1.0)) + log_odds;
    }
    return sum > 1.0 ? 1.0 : sum;
}

static double blocked_fpr_blocks(uint64_t n, uint64_t nblocks, const block_model *bm)
{
    return load_sum(n, nblocks, free_rate, bm);
}

static double split_fpr_blocks(uint64_t n, uint64_t nblocks)
{
    return load_sum(n, nblocks, split_rate, NULL);
}

/* One model per k. They depend on k alone, cost about 10 ms to build
 * (half a million pow calls), and are built once per process, on first
 * use: every sizing call after that (a server creating filters for new
 * keys) only sums over block loads. */
typedef struct all_models {
    block_model by_k[BK_BLOCKED_MAX_HASHES + 1]; /* [0] unused */
} all_models;

static all_models models;
static pthread_once_t models_once = PTHREAD_ONCE_INIT;

static void build_models(void)
{
    for (uint32_t k = 1; k <= BK_BLOCKED_MAX_HASHES; k++)
        block_model_init(&models.by_k[k], k);
}

static const all_models *get_models(void)
{
    pthread_once(&models_once, build_models);
    return &models;
}

/* The best k for n keys in nblocks blocks, and its rate. */
static double best_k(const all_models *am, uint64_t n, uint64_t nblocks,
                     uint32_t *k_out)
{
    double best = 2.0;
    uint32_t best_k_value = 1;
    for (uint32_t k = 1; k <= BK_BLOCKED_MAX_HASHES; k++) {
        double p = blocked_fpr_blocks(n, nblocks, &am->by_k[k]);
        if (p < best) best = p, best_k_value = k;
    }
    if (k_out != NULL) *k_out = best_k_value;
    return best;
}

#define MAX_BLOCKS (BK_MAX_BITS / BLOCK_BITS)
#define LN2 0.69314718055994530942

static inline uint64_t blocks_for_bits(uint64_t m_bits)
{
    return m_bits / BLOCK_BITS + (m_bits % BLOCK_BITS != 0);
}

/*==========================================================================
 * Internals: construction and counting
 *==========================================================================*/

/* After seed and split are set. */
static void init_keys(bk_blocked *f)
{
    if (f->split)
        bk__xxh64_keys_init(&f->keys.x, f->seed);
    else
        bk__hash_keys_init(&f->keys.h, f->seed);
}

static int create_filter(bk_blocked **out, uint64_t nblocks, uint32_t k,
                         uint64_t seed, uint64_t capacity, double target_fpr,
                         int split)
{
    bk_blocked *f = NULL;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (nblocks == 0 || nblocks > MAX_BLOCKS) return BK_ESIZE;
    if (k == 0 || k > BK_BLOCKED_MAX_HASHES) return BK_EHASHES;
    if (nblocks > SIZE_MAX / BK_CACHE_LINE) return BK_ESIZE;

    f = bk__calloc(1, sizeof(*f));
    if (f == NULL) goto fail;
    f->words = bk__calloc_aligned((size_t)nblocks * BK_CACHE_LINE);
    if (f->words == NULL) goto fail;
    bk__object_init(&f->obj, &blocked_ops);
    f->owns_words = 1;
    f->nblocks = nblocks;
    f->k = k;
    f->seed = seed;
    f->capacity = capacity;
    f->target_fpr = target_fpr;
    f->split = split;
    init_keys(f);
    *out = f;
    return BK_OK;

fail:
    bk__free(f);
    return BK_ENOMEM;
}

static int compatible(const bk_blocked *a, const bk_blocked *b)
{
    if (a == NULL || b == NULL) return BK_EINVAL;
    if (a->nblocks != b->nblocks || a->k != b->k || a->seed != b->seed ||
        a->split != b->split)
        return BK_EINCOMPAT;
    return BK_OK;
}

static uint64_t block_bits_set(const bk_blocked *f, uint64_t block)
{
    const uint64_t *words = f->words + block * BLOCK_WORDS;
    uint64_t t = 0;
    for (int w = 0; w < BLOCK_WORDS; w++) t += bk__popcount64(bk__load64(&words[w]));
    return t;
}

/* Keys behind t set bits of one block: -(B / k) ln(1 - t / B). */
static double block_estimate(uint64_t t, uint32_t k)
{
    if (t >= BLOCK_BITS) return INFINITY;
    return -((double)BLOCK_BITS / (double)k) * log1p(-(double)t / BLOCK_BITS);
}

/* Per-block sums: bits set, estimated keys and the exact current rate
 * (the mean over blocks of (t_j / 512)^k). */
typedef struct census {
    uint64_t bits_set;
    double estimated_items;
    double fpr_now;
    uint64_t fullest_block;
} census;

/* The split layout: each word holds one bit per key, so each of the eight
 * gives an estimate, -ln(1 - t_w / 64) / -ln(1 - 1/64), and the block's is
 * their mean; an absent key passes with the product of the words' fills. */
static census take_census_split(const bk_blocked *f)
{
    census c = {0, 0.0, 0.0, 0};
    const double per_key = -log1p(-1.0 / 64.0);
    for (uint64_t b = 0; b < f->nblocks; b++) {
        const uint64_t *words = f->words + b * BLOCK_WORDS;
        uint64_t t = 0;
        double keys = 0.0, pass = 1.0;
        for (int w = 0; w < BLOCK_WORDS; w++) {
            uint64_t tw = bk__popcount64(bk__load64(&words[w]));
            t += tw;
            keys += tw >= 64 ? INFINITY : -log1p(-(double)tw / 64.0) / per_key;
            pass *= (double)tw / 64.0;
        }
        c.bits_set += t;
        c.estimated_items += keys / BLOCK_WORDS;
        c.fpr_now += pass;
        if (t > c.fullest_block) c.fullest_block = t;
    }
    c.fpr_now /= (double)f->nblocks;
    return c;
}

static census take_census(const bk_blocked *f)
{
    census c = {0, 0.0, 0.0, 0};
    if (f->split) return take_census_split(f);
    for (uint64_t b = 0; b < f->nblocks; b++) {
        uint64_t t = block_bits_set(f, b);
        c.bits_set += t;
        c.estimated_items += block_estimate(t, f->k);
        c.fpr_now += pow((double)t / BLOCK_BITS, (double)f->k);
        if (t > c.fullest_block) c.fullest_block = t;
    }
    c.fpr_now /= (double)f->nblocks;
    return c;
}

/* An estimate as an item count: rounded, capped where it is infinite. */
static uint64_t estimate_to_count(double estimate)
{
    const double cap = 9.0e18; /* < 2^63: the conversion is always defined */
    return estimate < cap ? (uint64_t)(estimate + 0.5) : (uint64_t)cap;
}

/*==========================================================================
 * API: sizing
 *==========================================================================*/

double bk_blocked_fpr(uint64_t n, uint64_t m_bits, uint32_t k)
{
    if (m_bits == 0 || k == 0 || k > BK_BLOCKED_MAX_HASHES) return NAN;
    if (n == 0) return 0.0;
    return blocked_fpr_blocks(n, blocks_for_bits(m_bits), &get_models()->by_k[k]);
}

/* Recent sizing results, (n, p) -> (blocks, k): the search below costs
 * about a millisecond (a bisection over b, each step summing the binomial
 * load for 16 values of k), and callers create many filters of one shape
 * (a server replaying a log of creates, scalable stages of one capacity).
 * A hit costs a mutex and a short scan. Round-robin replacement; results
 * are exactly the search's. */
#define SIZING_CACHE 16

typedef struct sizing_entry {
    uint64_t n;
    double p;
    uint64_t blocks;
    uint32_t k;
    int used;
} sizing_entry;

static sizing_entry sizing_cache[SIZING_CACHE];
static unsigned sizing_next;
static pthread_mutex_t sizing_lock = PTHREAD_MUTEX_INITIALIZER;

static int sizing_lookup(uint64_t n, double p, uint64_t *blocks, uint32_t *k)
{
    int found = 0;
    pthread_mutex_lock(&sizing_lock);
    for (int i = 0; i < SIZING_CACHE && !found; i++) {
        const sizing_entry *e = &sizing_cache[i];
        if (e->used && e->n == n && e->p == p) {
            *blocks = e->blocks;
            *k = e->k;
            found = 1;
        }
    }
    pthread_mutex_unlock(&sizing_lock);
    return found;
}

static void sizing_store(uint64_t n, double p, uint64_t blocks, uint32_t k)
{
    pthread_mutex_lock(&sizing_lock);
    sizing_entry *e = &sizing_cache[sizing_next];
    sizing_next = (sizing_next + 1) % SIZING_CACHE;
    e->n = n;
    e->p = p;
    e->blocks = blocks;
    e->k = k;
    e->used = 1;
    pthread_mutex_unlock(&sizing_lock);
}

int bk_blocked_optimal(uint64_t n, double p, uint64_t *m_bits, uint32_t *k)
{
    uint64_t classic_m, cached_blocks;
    uint32_t cached_k;
    if (n == 0) return BK_ECAPACITY;
    if (bk__check_fpr(p) != BK_OK) return BK_EFPR;
    if (sizing_lookup(n, p, &cached_blocks, &cached_k)) {
        if (m_bits != NULL) *m_bits = cached_blocks * BLOCK_BITS;
        if (k != NULL) *k = cached_k;
        return BK_OK;
    }
    /* The classic size is a lower bound of the blocked one (within
     * rounding): start there and double until the target is met. */
    double classic = ceil(-(double)n * log(p) / (LN2 * LN2));
    if (!(classic <= (double)BK_MAX_BITS)) return BK_ESIZE;
    classic_m = (uint64_t)classic;
    const all_models *am = get_models();

    uint64_t hi = classic_m / BLOCK_BITS / 2;
    if (hi == 0) hi = 1;
    uint64_t lo = 0; /* invariant: lo == 0 or lo does not fit; hi fits */
    while (best_k(am, n, hi, NULL) > p) {
        if (hi >= MAX_BLOCKS) return BK_ESIZE;
        lo = hi;
        hi = hi > MAX_BLOCKS / 2 ? MAX_BLOCKS : 2 * hi;
    }
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (best_k(am, n, mid, NULL) <= p) hi = mid; else lo = mid;
    }
    uint32_t best;
    best_k(am, n, hi, &best);
    sizing_store(n, p, hi, best);
    if (m_bits != NULL) *m_bits = hi * BLOCK_BITS;
    if (k != NULL) *k = best;
    return BK_OK;
}

double bk_blocked_split_fpr(uint64_t n, uint64_t m_bits)
{
    if (m_bits == 0) return NAN;
    if (n == 0) return 0.0;
    return split_fpr_blocks(n, blocks_for_bits(m_bits));
}

int bk_blocked_optimal_split(uint64_t n, double p, uint64_t *m_bits)
{
    if (n == 0) return BK_ECAPACITY;
    if (bk__check_fpr(p) != BK_OK) return BK_EFPR;
    /* the classic size bounds it from below: start at half of it, double
     * until the target is met, then bisect (each step sums the binomial
     * load once, so no cache is needed) */
    double classic = ceil(-(double)n * log(p) / (LN2 * LN2));
    if (!(classic <= (double)BK_MAX_BITS)) return BK_ESIZE;
    uint64_t hi = (uint64_t)classic / BLOCK_BITS / 2;
    if (hi == 0) hi = 1;
    uint64_t lo = 0; /* invariant: lo == 0 or lo does not fit; hi fits */
    while (split_fpr_blocks(n, hi) > p) {
        if (hi >= MAX_BLOCKS) return BK_ESIZE;
        lo = hi;
        hi = hi > MAX_BLOCKS / 2 ? MAX_BLOCKS : 2 * hi;
    }
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (split_fpr_blocks(n, mid) <= p) hi = mid; else lo = mid;
    }
    if (m_bits != NULL) *m_bits = hi * BLOCK_BITS;
    return BK_OK;
}

int bk_blocked_capacity(uint64_t m_bits, double p, uint64_t *n)
{
    if (bk__check_fpr(p) != BK_OK) return BK_EFPR;
    if (m_bits == 0 || m_bits > BK_MAX_BITS) return BK_ESIZE;
    uint64_t nblocks = blocks_for_bits(m_bits);
    const all_models *am = get_models();
    if (best_k(am, 1, nblocks, NULL) > p) return BK_ECAPACITY;

    /* invariant: lo fits, hi does not; the rate at the best k grows with n */
    uint64_t lo = 1, hi = 2;
    while (best_k(am, hi, nblocks, NULL) <= p) {
        lo = hi;
        hi *= 2;
    }
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (best_k(am, mid, nblocks, NULL) <= p) lo = mid; else hi = mid;
    }
    if (n != NULL) *n = lo;
    return BK_OK;
}

/*==========================================================================
 * API: SIMD level
 *==========================================================================*/

int bk_blocked_simd_best(void)
{
    return detect_best_level();
}

int bk_blocked_simd_level(void)
{
    const simd_impl *impl = current_impl();
    return impl == &DETECT ? resolve_impl()->level : impl->level;
}

const char *bk_blocked_simd_name(int level)
{
    static const char *const names[] = {"scalar", "avx2", "avx512"};
    if (level < BK_SIMD_SCALAR || level > BK_SIMD_AVX512) return "unknown";
    return names[level];
}

int bk_blocked_set_simd_level(int level)
{
    if (level < BK_SIMD_SCALAR || level > BK_SIMD_AVX512) return BK_EINVAL;
    if (level > detect_best_level() || level >= N_IMPLS) return BK_ENOTSUP;
    int previous = bk_blocked_simd_level();
    publish(&IMPLS[level]);
    return previous;
}

/*==========================================================================
 * API: write mode
 *==========================================================================*/

int bk_blocked_set_single_writer(bk_blocked *f, int single_writer)
{
    if (f == NULL) return BK_EINVAL;
    f->single_writer = single_writer != 0;
    return BK_OK;
}

int bk_blocked_single_writer(const bk_blocked *f)
{
    return f->single_writer;
}

/*==========================================================================
 * API: life cycle
 *==========================================================================*/

int bk_blocked_create(bk_blocked **out, uint64_t capacity, double fpr,
                      uint64_t seed)
{
    uint64_t m;
    uint32_t k;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    int rc = bk_blocked_optimal(capacity, fpr, &m, &k);
    if (rc != BK_OK) return rc;
    return create_filter(out, m / BLOCK_BITS, k, seed, capacity, fpr, 0);
}

int bk_blocked_create_split(bk_blocked **out, uint64_t capacity, double fpr,
                            uint64_t seed)
{
    uint64_t m;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    int rc = bk_blocked_optimal_split(capacity, fpr, &m);
    if (rc != BK_OK) return rc;
    return create_filter(out, m / BLOCK_BITS, SPLIT_K, seed, capacity, fpr, 1);
}

int bk_blocked_create_mk(bk_blocked **out, uint64_t m_bits, uint32_t k,
                         uint64_t seed)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (m_bits == 0 || m_bits > BK_MAX_BITS) return BK_ESIZE;
    return create_filter(out, blocks_for_bits(m_bits), k, seed, 0, 0.0, 0);
}

void bk_blocked_free(bk_blocked *f)
{
    if (f == NULL) return;
    bk__free_handle(&f->obj, f->owns_words, f->words);
}

int bk_blocked_clone(bk_blocked **out, const bk_blocked *src)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (src == NULL) return BK_EINVAL;
    int rc = create_filter(out, src->nblocks, src->k, src->seed, src->capacity,
                           src->target_fpr, src->split);
    if (rc != BK_OK) return rc;
    memcpy((*out)->words, src->words, (size_t)src->nblocks * BK_CACHE_LINE);
    (*out)->items = bk__load64(&src->items);
    return BK_OK;
}

void bk_blocked_clear(bk_blocked *f)
{
    if (f == NULL) return;
    memset(f->words, 0, (size_t)f->nblocks * BK_CACHE_LINE);
    f->items = 0;
}

/*==========================================================================
 * API: single keys
 *==========================================================================*/

int bk_blocked_add_hash(bk_blocked *f, bk_hash h)
{
    const layout_impl *impl = impl_for(f);
    uint64_t *line = line_of(f, h);
    int fresh = f->single_writer ? impl->add_plain(line, (uint32_t)h.hi, f->k)
                                 : impl->add_atomic(line, (uint32_t)h.hi, f->k);
    count_items(f, (uint64_t)fresh);
    return fresh;
}

int bk_blocked_contains_hash(const bk_blocked *f, bk_hash h)
{
    return impl_for(f)->contains(line_of(f, h), (uint32_t)h.hi, f->k);
}

int bk_blocked_add_if_absent_hash(bk_blocked *f, bk_hash h)
{
    /* The single writer's add answers exactly "was absent". Concurrent: the
     * key absent when tested counts as new even if another thread sets its
     * bits between the test and the add. */
    if (f->single_writer) return bk_blocked_add_hash(f, h);
    const layout_impl *impl = impl_for(f);
    uint64_t *line = line_of(f, h);
    if (impl->contains(line, (uint32_t)h.hi, f->k)) return 0;
    impl->add_atomic(line, (uint32_t)h.hi, f->k);
    bk__add64(&f->items, 1);
    return 1;
}

/* The default layout's single calls, apart so that the split layout's
 * entry below is two jumps with no stack frame. */
__attribute__((noinline))
static int add_default(bk_blocked *f, const void *key, size_t len)
{
    return bk_blocked_add_hash(f, bk__hash_keyed(&f->keys.h, key, len));
}

__attribute__((noinline))
static int contains_default(const bk_blocked *f, const void *key, size_t len)
{
    bk_hash h = bk__hash_keyed(&f->keys.h, key, len);
    return current_impl()->layout[0].contains(line_of(f, h), (uint32_t)h.hi, f->k);
}

int bk_blocked_add(bk_blocked *f, const void *key, size_t len)
{
    if (f->split) return current_impl()->layout[1].add_key(f, key, len);
    return add_default(f, key, len);
}

int bk_blocked_contains(const bk_blocked *f, const void *key, size_t len)
{
    if (f->split) return current_impl()->layout[1].contains_key(f, key, len);
    return contains_default(f, key, len);
}

int bk_blocked_add_if_absent(bk_blocked *f, const void *key, size_t len)
{
    return bk_blocked_add_if_absent_hash(f, hash_of(f, key, len));
}

bk_hash bk_blocked_hash_key(const bk_blocked *f, const void *key, size_t len)
{
    static const char empty[1] = {0};
    if (key == NULL) key = empty, len = 0;
    return hash_of(f, key, len);
}

int bk_blocked_split(const bk_blocked *f)
{
    return f->split;
}

/*==========================================================================
 * API: batches
 *==========================================================================*/

int64_t bk_blocked_add_batch(bk_blocked *f, const void *const *keys,
                             const size_t *lens, size_t n, uint8_t *results)
{
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    return impl_for(f)->run_batch(f, keys, lens, n, results, 1);
}

int64_t bk_blocked_contains_batch(const bk_blocked *f, const void *const *keys,
                                  const size_t *lens, size_t n,
                                  uint8_t *results)
{
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    /* run_batch writes nothing to f when is_add is 0 */
    return impl_for(f)->run_batch((bk_blocked *)f, keys, lens, n, results, 0);
}

/*==========================================================================
 * API: set operations
 *==========================================================================*/

int bk_blocked_union(bk_blocked *dst, const bk_blocked *src)
{
    int rc = compatible(dst, src);
    if (rc != BK_OK) return rc;
    uint64_t nwords = dst->nblocks * BLOCK_WORDS;
    for (uint64_t i = 0; i < nwords; i++) dst->words[i] |= src->words[i];
    dst->items = estimate_to_count(take_census(dst).estimated_items);
    return BK_OK;
}

int bk_blocked_intersect(bk_blocked *dst, const bk_blocked *src)
{
    int rc = compatible(dst, src);
    if (rc != BK_OK) return rc;
    uint64_t nwords = dst->nblocks * BLOCK_WORDS;
    for (uint64_t i = 0; i < nwords; i++) dst->words[i] &= src->words[i];
    dst->items = estimate_to_count(take_census(dst).estimated_items);
    return BK_OK;
}

/*==========================================================================
 * API: statistics
 *==========================================================================*/

uint64_t bk_blocked_bits(const bk_blocked *f) { return f->nblocks * BLOCK_BITS; }
uint64_t bk_blocked_blocks(const bk_blocked *f) { return f->nblocks; }
uint32_t bk_blocked_hashes(const bk_blocked *f) { return f->k; }
uint64_t bk_blocked_seed(const bk_blocked *f) { return f->seed; }
uint64_t bk_blocked_items(const bk_blocked *f) { return bk__load64(&f->items); }

double bk_blocked_estimate_items(const bk_blocked *f)
{
    return take_census(f).estimated_items;
}

int bk_blocked_get_stats(const bk_blocked *f, bk_blocked_stats *out)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    memset(out, 0, sizeof(*out));
    census c = take_census(f);
    out->bits = f->nblocks * BLOCK_BITS;
    out->blocks = f->nblocks;
    out->hashes = f->k;
    out->seed = f->seed;
    out->capacity = f->capacity;
    out->target_fpr = f->target_fpr;
    out->items = bk__load64(&f->items);
    out->bits_set = c.bits_set;
    out->fill = (double)c.bits_set / (double)out->bits;
    out->fullest_block_bits = (uint32_t)c.fullest_block;
    out->estimated_items = c.estimated_items;
    out->fpr_now = c.fpr_now;
    out->fpr_at_capacity =
        f->capacity == 0 ? 0.0
        : f->split       ? bk_blocked_split_fpr(f->capacity, out->bits)
                         : bk_blocked_fpr(f->capacity, out->bits, f->k);
    out->bytes = sizeof(*f) + (size_t)f->nblocks * BK_CACHE_LINE +
                 BK_CACHE_LINE + sizeof(void *);
    return BK_OK;
}

/*==========================================================================
 * The generic filter and the file format
 *
 * One part: m = 512 * blocks bits, k, param = 512 (the block size, stored so
 * that a future block size is a new value rather than a silent misread).
 * bk__blocked_describe_part / bk__blocked_restore_part are shared with the
 * scalable and window families, whose stages are blocked filters.
 *==========================================================================*/

BK__FAMILY_CASTS(blocked, blocked_ops)

void bk__blocked_describe_part(const bk_blocked *f, bk__part *p)
{
    p->m = f->nblocks * BLOCK_BITS;
    p->k = f->k;
    p->capacity = f->capacity;
    p->fpr = f->target_fpr;
    p->items = bk__load64(&f->items);
    p->param = BLOCK_BITS;
    p->flags = f->split ? PART_SPLIT : 0;
    p->data = f->words;
    p->length = f->nblocks * BK_CACHE_LINE;
}

int bk__blocked_restore_part(const bk__part *p, uint64_t seed, int allow_split,
                             bk_blocked **out)
{
    *out = NULL;
    if (p->param != BLOCK_BITS || p->m == 0 || p->m % BLOCK_BITS != 0)
        return BK_ECORRUPT;
    int split = (p->flags & PART_SPLIT) != 0;
    if ((p->flags & ~PART_SPLIT) != 0 || (split && (!allow_split || p->k != SPLIT_K)))
        return BK_ECORRUPT;
    uint64_t nblocks = p->m / BLOCK_BITS;
    if (nblocks > MAX_BLOCKS || p->length != nblocks * BK_CACHE_LINE)
        return BK_ECORRUPT;
    if (p->k == 0 || p->k > BK_BLOCKED_MAX_HASHES) return BK_ECORRUPT;
    if (!bk__valid_stored_fpr(p->fpr) || (p->fpr == 0.0) != (p->capacity == 0))
        return BK_ECORRUPT;
    bk_blocked *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &blocked_ops);
    f->words = p->data;
    f->owns_words = 0;
    f->nblocks = nblocks;
    f->k = p->k;
    f->split = split;
    f->seed = seed;
    init_keys(f);
    f->capacity = p->capacity;
    f->target_fpr = p->fpr;
    f->items = p->items;
    *out = f;
    return BK_OK;
}

static int ops_add(void *f, bk_hash h) { return bk_blocked_add_hash(f, h); }
static bk_hash ops_hash(const void *f, const void *key, size_t len)
{
    return hash_of(f, key, len);
}
static int ops_contains(const void *f, bk_hash h) { return bk_blocked_contains_hash(f, h); }
BK__OPS_SEED_DESTROY(blocked)
BK__OPS_ONE_PART
BK__OPS_CLEAR_CLONE(blocked)
BK__OPS_BATCHES(blocked)

static int ops_info(const void *vf, bk_filter_info *out)
{
    bk_blocked_stats st;
    int rc = bk_blocked_get_stats(vf, &st);
    if (rc != BK_OK) return rc;
    BK__INFO_FROM_STATS(out, st, st.estimated_items);
    out->single_writer = ((const bk_blocked *)vf)->single_writer;
    return BK_OK;
}

static void ops_set_single_writer(void *f, int single_writer)
{
    bk_blocked_set_single_writer(f, single_writer);
}

static int ops_create(const bk_filter_config *cfg, void **out)
{
    if (cfg->blocked_split)
        return bk_blocked_create_split((bk_blocked **)out, cfg->capacity, cfg->fpr, cfg->seed);
    return bk_blocked_create((bk_blocked **)out, cfg->capacity, cfg->fpr, cfg->seed);
}

BK__OPS_MERGE(blocked)

static int ops_incompatibility(const void *va, const void *vb, char *buf, size_t cap)
{
    const bk_blocked *a = va, *b = vb;
    if (a->nblocks != b->nblocks)
        snprintf(buf, cap, "sizes differ: %llu vs %llu bits",
                 (unsigned long long)(a->nblocks * BLOCK_BITS),
                 (unsigned long long)(b->nblocks * BLOCK_BITS));
    else if (a->k != b->k)
        snprintf(buf, cap, "hash counts differ: %u vs %u", a->k, b->k);
    else if (a->split != b->split)
        snprintf(buf, cap, "layouts differ: %s vs %s", a->split ? "split" : "default",
                 b->split ? "split" : "default");
    else
        return 0;
    return 1;
}

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_blocked *f = vf;
    img->seed = f->seed;
    img->capacity = f->capacity;
    img->fpr = f->target_fpr;
    img->items = bk__load64(&f->items);
    img->hash = f->split ? BK__HASH_XXH3_64 : BK__HASH_XXH3_128;
    bk__blocked_describe_part(f, &img->parts[0]);
    return BK_OK;
}

static int ops_restore(const bk__image *img, void **out)
{
    if (img->nparts != 1) return BK_ECORRUPT;
    const bk__part *p = &img->parts[0];
    if (img->capacity != p->capacity || img->fpr != p->fpr || img->items != p->items)
        return BK_ECORRUPT;
    /* the split layout hashes with XXH3-64: the header says so too */
    if ((img->hash == BK__HASH_XXH3_64) != ((p->flags & PART_SPLIT) != 0))
        return BK_ECORRUPT;
    return bk__blocked_restore_part(p, img->seed, 1, (bk_blocked **)out);
}


void bk__blocked_allocations(const bk_blocked *f, bk__visit_fn visit, void *ctx)
{
    bk__visit_handle(f, sizeof(*f), f->owns_words, f->words,
                     (size_t)f->nblocks * BK_CACHE_LINE, visit, ctx);
}

/* The handle and, unless borrowed from a loaded block, the bits. */
static void ops_allocations(const void *f, bk__visit_fn visit, void *ctx)
{
    bk__blocked_allocations(f, visit, ctx);
}

void bk__blocked_key_mask(uint32_t x, uint32_t k, uint64_t mask[BLOCK_WORDS])
{
    mask_scalar(x, k, mask);
}

/* Auto-clear's view (filter.h): bits, and adds that count the bits they
 * set. Plain stores: the auto-clear filter is the only writer. It wraps
 * the default layout only (its files hash with XXH3-128). */
static uint64_t fill_units(const void *f)
{
    return ((const bk_blocked *)f)->nblocks * BLOCK_BITS;
}

static uint64_t fill_count_set(const void *vf)
{
    const bk_blocked *f = vf;
    uint64_t t = 0;
    for (uint64_t b = 0; b < f->nblocks; b++) t += block_bits_set(f, b);
    return t;
}

/* The scalar way: each probe counts when its bit is clear in the line and
 * not yet set by an earlier probe of the key (two may land on one bit). */
static uint64_t fill_line_scalar(uint64_t *line, uint32_t x, uint32_t k)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t pos = in_block_position(x, i);
        uint64_t *word = &line[pos >> 6], bit = UINT64_C(1) << (pos & 63);
        n += (*word & bit) == 0;
        *word |= bit;
    }
    return n;
}

#if BK_BLOCKED_X86 && !BK_BLOCKED_TSAN
/* With AVX2: the key's mask (as the plain add builds it, made once by the
 * caller: fill_line_avx2, or the rotate add, which tests the previous
 * line with it too) set in the line, the missing bits counted in
 * registers. ThreadSanitizer builds take the scalar way, as they read
 * lines through atomics only. */
__attribute__((target("avx2")))
static inline uint64_t fill_mask_avx2(uint64_t *line, __m256i mask_lo, __m256i mask_hi)
{
    __m256i *half = (__m256i *)(void *)line;
    __m256i old_lo = _mm256_load_si256(&half[0]), old_hi = _mm256_load_si256(&half[1]);
    __m256i miss_lo = _mm256_andnot_si256(old_lo, mask_lo);
    __m256i miss_hi = _mm256_andnot_si256(old_hi, mask_hi);
    _mm256_store_si256(&half[0], _mm256_or_si256(old_lo, mask_lo));
    _mm256_store_si256(&half[1], _mm256_or_si256(old_hi, mask_hi));
    /* the missing bits counted in registers (a nibble table per byte, then
     * the bytes summed): read back from memory, the vector stores of the
     * words would not forward to their 64-bit loads on some cores, and
     * consecutive adds would wait for each other */
    const __m256i table = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4,
                                           0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    __m256i bytes = _mm256_setzero_si256();
    __m256i halves[2] = {miss_lo, miss_hi};
    for (int i = 0; i < 2; i++) {
        __m256i lo = _mm256_and_si256(halves[i], nibble);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(halves[i], 4), nibble);
        bytes = _mm256_add_epi8(bytes, _mm256_add_epi8(_mm256_shuffle_epi8(table, lo),
                                                       _mm256_shuffle_epi8(table, hi)));
    }
    __m256i sums = _mm256_sad_epu8(bytes, _mm256_setzero_si256());
    __m128i pair = _mm_add_epi64(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
    return (uint64_t)_mm_cvtsi128_si64(_mm_add_epi64(pair, _mm_unpackhi_epi64(pair, pair)));
}

__attribute__((target("avx2")))
static uint64_t fill_line_avx2(uint64_t *line, uint32_t x, uint32_t k)
{
    __m256i mask_lo, mask_hi;
    mask_avx2(x, k, &mask_lo, &mask_hi);
    return fill_mask_avx2(line, mask_lo, mask_hi);
}
#endif

#if BK_BLOCKED_X86 && !BK_BLOCKED_TSAN
/* With AVX-512 and its 64-bit popcount: the plain add's masked store
 * (only the words that change are written), the missing bits counted in
 * one instruction and the 8 counts summed by one SAD. Of a mask made
 * once (the rotate add tests the previous line with it too: built twice,
 * its loop was a tenth of that add). */
__attribute__((target("avx512f,avx512vpopcntdq")))
static inline uint64_t fill_mask_avx512(uint64_t *line, __m512i mask)
{
    __m512i old = _mm512_load_si512((const void *)line);
    __m512i miss = _mm512_andnot_si512(old, mask);
    _mm512_mask_store_epi32((void *)line, _mm512_test_epi32_mask(miss, miss),
                            _mm512_or_si512(old, mask));
    /* the 8 counts (at most 64 each) as bytes: a shorter chain than a sum
     * of 8 lanes, and the next add's clear test waits on it */
    __m128i counts = _mm512_cvtepi64_epi8(_mm512_popcnt_epi64(miss));
    return (uint64_t)_mm_cvtsi128_si64(_mm_sad_epu8(counts, _mm_setzero_si128()));
}

__attribute__((target("avx512f,avx512vpopcntdq")))
static inline uint64_t fill_line_avx512(uint64_t *line, uint32_t x, uint32_t k)
{
    return fill_mask_avx512(line, mask_avx512(x, k));
}

static inline int have_vpopcntdq(void) { return bk__cpu_has(BK_CPU_AVX512VPOPCNTDQ); }
#endif

__attribute__((always_inline)) static inline int fill_add_inline(bk_blocked *f, bk_hash h,
                                                                 uint64_t *newly_set)
{
    uint64_t *line = line_of(f, h), n;
#if BK_BLOCKED_X86 && !BK_BLOCKED_TSAN
    int level = current_impl()->level;
    if (level >= BK_SIMD_AVX512 && have_vpopcntdq())
        n = fill_line_avx512(line, (uint32_t)h.hi, f->k);
    else if (level >= BK_SIMD_AVX2) n = fill_line_avx2(line, (uint32_t)h.hi, f->k);
    else
#endif
        n = fill_line_scalar(line, (uint32_t)h.hi, f->k);
    f->items += n != 0;
    *newly_set = n;
    return n != 0;
}

static int fill_add(void *f, bk_hash h, uint64_t *newly_set)
{
    return fill_add_inline(f, h, newly_set);
}

/* The hash and the fill add in one call (auto-clear's bk_filter_add). The
 * AVX-512 one is compiled whole for its target, so that the line's work
 * is inlined; the other apart, so that the choice takes no stack frame. */
__attribute__((noinline))
static int fill_add_key_generic(void *vf, const void *key, size_t len, bk__fill_counts *c)
{
    bk_blocked *f = vf;
    uint64_t n;
    int rc = fill_add_inline(f, hash_of(f, key, len), &n);
    c->set += n;
    c->items += (uint64_t)rc;
    return rc;
}

#if BK_BLOCKED_X86 && !BK_BLOCKED_TSAN
__attribute__((target("avx512f,avx512vpopcntdq")))
static int fill_add_key_avx512(bk_blocked *f, const void *key, size_t len, bk__fill_counts *c)
{
    bk_hash h = hash_of(f, key, len);
    uint64_t n = fill_line_avx512(line_of(f, h), (uint32_t)h.hi, f->k);
    uint64_t fresh = n != 0;
    f->items += fresh;
    c->items += fresh;
    /* two scalar adds, not one vector add of both counts (a longer chain
     * for the next add's clear test to wait on) */
    __asm__ volatile("" ::: "memory");
    c->set += n;
    return (int)fresh;
}
#endif

static int fill_add_key(void *vf, const void *key, size_t len, bk__fill_counts *c)
{
#if BK_BLOCKED_X86 && !BK_BLOCKED_TSAN
    if (current_impl()->level >= BK_SIMD_AVX512 && have_vpopcntdq())
        return fill_add_key_avx512(vf, key, len, c);
#endif
    return fill_add_key_generic(vf, key, len, c);
}

/* Rotate mode's add (auto-clear): the key into f, its line in prev (the
 * same block: the same shape and seed) fetched alongside, and tested when
 * the key was new in f. With AVX-512 the one mask serves both lines, and
 * nothing branches on the answer. */
__attribute__((noinline))
static int fill_add_key_rotate_generic(bk_blocked *f, const bk_blocked *prev, const void *key,
                                       size_t len, bk__fill_counts *c)
{
    bk_hash h = hash_of(f, key, len);
    const uint64_t *was = prev->words + block_of(f, h) * BLOCK_WORDS;
    BK_PREFETCH_READ(was);
    uint64_t n;
    int rc = fill_add_inline(f, h, &n);
    c->set += n;
    c->items += (uint64_t)rc;
    if (rc == 1 && impl_for(prev)->contains(was, (uint32_t)h.hi, prev->k)) rc = 0;
    return rc;
}

#if BK_BLOCKED_X86 && !BK_BLOCKED_TSAN
__attribute__((target("avx512f,avx512vpopcntdq")))
static int fill_add_key_rotate_avx512(bk_blocked *f, const bk_blocked *prev, const void *key,
                                      size_t len, bk__fill_counts *c)
{
    bk_hash h = hash_of(f, key, len);
    uint64_t at = block_of(f, h) * BLOCK_WORDS;
    __m512i was = _mm512_load_si512((const void *)(prev->words + at));
    __m512i mask = mask_avx512((uint32_t)h.hi, f->k);
    uint64_t n = fill_mask_avx512(f->words + at, mask); /* one mask for both lines */
    uint64_t fresh = n != 0;
    __m512i missing = _mm512_andnot_si512(was, mask); /* of the key's bits, in prev */
    uint64_t in_prev = _mm512_test_epi64_mask(missing, missing) == 0;
    f->items += fresh;
    c->items += fresh;
    __asm__ volatile("" ::: "memory"); /* as fill_add_key_avx512 */
    c->set += n;
    return (int)(fresh & (in_prev ^ 1));
}

/* The same with AVX2 (the CPUs without AVX-512): one mask for both
 * lines, and no branch on the answer. */
__attribute__((target("avx2")))
static int fill_add_key_rotate_avx2(bk_blocked *f, const bk_blocked *prev, const void *key,
                                    size_t len, bk__fill_counts *c)
{
    bk_hash h = hash_of(f, key, len);
    uint64_t at = block_of(f, h) * BLOCK_WORDS;
    const __m256i *was = (const __m256i *)(const void *)(prev->words + at);
    __m256i was_lo = _mm256_load_si256(&was[0]), was_hi = _mm256_load_si256(&was[1]);
    __m256i mask_lo, mask_hi;
    mask_avx2((uint32_t)h.hi, f->k, &mask_lo, &mask_hi);
    uint64_t n = fill_mask_avx2(f->words + at, mask_lo, mask_hi);
    uint64_t fresh = n != 0;
    __m256i missing = _mm256_or_si256(_mm256_andnot_si256(was_lo, mask_lo),
                                      _mm256_andnot_si256(was_hi, mask_hi));
    uint64_t in_prev = (uint64_t)_mm256_testz_si256(missing, missing);
    f->items += fresh;
    c->items += fresh;
    __asm__ volatile("" ::: "memory"); /* as fill_add_key_avx512 */
    c->set += n;
    return (int)(fresh & (in_prev ^ 1));
}
#endif

static int fill_add_key_rotate(void *vf, const void *vprev, const void *key, size_t len,
                               bk__fill_counts *c)
{
#if BK_BLOCKED_X86 && !BK_BLOCKED_TSAN
    int level = current_impl()->level;
    if (level >= BK_SIMD_AVX512 && have_vpopcntdq())
        return fill_add_key_rotate_avx512(vf, vprev, key, len, c);
    if (level >= BK_SIMD_AVX2) return fill_add_key_rotate_avx2(vf, vprev, key, len, c);
#endif
    return fill_add_key_rotate_generic(vf, vprev, key, len, c);
}

/* A bit is touched by a key when the key picks its block (1 / b) and one of
 * its k in-block positions lands on it (1 - (1 - 1/512)^k). */
static double fill_at(const void *vf, uint64_t n)
{
    const bk_blocked *f = vf;
    double touch = -expm1((double)f->k * log1p(-1.0 / BLOCK_BITS)) / (double)f->nblocks;
    return -expm1((double)n * log1p(-touch));
}

static const bk__fill_ops blocked_fill = {fill_units, fill_count_set, fill_at,    fill_add,
                                          NULL,       fill_add_key,   fill_add_key_rotate};

static const bk__family_ops blocked_ops = {
    .family = BK_FAMILY_BLOCKED,
    .name = "blocked",
    BK__OPS_STANDARD,
    .hash = ops_hash, .add_batch = ops_add_batch, .contains_batch = ops_contains_batch,
    .lockfree_add = 1, .set_single_writer = ops_set_single_writer, .clone = ops_clone,
    .clear = ops_clear, .merge = ops_merge, .incompatibility = ops_incompatibility,
    .fill = &blocked_fill,
};

const bk__family_ops *const bk__blocked_family = &blocked_ops;
