/*
 * bench_window.c - what limits single calls and batched lookups when the
 * table is far larger than the caches: the measurements behind the misses
 * listed in bench/RESULTS.md, its tables in bench/HISTORY.md section 12
 * (issue 12: single calls at 1e8 keys beside libbloom, scalable lookups;
 * issue 16: static-filter batch lookups). This
 * machine is a KVM guest without performance counters (perf stat reports
 * "not supported"), so instead of counting stalls the program changes one
 * thing at a time and times it.
 *
 * Part 1, single calls. A blocked filter sized for n keys at 1% (124 MB at
 * n = 1e8, single-writer, huge pages as bloomkit asks for them) holding n
 * random hashes; absent keys (16 to 32 bytes) looked up one call at a time:
 *   floor                   one random line of the same table read per key
 *   prehashed               bk_blocked_contains_hash on hashes made earlier
 *   prehashed + 16 loads    the same plus 16 independent L1 loads per call
 *   prehashed + 4 ALU chains ... plus 4 independent chains of 10 ALU ops
 *   prehashed + XXH3-64     ... plus XXH3-64 of another key (unused result)
 *   prehashed + XXH3-128    ... plus XXH3-128 of another key
 *   bk_blocked_contains     the library's call: XXH3-128 of the key inside
 *   libbloom bloom_check    the peer: a bit array of the size libbloom picks
 *                           for n at 1%, its bytes random (half the bits set,
 *                           as after n adds), the same keys
 * None of the extra work feeds the address, so if a call cost its own
 * latency the extra work would add its few nanoseconds of execution; if
 * calls overlap only as far as the out-of-order window holds them, the
 * extra work costs in proportion to its instructions.
 *
 * Part 2, batched reads by lines per key, software prefetch 32 keys ahead,
 * in a table the size of the blocked filter's (huge pages):
 *   1 line                  the blocked filter's lookup (its floor)
 *   2 adjacent lines        a probe window crossing into the next line
 *                           (ribbon filters' interleaved layout)
 *   3 lines in 3 segments   binary fuse: one line in each of three
 *                           consecutive 256 KB segments (2^18 slots of 8-bit
 *                           fingerprints, lib/fuse.c's segment at 1e8 keys)
 *
 * Every cell is the fastest of --repeat runs (default 3). Ratios are what
 * to read: the machine is shared.
 */
#include <bloom.h> /* libbloom: the peer */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h> /* madvise */
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h> /* the extra hash work of part 1 */

#include "benchutil.h"
#include "bloomkit.h"

#define AHEAD 32 /* part 2's prefetch distance, in keys */

static inline uint64_t fastrange(uint64_t x, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)x * n) >> 64);
}

/* Keys of 16 to 32 letters, made before any timing. */
typedef struct keys {
    char *arena;
    const void **ptrs;
    size_t *lens;
    size_t n;
} keys;

static int make_keys(keys *k, size_t n, uint64_t seed)
{
    k->arena = malloc(n * 32);
    k->ptrs = malloc(n * sizeof(*k->ptrs));
    k->lens = malloc(n * sizeof(*k->lens));
    k->n = n;
    if (!k->arena || !k->ptrs || !k->lens) return -1;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = splitmix(&seed);
        size_t len = 16 + (size_t)(r % 17);
        char *at = k->arena + 32 * i;
        for (size_t j = 0; j < len; j++) {
            if ((j & 7) == 0) r = splitmix(&seed);
            at[j] = (char)('a' + (r >> (8 * (j & 7))) % 26);
        }
        k->ptrs[i] = at;
        k->lens[i] = len;
    }
    return 0;
}

/* A table of `bytes` on huge pages (as bk__calloc_aligned asks from 4 MiB
 * up), every page touched. */
static uint64_t *make_table(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    size_t alloc = (bytes + huge - 1) / huge * huge;
    uint64_t *t = aligned_alloc(huge, alloc);
    if (t == NULL) return NULL;
    madvise(t, alloc, MADV_HUGEPAGE);
    uint64_t s = 7;
    for (size_t i = 0; i < alloc / 8; i++) t[i] = splitmix(&s);
    return t;
}

static int g_repeat = 3;
static volatile uint64_t g_hot[16]; /* part 1's independent L1 loads */

/* The fastest of g_repeat runs of `body` over i in [0, count), in ns per i. */
#define TIME(cell, count, acc, body)                                          \
    do {                                                                      \
        double best_ = -1.0;                                                  \
        for (int r_ = 0; r_ < g_repeat; r_++) {                               \
            double t0_ = now_ns();                                            \
            for (size_t i = 0; i < (count); i++) { body; }                    \
            double t_ = (now_ns() - t0_) / (double)(count);                   \
            if (best_ < 0 || t_ < best_) best_ = t_;                          \
        }                                                                     \
        (cell) = best_;                                                       \
        if ((acc) == 42) printf(" ");                                         \
    } while (0)

static inline uint64_t extra_loads(void)
{
    uint64_t z = 0;
    for (int j = 0; j < 16; j++) z += g_hot[j];
    return z;
}

/* 4 independent chains of 10 ALU instructions each; the empty asm keeps
 * the compiler from folding them. */
static inline uint64_t extra_alu(uint64_t x)
{
    uint64_t a = x, b = x + 1, c = x + 2, d = x + 3;
    for (int j = 0; j < 5; j++) {
        a ^= a >> 7; b ^= b >> 9; c ^= c >> 11; d ^= d >> 13;
        a += 0x9e37; b += 0x7f4a; c += 0x1234; d += 0x5678;
    }
    __asm__ volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d));
    return a ^ b ^ c ^ d;
}

static void row(const char *name, double ns, double floor, double pre)
{
    printf("| %-30s | %8.1f | %7.2fx | %7.2fx |\n", name, ns, ns / floor, ns / pre);
}

static int part1(uint64_t n, size_t lookups)
{
    bk_blocked *f;
    if (bk_blocked_create(&f, n, 0.01, 7) != BK_OK) return -1;
    bk_blocked_set_single_writer(f, 1);
    uint64_t s = 99;
    for (uint64_t i = 0; i < n; i++) {
        bk_hash h = {splitmix(&s), splitmix(&s)};
        bk_blocked_add_hash(f, h);
    }
    keys absent, other;
    if (make_keys(&absent, lookups, 1) || make_keys(&other, lookups, 2)) return -1;
    bk_hash *hashes = malloc(lookups * sizeof(*hashes));
    uint64_t *lines = malloc(lookups * sizeof(*lines));
    size_t bytes = (size_t)(bk_blocked_bits(f) / 8);
    uint64_t *table = make_table(bytes);
    if (hashes == NULL || lines == NULL || table == NULL) return -1;
    for (size_t i = 0; i < lookups; i++) {
        hashes[i] = bk_hash_key(absent.ptrs[i], absent.lens[i], 7);
        lines[i] = fastrange(splitmix(&s), bytes / 64);
    }
    struct bloom lb;
    if (n > INT32_MAX || bloom_init(&lb, (int)n, 0.01) != 0) return -1;
    for (int j = 0; j < lb.bytes; j++) lb.bf[j] = (unsigned char)splitmix(&s);

    double t[8];
    uint64_t acc = 0;
    TIME(t[0], lookups, acc, acc += table[lines[i] * 8] & 1);
    TIME(t[1], lookups, acc, acc += (uint64_t)bk_blocked_contains_hash(f, hashes[i]));
    TIME(t[2], lookups, acc,
         acc += (uint64_t)bk_blocked_contains_hash(f, hashes[i]) + extra_loads());
    TIME(t[3], lookups, acc,
         acc += (uint64_t)bk_blocked_contains_hash(f, hashes[i]) + extra_alu(i));
    TIME(t[4], lookups, acc,
         acc += (uint64_t)bk_blocked_contains_hash(f, hashes[i]) +
                XXH3_64bits_withSeed(other.ptrs[i], other.lens[i], 7));
    TIME(t[5], lookups, acc,
         acc += (uint64_t)bk_blocked_contains_hash(f, hashes[i]) +
                XXH3_128bits_withSeed(other.ptrs[i], other.lens[i], 7).low64);
    TIME(t[6], lookups, acc,
         acc += (uint64_t)bk_blocked_contains(f, absent.ptrs[i], absent.lens[i]));
    TIME(t[7], lookups, acc,
         acc += (uint64_t)bloom_check(&lb, absent.ptrs[i], (int)absent.lens[i]));

    printf("\nPart 1: single calls, n = %.0e (blocked table %.0f MB, libbloom %.0f MB),"
           " %zu absent keys; ns per call, fastest of %d\n",
           (double)n, bytes / 1e6, (double)lb.bytes / 1e6, lookups, g_repeat);
    printf("| %-30s | %8s | %8s | %8s |\n", "call", "ns", "/ floor", "/ pre");
    printf("|--------------------------------|----------|----------|----------|\n");
    static const char *const names[8] = {
        "floor (one random line)", "prehashed", "prehashed + 16 loads",
        "prehashed + 4 ALU chains", "prehashed + XXH3-64", "prehashed + XXH3-128",
        "bk_blocked_contains", "libbloom bloom_check",
    };
    for (int j = 0; j < 8; j++) row(names[j], t[j], t[0], t[1]);
    printf("libbloom / bk_blocked_contains = %.2fx (issue 12 asks >= 4.5x at 1e8);"
           " libbloom / prehashed = %.2fx\n", t[7] / t[6], t[7] / t[1]);
    bloom_free(&lb);
    bk_blocked_free(f);
    free(hashes);
    free(lines);
    free(table);
    return 0;
}

static int part2(uint64_t n, size_t lookups)
{
    uint64_t m_bits;
    uint32_t k;
    if (bk_blocked_optimal(n, 0.01, &m_bits, &k) != BK_OK) return -1;
    size_t bytes = (size_t)(m_bits / 8), nlines = bytes / 64;
    uint64_t *table = make_table(bytes);
    if (table == NULL) return -1;
    const uint64_t seg = (UINT64_C(1) << 18) / 64; /* a 256 KB segment, in lines */
    const uint64_t nseg = nlines / seg - 2;
    double t[3];
    uint64_t acc = 0, s = 5;
    uint64_t *h = malloc(lookups * sizeof(*h));
    if (h == NULL) return -1;
    for (size_t i = 0; i < lookups; i++) h[i] = splitmix(&s);
#define ONE(x) (fastrange((x), nlines) * 8)
#define TWO(x) (fastrange((x), nlines - 1) * 8)
#define SEG(x, j) ((((fastrange((x), nseg) + (j)) * seg) + (((x) >> (20 * (j))) & (seg - 1))) * 8)
    TIME(t[0], lookups - AHEAD, acc, {
        __builtin_prefetch(&table[ONE(h[i + AHEAD])]);
        acc += table[ONE(h[i])];
    });
    TIME(t[1], lookups - AHEAD, acc, {
        __builtin_prefetch(&table[TWO(h[i + AHEAD])]);
        __builtin_prefetch(&table[TWO(h[i + AHEAD]) + 8]);
        acc += table[TWO(h[i])] ^ table[TWO(h[i]) + 8];
    });
    TIME(t[2], lookups - AHEAD, acc, {
        uint64_t x = h[i + AHEAD];
        __builtin_prefetch(&table[SEG(x, 0)]);
        __builtin_prefetch(&table[SEG(x, 1)]);
        __builtin_prefetch(&table[SEG(x, 2)]);
        acc += table[SEG(h[i], 0)] ^ table[SEG(h[i], 1)] ^ table[SEG(h[i], 2)];
    });
    printf("\nPart 2: batched reads, table %.0f MB (the blocked filter's at n = %.0e),"
           " prefetch %d keys ahead; ns per key, fastest of %d\n",
           bytes / 1e6, (double)n, AHEAD, g_repeat);
    printf("| %-30s | %8s | %8s |\n", "lines per key", "ns", "/ 1 line");
    printf("|--------------------------------|----------|----------|\n");
    static const char *const names[3] = {
        "1 line", "2 adjacent lines", "3 lines in 3 segments",
    };
    for (int j = 0; j < 3; j++)
        printf("| %-30s | %8.1f | %7.2fx |\n", names[j], t[j], t[j] / t[0]);
    free(h);
    free(table);
    return 0;
}

int main(int argc, char **argv)
{
    double n = 1e8, lookups = 2e6;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--n") && v) n = strtod(v, NULL), i++;
        else if (!strcmp(a, "--lookups") && v) lookups = strtod(v, NULL), i++;
        else if (!strcmp(a, "--repeat") && v) g_repeat = atoi(v), i++;
        else {
            fprintf(stderr,
                    "usage: bench_window [--n N (1e8)] [--lookups L (2e6)] [--repeat R (3)]\n"
                    "  part 1: single calls on a blocked filter of N keys with more and\n"
                    "  more work per call, beside libbloom; part 2: batched reads of 1, 2\n"
                    "  and 3 lines per key in a table the blocked filter's size\n");
            return strcmp(a, "--help") ? 2 : 0;
        }
    }
    if (n < 1e3 || lookups < 1e4 || g_repeat < 1) {
        fprintf(stderr, "bench_window: --n >= 1e3, --lookups >= 1e4, --repeat >= 1\n");
        return 2;
    }
    printf("bloomkit %s, blocked filter SIMD path %s\n", bk_version_string(),
           bk_blocked_simd_name(bk_blocked_simd_level()));
    if (part1((uint64_t)n, (size_t)lookups) != 0 || part2((uint64_t)n, (size_t)lookups) != 0) {
        fprintf(stderr, "bench_window: out of memory\n");
        return 1;
    }
    return 0;
}
