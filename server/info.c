/*
 * info.c - INFO [section ...]: Redis's sections and field names for what
 * bloomkit-server has.
 *
 * Sections: server, clients, memory, persistence, stats, replication,
 * cpu, modules, commandstats, errorstats, cluster, keyspace. With no
 * argument (or "default") every section but commandstats and errorstats;
 * "all" and "everything" add those two. Several sections may be named
 * (Redis 7). Unknown names give an empty reply, as in Redis.
 *
 * Clients parse this text: python-redis splits "name:value" lines and
 * turns "a=1,b=2" values into dicts; redis-cli --stat reads
 * connected_clients, blocked_clients, used_memory, total_commands_processed
 * and total_connections_received (a missing one prints as the smallest
 * 64-bit integer), so every field here holds a real number.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>      /* strcasecmp */
#include <sys/resource.h> /* getrusage */
#include <sys/utsname.h>  /* uname: os */
#include <unistd.h>

#include "ops.h"

/*==========================================================================
 * A growable text
 *==========================================================================*/

typedef struct text {
    bks_outbuf b;
} text;

static void tprintf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tprintf(text *t, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        bks_outbuf_append(&t->b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        t->b.oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    bks_outbuf_append(&t->b, big, (size_t)n);
    free(big);
}

void bks_human_bytes(char *buf, size_t cap, uint64_t n)
{
    static const char *units[] = {"B", "K", "M", "G", "T", "P"};
    double d = (double)n;
    int i = 0;
    while (d >= 1024 && i < 5) {
        d /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(buf, cap, "%lluB", (unsigned long long)n);
    else
        snprintf(buf, cap, "%.2f%s", d, units[i]);
}

/* Physical memory (total_system_memory). */
static uint64_t system_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/*==========================================================================
 * Sections
 *==========================================================================*/

static void sec_server(text *t)
{
    const bks_config *c = &g_srv.cfg;
    uint64_t up = (bks_now_ms() - g_srv.start_ms) / 1000;
    struct utsname u;
    if (uname(&u) < 0)
        memset(&u, 0, sizeof u);
    tprintf(t,
            "# Server\r\n"
            "redis_version:%s\r\n"
            "redis_git_sha1:00000000\r\n"
            "redis_git_dirty:0\r\n"
            "redis_build_id:0\r\n"
            "redis_mode:standalone\r\n"
            "bloomkit_version:%s\r\n"
            "bloomkit_library_version:%s\r\n"
            "os:%s %s %s\r\n"
            "arch_bits:%d\r\n"
            "monotonic_clock:POSIX clock_gettime\r\n"
            "multiplexing_api:libuv\r\n"
            "gcc_version:%d.%d.%d\r\n"
            "process_id:%d\r\n"
            "run_id:%016llx%024d\r\n"
            "tcp_port:%d\r\n"
            "server_time_usec:%llu\r\n"
            "uptime_in_seconds:%llu\r\n"
            "uptime_in_days:%llu\r\n"
            "hz:10\r\n"
            "configured_hz:10\r\n"
            "io_threads_active:%d\r\n"
            "executable:%s\r\n"
            "config_file:%s\r\n"
            "\r\n",
            BKS_REDIS_VERSION, BKS_VERSION, bk_version_string(), u.sysname, u.release,
            u.machine, (int)(sizeof(void *) * 8),
#ifdef __GNUC__
            __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__,
#else
            0, 0, 0,
#endif
            (int)getpid(), (unsigned long long)g_srv.start_ms, 0, c->port,
            (unsigned long long)bks_now_ms() * 1000, (unsigned long long)up,
            (unsigned long long)(up / 86400), c->threads, g_srv.executable,
            g_srv.config_file ? g_srv.config_file : "");
}

static void sec_clients(text *t)
{
    tprintf(t,
            "# Clients\r\n"
            "connected_clients:%llu\r\n"
            "cluster_connections:0\r\n"
            "maxclients:%u\r\n"
            "client_recent_max_input_buffer:0\r\n"
            "client_recent_max_output_buffer:0\r\n"
            "blocked_clients:0\r\n"
            "tracking_clients:0\r\n"
            "clients_in_timeout_table:0\r\n"
            "\r\n",
            (unsigned long long)atomic_load(&g_srv.connected_clients),
            __atomic_load_n(&g_srv.cfg.maxclients, __ATOMIC_RELAXED));
}

static void sec_memory(text *t, bks_session *s)
{
    uint64_t used = bks_keyspace_memory(s->ks);
    uint64_t rss = bks_mem_rss();
    uint64_t maxmem = __atomic_load_n(&g_srv.cfg.maxmemory, __ATOMIC_RELAXED);
    uint64_t sys = system_memory();
    char h_used[32], h_rss[32], h_max[32], h_sys[32];
    bks_human_bytes(h_used, sizeof h_used, used);
    bks_human_bytes(h_rss, sizeof h_rss, rss);
    bks_human_bytes(h_max, sizeof h_max, maxmem);
    bks_human_bytes(h_sys, sizeof h_sys, sys);
    tprintf(t,
            "# Memory\r\n"
            "used_memory:%llu\r\n"
            "used_memory_human:%s\r\n"
            "used_memory_rss:%llu\r\n"
            "used_memory_rss_human:%s\r\n"
            "used_memory_peak:%llu\r\n"
            "used_memory_dataset:%llu\r\n"
            "total_system_memory:%llu\r\n"
            "total_system_memory_human:%s\r\n"
            "maxmemory:%llu\r\n"
            "maxmemory_human:%s\r\n"
            "maxmemory_policy:noeviction\r\n"
            "mem_fragmentation_ratio:%.2f\r\n"
            "mem_allocator:libc\r\n"
            "mem_clients_normal:%llu\r\n"
            "maxmemory_clients:%llu\r\n"
            "mem_trims:%llu\r\n"
            "mem_trim_last_usec:%llu\r\n"
            "\r\n",
            (unsigned long long)used, h_used, (unsigned long long)rss, h_rss,
            (unsigned long long)used, (unsigned long long)used, (unsigned long long)sys,
            h_sys, (unsigned long long)maxmem, h_max,
            used ? (double)rss / (double)used : 0.0,
            (unsigned long long)bks_net_client_query_bytes(),
            (unsigned long long)g_srv.cfg.maxmemory_clients,
            (unsigned long long)bks_mem_trims(), (unsigned long long)bks_mem_trim_last_us());
}

static void sec_persistence(text *t)
{
    const bks_config *c = &g_srv.cfg;
    int on = g_srv.persist != NULL;
    uint64_t last = on ? bks_persist_lastsave(g_srv.persist) : g_srv.start_ms / 1000;
    /* -1 (busy for an instant): repeat the last answer */
    static _Atomic int last_bgsave;
    int bgsave = on ? bks_persist_bgsave_in_progress(g_srv.persist) : 0;
    if (bgsave < 0)
        bgsave = atomic_load(&last_bgsave);
    atomic_store(&last_bgsave, bgsave);
    tprintf(t,
            "# Persistence\r\n"
            "loading:0\r\n"
            "async_loading:0\r\n"
            "persistence_enabled:%d\r\n"
            "rdb_changes_since_last_save:%llu\r\n"
            "rdb_bgsave_in_progress:%d\r\n"
            "rdb_last_save_time:%llu\r\n"
            "aof_enabled:%d\r\n"
            "aof_rewrite_in_progress:0\r\n"
            "dir:%s\r\n",
            on, (unsigned long long)(on ? bks_persist_changes(g_srv.persist) : 0), bgsave,
            (unsigned long long)last, on && c->appendonly, c->dir);
    if (on) {
        char more[1024];    /* the log's health (persist.c) */
        bks_persist_info(g_srv.persist, more, sizeof more);
        tprintf(t, "%s", more);
    }
    tprintf(t, "\r\n");
}

static void sec_stats(text *t)
{
    bks_ops_totals o;
    bks_ops_totals_get(&o);
    tprintf(t,
            "# Stats\r\n"
            "total_connections_received:%llu\r\n"
            "total_commands_processed:%llu\r\n"
            "instantaneous_ops_per_sec:%.0f\r\n"
            "rejected_connections:%llu\r\n"
            "expired_keys:%llu\r\n"
            "evicted_keys:0\r\n"
            "keyspace_hits:%llu\r\n"
            "keyspace_misses:%llu\r\n"
            "pubsub_channels:0\r\n"
            "pubsub_patterns:0\r\n"
            "total_error_replies:%llu\r\n"
            "unexpected_error_replies:0\r\n"
            "total_rejected_calls:%llu\r\n"
            "total_failed_calls:%llu\r\n"
            "protocol_errors:%llu\r\n"
            "client_output_buffer_limit_disconnections:%llu\r\n"
            "\r\n",
            (unsigned long long)atomic_load(&g_srv.total_connections),
            (unsigned long long)atomic_load(&g_srv.total_commands), bks_ops_per_sec(),
            (unsigned long long)atomic_load(&g_srv.rejected_connections),
            (unsigned long long)atomic_load(&g_srv.expired_keys),
            (unsigned long long)o.hits, (unsigned long long)o.misses,
            (unsigned long long)o.errors, (unsigned long long)o.rejected,
            (unsigned long long)o.failed,
            (unsigned long long)atomic_load(&g_srv.protocol_errors),
            (unsigned long long)atomic_load(&g_srv.output_limit_disconnects));
}

static void sec_replication(text *t)
{
    tprintf(t,
            "# Replication\r\n"
            "role:master\r\n"
            "connected_slaves:0\r\n"
            "master_failover_state:no-failover\r\n"
            "master_replid:%040d\r\n"
            "master_repl_offset:0\r\n"
            "repl_backlog_active:0\r\n"
            "\r\n",
            0);
}

static void sec_cpu(text *t)
{
    struct rusage self, children;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &children);
    tprintf(t,
            "# CPU\r\n"
            "used_cpu_sys:%ld.%06ld\r\n"
            "used_cpu_user:%ld.%06ld\r\n"
            "used_cpu_sys_children:%ld.%06ld\r\n"
            "used_cpu_user_children:%ld.%06ld\r\n"
            "\r\n",
            (long)self.ru_stime.tv_sec, (long)self.ru_stime.tv_usec,
            (long)self.ru_utime.tv_sec, (long)self.ru_utime.tv_usec,
            (long)children.ru_stime.tv_sec, (long)children.ru_stime.tv_usec,
            (long)children.ru_utime.tv_sec, (long)children.ru_utime.tv_usec);
}

/* bloomkit-server has RedisBloom's commands built in; client libraries
 * that look for the "bf" module (name and version as RedisBloom 2.6
 * reports them) find it here. */
static void sec_modules(text *t)
{
    tprintf(t,
            "# Modules\r\n"
            "module:name=bf,ver=20628,api=1,filters=0,usedby=[],using=[],options=[]\r\n"
            "\r\n");
}

static void one_cmdstat(void *arg, const char *name, uint64_t calls, uint64_t usec,
                        uint64_t rejected, uint64_t failed)
{
    tprintf(arg, "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=%llu,"
                 "failed_calls=%llu\r\n",
            name, (unsigned long long)calls, (unsigned long long)usec,
            calls ? (double)usec / (double)calls : 0.0, (unsigned long long)rejected,
            (unsigned long long)failed);
}

static void sec_commandstats(text *t)
{
    tprintf(t, "# Commandstats\r\n");
    bks_ops_each_command(one_cmdstat, t);
    tprintf(t, "\r\n");
}

static void one_errorstat(void *arg, const char *prefix, uint64_t count)
{
    tprintf(arg, "errorstat_%s:count=%llu\r\n", prefix, (unsigned long long)count);
}

static void sec_errorstats(text *t)
{
    tprintf(t, "# Errorstats\r\n");
    bks_ops_each_error(one_errorstat, t);
    tprintf(t, "\r\n");
}

static void sec_cluster(text *t)
{
    tprintf(t, "# Cluster\r\ncluster_enabled:0\r\n\r\n");
}

static void sec_keyspace(text *t, bks_session *s)
{
    tprintf(t, "# Keyspace\r\n");
    uint64_t n = bks_keyspace_size(s->ks);
    if (n)
        tprintf(t, "db0:keys=%llu,expires=%llu,avg_ttl=0\r\n", (unsigned long long)n,
                (unsigned long long)bks_ks_expires(s->ks));
    tprintf(t, "\r\n");
}

/*==========================================================================
 * INFO
 *==========================================================================*/

enum { IN_DEFAULT = 1, IN_ALL = 2 };

static const struct section {
    const char *name;
    int in;        /* IN_DEFAULT: also in the default set; IN_ALL: only in all */
    int needs_session;
    void (*fn)(text *t);
    void (*fn_s)(text *t, bks_session *s);
} sections[] = {
    {"server", IN_DEFAULT, 0, sec_server, NULL},
    {"clients", IN_DEFAULT, 0, sec_clients, NULL},
    {"memory", IN_DEFAULT, 1, NULL, sec_memory},
    {"persistence", IN_DEFAULT, 0, sec_persistence, NULL},
    {"stats", IN_DEFAULT, 0, sec_stats, NULL},
    {"replication", IN_DEFAULT, 0, sec_replication, NULL},
    {"cpu", IN_DEFAULT, 0, sec_cpu, NULL},
    {"modules", IN_DEFAULT, 0, sec_modules, NULL},
    {"commandstats", IN_ALL, 0, sec_commandstats, NULL},
    {"errorstats", IN_ALL, 0, sec_errorstats, NULL},
    {"cluster", IN_DEFAULT, 0, sec_cluster, NULL},
    {"keyspace", IN_DEFAULT, 1, NULL, sec_keyspace},
};
#define NSECTIONS (sizeof sections / sizeof sections[0])

static int wanted(const struct section *sec, int argc, const bkc_str *argv)
{
    if (argc < 2)
        return sec->in == IN_DEFAULT;
    for (int i = 1; i < argc; i++) {
        if (bkc_streq(argv[i], sec->name) || bkc_streq(argv[i], "all") ||
            bkc_streq(argv[i], "everything"))
            return 1;
        if (bkc_streq(argv[i], "default") && sec->in == IN_DEFAULT)
            return 1;
    }
    return 0;
}

char *bks_info_text(bks_session *s, int argc, const bkc_str *argv, size_t *len)
{
    text t = {{0}};
    for (size_t i = 0; i < NSECTIONS; i++) {
        if (!wanted(&sections[i], argc, argv))
            continue;
        if (sections[i].fn)
            sections[i].fn(&t);
        else
            sections[i].fn_s(&t, s);
    }
    /* Redis ends the text without the blank line after the last section */
    if (t.b.len >= 4)
        t.b.len -= 2;
    if (t.b.oom) {
        bks_outbuf_free(&t.b);
        return NULL;
    }
    if (!t.b.p) {
        t.b.p = malloc(1);
        if (!t.b.p)
            return NULL;
    }
    *len = t.b.len;
    return t.b.p;
}
