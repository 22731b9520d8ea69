/*
 * cmd_counting.c - CBF.*: the counting Bloom filter (our addition).
 *
 * A CBF key holds one bk_counting filter: cache-blocked 4-bit (or 8-bit)
 * counters, so items can be removed. It never grows: past its capacity
 * the false-positive rate rises, nothing fails. An add on a missing key
 * creates it with BF's defaults (capacity 100, error 0.01, 4-bit counters).
 *
 * Locking: counting adds and removes are lock-free (compare-and-swap per
 * word) and never change the filter's size, so ADD and DEL open existing
 * keys with BKC_OPEN_ADD; creating one reopens the key WRITE.
 *
 * HAZARD (docs/COMMANDS.md): CBF.DEL of an item never added, but reported
 * present (a false positive), decrements other items' counters and can
 * make them absent. Delete only what was added.
 */
#include "cmd_internal.h"

#define CBF_DEFAULT_CAPACITY 100
#define CBF_DEFAULT_ERROR 0.01
#define ERR_COUNTER_BITS "ERR counter bits must be 4 or 8"

static int store(bkc_ctx *c, bkc_key *k, bkc_value *v)
{
    int rc = c->host_vt->set(k, v);
    if (rc == BK_OK) return 1;
    bkc__err(c, rc == BK_ELIMIT ? BKC_ERR_MAXMEMORY : BKC_ERR_OOM);
    return 0;
}

/* A new counting filter, after checking it fits. Replies on failure. */
static bkc_value *cbf_create(bkc_ctx *c, uint64_t capacity, double error, uint32_t bits)
{
    uint64_t blocks = 0;
    int rc = bk_counting_optimal(capacity, error, bits, &blocks, NULL);
    if (rc == BK_ESIZE || (rc == BK_OK && blocks > UINT64_MAX / BK_COUNTING_BLOCK_BYTES)) {
        bkc__err(c, BKC_ERR_TOO_LARGE);
        return NULL;
    }
    if (rc != BK_OK) {
        bkc__lib_error(c, rc);
        return NULL;
    }
    if (!bkc__fits(c, blocks * BK_COUNTING_BLOCK_BYTES + 1024)) return NULL;
    bk_filter_config cfg;
    bk_filter_config_init(&cfg);
    cfg.family = BK_FAMILY_COUNTING;
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
    bkc_value *v = bkc_value_new(BKC_KIND_COUNTING);
    if (v == NULL || bkc_value_push(v, f) != BK_OK) {
        bk_filter_free(f);
        bkc_value_free(v);
        bkc__err(c, BKC_ERR_OOM);
        return NULL;
    }
    return v;
}

void bkc_cmd_cbf_reserve(bkc_ctx *c, int argc, const bkc_str *argv)
{
    double error;
    uint64_t capacity;
    uint32_t bits = BK_COUNTING_DEFAULT_COUNTER_BITS;
    if (!bkc__arg_error_rate(c, argv[2], &error)) return;
    if (!bkc__arg_capacity(c, argv[3], &capacity)) return;
    for (int i = 4; i < argc; i += 2) {
        long long x;
        if (!bkc_streq(argv[i], "COUNTERBITS")) {
            bkc__err(c, BKC_ERR_UNKNOWN_ARG);
            return;
        }
        if (i + 1 >= argc) {
            bkc__arity_error(c, argv);
            return;
        }
        if (!bkc_parse_ll(argv[i + 1], &x) || (x != 4 && x != 8)) {
            bkc__err(c, ERR_COUNTER_BITS);
            return;
        }
        bits = (uint32_t)x;
    }
    bkc_key *k;
    bkc_value *v;
    int st = bkc__open(c, argv[1], BKC_OPEN_WRITE, BKC_KIND_COUNTING, &k, &v);
    if (st == BKC__FAILED) return;
    if (st != BKC__MISSING) {
        bkc__err(c, BKC_ERR_ITEM_EXISTS);
    } else {
        bkc_value *nv = cbf_create(c, capacity, error, bits);
        if (nv != NULL && store(c, k, nv)) {
            bkc__ok(c);
            bkc__wrote(c, argc, argv);
        }
    }
    bkc__close(c, k);
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
            bkc_value *nv = cbf_create(c, CBF_DEFAULT_CAPACITY, CBF_DEFAULT_ERROR,
                                       BK_COUNTING_DEFAULT_COUNTER_BITS);
            if (nv == NULL || !store(c, *k, nv)) goto fail;
            *created = 1;
            return c->host_vt->value(*k);
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

static bkc_value *open_lookup(bkc_ctx *c, bkc_str name, bkc_key **k, int *failed)
{
    bkc_value *v;
    int st = bkc__open(c, name, BKC_OPEN_READ, BKC_KIND_COUNTING, k, &v);
    *failed = st == BKC__FAILED;
    return st == BKC__FOUND ? v : NULL;
}

void bkc_cmd_cbf_exists(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    int failed;
    (void)argc;
    bkc_value *v = open_lookup(c, argv[1], &k, &failed);
    if (failed) return;
    bkc__int(c, v ? bk_filter_contains(v->filters[0], argv[2].ptr, argv[2].len) == 1 : 0);
    bkc__close(c, k);
}

void bkc_cmd_cbf_mexists(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    int failed;
    bkc_value *v = open_lookup(c, argv[1], &k, &failed);
    if (failed) return;
    bkc__array(c, (size_t)(argc - 2));
    for (int i = 2; i < argc; i++)
        bkc__int(c, v ? bk_filter_contains(v->filters[0], argv[i].ptr, argv[i].len) == 1 : 0);
    bkc__close(c, k);
}

void bkc_cmd_cbf_count(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    int failed;
    (void)argc;
    bkc_value *v = open_lookup(c, argv[1], &k, &failed);
    if (failed) return;
    int64_t n = v ? bk_filter_count(v->filters[0], argv[2].ptr, argv[2].len) : 0;
    bkc__int(c, n > 0 ? n : 0);
    bkc__close(c, k);
}

enum { F_CAPACITY, F_SIZE, F_ITEMS, F_ERROR, F_COUNT };
static const bkc__info_field info_fields[F_COUNT] = {
    {"CAPACITY", "Capacity"},
    {"SIZE", "Size"},
    {"ITEMS", "Number of items inserted"},
    {"ERROR", "Error rate"},
};

static void info_value(bkc_ctx *c, const void *src, int field)
{
    const bk_filter_info *in = src;
    switch (field) {
    case F_CAPACITY: bkc__int(c, (long long)in->capacity); break;
    case F_SIZE: bkc__int(c, (long long)in->bytes); break;
    case F_ITEMS: bkc__int(c, (long long)in->items); break;
    default: c->reply->vt->dbl(c->reply, in->target_fpr); break;
    }
}

void bkc_cmd_cbf_info(bkc_ctx *c, int argc, const bkc_str *argv)
{
    bkc_key *k;
    bkc_value *v;
    bk_filter_info info;
    if (argc > 3) {
        bkc__arity_error(c, argv);
        return;
    }
    int st = bkc__open(c, argv[1], BKC_OPEN_READ, BKC_KIND_COUNTING, &k, &v);
    if (st == BKC__FAILED) return;
    if (st == BKC__MISSING) {
        bkc__err(c, BKC_ERR_NOT_FOUND);
    } else if (st == BKC__WRONG) {
        bkc__err(c, BKC_ERR_WRONGTYPE);
    } else if (bk_filter_get_info(v->filters[0], &info) != BK_OK) {
        bkc__lib_error(c, BK_EINVAL);
    } else {
        bkc__reply_info(c, argc, argv, info_fields, F_COUNT, info_value, &info);
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
