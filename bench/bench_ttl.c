/*
 * bench_ttl.c - the per-item TTL filter against one blocked filter holding
 * the same live keys at the same rate (issue 34's targets: lookups within
 * 2x, memory within 1.5x), with XXH3-128 alone as the floor.
 *
 * The TTL filter: capacity n, rate p, max TTL M = 3600000 (ms), the
 * table layout (the default; --g N: the generations layout, N
 * generations). It is filled by a stream: key i added at time
 * i * M / n with TTL M (--mixed: a TTL drawn uniformly from 1..M, keys
 * added about twice as fast so that about n are held), then looked up at time M,
 * when every generation is live: a lookup tests g segments or so (the
 * table: two buckets). An add the table refuses (BK_EFULL: more held than
 * it has room for, --mixed holds a little over n) is counted and shown. The
 * blocked filter holds n keys at p (what one filter needs for the same
 * live keys); it is single-writer, as the TTL filter's segments are.
 *
 * "blocked =B": a blocked filter of the same keys in as many bytes as the
 * TTL filter (a lower rate), to tell what the table's layout costs from
 * what its size costs where the machine's cache holds one and not the
 * other.
 *
 * Lookups: absent keys (never added) and present keys (the latest added:
 * live), by single calls and in batches of 1024 (bk_*_contains_batch).
 * Every cell is the fastest of --repeat runs, in ns per key. Ratios are
 * what to read: the machine is shared.
 *
 * --fill: instead, how far past capacity the table takes new keys: keys
 * added (all live) until the first BK_EFULL; their count against n and
 * against the table's entries, the entries moved, and the time.
 *
 *   bench_ttl [--n 1e7] [--g 17] [--p 0.01] [--lookups 2e6] [--repeat 3]
 *             [--mixed] [--fill]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "bloomkit.h"

#define BATCH 1024
#define MAX_TTL UINT64_C(3600000)

typedef struct probe {
    uint64_t *ids;      /* key ids */
    uint64_t n;
} probe;

/* key id -> 8 bytes */
static inline void key_of(uint64_t id, uint64_t *out) { *out = id * UINT64_C(0x9E3779B97F4A7C15) ^ 0xabcdef; }

typedef double (*run_fn)(void *f, const probe *pr, uint64_t now, int batched, uint64_t *found);

/* ns per lookup of pr's keys in f, a TTL filter at `now` (ttl) or a
 * blocked filter, by single calls or batches; *found = the hits. */
static double run_lookups(const void *f, int ttl, const probe *pr, uint64_t now, int batched,
                          uint64_t *found)
{
    uint64_t keys[BATCH];
    const void *ptrs[BATCH];
    size_t lens[BATCH];
    uint64_t hits = 0;
    double t0 = now_ns();
    for (uint64_t at = 0; at < pr->n; at += BATCH) {
        size_t m = pr->n - at < BATCH ? (size_t)(pr->n - at) : BATCH;
        for (size_t i = 0; i < m; i++) {
            key_of(pr->ids[at + i], &keys[i]);
            ptrs[i] = &keys[i];
            lens[i] = 8;
        }
        if (batched && ttl) {
            hits += (uint64_t)bk_ttl_contains_batch(f, ptrs, lens, m, now, NULL);
        } else if (batched) {
            hits += (uint64_t)bk_blocked_contains_batch(f, ptrs, lens, m, NULL);
        } else if (ttl) {
            for (size_t i = 0; i < m; i++) hits += (uint64_t)bk_ttl_contains(f, ptrs[i], 8, now);
        } else {
            for (size_t i = 0; i < m; i++) hits += (uint64_t)bk_blocked_contains(f, ptrs[i], 8);
        }
    }
    *found = hits;
    return (now_ns() - t0) / (double)pr->n;
}

static double run_ttl(void *f, const probe *pr, uint64_t now, int batched, uint64_t *found)
{
    return run_lookups(f, 1, pr, now, batched, found);
}

static double run_blocked(void *f, const probe *pr, uint64_t now, int batched, uint64_t *found)
{
    return run_lookups(f, 0, pr, now, batched, found);
}

static double run_hash(void *vf, const probe *pr, uint64_t now, int batched, uint64_t *found)
{
    (void)vf;
    (void)now;
    (void)batched;
    uint64_t key, sink = 0;
    double t0 = now_ns();
    for (uint64_t i = 0; i < pr->n; i++) {
        key_of(pr->ids[i], &key);
        sink ^= bk_hash_key(&key, 8, 1).lo;
    }
    *found = sink & 1;
    return (now_ns() - t0) / (double)pr->n;
}

static double best_of(run_fn fn, void *f, const probe *pr, uint64_t now, int batched,
                      int repeat, uint64_t *found)
{
    double best = 1e30;
    for (int r = 0; r < repeat; r++) {
        double ns = fn(f, pr, now, batched, found);
        if (ns < best) best = ns;
    }
    return best;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_ttl [--n N] [--g G] [--p P] [--lookups L] [--repeat R] "
                    "[--mixed] [--fill]\n");
    exit(2);
}

/* --fill: new keys, all live, into a table of capacity n until it first
 * answers BK_EFULL. */
static int fill_until_full(uint64_t n, double p)
{
    bk_ttl *tf;
    int rc = bk_ttl_create_table(&tf, n, p, MAX_TTL, 0, 0, 1);
    if (rc != BK_OK) {
        fprintf(stderr, "bench_ttl: create: %s\n", bk_strerror(rc));
        return 1;
    }
    uint64_t key, added = 0;
    double t0 = now_ns();
    for (uint64_t i = 0;; i++) {
        key_of(i, &key);
        rc = bk_ttl_add(tf, &key, 8, MAX_TTL, 0);
        if (rc < 0) break;
        added += (uint64_t)rc;
    }
    double s = (now_ns() - t0) / 1e9;
    bk_ttl_stats st;
    bk_ttl_get_stats(tf, &st);
    printf("| capacity | new keys at the first refusal | x capacity | of the entries | moves | s |\n");
    printf("|---|---|---|---|---|---|\n");
    printf("| %llu | %llu | %.4f | %.2f%% | %llu | %.1f |\n", (unsigned long long)n,
           (unsigned long long)added, (double)added / (double)n,
           100.0 * (double)added / (4.0 * (double)st.buckets), (unsigned long long)st.kicks, s);
    if (rc != BK_EFULL) fprintf(stderr, "bench_ttl: add: %s\n", bk_strerror(rc));
    bk_ttl_free(tf);
    return rc == BK_EFULL ? 0 : 1;
}

int main(int argc, char **argv)
{
    uint64_t n = 10000000, lookups = 2000000;
    uint32_t g = 0; /* the table */
    double p = 0.01;
    int repeat = 3, mixed = 0, fill = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mixed")) { mixed = 1; continue; }
        if (!strcmp(argv[i], "--fill")) { fill = 1; continue; }
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--n")) n = (uint64_t)strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--g")) g = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--p")) p = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--lookups")) lookups = (uint64_t)strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--repeat")) repeat = atoi(argv[++i]);
        else usage();
    }
    if (n < 100 || lookups < 1 || repeat < 1) usage();
    if (fill) return fill_until_full(n, p);

    bk_ttl *tf;
    bk_blocked *bf;
    int rc = bk_ttl_create(&tf, n, p, MAX_TTL, g, 0, 1);
    if (rc == BK_OK) rc = bk_blocked_create(&bf, n, p, 1);
    if (rc != BK_OK) {
        fprintf(stderr, "bench_ttl: create: %s\n", bk_strerror(rc));
        return 1;
    }
    bk_blocked_set_single_writer(bf, 1);

    /* the stream: key i at time i * M / n (--mixed: TTLs uniform in 1..M,
     * keys about twice as fast: a key is held until its slot ends, up to
     * gran after its expiry, so the held count peaks at about r (M / 2 +
     * gran) for r keys per unit of time just before a slot ends:
     * 2 n M / (M + 2 gran) keys in all peak at about n) */
    uint64_t gran = bk_ttl_granularity(tf);
    uint64_t total = mixed ? (uint64_t)(2.0 * (double)n * (double)MAX_TTL /
                                        (double)(MAX_TTL + 2 * gran))
                           : n;
    uint64_t rng = 42, key, refused = 0;
    double t0 = now_ns();
    for (uint64_t i = 0; i < total; i++) {
        uint64_t t = i * MAX_TTL / total;
        uint64_t ttl = mixed ? 1 + splitmix(&rng) % MAX_TTL : MAX_TTL;
        key_of(i, &key);
        if ((rc = bk_ttl_add(tf, &key, 8, ttl, t)) == BK_EFULL) {
            refused++;
        } else if (rc < 0) {
            fprintf(stderr, "bench_ttl: add %llu: %s\n", (unsigned long long)i, bk_strerror(rc));
            return 1;
        }
    }
    double add_ttl = (now_ns() - t0) / (double)total;
    const uint64_t now = MAX_TTL;
    bk_ttl_stats st;
    bk_ttl_get_stats_at(tf, now, &st);
    /* the blocked filter holds as many keys as the TTL filter holds live */
    t0 = now_ns();
    for (uint64_t i = 0; i < st.live_items; i++) {
        key_of(total - 1 - i, &key);
        bk_blocked_add(bf, &key, 8);
    }
    /* a blocked filter of the same keys in as many bytes as the TTL
     * filter: what the cache alone does to a lookup of that size */
    bk_blocked *big = NULL;
    double scale = (double)bk_ttl_bytes(tf) / ((double)bk_blocked_bits(bf) / 8);
    if (bk_blocked_create(&big, (uint64_t)((double)n * scale), p, 1) != BK_OK) return 1;
    bk_blocked_set_single_writer(big, 1);
    for (uint64_t i = 0; i < st.live_items; i++) {
        key_of(total - 1 - i, &key);
        bk_blocked_add(big, &key, 8);
    }
    double add_bf = (now_ns() - t0) / (double)(st.live_items ? st.live_items : 1);

    probe absent = {malloc(lookups * sizeof(uint64_t)), lookups};
    probe present = {malloc(lookups * sizeof(uint64_t)), lookups};
    if (absent.ids == NULL || present.ids == NULL) return 1;
    uint64_t live_span = st.live_items < total ? st.live_items : total;
    for (uint64_t i = 0; i < lookups; i++) {
        absent.ids[i] = UINT64_C(1) << 62 | splitmix(&rng) >> 2; /* never added */
        /* a recent key: live in both (ttl filter: --mixed keys may have
         * expired; they count as present only if their TTL runs) */
        present.ids[i] = total - 1 - splitmix(&rng) % (live_span / 2 + 1);
    }

    printf("n = %.0e live keys (%llu held at the clock), p = %g, g = %u, granularity %llu ms, "
           "%s TTLs; %llu lookups, fastest of %d\n",
           (double)n, (unsigned long long)st.live_items, p, g,
           (unsigned long long)bk_ttl_granularity(tf), mixed ? "mixed" : "max", 
           (unsigned long long)lookups, repeat);
    if (st.layout == BK_TTL_LAYOUT_TABLE)
        printf("TTL filter: table, %u slots, %u + %u bits an entry, %llu buckets, %llu adds "
               "refused; add %.1f ns (blocked %.1f)\n",
               st.slots, st.fingerprint_bits, st.expiry_bits, (unsigned long long)st.buckets,
               (unsigned long long)refused, add_ttl, add_bf);
    else
        printf("TTL filter: %llu segments, %u live generations; add %.1f ns (blocked %.1f)\n",
               (unsigned long long)st.segments, st.live_generations, add_ttl, add_bf);
    printf("| filter     |      bytes | bits/key | FPR measured | absent | present | b.absent | b.present |\n");
    printf("|------------|------------|----------|--------------|--------|---------|----------|-----------|\n");
    /* the same filter saved and loaded: its segments then lie in the one
     * block the file was read into (made, each is an allocation of its own) */
    bk_filter *loaded = NULL;
    size_t image = (size_t)bk_filter_serialized_size(bk_ttl_as_filter(tf));
    unsigned char *buf = malloc(image);
    if (buf == NULL || bk_filter_serialize(bk_ttl_as_filter(tf), buf, image) != BK_OK ||
        bk_filter_deserialize(&loaded, buf, image) != BK_OK) {
        fprintf(stderr, "bench_ttl: save and load failed\n");
        return 1;
    }
    free(buf);
    struct { const char *name; run_fn fn; void *f; size_t bytes; } rows[] = {
        {"hash-only", run_hash, NULL, 0},
        {"blocked", run_blocked, bf, (size_t)bk_blocked_bits(bf) / 8},
        {"ttl", run_ttl, tf, bk_ttl_bytes(tf)},
        {"ttl loaded", run_ttl, bk_filter_as_ttl(loaded), bk_ttl_bytes(tf)},
        {"blocked =B", run_blocked, big, (size_t)bk_blocked_bits(big) / 8},
    };
    double cell[5][4];
    for (int r = 0; r < 5; r++) {
        uint64_t fp = 0, hit = 0;
        cell[r][0] = best_of(rows[r].fn, rows[r].f, &absent, now, 0, repeat, &fp);
        cell[r][1] = best_of(rows[r].fn, rows[r].f, &present, now, 0, repeat, &hit);
        cell[r][2] = best_of(rows[r].fn, rows[r].f, &absent, now, 1, repeat, &fp);
        cell[r][3] = best_of(rows[r].fn, rows[r].f, &present, now, 1, repeat, &hit);
        if (r == 0)
            printf("| %-10s | %10s | %8s | %12s | %6.1f | %7.1f | %8.1f | %9.1f |\n", rows[r].name,
                   "-", "-", "-", cell[r][0], cell[r][1], cell[r][2], cell[r][3]);
        else
            printf("| %-10s | %10zu | %8.2f | %11.4f%% | %6.1f | %7.1f | %8.1f | %9.1f |\n",
                   rows[r].name, rows[r].bytes, 8.0 * (double)rows[r].bytes / (double)st.live_items,
                   100.0 * (double)fp / (double)lookups, cell[r][0], cell[r][1], cell[r][2],
                   cell[r][3]);
    }
    printf("ttl / blocked: memory %.2fx (target 1.5x); lookups absent %.2fx, present %.2fx, "
           "batched absent %.2fx, present %.2fx (target 2x)\n",
           (double)rows[2].bytes / (double)rows[1].bytes, cell[2][0] / cell[1][0],
           cell[2][1] / cell[1][1], cell[2][2] / cell[1][2], cell[2][3] / cell[1][3]);
    free(absent.ids);
    free(present.ids);
    printf("loaded / blocked: lookups absent %.2fx, present %.2fx, batched absent %.2fx, "
           "present %.2fx\n",
           cell[3][0] / cell[1][0], cell[3][1] / cell[1][1], cell[3][2] / cell[1][2],
           cell[3][3] / cell[1][3]);
    printf("ttl / blocked of its bytes (=B): lookups absent %.2fx, present %.2fx, batched "
           "absent %.2fx, present %.2fx\n",
           cell[2][0] / cell[4][0], cell[2][1] / cell[4][1], cell[2][2] / cell[4][2],
           cell[2][3] / cell[4][3]);
    bk_filter_free(loaded);
    bk_ttl_free(tf);
    bk_blocked_free(bf);
    bk_blocked_free(big);
    return 0;
}
