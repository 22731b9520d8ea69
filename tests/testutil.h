/*
 * testutil.h - helpers shared by the unit tests: a seeded PRNG, key
 * generators, the binomial tolerance used by every false-positive test, and
 * an allocator that fails on demand and counts what is outstanding.
 */
#ifndef BK_TESTUTIL_H
#define BK_TESTUTIL_H

#include <math.h>
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* close, unlink */

#include <cmocka.h>

#include "bloomkit.h"

/* splitmix64: a fixed-seed generator, so every statistical test is
 * reproducible. */
static inline uint64_t tu_next(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Key number i as a 16-byte string: "k" + 15 hex digits of a bijective mix of
 * i and the tag. Different (i, tag) pairs never collide, so keys of set A
 * (tag 1) and absent keys (tag 2) are disjoint by construction. */
#define TU_KEY_LEN 16
static inline void tu_key(char out[TU_KEY_LEN], uint64_t i, uint64_t tag)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t v = (i & UINT64_C(0x0FFFFFFFFFFFFF)) | (tag << 52); /* 60 bits */
    out[0] = 'k';
    for (int d = 15; d >= 1; d--) {
        out[d] = hex[v & 15];
        v >>= 4;
    }
}

/* static inline uint64_t name(const T *f, uint64_t from, uint64_t to,
 * uint64_t tag): how many of the keys tu_key(i, tag), from <= i < to,
 * contains(f, key, len) finds. */
#define TU_COUNT_FOUND(name, T, contains)                                          \
    static inline uint64_t name(const T *f, uint64_t from, uint64_t to, uint64_t tag) \
    {                                                                              \
        char key[TU_KEY_LEN];                                                      \
        uint64_t found = 0;                                                        \
        for (uint64_t i = from; i < to; i++) {                                     \
            tu_key(key, i, tag);                                                   \
            found += (uint64_t)contains(f, key, sizeof(key));                      \
        }                                                                          \
        return found;                                                              \
    }

/* static inline void name(T *f, uint64_t from, uint64_t to, uint64_t tag):
 * add(f, key, len) of the keys tu_key(i, tag), from <= i < to, each answer
 * passed to check; TU_ADD_RANGE ignores them, TU_ADD_RANGE_OK wants each
 * >= 0 (no error). */
#define TU__ADD_RANGE(name, T, add, check)                                         \
    static inline void name(T *f, uint64_t from, uint64_t to, uint64_t tag)       \
    {                                                                              \
        char key[TU_KEY_LEN];                                                      \
        for (uint64_t i = from; i < to; i++) {                                     \
            tu_key(key, i, tag);                                                   \
            check(add(f, key, sizeof(key)));                                       \
        }                                                                          \
    }
#define TU__IGNORE(answer) (void)(answer)
#define TU__NO_ERROR(answer) assert_true((answer) >= 0)
#define TU_ADD_RANGE(name, T, add) TU__ADD_RANGE(name, T, add, TU__IGNORE)
#define TU_ADD_RANGE_OK(name, T, add) TU__ADD_RANGE(name, T, add, TU__NO_ERROR)

/* The argument checks of a family's sized create, create(&out, n, p,
 * rest...) (rest: its own valid parameters and the seed): no out pointer
 * (BK_EINVAL), no capacity (BK_ECAPACITY, *out reset to NULL), a rate
 * outside (0, 1) or NaN (BK_EFPR). */
#define TU_CREATE_ARG_CHECKS(T, create, ...) TU_CREATE_ARG_CHECKS_N(T, create, 10, __VA_ARGS__)
/* The same with capacity n in the calls that are valid but for one
 * argument. */
#define TU_CREATE_ARG_CHECKS_N(T, create, n, ...)                                  \
    do {                                                                           \
        T *tu_out_ = (T *)1;                                                       \
        assert_int_equal(create(NULL, n, 0.01, __VA_ARGS__), BK_EINVAL);           \
        assert_int_equal(create(&tu_out_, 0, 0.01, __VA_ARGS__), BK_ECAPACITY);    \
        assert_null(tu_out_);                                                      \
        static const double tu_bad_rates_[] = {0.0, 1.0, 1.5, 2.0, NAN};           \
        for (size_t tu_i_ = 0; tu_i_ < 5; tu_i_++)                                 \
            assert_int_equal(create(&tu_out_, n, tu_bad_rates_[tu_i_], __VA_ARGS__), \
                             BK_EFPR);                                             \
    } while (0)

/* The _hash variants of a counting family fam (bk_fam_add_hash, ...) on
 * f, which does not hold key (len bytes): the key's hash added (answering
 * `added`) is found by the key and counted once, if_absent_hash (the
 * family's add-if-absent by hash) answers 0 for it, and once removed by
 * hash it is gone. */
#define TU_HASH_VARIANTS(fam, f, key, len, added, if_absent_hash)                  \
    do {                                                                           \
        bk_hash tu_h_ = bk_hash_key(key, len, bk_##fam##_seed(f));                 \
        assert_int_equal(bk_##fam##_add_hash(f, tu_h_), added);                    \
        assert_int_equal(bk_##fam##_contains(f, key, len), 1);                     \
        assert_int_equal(bk_##fam##_count_hash(f, tu_h_), 1);                      \
        assert_int_equal(if_absent_hash(f, tu_h_), 0);                             \
        assert_int_equal(bk_##fam##_remove_hash(f, tu_h_), BK_OK);                 \
        assert_int_equal(bk_##fam##_contains_hash(f, tu_h_), 0);                   \
    } while (0)

/* static int name(const T *f, uint64_t i, uint64_t tag, uint64_t now):
 * contains(f, key, len, now) of the key tu_key(i, tag), for the families
 * driven by a clock (test_ttl.c, test_window.c). */
#define TU_HAS_KEY_AT(name, T, contains)                                           \
    static int name(const T *f, uint64_t i, uint64_t tag, uint64_t now)            \
    {                                                                              \
        char key[TU_KEY_LEN];                                                      \
        tu_key(key, i, tag);                                                       \
        return contains(f, key, sizeof(key), now);                                 \
    }

/* static void name(const T *f, T *g): every chunk of f, from iterator 1
 * on, loaded into g as SCANDUMP / LOADCHUNK would (the RedisBloom chains,
 * test_rbloom.c and test_rcuckoo.c); each load must be BK_OK. */
#define TU_LOAD_CHUNKS(name, T, chunk, load_chunk)                                 \
    static void name(const T *f, T *g)                                             \
    {                                                                              \
        uint64_t it = 1, next;                                                     \
        const void *data;                                                          \
        size_t len;                                                                \
        while (chunk(f, it, &next, &data, &len) == BK_OK && next != 0) {          \
            assert_int_equal(load_chunk(g, next, data, len), BK_OK);              \
            it = next;                                                             \
        }                                                                          \
    }

/* A generic filter's configuration: the defaults of
 * bk_filter_config_init (its seed among them) with the family, capacity
 * and target rate given. */
static inline bk_filter_config tu_config(bk_family family, uint64_t capacity, double fpr)
{
    bk_filter_config cfg;
    bk_filter_config_init(&cfg);
    cfg.family = family;
    cfg.capacity = capacity;
    cfg.fpr = fpr;
    return cfg;
}

/* Through the generic handle. */
TU_COUNT_FOUND(tu_count_found, bk_filter, bk_filter_contains)
TU_ADD_RANGE_OK(tu_add_keys, bk_filter, bk_filter_add)

/* A scalable filter's statistics, and those of its stage i (each call
 * must answer BK_OK): what the tests of its growth schedule walk. */
static inline bk_scalable_stats tu_scalable_stats(const bk_scalable *f)
{
    bk_scalable_stats st;
    assert_int_equal(bk_scalable_get_stats(f, &st), BK_OK);
    return st;
}

static inline bk_scalable_stage_stats tu_scalable_stage(const bk_scalable *f, uint32_t i)
{
    bk_scalable_stage_stats ss;
    assert_int_equal(bk_scalable_get_stage_stats(f, i, &ss), BK_OK);
    return ss;
}

/* A hash that the growable filter (lib/growable.c, docs/FORMAT.md family
 * 18) puts in mini q of a level of n minis with fingerprint fp (11 bits):
 * the 128-bit product h * n has q above bit 64 and fp in the top 11 bits
 * below (n < 2^52). A level's minis are 3/4 of its keys
 * (bk_growable_capacity). */
static inline uint64_t tu_growable_hash(uint64_t n, uint64_t q, unsigned fp)
{
    unsigned __int128 want = ((unsigned __int128)q << 64) | ((unsigned __int128)fp << 53) |
                             ((unsigned __int128)1 << 52);
    return (uint64_t)((want + n - 1) / n);
}

/* The tolerance of a measured rate: `sigmas` binomial standard deviations of
 * `trials` Bernoulli trials with success probability p. */
static inline double tu_tolerance(double p, uint64_t trials, double sigmas)
{
    return sigmas * sqrt(p * (1.0 - p) / (double)trials);
}

/*--------------------------------------------------------------------------
 * Failing allocator: tu_fail_at = N makes the Nth allocation from now on
 * fail (0: never). tu_outstanding counts live allocations.
 *--------------------------------------------------------------------------*/

static long tu_alloc_count;
static long tu_fail_at;
static long tu_outstanding;

static inline void *tu_malloc(void *opaque, size_t size)
{
    (void)opaque;
    ++tu_alloc_count;
    if (tu_fail_at && tu_alloc_count == tu_fail_at) return NULL;
    void *p = malloc(size);
    if (p) tu_outstanding++;
    return p;
}

static inline void *tu_calloc(void *opaque, size_t count, size_t size)
{
    (void)opaque;
    ++tu_alloc_count;
    if (tu_fail_at && tu_alloc_count == tu_fail_at) return NULL;
    void *p = calloc(count, size);
    if (p) tu_outstanding++;
    return p;
}

static inline void tu_free(void *opaque, void *ptr)
{
    (void)opaque;
    if (ptr) tu_outstanding--;
    free(ptr);
}

static inline void tu_install_failing_allocator(long fail_at)
{
    static const bk_allocator a = {tu_malloc, tu_calloc, tu_free, NULL};
    tu_alloc_count = 0;
    tu_fail_at = fail_at;
    tu_outstanding = 0;
    bk_set_allocator(&a);
}

static inline void tu_restore_allocator(void)
{
    bk_set_allocator(NULL);
    tu_fail_at = 0;
}

/* Run `attempt` (which must return BK_OK or an error and free what it made
 * on success) with the 1st, 2nd, ... allocation failing until it succeeds;
 * every failure must be BK_ENOMEM and leave nothing allocated. Returns the
 * number of allocations the successful call made. */
static inline long tu_oom_loop(int (*attempt)(void *ctx), void *ctx)
{
    for (long n = 1; n < 10000; n++) {
        tu_install_failing_allocator(n);
        int rc = attempt(ctx);
        long leaked = tu_outstanding;
        tu_restore_allocator();
        if (rc == BK_OK) {
            assert_int_equal(leaked, 0); /* attempt frees on success */
            return n - 1;
        }
        if (rc != BK_ENOMEM)
            fail_msg("allocation %ld failed: got %s, want ENOMEM", n,
                     bk_errname(rc));
        if (leaked != 0)
            fail_msg("allocation %ld failed: %ld allocations leaked", n,
                     leaked);
    }
    fail_msg("no success after 10000 allocation failures");
    return -1;
}

/* tu_oom_loop(attempt, ctx) with the count of allocations the successful
 * call made printed as "what: N allocations" (for the design notes);
 * returns that count. */
static inline long tu_oom_report(const char *what, int (*attempt)(void *ctx), void *ctx)
{
    long n = tu_oom_loop(attempt, ctx);
    print_message("%s: %ld allocations\n", what, n);
    return n;
}

/* static int name(void *ctx), an attempt for tu_oom_loop: `T *f; int rc =
 * create; destroy(f); return rc;` (create makes f). */
#define TU_OOM_ATTEMPT(name, T, create, destroy)                                   \
    static int name(void *ctx)                                                     \
    {                                                                              \
        (void)ctx;                                                                 \
        T *f = NULL;                                                               \
        int rc = (create);                                                         \
        destroy(f);                                                                \
        return rc;                                                                 \
    }

/* static int name(void *ctx): clone ctx (a T holding the key "x") with
 * clone(&f, ctx); a copy made must find "x". */
#define TU_OOM_CLONE_ATTEMPT(name, T, clone, contains, destroy)                    \
    static int name(void *ctx)                                                     \
    {                                                                              \
        T *f = NULL;                                                               \
        int rc = clone(&f, ctx);                                                   \
        if (rc == BK_OK) assert_int_equal(contains(f, "x", 1), 1);                 \
        destroy(f);                                                                \
        return rc;                                                                 \
    }

/* A family's own allocation failures: its create and create_params each
 * make `creates` allocations (and fail cleanly short of them); a clone of
 * src (holding "x") fails cleanly too and, when clones >= 0, makes that
 * many. */
static inline void tu_oom_create_clone(int (*create)(void *), int (*create_params)(void *),
                                       long creates, int (*clone)(void *), void *src,
                                       long clones)
{
    assert_int_equal(tu_oom_loop(create, NULL), creates);
    assert_int_equal(tu_oom_loop(create_params, NULL), creates);
    long made = tu_oom_loop(clone, src);
    if (clones >= 0) assert_int_equal(made, clones);
}

/* The allocation-failure loops every family's filter goes through on the
 * generic handle: clone it, and load its serialized image. src must hold
 * the key "x" (each attempt checks the copy still finds it). */
static inline int tu__attempt_clone(void *ctx)
{
    bk_filter *f;
    int rc = bk_filter_clone(&f, ctx);
    if (rc == BK_OK) assert_int_equal(bk_filter_contains(f, "x", 1), 1);
    bk_filter_free(f);
    return rc;
}

typedef struct tu__image { unsigned char *buf; size_t len; } tu__image;

static inline int tu__attempt_load(void *ctx)
{
    const tu__image *im = ctx;
    bk_filter *f;
    int rc = bk_filter_deserialize(&f, im->buf, im->len);
    if (rc == BK_OK) assert_int_equal(bk_filter_contains(f, "x", 1), 1);
    bk_filter_free(f);
    return rc;
}

static inline void tu_oom_clone_and_load(bk_filter *src)
{
    tu_oom_loop(tu__attempt_clone, src);
    tu__image im;
    im.len = (size_t)bk_filter_serialized_size(src);
    im.buf = malloc(im.len);
    assert_non_null(im.buf);
    assert_int_equal(bk_filter_serialize(src, im.buf, im.len), BK_OK);
    tu_oom_loop(tu__attempt_load, &im);
    free(im.buf);
}

/*--------------------------------------------------------------------------
 * Tracking allocator: every live block (pointer, bytes asked, when) in an
 * open-addressing table, for the tests that check what a filter or a value
 * says it holds (test_memory_usage.c, test_values.c). tu_track_start
 * empties the table; the counts of live blocks and bytes run on.
 *--------------------------------------------------------------------------*/

#define TU_TRACK_SLOTS (1u << 16)

typedef struct tu_block {
    const void *ptr; /* NULL: never used; TU_TRACK_TOMB: removed */
    size_t asked;
    uint64_t seq;    /* the allocation's number */
    int mark;        /* for the test's own use */
} tu_block;

static tu_block *tu_track_table;
static uint64_t tu_track_seq;
static size_t tu_track_blocks, tu_track_bytes;
static const char tu__track_tomb;
#define TU_TRACK_TOMB ((const void *)&tu__track_tomb)

static inline void tu_track_start(void)
{
    if (tu_track_table == NULL) tu_track_table = calloc(TU_TRACK_SLOTS, sizeof(tu_block));
    assert_non_null(tu_track_table);
    memset(tu_track_table, 0, TU_TRACK_SLOTS * sizeof(tu_block));
}

static inline int tu_track_live(const tu_block *b)
{
    return b->ptr != NULL && b->ptr != TU_TRACK_TOMB;
}

static inline size_t tu__track_slot(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(x >> 48) & (TU_TRACK_SLOTS - 1);
}

/* p's block, or NULL. */
static inline tu_block *tu_track_find(const void *p)
{
    for (size_t i = tu__track_slot(p), n = 0; n < TU_TRACK_SLOTS;
         i = (i + 1) & (TU_TRACK_SLOTS - 1), n++) {
        if (tu_track_table[i].ptr == p) return &tu_track_table[i];
        if (tu_track_table[i].ptr == NULL) return NULL;
    }
    return NULL;
}

static inline void *tu__track_record(void *p, size_t asked)
{
    if (p == NULL) return NULL;
    for (size_t i = tu__track_slot(p);; i = (i + 1) & (TU_TRACK_SLOTS - 1)) {
        if (!tu_track_live(&tu_track_table[i])) {
            tu_track_table[i] = (tu_block){p, asked, tu_track_seq++, 0};
            tu_track_blocks++;
            tu_track_bytes += asked;
            return p;
        }
    }
}

/* p leaves the record: only blocks of this allocator come back to it. */
static inline void tu__track_forget(void *p)
{
    tu_block *b = tu_track_find(p);
    assert_non_null(b);
    tu_track_blocks--;
    tu_track_bytes -= b->asked;
    b->ptr = TU_TRACK_TOMB;
}

static inline void *tu_track_malloc(void *opaque, size_t size)
{
    (void)opaque;
    return tu__track_record(malloc(size), size);
}

static inline void *tu_track_calloc(void *opaque, size_t count, size_t size)
{
    (void)opaque;
    return tu__track_record(calloc(count, size), count * size);
}

/* A move every time: stale pointers show. */
static inline void *tu_track_realloc(void *opaque, void *ptr, size_t size)
{
    (void)opaque;
    void *p = malloc(size);
    if (p == NULL) return NULL;
    if (ptr != NULL) {
        tu_block *b = tu_track_find(ptr);
        assert_non_null(b);
        memcpy(p, ptr, b->asked < size ? b->asked : size);
        tu__track_forget(ptr);
        free(ptr);
    }
    return tu__track_record(p, size);
}

static inline void tu_track_free(void *opaque, void *ptr)
{
    (void)opaque;
    if (ptr == NULL) return;
    tu__track_forget(ptr);
    free(ptr);
}

/* For bk_set_allocator. */
static const bk_allocator tu_track_allocator = {tu_track_malloc, tu_track_calloc, tu_track_free,
                                                NULL};

/*--------------------------------------------------------------------------
 * Key arrays and file images
 *--------------------------------------------------------------------------*/

/* n keys tu_key(first + i, tag) in one block, as the arrays the batch and
 * build functions take: keys[i] points into store. */
typedef struct tu_keyset {
    char *store;
    const void **keys;
    size_t *lens;
    uint64_t n;
} tu_keyset;

static inline void tu_keyset_make(tu_keyset *ks, uint64_t n, uint64_t first, uint64_t tag)
{
    ks->n = n;
    ks->store = malloc((size_t)(n ? n : 1) * TU_KEY_LEN);
    ks->keys = malloc((size_t)(n ? n : 1) * sizeof(void *));
    ks->lens = malloc((size_t)(n ? n : 1) * sizeof(size_t));
    assert_non_null(ks->store);
    assert_non_null(ks->keys);
    assert_non_null(ks->lens);
    for (uint64_t i = 0; i < n; i++) {
        tu_key(ks->store + i * TU_KEY_LEN, first + i, tag);
        ks->keys[i] = ks->store + i * TU_KEY_LEN;
        ks->lens[i] = TU_KEY_LEN;
    }
}

/* tu_keyset_make's n keys, of tag 1 below `split` and tag 2 from there
 * (key number i either way). */
static inline void tu_keyset_make_split(tu_keyset *ks, uint64_t n, uint64_t split)
{
    tu_keyset_make(ks, n, 0, 1);
    for (uint64_t i = split; i < n; i++) tu_key(ks->store + i * TU_KEY_LEN, i, 2);
}

/* n keys of which key i is tu_key(i % distinct, tag): the first distinct
 * again and again. */
static inline void tu_keyset_make_cycle(tu_keyset *ks, uint64_t n, uint64_t distinct,
                                        uint64_t tag)
{
    tu_keyset_make(ks, n, 0, tag);
    for (uint64_t i = distinct; i < n; i++)
        tu_key(ks->store + i * TU_KEY_LEN, i % distinct, tag);
}

static inline void tu_keyset_free(tu_keyset *ks)
{
    free(ks->store);
    free(ks->keys);
    free(ks->lens);
}

/* The file image of f (malloc'd, *len bytes). */
static inline unsigned char *tu_serialize(const bk_filter *f, size_t *len)
{
    *len = (size_t)bk_filter_serialized_size(f);
    assert_true(*len > 0);
    unsigned char *buf = malloc(*len);
    assert_non_null(buf);
    assert_int_equal(bk_filter_serialize(f, buf, *len), BK_OK);
    return buf;
}

/* a and b (malloc'd, la and lb bytes) hold the same bytes; both are freed. */
static inline void tu_same_bytes(void *a, size_t la, void *b, size_t lb)
{
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    free(a);
    free(b);
}

/* f and g have the same image. */
static inline void tu_same_image(const bk_filter *f, const bk_filter *g)
{
    size_t la, lb;
    unsigned char *a = tu_serialize(f, &la), *b = tu_serialize(g, &lb);
    tu_same_bytes(a, la, b, lb);
}

/* The last `tail` bytes of f's image (a family's payload), malloc'd;
 * *len = tail. */
static inline unsigned char *tu_image_tail(const bk_filter *f, uint64_t tail, uint64_t *len)
{
    size_t size;
    unsigned char *buf = tu_serialize(f, &size);
    *len = tail;
    assert_true(tail <= size);
    memmove(buf, buf + (size - tail), (size_t)tail);
    return buf;
}

/* The bytes of a file (malloc'd), or NULL when it cannot be opened. */
static inline unsigned char *tu_read_file(const char *path, size_t *len)
{
    *len = 0;
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return buf;
}

static inline int tu__attempt_deserialize(void *ctx)
{
    const tu__image *im = ctx;
    bk_filter *g;
    int rc = bk_filter_deserialize(&g, im->buf, im->len);
    if (rc == BK_OK) bk_filter_free(g);
    return rc;
}

/* tu_oom_loop over loading the image buf (len bytes): every allocation
 * failure is BK_ENOMEM and leaks nothing. Returns the allocations a load
 * makes. */
static inline long tu_oom_deserialize(const unsigned char *buf, size_t len)
{
    tu__image im = {(unsigned char *)buf, len};
    return tu_oom_loop(tu__attempt_deserialize, &im);
}

/* A static family's build of a key set into *out (as a bk_filter); and
 * the same at width w from seed. */
typedef int (*tu_static_build_fn)(bk_filter **out, const tu_keyset *ks);
typedef int (*tu_static_make_fn)(bk_filter **out, const tu_keyset *ks, uint32_t w,
                                 uint64_t seed);

typedef struct tu__static_oom {
    tu_static_build_fn build; /* or, when NULL: */
    tu_static_make_fn make;
    uint32_t w;
    uint64_t seed;
    const tu_keyset *ks;
} tu__static_oom;

static inline int tu__attempt_static_build(void *ctx)
{
    const tu__static_oom *o = ctx;
    bk_filter *f = NULL;
    int rc = o->build ? o->build(&f, o->ks) : o->make(&f, o->ks, o->w, o->seed);
    if (rc != BK_OK) return rc;
    for (uint64_t i = 0; i < o->ks->n && rc == BK_OK; i++)
        if (!bk_filter_contains(f, o->ks->keys[i], o->ks->lens[i])) rc = BK_EINVAL;
    bk_filter_free(f);
    return rc;
}

static inline void tu__static_failures(tu__static_oom *o, uint64_t n, long min_allocations,
                                       const bk_filter *g)
{
    tu_keyset ks;
    tu_keyset_make(&ks, n, 0, 1);
    o->ks = &ks;
    assert_true(tu_oom_loop(tu__attempt_static_build, o) >= min_allocations);
    tu_keyset_free(&ks);
    size_t len;
    unsigned char *buf = tu_serialize(g, &len);
    assert_true(tu_oom_deserialize(buf, len) >= 1);
    free(buf);
}

/* Allocation failures of a static family: building n keys under
 * tu_oom_loop fails cleanly or gives a filter holding every key, over at
 * least `min_allocations` allocations; then the image of g loads under the
 * same failures. */
static inline void tu_static_allocation_failures(tu_static_build_fn build, uint64_t n,
                                                 long min_allocations, const bk_filter *g)
{
    tu__static_oom o = {build, NULL, 0, 0, NULL};
    tu__static_failures(&o, n, min_allocations, g);
}

/* The same for make's builds at width w from seed. */
static inline void tu_static_make_failures(tu_static_make_fn make, uint32_t w, uint64_t seed,
                                           uint64_t n, long min_allocations, const bk_filter *g)
{
    tu__static_oom o = {NULL, make, w, seed, NULL};
    tu__static_failures(&o, n, min_allocations, g);
}

/* A golden file pins a format: today's code must write exactly its bytes
 * (buf). A missing one is written only with BK_WRITE_GOLDEN=1 (once, when
 * the family was added), else the test fails. Returns its bytes
 * (malloc'd, *glen). */
static inline unsigned char *tu_golden(const char *path, const unsigned char *buf, size_t len,
                                       size_t *glen)
{
    unsigned char *golden = tu_read_file(path, glen);
    if (golden == NULL && getenv("BK_WRITE_GOLDEN") != NULL) {
        FILE *fp = fopen(path, "wb");
        assert_non_null(fp);
        assert_int_equal(fwrite(buf, 1, len, fp), len);
        fclose(fp);
        golden = tu_read_file(path, glen);
    }
    if (golden == NULL) fail_msg("%s is missing (BK_WRITE_GOLDEN=1 writes it)", path);
    assert_int_equal(*glen, len);
    assert_memory_equal(golden, buf, len);
    return golden;
}


/*--------------------------------------------------------------------------
 * Model-based tests of filters that delete (appended for issue 4): an exact
 * multiset of key ids in [0, universe), with a list of instances so that a
 * random present key can be drawn uniformly.
 *--------------------------------------------------------------------------*/

typedef struct tu_multiset {
    uint32_t *count;     /* copies of each id */
    uint64_t *instances; /* one entry per copy */
    size_t size;         /* copies stored */
    size_t universe;
    size_t room;
} tu_multiset;

static inline void tu_multiset_init(tu_multiset *s, size_t universe,
                                    size_t room)
{
    s->count = calloc(universe, sizeof(*s->count));
    s->instances = calloc(room, sizeof(*s->instances));
    assert_non_null(s->count);
    assert_non_null(s->instances);
    s->size = 0;
    s->universe = universe;
    s->room = room;
}

static inline void tu_multiset_free(tu_multiset *s)
{
    free(s->count);
    free(s->instances);
}

static inline void tu_multiset_add(tu_multiset *s, uint64_t id)
{
    assert_true(s->size < s->room);
    s->count[id]++;
    s->instances[s->size++] = id;
}

/* Remove the copy at instances[index] (swap with the last); returns its id. */
static inline uint64_t tu_multiset_take(tu_multiset *s, size_t index)
{
    uint64_t id = s->instances[index];
    s->instances[index] = s->instances[--s->size];
    s->count[id]--;
    return id;
}

/*--------------------------------------------------------------------------
 * Static families (built from their keys) through the generic handle
 *--------------------------------------------------------------------------*/

/* g, of family `family` called `name`, built from ks at 2^-w: what the
 * generic handle refuses (adds, removes, clear, merge, create), what it
 * reports, and a clone (through the format) that finds every key. */
static inline void tu_static_check_handle(bk_filter *g, bk_family family, const char *name,
                                          const tu_keyset *ks, uint32_t w)
{
    assert_int_equal(bk_filter_family(g), family);
    assert_string_equal(bk_family_name(family), name);
    assert_int_equal(bk_family_from_name(name), family);
    assert_int_equal(bk_filter_contains(g, ks->keys[7], ks->lens[7]), 1);
    assert_int_equal(bk_filter_add(g, "new", 3), BK_ESTATIC);
    assert_int_equal(bk_filter_add_batch(g, ks->keys, ks->lens, 2, NULL), BK_ESTATIC);
    assert_int_equal(bk_filter_remove(g, ks->keys[7], ks->lens[7]), BK_ENOTSUP);
    assert_int_equal(bk_filter_clear(g), BK_ENOTSUP);
    assert_int_equal(bk_filter_merge(g, g), BK_ENOTSUP);
    assert_int_equal(bk_filter_contains(g, ks->keys[7], ks->lens[7]), 1);
    assert_true(strstr(bk_strerror(BK_ESTATIC), "rebuild") != NULL);

    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(g, &info), BK_OK);
    assert_int_equal(info.items, ks->n);
    assert_int_equal(info.capacity, ks->n);
    assert_int_equal(info.can_remove, 0);
    assert_true(info.fpr_now == ldexp(1.0, -(int)w));

    bk_filter_config cfg;
    bk_filter_config_init(&cfg);
    cfg.family = family;
    cfg.capacity = 10;
    cfg.fpr = 0.01;
    bk_filter *c = NULL;
    assert_int_equal(bk_filter_create(&c, &cfg), BK_ESTATIC);
    assert_null(c);

    assert_int_equal(bk_filter_clone(&c, g), BK_OK);
    assert_int_equal(bk_filter_family(c), family);
    for (uint64_t i = 0; i < ks->n; i++)
        assert_int_equal(bk_filter_contains(c, ks->keys[i], ks->lens[i]), 1);
    bk_filter_free(c);
}

/* g saved to a file, loaded, and mapped read-only (verified when
 * `verify`): check(g, copy, arg) for the loaded copy and the mapping, the
 * mapping refuses adds, and the loaded filter saves back to g's bytes. */
static inline void tu_check_saved_copies(const bk_filter *g, int verify,
                                         void (*check)(const bk_filter *g,
                                                       const bk_filter *copy, void *arg),
                                         void *arg)
{
    char path[] = "/tmp/bk_test_saved_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(bk_filter_save(g, path), BK_OK);
    bk_filter *loaded, *mapped;
    assert_int_equal(bk_filter_load(&loaded, path), BK_OK);
    assert_int_equal(bk_filter_map(&mapped, path, BK_MAP_READONLY | (verify ? BK_MAP_VERIFY : 0)),
                     BK_OK);
    check(g, loaded, arg);
    check(g, mapped, arg);
    assert_int_equal(bk_filter_add(mapped, "x", 1), BK_EREADONLY);
    tu_same_image(g, loaded);
    bk_filter_free(loaded);
    bk_filter_free(mapped);
    unlink(path);
}

/* copy answers as g for 200000 keys, tags tags[0] and tags[1] alternating. */
static inline void tu_same_answers(const bk_filter *g, const bk_filter *copy, void *arg)
{
    const uint64_t *tags = arg;
    for (uint64_t i = 0; i < 200000; i++) {
        char key[TU_KEY_LEN];
        tu_key(key, i, tags[i & 1]);
        assert_int_equal(bk_filter_contains(copy, key, sizeof(key)),
                         bk_filter_contains(g, key, sizeof(key)));
    }
}

/* g saved, loaded and mapped (verified): the three answer alike for keys
 * of tag `in` and `out`. */
static inline void tu_check_save_load_map(const bk_filter *g, uint64_t in, uint64_t out)
{
    uint64_t tags[2] = {out, in};
    tu_check_saved_copies(g, 1, tu_same_answers, tags);
}

/*--------------------------------------------------------------------------
 * Filters that delete, through the generic handle (appended for issue 33):
 * what tests/test_hier.c, test_hybrid.c, test_varcount.c and test_dleft.c
 * ran as copies of one another. Batches, clones, files and allocation
 * failures of every family are tests/test_conformance.c's.
 *--------------------------------------------------------------------------*/

/* What a family's filter may do in tu_deleting_model. */
typedef struct tu_model_rule {
    const char *name;    /* for the tallies printed at the end */
    uint32_t count_cap;  /* a lookup's count c of a key present `truth` times is at
                          * least min(truth, count_cap); 0: counts are not read */
    int frozen_one;      /* c == 1 also passes for a present key (a frozen block) */
    int refusals;        /* 1: an add may answer BK_EFULL, 2: also BK_ECOPIES; a
                          * refused add leaves the model as it was */
    int add_is_new;      /* 1: an add answers 1 or 0, and 0 for a present key;
                          * 0: every successful add answers 1 */
    int items_exact;     /* info.items equals the model's copies after every add */
    int undeletable;     /* a remove may answer BK_EUNDELETABLE (the key stays);
                          * one that succeeds was of a key present once */
    uint64_t removes_div; /* at least ops / removes_div removes succeed */
} tu_model_rule;

/* Model-based: random adds (half of the operations while the model holds
 * fewer than `capacity` copies, then 30%), removes (30%, 50%) and lookups
 * against an exact multiset of `universe` key ids, `ops` operations drawn
 * from `seed`. Adds answer as rule->add_is_new says (or are refused as
 * rule->refusals allows), every remove of a present key is BK_OK (or
 * BK_EUNDELETABLE under rule->undeletable), no present key is ever missed,
 * counts follow rule->count_cap and rule->frozen_one, and over a tenth of
 * the operations are lookups. f is freed here. */
static inline void tu_deleting_model(bk_filter *f, uint64_t capacity, uint64_t universe,
                                     uint64_t ops, uint64_t seed, const tu_model_rule *rule)
{
    tu_multiset model;
    char key[TU_KEY_LEN];
    uint64_t rng = seed, removes = 0, refused_removes = 0, lookups = 0, full = 0, copies = 0;
    tu_multiset_init(&model, universe, ops + 1);
    for (uint64_t op = 0; op < ops; op++) {
        uint64_t r = tu_next(&rng) % 100;
        uint64_t add_share = model.size < capacity ? 50 : 30;
        if (r < add_share) {
            uint64_t id = tu_next(&rng) % universe;
            tu_key(key, id, 1);
            int rc = bk_filter_add(f, key, sizeof(key));
            if (rc == BK_EFULL && rule->refusals >= 1) {
                full++;
            } else if (rc == BK_ECOPIES && rule->refusals >= 2) {
                copies++;
            } else {
                if (rc != 0 && rc != 1) fail_msg("add: %s at %zu", bk_errname(rc), model.size);
                if (!rule->add_is_new) assert_int_equal(rc, 1);
                else if (model.count[id] > 0) assert_int_equal(rc, 0);
                tu_multiset_add(&model, id);
            }
            if (rule->items_exact) {
                bk_filter_info info;
                assert_int_equal(bk_filter_get_info(f, &info), BK_OK);
                assert_int_equal(info.items, model.size);
            }
        } else if (r < 80 && model.size > 0) {
            size_t index = tu_next(&rng) % model.size;
            uint64_t id = model.instances[index];
            tu_key(key, id, 1);
            int rc = bk_filter_remove(f, key, sizeof(key));
            if (rc == BK_OK || !rule->undeletable) {
                assert_int_equal(rc, BK_OK);
                if (rule->undeletable) assert_int_equal(model.count[id], 1);
                tu_multiset_take(&model, index);
                removes++;
            } else {
                assert_int_equal(rc, BK_EUNDELETABLE); /* never ENOTFOUND */
                refused_removes++;
            }
        } else {
            uint64_t id = tu_next(&rng) % universe;
            uint32_t truth = model.count[id];
            tu_key(key, id, 1);
            if (truth > 0) assert_int_equal(bk_filter_contains(f, key, sizeof(key)), 1);
            if (rule->count_cap > 0) {
                int64_t c = bk_filter_count(f, key, sizeof(key));
                uint32_t want = truth < rule->count_cap ? truth : rule->count_cap;
                if (!(c >= (int64_t)want || (rule->frozen_one && c == 1 && truth > 0)))
                    fail_msg("key %llu present %u times counts %lld", (unsigned long long)id,
                             truth, (long long)c);
            }
            lookups++;
        }
        if (op % 20000 == 0 || op == ops - 1) {
            for (size_t i = 0; i < model.size; i++) {
                tu_key(key, model.instances[i], 1);
                assert_int_equal(bk_filter_contains(f, key, sizeof(key)), 1);
            }
        }
    }
    assert_true(removes > ops / (rule->removes_div ? rule->removes_div : 4));
    assert_true(lookups > ops / 10);
    print_message("%s model: %llu removed, %llu removes refused, %llu adds refused (full), "
                  "%llu (copies)\n",
                  rule->name, (unsigned long long)removes, (unsigned long long)refused_removes,
                  (unsigned long long)full, (unsigned long long)copies);
    tu_multiset_free(&model);
    bk_filter_free(f);
}

/* The share of keys of tag `tag` (numbers 0 to queries - 1) f finds. */
static inline double tu_measure_rate(const bk_filter *f, uint64_t queries, uint64_t tag)
{
    return (double)tu_count_found(f, 0, queries, tag) / (double)queries;
}

/* The family's bk_<family>_get_stats of f (asserting BK_OK). */
typedef void (*tu_delete_stats_fn)(const bk_filter *f, bk_delete_stats *st);

/* Measured rates, full and after churn: f, made for TU_CHURN_KEYS keys at
 * `target`, takes that many keys; its formula at capacity meets the
 * target, the rate measured over 1e6 absent keys is within 5 binomial sd
 * of what its counters predict (fpr_now) and not above the formula at
 * capacity beyond that, add answers 0 for under 2% of the keys (items),
 * and no block overflowed. Then churn: the first half removed, as many new
 * keys added; every key present is found, nothing overflowed, and the
 * measured rate is again within 5 sd of fpr_now. f is freed here. */
#define TU_CHURN_KEYS 200000
static inline void tu_fpr_churn(bk_filter *f, const char *name, double target,
                                tu_delete_stats_fn stats)
{
    const uint64_t n = TU_CHURN_KEYS, queries = 1000000;
    char key[TU_KEY_LEN];
    bk_delete_stats st;
    for (uint64_t i = 0; i < n; i++) {
        tu_key(key, i, 1);
        assert_true(bk_filter_add(f, key, sizeof(key)) >= 0);
    }
    stats(f, &st);
    double measured = tu_measure_rate(f, queries, 2);
    print_message("%s p=%g: k=%u, %.2f bits/key, measured %.5f, formula %.5f, "
                  "from the filter's state %.5f\n",
                  name, target, st.hashes, st.bits_per_key, measured, st.fpr_at_capacity,
                  st.fpr_now);
    assert_true(st.items > n - n / 50);
    assert_true(st.fpr_at_capacity <= target);
    assert_true(measured <= st.fpr_at_capacity + tu_tolerance(st.fpr_at_capacity, queries, 5.0));
    assert_true(fabs(measured - st.fpr_now) <= tu_tolerance(st.fpr_now, queries, 5.0));
    assert_int_equal(st.overflows, 0);

    /* churn: remove the first half, add as many new keys */
    for (uint64_t i = 0; i < n / 2; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_filter_remove(f, key, sizeof(key)), BK_OK);
    }
    for (uint64_t i = 0; i < n / 2; i++) {
        tu_key(key, i, 3);
        assert_true(bk_filter_add(f, key, sizeof(key)) >= 0);
    }
    for (uint64_t i = n / 2; i < n; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_filter_contains(f, key, sizeof(key)), 1);
    }
    for (uint64_t i = 0; i < n / 2; i++) {
        tu_key(key, i, 3);
        assert_int_equal(bk_filter_contains(f, key, sizeof(key)), 1);
    }
    stats(f, &st);
    assert_int_equal(st.overflows, 0);
    measured = tu_measure_rate(f, queries, 2);
    assert_true(fabs(measured - st.fpr_now) <= tu_tolerance(st.fpr_now, queries, 5.0));
    bk_filter_free(f);
}

/* A copy of f through its image (bk_filter_serialize, bk_filter_deserialize). */
static inline bk_filter *tu_reload(const bk_filter *f)
{
    size_t len;
    unsigned char *buf = tu_serialize(f, &len);
    bk_filter *g = NULL;
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_OK);
    free(buf);
    return g;
}

#define TU_BCF_KEYS 3000
/* What a batch tells beyond the conformance suite (which checks that it
 * equals single adds): f, made for TU_BCF_KEYS keys at 1%, takes them in
 * one batch that reports under 1% as present already, info.items is what
 * the batch reported new, and bk_filter_clear answers BK_OK and leaves
 * none of them (nor as many absent keys) found. f is freed here. */
static inline void tu_batch_items_clear(bk_filter *f)
{
    tu_keyset ks;
    tu_keyset_make_split(&ks, 2 * TU_BCF_KEYS, TU_BCF_KEYS);
    int64_t added = bk_filter_add_batch(f, ks.keys, ks.lens, TU_BCF_KEYS, NULL);
    assert_true(added > TU_BCF_KEYS - 30 && added <= TU_BCF_KEYS);
    bk_filter_info info;
    assert_int_equal(bk_filter_get_info(f, &info), BK_OK);
    assert_int_equal(info.items, (uint64_t)added);
    assert_int_equal(bk_filter_clear(f), BK_OK);
    assert_int_equal(bk_filter_contains_batch(f, ks.keys, ks.lens, ks.n, NULL), 0);
    tu_keyset_free(&ks);
    bk_filter_free(f);
}

#endif /* BK_TESTUTIL_H */
