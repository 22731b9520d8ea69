/*
 * table_family.c - the operations every one-table counting family shares
 * (dleft.c, varcount.c, hybrid.c, morris.c; hier.c for its head, stats
 * and info): see table_family.h. None of this is on a key's path: the
 * families keep their key operations and batches to themselves.
 */
#include <math.h>   /* pow */
#include <string.h> /* memset, memcpy */

#include "table_family.h"

/* The descriptor of a handle's family: its ops table is the descriptor's
 * first member, so the object's ops pointer is the descriptor's address. */
static const bk__tf_family *family_of(const void *f)
{
    return (const bk__tf_family *)(const void *)((const bk__object *)f)->ops;
}

void *bk__tf_create(const bk__tf_family *fam, size_t table_bytes, uint64_t seed,
                    uint64_t capacity, double fpr)
{
    bk__tf_head *h = bk__calloc(1, fam->handle_size);
    if (h == NULL) return NULL;
    void *table = bk__calloc_aligned(table_bytes);
    if (table == NULL) {
        bk__free(h);
        return NULL;
    }
    bk__object_init(&h->obj, &fam->ops);
    h->owns_mem = 1;
    h->seed = seed;
    h->capacity = capacity;
    h->target_fpr = fpr;
    fam->set_table(h, table);
    return h;
}

void *bk__tf_adopt(const bk__tf_family *fam, const bk__image *img, void *table)
{
    bk__tf_head *h = bk__calloc(1, fam->handle_size);
    if (h == NULL) return NULL;
    bk__object_init(&h->obj, &fam->ops);
    h->owns_mem = 0;
    h->seed = img->seed;
    h->capacity = img->capacity;
    h->target_fpr = img->fpr;
    h->items = img->items;
    h->overflows = img->param[0];
    fam->set_table(h, table);
    return h;
}

int bk__tf_restorable(const bk__image *img)
{
    return img->nparts == 1 && bk__valid_stored_fpr(img->fpr) &&
           (img->fpr == 0.0) == (img->capacity == 0);
}

bk__part *bk__tf_describe(const void *f, bk__image *img)
{
    const bk__tf_head *h = f;
    const bk__tf_family *fam = family_of(f);
    bk__part *p = &img->parts[0];
    img->seed = h->seed;
    img->capacity = p->capacity = h->capacity;
    img->fpr = p->fpr = h->target_fpr;
    img->items = p->items = h->items;
    img->param[0] = h->overflows;
    p->data = fam->table(f);
    p->length = fam->table_bytes(f);
    return p;
}

void bk__tf_stats(const bk__tf_head *h, uint32_t hashes, uint64_t table_bits,
                  size_t bytes, bk_delete_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->capacity = h->capacity;
    out->target_fpr = h->target_fpr;
    out->seed = h->seed;
    out->hashes = hashes;
    out->items = h->items;
    out->table_bits = table_bits;
    out->bits_per_key = h->capacity ? (double)table_bits / (double)h->capacity : 0.0;
    out->overflows = h->overflows;
    out->bytes = bytes;
}

double bk__tf_fill_root_k(const void *f, const bk_delete_stats *st)
{
    (void)f;
    return pow(st->fpr_now, 1.0 / (double)st->hashes);
}

/*==========================================================================
 * The shared ops
 *==========================================================================*/

uint64_t bk__tf_seed(const void *f)
{
    return ((const bk__tf_head *)f)->seed;
}

void bk__tf_free(void *f)
{
    bk__tf_head *h = f;
    if (h == NULL) return;
    if (h->owns_mem) bk__free_aligned(family_of(f)->table(f));
    bk__object_release(&h->obj);
    bk__free(h);
}

int bk__tf_info(const void *f, bk_filter_info *out)
{
    const bk__tf_family *fam = family_of(f);
    bk_delete_stats st;
    int rc = fam->stats(f, &st);
    if (rc != BK_OK) return rc;
    bk__info_from_delete_stats(&st, fam->fill(f, &st), out);
    return BK_OK;
}

/* The handle and, unless borrowed from a loaded block, the table. */
void bk__tf_allocations(const void *f, bk__visit_fn visit, void *ctx)
{
    const bk__tf_family *fam = family_of(f);
    visit(ctx, f, fam->handle_size);
    if (((const bk__tf_head *)f)->owns_mem)
        visit(ctx, bk__aligned_raw(fam->table(f)), bk__aligned_asked(fam->table_bytes(f)));
}

/* The handle as it is (geometry, head, the family's own state), with a
 * table of its own holding the same bytes. */
int bk__tf_clone(const void *src, void **out)
{
    const bk__tf_family *fam = family_of(src);
    const size_t bytes = fam->table_bytes(src);
    void *f = bk__tf_create(fam, bytes, 0, 0, 0.0);
    if (f == NULL) return BK_ENOMEM;
    /* the new object as created (nothing mapped or borrowed), and its table */
    bk__tf_head fresh = *(bk__tf_head *)f;
    void *table = fam->table(f);
    memcpy(f, src, fam->handle_size);
    ((bk__tf_head *)f)->obj = fresh.obj;
    ((bk__tf_head *)f)->owns_mem = 1;
    fam->set_table(f, table);
    memcpy(table, fam->table(src), bytes);
    *out = f;
    return BK_OK;
}

void bk__tf_clear(void *f)
{
    const bk__tf_family *fam = family_of(f);
    memset(fam->table(f), 0, fam->table_bytes(f));
    ((bk__tf_head *)f)->items = 0;
}

uint32_t bk__tf_one_part(const void *f)
{
    (void)f;
    return 1;
}
