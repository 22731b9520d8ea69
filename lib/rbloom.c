/*
 * rbloom.c - RedisBloom's scalable Bloom filter, laid out and hashed
 * exactly as RedisBloom 2.x makes it, so that data taken over from
 * RedisBloom answers what RedisBloom answered, false positives included.
 *
 * Structure
 *   A chain of classic Bloom filters ("stages"; RedisBloom calls them
 *   links). Each stage is a plain byte array of `bytes` bytes; bit x is
 *   bit (x mod 8) of byte (x / 8). A stage records: entries (the items it
 *   is sized for), error (its own rate), bpe (bits per entry), hashes,
 *   bits, n2 and size (items it took). The chain records size (items
 *   inserted, the sum of the stages' sizes), options and growth.
 *
 * Hashing
 *   Options bit 4 (FORCE64, set on every chain RedisBloom has made since
 *   2.0): a = MurmurHash64A(item, seed 0xc6a4a7935bd1e995), b =
 *   MurmurHash64A(item, seed a). Without it (chains from RedisBloom 1.x):
 *   a = MurmurHash2-32(item, seed 0x9747b28c), b = MurmurHash2-32(item,
 *   seed a), both widened to 64 bits. Probe i (0 <= i < hashes) is bit
 *   (a + i * b) mod M, computed on 64 bits, where M = 2^n2 when n2 > 0
 *   and M = bits when n2 = 0. (For n2 <= 31 RedisBloom computes the
 *   32-bit variant; mod 2^n2 it is the same number.)
 *
 * Sizing a stage (RedisBloom's bloom_init, from entries n, error e)
 *   bpe = |ln e / 0.480453013918201|, hashes = ceil(0.693147180559945 *
 *   bpe) (RedisBloom's truncated constants: they decide hashes exactly).
 *   Options bit 1 (NOROUND, every chain since 2.0): bits = trunc(n * bpe),
 *   at least 1, n2 = 0. Without it: n2 = logb(n * bpe) + 1, bits = 2^n2,
 *   and entries grows by trunc(trunc(bits - n * bpe) / bpe). Bit 2
 *   (ENTS_IS_BITS): n2 = n, bits = 2^n, entries = trunc(bits / bpe).
 *   Then bytes = bits rounded up to a multiple of 64, over 8, and bits is
 *   set to bytes * 8.
 *
 * Adding
 *   If some stage (newest first) has every probe set, the item is taken
 *   as present: nothing changes (0). Otherwise, if the newest stage holds
 *   size >= entries items, a scaling chain gets a stage sized for entries
 *   * growth at error * 0.5 (options bit 8, NO_SCALING: "full"); the
 *   newest stage then sets the item's bits and the counts go up (1). A
 *   new chain's first stage has error e * 0.5 (e when non-scaling).
 *
 * Chunks (BF.SCANDUMP / BF.LOADCHUNK)
 *   Header chunk (iterator 0 asks for it, it is loaded at iterator 1):
 *   packed little-endian, 20 bytes then 53 per stage:
 *     u64 size, u32 nfilters, u32 options, u32 growth, then per stage
 *     u64 bytes, u64 bits, u64 size, f64 error, f64 bpe, u32 hashes,
 *     u64 entries, u8 n2.
 *   Data: the stages' bytes laid end to end as one stream; iterator it
 *   (>= 1) names stream offset it - 1. A chunk never crosses a stage's
 *   end and is at most 16 MiB; it is returned with the iterator of the
 *   byte after it (it + length), which is what LOADCHUNK gets back (the
 *   chunk goes at that iterator minus its length). After the last byte:
 *   iterator 0 and an empty chunk.
 *
 * Fields (rdb_save / rdb_load; module type "MBbloom--")
 *   encver 4 (what RedisBloom writes): unsigned size, nfilters, options,
 *   growth; per stage unsigned entries, double error, unsigned hashes,
 *   double bpe, unsigned bits, unsigned n2, string (the bytes), unsigned
 *   size. encver 2 and 3 lack growth (2); encver 1 also lacks options
 *   (0); encver 0 also lacks bits and n2 per stage (bits = trunc(entries
 *   * bpe), n2 = 0).
 *
 * Validation
 *   Everything read (header chunk, fields, bloomkit file) is checked
 *   before it is used: options within the four bits, 1 ... 4096 stages,
 *   each stage's rate in (0, 1), hashes = ceil(0.693... * bpe), n2 <= 63,
 *   every probe inside the bytes (2^n2 or bits at most bytes * 8), the
 *   stages' sizes adding up to the chain's; a header chunk also needs
 *   bits = bytes * 8 (as RedisBloom checks). Sizes beyond the machine's
 *   memory are BK_ESIZE before anything is allocated.
 *
 * In bloomkit's file format: docs/FORMAT.md, family 20.
 */
#include <math.h>   /* log, logb, ceil */
#include <string.h> /* memcpy, memset */
#include <unistd.h> /* sysconf */

#include "filter.h"
#include "hash.h"

#define OPT_NOROUND 1u
#define OPT_ENTS_IS_BITS 2u
#define OPT_FORCE64 4u
#define OPT_NO_SCALING 8u
#define OPT_ALL 15u

#define RB_LN2 0.693147180559945      /* RedisBloom's ln 2 */
#define RB_LN2_SQ 0.480453013918201   /* RedisBloom's (ln 2)^2 */
#define TIGHTENING 0.5
#define DEFAULT_GROWTH 2u

#define SEED64 UINT64_C(0xc6a4a7935bd1e995)
#define SEED32 UINT32_C(0x9747b28c)

#define CHUNK_MAX ((uint64_t)16 * 1024 * 1024) /* RedisBloom's scandump chunk cap */
#define HDR_FIXED 20u                          /* header chunk: chain fields */
#define HDR_LINK 53u                           /* header chunk: per stage */
#define MAX_STAGES 4096u                       /* as many as a file may hold */
/* RedisBloom's own memory count (BF.INFO Size) on 64-bit machines: its
 * chain struct and one link struct per stage, plus the bytes. */
#define RB_CHAIN_STRUCT 32u
#define RB_LINK_STRUCT 64u

#define ENCVER 4

/*==========================================================================
 * Types
 *==========================================================================*/

typedef struct stage {
    unsigned char *bf; /* bytes bytes */
    uint64_t bytes;
    uint64_t bits;     /* RedisBloom's bits field, kept as read */
    uint64_t mod;      /* probes are taken modulo this: 2^n2 or bits */
    uint64_t entries;
    uint64_t size;     /* items this stage took */
    double error;
    double bpe;
    uint32_t hashes;
    uint8_t n2;
    uint8_t owned;     /* bf is ours to free (else borrowed from a file image) */
} stage;

struct bk_rbloom {
    bk__object obj; /* first: a bk_rbloom is also a bk_filter */
    stage *st;
    uint32_t n;     /* stages in use */
    uint32_t cap;   /* stages allocated */
    uint64_t size;  /* items inserted */
    uint32_t options;
    uint32_t growth;
    size_t max_bytes;
};

static const bk__family_ops rbloom_ops; /* at the end of this file */

/*==========================================================================
 * Hashing and probes
 *==========================================================================*/

static bk_hash hash_item(uint32_t options, const void *item, size_t len)
{
    static const char empty[1] = {0};
    bk_hash h;
    if (item == NULL) item = empty, len = 0;
    if (options & OPT_FORCE64) {
        h.lo = bk__murmur64a(item, len, SEED64);
        h.hi = bk__murmur64a(item, len, h.lo);
    } else {
        uint32_t a = bk__murmur2_32(item, len, SEED32);
        h.lo = a;
        h.hi = bk__murmur2_32(item, len, a);
    }
    return h;
}

static inline uint64_t probe(const stage *s, bk_hash h, uint64_t i)
{
    uint64_t v = h.lo + i * h.hi;
    return s->n2 ? (v & (s->mod - 1)) : v % s->mod;
}

static int stage_test(const stage *s, bk_hash h)
{
    for (uint64_t i = 0; i < s->hashes; i++) {
        uint64_t x = probe(s, h, i);
        if (!(s->bf[x >> 3] & (1u << (x & 7)))) return 0;
    }
    return 1;
}

/* Set every probe; 1 when one of them was clear. */
static int stage_set(stage *s, bk_hash h)
{
    int fresh = 0;
    for (uint64_t i = 0; i < s->hashes; i++) {
        uint64_t x = probe(s, h, i);
        unsigned char m = (unsigned char)(1u << (x & 7));
        if (!(s->bf[x >> 3] & m)) {
            s->bf[x >> 3] |= m;
            fresh = 1;
        }
    }
    return fresh;
}

/*==========================================================================
 * Sizing and validation
 *==========================================================================*/

static double calc_bpe(double error)
{
    double bpe = -(log(error) / RB_LN2_SQ);
    return bpe < 0 ? -bpe : bpe;
}

static uint32_t hashes_of(double bpe) { return (uint32_t)(int)ceil(RB_LN2 * bpe); }

/* Bytes this machine could ever hold: its physical memory. */
static uint64_t machine_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t limit = (uint64_t)(SIZE_MAX / 2);
    if (pages > 0 && page > 0 && (uint64_t)pages <= limit / (uint64_t)page)
        limit = (uint64_t)pages * (uint64_t)page;
    return limit;
}

/* The shape of a new stage as RedisBloom's bloom_init gives it (bf not
 * allocated). BK_EPARAM when bloom_init would refuse or go undefined. */
static int shape_stage(stage *s, uint64_t entries, double error, uint32_t options)
{
    if (entries < 1 || !(error > 0.0 && error < 1.0)) return BK_EPARAM;
    memset(s, 0, sizeof(*s));
    double bpe = calc_bpe(error);
    uint64_t bits;
    s->entries = entries;
    if (options & OPT_ENTS_IS_BITS) {
        if (entries > 62) return BK_EPARAM;
        s->n2 = (uint8_t)entries;
        bits = UINT64_C(1) << s->n2;
        s->entries = (uint64_t)((double)bits / bpe);
    } else if (options & OPT_NOROUND) {
        double x = (double)entries * bpe;
        if (!(x < 4611686018427387904.0)) return BK_EPARAM; /* 2^62 bits */
        bits = (uint64_t)x;
        if (bits == 0) bits = 1;
    } else {
        double x = (double)entries * bpe;
        double bn2 = logb(x);
        if (!(bn2 >= 0.0 && bn2 <= 61.0)) return BK_EPARAM;
        s->n2 = (uint8_t)(bn2 + 1);
        bits = UINT64_C(1) << s->n2;
        uint64_t bitdiff = (uint64_t)((double)bits - x);
        uint64_t itemdiff = (uint64_t)((double)bitdiff / bpe);
        if (itemdiff > UINT64_MAX - s->entries) return BK_EPARAM;
        s->entries += itemdiff;
    }
    s->bytes = bits % 64 ? (bits / 64 + 1) * 8 : bits / 8;
    s->bits = s->bytes * 8;
    s->mod = s->n2 ? UINT64_C(1) << s->n2 : s->bits;
    s->error = error;
    s->bpe = bpe;
    s->hashes = hashes_of(bpe);
    return BK_OK;
}

/* A stage read from outside: every probe must fall in its bytes. strict:
 * bits = bytes * 8 as well (RedisBloom's check of a header chunk). Sets
 * mod. */
static int check_stage(stage *s, int strict)
{
    if (!(s->error > 0.0 && s->error < 1.0)) return BK_ECORRUPT;
    if (!(s->bpe > 0.0 && s->bpe <= 4096.0)) return BK_ECORRUPT;
    if (s->hashes != hashes_of(s->bpe)) return BK_ECORRUPT;
    if (s->n2 > 63 || s->bytes == 0 || s->bytes > UINT64_MAX / 8) return BK_ECORRUPT;
    uint64_t room = s->bytes * 8;
    if (s->bits == 0 || s->bits > room) return BK_ECORRUPT;
    if (strict && s->bits != room) return BK_ECORRUPT;
    if (s->n2) {
        if ((UINT64_C(1) << s->n2) > room) return BK_ECORRUPT;
        s->mod = UINT64_C(1) << s->n2;
    } else {
        s->mod = s->bits;
    }
    return BK_OK;
}

/* The chain's own fields against its stages. */
static int check_chain(const bk_rbloom *f)
{
    if (f->options & ~OPT_ALL) return BK_ECORRUPT;
    if (f->n < 1 || f->n > MAX_STAGES) return BK_ECORRUPT;
    uint64_t total = 0;
    for (uint32_t i = 0; i < f->n; i++) {
        if (f->st[i].size > UINT64_MAX - total) return BK_ECORRUPT;
        total += f->st[i].size;
    }
    return total == f->size ? BK_OK : BK_ECORRUPT;
}

/* The stages' bytes, or BK_ESIZE beyond the machine. */
static int check_total(const stage *st, uint32_t n)
{
    uint64_t total = 0, limit = machine_bytes();
    for (uint32_t i = 0; i < n; i++) {
        if (st[i].bytes > limit - total) return BK_ESIZE;
        total += st[i].bytes;
    }
    return BK_OK;
}

/*==========================================================================
 * Lifetime
 *==========================================================================*/

static bk_rbloom *chain_new(uint32_t nstages)
{
    bk_rbloom *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return NULL;
    bk__object_init(&f->obj, &rbloom_ops);
    f->st = bk__calloc(nstages, sizeof(stage));
    if (f->st == NULL) {
        bk__free(f);
        return NULL;
    }
    f->cap = nstages;
    return f;
}

void bk_rbloom_free(bk_rbloom *f)
{
    if (f == NULL) return;
    for (uint32_t i = 0; i < f->cap; i++)
        if (f->st[i].owned) bk__free(f->st[i].bf);
    bk__free(f->st);
    bk__object_release(&f->obj);
    bk__free(f);
}

/* Give stage s its own zeroed bytes. */
static int stage_alloc(stage *s)
{
    if (s->bytes > SIZE_MAX) return BK_ENOMEM;
    s->bf = bk__calloc(1, (size_t)s->bytes);
    if (s->bf == NULL) return BK_ENOMEM;
    s->owned = 1;
    return BK_OK;
}

int bk_rbloom_encver(void) { return ENCVER; }

int bk_rbloom_create(bk_rbloom **out, uint64_t capacity, double error, uint32_t expansion)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (!(error > 0.0 && error < 1.0)) return BK_EFPR;
    if (capacity == 0) return BK_ECAPACITY;
    uint32_t options = OPT_FORCE64 | OPT_NOROUND | (expansion == 0 ? OPT_NO_SCALING : 0);
    stage s;
    int rc = shape_stage(&s, capacity, expansion == 0 ? error : error * TIGHTENING, options);
    if (rc != BK_OK) return rc;
    if (check_total(&s, 1) != BK_OK) return BK_EPARAM;
    bk_rbloom *f = chain_new(1);
    if (f == NULL) return BK_ENOMEM;
    f->st[0] = s;
    if (stage_alloc(&f->st[0]) != BK_OK) {
        bk_rbloom_free(f);
        return BK_ENOMEM;
    }
    f->n = 1;
    f->options = options;
    f->growth = expansion == 0 ? DEFAULT_GROWTH : expansion;
    *out = f;
    return BK_OK;
}

/*==========================================================================
 * Adds and lookups
 *==========================================================================*/

size_t bk_rbloom_bytes(const bk_rbloom *f)
{
    if (f == NULL) return 0;
    uint64_t b = sizeof(*f) + (uint64_t)f->cap * sizeof(stage);
    for (uint32_t i = 0; i < f->n; i++) b += f->st[i].bytes;
    return b > SIZE_MAX ? SIZE_MAX : (size_t)b;
}

/* A new newest stage, as RedisBloom adds one to a full chain. */
static int grow(bk_rbloom *f)
{
    const stage *cur = &f->st[f->n - 1];
    if (f->n >= MAX_STAGES) return BK_EFULL;
    uint64_t entries;
    if (bk__mul_overflow(cur->entries, f->growth, &entries)) return BK_EFULL;
    stage s;
    if (shape_stage(&s, entries, cur->error * TIGHTENING, f->options) != BK_OK)
        return BK_EFULL; /* growth 0, or a rate or size RedisBloom cannot make */
    uint32_t cap = f->cap;
    if (f->n == cap) cap = cap < MAX_STAGES / 2 ? cap * 2 : MAX_STAGES;
    uint64_t now = bk_rbloom_bytes(f);
    uint64_t after = now + (uint64_t)(cap - f->cap) * sizeof(stage);
    if (s.bytes > UINT64_MAX - after) return BK_ENOMEM;
    after += s.bytes;
    if (f->max_bytes && after > f->max_bytes) return BK_ELIMIT;
    if (check_total(&s, 1) != BK_OK) return BK_ENOMEM;
    if (stage_alloc(&s) != BK_OK) return BK_ENOMEM;
    if (cap != f->cap) {
        stage *st = bk__calloc(cap, sizeof(stage));
        if (st == NULL) {
            bk__free(s.bf);
            return BK_ENOMEM;
        }
        memcpy(st, f->st, (size_t)f->cap * sizeof(stage));
        bk__free(f->st);
        f->st = st;
        f->cap = cap;
    }
    f->st[f->n++] = s;
    return BK_OK;
}

static int add_h(bk_rbloom *f, bk_hash h)
{
    for (uint32_t i = f->n; i-- > 0;)
        if (stage_test(&f->st[i], h)) return 0;
    stage *cur = &f->st[f->n - 1];
    if (cur->size >= cur->entries) {
        if (f->options & OPT_NO_SCALING) return BK_EFULL;
        int rc = grow(f);
        if (rc != BK_OK) return rc;
        cur = &f->st[f->n - 1];
    }
    int fresh = stage_set(cur, h);
    if (fresh) {
        cur->size++;
        f->size++;
    }
    return fresh;
}

static int contains_h(const bk_rbloom *f, bk_hash h)
{
    for (uint32_t i = f->n; i-- > 0;)
        if (stage_test(&f->st[i], h)) return 1;
    return 0;
}

int bk_rbloom_add(bk_rbloom *f, const void *item, size_t len)
{
    if (f == NULL || (item == NULL && len != 0)) return BK_EINVAL;
    return add_h(f, hash_item(f->options, item, len));
}

int bk_rbloom_contains(const bk_rbloom *f, const void *item, size_t len)
{
    if (f == NULL || (item == NULL && len != 0)) return 0;
    return contains_h(f, hash_item(f->options, item, len));
}

void bk_rbloom_set_max_bytes(bk_rbloom *f, size_t max_bytes)
{
    if (f != NULL) f->max_bytes = max_bytes;
}

/*==========================================================================
 * BF.INFO
 *==========================================================================*/

uint64_t bk_rbloom_capacity(const bk_rbloom *f)
{
    uint64_t c = 0;
    if (f != NULL)
        for (uint32_t i = 0; i < f->n; i++) c += f->st[i].entries;
    return c;
}

uint64_t bk_rbloom_size(const bk_rbloom *f)
{
    if (f == NULL) return 0;
    uint64_t b = RB_CHAIN_STRUCT;
    for (uint32_t i = 0; i < f->n; i++) b += RB_LINK_STRUCT + f->st[i].bytes;
    return b;
}

uint32_t bk_rbloom_stages(const bk_rbloom *f) { return f ? f->n : 0; }
uint64_t bk_rbloom_items(const bk_rbloom *f) { return f ? f->size : 0; }

uint32_t bk_rbloom_expansion(const bk_rbloom *f)
{
    if (f == NULL || (f->options & OPT_NO_SCALING)) return 0;
    return f->growth;
}

int bk_rbloom_stage_info(const bk_rbloom *f, uint32_t i, bk_rbloom_stage *out)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    if (i >= f->n) return BK_EPARAM;
    const stage *s = &f->st[i];
    out->bytes = s->bytes;
    out->bits = s->bits;
    out->capacity = s->entries;
    out->items = s->size;
    out->error = s->error;
    out->hashes = s->hashes;
    out->hash_bits = (f->options & OPT_FORCE64) ? 64 : 32;
    return BK_OK;
}

double bk_rbloom_error(const bk_rbloom *f)
{
    if (f == NULL || f->n == 0) return 0;
    return f->st[0].error * ((f->options & OPT_NO_SCALING) ? 1 : 2);
}

/*==========================================================================
 * Chunks
 *==========================================================================*/

size_t bk_rbloom_header(const bk_rbloom *f, void *buf, size_t cap)
{
    if (f == NULL) return 0;
    size_t need = HDR_FIXED + (size_t)HDR_LINK * f->n;
    if (buf == NULL || cap < need) return need;
    unsigned char *p = buf;
    bk__put_le64(p, f->size);
    bk__put_le32(p + 8, f->n);
    bk__put_le32(p + 12, f->options);
    bk__put_le32(p + 16, f->growth);
    p += HDR_FIXED;
    for (uint32_t i = 0; i < f->n; i++, p += HDR_LINK) {
        const stage *s = &f->st[i];
        bk__put_le64(p, s->bytes);
        bk__put_le64(p + 8, s->bits);
        bk__put_le64(p + 16, s->size);
        bk__put_le_f64(p + 24, s->error);
        bk__put_le_f64(p + 32, s->bpe);
        bk__put_le32(p + 40, s->hashes);
        bk__put_le64(p + 44, s->entries);
        p[52] = s->n2;
    }
    return need;
}

/* The stage holding stream offset pos, and the offset inside it; NULL past
 * the end. */
static stage *locate(const bk_rbloom *f, uint64_t pos, uint64_t *offset)
{
    for (uint32_t i = 0; i < f->n; i++) {
        if (pos < f->st[i].bytes) {
            *offset = pos;
            return &f->st[i];
        }
        pos -= f->st[i].bytes;
    }
    return NULL;
}

int bk_rbloom_chunk(const bk_rbloom *f, uint64_t iter, uint64_t *next, const void **data,
                    size_t *len)
{
    if (f == NULL || next == NULL || data == NULL || len == NULL || iter == 0)
        return BK_EINVAL;
    uint64_t off;
    const stage *s = locate(f, iter - 1, &off);
    if (s == NULL) {
        uint64_t total = 0;
        for (uint32_t i = 0; i < f->n; i++) total += f->st[i].bytes;
        if (iter - 1 != total) return BK_EINVAL;
        *next = 0;
        *data = NULL;
        *len = 0;
        return BK_OK;
    }
    uint64_t n = s->bytes - off;
    if (n > CHUNK_MAX) n = CHUNK_MAX;
    *data = s->bf + off;
    *len = (size_t)n;
    *next = iter + n;
    return BK_OK;
}

int bk_rbloom_from_header(bk_rbloom **out, const void *data, size_t len)
{
    if (out == NULL || (data == NULL && len != 0)) return BK_EINVAL;
    *out = NULL;
    const unsigned char *p = data;
    if (len < HDR_FIXED) return BK_ETRUNC;
    uint32_t n = bk__get_le32(p + 8);
    if (n == 0 || n > MAX_STAGES) return BK_ECORRUPT;
    size_t need = HDR_FIXED + (size_t)HDR_LINK * n;
    if (len < need) return BK_ETRUNC;
    if (len > need) return BK_ECORRUPT;

    bk_rbloom *f = chain_new(n);
    if (f == NULL) return BK_ENOMEM;
    int rc = BK_OK;
    f->n = n;
    f->size = bk__get_le64(p);
    f->options = bk__get_le32(p + 12);
    f->growth = bk__get_le32(p + 16);
    p += HDR_FIXED;
    for (uint32_t i = 0; i < n && rc == BK_OK; i++, p += HDR_LINK) {
        stage *s = &f->st[i];
        s->bytes = bk__get_le64(p);
        s->bits = bk__get_le64(p + 8);
        s->size = bk__get_le64(p + 16);
        s->error = bk__get_le_f64(p + 24);
        s->bpe = bk__get_le_f64(p + 32);
        s->hashes = bk__get_le32(p + 40);
        s->entries = bk__get_le64(p + 44);
        s->n2 = p[52];
        rc = check_stage(s, 1);
    }
    if (rc == BK_OK) rc = check_chain(f);
    if (rc == BK_OK) rc = check_total(f->st, f->n);
    /* only a header found sound gets its (possibly large) bit arrays */
    for (uint32_t i = 0; i < n && rc == BK_OK; i++) rc = stage_alloc(&f->st[i]);
    if (rc != BK_OK) {
        bk_rbloom_free(f);
        return rc;
    }
    *out = f;
    return BK_OK;
}

int bk_rbloom_load_chunk(bk_rbloom *f, uint64_t iter, const void *data, size_t len)
{
    if (f == NULL || (data == NULL && len != 0)) return BK_EINVAL;
    if (iter <= len) return BK_ECHUNK; /* the chunk would start before offset 0 */
    uint64_t off;
    stage *s = locate(f, iter - len - 1, &off);
    if (s == NULL || len > s->bytes - off) return BK_ECHUNK;
    if (len) memcpy(s->bf + off, data, len);
    return BK_OK;
}

/*==========================================================================
 * Fields
 *==========================================================================*/

/* A reader's failure: the code it gave when it is one of ours, else
 * "no more fields". */
static int read_failed(int rc)
{
    return rc == BK_ECORRUPT || rc == BK_ETRUNC ? rc : BK_ETRUNC;
}

#define GET_U(dst)                                                      \
    do {                                                                \
        int r_ = r->get_unsigned(r->ctx, &(dst));                       \
        if (r_ != 0) { rc = read_failed(r_); goto fail; }               \
    } while (0)
#define GET_D(dst)                                                      \
    do {                                                                \
        int r_ = r->get_double(r->ctx, &(dst));                         \
        if (r_ != 0) { rc = read_failed(r_); goto fail; }               \
    } while (0)

int bk_rbloom_load_fields(bk_rbloom **out, int encver, const bk_rfields *r)
{
    if (out == NULL || r == NULL || r->get_unsigned == NULL || r->get_double == NULL ||
        r->get_string == NULL)
        return BK_EINVAL;
    *out = NULL;
    if (encver < 0 || encver > ENCVER) return BK_EVERSION;
    bk_rbloom *f = NULL;
    int rc = BK_OK;
    uint64_t size, n, options = 0, growth = DEFAULT_GROWTH;
    GET_U(size);
    GET_U(n);
    if (encver >= 2) GET_U(options);
    if (encver >= 4) GET_U(growth);
    if (n == 0 || n > MAX_STAGES || options > OPT_ALL || growth > UINT32_MAX) {
        rc = BK_ECORRUPT;
        goto fail;
    }
    f = chain_new((uint32_t)n);
    if (f == NULL) {
        rc = BK_ENOMEM;
        goto fail;
    }
    f->size = size;
    f->options = (uint32_t)options;
    f->growth = (uint32_t)growth;
    uint64_t total = 0, limit = machine_bytes();
    for (uint32_t i = 0; i < n; i++) {
        stage *s = &f->st[i];
        uint64_t hashes, bits = 0, n2 = 0, ssize;
        GET_U(s->entries);
        GET_D(s->error);
        GET_U(hashes);
        GET_D(s->bpe);
        if (encver == 0) {
            double x = (double)s->entries * s->bpe;
            if (!(x >= 0.0 && x < 18446744073709551616.0)) {
                rc = BK_ECORRUPT;
                goto fail;
            }
            bits = (uint64_t)x;
        } else {
            GET_U(bits);
            GET_U(n2);
        }
        const void *p;
        size_t len;
        int r_ = r->get_string(r->ctx, &p, &len);
        if (r_ != 0) {
            rc = read_failed(r_);
            goto fail;
        }
        if (hashes > UINT32_MAX || n2 > 63) {
            rc = BK_ECORRUPT;
            goto fail;
        }
        s->hashes = (uint32_t)hashes;
        s->bits = bits;
        s->n2 = (uint8_t)n2;
        s->bytes = len;
        if ((rc = check_stage(s, 0)) != BK_OK) goto fail;
        if (s->bytes > limit - total) {
            rc = BK_ESIZE;
            goto fail;
        }
        total += s->bytes;
        if ((rc = stage_alloc(s)) != BK_OK) goto fail;
        memcpy(s->bf, p, len);
        f->n = i + 1; /* counted as it is filled */
        GET_U(ssize);
        s->size = ssize;
    }
    if ((rc = check_chain(f)) != BK_OK) goto fail;
    *out = f;
    return BK_OK;
fail:
    bk_rbloom_free(f);
    return rc;
}

int bk_rbloom_save_fields(const bk_rbloom *f, const bk_rfields *w)
{
    if (f == NULL || w == NULL || w->put_unsigned == NULL || w->put_double == NULL ||
        w->put_string == NULL)
        return BK_EINVAL;
    if (w->put_unsigned(w->ctx, f->size) || w->put_unsigned(w->ctx, f->n) ||
        w->put_unsigned(w->ctx, f->options) || w->put_unsigned(w->ctx, f->growth))
        return BK_EIO;
    for (uint32_t i = 0; i < f->n; i++) {
        const stage *s = &f->st[i];
        if (w->put_unsigned(w->ctx, s->entries) || w->put_double(w->ctx, s->error) ||
            w->put_unsigned(w->ctx, s->hashes) || w->put_double(w->ctx, s->bpe) ||
            w->put_unsigned(w->ctx, s->bits) || w->put_unsigned(w->ctx, s->n2) ||
            w->put_string(w->ctx, s->bf, (size_t)s->bytes) ||
            w->put_unsigned(w->ctx, s->size))
            return BK_EIO;
    }
    return BK_OK;
}

/*==========================================================================
 * The generic handle and bloomkit's file format
 *
 * Image (docs/FORMAT.md, family 20): hash algorithm 3 (BK__HASH_MURMUR64A,
 * RedisBloom's MurmurHash as above; 32-bit chains say so in options), seed 0,
 * capacity = BF.INFO Capacity, fpr = stage 0's rate, items = the chain's
 * size, param[0] = growth, param[1] = options, param[2] = the byte cap
 * (bk_rbloom_set_max_bytes; 0 none), flags 0. One part per stage: m =
 * bits (RedisBloom's field), k = hashes, width = n2, capacity = entries,
 * fpr = error, items = size, param = bpe's binary64 bits, payload the
 * stage's bytes as they are.
 *==========================================================================*/

BK__FAMILY_CASTS(rbloom, rbloom_ops)

static bk_hash ops_hash(const void *f, const void *key, size_t len)
{
    return hash_item(((const bk_rbloom *)f)->options, key, len);
}

static int ops_add(void *f, bk_hash h) { return add_h(f, h); }
static int ops_contains(const void *f, bk_hash h) { return contains_h(f, h); }
static uint64_t ops_seed(const void *f) { (void)f; return 0; }
static void ops_destroy(void *f) { bk_rbloom_free(f); }
static uint32_t ops_nparts(const void *f) { return ((const bk_rbloom *)f)->n; }

static int ops_create(const bk_filter_config *cfg, void **out)
{
    bk_rbloom *f;
    uint32_t expansion = cfg->nonscaling ? 0 : (cfg->expansion ? cfg->expansion : DEFAULT_GROWTH);
    int rc = bk_rbloom_create(&f, cfg->capacity, cfg->fpr, expansion);
    if (rc == BK_OK) *out = f;
    return rc;
}

static int ops_info(const void *vf, bk_filter_info *out)
{
    const bk_rbloom *f = vf;
    double keep_now = 1.0, keep_full = 1.0, est = 0.0;
    uint64_t set_total = 0, bits_total = 0;
    for (uint32_t i = 0; i < f->n; i++) {
        const stage *s = &f->st[i];
        uint64_t set = 0;
        for (uint64_t b = 0; b < s->bytes; b++) set += (uint64_t)__builtin_popcount(s->bf[b]);
        /* bits a probe can reach: the first mod of them */
        double m = (double)s->mod;
        double x = (double)set;
        if (x > m) x = m;
        set_total += set;
        bits_total += s->bytes * 8;
        keep_now *= 1.0 - pow(x / m, (double)s->hashes);
        keep_full *= 1.0 - s->error;
        est += x < m ? -m / s->hashes * log1p(-x / m) : (double)s->entries;
    }
    out->seed = 0;
    out->capacity = bk_rbloom_capacity(f);
    out->target_fpr = (f->options & OPT_NO_SCALING) ? f->st[0].error
                                                    : f->st[0].error / TIGHTENING;
    out->items = f->size;
    out->estimated_items = est;
    out->fpr_now = 1.0 - keep_now;
    out->fpr_at_capacity = 1.0 - keep_full;
    out->fill = bits_total ? (double)set_total / (double)bits_total : 0.0;
    out->bytes = bk_rbloom_bytes(f);
    out->parts = f->n;
    return BK_OK;
}

static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_rbloom *f = vf;
    visit(ctx, f, sizeof(*f));
    visit(ctx, f->st, (size_t)f->cap * sizeof(stage));
    for (uint32_t i = 0; i < f->n; i++)
        if (f->st[i].owned) visit(ctx, f->st[i].bf, (size_t)f->st[i].bytes);
}

static int ops_clone(const void *vf, void **out)
{
    const bk_rbloom *f = vf;
    bk_rbloom *c = chain_new(f->n);
    if (c == NULL) return BK_ENOMEM;
    c->size = f->size;
    c->options = f->options;
    c->growth = f->growth;
    c->max_bytes = f->max_bytes;
    for (uint32_t i = 0; i < f->n; i++) {
        c->st[i] = f->st[i];
        c->st[i].bf = NULL;
        c->st[i].owned = 0;
        if (stage_alloc(&c->st[i]) != BK_OK) {
            bk_rbloom_free(c);
            return BK_ENOMEM;
        }
        memcpy(c->st[i].bf, f->st[i].bf, (size_t)f->st[i].bytes);
        c->n = i + 1;
    }
    *out = c;
    return BK_OK;
}

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_rbloom *f = vf;
    img->seed = 0;
    img->capacity = bk_rbloom_capacity(f);
    img->fpr = f->st[0].error;
    img->items = f->size;
    img->hash = BK__HASH_MURMUR64A;
    img->flags = 0;
    img->param[0] = f->growth;
    img->param[1] = f->options;
    img->param[2] = f->max_bytes;
    img->param[3] = 0;
    for (uint32_t i = 0; i < f->n; i++) {
        const stage *s = &f->st[i];
        bk__part *p = &img->parts[i];
        uint64_t bpe;
        memcpy(&bpe, &s->bpe, sizeof(bpe));
        p->m = s->bits;
        p->k = s->hashes;
        p->width = s->n2;
        p->slots = 0;
        p->flags = 0;
        p->capacity = s->entries;
        p->fpr = s->error;
        p->items = s->size;
        p->param = bpe;
        p->data = s->bf;
        p->length = s->bytes;
    }
    return BK_OK;
}

/* Parts are borrowed (they point into the object's payload block). */
static int ops_restore(const bk__image *img, void **out)
{
    if (img->hash != BK__HASH_MURMUR64A || img->seed != 0 || img->flags != 0 ||
        img->nparts < 1 || img->nparts > MAX_STAGES || img->param[0] > UINT32_MAX ||
        img->param[1] > OPT_ALL || img->param[2] > SIZE_MAX || img->param[3] != 0)
        return BK_ECORRUPT;
    bk_rbloom *f = chain_new(img->nparts);
    if (f == NULL) return BK_ENOMEM;
    int rc = BK_OK;
    f->n = img->nparts;
    f->size = img->items;
    f->growth = (uint32_t)img->param[0];
    f->options = (uint32_t)img->param[1];
    f->max_bytes = (size_t)img->param[2];
    uint64_t capacity = 0;
    for (uint32_t i = 0; i < f->n && rc == BK_OK; i++) {
        const bk__part *p = &img->parts[i];
        stage *s = &f->st[i];
        if (p->slots != 0 || p->flags != 0 || p->width > 63 || p->data == NULL) {
            rc = BK_ECORRUPT;
            break;
        }
        s->bits = p->m;
        s->hashes = p->k;
        s->n2 = p->width;
        s->entries = p->capacity;
        s->error = p->fpr;
        s->size = p->items;
        memcpy(&s->bpe, &p->param, sizeof(s->bpe));
        s->bytes = p->length;
        s->bf = p->data;
        s->owned = 0;
        rc = check_stage(s, 0);
        if (rc == BK_OK && s->entries > UINT64_MAX - capacity) rc = BK_ECORRUPT;
        capacity += s->entries;
    }
    if (rc == BK_OK) rc = check_chain(f);
    if (rc == BK_OK && (capacity != img->capacity || img->fpr != f->st[0].error))
        rc = BK_ECORRUPT;
    if (rc != BK_OK) {
        bk_rbloom_free(f);
        return rc;
    }
    *out = f;
    return BK_OK;
}

static const bk__family_ops rbloom_ops = {
    .family = BK_FAMILY_RBLOOM,
    .name = "rbloom",
    BK__OPS_STANDARD,
    .hash = ops_hash, .clone = ops_clone,
};

const bk__family_ops *const bk__rbloom_family = &rbloom_ops;
