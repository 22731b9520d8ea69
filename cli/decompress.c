/*
 * decompress.c - key input that may be gzip- or zstd-compressed.
 *
 * Crawl logs and blocklists often arrive as .gz or .zst files. Every
 * subcommand that reads keys reads them through a source, which looks at
 * the first bytes of each input (file or standard input) and decompresses
 * when they are a magic number:
 *
 *   1f 8b         gzip (RFC 1952), inflated by zlib; several members one
 *                 after the other (cat a.gz b.gz) are read as one stream
 *   28 b5 2f fd   zstd (RFC 8878), by libzstd's streaming decoder; several
 *                 frames likewise
 *
 * Anything else is read as it is. The name of the file plays no part, so a
 * compressed file without its suffix, or piped through standard input, is
 * still recognised; --no-decompress turns detection off (the bytes are the
 * keys). A plain text file cannot start with either magic: 0x8b and 0xb5
 * are not ASCII, and 0x1f / 0x28 followed by them is not UTF-8 text either.
 *
 * The detection reads only while the bytes so far could still begin a
 * magic, so a terminal typing keys into `bloomkit check` is not kept
 * waiting for four bytes. A damaged or truncated stream is an error naming
 * the input and the format; nothing decompressed so far is lost (keys
 * before the damage were already handed on).
 *
 * Progress counts the compressed bytes consumed, which is what the input
 * files' sizes add up to.
 */
#include <errno.h>   /* errno, EINTR */
#include <stdlib.h>  /* calloc, free */
#include <string.h>  /* memcpy, strerror */
#include <sys/stat.h> /* fstat, S_ISREG */
#include <unistd.h>  /* read */
#include <zlib.h>    /* inflate: zlib1g-dev */
#include <zstd.h>    /* ZSTD_decompressStream: libzstd-dev */

#include "cli.h"

#define IN_CAP ((size_t)256 << 10) /* compressed bytes read at a time */

enum kind { PLAIN, GZIP, ZSTD };

/* The largest zstd frame header (RFC 8878 3.1.1): magic 4, descriptor 1,
 * window 1, dictionary id 4, content size 8. */
#define ZSTD_HEADER_MAX 18

static const unsigned char gzip_magic[] = {0x1f, 0x8b};
static const unsigned char zstd_magic[] = {0x28, 0xb5, 0x2f, 0xfd};

struct cli_source {
    int fd;
    const char *name;
    enum kind kind;
    unsigned char head[4];      /* bytes read while detecting */
    size_t head_len, head_pos;  /* PLAIN: head[head_pos..head_len) unread */
    int eof;                    /* fd returned 0 */
    int regular;                /* fd is a regular file: reads never wait */
    uint64_t consumed;          /* bytes read from fd */
    unsigned char *in;          /* compressed input buffer */
    size_t in_pos, in_len;
    int ended;                  /* gzip: a member ended; zstd: a frame did */
    z_stream z;
    int z_ready;
    ZSTD_DStream *zs;
    /* zstd: the first bytes of the frame being decoded (its header) and
     * the bytes it has produced, to hold it to its content size */
    unsigned char frame_head[ZSTD_HEADER_MAX];
    size_t frame_head_len;
    uint64_t frame_out;
};

static ssize_t read_fd(cli_source *s, void *buf, size_t cap)
{
    ssize_t got;
    do got = read(s->fd, buf, cap);
    while (got < 0 && errno == EINTR);
    if (got < 0) {
        cli_error("%s: %s", s->name, strerror(errno));
        return -1;
    }
    if (got == 0) s->eof = 1;
    s->consumed += (uint64_t)got;
    return got;
}

/* Whether head[0..len) is a prefix of magic m. */
static int prefix_of(const unsigned char *head, size_t len,
                     const unsigned char *m, size_t mlen)
{
    if (len > mlen) len = mlen;
    return memcmp(head, m, len) == 0;
}

int cli_source_open(cli_source **out, int fd, const char *name, int detect)
{
    cli_source *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        return -1;
    }
    s->fd = fd;
    s->name = name;
    s->kind = PLAIN;
    struct stat st;
    s->regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    *out = s;
    if (!detect) return 0;
    /* Read while the bytes could still be a magic number. */
    while (s->head_len < sizeof(zstd_magic) && !s->eof) {
        int maybe_gzip = prefix_of(s->head, s->head_len, gzip_magic, 2) &&
                         s->head_len < 2;
        int maybe_zstd = prefix_of(s->head, s->head_len, zstd_magic, 4);
        if (!maybe_gzip && !maybe_zstd) break;
        ssize_t got = read_fd(s, s->head + s->head_len,
                              sizeof(s->head) - s->head_len);
        if (got < 0) return -1;
        s->head_len += (size_t)got;
        if (s->head_len >= 2 && memcmp(s->head, gzip_magic, 2) == 0) break;
    }
    if (s->head_len >= 2 && memcmp(s->head, gzip_magic, 2) == 0)
        s->kind = GZIP;
    else if (s->head_len == 4 && memcmp(s->head, zstd_magic, 4) == 0)
        s->kind = ZSTD;
    if (s->kind == PLAIN) return 0;
    s->in = malloc(IN_CAP);
    if (s->in == NULL) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        return -1;
    }
    memcpy(s->in, s->head, s->head_len);
    s->in_len = s->head_len;
    s->head_len = 0;
    if (s->kind == GZIP) {
        /* 15 + 16: a 32 KiB window, gzip wrapper only */
        if (inflateInit2(&s->z, 15 + 16) != Z_OK) {
            cli_error("%s: cannot start gzip decompression: %s", name,
                      bk_strerror(BK_ENOMEM));
            return -1;
        }
        s->z_ready = 1;
    } else {
        s->zs = ZSTD_createDStream();
        if (s->zs == NULL) {
            cli_error("%s: cannot start zstd decompression: %s", name,
                      bk_strerror(BK_ENOMEM));
            return -1;
        }
    }
    return 0;
}

void cli_source_close(cli_source *s)
{
    if (s == NULL) return;
    if (s->z_ready) inflateEnd(&s->z);
    ZSTD_freeDStream(s->zs);
    free(s->in);
    free(s);
}

uint64_t cli_source_consumed(const cli_source *s) { return s->consumed; }

/* Refill the compressed buffer when it is empty. Returns 0 or -1. */
static int refill(cli_source *s)
{
    if (s->in_pos < s->in_len || s->eof) return 0;
    ssize_t got = read_fd(s, s->in, IN_CAP);
    if (got < 0) return -1;
    s->in_pos = 0;
    s->in_len = (size_t)got;
    return 0;
}

static const char *kind_name(const cli_source *s)
{
    return s->kind == GZIP ? "gzip" : "zstd";
}

static ssize_t truncated(const cli_source *s)
{
    cli_error("%s: %s data is truncated (the file ends inside a compressed "
              "stream: an interrupted download or copy?)", s->name,
              kind_name(s));
    return -1;
}

static ssize_t corrupt(const cli_source *s, const char *why)
{
    cli_error("%s: %s data is corrupt (%s); --no-decompress reads the bytes "
              "as they are", s->name, kind_name(s), why);
    return -1;
}

static ssize_t read_gzip(cli_source *s, unsigned char *buf, size_t cap)
{
    size_t produced = 0;
    while (produced == 0) {
        if (refill(s) != 0) return -1;
        if (s->in_pos == s->in_len) { /* end of input */
            if (s->ended) return 0;
            return truncated(s);
        }
        if (s->ended) { /* another member follows */
            if (inflateReset(&s->z) != Z_OK) return corrupt(s, "reset");
            s->ended = 0;
        }
        s->z.next_in = s->in + s->in_pos;
        s->z.avail_in = (uInt)(s->in_len - s->in_pos);
        s->z.next_out = buf + produced;
        s->z.avail_out = (uInt)(cap - produced);
        int rc = inflate(&s->z, Z_NO_FLUSH);
        s->in_pos = s->in_len - s->z.avail_in;
        produced = cap - s->z.avail_out;
        if (rc == Z_STREAM_END) s->ended = 1;
        else if (rc == Z_NEED_DICT || rc == Z_DATA_ERROR)
            return corrupt(s, s->z.msg ? s->z.msg : "invalid data");
        else if (rc == Z_MEM_ERROR)
            return corrupt(s, bk_strerror(BK_ENOMEM));
        else if (rc != Z_OK && rc != Z_BUF_ERROR)
            return corrupt(s, "inflate failed");
    }
    return (ssize_t)produced;
}

/* One call of the streaming decoder; 0, or -1 after printing the problem.
 * A call stops at the end of a frame, so the bytes it consumed belong to
 * one frame. libzstd's streaming decoder does not compare a frame's
 * content size with what it produced when the last block is empty (its
 * one-pass path, taken when the whole frame and room for its content are
 * at hand, does), so whether such a damaged frame was refused would depend
 * on how much was read: the comparison is made here for every frame. */
static int zstd_step(cli_source *s, ZSTD_inBuffer *in, ZSTD_outBuffer *out)
{
    size_t in_start = in->pos, out_start = out->pos;
    size_t rc = ZSTD_decompressStream(s->zs, out, in);
    if (ZSTD_isError(rc)) return (int)corrupt(s, ZSTD_getErrorName(rc));
    size_t used = in->pos - in_start;
    size_t room = ZSTD_HEADER_MAX - s->frame_head_len;
    if (used > room) used = room;
    memcpy(s->frame_head + s->frame_head_len, (const char *)in->src + in_start, used);
    s->frame_head_len += used;
    s->frame_out += out->pos - out_start;
    /* 0: a frame is complete and flushed; else more input is due */
    s->ended = rc == 0;
    if (s->ended) {
        /* skippable frames have a content size of 0, like their output */
        unsigned long long want = ZSTD_getFrameContentSize(s->frame_head, s->frame_head_len);
        if (want != ZSTD_CONTENTSIZE_UNKNOWN && want != s->frame_out)
            return (int)corrupt(s, want == ZSTD_CONTENTSIZE_ERROR
                                       ? "frame header unreadable"
                                       : "frame content size mismatch");
        s->frame_head_len = 0;
        s->frame_out = 0;
    }
    return 0;
}

static ssize_t read_zstd(cli_source *s, unsigned char *buf, size_t cap)
{
    size_t produced = 0;
    while (produced == 0) {
        if (refill(s) != 0) return -1;
        ZSTD_inBuffer in = {s->in, s->in_len, s->in_pos};
        ZSTD_outBuffer out = {buf, cap, 0};
        if (in.pos == in.size) {
            /* End of input: flush what the decoder holds; a frame not
             * finished is a truncated file. */
            if (s->ended) return 0;
            if (zstd_step(s, &in, &out) != 0) return -1;
            if (out.pos > 0) return (ssize_t)out.pos;
            if (s->ended) return 0;
            return truncated(s);
        }
        if (zstd_step(s, &in, &out) != 0) return -1;
        s->in_pos = in.pos;
        produced = out.pos;
    }
    return (ssize_t)produced;
}

ssize_t cli_source_read(cli_source *s, void *buf, size_t cap)
{
    if (cap == 0) return 0;
    switch (s->kind) {
    case GZIP: return read_gzip(s, buf, cap);
    case ZSTD: return read_zstd(s, buf, cap);
    case PLAIN: break;
    }
    if (s->head_pos < s->head_len) {
        size_t n = s->head_len - s->head_pos;
        if (n > cap) n = cap;
        memcpy(buf, s->head + s->head_pos, n);
        s->head_pos += n;
        /* A file's next bytes come with the head, or the caller's first
         * batch would be the one or two keys of 4 bytes (a pipe or a
         * terminal is not read on: it could wait for more typing). */
        if (!s->regular || n == cap || s->eof) return (ssize_t)n;
        ssize_t more = read_fd(s, (unsigned char *)buf + n, cap - n);
        return more < 0 ? -1 : (ssize_t)n + more;
    }
    if (s->eof) return 0;
    return read_fd(s, buf, cap);
}
