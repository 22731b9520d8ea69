/*
 * test_format.c - the file format: round trips for every family, golden
 * files, and damaged input of every kind.
 *
 * Golden files (tests/golden, one .bkf per family) are the format's contract: they were
 * written once by this program (BK_WRITE_GOLDEN=1 ./test_format) and are
 * only ever read afterwards. If a change breaks them, that change is a
 * format version bump, not a new golden file.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#define XXH_INLINE_ALL
#include <xxhash.h> /* to re-seal a header after editing it */

#define GOLDEN_DIR BK_SOURCE_DIR "/tests/golden"

static char tmpdir[256];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/bk-format-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tmp_path(const char *name)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    return path;
}

/*--------------------------------------------------------------------------
 * The filters under test: one per family that has a format.
 *--------------------------------------------------------------------------*/

#define SAMPLE_KEYS 2000u

TU_ADD_RANGE(bloom_add_range, bk_bloom, bk_bloom_add)
TU_ADD_RANGE(blocked_add_range, bk_blocked, bk_blocked_add)
TU_ADD_RANGE_OK(growable_add_range, bk_growable, bk_growable_add)

typedef struct sample {
    const char *name;        /* golden file name */
    bk_filter *(*make)(void);
} sample;

static bk_filter *make_bloom(void)
{
    bk_bloom *f;
    assert_int_equal(bk_bloom_create(&f, SAMPLE_KEYS, 0.01, 42), BK_OK);
    bloom_add_range(f, 0, SAMPLE_KEYS, 1);
    return bk_bloom_as_filter(f);
}

static bk_filter *make_blocked(void)
{
    bk_blocked *f;
    assert_int_equal(bk_blocked_create(&f, SAMPLE_KEYS, 0.01, 43), BK_OK);
    blocked_add_range(f, 0, SAMPLE_KEYS, 1);
    return bk_blocked_as_filter(f);
}

/* The blocked family's split layout (XXH3-64, hash algorithm 2). */
static bk_filter *make_blocked_split(void)
{
    bk_blocked *f;
    assert_int_equal(bk_blocked_create_split(&f, SAMPLE_KEYS, 0.01, 53), BK_OK);
    blocked_add_range(f, 0, SAMPLE_KEYS, 1);
    return bk_blocked_as_filter(f);
}

/* Growable filters (family 18), as the second layout writes them: a list
 * (2,000 keys from RedisBloom's default of 100: level 5), and a table of
 * blocks (made for 12,800: level 7) into which 70 hashes are aimed at
 * mini 0, so that block 0 fills, 15 go to block 1 as pairs and the rest to
 * the stash: the file has both parts. */
static bk_filter *make_growable_list(void)
{
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 100, 0.01, 59), BK_OK);
    growable_add_range(f, 0, SAMPLE_KEYS, 1);
    assert_int_equal(bk_growable_doublings(f), 5);
    return bk_growable_as_filter(f);
}

static bk_filter *make_growable(void)
{
    bk_growable *f;
    assert_int_equal(bk_growable_create(&f, 12800, 0.01, 59), BK_OK);
    growable_add_range(f, 0, SAMPLE_KEYS, 1);
    uint64_t minis = bk_growable_capacity(f) / 4 * 3;
    for (unsigned i = 0; i < 70; i++)
        assert_true(bk_growable_add_hash(f, tu_growable_hash(minis, 0, 2 * i + 1)) >= 0);
    assert_true(bk_growable_stashed(f) > 0);
    return bk_growable_as_filter(f);
}

/* The other families through the generic constructor. */
static bk_filter *make_generic(bk_family family, void (*tune)(bk_filter_config *))
{
    bk_filter_config cfg = tu_config(family, SAMPLE_KEYS, 0.01);
    cfg.seed = 40 + (uint64_t)family;
    if (tune) tune(&cfg);
    bk_filter *f;
    assert_int_equal(bk_filter_create(&f, &cfg), BK_OK);
    tu_add_keys(f, 0, SAMPLE_KEYS, 1);
    return f;
}

static void tune_counting8(bk_filter_config *c) { c->counter_bits = 8; }
static void tune_cuckoo12(bk_filter_config *c) { c->bucket_size = 2; c->fingerprint_bits = 12; }
static bk_filter *make_counting(void) { return make_generic(BK_FAMILY_COUNTING, NULL); }
static bk_filter *make_counting8(void) { return make_generic(BK_FAMILY_COUNTING, tune_counting8); }
static bk_filter *make_deletable(void) { return make_generic(BK_FAMILY_DELETABLE, NULL); }
static bk_filter *make_cuckoo(void) { return make_generic(BK_FAMILY_CUCKOO, NULL); }
static bk_filter *make_cuckoo12(void) { return make_generic(BK_FAMILY_CUCKOO, tune_cuckoo12); }
static void tune_cuckoo_paired(bk_filter_config *c) { c->bucket_size = 2; c->fingerprint_bits = 8; }
/* RedisBloom's CF shape: buckets of 2 x 8 bits as 15-bit pair codes */
static bk_filter *make_cuckoo_paired(void) { return make_generic(BK_FAMILY_CUCKOO, tune_cuckoo_paired); }
static bk_filter *make_dleft(void) { return make_generic(BK_FAMILY_DLEFT, NULL); }
static bk_filter *make_varcount(void) { return make_generic(BK_FAMILY_VARCOUNT, NULL); }
static bk_filter *make_hier(void) { return make_generic(BK_FAMILY_HIER, NULL); }
/* An auto-clear filter (family 22) around a counting filter, rotating at
 * 30% of its counters: 2,000 keys at a capacity of 2,000 have rotated it,
 * so the file has both generations and a clear count. */
static void tune_autoclear(bk_filter_config *c)
{
    c->auto_clear = 0.3;
    c->auto_clear_mode = BK_AUTOCLEAR_ROTATE;
}
static bk_filter *make_autoclear(void)
{
    bk_filter *f = make_generic(BK_FAMILY_COUNTING, tune_autoclear);
    bk_autoclear_stats st;
    assert_int_equal(bk_autoclear_get_stats(bk_filter_as_autoclear(f), &st), BK_OK);
    assert_true(st.clears > 0 && st.previous_items > 0);
    return f;
}
static bk_filter *make_hybrid(void) { return make_generic(BK_FAMILY_HYBRID, NULL); }
static bk_filter *make_morris(void) { return make_generic(BK_FAMILY_MORRIS, NULL); }

/* A cuckoo filter of RedisBloom's CF shape (buckets of 2 x 8 bits, 20
 * kicks) made with 32 buckets and grown by doubling stages, as CF.ADD
 * grows a key reserved with EXPANSION 2: one part per stage. */
static bk_filter *make_cuckoo_stages(void)
{
    bk_cuckoo *f;
    assert_int_equal(bk_cuckoo_create_params(&f, 32, 2, 8, 20, 45), BK_OK);
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < SAMPLE_KEYS; i++) {
        tu_key(key, i, 1);
        while (bk_cuckoo_add(f, key, sizeof(key)) != BK_OK) {
            uint64_t newest = bk_cuckoo_stage_buckets(f, bk_cuckoo_stages(f) - 1);
            assert_int_equal(bk_cuckoo_add_stage(f, 2 * newest), BK_OK);
        }
    }
    assert_int_equal(bk_cuckoo_stages(f), 6);
    return bk_cuckoo_as_filter(f);
}

/* A scalable filter made for 100 keys that grew to five stages. */
static bk_filter *make_scalable(void)
{
    bk_scalable *f;
    assert_int_equal(bk_scalable_create(&f, 100, 0.01, 2, BK_SCALABLE_BOUNDED, 46), BK_OK);
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < SAMPLE_KEYS; i++) {
        tu_key(key, i, 1);
        assert_true(bk_scalable_add(f, key, sizeof(key)) >= 0);
    }
    assert_int_equal(bk_scalable_stages(f), 5);
    return bk_scalable_as_filter(f);
}

/* A time window of 1000 ms in 4 generations, fed over 900 ms so that it
 * rotated and every sample key is still inside the window. */
static bk_filter *make_window(void)
{
    bk_window *f;
    assert_int_equal(bk_window_create(&f, SAMPLE_KEYS, 0.01, 1000, 4, 5000, 47), BK_OK);
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < SAMPLE_KEYS; i++) {
        tu_key(key, i, 1);
        assert_true(bk_window_add(f, key, sizeof(key), 5000 + i * 900 / SAMPLE_KEYS) >= 0);
    }
    return bk_window_as_filter(f);
}

/* The sample keys into a TTL filter made at 5000 with longest TTL 400:
 * half with the longest TTL at once, the rest with TTLs of 1..400 over
 * 90 ms; then, looked up at its clock, every sample key must still be
 * live: the ones whose TTL has run out are re-added with the longest. */
static bk_filter *fill_ttl(bk_ttl *f)
{
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < SAMPLE_KEYS; i++) {
        tu_key(key, i, 1);
        uint64_t ttl = i < SAMPLE_KEYS / 2 ? 400 : 1 + (i * 7919) % 400;
        uint64_t now = i < SAMPLE_KEYS / 2 ? 5000 : 5000 + i * 90 / SAMPLE_KEYS;
        assert_true(bk_ttl_add(f, key, sizeof(key), ttl, now) >= 0);
    }
    for (uint64_t i = 0; i < SAMPLE_KEYS; i++) {
        tu_key(key, i, 1);
        if (!bk_ttl_contains(f, key, sizeof(key), bk_ttl_now(f)))
            assert_true(bk_ttl_add(f, key, sizeof(key), 400, bk_ttl_now(f)) >= 0);
    }
    return bk_ttl_as_filter(f);
}

/* A TTL filter: 5 generations, longest TTL 400 ms (granularity 100), for
 * SAMPLE_KEYS live keys (segments of 500; the longest TTLs at once put two
 * segments in their generation). */
static bk_filter *make_ttl(void)
{
    bk_ttl *f;
    assert_int_equal(bk_ttl_create(&f, SAMPLE_KEYS, 0.01, 400, 5, 5000, 48), BK_OK);
    return fill_ttl(f);
}

/* The table layout: 8 slots (granularity 50). */
static bk_filter *make_ttl_table(void)
{
    bk_ttl *f;
    assert_int_equal(bk_ttl_create_table(&f, SAMPLE_KEYS, 0.01, 400, 8, 5000, 49), BK_OK);
    return fill_ttl(f);
}

static const sample samples[] = {
    {"bloom-v1.bkf", make_bloom},
    {"blocked-v1.bkf", make_blocked},
    {"blocked-split-v1.bkf", make_blocked_split},
    {"growable-v2.bkf", make_growable},
    {"growable-list-v2.bkf", make_growable_list},
    {"counting-v1.bkf", make_counting},
    {"counting8-v1.bkf", make_counting8},
    {"deletable-v1.bkf", make_deletable},
    {"cuckoo-v1.bkf", make_cuckoo},
    {"cuckoo12-v1.bkf", make_cuckoo12},
    {"cuckoo-paired-v1.bkf", make_cuckoo_paired},
    {"cuckoo-stages-v1.bkf", make_cuckoo_stages},
    {"scalable-r09-v1.bkf", make_scalable}, /* the 0.9 schedule; scalable-v1.bkf: below */
    {"window-v1.bkf", make_window},
    {"dleft-v1.bkf", make_dleft},
    {"varcount-v1.bkf", make_varcount},
    {"hier-v1.bkf", make_hier},
    {"hybrid-v1.bkf", make_hybrid},
    {"morris-v1.bkf", make_morris},
    {"autoclear-v1.bkf", make_autoclear},
    {"ttl-v1.bkf", make_ttl},
    {"ttl-table-v1.bkf", make_ttl_table}, /* see moves_free */
};
#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))

/* The two filters answer alike: all sample keys, and 20000 absent keys
 * (the false positives must be the very same ones). */
static void assert_same_answers(const bk_filter *a, const bk_filter *b)
{
    char key[TU_KEY_LEN];
    assert_int_equal(bk_filter_family(a), bk_filter_family(b));
    for (uint64_t i = 0; i < SAMPLE_KEYS; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_filter_contains(b, key, sizeof(key)), 1);
    }
    for (uint64_t i = 0; i < 20000; i++) {
        tu_key(key, i, 2);
        assert_int_equal(bk_filter_contains(a, key, sizeof(key)),
                         bk_filter_contains(b, key, sizeof(key)));
    }
    bk_filter_info ia, ib;
    assert_int_equal(bk_filter_get_info(a, &ia), BK_OK);
    assert_int_equal(bk_filter_get_info(b, &ib), BK_OK);
    assert_true(ia.items == ib.items);
    assert_true(ia.capacity == ib.capacity);
    assert_true(ia.target_fpr == ib.target_fpr);
    assert_true(ia.seed == ib.seed);
    assert_true(ia.fill == ib.fill);
}

static void write_file(const char *path, const void *buf, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_true(fwrite(buf, 1, len, fp) == len);
    assert_int_equal(fclose(fp), 0);
}

/*--------------------------------------------------------------------------
 * Round trips
 *--------------------------------------------------------------------------*/

static void test_round_trip_buffer(void **state)
{
    (void)state;
    for (size_t s = 0; s < NSAMPLES; s++) {
        bk_filter *f = samples[s].make(), *g;
        size_t len;
        unsigned char *buf = tu_serialize(f, &len);
        assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_OK);
        assert_same_answers(f, g);
        /* serialising the copy gives the same bytes */
        size_t len2;
        unsigned char *buf2 = tu_serialize(g, &len2);
        assert_true(len2 == len && memcmp(buf, buf2, len) == 0);
        /* too small a buffer is refused */
        assert_int_equal(bk_filter_serialize(f, buf2, len - 1), BK_ESIZE);
        free(buf2);
        free(buf);
        bk_filter_free(g);
        bk_filter_free(f);
    }
}

static void test_round_trip_file(void **state)
{
    (void)state;
    for (size_t s = 0; s < NSAMPLES; s++) {
        bk_filter *f = samples[s].make(), *g;
        const char *path = tmp_path(samples[s].name);
        assert_int_equal(bk_filter_save(f, path), BK_OK);
        assert_int_equal(bk_filter_load(&g, path), BK_OK);
        assert_same_answers(f, g);
        bk_filter_free(g);

        /* through a descriptor, and through a pipe */
        int fd = open(path, O_RDONLY);
        assert_true(fd >= 0);
        assert_int_equal(bk_filter_read_fd(&g, fd), BK_OK);
        close(fd);
        assert_same_answers(f, g);
        bk_filter_free(g);

        int p[2];
        assert_int_equal(pipe(p), 0);
        size_t len;
        unsigned char *buf = tu_serialize(f, &len);
        assert_true(len < 60000); /* fits the pipe buffer */
        assert_true(write(p[1], buf, len) == (ssize_t)len);
        close(p[1]);
        assert_int_equal(bk_filter_read_fd(&g, p[0]), BK_OK);
        close(p[0]);
        assert_same_answers(f, g);
        bk_filter_free(g);
        free(buf);
        bk_filter_free(f);
    }
}

static void test_save_is_atomic_and_leaves_no_temp(void **state)
{
    (void)state;
    bk_filter *f = samples[0].make();
    const char *path = tmp_path("atomic.bkf");
    write_file(path, "old contents", 12);
    assert_int_equal(bk_filter_save(f, path), BK_OK);
    bk_filter *g;
    assert_int_equal(bk_filter_load(&g, path), BK_OK);
    bk_filter_free(g);
    /* only the file itself remains: no temporary left behind */
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "test $(ls '%s' | grep -c tmp) -eq 0", tmpdir);
    assert_int_equal(system(cmd), 0);
    /* a directory that does not exist: an error, nothing created */
    assert_int_equal(bk_filter_save(f, "/nonexistent-dir/x.bkf"), BK_EIO);
    assert_int_equal(bk_filter_save(f, ""), BK_EINVAL);
    assert_int_equal(bk_filter_save(NULL, path), BK_EINVAL);
    bk_filter_free(f);
}

/* Whether a sample's family copies its payload when loaded (bloomkit.h,
 * bk_filter_map): then a read-only or private mapping lets the file go. */
static int copies_payload(const char *name)
{
    return strncmp(name, "growable", 8) == 0 || strcmp(name, "cuckoo-stages-v1.bkf") == 0;
}

static void test_map(void **state)
{
    (void)state;
    for (size_t s = 0; s < NSAMPLES; s++) {
        bk_filter *f = samples[s].make(), *g;
        const char *path = tmp_path(samples[s].name);
        assert_int_equal(bk_filter_save(f, path), BK_OK);

        assert_int_equal(bk_filter_map(&g, path, BK_MAP_READONLY | BK_MAP_VERIFY), BK_OK);
        assert_same_answers(f, g);
        bk_filter_info info;
        assert_int_equal(bk_filter_get_info(g, &info), BK_OK);
        assert_true(info.read_only);
        assert_int_equal(info.mapped, !copies_payload(samples[s].name));
        /* the file's bytes, used in place (0 once copied; 0 in the heap) */
        struct stat fst;
        assert_int_equal(stat(path, &fst), 0);
        assert_int_equal(bk_filter_mapped_bytes(g),
                         copies_payload(samples[s].name) ? 0 : (size_t)fst.st_size);
        assert_int_equal(bk_filter_mapped_bytes(f), 0);
        assert_int_equal(bk_filter_add(g, "new", 3), BK_EREADONLY);
        assert_int_equal(bk_filter_sync(g), BK_EREADONLY);
        bk_filter_free(g);

        /* private: adds work in memory and never reach the file */
        assert_int_equal(bk_filter_map(&g, path, BK_MAP_PRIVATE), BK_OK);
        assert_int_equal(bk_filter_add(g, "private-key", 11), 1);
        assert_int_equal(bk_filter_contains(g, "private-key", 11), 1);
        assert_int_equal(bk_filter_sync(g), BK_ENOTSUP);
        bk_filter_free(g);
        assert_int_equal(bk_filter_map(&g, path, BK_MAP_PRIVATE | BK_MAP_VERIFY), BK_OK);
        assert_same_answers(f, g); /* the file is unchanged */
        bk_filter_free(g);
        assert_int_equal(bk_filter_map(&g, path, BK_MAP_PRIVATE | BK_MAP_WRITABLE), BK_EINVAL);

        /* writable: adds land in the file after sync */
        assert_int_equal(bk_filter_map(&g, path, BK_MAP_WRITABLE), BK_OK);
        assert_int_equal(bk_filter_add(g, "mapped-key", 10), 1);
        assert_int_equal(bk_filter_add(f, "mapped-key", 10), 1);
        assert_int_equal(bk_filter_sync(g), BK_OK);
        bk_filter_free(g);
        assert_int_equal(bk_filter_load(&g, path), BK_OK); /* checksums valid */
        assert_int_equal(bk_filter_contains(g, "mapped-key", 10), 1);
        assert_same_answers(f, g);
        bk_filter_free(g);
        bk_filter_free(f);
    }
    bk_filter *g;
    assert_int_equal(bk_filter_map(&g, tmp_path("missing.bkf"), 0), BK_EIO);
    assert_int_equal(bk_filter_map(&g, tmp_path("bloom-v1.bkf"), 99), BK_EINVAL);
    assert_int_equal(bk_filter_mapped_bytes(NULL), 0);
    /* a plain filter needs no sync */
    bk_filter *f = samples[0].make();
    assert_int_equal(bk_filter_sync(f), BK_OK);
    bk_filter_free(f);
}

static void test_chunked(void **state)
{
    (void)state;
    static const size_t chunk_sizes[] = {1, 7, 64, 100, 4096, 1 << 20};
    for (size_t s = 0; s < NSAMPLES; s++) {
        bk_filter *f = samples[s].make();
        for (size_t c = 0; c < sizeof(chunk_sizes) / sizeof(chunk_sizes[0]); c++) {
            size_t cap = chunk_sizes[c];
            unsigned char *buf = malloc(cap);
            bk_loader *l;
            assert_int_equal(bk_loader_create(&l, 0), BK_OK);
            uint64_t cursor = 0;
            size_t len, chunks = 0;
            for (;;) {
                assert_int_equal(bk_filter_dump_chunk(f, &cursor, buf, cap, &len), BK_OK);
                if (len == 0) break;
                assert_true(len <= cap);
                assert_int_equal(bk_loader_feed(l, cursor, buf, len), BK_OK);
                chunks++;
            }
            assert_true(cursor == 0);
            assert_true(chunks == (bk_filter_serialized_size(f) + cap - 1) / cap);
            bk_filter *g;
            assert_int_equal(bk_loader_finish(l, &g), BK_OK);
            assert_same_answers(f, g);
            bk_filter_free(g);
            bk_loader_free(l);
            free(buf);
        }
        bk_filter_free(f);
    }
}

static void test_chunked_errors(void **state)
{
    (void)state;
    bk_filter *f = samples[0].make(), *g;
    size_t len;
    unsigned char *buf = tu_serialize(f, &len);
    bk_loader *l;

    /* out of order: the second chunk first */
    assert_int_equal(bk_loader_create(&l, 0), BK_OK);
    assert_int_equal(bk_loader_feed(l, 200, buf + 100, 100), BK_ECHUNK);
    assert_int_equal(bk_loader_feed(l, 100, buf, 100), BK_ECHUNK); /* sticky */
    assert_int_equal(bk_loader_finish(l, &g), BK_ECHUNK);
    assert_null(g);
    bk_loader_free(l);

    /* stopping early */
    assert_int_equal(bk_loader_create(&l, 0), BK_OK);
    assert_int_equal(bk_loader_feed(l, 1000, buf, 1000), BK_OK);
    assert_int_equal(bk_loader_finish(l, &g), BK_ETRUNC);
    bk_loader_free(l);

    /* more bytes than announced */
    unsigned char *longer = malloc(len + 10);
    memcpy(longer, buf, len);
    memset(longer + len, 0, 10);
    assert_int_equal(bk_loader_create(&l, 0), BK_OK);
    assert_int_equal(bk_loader_feed(l, len + 10, longer, len + 10), BK_ECHUNK);
    bk_loader_free(l);
    free(longer);

    /* a size limit below the filter's size */
    assert_int_equal(bk_loader_create(&l, len - 1), BK_OK);
    assert_int_equal(bk_loader_feed(l, len, buf, len), BK_ELIMIT);
    bk_loader_free(l);

    /* a damaged payload is caught by finish */
    buf[len - 1] ^= 1;
    assert_int_equal(bk_loader_create(&l, 0), BK_OK);
    assert_int_equal(bk_loader_feed(l, len, buf, len), BK_OK);
    assert_int_equal(bk_loader_finish(l, &g), BK_ECHECKSUM);
    bk_loader_free(l);

    /* bad arguments */
    uint64_t cursor = len + 1;
    size_t n;
    assert_int_equal(bk_filter_dump_chunk(f, &cursor, buf, 10, &n), BK_EINVAL);
    cursor = 0;
    assert_int_equal(bk_filter_dump_chunk(f, &cursor, buf, 0, &n), BK_EINVAL);
    assert_int_equal(bk_loader_feed(NULL, 1, buf, 1), BK_EINVAL);
    assert_int_equal(bk_loader_create(NULL, 0), BK_EINVAL);
    bk_loader_free(NULL);
    free(buf);
    bk_filter_free(f);
}

/* A filter of more than 2^32 bits survives save, load and map. */
static void test_round_trip_beyond_2_32_bits(void **state)
{
    (void)state;
    bk_bloom *b;
    int rc = bk_bloom_create_mk(&b, UINT64_C(5000000000), 3, 9);
    if (rc == BK_ENOMEM) skip();
    assert_int_equal(rc, BK_OK);
    char key[TU_KEY_LEN];
    for (uint64_t i = 0; i < 100000; i++) {
        tu_key(key, i, 1);
        bk_bloom_add(b, key, sizeof(key));
    }
    bk_filter *f = bk_bloom_as_filter(b), *g;
    const char *path = tmp_path("big.bkf");
    assert_int_equal(bk_filter_save(f, path), BK_OK);
    assert_int_equal(bk_filter_load(&g, path), BK_OK);
    assert_true(bk_bloom_equal(b, bk_filter_as_bloom(g)));
    bk_filter_free(g);
    assert_int_equal(bk_filter_map(&g, path, BK_MAP_READONLY), BK_OK);
    assert_true(bk_bloom_equal(b, bk_filter_as_bloom(g)));
    bk_filter_free(g);
    unlink(path);
    bk_filter_free(f);
}

/*--------------------------------------------------------------------------
 * Golden files
 *--------------------------------------------------------------------------*/

/* Golden files that pin the format but not where the family's search for
 * room put each entry (test_golden_files). */
static int moves_free(const char *name)
{
    return strcmp(name, "ttl-table-v1.bkf") == 0;
}

static void test_golden_files(void **state)
{
    (void)state;
    char path[512];
    for (size_t s = 0; s < NSAMPLES; s++) {
        snprintf(path, sizeof(path), "%s/%s", GOLDEN_DIR, samples[s].name);
        bk_filter *f = samples[s].make();
        size_t glen, len;
        unsigned char *buf = tu_serialize(f, &len);
        unsigned char *golden;
        bk_filter *g;
        if (moves_free(samples[s].name)) {
            /* The TTL table's adds moved entries by a random walk when its
             * file was written, and by a shortest-chain search since: the
             * same entries, some in their other bucket. The format is
             * pinned by the file saving back to its own bytes; the
             * answers are the same, false positives included (an absent
             * key matches an entry exactly when both have the same
             * fingerprint and the same pair of buckets, whichever of the
             * two holds it). */
            golden = tu_read_file(path, &glen);
            if (golden == NULL) fail_msg("missing golden file %s", path);
            assert_int_equal(bk_filter_load(&g, path), BK_OK);
            size_t again_len;
            unsigned char *again = tu_serialize(g, &again_len);
            assert_true(again_len == glen && glen == len);
            assert_memory_equal(again, golden, glen);
            free(again);
        } else {
            golden = tu_golden(path, buf, len, &glen);
            /* ... and reads them back to the same answers */
            assert_int_equal(bk_filter_load(&g, path), BK_OK);
        }
        assert_same_answers(f, g);
        bk_filter_free(g);
        free(buf);
        free(golden);
        bk_filter_free(f);
    }
}

/* scalable-v1.bkf was written by the schedule before the 0.9 one (stage
 * rates halving, header param[3] = 0): it still loads, holds its keys,
 * saves back to the same bytes and keeps growing by its own schedule. */
static void test_golden_scalable_legacy(void **state)
{
    (void)state;
    char path[512], key[TU_KEY_LEN];
    snprintf(path, sizeof(path), "%s/scalable-v1.bkf", GOLDEN_DIR);
    size_t glen, len;
    unsigned char *golden = tu_read_file(path, &glen);
    if (golden == NULL) fail_msg("missing golden file %s", path);
    bk_filter *g;
    assert_int_equal(bk_filter_load(&g, path), BK_OK);
    bk_scalable *s = bk_filter_as_scalable(g);
    assert_non_null(s);
    assert_int_equal(bk_scalable_stages(s), 5);
    for (uint64_t i = 0; i < SAMPLE_KEYS; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_scalable_contains(s, key, sizeof(key)), 1);
    }
    unsigned char *buf = tu_serialize(g, &len);
    assert_true(len == glen);
    assert_memory_equal(buf, golden, len);
    free(buf);
    /* growth continues with the file's schedule: stage i at p/2 * 0.5^i */
    for (uint64_t i = 0; bk_scalable_stages(s) < 7; i++) {
        tu_key(key, i, 3);
        assert_true(bk_scalable_add(s, key, sizeof(key)) >= 0);
    }
    bk_scalable_stage_stats st;
    assert_int_equal(bk_scalable_get_stage_stats(s, 6, &st), BK_OK);
    assert_true(st.target_fpr == 0.005 / 64);
    assert_true(st.capacity == 6400);
    bk_filter_free(g);
    free(golden);
}

/* growable-v1.bkf was written by the growable filter's first layout (2^q
 * buckets of 31 16-bit entries, docs/FORMAT.md): 2,000 keys from 100
 * (4 doublings, q = 7), then 70 hashes aimed at bucket 0, so it has a
 * stash. It loads converted to the second layout: every key it held is
 * still there, every absent key it answered 1 still answers 1 (entries
 * are rounded outwards, never inwards), few more do, and the converted
 * filter saves in the second layout and loads back. The first layout's
 * lookup is done here by hand from the file's bytes. */
typedef struct old_growable {
    const unsigned char *table, *stash;
    uint64_t nstash;
    uint32_t q;
} old_growable;

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static unsigned lane16(const unsigned char *bucket, unsigned i)
{
    return (unsigned)bucket[2 * i] | (unsigned)bucket[2 * i + 1] << 8;
}

static int old_matches(unsigned e, unsigned tag)
{
    unsigned care = (0u - ((e & (0u - e)) << 1)) & 0xFFFFu;
    return ((e ^ tag) & care) == 0;
}

static int old_contains(const old_growable *g, uint64_t h)
{
    uint64_t nb = UINT64_C(1) << g->q, b = g->q ? h >> (64 - g->q) : 0;
    unsigned tag = (unsigned)(((h << g->q) >> 49) << 1);
    const unsigned char *x = g->table + 64 * b;
    unsigned meta = lane16(x, 31), own = meta & 31;
    for (unsigned i = 0; i < own; i++)
        if (old_matches(lane16(x, i), tag)) return 1;
    if (meta & 0x8000) {
        const unsigned char *y = g->table + 64 * ((b + 1) % nb);
        unsigned fo = (lane16(y, 31) >> 5) & 31;
        for (unsigned i = 31 - fo; i < 31; i++)
            if (old_matches(lane16(y, i), tag)) return 1;
    }
    if (meta & 0x4000)
        for (uint64_t i = 0; i < g->nstash; i++) {
            uint64_t w = le64(g->stash + 8 * i);
            if (w >> 16 == b && old_matches((unsigned)(w & 0xFFFF), tag)) return 1;
        }
    return 0;
}

static void test_golden_growable_legacy(void **state)
{
    (void)state;
    char path[512], key[TU_KEY_LEN];
    snprintf(path, sizeof(path), "%s/growable-v1.bkf", GOLDEN_DIR);
    size_t glen;
    unsigned char *file = tu_read_file(path, &glen);
    if (file == NULL) fail_msg("missing golden file %s", path);
    uint64_t payload = le64(file + 96);
    uint32_t nparts = (uint32_t)(file[16] | file[17] << 8);
    assert_int_equal(nparts, 2);
    old_growable old = {file + payload + le64(file + 128), file + payload + le64(file + 192),
                        le64(file + 192 + 16), (uint32_t)le64(file + 128 + 56)};
    assert_int_equal(old.q, 7);
    bk_filter *g;
    assert_int_equal(bk_filter_load(&g, path), BK_OK);
    bk_growable *gg = bk_filter_as_growable(g);
    assert_non_null(gg);
    assert_int_equal(bk_growable_items(gg), le64(file + 48));
    for (uint64_t i = 0; i < SAMPLE_KEYS; i++) {
        tu_key(key, i, 1);
        uint64_t h = bk_growable_hash_key(gg, key, sizeof(key));
        assert_int_equal(old_contains(&old, h), 1);
        assert_int_equal(bk_growable_contains(gg, key, sizeof(key)), 1);
    }
    for (uint64_t i = 0; i < 70; i++) {
        uint64_t h = (2 * i + 1) << (64 - 7 - 15);
        assert_int_equal(old_contains(&old, h), 1);
        assert_int_equal(bk_growable_contains_hash(gg, h), 1);
    }
    uint64_t trials = 200000, old_fp = 0, new_fp = 0;
    for (uint64_t i = 0; i < trials; i++) {
        tu_key(key, i, 2);
        uint64_t h = bk_growable_hash_key(gg, key, sizeof(key));
        int was = old_contains(&old, h), now = bk_growable_contains_hash(gg, h);
        if (was && !now) fail_msg("absent key %llu: the old layout matched, the new does not",
                                  (unsigned long long)i);
        old_fp += (uint64_t)was;
        new_fp += (uint64_t)now;
    }
    print_message("legacy growable: %.4f%% of absent keys before, %.4f%% converted\n",
                  100.0 * (double)old_fp / (double)trials, 100.0 * (double)new_fp / (double)trials);
    assert_true((double)new_fp <= 3.0 * (double)old_fp + 0.002 * (double)trials);
    assert_true(bk_growable_fpr_now(gg) <= bk_growable_error(gg));
    /* the second layout from here on: saved, loaded, the same answers */
    size_t len;
    unsigned char *buf = tu_serialize(g, &len);
    assert_int_equal(le64(buf + 72), 1); /* param[2]: the shape */
    bk_filter *back;
    assert_int_equal(bk_filter_deserialize(&back, buf, len), BK_OK);
    assert_same_answers(g, back);
    /* and it goes on growing */
    for (uint64_t i = 0; i < 20000; i++) {
        tu_key(key, i, 3);
        assert_true(bk_filter_add(back, key, sizeof(key)) >= 0);
    }
    for (uint64_t i = 0; i < SAMPLE_KEYS; i++) {
        tu_key(key, i, 1);
        assert_int_equal(bk_filter_contains(back, key, sizeof(key)), 1);
    }
    bk_filter_free(back);
    free(buf);
    bk_filter_free(g);
    free(file);
}

/*--------------------------------------------------------------------------
 * Damage: truncation, flipped bytes, foreign files
 *--------------------------------------------------------------------------*/

/* Load from memory, from a file and by mapping; each must fail (with the
 * same code from memory and from the file). */
static int load_everywhere(const unsigned char *buf, size_t len, int verify_map)
{
    bk_filter *g = NULL;
    int rc = bk_filter_deserialize(&g, buf, len);
    assert_null(g);
    const char *path = tmp_path("damaged.bkf");
    write_file(path, buf, len);
    assert_int_equal(bk_filter_load(&g, path), rc);
    assert_null(g);
    int mrc = bk_filter_map(&g, path, verify_map ? BK_MAP_VERIFY : BK_MAP_READONLY);
    if (verify_map) assert_true(mrc != BK_OK);
    bk_filter_free(g); /* NULL unless the unverified map accepted it */
    bk_loader *l;
    assert_int_equal(bk_loader_create(&l, 0), BK_OK);
    int lrc = len ? bk_loader_feed(l, len, buf, len) : BK_OK;
    if (lrc == BK_OK) lrc = bk_loader_finish(l, &g);
    assert_true(lrc != BK_OK);
    assert_null(g);
    bk_loader_free(l);
    return rc;
}

static void test_truncation(void **state)
{
    (void)state;
    for (size_t s = 0; s < NSAMPLES; s++) {
        bk_filter *f = samples[s].make();
        size_t len;
        unsigned char *buf = tu_serialize(f, &len);
        /* every offset of the header and descriptors, then sampled payload
         * offsets (every 61st byte and the last 64) */
        for (size_t cut = 0; cut < len; cut++) {
            if (cut > 256 && cut % 61 != 0 && cut < len - 64) continue;
            int rc = load_everywhere(buf, cut, 1);
            if (rc != BK_ETRUNC)
                fail_msg("%s cut at %zu: got %s, want ETRUNC", samples[s].name, cut,
                         bk_errname(rc));
        }
        free(buf);
        bk_filter_free(f);
    }
}

static void test_flipped_header_bytes(void **state)
{
    (void)state;
    for (size_t s = 0; s < NSAMPLES; s++) {
        bk_filter *f = samples[s].make();
        size_t len;
        unsigned char *buf = tu_serialize(f, &len);
        /* header and descriptors: 128 + 64 bytes for a one-part filter, plus
         * padding; every byte, three different flips */
        static const unsigned char flips[] = {0x01, 0x80, 0xFF};
        for (size_t i = 0; i < 256 && i < len; i++) {
            for (size_t v = 0; v < 3; v++) {
                buf[i] ^= flips[v];
                int rc = load_everywhere(buf, len, 1);
                if (rc == BK_OK) fail_msg("byte %zu ^ 0x%02x accepted", i, flips[v]);
                buf[i] ^= flips[v];
            }
        }
        /* payload bytes: the checksum catches each one when loading */
        for (size_t i = 256; i < len; i += 97) {
            buf[i] ^= 0x10;
            int rc = load_everywhere(buf, len, 1);
            if (rc != BK_ECHECKSUM && rc != BK_ECORRUPT)
                fail_msg("payload byte %zu: got %s", i, bk_errname(rc));
            buf[i] ^= 0x10;
        }
        free(buf);
        bk_filter_free(f);
    }
}

static void test_specific_errors(void **state)
{
    (void)state;
    bk_filter *f = samples[0].make(), *g;
    size_t len;
    unsigned char *buf = tu_serialize(f, &len);
    unsigned char *copy = malloc(len + 64);

    memcpy(copy, buf, len);
    memcpy(copy, "GIF89a..", 8);
    assert_int_equal(bk_filter_deserialize(&g, copy, len), BK_EMAGIC);

    memcpy(copy, buf, len);
    copy[8] = 2; /* version 2 */
    assert_int_equal(bk_filter_deserialize(&g, copy, len), BK_EVERSION);

    memcpy(copy, buf, len);
    copy[10] = 77; /* family 77 */
    assert_int_equal(bk_filter_deserialize(&g, copy, len), BK_EFAMILY);

    memcpy(copy, buf, len);
    copy[120] ^= 1; /* the header checksum itself */
    assert_int_equal(bk_filter_deserialize(&g, copy, len), BK_ECHECKSUM);

    memcpy(copy, buf, len);
    memset(copy + len, 0, 64); /* trailing bytes */
    assert_int_equal(bk_filter_deserialize(&g, copy, len + 64), BK_ECORRUPT);

    assert_int_equal(bk_filter_deserialize(&g, "", 0), BK_ETRUNC);
    assert_int_equal(bk_filter_deserialize(&g, NULL, 10), BK_EINVAL);
    assert_int_equal(bk_filter_deserialize(NULL, buf, len), BK_EINVAL);
    assert_int_equal(bk_filter_load(&g, tmp_path("does-not-exist")), BK_EIO);
    assert_true(errno == ENOENT);
    free(copy);
    free(buf);
    bk_filter_free(f);
}

/* Recompute the header checksum of a serialized filter after an edit. */
static void reseal_header(unsigned char *buf)
{
    uint32_t nparts = (uint32_t)(buf[16] | buf[17] << 8 | buf[18] << 16 | (uint32_t)buf[19] << 24);
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, buf, 120);
    XXH3_64bits_update(&st, buf + 128, 64 * (size_t)nparts);
    uint64_t sum = XXH3_64bits_digest(&st);
    for (int i = 0; i < 8; i++) buf[120 + i] = (unsigned char)(sum >> (8 * i));
}

/* The hash algorithm field: 2 (XXH3-64) only for a blocked filter of the
 * split layout, and the split layout only with 2; each mismatch, with a
 * valid checksum, is corruption. */
static void test_hash_algorithm_field(void **state)
{
    (void)state;
    bk_filter *split = make_blocked_split(), *plain = make_blocked(), *bloom = make_bloom(), *g;
    size_t len;
    unsigned char *buf = tu_serialize(split, &len);
    assert_int_equal(buf[20], 2);
    assert_int_equal(buf[128 + 30] & 1, 1); /* the part's split flag */
    buf[20] = 1;
    reseal_header(buf);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_ECORRUPT);
    free(buf);

    buf = tu_serialize(plain, &len);
    assert_int_equal(buf[20], 1);
    buf[20] = 2; /* a default-layout part under XXH3-64 */
    reseal_header(buf);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_ECORRUPT);
    buf[20] = 1;
    buf[128 + 30] |= 1; /* a split part under XXH3-128 (k is not 8 either) */
    reseal_header(buf);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_ECORRUPT);
    free(buf);

    buf = tu_serialize(bloom, &len);
    buf[20] = 2; /* another family under XXH3-64 */
    reseal_header(buf);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_ECORRUPT);
    buf[20] = 3; /* an unknown algorithm */
    reseal_header(buf);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_ECORRUPT);
    free(buf);

    /* a scalable filter's stage marked split (stages are never split) */
    bk_filter *grown = make_scalable();
    buf = tu_serialize(grown, &len);
    buf[128 + 30] |= 1;
    reseal_header(buf);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_ECORRUPT);
    free(buf);
    bk_filter_free(grown);

    /* through the generic handle a split filter hashes as its layout does */
    char key[TU_KEY_LEN];
    tu_key(key, 5, 1);
    assert_int_equal(bk_filter_contains(split, key, sizeof(key)), 1);
    bk_filter_free(split);
    bk_filter_free(plain);
    bk_filter_free(bloom);
}

/* A header that is valid in every way but claims an enormous payload must
 * not make the loader allocate it: the file is simply too short. */
static void test_no_allocation_from_unchecked_sizes(void **state)
{
    (void)state;
    bk_filter *f = samples[0].make(), *g;
    size_t len;
    unsigned char *buf = tu_serialize(f, &len);
    /* Claim 2^40 payload bytes in the header and in the one descriptor, and
     * re-seal the header checksum: a consistent header for a file that is
     * simply far too short. */
    for (int i = 0; i < 8; i++) {
        buf[104 + i] = (unsigned char)((UINT64_C(1) << 40) >> (8 * i));
        buf[128 + 8 + i] = (unsigned char)((UINT64_C(1) << 40) >> (8 * i));
    }
    reseal_header(buf);

    tu_install_failing_allocator(0);
    assert_int_equal(bk_filter_deserialize(&g, buf, len), BK_ETRUNC);
    assert_true(tu_alloc_count == 0 && tu_outstanding == 0);
    const char *path = tmp_path("huge-claim.bkf");
    write_file(path, buf, len);
    assert_int_equal(bk_filter_load(&g, path), BK_ETRUNC);
    assert_int_equal(bk_filter_map(&g, path, 0), BK_ETRUNC);
    assert_true(tu_outstanding == 0);
    bk_loader *l;
    assert_int_equal(bk_loader_create(&l, UINT64_C(1) << 30), BK_OK);
    assert_int_equal(bk_loader_feed(l, len, buf, len), BK_ELIMIT); /* 1 TiB > 1 GiB */
    bk_loader_free(l);
    assert_true(tu_outstanding == 0);
    tu_restore_allocator();
    free(buf);
    bk_filter_free(f);
}

/* ctx: the path of the file to load */
TU_OOM_ATTEMPT(try_load, bk_filter, bk_filter_load(&f, ctx), bk_filter_free)

static int try_save(void *ctx)
{
    (void)ctx;
    /* the filter is made with the failing allocator too: fine, any failure
     * is ENOMEM */
    bk_bloom *b;
    int rc = bk_bloom_create(&b, 100, 0.01, 1);
    if (rc != BK_OK) return rc;
    rc = bk_filter_save(bk_bloom_as_filter(b), tmp_path("oom.bkf"));
    bk_bloom_free(b);
    return rc;
}

static void test_allocation_failures(void **state)
{
    (void)state;
    bk_filter *f = samples[0].make();
    const char *path = tmp_path("oom-src.bkf");
    assert_int_equal(bk_filter_save(f, path), BK_OK);
    bk_filter_free(f);
    static char saved[512];
    snprintf(saved, sizeof(saved), "%s", path);
    assert_true(tu_oom_loop(try_load, saved) >= 2);
    size_t len;
    unsigned char *buf = tu_read_file(saved, &len);
    assert_non_null(buf);
    assert_true(tu_oom_deserialize(buf, len) >= 2);
    free(buf);
    assert_true(tu_oom_loop(try_save, NULL) >= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_buffer),
        cmocka_unit_test(test_round_trip_file),
        cmocka_unit_test(test_save_is_atomic_and_leaves_no_temp),
        cmocka_unit_test(test_map),
        cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_chunked_errors),
        cmocka_unit_test(test_round_trip_beyond_2_32_bits),
        cmocka_unit_test(test_golden_files),
        cmocka_unit_test(test_golden_scalable_legacy),
        cmocka_unit_test(test_golden_growable_legacy),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_flipped_header_bytes),
        cmocka_unit_test(test_specific_errors),
        cmocka_unit_test(test_hash_algorithm_field),
        cmocka_unit_test(test_no_allocation_from_unchecked_sizes),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
