/*
 * bench_grow.c - filters that grow (scalable) and filters that forget
 * (window), each beside a plain blocked filter of the same memory.
 *
 * Scalable table: n keys added to a filter created for --start keys
 * (RedisBloom's default 100), which grows by stages; rows for RedisBloom's
 * rule (stage 0 at p: compound bound 2p) and the bounded rule (compound
 * bound p), a blocked filter sized for n in advance (what growth costs
 * against knowing n), and a blocked filter with the scalable filter's
 * memory and the best k for n.
 *
 * Window table: a stream of --windows windows of --window-items keys each,
 * at a steady rate on a fake clock (W = 1000 time units). Rows: the window
 * filter (g generations), and a blocked filter with the same memory given
 * the same stream. The rate is measured at the end, in steady state.
 *
 * Columns: bits per key (of n, or of one window's keys), the measured
 * false-positive rate on --absent keys never added, and nanoseconds per
 * add (growth and rotations included), per positive and per negative
 * lookup. Keys are 16-byte strings made before any timing. Speed is
 * measured, never asserted.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bloomkit.h"

/*==========================================================================
 * Options and keys
 *==========================================================================*/

typedef struct options {
    uint64_t n;            /* scalable: keys added */
    uint64_t start;        /* scalable: first stage capacity */
    double p;
    uint64_t window_items; /* window: keys per window */
    uint64_t windows;      /* window: windows streamed */
    uint32_t generations;
    uint64_t absent;
    uint64_t seed;
} options;

static void usage(FILE *out)
{
    fprintf(out,
        "usage: bench_grow [options]\n"
        "  --n N              keys added to the scalable filter (default 1e7)\n"
        "  --start N          its first stage's capacity (default 100)\n"
        "  --p P              target false-positive rate (default 0.01)\n"
        "  --window-items N   window: keys per window (default 1e6)\n"
        "  --windows N        window: windows streamed (default 20)\n"
        "  --generations G    window: generations (default 4)\n"
        "  --absent N         absent keys for FPR and negative lookups\n"
        "                     (default 1e6)\n"
        "  --seed S           key generator seed (default 1)\n"
        "  --help             this text\n"
        "Keys take 16 bytes each: n + windows * window-items + absent.\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= 1) || v > 1e12) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int parse_options(int argc, char **argv, options *o)
{
    o->n = 10000000;
    o->start = 100;
    o->p = 0.01;
    o->window_items = 1000000;
    o->windows = 20;
    o->generations = 4;
    o->absent = 1000000;
    o->seed = 1;
    for (int i = 1; i < argc; i += 2) { /* option, value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t g;
        int bad = 0;
        if (strcmp(a, "--help") == 0) { usage(stdout); exit(0); }
        if (v == NULL) return -1;
        if (strcmp(a, "--n") == 0) bad = parse_u64(v, &o->n);
        else if (strcmp(a, "--start") == 0) bad = parse_u64(v, &o->start);
        else if (strcmp(a, "--window-items") == 0) bad = parse_u64(v, &o->window_items);
        else if (strcmp(a, "--windows") == 0) bad = parse_u64(v, &o->windows);
        else if (strcmp(a, "--absent") == 0) bad = parse_u64(v, &o->absent);
        else if (strcmp(a, "--seed") == 0) bad = parse_u64(v, &o->seed);
        else if (strcmp(a, "--generations") == 0) {
            bad = parse_u64(v, &g) || g < 2 || g > BK_WINDOW_MAX_GENERATIONS;
            o->generations = (uint32_t)g;
        } else if (strcmp(a, "--p") == 0) {
            char *end;
            o->p = strtod(v, &end);
            bad = *end || !(o->p > 0 && o->p < 1);
        } else return -1;
        if (bad) return -1;
    }
    return 0;
}

#define KEY_LEN 16

typedef struct keyset {
    char *bytes; /* n keys of KEY_LEN bytes */
    uint64_t n;
} keyset;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Distinct keys: a tag byte, then 15 bytes of which 8 are the index. */
static int make_keys(keyset *ks, uint64_t n, char tag, uint64_t seed)
{
    ks->n = n;
    ks->bytes = malloc((size_t)n * KEY_LEN);
    if (ks->bytes == NULL) return -1;
    uint64_t s = seed ^ ((uint64_t)(unsigned char)tag << 56);
    for (uint64_t i = 0; i < n; i++) {
        char *k = ks->bytes + i * KEY_LEN;
        uint64_t r = splitmix(&s);
        k[0] = tag;
        memcpy(k + 1, &i, 8);
        memcpy(k + 9, &r, 7);
    }
    return 0;
}

static inline const char *key(const keyset *ks, uint64_t i)
{
    return ks->bytes + i * KEY_LEN;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/*==========================================================================
 * Rows
 *==========================================================================*/

typedef struct row {
    const char *name;
    double bits_per_key;
    double fpr;
    double add_ns, hit_ns, miss_ns;
    char note[96];
} row;

static void print_row(const row *r)
{
    printf("| %-26s | %8.2f | %9.5f | %7.1f | %7.1f | %7.1f | %s |\n",
           r->name, r->bits_per_key, r->fpr, r->add_ns, r->hit_ns, r->miss_ns,
           r->note);
}

static void print_header(void)
{
    printf("| %-26s | %8s | %9s | %7s | %7s | %7s | %s |\n", "filter",
           "bits/key", "FPR", "add ns", "hit ns", "miss ns", "notes");
    printf("|%s|---------:|----------:|--------:|--------:|--------:|---|\n",
           "----------------------------");
}

/* Positive lookups sample at most this many of the keys added. */
#define HIT_SAMPLE 2000000u

static void run_scalable(row *r, const keyset *in, const keyset *out,
                         const options *o, unsigned flags, uint64_t *bits_out)
{
    bk_scalable *f;
    volatile int64_t sink = 0;
    if (bk_scalable_create(&f, o->start, o->p, 2, flags, 7) != BK_OK) {
        fprintf(stderr, "bench_grow: scalable create failed\n");
        exit(1);
    }
    double t0 = now_ns();
    for (uint64_t i = 0; i < in->n; i++) {
        int rc = bk_scalable_add(f, key(in, i), KEY_LEN);
        if (rc < 0) {
            fprintf(stderr, "bench_grow: add: %s\n", bk_strerror(rc));
            exit(1);
        }
    }
    double t1 = now_ns();
    uint64_t hits = in->n < HIT_SAMPLE ? in->n : HIT_SAMPLE;
    uint64_t step = in->n / hits;
    for (uint64_t i = 0; i < hits; i++)
        sink += bk_scalable_contains(f, key(in, i * step), KEY_LEN);
    double t2 = now_ns();
    uint64_t found = 0;
    for (uint64_t i = 0; i < out->n; i++)
        found += (uint64_t)bk_scalable_contains(f, key(out, i), KEY_LEN);
    double t3 = now_ns();
    bk_scalable_stats st;
    bk_scalable_get_stats(f, &st);
    uint64_t bits = 0;
    for (uint32_t i = 0; i < st.stages; i++) {
        bk_scalable_stage_stats ss;
        bk_scalable_get_stage_stats(f, i, &ss);
        bits += ss.bits;
    }
    *bits_out = bits;
    r->bits_per_key = (double)bits / (double)in->n;
    r->fpr = (double)found / (double)out->n;
    r->add_ns = (t1 - t0) / (double)in->n;
    r->hit_ns = (t2 - t1) / (double)hits;
    r->miss_ns = (t3 - t2) / (double)out->n;
    /* share of the newest stage in use */
    bk_scalable_stage_stats last;
    bk_scalable_get_stage_stats(f, st.stages - 1, &last);
    snprintf(r->note, sizeof(r->note),
             "%u stages, capacity %.3g, bound %.4f, newest stage %.0f%% full",
             st.stages, (double)st.capacity, st.fpr_bound,
             100.0 * (double)last.items / (double)last.capacity);
    bk_scalable_free(f);
    (void)sink;
}

/* A blocked filter of m_bits and k (or sized for n at p when m_bits is 0),
 * given every key of `in` in order. Bits per key are of per_key_of keys;
 * positive lookups sample keys from hit_from on. */
static void run_blocked(row *r, const keyset *in, const keyset *out,
                        uint64_t m_bits, uint32_t k, uint64_t n_sized,
                        double p, uint64_t per_key_of, uint64_t hit_from)
{
    bk_blocked *f;
    volatile int64_t sink = 0;
    int rc = m_bits ? bk_blocked_create_mk(&f, m_bits, k, 7)
                    : bk_blocked_create(&f, n_sized, p, 7);
    if (rc != BK_OK) {
        fprintf(stderr, "bench_grow: blocked create: %s\n", bk_strerror(rc));
        exit(1);
    }
    double t0 = now_ns();
    for (uint64_t i = 0; i < in->n; i++) bk_blocked_add(f, key(in, i), KEY_LEN);
    double t1 = now_ns();
    uint64_t span = in->n - hit_from;
    uint64_t hits = span < HIT_SAMPLE ? span : HIT_SAMPLE;
    uint64_t step = span / hits;
    for (uint64_t i = 0; i < hits; i++)
        sink += bk_blocked_contains(f, key(in, hit_from + i * step), KEY_LEN);
    double t2 = now_ns();
    uint64_t found = 0;
    for (uint64_t i = 0; i < out->n; i++)
        found += (uint64_t)bk_blocked_contains(f, key(out, i), KEY_LEN);
    double t3 = now_ns();
    r->bits_per_key = (double)bk_blocked_bits(f) / (double)per_key_of;
    r->fpr = (double)found / (double)out->n;
    r->add_ns = (t1 - t0) / (double)in->n;
    r->hit_ns = (t2 - t1) / (double)hits;
    r->miss_ns = (t3 - t2) / (double)out->n;
    snprintf(r->note, sizeof(r->note), "%.3g bits, k = %u",
             (double)bk_blocked_bits(f), bk_blocked_hashes(f));
    bk_blocked_free(f);
    (void)sink;
}

#define WINDOW_TIME 1000u

/* The window filter on the stream: key i arrives at time i * W / n_W. */
static void run_window(row *r, const keyset *stream, const keyset *out,
                       const options *o, uint64_t *bits_out, uint32_t *k_out)
{
    bk_window *f;
    volatile int64_t sink = 0;
    const uint64_t nw = o->window_items;
    int rc = bk_window_create(&f, nw, o->p, WINDOW_TIME, o->generations, 0, 7);
    if (rc != BK_OK) {
        fprintf(stderr, "bench_grow: window create: %s\n", bk_strerror(rc));
        exit(1);
    }
    double t0 = now_ns();
    for (uint64_t i = 0; i < stream->n; i++) {
        uint64_t t = (uint64_t)((unsigned __int128)i * WINDOW_TIME / nw);
        bk_window_add(f, key(stream, i), KEY_LEN, t);
    }
    double t1 = now_ns();
    uint64_t now = (uint64_t)((unsigned __int128)(stream->n - 1) * WINDOW_TIME / nw);
    /* positive lookups: keys of the last window */
    uint64_t from = stream->n > nw ? stream->n - nw : 0;
    uint64_t span = stream->n - from;
    uint64_t hits = span < HIT_SAMPLE ? span : HIT_SAMPLE;
    uint64_t step = span / hits;
    for (uint64_t i = 0; i < hits; i++)
        sink += bk_window_contains(f, key(stream, from + i * step), KEY_LEN, now);
    double t2 = now_ns();
    uint64_t found = 0;
    for (uint64_t i = 0; i < out->n; i++)
        found += (uint64_t)bk_window_contains(f, key(out, i), KEY_LEN, now);
    double t3 = now_ns();
    bk_window_stats st;
    bk_window_get_stats(f, &st);
    bk_window_generation_stats gs;
    bk_window_get_generation_stats(f, 0, &gs);
    *bits_out = gs.bits * st.generations;
    *k_out = gs.hashes;
    r->bits_per_key = (double)*bits_out / (double)nw;
    r->fpr = (double)found / (double)out->n;
    r->add_ns = (t1 - t0) / (double)stream->n;
    r->hit_ns = (t2 - t1) / (double)hits;
    r->miss_ns = (t3 - t2) / (double)out->n;
    snprintf(r->note, sizeof(r->note),
             "g = %u, %llu rotations (%llu early), bound %.4f",
             st.generations, (unsigned long long)st.rotations,
             (unsigned long long)st.early_rotations, st.fpr_bound);
    bk_window_free(f);
    (void)sink;
}

int main(int argc, char **argv)
{
    options o;
    keyset in, stream, out;
    if (parse_options(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    uint64_t stream_n = o.windows * o.window_items;
    if (make_keys(&in, o.n, 'i', o.seed) || make_keys(&out, o.absent, 'o', o.seed) ||
        make_keys(&stream, stream_n, 's', o.seed)) {
        fprintf(stderr, "bench_grow: out of memory for keys\n");
        return 1;
    }
    printf("bloomkit %s, blocked path %s\n", bk_version_string(),
           bk_blocked_simd_name(bk_blocked_simd_level()));

    /* Scalable */
    printf("\nScalable: %.3g keys into a filter created for %llu, p = %g, "
           "expansion 2; FPR on %.3g absent keys\n\n",
           (double)o.n, (unsigned long long)o.start, o.p, (double)o.absent);
    print_header();
    row r;
    uint64_t bits;
    memset(&r, 0, sizeof(r));
    r.name = "scalable (RedisBloom rule)";
    run_scalable(&r, &in, &out, &o, 0, &bits);
    print_row(&r);
    uint64_t scalable_bits = bits;
    memset(&r, 0, sizeof(r));
    r.name = "scalable (bounded)";
    run_scalable(&r, &in, &out, &o, BK_SCALABLE_BOUNDED, &bits);
    print_row(&r);
    memset(&r, 0, sizeof(r));
    r.name = "blocked, sized for n";
    run_blocked(&r, &in, &out, 0, 0, o.n, o.p, o.n, 0);
    print_row(&r);
    memset(&r, 0, sizeof(r));
    r.name = "blocked, same memory";
    double k_best = round(log(2.0) * (double)scalable_bits / (double)o.n);
    uint32_t k = k_best < 1 ? 1 : k_best > 16 ? 16 : (uint32_t)k_best;
    run_blocked(&r, &in, &out, scalable_bits, k, 0, 0, o.n, 0);
    strncat(r.note, " (memory of the first row)", sizeof(r.note) - strlen(r.note) - 1);
    print_row(&r);

    /* Window */
    printf("\nWindow: a stream of %.3g keys (%llu windows of %.3g), "
           "p = %g; FPR at the end on %.3g absent keys\n\n",
           (double)stream_n, (unsigned long long)o.windows,
           (double)o.window_items, o.p, (double)o.absent);
    print_header();
    uint32_t wk;
    memset(&r, 0, sizeof(r));
    r.name = "window";
    run_window(&r, &stream, &out, &o, &bits, &wk);
    print_row(&r);
    memset(&r, 0, sizeof(r));
    r.name = "blocked, same memory";
    uint64_t last_window = stream_n > o.window_items ? stream_n - o.window_items : 0;
    run_blocked(&r, &stream, &out, bits, wk, 0, 0, o.window_items, last_window);
    print_row(&r);

    free(in.bytes);
    free(out.bytes);
    free(stream.bytes);
    return 0;
}
