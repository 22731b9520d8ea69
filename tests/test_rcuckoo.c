/*
 * test_rcuckoo.c - RedisBloom's cuckoo filter (lib/rcuckoo.c): CF.INFO
 * numbers of created filters against RedisBloom's (the corpus in
 * tests/golden/redisbloom), CF.ADD / CF.ADDNX / CF.COUNT / CF.DEL, growth,
 * the 32-stage limit, a filter that may not grow, the byte cap,
 * compaction after deletes, bucket sizes 1 and 255, cf_b1's SCANDUMP
 * chunks and false positives (embedded below), header / chunk and field
 * round trips, bloomkit's file format, refusal of damaged headers, chunks
 * and field streams (nothing changed, nothing leaked) and allocation
 * failures. The whole corpus is checked by tests/redisbloom/
 * test_lib_rcuckoo.py.
 */
#include "testutil.h"

/*--------------------------------------------------------------------------
 * cf_b1 of the corpus: CF.RESERVE cf_b1 1000 BUCKETSIZE 1, items 0 ... 499
 * added. Its SCANDUMP: [1, header], [1025, chunk], then [0, nil].
 *--------------------------------------------------------------------------*/
static const unsigned char cf_b1_header[38] = {
    0xf4, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x14, 0x00, 0x01, 0x00,
};

static const unsigned char cf_b1_chunk[1024] = {
    0x00, 0x00, 0x00, 0x63, 0xdc, 0x00, 0x0a, 0x00, 0xb1, 0x00, 0x00, 0x88, 0x06, 0x01, 0x00, 0x00,
    0x3c, 0x51, 0x15, 0xc3, 0x00, 0xa2, 0x00, 0x00, 0x00, 0x00, 0x00, 0x79, 0x00, 0x00, 0x00, 0x00,
    0xa2, 0x94, 0x0b, 0x00, 0x00, 0x93, 0x00, 0x00, 0x60, 0x00, 0x00, 0x00, 0x00, 0xe5, 0x7e, 0x00,
    0x00, 0x00, 0xf5, 0x00, 0xfb, 0x26, 0x82, 0x14, 0x00, 0x19, 0x05, 0x3c, 0x00, 0x00, 0xd4, 0x7c,
    0xa4, 0x00, 0x00, 0x7d, 0xc3, 0x99, 0x78, 0x00, 0x00, 0x66, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xa4, 0xc4, 0x00, 0xfd, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0xff, 0xa5, 0x00, 0x1a, 0xa2, 0x92,
    0x25, 0x00, 0x00, 0x00, 0x00, 0x17, 0x00, 0xb7, 0x1b, 0x00, 0x20, 0x00, 0x94, 0x5b, 0x00, 0x00,
    0xf7, 0x00, 0xe7, 0x55, 0x00, 0x5c, 0x00, 0x96, 0x00, 0x00, 0xd2, 0x00, 0x00, 0xb5, 0x00, 0x34,
    0x0a, 0x00, 0x00, 0x00, 0x00, 0x5d, 0xc7, 0x00, 0x00, 0x9e, 0xba, 0x28, 0x00, 0x94, 0x00, 0xf8,
    0x19, 0x00, 0xc5, 0x87, 0x00, 0x4a, 0x00, 0xc9, 0xaa, 0x00, 0x0f, 0x00, 0xe0, 0x6e, 0x00, 0x43,
    0x6a, 0x00, 0xcb, 0x00, 0x00, 0xdc, 0x00, 0x00, 0x3e, 0xba, 0x6f, 0x00, 0x00, 0x6e, 0x00, 0x00,
    0x00, 0xd4, 0x00, 0xcc, 0x19, 0xbc, 0x00, 0x00, 0x73, 0x00, 0x00, 0x00, 0x1e, 0xa5, 0x71, 0x00,
    0xac, 0x02, 0x00, 0xae, 0x00, 0x00, 0xb7, 0x00, 0x00, 0xe2, 0xa2, 0x00, 0x16, 0x00, 0x00, 0xd8,
    0x00, 0x00, 0x00, 0x51, 0x81, 0x48, 0x00, 0x68, 0x00, 0x00, 0x00, 0x00, 0x00, 0x38, 0x00, 0x00,
    0x00, 0xc4, 0x00, 0x2a, 0x6f, 0x27, 0x4d, 0x00, 0x00, 0x68, 0x65, 0x00, 0x15, 0x00, 0x2f, 0x00,
    0x00, 0x00, 0x13, 0x00, 0x00, 0x00, 0xd2, 0xa6, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x14, 0x50, 0x00, 0x39, 0x1b, 0x00, 0xc1, 0x00, 0x00, 0x00, 0x00, 0x09, 0x00, 0x93, 0x77, 0x00,
    0x00, 0x59, 0xe5, 0x00, 0x00, 0xc6, 0x79, 0x00, 0x00, 0x00, 0x00, 0x24, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x57, 0x85, 0x5a, 0x6d, 0x00, 0x8a, 0x00, 0x00, 0x09, 0x00, 0x00, 0x78, 0x00,
    0x85, 0x00, 0x00, 0x99, 0x80, 0x00, 0xd1, 0x00, 0x00, 0x1f, 0x00, 0xa9, 0x00, 0x6c, 0x00, 0x74,
    0x00, 0x00, 0x02, 0x00, 0xfd, 0x80, 0x73, 0x91, 0x00, 0x00, 0xfb, 0x56, 0x00, 0x37, 0xda, 0x00,
    0x26, 0xe5, 0xe8, 0x00, 0x00, 0x00, 0x13, 0xf1, 0x00, 0x00, 0xfb, 0x00, 0x03, 0x33, 0xd1, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xba, 0x00, 0x00, 0x00, 0x00, 0x7e, 0xe2, 0xf6, 0x00,
    0x00, 0x09, 0x69, 0x00, 0x00, 0x00, 0x00, 0x82, 0x00, 0x3b, 0xc2, 0x00, 0x80, 0x79, 0x74, 0x47,
    0xc8, 0x00, 0x00, 0x00, 0x00, 0xae, 0x00, 0x00, 0xfa, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xc9, 0x00, 0x00, 0x1e, 0x00, 0x00, 0xa9, 0x23, 0xda, 0x00, 0x00, 0x00, 0x04, 0x35, 0x16, 0x3f,
    0xeb, 0x19, 0x00, 0xfd, 0x00, 0x4e, 0x84, 0xf0, 0x00, 0x00, 0x1d, 0x00, 0x00, 0x00, 0x21, 0x00,
    0xc2, 0x10, 0x17, 0x00, 0x4d, 0x00, 0x00, 0x7f, 0x04, 0x00, 0x00, 0xcf, 0x00, 0x8f, 0x00, 0x00,
    0x30, 0x00, 0xce, 0xce, 0x00, 0x18, 0x00, 0x00, 0x00, 0x00, 0x55, 0x09, 0x00, 0xaf, 0x47, 0x3f,
    0x00, 0xfe, 0x00, 0x00, 0x00, 0x00, 0x00, 0x8f, 0xcb, 0x93, 0xb3, 0xfe, 0x00, 0x15, 0x06, 0x00,
    0x18, 0x00, 0x00, 0x04, 0xb7, 0x00, 0x34, 0x00, 0x81, 0x00, 0xd3, 0x00, 0x00, 0x00, 0x02, 0x6c,
    0xfa, 0x70, 0xc6, 0x00, 0x00, 0x0b, 0x00, 0x00, 0x00, 0x1b, 0xf6, 0x51, 0x43, 0x00, 0x00, 0x78,
    0x9f, 0x23, 0xe3, 0x00, 0x6f, 0x97, 0x27, 0x99, 0x00, 0xa3, 0x6e, 0x00, 0xfd, 0x00, 0x80, 0x7e,
    0x00, 0x00, 0x00, 0x00, 0x64, 0x26, 0x00, 0x00, 0x00, 0x8f, 0x0d, 0x55, 0xf2, 0x00, 0x00, 0x00,
    0x00, 0x00, 0xfb, 0x00, 0x00, 0x8f, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x00, 0x00, 0xc3, 0x00,
    0x59, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x58, 0x00, 0xe1, 0x10, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x35, 0xce, 0x4f, 0x73, 0x46, 0xf6, 0x00, 0x00, 0x00, 0x0e, 0x00, 0xe0, 0xfa,
    0x00, 0x00, 0xb2, 0xc5, 0x00, 0x00, 0x15, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1e, 0xa0,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf2, 0x51, 0x00, 0x4e, 0x00, 0x6b, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xee, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe7, 0x7a, 0x00, 0xfe,
    0x00, 0x00, 0x3e, 0x8b, 0x00, 0x50, 0xcb, 0x00, 0x00, 0x66, 0x00, 0x00, 0xfd, 0x00, 0x74, 0x1c,
    0x00, 0x03, 0x00, 0x87, 0x00, 0x91, 0x50, 0x6c, 0x8b, 0x00, 0x00, 0x4a, 0x00, 0x2a, 0xa8, 0x00,
    0xa9, 0x9a, 0x00, 0x00, 0xbd, 0x06, 0x14, 0x00, 0x2f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x63,
    0x00, 0xd5, 0x6d, 0x34, 0xfa, 0xb3, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd0, 0x00, 0x00, 0xe5, 0x43,
    0x00, 0x00, 0x00, 0x15, 0xf1, 0x00, 0x00, 0x3f, 0x00, 0x00, 0xb5, 0x79, 0x23, 0xa1, 0x21, 0x6a,
    0x00, 0x00, 0x00, 0x00, 0xbe, 0x9a, 0x00, 0x5b, 0x6e, 0x00, 0x9e, 0x00, 0x00, 0xe9, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x5e, 0x00, 0x00, 0x26, 0x00, 0x05, 0x00, 0xfe, 0x00, 0x00, 0x1f, 0x8c,
    0x58, 0x7d, 0x00, 0x01, 0x00, 0xc5, 0x77, 0x00, 0x52, 0x74, 0x00, 0x44, 0x00, 0x35, 0xff, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xee, 0x00, 0x8b, 0x86, 0x3c, 0x00, 0x00, 0x00, 0xcc, 0x39, 0x85, 0x4a,
    0x01, 0x00, 0xa5, 0x00, 0x00, 0x00, 0x4a, 0x63, 0x65, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x43,
    0x00, 0xca, 0x2e, 0x2d, 0xb5, 0xfe, 0x00, 0xbf, 0x28, 0x00, 0x00, 0x00, 0x00, 0xe2, 0x00, 0x8c,
    0x8f, 0x5f, 0x00, 0xb7, 0x00, 0xd7, 0x15, 0xe9, 0xac, 0xb6, 0xd2, 0x00, 0x1a, 0x00, 0x00, 0x4c,
    0x00, 0x00, 0x4c, 0xc6, 0x00, 0x1e, 0x86, 0x00, 0x60, 0x00, 0x00, 0x21, 0x00, 0xbb, 0xf4, 0x24,
    0x09, 0x99, 0xf5, 0x56, 0x4a, 0xd5, 0xe8, 0x00, 0x00, 0xe1, 0x70, 0x00, 0xd4, 0x73, 0x00, 0x29,
    0x00, 0x00, 0xc0, 0x2e, 0x00, 0x00, 0x15, 0xe3, 0x00, 0x00, 0x00, 0xb8, 0x00, 0x93, 0x00, 0x40,
    0xd1, 0x00, 0xd2, 0x40, 0x00, 0x00, 0x61, 0x00, 0x94, 0x00, 0x1e, 0x24, 0x00, 0xf7, 0x27, 0x23,
    0x07, 0x00, 0x00, 0xfa, 0xb5, 0x3a, 0x00, 0x08, 0xfc, 0xfa, 0x8d, 0xa5, 0xe4, 0x03, 0x00, 0xbf,
    0x8b, 0x24, 0x00, 0xb6, 0x00, 0xd6, 0x00, 0x00, 0x00, 0x8a, 0x65, 0x30, 0x00, 0x00, 0x02, 0x00,
    0x00, 0xcd, 0x00, 0x00, 0x03, 0x00, 0x7f, 0x00, 0xad, 0x38, 0x7b, 0x99, 0x0a, 0x00, 0x00, 0x44,
    0x35, 0x00, 0xb6, 0x94, 0x16, 0x00, 0x00, 0x6f, 0xcf, 0x00, 0x19, 0xf6, 0x64, 0xa5, 0x70, 0x00,
    0xe0, 0x79, 0xab, 0x00, 0x7f, 0xed, 0x00, 0x00, 0x8e, 0xe1, 0xf6, 0x74, 0x92, 0xaa, 0x00, 0x00,
    0x00, 0xd9, 0xb1, 0x00, 0x00, 0x00, 0x62, 0xce, 0x4e, 0x8c, 0xb8, 0x3d, 0x00, 0x00, 0x20, 0x72,
    0x00, 0x6a, 0x00, 0x16, 0x00, 0xbf, 0xa5, 0x00, 0x00, 0x00, 0x00, 0xf3, 0x1a, 0x00, 0x00, 0x00,
    0x00, 0xa0, 0x00, 0x00, 0x89, 0x00, 0x00, 0xdf, 0xe1, 0x00, 0xe4, 0xd9, 0x00, 0x07, 0x02, 0x78,
};

/* the absent items cf_b1 answered 1 for (all 93 of them) */
static const unsigned cf_b1_false_positives[93] = {
    332, 477, 752, 1146, 1314, 1352, 1488, 2209, 2327, 2339,
    2440, 2451, 2540, 2558, 2593, 3019, 3034, 3219, 3232, 3555,
    3675, 3808, 4056, 4165, 4275, 4592, 4655, 5388, 5488, 5530,
    5537, 6083, 6263, 6754, 7183, 7206, 7324, 7382, 7398, 7642,
    7827, 8434, 8658, 8735, 8770, 9244, 9756, 9906, 10374, 10379,
    10392, 10622, 11482, 12009, 12099, 12199, 12210, 12631, 12704, 12764,
    12770, 12957, 13064, 13779, 13910, 14218, 14405, 15009, 15141, 15528,
    15673, 15823, 16197, 16247, 16424, 16581, 16837, 16852, 17183, 17337,
    17624, 17895, 18046, 18311, 18360, 18968, 19054, 19278, 19555, 19615,
    19958, 19985, 19996,
};

static size_t item_of(char *buf, const char *key, unsigned i)
{
    return (size_t)sprintf(buf, "%s:%06u:%x", key, i, (unsigned)((i * 2654435761u) & 0xffffffffu));
}

static size_t absent_of(char *buf, unsigned i) { return (size_t)sprintf(buf, "absent:%07u", i); }

static bk_rcuckoo *make(uint64_t cap, uint32_t b, uint32_t it, uint32_t e)
{
    bk_rcuckoo *f = NULL;
    assert_int_equal(bk_rcuckoo_create(&f, cap, b, it, e), BK_OK);
    assert_non_null(f);
    return f;
}

/* Every byte of a filter's SCANDUMP (header and chunks) in one buffer. */
typedef struct dumped {
    unsigned char *bytes;
    size_t len;
    unsigned chunks;
} dumped;

static dumped dump_all(const bk_rcuckoo *f)
{
    dumped d;
    size_t hl = bk_rcuckoo_header(f, NULL, 0);
    assert_int_equal(hl, 38);
    d.bytes = malloc(hl + bk_rcuckoo_size(f));
    assert_non_null(d.bytes);
    assert_int_equal(bk_rcuckoo_header(f, d.bytes, hl), hl);
    d.len = hl;
    d.chunks = 0;
    uint64_t it = 1, next;
    const void *data;
    size_t len;
    for (;;) {
        assert_int_equal(bk_rcuckoo_chunk(f, it, &next, &data, &len), BK_OK);
        if (next == 0) break;
        assert_int_equal(next, it + len);
        memcpy(d.bytes + d.len, data, len);
        d.len += len;
        d.chunks++;
        it = next;
    }
    assert_int_equal(len, 0);
    return d;
}

static void assert_same_dump(const bk_rcuckoo *a, const bk_rcuckoo *b)
{
    dumped x = dump_all(a), y = dump_all(b);
    assert_int_equal(x.len, y.len);
    assert_memory_equal(x.bytes, y.bytes, x.len);
    free(x.bytes);
    free(y.bytes);
}

TU_LOAD_CHUNKS(load_chunks, bk_rcuckoo, bk_rcuckoo_chunk, bk_rcuckoo_load_chunk)

/* A filter rebuilt from another's chunks, as CF.LOADCHUNK would. */
static bk_rcuckoo *reload(const bk_rcuckoo *f)
{
    unsigned char hdr[38];
    bk_rcuckoo *g = NULL;
    assert_int_equal(bk_rcuckoo_header(f, hdr, sizeof(hdr)), 38);
    assert_int_equal(bk_rcuckoo_from_header(&g, hdr, sizeof(hdr)), BK_OK);
    load_chunks(f, g);
    return g;
}

/*--------------------------------------------------------------------------
 * Creation: CF.INFO as RedisBloom reports it
 *--------------------------------------------------------------------------*/

static void test_create_info(void **state)
{
    (void)state;
    /* capacity, bucket size, iterations, expansion -> Size, buckets, as
     * RedisBloom's CF.INFO of the corpus keys (1 stage) */
    static const struct {
        uint64_t cap;
        uint32_t b, it, e;
        uint64_t size, buckets;
        uint32_t exp;
    } t[] = {
        {1024, 2, 20, 1, 1080, 512, 1},   /* cf_default (CF.ADD's filter) */
        {10000, 4, 20, 1, 16440, 4096, 1}, /* cf_b4 */
        {1000, 1, 20, 1, 1080, 1024, 1},   /* cf_b1 */
        {1000, 2, 50, 2, 1080, 512, 2},    /* cf_exp2 */
        {4000, 8, 20, 1, 4152, 512, 1},    /* cf_dup */
        {1000, 2, 20, 3, 1080, 512, 4},    /* expansion rounded up */
        {1000, 2, 20, 0, 1080, 512, 0},    /* never grows */
        {510, 255, 20, 1, 40 + 16 + 510, 2, 1},
        {2, 1, 1, 1, 40 + 16 + 2, 2, 1},
        {3, 1, 1, 1, 40 + 16 + 4, 4, 1},   /* 3 buckets rounded to 4 */
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        bk_rcuckoo *f = make(t[i].cap, t[i].b, t[i].it, t[i].e);
        assert_int_equal(bk_rcuckoo_size(f), t[i].size);
        assert_int_equal(bk_rcuckoo_buckets(f), t[i].buckets);
        assert_int_equal(bk_rcuckoo_stages(f), 1);
        assert_int_equal(bk_rcuckoo_items(f), 0);
        assert_int_equal(bk_rcuckoo_deleted(f), 0);
        assert_int_equal(bk_rcuckoo_bucket_size(f), t[i].b);
        assert_int_equal(bk_rcuckoo_expansion(f), t[i].exp);
        assert_int_equal(bk_rcuckoo_max_iterations(f), t[i].it);
        assert_true(bk_rcuckoo_bytes(f) >= t[i].size - 40 - 16);
        bk_rcuckoo_free(f);
    }
    bk_rcuckoo *f = (bk_rcuckoo *)1;
    assert_int_equal(bk_rcuckoo_create(&f, 100, 0, 20, 1), BK_EPARAM);
    assert_null(f);
    assert_int_equal(bk_rcuckoo_create(&f, 1000, 256, 20, 1), BK_EPARAM);
    assert_int_equal(bk_rcuckoo_create(&f, 100, 2, 0, 1), BK_EPARAM);
    assert_int_equal(bk_rcuckoo_create(&f, 100, 2, 65536, 1), BK_EPARAM);
    assert_int_equal(bk_rcuckoo_create(&f, 100, 2, 20, 32769), BK_EPARAM);
    assert_int_equal(bk_rcuckoo_create(&f, 3, 2, 20, 1), BK_ECAPACITY); /* < 2 b */
    assert_int_equal(bk_rcuckoo_create(&f, UINT64_MAX, 2, 20, 1), BK_ESIZE);
    assert_int_equal(bk_rcuckoo_create(NULL, 100, 2, 20, 1), BK_EINVAL);
    assert_int_equal(bk_rcuckoo_encver(), 4);
    bk_rcuckoo_free(NULL);
}

/*--------------------------------------------------------------------------
 * cf_b1: chunks, answers and false positives as RedisBloom gave them
 *--------------------------------------------------------------------------*/

static void test_cf_b1_corpus(void **state)
{
    (void)state;
    bk_rcuckoo *f = NULL;
    char buf[64];
    assert_int_equal(bk_rcuckoo_from_header(&f, cf_b1_header, sizeof(cf_b1_header)), BK_OK);
    assert_int_equal(bk_rcuckoo_load_chunk(f, 1025, cf_b1_chunk, sizeof(cf_b1_chunk)), BK_OK);
    assert_int_equal(bk_rcuckoo_size(f), 1080);
    assert_int_equal(bk_rcuckoo_items(f), 500);
    for (unsigned i = 0; i < 500; i++) {
        size_t n = item_of(buf, "cf_b1", i);
        assert_int_equal(bk_rcuckoo_contains(f, buf, n), 1);
        if (i < 10) assert_int_equal(bk_rcuckoo_count(f, buf, n), 1);
    }
    size_t k = 0, nfp = sizeof(cf_b1_false_positives) / sizeof(cf_b1_false_positives[0]);
    for (unsigned i = 0; i < 20000; i++) {
        int want = k < nfp && cf_b1_false_positives[k] == i;
        k += (size_t)want;
        assert_int_equal(bk_rcuckoo_contains(f, buf, absent_of(buf, i)), want);
    }
    /* the same chunks back */
    unsigned char hdr[38];
    assert_int_equal(bk_rcuckoo_header(f, hdr, sizeof(hdr)), 38);
    assert_memory_equal(hdr, cf_b1_header, 38);
    uint64_t next;
    const void *data;
    size_t len;
    assert_int_equal(bk_rcuckoo_chunk(f, 1, &next, &data, &len), BK_OK);
    assert_int_equal(next, 1025);
    assert_int_equal(len, sizeof(cf_b1_chunk));
    assert_memory_equal(data, cf_b1_chunk, len);
    assert_int_equal(bk_rcuckoo_chunk(f, 1025, &next, &data, &len), BK_OK);
    assert_int_equal(next, 0);
    assert_int_equal(len, 0);
    assert_int_equal(bk_rcuckoo_chunk(f, 1026, &next, &data, &len), BK_EINVAL);
    assert_int_equal(bk_rcuckoo_chunk(f, 2, &next, &data, &len), BK_EINVAL); /* mid-chunk */
    assert_int_equal(bk_rcuckoo_chunk(f, 0, &next, &data, &len), BK_EINVAL);

    /* replaying its history gives the same bytes */
    bk_rcuckoo *g = make(1000, 1, 20, 1);
    for (unsigned i = 0; i < 500; i++) assert_int_equal(bk_rcuckoo_add(g, buf, item_of(buf, "cf_b1", i)), 1);
    assert_same_dump(f, g);
    bk_rcuckoo_free(g);
    bk_rcuckoo_free(f);
}

/*--------------------------------------------------------------------------
 * Adds, duplicates, counts, deletes
 *--------------------------------------------------------------------------*/

static void test_add_count_delete(void **state)
{
    (void)state;
    bk_rcuckoo *f = make(1000, 4, 20, 1);
    assert_int_equal(bk_rcuckoo_add(f, "x", 1), 1);
    assert_int_equal(bk_rcuckoo_add(f, "x", 1), 1);
    assert_int_equal(bk_rcuckoo_add_unique(f, "x", 1), 0);
    assert_int_equal(bk_rcuckoo_count(f, "x", 1), 2);
    assert_int_equal(bk_rcuckoo_items(f), 2);
    assert_int_equal(bk_rcuckoo_add_unique(f, "y", 1), 1);
    assert_int_equal(bk_rcuckoo_contains(f, "y", 1), 1);
    assert_int_equal(bk_rcuckoo_remove(f, "x", 1), 1);
    assert_int_equal(bk_rcuckoo_count(f, "x", 1), 1);
    assert_int_equal(bk_rcuckoo_remove(f, "x", 1), 1);
    assert_int_equal(bk_rcuckoo_remove(f, "x", 1), 0);
    assert_int_equal(bk_rcuckoo_contains(f, "x", 1), 0);
    assert_int_equal(bk_rcuckoo_items(f), 1);
    assert_int_equal(bk_rcuckoo_deleted(f), 2); /* one stage: no compaction */
    assert_int_equal(bk_rcuckoo_add(f, NULL, 0), 1); /* the empty item */
    assert_int_equal(bk_rcuckoo_contains(f, "", 0), 1);
    assert_int_equal(bk_rcuckoo_add(NULL, "x", 1), BK_EINVAL);
    assert_int_equal(bk_rcuckoo_remove(NULL, "x", 1), BK_EINVAL);
    assert_int_equal(bk_rcuckoo_contains(NULL, "x", 1), 0);
    bk_rcuckoo_free(f);
}

/*--------------------------------------------------------------------------
 * Growth, the 32-stage limit, a filter that may not grow, the cap
 *--------------------------------------------------------------------------*/

static void test_growth(void **state)
{
    (void)state;
    char buf[64];
    /* expansion 2: stage i has 4 * 2^i buckets */
    bk_rcuckoo *f = make(8, 2, 20, 2);
    unsigned n = 0;
    while (bk_rcuckoo_stages(f) < 6) {
        assert_int_equal(bk_rcuckoo_add(f, buf, item_of(buf, "grow", n)), 1);
        n++;
    }
    uint64_t slots = 0;
    for (uint32_t i = 0; i < 6; i++) slots += (uint64_t)(4u << i) * 2;
    assert_int_equal(bk_rcuckoo_size(f), 40 + 16 * 6 + slots);
    assert_int_equal(bk_rcuckoo_buckets(f), 4);
    for (unsigned i = 0; i < n; i++) assert_int_equal(bk_rcuckoo_contains(f, buf, item_of(buf, "grow", i)), 1);
    /* the chunks name each stage: iterators 1, 9, 25, 57 ... */
    uint64_t next;
    const void *data;
    size_t len;
    assert_int_equal(bk_rcuckoo_chunk(f, 1, &next, &data, &len), BK_OK);
    assert_int_equal(next, 9);
    assert_int_equal(bk_rcuckoo_chunk(f, 9, &next, &data, &len), BK_OK);
    assert_int_equal(next, 25);
    bk_rcuckoo *g = reload(f);
    assert_same_dump(f, g);
    bk_rcuckoo_free(g);
    bk_rcuckoo_free(f);

    /* the 32nd stage is the last one RedisBloom adds: then every add is
     * refused ("Maximum expansions reached"), nothing changed */
    f = make(2, 1, 1, 1);
    n = 0;
    int rc;
    while ((rc = bk_rcuckoo_add(f, buf, item_of(buf, "max", n))) == 1) n++;
    assert_int_equal(rc, BK_EFULL);
    assert_int_equal(bk_rcuckoo_stages(f), 32);
    assert_int_equal(bk_rcuckoo_items(f), n);
    dumped before = dump_all(f);
    assert_int_equal(bk_rcuckoo_add(f, "more", 4), BK_EFULL);
    assert_int_equal(bk_rcuckoo_add_unique(f, buf, item_of(buf, "max", 0)), BK_EFULL);
    dumped after = dump_all(f);
    assert_int_equal(before.len, after.len);
    assert_memory_equal(before.bytes, after.bytes, before.len);
    free(before.bytes);
    free(after.bytes);
    bk_rcuckoo_free(f);

    /* expansion 0: "Filter is full" when the walk fails; the walk is undone */
    f = make(64, 2, 50, 0);
    n = 0;
    while ((rc = bk_rcuckoo_add(f, buf, item_of(buf, "full", n))) == 1) n++;
    assert_int_equal(rc, BK_EFULL);
    assert_int_equal(bk_rcuckoo_stages(f), 1);
    assert_true(n >= 40 && n <= 64);
    before = dump_all(f);
    for (unsigned i = n; i < n + 50; i++) {
        rc = bk_rcuckoo_add(f, buf, item_of(buf, "full", i));
        if (rc == 1) {
            assert_int_equal(bk_rcuckoo_remove(f, buf, item_of(buf, "full", i)), 1);
            continue;
        }
        assert_int_equal(rc, BK_EFULL);
    }
    for (unsigned i = 0; i < n; i++) assert_int_equal(bk_rcuckoo_contains(f, buf, item_of(buf, "full", i)), 1);
    bk_rcuckoo_free(f);
    free(before.bytes);

    /* the byte cap stops a new stage, and nothing changes */
    f = make(64, 2, 20, 1);
    bk_rcuckoo_set_max_bytes(f, bk_rcuckoo_bytes(f) + 10);
    n = 0;
    while ((rc = bk_rcuckoo_add(f, buf, item_of(buf, "cap", n))) == 1) n++;
    assert_int_equal(rc, BK_ELIMIT);
    assert_int_equal(bk_rcuckoo_stages(f), 1);
    assert_int_equal(bk_rcuckoo_items(f), n);
    bk_rcuckoo_set_max_bytes(f, 0);
    assert_int_equal(bk_rcuckoo_add(f, buf, item_of(buf, "cap", n)), 1);
    assert_int_equal(bk_rcuckoo_stages(f), 2);
    bk_rcuckoo_free(f);
}

static void test_bucket_sizes(void **state)
{
    (void)state;
    char buf[64];
    const uint32_t sizes[] = {1, 3, 255};
    for (size_t s = 0; s < 3; s++) {
        uint32_t b = sizes[s];
        bk_rcuckoo *f = make((uint64_t)b * 256, b, 20, 2);
        for (unsigned i = 0; i < 3000; i++) assert_int_equal(bk_rcuckoo_add(f, buf, item_of(buf, "b", i)), 1);
        for (unsigned i = 0; i < 3000; i++) assert_int_equal(bk_rcuckoo_contains(f, buf, item_of(buf, "b", i)), 1);
        assert_int_equal(bk_rcuckoo_items(f), 3000);
        assert_int_equal(bk_rcuckoo_bucket_size(f), b);
        bk_rcuckoo *g = reload(f);
        assert_same_dump(f, g);
        for (unsigned i = 0; i < 3000; i++) assert_int_equal(bk_rcuckoo_count(g, buf, item_of(buf, "b", i)), bk_rcuckoo_count(f, buf, item_of(buf, "b", i)));
        bk_rcuckoo_free(g);
        bk_rcuckoo_free(f);
    }
}

/* More deletes than 10% of the items with several stages: the newest
 * stages move down and are freed; deletes start again from 0. */
static void test_compaction(void **state)
{
    (void)state;
    char buf[64];
    bk_rcuckoo *f = make(64, 4, 20, 1);
    unsigned n = 200;
    for (unsigned i = 0; i < n; i++) assert_int_equal(bk_rcuckoo_add(f, buf, item_of(buf, "c", i)), 1);
    uint32_t stages = bk_rcuckoo_stages(f);
    assert_true(stages >= 4);
    unsigned del = 0;
    while (bk_rcuckoo_stages(f) == stages) {
        assert_int_equal(bk_rcuckoo_remove(f, buf, item_of(buf, "c", del)), 1);
        del++;
    }
    assert_true(bk_rcuckoo_stages(f) < stages);
    assert_int_equal(bk_rcuckoo_deleted(f), 0);
    assert_int_equal(bk_rcuckoo_items(f), n - del);
    for (unsigned i = del; i < n; i++) assert_int_equal(bk_rcuckoo_contains(f, buf, item_of(buf, "c", i)), 1);
    /* delete the rest: back to one stage, empty */
    for (unsigned i = del; i < n; i++) assert_int_equal(bk_rcuckoo_remove(f, buf, item_of(buf, "c", i)), 1);
    assert_int_equal(bk_rcuckoo_items(f), 0);
    assert_int_equal(bk_rcuckoo_stages(f), 1);
    bk_rcuckoo_free(f);
}

/*--------------------------------------------------------------------------
 * Fields through a memory bk_rfields
 *--------------------------------------------------------------------------*/

typedef struct field {
    int kind; /* 'u' or 's' */
    uint64_t u;
    unsigned char *s;
    size_t len;
} field;

typedef struct fields {
    field f[64];
    size_t n, pos;
    size_t stop_after; /* writer: fail the put after this many (0: never) */
} fields;

static int w_unsigned(void *ctx, uint64_t v)
{
    fields *m = ctx;
    if (m->stop_after && m->n >= m->stop_after) return 1;
    m->f[m->n].kind = 'u';
    m->f[m->n++].u = v;
    return 0;
}

static int w_string(void *ctx, const void *p, size_t len)
{
    fields *m = ctx;
    if (m->stop_after && m->n >= m->stop_after) return 1;
    m->f[m->n].kind = 's';
    m->f[m->n].s = malloc(len ? len : 1);
    memcpy(m->f[m->n].s, p, len);
    m->f[m->n++].len = len;
    return 0;
}

static int r_unsigned(void *ctx, uint64_t *v)
{
    fields *m = ctx;
    if (m->pos >= m->n || m->f[m->pos].kind != 'u') return 1;
    *v = m->f[m->pos++].u;
    return 0;
}

static int r_string(void *ctx, const void **p, size_t *len)
{
    fields *m = ctx;
    if (m->pos >= m->n || m->f[m->pos].kind != 's') return 1;
    *p = m->f[m->pos].s;
    *len = m->f[m->pos++].len;
    return 0;
}

static bk_rfields io_of(fields *m)
{
    bk_rfields r;
    memset(&r, 0, sizeof(r));
    r.ctx = m;
    r.get_unsigned = r_unsigned;
    r.get_string = r_string;
    r.put_unsigned = w_unsigned;
    r.put_string = w_string;
    return r;
}

static void fields_free(fields *m)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->f[i].kind == 's') free(m->f[i].s);
    m->n = 0;
}

static bk_rcuckoo *grown_filter(void)
{
    char buf[64];
    bk_rcuckoo *f = make(16, 2, 30, 2);
    for (unsigned i = 0; i < 300; i++) assert_int_equal(bk_rcuckoo_add(f, buf, item_of(buf, "fld", i)), 1);
    for (unsigned i = 0; i < 5; i++) assert_int_equal(bk_rcuckoo_remove(f, buf, item_of(buf, "fld", i)), 1);
    assert_true(bk_rcuckoo_stages(f) >= 3);
    return f;
}

static int load_from(fields *m, int encver, bk_rcuckoo **out)
{
    bk_rfields r = io_of(m);
    m->pos = 0;
    return bk_rcuckoo_load_fields(out, encver, &r);
}

static void test_fields(void **state)
{
    (void)state;
    bk_rcuckoo *f = grown_filter(), *g = NULL;
    static fields m;
    memset(&m, 0, sizeof(m));
    bk_rfields w = io_of(&m);
    assert_int_equal(bk_rcuckoo_save_fields(f, &w), BK_OK);
    uint32_t st = bk_rcuckoo_stages(f);
    assert_int_equal(m.n, 7 + 2 * st);
    assert_int_equal(m.f[0].u, st);
    assert_int_equal(m.f[1].u, 8);    /* buckets of stage 0 */
    assert_int_equal(m.f[3].u, 5);    /* deletes */
    assert_int_equal(m.f[4].u, 2);
    assert_int_equal(m.f[5].u, 30);
    assert_int_equal(m.f[6].u, 2);
    assert_int_equal(m.f[7].u, 8);
    assert_int_equal(m.f[8].len, 16);
    assert_int_equal(load_from(&m, 4, &g), BK_OK);
    assert_int_equal(m.pos, m.n);
    assert_same_dump(f, g);
    bk_rcuckoo_free(g);

    /* every truncation of the stream */
    size_t n = m.n;
    for (size_t cut = 0; cut < n; cut++) {
        m.n = cut;
        g = (bk_rcuckoo *)1;
        assert_int_equal(load_from(&m, 4, &g), BK_ETRUNC);
        assert_null(g);
    }
    m.n = n;
    /* damaged values */
    struct { size_t at; uint64_t v; int rc; } bad[] = {
        {0, 0, BK_ECORRUPT},      {0, 65536, BK_ECORRUPT}, {0, 2, BK_ECORRUPT}, /* stages */
        {1, 0, BK_ECORRUPT},      {1, 12, BK_ECORRUPT},    {1, UINT64_C(1) << 56, BK_ECORRUPT},
        {1, UINT64_C(1) << 50, BK_ESIZE},                     /* larger than memory */
        {2, 1000000, BK_ECORRUPT},                            /* items > slots */
        {4, 0, BK_ECORRUPT},      {4, 256, BK_ECORRUPT},   {5, 0, BK_ECORRUPT},
        {6, 3, BK_ECORRUPT},      {6, 65536, BK_ECORRUPT}, {6, 0, BK_ECORRUPT},
        {7, 16, BK_ECORRUPT},     {9, 8, BK_ECORRUPT},     /* stage buckets */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t keep = m.f[bad[i].at].u;
        m.f[bad[i].at].u = bad[i].v;
        g = (bk_rcuckoo *)1;
        int rc = load_from(&m, 4, &g);
        if (rc != bad[i].rc) fail_msg("field %zu = %llu: %s", bad[i].at, (unsigned long long)bad[i].v, bk_errname(rc));
        assert_null(g);
        m.f[bad[i].at].u = keep;
    }
    /* a string of the wrong length, a string where a number belongs */
    m.f[8].len--;
    assert_int_equal(load_from(&m, 4, &g), BK_ECORRUPT);
    m.f[8].len++;
    m.f[7].kind = 's';
    m.f[7].s = NULL;
    m.f[7].len = 0;
    assert_int_equal(load_from(&m, 4, &g), BK_ETRUNC);
    m.f[7].kind = 'u';
    assert_int_equal(load_from(&m, 5, &g), BK_EVERSION);
    assert_int_equal(load_from(&m, -1, &g), BK_EVERSION);

    /* a writer that stops: BK_EIO */
    static fields m2;
    memset(&m2, 0, sizeof(m2));
    m2.stop_after = 8;
    bk_rfields w2 = io_of(&m2);
    assert_int_equal(bk_rcuckoo_save_fields(f, &w2), BK_EIO);
    fields_free(&m2);
    fields_free(&m);
    bk_rcuckoo_free(f);

    /* encoding versions before 4: stages, buckets, items, then the tables;
     * bucket size 2, 20 iterations, expansion 1 */
    memset(&m, 0, sizeof(m));
    unsigned char table[16] = {0};
    table[3] = 7;
    w_unsigned(&m, 2);
    w_unsigned(&m, 8);
    w_unsigned(&m, 1);
    w_string(&m, table, 16);
    w_string(&m, table, 16);
    assert_int_equal(load_from(&m, 3, &g), BK_OK);
    assert_int_equal(bk_rcuckoo_bucket_size(g), 2);
    assert_int_equal(bk_rcuckoo_max_iterations(g), 20);
    assert_int_equal(bk_rcuckoo_expansion(g), 1);
    assert_int_equal(bk_rcuckoo_stages(g), 2);
    assert_int_equal(bk_rcuckoo_size(g), 40 + 32 + 32);
    bk_rcuckoo_free(g);
    fields_free(&m);
}

/*--------------------------------------------------------------------------
 * Headers and chunks that could not come from RedisBloom
 *--------------------------------------------------------------------------*/

static void put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8); }
static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void test_bad_headers_and_chunks(void **state)
{
    (void)state;
    bk_rcuckoo *f = (bk_rcuckoo *)1;
    unsigned char h[39];
    memcpy(h, cf_b1_header, 38);
    h[38] = 0;
    for (size_t n = 0; n < 38; n++) {
        assert_int_equal(bk_rcuckoo_from_header(&f, h, n), BK_ETRUNC);
        assert_null(f);
    }
    assert_int_equal(bk_rcuckoo_from_header(&f, h, 39), BK_ECORRUPT);
    struct { size_t at; int width; uint64_t v; int rc; } bad[] = {
        {0, 8, 1025, BK_ECORRUPT},                    /* items > slots */
        {8, 8, 0, BK_ECORRUPT}, {8, 8, 1000, BK_ECORRUPT},
        {8, 8, UINT64_C(1) << 56, BK_ECORRUPT}, {8, 8, UINT64_C(1) << 52, BK_ESIZE},
        {24, 8, 0, BK_ECORRUPT}, {24, 8, 65536, BK_ECORRUPT}, {24, 8, UINT64_MAX, BK_ECORRUPT},
        {32, 2, 0, BK_ECORRUPT}, {32, 2, 256, BK_ECORRUPT},
        {34, 2, 0, BK_ECORRUPT},
        {36, 2, 3, BK_ECORRUPT}, {36, 2, 65535, BK_ECORRUPT},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(h, cf_b1_header, 38);
        if (bad[i].width == 8) put64(h + bad[i].at, bad[i].v);
        else put16(h + bad[i].at, (uint16_t)bad[i].v);
        int rc = bk_rcuckoo_from_header(&f, h, 38);
        if (rc != bad[i].rc) fail_msg("header case %zu: %s", i, bk_errname(rc));
        assert_null(f);
    }
    /* expansion 0 with two stages; expansion 2^15 that overflows 2^56 */
    memcpy(h, cf_b1_header, 38);
    put64(h + 24, 2);
    put16(h + 36, 0);
    assert_int_equal(bk_rcuckoo_from_header(&f, h, 38), BK_ECORRUPT);
    put16(h + 36, 32768);
    put64(h + 24, 6);
    assert_int_equal(bk_rcuckoo_from_header(&f, h, 38), BK_ECORRUPT);
    /* many stages of expansion 1 are a valid shape */
    put16(h + 36, 1);
    put64(h + 24, 40);
    assert_int_equal(bk_rcuckoo_from_header(&f, h, 38), BK_OK);
    assert_int_equal(bk_rcuckoo_stages(f), 40);
    assert_int_equal(bk_rcuckoo_size(f), 40 + 16 * 40 + 40 * 1024);
    /* 32 stages or more: RedisBloom takes no more adds */
    assert_int_equal(bk_rcuckoo_add(f, "x", 1), BK_EFULL);
    bk_rcuckoo_free(f);

    /* chunks that do not fit: refused, nothing changed */
    assert_int_equal(bk_rcuckoo_from_header(&f, cf_b1_header, 38), BK_OK);
    dumped before = dump_all(f);
    static unsigned char big[2048];
    memset(big, 0xAB, sizeof(big));
    assert_int_equal(bk_rcuckoo_load_chunk(f, 1025, big, 0), BK_ECHUNK);   /* empty */
    assert_int_equal(bk_rcuckoo_load_chunk(f, 1025, big, 1025), BK_ECHUNK); /* before 0 */
    assert_int_equal(bk_rcuckoo_load_chunk(f, 1026, big, 1024), BK_ECHUNK); /* past the end */
    assert_int_equal(bk_rcuckoo_load_chunk(f, 2049, big, 1), BK_ECHUNK);
    assert_int_equal(bk_rcuckoo_load_chunk(f, 0, big, 1), BK_ECHUNK);
    assert_int_equal(bk_rcuckoo_load_chunk(f, UINT64_MAX, big, 10), BK_ECHUNK);
    assert_int_equal(bk_rcuckoo_load_chunk(f, 1, big, 1), BK_ECHUNK);
    dumped after = dump_all(f);
    assert_int_equal(before.len, after.len);
    assert_memory_equal(before.bytes, after.bytes, before.len);
    free(before.bytes);
    free(after.bytes);
    /* a piece anywhere inside a stage is taken */
    assert_int_equal(bk_rcuckoo_load_chunk(f, 11, cf_b1_chunk, 10), BK_OK);
    assert_int_equal(bk_rcuckoo_load_chunk(f, 1025, cf_b1_chunk, 1024), BK_OK);
    bk_rcuckoo_free(f);

    /* a chunk that crosses from one stage into the next */
    f = make(8, 2, 20, 2);
    assert_int_equal(bk_rcuckoo_add(f, "a", 1), 1);
    char buf[64];
    for (unsigned i = 0; bk_rcuckoo_stages(f) < 2; i++) bk_rcuckoo_add(f, buf, item_of(buf, "x", i));
    assert_int_equal(bk_rcuckoo_load_chunk(f, 1 + 4 + 8, big, 8), BK_ECHUNK);
    assert_int_equal(bk_rcuckoo_load_chunk(f, 1 + 8 + 16, big, 16), BK_OK);
    bk_rcuckoo_free(f);
}

/* A stage above 16 MiB is dumped in 16 MiB pieces. */
static void test_large_stage_chunks(void **state)
{
    (void)state;
    bk_rcuckoo *f = make(UINT64_C(20) << 20, 2, 20, 1); /* 2^23 buckets, 16 MiB */
    uint64_t next;
    const void *data;
    size_t len;
    assert_int_equal(bk_rcuckoo_chunk(f, 1, &next, &data, &len), BK_OK);
    assert_int_equal(len, 16u << 20);
    bk_rcuckoo_free(f);
    f = make(UINT64_C(40) << 20, 2, 20, 1); /* 2^25 buckets, 64 MiB */
    assert_int_equal(bk_rcuckoo_add(f, "x", 1), 1);
    uint64_t it = 1;
    unsigned pieces = 0;
    for (;;) {
        assert_int_equal(bk_rcuckoo_chunk(f, it, &next, &data, &len), BK_OK);
        if (next == 0) break;
        assert_int_equal(len, 16u << 20);
        assert_int_equal(next, it + len);
        it = next;
        pieces++;
    }
    assert_int_equal(pieces, 4);
    assert_int_equal(bk_rcuckoo_chunk(f, 2, &next, &data, &len), BK_EINVAL);
    assert_int_equal(bk_rcuckoo_chunk(f, 1 + (16u << 20), &next, &data, &len), BK_OK);
    bk_rcuckoo *g = reload(f);
    assert_int_equal(bk_rcuckoo_contains(g, "x", 1), 1);
    bk_rcuckoo_free(g);
    bk_rcuckoo_free(f);
}

/*--------------------------------------------------------------------------
 * The generic handle and bloomkit's file format
 *--------------------------------------------------------------------------*/

static void test_generic_and_format(void **state)
{
    (void)state;
    char buf[64];
    bk_rcuckoo *f = grown_filter();
    bk_filter *g = bk_rcuckoo_as_filter(f);
    assert_ptr_equal(bk_filter_as_rcuckoo(g), f);
    assert_int_equal(bk_filter_family(g), BK_FAMILY_RCUCKOO);
    assert_int_equal(bk_filter_contains(g, buf, item_of(buf, "fld", 100)), 1);
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(g, &info), BK_OK);
    assert_int_equal(info.items, bk_rcuckoo_items(f));
    assert_int_equal(info.parts, bk_rcuckoo_stages(f));
    assert_int_equal(info.bytes, bk_rcuckoo_bytes(f));
    assert_int_equal(info.can_remove, 1);
    assert_int_equal(bk_filter_memory_usage(g, NULL, NULL) > 0, 1);

    uint64_t size = bk_filter_serialized_size(g);
    assert_true(size > 0);
    unsigned char *img = malloc(size);
    assert_int_equal(bk_filter_serialize(g, img, size), BK_OK);
    bk_filter *l = NULL;
    assert_int_equal(bk_filter_deserialize(&l, img, size), BK_OK);
    bk_rcuckoo *lf = bk_filter_as_rcuckoo(l);
    assert_non_null(lf);
    assert_same_dump(f, lf);
    assert_int_equal(bk_rcuckoo_deleted(lf), 5);
    for (unsigned i = 0; i < 2000; i++) {
        size_t n = item_of(buf, "fld", i);
        assert_int_equal(bk_filter_count(l, buf, n), (int64_t)bk_rcuckoo_count(f, buf, n));
        n = absent_of(buf, i);
        assert_int_equal(bk_filter_contains(l, buf, n), bk_rcuckoo_contains(f, buf, n));
    }
    /* the loaded copy keeps working: adds (new stages), deletes, compaction */
    for (unsigned i = 0; i < 1000; i++) assert_int_equal(bk_filter_add(l, buf, item_of(buf, "more", i)), 1);
    for (unsigned i = 5; i < 300; i++) assert_int_equal(bk_filter_remove(l, buf, item_of(buf, "fld", i)), BK_OK);
    assert_int_equal(bk_filter_remove(l, "nope", 4), BK_ENOTFOUND);
    for (unsigned i = 0; i < 1000; i++) assert_int_equal(bk_rcuckoo_contains(lf, buf, item_of(buf, "more", i)), 1);
    bk_filter_free(l);

    /* damaged images: a wrong parameter is corruption */
    bk_filter *c = NULL;
    assert_int_equal(bk_filter_clone(&c, g), BK_OK);
    assert_same_dump(f, bk_filter_as_rcuckoo(c));
    bk_filter_free(c);
    free(img);

    /* the generic constructor */
    bk_filter_config cfg;
    bk_filter_config_init(&cfg);
    cfg.family = BK_FAMILY_RCUCKOO;
    cfg.capacity = 1000;
    bk_filter *n = NULL;
    assert_int_equal(bk_filter_create(&n, &cfg), BK_OK);
    assert_int_equal(bk_rcuckoo_bucket_size(bk_filter_as_rcuckoo(n)), 2);
    assert_int_equal(bk_filter_add(n, "x", 1), 1);
    assert_int_equal(bk_filter_add(n, "x", 1), 1);
    assert_int_equal(bk_filter_count(n, "x", 1), 2);
    tu_oom_clone_and_load(n);
    bk_filter_free(n);
    bk_filter_free(g);
}

/*--------------------------------------------------------------------------
 * Allocation failures: BK_ENOMEM, nothing leaked, nothing changed
 *--------------------------------------------------------------------------*/

static int attempt_create(void *ctx)
{
    (void)ctx;
    bk_rcuckoo *f = NULL;
    int rc = bk_rcuckoo_create(&f, 1000, 4, 20, 2);
    bk_rcuckoo_free(f);
    return rc;
}

static int attempt_header(void *ctx)
{
    (void)ctx;
    unsigned char h[38];
    memcpy(h, cf_b1_header, 38);
    put64(h + 24, 3);
    bk_rcuckoo *f = NULL;
    int rc = bk_rcuckoo_from_header(&f, h, 38);
    bk_rcuckoo_free(f);
    return rc;
}

static int attempt_fields(void *ctx)
{
    bk_rcuckoo *f = NULL;
    int rc = load_from(ctx, 4, &f);
    bk_rcuckoo_free(f);
    return rc;
}

/* an add that needs a new stage (and a bigger stage array) */
static int attempt_grow(void *ctx)
{
    bk_rcuckoo *f = ctx;
    char buf[64];
    uint32_t st = bk_rcuckoo_stages(f);
    uint64_t items = bk_rcuckoo_items(f);
    for (unsigned i = 0;; i++) {
        int rc = bk_rcuckoo_add(f, buf, item_of(buf, "oom", i));
        if (rc != 1) {
            assert_int_equal(bk_rcuckoo_stages(f), st);
            assert_int_equal(bk_rcuckoo_items(f), items + i);
            return rc;
        }
        if (bk_rcuckoo_stages(f) > st) return BK_OK;
    }
}

static void test_allocation_failures(void **state)
{
    (void)state;
    tu_oom_loop(attempt_create, NULL);
    tu_oom_loop(attempt_header, NULL);
    bk_rcuckoo *f = grown_filter();
    static fields m;
    memset(&m, 0, sizeof(m));
    bk_rfields w = io_of(&m);
    assert_int_equal(bk_rcuckoo_save_fields(f, &w), BK_OK);
    tu_oom_loop(attempt_fields, &m);
    fields_free(&m);
    bk_rcuckoo_free(f);
    /* growth: the stage array is full at 1, 2, 4 ... stages */
    for (int k = 0; k < 3; k++) {
        f = make(4, 2, 5, 1);
        for (int j = 0; j < k; j++) {
            unsigned i = 0;
            char buf[64];
            uint32_t st = bk_rcuckoo_stages(f);
            while (bk_rcuckoo_stages(f) == st) bk_rcuckoo_add(f, buf, item_of(buf, "pre", 1000 * j + i++));
        }
        for (long n = 1;; n++) {
            tu_install_failing_allocator(n);
            int rc = attempt_grow(f);
            tu_restore_allocator();
            if (rc == BK_OK) break;
            assert_int_equal(rc, BK_ENOMEM);
            assert_int_equal(tu_outstanding, 0);
        }
        bk_rcuckoo_free(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_info),
        cmocka_unit_test(test_cf_b1_corpus),
        cmocka_unit_test(test_add_count_delete),
        cmocka_unit_test(test_growth),
        cmocka_unit_test(test_bucket_sizes),
        cmocka_unit_test(test_compaction),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_bad_headers_and_chunks),
        cmocka_unit_test(test_large_stage_chunks),
        cmocka_unit_test(test_generic_and_format),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
