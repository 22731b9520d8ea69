/*
 * filter.c - the generic filter handle: one set of functions for every
 * family, dispatched through each family's ops table (filter.h).
 *
 * The table of families below is the only place that lists them all; a new
 * family adds one line here and one ops table in its own file.
 */
#include <string.h> /* strcmp */
#include <sys/mman.h> /* munmap */

#include "filter.h"
#include "hash.h"

const bk__family_ops *bk__family_lookup(uint32_t family)
{
    /* Each family's file exports a pointer to its table (filter.h). */
    const bk__family_ops *const families[] = {
        bk__bloom_family,
    };
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        if ((uint32_t)families[i]->family == family) return families[i];
    return NULL;
}

static const char *const family_names[] = {
    NULL, "bloom", "blocked", "counting", "deletable", "cuckoo", "scalable",
    "window",
};

const char *bk_family_name(bk_family family)
{
    if ((unsigned)family >= sizeof(family_names) / sizeof(family_names[0]))
        return NULL;
    return family_names[family];
}

bk_family bk_family_from_name(const char *name)
{
    if (name == NULL) return (bk_family)0;
    for (unsigned i = 1; i < sizeof(family_names) / sizeof(family_names[0]); i++)
        if (strcmp(family_names[i], name) == 0) return (bk_family)i;
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

int bk_filter_add(bk_filter *f, const void *key, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    const bk__object *o = OBJ(f);
    if (o->read_only) return BK_EREADONLY;
    return o->ops->add(f, bk_hash_key(key, len, o->ops->seed(f)));
}

int bk_filter_contains(const bk_filter *f, const void *key, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    const bk__object *o = OBJ(f);
    return o->ops->contains(f, bk_hash_key(key, len, o->ops->seed(f)));
}

int bk_filter_remove(bk_filter *f, const void *key, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    const bk__object *o = OBJ(f);
    if (o->ops->remove == NULL) return BK_ENOTSUP;
    if (o->read_only) return BK_EREADONLY;
    return o->ops->remove(f, bk_hash_key(key, len, o->ops->seed(f)));
}

int64_t bk_filter_count(const bk_filter *f, const void *key, size_t len)
{
    if (f == NULL) return BK_EINVAL;
    const bk__object *o = OBJ(f);
    bk_hash h = bk_hash_key(key, len, o->ops->seed(f));
    if (o->ops->count != NULL) return o->ops->count(f, h);
    return o->ops->contains(f, h);
}

int bk_filter_get_info(const bk_filter *f, bk_filter_info *out)
{
    if (f == NULL || out == NULL) return BK_EINVAL;
    const bk__object *o = OBJ(f);
    memset(out, 0, sizeof(*out));
    int rc = o->ops->info(f, out);
    out->family = o->ops->family;
    out->can_remove = o->ops->remove != NULL;
    out->mapped = o->block_kind == BK__BLOCK_MAP;
    out->read_only = o->read_only;
    return rc;
}
