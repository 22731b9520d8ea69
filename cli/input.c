/*
 * input.c - reading keys.
 *
 * Rules (docs/CLI.md, "Keys"):
 *   - input is the files named, in order, or standard input when none is
 *     named or the name is "-";
 *   - a key is a line without its terminator: '\n', or NUL with -0. No other
 *     byte is special (a '\r' before the '\n' is part of the key);
 *   - a last line without a terminator is a key too; keys never span files;
 *   - an empty line is a key (the empty string) unless --skip-empty;
 *   - with --field N the key is the N-th field (1-based) of the line, fields
 *     separated by --delimiter (one byte, default tab); a line with fewer
 *     fields is an error;
 *   - lines are at most CLI_MAX_LINE (1 MiB) bytes; a longer line is an
 *     error naming the file and line number.
 *
 * Each batch owns its buffer: the reader copies the unfinished tail of one
 * batch into the next and reads at most READ_CHUNK bytes at a time, so a
 * batch stays valid while another thread fills the next one, and output
 * keeps up with a slow pipe (one read per batch, whatever it returned).
 */
#include <errno.h>     /* errno */
#include <fcntl.h>     /* open */
#include <stdlib.h>    /* malloc, free */
#include <string.h>    /* memchr, memcpy, strerror */
#include <sys/stat.h>  /* fstat, stat */
#include <unistd.h>    /* read, close */

#include "cli.h"

#define READ_CHUNK ((size_t)1 << 20)
#define BATCH_CAP (CLI_MAX_LINE + READ_CHUNK + 1)

struct key_reader {
    const char *const *paths;
    size_t npaths, next_path;   /* next_path: index of the next file to open */
    int fd;                     /* -1: no file open */
    cli_source *src;            /* reads fd, decompressing (decompress.c) */
    int detect;                 /* look for gzip/zstd magic (no --no-decompress) */
    uint64_t bytes_closed;      /* bytes consumed by the inputs closed so far */
    int at_eof;                 /* the open file has no more bytes */
    const char *name;           /* of the open file, for messages */
    uint64_t line;              /* lines finished in the open file */
    char *pending;              /* unfinished tail carried to the next batch */
    size_t pending_len;
    uint64_t bytes, total;
    char delim, field_delim;
    uint32_t field;
    int skip_empty;
};

static const char *const stdin_name = "(standard input)";

static int is_stdin(const char *path)
{
    return path == NULL || strcmp(path, "-") == 0;
}

int key_batch_init(key_batch *b)
{
    memset(b, 0, sizeof(*b));
    b->cap = BATCH_CAP;
    b->buf = malloc(b->cap);
    b->keys = malloc(CLI_BATCH_KEYS * sizeof(*b->keys));
    b->lens = malloc(CLI_BATCH_KEYS * sizeof(*b->lens));
    b->lines = malloc(CLI_BATCH_KEYS * sizeof(*b->lines));
    b->line_lens = malloc(CLI_BATCH_KEYS * sizeof(*b->line_lens));
    b->results = malloc(CLI_BATCH_KEYS);
    if (!b->buf || !b->keys || !b->lens || !b->lines || !b->line_lens ||
        !b->results) {
        key_batch_free(b);
        cli_error("%s", bk_strerror(BK_ENOMEM));
        return -1;
    }
    return 0;
}

void key_batch_free(key_batch *b)
{
    free(b->buf);
    free(b->keys);
    free(b->lens);
    free(b->lines);
    free(b->line_lens);
    free(b->results);
    memset(b, 0, sizeof(*b));
}

int key_reader_open(key_reader **out, const char *const *paths, size_t npaths,
                    const cli_options *o)
{
    static const char *const only_stdin[] = {"-"};
    key_reader *r = calloc(1, sizeof(*r));
    char *pending = malloc(BATCH_CAP);
    if (r == NULL || pending == NULL) {
        free(r);
        free(pending);
        cli_error("%s", bk_strerror(BK_ENOMEM));
        return -1;
    }
    if (npaths == 0) {
        paths = only_stdin;
        npaths = 1;
    }
    r->paths = paths;
    r->npaths = npaths;
    r->fd = -1;
    r->pending = pending;
    r->delim = o->nul ? '\0' : '\n';
    r->field = o->field;
    r->field_delim = o->delimiter;
    r->skip_empty = o->skip_empty;
    r->detect = !o->no_decompress;
    /* The total is known when every input is a regular file. */
    for (size_t i = 0; i < npaths; i++) {
        struct stat st;
        int rc = is_stdin(paths[i]) ? fstat(0, &st) : stat(paths[i], &st);
        if (rc != 0 || !S_ISREG(st.st_mode)) {
            r->total = 0;
            break;
        }
        r->total += (uint64_t)st.st_size;
    }
    *out = r;
    return 0;
}

static void close_current(key_reader *r)
{
    if (r->src != NULL) {
        r->bytes_closed += cli_source_consumed(r->src);
        cli_source_close(r->src);
        r->src = NULL;
    }
    if (r->fd > 0) close(r->fd);
    r->fd = -1;
}

void key_reader_free(key_reader *r)
{
    if (r == NULL) return;
    close_current(r);
    free(r->pending);
    free(r);
}

uint64_t key_reader_bytes(const key_reader *r) { return r->bytes; }
uint64_t key_reader_total(const key_reader *r) { return r->total; }

/* Open the next input. Returns 1 when one was opened, 0 at the end, -1 on
 * error (printed). */
static int open_next(key_reader *r)
{
    if (r->next_path >= r->npaths) return 0;
    const char *path = r->paths[r->next_path++];
    r->line = 0;
    r->at_eof = 0;
    if (is_stdin(path)) {
        r->fd = 0;
        r->name = stdin_name;
    } else {
        r->name = path;
        r->fd = open(path, O_RDONLY);
        if (r->fd < 0) {
            cli_error("%s: %s", path, strerror(errno));
            return -1;
        }
    }
    if (cli_source_open(&r->src, r->fd, r->name, r->detect) != 0) return -1;
    return 1;
}

/* Append one line [line, line + len) to b, picking the key out of it. */
static int emit(key_reader *r, key_batch *b, const char *line, size_t len)
{
    r->line++;
    if (len > CLI_MAX_LINE) {
        cli_error("%s:%llu: line longer than %zu bytes", r->name,
                  (unsigned long long)r->line, CLI_MAX_LINE);
        return -1;
    }
    const char *key = line;
    size_t key_len = len;
    if (r->field > 0) {
        const char *end = line + len;
        for (uint32_t f = 1; f < r->field; f++) {
            const char *sep = memchr(key, r->field_delim, (size_t)(end - key));
            if (sep == NULL) {
                cli_error("%s:%llu: line has fewer than %u fields", r->name,
                          (unsigned long long)r->line, r->field);
                return -1;
            }
            key = sep + 1;
        }
        const char *sep = memchr(key, r->field_delim, (size_t)(end - key));
        key_len = sep ? (size_t)(sep - key) : (size_t)(end - key);
    }
    if (key_len == 0 && r->skip_empty) return 0;
    b->keys[b->n] = key;
    b->lens[b->n] = key_len;
    b->lines[b->n] = line;
    b->line_lens[b->n] = len;
    b->n++;
    return 0;
}

int key_reader_fill(key_reader *r, key_batch *b)
{
    b->n = 0;
    memcpy(b->buf, r->pending, r->pending_len);
    b->len = r->pending_len;
    r->pending_len = 0;
    size_t scanned = 0; /* bytes of b->buf split into lines */
    for (;;) {
        /* Split the complete lines. */
        while (b->n < CLI_BATCH_KEYS && scanned < b->len) {
            const char *start = b->buf + scanned;
            const char *nl = memchr(start, r->delim, b->len - scanned);
            if (nl == NULL) break;
            if (emit(r, b, start, (size_t)(nl - start)) != 0) return -1;
            scanned = (size_t)(nl - b->buf) + 1;
        }
        size_t tail = b->len - scanned;
        if (b->n == CLI_BATCH_KEYS || (b->n > 0 && !r->at_eof)) break;
        if (r->fd < 0 || r->at_eof) {
            if (tail > 0) {             /* the last line has no terminator */
                if (emit(r, b, b->buf + scanned, tail) != 0) return -1;
                scanned = b->len;
                tail = 0;
            }
            close_current(r);
            if (b->n > 0) break;
            int rc = open_next(r);
            if (rc <= 0) return rc;
            continue;
        }
        if (tail > CLI_MAX_LINE) {
            cli_error("%s:%llu: line longer than %zu bytes", r->name,
                      (unsigned long long)r->line + 1, CLI_MAX_LINE);
            return -1;
        }
        /* Make room, then read once. */
        if (scanned > 0 && b->n == 0) {
            memmove(b->buf, b->buf + scanned, tail);
            b->len = tail;
            scanned = 0;
        }
        ssize_t got = cli_source_read(r->src, b->buf + b->len, READ_CHUNK);
        if (got < 0) return -1; /* printed */
        if (got == 0) r->at_eof = 1;
        b->len += (size_t)got;
        r->bytes = r->bytes_closed + cli_source_consumed(r->src);
    }
    r->pending_len = b->len - scanned;
    memcpy(r->pending, b->buf + scanned, r->pending_len);
    return 0;
}
