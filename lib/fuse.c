/*
 * fuse.c - the static filter: a binary fuse filter (Graf & Lemire, "Binary
 * Fuse Filters: Fast and Smaller Than Xor Filters", JEA 2022).
 *
 * Structure
 *   A table of array_length w-bit fingerprints (w = 8, 12 or 16), built once
 *   from the whole key set. A key's 64-bit hash h (the low half of XXH3-128
 *   with the filter's seed) names three cells, one in each of three
 *   consecutive segments (geometry in peel.h), and its fingerprint
 *   fp(h) = low w bits of h ^ (h >> 32). Construction chooses the cells'
 *   contents so that for every key T[c0] ^ T[c1] ^ T[c2] = fp(h); a lookup
 *   reads the three cells and compares. Memory: about 1.125 w bits per key
 *   at 10^6 keys and beyond (more for small sets, where segments are
 *   coarse), against 1.44 log2(1/p) for a Bloom filter.
 *
 * False positives
 *   An absent key's three cells XOR to a value independent of its
 *   fingerprint, so it matches with probability 2^-w: 0.39% at w = 8,
 *   0.0015% at w = 16. There are never false negatives.
 *
 * Construction (peel.c)
 *   Hash every key, sort the hashes (duplicates removed), peel the
 *   3-hypergraph, assign cells in reverse peeling order. Peeling fails
 *   with small probability; the attempt is then repeated with a new seed,
 *   at most BK__PEEL_MAX_ATTEMPTS times (then BK_EBUILD, never a hang).
 *   Temporary memory is bk_static_build_memory(n): ~22.6 bytes per key.
 *
 * What it cannot do
 *   Add or remove keys after construction (BK_ESTATIC): rebuild it from
 *   the new set. Lookups only read, so any number of threads may look up
 *   at once, and a mapped file is used in place.
 */
#include <math.h>   /* ldexp */
#include <string.h> /* memset */

#include "filter.h"
#include "hash.h"
#include "peel.h"

/*==========================================================================
 * Types
 *==========================================================================*/

struct bk_static {
    bk__object obj;         /* first: a bk_static is also a bk_filter */
    bk__fuse_table t;       /* width: fingerprint bits, 8, 12 or 16 */
};

static const bk__family_ops static_ops; /* at the end of this file */


/*==========================================================================
 * Internals
 *==========================================================================*/

static inline uint64_t fingerprint(uint64_t h)
{
    return h ^ (h >> 32);
}

/* 12-bit cells are packed two to three bytes: cell i is bits
 * [12 i, 12 i + 12) of the little-endian byte string, read with one
 * 16-bit load at byte 3i/2 (the cell starts at bit 0 or 4 of it). */
static inline uint32_t load12(const unsigned char *t, uint32_t i)
{
    uint16_t word;
    memcpy(&word, t + ((size_t)i * 3 >> 1), sizeof(word)); /* little-endian host */
    return (uint32_t)(word >> ((i & 1) * 4)) & 0xFFF;
}

static inline void xor12(unsigned char *t, uint32_t i, uint32_t v)
{
    uint16_t word;
    memcpy(&word, t + ((size_t)i * 3 >> 1), sizeof(word));
    word ^= (uint16_t)(v << ((i & 1) * 4));
    memcpy(t + ((size_t)i * 3 >> 1), &word, sizeof(word));
}

/* Whether the key of hash h, whose cells are c, passes. */
static inline int contains_cells(const bk_static *f, uint64_t h, const uint32_t c[3])
{
    if (f->t.width == 8) {
        const uint8_t *t = f->t.cells;
        return (uint8_t)fingerprint(h) == (uint8_t)(t[c[0]] ^ t[c[1]] ^ t[c[2]]) &&
               f->t.items != 0;
    }
    if (f->t.width == 12) {
        const unsigned char *t = f->t.cells;
        return (fingerprint(h) & 0xFFF) == (load12(t, c[0]) ^ load12(t, c[1]) ^ load12(t, c[2])) &&
               f->t.items != 0;
    }
    const uint16_t *t = f->t.cells;
    return (uint16_t)fingerprint(h) == (uint16_t)(t[c[0]] ^ t[c[1]] ^ t[c[2]]) &&
           f->t.items != 0;
}

static inline int contains_hash(const bk_static *f, bk_hash key_hash)
{
    uint32_t c[3];
    bk__fuse_cells(&f->t.shape, key_hash.lo, c);
    return contains_cells(f, key_hash.lo, c);
}

static inline bk__fuse_probe probe_key(const bk_static *f, const void *key, size_t len)
{
    return bk__fuse_probe_of(&f->t.shape, bk_hash_key(key, len, f->t.seed).lo, f->t.cells, f->t.width);
}

/* The cells are packed, with nothing after them. */
#define PADDING 0

/* The rate of a table of items keys, w-bit fingerprints: 2^-w. */
static double fpr_of(uint64_t items, uint32_t width)
{
    return items ? ldexp(1.0, -(int)width) : 0.0;
}

/* Fill the table from a completed peel: reverse stack order, each lone
 * cell set so that its key's three cells XOR to the fingerprint (the lone
 * cell is still 0, so XORing all three is the same as XORing the other
 * two). */
static void assign(bk_static *f, const bk__peel *p)
{
    const bk__fuse_shape *s = &f->t.shape;
    for (uint64_t i = p->peeled; i-- > 0;) {
        uint32_t lone = p->stack[i];
        uint64_t h = bk__peel_hash(p, lone);
        uint32_t c[3];
        bk__fuse_cells(s, h, c);
        if (f->t.width == 8) {
            uint8_t *t = f->t.cells;
            t[lone] = (uint8_t)(fingerprint(h) ^ t[c[0]] ^ t[c[1]] ^ t[c[2]]);
        } else if (f->t.width == 12) {
            unsigned char *t = f->t.cells;
            uint32_t have = load12(t, c[0]) ^ load12(t, c[1]) ^ load12(t, c[2]);
            xor12(t, lone, ((uint32_t)fingerprint(h) ^ have) & 0xFFF);
        } else {
            uint16_t *t = f->t.cells;
            t[lone] = (uint16_t)(fingerprint(h) ^ t[c[0]] ^ t[c[1]] ^ t[c[2]]);
        }
    }
}

/*==========================================================================
 * API: construction
 *==========================================================================*/

uint64_t bk_static_build_memory(uint64_t n)
{
    return bk__peel_temp_bytes(n, 0);
}

int bk_static_build(bk_static **out, const void *const *keys,
                    const size_t *lens, uint64_t n, uint32_t fingerprint_bits,
                    uint64_t seed)
{
    bk__peel p;
    bk_static *f = NULL;
    int rc;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (n > 0 && (keys == NULL || lens == NULL)) return BK_EINVAL;
    if (fingerprint_bits != 8 && fingerprint_bits != 12 && fingerprint_bits != 16)
        return BK_EPARAM;
    if (n > SIZE_MAX / sizeof(uint64_t)) return BK_ESIZE;

    /* The largest table is that of n distinct keys; duplicates only shrink
     * it, so allocate for n and rebuild the shape after deduplication. */
    bk__fuse_shape most;
    rc = bk__fuse_shape_for(n, &most);
    if (rc != BK_OK) return rc;
    rc = bk__peel_alloc(&p, n, most.array_length, 0);
    if (rc != BK_OK) return rc;
    f = bk__calloc(1, sizeof(*f));
    if (f == NULL) { rc = BK_ENOMEM; goto fail; }
    bk__object_init(&f->obj, &static_ops);
    f->t.width = fingerprint_bits;
    rc = bk__fuse_table_build(&f->t, &p, PADDING, keys, lens, NULL, n, seed, &most, NULL);
    if (rc != BK_OK) goto fail;
    assign(f, &p);
    bk__peel_free(&p);
    *out = f;
    return BK_OK;

fail:
    bk__peel_free(&p);
    bk_static_free(f);
    return rc;
}

void bk_static_free(bk_static *f)
{
    if (f == NULL) return;
    bk__fuse_table_release(&f->t);
    bk__object_release(&f->obj);
    bk__free(f);
}

/*==========================================================================
 * API: lookups
 *==========================================================================*/

int bk_static_contains_hash(const bk_static *f, bk_hash h)
{
    return contains_hash(f, h);
}

int bk_static_contains(const bk_static *f, const void *key, size_t len)
{
    return contains_hash(f, bk_hash_key(key, len, f->t.seed));
}

int64_t bk_static_contains_batch(const bk_static *f, const void *const *keys,
                                 const size_t *lens, size_t n,
                                 uint8_t *results)
{
    bk__fuse_probe ring[BK__FUSE_BATCH_AHEAD];
    int64_t hits = 0;
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    const size_t window = BK__FUSE_BATCH_AHEAD;
    size_t ahead = n < window ? n : window;
    for (size_t i = 0; i < ahead; i++) ring[i] = probe_key(f, keys[i], lens[i]);
    for (size_t i = 0; i < n; i++) {
        bk__fuse_probe p = ring[i % window];
        size_t next = i + window;
        if (next < n) ring[i % window] = probe_key(f, keys[next], lens[next]);
        int r = contains_cells(f, p.h, p.c);
        hits += r;
        if (results != NULL) results[i] = (uint8_t)r;
    }
    return hits;
}

/*==========================================================================
 * API: statistics
 *==========================================================================*/

uint64_t bk_static_seed(const bk_static *f) { return f->t.seed; }
uint64_t bk_static_items(const bk_static *f) { return f->t.items; }

int bk_static_get_stats(const bk_static *f, bk_static_stats *out)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    memset(out, 0, sizeof(*out));
    out->items = f->t.items;
    out->duplicates = f->t.duplicates;
    out->fingerprint_bits = f->t.width;
    out->cells = f->t.shape.array_length;
    out->segment_length = f->t.shape.segment_length;
    out->seed = f->t.seed;
    out->fpr = fpr_of(f->t.items, f->t.width);
    out->bits_per_key = f->t.items ? (double)f->t.shape.array_length * f->t.width /
                                       (double)f->t.items
                                 : 0.0;
    out->attempts = f->t.attempts;
    out->build_memory = f->t.temp_bytes;
    out->bytes = sizeof(*f) + bk__aligned_asked(bk__fuse_table_bytes(&f->t.shape, f->t.width,
                                                                      PADDING));
    return BK_OK;
}

/*==========================================================================
 * The generic filter and the file format
 *
 * Image: one part; part.m = cells, part.k = 3, part.width = fingerprint
 * bits, part.param = segment length; items (distinct keys) and capacity
 * equal, target fpr 2^-w (0 for the empty set), in header and part.
 *==========================================================================*/

BK__FAMILY_CASTS(static, static_ops)

static int ops_add(void *f, bk_hash h)
{
    (void)f;
    (void)h;
    return BK_ESTATIC;
}

static int ops_contains(const void *f, bk_hash h) { return contains_hash(f, h); }

static int64_t ops_contains_batch(const void *f, const void *const *keys,
                                  const size_t *lens, size_t n, uint8_t *results)
{
    return bk_static_contains_batch(f, keys, lens, n, results);
}

static uint64_t ops_seed(const void *f) { return ((const bk_static *)f)->t.seed; }
static void ops_destroy(void *f) { bk_static_free(f); }
static uint32_t ops_nparts(const void *f) { (void)f; return 1; }

static int ops_create(const bk_filter_config *cfg, void **out)
{
    (void)cfg;
    (void)out;
    return BK_ESTATIC; /* built from its keys: bk_static_build */
}

static int ops_info(const void *vf, bk_filter_info *out)
{
    const bk_static *f = vf;
    bk_static_stats st;
    int rc = bk_static_get_stats(f, &st);
    if (rc != BK_OK) return rc;
    bk__static_info(f->t.seed, f->t.items, st.fpr, st.fpr, st.cells, st.bytes, 1, out);
    return BK_OK;
}

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_static *f = vf;
    bk__fuse_table_describe(&f->t, PADDING, fpr_of(f->t.items, f->t.width), img);
    return BK_OK;
}

static int ops_restore(const bk__image *img, void **out)
{
    bk__fuse_table t;
    const bk__part *p = &img->parts[0];
    if (img->nparts != 1 || (p->width != 8 && p->width != 12 && p->width != 16))
        return BK_ECORRUPT;
    for (int i = 0; i < BK__IMAGE_PARAMS; i++)
        if (img->param[i] != 0) return BK_ECORRUPT;
    if (bk__fuse_table_restore(img, PADDING, fpr_of(img->items, p->width), &t) != BK_OK)
        return BK_ECORRUPT;
    /* canonical: the 4 bits after an odd number of 12-bit cells are 0 */
    if (t.width == 12 && (t.shape.array_length & 1) &&
        (((const unsigned char *)t.cells)[p->length - 1] >> 4) != 0)
        return BK_ECORRUPT;

    bk_static *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &static_ops);
    f->t = t;
    *out = f;
    return BK_OK;
}

/* The handle and, unless borrowed from a loaded block or a mapping, the
 * cells. */
static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_static *f = vf;
    bk__fuse_table_allocations(&f->t, PADDING, f, sizeof(*f), visit, ctx);
}

static const bk__family_ops static_ops = {
    .family = BK_FAMILY_STATIC,
    .name = "static",
    BK__OPS_STANDARD,
    .add_batch = bk__static_add_batch, .contains_batch = ops_contains_batch,
    /* no clone: one goes through the file format (filter.c) */
};

const bk__family_ops *const bk__static_family = &static_ops;
