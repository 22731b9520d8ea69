/*
 * cmd_counting.c - CBF.*: the counting Bloom filter (our addition).
 *
 * A CBF key holds one bk_counting filter: cache-blocked 4-bit (or 8-bit)
 * counters, so items can be removed. It never grows: past its capacity
 * the false-positive rate rises, nothing fails. An add on a missing key
 * creates it with BF's defaults (capacity 100, error 0.01, 4-bit counters).
 * CBF.RESERVE ... TYPE t makes one of the other counting kinds instead
 * (issue 15: dleft, varcount, hier, hybrid, morris), used through the
 * same commands; morris cannot delete (CBF.DEL answers its error).
 *
 * Locking: counting adds and removes are lock-free (compare-and-swap per
 * word) and never change the filter's size, so ADD and DEL open existing
 * keys with BKC_OPEN_ADD; creating one reopens the key WRITE. The other
 * kinds are not lock-free: their ADD and DEL reopen the key WRITE.
 *
 * HAZARD (docs/COMMANDS.md): CBF.DEL of an item never added, but reported
 * present (a false positive), decrements other items' counters and can
 * make them absent. Delete only what was added.
 */
#include "cmd_internal.h"

#define CBF_DEFAULT_CAPACITY 100
#define CBF_DEFAULT_ERROR 0.01
#define ERR_COUNTER_BITS "ERR counter bits must be 4 or 8"
#define ERR_BITS_TYPE "ERR COUNTERBITS applies to TYPE counting or dleft"
#define ERR_TYPE "ERR unknown TYPE (counting, dleft, varcount, hier, hybrid, morris)"
#define ERR_AUTOCLEAR_TYPE "ERR AUTOCLEAR applies to TYPE counting"

/* TYPE names: the library's family names. */
static const bk_family cbf_types[] = {
    BK_FAMILY_COUNTING, BK_FAMILY_DLEFT, BK_FAMILY_VARCOUNT,
    BK_FAMILY_HIER,     BK_FAMILY_HYBRID, BK_FAMILY_MORRIS,
};

static int parse_type(bkc_str s, bk_family *out)
{
    for (size_t i = 0; i < sizeof(cbf_types) / sizeof(cbf_types[0]); i++)
        if (bkc_streq(s, bk_family_name(cbf_types[i]))) {
            *out = cbf_types[i];
            return 1;
        }
    return 0;
}

/* Table bytes of a filter of this kind, from the family's sizing, or an
 * error code. */
static int table_bytes(bk_family family, uint64_t capacity, double error,
                       uint32_t bits, uint64_t *bytes)
{
    uint64_t blocks = 0, per_block = 64;
    uint32_t r = 0, lines = 0;
    int rc;
    switch (family) {
    case BK_FAMILY_DLEFT:
        rc = bk_dleft_optimal(capacity, error, bits, &blocks, &r);
        per_block = (uint64_t)BK_DLEFT_TABLES * BK_DLEFT_CELLS * (r + (bits ? bits : 2)) / 8 + 1;
        break;
    case BK_FAMILY_VARCOUNT: rc = bk_varcount_optimal(capacity, error, &blocks, NULL, NULL); break;
    case BK_FAMILY_HIER: rc = bk_hier_optimal(capacity, error, &blocks, NULL); per_block = 320; break;
    case BK_FAMILY_HYBRID:
        rc = bk_hybrid_optimal(capacity, error, &blocks, NULL, &lines);
        per_block = 64u * (1u + lines);
        break;
    case BK_FAMILY_MORRIS: rc = bk_morris_optimal(capacity, error, &blocks, NULL); break;
    default: rc = bk_counting_optimal(capacity, error, bits, &blocks, NULL); break;
    }
    if (rc == BK_OK && blocks > UINT64_MAX / per_block) rc = BK_ESIZE;
    if (rc == BK_OK) *bytes = blocks * per_block;
    return rc;
}


/* A new counting filter of the family (wrapped in an auto-clear filter
 * when ac asks: one more table with ROTATE), after checking it fits.
 * Replies on failure. */
static bkc_value *cbf_create(bkc_ctx *c, bk_family family, uint64_t capacity,
                             double error, uint32_t bits, const bkc__autoclear_opts *ac)
{
    uint64_t bytes = 0;
    int rc = table_bytes(family, capacity, error, bits, &bytes);
    if (rc == BK_ESIZE || (rc == BK_OK && bytes > UINT64_MAX - 1024)) {
        bkc__err(c, BKC_ERR_TOO_LARGE);
        return NULL;
    }
    if (rc != BK_OK) {
        bkc__lib_error(c, rc);
        return NULL;
    }
    if (ac->rotate && bytes > UINT64_MAX / 2 - 1024) {
        bkc__err(c, BKC_ERR_TOO_LARGE);
        return NULL;
    }
    if (!bkc__fits(c, (ac->rotate ? 2 * bytes : bytes) + 1024)) return NULL;
    bk_filter_config cfg;
    bk_filter_config_init(&cfg);
    cfg.family = family;
    cfg.capacity = capacity;
    cfg.fpr = error;
    cfg.counter_bits = bits;
    cfg.seed = BK_DEFAULT_SEED;
    bk_filter *f = NULL;
    rc = bk_filter_create(&f, &cfg);
    if (rc != BK_OK) {
        bkc__lib_error(c, rc);
        return NULL;
    }
    f = bkc__autoclear_wrap(c, f, ac);
    return f ? bkc__value_of(c, BKC_KIND_COUNTING, f) : NULL;
}

void bkc_cmd_cbf_reserve(bkc_ctx *c, int argc, const bkc_str *argv)
{
    double error;
    uint64_t capacity;
    uint32_t bits = 0;
    long long bits_arg = 0;
    bk_family family = BK_FAMILY_COUNTING;
    bkc__autoclear_opts ac = {0, 0};
    if (!bkc__arg_error_rate(c, argv[2], &error)) return;
    if (!bkc__arg_capacity(c, argv[3], &capacity)) return;
    for (int i = 4; i < argc; i++) {
        int got = bkc__parse_autoclear(c, argc, argv, &i, &ac);
        if (got < 0) return;
        if (got > 0) continue;
        int is_bits = bkc_streq(argv[i], "COUNTERBITS");
        if (!is_bits && !bkc_streq(argv[i], "TYPE")) {
            bkc__err(c, BKC_ERR_UNKNOWN_ARG);
            return;
        }
        if (i + 1 >= argc) {
            bkc__arity_error(c, argv);
            return;
        }
        if (!is_bits) {
            if (!parse_type(argv[++i], &family)) {
                bkc__err(c, ERR_TYPE);
                return;
            }
        } else if (!bkc_parse_ll(argv[++i], &bits_arg) || bits_arg < 1 || bits_arg > 8) {
            bkc__err(c, ERR_COUNTER_BITS);
            return;
        }
    }
    /* the width is checked once the type is known (TYPE may come later) */
    if (bits_arg != 0) {
        if (family == BK_FAMILY_COUNTING && bits_arg != 4 && bits_arg != 8) {
            bkc__err(c, ERR_COUNTER_BITS);
            return;
        }
        if (family != BK_FAMILY_COUNTING && family != BK_FAMILY_DLEFT) {
            bkc__err(c, ERR_BITS_TYPE);
            return;
        }
        bits = (uint32_t)bits_arg;
    } else if (family == BK_FAMILY_COUNTING) {
        bits = BK_COUNTING_DEFAULT_COUNTER_BITS;
    }
    if (!bkc__autoclear_valid(c, &ac)) return;
    if (ac.ratio != 0 && family != BK_FAMILY_COUNTING) {
        bkc__err(c, ERR_AUTOCLEAR_TYPE);
        return;
    }
    bkc_key *k;
    if (bkc__open_new(c, argv[1], BKC_KIND_COUNTING, 0, &k))
        bkc__store_new(c, argc, argv, k, cbf_create(c, family, capacity, error, bits, &ac));
}

/* Whether the key's filter may be updated under a shared (ADD) open: only
 * the lock-free counting family. */
static int shared_update(const bkc_value *v)
{
    return bk_filter_family(v->filters[0]) == BK_FAMILY_COUNTING;
}

/* Open for adds: ADD mode on an existing filter; a missing one is created
 * under WRITE. NULL: replied, closed. */
static bkc_value *open_for_add(bkc_ctx *c, bkc_str name, bkc_key **k, int *created)
{
    bkc_value *v;
    *created = 0;
    int st = bkc__open(c, name, BKC_OPEN_ADD, BKC_KIND_COUNTING, k, &v);
    if (st == BKC__FAILED) return NULL;
    if (st == BKC__MISSING) {
        bkc__close(c, *k);
        st = bkc__open(c, name, BKC_OPEN_WRITE, BKC_KIND_COUNTING, k, &v);
        if (st == BKC__FAILED) return NULL;
        if (st == BKC__MISSING) {
            const bkc__autoclear_opts none = {0, 0};
            bkc_value *nv = cbf_create(c, BK_FAMILY_COUNTING, CBF_DEFAULT_CAPACITY,
                                       CBF_DEFAULT_ERROR, BK_COUNTING_DEFAULT_COUNTER_BITS, &none);
            if (nv == NULL || !bkc__store(c, *k, nv)) goto fail;
            *created = 1;
            return c->host_vt->value(*k);
        }
    }
    if (st == BKC__FOUND && !shared_update(v)) { /* not lock-free: exclusive */
        bkc__close(c, *k);
        st = bkc__open(c, name, BKC_OPEN_WRITE, BKC_KIND_COUNTING, k, &v);
        if (st == BKC__FAILED) return NULL;
        if (st == BKC__MISSING) {
            bkc__err(c, BKC_ERR_NOT_FOUND); /* deleted between the two opens */
            goto fail;
        }
    }
    if (st == BKC__FOUND) return v;
    bkc__err(c, BKC_ERR_WRONGTYPE);
fail:
    bkc__close(c, *k);
    return NULL;
}

static void add_items(bkc_ctx *c, int argc, const bkc_str *argv, int array)
{
    bkc_key *k;
    int created, changed = 0;
    bkc_value *v = open_for_add(c, argv[1], &k, &created);
    if (v == NULL) return;
    if (array) bkc__array(c, (size_t)(argc - 2));
    for (int i = 2; i < argc; i++) {
        int rc = bk_filter_add(v->filters[0], argv[i].ptr, argv[i].len);
        if (rc < 0) {
            bkc__lib_error(c, rc); /* not expected: counters saturate */
        } else {
            bkc__int(c, rc);
            changed = 1; /* counters always move */
        }
    }
    if (created || changed) bkc__wrote(c, argc, argv);
    bkc__close(c, k);
}

void bkc_cmd_cbf_add(bkc_ctx *c, int argc, const bkc_str *argv)
{
    add_items(c, argc, argv, 0);
}

void bkc_cmd_cbf_madd(bkc_ctx *c, int argc, const bkc_str *argv)
{
    add_items(c, argc, argv, 1);
}

void bkc_cmd_cbf_del(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    bkc_value *v;
    int st = bkc__open(c, argv[1], BKC_OPEN_ADD, BKC_KIND_COUNTING, &k, &v);
    if (st == BKC__FAILED) return;
    if (st == BKC__FOUND && !shared_update(v)) { /* not lock-free: exclusive */
        bkc__close(c, k);
        st = bkc__open(c, argv[1], BKC_OPEN_WRITE, BKC_KIND_COUNTING, &k, &v);
        if (st == BKC__FAILED) return;
    }
    if (st == BKC__MISSING) {
        bkc__err(c, BKC_ERR_NOT_FOUND);
    } else if (st == BKC__WRONG) {
        bkc__err(c, BKC_ERR_WRONGTYPE);
    } else {
        int rc = bk_filter_remove(v->filters[0], argv[2].ptr, argv[2].len);
        if (rc == BK_OK) {
            bkc__int(c, 1);
            bkc__wrote(c, argc, argv);
        } else if (rc == BK_ENOTFOUND) {
            bkc__int(c, 0);
        } else {
            bkc__lib_error(c, rc);
        }
    }
    bkc__close(c, k);
}

void bkc_cmd_cbf_exists(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    int st;
    (void)argc;
    bkc_value *v = bkc__open_lookup(c, argv[1], BKC_KIND_COUNTING, &k, &st);
    if (st == BKC__FAILED) return;
    bkc__int(c, v ? bk_filter_contains(v->filters[0], argv[2].ptr, argv[2].len) == 1 : 0);
    bkc__close(c, k);
}

void bkc_cmd_cbf_mexists(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__cmd_mexists(c, argc, argv, BKC_KIND_COUNTING, 0);
}

void bkc_cmd_cbf_count(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__cmd_count(c, argc, argv, BKC_KIND_COUNTING);
}

enum { F_CAPACITY, F_SIZE, F_ITEMS, F_ERROR, F_COUNT };
/* the four, then an auto-clear filter's own (command.c) */
static const bkc__info_field info_fields[F_COUNT + BKC__AUTOCLEAR_FIELDS] = {
    {"CAPACITY", "Capacity"},
    {"SIZE", "Size"},
    {"ITEMS", "Number of items inserted"},
    {"ERROR", "Error rate"},
    {"AUTOCLEAR", "Auto clear ratio"},
    {"AUTOCLEARMODE", "Auto clear mode"},
    {"CLEARS", "Clears"},
};

typedef struct cbf_info {
    bk_filter_info in;
    const bk_autoclear *a;
} cbf_info;

static void info_value(bkc_ctx *c, const void *src, int field)
{
    const cbf_info *i = src;
    switch (field) {
    case F_CAPACITY: bkc__int(c, (long long)i->in.capacity); break;
    case F_SIZE: bkc__int(c, (long long)i->in.bytes); break;
    case F_ITEMS: bkc__int(c, (long long)i->in.items); break;
    case F_ERROR: c->reply->vt->dbl(c->reply, i->in.target_fpr); break;
    default: bkc__autoclear_info_value(c, i->a, field - F_COUNT); break;
    }
}

void bkc_cmd_cbf_info(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    bkc_value *v;
    cbf_info info;
    if ((v = bkc__open_info(c, argc, argv, BKC_KIND_COUNTING, &k)) == NULL) return;
    info.a = bk_filter_as_autoclear(v->filters[0]);
    if (bk_filter_get_summary(v->filters[0], &info.in) != BK_OK) {   /* O(1) */
        bkc__lib_error(c, BK_EINVAL);
    } else {
        bkc__reply_info(c, argc, argv, info_fields,
                        info.a ? F_COUNT + BKC__AUTOCLEAR_FIELDS : F_COUNT, info_value, &info);
    }
    bkc__close(c, k);
}

void bkc_cmd_cbf_scandump(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__scandump(c, argc, argv, BKC_KIND_COUNTING);
}

void bkc_cmd_cbf_loadchunk(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__loadchunk(c, argc, argv, BKC_KIND_COUNTING);
}
