/*
 * rcuckoo.c - RedisBloom's cuckoo filter (CF.*), byte for byte.
 *
 * This family takes over cuckoo filters that came out of RedisBloom 2.x
 * (and Redis 8's built-in cuckoo type, the same design): it reads their
 * SCANDUMP chunks and their rdb fields, answers every lookup as RedisBloom
 * did (false positives included), and keeps adding, deleting and growing
 * the way RedisBloom would. It is not tuned for speed or size: bloomkit's
 * own cuckoo filter (cuckoo.c) is smaller and faster for new data.
 *
 * Structure
 *   A chain of 1 ... 65535 stages ("sub-filters"). Stage i has
 *   n_i = n_0 e^i buckets (n_0 a power of two, e the expansion: 0 or a
 *   power of two up to 32768; e = 0 means the chain never grows) of b slots
 *   (1 <= b <= 255). A slot is one byte: 0 is empty, 1 ... 255 a
 *   fingerprint. Stage i's table is n_i b bytes, bucket j at byte j b. No
 *   padding, no header: the table bytes are exactly what RedisBloom keeps
 *   in memory, dumps in chunks and saves as rdb strings.
 *
 * Hashing
 *   h = MurmurHash64A(item, seed 0) (lib/hash.c). The fingerprint is
 *   fp = h mod 255 + 1. In a stage of n buckets the item's two buckets are
 *       i1 = h mod n,   i2 = (h XOR fp * 0x5bd1e995) mod n,
 *   and because n is a power of two, (i XOR fp * 0x5bd1e995) mod n maps
 *   either bucket of a fingerprint to the other one: a fingerprint can be
 *   moved without its item. Every stage is probed with the same h, so a
 *   bucket index in a bigger stage reduces to the right bucket of a
 *   smaller one (n_j divides n_i for j < i).
 *
 * Operations (RedisBloom's order matters: it decides which slot an item
 * lands in, hence every later answer and every byte of a dump)
 *   lookup   any stage, oldest first, holds fp in bucket i1 or i2.
 *   count    the copies of fp in buckets i1 and i2 of every stage (a
 *            bucket counted twice when i1 = i2, as RedisBloom counts).
 *   add      the first empty slot of bucket i1, else of bucket i2, trying
 *            the newest stage first and the oldest last. When all are
 *            full, a walk in the newest stage: put fp in slot v of the
 *            current bucket (v = 0, 1, ... mod b, one more each step,
 *            starting at bucket i1), carry the evicted fingerprint to its
 *            other bucket and stop at the first empty slot there; after
 *            max_iterations steps the walk is undone step by step (the
 *            table is exactly as before). Then a chain with e = 0 is full;
 *            otherwise a new, empty stage of n_0 e^k buckets is appended
 *            and the add starts again (it lands in the new stage). The
 *            walk is deterministic: no random victim.
 *   addnx    as add unless the item is found first.
 *   delete   the first slot holding fp in bucket i1, else i2, of the
 *            newest stage first; items - 1, deletes + 1. With more than
 *            one stage and deletes > 10% of items the chain is compacted:
 *            from the newest stage down, every fingerprint of stage k
 *            moves to a free slot of one of its two buckets in the oldest
 *            stage below k that has one; a newest stage left empty is
 *            freed, and the first stage that cannot be emptied stops the
 *            compaction. deletes is reset to 0 either way.
 *   RedisBloom refuses any add (CF.ADD, CF.ADDNX) to a chain that already
 *   has 32 stages (its cf_max_expansions default): "Maximum expansions
 *   reached". A chain with e = 0 that has no room answers "Filter is
 *   full". Both are BK_EFULL here (stages() >= 32 tells them apart).
 *
 * Chunks (CF.SCANDUMP / CF.LOADCHUNK)
 *   Iterator 0 gives iterator 1 and the 38-byte header, little-endian and
 *   packed: items u64, n_0 u64, deletes u64, stages u64, b u16,
 *   max_iterations u16, e u16. Data iterators are 1 + a byte offset into
 *   the concatenation of the stage tables: a stage of at most 16 MiB is one
 *   chunk, a bigger one is cut into 16 MiB pieces (the last shorter); the
 *   chunk at iterator t comes back with iterator t + its length, and the
 *   iterator after the last chunk gives iterator 0 and no data.
 *   CF.LOADCHUNK takes each chunk with the iterator it came with, so its
 *   offset is iterator - length - 1.
 *
 * Fields (rdb_save / rdb_load, module type "MBbloomCF")
 *   Encoding version 4 (what RedisBloom writes): unsigned stages, n_0,
 *   items, deletes, b, max_iterations, e, then per stage unsigned n_i and
 *   the table as a string. Versions 0 ... 3 have only stages, n_0 and
 *   items, then per stage the table (b = 2, max_iterations 20, e = 1,
 *   deletes 0, every stage n_0 buckets). Anything newer is refused.
 *
 * Validation: a header or field stream is accepted only when it could
 * have come from RedisBloom: stages 1 ... 65535, n_0 a power of two below
 * 2^56, b 1 ... 255, max_iterations >= 1, e 0 or a power of two <= 32768
 * (0 only with one stage), every stage of n_0 e^i buckets below 2^56,
 * items no more than the slots, every string exactly its stage's size.
 * A filter bigger than an address space can hold is BK_ESIZE.
 *
 * Hashing is MurmurHash64A with seed 0, not bloomkit's XXH3: in
 * bloomkit's file format the filter is saved with seed 0 and the tables as
 * its parts (docs/FORMAT.md, family 21).
 */
#include <stddef.h>
#include <stdint.h> /* SIZE_MAX, UINT16_MAX */
#include <string.h>

#include "filter.h"
#include "hash.h" /* bk__murmur64a */

/*==========================================================================
 * Types and constants
 *==========================================================================*/

#define ALT_MUL UINT64_C(0x5bd1e995)    /* the alternate-bucket multiplier */
#define HEADER_BYTES 38u                 /* the packed SCANDUMP header */
#define CHUNK_LIMIT (16u * 1024u * 1024u) /* RedisBloom's SCANDUMP piece */
#define MAX_STAGES_ADD 32u               /* cf_max_expansions default */
#define MAX_STAGES 65535u                /* a u16 counts them */
#define MAX_BUCKETS ((UINT64_C(1) << 56) - 1) /* a 56-bit field holds them */
#define MAX_BUCKET_SIZE 255u
#define MAX_ITERATIONS 65535u
#define MAX_EXPANSION 32768u
#define DEFAULT_BUCKET_SIZE 2u
#define DEFAULT_ITERATIONS 20u
#define DEFAULT_EXPANSION 1u
#define ENCVER 4                         /* rdb encoding written */
#define ENCVER_EXPANSION 4               /* first with deletes .. expansion */
/* CF.INFO's Size: RedisBloom's handle (40 bytes on a 64-bit build) plus
 * 16 bytes per stage record plus the tables. */
#define INFO_HANDLE 40u
#define INFO_STAGE 16u

/* Largest total of table bytes accepted: what a 64-bit address space
 * (47 bits of user space) or half a 32-bit one can hold. */
#define MAX_TOTAL_BYTES                                                       \
    ((uint64_t)(SIZE_MAX >> 1) < (UINT64_C(1) << 47) ? (uint64_t)(SIZE_MAX >> 1) \
                                                     : (UINT64_C(1) << 47))

typedef struct stage {
    uint64_t buckets;
    uint8_t *data;  /* buckets * bucket_size bytes */
    uint8_t owned;  /* 0: borrowed from a loaded block or a mapping */
} stage;

struct bk_rcuckoo {
    bk__object obj;
    uint64_t buckets;   /* stage 0's (CF.INFO "Number of buckets") */
    uint64_t items;
    uint64_t deletes;
    uint32_t nstages;
    uint32_t cap;       /* stage records allocated */
    uint32_t bucket_size;
    uint32_t max_iterations;
    uint32_t expansion;
    size_t max_bytes;   /* 0: no cap on a new stage */
    stage *stages;
};

static const bk__family_ops rcuckoo_ops; /* at the end of this file */

/* The item's fingerprint and first bucket hash. */
typedef struct probe {
    uint64_t h1;
    uint64_t h2;
    uint8_t fp;
} probe;

static probe probe_of(uint64_t h)
{
    probe p;
    p.fp = (uint8_t)(h % 255 + 1);
    p.h1 = h;
    p.h2 = h ^ ((uint64_t)p.fp * ALT_MUL);
    return p;
}

static inline uint64_t stage_bytes(const bk_rcuckoo *f, const stage *s)
{
    return s->buckets * f->bucket_size;
}

static inline uint8_t *bucket_at(const bk_rcuckoo *f, const stage *s, uint64_t h)
{
    return s->data + (h & (s->buckets - 1)) * f->bucket_size;
}

static int is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* The next power of two >= x (0 stays 0), as RedisBloom rounds. */
static uint64_t next_pow2(uint64_t x)
{
    x--;
    x |= x >> 1;
    x |= x >> 2;
    x |= x >> 4;
    x |= x >> 8;
    x |= x >> 16;
    x |= x >> 32;
    return x + 1;
}

/*==========================================================================
 * Shape: the buckets of stage i, checked
 *==========================================================================*/

/* Buckets of stage i of a chain (base, expansion), or 0 when the shape is
 * impossible (a stage after the first with expansion 0, or 2^56 buckets
 * or more). The expansion is 0 or a power of two (checked before), so
 * this is a shift: O(1) whatever i is. */
static uint64_t stage_buckets(uint64_t base, uint32_t expansion, uint32_t i)
{
    if (i == 0 || expansion == 1) return base;
    if (expansion == 0) return 0;
    unsigned lg = 0;
    while ((UINT32_C(1) << lg) < expansion) lg++;
    uint64_t shift = (uint64_t)lg * i;
    if (shift >= 56 || base > (MAX_BUCKETS >> shift)) return 0;
    return base << shift;
}

/* The scalar parameters every loader checks. BK_OK or BK_ECORRUPT. */
static int check_params(uint64_t nstages, uint64_t base, uint64_t bucket_size,
                        uint64_t max_iterations, uint64_t expansion)
{
    if (nstages < 1 || nstages > MAX_STAGES) return BK_ECORRUPT;
    if (!is_pow2(base) || base > MAX_BUCKETS) return BK_ECORRUPT;
    if (bucket_size < 1 || bucket_size > MAX_BUCKET_SIZE) return BK_ECORRUPT;
    if (max_iterations < 1 || max_iterations > MAX_ITERATIONS) return BK_ECORRUPT;
    if (expansion > MAX_EXPANSION || (expansion != 0 && !is_pow2(expansion)))
        return BK_ECORRUPT;
    if (expansion == 0 && nstages > 1) return BK_ECORRUPT;
    return BK_OK;
}

/* Total slots of a chain of this shape into *slots. BK_OK, BK_ECORRUPT (a
 * stage of 2^56 buckets or more) or BK_ESIZE (more than memory can hold). */
static int check_shape(uint32_t nstages, uint64_t base, uint32_t bucket_size,
                       uint32_t expansion, uint64_t *slots)
{
    /* an impossible shape is corruption even when it is also too large */
    if (stage_buckets(base, expansion, nstages - 1) == 0) return BK_ECORRUPT;
    uint64_t total = 0;
    for (uint32_t i = 0; i < nstages; i++) {
        uint64_t bytes = stage_buckets(base, expansion, i) * bucket_size; /* < 2^64 */
        if (bytes > MAX_TOTAL_BYTES || total > MAX_TOTAL_BYTES - bytes) return BK_ESIZE;
        total += bytes;
    }
    *slots = total;
    return BK_OK;
}

/*==========================================================================
 * The chain: allocation
 *==========================================================================*/

static bk_rcuckoo *alloc_chain(uint32_t cap)
{
    bk_rcuckoo *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return NULL;
    bk__object_init(&f->obj, &rcuckoo_ops);
    f->stages = bk__calloc(cap, sizeof(stage));
    if (f->stages == NULL) {
        bk__free(f);
        return NULL;
    }
    f->cap = cap;
    return f;
}

static void free_stages(bk_rcuckoo *f)
{
    for (uint32_t i = 0; i < f->nstages; i++)
        if (f->stages[i].owned) bk__free(f->stages[i].data);
    bk__free(f->stages);
    f->stages = NULL;
    f->nstages = 0;
}

void bk_rcuckoo_free(bk_rcuckoo *f)
{
    if (f == NULL) return;
    free_stages(f);
    bk__object_release(&f->obj);
    bk__free(f);
}

/* Table bytes plus the handle and the stage records. */
size_t bk_rcuckoo_bytes(const bk_rcuckoo *f)
{
    if (f == NULL) return 0;
    size_t total = sizeof(*f) + (size_t)f->cap * sizeof(stage);
    for (uint32_t i = 0; i < f->nstages; i++) total += (size_t)stage_bytes(f, &f->stages[i]);
    return total;
}

/* Append a zeroed stage of the next size. BK_ELIMIT (the cap), BK_ESIZE
 * (the shape cannot grow: no expansion, 65535 stages, 2^56 buckets) or
 * BK_ENOMEM; nothing changes on failure. */
static int grow(bk_rcuckoo *f)
{
    if (f->nstages >= MAX_STAGES) return BK_ESIZE;
    uint64_t n = stage_buckets(f->buckets, f->expansion, f->nstages);
    if (n == 0) return BK_ESIZE;
    uint64_t bytes = n * f->bucket_size;
    size_t now = bk_rcuckoo_bytes(f);
    if (bytes > MAX_TOTAL_BYTES) return BK_ESIZE;
    size_t more = (size_t)bytes + (f->nstages == f->cap ? sizeof(stage) * (size_t)f->cap : 0);
    if (f->max_bytes != 0 && (more > f->max_bytes || now > f->max_bytes - more))
        return BK_ELIMIT;
    if (f->nstages == f->cap) {
        uint32_t cap = f->cap * 2 > MAX_STAGES ? MAX_STAGES : f->cap * 2;
        stage *s = bk__calloc(cap, sizeof(stage));
        if (s == NULL) return BK_ENOMEM;
        memcpy(s, f->stages, sizeof(stage) * f->nstages);
        bk__free(f->stages);
        f->stages = s;
        f->cap = cap;
    }
    uint8_t *data = bk__calloc((size_t)bytes, 1);
    if (data == NULL) return BK_ENOMEM;
    stage *s = &f->stages[f->nstages++];
    s->buckets = n;
    s->data = data;
    s->owned = 1;
    return BK_OK;
}

/*==========================================================================
 * Slots
 *==========================================================================*/

static uint8_t *find_slot(const bk_rcuckoo *f, uint8_t *bucket, uint8_t fp)
{
    for (uint32_t i = 0; i < f->bucket_size; i++)
        if (bucket[i] == fp) return bucket + i;
    return NULL;
}

/* A free slot in one of the two buckets of p in stage s (i1's first). */
static uint8_t *free_slot(const bk_rcuckoo *f, const stage *s, const probe *p)
{
    uint8_t *slot = find_slot(f, bucket_at(f, s, p->h1), 0);
    if (slot == NULL) slot = find_slot(f, bucket_at(f, s, p->h2), 0);
    return slot;
}

static int contains_probe(const bk_rcuckoo *f, const probe *p)
{
    for (uint32_t i = 0; i < f->nstages; i++) {
        const stage *s = &f->stages[i];
        if (find_slot(f, bucket_at(f, s, p->h1), p->fp) != NULL ||
            find_slot(f, bucket_at(f, s, p->h2), p->fp) != NULL)
            return 1;
    }
    return 0;
}

static uint64_t count_in(const bk_rcuckoo *f, const uint8_t *bucket, uint8_t fp)
{
    uint64_t c = 0;
    for (uint32_t i = 0; i < f->bucket_size; i++) c += bucket[i] == fp;
    return c;
}

/* The walk in stage s (see the file comment): 1 stored, 0 nothing changed. */
static int kick_in(bk_rcuckoo *f, stage *s, const probe *p)
{
    const uint32_t b = f->bucket_size;
    const uint64_t mask = s->buckets - 1;
    uint8_t fp = p->fp;
    uint32_t victim = 0;
    uint64_t at = p->h1 & mask;
    for (uint32_t step = 0; step < f->max_iterations; step++) {
        uint8_t *slot = s->data + at * b + victim, t = *slot;
        *slot = fp;
        fp = t;
        at = (at ^ ((uint64_t)fp * ALT_MUL)) & mask;
        uint8_t *empty = find_slot(f, s->data + at * b, 0);
        if (empty != NULL) {
            *empty = fp;
            return 1;
        }
        victim = (victim + 1) % b;
    }
    /* undo: walk back, swapping each carried fingerprint home */
    for (uint32_t step = 0; step < f->max_iterations; step++) {
        victim = (victim + b - 1) % b;
        at = (at ^ ((uint64_t)fp * ALT_MUL)) & mask;
        uint8_t *slot = s->data + at * b + victim, t = *slot;
        *slot = fp;
        fp = t;
    }
    return 0;
}

/* Add p: 1, or BK_EFULL / BK_ELIMIT / BK_ENOMEM / BK_ESIZE (nothing
 * stored). */
static int insert_probe(bk_rcuckoo *f, const probe *p)
{
    for (;;) {
        for (uint32_t i = f->nstages; i-- > 0;) {
            uint8_t *slot = free_slot(f, &f->stages[i], p);
            if (slot != NULL) {
                *slot = p->fp;
                f->items++;
                return 1;
            }
        }
        if (kick_in(f, &f->stages[f->nstages - 1], p)) {
            f->items++;
            return 1;
        }
        if (f->expansion == 0) return BK_EFULL;
        int rc = grow(f);
        if (rc == BK_ESIZE) return BK_EFULL; /* it may not grow further */
        if (rc != BK_OK) return rc;
    }
}

/*==========================================================================
 * Compaction after deletes
 *==========================================================================*/

/* Move every fingerprint of stage k to an older stage. 1 when the stage
 * was emptied (and freed when it is the newest), 0 when some stayed. */
static int compact_stage(bk_rcuckoo *f, uint32_t k)
{
    stage *s = &f->stages[k];
    int emptied = 1;
    for (uint64_t j = 0; j < s->buckets; j++) {
        uint8_t *bucket = s->data + j * f->bucket_size;
        for (uint32_t v = 0; v < f->bucket_size; v++) {
            if (bucket[v] == 0) continue;
            probe p;
            p.fp = bucket[v];
            p.h1 = j;
            p.h2 = j ^ ((uint64_t)p.fp * ALT_MUL);
            uint8_t *slot = NULL;
            for (uint32_t i = 0; i < k && slot == NULL; i++) slot = free_slot(f, &f->stages[i], &p);
            if (slot == NULL) {
                emptied = 0;
                continue;
            }
            *slot = p.fp;
            bucket[v] = 0;
        }
    }
    if (emptied && k == f->nstages - 1) {
        if (s->owned) bk__free(s->data);
        s->data = NULL;
        s->buckets = 0;
        s->owned = 0;
        f->nstages--;
    }
    return emptied;
}

static void compact(bk_rcuckoo *f)
{
    for (uint32_t k = f->nstages; --k > 0;)
        if (!compact_stage(f, k)) break;
    f->deletes = 0;
}

static int remove_probe(bk_rcuckoo *f, const probe *p)
{
    for (uint32_t i = f->nstages; i-- > 0;) {
        const stage *s = &f->stages[i];
        uint8_t *slot = find_slot(f, bucket_at(f, s, p->h1), p->fp);
        if (slot == NULL) slot = find_slot(f, bucket_at(f, s, p->h2), p->fp);
        if (slot == NULL) continue;
        *slot = 0;
        f->items--;
        f->deletes++;
        if (f->nstages > 1 && (double)f->deletes > (double)f->items * 0.10) compact(f);
        return 1;
    }
    return 0;
}

/*==========================================================================
 * API: create, add, lookups
 *==========================================================================*/

int bk_rcuckoo_encver(void) { return ENCVER; }

int bk_rcuckoo_create(bk_rcuckoo **out, uint64_t capacity, uint32_t bucket_size,
                      uint32_t max_iterations, uint32_t expansion)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (bucket_size < 1 || bucket_size > MAX_BUCKET_SIZE || max_iterations < 1 ||
        max_iterations > MAX_ITERATIONS || expansion > MAX_EXPANSION)
        return BK_EPARAM;
    if (capacity < 2 * (uint64_t)bucket_size) return BK_ECAPACITY;
    uint64_t want = capacity / bucket_size;
    if (want > (UINT64_C(1) << 55)) return BK_ESIZE;
    uint64_t buckets = next_pow2(want);
    if ((buckets * bucket_size) > MAX_TOTAL_BYTES) return BK_ESIZE;

    bk_rcuckoo *f = alloc_chain(1);
    if (f == NULL) return BK_ENOMEM;
    f->buckets = buckets;
    f->bucket_size = bucket_size;
    f->max_iterations = max_iterations;
    f->expansion = (uint32_t)next_pow2(expansion);
    int rc = grow(f);
    if (rc != BK_OK) {
        bk_rcuckoo_free(f);
        return rc;
    }
    *out = f;
    return BK_OK;
}

void bk_rcuckoo_set_max_bytes(bk_rcuckoo *f, size_t max_bytes)
{
    if (f != NULL) f->max_bytes = max_bytes;
}

static int add_hash(bk_rcuckoo *f, uint64_t h, int unique)
{
    if (f->nstages >= MAX_STAGES_ADD) return BK_EFULL; /* "Maximum expansions reached" */
    probe p = probe_of(h);
    if (unique && contains_probe(f, &p)) return 0;
    return insert_probe(f, &p);
}

static uint64_t hash_item(const void *item, size_t len)
{
    static const char empty[1] = {0};
    if (item == NULL) item = empty, len = 0;
    return bk__murmur64a(item, len, 0);
}

int bk_rcuckoo_add(bk_rcuckoo *f, const void *item, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    return add_hash(f, hash_item(item, len), 0);
}

int bk_rcuckoo_add_unique(bk_rcuckoo *f, const void *item, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    return add_hash(f, hash_item(item, len), 1);
}

int bk_rcuckoo_contains(const bk_rcuckoo *f, const void *item, size_t len)
{
    if (f == NULL) return 0;
    probe p = probe_of(hash_item(item, len));
    return contains_probe(f, &p);
}

static uint64_t count_hash(const bk_rcuckoo *f, uint64_t h)
{
    probe p = probe_of(h);
    uint64_t c = 0;
    for (uint32_t i = 0; i < f->nstages; i++) {
        const stage *s = &f->stages[i];
        c += count_in(f, bucket_at(f, s, p.h1), p.fp) + count_in(f, bucket_at(f, s, p.h2), p.fp);
    }
    return c;
}

uint64_t bk_rcuckoo_count(const bk_rcuckoo *f, const void *item, size_t len)
{
    if (f == NULL) return 0;
    return count_hash(f, hash_item(item, len));
}

int bk_rcuckoo_remove(bk_rcuckoo *f, const void *item, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    probe p = probe_of(hash_item(item, len));
    return remove_probe(f, &p);
}

/*==========================================================================
 * API: CF.INFO
 *==========================================================================*/

uint64_t bk_rcuckoo_size(const bk_rcuckoo *f)
{
    if (f == NULL) return 0;
    uint64_t total = INFO_HANDLE + (uint64_t)INFO_STAGE * f->nstages;
    for (uint32_t i = 0; i < f->nstages; i++) total += stage_bytes(f, &f->stages[i]);
    return total;
}

uint64_t bk_rcuckoo_buckets(const bk_rcuckoo *f) { return f ? f->buckets : 0; }
uint32_t bk_rcuckoo_stages(const bk_rcuckoo *f) { return f ? f->nstages : 0; }
uint64_t bk_rcuckoo_items(const bk_rcuckoo *f) { return f ? f->items : 0; }
uint64_t bk_rcuckoo_deleted(const bk_rcuckoo *f) { return f ? f->deletes : 0; }
uint32_t bk_rcuckoo_bucket_size(const bk_rcuckoo *f) { return f ? f->bucket_size : 0; }
uint32_t bk_rcuckoo_expansion(const bk_rcuckoo *f) { return f ? f->expansion : 0; }
uint32_t bk_rcuckoo_max_iterations(const bk_rcuckoo *f) { return f ? f->max_iterations : 0; }

/*==========================================================================
 * API: chunks
 *==========================================================================*/

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n; i-- > 0;) v = (v << 8) | p[i];
    return v;
}

size_t bk_rcuckoo_header(const bk_rcuckoo *f, void *buf, size_t cap)
{
    if (f == NULL) return 0;
    if (buf != NULL && cap >= HEADER_BYTES) {
        uint8_t *b = buf;
        put_le(b, f->items, 8);
        put_le(b + 8, f->buckets, 8);
        put_le(b + 16, f->deletes, 8);
        put_le(b + 24, f->nstages, 8);
        put_le(b + 32, f->bucket_size, 2);
        put_le(b + 34, f->max_iterations, 2);
        put_le(b + 36, f->expansion, 2);
    }
    return HEADER_BYTES;
}

int bk_rcuckoo_chunk(const bk_rcuckoo *f, uint64_t iter, uint64_t *next, const void **data,
                     size_t *len)
{
    if (f == NULL || next == NULL || data == NULL || len == NULL || iter < 1) return BK_EINVAL;
    uint64_t off = iter - 1;
    for (uint32_t i = 0; i < f->nstages; i++) {
        const stage *s = &f->stages[i];
        uint64_t bytes = stage_bytes(f, s);
        if (off >= bytes) {
            off -= bytes;
            continue;
        }
        /* only the iterators SCANDUMP hands out name a chunk */
        if (off % CHUNK_LIMIT != 0) return BK_EINVAL;
        uint64_t n = bytes - off < CHUNK_LIMIT ? bytes - off : CHUNK_LIMIT;
        *data = s->data + off;
        *len = (size_t)n;
        *next = iter + n;
        return BK_OK;
    }
    if (off != 0) return BK_EINVAL;
    *data = NULL;
    *len = 0;
    *next = 0;
    return BK_OK;
}

/* A chain of the given shape with zeroed (or, when tables is not NULL,
 * copied) stages. Parameters already checked. */
static int build(bk_rcuckoo **out, uint32_t nstages, uint64_t base, uint32_t bucket_size,
                 uint32_t max_iterations, uint32_t expansion, uint64_t items, uint64_t deletes)
{
    bk_rcuckoo *f = alloc_chain(nstages);
    if (f == NULL) return BK_ENOMEM;
    f->buckets = base;
    f->bucket_size = bucket_size;
    f->max_iterations = max_iterations;
    f->expansion = expansion;
    f->items = items;
    f->deletes = deletes;
    for (uint32_t i = 0; i < nstages; i++) {
        uint64_t n = stage_buckets(base, expansion, i);
        uint8_t *data = bk__calloc((size_t)(n * bucket_size), 1);
        if (data == NULL) {
            bk_rcuckoo_free(f);
            return BK_ENOMEM;
        }
        f->stages[i].buckets = n;
        f->stages[i].data = data;
        f->stages[i].owned = 1;
        f->nstages = i + 1;
    }
    *out = f;
    return BK_OK;
}

int bk_rcuckoo_from_header(bk_rcuckoo **out, const void *data, size_t len)
{
    if (out == NULL || (data == NULL && len != 0)) return BK_EINVAL;
    *out = NULL;
    if (len < HEADER_BYTES) return BK_ETRUNC;
    if (len > HEADER_BYTES) return BK_ECORRUPT;
    const uint8_t *b = data;
    uint64_t items = get_le(b, 8), base = get_le(b + 8, 8), deletes = get_le(b + 16, 8);
    uint64_t nstages = get_le(b + 24, 8);
    uint32_t bucket_size = (uint32_t)get_le(b + 32, 2);
    uint32_t max_iterations = (uint32_t)get_le(b + 34, 2);
    uint32_t expansion = (uint32_t)get_le(b + 36, 2);
    int rc = check_params(nstages, base, bucket_size, max_iterations, expansion);
    uint64_t slots = 0;
    if (rc == BK_OK)
        rc = check_shape((uint32_t)nstages, base, bucket_size, expansion, &slots);
    if (rc == BK_OK && items > slots) rc = BK_ECORRUPT;
    if (rc != BK_OK) return rc;
    return build(out, (uint32_t)nstages, base, bucket_size, max_iterations, expansion, items,
                 deletes);
}

int bk_rcuckoo_load_chunk(bk_rcuckoo *f, uint64_t iter, const void *data, size_t len)
{
    if (f == NULL || (data == NULL && len != 0)) return BK_EINVAL;
    if (len == 0 || iter < 1 || iter - 1 < len) return BK_ECHUNK;
    uint64_t off = iter - 1 - len;
    for (uint32_t i = 0; i < f->nstages; i++) {
        stage *s = &f->stages[i];
        uint64_t bytes = stage_bytes(f, s);
        if (off >= bytes) {
            off -= bytes;
            continue;
        }
        if (len > bytes - off) return BK_ECHUNK; /* runs past its stage */
        memcpy(s->data + off, data, len);
        return BK_OK;
    }
    return BK_ECHUNK;
}

/*==========================================================================
 * API: fields
 *==========================================================================*/

int bk_rcuckoo_save_fields(const bk_rcuckoo *f, const bk_rfields *w)
{
    if (f == NULL || w == NULL || w->put_unsigned == NULL || w->put_string == NULL)
        return BK_EINVAL;
    const uint64_t head[7] = {f->nstages, f->buckets, f->items, f->deletes,
                              f->bucket_size, f->max_iterations, f->expansion};
    for (int i = 0; i < 7; i++)
        if (w->put_unsigned(w->ctx, head[i]) != 0) return BK_EIO;
    for (uint32_t i = 0; i < f->nstages; i++) {
        const stage *s = &f->stages[i];
        if (w->put_unsigned(w->ctx, s->buckets) != 0 ||
            w->put_string(w->ctx, s->data, (size_t)stage_bytes(f, s)) != 0)
            return BK_EIO;
    }
    return BK_OK;
}

int bk_rcuckoo_load_fields(bk_rcuckoo **out, int encver, const bk_rfields *r)
{
    if (out == NULL || r == NULL || r->get_unsigned == NULL || r->get_string == NULL)
        return BK_EINVAL;
    *out = NULL;
    if (encver < 0 || encver > ENCVER) return BK_EVERSION;
    uint64_t nstages, base, items, deletes = 0;
    uint64_t bucket_size = DEFAULT_BUCKET_SIZE, max_iterations = DEFAULT_ITERATIONS,
             expansion = DEFAULT_EXPANSION;
    if (r->get_unsigned(r->ctx, &nstages) != 0 || r->get_unsigned(r->ctx, &base) != 0 ||
        r->get_unsigned(r->ctx, &items) != 0)
        return BK_ETRUNC;
    if (encver >= ENCVER_EXPANSION &&
        (r->get_unsigned(r->ctx, &deletes) != 0 || r->get_unsigned(r->ctx, &bucket_size) != 0 ||
         r->get_unsigned(r->ctx, &max_iterations) != 0 ||
         r->get_unsigned(r->ctx, &expansion) != 0))
        return BK_ETRUNC;
    int rc = check_params(nstages, base, bucket_size, max_iterations, expansion);
    uint64_t slots = 0;
    /* before version 4 every stage has the first one's buckets */
    uint32_t shape_exp = encver >= ENCVER_EXPANSION ? (uint32_t)expansion : 1;
    if (rc == BK_OK)
        rc = check_shape((uint32_t)nstages, base, (uint32_t)bucket_size, shape_exp, &slots);
    if (rc == BK_OK && items > slots) rc = BK_ECORRUPT;
    if (rc != BK_OK) return rc;

    bk_rcuckoo *f = alloc_chain((uint32_t)nstages);
    if (f == NULL) return BK_ENOMEM;
    f->buckets = base;
    f->bucket_size = (uint32_t)bucket_size;
    f->max_iterations = (uint32_t)max_iterations;
    f->expansion = (uint32_t)expansion;
    f->items = items;
    f->deletes = deletes;
    for (uint32_t i = 0; i < (uint32_t)nstages; i++) {
        uint64_t n = stage_buckets(base, shape_exp, i), got = n;
        const void *p = NULL;
        size_t plen = 0;
        if (encver >= ENCVER_EXPANSION && r->get_unsigned(r->ctx, &got) != 0) {
            rc = BK_ETRUNC;
            break;
        }
        if (got != n) {
            rc = BK_ECORRUPT;
            break;
        }
        if (r->get_string(r->ctx, &p, &plen) != 0) {
            rc = BK_ETRUNC;
            break;
        }
        if (plen != n * bucket_size || p == NULL) {
            rc = BK_ECORRUPT;
            break;
        }
        uint8_t *data = bk__malloc(plen);
        if (data == NULL) {
            rc = BK_ENOMEM;
            break;
        }
        memcpy(data, p, plen);
        f->stages[i].buckets = n;
        f->stages[i].data = data;
        f->stages[i].owned = 1;
        f->nstages = i + 1;
    }
    if (rc != BK_OK) {
        bk_rcuckoo_free(f);
        return rc;
    }
    *out = f;
    return BK_OK;
}

/*==========================================================================
 * The generic filter and the file format
 *
 * Image: hash algorithm 3 (BK__HASH_MURMUR64A: MurmurHash64A, seed 0),
 * seed 0,
 * capacity = slots of stage 0, fpr 0, items = items, param[0] = deletes,
 * param[1] = bucket size, param[2] = max iterations, param[3] =
 * expansion, flags 0. One part per stage, oldest first: m = buckets, width
 * 8, slots = bucket size, length m x bucket size, the table bytes as they
 * are; everything else 0. A loaded or mapped filter uses the tables in
 * place until it grows (a new stage is its own) or compacts.
 *==========================================================================*/

BK__FAMILY_CASTS(rcuckoo, rcuckoo_ops)

static bk_hash ops_hash(const void *f, const void *key, size_t len)
{
    (void)f;
    bk_hash h;
    h.lo = hash_item(key, len);
    h.hi = 0;
    return h;
}

static int ops_add(void *f, bk_hash h) { return add_hash(f, h.lo, 0); }

static int ops_contains(const void *f, bk_hash h)
{
    probe p = probe_of(h.lo);
    return contains_probe(f, &p);
}

static int ops_remove(void *f, bk_hash h)
{
    probe p = probe_of(h.lo);
    return remove_probe(f, &p) ? BK_OK : BK_ENOTFOUND;
}

static int64_t ops_count(const void *f, bk_hash h) { return (int64_t)count_hash(f, h.lo); }
static uint64_t ops_seed(const void *f) { (void)f; return 0; }
static void ops_destroy(void *f) { bk_rcuckoo_free(f); }
static uint32_t ops_nparts(const void *f) { return ((const bk_rcuckoo *)f)->nstages; }

static int ops_create(const bk_filter_config *cfg, void **out)
{
    uint32_t b = cfg->bucket_size ? cfg->bucket_size : DEFAULT_BUCKET_SIZE;
    uint32_t it = cfg->max_kicks ? cfg->max_kicks : DEFAULT_ITERATIONS;
    uint32_t e = cfg->nonscaling ? 0 : cfg->expansion ? cfg->expansion : DEFAULT_EXPANSION;
    return bk_rcuckoo_create((bk_rcuckoo **)out, cfg->capacity, b, it, e);
}

static int ops_clone(const void *vf, void **out)
{
    const bk_rcuckoo *f = vf;
    bk_rcuckoo *c = NULL;
    int rc = build(&c, f->nstages, f->buckets, f->bucket_size, f->max_iterations,
                   f->expansion, f->items, f->deletes);
    if (rc != BK_OK) return rc;
    for (uint32_t i = 0; i < f->nstages; i++)
        memcpy(c->stages[i].data, f->stages[i].data, (size_t)stage_bytes(f, &f->stages[i]));
    c->max_bytes = f->max_bytes;
    *out = c;
    return BK_OK;
}

static int ops_info(const void *vf, bk_filter_info *out)
{
    const bk_rcuckoo *f = vf;
    uint64_t slots = 0, used = 0;
    for (uint32_t i = 0; i < f->nstages; i++) {
        const stage *s = &f->stages[i];
        uint64_t n = stage_bytes(f, s);
        slots += n;
        for (uint64_t j = 0; j < n; j++) used += s->data[j] != 0;
    }
    double fill = slots ? (double)used / (double)slots : 0.0;
    /* an absent item matches one of the 2 b slots of each stage with
     * probability about fill / 255 each */
    double miss = 1.0;
    for (uint32_t i = 0; i < f->nstages; i++)
        for (uint32_t k = 0; k < 2 * f->bucket_size; k++) miss *= 1.0 - fill / 255.0;
    out->seed = 0;
    out->capacity = stage_bytes(f, &f->stages[0]);
    out->target_fpr = 0.0;
    out->items = f->items;
    out->estimated_items = (double)used;
    out->fpr_now = 1.0 - miss;
    out->fpr_at_capacity = 0.0;
    out->fill = fill;
    out->bytes = bk_rcuckoo_bytes(f);
    out->parts = f->nstages;
    return BK_OK;
}

static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_rcuckoo *f = vf;
    visit(ctx, f, sizeof(*f));
    visit(ctx, f->stages, (size_t)f->cap * sizeof(stage));
    for (uint32_t i = 0; i < f->nstages; i++)
        if (f->stages[i].owned)
            visit(ctx, f->stages[i].data, (size_t)stage_bytes(f, &f->stages[i]));
}

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_rcuckoo *f = vf;
    img->seed = 0;
    img->capacity = stage_bytes(f, &f->stages[0]);
    img->fpr = 0.0;
    img->items = f->items;
    img->hash = BK__HASH_MURMUR64A;
    img->param[0] = f->deletes;
    img->param[1] = f->bucket_size;
    img->param[2] = f->max_iterations;
    img->param[3] = f->expansion;
    for (uint32_t i = 0; i < f->nstages; i++) {
        bk__part *p = &img->parts[i];
        const stage *s = &f->stages[i];
        p->m = s->buckets;
        p->width = 8;
        p->slots = (uint8_t)f->bucket_size;
        p->data = s->data;
        p->length = stage_bytes(f, s);
    }
    return BK_OK;
}

static int ops_restore(const bk__image *img, void **out)
{
    if (img->hash != BK__HASH_MURMUR64A || img->seed != 0 || img->flags != 0 || img->fpr != 0.0)
        return BK_ECORRUPT;
    uint64_t base = img->parts[0].m;
    int rc = check_params(img->nparts, base, img->param[1], img->param[2], img->param[3]);
    uint64_t slots = 0;
    if (rc == BK_OK)
        rc = check_shape(img->nparts, base, (uint32_t)img->param[1], (uint32_t)img->param[3],
                         &slots);
    if (rc != BK_OK) return BK_ECORRUPT;
    uint32_t b = (uint32_t)img->param[1];
    if (img->items > slots || img->capacity != base * b) return BK_ECORRUPT;
    for (uint32_t i = 0; i < img->nparts; i++) {
        const bk__part *p = &img->parts[i];
        uint64_t n = stage_buckets(base, (uint32_t)img->param[3], i);
        if (p->m != n || p->k != 0 || p->width != 8 || p->slots != b || p->flags != 0 ||
            p->capacity != 0 || p->fpr != 0.0 || p->items != 0 || p->param != 0 ||
            p->length != n * b)
            return BK_ECORRUPT;
    }
    bk_rcuckoo *f = alloc_chain(img->nparts);
    if (f == NULL) return BK_ENOMEM;
    f->buckets = base;
    f->bucket_size = b;
    f->max_iterations = (uint32_t)img->param[2];
    f->expansion = (uint32_t)img->param[3];
    f->items = img->items;
    f->deletes = img->param[0];
    for (uint32_t i = 0; i < img->nparts; i++) {
        f->stages[i].buckets = img->parts[i].m;
        f->stages[i].data = img->parts[i].data;
        f->stages[i].owned = 0;
    }
    f->nstages = img->nparts;
    *out = f;
    return BK_OK;
}

static const bk__family_ops rcuckoo_ops = {
    .family = BK_FAMILY_RCUCKOO,
    .name = "rcuckoo",
    BK__OPS_STANDARD,
    .hash = ops_hash, .remove = ops_remove, .count = ops_count, .clone = ops_clone,
};

const bk__family_ops *const bk__rcuckoo_family = &rcuckoo_ops;
