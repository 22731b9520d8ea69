/*
 * persist_log.c - the append-only log's file format (docs/PERSISTENCE.md,
 * "Log files"): the 32-byte file header, records (a checksummed 24-byte
 * header, the command's argv as a RESP array of bulk strings, a checksum of
 * that payload), the scanner that tells a whole record from a torn append
 * and from damage, and the creation and truncation of log files.
 */
#include <dirent.h>       /* fdopendir */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>     /* PRIu64 */
#include <limits.h>       /* PATH_MAX */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>     /* logs and manifests are read through mmap */
#include <sys/stat.h>
#include <unistd.h>

#include "persist_int.h"

static size_t dec_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

static unsigned char *put_dec(unsigned char *out, uint64_t v)
{
    size_t n = dec_len(v);
    for (size_t i = n; i > 0; i--) {
        out[i - 1] = (unsigned char)('0' + v % 10);
        v /= 10;
    }
    return out + n;
}

/* Bytes of the RESP encoding of argv: *argc CRLF ($len CRLF bytes CRLF)*. */
static uint64_t resp_size(int argc, const bkc_str *argv)
{
    uint64_t n = 1 + dec_len((uint64_t)argc) + 2;
    for (int i = 0; i < argc; i++)
        n += 1 + dec_len(argv[i].len) + 2 + argv[i].len + 2;
    return n;
}

static void resp_encode(unsigned char *out, int argc, const bkc_str *argv)
{
    *out++ = '*';
    out = put_dec(out, (uint64_t)argc);
    *out++ = '\r';
    *out++ = '\n';
    for (int i = 0; i < argc; i++) {
        *out++ = '$';
        out = put_dec(out, argv[i].len);
        *out++ = '\r';
        *out++ = '\n';
        if (argv[i].len) memcpy(out, argv[i].ptr, argv[i].len);
        out += argv[i].len;
        *out++ = '\r';
        *out++ = '\n';
    }
}

/* A decimal number ended by CRLF at p[*pos]; at most 19 digits. */
static int resp_number(const unsigned char *p, size_t n, size_t *pos,
                       uint64_t *out)
{
    size_t i = *pos, digits = 0;
    uint64_t v = 0;
    while (i < n && p[i] >= '0' && p[i] <= '9' && digits < 19) {
        v = v * 10 + (uint64_t)(p[i] - '0');
        i++;
        digits++;
    }
    if (digits == 0 || i + 2 > n || p[i] != '\r' || p[i + 1] != '\n') return -1;
    *pos = i + 2;
    *out = v;
    return 0;
}

/* Parse a payload into argv (pointing into p; *argv_out is malloc'ed).
 * The whole payload must be exactly one array of bulk strings. */
int pst_resp_decode(const unsigned char *p, size_t n, int *argc_out,
                       bkc_str **argv_out)
{
    size_t pos = 1;
    uint64_t argc;
    if (n < 4 || p[0] != '*' || resp_number(p, n, &pos, &argc) != 0) return -1;
    /* every argument takes at least 6 bytes ("$0\r\n\r\n") */
    if (argc == 0 || argc > (n - pos) / 6 || argc > INT32_MAX) return -1;
    bkc_str *argv = malloc((size_t)argc * sizeof *argv);
    if (argv == NULL) return -1;
    for (uint64_t i = 0; i < argc; i++) {
        uint64_t len;
        if (pos >= n || p[pos] != '$') goto fail;
        pos++;
        if (resp_number(p, n, &pos, &len) != 0) goto fail;
        if (len > n - pos || n - pos - len < 2) goto fail;
        argv[i].ptr = (const char *)p + pos;
        argv[i].len = (size_t)len;
        pos += (size_t)len;
        if (p[pos] != '\r' || p[pos + 1] != '\n') goto fail;
        pos += 2;
    }
    if (pos != n) goto fail;
    *argc_out = (int)argc;
    *argv_out = argv;
    return 0;
fail:
    free(argv);
    return -1;
}

/* Size of the record of argv, or 0 when the payload exceeds 4 GiB - 1. */
size_t pst_record_size(int argc, const bkc_str *argv)
{
    uint64_t payload = resp_size(argc, argv);
    if (payload > UINT32_MAX || payload + REC_OVERHEAD > SIZE_MAX) return 0;
    return (size_t)payload + REC_OVERHEAD;
}

void pst_record_encode(unsigned char *out, size_t size, uint64_t time_ms,
                          int argc, const bkc_str *argv)
{
    size_t payload = size - REC_OVERHEAD;
    pst_put32(out, REC_MAGIC);
    pst_put32(out + 4, (uint32_t)payload);
    pst_put64(out + 8, time_ms);
    pst_put64(out + 16, pst_checksum(out, 16));
    resp_encode(out + REC_HEADER_SIZE, argc, argv);
    pst_put64(out + REC_HEADER_SIZE + payload, pst_checksum(out + REC_HEADER_SIZE, payload));
}

/* Examine the record at off in the size bytes at base. On REC_TORN and
 * REC_BAD *why says what is wrong. */
rec_status pst_record_scan(const unsigned char *base, size_t size,
                              size_t off, record *r, const char **why)
{
    size_t rem = size - off;
    const unsigned char *p = base + off;
    if (rem == 0) return REC_END;
    if (rem < REC_HEADER_SIZE) {
        *why = "incomplete record header at the end of the file";
        return REC_TORN;
    }
    if (pst_get32(p) != REC_MAGIC || pst_get64(p + 16) != pst_checksum(p, 16)) {
        if (pst_all_zero(p, rem)) {
            *why = "zero-filled tail";
            return REC_TORN;
        }
        *why = "bad record header (magic or checksum)";
        return REC_BAD;
    }
    uint64_t len = pst_get32(p + 4);
    if (len + REC_OVERHEAD > rem) {
        *why = "incomplete record at the end of the file";
        return REC_TORN;
    }
    size_t total = (size_t)len + REC_OVERHEAD;
    if (pst_get64(p + REC_HEADER_SIZE + len) != pst_checksum(p + REC_HEADER_SIZE, (size_t)len)) {
        if (total == rem || pst_all_zero(p + total, rem - total)) {
            *why = "checksum mismatch in the last record";
            return REC_TORN;
        }
        *why = "record checksum mismatch";
        return REC_BAD;
    }
    r->time_ms = pst_get64(p + 8);
    r->payload = p + REC_HEADER_SIZE;
    r->payload_len = (size_t)len;
    r->size = total;
    return REC_OK;
}

void pst_log_header_encode(unsigned char *h, uint64_t gen)
{
    memcpy(h, LOG_MAGIC, 8);
    pst_put32(h + 8, LOG_VERSION);
    pst_put32(h + 12, 0);
    pst_put64(h + 16, gen);
    pst_put64(h + 24, pst_checksum(h, 24));
}

int pst_log_header_check(const unsigned char *h, uint64_t gen)
{
    return memcmp(h, LOG_MAGIC, 8) == 0 && pst_get32(h + 8) == LOG_VERSION &&
           pst_get64(h + 16) == gen && pst_get64(h + 24) == pst_checksum(h, 24);
}

int pst_log_create(bks_persist *p, uint64_t gen, int *fd_out, char *err,
                      size_t errlen)
{
    char name[64];
    unsigned char h[LOG_HEADER_SIZE];
    pst_log_name(name, sizeof name, gen);
    pst_log_header_encode(h, gen);
    int fd = openat(p->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0 || pst_write_all(fd, h, sizeof h) != 0 || fdatasync(fd) != 0 ||
        fsync(p->dirfd) != 0) {
        pst_errf(err, errlen, "%s/%s: %s", p->dir, name, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlinkat(p->dirfd, name, 0);
        }
        return -1;
    }
    *fd_out = fd;
    return 0;
}

/* Cut a log at off (durably); off = LOG_HEADER_SIZE empties it. */
int pst_log_truncate(bks_persist *p, uint64_t gen, uint64_t off, char *err,
                        size_t errlen)
{
    char name[64];
    pst_log_name(name, sizeof name, gen);
    int fd = openat(p->dirfd, name, O_RDWR | O_CLOEXEC);
    int rc = 0;
    if (fd < 0) {
        rc = -1;
    } else {
        if (off < LOG_HEADER_SIZE) {
            unsigned char h[LOG_HEADER_SIZE];
            pst_log_header_encode(h, gen);
            if (pwrite(fd, h, sizeof h, 0) != (ssize_t)sizeof h) rc = -1;
            off = LOG_HEADER_SIZE;
        }
        if (rc == 0 && (ftruncate(fd, (off_t)off) != 0 || fsync(fd) != 0)) rc = -1;
        close(fd);
    }
    if (rc != 0) pst_errf(err, errlen, "%s/%s: cannot truncate: %s", p->dir, name, strerror(errno));
    return rc;
}


/* --repair-aof: cut log gen at off (0: a bad header, the whole file goes
 * and a fresh header replaces it). Says first what goes (file, offset,
 * whole records found in the cut part, bytes), keeps those bytes in
 * <log>.cut-<unix seconds> (fsynced), then truncates. */
int pst_log_cut(bks_persist *p, uint64_t gen, uint64_t off, const char *why, char *err,
                size_t errlen)
{
    char name[64], path[PATH_MAX], copy[PATH_MAX];
    pst_log_name(name, sizeof name, gen);
    snprintf(path, sizeof path, "%s/%s", p->dir, name);
    int cfd = -1;
    size_t size;
    const unsigned char *base;
    if (pst_map_file(p->dirfd, name, path, &base, &size, err, errlen) != 0) return -1;
    if (off > size) off = size;
    /* Whole records in the part that goes (a bad header may hide good ones). */
    uint64_t records = 0;
    size_t at = off < LOG_HEADER_SIZE ? LOG_HEADER_SIZE : (size_t)off;
    for (; at < size;) {
        record r;
        const char *w;
        if (size - at < REC_HEADER_SIZE || pst_get32(base + at) != REC_MAGIC ||
            pst_record_scan(base, size, at, &r, &w) != REC_OK) {
            /* skip damage: look for the next record header, byte by byte */
            at++;
            continue;
        }
        records++;
        at += r.size;
    }
    size_t bytes = size - (size_t)off;
    int rc = -1;
    long long now = (long long)(pst_wall_ms() / 1000);
    pst_errf(copy, sizeof copy, "%s.cut-%lld", path, now);
    bks_log(BKS_LOG_WARNING, "persist: --repair-aof: file %s offset %" PRIu64 ": %s: cutting "
            "%zu bytes holding %" PRIu64 " whole records%s; the cut part is kept in %s",
            path, off, why, bytes, records,
            off < LOG_HEADER_SIZE ? " (the whole file; a fresh header replaces it)" : "",
            bytes > 0 ? copy : "(nothing: 0 bytes)");
    if (bytes > 0) {
        for (int i = 1; (cfd = open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0 &&
                        errno == EEXIST && i < 100; i++)
            pst_errf(copy, sizeof copy, "%s.cut-%lld-%d", path, now, i);
        if (cfd < 0 || pst_write_all(cfd, base + off, bytes) != 0 || fsync(cfd) != 0 ||
            fsync(p->dirfd) != 0) {
            pst_errf(err, errlen, "%s: cannot keep the cut part: %s (nothing was cut)", copy,
                     strerror(errno));
            goto done;
        }
    }
    rc = pst_log_truncate(p, gen, off, err, errlen);
done:
    if (cfd >= 0) close(cfd);
    if (base != NULL) munmap((void *)base, size);
    return rc;
}
