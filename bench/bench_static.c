/*
 * bench_static.c - the targets of issue 16, measured in one run:
 *
 *   static filters (binary fuse, 8-, 12- and 16-bit fingerprints; bumped,
 *   one line per lookup, 8 and 16 bits) beside the blocked Bloom filter
 *   sized for the same rate (2^-w): build
 *   ns/key, bits per key, false-positive rate measured on --absent keys
 *   never added, bits per key / log2(1/measured rate), batched lookups of
 *   absent and present keys (ns/key, the fastest of 3 runs);
 *
 *   static map (Bloomier, 8-bit values, 7 check bits): build ns/key, bits
 *   per key (values / check), members whose value came back wrong (all of
 *   them are checked), non-members passing the check;
 *
 *   reconciliation of two sets of --sync-n 32-byte keys with --sync-diff
 *   keys on each side only: time from the keys to both lists of missing
 *   keys, bytes of every message (estimator, tables, id request, the keys
 *   themselves) against the bytes of the differences; and beside it the
 *   approximate method (A sends a Bloom filter of its set; B sends the keys
 *   the filter says A lacks), its bytes and the share of B's extra keys it
 *   misses, at 1% and 0.1%.
 *
 * Then the table of targets with a verdict for each. Speed is measured,
 * never asserted; run it on a quiet machine. Keys are made before timing.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bloomkit.h"

/*==========================================================================
 * Options, keys, clock
 *==========================================================================*/

#define MAX_LIST 8

typedef struct options {
    double n[MAX_LIST];
    int nn;
    uint64_t absent;
    uint64_t lookups;
    uint64_t map_n;
    uint64_t sync_n;
    uint64_t sync_diff;
    int no_map, no_sync;
} options;

static void usage(FILE *out)
{
    fprintf(out,
        "usage: bench_static [options]\n"
        "  --n LIST        key counts of the static filter rows (default 1e6,1e7)\n"
        "  --large         add n = 1e8 (needs about 8 GB)\n"
        "  --absent N      absent keys for rates and absent lookups (default 1e7)\n"
        "  --lookups N     present keys looked up (default min(n, 1e7))\n"
        "  --map-n N       keys of the map (default 1e7; 0 skips)\n"
        "  --sync-n N      keys per side for reconciliation (default 1e7; 0 skips)\n"
        "  --sync-diff N   keys only on each side (default 1e4)\n"
        "  --help          this text\n");
}

static int parse_list(const char *s, double *out, int *count)
{
    *count = 0;
    while (*s && *count < MAX_LIST) {
        char *end;
        double v = strtod(s, &end);
        if (end == s || v < 1) return -1;
        out[(*count)++] = v;
        s = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0') return -1;
    }
    return *count > 0 ? 0 : -1;
}

static int parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof(*o));
    o->n[0] = 1e6;
    o->n[1] = 1e7;
    o->nn = 2;
    o->absent = 10000000;
    o->map_n = 10000000;
    o->sync_n = 10000000;
    o->sync_diff = 10000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0) { usage(stdout); exit(0); }
        else if (strcmp(a, "--large") == 0) { if (o->nn < MAX_LIST) o->n[o->nn++] = 1e8; }
        else if (v == NULL) { fprintf(stderr, "bench_static: %s needs a value\n", a); return -1; }
        else if (strcmp(a, "--n") == 0) { if (parse_list(v, o->n, &o->nn)) return -1; i++; }
        else if (strcmp(a, "--absent") == 0) { o->absent = (uint64_t)strtod(v, NULL); i++; }
        else if (strcmp(a, "--lookups") == 0) { o->lookups = (uint64_t)strtod(v, NULL); i++; }
        else if (strcmp(a, "--map-n") == 0) { o->map_n = (uint64_t)strtod(v, NULL); i++; }
        else if (strcmp(a, "--sync-n") == 0) { o->sync_n = (uint64_t)strtod(v, NULL); i++; }
        else if (strcmp(a, "--sync-diff") == 0) { o->sync_diff = (uint64_t)strtod(v, NULL); i++; }
        else { fprintf(stderr, "bench_static: unknown option %s\n", a); return -1; }
    }
    if (o->absent < 1000000) o->absent = 1000000;
    return 0;
}

static uint64_t mix(uint64_t z)
{
    z += UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* n keys of `len` bytes (16 or 32): a tag letter, then hex digits of
 * mix(i, tag) (distinct per (i, tag): the first 15 digits are i's bits
 * under a bijection). */
typedef struct keyset {
    char *store;
    const void **keys;
    size_t *lens;
    uint64_t n;
    size_t len;
} keyset;

static int make_keys(keyset *ks, uint64_t n, uint64_t first, char tag, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    ks->n = n;
    ks->len = len;
    ks->store = malloc((size_t)(n ? n : 1) * len);
    ks->keys = malloc((size_t)(n ? n : 1) * sizeof(void *));
    ks->lens = malloc((size_t)(n ? n : 1) * sizeof(size_t));
    if (!ks->store || !ks->keys || !ks->lens) return -1;
    for (uint64_t i = 0; i < n; i++) {
        char *k = ks->store + i * len;
        /* 60 bits of i through an invertible mix (the low 60 bits of mix of
         * a 60-bit value are not invertible, so keep i itself in the key
         * and only shuffle its digits' order of significance) */
        uint64_t v = (first + i) & UINT64_C(0x0FFFFFFFFFFFFFFF);
        uint64_t r = mix(v ^ ((uint64_t)tag << 56));
        k[0] = tag;
        for (size_t d = 1; d < len; d++) {
            if (d <= 15) k[d] = hex[(v >> (4 * (d - 1))) & 15];
            else k[d] = hex[(r >> (4 * ((d - 16) & 15))) & 15];
        }
        ks->keys[i] = k;
        ks->lens[i] = len;
    }
    return 0;
}

static void free_keys(keyset *ks)
{
    free(ks->store);
    free(ks->keys);
    free(ks->lens);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*==========================================================================
 * Static filter rows
 *==========================================================================*/

typedef struct row {
    const char *name;
    double n;
    double build_ns, bits_per_key, fpr, ratio, absent_ns, present_ns;
    int ok;
} row;

#define MAX_ROWS 64
static row rows[MAX_ROWS];
static int nrows;

static void print_row(const row *r)
{
    printf("%-12s %9.0e %9.1f %9.3f %11.3e %7.3f %10.1f %10.1f\n", r->name, r->n,
           r->build_ns, r->bits_per_key, r->fpr, r->ratio, r->absent_ns, r->present_ns);
}

static void lookups(const bk_filter *f, const keyset *present, uint64_t npresent,
                    const keyset *absent, row *r)
{
    /* the fastest of 3 runs of each: the machine is shared */
    int64_t fp = 0, hits = 0;
    r->absent_ns = r->present_ns = 1e300;
    for (int run = 0; run < 3; run++) {
        double t0 = now_s();
        fp = bk_filter_contains_batch(f, absent->keys, absent->lens, absent->n, NULL);
        double t1 = now_s();
        hits = bk_filter_contains_batch(f, present->keys, present->lens, npresent, NULL);
        double t2 = now_s();
        double a = (t1 - t0) * 1e9 / (double)absent->n, p = (t2 - t1) * 1e9 / (double)npresent;
        if (a < r->absent_ns) r->absent_ns = a;
        if (p < r->present_ns) r->present_ns = p;
    }
    r->fpr = (double)fp / (double)absent->n;
    r->ratio = r->fpr > 0 ? r->bits_per_key / log2(1.0 / r->fpr) : 0.0;
    if (hits != (int64_t)npresent) {
        fprintf(stderr, "%s: %lld of %llu present keys found: FALSE NEGATIVES\n", r->name,
                (long long)hits, (unsigned long long)npresent);
        r->ok = 0;
    }
}

/* A static filter of one of the two families, built from the keys. */
typedef struct built {
    bk_filter *f;
    double bits_per_key;
    uint32_t attempts;
    uint64_t build_memory;
    double second_reads; /* bumped: absent keys reading a second line */
    uint32_t layers;
} built;

static int build_fuse(const keyset *in, uint32_t w, built *b)
{
    bk_static *f;
    int rc = bk_static_build(&f, in->keys, in->lens, in->n, w, 1);
    if (rc != BK_OK) return rc;
    bk_static_stats st;
    bk_static_get_stats(f, &st);
    b->f = bk_static_as_filter(f);
    b->bits_per_key = st.bits_per_key;
    b->attempts = st.attempts;
    b->build_memory = st.build_memory;
    return BK_OK;
}

static int build_bumped(const keyset *in, uint32_t w, built *b)
{
    bk_bumped *f;
    int rc = bk_bumped_build(&f, in->keys, in->lens, in->n, w, 1);
    if (rc != BK_OK) return rc;
    bk_bumped_stats st;
    bk_bumped_get_stats(f, &st);
    b->f = bk_bumped_as_filter(f);
    b->bits_per_key = st.bits_per_key;
    b->attempts = st.attempts;
    b->build_memory = st.build_memory;
    b->second_reads = st.second_reads;
    b->layers = st.layers;
    return BK_OK;
}

/* family "static" (binary fuse, w = 8, 12, 16) or "bumped" (w = 8, 16) */
static void run_static(const char *family, const keyset *in, const keyset *absent,
                       uint64_t npresent, uint32_t w)
{
    static char names[MAX_ROWS][16];
    row *r = &rows[nrows];
    memset(r, 0, sizeof(*r));
    snprintf(names[nrows], sizeof(names[nrows]), "%s-%u", family, w);
    r->name = names[nrows++];
    r->n = (double)in->n;
    r->ok = 1;
    built b = {0};
    int bumped = strcmp(family, "bumped") == 0;
    double t0 = now_s();
    int rc = bumped ? build_bumped(in, w, &b) : build_fuse(in, w, &b);
    double t1 = now_s();
    if (rc != BK_OK) {
        fprintf(stderr, "%s: build: %s\n", r->name, bk_strerror(rc));
        r->ok = 0;
        return;
    }
    r->build_ns = (t1 - t0) * 1e9 / (double)in->n;
    r->bits_per_key = b.bits_per_key;
    lookups(b.f, in, npresent, absent, r);
    print_row(r);
    printf("             (attempts %u, construction memory %.1f bytes per key", b.attempts,
           (double)b.build_memory / (double)in->n);
    if (bumped)
        printf(", %u layers, %.2f%% of absent keys read a second line", b.layers,
               100.0 * b.second_reads);
    printf(")\n");
    bk_filter_free(b.f);
}

static void run_blocked(const keyset *in, const keyset *absent, uint64_t npresent, uint32_t w)
{
    row *r = &rows[nrows++];
    memset(r, 0, sizeof(*r));
    r->name = w == 8 ? "blocked-8" : w == 12 ? "blocked-12" : "blocked-16";
    r->n = (double)in->n;
    r->ok = 1;
    bk_blocked *f;
    int rc = bk_blocked_create(&f, in->n, ldexp(1.0, -(int)w), 1);
    if (rc != BK_OK) {
        fprintf(stderr, "%s: create: %s\n", r->name, bk_strerror(rc));
        r->ok = 0;
        return;
    }
    double t0 = now_s();
    bk_blocked_add_batch(f, in->keys, in->lens, in->n, NULL);
    double t1 = now_s();
    r->build_ns = (t1 - t0) * 1e9 / (double)in->n;
    r->bits_per_key = (double)bk_blocked_bits(f) / (double)in->n;
    lookups(bk_blocked_as_filter(f), in, npresent, absent, r);
    print_row(r);
    bk_blocked_free(f);
}

/*==========================================================================
 * Map
 *==========================================================================*/

typedef struct map_result {
    int run;
    double n, build_ns, bits, value_bits, check_bits, pass_rate, temp_per_key;
    uint64_t wrong;
} map_result;

static map_result run_map(uint64_t n, const keyset *absent)
{
    map_result m;
    memset(&m, 0, sizeof(m));
    keyset ks;
    uint32_t *values = malloc((size_t)(n ? n : 1) * sizeof(uint32_t));
    if (values == NULL || make_keys(&ks, n, 0, 'm', 16)) {
        fprintf(stderr, "map: out of memory\n");
        return m;
    }
    for (uint64_t i = 0; i < n; i++) values[i] = (uint32_t)(mix(i * 3 + 1) & 255);
    bk_map *map;
    double t0 = now_s();
    int rc = bk_map_build(&map, ks.keys, ks.lens, values, n, 8, 7, 1, NULL);
    double t1 = now_s();
    if (rc != BK_OK) {
        fprintf(stderr, "map: build: %s\n", bk_strerror(rc));
        goto out;
    }
    bk_map_stats st;
    bk_map_get_stats(map, &st);
    m.run = 1;
    m.n = (double)n;
    m.build_ns = (t1 - t0) * 1e9 / (double)n;
    m.bits = st.bits_per_key;
    m.value_bits = st.value_bits_per_key;
    m.check_bits = st.check_bits_per_key;
    m.temp_per_key = (double)st.build_memory / (double)n;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t v;
        if (bk_map_get(map, ks.keys[i], ks.lens[i], &v) != 1 || v != values[i]) m.wrong++;
    }
    int64_t passed = bk_map_get_batch(map, absent->keys, absent->lens, absent->n, NULL, NULL);
    m.pass_rate = (double)passed / (double)absent->n;
    printf("map-8+7      %9.0e %9.1f %9.3f (values %.3f + check %.3f) wrong values %llu, "
           "non-members passing %.4f%% (2^-7 = 0.7813%%)\n",
           m.n, m.build_ns, m.bits, m.value_bits, m.check_bits,
           (unsigned long long)m.wrong, 100 * m.pass_rate);
    printf("             (attempts %u, construction memory %.1f bytes per key)\n",
           st.attempts, m.temp_per_key);
    bk_map_free(map);
out:
    free(values);
    free_keys(&ks);
    return m;
}

/*==========================================================================
 * Reconciliation
 *==========================================================================*/

typedef struct sync_result {
    int run, exact;
    double seconds;
    size_t bytes, diff_bytes;
    bk_reconcile_stats st;
} sync_result;

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Keys of ks whose id is in the sorted list ids: what this side sends. */
static uint64_t collect(const keyset *ks, const uint64_t *side_ids, const uint64_t *ids,
                        size_t n, size_t *key_bytes)
{
    uint64_t found = 0;
    for (uint64_t i = 0; i < ks->n; i++) {
        if (bsearch(&side_ids[i], ids, n, sizeof(uint64_t), cmp_u64) != NULL) {
            found++;
            *key_bytes += ks->lens[i] + 1; /* the key and a length byte */
        }
    }
    return found;
}

static sync_result run_sync(uint64_t n, uint64_t diff)
{
    sync_result s;
    memset(&s, 0, sizeof(s));
    keyset a, b;
    /* A: keys 0 .. n-1; B: keys diff .. n-1 + diff: A alone has 0 .. diff-1,
     * B alone has n .. n + diff - 1 */
    if (make_keys(&a, n, 0, 'u', 32) || make_keys(&b, n, diff, 'u', 32)) {
        fprintf(stderr, "sync: out of memory\n");
        return s;
    }
    uint64_t *ida = malloc(n * 8), *idb = malloc(n * 8);
    uint64_t *only_a = malloc(n * 8), *only_b = malloc(n * 8);
    if (!ida || !idb || !only_a || !only_b) {
        fprintf(stderr, "sync: out of memory\n");
        goto out;
    }
    const uint64_t seed = 2026;
    double t0 = now_s();
    for (uint64_t i = 0; i < n; i++) ida[i] = bk_iblt_key_id(a.keys[i], a.lens[i], seed);
    for (uint64_t i = 0; i < n; i++) idb[i] = bk_iblt_key_id(b.keys[i], b.lens[i], seed);
    size_t na, nb;
    int rc = bk_reconcile(ida, n, idb, n, seed, only_a, &na, only_b, &nb, &s.st);
    if (rc != BK_OK) {
        fprintf(stderr, "sync: %s\n", bk_strerror(rc));
        goto out;
    }
    /* each side finds the keys behind the ids and sends them */
    qsort(only_a, na, 8, cmp_u64);
    qsort(only_b, nb, 8, cmp_u64);
    size_t key_bytes = 0;
    uint64_t sent_a = collect(&a, ida, only_a, na, &key_bytes);
    uint64_t sent_b = collect(&b, idb, only_b, nb, &key_bytes);
    double t1 = now_s();
    s.run = 1;
    s.seconds = t1 - t0;
    s.exact = na == diff && nb == diff && sent_a == diff && sent_b == diff;
    /* the first diff keys of A are exactly its own; check by id */
    for (uint64_t i = 0; s.exact && i < diff; i++)
        s.exact = bsearch(&ida[i], only_a, na, 8, cmp_u64) != NULL &&
                  bsearch(&idb[n - 1 - i], only_b, nb, 8, cmp_u64) != NULL;
    s.diff_bytes = (size_t)(2 * diff * 32);
    s.bytes = s.st.strata_bytes + s.st.iblt_bytes + s.st.request_bytes + key_bytes;
    printf("IBLT sync    %llu + %llu keys of 32 bytes, %llu only on each side: %s in %.2f s\n",
           (unsigned long long)n, (unsigned long long)n, (unsigned long long)diff,
           s.exact ? "exact" : "WRONG", s.seconds);
    printf("             estimate %llu (true %llu), table %llu cells, %u round(s)\n",
           (unsigned long long)s.st.estimate, (unsigned long long)(2 * diff),
           (unsigned long long)s.st.cells, s.st.rounds);
    printf("             bytes: estimator %zu + tables %zu + id request %zu + keys %zu = %zu"
           " = %.2fx the differences (%zu)\n",
           s.st.strata_bytes, s.st.iblt_bytes, s.st.request_bytes, key_bytes, s.bytes,
           (double)s.bytes / (double)s.diff_bytes, s.diff_bytes);

    /* the approximate method: A sends a Bloom filter of its keys */
    for (int k = 0; k < 2; k++) {
        double p = k == 0 ? 0.01 : 0.001;
        bk_blocked *f;
        if (bk_blocked_create(&f, n, p, seed) != BK_OK) break;
        double u0 = now_s();
        bk_blocked_add_batch(f, a.keys, a.lens, n, NULL);
        uint8_t *res = malloc(n);
        if (res == NULL) { bk_blocked_free(f); break; }
        bk_blocked_contains_batch(f, b.keys, b.lens, n, res);
        uint64_t sent = 0, missed = 0;
        size_t sent_bytes = 0;
        for (uint64_t i = 0; i < n; i++) {
            int b_only = i >= n - diff; /* B's keys diff + i >= n */
            if (!res[i]) { sent++; sent_bytes += 33; }
            else if (b_only) missed++;
        }
        double u1 = now_s();
        size_t fbytes = (size_t)(bk_blocked_bits(f) / 8);
        printf("Bloom %-5g  A sends its filter (%zu bytes), B sends %llu keys (%zu bytes): "
               "%zu bytes = %.1fx the differences, in %.2f s; misses %llu of B's %llu "
               "(%.3f%%) and learns nothing of A's %llu\n",
               p, fbytes, (unsigned long long)sent, sent_bytes, fbytes + sent_bytes,
               (double)(fbytes + sent_bytes) / (double)s.diff_bytes, u1 - u0,
               (unsigned long long)missed, (unsigned long long)diff,
               100.0 * (double)missed / (double)diff, (unsigned long long)diff);
        free(res);
        bk_blocked_free(f);
    }
out:
    free(ida);
    free(idb);
    free(only_a);
    free(only_b);
    free_keys(&a);
    free_keys(&b);
    return s;
}

/*==========================================================================
 * Targets
 *==========================================================================*/

static const row *find_row(const char *name, double n)
{
    for (int i = 0; i < nrows; i++)
        if (strcmp(rows[i].name, name) == 0 && rows[i].n == n && rows[i].ok) return &rows[i];
    return NULL;
}

static void verdict(const char *what, int run, int met, const char *measured)
{
    printf("%-64s %-30s %s\n", what, run ? measured : "-", !run ? "not run" : met ? "met" : "NOT MET");
}

int main(int argc, char **argv)
{
    options o;
    if (parse_options(argc, argv, &o)) {
        usage(stderr);
        return 2;
    }
    keyset absent;
    if (make_keys(&absent, o.absent, 0, 'a', 16)) {
        fprintf(stderr, "bench_static: out of memory\n");
        return 1;
    }
    printf("%-12s %9s %9s %9s %11s %7s %10s %10s\n", "filter", "n", "build", "bits/key",
           "fpr", "ratio", "absent", "present");
    printf("%-12s %9s %9s %9s %11s %7s %10s %10s\n", "", "", "ns/key", "", "measured",
           "b/log2", "batch ns", "batch ns");
    for (int i = 0; i < o.nn; i++) {
        uint64_t n = (uint64_t)o.n[i];
        keyset in;
        if (make_keys(&in, n, 0, 'p', 16)) {
            fprintf(stderr, "bench_static: out of memory for n = %g\n", o.n[i]);
            continue;
        }
        uint64_t npresent = o.lookups ? o.lookups : (n < 10000000 ? n : 10000000);
        if (npresent > n) npresent = n;
        for (uint32_t w = 8; w <= 16; w += 4) {
            run_static("static", &in, &absent, npresent, w);
            if (w != 12) run_static("bumped", &in, &absent, npresent, w);
            run_blocked(&in, &absent, npresent, w);
        }
        free_keys(&in);
    }
    map_result m = {0};
    if (o.map_n) m = run_map(o.map_n, &absent);
    sync_result s = {0};
    if (o.sync_n) s = run_sync(o.sync_n, o.sync_diff);

    printf("\ntargets (issue 16)\n");
    char buf[128];
    static const char *const families[] = {"static", "bumped"};
    for (int fam = 0; fam < 2; fam++)
        for (int w = 8; w <= 16; w += 4) {
            if (fam == 1 && w == 12) continue;
            for (int k = 0; k < 2; k++) {
                double n = k == 0 ? 1e6 : 1e8;
                char name[16];
                snprintf(name, sizeof(name), "%s-%d", families[fam], w);
                const row *r = find_row(name, n);
                char what[96];
                snprintf(what, sizeof(what), "%s bits/key <= 1.15 log2(1/fpr) at %.0e", name, n);
                if (r) snprintf(buf, sizeof(buf), "%.3f x", r->ratio);
                verdict(what, r != NULL, r && r->ratio > 0 && r->ratio <= 1.15, buf);
            }
        }
    for (int fam = 0; fam < 2; fam++)
        for (int w = 8; w <= 16; w += 8) {
            char name[16], blocked[16];
            snprintf(name, sizeof(name), "%s-%d", families[fam], w);
            snprintf(blocked, sizeof(blocked), "blocked-%d", w);
            const row *f = find_row(name, 1e8);
            const row *b = find_row(blocked, 1e8);
            char what[96];
            snprintf(what, sizeof(what), "%s batch lookups <= %s's at 1e8 (abs/pres)", name, blocked);
            if (f && b)
                snprintf(buf, sizeof(buf), "%.1f/%.1f vs %.1f/%.1f ns", f->absent_ns,
                         f->present_ns, b->absent_ns, b->present_ns);
            verdict(what, f && b, f && b && f->absent_ns <= b->absent_ns &&
                                      f->present_ns <= b->present_ns, buf);
        }
    for (int fam = 0; fam < 2; fam++)
        for (int w = 8; w <= 16; w += 8) {
            char name[16];
            snprintf(name, sizeof(name), "%s-%d", families[fam], w);
            const row *f = find_row(name, 1e7);
            char what[96];
            snprintf(what, sizeof(what), "%s construction <= 150 ns/key at 1e7", name);
            if (f) snprintf(buf, sizeof(buf), "%.1f ns/key", f->build_ns);
            verdict(what, f != NULL, f && f->build_ns <= 150, buf);
        }
    int map_1e7 = m.run && m.n == 1e7;
    snprintf(buf, sizeof(buf), "%.3f = %.3f + check %.3f", m.bits, m.value_bits, m.check_bits);
    verdict("map 8-bit values: bits/key <= 1.25 x 8 + check bits (c = 7: 0.78%)", map_1e7,
            m.value_bits <= 10.0 && m.bits <= 10.0 + m.check_bits, buf);
    snprintf(buf, sizeof(buf), "%llu wrong", (unsigned long long)m.wrong);
    verdict("map: no wrong value for a member (all 1e7 checked)", map_1e7, m.wrong == 0, buf);
    snprintf(buf, sizeof(buf), "%.1f ns/key", m.build_ns);
    verdict("map construction <= 200 ns/key at 1e7", map_1e7, m.build_ns <= 200, buf);
    snprintf(buf, sizeof(buf), "%.1f bytes/key", m.temp_per_key);
    verdict("map construction memory <= 24 bytes/key beyond the keys", map_1e7,
            m.temp_per_key <= 24, buf);
    int sync_std = s.run && o.sync_n == 10000000 && o.sync_diff == 10000;
    snprintf(buf, sizeof(buf), "%s, %.2fx", s.exact ? "exact" : "WRONG",
             s.diff_bytes ? (double)s.bytes / (double)s.diff_bytes : 0.0);
    verdict("sync 1e7 vs 1e7, 1e4 each way: exact, bytes <= 3x differences", sync_std,
            s.exact && s.bytes <= 3 * s.diff_bytes, buf);
    snprintf(buf, sizeof(buf), "%.2f s", s.seconds);
    verdict("sync in under 5 s", sync_std, s.seconds < 5.0, buf);
    free_keys(&absent);
    return 0;
}
