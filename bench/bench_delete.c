/*
 * bench_delete.c - filters that delete, beside those that do not.
 *
 * For each target rate (1% and 0.1%) and each family: build a filter for n
 * keys, time n adds, n lookups of absent keys (which also give the measured
 * false-positive rate) and n lookups of present keys, then n removes where
 * the family has them. Keys are 16-byte strings generated before any
 * timing. Bits per key are the filter's table bits / n (headers and the
 * cuckoo filter's relocation log excluded).
 *
 * The cuckoo filter's table is a power of two, so for most n it is sized
 * far below its best load; the "@95%" rows use the largest power-of-two
 * table that n keys fill to 95% and insert exactly that many keys (n is
 * shown per row), which is the space the structure needs at full load.
 *
 *   bench_delete [-n keys] [--seed s]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bloomkit.h"

#define KEY_LEN 16

/*==========================================================================
 * Families as a table of operations
 *==========================================================================*/

typedef struct family {
    const char *name;
    /* create for n keys at rate p; *n_used may lower n (cuckoo @95%) */
    void *(*create)(uint64_t *n_used, double p, uint64_t seed);
    int (*add)(void *f, const void *key, size_t len); /* 0 = ok */
    int (*contains)(const void *f, const void *key, size_t len);
    int (*remove)(void *f, const void *key, size_t len); /* NULL: none */
    double (*table_bits)(const void *f);
    void (*destroy)(void *f);
} family;

static int failed(int rc) { return rc < 0; }

/* classic */
static void *bloom_new(uint64_t *n, double p, uint64_t seed)
{
    bk_bloom *f;
    return bk_bloom_create(&f, *n, p, seed) == BK_OK ? f : NULL;
}
static int bloom_add(void *f, const void *k, size_t l) { bk_bloom_add(f, k, l); return 0; }
static int bloom_has(const void *f, const void *k, size_t l) { return bk_bloom_contains(f, k, l); }
static double bloom_bits(const void *f) { return (double)bk_bloom_bits(f); }
static void bloom_del(void *f) { bk_bloom_free(f); }

/* blocked */
static void *blocked_new(uint64_t *n, double p, uint64_t seed)
{
    bk_blocked *f;
    return bk_blocked_create(&f, *n, p, seed) == BK_OK ? f : NULL;
}
static int blocked_add(void *f, const void *k, size_t l) { bk_blocked_add(f, k, l); return 0; }
static int blocked_has(const void *f, const void *k, size_t l) { return bk_blocked_contains(f, k, l); }
static double blocked_bits(const void *f) { return (double)bk_blocked_bits(f); }
static void blocked_del(void *f) { bk_blocked_free(f); }

/* counting, 4- and 8-bit */
static void *counting_new(uint64_t *n, double p, uint64_t seed, uint32_t w)
{
    bk_counting *f;
    return bk_counting_create(&f, *n, p, w, seed) == BK_OK ? f : NULL;
}
static void *counting4_new(uint64_t *n, double p, uint64_t s) { return counting_new(n, p, s, 4); }
static void *counting8_new(uint64_t *n, double p, uint64_t s) { return counting_new(n, p, s, 8); }
static int counting_add(void *f, const void *k, size_t l) { bk_counting_add(f, k, l); return 0; }
static int counting_has(const void *f, const void *k, size_t l) { return bk_counting_contains(f, k, l); }
static int counting_rm(void *f, const void *k, size_t l) { return bk_counting_remove(f, k, l); }
static double counting_bits(const void *f) { return (double)bk_counting_blocks(f) * 512.0; }
static void counting_del(void *f) { bk_counting_free(f); }

/* deletable */
static void *dlbf_new(uint64_t *n, double p, uint64_t seed)
{
    bk_deletable *f;
    return bk_deletable_create(&f, *n, p, 0, seed) == BK_OK ? f : NULL;
}
static int dlbf_add(void *f, const void *k, size_t l) { bk_deletable_add(f, k, l); return 0; }
static int dlbf_has(const void *f, const void *k, size_t l) { return bk_deletable_contains(f, k, l); }
/* BK_EUNDELETABLE (unremovable) is an expected outcome, not a failure */
static int dlbf_rm(void *f, const void *k, size_t l)
{
    int rc = bk_deletable_remove(f, k, l);
    return rc == BK_EUNDELETABLE ? 0 : rc;
}
static double dlbf_bits(const void *f)
{
    return (double)bk_deletable_bits(f) + (double)bk_deletable_regions(f);
}
static void dlbf_del(void *f) { bk_deletable_free(f); }

/* cuckoo: sized by bk_cuckoo_create, or a power-of-two table at 95% load */
static void *cuckoo_new(uint64_t *n, double p, uint64_t seed)
{
    bk_cuckoo *f;
    return bk_cuckoo_create(&f, *n, p, NULL, seed) == BK_OK ? f : NULL;
}
static void *cuckoo_full(uint64_t *n, uint64_t seed, uint32_t fp_bits)
{
    bk_cuckoo *f;
    uint64_t buckets = 1;
    while ((double)buckets * 2 * 4 * 0.95 <= (double)*n) buckets *= 2;
    *n = (uint64_t)((double)buckets * 4 * 0.95);
    return bk_cuckoo_create_params(&f, buckets, 4, fp_bits, 0, seed) == BK_OK
               ? f : NULL;
}
static void *cuckoo12_full(uint64_t *n, double p, uint64_t s) { (void)p; return cuckoo_full(n, s, 12); }
static void *cuckoo13_full(uint64_t *n, double p, uint64_t s) { (void)p; return cuckoo_full(n, s, 13); }
static void *cuckoo16_full(uint64_t *n, double p, uint64_t s) { (void)p; return cuckoo_full(n, s, 16); }
static int cuckoo_add(void *f, const void *k, size_t l) { return bk_cuckoo_add(f, k, l); }
static int cuckoo_has(const void *f, const void *k, size_t l) { return bk_cuckoo_contains(f, k, l); }
static int cuckoo_rm(void *f, const void *k, size_t l) { return bk_cuckoo_remove(f, k, l); }
static double cuckoo_bits(const void *f)
{
    return (double)bk_cuckoo_buckets(f) * bk_cuckoo_bucket_size(f) *
           bk_cuckoo_fingerprint_bits(f);
}
static void cuckoo_del(void *f) { bk_cuckoo_free(f); }

static const family FAMILIES[] = {
    {"classic", bloom_new, bloom_add, bloom_has, NULL, bloom_bits, bloom_del},
    {"blocked", blocked_new, blocked_add, blocked_has, NULL, blocked_bits, blocked_del},
    {"counting-4bit", counting4_new, counting_add, counting_has, counting_rm, counting_bits, counting_del},
    {"counting-8bit", counting8_new, counting_add, counting_has, counting_rm, counting_bits, counting_del},
    {"deletable", dlbf_new, dlbf_add, dlbf_has, dlbf_rm, dlbf_bits, dlbf_del},
    {"cuckoo", cuckoo_new, cuckoo_add, cuckoo_has, cuckoo_rm, cuckoo_bits, cuckoo_del},
    {"cuckoo-f12@95%", cuckoo12_full, cuckoo_add, cuckoo_has, cuckoo_rm, cuckoo_bits, cuckoo_del},
    {"cuckoo-f13@95%", cuckoo13_full, cuckoo_add, cuckoo_has, cuckoo_rm, cuckoo_bits, cuckoo_del},
    {"cuckoo-f16@95%", cuckoo16_full, cuckoo_add, cuckoo_has, cuckoo_rm, cuckoo_bits, cuckoo_del},
};

/*==========================================================================
 * Measurement
 *==========================================================================*/

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t mix(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* n random 16-byte keys; the top bit of byte 0 separates the two sets */
static unsigned char *make_keys(uint64_t n, uint64_t seed, int absent)
{
    unsigned char *keys = malloc(n * KEY_LEN);
    if (keys == NULL) return NULL;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t a = mix(&seed), b = mix(&seed);
        memcpy(keys + i * KEY_LEN, &a, 8);
        memcpy(keys + i * KEY_LEN + 8, &b, 8);
        keys[i * KEY_LEN] = (unsigned char)((keys[i * KEY_LEN] & 0x7F) |
                                            (absent ? 0x80 : 0));
    }
    return keys;
}

static int run(const family *fam, uint64_t n_max, double p, uint64_t seed,
               const unsigned char *present, const unsigned char *absent)
{
    uint64_t n = n_max;
    void *f = fam->create(&n, p, seed);
    if (f == NULL) {
        fprintf(stderr, "%s: create failed\n", fam->name);
        return 1;
    }
    uint64_t add_failures = 0, hits = 0, found = 0, rm_failures = 0;
    double t0 = now_ns();
    for (uint64_t i = 0; i < n; i++)
        add_failures += failed(fam->add(f, present + i * KEY_LEN, KEY_LEN));
    double t1 = now_ns();
    for (uint64_t i = 0; i < n; i++)
        hits += (uint64_t)fam->contains(f, absent + i * KEY_LEN, KEY_LEN);
    double t2 = now_ns();
    for (uint64_t i = 0; i < n; i++)
        found += (uint64_t)fam->contains(f, present + i * KEY_LEN, KEY_LEN);
    double t3 = now_ns();
    double remove_ns = -1.0;
    if (fam->remove != NULL) {
        for (uint64_t i = 0; i < n; i++)
            rm_failures += failed(fam->remove(f, present + i * KEY_LEN, KEY_LEN));
        remove_ns = (now_ns() - t3) / (double)n;
    }
    double fpr = (double)hits / (double)n;
    printf("%-16s %5.3f%% %9llu %8.2f %9.4f%% %8.1f %8.1f %8.1f ",
           fam->name, 100.0 * p, (unsigned long long)n,
           fam->table_bits(f) / (double)n, 100.0 * fpr, (t1 - t0) / n,
           (t2 - t1) / n, (t3 - t2) / n);
    if (remove_ns >= 0)
        printf("%8.1f", remove_ns);
    else
        printf("%8s", "-");
    if (add_failures || rm_failures || found != n - add_failures)
        printf("  (add failures %llu, remove failures %llu, found %llu)",
               (unsigned long long)add_failures,
               (unsigned long long)rm_failures, (unsigned long long)found);
    printf("\n");
    fam->destroy(f);
    return found + add_failures == n ? 0 : 1;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: bench_delete [-n keys] [--seed s]\n"
            "  -n keys    keys per filter (default 1000000)\n"
            "  --seed s   key and filter seed (default 1)\n"
            "Prints, per family and target rate: bits per key (table bits / n),\n"
            "the measured false-positive rate over n absent keys, and ns per\n"
            "add, absent lookup, present lookup and remove.\n");
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
    if (n == 0) {
        usage(stderr);
        return 2;
    }
    unsigned char *present = make_keys(n, seed, 0);
    unsigned char *absent = make_keys(n, seed + 1000, 1);
    if (present == NULL || absent == NULL) {
        fprintf(stderr, "out of memory for keys\n");
        return 1;
    }
    printf("%-16s %6s %9s %8s %10s %8s %8s %8s %8s\n", "family", "target",
           "n", "bits/key", "fpr", "add ns", "miss ns", "hit ns", "rm ns");
    int bad = 0;
    const double rates[] = {0.01, 0.001};
    for (size_t r = 0; r < 2; r++)
        for (size_t i = 0; i < sizeof(FAMILIES) / sizeof(FAMILIES[0]); i++)
            bad |= run(&FAMILIES[i], n, rates[r], seed, present, absent);
    free(present);
    free(absent);
    return bad;
}
