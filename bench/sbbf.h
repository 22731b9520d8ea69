/*
 * sbbf.h - the split-block Bloom filter, the peer for single-key calls.
 *
 * The design of Impala's and Kudu's filters, fixed by the Apache Parquet
 * format (parquet-format, BloomFilter.md): blocks of 256 bits, eight
 * 32-bit words each; a 64-bit key hash picks the block from its upper 32
 * bits, ((h >> 32) * blocks) >> 32, and sets one bit in every word of it,
 * bit (x * SALT[i]) >> 27 of word i, x being the low 32 bits and SALT the
 * eight odd constants of the specification. With AVX2 a key's mask is one
 * vector multiply, shift and variable shift; an add is one OR into the
 * block, a lookup one test (vptest).
 *
 * Sizing: the specification's formula, bits = -8 n / ln(1 - p^(1/8)),
 * ignores that blocks receive keys unevenly, and a filter so sized measures
 * about 1.47% when asked for 1% (9.68 bits per key). So that the rows
 * compare filters of the same rate, sbbf_init takes the smallest number of
 * blocks for which the rate with Poisson block loads,
 *     sum_i e^-L L^i / i! (1 - (31/32)^i)^8,   L = 256 n / bits,
 * is at most p (about 10.8 bits per key at 1%); no power-of-two rounding.
 *
 * Written from the specification for bench/bench_filters.c only; not
 * part of the library. The table asks for huge pages from 4 MiB up, as
 * bloomkit's tables do, so that both pay the same for their pages.
 */
#ifndef BK_BENCH_SBBF_H
#define BK_BENCH_SBBF_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct sbbf {
    uint32_t *words;  /* 8 per block, 32-byte aligned */
    uint64_t nblocks; /* below 2^32: the block index takes 32 bits */
    size_t bytes;
} sbbf;

static const uint32_t SBBF_SALT[8] = {
    0x47b6137bu, 0x44974d91u, 0x8824ad5bu, 0xa2b7289du,
    0x705495c7u, 0x2df1424bu, 0x9efc4947u, 0x5c6bfb31u,
};

/* The rate of a filter with `load` keys per block on average. */
static double sbbf_rate(double load)
{
    double term = exp(-load), sum = 0.0; /* term = Poisson(i; load) */
    for (int i = 0; i < 4096; i++) {
        sum += term * pow(1.0 - pow(31.0 / 32.0, (double)i), 8.0);
        term *= load / (double)(i + 1);
        if (i > load && term < 1e-18) break;
    }
    return sum;
}

/* 0, or -1 when p is not in (0, 1) or the table cannot be had. */
static int sbbf_init(sbbf *f, uint64_t n, double p)
{
    const size_t huge = (size_t)2 << 20;
    memset(f, 0, sizeof(*f));
    if (!(p > 0.0 && p < 1.0) || n == 0) return -1;
    double bits = -8.0 * (double)n / log(1.0 - pow(p, 1.0 / 8.0));
    uint64_t blocks = (uint64_t)ceil(bits / 256.0);
    if (blocks == 0) blocks = 1;
    /* grow by 0.5% steps, then back off to the smallest that meets p */
    while (sbbf_rate((double)n / (double)blocks) > p) blocks += blocks / 200 + 1;
    for (uint64_t step = blocks / 400 + 1; step > 0; step /= 2)
        while (blocks > step && sbbf_rate((double)n / (double)(blocks - step)) <= p)
            blocks -= step;
    if (blocks > UINT32_MAX) return -1;
    size_t bytes = (size_t)blocks * 32;
    size_t alloc = bytes >= 2 * huge ? (bytes + huge - 1) / huge * huge : (bytes + 63) / 64 * 64;
    f->words = aligned_alloc(bytes >= 2 * huge ? huge : 64, alloc);
    if (f->words == NULL) return -1;
    if (bytes >= 2 * huge) madvise(f->words, alloc, MADV_HUGEPAGE);
    memset(f->words, 0, alloc);
    f->nblocks = blocks;
    f->bytes = bytes;
    return 0;
}

static void sbbf_free(sbbf *f)
{
    free(f->words);
    f->words = NULL;
}

static void sbbf_clear(sbbf *f)
{
    memset(f->words, 0, f->bytes);
}

static inline uint32_t *sbbf_block(const sbbf *f, uint64_t h)
{
    return f->words + ((h >> 32) * f->nblocks >> 32) * 8;
}

__attribute__((target("avx2")))
static inline __m256i sbbf_mask(uint32_t x)
{
    __m256i salts = _mm256_loadu_si256((const __m256i *)(const void *)SBBF_SALT);
    __m256i bit = _mm256_srli_epi32(_mm256_mullo_epi32(_mm256_set1_epi32((int)x), salts), 27);
    return _mm256_sllv_epi32(_mm256_set1_epi32(1), bit);
}

/* 1 when a bit was missing (the key was new), as bloomkit's adds answer;
 * the block is written either way, as the specification's insert does. */
__attribute__((target("avx2")))
static int sbbf_add_hash(sbbf *f, uint64_t h)
{
    __m256i *b = (__m256i *)(void *)sbbf_block(f, h);
    __m256i mask = sbbf_mask((uint32_t)h);
    __m256i old = _mm256_load_si256(b);
    _mm256_store_si256(b, _mm256_or_si256(old, mask));
    return !_mm256_testc_si256(old, mask);
}

__attribute__((target("avx2")))
static int sbbf_contains_hash(const sbbf *f, uint64_t h)
{
    const __m256i *b = (const __m256i *)(const void *)sbbf_block(f, h);
    return _mm256_testc_si256(_mm256_load_si256(b), sbbf_mask((uint32_t)h));
}

#endif /* BK_BENCH_SBBF_H */
