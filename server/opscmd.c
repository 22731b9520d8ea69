/*
 * opscmd.c - the commands operators and their tools use: MEMORY, SLOWLOG,
 * DEBUG, MONITOR, CONFIG SET / REWRITE, CLIENT KILL.
 *
 * Replies and error texts follow Redis 7 where Redis has the command, so
 * that redis-cli (--memkeys, --bigkeys, --stat), client libraries and
 * monitoring agents work unchanged. What bloomkit-server cannot do is
 * refused with an error saying so, never answered with made-up data.
 */
#include <math.h>   /* isfinite */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>   /* nanosleep */

#include "ops.h"

#define R_SIMPLE(s) r->vt->simple(r, (s))
#define R_ERR(s) r->vt->error(r, (s))
#define R_INT(v) r->vt->integer(r, (v))
#define R_BULK(p, n) r->vt->bulk(r, (p), (n))
#define R_CSTR(s) r->vt->bulk(r, (s), strlen(s))
#define R_NULL() r->vt->null(r)
#define R_ARRAY(n) r->vt->array(r, (n))
#define R_MAP(n) r->vt->map(r, (n))

static void unknown_subcommand(bkc_reply *r, bkc_str sub, const char *cmd)
{
    char buf[256];
    snprintf(buf, sizeof buf,
             "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try %s HELP.",
             (int)(sub.len > 64 ? 64 : sub.len), sub.ptr, cmd);
    R_ERR(buf);
}

static void reply_help(bkc_reply *r, const char *const *lines, size_t n)
{
    R_ARRAY(n);
    for (size_t i = 0; i < n; i++)
        R_SIMPLE(lines[i]);
}

/* A NUL-terminated copy of an argument, or NULL if it does not fit. */
static const char *arg_cstr(bkc_str a, char *buf, size_t cap)
{
    if (a.len >= cap || memchr(a.ptr, '\0', a.len))
        return NULL;
    memcpy(buf, a.ptr, a.len);
    buf[a.len] = '\0';
    return buf;
}

/*==========================================================================
 * MEMORY
 *==========================================================================*/

void bks_cmd_memory(bks_client *c, bks_session *s, bkc_reply *r, int argc, const bkc_str *argv)
{
    (void)c;
    bkc_str sub = argv[1];
    if (bkc_streq(sub, "USAGE") && (argc == 3 || argc == 5)) {
        if (argc == 5) {
            long long samples;
            if (!bkc_streq(argv[3], "SAMPLES")) {
                R_ERR("ERR syntax error");
                return;
            }
            if (!bkc_parse_ll(argv[4], &samples) || samples < 0) {
                R_ERR("ERR value is not an integer or out of range");
                return;
            }
            /* a filter is one allocation per stage: counted exactly, not sampled */
        }
        bkc_key *k = bks_host_vt.open(s, argv[2], BKC_OPEN_READ);
        if (!k) {   /* a key found corrupt in its snapshot file says so */
            const char *why = bks_host_vt.open_error(s);
            R_ERR(why ? why : "ERR out of memory");
            return;
        }
        bkc_value *v = bks_host_vt.value(k);
        if (!v || v->kind == BKC_KIND_LOADING) {
            bks_host_vt.close(k);
            R_NULL();
            return;
        }
        /* what the key is counted for in used_memory, and its pointer in
         * the bucket arrays (counted there: one to two per key) */
        size_t bytes = bks_ks_key_bytes(k) + sizeof(void *);
        /* and a filter used in place from its snapshot file (map-threshold):
         * not in used_memory (INFO counts it as mapped), but in RAM as it is
         * read. Tools size a key by this (bloomkit copy moves keys above
         * --chunk-threshold by chunks: a DUMP of a mapped 1 GB filter
         * would pass client-output-buffer-limit). */
        if (v->kind != BKC_KIND_KEYSET)
            for (uint32_t i = 0; i < v->nfilters; i++)
                bytes += bk_filter_mapped_bytes(v->filters[i]);
        bks_host_vt.close(k);
        R_INT((long long)bytes);
    } else if (bkc_streq(sub, "STATS") && argc == 2) {
        uint64_t used = bks_keyspace_memory(s->ks);
        uint64_t keys = bks_keyspace_size(s->ks);
        R_MAP(5);
        R_CSTR("total.allocated");
        R_INT((long long)used);
        R_CSTR("dataset.bytes");
        R_INT((long long)used);
        R_CSTR("keys.count");
        R_INT((long long)keys);
        R_CSTR("keys.bytes-per-key");
        R_INT(keys ? (long long)(used / keys) : 0);
        R_CSTR("maxmemory");
        R_INT((long long)__atomic_load_n(&g_srv.cfg.maxmemory, __ATOMIC_RELAXED));
    } else if (bkc_streq(sub, "DOCTOR") && argc == 2) {
        uint64_t used = bks_keyspace_memory(s->ks);
        uint64_t maxmem = __atomic_load_n(&g_srv.cfg.maxmemory, __ATOMIC_RELAXED);
        char hu[32], hm[32], text[512];
        bks_human_bytes(hu, sizeof hu, used);
        bks_human_bytes(hm, sizeof hm, maxmem);
        if (maxmem && used > maxmem / 10 * 9)
            snprintf(text, sizeof text,
                     "Filters use %s of maxmemory %s (over 90%%): new filters and growth "
                     "will soon be refused. Raise maxmemory (CONFIG SET maxmemory) or "
                     "delete filters.",
                     hu, hm);
        else
            snprintf(text, sizeof text,
                     "No memory problem found: filters use %s%s%s.", hu,
                     maxmem ? " of maxmemory " : " (no maxmemory limit)", maxmem ? hm : "");
        R_CSTR(text);
    } else if (bkc_streq(sub, "HELP")) {
        static const char *const lines[] = {
            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "USAGE <key> [SAMPLES <count>]",
            "    Return the bytes a key and its value take.",
            "STATS", "    Return memory figures.",
            "DOCTOR", "    Say whether memory is running short."};
        reply_help(r, lines, sizeof lines / sizeof lines[0]);
    } else {
        unknown_subcommand(r, sub, "MEMORY");
    }
}

/*==========================================================================
 * SLOWLOG
 *==========================================================================*/

static void slow_entry_reply(void *arg, uint64_t id, uint64_t unix_s, uint64_t usec, int argc,
                             const bkc_str *argv, const char *addr, const char *name)
{
    bkc_reply *r = arg;
    R_ARRAY(6);
    R_INT((long long)id);
    R_INT((long long)unix_s);
    R_INT((long long)usec);
    R_ARRAY((size_t)argc);
    for (int i = 0; i < argc; i++)
        R_BULK(argv[i].ptr, argv[i].len);
    R_CSTR(addr);
    R_CSTR(name);
}

void bks_cmd_slowlog(bks_client *c, bks_session *s, bkc_reply *r, int argc, const bkc_str *argv)
{
    (void)c;
    (void)s;
    bkc_str sub = argv[1];
    if (bkc_streq(sub, "GET") && argc <= 3) {
        long long count = 10;
        if (argc == 3 && (!bkc_parse_ll(argv[2], &count) || count < -1)) {
            R_ERR("ERR count should be greater than or equal to -1");
            return;
        }
        uint64_t len = bks_slowlog_len();
        /* entries may be added meanwhile: the array length is fixed first */
        size_t n = count < 0 || (unsigned long long)count > len ? (size_t)len : (size_t)count;
        R_ARRAY(n);
        bks_slowlog_each((long long)n, slow_entry_reply, r);
    } else if (bkc_streq(sub, "LEN") && argc == 2) {
        R_INT((long long)bks_slowlog_len());
    } else if (bkc_streq(sub, "RESET") && argc == 2) {
        bks_slowlog_reset();
        R_SIMPLE("OK");
    } else if (bkc_streq(sub, "HELP")) {
        static const char *const lines[] = {
            "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN", "    Return the length of the slowlog.",
            "RESET", "    Reset the slowlog."};
        reply_help(r, lines, sizeof lines / sizeof lines[0]);
    } else {
        unknown_subcommand(r, sub, "SLOWLOG");
    }
}

/*==========================================================================
 * DEBUG
 *==========================================================================*/

void bks_cmd_debug(bks_client *c, bks_session *s, bkc_reply *r, int argc, const bkc_str *argv)
{
    (void)c;
    bkc_str sub = argv[1];
    if (bkc_streq(sub, "SLEEP") && argc == 3) {
        char buf[64];
        const char *t = arg_cstr(argv[2], buf, sizeof buf);
        char *end = NULL;
        double secs = t ? strtod(t, &end) : -1;
        if (!t || end == t || *end || !isfinite(secs) || secs < 0 || secs > 3600) {
            R_ERR("ERR DEBUG SLEEP wants seconds between 0 and 3600");
            return;
        }
        /* like Redis, the worker is blocked meanwhile (its clients wait) */
        struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
        while (nanosleep(&ts, &ts) != 0)
            ;
        R_SIMPLE("OK");
    } else if (bkc_streq(sub, "OBJECT") && argc == 3) {
        bkc_key *k = bks_host_vt.open(s, argv[2], BKC_OPEN_WHOLE);   /* it encodes */
        if (!k) {
            const char *why = bks_host_vt.open_error(s);
            R_ERR(why ? why : "ERR out of memory");
            return;
        }
        bkc_value *v = bks_host_vt.value(k);
        if (!v || v->kind == BKC_KIND_LOADING) {
            bks_host_vt.close(k);
            R_ERR("ERR no such key");
            return;
        }
        unsigned char *enc = NULL;
        size_t enc_len = 0;
        int rc = bkc_value_encode(v, &enc, &enc_len);
        char text[256];
        snprintf(text, sizeof text,
                 "Value at:%p refcount:1 encoding:%s serializedlength:%zu filters:%u "
                 "memory:%zu",
                 (void *)v, bkc_kind_type_name(v->kind), rc == BK_OK ? enc_len : 0,
                 v->nfilters, bkc_value_bytes(v));
        free(enc);
        bks_host_vt.close(k);
        R_SIMPLE(text);
    } else if (bkc_streq(sub, "RELOAD")) {
        R_ERR("ERR DEBUG RELOAD is not supported by bloomkit-server: use SAVE, then "
              "SHUTDOWN and start the server again");
    } else if (bkc_streq(sub, "HELP")) {
        static const char *const lines[] = {
            "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "SLEEP <seconds>",
            "    Stop the worker thread for <seconds> (decimals allowed).",
            "OBJECT <key>", "    Show low level info about the key.",
            "(other Redis DEBUG subcommands are not supported)"};
        reply_help(r, lines, sizeof lines / sizeof lines[0]);
    } else {
        char buf[256];
        snprintf(buf, sizeof buf,
                 "ERR DEBUG '%.*s' is not supported by bloomkit-server (see DEBUG HELP)",
                 (int)(sub.len > 64 ? 64 : sub.len), sub.ptr);
        R_ERR(buf);
    }
}

/*==========================================================================
 * MONITOR
 *==========================================================================*/

void bks_cmd_monitor(bks_client *c, bks_session *s, bkc_reply *r, int argc, const bkc_str *argv)
{
    (void)s;
    (void)argc;
    (void)argv;
    if (!c) {
        R_ERR("ERR MONITOR needs a client");
        return;
    }
    if (bks_client_monitor(c) < 0) {
        R_ERR("ERR out of memory");
        return;
    }
    R_SIMPLE("OK");
}

/*==========================================================================
 * CONFIG SET / REWRITE
 *==========================================================================*/

void bks_cmd_config_set(bks_client *c, bks_session *s, bkc_reply *r, int argc,
                        const bkc_str *argv)
{
    (void)c;
    (void)s;
    char err[512] = "";
    int rc = 0;
    bks_pause_all();
    for (int i = 2; i + 1 < argc && rc == 0; i += 2) {
        char name[128], value[1100];
        const char *n = arg_cstr(argv[i], name, sizeof name);
        const char *v = arg_cstr(argv[i + 1], value, sizeof value);
        if (!n) {
            snprintf(err, sizeof err, "ERR Unknown option or number of arguments for "
                                      "CONFIG SET - '%.*s'",
                     (int)(argv[i].len > 64 ? 64 : argv[i].len), argv[i].ptr);
            rc = -1;
        } else if (!v) {
            snprintf(err, sizeof err, "ERR CONFIG SET failed (possibly related to argument "
                                      "'%s') - the value is too long", n);
            rc = -1;
        } else {
            rc = bks_config_set(n, v, err, sizeof err);
        }
    }
    bks_resume_all();
    if (rc < 0)
        R_ERR(err);
    else
        R_SIMPLE("OK");
}

void bks_cmd_config_rewrite(bks_client *c, bks_session *s, bkc_reply *r, int argc,
                            const bkc_str *argv)
{
    (void)c;
    (void)s;
    (void)argc;
    (void)argv;
    if (!g_srv.config_file) {
        R_ERR("ERR The server is running without a config file");
        return;
    }
    char err[512];
    bks_pause_all();
    int rc = bks_config_rewrite(g_srv.config_file, err, sizeof err);
    bks_resume_all();
    if (rc < 0)
        R_ERR(err);
    else
        R_SIMPLE("OK");
}

/*==========================================================================
 * CLIENT KILL
 *==========================================================================*/

void bks_cmd_client_kill(bks_client *c, bks_session *s, bkc_reply *r, int argc,
                         const bkc_str *argv)
{
    (void)s;
    bks_kill_filter f = {0};
    char addr[128], laddr[128], user[128];
    f.skipme = 1;
    if (argc == 3) {
        /* CLIENT KILL ip:port: the old form, answers OK or an error */
        f.addr = arg_cstr(argv[2], addr, sizeof addr);
        f.skipme = 0;
        if (!f.addr || bks_clients_kill(c, &f) == 0)
            R_ERR("ERR No such client");
        else
            R_SIMPLE("OK");
        return;
    }
    if ((argc - 2) % 2) {
        R_ERR("ERR syntax error");
        return;
    }
    for (int i = 2; i < argc; i += 2) {
        bkc_str v = argv[i + 1];
        long long n;
        if (bkc_streq(argv[i], "ID")) {
            if (!bkc_parse_ll(v, &n) || n <= 0) {
                R_ERR("ERR client-id should be greater than 0");
                return;
            }
            f.id = (uint64_t)n;
        } else if (bkc_streq(argv[i], "ADDR")) {
            f.addr = arg_cstr(v, addr, sizeof addr);
            if (!f.addr) {
                R_ERR("ERR syntax error");
                return;
            }
        } else if (bkc_streq(argv[i], "LADDR")) {
            f.laddr = arg_cstr(v, laddr, sizeof laddr);
            if (!f.laddr) {
                R_ERR("ERR syntax error");
                return;
            }
        } else if (bkc_streq(argv[i], "USER")) {
            f.user = arg_cstr(v, user, sizeof user);
            if (!f.user || strcmp(f.user, "default")) {
                char buf[200];
                snprintf(buf, sizeof buf, "ERR No such user '%.*s'",
                         (int)(v.len > 64 ? 64 : v.len), v.ptr);
                R_ERR(buf);
                return;
            }
        } else if (bkc_streq(argv[i], "TYPE")) {
            if (bkc_streq(v, "normal"))
                f.type = 1;
            else if (bkc_streq(v, "master") || bkc_streq(v, "slave") ||
                     bkc_streq(v, "replica") || bkc_streq(v, "pubsub"))
                f.type = 2;     /* no such clients here */
            else {
                char buf[200];
                snprintf(buf, sizeof buf, "ERR Unknown client type '%.*s'",
                         (int)(v.len > 64 ? 64 : v.len), v.ptr);
                R_ERR(buf);
                return;
            }
        } else if (bkc_streq(argv[i], "SKIPME")) {
            if (bkc_streq(v, "yes"))
                f.skipme = 1;
            else if (bkc_streq(v, "no"))
                f.skipme = 0;
            else {
                R_ERR("ERR syntax error");
                return;
            }
        } else if (bkc_streq(argv[i], "MAXAGE")) {
            if (!bkc_parse_ll(v, &n) || n < 0) {
                R_ERR("ERR value is not an integer or out of range");
                return;
            }
            f.maxage = n;
        } else {
            R_ERR("ERR syntax error");
            return;
        }
    }
    R_INT((long long)bks_clients_kill(c, &f));
}

/*==========================================================================
 * CLUSTER
 *==========================================================================*/

/* A standalone server, as Redis without cluster-enabled answers: cluster
 * clients (redis-cli -c, bloomkit cluster, client libraries) then treat
 * this server as the one node holding every slot. */
void bks_cmd_cluster(bks_client *c, bks_session *s, bkc_reply *r, int argc, const bkc_str *argv)
{
    (void)c;
    (void)s;
    (void)argc;
    (void)argv;
    R_ERR("ERR This instance has cluster support disabled");
}
