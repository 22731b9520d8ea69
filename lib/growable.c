/*
 * growable.c - the growable filter: a quotient filter that doubles, kept in
 * 64-byte blocks (one cache line per lookup) once it is large and as one
 * packed list while it is small.
 *
 * Positions
 *   A key's 64-bit hash h (XXH3-64 of the key and the seed) is read as a
 *   fraction x = h / 2^64. At level k the filter has N = n0 * 2^k "minis"
 *   (quotients); the key's mini is Q = floor(x N) and its fingerprint the
 *   next 11 bits, the top of frac(x N). Both come from the 128-bit product
 *   h * N: its high half is Q, the top bits of its low half the fingerprint.
 *   Doubling N makes Q' = 2Q + (the fingerprint's first bit) and shifts the
 *   fingerprint left: each entry moves to one of its mini's two children
 *   and keeps one bit less. N need not be a power of two (n0 = 75), which
 *   is what lets the filter's sizes follow RedisBloom's chain: level k
 *   holds base * 2^k keys (100 * 2^k), as RedisBloom's chain of k stages
 *   holds 100 * (2^k - 1).
 *
 * Entries
 *   An entry of L fingerprint bits (L = 0 ... 11) is stored in a 12-bit
 *   lane as fp << (12 - L) | 1 << (11 - L): its lowest set bit says L. It
 *   matches a key whose 11-bit tag is t when the bits above that marker
 *   equal t's: ((t << 1) ^ e) & -(lowbit(e) << 1) == 0 (mod 2^12). An
 *   entry with no bits left (a "void", 0x800) matches every key of its
 *   mini and is copied into both children when the filter doubles. Level-0
 *   entries all have 11 bits and are kept without the marker (11-bit
 *   lanes) while the filter is still a list.
 *
 * The list (levels 0 ... list_top)
 *   One bit string: the minis' runs in unary (for each mini, one 1 per
 *   entry, then a 0: N zeros and n ones), then the n lanes in the same
 *   order. Its size follows the keys exactly: 96 bytes with the handle
 *   for one key, 240 for 100 (RedisBloom's first filter: 240). Adds shift
 *   the string (a few kilobytes at most); the list becomes blocks when the
 *   filter doubles past list_top.
 *
 * Blocks (levels above list_top)
 *   N / M blocks of 64 bytes, M = 24 minis each. Word 0 holds the block's
 *   runs in unary (bits 0 ... 60) and three flags: bit 63 "being written"
 *   (see Threads), bit 62 SPILLED (entries of this block are in the next
 *   one), bit 61 STASHED (entries of this block are in the stash). Words
 *   1 ... 7 hold S = 37 lanes of 12 bits from bit 64, then, in bits
 *   508 ... 511, the number of entry pairs stored there for the previous
 *   block (foreign entries). A block's own entries fill lanes from 0 up,
 *   sorted within each mini, so the lanes of a block depend only on which
 *   keys it holds. When a block is full an entry goes to the next block as
 *   a pair of lanes from the top down (its entry, then its mini + 1), else
 *   to the stash: a hash table of words (Q << 16 | entry). At the doubling
 *   load (86.5% of the lanes) a fraction of the blocks have spilled and a
 *   few entries are in the stash (bench_grow prints the stash's count:
 *   36 entries of 1e7 at 76% of the doubling load); the doubling empties
 *   both.
 *
 * Rate
 *   A lookup of an absent key compares it with the entries of its mini,
 *   each matching with probability 2^-L: the rate is W / (2^11 N), W the
 *   sum of 2^(11 - L) over the entries. A new entry adds 1 to W, a
 *   doubling doubles W and N alike: entries made long ago keep costing
 *   what they cost when made, and the rate grows by about 0.033% per
 *   doubling at the doubling load. The filter keeps W and refuses
 *   (BK_EFULL) a doubling after which the rate, filled to the next
 *   doubling load, would pass the rate it was made for: at 1% it doubles
 *   about 28 times (100 keys to 2.7e10).
 *
 * Threads
 *   bk_growable_add_nogrow runs in many threads at once, and with lookups.
 *   It only adds to a block with room (nothing to a list, no spill, no
 *   stash, no doubling: those get BK_EFULL and go through bk_growable_add
 *   while nothing else runs). Adders take turns under a spin lock
 *   (`adding`). A block being written has bit 63 of word 0 set; a lookup
 *   reads word 0, then the block, then word 0 again, and starts over when
 *   it saw the bit or a change (a sequence lock: an add always changes
 *   word 0). Everything else needs the filter to itself.
 *   In the single-writer mode (bk_growable_set_single_writer; off in a new,
 *   loaded or cloned filter, as in the blocked filter) the caller promises
 *   that no other add, remove or lookup runs beside an add (the server and
 *   the module hold the key alone): bk_growable_add_nogrow then looks the
 *   key up once, takes no lock and writes the block in place with plain
 *   stores, no WRITING bit. The block's bytes and the counts end as in the
 *   concurrent mode. Lookups are the same in both modes: in this one they
 *   never meet a block being written, so they never start over.
 */
#include <sched.h>  /* sched_yield */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* qsort */
#include <string.h> /* memset, memcpy */

#include "filter.h"
#include "hash.h"

#if defined(__x86_64__) && defined(__GNUC__)
#  include <cpuid.h>     /* __get_cpuid */
#  include <immintrin.h> /* BMI2 in target() functions */
#  define GROWABLE_BMI2 1
#else
#  define GROWABLE_BMI2 0
#endif

#define LANE_BITS 12
#define FP_BITS 11               /* fingerprint bits of a new entry */
#define LANE_MASK 0xFFFu
#define VOID_ENTRY 0x800u
#define BLOCK_WORDS 8
#define LANE0 64                 /* first lane bit of a block */
#define FOREIGN_SHIFT 60         /* word 7: pairs kept for the previous block */
#define WRITING (UINT64_C(1) << 63)
#define SPILLED (UINT64_C(1) << 62)
#define STASHED (UINT64_C(1) << 61)
#define BLOCK_FLAGS (WRITING | SPILLED | STASHED)
#define META_MASK (STASHED - 1)
#define MAX_LEVEL 30             /* 25 * 2^27 blocks (214 GB): a block count fits 32 bits */
#define AHEAD 32                 /* keys hashed ahead in batches */
#define HANDLE_BYTES sizeof(bk_growable)

/* A stash word and a stream entry: mini << 16 | entry. */
#define SW_Q(w) ((w) >> 16)
#define SW_E(w) ((unsigned)((w) & 0xFFFFu))
#define SW_MAKE(q, e) ((uint64_t)(q) << 16 | (uint64_t)(e))

/* The shape of a growable filter. Only one is defined; the fields are
 * kept apart so that the code says which number it uses. */
typedef struct gfmt {
    uint32_t id;       /* the image's param[2] */
    uint32_t S;        /* lanes per block */
    uint32_t M;        /* minis per block */
    uint32_t list_top; /* the highest level kept as a list */
    uint64_t n0;       /* minis at level 0 */
    uint64_t base;     /* keys held at level 0: level k holds base << k */
    int multiset;      /* copies kept, counted and removed (CF keys) */
} gfmt;

/* A set (BF keys) and a multiset (CF keys) of the same shape: lookups
 * need not ask which. */
static const gfmt SET_FORMAT = {1, 37, 24, 6, 75, 100, 0};
static const gfmt MULTISET_FORMAT = {2, 37, 24, 6, 75, 100, 1};

/*==========================================================================
 * Parameters shared between filters
 *
 * What never changes after creation (seed, rate, capacity asked, the
 * seed's share of the hash) is kept once per distinct set and shared by
 * reference count: a BF key made by BF.ADD holds one pointer instead of
 * 100 bytes. The list is short (one entry per distinct set in use) and
 * only touched when a filter is made or freed.
 *==========================================================================*/

typedef struct gparams {
    struct gparams *next;
    uint64_t refs;
    const gfmt *fmt;
    uint64_t seed;
    double target;
    uint64_t capacity;
    bk__xxh64_keys keys;
} gparams;

static gparams *params_list;
static uint32_t params_lock;
/* The default seed's share of the hash, at a fixed address: a BF key's
 * lookup hashes without first loading where its keys are. */
static bk__xxh64_keys std_keys;
static int std_keys_ready;
static void select_table_fill(void);
static int select_table_ready;

static void params_lock_take(void)
{
    while (__atomic_exchange_n(&params_lock, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&params_lock, __ATOMIC_RELAXED)) sched_yield();
}

static void params_lock_give(void) { __atomic_store_n(&params_lock, 0, __ATOMIC_RELEASE); }

static const gparams *params_get(const gfmt *fmt, uint64_t seed, double target,
                                 uint64_t capacity)
{
    params_lock_take();
    if (!select_table_ready) {
        select_table_fill();
        select_table_ready = 1;
    }
    if (!std_keys_ready) {
        bk__xxh64_keys_init(&std_keys, BK_DEFAULT_SEED);
        std_keys_ready = 1;
    }
    gparams *p;
    for (p = params_list; p != NULL; p = p->next)
        if (p->fmt == fmt && p->seed == seed && p->target == target && p->capacity == capacity)
            break;
    if (p == NULL) {
        p = bk__calloc(1, sizeof(*p));
        if (p != NULL) {
            p->fmt = fmt;
            p->seed = seed;
            p->target = target;
            p->capacity = capacity;
            bk__xxh64_keys_init(&p->keys, seed);
            p->next = params_list;
            params_list = p;
        }
    }
    if (p != NULL) p->refs++;
    params_lock_give();
    return p;
}

static void params_put(const gparams *cp)
{
    if (cp == NULL) return;
    params_lock_take();
    gparams *p = (gparams *)cp;
    if (--p->refs == 0) {
        gparams **at = &params_list;
        while (*at != p) at = &(*at)->next;
        *at = p->next;
        bk__free(p);
    }
    params_lock_give();
}

static void params_ref(const gparams *cp)
{
    params_lock_take();
    ((gparams *)cp)->refs++;
    params_lock_give();
}

/*==========================================================================
 * The handle
 *==========================================================================*/

static const bk__family_ops growable_ops, multiset_ops; /* at the end of this file */

static const bk__family_ops *ops_of(const gparams *p)
{
    return p->fmt->multiset ? &multiset_ops : &growable_ops;
}

/* A block table's first line: the stash, then unused room (blocks follow,
 * so that they start on a line). */
typedef struct gheader {
    uint64_t nb;       /* blocks (lookups need no division) */
    uint32_t M, S;     /* the format's minis and lanes per block */
    uint64_t *slots;   /* the stash's hash table, NULL while it is empty */
    uint64_t nstash;   /* entries in it */
    uint32_t log_cap;  /* its slots: 1 << log_cap (0 when slots is NULL) */
} gheader;

struct bk_growable {
    bk__object obj;      /* first: a bk_growable is also a bk_filter */
    uint64_t *t;         /* the list, or a gheader line followed by the blocks */
    const gparams *p;    /* shared: seed, rate, capacity, format, hash keys */
    uint64_t items;      /* keys added (answers of 1) */
    uint64_t weight;     /* W: the sum of 2^(11 - L) over every entry */
    size_t max_bytes;    /* 0: no limit */
    uint8_t level;
    uint8_t blocks;      /* 1: a block table, 0: a list */
    uint8_t adding;      /* 1 while a bk_growable_add_nogrow stores */
    /* two flags in the handle's last free byte (a handle of 80 bytes:
     * what a one-key filter costs, 96 with its list) */
    unsigned std_seed : 1;      /* seed BK_DEFAULT_SEED: hash with std_keys */
    unsigned single_writer : 1; /* bk_growable_set_single_writer: adds alone */
    union {
        uint32_t list_n; /* a list's entries */
        uint32_t nb;     /* a table's blocks (kept here: no load before the block's) */
    };
};

static inline gheader *header_of(const bk_growable *f) { return (gheader *)(void *)f->t; }
static inline uint64_t *blocks_of(const bk_growable *f) { return f->t + BLOCK_WORDS; }

/*==========================================================================
 * Geometry
 *==========================================================================*/

static inline uint64_t minis_at(const gfmt *F, unsigned level) { return F->n0 << level; }
static inline uint64_t keys_at(const gfmt *F, unsigned level) { return F->base << level; }
static inline uint64_t nblocks_at(const gfmt *F, unsigned level)
{
    return minis_at(F, level) / F->M;
}
static inline unsigned lane_bits_at(unsigned level) { return level == 0 ? FP_BITS : LANE_BITS; }

/* The first level whose keys reach `capacity`, or -1. */
static int level_for(const gfmt *F, uint64_t capacity)
{
    for (unsigned k = 0; k <= MAX_LEVEL; k++)
        if (keys_at(F, k) >= capacity) return (int)k;
    return -1;
}

static size_t table_bytes(const gfmt *F, unsigned level)
{
    return (size_t)(nblocks_at(F, level) + 1) * BK_CACHE_LINE;
}

/* An empty block table: its header line, then the blocks. */
static uint64_t *table_new(const gfmt *F, unsigned level)
{
    uint64_t *t = bk__calloc_aligned(table_bytes(F, level));
    if (t != NULL) {
        gheader *hd = (gheader *)(void *)t;
        hd->nb = nblocks_at(F, level);
        hd->M = F->M;
        hd->S = F->S;
    }
    return t;
}

/* Words of a list at `level` with n entries. */
static uint64_t list_words_for(const gfmt *F, unsigned level, uint64_t n)
{
    uint64_t bits = minis_at(F, level) + n * (1 + lane_bits_at(level));
    return (bits + 63) / 64;
}

/* Bytes held: the handle; the list, or the table (its header line and
 * blocks, and the line of alignment slack) and the stash's slots. */
static size_t total_bytes(const bk_growable *f)
{
    if (!f->blocks)
        return HANDLE_BYTES + (size_t)list_words_for(f->p->fmt, f->level, f->list_n) * 8;
    const gheader *hd = header_of(f);
    size_t stash = hd->slots ? ((size_t)8 << hd->log_cap) : 0;
    return HANDLE_BYTES + table_bytes(f->p->fmt, f->level) + BK_CACHE_LINE + stash;
}

/*==========================================================================
 * Bit strings: 64-bit words, bit i of the string is bit i % 64 of word i / 64
 *==========================================================================*/

/* Bits [pos, pos + n) as a number (n <= 57). */
static inline uint64_t get_bits(const uint64_t *a, uint64_t pos, unsigned n)
{
    uint64_t i = pos >> 6;
    unsigned s = (unsigned)(pos & 63);
    uint64_t v = a[i] >> s;
    if (s + n > 64) v |= a[i + 1] << (64 - s);
    return v & ((UINT64_C(1) << n) - 1);
}

static inline void put_bits(uint64_t *a, uint64_t pos, unsigned n, uint64_t v)
{
    uint64_t i = pos >> 6, mask = (UINT64_C(1) << n) - 1;
    unsigned s = (unsigned)(pos & 63);
    a[i] = (a[i] & ~(mask << s)) | (v << s);
    if (s + n > 64) a[i + 1] = (a[i + 1] & ~(mask >> (64 - s))) | (v >> (64 - s));
}

/* Bits at b and above of a word (none for b = 64). */
static inline uint64_t bits_from(unsigned b) { return b >= 64 ? 0 : ~UINT64_C(0) << b; }

/* Move bits [pos, end) up by n (1 <= n <= 57; bits [end, end + n) are
 * overwritten, what lies past them is kept) and write v into
 * [pos, pos + n). Word by word, from the top. */
static void insert_bits(uint64_t *a, uint64_t pos, uint64_t end, unsigned n, uint64_t v)
{
    if (end > pos) {
        uint64_t to = pos + n, stop = end + n; /* [to, stop) receives [pos, end) */
        uint64_t first = to >> 6, last = (stop - 1) >> 6;
        uint64_t hi_mask = bits_from((unsigned)(stop - 64 * last)), keep_hi = a[last] & hi_mask;
        for (uint64_t w = last; w > first; w--) /* a double shift (SHLD) a word */
            a[w] = (uint64_t)((((unsigned __int128)a[w] << 64) | a[w - 1]) >> ((64 - n) & 63));
        uint64_t shifted = a[first] << n;
        if (first > 0) shifted |= a[first - 1] >> (64 - n);
        uint64_t m = bits_from((unsigned)(to & 63));
        a[first] = (a[first] & ~m) | (shifted & m);
        a[last] = (a[last] & ~hi_mask) | keep_hi;
    }
    put_bits(a, pos, n, v);
}

/* Remove bits [pos, pos + n): bits [pos + n, end) move down by n, bits
 * [end - n, end) become zero, what lies past end is kept. */
static void delete_bits(uint64_t *a, uint64_t pos, uint64_t end, unsigned n)
{
    uint64_t stop = end - n; /* [pos, stop) receives [pos + n, end) */
    if (stop > pos) {
        uint64_t first = pos >> 6, last = (stop - 1) >> 6, endw = (end - 1) >> 6;
        uint64_t lo_mask = bits_from((unsigned)(pos & 63)), keep_lo = a[first] & ~lo_mask;
        uint64_t hi_mask = bits_from((unsigned)(end - 64 * endw)), keep_hi = a[endw] & hi_mask;
        for (uint64_t w = first; w < last; w++)
            a[w] = (uint64_t)((((unsigned __int128)a[w + 1] << 64) | a[w]) >> (n & 63));
        uint64_t shifted = a[last] >> n;
        if (last < endw) shifted |= a[last + 1] << (64 - n);
        a[last] = shifted;
        a[first] = (a[first] & lo_mask) | keep_lo;
        a[endw] = (a[endw] & ~hi_mask) | keep_hi;
    }
    put_bits(a, stop, n, 0);
}

/* Set bits of x (the library is built for any x86-64: no POPCNT). */
static inline unsigned popcount64(uint64_t x)
{
    x = x - ((x >> 1) & UINT64_C(0x5555555555555555));
    x = (x & UINT64_C(0x3333333333333333)) + ((x >> 2) & UINT64_C(0x3333333333333333));
    x = (x + (x >> 4)) & UINT64_C(0x0F0F0F0F0F0F0F0F);
    return (unsigned)((x * UINT64_C(0x0101010101010101)) >> 56);
}

/* select_in_byte[b][r]: the position of the r-th set bit of byte b (8
 * when it has none that far). */
static uint8_t select_in_byte[256][8];
static void select_table_fill(void)
{
    for (unsigned b = 0; b < 256; b++)
        for (unsigned r = 0; r < 8; r++) {
            unsigned pos = 8, seen = 0;
            for (unsigned i = 0; i < 8 && pos == 8; i++)
                if ((b >> i) & 1u) {
                    if (seen == r) pos = i;
                    seen++;
                }
            select_in_byte[b][r] = (uint8_t)pos;
        }
}

/* filled under params_lock by the first filter made or loaded */

/* The position of the j-th set bit (from 0) of x, which has more than j:
 * the bytes' counts summed in one multiplication, the byte found by one
 * comparison of all eight sums, then the table for the byte. */
static inline unsigned select1(uint64_t x, unsigned j)
{
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    uint64_t s = x - ((x >> 1) & UINT64_C(0x5555555555555555));
    s = (s & UINT64_C(0x3333333333333333)) + ((s >> 2) & UINT64_C(0x3333333333333333));
    s = (s + (s >> 4)) & UINT64_C(0x0F0F0F0F0F0F0F0F);
    uint64_t sums = s * ones; /* byte i: set bits in bytes 0 ... i */
    uint64_t le = (((uint64_t)j * ones | highs) - sums) & highs;
    unsigned b = (unsigned)(((le >> 7) * ones) >> 56); /* bytes whose sum is <= j */
    unsigned before = (unsigned)((sums << 8) >> (8 * b)) & 0xFFu;
    return 8 * b + select_in_byte[(x >> (8 * b)) & 0xFF][j - before];
}

static inline unsigned select0(uint64_t x, unsigned j) { return select1(~x, j); }

/*==========================================================================
 * Entries
 *==========================================================================*/

/* 2^(11 - L): the entry's share of W. */
static inline uint64_t entry_weight(unsigned e) { return UINT64_C(1) << __builtin_ctz(e); }

/* The bits of e above its marker. */
static inline unsigned entry_care(unsigned e) { return (0u - ((e & (0u - e)) << 1)) & LANE_MASK; }

/* e matches a key whose 11-bit fingerprint is fp. */
static inline int entry_matches(unsigned e, unsigned fp)
{
    /* the bits above the marker agree: what differs is below 2 lowbit(e) */
    return (e ^ (fp << 1)) < ((e & (0u - e)) << 1);
}

static inline unsigned entry_new(unsigned fp) { return fp << 1 | 1u; }

/* 1 when d matches every key e matches (d's bits are a prefix of e's). */
static inline int entry_covers(unsigned d, unsigned e)
{
    return (d & (0u - d)) >= (e & (0u - e)) && ((d ^ e) & entry_care(d)) == 0;
}

/*==========================================================================
 * Positions
 *==========================================================================*/

__attribute__((always_inline)) static inline uint64_t hash_key(const bk_growable *f,
                                                              const void *key, size_t len)
{
    if (len > BK__XXH64_SHORT) return bk__xxh64(key, len, f->p->seed);
    return bk__xxh64_keyed(f->std_seed ? &std_keys : &f->p->keys, key, len);
}

/* A key's mini among N and its fingerprint. */
static inline uint64_t mini_of(uint64_t h, uint64_t n, unsigned *fp)
{
    unsigned __int128 p = (unsigned __int128)h * n;
    *fp = (unsigned)((uint64_t)p >> (64 - FP_BITS));
    return (uint64_t)(p >> 64);
}

/* The same for a block table: the block first (the load can start while
 * the rest is worked out), then the mini inside it. Equal to mini_of with
 * N = nb * M: h nb = b 2^64 + r and r M = mini 2^64 + r2 make
 * h nb M = (b M + mini) 2^64 + r2. */
static inline uint64_t block_of(uint64_t h, uint64_t nb, uint64_t *r)
{
    unsigned __int128 p = (unsigned __int128)h * nb;
    *r = (uint64_t)p;
    return (uint64_t)(p >> 64);
}

static inline unsigned mini_in_block(uint64_t r, unsigned m, unsigned *fp)
{
    unsigned __int128 p = (unsigned __int128)r * m;
    *fp = (unsigned)((uint64_t)p >> (64 - FP_BITS));
    return (unsigned)(p >> 64);
}

/*==========================================================================
 * The stash: open addressing over words (Q << 16 | entry), 0 = empty
 *==========================================================================*/

static inline uint64_t stash_home(uint64_t q, unsigned log_cap)
{
    return (q * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - log_cap);
}

static int stash_has(const gheader *hd, uint64_t q, unsigned fp)
{
    if (hd->slots == NULL) return 0;
    uint64_t mask = ((uint64_t)1 << hd->log_cap) - 1;
    for (uint64_t i = stash_home(q, hd->log_cap);; i = (i + 1) & mask) {
        uint64_t w = hd->slots[i];
        if (w == 0) return 0;
        if (SW_Q(w) == q && entry_matches(SW_E(w), fp)) return 1;
    }
}

static void stash_put(uint64_t *slots, unsigned log_cap, uint64_t w)
{
    uint64_t mask = ((uint64_t)1 << log_cap) - 1;
    uint64_t i = stash_home(SW_Q(w), log_cap);
    while (slots[i] != 0) i = (i + 1) & mask;
    slots[i] = w;
}

/* Room for one more entry (the table kept at most 3/4 full). */
static int stash_reserve(gheader *hd)
{
    if (hd->slots != NULL && (hd->nstash + 1) * 4 <= ((uint64_t)3 << hd->log_cap)) return BK_OK;
    unsigned log_cap = hd->slots ? hd->log_cap + 1 : 4;
    if (log_cap > 48) return BK_ENOMEM;
    uint64_t *slots = bk__calloc((size_t)1 << log_cap, sizeof(uint64_t));
    if (slots == NULL) return BK_ENOMEM;
    if (hd->slots != NULL)
        for (uint64_t i = 0; i < ((uint64_t)1 << hd->log_cap); i++)
            if (hd->slots[i]) stash_put(slots, log_cap, hd->slots[i]);
    bk__free(hd->slots);
    hd->slots = slots;
    hd->log_cap = log_cap;
    return BK_OK;
}

/* Remove the word at slot i, moving later words of the same cluster back
 * so that every word stays reachable from its home. */
static void stash_delete_at(gheader *hd, uint64_t i)
{
    uint64_t mask = ((uint64_t)1 << hd->log_cap) - 1;
    uint64_t hole = i;
    for (uint64_t j = (i + 1) & mask; hd->slots[j] != 0; j = (j + 1) & mask) {
        uint64_t home = stash_home(SW_Q(hd->slots[j]), hd->log_cap);
        /* j may move into the hole when its home is not in (hole, j] */
        int stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            hd->slots[hole] = hd->slots[j];
            hole = j;
        }
    }
    hd->slots[hole] = 0;
    hd->nstash--;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/*==========================================================================
 * Blocks
 *==========================================================================*/

static inline unsigned block_own(uint64_t meta) { return (unsigned)popcount64(meta & META_MASK); }
static inline unsigned block_pairs(const uint64_t *x) { return (unsigned)(x[7] >> FOREIGN_SHIFT); }
/* Lane i of a block: the two bytes that hold it (the machine is
 * little-endian, as the file format). */
static inline unsigned lane_at(const uint64_t *x, unsigned i)
{
    uint16_t v;
    memcpy(&v, (const unsigned char *)x + LANE0 / 8 + (3 * i >> 1), sizeof(v));
    return (unsigned)(v >> ((i & 1u) << 2)) & LANE_MASK;
}

/* The lanes [*lo, *hi) of a mini's run, from the block's word 0. */
static inline void run_of(uint64_t meta, unsigned mini, unsigned *lo, unsigned *hi)
{
    uint64_t m = meta & META_MASK;
    unsigned z = select0(m, mini);
    unsigned start = 0;
    if (mini > 0) {
        uint64_t below = ~m & ((UINT64_C(1) << z) - 1);
        start = 64 - (unsigned)__builtin_clzll(below);
    }
    *lo = start - mini;
    *hi = z - mini;
}

#if GROWABLE_BMI2
/* run_of with PDEP: both zeros that bound the run in one instruction. */
__attribute__((target("bmi,bmi2,lzcnt"))) static inline void run_of_bmi2(uint64_t meta, unsigned mini,
                                                                    unsigned *lo, unsigned *hi)
{
    uint64_t zeros = ~(meta & META_MASK);
    uint64_t d = _pdep_u64((UINT64_C(1) << mini) | ((UINT64_C(1) << mini) >> 1), zeros);
    unsigned z = 63u - (unsigned)_lzcnt_u64(d);
    unsigned start = mini ? (unsigned)_tzcnt_u64(d) + 1u : 0u;
    *lo = start - mini;
    *hi = z - mini;
}

/* LZCNT (ABM): CPUID 0x80000001, ECX bit 5. Asked directly, since
 * clang's __builtin_cpu_supports does not know "lzcnt". */
static int has_lzcnt(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 5));
}

/* PDEP is fast on Intel since Haswell and on AMD since Zen 3; Zen 1 and 2
 * run it in microcode, dozens of cycles per set bit. */
static int bmi2_fast(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && has_lzcnt() &&
           !__builtin_cpu_is("znver1") && !__builtin_cpu_is("znver2");
}
#endif

/* 2: lookups compare whole blocks with AVX-512 VBMI (and PDEP), 1: they
 * take run_of_bmi2, 0: run_of, -1: not decided yet. */
static int select_mode = -1;

#if !defined(__SANITIZE_THREAD__)
static int vbmi_ok(void);
#endif

/* The best way the CPU has (asked once: CPUID traps to the hypervisor in
 * a VM, thousands of cycles). */
static int cpu_best_way(void)
{
    static int best = -1;
    int b = __atomic_load_n(&best, __ATOMIC_RELAXED);
    if (b >= 0) return b;
#if GROWABLE_BMI2
    b = bmi2_fast();
#  if !defined(__SANITIZE_THREAD__)
    if (b && vbmi_ok()) b = 2;
#  endif
#else
    b = 0;
#endif
    __atomic_store_n(&best, b, __ATOMIC_RELAXED);
    return b;
}

static int decide_select(int allowed)
{
    int best = cpu_best_way();
    int mode = allowed < best ? (allowed > 0 ? allowed : 0) : best;
    __atomic_store_n(&select_mode, mode, __ATOMIC_RELAXED);
    return mode;
}

/* Tests run every way: bk__growable_lookup_mode(0) forces the portable
 * code, 1 allows BMI2, 2 AVX-512 VBMI too (each where the CPU has it).
 * Returns the mode that was in use. */
BK_HIDDEN int bk__growable_lookup_mode(int allowed)
{
    int was = __atomic_load_n(&select_mode, __ATOMIC_RELAXED);
    decide_select(allowed);
    return was;
}

/* 2: AVX-512 VBMI, 1: BMI2, 0: neither. */
static inline int lookup_mode(void)
{
    int mode = __atomic_load_n(&select_mode, __ATOMIC_RELAXED);
    return mode >= 0 ? mode : decide_select(2);
}

/* Lane i of a block as bk_growable_add_nogrow may be storing it (see
 * Threads): from its word(s), loaded as they are stored (whole words; a
 * copy of the block on the stack would be read back through store
 * forwarding, which fails for a lane across two words and stalls). A lane
 * of word 7 never crosses into the next block: the second load then reads
 * word 7 again and its bits fall outside the mask. */
static inline unsigned lane_load(const uint64_t *blk, unsigned i)
{
    unsigned bit = LANE0 + LANE_BITS * i, w = bit >> 6, s = bit & 63;
    unsigned w2 = w + 1 < BLOCK_WORDS ? w + 1 : w;
    uint64_t lo = __atomic_load_n(&blk[w], __ATOMIC_ACQUIRE);
    uint64_t hi = __atomic_load_n(&blk[w2], __ATOMIC_ACQUIRE);
    return (unsigned)((lo >> s) | ((hi << 1) << (63 - s))) & LANE_MASK;
}

/* The pairs block y keeps for the previous block: one of mini `mini`
 * matching fp. */
static int pairs_have(const bk_growable *f, const uint64_t *y, unsigned mini, unsigned fp)
{
    const unsigned S = f->p->fmt->S;
    unsigned n = (unsigned)(__atomic_load_n(&y[7], __ATOMIC_RELAXED) >> FOREIGN_SHIFT);
    for (unsigned j = 0; j < n; j++)
        if (lane_load(y, S - 2 - 2 * j) == mini + 1 && entry_matches(lane_load(y, S - 1 - 2 * j), fp))
            return 1;
    return 0;
}

/* The rare part of a lookup: the next block's pairs, the stash (only
 * exclusive adds change either). */
__attribute__((noinline)) static int overflow_has(const bk_growable *f, uint64_t b, unsigned mini,
                                                 unsigned fp, uint64_t meta)
{
    const gheader *hd = header_of(f);
    if ((meta & SPILLED) && pairs_have(f, blocks_of(f) + ((b + 1) % f->nb) * BLOCK_WORDS, mini, fp))
        return 1;
    if (meta & STASHED) return stash_has(hd, b * hd->M + mini, fp);
    return 0;
}

#if GROWABLE_BMI2 && !defined(__SANITIZE_THREAD__)
#  define GROWABLE_VBMI 1
/* Every lane of a block compared at once: VPERMB puts each 12-bit lane's
 * two bytes in a 16-bit word, a variable shift aligns them, and one
 * ternary-logic instruction leaves, for each entry, the bits above its
 * marker where it differs from the key: an entry matches when they are
 * all zero. Lanes 0-31 take one 512-bit register; lanes 32-36 (only a run
 * of a nearly full block reaches them) a 128-bit one, when asked for.
 * (Not under ThreadSanitizer: the block is read as one vector, which it
 * cannot check; the scalar path's word loads follow the same protocol.) */
#define VBMI_TARGET "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2,bmi,bmi2,lzcnt"
__attribute__((target(VBMI_TARGET))) static inline uint32_t
lanes_match_vbmi(const uint64_t *blk, unsigned fp)
{
    static const uint8_t idx[64] = {
        8,  9,  9,  10, 11, 12, 12, 13, 14, 15, 15, 16, 17, 18, 18, 19, 20, 21, 21, 22, 23, 24,
        24, 25, 26, 27, 27, 28, 29, 30, 30, 31, 32, 33, 33, 34, 35, 36, 36, 37, 38, 39, 39, 40,
        41, 42, 42, 43, 44, 45, 45, 46, 47, 48, 48, 49, 50, 51, 51, 52, 53, 54, 54, 55};
    const __m512i shifts = _mm512_set1_epi32(0x00040000); /* 0 for even lanes, 4 for odd */
    const __m512i lane = _mm512_set1_epi16(LANE_MASK);
    __m512i w = _mm512_permutexvar_epi8(_mm512_loadu_si512((const void *)idx),
                                        _mm512_loadu_si512((const void *)blk));
    /* bits 12-15 of a word may hold the next lane's: every test below
     * looks at bits 0-11 only, and w - 1 borrows from them only for an
     * empty lane, which the first test leaves out */
    w = _mm512_srlv_epi16(w, shifts);
    __m512i below = _mm512_sub_epi16(w, _mm512_set1_epi16(1));
    /* (w ^ tag) & ~(w ^ (w - 1)): 0x42 = (a ^ c) & ~(a ^ b) for a = w,
     * b = w - 1, c = tag */
    __m512i diff = _mm512_ternarylogic_epi32(w, below, _mm512_set1_epi16((short)(fp << 1)), 0x42);
    return (uint32_t)_mm512_mask_testn_epi16_mask(_mm512_test_epi16_mask(w, lane), diff, lane);
}

/* The same for lanes 32-36 (bits 0-4 of the result). */
__attribute__((target(VBMI_TARGET))) static inline uint32_t
high_lanes_match_vbmi(const uint64_t *blk, unsigned fp)
{
    static const uint8_t idx[16] = {8, 9, 9, 10, 11, 12, 12, 13, 14, 15, 15, 15, 15, 15, 15, 15};
    const __m128i shifts = _mm_set1_epi32(0x00040000);
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)((const unsigned char *)blk + 48));
    __m128i w = _mm_permutexvar_epi8(_mm_loadu_si128((const __m128i *)(const void *)idx), v);
    const __m128i lane = _mm_set1_epi16(LANE_MASK);
    w = _mm_srlv_epi16(w, shifts);
    __m128i below = _mm_sub_epi16(w, _mm_set1_epi16(1));
    __m128i diff = _mm_ternarylogic_epi32(w, below, _mm_set1_epi16((short)(fp << 1)), 0x42);
    return (uint32_t)_mm_mask_testn_epi16_mask(_mm_test_epi16_mask(w, lane), diff, lane) & 0x1Fu;
}

/* The lanes of mini's run as a mask, from word 0 alone: VPCOMPRESSB lists
 * the positions of its ones (a lane each, in order); a lane's position
 * less its index is its mini. */
__attribute__((target(VBMI_TARGET))) static inline uint64_t run_mask_vbmi(uint64_t meta,
                                                                         unsigned mini)
{
    static const uint8_t iota[64] = {
        0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
        22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
        44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63};
    __m512i ids = _mm512_loadu_si512((const void *)iota);
    __m512i pos = _mm512_maskz_compress_epi8(_cvtu64_mask64(meta & META_MASK), ids);
    /* past the last entry the positions are 0: 0 - i is no mini but for
     * lane 0 of an empty block, whose lane is 0 and matches nothing */
    __mmask64 run = _mm512_cmpeq_epi8_mask(_mm512_sub_epi8(pos, ids), _mm512_set1_epi8((char)mini));
    return _cvtmask64_u64(run);
}

static int vbmi_ok(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi") &&
           __builtin_cpu_supports("avx512vbmi2");
}
#else
#  define GROWABLE_VBMI 0
#endif


/* A lookup that met a block being written (or written meanwhile): wait
 * for the writer and look again, the portable way. */
__attribute__((noinline)) static int probe_again(const bk_growable *f, uint64_t h)
{
    uint64_t r;
    uint64_t b = block_of(h, f->nb, &r);
    const uint64_t *blk = blocks_of(f) + b * BLOCK_WORDS;
    unsigned fp, mini = mini_in_block(r, header_of(f)->M, &fp);
    for (;;) {
        uint64_t meta = __atomic_load_n(&blk[0], __ATOMIC_ACQUIRE);
        if (meta & WRITING) {
            sched_yield();
            continue;
        }
        unsigned lo, hi;
        run_of(meta, mini, &lo, &hi);
        int hit = 0;
        for (unsigned i = lo; i < hi; i++) hit |= entry_matches(lane_load(blk, i), fp);
        if (__atomic_load_n(&blk[0], __ATOMIC_RELAXED) != meta) continue;
        if (hit) return 1;
        return meta & (SPILLED | STASHED) ? overflow_has(f, b, mini, fp, meta) : 0;
    }
}

/* The test of a key against a block table, in one of three ways (mode 0
 * portable, 1 BMI2, 2 AVX-512 VBMI): always inlined into a function
 * compiled for that way, the hash with it. b is the key's block and r the
 * rest of the product that gave it (block_of). A block being written goes
 * to probe_again; so does one whose word 0 changed while it was read (see
 * Threads). */
__attribute__((always_inline)) static inline int probe_at(const bk_growable *f,
                                                         const uint64_t *blocks, uint64_t h,
                                                         uint64_t b, uint64_t r, int mode)
{
    const uint64_t *blk = blocks + b * BLOCK_WORDS;
    unsigned fp, mini = mini_in_block(r, SET_FORMAT.M, &fp);
    uint64_t meta = __atomic_load_n(&blk[0], __ATOMIC_ACQUIRE);
    if (BK_UNLIKELY(meta & WRITING)) return probe_again(f, h);
    int hit;
#if GROWABLE_VBMI
    if (mode == 2) {
        uint64_t run = run_mask_vbmi(meta, mini);
        uint64_t hits = lanes_match_vbmi(blk, fp);
        if (BK_UNLIKELY(run >> 32)) hits |= (uint64_t)high_lanes_match_vbmi(blk, fp) << 32;
        __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the vector loads stay before */
        if (BK_UNLIKELY(__atomic_load_n(&blk[0], __ATOMIC_RELAXED) != meta)) return probe_again(f, h);
        hit = (hits & run) != 0;
    } else
#endif
    {
        unsigned lo, hi;
#if GROWABLE_BMI2
        if (mode) run_of_bmi2(meta, mini, &lo, &hi);
        else
#endif
            run_of(meta, mini, &lo, &hi);
        /* runs of up to two lanes without a branch (nearly all of them):
         * lanes lo and lo + 1 are read whatever the run's length (lane 37,
         * past the last, reads word 7 only) and count where they are in it */
        unsigned l1 = lo + 1 < SET_FORMAT.S ? lo + 1 : SET_FORMAT.S;
        hit = (entry_matches(lane_load(blk, lo), fp) & (lo < hi)) |
              (entry_matches(lane_load(blk, l1), fp) & (lo + 1 < hi));
        if (BK_UNLIKELY(hi > lo + 2))
            for (unsigned i = lo + 2; i < hi; i++) hit |= entry_matches(lane_load(blk, i), fp);
        if (BK_UNLIKELY(__atomic_load_n(&blk[0], __ATOMIC_RELAXED) != meta)) return probe_again(f, h);
    }
    (void)mode;
    if (hit) return 1;
    if (BK_UNLIKELY(meta & (SPILLED | STASHED))) return overflow_has(f, b, mini, fp, meta);
    return 0;
}

__attribute__((always_inline)) static inline int probe(const bk_growable *f, uint64_t h, int mode)
{
    uint64_t r, b = block_of(h, f->nb, &r);
    return probe_at(f, blocks_of(f), h, b, r, mode);
}

/* The hash of a key a batch will reach AHEAD keys later, its block
 * prefetched now. */
static inline uint64_t hash_ahead(const bk_growable *f, const uint64_t *blocks, uint64_t nb,
                                  const void *key, size_t len)
{
    uint64_t h = bk_growable_hash_key(f, key, len);
    BK_PREFETCH_READ(blocks + bk__fastrange64(h, nb) * BLOCK_WORDS);
    return h;
}

/* Keys hashed AHEAD ahead and their blocks prefetched then; what every
 * key needs is read once. */
__attribute__((always_inline)) static inline int64_t
probe_batch(const bk_growable *f, const void *const *keys, const size_t *lens, size_t n,
            uint8_t *results, int mode)
{
    const uint64_t nb = f->nb;
    const uint64_t *blocks = blocks_of(f);
    uint64_t ring[AHEAD];
    int64_t found = 0;
    size_t ahead = n < AHEAD ? n : AHEAD;
    for (size_t i = 0; i < ahead; i++) {
        ring[i] = hash_ahead(f, blocks, nb, keys[i], lens[i]);
    }
    for (size_t i = 0; i < n; i++) {
        size_t slot = i % AHEAD;
        uint64_t h = ring[slot], r, b = block_of(h, nb, &r);
        int res = probe_at(f, blocks, h, b, r, mode);
        found += res;
        if (results != NULL) results[i] = (uint8_t)res;
        size_t next = i + AHEAD;
        if (next < n) {
            ring[slot] = hash_ahead(f, blocks, nb, keys[next], lens[next]);
        }
    }
    return found;
}

/* The probe of a hash each way, for adds and the generic handle. */
static int probe_h0(const bk_growable *f, uint64_t h) { return probe(f, h, 0); }
#if GROWABLE_BMI2
#  define TARGET_BMI2 __attribute__((target("bmi,bmi2,lzcnt")))
TARGET_BMI2 static int probe_h1(const bk_growable *f, uint64_t h) { return probe(f, h, 1); }
#endif
#if GROWABLE_VBMI
#  define TARGET_VBMI __attribute__((target(VBMI_TARGET)))
TARGET_VBMI static int probe_h2(const bk_growable *f, uint64_t h) { return probe(f, h, 2); }
#endif

static inline int blocks_contain(const bk_growable *f, uint64_t h)
{
#if GROWABLE_BMI2
    int mode = lookup_mode();
#  if GROWABLE_VBMI
    if (mode == 2) return probe_h2(f, h);
#  endif
    if (mode) return probe_h1(f, h);
#endif
    return probe_h0(f, h);
}

static int list_contains(const bk_growable *f, uint64_t h); /* the list, below */
#if GROWABLE_BMI2
static int list_contains_fast(const bk_growable *f, uint64_t h);
#endif

/* The public lookups, each way in a function with the whole call
 * inlined: the API's checks, the hash, the probe. */
#define LOOKUP_WAYS(WAY, MODE, ATTR)                                                            \
    ATTR static int contains_##WAY(const bk_growable *f, const void *key, size_t len)           \
    {                                                                                            \
        if (f == NULL || (key == NULL && len != 0)) return 0;                                    \
        if (BK_LIKELY(f->blocks)) return probe(f, hash_key(f, key, len), MODE);                  \
        return LIST_CONTAINS_##MODE(f, hash_key(f, key, len));                                   \
    }                                                                                            \
    ATTR static int64_t contains_batch_##WAY(const bk_growable *f, const void *const *keys,     \
                                             const size_t *lens, size_t n, uint8_t *results)     \
    {                                                                                            \
        if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;            \
        if (BK_LIKELY(f->blocks)) return probe_batch(f, keys, lens, n, results, MODE);           \
        int64_t found = 0;                                                                       \
        for (size_t i = 0; i < n; i++) {                                                         \
            int r = LIST_CONTAINS_##MODE(f, bk_growable_hash_key(f, keys[i], lens[i]));          \
            found += r;                                                                          \
            if (results != NULL) results[i] = (uint8_t)r;                                        \
        }                                                                                        \
        return found;                                                                            \
    }

#define LIST_CONTAINS_0 list_contains
#define LIST_CONTAINS_1 list_contains_fast
#define LIST_CONTAINS_2 list_contains_fast
LOOKUP_WAYS(portable, 0, )
#if GROWABLE_BMI2
LOOKUP_WAYS(bmi2, 1, TARGET_BMI2)
#endif
#if GROWABLE_VBMI
LOOKUP_WAYS(vbmi, 2, TARGET_VBMI)
#endif

typedef int (*contains_fn)(const bk_growable *, const void *, size_t);
typedef int64_t (*contains_batch_fn)(const bk_growable *, const void *const *, const size_t *,
                                     size_t, uint8_t *);

static contains_fn contains_way(int mode)
{
#if GROWABLE_VBMI
    if (mode == 2) return contains_vbmi;
#endif
#if GROWABLE_BMI2
    if (mode) return contains_bmi2;
#endif
    (void)mode;
    return contains_portable;
}

static contains_batch_fn contains_batch_way(int mode)
{
#if GROWABLE_VBMI
    if (mode == 2) return contains_batch_vbmi;
#endif
#if GROWABLE_BMI2
    if (mode) return contains_batch_bmi2;
#endif
    (void)mode;
    return contains_batch_portable;
}

/* For tests: the public lookups of one way (0, 1, 2; the best the CPU has
 * at most). */
static int best_way(int mode)
{
    int was = __atomic_load_n(&select_mode, __ATOMIC_RELAXED);
    int best = decide_select(mode);
    __atomic_store_n(&select_mode, was, __ATOMIC_RELAXED);
    return best;
}

BK_HIDDEN int bk__growable_contains_way(int mode, const bk_growable *f, const void *key,
                                        size_t len)
{
    return contains_way(best_way(mode))(f, key, len);
}

BK_HIDDEN int64_t bk__growable_contains_batch_way(int mode, const bk_growable *f,
                                                  const void *const *keys, const size_t *lens,
                                                  size_t n, uint8_t *results)
{
    return contains_batch_way(best_way(mode))(f, keys, lens, n, results);
}

/* Block x (a copy) with entry e added to mini's run at its sorted place:
 * 0 when the block has no room. Lanes [0, own) are the own entries, the
 * pairs sit at the top; a new lane must leave the pairs alone. */
static int block_with(uint64_t x[BLOCK_WORDS], unsigned S, unsigned mini, unsigned e)
{
    uint64_t meta = x[0];
    unsigned own = block_own(meta);
    if (own + 2 * block_pairs(x) + 1 > S) return 0;
    unsigned lo, hi, at;
    run_of(meta, mini, &lo, &hi);
    for (at = lo; at < hi && lane_at(x, at) <= e; at++) {}
    insert_bits(x, LANE0 + (uint64_t)LANE_BITS * at, LANE0 + (uint64_t)LANE_BITS * own, LANE_BITS, e);
    unsigned pos = at + mini;
    uint64_t m = meta & META_MASK, low = (UINT64_C(1) << pos) - 1;
    x[0] = (meta & BLOCK_FLAGS) | (m & low) | (UINT64_C(1) << pos) | ((m & ~low) << 1);
    return 1;
}

/* Entry e of mini (block b) into the next block as a pair: 0 when it has
 * no room (or there is no next block). */
static int block_spill(uint64_t *blocks, uint64_t nb, unsigned S, uint64_t b, unsigned mini,
                       unsigned e)
{
    if (nb < 2) return 0;
    uint64_t *y = blocks + ((b + 1) % nb) * BLOCK_WORDS;
    unsigned n = block_pairs(y);
    if (n == 15 || block_own(y[0]) + 2 * (n + 1) > S) return 0;
    put_bits(y, LANE0 + (uint64_t)LANE_BITS * (S - 1 - 2 * n), LANE_BITS, e);
    put_bits(y, LANE0 + (uint64_t)LANE_BITS * (S - 2 - 2 * n), LANE_BITS, mini + 1);
    y[7] = (y[7] & ~(UINT64_C(0xF) << FOREIGN_SHIFT)) | (uint64_t)(n + 1) << FOREIGN_SHIFT;
    blocks[b * BLOCK_WORDS] |= SPILLED;
    return 1;
}

/* Entry e of mini q into a block table: its block, the next one, the
 * stash (which must have room: stash_reserve). */
static void blocks_place(uint64_t *t, const gfmt *F, unsigned level, uint64_t q, unsigned e)
{
    uint64_t nb = nblocks_at(F, level), b = q / F->M;
    unsigned mini = (unsigned)(q % F->M);
    uint64_t *blocks = t + BLOCK_WORDS;
    uint64_t *blk = blocks + b * BLOCK_WORDS;
    if (block_with(blk, F->S, mini, e)) return;
    if (block_spill(blocks, nb, F->S, b, mini, e)) return;
    gheader *hd = (gheader *)(void *)t;
    stash_put(hd->slots, hd->log_cap, SW_MAKE(q, e));
    hd->nstash++;
    blk[0] |= STASHED;
}

/* Whether blocks_place could need the stash for q: its block and the
 * next are full. */
static int blocks_may_stash(const uint64_t *t, const gfmt *F, unsigned level, uint64_t q)
{
    uint64_t nb = nblocks_at(F, level), b = q / F->M;
    const uint64_t *blocks = t + BLOCK_WORDS, *x = blocks + b * BLOCK_WORDS;
    if (block_own(x[0]) + 2 * block_pairs(x) + 1 <= F->S) return 0;
    if (nb < 2) return 1;
    const uint64_t *y = blocks + ((b + 1) % nb) * BLOCK_WORDS;
    unsigned n = block_pairs(y);
    return n == 15 || block_own(y[0]) + 2 * (n + 1) > F->S;
}

/*==========================================================================
 * The list
 *==========================================================================*/

/* The j-th zero of the string a (it has more than j before its end). */
#if GROWABLE_BMI2
__attribute__((target("popcnt,bmi,bmi2"))) static inline uint64_t select0_words_fast(const uint64_t *a,
                                                                                    uint64_t j)
{
    for (uint64_t i = 0;; i++) {
        uint64_t z = ~a[i];
        unsigned c = (unsigned)__builtin_popcountll(z);
        if (j < c) return i * 64 + (uint64_t)_tzcnt_u64(_pdep_u64(UINT64_C(1) << j, z));
        j -= c;
    }
}
#endif

/* The j-th zero of the string a (it has more than j before its end); fast:
 * with POPCNT and PDEP (the caller is compiled for them). */
__attribute__((always_inline)) static inline uint64_t select0_words(const uint64_t *a, uint64_t j,
                                                                   int fast)
{
#if GROWABLE_BMI2
    if (fast) return select0_words_fast(a, j);
#endif
    (void)fast;
    for (uint64_t i = 0;; i++) {
        unsigned z = (unsigned)popcount64(~a[i]);
        if (j < z) return i * 64 + select0(a[i], (unsigned)j);
        j -= z;
    }
}

/* Entries [*lo, *hi) of mini q's run in a list. */
__attribute__((always_inline)) static inline void list_run_m(const uint64_t *a, uint64_t q,
                                                           uint64_t *lo, uint64_t *hi, int fast)
{
    uint64_t z = select0_words(a, q, fast);
    uint64_t start = 0;
    if (q > 0) {
        /* the previous zero: scan down from z */
        uint64_t i = z >> 6;
        uint64_t w = ~a[i] & ((UINT64_C(1) << (z & 63)) - 1);
        while (w == 0) w = ~a[--i];
        start = i * 64 + 64 - (uint64_t)__builtin_clzll(w);
    }
    *lo = start - q;
    *hi = z - q;
}

static void list_run(const uint64_t *a, uint64_t q, uint64_t *lo, uint64_t *hi)
{
    list_run_m(a, q, lo, hi, 0);
}

/* Lane i of a list (normalised to an entry). */
static inline unsigned list_entry(const uint64_t *a, uint64_t base, unsigned lw, uint64_t i)
{
    unsigned v = (unsigned)get_bits(a, base + (uint64_t)lw * i, lw);
    return lw == FP_BITS ? entry_new(v) : v;
}

__attribute__((always_inline)) static inline int list_contains_m(const bk_growable *f, uint64_t h,
                                                               int fast)
{
    if (f->list_n == 0) return 0;
    const gfmt *F = f->p->fmt;
    uint64_t n = minis_at(F, f->level), lo, hi;
    unsigned fp, lw = lane_bits_at(f->level);
    uint64_t q = mini_of(h, n, &fp);
    list_run_m(f->t, q, &lo, &hi, fast);
    uint64_t base = n + f->list_n;
    for (uint64_t i = lo; i < hi; i++)
        if (entry_matches(list_entry(f->t, base, lw, i), fp)) return 1;
    return 0;
}

static int list_contains(const bk_growable *f, uint64_t h) { return list_contains_m(f, h, 0); }
#if GROWABLE_BMI2
__attribute__((target("popcnt,bmi,bmi2,lzcnt"))) static int list_contains_fast(const bk_growable *f,
                                                                              uint64_t h)
{
    return list_contains_m(f, h, 1);
}
#endif

/* Add entry e of mini q to the list, growing its words: BK_OK, BK_ELIMIT
 * (past max_bytes) or BK_ENOMEM (nothing changed then). */
static int list_insert(bk_growable *f, uint64_t q, unsigned e)
{
    const gfmt *F = f->p->fmt;
    uint64_t n = minis_at(F, f->level), cnt = f->list_n;
    unsigned lw = lane_bits_at(f->level);
    uint64_t words = list_words_for(F, f->level, cnt), need = list_words_for(F, f->level, cnt + 1);
    uint64_t *a = f->t;
    if (need > words) {
        if (f->max_bytes != 0 && HANDLE_BYTES + need * 8 > f->max_bytes) return BK_ELIMIT;
        a = bk__calloc((size_t)need, sizeof(uint64_t));
        if (a == NULL) return BK_ENOMEM;
        memcpy(a, f->t, (size_t)words * sizeof(uint64_t));
    }
    uint64_t lo, hi, at, base = n + cnt;
    list_run(a, q, &lo, &hi);
    for (at = lo; at < hi && list_entry(a, base, lw, at) <= e; at++) {}
    unsigned v = lw == FP_BITS ? e >> 1 : e;
    /* one pass over what follows the mini's run: the lanes after the new
     * one move up by its bits and the unary 1, the rest up to them by the
     * 1 alone */
    uint64_t pl = base + (uint64_t)lw * at, pm = q + at;
    insert_bits(a, pl, base + (uint64_t)lw * cnt, lw + 1, 0);
    insert_bits(a, pm, pl, 1, 1);
    put_bits(a, pl + 1, lw, v);
    if (a != f->t) {
        bk__free(f->t);
        f->t = a;
    }
    f->list_n = (uint32_t)(cnt + 1);
    return BK_OK;
}

/*==========================================================================
 * Rebuilding: every entry of a filter, doubled, into a new list or table
 *
 * A source gives its entries mini by mini, each run sorted (the list, the
 * blocks' own runs); its other entries (pairs, stash) come apart as
 * "extras" and are placed after. A sink takes entries in order of mini
 * and entry: a list sink collects them and lays the list out at the end,
 * a block sink writes each block once, and what a block cannot hold is
 * placed after like the extras.
 *==========================================================================*/

typedef struct gvec {
    uint64_t *v;
    size_t n, cap;
} gvec;

static int vec_push(gvec *g, uint64_t w)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 64;
        if (cap > SIZE_MAX / 2 / sizeof(uint64_t)) return BK_ENOMEM;
        uint64_t *v = bk__malloc(cap * sizeof(uint64_t));
        if (v == NULL) return BK_ENOMEM;
        if (g->n) memcpy(v, g->v, g->n * sizeof(uint64_t));
        bk__free(g->v);
        g->v = v;
        g->cap = cap;
    }
    g->v[g->n++] = w;
    return BK_OK;
}

static void vec_free(gvec *g)
{
    bk__free(g->v);
    g->v = NULL;
    g->n = g->cap = 0;
}

typedef struct gsink {
    const gfmt *F;
    unsigned level;
    int blocks;          /* the target is a block table */
    uint64_t *t;         /* block target: header line + blocks */
    uint64_t cur;        /* block target: the block being written */
    unsigned own;        /* its own entries so far */
    gvec list;           /* list target: every entry; block target: those
                            the blocks could not hold */
    uint64_t entries;
} gsink;

static int sink_start(gsink *s, const gfmt *F, unsigned level)
{
    memset(s, 0, sizeof(*s));
    s->F = F;
    s->level = level;
    s->blocks = level > F->list_top;
    if (s->blocks) {
        s->t = table_new(F, level);
        if (s->t == NULL) return BK_ENOMEM;
    }
    return BK_OK;
}

static void sink_abort(gsink *s)
{
    if (s->blocks && s->t) {
        bk__free(((gheader *)(void *)s->t)->slots);
        bk__free_aligned(s->t);
    }
    vec_free(&s->list);
    s->t = NULL;
}

static int sink_put(gsink *s, uint64_t q, unsigned e)
{
    s->entries++;
    if (!s->blocks) return vec_push(&s->list, SW_MAKE(q, e));
    const gfmt *F = s->F;
    uint64_t b = q / F->M;
    unsigned mini = (unsigned)(q % F->M);
    if (b != s->cur) {
        s->cur = b;
        s->own = 0;
    }
    if (s->own + 1 > F->S) return vec_push(&s->list, SW_MAKE(q, e));
    uint64_t *x = s->t + BLOCK_WORDS + b * BLOCK_WORDS;
    put_bits(x, LANE0 + (uint64_t)LANE_BITS * s->own, LANE_BITS, e);
    x[0] |= UINT64_C(1) << (s->own + mini);
    s->own++;
    return BK_OK;
}

/* Lay out a list of the collected entries (sorted by mini and entry). */
static uint64_t *list_layout(const gfmt *F, unsigned level, const uint64_t *v, size_t n)
{
    uint64_t minis = minis_at(F, level);
    unsigned lw = lane_bits_at(level);
    uint64_t *a = bk__calloc((size_t)list_words_for(F, level, n), sizeof(uint64_t));
    if (a == NULL) return NULL;
    for (size_t i = 0; i < n; i++) {
        a[(SW_Q(v[i]) + i) >> 6] |= UINT64_C(1) << ((SW_Q(v[i]) + i) & 63);
        unsigned e = SW_E(v[i]);
        put_bits(a, minis + n + (uint64_t)lw * i, lw, lw == FP_BITS ? e >> 1 : e);
    }
    return a;
}

/* Insertion sort of a short run (runs are a few entries; a long one from
 * damaged or hostile input only costs time). */
static void sort_run(unsigned *r, unsigned n)
{
    for (unsigned i = 1; i < n; i++) {
        unsigned v = r[i], j = i;
        for (; j > 0 && r[j - 1] > v; j--) r[j] = r[j - 1];
        r[j] = v;
    }
}

/* A run's entries doubled into the sink: mini q's children 2q and 2q + 1
 * (voids into both). `tmp` has room for 2n. */
static int put_doubled(gsink *s, uint64_t q, const unsigned *run, unsigned n, unsigned *tmp)
{
    unsigned *c0 = tmp, *c1 = tmp + n, n0 = 0, n1 = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned e = run[i];
        if (e == VOID_ENTRY) {
            c0[n0++] = e;
            c1[n1++] = e;
        } else if (e & VOID_ENTRY) {
            c1[n1++] = (e << 1) & LANE_MASK;
        } else {
            c0[n0++] = (e << 1) & LANE_MASK;
        }
    }
    sort_run(c0, n0);
    sort_run(c1, n1);
    int rc = BK_OK;
    for (unsigned i = 0; i < n0 && rc == BK_OK; i++) rc = sink_put(s, 2 * q, c0[i]);
    for (unsigned i = 0; i < n1 && rc == BK_OK; i++) rc = sink_put(s, 2 * q + 1, c1[i]);
    return rc;
}

/* One entry doubled into a vector (the extras). */
static int push_doubled(gvec *v, uint64_t q, unsigned e)
{
    if (e == VOID_ENTRY) {
        int rc = vec_push(v, SW_MAKE(2 * q, e));
        return rc == BK_OK ? vec_push(v, SW_MAKE(2 * q + 1, e)) : rc;
    }
    return vec_push(v, SW_MAKE(2 * q + ((e >> 11) & 1u), (e << 1) & LANE_MASK));
}

/* A buffer for one run: on the stack for ordinary runs. */
typedef struct grun {
    unsigned stack[3 * 64];
    unsigned *r;
    unsigned cap; /* entries r and its doubling room hold: r has 3 * cap */
} grun;

static int run_room(grun *g, uint64_t n)
{
    if (n <= g->cap) return BK_OK;
    if (n > UINT32_MAX / 4) return BK_ENOMEM;
    unsigned *r = bk__malloc(3 * (size_t)n * sizeof(unsigned));
    if (r == NULL) return BK_ENOMEM;
    if (g->r != g->stack) bk__free(g->r);
    g->r = r;
    g->cap = (unsigned)n;
    return BK_OK;
}

static void run_init(grun *g)
{
    g->r = g->stack;
    g->cap = 64;
}

static void run_free(grun *g)
{
    if (g->r != g->stack) bk__free(g->r);
}

/* Every entry of f doubled: runs into the sink, pairs and stash into
 * extras. */
static int emit_doubled(const bk_growable *f, gsink *s, gvec *extras)
{
    const gfmt *F = f->p->fmt;
    grun g;
    run_init(&g);
    int rc = BK_OK;
    if (!f->blocks) {
        uint64_t minis = minis_at(F, f->level), base = minis + f->list_n, bit = 0, idx = 0;
        unsigned lw = lane_bits_at(f->level);
        for (uint64_t q = 0; q < minis && rc == BK_OK; q++) {
            uint64_t n = 0;
            while (get_bits(f->t, bit + n, 1)) n++;
            bit += n + 1;
            if (n == 0) continue;
            rc = run_room(&g, n);
            for (uint64_t i = 0; i < n && rc == BK_OK; i++)
                g.r[i] = list_entry(f->t, base, lw, idx + i);
            idx += n;
            if (rc == BK_OK) rc = put_doubled(s, q, g.r, (unsigned)n, g.r + g.cap);
        }
        run_free(&g);
        return rc;
    }
    uint64_t nb = nblocks_at(F, f->level);
    const uint64_t *blocks = blocks_of(f);
    for (uint64_t b = 0; b < nb && rc == BK_OK; b++) {
        const uint64_t *x = blocks + b * BLOCK_WORDS;
        uint64_t meta = x[0] & META_MASK;
        unsigned lane = 0, bit = 0;
        for (unsigned mini = 0; mini < F->M && rc == BK_OK; mini++) {
            unsigned n = 0;
            while ((meta >> (bit + n)) & 1) n++;
            bit += n + 1;
            for (unsigned i = 0; i < n; i++) g.r[i] = lane_at(x, lane + i);
            lane += n;
            if (n) rc = put_doubled(s, b * F->M + mini, g.r, n, g.r + g.cap);
        }
        unsigned pairs = block_pairs(x);
        uint64_t home = (b + nb - 1) % nb;
        for (unsigned j = 0; j < pairs && rc == BK_OK; j++)
            rc = push_doubled(extras, home * F->M + lane_at(x, F->S - 2 - 2 * j) - 1,
                              lane_at(x, F->S - 1 - 2 * j));
    }
    const gheader *hd = header_of(f);
    if (hd->slots)
        for (uint64_t i = 0; i < ((uint64_t)1 << hd->log_cap) && rc == BK_OK; i++)
            if (hd->slots[i]) rc = push_doubled(extras, SW_Q(hd->slots[i]), SW_E(hd->slots[i]));
    run_free(&g);
    return rc;
}

/* The sink's table or list with the extras placed: *t and *list_n of the
 * result. BK_ENOMEM leaves nothing allocated. */
static int sink_finish(gsink *s, gvec *extras, uint64_t **t, uint32_t *list_n)
{
    int rc = BK_OK;
    for (size_t i = 0; i < extras->n && rc == BK_OK; i++) {
        s->entries++;
        rc = vec_push(&s->list, extras->v[i]);
    }
    if (rc != BK_OK) goto fail;
    if (!s->blocks) {
        if (s->list.n > UINT32_MAX) {
            rc = BK_ENOMEM;
            goto fail;
        }
        if (s->list.n > 1) qsort(s->list.v, s->list.n, sizeof(uint64_t), cmp_u64);
        uint64_t *a = list_layout(s->F, s->level, s->list.v, s->list.n);
        if (a == NULL) {
            rc = BK_ENOMEM;
            goto fail;
        }
        *t = a;
        *list_n = (uint32_t)s->list.n;
        vec_free(&s->list);
        return BK_OK;
    }
    /* what the blocks could not hold, in order of mini and entry */
    if (s->list.n > 1) qsort(s->list.v, s->list.n, sizeof(uint64_t), cmp_u64);
    gheader *hd = (gheader *)(void *)s->t;
    for (size_t i = 0; i < s->list.n && rc == BK_OK; i++) {
        uint64_t q = SW_Q(s->list.v[i]);
        if (blocks_may_stash(s->t, s->F, s->level, q)) rc = stash_reserve(hd);
        if (rc == BK_OK) blocks_place(s->t, s->F, s->level, q, SW_E(s->list.v[i]));
    }
    if (rc != BK_OK) goto fail;
    *t = s->t;
    *list_n = 0;
    vec_free(&s->list);
    s->t = NULL;
    return BK_OK;
fail:
    sink_abort(s);
    return rc;
}

/*==========================================================================
 * Growing, adding, looking up
 *==========================================================================*/

static void storage_free(uint64_t *t, int blocks)
{
    if (t == NULL) return;
    if (blocks) {
        bk__free(((gheader *)(void *)t)->slots);
        bk__free_aligned(t);
    } else {
        bk__free(t);
    }
}

static double rate_of(uint64_t weight, const gfmt *F, unsigned level)
{
    return (double)weight / ((double)minis_at(F, level) * (double)(1u << FP_BITS));
}

/* The rate after a doubling, filled to its keys: W doubles with the
 * minis, and each key added after it adds 1. */
static double rate_after_doubling(const bk_growable *f)
{
    const gfmt *F = f->p->fmt;
    uint64_t fill = keys_at(F, f->level + 1u) - (f->items < keys_at(F, f->level + 1u) ? f->items : 0);
    return rate_of(2 * f->weight + fill, F, f->level + 1u);
}

/* f's entries doubled into a new list or table: all or nothing. */
static int double_storage(bk_growable *f)
{
    const gfmt *F = f->p->fmt;
    unsigned nl = f->level + 1u;
    gsink s;
    gvec extras = {0};
    int rc = sink_start(&s, F, nl);
    if (rc != BK_OK) return rc;
    rc = emit_doubled(f, &s, &extras);
    uint64_t *t = NULL;
    uint32_t ln = 0;
    if (rc == BK_OK) rc = sink_finish(&s, &extras, &t, &ln);
    else sink_abort(&s);
    vec_free(&extras);
    if (rc != BK_OK) return rc;
    storage_free(f->t, f->blocks);
    f->t = t;
    f->level = (uint8_t)nl;
    f->blocks = nl > F->list_top;
    if (f->blocks) f->nb = (uint32_t)nblocks_at(F, nl);
    else f->list_n = ln;
    f->weight *= 2;
    return BK_OK;
}

/* Doubles the filter, unless that passes its rate (BK_EFULL), its byte
 * cap or the last level (BK_ELIMIT). */
static int grow(bk_growable *f)
{
    const gfmt *F = f->p->fmt;
    unsigned nl = f->level + 1u;
    if (nl > MAX_LEVEL) return BK_ELIMIT;
    if (rate_after_doubling(f) > f->p->target) return BK_EFULL;
    if (f->max_bytes != 0) {
        size_t after = nl > F->list_top ? table_bytes(F, nl) + BK_CACHE_LINE
                                        : (size_t)list_words_for(F, nl, 2 * (uint64_t)f->list_n) * 8;
        if (total_bytes(f) + after > f->max_bytes) return BK_ELIMIT;
    }
    return double_storage(f);
}

static inline int contains_h(const bk_growable *f, uint64_t h)
{
    return BK_LIKELY(f->blocks) ? blocks_contain(f, h) : list_contains(f, h);
}

/* The key of hash h as a new entry at the filter's level: BK_OK, or
 * BK_ELIMIT / BK_ENOMEM (nothing changed). */
static int place_new(bk_growable *f, uint64_t h)
{
    const gfmt *F = f->p->fmt;
    unsigned fp;
    if (!f->blocks) {
        uint64_t q = mini_of(h, minis_at(F, f->level), &fp);
        return list_insert(f, q, entry_new(fp));
    }
    uint64_t r, b = block_of(h, f->nb, &r);
    uint64_t q = b * F->M + mini_in_block(r, F->M, &fp);
    if (blocks_may_stash(f->t, F, f->level, q)) {
        int rc = stash_reserve(header_of(f));
        if (rc != BK_OK) return rc;
    }
    blocks_place(f->t, F, f->level, q, entry_new(fp));
    return BK_OK;
}

static uint64_t stash_limit(uint64_t items) { return 64 + items / 16; }

static int add_h(bk_growable *f, uint64_t h)
{
    if (contains_h(f, h)) return 0;
    if (f->items + 1 > keys_at(f->p->fmt, f->level)) {
        int rc = grow(f);
        if (rc != BK_OK) return rc;
    }
    int rc = place_new(f, h);
    if (rc != BK_OK) return rc;
    f->items++;
    f->weight++;
    /* a long stash (only hostile keys make one) doubles early; if it
     * cannot, the entries stay there */
    if (f->blocks && header_of(f)->nstash > stash_limit(f->items)) (void)grow(f);
    return 1;
}

static void adders_lock(bk_growable *f)
{
    while (__atomic_exchange_n(&f->adding, 1, __ATOMIC_ACQUIRE))
        for (unsigned spins = 0; __atomic_load_n(&f->adding, __ATOMIC_RELAXED); spins++)
            if (spins >= 64) sched_yield(); /* the holder may be descheduled */
}

static void adders_unlock(bk_growable *f) { __atomic_store_n(&f->adding, 0, __ATOMIC_RELEASE); }

/* Entry of h into its block while lookups run (see Threads): 0 when the
 * block has no room. */
static int block_add_published(bk_growable *f, uint64_t h)
{
    const gfmt *F = f->p->fmt;
    uint64_t r, b = block_of(h, f->nb, &r);
    unsigned fp, mini = mini_in_block(r, F->M, &fp);
    uint64_t *blk = blocks_of(f) + b * BLOCK_WORDS;
    uint64_t old[BLOCK_WORDS], x[BLOCK_WORDS];
    for (unsigned i = 0; i < BLOCK_WORDS; i++) old[i] = x[i] = __atomic_load_n(&blk[i], __ATOMIC_RELAXED);
    if (!block_with(x, F->S, mini, entry_new(fp))) return 0;
    __atomic_store_n(&blk[0], old[0] | WRITING, __ATOMIC_RELAXED);
    for (unsigned i = 1; i < BLOCK_WORDS; i++)
        if (x[i] != old[i]) __atomic_store_n(&blk[i], x[i], __ATOMIC_RELEASE);
    __atomic_store_n(&blk[0], x[0], __ATOMIC_RELEASE);
    return 1;
}

/* Entry of h into its block when nothing else runs (the single-writer
 * mode): block_with on the block itself, plain loads and stores, no
 * WRITING bit. The block ends as block_add_published leaves it. */
static inline int block_add_plain(bk_growable *f, uint64_t h)
{
    const gfmt *F = f->p->fmt;
    uint64_t r, b = block_of(h, f->nb, &r);
    unsigned fp, mini = mini_in_block(r, F->M, &fp);
    return block_with(blocks_of(f) + b * BLOCK_WORDS, F->S, mini, entry_new(fp));
}

/* add_h without doubling, spilling or stashing (see Threads); the counts
 * change as in add_h, so a filter filled this way doubles after the same
 * number of keys as one filled by add_h. In the single-writer mode no
 * other add or lookup runs: no lock, no second lookup, plain stores. */
static int add_nogrow_h(bk_growable *f, uint64_t h)
{
    if (contains_h(f, h)) return 0;
    if (!f->blocks) return BK_EFULL;
    if (f->single_writer) {
        if (f->items + 1 > keys_at(f->p->fmt, f->level) || !block_add_plain(f, h))
            return BK_EFULL;
        f->items++;
        f->weight++;
        return 1;
    }
    int rc;
    adders_lock(f);
    if (contains_h(f, h)) {
        rc = 0; /* another adder put it there meanwhile */
    } else if (f->items + 1 > keys_at(f->p->fmt, f->level) || !block_add_published(f, h)) {
        rc = BK_EFULL;
    } else {
        __atomic_store_n(&f->items, f->items + 1, __ATOMIC_RELAXED);
        __atomic_store_n(&f->weight, f->weight + 1, __ATOMIC_RELAXED);
        rc = 1;
    }
    adders_unlock(f);
    return rc;
}

/*--------------------------------------------------------------------------
 * Multisets: copies, counts, removals (exclusive, as every change but
 * bk_growable_add_nogrow)
 *--------------------------------------------------------------------------*/

/* Where an entry of mini q sits: kind 0 list, 1 own lane, 2 pair, 3
 * stash slot (-1 before the first); `at` its index. */
typedef struct gspot {
    int kind;
    uint64_t at;
    unsigned e;
} gspot;

static int next_of_mini(const bk_growable *f, uint64_t q, gspot *s); /* below */
static void remove_spot(bk_growable *f, uint64_t q, const gspot *s);

/* The mini and fingerprint of h at the filter's level. */
static uint64_t mini_here(const bk_growable *f, uint64_t h, unsigned *fp)
{
    const gfmt *F = f->p->fmt;
    if (!f->blocks) return mini_of(h, minis_at(F, f->level), fp);
    uint64_t r, b = block_of(h, f->nb, &r);
    return b * F->M + mini_in_block(r, F->M, fp);
}

/* A copy of h, whether or not one is there: BK_OK, or the errors of a
 * doubling or an allocation (nothing changed). */
static int insert_h(bk_growable *f, uint64_t h)
{
    if (!f->p->fmt->multiset) return BK_ENOTSUP;
    if (f->items + 1 > keys_at(f->p->fmt, f->level)) {
        int rc = grow(f);
        if (rc != BK_OK) return rc;
    }
    int rc = place_new(f, h);
    if (rc != BK_OK) return rc;
    f->items++;
    f->weight++;
    if (f->blocks && header_of(f)->nstash > stash_limit(f->items)) (void)grow(f);
    return BK_OK;
}

/* The entries of h's mini that match it. */
static int64_t count_h(const bk_growable *f, uint64_t h)
{
    unsigned fp;
    uint64_t q = mini_here(f, h, &fp);
    gspot s = {-1, 0, 0};
    int64_t n = 0;
    while (next_of_mini(f, q, &s)) n += entry_matches(s.e, fp);
    return n;
}

/* Removes the longest entry of h's mini that matches it: 1, or 0 when
 * none does. The longest: if h was added, its own entry matches, and an
 * entry longer than that one which also matches h belongs to a key whose
 * first bits are h's, that h's entry matches in turn (so no other key is
 * lost). */
static int remove_h(bk_growable *f, uint64_t h)
{
    if (!f->p->fmt->multiset) return BK_ENOTSUP;
    unsigned fp;
    uint64_t q = mini_here(f, h, &fp);
    gspot s = {-1, 0, 0}, best = {-1, 0, 0};
    while (next_of_mini(f, q, &s))
        if (entry_matches(s.e, fp) && (best.kind < 0 || (s.e & (0u - s.e)) < (best.e & (0u - best.e))))
            best = s;
    if (best.kind < 0) return 0;
    remove_spot(f, q, &best);
    f->items--;
    return 1;
}

/*==========================================================================
 * API
 *==========================================================================*/

/* A new, empty filter of format F at `level` (params taken over). */
static bk_growable *filter_new(const gparams *p, unsigned level)
{
    const gfmt *F = p->fmt;
    bk_growable *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return NULL;
    bk__object_init(&f->obj, ops_of(p));
    f->p = p;
    f->std_seed = p->seed == BK_DEFAULT_SEED;
    f->level = (uint8_t)level;
    f->blocks = level > F->list_top;
    if (f->blocks) f->nb = (uint32_t)nblocks_at(F, level);
    f->t = f->blocks ? table_new(F, level)
                     : bk__calloc((size_t)list_words_for(F, level, 0), sizeof(uint64_t));
    if (f->t == NULL) {
        bk__free(f);
        return NULL;
    }
    return f;
}

int bk_growable_estimate_bytes(uint64_t capacity, size_t *bytes)
{
    const gfmt *F = &SET_FORMAT;
    if (bytes == NULL) return BK_EINVAL;
    *bytes = 0;
    if (capacity == 0) return BK_ECAPACITY;
    int level = level_for(F, capacity);
    if (level < 0) return BK_ESIZE;
    *bytes = HANDLE_BYTES + ((unsigned)level > F->list_top
                                 ? table_bytes(F, (unsigned)level) + BK_CACHE_LINE
                                 : (size_t)list_words_for(F, (unsigned)level, 0) * 8);
    return BK_OK;
}

/* The doubling rule of grow, applied to a filter filled key by key from
 * empty: before each doubling it holds keys_at(k) keys, each added with
 * weight 1, and a doubling doubles W. */
uint32_t bk_growable_reach(uint64_t capacity, double fpr)
{
    const gfmt *F = &SET_FORMAT;
    if (capacity == 0 || !(fpr >= BK_GROWABLE_MIN_FPR && fpr < 1.0)) return 0;
    int start = level_for(F, capacity);
    if (start < 0) return 0;
    uint32_t d = 0;
    double w = (double)keys_at(F, (unsigned)start);
    for (unsigned k = (unsigned)start; k < MAX_LEVEL; k++, d++) {
        double next = 2.0 * w + (double)(keys_at(F, k + 1) - keys_at(F, k));
        if (rate_of((uint64_t)next, F, k + 1) > fpr) break;
        w = next;
    }
    return d;
}

static int create_as(const gfmt *F, bk_growable **out, uint64_t capacity, double fpr,
                     uint64_t seed)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (capacity == 0) return BK_ECAPACITY;
    if (!(fpr >= BK_GROWABLE_MIN_FPR && fpr < 1.0)) return BK_EFPR;
    int level = level_for(F, capacity);
    if (level < 0) return BK_ESIZE;
    const gparams *p = params_get(F, seed, fpr, capacity);
    if (p == NULL) return BK_ENOMEM;
    bk_growable *f = filter_new(p, (unsigned)level);
    if (f == NULL) {
        params_put(p);
        return BK_ENOMEM;
    }
    *out = f;
    return BK_OK;
}

int bk_growable_create(bk_growable **out, uint64_t capacity, double fpr, uint64_t seed)
{
    return create_as(&SET_FORMAT, out, capacity, fpr, seed);
}

int bk_growable_create_multiset(bk_growable **out, uint64_t capacity, double fpr, uint64_t seed)
{
    return create_as(&MULTISET_FORMAT, out, capacity, fpr, seed);
}

int bk_growable_is_multiset(const bk_growable *f) { return f != NULL && f->p->fmt->multiset; }

int bk_growable_insert(bk_growable *f, const void *key, size_t len)
{
    if (f == NULL || (key == NULL && len != 0)) return BK_EINVAL;
    return insert_h(f, hash_key(f, key, len));
}

int bk_growable_insert_hash(bk_growable *f, uint64_t h)
{
    if (f == NULL) return BK_EINVAL;
    return insert_h(f, h);
}

int64_t bk_growable_count(const bk_growable *f, const void *key, size_t len)
{
    if (f == NULL || (key == NULL && len != 0)) return BK_EINVAL;
    return count_h(f, hash_key(f, key, len));
}

int bk_growable_remove(bk_growable *f, const void *key, size_t len)
{
    if (f == NULL || (key == NULL && len != 0)) return BK_EINVAL;
    return remove_h(f, hash_key(f, key, len));
}

void bk_growable_free(bk_growable *f)
{
    if (f == NULL) return;
    bk__object_release(&f->obj);
    storage_free(f->t, f->blocks);
    params_put(f->p);
    bk__free(f);
}

int bk_growable_set_max_bytes(bk_growable *f, size_t max_bytes)
{
    if (f == NULL) return BK_EINVAL;
    f->max_bytes = max_bytes;
    return BK_OK;
}

int bk_growable_set_single_writer(bk_growable *f, int single_writer)
{
    if (f == NULL) return BK_EINVAL;
    f->single_writer = single_writer != 0;
    return BK_OK;
}

int bk_growable_single_writer(const bk_growable *f) { return f != NULL && f->single_writer; }

int bk_growable_add_hash(bk_growable *f, uint64_t h)
{
    if (f == NULL) return BK_EINVAL;
    return add_h(f, h);
}

int bk_growable_add_nogrow(bk_growable *f, const void *key, size_t len)
{
    if (f == NULL || (key == NULL && len != 0)) return BK_EINVAL;
    return add_nogrow_h(f, hash_key(f, key, len));
}

int bk_growable_add_nogrow_hash(bk_growable *f, uint64_t h)
{
    if (f == NULL) return BK_EINVAL;
    return add_nogrow_h(f, h);
}

int bk_growable_contains_hash(const bk_growable *f, uint64_t h)
{
    if (f == NULL) return 0;
    return contains_h(f, h);
}

uint64_t bk_growable_hash_key(const bk_growable *f, const void *key, size_t len)
{
    static const char empty[1] = {0};
    if (key == NULL) key = empty, len = 0;
    return hash_key(f, key, len);
}

int bk_growable_add(bk_growable *f, const void *key, size_t len)
{
    if (f == NULL || (key == NULL && len != 0)) return BK_EINVAL;
    return add_h(f, hash_key(f, key, len));
}

/* The two lookups are chosen once, where the loader allows it (a GNU
 * indirect function: no dispatch per call), else per call. */
/* Not under the sanitizers: a resolver runs before their runtime starts,
 * and their instrumentation of it crashes. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define GROWABLE_SANITIZED 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
      __has_feature(memory_sanitizer)
#    define GROWABLE_SANITIZED 1
#  endif
#endif
#if defined(__linux__) && defined(__ELF__) && GROWABLE_BMI2 && !defined(GROWABLE_SANITIZED)
#  define GROWABLE_IFUNC 1
static contains_fn resolve_contains(void) { return contains_way(decide_select(2)); }
static contains_batch_fn resolve_contains_batch(void)
{
    return contains_batch_way(decide_select(2));
}
int bk_growable_contains(const bk_growable *f, const void *key, size_t len)
    __attribute__((ifunc("resolve_contains")));
int64_t bk_growable_contains_batch(const bk_growable *f, const void *const *keys,
                                   const size_t *lens, size_t n, uint8_t *results)
    __attribute__((ifunc("resolve_contains_batch")));
#else
#  define GROWABLE_IFUNC 0
int bk_growable_contains(const bk_growable *f, const void *key, size_t len)
{
    return contains_way(lookup_mode())(f, key, len);
}
#endif

int64_t bk_growable_add_nogrow_batch(bk_growable *f, const void *const *keys,
                                     const size_t *lens, size_t n, int *results)
{
    if (f == NULL || results == NULL || (n > 0 && (keys == NULL || lens == NULL)))
        return BK_EINVAL;
    if (!f->blocks) return 0; /* a list: every add is exclusive */
    for (size_t i = 0; i < n; i++)
        if (keys[i] == NULL && lens[i] != 0) return BK_EINVAL;
    /* blocks and their number do not change under nogrow adds */
    const uint64_t nb = f->nb;
    const uint64_t *blocks = blocks_of(f);
    uint64_t ring[AHEAD];
    size_t ahead = n < AHEAD ? n : AHEAD;
    for (size_t i = 0; i < ahead; i++) {
        ring[i] = hash_ahead(f, blocks, nb, keys[i], lens[i]);
    }
    for (size_t i = 0; i < n; i++) {
        size_t slot = i % AHEAD;
        int r = add_nogrow_h(f, ring[slot]);
        if (r < 0) return (int64_t)i;
        results[i] = r;
        size_t next = i + AHEAD;
        if (next < n) {
            ring[slot] = hash_ahead(f, blocks, nb, keys[next], lens[next]);
        }
    }
    return (int64_t)n;
}

int64_t bk_growable_add_batch(bk_growable *f, const void *const *keys, const size_t *lens,
                              size_t n, int *results)
{
    int64_t added = 0;
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    for (size_t i = 0; i < n; i++) {
        int r = keys[i] == NULL && lens[i] != 0 ? BK_EINVAL : add_h(f, hash_key(f, keys[i], lens[i]));
        if (r == 1) added++;
        if (results != NULL) results[i] = r;
    }
    return added;
}

#if !GROWABLE_IFUNC
int64_t bk_growable_contains_batch(const bk_growable *f, const void *const *keys,
                                   const size_t *lens, size_t n, uint8_t *results)
{
    return contains_batch_way(lookup_mode())(f, keys, lens, n, results);
}
#endif

uint64_t bk_growable_items(const bk_growable *f)
{
    return f ? __atomic_load_n(&f->items, __ATOMIC_RELAXED) : 0;
}
uint64_t bk_growable_capacity(const bk_growable *f)
{
    return f ? keys_at(f->p->fmt, f->level) : 0;
}
uint64_t bk_growable_initial_capacity(const bk_growable *f) { return f ? f->p->capacity : 0; }
uint32_t bk_growable_doublings(const bk_growable *f)
{
    return f ? f->level - (uint32_t)level_for(f->p->fmt, f->p->capacity) : 0;
}
uint64_t bk_growable_seed(const bk_growable *f) { return f ? f->p->seed : 0; }
double bk_growable_error(const bk_growable *f) { return f ? f->p->target : 0.0; }
size_t bk_growable_bytes(const bk_growable *f) { return f ? total_bytes(f) : 0; }
size_t bk_growable_stashed(const bk_growable *f)
{
    return f && f->blocks ? (size_t)header_of(f)->nstash : 0;
}

double bk_growable_fpr_now(const bk_growable *f)
{
    if (f == NULL) return 0.0;
    return rate_of(__atomic_load_n(&f->weight, __ATOMIC_RELAXED), f->p->fmt, f->level);
}

/*==========================================================================
 * Every entry, and changing one (merges)
 *==========================================================================*/

typedef int (*entry_fn)(void *ctx, uint64_t q, unsigned e);

static int for_each_entry(const bk_growable *f, entry_fn fn, void *ctx)
{
    const gfmt *F = f->p->fmt;
    int rc = BK_OK;
    if (!f->blocks) {
        uint64_t minis = minis_at(F, f->level), base = minis + f->list_n, bit = 0, idx = 0;
        unsigned lw = lane_bits_at(f->level);
        for (uint64_t q = 0; q < minis && rc == BK_OK; q++, bit++) /* bit++: the run's 0 */
            for (; rc == BK_OK && get_bits(f->t, bit, 1); bit++, idx++)
                rc = fn(ctx, q, list_entry(f->t, base, lw, idx));
        return rc;
    }
    uint64_t nb = nblocks_at(F, f->level);
    const uint64_t *blocks = blocks_of(f);
    for (uint64_t b = 0; b < nb && rc == BK_OK; b++) {
        const uint64_t *x = blocks + b * BLOCK_WORDS;
        uint64_t meta = x[0] & META_MASK;
        unsigned lane = 0, mini = 0;
        for (unsigned bit = 0; mini < F->M && rc == BK_OK; bit++) {
            if ((meta >> bit) & 1) rc = fn(ctx, b * F->M + mini, lane_at(x, lane++));
            else mini++;
        }
        uint64_t home = (b + nb - 1) % nb;
        for (unsigned j = 0; j < block_pairs(x) && rc == BK_OK; j++)
            rc = fn(ctx, home * F->M + lane_at(x, F->S - 2 - 2 * j) - 1, lane_at(x, F->S - 1 - 2 * j));
    }
    const gheader *hd = header_of(f);
    if (hd->slots)
        for (uint64_t i = 0; i < ((uint64_t)1 << hd->log_cap) && rc == BK_OK; i++)
            if (hd->slots[i]) rc = fn(ctx, SW_Q(hd->slots[i]), SW_E(hd->slots[i]));
    return rc;
}

static void block_remove_own(uint64_t *x, unsigned mini, unsigned lane)
{
    unsigned own = block_own(x[0]);
    delete_bits(x, LANE0 + (uint64_t)LANE_BITS * lane, LANE0 + (uint64_t)LANE_BITS * own, LANE_BITS);
    unsigned pos = lane + mini;
    uint64_t m = x[0] & META_MASK, low = (UINT64_C(1) << pos) - 1;
    x[0] = (x[0] & BLOCK_FLAGS) | (m & low) | ((m >> 1) & ~low);
}

static void block_remove_pair(uint64_t *y, unsigned S, unsigned j)
{
    unsigned last = block_pairs(y) - 1;
    if (j != last) {
        put_bits(y, LANE0 + (uint64_t)LANE_BITS * (S - 1 - 2 * j), LANE_BITS, lane_at(y, S - 1 - 2 * last));
        put_bits(y, LANE0 + (uint64_t)LANE_BITS * (S - 2 - 2 * j), LANE_BITS, lane_at(y, S - 2 - 2 * last));
    }
    put_bits(y, LANE0 + (uint64_t)LANE_BITS * (S - 1 - 2 * last), LANE_BITS, 0);
    put_bits(y, LANE0 + (uint64_t)LANE_BITS * (S - 2 - 2 * last), LANE_BITS, 0);
    y[7] = (y[7] & ~(UINT64_C(0xF) << FOREIGN_SHIFT)) | (uint64_t)last << FOREIGN_SHIFT;
}

/* Remove entry i of mini q's run from a list (the words keep their size
 * when a smaller copy cannot be made). */
static void list_remove(bk_growable *f, uint64_t q, uint64_t i)
{
    const gfmt *F = f->p->fmt;
    uint64_t minis = minis_at(F, f->level), cnt = f->list_n;
    unsigned lw = lane_bits_at(f->level);
    uint64_t base = minis + cnt, end = base + (uint64_t)lw * cnt;
    delete_bits(f->t, base + (uint64_t)lw * i, end, lw);
    delete_bits(f->t, q + i, end, 1);
    f->list_n = (uint32_t)(cnt - 1);
    uint64_t words = list_words_for(F, f->level, cnt), now = list_words_for(F, f->level, cnt - 1);
    if (now < words) {
        uint64_t *a = bk__malloc((size_t)now * sizeof(uint64_t));
        if (a != NULL) {
            memcpy(a, f->t, (size_t)now * sizeof(uint64_t));
            bk__free(f->t);
            f->t = a;
        }
    }
}


/* Entries of mini q, one by one: returns 1 and fills *s while there are
 * more (s->kind < 0 starts). */
static int next_of_mini(const bk_growable *f, uint64_t q, gspot *s)
{
    const gfmt *F = f->p->fmt;
    if (!f->blocks) {
        uint64_t lo, hi;
        list_run(f->t, q, &lo, &hi);
        uint64_t i = s->kind < 0 ? lo : s->at + 1;
        if (i >= hi) return 0;
        s->kind = 0;
        s->at = i;
        s->e = list_entry(f->t, minis_at(F, f->level) + f->list_n, lane_bits_at(f->level), i);
        return 1;
    }
    uint64_t nb = nblocks_at(F, f->level), b = q / F->M;
    unsigned mini = (unsigned)(q % F->M);
    const uint64_t *x = blocks_of(f) + b * BLOCK_WORDS;
    if (s->kind <= 1) {
        unsigned lo, hi;
        run_of(x[0], mini, &lo, &hi);
        uint64_t i = s->kind < 0 ? lo : s->at + 1;
        if (i < hi) {
            s->kind = 1;
            s->at = i;
            s->e = lane_at(x, (unsigned)i);
            return 1;
        }
        s->kind = 2;
        s->at = UINT64_MAX;
    }
    if (s->kind == 2) {
        const uint64_t *y = blocks_of(f) + ((b + 1) % nb) * BLOCK_WORDS;
        if (nb > 1 && (x[0] & SPILLED))
            for (uint64_t j = s->at + 1; j < block_pairs(y); j++)
                if (lane_at(y, F->S - 2 - 2 * (unsigned)j) == mini + 1) {
                    s->at = j;
                    s->e = lane_at(y, F->S - 1 - 2 * (unsigned)j);
                    return 1;
                }
        s->kind = 3;
        s->at = UINT64_MAX;
    }
    const gheader *hd = header_of(f);
    if (hd->slots == NULL || !(x[0] & STASHED)) return 0;
    uint64_t mask = ((uint64_t)1 << hd->log_cap) - 1;
    uint64_t i = s->at == UINT64_MAX ? stash_home(q, hd->log_cap) : (s->at + 1) & mask;
    for (; hd->slots[i] != 0; i = (i + 1) & mask)
        if (SW_Q(hd->slots[i]) == q) {
            s->at = i;
            s->e = SW_E(hd->slots[i]);
            return 1;
        }
    return 0;
}

static void remove_spot(bk_growable *f, uint64_t q, const gspot *s)
{
    const gfmt *F = f->p->fmt;
    f->weight -= entry_weight(s->e);
    if (s->kind == 0) {
        list_remove(f, q, s->at);
        return;
    }
    uint64_t nb = nblocks_at(F, f->level), b = q / F->M;
    uint64_t *blocks = blocks_of(f);
    if (s->kind == 1) block_remove_own(blocks + b * BLOCK_WORDS, (unsigned)(q % F->M), (unsigned)s->at);
    else if (s->kind == 2) block_remove_pair(blocks + ((b + 1) % nb) * BLOCK_WORDS, F->S, (unsigned)s->at);
    else stash_delete_at(header_of(f), s->at);
}

/* Add entry e of mini q (no check of what is there): BK_OK, or
 * BK_ELIMIT / BK_ENOMEM (nothing changed). */
static int insert_entry(bk_growable *f, uint64_t q, unsigned e)
{
    if (!f->blocks) {
        int rc = list_insert(f, q, e);
        if (rc == BK_OK) f->weight += entry_weight(e);
        return rc;
    }
    const gfmt *F = f->p->fmt;
    if (blocks_may_stash(f->t, F, f->level, q)) {
        int rc = stash_reserve(header_of(f));
        if (rc != BK_OK) return rc;
    }
    blocks_place(f->t, F, f->level, q, e);
    f->weight += entry_weight(e);
    return BK_OK;
}

/* Entry e of mini q joins x: if an entry of that mini covers e, e adds
 * nothing; if e covers one, e takes its place (the union matches what e
 * matches); otherwise e is added and counted in *added. */
static int join_entry(bk_growable *x, uint64_t q, unsigned e, uint64_t *added)
{
    gspot s = {-1, 0, 0};
    while (next_of_mini(x, q, &s)) {
        if (entry_covers(s.e, e)) return BK_OK;
        if (entry_covers(e, s.e)) {
            remove_spot(x, q, &s);
            return insert_entry(x, q, e);
        }
    }
    int rc = insert_entry(x, q, e);
    if (rc == BK_OK) (*added)++;
    return rc;
}

/*==========================================================================
 * The generic handle
 *==========================================================================*/

/* The public casts: a set and a multiset are both growable filters. */
bk_filter *bk_growable_as_filter(bk_growable *f) { return (bk_filter *)(void *)f; }
bk_growable *bk_filter_as_growable(bk_filter *f)
{
    if (f == NULL) return NULL;
    const bk__family_ops *ops = ((bk__object *)(void *)f)->ops;
    return ops == &growable_ops || ops == &multiset_ops ? (bk_growable *)(void *)f : NULL;
}

static bk_hash ops_hash(const void *f, const void *key, size_t len)
{
    bk_hash h;
    h.lo = h.hi = bk_growable_hash_key(f, key, len);
    return h;
}

static int ops_add(void *f, bk_hash h) { return add_h(f, h.lo); }
static int ops_contains(const void *f, bk_hash h) { return contains_h(f, h.lo); }

static int64_t ops_add_batch(void *f, const void *const *keys, const size_t *lens, size_t n,
                             uint8_t *results)
{
    int64_t added = 0;
    for (size_t i = 0; i < n; i++) {
        int r = add_h(f, bk_growable_hash_key(f, keys[i], lens[i]));
        if (r < 0) return r;
        added += r;
        if (results != NULL) results[i] = (uint8_t)r;
    }
    return added;
}

static int64_t ops_contains_batch(const void *f, const void *const *keys, const size_t *lens,
                                  size_t n, uint8_t *results)
{
    return bk_growable_contains_batch(f, keys, lens, n, results);
}

static uint64_t ops_seed(const void *f) { return ((const bk_growable *)f)->p->seed; }
static void ops_destroy(void *f) { bk_growable_free(f); }

static uint32_t ops_nparts(const void *vf)
{
    const bk_growable *f = vf;
    return f->blocks && header_of(f)->nstash ? 2 : 1;
}

/* Lanes a table of the filter's level has (a list: as many as its table
 * would). */
static double lanes_of(const bk_growable *f)
{
    const gfmt *F = f->p->fmt;
    return (double)minis_at(F, f->level) / F->M * F->S;
}

static void info_common(const bk_growable *f, bk_filter_info *out)
{
    const gfmt *F = f->p->fmt;
    uint64_t items = __atomic_load_n(&f->items, __ATOMIC_RELAXED);
    uint64_t weight = __atomic_load_n(&f->weight, __ATOMIC_RELAXED);
    uint64_t cap = keys_at(F, f->level);
    out->seed = f->p->seed;
    out->capacity = cap;
    out->target_fpr = f->p->target;
    out->items = items;
    out->estimated_items = (double)items;
    out->fpr_now = rate_of(weight, F, f->level);
    out->fpr_at_capacity = rate_of(weight + (cap > items ? cap - items : 0), F, f->level);
    out->fill = (double)items / lanes_of(f);
    out->bytes = total_bytes(f);
    out->parts = 1;
    out->single_writer = f->single_writer;
}

/* info: the fill counts the lanes in use (pairs take two). */
static int ops_info(const void *vf, bk_filter_info *out)
{
    const bk_growable *f = vf;
    info_common(f, out);
    double used = f->list_n;
    if (f->blocks) {
        const gfmt *F = f->p->fmt;
        uint64_t nb = nblocks_at(F, f->level);
        used = 0;
        for (uint64_t b = 0; b < nb; b++) {
            const uint64_t *x = blocks_of(f) + b * BLOCK_WORDS;
            /* word 7 as bk_growable_add_nogrow stores it (its pairs never change then) */
            used += block_own(__atomic_load_n(&x[0], __ATOMIC_RELAXED)) +
                    2.0 * (double)(__atomic_load_n(&x[7], __ATOMIC_RELAXED) >> FOREIGN_SHIFT);
        }
        used += (double)header_of(f)->nstash;
    }
    out->fill = used / lanes_of(f);
    return BK_OK;
}

/* summary: the fill from the item count (no pass over the table). */
static int ops_summary(const void *vf, bk_filter_info *out)
{
    info_common(vf, out);
    return BK_OK;
}

static int ops_create(const bk_filter_config *cfg, void **out)
{
    return bk_growable_create((bk_growable **)out, cfg->capacity, cfg->fpr, cfg->seed);
}

static void ops_set_single_writer(void *f, int single_writer)
{
    bk_growable_set_single_writer(f, single_writer);
}

/* A copy of f's list or table. */
static uint64_t *storage_copy(const bk_growable *f)
{
    const gfmt *F = f->p->fmt;
    if (!f->blocks) {
        size_t words = (size_t)list_words_for(F, f->level, f->list_n);
        uint64_t *a = bk__malloc(words * sizeof(uint64_t));
        if (a != NULL) memcpy(a, f->t, words * sizeof(uint64_t));
        return a;
    }
    size_t bytes = table_bytes(F, f->level);
    uint64_t *t = bk__calloc_aligned(bytes);
    if (t == NULL) return NULL;
    memcpy(t, f->t, bytes);
    gheader *hd = (gheader *)(void *)t;
    if (hd->slots != NULL) {
        size_t n = (size_t)1 << hd->log_cap;
        uint64_t *slots = bk__malloc(n * sizeof(uint64_t));
        if (slots == NULL) {
            bk__free_aligned(t);
            return NULL;
        }
        memcpy(slots, hd->slots, n * sizeof(uint64_t));
        hd->slots = slots;
    }
    return t;
}

static int ops_clone(const void *vf, void **out)
{
    const bk_growable *src = vf;
    bk_growable *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    *f = *src;
    bk__object_init(&f->obj, ops_of(src->p));
    f->adding = 0;
    f->single_writer = 0; /* a copy starts concurrent, as every family's */
    f->t = storage_copy(src);
    if (f->t == NULL) {
        bk__free(f);
        return BK_ENOMEM;
    }
    params_ref(f->p);
    *out = f;
    return BK_OK;
}

/* Empty, at the filter's current level (its doublings stay counted). */
static void ops_clear(void *vf)
{
    bk_growable *f = vf;
    const gfmt *F = f->p->fmt;
    if (f->blocks) {
        gheader *hd = header_of(f);
        bk__free(hd->slots);
        hd->slots = NULL;
        hd->nstash = 0;
        hd->log_cap = 0;
        memset(blocks_of(f), 0, table_bytes(F, f->level) - BK_CACHE_LINE);
    } else {
        uint64_t *a = bk__calloc((size_t)list_words_for(F, f->level, 0), sizeof(uint64_t));
        if (a != NULL) {
            bk__free(f->t);
            f->t = a;
        } else {
            memset(f->t, 0, (size_t)list_words_for(F, f->level, f->list_n) * 8);
        }
        f->list_n = 0;
    }
    f->items = 0;
    f->weight = 0;
}

typedef struct join_ctx {
    bk_growable *x;
    unsigned doublings; /* levels the source is below x */
    uint64_t added;
} join_ctx;

/* A source entry, doubled up to x's level (voids into every child), joins
 * x. */
static int join_up(join_ctx *c, uint64_t q, unsigned e, unsigned d)
{
    if (d == 0) return join_entry(c->x, q, e, &c->added);
    if (e == VOID_ENTRY) {
        int rc = join_up(c, 2 * q, e, d - 1);
        return rc == BK_OK ? join_up(c, 2 * q + 1, e, d - 1) : rc;
    }
    return join_up(c, 2 * q + ((e >> 11) & 1u), (e << 1) & LANE_MASK, d - 1);
}

static int join_cb(void *vc, uint64_t q, unsigned e)
{
    join_ctx *c = vc;
    return join_up(c, q, e, c->doublings);
}

/* Union (op 0): every entry of src joins dst (join_entry), src's entries
 * taken up to dst's level, dst doubled first when src is bigger. The work
 * is done on a copy of dst that replaces it at the end: a failure changes
 * nothing. BK_EFULL when the union would pass dst's rate filled to its
 * load, BK_ELIMIT past dst's max_bytes, BK_ENOMEM. items becomes dst's
 * plus the entries added: the size of the union but for keys of src whose
 * entry met an unrelated one of dst with the same bits (at the filter's
 * rate). Intersection (op 1) is not offered: BK_ENOTSUP. */
static int ops_merge(void *vd, const void *vs, int op)
{
    bk_growable *d = vd;
    const bk_growable *s = vs;
    bk_growable *x = NULL;
    if (op || d->p->fmt->multiset) return BK_ENOTSUP;
    if (d->p->seed != s->p->seed || d->p->fmt != s->p->fmt) return BK_EINCOMPAT;
    int rc = ops_clone(d, (void **)&x);
    if (rc != BK_OK) return rc;
    while (rc == BK_OK && x->level < s->level) rc = grow(x);
    join_ctx c = {x, (unsigned)(x->level - s->level), 0};
    if (rc == BK_OK) rc = for_each_entry(s, join_cb, &c);
    if (rc == BK_OK) {
        x->items += c.added;
        while (rc == BK_OK && x->items > keys_at(x->p->fmt, x->level)) rc = grow(x);
    }
    if (rc == BK_OK && rate_of(x->weight, x->p->fmt, x->level) > x->p->target) rc = BK_EFULL;
    if (rc == BK_OK && x->blocks && header_of(x)->nstash > stash_limit(x->items)) (void)grow(x);
    if (rc == BK_OK) {
        /* x's storage and counts replace d's */
        uint64_t *t = d->t;
        int blocks = d->blocks;
        d->t = x->t;
        d->blocks = x->blocks;
        d->level = x->level;
        d->list_n = x->list_n;
        d->items = x->items;
        d->weight = x->weight;
        x->t = t;
        x->blocks = (uint8_t)blocks;
    }
    bk_growable_free(x);
    return rc;
}

/* Any two growable filters of one seed and shape combine
 * (bk_filter_incompatibility checks the seed). */
static int ops_incompatibility(const void *va, const void *vb, char *buf, size_t cap)
{
    const bk_growable *a = va, *b = vb;
    if (a->p->fmt == b->p->fmt) return 0;
    if (buf != NULL && cap > 0) snprintf(buf, cap, "a growable set and a growable multiset");
    return 1;
}

/*==========================================================================
 * The file format (docs/FORMAT.md, family 18)
 *
 * Header: capacity asked, rate, items, hash XXH3-64, param[0] = level,
 * param[1] = W, param[2] = the shape (1). Part 0: the list (m = entries,
 * width = lane bits, param = minis, flags 0) or the blocks (m = blocks,
 * width 12, slots = lanes per block, k = minis per block, param = minis,
 * flags 1); part 1, when the stash holds entries, its hash table as it is
 * (m = slots, width 64, param = entries). Images of the first layout (16-bit
 * lanes, param[2] = 0) are converted when loaded (legacy_restore).
 *==========================================================================*/

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_growable *f = vf;
    const gfmt *F = f->p->fmt;
    bk__part *p = &img->parts[0];
    img->seed = f->p->seed;
    img->capacity = f->p->capacity;
    img->fpr = p->fpr = f->p->target;
    img->items = p->items = f->items;
    img->hash = BK__HASH_XXH3_64;
    img->param[0] = f->level;
    img->param[1] = f->weight;
    img->param[2] = F->id;
    p->capacity = keys_at(F, f->level);
    p->param = minis_at(F, f->level);
    if (!f->blocks) {
        p->m = f->list_n;
        p->width = (uint8_t)lane_bits_at(f->level);
        p->data = f->t;
        p->length = list_words_for(F, f->level, f->list_n) * 8;
        return BK_OK;
    }
    p->m = nblocks_at(F, f->level);
    p->width = LANE_BITS;
    p->slots = (uint8_t)F->S;
    p->k = F->M;
    p->flags = 1;
    p->data = blocks_of(f);
    p->length = p->m * BK_CACHE_LINE;
    const gheader *hd = header_of(f);
    if (hd->nstash) {
        bk__part *s = &img->parts[1];
        s->m = (uint64_t)1 << hd->log_cap;
        s->width = 64;
        s->param = hd->nstash;
        s->data = hd->slots;
        s->length = s->m * 8;
    }
    return BK_OK;
}

/* A run of entries is valid when each is a lane value with its marker
 * and they do not decrease. Adds the weights to *w. */
static int valid_run(const unsigned *r, unsigned n, uint64_t *w)
{
    for (unsigned i = 0; i < n; i++) {
        if (r[i] == 0 || r[i] > LANE_MASK || (i > 0 && r[i] < r[i - 1])) return 0;
        *w += entry_weight(r[i]);
    }
    return 1;
}

/* A list image: n entries of lw bits, its unary part of exactly `minis`
 * zeros, every bit past the lanes zero, runs valid, W right. */
static int valid_list(const uint64_t *a, uint64_t words, uint64_t minis, uint64_t n, unsigned lw,
                      uint64_t weight)
{
    uint64_t meta = minis + n, end = meta + (uint64_t)lw * n, ones = 0;
    if ((end + 63) / 64 != words) return 0;
    if (end % 64 && (a[words - 1] >> (end % 64)) != 0) return 0;
    for (uint64_t i = 0; i < meta / 64; i++) ones += (uint64_t)popcount64(a[i]);
    if (meta % 64) ones += (uint64_t)popcount64(a[meta / 64] & ((UINT64_C(1) << (meta % 64)) - 1));
    if (ones != n || (meta > 0 && get_bits(a, meta - 1, 1) != 0)) return 0;
    uint64_t w = 0, idx = 0, bit = 0;
    for (uint64_t q = 0; q < minis; q++, bit++) {
        unsigned prev = 0;
        for (; get_bits(a, bit, 1); bit++, idx++) {
            unsigned e = list_entry(a, meta, lw, idx);
            if (e == 0 || e < prev) return 0;
            w += entry_weight(e);
            prev = e;
        }
    }
    return w == weight;
}

/* A block table: every block's counts fit, its lanes are used exactly
 * where the counts say, its runs valid; a pair's block follows one
 * flagged SPILLED and names a mini; a stash word's block is flagged
 * STASHED and the word is reachable from its home; W right. */
static int valid_blocks(const gfmt *F, unsigned level, const uint64_t *blocks,
                        const uint64_t *slots, uint64_t nslots, uint64_t nstash, uint64_t weight)
{
    uint64_t nb = nblocks_at(F, level), w = 0;
    for (uint64_t b = 0; b < nb; b++) {
        const uint64_t *x = blocks + b * BLOCK_WORDS;
        uint64_t meta = x[0];
        unsigned own = block_own(meta), pairs = block_pairs(x);
        if (meta & WRITING) return 0;
        if (own + 2 * pairs > F->S || own + F->M > 61) return 0;
        /* exactly M zeros below the ones' end: the last own one sits below
         * the M-th zero */
        if ((meta & META_MASK) >> (own + F->M) != 0) return 0;
        if (pairs > 0 && (nb < 2 || !(blocks[((b + nb - 1) % nb) * BLOCK_WORDS] & SPILLED))) return 0;
        unsigned lane = 0, mini = 0, run[64], k = 0;
        for (unsigned bit = 0; mini < F->M; bit++) {
            if ((meta >> bit) & 1) {
                run[k++] = lane_at(x, lane++);
                continue;
            }
            if (!valid_run(run, k, &w)) return 0;
            k = 0;
            mini++;
        }
        for (unsigned i = own; i < F->S - 2 * pairs; i++)
            if (lane_at(x, i) != 0) return 0;
        if (get_bits(x, LANE0 + (uint64_t)LANE_BITS * F->S, FOREIGN_SHIFT + 64 * 7 - LANE0 - LANE_BITS * F->S) != 0)
            return 0;
        for (unsigned j = 0; j < pairs; j++) {
            unsigned e = lane_at(x, F->S - 1 - 2 * j), m = lane_at(x, F->S - 2 - 2 * j);
            if (m == 0 || m > F->M || !valid_run(&e, 1, &w)) return 0;
        }
    }
    uint64_t seen = 0;
    for (uint64_t i = 0; i < nslots; i++) {
        uint64_t s = slots[i];
        if (s == 0) continue;
        unsigned e = SW_E(s);
        uint64_t q = SW_Q(s);
        if (q >= minis_at(F, level) || !valid_run(&e, 1, &w)) return 0;
        if (!(blocks[(q / F->M) * BLOCK_WORDS] & STASHED)) return 0;
        unsigned log_cap = (unsigned)__builtin_ctzll(nslots);
        for (uint64_t j = stash_home(q, log_cap); j != i; j = (j + 1) % nslots)
            if (slots[j] == 0) return 0;
        seen++;
    }
    return seen == nstash && w == weight;
}

static int legacy_restore(const bk__image *img, void **out);

/* The payload is copied (a doubling replaces the table; a copy keeps the
 * handle the only owner of what it frees). */
static int ops_restore(const bk__image *img, void **out)
{
    if (img->hash != BK__HASH_XXH3_64 || img->nparts < 1 || img->nparts > 2) return BK_ECORRUPT;
    if (img->param[2] == 0) return legacy_restore(img, out);
    const gfmt *F = img->param[2] == SET_FORMAT.id ? &SET_FORMAT
                    : img->param[2] == MULTISET_FORMAT.id ? &MULTISET_FORMAT : NULL;
    if (F == NULL || img->param[3] != 0 || img->flags != 0) return BK_ECORRUPT;
    if (img->capacity == 0 || !(img->fpr >= BK_GROWABLE_MIN_FPR && img->fpr < 1.0))
        return BK_ECORRUPT;
    int start = level_for(F, img->capacity);
    if (start < 0 || img->param[0] > MAX_LEVEL || img->param[0] < (uint64_t)start) return BK_ECORRUPT;
    unsigned level = (unsigned)img->param[0];
    const bk__part *p = &img->parts[0];
    if (img->items > keys_at(F, level) || img->param[1] > (UINT64_C(1) << 60)) return BK_ECORRUPT;
    if (p->param != minis_at(F, level)) return BK_ECORRUPT;
    const gparams *params = NULL;
    bk_growable *f = NULL;
    if (level <= F->list_top) {
        unsigned lw = lane_bits_at(level);
        if (img->nparts != 1 || p->flags != 0 || p->width != lw || p->slots != 0 || p->k != 0 ||
            p->m > UINT32_MAX || p->length != list_words_for(F, level, p->m) * 8)
            return BK_ECORRUPT;
        if (!valid_list(p->data, p->length / 8, p->param, p->m, lw, img->param[1]))
            return BK_ECORRUPT;
    } else {
        if (p->flags != 1 || p->width != LANE_BITS || p->slots != F->S || p->k != F->M ||
            p->m != nblocks_at(F, level) || p->length != p->m * BK_CACHE_LINE)
            return BK_ECORRUPT;
        const bk__part *s = img->nparts == 2 ? &img->parts[1] : NULL;
        if (s != NULL && (s->width != 64 || s->m < 16 || s->m > (UINT64_C(1) << 48) ||
                          (s->m & (s->m - 1)) != 0 || s->length != s->m * 8 || s->param == 0 ||
                          s->param * 4 > s->m * 3))
            return BK_ECORRUPT;
        if (!valid_blocks(F, level, p->data, s ? s->data : NULL, s ? s->m : 0, s ? s->param : 0,
                          img->param[1]))
            return BK_ECORRUPT;
    }
    params = params_get(F, img->seed, img->fpr, img->capacity);
    if (params == NULL) return BK_ENOMEM;
    f = bk__calloc(1, sizeof(*f));
    if (f == NULL) goto nomem;
    bk__object_init(&f->obj, ops_of(params));
    f->p = params;
    f->std_seed = params->seed == BK_DEFAULT_SEED;
    f->level = (uint8_t)level;
    f->blocks = level > F->list_top;
    if (f->blocks) f->nb = (uint32_t)nblocks_at(F, level);
    f->items = img->items;
    f->weight = img->param[1];
    if (!f->blocks) {
        f->t = bk__malloc((size_t)p->length);
        if (f->t == NULL) goto nomem;
        memcpy(f->t, p->data, (size_t)p->length);
        f->list_n = (uint32_t)p->m;
    } else {
        f->t = table_new(F, level);
        if (f->t == NULL) goto nomem;
        memcpy(blocks_of(f), p->data, (size_t)p->length);
        if (img->nparts == 2) {
            gheader *hd = header_of(f);
            hd->slots = bk__malloc((size_t)img->parts[1].length);
            if (hd->slots == NULL) goto nomem;
            memcpy(hd->slots, img->parts[1].data, (size_t)img->parts[1].length);
            hd->log_cap = (unsigned)__builtin_ctzll(img->parts[1].m);
            hd->nstash = img->parts[1].param;
        }
    }
    f->obj.payload_copied = 1;
    *out = f;
    return BK_OK;
nomem:
    if (f != NULL) {
        f->p = NULL;
        storage_free(f->t, f->blocks);
        bk__free(f);
    }
    params_put(params);
    return BK_ENOMEM;
}

/*--------------------------------------------------------------------------
 * Images of the first layout
 *
 * 2^q buckets of 32 16-bit lanes (31 entries of up to 15 fingerprint bits
 * and a metadata lane), then a sorted stash (docs/FORMAT.md keeps the
 * layout). A key's bucket was the top q bits of its hash and its entry the
 * next bits: an entry stands for an interval of hashes. Converted, it
 * becomes the entries of this layout that cover that interval at the
 * 2^-11 resolution of a mini, rounded outwards (one to three for an entry
 * of many bits): every key the filter held is still there, and a few more
 * absent keys answer present than before.
 *--------------------------------------------------------------------------*/

/* The entries covering old entry e16 of bucket b (2^q buckets) at `level`. */
static int legacy_pieces(gvec *out, const gfmt *F, unsigned level, uint32_t q, uint64_t b,
                         unsigned e16)
{
    unsigned l = 15u - (unsigned)__builtin_ctz(e16);
    uint64_t fp = l ? (uint64_t)e16 >> (16 - l) : 0;
    unsigned __int128 v = ((unsigned __int128)b << l) | fp;
    unsigned __int128 scale = (unsigned __int128)minis_at(F, level) << FP_BITS;
    unsigned shift = q + l;
    unsigned __int128 lo128 = (v * scale) >> shift;
    unsigned __int128 hi128 = (((v + 1) * scale) + (((unsigned __int128)1 << shift) - 1)) >> shift;
    uint64_t lo = (uint64_t)lo128, hi = (uint64_t)hi128;
    while (lo < hi) {
        uint64_t size = UINT64_C(1) << FP_BITS;
        if (lo & (size - 1)) size = lo & (0 - lo);
        while (size > hi - lo) size >>= 1;
        unsigned bits = FP_BITS - (unsigned)__builtin_ctzll(size);
        unsigned fpn = (unsigned)((lo & ((UINT64_C(1) << FP_BITS) - 1)) >> (FP_BITS - bits));
        unsigned e = (fpn << (LANE_BITS - bits)) | (1u << (FP_BITS - bits));
        if (bits == 0) e = VOID_ENTRY;
        int rc = vec_push(out, SW_MAKE(lo >> FP_BITS, e));
        if (rc != BK_OK) return rc;
        lo += size;
    }
    return BK_OK;
}

/* Sort, and keep of each mini's entries those no other covers. */
static void legacy_tidy(gvec *v)
{
    if (v->n > 1) qsort(v->v, v->n, sizeof(uint64_t), cmp_u64);
    size_t out = 0;
    for (size_t i = 0; i < v->n;) {
        size_t j = i;
        while (j < v->n && SW_Q(v->v[j]) == SW_Q(v->v[i])) j++;
        for (size_t a = i; a < j; a++) {
            int covered = 0;
            for (size_t c = i; c < j && !covered; c++)
                if (c != a && entry_covers(SW_E(v->v[c]), SW_E(v->v[a])) &&
                    (SW_E(v->v[c]) != SW_E(v->v[a]) || c < a))
                    covered = 1;
            if (!covered) v->v[out++] = v->v[a];
        }
        i = j;
    }
    v->n = out;
}

static int legacy_restore(const bk__image *img, void **out)
{
    const gfmt *F = &SET_FORMAT;
    const bk__part *p = &img->parts[0];
    const bk__part *s = img->nparts == 2 ? &img->parts[1] : NULL;
    if (img->param[3] != 0 || img->flags != 0 || p->width != 16 || p->slots != 31 || p->param > 48 ||
        p->m != (UINT64_C(1) << p->param) || p->length != p->m * 64)
        return BK_ECORRUPT;
    if (s != NULL && (s->m == 0 || s->width != 64 || s->length != s->m * 8)) return BK_ECORRUPT;
    /* a table of m blocks of 31 lanes was never made for more keys than it
     * has lanes: a larger capacity would size the converted table from the
     * header alone (fuzz_deserialize: 107 GB asked by an 8.8 KB file) */
    if (img->capacity == 0 || img->capacity > p->m * 31 ||
        !(img->fpr >= BK_GROWABLE_MIN_FPR && img->fpr < 1.0) || img->items > p->m * 31 * 3 / 4)
        return BK_ECORRUPT;
    uint32_t q = (uint32_t)p->param;
    const unsigned char *d = p->data;
    int start = level_for(F, img->capacity), need = level_for(F, img->items ? img->items : 1);
    if (start < 0 || need < 0) return BK_ECORRUPT;
    unsigned level = (unsigned)(start > need ? start : need);
    if (level == 0) level = 1; /* a level-0 list holds only whole entries */
    gvec v = {0};
    int rc = BK_OK;
    for (;; level++) {
        if (level > MAX_LEVEL) {
            rc = BK_ECORRUPT;
            break;
        }
        v.n = 0;
        for (uint64_t b = 0; b < p->m && rc == BK_OK; b++) {
            const unsigned char *x = d + b * 64;
            unsigned meta = (unsigned)x[62] | (unsigned)x[63] << 8;
            unsigned own = meta & 31u, fo = (meta >> 5) & 31u;
            if (own + fo > 31 || (fo > 0 && p->m == 1)) rc = BK_ECORRUPT;
            for (unsigned i = 0; i < 31 && rc == BK_OK; i++) {
                unsigned e = (unsigned)x[2 * i] | (unsigned)x[2 * i + 1] << 8;
                int used = i < own || i >= 31 - fo;
                if (used != (e != 0)) rc = BK_ECORRUPT;
                else if (used) rc = legacy_pieces(&v, F, level, q, i < own ? b : (b + p->m - 1) % p->m, e);
            }
        }
        for (uint64_t i = 0; s != NULL && i < s->m && rc == BK_OK; i++) {
            uint64_t w;
            memcpy(&w, (const unsigned char *)s->data + 8 * i, 8);
            if ((w >> 16) >= p->m || (w & 0xFFFF) == 0) rc = BK_ECORRUPT;
            else rc = legacy_pieces(&v, F, level, q, w >> 16, (unsigned)(w & 0xFFFF));
        }
        if (rc != BK_OK) break;
        legacy_tidy(&v);
        /* room to spare: the converted entries at most 3/4 of the lanes */
        if ((double)v.n <= 0.75 * (double)minis_at(F, level) / F->M * F->S && img->items <= keys_at(F, level))
            break;
    }
    const gparams *params = NULL;
    bk_growable *f = NULL;
    if (rc != BK_OK) goto fail;
    rc = BK_ENOMEM;
    params = params_get(F, img->seed, img->fpr, img->capacity);
    if (params == NULL) goto fail;
    f = bk__calloc(1, sizeof(*f));
    if (f == NULL) goto fail;
    bk__object_init(&f->obj, ops_of(params));
    f->p = params;
    f->std_seed = params->seed == BK_DEFAULT_SEED;
    f->level = (uint8_t)level;
    f->blocks = level > F->list_top;
    if (f->blocks) f->nb = (uint32_t)nblocks_at(F, level);
    f->items = img->items;
    for (size_t i = 0; i < v.n; i++) f->weight += entry_weight(SW_E(v.v[i]));
    if (!f->blocks) {
        if (v.n > UINT32_MAX) goto fail;
        f->t = list_layout(F, level, v.v, v.n);
        if (f->t == NULL) goto fail;
        f->list_n = (uint32_t)v.n;
    } else {
        gsink sk;
        gvec none = {0};
        uint32_t ln;
        if (sink_start(&sk, F, level) != BK_OK) goto fail;
        rc = BK_OK;
        for (size_t i = 0; i < v.n && rc == BK_OK; i++) rc = sink_put(&sk, SW_Q(v.v[i]), SW_E(v.v[i]));
        if (rc == BK_OK) rc = sink_finish(&sk, &none, &f->t, &ln);
        else sink_abort(&sk);
        if (rc != BK_OK) goto fail;
    }
    vec_free(&v);
    f->obj.payload_copied = 1;
    *out = f;
    return BK_OK;
fail:
    vec_free(&v);
    if (f != NULL) {
        storage_free(f->t, f->blocks);
        bk__free(f);
    }
    params_put(params);
    return rc;
}

/* The handle, the list or the table (one aligned block), the stash's
 * slots. The shared parameters are not the filter's own. */
static void ops_allocations(const void *vf, void (*visit)(void *ctx, const void *ptr, size_t asked),
                            void *ctx)
{
    const bk_growable *f = vf;
    visit(ctx, f, sizeof(*f));
    if (!f->blocks) {
        visit(ctx, f->t, (size_t)list_words_for(f->p->fmt, f->level, f->list_n) * 8);
        return;
    }
    visit(ctx, bk__aligned_raw(f->t), bk__aligned_asked(table_bytes(f->p->fmt, f->level)));
    const gheader *hd = header_of(f);
    if (hd->slots) visit(ctx, hd->slots, (size_t)8 << hd->log_cap);
}

/* Multisets through the generic handle: an add inserts a copy (1), a
 * remove takes one away, a count counts them. */
static int ops_insert(void *f, bk_hash h)
{
    int rc = insert_h(f, h.lo);
    return rc == BK_OK ? 1 : rc;
}
static int ops_remove(void *f, bk_hash h)
{
    int rc = remove_h(f, h.lo);
    return rc == 1 ? BK_OK : rc == 0 ? BK_ENOTFOUND : rc;
}
static int64_t ops_count(const void *f, bk_hash h) { return count_h(f, h.lo); }

static int64_t ops_insert_batch(void *f, const void *const *keys, const size_t *lens, size_t n,
                                uint8_t *results)
{
    for (size_t i = 0; i < n; i++) {
        int r = insert_h(f, bk_growable_hash_key(f, keys[i], lens[i]));
        if (r < 0) return r;
        if (results != NULL) results[i] = 1;
    }
    return (int64_t)n;
}

/* What sets and multisets do alike: all but adding, removing, counting. */
#define GROWABLE_OPS_SHARED                                                                     \
    .family = BK_FAMILY_GROWABLE, .name = "growable", .hash = ops_hash,                         \
    .contains = ops_contains, .contains_batch = ops_contains_batch, .lockfree_add = 0,         \
    .seed = ops_seed, .destroy = ops_destroy, .info = ops_info, .summary = ops_summary,         \
    .allocations = ops_allocations, .create = ops_create, .clone = ops_clone,                   \
    .set_single_writer = ops_set_single_writer,                                                 \
    .clear = ops_clear, .merge = ops_merge, .incompatibility = ops_incompatibility,             \
    .nparts = ops_nparts, .describe = ops_describe, .restore = ops_restore,

static const bk__family_ops multiset_ops = {
    .add = ops_insert,
    .remove = ops_remove,
    .count = ops_count,
    .add_batch = ops_insert_batch,
    GROWABLE_OPS_SHARED
};

static const bk__family_ops growable_ops = {
    .add = ops_add,
    .add_batch = ops_add_batch,
    GROWABLE_OPS_SHARED
};

const bk__family_ops *const bk__growable_family = &growable_ops;
