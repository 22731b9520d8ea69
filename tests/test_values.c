/*
 * test_values.c - the command layer's memory (commands/value.c): every
 * block a value holds comes from the allocator bkc_set_allocator installs,
 * and bkc_value_bytes counts exactly those blocks and its filter's.
 *
 * One recording allocator serves both the library (bk_set_allocator) and
 * the command layer, as the hosts set them up. Keys of every kind are made
 * by running commands against a small host; then the blocks still live
 * are exactly what bkc_value_bytes sums over the values (size_fn answers
 * each block's recorded size and marks it), and once the values are freed
 * none is left. A block allocated around the hook would be freed through
 * it and fail the record's check; one bkc_value_bytes missed would be left
 * unmarked.
 */
#include "cmd_internal.h" /* bkc__scandump_chunk */
#include "testutil.h"

/*==========================================================================
 * The recording allocator
 *==========================================================================*/

/* size_fn: the recorded size, each live block once. */
static size_t rec_size(void *opaque, const void *ptr)
{
    (void)opaque;
    tu_block *b = tu_track_find(ptr);
    assert_non_null(b);
    assert_int_equal(b->mark, 0);
    b->mark = 1;
    return b->asked;
}

static const bkc_allocator cmd_recorder = {tu_track_malloc, tu_track_calloc, tu_track_realloc,
                                           tu_track_free,   rec_size,        NULL};

/*==========================================================================
 * A host with a few keys
 *==========================================================================*/

#define NKEYS 16

static struct {
    char name[32];
    bkc_value *v;
} keys[NKEYS];

struct bkc_key {
    int slot;
};

static int errors;
static char last_error[256];
static unsigned char bulk[4096];
static size_t bulk_len;
static long long last_int;

static bkc_key *h_open(void *host, bkc_str name, bkc_open_mode mode)
{
    (void)host;
    (void)mode;
    int free_slot = -1;
    for (int i = 0; i < NKEYS; i++) {
        if (keys[i].name[0] == '\0') {
            if (free_slot < 0) free_slot = i;
        } else if (strlen(keys[i].name) == name.len && !memcmp(keys[i].name, name.ptr, name.len)) {
            free_slot = i;
            break;
        }
    }
    assert_true(free_slot >= 0 && name.len < sizeof(keys[0].name));
    memcpy(keys[free_slot].name, name.ptr, name.len);
    keys[free_slot].name[name.len] = '\0';
    bkc_key *k = malloc(sizeof(*k)); /* the host's own, not the layer's */
    assert_non_null(k);
    k->slot = free_slot;
    return k;
}

static bkc_kind h_kind(bkc_key *k)
{
    return keys[k->slot].v ? keys[k->slot].v->kind : BKC_KIND_NONE;
}

static bkc_value *h_value(bkc_key *k) { return keys[k->slot].v; }

static int h_set(bkc_key *k, bkc_value *v)
{
    if (keys[k->slot].v != v) bkc_value_free(keys[k->slot].v);
    keys[k->slot].v = v;
    return BK_OK;
}

static void h_resized(bkc_key *k) { (void)k; }

static void h_close(bkc_key *k)
{
    if (keys[k->slot].v == NULL) keys[k->slot].name[0] = '\0';
    free(k);
}

static void h_wrote(void *host, int argc, const bkc_str *argv)
{
    (void)host;
    (void)argc;
    (void)argv;
}

static size_t h_memory_left(void *host)
{
    (void)host;
    return SIZE_MAX;
}

static const bkc_host_vt host_vt = {h_open, h_kind, h_value, h_set, h_resized,
                                    h_close, h_wrote, h_memory_left, NULL, NULL};

static void r_simple(bkc_reply *r, const char *s) { (void)r; (void)s; }
static void r_error(bkc_reply *r, const char *s)
{
    (void)r;
    errors++;
    snprintf(last_error, sizeof(last_error), "%s", s);
}
static void r_integer(bkc_reply *r, long long v) { (void)r; last_int = v; }
static void r_bulk(bkc_reply *r, const void *p, size_t n)
{
    (void)r;
    assert_true(n <= sizeof(bulk));
    memcpy(bulk, p, n);
    bulk_len = n;
}
static void r_null(bkc_reply *r) { (void)r; }
static void r_array(bkc_reply *r, size_t n) { (void)r; (void)n; }
static void r_map(bkc_reply *r, size_t n) { (void)r; (void)n; }
static void r_dbl(bkc_reply *r, double d) { (void)r; (void)d; }

static const bkc_reply_vt reply_vt = {r_simple, r_error, r_integer, r_bulk, r_null,
                                      r_array,  r_map,   r_dbl,     NULL};

/* Run a command given as words; it must not answer an error. */
static void run(const char *line)
{
    char copy[512];
    bkc_str argv[64];
    int argc = 0;
    snprintf(copy, sizeof(copy), "%s", line);
    for (char *t = strtok(copy, " "); t != NULL; t = strtok(NULL, " "))
        argv[argc++] = (bkc_str){t, strlen(t)};
    bkc_reply reply = {&reply_vt, NULL};
    bkc_ctx c = {&reply, &host_vt, NULL, 2, 1000};
    errors = 0;
    bkc_dispatch(&c, argc, argv);
    if (errors) fprintf(stderr, "%s: %s\n", line, last_error);
    assert_int_equal(errors, 0);
}

/* Run `BF.LOADCHUNK key iter <the bytes in bulk>`. */
static void loadchunk(const char *key, long long iter)
{
    char it[32];
    snprintf(it, sizeof(it), "%lld", iter);
    bkc_str argv[4] = {{"BF.LOADCHUNK", 12}, {key, strlen(key)}, {it, strlen(it)},
                       {(const char *)bulk, bulk_len}};
    bkc_reply reply = {&reply_vt, NULL};
    bkc_ctx c = {&reply, &host_vt, NULL, 2, 1000};
    errors = 0;
    bkc_dispatch(&c, 4, argv);
    assert_int_equal(errors, 0);
}

/*==========================================================================
 * The test
 *==========================================================================*/

static void test_every_block_counted(void **state)
{
    (void)state;
    tu_track_start();
    bk_set_allocator(&tu_track_allocator);
    bkc_set_allocator(&cmd_recorder);

    /* a growable BF key first: it holds the parameters such filters share
     * (not any key's), made before the record of the others starts */
    run("BF.ADD anchor x");
    size_t base_blocks = tu_track_blocks, base_bytes = tu_track_bytes;

    run("BF.ADD grow a");                                   /* growable */
    for (int i = 0; i < 300; i++) {
        char line[64];
        snprintf(line, sizeof(line), "BF.ADD grow item-%d", i); /* doubled */
        run(line);
    }
    run("BF.RESERVE chain 0.01 100");
    for (int i = 0; i < 400; i++) {
        char line[64];
        snprintf(line, sizeof(line), "BF.ADD chain item-%d", i); /* stages */
        run(line);
    }
    run("CF.RESERVE cf 100");
    run("CF.ADD cf a");
    run("CBF.RESERVE cbf 0.01 1000");
    run("CBF.RESERVE dl 0.01 1000 TYPE dleft");
    run("WF.RESERVE wf 0.01 1000 60000");
    run("SF.BUILD sf ITEMS a b c d");
    run("SF.BUILDMAP map ITEMS a 1 b 2");
    run("RS.ADD rs a b c d e f g h i j k l m n o p");
    /* a load in progress: the first chunk of the chain's dump */
    size_t chunk = bkc__scandump_chunk;
    bkc__scandump_chunk = 100;
    run("BF.SCANDUMP chain 0");
    bkc__scandump_chunk = chunk;
    loadchunk("loading", (long long)bulk_len);

    /* every block made since is a key's, and counted once (commands ask
     * bkc_value_bytes too: the marks start over here) */
    for (size_t i = 0; i < TU_TRACK_SLOTS; i++) tu_track_table[i].mark = 0;
    size_t counted = 0;
    int kinds = 0;
    for (int i = 0; i < NKEYS; i++) {
        if (keys[i].v == NULL || strcmp(keys[i].name, "anchor") == 0) continue;
        counted += bkc_value_bytes(keys[i].v);
        kinds |= 1 << keys[i].v->kind;
    }
    assert_int_equal(kinds, (1 << BKC_KIND_BLOOM) | (1 << BKC_KIND_CUCKOO) |
                                (1 << BKC_KIND_COUNTING) | (1 << BKC_KIND_WINDOW) |
                                (1 << BKC_KIND_LOADING) | (1 << BKC_KIND_STATIC) |
                                (1 << BKC_KIND_KEYSET));
    assert_int_equal(counted, tu_track_bytes - base_bytes);
    size_t marked = 0;
    for (size_t i = 0; i < TU_TRACK_SLOTS; i++)
        marked += tu_track_live(&tu_track_table[i]) && tu_track_table[i].mark;
    assert_int_equal(marked, tu_track_blocks - base_blocks);

    /* and freed through the same allocator, all of them */
    for (int i = 0; i < NKEYS; i++) {
        bkc_value_free(keys[i].v);
        keys[i].v = NULL;
        keys[i].name[0] = '\0';
    }
    assert_int_equal(tu_track_blocks, 0);
    assert_int_equal(tu_track_bytes, 0);
    bkc_set_allocator(NULL);
    bk_set_allocator(NULL);
}

/* Without a size_fn, bkc_value_bytes is the bytes asked. */
static void test_bytes_asked(void **state)
{
    (void)state;
    bkc_value *v = bkc_value_new(BKC_KIND_LOADING);
    assert_non_null(v);
    assert_int_equal(bkc_value_bytes(v), sizeof(*v));
    bkc_value_free(v);
    assert_int_equal(bkc_value_bytes(NULL), 0);
    v = bkc_value_new(BKC_KIND_CUCKOO); /* with its settings block */
    assert_non_null(v);
    assert_non_null(v->cf);
    assert_int_equal(bkc_value_bytes(v), sizeof(*v) + sizeof(*v->cf));
    bkc_value_free(v);
    assert_true(sizeof(bkc_value) <= 32);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_block_counted),
        cmocka_unit_test(test_bytes_asked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
