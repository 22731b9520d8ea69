/*
 * dleft.c - the d-left counting Bloom filter (Bonomi, Mitzenmacher,
 * Panigrahy, Singh & Varghese, "An improved construction for counting Bloom
 * filters", ESA 2006).
 *
 * Structure
 *   d = 4 subtables of B buckets; a bucket is 8 cells; a cell is an r-bit
 *   remainder and a w-bit counter (counter 0: the cell is empty). A key's
 *   hash gives a fingerprint F = (q, s), q = fastrange(lo, B) in [0, B),
 *   s = the low r bits of hi. Subtable i sees F through a permutation P_i
 *   of [0, B) x [0, 2^r), a two-round Feistel network:
 *       bucket_i    = (q + f_i(s)) mod B
 *       remainder_i = s xor g_i(bucket_i)
 *   (f_i, g_i: salted splitmix64). It is invertible (s = remainder xor
 *   g_i(bucket), q = bucket - f_i(s)), so a remainder found in a bucket of
 *   subtable i identifies the fingerprint: two different fingerprints never
 *   match the same cell, and a key matches at most one cell of its d
 *   buckets. This is what makes removes safe (the paper's argument for
 *   permutations instead of independent hashes): a fingerprint is stored
 *   once, its counter counting its copies.
 *
 *   Add: if one of the d buckets holds the key's remainder, increment that
 *   counter; else put (remainder, 1) in the least loaded bucket, leftmost
 *   subtable on a tie (d-left: Voecking 1999 shows the maximum load then
 *   exceeds the mean by only O(log log n / d)). Remove decrements the
 *   matching cell. Lookup asks whether any of the d buckets holds the
 *   remainder.
 *
 * Memory layout
 *   One bit string: bucket (i, b) begins at bit ((i B + b) 8 (r + w)), cell
 *   j of it (j 8 ... ) at + j (r + w), a cell as counter in its low w bits
 *   and remainder above them; 8 bytes of padding follow so that a 64-bit
 *   load of the last cell stays inside. A lookup touches d buckets of
 *   8 (r + w) bits: four cache lines (the structure trades cache lines for
 *   space, where the blocked counting filter uses one).
 *
 * False positives
 *   A lookup compares the key's remainder with the occupied cells of its d
 *   buckets: n/B cells on average (n fingerprints over B buckets per
 *   subtable, d buckets), each matching with probability 2^-r:
 *       fpr = 1 - (1 - 2^-r)^(n/B)  ~  8 d 0.75 / 2^r = 24 / 2^r at 75% load
 *
 * Overflow
 *   Counters saturate at 2^w - 1 and stick (never decremented): no false
 *   negative, a cell kept for ever. A key whose d buckets are full is
 *   refused with BK_EFULL (nothing written). Both are counted.
 *
 * What it cannot do
 *   Tell a false positive from a present key (removing a never-added key
 *   that matches takes a copy from another fingerprint); concurrent writes;
 *   merging or growing.
 */
#include <string.h> /* memset, memcpy */

#include "deleting.h"
#include "hash.h"
#include "table_family.h"

/*==========================================================================
 * Types
 *==========================================================================*/

#define TABLES BK_DLEFT_TABLES
#define CELLS BK_DLEFT_CELLS
#define LOAD 0.75 /* cells used per cell at capacity (6 of 8) */
#define MAX_CELL_BITS 40

struct bk_dleft {
    bk__tf_head head;           /* first: a bk_dleft is also a bk_filter */
    unsigned char *cells;       /* the bit string, padded */
    uint64_t buckets;           /* B, per subtable */
    uint32_t remainder_bits;    /* r */
    uint32_t counter_bits;      /* w */
};

static const bk__tf_family dleft_family;

/* A key in subtable i: where its cell would be and what it holds. */
typedef struct dleft_key {
    uint64_t bucket_bit[TABLES]; /* bit offset of each candidate bucket */
    uint32_t remainder[TABLES];
} dleft_key;

static const uint64_t SALT_F[TABLES] = {
    UINT64_C(0x243F6A8885A308D3), UINT64_C(0x13198A2E03707344),
    UINT64_C(0xA4093822299F31D0), UINT64_C(0x082EFA98EC4E6C89)};
static const uint64_t SALT_G[TABLES] = {
    UINT64_C(0x452821E638D01377), UINT64_C(0xBE5466CF34E90C6C),
    UINT64_C(0xC0AC29B7C97C50DD), UINT64_C(0x3F84D5B5B5470917)};

#define BATCH_AHEAD 8

/*==========================================================================
 * Internals
 *==========================================================================*/

static inline unsigned cell_bits(const bk_dleft *f)
{
    return f->remainder_bits + f->counter_bits;
}

static uint64_t payload_bytes(uint64_t buckets, unsigned cellbits)
{
    uint64_t bits = (uint64_t)TABLES * buckets * CELLS * cellbits;
    return (bits + 7) / 8 + 8; /* padding for 64-bit loads */
}

static inline void locate(const bk_dleft *f, bk_hash h, dleft_key *key)
{
    const uint64_t B = f->buckets;
    const uint32_t rmask = (uint32_t)((UINT64_C(1) << f->remainder_bits) - 1);
    const uint64_t q = bk__fastrange64(h.lo, B);
    const uint32_t s = (uint32_t)(h.hi & rmask);
    const uint64_t bucket_bits = (uint64_t)CELLS * cell_bits(f);
    for (int i = 0; i < TABLES; i++) {
        uint64_t b = q + bk__fastrange64(bk__dl_hash64(s, SALT_F[i]), B);
        if (b >= B) b -= B;
        key->remainder[i] = s ^ (uint32_t)(bk__dl_hash64(b, SALT_G[i]) & rmask);
        key->bucket_bit[i] = ((uint64_t)i * B + b) * bucket_bits;
    }
}

/* Find the key's cell: returns the subtable and sets *cell, or -1. Each
 * bucket's load (occupied cells) goes to loads[] when it is not NULL. */
static int find(const bk_dleft *f, const dleft_key *key, int *cell, int *loads)
{
    const unsigned cb = cell_bits(f), w = f->counter_bits;
    const uint64_t cmask = (UINT64_C(1) << w) - 1;
    int found = -1;
    for (int i = 0; i < TABLES; i++) {
        int load = 0;
        for (int j = 0; j < CELLS; j++) {
            uint64_t v = bk__dl_get_field(f->cells, key->bucket_bit[i] + (uint64_t)j * cb, cb);
            if ((v & cmask) == 0) continue;
            load++;
            if ((uint32_t)(v >> w) == key->remainder[i] && found < 0) {
                found = i;
                *cell = j;
                if (loads == NULL) return found;
            }
        }
        if (loads != NULL) loads[i] = load;
    }
    return found;
}

static inline uint64_t cell_at(const bk_dleft *f, int table, int cell,
                               const dleft_key *key)
{
    return key->bucket_bit[table] + (uint64_t)cell * cell_bits(f);
}

static int add_key(bk_dleft *f, const dleft_key *key)
{
    const unsigned cb = cell_bits(f), w = f->counter_bits;
    const uint64_t cmax = (UINT64_C(1) << w) - 1;
    int loads[TABLES], cell = 0;
    int t = find(f, key, &cell, loads);
    if (t >= 0) {
        uint64_t at = cell_at(f, t, cell, key);
        uint64_t v = bk__dl_get_field(f->cells, at, cb);
        if ((v & cmax) == cmax) {
            f->head.overflows++;
        } else {
            bk__dl_put_field(f->cells, at, cb, v + 1);
        }
        return 0;
    }
    int best = -1;
    for (int i = 0; i < TABLES; i++)
        if (loads[i] < CELLS && (best < 0 || loads[i] < loads[best])) best = i;
    if (best < 0) {
        f->head.overflows++;
        return BK_EFULL;
    }
    for (int j = 0; j < CELLS; j++) {
        uint64_t at = key->bucket_bit[best] + (uint64_t)j * cb;
        if ((bk__dl_get_field(f->cells, at, cb) & cmax) != 0) continue;
        bk__dl_put_field(f->cells, at, cb,
                         ((uint64_t)key->remainder[best] << w) | 1);
        break;
    }
    f->head.items++;
    return 1;
}

static int remove_key(bk_dleft *f, const dleft_key *key)
{
    const unsigned cb = cell_bits(f), w = f->counter_bits;
    const uint64_t cmax = (UINT64_C(1) << w) - 1;
    int cell = 0;
    int t = find(f, key, &cell, NULL);
    if (t < 0) return BK_ENOTFOUND;
    uint64_t at = cell_at(f, t, cell, key);
    uint64_t v = bk__dl_get_field(f->cells, at, cb);
    if ((v & cmax) == cmax) return BK_OK; /* saturated: stays */
    v--;
    if ((v & cmax) == 0) v = 0; /* an empty cell is all zero */
    bk__dl_put_field(f->cells, at, cb, v);
    if (f->head.items > 0) f->head.items--;
    return BK_OK;
}

/*==========================================================================
 * Sizing
 *==========================================================================*/

static double dleft_fpr(double n, double buckets, unsigned remainder_bits)
{
    return 1.0 - pow(1.0 - ldexp(1.0, -(int)remainder_bits), n / buckets);
}

static int dleft_size(uint64_t n, double p, uint32_t counter_bits,
                      uint64_t *buckets, uint32_t *remainder_bits)
{
    if (n == 0) return BK_ECAPACITY;
    if (bk__check_fpr(p) != BK_OK) return BK_EFPR;
    if (counter_bits < 1 || counter_bits > BK_DLEFT_MAX_COUNTER_BITS) return BK_EPARAM;
    double b = ceil((double)n / (TABLES * CELLS * LOAD));
    if (b > (double)BK_DLEFT_MAX_BUCKETS) return BK_ESIZE;
    uint32_t r = 1;
    while (dleft_fpr((double)n, b, r) > p) {
        if (++r + counter_bits > 32) return BK_EPARAM;
    }
    *buckets = (uint64_t)b;
    *remainder_bits = r;
    return BK_OK;
}

/*==========================================================================
 * API
 *==========================================================================*/

static size_t table_bytes(const void *vf)
{
    const bk_dleft *f = vf;
    return (size_t)payload_bytes(f->buckets, cell_bits(f));
}

int bk_dleft_optimal(uint64_t n, double p, uint32_t counter_bits,
                     uint64_t *buckets, uint32_t *remainder_bits)
{
    uint64_t b;
    uint32_t r;
    if (counter_bits == 0) counter_bits = BK_DLEFT_DEFAULT_COUNTER_BITS;
    int rc = dleft_size(n, p, counter_bits, &b, &r);
    if (rc != BK_OK) return rc;
    if (buckets) *buckets = b;
    if (remainder_bits) *remainder_bits = r;
    return BK_OK;
}

int bk_dleft_create(bk_dleft **out, uint64_t capacity, double fpr,
                    uint32_t counter_bits, uint64_t seed)
{
    uint64_t buckets;
    uint32_t r;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (counter_bits == 0) counter_bits = BK_DLEFT_DEFAULT_COUNTER_BITS;
    int rc = dleft_size(capacity, fpr, counter_bits, &buckets, &r);
    if (rc != BK_OK) return rc;
    uint64_t bytes = payload_bytes(buckets, r + counter_bits);
    if (bytes > SIZE_MAX) return BK_ESIZE;
    bk_dleft *f = bk__tf_create(&dleft_family, (size_t)bytes, seed, capacity, fpr);
    if (f == NULL) return BK_ENOMEM;
    f->buckets = buckets;
    f->remainder_bits = r;
    f->counter_bits = counter_bits;
    *out = f;
    return BK_OK;
}

void bk_dleft_free(bk_dleft *f) { bk__tf_free(f); }

uint32_t bk_dleft_remainder_bits(const bk_dleft *f) { return f->remainder_bits; }
uint64_t bk_dleft_buckets(const bk_dleft *f) { return f->buckets; }

static int stats_of(const void *vf, bk_delete_stats *out)
{
    const bk_dleft *f = vf;
    if (f == NULL || out == NULL) return BK_EINVAL;
    const unsigned cb = cell_bits(f);
    const uint64_t cmask = (UINT64_C(1) << f->counter_bits) - 1;
    const uint64_t total = (uint64_t)TABLES * f->buckets * CELLS;
    uint64_t used = 0;
    for (uint64_t c = 0; c < total; c++)
        used += (bk__dl_get_field(f->cells, c * cb, cb) & cmask) != 0;
    bk__tf_stats(&f->head, TABLES, total * cb, sizeof(*f) + table_bytes(f) + BK_CACHE_LINE, out);
    out->fpr_at_capacity =
        f->head.capacity ? dleft_fpr((double)f->head.capacity, (double)f->buckets, f->remainder_bits) : 0.0;
    out->fpr_now = dleft_fpr((double)used, (double)f->buckets, f->remainder_bits);
    return BK_OK;
}

int bk_dleft_get_stats(const bk_dleft *f, bk_delete_stats *out) { return stats_of(f, out); }

/*==========================================================================
 * The generic filter and the file format
 *==========================================================================*/

BK__FAMILY_CASTS(dleft, dleft_family.ops)

static int ops_add(void *vf, bk_hash h)
{
    dleft_key key;
    locate(vf, h, &key);
    return add_key(vf, &key);
}

static int ops_contains(const void *vf, bk_hash h)
{
    dleft_key key;
    int cell;
    locate(vf, h, &key);
    return find(vf, &key, &cell, NULL) >= 0;
}

static int ops_remove(void *vf, bk_hash h)
{
    dleft_key key;
    locate(vf, h, &key);
    return remove_key(vf, &key);
}

static int64_t ops_count(const void *vf, bk_hash h)
{
    const bk_dleft *f = vf;
    dleft_key key;
    int cell = 0;
    locate(f, h, &key);
    int t = find(f, &key, &cell, NULL);
    if (t < 0) return 0;
    uint64_t v = bk__dl_get_field(f->cells, cell_at(f, t, cell, &key), cell_bits(f));
    return (int64_t)(v & ((UINT64_C(1) << f->counter_bits) - 1));
}

static inline void prefetch_key(const bk_dleft *f, const dleft_key *key)
{
    for (int i = 0; i < TABLES; i++)
        BK_PREFETCH_WRITE(f->cells + (key->bucket_bit[i] >> 3));
}

/* Locate ahead and prefetch the d buckets of the key BATCH_AHEAD later. */
static int64_t run_batch(bk_dleft *f, const void *const *keys,
                         const size_t *lens, size_t n, uint8_t *results,
                         int is_add)
{
    dleft_key ring[BATCH_AHEAD];
    int64_t hits = 0;
    size_t ahead = n < BATCH_AHEAD ? n : BATCH_AHEAD;
    for (size_t i = 0; i < ahead; i++) {
        locate(f, bk_hash_key(keys[i], lens[i], f->head.seed), &ring[i]);
        prefetch_key(f, &ring[i]);
    }
    for (size_t i = 0; i < n; i++) {
        dleft_key key = ring[i % BATCH_AHEAD];
        size_t next = i + BATCH_AHEAD;
        if (next < n) {
            locate(f, bk_hash_key(keys[next], lens[next], f->head.seed),
                   &ring[i % BATCH_AHEAD]);
            prefetch_key(f, &ring[i % BATCH_AHEAD]);
        }
        int r, cell;
        if (is_add) {
            r = add_key(f, &key);
            if (r < 0) return r;
        } else {
            r = find(f, &key, &cell, NULL) >= 0;
        }
        hits += r;
        if (results != NULL) results[i] = (uint8_t)r;
    }
    return hits;
}

static int64_t ops_add_batch(void *f, const void *const *keys, const size_t *lens,
                             size_t n, uint8_t *results)
{
    return run_batch(f, keys, lens, n, results, 1);
}

static int64_t ops_contains_batch(const void *f, const void *const *keys,
                                  const size_t *lens, size_t n, uint8_t *results)
{
    /* run_batch writes nothing to f when is_add is 0 */
    return run_batch((bk_dleft *)f, keys, lens, n, results, 0);
}

static void *table_of(const void *f) { return ((const bk_dleft *)f)->cells; }
static void set_table(void *f, void *table) { ((bk_dleft *)f)->cells = table; }

/* info's fill: the keys stored per cell */
static double fill_of(const void *vf, const bk_delete_stats *st)
{
    const bk_dleft *f = vf;
    return (double)st->items / ((double)TABLES * (double)f->buckets * CELLS);
}

static int ops_create(const bk_filter_config *cfg, void **out)
{
    return bk_dleft_create((bk_dleft **)out, cfg->capacity, cfg->fpr,
                           cfg->counter_bits, cfg->seed);
}

/* Image: one part; m = buckets per subtable, k = d (4), width = counter
 * bits w, slots = cells per bucket (8), param = remainder bits r; header
 * param[0] = overflow events. Payload: the padded bit string. */
static int ops_describe(const void *vf, bk__image *img)
{
    const bk_dleft *f = vf;
    bk__part *p = bk__tf_describe(f, img);
    p->m = f->buckets;
    p->k = TABLES;
    p->width = (uint8_t)f->counter_bits;
    p->slots = CELLS;
    p->param = f->remainder_bits;
    return BK_OK;
}

static int ops_restore(const bk__image *img, void **out)
{
    const bk__part *p = &img->parts[0];
    if (!bk__tf_restorable(img)) return BK_ECORRUPT;
    if (p->k != TABLES || p->slots != CELLS || p->width < 1 ||
        p->width > BK_DLEFT_MAX_COUNTER_BITS || p->param < 1 ||
        p->param + p->width > 32 || p->m == 0 || p->m > BK_DLEFT_MAX_BUCKETS)
        return BK_ECORRUPT;
    if (p->length != payload_bytes(p->m, (unsigned)(p->param + p->width)))
        return BK_ECORRUPT;
    bk_dleft *f = bk__tf_adopt(&dleft_family, img, p->data);
    if (f == NULL) return BK_ENOMEM;
    f->buckets = p->m;
    f->remainder_bits = (uint32_t)p->param;
    f->counter_bits = p->width;
    *out = f;
    return BK_OK;
}

static const bk__tf_family dleft_family = {
    .ops = {.family = BK_FAMILY_DLEFT, .name = "dleft", .remove = ops_remove,
            BK__TF_OPS_STANDARD},
    BK__TF_HOOKS_STANDARD(bk_dleft),
    .fill = fill_of,
};

const bk__family_ops *const bk__dleft_family = &dleft_family.ops;
