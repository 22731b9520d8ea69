/*
 * hier.c - the hierarchical counting Bloom filter (seed 002): a plain bit
 * layer answers lookups, a counter layer behind it is touched only by adds,
 * removes and counts.
 *
 * Structure
 *   Bit layer: a bk_blocked filter (blocked.c), built and sized by it, so
 *   that lookups, single and batched, run the blocked family's own code
 *   (its SIMD paths included): a key's block is fastrange(lo, blocks) and
 *   its k bits pos_i = (x SALT_i mod 2^32) >> 23, x = the low 32 bits of hi,
 *   SALT_i the upper 32 bits of the i-th splitmix64 output from state 0,
 *   forced odd (blocked.c's documented layout, recomputed here from that
 *   rule). Counter layer: for block b, 512 four-bit counters (256 bytes,
 *   4 cache lines) at the same positions; counter j of a block is nibble
 *   j % 16 of its 64-bit word j / 16.
 *
 *   Invariant: a bit is set exactly when its counter is nonzero. An add
 *   increments the key's counters and sets its bits; a remove first checks
 *   the bits (BK_ENOTFOUND if one is clear), then decrements and clears the
 *   bits whose counters reach zero (writing the blocked filter's words,
 *   reached through bk__blocked_describe_part). A lookup reads the bit
 *   layer only: one cache line and no counter.
 *
 * False positives
 *   Those of the blocked filter (bk_blocked_fpr): 9.9 bits of bit layer per
 *   key at 1%, 15.5 at 0.1%.
 *
 * Overflow
 *   A counter at 15 sticks (never decremented, its bit never cleared): no
 *   false negative, a cell set for ever. Sticking is counted (overflows).
 *   A key whose salts give one bit twice counts that bit twice; count()
 *   divides by the multiplicity.
 *
 * Memory
 *   512 + 2048 bits per block: 5x a blocked Bloom filter. The trade is
 *   lookup traffic (one line, no counters) for memory.
 */
#include <string.h> /* memset, memcpy */

#include "deleting.h"
#include "hash.h"
#include "table_family.h"

/*==========================================================================
 * Types
 *==========================================================================*/

#define BITS_PER_BLOCK 512
#define BLOCK_WORDS 8
#define COUNTER_WORDS 32 /* 512 counters x 4 bits */
#define COUNTER_MAX 15

struct bk_hier {
    bk__tf_head head;    /* first: a bk_hier is also a bk_filter; owns_mem
                            is for the counters (the layer frees its own
                            words) */
    bk_blocked *layer;   /* the bit layer */
    uint64_t *bits;      /* its words (blocks * 8) */
    uint64_t *counters;  /* blocks * 32 words */
    uint64_t blocks;
    uint32_t k;
    uint32_t salt[BK_BLOCKED_MAX_HASHES];
};

static const bk__tf_family hier_family;

/*==========================================================================
 * Internals
 *==========================================================================*/

static inline uint64_t block_index(const bk_hier *f, bk_hash h)
{
    return bk__fastrange64(h.lo, f->blocks);
}

/* The blocked layout's salts, from its rule (see the top of the file). */
static void make_salts(uint32_t *salt)
{
    uint64_t state = 0;
    for (int i = 0; i < BK_BLOCKED_MAX_HASHES; i++)
        salt[i] = (uint32_t)(bk__dl_mix64(&state) >> 32) | 1u;
}

#define bit_of(x, j) (((uint32_t)(x) * f->salt[j]) >> 23)

static inline int bits_contain(const bk_hier *f, bk_hash h)
{
    return bk_blocked_contains_hash(f->layer, h);
}

static inline unsigned counter_get(const uint64_t *c, unsigned j)
{
    return (unsigned)((c[j >> 4] >> ((j & 15) * 4)) & 15);
}

static inline void counter_set(uint64_t *c, unsigned j, unsigned v)
{
    unsigned shift = (j & 15) * 4;
    c[j >> 4] = (c[j >> 4] & ~(UINT64_C(15) << shift)) | ((uint64_t)v << shift);
}

static int add_hash(bk_hier *f, bk_hash h)
{
    uint64_t b = block_index(f, h);
    uint64_t *line = f->bits + b * BLOCK_WORDS;
    uint64_t *c = f->counters + b * COUNTER_WORDS;
    const uint32_t x = (uint32_t)h.hi;
    int was_new = 0;
    for (uint32_t j = 0; j < f->k; j++) {
        unsigned p = bit_of(x, j);
        unsigned v = counter_get(c, p);
        if (v == 0) was_new = 1;
        if (v < COUNTER_MAX) {
            counter_set(c, p, v + 1);
            if (v + 1 == COUNTER_MAX) f->head.overflows++;
        }
        line[p >> 6] |= UINT64_C(1) << (p & 63);
    }
    if (was_new) f->head.items++;
    return was_new;
}

static int remove_hash(bk_hier *f, bk_hash h)
{
    if (!bits_contain(f, h)) return BK_ENOTFOUND;
    uint64_t b = block_index(f, h);
    uint64_t *line = f->bits + b * BLOCK_WORDS;
    uint64_t *c = f->counters + b * COUNTER_WORDS;
    const uint32_t x = (uint32_t)h.hi;
    for (uint32_t j = 0; j < f->k; j++) {
        unsigned p = bit_of(x, j);
        unsigned v = counter_get(c, p);
        if (v == COUNTER_MAX || v == 0) continue; /* stuck, or already gone */
        counter_set(c, p, v - 1);
        if (v == 1) line[p >> 6] &= ~(UINT64_C(1) << (p & 63));
    }
    if (f->head.items > 0) f->head.items--;
    return BK_OK;
}

static int64_t count_hash(const bk_hier *f, bk_hash h)
{
    if (!bits_contain(f, h)) return 0;
    const uint64_t *c = f->counters + block_index(f, h) * COUNTER_WORDS;
    const uint32_t x = (uint32_t)h.hi;
    unsigned best = UINT32_MAX;
    for (uint32_t j = 0; j < f->k; j++) {
        unsigned p = bit_of(x, j), mult = 0;
        for (uint32_t i = 0; i < f->k; i++) mult += bit_of(x, i) == p;
        unsigned v = counter_get(c, p);
        if (v != COUNTER_MAX) v /= mult;
        if (v < best) best = v;
    }
    return best;
}

/*==========================================================================
 * Sizing
 *==========================================================================*/

int bk_hier_optimal(uint64_t n, double p, uint64_t *blocks, uint32_t *k)
{
    uint64_t m;
    int rc = bk_blocked_optimal(n, p, &m, k);
    if (rc == BK_OK && blocks) *blocks = m / BITS_PER_BLOCK;
    return rc;
}

/*==========================================================================
 * API
 *==========================================================================*/

/* A hier around a bit layer (taken over: freed on failure too). */
static int wrap_layer(bk_hier **out, bk_blocked *layer, uint64_t *counters,
                      int owns_counters)
{
    bk__part part;
    bk_hier *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) {
        bk_blocked_free(layer);
        if (owns_counters) bk__free_aligned(counters);
        return BK_ENOMEM;
    }
    bk__object_init(&f->head.obj, &hier_family.ops);
    memset(&part, 0, sizeof(part));
    bk__blocked_describe_part(layer, &part);
    f->layer = layer;
    f->bits = part.data;
    f->counters = counters;
    f->head.owns_mem = owns_counters;
    f->blocks = bk_blocked_blocks(layer);
    f->k = bk_blocked_hashes(layer);
    f->head.seed = bk_blocked_seed(layer);
    make_salts(f->salt);
    *out = f;
    return BK_OK;
}

static int create_filter(bk_hier **out, uint64_t capacity, double fpr, uint64_t seed)
{
    bk_blocked *layer;
    int rc = bk_blocked_create(&layer, capacity, fpr, seed);
    if (rc != BK_OK) return rc;
    uint64_t blocks = bk_blocked_blocks(layer);
    uint64_t *counters = blocks <= SIZE_MAX / 256 ? bk__calloc_aligned((size_t)blocks * 256) : NULL;
    if (counters == NULL) {
        bk_blocked_free(layer);
        return blocks <= SIZE_MAX / 256 ? BK_ENOMEM : BK_ESIZE;
    }
    rc = wrap_layer(out, layer, counters, 1);
    if (rc != BK_OK) return rc;
    (*out)->head.capacity = capacity;
    (*out)->head.target_fpr = fpr;
    return BK_OK;
}

int bk_hier_create(bk_hier **out, uint64_t capacity, double fpr, uint64_t seed)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    int rc = bk_hier_optimal(capacity, fpr, NULL, NULL);
    if (rc != BK_OK) return rc;
    return create_filter(out, capacity, fpr, seed);
}

void bk_hier_free(bk_hier *f)
{
    if (f == NULL) return;
    bk_blocked_free(f->layer);
    if (f->head.owns_mem) bk__free_aligned(f->counters);
    bk__object_release(&f->head.obj);
    bk__free(f);
}

uint64_t bk_hier_blocks(const bk_hier *f) { return f->blocks; }
uint32_t bk_hier_hashes(const bk_hier *f) { return f->k; }

static int stats_of(const void *vf, bk_delete_stats *out)
{
    const bk_hier *f = vf;
    if (f == NULL || out == NULL) return BK_EINVAL;
    double sum = 0.0;
    for (uint64_t b = 0; b < f->blocks; b++) {
        uint64_t set = 0;
        for (int w = 0; w < BLOCK_WORDS; w++)
            set += bk__popcount64(bk__load64(&f->bits[b * BLOCK_WORDS + w]));
        sum += pow((double)set / BITS_PER_BLOCK, (double)f->k);
    }
    bk__tf_stats(&f->head, f->k, f->blocks * (512 + 2048),
                 sizeof(*f) + (size_t)f->blocks * 320 + 2 * BK_CACHE_LINE, out);
    out->fpr_at_capacity =
        f->head.capacity ? bk_blocked_fpr(f->head.capacity, f->blocks * BITS_PER_BLOCK, f->k) : 0.0;
    out->fpr_now = sum / (double)f->blocks;
    return BK_OK;
}

int bk_hier_get_stats(const bk_hier *f, bk_delete_stats *out) { return stats_of(f, out); }

/*==========================================================================
 * The generic filter and the file format
 *==========================================================================*/

BK__FAMILY_CASTS(hier, hier_family.ops)

static int ops_add(void *f, bk_hash h) { return add_hash(f, h); }
static int ops_contains(const void *f, bk_hash h) { return bits_contain(f, h); }
static int ops_remove(void *f, bk_hash h) { return remove_hash(f, h); }
static int64_t ops_count(const void *f, bk_hash h) { return count_hash(f, h); }

/* A key's bit line, and for an add its counter line. */
static void prefetch_hash(const void *vf, bk_hash h, int adding)
{
    const bk_hier *f = vf;
    uint64_t b = block_index(f, h);
    BK_PREFETCH_READ(f->bits + b * BLOCK_WORDS);
    if (adding) BK_PREFETCH_WRITE(f->counters + b * COUNTER_WORDS + (uint32_t)h.hi % 4 * 8);
}

static int64_t ops_add_batch(void *f, const void *const *keys, const size_t *lens,
                             size_t n, uint8_t *results)
{
    return bk__tf_hash_batch(f, ((bk__tf_head *)f)->seed, keys, lens, n, results, 1,
                             prefetch_hash, ops_add, ops_contains);
}

static int64_t ops_contains_batch(const void *vf, const void *const *keys,
                                  const size_t *lens, size_t n, uint8_t *results)
{
    return bk_blocked_contains_batch(((const bk_hier *)vf)->layer, keys, lens, n, results);
}

static void ops_destroy(void *f) { bk_hier_free(f); }
static uint32_t ops_nparts(const void *f) { (void)f; return 2; }

static void ops_clear(void *vf)
{
    bk_hier *f = vf;
    bk_blocked_clear(f->layer);
    memset(f->counters, 0, (size_t)f->blocks * 256);
    f->head.items = 0;
}

static int ops_clone(const void *vf, void **out)
{
    const bk_hier *src = vf;
    bk_hier *f;
    int rc = create_filter(&f, src->head.capacity ? src->head.capacity : 1,
                           src->head.target_fpr ? src->head.target_fpr : 0.5, src->head.seed);
    if (rc == BK_OK && (f->blocks != src->blocks || f->k != src->k)) {
        bk_hier_free(f);
        rc = BK_ENOTSUP; /* only made from (capacity, fpr), so unreachable */
    }
    if (rc != BK_OK) return rc;
    memcpy(f->bits, src->bits, (size_t)src->blocks * 64);
    memcpy(f->counters, src->counters, (size_t)src->blocks * 256);
    f->head.capacity = src->head.capacity;
    f->head.target_fpr = src->head.target_fpr;
    f->head.items = src->head.items;
    f->head.overflows = src->head.overflows;
    *out = f;
    return BK_OK;
}

static int ops_create(const bk_filter_config *cfg, void **out)
{
    return bk_hier_create((bk_hier **)out, cfg->capacity, cfg->fpr, cfg->seed);
}

/* Image: two parts. Part 0, the bit layer: a blocked filter's part (family
 * 2: m = 512 x blocks, k, param = 512); part 1, the counters: m = blocks,
 * width = 4. Header param[0] = counters stuck so far. */
static int ops_describe(const void *vf, bk__image *img)
{
    const bk_hier *f = vf;
    bk__part *p = &img->parts[0], *q = &img->parts[1];
    img->seed = f->head.seed;
    img->capacity = f->head.capacity;
    img->fpr = f->head.target_fpr;
    img->items = f->head.items;
    img->param[0] = f->head.overflows;
    bk__blocked_describe_part(f->layer, p);
    p->capacity = f->head.capacity;
    p->fpr = f->head.target_fpr;
    p->items = f->head.items;
    q->m = f->blocks;
    q->width = 4;
    q->data = f->counters;
    q->length = f->blocks * 256;
    return BK_OK;
}

static int ops_restore(const bk__image *img, void **out)
{
    if (img->nparts != 2) return BK_ECORRUPT;
    const bk__part *p = &img->parts[0], *q = &img->parts[1];
    if (p->m % BITS_PER_BLOCK != 0 || q->m != p->m / BITS_PER_BLOCK || q->width != 4 ||
        q->length != q->m * 256 || p->capacity != img->capacity || p->fpr != img->fpr)
        return BK_ECORRUPT;
    /* the invariant: a bit is set exactly when its counter is nonzero */
    const uint64_t *bits = p->data, *counters = q->data;
    if (p->length != q->m * 64) return BK_ECORRUPT;
    for (uint64_t b = 0; b < q->m; b++) {
        for (unsigned j = 0; j < BITS_PER_BLOCK; j++) {
            int bit = (int)((bits[b * BLOCK_WORDS + (j >> 6)] >> (j & 63)) & 1);
            if (bit != (counter_get(counters + b * COUNTER_WORDS, j) != 0))
                return BK_ECORRUPT;
        }
    }
    bk_blocked *layer;
    int rc = bk__blocked_restore_part(p, img->seed, 0, &layer);
    if (rc != BK_OK) return rc;
    bk_hier *f;
    rc = wrap_layer(&f, layer, q->data, 0);
    if (rc != BK_OK) return rc;
    f->head.capacity = img->capacity;
    f->head.target_fpr = img->fpr;
    f->head.items = img->items;
    f->head.overflows = img->param[0];
    *out = f;
    return BK_OK;
}


/* The handle, the bit layer (a blocked filter) and, unless borrowed from
 * a loaded block, the counters. */
static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_hier *f = vf;
    visit(ctx, f, sizeof(*f));
    bk__blocked_allocations(f->layer, visit, ctx);
    if (f->head.owns_mem)
        visit(ctx, bk__aligned_raw(f->counters), bk__aligned_asked((size_t)f->blocks * 256));
}

/* Of the shared ops, the seed and info: the rest see two tables. */
static const bk__tf_family hier_family = {
    .ops = {.family = BK_FAMILY_HIER, .name = "hier", .add = ops_add,
            .contains = ops_contains, .remove = ops_remove, .count = ops_count,
            .add_batch = ops_add_batch, .contains_batch = ops_contains_batch,
            .lockfree_add = 0, .seed = bk__tf_seed, .destroy = ops_destroy,
            .info = bk__tf_info, .allocations = ops_allocations,
            .create = ops_create, .clone = ops_clone, .clear = ops_clear,
            .merge = NULL, .incompatibility = NULL, .nparts = ops_nparts,
            .describe = ops_describe, .restore = ops_restore},
    .handle_size = sizeof(bk_hier),
    .stats = stats_of,
    .fill = bk__tf_fill_root_k,
};

const bk__family_ops *const bk__hier_family = &hier_family.ops;
