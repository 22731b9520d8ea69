/*
 * hybrid.c - the hybrid counting Bloom filter (seed 002, "Hybrid CBF"):
 * low counts live in a plain bit layer, and what passes the threshold
 * migrates to counters.
 *
 * Structure
 *   Blocks of 1 + L cache lines. Line 0 is a blocked Bloom bit layer of 512
 *   cells: a key's hash picks the block (fastrange of lo) and k cells by
 *   multiply-shift of x = hi with fixed odd salts (cell_j = (x salt_j mod
 *   2^32) >> 23). Lines 1 ... L are the block's counter area: 32 L 16-bit
 *   slots, slot 0 a header (bit 15: frozen), each other slot (cell index in
 *   its low 9 bits, count in its high 7) or 0 when free.
 *
 *   The threshold is per cell: a cell at 0 or 1 is its bit alone; when an
 *   add finds the bit already set and no slot for the cell, the cell
 *   migrates: it takes a free slot with count 2. Further adds increment the
 *   slot; removes decrement it, and at 1 the slot is freed (the cell is a
 *   plain bit again); a remove of a cell without a slot clears its bit. A
 *   lookup reads the bit line only. A cell's counter thus costs memory only
 *   while the cell is shared or repeated. The sizing searches k and L for
 *   the least memory: few cells per key (k = 2 at 1%) keep the shared
 *   cells within one line of slots: 38.6 bits per key at 1%, 0.88x the
 *   4-bit counting filter (which stops counting at 15).
 *   (The seed's example threshold of 3 cannot be held by one bit: a bit
 *   says 0 or 1, so the threshold here is 2.)
 *
 * Overflow
 *   A slot count at 127 sticks (never decremented). A cell that must
 *   migrate when every slot is taken freezes the block: from then on the
 *   block is a plain Bloom block: adds set bits, removes of keys whose bits
 *   are set return BK_OK and clear nothing, counts answer 1 or 0. Neither
 *   can cause a false negative. Sizing keeps the expected migrated cells of
 *   a block plus 4 standard deviations, at the 1 - 1e-7 quantile of the
 *   block's Poisson load, within its slots. Both events are counted.
 *
 * False positives
 *   Those of the bit layer, a blocked filter with k cells that may repeat:
 *       fpr = sum_i Poisson(i; n/B) (1 - (1 - 1/512)^(k i))^k
 *
 * What it cannot do
 *   Concurrent writes; merging; deleting from a frozen block; telling a
 *   false positive from a present key.
 */
#include <string.h> /* memset, memcpy */

#include "deleting.h"
#include "hash.h"
#include "table_family.h"

/*==========================================================================
 * Types
 *==========================================================================*/

#define CELLS 512
#define LINE_WORDS 8
#define SLOTS_PER_LINE 32
#define COUNT_MAX 127
#define FROZEN 0x8000u
#define OVERFLOW_BOUND 1e-7

static const uint32_t SALTS[BK_HYBRID_MAX_HASHES] = {
    0x9E3779B1u, 0x85EBCA77u, 0xC2B2AE3Du, 0x27D4EB2Fu,
    0x165667B1u, 0xD3A2646Du, 0xFD7046C5u, 0xB55A4F09u,
    0x7FEB352Du, 0x846CA68Bu, 0xE9546B2Bu, 0x2C1B3C6Du,
    0x297A2D39u, 0x5851F42Du, 0x14057B7Fu, 0xA3B195A5u,
};

struct bk_hybrid {
    bk__tf_head head;  /* first: a bk_hybrid is also a bk_filter */
    uint64_t *words;   /* blocks * (1 + L) * 8 */
    uint64_t blocks;
    uint32_t k;
    uint32_t lines;    /* L: counter lines per block */
};

static const bk__tf_family hybrid_family;

/*==========================================================================
 * Internals
 *==========================================================================*/

static inline uint64_t *block_of(const bk_hybrid *f, bk_hash h)
{
    return f->words + bk__fastrange64(h.lo, f->blocks) * (1u + f->lines) * LINE_WORDS;
}

static inline unsigned cell_of(uint32_t x, uint32_t j)
{
    return (x * SALTS[j]) >> 23;
}

static inline int bit_get(const uint64_t *line, unsigned c)
{
    return (int)((line[c >> 6] >> (c & 63)) & 1);
}

static inline uint16_t *slots_of(uint64_t *block)
{
    return (uint16_t *)(void *)(block + LINE_WORDS);
}

/* The slot of cell c, or -1. */
static inline int find_slot(const uint16_t *s, uint32_t nslots, unsigned c)
{
    for (uint32_t i = 1; i < nslots; i++)
        if (s[i] != 0 && (s[i] & 511u) == c) return (int)i;
    return -1;
}

/* Branch-free, as the hierarchical filter's lookup. */
static inline int contains_block(const bk_hybrid *f, const uint64_t *block, uint32_t x)
{
    uint64_t clear = 0;
    for (uint32_t j = 0; j < f->k; j++) {
        unsigned c = cell_of(x, j);
        clear |= ~block[c >> 6] >> (c & 63);
    }
    return (clear & 1) == 0;
}

static void freeze(bk_hybrid *f, uint16_t *s)
{
    uint32_t nslots = f->lines * SLOTS_PER_LINE;
    memset(s, 0, nslots * sizeof(uint16_t));
    s[0] = FROZEN;
    f->head.overflows++;
}

static int add_hash(bk_hybrid *f, bk_hash h)
{
    uint64_t *block = block_of(f, h);
    uint16_t *s = slots_of(block);
    const uint32_t nslots = f->lines * SLOTS_PER_LINE, x = (uint32_t)h.hi;
    int was_new = 0;
    for (uint32_t j = 0; j < f->k; j++) {
        unsigned c = cell_of(x, j);
        if (!bit_get(block, c)) {
            block[c >> 6] |= UINT64_C(1) << (c & 63);
            was_new = 1;
            continue;
        }
        if (s[0] & FROZEN) continue;
        int i = find_slot(s, nslots, c);
        if (i >= 0) {
            unsigned count = s[i] >> 9;
            if (count < COUNT_MAX) {
                s[i] = (uint16_t)(s[i] + (1u << 9));
                if (count + 1 == COUNT_MAX) f->head.overflows++;
            }
            continue;
        }
        for (i = 1; i < (int)nslots && s[i] != 0; i++) {}
        if (i == (int)nslots) { /* no room: the block becomes plain bits */
            freeze(f, s);
            continue;
        }
        s[i] = (uint16_t)((2u << 9) | c); /* migrates with count 2 */
    }
    if (was_new) f->head.items++;
    return was_new;
}

static int remove_hash(bk_hybrid *f, bk_hash h)
{
    uint64_t *block = block_of(f, h);
    uint16_t *s = slots_of(block);
    const uint32_t nslots = f->lines * SLOTS_PER_LINE, x = (uint32_t)h.hi;
    if (!contains_block(f, block, x)) return BK_ENOTFOUND;
    if (!(s[0] & FROZEN)) {
        for (uint32_t j = 0; j < f->k; j++) {
            unsigned c = cell_of(x, j);
            int i = find_slot(s, nslots, c);
            if (i < 0) {
                block[c >> 6] &= ~(UINT64_C(1) << (c & 63));
                continue;
            }
            unsigned count = s[i] >> 9;
            if (count == COUNT_MAX) continue; /* stuck */
            s[i] = count == 2 ? 0 : (uint16_t)(s[i] - (1u << 9));
        }
    }
    if (f->head.items > 0) f->head.items--;
    return BK_OK;
}

static int64_t count_hash(const bk_hybrid *f, bk_hash h)
{
    uint64_t *block = block_of(f, h);
    const uint16_t *s = slots_of(block);
    const uint32_t nslots = f->lines * SLOTS_PER_LINE, x = (uint32_t)h.hi;
    if (!contains_block(f, block, x)) return 0;
    if (s[0] & FROZEN) return 1;
    unsigned best = UINT32_MAX;
    for (uint32_t j = 0; j < f->k; j++) {
        unsigned c = cell_of(x, j), mult = 0;
        for (uint32_t i = 0; i < f->k; i++) mult += cell_of(x, i) == c;
        int i = find_slot(s, nslots, c);
        unsigned v = i < 0 ? 1 : (unsigned)(s[i] >> 9);
        if (v != COUNT_MAX) v /= mult;
        if (v < best) best = v;
    }
    return best;
}

/*==========================================================================
 * Sizing
 *==========================================================================*/

static double hybrid_fpr(double lambda, uint32_t k)
{
    double survive = pow(1.0 - 1.0 / CELLS, (double)k);
    return bk__dl_blocked_fpr(lambda, (double)k / (1.0 - survive), (double)k);
}

/* Room check: i keys (the 1 - 1e-7 quantile of Poisson(lambda)) make on
 * average 512 (1 - e^-a (1 + a)) cells of count >= 2, a = k i / 512; with
 * 4 standard deviations (variance <= mean) they fit the usable slots. */
static int slots_fit(double lambda, uint32_t k, uint32_t lines)
{
    double i = bk__dl_poisson_quantile(lambda, OVERFLOW_BOUND);
    double a = (double)k * i / CELLS;
    double multi = CELLS * (1.0 - exp(-a) * (1.0 + a));
    return multi + 4.0 * sqrt(multi) <= (double)(lines * SLOTS_PER_LINE - 1);
}

/* A sizing: n keys at rate p with k hashes and `lines` counter lines. */
typedef struct sizing {
    uint64_t n;
    double p;
    uint32_t k, lines;
} sizing;

static int sizing_fits(const void *ctx, uint64_t blocks)
{
    const sizing *z = ctx;
    double lambda = (double)z->n / (double)blocks;
    return hybrid_fpr(lambda, z->k) <= z->p && slots_fit(lambda, z->k, z->lines);
}

static uint64_t blocks_for(uint64_t n, double p, uint32_t k, uint32_t lines)
{
    /* the fit is monotone in the block count: start at a mean load of 256
     * keys per block (cheap sums) */
    const sizing z = {n, p, k, lines};
    return bk__fewest_blocks(n / 256, BK_HYBRID_MAX_BLOCKS, sizing_fits, &z);
}

int bk_hybrid_optimal(uint64_t n, double p, uint64_t *blocks, uint32_t *k,
                      uint32_t *lines)
{
    if (n == 0) return BK_ECAPACITY;
    if (bk__check_fpr(p) != BK_OK) return BK_EFPR;
    double best_bits = 0.0;
    uint64_t best = 0;
    uint32_t best_k = 0, best_l = 0;
    for (uint32_t l = 1; l <= BK_HYBRID_MAX_LINES; l++) {
        for (uint32_t kk = 1; kk <= BK_HYBRID_MAX_HASHES; kk++) {
            uint64_t b = blocks_for(n, p, kk, l);
            double bits = (double)b * (1 + l);
            if (b != 0 && (best == 0 || bits < best_bits))
                best = b, best_k = kk, best_l = l, best_bits = bits;
        }
    }
    if (best == 0) return BK_ESIZE;
    if (blocks) *blocks = best;
    if (k) *k = best_k;
    if (lines) *lines = best_l;
    return BK_OK;
}

/*==========================================================================
 * API
 *==========================================================================*/

static size_t table_bytes(const void *f)
{
    const bk_hybrid *h = f;
    return (size_t)h->blocks * (1u + h->lines) * 64u;
}

int bk_hybrid_create(bk_hybrid **out, uint64_t capacity, double fpr, uint64_t seed)
{
    uint64_t blocks, bytes;
    uint32_t k, lines;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    int rc = bk_hybrid_optimal(capacity, fpr, &blocks, &k, &lines);
    if (rc != BK_OK) return rc;
    if (bk__mul_overflow(blocks, (1u + lines) * 64u, &bytes) || bytes > SIZE_MAX)
        return BK_ESIZE;
    bk_hybrid *f = bk__tf_create(&hybrid_family, (size_t)bytes, seed, capacity, fpr);
    if (f == NULL) return BK_ENOMEM;
    f->blocks = blocks;
    f->k = k;
    f->lines = lines;
    *out = f;
    return BK_OK;
}

void bk_hybrid_free(bk_hybrid *f) { bk__tf_free(f); }

uint64_t bk_hybrid_blocks(const bk_hybrid *f) { return f->blocks; }
uint32_t bk_hybrid_hashes(const bk_hybrid *f) { return f->k; }
uint32_t bk_hybrid_counter_lines(const bk_hybrid *f) { return f->lines; }

static int stats_of(const void *vf, bk_delete_stats *out)
{
    const bk_hybrid *f = vf;
    if (f == NULL || out == NULL) return BK_EINVAL;
    double sum = 0.0;
    const uint64_t stride = (1u + f->lines) * LINE_WORDS;
    for (uint64_t b = 0; b < f->blocks; b++) {
        uint64_t set = 0;
        for (int w = 0; w < LINE_WORDS; w++) set += bk__popcount64(f->words[b * stride + w]);
        sum += pow((double)set / CELLS, (double)f->k);
    }
    bk__tf_stats(&f->head, f->k, f->blocks * stride * 64,
                 sizeof(*f) + table_bytes(f) + BK_CACHE_LINE, out);
    out->fpr_at_capacity =
        f->head.capacity ? hybrid_fpr((double)f->head.capacity / (double)f->blocks, f->k) : 0.0;
    out->fpr_now = sum / (double)f->blocks;
    return BK_OK;
}

int bk_hybrid_get_stats(const bk_hybrid *f, bk_delete_stats *out) { return stats_of(f, out); }

/*==========================================================================
 * The generic filter and the file format
 *==========================================================================*/

BK__FAMILY_CASTS(hybrid, hybrid_family.ops)

static int ops_add(void *f, bk_hash h) { return add_hash(f, h); }
static int ops_remove(void *f, bk_hash h) { return remove_hash(f, h); }
static int64_t ops_count(const void *f, bk_hash h) { return count_hash(f, h); }

static int ops_contains(const void *vf, bk_hash h)
{
    const bk_hybrid *f = vf;
    return contains_block(f, block_of(f, h), (uint32_t)h.hi);
}

/* A key's block, and for an add its first counter line. */
static void prefetch_hash(const void *f, bk_hash h, int adding)
{
    BK_PREFETCH_WRITE(block_of(f, h));
    if (adding) BK_PREFETCH_WRITE(block_of(f, h) + LINE_WORDS);
}

BK__TF_HASH_BATCH_OPS(prefetch_hash, ops_add, ops_contains)

static void *table_of(const void *f) { return ((const bk_hybrid *)f)->words; }
static void set_table(void *f, void *table) { ((bk_hybrid *)f)->words = table; }

static int ops_create(const bk_filter_config *cfg, void **out)
{
    return bk_hybrid_create((bk_hybrid **)out, cfg->capacity, cfg->fpr, cfg->seed);
}

/* Image: one part; m = blocks, k, param = counter lines L; header
 * param[0] = overflow events. Payload: blocks x (1 + L) x 64 bytes. */
static int ops_describe(const void *vf, bk__image *img)
{
    const bk_hybrid *f = vf;
    bk__part *p = bk__tf_describe(f, img);
    p->m = f->blocks;
    p->k = f->k;
    p->param = f->lines;
    return BK_OK;
}

/* A block is valid when no two slots name one cell, every slot's count is
 * 2 ... 127 and its cell's bit is set, and a frozen header has no slots. */
static int valid_block(uint64_t *block, uint32_t lines)
{
    const uint16_t *s = slots_of(block);
    const uint32_t nslots = lines * SLOTS_PER_LINE;
    uint64_t seen[CELLS / 64] = {0};
    if (s[0] & ~FROZEN) return 0;
    for (uint32_t i = 1; i < nslots; i++) {
        if (s[i] == 0) continue;
        unsigned c = s[i] & 511u, count = s[i] >> 9;
        if ((s[0] & FROZEN) || count < 2 || !bit_get(block, c) ||
            ((seen[c >> 6] >> (c & 63)) & 1))
            return 0;
        seen[c >> 6] |= UINT64_C(1) << (c & 63);
    }
    return 1;
}

static int ops_restore(const bk__image *img, void **out)
{
    const bk__part *p = &img->parts[0];
    if (!bk__tf_restorable(img)) return BK_ECORRUPT;
    if (p->m == 0 || p->m > BK_HYBRID_MAX_BLOCKS || p->k == 0 ||
        p->k > BK_HYBRID_MAX_HASHES || p->param < 1 || p->param > BK_HYBRID_MAX_LINES ||
        p->length != p->m * (1 + p->param) * 64)
        return BK_ECORRUPT;
    uint64_t *words = p->data;
    for (uint64_t b = 0; b < p->m; b++)
        if (!valid_block(words + b * (1 + p->param) * LINE_WORDS, (uint32_t)p->param))
            return BK_ECORRUPT;
    bk_hybrid *f = bk__tf_adopt(&hybrid_family, img, words);
    if (f == NULL) return BK_ENOMEM;
    f->blocks = p->m;
    f->k = p->k;
    f->lines = (uint32_t)p->param;
    *out = f;
    return BK_OK;
}

static const bk__tf_family hybrid_family = {
    .ops = {.family = BK_FAMILY_HYBRID, .name = "hybrid", .remove = ops_remove,
            BK__TF_OPS_STANDARD},
    BK__TF_HOOKS_STANDARD(bk_hybrid),
    .fill = bk__tf_fill_root_k,
};

const bk__family_ops *const bk__hybrid_family = &hybrid_family.ops;
