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
 * Stages
 *   A filter may hold several tables of the same bucket size and
 *   fingerprint width (bk_cuckoo_add_stage; the CF commands grow this way,
 *   as RedisBloom does): adds go to the newest, lookups and counts look at
 *   every stage, a remove takes one copy from the newest stage holding the
 *   key. A key hashes once; each stage takes its own buckets from the hash
 *   with its own mask, and the fingerprint is the same in every stage.
 *   Adding a stage resets the eviction generator to a new filter's, so a
 *   grown filter behaves exactly like the chain of separate filters it
 *   replaces (bk_cuckoo_append turns such a chain into one filter).
 *
 * Memory (bk_cuckoo_bytes: bytes asked of the allocator)
 *   Two allocations: the 104-byte handle, and the arena: every stage's
 *   table back to back, 8 bytes of padding, then 8 bytes per older stage
 *   (its bucket count and items; see "Internals: stages"). So RedisBloom's
 *   CF.RESERVE k 1000 (512 buckets of 2, 8-bit fingerprints) is
 *   104 + 960 + 8 = 1072 bytes, and CF.RESERVE k 50 grown to 32 stages of
 *   32 buckets is 104 + 32 x 60 + 8 + 31 x 8 = 2280. A filter loaded from a
 *   one-stage image borrows the file's table and padding and reports the
 *   same bytes; a several-stage image is copied into an arena.
 *
 * What it cannot do
 *   Hold more than 2b copies of a key in one stage, or tell a false
 *   positive from a present key on remove.
 */
#include <math.h>   /* expm1, log1p */
#include <string.h> /* memset, memcpy */

#include "family_util.h"
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
    unsigned char *table;  /* the newest stage's table (see "Stages") */
    uint64_t mask;         /* the newest stage's buckets - 1 (a power of two) */
    uint64_t seed;
    uint64_t capacity;     /* 0 if unknown */
    double target_fpr;     /* 0 if unknown */
    uint64_t items;        /* all stages */
    uint64_t relocations;
    uint64_t rng;          /* xorshift64 state of the eviction choice */
    uint32_t max_kicks;
    uint8_t b;             /* slots per bucket */
    uint8_t f;             /* fingerprint bits */
    uint8_t paired;        /* b = 2, f = 8 as 15-bit pair codes */
    uint8_t nstages;       /* 1 .. BK_CUCKOO_MAX_STAGES */
};

#define PAIR_BITS 15
#define PAIR_VALUES 254    /* fingerprints 1..254 in a paired bucket */
#define PAIR_CODES 32640   /* 255 * 256 / 2 */
#define PART_PAIRED 1u     /* part flags: the table holds pair codes */
#define PATH_STACK 512     /* relocation log entries kept on the stack */

static const bk__family_ops cuckoo_ops; /* at the end of this file */

/* The fixed cost bloomkit.h states (for 64-bit pointers): the handle and
 * the padding. */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(struct bk_cuckoo) + 8 == BK_CUCKOO_OVERHEAD_BYTES,
               "bloomkit.h states the cuckoo handle's size");
#endif

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
    return (uint32_t)((bk__loadu_le64(f->table + (pos >> 3)) >> (pos & 7)) &
                      ((UINT64_C(1) << n) - 1));
}

static inline void set_bits(bk_cuckoo *f, uint64_t pos, uint32_t n, uint32_t v)
{
    unsigned char *p = f->table + (pos >> 3);
    unsigned shift = (unsigned)(pos & 7);
    uint64_t m = ((UINT64_C(1) << n) - 1) << shift;
    bk__storeu_le64(p, (bk__loadu_le64(p) & ~m) | ((uint64_t)v << shift));
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
 * Internals: stages
 *==========================================================================*/

/* The memory of a filter that owns its tables (the "arena"):
 *
 *     table 0 | table 1 | ... | table n-1 | TABLE_PAD zero bytes | word 0 .. word n-2
 *
 * Tables are back to back with no padding between them: the 64-bit load of
 * an older stage's last slot reads the next table's first bytes, which the
 * masks discard (and set_bits writes back unchanged). Word j (8 bytes,
 * native order, read with memcpy) describes older stage j: its item count
 * in the low 56 bits and log2 of its bucket count in the top 8. The newest
 * stage needs no word: its table and mask are in the handle and its items
 * are the total minus the older stages'. A filter restored from a one-part
 * image instead borrows the file's table and padding (no words). */

#define WORD_ITEMS ((UINT64_C(1) << 56) - 1)

static inline size_t stage_bytes(const bk_cuckoo *f, uint64_t buckets)
{
    return (size_t)table_bytes_for(buckets, f->b, f->f, f->paired);
}

static inline unsigned char *words_of(const bk_cuckoo *f)
{
    return f->table + table_bytes(f) + TABLE_PAD;
}

static inline uint64_t word_get(const bk_cuckoo *f, uint32_t j)
{
    uint64_t w;
    memcpy(&w, words_of(f) + 8 * (size_t)j, sizeof(w));
    return w;
}

static inline void word_set(bk_cuckoo *f, uint32_t j, uint64_t w)
{
    memcpy(words_of(f) + 8 * (size_t)j, &w, sizeof(w));
}

static inline uint64_t word_buckets(uint64_t w) { return UINT64_C(1) << (w >> 56); }
static inline uint64_t word_items(uint64_t w) { return w & WORD_ITEMS; }
static inline uint64_t make_word(uint64_t buckets, uint64_t items)
{
    return ((uint64_t)__builtin_ctzll(buckets) << 56) | items;
}

/* Bytes of the older stages' tables (those before f->table). */
static size_t older_bytes(const bk_cuckoo *f)
{
    size_t total = 0;
    for (uint32_t j = 0; j + 1 < f->nstages; j++)
        total += stage_bytes(f, word_buckets(word_get(f, j)));
    return total;
}

static inline unsigned char *arena_of(const bk_cuckoo *f)
{
    return f->table - older_bytes(f);
}

static inline size_t arena_bytes(const bk_cuckoo *f)
{
    return older_bytes(f) + table_bytes(f) + TABLE_PAD + 8 * (size_t)(f->nstages - 1);
}

/* 1 when the table lives in the object's loaded block or mapping. */
static inline int borrowed(const bk_cuckoo *f)
{
    uintptr_t t = (uintptr_t)f->table, b = (uintptr_t)f->obj.block;
    return f->obj.block_kind != BK__BLOCK_NONE && t >= b && t < b + f->obj.block_len;
}

static uint64_t older_items(const bk_cuckoo *f)
{
    uint64_t n = 0;
    for (uint32_t j = 0; j + 1 < f->nstages; j++) n += word_items(word_get(f, j));
    return n;
}

static inline uint64_t initial_rng(uint64_t seed)
{
    return (seed ^ UINT64_C(0x5851F42D4C957F2D)) | 1;
}

/* Walk the older stages, oldest first: *v becomes a copy of the handle
 * whose table and mask are stage j's, so every single-table routine
 * above works on it unchanged (only the newest stage is ever added to). */
typedef struct stage_walk {
    bk_cuckoo v;
    unsigned char *next; /* the table after the current one */
    uint32_t j;
} stage_walk;

static inline void walk_start(const bk_cuckoo *f, stage_walk *w)
{
    w->v = *f;
    w->next = arena_of(f);
    w->j = 0;
}

/* 1 and w->v set to older stage w->j (then advanced), or 0 when done. */
static inline int walk_next(const bk_cuckoo *f, stage_walk *w, uint32_t *index)
{
    if (w->j + 1 >= f->nstages) return 0;
    uint64_t buckets = word_buckets(word_get(f, w->j));
    w->v.table = w->next;
    w->v.mask = buckets - 1;
    w->next += stage_bytes(f, buckets);
    *index = w->j++;
    return 1;
}

/* Append `count` stages (tables copied from tables[i], or empty when
 * tables is NULL) of buckets[i] buckets holding items[i] fingerprints: one
 * new arena, the old one freed only on success. BK_OK, BK_ESIZE or
 * BK_ENOMEM (nothing changed). */
static int append_stages(bk_cuckoo *f, uint32_t count, const uint64_t *buckets,
                         const unsigned char *const *tables, const uint64_t *items)
{
    if (count == 0) return BK_OK;
    if ((uint32_t)f->nstages + count > BK_CUCKOO_MAX_STAGES) return BK_ESIZE;
    size_t old_tables = older_bytes(f) + table_bytes(f), add = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t bytes = table_bytes_for(buckets[i], f->b, f->f, f->paired);
        if (bytes > SIZE_MAX / 4 - add) return BK_ESIZE;
        add += (size_t)bytes;
    }
    uint32_t n = f->nstages + count;
    if (old_tables > SIZE_MAX / 4 - add) return BK_ESIZE;
    size_t size = old_tables + add + TABLE_PAD + 8 * (size_t)(n - 1);
    unsigned char *arena = bk__calloc(1, size);
    if (arena == NULL) return BK_ENOMEM;

    unsigned char *old = arena_of(f);
    memcpy(arena, old, old_tables);
    size_t pos = old_tables, newest = 0;
    for (uint32_t i = 0; i < count; i++) {
        size_t bytes = stage_bytes(f, buckets[i]);
        if (tables != NULL) memcpy(arena + pos, tables[i], bytes);
        newest = pos;
        pos += bytes;
    }
    /* words: the old older stages, the old newest one, the new ones but
     * the last */
    unsigned char *words = arena + pos + TABLE_PAD;
    uint64_t total = f->items;
    for (uint32_t j = 0; j + 1 < f->nstages; j++) {
        uint64_t w = word_get(f, j);
        memcpy(words + 8 * (size_t)j, &w, 8);
    }
    uint64_t w = make_word(f->mask + 1, f->items - older_items(f));
    memcpy(words + 8 * (size_t)(f->nstages - 1), &w, 8);
    for (uint32_t i = 0; i < count; i++) {
        uint64_t it = items ? items[i] : 0;
        total += it;
        if (i + 1 < count) {
            w = make_word(buckets[i], it);
            memcpy(words + 8 * (size_t)(f->nstages + i), &w, 8);
        }
    }

    if (!borrowed(f)) bk__free(old);
    else if (f->obj.block_kind == BK__BLOCK_HEAP) bk__object_release(&f->obj);
    /* (a mapping stays: bk_filter_sync refuses the new shape) */
    f->table = arena + newest;
    f->mask = buckets[count - 1] - 1;
    f->nstages = (uint8_t)n;
    f->items = total;
    return BK_OK;
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
    if (bytes > SIZE_MAX - TABLE_PAD) return BK_ESIZE;

    /* the handle, and the arena: the table and its padding */
    f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    f->table = bk__calloc(1, (size_t)bytes + TABLE_PAD);
    if (f->table == NULL) {
        bk__free(f);
        return BK_ENOMEM;
    }
    bk__object_init(&f->obj, &cuckoo_ops);
    f->nstages = 1;
    f->mask = buckets - 1;
    f->b = (uint8_t)b;
    f->f = (uint8_t)fp_bits;
    f->paired = (uint8_t)paired;
    f->max_kicks = max_kicks;
    f->seed = seed;
    f->capacity = capacity;
    f->target_fpr = target_fpr;
    f->rng = initial_rng(seed);
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
    if (!borrowed(f)) bk__free(arena_of(f));
    bk__object_release(&f->obj);
    bk__free(f);
}

int bk_cuckoo_clone(bk_cuckoo **out, const bk_cuckoo *src)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (src == NULL) return BK_EINVAL;
    bk_cuckoo *f = bk__calloc(1, sizeof(*f));
    size_t size = arena_bytes(src);
    unsigned char *arena = f ? bk__malloc(size) : NULL;
    if (arena == NULL) {
        bk__free(f);
        return BK_ENOMEM;
    }
    /* a borrowed table is one stage: its arena is the table and padding */
    memcpy(arena, arena_of(src), size);
    *f = *src;
    bk__object_init(&f->obj, &cuckoo_ops);
    f->table = arena + (src->table - arena_of(src));
    *out = f;
    return BK_OK;
}

void bk_cuckoo_clear(bk_cuckoo *f)
{
    if (f == NULL) return;
    memset(arena_of(f), 0, older_bytes(f) + table_bytes(f) + TABLE_PAD);
    for (uint32_t j = 0; j + 1 < f->nstages; j++)
        word_set(f, j, make_word(word_buckets(word_get(f, j)), 0));
    f->items = 0;
    f->relocations = 0;
}

int bk_cuckoo_add_stage(bk_cuckoo *f, uint64_t buckets)
{
    if (f == NULL) return BK_EINVAL;
    if (buckets == 0 || buckets > BK_CUCKOO_MAX_BUCKETS || (buckets & (buckets - 1)) != 0)
        return BK_ESIZE;
    int rc = append_stages(f, 1, &buckets, NULL, NULL);
    /* a new stage chooses as a new filter would */
    if (rc == BK_OK) f->rng = initial_rng(f->seed);
    return rc;
}

int bk_cuckoo_append(bk_cuckoo *dst, const bk_cuckoo *src)
{
    uint64_t buckets[BK_CUCKOO_MAX_STAGES], items[BK_CUCKOO_MAX_STAGES];
    const unsigned char *tables[BK_CUCKOO_MAX_STAGES];
    if (dst == NULL || src == NULL || dst == src) return BK_EINVAL;
    if (dst->b != src->b || dst->f != src->f || dst->paired != src->paired ||
        dst->seed != src->seed || dst->max_kicks != src->max_kicks)
        return BK_EINVAL;
    if ((uint32_t)dst->nstages + src->nstages > BK_CUCKOO_MAX_STAGES) return BK_ESIZE;
    stage_walk w;
    uint32_t j, n = 0;
    walk_start(src, &w);
    while (walk_next(src, &w, &j)) {
        buckets[n] = w.v.mask + 1;
        tables[n] = w.v.table;
        items[n++] = word_items(word_get(src, j));
    }
    buckets[n] = src->mask + 1;
    tables[n] = src->table;
    items[n++] = src->items - older_items(src);
    int rc = append_stages(dst, n, buckets, tables, items);
    if (rc != BK_OK) return rc;
    dst->relocations += src->relocations;
    dst->rng = src->rng; /* the newest stage's generator goes on */
    return BK_OK;
}

/*==========================================================================
 * API: single keys
 *==========================================================================*/

int bk_cuckoo_add_hash(bk_cuckoo *f, bk_hash h)
{
    return add_position(f, locate(f, h));
}

/* Is the key in an older stage? (The newest is the caller's to check.) */
static int in_older(const bk_cuckoo *f, bk_hash h)
{
    stage_walk w;
    uint32_t j;
    if (f->nstages == 1) return 0;
    walk_start(f, &w);
    while (walk_next(f, &w, &j))
        if (contains_position(&w.v, locate(&w.v, h))) return 1;
    return 0;
}

int bk_cuckoo_add_unique_hash(bk_cuckoo *f, bk_hash h)
{
    position p = locate(f, h);
    if (contains_position(f, p) || in_older(f, h)) return 0;
    int rc = add_position(f, p);
    return rc == BK_OK ? 1 : rc;
}

/* Remove fp from one of p's buckets of (a view of) a stage; 1 if found. */
static int remove_position(bk_cuckoo *f, position p)
{
    int s = find_slot(f, p.i1, p.fp);
    uint64_t bucket = p.i1;
    if (s < 0) {
        s = find_slot(f, p.i2, p.fp);
        bucket = p.i2;
    }
    if (s < 0) return 0;
    set_slot(f, bucket, (uint32_t)s, 0);
    return 1;
}

/* The newest stage holding the key loses one copy. */
int bk_cuckoo_remove_hash(bk_cuckoo *f, bk_hash h)
{
    if (remove_position(f, locate(f, h))) {
        f->items--;
        return BK_OK;
    }
    stage_walk w, found;
    uint32_t j, hit = 0;
    int any = 0;
    walk_start(f, &w);
    while (walk_next(f, &w, &j)) {
        if (contains_position(&w.v, locate(&w.v, h))) {
            found = w;
            hit = j;
            any = 1;
        }
    }
    if (!any) return BK_ENOTFOUND;
    remove_position(&found.v, locate(&found.v, h));
    uint64_t word = word_get(f, hit);
    word_set(f, hit, make_word(word_buckets(word), word_items(word) - 1));
    f->items--;
    return BK_OK;
}

int bk_cuckoo_contains_hash(const bk_cuckoo *f, bk_hash h)
{
    return contains_position(f, locate(f, h)) || in_older(f, h);
}

static inline uint32_t count_position(const bk_cuckoo *f, position p)
{
    uint32_t n = count_in(f, p.i1, p.fp);
    if (p.i2 != p.i1) n += count_in(f, p.i2, p.fp);
    return n;
}

uint32_t bk_cuckoo_count_hash(const bk_cuckoo *f, bk_hash h)
{
    uint32_t n = count_position(f, locate(f, h)), j;
    stage_walk w;
    if (f->nstages == 1) return n;
    walk_start(f, &w);
    while (walk_next(f, &w, &j)) n += count_position(&w.v, locate(&w.v, h));
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

void bk_cuckoo_prefetch_hash(const bk_cuckoo *f, bk_hash h)
{
    if (f != NULL) prefetch_position(f, locate(f, h));
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
    if (f->nstages > 1) { /* every stage, key by key */
        for (size_t i = 0; i < n; i++) {
            int r = bk_cuckoo_contains_hash(f, bk_hash_key(keys[i], lens[i], f->seed));
            hits += r;
            if (results != NULL) results[i] = (uint8_t)r;
        }
        return hits;
    }

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

/* All stages' buckets. */
uint64_t bk_cuckoo_buckets(const bk_cuckoo *f)
{
    uint64_t n = buckets_of(f);
    for (uint32_t j = 0; j + 1 < f->nstages; j++) n += word_buckets(word_get(f, j));
    return n;
}

uint32_t bk_cuckoo_bucket_size(const bk_cuckoo *f) { return f->b; }
uint32_t bk_cuckoo_fingerprint_bits(const bk_cuckoo *f) { return f->f; }
uint32_t bk_cuckoo_max_kicks(const bk_cuckoo *f) { return f->max_kicks; }
uint64_t bk_cuckoo_seed(const bk_cuckoo *f) { return f->seed; }
uint64_t bk_cuckoo_items(const bk_cuckoo *f) { return f->items; }
uint32_t bk_cuckoo_stages(const bk_cuckoo *f) { return f->nstages; }

uint64_t bk_cuckoo_stage_buckets(const bk_cuckoo *f, uint32_t stage)
{
    if (f == NULL || stage >= f->nstages) return 0;
    return stage + 1 == f->nstages ? buckets_of(f) : word_buckets(word_get(f, stage));
}

uint64_t bk_cuckoo_stage_items(const bk_cuckoo *f, uint32_t stage)
{
    if (f == NULL || stage >= f->nstages) return 0;
    return stage + 1 == f->nstages ? f->items - older_items(f)
                                   : word_items(word_get(f, stage));
}

/* Exact for a created filter; a loaded one (holding the file's payload
 * block instead) reports the same, so CF.INFO Size survives a reload. */
size_t bk_cuckoo_bytes(const bk_cuckoo *f)
{
    return sizeof(*f) + arena_bytes(f);
}

int bk_cuckoo_get_stats(const bk_cuckoo *f, bk_cuckoo_stats *out)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    memset(out, 0, sizeof(*out));
    out->buckets = bk_cuckoo_buckets(f);
    out->bucket_size = f->b;
    out->fingerprint_bits = f->f;
    out->max_kicks = f->max_kicks;
    out->seed = f->seed;
    out->capacity = f->capacity;
    out->target_fpr = f->target_fpr;
    out->items = f->items;
    out->stages = f->nstages;
    out->slots = out->buckets * f->b;
    out->load_factor = (double)f->items / (double)out->slots;
    /* a key is absent only when every stage says so */
    out->fpr_now = bk_cuckoo_fpr(f->items, buckets_of(f), f->b, f->f);
    if (f->nstages > 1) {
        double pass = 1.0;
        for (uint32_t j = 0; j < f->nstages; j++)
            pass *= 1.0 - bk_cuckoo_fpr(bk_cuckoo_stage_items(f, j),
                                        bk_cuckoo_stage_buckets(f, j), f->b, f->f);
        out->fpr_now = 1.0 - pass;
    }
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

BK__OPS_SEED_DESTROY(cuckoo)
BK__OPS_CLEAR_CLONE(cuckoo)
static uint32_t ops_nparts(const void *f) { return ((const bk_cuckoo *)f)->nstages; }

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

/* Image: one part per stage, oldest first; m = buckets, width =
 * fingerprint bits, slots = bucket size, items = the stage's own; the
 * newest (last) part's param = the eviction generator's state (so a loaded
 * filter makes the same choices as the saved one), the others' 0; part 0
 * carries capacity and fpr. Header param[0] = max kicks, param[1] =
 * relocations so far, items = all stages'. Each part's data is its packed
 * table; the last one's is followed by TABLE_PAD zero bytes. A one-stage
 * filter is thus exactly the one-part image of before stages existed. */

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
    out->parts = st.stages;
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
    img->seed = f->seed;
    img->capacity = f->capacity;
    img->fpr = f->target_fpr;
    img->items = f->items;
    img->param[0] = f->max_kicks;
    img->param[1] = f->relocations;
    stage_walk w;
    uint32_t j;
    walk_start(f, &w);
    for (;;) {
        int older = walk_next(f, &w, &j);
        const bk_cuckoo *s = older ? &w.v : f;
        if (!older) j = f->nstages - 1u;
        bk__part *p = &img->parts[j];
        p->m = buckets_of(s);
        p->flags = f->paired ? PART_PAIRED : 0;
        p->width = (uint8_t)f->f;
        p->slots = (uint8_t)f->b;
        p->items = bk_cuckoo_stage_items(f, j);
        p->data = s->table;
        p->length = table_bytes(s) + (older ? 0 : TABLE_PAD);
        p->param = older ? 0 : f->rng;
        if (j == 0) {
            p->capacity = f->capacity;
            p->fpr = f->target_fpr;
        }
        if (!older) break;
    }
    return BK_OK;
}

/* Check one stage's part (all parts share part 0's shape). */
static int check_part(const bk__part *p, const bk__part *first, int last)
{
    uint64_t buckets = p->m;
    if (buckets == 0 || buckets > BK_CUCKOO_MAX_BUCKETS || (buckets & (buckets - 1)))
        return BK_ECORRUPT;
    if (p->slots != first->slots || p->width != first->width || p->flags != first->flags)
        return BK_ECORRUPT;
    if (p->k != 0 || (p != first && (p->capacity != 0 || p->fpr != 0.0)))
        return BK_ECORRUPT;
    if ((p->param == 0) == last) return BK_ECORRUPT; /* the generator is the newest's */
    int paired = (p->flags & PART_PAIRED) != 0;
    uint64_t bytes = table_bytes_for(buckets, p->slots, p->width, paired);
    if (p->length != bytes + (last ? TABLE_PAD : 0)) return BK_ECORRUPT;
    if (p->items > buckets * p->slots) return BK_ECORRUPT;
    const unsigned char *data = p->data;
    for (int i = 0; last && i < TABLE_PAD; i++)
        if (data[bytes + (size_t)i] != 0) return BK_ECORRUPT;
    /* bits past the last slot in the last table byte are never set */
    uint64_t used_bits = buckets * bucket_bits(p->slots, p->width, paired);
    if ((used_bits & 7) && (data[bytes - 1] >> (used_bits & 7)) != 0) return BK_ECORRUPT;
    /* every pair code names two fingerprints of 0..254 (read through a
     * view: get_bits only needs the table) */
    bk_cuckoo v;
    v.table = p->data;
    for (uint64_t i = 0; paired && i < buckets; i++)
        if (get_bits(&v, i * PAIR_BITS, PAIR_BITS) >= PAIR_CODES) return BK_ECORRUPT;
    return BK_OK;
}

static int ops_restore(const bk__image *img, void **out)
{
    const bk__part *first = &img->parts[0];
    uint32_t n = img->nparts;
    if (n < 1 || n > BK_CUCKOO_MAX_STAGES) return BK_ECORRUPT;
    if (find_bucket_size(first->slots) == NULL || first->slots == 0 || !valid_fp_bits(first->width))
        return BK_ECORRUPT;
    if (img->param[0] == 0 || img->param[0] > BK_CUCKOO_MAX_KICKS) return BK_ECORRUPT;
    if (first->flags & ~PART_PAIRED) return BK_ECORRUPT;
    int paired = (first->flags & PART_PAIRED) != 0;
    if (paired && (first->slots != 2 || first->width != 8)) return BK_ECORRUPT;
    if (!bk__valid_stored_fpr(img->fpr) || (img->fpr == 0.0) != (img->capacity == 0))
        return BK_ECORRUPT;
    uint64_t items = 0;
    for (uint32_t j = 0; j < n; j++) {
        int rc = check_part(&img->parts[j], first, j + 1 == n);
        if (rc != BK_OK) return rc;
        items += img->parts[j].items;
    }
    if (img->items != items) return BK_ECORRUPT;

    const bk__part *newest = &img->parts[n - 1];
    bk_cuckoo *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &cuckoo_ops);
    f->nstages = 1;
    f->table = newest->data;
    f->mask = newest->m - 1;
    f->b = first->slots;
    f->f = first->width;
    f->paired = (uint8_t)paired;
    f->max_kicks = (uint32_t)img->param[0];
    f->seed = img->seed;
    f->capacity = img->capacity;
    f->target_fpr = img->fpr;
    f->items = newest->items;
    f->relocations = img->param[1];
    f->rng = newest->param;
    if (n > 1) {
        /* several stages: copied into an arena of their own, the newest
         * last (so the payload block is not kept: payload_copied) */
        uint64_t buckets[BK_CUCKOO_MAX_STAGES], counts[BK_CUCKOO_MAX_STAGES];
        const unsigned char *tables[BK_CUCKOO_MAX_STAGES];
        for (uint32_t j = 0; j < n; j++) {
            buckets[j] = img->parts[j].m;
            counts[j] = img->parts[j].items;
            tables[j] = img->parts[j].data;
        }
        /* start from stage 0 alone (borrowed), then append the rest */
        f->table = first->data;
        f->mask = first->m - 1;
        f->items = first->items;
        /* obj.block is not set yet: a borrowed table is freed below by
         * hand if the append fails, never by append_stages */
        unsigned char *own = bk__malloc(table_bytes(f) + TABLE_PAD);
        if (own == NULL) {
            bk__free(f);
            return BK_ENOMEM;
        }
        memcpy(own, first->data, table_bytes(f));
        memset(own + table_bytes(f), 0, TABLE_PAD);
        f->table = own;
        int rc = append_stages(f, n - 1, buckets + 1, tables + 1, counts + 1);
        if (rc != BK_OK) {
            bk__free(own);
            bk__free(f);
            return rc == BK_ESIZE ? BK_ECORRUPT : rc;
        }
        f->obj.payload_copied = 1;
    }
    *out = f;
    return BK_OK;
}


/* The handle and, unless its one table is borrowed from a loaded block or
 * a mapping, the arena (every stage's table, the padding, the older
 * stages' words). */
static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_cuckoo *f = vf;
    visit(ctx, f, sizeof(*f));
    if (!borrowed(f)) visit(ctx, arena_of(f), arena_bytes(f));
}

static const bk__family_ops cuckoo_ops = {
    .family = BK_FAMILY_CUCKOO,
    .name = "cuckoo",
    BK__OPS_STANDARD,
    .remove = ops_remove, .count = ops_count, .add_batch = ops_add_batch,
    .contains_batch = ops_contains_batch, .lockfree_add = LOCKFREE_ADD, .clone = ops_clone,
    .clear = ops_clear,
};

const bk__family_ops *const bk__cuckoo_family = &cuckoo_ops;
