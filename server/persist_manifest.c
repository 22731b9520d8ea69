/*
 * persist_manifest.c - generations and CURRENT, the data directory's
 * manifest: the one place that decides which files are live and which may
 * be deleted.
 *
 * Invariants (a crash at any instant must leave them true):
 *
 *   M1. CURRENT is only ever replaced whole: CURRENT.tmp written and
 *       fsynced, renamed over CURRENT, the directory fsynced.
 *   M2. Every file CURRENT names is complete and durable before CURRENT
 *       names it (a new log: its header fdatasynced; a snapshot: every
 *       file and both directories fsynced by the child that wrote it).
 *   M3. The state is CURRENT's snapshot plus its logs replayed in order; it
 *       holds every acknowledged write. A log is durable up to its last
 *       acknowledged record before any record is appended to a later one.
 *   M4. Live files are exactly those CURRENT names: snap-<S>/ for its
 *       snapshot S, appendonly-<G>.log for each listed G, and LOCK.
 *       Anything else named snap-<n> or appendonly-<n>.log, and
 *       CURRENT.tmp, is debris of an interrupted step or of a finished
 *       generation, and only remove_unreferenced deletes it.
 *   M5. remove_unreferenced runs only with a CURRENT that was just read
 *       (and verified) or just written. With no readable CURRENT nothing
 *       is deleted and start-up refuses (pst_recover: no_current), unless
 *       the directory holds no snapshot and no log with a record (a first
 *       start that crashed before CURRENT: its empty logs may go), or
 *       --rebuild-manifest rebuilds CURRENT (pst_rebuild_current), after
 *       which nothing is deleted until the next snapshot is installed.
 *   M6. Generation numbers only grow: a new generation is numbered above
 *       every generation present on disk.
 *
 * From M3 and M6: snapshot S holds the keyspace as it was when log S
 * began, and every later write is in log S or a later one. That is what
 * lets --rebuild-manifest take the newest complete snapshot and every log
 * numbered from it on.
 *
 * A failing log (persist_commit.c) is recovered here too: pst_mark_broken
 * refuses writes, the tick retries pst_start_snapshot with backoff
 * (pst_schedule_retry), and pst_finish_generation ends the refusal once a
 * snapshot begun after the failure is installed (docs/PERSISTENCE.md,
 * "Disk faults").
 */
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
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
#include "server_int.h"   /* g_srv.write_error: the host's refusal of writes */

int pst_gens_push(gen_list *l, uint64_t g)
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

int pst_gens_has(const gen_list *l, uint64_t g)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->gens[i] == g) return 1;
    return 0;
}

/*==========================================================================
 * CURRENT
 *==========================================================================*/

int pst_current_write(bks_persist *p, uint64_t snap, const gen_list *logs,
                         char *err, size_t errlen)
{
    size_t cap = 128 + logs->n * 32, n;
    char *text = malloc(cap);
    int fd = -1, rc = -1;
    if (text == NULL) {
        pst_errf(err, errlen, "out of memory");
        return -1;
    }
    n = (size_t)snprintf(text, cap, "%s\nsnapshot %" PRIu64 "\n", CURRENT_MAGIC, snap);
    for (size_t i = 0; i < logs->n; i++)
        n += (size_t)snprintf(text + n, cap - n, "log %" PRIu64 "\n", logs->gens[i]);
    n += (size_t)snprintf(text + n, cap - n, "check %016" PRIx64 "\n", pst_checksum(text, n));

    fd = openat(p->dirfd, "CURRENT.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || pst_write_all(fd, text, n) != 0 || fsync(fd) != 0) goto io;
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
    pst_errf(err, errlen, "%s/CURRENT: %s", p->dir, strerror(errno));
    if (fd >= 0) close(fd);
done:
    free(text);
    return rc;
}

/* Parse CURRENT. Returns 1 when read, 0 when there is none, -1 on error. */
int pst_current_read(bks_persist *p, uint64_t *snap, gen_list *logs,
                        char *err, size_t errlen)
{
    int fd = openat(p->dirfd, "CURRENT", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        pst_errf(err, errlen, "%s/CURRENT: %s", p->dir, strerror(errno));
        return -1;
    }
    char text[65536];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, text + n, sizeof text - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            pst_errf(err, errlen, "%s/CURRENT: %s", p->dir, strerror(errno));
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
        want != pst_checksum(text, (size_t)(check - text))) {
        pst_errf(err, errlen, "%s/CURRENT: damaged (bad header or checksum)", p->dir);
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
            if (pst_gens_push(logs, g) != 0) {
                pst_errf(err, errlen, "out of memory");
                return -1;
            }
        } else {
            pst_errf(err, errlen, "%s/CURRENT: unexpected line '%.64s'", p->dir, line);
            return -1;
        }
    }
    if (!have_snap || logs->n == 0) {
        pst_errf(err, errlen, "%s/CURRENT: no snapshot line or no log", p->dir);
        return -1;
    }
    return 1;
}

/* Remove every file of ours that CURRENT (snap, logs) does not name: the
 * debris of an interrupted step or a finished generation. */
void pst_remove_unreferenced(bks_persist *p, uint64_t snap, const gen_list *logs)
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
        if ((g = pst_parse_gen_name(e->d_name, "appendonly-", ".log")) != 0) {
            if (!pst_gens_has(logs, g)) unlinkat(p->dirfd, e->d_name, 0);
        } else if ((g = pst_parse_gen_name(e->d_name, "snap-", "")) != 0) {
            if (g != snap) pst_remove_tree_at(p->dirfd, e->d_name);
        } else if (strcmp(e->d_name, "CURRENT.tmp") == 0) {
            unlinkat(p->dirfd, e->d_name, 0);
        }
    }
    closedir(d);
    fsync(p->dirfd);
}

/* The largest generation number present in the directory. */
uint64_t pst_max_gen_on_disk(bks_persist *p)
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
        uint64_t g = pst_parse_gen_name(e->d_name, "appendonly-", ".log");
        if (g == 0) g = pst_parse_gen_name(e->d_name, "snap-", "");
        if (g > max) max = g;
    }
    closedir(d);
    return max;
}

static int cmp_gen(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int pst_scan_dir(bks_persist *p, gen_list *snaps, gen_list *logs, gen_list *data_logs)
{
    int fd = openat(p->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return -1;
    }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL && rc == 0) {
        uint64_t g;
        struct stat st;
        if ((g = pst_parse_gen_name(e->d_name, "appendonly-", ".log")) != 0) {
            rc = pst_gens_push(logs, g);
            if (rc == 0 && fstatat(p->dirfd, e->d_name, &st, 0) == 0 &&
                (uint64_t)st.st_size > LOG_HEADER_SIZE)
                rc = pst_gens_push(data_logs, g);
        } else if ((g = pst_parse_gen_name(e->d_name, "snap-", "")) != 0) {
            rc = pst_gens_push(snaps, g);
        }
    }
    closedir(d);
    gen_list *all[3] = {snaps, logs, data_logs};
    for (int i = 0; i < 3; i++)
        if (all[i]->n > 1) qsort(all[i]->gens, all[i]->n, sizeof *all[i]->gens, cmp_gen);
    return rc;
}

/* --rebuild-manifest. Snapshot S holds the keyspace as it was when log S
 * began, and every write after that instant went to log S or a later one
 * (appends only ever go to the newest log). So the state is: the newest
 * snapshot that verifies completely (every frame, image and payload
 * checksum), plus every log numbered S or above, in order. Logs below S
 * and snapshots that do not verify are left where they are; nothing is
 * deleted at this start (p->keep_debris). A damaged CURRENT is kept as
 * CURRENT.damaged-<unix seconds>. */
int pst_rebuild_current(bks_persist *p, uint64_t *snap, char *err, size_t errlen)
{
    gen_list snaps = {NULL, 0, 0}, logs = {NULL, 0, 0}, data = {NULL, 0, 0};
    char why[1024], list[512];
    int rc = -1;
    uint64_t s = 0, nkeys = 0;
    size_t n = 0;
    if (pst_scan_dir(p, &snaps, &logs, &data) != 0) {
        pst_errf(err, errlen, "%s: cannot list the directory: %s", p->dir, strerror(errno));
        goto done;
    }
    for (size_t i = snaps.n; i > 0; i--) {
        if (pst_snapshot_load(p, snaps.gens[i - 1], 1, &nkeys, why, sizeof why) == 0) {
            s = snaps.gens[i - 1];
            break;
        }
        bks_log(BKS_LOG_WARNING, "persist: --rebuild-manifest: snap-%" PRIu64 " is not "
                "complete, passed over: %s", snaps.gens[i - 1], why);
    }
    p->logs.n = 0;
    list[0] = '\0';
    for (size_t i = 0; i < logs.n; i++) {
        if (logs.gens[i] < s) continue;
        if (pst_gens_push(&p->logs, logs.gens[i]) != 0) {
            pst_errf(err, errlen, "out of memory");
            goto done;
        }
        if (n < sizeof list - 32)
            n += (size_t)snprintf(list + n, sizeof list - n, " %" PRIu64, logs.gens[i]);
    }
    if (s != 0 && (p->logs.n == 0 || p->logs.gens[0] != s))
        bks_log(BKS_LOG_WARNING, "persist: --rebuild-manifest: appendonly-%" PRIu64 ".log "
                "(the log that began with snap-%" PRIu64 ") is missing: writes made right "
                "after that snapshot may be missing", s, s);
    if (p->logs.n == 0) {
        /* No log to go on with: a new, empty one. */
        uint64_t gen = pst_max_gen_on_disk(p) + 1;
        int fd;
        if (pst_log_create(p, gen, &fd, err, errlen) != 0) goto done;
        close(fd);
        if (pst_gens_push(&p->logs, gen) != 0) {
            pst_errf(err, errlen, "out of memory");
            goto done;
        }
        snprintf(list, sizeof list, " %" PRIu64 " (new, empty)", gen);
    }
    struct stat st;
    if (fstatat(p->dirfd, "CURRENT", &st, 0) == 0) {
        char keep[64];
        snprintf(keep, sizeof keep, "CURRENT.damaged-%" PRIu64, pst_wall_ms() / 1000);
        if (renameat(p->dirfd, "CURRENT", p->dirfd, keep) == 0)
            bks_log(BKS_LOG_WARNING, "persist: --rebuild-manifest: the damaged CURRENT is "
                    "kept as %s/%s", p->dir, keep);
    }
    if (pst_current_write(p, s, &p->logs, err, errlen) != 0) goto done;
    if (s != 0)
        bks_log(BKS_LOG_WARNING, "persist: --rebuild-manifest: rebuilt %s/CURRENT: snapshot "
                "%" PRIu64 " (%" PRIu64 " keys, verified), logs%s", p->dir, s, nkeys, list);
    else
        bks_log(BKS_LOG_WARNING, "persist: --rebuild-manifest: rebuilt %s/CURRENT: no "
                "complete snapshot, logs%s", p->dir, list);
    *snap = s;
    rc = 0;
done:
    free(snaps.gens);
    free(logs.gens);
    free(data.gens);
    return rc;
}


/*==========================================================================
 * Generations: starting and finishing a snapshot
 *==========================================================================*/

/* The child made snap-<gen>: name it in CURRENT with the logs from gen on,
 * then delete the older generation. Called with ctl_mu held. */
void pst_finish_generation(bks_persist *p, uint64_t gen, const child_report *rep)
{
    uint64_t bytes = rep->bytes;
    char err[512];
    gen_list nl = {NULL, 0, 0};
    for (size_t i = 0; i < p->logs.n; i++)
        if (p->logs.gens[i] >= gen && pst_gens_push(&nl, p->logs.gens[i]) != 0) {
            free(nl.gens);
            bks_log(BKS_LOG_ERROR, "persist: out of memory finishing snapshot %" PRIu64, gen);
            return;
        }
    if (pst_current_write(p, gen, &nl, err, sizeof err) != 0) {
        /* CURRENT still names the previous snapshot and every log since:
         * nothing is lost; the unreferenced snap-<gen> goes at next start. */
        bks_log(BKS_LOG_ERROR, "persist: snapshot %" PRIu64 " written but not installed: %s",
                gen, err);
        free(nl.gens);
        atomic_store(&p->last_bgsave_err, 1);
        pst_schedule_retry(p);
        return;
    }
    free(p->logs.gens);
    p->logs = nl;
    p->snap_gen = gen;
    p->snap_bytes = bytes;
    /* the status before LASTSAVE: a client that sees LASTSAVE move (how
     * clients wait for a BGSAVE) must not read the last failure's err */
    atomic_store(&p->last_bgsave_err, 0);
    atomic_store(&p->lastsave, pst_wall_ms() / 1000);
    atomic_store(&p->changes_saved, atomic_load(&p->changes_at_switch));
    pst_remove_unreferenced(p, gen, &p->logs);

    pthread_mutex_lock(&p->mu);
    p->older_log_bytes = 0;
    if (p->broken && p->broken_gen < gen) {
        /* The snapshot was taken after the failure, at the instant its log
         * (healthy: created and synced) began: it holds everything in
         * memory then, so whatever the failed log's tail lost or left
         * uncertain no longer matters. Writes may go on. */
        p->broken = 0;
        p->fault_delay_ms = 0;
        atomic_store(&g_srv.write_error, 0);
        bks_log(BKS_LOG_WARNING, "persist: writes resume: snapshot %" PRIu64 " holds what "
                "the failed log may have lost, and appendonly-%" PRIu64 ".log is healthy "
                "(writes were refused for %.1f s)", gen, p->live_gen,
                (double)(pst_mono_ms() - p->broken_since_ms) / 1000.0);
    }
    pthread_mutex_unlock(&p->mu);
    if (rep->linked)
        bks_log(BKS_LOG_INFO, "persist: snapshot %" PRIu64 " installed (%" PRIu64 " bytes; %"
                PRIu64 " filter files of unchanged keys linked, %" PRIu64 " bytes not written "
                "again)", gen, bytes, rep->linked, rep->linked_bytes);
    else
        bks_log(BKS_LOG_INFO, "persist: snapshot %" PRIu64 " installed (%" PRIu64 " bytes)", gen,
                bytes);
    pst_adopt_files(p, gen);
}


/* Once snap-<gen> is installed: every key whose filter file it holds, and
 * that has not changed since the snapshot's instant, takes that file as
 * its origin, for the next snapshot to link (the list "files" the writer
 * left: name, value, file number). The list is removed; a key it misses is
 * written again next time, which is slower, never wrong. */
void pst_adopt_files(bks_persist *p, uint64_t gen)
{
    char path[64 + 8];
    pst_snap_name(path, 64, gen);
    strcat(path, "/files");
    int fd = openat(p->dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    unsigned char *base = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size > 0)
        base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    unlinkat(p->dirfd, path, 0);
    if (base == MAP_FAILED) return;
    size_t n = (size_t)st.st_size, off = 0;
    uint64_t adopted = 0;
    while (n - off >= 4) {
        uint32_t len = pst_get32(base + off);
        if (len > n - off - 4 || n - off - 4 - len < 16) break;
        bkc_str name = {(const char *)base + off + 4, len};
        off += 4 + (size_t)len;
        uintptr_t at = (uintptr_t)pst_get64(base + off);
        uint64_t file = pst_get64(base + off + 8);
        off += 16;
        adopted += (uint64_t)bks_keyspace_adopt(p->ks, name, (const bkc_value *)at,
                                                p->snap_epoch, file);
    }
    munmap(base, n);
    if (adopted)
        bks_log(BKS_LOG_INFO, "persist: %" PRIu64 " unchanged keys keep their files of "
                "snapshot %" PRIu64, adopted, gen);
}

/* The log failed (write, fdatasync, or a record that could not be made):
 * writes are refused until a snapshot taken after this instant is
 * installed. Called with p->mu held. */
void pst_mark_broken(bks_persist *p, int err)
{
    atomic_store(&p->last_write_error_s, pst_wall_ms() / 1000);
    p->broken_errno = err;
    if (p->broken) return;
    p->broken = 1;
    p->broken_gen = p->live_gen;
    p->broken_since_ms = pst_mono_ms();
}

/* After a failed snapshot: while the log is failing, retry soon (1 s,
 * doubling to 4 s: a fault that clears is noticed within seconds, and an
 * attempt that fails early, at creating the new log, costs little);
 * otherwise (a compaction that failed) after RETRY_MS. Called with ctl_mu
 * held. */
void pst_schedule_retry(bks_persist *p)
{
    pthread_mutex_lock(&p->mu);
    int broken = p->broken;
    if (broken)
        p->fault_delay_ms = p->fault_delay_ms == 0 ? FAULT_RETRY_FIRST_MS
                            : p->fault_delay_ms * 2 > FAULT_RETRY_MAX_MS ? FAULT_RETRY_MAX_MS
                            : p->fault_delay_ms * 2;
    uint64_t delay = broken ? p->fault_delay_ms : RETRY_MS;
    pthread_mutex_unlock(&p->mu);
    p->retry_at_ms = pst_mono_ms() + delay;
}

/* Whether the installed snapshot still holds everything: no write since
 * its switch (nothing buffered or appended to the one log after it, and no
 * change counted with the log off), and nothing wrong with the log. Then a
 * new snapshot would write the same data again (a stop of an idle server
 * with a large filter: seconds of writing for nothing), so it is skipped. */
static int snapshot_is_current(bks_persist *p)
{
    if (p->snap_gen == 0 || p->logs.n != 1 || atomic_load(&p->guards_corrupt) != 0)
        return 0;
    if (atomic_load(&p->changes) != atomic_load(&p->changes_saved)) return 0;
    pthread_mutex_lock(&p->mu);
    int idle = !p->broken && p->len == 0 && p->file_size <= LOG_HEADER_SIZE &&
               p->appended == p->written;
    pthread_mutex_unlock(&p->mu);
    return idle;
}

/* Start generation p->next_gen: its log becomes live at a paused instant,
 * and its snapshot of that instant is written by a fork child (background)
 * or right here (SAVE). Called with ctl_mu held and no child running. */
int pst_start_snapshot(bks_persist *p, int foreground)
{
    char err[512];
    if (snapshot_is_current(p)) {
        bks_log(BKS_LOG_INFO, "persist: nothing changed since snapshot %" PRIu64
                ": kept as it is", p->snap_gen);
        atomic_store(&p->last_bgsave_err, 0);
        atomic_store(&p->lastsave, pst_wall_ms() / 1000);
        return 0;
    }
    /* No unverified mapped byte may be copied into a snapshot, where it
     * would get a fresh, valid checksum: finish the verification first. */
    pst_verify_all(p);
    uint64_t gen = p->next_gen++;
    int nfd = -1, pipefd[2] = {-1, -1};
    char lname[64];
    pst_log_name(lname, sizeof lname, gen);

    if (pst_log_create(p, gen, &nfd, err, sizeof err) != 0) goto fail;
    if (pst_gens_push(&p->logs, gen) != 0) {
        pst_errf(err, sizeof err, "out of memory");
        goto fail_log;
    }
    /* The new (empty) log is listed before any write goes to it. */
    if (pst_current_write(p, p->snap_gen, &p->logs, err, sizeof err) != 0) {
        p->logs.n--;
        goto fail_log;
    }
    if (!foreground && pipe2(pipefd, O_CLOEXEC) != 0) {
        pst_errf(err, sizeof err, "pipe: %s", strerror(errno));
        close(nfd);
        goto fail;   /* the empty log stays listed: harmless */
    }
    /* Most of the old log's dirty pages, before the pause rather than in it. */
    pthread_mutex_lock(&p->mu);   /* CONFIG SET appendfsync writes it under mu */
    int synced_each_write = p->fsync_mode == BKS_FSYNC_ALWAYS;
    pthread_mutex_unlock(&p->mu);
    if (!synced_each_write) fdatasync(p->fd);

    bks_pause_all();
    /* the snapshot holds every write up to this instant (no command runs) */
    atomic_store(&p->changes_at_switch, atomic_load(&p->changes));
    p->snap_epoch = bks_keyspace_next_epoch(p->ks);
    int old = pst_switch_log(p, nfd, gen, err, sizeof err);
    if (old < 0) {
        int saved = errno;
        bks_resume_all();
        pthread_mutex_lock(&p->mu);
        pst_mark_broken(p, saved);
        pthread_mutex_unlock(&p->mu);
        close(nfd);
        goto fail_pipe;
    }
    if (foreground) {
        child_report rep;
        memset(&rep, 0, sizeof rep);
        int rc = pst_snapshot_write(p->ks, p->dirfd, gen, p->snap_gen, p->map_threshold, &rep);
        bks_resume_all();
        close(old);
        if (rc != 0) {
            snprintf(err, sizeof err, "%s", rep.msg);
            char sname[64];
            pst_snap_name(sname, sizeof sname, gen);
            pst_remove_tree_at(p->dirfd, sname);
            goto fail;
        }
        pst_finish_generation(p, gen, &rep);
        return p->snap_gen == gen ? 0 : -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        pst_child_main(p, gen, pipefd[1], parent);
    }
    bks_resume_all();
    close(old);
    close(pipefd[1]);
    if (pid < 0) {
        pst_errf(err, sizeof err, "fork: %s", strerror(errno));
        close(pipefd[0]);
        goto fail;
    }
    p->child = pid;
    p->child_gen = gen;
    p->child_start_ms = pst_mono_ms();
    p->child_progress_ms = p->child_start_ms;
    p->child_wchar = p->child_cpu = 0;   /* a new process's counters start at 0 */
    p->child_killed = 0;
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
    atomic_store(&p->last_bgsave_err, 1);
    pst_schedule_retry(p);
    errno = EIO;
    return -1;
}

/* Reap a finished child. Called with ctl_mu held. */
void pst_reap_child(bks_persist *p, int block)
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
        pst_finish_generation(p, gen, &rep);
        return;
    }
    char sname[64];
    pst_snap_name(sname, sizeof sname, gen);
    pst_remove_tree_at(p->dirfd, sname);
    if (r > 0 && WIFSIGNALED(status))
        bks_log(BKS_LOG_WARNING, "persist: background snapshot %" PRIu64 " killed by signal %d",
                gen, WTERMSIG(status));
    else
        bks_log(BKS_LOG_WARNING, "persist: background snapshot %" PRIu64 " failed: %s", gen,
                n == (ssize_t)sizeof rep ? rep.msg : "no report from the child");
    atomic_store(&p->last_bgsave_err, 1);
    pst_schedule_retry(p);
}
