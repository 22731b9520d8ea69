/*
 * ops.h - what the operations side of bloomkit-server shares: statistics
 * per command and per error (INFO commandstats / errorstats / stats), the
 * slow log, the MONITOR feed, the INFO text, and the ops commands
 * (MEMORY, SLOWLOG, DEBUG, MONITOR, CONFIG SET/REWRITE/RESETSTAT).
 *
 *   ops.c      counters (per worker thread, summed on demand), the slow
 *              log, formatting a command for MONITOR, bks_ops_record()
 *   info.c     INFO [section ...]
 *   opscmd.c   the ops commands
 *   dump.c     DUMP / RESTORE (dump_codec.c: the payload, the module's RDB
 *              encoding with Redis's trailer)
 */
#ifndef BKS_OPS_H
#define BKS_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "server_int.h"

/*==========================================================================
 * Counters and the command hook (ops.c)
 *==========================================================================*/

/* Monotonic microseconds (command durations). */
uint64_t bks_ops_clock_us(void);

/* After one command ran for client c (never NULL): name is the command's
 * canonical lower-case name (a static string) or NULL for an unknown
 * command; calls is 1 except for a coalesced pipeline run; err is the
 * error text of the reply (NULL when it succeeded), errlen its length.
 * Updates commandstats / errorstats, the slow log, the client's idle time
 * and last command, and feeds MONITOR clients. */
void bks_ops_record(bks_client *c, const char *name, uint64_t calls, int argc,
                    const bkc_str *argv, uint64_t start_us, const char *err, size_t errlen);

/* Keyspace reads (keyspace.c): a lookup found the key or did not. */
void bks_ops_lookup(int hit);

/* Worker 0's 100 ms timer: samples for instantaneous_ops_per_sec. */
void bks_ops_tick(void);

/* CONFIG RESETSTAT: every counter back to 0 (not the slow log). */
void bks_ops_reset(void);

/* Free what the counters allocated (at exit, after the workers stopped). */
void bks_ops_free(void);

/* Sums for INFO. */
typedef struct bks_ops_totals {
    uint64_t commands, hits, misses, errors, rejected, failed;
} bks_ops_totals;
void bks_ops_totals_get(bks_ops_totals *t);
double bks_ops_per_sec(void);

/* Each command seen since start (or RESETSTAT) with its counters. */
typedef void (*bks_cmdstat_fn)(void *arg, const char *name, uint64_t calls, uint64_t usec,
                               uint64_t rejected, uint64_t failed);
void bks_ops_each_command(bks_cmdstat_fn fn, void *arg);
/* Each error prefix ("ERR", "WRONGTYPE") with its count. */
void bks_ops_each_error(void (*fn)(void *arg, const char *prefix, uint64_t count), void *arg);

/*==========================================================================
 * Slow log (ops.c); settings are g_srv.cfg.slowlog_* (CONFIG SET)
 *==========================================================================*/

typedef void (*bks_slowlog_fn)(void *arg, uint64_t id, uint64_t unix_s, uint64_t usec,
                               int argc, const bkc_str *argv, const char *addr,
                               const char *name);
/* The newest count entries (count < 0: all), newest first. */
void bks_slowlog_each(long long count, bks_slowlog_fn fn, void *arg);
uint64_t bks_slowlog_len(void);
void bks_slowlog_reset(void);

/*==========================================================================
 * MONITOR (ops.c formats, net.c delivers)
 *==========================================================================*/

/* How many clients are in MONITOR mode (net.c keeps it). */
extern _Atomic int bks_monitors;
/* Make c a monitor: it gets every later command as a status line. */
int bks_client_monitor(bks_client *c);
/* Hand one formatted line ("+1700000000.123456 [0 addr] \"CMD\" ...\r\n")
 * to every monitor; their workers write it. */
void bks_monitor_feed(const char *line, size_t len);

/*==========================================================================
 * Clients (net.c): what CLIENT LIST / KILL and the slow log need
 *==========================================================================*/

/* The client's last command and the time it ran (ms). */
void bks_client_note_command(bks_client *c, const char *name, uint64_t now_ms);
int bks_client_is_unix(const bks_client *c);

/* CLIENT KILL filters; a field that is 0 / NULL does not filter. */
typedef struct bks_kill_filter {
    uint64_t id;            /* ID */
    const char *addr;       /* ADDR ip:port */
    const char *laddr;      /* LADDR ip:port */
    const char *user;       /* USER: only "default" exists */
    int type;               /* 1 normal, 2 pubsub/master/replica (none here) */
    long long maxage;       /* MAXAGE seconds, 0: any */
    int skipme;             /* SKIPME yes (the default) */
} bks_kill_filter;
/* Close the matching clients (self after its reply); returns how many. */
uint64_t bks_clients_kill(bks_client *self, const bks_kill_filter *f);

/*==========================================================================
 * Configuration at run time (config.c)
 *==========================================================================*/

/* CONFIG SET name value: validates, then applies it to g_srv.cfg and
 * wherever the setting is in force. Call with the server paused. Returns
 * 0, or -1 with a message in err (Redis's wording where it has one). */
int bks_config_set(const char *name, const char *value, char *err, size_t errlen);
/* CONFIG REWRITE: the config file with every option's current value (lines
 * kept in place, comments kept, options set at run time appended);
 * written to a temporary file and renamed over. 0 or -1 with err. */
int bks_config_rewrite(const char *file, char *err, size_t errlen);
/* CONFIG SET maxmemory: the keyspace's limit (keyspace.c; server paused). */
void bks_keyspace_set_maxmemory(bks_keyspace *ks, uint64_t maxmemory);
/* MEMORY USAGE: what the open key costs (its entry, expiry block and
 * value: the share of used_memory it is counted for; 0 when missing). */
size_t bks_ks_key_bytes(bkc_key *k);
/* What a block from malloc costs: glibc's usable size and chunk header
 * (0 for NULL). */
size_t bks_block_bytes(const void *p);
/* SIGHUP: close and reopen the log file (logrotate moved the old one). */
void bks_log_reopen(void);

/*==========================================================================
 * INFO (info.c)
 *==========================================================================*/

/* The INFO text for the sections asked for (argv[1..]); caller frees.
 * NULL when out of memory. */
char *bks_info_text(bks_session *s, int argc, const bkc_str *argv, size_t *len);

/* "1.50M" as Redis prints used_memory_human. */
void bks_human_bytes(char *buf, size_t cap, uint64_t n);

/*==========================================================================
 * The ops commands (opscmd.c, dump.c); same shape as hostcmd.c's
 *==========================================================================*/

void bks_cmd_memory(bks_client *c, bks_session *s, bkc_reply *r, int argc, const bkc_str *argv);
void bks_cmd_slowlog(bks_client *c, bks_session *s, bkc_reply *r, int argc, const bkc_str *argv);
void bks_cmd_debug(bks_client *c, bks_session *s, bkc_reply *r, int argc, const bkc_str *argv);
void bks_cmd_monitor(bks_client *c, bks_session *s, bkc_reply *r, int argc, const bkc_str *argv);
/* CONFIG SET / REWRITE / RESETSTAT (GET stays in hostcmd.c). */
void bks_cmd_config_set(bks_client *c, bks_session *s, bkc_reply *r, int argc,
                        const bkc_str *argv);
void bks_cmd_config_rewrite(bks_client *c, bks_session *s, bkc_reply *r, int argc,
                            const bkc_str *argv);
void bks_cmd_client_kill(bks_client *c, bks_session *s, bkc_reply *r, int argc,
                         const bkc_str *argv);
void bks_cmd_cluster(bks_client *c, bks_session *s, bkc_reply *r, int argc,
                     const bkc_str *argv);
void bks_cmd_dump(bks_client *c, bks_session *s, bkc_reply *r, int argc, const bkc_str *argv);
void bks_cmd_restore(bks_client *c, bks_session *s, bkc_reply *r, int argc,
                     const bkc_str *argv);

#endif /* BKS_OPS_H */
