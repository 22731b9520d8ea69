/*
 * dump_codec.c - the bytes of DUMP and RESTORE: Redis's serialization
 * format for a bloomkit value (dump.c has the commands). Kept apart from
 * the server so the RESTORE payload parser can be fuzzed on its own
 * (fuzz/fuzz_restore.c).
 *
 * Redis's DUMP payload is one RDB object followed by a trailer:
 *
 *   type      1 byte: 7 (RDB_TYPE_MODULE_2, a module value with opcodes)
 *   type id   RDB length encoding of the module type's 64-bit id: the 9
 *             characters of its name, 6 bits each from the alphabet
 *             A-Z a-z 0-9 - _, then 10 bits of encoding version
 *   value     what the type's rdb_save wrote, each item prefixed with an
 *             opcode (RDB length encoding): 5 = string; ends with 0 (EOF).
 *             bloomkit's types save one string: the value's container
 *             (bkc_value_encode, docs/COMMANDS.md "Value encoding")
 *   version   2 bytes little-endian: the RDB version that wrote it (10,
 *             Redis 7.0; RESTORE on Redis refuses newer versions than its own)
 *   crc       8 bytes little-endian: CRC-64/Jones (reflected, polynomial
 *             0xad93d23594c935a9, init 0, no final xor) of everything before
 *
 * RDB length encoding: first two bits 00: 6-bit length; 01: 14 bits (big
 * endian over two bytes); 0x80: 32 bits big endian follow; 0x81: 64 bits;
 * 11: a special string encoding (0-2: an integer of 1/2/4 bytes stored as
 * a string, 3: LZF-compressed: compressed length, plain length, data).
 * Redis compresses strings over 20 bytes when rdbcompression is on (an
 * empty filter compresses well), so RESTORE reads LZF; DUMP here never
 * compresses.
 *
 * RedisBloom's types (MBbloom-- and MBbloomCF, its Bloom and cuckoo
 * filters) are read too: their fields (unsigned integers, doubles,
 * strings, each behind its opcode) go to bk_rbloom_load_fields /
 * bk_rcuckoo_load_fields, and the value keeps RedisBloom's layout; DUMP of
 * such a value writes RedisBloom's fields under its type again, so
 * RedisBloom's RESTORE takes it back.
 *
 * RESTORE checks the trailer first (Redis's "payload version or checksum
 * are wrong"), then every length against the payload's end, and finally
 * lets bkc_value_decode validate the container, so no payload can crash
 * the server or leave a half-built key.
 */
#include <pthread.h> /* pthread_once: the CRC table */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"

#define RDB_TYPE_MODULE_2 7
#define RDB_MODULE_OPCODE_EOF 0
#define RDB_MODULE_OPCODE_STRING 5
#define RDB_DUMP_VERSION 10        /* Redis 7.0's RDB version */
#define RDB_MAX_VERSION 11         /* the newest RESTORE accepts (Redis 7.2) */
#define BKS_TYPE_ENCVER 1          /* one string: what DUMP here writes */
#define BKS_TYPE_ENCVER_PIECES 2   /* module.c's BKM_ENCVER: a total, then pieces */
#define RDB_MODULE_OPCODE_SINT 1
#define RDB_MODULE_OPCODE_UINT 2
#define RDB_MODULE_OPCODE_DOUBLE 4

/*==========================================================================
 * CRC-64/Jones
 *==========================================================================*/

static uint64_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    const uint64_t poly = 0x95ac9329ac4bc9b5ull;   /* 0xad93d23594c935a9 bit-reversed */
    for (unsigned i = 0; i < 256; i++) {
        uint64_t c = i;
        for (int b = 0; b < 8; b++)
            c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
        crc_table[i] = c;
    }
}

uint64_t bks_crc64(uint64_t crc, const unsigned char *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
    for (size_t i = 0; i < n; i++)
        crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return crc;
}

/*==========================================================================
 * Encoding
 *==========================================================================*/

static const char type_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* The module type id of a 9-character type name (0: not encodable). */
static uint64_t module_type_id(const char *name, unsigned encver)
{
    uint64_t id = 0;
    if (strlen(name) != 9)
        return 0;
    for (int i = 0; i < 9; i++) {
        const char *p = strchr(type_alphabet, name[i]);
        if (!p || !name[i])
            return 0;
        id = id << 6 | (uint64_t)(p - type_alphabet);
    }
    return id << 10 | encver;
}

static void module_type_name(uint64_t id, char name[10])
{
    uint64_t bits = id >> 10;
    for (int i = 8; i >= 0; i--) {
        name[i] = type_alphabet[bits & 63];
        bits >>= 6;
    }
    name[9] = '\0';
}

static void put_len(bks_outbuf *b, uint64_t v)
{
    unsigned char buf[9];
    size_t n;
    if (v < 64) {
        buf[0] = (unsigned char)v;
        n = 1;
    } else if (v < 16384) {
        buf[0] = (unsigned char)(0x40 | (v >> 8));
        buf[1] = (unsigned char)v;
        n = 2;
    } else if (v <= 0xffffffffu) {
        buf[0] = 0x80;
        for (int i = 0; i < 4; i++)
            buf[1 + i] = (unsigned char)(v >> (24 - 8 * i));
        n = 5;
    } else {
        buf[0] = 0x81;
        for (int i = 0; i < 8; i++)
            buf[1 + i] = (unsigned char)(v >> (56 - 8 * i));
        n = 9;
    }
    bks_outbuf_append(b, buf, n);
}

/* A bk_rfields writer of RedisBloom's fields into a payload. */
static int put_unsigned(void *ctx, uint64_t v)
{
    put_len(ctx, RDB_MODULE_OPCODE_UINT);
    put_len(ctx, v);
    return ((bks_outbuf *)ctx)->oom ? -1 : 0;
}

static int put_double(void *ctx, double d)
{
    unsigned char b[8];
    uint64_t u;
    memcpy(&u, &d, 8);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(u >> (8 * i));
    put_len(ctx, RDB_MODULE_OPCODE_DOUBLE);
    bks_outbuf_append(ctx, b, 8);
    return ((bks_outbuf *)ctx)->oom ? -1 : 0;
}

static int put_string(void *ctx, const void *p, size_t n)
{
    put_len(ctx, RDB_MODULE_OPCODE_STRING);
    put_len(ctx, n);
    bks_outbuf_append(ctx, p, n);
    return ((bks_outbuf *)ctx)->oom ? -1 : 0;
}

/* The DUMP payload of a value; 0, or -1 (out of memory / cannot encode). */
int bks_dump_encode(const bkc_value *v, bks_outbuf *out)
{
    bk_filter *f = v->nfilters == 1 ? v->filters[0] : NULL;
    bk_rbloom *rb = f ? bk_filter_as_rbloom(f) : NULL;
    bk_rcuckoo *rc = f ? bk_filter_as_rcuckoo(f) : NULL;
    unsigned char t = RDB_TYPE_MODULE_2;
    if (rb || rc) {   /* RedisBloom's type and fields */
        uint64_t id = rb ? module_type_id(BK_RBLOOM_TYPE_NAME, (unsigned)bk_rbloom_encver())
                         : module_type_id(BK_RCUCKOO_TYPE_NAME, (unsigned)bk_rcuckoo_encver());
        bk_rfields w = {.ctx = out, .put_unsigned = put_unsigned, .put_double = put_double,
                        .put_string = put_string};
        bks_outbuf_append(out, &t, 1);
        put_len(out, id);
        if ((rb ? bk_rbloom_save_fields(rb, &w) : bk_rcuckoo_save_fields(rc, &w)) != BK_OK)
            return -1;
    } else {
        const char *type = bkc_kind_type_name(v->kind);
        uint64_t id = type ? module_type_id(type, BKS_TYPE_ENCVER) : 0;
        if (!id)
            return -1;
        unsigned char *enc = NULL;
        size_t len = 0;
        if (bkc_value_encode(v, &enc, &len) != BK_OK)
            return -1;
        bks_outbuf_append(out, &t, 1);
        put_len(out, id);
        put_len(out, RDB_MODULE_OPCODE_STRING);
        put_len(out, len);
        bks_outbuf_append(out, enc, len);
        free(enc);
    }
    put_len(out, RDB_MODULE_OPCODE_EOF);
    unsigned char trailer[10] = {RDB_DUMP_VERSION & 0xff, RDB_DUMP_VERSION >> 8};
    if (out->oom)
        return -1;
    uint64_t crc = bks_crc64(0, (const unsigned char *)out->p, out->len);
    crc = bks_crc64(crc, trailer, 2);
    for (int i = 0; i < 8; i++)
        trailer[2 + i] = (unsigned char)(crc >> (8 * i));
    bks_outbuf_append(out, trailer, sizeof trailer);
    return out->oom ? -1 : 0;
}

/*==========================================================================
 * Decoding
 *==========================================================================*/

typedef struct reader {
    const unsigned char *p, *end;
    uint64_t max_string_len;   /* a decompressed string's limit */
} reader;

/* A length; *special set for 11xxxxxx encodings (the low 6 bits returned). */
static int get_len(reader *r, uint64_t *v, int *special)
{
    if (r->p >= r->end)
        return -1;
    unsigned char b = *r->p++;
    *special = 0;
    switch (b >> 6) {
    case 0:
        *v = b & 0x3f;
        return 0;
    case 1:
        if (r->p >= r->end)
            return -1;
        *v = (uint64_t)(b & 0x3f) << 8 | *r->p++;
        return 0;
    case 2: {
        int n = b == 0x80 ? 4 : b == 0x81 ? 8 : 0;
        if (!n || r->end - r->p < n)
            return -1;
        uint64_t x = 0;
        for (int i = 0; i < n; i++)
            x = x << 8 | *r->p++;
        *v = x;
        return 0;
    }
    default:
        *special = 1;
        *v = b & 0x3f;
        return 0;
    }
}

/* The most bytes LZF makes of one input byte: a long back reference is 3
 * bytes (control, length, distance) giving 7 + 255 + 2 = 264 bytes. A
 * plain length above 88 times the compressed one cannot be true. */
#define LZF_MAX_EXPANSION 88

/* LZF decompression (the format Redis's lzf_compress writes): a control
 * byte below 32 starts a literal run of ctrl+1 bytes; otherwise it is a
 * back reference of length (ctrl >> 5) + 2 (7 means: add the next byte),
 * at distance ((ctrl & 31) << 8 | next) + 1. Returns 0 when exactly
 * out_len bytes were produced from exactly in_len. */
static int lzf_decode(const unsigned char *in, size_t in_len, unsigned char *out,
                      size_t out_len)
{
    size_t ip = 0, op = 0;
    while (ip < in_len) {
        unsigned ctrl = in[ip++];
        if (ctrl < 32) {
            size_t run = ctrl + 1;
            if (run > in_len - ip || run > out_len - op)
                return -1;
            memcpy(out + op, in + ip, run);
            ip += run;
            op += run;
            continue;
        }
        size_t len = ctrl >> 5;
        if (len == 7) {
            if (ip >= in_len)
                return -1;
            len += in[ip++];
        }
        if (ip >= in_len)
            return -1;
        size_t dist = ((size_t)(ctrl & 31) << 8 | in[ip++]) + 1;
        len += 2;
        if (dist > op || len > out_len - op)
            return -1;
        for (size_t i = 0; i < len; i++, op++)   /* may overlap: byte by byte */
            out[op] = out[op - dist];
    }
    return op == out_len ? 0 : -1;
}

/* An RDB string: *out points into the payload (*owned NULL) or to a buffer
 * the caller frees (*owned). limit is the most bytes the caller can take:
 * a compressed string's plain length is checked against it, and against
 * what its compressed length can make, before anything is allocated (a
 * 30-byte payload could otherwise have the server allocate 512 MiB). */
static int get_string(reader *r, uint64_t limit, const unsigned char **out, size_t *len,
                      unsigned char **owned)
{
    uint64_t v;
    int special;
    *owned = NULL;
    if (get_len(r, &v, &special) < 0)
        return -1;
    if (!special) {
        if (v > (uint64_t)(r->end - r->p))
            return -1;
        *out = r->p;
        *len = (size_t)v;
        r->p += v;
        return 0;
    }
    if (v <= 2) {                       /* an integer stored as a string */
        int n = 1 << v;
        if (r->end - r->p < n)
            return -1;
        uint32_t u = 0;
        for (int i = 0; i < n; i++)
            u |= (uint32_t)r->p[i] << (8 * i);
        r->p += n;
        long long x = n == 1 ? (int8_t)u : n == 2 ? (int16_t)u : (int32_t)u;
        unsigned char *s = malloc(24);
        if (!s)
            return -1;
        *len = (size_t)snprintf((char *)s, 24, "%lld", x);
        *out = *owned = s;
        return 0;
    }
    if (v == 3) {                       /* LZF */
        uint64_t clen, plen;
        if (get_len(r, &clen, &special) < 0 || special ||
            get_len(r, &plen, &special) < 0 || special)
            return -1;
        if (clen > (uint64_t)(r->end - r->p) || plen == 0 || plen > limit ||
            plen > r->max_string_len || plen > clen * LZF_MAX_EXPANSION)
            return -1;
        unsigned char *s = malloc((size_t)plen);
        if (!s)
            return -1;
        if (lzf_decode(r->p, (size_t)clen, s, (size_t)plen) < 0) {
            free(s);
            return -1;
        }
        r->p += clen;
        *out = *owned = s;
        *len = (size_t)plen;
        return 0;
    }
    return -1;
}

static const char *BAD_PAYLOAD = "ERR DUMP payload version or checksum are wrong";
static const char *BAD_DATA = "ERR Bad data format";

/* A bk_rfields reader of RedisBloom's fields in a payload. */
typedef struct field_reader {
    reader *r;
    unsigned char *owned;   /* the last string, when it was decompressed */
} field_reader;

static int get_unsigned(void *ctx, uint64_t *v)
{
    field_reader *f = ctx;
    uint64_t op;
    int special;
    if (get_len(f->r, &op, &special) < 0 || special ||
        (op != RDB_MODULE_OPCODE_UINT && op != RDB_MODULE_OPCODE_SINT))
        return -1;
    return get_len(f->r, v, &special) < 0 || special ? -1 : 0;
}

static int get_double(void *ctx, double *d)
{
    field_reader *f = ctx;
    uint64_t op, u = 0;
    int special;
    if (get_len(f->r, &op, &special) < 0 || special || op != RDB_MODULE_OPCODE_DOUBLE ||
        f->r->end - f->r->p < 8)
        return -1;
    for (int i = 0; i < 8; i++)
        u |= (uint64_t)f->r->p[i] << (8 * i);
    f->r->p += 8;
    memcpy(d, &u, 8);
    return 0;
}

static int get_string_field(void *ctx, const void **p, size_t *len)
{
    field_reader *f = ctx;
    uint64_t op;
    int special;
    const unsigned char *s;
    free(f->owned);
    f->owned = NULL;
    if (get_len(f->r, &op, &special) < 0 || special || op != RDB_MODULE_OPCODE_STRING ||
        get_string(f->r, UINT64_MAX, &s, len, &f->owned) < 0)
        return -1;
    *p = s;
    return 0;
}

/* A value of RedisBloom's type from its fields (r after the type id). */
static bkc_value *restore_redisbloom(reader *r, int bloom, unsigned encver, char *err,
                                     size_t errlen)
{
    field_reader fr = {r, NULL};
    bk_rfields in = {.ctx = &fr, .get_unsigned = get_unsigned, .get_double = get_double,
                     .get_string = get_string_field};
    bk_rbloom *rb = NULL;
    bk_rcuckoo *rc = NULL;
    int st = bloom ? bk_rbloom_load_fields(&rb, (int)encver, &in)
                   : bk_rcuckoo_load_fields(&rc, (int)encver, &in);
    free(fr.owned);
    uint64_t op;
    int special;
    if (st == BK_OK && (get_len(r, &op, &special) < 0 || special ||
                        op != RDB_MODULE_OPCODE_EOF || r->p != r->end))
        st = BK_ECORRUPT;   /* fields left over */
    if (st != BK_OK) {
        bk_rbloom_free(rb);
        bk_rcuckoo_free(rc);
        if (st == BK_ENOMEM)
            snprintf(err, errlen, "ERR out of memory");
        else
            snprintf(err, errlen, "ERR Bad data format: RedisBloom %s value: %s",
                     bloom ? BK_RBLOOM_TYPE_NAME : BK_RCUCKOO_TYPE_NAME, bk_strerror(st));
        return NULL;
    }
    bkc_value *v = bkc_value_with(bloom ? BKC_KIND_BLOOM : BKC_KIND_CUCKOO,
                                  rb ? bk_rbloom_as_filter(rb) : bk_rcuckoo_as_filter(rc));
    if (v == NULL)
        snprintf(err, errlen, "ERR out of memory");
    return v;
}

/* Decode a payload into a value; NULL with *err set when it cannot be. */
bkc_value *bks_restore_decode(const unsigned char *p, size_t len, uint64_t max_string_len,
                              char *err, size_t errlen)
{
    if (len < 10) {
        snprintf(err, errlen, "%s", BAD_PAYLOAD);
        return NULL;
    }
    unsigned version = p[len - 10] | (unsigned)p[len - 9] << 8;
    uint64_t want = 0;
    for (int i = 0; i < 8; i++)
        want |= (uint64_t)p[len - 8 + i] << (8 * i);
    if (version > RDB_MAX_VERSION || bks_crc64(0, p, len - 8) != want) {
        snprintf(err, errlen, "%s", BAD_PAYLOAD);
        return NULL;
    }
    reader r = {p, p + len - 10, max_string_len};
    if (*r.p != RDB_TYPE_MODULE_2) {
        snprintf(err, errlen,
                 "ERR Bad data format: the payload holds a Redis value of RDB type %u, "
                 "not a filter",
                 *r.p);
        return NULL;
    }
    r.p++;
    uint64_t id, opcode;
    int special;
    if (get_len(&r, &id, &special) < 0 || special) {
        snprintf(err, errlen, "%s", BAD_DATA);
        return NULL;
    }
    char type[10];
    module_type_name(id, type);
    bkc_kind kind = BKC_KIND_NONE;
    for (int k = BKC_KIND_BLOOM; k <= BKC_KIND_STATIC; k++) {
        if (k == BKC_KIND_LOADING) continue; /* never in a DUMP payload */
        const char *n = bkc_kind_type_name((bkc_kind)k);
        if (n && !strcmp(n, type))
            kind = (bkc_kind)k;
    }
    if (!strcmp(type, bkc_kind_type_name(BKC_KIND_KEYSET)))
        kind = BKC_KIND_KEYSET;
    if (!strcmp(type, bkc_kind_type_name(BKC_KIND_TTL)))
        kind = BKC_KIND_TTL;
    if (!strcmp(type, BK_RBLOOM_TYPE_NAME) || !strcmp(type, BK_RCUCKOO_TYPE_NAME))
        return restore_redisbloom(&r, !strcmp(type, BK_RBLOOM_TYPE_NAME),
                                  (unsigned)(id & 1023), err, errlen);
    if (kind == BKC_KIND_NONE) {
        snprintf(err, errlen,
                 "ERR Bad data format: the payload holds a value of module type '%s', "
                 "not a filter of bloomkit's or RedisBloom's",
                 type);
        return NULL;
    }
    unsigned encver = (unsigned)(id & 1023);
    if (encver != BKS_TYPE_ENCVER && encver != BKS_TYPE_ENCVER_PIECES) {
        snprintf(err, errlen,
                 "ERR Bad data format: %s value of encoding version %u, this server reads "
                 "%u and %u",
                 type, encver, BKS_TYPE_ENCVER, BKS_TYPE_ENCVER_PIECES);
        return NULL;
    }
    const unsigned char *data;
    size_t dlen;
    unsigned char *owned = NULL;
    if (encver == BKS_TYPE_ENCVER_PIECES) {
        /* the module's streamed form: UINT total, then STRING pieces that
         * add up to it. Pieces may be LZF-compressed, which expands data
         * at most about 90-fold: a larger total is a lie, refused before
         * anything is allocated for it. */
        uint64_t total;
        if (get_len(&r, &opcode, &special) < 0 || special ||
            opcode != RDB_MODULE_OPCODE_UINT || get_len(&r, &total, &special) < 0 ||
            special || total == 0 || total > (uint64_t)(r.end - r.p) * 100 + 64) {
            snprintf(err, errlen, "%s", BAD_DATA);
            return NULL;
        }
        unsigned char *buf = malloc((size_t)total);
        if (!buf) {
            snprintf(err, errlen, "ERR out of memory");
            return NULL;
        }
        size_t got = 0;
        while (got < total) {
            const unsigned char *piece;
            size_t plen;
            unsigned char *powned = NULL;
            if (get_len(&r, &opcode, &special) < 0 || special ||
                opcode != RDB_MODULE_OPCODE_STRING ||
                get_string(&r, total - got, &piece, &plen, &powned) < 0 || plen == 0 ||
                plen > total - got) {
                free(powned);
                free(buf);
                snprintf(err, errlen, "%s", BAD_DATA);
                return NULL;
            }
            memcpy(buf + got, piece, plen);
            got += plen;
            free(powned);
        }
        owned = buf;
        data = buf;
        dlen = (size_t)total;
    } else if (get_len(&r, &opcode, &special) < 0 || special ||
               opcode != RDB_MODULE_OPCODE_STRING ||
               get_string(&r, UINT64_MAX, &data, &dlen, &owned) < 0) {
        snprintf(err, errlen, "%s", BAD_DATA);
        return NULL;
    }
    if (get_len(&r, &opcode, &special) < 0 || special || opcode != RDB_MODULE_OPCODE_EOF ||
        r.p != r.end) {
        free(owned);
        snprintf(err, errlen, "%s", BAD_DATA);
        return NULL;
    }
    bkc_value *v = NULL;
    int rc = bkc_value_decode(data, dlen, &v);
    free(owned);
    if (rc != BK_OK) {
        snprintf(err, errlen, "ERR Bad data format: %s", bk_strerror(rc));
        return NULL;
    }
    if (v->kind != kind) {
        bkc_value_free(v);
        snprintf(err, errlen, "%s", BAD_DATA);
        return NULL;
    }
    return v;
}

