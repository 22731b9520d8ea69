/*
 * value.c - what a key holds (bkc_value) and its byte form.
 *
 * A value is one bloomkit filter (BF: a scalable or growable filter; CF: a cuckoo
 * filter of one or more stages, with the key's settings; CBF: a counting
 * filter; WF: a time-window filter; SF: a static filter or map), an RS
 * reconciliation set (cmd_keyset.c), or a dump being loaded
 * (BKC_KIND_LOADING).
 *
 * The byte form (SCANDUMP/LOADCHUNK, snapshots, the module's RDB) is a
 * container, all integers little-endian (docs/COMMANDS.md, "Value
 * encoding"):
 *
 *   offset size
 *        0    4  magic "BKCV"
 *        4    2  container version (1)
 *        6    2  kind (bkc_kind: 1 BF, 2 CF, 3 CBF, 4 WF, 5 loading,
 *                6 SF: a static filter or map, 7 RS: a reconciliation set,
 *                8 TF: a per-item TTL filter)
 *        8    8  total length of the container, this header included
 *       16    4  number of filters
 *       20    4  CF bucket size          (0 for other kinds)
 *       24    8  CF capacity of stage 0  (0 for other kinds)
 *       32    4  CF max iterations       (0 for other kinds)
 *       36    4  CF expansion            (0 for other kinds)
 *       40    8  CF items deleted        (0 for other kinds)
 *       48    8  check: low 64 bits of XXH3-128 (bk_hash_key) of bytes
 *                0..47 with seed 0
 *       56       per filter: 8-byte length, then the filter's bloomkit
 *                file image (docs/FORMAT.md, its own checksums)
 *
 * A CF value is written as one image with one part per stage. Values
 * saved before stages existed hold one single-stage image per stage; the
 * decoder (and bkc_value_push, which the server's snapshot loader uses)
 * joins them into one filter, so they load as if written today.
 *
 * A loading value has no filters and one blob (8-byte length, the bytes
 * received so far); so has a reconciliation set (RS.*), whose blob is the
 * set's own body (cmd_keyset.c, with its own checksum). Decoding checks every field and every image
 * (bk_filter_deserialize) before anything is returned.
 *
 * SCANDUMP never builds the whole container: dump_range() copies any byte
 * range of it, taking the images' bytes with bk_filter_dump_chunk.
 *
 * Memory: a value is 32 bytes, since a Redis user may keep millions of
 * small keys: its one filter is held inline, what one kind alone needs is
 * in a union by kind or a block of its own (a CF key's settings). The
 * command layer's blocks come from bkc_allocator (Redis's, in the module),
 * and bkc_value_bytes adds them up with the filter's own
 * (bk_filter_memory_usage) as the allocator sizes them, which is what the
 * hosts count for MEMORY USAGE and maxmemory.
 */
#include <stdio.h>  /* snprintf */
#include <stdlib.h>
#include <string.h>

#include "cmd_internal.h"

/*==========================================================================
 * Values
 *==========================================================================*/

const char *bkc_kind_type_name(bkc_kind kind)
{
    switch (kind) {
    case BKC_KIND_BLOOM: return "bkbloom--";
    case BKC_KIND_CUCKOO: return "bkcuckoo-";
    case BKC_KIND_COUNTING: return "bkcount--";
    case BKC_KIND_WINDOW: return "bkwindow-";
    case BKC_KIND_LOADING: return "bkloading";
    case BKC_KIND_STATIC: return "bkstatic-";
    case BKC_KIND_KEYSET: return "bkkeyset-";
    case BKC_KIND_TTL: return "bkttl----";
    default: return NULL;
    }
}

bkc_value *bkc_value_new(bkc_kind kind)
{
    bkc_value *v = bkc__calloc(1, sizeof(*v));
    if (v == NULL) return NULL;
    v->kind = kind;
    if (kind == BKC_KIND_CUCKOO && (v->cf = bkc__calloc(1, sizeof(*v->cf))) == NULL) {
        bkc__free(v);
        return NULL;
    }
    return v;
}

static int family_fits(bkc_kind kind, bk_family family);

bkc_value *bkc_value_with(bkc_kind kind, bk_filter *f)
{
    bkc_value *v = bkc_value_new(kind);
    if (v == NULL || bkc_value_push(v, f) != BK_OK) {
        bk_filter_free(f);
        bkc_value_free(v);
        return NULL;
    }
    return v;
}

int bkc_value_push(bkc_value *v, bk_filter *f)
{
    /* a filter of another family (a damaged or forged snapshot frame) would
     * reach commands that trust the kind; LOADING and KEYSET hold none */
    if (!family_fits(v->kind, bk_filter_family(f))) return BK_EINVAL;
    /* a CF key's growable filter holds copies (a multiset), a BF key's not */
    bk_growable *g = bk_filter_as_growable(f);
    if (g != NULL && bk_growable_is_multiset(g) != (v->kind == BKC_KIND_CUCKOO)) return BK_EINVAL;
    if (v->nfilters == 1) {
        /* one filter a key; a CF key's stages may come as older stage lists */
        bk_cuckoo *dst = bk_filter_as_cuckoo(v->filters[0]);
        bk_cuckoo *src = bk_filter_as_cuckoo(f);
        if (v->kind != BKC_KIND_CUCKOO || dst == NULL || src == NULL) return BK_EINVAL;
        /* an older stage list: f's stages join the filter */
        if (dst == NULL || src == NULL) return BK_EINVAL;
        int rc = bk_cuckoo_append(dst, src);
        if (rc != BK_OK) return rc;
        bk_filter_free(f);
        return BK_OK;
    }
    v->filters[0] = f;
    v->nfilters = 1;
    bkc__cf_settings_sync(v);
    return BK_OK;
}

void bkc_value_free(bkc_value *v)
{
    if (v == NULL) return;
    if (v->kind == BKC_KIND_LOADING) {
        bkc__free(v->load_buf);
    } else if (v->kind == BKC_KIND_KEYSET) {
        bkc__keyset_free(v->keyset);
    } else {
        for (uint32_t i = 0; i < v->nfilters; i++) bk_filter_free(v->filters[i]);
        bkc__free(v->cf);
    }
    bkc__free(v);
}

void bkc_value_single_writer(bkc_value *v)
{
    if (v == NULL || v->kind == BKC_KIND_LOADING || v->kind == BKC_KIND_KEYSET) return;
    for (uint32_t i = 0; i < v->nfilters; i++) (void)bk_filter_set_single_writer(v->filters[i], 1);
}

/*==========================================================================
 * Memory
 *==========================================================================*/

static void *std_malloc(void *opaque, size_t size)
{
    (void)opaque;
    return malloc(size);
}

static void *std_calloc(void *opaque, size_t count, size_t size)
{
    (void)opaque;
    return calloc(count, size);
}

static void *std_realloc(void *opaque, void *ptr, size_t size)
{
    (void)opaque;
    return realloc(ptr, size);
}

static void std_free(void *opaque, void *ptr)
{
    (void)opaque;
    free(ptr);
}

const bkc_allocator bkc_std_allocator = {std_malloc, std_calloc, std_realloc, std_free, NULL,
                                         NULL};

static bkc_allocator allocator = {std_malloc, std_calloc, std_realloc, std_free, NULL, NULL};

void bkc_set_allocator(const bkc_allocator *a)
{
    if (a == NULL || a->malloc_fn == NULL || a->calloc_fn == NULL || a->realloc_fn == NULL ||
        a->free_fn == NULL)
        a = &bkc_std_allocator;
    allocator = *a;
}

void *bkc__malloc(size_t size)
{
    return allocator.malloc_fn(allocator.opaque, size ? size : 1);
}

void *bkc__calloc(size_t count, size_t size)
{
    if (count == 0 || size == 0) count = size = 1;
    return allocator.calloc_fn(allocator.opaque, count, size);
}

void *bkc__realloc(void *ptr, size_t size)
{
    return allocator.realloc_fn(allocator.opaque, ptr, size ? size : 1);
}

void bkc__free(void *ptr)
{
    if (ptr != NULL) allocator.free_fn(allocator.opaque, ptr);
}

size_t bkc__block_bytes(const void *ptr, size_t asked)
{
    if (ptr == NULL) return 0;
    return allocator.size_fn ? allocator.size_fn(allocator.opaque, ptr) : asked;
}

static void add_block(void *ctx, const void *ptr, size_t asked)
{
    *(size_t *)ctx += bkc__block_bytes(ptr, asked);
}

size_t bkc_value_bytes(const bkc_value *v)
{
    if (v == NULL) return 0;
    size_t total = bkc__block_bytes(v, sizeof(*v));
    if (v->kind == BKC_KIND_LOADING) {
        total += bkc__block_bytes(v->load_buf, v->load_cap);
    } else if (v->kind == BKC_KIND_KEYSET) {
        if (v->keyset != NULL) bkc__keyset_allocations(v->keyset, add_block, &total);
    } else {
        total += bkc__block_bytes(v->cf, sizeof(*v->cf));
        for (uint32_t i = 0; i < v->nfilters; i++)
            total += bk_filter_memory_usage(v->filters[i], allocator.size_fn, allocator.opaque);
    }
    return total;
}

/*==========================================================================
 * The container
 *==========================================================================*/

#define HDR_SIZE 56
#define HDR_CHECKED 48
#define CONTAINER_VERSION 1

static void put16(unsigned char *p, uint16_t x) { p[0] = (unsigned char)x; p[1] = (unsigned char)(x >> 8); }
static void put32(unsigned char *p, uint32_t x)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(x >> (8 * i));
}
static void put64(unsigned char *p, uint64_t x)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(x >> (8 * i));
}
static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const unsigned char *p)
{
    uint32_t x = 0;
    for (int i = 3; i >= 0; i--) x = (x << 8) | p[i];
    return x;
}
static uint64_t get64(const unsigned char *p)
{
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--) x = (x << 8) | p[i];
    return x;
}

static bk_family kind_family(bkc_kind kind)
{
    switch (kind) {
    case BKC_KIND_BLOOM: return BK_FAMILY_SCALABLE;
    case BKC_KIND_CUCKOO: return BK_FAMILY_CUCKOO;
    case BKC_KIND_COUNTING: return BK_FAMILY_COUNTING;
    case BKC_KIND_WINDOW: return BK_FAMILY_WINDOW;
    case BKC_KIND_STATIC: return BK_FAMILY_STATIC;
    case BKC_KIND_TTL: return BK_FAMILY_TTL;
    default: return (bk_family)0;
    }
}

/* A CBF key holds the counting family or one of the other counting kinds
 * (CBF.RESERVE ... TYPE, cmd_counting.c) or an auto-clear counting filter;
 * an SF key a static filter (binary fuse or bumped) or a static map; a BF
 * key a scalable, growable or auto-clear filter;
 * a CF key a cuckoo filter or a growable multiset (cmd_cuckoo.c). */
static int family_fits(bkc_kind kind, bk_family family)
{
    if (family == kind_family(kind)) return 1;
    if (kind == BKC_KIND_STATIC) return family == BK_FAMILY_MAP || family == BK_FAMILY_BUMPED;
    /* cmd_bloom.c, cmd_cuckoo.c: a growable filter, or one taken over from
     * RedisBloom in its own layout */
    if (kind == BKC_KIND_BLOOM)
        return family == BK_FAMILY_GROWABLE || family == BK_FAMILY_RBLOOM ||
               family == BK_FAMILY_AUTOCLEAR;
    if (kind == BKC_KIND_CUCKOO) return family == BK_FAMILY_GROWABLE || family == BK_FAMILY_RCUCKOO;
    /* AUTOCLEAR (BF.RESERVE, CBF.RESERVE): the auto-clear filter */
    return kind == BKC_KIND_COUNTING &&
           (family == BK_FAMILY_DLEFT || family == BK_FAMILY_VARCOUNT ||
            family == BK_FAMILY_HIER || family == BK_FAMILY_HYBRID ||
            family == BK_FAMILY_MORRIS || family == BK_FAMILY_AUTOCLEAR);
}

static void header_build(const bkc_value *v, uint64_t total, unsigned char h[HDR_SIZE])
{
    memset(h, 0, HDR_SIZE);
    memcpy(h, "BKCV", 4);
    put16(h + 4, CONTAINER_VERSION);
    put16(h + 6, (uint16_t)v->kind);
    put64(h + 8, total);
    put32(h + 16, v->nfilters);
    if (v->kind == BKC_KIND_CUCKOO) {
        put32(h + 20, v->cf->bucket_size);
        put64(h + 24, v->cf->capacity);
        put32(h + 32, v->cf->max_iterations);
        put32(h + 36, v->cf->expansion);
        put64(h + 40, v->cf->deleted);
    }
    put64(h + 48, bk_hash_key(h, HDR_CHECKED, 0).lo);
}

/* Total size of v's container, or 0 when a filter cannot be serialised. */
static uint64_t container_size(const bkc_value *v)
{
    uint64_t total = HDR_SIZE;
    if (v->kind == BKC_KIND_LOADING) return total + 8 + v->load_len;
    if (v->kind == BKC_KIND_KEYSET)
        return v->keyset ? total + 8 + bkc__keyset_body_size(v->keyset) : 0;
    for (uint32_t i = 0; i < v->nfilters; i++) {
        uint64_t n = bk_filter_serialized_size(v->filters[i]);
        if (n == 0) return 0;
        total += 8 + n;
    }
    return total;
}

/* Copy bytes [from, from + n) of v's container into out. */
static int dump_range(const bkc_value *v, uint64_t total, uint64_t from,
                      unsigned char *out, size_t n)
{
    unsigned char hdr[HDR_SIZE], lenbuf[8];
    uint64_t pos = 0; /* start of the current segment */
    size_t done = 0;

    header_build(v, total, hdr);
    /* segments: header, then (length, image) per filter or the blob */
    int blob = v->kind == BKC_KIND_LOADING || v->kind == BKC_KIND_KEYSET;
    uint32_t nseg = blob ? 1 : v->nfilters;
    for (int64_t s = -1; s < (int64_t)nseg && done < n; s++) {
        if (s < 0) {
            uint64_t end = HDR_SIZE;
            while (done < n && from + done < end) {
                out[done] = hdr[from + done - pos];
                done++;
            }
            pos = end;
            continue;
        }
        uint64_t image_len = v->kind == BKC_KIND_LOADING  ? v->load_len
                             : v->kind == BKC_KIND_KEYSET ? bkc__keyset_body_size(v->keyset)
                                                          : bk_filter_serialized_size(v->filters[s]);
        put64(lenbuf, image_len);
        while (done < n && from + done < pos + 8) {
            out[done] = lenbuf[from + done - pos];
            done++;
        }
        pos += 8;
        uint64_t end = pos + image_len;
        if (done < n && from + done < end) {
            uint64_t off = from + done - pos;
            size_t want = (size_t)(end - (from + done) < n - done ? end - (from + done) : n - done);
            if (v->kind == BKC_KIND_LOADING) {
                memcpy(out + done, v->load_buf + off, want);
                done += want;
            } else if (v->kind == BKC_KIND_KEYSET) {
                int rc = bkc__keyset_body_range(v->keyset, off, out + done, want);
                if (rc != BK_OK) return rc;
                done += want;
            } else {
                while (want > 0) {
                    uint64_t cursor = off;
                    size_t got = 0;
                    int rc = bk_filter_dump_chunk(v->filters[s], &cursor, out + done,
                                                  want, &got);
                    if (rc != BK_OK) return rc;
                    if (got == 0) return BK_EINVAL;
                    done += got;
                    off += got;
                    want -= got;
                }
            }
        }
        pos = end;
    }
    return done == n ? BK_OK : BK_EINVAL;
}

uint64_t bkc_value_encoded_size(const bkc_value *v)
{
    if (v == NULL) return 0;
    if (v->kind != BKC_KIND_LOADING && v->kind != BKC_KIND_KEYSET && v->nfilters == 0)
        return 0;
    return container_size(v);
}

int bkc_value_encode_range(const bkc_value *v, uint64_t from, unsigned char *out, size_t n)
{
    uint64_t total = bkc_value_encoded_size(v);
    if (total == 0 || (n > 0 && out == NULL)) return BK_EINVAL;
    if (from > total || n > total - from) return BK_EINVAL;
    return n == 0 ? BK_OK : dump_range(v, total, from, out, n);
}

int bkc_value_encode(const bkc_value *v, unsigned char **out, size_t *len)
{
    if (v == NULL || out == NULL || len == NULL) return BK_EINVAL;
    *out = NULL;
    *len = 0;
    if (v->kind != BKC_KIND_LOADING && v->kind != BKC_KIND_KEYSET && v->nfilters == 0)
        return BK_EINVAL;
    uint64_t total = container_size(v);
    if (total == 0) return BK_ENOTSUP;
    if (total > SIZE_MAX) return BK_ESIZE;
    unsigned char *buf = malloc((size_t)total);
    if (buf == NULL) return BK_ENOMEM;
    int rc = dump_range(v, total, 0, buf, (size_t)total);
    if (rc != BK_OK) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = (size_t)total;
    return BK_OK;
}

/* Check a container header (at least HDR_SIZE bytes). BK_OK or an error. */
static int header_check(const unsigned char *h, bkc_kind *kind, uint64_t *total)
{
    if (memcmp(h, "BKCV", 4) != 0) return BK_EMAGIC;
    if (get64(h + 48) != bk_hash_key(h, HDR_CHECKED, 0).lo) return BK_ECHECKSUM;
    if (get16(h + 4) != CONTAINER_VERSION) return BK_EVERSION;
    uint16_t k = get16(h + 6);
    if ((k < BKC_KIND_BLOOM || k > BKC_KIND_LOADING) && k != BKC_KIND_STATIC &&
        k != BKC_KIND_KEYSET && k != BKC_KIND_TTL)
        return BK_EFAMILY;
    *kind = (bkc_kind)k;
    *total = get64(h + 8);
    if (*total < HDR_SIZE + 8) return BK_ECORRUPT;
    return BK_OK;
}

int bkc_value_decode(const unsigned char *buf, size_t len, bkc_value **out)
{
    bkc_kind kind;
    uint64_t total;
    int rc;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (buf == NULL || len < HDR_SIZE) return BK_ETRUNC;
    if ((rc = header_check(buf, &kind, &total)) != BK_OK) return rc;
    if (total > len) return BK_ETRUNC;
    if (total < len) return BK_ECORRUPT;

    uint32_t nfilters = get32(buf + 16);
    bkc_value *v = bkc_value_new(kind);
    if (v == NULL) return BK_ENOMEM;
    size_t pos = HDR_SIZE;

    if (kind == BKC_KIND_LOADING) {
        uint64_t n = get64(buf + pos);
        pos += 8;
        if (nfilters != 0 || n != len - pos) goto corrupt;
        v->load_buf = bkc__malloc((size_t)n);
        if (v->load_buf == NULL) goto nomem;
        memcpy(v->load_buf, buf + pos, (size_t)n);
        v->load_len = v->load_cap = (size_t)n;
        *out = v;
        return BK_OK;
    }

    if (kind == BKC_KIND_KEYSET) {
        if (nfilters != 0 || len - pos < 8) goto corrupt;
        for (int i = 20; i < 48; i++)
            if (buf[i] != 0) goto corrupt;
        uint64_t n = get64(buf + pos);
        pos += 8;
        if (n != len - pos) goto corrupt;
        rc = bkc__keyset_body_decode(buf + pos, (size_t)n, &v->keyset);
        if (rc != BK_OK) goto fail;
        *out = v;
        return BK_OK;
    }

    if (kind == BKC_KIND_CUCKOO) {
        bkc_cf_settings *cf = v->cf;
        cf->bucket_size = get32(buf + 20);
        cf->capacity = get64(buf + 24);
        cf->max_iterations = get32(buf + 32);
        cf->expansion = get32(buf + 36);
        cf->deleted = get64(buf + 40);
        if (nfilters < 1 || nfilters > BKC_CF_MAX_STAGES) goto corrupt;
        /* bloomkit's chains take 2, 4 or 8 (checked below); RedisBloom's
         * layout 1 to 255 */
        if (cf->bucket_size < 1 || cf->bucket_size > 255) goto corrupt;
        if (cf->capacity < cf->bucket_size) goto corrupt;
        if (cf->max_iterations < 1 || cf->max_iterations > 65535) goto corrupt;
        if (cf->expansion > 32768) goto corrupt;
    } else {
        if (nfilters != 1) goto corrupt;
        for (int i = 20; i < 48; i++)
            if (buf[i] != 0) goto corrupt;
    }

    for (uint32_t i = 0; i < nfilters; i++) {
        if (len - pos < 8) { rc = BK_ETRUNC; goto fail; }
        uint64_t n = get64(buf + pos);
        pos += 8;
        if (n > len - pos) { rc = BK_ETRUNC; goto fail; }
        bk_filter *f = NULL;
        rc = bk_filter_deserialize(&f, buf + pos, (size_t)n);
        if (rc != BK_OK) goto fail;
        if (!family_fits(kind, bk_filter_family(f))) {
            bk_filter_free(f);
            rc = BK_EFAMILY;
            goto fail;
        }
        rc = bkc_value_push(v, f);
        if (rc != BK_OK) {
            bk_filter_free(f);
            if (rc == BK_ENOMEM) goto nomem;
            goto corrupt; /* a CF stage that cannot join the others */
        }
        pos += (size_t)n;
    }
    if (pos != len) goto corrupt;
    /* RedisBloom's layout keeps its own settings (bkc_value_push copied
     * them over the header's) */
    if (kind == BKC_KIND_CUCKOO && bkc__rb_filter(v) == NULL) {
        if (v->cf->bucket_size != 2 && v->cf->bucket_size != 4 && v->cf->bucket_size != 8)
            goto corrupt;
        if (v->cf->capacity < 2ull * v->cf->bucket_size) goto corrupt;
        if (v->cf->max_iterations > BK_CUCKOO_MAX_KICKS) goto corrupt;
    }
    if (kind == BKC_KIND_CUCKOO && v->nfilters == 1 && bk_filter_as_cuckoo(v->filters[0])) {
        const bk_cuckoo *cf = bk_filter_as_cuckoo(v->filters[0]);
        if (bk_cuckoo_stages(cf) > BKC_CF_MAX_STAGES ||
            bk_cuckoo_bucket_size(cf) != v->cf->bucket_size ||
            bk_cuckoo_max_kicks(cf) != v->cf->max_iterations)
            goto corrupt;
    }
    *out = v;
    return BK_OK;

corrupt:
    rc = BK_ECORRUPT;
    goto fail;
nomem:
    rc = BK_ENOMEM;
fail:
    bkc_value_free(v);
    return rc;
}

/*==========================================================================
 * SCANDUMP / LOADCHUNK, shared by every kind
 *==========================================================================*/

size_t bkc__scandump_chunk = 4u << 20;

#define ERR_ITERATOR "ERR invalid iterator"
#define ERR_ORDER "ERR chunk out of order"

/*--------------------------------------------------------------------------
 * RedisBloom's chunks (a value in RedisBloom's layout: lib/rbloom.c,
 * lib/rcuckoo.c). SCANDUMP gives them as RedisBloom does: iterator 0 the
 * header, then data chunks at RedisBloom's iterators, [0, ""] at the end.
 * LOADCHUNK takes iterator 1 as a header, which no dump of ours can be
 * (our first chunk ends at its length, at least HDR_SIZE): a new filter of
 * that shape, every bit clear, replaces the key's value of this kind at
 * once (as in RedisBloom, the key is usable from then on); a later
 * iterator on a key in RedisBloom's layout copies its chunk into place.
 * A chunk that is refused changes nothing.
 *--------------------------------------------------------------------------*/

bk_filter *bkc__rb_filter(const bkc_value *v)
{
    if ((v->kind != BKC_KIND_BLOOM && v->kind != BKC_KIND_CUCKOO) || v->nfilters != 1) return NULL;
    bk_family fam = bk_filter_family(v->filters[0]);
    return fam == BK_FAMILY_RBLOOM || fam == BK_FAMILY_RCUCKOO ? v->filters[0] : NULL;
}

void bkc__cf_settings_sync(bkc_value *v)
{
    const bk_rcuckoo *rc = v->kind == BKC_KIND_CUCKOO && v->nfilters == 1
                               ? bk_filter_as_rcuckoo(v->filters[0])
                               : NULL;
    if (rc == NULL || v->cf == NULL) return;
    /* stage 0's slots are RedisBloom's capacity after its rounding */
    uint64_t stage0 = bk_rcuckoo_buckets(rc);
    v->cf->capacity = stage0 * bk_rcuckoo_bucket_size(rc);
    v->cf->bucket_size = bk_rcuckoo_bucket_size(rc);
    v->cf->max_iterations = bk_rcuckoo_max_iterations(rc);
    v->cf->expansion = bk_rcuckoo_expansion(rc);
    v->cf->deleted = bk_rcuckoo_deleted(rc);
}

static size_t rb_header(bk_filter *f, void *buf, size_t cap)
{
    bk_rbloom *b = bk_filter_as_rbloom(f);
    return b ? bk_rbloom_header(b, buf, cap) : bk_rcuckoo_header(bk_filter_as_rcuckoo(f), buf, cap);
}

static int rb_chunk(bk_filter *f, uint64_t iter, uint64_t *next, const void **data, size_t *len)
{
    bk_rbloom *b = bk_filter_as_rbloom(f);
    return b ? bk_rbloom_chunk(b, iter, next, data, len)
             : bk_rcuckoo_chunk(bk_filter_as_rcuckoo(f), iter, next, data, len);
}

/* Items a CF value holds (every layout). */
static uint64_t cf_items(const bkc_value *v)
{
    if (v->nfilters != 1) return 1;
    bk_filter *f = v->filters[0];
    if (bk_filter_as_rcuckoo(f)) return bk_rcuckoo_items(bk_filter_as_rcuckoo(f));
    if (bk_filter_as_cuckoo(f)) return bk_cuckoo_items(bk_filter_as_cuckoo(f));
    if (bk_filter_as_growable(f)) return bk_growable_items(bk_filter_as_growable(f));
    return 1;
}

static void rb_scandump(bkc_ctx *c, bk_filter *f, uint64_t iter)
{
    if (iter == 0) {
        size_t n = rb_header(f, NULL, 0);
        unsigned char *buf = bkc__malloc(n);
        if (buf == NULL) {
            bkc__err(c, BKC_ERR_OOM);
            return;
        }
        rb_header(f, buf, n);
        bkc__array(c, 2);
        bkc__int(c, 1);
        c->reply->vt->bulk(c->reply, buf, n);
        bkc__free(buf);
        return;
    }
    uint64_t next = 0;
    const void *data = NULL;
    size_t len = 0;
    if (rb_chunk(f, iter, &next, &data, &len) != BK_OK) {
        /* RedisBloom answers an iterator past the end (or one it never
         * gave) as the end of the dump */
        next = 0;
        len = 0;
    }
    bkc__array(c, 2);
    bkc__int(c, (long long)next);
    if (next == 0 && bk_filter_as_rcuckoo(f) != NULL)
        c->reply->vt->null(c->reply); /* RedisBloom's CF end: [0, nil] */
    else
        c->reply->vt->bulk(c->reply, len ? data : "", len);
}

/* LOADCHUNK of RedisBloom's chunks on an open key (held: what it holds).
 * Returns 1 when the key changed. */
static int rb_loadchunk(bkc_ctx *c, bkc_key *k, bkc_kind kind, bkc_value *held, uint64_t iter,
                        bkc_str data)
{
    char msg[160];
    if (iter != 1) {
        bk_filter *f = bkc__rb_filter(held);
        bk_rbloom *b = bk_filter_as_rbloom(f);
        int rc = b ? bk_rbloom_load_chunk(b, iter, data.ptr, data.len)
                   : bk_rcuckoo_load_chunk(bk_filter_as_rcuckoo(f), iter, data.ptr, data.len);
        if (rc != BK_OK) {
            snprintf(msg, sizeof(msg), "ERR invalid chunk: %s", bk_strerror(rc));
            bkc__err(c, msg);
            return 0;
        }
        bkc__ok(c);
        return 1;
    }
    bk_filter *f = NULL;
    int rc;
    if (kind == BKC_KIND_BLOOM) {
        bk_rbloom *b = NULL;
        rc = bk_rbloom_from_header(&b, data.ptr, data.len);
        if (rc == BK_OK) f = bk_rbloom_as_filter(b);
    } else {
        bk_rcuckoo *r = NULL;
        rc = bk_rcuckoo_from_header(&r, data.ptr, data.len);
        if (rc == BK_OK) f = bk_rcuckoo_as_filter(r);
    }
    if (rc != BK_OK) {
        if (rc == BK_ENOMEM) snprintf(msg, sizeof(msg), "%s", BKC_ERR_OOM);
        else if (rc == BK_ESIZE) snprintf(msg, sizeof(msg), "%s", BKC_ERR_TOO_LARGE);
        else snprintf(msg, sizeof(msg), "ERR invalid chunk: %s", bk_strerror(rc));
        bkc__err(c, msg);
        return 0;
    }
    if (!bkc__fits(c, bk_filter_memory_usage(f, NULL, NULL))) {
        bk_filter_free(f);
        return 0;
    }
    bkc_value *nv = bkc__value_of(c, kind, f);
    if (nv == NULL) return 0;
    bkc__cf_settings_sync(nv);
    if (!bkc__store(c, k, nv)) return 0;
    bkc__ok(c);
    return 1;
}

void bkc__scandump(bkc_ctx *c, int argc, const bkc_str *argv, bkc_kind kind)
{
    long long iter;
    bkc_key *k;
    (void)argc;
    if (!bkc_parse_ll(argv[2], &iter) || iter < 0) {
        bkc__err(c, ERR_ITERATOR);
        return;
    }
    bkc_value *v = bkc__open_found(c, argv[1], BKC_OPEN_WHOLE, kind, &k);
    if (v == NULL) return;
    if (kind == BKC_KIND_CUCKOO && cf_items(v) == 0) {
        /* RedisBloom's answer for a CF key without items, whatever the
         * iterator: nothing to dump */
        bkc__array(c, 2);
        bkc__int(c, 0);
        c->reply->vt->null(c->reply);
    } else if (bkc__rb_filter(v) != NULL) {
        rb_scandump(c, bkc__rb_filter(v), (uint64_t)iter);
    } else {
        uint64_t total = container_size(v);
        if (total == 0) {
            bkc__lib_error(c, BK_ENOTSUP);
        } else if ((uint64_t)iter >= total) {
            bkc__array(c, 2);
            bkc__int(c, 0);
            c->reply->vt->bulk(c->reply, "", 0);
        } else {
            uint64_t n = total - (uint64_t)iter;
            if (n > bkc__scandump_chunk) n = bkc__scandump_chunk;
            /* the first chunk always holds the whole header: LOADCHUNK
             * checks it before it replaces anything */
            if (iter == 0 && n < HDR_SIZE) n = total < HDR_SIZE ? total : HDR_SIZE;
            unsigned char *buf = bkc__malloc((size_t)n);
            int rc = buf ? dump_range(v, total, (uint64_t)iter, buf, (size_t)n) : BK_ENOMEM;
            if (rc != BK_OK) {
                bkc__lib_error(c, rc);
            } else {
                bkc__array(c, 2);
                bkc__int(c, iter + (long long)n);
                c->reply->vt->bulk(c->reply, buf, (size_t)n);
            }
            bkc__free(buf);
        }
    }
    bkc__close(c, k);
}

static const char *kind_noun(bkc_kind kind)
{
    switch (kind) {
    case BKC_KIND_BLOOM: return "Bloom filter";
    case BKC_KIND_CUCKOO: return "cuckoo filter";
    case BKC_KIND_COUNTING: return "counting Bloom filter";
    case BKC_KIND_WINDOW: return "time-window filter";
    case BKC_KIND_STATIC: return "static filter or map";
    case BKC_KIND_KEYSET: return "reconciliation set";
    case BKC_KIND_TTL: return "TTL filter";
    default: return "filter";
    }
}

/* Append data to a loading value, growing its buffer (never beyond the
 * announced total once the header is known). */
static int load_append(bkc_value *v, const bkc_str data, uint64_t total)
{
    size_t need = v->load_len + data.len;
    if (need > v->load_cap) {
        size_t cap = v->load_cap ? v->load_cap : 4096;
        while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        if (total != 0 && cap > total && need <= total) cap = (size_t)total;
        unsigned char *p = bkc__realloc(v->load_buf, cap);
        if (p == NULL) return BK_ENOMEM;
        v->load_buf = p;
        v->load_cap = cap;
    }
    if (data.len > 0) memcpy(v->load_buf + v->load_len, data.ptr, data.len);
    v->load_len = need;
    return BK_OK;
}

/* Is hdr (HDR_SIZE bytes) the header of a dump of kind whose rest (beyond
 * the `have` bytes already held) fits in memory? 1, or 0 with the error
 * text in msg. */
static int chunk_header_ok(bkc_ctx *c, const unsigned char *hdr, bkc_kind kind, size_t have,
                           uint64_t *total, char *msg, size_t cap)
{
    bkc_kind dk;
    int rc = header_check(hdr, &dk, total);
    if (rc != BK_OK) {
        snprintf(msg, cap, "ERR invalid chunk: %s", bk_strerror(rc));
        return 0;
    }
    if (dk != kind) {
        snprintf(msg, cap, "ERR invalid chunk: not a %s dump", kind_noun(kind));
        return 0;
    }
    if (*total - have > bkc__memory_budget(c)) {
        size_t left = c->host_vt->memory_left(c->host);
        snprintf(msg, cap, "%s",
                 left != SIZE_MAX && *total - have > left ? BKC_ERR_MAXMEMORY
                                                          : BKC_ERR_TOO_LARGE);
        return 0;
    }
    return 1;
}

void bkc__loadchunk(bkc_ctx *c, int argc, const bkc_str *argv, bkc_kind kind)
{
    long long iter;
    bkc_key *k;
    bkc_value *v;
    bkc_str data = argv[3];
    char msg[160];

    int rb = kind == BKC_KIND_BLOOM || kind == BKC_KIND_CUCKOO; /* RedisBloom's too */
    if (!bkc_parse_ll(argv[2], &iter) || iter <= 0 || data.len == 0 ||
        ((uint64_t)iter < data.len && !(rb && iter == 1))) {
        bkc__err(c, ERR_ITERATOR);
        return;
    }
    uint64_t start = (uint64_t)iter < data.len ? 0 : (uint64_t)iter - data.len;
    /* open: a first chunk may replace a value of this kind or a load in
     * progress; later chunks continue a load in progress */
    k = c->host_vt->open(c->host, argv[1], BKC_OPEN_WRITE);
    if (k == NULL) {
        bkc__err(c, BKC_ERR_OPEN);
        return;
    }
    bkc_kind held = c->host_vt->kind(k);
    v = c->host_vt->value(k);
    int changed = 0;
    if (held != BKC_KIND_NONE && held != kind && held != BKC_KIND_LOADING) {
        bkc__err(c, BKC_ERR_WRONGTYPE);
        goto out;
    }
    /* (RedisBloom's data chunks never start at 0: theirs is iterator - length - 1) */
    if (rb && (iter == 1 ||
               (start != 0 && held == kind && v != NULL && bkc__rb_filter(v) != NULL))) {
        changed = rb_loadchunk(c, k, kind, v, (uint64_t)iter, data);
        goto out;
    }
    /* A chunk that cannot start a dump of this kind is refused before
     * anything is replaced: the key stays exactly as it was. */
    uint64_t total = 0;
    if (start == 0) {
        if (data.len < HDR_SIZE) {
            bkc__err(c, "ERR invalid chunk: shorter than the dump header");
            goto out;
        }
        if (!chunk_header_ok(c, (const unsigned char *)data.ptr, kind, 0, &total, msg,
                             sizeof(msg))) {
            bkc__err(c, msg);
            goto out;
        }
        if (data.len > total) {
            snprintf(msg, sizeof(msg), "ERR invalid chunk: %s", bk_strerror(BK_ECORRUPT));
            bkc__err(c, msg);
            goto out;
        }
        if (data.len == total) {
            /* the whole dump in one chunk: decoded (every checksum) before
             * the key is touched */
            bkc_value *done = NULL;
            int rc = bkc_value_decode((const unsigned char *)data.ptr, data.len, &done);
            if (rc != BK_OK) {
                if (rc == BK_ENOMEM) snprintf(msg, sizeof(msg), "%s", BKC_ERR_OOM);
                else snprintf(msg, sizeof(msg), "ERR invalid chunk: %s", bk_strerror(rc));
                bkc__err(c, msg);
                goto out;
            }
            rc = c->host_vt->set(k, done);
            if (rc != BK_OK) {
                bkc__err(c, rc == BK_ELIMIT ? BKC_ERR_MAXMEMORY : BKC_ERR_OOM);
                goto out;
            }
            changed = 1;
            bkc__ok(c);
            goto out;
        }
    }
    if (start == 0) {
        bkc_value *nv = bkc_value_new(BKC_KIND_LOADING);
        if (nv == NULL) {
            bkc__err(c, BKC_ERR_OOM);
            goto out;
        }
        int rc = c->host_vt->set(k, nv);
        if (rc != BK_OK) {
            bkc__err(c, rc == BK_ELIMIT ? BKC_ERR_MAXMEMORY : BKC_ERR_OOM);
            goto out;
        }
        changed = 1;
        v = c->host_vt->value(k);
    } else if (held != BKC_KIND_LOADING || v == NULL) {
        bkc__err(c, ERR_ORDER);
        goto out;
    } else if (v->load_len != start) {
        snprintf(msg, sizeof(msg), "%s", ERR_ORDER);
        goto discard;
    }

    /* the header, once complete, says what the dump is and how long (a
     * load in progress saved by an older version may have only part of it) */
    size_t have = v->load_len + data.len;
    if (have >= HDR_SIZE) {
        unsigned char hdr[HDR_SIZE];
        size_t from_old = v->load_len < HDR_SIZE ? v->load_len : HDR_SIZE;
        if (from_old > 0) memcpy(hdr, v->load_buf, from_old);
        memcpy(hdr + from_old, data.ptr, HDR_SIZE - from_old);
        if (!chunk_header_ok(c, hdr, kind, v->load_len, &total, msg, sizeof(msg)))
            goto discard;
        if (have > total) {
            snprintf(msg, sizeof(msg), "ERR invalid chunk: %s", bk_strerror(BK_ECORRUPT));
            goto discard;
        }
    }
    if (load_append(v, data, total) != BK_OK) {
        snprintf(msg, sizeof(msg), "%s", BKC_ERR_OOM);
        goto discard;
    }
    changed = 1;
    c->host_vt->resized(k);

    if (total != 0 && v->load_len == total) {
        bkc_value *done = NULL;
        int rc = bkc_value_decode(v->load_buf, v->load_len, &done);
        if (rc != BK_OK) {
            if (rc == BK_ENOMEM) snprintf(msg, sizeof(msg), "%s", BKC_ERR_OOM);
            else snprintf(msg, sizeof(msg), "ERR invalid chunk: %s", bk_strerror(rc));
            goto discard;
        }
        rc = c->host_vt->set(k, done); /* frees the loading value */
        if (rc != BK_OK) {
            c->host_vt->set(k, NULL);
            bkc__err(c, rc == BK_ELIMIT ? BKC_ERR_MAXMEMORY : BKC_ERR_OOM);
            goto out;
        }
    }
    bkc__ok(c);
    goto out;

discard:
    /* no half-built filter: the load in progress is dropped */
    c->host_vt->set(k, NULL);
    changed = 1;
    bkc__err(c, msg);
out:
    if (changed) bkc__wrote(c, argc, argv);
    bkc__close(c, k);
}
