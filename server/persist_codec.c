/*
 * persist_codec.c - the byte-level helpers every persistence file uses:
 * little-endian fields, the one checksum (the low 64 bits of bk_hash_key,
 * XXH3-128, with PERSIST_SEED), clocks, file names of the data directory,
 * whole writes, and the readers of checksummed manifest frames and their
 * fields. Nothing here knows about generations or the keyspace.
 */
#include <stdarg.h>
#include <time.h>
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

/* Little-endian fields: one load or store where the machine is
 * little-endian, bytes one by one elsewhere. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#  define PST_LE 1
#else
#  define PST_LE 0
#endif

/* The low n bytes of v at p, least significant first. */
static inline void put_le(unsigned char *p, uint64_t v, int n)
{
    if (PST_LE) {
        memcpy(p, &v, (size_t)n);
        return;
    }
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The n bytes at p, least significant first. */
static inline uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    if (PST_LE) {
        memcpy(&v, p, (size_t)n);
        return v;
    }
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

void pst_put32(unsigned char *p, uint32_t v)
{
    put_le(p, v, 4);
}

void pst_put64(unsigned char *p, uint64_t v)
{
    put_le(p, v, 8);
}

uint32_t pst_get32(const unsigned char *p)
{
    return (uint32_t)get_le(p, 4);
}

uint64_t pst_get64(const unsigned char *p)
{
    return get_le(p, 8);
}

uint64_t pst_checksum(const void *p, size_t n)
{
    return bk_hash_key(p, n, PERSIST_SEED).lo;
}

uint64_t pst_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t pst_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* snprintf for messages: truncation is fine (the header tells the compiler). */
void pst_errf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

int pst_all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0) return 0;
    return 1;
}

/* In pieces of at most 64 MiB, so that the tick's watchdog sees a
 * snapshot child's bytes written (/proc/<pid>/io wchar) move while it
 * writes a large value, rather than once at the end of one long call. */
#define WRITE_PIECE ((size_t)64 << 20)

int pst_write_all(int fd, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n > WRITE_PIECE ? WRITE_PIECE : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int pst_map_file(int at, const char *name, const char *path, const unsigned char **base,
                 size_t *size, char *err, size_t errlen)
{
    int fd = openat(at, name, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        pst_errf(err, errlen, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    *size = (size_t)st.st_size;
    *base = NULL;
    if (*size > 0) {
        void *m = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            pst_errf(err, errlen, "%s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        *base = m;
    }
    close(fd);
    return 0;
}

void pst_log_name(char *buf, size_t cap, uint64_t gen)
{
    snprintf(buf, cap, "appendonly-%" PRIu64 ".log", gen);
}

void pst_snap_name(char *buf, size_t cap, uint64_t gen)
{
    snprintf(buf, cap, "snap-%" PRIu64, gen);
}

/* Remove the directory name (in dirfd) and the files in it. */
void pst_remove_tree_at(int at, const char *name)
{
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        DIR *d = fdopendir(fd);
        if (d == NULL) {
            close(fd);
        } else {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
                unlinkat(dirfd(d), e->d_name, 0);
            }
            closedir(d);
        }
    }
    unlinkat(at, name, AT_REMOVEDIR);
}

/* "name-<digits>suffix" -> the number; 0 when name has another shape. */
uint64_t pst_parse_gen_name(const char *name, const char *prefix,
                               const char *suffix)
{
    size_t pl = strlen(prefix), sl = strlen(suffix), n = strlen(name);
    if (n <= pl + sl || strncmp(name, prefix, pl) != 0 ||
        strcmp(name + n - sl, suffix) != 0)
        return 0;
    uint64_t v = 0;
    for (size_t i = pl; i < n - sl; i++) {
        if (name[i] < '0' || name[i] > '9' || v > UINT64_MAX / 10 - 1) return 0;
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    return v;
}

int pst_frame_read(const unsigned char *base, size_t size, size_t *off,
                      frame *f)
{
    if (size - *off < FRAME_OVERHEAD) return -1;
    const unsigned char *p = base + *off;
    uint64_t len = pst_get32(p + 4);
    if (len > size - *off - FRAME_OVERHEAD) return -1;
    if (pst_get64(p + 8 + len) != pst_checksum(p, (size_t)len + 8)) return -1;
    f->magic = pst_get32(p);
    f->body = p + 8;
    f->len = (size_t)len;
    *off += (size_t)len + FRAME_OVERHEAD;
    return 0;
}

/* The next n-byte field of f, or 0 with f->bad set when fewer bytes are
 * left. */
static uint64_t fd_le(fields *f, int n)
{
    if (f->n - f->pos < (size_t)n) {
        f->bad = 1;
        return 0;
    }
    f->pos += (size_t)n;
    return get_le(f->p + f->pos - n, n);
}

uint32_t pst_fd_u32(fields *f)
{
    return (uint32_t)fd_le(f, 4);
}

uint64_t pst_fd_u64(fields *f)
{
    return fd_le(f, 8);
}

