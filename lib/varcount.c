/*
 * varcount.c - a counting Bloom filter with variable-length counters, one
 * 512-bit block per key (seed 002: counters in a variable-width code, so
 * the many counters at 0 or 1 take few bits and hot ones take more).
 *
 * Structure
 *   Blocks of 512 bits (one cache line). A key's hash picks one block
 *   (fastrange of lo) and k distinct counters of the block's C (draws of
 *   32 bits mapped by fastrange, repeats drawn again). Bit 0 of a block is
 *   its mode flag; bits 1 ... 511 hold the C counters in order, each in
 *   unary: value v is v one-bits followed by a zero-bit (the Golomb code of
 *   parameter 1, a prefix code). The stream takes C + S bits, S the sum of
 *   the block's counters, which is k times the keys stored in the block;
 *   bits after it are zero.
 *
 *   Counter j ends at the (j+1)-th zero of the stream, z_j (a select over 8
 *   words with popcounts); it is nonzero when the bit before z_j is a one.
 *   An increment inserts a one at z_j (the bits above shift up by one), a
 *   decrement deletes the one at z_j - 1 (the bits above shift down). A key's
 *   counters are updated from the highest to the lowest so that earlier
 *   positions do not move. Each operation reads and writes the one block.
 *
 * Overflow rule
 *   An add that would make C + S exceed 511 freezes the block: it becomes a
 *   plain Bloom block (flag set, bit 1 + j set when counter j was nonzero)
 *   and stays one until clear. A frozen block answers lookups exactly as the
 *   counters did (no false negative), takes adds as bit sets, and cannot
 *   delete: a remove of a key whose bits are set returns BK_OK and changes
 *   nothing (the key stays a false positive), a count answers 1 or 0.
 *   Freezes are counted (overflows). The sizing keeps the probability that
 *   a block at capacity holds more than (511 - C) / k keys (Poisson tail)
 *   below 1e-7, so a filter at capacity expects no frozen block.
 *
 * False positives
 *   As the blocked counting filter: a block holds Poisson(n / blocks) keys,
 *       fpr = sum_i Poisson(i; n/B) (1 - (1 - k/C)^i)^k
 *   Sizing searches k and C (counters per block) for the fewest blocks
 *   meeting both this and the overflow bound. At p = 1% it picks k = 3,
 *   C = 336 (19.5 bits per key, against 43.9 for 4-bit counters); at 0.1%
 *   k = 5, C = 304 (32.1 bits per key against 77.6).
 *
 * What it cannot do
 *   Concurrent writes; merging; deleting from a frozen block; telling a
 *   false positive from a present key (removing a never-added key that
 *   matches decrements other keys' counters).
 */
#include <string.h> /* memset, memcpy */

#include "deleting.h"
#include "hash.h"
#include "table_family.h"

/*==========================================================================
 * Types
 *==========================================================================*/

#define WORDS 8
#define STREAM_BITS 511 /* bits 1 ... 511 */
#define FROZEN UINT64_C(1)
#define OVERFLOW_BOUND 1e-7

struct bk_varcount {
    bk__tf_head head;   /* first: a bk_varcount is also a bk_filter;
                           head.overflows counts the blocks frozen */
    uint64_t *words;    /* blocks * 8 */
    uint64_t blocks;
    uint32_t counters;  /* C per block */
    uint32_t k;
};

static const bk__tf_family varcount_family;

/*==========================================================================
 * Internals: positions
 *==========================================================================*/

static inline uint64_t *block_of(const bk_varcount *f, bk_hash h)
{
    return f->words + bk__fastrange64(h.lo, f->blocks) * WORDS;
}

/* k distinct counters, sorted descending. */
static inline void positions(const bk_varcount *f, bk_hash h, uint16_t *pos)
{
    uint64_t stream = h.hi ^ ((h.lo << 32) | (h.lo >> 32));
    uint64_t pool = h.hi;
    int left = 2;
    for (uint32_t i = 0; i < f->k; i++) {
        uint32_t c;
        for (;;) {
            if (left == 0) pool = bk__dl_mix64(&stream), left = 2;
            c = (uint32_t)(((pool & 0xFFFFFFFFu) * f->counters) >> 32);
            pool >>= 32;
            left--;
            uint32_t j = 0;
            while (j < i && pos[j] != c) j++;
            if (j == i) break;
        }
        /* insertion into descending order */
        uint32_t j = i;
        while (j > 0 && pos[j - 1] < c) { pos[j] = pos[j - 1]; j--; }
        pos[j] = (uint16_t)c;
    }
}

/*==========================================================================
 * Internals: the unary stream of a block
 *==========================================================================*/

/* Position (0 ... 63) of the (r+1)-th set bit of x (r < popcount(x)). */
static inline unsigned select64(uint64_t x, unsigned r)
{
    unsigned base = 0;
    for (unsigned width = 32; width >= 1; width /= 2) {
        uint64_t low = x & ((UINT64_C(1) << width) - 1);
        unsigned c = (unsigned)bk__popcount64(low);
        if (r >= c) {
            r -= c;
            x >>= width;
            base += width;
        } else {
            x = low;
        }
    }
    return base;
}

/* Bit position of the terminating zero of counter j (the (j+1)-th zero of
 * bits 1 ... 511). The caller guarantees it exists (j < C). */
static inline unsigned zero_position(const uint64_t *b, uint32_t j)
{
    unsigned r = j;
    for (unsigned w = 0; w < WORDS; w++) {
        uint64_t zeros = ~b[w];
        if (w == 0) zeros &= ~UINT64_C(1); /* the flag is not in the stream */
        unsigned c = (unsigned)bk__popcount64(zeros);
        if (r < c) return w * 64 + select64(zeros, r);
        r -= c;
    }
    return 512; /* unreachable for a valid block */
}

static inline int get_bit(const uint64_t *b, unsigned pos)
{
    return (int)((b[pos >> 6] >> (pos & 63)) & 1);
}

/* Insert a one at pos: bits [pos, 511] move up by one, bit 511 is lost
 * (the caller checked it is a zero). */
static inline void insert_one(uint64_t *b, unsigned pos)
{
    unsigned w = pos >> 6, off = pos & 63;
    for (unsigned i = WORDS - 1; i > w; i--) b[i] = (b[i] << 1) | (b[i - 1] >> 63);
    uint64_t low = off ? b[w] & ((UINT64_C(1) << off) - 1) : 0;
    uint64_t high = b[w] & ~(off ? ((UINT64_C(1) << off) - 1) : 0);
    b[w] = low | (UINT64_C(1) << off) | (high << 1);
}

/* Delete the bit at pos: bits [pos + 1, 511] move down by one, bit 511
 * becomes zero. */
static inline void delete_bit(uint64_t *b, unsigned pos)
{
    unsigned w = pos >> 6, off = pos & 63;
    uint64_t low = off ? b[w] & ((UINT64_C(1) << off) - 1) : 0;
    uint64_t high = off == 63 ? 0 : (b[w] >> (off + 1)) << off;
    b[w] = low | high;
    for (unsigned i = w; i < WORDS - 1; i++) {
        b[i] |= b[i + 1] << 63;
        b[i + 1] >>= 1;
    }
}

static inline uint32_t stream_ones(const uint64_t *b)
{
    uint32_t s = 0;
    for (unsigned w = 0; w < WORDS; w++) s += (uint32_t)bk__popcount64(b[w]);
    return s - (uint32_t)(b[0] & FROZEN);
}

static inline uint32_t counter_value(const uint64_t *b, uint32_t j)
{
    unsigned z = zero_position(b, j);
    unsigned start = j == 0 ? 1 : zero_position(b, j - 1) + 1;
    return z - start;
}

static inline int counter_nonzero(const uint64_t *b, uint32_t j)
{
    /* the bit before the end is a one of this counter's run, or (when it
     * is 0) the previous counter's end or the flag, both zeros */
    return get_bit(b, zero_position(b, j) - 1);
}

/* Turn a counting block into a frozen bit block. */
static void freeze(bk_varcount *f, uint64_t *b)
{
    uint64_t bits[WORDS] = {0};
    bits[0] = FROZEN;
    unsigned start = 1;
    for (uint32_t j = 0; j < f->counters; j++) {
        unsigned z = zero_position(b, j);
        if (z > start) bits[(j + 1) >> 6] |= UINT64_C(1) << ((j + 1) & 63);
        start = z + 1;
    }
    memcpy(b, bits, sizeof(bits));
    f->head.overflows++;
}

/*==========================================================================
 * Internals: key operations
 *==========================================================================*/

static inline int frozen_contains(const uint64_t *b, const uint16_t *pos, uint32_t k)
{
    for (uint32_t i = 0; i < k; i++)
        if (!get_bit(b, pos[i] + 1u)) return 0;
    return 1;
}

static int contains_pos(const bk_varcount *f, const uint64_t *b, const uint16_t *pos)
{
    if (b[0] & FROZEN) return frozen_contains(b, pos, f->k);
    for (uint32_t i = 0; i < f->k; i++)
        if (!counter_nonzero(b, pos[i])) return 0;
    return 1;
}

static int add_pos(bk_varcount *f, uint64_t *b, const uint16_t *pos)
{
    int was_new = 0;
    if (!(b[0] & FROZEN) && f->counters + stream_ones(b) + f->k > STREAM_BITS)
        freeze(f, b);
    if (b[0] & FROZEN) {
        for (uint32_t i = 0; i < f->k; i++) {
            unsigned p = pos[i] + 1u;
            if (!get_bit(b, p)) was_new = 1;
            b[p >> 6] |= UINT64_C(1) << (p & 63);
        }
    } else {
        for (uint32_t i = 0; i < f->k; i++) { /* pos is descending */
            unsigned z = zero_position(b, pos[i]);
            if (!get_bit(b, z - 1)) was_new = 1;
            insert_one(b, z);
        }
    }
    if (was_new) f->head.items++;
    return was_new;
}

static int remove_pos(bk_varcount *f, uint64_t *b, const uint16_t *pos)
{
    if (!contains_pos(f, b, pos)) return BK_ENOTFOUND;
    if (!(b[0] & FROZEN)) {
        for (uint32_t i = 0; i < f->k; i++)
            delete_bit(b, zero_position(b, pos[i]) - 1);
    }
    if (f->head.items > 0) f->head.items--;
    return BK_OK;
}

static int64_t count_pos(const bk_varcount *f, const uint64_t *b, const uint16_t *pos)
{
    if (b[0] & FROZEN) return frozen_contains(b, pos, f->k);
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < f->k; i++) {
        uint32_t v = counter_value(b, pos[i]);
        if (v < best) best = v;
    }
    return best;
}

/*==========================================================================
 * Sizing
 *==========================================================================*/

/* A sizing: n keys at rate p with k hashes and c counters a block, of
 * which a block holds `limit` keys. */
typedef struct sizing {
    uint64_t n;
    double p, limit;
    uint32_t k, c;
} sizing;

static int sizing_fits(const void *ctx, uint64_t blocks)
{
    const sizing *z = ctx;
    double lambda = (double)z->n / (double)blocks;
    return bk__dl_blocked_fpr(lambda, z->c, z->k) <= z->p &&
           bk__dl_poisson_tail(lambda, z->limit) <= OVERFLOW_BOUND;
}

/* Fewest blocks meeting rate p and the overflow bound for (k, C), or 0. */
static uint64_t blocks_for(uint64_t n, double p, uint32_t k, uint32_t c)
{
    double limit = (double)(STREAM_BITS - c) / (double)k; /* keys a block holds */
    if (limit < 1.0) return 0;
    /* the fit is monotone in the block count, so the search may start
     * where a block's mean load is the most it can hold (far cheaper sums
     * than at 1 block) */
    const sizing z = {n, p, limit, k, c};
    return bk__fewest_blocks((uint64_t)((double)n / limit), BK_VARCOUNT_MAX_BLOCKS,
                             sizing_fits, &z);
}

int bk_varcount_optimal(uint64_t n, double p, uint64_t *blocks,
                        uint32_t *counters, uint32_t *k)
{
    if (n == 0) return BK_ECAPACITY;
    if (bk__check_fpr(p) != BK_OK) return BK_EFPR;
    uint64_t best = 0;
    uint32_t best_c = 0, best_k = 0;
    int k_hi = (int)ceil(-log2(p)) + 1;
    if (k_hi > BK_VARCOUNT_MAX_HASHES) k_hi = BK_VARCOUNT_MAX_HASHES;
    for (int kk = 1; kk <= k_hi; kk++) {
        for (uint32_t c = 32; c <= 480; c += 16) {
            uint64_t b = blocks_for(n, p, (uint32_t)kk, c);
            if (b != 0 && (best == 0 || b < best)) best = b, best_c = c, best_k = (uint32_t)kk;
        }
    }
    if (best == 0) return BK_ESIZE;
    if (blocks) *blocks = best;
    if (counters) *counters = best_c;
    if (k) *k = best_k;
    return BK_OK;
}

/*==========================================================================
 * API
 *==========================================================================*/

static size_t table_bytes(const void *f)
{
    return (size_t)((const bk_varcount *)f)->blocks * 64;
}

int bk_varcount_create(bk_varcount **out, uint64_t capacity, double fpr,
                       uint64_t seed)
{
    uint64_t blocks;
    uint32_t c, k;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    int rc = bk_varcount_optimal(capacity, fpr, &blocks, &c, &k);
    if (rc != BK_OK) return rc;
    if (blocks > SIZE_MAX / 64) return BK_ESIZE;
    bk_varcount *f = bk__tf_create(&varcount_family, (size_t)blocks * 64, seed, capacity, fpr);
    if (f == NULL) return BK_ENOMEM;
    f->blocks = blocks;
    f->counters = c;
    f->k = k;
    *out = f;
    return BK_OK;
}

void bk_varcount_free(bk_varcount *f) { bk__tf_free(f); }

uint64_t bk_varcount_blocks(const bk_varcount *f) { return f->blocks; }
uint32_t bk_varcount_counters(const bk_varcount *f) { return f->counters; }
uint32_t bk_varcount_hashes(const bk_varcount *f) { return f->k; }

static int stats_of(const void *vf, bk_delete_stats *out)
{
    const bk_varcount *f = vf;
    if (f == NULL || out == NULL) return BK_EINVAL;
    double sum = 0.0;
    for (uint64_t i = 0; i < f->blocks; i++) {
        const uint64_t *b = f->words + i * WORDS;
        uint32_t nonzero = 0;
        if (b[0] & FROZEN) {
            nonzero = stream_ones(b);
        } else {
            unsigned start = 1;
            for (uint32_t j = 0; j < f->counters; j++) {
                unsigned z = zero_position(b, j);
                nonzero += z > start;
                start = z + 1;
            }
        }
        double hit = 1.0; /* C(nonzero, k) / C(C, k) */
        for (uint32_t j = 0; j < f->k; j++)
            hit *= nonzero > j ? (double)(nonzero - j) / (double)(f->counters - j) : 0.0;
        sum += hit;
    }
    bk__tf_stats(&f->head, f->k, f->blocks * 512,
                 sizeof(*f) + table_bytes(f) + BK_CACHE_LINE, out);
    out->fpr_at_capacity = f->head.capacity
        ? bk__dl_blocked_fpr((double)f->head.capacity / (double)f->blocks, f->counters, f->k)
        : 0.0;
    out->fpr_now = sum / (double)f->blocks;
    return BK_OK;
}

int bk_varcount_get_stats(const bk_varcount *f, bk_delete_stats *out) { return stats_of(f, out); }

/*==========================================================================
 * The generic filter and the file format
 *==========================================================================*/

BK__FAMILY_CASTS(varcount, varcount_family.ops)

static int ops_add(void *vf, bk_hash h)
{
    bk_varcount *f = vf;
    uint16_t pos[BK_VARCOUNT_MAX_HASHES];
    positions(f, h, pos);
    return add_pos(f, block_of(f, h), pos);
}

static int ops_contains(const void *vf, bk_hash h)
{
    const bk_varcount *f = vf;
    uint16_t pos[BK_VARCOUNT_MAX_HASHES];
    positions(f, h, pos);
    return contains_pos(f, block_of(f, h), pos);
}

static int ops_remove(void *vf, bk_hash h)
{
    bk_varcount *f = vf;
    uint16_t pos[BK_VARCOUNT_MAX_HASHES];
    positions(f, h, pos);
    return remove_pos(f, block_of(f, h), pos);
}

static int64_t ops_count(const void *vf, bk_hash h)
{
    const bk_varcount *f = vf;
    uint16_t pos[BK_VARCOUNT_MAX_HASHES];
    positions(f, h, pos);
    return count_pos(f, block_of(f, h), pos);
}

static void prefetch_hash(const void *f, bk_hash h, int adding)
{
    (void)adding;
    BK_PREFETCH_WRITE(block_of(f, h));
}

BK__TF_HASH_BATCH_OPS(prefetch_hash, ops_add, ops_contains)

static void *table_of(const void *f) { return ((const bk_varcount *)f)->words; }
static void set_table(void *f, void *table) { ((bk_varcount *)f)->words = table; }

/* info's fill: the keys stored per key of capacity */
static double fill_of(const void *f, const bk_delete_stats *st)
{
    const uint64_t capacity = ((const bk_varcount *)f)->head.capacity;
    return capacity ? (double)st->items / (double)capacity : 0.0;
}

static int ops_create(const bk_filter_config *cfg, void **out)
{
    return bk_varcount_create((bk_varcount **)out, cfg->capacity, cfg->fpr, cfg->seed);
}

/* Image: one part; m = blocks, k, param = counters per block C; header
 * param[0] = blocks frozen so far. Payload: blocks x 8 little-endian words. */
static int ops_describe(const void *vf, bk__image *img)
{
    const bk_varcount *f = vf;
    bk__part *p = bk__tf_describe(f, img);
    p->m = f->blocks;
    p->k = f->k;
    p->param = f->counters;
    return BK_OK;
}

/* Every block must be a valid stream: a counting block holds at least C
 * zeros in bits 1 ... 511 (so every counter has its end), a frozen block no
 * bit above C. Checked on load so that no later select runs off the end. */
static int valid_block(const uint64_t *b, uint32_t c)
{
    if (b[0] & FROZEN) {
        for (unsigned pos = c + 1; pos < 512; pos++)
            if (get_bit(b, pos)) return 0;
        return 1;
    }
    return 511u - stream_ones(b) >= c;
}

static int ops_restore(const bk__image *img, void **out)
{
    const bk__part *p = &img->parts[0];
    if (!bk__tf_restorable(img)) return BK_ECORRUPT;
    if (p->m == 0 || p->m > BK_VARCOUNT_MAX_BLOCKS || p->length != p->m * 64 ||
        p->param < 1 || p->param > STREAM_BITS - 1 || p->k == 0 ||
        p->k > BK_VARCOUNT_MAX_HASHES || p->k > p->param)
        return BK_ECORRUPT;
    const uint64_t *words = p->data;
    for (uint64_t i = 0; i < p->m; i++)
        if (!valid_block(words + i * WORDS, (uint32_t)p->param)) return BK_ECORRUPT;
    bk_varcount *f = bk__tf_adopt(&varcount_family, img, p->data);
    if (f == NULL) return BK_ENOMEM;
    f->blocks = p->m;
    f->counters = (uint32_t)p->param;
    f->k = p->k;
    *out = f;
    return BK_OK;
}

static const bk__tf_family varcount_family = {
    .ops = {.family = BK_FAMILY_VARCOUNT, .name = "varcount", .remove = ops_remove,
            BK__TF_OPS_STANDARD},
    BK__TF_HOOKS_STANDARD(bk_varcount),
    .fill = fill_of,
};

const bk__family_ops *const bk__varcount_family = &varcount_family.ops;
