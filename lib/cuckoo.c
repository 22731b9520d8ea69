/*
 * cuckoo.c - the cuckoo filter (Fan, Andersen, Kaminsky & Mitzenmacher,
 * "Cuckoo Filter: Practically Better Than Bloom", CoNEXT 2014).
 *
 * Structure
 *   A table of B = 2^j buckets of b slots (b = 2, 4 or 8); a slot holds an
 *   f-bit fingerprint (4..32 bits; 8, 12 and 16 are the usual ones) or 0 for
 *   "empty". Slots are bit-packed with no padding: slot s of bucket i starts
 *   at bit (i b + s) f of a little-endian byte array, so a 12-bit
 *   fingerprint costs 12 bits; a slot is read with one unaligned 64-bit
 *   load, shift and mask (8 spare bytes at the end keep the last load in
 *   bounds). A key's hash h (XXH3-128, filter seed) gives
 *       fingerprint  fp = 1 + fastrange(h.hi, 2^f - 1)     (never 0)
 *       first bucket i1 = h.lo & (B - 1)
 *       other bucket i2 = i1 XOR (mix(fp) & (B - 1))
 *   (partial-key cuckoo hashing): i1 = i2 XOR mix(fp) as well, so a stored
 *   fingerprint can move to its other bucket without its key. The mask, not
 *   fastrange, is what makes the XOR an involution: hence B a power of two.
 *
 * Paired buckets (b = 2, f = 8: RedisBloom's default shape)
 *   Two 8-bit slots are stored as one 15-bit code: fingerprints take the
 *   values 1..254, a bucket is the unordered pair {x <= y} of its slots
 *   (0 = empty) and its code is y (y + 1) / 2 + x < 32640 <= 2^15, so the
 *   table is 15 bits a bucket instead of 16 (the semi-sorting of Fan et
 *   al., section 5.2, for two slots). Slot 0 is the smaller fingerprint, so
 *   writing one slot may reorder the bucket: relocation undoes by value.
 *
 * False positives
 *   An absent key matches when one of the up to 2b fingerprints in its two
 *   buckets equals its own: fpr = 1 - (1 - 1/(2^f - 1))^(2 b load)
 *   ~ 2 b load / 2^f (Fan et al., section 5.1). Bits per key are f / load,
 *   so at b = 4, load 0.95: f = 12 gives 0.19% for 12.6 bits/key, f = 13
 *   gives 0.09% for 13.7 bits/key (a Bloom filter needs 14.4 for 0.1%).
 *   The paper's semi-sorting (one bit per item saved at b = 4) is not
 *   implemented.
 *
 * Relocation ("kicks") and fullness
 *   When both buckets are full the add walks: at each step it first looks
 *   for a resident of the current bucket whose other bucket has a free slot
 *   and moves it there (a one-step breadth-first lookahead, which reaches
 *   higher loads than the paper's pure random walk for the same budget);
 *   failing that it evicts a resident chosen by the filter's own PRNG, puts
 *   the homeless fingerprint in its place and carries the evicted one to
 *   its other bucket. Every eviction is logged (the bucket, the fingerprint
 *   placed and the one evicted; on the stack up to 512 steps, else in a
 *   buffer allocated for that add). After max_kicks steps without a
 *   free slot the log is replayed backwards, restoring the table exactly,
 *   and the add returns BK_EFULL: nothing stored is ever lost, and a later
 *   add may still succeed. The table reaches about 88% (b = 2), 97% (b = 4)
 *   and 99% (b = 8) load before the first failure (tests/test_cuckoo.c).
 *
 * Duplicates
 *   Adding a key again stores another copy of its fingerprint, so count and
 *   remove work on multisets, but a key's two buckets hold at most 2b
 *   copies (b when i1 = i2). The add that would need more returns
 *   BK_ECOPIES before touching the table.
 *
 * Concurrency
 *   Lookups read and write nothing shared: any number may run at once.
 *   Writers change several slots (a relocation path) non-atomically and use
 *   the filter's PRNG, so they need external serialisation
 *   against each other and against readers (a reader-writer lock). The
 *   server's single-threaded event loop needs nothing.
 *
 * Memory (bk_cuckoo_bytes: bytes asked of the allocator)
 *   One allocation: the 104-byte handle, the table and 8 bytes of padding
 *   (a loaded filter reports the same; it borrows the file's block). So
 *   RedisBloom's CF.RESERVE k 1000 (512 buckets of 2, 8-bit fingerprints)
 *   is 104 + 960 + 8 = 1072 bytes.
 *
 * What it cannot do
 *   Grow (the CF commands chain filters), hold more than 2b copies of a
 *   key, or tell a false positive from a present key on remove.
 */
#include <math.h>   /* expm1, log1p */
#include <string.h> /* memset, memcpy */

#include "filter.h"
#include "hash.h"

/*==========================================================================
 * Types
 *==========================================================================*/

typedef struct kick {
    uint64_t bucket;
    uint32_t placed;  /* the fingerprint put into the bucket */
    uint32_t evicted; /* the one it replaced */
} kick;

struct bk_cuckoo {
    bk__object obj;        /* first: a bk_cuckoo is also a bk_filter */
    unsigned char *table;  /* table_bytes(f) + 8: after the struct, or borrowed */
    uint64_t mask;         /* buckets - 1 (buckets a power of two) */
    uint64_t seed;
    uint64_t capacity;     /* 0 if unknown */
    double target_fpr;     /* 0 if unknown */
    uint64_t items;
    uint64_t relocations;
    uint64_t rng;          /* xorshift64 state of the eviction choice */
    uint32_t max_kicks;
    uint8_t b;             /* slots per bucket */
    uint8_t f;             /* fingerprint bits */
    uint8_t paired;        /* b = 2, f = 8 as 15-bit pair codes */
    uint8_t owns_mem;      /* 0 when the table lives in a loaded block or mapping */
};

#define PAIR_BITS 15
#define PAIR_VALUES 254    /* fingerprints 1..254 in a paired bucket */
#define PAIR_CODES 32640   /* 255 * 256 / 2 */
#define PART_PAIRED 1u     /* part flags: the table holds pair codes */
#define PATH_STACK 512     /* relocation log entries kept on the stack */

static const bk__family_ops cuckoo_ops; /* at the end of this file */

/* Spare bytes after the table, so the 64-bit load of the last slot stays
 * inside the allocation. */
#define TABLE_PAD 8

#define BATCH_AHEAD 16

/* The largest load the sizing plans for, per bucket size: a little under
 * the load at which the first add fails with 500 kicks (measured by
 * tests/test_cuckoo.c, 4 seeds: 0.88 for b = 2, 0.974 for b = 4,
 * 0.996 for b = 8). */
typedef struct bucket_info {
    uint32_t slots;
    double planned_load;
} bucket_info;

static const bucket_info BUCKET_SIZES[] = {
    {2, 0.84},
    {4, 0.95},
    {8, 0.97},
};

/* Fingerprint widths tried, in order, when none is given. */
static const uint32_t AUTO_WIDTHS[] = {8, 12, 16, 17, 18, 19, 20, 21, 22, 23,
                                       24, 25, 26, 27, 28, 29, 30, 31, 32};

#define MIN_FP_BITS 4
#define MAX_FP_BITS 32

/*==========================================================================
 * Internals: packed slots
 *==========================================================================*/

static inline uint64_t load_le64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void store_le64(unsigned char *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, sizeof(v));
}

static inline uint64_t buckets_of(const bk_cuckoo *f) { return f->mask + 1; }
static inline uint64_t fp_mask_of(const bk_cuckoo *f) { return (UINT64_C(1) << f->f) - 1; }

static inline uint64_t bucket_bits(uint32_t b, uint32_t fbits, int paired)
{
    return paired ? PAIR_BITS : (uint64_t)b * fbits;
}

/* ceil(buckets * bits per bucket / 8) */
static inline uint64_t table_bytes_for(uint64_t buckets, uint32_t b, uint32_t fbits,
                                       int paired)
{
    return (buckets * bucket_bits(b, fbits, paired) + 7) / 8;
}

static inline size_t table_bytes(const bk_cuckoo *f)
{
    return (size_t)table_bytes_for(buckets_of(f), f->b, f->f, f->paired);
}

/* An n-bit field (n <= 32) at bit offset pos of the table. */
static inline uint32_t get_bits(const bk_cuckoo *f, uint64_t pos, uint32_t n)
{
    return (uint32_t)((load_le64(f->table + (pos >> 3)) >> (pos & 7)) &
                      ((UINT64_C(1) << n) - 1));
}

static inline void set_bits(bk_cuckoo *f, uint64_t pos, uint32_t n, uint32_t v)
{
    unsigned char *p = f->table + (pos >> 3);
    unsigned shift = (unsigned)(pos & 7);
    uint64_t m = ((UINT64_C(1) << n) - 1) << shift;
    store_le64(p, (load_le64(p) & ~m) | ((uint64_t)v << shift));
}

/* The pair code of a bucket and back: code = y (y + 1) / 2 + x, x <= y. */
static inline void pair_decode(uint32_t code, uint32_t out[2])
{
    uint32_t y = (uint32_t)((sqrt(8.0 * code + 1.0) - 1.0) / 2.0);
    while (y * (y + 1) / 2 > code) y--;
    while ((y + 1) * (y + 2) / 2 <= code) y++;
    out[0] = code - y * (y + 1) / 2;
    out[1] = y;
}

static inline uint32_t pair_encode(uint32_t x, uint32_t y)
{
    if (x > y) {
        uint32_t t = x;
        x = y;
        y = t;
    }
    return y * (y + 1) / 2 + x;
}

/* All b slots of a bucket. */
static inline void load_bucket(const bk_cuckoo *f, uint64_t bucket, uint32_t *out)
{
    if (f->paired) {
        pair_decode(get_bits(f, bucket * PAIR_BITS, PAIR_BITS), out);
        return;
    }
    for (uint32_t s = 0; s < f->b; s++)
        out[s] = get_bits(f, (bucket * f->b + s) * f->f, f->f);
}

static inline uint32_t get_slot(const bk_cuckoo *f, uint64_t bucket,
                                uint32_t slot)
{
    if (f->paired) {
        uint32_t pair[2];
        load_bucket(f, bucket, pair);
        return pair[slot];
    }
    return get_bits(f, (bucket * f->b + slot) * f->f, f->f);
}

/* Write slot `slot`; in a paired bucket the two slots may swap places. */
static inline void set_slot(bk_cuckoo *f, uint64_t bucket, uint32_t slot,
                            uint32_t fp)
{
    if (f->paired) {
        uint32_t pair[2];
        load_bucket(f, bucket, pair);
        pair[slot] = fp;
        set_bits(f, bucket * PAIR_BITS, PAIR_BITS, pair_encode(pair[0], pair[1]));
        return;
    }
    set_bits(f, (bucket * f->b + slot) * f->f, f->f, fp);
}

/* First slot of bucket holding fp (0: an empty slot), or -1. */
static inline int find_slot(const bk_cuckoo *f, uint64_t bucket, uint32_t fp)
{
    uint32_t slots[8];
    load_bucket(f, bucket, slots);
    for (uint32_t s = 0; s < f->b; s++)
        if (slots[s] == fp) return (int)s;
    return -1;
}

static inline uint32_t count_in(const bk_cuckoo *f, uint64_t bucket,
                                uint32_t fp)
{
    uint32_t slots[8], n = 0;
    load_bucket(f, bucket, slots);
    for (uint32_t s = 0; s < f->b; s++) n += slots[s] == fp;
    return n;
}

/*==========================================================================
 * Internals: hashing
 *==========================================================================*/

typedef struct position {
    uint32_t fp;
    uint64_t i1, i2;
} position;

/* A 64-bit finaliser (Stafford's mix 13): every fingerprint bit affects
 * every bit of the offset, so small tables still spread the alternates. */
static inline uint64_t mix_fingerprint(uint32_t fp)
{
    uint64_t z = (uint64_t)fp * UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static inline uint64_t alt_bucket(const bk_cuckoo *f, uint64_t bucket,
                                  uint32_t fp)
{
    return (bucket ^ mix_fingerprint(fp)) & f->mask;
}

static inline position locate(const bk_cuckoo *f, bk_hash h)
{
    position p;
    p.fp = (uint32_t)(1 + bk__fastrange64(h.hi, f->paired ? PAIR_VALUES : fp_mask_of(f)));
    p.i1 = h.lo & f->mask;
    p.i2 = alt_bucket(f, p.i1, p.fp);
    return p;
}

static inline uint64_t next_random(bk_cuckoo *f)
{
    uint64_t x = f->rng; /* xorshift64 (Marsaglia 2003); never 0 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return f->rng = x;
}

/*==========================================================================
 * Internals: insertion and relocation
 *==========================================================================*/

/* Put fp into a free slot of bucket; 1 on success. */
static inline int put_if_room(bk_cuckoo *f, uint64_t bucket, uint32_t fp)
{
    int s = find_slot(f, bucket, 0);
    if (s < 0) return 0;
    set_slot(f, bucket, (uint32_t)s, fp);
    return 1;
}

/* Place fp, homeless, starting from the full bucket `bucket`. BK_OK, or
 * BK_EFULL (or BK_ENOMEM for a log of more than PATH_STACK steps) with the
 * table exactly as before. */
static int relocate(bk_cuckoo *f, uint64_t bucket, uint32_t fp)
{
    kick stack_path[PATH_STACK];
    kick *path = stack_path;
    if (f->max_kicks > PATH_STACK) {
        path = bk__malloc((size_t)f->max_kicks * sizeof(kick));
        if (path == NULL) return BK_ENOMEM;
    }
    uint32_t depth = 0;
    int rc = BK_EFULL;
    for (uint32_t step = 0; step < f->max_kicks; step++) {
        /* lookahead: a resident whose other bucket has room */
        for (uint32_t s = 0; s < f->b; s++) {
            uint32_t resident = get_slot(f, bucket, s);
            if (put_if_room(f, alt_bucket(f, bucket, resident), resident)) {
                set_slot(f, bucket, s, fp);
                f->relocations += depth + 1;
                rc = BK_OK;
                goto done;
            }
        }
        /* evict a random resident and carry it to its other bucket */
        uint32_t s = (uint32_t)(next_random(f) % f->b);
        uint32_t evicted = get_slot(f, bucket, s);
        path[depth].bucket = bucket;
        path[depth].placed = fp;
        path[depth].evicted = evicted;
        depth++;
        set_slot(f, bucket, s, fp);
        fp = evicted;
        bucket = alt_bucket(f, bucket, evicted);
        /* the lookahead above saw this bucket full: no put_if_room here */
    }
    while (depth > 0) { /* undo, newest first, by value (slots may move) */
        depth--;
        int s = find_slot(f, path[depth].bucket, path[depth].placed);
        set_slot(f, path[depth].bucket, (uint32_t)s, path[depth].evicted);
    }
done:
    if (path != stack_path) bk__free(path);
    return rc;
}

static int add_position(bk_cuckoo *f, position p)
{
    uint32_t copies = count_in(f, p.i1, p.fp);
    uint32_t room = f->b;
    if (p.i2 != p.i1) {
        copies += count_in(f, p.i2, p.fp);
        room = 2 * f->b;
    }
    if (copies >= room) return BK_ECOPIES;

    if (put_if_room(f, p.i1, p.fp) || put_if_room(f, p.i2, p.fp)) {
        f->items++;
        return BK_OK;
    }
    int rc = relocate(f, (next_random(f) & 1) ? p.i2 : p.i1, p.fp);
    if (rc == BK_OK) f->items++;
    return rc;
}

static inline int contains_position(const bk_cuckoo *f, position p)
{
    return find_slot(f, p.i1, p.fp) >= 0 || find_slot(f, p.i2, p.fp) >= 0;
}

/*==========================================================================
 * Internals: sizing
 *==========================================================================*/

static const bucket_info *find_bucket_size(uint32_t b)
{
    if (b == 0) b = BK_CUCKOO_DEFAULT_BUCKET_SIZE;
    for (size_t i = 0; i < sizeof(BUCKET_SIZES) / sizeof(BUCKET_SIZES[0]); i++)
        if (BUCKET_SIZES[i].slots == b) return &BUCKET_SIZES[i];
    return NULL;
}

static int valid_fp_bits(uint32_t f)
{
    return f >= MIN_FP_BITS && f <= MAX_FP_BITS;
}

double bk_cuckoo_fpr(uint64_t n, uint64_t buckets, uint32_t bucket_size,
                     uint32_t fingerprint_bits)
{
    if (buckets == 0 || find_bucket_size(bucket_size) == NULL ||
        bucket_size == 0 || !valid_fp_bits(fingerprint_bits))
        return NAN;
    double load = (double)n / ((double)buckets * bucket_size);
    /* nonzero fingerprints: 2^f - 1, or 254 in paired buckets (b 2, f 8) */
    double values = (bucket_size == 2 && fingerprint_bits == 8)
                        ? PAIR_VALUES
                        : ldexp(1.0, (int)fingerprint_bits) - 1.0;
    return -expm1(2.0 * bucket_size * load * log1p(-1.0 / values));
}

int bk_cuckoo_optimal(uint64_t n, double p, uint32_t bucket_size,
                      uint32_t fingerprint_bits, uint64_t *buckets,
                      uint32_t *fingerprint_bits_out)
{
    if (n == 0) return BK_ECAPACITY;
    if (bk__check_fpr(p) != BK_OK) return BK_EFPR;
    const bucket_info *bi = find_bucket_size(bucket_size);
    if (bi == NULL) return BK_EPARAM;
    if (fingerprint_bits != 0 && !valid_fp_bits(fingerprint_bits))
        return BK_EPARAM;

    double wanted = ceil((double)n / (bi->slots * bi->planned_load));
    if (!(wanted <= (double)BK_CUCKOO_MAX_BUCKETS)) return BK_ESIZE;
    uint64_t nb = 1;
    while ((double)nb < wanted) nb <<= 1;

    uint32_t f = fingerprint_bits;
    for (size_t i = 0; f == 0 && i < sizeof(AUTO_WIDTHS) / sizeof(*AUTO_WIDTHS);
         i++)
        if (bk_cuckoo_fpr(n, nb, bi->slots, AUTO_WIDTHS[i]) <= p)
            f = AUTO_WIDTHS[i];
    if (f == 0) return BK_EFPR;

    if (buckets != NULL) *buckets = nb;
    if (fingerprint_bits_out != NULL) *fingerprint_bits_out = f;
    return BK_OK;
}

/*==========================================================================
 * API: life cycle
 *==========================================================================*/

/* paired: store pair codes (only b = 2, f = 8; new filters of that shape
 * always are, loaded ones keep what their file says). */
static int create_filter(bk_cuckoo **out, uint64_t buckets, uint32_t b,
                         uint32_t fp_bits, uint32_t max_kicks, uint64_t seed,
                         uint64_t capacity, double target_fpr, int paired)
{
    bk_cuckoo *f = NULL;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (buckets == 0 || buckets > BK_CUCKOO_MAX_BUCKETS ||
        (buckets & (buckets - 1)) != 0)
        return BK_ESIZE;
    if (find_bucket_size(b) == NULL || b == 0) return BK_EPARAM;
    if (!valid_fp_bits(fp_bits)) return BK_EPARAM;
    if (max_kicks == 0) max_kicks = BK_CUCKOO_DEFAULT_MAX_KICKS;
    if (max_kicks > BK_CUCKOO_MAX_KICKS) return BK_EPARAM;

    paired = paired && b == 2 && fp_bits == 8;
    uint64_t bytes = table_bytes_for(buckets, b, fp_bits, paired); /* <= 2^45 */
    if (bytes > SIZE_MAX - TABLE_PAD - sizeof(*f)) return BK_ESIZE;

    /* one allocation: the handle, then the table and its padding */
    f = bk__calloc(1, sizeof(*f) + (size_t)bytes + TABLE_PAD);
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &cuckoo_ops);
    f->table = (unsigned char *)(f + 1);
    f->owns_mem = 1;
    f->mask = buckets - 1;
    f->b = (uint8_t)b;
    f->f = (uint8_t)fp_bits;
    f->paired = (uint8_t)paired;
    f->max_kicks = max_kicks;
    f->seed = seed;
    f->capacity = capacity;
    f->target_fpr = target_fpr;
    f->rng = (seed ^ UINT64_C(0x5851F42D4C957F2D)) | 1;
    *out = f;
    return BK_OK;
}

int bk_cuckoo_create(bk_cuckoo **out, uint64_t capacity, double fpr,
                     const bk_cuckoo_options *opts, uint64_t seed)
{
    static const bk_cuckoo_options defaults = {0, 0, 0};
    uint64_t buckets;
    uint32_t fp_bits;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (opts == NULL) opts = &defaults;
    uint32_t b = opts->bucket_size ? opts->bucket_size
                                   : BK_CUCKOO_DEFAULT_BUCKET_SIZE;
    int rc = bk_cuckoo_optimal(capacity, fpr, b, opts->fingerprint_bits,
                               &buckets, &fp_bits);
    if (rc != BK_OK) return rc;
    return create_filter(out, buckets, b, fp_bits, opts->max_kicks, seed,
                         capacity, fpr, 1);
}

int bk_cuckoo_create_params(bk_cuckoo **out, uint64_t buckets,
                            uint32_t bucket_size, uint32_t fingerprint_bits,
                            uint32_t max_kicks, uint64_t seed)
{
    return create_filter(out, buckets, bucket_size, fingerprint_bits,
                         max_kicks, seed, 0, 0.0, 1);
}

void bk_cuckoo_free(bk_cuckoo *f)
{
    if (f == NULL) return;
    bk__object_release(&f->obj);
    bk__free(f);
}

int bk_cuckoo_clone(bk_cuckoo **out, const bk_cuckoo *src)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (src == NULL) return BK_EINVAL;
    int rc = create_filter(out, buckets_of(src), src->b, src->f, src->max_kicks,
                           src->seed, src->capacity, src->target_fpr, src->paired);
    if (rc != BK_OK) return rc;
    memcpy((*out)->table, src->table, table_bytes(src));
    (*out)->items = src->items;
    (*out)->relocations = src->relocations;
    (*out)->rng = src->rng;
    return BK_OK;
}

void bk_cuckoo_clear(bk_cuckoo *f)
{
    if (f == NULL) return;
    memset(f->table, 0, table_bytes(f) + TABLE_PAD);
    f->items = 0;
    f->relocations = 0;
}

/*==========================================================================
 * API: single keys
 *==========================================================================*/

int bk_cuckoo_add_hash(bk_cuckoo *f, bk_hash h)
{
    return add_position(f, locate(f, h));
}

int bk_cuckoo_add_unique_hash(bk_cuckoo *f, bk_hash h)
{
    position p = locate(f, h);
    if (contains_position(f, p)) return 0;
    int rc = add_position(f, p);
    return rc == BK_OK ? 1 : rc;
}

int bk_cuckoo_remove_hash(bk_cuckoo *f, bk_hash h)
{
    position p = locate(f, h);
    int s = find_slot(f, p.i1, p.fp);
    uint64_t bucket = p.i1;
    if (s < 0) {
        s = find_slot(f, p.i2, p.fp);
        bucket = p.i2;
    }
    if (s < 0) return BK_ENOTFOUND;
    set_slot(f, bucket, (uint32_t)s, 0);
    f->items--;
    return BK_OK;
}

int bk_cuckoo_contains_hash(const bk_cuckoo *f, bk_hash h)
{
    return contains_position(f, locate(f, h));
}

uint32_t bk_cuckoo_count_hash(const bk_cuckoo *f, bk_hash h)
{
    position p = locate(f, h);
    uint32_t n = count_in(f, p.i1, p.fp);
    if (p.i2 != p.i1) n += count_in(f, p.i2, p.fp);
    return n;
}

int bk_cuckoo_add(bk_cuckoo *f, const void *key, size_t len)
{
    return bk_cuckoo_add_hash(f, bk_hash_key(key, len, f->seed));
}

int bk_cuckoo_add_unique(bk_cuckoo *f, const void *key, size_t len)
{
    return bk_cuckoo_add_unique_hash(f, bk_hash_key(key, len, f->seed));
}

int bk_cuckoo_remove(bk_cuckoo *f, const void *key, size_t len)
{
    return bk_cuckoo_remove_hash(f, bk_hash_key(key, len, f->seed));
}

int bk_cuckoo_contains(const bk_cuckoo *f, const void *key, size_t len)
{
    return bk_cuckoo_contains_hash(f, bk_hash_key(key, len, f->seed));
}

uint32_t bk_cuckoo_count(const bk_cuckoo *f, const void *key, size_t len)
{
    return bk_cuckoo_count_hash(f, bk_hash_key(key, len, f->seed));
}

/*==========================================================================
 * API: batches (hash ahead, prefetch both buckets)
 *==========================================================================*/

static inline void prefetch_position(const bk_cuckoo *f, position p)
{
    uint64_t bits = bucket_bits(f->b, f->f, f->paired);
    BK_PREFETCH_READ(f->table + ((p.i1 * bits) >> 3));
    BK_PREFETCH_READ(f->table + ((p.i2 * bits) >> 3));
}

int64_t bk_cuckoo_add_batch(bk_cuckoo *f, const void *const *keys,
                            const size_t *lens, size_t n, int *results)
{
    position ring[BATCH_AHEAD];
    int64_t added = 0;
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;

    size_t ahead = n < BATCH_AHEAD ? n : BATCH_AHEAD;
    for (size_t i = 0; i < ahead; i++) {
        ring[i] = locate(f, bk_hash_key(keys[i], lens[i], f->seed));
        prefetch_position(f, ring[i]);
    }
    for (size_t i = 0; i < n; i++) {
        position p = ring[i % BATCH_AHEAD];
        size_t next = i + BATCH_AHEAD;
        if (next < n) {
            ring[i % BATCH_AHEAD] =
                locate(f, bk_hash_key(keys[next], lens[next], f->seed));
            prefetch_position(f, ring[i % BATCH_AHEAD]);
        }
        int rc = add_position(f, p);
        added += rc == BK_OK;
        if (results != NULL) results[i] = rc;
    }
    return added;
}

int64_t bk_cuckoo_contains_batch(const bk_cuckoo *f, const void *const *keys,
                                 const size_t *lens, size_t n,
                                 uint8_t *results)
{
    position ring[BATCH_AHEAD];
    int64_t hits = 0;
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;

    size_t ahead = n < BATCH_AHEAD ? n : BATCH_AHEAD;
    for (size_t i = 0; i < ahead; i++) {
        ring[i] = locate(f, bk_hash_key(keys[i], lens[i], f->seed));
        prefetch_position(f, ring[i]);
    }
    for (size_t i = 0; i < n; i++) {
        position p = ring[i % BATCH_AHEAD];
        size_t next = i + BATCH_AHEAD;
        if (next < n) {
            ring[i % BATCH_AHEAD] =
                locate(f, bk_hash_key(keys[next], lens[next], f->seed));
            prefetch_position(f, ring[i % BATCH_AHEAD]);
        }
        int r = contains_position(f, p);
        hits += r;
        if (results != NULL) results[i] = (uint8_t)r;
    }
    return hits;
}

/*==========================================================================
 * API: statistics
 *==========================================================================*/

uint64_t bk_cuckoo_buckets(const bk_cuckoo *f) { return buckets_of(f); }
uint32_t bk_cuckoo_bucket_size(const bk_cuckoo *f) { return f->b; }
uint32_t bk_cuckoo_fingerprint_bits(const bk_cuckoo *f) { return f->f; }
uint32_t bk_cuckoo_max_kicks(const bk_cuckoo *f) { return f->max_kicks; }
uint64_t bk_cuckoo_seed(const bk_cuckoo *f) { return f->seed; }
uint64_t bk_cuckoo_items(const bk_cuckoo *f) { return f->items; }

/* Exact for a created filter; a loaded one (holding the file's payload
 * block instead) reports the same, so CF.INFO Size survives a reload. */
size_t bk_cuckoo_bytes(const bk_cuckoo *f)
{
    return sizeof(*f) + table_bytes(f) + TABLE_PAD;
}

int bk_cuckoo_get_stats(const bk_cuckoo *f, bk_cuckoo_stats *out)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    memset(out, 0, sizeof(*out));
    out->buckets = buckets_of(f);
    out->bucket_size = f->b;
    out->fingerprint_bits = f->f;
    out->max_kicks = f->max_kicks;
    out->seed = f->seed;
    out->capacity = f->capacity;
    out->target_fpr = f->target_fpr;
    out->items = f->items;
    out->slots = buckets_of(f) * f->b;
    out->load_factor = (double)f->items / (double)out->slots;
    out->fpr_now = bk_cuckoo_fpr(f->items, buckets_of(f), f->b, f->f);
    out->relocations = f->relocations;
    out->bytes = bk_cuckoo_bytes(f);
    out->bits_per_item =
        f->items ? (double)out->slots * f->f / (double)f->items : 0.0;
    return BK_OK;
}

/*==========================================================================
 * The generic filter and the file format
 *==========================================================================*/

BK__FAMILY_CASTS(cuckoo, cuckoo_ops)

static uint64_t ops_seed(const void *f) { return ((const bk_cuckoo *)f)->seed; }
static void ops_destroy(void *f) { bk_cuckoo_free(f); }
static uint32_t ops_nparts(const void *f) { (void)f; return 1; }
static void ops_clear(void *f) { bk_cuckoo_clear(f); }
static int ops_clone(const void *f, void **out) { return bk_cuckoo_clone((bk_cuckoo **)out, f); }

/* The generic batch stops at the first error (a full table) */
static int64_t ops_add_batch(void *vf, const void *const *keys, const size_t *lens,
                             size_t n, uint8_t *results)
{
    bk_cuckoo *f = vf;
    int64_t added = 0;
    for (size_t i = 0; i < n; i++) {
        int r = bk_cuckoo_add_hash(f, bk_hash_key(keys[i], lens[i], f->seed));
        if (r < 0) return r;
        r = 1; /* stored, as ops_add answers */
        if (results != NULL) results[i] = (uint8_t)r;
        added += r;
    }
    return added;
}

static int64_t ops_contains_batch(const void *f, const void *const *keys,
                                  const size_t *lens, size_t n, uint8_t *results)
{
    return bk_cuckoo_contains_batch(f, keys, lens, n, results);
}

/* Image: one part; m = buckets, width = fingerprint bits, slots = bucket
 * size, param = the eviction generator's state (so a loaded filter makes
 * the same choices as the saved one); header param[0] = max kicks,
 * param[1] = relocations so far. The data is the packed table followed by
 * TABLE_PAD zero bytes. */

#define LOCKFREE_ADD 0 /* writers need a lock */

/* Every successful cuckoo add stores a copy: the generic add answers 1. */
static int ops_add(void *f, bk_hash h)
{
    int rc = bk_cuckoo_add_hash(f, h);
    return rc < 0 ? rc : 1;
}
static int ops_contains(const void *f, bk_hash h) { return bk_cuckoo_contains_hash(f, h); }
static int ops_remove(void *f, bk_hash h) { return bk_cuckoo_remove_hash(f, h); }
static int64_t ops_count(const void *f, bk_hash h) { return bk_cuckoo_count_hash(f, h); }

static int ops_info(const void *vf, bk_filter_info *out)
{
    bk_cuckoo_stats st;
    int rc = bk_cuckoo_get_stats(vf, &st);
    if (rc != BK_OK) return rc;
    out->seed = st.seed;
    out->capacity = st.capacity;
    out->target_fpr = st.target_fpr;
    out->items = st.items;
    out->estimated_items = (double)st.items;
    out->fpr_now = st.fpr_now;
    out->fpr_at_capacity =
        st.capacity ? bk_cuckoo_fpr(st.capacity, st.buckets, st.bucket_size,
                                    st.fingerprint_bits)
                    : 0.0;
    out->fill = st.load_factor;
    out->bytes = st.bytes;
    out->parts = 1;
    return BK_OK;
}

static int ops_create(const bk_filter_config *cfg, void **out)
{
    bk_cuckoo_options o;
    o.bucket_size = cfg->bucket_size;
    o.fingerprint_bits = cfg->fingerprint_bits;
    o.max_kicks = cfg->max_kicks;
    return bk_cuckoo_create((bk_cuckoo **)out, cfg->capacity, cfg->fpr, &o, cfg->seed);
}

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_cuckoo *f = vf;
    bk__part *p = &img->parts[0];
    img->seed = f->seed;
    img->capacity = p->capacity = f->capacity;
    img->fpr = p->fpr = f->target_fpr;
    img->items = p->items = f->items;
    img->param[0] = f->max_kicks;
    img->param[1] = f->relocations;
    p->m = buckets_of(f);
    p->flags = f->paired ? PART_PAIRED : 0;
    p->width = (uint8_t)f->f;
    p->slots = (uint8_t)f->b;
    p->param = f->rng;
    p->data = f->table;
    p->length = table_bytes(f) + TABLE_PAD;
    return BK_OK;
}

static int ops_restore(const bk__image *img, void **out)
{
    const bk__part *p = &img->parts[0];
    if (img->nparts != 1) return BK_ECORRUPT;
    uint64_t buckets = p->m;
    if (buckets == 0 || buckets > BK_CUCKOO_MAX_BUCKETS || (buckets & (buckets - 1)))
        return BK_ECORRUPT;
    if (find_bucket_size(p->slots) == NULL || p->slots == 0 || !valid_fp_bits(p->width))
        return BK_ECORRUPT;
    if (img->param[0] == 0 || img->param[0] > BK_CUCKOO_MAX_KICKS) return BK_ECORRUPT;
    if (p->flags & ~PART_PAIRED) return BK_ECORRUPT;
    int paired = (p->flags & PART_PAIRED) != 0;
    if (paired && (p->slots != 2 || p->width != 8)) return BK_ECORRUPT;
    uint64_t bytes = table_bytes_for(buckets, p->slots, p->width, paired);
    if (p->length != bytes + TABLE_PAD) return BK_ECORRUPT;
    if (img->items > buckets * p->slots || p->param == 0) return BK_ECORRUPT;
    if (!bk__valid_stored_fpr(img->fpr) || (img->fpr == 0.0) != (img->capacity == 0))
        return BK_ECORRUPT;
    const unsigned char *pad = (const unsigned char *)p->data + bytes;
    for (int i = 0; i < TABLE_PAD; i++)
        if (pad[i] != 0) return BK_ECORRUPT;
    /* bits past the last slot in the last table byte are never set */
    uint64_t used_bits = buckets * bucket_bits(p->slots, p->width, paired);
    if ((used_bits & 7) && (((const unsigned char *)p->data)[bytes - 1] >> (used_bits & 7)) != 0)
        return BK_ECORRUPT;

    bk_cuckoo *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &cuckoo_ops);
    f->owns_mem = 0;
    f->table = p->data;
    f->mask = buckets - 1;
    f->b = p->slots;
    f->f = p->width;
    f->paired = (uint8_t)paired;
    f->max_kicks = (uint32_t)img->param[0];
    f->seed = img->seed;
    f->capacity = img->capacity;
    f->target_fpr = img->fpr;
    f->items = img->items;
    f->relocations = img->param[1];
    f->rng = p->param;
    /* every pair code names two fingerprints of 0..254 */
    for (uint64_t i = 0; paired && i < buckets; i++) {
        if (get_bits(f, i * PAIR_BITS, PAIR_BITS) >= PAIR_CODES) {
            bk__free(f);
            return BK_ECORRUPT;
        }
    }
    *out = f;
    return BK_OK;
}

static const bk__family_ops cuckoo_ops = {
    .family = BK_FAMILY_CUCKOO,
    .name = "cuckoo",
    .add = ops_add,
    .contains = ops_contains,
    .remove = ops_remove,
    .count = ops_count,
    .add_batch = ops_add_batch,
    .contains_batch = ops_contains_batch,
    .lockfree_add = LOCKFREE_ADD,
    .seed = ops_seed,
    .destroy = ops_destroy,
    .info = ops_info,
    .create = ops_create,
    .clone = ops_clone,
    .clear = ops_clear,
    .merge = NULL,
    .incompatibility = NULL,
    .nparts = ops_nparts,
    .describe = ops_describe,
    .restore = ops_restore,
};

const bk__family_ops *const bk__cuckoo_family = &cuckoo_ops;
