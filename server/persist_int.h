/*
 * persist_int.h - private to server/persist*.c: the formats' constants, the
 * persistence state, and the functions the persistence files share. The
 * rest of the server sees only server.h's bks_persist_* interface.
 *
 *   persist.c           the interface: open, close, SAVE, BGSAVE, the tick
 *   persist_codec.c     byte fields, checksum, clocks, names, frame reading
 *   persist_log.c       the log file format: header, records, scanning
 *   persist_manifest.c  CURRENT and generations: what is live, what may go
 *   persist_commit.c    appending: group commit, everysec, switching logs
 *   persist_snapwrite.c writing a snapshot (fork child or SAVE)
 *   persist_load.c      start-up: snapshot loading and log replay
 */
#ifndef BKS_PERSIST_INT_H
#define BKS_PERSIST_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>        /* FILE */
#include <sys/types.h>    /* pid_t */

#include "server.h"

/*==========================================================================
 * Formats (docs/PERSISTENCE.md)
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

#define KEY_CORRUPT 3u                   /* a key whose data was found corrupt */

/* Backoff before an automatic snapshot is retried after a failure. */
#define RETRY_MS 5000u
/* While the log is failing: retry after 1 s, doubling up to 4 s. */
#define FAULT_RETRY_FIRST_MS 1000u
#define FAULT_RETRY_MAX_MS 4000u

/*==========================================================================
 * Types
 *==========================================================================*/

typedef struct gen_list {
    uint64_t *gens;
    size_t n, cap;
} gen_list;

/* What the snapshot child reports through its pipe (one atomic write). */
/* What writing a snapshot made (the fork child sends it through its pipe). */
typedef struct child_report {
    int ok;
    uint64_t bytes;             /* the snapshot's size */
    uint64_t linked;            /* filter files linked from the installed one */
    uint64_t linked_bytes;      /* ... and their bytes, not written again */
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
    int rebuild;                /* --rebuild-manifest */

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
    uint64_t refused_lo, refused_hi; /* tickets in (lo, hi] were dropped */
    uint64_t file_size;         /* bytes in the live log file */
    int writing;                /* a leader is in write()/fdatasync */
    int bg_syncing;             /* the everysec thread is in fdatasync */
    int broken;                 /* a write or fsync failed: refuse */
    uint64_t broken_gen;        /* the log it failed in */
    uint64_t broken_since_ms;   /* monotonic, for the "resumed" message */
    int broken_errno;
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
    uint64_t child_start_ms;    /* monotonic: when the child was forked */
    uint64_t snapshot_timeout_ms; /* a child running longer is killed (0: never) */
    uint64_t snapshot_stall_ms; /* a child without progress longer is killed (0: never) */
    uint64_t child_progress_ms; /* monotonic: the child's last sign of progress */
    uint64_t child_wchar;       /* its /proc/<pid>/io wchar at the last tick */
    uint64_t child_cpu;         /* its utime + stime (clock ticks) at the last tick */
    int child_killed;           /* SIGKILLed, not reaped yet */
    int child_pipe;
    uint64_t retry_at_ms;       /* monotonic: no automatic snapshot before */
    uint64_t fault_delay_ms;    /* current backoff while the log is failing */
    int keep_debris;            /* CURRENT was rebuilt: delete nothing this start */
    uint8_t snap_epoch;         /* the keyspace's epoch from the last snapshot's
                                 * instant (bks_keyspace_adopt) */

    _Atomic uint64_t lastsave;  /* unix seconds */
    /* INFO rdb_changes_since_last_save: writes since start-up, and how many
     * of them the snapshot being written / the installed one holds */
    _Atomic uint64_t changes;
    _Atomic uint64_t changes_at_switch;
    _Atomic uint64_t changes_saved;
    _Atomic uint64_t last_write_error_s; /* unix seconds of the last log failure, 0: none */
    _Atomic int last_bgsave_err;         /* the last snapshot failed */

    /* Mapped filters awaiting their payload check (persist_verify.c). */
    bks_guard *guards;          /* every guard made at start-up; freed at close */
    _Atomic uint64_t guards_unverified;
    _Atomic uint64_t guards_corrupt;
    _Atomic int verifying;      /* the background verifier is running */
    int have_verifier;
    pthread_t verifier;
    _Atomic int verifier_stop;

    /* --check-data: damaged .bkf files and corrupt keys are reported here
     * (and counted) and the check goes on; NULL: the first one fails. */
    FILE *check_out;
    uint64_t check_bad;
};

/* The verification state of one key loaded with mapped filters, or of a
 * key whose data was found corrupt (a KEY_CORRUPT frame). The keyspace
 * entry points at it; bks_guard_check decides whether its data may be used.
 * Created at start-up only, freed by bks_persist_close. */
enum { GUARD_UNVERIFIED = 0, GUARD_OK = 1, GUARD_CORRUPT = 2 };

struct bks_guard {
    pthread_mutex_t mu;         /* one verification at a time */
    _Atomic int state;
    bks_persist *p;
    char **paths;               /* the mapped .bkf files (freed once checked) */
    uint32_t npaths;
    char file[512];             /* CORRUPT: the file found bad */
    char why[160];              /* CORRUPT: what is wrong with it */
    bks_guard *next;
};

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

/* A checksummed manifest frame, and a field reader over its body. */
typedef struct frame {
    uint32_t magic;
    const unsigned char *body;
    size_t len;
} frame;

typedef struct fields {
    const unsigned char *p;
    size_t n, pos;
    int bad;
} fields;

/* Replayed commands' error replies: counted, the first one kept. */
typedef struct replay_sink {
    uint64_t errors;
    char first[160];
} replay_sink;

/*==========================================================================
 * Shared functions
 *==========================================================================*/

/* persist_codec.c */
void pst_put32(unsigned char *p, uint32_t v);
void pst_put64(unsigned char *p, uint64_t v);
uint32_t pst_get32(const unsigned char *p);
uint64_t pst_get64(const unsigned char *p);
uint64_t pst_checksum(const void *p, size_t n);
uint64_t pst_wall_ms(void);
uint64_t pst_mono_ms(void);
/* snprintf for messages: truncation is fine, and the compiler is told so. */
void pst_errf(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int pst_all_zero(const unsigned char *p, size_t n);
int pst_write_all(int fd, const void *buf, size_t n);
/* The file name (under the directory at, or AT_FDCWD) mapped read-only
 * and private: *base (NULL for an empty file) and *size; 0, or -1 with
 * "path: why" in err (path: the file's name in messages). Unmapped by
 * the caller (munmap of *size bytes, when *base is not NULL). */
int pst_map_file(int at, const char *name, const char *path, const unsigned char **base,
                 size_t *size, char *err, size_t errlen);
void pst_log_name(char *buf, size_t cap, uint64_t gen);
void pst_snap_name(char *buf, size_t cap, uint64_t gen);
void pst_remove_tree_at(int at, const char *name);
uint64_t pst_parse_gen_name(const char *name, const char *prefix, const char *suffix);
int pst_frame_read(const unsigned char *base, size_t size, size_t *off, frame *f);
uint32_t pst_fd_u32(fields *f);
uint64_t pst_fd_u64(fields *f);

/* persist_log.c */
int pst_resp_decode(const unsigned char *p, size_t n, int *argc_out, bkc_str **argv_out);
size_t pst_record_size(int argc, const bkc_str *argv);
void pst_record_encode(unsigned char *out, size_t size, uint64_t time_ms, int argc,
                       const bkc_str *argv);
rec_status pst_record_scan(const unsigned char *base, size_t size, size_t off, record *r,
                           const char **why);
void pst_log_header_encode(unsigned char *h, uint64_t gen);
int pst_log_header_check(const unsigned char *h, uint64_t gen);
int pst_log_create(bks_persist *p, uint64_t gen, int *fd_out, char *err, size_t errlen);
int pst_log_truncate(bks_persist *p, uint64_t gen, uint64_t off, char *err, size_t errlen);
int pst_log_cut(bks_persist *p, uint64_t gen, uint64_t off, const char *why, char *err,
                size_t errlen);

/* persist_manifest.c */
int pst_gens_push(gen_list *l, uint64_t g);
int pst_gens_has(const gen_list *l, uint64_t g);
int pst_current_write(bks_persist *p, uint64_t snap, const gen_list *logs, char *err,
                      size_t errlen);
int pst_current_read(bks_persist *p, uint64_t *snap, gen_list *logs, char *err,
                     size_t errlen);
void pst_remove_unreferenced(bks_persist *p, uint64_t snap, const gen_list *logs);
uint64_t pst_max_gen_on_disk(bks_persist *p);
void pst_finish_generation(bks_persist *p, uint64_t gen, const child_report *rep);
int pst_start_snapshot(bks_persist *p, int foreground);
void pst_reap_child(bks_persist *p, int block);

/* persist_commit.c */
void pst_lead_write(bks_persist *p);
void *pst_syncer_main(void *arg);
int pst_switch_log(bks_persist *p, int new_fd, uint64_t gen, char *err, size_t errlen);

/* persist_snapwrite.c */
int pst_snapshot_write(bks_keyspace *ks, int dirfd, uint64_t gen, uint64_t installed,
                       uint64_t map_threshold, child_report *rep);
void pst_adopt_files(bks_persist *p, uint64_t gen);
void pst_child_main(bks_persist *p, uint64_t gen, int wfd, pid_t parent);

/* persist_load.c */
/* Load snap-<gen> into p->ks; with check_only, read and verify every
 * frame, image and .bkf file fully (payload checksums included) and load
 * nothing (p needs only dir). *nkeys_out: the keys read (may be NULL). */
int pst_snapshot_load(bks_persist *p, uint64_t gen, int check_only, uint64_t *nkeys_out,
                      char *err, size_t errlen);
void pst_replay_one(bks_persist *p, replay_sink *sink, uint64_t time_ms, int argc,
                    const bkc_str *argv);
int pst_replay_log(bks_persist *p, uint64_t gen, int last, replay_sink *sink, int *stop,
                   uint64_t *size_out, char *err, size_t errlen);
int pst_recover(bks_persist *p, char *err, size_t errlen);

/* persist_verify.c */
bks_guard *pst_guard_new(bks_persist *p, int state);
int pst_guard_add_path(bks_guard *g, const char *path);
void pst_guard_set_corrupt(bks_guard *g, const char *file, const char *why);
int pst_guard_state(bks_guard *g);
void pst_verify_start(bks_persist *p);
void pst_verify_all(bks_persist *p);
void pst_verify_stop(bks_persist *p);
void pst_guards_free(bks_persist *p);

/* persist_manifest.c: the log failed (called with mu held). */
void pst_mark_broken(bks_persist *p, int err);
/* When the next automatic snapshot may start, after a failure. */
void pst_schedule_retry(bks_persist *p);
/* Rebuild CURRENT from the directory's files (--rebuild-manifest). */
int pst_rebuild_current(bks_persist *p, uint64_t *snap, char *err, size_t errlen);
/* Snapshot directories, logs, and logs holding records, found in the
 * directory (for a directory without a usable CURRENT). */
int pst_scan_dir(bks_persist *p, gen_list *snaps, gen_list *logs, gen_list *data_logs);

#endif /* BKS_PERSIST_INT_H */
