/*
 * server_int.h - what the server's own files share with each other (and
 * nothing that persist.c or commands/ needs: their interface is server.h).
 *
 *   net.c      owns the workers and clients; calls bks_client_execute()
 *   hostcmd.c  bks_execute(): the auth gate, host commands, the rest to
 *              bkc_dispatch; the global server state (g_srv)
 *   (docs/ARCHITECTURE.md has the table of every server file)
 *   keyspace.c the keyspace internals used by the host commands
 *   resp.c     parser and encoder (resp.h)
 */
#ifndef BKS_SERVER_INT_H
#define BKS_SERVER_INT_H

#include <pthread.h>   /* pthread_mutex_t */
#include <stdatomic.h> /* counters shared by the workers */
#include <stdint.h>
#include <stdio.h>     /* FILE */

#include "resp.h"
#include "server.h"

#define BKS_VERSION "0.1.0"
#define BKS_REDIS_VERSION "7.0.0" /* what INFO and HELLO claim for clients */

/*==========================================================================
 * Global state (hostcmd.c)
 *==========================================================================*/

typedef enum bks_shutdown_mode {
    BKS_SHUTDOWN_NONE = 0,
    BKS_SHUTDOWN_SAVE = 1,    /* final save when persistence is on */
    BKS_SHUTDOWN_NOSAVE = 2
} bks_shutdown_mode;

typedef struct bks_server {
    bks_config cfg;
    const char *config_file;    /* NULL: flags only */
    char executable[1024];
    bks_keyspace *ks;
    bks_persist *persist;       /* NULL: persistence off */
    uint64_t start_ms;
    _Atomic int shutdown_mode;  /* bks_shutdown_mode */
    _Atomic int write_error;    /* a log append failed: refuse writes */
    _Atomic uint64_t next_client_id;
    _Atomic uint64_t connected_clients;
    _Atomic uint64_t total_connections;
    _Atomic uint64_t rejected_connections;
    _Atomic uint64_t total_commands;
    _Atomic uint64_t expired_keys;
    _Atomic uint64_t protocol_errors;
    _Atomic uint64_t output_limit_disconnects;
    _Atomic uint64_t lastsave_fallback;   /* LASTSAVE without persistence */
} bks_server;

extern bks_server g_srv;

uint64_t bks_now_ms(void);
/* When non-zero, what bks_now_ms answers in this thread: EXEC freezes the
 * clock for its whole transaction (and replay for a logged one). */
extern _Thread_local uint64_t bks_tl_frozen_ms;

/*==========================================================================
 * Clients (net.c)
 *==========================================================================*/

typedef struct bks_client bks_client;

/* What hostcmd.c needs to know about and do to a client. */
uint64_t bks_client_id(const bks_client *c);
const char *bks_client_name(const bks_client *c);       /* "" when none */
int bks_client_set_name(bks_client *c, const char *name, size_t len);
const char *bks_client_addr(const bks_client *c);
int bks_client_authed(const bks_client *c);
void bks_client_set_authed(bks_client *c, int authed);
int bks_client_resp(const bks_client *c);
void bks_client_set_resp(bks_client *c, int resp);
void bks_client_close_after_reply(bks_client *c);       /* QUIT */
int bks_client_closing(const bks_client *c);    /* run nothing more for it */
/* Drop the worker's execution mutex around a call that pauses the whole
 * server (SAVE, FLUSHALL, RENAME ...) and take it back afterwards. */
void bks_worker_unlock_self(void);
void bks_worker_lock_self(void);
/* Ask the main thread to stop the server (SHUTDOWN, signals). */
void bks_request_shutdown(bks_shutdown_mode mode);
/* A one-line description of every client (CLIENT LIST); caller frees. */
char *bks_clients_describe(size_t *len);

/* net.c: start the workers (bind listeners: errors are fatal), run until a
 * shutdown is requested, stop them. Returns 0 or -1. */
int bks_net_start(void);
/* Bytes of query buffer all clients hold now (INFO mem_clients_normal). */
uint64_t bks_net_client_query_bytes(void);
int bks_net_run(void);       /* main thread: signals + shutdown requests */
void bks_net_stop(void);
void bks_net_free(void);

/*==========================================================================
 * Giving memory back (memtrim.c)
 *==========================================================================*/

#define BKS_MEM_BIG (1024 * 1024)   /* freed blocks this large count */

/* At start, before any thread: fix glibc's mmap and trim thresholds. */
void bks_mem_init(void);
/* A block of at least BKS_MEM_BIG bytes was freed (any thread; atomic). */
void bks_mem_released(size_t bytes);
/* Worker 0's 100 ms timer: malloc_trim(0) when enough was released (or
 * used_memory fell by that much) and RSS is well above what is in use;
 * rate-limited as memtrim.c explains. */
void bks_mem_tick(uint64_t used_memory, uint64_t now_ms);
/* Resident set size from /proc/self/statm, 0 if unreadable. */
uint64_t bks_mem_rss(void);
/* INFO memory: trims so far, and how long the last one took. */
uint64_t bks_mem_trims(void);
uint64_t bks_mem_trim_last_us(void);

/*==========================================================================
 * Executing a request (hostcmd.c)
 *==========================================================================*/

/* Run one parsed request for client c (session s), replying through r.
 * c is NULL when replaying the log (no auth gate, no client state). */
void bks_execute(bks_client *c, bks_session *s, bkc_reply *r, int resp,
                 int argc, const bkc_str *argv);

/* Answers in an output buffer that wait for log records: n replies in
 * out->p[start, end), encoded in resp. */
typedef struct bks_log_span {
    size_t start, end;
    int n, resp;
} bks_log_span;

/* A client's answers not yet free to go out: the spans, and the last log
 * record they wait for (its ticket, bks_persist_append). */
typedef struct bks_log_wait {
    bks_log_span *v;
    int n, cap;
    uint64_t ticket;
} bks_log_wait;

/* Execute a run of requests parsed from one read (pipelining): consecutive
 * BF.ADD / BF.EXISTS (CF.EXISTS) on the same key are coalesced into one
 * batched BF.MADD / BF.MEXISTS (CF.MEXISTS) and their replies split again;
 * CF.ADD runs open their key once. Stops before a request once out holds
 * out_stop bytes; returns how many ran (all of them once the client is
 * closing). With wait NULL it waits for the batch's log records before it
 * returns; else the answers that need them are added to *wait, and the
 * caller waits (bks_log_release) before it sends out. */
int bks_execute_batch(bks_client *c, bks_session *s, bks_outbuf *out, int resp,
                      int nreq, const int *argcs, const bkc_str *const *argvs, size_t out_stop,
                      bks_log_wait *wait);

/* Wait for the records w waits for; if they could not be logged, each
 * answer it covers becomes the MISCONF error. Empties w. */
void bks_log_release(bks_outbuf *out, bks_log_wait *w);
/* Wait for one ticket (keyspace.c): 0, or -1 when it could not be logged
 * (writes are then refused). */
int bks_log_wait_ticket(uint64_t ticket);

/*==========================================================================
 * Transactions (multi.c)
 *==========================================================================*/

typedef struct bks_multi bks_multi;   /* a client's MULTI queue and WATCHes */

/* The client's slot for it (net.c; NULL until the first MULTI or WATCH). */
bks_multi **bks_client_multi(bks_client *c);
void bks_multi_free(bks_multi *m);    /* at disconnect; NULL is fine */
/* 1 between MULTI and EXEC/DISCARD: requests are to be queued. */
int bks_multi_queueing(bks_client *c);
/* Queue a copy of a checked request: 0, or -1 (out of memory, or the
 * queue would outgrow client-query-buffer-limit). */
int bks_multi_queue(bks_client *c, int argc, const bkc_str *argv);
/* A request was refused while queueing: EXEC will answer EXECABORT. */
void bks_multi_flag_dirty(bks_client *c);
/* MULTI, EXEC, DISCARD, WATCH, UNWATCH (the host table's entries); with
 * c NULL, EXEC replays a transaction record of the log. */
void bks_multi_command(bks_client *c, bks_session *s, bkc_reply *r, int resp, int argc,
                       const bkc_str *argv);
/* Wait until the records this thread appended to the log (keyspace.c's
 * log_argv) have reached the file: before the answers to the writes that
 * made them go out. 0, or -1 when they could not be logged (the answers
 * become MISCONF errors; writes are refused from then on). */
int bks_log_settle(void);
/* The last log record this thread appended and has not waited for (0:
 * none). */
extern _Thread_local uint64_t bks_tl_log_ticket;
/* The clock of the layer's command running on this thread (its ctx.now_ms),
 * the time its log records carry; 0 for a host command (the wall clock). */
extern _Thread_local uint64_t bks_tl_cmd_ms;

/* keyspace.c's log_argv: every write goes through here first (WATCH
 * versions); returns 1 when it was kept for EXEC's one log record. */
int bks_multi_wrote(int argc, const bkc_str *argv);

/*==========================================================================
 * Keyspace internals used by the host commands (keyspace.c)
 *==========================================================================*/

/* The keyspace is "loading" from its creation until bks_keyspace_loaded:
 * no key expires while the log is replayed (the log holds the DELs). */
void bks_keyspace_loaded(bks_keyspace *ks);

/* -1: no such key; else the kind (BKC_KIND_*). Expires lazily. */
int bks_ks_kind(bks_keyspace *ks, bks_session *s, bkc_str name);
/* Delete one key (DEL/UNLINK): 1 deleted, 0 missing. Logs "DEL name". */
int bks_ks_delete(bks_keyspace *ks, bks_session *s, bkc_str name);
/* Expiry of an existing key: -2 missing, else the absolute ms (0 none). */
int64_t bks_ks_get_expire(bks_keyspace *ks, bks_session *s, bkc_str name);
/* Set (at_ms > 0) or remove (at_ms == 0) the expiry of an existing key;
 * an expiry in the past deletes it. flags: BKS_EXP_NX/XX/GT/LT. Returns 1
 * done, 0 missing or condition not met, -1 out of memory (a key's first
 * expiry takes a small block; nothing changed). Logs PEXPIREAT/PERSIST/DEL. */
#define BKS_EXP_NX 1
#define BKS_EXP_XX 2
#define BKS_EXP_GT 4
#define BKS_EXP_LT 8
int bks_ks_set_expire(bks_keyspace *ks, bks_session *s, bkc_str name,
                      uint64_t at_ms, int flags);
/* RENAME / RENAMENX: 1 done, 0 dst exists (nx), -1 no such key. Call with
 * the server paused. Logs argv. */
int bks_ks_rename(bks_keyspace *ks, bks_session *s, bkc_str src, bkc_str dst,
                  int nx);
/* FLUSHALL: call with the server paused. */
void bks_ks_flush(bks_keyspace *ks);
/* Keys matching a glob pattern (NULL: all); names as one NUL-separated
 * list of (len, bytes). fn is called for each live key; stop when fn
 * returns non-zero. Locks one stripe at a time. */
typedef int (*bks_name_fn)(void *arg, const char *name, size_t len, bkc_kind kind);
void bks_ks_each(bks_keyspace *ks, bks_name_fn fn, void *arg);
/* SCAN: visits a few buckets from cursor, returns the next cursor (0: done). */
uint64_t bks_ks_scan(bks_keyspace *ks, uint64_t cursor, uint64_t count,
                     bks_name_fn fn, void *arg);
uint64_t bks_ks_expires(bks_keyspace *ks);   /* keys with an expiry */
/* Active expiry: test a sample of keys with an expiry; call from worker 0's
 * timer with its execution mutex held. Returns keys deleted. */
uint64_t bks_ks_active_expire(bks_keyspace *ks, bks_session *s, uint64_t now_ms);
/* Redis's glob matching (*, ?, [a-z], [^x], \x), binary safe. */
int bks_glob_match(const char *pat, size_t plen, const char *s, size_t slen,
                   int nocase);

/* config.c */
void bks_log_open(const bks_config *c);
void bks_log_close(void);
void bks_config_usage(FILE *out);
/* bkc_defaults_in_force from the configuration (bf-error-rate ...,
 * bf-growable, cf-growable): at start and after CONFIG SET. */
void bks_config_apply_bloom(const bks_config *c);
/* CONFIG GET: calls fn(name, value) for each option matching pattern. */
void bks_config_get(const bks_config *c, const char *pattern, size_t plen,
                    void (*fn)(void *arg, const char *name, const char *value),
                    void *arg);

#endif /* BKS_SERVER_INT_H */
