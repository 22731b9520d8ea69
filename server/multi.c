/*
 * multi.c - transactions: MULTI / EXEC / DISCARD / WATCH / UNWATCH, and a
 * transaction as one record of the append-only log.
 *
 * Queueing. After MULTI a client's commands are checked (known command,
 * arity, allowed in a transaction: hostcmd.c) and copied into its queue
 * with "+QUEUED"; a command refused there marks the transaction, and EXEC
 * then answers EXECABORT and runs nothing. MULTI, EXEC, DISCARD, WATCH and
 * QUIT run at once even inside MULTI, as in Redis.
 *
 * Isolation. EXEC pauses the whole server (bks_pause_all: every worker's
 * execution mutex, see net.c) and runs the queue in the calling thread, so
 * no other client's command runs anywhere, on any key, between the first
 * and the last of the transaction; the commands still take their per-key
 * locks as usual (nobody else holds one). This global exclusive section is
 * the simple choice over locking the transaction's keys in a global order:
 * it also covers commands whose keys are not known in advance (KEYS, SCAN,
 * FLUSHALL, RENAME) and never needs a lock to be upgraded. It costs a pause
 * of every worker for the length of the transaction. The clock is frozen
 * for the transaction (bks_tl_frozen_ms): every command of it sees one
 * time, and no key expires half-way through.
 *
 * WATCH. A registry maps each watched name to a version counter (shared by
 * all clients watching it, freed with its last watcher). Every write that
 * is logged or would be (keyspace.c's log_argv, which also sees the DELs of
 * expiries) bumps the versions of the keys it names (the command table's
 * key positions; FLUSHALL, or a command whose keys are unknown, bumps all).
 * EXEC, with the server paused, first lets each watched key expire if it is
 * due (that is a change too), then compares versions: any difference
 * aborts the transaction with a null reply. A client that watches nothing
 * costs the writers one relaxed atomic load.
 *
 * The log. Inside EXEC the writes are not appended one by one: log_argv
 * hands them here (bks_multi_wrote) and EXEC appends them at the end as one
 * record (one bks_persist_log call, so one checksummed record: a crash
 * leaves all of it or, torn, none of it; docs/PERSISTENCE.md):
 *
 *     EXEC <time ms> <argc 1> <argv 1 ...> <argc 2> <argv 2 ...> ...
 *
 * Replaying that record (the host command EXEC with no client) runs the
 * commands in order at that time. A transaction that wrote once is logged
 * as that one command; one that wrote nothing, not at all.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h> /* strncasecmp */

#include "server_int.h"

extern _Thread_local int bks_tl_log_failed; /* keyspace.c: this command's log write failed */

/*==========================================================================
 * The WATCH registry
 *==========================================================================*/

#define WATCH_BUCKETS 256

typedef struct wentry {
    struct wentry *next;
    uint64_t version;   /* under g_watch_mu */
    uint32_t refs;      /* clients watching it (a client counts once per WATCH) */
    size_t len;
    char name[];
} wentry;

static pthread_mutex_t g_watch_mu = PTHREAD_MUTEX_INITIALIZER;
static wentry *g_watch[WATCH_BUCKETS];
static _Atomic size_t g_watch_count; /* entries: 0 lets writers skip the mutex */

static size_t name_bucket(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return (size_t)(h % WATCH_BUCKETS);
}

/* The entry of name with one more watcher (created at version 0). */
static wentry *watch_ref(bkc_str name)
{
    size_t b = name_bucket(name.ptr, name.len);
    pthread_mutex_lock(&g_watch_mu);
    wentry *e = g_watch[b];
    while (e && !(e->len == name.len && !memcmp(e->name, name.ptr, name.len)))
        e = e->next;
    if (!e) {
        e = calloc(1, sizeof *e + name.len + 1);
        if (e) {
            e->len = name.len;
            memcpy(e->name, name.ptr, name.len);
            e->next = g_watch[b];
            g_watch[b] = e;
            atomic_fetch_add(&g_watch_count, 1);
        }
    }
    if (e)
        e->refs++;
    pthread_mutex_unlock(&g_watch_mu);
    return e;
}

static void watch_unref(wentry *e)
{
    pthread_mutex_lock(&g_watch_mu);
    if (--e->refs == 0) {
        wentry **pp = &g_watch[name_bucket(e->name, e->len)];
        while (*pp != e)
            pp = &(*pp)->next;
        *pp = e->next;
        atomic_fetch_sub(&g_watch_count, 1);
        free(e);
    }
    pthread_mutex_unlock(&g_watch_mu);
}

static uint64_t watch_version(wentry *e)
{
    pthread_mutex_lock(&g_watch_mu);
    uint64_t v = e->version;
    pthread_mutex_unlock(&g_watch_mu);
    return v;
}

/* Bump the version of name (g_watch_mu held). */
static void touch_locked(const char *p, size_t n)
{
    for (wentry *e = g_watch[name_bucket(p, n)]; e; e = e->next)
        if (e->len == n && !memcmp(e->name, p, n))
            e->version++;
}

static void touch_all_locked(void)
{
    for (size_t b = 0; b < WATCH_BUCKETS; b++)
        for (wentry *e = g_watch[b]; e; e = e->next)
            e->version++;
}

static int name_is(bkc_str s, const char *name)
{
    size_t n = strlen(name);
    return s.len == n && !strncasecmp(s.ptr, name, n);
}

/* The keys argv writes: [*first, *last] by *step; 0 when unknown (touch
 * everything). */
static int write_keys(int argc, const bkc_str *argv, int *first, int *last, int *step)
{
    if (name_is(argv[0], "flushall") || name_is(argv[0], "flushdb"))
        return 0;
    if (name_is(argv[0], "pexpireat") || name_is(argv[0], "renamenx")) {
        *first = 1;
        *last = name_is(argv[0], "renamenx") ? 2 : 1;
        *step = 1;
        return argc > *last;
    }
    const bkc_command *cmd = bkc_lookup(argv[0]);
    if (!cmd || cmd->first_key <= 0 || cmd->key_step <= 0)
        return 0;
    *first = cmd->first_key;
    *last = cmd->last_key < 0 ? argc + cmd->last_key : cmd->last_key;
    *step = cmd->key_step;
    if (*last >= argc)
        *last = argc - 1;
    return *first < argc;
}

static void watch_touch(int argc, const bkc_str *argv)
{
    if (atomic_load_explicit(&g_watch_count, memory_order_relaxed) == 0 || argc < 1)
        return;
    int first, last, step;
    int known = write_keys(argc, argv, &first, &last, &step);
    pthread_mutex_lock(&g_watch_mu);
    if (!known)
        touch_all_locked();
    else
        for (int i = first; i <= last; i += step)
            touch_locked(argv[i].ptr, argv[i].len);
    pthread_mutex_unlock(&g_watch_mu);
}

/*==========================================================================
 * Per-client state
 *==========================================================================*/

typedef struct queued {
    int argc;
    bkc_str *argv;      /* argv and the bytes, one allocation */
} queued;

typedef struct watched {
    wentry *e;
    uint64_t version;   /* at WATCH */
} watched;

struct bks_multi {
    int active;         /* between MULTI and EXEC / DISCARD */
    int dirty;          /* a command was refused while queueing: EXECABORT */
    queued *q;
    size_t nq, capq;
    size_t qbytes;
    watched *w;
    size_t nw, capw;
};

static bks_multi *state(bks_client *c, int create)
{
    bks_multi **slot = bks_client_multi(c);
    if (!*slot && create)
        *slot = calloc(1, sizeof **slot);
    return *slot;
}

static void queue_clear(bks_multi *m)
{
    for (size_t i = 0; i < m->nq; i++)
        free(m->q[i].argv);
    m->nq = 0;
    m->qbytes = 0;
    m->dirty = 0;
}

static void unwatch_all(bks_multi *m)
{
    for (size_t i = 0; i < m->nw; i++)
        watch_unref(m->w[i].e);
    m->nw = 0;
}

void bks_multi_free(bks_multi *m)
{
    if (!m)
        return;
    queue_clear(m);
    unwatch_all(m);
    free(m->q);
    free(m->w);
    free(m);
}

int bks_multi_queueing(bks_client *c)
{
    bks_multi *m = c ? *bks_client_multi(c) : NULL;
    return m && m->active;
}

void bks_multi_flag_dirty(bks_client *c)
{
    bks_multi *m = state(c, 0);
    if (m && m->active)
        m->dirty = 1;
}

int bks_multi_queue(bks_client *c, int argc, const bkc_str *argv)
{
    bks_multi *m = state(c, 1);
    if (!m)
        return -1;
    size_t bytes = (size_t)argc * sizeof(bkc_str);
    for (int i = 0; i < argc; i++)
        bytes += argv[i].len;
    /* the queue is bounded like one client's query buffer */
    if (m->qbytes + bytes > g_srv.cfg.max_query_buffer)
        return -1;
    if (m->nq == m->capq) {
        queued *q = bks_grow(m->q, &m->capq, m->nq + 1, 8, sizeof *q);
        if (!q)
            return -1;
        m->q = q;
    }
    bkc_str *copy = malloc(bytes ? bytes : 1);
    if (!copy)
        return -1;
    char *p = (char *)(copy + argc);
    for (int i = 0; i < argc; i++) {
        if (argv[i].len)
            memcpy(p, argv[i].ptr, argv[i].len);
        copy[i].ptr = p;
        copy[i].len = argv[i].len;
        p += argv[i].len;
    }
    m->q[m->nq].argc = argc;
    m->q[m->nq].argv = copy;
    m->nq++;
    m->qbytes += bytes;
    return 0;
}

/*==========================================================================
 * Capturing a transaction's writes for one log record
 *==========================================================================*/

typedef struct capture {
    char *bytes;
    size_t len, cap;
    size_t *argcs;       /* per write */
    size_t nwrites, capw;
    size_t nargs;        /* arguments over all writes */
    int oom;
} capture;

static _Thread_local capture *tl_capture;

static int cap_put(capture *k, const void *p, size_t n)
{
    if (k->len + n > k->cap) {
        size_t cap = k->cap ? k->cap : 1024;
        while (cap < k->len + n)
            cap *= 2;
        char *b = realloc(k->bytes, cap);
        if (!b)
            return -1;
        k->bytes = b;
        k->cap = cap;
    }
    if (n)
        memcpy(k->bytes + k->len, p, n);
    k->len += n;
    return 0;
}

/* Each argument as (size_t length, bytes). */
static void cap_write(capture *k, int argc, const bkc_str *argv)
{
    if (k->oom)
        return;
    if (k->nwrites == k->capw) {
        size_t cap = k->capw ? k->capw * 2 : 16;
        size_t *a = realloc(k->argcs, cap * sizeof *a);
        if (!a) {
            k->oom = 1;
            return;
        }
        k->argcs = a;
        k->capw = cap;
    }
    for (int i = 0; i < argc; i++)
        if (cap_put(k, &argv[i].len, sizeof argv[i].len) < 0 ||
            cap_put(k, argv[i].ptr, argv[i].len) < 0) {
            k->oom = 1;
            return;
        }
    k->argcs[k->nwrites++] = (size_t)argc;
    k->nargs += (size_t)argc;
}

int bks_multi_wrote(int argc, const bkc_str *argv)
{
    watch_touch(argc, argv);
    if (!tl_capture)
        return 0;
    cap_write(tl_capture, argc, argv);
    return 1;
}

/* Append the captured writes as one record. 0, or -1 when it failed. */
static int cap_log(capture *k, bks_persist *p, uint64_t now_ms)
{
    if (k->nwrites == 0)
        return 0;
    if (k->oom)
        return -1;
    size_t n = k->nwrites == 1 ? k->nargs : 2 + k->nwrites + k->nargs;
    bkc_str *argv = malloc(n * sizeof *argv);
    char (*nums)[24] = malloc((k->nwrites + 1) * sizeof *nums);
    int rc = -1;
    if (!argv || !nums || n > (size_t)INT32_MAX)
        goto out;
    size_t a = 0, off = 0;
    if (k->nwrites > 1) {
        int len = snprintf(nums[k->nwrites], sizeof nums[0], "%llu", (unsigned long long)now_ms);
        argv[a++] = (bkc_str){"EXEC", 4};
        argv[a++] = (bkc_str){nums[k->nwrites], (size_t)len};
    }
    for (size_t w = 0; w < k->nwrites; w++) {
        if (k->nwrites > 1) {
            int len = snprintf(nums[w], sizeof nums[0], "%zu", k->argcs[w]);
            argv[a++] = (bkc_str){nums[w], (size_t)len};
        }
        for (size_t i = 0; i < k->argcs[w]; i++) {
            size_t len;
            memcpy(&len, k->bytes + off, sizeof len);
            off += sizeof len;
            argv[a++] = (bkc_str){k->bytes + off, len};
            off += len;
        }
    }
    rc = bks_persist_log(p, (int)a, argv);
out:
    free(argv);
    free(nums);
    return rc;
}

/*==========================================================================
 * The commands
 *==========================================================================*/

static void reply_null_array(bkc_reply *r, int resp)
{
    if (r->vt == &bks_reply_vt) /* Redis's null for an aborted EXEC: *-1 */
        bks_outbuf_append(((bks_encoder *)r->impl)->out, resp >= 3 ? "_\r\n" : "*-1\r\n",
                          resp >= 3 ? 3 : 5);
    else
        r->vt->null(r);
}

static void cmd_multi(bks_client *c, bkc_reply *r)
{
    bks_multi *m = state(c, 1);
    if (!m) {
        r->vt->error(r, "ERR out of memory");
        return;
    }
    if (m->active) {
        r->vt->error(r, "ERR MULTI calls can not be nested");
        return;
    }
    m->active = 1;
    m->dirty = 0;
    r->vt->simple(r, "OK");
}

static void cmd_discard(bks_client *c, bkc_reply *r)
{
    bks_multi *m = state(c, 0);
    if (!m || !m->active) {
        r->vt->error(r, "ERR DISCARD without MULTI");
        return;
    }
    queue_clear(m);
    unwatch_all(m);
    m->active = 0;
    r->vt->simple(r, "OK");
}

static void cmd_watch(bks_client *c, bks_session *s, bkc_reply *r, int argc,
                      const bkc_str *argv)
{
    bks_multi *m = state(c, 1);
    if (m && m->active) {
        r->vt->error(r, "ERR WATCH inside MULTI is not allowed");
        return;
    }
    if (!m || m->nw + (size_t)argc > SIZE_MAX / sizeof(watched)) {
        r->vt->error(r, "ERR out of memory");
        return;
    }
    for (int i = 1; i < argc; i++) {
        /* a key already due to expire goes now: its expiry is not a change
         * made after WATCH */
        bks_ks_kind(s->ks, s, argv[i]);
        if (m->nw == m->capw) {
            size_t cap = m->capw ? m->capw * 2 : 8;
            watched *w = realloc(m->w, cap * sizeof *w);
            if (!w) {
                r->vt->error(r, "ERR out of memory");
                return;
            }
            m->w = w;
            m->capw = cap;
        }
        wentry *e = watch_ref(argv[i]);
        if (!e) {
            r->vt->error(r, "ERR out of memory");
            return;
        }
        m->w[m->nw].e = e;
        m->w[m->nw].version = watch_version(e);
        m->nw++;
    }
    r->vt->simple(r, "OK");
}

static void cmd_exec(bks_client *c, bks_session *s, bkc_reply *r, int resp)
{
    bks_multi *m = state(c, 0);
    if (!m || !m->active) {
        r->vt->error(r, "ERR EXEC without MULTI");
        return;
    }
    m->active = 0;
    if (m->dirty) {
        queue_clear(m);
        unwatch_all(m);
        r->vt->error(r, "EXECABORT Transaction discarded because of previous errors.");
        return;
    }

    bks_pause_all();
    int changed = 0;
    for (size_t i = 0; i < m->nw; i++)
        bks_ks_kind(s->ks, s, (bkc_str){m->w[i].e->name, m->w[i].e->len});
    for (size_t i = 0; i < m->nw && !changed; i++)
        changed = watch_version(m->w[i].e) != m->w[i].version;
    unwatch_all(m);
    if (changed) {
        bks_resume_all();
        queue_clear(m);
        reply_null_array(r, resp);
        return;
    }

    uint64_t now = bks_now_ms();
    capture k = {0};
    if (s->persist)
        tl_capture = &k;
    bks_tl_frozen_ms = now;
    r->vt->array(r, m->nq);
    for (size_t i = 0; i < m->nq; i++) {
        int cur = bks_client_resp(c);
        bks_execute(c, s, r, cur, m->q[i].argc, m->q[i].argv);
    }
    bks_tl_frozen_ms = 0;
    tl_capture = NULL;
    if (s->persist && cap_log(&k, s->persist, now) < 0) {
        bks_tl_log_failed = 1; /* the batch answers MISCONF in place of the reply */
        if (!atomic_exchange(&g_srv.write_error, 1))
            bks_log(BKS_LOG_ERROR, "cannot append a transaction to the log: refusing "
                                   "writes");
    }
    bks_resume_all();
    free(k.bytes);
    free(k.argcs);
    queue_clear(m);
}

/* EXEC <ms> <argc> <argv...> ...: a logged transaction, replayed. */
static void replay_group(bks_session *s, bkc_reply *r, int argc, const bkc_str *argv)
{
    uint64_t ms;
    if (argc < 4 || !bkc_parse_u64(argv[1], &ms) || ms == 0) {
        r->vt->error(r, "ERR bad transaction record");
        return;
    }
    /* check the whole layout before running anything */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 2; i < argc;) {
            uint64_t n;
            if (!bkc_parse_u64(argv[i], &n) || n == 0 || n > (uint64_t)(argc - i - 1)) {
                r->vt->error(r, "ERR bad transaction record");
                return;
            }
            if (pass == 1) {
                bks_tl_frozen_ms = ms;
                bks_execute(NULL, s, r, 2, (int)n, argv + i + 1);
                bks_tl_frozen_ms = 0;
            }
            i += 1 + (int)n;
        }
    }
}

void bks_multi_command(bks_client *c, bks_session *s, bkc_reply *r, int resp, int argc,
                       const bkc_str *argv)
{
    if (!c) {
        /* the log's transaction record (no client sends EXEC with arguments) */
        if (name_is(argv[0], "exec"))
            replay_group(s, r, argc, argv);
        else
            r->vt->error(r, "ERR transactions need a client");
        return;
    }
    if (name_is(argv[0], "watch")) {
        cmd_watch(c, s, r, argc, argv);
        return;
    }
    if (argc != 1) {
        char name[16], buf[80];
        size_t n = argv[0].len < sizeof name - 1 ? argv[0].len : sizeof name - 1;
        for (size_t i = 0; i < n; i++) {
            char ch = argv[0].ptr[i];
            name[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
        }
        name[n] = '\0';
        snprintf(buf, sizeof buf, "ERR wrong number of arguments for '%s' command", name);
        r->vt->error(r, buf);
        return;
    }
    if (name_is(argv[0], "multi")) {
        cmd_multi(c, r);
    } else if (name_is(argv[0], "exec")) {
        cmd_exec(c, s, r, resp);
    } else if (name_is(argv[0], "discard")) {
        cmd_discard(c, r);
    } else { /* unwatch */
        bks_multi *m = state(c, 0);
        if (m)
            unwatch_all(m);
        r->vt->simple(r, "OK");
    }
}
