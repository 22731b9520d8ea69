/*
 * cmd_keyset.c - RS.*: sets of items that two sites reconcile over the
 * Redis protocol (issue 16), and the set structure behind them.
 *
 * A reconciliation set holds the items themselves (a sync must ship what
 * the other side lacks) and, for each, its 64-bit id under the set's seed
 * (bk_iblt_key_id). The exchange runs on ids with the library's strata
 * estimator and invertible Bloom lookup table (IBLT); only at the end do
 * items travel, so the bytes sent grow with the difference, not the sets:
 *
 *   site A                                   site B
 *   RS.STRATA a            -- 41 KB -->      RS.ESTIMATE b <strata>  -> d
 *                          <-- 16 B/cell --  RS.IBLT b <cells_for(d)>
 *   RS.DIFF a <iblt>       -> [A's items B lacks, ids of B's items A lacks]
 *     (error "IBLT too small": ask B again with twice the cells)
 *                          -- 8 B/id -->     RS.GETIDS b <id ...>  -> items
 *   RS.ADD a <B's items>                     RS.ADD b <A's items>
 *
 * The structure
 *   items live back to back in an arena, each a record of a 32-bit word
 *   (bit 31: removed; bits 0-30: length) and the item's bytes. An
 *   open-addressing table (linear probing, power-of-two slots, at most 3/4
 *   full, backward-shift deletion so there are no tombstones) maps id ->
 *   record: 16 bytes per slot (id, record offset + 1; 0 = empty slot).
 *   Memory per item: 16 / load (21 to 43 bytes, the load being between
 *   3/8 and 3/4) + 4 + its length, plus the arena's slack (it grows by
 *   doubling). RS.REM marks the record removed; the arena is compacted
 *   (in order) when removed bytes pass half of it and 4 KiB. The arena is
 *   a function of the commands applied alone, and is the byte form: a
 *   copy of a set (a replica, a reload) encodes to the same bytes.
 *   Lookups never change anything, so READ-mode commands may run at once.
 *   The table's slot of an id comes from the id alone: someone who knows
 *   the seed and hashes many items could choose items that crowd one run
 *   of slots (the default seed is public; RS.RESERVE ... SEED takes a
 *   secret one).
 *
 * Two distinct items with equal ids (odds ~ n^2 / 2^65) cannot both be in
 * a set: RS.ADD answers an error for the second (reconciliation could not
 * tell them apart anyway).
 *
 * Byte form (the body of the value's container, docs/COMMANDS.md "Value
 * encoding"), little-endian:
 *    0  4  magic "BKRS"
 *    4  4  version (1)
 *    8  8  seed
 *   16  8  items (records not removed)
 *   24  8  R, bytes of records
 *   32  8  check: XXH3-128 low half (bk_hash_key) of the R record bytes,
 *          seeded with bk_hash_key(bytes 0..31, seed 0).lo
 *   40  R  the arena's records as they are (removed ones included)
 * Decoding checks every field and record and re-derives every id; a
 * repeated item is corruption.
 *
 * Costs: RS.ADD/REM/ISMEMBER/GETIDS O(1) per item; RS.STRATA, RS.ESTIMATE,
 * RS.IBLT and RS.DIFF build their tables from every id, O(n + cells)
 * (nothing is cached: an estimator cannot forget a removed id).
 */
#include <stdio.h>  /* snprintf */
#include <string.h> /* memcpy */

#include "cmd_internal.h"

/*==========================================================================
 * The set
 *==========================================================================*/

#define KS_MAGIC "BKRS"
#define KS_VERSION 1u
#define KS_HEADER 40
#define KS_REMOVED 0x80000000u
#define KS_MAX_ITEM 0x7FFFFFFFu
#define KS_MIN_SLOTS 8

/* The largest IBLT RS.IBLT builds or RS.DIFF accepts: 2^25 cells (512 MiB
 * on the wire, Redis's default proto-max-bulk-len), enough for a
 * difference of about 16 million ids. */
#define RS_MAX_CELLS (UINT64_C(1) << 25)

typedef struct ks_slot {
    uint64_t id;
    uint64_t ref; /* offset of the record in the arena + 1; 0: empty */
} ks_slot;

struct bkc_keyset {
    uint64_t seed;
    uint64_t count;      /* items */
    ks_slot *slots;
    uint64_t mask;       /* slots - 1 */
    unsigned char *arena;
    size_t len, cap;     /* bytes of records, bytes allocated */
    size_t removed;      /* bytes of removed records */
};

static uint64_t ks_get64(const unsigned char *p)
{
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--) x = (x << 8) | p[i];
    return x;
}

static uint32_t ks_get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void ks_put64(unsigned char *p, uint64_t x)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(x >> (8 * i));
}

static void ks_put32(unsigned char *p, uint32_t x)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(x >> (8 * i));
}

/* The home slot of an id. Ids are already uniform hashes; the multiply
 * spreads any structure in their low bits. */
static uint64_t ks_home(const bkc_keyset *s, uint64_t id)
{
    return (id * UINT64_C(0x9E3779B97F4A7C15)) >> 7 & s->mask;
}

static bkc_keyset *ks_new(uint64_t seed, uint64_t slots)
{
    bkc_keyset *s = bkc__calloc(1, sizeof(*s));
    if (s == NULL) return NULL;
    s->seed = seed;
    s->slots = bkc__calloc((size_t)slots, sizeof(ks_slot));
    if (s->slots == NULL) {
        bkc__free(s);
        return NULL;
    }
    s->mask = slots - 1;
    return s;
}

void bkc__keyset_free(bkc_keyset *s)
{
    if (s == NULL) return;
    bkc__free(s->slots);
    bkc__free(s->arena);
    bkc__free(s);
}

void bkc__keyset_allocations(const bkc_keyset *s, bkc__visit_fn visit, void *ctx)
{
    visit(ctx, s, sizeof(*s));
    visit(ctx, s->slots, (size_t)(s->mask + 1) * sizeof(ks_slot));
    if (s->arena != NULL) visit(ctx, s->arena, s->cap ? s->cap : 1);
}

/* The slot holding id, or NULL. */
static ks_slot *ks_find(const bkc_keyset *s, uint64_t id)
{
    for (uint64_t i = ks_home(s, id);; i = (i + 1) & s->mask) {
        ks_slot *sl = &s->slots[i];
        if (sl->ref == 0) return NULL;
        if (sl->id == id) return sl;
    }
}

static const unsigned char *ks_item(const bkc_keyset *s, const ks_slot *sl, size_t *len)
{
    const unsigned char *rec = s->arena + (sl->ref - 1);
    *len = ks_get32(rec) & KS_MAX_ITEM;
    return rec + 4;
}

/* Place (id, ref) in a table known to have room and not to hold id. */
static void ks_place(ks_slot *slots, uint64_t mask, const bkc_keyset *s, uint64_t id,
                     uint64_t ref)
{
    uint64_t i = ks_home(s, id);
    while (slots[i].ref != 0) i = (i + 1) & mask;
    slots[i].id = id;
    slots[i].ref = ref;
}

/* Slots for n items: a power of two with n at most 3/4 of it. */
static uint64_t ks_slots_for(uint64_t n)
{
    uint64_t slots = KS_MIN_SLOTS;
    while (slots / 4 * 3 < n) slots *= 2;
    return slots;
}

static int ks_rehash(bkc_keyset *s, uint64_t slots)
{
    ks_slot *ns = bkc__calloc((size_t)slots, sizeof(ks_slot));
    if (ns == NULL) return BK_ENOMEM;
    ks_slot *old = s->slots;
    uint64_t old_slots = s->mask + 1;
    s->slots = ns;
    s->mask = slots - 1;
    for (uint64_t i = 0; i < old_slots; i++)
        if (old[i].ref != 0) ks_place(ns, s->mask, s, old[i].id, old[i].ref);
    bkc__free(old);
    return BK_OK;
}

/* Bytes that adding items of `bytes` bytes in total (n of them) may
 * allocate: their records, the arena doubling, the table doubling. */
static uint64_t ks_growth(const bkc_keyset *s, uint64_t n, uint64_t bytes)
{
    uint64_t need = s->len + bytes + 4 * n, grow = 0;
    if (need > s->cap) grow += need * 2;
    uint64_t slots = ks_slots_for(s->count + n);
    if (slots > s->mask + 1) grow += slots * sizeof(ks_slot);
    return grow;
}

/* Add an item. 1 added, 0 present, BK_ECONFLICT (another item has its id),
 * BK_ENOMEM. */
static int ks_add(bkc_keyset *s, const void *item, size_t len)
{
    uint64_t id = bk_iblt_key_id(item, len, s->seed);
    ks_slot *sl = ks_find(s, id);
    if (sl != NULL) {
        size_t have;
        const unsigned char *p = ks_item(s, sl, &have);
        return have == len && (len == 0 || memcmp(p, item, len) == 0) ? 0 : BK_ECONFLICT;
    }
    if ((s->count + 1) > (s->mask + 1) / 4 * 3 && ks_rehash(s, (s->mask + 1) * 2) != BK_OK)
        return BK_ENOMEM;
    if (s->cap - s->len < len + 4) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap - s->len < len + 4) cap *= 2;
        unsigned char *p = bkc__realloc(s->arena, cap);
        if (p == NULL) return BK_ENOMEM;
        s->arena = p;
        s->cap = cap;
    }
    ks_put32(s->arena + s->len, (uint32_t)len);
    if (len > 0) memcpy(s->arena + s->len + 4, item, len);
    ks_place(s->slots, s->mask, s, id, (uint64_t)s->len + 1);
    s->len += len + 4;
    s->count++;
    return 1;
}

/* Rewrite the arena with the items only (after many removals), in arena
 * order: the result depends on the arena alone, never on the table's
 * layout, so two copies of a set (a replica, a reloaded snapshot) stay
 * byte for byte the same. */
static int ks_compact(bkc_keyset *s)
{
    size_t live = s->len - s->removed, cap = live ? live : 1, out = 0;
    unsigned char *na = bkc__malloc(cap);
    if (na == NULL) return BK_ENOMEM;
    for (size_t at = 0; at < s->len;) {
        uint32_t word = ks_get32(s->arena + at);
        size_t len = word & KS_MAX_ITEM;
        if (!(word & KS_REMOVED)) {
            ks_slot *sl = ks_find(s, bk_iblt_key_id(s->arena + at + 4, len, s->seed));
            memcpy(na + out, s->arena + at, len + 4);
            sl->ref = (uint64_t)out + 1;
            out += len + 4;
        }
        at += len + 4;
    }
    bkc__free(s->arena);
    s->arena = na;
    s->len = live;
    s->cap = cap;
    s->removed = 0;
    return BK_OK;
}

/* Remove an item: 1 removed, 0 absent. Never fails (compaction is skipped
 * when it cannot allocate). */
static int ks_rem(bkc_keyset *s, const void *item, size_t len)
{
    uint64_t id = bk_iblt_key_id(item, len, s->seed);
    ks_slot *sl = ks_find(s, id);
    if (sl == NULL) return 0;
    size_t have;
    const unsigned char *p = ks_item(s, sl, &have);
    if (have != len || (len > 0 && memcmp(p, item, len) != 0)) return 0;
    unsigned char *rec = s->arena + (sl->ref - 1);
    ks_put32(rec, (uint32_t)have | KS_REMOVED);
    s->removed += have + 4;
    s->count--;
    /* backward-shift deletion: move later entries of the run into the hole
     * when their home does not lie cyclically in (hole, j] */
    uint64_t hole = (uint64_t)(sl - s->slots);
    for (uint64_t j = (hole + 1) & s->mask; s->slots[j].ref != 0; j = (j + 1) & s->mask) {
        uint64_t home = ks_home(s, s->slots[j].id);
        int stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (stays) continue;
        s->slots[hole] = s->slots[j];
        hole = j;
    }
    s->slots[hole].id = 0;
    s->slots[hole].ref = 0;
    if (s->removed > 4096 && s->removed > s->len / 2) (void)ks_compact(s);
    return 1;
}

/*==========================================================================
 * Byte form
 *==========================================================================*/

uint64_t bkc__keyset_body_size(const bkc_keyset *s)
{
    return s ? KS_HEADER + (uint64_t)s->len : 0;
}

static void ks_header(const bkc_keyset *s, unsigned char h[KS_HEADER])
{
    memcpy(h, KS_MAGIC, 4);
    ks_put32(h + 4, KS_VERSION);
    ks_put64(h + 8, s->seed);
    ks_put64(h + 16, s->count);
    ks_put64(h + 24, (uint64_t)s->len);
    uint64_t hseed = bk_hash_key(h, 32, 0).lo;
    ks_put64(h + 32, bk_hash_key(s->arena ? (const void *)s->arena : (const void *)"", s->len,
                                 hseed).lo);
}

int bkc__keyset_body_range(const bkc_keyset *s, uint64_t from, unsigned char *out, size_t n)
{
    uint64_t total = bkc__keyset_body_size(s);
    if (s == NULL || from > total || n > total - from) return BK_EINVAL;
    if (from < KS_HEADER) {
        unsigned char h[KS_HEADER];
        ks_header(s, h);
        size_t k = (size_t)(KS_HEADER - from) < n ? (size_t)(KS_HEADER - from) : n;
        memcpy(out, h + from, k);
        out += k;
        n -= k;
        from += k;
    }
    if (n > 0) memcpy(out, s->arena + (from - KS_HEADER), n);
    return BK_OK;
}

int bkc__keyset_body_decode(const unsigned char *p, size_t n, bkc_keyset **out)
{
    *out = NULL;
    if (n < KS_HEADER) return BK_ETRUNC;
    if (memcmp(p, KS_MAGIC, 4) != 0) return BK_EMAGIC;
    if (ks_get32(p + 4) != KS_VERSION) return BK_EVERSION;
    uint64_t seed = ks_get64(p + 8), count = ks_get64(p + 16), len = ks_get64(p + 24);
    if (len != n - KS_HEADER) return len > n - KS_HEADER ? BK_ETRUNC : BK_ECORRUPT;
    const unsigned char *rec = p + KS_HEADER;
    if (ks_get64(p + 32) != bk_hash_key(rec, (size_t)len, bk_hash_key(p, 32, 0).lo).lo)
        return BK_ECHECKSUM;
    /* every record is at least 4 bytes: more items than that is a lie */
    if (count > len / 4) return BK_ECORRUPT;
    bkc_keyset *s = ks_new(seed, ks_slots_for(count));
    if (s == NULL) return BK_ENOMEM;
    int rc = BK_ENOMEM;
    /* the records are kept as they are, removed ones included, so that the
     * value encodes to the same bytes again (DEBUG DIGEST, replicas) */
    s->arena = bkc__malloc(len ? (size_t)len : 1);
    if (s->arena == NULL) goto fail;
    if (len > 0) memcpy(s->arena, rec, (size_t)len);
    s->len = s->cap = (size_t)len;
    rc = BK_ECORRUPT;
    for (size_t at = 0; at < len;) {
        if (len - at < 4) goto fail;
        uint32_t word = ks_get32(rec + at);
        size_t ilen = word & KS_MAX_ITEM;
        if (ilen > len - at - 4) goto fail;
        if (word & KS_REMOVED) {
            s->removed += 4 + ilen;
        } else {
            uint64_t id = bk_iblt_key_id(rec + at + 4, ilen, seed);
            if (s->count == count || ks_find(s, id) != NULL) goto fail; /* a repeat */
            ks_place(s->slots, s->mask, s, id, (uint64_t)at + 1);
            s->count++;
        }
        at += 4 + ilen;
    }
    if (s->count != count) goto fail;
    *out = s;
    return BK_OK;
fail:
    bkc__keyset_free(s);
    return rc;
}

/*==========================================================================
 * Commands: helpers
 *==========================================================================*/

#define ERR_CONFLICT "ERR another item of this set has the same 64-bit id (a hash collision): not added"
#define ERR_TOO_SMALL "ERR IBLT too small for the difference: decoding failed, ask for one with twice the cells"
#define ERR_BAD_ID "ERR bad id: ids are 16 hexadecimal digits"
#define ERR_BAD_SEED "ERR bad seed: an integer from 0 to 18446744073709551615"
#define ERR_BAD_CELLS "ERR bad cell count: an integer from 1 to 33554432"
#define ERR_ITEM_LONG "ERR item longer than 2147483647 bytes"

static void reply_hex_id(bkc_ctx *c, uint64_t id)
{
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)id);
    c->reply->vt->bulk(c->reply, hex, 16);
}

static int parse_hex_id(bkc_str s, uint64_t *id)
{
    if (s.len != 16) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < 16; i++) {
        int ch = (unsigned char)s.ptr[i], d;
        if (ch >= '0' && ch <= '9') d = ch - '0';
        else if (ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F') d = ch - 'A' + 10;
        else return 0;
        v = v << 4 | (uint64_t)d;
    }
    *id = v;
    return 1;
}

/* Open key for reading as a set; replies "not found" / WRONGTYPE itself
 * (then returns NULL with *k open, or closed when the host failed: *k
 * NULL). */
static bkc_keyset *open_set(bkc_ctx *c, bkc_str name, bkc_key **k)
{
    bkc_value *v;
    int st = bkc__open(c, name, BKC_OPEN_READ, BKC_KIND_KEYSET, k, &v);
    if (st == BKC__FAILED) {
        *k = NULL;
        return NULL;
    }
    if (st == BKC__MISSING) bkc__err(c, BKC_ERR_NOT_FOUND);
    else if (st == BKC__WRONG) bkc__err(c, BKC_ERR_WRONGTYPE);
    else if (v->keyset == NULL) bkc__err(c, BKC_ERR_WRONGTYPE);
    else return v->keyset;
    return NULL;
}

static void close_key(bkc_ctx *c, bkc_key *k)
{
    if (k != NULL) bkc__close(c, k);
}

/* Open key with mode as a set for a command a missing key suits:
 * bkc__open's result, with BKC__FAILED also after answering WRONGTYPE to
 * another kind (the key closed again). */
static inline int open_set_or_missing(bkc_ctx *c, bkc_str name, bkc_open_mode mode,
                                      bkc_key **k, bkc_value **v)
{
    int st = bkc__open(c, name, mode, BKC_KIND_KEYSET, k, v);
    if (st == BKC__WRONG || (st == BKC__FOUND && (*v)->keyset == NULL)) {
        bkc__err(c, BKC_ERR_WRONGTYPE);
        bkc__close(c, *k);
        return BKC__FAILED;
    }
    return st;
}

/* The end of RS.ADD / RS.REM: when the set changed, tell the host its size
 * did and log the command; then close the key. */
static inline void close_written(bkc_ctx *c, bkc_key *k, int changed, int argc,
                                 const bkc_str *argv)
{
    if (changed) {
        c->host_vt->resized(k);
        bkc__wrote(c, argc, argv);
    }
    bkc__close(c, k);
}

/* An empty set value; NULL after replying when out of memory. */
static bkc_value *new_set_value(bkc_ctx *c, uint64_t seed)
{
    bkc_value *nv = bkc_value_new(BKC_KIND_KEYSET);
    if (nv != NULL) nv->keyset = ks_new(seed, KS_MIN_SLOTS);
    if (nv == NULL || nv->keyset == NULL) {
        bkc_value_free(nv);
        bkc__err(c, BKC_ERR_OOM);
        return NULL;
    }
    return nv;
}

/* The set's strata estimator (NULL after replying when out of memory). */
static bk_strata *build_strata(bkc_ctx *c, const bkc_keyset *s)
{
    bk_strata *st = NULL;
    if (bk_strata_create(&st, s->seed) != BK_OK) {
        bkc__err(c, BKC_ERR_OOM);
        return NULL;
    }
    for (uint64_t i = 0; i <= s->mask; i++)
        if (s->slots[i].ref != 0) bk_strata_insert(st, s->slots[i].id);
    return st;
}

/* The set's IBLT of a shape; a library error code on failure. */
static int build_iblt(const bkc_keyset *s, uint64_t cells, uint32_t hashes, bk_iblt **out)
{
    int rc = bk_iblt_create(out, cells, hashes, s->seed);
    if (rc != BK_OK) return rc;
    for (uint64_t i = 0; i <= s->mask; i++)
        if (s->slots[i].ref != 0) bk_iblt_insert(*out, s->slots[i].id);
    return BK_OK;
}

/*==========================================================================
 * Commands: the set
 *==========================================================================*/

/* RS.RESERVE key [SEED seed] */
void bkc_cmd_rs_reserve(bkc_ctx *c, int argc, const bkc_str *argv)
{
    uint64_t seed = BK_DEFAULT_SEED;
    for (int i = 2; i < argc; i += 2) {
        if (!bkc_streq(argv[i], "SEED")) {
            bkc__err(c, BKC_ERR_UNKNOWN_ARG);
            return;
        }
        if (i + 1 >= argc) {
            bkc__arity_error(c, argv);
            return;
        }
        if (!bkc_parse_u64(argv[i + 1], &seed)) {
            bkc__err(c, ERR_BAD_SEED);
            return;
        }
    }
    bkc_key *k;
    if (bkc__open_new(c, argv[1], BKC_KIND_KEYSET, 1, &k))
        bkc__store_new(c, argc, argv, k, new_set_value(c, seed));
}

/* RS.ADD key item [item ...]: creates the key (default seed) if missing. */
void bkc_cmd_rs_add(bkc_ctx *c, int argc, const bkc_str *argv)
{
    uint64_t bytes = 0, n = (uint64_t)(argc - 2);
    for (int i = 2; i < argc; i++) {
        if (argv[i].len > KS_MAX_ITEM) {
            bkc__err(c, ERR_ITEM_LONG);
            return;
        }
        bytes += argv[i].len;
    }
    bkc_key *k;
    bkc_value *v;
    int st = open_set_or_missing(c, argv[1], BKC_OPEN_WRITE, &k, &v);
    if (st == BKC__FAILED) return;
    int created = 0;
    if (st == BKC__MISSING) {
        bkc_value *nv = new_set_value(c, BK_DEFAULT_SEED);
        if (nv == NULL) goto out;
        if (!bkc__fits(c, bkc_value_bytes(nv) + ks_growth(nv->keyset, n, bytes))) {
            bkc_value_free(nv);
            goto out;
        }
        if (!bkc__store(c, k, nv)) goto out;
        v = c->host_vt->value(k);
        created = 1;
    } else if (!bkc__fits(c, ks_growth(v->keyset, n, bytes))) {
        goto out;
    }
    bkc__array(c, (size_t)n);
    int changed = created;
    for (int i = 2; i < argc; i++) {
        int rc = ks_add(v->keyset, argv[i].ptr, argv[i].len);
        if (rc == BK_ECONFLICT) bkc__err(c, ERR_CONFLICT);
        else if (rc < 0) bkc__lib_error(c, rc);
        else bkc__bool(c, rc);
        if (rc == 1) changed = 1;
    }
    close_written(c, k, changed, argc, argv);
    return;
out:
    bkc__close(c, k);
}

/* RS.REM key item [item ...]: a missing key has nothing to remove. The key
 * stays when its set becomes empty (it keeps its seed). */
void bkc_cmd_rs_rem(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    bkc_value *v;
    int st = open_set_or_missing(c, argv[1], BKC_OPEN_WRITE, &k, &v);
    if (st == BKC__FAILED) return;
    bkc__array(c, (size_t)(argc - 2));
    int changed = 0;
    for (int i = 2; i < argc; i++) {
        int rc = st == BKC__FOUND ? ks_rem(v->keyset, argv[i].ptr, argv[i].len) : 0;
        bkc__bool(c, rc);
        changed |= rc;
    }
    close_written(c, k, changed, argc, argv);
}

/* RS.CARD key: 0 for a missing key. */
void bkc_cmd_rs_card(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    bkc_value *v;
    (void)argc;
    int st = open_set_or_missing(c, argv[1], BKC_OPEN_READ, &k, &v);
    if (st == BKC__FAILED) return;
    bkc__int(c, st == BKC__FOUND ? (long long)v->keyset->count : 0);
    bkc__close(c, k);
}

/* RS.ISMEMBER key item: exact (the item's bytes are compared). A lookup:
 * a missing key, another kind or a load in progress answer 0, as
 * *.EXISTS do. */
void bkc_cmd_rs_ismember(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    bkc_value *v;
    (void)argc;
    int st = bkc__open(c, argv[1], BKC_OPEN_READ, BKC_KIND_KEYSET, &k, &v);
    if (st == BKC__FAILED) return;
    {
        int found = 0;
        if (st == BKC__FOUND && v->keyset != NULL) {
            bkc_keyset *s = v->keyset;
            ks_slot *sl = ks_find(s, bk_iblt_key_id(argv[2].ptr, argv[2].len, s->seed));
            size_t len;
            const unsigned char *p = sl ? ks_item(s, sl, &len) : NULL;
            found = p != NULL && len == argv[2].len &&
                    (len == 0 || memcmp(p, argv[2].ptr, len) == 0);
        }
        bkc__bool(c, found);
    }
    bkc__close(c, k);
}

enum { F_SEED, F_ITEMS, F_SIZE, F_COUNT };
static const bkc__info_field info_fields[F_COUNT] = {
    {"SEED", "Seed"},
    {"ITEMS", "Number of items"},
    {"SIZE", "Size"},
};

static void info_value(bkc_ctx *c, const void *src, int field)
{
    const bkc_value *v = src;
    if (field == F_SEED) {
        /* a 64-bit seed may not fit a signed integer reply: decimal text */
        char text[24];
        int n = snprintf(text, sizeof text, "%llu", (unsigned long long)v->keyset->seed);
        c->reply->vt->bulk(c->reply, text, (size_t)n);
    } else if (field == F_ITEMS) {
        bkc__int(c, (long long)v->keyset->count);
    } else {
        bkc__int(c, (long long)bkc_value_bytes(v));
    }
}

/* RS.INFO key [SEED | ITEMS | SIZE] */
void bkc_cmd_rs_info(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    bkc_value *v = bkc__open_info(c, argc, argv, BKC_KIND_KEYSET, &k);
    if (v == NULL) return;
    if (v->keyset == NULL) bkc__err(c, BKC_ERR_WRONGTYPE);
    else bkc__reply_info(c, argc, argv, info_fields, F_COUNT, info_value, v);
    bkc__close(c, k);
}

/* RS.GETIDS key id [id ...]: the item of each id (16 hex digits), nil for
 * an id the set does not hold (or a missing key). */
void bkc_cmd_rs_getids(bkc_ctx *c, int argc, const bkc_str *argv)
{
    uint64_t id;
    for (int i = 2; i < argc; i++)
        if (!parse_hex_id(argv[i], &id)) {
            bkc__err(c, ERR_BAD_ID);
            return;
        }
    bkc_key *k;
    bkc_value *v;
    int st = open_set_or_missing(c, argv[1], BKC_OPEN_READ, &k, &v);
    if (st == BKC__FAILED) return;
    bkc__array(c, (size_t)(argc - 2));
    for (int i = 2; i < argc; i++) {
        parse_hex_id(argv[i], &id);
        ks_slot *sl = st == BKC__FOUND ? ks_find(v->keyset, id) : NULL;
        if (sl == NULL) {
            c->reply->vt->null(c->reply);
        } else {
            size_t len;
            const unsigned char *p = ks_item(v->keyset, sl, &len);
            c->reply->vt->bulk(c->reply, p, len);
        }
    }
    bkc__close(c, k);
}

/*==========================================================================
 * Commands: the exchange
 *==========================================================================*/

/* RS.STRATA key: the serialized strata estimator of the set's ids. */
void bkc_cmd_rs_strata(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    (void)argc;
    bkc_keyset *s = open_set(c, argv[1], &k);
    if (s != NULL) {
        bk_strata *st = build_strata(c, s);
        if (st != NULL) {
            size_t n = bk_strata_serialized_size(st);
            unsigned char *buf = bkc__malloc(n);
            int rc = buf ? bk_strata_serialize(st, buf, n) : BK_ENOMEM;
            if (rc != BK_OK) bkc__lib_error(c, rc);
            else c->reply->vt->bulk(c->reply, buf, n);
            bkc__free(buf);
            bk_strata_free(st);
        }
    }
    close_key(c, k);
}

static void seed_mismatch(bkc_ctx *c, const char *what, uint64_t theirs, uint64_t ours)
{
    char msg[200];
    snprintf(msg, sizeof msg,
             "ERR seed mismatch: the %s was built with seed %llu, this set has seed %llu",
             what, (unsigned long long)theirs, (unsigned long long)ours);
    bkc__err(c, msg);
}

/* Whether the other side's message (what: "strata estimator", "IBLT")
 * deserialized (rc): 1, or 0 after answering out of memory or
 * "ERR invalid <what>: <why>". */
static int message_ok(bkc_ctx *c, const char *what, int rc)
{
    if (rc == BK_OK) return 1;
    char msg[160];
    if (rc == BK_ENOMEM) snprintf(msg, sizeof msg, "%s", BKC_ERR_OOM);
    else snprintf(msg, sizeof msg, "ERR invalid %s: %s", what, bk_strerror(rc));
    bkc__err(c, msg);
    return 0;
}

/* RS.ESTIMATE key strata: the estimated size of the symmetric difference
 * between this set and the one behind the other side's estimator. */
void bkc_cmd_rs_estimate(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bk_strata *theirs = NULL;
    (void)argc;
    int rc = bk_strata_deserialize(&theirs, argv[2].ptr, argv[2].len);
    if (!message_ok(c, "strata estimator", rc)) return;
    bkc_key *k;
    bkc_keyset *s = open_set(c, argv[1], &k);
    /* the estimator's seed: bytes 24..32 of its wire form (docs/FORMAT.md,
     * "Reconciliation messages"), valid once it deserialized */
    uint64_t their_seed = ks_get64((const unsigned char *)argv[2].ptr + 24);
    if (s != NULL && their_seed != s->seed) {
        seed_mismatch(c, "strata estimator", their_seed, s->seed);
    } else if (s != NULL) {
        bk_strata *ours = build_strata(c, s);
        if (ours != NULL) {
            uint64_t d = 0;
            rc = bk_strata_estimate(ours, theirs, &d);
            if (rc != BK_OK) bkc__lib_error(c, rc);
            else bkc__int(c, d > (uint64_t)INT64_MAX ? INT64_MAX : (long long)d);
            bk_strata_free(ours);
        }
    }
    close_key(c, k);
    bk_strata_free(theirs);
}

/* Bytes an IBLT of cells cells takes in memory (its cells) and on the
 * wire (header, cells, trailer). */
static uint64_t iblt_bytes(uint64_t cells)
{
    return cells * 16 + 40;
}

/* RS.IBLT key cells: the serialized IBLT of the set's ids with `cells`
 * cells (k = 4, the set's seed). */
void bkc_cmd_rs_iblt(bkc_ctx *c, int argc, const bkc_str *argv)
{
    uint64_t cells;
    (void)argc;
    if (!bkc_parse_u64(argv[2], &cells) || cells < 1 || cells > RS_MAX_CELLS) {
        bkc__err(c, ERR_BAD_CELLS);
        return;
    }
    /* the table and its serialized copy */
    if (!bkc__fits(c, 2 * iblt_bytes(cells))) return;
    bkc_key *k;
    bkc_keyset *s = open_set(c, argv[1], &k);
    if (s != NULL) {
        bk_iblt *t = NULL;
        int rc = build_iblt(s, cells, 0, &t);
        if (rc == BK_OK) {
            size_t n = bk_iblt_serialized_size(t);
            unsigned char *buf = bkc__malloc(n);
            rc = buf ? bk_iblt_serialize(t, buf, n) : BK_ENOMEM;
            if (rc == BK_OK) c->reply->vt->bulk(c->reply, buf, n);
            bkc__free(buf);
        }
        if (rc != BK_OK) bkc__lib_error(c, rc);
        bk_iblt_free(t);
    }
    close_key(c, k);
}

/* RS.DIFF key iblt: subtract the other side's IBLT from this set's IBLT of
 * the same shape and peel: [items this set has and the other lacks, ids
 * (16 hex digits) the other has and this set lacks]. */
void bkc_cmd_rs_diff(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bk_iblt *theirs = NULL, *ours = NULL;
    uint64_t *only_a = NULL, *only_b = NULL;
    bkc_key *k = NULL;
    (void)argc;
    if (!message_ok(c, "IBLT", bk_iblt_deserialize(&theirs, argv[2].ptr, argv[2].len))) return;
    uint64_t cells = bk_iblt_cells(theirs);
    if (cells > RS_MAX_CELLS) {
        bkc__err(c, "ERR invalid IBLT: more than 33554432 cells");
        goto done;
    }
    /* our table, and the two id lists of decoding (room cells each) */
    if (!bkc__fits(c, iblt_bytes(cells) + 2 * 8 * cells)) goto done;
    bkc_keyset *s = open_set(c, argv[1], &k);
    if (s == NULL) goto done;
    if (bk_iblt_seed(theirs) != s->seed) {
        seed_mismatch(c, "IBLT", bk_iblt_seed(theirs), s->seed);
        goto done;
    }
    int rc = build_iblt(s, cells, bk_iblt_hashes(theirs), &ours);
    if (rc == BK_OK) rc = bk_iblt_subtract(ours, theirs);
    if (rc != BK_OK) {
        bkc__lib_error(c, rc);
        goto done;
    }
    only_a = bkc__malloc((size_t)cells * sizeof(uint64_t));
    only_b = bkc__malloc((size_t)cells * sizeof(uint64_t));
    if (only_a == NULL || only_b == NULL) {
        bkc__err(c, BKC_ERR_OOM);
        goto done;
    }
    size_t na = 0, nb = 0;
    rc = bk_iblt_decode(ours, only_a, &na, only_b, &nb, (size_t)cells);
    if (rc == BK_EDECODE) {
        bkc__err(c, ERR_TOO_SMALL);
        goto done;
    }
    if (rc != BK_OK) {
        bkc__lib_error(c, rc);
        goto done;
    }
    /* A false "pure" cell (a 32-bit check collision) or a damaged table
     * shows as an id on the wrong side: answer as for a failed decoding,
     * so the caller retries with another table. */
    for (size_t i = 0; i < na; i++)
        if (ks_find(s, only_a[i]) == NULL) {
            bkc__err(c, ERR_TOO_SMALL);
            goto done;
        }
    for (size_t i = 0; i < nb; i++)
        if (ks_find(s, only_b[i]) != NULL) {
            bkc__err(c, ERR_TOO_SMALL);
            goto done;
        }
    bkc__array(c, 2);
    bkc__array(c, na);
    for (size_t i = 0; i < na; i++) {
        size_t len;
        const unsigned char *p = ks_item(s, ks_find(s, only_a[i]), &len);
        c->reply->vt->bulk(c->reply, p, len);
    }
    bkc__array(c, nb);
    for (size_t i = 0; i < nb; i++) reply_hex_id(c, only_b[i]);
done:
    bkc__free(only_a);
    bkc__free(only_b);
    bk_iblt_free(ours);
    bk_iblt_free(theirs);
    close_key(c, k);
}

/* RS.SCANDUMP / RS.LOADCHUNK: the value's container in chunks, as for
 * every other kind (value.c). */
void bkc_cmd_rs_scandump(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__scandump(c, argc, argv, BKC_KIND_KEYSET);
}

void bkc_cmd_rs_loadchunk(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__loadchunk(c, argc, argv, BKC_KIND_KEYSET);
}

