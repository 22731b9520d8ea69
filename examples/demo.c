/*
 * demo.c - libbloomkit at work on generated data (what `make run` shows).
 *
 * Builds a filter for a million URL-like keys, checks that every one is
 * found, measures the false-positive rate on a million keys that were never
 * added, and compares the memory with an exact hash set holding the same
 * keys (a plain open-addressing table built here, so its size is measured,
 * not guessed).
 *
 * Usage: bloomkit-demo [ITEMS [ERROR_RATE]]     (defaults: 1000000 0.01)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bloomkit.h"

/*--------------------------------------------------------------------------
 * Keys: "https://example.com/item/<n>?session=<hex>", 40-60 bytes.
 *--------------------------------------------------------------------------*/

static size_t make_key(char *out, size_t cap, uint64_t n, int absent)
{
    uint64_t mix = (n + 1) * UINT64_C(0x9E3779B97F4A7C15) ^ (absent ? 0xABCDEFu : 0);
    int len = snprintf(out, cap, "https://example.com/%s/%llu?session=%llx",
                       absent ? "other" : "item", (unsigned long long)n,
                       (unsigned long long)mix);
    return (size_t)len;
}

/*--------------------------------------------------------------------------
 * The comparison: an exact set of the same keys (open addressing, linear
 * probing, load factor <= 0.5, keys copied into one arena).
 *--------------------------------------------------------------------------*/

typedef struct {
    uint64_t *slots;  /* arena offset + 1, 0 = empty */
    size_t nslots;
    char *arena;      /* length-prefixed keys */
    size_t used, cap;
} exact_set;

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * UINT64_C(0x100000001b3);
    return h;
}

static int set_init(exact_set *s, size_t items)
{
    s->nslots = 1;
    while (s->nslots < 2 * items) s->nslots <<= 1;
    s->slots = calloc(s->nslots, sizeof(uint64_t));
    s->cap = items * 64;
    s->arena = malloc(s->cap);
    s->used = 0;
    return s->slots && s->arena ? 0 : -1;
}

static void set_add(exact_set *s, const char *key, size_t len)
{
    size_t i = fnv1a(key, len) & (s->nslots - 1);
    for (; s->slots[i]; i = (i + 1) & (s->nslots - 1)) {
        const char *k = s->arena + s->slots[i] - 1;
        if ((size_t)(unsigned char)k[0] == len && memcmp(k + 1, key, len) == 0) return;
    }
    if (s->used + len + 1 > s->cap) return; /* keys here are < 64 bytes */
    s->arena[s->used] = (char)len;
    memcpy(s->arena + s->used + 1, key, len);
    s->slots[i] = s->used + 1;
    s->used += len + 1;
}

static size_t set_bytes(const exact_set *s)
{
    return s->nslots * sizeof(uint64_t) + s->used;
}

/*--------------------------------------------------------------------------*/

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_args(int argc, char **argv, uint64_t *items, double *fpr)
{
    char *end;
    if (argc > 1) {
        errno = 0;
        unsigned long long v = strtoull(argv[1], &end, 10);
        if (errno || *end || v == 0 || v > 100000000ull) {
            fprintf(stderr, "bloomkit-demo: ITEMS must be 1..100000000, got '%s'\n", argv[1]);
            return -1;
        }
        *items = v;
    }
    if (argc > 2) {
        *fpr = strtod(argv[2], &end);
        if (*end || !(*fpr > 0 && *fpr < 1)) {
            fprintf(stderr, "bloomkit-demo: ERROR_RATE must be in (0, 1), got '%s'\n", argv[2]);
            return -1;
        }
    }
    return 0;
}

/* Add (add 1) or look up keys 0 .. items - 1 (make_key; absent 1: the
 * never-added ones): how many adds were new, or lookups found; the time
 * taken in *secs. */
static uint64_t run_keys(bk_bloom *f, uint64_t items, int absent, int add, double *secs)
{
    char key[128];
    double t0 = seconds();
    uint64_t n = 0;
    for (uint64_t i = 0; i < items; i++) {
        size_t len = make_key(key, sizeof(key), i, absent);
        n += (uint64_t)(add ? bk_bloom_add(f, key, len) : bk_bloom_contains(f, key, len));
    }
    *secs = seconds() - t0;
    return n;
}

int main(int argc, char **argv)
{
    uint64_t items = 1000000;
    double fpr = 0.01;
    char key[128];
    if (argc > 3 || (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))) {
        printf("usage: bloomkit-demo [ITEMS [ERROR_RATE]]  (defaults 1000000 0.01)\n");
        return argc > 3 ? 2 : 0;
    }
    if (parse_args(argc, argv, &items, &fpr) != 0) return 2;

    printf("bloomkit %s demo: %llu URL-like keys, target false-positive rate %g\n\n",
           bk_version_string(), (unsigned long long)items, fpr);

    bk_bloom *f;
    int rc = bk_bloom_create(&f, items, fpr, BK_DEFAULT_SEED);
    if (rc != BK_OK) {
        fprintf(stderr, "bloomkit-demo: cannot create filter: %s\n", bk_strerror(rc));
        return 1;
    }

    make_key(key, sizeof(key), 0, 0);
    printf("example key: %s\n", key);

    double t_add, t_hit, t_miss;
    uint64_t new_keys = run_keys(f, items, 0, 1, &t_add);
    uint64_t found = run_keys(f, items, 0, 0, &t_hit);
    uint64_t false_pos = run_keys(f, items, 1, 0, &t_miss);

    bk_bloom_stats st;
    bk_bloom_get_stats(f, &st);

    printf("\nadded     %llu keys (%llu reported certainly new) in %.2f s\n",
           (unsigned long long)items, (unsigned long long)new_keys, t_add);
    printf("found     %llu of %llu added keys (false negatives: %llu) in %.2f s\n",
           (unsigned long long)found, (unsigned long long)items,
           (unsigned long long)(items - found), t_hit);
    printf("absent    %llu never-added keys: %llu reported present = %.4f%% "
           "(expected %.4f%%) in %.2f s\n",
           (unsigned long long)items, (unsigned long long)false_pos,
           100.0 * (double)false_pos / (double)items, 100.0 * st.fpr_at_capacity,
           t_miss);
    printf("filter    m = %llu bits, k = %u hashes, %.1f%% of bits set, "
           "estimated %.0f distinct keys\n",
           (unsigned long long)st.bits, st.hashes, 100.0 * st.fill,
           st.estimated_items);

    exact_set set;
    if (set_init(&set, (size_t)items) != 0) {
        printf("memory    filter %.2f MB (no memory left for the exact set)\n",
               (double)st.bytes / 1e6);
    } else {
        for (uint64_t i = 0; i < items; i++) {
            size_t len = make_key(key, sizeof(key), i, 0);
            set_add(&set, key, len);
        }
        printf("memory    filter %.2f MB (%.1f bits per key) vs exact hash set "
               "%.2f MB: %.1fx smaller\n",
               (double)st.bytes / 1e6, 8.0 * (double)st.bytes / (double)items,
               (double)set_bytes(&set) / 1e6,
               (double)set_bytes(&set) / (double)st.bytes);
    }
    free(set.slots);
    free(set.arena);
    bk_bloom_free(f);
    return found == items ? 0 : 1;
}
