/*
 * ops.c - the numbers behind INFO, the slow log and MONITOR's lines.
 *
 * Every command a client runs ends in bks_ops_record() (hostcmd.c calls it
 * with the command's name, duration and error text, if any). The hot path
 * must not make the workers fight over cache lines, so the counters are
 * per thread: each worker owns a table (calls, microseconds, rejected and
 * failed calls per command slot; keyspace hits and misses) that only it
 * writes, with relaxed atomic stores; INFO sums the tables of all threads.
 * A command's slot comes from its name pointer (the command tables' names
 * are static strings): a small open-addressing table maps the pointer to a
 * slot, filled once per command under a mutex and read without one.
 *
 * Redis's split of errors: a rejected call failed before it ran (arity,
 * NOAUTH, MISCONF, out of memory: ours are recognised by their text), a
 * failed call ran and answered an error. Both count in errorstats by the
 * error's first word ("ERR", "WRONGTYPE"); like Redis, at most 128
 * distinct prefixes are tracked.
 *
 * The slow log keeps the newest slowlog-max-len commands that took at
 * least slowlog-log-slower-than microseconds (negative: off, 0: every
 * command), with at most 32 arguments of at most 128 bytes each, as Redis
 * trims them; a ring under a mutex (only slow commands reach it).
 *
 * MONITOR: when at least one client monitors, each command is formatted
 * once as Redis prints it (+unix.micro [0 addr] "ARG" ... with C-style
 * escapes) and handed to net.c, which queues it for every monitor.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h> /* strncasecmp */
#include <time.h>

#include "ops.h"

/*==========================================================================
 * Per-thread counters
 *==========================================================================*/

#define NSLOTS 256   /* command slots: the command tables have < 128 names */

typedef struct cmd_counters {
    _Atomic uint64_t calls, usec, rejected, failed;
} cmd_counters;

typedef struct tl_stats {
    cmd_counters cmd[NSLOTS];
    _Atomic uint64_t hits, misses, commands, errors, rejected, failed;
    struct tl_stats *next;
} tl_stats;

static _Thread_local tl_stats *tl;
static tl_stats *g_tables;                 /* every thread's, under g_tables_mu */
static pthread_mutex_t g_tables_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *_Atomic g_slot_name[NSLOTS];
static pthread_mutex_t g_slot_mu = PTHREAD_MUTEX_INITIALIZER;

/* Only the owning thread writes its table: no read-modify-write needed. */
static inline void bump(_Atomic uint64_t *v, uint64_t d)
{
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + d,
                          memory_order_relaxed);
}

static tl_stats *my_table(void)
{
    if (tl)
        return tl;
    tl_stats *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    pthread_mutex_lock(&g_tables_mu);
    t->next = g_tables;
    g_tables = t;
    pthread_mutex_unlock(&g_tables_mu);
    tl = t;
    return t;
}

static int slot_of(const char *name)
{
    uintptr_t p = (uintptr_t)name;
    size_t i = (size_t)((p >> 3) * 0x9E3779B97F4A7C15ull >> 56) & (NSLOTS - 1);
    for (size_t probe = 0; probe < NSLOTS; probe++, i = (i + 1) & (NSLOTS - 1)) {
        const char *n = atomic_load_explicit(&g_slot_name[i], memory_order_acquire);
        if (n == name)
            return (int)i;
        if (n == NULL) {
            pthread_mutex_lock(&g_slot_mu);
            n = atomic_load_explicit(&g_slot_name[i], memory_order_relaxed);
            if (n == NULL)
                atomic_store_explicit(&g_slot_name[i], name, memory_order_release);
            pthread_mutex_unlock(&g_slot_mu);
            if (n == NULL || n == name)
                return (int)i;
        }
    }
    return -1;
}

uint64_t bks_ops_clock_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void bks_ops_lookup(int hit)
{
    tl_stats *t = my_table();
    if (t)
        bump(hit ? &t->hits : &t->misses, 1);
}

/*==========================================================================
 * Error statistics
 *==========================================================================*/

#define MAX_ERROR_KINDS 128

static struct {
    char prefix[32];
    uint64_t count;
} g_errors[MAX_ERROR_KINDS];
static size_t g_nerrors;
static pthread_mutex_t g_errors_mu = PTHREAD_MUTEX_INITIALIZER;

static void count_error(const char *err, size_t len)
{
    size_t n = 0;
    while (n < len && n < sizeof g_errors[0].prefix - 1 && err[n] != ' ')
        n++;
    pthread_mutex_lock(&g_errors_mu);
    size_t i;
    for (i = 0; i < g_nerrors; i++)
        if (strlen(g_errors[i].prefix) == n && !memcmp(g_errors[i].prefix, err, n))
            break;
    if (i == g_nerrors && g_nerrors < MAX_ERROR_KINDS) {
        memcpy(g_errors[i].prefix, err, n);
        g_errors[i].prefix[n] = '\0';
        g_nerrors++;
    }
    if (i < g_nerrors)
        g_errors[i].count++;
    pthread_mutex_unlock(&g_errors_mu);
}

/* Errors a command gets before it runs (Redis's "rejected calls"). */
static int is_rejection(const char *err, size_t len)
{
    static const char *const texts[] = {"ERR wrong number of arguments", "NOAUTH ",
                                        "MISCONF ", "OOM ", "ERR unknown command"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        size_t n = strlen(texts[i]);
        if (len >= n && !memcmp(err, texts[i], n))
            return 1;
    }
    return 0;
}

/*==========================================================================
 * Slow log
 *==========================================================================*/

#define SLOW_MAX_ARGS 32
#define SLOW_MAX_ARG_LEN 128

typedef struct slow_entry {
    uint64_t id, unix_s, usec;
    int argc;
    bkc_str *argv;          /* each ptr malloc'ed */
    char addr[64];
    char name[64];
} slow_entry;

static slow_entry *g_slow;        /* ring of g_slow_cap entries */
static size_t g_slow_cap, g_slow_len, g_slow_head;  /* head: the next slot written */
static uint64_t g_slow_next_id;
static pthread_mutex_t g_slow_mu = PTHREAD_MUTEX_INITIALIZER;

static void slow_entry_clear(slow_entry *e)
{
    for (int i = 0; i < e->argc; i++)
        free((void *)e->argv[i].ptr);
    free(e->argv);
    e->argv = NULL;
    e->argc = 0;
}

static char *dup_bytes(const char *p, size_t n)
{
    char *d = malloc(n ? n : 1);
    if (d && n)
        memcpy(d, p, n);
    return d;
}

/* Redis's trimming: 32 arguments at most (the last says how many more),
 * 128 bytes each (with how many more bytes). */
static int slow_copy_args(slow_entry *e, int argc, const bkc_str *argv)
{
    int n = argc > SLOW_MAX_ARGS ? SLOW_MAX_ARGS : argc;
    e->argv = calloc((size_t)n, sizeof *e->argv);
    if (!e->argv)
        return -1;
    for (int i = 0; i < n; i++) {
        char buf[SLOW_MAX_ARG_LEN + 64];
        size_t len;
        if (argc > SLOW_MAX_ARGS && i == SLOW_MAX_ARGS - 1) {
            len = (size_t)snprintf(buf, sizeof buf, "... (%d more arguments)",
                                   argc - SLOW_MAX_ARGS + 1);
        } else if (argv[i].len > SLOW_MAX_ARG_LEN) {
            memcpy(buf, argv[i].ptr, SLOW_MAX_ARG_LEN);
            len = SLOW_MAX_ARG_LEN + (size_t)snprintf(buf + SLOW_MAX_ARG_LEN,
                                                      sizeof buf - SLOW_MAX_ARG_LEN,
                                                      "... (%zu more bytes)",
                                                      argv[i].len - SLOW_MAX_ARG_LEN);
        } else {
            len = argv[i].len;
            memcpy(buf, argv[i].ptr, len);
        }
        char *d = dup_bytes(buf, len);
        if (!d) {
            e->argc = i;
            slow_entry_clear(e);
            return -1;
        }
        e->argv[i] = (bkc_str){d, len};
        e->argc = i + 1;
    }
    return 0;
}

/* Resize the ring to the configured length, keeping the newest. Under
 * g_slow_mu. Returns the capacity now in force. */
static size_t slow_fit(size_t want)
{
    if (want == g_slow_cap)
        return g_slow_cap;
    slow_entry *n = want ? calloc(want, sizeof *n) : NULL;
    if (want && !n)
        return g_slow_cap;
    /* copy the newest min(len, want), oldest first */
    size_t keep = g_slow_len < want ? g_slow_len : want;
    for (size_t i = 0; i < g_slow_len; i++) {
        size_t idx = (g_slow_head + g_slow_cap - g_slow_len + i) % g_slow_cap;
        if (i >= g_slow_len - keep)
            n[i - (g_slow_len - keep)] = g_slow[idx];
        else
            slow_entry_clear(&g_slow[idx]);
    }
    free(g_slow);
    g_slow = n;
    g_slow_cap = want;
    g_slow_len = keep;
    g_slow_head = want ? keep % want : 0;
    return g_slow_cap;
}

static void slow_add(bks_client *c, int argc, const bkc_str *argv, uint64_t usec)
{
    size_t maxlen = __atomic_load_n(&g_srv.cfg.slowlog_max_len, __ATOMIC_RELAXED);
    pthread_mutex_lock(&g_slow_mu);
    if (slow_fit(maxlen) == 0) {
        pthread_mutex_unlock(&g_slow_mu);
        return;
    }
    slow_entry *e = &g_slow[g_slow_head];
    if (g_slow_len == g_slow_cap) {
        slow_entry_clear(e);          /* the oldest goes */
        g_slow_len--;
    }
    if (slow_copy_args(e, argc, argv) < 0) {   /* out of memory: not logged */
        pthread_mutex_unlock(&g_slow_mu);
        return;
    }
    e->id = g_slow_next_id++;
    e->unix_s = bks_now_ms() / 1000;
    e->usec = usec;
    snprintf(e->addr, sizeof e->addr, "%s", bks_client_addr(c));
    snprintf(e->name, sizeof e->name, "%s", bks_client_name(c));
    g_slow_head = (g_slow_head + 1) % g_slow_cap;
    g_slow_len++;
    pthread_mutex_unlock(&g_slow_mu);
}

void bks_slowlog_each(long long count, bks_slowlog_fn fn, void *arg)
{
    pthread_mutex_lock(&g_slow_mu);
    size_t n = count < 0 || (unsigned long long)count > g_slow_len ? g_slow_len
                                                                   : (size_t)count;
    for (size_t i = 0; i < n; i++) {
        const slow_entry *e = &g_slow[(g_slow_head + g_slow_cap - 1 - i) % g_slow_cap];
        fn(arg, e->id, e->unix_s, e->usec, e->argc, e->argv, e->addr, e->name);
    }
    pthread_mutex_unlock(&g_slow_mu);
}

uint64_t bks_slowlog_len(void)
{
    pthread_mutex_lock(&g_slow_mu);
    uint64_t n = g_slow_len;
    pthread_mutex_unlock(&g_slow_mu);
    return n;
}

void bks_slowlog_reset(void)
{
    pthread_mutex_lock(&g_slow_mu);
    for (size_t i = 0; i < g_slow_cap; i++)
        slow_entry_clear(&g_slow[i]);
    g_slow_len = 0;
    g_slow_head = 0;
    pthread_mutex_unlock(&g_slow_mu);
}

/*==========================================================================
 * MONITOR lines and debug logging
 *==========================================================================*/

/* Append s as Redis quotes an argument (sdscatrepr). */
static void append_repr(bks_outbuf *b, const char *s, size_t n)
{
    bks_outbuf_append(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[8];
        size_t el = 0;
        switch (ch) {
        case '\\': esc[0] = '\\'; esc[1] = '\\'; el = 2; break;
        case '"': esc[0] = '\\'; esc[1] = '"'; el = 2; break;
        case '\n': esc[0] = '\\'; esc[1] = 'n'; el = 2; break;
        case '\r': esc[0] = '\\'; esc[1] = 'r'; el = 2; break;
        case '\t': esc[0] = '\\'; esc[1] = 't'; el = 2; break;
        case '\a': esc[0] = '\\'; esc[1] = 'a'; el = 2; break;
        case '\b': esc[0] = '\\'; esc[1] = 'b'; el = 2; break;
        default:
            if (ch >= 32 && ch < 127) {
                esc[0] = (char)ch;
                el = 1;
            } else {
                el = (size_t)snprintf(esc, sizeof esc, "\\x%02x", ch);
            }
        }
        bks_outbuf_append(b, esc, el);
    }
    bks_outbuf_append(b, "\"", 1);
}

static void append_args(bks_outbuf *b, int argc, const bkc_str *argv)
{
    for (int i = 0; i < argc; i++) {
        if (i)
            bks_outbuf_append(b, " ", 1);
        append_repr(b, argv[i].ptr, argv[i].len);
    }
}

static void feed_monitors(bks_client *c, int argc, const bkc_str *argv)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    bks_outbuf b = {0};
    char head[160];
    int n;
    if (bks_client_is_unix(c)) {
        /* net.c names a Unix-socket client "path:0"; Redis prints unix:path */
        const char *a = bks_client_addr(c);
        size_t al = strlen(a);
        if (al >= 2 && !strcmp(a + al - 2, ":0"))
            al -= 2;
        n = snprintf(head, sizeof head, "+%lld.%06ld [0 unix:%.*s] ", (long long)ts.tv_sec,
                     ts.tv_nsec / 1000, (int)(al > 100 ? 100 : al), a);
    } else {
        n = snprintf(head, sizeof head, "+%lld.%06ld [0 %s] ", (long long)ts.tv_sec,
                     ts.tv_nsec / 1000, bks_client_addr(c));
    }
    bks_outbuf_append(&b, head, (size_t)n);
    append_args(&b, argc, argv);
    bks_outbuf_append(&b, "\r\n", 2);
    if (!b.oom)
        bks_monitor_feed(b.p, b.len);
    bks_outbuf_free(&b);
}

static void log_command(bks_client *c, int argc, const bkc_str *argv, uint64_t usec,
                        const char *err, size_t errlen)
{
    bks_outbuf b = {0};
    /* at most 8 arguments of 64 bytes: enough to recognise the command */
    int n = argc > 8 ? 8 : argc;
    for (int i = 0; i < n; i++) {
        if (i)
            bks_outbuf_append(&b, " ", 1);
        append_repr(&b, argv[i].ptr, argv[i].len > 64 ? 64 : argv[i].len);
    }
    bks_outbuf_append(&b, "", 1);
    if (b.oom) {
        bks_outbuf_free(&b);
        return;
    }
    bks_log(BKS_LOG_DEBUG, "client id=%llu %s: %s%s (%llu us)%s%.*s",
            (unsigned long long)bks_client_id(c), bks_client_addr(c), b.p,
            argc > n ? " ..." : "", (unsigned long long)usec, err ? ": " : "",
            err ? (int)(errlen > 200 ? 200 : errlen) : 0, err ? err : "");
    bks_outbuf_free(&b);
}

/*==========================================================================
 * The hook
 *==========================================================================*/

void bks_ops_record(bks_client *c, const char *name, uint64_t calls, int argc,
                    const bkc_str *argv, uint64_t start_us, const char *err, size_t errlen)
{
    uint64_t now = bks_ops_clock_us();
    uint64_t usec = now - start_us;
    int rejected = err && is_rejection(err, errlen);
    tl_stats *t = my_table();
    if (t) {
        bump(&t->commands, calls);
        int slot = name ? slot_of(name) : -1;
        if (slot >= 0) {
            cmd_counters *cc = &t->cmd[slot];
            if (rejected) {
                bump(&cc->rejected, 1);
            } else {
                bump(&cc->calls, calls);
                bump(&cc->usec, usec);
                if (err)
                    bump(&cc->failed, 1);
            }
        }
        if (err) {
            bump(&t->errors, 1);
            bump(rejected ? &t->rejected : &t->failed, 1);
        }
    }
    if (err)
        count_error(err, errlen);
    bks_client_note_command(c, name, now / 1000);
    if (rejected)
        return;
    int slower = __atomic_load_n(&g_srv.cfg.slowlog_log_slower_than, __ATOMIC_RELAXED);
    if (slower >= 0 && usec >= (uint64_t)slower)
        slow_add(c, argc, argv, usec);
    if (atomic_load_explicit(&bks_monitors, memory_order_relaxed) > 0 && name &&
        strcmp(name, "auth") && strcmp(name, "hello") && strcmp(name, "monitor"))
        feed_monitors(c, argc, argv);
    if (bks_log_enabled(BKS_LOG_DEBUG))
        log_command(c, argc, argv, usec, err, errlen);
}

/*==========================================================================
 * Sums, rates, reset
 *==========================================================================*/

#define OPS_SAMPLES 16

static _Atomic uint64_t g_samples[OPS_SAMPLES];
static unsigned g_sample_idx;          /* worker 0's timer only */
static uint64_t g_last_ms, g_last_cmds; /* worker 0's timer only */

void bks_ops_totals_get(bks_ops_totals *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&g_tables_mu);
    for (tl_stats *t = g_tables; t; t = t->next) {
        out->commands += atomic_load_explicit(&t->commands, memory_order_relaxed);
        out->hits += atomic_load_explicit(&t->hits, memory_order_relaxed);
        out->misses += atomic_load_explicit(&t->misses, memory_order_relaxed);
        out->errors += atomic_load_explicit(&t->errors, memory_order_relaxed);
        out->rejected += atomic_load_explicit(&t->rejected, memory_order_relaxed);
        out->failed += atomic_load_explicit(&t->failed, memory_order_relaxed);
    }
    pthread_mutex_unlock(&g_tables_mu);
}

void bks_ops_tick(void)
{
    uint64_t now = bks_ops_clock_us() / 1000;
    bks_ops_totals t;
    bks_ops_totals_get(&t);
    if (g_last_ms && now > g_last_ms) {
        uint64_t d = t.commands >= g_last_cmds ? t.commands - g_last_cmds : 0;
        atomic_store(&g_samples[g_sample_idx], d * 1000 / (now - g_last_ms));
        g_sample_idx = (g_sample_idx + 1) % OPS_SAMPLES;
    }
    g_last_ms = now;
    g_last_cmds = t.commands;
}

double bks_ops_per_sec(void)
{
    uint64_t sum = 0;
    for (int i = 0; i < OPS_SAMPLES; i++)
        sum += atomic_load(&g_samples[i]);
    return (double)sum / OPS_SAMPLES;
}

void bks_ops_each_command(bks_cmdstat_fn fn, void *arg)
{
    for (size_t i = 0; i < NSLOTS; i++) {
        const char *name = atomic_load_explicit(&g_slot_name[i], memory_order_acquire);
        if (!name)
            continue;
        uint64_t calls = 0, usec = 0, rejected = 0, failed = 0;
        pthread_mutex_lock(&g_tables_mu);
        for (tl_stats *t = g_tables; t; t = t->next) {
            calls += atomic_load_explicit(&t->cmd[i].calls, memory_order_relaxed);
            usec += atomic_load_explicit(&t->cmd[i].usec, memory_order_relaxed);
            rejected += atomic_load_explicit(&t->cmd[i].rejected, memory_order_relaxed);
            failed += atomic_load_explicit(&t->cmd[i].failed, memory_order_relaxed);
        }
        pthread_mutex_unlock(&g_tables_mu);
        if (calls || rejected || failed)
            fn(arg, name, calls, usec, rejected, failed);
    }
}

void bks_ops_each_error(void (*fn)(void *arg, const char *prefix, uint64_t count), void *arg)
{
    pthread_mutex_lock(&g_errors_mu);
    for (size_t i = 0; i < g_nerrors; i++)
        fn(arg, g_errors[i].prefix, g_errors[i].count);
    pthread_mutex_unlock(&g_errors_mu);
}

void bks_ops_reset(void)
{
    pthread_mutex_lock(&g_tables_mu);
    for (tl_stats *t = g_tables; t; t = t->next) {
        for (size_t i = 0; i < NSLOTS; i++) {
            atomic_store(&t->cmd[i].calls, 0);
            atomic_store(&t->cmd[i].usec, 0);
            atomic_store(&t->cmd[i].rejected, 0);
            atomic_store(&t->cmd[i].failed, 0);
        }
        atomic_store(&t->hits, 0);
        atomic_store(&t->misses, 0);
        atomic_store(&t->commands, 0);
        atomic_store(&t->errors, 0);
        atomic_store(&t->rejected, 0);
        atomic_store(&t->failed, 0);
    }
    pthread_mutex_unlock(&g_tables_mu);
    pthread_mutex_lock(&g_errors_mu);
    g_nerrors = 0;
    pthread_mutex_unlock(&g_errors_mu);
    atomic_store(&g_srv.total_connections, 0);
    atomic_store(&g_srv.rejected_connections, 0);
    atomic_store(&g_srv.expired_keys, 0);
    atomic_store(&g_srv.protocol_errors, 0);
    atomic_store(&g_srv.output_limit_disconnects, 0);
}

void bks_ops_free(void)
{
    pthread_mutex_lock(&g_tables_mu);
    tl_stats *t = g_tables;
    g_tables = NULL;
    pthread_mutex_unlock(&g_tables_mu);
    while (t) {
        tl_stats *next = t->next;
        free(t);
        t = next;
    }
    tl = NULL;
    pthread_mutex_lock(&g_slow_mu);
    for (size_t i = 0; i < g_slow_cap; i++)
        slow_entry_clear(&g_slow[i]);
    free(g_slow);
    g_slow = NULL;
    g_slow_cap = g_slow_len = g_slow_head = 0;
    pthread_mutex_unlock(&g_slow_mu);
}
