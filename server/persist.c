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
 * Appending is group commit in two halves. A writer encodes its record and
 * appends it to a shared buffer under the log mutex (bks_persist_append,
 * called under the key's lock, so the log orders each key's writes as they
 * happened); later, before it answers, it waits (bks_persist_wait): when
 * nobody is writing it becomes the leader, takes the whole buffer,
 * write()s it (with appendfsync always, fdatasyncs) outside the mutex and
 * wakes the others. bloomkit-server's workers append while they run a
 * batch of pipelined requests and wait once at its end, after the key
 * locks are let go, before any answer goes out: no answer to a write is
 * sent before its record has reached the file (always: the disk), so a
 * kill -9 loses nothing that was acknowledged in any mode; everysec's
 * background thread fdatasyncs once a second, bounding what a power loss
 * can take. If that write fails, each answer that waited on it becomes
 * MISCONF (the write changed memory, and stays until a snapshot).
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
 *
 * Failures. A directory whose CURRENT is missing or damaged but which holds
 * data refuses to start (--rebuild-manifest rebuilds CURRENT); nothing is
 * ever deleted without a sound CURRENT. A log that cannot be written or
 * synced refuses writes (MISCONF) until a snapshot taken after the fault
 * is installed, retried every 1-4 s, then writes resume by themselves.
 * Filters mapped from a snapshot are served only once their payload
 * checksum has been read: in the background after start-up, or on first
 * use (persist_verify.c).
 *
 * The files (persist_int.h holds what they share):
 *
 *   persist.c            this interface: open, close, SAVE, BGSAVE, the tick
 *   persist_codec.c      byte fields, the checksum, clocks, file names
 *   persist_log.c        the log file format: header, records, scanning
 *   persist_manifest.c   CURRENT and generations: which files are live and
 *                        which may be deleted (the rules are written there)
 *   persist_commit.c     appending: group commit, everysec, switching logs
 *   persist_snapwrite.c  writing a snapshot (fork child, or SAVE)
 *   persist_load.c       start-up: loading the snapshot, replaying the logs
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>     /* PRIu64 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>     /* flock: one server per data directory */
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "persist_int.h"
#include "server_int.h"   /* g_srv.write_error */

/*==========================================================================
 * API
 *==========================================================================*/

/* SAVE (foreground) and BGSAVE: EBUSY while a snapshot is being made. */
static int start_unless_busy(bks_persist *p, int foreground)
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
        rc = pst_start_snapshot(p, foreground);
    }
    pthread_mutex_unlock(&p->ctl_mu);
    return rc;
}

int bks_persist_save(bks_persist *p) { return start_unless_busy(p, 1); }

int bks_persist_save_final(bks_persist *p)
{
    if (p == NULL) return -1;
    pthread_mutex_lock(&p->ctl_mu);
    if (p->child != 0) {
        /* Its data predates the last writes, and the thread that forked it
         * is gone (the child dies with it): the final snapshot replaces it. */
        bks_log(BKS_LOG_INFO, "persist: a background snapshot is running: the final "
                "snapshot replaces it");
        kill(p->child, SIGKILL);
        pst_reap_child(p, 1);
    }
    int rc = pst_start_snapshot(p, 1);
    pthread_mutex_unlock(&p->ctl_mu);
    return rc;
}

int bks_persist_bgsave(bks_persist *p) { return start_unless_busy(p, 0); }

uint64_t bks_persist_lastsave(const bks_persist *p)
{
    return p ? atomic_load(&((bks_persist *)p)->lastsave) : 0;
}

int bks_persist_set_fsync(bks_persist *p, bks_fsync mode)
{
    if (p == NULL) return 0;
    pthread_mutex_lock(&p->mu);
    p->fsync_mode = mode;
    int start = mode == BKS_FSYNC_EVERYSEC && !p->have_syncer;
    if (start) p->have_syncer = 1;
    pthread_mutex_unlock(&p->mu);
    if (start && pthread_create(&p->syncer, NULL, pst_syncer_main, p) != 0) {
        pthread_mutex_lock(&p->mu);
        p->have_syncer = 0;
        pthread_mutex_unlock(&p->mu);
        return -1;
    }
    return 0;
}

uint64_t bks_persist_changes(bks_persist *p)
{
    if (p == NULL) return 0;
    uint64_t saved = atomic_load(&p->changes_saved), now = atomic_load(&p->changes);
    return now > saved ? now - saved : 0;
}

int bks_persist_bgsave_in_progress(bks_persist *p)
{
    /* ctl_mu is held only briefly (BGSAVE's start, the tick's reaping) or
     * with the server paused (SAVE, when no INFO runs): never wait for it */
    if (p == NULL || pthread_mutex_trylock(&p->ctl_mu) != 0) return -1;
    int running = p->child != 0;
    pthread_mutex_unlock(&p->ctl_mu);
    return running;
}

void bks_persist_info(bks_persist *p, char *buf, size_t cap)
{
    if (cap == 0) return;
    buf[0] = '\0';
    if (p == NULL) return;
    pthread_mutex_lock(&p->mu);
    int broken = p->broken;
    pthread_mutex_unlock(&p->mu);
    snprintf(buf, cap,
             "aof_last_write_status:%s\r\n"
             "aof_last_write_error_time:%llu\r\n"
             "rdb_last_bgsave_status:%s\r\n"
             "aof_last_bgrewrite_status:%s\r\n"
             "mapped_verify_in_progress:%d\r\n"
             "mapped_keys_unverified:%llu\r\n"
             "mapped_keys_corrupt:%llu\r\n",
             broken ? "err" : "ok",
             (unsigned long long)atomic_load(&p->last_write_error_s),
             atomic_load(&p->last_bgsave_err) ? "err" : "ok",
             atomic_load(&p->last_bgsave_err) ? "err" : "ok",
             atomic_load(&p->guards_unverified) > 0,
             (unsigned long long)atomic_load(&p->guards_unverified),
             (unsigned long long)atomic_load(&p->guards_corrupt));
}

/*==========================================================================
 * The snapshot child's watchdog
 *==========================================================================*/

/* /proc/<pid>/<what>, NUL-terminated, in one read (the files are small). */
static int read_proc(pid_t pid, const char *what, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, what);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n;
    do {
        n = read(fd, buf, cap - 1);
    } while (n < 0 && errno == EINTR);
    close(fd);
    if (n < 0) return -1;
    buf[n] = '\0';
    return 0;
}

/* The state letter of /proc/<pid>/stat, and the CPU time used (utime +
 * stime, clock ticks) in *cpu; '?' when it cannot be read. */
static char proc_state(pid_t pid, uint64_t *cpu)
{
    char buf[1024];
    if (read_proc(pid, "stat", buf, sizeof buf) < 0) return '?';
    const char *s = strrchr(buf, ')');   /* after the name, which may hold ')' */
    if (s == NULL || s[1] != ' ' || s[2] == '\0') return '?';
    /* after the state: ppid pgrp session tty_nr tpgid flags minflt cminflt
     * majflt cmajflt utime stime (proc(5)) */
    unsigned long long utime = 0, stime = 0;
    sscanf(s + 3, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu", &utime, &stime);
    *cpu = utime + stime;
    return s[2];
}

/* The wchar line of /proc/<pid>/io: bytes handed to write() and its kin.
 * -1 when unreadable (no task I/O accounting in the kernel, /proc denied). */
static int proc_wchar(pid_t pid, uint64_t *wchar)
{
    char buf[512];
    if (read_proc(pid, "io", buf, sizeof buf) < 0) return -1;
    const char *s = strstr(buf, "wchar:");
    if (s == NULL) return -1;
    *wchar = strtoull(s + 6, NULL, 10);
    return 0;
}

/* Whether the child made progress since the last tick: it wrote (wchar
 * moved), it computed (CPU time moved: a checksum pass over a huge filter
 * writes nothing for a while), or it waits for the disk (state D: the
 * kernel is working on its writes or reading a mapped filter's pages, and
 * a SIGKILL would not take effect before that ends anyway). Without wchar,
 * the state alone: only a stopped child ('T', 't') makes none. A child
 * that cannot be observed at all counts as progressing: the watchdog kills
 * only what it sees stalled, and snapshot-timeout bounds the rest. */
static int child_progressed(bks_persist *p, char *state)
{
    uint64_t cpu = 0, wchar = 0;
    *state = proc_state(p->child, &cpu);
    if (*state == '?') return 1;
    if (proc_wchar(p->child, &wchar) < 0) return *state != 'T' && *state != 't';
    int moved = wchar != p->child_wchar || cpu != p->child_cpu;
    p->child_wchar = wchar;
    p->child_cpu = cpu;
    return moved || *state == 'D';
}

/* Kill a child that has run past snapshot-timeout, or made no progress
 * for snapshot-stall-timeout: a hung child (a stuck disk, a stopped or
 * deadlocked process) would block every later snapshot and compaction.
 * It is killed once; the tick's reap (which never waits: a child in disk
 * wait dies only when its I/O ends) reports the failure and schedules a
 * retry. Called with ctl_mu held and a child running. */
static void watch_child(bks_persist *p)
{
    uint64_t now = pst_mono_ms();
    char state = '?';
    if (p->snapshot_stall_ms && child_progressed(p, &state)) p->child_progress_ms = now;
    if (p->snapshot_timeout_ms && now - p->child_start_ms > p->snapshot_timeout_ms)
        bks_log(BKS_LOG_WARNING,
                "persist: background snapshot %" PRIu64 " has run for over %" PRIu64
                " s (snapshot-timeout): killing it",
                p->child_gen, p->snapshot_timeout_ms / 1000);
    else if (p->snapshot_stall_ms && now - p->child_progress_ms > p->snapshot_stall_ms)
        bks_log(BKS_LOG_WARNING,
                "persist: background snapshot %" PRIu64 " made no progress for %.1f s "
                "(snapshot-stall-timeout; state %c): killing it",
                p->child_gen, (double)(now - p->child_progress_ms) / 1000.0, state);
    else
        return;
    kill(p->child, SIGKILL);
    p->child_killed = 1;
}

void bks_persist_tick(bks_persist *p)
{
    if (p == NULL || pthread_mutex_trylock(&p->ctl_mu) != 0) return;
    if (p->child != 0) {
        /* reaped first, so that a child that has just finished is not judged */
        pst_reap_child(p, 0);
        if (p->child != 0 && !p->child_killed) watch_child(p);
    } else if (pst_mono_ms() >= p->retry_at_ms) {
        pthread_mutex_lock(&p->mu);
        /* The host refuses writes after any failed append; if that ever
         * happened without the log being marked (it should not), treat it
         * as a failure too, so that a snapshot ends the refusal. */
        if (!p->broken && p->appendonly && atomic_load(&g_srv.write_error))
            pst_mark_broken(p, EIO);
        int broken = p->broken;
        uint64_t log_bytes = p->older_log_bytes + p->file_size;
        pthread_mutex_unlock(&p->mu);
        if (broken) {
            bks_log(BKS_LOG_WARNING, "persist: the log is failing: trying a snapshot on a "
                    "new log to recover");
            pst_start_snapshot(p, 0);
        } else if (p->appendonly && p->auto_rewrite_pct > 0 &&
                   log_bytes >= p->auto_rewrite_min &&
                   (double)log_bytes * 100.0 >= (double)p->snap_bytes * p->auto_rewrite_pct) {
            bks_log(BKS_LOG_INFO, "persist: the log holds %" PRIu64 " bytes: compacting "
                    "into a snapshot", log_bytes);
            pst_start_snapshot(p, 0);
        }
    }
    pthread_mutex_unlock(&p->ctl_mu);
}

static int lock_dir(bks_persist *p, char *err, size_t errlen)
{
    p->lockfd = openat(p->dirfd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (p->lockfd < 0) {
        pst_errf(err, errlen, "%s/LOCK: %s", p->dir, strerror(errno));
        return -1;
    }
    /* A snapshot child of a server just killed may hold it for an instant. */
    for (int i = 0; i < 60; i++) {
        if (flock(p->lockfd, LOCK_EX | LOCK_NB) == 0) return 0;
        if (errno != EWOULDBLOCK && errno != EINTR) break;
        usleep(50000);
    }
    pst_errf(err, errlen, "%s: the data directory is in use by another process", p->dir);
    return -1;
}



/* Seconds of the configuration in ms, saturating: a huge value means never. */
static uint64_t secs_to_ms(uint64_t s)
{
    return s > UINT64_MAX / 1000 ? UINT64_MAX : s * 1000;
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
    p->rebuild = cfg->rebuild_manifest;
    p->snapshot_timeout_ms = secs_to_ms(cfg->snapshot_timeout);
    p->snapshot_stall_ms = secs_to_ms(cfg->snapshot_stall_timeout);

    if (mkdir(p->dir, 0700) != 0 && errno != EEXIST) {
        pst_errf(err, sizeof err, "%s: %s", p->dir, strerror(errno));
        goto fail;
    }
    p->dirfd = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (p->dirfd < 0) {
        pst_errf(err, sizeof err, "%s: %s", p->dir, strerror(errno));
        goto fail;
    }
    if (lock_dir(p, err, sizeof err) != 0) goto fail;
    if (pst_recover(p, err, sizeof err) != 0) goto fail;
    p->appended = p->written = p->synced = 0;
    if (p->fsync_mode == BKS_FSYNC_EVERYSEC) {
        if (pthread_create(&p->syncer, NULL, pst_syncer_main, p) != 0) {
            pst_errf(err, sizeof err, "cannot start the fsync thread");
            goto fail;
        }
        p->have_syncer = 1;
    }
    /* The payload checksums of mapped filters, read in the background:
     * start-up is not delayed, and guarded keys are checked on first use
     * until then (persist_verify.c). */
    pst_verify_start(p);
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
    pst_verify_stop(p);
    pthread_mutex_lock(&p->ctl_mu);
    if (p->child != 0) {
        kill(p->child, SIGKILL);
        pst_reap_child(p, 1);
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
        if (p->len > 0) pst_lead_write(p);
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
    pst_guards_free(p);
    pthread_cond_destroy(&p->cv);
    pthread_cond_destroy(&p->stop_cv);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->ctl_mu);
    free(p);
}
