/*
 * cmd_static.c - the static set and map commands, and set reconciliation:
 *
 *   create --type static FILE [KEYS...]   a binary fuse filter of the keys
 *   build-map FILE [PAIRS...]             a static map of key<TAB>value lines
 *   get MAP [KEYS...]                     the values of keys in a map
 *   diff A B                              what each key file lacks, found by
 *                                         IBLT reconciliation
 *   sync A B                              the same, then each file gets the
 *                                         keys it lacked
 *
 * Static structures are built once from all their keys, so these commands
 * read every key into memory first (one arena), then call the library.
 */
#include <errno.h>    /* errno */
#include <math.h>     /* log2, ceil */
#include <stdlib.h>   /* malloc, qsort, strtoull */
#include <string.h>   /* memcmp, strerror */
#include <sys/stat.h> /* stat */

#include "cli.h"
#include "cluster.h" /* the RESP client: diff and sync with a server */

/*==========================================================================
 * Keys in memory
 *==========================================================================*/

typedef struct keyset {
    char *buf;              /* every key's bytes, back to back */
    size_t len, cap;
    size_t *off, *klen;     /* key i: buf + off[i], klen[i] bytes */
    uint32_t *values;       /* build-map: value i */
    uint32_t *file;         /* build-map: file index of pair i */
    uint64_t *line;         /* build-map: line number of pair i */
    size_t n, room;
    const void **keys;      /* made by keyset_pointers */
} keyset;

static void keyset_free(keyset *ks)
{
    free(ks->buf);
    free(ks->off);
    free(ks->klen);
    free(ks->values);
    free(ks->file);
    free(ks->line);
    free(ks->keys);
    memset(ks, 0, sizeof(*ks));
}

static int grow(void **p, size_t count, size_t size)
{
    void *q = realloc(*p, count * size);
    if (q == NULL) return -1;
    *p = q;
    return 0;
}

static int keyset_push(keyset *ks, const void *key, size_t len, int with_pairs)
{
    if (ks->n == ks->room) {
        size_t room = ks->room ? 2 * ks->room : 4096;
        if (grow((void **)&ks->off, room, sizeof(size_t)) ||
            grow((void **)&ks->klen, room, sizeof(size_t)) ||
            (with_pairs && (grow((void **)&ks->values, room, sizeof(uint32_t)) ||
                            grow((void **)&ks->file, room, sizeof(uint32_t)) ||
                            grow((void **)&ks->line, room, sizeof(uint64_t)))))
            return -1;
        ks->room = room;
    }
    if (ks->cap - ks->len < len) {
        size_t cap = ks->cap ? ks->cap : 65536;
        while (cap - ks->len < len) cap *= 2;
        if (grow((void **)&ks->buf, cap, 1)) return -1;
        ks->cap = cap;
    }
    if (len > 0) memcpy(ks->buf + ks->len, key, len);
    ks->off[ks->n] = ks->len;
    ks->klen[ks->n] = len;
    ks->len += len;
    ks->n++;
    return 0;
}

/* keys[i] pointers into buf (once reading is over and buf stays put). */
static int keyset_pointers(keyset *ks)
{
    ks->keys = malloc((ks->n ? ks->n : 1) * sizeof(void *));
    if (ks->keys == NULL) return -1;
    for (size_t i = 0; i < ks->n; i++) ks->keys[i] = ks->buf + ks->off[i];
    return 0;
}

/* Every key of the inputs (key_reader: -0, --field ...) into ks. */
static int read_keys(const char *const *paths, size_t npaths, const cli_options *o,
                     keyset *ks)
{
    key_reader *r = NULL;
    key_batch b = {0};
    int status = -1;
    if (key_reader_open(&r, paths, npaths, o) != 0) return -1;
    if (key_batch_init(&b) != 0) goto done;
    for (;;) {
        if (key_reader_fill(r, &b) != 0) goto done;
        if (b.n == 0) break;
        for (size_t i = 0; i < b.n; i++) {
            if (keyset_push(ks, b.keys[i], b.lens[i], 0) != 0) {
                cli_error("%s", bk_strerror(BK_ENOMEM));
                goto done;
            }
        }
    }
    if (keyset_pointers(ks) != 0) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        goto done;
    }
    status = 0;
done:
    key_batch_free(&b);
    key_reader_free(r);
    return status;
}

/* 0 when path may be written: not there, or --force. */
static int check_new_file(const char *path, const cli_options *o)
{
    struct stat st;
    if (cli_check_target(path) != 0) return -1;
    if (!o->force && stat(path, &st) == 0) {
        cli_error("%s: already exists (use --force to replace it)", path);
        return -1;
    }
    return 0;
}

/*==========================================================================
 * create --type static | bumped
 *==========================================================================*/

/* Build the filter of the keys: a binary fuse filter (static) or a bumped
 * one (one line per lookup). */
static int build_static(bk_family family, const keyset *ks, uint32_t bits, uint64_t seed,
                        bk_filter **out)
{
    int rc;
    if (family == BK_FAMILY_BUMPED) {
        bk_bumped *b = NULL;
        rc = bk_bumped_build(&b, ks->keys, ks->klen, ks->n, bits, seed);
        *out = bk_bumped_as_filter(b);
    } else {
        bk_static *s = NULL;
        rc = bk_static_build(&s, ks->keys, ks->klen, ks->n, bits, seed);
        *out = bk_static_as_filter(s);
    }
    return rc;
}

/* The fingerprint bits of --fingerprint-bits or --error (8 by default):
 * the fewest whose rate 2^-w is at or under the error asked. -1 after an
 * error message. */
static int static_bits(const cli_options *o, int bumped)
{
    const char *type = bumped ? "bumped" : "static";
    if ((o->given & OPTBIT(OPT_ERROR)) && (o->given & OPTBIT(OPT_FINGERPRINT_BITS))) {
        cli_error("create: give --error or --fingerprint-bits, not both");
        return -1;
    }
    if (o->given & OPTBIT(OPT_FINGERPRINT_BITS)) {
        uint32_t bits = o->config.fingerprint_bits;
        if (bits == 8 || bits == 16 || (!bumped && bits == 12)) return (int)bits;
        cli_error("create: --fingerprint-bits: --type %s takes %s", type,
                  bumped ? "8 or 16" : "8, 12 or 16");
        return -1;
    }
    if (o->given & OPTBIT(OPT_ERROR)) {
        double p = o->config.fpr;
        if (p >= 1.0 / 256) return 8;
        if (!bumped && p >= 1.0 / 4096) return 12;
        if (p >= 1.0 / 65536) return 16;
        cli_error("create: --error %g: a %s filter reaches 2^-16 = 0.0015%% at best", p, type);
        return -1;
    }
    return 8;
}

int cli_create_static(const cli_options *o)
{
    keyset ks = {0};
    bk_filter *f = NULL;
    int status = CLI_EXIT_ERROR;
    int bumped = o->config.family == BK_FAMILY_BUMPED;
    const char *type = bumped ? "bumped" : "static";
    const uint64_t not_here = OPTBIT(OPT_CAPACITY) | OPTBIT(OPT_COUNTER_BITS) |
                              OPTBIT(OPT_REGIONS) | OPTBIT(OPT_BUCKET_SIZE) |
                              OPTBIT(OPT_MAX_KICKS) | OPTBIT(OPT_EXPANSION) |
                              OPTBIT(OPT_NONSCALING) | OPTBIT(OPT_WINDOW) |
                              OPTBIT(OPT_GENERATIONS) | OPTBIT(OPT_WINDOW_BY_COUNT);
    if (o->given & not_here) {
        cli_error("create: --type %s is built from its keys: only --error or "
                  "--fingerprint-bits, --seed and --force apply (see bloomkit "
                  "create --help)", type);
        goto done;
    }
    if (o->nargs < 1) {
        cli_error("create: expected FILE and the files of keys (see bloomkit create --help)");
        goto done;
    }
    int bits = static_bits(o, bumped);
    if (bits < 0) goto done;
    const char *path = o->args[0];
    if (check_new_file(path, o) != 0) goto done;
    if (read_keys(o->args + 1, o->nargs - 1, o, &ks) != 0) goto done;
    int rc = build_static(o->config.family, &ks, (uint32_t)bits, o->config.seed, &f);
    if (rc != BK_OK) {
        cli_error("%s: cannot build a %s filter of %zu keys: %s", path, type, ks.n,
                  bk_strerror(rc));
        goto done;
    }
    if (cli_save_filter(f, path) != BK_OK) goto done;
    status = CLI_EXIT_OK;
done:
    bk_filter_free(f);
    keyset_free(&ks);
    return status;
}

/*==========================================================================
 * build-map
 *==========================================================================*/

/* The pairs of one file (or standard input): key DELIM value per line,
 * split at the last delimiter; the value a decimal number below 2^32. */
static int read_pairs(const char *path, uint32_t file, char delim, keyset *ks)
{
    int use_stdin = strcmp(path, "-") == 0;
    FILE *fp = use_stdin ? stdin : fopen(path, "rb");
    const char *name = use_stdin ? "(standard input)" : path;
    if (fp == NULL) {
        cli_error("%s: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    uint64_t lineno = 0;
    int status = -1;
    for (;;) {
        errno = 0;
        ssize_t got = getline(&line, &cap, fp);
        if (got < 0) {
            if (ferror(fp)) {
                cli_error("%s: %s", name, strerror(errno ? errno : EIO));
                goto done;
            }
            break;
        }
        lineno++;
        size_t len = (size_t)got;
        if (len > 0 && line[len - 1] == '\n') len--;
        if (len == 0) continue; /* blank lines carry no pair */
        char *sep = NULL;
        for (size_t i = len; i-- > 0;)
            if (line[i] == delim) { sep = line + i; break; }
        if (sep == NULL) {
            cli_error("%s:%llu: expected KEY, a %s and a VALUE", name,
                      (unsigned long long)lineno, delim == '\t' ? "tab" : "delimiter");
            goto done;
        }
        const char *v = sep + 1;
        size_t vlen = (size_t)(line + len - v);
        uint64_t value = 0;
        int ok = vlen > 0 && vlen <= 10;
        for (size_t i = 0; ok && i < vlen; i++) {
            ok = v[i] >= '0' && v[i] <= '9';
            value = value * 10 + (uint64_t)(v[i] - '0');
        }
        if (!ok || value > UINT32_MAX) {
            cli_error("%s:%llu: value '%.*s' is not a whole number from 0 to 4294967295",
                      name, (unsigned long long)lineno, (int)(vlen > 40 ? 40 : vlen), v);
            goto done;
        }
        if (keyset_push(ks, line, (size_t)(sep - line), 1) != 0) {
            cli_error("%s", bk_strerror(BK_ENOMEM));
            goto done;
        }
        ks->values[ks->n - 1] = (uint32_t)value;
        ks->file[ks->n - 1] = file;
        ks->line[ks->n - 1] = lineno;
    }
    status = 0;
done:
    free(line);
    if (!use_stdin) fclose(fp);
    return status;
}

/* A key for a message: at most 60 bytes, non-printing bytes as '?'. */
static void print_key(FILE *out, const char *key, size_t len)
{
    size_t shown = len > 60 ? 60 : len;
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)key[i];
        fputc(c >= 32 && c < 127 ? c : '?', out);
    }
    if (shown < len) fputs("...", out);
}

int cmd_build_map(int argc, char **argv)
{
    cli_options o;
    keyset ks = {0};
    bk_map *m = NULL;
    int status = CLI_EXIT_ERROR;
    if (cli_parse_options("build-map", argc, argv,
                          OPTBIT(OPT_HELP) | OPTBIT(OPT_ERROR) | OPTBIT(OPT_SEED) |
                              OPTBIT(OPT_FORCE) | OPTBIT(OPT_DELIMITER) | OPTBIT(OPT_QUIET),
                          &o) != 0)
        goto done;
    if (cli_wants_help(&o, "build-map")) {
        status = CLI_EXIT_OK;
        goto done;
    }
    if (o.nargs < 1) {
        cli_error("build-map: expected FILE and the files of pairs (see bloomkit "
                  "build-map --help)");
        goto done;
    }
    /* check bits from the rate a non-member may pass: c = ceil(log2(1/P)) */
    double p = (o.given & OPTBIT(OPT_ERROR)) ? o.config.fpr : 0.01;
    uint32_t check_bits = (uint32_t)ceil(log2(1.0 / p) - 1e-9);
    if (check_bits > BK_MAP_MAX_CHECK_BITS) {
        cli_error("build-map: --error %g: the check reaches 2^-%d at best", p,
                  BK_MAP_MAX_CHECK_BITS);
        goto done;
    }
    const char *path = o.args[0];
    if (check_new_file(path, &o) != 0) goto done;
    size_t nfiles = o.nargs - 1;
    const char *const stdin_only[] = {"-"};
    const char *const *files = nfiles ? o.args + 1 : stdin_only;
    if (nfiles == 0) nfiles = 1;
    for (size_t i = 0; i < nfiles; i++)
        if (read_pairs(files[i], (uint32_t)i, o.delimiter, &ks) != 0) goto done;
    if (keyset_pointers(&ks) != 0) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        goto done;
    }
    uint32_t largest = 0;
    for (size_t i = 0; i < ks.n; i++)
        if (ks.values[i] > largest) largest = ks.values[i];
    uint32_t value_bits = 1;
    while (value_bits < 32 && (largest >> value_bits) != 0) value_bits++;
    uint64_t at = 0;
    int rc = bk_map_build(&m, ks.keys, ks.klen, ks.values, ks.n, value_bits, check_bits,
                          o.config.seed, &at);
    if (rc == BK_ECONFLICT && at < ks.n) {
        /* name the key and both places it was given */
        size_t first = at;
        for (size_t i = 0; i < ks.n; i++)
            if (ks.klen[i] == ks.klen[at] && ks.values[i] != ks.values[at] &&
                memcmp(ks.keys[i], ks.keys[at], ks.klen[at]) == 0) {
                first = i;
                break;
            }
        size_t a = first < at ? first : at, b = first < at ? at : first;
        fprintf(stderr, "bloomkit: %s:%llu: key '", files[ks.file[b]],
                (unsigned long long)ks.line[b]);
        print_key(stderr, ks.keys[b], ks.klen[b]);
        fprintf(stderr, "' maps to %u here but to %u at %s:%llu\n", ks.values[b],
                ks.values[a], files[ks.file[a]], (unsigned long long)ks.line[a]);
        goto done;
    }
    if (rc != BK_OK) {
        cli_error("%s: cannot build a map of %zu pairs: %s", path, ks.n, bk_strerror(rc));
        goto done;
    }
    if (cli_save_filter(bk_map_as_filter(m), path) != BK_OK) goto done;
    if (!o.quiet) {
        bk_map_stats st;
        bk_map_get_stats(m, &st);
        fprintf(stderr,
                "bloomkit: %s: %llu keys, %u-bit values, %u check bits (a key not in "
                "the map passes with probability %.4g), %.2f bits per key\n",
                path, (unsigned long long)st.items, st.value_bits, st.check_bits, st.fpr,
                st.bits_per_key);
    }
    status = CLI_EXIT_OK;
done:
    bk_map_free(m);
    keyset_free(&ks);
    cli_options_free(&o);
    return status;
}

/*==========================================================================
 * get
 *==========================================================================*/

int cmd_get(int argc, char **argv)
{
    cli_options o;
    bk_filter *f = NULL;
    key_reader *r = NULL;
    key_batch b = {0};
    uint32_t *values = NULL;
    int status = CLI_EXIT_ERROR;
    uint64_t matched = 0;
    if (cli_parse_options("get", argc, argv,
                          OPTBIT(OPT_HELP) | OPTS_INPUT | OPTBIT(OPT_INVERT), &o) != 0)
        goto done;
    if (cli_wants_help(&o, "get")) {
        status = CLI_EXIT_OK;
        goto done;
    }
    if (o.nargs < 1) {
        cli_error("get: expected MAP and the files of keys (see bloomkit get --help)");
        goto done;
    }
    if (cli_open_readonly(o.args[0], &f, 0) != BK_OK) goto done;
    bk_map *m = bk_filter_as_map(f);
    if (m == NULL) {
        cli_error("%s: not a map but a %s filter (maps are made by bloomkit build-map)",
                  o.args[0], cli_family_name(bk_filter_family(f)));
        goto done;
    }
    if (key_reader_open(&r, o.args + 1, o.nargs - 1, &o) != 0) goto done;
    if (key_batch_init(&b) != 0) goto done;
    values = malloc(CLI_BATCH_KEYS * sizeof(uint32_t));
    if (values == NULL) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        goto done;
    }
    char term = o.nul ? '\0' : '\n';
    for (;;) {
        if (key_reader_fill(r, &b) != 0) goto done;
        if (b.n == 0) break;
        for (size_t start = 0; start < b.n; start += CLI_BATCH_KEYS) {
            size_t n = b.n - start < CLI_BATCH_KEYS ? b.n - start : CLI_BATCH_KEYS;
            bk_map_get_batch(m, b.keys + start, b.lens + start, n, values, b.results + start);
            for (size_t i = 0; i < n; i++) {
                size_t k = start + i;
                if (b.results[k] == (o.invert ? 0 : 1)) {
                    matched++;
                    fwrite(b.lines[k], 1, b.line_lens[k], stdout);
                    if (!o.invert) printf("\t%u", values[i]);
                    putchar(term);
                }
            }
        }
    }
    status = matched > 0 ? CLI_EXIT_OK : CLI_EXIT_NONE;
done:
    free(values);
    key_batch_free(&b);
    key_reader_free(r);
    bk_filter_free(f);
    cli_options_free(&o);
    return status;
}

/*==========================================================================
 * diff and sync
 *==========================================================================*/

typedef struct side {
    keyset ks;
    uint64_t *ids;       /* id of key i */
    uint64_t *distinct;  /* sorted distinct ids */
    size_t ndistinct;
} side;

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static int side_load(side *s, const char *path, const cli_options *o, uint64_t seed)
{
    const char *paths[1] = {path};
    if (read_keys(paths, 1, o, &s->ks) != 0) return -1;
    size_t n = s->ks.n ? s->ks.n : 1;
    s->ids = malloc(n * sizeof(uint64_t));
    s->distinct = malloc(n * sizeof(uint64_t));
    if (s->ids == NULL || s->distinct == NULL) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        return -1;
    }
    for (size_t i = 0; i < s->ks.n; i++) {
        s->ids[i] = bk_iblt_key_id(s->ks.keys[i], s->ks.klen[i], seed);
        s->distinct[i] = s->ids[i];
    }
    /* a key listed twice is one key: reconciliation works on sets */
    qsort(s->distinct, s->ks.n, sizeof(uint64_t), cmp_u64);
    size_t out = 0;
    for (size_t i = 0; i < s->ks.n; i++)
        if (out == 0 || s->distinct[i] != s->distinct[out - 1]) s->distinct[out++] = s->distinct[i];
    s->ndistinct = out;
    return 0;
}

static void side_free(side *s)
{
    keyset_free(&s->ks);
    free(s->ids);
    free(s->distinct);
}

/* Call emit for each key of s whose id is in the sorted list (once per
 * id); returns the bytes those keys take on the wire (each key and a
 * varint of its length). */
static size_t side_emit(const side *s, uint64_t *list, size_t n,
                        void (*emit)(const char *key, size_t len, void *ctx), void *ctx)
{
    size_t bytes = 0;
    uint8_t *done = calloc(n ? n : 1, 1);
    if (done == NULL) return 0;
    for (size_t i = 0; i < s->ks.n; i++) {
        uint64_t *hit = bsearch(&s->ids[i], list, n, sizeof(uint64_t), cmp_u64);
        if (hit == NULL || done[hit - list]) continue;
        done[hit - list] = 1;
        size_t len = s->ks.klen[i];
        bytes += len + 1;
        for (size_t l = len; l >= 128; l >>= 7) bytes++;
        emit(s->ks.keys[i], len, ctx);
    }
    free(done);
    return bytes;
}

typedef struct emit_ctx {
    const char *prefix;
    char term;
    FILE *out;
    int failed;
} emit_ctx;

static void emit_line(const char *key, size_t len, void *vctx)
{
    emit_ctx *c = vctx;
    if (c->prefix) fputs(c->prefix, c->out);
    if (fwrite(key, 1, len, c->out) != len || fputc(c->term, c->out) == EOF) c->failed = 1;
}

/* Before appending to a file whose last key has no terminator, add one. */
static int end_last_key(FILE *fp, const char *path, char term)
{
    FILE *in = fopen(path, "rb");
    if (in == NULL) return -1;
    int last = EOF;
    if (fseek(in, -1, SEEK_END) == 0) last = fgetc(in);
    fclose(in);
    if (last != EOF && last != (unsigned char)term && fputc(term, fp) == EOF) return -1;
    return 0;
}

/*--------------------------------------------------------------------------
 * diff and sync with a server: the exchange over the Redis protocol
 *
 * A side written HOST:PORT/KEY is a reconciliation set (RS.*) on a
 * bloomkit server (or Redis with bloomkit.so); a file side is hashed here
 * and plays its part locally. The messages are those of the file version:
 *
 *   1. A's strata estimator      RS.STRATA a            (A -> B)
 *   2. the estimate d at B       RS.ESTIMATE b strata
 *   3. B's IBLT of cells_for(d)  RS.IBLT b cells        (B -> A)
 *   4. A subtracts and peels     RS.DIFF a iblt -> A's keys B lacks and
 *      the ids of B's keys A lacks; "too small": step 3 with twice the cells
 *   5. B's keys by id            RS.GETIDS b id ...     (ids A -> B, keys B -> A)
 *   6. sync: RS.ADD (or append to the file) on each side
 *
 * A missing key is an empty set (sync creates it with RS.RESERVE and the
 * exchange's seed). The seed is the servers' (RS.INFO); --seed must agree.
 * Every RESP byte of these commands is counted per server.
 *--------------------------------------------------------------------------*/

#define RS_BATCH 1000                       /* items or ids per command */
#define RS_MAX_CELLS (UINT64_C(1) << 25)    /* RS.IBLT's limit */

typedef struct rside {
    const char *arg;        /* as given */
    int remote;
    side file;              /* a file's keys; empty for a missing key */
    /* a server key */
    char *addr;             /* "HOST:PORT" */
    const char *key;
    size_t keylen;
    cluster cl;
    int opened, exists;
    uint64_t seed;
    uint64_t sent, received; /* RESP bytes */
} rside;

/* Is arg HOST:PORT/KEY (HOST a name, an IPv4 address or [IPv6], PORT
 * digits, KEY not empty)? Then *addr_len is the length of HOST:PORT. */
static int remote_spec(const char *arg, size_t *addr_len)
{
    const char *slash = strchr(arg, '/');
    if (slash == NULL || slash == arg || slash[1] == '\0') return 0;
    const char *colon = NULL;
    for (const char *p = arg; p < slash; p++)
        if (*p == ':') colon = p;
    if (colon == NULL || colon == arg || colon + 1 == slash || slash - colon > 6) return 0;
    for (const char *p = colon + 1; p < slash; p++)
        if (*p < '0' || *p > '9') return 0;
    if (arg[0] != '[' && memchr(arg, ':', (size_t)(colon - arg)) != NULL) return 0;
    *addr_len = (size_t)(slash - arg);
    return 1;
}

static size_t dec_digits(uint64_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* RESP2 bytes of a request and of a reply (what crossed the socket). */
static uint64_t resp_request_bytes(int argc, const size_t *lens)
{
    uint64_t n = 3 + dec_digits((uint64_t)argc);
    for (int i = 0; i < argc; i++) n += 5 + dec_digits(lens[i]) + lens[i];
    return n;
}

static uint64_t resp_reply_bytes(const redisReply *r)
{
    char num[32];
    switch (r->type) {
    case REDIS_REPLY_ARRAY: {
        uint64_t n = 3 + dec_digits(r->elements);
        for (size_t i = 0; i < r->elements; i++) n += resp_reply_bytes(r->element[i]);
        return n;
    }
    case REDIS_REPLY_INTEGER:
        return 3 + (uint64_t)snprintf(num, sizeof num, "%lld", r->integer);
    case REDIS_REPLY_NIL: return 5;
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR: return 3 + r->len;
    default: return 5 + dec_digits(r->len) + r->len;
    }
}

/* Run n commands on s's server (pipelined), counting bytes. 0, or -1
 * after printing a transport problem. */
static int rs_run(rside *s, cluster_cmd *cmds, size_t n)
{
    unsigned slot = cluster_key_slot(s->key, s->keylen);
    for (size_t i = 0; i < n; i++) {
        cmds[i].slot = slot;
        s->sent += resp_request_bytes(cmds[i].argc, cmds[i].argvlen);
    }
    if (cluster_run(&s->cl, cmds, n) != 0) return -1;
    for (size_t i = 0; i < n; i++) s->received += resp_reply_bytes(cmds[i].reply);
    return 0;
}

/* One command "NAME key [arg]" on s: its reply (free it), or NULL after
 * printing the problem. An error reply is printed and NULL unless
 * keep_error. */
static redisReply *rs_call(const char *cmd, rside *s, const char *name, const void *arg,
                           size_t arglen, int keep_error)
{
    const char *argv[3] = {name, s->key, arg};
    size_t lens[3] = {strlen(name), s->keylen, arglen};
    cluster_cmd c = {0, arg ? 3 : 2, argv, lens, NULL, NULL};
    if (rs_run(s, &c, 1) != 0) {
        cluster_free_replies(&c, 1);
        return NULL;
    }
    if (c.reply->type == REDIS_REPLY_ERROR && !keep_error) {
        cli_error("%s: %s: %s: %s", cmd, s->arg, name, c.reply->str);
        cluster_free_replies(&c, 1);
        return NULL;
    }
    return c.reply;
}

/* rs_call for a command that answers a string: a copy of its bytes (to
 * free) and *len, or NULL after reporting (an error reply, anything but a
 * string, or no memory for the copy). */
static unsigned char *rs_call_bytes(const char *cmd, rside *s, const char *name,
                                    const void *arg, size_t arglen, size_t *len)
{
    redisReply *r = rs_call(cmd, s, name, arg, arglen, 0);
    if (r == NULL) return NULL;
    unsigned char *bytes = NULL;
    if (r->type == REDIS_REPLY_STRING && (bytes = malloc(r->len ? r->len : 1)) != NULL) {
        memcpy(bytes, r->str, r->len);
        *len = r->len;
    }
    freeReplyObject(r);
    if (bytes == NULL) cli_error("%s: %s: %s: unexpected reply", cmd, s->arg, name);
    return bytes;
}

/* Connect and find the key (RS.INFO key SEED). */
static int rside_open(const char *cmd, rside *s)
{
    if (cluster_check_list(cmd, s->arg, s->addr) != 0) return -1;
    s->opened = 1; /* cluster_close frees what a failed open kept */
    if (cluster_open(&s->cl, cmd, s->addr) != 0) return -1;
    redisReply *r = rs_call(cmd, s, "RS.INFO", "SEED", 4, 1);
    if (r == NULL) return -1;
    int status = -1;
    if (r->type == REDIS_REPLY_ERROR && strcmp(r->str, "ERR not found") == 0) {
        status = 0;
    } else if (r->type == REDIS_REPLY_ERROR) {
        cli_error("%s: %s: %s", cmd, s->arg, r->str);
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
               r->element[0]->type == REDIS_REPLY_STRING) {
        char *end;
        errno = 0;
        s->seed = strtoull(r->element[0]->str, &end, 10);
        if (errno == 0 && *end == '\0') {
            s->exists = 1;
            status = 0;
        }
    }
    if (status != 0 && r->type != REDIS_REPLY_ERROR)
        cli_error("%s: %s: RS.INFO: unexpected reply (is this a bloomkit server?)", cmd,
                  s->arg);
    freeReplyObject(r);
    return status;
}

static void rside_free(rside *s)
{
    side_free(&s->file);
    if (s->opened) cluster_close(&s->cl);
    free(s->addr);
}

/* Does a side answer locally (a file, or a missing key: empty)? */
static int rs_local(const rside *s)
{
    return !s->remote || !s->exists;
}

/* A byte string to print or add: into a file side's keys or a reply. */
typedef struct blist {
    const char **p;
    size_t *len;
    size_t n, cap;
    uint64_t bytes;   /* wire bytes of the keys: length varint + key */
    int failed;
} blist;

static void blist_push(const char *p, size_t len, void *ctx)
{
    blist *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        const char **np = realloc(l->p, cap * sizeof(*np));
        size_t *nl = np ? realloc(l->len, cap * sizeof(*nl)) : NULL;
        if (np) l->p = np;
        if (nl) l->len = nl;
        if (np == NULL || nl == NULL) {
            l->failed = 1;
            return;
        }
        l->cap = cap;
    }
    l->p[l->n] = p;
    l->len[l->n++] = len;
    l->bytes += len + 1;
    for (size_t v = len; v >= 128; v >>= 7) l->bytes++;
}

static void blist_free(blist *l)
{
    free(l->p);
    free(l->len);
}

/* Serialise a local side's strata estimator or IBLT into a new buffer. */
static unsigned char *local_strata(const side *s, uint64_t seed, size_t *len)
{
    bk_strata *st = NULL;
    unsigned char *buf = NULL;
    if (bk_strata_create(&st, seed) != BK_OK) return NULL;
    for (size_t i = 0; i < s->ndistinct; i++) bk_strata_insert(st, s->distinct[i]);
    *len = bk_strata_serialized_size(st);
    buf = malloc(*len);
    if (buf && bk_strata_serialize(st, buf, *len) != BK_OK) {
        free(buf);
        buf = NULL;
    }
    bk_strata_free(st);
    return buf;
}

static int local_table(const side *s, uint64_t cells, uint32_t hashes, uint64_t seed,
                       bk_iblt **out)
{
    int rc = bk_iblt_create(out, cells, hashes, seed);
    if (rc != BK_OK) return rc;
    for (size_t i = 0; i < s->ndistinct; i++) bk_iblt_insert(*out, s->distinct[i]);
    return BK_OK;
}

static unsigned char *local_iblt(const side *s, uint64_t cells, uint64_t seed, size_t *len)
{
    bk_iblt *t = NULL;
    unsigned char *buf = NULL;
    if (local_table(s, cells, 0, seed, &t) != BK_OK) return NULL;
    *len = bk_iblt_serialized_size(t);
    buf = malloc(*len);
    if (buf && bk_iblt_serialize(t, buf, *len) != BK_OK) {
        free(buf);
        buf = NULL;
    }
    bk_iblt_free(t);
    return buf;
}

static int in_side(const side *s, uint64_t id)
{
    return s->ndistinct > 0 &&
           bsearch(&id, s->distinct, s->ndistinct, sizeof(uint64_t), cmp_u64) != NULL;
}

/* RS.DIFF played by a local side: BK_OK with the sorted id lists,
 * BK_EDECODE when the table was too small, or another error. */
static int local_diff(const side *s, const unsigned char *wire, size_t len, uint64_t seed,
                      uint64_t **only_a, size_t *na, uint64_t **only_b, size_t *nb)
{
    bk_iblt *theirs = NULL, *ours = NULL;
    int rc = bk_iblt_deserialize(&theirs, wire, len);
    if (rc != BK_OK) return rc;
    uint64_t cells = bk_iblt_cells(theirs);
    rc = local_table(s, cells, bk_iblt_hashes(theirs), seed, &ours);
    if (rc == BK_OK) rc = bk_iblt_subtract(ours, theirs);
    if (rc == BK_OK) {
        *only_a = malloc((size_t)cells * sizeof(uint64_t));
        *only_b = malloc((size_t)cells * sizeof(uint64_t));
        rc = *only_a && *only_b ? bk_iblt_decode(ours, *only_a, na, *only_b, nb, (size_t)cells)
                                : BK_ENOMEM;
    }
    /* an id on the wrong side is a false pure cell: as if too small */
    for (size_t i = 0; rc == BK_OK && i < *na; i++)
        if (!in_side(s, (*only_a)[i])) rc = BK_EDECODE;
    for (size_t i = 0; rc == BK_OK && i < *nb; i++)
        if (in_side(s, (*only_b)[i])) rc = BK_EDECODE;
    if (rc == BK_OK) {
        qsort(*only_a, *na, sizeof(uint64_t), cmp_u64);
        qsort(*only_b, *nb, sizeof(uint64_t), cmp_u64);
    }
    bk_iblt_free(ours);
    bk_iblt_free(theirs);
    return rc;
}

/* Argument i of a batched command, its length in *len. */
typedef const char *(*rs_arg_fn)(const void *ctx, size_t i, size_t *len);

/* The commands `verb KEY arg...` of server side s over n arguments,
 * RS_BATCH a command: *cmds (*ncmds of them) over *argv and *lens,
 * argument i from arg(ctx, i). 0, or -1 (said) when out of memory; the
 * caller frees *cmds, *argv and *lens either way. */
static int rs_batches(const char *verb, const rside *s, size_t n, rs_arg_fn arg,
                      const void *ctx, cluster_cmd **cmds, const char ***argv, size_t **lens,
                      size_t *ncmds)
{
    size_t nb = (n + RS_BATCH - 1) / RS_BATCH;
    *cmds = calloc(nb ? nb : 1, sizeof(**cmds));
    *argv = malloc((n + 2 * nb + 1) * sizeof(char *));
    *lens = malloc((n + 2 * nb + 1) * sizeof(size_t));
    *ncmds = 0;
    if (*cmds == NULL || *argv == NULL || *lens == NULL) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        return -1;
    }
    const char **av = *argv;
    size_t *al = *lens, a = 0;
    for (size_t c = 0; c < nb; c++) {
        size_t from = c * RS_BATCH, to = from + RS_BATCH < n ? from + RS_BATCH : n;
        (*cmds)[c].argc = (int)(to - from + 2);
        (*cmds)[c].argv = av + a;
        (*cmds)[c].argvlen = al + a;
        av[a] = verb;
        al[a++] = strlen(verb);
        av[a] = s->key;
        al[a++] = s->keylen;
        for (size_t i = from; i < to; i++, a++) av[a] = arg(ctx, i, &al[a]);
    }
    *ncmds = nb;
    return 0;
}

/* GETIDS's arguments: the ids in hex, written into hex (17 bytes each). */
typedef struct hex_ids {
    const uint64_t *ids;
    char *hex;
} hex_ids;

static const char *hex_id(const void *ctx, size_t i, size_t *len)
{
    const hex_ids *h = ctx;
    snprintf(h->hex + 17 * i, 17, "%016llx", (unsigned long long)h->ids[i]);
    *len = 16;
    return h->hex + 17 * i;
}

/* RS.ADD's arguments: the keys of a list. */
static const char *list_key(const void *ctx, size_t i, size_t *len)
{
    const blist *l = ctx;
    *len = l->len[i];
    return l->p[i];
}

/* The keys of ids (sorted) from side b into out: GETIDS on a server, the
 * file's keys otherwise. replies keeps the server's replies alive. */
static int fetch_ids(const char *cmd, rside *b, const uint64_t *ids, size_t n, blist *out,
                     cluster_cmd **replies, size_t *nreplies, uint64_t *request_bytes)
{
    *request_bytes += 8 * (uint64_t)n;
    if (rs_local(b)) {
        side_emit(&b->file, (uint64_t *)ids, n, blist_push, out);
        if (out->failed) {
            cli_error("%s", bk_strerror(BK_ENOMEM));
            return -1;
        }
        if (out->n != n) {
            cli_error("%s: %s: %zu of the ids asked for are not there (the file changed?)",
                      cmd, b->arg, n - out->n);
            return -1;
        }
        return 0;
    }
    const char **argv = NULL;
    size_t *lens = NULL;
    hex_ids h = {ids, malloc(17 * (n ? n : 1))};
    int status = -1;
    if (h.hex == NULL) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        goto done;
    }
    if (rs_batches("RS.GETIDS", b, n, hex_id, &h, replies, &argv, &lens, nreplies) != 0)
        goto done;
    size_t nb = *nreplies;
    if (nb > 0 && rs_run(b, *replies, nb) != 0) goto done;
    for (size_t c = 0; c < nb; c++) {
        redisReply *r = (*replies)[c].reply;
        if (r->type == REDIS_REPLY_ERROR) {
            cli_error("%s: %s: RS.GETIDS: %s", cmd, b->arg, r->str);
            goto done;
        }
        for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
            redisReply *e = r->element[i];
            if (e->type != REDIS_REPLY_STRING) {
                cli_error("%s: %s: an id is no longer there (the set changed during the "
                          "exchange?)", cmd, b->arg);
                goto done;
            }
            blist_push(e->str, e->len, out);
        }
    }
    if (out->failed) cli_error("%s", bk_strerror(BK_ENOMEM));
    else if (out->n != n) cli_error("%s: %s: RS.GETIDS: unexpected reply", cmd, b->arg);
    else status = 0;
done:
    free(argv);
    free(lens);
    free(h.hex);
    return status;
}

/* Give a server side the keys in l (sync): RS.RESERVE first when the key
 * is missing, then RS.ADD in batches. */
static int push_keys(const char *cmd, rside *s, const blist *l)
{
    if (l->n == 0) return 0;
    if (!s->exists) {
        char seed[24];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->seed);
        const char *argv[4] = {"RS.RESERVE", s->key, "SEED", seed};
        size_t lens[4] = {10, s->keylen, 4, strlen(seed)};
        cluster_cmd c = {0, 4, argv, lens, NULL, NULL};
        int rc = rs_run(s, &c, 1);
        if (rc == 0 && c.reply->type == REDIS_REPLY_ERROR) {
            cli_error("%s: %s: RS.RESERVE: %s", cmd, s->arg, c.reply->str);
            rc = -1;
        }
        cluster_free_replies(&c, 1);
        if (rc != 0) return -1;
        s->exists = 1;
    }
    cluster_cmd *cmds = NULL;
    const char **argv = NULL;
    size_t *lens = NULL, nb = 0;
    int status = -1;
    if (rs_batches("RS.ADD", s, l->n, list_key, l, &cmds, &argv, &lens, &nb) != 0) goto done;
    if (rs_run(s, cmds, nb) != 0) goto done;
    status = 0;
    for (size_t c = 0; c < nb && status == 0; c++) {
        redisReply *r = cmds[c].reply;
        if (r->type == REDIS_REPLY_ERROR) {
            cli_error("%s: %s: RS.ADD: %s", cmd, s->arg, r->str);
            status = -1;
        }
        for (size_t i = 0; status == 0 && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
            if (r->element[i]->type == REDIS_REPLY_ERROR) {
                cli_error("%s: %s: RS.ADD: %s", cmd, s->arg, r->element[i]->str);
                status = -1;
            }
    }
done:
    if (cmds) cluster_free_replies(cmds, nb);
    free(cmds);
    free(argv);
    free(lens);
    return status;
}

/* Append the keys in l to a file side (sync). */
static int append_keys(const char *cmd, const rside *s, const blist *l, char term)
{
    if (l->n == 0) return 0;
    FILE *fp = fopen(s->arg, "ab");
    if (fp == NULL) {
        cli_error("%s: %s: %s", cmd, s->arg, strerror(errno));
        return -1;
    }
    emit_ctx to = {NULL, term, fp, 0};
    if (end_last_key(fp, s->arg, term) != 0) to.failed = 1;
    for (size_t i = 0; i < l->n; i++) emit_line(l->p[i], l->len[i], &to);
    if (fclose(fp) != 0 || to.failed) {
        cli_error("%s: %s: cannot append: %s", cmd, s->arg, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

static int reconcile_remote(const char *cmd, const cli_options *o, int apply)
{
    rside sd[2];
    blist only[2] = {{0}, {0}}; /* keys only in A, only in B */
    redisReply *held = NULL;    /* RS.DIFF's reply: A's keys point into it */
    cluster_cmd *got = NULL;    /* RS.GETIDS's replies */
    size_t ngot = 0;
    uint64_t *ids_a = NULL, *ids_b = NULL;
    unsigned char *strata = NULL, *table = NULL;
    int status = CLI_EXIT_ERROR;

    memset(sd, 0, sizeof sd);
    for (int i = 0; i < 2; i++) {
        size_t alen;
        sd[i].arg = o->args[i];
        sd[i].remote = remote_spec(o->args[i], &alen);
        if (!sd[i].remote) continue;
        sd[i].addr = strndup(o->args[i], alen);
        sd[i].key = o->args[i] + alen + 1;
        sd[i].keylen = strlen(sd[i].key);
        if (sd[i].addr == NULL) {
            cli_error("%s", bk_strerror(BK_ENOMEM));
            goto done;
        }
    }
    for (int i = 0; i < 2; i++) {
        struct stat st;
        if (apply && !sd[i].remote &&
            (strcmp(sd[i].arg, "-") == 0 || stat(sd[i].arg, &st) != 0 || !S_ISREG(st.st_mode))) {
            cli_error("%s: %s: sync appends to a file side: it must be an existing regular "
                      "file", cmd, sd[i].arg);
            goto done;
        }
    }
    /* the seed: the servers', which --seed (when given) must match */
    uint64_t seed = o->config.seed;
    int seed_from = (o->given & OPTBIT(OPT_SEED)) ? -2 : -1;
    for (int i = 0; i < 2; i++) {
        if (!sd[i].remote) continue;
        if (rside_open(cmd, &sd[i]) != 0) goto done;
        if (!sd[i].exists) continue;
        if (seed_from != -1 && sd[i].seed != seed) {
            cli_error("%s: %s has seed %llu but %s %llu: reconciliation needs one seed", cmd,
                      sd[i].arg, (unsigned long long)sd[i].seed,
                      seed_from == -2 ? "--seed is" : sd[seed_from].arg,
                      (unsigned long long)seed);
            goto done;
        }
        seed = sd[i].seed;
        seed_from = i;
    }
    for (int i = 0; i < 2; i++) {
        sd[i].seed = seed;
        if (!sd[i].remote && side_load(&sd[i].file, sd[i].arg, o, seed) != 0) goto done;
    }
    rside *A = &sd[0], *B = &sd[1];

    /* 1-2: the estimate */
    size_t strata_len = 0;
    uint64_t d = 0;
    if (rs_local(A)) {
        strata = local_strata(&A->file, seed, &strata_len);
        if (strata == NULL) {
            cli_error("%s", bk_strerror(BK_ENOMEM));
            goto done;
        }
    } else {
        strata = rs_call_bytes(cmd, A, "RS.STRATA", NULL, 0, &strata_len);
        if (strata == NULL) goto done;
    }
    if (rs_local(B)) {
        bk_strata *theirs = NULL;
        size_t mine_len;
        unsigned char *mine = local_strata(&B->file, seed, &mine_len);
        bk_strata *ours = NULL;
        int rc = mine ? bk_strata_deserialize(&ours, mine, mine_len) : BK_ENOMEM;
        if (rc == BK_OK) rc = bk_strata_deserialize(&theirs, strata, strata_len);
        if (rc == BK_OK) rc = bk_strata_estimate(ours, theirs, &d);
        free(mine);
        bk_strata_free(ours);
        bk_strata_free(theirs);
        if (rc != BK_OK) {
            cli_error("%s: %s: cannot estimate the difference: %s", cmd, B->arg,
                      bk_strerror(rc));
            goto done;
        }
    } else {
        redisReply *r = rs_call(cmd, B, "RS.ESTIMATE", strata, strata_len, 0);
        if (r == NULL) goto done;
        int ok = r->type == REDIS_REPLY_INTEGER && r->integer >= 0;
        d = ok ? (uint64_t)r->integer : 0;
        freeReplyObject(r);
        if (!ok) {
            cli_error("%s: %s: RS.ESTIMATE: unexpected reply", cmd, B->arg);
            goto done;
        }
    }

    /* 3-4: IBLTs until one decodes */
    uint64_t cells = bk_iblt_cells_for(d);
    size_t iblt_bytes = 0, n_a = 0, n_b = 0;
    uint32_t rounds = 0;
    for (;;) {
        if (cells > RS_MAX_CELLS) {
            cli_error("%s: reconciliation failed: no IBLT up to %llu cells decoded", cmd,
                      (unsigned long long)RS_MAX_CELLS);
            goto done;
        }
        size_t table_len = 0;
        if (rs_local(B)) {
            table = local_iblt(&B->file, cells, seed, &table_len);
            if (table == NULL) {
                cli_error("%s", bk_strerror(BK_ENOMEM));
                goto done;
            }
        } else {
            char num[24];
            int nl = snprintf(num, sizeof num, "%llu", (unsigned long long)cells);
            table = rs_call_bytes(cmd, B, "RS.IBLT", num, (size_t)nl, &table_len);
            if (table == NULL) goto done;
        }
        rounds++;
        iblt_bytes += table_len;
        int too_small = 0;
        if (rs_local(A)) {
            free(ids_a);
            free(ids_b);
            ids_a = ids_b = NULL;
            int rc = local_diff(&A->file, table, table_len, seed, &ids_a, &n_a, &ids_b, &n_b);
            if (rc == BK_EDECODE) {
                too_small = 1;
            } else if (rc != BK_OK) {
                cli_error("%s: reconciliation failed: %s", cmd, bk_strerror(rc));
                goto done;
            } else {
                side_emit(&A->file, ids_a, n_a, blist_push, &only[0]);
            }
        } else {
            redisReply *r = rs_call(cmd, A, "RS.DIFF", table, table_len, 1);
            if (r == NULL) goto done;
            if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "ERR IBLT too small", 18) == 0) {
                too_small = 1;
                freeReplyObject(r);
            } else if (r->type == REDIS_REPLY_ERROR) {
                cli_error("%s: %s: RS.DIFF: %s", cmd, A->arg, r->str);
                freeReplyObject(r);
                goto done;
            } else {
                held = r;
                int ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                         r->element[0]->type == REDIS_REPLY_ARRAY &&
                         r->element[1]->type == REDIS_REPLY_ARRAY;
                n_a = ok ? r->element[0]->elements : 0;
                n_b = ok ? r->element[1]->elements : 0;
                ids_b = ok ? malloc((n_b ? n_b : 1) * sizeof(uint64_t)) : NULL;
                for (size_t i = 0; ok && i < n_a; i++) {
                    redisReply *e = r->element[0]->element[i];
                    if (e->type != REDIS_REPLY_STRING) ok = 0;
                    else blist_push(e->str, e->len, &only[0]);
                }
                for (size_t i = 0; ok && ids_b && i < n_b; i++) {
                    redisReply *e = r->element[1]->element[i];
                    char *end;
                    if (e->type != REDIS_REPLY_STRING || e->len != 16) {
                        ok = 0;
                        break;
                    }
                    ids_b[i] = strtoull(e->str, &end, 16);
                    if (*end != '\0') ok = 0;
                }
                if (!ok || ids_b == NULL) {
                    cli_error("%s: %s: RS.DIFF: unexpected reply", cmd, A->arg);
                    goto done;
                }
                qsort(ids_b, n_b, sizeof(uint64_t), cmp_u64);
            }
        }
        free(table);
        table = NULL;
        if (!too_small) break;
        cells *= 2;
    }
    if (only[0].failed) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        goto done;
    }

    /* 5: B's keys A lacks */
    uint64_t request_bytes = 0;
    if (fetch_ids(cmd, B, ids_b, n_b, &only[1], &got, &ngot, &request_bytes) != 0) goto done;

    /* print, or 6: give each side what it lacks */
    char term = o->nul ? '\0' : '\n';
    if (!apply) {
        emit_ctx ca = {"< ", term, stdout, 0}, cb = {"> ", term, stdout, 0};
        for (size_t i = 0; i < only[0].n; i++) emit_line(only[0].p[i], only[0].len[i], &ca);
        for (size_t i = 0; i < only[1].n; i++) emit_line(only[1].p[i], only[1].len[i], &cb);
    } else {
        for (int i = 0; i < 2; i++) {
            rside *to = &sd[1 - i];
            int rc = to->remote ? push_keys(cmd, to, &only[i])
                                : append_keys(cmd, to, &only[i], term);
            if (rc != 0) goto done;
        }
    }
    if (!o->quiet) {
        uint64_t keys = only[0].bytes + only[1].bytes;
        uint64_t total = strata_len + iblt_bytes + request_bytes + keys;
        fprintf(stderr,
                "bloomkit: %s: %zu keys only in %s, %zu only in %s; exchanged %llu bytes "
                "(estimator %zu, IBLT %zu in %u round%s, requests %llu, keys %llu)\n",
                cmd, only[0].n, A->arg, only[1].n, B->arg, (unsigned long long)total,
                strata_len, iblt_bytes, rounds, rounds == 1 ? "" : "s",
                (unsigned long long)request_bytes, (unsigned long long)keys);
        fprintf(stderr, "bloomkit: %s: A to B %llu bytes (estimator, requests, A's keys), "
                        "B to A %llu bytes (IBLT, B's keys)\n",
                cmd, (unsigned long long)(strata_len + request_bytes + only[0].bytes),
                (unsigned long long)(iblt_bytes + only[1].bytes));
        for (int i = 0; i < 2; i++)
            if (sd[i].remote)
                fprintf(stderr, "bloomkit: %s: %s: %llu bytes sent, %llu received (RESP, "
                                "every command of the exchange)\n",
                        cmd, sd[i].addr, (unsigned long long)sd[i].sent,
                        (unsigned long long)sd[i].received);
    }
    status = apply || (only[0].n == 0 && only[1].n == 0) ? CLI_EXIT_OK : CLI_EXIT_NONE;
    if (!apply && fflush(stdout) != 0) status = CLI_EXIT_ERROR;
done:
    if (held) freeReplyObject(held);
    if (got) cluster_free_replies(got, ngot);
    free(got);
    free(ids_a);
    free(ids_b);
    free(strata);
    free(table);
    blist_free(&only[0]);
    blist_free(&only[1]);
    rside_free(&sd[0]);
    rside_free(&sd[1]);
    return status;
}

static int reconcile_files(const char *cmd, int argc, char **argv, int apply)
{
    cli_options o;
    side a = {0}, b = {0};
    uint64_t *only_a = NULL, *only_b = NULL;
    int status = CLI_EXIT_ERROR;
    uint64_t allowed = OPTBIT(OPT_HELP) | OPTBIT(OPT_SEED) | OPTBIT(OPT_QUIET) |
                       OPTBIT(OPT_NUL) | OPTBIT(OPT_SKIP_EMPTY) | OPTBIT(OPT_NO_DECOMPRESS);
    if (!apply) allowed |= OPTBIT(OPT_FIELD) | OPTBIT(OPT_DELIMITER);
    if (cli_parse_options(cmd, argc, argv, allowed, &o) != 0) goto done;
    if (cli_wants_help(&o, cmd)) {
        status = CLI_EXIT_OK;
        goto done;
    }
    if (o.nargs != 2) {
        cli_error("%s: expected two sides (files of keys or HOST:PORT/KEY), got %zu "
                  "arguments (see bloomkit %s --help)", cmd, o.nargs, cmd);
        goto done;
    }
    size_t alen;
    if (remote_spec(o.args[0], &alen) || remote_spec(o.args[1], &alen)) {
        status = reconcile_remote(cmd, &o, apply);
        goto done;
    }
    if (apply) {
        for (int i = 0; i < 2; i++) {
            struct stat st;
            if (strcmp(o.args[i], "-") == 0 || stat(o.args[i], &st) != 0 ||
                !S_ISREG(st.st_mode)) {
                cli_error("%s: %s: sync appends to both files: each must be an existing "
                          "regular file", cmd, o.args[i]);
                goto done;
            }
        }
    }
    uint64_t seed = o.config.seed;
    if (side_load(&a, o.args[0], &o, seed) != 0 || side_load(&b, o.args[1], &o, seed) != 0)
        goto done;
    only_a = malloc((a.ndistinct ? a.ndistinct : 1) * sizeof(uint64_t));
    only_b = malloc((b.ndistinct ? b.ndistinct : 1) * sizeof(uint64_t));
    if (only_a == NULL || only_b == NULL) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        goto done;
    }
    size_t na = 0, nb = 0;
    bk_reconcile_stats st;
    int rc = bk_reconcile(a.distinct, a.ndistinct, b.distinct, b.ndistinct, seed, only_a,
                          &na, only_b, &nb, &st);
    if (rc != BK_OK) {
        cli_error("%s: reconciliation failed: %s", cmd, bk_strerror(rc));
        goto done;
    }
    qsort(only_a, na, sizeof(uint64_t), cmp_u64);
    qsort(only_b, nb, sizeof(uint64_t), cmp_u64);
    char term = o.nul ? '\0' : '\n';
    size_t key_bytes = 0;
    if (!apply) {
        emit_ctx ca = {"< ", term, stdout, 0}, cb = {"> ", term, stdout, 0};
        key_bytes += side_emit(&a, only_a, na, emit_line, &ca);
        key_bytes += side_emit(&b, only_b, nb, emit_line, &cb);
    } else {
        /* each side appends what the other sent: A's extra keys go to B */
        FILE *fa = fopen(o.args[0], "ab"), *fb = fopen(o.args[1], "ab");
        if (fa == NULL || fb == NULL) {
            cli_error("%s: %s: %s", cmd, fa == NULL ? o.args[0] : o.args[1], strerror(errno));
            if (fa) fclose(fa);
            if (fb) fclose(fb);
            goto done;
        }
        emit_ctx to_b = {NULL, term, fb, 0}, to_a = {NULL, term, fa, 0};
        if (nb > 0 && end_last_key(fa, o.args[0], term) != 0) to_a.failed = 1;
        if (na > 0 && end_last_key(fb, o.args[1], term) != 0) to_b.failed = 1;
        key_bytes += side_emit(&a, only_a, na, emit_line, &to_b);
        key_bytes += side_emit(&b, only_b, nb, emit_line, &to_a);
        int bad_a = fclose(fa) != 0 || to_a.failed, bad_b = fclose(fb) != 0 || to_b.failed;
        if (bad_a || bad_b) {
            cli_error("%s: %s: cannot append: %s", cmd, bad_a ? o.args[0] : o.args[1],
                      strerror(errno ? errno : EIO));
            goto done;
        }
    }
    if (!o.quiet) {
        size_t total = st.strata_bytes + st.iblt_bytes + st.request_bytes + key_bytes;
        fprintf(stderr,
                "bloomkit: %s: %zu keys only in %s, %zu only in %s; exchanged %zu bytes "
                "(estimator %zu, IBLT %zu in %u round%s, requests %zu, keys %zu)\n",
                cmd, na, o.args[0], nb, o.args[1], total, st.strata_bytes, st.iblt_bytes,
                st.rounds, st.rounds == 1 ? "" : "s", st.request_bytes, key_bytes);
    }
    status = apply || (na == 0 && nb == 0) ? CLI_EXIT_OK : CLI_EXIT_NONE;
done:
    free(only_a);
    free(only_b);
    side_free(&a);
    side_free(&b);
    cli_options_free(&o);
    return status;
}

int cmd_diff(int argc, char **argv)
{
    return reconcile_files("diff", argc, argv, 0);
}

int cmd_sync(int argc, char **argv)
{
    return reconcile_files("sync", argc, argv, 1);
}
