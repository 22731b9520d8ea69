/*
 * autoclear.c - the auto-clear filter: a classic, blocked or counting
 * filter that empties itself at a fill ratio (seed 003's autoClearRate),
 * so a de-duplicator that runs for ever never degrades into "everything is
 * present".
 *
 * Structure
 *   One generation (mode clear) or two (mode rotate) of the wrapped family,
 *   of one shape and seed, so a key is hashed once for both. The wrapper
 *   counts the set units of the current generation (bits; nonzero counters
 *   for the counting filter) as its adds set them: each family's fill ops
 *   (filter.h) add a key with plain stores and say how many units they set,
 *   and a counting filter's removes say how many they cleared. No add ever
 *   passes over the filter. In clear mode bk_filter_add makes one call into
 *   the family, which hashes, adds and counts (fill add_key: the blocked
 *   and counting filters), so the option costs about an add's compare; in
 *   rotate mode one call that also fetches and tests the key's line in the
 *   previous generation (fill add_key_rotate).
 *
 * When it clears
 *   clear_at = ceil(ratio x units). An add that finds units_set >= clear_at
 *   first clears the current generation (clear) or makes it the previous
 *   one and clears the old previous one to be current (rotate), then adds.
 *   So the key being added is always kept, and a lookup never meets a
 *   generation fuller than clear_at plus one key's units. The number of
 *   clears is kept, and saved.
 *
 * Answers
 *   A lookup tests the current generation and, in rotate mode, the previous
 *   one. An add answers 1 when the key was in neither (so the add answers
 *   "new" exactly when a lookup just before would have answered "absent"),
 *   and always writes the key into the current generation, so a key seen
 *   again in every generation survives every rotation. A remove (counting
 *   only) takes one copy from the newest generation that has the key; the
 *   previous generation's units are not counted (it is never added to, and
 *   is cleared whole at the next rotation).
 *
 * Rates
 *   Clear mode: the rate of the wrapped filter at fill <= ratio. With the
 *   optimal k a filter at its capacity is about half full, so ratio 0.5
 *   keeps the rate at or under the rate at capacity however many keys pass
 *   through (bench/bench_autoclear.c measures it over 1e8 keys). Rotate
 *   mode: two such generations, 1 - (1 - r)^2.
 *
 * Threads
 *   The unit count is one plain integer and the fill ops write with plain
 *   stores: adds, removes and clears need the filter to themselves
 *   (lockfree_add = 0, so the server and the module take the key's
 *   exclusive lock for them). Lookups only read and may run together.
 *
 * File format (docs/FORMAT.md, family 22)
 *   The generations as parts in the wrapped family's own part layout
 *   (current first), the header's capacity, rate and seed those of a
 *   generation, param[0] the ratio's binary64 bits, param[1] the clears,
 *   param[2] mode | wrapped family << 8, param[3] the current generation's
 *   set units (checked against a count on load).
 */
#include <math.h>   /* ceil */
#include <string.h> /* memset, memcpy */

#include "filter.h"
#include "hash.h"

struct bk_autoclear {
    bk__object obj;            /* first: a bk_autoclear is also a bk_filter */
    void *cur;                 /* the generation that takes adds */
    void *prev;                /* rotate: the previous generation; else NULL */
    const bk__family_ops *in;  /* the wrapped family */
    double ratio;
    int mode;
    uint64_t units;            /* per generation */
    uint64_t clear_at;         /* ceil(ratio x units) */
    bk__fill_counts now;       /* cur's units set and items (as the
                                  generation counts them) */
    uint64_t prev_items;       /* prev's items when it was cur */
    uint64_t clears;
    /* the family's hash-and-add in clear mode; NULL: hash, then add */
    int (*add_key)(void *f, const void *key, size_t len, bk__fill_counts *c);
    /* the same in rotate mode, with the test of prev */
    int (*add_key_rotate)(void *f, const void *prev, const void *key, size_t len,
                          bk__fill_counts *c);
    uint64_t capacity;         /* of one generation */
    double fpr;
    size_t gen_bytes;          /* what one generation reports it holds */
};

static const bk__family_ops autoclear_ops; /* at the end of this file */

#define MODE_BITS 8u /* param[2]: mode in the low byte, family above */

/*==========================================================================
 * Internals
 *==========================================================================*/

static uint64_t clear_at_of(double ratio, uint64_t units)
{
    double at = ceil(ratio * (double)units);
    return at >= (double)units ? units : (uint64_t)at;
}

static int valid_ratio(double ratio) { return ratio > 0.0 && ratio <= 1.0; }

static void clear_or_rotate(bk_autoclear *f)
{
    if (f->prev != NULL) {
        void *t = f->prev;
        f->prev = f->cur;
        f->cur = t;
        f->prev_items = f->now.items;
    }
    f->in->clear(f->cur);
    f->now.items = 0;
    f->now.set = 0;
    f->clears++;
}

/* A new handle around cur (and prev), with the set units given. */
static int make(bk_autoclear **out, const bk__family_ops *in, void *cur, void *prev,
                double ratio, int mode, uint64_t set, uint64_t clears)
{
    bk_filter_info info[2];
    for (int i = 0; i < 2; i++) {
        memset(&info[i], 0, sizeof(info[i]));
        void *gen = i ? prev : cur;
        if (gen != NULL && bk_filter_get_summary(gen, &info[i]) != BK_OK) return BK_EINVAL;
    }
    bk_autoclear *f = bk__calloc(1, sizeof(*f));
    if (f == NULL) return BK_ENOMEM;
    bk__object_init(&f->obj, &autoclear_ops);
    f->cur = cur;
    f->prev = prev;
    f->in = in;
    f->ratio = ratio;
    f->mode = mode;
    f->units = in->fill->units(cur);
    f->clear_at = clear_at_of(ratio, f->units);
    f->now.set = set;
    f->clears = clears;
    f->now.items = info[0].items;
    f->prev_items = info[1].items;
    f->add_key = prev == NULL ? in->fill->add_key : NULL;
    f->add_key_rotate = prev != NULL ? in->fill->add_key_rotate : NULL;
    f->capacity = info[0].capacity;
    f->fpr = info[0].target_fpr;
    f->gen_bytes = info[0].bytes;
    *out = f;
    return BK_OK;
}

/* The wrapped family's ops, when it may be wrapped (a blocked filter only in
 * its default layout: the file's hash field is the wrapped family's). */
static const bk__family_ops *wrappable(const bk_filter *inner)
{
    const bk__family_ops *in = ((const bk__object *)(const void *)inner)->ops;
    if (in->fill == NULL || in->clear == NULL || in->clone == NULL) return NULL;
    return in;
}

/*==========================================================================
 * API
 *==========================================================================*/

int bk_autoclear_wrap(bk_autoclear **out, bk_filter *inner, double ratio, int mode)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (inner == NULL) return BK_EINVAL;
    const bk__family_ops *in = wrappable(inner);
    if (in == NULL) return BK_ENOTSUP;
    if (!valid_ratio(ratio) || (mode != BK_AUTOCLEAR_CLEAR && mode != BK_AUTOCLEAR_ROTATE))
        return BK_EPARAM;
    bk_blocked *b = bk_filter_as_blocked(inner);
    if (b != NULL && bk_blocked_split(b)) return BK_EPARAM;
    if (((const bk__object *)(const void *)inner)->read_only) return BK_EREADONLY;
    void *prev = NULL;
    if (mode == BK_AUTOCLEAR_ROTATE) {
        int rc = in->clone(inner, &prev);
        if (rc != BK_OK) return rc;
        in->clear(prev);
    }
    int rc = make(out, in, inner, prev, ratio, mode, in->fill->count_set(inner), 0);
    if (rc != BK_OK && prev != NULL) in->destroy(prev);
    return rc;
}

void bk_autoclear_free(bk_autoclear *f)
{
    if (f == NULL) return;
    f->in->destroy(f->cur);
    if (f->prev != NULL) f->in->destroy(f->prev);
    bk__object_release(&f->obj);
    bk__free(f);
}

static bk_hash hash_of(const bk_autoclear *f, const void *key, size_t len)
{
    if (f->in->hash != NULL) return f->in->hash(f->cur, key, len);
    return bk_hash_key(key, len, f->in->seed(f->cur));
}

/* The generations' bytes as their family reports them (the same whether
 * they were made or loaded, as for the family alone), and the handle. */
static size_t bytes_of(const bk_autoclear *f)
{
    return sizeof(*f) + f->gen_bytes * (f->prev ? 2 : 1);
}

static int add_hash(bk_autoclear *f, bk_hash h)
{
    if (f->now.set >= f->clear_at) clear_or_rotate(f);
    uint64_t n = 0;
    int rc = f->in->fill->add(f->cur, h, &n);
    if (rc < 0) return rc;
    f->now.set += n;
    f->now.items += (uint64_t)rc;
    if (rc == 1 && f->prev != NULL && f->in->contains(f->prev, h)) rc = 0;
    return rc;
}

/* An add of a key: when the family hashes and adds in one call, one call
 * into it (not one for the hash, one for the add and, in rotate mode, one
 * for the lookup in the previous generation). */
__attribute__((noinline))
static int add_key_slow(bk_autoclear *f, const void *key, size_t len)
{
    if (f->add_key_rotate != NULL) {
        if (f->now.set >= f->clear_at) clear_or_rotate(f);
        return f->add_key_rotate(f->cur, f->prev, key, len, &f->now);
    }
    if (f->add_key == NULL) return add_hash(f, hash_of(f, key, len));
    clear_or_rotate(f);
    return f->add_key(f->cur, key, len, &f->now);
}

static int add_key(void *vf, const void *key, size_t len)
{
    bk_autoclear *f = vf;
    if (f->add_key == NULL || f->now.set >= f->clear_at) return add_key_slow(f, key, len);
    return f->add_key(f->cur, key, len, &f->now); /* no stack frame: a jump */
}

static int contains_hash(const bk_autoclear *f, bk_hash h)
{
    return f->in->contains(f->cur, h) || (f->prev != NULL && f->in->contains(f->prev, h));
}

static int remove_hash(bk_autoclear *f, bk_hash h)
{
    if (f->in->fill->remove == NULL) return BK_ENOTSUP;
    uint64_t n = 0;
    int rc = f->in->fill->remove(f->cur, h, &n);
    if (rc == BK_OK) {
        f->now.set -= n <= f->now.set ? n : f->now.set;
        f->now.items -= f->now.items > 0;
        return BK_OK;
    }
    if (rc != BK_ENOTFOUND || f->prev == NULL) return rc;
    rc = f->in->fill->remove(f->prev, h, &n);
    if (rc == BK_OK) f->prev_items -= f->prev_items > 0;
    return rc;
}

int bk_autoclear_add(bk_autoclear *f, const void *key, size_t len)
{
    if (f == NULL || (key == NULL && len > 0)) return BK_EINVAL;
    return add_key(f, key, len);
}

int bk_autoclear_contains(const bk_autoclear *f, const void *key, size_t len)
{
    if (f == NULL || (key == NULL && len > 0)) return BK_EINVAL;
    return contains_hash(f, hash_of(f, key, len));
}

int bk_autoclear_remove(bk_autoclear *f, const void *key, size_t len)
{
    if (f == NULL || (key == NULL && len > 0)) return BK_EINVAL;
    return remove_hash(f, hash_of(f, key, len));
}

int bk_autoclear_get_stats(const bk_autoclear *f, bk_autoclear_stats *out)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    memset(out, 0, sizeof(*out));
    out->ratio = f->ratio;
    out->mode = f->mode;
    out->inner = f->in->family;
    out->clears = f->clears;
    out->units = f->units;
    out->units_set = f->now.set;
    out->clear_at = f->clear_at;
    out->fill = f->units ? (double)f->now.set / (double)f->units : 0.0;
    out->items = f->now.items;
    out->previous_items = f->prev_items;
    out->capacity = f->capacity;
    out->target_fpr = f->fpr;
    out->fill_at_capacity = f->capacity ? f->in->fill->fill_at(f->cur, f->capacity) : 0.0;
    out->bytes = bytes_of(f);
    return BK_OK;
}

const bk_filter *bk_autoclear_current(const bk_autoclear *f)
{
    return f ? (const bk_filter *)f->cur : NULL;
}

BK__FAMILY_CASTS(autoclear, autoclear_ops)

/*==========================================================================
 * The generic handle
 *==========================================================================*/

static bk_hash ops_hash(const void *f, const void *key, size_t len)
{
    return hash_of(f, key, len);
}

static int ops_add(void *f, bk_hash h) { return add_hash(f, h); }
static int ops_contains(const void *f, bk_hash h) { return contains_hash(f, h); }
static int ops_remove(void *f, bk_hash h) { return remove_hash(f, h); }

static int64_t ops_count(const void *vf, bk_hash h)
{
    const bk_autoclear *f = vf;
    if (f->in->count == NULL) return contains_hash(f, h);
    int64_t c = f->in->count(f->cur, h);
    if (f->prev != NULL) c += f->in->count(f->prev, h);
    return c;
}

static uint64_t ops_seed(const void *f)
{
    const bk_autoclear *a = f;
    return a->in->seed(a->cur);
}

static void ops_destroy(void *f) { bk_autoclear_free(f); }

/* The current generation's info (or O(1) summary), with the wrapper's
 * items, fill, bytes, parts and removes. */
static int info_of(const bk_autoclear *f, bk_filter_info *out, int summary)
{
    int rc = summary && f->in->summary ? f->in->summary(f->cur, out) : f->in->info(f->cur, out);
    if (rc != BK_OK) return rc;
    out->items = f->now.items + f->prev_items;
    out->fill = f->units ? (double)f->now.set / (double)f->units : 0.0;
    out->bytes = bytes_of(f);
    out->parts = f->prev ? 2 : 1;
    out->can_remove = f->in->fill->remove != NULL;
    return BK_OK;
}

static int ops_info(const void *f, bk_filter_info *out) { return info_of(f, out, 0); }
static int ops_summary(const void *f, bk_filter_info *out) { return info_of(f, out, 1); }

static void ops_allocations(const void *vf, bk__visit_fn visit, void *ctx)
{
    const bk_autoclear *f = vf;
    visit(ctx, f, sizeof(*f));
    f->in->allocations(f->cur, visit, ctx);
    if (f->prev != NULL) f->in->allocations(f->prev, visit, ctx);
}

/* bk_filter_create wraps (filter.c): the family asked for is the inner one. */
static int ops_create(const bk_filter_config *cfg, void **out)
{
    (void)cfg;
    (void)out;
    return BK_EPARAM;
}

static int ops_clone(const void *vf, void **out)
{
    const bk_autoclear *f = vf;
    void *cur = NULL, *prev = NULL;
    int rc = f->in->clone(f->cur, &cur);
    if (rc == BK_OK && f->prev != NULL) rc = f->in->clone(f->prev, &prev);
    if (rc == BK_OK)
        rc = make((bk_autoclear **)out, f->in, cur, prev, f->ratio, f->mode, f->now.set, f->clears);
    if (rc != BK_OK) {
        if (cur != NULL) f->in->destroy(cur);
        if (prev != NULL) f->in->destroy(prev);
    }
    return rc;
}

static void ops_clear(void *vf)
{
    bk_autoclear *f = vf;
    f->in->clear(f->cur);
    if (f->prev != NULL) f->in->clear(f->prev);
    f->now.set = 0;
    f->now.items = f->prev_items = 0;
}

static uint32_t ops_nparts(const void *f)
{
    return ((const bk_autoclear *)f)->prev ? 2 : 1;
}

/* One generation's image (one part) into img->parts[i]. */
static int describe_gen(const bk_autoclear *f, const void *gen, bk__image *img, uint32_t i)
{
    bk__image one;
    memset(&one, 0, sizeof(one));
    one.family = (uint32_t)f->in->family;
    one.nparts = 1;
    one.parts = &img->parts[i];
    int rc = f->in->describe(gen, &one);
    if (rc != BK_OK) return rc;
    if (i == 0) {
        img->seed = one.seed;
        img->capacity = one.capacity;
        img->fpr = one.fpr;
        img->items = one.items;
        img->hash = one.hash;
    }
    img->parts[i].items = one.items;
    return BK_OK;
}

static int ops_describe(const void *vf, bk__image *img)
{
    const bk_autoclear *f = vf;
    int rc = describe_gen(f, f->cur, img, 0);
    if (rc == BK_OK && f->prev != NULL) rc = describe_gen(f, f->prev, img, 1);
    if (rc != BK_OK) return rc;
    uint64_t bits;
    memcpy(&bits, &f->ratio, sizeof(bits));
    img->param[0] = bits;
    img->param[1] = f->clears;
    img->param[2] = (uint64_t)f->mode | (uint64_t)f->in->family << MODE_BITS;
    img->param[3] = f->now.set;
    return BK_OK;
}

/* One generation from part i, through the wrapped family's restore. */
static int restore_gen(const bk__family_ops *in, const bk__image *img, uint32_t i, void **out)
{
    bk__image one;
    memset(&one, 0, sizeof(one));
    one.family = (uint32_t)in->family;
    one.seed = img->seed;
    one.capacity = img->capacity;
    one.fpr = img->fpr;
    one.items = img->parts[i].items;
    one.hash = img->hash;
    one.nparts = 1;
    one.parts = &img->parts[i];
    return in->restore(&one, out);
}

static int same_shape(const bk__part *a, const bk__part *b)
{
    return a->m == b->m && a->k == b->k && a->width == b->width && a->slots == b->slots &&
           a->flags == b->flags && a->param == b->param && a->length == b->length;
}

/* A generation restored from part p describes itself as p again: the part
 * is exactly what the wrapped family writes (a part of another family
 * that its checks happen to pass, such as a blocked filter's bits read as
 * a classic filter's, is refused). */
static int part_is_own(const bk__family_ops *in, const void *gen, const bk__part *p)
{
    bk__part again;
    bk__image one;
    memset(&one, 0, sizeof(one));
    memset(&again, 0, sizeof(again));
    one.nparts = 1;
    one.parts = &again;
    return in->describe(gen, &one) == BK_OK && same_shape(&again, p) &&
           again.capacity == p->capacity && again.items == p->items;
}

static int ops_restore(const bk__image *img, void **out)
{
    double ratio;
    memcpy(&ratio, &img->param[0], sizeof(ratio));
    uint64_t mode = img->param[2] & ((1u << MODE_BITS) - 1);
    uint64_t family = img->param[2] >> MODE_BITS;
    if (!valid_ratio(ratio) || mode > BK_AUTOCLEAR_ROTATE || img->flags != 0) return BK_ECORRUPT;
    if (family != BK_FAMILY_BLOOM && family != BK_FAMILY_BLOCKED && family != BK_FAMILY_COUNTING)
        return BK_ECORRUPT;
    if (img->nparts != (mode == BK_AUTOCLEAR_ROTATE ? 2u : 1u)) return BK_ECORRUPT;
    if (img->items != img->parts[0].items) return BK_ECORRUPT;
    if (img->nparts == 2 && !same_shape(&img->parts[0], &img->parts[1])) return BK_ECORRUPT;
    const bk__family_ops *in = bk__family_lookup((uint32_t)family);
    void *cur = NULL, *prev = NULL;
    int rc = restore_gen(in, img, 0, &cur);
    if (rc == BK_OK && !part_is_own(in, cur, &img->parts[0])) rc = BK_ECORRUPT;
    if (rc == BK_OK && img->nparts == 2) rc = restore_gen(in, img, 1, &prev);
    if (rc == BK_OK && prev != NULL && !part_is_own(in, prev, &img->parts[1])) rc = BK_ECORRUPT;
    if (rc == BK_OK && bk_filter_as_blocked(cur) != NULL &&
        bk_blocked_split(bk_filter_as_blocked(cur)))
        rc = BK_ECORRUPT;
    /* the count the clears follow must be the count of what is stored */
    if (rc == BK_OK && in->fill->count_set(cur) != img->param[3]) rc = BK_ECORRUPT;
    if (rc == BK_OK)
        rc = make((bk_autoclear **)out, in, cur, prev, ratio, (int)mode, img->param[3],
                  img->param[1]);
    if (rc != BK_OK) {
        if (cur != NULL) in->destroy(cur);
        if (prev != NULL) in->destroy(prev);
    }
    return rc;
}

static const bk__family_ops autoclear_ops = {
    .family = BK_FAMILY_AUTOCLEAR,
    .name = "autoclear",
    BK__OPS_STANDARD,
    .hash = ops_hash, .add_key = add_key, .remove = ops_remove, .count = ops_count, .lockfree_add = 0,
    .summary = ops_summary, .clone = ops_clone, .clear = ops_clear,
};

const bk__family_ops *const bk__autoclear_family = &autoclear_ops;
