/*
 * persist_snapwrite.c - writing snap-<G>/ (docs/PERSISTENCE.md, "Snapshot:
 * manifest"): a manifest of checksummed frames, one per key, with small
 * values inline and filters above map_threshold in <n>.bkf files of their
 * own. Runs in the fork child of BGSAVE (or in SAVE with the server
 * paused): it takes no lock, calls no libuv and no bks_log (errors travel
 * back as text), and the child ends with _exit.
 */
#include <signal.h>
#include <sys/prctl.h>    /* PR_SET_PDEATHSIG: the child dies with the parent */
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
    if (!w->failed && w->len > 0 && pst_write_all(w->fd, w->buf, w->len) != 0) w->failed = 1;
    w->len = 0;
}

static void mw_put(mwriter *w, const void *data, size_t n)
{
    w->off += n;
    if (w->len + n > w->cap) mw_flush(w);
    if (n > w->cap) {
        if (!w->failed && pst_write_all(w->fd, data, n) != 0) w->failed = 1;
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
    if (at) pst_put32(at, v);
}

static void sb_u64(sbuf *b, uint64_t v)
{
    unsigned char *at = sb_grow(b, 8);
    if (at) pst_put64(at, v);
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
    pst_put32(b->p, magic);
    pst_put32(b->p + 4, (uint32_t)(b->len - 8));
    sb_u64(b, 0);
    if (b->failed) {
        w->failed = 1;
        return;
    }
    pst_put64(b->p + b->len - 8, pst_checksum(b->p, b->len - 8));
    mw_put(w, b->p, b->len);
}

typedef struct snap_ctx {
    int sdir;               /* the snapshot directory */
    int installed;          /* the installed snapshot's directory (-1: none) */
    mwriter w;              /* its manifest */
    sbuf body;
    sbuf files;             /* the "files" list: key, value, file (pst_adopt_files) */
    uint64_t nkeys;
    uint64_t gen;
    uint64_t next_file;
    uint64_t cutoff_ms;     /* keys expired by then are left out */
    uint64_t map_threshold; /* filters larger than this get a file of their own */
    uint64_t bytes;
    uint64_t linked, linked_bytes;
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

/* The start of a key's frame in c->body: room for the magic and length
 * (write_frame fills them), the name, its expiry and how the key is
 * stored (KEY_INLINE, KEY_SPLIT, KEY_CORRUPT). */
static sbuf *key_frame_start(snap_ctx *c, bkc_str name, uint64_t expire_at_ms, uint32_t how)
{
    sbuf *b = &c->body;
    b->len = 0;
    sb_grow(b, 8);
    sb_u32(b, (uint32_t)name.len);
    sb_bytes(b, name.ptr, name.len);
    sb_u64(b, expire_at_ms);
    sb_u32(b, how);
    return b;
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
        pst_errf(c->err, sizeof c->err, "key '%.*s': cannot encode its value: %s",
             (int)(name.len > 64 ? 64 : name.len), name.ptr, bk_strerror(rc));
        return -1;
    }
    sbuf *b = key_frame_start(c, name, expire_at_ms, KEY_INLINE);
    sb_u64(b, blen);
    write_frame(&c->w, b, MAN_MAGIC_KEY);
    mw_put(&c->w, blob, blen);
    free(blob);
    return 0;
}

/* The file <file>.bkf of filter f: a link to the installed snapshot's
 * file when the key's value has not changed since it was read from it or
 * written to it (origin, bks_keyspace_adopt), else written. A file keeps
 * its number from snapshot to snapshot; a new one is numbered
 * gen << 24 | n, so that numbers never meet. Returns 0 or -1 (c->err). */
static int snap_file(snap_ctx *c, const bk_filter *f, uint64_t size, uint64_t origin,
                     uint64_t *file)
{
    char fname[32];
    *file = origin ? origin : c->gen << 24 | ++c->next_file;
    snprintf(fname, sizeof fname, "%" PRIu64 ".bkf", *file);
    if (origin && c->installed >= 0) {
        struct stat st;
        /* the size check is cheap insurance: a file of another size
         * cannot hold this filter */
        if (fstatat(c->installed, fname, &st, 0) == 0 && (uint64_t)st.st_size == size &&
            linkat(c->installed, fname, c->sdir, fname, 0) == 0) {
            c->linked++;
            c->linked_bytes += size;
            c->bytes += size;
            return 0;
        }
        /* gone or different (cannot happen): write it, under the same
         * number, which no other file of this snapshot has */
    }
    int fd = openat(c->sdir, fname, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = fd < 0 ? BK_EIO : bk_filter_write_fd(f, fd);
    if (rc == BK_OK && fsync(fd) != 0) rc = BK_EIO;
    if (fd >= 0 && close(fd) != 0 && rc == BK_OK) rc = BK_EIO;
    if (rc != BK_OK) {
        pst_errf(c->err, sizeof c->err, "%s: %s (%s)", fname, bk_strerror(rc), strerror(errno));
        return -1;
    }
    c->bytes += size;
    return 0;
}

/* A key with a filter above map_threshold: its settings, then per filter
 * an image inline after the frame or a file <n>.bkf of its own. */
static int snap_key_split(snap_ctx *c, bkc_str name, const bkc_value *v,
                          uint64_t expire_at_ms, uint64_t origin)
{
    sbuf *b = key_frame_start(c, name, expire_at_ms, KEY_SPLIT);
    sb_u32(b, (uint32_t)v->kind);
    static const bkc_cf_settings no_cf; /* zeros for the other kinds */
    const bkc_cf_settings *cf = v->kind == BKC_KIND_CUCKOO && v->cf ? v->cf : &no_cf;
    sb_u64(b, cf->capacity);
    sb_u32(b, cf->bucket_size);
    sb_u32(b, cf->max_iterations);
    sb_u32(b, cf->expansion);
    sb_u64(b, cf->deleted);
    sb_u32(b, v->nfilters);
    for (uint32_t i = 0; i < v->nfilters; i++) {
        const bk_filter *f = v->filters[i];
        uint64_t size = bk_filter_serialized_size(f);
        uint64_t file = 0;
        if (size == 0) {
            pst_errf(c->err, sizeof c->err, "key '%.*s': filter %u has no file codec",
                 (int)(name.len > 64 ? 64 : name.len), name.ptr, i);
            return -1;
        }
        if (size > c->map_threshold) {
            /* an origin names the file of a key's one filter */
            if (snap_file(c, f, size, v->nfilters == 1 ? origin : 0, &file) != 0) return -1;
            if (v->nfilters == 1) {
                uintptr_t at = (uintptr_t)v;
                sb_u32(&c->files, (uint32_t)name.len);
                sb_bytes(&c->files, name.ptr, name.len);
                sb_u64(&c->files, (uint64_t)at);
                sb_u64(&c->files, file);
            }
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

/* A key found corrupt: its name, kind, the bad file and why; never its
 * data (copying it would give corrupt bits a valid checksum). */
static int snap_key_corrupt(snap_ctx *c, bkc_str name, const bkc_value *v,
                            uint64_t expire_at_ms, const bks_guard *g)
{
    size_t flen = strlen(g->file), wlen = strlen(g->why);
    sbuf *b = key_frame_start(c, name, expire_at_ms, KEY_CORRUPT);
    sb_u32(b, (uint32_t)v->kind);
    sb_u32(b, (uint32_t)flen);
    sb_bytes(b, g->file, flen);
    sb_u32(b, (uint32_t)wlen);
    sb_bytes(b, g->why, wlen);
    write_frame(&c->w, b, MAN_MAGIC_KEY);
    return 0;
}

static int snap_key(void *arg, bkc_str name, const bkc_value *v, uint64_t expire_at_ms,
                    bks_guard *guard, uint64_t origin)
{
    snap_ctx *c = arg;
    if (v == NULL) return 0;
    if (expire_at_ms != 0 && expire_at_ms <= c->cutoff_ms) return 0;
    if (name.len > UINT32_MAX / 2) {
        pst_errf(c->err, sizeof c->err, "a key name is too long");
        return -1;
    }
    int state = guard ? pst_guard_state(guard) : GUARD_OK;
    if (state == GUARD_UNVERIFIED) {
        /* pst_start_snapshot verifies everything first: cannot happen */
        pst_errf(c->err, sizeof c->err, "key '%.*s': mapped filter not verified yet",
                 (int)(name.len > 64 ? 64 : name.len), name.ptr);
        return -1;
    }
    int rc = state == GUARD_CORRUPT ? snap_key_corrupt(c, name, v, expire_at_ms, guard)
             : value_is_split(v, c->map_threshold) ? snap_key_split(c, name, v, expire_at_ms, origin)
                                                   : snap_key_inline(c, name, v, expire_at_ms);
    if (rc != 0) return -1;
    if (c->w.failed || c->body.failed) {
        pst_errf(c->err, sizeof c->err, "manifest: %s",
             c->body.failed ? "out of memory" : strerror(errno));
        return -1;
    }
    c->nkeys++;
    return 0;
}

/* The "files" list of snap-<gen>/ (not part of the snapshot: the parent
 * reads it once the snapshot is installed, then removes it). Best effort:
 * without it, nothing is reused until the next start. */
static void write_files_list(snap_ctx *c)
{
    if (c->files.failed || c->files.len == 0) return;
    int fd = openat(c->sdir, "files", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    int bad = pst_write_all(fd, c->files.p, c->files.len) != 0;
    if (close(fd) != 0 || bad) unlinkat(c->sdir, "files", 0);
}

/* Write snap-<gen>/ from the keyspace and make it durable; the filter files
 * of unchanged keys are links to those of snap-<installed>/ (0: none). Runs
 * in the fork child (or with the server paused): no locks, no logging.
 * Errors go to rep->msg. */
int pst_snapshot_write(bks_keyspace *ks, int dirfd, uint64_t gen, uint64_t installed,
                       uint64_t map_threshold, child_report *rep)
{
    char name[64];
    char *err = rep->msg;
    size_t errlen = sizeof rep->msg;
    snap_ctx c;
    memset(&c, 0, sizeof c);
    c.sdir = -1;
    c.installed = -1;
    c.w.fd = -1;
    c.gen = gen;
    c.cutoff_ms = pst_wall_ms();
    c.map_threshold = map_threshold;
    pst_snap_name(name, sizeof name, gen);
    int rc = -1;
    if (installed != 0 && installed != gen) {
        char iname[64];
        pst_snap_name(iname, sizeof iname, installed);
        c.installed = openat(dirfd, iname, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }

    pst_remove_tree_at(dirfd, name);
    if (mkdirat(dirfd, name, 0700) != 0 ||
        (c.sdir = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
        (c.w.fd = openat(c.sdir, "manifest", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
        pst_errf(err, errlen, "%s: %s", name, strerror(errno));
        goto done;
    }
    c.w.cap = 1 << 16;
    c.w.buf = malloc(c.w.cap);
    if (c.w.buf == NULL) {
        pst_errf(err, errlen, "out of memory");
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
        pst_errf(err, errlen, "%s/%s", name, c.err[0] ? c.err : "keyspace walk failed");
        goto done;
    }
    c.body.len = 0;
    sb_grow(&c.body, 8);
    sb_u64(&c.body, c.nkeys);
    write_frame(&c.w, &c.body, MAN_MAGIC_END);
    mw_flush(&c.w);
    if (c.w.failed || fsync(c.w.fd) != 0 || close(c.w.fd) != 0) {
        c.w.fd = -1;
        pst_errf(err, errlen, "%s/manifest: %s", name, strerror(errno));
        goto done;
    }
    c.w.fd = -1;
    if (fsync(c.sdir) != 0 || fsync(dirfd) != 0) {
        pst_errf(err, errlen, "%s: fsync: %s", name, strerror(errno));
        goto done;
    }
    write_files_list(&c);
    rep->bytes = c.bytes + c.w.off;
    rep->linked = c.linked;
    rep->linked_bytes = c.linked_bytes;
    rc = 0;
done:
    if (c.w.fd >= 0) close(c.w.fd);
    if (c.sdir >= 0) close(c.sdir);
    if (c.installed >= 0) close(c.installed);
    free(c.w.buf);
    free(c.body.p);
    free(c.files.p);
    return rc;
}

/* The fork child: write the snapshot, report through the pipe, _exit. */
void pst_child_main(bks_persist *p, uint64_t gen, int wfd, pid_t parent)
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
    int rc = pst_snapshot_write(p->ks, p->dirfd, gen, p->snap_gen, p->map_threshold, &rep);
    rep.ok = rc == 0;
    if (write(wfd, &rep, sizeof rep) != (ssize_t)sizeof rep) { /* parent reports a bare failure */ }
    _exit(rc == 0 ? 0 : 1);
}

