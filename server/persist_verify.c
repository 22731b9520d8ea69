/*
 * persist_verify.c - the payload checksums of mapped filters, and
 * bloomkit-server --check-data.
 *
 * Filters larger than map-threshold are mapped copy-on-write from their
 * snapshot's .bkf files at start-up: usable at once, read as touched. The
 * mapping validates the file's header and descriptors but not the payload
 * checksum, which would mean reading the whole file before serving. A
 * damaged payload would then answer false negatives, the one answer a Bloom
 * filter promises never to give. So every key loaded with mapped filters
 * gets a guard:
 *
 *   - a background thread, started once start-up is over, reads each
 *     guarded file through a second, read-only mapping with the library's
 *     full check (BK_MAP_VERIFY) and marks the guard OK or CORRUPT;
 *   - a command that opens a guarded key first asks bks_guard_check: OK
 *     lets it through (and the keyspace forgets the guard), UNVERIFIED
 *     verifies that key right there, in the calling thread (the background
 *     thread may be elsewhere), CORRUPT refuses it with an error naming the
 *     file. No reply is ever computed from unverified data, and nothing is
 *     written into a mapping before its file has been checked;
 *   - a snapshot first finishes every verification (pst_verify_all), so
 *     that no unverified byte is copied into a new snapshot with a fresh,
 *     valid checksum; a corrupt key is written as a KEY_CORRUPT frame (its
 *     name, kind, the bad file and why), which keeps it refused across
 *     restarts until it is deleted or overwritten.
 *
 * The files are checked by path: snapshot directories are only deleted
 * after a newer snapshot is installed, and every snapshot starts with
 * pst_verify_all, so a guarded file exists for as long as it is needed (a
 * file removed behind the server's back is reported as corrupt).
 *
 * A guard's state only moves UNVERIFIED -> OK or UNVERIFIED -> CORRUPT, under
 * its mutex; readers look at it with an acquire load first.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>     /* PRIu64 */
#include <limits.h>       /* PATH_MAX */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "persist_int.h"

/*==========================================================================
 * Guards
 *==========================================================================*/

bks_guard *pst_guard_new(bks_persist *p, int state)
{
    bks_guard *g = calloc(1, sizeof *g);
    if (g == NULL) return NULL;
    pthread_mutex_init(&g->mu, NULL);
    atomic_store(&g->state, state);
    g->p = p;
    g->next = p->guards;
    p->guards = g;
    if (state == GUARD_UNVERIFIED) atomic_fetch_add(&p->guards_unverified, 1);
    if (state == GUARD_CORRUPT) atomic_fetch_add(&p->guards_corrupt, 1);
    return g;
}

int pst_guard_add_path(bks_guard *g, const char *path)
{
    char **np = realloc(g->paths, (g->npaths + 1) * sizeof *np);
    if (np == NULL) return -1;
    g->paths = np;
    if ((np[g->npaths] = strdup(path)) == NULL) return -1;
    g->npaths++;
    return 0;
}

static void drop_paths(bks_guard *g)
{
    for (uint32_t i = 0; i < g->npaths; i++) free(g->paths[i]);
    free(g->paths);
    g->paths = NULL;
    g->npaths = 0;
}

/* A guard loaded from a KEY_CORRUPT frame (state already CORRUPT). */
void pst_guard_set_corrupt(bks_guard *g, const char *file, const char *why)
{
    snprintf(g->file, sizeof g->file, "%s", file);
    snprintf(g->why, sizeof g->why, "%s", why);
}

int pst_guard_state(bks_guard *g)
{
    return atomic_load_explicit(&g->state, memory_order_acquire);
}

/* Read every file of g with the full check. Called with g->mu held. */
static void verify_locked(bks_guard *g)
{
    if (atomic_load(&g->state) != GUARD_UNVERIFIED) return;
    bks_persist *p = g->p;
    int state = GUARD_OK;
    for (uint32_t i = 0; i < g->npaths && state == GUARD_OK; i++) {
        bk_filter *f = NULL;
        int rc;
#ifdef BK_MAP_VERIFY
        rc = bk_filter_map(&f, g->paths[i], BK_MAP_READONLY | BK_MAP_VERIFY);
#else
        rc = bk_filter_load(&f, g->paths[i]);
#endif
        bk_filter_free(f);
        if (rc == BK_OK) continue;
        state = GUARD_CORRUPT;
        snprintf(g->file, sizeof g->file, "%s", g->paths[i]);
        if (rc == BK_ECHECKSUM)
            snprintf(g->why, sizeof g->why, "payload checksum mismatch");
        else if (rc == BK_EIO)
            snprintf(g->why, sizeof g->why, "cannot read it: %s", strerror(errno));
        else
            snprintf(g->why, sizeof g->why, "%s", bk_strerror(rc));
    }
    drop_paths(g);
    atomic_store_explicit(&g->state, state, memory_order_release);
    atomic_fetch_sub(&p->guards_unverified, 1);
    if (state == GUARD_CORRUPT) {
        atomic_fetch_add(&p->guards_corrupt, 1);
        bks_log(BKS_LOG_ERROR, "persist: snapshot file %s: %s: its key is refused from now "
                "on (DEL it, or restore it from a backup); every other key keeps serving",
                g->file, g->why);
    }
}

int bks_guard_check(bks_guard *g, bkc_str name, char *msg, size_t cap)
{
    int state = pst_guard_state(g);
    if (state == GUARD_UNVERIFIED) {
        pthread_mutex_lock(&g->mu);
        verify_locked(g);
        pthread_mutex_unlock(&g->mu);
        state = pst_guard_state(g);
    }
    if (state == GUARD_OK) return 0;
    snprintf(msg, cap, "ERR filter '%.*s' is corrupt in snapshot file %s: %s",
             (int)(name.len > 128 ? 128 : name.len), name.ptr, g->file, g->why);
    return -1;
}

/*==========================================================================
 * The background verifier
 *==========================================================================*/

static void *verifier_main(void *arg)
{
    bks_persist *p = arg;
    uint64_t t0 = pst_mono_ms(), n = 0;
    /* Test hook: hold the verifier back, so that the tests can reach a
     * key before it does (tests/server/test_faults.py). */
    const char *delay = getenv("BKS_TEST_VERIFY_DELAY_MS");
    if (delay != NULL) {
        uint64_t until = pst_mono_ms() + strtoull(delay, NULL, 10);
        while (!atomic_load(&p->verifier_stop) && pst_mono_ms() < until) usleep(10000);
    }
    for (bks_guard *g = p->guards; g != NULL && !atomic_load(&p->verifier_stop); g = g->next) {
        if (pst_guard_state(g) != GUARD_UNVERIFIED) continue;
        pthread_mutex_lock(&g->mu);
        verify_locked(g);
        pthread_mutex_unlock(&g->mu);
        n++;
    }
    atomic_store(&p->verifying, 0);
    if (!atomic_load(&p->verifier_stop))
        bks_log(BKS_LOG_INFO, "persist: mapped filters verified (%" PRIu64 " keys here, %"
                PRIu64 " ms): %" PRIu64 " corrupt", n, pst_mono_ms() - t0,
                (uint64_t)atomic_load(&p->guards_corrupt));
    return NULL;
}

void pst_verify_start(bks_persist *p)
{
    if (atomic_load(&p->guards_unverified) == 0) return;
    atomic_store(&p->verifying, 1);
    if (pthread_create(&p->verifier, NULL, verifier_main, p) != 0) {
        /* Not fatal: every key is still verified on its first use. */
        atomic_store(&p->verifying, 0);
        bks_log(BKS_LOG_WARNING, "persist: cannot start the verifier thread: mapped "
                "filters are verified as they are first used");
        return;
    }
    p->have_verifier = 1;
    bks_log(BKS_LOG_INFO, "persist: verifying %" PRIu64 " keys' mapped filters in the "
            "background", (uint64_t)atomic_load(&p->guards_unverified));
}

/* Before a snapshot: nothing unverified may be copied into it. */
void pst_verify_all(bks_persist *p)
{
    if (atomic_load(&p->guards_unverified) == 0) return;
    for (bks_guard *g = p->guards; g != NULL; g = g->next) {
        if (pst_guard_state(g) != GUARD_UNVERIFIED) continue;
        pthread_mutex_lock(&g->mu);
        verify_locked(g);
        pthread_mutex_unlock(&g->mu);
    }
}

void pst_verify_stop(bks_persist *p)
{
    atomic_store(&p->verifier_stop, 1);
    if (p->have_verifier) pthread_join(p->verifier, NULL);
    p->have_verifier = 0;
}

void pst_guards_free(bks_persist *p)
{
    bks_guard *g = p->guards;
    while (g != NULL) {
        bks_guard *next = g->next;
        drop_paths(g);
        pthread_mutex_destroy(&g->mu);
        free(g);
        g = next;
    }
    p->guards = NULL;
}

/*==========================================================================
 * --check-data
 *==========================================================================*/

/* Scan every record of one log; 0 sound, 1 damaged. A torn tail of the
 * last log is what start-up drops with a warning: reported, not damage. */
static int check_log(const char *dir, uint64_t gen, int last, FILE *out)
{
    char name[64], path[PATH_MAX];
    pst_log_name(name, sizeof name, gen);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(out, "BAD   %s: %s\n", path, strerror(errno));
        if (fd >= 0) close(fd);
        return 1;
    }
    size_t size = (size_t)st.st_size;
    const unsigned char *base = NULL;
    if (size > 0 && (base = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
        fprintf(out, "BAD   %s: %s\n", path, strerror(errno));
        close(fd);
        return 1;
    }
    close(fd);
    int bad = 0;
    uint64_t records = 0;
    if (size < LOG_HEADER_SIZE || !pst_log_header_check(base, gen)) {
        fprintf(out, "BAD   %s offset 0: %s\n", path,
                size < LOG_HEADER_SIZE ? "truncated log header" : "bad log header");
        bad = 1;
    } else {
        size_t off = LOG_HEADER_SIZE;
        for (;;) {
            record r;
            const char *why = NULL;
            rec_status s = pst_record_scan(base, size, off, &r, &why);
            if (s == REC_END) break;
            int argc;
            bkc_str *argv = NULL;
            if (s == REC_OK && pst_resp_decode(r.payload, r.payload_len, &argc, &argv) != 0) {
                s = REC_BAD;
                why = "record payload is not a RESP array of bulk strings";
            }
            free(argv);
            if (s == REC_TORN && last) {
                fprintf(out, "WARN  %s offset %zu: %s (%zu bytes a restart drops: a write "
                        "torn by a crash, or one in progress)\n", path, off, why, size - off);
                break;
            }
            if (s != REC_OK) {
                fprintf(out, "BAD   %s offset %zu: %s\n", path, off,
                        s == REC_TORN ? "log ends inside a record, and later logs follow" : why);
                bad = 1;
                break;
            }
            records++;
            off += r.size;
        }
    }
    if (!bad) fprintf(out, "ok    %s: %" PRIu64 " records\n", path, records);
    if (base != NULL) munmap((void *)base, size);
    return bad;
}

int bks_persist_check_data(const bks_config *cfg, FILE *out)
{
    bks_persist *p = calloc(1, sizeof *p);
    if (p == NULL) {
        fprintf(out, "out of memory\n");
        return 1;
    }
    int bad = 0;
    char err[1024];
    snprintf(p->dir, sizeof p->dir, "%s", cfg->dir[0] ? cfg->dir : ".");
    p->map_threshold = cfg->map_threshold;
    p->fd = p->lockfd = p->child_pipe = -1;
    p->check_out = out;
    p->dirfd = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (p->dirfd < 0) {
        fprintf(out, "BAD   %s: %s\n", p->dir, strerror(errno));
        free(p);
        return 1;
    }
    fprintf(out, "checking %s\n", p->dir);
    uint64_t snap = 0;
    int have = pst_current_read(p, &snap, &p->logs, err, sizeof err);
    if (have <= 0) {
        gen_list snaps = {NULL, 0, 0}, logs = {NULL, 0, 0}, data = {NULL, 0, 0};
        pst_scan_dir(p, &snaps, &logs, &data);
        if (have == 0 && snaps.n == 0 && data.n == 0) {
            fprintf(out, "ok    no CURRENT and no data: an empty data directory\n");
        } else {
            fprintf(out, "BAD   %s\n", have == 0 ? "CURRENT is missing, but the directory "
                    "holds data files (bloomkit-server --rebuild-manifest rebuilds it)" : err);
            bad = 1;
        }
        /* Check what is there anyway: the report says what a rebuild has. */
        for (size_t i = 0; i < snaps.n; i++) {
            uint64_t nkeys = 0;
            p->check_bad = 0;
            if (pst_snapshot_load(p, snaps.gens[i], 1, &nkeys, err, sizeof err) != 0) {
                fprintf(out, "BAD   %s\n", err);
            } else if (p->check_bad > 0) {
                fprintf(out, "BAD   %s/snap-%" PRIu64 ": %" PRIu64 " keys, %" PRIu64
                        " damaged (above)\n", p->dir, snaps.gens[i], nkeys, p->check_bad);
            } else {
                fprintf(out, "ok    %s/snap-%" PRIu64 ": %" PRIu64 " keys, every checksum "
                        "verified\n", p->dir, snaps.gens[i], nkeys);
            }
        }
        for (size_t i = 0; i < logs.n; i++)
            check_log(p->dir, logs.gens[i], i + 1 == logs.n, out);
        free(snaps.gens);
        free(logs.gens);
        free(data.gens);
    } else {
        fprintf(out, "ok    %s/CURRENT: snapshot %" PRIu64 ", %zu log(s)\n", p->dir, snap,
                p->logs.n);
        if (snap != 0) {
            uint64_t nkeys = 0;
            p->check_bad = 0;
            if (pst_snapshot_load(p, snap, 1, &nkeys, err, sizeof err) != 0) {
                fprintf(out, "BAD   %s\n", err);
                bad = 1;
            } else if (p->check_bad > 0) {
                fprintf(out, "BAD   %s/snap-%" PRIu64 ": %" PRIu64 " keys, %" PRIu64
                        " damaged (above)\n", p->dir, snap, nkeys, p->check_bad);
                bad = 1;
            } else {
                fprintf(out, "ok    %s/snap-%" PRIu64 ": %" PRIu64 " keys, every checksum "
                        "verified\n", p->dir, snap, nkeys);
            }
        }
        for (size_t i = 0; i < p->logs.n; i++)
            bad |= check_log(p->dir, p->logs.gens[i], i + 1 == p->logs.n, out);
    }
    fprintf(out, "%s\n", bad ? "DAMAGED: see the BAD lines above" : "all data verified");
    close(p->dirfd);
    free(p->logs.gens);
    free(p);
    return bad;
}
