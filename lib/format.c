/*
 * format.c - the one file format of every filter family (docs/FORMAT.md).
 *
 * Layout (all integers little-endian, doubles as IEEE-754 binary64 bits):
 *
 *   [0, 128)                  file header
 *   [128, 128 + 64 * nparts)  one descriptor per sub-filter ("part")
 *   zero padding to a multiple of 64: payload_offset
 *   payload: each part's bytes at payload_offset + part.offset, every
 *            part.offset a multiple of 64, parts in order, zero padding
 *            between them, nothing after the last
 *
 * Two XXH3-64 checksums: one over the header (minus its checksum field) and
 * the descriptors, one over the whole payload. Loading checks both; mapping
 * checks the first always and the second on request, so a 10 GB filter can
 * be mapped and used without reading it all.
 *
 * Safety on load: lengths are compared with what is actually there before
 * anything is allocated; every offset and size is range-checked with
 * overflow-safe arithmetic; the family's restore() then checks that its
 * parameters agree with the part lengths. Any failure is an error code,
 * never a crash.
 *
 * Families plug in through describe() / restore() in their ops table
 * (filter.h); this file knows nothing of their internals.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "filter.h"
#include "hash.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#  error "bloomkit's file format maps payloads in place: little-endian hosts only"
#endif

/*==========================================================================
 * Constants and little-endian fields
 *==========================================================================*/

static const unsigned char MAGIC[8] = {0x89, 'B', 'K', 'F', '\r', '\n', 0x1A, '\n'};

#define FORMAT_VERSION 1
#define HEADER_SIZE 128
#define PART_SIZE 64
#define HASH_XXH3_128 BK__HASH_XXH3_128 /* XXH3-128 + the derivations of docs/HASHING.md */
#define ALIGN 64

/* Fuzzing builds (make fuzz) accept wrong checksums so that mutated inputs
 * reach the validation behind them; every other build compares them. */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#  define CHECKSUM_OK(stored, computed) ((void)(stored), (void)(computed), 1)
#else
#  define CHECKSUM_OK(stored, computed) ((stored) == (computed))
#endif

/* header field offsets */
enum {
    H_MAGIC = 0, H_VERSION = 8, H_FAMILY = 10, H_HEADER_SIZE = 12,
    H_PART_SIZE = 14, H_NPARTS = 16, H_HASH = 20, H_SEED = 24,
    H_CAPACITY = 32, H_FPR = 40, H_ITEMS = 48, H_PARAM = 56, /* 4 x u64 */
    H_FLAGS = 88, H_PAYLOAD_OFFSET = 96, H_PAYLOAD_LENGTH = 104,
    H_PAYLOAD_SUM = 112, H_HEADER_SUM = 120
};

/* descriptor field offsets */
enum {
    P_OFFSET = 0, P_LENGTH = 8, P_M = 16, P_K = 24, P_WIDTH = 28,
    P_SLOTS = 29, P_FLAGS = 30, P_CAPACITY = 32, P_FPR = 40, P_ITEMS = 48,
    P_PARAM = 56
};

static void put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint64_t align_up(uint64_t x) { return (x + ALIGN - 1) & ~(uint64_t)(ALIGN - 1); }

static uint64_t meta_size(uint32_t nparts)
{
    return align_up(HEADER_SIZE + (uint64_t)PART_SIZE * nparts);
}

#define OBJ(f) ((const bk__object *)(const void *)(f))

/*==========================================================================
 * Writing: filter -> image -> bytes
 *==========================================================================*/

typedef struct layout {
    bk__image img;
    uint64_t *offsets;       /* part offsets within the payload */
    uint64_t payload_offset;
    uint64_t payload_length;
} layout;

static void layout_free(layout *lay)
{
    bk__free(lay->img.parts);
    bk__free(lay->offsets);
    memset(lay, 0, sizeof(*lay));
}

/* Ask the family for its image and place the parts. */
static int layout_build(const bk_filter *f, layout *lay)
{
    const bk__family_ops *ops = OBJ(f)->ops;
    memset(lay, 0, sizeof(*lay));
    if (ops->nparts == NULL || ops->describe == NULL) return BK_ENOTSUP;
    uint32_t n = ops->nparts(f);
    if (n == 0 || n > BK__MAX_PARTS) return BK_ECORRUPT;
    lay->img.parts = bk__calloc(n, sizeof(bk__part));
    lay->offsets = bk__calloc(n, sizeof(uint64_t));
    if (lay->img.parts == NULL || lay->offsets == NULL) goto nomem;
    lay->img.nparts = n;
    int rc = ops->describe(f, &lay->img);
    if (rc != BK_OK) {
        layout_free(lay);
        return rc;
    }
    lay->img.family = (uint32_t)ops->family;
    uint64_t end = 0;
    for (uint32_t i = 0; i < n; i++) {
        lay->offsets[i] = align_up(end);
        end = lay->offsets[i] + lay->img.parts[i].length;
    }
    lay->payload_offset = meta_size(n);
    lay->payload_length = end;
    return BK_OK;
nomem:
    layout_free(lay);
    return BK_ENOMEM;
}

/* Feed the payload bytes (parts and padding) in order to a hash state. */
static uint64_t payload_checksum(const layout *lay)
{
    static const unsigned char zeros[ALIGN];
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    uint64_t pos = 0;
    for (uint32_t i = 0; i < lay->img.nparts; i++) {
        XXH3_64bits_update(&st, zeros, (size_t)(lay->offsets[i] - pos));
        XXH3_64bits_update(&st, lay->img.parts[i].data,
                           (size_t)lay->img.parts[i].length);
        pos = lay->offsets[i] + lay->img.parts[i].length;
    }
    return XXH3_64bits_digest(&st);
}

static uint64_t header_checksum(const unsigned char *meta, uint32_t nparts)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, meta, H_HEADER_SUM);
    XXH3_64bits_update(&st, meta + HEADER_SIZE, (size_t)PART_SIZE * nparts);
    return XXH3_64bits_digest(&st);
}

/* Fill meta (payload_offset bytes) with header and descriptors. */
static void write_meta(const layout *lay, unsigned char *meta, uint64_t sum)
{
    const bk__image *img = &lay->img;
    memset(meta, 0, (size_t)lay->payload_offset);
    memcpy(meta + H_MAGIC, MAGIC, 8);
    put16(meta + H_VERSION, FORMAT_VERSION);
    put16(meta + H_FAMILY, (uint16_t)img->family);
    put16(meta + H_HEADER_SIZE, HEADER_SIZE);
    put16(meta + H_PART_SIZE, PART_SIZE);
    bk__put_le32(meta + H_NPARTS, img->nparts);
    bk__put_le32(meta + H_HASH, img->hash ? img->hash : HASH_XXH3_128);
    bk__put_le64(meta + H_SEED, img->seed);
    bk__put_le64(meta + H_CAPACITY, img->capacity);
    bk__put_le_f64(meta + H_FPR, img->fpr);
    bk__put_le64(meta + H_ITEMS, img->items);
    for (int i = 0; i < BK__IMAGE_PARAMS; i++) bk__put_le64(meta + H_PARAM + 8 * i, img->param[i]);
    bk__put_le64(meta + H_FLAGS, img->flags);
    bk__put_le64(meta + H_PAYLOAD_OFFSET, lay->payload_offset);
    bk__put_le64(meta + H_PAYLOAD_LENGTH, lay->payload_length);
    bk__put_le64(meta + H_PAYLOAD_SUM, sum);
    for (uint32_t i = 0; i < img->nparts; i++) {
        const bk__part *p = &img->parts[i];
        unsigned char *d = meta + HEADER_SIZE + (size_t)PART_SIZE * i;
        bk__put_le64(d + P_OFFSET, lay->offsets[i]);
        bk__put_le64(d + P_LENGTH, p->length);
        bk__put_le64(d + P_M, p->m);
        bk__put_le32(d + P_K, p->k);
        d[P_WIDTH] = p->width;
        d[P_SLOTS] = p->slots;
        put16(d + P_FLAGS, p->flags);
        bk__put_le64(d + P_CAPACITY, p->capacity);
        bk__put_le_f64(d + P_FPR, p->fpr);
        bk__put_le64(d + P_ITEMS, p->items);
        bk__put_le64(d + P_PARAM, p->param);
    }
    bk__put_le64(meta + H_HEADER_SUM, header_checksum(meta, img->nparts));
}

/* A serialised filter, ready to be copied out in pieces. */
typedef struct writer {
    layout lay;
    unsigned char *meta;
} writer;

static void writer_free(writer *w)
{
    layout_free(&w->lay);
    bk__free(w->meta);
    w->meta = NULL;
}

/* The layout alone: enough to copy payload bytes, not the header. */
static int writer_layout(writer *w, const bk_filter *f)
{
    w->meta = NULL;
    if (f == NULL) return BK_EINVAL;
    return layout_build(f, &w->lay);
}

/* The header and descriptors, with the payload's checksum: a pass over
 * every part, so that a caller copying pieces of the payload alone
 * (bk_filter_dump_chunk past the header) does not pay for it per piece. */
static int writer_meta(writer *w)
{
    w->meta = bk__malloc((size_t)w->lay.payload_offset);
    if (w->meta == NULL) {
        writer_free(w);
        return BK_ENOMEM;
    }
    write_meta(&w->lay, w->meta, payload_checksum(&w->lay));
    return BK_OK;
}

static int writer_open(writer *w, const bk_filter *f)
{
    int rc = writer_layout(w, f);
    return rc == BK_OK ? writer_meta(w) : rc;
}

static uint64_t writer_total(const writer *w)
{
    return w->lay.payload_offset + w->lay.payload_length;
}

/* Copy bytes [from, from + n) of the serialised form into dst. */
static void writer_copy(const writer *w, uint64_t from, unsigned char *dst, size_t n)
{
    while (n > 0) {
        size_t take;
        if (from < w->lay.payload_offset) {
            take = (size_t)(w->lay.payload_offset - from);
            if (take > n) take = n;
            memcpy(dst, w->meta + from, take);
        } else {
            uint64_t pos = from - w->lay.payload_offset;
            take = n; /* padding up to the next part (or the end) */
            uint32_t i = 0;
            while (i < w->lay.img.nparts &&
                   w->lay.offsets[i] + w->lay.img.parts[i].length <= pos)
                i++;
            if (i == w->lay.img.nparts) return; /* past the end: caller bug */
            uint64_t start = w->lay.offsets[i];
            if (pos < start) {
                if (start - pos < take) take = (size_t)(start - pos);
                memset(dst, 0, take);
            } else {
                uint64_t left = start + w->lay.img.parts[i].length - pos;
                if (left < take) take = (size_t)left;
                memcpy(dst, (const unsigned char *)w->lay.img.parts[i].data + (pos - start), take);
            }
        }
        from += take;
        dst += take;
        n -= take;
    }
}

/* In pieces of at most 64 MiB: whoever watches the writer's progress by its
 * bytes written (/proc/<pid>/io wchar: bloomkit-server's snapshot watchdog)
 * sees each piece, where one call for a filter of gigabytes would show
 * nothing until it returns. */
#define WRITE_PIECE ((size_t)64 << 20)

static int write_all(int fd, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n > WRITE_PIECE ? WRITE_PIECE : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return BK_EIO;
        }
        p += w;
        n -= (size_t)w;
    }
    return BK_OK;
}

static int writer_to_fd(const writer *w, int fd)
{
    static const unsigned char zeros[ALIGN];
    int rc = write_all(fd, w->meta, (size_t)w->lay.payload_offset);
    uint64_t pos = 0;
    for (uint32_t i = 0; rc == BK_OK && i < w->lay.img.nparts; i++) {
        rc = write_all(fd, zeros, (size_t)(w->lay.offsets[i] - pos));
        if (rc == BK_OK)
            rc = write_all(fd, w->lay.img.parts[i].data, (size_t)w->lay.img.parts[i].length);
        pos = w->lay.offsets[i] + w->lay.img.parts[i].length;
    }
    return rc;
}

/*==========================================================================
 * Reading: bytes -> validated header -> image -> filter
 *==========================================================================*/

typedef struct header {
    const bk__family_ops *ops;
    uint32_t nparts;
    uint32_t hash; /* BK__HASH_* */
    uint64_t payload_offset;
    uint64_t payload_length;
    uint64_t payload_sum;
} header;

/* Validate the first 128 bytes on their own (no checksum yet: the
 * descriptors it covers may not be here). */
static int parse_fixed(const unsigned char *b, size_t len, header *h)
{
    if (len < HEADER_SIZE) return BK_ETRUNC;
    if (memcmp(b + H_MAGIC, MAGIC, 8) != 0) return BK_EMAGIC;
    if (get16(b + H_VERSION) != FORMAT_VERSION) return BK_EVERSION;
    if (get16(b + H_HEADER_SIZE) != HEADER_SIZE || get16(b + H_PART_SIZE) != PART_SIZE)
        return BK_ECORRUPT;
    h->ops = bk__family_lookup(get16(b + H_FAMILY));
    if (h->ops == NULL) return BK_EFAMILY;
    /* XXH3-64 only for the blocked family's split layout (which checks
     * that its part says split too) and the growable and bumped families
     * (which require it); RedisBloom's MurmurHash64A only for RedisBloom's
     * layouts (which require it) */
    h->hash = bk__get_le32(b + H_HASH);
    if (h->hash != HASH_XXH3_128 &&
        !(h->hash == BK__HASH_XXH3_64 && (h->ops->family == BK_FAMILY_BLOCKED ||
                                          h->ops->family == BK_FAMILY_GROWABLE ||
                                          h->ops->family == BK_FAMILY_BUMPED)) &&
        !(h->hash == BK__HASH_MURMUR64A && (h->ops->family == BK_FAMILY_RBLOOM ||
                                            h->ops->family == BK_FAMILY_RCUCKOO)))
        return BK_ECORRUPT;
    h->nparts = bk__get_le32(b + H_NPARTS);
    if (h->nparts == 0 || h->nparts > BK__MAX_PARTS) return BK_ECORRUPT;
    h->payload_offset = bk__get_le64(b + H_PAYLOAD_OFFSET);
    if (h->payload_offset != meta_size(h->nparts)) return BK_ECORRUPT;
    h->payload_length = bk__get_le64(b + H_PAYLOAD_LENGTH);
    if (h->payload_length > UINT64_MAX - h->payload_offset) return BK_ECORRUPT;
    h->payload_sum = bk__get_le64(b + H_PAYLOAD_SUM);
    return BK_OK;
}

/* Validate the whole meta block (payload_offset bytes): checksum, padding,
 * and the placement of every part. */
static int parse_meta(const unsigned char *b, const header *h)
{
    if (!CHECKSUM_OK(bk__get_le64(b + H_HEADER_SUM), header_checksum(b, h->nparts)))
        return BK_ECHECKSUM;
    for (uint64_t i = HEADER_SIZE + (uint64_t)PART_SIZE * h->nparts; i < h->payload_offset; i++)
        if (b[i] != 0) return BK_ECORRUPT;
    uint64_t end = 0;
    for (uint32_t i = 0; i < h->nparts; i++) {
        const unsigned char *d = b + HEADER_SIZE + (size_t)PART_SIZE * i;
        uint64_t off = bk__get_le64(d + P_OFFSET), len = bk__get_le64(d + P_LENGTH);
        if (off != align_up(end) || off < end) return BK_ECORRUPT; /* canonical placement */
        if (len == 0 || len > h->payload_length || off > h->payload_length - len)
            return BK_ECORRUPT;
        end = off + len;
    }
    if (end != h->payload_length) return BK_ECORRUPT;
    return BK_OK;
}

/* Build the image from a validated meta block and a payload in memory,
 * check the padding between parts, and let the family restore it. */
static int restore(const header *h, const unsigned char *meta,
                   unsigned char *payload, bk__object **out)
{
    *out = NULL;
    bk__image img;
    memset(&img, 0, sizeof(img));
    img.parts = bk__calloc(h->nparts, sizeof(bk__part));
    if (img.parts == NULL) return BK_ENOMEM;
    img.family = (uint32_t)h->ops->family;
    img.hash = h->hash;
    img.nparts = h->nparts;
    img.seed = bk__get_le64(meta + H_SEED);
    img.capacity = bk__get_le64(meta + H_CAPACITY);
    img.fpr = bk__get_le_f64(meta + H_FPR);
    img.items = bk__get_le64(meta + H_ITEMS);
    for (int i = 0; i < BK__IMAGE_PARAMS; i++) img.param[i] = bk__get_le64(meta + H_PARAM + 8 * i);
    img.flags = bk__get_le64(meta + H_FLAGS);

    int rc = BK_OK;
    uint64_t end = 0;
    for (uint32_t i = 0; i < h->nparts; i++) {
        const unsigned char *d = meta + HEADER_SIZE + (size_t)PART_SIZE * i;
        bk__part *p = &img.parts[i];
        uint64_t off = bk__get_le64(d + P_OFFSET);
        for (uint64_t z = end; z < off; z++)
            if (payload[z] != 0) rc = BK_ECORRUPT;
        p->length = bk__get_le64(d + P_LENGTH);
        p->data = payload + off;
        p->m = bk__get_le64(d + P_M);
        p->k = bk__get_le32(d + P_K);
        p->width = d[P_WIDTH];
        p->slots = d[P_SLOTS];
        p->flags = get16(d + P_FLAGS);
        p->capacity = bk__get_le64(d + P_CAPACITY);
        p->fpr = bk__get_le_f64(d + P_FPR);
        p->items = bk__get_le64(d + P_ITEMS);
        p->param = bk__get_le64(d + P_PARAM);
        end = off + p->length;
    }
    void *f = NULL;
    if (rc == BK_OK) rc = h->ops->restore(&img, &f);
    bk__free(img.parts);
    if (rc != BK_OK) return rc;
    *out = f;
    return BK_OK;
}

static int verify_payload(const header *h, const unsigned char *payload)
{
    uint64_t sum = bk__xxh64(payload, (size_t)h->payload_length, 0);
    return CHECKSUM_OK(h->payload_sum, sum) ? BK_OK : BK_ECHECKSUM;
}

/* Take over an aligned heap block holding the payload. */
static void adopt_block(bk__object *o, void *block, size_t len)
{
    if (o->payload_copied) {
        bk__free_aligned(block);
        return;
    }
    o->block = block;
    o->block_len = len;
    o->block_kind = BK__BLOCK_HEAP;
}

/*==========================================================================
 * API: writing
 *==========================================================================*/

uint64_t bk_filter_serialized_size(const bk_filter *f)
{
    layout lay;
    if (f == NULL || layout_build(f, &lay) != BK_OK) return 0;
    uint64_t total = lay.payload_offset + lay.payload_length;
    layout_free(&lay);
    return total;
}

int bk_filter_serialize(const bk_filter *f, void *buf, size_t cap)
{
    writer w;
    if (buf == NULL) return BK_EINVAL;
    int rc = writer_open(&w, f);
    if (rc != BK_OK) return rc;
    if (writer_total(&w) > cap) {
        rc = BK_ESIZE;
    } else {
        writer_copy(&w, 0, buf, (size_t)writer_total(&w));
    }
    writer_free(&w);
    return rc;
}

int bk_filter_write_fd(const bk_filter *f, int fd)
{
    writer w;
    if (fd < 0) return BK_EINVAL;
    int rc = writer_open(&w, f);
    if (rc != BK_OK) return rc;
    rc = writer_to_fd(&w, fd);
    writer_free(&w);
    return rc;
}

/* fsync the directory holding path, so a rename in it is durable. */
static int sync_parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 1;
    if (slash == path) n = 1; /* file in "/" */
    char *dir = bk__malloc(n + 1);
    if (dir == NULL) return BK_ENOMEM;
    if (slash) memcpy(dir, path, n); else dir[0] = '.';
    dir[n] = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    bk__free(dir);
    if (fd < 0) return BK_EIO;
    int rc = fsync(fd) == 0 ? BK_OK : BK_EIO;
    close(fd);
    return rc;
}

int bk_filter_save(const bk_filter *f, const char *path)
{
    if (f == NULL || path == NULL || *path == '\0') return BK_EINVAL;
    size_t n = strlen(path);
    char *tmp = bk__malloc(n + 16);
    if (tmp == NULL) return BK_ENOMEM;
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp-XXXXXX", 12);

    int rc = BK_EIO;
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) goto done;
    if (fchmod(fd, 0644) != 0) goto fail;
    rc = bk_filter_write_fd(f, fd);
    if (rc != BK_OK) goto fail;
    rc = BK_EIO;
    if (fsync(fd) != 0) goto fail;
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0) goto fail;
    rc = sync_parent_dir(path);
    goto done;

fail:
    {
        int saved = errno;
        if (fd >= 0) close(fd);
        unlink(tmp);
        errno = saved;
    }
done:
    bk__free(tmp);
    return rc;
}

int bk_filter_dump_chunk(const bk_filter *f, uint64_t *cursor, void *buf,
                         size_t cap, size_t *len)
{
    writer w;
    if (cursor == NULL || len == NULL || (buf == NULL && cap > 0)) return BK_EINVAL;
    *len = 0;
    int rc = writer_layout(&w, f);
    if (rc != BK_OK) return rc;
    /* the checksum is in the header: only a piece that holds some of it
     * needs it */
    if (*cursor < w.lay.payload_offset && (rc = writer_meta(&w)) != BK_OK) return rc;
    uint64_t total = writer_total(&w), from = *cursor;
    if (from > total) {
        rc = BK_EINVAL;
    } else if (from == total) {
        *cursor = 0;
    } else {
        if (cap == 0) {
            rc = BK_EINVAL;
        } else {
            size_t n = total - from < cap ? (size_t)(total - from) : cap;
            writer_copy(&w, from, buf, n);
            *len = n;
            *cursor = from + n;
        }
    }
    writer_free(&w);
    return rc;
}

/*==========================================================================
 * API: reading from memory and from files
 *==========================================================================*/

int bk_filter_deserialize(bk_filter **out, const void *buf, size_t len)
{
    header h;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (buf == NULL && len > 0) return BK_EINVAL;
    const unsigned char *b = buf;
    int rc = parse_fixed(b, len, &h);
    if (rc != BK_OK) return rc;
    if (len < h.payload_offset) return BK_ETRUNC;
    rc = parse_meta(b, &h);
    if (rc != BK_OK) return rc;
    if (len - h.payload_offset < h.payload_length) return BK_ETRUNC;
    if (len - h.payload_offset > h.payload_length) return BK_ECORRUPT; /* trailing bytes */
    rc = verify_payload(&h, b + h.payload_offset);
    if (rc != BK_OK) return rc;
    if (h.payload_length > SIZE_MAX) return BK_ESIZE;

    /* an aligned private copy of the payload, owned by the new object */
    unsigned char *block = bk__calloc_aligned((size_t)h.payload_length);
    if (block == NULL) return BK_ENOMEM;
    memcpy(block, b + h.payload_offset, (size_t)h.payload_length);
    bk__object *o;
    rc = restore(&h, b, block, &o);
    if (rc != BK_OK) {
        bk__free_aligned(block);
        return rc;
    }
    adopt_block(o, block, (size_t)h.payload_length);
    *out = (bk_filter *)o;
    return BK_OK;
}

static int read_all(int fd, void *buf, size_t n, size_t *got)
{
    unsigned char *p = buf;
    *got = 0;
    while (*got < n) {
        ssize_t r = read(fd, p + *got, n - *got > (1u << 30) ? (1u << 30) : n - *got);
        if (r < 0) {
            if (errno == EINTR) continue;
            return BK_EIO;
        }
        if (r == 0) break;
        *got += (size_t)r;
    }
    return BK_OK;
}

int bk_filter_read_fd(bk_filter **out, int fd)
{
    header h;
    unsigned char fixed[HEADER_SIZE];
    unsigned char *meta = NULL, *block = NULL;
    size_t got;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (fd < 0) return BK_EINVAL;

    int rc = read_all(fd, fixed, sizeof(fixed), &got);
    if (rc != BK_OK) return rc;
    rc = parse_fixed(fixed, got, &h);
    if (rc != BK_OK) return rc;

    /* The meta block is small (at most 128 + 64 * BK__MAX_PARTS bytes) */
    meta = bk__malloc((size_t)h.payload_offset);
    if (meta == NULL) return BK_ENOMEM;
    memcpy(meta, fixed, HEADER_SIZE);
    rc = read_all(fd, meta + HEADER_SIZE, (size_t)h.payload_offset - HEADER_SIZE, &got);
    if (rc != BK_OK) goto fail;
    if (got != h.payload_offset - HEADER_SIZE) { rc = BK_ETRUNC; goto fail; }
    rc = parse_meta(meta, &h);
    if (rc != BK_OK) goto fail;

    /* For a regular file the payload must be exactly there: check before
     * allocating what the header asks for. */
    struct stat st;
    if (fstat(fd, &st) != 0) { rc = BK_EIO; goto fail; }
    if (S_ISREG(st.st_mode)) {
        off_t pos = lseek(fd, 0, SEEK_CUR);
        if (pos < 0 || st.st_size < pos) { rc = BK_EIO; goto fail; }
        uint64_t remaining = (uint64_t)(st.st_size - pos);
        if (remaining < h.payload_length) { rc = BK_ETRUNC; goto fail; }
        if (remaining > h.payload_length) { rc = BK_ECORRUPT; goto fail; }
    }
    if (h.payload_length > SIZE_MAX) { rc = BK_ESIZE; goto fail; }

    block = bk__calloc_aligned((size_t)h.payload_length);
    if (block == NULL) { rc = BK_ENOMEM; goto fail; }
    rc = read_all(fd, block, (size_t)h.payload_length, &got);
    if (rc != BK_OK) goto fail;
    if (got != h.payload_length) { rc = BK_ETRUNC; goto fail; }
    if (!S_ISREG(st.st_mode)) { /* a pipe: nothing may follow */
        unsigned char extra;
        rc = read_all(fd, &extra, 1, &got);
        if (rc != BK_OK) goto fail;
        if (got != 0) { rc = BK_ECORRUPT; goto fail; }
    }
    rc = verify_payload(&h, block);
    if (rc != BK_OK) goto fail;

    bk__object *o;
    rc = restore(&h, meta, block, &o);
    if (rc != BK_OK) goto fail;
    adopt_block(o, block, (size_t)h.payload_length);
    bk__free(meta);
    *out = (bk_filter *)o;
    return BK_OK;

fail:
    bk__free_aligned(block);
    bk__free(meta);
    return rc;
}

int bk_filter_load(bk_filter **out, const char *path)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (path == NULL) return BK_EINVAL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return BK_EIO;
    int rc = bk_filter_read_fd(out, fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/*==========================================================================
 * API: memory-mapped files
 *==========================================================================*/

int bk_filter_map(bk_filter **out, const char *path, unsigned flags)
{
    header h;
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (path == NULL || (flags & ~(BK_MAP_WRITABLE | BK_MAP_VERIFY | BK_MAP_PRIVATE)) != 0)
        return BK_EINVAL;
    int writable = (flags & BK_MAP_WRITABLE) != 0;
    int private_copy = (flags & BK_MAP_PRIVATE) != 0;
    if (writable && private_copy) return BK_EINVAL;

    int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) return BK_EIO;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return BK_EIO;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < HEADER_SIZE) {
        close(fd);
        return BK_ETRUNC;
    }
    if (size > SIZE_MAX) {
        close(fd);
        return BK_ESIZE;
    }
    /* Read-only maps are private and writable in memory: a stray add through
     * a family handle then changes only this process's copy, never the file,
     * and cannot fault. */
    unsigned char *map = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
                              writable ? MAP_SHARED : MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return BK_EIO;

    int rc = parse_fixed(map, (size_t)size, &h);
    if (rc == BK_OK && size < h.payload_offset) rc = BK_ETRUNC;
    if (rc == BK_OK) rc = parse_meta(map, &h);
    if (rc == BK_OK && size - h.payload_offset < h.payload_length) rc = BK_ETRUNC;
    if (rc == BK_OK && size - h.payload_offset > h.payload_length) rc = BK_ECORRUPT;
    if (rc == BK_OK && (flags & BK_MAP_VERIFY)) rc = verify_payload(&h, map + h.payload_offset);
    bk__object *o = NULL;
    if (rc == BK_OK) rc = restore(&h, map, map + h.payload_offset, &o);
    if (rc == BK_OK && o->payload_copied && !writable) {
        /* The family copied the payload (a growable table, a cuckoo filter
         * of several stages): nothing points into the mapping, so the
         * filter is simply in memory and the file is let go. (Writable, the
         * mapping stays: bk_filter_sync copies the parts back into it.) */
        munmap(map, (size_t)size);
        o->read_only = !private_copy;
        o->private_map = (uint8_t)private_copy;
        *out = (bk_filter *)o;
        return BK_OK;
    }
    if (rc != BK_OK) {
        munmap(map, (size_t)size);
        return rc;
    }
    o->block = map;
    o->block_len = (size_t)size;
    o->block_kind = BK__BLOCK_MAP;
    o->read_only = !writable && !private_copy;
    o->writable_map = (uint8_t)writable;
    o->private_map = (uint8_t)private_copy;
    *out = (bk_filter *)o;
    return BK_OK;
}

int bk_filter_sync(bk_filter *f)
{
    if (f == NULL) return BK_EINVAL;
    bk__object *o = (bk__object *)(void *)f;
    if (o->read_only) return BK_EREADONLY;
    if (o->private_map) return BK_ENOTSUP;
    if (o->block_kind != BK__BLOCK_MAP || !o->writable_map) return BK_OK;

    unsigned char *map = o->block;
    layout lay;
    int rc = layout_build(f, &lay);
    if (rc != BK_OK) return rc;
    /* The shape must be the one in the file (same layout, hence the same
     * total). Parts the family keeps in place need nothing; small ones it
     * keeps elsewhere (a window's start times) are copied into place. */
    if (lay.payload_offset + lay.payload_length != o->block_len ||
        lay.payload_offset != bk__get_le64(map + H_PAYLOAD_OFFSET))
        rc = BK_ENOTSUP;
    for (uint32_t i = 0; rc == BK_OK && i < lay.img.nparts; i++) {
        const unsigned char *d = map + HEADER_SIZE + (size_t)PART_SIZE * i;
        unsigned char *place = map + lay.payload_offset + lay.offsets[i];
        if (bk__get_le64(d + P_OFFSET) != lay.offsets[i] ||
            bk__get_le64(d + P_LENGTH) != lay.img.parts[i].length)
            rc = BK_ENOTSUP;
        else if (lay.img.parts[i].data != place)
            memmove(place, lay.img.parts[i].data, (size_t)lay.img.parts[i].length);
    }
    if (rc == BK_OK) {
        write_meta(&lay, map, payload_checksum(&lay));
        if (msync(map, o->block_len, MS_SYNC) != 0) rc = BK_EIO;
    }
    layout_free(&lay);
    return rc;
}

/*==========================================================================
 * API: chunked import
 *==========================================================================*/

struct bk_loader {
    uint64_t max_bytes;
    uint64_t received;       /* bytes fed so far */
    int failed;              /* first error, sticky */
    header h;
    int have_fixed;
    unsigned char fixed[HEADER_SIZE];
    unsigned char *meta;     /* payload_offset bytes once the fixed part is in */
    unsigned char *payload;  /* allocated once meta is validated */
};

int bk_loader_create(bk_loader **out, uint64_t max_bytes)
{
    if (out == NULL) return BK_EINVAL;
    *out = bk__calloc(1, sizeof(bk_loader));
    if (*out == NULL) return BK_ENOMEM;
    (*out)->max_bytes = max_bytes;
    return BK_OK;
}

void bk_loader_free(bk_loader *l)
{
    if (l == NULL) return;
    bk__free(l->meta);
    bk__free_aligned(l->payload);
    bk__free(l);
}

/* Take one byte range of the stream that lies entirely in one region. */
static int loader_take(bk_loader *l, const unsigned char *data, size_t n)
{
    uint64_t pos = l->received;
    if (pos < HEADER_SIZE) {
        memcpy(l->fixed + pos, data, n);
        if (pos + n == HEADER_SIZE) {
            int rc = parse_fixed(l->fixed, HEADER_SIZE, &l->h);
            if (rc != BK_OK) return rc;
            if (l->max_bytes && (l->h.payload_offset > l->max_bytes ||
                                 l->h.payload_length > l->max_bytes - l->h.payload_offset))
                return BK_ELIMIT;
            if (l->h.payload_length > SIZE_MAX) return BK_ESIZE;
            l->meta = bk__malloc((size_t)l->h.payload_offset);
            if (l->meta == NULL) return BK_ENOMEM;
            memcpy(l->meta, l->fixed, HEADER_SIZE);
            l->have_fixed = 1;
        }
    } else if (pos < l->h.payload_offset) {
        memcpy(l->meta + pos, data, n);
        if (pos + n == l->h.payload_offset) {
            int rc = parse_meta(l->meta, &l->h);
            if (rc != BK_OK) return rc;
            l->payload = bk__calloc_aligned((size_t)l->h.payload_length);
            if (l->payload == NULL) return BK_ENOMEM;
        }
    } else {
        memcpy(l->payload + (pos - l->h.payload_offset), data, n);
    }
    l->received += n;
    return BK_OK;
}

int bk_loader_feed(bk_loader *l, uint64_t cursor, const void *data, size_t len)
{
    if (l == NULL || (data == NULL && len > 0)) return BK_EINVAL;
    if (l->failed) return l->failed;
    int rc = BK_OK;
    if (len == 0 || cursor < len || cursor - len != l->received) rc = BK_ECHUNK;
    if (rc == BK_OK && l->have_fixed &&
        cursor > l->h.payload_offset + l->h.payload_length)
        rc = BK_ECHUNK; /* more bytes than the header announced */
    const unsigned char *p = data;
    while (rc == BK_OK && len > 0) {
        /* the end of the region the next byte falls in */
        uint64_t limit = l->received < HEADER_SIZE ? HEADER_SIZE
                       : l->received < l->h.payload_offset ? l->h.payload_offset
                       : l->h.payload_offset + l->h.payload_length;
        if (l->received >= limit) { rc = BK_ECHUNK; break; }
        size_t n = limit - l->received < len ? (size_t)(limit - l->received) : len;
        rc = loader_take(l, p, n);
        p += n;
        len -= n;
    }
    if (rc != BK_OK) l->failed = rc;
    return rc;
}

int bk_loader_finish(bk_loader *l, bk_filter **out)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (l == NULL) return BK_EINVAL;
    if (l->failed) return l->failed;
    int rc = BK_OK;
    if (l->payload == NULL || l->received != l->h.payload_offset + l->h.payload_length)
        rc = BK_ETRUNC;
    if (rc == BK_OK) rc = verify_payload(&l->h, l->payload);
    bk__object *o = NULL;
    if (rc == BK_OK) rc = restore(&l->h, l->meta, l->payload, &o);
    if (rc != BK_OK) {
        l->failed = rc;
        return rc;
    }
    adopt_block(o, l->payload, (size_t)l->h.payload_length);
    l->payload = NULL;
    l->failed = BK_EINVAL; /* used up */
    *out = (bk_filter *)o;
    return BK_OK;
}
