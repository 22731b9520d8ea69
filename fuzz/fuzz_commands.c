/*
 * fuzz_commands.c - libFuzzer target for the command layer (commands/):
 * arguments of every BF/CF/CBF/WF/SF/RS/TF command through bkc_dispatch, against a
 * fake single-threaded host, and the value decoder behind LOADCHUNK and the
 * server's snapshots (bkc_value_decode).
 *
 * Input
 * -----
 * Byte 0 'V': decoder mode. Byte 1 holds flags (bit 0: recompute the
 * container's header check, bit 1: set its length field to the input's
 * length, so that mutations get past the header), the rest is a value
 * container (bkc_value_encode's format). A value that decodes must encode,
 * decode again and encode to the same bytes; it is then stored in the fake
 * host and used by a few commands (INFO, EXISTS, an add, a dump and reload).
 *
 * Any other byte 0: command mode. Its low 4 bits set the SCANDUMP chunk
 * size (16 bytes << n); the rest is a sequence of commands:
 *
 *   command   := name-or-selector arg* ('\n' | end)
 *   selector  := one byte < 0x20 (but '\n') or >= 0x80: a command of the
 *                table that has a handler (or a harness command), by the
 *                byte's value modulo their number; its arguments follow
 *   arg       := bytes up to ' ' or '\n', or "#<len>:" and len raw bytes
 *
 * Harness commands (not in the table):
 *   TIME ms                       set the host's clock
 *   DUMPLOAD kind src dst [off [xor]]
 *                                 <kind>.SCANDUMP src to the end, byte off
 *                                 xor-ed (header check recomputed unless
 *                                 off hits it), then fed to
 *                                 <kind>.LOADCHUNK dst in chunks
 *
 * The fake host
 * -------------
 * Up to MAX_KEYS named values; "other" holds a foreign value, "!" cannot be
 * opened. Its memory limit is MEMORY_BUDGET: memory_left() is that minus
 * what the values take (bkc_value_bytes) and set() refuses growth past it,
 * as the server's keyspace does. The library's allocations are counted
 * through bk_set_allocator.
 *
 * Checked, for every command:
 *  - exactly one reply (arrays and maps followed by their elements);
 *  - every key opened is closed, never opened twice at once; set() only
 *    under WRITE; READONLY commands open READ and never call wrote();
 *  - values are whole (a filter kind has filters of its family, a load in
 *    progress has none) and all of them fit in the budget (plus a little
 *    for bookkeeping), and the library never allocates beyond the budget;
 * and at the end everything is freed (LeakSanitizer checks).
 */
#include <stddef.h> /* max_align_t */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomkit.h"
#include "cmd_internal.h" /* bkc__scandump_chunk, BKC_CF_MAX_STAGES */
#include "command.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MEMORY_BUDGET ((size_t)4 << 20)  /* "a few MiB" */
#define BOOKKEEPING_SLACK ((size_t)64 << 10)
#define MAX_KEYS 16
#define MAX_ARGS 256
#define MAX_COMMANDS 512
#define MAX_DUMP_CHUNKS 4096

#define FUZZ_NAME "fuzz_commands"
#include "fuzzcheck.h"

/*==========================================================================
 * The library's allocations, counted
 *==========================================================================*/

typedef union alloc_header {
    size_t size;
    max_align_t align;
} alloc_header;

static size_t lib_live; /* bytes the library holds now */

static void *count_alloc(size_t size, int zero)
{
    /* no single allocation may exceed what the host allows in total */
    if (size > MEMORY_BUDGET + BOOKKEEPING_SLACK) {
        fprintf(stderr, "fuzz_commands: library allocation of %zu bytes, budget %zu\n",
                size, MEMORY_BUDGET);
        abort();
    }
    alloc_header *h = zero ? calloc(1, sizeof(*h) + size) : malloc(sizeof(*h) + size);
    if (h == NULL) return NULL;
    h->size = size;
    lib_live += size;
    /* held values (<= budget) plus one value being built beside them
     * (LOADCHUNK's decode, BF.MERGE's copy: each checked against the budget) */
    if (lib_live > 2 * MEMORY_BUDGET + 2 * BOOKKEEPING_SLACK) {
        fprintf(stderr, "fuzz_commands: library holds %zu bytes, budget %zu\n", lib_live,
                MEMORY_BUDGET);
        abort();
    }
    return h + 1;
}

static void *fz_malloc(void *opaque, size_t size)
{
    (void)opaque;
    return count_alloc(size, 0);
}

static void *fz_calloc(void *opaque, size_t count, size_t size)
{
    (void)opaque;
    if (size != 0 && count > SIZE_MAX / size) return NULL;
    return count_alloc(count * size, 1);
}

static void fz_free(void *opaque, void *ptr)
{
    (void)opaque;
    if (ptr == NULL) return;
    alloc_header *h = (alloc_header *)ptr - 1;
    CHECK(h->size <= lib_live);
    lib_live -= h->size;
    free(h);
}

static const bk_allocator counting_allocator = {fz_malloc, fz_calloc, fz_free, NULL};

/*==========================================================================
 * The reply sink: counts bytes, checks the shape, keeps what SCANDUMP says
 *==========================================================================*/

typedef struct sink {
    size_t bytes;
    int top;                 /* complete top-level replies */
    int depth;
    size_t remaining[16];    /* elements still due per open aggregate */
    int top_error;           /* the last top-level reply was an error */
    int any_error;           /* an error anywhere in the replies (cleared per command) */
    /* capture (SCANDUMP): [integer, bulk] */
    int capture;
    long long last_int;
    unsigned char *last_bulk;
    size_t last_bulk_len;
} sink;

static void element_done(sink *s, int is_error)
{
    while (s->depth > 0) {
        if (--s->remaining[s->depth - 1] > 0) return;
        s->depth--;
        is_error = 0;
    }
    s->top++;
    s->top_error = is_error;
}

static void open_aggregate(sink *s, size_t n)
{
    if (n == 0) {
        element_done(s, 0);
        return;
    }
    CHECK(s->depth < 16);
    s->remaining[s->depth++] = n;
}

#define SINK(r) ((sink *)(r)->impl)

static void sk_simple(bkc_reply *r, const char *str)
{
    CHECK(strchr(str, '\r') == NULL && strchr(str, '\n') == NULL);
    SINK(r)->bytes += strlen(str) + 3;
    element_done(SINK(r), 0);
}

static void sk_error(bkc_reply *r, const char *str)
{
    CHECK(str[0] != '\0');
    SINK(r)->any_error = 1;
    SINK(r)->bytes += strlen(str) + 3;
    element_done(SINK(r), 1);
}

static void sk_integer(bkc_reply *r, long long v)
{
    SINK(r)->bytes += 24;
    SINK(r)->last_int = v;
    element_done(SINK(r), 0);
}

static void sk_bulk(bkc_reply *r, const void *p, size_t n)
{
    sink *s = SINK(r);
    CHECK(n == 0 || p != NULL);
    s->bytes += n + 24;
    if (s->capture) {
        free(s->last_bulk);
        s->last_bulk = malloc(n ? n : 1);
        CHECK(s->last_bulk != NULL);
        if (n) memcpy(s->last_bulk, p, n);
        s->last_bulk_len = n;
    } else if (n) {
        /* touch every byte: ASan checks the whole range is readable */
        volatile unsigned char sum = 0;
        for (size_t i = 0; i < n; i++) sum ^= ((const unsigned char *)p)[i];
        (void)sum;
    }
    element_done(s, 0);
}

static void sk_null(bkc_reply *r)
{
    SINK(r)->bytes += 5;
    element_done(SINK(r), 0);
}

static void sk_array(bkc_reply *r, size_t n)
{
    SINK(r)->bytes += 24;
    open_aggregate(SINK(r), n);
}

static void sk_map(bkc_reply *r, size_t pairs)
{
    SINK(r)->bytes += 24;
    CHECK(pairs <= SIZE_MAX / 2);
    open_aggregate(SINK(r), 2 * pairs);
}

static void sk_dbl(bkc_reply *r, double d)
{
    (void)d;
    SINK(r)->bytes += 32;
    element_done(SINK(r), 0);
}

static void sk_bool(bkc_reply *r, int v)
{
    CHECK(v == 0 || v == 1);
    SINK(r)->bytes += 16;
    element_done(SINK(r), 0);
}

static const bkc_reply_vt sink_vt = {sk_simple, sk_error, sk_integer, sk_bulk, sk_null,
                                     sk_array,  sk_map,   sk_dbl,     sk_bool};

/*==========================================================================
 * The fake host
 *==========================================================================*/

typedef struct slot {
    char *name;
    size_t nlen;
    int foreign;          /* a key of the host's own type */
    bkc_value *v;         /* NULL: no value (a free slot when !foreign) */
    int open;
    bkc_open_mode mode;
} slot;

typedef struct fake_host {
    slot keys[MAX_KEYS];
    uint64_t now_ms;
    int open_now;
    int any_write_open;   /* a WRITE or ADD open during the command */
    int wrote;            /* wrote() calls during the command */
    int argc;             /* the command being run */
    const bkc_str *argv;
    int made_argc;        /* the record of a creating BF add, copied */
    bkc_str *made;
} fake_host;

struct bkc_key {
    fake_host *h;
    int slot;
    bkc_open_mode mode;
};

static size_t host_used(const fake_host *h)
{
    size_t used = 0;
    for (int i = 0; i < MAX_KEYS; i++) used += bkc_value_bytes(h->keys[i].v);
    return used;
}

static int slot_in_use(const slot *s) { return s->v != NULL || s->foreign || s->open; }

static int find_slot(fake_host *h, bkc_str name, int create)
{
    int free_slot = -1;
    for (int i = 0; i < MAX_KEYS; i++) {
        slot *s = &h->keys[i];
        if (s->name != NULL && s->nlen == name.len &&
            (name.len == 0 || memcmp(s->name, name.ptr, name.len) == 0))
            return i;
        if (s->name == NULL && free_slot < 0) free_slot = i;
    }
    if (!create || free_slot < 0) return -1;
    slot *s = &h->keys[free_slot];
    s->name = malloc(name.len ? name.len : 1);
    CHECK(s->name != NULL);
    if (name.len) memcpy(s->name, name.ptr, name.len);
    s->nlen = name.len;
    return free_slot;
}

/* Names of deleted keys are forgotten, so that the table does not fill. */
static void forget_empty_slots(fake_host *h)
{
    for (int i = 0; i < MAX_KEYS; i++) {
        slot *s = &h->keys[i];
        if (s->name != NULL && !slot_in_use(s)) {
            free(s->name);
            s->name = NULL;
            s->nlen = 0;
        }
    }
}

static bkc_key *fh_open(void *host, bkc_str name, bkc_open_mode mode)
{
    fake_host *h = host;
    CHECK(name.ptr != NULL || name.len == 0);
    CHECK(mode == BKC_OPEN_READ || mode == BKC_OPEN_ADD || mode == BKC_OPEN_WRITE ||
          mode == BKC_OPEN_WHOLE);
    if (name.len == 1 && name.ptr[0] == '!') return NULL; /* cannot be opened */
    int i = find_slot(h, name, 1);
    if (i < 0) return NULL;                               /* table full */
    slot *s = &h->keys[i];
    CHECK(!s->open); /* never opened twice at once */
    s->open = 1;
    s->mode = mode;
    h->open_now++;
    if (mode == BKC_OPEN_ADD || mode == BKC_OPEN_WRITE) h->any_write_open = 1;
    bkc_key *k = malloc(sizeof(*k));
    CHECK(k != NULL);
    k->h = h;
    k->slot = i;
    k->mode = mode;
    return k;
}

static bkc_kind fh_kind(bkc_key *k)
{
    slot *s = &k->h->keys[k->slot];
    CHECK(s->open);
    if (s->foreign) return BKC_KIND_OTHER;
    return s->v ? s->v->kind : BKC_KIND_NONE;
}

static bkc_value *fh_value(bkc_key *k)
{
    slot *s = &k->h->keys[k->slot];
    CHECK(s->open);
    return s->foreign ? NULL : s->v;
}

static int fh_set(bkc_key *k, bkc_value *v)
{
    fake_host *h = k->h;
    slot *s = &h->keys[k->slot];
    CHECK(s->open);
    CHECK(k->mode == BKC_OPEN_WRITE);
    if (v != NULL && v == s->v) return BK_OK; /* the same value, changed */
    if (v != NULL) {
        size_t nb = bkc_value_bytes(v);
        size_t ob = s->foreign ? 0 : bkc_value_bytes(s->v);
        size_t used = host_used(h);
        if (nb > ob && used - ob + nb > MEMORY_BUDGET) {
            bkc_value_free(v);
            return BK_ELIMIT;
        }
    }
    if (!s->foreign) bkc_value_free(s->v);
    s->foreign = 0;
    s->v = v;
    return BK_OK;
}

static void fh_resized(bkc_key *k)
{
    slot *s = &k->h->keys[k->slot];
    CHECK(s->open && k->mode != BKC_OPEN_READ);
}

static void fh_close(bkc_key *k)
{
    fake_host *h = k->h;
    slot *s = &h->keys[k->slot];
    CHECK(s->open);
    s->open = 0;
    h->open_now--;
    free(k);
}

static void fh_wrote(void *host, int argc, const bkc_str *argv)
{
    fake_host *h = host;
    if (argv != h->argv && argv[0].len == 8 && memcmp(argv[0].ptr, "TF.ADDAT", 8) == 0) {
        /* a TF add is logged with its absolute expiry (cmd_ttl.c): the
         * command's key, an expiry, the items added (at most those sent) */
        CHECK(h->wrote == 0 && argc >= 4 && argc <= h->argc);
        CHECK(argv[1].len == h->argv[1].len &&
              (argv[1].len == 0 || memcmp(argv[1].ptr, h->argv[1].ptr, argv[1].len) == 0));
        long long when;
        CHECK(bkc_parse_ll(argv[2], &when) && when >= 0);
    } else if (argv != h->argv) {
        /* a BF or CF add that created its key is reported as the BF.INSERT
         * or CF.INSERT[NX] that makes the same filter (cmd_bloom.c,
         * cmd_cuckoo.c), for the command's key, once; checked in
         * check_creation */
        CHECK(h->made_argc == 0 && h->wrote == 0 && h->argc >= 2);
        int bf = argv[0].len == 9 && memcmp(argv[0].ptr, "BF.INSERT", 9) == 0;
        int cf = (argv[0].len == 9 && memcmp(argv[0].ptr, "CF.INSERT", 9) == 0) ||
                 (argv[0].len == 11 && memcmp(argv[0].ptr, "CF.INSERTNX", 11) == 0);
        CHECK((bf && argc >= 9) || (cf && argc >= 6));
        CHECK(argv[1].len == h->argv[1].len &&
              (argv[1].len == 0 || memcmp(argv[1].ptr, h->argv[1].ptr, argv[1].len) == 0));
        h->made = malloc((size_t)argc * sizeof(*h->made));
        CHECK(h->made != NULL);
        for (int i = 0; i < argc; i++) {
            char *copy = malloc(argv[i].len ? argv[i].len : 1);
            CHECK(copy != NULL);
            if (argv[i].len) memcpy(copy, argv[i].ptr, argv[i].len);
            h->made[i] = (bkc_str){copy, argv[i].len};
        }
        h->made_argc = argc;
    } else {
        CHECK(argc == h->argc); /* the command as sent */
    }
    h->wrote++;
}

static size_t fh_memory_left(void *host)
{
    size_t used = host_used(host);
    return used >= MEMORY_BUDGET ? 0 : MEMORY_BUDGET - used;
}

static const bkc_host_vt fake_vt = {fh_open,    fh_kind,  fh_value, fh_set,
                                    fh_resized, fh_close, fh_wrote, fh_memory_left,
                                    NULL /* open_error: the generic text */, NULL};

static void host_init(fake_host *h)
{
    memset(h, 0, sizeof(*h));
    h->now_ms = 1000000;
    bkc_str other = {"other", 5};
    int i = find_slot(h, other, 1);
    h->keys[i].foreign = 1;
}

static void host_free(fake_host *h)
{
    for (int i = 0; i < MAX_KEYS; i++) {
        CHECK(!h->keys[i].open);
        bkc_value_free(h->keys[i].v);
        free(h->keys[i].name);
    }
    memset(h, 0, sizeof(*h));
}

/* A value is whole: a filter kind holds filters of its family only (a CBF
 * key: the counting family or one of the CBF.RESERVE TYPE kinds). */
static void check_value(const bkc_value *v)
{
    CHECK((v->kind >= BKC_KIND_BLOOM && v->kind <= BKC_KIND_LOADING) ||
          v->kind == BKC_KIND_STATIC || v->kind == BKC_KIND_KEYSET || v->kind == BKC_KIND_TTL);
    if (v->kind == BKC_KIND_KEYSET) { /* a reconciliation set: no filters */
        CHECK(v->nfilters == 0 && v->keyset != NULL);
        return;
    }
    if (v->kind == BKC_KIND_LOADING) {
        CHECK(v->nfilters == 0);
        CHECK(v->load_len <= v->load_cap);
        return;
    }
    if (v->kind == BKC_KIND_STATIC) { /* a static filter or a static map */
        bk_family got;
        CHECK(v->nfilters == 1);
        got = bk_filter_family(v->filters[0]);
        CHECK(got == BK_FAMILY_STATIC || got == BK_FAMILY_BUMPED || got == BK_FAMILY_MAP);
        return;
    }
    bk_family want = v->kind == BKC_KIND_BLOOM      ? BK_FAMILY_SCALABLE
                     : v->kind == BKC_KIND_CUCKOO   ? BK_FAMILY_CUCKOO
                     : v->kind == BKC_KIND_COUNTING ? BK_FAMILY_COUNTING
                     : v->kind == BKC_KIND_TTL      ? BK_FAMILY_TTL
                                                    : BK_FAMILY_WINDOW;
    CHECK(v->nfilters == 1); /* a CF's stages are inside its one filter */
    CHECK((v->cf != NULL) == (v->kind == BKC_KIND_CUCKOO)); /* its settings */
    if (v->kind == BKC_KIND_CUCKOO) {
        /* a chain of stages, or (an add created it) a growable multiset */
        const bk_cuckoo *cf = bk_filter_as_cuckoo(v->filters[0]);
        const bk_growable *g = bk_filter_as_growable(v->filters[0]);
        const bk_rcuckoo *rc = bk_filter_as_rcuckoo(v->filters[0]);
        CHECK((cf != NULL && bk_cuckoo_stages(cf) <= BKC_CF_MAX_STAGES) ||
              (g != NULL && bk_growable_is_multiset(g)) ||
              (rc != NULL && v->cf->bucket_size == bk_rcuckoo_bucket_size(rc) &&
               v->cf->deleted == bk_rcuckoo_deleted(rc)));
    }
    for (uint32_t i = 0; i < v->nfilters; i++) {
        bk_family got = bk_filter_family(v->filters[i]);
        /* CBF.RESERVE ... TYPE: a CBF key may hold the other counting kinds */
        int cbf_type = v->kind == BKC_KIND_COUNTING &&
                       (got == BK_FAMILY_DLEFT || got == BK_FAMILY_VARCOUNT ||
                        got == BK_FAMILY_HIER || got == BK_FAMILY_HYBRID ||
                        got == BK_FAMILY_MORRIS);
        /* an add creates a growable BF or CF key (cmd_bloom.c, cmd_cuckoo.c) */
        int bf_growable = (v->kind == BKC_KIND_BLOOM || v->kind == BKC_KIND_CUCKOO) &&
                          got == BK_FAMILY_GROWABLE;
        /* a BF or CF key taken over from RedisBloom keeps its layout */
        int redisbloom = (v->kind == BKC_KIND_BLOOM && got == BK_FAMILY_RBLOOM) ||
                         (v->kind == BKC_KIND_CUCKOO && got == BK_FAMILY_RCUCKOO);
        /* AUTOCLEAR (BF.RESERVE, BF.INSERT, CBF.RESERVE): an auto-clear filter */
        int autoclear = (v->kind == BKC_KIND_BLOOM || v->kind == BKC_KIND_COUNTING) &&
                        got == BK_FAMILY_AUTOCLEAR;
        CHECK(got == want || cbf_type || bf_growable || redisbloom || autoclear);
    }
}

/*==========================================================================
 * Running a command
 *==========================================================================*/

static int trace; /* BK_FUZZ_TRACE set: each command and its outcome on stderr */

typedef struct harness {
    fake_host host;
    sink out;
} harness;

static bkc_value *value_named(fake_host *h, bkc_str name)
{
    int i = find_slot(h, name, 0);
    return i < 0 ? NULL : h->keys[i].v;
}

/* The image of a value's filter (malloc'd), or NULL. */
static unsigned char *image_of(const bk_filter *f, size_t *len)
{
    uint64_t n = bk_filter_serialized_size(f);
    unsigned char *buf = n ? malloc((size_t)n) : NULL;
    if (buf != NULL && bk_filter_serialize(f, buf, (size_t)n) != BK_OK) {
        free(buf);
        return NULL;
    }
    *len = (size_t)n;
    return buf;
}

/* The record a creating BF add reported, run on an empty host under the
 * other --bf-growable setting, makes the filter the add made: the same
 * family and settings, and (when the add met no error, such as the memory
 * budget) the same bytes. */
static void free_made(fake_host *h)
{
    for (int i = 0; i < h->made_argc; i++) free((void *)h->made[i].ptr);
    free(h->made);
    h->made = NULL;
    h->made_argc = 0;
}

static void check_creation(fake_host *h, int failed)
{
    static fake_host scratch;
    sink out;
    memset(&out, 0, sizeof(out));
    bkc_reply reply = {&sink_vt, &out};
    bkc_ctx ctx = {&reply, &fake_vt, &scratch, 2, h->now_ms};
    CHECK(h->wrote == 1); /* nothing else */
    scratch.argc = h->made_argc;
    scratch.argv = h->made;
    /* the record makes the same filter whatever the replaying side's
     * growable settings */
    uint32_t bf_was = bkc_defaults_in_force.bf_growable;
    uint32_t cf_was = bkc_defaults_in_force.cf_growable;
    bkc_defaults_in_force.bf_growable = !bf_was;
    bkc_defaults_in_force.cf_growable = !cf_was;
    bkc_dispatch(&ctx, h->made_argc, h->made);
    bkc_defaults_in_force.bf_growable = bf_was;
    bkc_defaults_in_force.cf_growable = cf_was;
    CHECK(out.top == 1 && scratch.wrote <= 1);
    /* the record, run, is recorded as itself */
    CHECK(scratch.made_argc == 0 || scratch.made_argc == h->made_argc);
    for (int i = 0; i < scratch.made_argc; i++)
        CHECK(scratch.made[i].len == h->made[i].len &&
              memcmp(scratch.made[i].ptr, h->made[i].ptr, h->made[i].len) == 0);
    free_made(&scratch);
    const bkc_value *a = value_named(h, h->made[1]), *b = value_named(&scratch, h->made[1]);
    CHECK(a != NULL && b != NULL && a->kind == b->kind &&
          (a->kind == BKC_KIND_BLOOM || a->kind == BKC_KIND_CUCKOO));
    bk_filter *fa = a->filters[0], *fb = b->filters[0];
    CHECK(bk_filter_family(fa) == bk_filter_family(fb));
    bk_growable *ga = bk_filter_as_growable(fa), *gb = bk_filter_as_growable(fb);
    bk_scalable *sa = bk_filter_as_scalable(fa), *sb = bk_filter_as_scalable(fb);
    if (a->kind == BKC_KIND_CUCKOO) {
        CHECK(a->cf->capacity == b->cf->capacity && a->cf->bucket_size == b->cf->bucket_size &&
              a->cf->max_iterations == b->cf->max_iterations &&
              a->cf->expansion == b->cf->expansion && a->cf->deleted == b->cf->deleted);
        if (ga != NULL)
            CHECK(bk_growable_initial_capacity(ga) == bk_growable_initial_capacity(gb) &&
                  bk_growable_is_multiset(ga) && bk_growable_is_multiset(gb));
    } else if (ga != NULL) {
        CHECK(bk_growable_error(ga) == bk_growable_error(gb));
        CHECK(bk_growable_initial_capacity(ga) == bk_growable_initial_capacity(gb));
    } else if (bk_filter_as_autoclear(fa) != NULL) { /* BF.INSERT ... AUTOCLEAR */
        bk_autoclear_stats x, y;
        CHECK(bk_autoclear_get_stats(bk_filter_as_autoclear(fa), &x) == BK_OK &&
              bk_autoclear_get_stats(bk_filter_as_autoclear(fb), &y) == BK_OK);
        CHECK(x.ratio == y.ratio && x.mode == y.mode && x.capacity == y.capacity &&
              x.target_fpr == y.target_fpr && x.inner == y.inner);
    } else {
        bk_scalable_stats x, y;
        CHECK(bk_scalable_get_stats(sa, &x) == BK_OK && bk_scalable_get_stats(sb, &y) == BK_OK);
        CHECK(x.error == y.error && x.initial_capacity == y.initial_capacity);
        CHECK(x.expansion == y.expansion && x.nonscaling == y.nonscaling && x.bounded == y.bounded);
    }
    if (!failed && !out.any_error) {
        size_t la = 0, lb = 0;
        unsigned char *ia = image_of(fa, &la), *ib = image_of(fb, &lb);
        if (ia != NULL && ib != NULL) CHECK(la == lb && memcmp(ia, ib, la) == 0);
        free(ia);
        free(ib);
    }
    host_free(&scratch);
    free_made(h);
}

/* Dispatch argv; returns 1 when the reply was not an error. */
static int run_command(harness *hs, int argc, const bkc_str *argv)
{
    fake_host *h = &hs->host;
    sink *s = &hs->out;
    bkc_reply reply = {&sink_vt, s};
    bkc_ctx ctx = {&reply, &fake_vt, h, 2, h->now_ms};
    s->top = 0;
    s->depth = 0;
    s->top_error = 0;
    s->any_error = 0;
    h->any_write_open = 0;
    h->wrote = 0;
    h->argc = argc;
    h->argv = argv;

    bkc_dispatch(&ctx, argc, argv);
    if (h->made_argc) check_creation(h, s->any_error);

    if (trace)
        fprintf(stderr, "%.*s (%d args): %s, %zu reply bytes so far\n",
                argc > 0 ? (int)(argv[0].len < 40 ? argv[0].len : 40) : 0,
                argc > 0 ? argv[0].ptr : "", argc, s->top_error ? "error" : "ok", s->bytes);
    CHECK(s->top == 1 && s->depth == 0); /* one whole reply */
    CHECK(h->open_now == 0);             /* every key closed */
    const bkc_command *cmd = argc > 0 ? bkc_lookup(argv[0]) : NULL;
    if (cmd != NULL && (cmd->flags & BKC_CMD_READONLY))
        CHECK(!h->any_write_open && h->wrote == 0);
    for (int i = 0; i < MAX_KEYS; i++)
        if (h->keys[i].v != NULL) check_value(h->keys[i].v);
    CHECK(host_used(h) <= MEMORY_BUDGET + BOOKKEEPING_SLACK);
    forget_empty_slots(h);
    return !s->top_error;
}

static int run3(harness *hs, const char *a, bkc_str b, const char *c)
{
    bkc_str argv[3] = {{a, strlen(a)}, b, {c, c ? strlen(c) : 0}};
    return run_command(hs, c ? 3 : 2, argv);
}

/* "BF" -> "BF.<suffix>" for the kinds that have the command. */
static const char *kind_prefix(bkc_str s)
{
    if (bkc_streq(s, "CF")) return "CF";
    if (bkc_streq(s, "CBF")) return "CBF";
    if (bkc_streq(s, "WF")) return "WF";
    if (bkc_streq(s, "SF")) return "SF";
    if (bkc_streq(s, "RS")) return "RS";
    if (bkc_streq(s, "TF")) return "TF";
    return "BF";
}

/* DUMPLOAD kind src dst [off [xor]] */
static void dumpload(harness *hs, int argc, const bkc_str *argv)
{
    if (argc < 4) return;
    const char *prefix = kind_prefix(argv[1]);
    char scandump[32], loadchunk[32], iter[32];
    snprintf(scandump, sizeof(scandump), "%s.SCANDUMP", prefix);
    snprintf(loadchunk, sizeof(loadchunk), "%s.LOADCHUNK", prefix);

    unsigned char *dump = NULL;
    size_t len = 0;
    long long at = 0;
    /* RedisBloom's chunks (a key in its layout): iterator 1 and a header,
     * then iterators 1 + the end offset; they go back with their own
     * iterators (rb_iters[i] for the chunk ending at rb_ends[i]) */
    long long rb_iters[MAX_DUMP_CHUNKS];
    size_t rb_ends[MAX_DUMP_CHUNKS];
    int rb = 0, nchunks = 0;
    hs->out.capture = 1;
    for (int n = 0; n < MAX_DUMP_CHUNKS; n++) {
        snprintf(iter, sizeof(iter), "%lld", at);
        if (!run3(hs, scandump, argv[2], iter)) break;
        if (hs->out.last_int == 0) break; /* the end */
        if (n == 0 && hs->out.last_int == 1 && hs->out.last_bulk_len != 1) rb = 1;
        if (rb) CHECK(hs->out.last_int > at);
        else CHECK(hs->out.last_int > at && hs->out.last_bulk_len == (size_t)(hs->out.last_int - at));
        unsigned char *grown = realloc(dump, len + hs->out.last_bulk_len + 1);
        CHECK(grown != NULL);
        dump = grown;
        memcpy(dump + len, hs->out.last_bulk, hs->out.last_bulk_len);
        len += hs->out.last_bulk_len;
        at = hs->out.last_int;
        rb_iters[nchunks] = at;
        rb_ends[nchunks++] = len;
    }
    hs->out.capture = 0;
    free(hs->out.last_bulk);
    hs->out.last_bulk = NULL;
    if (len == 0) {
        free(dump);
        return;
    }

    uint64_t off = 0, x = 1;
    if (argc > 4 && bkc_parse_u64(argv[4], &off)) {
        if (argc > 5) bkc_parse_u64(argv[5], &x);
        off %= len;
        dump[off] ^= (unsigned char)(x ? x : 1);
        if (len >= 56 && !(off >= 48 && off < 56)) {
            uint64_t check = bk_hash_key(dump, 48, 0).lo;
            for (int i = 0; i < 8; i++) dump[48 + i] = (unsigned char)(check >> (8 * i));
        }
    }
    if (rb) {
        for (int i = 0; i < nchunks; i++) {
            size_t pos = i ? rb_ends[i - 1] : 0;
            snprintf(iter, sizeof(iter), "%lld", rb_iters[i]);
            bkc_str la[4] = {{loadchunk, strlen(loadchunk)}, argv[3], {iter, strlen(iter)},
                             {(const char *)dump + pos, rb_ends[i] - pos}};
            if (!run_command(hs, 4, la)) break;
        }
        free(dump);
        return;
    }
    size_t chunk = bkc__scandump_chunk;
    for (size_t pos = 0; pos < len; pos += chunk) {
        size_t n = len - pos < chunk ? len - pos : chunk;
        snprintf(iter, sizeof(iter), "%zu", pos + n);
        bkc_str la[4] = {{loadchunk, strlen(loadchunk)}, argv[3], {iter, strlen(iter)},
                         {(const char *)dump + pos, n}};
        if (!run_command(hs, 4, la)) break;
    }
    free(dump);
}

static void harness_command(harness *hs, int argc, const bkc_str *argv)
{
    if (argc >= 1 && bkc_streq(argv[0], "TIME")) {
        uint64_t t;
        if (argc >= 2 && bkc_parse_u64(argv[1], &t)) hs->host.now_ms = t;
        return;
    }
    if (argc >= 1 && bkc_streq(argv[0], "DUMPLOAD")) {
        dumpload(hs, argc, argv);
        return;
    }
    run_command(hs, argc, argv);
}

/*==========================================================================
 * Command mode: the input as commands
 *==========================================================================*/

static const char *selectable[128];
static size_t nselectable;

static void init_selectable(void)
{
    for (size_t i = 0; i < bkc_command_count && nselectable < 126; i++)
        if (bkc_command_table[i].handler != NULL)
            selectable[nselectable++] = bkc_command_table[i].name;
    selectable[nselectable++] = "TIME";
    selectable[nselectable++] = "DUMPLOAD";
}

static int is_selector(uint8_t b) { return (b < 0x20 && b != '\n') || b >= 0x80; }

/* Read one argument at *pos (not at a separator); NULL length-prefixed
 * arguments that run past the end are cut there. */
static bkc_str read_arg(const uint8_t *data, size_t size, size_t *pos)
{
    size_t p = *pos;
    if (data[p] == '#') {
        size_t q = p + 1, n = 0;
        while (q < size && data[q] >= '0' && data[q] <= '9' && n < 100000)
            n = n * 10 + (size_t)(data[q++] - '0');
        if (q < size && data[q] == ':' && q > p + 1) {
            q++;
            if (n > size - q) n = size - q;
            *pos = q + n;
            return (bkc_str){(const char *)data + q, n};
        }
    }
    size_t q = p;
    while (q < size && data[q] != ' ' && data[q] != '\n') q++;
    *pos = q;
    return (bkc_str){(const char *)data + p, q - p};
}

static void command_mode(harness *hs, const uint8_t *data, size_t size)
{
    bkc_str argv[MAX_ARGS];
    size_t pos = 0;
    for (int ncmd = 0; pos < size && ncmd < MAX_COMMANDS; ncmd++) {
        int argc = 0;
        if (is_selector(data[pos])) {
            const char *name = selectable[data[pos] % nselectable];
            argv[argc++] = (bkc_str){name, strlen(name)};
            pos++;
            if (pos < size && data[pos] == ' ') pos++;
        }
        while (pos < size && data[pos] != '\n') {
            if (data[pos] == ' ') { /* one separator; a second one gives "" */
                pos++;
                if (pos < size && data[pos] == ' ' && argc < MAX_ARGS)
                    argv[argc++] = (bkc_str){(const char *)data + pos, 0};
                continue;
            }
            bkc_str a = read_arg(data, size, &pos);
            if (argc < MAX_ARGS) argv[argc++] = a;
        }
        pos++; /* the '\n' */
        if (argc > 0) harness_command(hs, argc, argv);
    }
}

/*==========================================================================
 * Decoder mode: the input as a value container
 *==========================================================================*/

static void decoder_mode(harness *hs, const uint8_t *data, size_t size)
{
    if (size < 1) return;
    uint8_t flags = data[0];
    data++;
    size--;
    unsigned char *buf = malloc(size ? size : 1);
    CHECK(buf != NULL);
    if (size) memcpy(buf, data, size);
    if ((flags & 2) && size >= 16)
        for (int i = 0; i < 8; i++) buf[8 + i] = (unsigned char)((uint64_t)size >> (8 * i));
    if ((flags & 1) && size >= 56) {
        uint64_t check = bk_hash_key(buf, 48, 0).lo;
        for (int i = 0; i < 8; i++) buf[48 + i] = (unsigned char)(check >> (8 * i));
    }

    static bkc_value not_set;
    bkc_value *v = &not_set; /* must be set to NULL on failure */
    int rc = bkc_value_decode(buf, size, &v);
    free(buf);
    if (rc != BK_OK) {
        CHECK(v == NULL && bk_strerror(rc)[0] != '\0');
        return;
    }
    CHECK(v != NULL);
    check_value(v);

    /* encode . decode . encode is stable */
    unsigned char *e1 = NULL, *e2 = NULL;
    size_t n1 = 0, n2 = 0;
    bkc_value *w = NULL;
    CHECK(bkc_value_encode(v, &e1, &n1) == BK_OK);
    CHECK(bkc_value_decode(e1, n1, &w) == BK_OK);
    CHECK(bkc_value_encode(w, &e2, &n2) == BK_OK);
    CHECK(n1 == n2 && memcmp(e1, e2, n1) == 0);
    free(e1);
    free(e2);
    bkc_value_free(w);

    /* the value in use, as after a snapshot load */
    if (bkc_value_bytes(v) > MEMORY_BUDGET) {
        bkc_value_free(v);
        return;
    }
    bkc_kind kind = v->kind;
    bkc_str name = {"v", 1};
    int i = find_slot(&hs->host, name, 1);
    hs->host.keys[i].v = v;
    static const char *prefixes[] = {"", "BF", "CF", "CBF", "WF", "BF", "SF", "RS", "TF"};
    const char *prefix = prefixes[kind];
    char cmd[32], iter[32];
    bkc_str item = {"item", 4};
    snprintf(cmd, sizeof(cmd), "%s.INFO", prefix);
    run3(hs, cmd, name, NULL);
    bkc_str probe[4] = {{cmd, 0}, name, item, {"other", 5}};
    snprintf(cmd, sizeof(cmd), "%s.%s", prefix,
             kind == BKC_KIND_COUNTING ? "COUNT"
             : kind == BKC_KIND_KEYSET ? "ISMEMBER"
                                       : "EXISTS");
    probe[0].len = strlen(cmd);
    run_command(hs, 3, probe);
    snprintf(cmd, sizeof(cmd), "%s.%s", prefix, kind == BKC_KIND_KEYSET ? "STRATA" : "MEXISTS");
    probe[0].len = strlen(cmd);
    run_command(hs, kind == BKC_KIND_KEYSET ? 2 : 4, probe);
    if (kind == BKC_KIND_LOADING) {
        /* a load in progress continues (or is found out of order) */
        snprintf(iter, sizeof(iter), "%zu", v->load_len + 4);
        bkc_str la[4] = {{"BF.LOADCHUNK", 12}, name, {iter, strlen(iter)}, {"more", 4}};
        run_command(hs, 4, la);
        return;
    }
    snprintf(cmd, sizeof(cmd), "%s.ADD", prefix);
    probe[0].len = strlen(cmd);
    run_command(hs, 3, probe);
    bkc_str dl[4] = {{"DUMPLOAD", 8}, {prefix, strlen(prefix)}, name, {"w", 1}};
    dumpload(hs, 4, dl);
}

/*==========================================================================
 * Entry
 *==========================================================================*/

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int initialised;
    if (!initialised) {
        bk_set_allocator(&counting_allocator);
        init_selectable();
        trace = getenv("BK_FUZZ_TRACE") != NULL;
        initialised = 1;
    }
    if (size < 1) return 0;
    harness *hs = calloc(1, sizeof(*hs));
    CHECK(hs != NULL);
    host_init(&hs->host);
    size_t saved_chunk = bkc__scandump_chunk;
    bkc__scandump_chunk = (size_t)16 << (data[0] & 15);
    if (data[0] == 'V') {
        bkc__scandump_chunk = 4096;
        decoder_mode(hs, data + 1, size - 1);
    } else {
        command_mode(hs, data + 1, size - 1);
    }
    bkc__scandump_chunk = saved_chunk;
    host_free(&hs->host);
    free(hs->out.last_bulk);
    free(hs);
    CHECK(lib_live == 0); /* everything the library allocated is back */
    return 0;
}
