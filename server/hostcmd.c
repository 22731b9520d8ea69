/*
 * hostcmd.c - running a request: the auth gate, the commands the server
 * implements itself, and everything else through the command layer.
 *
 * bks_execute() is the one entry: NOAUTH until AUTH succeeds (when there is
 * a requirepass), then the host table below (sorted, searched by
 * bisection on the lower-cased name), else bkc_dispatch(), which answers
 * unknown commands and wrong arity with Redis's texts.
 *
 * bks_execute_batch() runs the requests of one read (a pipeline). A run of
 * BF.ADD (or BF.EXISTS) on one key becomes one BF.MADD (BF.MEXISTS), so
 * that pipelined single-item commands reach the library's batched,
 * prefetching paths; the array reply is split back into one reply per
 * request. If the batched command answers anything but an array (an error
 * such as WRONGTYPE, which has no side effect), the requests run one by
 * one instead, so each gets exactly the reply it would have had alone.
 *
 * Host commands that change the keyspace log themselves (keyspace.c logs
 * DEL / PEXPIREAT / PERSIST / RENAME under the key's lock; FLUSHALL is
 * logged here with the server paused). EXPIRE and friends are logged as
 * PEXPIREAT with the absolute time, so a replay does not move expiries.
 *
 * The server's global state (g_srv) lives here too.
 */
#include <ctype.h>
#include <limits.h> /* LLONG_MAX */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>      /* strncasecmp */
#include <time.h>
#include <unistd.h>

#include "ops.h"
#include "server_int.h"

bks_server g_srv;

extern _Thread_local int bks_tl_log_failed;

_Thread_local uint64_t bks_tl_frozen_ms;

uint64_t bks_now_ms(void)
{
    if (bks_tl_frozen_ms)
        return bks_tl_frozen_ms;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The clock of a command of the layer, read once for it (or for a run of
 * pipelined ones): ctx.now_ms, and the time its log record carries
 * (bks_tl_cmd_ms, keyspace.c), so a replay runs it at the very time it ran
 * (time-window filters replay exactly). */
static uint64_t command_clock(void)
{
    bks_tl_cmd_ms = bks_now_ms();
    return bks_tl_cmd_ms;
}

/*==========================================================================
 * Helpers
 *==========================================================================*/

typedef struct hctx {
    bks_client *client;     /* NULL when replaying */
    bks_session *s;
    bkc_reply *r;
    int resp;
} hctx;

#define R_SIMPLE(x, s) ((x)->r->vt->simple((x)->r, (s)))
#define R_ERR(x, s) ((x)->r->vt->error((x)->r, (s)))
#define R_INT(x, v) ((x)->r->vt->integer((x)->r, (v)))
#define R_BULK(x, p, n) ((x)->r->vt->bulk((x)->r, (p), (n)))
#define R_CSTR(x, s) ((x)->r->vt->bulk((x)->r, (s), strlen(s)))
#define R_NULL(x) ((x)->r->vt->null((x)->r))
#define R_ARRAY(x, n) ((x)->r->vt->array((x)->r, (n)))
#define R_MAP(x, n) ((x)->r->vt->map((x)->r, (n)))

static const char *ERR_INT = "ERR value is not an integer or out of range";
static const char *ERR_SYNTAX = "ERR syntax error";

static void arity_error(hctx *x, const char *name)
{
    char buf[160];
    snprintf(buf, sizeof buf, "ERR wrong number of arguments for '%s' command", name);
    R_ERR(x, buf);
}

/* A growable list of byte strings (KEYS, SCAN replies). */
typedef struct strlist {
    char **s;
    size_t *len;
    size_t n, cap;
    int oom;
} strlist;

static void strlist_push(strlist *l, const char *p, size_t n)
{
    if (l->oom)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **s = realloc(l->s, cap * sizeof *s);
        if (!s) { l->oom = 1; return; }
        l->s = s;
        size_t *len = realloc(l->len, cap * sizeof *len);
        if (!len) { l->oom = 1; return; }
        l->len = len;
        l->cap = cap;
    }
    char *c = malloc(n ? n : 1);
    if (!c) { l->oom = 1; return; }
    memcpy(c, p, n);
    l->s[l->n] = c;
    l->len[l->n] = n;
    l->n++;
}

static void strlist_free(strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->s[i]);
    free(l->s);
    free(l->len);
}

static int str_eq_nocase(bkc_str a, bkc_str b)
{
    return a.len == b.len && !strncasecmp(a.ptr, b.ptr, a.len);
}

static const char *kind_type(int kind)
{
    if (kind < 0)
        return "none";
    const char *t = bkc_kind_type_name((bkc_kind)kind);
    return t ? t : "none";
}

/*==========================================================================
 * Connection commands
 *==========================================================================*/

static void cmd_ping(hctx *x, int argc, const bkc_str *argv)
{
    if (argc > 2) {
        arity_error(x, "ping");
        return;
    }
    if (argc == 2)
        R_BULK(x, argv[1].ptr, argv[1].len);
    else
        R_SIMPLE(x, "PONG");
}

static void cmd_echo(hctx *x, int argc, const bkc_str *argv)
{
    (void)argc;
    R_BULK(x, argv[1].ptr, argv[1].len);
}

/* Constant-time comparison of a password with the configured one. */
static int password_ok(bkc_str given)
{
    const char *want = g_srv.cfg.requirepass;
    size_t wl = strlen(want);
    unsigned diff = (unsigned)(given.len ^ wl);
    for (size_t i = 0; i < given.len; i++)
        diff |= (unsigned char)given.ptr[i] ^ (unsigned char)(wl ? want[i % wl] : 0);
    return diff == 0;
}

/* 1 ok, 0 wrong password, -1 no password configured. */
static int check_auth(bkc_str user, bkc_str pass, int has_user)
{
    if (!g_srv.cfg.requirepass[0])
        return -1;
    if (has_user && !(user.len == 7 && !memcmp(user.ptr, "default", 7)))
        return 0;
    return password_ok(pass);
}

static void cmd_auth(hctx *x, int argc, const bkc_str *argv)
{
    if (argc > 3) {
        R_ERR(x, ERR_SYNTAX);
        return;
    }
    int rc = argc == 3 ? check_auth(argv[1], argv[2], 1) : check_auth(argv[1], argv[1], 0);
    if (rc < 0) {
        if (argc == 3 && argv[1].len == 7 && !memcmp(argv[1].ptr, "default", 7)) {
            R_SIMPLE(x, "OK");   /* "default" with no password set: Redis accepts any */
            return;
        }
        R_ERR(x, "ERR AUTH <password> called without any password configured for the "
                 "default user. Are you sure your configuration is correct?");
        return;
    }
    if (!rc) {
        R_ERR(x, "WRONGPASS invalid username-password pair or user is disabled.");
        return;
    }
    if (x->client)
        bks_client_set_authed(x->client, 1);
    R_SIMPLE(x, "OK");
}

static int valid_client_name(bkc_str n)
{
    for (size_t i = 0; i < n.len; i++)
        if (n.ptr[i] < '!' || n.ptr[i] > '~')
            return 0;
    return 1;
}

static void cmd_hello(hctx *x, int argc, const bkc_str *argv)
{
    int proto = x->client ? bks_client_resp(x->client) : 2;
    int i = 1;
    if (argc >= 2) {
        long long v;
        if (!bkc_parse_ll(argv[1], &v)) {
            R_ERR(x, "ERR Protocol version is not an integer or out of range");
            return;
        }
        if (v != 2 && v != 3) {
            R_ERR(x, "NOPROTO unsupported protocol version");
            return;
        }
        proto = (int)v;
        i = 2;
    }
    int authed_now = 0;
    bkc_str setname = {NULL, 0};
    int has_name = 0;
    for (; i < argc; i++) {
        if (bkc_streq(argv[i], "AUTH") && i + 2 < argc) {
            int rc = check_auth(argv[i + 1], argv[i + 2], 1);
            if (rc == 0) {
                R_ERR(x, "WRONGPASS invalid username-password pair or user is disabled.");
                return;
            }
            authed_now = 1;
            i += 2;
        } else if (bkc_streq(argv[i], "SETNAME") && i + 1 < argc) {
            setname = argv[i + 1];
            has_name = 1;
            i++;
        } else {
            char buf[256];
            snprintf(buf, sizeof buf, "ERR Syntax error in HELLO option '%.*s'",
                     (int)(argv[i].len > 128 ? 128 : argv[i].len), argv[i].ptr);
            R_ERR(x, buf);
            return;
        }
    }
    if (x->client && g_srv.cfg.requirepass[0] && !authed_now &&
        !bks_client_authed(x->client)) {
        R_ERR(x, "NOAUTH HELLO must be called with the client already authenticated, "
                 "otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
                 "authenticate the client and select the RESP protocol version at the "
                 "same time");
        return;
    }
    if (has_name && !valid_client_name(setname)) {
        R_ERR(x, "ERR Client names cannot contain spaces, newlines or special characters.");
        return;
    }
    if (x->client) {
        if (authed_now)
            bks_client_set_authed(x->client, 1);
        if (has_name)
            bks_client_set_name(x->client, setname.ptr, setname.len);
        bks_client_set_resp(x->client, proto);
    }
    /* the reply is encoded in the new protocol */
    ((bks_encoder *)x->r->impl)->resp = proto;
    R_MAP(x, 7);
    R_CSTR(x, "server");
    R_CSTR(x, "bloomkit");
    R_CSTR(x, "version");
    R_CSTR(x, BKS_REDIS_VERSION);
    R_CSTR(x, "proto");
    R_INT(x, proto);
    R_CSTR(x, "id");
    R_INT(x, x->client ? (long long)bks_client_id(x->client) : 0);
    R_CSTR(x, "mode");
    R_CSTR(x, "standalone");
    R_CSTR(x, "role");
    R_CSTR(x, "master");
    R_CSTR(x, "modules");
    R_ARRAY(x, 0);
}

static void cmd_client(hctx *x, int argc, const bkc_str *argv)
{
    const bkc_str sub = argv[1];
    if (bkc_streq(sub, "ID") && argc == 2) {
        R_INT(x, x->client ? (long long)bks_client_id(x->client) : 0);
    } else if (bkc_streq(sub, "GETNAME") && argc == 2) {
        const char *n = x->client ? bks_client_name(x->client) : "";
        if (*n)
            R_CSTR(x, n);
        else
            R_NULL(x);
    } else if (bkc_streq(sub, "SETNAME") && argc == 3) {
        if (!valid_client_name(argv[2])) {
            R_ERR(x, "ERR Client names cannot contain spaces, newlines or special characters.");
            return;
        }
        if (x->client && bks_client_set_name(x->client, argv[2].ptr, argv[2].len) < 0) {
            R_ERR(x, "ERR out of memory");
            return;
        }
        R_SIMPLE(x, "OK");
    } else if (bkc_streq(sub, "KILL") && argc >= 3) {
        bks_cmd_client_kill(x->client, x->s, x->r, argc, argv);
    } else if (bkc_streq(sub, "SETINFO") && argc == 4) {
        R_SIMPLE(x, "OK");
    } else if ((bkc_streq(sub, "LIST") || bkc_streq(sub, "INFO")) && argc >= 2) {
        size_t len = 0;
        char *text = bks_clients_describe(&len);
        if (!text) {
            R_ERR(x, "ERR out of memory");
            return;
        }
        if (bkc_streq(sub, "INFO") && x->client) {
            /* only this client's line */
            char want[32];
            int n = snprintf(want, sizeof want, "id=%llu ",
                             (unsigned long long)bks_client_id(x->client));
            char *line = text;
            while (line < text + len && strncmp(line, want, (size_t)n)) {
                char *nl = memchr(line, '\n', (size_t)(text + len - line));
                line = nl ? nl + 1 : text + len;
            }
            char *nl = line < text + len ? memchr(line, '\n', (size_t)(text + len - line)) : NULL;
            R_BULK(x, line, nl ? (size_t)(nl - line + 1) : (size_t)(text + len - line));
        } else {
            R_BULK(x, text, len);
        }
        free(text);
    } else if (bkc_streq(sub, "HELP")) {
        static const char *lines[] = {
            "CLIENT <subcommand> [<arg> ...]. Subcommands are:",
            "ID", "    Return the ID of the current connection.",
            "GETNAME", "    Return the name of the current connection.",
            "SETNAME <name>", "    Assign the name <name> to the current connection.",
            "LIST", "    Return information about client connections.",
            "INFO", "    Return information about the current client connection.",
            "KILL <ip:port> | <filter> <value> [<filter> <value> ...]",
            "    Kill connections: filters ID, ADDR, LADDR, USER, TYPE, MAXAGE, SKIPME."};
        R_ARRAY(x, sizeof lines / sizeof lines[0]);
        for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
            R_SIMPLE(x, lines[i]);
    } else {
        char buf[256];
        snprintf(buf, sizeof buf,
                 "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
                 "Try CLIENT HELP.",
                 (int)(sub.len > 64 ? 64 : sub.len), sub.ptr);
        R_ERR(x, buf);
    }
}

static void cmd_select(hctx *x, int argc, const bkc_str *argv)
{
    (void)argc;
    long long db;
    if (!bkc_parse_ll(argv[1], &db)) {
        R_ERR(x, ERR_INT);
        return;
    }
    if (db != 0) {
        R_ERR(x, "ERR DB index is out of range");
        return;
    }
    R_SIMPLE(x, "OK");
}

/* MULTI, EXEC, DISCARD, WATCH, UNWATCH (multi.c) */
static void cmd_txn(hctx *x, int argc, const bkc_str *argv)
{
    bks_multi_command(x->client, x->s, x->r, x->resp, argc, argv);
}

static void cmd_quit(hctx *x, int argc, const bkc_str *argv)
{
    (void)argc;
    (void)argv;
    R_SIMPLE(x, "OK");
    if (x->client)
        bks_client_close_after_reply(x->client);
}

static void cmd_time(hctx *x, int argc, const bkc_str *argv)
{
    (void)argc;
    (void)argv;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char a[32], b[32];
    int na = snprintf(a, sizeof a, "%lld", (long long)ts.tv_sec);
    int nb = snprintf(b, sizeof b, "%ld", ts.tv_nsec / 1000);
    R_ARRAY(x, 2);
    R_BULK(x, a, (size_t)na);
    R_BULK(x, b, (size_t)nb);
}

/*==========================================================================
 * Keyspace commands
 *==========================================================================*/

static void cmd_dbsize(hctx *x, int argc, const bkc_str *argv)
{
    (void)argc;
    (void)argv;
    R_INT(x, (long long)bks_keyspace_size(x->s->ks));
}

static void cmd_exists(hctx *x, int argc, const bkc_str *argv)
{
    long long n = 0;
    for (int i = 1; i < argc; i++)
        n += bks_ks_kind(x->s->ks, x->s, argv[i]) >= 0;
    R_INT(x, n);
}

static void cmd_del(hctx *x, int argc, const bkc_str *argv)
{
    long long n = 0;
    for (int i = 1; i < argc; i++)
        n += bks_ks_delete(x->s->ks, x->s, argv[i]);
    R_INT(x, n);
}

static void cmd_type(hctx *x, int argc, const bkc_str *argv)
{
    (void)argc;
    R_SIMPLE(x, kind_type(bks_ks_kind(x->s->ks, x->s, argv[1])));
}

typedef struct match_arg {
    strlist *out;
    const char *pat;
    size_t plen;
    const char *type;    /* SCAN TYPE, or NULL */
} match_arg;

static int collect_matching(void *arg, const char *name, size_t len, bkc_kind kind)
{
    match_arg *m = arg;
    if (m->pat && !bks_glob_match(m->pat, m->plen, name, len, 0))
        return 0;
    if (m->type && strcasecmp(m->type, kind_type((int)kind)))
        return 0;
    strlist_push(m->out, name, len);
    return m->out->oom;
}

static void reply_strlist(hctx *x, strlist *l)
{
    R_ARRAY(x, l->n);
    for (size_t i = 0; i < l->n; i++)
        R_BULK(x, l->s[i], l->len[i]);
}

static void cmd_keys(hctx *x, int argc, const bkc_str *argv)
{
    (void)argc;
    strlist l = {0};
    int all = argv[1].len == 1 && argv[1].ptr[0] == '*';
    match_arg m = {&l, all ? NULL : argv[1].ptr, argv[1].len, NULL};
    bks_ks_each(x->s->ks, collect_matching, &m);
    if (l.oom)
        R_ERR(x, "ERR out of memory");
    else
        reply_strlist(x, &l);
    strlist_free(&l);
}

static void cmd_scan(hctx *x, int argc, const bkc_str *argv)
{
    uint64_t cursor;
    if (!bkc_parse_u64(argv[1], &cursor)) {
        R_ERR(x, "ERR invalid cursor");
        return;
    }
    strlist l = {0};
    match_arg m = {&l, NULL, 0, NULL};
    char type[64];
    long long count = 10;
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc) {
            R_ERR(x, ERR_SYNTAX);
            return;
        }
        if (bkc_streq(argv[i], "MATCH")) {
            m.pat = argv[i + 1].ptr;
            m.plen = argv[i + 1].len;
            if (m.plen == 1 && m.pat[0] == '*')
                m.pat = NULL;
        } else if (bkc_streq(argv[i], "COUNT")) {
            if (!bkc_parse_ll(argv[i + 1], &count)) {
                R_ERR(x, ERR_INT);
                return;
            }
            if (count < 1) {
                R_ERR(x, ERR_SYNTAX);
                return;
            }
        } else if (bkc_streq(argv[i], "TYPE")) {
            size_t n = argv[i + 1].len < sizeof type - 1 ? argv[i + 1].len : sizeof type - 1;
            memcpy(type, argv[i + 1].ptr, n);
            type[n] = '\0';
            m.type = type;
        } else {
            R_ERR(x, ERR_SYNTAX);
            return;
        }
    }
    uint64_t next = bks_ks_scan(x->s->ks, cursor, (uint64_t)count, collect_matching, &m);
    if (l.oom) {
        R_ERR(x, "ERR out of memory");
    } else {
        char num[32];
        int n = snprintf(num, sizeof num, "%llu", (unsigned long long)next);
        R_ARRAY(x, 2);
        R_BULK(x, num, (size_t)n);
        reply_strlist(x, &l);
    }
    strlist_free(&l);
}

static void cmd_rename(hctx *x, int argc, const bkc_str *argv)
{
    (void)argc;
    int nx = bkc_streq(argv[0], "RENAMENX");
    bks_pause_all();
    int rc = bks_ks_rename(x->s->ks, x->s, argv[1], argv[2], nx);
    bks_resume_all();
    if (rc == -1)
        R_ERR(x, "ERR no such key");
    else if (rc == -2)
        R_ERR(x, "ERR out of memory");
    else if (nx)
        R_INT(x, rc);
    else
        R_SIMPLE(x, "OK");
}

/* EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT key time [NX|XX|GT|LT] */
static void cmd_expire(hctx *x, int argc, const bkc_str *argv)
{
    int ms = bkc_streq(argv[0], "PEXPIRE") || bkc_streq(argv[0], "PEXPIREAT");
    int at = bkc_streq(argv[0], "EXPIREAT") || bkc_streq(argv[0], "PEXPIREAT");
    long long t;
    if (!bkc_parse_ll(argv[2], &t)) {
        R_ERR(x, ERR_INT);
        return;
    }
    int flags = 0;
    for (int i = 3; i < argc; i++) {
        if (bkc_streq(argv[i], "NX")) flags |= BKS_EXP_NX;
        else if (bkc_streq(argv[i], "XX")) flags |= BKS_EXP_XX;
        else if (bkc_streq(argv[i], "GT")) flags |= BKS_EXP_GT;
        else if (bkc_streq(argv[i], "LT")) flags |= BKS_EXP_LT;
        else {
            char buf[128];
            snprintf(buf, sizeof buf, "ERR Unsupported option %.*s",
                     (int)(argv[i].len > 64 ? 64 : argv[i].len), argv[i].ptr);
            R_ERR(x, buf);
            return;
        }
    }
    if ((flags & BKS_EXP_NX) && (flags & ~BKS_EXP_NX)) {
        R_ERR(x, "ERR NX and XX, GT or LT options at the same time are not compatible");
        return;
    }
    if ((flags & BKS_EXP_GT) && (flags & BKS_EXP_LT)) {
        R_ERR(x, "ERR GT and LT options at the same time are not compatible");
        return;
    }
    /* absolute ms, with Redis's overflow checks */
    long long abs_ms;
    char name[16];
    size_t nl = argv[0].len < sizeof name - 1 ? argv[0].len : sizeof name - 1;
    for (size_t i = 0; i < nl; i++)
        name[i] = (char)tolower((unsigned char)argv[0].ptr[i]);
    name[nl] = '\0';
    long long base = at ? 0 : (long long)bks_now_ms();
    if (!ms) {
        if (t > LLONG_MAX / 1000 || t < LLONG_MIN / 1000)
            goto invalid;
        t *= 1000;
    }
    if ((t > 0 && base > LLONG_MAX - t) || (t < 0 && base < LLONG_MIN - t))
        goto invalid;
    abs_ms = base + t;
    if (abs_ms <= 0)
        abs_ms = 1;               /* in the past: deletes the key */
    int done = bks_ks_set_expire(x->s->ks, x->s, argv[1], (uint64_t)abs_ms, flags);
    if (done < 0)
        R_ERR(x, "ERR out of memory");
    else
        R_INT(x, done);
    return;
invalid: {
        char buf[96];
        snprintf(buf, sizeof buf, "ERR invalid expire time in '%s' command", name);
        R_ERR(x, buf);
    }
}

static void cmd_ttl(hctx *x, int argc, const bkc_str *argv)
{
    (void)argc;
    int ms = bkc_streq(argv[0], "PTTL");
    int64_t at = bks_ks_get_expire(x->s->ks, x->s, argv[1]);
    if (at < 0) {
        R_INT(x, -2);
        return;
    }
    if (at == 0) {
        R_INT(x, -1);
        return;
    }
    int64_t left = at - (int64_t)bks_now_ms();
    if (left < 0)
        left = 0;
    R_INT(x, ms ? left : (left + 500) / 1000);
}

static void cmd_persist(hctx *x, int argc, const bkc_str *argv)
{
    (void)argc;
    R_INT(x, bks_ks_set_expire(x->s->ks, x->s, argv[1], 0, 0));
}

static void cmd_flushall(hctx *x, int argc, const bkc_str *argv)
{
    if (argc > 2 || (argc == 2 && !bkc_streq(argv[1], "ASYNC") && !bkc_streq(argv[1], "SYNC"))) {
        R_ERR(x, ERR_SYNTAX);
        return;
    }
    bks_pause_all();
    bks_ks_flush(x->s->ks);
    bkc_str log[1] = {{"FLUSHALL", 8}};
    /* WATCHes see it; inside EXEC it joins the transaction's record */
    if (!bks_multi_wrote(1, log) && x->s->persist) {
        if (bks_persist_log(x->s->persist, 1, log) < 0) {
            bks_tl_log_failed = 1;
            atomic_store(&g_srv.write_error, 1);
        }
    }
    bks_resume_all();
    R_SIMPLE(x, "OK");
}

/*==========================================================================
 * Persistence and shutdown
 *==========================================================================*/

/* Whether this server persists; when not, the error reply of SAVE and
 * BGSAVE. */
static int persistence_on(hctx *x)
{
    if (x->s->persist) return 1;
    R_ERR(x, "ERR persistence is off in this server");
    return 0;
}

static void cmd_save(hctx *x, int argc, const bkc_str *argv)
{
    (void)argc;
    (void)argv;
    if (!persistence_on(x)) return;
    if (bks_persist_save(x->s->persist) < 0)
        R_ERR(x, "ERR the snapshot could not be written (see the server log)");
    else
        R_SIMPLE(x, "OK");
}

static void cmd_bgsave(hctx *x, int argc, const bkc_str *argv)
{
    if (argc > 2 || (argc == 2 && !bkc_streq(argv[1], "SCHEDULE"))) {
        R_ERR(x, ERR_SYNTAX);
        return;
    }
    if (!persistence_on(x)) return;
    if (bks_persist_bgsave(x->s->persist) < 0)
        R_ERR(x, "ERR Background save already in progress or failed (see the server log)");
    else
        R_SIMPLE(x, "Background saving started");
}

static void cmd_lastsave(hctx *x, int argc, const bkc_str *argv)
{
    (void)argc;
    (void)argv;
    if (x->s->persist)
        R_INT(x, (long long)bks_persist_lastsave(x->s->persist));
    else
        R_INT(x, (long long)(g_srv.start_ms / 1000));
}

static void cmd_shutdown(hctx *x, int argc, const bkc_str *argv)
{
    bks_shutdown_mode mode = BKS_SHUTDOWN_SAVE;
    for (int i = 1; i < argc; i++) {
        if (bkc_streq(argv[i], "NOSAVE"))
            mode = BKS_SHUTDOWN_NOSAVE;
        else if (bkc_streq(argv[i], "SAVE"))
            mode = BKS_SHUTDOWN_SAVE;
        else if (bkc_streq(argv[i], "NOW") || bkc_streq(argv[i], "FORCE"))
            ;
        else {
            R_ERR(x, ERR_SYNTAX);
            return;
        }
    }
    if (!x->client) {          /* never from a replayed log */
        R_ERR(x, "ERR SHUTDOWN is not allowed here");
        return;
    }
    bks_log(BKS_LOG_WARNING, "User requested shutdown (%s)...",
            mode == BKS_SHUTDOWN_NOSAVE ? "nosave" : "save");
    bks_request_shutdown(mode);
    /* no reply: the connection closes with the server, as in Redis */
    bks_client_close_after_reply(x->client);
}

/*==========================================================================
 * CONFIG, INFO
 *==========================================================================*/

typedef struct config_pairs {
    strlist names, values;
} config_pairs;

static void config_collect(void *arg, const char *name, const char *value)
{
    config_pairs *p = arg;
    strlist_push(&p->names, name, strlen(name));
    strlist_push(&p->values, value, strlen(value));
}

static void cmd_config(hctx *x, int argc, const bkc_str *argv)
{
    if (bkc_streq(argv[1], "GET") && argc >= 3) {
        config_pairs p = {{0}, {0}};
        for (int i = 2; i < argc; i++)
            bks_config_get(&g_srv.cfg, argv[i].ptr, argv[i].len, config_collect, &p);
        R_MAP(x, p.names.n);
        for (size_t i = 0; i < p.names.n; i++) {
            R_BULK(x, p.names.s[i], p.names.len[i]);
            R_BULK(x, p.values.s[i], p.values.len[i]);
        }
        strlist_free(&p.names);
        strlist_free(&p.values);
    } else if (bkc_streq(argv[1], "RESETSTAT") && argc == 2) {
        bks_ops_reset();
        R_SIMPLE(x, "OK");
    } else if (bkc_streq(argv[1], "SET") && argc >= 4 && argc % 2 == 0) {
        bks_cmd_config_set(x->client, x->s, x->r, argc, argv);
    } else if (bkc_streq(argv[1], "REWRITE") && argc == 2) {
        bks_cmd_config_rewrite(x->client, x->s, x->r, argc, argv);
    } else {
        char buf[256];
        snprintf(buf, sizeof buf,
                 "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
                 "Try CONFIG HELP.",
                 (int)(argv[1].len > 64 ? 64 : argv[1].len), argv[1].ptr);
        R_ERR(x, buf);
    }
}

static void cmd_info(hctx *x, int argc, const bkc_str *argv)
{
    size_t len = 0;
    char *text = bks_info_text(x->s, argc, argv, &len);
    if (!text) {
        R_ERR(x, "ERR out of memory");
        return;
    }
    R_BULK(x, text, len);
    free(text);
}

/*==========================================================================
 * The host command table
 *==========================================================================*/

typedef void (*host_fn)(hctx *x, int argc, const bkc_str *argv);

#define HC_NOAUTH 1u   /* allowed before AUTH */
#define HC_WRITE 2u    /* refused once the log cannot be written */
#define HC_TXN 4u      /* runs at once even after MULTI (multi.c) */
#define HC_NOMULTI 8u  /* refused inside MULTI: it would split the transaction's log */

typedef struct host_cmd {
    const char *name;   /* lower case, sorted */
    int arity;
    unsigned flags;
    host_fn fn;
    const char *summary;
} host_cmd;

/* The ops commands live in opscmd.c and dump.c (ops.h). */
#define OPS_CMD(name)                                                   \
    static void cmd_##name(hctx *x, int argc, const bkc_str *argv)      \
    {                                                                   \
        bks_cmd_##name(x->client, x->s, x->r, argc, argv);              \
    }
OPS_CMD(cluster)
OPS_CMD(debug)
OPS_CMD(dump)
OPS_CMD(memory)
OPS_CMD(monitor)
OPS_CMD(restore)
OPS_CMD(slowlog)
#undef OPS_CMD

static const host_cmd host_cmds[] = {
    {"auth", -2, HC_NOAUTH, cmd_auth, "Authenticate the connection"},
    {"bgsave", -1, HC_NOMULTI, cmd_bgsave, "Save a snapshot in the background"},
    {"client", -2, 0, cmd_client, "Connection: ID, GETNAME, SETNAME, LIST, INFO"},
    {"cluster", -2, 0, cmd_cluster, "Cluster support is disabled (a standalone server)"},
    {"command", -1, 0, NULL, "Information about commands"},
    {"config", -2, 0, cmd_config, "CONFIG GET: the server's settings"},
    {"dbsize", 1, 0, cmd_dbsize, "Number of keys"},
    {"debug", -2, 0, cmd_debug, "DEBUG SLEEP | RELOAD | HELP"},
    {"del", -2, HC_WRITE, cmd_del, "Delete keys"},
    {"discard", 1, HC_TXN, cmd_txn, "Forget the commands queued since MULTI"},
    {"dump", 2, 0, cmd_dump, "Serialize a filter (Redis's DUMP format)"},
    {"echo", 2, 0, cmd_echo, "Return the argument"},
    {"exec", -1, HC_TXN, cmd_txn, "Run the commands queued since MULTI, all at once"},
    {"exists", -2, 0, cmd_exists, "Count the keys that exist"},
    {"expire", -3, HC_WRITE, cmd_expire, "Set a key's time to live in seconds"},
    {"expireat", -3, HC_WRITE, cmd_expire, "Set a key's expiry as a UNIX time in seconds"},
    {"flushall", -1, HC_WRITE, cmd_flushall, "Delete every key"},
    {"flushdb", -1, HC_WRITE, cmd_flushall, "Delete every key"},
    {"hello", -1, HC_NOAUTH, cmd_hello, "Handshake: protocol version, auth, name"},
    {"info", -1, 0, cmd_info, "Information and statistics about the server"},
    {"keys", 2, 0, cmd_keys, "Keys matching a pattern"},
    {"lastsave", 1, 0, cmd_lastsave, "UNIX time of the last successful save"},
    {"memory", -2, 0, cmd_memory, "MEMORY USAGE | STATS | DOCTOR | HELP"},
    {"monitor", 1, 0, cmd_monitor, "Stream every command the server runs"},
    {"multi", 1, HC_TXN, cmd_txn, "Start a transaction: queue commands until EXEC"},
    {"persist", 2, HC_WRITE, cmd_persist, "Remove a key's expiry"},
    {"pexpire", -3, HC_WRITE, cmd_expire, "Set a key's time to live in milliseconds"},
    {"pexpireat", -3, HC_WRITE, cmd_expire, "Set a key's expiry as a UNIX time in ms"},
    {"ping", -1, 0, cmd_ping, "Ping the server"},
    {"pttl", 2, 0, cmd_ttl, "A key's time to live in milliseconds"},
    {"quit", -1, HC_NOAUTH | HC_TXN, cmd_quit, "Close the connection"},
    {"rename", 3, HC_WRITE, cmd_rename, "Rename a key"},
    {"renamenx", 3, HC_WRITE, cmd_rename, "Rename a key if the new name is free"},
    {"restore", -4, HC_WRITE, cmd_restore, "Create a key from a DUMP payload"},
    {"save", 1, HC_NOMULTI, cmd_save, "Save a snapshot now"},
    {"scan", -2, 0, cmd_scan, "Iterate over the keys"},
    {"select", 2, 0, cmd_select, "Select database 0 (the only one)"},
    {"shutdown", -1, HC_NOMULTI, cmd_shutdown, "Save (unless NOSAVE) and stop the server"},
    {"slowlog", -2, 0, cmd_slowlog, "SLOWLOG GET | LEN | RESET"},
    {"time", 1, 0, cmd_time, "The server's time"},
    {"ttl", 2, 0, cmd_ttl, "A key's time to live in seconds"},
    {"type", 2, 0, cmd_type, "The type of a key's value"},
    {"unlink", -2, HC_WRITE, cmd_del, "Delete keys"},
    {"unwatch", 1, 0, cmd_txn, "Forget every WATCHed key"},
    {"watch", -2, HC_TXN, cmd_txn, "Make EXEC fail if one of these keys changes"},
};
#define NHOST (sizeof host_cmds / sizeof host_cmds[0])

_Static_assert(NHOST <= BKC_NAMES_MAX, "the host command table outgrew its name index");
static bkc_names host_names = BKC_NAMES_INIT(host_cmds);

static const host_cmd *host_lookup(bkc_str name)
{
    long i = bkc_names_find(&host_names, name);
    return i < 0 ? NULL : &host_cmds[i];
}

/*==========================================================================
 * COMMAND
 *==========================================================================*/

/* One command as COMMAND describes it: the command layer's table entry, or
 * a host command of ours that the table lacks. */
typedef struct cmd_desc {
    const char *name;
    int arity;
    unsigned flags;     /* BKC_CMD_* */
    int first, last, step;
    const char *summary;
} cmd_desc;

static size_t all_commands(cmd_desc *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < bkc_command_count && n < cap; i++) {
        const bkc_command *c = &bkc_command_table[i];
        if ((c->flags & BKC_CMD_HOST) && !host_lookup((bkc_str){c->name, strlen(c->name)}))
            continue;   /* a host command we do not implement */
        out[n++] = (cmd_desc){c->name, c->arity, c->flags, c->first_key, c->last_key,
                              c->key_step, c->summary};
    }
    for (size_t i = 0; i < NHOST && n < cap; i++) {
        const host_cmd *h = &host_cmds[i];
        if (bkc_lookup((bkc_str){h->name, strlen(h->name)}))
            continue;
        int keyed = strstr("expireat pexpireat renamenx dump restore", h->name) != NULL;
        out[n++] = (cmd_desc){h->name, h->arity,
                              BKC_CMD_HOST | ((h->flags & HC_WRITE) ? BKC_CMD_WRITE : 0),
                              keyed, keyed ? (!strcmp(h->name, "renamenx") ? 2 : 1) : 0, keyed,
                              h->summary};
    }
    return n;
}

static void reply_command_info(hctx *x, const cmd_desc *d)
{
    R_ARRAY(x, 10);
    R_CSTR(x, d->name);
    R_INT(x, d->arity);
    size_t nf = !!(d->flags & BKC_CMD_WRITE) + !!(d->flags & BKC_CMD_READONLY) +
                !!(d->flags & BKC_CMD_DENYOOM) + !!(d->flags & BKC_CMD_FAST);
    R_ARRAY(x, nf);
    if (d->flags & BKC_CMD_WRITE) R_SIMPLE(x, "write");
    if (d->flags & BKC_CMD_READONLY) R_SIMPLE(x, "readonly");
    if (d->flags & BKC_CMD_DENYOOM) R_SIMPLE(x, "denyoom");
    if (d->flags & BKC_CMD_FAST) R_SIMPLE(x, "fast");
    R_INT(x, d->first);
    R_INT(x, d->last);
    R_INT(x, d->step);
    R_ARRAY(x, 0);  /* ACL categories */
    R_ARRAY(x, 0);  /* tips */
    R_ARRAY(x, 0);  /* key specs */
    R_ARRAY(x, 0);  /* subcommands */
}

static const char *command_group(const char *name)
{
    if (!strncmp(name, "bf.", 3)) return "bf";
    if (!strncmp(name, "cf.", 3)) return "cf";
    if (!strncmp(name, "cbf.", 4)) return "cbf";
    if (!strncmp(name, "wf.", 3)) return "wf";
    if (!strncmp(name, "sf.", 3)) return "sf";
    if (strstr("auth client echo hello ping quit select", name)) return "connection";
    if (strstr("bgsave command config dbsize flushall flushdb info lastsave save shutdown time",
               name))
        return "server";
    return "generic";
}

static void reply_command_docs(hctx *x, const cmd_desc *d)
{
    R_CSTR(x, d->name);
    R_MAP(x, 4);
    R_CSTR(x, "summary");
    R_CSTR(x, d->summary ? d->summary : "");
    R_CSTR(x, "since");
    R_CSTR(x, "1.0.0");
    R_CSTR(x, "group");
    R_CSTR(x, command_group(d->name));
    R_CSTR(x, "complexity");
    R_CSTR(x, (d->flags & BKC_CMD_FAST) ? "O(1) per item" : "O(N)");
}

static const cmd_desc *find_desc(const cmd_desc *all, size_t n, bkc_str name)
{
    for (size_t i = 0; i < n; i++)
        if (str_eq_nocase((bkc_str){all[i].name, strlen(all[i].name)}, name))
            return &all[i];
    return NULL;
}

static void cmd_command(hctx *x, int argc, const bkc_str *argv)
{
    size_t cap = bkc_command_count + NHOST;
    cmd_desc *all = malloc(cap * sizeof *all);
    if (!all) {
        R_ERR(x, "ERR out of memory");
        return;
    }
    size_t n = all_commands(all, cap);
    if (argc == 1) {
        R_ARRAY(x, n);
        for (size_t i = 0; i < n; i++)
            reply_command_info(x, &all[i]);
    } else if (bkc_streq(argv[1], "COUNT") && argc == 2) {
        R_INT(x, (long long)n);
    } else if (bkc_streq(argv[1], "LIST")) {
        R_ARRAY(x, n);
        for (size_t i = 0; i < n; i++)
            R_CSTR(x, all[i].name);
    } else if (bkc_streq(argv[1], "INFO")) {
        if (argc == 2) {
            R_ARRAY(x, n);
            for (size_t i = 0; i < n; i++)
                reply_command_info(x, &all[i]);
        } else {
            R_ARRAY(x, (size_t)argc - 2);
            for (int i = 2; i < argc; i++) {
                const cmd_desc *d = find_desc(all, n, argv[i]);
                if (d)
                    reply_command_info(x, d);
                else
                    R_NULL(x);
            }
        }
    } else if (bkc_streq(argv[1], "DOCS")) {
        if (argc == 2) {
            R_MAP(x, n);
            for (size_t i = 0; i < n; i++)
                reply_command_docs(x, &all[i]);
        } else {
            size_t found = 0;
            for (int i = 2; i < argc; i++)
                found += find_desc(all, n, argv[i]) != NULL;
            R_MAP(x, found);
            for (int i = 2; i < argc; i++) {
                const cmd_desc *d = find_desc(all, n, argv[i]);
                if (d)
                    reply_command_docs(x, d);
            }
        }
    } else {
        char buf[256];
        snprintf(buf, sizeof buf,
                 "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
                 "Try COMMAND HELP.",
                 (int)(argv[1].len > 64 ? 64 : argv[1].len), argv[1].ptr);
        R_ERR(x, buf);
    }
    free(all);
}

/*==========================================================================
 * Execution
 *==========================================================================*/

static void refuse_write(bkc_reply *r)
{
    r->vt->error(r, "MISCONF Errors writing to the append-only log: writes are refused "
                    "(see the server log)");
}

static int is_write_command(bkc_str name)
{
    const bkc_command *c = bkc_lookup(name);
    return c && (c->flags & BKC_CMD_WRITE);
}

/* After MULTI: a request is checked as it would be run (a known command,
 * its arity, allowed in a transaction) and queued with +QUEUED; a refused
 * one gets its error and marks the transaction for EXECABORT (Redis). */
static void queue_request(bks_client *c, bks_session *s, bkc_reply *r, int resp,
                          const host_cmd *h, int argc, const bkc_str *argv)
{
    if (h) {
        hctx x = {c, s, r, resp};
        if ((h->arity > 0 && argc != h->arity) || (h->arity < 0 && argc < -h->arity)) {
            arity_error(&x, h->name);
            bks_multi_flag_dirty(c);
            return;
        }
        if (h->flags & HC_NOMULTI) {
            R_ERR(&x, "ERR Command not allowed inside a transaction");
            bks_multi_flag_dirty(c);
            return;
        }
    } else {
        bkc_ctx ctx = {r, &bks_host_vt, s, resp, bks_now_ms()};
        const bkc_command *cmd = bkc_lookup(argv[0]);
        if (!cmd || !cmd->handler) {
            bkc_reply_unknown(&ctx, argc, argv);
            bks_multi_flag_dirty(c);
            return;
        }
        if (!bkc_check_arity(&ctx, cmd, argc)) {
            bks_multi_flag_dirty(c);
            return;
        }
    }
    if (bks_multi_queue(c, argc, argv) < 0) {
        r->vt->error(r, "ERR out of memory: the transaction is too large");
        bks_multi_flag_dirty(c);
        return;
    }
    r->vt->simple(r, "QUEUED");
}

static void execute_one(bks_client *c, bks_session *s, bkc_reply *r, int resp, int argc,
                        const bkc_str *argv)
{
    if (argc < 1)
        return;
    bks_tl_cmd_ms = 0; /* a host command's records take the wall clock */
    atomic_fetch_add_explicit(&g_srv.total_commands, 1, memory_order_relaxed);
    const host_cmd *h = host_lookup(argv[0]);
    if (c && g_srv.cfg.requirepass[0] && !bks_client_authed(c) &&
        !(h && (h->flags & HC_NOAUTH))) {
        r->vt->error(r, "NOAUTH Authentication required.");
        return;
    }
    if (c && bks_multi_queueing(c) && !(h && (h->flags & HC_TXN))) {
        queue_request(c, s, r, resp, h, argc, argv);
        return;
    }
    if (h) {
        hctx x = {c, s, r, resp};
        if ((h->arity > 0 && argc != h->arity) || (h->arity < 0 && argc < -h->arity)) {
            arity_error(&x, h->name);
            return;
        }
        if ((h->flags & HC_WRITE) && atomic_load(&g_srv.write_error)) {
            refuse_write(r);
            return;
        }
        if (h->fn)
            h->fn(&x, argc, argv);
        else
            cmd_command(&x, argc, argv);
        return;
    }
    if (atomic_load_explicit(&g_srv.write_error, memory_order_relaxed) &&
        is_write_command(argv[0])) {
        refuse_write(r);
        return;
    }
    bkc_ctx ctx = {r, &bks_host_vt, s, resp, command_clock()};
    bkc_dispatch(&ctx, argc, argv);
}

/* The canonical name of a command (a static string, NULL: unknown) for its
 * statistics. Clients repeat the same command, so the last answer of each
 * thread is kept: a hit costs one short memcmp instead of the two table
 * searches (about 300 instructions, measured with callgrind). */
static const char *stats_name(bkc_str name)
{
    static _Thread_local char last[24];
    static _Thread_local size_t last_len = SIZE_MAX;
    static _Thread_local const char *last_canon;
    if (name.len == last_len && !memcmp(name.ptr, last, name.len))
        return last_canon;
    const host_cmd *h = host_lookup(name);
    const bkc_command *cmd = h ? NULL : bkc_lookup(name);
    const char *canon = h ? h->name : cmd ? cmd->name : NULL;
    if (name.len < sizeof last) {
        memcpy(last, name.ptr, name.len);
        last_len = name.len;
        last_canon = canon;
    }
    return canon;
}

/* A client's command: executed, then counted (INFO commandstats, errorstats),
 * slow-logged and shown to MONITOR clients (ops.c). The error, if any, is
 * read back from the encoded reply. */
void bks_execute(bks_client *c, bks_session *s, bkc_reply *r, int resp, int argc,
                 const bkc_str *argv)
{
    if (!c || argc < 1) {
        execute_one(c, s, r, resp, argc, argv);
        return;
    }
    bks_outbuf *out = r->vt == &bks_reply_vt ? ((bks_encoder *)r->impl)->out : NULL;
    size_t mark = out ? out->len : 0;
    uint64_t start = bks_ops_clock_us();
    execute_one(c, s, r, resp, argc, argv);
    const char *err = NULL;
    size_t errlen = 0;
    if (out && out->len > mark && !out->oom && out->p[mark] == '-') {
        err = out->p + mark + 1;
        const char *eol = memchr(err, '\r', out->len - mark - 1);
        errlen = eol ? (size_t)(eol - err) : out->len - mark - 1;
    }
    bks_ops_record(c, stats_name(argv[0]), 1, argc, argv, start, err, errlen);
}

/*--------------------------------------------------------------------------
 * Pipelines: runs of BF.ADD, BF.EXISTS, CF.ADD(NX), CF.EXISTS on one key
 *--------------------------------------------------------------------------*/

/* A reply sink that drops the top-level array header of a BF.MADD /
 * BF.MEXISTS reply and forwards each element as a reply of its own. */
typedef struct split_sink {
    bkc_reply *real;
    size_t expected;
    size_t forwarded;
    int started;     /* saw the array header */
    int bad;         /* got something else: run the requests one by one */
    int depth;       /* nested aggregates being forwarded */
    size_t pending;  /* elements left in the nested aggregate */
} split_sink;

#define SPLIT(r) ((split_sink *)(r)->impl)

static int split_elem(bkc_reply *r)
{
    split_sink *s = SPLIT(r);
    if (!s->started) {
        s->bad = 1;
        return 0;
    }
    if (s->bad)
        return 0;
    s->forwarded++;
    return 1;
}

static void split_simple(bkc_reply *r, const char *t)
{ if (split_elem(r)) SPLIT(r)->real->vt->simple(SPLIT(r)->real, t); }
static void split_error(bkc_reply *r, const char *t)
{ if (split_elem(r)) SPLIT(r)->real->vt->error(SPLIT(r)->real, t); }
static void split_integer(bkc_reply *r, long long v)
{ if (split_elem(r)) SPLIT(r)->real->vt->integer(SPLIT(r)->real, v); }
static void split_bulk(bkc_reply *r, const void *p, size_t n)
{ if (split_elem(r)) SPLIT(r)->real->vt->bulk(SPLIT(r)->real, p, n); }
static void split_null(bkc_reply *r)
{ if (split_elem(r)) SPLIT(r)->real->vt->null(SPLIT(r)->real); }
static void split_dbl(bkc_reply *r, double d)
{ if (split_elem(r)) SPLIT(r)->real->vt->dbl(SPLIT(r)->real, d); }
static void split_bool(bkc_reply *r, int v)
{ if (split_elem(r)) SPLIT(r)->real->vt->boolean(SPLIT(r)->real, v); }
static void split_array(bkc_reply *r, size_t n)
{
    split_sink *s = SPLIT(r);
    if (!s->started && !s->bad && n <= s->expected) {
        s->started = 1;
        return;
    }
    s->bad = 1;   /* nested aggregates are not expected in these replies */
}
static void split_map(bkc_reply *r, size_t n)
{
    (void)n;
    SPLIT(r)->bad = 1;
}

static const bkc_reply_vt split_vt = {split_simple, split_error, split_integer, split_bulk,
                                      split_null, split_array, split_map, split_dbl,
                                      split_bool};

static int is_cmd(bkc_str s, const char *name, size_t len)
{
    return s.len == len && !strncasecmp(s.ptr, name, len);
}

/* Runs of one command on one key that a batch takes as one. */
typedef enum run_kind {
    RUN_NONE,
    RUN_BF_ADD,     /* as BF.MADD */
    RUN_BF_EXISTS,  /* as BF.MEXISTS */
    RUN_CF_EXISTS,  /* as CF.MEXISTS */
    RUN_CF_ADD,     /* bkc_cf_add_many */
    RUN_CF_ADDNX
} run_kind;

static run_kind run_kind_of(bkc_str name)
{
    if (is_cmd(name, "bf.add", 6)) return RUN_BF_ADD;
    if (is_cmd(name, "bf.exists", 9)) return RUN_BF_EXISTS;
    if (is_cmd(name, "cf.add", 6)) return RUN_CF_ADD;
    if (is_cmd(name, "cf.exists", 9)) return RUN_CF_EXISTS;
    if (is_cmd(name, "cf.addnx", 8)) return RUN_CF_ADDNX;
    return RUN_NONE;
}

/* Run requests [i, j) (all CF.ADD or all CF.ADDNX on one key) with the key
 * opened once. */
static void run_cf_adds(bks_client *c, bks_session *s, bks_outbuf *out, int resp,
                        const bkc_str *const *argvs, int i, int j, int nx)
{
    size_t n = (size_t)(j - i);
    bks_encoder enc;
    bkc_reply real;
    bks_reply_init(&real, &enc, out, resp);
    size_t mark = out->len;
    bks_tl_log_failed = 0;
    atomic_fetch_add_explicit(&g_srv.total_commands, n, memory_order_relaxed);
    bkc_ctx ctx = {&real, &bks_host_vt, s, resp, command_clock()};
    uint64_t start = bks_ops_clock_us();
    bkc_cf_add_many(&ctx, argvs + i, n, nx);
    if (c) {
        /* Each reply is one line: an error counts as its own failed call
         * (INFO errorstats), the others together. */
        const char *name = bkc_lookup(argvs[i][0])->name;
        size_t ok = n, at = mark;
        while (at < out->len && !out->oom) {
            const char *line = out->p + at;
            const char *eol = memchr(line, '\n', out->len - at);
            size_t len = eol ? (size_t)(eol - line) + 1 : out->len - at;
            if (line[0] == '-' && ok > 0) {
                ok--;
                bks_ops_record(c, name, 1, 3, argvs[i], start, line + 1,
                               len >= 3 ? len - 3 : 0);
            }
            at += len;
        }
        if (ok)
            bks_ops_record(c, name, ok, 3, argvs[i], start, NULL, 0);
    }
    if (bks_tl_log_failed) {
        out->len = mark;
        for (size_t k = 0; k < n; k++)
            refuse_write(&real);
    }
}

/* Run requests [i, j) (all BF.ADD, all BF.EXISTS or all CF.EXISTS on one
 * key) as one batched command. */
static void run_coalesced(bks_client *c, bks_session *s, bks_outbuf *out, int resp,
                          const int *argcs, const bkc_str *const *argvs, int i, int j,
                          run_kind kind)
{
    size_t n = (size_t)(j - i);
    bkc_str stack[130];
    bkc_str *argv = n + 2 <= sizeof stack / sizeof stack[0] ? stack
                                                            : malloc((n + 2) * sizeof *argv);
    bks_encoder enc;
    bkc_reply real;
    bks_reply_init(&real, &enc, out, resp);
    if (!argv) {
        for (int k = i; k < j; k++)
            bks_execute(c, s, &real, resp, argcs[k], argvs[k]);
        return;
    }
    argv[0] = kind == RUN_BF_ADD      ? (bkc_str){"BF.MADD", 7}
              : kind == RUN_BF_EXISTS ? (bkc_str){"BF.MEXISTS", 10}
                                      : (bkc_str){"CF.MEXISTS", 10};
    argv[1] = argvs[i][1];
    for (size_t k = 0; k < n; k++)
        argv[2 + k] = argvs[i + (int)k][2];
    split_sink sink = {.real = &real, .expected = n};
    bkc_reply r = {&split_vt, &sink};
    size_t mark = out->len;
    bks_tl_log_failed = 0;
    atomic_fetch_add_explicit(&g_srv.total_commands, n - 1, memory_order_relaxed);
    bkc_ctx ctx = {&r, &bks_host_vt, s, resp, command_clock()};
    uint64_t start = bks_ops_clock_us();
    bkc_dispatch(&ctx, (int)n + 2, argv);
    if (c && !sink.bad)
        bks_ops_record(c, bkc_lookup(argvs[i][0])->name, n, (int)n + 2, argv, start, NULL, 0);
    if (argv != stack)
        free(argv);
    if (bks_tl_log_failed) {
        out->len = mark;
        for (size_t k = 0; k < n; k++)
            refuse_write(&real);
        return;
    }
    if (sink.bad && sink.forwarded) {
        /* cannot happen with BF.MADD/BF.MEXISTS; keep the stream sane */
        sink.forwarded = n;
    }
    for (int k = i + (int)sink.forwarded; k < j; k++)
        bks_execute(c, s, &real, resp, argcs[k], argvs[k]);
}

/* The batch's answers that wait on its log records (at most SPANS_MAX
 * kept here; then they are settled, or moved to the caller's wait). */
#define SPANS_MAX 256

/* Replace each answer the spans cover with the MISCONF error, keeping the
 * bytes between them. */
static void refuse_spans(bks_outbuf *out, const bks_log_span *sp, int n)
{
    if (n == 0)
        return;
    size_t from = sp[0].start, tail = out->len - from;
    char *keep = malloc(tail ? tail : 1);
    if (!keep) {
        out->oom = 1;   /* the client is dropped: no answer is wrong */
        return;
    }
    memcpy(keep, out->p + from, tail);
    out->len = from;
    size_t at = from;   /* the next byte of the old output to copy */
    for (int k = 0; k < n; k++) {
        bks_outbuf_append(out, keep + (at - from), sp[k].start - at);
        bks_encoder enc;
        bkc_reply r;
        bks_reply_init(&r, &enc, out, sp[k].resp);
        for (int m = 0; m < sp[k].n; m++)
            refuse_write(&r);
        at = sp[k].end;
    }
    bks_outbuf_append(out, keep + (at - from), from + tail - at);
    free(keep);
}

void bks_log_release(bks_outbuf *out, bks_log_wait *w)
{
    if (w->n == 0)
        return;
    if (bks_log_wait_ticket(w->ticket) < 0)
        refuse_spans(out, w->v, w->n);
    w->n = 0;
    w->ticket = 0;
}

/* Wait now for the batch's records (and the thread's earlier ones); on
 * failure its answers become MISCONF. Empties spans. */
static void settle_batch(bks_outbuf *out, bks_log_span *sp, int *nsp)
{
    int n = *nsp;
    *nsp = 0;
    if (bks_log_settle() < 0)
        refuse_spans(out, sp, n);
}

/* Hand the batch's spans to the caller's wait (its answers go out once it
 * has waited); when they cannot be kept, wait now. */
static void defer_batch(bks_outbuf *out, bks_log_span *sp, int *nsp, bks_log_wait *w)
{
    if (*nsp == 0)
        return;
    if (w->n + *nsp > SPANS_MAX) {
        /* A client that pipelines a lot waits now, in steps of SPANS_MAX
         * answers: its records never pile up in the log's buffer (nor its
         * spans here) for the whole of a large read. */
        bks_log_release(out, w);
        settle_batch(out, sp, nsp);
        return;
    }
    if (w->n + *nsp > w->cap) {
        int cap = w->cap ? w->cap : 16;
        while (cap < w->n + *nsp)
            cap *= 2;
        bks_log_span *v = realloc(w->v, (size_t)cap * sizeof *v);
        if (!v) {
            bks_log_release(out, w);
            settle_batch(out, sp, nsp);
            return;
        }
        w->v = v;
        w->cap = cap;
    }
    memcpy(w->v + w->n, sp, (size_t)*nsp * sizeof *sp);
    w->n += *nsp;
    w->ticket = bks_tl_log_ticket;
    *nsp = 0;
}

/* After a request (or a coalesced run of n) whose answers start at mark:
 * when it appended to the log, its answers wait for the record. */
static void note_span(bks_outbuf *out, bks_log_span *sp, int *nsp, uint64_t before,
                      size_t mark, int n, int resp, bks_log_wait *w)
{
    if (bks_tl_log_ticket == before || bks_tl_log_ticket == 0)
        return;
    if (*nsp == SPANS_MAX) {   /* earlier answers settled or handed over; now this one's */
        if (w)
            defer_batch(out, sp, nsp, w);
        else
            settle_batch(out, sp, nsp);
    }
    sp[*nsp] = (bks_log_span){mark, out->len, n, resp};
    ++*nsp;
}

int bks_execute_batch(bks_client *c, bks_session *s, bks_outbuf *out, int resp,
                      int nreq, const int *argcs, const bkc_str *const *argvs, size_t out_stop,
                      bks_log_wait *wait)
{
    bks_encoder enc;
    bkc_reply r;
    bks_log_span spans[SPANS_MAX];
    int nspans = 0;
    /* MONITOR shows each request as sent: no coalescing while one watches */
    int can_batch = !(c && g_srv.cfg.requirepass[0] && !bks_client_authed(c)) &&
                    atomic_load_explicit(&bks_monitors, memory_order_relaxed) == 0;
    int i = 0;
    while (i < nreq) {
        if (c && bks_client_closing(c))
            break;         /* QUIT, SHUTDOWN: nothing after it runs */
        if (out->len >= out_stop)
            break;         /* the rest waits until the client reads (net.c) */
        run_kind kind = RUN_NONE;
        uint64_t before = bks_tl_log_ticket;
        size_t mark = out->len;
        /* after MULTI every request is queued, one by one */
        if (can_batch && argcs[i] == 3 && !bks_multi_queueing(c) &&
            (kind = run_kind_of(argvs[i][0])) != RUN_NONE) {
            int j = i + 1;
            while (j < nreq && argcs[j] == 3 && argvs[j][0].len == argvs[i][0].len &&
                   !strncasecmp(argvs[j][0].ptr, argvs[i][0].ptr, argvs[i][0].len) &&
                   argvs[j][1].len == argvs[i][1].len &&
                   !memcmp(argvs[j][1].ptr, argvs[i][1].ptr, argvs[i][1].len))
                j++;
            int writes = kind == RUN_BF_ADD || kind == RUN_CF_ADD || kind == RUN_CF_ADDNX;
            if (j - i >= 2 && !(writes && atomic_load(&g_srv.write_error))) {
                int cur = c ? bks_client_resp(c) : resp;
                if (kind == RUN_CF_ADD || kind == RUN_CF_ADDNX)
                    run_cf_adds(c, s, out, cur, argvs, i, j, kind == RUN_CF_ADDNX);
                else
                    run_coalesced(c, s, out, cur, argcs, argvs, i, j, kind);
                note_span(out, spans, &nspans, before, mark, j - i, cur, wait);
                i = j;
                continue;
            }
        }
        /* resp may change (HELLO): read it per request */
        int cur = c ? bks_client_resp(c) : resp;
        bks_reply_init(&r, &enc, out, cur);
        bks_tl_log_failed = 0;
        bks_execute(c, s, &r, cur, argcs[i], argvs[i]);
        if (bks_tl_log_failed) {
            out->len = mark;
            refuse_write(&r);
        } else {
            note_span(out, spans, &nspans, before, mark, 1, cur, wait);
        }
        i++;
    }
    if (c && bks_client_closing(c))
        i = nreq;
    if (wait)
        defer_batch(out, spans, &nspans, wait);
    else
        settle_batch(out, spans, &nspans);
    return i;
}
