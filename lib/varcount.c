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
#include "filter.h"
#include "hash.h"

/*==========================================================================
 * Types
 *==========================================================================*/

#define WORDS 8
#define STREAM_BITS 511 /* bits 1 ... 511 */
#define FROZEN UINT64_C(1)
#define OVERFLOW_BOUND 1e-7
#define BATCH_AHEAD 16

struct bk_varcount {
    bk__object obj;     /* first: a bk_varcount is also a bk_filter */
    uint64_t *words;    /* blocks * 8 */
    uint64_t blocks;
    uint32_t counters;  /* C per block */
    uint32_t k;
    uint64_t seed;
    uint64_t capacity;
    double target_fpr;
    uint64_t items;
    uint64_t overflows; /* blocks frozen */
    int owns_mem;
};

static const bk__family_ops varcount_ops;

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
    f->overflows++;
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
    if (was_new) f->items++;
    return was_new;
}

static int remove_pos(bk_varcount *f, uint64_t *b, const uint16_t *pos)
{
    if (!contains_pos(f, b, pos)) return BK_ENOTFOUND;
    if (!(b[0] & FROZEN)) {
        for (uint32_t i = 0; i < f->k; i++)
            delete_bit(b, zero_position(b, pos[i]) - 1);
    }
    if (f->items > 0) f->items--;
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

/* Fewest blocks meeting rate p and the overflow bound for (k, C), or 0. */
static uint64_t blocks_for(uint64_t n, double p, uint32_t k, uint32_t c)
{
    double limit = (double)(STREAM_BITS - c) / (double)k; /* keys a block holds */
    if (limit < 1.0) return 0;
    /* fits() is monotone in the block count, so the search may start where
     * a block's mean load is the most it can hold (far cheaper sums than at
     * hi = 1); lo = 0 is never evaluated */
    uint64_t lo = 0, hi = (uint64_t)((double)n / limit);
    if (hi < 1) hi = 1;
    for (;;) {
        double lambda = (double)n / (double)hi;
        if (bk__dl_blocked_fpr(lambda, c, k) <= p &&
            bk__dl_poisson_tail(lambda, limit) <= OVERFLOW_BOUND)
            break;
        lo = hi;
        if (hi >= BK_VARCOUNT_MAX_BLOCKS) return 0;
        hi *= 2;
    }
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        double lambda = (double)n / (double)mid;
        if (bk__dl_blocked_fpr(lambda, c, k) <= p &&
            bk__dl_poisson_tail(lambda, limit) <= OVERFLOW_BOUND)
            hi = mid;
        else
            lo = mid;
    }
    return hi <= BK_VARCOUNT_MAX_BLOCKS ? hi : 0;
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

static int create_filter(bk_varcount **out, uint64_t blocks, uint32_t counters,
                         uint32_t k, uint64_t seed, uint64_t capacity, double fpr)
{
    if (blocks > SIZE_MAX / 64) return BK_ESIZE;
    bk_varcount *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) goto fail;
    f->words = bk__calloc_aligned((size_t)blocks * 64);
    if (f->words == NULL) goto fail;
    bk__object_init(&f->obj, &varcount_ops);
    f->owns_mem = 1;
    f->blocks = blocks;
    f->counters = counters;
    f->k = k;
    f->seed = seed;
    f->capacity = capacity;
    f->target_fpr = fpr;
    *out = f;
    return BK_OK;

fail:
    bk__free(f);
    return BK_ENOMEM;
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
    return create_filter(out, blocks, c, k, seed, capacity, fpr);
}

void bk_varcount_free(bk_varcount *f)
{
    if (f == NULL) return;
    if (f->owns_mem) bk__free_aligned(f->words);
    bk__object_release(&f->obj);
    bk__free(f);
}

uint64_t bk_varcount_blocks(const bk_varcount *f) { return f->blocks; }
uint32_t bk_varcount_counters(const bk_varcount *f) { return f->counters; }
uint32_t bk_varcount_hashes(const bk_varcount *f) { return f->k; }

int bk_varcount_get_stats(const bk_varcount *f, bk_delete_stats *out)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    memset(out, 0, sizeof(*out));
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
    out->capacity = f->capacity;
    out->target_fpr = f->target_fpr;
    out->seed = f->seed;
    out->hashes = f->k;
    out->items = f->items;
    out->table_bits = f->blocks * 512;
    out->bits_per_key = f->capacity ? (double)out->table_bits / (double)f->capacity : 0.0;
    out->fpr_at_capacity = f->capacity
        ? bk__dl_blocked_fpr((double)f->capacity / (double)f->blocks, f->counters, f->k)
        : 0.0;
    out->fpr_now = sum / (double)f->blocks;
    out->overflows = f->overflows;
    out->bytes = sizeof(*f) + (size_t)f->blocks * 64 + BK_CACHE_LINE;
    return BK_OK;
}

/*==========================================================================
 * The generic filter and the file format
 *==========================================================================*/

BK__FAMILY_CASTS(varcount, varcount_ops)

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

static int64_t run_batch(bk_varcount *f, const void *const *keys,
                         const size_t *lens, size_t n, uint8_t *results,
                         int is_add)
{
    bk_hash ring[BATCH_AHEAD];
    int64_t hits = 0;
    size_t ahead = n < BATCH_AHEAD ? n : BATCH_AHEAD;
    for (size_t i = 0; i < ahead; i++) {
        ring[i] = bk_hash_key(keys[i], lens[i], f->seed);
        BK_PREFETCH_WRITE(block_of(f, ring[i]));
    }
    for (size_t i = 0; i < n; i++) {
        bk_hash h = ring[i % BATCH_AHEAD];
        size_t next = i + BATCH_AHEAD;
        if (next < n) {
            bk_hash hn = bk_hash_key(keys[next], lens[next], f->seed);
            ring[i % BATCH_AHEAD] = hn;
            BK_PREFETCH_WRITE(block_of(f, hn));
        }
        int r = is_add ? ops_add(f, h) : ops_contains(f, h);
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
    return run_batch((bk_varcount *)f, keys, lens, n, results, 0);
}

static uint64_t ops_seed(const void *f) { return ((const bk_varcount *)f)->seed; }
static void ops_destroy(void *f) { bk_varcount_free(f); }
static uint32_t ops_nparts(const void *f) { (void)f; return 1; }

static void ops_clear(void *vf)
{
    bk_varcount *f = vf;
    memset(f->words, 0, (size_t)f->blocks * 64);
    f->items = 0;
}

static int ops_clone(const void *vf, void **out)
{
    const bk_varcount *src = vf;
    bk_varcount *f;
    int rc = create_filter(&f, src->blocks, src->counters, src->k, src->seed,
                           src->capacity, src->target_fpr);
    if (rc != BK_OK) return rc;
    memcpy(f->words, src->words, (size_t)src->blocks * 64);
    f->items = src->items;
    f->overflows = src->overflows;
    *out = f;
    return BK_OK;
}

static int ops_info(const void *vf, bk_filter_info *out)
{
    const bk_varcount *f = vf;
    bk_delete_stats st;
    int rc = bk_varcount_get_stats(f, &st);
    if (rc != BK_OK) return rc;
    bk__info_from_delete_stats(&st, f->capacity ? (double)st.items / (double)f->capacity : 0.0, out);
    return BK_OK;
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
    bk__part *p = &img->parts[0];
    img->seed = f->seed;
    img->capacity = p->capacity = f->capacity;
    img->fpr = p->fpr = f->target_fpr;
    img->items = p->items = f->items;
    img->param[0] = f->overflows;
    p->m = f->blocks;
    p->k = f->k;
    p->param = f->counters;
    p->data = f->words;
    p->length = f->blocks * 64;
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
    if (img->nparts != 1) return BK_ECORRUPT;
    if (p->m == 0 || p->m > BK_VARCOUNT_MAX_BLOCKS || p->length != p->m * 64 ||
        p->param < 1 || p->param > STREAM_BITS - 1 || p->k == 0 ||
        p->k > BK_VARCOUNT_MAX_HASHES || p->k > p->param)
        return BK_ECORRUPT;
    if (!bk__valid_stored_fpr(img->fpr) || (img->fpr == 0.0) != (img->capacity == 0))
        return BK_ECORRUPT;
    const uint64_t *words = p->data;
    for (uint64_t i = 0; i < p->m; i++)
        if (!valid_block(words + i * WORDS, (uint32_t)p->param)) return BK_ECORRUPT;
    bk_varcount *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &varcount_ops);
    f->words = p->data;
    f->owns_mem = 0;
    f->blocks = p->m;
    f->counters = (uint32_t)p->param;
    f->k = p->k;
    f->seed = img->seed;
    f->capacity = img->capacity;
    f->target_fpr = img->fpr;
    f->items = img->items;
    f->overflows = img->param[0];
    *out = f;
    return BK_OK;
}


/* The handle and, unless borrowed from a loaded block, the blocks. */
static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_varcount *f = vf;
    visit(ctx, f, sizeof(*f));
    if (f->owns_mem)
        visit(ctx, bk__aligned_raw(f->words), bk__aligned_asked((size_t)f->blocks * 64));
}

static const bk__family_ops varcount_ops = {
    .family = BK_FAMILY_VARCOUNT,
    .name = "varcount",
    .add = ops_add,
    .contains = ops_contains,
    .remove = ops_remove,
    .count = ops_count,
    .add_batch = ops_add_batch,
    .contains_batch = ops_contains_batch,
    .lockfree_add = 0,
    .seed = ops_seed,
    .destroy = ops_destroy,
    .info = ops_info,
    .allocations = ops_allocations,
    .create = ops_create,
    .clone = ops_clone,
    .clear = ops_clear,
    .merge = NULL,
    .incompatibility = NULL,
    .nparts = ops_nparts,
    .describe = ops_describe,
    .restore = ops_restore,
};

const bk__family_ops *const bk__varcount_family = &varcount_ops;
