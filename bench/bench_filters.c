/*
 * bench_filters.c - the classic and blocked filters beside Debian's libbloom
 * and beside the memory system's own limit, on the same keys in one run.
 *
 * For each n and p it prints one table: bits per key, the measured
 * false-positive rate (on `--absent` keys never added), and nanoseconds per
 * add, per positive lookup, per negative lookup and per key of a batched
 * lookup. Rows:
 *   classic           bk_bloom (k probes anywhere)
 *   blocked-scalar    bk_blocked, portable code path
 *   blocked-<simd>    bk_blocked, best SIMD path of this CPU
 *   libbloom          Debian's libbloom (bloom_init / bloom_add / bloom_check)
 *   limit             random 64-byte reads in a buffer the size of the
 *                     blocked filter, as many in flight as the core allows:
 *                     the floor for any filter touching one line per key
 * Keys are 16 to 32-byte strings made before any timing. Speed is measured,
 * never asserted: targets are compared in the summary lines, and the ratios
 * that matter are taken within one run, since the machine may be shared.
 */
#include <bloom.h> /* libbloom: the peer */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bloomkit.h"

/*==========================================================================
 * Options
 *==========================================================================*/

#define MAX_LIST 8

typedef struct options {
    double n[MAX_LIST];
    int nn;
    double p[MAX_LIST];
    int np;
    uint64_t absent;   /* absent keys: FPR and negative lookups */
    uint64_t lookups;  /* positive keys looked up (a sample of the n) */
    uint64_t seed;
    int skip_classic;
    int skip_libbloom;
} options;

static void usage(FILE *out)
{
    fprintf(out,
        "usage: bench_filters [options]\n"
        "  --n LIST        key counts, comma-separated (default 1e6,1e7)\n"
        "  --p LIST        false-positive targets (default 0.01,0.001)\n"
        "  --absent N      absent keys for FPR and negative lookups\n"
        "                  (default 2e6, at least 1e6)\n"
        "  --lookups N     positive keys looked up, single and batched\n"
        "                  (default min(n, 1e7))\n"
        "  --seed S        key generator seed (default 1)\n"
        "  --no-classic    skip the classic filter\n"
        "  --no-libbloom   skip libbloom\n"
        "  --help          this text\n"
        "n = 1e8 needs about 7 GB of memory for keys and filters.\n");
}

static int parse_list(const char *s, double *out, int *count)
{
    *count = 0;
    while (*s) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (end == s || errno || v <= 0 || *count == MAX_LIST) return -1;
        out[(*count)++] = v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return *count ? 0 : -1;
}

static int parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof(*o));
    o->n[0] = 1e6, o->n[1] = 1e7, o->nn = 2;
    o->p[0] = 0.01, o->p[1] = 0.001, o->np = 2;
    o->absent = 2000000;
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); exit(0); }
        else if (!strcmp(a, "--no-classic")) o->skip_classic = 1;
        else if (!strcmp(a, "--no-libbloom")) o->skip_libbloom = 1;
        else if (v == NULL) return -1;
        else if (!strcmp(a, "--n")) { if (parse_list(v, o->n, &o->nn)) return -1; i++; }
        else if (!strcmp(a, "--p")) {
            if (parse_list(v, o->p, &o->np)) return -1;
            for (int j = 0; j < o->np; j++) if (o->p[j] >= 1) return -1;
            i++;
        }
        else if (!strcmp(a, "--absent")) { o->absent = (uint64_t)strtod(v, NULL); i++; }
        else if (!strcmp(a, "--lookups")) { o->lookups = (uint64_t)strtod(v, NULL); i++; }
        else if (!strcmp(a, "--seed")) { o->seed = strtoull(v, NULL, 0); i++; }
        else return -1;
    }
    if (o->absent < 1000000) {
        fprintf(stderr, "bench_filters: --absent must be at least 1e6\n");
        return -1;
    }
    return 0;
}

/*==========================================================================
 * Keys: 16 to 32 bytes, distinct by construction (a set tag and the index
 * in base 32 lead every key), the rest random letters and digits.
 *==========================================================================*/

typedef struct keyset {
    char *arena;
    const void **ptrs;
    size_t *lens;
    int *ilens; /* libbloom takes int lengths */
    uint64_t n;
} keyset;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static int make_keys(keyset *ks, uint64_t n, char tag, uint64_t seed)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789-_";
    uint64_t rng = seed ^ ((uint64_t)(unsigned char)tag << 56);
    memset(ks, 0, sizeof(*ks));
    ks->arena = malloc(n * 32);
    ks->ptrs = malloc(n * sizeof(*ks->ptrs));
    ks->lens = malloc(n * sizeof(*ks->lens));
    ks->ilens = malloc(n * sizeof(*ks->ilens));
    if (!ks->arena || !ks->ptrs || !ks->lens || !ks->ilens) return -1;
    ks->n = n;
    char *at = ks->arena;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = splitmix(&rng);
        size_t len = 16 + (size_t)(r % 17);
        at[0] = tag;
        uint64_t v = i;
        for (int d = 1; d <= 7; d++, v >>= 5) at[d] = alphabet[v & 31];
        for (size_t j = 8; j < len; j++) {
            if ((j & 7) == 0) r = splitmix(&rng);
            at[j] = alphabet[(r >> (8 * (j & 7))) % 36];
        }
        ks->ptrs[i] = at;
        ks->lens[i] = len;
        ks->ilens[i] = (int)len;
        at += len;
    }
    return 0;
}

static void free_keys(keyset *ks)
{
    free(ks->arena);
    free(ks->ptrs);
    free(ks->lens);
    free(ks->ilens);
}

/*==========================================================================
 * Timing and rows
 *==========================================================================*/

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

#define NA (-1.0)

typedef struct row {
    char name[32];
    double bits_per_key, fpr, add, pos, neg, batch;
    uint64_t false_negatives;
} row;

static void print_cell(double v, const char *fmt)
{
    if (v == NA) printf(" %9s", "-");
    else printf(fmt, v);
}

static void print_row(const row *r)
{
    printf("| %-15s", r->name);
    print_cell(r->bits_per_key, " %9.2f");
    if (r->fpr == NA) printf(" %9s", "-"); else printf(" %8.4f%%", 100 * r->fpr);
    print_cell(r->add, " %9.1f");
    print_cell(r->pos, " %9.1f");
    print_cell(r->neg, " %9.1f");
    print_cell(r->batch, " %9.1f");
    printf(" |%s\n", r->false_negatives ? "  FALSE NEGATIVES!" : "");
}

/* Batched lookups go in chunks, so results stay in cache. */
#define CHUNK 4096

/*--------------------------------------------------------------------------
 * The filters, each behind the same five steps
 *--------------------------------------------------------------------------*/

static int run_classic(const keyset *in, const keyset *out, uint64_t lookups,
                       double p, row *r)
{
    bk_bloom *f;
    if (bk_bloom_create(&f, in->n, p, 7) != BK_OK) return -1;
    double t0 = now_ns();
    for (uint64_t i = 0; i < in->n; i++) bk_bloom_add(f, in->ptrs[i], in->lens[i]);
    double t1 = now_ns();
    uint64_t found = 0;
    for (uint64_t i = 0; i < lookups; i++)
        found += (uint64_t)bk_bloom_contains(f, in->ptrs[i], in->lens[i]);
    double t2 = now_ns();
    uint64_t fp = 0;
    for (uint64_t i = 0; i < out->n; i++)
        fp += (uint64_t)bk_bloom_contains(f, out->ptrs[i], out->lens[i]);
    double t3 = now_ns();
    uint64_t batch_found = 0;
    uint8_t res[CHUNK];
    for (uint64_t i = 0; i < lookups; i += CHUNK) {
        size_t c = lookups - i < CHUNK ? (size_t)(lookups - i) : CHUNK;
        batch_found += (uint64_t)bk_bloom_contains_batch(f, in->ptrs + i, in->lens + i, c, res);
    }
    double t4 = now_ns();
    snprintf(r->name, sizeof(r->name), "classic");
    r->bits_per_key = (double)bk_bloom_bits(f) / (double)in->n;
    r->fpr = (double)fp / (double)out->n;
    r->add = (t1 - t0) / (double)in->n;
    r->pos = (t2 - t1) / (double)lookups;
    r->neg = (t3 - t2) / (double)out->n;
    r->batch = (t4 - t3) / (double)lookups;
    r->false_negatives = (lookups - found) + (lookups - batch_found);
    bk_bloom_free(f);
    return 0;
}

static int run_blocked(const keyset *in, const keyset *out, uint64_t lookups,
                       double p, int level, row *r, size_t *bytes)
{
    bk_blocked *f;
    if (bk_blocked_set_simd_level(level) < 0) return -1;
    if (bk_blocked_create(&f, in->n, p, 7) != BK_OK) return -1;
    double t0 = now_ns();
    for (uint64_t i = 0; i < in->n; i++) bk_blocked_add(f, in->ptrs[i], in->lens[i]);
    double t1 = now_ns();
    uint64_t found = 0;
    for (uint64_t i = 0; i < lookups; i++)
        found += (uint64_t)bk_blocked_contains(f, in->ptrs[i], in->lens[i]);
    double t2 = now_ns();
    uint64_t fp = 0;
    for (uint64_t i = 0; i < out->n; i++)
        fp += (uint64_t)bk_blocked_contains(f, out->ptrs[i], out->lens[i]);
    double t3 = now_ns();
    uint64_t batch_found = 0;
    uint8_t res[CHUNK];
    for (uint64_t i = 0; i < lookups; i += CHUNK) {
        size_t c = lookups - i < CHUNK ? (size_t)(lookups - i) : CHUNK;
        batch_found += (uint64_t)bk_blocked_contains_batch(f, in->ptrs + i, in->lens + i, c, res);
    }
    double t4 = now_ns();
    snprintf(r->name, sizeof(r->name), "blocked-%s", bk_blocked_simd_name(level));
    r->bits_per_key = (double)bk_blocked_bits(f) / (double)in->n;
    r->fpr = (double)fp / (double)out->n;
    r->add = (t1 - t0) / (double)in->n;
    r->pos = (t2 - t1) / (double)lookups;
    r->neg = (t3 - t2) / (double)out->n;
    r->batch = (t4 - t3) / (double)lookups;
    r->false_negatives = (lookups - found) + (lookups - batch_found);
    *bytes = (size_t)(bk_blocked_bits(f) / 8);
    bk_blocked_free(f);
    bk_blocked_set_simd_level(bk_blocked_simd_best());
    return 0;
}

static int run_libbloom(const keyset *in, const keyset *out, uint64_t lookups,
                        double p, row *r)
{
    struct bloom b;
    if (in->n > INT32_MAX || bloom_init(&b, (int)in->n, p) != 0) return -1;
    double t0 = now_ns();
    for (uint64_t i = 0; i < in->n; i++) bloom_add(&b, in->ptrs[i], in->ilens[i]);
    double t1 = now_ns();
    uint64_t found = 0;
    for (uint64_t i = 0; i < lookups; i++)
        found += (uint64_t)bloom_check(&b, in->ptrs[i], in->ilens[i]);
    double t2 = now_ns();
    uint64_t fp = 0;
    for (uint64_t i = 0; i < out->n; i++)
        fp += (uint64_t)bloom_check(&b, out->ptrs[i], out->ilens[i]);
    double t3 = now_ns();
    snprintf(r->name, sizeof(r->name), "libbloom");
    r->bits_per_key = (double)(unsigned)b.bits / (double)in->n;
    r->fpr = (double)fp / (double)out->n;
    r->add = (t1 - t0) / (double)in->n;
    r->pos = (t2 - t1) / (double)lookups;
    r->neg = (t3 - t2) / (double)out->n;
    r->batch = NA;
    r->false_negatives = lookups - found;
    bloom_free(&b);
    return 0;
}

/* Random 64-byte reads in a buffer of `bytes` (rounded up to lines), its
 * pages touched first (fresh calloc pages would all map the zero page).
 * Two loops: plain independent loads, which the out-of-order core overlaps
 * on its own, and loads with software prefetch `ahead` lines in front; the
 * faster is the limit. Line numbers come from an inline generator, so the
 * only memory traffic is the reads themselves. */
static double limit_ns(size_t bytes, uint64_t reads)
{
    size_t lines = (bytes + 63) / 64;
    uint64_t *buf = aligned_alloc(64, lines * 64);
    if (buf == NULL) return NA;
    memset(buf, 1, lines * 64);
    double best = 1e30;
    static const int aheads[] = {0, 16, 32, 64};
    uint64_t sink = 0;
    for (size_t a = 0; a < sizeof(aheads) / sizeof(aheads[0]); a++) {
        int ahead = aheads[a];
        uint64_t rng = 12345, rng_ahead = 12345;
        for (int i = 0; i < ahead; i++) {
            uint64_t line = (uint64_t)(((unsigned __int128)splitmix(&rng_ahead) * lines) >> 64);
            __builtin_prefetch(&buf[line * 8], 0, 3);
        }
        double t0 = now_ns();
        for (uint64_t i = 0; i < reads; i++) {
            if (ahead) {
                uint64_t next = (uint64_t)(((unsigned __int128)splitmix(&rng_ahead) * lines) >> 64);
                __builtin_prefetch(&buf[next * 8], 0, 3);
            }
            uint64_t line = (uint64_t)(((unsigned __int128)splitmix(&rng) * lines) >> 64);
            sink += buf[line * 8];
        }
        double t = (now_ns() - t0) / (double)reads;
        if (t < best) best = t;
    }
    free(buf);
    if (sink == 42) printf(" "); /* keep the reads */
    return best;
}

/*==========================================================================
 * Main
 *==========================================================================*/

static void print_header(uint64_t n, double p, uint64_t absent, uint64_t lookups)
{
    printf("\nn = %.0e keys, target p = %g; %llu absent keys, %llu positive lookups\n",
           (double)n, p, (unsigned long long)absent, (unsigned long long)lookups);
    printf("| %-15s %9s %9s %9s %9s %9s %9s |\n", "filter", "bits/key", "FPR",
           "add ns", "pos ns", "neg ns", "batch ns");
    printf("|-----------------|---------|---------|---------|---------|---------|---------|\n");
}

int main(int argc, char **argv)
{
    options o;
    if (parse_options(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    int best = bk_blocked_simd_best();
    printf("bloomkit %s, blocked filter SIMD paths: scalar..%s\n",
           bk_version_string(), bk_blocked_simd_name(best));

    for (int ni = 0; ni < o.nn; ni++) {
        uint64_t n = (uint64_t)o.n[ni];
        uint64_t lookups = o.lookups ? o.lookups : (n < 10000000 ? n : 10000000);
        if (lookups > n) lookups = n;
        keyset in, out;
        double g0 = now_ns();
        if (make_keys(&in, n, 'p', o.seed) || make_keys(&out, o.absent, 'a', o.seed)) {
            fprintf(stderr, "bench_filters: out of memory for keys\n");
            return 1;
        }
        printf("\n(keys generated in %.1f s)\n", (now_ns() - g0) / 1e9);
        for (int pi = 0; pi < o.np; pi++) {
            double p = o.p[pi];
            row rows[6];
            int nrows = 0;
            size_t bytes = 0;
            print_header(n, p, o.absent, lookups);
            fflush(stdout);
            if (!o.skip_classic && run_classic(&in, &out, lookups, p, &rows[nrows]) == 0)
                print_row(&rows[nrows++]);
            fflush(stdout);
            int scalar_row = -1, simd_row = -1, lib_row = -1;
            if (run_blocked(&in, &out, lookups, p, BK_SIMD_SCALAR, &rows[nrows], &bytes) == 0) {
                scalar_row = nrows;
                print_row(&rows[nrows++]);
            }
            fflush(stdout);
            if (best > BK_SIMD_SCALAR &&
                run_blocked(&in, &out, lookups, p, best, &rows[nrows], &bytes) == 0) {
                simd_row = nrows;
                print_row(&rows[nrows++]);
            }
            fflush(stdout);
            if (!o.skip_libbloom && run_libbloom(&in, &out, lookups, p, &rows[nrows]) == 0) {
                lib_row = nrows;
                print_row(&rows[nrows++]);
            }
            fflush(stdout);
            row lim = {"limit", NA, NA, NA, NA, NA, NA, 0};
            lim.batch = limit_ns(bytes, lookups);
            print_row(&lim);

            /* the targets, on the fastest blocked row */
            int fast = simd_row >= 0 ? simd_row : scalar_row;
            if (fast >= 0) {
                const row *b = &rows[fast];
                printf("blocked batch / limit = %.2fx;", b->batch / lim.batch);
                if (lib_row >= 0) {
                    const row *l = &rows[lib_row];
                    double lib_best = l->pos < l->neg ? l->pos : l->neg;
                    printf(" libbloom lookup (faster of pos/neg) / blocked batch = %.1fx;"
                           " libbloom pos / blocked pos = %.1fx;",
                           lib_best / b->batch, l->pos / b->pos);
                }
                printf(" blocked bits/key %.2f at measured FPR %.4f%%\n",
                       b->bits_per_key, 100 * b->fpr);
            }
            fflush(stdout);
        }
        free_keys(&in);
        free_keys(&out);
    }
    return 0;
}
