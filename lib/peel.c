/*
 * peel.c - binary fuse geometry and hypergraph peeling, shared by the
 * static filter (fuse.c) and the static map (bloomier.c). The design is in
 * peel.h.
 */
#include <math.h> /* log, floor */

#include "hash.h"
#include "peel.h"

/*==========================================================================
 * Geometry
 *==========================================================================*/

/* The shape of segment_count first-cell segments of segment_length cells
 * (a power of two), and the two segments after them. */
static int shape_of(uint64_t segment_length, uint64_t segment_count, bk__fuse_shape *s)
{
    s->segment_length = (uint32_t)segment_length;
    s->segment_mask = (uint32_t)(segment_length - 1);
    s->segment_count = (uint32_t)segment_count;
    s->segment_count_length = (uint32_t)(segment_count * segment_length);
    s->array_length = (uint32_t)((segment_count + 2) * segment_length);
    return BK_OK;
}

int bk__fuse_shape_for(uint64_t n, bk__fuse_shape *s)
{
    /* Below two keys the formulas degenerate (ln 1 = 0); a set of 0 or 1
     * key gets the table of 2, which is tiny anyway. */
    double keys = n < 2 ? 2.0 : (double)n;
    double lg = floor(log(keys) / log(3.33) + 2.25);
    uint64_t segment_length = lg >= 18.0 ? BK__FUSE_MAX_SEGMENT
                                         : UINT64_C(1) << (unsigned)lg;
    double factor = 0.875 + 0.25 * log(1e6) / log(keys);
    if (factor < 1.125) factor = 1.125;
    double want = keys * factor;
    if (want > (double)BK__FUSE_MAX_CELLS) return BK_ESIZE;
    uint64_t capacity = (uint64_t)(want + 0.5);
    /* first cells span segment_count segments; two more hold p1 and p2 */
    uint64_t segments = (capacity + segment_length - 1) / segment_length;
    uint64_t segment_count = segments > 2 ? segments - 2 : 1;
    uint64_t cells = (segment_count + 2) * segment_length;
    if (cells > BK__FUSE_MAX_CELLS) return BK_ESIZE;
    return shape_of(segment_length, segment_count, s);
}

int bk__fuse_shape_from(uint64_t segment_length, uint64_t array_length,
                        bk__fuse_shape *s)
{
    if (segment_length < 4 || segment_length > BK__FUSE_MAX_SEGMENT ||
        (segment_length & (segment_length - 1)) != 0)
        return BK_ECORRUPT;
    if (array_length > BK__FUSE_MAX_CELLS || array_length % segment_length != 0 ||
        array_length / segment_length < 3)
        return BK_ECORRUPT;
    return shape_of(segment_length, array_length / segment_length - 2, s);
}

/*==========================================================================
 * Work space
 *==========================================================================*/

uint64_t bk__peel_temp_bytes(uint64_t n, int with_values)
{
    bk__fuse_shape s;
    if (bk__fuse_shape_for(n, &s) != BK_OK) return UINT64_MAX;
    uint64_t keys = n > 0 ? n : 1;
    if (with_values) return keys * 12 + ((uint64_t)s.array_length + 1) * 4 + s.array_length * 5;
    return keys * 8 + (uint64_t)s.array_length * (1 + 8 + 4);
}

int bk__peel_alloc(bk__peel *p, uint64_t n, uint32_t cells, int with_values)
{
    memset(p, 0, sizeof(*p));
    uint64_t keys = n > 0 ? n : 1;
    if (keys > SIZE_MAX / sizeof(uint64_t)) return BK_ESIZE;
    const size_t queue_len = (size_t)cells + (with_values ? 1 : 0);
    p->cells_room = cells;
    p->hashes = bk__malloc((size_t)keys * sizeof(uint64_t));
    p->queue = bk__malloc(queue_len * sizeof(uint32_t));
    p->count = bk__calloc(cells, 1);
    if (with_values) {
        p->values = bk__malloc((size_t)keys * sizeof(uint32_t));
        p->xor_index = bk__calloc(cells, sizeof(uint32_t));
    } else {
        p->xor_hash = bk__calloc(cells, sizeof(uint64_t));
    }
    if (p->hashes == NULL || p->queue == NULL || p->count == NULL ||
        (with_values ? (p->values == NULL || p->xor_index == NULL)
                     : p->xor_hash == NULL)) {
        bk__peel_free(p);
        return BK_ENOMEM;
    }
    bk__advise_huge(p->hashes, (size_t)keys * sizeof(uint64_t));
    bk__advise_huge(p->queue, queue_len * sizeof(uint32_t));
    bk__advise_huge(p->count, cells);
    if (with_values) {
        bk__advise_huge(p->values, (size_t)keys * sizeof(uint32_t));
        bk__advise_huge(p->xor_index, (size_t)cells * sizeof(uint32_t));
    } else {
        bk__advise_huge(p->xor_hash, (size_t)cells * sizeof(uint64_t));
    }
    p->temp_bytes = (size_t)keys * (8 + (with_values ? 4 : 0)) +
                    queue_len * 4 + (size_t)cells * (with_values ? 1 + 4 : 1 + 8);
    return BK_OK;
}

void bk__peel_free(bk__peel *p)
{
    bk__free(p->hashes);
    bk__free(p->values);
    bk__free(p->count);
    bk__free(p->xor_hash);
    bk__free(p->xor_index);
    bk__free(p->queue);
    memset(p, 0, sizeof(*p));
}

/*==========================================================================
 * Sorting: in-place MSD radix sort, 8 bits per level (American flag sort),
 * values carried along. Equal hashes end up adjacent.
 *==========================================================================*/

static void insertion_sort(uint64_t *a, uint32_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t x = a[i];
        uint32_t xv = v ? v[i] : 0;
        size_t j = i;
        while (j > 0 && a[j - 1] > x) {
            a[j] = a[j - 1];
            if (v) v[j] = v[j - 1];
            j--;
        }
        a[j] = x;
        if (v) v[j] = xv;
    }
}

/* One American-flag pass: permute a[0..n) (and v) in place so that the
 * elements are grouped by digit (x >> shift) & (buckets - 1), ascending;
 * count[d] receives the size of group d. */
static void radix_pass(uint64_t *a, uint32_t *v, size_t n, int shift,
                       unsigned buckets, size_t *count, size_t *head,
                       size_t *tail)
{
    const uint64_t mask = buckets - 1;
    memset(count, 0, buckets * sizeof(size_t));
    for (size_t i = 0; i < n; i++) count[(a[i] >> shift) & mask]++;
    size_t at = 0;
    for (unsigned b = 0; b < buckets; b++) {
        head[b] = at;
        at += count[b];
        tail[b] = at;
    }
    for (unsigned b = 0; b < buckets; b++) {
        while (head[b] < tail[b]) {
            uint64_t x = a[head[b]];
            uint32_t xv = v ? v[head[b]] : 0;
            unsigned d = (unsigned)((x >> shift) & mask);
            /* carry x to its group, picking up what was there, until an
             * element of group b comes back */
            while (d != b) {
                size_t to = head[d]++;
                uint64_t y = a[to];
                a[to] = x;
                x = y;
                if (v) {
                    uint32_t yv = v[to];
                    v[to] = xv;
                    xv = yv;
                }
                d = (unsigned)((x >> shift) & mask);
            }
            a[head[b]] = x;
            if (v) v[head[b]] = xv;
            head[b]++;
        }
    }
}

/* Sort by the bits below shift + 8, 8 bits per level. */
static void radix_sort(uint64_t *a, uint32_t *v, size_t n, int shift)
{
    if (n <= 48) {
        insertion_sort(a, v, n);
        return;
    }
    size_t count[256], head[256], tail[256];
    radix_pass(a, v, n, shift, 256, count, head, tail);
    if (shift == 0) return;
    size_t at = 0;
    for (int b = 0; b < 256; b++) {
        if (count[b] > 1)
            radix_sort(a + at, v ? v + at : NULL, count[b], shift > 8 ? shift - 8 : 0);
        at += count[b];
    }
}

/* The first level takes TOP_BITS at once (one pass fewer for tables of
 * 10^6 to 10^8 keys), the rest 8 at a time. The top level's arrays are on
 * the heap: a library must not put 48 KB on its caller's stack. */
#define TOP_BITS 11
static int sort_hashes(uint64_t *a, uint32_t *v, size_t n)
{
    const unsigned buckets = 1u << TOP_BITS;
    if (n <= 4096) {
        radix_sort(a, v, n, 56);
        return BK_OK;
    }
    size_t *arrays = bk__malloc(3 * buckets * sizeof(size_t));
    if (arrays == NULL) return BK_ENOMEM;
    size_t *count = arrays, *head = arrays + buckets, *tail = arrays + 2 * buckets;
    radix_pass(a, v, n, 64 - TOP_BITS, buckets, count, head, tail);
    size_t at = 0;
    for (unsigned b = 0; b < buckets; b++) {
        if (count[b] > 1)
            radix_sort(a + at, v ? v + at : NULL, count[b], 64 - TOP_BITS - 8);
        at += count[b];
    }
    bk__free(arrays);
    return BK_OK;
}

int bk__peel_sort_dedupe(bk__peel *p, uint64_t n, uint64_t *conflict_hash)
{
    int rc = sort_hashes(p->hashes, p->values, (size_t)n);
    if (rc != BK_OK) return rc;
    uint64_t out = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (out > 0 && p->hashes[i] == p->hashes[out - 1]) {
            if (p->values != NULL && p->values[i] != p->values[out - 1]) {
                if (conflict_hash) *conflict_hash = p->hashes[i];
                return BK_ECONFLICT;
            }
            continue;
        }
        p->hashes[out] = p->hashes[i];
        if (p->values) p->values[out] = p->values[i];
        out++;
    }
    p->duplicates = n - out;
    p->n = out;
    return BK_OK;
}

/*==========================================================================
 * Peeling
 *==========================================================================*/

/* A set: counts and hash XORs in separate arrays (13 bytes per cell). */
static int peel_set(bk__peel *p, const bk__fuse_shape *s)
{
    /* Locals, not p->...: the counts are bytes, and a store through a
     * byte pointer may alias anything, which would make the compiler
     * reload every field after each count update. */
    const uint32_t cells = s->array_length;
    const bk__fuse_shape shape = *s;
    uint8_t *count = p->count;
    uint64_t *xor_hash = p->xor_hash;
    const uint64_t *hashes = p->hashes;
    uint32_t *queue = p->queue;
    const uint64_t n = p->n;

    memset(count, 0, cells);
    memset(xor_hash, 0, (size_t)cells * sizeof(uint64_t));

    /* Attach every key to its three cells. The hashes are sorted, so the
     * first cells advance through the table in order and the other two
     * trail one and two segments behind: the working set is three windows. */
    int overflow = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t h = hashes[i];
        uint32_t c[3];
        bk__fuse_cells(&shape, h, c);
        for (int j = 0; j < 3; j++) {
            overflow |= count[c[j]] == 255; /* absurd load: try another seed */
            count[c[j]]++;
            xor_hash[c[j]] ^= h;
        }
    }
    if (overflow) return 0;

    /* The hashes are now in the cells; their array becomes the stack. */
    uint32_t *stack = (uint32_t *)(void *)p->hashes;
    p->stack = stack;
    uint64_t queued = 0, peeled = 0;
    for (uint32_t c = 0; c < cells; c++) {
        queue[queued] = c;
        queued += count[c] == 1;
    }
    while (queued > 0) {
        uint32_t lone = queue[--queued];
        if (count[lone] != 1) continue; /* its key left through another cell */
        uint64_t h = xor_hash[lone];
        uint32_t c[3];
        bk__fuse_cells(&shape, h, c);
        stack[peeled++] = lone;
        count[lone] = 0;
        /* detach from the two other cells; the lone cell keeps the hash
         * for the assignment */
        for (int j = 0; j < 3; j++) {
            uint32_t x = c[j];
            if (x == lone) continue;
            xor_hash[x] ^= h;
            queue[queued] = x;
            queued += --count[x] == 1;
        }
    }
    p->peeled = peeled;
    return peeled == n;
}

/* A map: the same with index XORs (the values stay in their array), and
 * the stack and the queue in one array: the stack grows from its front,
 * the queue (last in, first out, as for sets) from its back. */
static int peel_map(bk__peel *p, const bk__fuse_shape *s)
{
    const uint32_t cells = s->array_length;
    const bk__fuse_shape shape = *s;
    uint8_t *count = p->count;
    uint32_t *xor_index = p->xor_index;
    const uint64_t *hashes = p->hashes;
    uint32_t *both = p->queue;
    const uint64_t n = p->n;
    if (n > UINT32_MAX) return 0; /* indexes are 32-bit (cells are too) */

    memset(count, 0, cells);
    memset(xor_index, 0, (size_t)cells * sizeof(uint32_t));
    int overflow = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t c[3];
        bk__fuse_cells(&shape, hashes[i], c);
        for (int j = 0; j < 3; j++) {
            overflow |= count[c[j]] == 255; /* absurd load: try another seed */
            count[c[j]]++;
            xor_index[c[j]] ^= (uint32_t)i;
        }
    }
    if (overflow) return 0;

    /* queue entries: both[cells], both[cells - 1], ... (pending = how
     * many); a rejected push writes the free slot just below them. The
     * stack (peeled entries) plus the pending entries never exceed the
     * cells ever queued, at most `cells`, so the stack [0, peeled) and the
     * queue (cells - pending, cells] never meet. */
    uint64_t pending = 0, peeled = 0;
    p->stack = both;
    for (uint32_t c = 0; c < cells; c++) {
        both[cells - pending] = c;
        pending += count[c] == 1;
    }
    while (pending > 0) {
        uint32_t lone = both[cells - --pending];
        if (count[lone] != 1) continue;
        uint32_t key = xor_index[lone];
        uint32_t c[3];
        bk__fuse_cells(&shape, hashes[key], c);
        both[peeled++] = lone;
        count[lone] = 0;
        /* the lone cell keeps the key's index for the assignment */
        for (int j = 0; j < 3; j++) {
            uint32_t x = c[j];
            if (x == lone) continue;
            xor_index[x] ^= key;
            both[cells - pending] = x;
            pending += --count[x] == 1;
        }
    }
    p->peeled = peeled;
    return peeled == n;
}

int bk__peel_run(bk__peel *p, const bk__fuse_shape *s)
{
    return p->xor_index != NULL ? peel_map(p, s) : peel_set(p, s);
}

int bk__peel_search(bk__peel *p, const void *const *keys, const size_t *lens,
                    const uint32_t *values, uint64_t n, uint64_t seed,
                    const bk__fuse_shape *most, bk__fuse_shape *shape,
                    uint64_t *used_seed, uint32_t *attempts,
                    uint64_t *conflict_hash)
{
    for (uint32_t attempt = 0; attempt < BK__PEEL_MAX_ATTEMPTS; attempt++) {
        uint64_t s = bk__peel_attempt_seed(seed, attempt);
        *used_seed = s;
        *attempts = attempt + 1;
        for (uint64_t i = 0; i < n; i++) {
            p->hashes[i] = bk__hash(keys[i], lens[i], s).lo;
            if (values != NULL) p->values[i] = values[i];
        }
        int rc = bk__peel_sort_dedupe(p, n, conflict_hash);
        if (rc != BK_OK) return rc;
        rc = bk__fuse_shape_for(p->n, shape);
        if (rc != BK_OK) return rc;
        /* fewer distinct keys never need more cells; should rounding ever
         * say otherwise, the table sized for all n keys works too */
        if (shape->array_length > p->cells_room) *shape = *most;
        if (bk__peel_run(p, shape)) return BK_OK;
    }
    return BK_EBUILD;
}

/*==========================================================================
 * The table of a static family (see peel.h)
 *==========================================================================*/

int bk__fuse_table_build(bk__fuse_table *t, bk__peel *p, uint32_t padding,
                         const void *const *keys, const size_t *lens,
                         const uint32_t *values, uint64_t n, uint64_t seed,
                         const bk__fuse_shape *most, uint64_t *conflict_hash)
{
    t->temp_bytes = p->temp_bytes;
    int rc = bk__peel_search(p, keys, lens, values, n, seed, most, &t->shape, &t->seed,
                             &t->attempts, conflict_hash);
    if (rc != BK_OK) return rc;
    t->cells = bk__calloc_aligned(bk__fuse_table_bytes(&t->shape, t->width, padding));
    if (t->cells == NULL) return BK_ENOMEM;
    t->owns_cells = 1;
    t->items = p->n;
    t->duplicates = p->duplicates;
    return BK_OK;
}

void bk__fuse_table_release(bk__fuse_table *t)
{
    if (t->owns_cells) bk__free_aligned(t->cells);
}

void bk__fuse_table_describe(const bk__fuse_table *t, uint32_t padding, double fpr,
                             bk__image *img)
{
    bk__part *p = &img->parts[0];
    img->seed = t->seed;
    img->capacity = t->items;
    img->fpr = fpr;
    img->items = t->items;
    p->m = t->shape.array_length;
    p->k = 3;
    p->width = (uint8_t)t->width;
    p->param = t->shape.segment_length;
    p->capacity = t->items;
    p->fpr = fpr;
    p->items = t->items;
    p->data = t->cells;
    p->length = bk__fuse_table_bytes(&t->shape, t->width, padding);
}

int bk__fuse_table_restore(const bk__image *img, uint32_t padding, double fpr,
                           bk__fuse_table *t)
{
    const bk__part *p = &img->parts[0];
    bk__fuse_shape shape;
    if (img->nparts != 1 || p->k != 3) return BK_ECORRUPT;
    if (bk__fuse_shape_from(p->param, p->m, &shape) != BK_OK) return BK_ECORRUPT;
    if (p->length != bk__fuse_table_bytes(&shape, p->width, padding)) return BK_ECORRUPT;
    /* a table holds at most one key per cell */
    if (img->items > shape.array_length || p->items != img->items ||
        img->capacity != img->items || p->capacity != img->items)
        return BK_ECORRUPT;
    if (img->fpr != fpr || p->fpr != fpr) return BK_ECORRUPT;
    if (img->flags != 0 || p->flags != 0 || p->slots != 0) return BK_ECORRUPT;
    memset(t, 0, sizeof(*t));
    t->shape = shape;
    t->width = p->width;
    t->cells = p->data;
    t->owns_cells = 0;
    t->seed = img->seed;
    t->items = img->items;
    return BK_OK;
}

void bk__static_info(uint64_t seed, uint64_t items, double target_fpr, double fpr,
                     double cells, size_t bytes, uint32_t parts, bk_filter_info *out)
{
    out->seed = seed;
    out->capacity = items;
    out->target_fpr = target_fpr;
    out->items = items;
    out->estimated_items = (double)items;
    out->fpr_now = fpr;
    out->fpr_at_capacity = fpr;
    out->fill = (double)items / cells; /* a table has 12 cells or more */
    out->bytes = bytes;
    out->parts = parts;
}

void bk__fuse_table_allocations(const bk__fuse_table *t, uint32_t padding,
                                const void *handle, size_t handle_size,
                                bk__visit_fn visit, void *ctx)
{
    visit(ctx, handle, handle_size);
    if (t->owns_cells)
        visit(ctx, bk__aligned_raw(t->cells),
              bk__aligned_asked(bk__fuse_table_bytes(&t->shape, t->width, padding)));
}

int64_t bk__static_add_batch(void *f, const void *const *keys, const size_t *lens,
                             size_t n, uint8_t *results)
{
    (void)f, (void)keys, (void)lens, (void)n, (void)results;
    return BK_ESTATIC;
}
