/*
 * peel.h - the 3-hypergraph shared by the static filter (fuse.c) and the
 * static map (bloomier.c): binary fuse geometry, and construction by
 * peeling. Not installed.
 *
 * Geometry (Graf & Lemire, "Binary Fuse Filters: Fast and Smaller Than Xor
 * Filters", JEA 2022). The table of array_length cells is cut into
 * segments of segment_length cells (a power of two). A 64-bit key hash h
 * picks a first segment s in [0, segment_count) by fast range of h over
 * segment_count * segment_length, and its three cells are
 *     p0 = fastrange(h, segment_count * segment_length)
 *     p1 = (p0 + L) ^ ((h >> 18) & (L - 1))
 *     p2 = (p0 + 2L) ^ (h & (L - 1))
 * with L = segment_length: one cell in each of three consecutive segments
 * (XOR with a value below L stays inside the segment, since segments start
 * at multiples of L). The three cells are therefore always distinct. With
 * n keys the paper's parameters for three cells per key are
 *     L = 2^floor(ln n / ln 3.33 + 2.25)  (at most 2^18)
 *     cells ~ n * max(1.125, 0.875 + 0.25 ln(10^6) / ln n),
 * rounded up to whole segments, and peeling then succeeds with high
 * probability (a failed attempt is retried with another seed).
 *
 * Peeling. Every key is an edge joining its three cells. A cell that holds
 * exactly one key can be solved last: whatever its two other cells hold,
 * this cell can be set so that the XOR of the three is the key's
 * fingerprint (or value). So we repeatedly remove such a key, push its lone
 * cell on a stack, and assign cells in reverse stack order. Each cell keeps
 * a key count and the XOR of its keys' hashes; when the count is 1 the XOR
 * is that key's hash, so no key list is needed.
 *
 * Duplicates. Hashes are sorted first (MSD radix, in place): the sort
 * gives the first pass a sequential sweep over the segments (cache
 * friendly) and puts equal hashes side by side, where they are removed
 * (a set) or compared by value (a map). Two distinct keys with the same
 * 64-bit hash (probability ~ n^2 / 2^65) are treated as one key.
 *
 * Temporary memory: the n hashes (8 bytes each, reused as the peeling
 * stack), and per cell a count (1 byte), a hash XOR (8 bytes) and a queue
 * entry (4 bytes): 8 n + 13 cells bytes, ~22.6 bytes per key at 1.125
 * cells per key. A map keeps the values too (4 bytes per key), so its cells
 * hold the XOR of their keys' *indexes* into the sorted arrays (4 bytes)
 * instead of their hashes: a lone cell names its key, whose hash and
 * value are then read from the arrays, which stay intact until the
 * assignment. Its queue and stack share one array of cells + 1 entries
 * (stack from the front, queue from the back: every cell is queued at
 * most once and every queue entry becomes at most one stack entry, so they
 * never meet): 12 n + 9 cells bytes, ~22.1 bytes per key.
 */
#ifndef BK_PEEL_H
#define BK_PEEL_H

#include "filter.h"

/* Largest segment length (the paper's cap), and cells per table: cell
 * indexes are 32-bit. */
#define BK__FUSE_MAX_SEGMENT (UINT32_C(1) << 18)
#define BK__FUSE_MAX_CELLS UINT64_C(0xF0000000)

typedef struct bk__fuse_shape {
    uint32_t segment_length;       /* L, a power of two */
    uint32_t segment_mask;         /* L - 1 */
    uint32_t segment_count;        /* segments a first cell may lie in */
    uint32_t segment_count_length; /* segment_count * L */
    uint32_t array_length;         /* cells: (segment_count + 2) * L */
} bk__fuse_shape;

/* The shape for n distinct keys. BK_ESIZE when the table would exceed
 * BK__FUSE_MAX_CELLS. */
BK_HIDDEN int bk__fuse_shape_for(uint64_t n, bk__fuse_shape *s);

/* The shape of a stored (segment_length, array_length); BK_ECORRUPT when
 * they are not a valid pair. */
BK_HIDDEN int bk__fuse_shape_from(uint64_t segment_length,
                                  uint64_t array_length, bk__fuse_shape *s);

static inline void bk__fuse_cells(const bk__fuse_shape *s, uint64_t h,
                                  uint32_t cell[3])
{
    uint64_t p0 = bk__fastrange64(h, s->segment_count_length);
    uint64_t p1 = p0 + s->segment_length;
    uint64_t p2 = p1 + s->segment_length;
    p1 ^= (h >> 18) & s->segment_mask;
    p2 ^= h & s->segment_mask;
    cell[0] = (uint32_t)p0;
    cell[1] = (uint32_t)p1;
    cell[2] = (uint32_t)p2;
}

/* Keys a batch lookup hashes ahead of their tests (static filter and map):
 * three lines each, so 32 keys keep up to 96 line fetches asked for (16
 * measured 38-40 ns per key at 1e8, 32 36-38; bench/HISTORY.md section
 * 13). */
#define BK__FUSE_BATCH_AHEAD 32

/* A key of a batch: its hash and its three cells, located once; the cells'
 * lines in `table` (cells of `width` bits) are prefetched. */
typedef struct bk__fuse_probe {
    uint64_t h;
    uint32_t c[3];
} bk__fuse_probe;

static inline bk__fuse_probe bk__fuse_probe_of(const bk__fuse_shape *s, uint64_t h,
                                               const void *table, uint32_t width)
{
    bk__fuse_probe p;
    p.h = h;
    bk__fuse_cells(s, h, p.c);
    for (int j = 0; j < 3; j++)
        BK_PREFETCH_READ((const unsigned char *)table + ((uint64_t)p.c[j] * width >> 3));
    return p;
}

/* The state of one construction: built by bk__peel_run, read by the
 * family's assignment loop (through bk__peel_hash / bk__peel_value),
 * released by bk__peel_free. */
typedef struct bk__peel {
    uint64_t *hashes;   /* n sorted, deduplicated hashes; then the stack */
    uint32_t *values;   /* maps: the values, parallel to hashes; else NULL */
    uint64_t n;         /* distinct hashes */
    uint64_t duplicates;/* hashes removed as duplicates */
    uint8_t *count;     /* per cell: keys still attached (255: overflow) */
    uint64_t *xor_hash; /* sets, per cell: XOR of the attached keys' hashes */
    uint32_t *xor_index;/* maps, per cell: XOR of the attached keys' indexes */
    uint32_t *queue;    /* cells holding one key (maps: cells + 1 entries,
                           the stack at its front) */
    uint32_t cells_room;/* cells the arrays were allocated for */
    uint32_t *stack;    /* lone cells in peeling order (sets: aliases
                           hashes; maps: the front of queue) */
    uint64_t peeled;    /* stack entries */
    size_t temp_bytes;  /* everything above, for the caller's report */
} bk__peel;

/* The hash and value of the key peeled from lone cell c (the cell keeps
 * them: only the key's two other cells are updated when it leaves). */
static inline uint64_t bk__peel_hash(const bk__peel *p, uint32_t c)
{
    return p->xor_index != NULL ? p->hashes[p->xor_index[c]] : p->xor_hash[c];
}

static inline uint32_t bk__peel_value(const bk__peel *p, uint32_t c)
{
    return p->values[p->xor_index[c]];
}

/* Allocate the work space for up to n keys and `cells` cells (with values
 * when with_values). BK_ENOMEM leaves p empty. */
BK_HIDDEN int bk__peel_alloc(bk__peel *p, uint64_t n, uint32_t cells,
                             int with_values);
BK_HIDDEN void bk__peel_free(bk__peel *p);

/* Sort p->hashes[0..n) (and values alongside) and remove duplicates,
 * setting p->n. For a map, equal hashes with different values are a
 * conflict: returns BK_ECONFLICT with *conflict_hash set. */
BK_HIDDEN int bk__peel_sort_dedupe(bk__peel *p, uint64_t n,
                                   uint64_t *conflict_hash);

/* Peel the sorted hashes on shape s. Returns 1 when every key was peeled
 * (the stack then holds p->n cells), 0 when this seed failed. */
BK_HIDDEN int bk__peel_run(bk__peel *p, const bk__fuse_shape *s);

/* The search for a seed that peels, shared by both families: attempt a =
 * 0, 1, ... hashes every key with bk__peel_attempt_seed(seed, a) (copying
 * values[] alongside when given), sorts and deduplicates, shapes the table
 * for the distinct keys (never larger than *most, the shape of n keys) and
 * peels. BK_OK with the peel in p and *shape, *used_seed set;
 * BK_ECONFLICT (a map's key with two values: *conflict_hash, *used_seed);
 * BK_EBUILD after BK__PEEL_MAX_ATTEMPTS failures; or another error.
 * *attempts counts the attempts made in every case. */
BK_HIDDEN int bk__peel_search(bk__peel *p, const void *const *keys,
                              const size_t *lens, const uint32_t *values,
                              uint64_t n, uint64_t seed,
                              const bk__fuse_shape *most, bk__fuse_shape *shape,
                              uint64_t *used_seed, uint32_t *attempts,
                              uint64_t *conflict_hash);

/* Bytes of temporary memory a construction of n keys takes. */
BK_HIDDEN uint64_t bk__peel_temp_bytes(uint64_t n, int with_values);

/* The seed of construction attempt `attempt` (0 = the caller's seed). */
static inline uint64_t bk__peel_attempt_seed(uint64_t seed, uint32_t attempt)
{
    uint64_t z = seed + (uint64_t)attempt * UINT64_C(0x9E3779B97F4A7C15);
    if (attempt == 0) return seed;
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Attempts before a construction gives up (BK_EBUILD). Each fails with
 * probability well under 1/2 at every size, so 64 failures in a row mean
 * something other than bad luck. */
#define BK__PEEL_MAX_ATTEMPTS 64

/*--------------------------------------------------------------------------
 * The table of a static family built by peeling: the static filter
 * (fuse.c, fingerprints of 8, 12 or 16 bits) and the static map
 * (bloomier.c, value and check bits, then 8 zero bytes). Both keep the same
 * fields, size, describe, restore and account for them the same way; each
 * keeps what its cells mean. Nothing here is on a key's path.
 *--------------------------------------------------------------------------*/

typedef struct bk__fuse_table {
    bk__fuse_shape shape;
    uint32_t width;         /* bits a cell */
    void *cells;            /* array_length packed cells, 64-byte aligned */
    int owns_cells;         /* 0 when they live in a loaded block or mapping */
    uint64_t seed;          /* of the key hash (the successful attempt's) */
    uint64_t items;         /* distinct keys */
    uint64_t duplicates;    /* keys dropped as duplicates at construction */
    uint32_t attempts;      /* construction attempts (0 when loaded) */
    uint64_t temp_bytes;    /* construction's temporary memory (0 when loaded) */
} bk__fuse_table;

/* Bytes of a table of cells of `width` bits on shape s, and `padding` zero
 * bytes after them. */
static inline size_t bk__fuse_table_bytes(const bk__fuse_shape *s, uint32_t width,
                                          uint32_t padding)
{
    return (size_t)(((uint64_t)s->array_length * width + 7) / 8) + padding;
}

/* The construction after bk__peel_alloc (t->width set): search for a seed
 * that peels (values[] alongside for a map), then allocate the zeroed
 * cells; the caller assigns them from p and frees p. Errors as
 * bk__peel_search, or BK_ENOMEM. */
BK_HIDDEN int bk__fuse_table_build(bk__fuse_table *t, bk__peel *p, uint32_t padding,
                                   const void *const *keys, const size_t *lens,
                                   const uint32_t *values, uint64_t n, uint64_t seed,
                                   const bk__fuse_shape *most, uint64_t *conflict_hash);

/* Free the cells when they are the table's own. */
BK_HIDDEN void bk__fuse_table_release(bk__fuse_table *t);

/* The image of a table: header and part 0 (items = capacity, the rate
 * `fpr`); the family adds its header params. */
BK_HIDDEN void bk__fuse_table_describe(const bk__fuse_table *t, uint32_t padding,
                                       double fpr, bk__image *img);

/* Check an image's one part as a table with `padding` bytes after its
 * cells whose stored rate must be `fpr`, and set *t to borrow its cells
 * (construction fields 0). BK_ECORRUPT on any mismatch: the family checks
 * its header params, the width and the bits past the last cell itself. */
BK_HIDDEN int bk__fuse_table_restore(const bk__image *img, uint32_t padding, double fpr,
                                     bk__fuse_table *t);

/* The generic info of a static filter or map (fuse.c, bloomier.c,
 * bumped.c): `items` keys in `cells` cells (or rows), which is also its
 * capacity and its estimate; one rate now and at capacity; `bytes` in all. */
BK_HIDDEN void bk__static_info(uint64_t seed, uint64_t items, double target_fpr, double fpr,
                               double cells, size_t bytes, uint32_t parts,
                               bk_filter_info *out);

/* The handle of handle_size bytes and, unless borrowed, the cells. */
BK_HIDDEN void bk__fuse_table_allocations(const bk__fuse_table *t, uint32_t padding,
                                          const void *handle, size_t handle_size,
                                          bk__visit_fn visit, void *ctx);

/* What a static family's ops table says to adds (BK_ESTATIC): it is built
 * once from its keys (fuse.c, bloomier.c, bumped.c). */
BK_HIDDEN int64_t bk__static_add_batch(void *f, const void *const *keys, const size_t *lens,
                                       size_t n, uint8_t *results);

#endif /* BK_PEEL_H */
