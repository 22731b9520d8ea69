/*
 * faultshim.c - an LD_PRELOAD library for the server's fault tests
 * (tests/server/test_faults.py): disk faults on the append-only log, and a
 * record of how much of each log has been made durable.
 *
 * Only descriptors whose file is named appendonly-<n>.log are touched (the
 * name is read from /proc/self/fd), so snapshots, CURRENT and sockets work
 * normally: a log that fails while the rest of the disk works.
 *
 * BKS_FAULT_CTL=<file>: before each write/pwrite/fsync/fdatasync on a log,
 * the file is read. Absent or empty: no fault. Otherwise its words say
 * what fails and how: "write ENOSPC", "fsync EIO" (fsync covers fdatasync),
 * or both on separate lines. The test writes and removes it to start and
 * clear a fault while the server runs.
 *
 * BKS_SYNC_DIR=<dir>: after each fsync/fdatasync of a log that succeeds,
 * <dir>/<log name>.synced is rewritten with the log's size at that moment:
 * what a power loss could not take (the data the last successful sync
 * covered). The power-loss test cuts each log back to that length.
 *
 * Built a second time with BKS_SHIM_MALLOC (libbks_oomshim.so, for
 * tests/server/test_oom_faults.py): allocation failures. A control file
 * line "malloc <p>" makes p percent of the malloc / calloc / realloc /
 * posix_memalign / aligned_alloc calls of every thread fail with ENOMEM
 * (realloc keeps the old block, as the real one does), for as long as it
 * says so. The file is read again at most every CTL_POLL_NS (a malloc must
 * stay cheap), with raw syscalls. The real allocator is glibc's own
 * (__libc_malloc and friends): no dlsym, which allocates itself. Nothing
 * fails before the library's constructor has run (the loader, libc's
 * start-up). Not for sanitized servers: their allocator would be bypassed.
 *
 * Not part of the product; built only for the tests.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The build hides symbols by default; these must be seen to interpose. */
#define SHIM_EXPORT __attribute__((visibility("default")))

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef int (*sync_fn)(int);

/* The log's name for fd, or NULL when fd is not a log. */
static const char *log_name(int fd, char *buf, size_t cap)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buf, cap - 1);
    if (n <= 0) return NULL;
    buf[n] = '\0';
    const char *base = strrchr(buf, '/');
    base = base ? base + 1 : buf;
    size_t bl = strlen(base);
    if (strncmp(base, "appendonly-", 11) != 0 || bl < 16 || strcmp(base + bl - 4, ".log") != 0)
        return NULL;
    return base;
}

/* The control file ($BKS_FAULT_CTL) into text, NUL-terminated: 1, or 0
 * when there is none or it is empty. Read with raw syscalls: nothing here
 * recurses into the shimmed calls. */
static int read_ctl(char *text, size_t size)
{
    const char *ctl = getenv("BKS_FAULT_CTL");
    if (ctl == NULL) return 0;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, ctl, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = syscall(SYS_read, fd, text, size - 1);
    syscall(SYS_close, fd);
    if (n <= 0) return 0;
    text[n] = '\0';
    return 1;
}

/* The errno the control file orders for this operation ("write" or
 * "fsync"), or 0. */
static int fault_for(const char *op)
{
    char text[256];
    if (!read_ctl(text, sizeof text)) return 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char what[32], err[32];
        if (sscanf(line, "%31s %31s", what, err) != 2 || strcmp(what, op) != 0) continue;
        if (strcmp(err, "ENOSPC") == 0) return ENOSPC;
        if (strcmp(err, "EIO") == 0) return EIO;
        if (strcmp(err, "EROFS") == 0) return EROFS;
    }
    return 0;
}

static void record_synced(int fd, const char *name)
{
    const char *dir = getenv("BKS_SYNC_DIR");
    struct stat st;
    if (dir == NULL || fstat(fd, &st) != 0) return;
    char path[PATH_MAX], line[32];
    snprintf(path, sizeof path, "%s/%s.synced", dir, name);
    int n = snprintf(line, sizeof line, "%020lld\n", (long long)st.st_size);
    int out = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (out < 0) return;
    syscall(SYS_pwrite64, out, line, (size_t)n, (off_t)0);
    syscall(SYS_close, out);
}

/* Whether a write to fd must fail: fd is an AOF log and the control file
 * orders a "write" fault; errno is then set to the fault. */
static int write_fails(int fd)
{
    char name[PATH_MAX];
    int e;
    if (log_name(fd, name, sizeof name) != NULL && (e = fault_for("write")) != 0) {
        errno = e;
        return 1;
    }
    return 0;
}

SHIM_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    static write_fn real;
    if (real == NULL) real = (write_fn)dlsym(RTLD_NEXT, "write");
    if (write_fails(fd)) return -1;
    return real(fd, buf, n);
}

SHIM_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    static pwrite_fn real;
    if (real == NULL) real = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite");
    if (write_fails(fd)) return -1;
    return real(fd, buf, n, off);
}

static int do_sync(int fd, sync_fn *real, const char *sym)
{
    if (*real == NULL) *real = (sync_fn)dlsym(RTLD_NEXT, sym);
    char buf[PATH_MAX];
    const char *name = log_name(fd, buf, sizeof buf);
    int e;
    if (name != NULL && (e = fault_for("fsync")) != 0) {
        errno = e;
        return -1;
    }
    int rc = (*real)(fd);
    if (rc == 0 && name != NULL) record_synced(fd, name);
    return rc;
}

SHIM_EXPORT int fsync(int fd)
{
    static sync_fn real;
    return do_sync(fd, &real, "fsync");
}

SHIM_EXPORT int fdatasync(int fd)
{
    static sync_fn real;
    return do_sync(fd, &real, "fdatasync");
}

#ifdef BKS_SHIM_MALLOC
/*==========================================================================
 * Allocation failures
 *==========================================================================*/
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define CTL_POLL_NS 20000000LL   /* the control file is read every 20 ms */

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static _Atomic int oom_ready;            /* the constructor ran */
static _Atomic int oom_percent;          /* what the control file says */
static _Atomic long long oom_checked_ns; /* when it was last read */
static _Atomic unsigned long long oom_failed;
static __thread __attribute__((tls_model("initial-exec"))) uint64_t oom_rng;

__attribute__((constructor)) static void oom_init(void) { atomic_store(&oom_ready, 1); }

/* The percentage of "malloc <p>" in the control file, 0 when absent. */
static int oom_read_ctl(void)
{
    char text[256];
    if (!read_ctl(text, sizeof text)) return 0;
    for (const char *line = text; line != NULL; line = strchr(line, '\n')) {
        if (*line == '\n') line++;
        if (strncmp(line, "malloc ", 7) != 0) continue;
        int p = 0;
        for (const char *d = line + 7; *d >= '0' && *d <= '9' && p <= 100; d++)
            p = p * 10 + (*d - '0');
        return p > 100 ? 100 : p;
    }
    return 0;
}

/* Whether this allocation fails. */
static int oom_now(void)
{
    if (!atomic_load_explicit(&oom_ready, memory_order_relaxed)) return 0;
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0) return 0;   /* vDSO: no syscall */
    long long now = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    long long last = atomic_load_explicit(&oom_checked_ns, memory_order_relaxed);
    if (now - last >= CTL_POLL_NS &&
        atomic_compare_exchange_strong(&oom_checked_ns, &last, now))
        atomic_store(&oom_percent, oom_read_ctl());
    int p = atomic_load_explicit(&oom_percent, memory_order_relaxed);
    if (p == 0) return 0;
    if (oom_rng == 0) oom_rng = ((uint64_t)now ^ ((uint64_t)syscall(SYS_gettid) << 32)) | 1;
    oom_rng ^= oom_rng << 13;   /* xorshift64 */
    oom_rng ^= oom_rng >> 7;
    oom_rng ^= oom_rng << 17;
    if (oom_rng % 100 >= (uint64_t)p) return 0;
    atomic_fetch_add_explicit(&oom_failed, 1, memory_order_relaxed);
    errno = ENOMEM;
    return 1;
}

SHIM_EXPORT void *malloc(size_t n)
{
    return oom_now() ? NULL : __libc_malloc(n);
}

SHIM_EXPORT void *calloc(size_t n, size_t size)
{
    return oom_now() ? NULL : __libc_calloc(n, size);
}

SHIM_EXPORT void *realloc(void *p, size_t n)
{
    if (p != NULL && n == 0) return __libc_realloc(p, n);   /* a free */
    return oom_now() ? NULL : __libc_realloc(p, n);
}

SHIM_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
    if (oom_now()) return ENOMEM;
    void *p = __libc_memalign(align, n);
    if (p == NULL) return ENOMEM;
    *out = p;
    return 0;
}

SHIM_EXPORT void *aligned_alloc(size_t align, size_t n)
{
    return oom_now() ? NULL : __libc_memalign(align, n);
}
#endif /* BKS_SHIM_MALLOC */
