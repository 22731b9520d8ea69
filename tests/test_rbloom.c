/*
 * test_rbloom.c - RedisBloom's scalable Bloom filter (lib/rbloom.c).
 *
 * The whole RedisBloom 2.6.28 corpus is checked by
 * tests/redisbloom/test_lib_rbloom.py; here are bf_tiny's chunks and some
 * of its recorded false positives, the corpus's BF.INFO numbers for chains
 * made and filled the way RedisBloom made them, and the edges: growth,
 * the non-scaling "full", the byte cap, chunks, fields and bloomkit's file
 * format both ways, and refusal of damaged input with nothing changed and
 * nothing leaked.
 */
#include "testutil.h"

/*==========================================================================
 * Corpus vectors (tests/golden/redisbloom, key bf_tiny: BF.RESERVE 0.05 10,
 * items 0 ... 2 added)
 *==========================================================================*/

static const unsigned char TINY_HDR[73] = {
    0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00,
    0x00, 0x02, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x9a,
    0x99, 0x99, 0x99, 0x99, 0x99, 0x99, 0x3f, 0x0b, 0xd8, 0x1f, 0x78, 0x30, 0xb6, 0x1e, 0x40,
    0x06, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
static const unsigned char TINY_DATA[16] = {0x50, 0x08, 0x00, 0x14, 0x11, 0x02, 0x00, 0x11,
                                            0x04, 0x10, 0x00, 0x01, 0x01, 0x21, 0x00, 0x50};
#define TINY_ITER 17
/* absent items RedisBloom answered 1 for (false positives), and some it
 * answered 0 for */
static const int TINY_FP[] = {1205, 1368, 2316, 3150, 3495, 3549, 3725, 3886};
static const int TINY_TN[] = {0, 1, 2, 3};

static size_t corpus_item(char *buf, const char *key, uint32_t i)
{
    return (size_t)sprintf(buf, "%s:%06u:%x", key, i, (uint32_t)(i * 2654435761u));
}

static size_t absent_item(char *buf, int i) { return (size_t)sprintf(buf, "absent:%07d", i); }

static bk_rbloom *tiny(void)
{
    bk_rbloom *f;
    assert_int_equal(bk_rbloom_from_header(&f, TINY_HDR, sizeof(TINY_HDR)), BK_OK);
    assert_int_equal(bk_rbloom_load_chunk(f, TINY_ITER, TINY_DATA, sizeof(TINY_DATA)), BK_OK);
    return f;
}

/* The header and every chunk of f, concatenated with their iterators, for
 * "nothing changed" comparisons. Caller frees. */
static unsigned char *snapshot(const bk_rbloom *f, size_t *len)
{
    size_t h = bk_rbloom_header(f, NULL, 0), cap = h + 64, n = 0;
    unsigned char *buf = malloc(cap);
    assert_non_null(buf);
    assert_int_equal(bk_rbloom_header(f, buf, cap), h);
    n = h;
    uint64_t it = 1;
    for (;;) {
        uint64_t next;
        const void *data;
        size_t dl;
        assert_int_equal(bk_rbloom_chunk(f, it, &next, &data, &dl), BK_OK);
        if (next == 0) break;
        assert_int_equal(next, it + dl);
        buf = realloc(buf, n + 8 + dl);
        assert_non_null(buf);
        memcpy(buf + n, &next, 8);
        memcpy(buf + n + 8, data, dl);
        n += 8 + dl;
        it = next;
    }
    *len = n;
    return buf;
}

static void assert_same(const bk_rbloom *a, const bk_rbloom *b)
{
    size_t la, lb;
    unsigned char *sa = snapshot(a, &la), *sb = snapshot(b, &lb);
    tu_same_bytes(sa, la, sb, lb);
}

/*==========================================================================
 * Corpus answers, header and chunk bytes
 *==========================================================================*/

static void test_tiny_corpus(void **state)
{
    (void)state;
    bk_rbloom *f = tiny();
    char buf[64];
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(bk_rbloom_contains(f, buf, corpus_item(buf, "bf_tiny", i)), 1);
    for (size_t i = 0; i < sizeof(TINY_FP) / sizeof(TINY_FP[0]); i++)
        assert_int_equal(bk_rbloom_contains(f, buf, absent_item(buf, TINY_FP[i])), 1);
    for (size_t i = 0; i < sizeof(TINY_TN) / sizeof(TINY_TN[0]); i++)
        assert_int_equal(bk_rbloom_contains(f, buf, absent_item(buf, TINY_TN[i])), 0);

    /* BF.INFO: Capacity 10, Size 112, 1 filter, 3 items, expansion 2 */
    assert_int_equal(bk_rbloom_capacity(f), 10);
    assert_int_equal(bk_rbloom_size(f), 112);
    assert_int_equal(bk_rbloom_stages(f), 1);
    assert_int_equal(bk_rbloom_items(f), 3);
    assert_int_equal(bk_rbloom_expansion(f), 2);

    /* header and chunks back, byte for byte */
    unsigned char hdr[80];
    assert_int_equal(bk_rbloom_header(f, NULL, 0), sizeof(TINY_HDR));
    assert_int_equal(bk_rbloom_header(f, hdr, 10), sizeof(TINY_HDR)); /* too small: size only */
    assert_int_equal(bk_rbloom_header(f, hdr, sizeof(hdr)), sizeof(TINY_HDR));
    assert_memory_equal(hdr, TINY_HDR, sizeof(TINY_HDR));
    uint64_t next;
    const void *data;
    size_t len;
    assert_int_equal(bk_rbloom_chunk(f, 1, &next, &data, &len), BK_OK);
    assert_int_equal(next, TINY_ITER);
    assert_int_equal(len, sizeof(TINY_DATA));
    assert_memory_equal(data, TINY_DATA, sizeof(TINY_DATA));
    assert_int_equal(bk_rbloom_chunk(f, TINY_ITER, &next, &data, &len), BK_OK);
    assert_int_equal(next, 0);
    assert_int_equal(len, 0);
    assert_int_equal(bk_rbloom_chunk(f, TINY_ITER + 1, &next, &data, &len), BK_EINVAL);
    assert_int_equal(bk_rbloom_chunk(f, 0, &next, &data, &len), BK_EINVAL);
    /* a chunk may start anywhere inside (RedisBloom serves any offset) */
    assert_int_equal(bk_rbloom_chunk(f, 5, &next, &data, &len), BK_OK);
    assert_int_equal(len, 12);
    assert_int_equal(next, TINY_ITER);

    /* a new item: the same three bits RedisBloom would set, so a second
     * add says "maybe there" */
    assert_int_equal(bk_rbloom_add(f, buf, corpus_item(buf, "bf_tiny", 3)), 1);
    assert_int_equal(bk_rbloom_add(f, buf, corpus_item(buf, "bf_tiny", 3)), 0);
    assert_int_equal(bk_rbloom_items(f), 4);
    bk_rbloom_free(f);
}

/* Chains made and filled as the corpus keys were: BF.INFO as RedisBloom
 * reported it (tests/golden/redisbloom/redisbloom-2.6.28.json.gz). */
typedef struct made {
    const char *key;
    uint64_t capacity;
    double error;
    uint32_t expansion;
    uint32_t added;
    uint64_t info_capacity, info_size, info_items;
    uint32_t info_filters;
} made;

static const made MADE[] = {
    {"bf_default", 100, 0.01, 2, 5000, 6300, 13768, 4958, 6},
    {"bf_reserved", 100000, 0.001, 2, 50000, 100000, 197856, 50000, 1},
    {"bf_nonscaling", 10000, 0.01, 0, 9000, 10000, 12080, 8995, 1},
    {"bf_exp4", 1000, 0.01, 4, 30000, 85000, 158592, 29758, 4},
    {"bf_tiny", 10, 0.05, 2, 3, 10, 112, 3, 1},
};

static void test_sizes_and_growth_as_redisbloom(void **state)
{
    (void)state;
    char buf[64];
    for (size_t k = 0; k < sizeof(MADE) / sizeof(MADE[0]); k++) {
        const made *m = &MADE[k];
        bk_rbloom *f;
        assert_int_equal(bk_rbloom_create(&f, m->capacity, m->error, m->expansion), BK_OK);
        int64_t fresh = 0;
        for (uint32_t i = 0; i < m->added; i++) {
            int rc = bk_rbloom_add(f, buf, corpus_item(buf, m->key, i));
            assert_true(rc == 0 || rc == 1);
            fresh += rc;
        }
        assert_int_equal(bk_rbloom_capacity(f), m->info_capacity);
        assert_int_equal(bk_rbloom_size(f), m->info_size);
        assert_int_equal(bk_rbloom_items(f), m->info_items);
        assert_int_equal((uint64_t)fresh, m->info_items);
        assert_int_equal(bk_rbloom_stages(f), m->info_filters);
        assert_int_equal(bk_rbloom_expansion(f), m->expansion);
        /* its stages one by one (BF.DEBUG): they add up to BF.INFO's
         * figures; each is expansion times the last, at half its rate (both
         * exact in binary); the chain's rate is the one asked */
        assert_true(bk_rbloom_error(f) == m->error);
        uint64_t cap_sum = 0, items_sum = 0;
        bk_rbloom_stage st, prev = {0};
        for (uint32_t i = 0; i < bk_rbloom_stages(f); i++) {
            assert_int_equal(bk_rbloom_stage_info(f, i, &st), BK_OK);
            cap_sum += st.capacity;
            items_sum += st.items;
            assert_true(st.bytes * 8 >= st.bits);
            assert_int_equal(st.hash_bits, 64);
            if (i > 0) {
                assert_int_equal(st.capacity, prev.capacity * m->expansion);
                assert_true(st.error == prev.error * 0.5);
            }
            prev = st;
        }
        assert_int_equal(cap_sum, m->info_capacity);
        assert_int_equal(items_sum, m->info_items);
        assert_int_equal(bk_rbloom_stage_info(f, bk_rbloom_stages(f), &st), BK_EPARAM);
        assert_int_equal(bk_rbloom_stage_info(NULL, 0, &st), BK_EINVAL);
        assert_int_equal(bk_rbloom_stage_info(f, 0, NULL), BK_EINVAL);
        for (uint32_t i = 0; i < m->added; i++)
            assert_int_equal(bk_rbloom_contains(f, buf, corpus_item(buf, m->key, i)), 1);
        if (strcmp(m->key, "bf_tiny") == 0) {
            unsigned char hdr[80];
            assert_int_equal(bk_rbloom_header(f, hdr, sizeof(hdr)), sizeof(TINY_HDR));
            assert_memory_equal(hdr, TINY_HDR, sizeof(TINY_HDR));
        }
        bk_rbloom_free(f);
    }
}

/* False positives of a fresh 1% chain, fixed keys: stage 0 holds 1000
 * items at 0.5%; its rate at capacity is (1 - e^(-k n / m))^k for its m,
 * k; tolerance 5 binomial sigmas. */
static void test_false_positive_rate(void **state)
{
    (void)state;
    bk_rbloom *f;
    assert_int_equal(bk_rbloom_create(&f, 1000, 0.01, 2), BK_OK);
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < 1000; i++) {
        tu_key(key, i, 1);
        assert_true(bk_rbloom_add(f, key, sizeof(key)) >= 0);
    }
    assert_int_equal(bk_rbloom_stages(f), 1);
    uint64_t hdr_len = bk_rbloom_header(f, NULL, 0);
    unsigned char hdr[80];
    assert_int_equal(hdr_len, 73);
    bk_rbloom_header(f, hdr, sizeof(hdr));
    uint64_t bits;
    uint32_t k;
    memcpy(&bits, hdr + 28, 8);
    memcpy(&k, hdr + 60, 4);
    double n = (double)bk_rbloom_items(f);
    double p = pow(1.0 - exp(-(double)k * n / (double)bits), k);
    const uint64_t trials = 200000;
    uint64_t hits = 0;
    for (uint64_t i = 0; i < trials; i++) {
        tu_key(key, i, 2);
        hits += (uint64_t)bk_rbloom_contains(f, key, sizeof(key));
    }
    double rate = (double)hits / (double)trials;
    assert_true(fabs(rate - p) <= tu_tolerance(p, trials, 5.0));
    assert_true(p < 0.0075);
    bk_rbloom_free(f);
}

/*==========================================================================
 * Full, capped, invalid
 *==========================================================================*/

static void test_nonscaling_full(void **state)
{
    (void)state;
    bk_rbloom *f;
    assert_int_equal(bk_rbloom_create(&f, 100, 0.01, 0), BK_OK);
    assert_int_equal(bk_rbloom_expansion(f), 0);
    char key[TU_KEY_LEN];
    uint64_t i = 0;
    int rc;
    for (;; i++) {
        tu_key(key, i, 1);
        rc = bk_rbloom_add(f, key, sizeof(key));
        if (rc < 0) break;
    }
    assert_int_equal(rc, BK_EFULL);
    assert_int_equal(bk_rbloom_items(f), 100);
    assert_int_equal(bk_rbloom_stages(f), 1);
    size_t la, lb;
    unsigned char *a = snapshot(f, &la);
    assert_int_equal(bk_rbloom_add(f, key, sizeof(key)), BK_EFULL);
    tu_key(key, 0, 1);
    assert_int_equal(bk_rbloom_add(f, key, sizeof(key)), 0); /* present: not an error */
    unsigned char *b = snapshot(f, &lb);
    tu_same_bytes(a, la, b, lb);
    bk_rbloom_free(f);
}

static void test_max_bytes(void **state)
{
    (void)state;
    bk_rbloom *f;
    assert_int_equal(bk_rbloom_create(&f, 100, 0.01, 2), BK_OK);
    size_t base = bk_rbloom_bytes(f);
    assert_true(base > 144);
    bk_rbloom_set_max_bytes(f, base + 64);
    char key[TU_KEY_LEN];
    int rc = 0;
    uint64_t i;
    for (i = 0; i < 1000; i++) {
        tu_key(key, i, 1);
        rc = bk_rbloom_add(f, key, sizeof(key));
        if (rc < 0) break;
    }
    assert_int_equal(rc, BK_ELIMIT);
    assert_int_equal(bk_rbloom_stages(f), 1);
    assert_int_equal(bk_rbloom_bytes(f), base);
    bk_rbloom_set_max_bytes(f, 0);
    assert_int_equal(bk_rbloom_add(f, key, sizeof(key)), 1);
    assert_int_equal(bk_rbloom_stages(f), 2);
    bk_rbloom_free(f);
}

static void test_invalid_parameters(void **state)
{
    (void)state;
    bk_rbloom *f = (bk_rbloom *)1;
    assert_int_equal(bk_rbloom_create(&f, 100, 0.0, 2), BK_EFPR);
    assert_null(f);
    assert_int_equal(bk_rbloom_create(&f, 100, 1.0, 2), BK_EFPR);
    assert_int_equal(bk_rbloom_create(&f, 100, NAN, 2), BK_EFPR);
    assert_int_equal(bk_rbloom_create(&f, 0, 0.01, 2), BK_ECAPACITY);
    assert_int_equal(bk_rbloom_create(&f, UINT64_MAX, 0.01, 2), BK_EPARAM);
    assert_int_equal(bk_rbloom_create(NULL, 100, 0.01, 2), BK_EINVAL);
    assert_int_equal(bk_rbloom_add(NULL, "x", 1), BK_EINVAL);
    assert_int_equal(bk_rbloom_contains(NULL, "x", 1), 0);
    bk_rbloom_free(NULL);
    assert_int_equal(bk_rbloom_encver(), 4);
}

/*==========================================================================
 * Chunks round trip and refusals
 *==========================================================================*/

/* A chain of several stages with items in each. */
static bk_rbloom *grown(void)
{
    bk_rbloom *f;
    assert_int_equal(bk_rbloom_create(&f, 100, 0.01, 2), BK_OK);
    char buf[64];
    for (uint32_t i = 0; i < 2000; i++)
        assert_true(bk_rbloom_add(f, buf, corpus_item(buf, "bf_default", i)) >= 0);
    assert_true(bk_rbloom_stages(f) >= 4);
    return f;
}

TU_LOAD_CHUNKS(load_chunks, bk_rbloom, bk_rbloom_chunk, bk_rbloom_load_chunk)

static bk_rbloom *copy_by_chunks(const bk_rbloom *f)
{
    size_t h = bk_rbloom_header(f, NULL, 0);
    unsigned char *hdr = malloc(h);
    bk_rbloom_header(f, hdr, h);
    bk_rbloom *g;
    assert_int_equal(bk_rbloom_from_header(&g, hdr, h), BK_OK);
    free(hdr);
    load_chunks(f, g);
    return g;
}

static void test_chunks_round_trip(void **state)
{
    (void)state;
    bk_rbloom *f = grown();
    bk_rbloom *g = copy_by_chunks(f);
    assert_same(f, g);
    char buf[64];
    for (int i = 0; i < 20000; i++) {
        size_t n = absent_item(buf, i);
        assert_int_equal(bk_rbloom_contains(f, buf, n), bk_rbloom_contains(g, buf, n));
    }
    for (uint32_t i = 2000; i < 3000; i++) {
        size_t n = corpus_item(buf, "bf_default", i);
        assert_int_equal(bk_rbloom_add(f, buf, n), bk_rbloom_add(g, buf, n));
    }
    assert_same(f, g);
    bk_rbloom_free(f);
    bk_rbloom_free(g);
}

static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

static void test_header_refusals(void **state)
{
    (void)state;
    bk_rbloom *f = (bk_rbloom *)1;
    unsigned char h[80];
    /* every truncation */
    for (size_t n = 0; n < sizeof(TINY_HDR); n++) {
        int rc = bk_rbloom_from_header(&f, TINY_HDR, n);
        assert_true(rc == BK_ETRUNC);
        assert_null(f);
    }
    memcpy(h, TINY_HDR, sizeof(TINY_HDR));
    h[73] = 0;
    assert_int_equal(bk_rbloom_from_header(&f, h, 74), BK_ECORRUPT); /* trailing byte */
    /* every single-bit flip: refused, or (a flip RedisBloom would accept
     * too, such as in entries or size with the total) a working filter */
    for (size_t byte = 0; byte < sizeof(TINY_HDR); byte++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(h, TINY_HDR, sizeof(TINY_HDR));
            h[byte] ^= (unsigned char)(1u << bit);
            int rc = bk_rbloom_from_header(&f, h, sizeof(TINY_HDR));
            if (rc == BK_OK) {
                assert_int_equal(bk_rbloom_contains(f, "x", 1), 0);
                bk_rbloom_free(f);
            } else {
                assert_true(rc == BK_ECORRUPT || rc == BK_ETRUNC || rc == BK_ESIZE);
                assert_null(f);
            }
        }
#define HDR_CASE(offset, value, want)                                         \
    do {                                                                      \
        memcpy(h, TINY_HDR, sizeof(TINY_HDR));                                \
        put64(h + (offset), (value));                                         \
        assert_int_equal(bk_rbloom_from_header(&f, h, sizeof(TINY_HDR)), want); \
    } while (0)
    HDR_CASE(0, 4, BK_ECORRUPT);                           /* size != sum of stages */
    HDR_CASE(20, 17, BK_ECORRUPT);                         /* bits != bytes * 8 */
    HDR_CASE(28, 129, BK_ECORRUPT);                        /* bits != bytes * 8 */
    HDR_CASE(28, 0, BK_ECORRUPT);                          /* no bits */
    HDR_CASE(20, 0, BK_ECORRUPT);                          /* no bytes */
    memcpy(h, TINY_HDR, sizeof(TINY_HDR));
    h[60] = 5; /* hashes != ceil(ln 2 * bpe) */
    assert_int_equal(bk_rbloom_from_header(&f, h, sizeof(TINY_HDR)), BK_ECORRUPT);
    memcpy(h, TINY_HDR, sizeof(TINY_HDR));
    h[12] = 16; /* unknown option */
    assert_int_equal(bk_rbloom_from_header(&f, h, sizeof(TINY_HDR)), BK_ECORRUPT);
    memcpy(h, TINY_HDR, sizeof(TINY_HDR));
    h[8] = 0; /* no stages */
    assert_int_equal(bk_rbloom_from_header(&f, h, sizeof(TINY_HDR)), BK_ECORRUPT);
    memcpy(h, TINY_HDR, sizeof(TINY_HDR));
    h[8] = 2; /* two stages declared, one present */
    assert_int_equal(bk_rbloom_from_header(&f, h, sizeof(TINY_HDR)), BK_ETRUNC);
    memcpy(h, TINY_HDR, sizeof(TINY_HDR));
    h[72] = 8; /* 2^8 > 128 bits */
    assert_int_equal(bk_rbloom_from_header(&f, h, sizeof(TINY_HDR)), BK_ECORRUPT);
    memcpy(h, TINY_HDR, sizeof(TINY_HDR));
    h[72] = 64;
    assert_int_equal(bk_rbloom_from_header(&f, h, sizeof(TINY_HDR)), BK_ECORRUPT);
    memcpy(h, TINY_HDR, sizeof(TINY_HDR));
    put64(h + 44, 0x7ff8000000000000ull); /* NaN rate */
    assert_int_equal(bk_rbloom_from_header(&f, h, sizeof(TINY_HDR)), BK_ECORRUPT);
    /* 2^60 bytes: more than this machine holds, refused before allocating */
    memcpy(h, TINY_HDR, sizeof(TINY_HDR));
    put64(h + 20, UINT64_C(1) << 60);
    put64(h + 28, UINT64_C(1) << 63);
    assert_int_equal(bk_rbloom_from_header(&f, h, sizeof(TINY_HDR)), BK_ESIZE);
    put64(h + 20, UINT64_C(1) << 61); /* bytes * 8 overflows */
    put64(h + 28, 0);
    assert_int_equal(bk_rbloom_from_header(&f, h, sizeof(TINY_HDR)), BK_ECORRUPT);
#undef HDR_CASE
}

static void test_chunk_refusals(void **state)
{
    (void)state;
    bk_rbloom *f = grown();
    size_t before_len, after_len;
    unsigned char *before = snapshot(f, &before_len);
    unsigned char junk[400];
    memset(junk, 0xff, sizeof(junk));
    /* stage 0 has 144 bytes: chunk ends at iterator 145 */
    assert_int_equal(bk_rbloom_load_chunk(f, 146, junk, 145), BK_ECHUNK); /* too big for stage */
    assert_int_equal(bk_rbloom_load_chunk(f, 150, junk, 10), BK_ECHUNK);  /* crosses a stage end */
    assert_int_equal(bk_rbloom_load_chunk(f, 10, junk, 10), BK_ECHUNK);   /* starts before 0 */
    assert_int_equal(bk_rbloom_load_chunk(f, 5, junk, 10), BK_ECHUNK);
    assert_int_equal(bk_rbloom_load_chunk(f, 0, junk, 0), BK_ECHUNK);
    assert_int_equal(bk_rbloom_load_chunk(f, UINT64_MAX, junk, 10), BK_ECHUNK);
    assert_int_equal(bk_rbloom_load_chunk(f, 1u << 30, junk, 10), BK_ECHUNK);
    assert_int_equal(bk_rbloom_load_chunk(f, 5, NULL, 3), BK_EINVAL);
    unsigned char *after = snapshot(f, &after_len);
    assert_int_equal(before_len, after_len);
    assert_memory_equal(before, after, before_len);
    /* a chunk inside a stage, even unaligned, is taken */
    assert_int_equal(bk_rbloom_load_chunk(f, 145, before + 0, 0), BK_OK);
    free(before);
    free(after);
    bk_rbloom_free(f);
}

/*==========================================================================
 * Fields: a memory reader/writer
 *==========================================================================*/

enum { MF_U = 1, MF_D, MF_S };
typedef struct mfield {
    int kind;
    uint64_t u;
    double d;
    unsigned char *s;
    size_t len;
} mfield;
typedef struct mstream {
    mfield v[256];
    size_t n, pos;
    size_t end;     /* reads stop here (truncation) */
    long fail_put;  /* the put that fails (1-based), 0 none */
    long puts;
} mstream;

static int mget(mstream *m, int kind, mfield **out)
{
    if (m->pos >= m->end || m->pos >= m->n || m->v[m->pos].kind != kind) return 1;
    *out = &m->v[m->pos++];
    return 0;
}
static int get_u(void *ctx, uint64_t *v)
{
    mfield *f;
    if (mget(ctx, MF_U, &f)) return 1;
    *v = f->u;
    return 0;
}
static int get_d(void *ctx, double *v)
{
    mfield *f;
    if (mget(ctx, MF_D, &f)) return 1;
    *v = f->d;
    return 0;
}
static int get_s(void *ctx, const void **p, size_t *len)
{
    mfield *f;
    if (mget(ctx, MF_S, &f)) return 1;
    *p = f->s;
    *len = f->len;
    return 0;
}
static mfield *mput(mstream *m, int kind)
{
    if (m->fail_put && ++m->puts == m->fail_put) return NULL;
    assert_true(m->n < 256);
    mfield *f = &m->v[m->n++];
    memset(f, 0, sizeof(*f));
    f->kind = kind;
    return f;
}
static int put_u(void *ctx, uint64_t v)
{
    mfield *f = mput(ctx, MF_U);
    if (f == NULL) return 1;
    f->u = v;
    return 0;
}
static int put_d(void *ctx, double v)
{
    mfield *f = mput(ctx, MF_D);
    if (f == NULL) return 1;
    f->d = v;
    return 0;
}
static int put_s(void *ctx, const void *p, size_t len)
{
    mfield *f = mput(ctx, MF_S);
    if (f == NULL) return 1;
    f->s = malloc(len ? len : 1);
    memcpy(f->s, p, len);
    f->len = len;
    return 0;
}
static bk_rfields mio(mstream *m)
{
    bk_rfields r = {m, get_u, get_d, get_s, put_u, put_d, put_s};
    return r;
}
static void mfree(mstream *m)
{
    for (size_t i = 0; i < m->n; i++) free(m->v[i].s);
    free(m);
}
static mstream *saved(const bk_rbloom *f)
{
    mstream *m = calloc(1, sizeof(*m));
    bk_rfields w = mio(m);
    assert_int_equal(bk_rbloom_save_fields(f, &w), BK_OK);
    m->end = m->n;
    return m;
}
static int load(mstream *m, int encver, bk_rbloom **out)
{
    m->pos = 0;
    bk_rfields r = mio(m);
    return bk_rbloom_load_fields(out, encver, &r);
}

static void test_fields_round_trip(void **state)
{
    (void)state;
    bk_rbloom *f = grown(), *g;
    mstream *m = saved(f);
    uint32_t n = bk_rbloom_stages(f);
    assert_int_equal(m->n, 4 + 8 * (size_t)n);
    assert_int_equal(m->v[0].u, bk_rbloom_items(f));
    assert_int_equal(m->v[1].u, n);
    assert_int_equal(m->v[2].u, 5); /* NOROUND | FORCE64 */
    assert_int_equal(m->v[3].u, 2);
    assert_int_equal(load(m, 4, &g), BK_OK);
    assert_same(f, g);
    bk_rbloom_free(g);
    assert_int_equal(load(m, 5, &g), BK_EVERSION);
    assert_int_equal(load(m, -1, &g), BK_EVERSION);

    /* encver 3: no growth field (2 assumed) */
    mstream *m3 = calloc(1, sizeof(*m3));
    *m3 = *m;
    memmove(&m3->v[3], &m3->v[4], (m3->n - 4) * sizeof(mfield));
    m3->n--;
    m3->end = m3->n;
    assert_int_equal(load(m3, 3, &g), BK_OK);
    assert_same(f, g);
    bk_rbloom_free(g);
    free(m3); /* its strings are m's */

    /* truncated at every field: ETRUNC, nothing leaked (ASan) */
    for (size_t end = 0; end < m->n; end++) {
        m->end = end;
        g = (bk_rbloom *)1;
        assert_int_equal(load(m, 4, &g), BK_ETRUNC);
        assert_null(g);
    }
    m->end = m->n;
    /* a field of the wrong type */
    m->v[5].kind = MF_U;
    assert_int_equal(load(m, 4, &g), BK_ETRUNC);
    m->v[5].kind = MF_D;
    /* out-of-range values */
#define FIELD_CASE(i, member, value, want)                 \
    do {                                                   \
        mfield keep = m->v[i];                             \
        m->v[i].member = (value);                          \
        assert_int_equal(load(m, 4, &g), want);            \
        m->v[i] = keep;                                    \
    } while (0)
    FIELD_CASE(0, u, 1, BK_ECORRUPT);            /* size != sum */
    FIELD_CASE(1, u, 0, BK_ECORRUPT);            /* no stages */
    FIELD_CASE(1, u, 5000, BK_ECORRUPT);         /* too many stages */
    FIELD_CASE(1, u, n + 1, BK_ETRUNC);          /* more declared than present */
    FIELD_CASE(2, u, 16, BK_ECORRUPT);           /* unknown option */
    FIELD_CASE(3, u, UINT64_C(1) << 32, BK_ECORRUPT); /* growth */
    FIELD_CASE(5, d, 1.0, BK_ECORRUPT);          /* stage 0: rate */
    FIELD_CASE(6, u, 9, BK_ECORRUPT);            /* hashes */
    FIELD_CASE(8, u, 1153, BK_ECORRUPT);         /* bits > bytes * 8 */
    FIELD_CASE(8, u, 0, BK_ECORRUPT);
    FIELD_CASE(9, u, 64, BK_ECORRUPT);           /* n2 */
    FIELD_CASE(9, u, 11, BK_ECORRUPT);           /* 2^11 > 1152 bits */
    FIELD_CASE(10, len, 100, BK_ECORRUPT);       /* 800 bits < 1152 */
    FIELD_CASE(11, u, 0, BK_ECORRUPT);           /* stage size: sum */
#undef FIELD_CASE
    /* a writer that stops: EIO at every put */
    for (long k = 1; k <= (long)m->n; k++) {
        mstream *w = calloc(1, sizeof(*w));
        w->fail_put = k;
        bk_rfields io = mio(w);
        assert_int_equal(bk_rbloom_save_fields(f, &io), BK_EIO);
        mfree(w);
    }
    mfree(m);
    bk_rbloom_free(f);
}

/* A chain from RedisBloom 1.x (encver 1: no options, so 32-bit MurmurHash2
 * and power-of-two stages; encver 0 also without bits and n2). */
static void test_legacy_encvers(void **state)
{
    (void)state;
    static unsigned char bits[16];
    double bpe = -log(0.01) / 0.480453013918201;
    mstream *m = calloc(1, sizeof(*m));
    mfield v[] = {
        {MF_U, 0, 0, NULL, 0},         /* size */
        {MF_U, 1, 0, NULL, 0},         /* nfilters */
        {MF_U, 12, 0, NULL, 0},        /* entries */
        {MF_D, 0, 0.01, NULL, 0},      /* error */
        {MF_U, 7, 0, NULL, 0},         /* hashes */
        {MF_D, 0, bpe, NULL, 0},       /* bpe */
        {MF_U, 128, 0, NULL, 0},       /* bits */
        {MF_U, 7, 0, NULL, 0},         /* n2: 2^7 */
        {MF_S, 0, 0, bits, sizeof(bits)},
        {MF_U, 0, 0, NULL, 0},         /* stage size */
    };
    memcpy(m->v, v, sizeof(v));
    m->n = m->end = sizeof(v) / sizeof(v[0]);
    bk_rbloom *f;
    assert_int_equal(load(m, 1, &f), BK_OK);
    assert_int_equal(bk_rbloom_expansion(f), 2);
    char key[TU_KEY_LEN];
    int fresh = 0;
    for (uint64_t i = 0; i < 200; i++) {
        tu_key(key, i, 1);
        int rc = bk_rbloom_add(f, key, sizeof(key));
        assert_true(rc == 0 || rc == 1);
        fresh += rc;
    }
    for (uint64_t i = 0; i < 200; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_rbloom_contains(f, key, sizeof(key)), 1);
    }
    assert_true(bk_rbloom_stages(f) >= 3);
    assert_int_equal(bk_rbloom_items(f), (uint64_t)fresh);
    /* a new stage of a rounding chain (RedisBloom's bloom_init without
     * NOROUND): 24 entries at 0.5% want 264.66 bits, rounded up to 2^9;
     * the 247 spare bits hold 22 more entries */
    mstream *out = saved(f);
    assert_int_equal(out->v[2].u, 0);       /* options */
    assert_int_equal(out->v[4 + 8].u, 46);  /* stage 1 entries */
    assert_int_equal(out->v[4 + 8 + 4].u, 512);
    assert_int_equal(out->v[4 + 8 + 5].u, 9);
    mfree(out);
    bk_rbloom_free(f);

    /* encver 0: bits = trunc(entries * bpe) = 115, taken modulo */
    mstream *m0 = calloc(1, sizeof(*m0));
    m0->v[0] = v[0];
    m0->v[1] = v[1];
    m0->v[2] = v[2];
    m0->v[3] = v[3];
    m0->v[4] = v[4];
    m0->v[5] = v[5];
    m0->v[6] = v[8];
    m0->v[7] = v[9];
    m0->n = m0->end = 8;
    assert_int_equal(load(m0, 0, &f), BK_OK);
    tu_key(key, 1, 1);
    assert_int_equal(bk_rbloom_add(f, key, sizeof(key)), 1);
    assert_int_equal(bk_rbloom_contains(f, key, sizeof(key)), 1);
    out = saved(f);
    assert_int_equal(out->v[4 + 4].u, 115);
    assert_int_equal(out->v[4 + 5].u, 0);
    mfree(out);
    bk_rbloom_free(f);
    free(m0);
    free(m);
}

/*==========================================================================
 * bloomkit's file format, generic handle, allocation failures
 *==========================================================================*/

static void test_file_format(void **state)
{
    (void)state;
    bk_rbloom *f = grown();
    bk_filter *gf = bk_rbloom_as_filter(f);
    assert_int_equal(bk_filter_family(gf), BK_FAMILY_RBLOOM);
    assert_ptr_equal(bk_filter_as_rbloom(gf), f);
    uint64_t size = bk_filter_serialized_size(gf);
    assert_true(size > 0);
    unsigned char *buf = malloc(size);
    assert_int_equal(bk_filter_serialize(gf, buf, size), BK_OK);
    bk_filter *h;
    assert_int_equal(bk_filter_deserialize(&h, buf, size), BK_OK);
    bk_rbloom *g = bk_filter_as_rbloom(h);
    assert_non_null(g);
    assert_same(f, g);
    /* the generic add and lookup are the family's */
    char key[64];
    for (uint32_t i = 2000; i < 4000; i++) {
        size_t n = corpus_item(key, "bf_default", i);
        assert_int_equal(bk_filter_add(h, key, n), bk_rbloom_add(f, key, n));
        assert_int_equal(bk_filter_contains(h, key, n), 1);
    }
    assert_same(f, g);
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(h, &info), BK_OK);
    assert_int_equal(info.items, bk_rbloom_items(f));
    assert_int_equal(info.capacity, bk_rbloom_capacity(f));
    assert_int_equal(info.parts, bk_rbloom_stages(f));
    assert_true(info.fill > 0.0 && info.fill < 1.0);
    assert_true(bk_filter_memory_usage(h, NULL, NULL) > 0);
    /* clone */
    bk_filter *c;
    assert_int_equal(bk_filter_clone(&c, h), BK_OK);
    assert_same(g, bk_filter_as_rbloom(c));
    bk_filter_free(c);
    bk_filter_free(h);

    /* damaged bytes anywhere: an error (mostly a checksum), never a crash */
    for (uint64_t i = 0; i < size; i += 7) {
        buf[i] ^= 0x20;
        bk_filter *x = NULL;
        int rc = bk_filter_deserialize(&x, buf, size);
        if (rc == BK_OK) bk_filter_free(x);
        buf[i] ^= 0x20;
    }
    free(buf);
    bk_rbloom_free(f);
}

TU_OOM_ATTEMPT(attempt_from_header, bk_rbloom,
               bk_rbloom_from_header(&f, TINY_HDR, sizeof(TINY_HDR)), bk_rbloom_free)
/* ctx: the saved stream to load */
TU_OOM_ATTEMPT(attempt_load_fields, bk_rbloom, load(ctx, 4, &f), bk_rbloom_free)

static int attempt_grow(void *ctx)
{
    (void)ctx;
    bk_rbloom *f;
    int rc = bk_rbloom_create(&f, 10, 0.01, 2);
    if (rc != BK_OK) return rc;
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < 100 && rc >= 0; i++) {
        tu_key(key, i, 1);
        rc = bk_rbloom_add(f, key, sizeof(key));
    }
    bk_rbloom_free(f);
    return rc < 0 ? rc : BK_OK;
}

static void test_allocation_failures(void **state)
{
    (void)state;
    tu_oom_loop(attempt_from_header, NULL);
    bk_rbloom *f = grown();
    mstream *m = saved(f);
    tu_oom_loop(attempt_load_fields, m);
    mfree(m);
    tu_oom_loop(attempt_grow, NULL);
    assert_int_equal(bk_rbloom_add(f, "x", 1), 1);
    tu_oom_loop(tu__attempt_clone, bk_rbloom_as_filter(f));
    bk_rbloom_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_corpus),
        cmocka_unit_test(test_sizes_and_growth_as_redisbloom),
        cmocka_unit_test(test_false_positive_rate),
        cmocka_unit_test(test_nonscaling_full),
        cmocka_unit_test(test_max_bytes),
        cmocka_unit_test(test_invalid_parameters),
        cmocka_unit_test(test_chunks_round_trip),
        cmocka_unit_test(test_header_refusals),
        cmocka_unit_test(test_chunk_refusals),
        cmocka_unit_test(test_fields_round_trip),
        cmocka_unit_test(test_legacy_encvers),
        cmocka_unit_test(test_file_format),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
