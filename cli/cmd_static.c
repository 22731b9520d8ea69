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

static int wants_help(const cli_options *o, const char *cmd)
{
    if (!(o->given & OPTBIT(OPT_HELP))) return 0;
    cli_help(cmd, stdout);
    return 1;
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
 * create --type static
 *==========================================================================*/

int cli_create_static(const cli_options *o)
{
    keyset ks = {0};
    bk_static *f = NULL;
    int status = CLI_EXIT_ERROR;
    const uint64_t not_here = OPTBIT(OPT_CAPACITY) | OPTBIT(OPT_COUNTER_BITS) |
                              OPTBIT(OPT_REGIONS) | OPTBIT(OPT_BUCKET_SIZE) |
                              OPTBIT(OPT_MAX_KICKS) | OPTBIT(OPT_EXPANSION) |
                              OPTBIT(OPT_NONSCALING) | OPTBIT(OPT_WINDOW) |
                              OPTBIT(OPT_GENERATIONS) | OPTBIT(OPT_WINDOW_BY_COUNT);
    if (o->given & not_here) {
        cli_error("create: --type static is built from its keys: only --error or "
                  "--fingerprint-bits, --seed and --force apply (see bloomkit "
                  "create --help)");
        goto done;
    }
    if (o->nargs < 1) {
        cli_error("create: expected FILE and the files of keys (see bloomkit create --help)");
        goto done;
    }
    uint32_t bits = 8;
    if ((o->given & OPTBIT(OPT_ERROR)) && (o->given & OPTBIT(OPT_FINGERPRINT_BITS))) {
        cli_error("create: give --error or --fingerprint-bits, not both");
        goto done;
    }
    if (o->given & OPTBIT(OPT_FINGERPRINT_BITS)) {
        bits = o->config.fingerprint_bits;
        if (bits != 8 && bits != 12 && bits != 16) {
            cli_error("create: --fingerprint-bits: static filters take 8, 12 or 16");
            goto done;
        }
    } else if (o->given & OPTBIT(OPT_ERROR)) {
        double p = o->config.fpr;
        if (p >= 1.0 / 256) bits = 8;
        else if (p >= 1.0 / 4096) bits = 12;
        else if (p >= 1.0 / 65536) bits = 16;
        else {
            cli_error("create: --error %g: a static filter reaches 2^-16 = 0.0015%% at best", p);
            goto done;
        }
    }
    const char *path = o->args[0];
    if (check_new_file(path, o) != 0) goto done;
    if (read_keys(o->args + 1, o->nargs - 1, o, &ks) != 0) goto done;
    int rc = bk_static_build(&f, ks.keys, ks.klen, ks.n, bits, o->config.seed);
    if (rc != BK_OK) {
        cli_error("%s: cannot build a static filter of %zu keys: %s", path, ks.n,
                  bk_strerror(rc));
        goto done;
    }
    if (cli_save_filter(bk_static_as_filter(f), path) != BK_OK) goto done;
    status = CLI_EXIT_OK;
done:
    bk_static_free(f);
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
    if (wants_help(&o, "build-map")) {
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
    if (wants_help(&o, "get")) {
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
    if (wants_help(&o, cmd)) {
        status = CLI_EXIT_OK;
        goto done;
    }
    if (o.nargs != 2) {
        cli_error("%s: expected two files of keys, got %zu arguments (see bloomkit %s "
                  "--help)", cmd, o.nargs, cmd);
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
