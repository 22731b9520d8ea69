/*
 * filter.c - the generic filter handle: one set of functions for every
 * family, dispatched through each family's ops table (filter.h).
 *
 * The table of families below is the only place that lists them all; a new
 * family adds one line here and one ops table in its own file.
 */
#include <stdio.h>  /* snprintf */
#include <string.h> /* strcmp */
#include <sys/mman.h> /* munmap */

#include "filter.h"
#include "hash.h"

const bk__family_ops *bk__family_lookup(uint32_t family)
{
    /* Each family's file exports a pointer to its table (filter.h). */
    const bk__family_ops *const families[] = {
        bk__bloom_family,
        bk__blocked_family,
        bk__counting_family,
        bk__deletable_family,
        bk__cuckoo_family,
        bk__scalable_family,
        bk__window_family,
        bk__dleft_family,
        bk__varcount_family,
        bk__hier_family,
        bk__hybrid_family,
        bk__morris_family,
        bk__static_family,
        bk__map_family,
        bk__growable_family,
        bk__bumped_family,
        bk__rbloom_family,
        bk__rcuckoo_family,
        bk__autoclear_family,
        bk__ttl_family,
    };
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        if ((uint32_t)families[i]->family == family) return families[i];
    return NULL;
}

static const char *const family_names[] = {
    NULL, "bloom", "blocked", "counting", "deletable", "cuckoo", "scalable",
    "window", "dleft", "varcount", "hier", "hybrid", "morris",
};

const char *bk_family_name(bk_family family)
{
    if ((unsigned)family >= sizeof(family_names) / sizeof(family_names[0])) {
        /* families numbered past the table (16 on) name themselves */
        const bk__family_ops *ops = bk__family_lookup((uint32_t)family);
        return ops != NULL ? ops->name : NULL;
    }
    return family_names[family];
}

bk_family bk_family_from_name(const char *name)
{
    if (name == NULL) return (bk_family)0;
    for (unsigned i = 1; i < sizeof(family_names) / sizeof(family_names[0]); i++)
        if (strcmp(family_names[i], name) == 0) return (bk_family)i;
    for (uint32_t id = 16; id < 32; id++) {
        const bk__family_ops *ops = bk__family_lookup(id);
        if (ops != NULL && strcmp(ops->name, name) == 0) return (bk_family)id;
    }
    return (bk_family)0;
}

void bk__object_release(bk__object *o)
{
    if (o == NULL) return;
    if (o->block_kind == BK__BLOCK_HEAP) bk__free_aligned(o->block);
    else if (o->block_kind == BK__BLOCK_MAP) munmap(o->block, o->block_len);
    o->block = NULL;
    o->block_len = 0;
    o->block_kind = BK__BLOCK_NONE;
}

/*==========================================================================
 * Dispatch
 *==========================================================================*/

#define OBJ(f) ((const bk__object *)(const void *)(f))

bk_family bk_filter_family(const bk_filter *f)
{
    return f ? OBJ(f)->ops->family : (bk_family)0;
}

void bk_filter_free(bk_filter *f)
{
    if (f != NULL) OBJ(f)->ops->destroy(f);
}

uint64_t bk_filter_seed(const bk_filter *f)
{
    return OBJ(f)->ops->seed(f);
}

/* A key hashed as f's family hashes it. */
static inline bk_hash key_hash(const bk__object *o, const bk_filter *f,
                               const void *key, size_t len)
{
    if (o->ops->hash != NULL) return o->ops->hash(f, key, len);
    return bk_hash_key(key, len, o->ops->seed(f));
}

/* Apart, so that a family's one-call add takes no stack frame here. */
__attribute__((noinline))
static int add_hashed(const bk__object *o, bk_filter *f, const void *key, size_t len)
{
    return o->ops->add(f, key_hash(o, f, key, len));
}

int bk_filter_add(bk_filter *f, const void *key, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    const bk__object *o = OBJ(f);
    if (o->read_only) return BK_EREADONLY;
    if (o->ops->add_key != NULL) return o->ops->add_key(f, key, len);
    return add_hashed(o, f, key, len);
}

int bk_filter_contains(const bk_filter *f, const void *key, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    const bk__object *o = OBJ(f);
    return o->ops->contains(f, key_hash(o, f, key, len));
}

int bk_filter_remove(bk_filter *f, const void *key, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    const bk__object *o = OBJ(f);
    if (o->ops->remove == NULL) return BK_ENOTSUP;
    if (o->read_only) return BK_EREADONLY;
    return o->ops->remove(f, key_hash(o, f, key, len));
}

int64_t bk_filter_count(const bk_filter *f, const void *key, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    const bk__object *o = OBJ(f);
    bk_hash h = key_hash(o, f, key, len);
    if (o->ops->count != NULL) return o->ops->count(f, h);
    return o->ops->contains(f, h);
}

int64_t bk_filter_add_batch(bk_filter *f, const void *const *keys,
                            const size_t *lens, size_t n, uint8_t *results)
{
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    const bk__object *o = OBJ(f);
    if (o->read_only) return BK_EREADONLY;
    if (o->ops->add_batch != NULL) return o->ops->add_batch(f, keys, lens, n, results);
    int64_t hits = 0;
    for (size_t i = 0; i < n; i++) {
        int r = o->ops->add(f, key_hash(o, f, keys[i], lens[i]));
        if (r < 0) return r;
        if (results != NULL) results[i] = (uint8_t)r;
        hits += r;
    }
    return hits;
}

int64_t bk_filter_contains_batch(const bk_filter *f, const void *const *keys,
                                 const size_t *lens, size_t n, uint8_t *results)
{
    if (f == NULL || (n > 0 && (keys == NULL || lens == NULL))) return BK_EINVAL;
    const bk__object *o = OBJ(f);
    if (o->ops->contains_batch != NULL)
        return o->ops->contains_batch(f, keys, lens, n, results);
    int64_t hits = 0;
    for (size_t i = 0; i < n; i++) {
        int r = o->ops->contains(f, key_hash(o, f, keys[i], lens[i]));
        if (results != NULL) results[i] = (uint8_t)r;
        hits += r;
    }
    return hits;
}

/* info or summary, and the fields every family shares. */
static int get_info(const bk_filter *f, bk_filter_info *out, int summary)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    const bk__object *o = OBJ(f);
    memset(out, 0, sizeof(*out));
    out->can_remove = -1; /* a family whose removes depend on the filter says */
    int rc = summary && o->ops->summary ? o->ops->summary(f, out) : o->ops->info(f, out);
    out->family = o->ops->family;
    if (out->can_remove < 0) out->can_remove = o->ops->remove != NULL;
    out->lockfree_add = o->ops->lockfree_add && !out->single_writer;
    out->mapped = o->block_kind == BK__BLOCK_MAP;
    out->read_only = o->read_only;
    return rc;
}

int bk_filter_get_info(const bk_filter *f, bk_filter_info *out) { return get_info(f, out, 0); }

int bk_filter_get_summary(const bk_filter *f, bk_filter_info *out)
{
    return get_info(f, out, 1);
}

typedef struct usage_sum {
    size_t (*usable)(void *ctx, const void *ptr);
    void *ctx;
    size_t total;
} usage_sum;

static void add_usage(void *vs, const void *ptr, size_t asked)
{
    usage_sum *s = vs;
    s->total += s->usable ? s->usable(s->ctx, ptr) : asked;
}

size_t bk_filter_memory_usage(const bk_filter *f, size_t (*usable)(void *ctx, const void *ptr),
                              void *ctx)
{
    if (f == NULL) return 0;
    const bk__object *o = (const bk__object *)f;
    if (o->ops->allocations == NULL) {
        bk_filter_info info;
        return bk_filter_get_summary(f, &info) == BK_OK ? info.bytes : 0;
    }
    usage_sum s = {usable, ctx, 0};
    o->ops->allocations(f, add_usage, &s);
    /* a payload loaded into the heap and kept there (not a mapping) */
    if (o->block_kind == BK__BLOCK_HEAP)
        add_usage(&s, bk__aligned_raw(o->block), bk__aligned_asked(o->block_len));
    return s.total;
}

size_t bk_filter_mapped_bytes(const bk_filter *f)
{
    if (f == NULL) return 0;
    const bk__object *o = (const bk__object *)f;
    return o->block_kind == BK__BLOCK_MAP ? o->block_len : 0;
}

/*==========================================================================
 * Whole filters
 *==========================================================================*/

void bk_filter_config_init(bk_filter_config *cfg)
{
    if (cfg == NULL) return;
    memset(cfg, 0, sizeof(*cfg));
    cfg->family = BK_FAMILY_BLOCKED;
    cfg->seed = BK_DEFAULT_SEED;
}

int bk_filter_create(bk_filter **out, const bk_filter_config *cfg)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (cfg == NULL) return BK_EINVAL;
    const bk__family_ops *ops = bk__family_lookup((uint32_t)cfg->family);
    if (ops == NULL) return BK_EFAMILY;
    if (ops->create == NULL) return BK_ENOTSUP;
    if (cfg->auto_clear != 0 && ops->fill == NULL) return BK_ENOTSUP;
    void *f = NULL;
    int rc = ops->create(cfg, &f);
    if (rc != BK_OK) return rc;
    if (cfg->auto_clear != 0) { /* the filter asked for, wrapped (autoclear.c) */
        bk_autoclear *a = NULL;
        rc = bk_autoclear_wrap(&a, f, cfg->auto_clear, cfg->auto_clear_mode);
        if (rc != BK_OK) {
            ops->destroy(f);
            return rc;
        }
        *out = bk_autoclear_as_filter(a);
        return BK_OK;
    }
    if (cfg->single_writer && ops->set_single_writer != NULL)
        ops->set_single_writer(f, 1);
    *out = f;
    return BK_OK;
}

int bk_filter_set_single_writer(bk_filter *f, int single_writer)
{
    if (f == NULL) return BK_EINVAL;
    const bk__object *o = OBJ(f);
    if (o->ops->set_single_writer == NULL) return BK_ENOTSUP;
    o->ops->set_single_writer(f, single_writer != 0);
    return BK_OK;
}

int bk_filter_clone(bk_filter **out, const bk_filter *f)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (f == NULL) return BK_EINVAL;
    const bk__family_ops *ops = OBJ(f)->ops;
    if (ops->clone != NULL) {
        void *c = NULL;
        int rc = ops->clone(f, &c);
        if (rc == BK_OK) *out = c;
        return rc;
    }
    if (ops->describe == NULL) return BK_ENOTSUP;
    /* Families made of several filters copy themselves through the file
     * format: serialise, then load the bytes into fresh memory. */
    uint64_t size = bk_filter_serialized_size(f);
    if (size == 0) return BK_ENOMEM;
    if (size > SIZE_MAX) return BK_ESIZE;
    void *buf = bk__malloc((size_t)size);
    if (buf == NULL) return BK_ENOMEM;
    int rc = bk_filter_serialize(f, buf, (size_t)size);
    if (rc == BK_OK) rc = bk_filter_deserialize(out, buf, (size_t)size);
    bk__free(buf);
    return rc;
}

int bk_filter_clear(bk_filter *f)
{
    if (f == NULL) return BK_EINVAL;
    const bk__object *o = OBJ(f);
    if (o->read_only) return BK_EREADONLY;
    if (o->ops->clear == NULL) return BK_ENOTSUP;
    o->ops->clear(f);
    return BK_OK;
}

int bk_filter_incompatibility(const bk_filter *a, const bk_filter *b,
                              char *buf, size_t cap)
{
    char scratch[1];
    if (buf == NULL || cap == 0) buf = scratch, cap = sizeof(scratch);
    buf[0] = '\0';
    if (a == NULL || b == NULL) {
        snprintf(buf, cap, "missing filter");
        return 1;
    }
    const bk__family_ops *oa = OBJ(a)->ops, *ob = OBJ(b)->ops;
    if (oa != ob) {
        snprintf(buf, cap, "family differs: %s vs %s", oa->name, ob->name);
        return 1;
    }
    if (oa->incompatibility == NULL) {
        snprintf(buf, cap, "%s filters cannot be combined", oa->name);
        return 1;
    }
    /* every family that combines needs one seed: checked here for all */
    uint64_t sa = oa->seed(a), sb = oa->seed(b);
    if (sa != sb) {
        snprintf(buf, cap, "seeds differ: %llu vs %llu", (unsigned long long)sa,
                 (unsigned long long)sb);
        return 1;
    }
    return oa->incompatibility(a, b, buf, cap);
}

static int merge(bk_filter *dst, const bk_filter *src, int op)
{
    if (dst == NULL || src == NULL) return BK_EINVAL;
    const bk__object *o = OBJ(dst);
    if (o->ops != OBJ(src)->ops) return BK_EINCOMPAT;
    if (o->ops->merge == NULL) return BK_ENOTSUP;
    if (o->read_only) return BK_EREADONLY;
    return o->ops->merge(dst, src, op);
}

int bk_filter_merge(bk_filter *dst, const bk_filter *src)
{
    return merge(dst, src, 0);
}

int bk_filter_intersect(bk_filter *dst, const bk_filter *src)
{
    return merge(dst, src, 1);
}
