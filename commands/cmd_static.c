/*
 * cmd_static.c - SF.*: static filters and static maps, read-only keys.
 *
 * A static key ("bkstatic-", BKC_KIND_STATIC) holds one bk_filter of family
 * BK_FAMILY_STATIC (a binary fuse filter: "is x in the set?", no false
 * negatives, false positives at 2^-w for w-bit fingerprints), of family
 * BK_FAMILY_BUMPED (the same answers from one cache line per lookup:
 * `bloomkit create --type bumped`, or SF.BUILD ... BUMPED) or
 * BK_FAMILY_MAP (a Bloomier static map: x -> an r-bit value, exact for
 * members; a non-member is reported absent except with probability 2^-c,
 * c check bits). Both are built once from all their keys and never change:
 * there is no SF.ADD. They arrive whole:
 *
 *   - from a file made by the CLI (`bloomkit create --type static`,
 *     `bloomkit build-map`), sent by `bloomkit push` as SF.LOADCHUNK chunks
 *     of the value container (value.c; the CLI wraps the file image in the
 *     container's 64-byte prefix, so LOADCHUNK takes one format only);
 *   - from SF.SCANDUMP of another key, like every kind;
 *   - built here from the arguments by SF.BUILD / SF.BUILDMAP (small sets,
 *     users without the CLI). Construction is deterministic (fixed seed),
 *     so replaying the logged command rebuilds the same structure.
 *
 * Lookups: SF.EXISTS / SF.MEXISTS (on a map: the map's membership check),
 * SF.GET / SF.MGET (maps only: the value, or nil when certainly absent).
 * As for every family, EXISTS on a missing key or another kind answers 0;
 * GET on a missing key answers nil, on another kind WRONGTYPE.
 *
 * Locking: lookups READ; LOADCHUNK and the builds WRITE (they replace the
 * whole value; the build itself runs before the key is opened).
 */
#include <stdio.h>  /* snprintf */
#include <string.h>

#include "cmd_internal.h"

#define ERR_NOT_MAP "ERR not a static map: SF.GET needs a map (SF.BUILDMAP, bloomkit build-map)"
#define ERR_BAD_BITS "ERR BITS must be 8, 12 or 16"
#define ERR_BUMPED_BITS "ERR BUMPED filters take BITS 8 or 16"
#define ERR_BAD_VALUEBITS "ERR VALUEBITS must be between 1 and 32"
#define ERR_BAD_CHECKBITS "ERR CHECKBITS must be between 0 and 24"
#define ERR_PAIRS "ERR ITEMS needs item value pairs"
#define ERR_BAD_VALUE "ERR bad value: an integer between 0 and 4294967295"
#define ERR_ERROR_RANGE "ERR a static filter reaches 2^-16 = 0.0015% at best"

/* Default check bits of SF.BUILDMAP: 7, a non-member passes with 2^-7 =
 * 0.78% (what `bloomkit build-map` chooses for its default 1%). */
#define DEFAULT_CHECK_BITS 7

/*==========================================================================
 * Lookups
 *==========================================================================*/

/* The filter of an open static key, or NULL (missing, another kind). */
static const bk_filter *open_lookup(bkc_ctx *c, bkc_str name, bkc_key **k, int *st)
{
    bkc_value *v = bkc__open_lookup(c, name, BKC_KIND_STATIC, k, st);
    return v ? v->filters[0] : NULL;
}

void bkc_cmd_sf_exists(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    int st;
    (void)argc;
    const bk_filter *f = open_lookup(c, argv[1], &k, &st);
    if (st == BKC__FAILED) return;
    bkc__bool(c, f ? bk_filter_contains(f, argv[2].ptr, argv[2].len) == 1 : 0);
    bkc__close(c, k);
}

void bkc_cmd_sf_mexists(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__cmd_mexists(c, argc, argv, BKC_KIND_STATIC, 1);
}

/* SF.GET (array 0) and SF.MGET (array 1): the values of argv[2..]. */
static void get_values(bkc_ctx *c, int argc, const bkc_str *argv, int array)
{
    bkc_key *k;
    int st;
    const bk_filter *f = open_lookup(c, argv[1], &k, &st);
    if (st == BKC__FAILED) return;
    const bk_map *m = NULL;
    if (st == BKC__WRONG) {
        bkc__err(c, BKC_ERR_WRONGTYPE);
        goto out;
    }
    if (f != NULL && (m = bk_filter_as_map((bk_filter *)f)) == NULL) {
        bkc__err(c, ERR_NOT_MAP);
        goto out;
    }
    if (array) bkc__array(c, (size_t)(argc - 2));
    for (int i = 2; i < argc; i++) {
        uint32_t value = 0;
        if (m != NULL && bk_map_get(m, argv[i].ptr, argv[i].len, &value) == 1)
            bkc__int(c, (long long)value);
        else
            c->reply->vt->null(c->reply);
    }
out:
    bkc__close(c, k);
}

void bkc_cmd_sf_get(bkc_ctx *c, int argc, const bkc_str *argv)
{
    get_values(c, argc, argv, 0);
}

void bkc_cmd_sf_mget(bkc_ctx *c, int argc, const bkc_str *argv)
{
    get_values(c, argc, argv, 1);
}

/*==========================================================================
 * SF.INFO
 *==========================================================================*/

/* What SF.INFO reports, gathered from either family's statistics. */
typedef struct static_info {
    const char *type;
    uint64_t bytes, items;
    double bits_per_item, error;
    uint32_t value_bits, check_bits;
} static_info;

enum { F_TYPE, F_SIZE, F_ITEMS, F_BITS, F_ERROR, F_VALUEBITS, F_CHECKBITS, F_COUNT };
/* a static filter has the first F_VALUEBITS fields, a map all of them */
static const bkc__info_field info_fields[F_COUNT] = {
    {"TYPE", "Type"},
    {"SIZE", "Size"},
    {"ITEMS", "Number of items"},
    {"BITS", "Bits per item"},
    {"ERROR", "Error rate"},
    {"VALUEBITS", "Value bits"},
    {"CHECKBITS", "Check bits"},
};

static void info_value(bkc_ctx *c, const void *src, int field)
{
    const static_info *in = src;
    switch (field) {
    case F_TYPE: bkc__simple(c, in->type); break;
    case F_SIZE: bkc__int(c, (long long)in->bytes); break;
    case F_ITEMS: bkc__int(c, (long long)in->items); break;
    case F_BITS: c->reply->vt->dbl(c->reply, in->bits_per_item); break;
    case F_ERROR: c->reply->vt->dbl(c->reply, in->error); break;
    case F_VALUEBITS: bkc__int(c, (long long)in->value_bits); break;
    default: bkc__int(c, (long long)in->check_bits); break;
    }
}

void bkc_cmd_sf_info(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    bkc_value *v = bkc__open_info(c, argc, argv, BKC_KIND_STATIC, &k);
    if (v == NULL) return;
    const bk_filter *f = v->filters[0];
    static_info in = {0};
    int nfields = F_VALUEBITS, rc;
    const bk_map *m = bk_filter_as_map((bk_filter *)f);
    const bk_static *s = bk_filter_as_static((bk_filter *)f);
    const bk_bumped *b = bk_filter_as_bumped((bk_filter *)f);
    if (m != NULL) {
        bk_map_stats ms;
        rc = bk_map_get_stats(m, &ms);
        in = (static_info){"static map", ms.bytes, ms.items, ms.bits_per_key, ms.fpr,
                           ms.value_bits, ms.check_bits};
        nfields = F_COUNT;
    } else if (s != NULL) {
        bk_static_stats ss;
        rc = bk_static_get_stats(s, &ss);
        in = (static_info){"static filter", ss.bytes, ss.items, ss.bits_per_key, ss.fpr,
                           0, 0};
    } else if (b != NULL) {
        bk_bumped_stats bs;
        rc = bk_bumped_get_stats(b, &bs);
        in = (static_info){"static filter (bumped)", bs.bytes, bs.items, bs.bits_per_key,
                           bs.fpr, 0, 0};
    } else {
        rc = BK_EFAMILY;
    }
    if (rc != BK_OK) bkc__lib_error(c, rc);
    else bkc__reply_info(c, argc, argv, info_fields, nfields, info_value, &in);
    bkc__close(c, k);
}

/*==========================================================================
 * SF.SCANDUMP / SF.LOADCHUNK
 *==========================================================================*/

void bkc_cmd_sf_scandump(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__scandump(c, argc, argv, BKC_KIND_STATIC);
}

void bkc_cmd_sf_loadchunk(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc__loadchunk(c, argc, argv, BKC_KIND_STATIC);
}

/*==========================================================================
 * SF.BUILD / SF.BUILDMAP
 *==========================================================================*/

/* The parsed options of a build. */
typedef struct build_args {
    int replace;
    int bumped;            /* SF.BUILD BUMPED: one line per lookup */
    int items_at;          /* index of the first item in argv */
    uint32_t bits;         /* SF.BUILD: fingerprint bits */
    int value_bits;        /* SF.BUILDMAP: -1 = from the largest value */
    uint32_t check_bits;
} build_args;

/* Parse [ERROR p | BITS b] [BUMPED] / [VALUEBITS r] [CHECKBITS c],
 * [REPLACE] and ITEMS. 1, or 0 after replying. */
static int parse_build(bkc_ctx *c, int argc, const bkc_str *argv, int map, build_args *a)
{
    int have_error = 0, have_bits = 0;
    *a = (build_args){0, 0, 0, 8, -1, DEFAULT_CHECK_BITS};
    for (int i = 2; i < argc; i++) {
        if (bkc_streq(argv[i], "ITEMS")) {
            a->items_at = i + 1;
            break;
        }
        if (bkc_streq(argv[i], "REPLACE")) {
            a->replace = 1;
            continue;
        }
        if (!map && bkc_streq(argv[i], "BUMPED")) {
            a->bumped = 1;
            continue;
        }
        int takes = (!map && (bkc_streq(argv[i], "ERROR") || bkc_streq(argv[i], "BITS"))) ||
                    (map && (bkc_streq(argv[i], "VALUEBITS") || bkc_streq(argv[i], "CHECKBITS")));
        if (!takes) {
            bkc__err(c, BKC_ERR_UNKNOWN_ARG);
            return 0;
        }
        if (i + 1 >= argc) {
            bkc__arity_error(c, argv);
            return 0;
        }
        bkc_str opt = argv[i++];
        long long n;
        if (bkc_streq(opt, "ERROR")) {
            double p;
            if (!bkc__arg_error_rate(c, argv[i], &p)) return 0;
            /* the fewest fingerprint bits whose rate 2^-w is at most p */
            if (p >= 1.0 / 256) a->bits = 8;
            else if (p >= 1.0 / 4096) a->bits = 12;
            else if (p >= 1.0 / 65536) a->bits = 16;
            else {
                bkc__err(c, ERR_ERROR_RANGE);
                return 0;
            }
            have_error = 1;
        } else if (bkc_streq(opt, "BITS")) {
            if (!bkc_parse_ll(argv[i], &n) || (n != 8 && n != 12 && n != 16)) {
                bkc__err(c, ERR_BAD_BITS);
                return 0;
            }
            a->bits = (uint32_t)n;
            have_bits = 1;
        } else if (bkc_streq(opt, "VALUEBITS")) {
            if (!bkc_parse_ll(argv[i], &n) || n < 1 || n > BK_MAP_MAX_VALUE_BITS) {
                bkc__err(c, ERR_BAD_VALUEBITS);
                return 0;
            }
            a->value_bits = (int)n;
        } else {
            if (!bkc_parse_ll(argv[i], &n) || n < 0 || n > BK_MAP_MAX_CHECK_BITS) {
                bkc__err(c, ERR_BAD_CHECKBITS);
                return 0;
            }
            a->check_bits = (uint32_t)n;
        }
    }
    if (have_error && have_bits) {
        bkc__err(c, "ERR give ERROR or BITS, not both");
        return 0;
    }
    if (a->bumped && a->bits == 12) {
        if (have_bits) {
            bkc__err(c, ERR_BUMPED_BITS);
            return 0;
        }
        a->bits = 16; /* ERROR between 2^-12 and 2^-8: the next width it has */
    }
    if (a->items_at == 0 || a->items_at >= argc) {
        bkc__arity_error(c, argv);
        return 0;
    }
    if (map && (argc - a->items_at) % 2 != 0) {
        bkc__err(c, ERR_PAIRS);
        return 0;
    }
    return 1;
}

/* Up to 64 bytes of an item for an error text, non-printable bytes as '?'. */
static void item_text(bkc_str s, char *out, size_t cap)
{
    size_t n = s.len < 64 ? s.len : 64, at = 0;
    for (size_t i = 0; i < n && at + 1 < cap; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        out[at++] = (ch >= 32 && ch < 127) ? (char)ch : '?';
    }
    if (s.len > 64 && at + 4 < cap) {
        memcpy(out + at, "...", 3);
        at += 3;
    }
    out[at] = '\0';
}

/* Store the built filter f under argv[1] (existing key: refused unless
 * REPLACE, another kind: WRONGTYPE), reply and log. Takes f. */
static void store_built(bkc_ctx *c, int argc, const bkc_str *argv, const build_args *a,
                        bk_filter *f)
{
    bkc_key *k;
    bkc_value *v;
    int st = bkc__open(c, argv[1], BKC_OPEN_WRITE, BKC_KIND_STATIC, &k, &v);
    if (st == BKC__FAILED) {
        bk_filter_free(f);
        return;
    }
    if (st == BKC__WRONG) {
        bkc__err(c, BKC_ERR_WRONGTYPE);
        goto out;
    }
    if (st == BKC__FOUND && !a->replace) {
        bkc__err(c, BKC_ERR_ITEM_EXISTS);
        goto out;
    }
    bkc_value *nv = bkc__value_of(c, BKC_KIND_STATIC, f);
    f = NULL; /* the value's now, or freed */
    if (nv == NULL || !bkc__store(c, k, nv)) goto out;
    bkc__ok(c);
    bkc__wrote(c, argc, argv);
out:
    bk_filter_free(f);
    bkc__close(c, k);
}

/* Bytes a build of n keys takes: the library's temporary memory, the
 * argument pointer arrays, and the result (at most 1.25 x n x bits plus
 * a constant; the exact size is known only once built). */
static uint64_t build_bytes(uint64_t temp, uint64_t n, uint32_t bits_per_cell)
{
    return temp + n * (sizeof(void *) + sizeof(size_t) + sizeof(uint32_t)) +
           n * bits_per_cell * 5 / 32 + 4096;
}

void bkc_cmd_sf_build(bkc_ctx *c, int argc, const bkc_str *argv)
{
    build_args a;
    if (!parse_build(c, argc, argv, 0, &a)) return;
    uint64_t n = (uint64_t)(argc - a.items_at);
    uint64_t temp = a.bumped ? bk_bumped_build_memory(n) : bk_static_build_memory(n);
    if (!bkc__fits(c, build_bytes(temp, n, a.bits))) return;
    const void **keys = bkc__malloc(n * sizeof(*keys));
    size_t *lens = bkc__malloc(n * sizeof(*lens));
    bk_filter *f = NULL;
    int rc = BK_ENOMEM;
    if (keys != NULL && lens != NULL) {
        for (uint64_t i = 0; i < n; i++) {
            keys[i] = argv[a.items_at + i].ptr;
            lens[i] = argv[a.items_at + i].len;
        }
        if (a.bumped) {
            bk_bumped *b = NULL;
            rc = bk_bumped_build(&b, keys, lens, n, a.bits, BK_DEFAULT_SEED);
            f = bk_bumped_as_filter(b);
        } else {
            bk_static *s = NULL;
            rc = bk_static_build(&s, keys, lens, n, a.bits, BK_DEFAULT_SEED);
            f = bk_static_as_filter(s);
        }
    }
    bkc__free(keys);
    bkc__free(lens);
    if (rc != BK_OK) {
        bkc__lib_error(c, rc);
        return;
    }
    store_built(c, argc, argv, &a, f);
}

void bkc_cmd_sf_buildmap(bkc_ctx *c, int argc, const bkc_str *argv)
{
    build_args a;
    char msg[200], item[80];
    if (!parse_build(c, argc, argv, 1, &a)) return;
    uint64_t n = (uint64_t)(argc - a.items_at) / 2;
    /* values first: a bad one is refused before anything is allocated */
    uint32_t largest = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t x;
        if (!bkc_parse_u64(argv[a.items_at + 2 * i + 1], &x) || x > UINT32_MAX) {
            bkc__err(c, ERR_BAD_VALUE);
            return;
        }
        if (x > largest) largest = (uint32_t)x;
    }
    uint32_t value_bits = 1;
    if (a.value_bits > 0) {
        value_bits = (uint32_t)a.value_bits;
    } else {
        while (value_bits < 32 && (largest >> value_bits) != 0) value_bits++;
    }
    if (!bkc__fits(c, build_bytes(bk_map_build_memory(n), n, value_bits + a.check_bits)))
        return;
    const void **keys = bkc__malloc(n * sizeof(*keys));
    size_t *lens = bkc__malloc(n * sizeof(*lens));
    uint32_t *values = bkc__malloc(n * sizeof(*values));
    bk_map *m = NULL;
    uint64_t at = UINT64_MAX;
    int rc = BK_ENOMEM;
    if (keys != NULL && lens != NULL && values != NULL) {
        for (uint64_t i = 0; i < n; i++) {
            uint64_t x = 0;
            keys[i] = argv[a.items_at + 2 * i].ptr;
            lens[i] = argv[a.items_at + 2 * i].len;
            bkc_parse_u64(argv[a.items_at + 2 * i + 1], &x);
            values[i] = (uint32_t)x;
        }
        rc = bk_map_build(&m, keys, lens, values, n, value_bits, a.check_bits,
                          BK_DEFAULT_SEED, &at);
    }
    if (rc == BK_ECONFLICT && at < n) {
        item_text(argv[a.items_at + 2 * at], item, sizeof(item));
        snprintf(msg, sizeof(msg), "ERR item '%s' is given two different values", item);
        bkc__err(c, msg);
    } else if (rc == BK_EPARAM && at < n) {
        item_text(argv[a.items_at + 2 * at], item, sizeof(item));
        snprintf(msg, sizeof(msg), "ERR the value %u of item '%s' does not fit in %u bits",
                 values[at], item, value_bits);
        bkc__err(c, msg);
    } else if (rc != BK_OK) {
        bkc__lib_error(c, rc);
    }
    bkc__free(keys);
    bkc__free(lens);
    bkc__free(values);
    if (rc != BK_OK) return;
    store_built(c, argc, argv, &a, bk_map_as_filter(m));
}
