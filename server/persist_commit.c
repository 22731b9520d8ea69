/*
 * persist_commit.c - appending to the live log: group commit, the everysec
 * fdatasync thread, and the switch of appends to a new generation's log.
 *
 * A writer encodes its record, appends it to a shared buffer under p->mu,
 * and then either waits or, when nobody is writing, becomes the leader: it
 * takes the whole buffer, write()s it (and with appendfsync always
 * fdatasyncs) outside the mutex and wakes the others. Every writer returns
 * only once its record has reached the file (always: the disk), so a kill
 * -9 loses nothing that was acknowledged in any mode; the everysec thread
 * fdatasyncs once a second, bounding what a power loss can take.
 */
#include <pthread.h>
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
#include "server_int.h"   /* bks_mem_released */

/* The append buffer past this size (a large record, or a burst of records
 * during a slow write) is freed once written rather than kept as the spare. */
#define LOG_BUF_KEEP ((size_t)4 << 20)

/*==========================================================================
 * Appending
 *==========================================================================*/

/* Lead one write: take the buffer, write (and sync) it outside the mutex.
 * Called and returns with mu held. */
void pst_lead_write(bks_persist *p)
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

    int rc = pst_write_all(fd, data, n);
    int saved = errno;
    if (rc == 0 && sync_now) {
        rc = fdatasync(fd) == 0 ? 0 : -2;   /* -1: write failed, -2: fdatasync */
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
            bks_log(BKS_LOG_ERROR, "persist: %s %s/appendonly-%" PRIu64
                    ".log failed: %s; refusing writes (MISCONF) until a snapshot taken "
                    "after the fault is installed: retrying from 1 s on",
                    rc == -1 ? "writing" : "fdatasync of", p->dir,
                    p->live_gen, strerror(saved));
        /* Best effort: if the cut fails too, the tail is uncertain; the
         * recovery snapshot makes it irrelevant either way. */
        if (ftruncate(fd, (off_t)p->file_size) != 0) { /* see above */ }
        pst_mark_broken(p, saved);
    }
    /* Keep the buffer as the spare, unless one large record grew it:
     * then give it back (memtrim.c). */
    if (p->spare == NULL && cap <= LOG_BUF_KEEP) {
        p->spare = data;
        p->spare_cap = cap;
    } else {
        if (cap >= BKS_MEM_BIG)
            bks_mem_released(cap);
        free(data);
    }
    pthread_cond_broadcast(&p->cv);
}

int bks_persist_append(bks_persist *p, int argc, const bkc_str *argv, uint64_t time_ms,
                       uint64_t *ticket)
{
    *ticket = 0;
    if (p == NULL) return 0;
    atomic_fetch_add_explicit(&p->changes, 1, memory_order_relaxed);
    if (!p->appendonly) return 0;
    if (argc <= 0 || argv == NULL) return -1;
    size_t size = pst_record_size(argc, argv);
    unsigned char stack[4096];
    unsigned char *rec = size == 0 ? NULL : size <= sizeof stack ? stack : malloc(size);
    if (rec == NULL) {
        /* The command already changed memory: the log no longer holds the
         * state, and only a snapshot brings them level again. */
        bks_log(BKS_LOG_ERROR, "persist: %s: refusing writes until a snapshot is installed",
                size == 0 ? "a command of more than 4 GiB cannot be logged"
                          : "out of memory encoding a log record");
        pthread_mutex_lock(&p->mu);
        pst_mark_broken(p, size == 0 ? EFBIG : ENOMEM);
        pthread_mutex_unlock(&p->mu);
        return -1;
    }
    pst_record_encode(rec, size, time_ms ? time_ms : pst_wall_ms(), argc, argv);

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
            bks_log(BKS_LOG_ERROR, "persist: out of memory buffering a log record: "
                    "refusing writes until a snapshot is installed");
            pst_mark_broken(p, ENOMEM);
            rc = -1;
            goto out;
        }
        p->buf = nb;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, rec, size);
    p->len += size;
    p->appended += size;
    *ticket = p->appended;
out:
    pthread_mutex_unlock(&p->mu);
    if (rec != stack) free(rec);
    return rc;
}

int bks_persist_wait(bks_persist *p, uint64_t ticket)
{
    if (p == NULL || ticket == 0) return 0;
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        /* dropped with a broken log's buffer when appends moved on */
        if (ticket > p->refused_lo && ticket <= p->refused_hi) {
            rc = -1;
            break;
        }
        uint64_t done = p->fsync_mode == BKS_FSYNC_ALWAYS ? p->synced : p->written;
        if (done >= ticket) break;
        if (p->broken) {
            rc = -1;
            break;
        }
        if (!p->writing)
            pst_lead_write(p);
        else
            pthread_cond_wait(&p->cv, &p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int bks_persist_log(bks_persist *p, int argc, const bkc_str *argv)
{
    uint64_t ticket;
    if (bks_persist_append(p, argc, argv, 0, &ticket) < 0) return -1;
    return bks_persist_wait(p, ticket);
}

/* appendfsync everysec: fdatasync once a second what has been written. */
void *pst_syncer_main(void *arg)
{
    bks_persist *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&p->stop_cv, &p->mu, &ts);
        if (p->stopping) break;
        if (p->written <= p->synced || p->broken || p->fd < 0 ||
            p->fsync_mode != BKS_FSYNC_EVERYSEC)   /* CONFIG SET appendfsync changed it */
            continue;
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
        } else {
            /* What the failed fdatasync covered may be lost (the kernel
             * need not keep the pages dirty): the tail is uncertain. */
            if (!p->broken)
                bks_log(BKS_LOG_ERROR, "persist: fdatasync of %s/appendonly-%" PRIu64
                        ".log failed: %s; refusing writes (MISCONF) until a snapshot taken "
                        "after the fault is installed: retrying from 1 s on",
                        p->dir, p->live_gen, strerror(saved));
            pst_mark_broken(p, saved);
        }
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Move appends to new_fd (the log of generation gen). The server is
 * paused, so no command runs; records still in the buffer are those of the
 * batch whose command paused it (its worker waits for them when the batch
 * ends), and are written to the old log here. The old log is made durable before the new one gets any record,
 * so that no later log can hold a write the earlier one lost. Returns the
 * old descriptor, or -1 (nothing changed) when the old log cannot be synced. */
int pst_switch_log(bks_persist *p, int new_fd, uint64_t gen, char *err,
                      size_t errlen)
{
    pthread_mutex_lock(&p->mu);
    while (p->writing || p->bg_syncing) pthread_cond_wait(&p->cv, &p->mu);
    if (p->len > 0 && !p->broken) pst_lead_write(p);
    while (p->writing || p->bg_syncing) pthread_cond_wait(&p->cv, &p->mu);
    int old = p->fd;
    if (!p->broken && p->written > p->synced && fdatasync(old) != 0) {
        pst_errf(err, errlen, "fdatasync of the live log failed: %s", strerror(errno));
        pthread_mutex_unlock(&p->mu);
        return -1;
    }
    /* Start the counters level. Records of a broken log that did not
     * reach it (in the buffer, or in the write that failed) are refused to writers still to wait for them (a command that
     * paused the server waits for its batch's records after it). */
    if (p->appended > p->written) {
        p->refused_lo = p->written;
        p->refused_hi = p->appended;
    }
    p->len = 0;
    p->synced = p->written = p->appended;
    p->fd = new_fd;
    p->live_gen = gen;
    p->older_log_bytes += p->file_size;
    p->file_size = LOG_HEADER_SIZE;
    pthread_mutex_unlock(&p->mu);
    return old;
}
