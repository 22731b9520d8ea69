/*
 * server.h - how the parts of bloomkit-server fit together.
 *
 *   main.c       flags, config file, start-up, signals, shutdown
 *   config.c     the configuration (defaults, parsing, validation)
 *   net.c        libuv: one event loop per worker thread; TCP listeners with
 *                SO_REUSEPORT (the kernel spreads connections over workers),
 *                the Unix socket served by worker 0; per-client read and
 *                write buffers, limits, slow-reader handling
 *   resp.c       the RESP2/RESP3 request parser (resumable, zero-copy: argv
 *                points into the client's read buffer, hard limits) and the
 *                reply encoder, which implements bkc_reply
 *   keyspace.c   named values (bkc_value) with expiry: a hash table with
 *                striped locks for its structure and a reader-writer lock
 *                per key (bkc_open_mode); memory accounting; implements
 *                bkc_host_vt for the command layer
 *   hostcmd.c    the commands the host implements itself (PING, AUTH,
 *                HELLO, CLIENT, SELECT, COMMAND, INFO, DBSIZE, EXISTS, DEL,
 *                UNLINK, TYPE, KEYS, SCAN, RENAME, EXPIRE, PEXPIRE, TTL,
 *                PTTL, PERSIST, FLUSHALL, SAVE, BGSAVE, LASTSAVE, SHUTDOWN,
 *                QUIT); everything else goes to bkc_dispatch (commands/)
 *   multi.c      transactions: MULTI/EXEC/DISCARD/WATCH/UNWATCH (EXEC pauses
 *                every worker), a transaction as one log record
 *   persist.c    durability: snapshots + append-only log (below)
 *
 * How a BF.ADD travels: net.c reads bytes -> resp.c parses argv in place ->
 * hostcmd.c's bks_execute() checks auth, then either runs a host command
 * or calls bkc_dispatch() -> commands/cmd_bloom.c opens the key through
 * keyspace.c (per-key lock), adds with the library, replies through resp.c's
 * encoder and calls host->wrote() -> keyspace.c hands argv to persist.c,
 * which appends it to the log -> the reply is held until the record is
 * written (in every appendfsync mode; with always, until its fsync too:
 * one write and fsync for a whole round of clients, the group commit) ->
 * net.c writes the reply. docs/ARCHITECTURE.md follows it step by step and
 * lists every file, the ones not named here included (ops.c, opscmd.c,
 * info.c, dump*.c, memtrim.c, rwlock.c, the persist_*.c parts).
 */
#ifndef BKS_SERVER_H
#define BKS_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>  /* FILE: bks_persist_check_data */

#include "bloomkit.h"
#include "command.h"

/*==========================================================================
 * Configuration (config.c)
 *==========================================================================*/

typedef enum bks_fsync { BKS_FSYNC_ALWAYS, BKS_FSYNC_EVERYSEC, BKS_FSYNC_NO } bks_fsync;
typedef enum bks_log_level { BKS_LOG_DEBUG, BKS_LOG_INFO, BKS_LOG_WARNING, BKS_LOG_ERROR } bks_log_level;

typedef struct bks_config {
    char bind[256];              /* "127.0.0.1" */
    int port;                    /* 6380; 0 disables TCP */
    char unixsocket[256];        /* "" disables */
    char unixsocketperm[8];      /* octal mode of the socket file, "" leaves the umask's */
    char dir[1024];              /* data directory, "./data" */
    char requirepass[512];       /* "" none */
    int protected_mode;          /* 1 */
    int bf_growable;             /* 1: BF keys an add creates may be growable (cmd_bloom.c) */
    int cf_growable;             /* 1: CF keys an add creates are growable (cmd_cuckoo.c) */
    /* Redis 8's settings of filters created without them (bkc_defaults) */
    double bf_error_rate;        /* 0.01 */
    uint64_t bf_initial_size;    /* 100 */
    uint64_t bf_expansion_factor; /* 2; 0: NONSCALING */
    uint64_t cf_bucket_size;     /* 2 */
    uint64_t cf_initial_size;    /* 1024 */
    uint64_t cf_max_iterations;  /* 20 */
    uint64_t cf_expansion_factor; /* 1 */
    uint64_t cf_max_expansions;  /* 32 */
    bks_fsync appendfsync;       /* everysec */
    int appendonly;              /* 1: log writes; 0: snapshots only */
    int threads;                 /* 0: one per core */
    uint64_t maxmemory;          /* bytes for filters, 0: no limit */
    uint64_t max_bulk_len;       /* 512 MiB */
    uint32_t max_args;           /* 1,048,576 arguments per command */
    uint32_t max_inline_len;     /* 64 KiB */
    uint64_t max_query_buffer;   /* 1 GiB per client */
    uint32_t maxclients;         /* 10000 */
    uint64_t max_output_buffer;  /* per client, before it is disconnected */
    uint64_t maxmemory_clients;  /* all clients' query buffers together, 0: no cap (2 GiB) */
    uint64_t auto_rewrite_min;   /* compact the log past this size (64 MiB) */
    uint32_t auto_rewrite_pct;   /* ... and this growth since the last (100) */
    uint64_t map_threshold;      /* filters larger than this are mapped at start (64 MiB) */
    int repair_aof;              /* --repair-aof: truncate a corrupt log and go on */
    int rebuild_manifest;        /* --rebuild-manifest: CURRENT missing or damaged */
    uint64_t snapshot_timeout;   /* seconds a snapshot child may run, 0: no limit (3600) */
    uint64_t snapshot_stall_timeout; /* seconds it may make no progress, 0: never (60) */
    bks_log_level loglevel;
    char logfile[1024];          /* "" = stderr */
    int slowlog_log_slower_than; /* microseconds; < 0 off, 0 every command (10000) */
    uint32_t slowlog_max_len;    /* entries kept (128) */
} bks_config;

void bks_config_defaults(bks_config *c);
/* Parse a config file (Redis style: "name value" lines, # comments) and then
 * argv flags (--name value); errors name the file/line or the flag. Returns
 * 0, or -1 after writing a message into err. */
int bks_config_load(bks_config *c, const char *file, int argc, char **argv,
                    char *err, size_t errlen);

/* Leveled logging to the configured log file (thread-safe). */
void bks_log(bks_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Whether a message of this level would be written (skip costly formatting). */
int bks_log_enabled(bks_log_level level);

/*==========================================================================
 * The keyspace (keyspace.c)
 *==========================================================================*/

typedef struct bks_keyspace bks_keyspace;

int bks_keyspace_create(bks_keyspace **out, uint64_t maxmemory);
void bks_keyspace_free(bks_keyspace *ks);

/* The host interface the command layer uses; the host pointer given with it
 * is a bks_session (one per client, so that wrote() knows the client and
 * the key it has open). */
extern const bkc_host_vt bks_host_vt;

typedef struct bks_persist bks_persist;

typedef struct bks_session {
    bks_keyspace *ks;
    bks_persist *persist;  /* NULL: nothing is logged (replay, tests) */
    void *client;          /* net.c's client, for the reply release */
} bks_session;

/* A key loaded with filters mapped from the snapshot is guarded until
 * their payload checksums have been read (persist_verify.c): the keyspace
 * asks bks_guard_check before a command uses the value. Returns 0 when the
 * data may be used (verifying it first, synchronously, if the background
 * verifier has not reached it yet), -1 when the key is corrupt (msg: the
 * whole error reply, naming the file). Thread-safe. */
typedef struct bks_guard bks_guard;
int bks_guard_check(bks_guard *g, bkc_str name, char *msg, size_t cap);

/* Iterate over every key: fn gets the name, the value, the expiry
 * (absolute ms since the epoch, 0 = none), the key's guard (NULL: none
 * or verified) and its origin: the number of the filter file in the
 * installed snapshot that still holds exactly this value (0: none; see
 * bks_keyspace_adopt). Only safe while the server is paused
 * (bks_pause_all) or in a forked child. */
typedef int (*bks_key_fn)(void *arg, bkc_str name, const bkc_value *v,
                          uint64_t expire_at_ms, bks_guard *guard, uint64_t origin);
int bks_keyspace_foreach(bks_keyspace *ks, bks_key_fn fn, void *arg);

/* Insert a loaded value at start-up (no locking, no logging); guard: see
 * above, NULL for a value fully checked when it was read; origin: the
 * number of the snapshot file its filter was read from (0: inline). */
int bks_keyspace_load(bks_keyspace *ks, bkc_str name, bkc_value *v,
                      uint64_t expire_at_ms, bks_guard *guard, uint64_t origin);

/* Snapshots reuse the file of a value that did not change (docs/
 * PERSISTENCE.md, "Keys reused"). Every open to write, and every new
 * value or entry, clears a key's origin and stamps it with the current
 * epoch. bks_keyspace_next_epoch starts a new one at a snapshot's paused
 * instant and returns it; once that snapshot is installed,
 * bks_keyspace_adopt gives the key `name` the origin of its new file if it
 * still holds value v and was not opened to write since (its stamp is not
 * `epoch`). Returns 1 when adopted. Takes the key's write lock. */
uint8_t bks_keyspace_next_epoch(bks_keyspace *ks);
int bks_keyspace_adopt(bks_keyspace *ks, bkc_str name, const bkc_value *v, uint8_t epoch,
                       uint64_t origin);

uint64_t bks_keyspace_size(bks_keyspace *ks);         /* DBSIZE */
uint64_t bks_keyspace_memory(bks_keyspace *ks);       /* bytes of keys and tables */

/*==========================================================================
 * Pausing the whole server (net.c)
 *
 * Every worker holds its own execution mutex while it runs commands;
 * bks_pause_all takes all of them, so that when it returns no command is
 * running anywhere: the keyspace is consistent and quiet. persist.c pauses
 * the server for the instant of fork() that starts a background snapshot.
 *==========================================================================*/

void bks_pause_all(void);
void bks_resume_all(void);

/*==========================================================================
 * Persistence (persist.c, docs/PERSISTENCE.md)
 *
 * The data directory holds:
 *   CURRENT                  the name of the live snapshot directory and log
 *   snap-<gen>/manifest      one record per key: name, kind, expiry, CF
 *                            settings, the files holding its filters
 *   snap-<gen>/<n>.bkf       one bloomkit file per filter (docs/FORMAT.md);
 *                            large ones are mapped copy-on-write at start
 *   appendonly-<gen>.log     the writes since that snapshot: checksummed,
 *                            length-prefixed records of RESP-encoded argv
 *
 * A snapshot is taken in a forked child (bks_pause_all around fork(), so it
 * sees one instant), while the parent starts appendonly-<gen+1>.log at that
 * instant; when the child has written and fsynced snap-<gen+1>, CURRENT is
 * replaced atomically and the old generation removed. Start-up loads the
 * snapshot CURRENT names and replays its log through the command layer. A
 * torn last record (crash mid-append) is dropped with a warning; a bad
 * record followed by good data stops start-up with the file and offset,
 * unless --repair-aof truncates there.
 *==========================================================================*/

int bks_persist_open(bks_persist **out, const bks_config *cfg, bks_keyspace *ks);
void bks_persist_close(bks_persist *p);

/* Append one successful write. With appendfsync always it returns only
 * when the record is on disk (group commit: concurrent writers share one
 * fdatasync). Thread-safe. Returns 0 or -1 (the write could not be logged:
 * the caller answers an error and the server stops accepting writes, as
 * Redis does on a failed AOF write). */
int bks_persist_log(bks_persist *p, int argc, const bkc_str *argv);

/* bks_persist_log in two halves, so that a batch of commands waits once:
 * append the record to the log's buffer (in the order the writes happened:
 * call it under the key's lock) and get its ticket (0: nothing to wait
 * for), then wait until the record has reached the file (always: the
 * disk) before answering. Both return 0 or -1 as bks_persist_log. The
 * record carries time_ms (the clock the command ran with), or the wall
 * clock when it is 0. */
int bks_persist_append(bks_persist *p, int argc, const bkc_str *argv, uint64_t time_ms,
                       uint64_t *ticket);
int bks_persist_wait(bks_persist *p, uint64_t ticket);

/* SAVE (in the foreground, server paused), BGSAVE (forked child), and the
 * state LASTSAVE and INFO report. */
int bks_persist_save(bks_persist *p);
int bks_persist_bgsave(bks_persist *p);
/* The final snapshot of a shutdown: a background snapshot still running
 * (its data predates the last writes) is stopped and replaced by a
 * foreground one. 0 or -1 as bks_persist_save. */
int bks_persist_save_final(bks_persist *p);
uint64_t bks_persist_lastsave(const bks_persist *p);   /* unix seconds */
/* INFO persistence lines ("name:value\r\n" each) of the log's health and
 * of the mapped filters' verification, written to buf (NUL-terminated). */
void bks_persist_info(bks_persist *p, char *buf, size_t cap);
/* INFO rdb_bgsave_in_progress: 1 while a snapshot child runs, 0 when none,
 * -1 when that cannot be told without waiting (ask again). */
int bks_persist_bgsave_in_progress(bks_persist *p);
/* INFO rdb_changes_since_last_save: writes (log records; a transaction is
 * one) since the instant the installed snapshot was taken, or since
 * start-up. */
uint64_t bks_persist_changes(bks_persist *p);
/* CONFIG SET appendfsync: the mode from the next write on (starts the
 * everysec thread if there is none). Call with the server paused. 0 or -1. */
int bks_persist_set_fsync(bks_persist *p, bks_fsync mode);
/* bloomkit-server --check-data: verify the data directory cfg->dir fully
 * (CURRENT, every snapshot frame and payload checksum, every log record)
 * without changing it; a report on out. Returns 0 when all is sound, 1
 * when something is damaged or missing. */
int bks_persist_check_data(const bks_config *cfg, FILE *out);
/* Called by net.c's timer every ~100 ms: reaps a finished child, fsyncs for
 * everysec, starts an automatic rewrite when the log has grown enough. */
void bks_persist_tick(bks_persist *p);

#endif /* BKS_SERVER_H */
