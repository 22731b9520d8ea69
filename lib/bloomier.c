/*
 * bloomier.c - the static map: a Bloomier filter (Chazelle, Kilian,
 * Rubinfeld & Tal, SODA 2004) built like a binary fuse filter.
 *
 * Structure
 *   A table of array_length cells of w = c + r bits, bit-packed: cell i
 *   occupies bits [i w, i w + w) of a little-endian byte string, followed
 *   by 8 zero bytes so that every cell is read with one unaligned 64-bit
 *   load (w <= 56 keeps a cell inside the 8 bytes from its first byte). A
 *   key's 64-bit hash h names three cells exactly as in the static filter
 *   (peel.h), and construction makes their XOR equal
 *       check(h) | value << c,     check(h) = low c bits of h ^ (h >> 32).
 *   A lookup XORs the three cells, compares the low c bits with check(h)
 *   and returns the high r bits.
 *
 * Guarantees
 *   A key of the map always passes the check and gets exactly its value:
 *   the XOR identity holds for every peeled key by construction, and
 *   construction fails rather than leave a key unpeeled. A key not in the
 *   map passes the check with probability 2^-c (its three cells XOR to a
 *   value independent of its check bits) and then gets an arbitrary value.
 *   Space: ~1.125 (r + c) bits per key from 10^6 keys up; the check costs
 *   1.125 c of them (c = 7: 7.9 bits per key for 0.78%).
 *
 * Construction (peel.c)
 *   As for the static filter, with each cell also XORing its keys' values;
 *   equal keys with equal values are stored once, with different values
 *   the build fails with BK_ECONFLICT and the index of one of them. Bounded
 *   retries with derived seeds (BK_EBUILD). Temporary memory
 *   bk_map_build_memory(n): ~22 bytes per key.
 *
 * What it cannot do
 *   Change: adding, removing or updating a key is a rebuild (BK_ESTATIC
 *   through the generic handle). Lookups only read: thread-safe.
 */
#include <math.h>   /* ldexp */
#include <string.h> /* memcpy, memset */

#include "filter.h"
#include "hash.h"
#include "peel.h"

/*==========================================================================
 * Types
 *==========================================================================*/

struct bk_map {
    bk__object obj;         /* first: a bk_map is also a bk_filter */
    bk__fuse_table t;       /* width: r + c; the cells are followed by
                               PADDING zero bytes */
    uint32_t value_bits;    /* r */
    uint32_t check_bits;    /* c */
    uint64_t cell_mask;     /* 2^w - 1 */
};

static const bk__family_ops map_ops; /* at the end of this file */

#define PADDING 8

/*==========================================================================
 * Internals
 *==========================================================================*/

static inline uint64_t check_of(uint64_t h)
{
    return h ^ (h >> 32);
}

static size_t table_bytes(const bk__fuse_shape *s, uint32_t width)
{
    return bk__fuse_table_bytes(s, width, PADDING);
}

static inline uint64_t load_cell(const bk_map *m, uint32_t i)
{
    uint64_t bit = (uint64_t)i * m->t.width;
    uint64_t word;
    memcpy(&word, (const unsigned char *)m->t.cells + (bit >> 3), sizeof(word)); /* little-endian host */
    return (word >> (bit & 7)) & m->cell_mask;
}

/* XOR v (at most w bits) into cell i. */
static inline void xor_cell(bk_map *m, uint32_t i, uint64_t v)
{
    uint64_t bit = (uint64_t)i * m->t.width;
    uint64_t word;
    unsigned char *at = (unsigned char *)m->t.cells + (bit >> 3);
    memcpy(&word, at, sizeof(word));
    word ^= v << (bit & 7);
    memcpy(at, &word, sizeof(word));
}

/* The value of the key of hash h, whose cells are c: 1 and *value when its
 * check bits match, else 0. */
static inline int get_cells(const bk_map *m, uint64_t h, const uint32_t c[3], uint32_t *value)
{
    if (BK_UNLIKELY(m->t.items == 0)) return 0;
    uint64_t x = load_cell(m, c[0]) ^ load_cell(m, c[1]) ^ load_cell(m, c[2]);
    uint64_t check_mask = (UINT64_C(1) << m->check_bits) - 1;
    if ((x & check_mask) != (check_of(h) & check_mask)) return 0;
    if (value != NULL) *value = (uint32_t)(x >> m->check_bits);
    return 1;
}

static inline int get_hash(const bk_map *m, bk_hash key_hash, uint32_t *value)
{
    uint32_t c[3];
    bk__fuse_cells(&m->t.shape, key_hash.lo, c);
    return get_cells(m, key_hash.lo, c, value);
}

static void assign(bk_map *m, const bk__peel *p)
{
    uint64_t check_mask = (UINT64_C(1) << m->check_bits) - 1;
    for (uint64_t i = p->peeled; i-- > 0;) {
        uint32_t lone = p->stack[i];
        uint64_t h = bk__peel_hash(p, lone);
        uint64_t want = (check_of(h) & check_mask) |
                        ((uint64_t)bk__peel_value(p, lone) << m->check_bits);
        uint32_t c[3];
        bk__fuse_cells(&m->t.shape, h, c);
        /* the lone cell is still 0: XOR of all three = XOR of the others */
        uint64_t have = load_cell(m, c[0]) ^ load_cell(m, c[1]) ^ load_cell(m, c[2]);
        xor_cell(m, lone, want ^ have);
    }
}

static void set_widths(bk_map *m, uint32_t value_bits, uint32_t check_bits)
{
    m->value_bits = value_bits;
    m->check_bits = check_bits;
    m->t.width = value_bits + check_bits;
    m->cell_mask = (UINT64_C(1) << m->t.width) - 1;
}

/* The index of a key whose hash under `seed` is h (a conflict report). */
static uint64_t find_key(const void *const *keys, const size_t *lens,
                         uint64_t n, uint64_t seed, uint64_t h)
{
    for (uint64_t i = n; i-- > 0;)
        if (bk_hash_key(keys[i], lens[i], seed).lo == h) return i;
    return 0;
}

/*==========================================================================
 * API: construction
 *==========================================================================*/

uint64_t bk_map_build_memory(uint64_t n)
{
    return bk__peel_temp_bytes(n, 1);
}

int bk_map_build(bk_map **out, const void *const *keys, const size_t *lens,
                 const uint32_t *values, uint64_t n, uint32_t value_bits,
                 uint32_t check_bits, uint64_t seed, uint64_t *conflict)
{
    bk__peel p;
    bk_map *m = NULL;
    int rc;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (n > 0 && (keys == NULL || lens == NULL || values == NULL)) return BK_EINVAL;
    if (value_bits < 1 || value_bits > BK_MAP_MAX_VALUE_BITS ||
        check_bits > BK_MAP_MAX_CHECK_BITS)
        return BK_EPARAM;
    if (value_bits < 32) {
        for (uint64_t i = 0; i < n; i++) {
            if (values[i] >> value_bits) {
                if (conflict) *conflict = i;
                return BK_EPARAM;
            }
        }
    }
    if (n > SIZE_MAX / sizeof(uint64_t)) return BK_ESIZE;
    bk__fuse_shape most;
    rc = bk__fuse_shape_for(n, &most);
    if (rc != BK_OK) return rc;
    rc = bk__peel_alloc(&p, n, most.array_length, 1);
    if (rc != BK_OK) return rc;
    m = bk__calloc(1, sizeof(*m));
    if (m == NULL) { rc = BK_ENOMEM; goto fail; }
    bk__object_init(&m->obj, &map_ops);
    set_widths(m, value_bits, check_bits);

    uint64_t conflict_hash = 0;
    rc = bk__fuse_table_build(&m->t, &p, PADDING, keys, lens, values, n, seed, &most,
                              &conflict_hash);
    if (rc == BK_ECONFLICT && conflict)
        *conflict = find_key(keys, lens, n, m->t.seed, conflict_hash);
    if (rc != BK_OK) goto fail;
    assign(m, &p);
    bk__peel_free(&p);
    *out = m;
    return BK_OK;

fail:
    bk__peel_free(&p);
    bk_map_free(m);
    return rc;
}

void bk_map_free(bk_map *m)
{
    if (m == NULL) return;
    bk__fuse_table_release(&m->t);
    bk__object_release(&m->obj);
    bk__free(m);
}

/*==========================================================================
 * API: lookups
 *==========================================================================*/

int bk_map_get_hash(const bk_map *m, bk_hash h, uint32_t *value)
{
    return get_hash(m, h, value);
}

int bk_map_get(const bk_map *m, const void *key, size_t len, uint32_t *value)
{
    return get_hash(m, bk_hash_key(key, len, m->t.seed), value);
}

int64_t bk_map_get_batch(const bk_map *m, const void *const *keys,
                         const size_t *lens, size_t n, uint32_t *values,
                         uint8_t *found)
{
    bk__fuse_probe ring[BK__FUSE_BATCH_AHEAD];
    const size_t window = BK__FUSE_BATCH_AHEAD;
    int64_t hits = 0;
    if (m == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    size_t ahead = n < window ? n : window;
    for (size_t i = 0; i < ahead; i++)
        ring[i] = bk__fuse_probe_of(&m->t.shape, bk_hash_key(keys[i], lens[i], m->t.seed).lo,
                                    m->t.cells, m->t.width);
    for (size_t i = 0; i < n; i++) {
        bk__fuse_probe p = ring[i % window];
        size_t next = i + window;
        if (next < n)
            ring[i % window] = bk__fuse_probe_of(
                &m->t.shape, bk_hash_key(keys[next], lens[next], m->t.seed).lo, m->t.cells, m->t.width);
        uint32_t v = 0;
        int r = get_cells(m, p.h, p.c, &v);
        hits += r;
        if (found != NULL) found[i] = (uint8_t)r;
        if (values != NULL) values[i] = r ? v : 0;
    }
    return hits;
}

/*==========================================================================
 * API: statistics
 *==========================================================================*/

uint64_t bk_map_seed(const bk_map *m) { return m->t.seed; }
uint64_t bk_map_items(const bk_map *m) { return m->t.items; }

static double check_fpr(const bk_map *m)
{
    if (m->t.items == 0 || m->check_bits == 0) return 0.0;
    return ldexp(1.0, -(int)m->check_bits);
}

int bk_map_get_stats(const bk_map *m, bk_map_stats *out)
{
    if (m == NULL || out == NULL) return BK_EINVAL;
    memset(out, 0, sizeof(*out));
    out->items = m->t.items;
    out->duplicates = m->t.duplicates;
    out->value_bits = m->value_bits;
    out->check_bits = m->check_bits;
    out->cells = m->t.shape.array_length;
    out->segment_length = m->t.shape.segment_length;
    out->seed = m->t.seed;
    out->fpr = m->t.items == 0 ? 0.0 : ldexp(1.0, -(int)m->check_bits);
    if (m->t.items) {
        double cells = (double)m->t.shape.array_length, items = (double)m->t.items;
        out->bits_per_key = cells * m->t.width / items;
        out->value_bits_per_key = cells * m->value_bits / items;
        out->check_bits_per_key = cells * m->check_bits / items;
    }
    out->attempts = m->t.attempts;
    out->build_memory = m->t.temp_bytes;
    out->bytes = sizeof(*m) + bk__aligned_asked(table_bytes(&m->t.shape, m->t.width));
    return BK_OK;
}

/*==========================================================================
 * The generic filter and the file format
 *
 * Image: one part; part.m = cells, part.k = 3, part.width = r + c,
 * part.param = segment length; header param[0] = r, param[1] = c; items =
 * capacity = distinct keys; target fpr 2^-c (0 when c = 0 or the map is
 * empty). Payload: the packed cells, then 8 zero bytes.
 *==========================================================================*/

BK__FAMILY_CASTS(map, map_ops)

static int ops_add(void *f, bk_hash h)
{
    (void)f;
    (void)h;
    return BK_ESTATIC;
}

static int ops_contains(const void *f, bk_hash h) { return get_hash(f, h, NULL); }

static int64_t ops_contains_batch(const void *f, const void *const *keys,
                                  const size_t *lens, size_t n, uint8_t *results)
{
    return bk_map_get_batch(f, keys, lens, n, NULL, results);
}

static uint64_t ops_seed(const void *f) { return ((const bk_map *)f)->t.seed; }
static void ops_destroy(void *f) { bk_map_free(f); }
static uint32_t ops_nparts(const void *f) { (void)f; return 1; }

static int ops_create(const bk_filter_config *cfg, void **out)
{
    (void)cfg;
    (void)out;
    return BK_ESTATIC; /* built from its pairs: bk_map_build */
}

static int ops_info(const void *vf, bk_filter_info *out)
{
    const bk_map *m = vf;
    bk__static_info(m->t.seed, m->t.items, check_fpr(m),
                    m->t.items ? ldexp(1.0, -(int)m->check_bits) : 0.0,
                    m->t.shape.array_length, sizeof(*m) + table_bytes(&m->t.shape, m->t.width), 1,
                    out);
    return BK_OK;
}

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_map *m = vf;
    bk__fuse_table_describe(&m->t, PADDING, check_fpr(m), img);
    img->param[0] = m->value_bits;
    img->param[1] = m->check_bits;
    return BK_OK;
}

static int ops_restore(const bk__image *img, void **out)
{
    bk__fuse_table t;
    uint64_t r = img->param[0], c = img->param[1];
    if (r < 1 || r > BK_MAP_MAX_VALUE_BITS || c > BK_MAP_MAX_CHECK_BITS ||
        img->param[2] != 0 || img->param[3] != 0)
        return BK_ECORRUPT;
    double fpr = (img->items == 0 || c == 0) ? 0.0 : ldexp(1.0, -(int)c);
    if (bk__fuse_table_restore(img, PADDING, fpr, &t) != BK_OK || t.width != r + c)
        return BK_ECORRUPT;
    /* canonical: the bits after the last cell and the padding are zero */
    const unsigned char *bytes = t.cells;
    uint64_t length = table_bytes(&t.shape, t.width);
    uint64_t used_bits = (uint64_t)t.shape.array_length * t.width;
    if ((used_bits & 7) != 0 && (bytes[used_bits >> 3] >> (used_bits & 7)) != 0)
        return BK_ECORRUPT;
    for (uint64_t i = (used_bits + 7) / 8; i < length; i++)
        if (bytes[i] != 0) return BK_ECORRUPT;

    bk_map *m = bk__calloc(1, sizeof(*m));
    if (m == NULL) return BK_ENOMEM;
    bk__object_init(&m->obj, &map_ops);
    m->t = t;
    set_widths(m, (uint32_t)r, (uint32_t)c);
    *out = m;
    return BK_OK;
}

/* The handle and, unless borrowed from a loaded block or a mapping, the
 * cells. */
static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_map *m = vf;
    bk__fuse_table_allocations(&m->t, PADDING, m, sizeof(*m), visit, ctx);
}

static const bk__family_ops map_ops = {
    .family = BK_FAMILY_MAP,
    .name = "map",
    BK__OPS_STANDARD,
    .add_batch = bk__static_add_batch, .contains_batch = ops_contains_batch,
    /* no clone: one goes through the file format (filter.c) */
};

const bk__family_ops *const bk__map_family = &map_ops;
