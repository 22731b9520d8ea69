/*
 * net.c - workers, listeners, clients: bytes in, replies out (libuv).
 *
 * Threads
 * -------
 * N workers (--threads, default one per core), each a thread with its own
 * uv_loop. Every worker opens its own TCP listening socket on each bind
 * address with SO_REUSEPORT, so the kernel spreads new connections across
 * the workers; a client then lives on one worker for good. Worker 0 also
 * serves the Unix socket and runs a 100 ms timer (active expiry,
 * bks_persist_tick, then bks_mem_tick: memory given back). The main
 * thread only waits for signals and for SHUTDOWN, then stops the workers
 * and does the final save.
 *
 * Each worker holds its own execution mutex while it runs commands (one
 * batch of parsed requests at a time, or its expiry cycle): bks_pause_all
 * takes every worker's mutex, so when it returns no command runs anywhere.
 * Called from inside a command (SAVE, FLUSHALL, RENAME, BGSAVE's fork), it
 * first lets go of its own worker's mutex, and takes it back in
 * bks_resume_all; a global pause mutex orders concurrent pausers.
 *
 * A client
 * --------
 * The query buffer receives reads directly (libuv's alloc callback hands out
 * its free tail); resp.c parses requests in place. One read is processed as
 * a batch: every complete request in the buffer is parsed (up to
 * BATCH_MAX at a time), executed in order by hostcmd.c (which takes runs
 * of BF.ADD, BF.EXISTS, CF.ADD and CF.EXISTS on one key as one call, and
 * waits once for the batch's log records), and all the replies go out in
 * one write. What is left (a partial request) moves to the front.
 *
 * Replies a client has not read yet hold it back: once they pass
 * out_hold() (16 MiB, or half of client-output-buffer-limit if that is
 * less), its next request waits, and the server stops reading from it,
 * until they are written out. So a pipeline of DUMPs of large keys runs
 * at the pace the client reads, within bounded memory, and its requests
 * wait in the kernel's socket buffers and the client.
 *
 * Memory: a query buffer past QBUF_KEEP is freed as soon as it is empty;
 * reply buffers past OUT_KEEP are freed by the worker's 1 s sweep once
 * the client has been idle for a second (a client that keeps asking for
 * large replies reuses them: a fresh buffer costs a page fault per 4 KiB).
 * The allocator then gives the pages back (memtrim.c). So an idle client
 * holds a few small buffers, whatever it sent or received before.
 *
 * Limits: the query buffer never exceeds client-query-buffer-limit; a
 * protocol error is answered and the connection closed once the answer is
 * written; replies not yet taken beyond client-output-buffer-limit (one
 * reply larger than it: the hold above keeps a pipeline under it) get the
 * client disconnected (the others never notice); maxclients; protected
 * mode (DENIED for non-loopback peers when there is no password and the
 * server listens beyond loopback).
 *
 * Out of memory: every failed allocation ends in an answer. A request
 * that cannot run answers "ERR out of memory"; a client whose query or
 * reply buffer cannot grow is answered so if possible and closed (logged);
 * a connection with no memory for its client is refused the same way,
 * and its listener goes on accepting (refuse_connection).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>        /* open: the spare descriptor */
#include <sys/resource.h> /* RLIMIT_NOFILE */
#include <sys/socket.h>
#include <sys/stat.h>     /* chmod: unixsocketperm */
#include <time.h>         /* nanosleep */
#include <unistd.h>
#include <uv.h>

#include "ops.h"
#include "server_int.h"

#define MAX_BINDS 16
#define BATCH_MAX 1024            /* requests executed per exec-lock hold */
#define READ_CHUNK (16 * 1024)    /* the least free room offered to a read */
#define QBUF_KEEP (1024 * 1024)   /* an idle client keeps at most this query buffer */
#define OUT_KEEP (1024 * 1024)    /* and at most this much of each reply buffer */
#define UNAUTH_MAX_ARGS 10        /* before AUTH: arguments per request */
#define UNAUTH_MAX_BULK 16384     /* before AUTH: bytes per argument */

typedef struct bks_worker bks_worker;

struct bks_client {
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } h;
    bks_worker *w;
    bks_client *prev, *next;
    uint64_t id;
    char addr[64];
    char *name;                  /* under w->list_lock */
    int resp;
    int authed;
    int closing;                 /* close once the output is written */
    int closed;                  /* uv_close called */
    int over_clients_cap;        /* refused room by maxmemory-clients */
    int counted;                 /* in g_srv.connected_clients */
    int unix_sock;               /* came in on the Unix socket */
    int monitor;                 /* MONITOR: in g_monitors */
    _Atomic int kill;            /* CLIENT KILL from another worker: close */
    _Atomic int listed;          /* 1 once its fields are set, 0 once closing: what
                                    other workers (CLIENT LIST / KILL) may look at */
    char laddr[64];              /* the local address (CLIENT LIST laddr) */
    uint64_t created_ms;         /* monotonic */
    _Atomic uint64_t last_ms;    /* monotonic: the last command (idle) */
    const char *_Atomic last_cmd; /* its name (static), NULL: none yet */
    bks_outbuf mon_pending;      /* MONITOR lines not yet moved to out (g_mon_lock) */
    /* input */
    char *qbuf;
    size_t qlen, qcap, need;
    bks_parser parser;
    /* the batch being parsed: argv copies (pointing into qbuf) */
    bkc_str *pool;
    size_t pool_len, pool_cap;
    size_t *req_off;
    int *argcs;
    const bkc_str **argvs;
    int nreq, req_cap;
    int next_req;                /* [next_req, nreq) parsed, waiting for the output */
    int held;                    /* replies pending past out_hold(): reading stopped */
    /* output: out accumulates, wbuf is being written */
    bks_outbuf out, wbuf;
    size_t woff;
    uv_write_t wreq;
    int writing;
    bks_session session;
    bks_multi *multi;            /* MULTI queue and WATCHes (multi.c), or NULL */
    bks_log_wait logwait;        /* answers in out waiting for their log records */
    int awaiting;                /* listed in w->awaiting */
};

struct bks_worker {
    int index;
    uv_loop_t loop;
    uv_thread_t thread;
    int started;
    pthread_mutex_t exec;
    pthread_mutex_t list_lock;
    uv_async_t wake;
    uv_async_t notify;           /* CLIENT KILL and MONITOR lines for its clients */
    int stopping;                /* notify is closing (under list_lock and g_mon_lock) */
    uv_timer_t timer;
    int has_timer;
    uv_timer_t sweep;            /* every second: idle clients' large buffers */
    uv_tcp_t tcp[MAX_BINDS];
    int ntcp;
    uv_pipe_t unix_listener;
    int has_unix;
    bks_client *clients;
    bks_session timer_session;
    int spare_fd;                /* kept open to accept-and-close when out of fds */
    uv_check_t check;            /* after each round of reads: the log, then replies */
    bks_client **awaiting;       /* clients whose replies wait for the log */
    int nawait, await_cap;
    uint64_t emfile_logged_ms;   /* last "out of descriptors" warning */
    union {                      /* a connection refused for want of memory */
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } refuse;
    int refusing;                /* refuse is in use (closing) */
    uv_stream_t *refuse_wait[MAX_BINDS + 1];  /* listeners whose connection waits for it */
    int nrefuse_wait;
    uint64_t oom_logged_ms;      /* last "out of memory: connection refused" warning */
};

static bks_worker *g_workers;
static int g_nworkers;
static pthread_mutex_t g_pause = PTHREAD_MUTEX_INITIALIZER;
static int g_protected;          /* protected mode in force */
static uv_loop_t g_main_loop;
static uv_async_t g_main_async;
static uv_signal_t g_sigterm, g_sigint;
static _Atomic int g_main_ready;
static uv_signal_t g_sighup;

/* MONITOR clients, any worker's, under g_mon_lock. */
_Atomic int bks_monitors;
static pthread_mutex_t g_mon_lock = PTHREAD_MUTEX_INITIALIZER;
static bks_client **g_mons;
static size_t g_nmons, g_mons_cap;

/* Bytes of query buffer held by all clients together (maxmemory-clients). */
static _Atomic uint64_t g_client_qbytes;

uint64_t bks_net_client_query_bytes(void) { return atomic_load(&g_client_qbytes); }

static _Thread_local bks_worker *tl_worker;
static _Thread_local int tl_holding;       /* tl_worker->exec is held */
static _Thread_local int tl_pause_depth;
static _Thread_local int tl_released_own;

/*==========================================================================
 * Pausing
 *==========================================================================*/

static void exec_lock(bks_worker *w)
{
    pthread_mutex_lock(&w->exec);
    tl_holding = 1;
}

static void exec_unlock(bks_worker *w)
{
    tl_holding = 0;
    pthread_mutex_unlock(&w->exec);
}

void bks_pause_all(void)
{
    if (tl_pause_depth++ > 0)
        return;
    tl_released_own = 0;
    if (tl_worker && tl_holding) {
        exec_unlock(tl_worker);
        tl_released_own = 1;
    }
    pthread_mutex_lock(&g_pause);
    for (int i = 0; i < g_nworkers; i++)
        pthread_mutex_lock(&g_workers[i].exec);
}

void bks_resume_all(void)
{
    if (--tl_pause_depth > 0)
        return;
    for (int i = g_nworkers - 1; i >= 0; i--)
        pthread_mutex_unlock(&g_workers[i].exec);
    pthread_mutex_unlock(&g_pause);
    if (tl_released_own) {
        tl_released_own = 0;
        exec_lock(tl_worker);
    }
}

void bks_worker_unlock_self(void)
{
    if (tl_worker && tl_holding)
        exec_unlock(tl_worker);
}

void bks_worker_lock_self(void)
{
    if (tl_worker && !tl_holding)
        exec_lock(tl_worker);
}

/*==========================================================================
 * Client accessors (hostcmd.c)
 *==========================================================================*/

uint64_t bks_client_id(const bks_client *c) { return c->id; }
const char *bks_client_addr(const bks_client *c) { return c->addr; }
int bks_client_authed(const bks_client *c) { return c->authed; }
void bks_client_set_authed(bks_client *c, int authed) { c->authed = authed; }
int bks_client_resp(const bks_client *c) { return c->resp; }
void bks_client_set_resp(bks_client *c, int resp)
{
    pthread_mutex_lock(&c->w->list_lock);    /* CLIENT LIST reads it from any worker */
    c->resp = resp;
    pthread_mutex_unlock(&c->w->list_lock);
}
void bks_client_close_after_reply(bks_client *c) { c->closing = 1; }
int bks_client_closing(const bks_client *c) { return c->closing; }
int bks_client_is_unix(const bks_client *c) { return c->unix_sock; }

static uint64_t mono_ms(void) { return bks_ops_clock_us() / 1000; }

void bks_client_note_command(bks_client *c, const char *name, uint64_t now_ms)
{
    atomic_store_explicit(&c->last_ms, now_ms, memory_order_relaxed);
    if (name)
        atomic_store_explicit(&c->last_cmd, name, memory_order_relaxed);
}

bks_multi **bks_client_multi(bks_client *c) { return &c->multi; }

const char *bks_client_name(const bks_client *c)
{
    /* only the client's own worker calls this, and only it writes name */
    return c->name ? c->name : "";
}

int bks_client_set_name(bks_client *c, const char *name, size_t len)
{
    char *n = NULL;
    if (len) {
        n = malloc(len + 1);
        if (!n)
            return -1;
        memcpy(n, name, len);
        n[len] = '\0';
    }
    pthread_mutex_lock(&c->w->list_lock);
    free(c->name);
    c->name = n;
    pthread_mutex_unlock(&c->w->list_lock);
    return 0;
}

char *bks_clients_describe(size_t *len)
{
    bks_outbuf b = {0};
    uint64_t now = mono_ms();
    for (int i = 0; i < g_nworkers; i++) {
        bks_worker *w = &g_workers[i];
        pthread_mutex_lock(&w->list_lock);
        for (bks_client *c = w->clients; c; c = c->next) {
            if (!atomic_load_explicit(&c->listed, memory_order_acquire))
                continue;
            char line[768];
            const char *cmd = atomic_load_explicit(&c->last_cmd, memory_order_relaxed);
            uint64_t last = atomic_load_explicit(&c->last_ms, memory_order_relaxed);
            /* Redis's fields; those we have no use for hold Redis's idle values */
            int n = snprintf(line, sizeof line,
                             "id=%llu addr=%s laddr=%s fd=%d name=%s age=%llu idle=%llu "
                             "flags=%s db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 "
                             "argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 "
                             "tot-mem=0 events=r cmd=%s user=default redir=-1 resp=%d "
                             "worker=%d\n",
                             (unsigned long long)c->id, c->addr, c->laddr, -1,
                             c->name ? c->name : "",
                             (unsigned long long)((now - c->created_ms) / 1000),
                             (unsigned long long)((now - (last ? last : c->created_ms)) / 1000),
                             c->monitor ? "O" : "N", cmd ? cmd : "NULL", c->resp, w->index);
            bks_outbuf_append(&b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        }
        pthread_mutex_unlock(&w->list_lock);
    }
    if (b.oom) {
        bks_outbuf_free(&b);
        return NULL;
    }
    if (!b.p)
        b.p = calloc(1, 1);
    *len = b.len;
    return b.p;
}

/* CLIENT KILL: mark the matches; their workers close them (notify). */
uint64_t bks_clients_kill(bks_client *self, const bks_kill_filter *f)
{
    uint64_t n = 0, now = mono_ms();
    for (int i = 0; i < g_nworkers; i++) {
        bks_worker *w = &g_workers[i];
        int any = 0;
        pthread_mutex_lock(&w->list_lock);
        for (bks_client *c = w->clients; c; c = c->next) {
            if (!atomic_load_explicit(&c->listed, memory_order_acquire) ||
                atomic_load(&c->kill))
                continue;
            if ((f->id && c->id != f->id) || (f->addr && strcmp(f->addr, c->addr)) ||
                (f->laddr && strcmp(f->laddr, c->laddr)) ||
                (f->user && strcmp(f->user, "default")) || f->type == 2 ||
                (f->maxage && (long long)((now - c->created_ms) / 1000) < f->maxage) ||
                (f->skipme && c == self))
                continue;
            n++;
            if (c == self) {
                c->closing = 1;       /* after this reply, on this thread */
                continue;
            }
            atomic_store(&c->kill, 1);
            any = 1;
        }
        if (any && !w->stopping)
            uv_async_send(&w->notify);
        pthread_mutex_unlock(&w->list_lock);
    }
    return n;
}

int bks_client_monitor(bks_client *c)
{
    pthread_mutex_lock(&c->w->list_lock);   /* c->monitor: CLIENT LIST's flags */
    pthread_mutex_lock(&g_mon_lock);
    if (!c->monitor) {
        if (g_nmons == g_mons_cap) {
            size_t cap = g_mons_cap ? g_mons_cap * 2 : 4;
            bks_client **m = realloc(g_mons, cap * sizeof *m);
            if (!m) {
                pthread_mutex_unlock(&g_mon_lock);
                pthread_mutex_unlock(&c->w->list_lock);
                return -1;
            }
            g_mons = m;
            g_mons_cap = cap;
        }
        g_mons[g_nmons++] = c;
        c->monitor = 1;
        atomic_fetch_add(&bks_monitors, 1);
    }
    pthread_mutex_unlock(&g_mon_lock);
    pthread_mutex_unlock(&c->w->list_lock);
    return 0;
}

static void monitor_remove(bks_client *c)
{
    pthread_mutex_lock(&g_mon_lock);
    for (size_t i = 0; i < g_nmons; i++) {
        if (g_mons[i] == c) {
            g_mons[i] = g_mons[--g_nmons];
            atomic_fetch_sub(&bks_monitors, 1);
            break;
        }
    }
    c->monitor = 0;
    bks_outbuf_free(&c->mon_pending);
    if (g_nmons == 0) {
        free(g_mons);
        g_mons = NULL;
        g_mons_cap = 0;
    }
    pthread_mutex_unlock(&g_mon_lock);
}

void bks_monitor_feed(const char *line, size_t len)
{
    pthread_mutex_lock(&g_mon_lock);
    for (size_t i = 0; i < g_nmons; i++) {
        bks_client *c = g_mons[i];
        if (c->mon_pending.len + len > g_srv.cfg.max_output_buffer) {
            atomic_store(&c->kill, 1);  /* a monitor that does not read */
        } else {
            bks_outbuf_append(&c->mon_pending, line, len);
        }
        if (!c->w->stopping)
            uv_async_send(&c->w->notify);
    }
    pthread_mutex_unlock(&g_mon_lock);
}

/*==========================================================================
 * Closing and writing
 *==========================================================================*/

static void on_client_closed(uv_handle_t *h)
{
    bks_client *c = h->data;
    bks_worker *w = c->w;
    pthread_mutex_lock(&w->list_lock);
    if (c->prev)
        c->prev->next = c->next;
    else if (w->clients == c)
        w->clients = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&w->list_lock);
    if (c->monitor)
        monitor_remove(c);
    if (c->counted) {
        atomic_fetch_sub(&g_srv.connected_clients, 1);
        bks_log(BKS_LOG_DEBUG, "client id=%llu %s closed", (unsigned long long)c->id, c->addr);
    }
    atomic_fetch_sub(&g_client_qbytes, c->qcap);
    free(c->qbuf);
    bks_parser_free(&c->parser);
    free(c->pool);
    free(c->req_off);
    free(c->argcs);
    free(c->argvs);
    bks_multi_free(c->multi);
    bks_outbuf_free(&c->out);
    bks_outbuf_free(&c->wbuf);
    free(c->logwait.v);
    free(c->name);
    free(c);
}

static void client_close(bks_client *c)
{
    if (c->closed)
        return;
    c->closed = 1;
    atomic_store(&c->listed, 0);
    uv_read_stop(&c->h.stream);
    uv_close(&c->h.handle, on_client_closed);
}

/* Reply bytes not yet written to the client. */
static size_t pending_out(const bks_client *c)
{
    return c->out.len + (c->writing ? c->wbuf.len - c->woff : 0);
}

/* Pending replies past which a client's next request waits (see top). */
static size_t out_hold(void)
{
    size_t half = g_srv.cfg.max_output_buffer / 2;
    return half < ((size_t)16 << 20) ? half : (size_t)16 << 20;
}

static void client_flush(bks_client *c);
static void client_process(bks_client *c);

/* Free reply buffers grown past OUT_KEEP once they are empty, unless
 * parsed requests wait to run (their replies would grow them again). */
static void out_shrink(bks_client *c)
{
    if (c->nreq || c->closed)
        return;
    if (!c->writing && c->wbuf.cap > OUT_KEEP) {
        bks_mem_released(c->wbuf.cap);
        bks_outbuf_free(&c->wbuf);
        c->woff = 0;
    }
    if (c->out.len == 0 && c->out.cap > OUT_KEEP) {
        bks_mem_released(c->out.cap);
        bks_outbuf_free(&c->out);
    }
}

/* List c for on_check. 0, or -1 (no memory: the caller flushes now). */
static int await_push(bks_worker *w, bks_client *c)
{
    if (c->awaiting)
        return 0;
    if (w->nawait == w->await_cap) {
        int cap = w->await_cap ? w->await_cap * 2 : 64;
        bks_client **v = realloc(w->awaiting, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        w->awaiting = v;
        w->await_cap = cap;
    }
    w->awaiting[w->nawait++] = c;
    c->awaiting = 1;
    return 0;
}

/* After the round's read callbacks: wait once for the log records they
 * appended, then send the replies that waited. A client closed meanwhile
 * is still allocated (libuv frees closed handles after this phase). */
static void on_check(uv_check_t *h)
{
    bks_worker *w = h->data;
    if (w->nawait == 0)
        return;
    bks_log_settle();   /* one write (and with always one fdatasync) for all */
    for (int i = 0; i < w->nawait; i++) {
        bks_client *c = w->awaiting[i];
        c->awaiting = 0;
        if (!c->closed)
            client_flush(c);
    }
    w->nawait = 0;
}
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void on_write_done(uv_write_t *req, int status)
{
    bks_client *c = req->data;
    c->writing = 0;
    c->wbuf.len = 0;
    c->woff = 0;
    if (status < 0 || c->closed) {
        client_close(c);
        return;
    }
    client_flush(c);
    if (c->held && !c->closed && !c->closing && pending_out(c) < out_hold()) {
        c->held = 0;   /* the client read its replies: run what waits, read again */
        if (uv_read_start(&c->h.stream, on_alloc, on_read) < 0) {
            client_close(c);
            return;
        }
        client_process(c);
    }
}

/* Close a client whose last reply is written (QUIT, a protocol error).
 * Requests it sent after that, which a held client has not had read, are
 * read and dropped first: closing a TCP socket with unread input resets
 * the connection, and the peer may then lose replies still in flight. */
static void client_close_written(bks_client *c)
{
    uv_os_fd_t fd;
    if (uv_fileno(&c->h.handle, &fd) == 0) {
        char sink[65536];
        for (int i = 0; i < 256 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
            ;
    }
    client_close(c);
}

static void client_flush(bks_client *c)
{
    if (c->closed || c->writing)
        return;
    bks_log_release(&c->out, &c->logwait);   /* no answer before its log record */
    if (c->out.oom) {
        /* the log failed and the answers that waited for it could not be
         * rewritten to MISCONF (no memory): they must not go out as they
         * are, so the client is dropped with none of them */
        bks_log(BKS_LOG_WARNING, "client %s: out of memory for replies: closing", c->addr);
        client_close(c);
        return;
    }
    if (c->out.len == 0) {
        if (c->closing)
            client_close_written(c);
        return;
    }
    uv_buf_t b = uv_buf_init(c->out.p, (unsigned)(c->out.len > 0x7fffffff ? 0x7fffffff
                                                                           : c->out.len));
    int n = uv_try_write(&c->h.stream, &b, 1);
    if (n < 0 && n != UV_EAGAIN) {
        client_close(c);
        return;
    }
    size_t done = n > 0 ? (size_t)n : 0;
    if (done == c->out.len) {
        c->out.len = 0;
        if (c->closing)
            client_close_written(c);
        return;
    }
    /* the rest goes out asynchronously: swap buffers so out can grow */
    bks_outbuf t = c->wbuf;
    c->wbuf = c->out;
    c->out = t;
    c->out.len = 0;
    c->woff = done;
    c->writing = 1;
    c->wreq.data = c;
    uv_buf_t rest = uv_buf_init(c->wbuf.p + c->woff, (unsigned)(c->wbuf.len - c->woff));
    if (uv_write(&c->wreq, &c->h.stream, &rest, 1, on_write_done) < 0) {
        c->writing = 0;
        client_close(c);
    }
}

/* Answer an error and close the connection once it is written. */
static void client_fail(bks_client *c, const char *text)
{
    bks_outbuf_error(&c->out, text);
    c->closing = 1;
    uv_read_stop(&c->h.stream);
}

/*==========================================================================
 * Reading and running requests
 *==========================================================================*/

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    bks_client *c = h->data;
    const bks_config *cfg = &g_srv.cfg;
    size_t limit = cfg->max_query_buffer + READ_CHUNK;
    size_t want = c->need > READ_CHUNK ? c->need : READ_CHUNK;
    /* grow towards what the parser needs, but only geometrically: a client
     * announcing a huge bulk gets memory as it sends the bytes */
    if (want > c->qcap && want > 65536)
        want = c->qcap > 65536 ? c->qcap : 65536;
    if (c->qcap - c->qlen < want && c->qcap < limit) {
        size_t cap = c->qcap ? c->qcap : READ_CHUNK;
        while (cap - c->qlen < want && cap < limit)
            cap *= 2;
        if (cap > limit)
            cap = limit;
        uint64_t cap_all = cfg->maxmemory_clients;
        uint64_t grow = cap - c->qcap;
        uint64_t held = atomic_fetch_add(&g_client_qbytes, grow) + grow;
        if (cap_all && held > cap_all && c->qcap >= READ_CHUNK) {
            /* this client would take all clients' buffers past the cap: it
             * gets no more room, and on_read closes it once what it has is
             * full (UV_ENOBUFS) */
            atomic_fetch_sub(&g_client_qbytes, grow);
            c->over_clients_cap = 1;
        } else {
            char *p = realloc(c->qbuf, cap);
            if (p) {
                c->qbuf = p;
                c->qcap = cap;
            } else {
                atomic_fetch_sub(&g_client_qbytes, grow);
            }
        }
    }
    buf->base = c->qbuf ? c->qbuf + c->qlen : NULL;
    buf->len = c->qbuf ? c->qcap - c->qlen : 0;
}

static int batch_push(bks_client *c, int argc, const bkc_str *argv)
{
    if (c->nreq == c->req_cap) {
        int cap = c->req_cap ? c->req_cap * 2 : 16;
        size_t *off = realloc(c->req_off, (size_t)cap * sizeof *off);
        if (!off)
            return -1;
        c->req_off = off;
        int *ac = realloc(c->argcs, (size_t)cap * sizeof *ac);
        if (!ac)
            return -1;
        c->argcs = ac;
        const bkc_str **av = realloc(c->argvs, (size_t)cap * sizeof *av);
        if (!av)
            return -1;
        c->argvs = av;
        c->req_cap = cap;
    }
    if (c->pool_cap - c->pool_len < (size_t)argc) {
        bkc_str *p = bks_grow(c->pool, &c->pool_cap, c->pool_len + (size_t)argc, 64, sizeof *p);
        if (!p)
            return -1;
        c->pool = p;
    }
    memcpy(c->pool + c->pool_len, argv, (size_t)argc * sizeof *argv);
    c->req_off[c->nreq] = c->pool_len;
    c->argcs[c->nreq] = argc;
    c->pool_len += (size_t)argc;
    c->nreq++;
    return 0;
}

/* Run the parsed requests that have not run, while the client's pending
 * replies stay under out_hold(). 1 when all ran, 0 when some wait. */
static int batch_run(bks_client *c)
{
    if (c->next_req < c->nreq) {
        for (int i = c->next_req; i < c->nreq; i++)
            c->argvs[i] = c->pool + c->req_off[i];
        size_t pending = pending_out(c), hold = out_hold();
        size_t stop = c->out.len + (pending < hold ? hold - pending : 0);
        c->next_req += bks_execute_batch(c, &c->session, &c->out, c->resp,
                                         c->nreq - c->next_req, c->argcs + c->next_req,
                                         c->argvs + c->next_req, stop, &c->logwait);
        if (c->next_req < c->nreq)
            return 0;
    }
    c->nreq = 0;
    c->next_req = 0;
    c->pool_len = 0;
    return 1;
}

/* Parse and run what the client sent; stop (c->held) once its pending
 * replies pass out_hold(). */
static void client_run(bks_client *c)
{
    const bks_config *cfg = &g_srv.cfg;
    bks_worker *w = c->w;
    exec_lock(w);
    if (!batch_run(c))   /* requests parsed earlier, waiting for the output */
        c->held = 1;
    while (!c->held) {
        int argc;
        const bkc_str *argv;
        const char *err = NULL;
        size_t need = 0;
        bks_parse_result rc = BKS_PARSE_MORE;
        /* Before AUTH a client may send only small requests, one at a time
         * (so that an AUTH takes effect before the next request is parsed):
         * at most UNAUTH_MAX_ARGS arguments of UNAUTH_MAX_BULK bytes, as
         * Redis does. Nothing it sends can make the server buffer more. */
        int unauthed = cfg->requirepass[0] && !c->authed;
        bks_limits lim = {cfg->max_bulk_len, cfg->max_args, cfg->max_inline_len};
        if (unauthed) {
            lim.max_bulk_len = UNAUTH_MAX_BULK;
            lim.max_args = UNAUTH_MAX_ARGS;
            if (lim.max_inline_len > UNAUTH_MAX_BULK)
                lim.max_inline_len = UNAUTH_MAX_BULK;
        }
        int batch_max = unauthed ? 1 : BATCH_MAX;
        while (c->nreq < batch_max && !c->closing) {
            rc = bks_parse(&c->parser, c->qbuf, c->qlen, &lim, &argc, &argv, &need, &err);
            if (rc != BKS_PARSE_DONE)
                break;
            if (batch_push(c, argc, argv) < 0) {
                rc = BKS_PARSE_NOMEM;
                break;
            }
        }
        int all = batch_run(c);
        if (c->closing || c->closed)
            break;
        if (rc == BKS_PARSE_NOMEM) {   /* a parsed request could not be kept */
            client_fail(c, "ERR out of memory");
            break;
        }
        if (!all) {
            c->held = 1;   /* the parser stays where it is: nothing is lost */
            break;
        }
        if (rc == BKS_PARSE_ERROR) {
            atomic_fetch_add(&g_srv.protocol_errors, 1);
            if (unauthed && err && strstr(err, "invalid multibulk length"))
                err = "ERR Protocol error: unauthenticated multibulk length";
            else if (unauthed && err && strstr(err, "invalid bulk length"))
                err = "ERR Protocol error: unauthenticated bulk length";
            bks_log(BKS_LOG_INFO, "client %s: %s: closing", c->addr, err);
            client_fail(c, err);
            break;
        }
        /* no more requests (or BATCH_MAX reached: run the next batch),
         * unless the replies wait to be read */
        if (pending_out(c) >= out_hold())
            c->held = 1;
        if (rc == BKS_PARSE_MORE) {
            c->need = need;
            break;
        }
    }
    exec_unlock(w);

    /* move the partial request to the front (not while parsed requests,
     * which point into qbuf, wait to run) */
    size_t used = c->nreq ? 0 : bks_parser_consumed(&c->parser);
    if (used) {
        memmove(c->qbuf, c->qbuf + used, c->qlen - used);
        c->qlen -= used;
        bks_parser_shift(&c->parser, used);
    }
    if (c->qlen == 0 && c->nreq == 0 && c->qcap > QBUF_KEEP && !c->closing) {
        /* a large request is done: give its buffer back */
        atomic_fetch_sub(&g_client_qbytes, c->qcap);
        bks_mem_released(c->qcap);
        free(c->qbuf);
        c->qbuf = NULL;
        c->qcap = 0;
        c->need = 0;
    }
    if (!c->closing && c->qlen > cfg->max_query_buffer) {
        bks_log(BKS_LOG_WARNING, "client %s: query buffer limit reached: closing", c->addr);
        client_fail(c, "ERR Protocol error: query buffer limit reached");
    }
    if (c->out.oom) {
        bks_log(BKS_LOG_WARNING, "client %s: out of memory for replies: closing", c->addr);
        client_close(c);
        return;
    }
    if (pending_out(c) > cfg->max_output_buffer) {
        atomic_fetch_add(&g_srv.output_limit_disconnects, 1);
        bks_log(BKS_LOG_WARNING,
                "client %s: %zu bytes of replies not read (client-output-buffer-limit): "
                "closing",
                c->addr, c->out.len + c->wbuf.len);
        client_close(c);
        return;
    }
    /* Replies that wait for log records go out after this round of reads
     * (on_check): one write of the log serves every client of the round,
     * as Redis writes its AOF once per event loop turn. */
    if (c->logwait.n && !c->held && !c->closing && !c->writing && await_push(w, c) == 0)
        return;
    client_flush(c);
}

static void client_process(bks_client *c)
{
    for (;;) {
        client_run(c);
        if (c->closed || c->closing || !c->held)
            return;
        if (pending_out(c) >= out_hold()) {
            uv_read_stop(&c->h.stream);   /* on_write_done goes on */
            return;
        }
        c->held = 0;   /* written at once: go on */
    }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    bks_client *c = s->data;
    if (nread < 0) {
        if (nread == UV_ENOBUFS && c->over_clients_cap) {
            bks_log(BKS_LOG_WARNING,
                    "client %s: all clients' query buffers would pass maxmemory-clients "
                    "(%llu bytes): closing",
                    c->addr, (unsigned long long)g_srv.cfg.maxmemory_clients);
            client_fail(c, "ERR client query buffers of all clients reached maxmemory-clients: "
                           "closing this client");
            client_flush(c);
            return;
        }
        if (nread == UV_ENOBUFS && c->qcap < g_srv.cfg.max_query_buffer + READ_CHUNK) {
            /* on_alloc could not grow the buffer */
            bks_log(BKS_LOG_WARNING, "client %s: out of memory for the query buffer: closing",
                    c->addr);
            client_fail(c, "ERR out of memory");
            client_flush(c);
            return;
        }
        if (nread == UV_ENOBUFS) {
            bks_log(BKS_LOG_WARNING, "client %s: query buffer limit reached: closing", c->addr);
            client_fail(c, "ERR Protocol error: query buffer limit reached");
            client_flush(c);
            return;
        }
        client_close(c);
        return;
    }
    if (nread == 0 || c->closing || c->closed)
        return;
    c->qlen += (size_t)nread;
    client_process(c);
}

/*==========================================================================
 * Accepting
 *==========================================================================*/

/* "ip:port" of an IPv4 or IPv6 address, as CLIENT LIST shows it. */
static void addr_text(const struct sockaddr_storage *ss, char *out, size_t size)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    int port;
    if (ss->ss_family == AF_INET) {
        uv_ip4_name((const struct sockaddr_in *)ss, ip, sizeof ip);
        port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
    } else {
        uv_ip6_name((const struct sockaddr_in6 *)ss, ip, sizeof ip);
        port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    }
    snprintf(out, size, "%s:%d", ip, port);
}

static int peer_is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        return ntohl(a->sin_addr.s_addr) == INADDR_LOOPBACK;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        static const unsigned char v4mapped_lo[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                                      0, 0, 0xff, 0xff, 127, 0, 0, 1};
        return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
               !memcmp(&a->sin6_addr, v4mapped_lo, 16);
    }
    return 0;
}

/* accept() failed with EMFILE/ENFILE: the process is out of descriptors.
 * libuv then retries at once, for ever, unless the pending connections are
 * taken off the queue: close the worker's spare descriptor, accept and
 * close everything waiting (those clients see the connection closed), and
 * take the spare again. maxclients is capped at start-up (fd_budget) so
 * that clients alone never get here; other open files can. */
static void accept_overflow(bks_worker *w, uv_stream_t *server, int status)
{
    uint64_t now = bks_now_ms();
    if (now - w->emfile_logged_ms >= 1000) {
        w->emfile_logged_ms = now;
        bks_log(BKS_LOG_WARNING,
                "accept: %s: out of file descriptors; refusing new connections until "
                "some close (raise ulimit -n or lower maxclients)",
                uv_strerror(status));
    }
    uv_os_fd_t lfd;
    if (uv_fileno((uv_handle_t *)server, &lfd) < 0)
        return;
    if (w->spare_fd >= 0) {
        close(w->spare_fd);
        w->spare_fd = -1;
    }
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            break;
        close(fd);
        atomic_fetch_add(&g_srv.rejected_connections, 1);
    }
    w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (w->spare_fd < 0) {
        /* another thread took the descriptor: back off instead of spinning */
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static void on_connection(uv_stream_t *server, int status);

/* Closed: a listener that got a connection meanwhile hands it over now. */
static void on_refused(uv_handle_t *h)
{
    bks_worker *w = h->data;
    w->refusing = 0;
    while (w->nrefuse_wait > 0 && !w->refusing) {
        uv_stream_t *server = w->refuse_wait[--w->nrefuse_wait];
        if (!uv_is_closing((uv_handle_t *)server))
            on_connection(server, 0);
    }
}

/* No memory for a client: take the connection into the worker's own
 * handle, answer the error if the socket takes it at once, and close it.
 * libuv stops listening on server until its connection is taken, so one
 * that cannot be refused now (the handle is still closing) waits for
 * on_refused: no listener is left stopped. */
static void refuse_connection(bks_worker *w, uv_stream_t *server)
{
    if (w->refusing) {
        for (int i = 0; i < w->nrefuse_wait; i++)
            if (w->refuse_wait[i] == server)
                return;
        w->refuse_wait[w->nrefuse_wait++] = server;   /* one per listener at most */
        return;
    }
    if (server->type == UV_NAMED_PIPE)
        uv_pipe_init(&w->loop, &w->refuse.pipe, 0);
    else
        uv_tcp_init(&w->loop, &w->refuse.tcp);
    w->refuse.handle.data = w;
    w->refusing = 1;
    atomic_fetch_add(&g_srv.rejected_connections, 1);
    if (uv_accept(server, &w->refuse.stream) == 0) {
        static const char err[] = "-ERR out of memory\r\n";
        uv_buf_t b = uv_buf_init((char *)err, sizeof err - 1);
        (void)uv_try_write(&w->refuse.stream, &b, 1);
    }
    uint64_t now = bks_now_ms();
    if (now - w->oom_logged_ms >= 1000) {
        w->oom_logged_ms = now;
        bks_log(BKS_LOG_WARNING, "out of memory for a new client: connection refused");
    }
    uv_close(&w->refuse.handle, on_refused);
}

static void on_connection(uv_stream_t *server, int status)
{
    bks_worker *w = server->data;
    if (status == UV_EMFILE || status == UV_ENFILE) {
        accept_overflow(w, server, status);
        return;
    }
    if (status < 0)
        return;
    int is_unix = server->type == UV_NAMED_PIPE;
    bks_client *c = calloc(1, sizeof *c);
    if (!c) {
        refuse_connection(w, server);
        return;
    }
    c->w = w;
    c->resp = 2;
    c->h.handle.data = c;
    bks_parser_init(&c->parser);
    if (is_unix)
        uv_pipe_init(&w->loop, &c->h.pipe, 0);
    else
        uv_tcp_init(&w->loop, &c->h.tcp);
    pthread_mutex_lock(&w->list_lock);
    c->next = w->clients;
    if (w->clients)
        w->clients->prev = c;
    w->clients = c;
    pthread_mutex_unlock(&w->list_lock);
    if (uv_accept(server, &c->h.stream) < 0) {
        client_close(c);
        return;
    }
    c->id = atomic_fetch_add(&g_srv.next_client_id, 1) + 1;
    c->created_ms = mono_ms();
    c->unix_sock = is_unix;
    c->session.ks = g_srv.ks;
    c->session.persist = g_srv.persist;
    c->session.client = c;
    /* without a password a client is the default user, authenticated: it
     * stays so if CONFIG SET requirepass adds one later (as in Redis) */
    c->authed = __atomic_load_n(&g_srv.cfg.requirepass[0], __ATOMIC_RELAXED) == '\0';
    atomic_fetch_add(&g_srv.total_connections, 1);
    uint64_t n = atomic_fetch_add(&g_srv.connected_clients, 1) + 1;
    c->counted = 1;

    int local = 1;
    if (is_unix) {
        snprintf(c->addr, sizeof c->addr, "%.60s:0", g_srv.cfg.unixsocket);
        snprintf(c->laddr, sizeof c->laddr, "%.60s:0", g_srv.cfg.unixsocket);
    } else {
        struct sockaddr_storage ss;
        int len = sizeof ss;
        if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) == 0) {
            addr_text(&ss, c->addr, sizeof c->addr);
            local = peer_is_loopback(&ss);
        } else {
            snprintf(c->addr, sizeof c->addr, "?:0");
        }
        len = sizeof ss;
        if (uv_tcp_getsockname(&c->h.tcp, (struct sockaddr *)&ss, &len) == 0)
            addr_text(&ss, c->laddr, sizeof c->laddr);
        uv_tcp_nodelay(&c->h.tcp, 1);
    }
    atomic_store_explicit(&c->listed, 1, memory_order_release);
    bks_log(BKS_LOG_DEBUG, "client id=%llu %s connected (%llu clients)",
            (unsigned long long)c->id, c->addr, (unsigned long long)n);
    if (n > __atomic_load_n(&g_srv.cfg.maxclients, __ATOMIC_RELAXED)) {
        atomic_fetch_add(&g_srv.rejected_connections, 1);
        bks_outbuf_error(&c->out, "ERR max number of clients reached");
        c->closing = 1;
        client_flush(c);
        return;
    }
    if (g_protected && !local) {
        atomic_fetch_add(&g_srv.rejected_connections, 1);
        bks_outbuf_error(&c->out,
                         "DENIED bloomkit-server is running in protected mode: no password is "
                         "set and it listens beyond the loopback interface, so only loopback "
                         "clients are accepted. Set a password (--requirepass), bind to "
                         "127.0.0.1, or disable protected mode (--protected-mode no).");
        c->closing = 1;
        client_flush(c);
        return;
    }
    if (uv_read_start(&c->h.stream, on_alloc, on_read) < 0)
        client_close(c);
}

/*==========================================================================
 * Workers
 *==========================================================================*/

static void close_handle_if_open(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Another worker killed some of ours, or MONITOR lines are waiting. */
static void on_notify(uv_async_t *a)
{
    bks_worker *w = a->data;
    for (bks_client *c = w->clients, *next; c; c = next) {
        next = c->next;
        if (c->closed)
            continue;
        if (atomic_load(&c->kill)) {
            client_close(c);
            continue;
        }
        if (c->monitor) {
            pthread_mutex_lock(&g_mon_lock);
            if (c->mon_pending.len) {
                bks_outbuf_append(&c->out, c->mon_pending.p, c->mon_pending.len);
                c->mon_pending.len = 0;
            }
            pthread_mutex_unlock(&g_mon_lock);
            if (c->out.oom)
                client_close(c);
            else
                client_flush(c);
        }
    }
}

static void on_wake(uv_async_t *a)
{
    bks_worker *w = a->data;
    pthread_mutex_lock(&w->list_lock);
    pthread_mutex_lock(&g_mon_lock);
    w->stopping = 1;
    pthread_mutex_unlock(&g_mon_lock);
    pthread_mutex_unlock(&w->list_lock);
    close_handle_if_open((uv_handle_t *)&w->notify);
    /* stop: close every handle; the loop then ends */
    for (int i = 0; i < w->ntcp; i++)
        close_handle_if_open((uv_handle_t *)&w->tcp[i]);
    if (w->has_unix)
        close_handle_if_open((uv_handle_t *)&w->unix_listener);
    if (w->has_timer)
        close_handle_if_open((uv_handle_t *)&w->timer);
    close_handle_if_open((uv_handle_t *)&w->sweep);
    for (bks_client *c = w->clients; c; c = c->next)
        client_close(c);
    close_handle_if_open((uv_handle_t *)&w->check);
    close_handle_if_open((uv_handle_t *)&w->wake);
}

/* Every second: the reply buffers of clients idle since the last sweep
 * at least go back (out_shrink). O(clients), off the request path. */
static void on_sweep(uv_timer_t *t)
{
    bks_worker *w = t->data;
    uint64_t now = mono_ms();
    for (bks_client *c = w->clients; c; c = c->next) {
        if ((c->out.cap > OUT_KEEP || c->wbuf.cap > OUT_KEEP) &&
            now - atomic_load_explicit(&c->last_ms, memory_order_relaxed) >= 1000)
            out_shrink(c);
    }
}

static void on_timer(uv_timer_t *t)
{
    bks_worker *w = t->data;
    exec_lock(w);
    bks_ks_active_expire(g_srv.ks, &w->timer_session, bks_now_ms());
    bks_log_settle();   /* the DELs of expired keys reach the log now */
    exec_unlock(w);
    bks_ops_tick();
    if (g_srv.persist)
        bks_persist_tick(g_srv.persist);
    bks_mem_tick(bks_keyspace_memory(g_srv.ks), mono_ms());
}

static void worker_main(void *arg)
{
    bks_worker *w = arg;
    tl_worker = w;
    uv_run(&w->loop, UV_RUN_DEFAULT);
    free(w->awaiting);
    w->awaiting = NULL;
    w->nawait = w->await_cap = 0;
}

/* A listening socket of our own (SO_REUSEPORT), handed to libuv. */
static int open_listener(const struct sockaddr *sa, socklen_t salen, int reuseport,
                         char *err, size_t errlen)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (sa->sa_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, sa, salen) < 0 || listen(fd, 511) < 0) {
        snprintf(err, errlen, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int parse_bind(const char *addr, int port, struct sockaddr_storage *ss,
                      socklen_t *len, int *loopback)
{
    memset(ss, 0, sizeof *ss);
    if (!strcmp(addr, "localhost"))
        addr = "127.0.0.1";
    if (uv_ip4_addr(addr, port, (struct sockaddr_in *)ss) == 0) {
        *len = sizeof(struct sockaddr_in);
        *loopback = !strcmp(addr, "127.0.0.1");
        return 0;
    }
    if (uv_ip6_addr(addr, port, (struct sockaddr_in6 *)ss) == 0) {
        *len = sizeof(struct sockaddr_in6);
        *loopback = !strcmp(addr, "::1");
        return 0;
    }
    return -1;
}

/* Descriptors the server needs beyond one per client: listeners, loops,
 * the log, snapshots, the data directory, a spare per worker (as Redis's
 * CONFIG_MIN_RESERVED_FDS, plus a few per worker thread). */
#define FD_RESERVED(threads) (32u + 4u * (unsigned)(threads))

/* Make RLIMIT_NOFILE fit maxclients: raise the soft limit towards the hard
 * one if needed, and if that is not enough, lower maxclients with a
 * warning (as Redis does), so that clients never exhaust descriptors. */
static void fd_budget(int threads)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return;
    uint64_t reserved = FD_RESERVED(threads);
    uint64_t want = (uint64_t)g_srv.cfg.maxclients + reserved;
    if (rl.rlim_cur >= want)
        return;
    struct rlimit nr = rl;
    nr.rlim_cur = (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want) ? want : rl.rlim_max;
    if (nr.rlim_cur > rl.rlim_cur && setrlimit(RLIMIT_NOFILE, &nr) == 0)
        rl = nr;
    if (rl.rlim_cur >= want)
        return;
    uint64_t cap = rl.rlim_cur > reserved + 1 ? rl.rlim_cur - reserved : 1;
    bks_log(BKS_LOG_WARNING,
            "maxclients %u needs %llu file descriptors, but the process may open only "
            "%llu (ulimit -n): maxclients reduced to %llu",
            g_srv.cfg.maxclients, (unsigned long long)want, (unsigned long long)rl.rlim_cur,
            (unsigned long long)cap);
    g_srv.cfg.maxclients = (uint32_t)cap;
}

/* Grow loop's descriptor table to cover every descriptor up to hi now.
 * libuv indexes its watchers by descriptor in one array per loop and grows
 * it when a watcher starts on a higher one; if that realloc fails, it calls
 * abort(). A new connection's descriptor can be the highest yet, so under
 * memory pressure an accept could kill the server. Polled once on a
 * descriptor numbered hi (a pipe's end dup'ed there), the table is grown
 * at start, while memory is plentiful, and never shrinks. Costs 8 bytes a
 * descriptor per loop (80 KiB for the default maxclients). */
static void presize_watchers(uv_loop_t *loop, int hi)
{
    int p[2];
    if (hi < 3 || pipe2(p, O_CLOEXEC) != 0) return;
    int fd = dup3(p[0], hi, O_CLOEXEC);
    close(p[0]);
    close(p[1]);
    if (fd != hi) return;            /* hi beyond the limit: nothing grown */
    uv_poll_t poll;
    if (uv_poll_init(loop, &poll, fd) == 0) {
        uv_poll_start(&poll, UV_READABLE, NULL);   /* grows the table */
        uv_close((uv_handle_t *)&poll, NULL);       /* stops it */
        uv_run(loop, UV_RUN_NOWAIT);                /* finishes the close */
    }
    close(fd);
}

int bks_net_start(void)
{
    const bks_config *cfg = &g_srv.cfg;
    int n = cfg->threads;
    if (n <= 0)
        n = (int)uv_available_parallelism();
    if (n <= 0)
        n = 1;
    g_srv.cfg.threads = n;

    /* the bind addresses */
    struct sockaddr_storage addrs[MAX_BINDS];
    socklen_t lens[MAX_BINDS];
    int naddrs = 0, all_loopback = 1;
    if (cfg->port > 0) {
        char list[sizeof cfg->bind];
        snprintf(list, sizeof list, "%s", cfg->bind);
        char *save = NULL;
        for (char *tok = strtok_r(list, " \t,", &save); tok;
             tok = strtok_r(NULL, " \t,", &save)) {
            int lo;
            if (naddrs == MAX_BINDS) {
                bks_log(BKS_LOG_ERROR, "too many bind addresses (at most %d)", MAX_BINDS);
                return -1;
            }
            if (parse_bind(tok, cfg->port, &addrs[naddrs], &lens[naddrs], &lo) < 0) {
                bks_log(BKS_LOG_ERROR, "bind: '%s' is not an IPv4 or IPv6 address", tok);
                return -1;
            }
            all_loopback &= lo;
            /* probe without SO_REUSEPORT: fails if anyone else has the port */
            char err[256];
            int fd = open_listener((struct sockaddr *)&addrs[naddrs], lens[naddrs], 0, err,
                                   sizeof err);
            if (fd < 0) {
                bks_log(BKS_LOG_ERROR, "cannot listen on %s:%d: %s", tok, cfg->port, err);
                return -1;
            }
            close(fd);
            naddrs++;
        }
        if (naddrs == 0) {
            bks_log(BKS_LOG_ERROR, "bind: no address given");
            return -1;
        }
    }
    g_protected = cfg->protected_mode && !cfg->requirepass[0] && !all_loopback;
    if (cfg->protected_mode && !cfg->requirepass[0] && !all_loopback)
        bks_log(BKS_LOG_WARNING, "protected mode: no password and listening beyond "
                                 "loopback, so only loopback clients are accepted");

    fd_budget(n);
    /* the highest descriptor a client can get: maxclients and the reserve,
     * within the process's limit (a CONFIG SET of maxclients above it
     * later grows the tables as libuv needs) */
    int watch_hi = (int)(g_srv.cfg.maxclients + FD_RESERVED(n));
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)watch_hi >= rl.rlim_cur)
        watch_hi = (int)rl.rlim_cur - 1;

    bks_worker *ws = calloc((size_t)n, sizeof *ws);
    if (!ws)
        return -1;
    for (int i = 0; i < n; i++) {
        bks_worker *w = &ws[i];
        w->index = i;
        w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        pthread_mutex_init(&w->exec, NULL);
        pthread_mutex_init(&w->list_lock, NULL);
        uv_loop_init(&w->loop);
        presize_watchers(&w->loop, watch_hi);
        uv_async_init(&w->loop, &w->wake, on_wake);
        w->wake.data = w;
        uv_async_init(&w->loop, &w->notify, on_notify);
        w->notify.data = w;
        uv_check_init(&w->loop, &w->check);
        w->check.data = w;
        uv_check_start(&w->check, on_check);
        uv_unref((uv_handle_t *)&w->check);   /* it never keeps the loop alive */
        uv_timer_init(&w->loop, &w->sweep);
        w->sweep.data = w;
        uv_timer_start(&w->sweep, on_sweep, 1000, 1000);
        w->timer_session.ks = g_srv.ks;
        w->timer_session.persist = g_srv.persist;
    }
    /* publish under the pause mutex: a pauser sees no workers or all */
    pthread_mutex_lock(&g_pause);
    g_workers = ws;
    g_nworkers = n;
    pthread_mutex_unlock(&g_pause);

    for (int i = 0; i < n; i++) {
        bks_worker *w = &g_workers[i];
        for (int a = 0; a < naddrs; a++) {
            char err[256];
            int fd = open_listener((struct sockaddr *)&addrs[a], lens[a], 1, err, sizeof err);
            if (fd < 0) {
                bks_log(BKS_LOG_ERROR, "cannot listen on port %d: %s", cfg->port, err);
                return -1;
            }
            uv_tcp_init(&w->loop, &w->tcp[a]);
            w->tcp[a].data = w;
            w->ntcp = a + 1;
            if (uv_tcp_open(&w->tcp[a], fd) < 0 ||
                uv_listen((uv_stream_t *)&w->tcp[a], 511, on_connection) < 0) {
                bks_log(BKS_LOG_ERROR, "cannot listen on port %d", cfg->port);
                return -1;
            }
        }
    }
    bks_worker *w0 = &g_workers[0];
    if (cfg->unixsocket[0]) {
        unlink(cfg->unixsocket);
        uv_pipe_init(&w0->loop, &w0->unix_listener, 0);
        w0->unix_listener.data = w0;
        w0->has_unix = 1;
        int rc = uv_pipe_bind(&w0->unix_listener, cfg->unixsocket);
        if (rc == 0 && cfg->unixsocketperm[0]) {
            char *end;
            unsigned long mode = strtoul(cfg->unixsocketperm, &end, 8);
            if (*end || mode > 0777) {
                bks_log(BKS_LOG_ERROR, "unixsocketperm: '%s' is not an octal mode such as 700",
                        cfg->unixsocketperm);
                return -1;
            }
            if (chmod(cfg->unixsocket, (mode_t)mode) < 0) {
                bks_log(BKS_LOG_ERROR, "unixsocketperm: chmod %s: %s", cfg->unixsocket,
                        strerror(errno));
                return -1;
            }
        }
        if (rc == 0)
            rc = uv_listen((uv_stream_t *)&w0->unix_listener, 511, on_connection);
        if (rc < 0) {
            bks_log(BKS_LOG_ERROR, "cannot listen on unix socket %s: %s", cfg->unixsocket,
                    uv_strerror(rc));
            return -1;
        }
    }
    uv_timer_init(&w0->loop, &w0->timer);
    w0->timer.data = w0;
    w0->has_timer = 1;
    uv_timer_start(&w0->timer, on_timer, 100, 100);

    for (int i = 0; i < n; i++) {
        if (uv_thread_create(&g_workers[i].thread, worker_main, &g_workers[i]) < 0) {
            bks_log(BKS_LOG_ERROR, "cannot start worker thread %d", i);
            return -1;
        }
        g_workers[i].started = 1;
    }
    if (cfg->port > 0)
        bks_log(BKS_LOG_INFO, "listening on %s port %d (%d worker threads)", cfg->bind,
                cfg->port, n);
    if (cfg->unixsocket[0])
        bks_log(BKS_LOG_INFO, "listening on unix socket %s", cfg->unixsocket);
    return 0;
}

/*==========================================================================
 * The main thread: signals and shutdown requests
 *==========================================================================*/

static void on_main_async(uv_async_t *a)
{
    (void)a;
    if (atomic_load(&g_srv.shutdown_mode) != BKS_SHUTDOWN_NONE)
        uv_stop(&g_main_loop);
}

/* SIGHUP (logrotate): reopen the log file; the server goes on. */
static void on_sighup(uv_signal_t *s, int signum)
{
    (void)s;
    (void)signum;
    bks_log_reopen();
    bks_log(BKS_LOG_INFO, "Received SIGHUP: log file reopened");
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)s;
    bks_log(BKS_LOG_WARNING, "Received %s, scheduling shutdown...",
            signum == SIGTERM ? "SIGTERM" : "SIGINT");
    int expected = BKS_SHUTDOWN_NONE;
    atomic_compare_exchange_strong(&g_srv.shutdown_mode, &expected, BKS_SHUTDOWN_SAVE);
    uv_stop(&g_main_loop);
}

void bks_request_shutdown(bks_shutdown_mode mode)
{
    int expected = BKS_SHUTDOWN_NONE;
    atomic_compare_exchange_strong(&g_srv.shutdown_mode, &expected, (int)mode);
    if (g_main_ready)
        uv_async_send(&g_main_async);
}

int bks_net_run(void)
{
    uv_loop_init(&g_main_loop);
    uv_async_init(&g_main_loop, &g_main_async, on_main_async);
    uv_signal_init(&g_main_loop, &g_sigterm);
    uv_signal_init(&g_main_loop, &g_sigint);
    uv_signal_start(&g_sigterm, on_signal, SIGTERM);
    uv_signal_start(&g_sigint, on_signal, SIGINT);
    uv_signal_init(&g_main_loop, &g_sighup);
    uv_signal_start(&g_sighup, on_sighup, SIGHUP);
    g_main_ready = 1;
    if (atomic_load(&g_srv.shutdown_mode) == BKS_SHUTDOWN_NONE)
        uv_run(&g_main_loop, UV_RUN_DEFAULT);
    uv_signal_stop(&g_sigterm);
    uv_signal_stop(&g_sigint);
    uv_signal_stop(&g_sighup);
    return 0;
}

void bks_net_stop(void)
{
    for (int i = 0; i < g_nworkers; i++)
        if (g_workers[i].started)
            uv_async_send(&g_workers[i].wake);
    for (int i = 0; i < g_nworkers; i++)
        if (g_workers[i].started) {
            uv_thread_join(&g_workers[i].thread);
            g_workers[i].started = 0;
        }
}

void bks_net_free(void)
{
    for (int i = 0; i < g_nworkers; i++) {
        bks_worker *w = &g_workers[i];
        /* a worker that never ran still owns open handles */
        on_wake(&w->wake);
        uv_run(&w->loop, UV_RUN_DEFAULT);
        uv_loop_close(&w->loop);
        if (w->spare_fd >= 0)
            close(w->spare_fd);
        pthread_mutex_destroy(&w->exec);
        pthread_mutex_destroy(&w->list_lock);
    }
    free(g_workers);
    g_workers = NULL;
    g_nworkers = 0;
    if (g_main_ready) {
        g_main_ready = 0;
        uv_close((uv_handle_t *)&g_main_async, NULL);
        uv_close((uv_handle_t *)&g_sigterm, NULL);
        uv_close((uv_handle_t *)&g_sigint, NULL);
        uv_close((uv_handle_t *)&g_sighup, NULL);
        uv_run(&g_main_loop, UV_RUN_DEFAULT);
        uv_loop_close(&g_main_loop);
    }
}
