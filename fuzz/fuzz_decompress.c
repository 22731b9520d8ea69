/*
 * fuzz_decompress.c - libFuzzer target for the CLI's key input
 * (cli/decompress.c and cli/input.c): a key file or standard input that
 * may be gzip (several members) or zstd (several frames), found by its
 * magic bytes, decompressed as a stream and split into keys.
 *
 * Input layout: byte 0 holds the key options (bit 0: -0, NUL-terminated
 * keys; bit 1: --skip-empty; bit 2: --field 1 or 2 (bit 3) with
 * --delimiter ',' (bit 4) or tab; bits 5-7 all set: --no-decompress),
 * byte 1 the size of the small reads below (1..64 bytes); the rest is
 * the file, put in a memfd and read three ways:
 *
 *   A. by the key reader, as `bloomkit add FILE` reads it
 *      (/proc/self/fd/N, so it opens and closes its own descriptor);
 *   B. by a source read in pieces of 1..64 bytes and 4 KiB in turn, so
 *      the decoders stop and resume anywhere;
 *   C. by a source read 64 KiB at a time.
 *
 * Checked, for every input: each way ends (no hang) in the data or in an
 * error printed through cli_error that names the input (never a crash or a
 * leak); B and C agree on success and on the bytes; when A succeeds so do
 * B and C, and A's keys joined with their terminators are C's bytes (the
 * last terminator optional), every key inside its batch and its line;
 * plain input comes out as it went in, and a finished stream consumed
 * every byte of the file. Each way stops after OUT_LIMIT bytes of output
 * (a 4 KiB zstd input can expand to gigabytes; the limit still lets a line
 * pass CLI_MAX_LINE), and A after KEY_LIMIT keys (a few batches; millions
 * of empty lines took seconds an input under ASan): the comparisons are
 * then skipped.
 */
#include <stdarg.h>   /* va_list: cli_error */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h> /* memfd_create */
#include <unistd.h>   /* write, lseek, close */

#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OUT_LIMIT (CLI_MAX_LINE + CLI_MAX_LINE / 2)
#define KEY_LIMIT (5 * (size_t)CLI_BATCH_KEYS)

#define FUZZ_NAME "fuzz_decompress"
#include "fuzzcheck.h"

/*==========================================================================
 * The CLI's message function (main.c's prints; this one remembers)
 *==========================================================================*/

static unsigned long errors_printed;
static char last_error[1024];

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    errors_printed++;
}

/* Whether a -1 just returned came with a message naming the input. */
static void check_error_printed(unsigned long before, const char *name)
{
    CHECK(errors_printed > before);
    CHECK(strstr(last_error, name) != NULL);
}

/*==========================================================================
 * Growing output
 *==========================================================================*/

typedef struct out {
    unsigned char *p;
    size_t len, cap;
    int limited; /* OUT_LIMIT reached: stopped early */
} out;

static void out_put(out *o, const void *p, size_t n)
{
    if (o->limited) return;
    if (o->len + n > OUT_LIMIT) {
        o->limited = 1;
        return;
    }
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->len + n) cap *= 2;
        o->p = realloc(o->p, cap);
        CHECK(o->p != NULL);
        o->cap = cap;
    }
    if (n) memcpy(o->p + o->len, p, n);
    o->len += n;
}

/*==========================================================================
 * The three ways of reading
 *==========================================================================*/

/* B and C: a source over fd, read in pieces of sizes[0..nsizes) in turn.
 * Returns 0 at the end of the data, -1 after an error. */
static int read_source(int fd, size_t file_size, int detect, const size_t *sizes,
                       int nsizes, out *o)
{
    static const char name[] = "fuzz-source";
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    cli_source *s = NULL;
    unsigned long before = errors_printed;
    int rc = 0;
    if (cli_source_open(&s, fd, name, detect) != 0) {
        check_error_printed(before, name);
        rc = -1;
        goto done;
    }
    unsigned char buf[1 << 16];
    for (int piece = 0; !o->limited; piece++) {
        size_t cap = sizes[piece % nsizes];
        before = errors_printed;
        ssize_t got = cli_source_read(s, buf, cap);
        if (got < 0) {
            check_error_printed(before, name);
            rc = -1;
            break;
        }
        CHECK((size_t)got <= cap);
        if (got == 0) break;
        out_put(o, buf, (size_t)got);
    }
    CHECK(cli_source_consumed(s) <= file_size);
    if (rc == 0 && !o->limited) CHECK(cli_source_consumed(s) == file_size);
done:
    cli_source_close(s);
    return rc;
}

/* A: the key reader over path; each line (its terminator re-added) goes to
 * o. Returns 0 or -1 after an error. */
static int read_keys(const char *path, const cli_options *opts, out *o)
{
    const char *paths[1] = {path};
    key_reader *r = NULL;
    key_batch b;
    unsigned long before = errors_printed;
    CHECK(key_reader_open(&r, paths, 1, opts) == 0);
    CHECK(key_batch_init(&b) == 0);
    int rc = 0;
    char delim = opts->nul ? '\0' : '\n';
    size_t keys = 0;
    while (!o->limited) {
        if (keys >= KEY_LIMIT) {
            o->limited = 1;
            break;
        }
        before = errors_printed;
        if (key_reader_fill(r, &b) != 0) {
            check_error_printed(before, path);
            rc = -1;
            break;
        }
        if (b.n == 0) break;
        CHECK(b.n <= CLI_BATCH_KEYS && b.len <= b.cap);
        keys += b.n;
        const char *end = b.buf + b.len;
        for (size_t i = 0; i < b.n; i++) {
            const char *key = b.keys[i], *line = b.lines[i];
            CHECK(line >= b.buf && b.line_lens[i] <= (size_t)(end - line));
            CHECK(key >= line && b.lens[i] <= b.line_lens[i] &&
                  key + b.lens[i] <= line + b.line_lens[i]);
            CHECK(b.line_lens[i] <= CLI_MAX_LINE);
            CHECK(memchr(line, delim, b.line_lens[i]) == NULL);
            if (opts->field == 0) CHECK(key == line && b.lens[i] == b.line_lens[i]);
            if (opts->skip_empty) CHECK(b.lens[i] > 0);
            out_put(o, line, b.line_lens[i]);
            out_put(o, &delim, 1);
        }
    }
    CHECK(key_reader_bytes(r) <= key_reader_total(r));
    key_batch_free(&b);
    key_reader_free(r);
    return rc;
}

/*==========================================================================
 * The target
 *==========================================================================*/

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    unsigned flags = data[0];
    size_t small = (size_t)(data[1] & 63) + 1;
    data += 2;
    size -= 2;

    cli_options opts;
    memset(&opts, 0, sizeof opts);
    opts.nul = flags & 1;
    opts.skip_empty = (flags >> 1) & 1;
    if (flags & 4) opts.field = (flags & 8) ? 2 : 1;
    opts.delimiter = (flags & 16) ? ',' : '\t';
    opts.no_decompress = (flags & 0xe0) == 0xe0;
    int detect = !opts.no_decompress;

    int fd = memfd_create("fuzz_decompress", MFD_CLOEXEC);
    CHECK(fd >= 0);
    for (size_t done = 0; done < size;) {
        ssize_t w = write(fd, data + done, size - done);
        CHECK(w > 0);
        done += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);

    out keys = {0}, pieces = {0}, whole = {0};
    int keys_rc = read_keys(path, &opts, &keys);
    const size_t piece_sizes[2] = {small, 4096};
    int pieces_rc = read_source(fd, size, detect, piece_sizes, 2, &pieces);
    const size_t whole_size[1] = {(size_t)1 << 16};
    int whole_rc = read_source(fd, size, detect, whole_size, 1, &whole);
    close(fd);

    int limited = keys.limited || pieces.limited || whole.limited;
    if (!limited) {
        /* how the decoders were fed changes nothing */
        CHECK(pieces_rc == whole_rc);
        if (whole_rc == 0)
            CHECK(pieces.len == whole.len &&
                  (whole.len == 0 || memcmp(pieces.p, whole.p, whole.len) == 0));
        /* keys come from the same bytes (a line too long fails A alone) */
        if (keys_rc == 0) CHECK(whole_rc == 0);
        if (keys_rc == 0 && opts.field == 0 && !opts.skip_empty) {
            int unterminated = whole.len > 0 && whole.p[whole.len - 1] != (opts.nul ? 0 : '\n');
            CHECK(keys.len == whole.len + (size_t)unterminated);
            CHECK(whole.len == 0 || memcmp(keys.p, whole.p, whole.len) == 0);
        }
        /* plain input is the bytes as they are */
        int gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
        int zstd = size >= 4 && memcmp(data, "\x28\xb5\x2f\xfd", 4) == 0;
        if (!detect || (!gzip && !zstd)) {
            CHECK(whole_rc == 0 && whole.len == size);
            CHECK(size == 0 || memcmp(whole.p, data, size) == 0);
        }
    }
    free(keys.p);
    free(pieces.p);
    free(whole.p);
    return 0;
}
