/*
 * bench_delete.c - the filters that delete (and count), side by side
 * (issue 15's table).
 *
 * For each target rate (1% and 0.1%) and each family, with n keys (default
 * 1e6) of 16 bytes generated before any timing:
 *   1. add the n keys one by one (add ns), look up n absent keys one by one
 *      (miss ns; their hits are the measured rate "fpr full") and the n
 *      present keys (hit ns);
 *   2. the same adds and lookups through the batch calls in chunks of 1024
 *      keys, into a second filter (add/miss batch ns);
 *   3. churn on the first filter: remove the first n/2 keys (rm ns), add
 *      n/2 new keys; then "fpr churn" over the absent keys again, and "fn":
 *      added keys the filter missed when full plus, after churn, keys never
 *      removed (the second half and the new ones) that it misses: must be 0;
 *   4. overflow events: the family's own count (saturated counters, frozen
 *      blocks, adds refused as full).
 * Bits per key are the table's bits / n. Every family runs through the
 * generic handle (bk_filter_*), so dispatch costs are alike. The blocked
 * Bloom filter (no remove) is the lookup reference of the hierarchical
 * filter; morris counts but cannot remove (no churn columns).
 * The verdicts of issue 15's goals follow the table.
 *
 *   bench_delete [-n keys] [--seed s]
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h> /* sqrt */
#include <string.h>
#include <time.h>

#include "benchutil.h"
#include "bloomkit.h"

#define KEY_LEN 16
#define CHUNK 1024

/*==========================================================================
 * Families
 *==========================================================================*/

typedef struct family {
    const char *name;
    bk_filter *(*create)(uint64_t n, double p, uint64_t seed);
    double (*table_bits)(bk_filter *f);
    uint64_t (*overflows)(bk_filter *f);
    int removes;
} family;

static bk_filter *blocked_new(uint64_t n, double p, uint64_t s)
{
    bk_blocked *f;
    return bk_blocked_create(&f, n, p, s) == BK_OK ? bk_blocked_as_filter(f) : NULL;
}
static double blocked_bits(bk_filter *f) { return (double)bk_blocked_bits(bk_filter_as_blocked(f)); }

static bk_filter *counting4_new(uint64_t n, double p, uint64_t s)
{
    bk_counting *f;
    return bk_counting_create(&f, n, p, 4, s) == BK_OK ? bk_counting_as_filter(f) : NULL;
}
static double counting_bits(bk_filter *f)
{
    return (double)bk_counting_blocks(bk_filter_as_counting(f)) * 512.0;
}
static uint64_t counting_over(bk_filter *f)
{
    bk_counting_stats st;
    bk_counting_get_stats(bk_filter_as_counting(f), &st);
    return st.counters_saturated;
}

static bk_filter *cuckoo_new(uint64_t n, double p, uint64_t s)
{
    bk_cuckoo *f;
    return bk_cuckoo_create(&f, n, p, NULL, s) == BK_OK ? bk_cuckoo_as_filter(f) : NULL;
}
static double cuckoo_bits(bk_filter *f)
{
    bk_cuckoo *c = bk_filter_as_cuckoo(f);
    return (double)bk_cuckoo_buckets(c) * bk_cuckoo_bucket_size(c) *
           bk_cuckoo_fingerprint_bits(c);
}
static uint64_t none(bk_filter *f) { (void)f; return 0; } /* counted as add failures */

#define ISSUE15_FAMILY(fam, ctor_args)                                           \
    static bk_filter *fam##_new(uint64_t n, double p, uint64_t s)                \
    {                                                                            \
        bk_##fam *f;                                                             \
        return bk_##fam##_create ctor_args == BK_OK ? bk_##fam##_as_filter(f)    \
                                                    : NULL;                      \
    }                                                                            \
    static double fam##_bits(bk_filter *f)                                       \
    {                                                                            \
        bk_delete_stats st;                                                      \
        bk_##fam##_get_stats(bk_filter_as_##fam(f), &st);                        \
        return (double)st.table_bits;                                            \
    }                                                                            \
    static uint64_t fam##_over(bk_filter *f)                                     \
    {                                                                            \
        bk_delete_stats st;                                                      \
        bk_##fam##_get_stats(bk_filter_as_##fam(f), &st);                        \
        return st.overflows;                                                     \
    }

ISSUE15_FAMILY(dleft, (&f, n, p, 0, s))
ISSUE15_FAMILY(varcount, (&f, n, p, s))
ISSUE15_FAMILY(hier, (&f, n, p, s))
ISSUE15_FAMILY(hybrid, (&f, n, p, s))
ISSUE15_FAMILY(morris, (&f, n, p, 0, s))

enum { F_BLOCKED, F_COUNTING, F_CUCKOO, F_DLEFT, F_VARCOUNT, F_HIER, F_HYBRID, F_MORRIS, NFAM };

static const family FAMILIES[NFAM] = {
    {"blocked", blocked_new, blocked_bits, none, 0},
    {"counting-4bit", counting4_new, counting_bits, counting_over, 1},
    {"cuckoo", cuckoo_new, cuckoo_bits, none, 1},
    {"dleft", dleft_new, dleft_bits, dleft_over, 1},
    {"varcount", varcount_new, varcount_bits, varcount_over, 1},
    {"hier", hier_new, hier_bits, hier_over, 1},
    {"hybrid", hybrid_new, hybrid_bits, hybrid_over, 1},
    {"morris", morris_new, morris_bits, morris_over, 0},
};

/*==========================================================================
 * Measurement
 *==========================================================================*/

typedef struct result {
    int ok;
    double bits, fpr_full, fpr_churn;
    uint64_t fn_churn, overflows, add_failures;
    double add_ns, miss_ns, hit_ns, rm_ns, add_batch_ns, miss_batch_ns;
} result;

/* n random 16-byte keys; the top two bits of byte 0 tell the sets apart
 * (tag 0 present, 1 absent, 2 churn additions) */
static unsigned char *make_keys(uint64_t n, uint64_t seed, unsigned tag)
{
    unsigned char *keys = malloc(n * KEY_LEN);
    if (keys == NULL) return NULL;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t a = splitmix(&seed), b = splitmix(&seed);
        memcpy(keys + i * KEY_LEN, &a, 8);
        memcpy(keys + i * KEY_LEN + 8, &b, 8);
        keys[i * KEY_LEN] = (unsigned char)((keys[i * KEY_LEN] & 0x3F) | (tag << 6));
    }
    return keys;
}

static const void *ptrs[CHUNK];
static size_t lens[CHUNK];

static void batch(bk_filter *f, const unsigned char *keys, uint64_t n, int add,
                  uint64_t *hits)
{
    for (uint64_t i = 0; i < n; i += CHUNK) {
        size_t m = n - i < CHUNK ? (size_t)(n - i) : CHUNK;
        for (size_t j = 0; j < m; j++) ptrs[j] = keys + (i + j) * KEY_LEN;
        int64_t r = add ? bk_filter_add_batch(f, ptrs, lens, m, NULL)
                        : bk_filter_contains_batch(f, ptrs, lens, m, NULL);
        if (r > 0 && hits) *hits += (uint64_t)r;
    }
}

static uint64_t count_hits(const bk_filter *f, const unsigned char *keys, uint64_t n)
{
    uint64_t hits = 0;
    for (uint64_t i = 0; i < n; i++)
        hits += (uint64_t)(bk_filter_contains(f, keys + i * KEY_LEN, KEY_LEN) == 1);
    return hits;
}

static result run(const family *fam, uint64_t n, double p, uint64_t seed,
                  const unsigned char *present, const unsigned char *absent,
                  const unsigned char *fresh)
{
    result r;
    memset(&r, 0, sizeof(r));
    bk_filter *f = fam->create(n, p, seed), *g = fam->create(n, p, seed);
    if (f == NULL || g == NULL) {
        fprintf(stderr, "%s: create failed\n", fam->name);
        bk_filter_free(f);
        bk_filter_free(g);
        return r;
    }
    r.ok = 1;
    double t0 = now_ns();
    for (uint64_t i = 0; i < n; i++)
        r.add_failures += bk_filter_add(f, present + i * KEY_LEN, KEY_LEN) < 0;
    double t1 = now_ns();
    uint64_t hits = count_hits(f, absent, n);
    double t2 = now_ns();
    uint64_t found = count_hits(f, present, n);
    double t3 = now_ns();
    r.add_ns = (t1 - t0) / (double)n;
    r.miss_ns = (t2 - t1) / (double)n;
    r.hit_ns = (t3 - t2) / (double)n;
    r.fpr_full = (double)hits / (double)n;
    r.bits = fam->table_bits(f) / (double)n;
    if (found + r.add_failures < n) r.fn_churn += n - found - r.add_failures;

    t0 = now_ns();
    batch(g, present, n, 1, NULL);
    t1 = now_ns();
    batch(g, absent, n, 0, NULL);
    t2 = now_ns();
    r.add_batch_ns = (t1 - t0) / (double)n;
    r.miss_batch_ns = (t2 - t1) / (double)n;

    if (fam->removes) {
        const uint64_t half = n / 2;
        t0 = now_ns();
        for (uint64_t i = 0; i < half; i++)
            bk_filter_remove(f, present + i * KEY_LEN, KEY_LEN);
        r.rm_ns = (now_ns() - t0) / (double)half;
        for (uint64_t i = 0; i < half; i++)
            r.add_failures += bk_filter_add(f, fresh + i * KEY_LEN, KEY_LEN) < 0;
        r.fpr_churn = (double)count_hits(f, absent, n) / (double)n;
        /* never removed: the second half and the new keys (an add that
         * failed is not a key the filter promised to hold) */
        uint64_t kept = count_hits(f, present + half * KEY_LEN, n - half) +
                        count_hits(f, fresh, half);
        if (kept + r.add_failures < n) r.fn_churn += n - kept - r.add_failures;
    }
    r.overflows = fam->overflows(f) + r.add_failures;
    bk_filter_free(f);
    bk_filter_free(g);
    return r;
}

/* Size the family for rate p, add the n keys, measure: bits per key and
 * the measured rate (the "same measured FPR" comparison of the goals). */
static void sized_at(const family *fam, uint64_t n, double p, uint64_t seed,
                     const unsigned char *present, const unsigned char *absent,
                     double *bits, double *fpr)
{
    bk_filter *f = fam->create(n, p, seed);
    *bits = *fpr = 0.0;
    if (f == NULL) return;
    for (uint64_t i = 0; i < n; i++) bk_filter_add(f, present + i * KEY_LEN, KEY_LEN);
    *bits = fam->table_bits(f) / (double)n;
    *fpr = (double)count_hits(f, absent, n) / (double)n;
    bk_filter_free(f);
}

static void print_row(const family *fam, double p, const result *r)
{
    printf("%-14s %6.2f%% %7.2f %8.4f%% ", fam->name, 100.0 * p, r->bits,
           100.0 * r->fpr_full);
    if (fam->removes)
        printf("%8.4f%% %6llu ", 100.0 * r->fpr_churn, (unsigned long long)r->fn_churn);
    else
        printf("%9s %6s ", "-", "-");
    printf("%8llu %7.1f %7.1f %7.1f ", (unsigned long long)r->overflows, r->add_ns,
           r->miss_ns, r->hit_ns);
    if (fam->removes) printf("%7.1f ", r->rm_ns);
    else printf("%7s ", "-");
    printf("%7.1f %7.1f\n", r->add_batch_ns, r->miss_batch_ns);
}

static const char *verdict(int met) { return met ? "MET" : "NOT MET"; }

static void usage(FILE *out)
{
    fprintf(out,
            "usage: bench_delete [-n keys] [--seed s]\n"
            "  -n keys    keys per filter (default 1000000)\n"
            "  --seed s   key and filter seed (default 1)\n"
            "Per family and target rate: bits per key, the measured false-positive\n"
            "rate when full and after churn (remove half, add as many new), false\n"
            "negatives after churn (keys never removed that are missed: must be 0),\n"
            "overflow events, and ns per add, miss, hit and remove (single keys) and\n"
            "per add and miss in batches of 1024; then issue 15's goal verdicts.\n");
}

int main(int argc, char **argv)
{
    uint64_t n = 1000000, seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            n = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (n < 2) {
        usage(stderr);
        return 2;
    }
    unsigned char *present = make_keys(n, seed, 0);
    unsigned char *absent = make_keys(n, seed + 1000, 1);
    unsigned char *fresh = make_keys(n / 2, seed + 2000, 2);
    if (present == NULL || absent == NULL || fresh == NULL) {
        fprintf(stderr, "out of memory for keys\n");
        return 1;
    }
    for (size_t j = 0; j < CHUNK; j++) lens[j] = KEY_LEN;

    printf("n = %llu keys of %d bytes; ns per key; batches of %d\n",
           (unsigned long long)n, KEY_LEN, CHUNK);
    printf("%-14s %7s %7s %9s %9s %6s %8s %7s %7s %7s %7s %7s %7s\n", "family",
           "target", "bits/k", "fpr full", "fpr churn", "fn", "overflow", "add",
           "miss", "hit", "rm", "add/b", "miss/b");
    int bad = 0;
    const double rates[] = {0.01, 0.001};
    result res[2][NFAM];
    for (size_t r = 0; r < 2; r++) {
        for (size_t i = 0; i < NFAM; i++) {
            res[r][i] = run(&FAMILIES[i], n, rates[r], seed, present, absent, fresh);
            if (!res[r][i].ok) { bad = 1; continue; }
            print_row(&FAMILIES[i], rates[r], &res[r][i]);
            if (res[r][i].fn_churn != 0) bad = 1;
        }
    }

    printf("\nGoals (issue 15):\n");
    for (size_t r = 0; r < 2; r++) {
        const result *c = &res[r][F_COUNTING], *b = &res[r][F_BLOCKED];
        const result *d = &res[r][F_DLEFT], *v = &res[r][F_VARCOUNT], *h = &res[r][F_HIER];
        if (!c->ok || !b->ok || !d->ok || !v->ok || !h->ok) continue;
        /* "the same measured FPR": each is also sized for the rate the
         * 4-bit filter measured (its sizing formula is conservative, so it
         * lands below its target) and measured; it must be at least as
         * accurate as the 4-bit filter, within 3 standard deviations of the
         * difference of two measured rates */
        double tol = 3.0 * sqrt(2.0 * c->fpr_full * (1.0 - c->fpr_full) / (double)n);
        const struct { const char *name; size_t id; double goal; } cand[] = {
            {"dleft   ", F_DLEFT, 0.5}, {"varcount", F_VARCOUNT, 0.6}};
        (void)d;
        (void)v;
        for (size_t j = 0; j < 2; j++) {
            const result *x = &res[r][cand[j].id];
            double bits, fpr;
            sized_at(&FAMILIES[cand[j].id], n, c->fpr_full, seed, present, absent, &bits, &fpr);
            printf("  p=%g %s at target: %.2f / %.2f bits = %.2fx, fpr %.4f%% vs %.4f%%; "
                   "sized for %.4f%%: %.2f bits = %.2fx, fpr %.4f%% (goal <= %.1fx): %s\n",
                   rates[r], cand[j].name, x->bits, c->bits, x->bits / c->bits,
                   100 * x->fpr_full, 100 * c->fpr_full, 100 * c->fpr_full, bits,
                   bits / c->bits, 100 * fpr, cand[j].goal,
                   verdict(bits > 0 && bits <= cand[j].goal * c->bits &&
                           fpr <= c->fpr_full + tol));
        }
        printf("  p=%g hier lookups %.1f / %.1f ns = %.2fx single, %.1f / %.1f ns = %.2fx batch "
               "(goal <= 1.3x): %s\n",
               rates[r], h->miss_ns, b->miss_ns, h->miss_ns / b->miss_ns, h->miss_batch_ns,
               b->miss_batch_ns, h->miss_batch_ns / b->miss_batch_ns,
               verdict(h->miss_ns <= 1.3 * b->miss_ns && h->miss_batch_ns <= 1.3 * b->miss_batch_ns));
    }
    int fn = 0;
    for (size_t r = 0; r < 2; r++)
        for (size_t i = 0; i < NFAM; i++) fn |= res[r][i].ok && res[r][i].fn_churn != 0;
    printf("  no false negative for a key added and not removed: %s\n", verdict(!fn));
    free(present);
    free(absent);
    free(fresh);
    return bad;
}
