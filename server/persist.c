/*
 * persist.c - durability for bloomkit-server: snapshots plus an append-only
 * log of writes, kept in one data directory (docs/PERSISTENCE.md).
 *
 * The directory holds generations. Generation G is a snapshot, snap-G/,
 * holding the keyspace as it was at the instant appendonly-G.log was
 * started, and that log, holding every write made since. CURRENT names the
 * snapshot to load and the ordered list of logs to replay on top of it:
 *
 *     bloomkit-data 1
 *     snapshot 7            (0: none, start from an empty keyspace)
 *     log 7
 *     log 8                 (more than one while a snapshot is being made)
 *     check 1f0e...         (checksum of the lines above)
 *
 * CURRENT is only ever replaced whole (temporary file, fsync, rename, fsync
 * of the directory), and every file it names is complete and fsynced before
 * it is named, so a crash at any point leaves a CURRENT that describes a
 * loadable state holding every acknowledged write. Files that CURRENT does
 * not name are debris of an interrupted step and are removed at start-up.
 *
 * The log. A log file is a 32-byte header (magic, version, generation,
 * checksum) followed by records:
 *
 *     u32 magic "BKR1" | u32 payload length | u64 time (ms since the epoch)
 *     u64 checksum of those 16 bytes
 *     payload: the command's argv encoded as a RESP array of bulk strings
 *     u64 checksum of the payload
 *
 * Checksums are the low 64 bits of bk_hash_key (XXH3-128) with a fixed
 * seed. The header has its own checksum so that a damaged length is never
 * mistaken for a record that runs past the end of the file. The time is the
 * one the command ran at: replay hands it to the command as ctx->now_ms, so
 * time-window filters (and the host's expiry) replay exactly.
 *
 * Appending (bks_persist_log) is group commit: a writer encodes its record,
 * appends it to a shared buffer under the log mutex, and then either waits
 * or, when nobody is writing, becomes the leader: it takes the whole buffer,
 * write()s it (and with appendfsync always fdatasyncs) outside the mutex and
 * wakes the others. Every writer returns only once its record has reached
 * the file (always: the disk), so a kill -9 loses nothing that was
 * acknowledged in any mode; everysec's background thread fdatasyncs once a
 * second, bounding what a power loss can take.
 *
 * Reading a log: a record that is incomplete at the end of the last log, or
 * whose checksum fails at the very end of it, or a zero-filled tail, is a
 * write torn by the crash: it was never acknowledged, so it is dropped (the
 * file is truncated) with a warning. Anything else (a bad record with data
 * after it, any damage in a log that is not the last) stops start-up with
 * "file F offset N: why", unless repair_aof truncates there (and empties
 * the later logs).
 *
 * Snapshots. BGSAVE (and automatic compaction): create appendonly-(G+1).log,
 * list it in CURRENT after the live log, pause the server, move appends to
 * the new log, fork, resume. The child writes snap-(G+1)/ - a manifest of
 * checksummed frames, one per key (name, expiry, and either the value as
 * one bkc_value_encode container following the frame, or, for a value
 * holding a filter larger than map_threshold, its settings and one file
 * <n>.bkf per large filter, which start-up maps copy-on-write) - fsyncs
 * everything and exits. bks_persist_tick reaps it and replaces CURRENT with
 * "snapshot G+1, log G+1", then deletes the old
 * generation. If the child fails, CURRENT still lists the old snapshot and
 * both logs, which is exactly the state. SAVE does the same in the calling
 * thread with the server paused throughout.
 *
 * The fork child runs no code of the server's beyond the keyspace walk: it
 * takes no lock, calls no libuv and no bks_log (its error message travels
 * back through a pipe), and ends with _exit.
 */
#include <dirent.h>       /* fdopendir: removing debris */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>     /* PRIu64 */
#include <limits.h>       /* PATH_MAX, PIPE_BUF */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>     /* flock: one server per data directory */
#include <sys/mman.h>     /* logs and manifests are read through mmap */
#include <sys/prctl.h>    /* PR_SET_PDEATHSIG: the child dies with the parent */
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server.h"
#include "server_int.h" /* bks_execute: replaying the host's own commands */

/*==========================================================================
 * Formats
 *==========================================================================*/

#define PERSIST_SEED UINT64_C(0x626B2D7065727369) /* "bk-persi" */

#define LOG_MAGIC "\x89" "BKLOG\r\n"     /* 8 bytes */
#define LOG_VERSION 1u
#define LOG_HEADER_SIZE 32u              /* magic, version, 0, gen, checksum */

#define REC_MAGIC 0x31524B42u            /* "BKR1" little-endian */
#define REC_HEADER_SIZE 24u
#define REC_OVERHEAD 32u                 /* header + payload checksum */

#define MAN_MAGIC_HEAD 0x484D4B42u       /* "BKMH" */
#define MAN_MAGIC_KEY 0x4B4D4B42u        /* "BKMK" */
#define MAN_MAGIC_END 0x454D4B42u        /* "BKME" */
#define MAN_VERSION 1u
#define FRAME_OVERHEAD 16u               /* magic, length, checksum */
#define KEY_INLINE 1u                    /* value as one bkc_value_encode container */
#define KEY_SPLIT 2u                     /* settings + per-filter images or files */

#define CURRENT_MAGIC "bloomkit-data 1"

/* Backoff before an automatic snapshot is retried after a failure. */
#define RETRY_MS 5000u

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint64_t checksum(const void *p, size_t n)
{
    return bk_hash_key(p, n, PERSIST_SEED).lo;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* snprintf for messages: truncation is fine, and the compiler is told so. */
static void errf(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void errf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0) return 0;
    return 1;
}

/*==========================================================================
 * Log records: RESP payload, framing, scanning
 *==========================================================================*/

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
static int resp_decode(const unsigned char *p, size_t n, int *argc_out,
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
static size_t record_size(int argc, const bkc_str *argv)
{
    uint64_t payload = resp_size(argc, argv);
    if (payload > UINT32_MAX || payload + REC_OVERHEAD > SIZE_MAX) return 0;
    return (size_t)payload + REC_OVERHEAD;
}

static void record_encode(unsigned char *out, size_t size, uint64_t time_ms,
                          int argc, const bkc_str *argv)
{
    size_t payload = size - REC_OVERHEAD;
    put32(out, REC_MAGIC);
    put32(out + 4, (uint32_t)payload);
    put64(out + 8, time_ms);
    put64(out + 16, checksum(out, 16));
    resp_encode(out + REC_HEADER_SIZE, argc, argv);
    put64(out + REC_HEADER_SIZE + payload, checksum(out + REC_HEADER_SIZE, payload));
}

typedef enum rec_status {
    REC_OK,    /* a whole, intact record */
    REC_END,   /* clean end of file */
    REC_TORN,  /* damage that runs to the end of the file: a torn append */
    REC_BAD    /* damage followed by other data */
} rec_status;

typedef struct record {
    uint64_t time_ms;
    const unsigned char *payload;
    size_t payload_len;
    size_t size;               /* bytes of the whole record */
} record;

/* Examine the record at off in the size bytes at base. On REC_TORN and
 * REC_BAD *why says what is wrong. */
static rec_status record_scan(const unsigned char *base, size_t size,
                              size_t off, record *r, const char **why)
{
    size_t rem = size - off;
    const unsigned char *p = base + off;
    if (rem == 0) return REC_END;
    if (rem < REC_HEADER_SIZE) {
        *why = "incomplete record header at the end of the file";
        return REC_TORN;
    }
    if (get32(p) != REC_MAGIC || get64(p + 16) != checksum(p, 16)) {
        if (all_zero(p, rem)) {
            *why = "zero-filled tail";
            return REC_TORN;
        }
        *why = "bad record header (magic or checksum)";
        return REC_BAD;
    }
    uint64_t len = get32(p + 4);
    if (len + REC_OVERHEAD > rem) {
        *why = "incomplete record at the end of the file";
        return REC_TORN;
    }
    size_t total = (size_t)len + REC_OVERHEAD;
    if (get64(p + REC_HEADER_SIZE + len) != checksum(p + REC_HEADER_SIZE, (size_t)len)) {
        if (total == rem || all_zero(p + total, rem - total)) {
            *why = "checksum mismatch in the last record";
            return REC_TORN;
        }
        *why = "record checksum mismatch";
        return REC_BAD;
    }
    r->time_ms = get64(p + 8);
    r->payload = p + REC_HEADER_SIZE;
    r->payload_len = (size_t)len;
    r->size = total;
    return REC_OK;
}

static void log_header_encode(unsigned char *h, uint64_t gen)
{
    memcpy(h, LOG_MAGIC, 8);
    put32(h + 8, LOG_VERSION);
    put32(h + 12, 0);
    put64(h + 16, gen);
    put64(h + 24, checksum(h, 24));
}

static int log_header_check(const unsigned char *h, uint64_t gen)
{
    return memcmp(h, LOG_MAGIC, 8) == 0 && get32(h + 8) == LOG_VERSION &&
           get64(h + 16) == gen && get64(h + 24) == checksum(h, 24);
}

/*==========================================================================
 * Files
 *==========================================================================*/

static int write_all(int fd, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void log_name(char *buf, size_t cap, uint64_t gen)
{
    snprintf(buf, cap, "appendonly-%" PRIu64 ".log", gen);
}

static void snap_name(char *buf, size_t cap, uint64_t gen)
{
    snprintf(buf, cap, "snap-%" PRIu64, gen);
}

/* Remove the directory name (in dirfd) and the files in it. */
static void remove_tree_at(int at, const char *name)
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
static uint64_t parse_gen_name(const char *name, const char *prefix,
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

/*==========================================================================
 * The persistence state
 *==========================================================================*/

typedef struct gen_list {
    uint64_t *gens;
    size_t n, cap;
} gen_list;

/* What the snapshot child reports through its pipe (one atomic write). */
typedef struct child_report {
    int ok;
    uint64_t bytes;
    char msg[256];
} child_report;

struct bks_persist {
    bks_keyspace *ks;
    char dir[1024];
    int dirfd;
    int lockfd;
    bks_fsync fsync_mode;
    int appendonly;
    uint64_t auto_rewrite_min;
    uint32_t auto_rewrite_pct;
    uint64_t map_threshold;
    int repair;                 /* --repair-aof */

    /* The log writer, guarded by mu. Offsets count bytes appended since
     * start-up across all files: appended >= written >= synced. */
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* progress of written/synced, leader idle */
    pthread_cond_t stop_cv;     /* wakes the everysec thread */
    int fd;                     /* the live log */
    uint64_t live_gen;
    unsigned char *buf, *spare; /* records not yet handed to write() */
    size_t len, cap, spare_cap;
    uint64_t appended, written, synced;
    uint64_t file_size;         /* bytes in the live log file */
    int writing;                /* a leader is in write()/fdatasync */
    int bg_syncing;             /* the everysec thread is in fdatasync */
    int broken;                 /* a write or fsync failed: refuse */
    uint64_t broken_gen;        /* the log it failed in */
    int stopping;
    int have_syncer;
    pthread_t syncer;

    /* Generations, guarded by ctl_mu (SAVE, BGSAVE, tick, close). */
    pthread_mutex_t ctl_mu;
    uint64_t snap_gen;          /* 0: no snapshot */
    gen_list logs;              /* replayed in order; the last is live */
    uint64_t next_gen;
    uint64_t older_log_bytes;   /* bytes of the listed logs before the live one */
    uint64_t snap_bytes;
    pid_t child;                /* 0: none */
    uint64_t child_gen;
    int child_pipe;
    uint64_t retry_at_ms;       /* monotonic: no automatic snapshot before */

    _Atomic uint64_t lastsave;  /* unix seconds */
};

static int gens_push(gen_list *l, uint64_t g)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4;
        uint64_t *n = realloc(l->gens, cap * sizeof *n);
        if (n == NULL) return -1;
        l->gens = n;
        l->cap = cap;
    }
    l->gens[l->n++] = g;
    return 0;
}

static int gens_has(const gen_list *l, uint64_t g)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->gens[i] == g) return 1;
    return 0;
}

/*==========================================================================
 * CURRENT
 *==========================================================================*/

static int current_write(bks_persist *p, uint64_t snap, const gen_list *logs,
                         char *err, size_t errlen)
{
    size_t cap = 128 + logs->n * 32, n;
    char *text = malloc(cap);
    int fd = -1, rc = -1;
    if (text == NULL) {
        errf(err, errlen, "out of memory");
        return -1;
    }
    n = (size_t)snprintf(text, cap, "%s\nsnapshot %" PRIu64 "\n", CURRENT_MAGIC, snap);
    for (size_t i = 0; i < logs->n; i++)
        n += (size_t)snprintf(text + n, cap - n, "log %" PRIu64 "\n", logs->gens[i]);
    n += (size_t)snprintf(text + n, cap - n, "check %016" PRIx64 "\n", checksum(text, n));

    fd = openat(p->dirfd, "CURRENT.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write_all(fd, text, n) != 0 || fsync(fd) != 0) goto io;
    if (close(fd) != 0) {
        fd = -1;
        goto io;
    }
    fd = -1;
    if (renameat(p->dirfd, "CURRENT.tmp", p->dirfd, "CURRENT") != 0) goto io;
    if (fsync(p->dirfd) != 0) goto io;
    rc = 0;
    goto done;
io:
    errf(err, errlen, "%s/CURRENT: %s", p->dir, strerror(errno));
    if (fd >= 0) close(fd);
done:
    free(text);
    return rc;
}

/* Parse CURRENT. Returns 1 when read, 0 when there is none, -1 on error. */
static int current_read(bks_persist *p, uint64_t *snap, gen_list *logs,
                        char *err, size_t errlen)
{
    int fd = openat(p->dirfd, "CURRENT", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        errf(err, errlen, "%s/CURRENT: %s", p->dir, strerror(errno));
        return -1;
    }
    char text[65536];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, text + n, sizeof text - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            errf(err, errlen, "%s/CURRENT: %s", p->dir, strerror(errno));
            close(fd);
            return -1;
        }
        if (r == 0 || n + (size_t)r == sizeof text - 1) {
            n += (size_t)r;
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    text[n] = '\0';

    /* The checksum line covers every byte before it. */
    char *check = strstr(text, "check ");
    uint64_t want = 0;
    if (strncmp(text, CURRENT_MAGIC "\n", sizeof CURRENT_MAGIC) != 0 || check == NULL ||
        (check != text && check[-1] != '\n') ||
        sscanf(check, "check %16" SCNx64, &want) != 1 ||
        want != checksum(text, (size_t)(check - text))) {
        errf(err, errlen, "%s/CURRENT: damaged (bad header or checksum)", p->dir);
        return -1;
    }
    *check = '\0';
    char *save = NULL, *line = strtok_r(text + sizeof CURRENT_MAGIC, "\n", &save);
    int have_snap = 0;
    for (; line != NULL; line = strtok_r(NULL, "\n", &save)) {
        uint64_t g;
        char tail;
        if (sscanf(line, "snapshot %" SCNu64 "%c", &g, &tail) == 1 && !have_snap) {
            *snap = g;
            have_snap = 1;
        } else if (sscanf(line, "log %" SCNu64 "%c", &g, &tail) == 1 && g > 0) {
            if (gens_push(logs, g) != 0) {
                errf(err, errlen, "out of memory");
                return -1;
            }
        } else {
            errf(err, errlen, "%s/CURRENT: unexpected line '%.64s'", p->dir, line);
            return -1;
        }
    }
    if (!have_snap || logs->n == 0) {
        errf(err, errlen, "%s/CURRENT: no snapshot line or no log", p->dir);
        return -1;
    }
    return 1;
}

/* Remove every file of ours that CURRENT (snap, logs) does not name: the
 * debris of an interrupted step or a finished generation. */
static void remove_unreferenced(bks_persist *p, uint64_t snap, const gen_list *logs)
{
    int fd = openat(p->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint64_t g;
        if ((g = parse_gen_name(e->d_name, "appendonly-", ".log")) != 0) {
            if (!gens_has(logs, g)) unlinkat(p->dirfd, e->d_name, 0);
        } else if ((g = parse_gen_name(e->d_name, "snap-", "")) != 0) {
            if (g != snap) remove_tree_at(p->dirfd, e->d_name);
        } else if (strcmp(e->d_name, "CURRENT.tmp") == 0) {
            unlinkat(p->dirfd, e->d_name, 0);
        }
    }
    closedir(d);
    fsync(p->dirfd);
}

/* The largest generation number present in the directory. */
static uint64_t max_gen_on_disk(bks_persist *p)
{
    uint64_t max = 0;
    int fd = openat(p->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return 0;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return 0;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint64_t g = parse_gen_name(e->d_name, "appendonly-", ".log");
        if (g == 0) g = parse_gen_name(e->d_name, "snap-", "");
        if (g > max) max = g;
    }
    closedir(d);
    return max;
}

/* Create appendonly-<gen>.log holding only its header, durable. */
static int log_create(bks_persist *p, uint64_t gen, int *fd_out, char *err,
                      size_t errlen)
{
    char name[64];
    unsigned char h[LOG_HEADER_SIZE];
    log_name(name, sizeof name, gen);
    log_header_encode(h, gen);
    int fd = openat(p->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 || write_all(fd, h, sizeof h) != 0 || fdatasync(fd) != 0 ||
        fsync(p->dirfd) != 0) {
        errf(err, errlen, "%s/%s: %s", p->dir, name, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlinkat(p->dirfd, name, 0);
        }
        return -1;
    }
    *fd_out = fd;
    return 0;
}

/*==========================================================================
 * Appending
 *==========================================================================*/

/* Lead one write: take the buffer, write (and sync) it outside the mutex.
 * Called and returns with mu held. */
static void lead_write(bks_persist *p)
{
    unsigned char *data = p->buf;
    size_t n = p->len, cap = p->cap;
    p->buf = p->spare;
    p->cap = p->spare_cap;
    p->len = 0;
    p->spare = NULL;
    p->spare_cap = 0;
    p->writing = 1;
    int fd = p->fd;
    int sync_now = p->fsync_mode == BKS_FSYNC_ALWAYS;
    pthread_mutex_unlock(&p->mu);

    int rc = write_all(fd, data, n);
    int saved = errno;
    if (rc == 0 && sync_now) {
        rc = fdatasync(fd);
        saved = errno;
    }

    pthread_mutex_lock(&p->mu);
    p->writing = 0;
    if (rc == 0) {
        p->written += n;
        p->file_size += n;
        if (sync_now) p->synced = p->written;
    } else {
        /* Drop whatever part of the batch reached the file, so that the
         * log ends on a whole record whatever happens next. */
        if (!p->broken)
            bks_log(BKS_LOG_ERROR, "persist: writing %s/appendonly-%" PRIu64
                    ".log failed: %s; refusing writes until a snapshot succeeds",
                    p->dir, p->live_gen, strerror(saved));
        if (ftruncate(fd, (off_t)p->file_size) != 0) { /* best effort */ }
        p->broken = 1;
        p->broken_gen = p->live_gen;
    }
    /* Keep the larger of the two buffers as the spare. */
    if (p->spare == NULL) {
        p->spare = data;
        p->spare_cap = cap;
    } else {
        free(data);
    }
    pthread_cond_broadcast(&p->cv);
}

int bks_persist_log(bks_persist *p, int argc, const bkc_str *argv)
{
    if (p == NULL || !p->appendonly) return 0;
    if (argc <= 0 || argv == NULL) return -1;
    size_t size = record_size(argc, argv);
    if (size == 0) {
        bks_log(BKS_LOG_ERROR, "persist: a command of more than 4 GiB cannot be logged");
        return -1;
    }
    unsigned char stack[4096];
    unsigned char *rec = size <= sizeof stack ? stack : malloc(size);
    if (rec == NULL) return -1;
    record_encode(rec, size, wall_ms(), argc, argv);

    int rc = 0;
    pthread_mutex_lock(&p->mu);
    if (p->broken) {
        rc = -1;
        goto out;
    }
    if (p->len + size > p->cap) {
        size_t cap = p->cap ? p->cap : 65536;
        while (cap < p->len + size) cap *= 2;
        unsigned char *nb = realloc(p->buf, cap);
        if (nb == NULL) {
            rc = -1;
            goto out;
        }
        p->buf = nb;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, rec, size);
    p->len += size;
    p->appended += size;
    uint64_t mine = p->appended;
    for (;;) {
        uint64_t done = p->fsync_mode == BKS_FSYNC_ALWAYS ? p->synced : p->written;
        if (done >= mine) break;
        if (p->broken) {
            rc = -1;
            break;
        }
        if (!p->writing)
            lead_write(p);
        else
            pthread_cond_wait(&p->cv, &p->mu);
    }
out:
    pthread_mutex_unlock(&p->mu);
    if (rec != stack) free(rec);
    return rc;
}

/* appendfsync everysec: fdatasync once a second what has been written. */
static void *syncer_main(void *arg)
{
    bks_persist *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&p->stop_cv, &p->mu, &ts);
        if (p->stopping) break;
        if (p->written <= p->synced || p->broken || p->fd < 0) continue;
        uint64_t target = p->written;
        int fd = p->fd;
        p->bg_syncing = 1;
        pthread_mutex_unlock(&p->mu);
        int rc = fdatasync(fd);
        int saved = errno;
        pthread_mutex_lock(&p->mu);
        p->bg_syncing = 0;
        if (rc == 0) {
            if (target > p->synced) p->synced = target;
        } else if (!p->broken) {
            bks_log(BKS_LOG_ERROR, "persist: fdatasync of %s/appendonly-%" PRIu64
                    ".log failed: %s; refusing writes until a snapshot succeeds",
                    p->dir, p->live_gen, strerror(saved));
            p->broken = 1;
            p->broken_gen = p->live_gen;
        }
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Move appends to new_fd (the log of generation gen). The server is
 * paused, so no command runs and every record of the old log has been
 * written; the old log is made durable before the new one gets any record,
 * so that no later log can hold a write the earlier one lost. Returns the
 * old descriptor, or -1 (nothing changed) when the old log cannot be synced. */
static int switch_log(bks_persist *p, int new_fd, uint64_t gen, char *err,
                      size_t errlen)
{
    pthread_mutex_lock(&p->mu);
    while (p->writing || p->bg_syncing) pthread_cond_wait(&p->cv, &p->mu);
    if (p->len > 0 && !p->broken) lead_write(p); /* cannot happen while paused */
    while (p->writing || p->bg_syncing) pthread_cond_wait(&p->cv, &p->mu);
    int old = p->fd;
    if (!p->broken && p->written > p->synced && fdatasync(old) != 0) {
        errf(err, errlen, "fdatasync of the live log failed: %s", strerror(errno));
        pthread_mutex_unlock(&p->mu);
        return -1;
    }
    /* Nobody waits now (paused): start the counters level. Records left in
     * the buffer of a broken log were refused to their writers. */
    p->len = 0;
    p->synced = p->appended = p->written;
    p->fd = new_fd;
    p->live_gen = gen;
    p->older_log_bytes += p->file_size;
    p->file_size = LOG_HEADER_SIZE;
    pthread_mutex_unlock(&p->mu);
    return old;
}

/*==========================================================================
 * Snapshot: writing (in the fork child, or in SAVE with the server paused)
 *==========================================================================*/

typedef struct mwriter {
    int fd;
    unsigned char *buf;
    size_t len, cap;
    uint64_t off;       /* bytes of the file so far */
    int failed;
} mwriter;

static void mw_flush(mwriter *w)
{
    if (!w->failed && w->len > 0 && write_all(w->fd, w->buf, w->len) != 0) w->failed = 1;
    w->len = 0;
}

static void mw_put(mwriter *w, const void *data, size_t n)
{
    w->off += n;
    if (w->len + n > w->cap) mw_flush(w);
    if (n > w->cap) {
        if (!w->failed && write_all(w->fd, data, n) != 0) w->failed = 1;
        return;
    }
    memcpy(w->buf + w->len, data, n);
    w->len += n;
}

/* A growable scratch buffer for frame bodies. */
typedef struct sbuf {
    unsigned char *p;
    size_t len, cap;
    int failed;
} sbuf;

static unsigned char *sb_grow(sbuf *b, size_t n)
{
    if (b->failed) return NULL;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        unsigned char *np = realloc(b->p, cap);
        if (np == NULL) {
            b->failed = 1;
            return NULL;
        }
        b->p = np;
        b->cap = cap;
    }
    unsigned char *at = b->p + b->len;
    b->len += n;
    return at;
}

static void sb_u32(sbuf *b, uint32_t v)
{
    unsigned char *at = sb_grow(b, 4);
    if (at) put32(at, v);
}

static void sb_u64(sbuf *b, uint64_t v)
{
    unsigned char *at = sb_grow(b, 8);
    if (at) put64(at, v);
}

static void sb_bytes(sbuf *b, const void *d, size_t n)
{
    unsigned char *at = sb_grow(b, n);
    if (at && n) memcpy(at, d, n);
}

/* Write a frame: magic, length, body (b's bytes after its 8-byte
 * reserved prefix), checksum of all three. */
static void write_frame(mwriter *w, sbuf *b, uint32_t magic)
{
    if (b->failed || b->len - 8 > UINT32_MAX) {
        w->failed = 1;
        return;
    }
    put32(b->p, magic);
    put32(b->p + 4, (uint32_t)(b->len - 8));
    sb_u64(b, 0);
    if (b->failed) {
        w->failed = 1;
        return;
    }
    put64(b->p + b->len - 8, checksum(b->p, b->len - 8));
    mw_put(w, b->p, b->len);
}

typedef struct snap_ctx {
    int sdir;               /* the snapshot directory */
    mwriter w;              /* its manifest */
    sbuf body;
    uint64_t nkeys;
    uint64_t next_file;
    uint64_t cutoff_ms;     /* keys expired by then are left out */
    uint64_t map_threshold; /* filters larger than this get a file of their own */
    uint64_t bytes;
    char err[200];
} snap_ctx;

/* 1 when the value has a filter that gets a file of its own. */
static int value_is_split(const bkc_value *v, uint64_t map_threshold)
{
    if (map_threshold == 0) return 0;
    for (uint32_t i = 0; i < v->nfilters; i++)
        if (bk_filter_serialized_size(v->filters[i]) > map_threshold) return 1;
    return 0;
}

/* A key whose filters are all small: one frame, then the value's
 * bkc_value_encode container (the command layer's own format). */
static int snap_key_inline(snap_ctx *c, bkc_str name, const bkc_value *v,
                           uint64_t expire_at_ms)
{
    unsigned char *blob = NULL;
    size_t blen = 0;
    int rc = bkc_value_encode(v, &blob, &blen);
    if (rc != BK_OK) {
        errf(c->err, sizeof c->err, "key '%.*s': cannot encode its value: %s",
             (int)(name.len > 64 ? 64 : name.len), name.ptr, bk_strerror(rc));
        return -1;
    }
    sbuf *b = &c->body;
    b->len = 0;
    sb_grow(b, 8); /* magic and length, filled by write_frame */
    sb_u32(b, (uint32_t)name.len);
    sb_bytes(b, name.ptr, name.len);
    sb_u64(b, expire_at_ms);
    sb_u32(b, KEY_INLINE);
    sb_u64(b, blen);
    write_frame(&c->w, b, MAN_MAGIC_KEY);
    mw_put(&c->w, blob, blen);
    free(blob);
    return 0;
}

/* A key with a filter above map_threshold: its settings, then per filter
 * an image inline after the frame or a file <n>.bkf of its own. */
static int snap_key_split(snap_ctx *c, bkc_str name, const bkc_value *v,
                          uint64_t expire_at_ms)
{
    sbuf *b = &c->body;
    b->len = 0;
    sb_grow(b, 8);
    sb_u32(b, (uint32_t)name.len);
    sb_bytes(b, name.ptr, name.len);
    sb_u64(b, expire_at_ms);
    sb_u32(b, KEY_SPLIT);
    sb_u32(b, (uint32_t)v->kind);
    sb_u64(b, v->cf_capacity);
    sb_u32(b, v->cf_bucket_size);
    sb_u32(b, v->cf_max_iterations);
    sb_u32(b, v->cf_expansion);
    sb_u64(b, v->cf_deleted);
    sb_u32(b, v->nfilters);
    for (uint32_t i = 0; i < v->nfilters; i++) {
        const bk_filter *f = v->filters[i];
        uint64_t size = bk_filter_serialized_size(f);
        uint64_t file = 0;
        if (size == 0) {
            errf(c->err, sizeof c->err, "key '%.*s': filter %u has no file codec",
                 (int)(name.len > 64 ? 64 : name.len), name.ptr, i);
            return -1;
        }
        if (size > c->map_threshold) {
            char fname[32];
            file = ++c->next_file;
            snprintf(fname, sizeof fname, "%" PRIu64 ".bkf", file);
            int fd = openat(c->sdir, fname, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            int rc = fd < 0 ? BK_EIO : bk_filter_write_fd(f, fd);
            if (rc == BK_OK && fsync(fd) != 0) rc = BK_EIO;
            if (fd >= 0 && close(fd) != 0 && rc == BK_OK) rc = BK_EIO;
            if (rc != BK_OK) {
                errf(c->err, sizeof c->err, "%s: %s (%s)", fname, bk_strerror(rc), strerror(errno));
                return -1;
            }
            c->bytes += size;
        }
        sb_u64(b, size);
        sb_u64(b, file);
    }
    write_frame(&c->w, b, MAN_MAGIC_KEY);
    for (uint32_t i = 0; i < v->nfilters && !c->w.failed; i++) {
        const bk_filter *f = v->filters[i];
        uint64_t size = bk_filter_serialized_size(f);
        if (size > c->map_threshold) continue;
        mw_flush(&c->w);
        if (!c->w.failed && bk_filter_write_fd(f, c->w.fd) != BK_OK) c->w.failed = 1;
        c->w.off += size;
    }
    return 0;
}

static int snap_key(void *arg, bkc_str name, const bkc_value *v, uint64_t expire_at_ms)
{
    snap_ctx *c = arg;
    if (v == NULL) return 0;
    if (expire_at_ms != 0 && expire_at_ms <= c->cutoff_ms) return 0;
    if (name.len > UINT32_MAX / 2) {
        errf(c->err, sizeof c->err, "a key name is too long");
        return -1;
    }
    int rc = value_is_split(v, c->map_threshold) ? snap_key_split(c, name, v, expire_at_ms)
                                                 : snap_key_inline(c, name, v, expire_at_ms);
    if (rc != 0) return -1;
    if (c->w.failed || c->body.failed) {
        errf(c->err, sizeof c->err, "manifest: %s",
             c->body.failed ? "out of memory" : strerror(errno));
        return -1;
    }
    c->nkeys++;
    return 0;
}

/* Write snap-<gen>/ from the keyspace and make it durable. Runs in the fork
 * child (or with the server paused): no locks, no logging. */
static int snapshot_write(bks_keyspace *ks, int dirfd, uint64_t gen,
                          uint64_t map_threshold, uint64_t *bytes, char *err,
                          size_t errlen)
{
    char name[64];
    snap_ctx c;
    memset(&c, 0, sizeof c);
    c.sdir = -1;
    c.w.fd = -1;
    c.cutoff_ms = wall_ms();
    c.map_threshold = map_threshold;
    snap_name(name, sizeof name, gen);
    int rc = -1;

    remove_tree_at(dirfd, name);
    if (mkdirat(dirfd, name, 0755) != 0 ||
        (c.sdir = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
        (c.w.fd = openat(c.sdir, "manifest", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
        errf(err, errlen, "%s: %s", name, strerror(errno));
        goto done;
    }
    c.w.cap = 1 << 16;
    c.w.buf = malloc(c.w.cap);
    if (c.w.buf == NULL) {
        errf(err, errlen, "out of memory");
        goto done;
    }
    c.body.len = 0;
    sb_grow(&c.body, 8);
    sb_u32(&c.body, MAN_VERSION);
    sb_u32(&c.body, 0);
    sb_u64(&c.body, gen);
    sb_u64(&c.body, c.cutoff_ms);
    write_frame(&c.w, &c.body, MAN_MAGIC_HEAD);

    if (bks_keyspace_foreach(ks, snap_key, &c) != 0 || c.err[0]) {
        errf(err, errlen, "%s/%s", name, c.err[0] ? c.err : "keyspace walk failed");
        goto done;
    }
    c.body.len = 0;
    sb_grow(&c.body, 8);
    sb_u64(&c.body, c.nkeys);
    write_frame(&c.w, &c.body, MAN_MAGIC_END);
    mw_flush(&c.w);
    if (c.w.failed || fsync(c.w.fd) != 0 || close(c.w.fd) != 0) {
        c.w.fd = -1;
        errf(err, errlen, "%s/manifest: %s", name, strerror(errno));
        goto done;
    }
    c.w.fd = -1;
    if (fsync(c.sdir) != 0 || fsync(dirfd) != 0) {
        errf(err, errlen, "%s: fsync: %s", name, strerror(errno));
        goto done;
    }
    *bytes = c.bytes + c.w.off;
    rc = 0;
done:
    if (c.w.fd >= 0) close(c.w.fd);
    if (c.sdir >= 0) close(c.sdir);
    free(c.w.buf);
    free(c.body.p);
    return rc;
}

/*==========================================================================
 * Snapshot: loading
 *==========================================================================*/

typedef struct frame {
    uint32_t magic;
    const unsigned char *body;
    size_t len;
} frame;

static int frame_read(const unsigned char *base, size_t size, size_t *off,
                      frame *f)
{
    if (size - *off < FRAME_OVERHEAD) return -1;
    const unsigned char *p = base + *off;
    uint64_t len = get32(p + 4);
    if (len > size - *off - FRAME_OVERHEAD) return -1;
    if (get64(p + 8 + len) != checksum(p, (size_t)len + 8)) return -1;
    f->magic = get32(p);
    f->body = p + 8;
    f->len = (size_t)len;
    *off += (size_t)len + FRAME_OVERHEAD;
    return 0;
}

/* A field reader over a frame body. */
typedef struct fields {
    const unsigned char *p;
    size_t n, pos;
    int bad;
} fields;

static uint32_t fd_u32(fields *f)
{
    if (f->n - f->pos < 4) {
        f->bad = 1;
        return 0;
    }
    f->pos += 4;
    return get32(f->p + f->pos - 4);
}

static uint64_t fd_u64(fields *f)
{
    if (f->n - f->pos < 8) {
        f->bad = 1;
        return 0;
    }
    f->pos += 8;
    return get64(f->p + f->pos - 8);
}

/* Load the filters of a split key frame (fields after the layout word);
 * inline images start at *off in the manifest. */
static int load_split(bks_persist *p, const char *sname, const char *mpath,
                      const unsigned char *base, size_t size, size_t *off,
                      fields *k, bkc_value **out, char *err, size_t errlen)
{
    uint32_t kind = fd_u32(k);
    uint64_t cf_capacity = fd_u64(k);
    uint32_t cf_bucket = fd_u32(k), cf_iter = fd_u32(k), cf_exp = fd_u32(k);
    uint64_t cf_deleted = fd_u64(k);
    uint32_t nfilters = fd_u32(k);
    if (k->bad || (k->n - k->pos) != (size_t)nfilters * 16) {
        errf(err, errlen, "bad key frame");
        return -1;
    }
    bkc_value *v = bkc_value_new((bkc_kind)kind);
    if (v == NULL) {
        errf(err, errlen, "out of memory");
        return -1;
    }
    v->cf_capacity = cf_capacity;
    v->cf_bucket_size = cf_bucket;
    v->cf_max_iterations = cf_iter;
    v->cf_expansion = cf_exp;
    v->cf_deleted = cf_deleted;
    for (uint32_t i = 0; i < nfilters; i++) {
        uint64_t len = fd_u64(k), file = fd_u64(k);
        bk_filter *f = NULL;
        int lrc;
        if (file == 0) {
            if (len > size - *off) {
                errf(err, errlen, "%s offset %zu: filter image runs past the end", mpath, *off);
                goto fail;
            }
            lrc = bk_filter_deserialize(&f, base + *off, (size_t)len);
            if (lrc != BK_OK) {
                errf(err, errlen, "%s offset %zu: filter image: %s", mpath, *off, bk_strerror(lrc));
                goto fail;
            }
            *off += (size_t)len;
        } else {
            char fpath[PATH_MAX];
            struct stat fst;
            errf(fpath, sizeof fpath, "%s/%s/%" PRIu64 ".bkf", p->dir, sname, file);
            if (stat(fpath, &fst) != 0) {
                errf(err, errlen, "%s: %s", fpath, strerror(errno));
                goto fail;
            }
            if ((uint64_t)fst.st_size != len) {
                errf(err, errlen, "%s: %s (%" PRIu64 " bytes, the manifest says %" PRIu64 ")",
                     fpath, bk_strerror((uint64_t)fst.st_size < len ? BK_ETRUNC : BK_ECORRUPT),
                     (uint64_t)fst.st_size, len);
                goto fail;
            }
#ifdef BK_MAP_PRIVATE
            /* Mapped copy-on-write: usable at once, read as it is touched,
             * changes stay in memory. The header is validated; the payload
             * checksum would mean reading it all. */
            if (p->map_threshold > 0 && len > p->map_threshold)
                lrc = bk_filter_map(&f, fpath, BK_MAP_PRIVATE);
            else
#endif
                lrc = bk_filter_load(&f, fpath);
            if (lrc != BK_OK) {
                errf(err, errlen, "%s: %s", fpath, bk_strerror(lrc));
                goto fail;
            }
        }
        if (bkc_value_push(v, f) != BK_OK) {
            bk_filter_free(f);
            errf(err, errlen, "out of memory");
            goto fail;
        }
    }
    *out = v;
    return 0;
fail:
    bkc_value_free(v);
    return -1;
}

static int snapshot_load(bks_persist *p, uint64_t gen, char *err, size_t errlen)
{
    char sname[64], mpath[PATH_MAX];
    snap_name(sname, sizeof sname, gen);
    snprintf(mpath, sizeof mpath, "%s/%s/manifest", p->dir, sname);
    int fd = open(mpath, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        errf(err, errlen, "%s: %s", mpath, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    const unsigned char *base = NULL;
    if (size > 0) {
        base = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (base == MAP_FAILED) {
            errf(err, errlen, "%s: %s", mpath, strerror(errno));
            close(fd);
            return -1;
        }
    }
    close(fd);

    int rc = -1;
    size_t off = 0, at;
    uint64_t nkeys = 0, created = 0;
    frame fr;
    bkc_value *v = NULL;
    if (frame_read(base, size, &off, &fr) != 0 || fr.magic != MAN_MAGIC_HEAD) {
        errf(err, errlen, "%s offset 0: bad manifest header", mpath);
        goto done;
    }
    {
        fields h = {fr.body, fr.len, 0, 0};
        uint32_t version = fd_u32(&h);
        fd_u32(&h);
        uint64_t g = fd_u64(&h);
        created = fd_u64(&h);
        if (h.bad || version != MAN_VERSION || g != gen) {
            errf(err, errlen, "%s offset 0: unsupported manifest version or wrong generation", mpath);
            goto done;
        }
    }
    for (;;) {
        at = off;
        if (frame_read(base, size, &off, &fr) != 0) {
            errf(err, errlen, "%s offset %zu: %s", mpath, at,
                     at == size ? "manifest ends before its end marker" : "damaged manifest frame");
            goto done;
        }
        if (fr.magic == MAN_MAGIC_END) {
            fields e = {fr.body, fr.len, 0, 0};
            uint64_t want = fd_u64(&e);
            if (e.bad || want != nkeys || off != size) {
                errf(err, errlen, "%s offset %zu: bad end marker (%" PRIu64 " keys announced, %"
                         PRIu64 " read)", mpath, at, want, nkeys);
                goto done;
            }
            break;
        }
        if (fr.magic != MAN_MAGIC_KEY) {
            errf(err, errlen, "%s offset %zu: unknown frame", mpath, at);
            goto done;
        }
        fields k = {fr.body, fr.len, 0, 0};
        uint32_t name_len = fd_u32(&k);
        if (k.bad || name_len > k.n - k.pos) {
            errf(err, errlen, "%s offset %zu: bad key frame", mpath, at);
            goto done;
        }
        bkc_str name = {(const char *)k.p + k.pos, name_len};
        k.pos += name_len;
        uint64_t expire = fd_u64(&k);
        uint32_t layout = fd_u32(&k);
        if (!k.bad && layout == KEY_INLINE) {
            uint64_t len = fd_u64(&k);
            if (k.bad || k.pos != k.n || len > size - off) {
                errf(err, errlen, "%s offset %zu: bad key frame", mpath, at);
                goto done;
            }
            int drc = bkc_value_decode(base + off, (size_t)len, &v);
            if (drc != BK_OK) {
                errf(err, errlen, "%s offset %zu: value of key '%.*s': %s", mpath, off,
                     (int)(name.len > 64 ? 64 : name.len), name.ptr, bk_strerror(drc));
                goto done;
            }
            off += (size_t)len;
        } else if (!k.bad && layout == KEY_SPLIT) {
            char why[600];
            if (load_split(p, sname, mpath, base, size, &off, &k, &v, why, sizeof why) != 0) {
                errf(err, errlen, "%s offset %zu: key '%.*s': %s", mpath, at,
                     (int)(name.len > 64 ? 64 : name.len), name.ptr, why);
                goto done;
            }
        } else {
            errf(err, errlen, "%s offset %zu: bad key frame", mpath, at);
            goto done;
        }
        int krc = bks_keyspace_load(p->ks, name, v, expire);
        if (krc != 0) {
            errf(err, errlen, "%s offset %zu: cannot load key '%.*s': %s", mpath, at,
                     (int)(name.len > 64 ? 64 : name.len), name.ptr, bk_strerror(krc));
            goto done;
        }
        v = NULL;
        nkeys++;
    }
    p->snap_bytes = size;
    atomic_store(&p->lastsave, created / 1000);
    bks_log(BKS_LOG_INFO, "persist: loaded %" PRIu64 " keys from %s/%s", nkeys, p->dir, sname);
    rc = 0;
done:
    if (v != NULL) bkc_value_free(v);
    if (base != NULL) munmap((void *)base, size);
    return rc;
}

/*==========================================================================
 * Replay
 *==========================================================================*/

typedef struct replay_sink {
    uint64_t errors;
    char first[160];
} replay_sink;

static void rs_simple(bkc_reply *r, const char *s) { (void)r; (void)s; }
static void rs_integer(bkc_reply *r, long long v) { (void)r; (void)v; }
static void rs_bulk(bkc_reply *r, const void *d, size_t n) { (void)r; (void)d; (void)n; }
static void rs_null(bkc_reply *r) { (void)r; }
static void rs_count(bkc_reply *r, size_t n) { (void)r; (void)n; }
static void rs_dbl(bkc_reply *r, double d) { (void)r; (void)d; }

static void rs_error(bkc_reply *r, const char *s)
{
    replay_sink *k = r->impl;
    if (k->errors++ == 0) snprintf(k->first, sizeof k->first, "%s", s);
}

static const bkc_reply_vt replay_reply_vt = {
    rs_simple, rs_error, rs_integer, rs_bulk, rs_null, rs_count, rs_count, rs_dbl,
};

/* Run one logged write. The command layer's commands get the record's
 * time as ctx->now_ms, so that WF.* (whose filters keep a clock) replay
 * exactly; the host's own writes (DEL, PEXPIREAT, PERSIST, RENAME,
 * FLUSHALL ...) go through bks_execute with no client. The keyspace does
 * not expire keys while it is loading: the log holds the DELs. */
static void replay_one(bks_persist *p, replay_sink *sink, uint64_t time_ms,
                       int argc, const bkc_str *argv)
{
    bks_session s = {p->ks, NULL, NULL};
    bkc_reply reply = {&replay_reply_vt, sink};
    const bkc_command *cmd = bkc_lookup(argv[0]);
    if (cmd == NULL || (cmd->flags & BKC_CMD_HOST)) {
        bks_execute(NULL, &s, &reply, 2, argc, argv);
    } else {
        bkc_ctx c = {&reply, &bks_host_vt, &s, 2, time_ms};
        bkc_dispatch(&c, argc, argv);
    }
}

/* Cut a log at off (durably); off = LOG_HEADER_SIZE empties it. */
static int log_truncate(bks_persist *p, uint64_t gen, uint64_t off, char *err,
                        size_t errlen)
{
    char name[64];
    log_name(name, sizeof name, gen);
    int fd = openat(p->dirfd, name, O_RDWR | O_CLOEXEC);
    int rc = 0;
    if (fd < 0) {
        rc = -1;
    } else {
        if (off < LOG_HEADER_SIZE) {
            unsigned char h[LOG_HEADER_SIZE];
            log_header_encode(h, gen);
            if (pwrite(fd, h, sizeof h, 0) != (ssize_t)sizeof h) rc = -1;
            off = LOG_HEADER_SIZE;
        }
        if (rc == 0 && (ftruncate(fd, (off_t)off) != 0 || fsync(fd) != 0)) rc = -1;
        close(fd);
    }
    if (rc != 0) errf(err, errlen, "%s/%s: cannot truncate: %s", p->dir, name, strerror(errno));
    return rc;
}

/* Replay one log (last: whether it is the final one of the list). *stop is
 * set when a repair cut it short: the caller then empties the later logs. */
static int replay_log(bks_persist *p, uint64_t gen, int last, replay_sink *sink,
                      int *stop, uint64_t *size_out, char *err, size_t errlen)
{
    char name[64], path[PATH_MAX];
    log_name(name, sizeof name, gen);
    snprintf(path, sizeof path, "%s/%s", p->dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        errf(err, errlen, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size, mapped = size;
    const unsigned char *base = NULL;
    if (size > 0) {
        base = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (base == MAP_FAILED) {
            errf(err, errlen, "%s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        madvise((void *)base, size, MADV_SEQUENTIAL);
    }
    close(fd);

    int rc = -1;
    uint64_t records = 0;
    size_t off = 0, cut = SIZE_MAX;
    const char *why = NULL;
    if (size < LOG_HEADER_SIZE || !log_header_check(base, gen)) {
        why = size < LOG_HEADER_SIZE ? "truncated log header" : "bad log header";
        if (!p->repair) {
            errf(err, errlen, "file %s offset 0: %s (start with --repair-aof to "
                     "empty it, losing its writes)", path, why);
            goto done;
        }
        bks_log(BKS_LOG_WARNING, "persist: --repair-aof: file %s offset 0: %s: emptying it "
                "and the logs after it", path, why);
        cut = 0;
        *stop = 1;
    } else {
        off = LOG_HEADER_SIZE;
        for (;;) {
            record r;
            int argc = 0;
            bkc_str *argv = NULL;
            rec_status s = record_scan(base, size, off, &r, &why);
            if (s == REC_END) break;
            if (s == REC_TORN && last) {
                bks_log(BKS_LOG_WARNING, "persist: file %s offset %zu: %s: dropping the "
                        "last %zu bytes (a write torn by a crash, never acknowledged)",
                        path, off, why, size - off);
                cut = off;
                break;
            }
            if (s == REC_TORN) why = "log ends inside a record, and later logs follow";
            if (s == REC_OK && resp_decode(r.payload, r.payload_len, &argc, &argv) != 0) {
                s = REC_BAD;
                why = "record payload is not a RESP array of bulk strings";
            }
            if (s != REC_OK) {
                if (!p->repair) {
                    errf(err, errlen, "file %s offset %zu: %s (start with --repair-aof "
                             "to truncate the log there, losing what follows)", path, off, why);
                    goto done;
                }
                bks_log(BKS_LOG_WARNING, "persist: --repair-aof: file %s offset %zu: %s: "
                        "truncating there (%zu bytes and any later log dropped)",
                        path, off, why, size - off);
                cut = off;
                *stop = 1;
                break;
            }
            replay_one(p, sink, r.time_ms, argc, argv);
            free(argv);
            records++;
            off += r.size;
        }
    }
    if (cut != SIZE_MAX) {
        if (log_truncate(p, gen, cut, err, errlen) != 0) goto done;
        size = cut < LOG_HEADER_SIZE ? LOG_HEADER_SIZE : cut;
    }
    *size_out = size;
    if (records > 0)
        bks_log(BKS_LOG_INFO, "persist: replayed %" PRIu64 " writes from %s", records, path);
    rc = 0;
done:
    if (base != NULL) munmap((void *)base, mapped);
    return rc;
}

/*==========================================================================
 * Generations: starting and finishing a snapshot
 *==========================================================================*/

/* The child made snap-<gen>: name it in CURRENT with the logs from gen on,
 * then delete the older generation. Called with ctl_mu held. */
static void finish_generation(bks_persist *p, uint64_t gen, uint64_t bytes)
{
    char err[512];
    gen_list nl = {NULL, 0, 0};
    for (size_t i = 0; i < p->logs.n; i++)
        if (p->logs.gens[i] >= gen && gens_push(&nl, p->logs.gens[i]) != 0) {
            free(nl.gens);
            bks_log(BKS_LOG_ERROR, "persist: out of memory finishing snapshot %" PRIu64, gen);
            return;
        }
    if (current_write(p, gen, &nl, err, sizeof err) != 0) {
        /* CURRENT still names the previous snapshot and every log since:
         * nothing is lost; the unreferenced snap-<gen> goes at next start. */
        bks_log(BKS_LOG_ERROR, "persist: snapshot %" PRIu64 " written but not installed: %s",
                gen, err);
        free(nl.gens);
        p->retry_at_ms = mono_ms() + RETRY_MS;
        return;
    }
    free(p->logs.gens);
    p->logs = nl;
    p->snap_gen = gen;
    p->snap_bytes = bytes;
    atomic_store(&p->lastsave, wall_ms() / 1000);
    remove_unreferenced(p, gen, &p->logs);

    pthread_mutex_lock(&p->mu);
    p->older_log_bytes = 0;
    if (p->broken && p->broken_gen < gen) {
        /* Everything the failed log lost is in the snapshot. */
        p->broken = 0;
        bks_log(BKS_LOG_WARNING, "persist: snapshot %" PRIu64 " holds what the failed log "
                "lost: accepting writes again", gen);
    }
    pthread_mutex_unlock(&p->mu);
    bks_log(BKS_LOG_INFO, "persist: snapshot %" PRIu64 " installed (%" PRIu64 " bytes)", gen, bytes);
}

/* The fork child: write the snapshot, report through the pipe, _exit. */
static void child_main(bks_persist *p, uint64_t gen, int wfd, pid_t parent)
{
    child_report rep;
    memset(&rep, 0, sizeof rep);
    /* Die with the parent (a kill -9 of the server must not leave a child
     * holding the data directory), and never run the server's handlers. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(2);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    /* The flock stays with the parent's descriptor alone. */
    close(p->lockfd);
    int rc = snapshot_write(p->ks, p->dirfd, gen, p->map_threshold, &rep.bytes,
                            rep.msg, sizeof rep.msg);
    rep.ok = rc == 0;
    if (write(wfd, &rep, sizeof rep) != (ssize_t)sizeof rep) { /* parent reports a bare failure */ }
    _exit(rc == 0 ? 0 : 1);
}

/* Start generation p->next_gen: its log becomes live at a paused instant,
 * and its snapshot of that instant is written by a fork child (background)
 * or right here (SAVE). Called with ctl_mu held and no child running. */
static int start_snapshot(bks_persist *p, int foreground)
{
    char err[512];
    uint64_t gen = p->next_gen++;
    int nfd = -1, pipefd[2] = {-1, -1};
    char lname[64];
    log_name(lname, sizeof lname, gen);

    if (log_create(p, gen, &nfd, err, sizeof err) != 0) goto fail;
    if (gens_push(&p->logs, gen) != 0) {
        errf(err, sizeof err, "out of memory");
        goto fail_log;
    }
    /* The new (empty) log is listed before any write goes to it. */
    if (current_write(p, p->snap_gen, &p->logs, err, sizeof err) != 0) {
        p->logs.n--;
        goto fail_log;
    }
    if (!foreground && pipe2(pipefd, O_CLOEXEC) != 0) {
        errf(err, sizeof err, "pipe: %s", strerror(errno));
        goto fail;   /* the empty log stays listed: harmless */
    }
    /* Most of the old log's dirty pages, before the pause rather than in it. */
    if (p->fsync_mode != BKS_FSYNC_ALWAYS) fdatasync(p->fd);

    bks_pause_all();
    int old = switch_log(p, nfd, gen, err, sizeof err);
    if (old < 0) {
        bks_resume_all();
        pthread_mutex_lock(&p->mu);
        p->broken = 1;
        p->broken_gen = p->live_gen;
        pthread_mutex_unlock(&p->mu);
        close(nfd);
        goto fail_pipe;
    }
    if (foreground) {
        uint64_t bytes = 0;
        int rc = snapshot_write(p->ks, p->dirfd, gen, p->map_threshold, &bytes, err, sizeof err);
        bks_resume_all();
        close(old);
        if (rc != 0) {
            char sname[64];
            snap_name(sname, sizeof sname, gen);
            remove_tree_at(p->dirfd, sname);
            goto fail;
        }
        finish_generation(p, gen, bytes);
        return p->snap_gen == gen ? 0 : -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        child_main(p, gen, pipefd[1], parent);
    }
    bks_resume_all();
    close(old);
    close(pipefd[1]);
    if (pid < 0) {
        errf(err, sizeof err, "fork: %s", strerror(errno));
        close(pipefd[0]);
        goto fail;
    }
    p->child = pid;
    p->child_gen = gen;
    p->child_pipe = pipefd[0];
    bks_log(BKS_LOG_INFO, "persist: background snapshot %" PRIu64 " started by pid %d",
            gen, (int)pid);
    return 0;

fail_log:
    close(nfd);
    unlinkat(p->dirfd, lname, 0);
    goto fail;
fail_pipe:
    if (pipefd[0] >= 0) close(pipefd[0]);
    if (pipefd[1] >= 0) close(pipefd[1]);
fail:
    bks_log(BKS_LOG_ERROR, "persist: snapshot %" PRIu64 " failed: %s", gen, err);
    p->retry_at_ms = mono_ms() + RETRY_MS;
    errno = EIO;
    return -1;
}

/* Reap a finished child. Called with ctl_mu held. */
static void reap_child(bks_persist *p, int block)
{
    int status;
    pid_t r;
    do {
        r = waitpid(p->child, &status, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == 0) return;
    child_report rep;
    memset(&rep, 0, sizeof rep);
    ssize_t n = read(p->child_pipe, &rep, sizeof rep);
    close(p->child_pipe);
    p->child_pipe = -1;
    uint64_t gen = p->child_gen;
    p->child = 0;
    rep.msg[sizeof rep.msg - 1] = '\0';
    if (r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && n == (ssize_t)sizeof rep &&
        rep.ok) {
        finish_generation(p, gen, rep.bytes);
        return;
    }
    char sname[64];
    snap_name(sname, sizeof sname, gen);
    remove_tree_at(p->dirfd, sname);
    if (r > 0 && WIFSIGNALED(status))
        bks_log(BKS_LOG_WARNING, "persist: background snapshot %" PRIu64 " killed by signal %d",
                gen, WTERMSIG(status));
    else
        bks_log(BKS_LOG_WARNING, "persist: background snapshot %" PRIu64 " failed: %s", gen,
                n == (ssize_t)sizeof rep ? rep.msg : "no report from the child");
    p->retry_at_ms = mono_ms() + RETRY_MS;
}

/*==========================================================================
 * API
 *==========================================================================*/

int bks_persist_save(bks_persist *p)
{
    if (p == NULL) return -1;
    if (pthread_mutex_trylock(&p->ctl_mu) != 0) {
        errno = EBUSY;
        return -1;
    }
    int rc;
    if (p->child != 0) {
        errno = EBUSY;
        rc = -1;
    } else {
        rc = start_snapshot(p, 1);
    }
    pthread_mutex_unlock(&p->ctl_mu);
    return rc;
}

int bks_persist_bgsave(bks_persist *p)
{
    if (p == NULL) return -1;
    if (pthread_mutex_trylock(&p->ctl_mu) != 0) {
        errno = EBUSY;
        return -1;
    }
    int rc;
    if (p->child != 0) {
        errno = EBUSY;
        rc = -1;
    } else {
        rc = start_snapshot(p, 0);
    }
    pthread_mutex_unlock(&p->ctl_mu);
    return rc;
}

uint64_t bks_persist_lastsave(const bks_persist *p)
{
    return p ? atomic_load(&((bks_persist *)p)->lastsave) : 0;
}

void bks_persist_tick(bks_persist *p)
{
    if (p == NULL || pthread_mutex_trylock(&p->ctl_mu) != 0) return;
    if (p->child != 0) {
        reap_child(p, 0);
    } else if (mono_ms() >= p->retry_at_ms) {
        pthread_mutex_lock(&p->mu);
        int broken = p->broken;
        uint64_t log_bytes = p->older_log_bytes + p->file_size;
        pthread_mutex_unlock(&p->mu);
        if (broken) {
            bks_log(BKS_LOG_WARNING, "persist: the log is failing: starting a snapshot to recover");
            start_snapshot(p, 0);
        } else if (p->appendonly && p->auto_rewrite_pct > 0 &&
                   log_bytes >= p->auto_rewrite_min &&
                   (double)log_bytes * 100.0 >= (double)p->snap_bytes * p->auto_rewrite_pct) {
            bks_log(BKS_LOG_INFO, "persist: the log holds %" PRIu64 " bytes: compacting "
                    "into a snapshot", log_bytes);
            start_snapshot(p, 0);
        }
    }
    pthread_mutex_unlock(&p->ctl_mu);
}

static int lock_dir(bks_persist *p, char *err, size_t errlen)
{
    p->lockfd = openat(p->dirfd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (p->lockfd < 0) {
        errf(err, errlen, "%s/LOCK: %s", p->dir, strerror(errno));
        return -1;
    }
    /* A snapshot child of a server just killed may hold it for an instant. */
    for (int i = 0; i < 60; i++) {
        if (flock(p->lockfd, LOCK_EX | LOCK_NB) == 0) return 0;
        if (errno != EWOULDBLOCK && errno != EINTR) break;
        usleep(50000);
    }
    errf(err, errlen, "%s: the data directory is in use by another process", p->dir);
    return -1;
}

/* Load CURRENT's snapshot and replay its logs; open the live log. */
static int recover(bks_persist *p, char *err, size_t errlen)
{
    uint64_t snap = 0;
    int have = current_read(p, &snap, &p->logs, err, errlen);
    if (have < 0) return -1;
    uint64_t max = max_gen_on_disk(p);
    if (have == 0) {
        /* Fresh, or the first start crashed before CURRENT: nothing in
         * the directory can hold an acknowledged write. */
        remove_unreferenced(p, 0, &p->logs);
        uint64_t gen = max + 1;
        if (log_create(p, gen, &p->fd, err, errlen) != 0) return -1;
        if (gens_push(&p->logs, gen) != 0) {
            errf(err, errlen, "out of memory");
            return -1;
        }
        if (current_write(p, 0, &p->logs, err, errlen) != 0) return -1;
        p->snap_gen = 0;
        p->live_gen = gen;
        p->file_size = LOG_HEADER_SIZE;
        p->next_gen = gen + 1;
        atomic_store(&p->lastsave, wall_ms() / 1000);
        bks_log(BKS_LOG_INFO, "persist: new data directory %s", p->dir);
        return 0;
    }
    for (size_t i = 0; i < p->logs.n; i++)
        if (p->logs.gens[i] > max) max = p->logs.gens[i];
    if (snap > max) max = snap;
    p->next_gen = max + 1;
    remove_unreferenced(p, snap, &p->logs);
    p->snap_gen = snap;
    atomic_store(&p->lastsave, wall_ms() / 1000);
    if (snap != 0 && snapshot_load(p, snap, err, errlen) != 0) return -1;

    replay_sink sink;
    memset(&sink, 0, sizeof sink);
    int stop = 0;
    uint64_t size = 0;
    for (size_t i = 0; i < p->logs.n; i++) {
        int last = i + 1 == p->logs.n;
        if (stop) {
            /* A repair cut an earlier log: what follows it is dropped. */
            char lname[64];
            log_name(lname, sizeof lname, p->logs.gens[i]);
            bks_log(BKS_LOG_WARNING, "persist: --repair-aof: emptying %s/%s", p->dir, lname);
            if (log_truncate(p, p->logs.gens[i], 0, err, errlen) != 0) return -1;
            size = LOG_HEADER_SIZE;
        } else if (replay_log(p, p->logs.gens[i], last, &sink, &stop, &size, err, errlen) != 0) {
            return -1;
        }
        if (!last) p->older_log_bytes += size;
    }
    if (sink.errors > 0)
        bks_log(BKS_LOG_WARNING, "persist: %" PRIu64 " replayed writes answered an error "
                "(the first: %s)", sink.errors, sink.first);

    char lname[64];
    p->live_gen = p->logs.gens[p->logs.n - 1];
    log_name(lname, sizeof lname, p->live_gen);
    p->fd = openat(p->dirfd, lname, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (p->fd < 0) {
        errf(err, errlen, "%s/%s: %s", p->dir, lname, strerror(errno));
        return -1;
    }
    p->file_size = size;
    return 0;
}

int bks_persist_open(bks_persist **out, const bks_config *cfg, bks_keyspace *ks)
{
    char err[1024] = "";
    if (out == NULL || cfg == NULL || ks == NULL) return -1;
    *out = NULL;
    bks_persist *p = calloc(1, sizeof *p);
    if (p == NULL) return -1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->ctl_mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->stop_cv, &ca);
    pthread_condattr_destroy(&ca);
    p->ks = ks;
    p->fd = p->dirfd = p->lockfd = p->child_pipe = -1;
    snprintf(p->dir, sizeof p->dir, "%s", cfg->dir[0] ? cfg->dir : ".");
    p->fsync_mode = cfg->appendfsync;
    p->appendonly = cfg->appendonly;
    p->auto_rewrite_min = cfg->auto_rewrite_min;
    p->auto_rewrite_pct = cfg->auto_rewrite_pct;
    p->map_threshold = cfg->map_threshold;
    p->repair = cfg->repair_aof;

    if (mkdir(p->dir, 0755) != 0 && errno != EEXIST) {
        errf(err, sizeof err, "%s: %s", p->dir, strerror(errno));
        goto fail;
    }
    p->dirfd = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (p->dirfd < 0) {
        errf(err, sizeof err, "%s: %s", p->dir, strerror(errno));
        goto fail;
    }
    if (lock_dir(p, err, sizeof err) != 0) goto fail;
    if (recover(p, err, sizeof err) != 0) goto fail;
    p->appended = p->written = p->synced = 0;
    if (p->fsync_mode == BKS_FSYNC_EVERYSEC) {
        if (pthread_create(&p->syncer, NULL, syncer_main, p) != 0) {
            errf(err, sizeof err, "cannot start the fsync thread");
            goto fail;
        }
        p->have_syncer = 1;
    }
    *out = p;
    return 0;
fail:
    bks_log(BKS_LOG_ERROR, "persist: cannot start: %s", err);
    bks_persist_close(p);
    return -1;
}

void bks_persist_close(bks_persist *p)
{
    if (p == NULL) return;
    pthread_mutex_lock(&p->ctl_mu);
    if (p->child != 0) {
        kill(p->child, SIGKILL);
        reap_child(p, 1);
    }
    pthread_mutex_unlock(&p->ctl_mu);

    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->stop_cv);
    pthread_mutex_unlock(&p->mu);
    if (p->have_syncer) pthread_join(p->syncer, NULL);

    pthread_mutex_lock(&p->mu);
    while (p->writing) pthread_cond_wait(&p->cv, &p->mu);
    if (p->fd >= 0 && !p->broken) {
        if (p->len > 0) lead_write(p);
        if (!p->broken && fdatasync(p->fd) != 0)
            bks_log(BKS_LOG_ERROR, "persist: final fdatasync failed: %s", strerror(errno));
    }
    pthread_mutex_unlock(&p->mu);

    if (p->fd >= 0) close(p->fd);
    if (p->lockfd >= 0) close(p->lockfd);
    if (p->dirfd >= 0) close(p->dirfd);
    free(p->buf);
    free(p->spare);
    free(p->logs.gens);
    pthread_cond_destroy(&p->cv);
    pthread_cond_destroy(&p->stop_cv);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->ctl_mu);
    free(p);
}
