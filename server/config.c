/*
 * config.c - bloomkit-server's configuration and its log.
 *
 * One table describes every option: its name (Redis's where Redis has the
 * option), its type, where it lives in bks_config, and its help line. The
 * same table parses the config file ("name value" lines, # comments, values
 * optionally quoted), the command-line flags (--name value; flags are
 * applied after the file, so they win), CONFIG GET, and --help.
 *
 * Sizes accept Redis's units: 1k = 1000, 1kb = 1024, likewise m/mb, g/gb.
 *
 * The log: one line per event, "pid:role dd Mon yyyy hh:mm:ss.mmm L text"
 * as Redis writes it, to stderr or the log file, under a mutex.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h> /* offsetof */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h> /* strcasecmp */
#include <sys/time.h>
#include <time.h>
#include <unistd.h> /* sysconf, getpid */

#include "ops.h"
#include "server_int.h"

/*==========================================================================
 * The option table
 *==========================================================================*/

typedef enum opt_type { OPT_STR, OPT_INT, OPT_U32, OPT_U64, OPT_SIZE, OPT_BOOL,
                        OPT_FSYNC, OPT_LOGLEVEL,
                        OPT_R8_RATE,  /* Redis 8's float setting: (min, max), its texts */
                        OPT_R8_INT    /* Redis 8's integer setting: [min, max], its texts */
} opt_type;

typedef struct opt {
    const char *name;
    const char *alias;     /* another accepted name, or NULL */
    opt_type type;
    size_t offset;
    size_t size;           /* OPT_STR: buffer size */
    long long min, max;    /* numeric range */
    const char *help;
} opt;

#define F(field) offsetof(bks_config, field), sizeof(((bks_config *)0)->field)

static const opt options[] = {
    {"bind", NULL, OPT_STR, F(bind), 0, 0,
     "addresses to listen on, blank-separated (\"127.0.0.1\")"},
    {"port", NULL, OPT_INT, F(port), 0, 65535, "TCP port, 0 disables TCP (6380)"},
    {"unixsocket", NULL, OPT_STR, F(unixsocket), 0, 0, "Unix socket path (none)"},
    {"unixsocketperm", NULL, OPT_STR, F(unixsocketperm), 0, 0,
     "octal permissions of the Unix socket, e.g. 700 (as the umask leaves them)"},
    {"dir", NULL, OPT_STR, F(dir), 0, 0, "data directory, created if missing (./data)"},
    {"requirepass", NULL, OPT_STR, F(requirepass), 0, 0,
     "password clients must AUTH with (none)"},
    {"protected-mode", NULL, OPT_BOOL, F(protected_mode), 0, 1,
     "without a password and bound beyond loopback, refuse non-local clients (yes)"},
    {"appendonly", NULL, OPT_BOOL, F(appendonly), 0, 1,
     "log every write; no: snapshots only (yes)"},
    {"appendfsync", NULL, OPT_FSYNC, F(appendfsync), 0, 0,
     "always | everysec | no (everysec)"},
    {"threads", "io-threads", OPT_INT, F(threads), 0, 1024,
     "worker threads, 0: one per core (0)"},
    {"maxmemory", NULL, OPT_SIZE, F(maxmemory), 0, 0,
     "bytes the keys may take, 0: no limit (half of physical memory)"},
    {"proto-max-bulk-len", "max-bulk-len", OPT_SIZE, F(max_bulk_len), 1, 0,
     "largest bulk string in a request (512mb)"},
    {"max-args", NULL, OPT_U32, F(max_args), 1, 0x7fffffff,
     "most arguments in one request (1048576)"},
    {"max-inline-len", NULL, OPT_U32, F(max_inline_len), 16, 0x7fffffff,
     "longest inline request line (64kb)"},
    {"client-query-buffer-limit", "max-query-buffer", OPT_SIZE, F(max_query_buffer), 1024, 0,
     "largest unprocessed input of one client (1gb)"},
    {"maxclients", NULL, OPT_U32, F(maxclients), 1, 0x7fffffff,
     "most clients connected at once (10000)"},
    {"client-output-buffer-limit", "max-output-buffer", OPT_SIZE, F(max_output_buffer), 1024, 0,
     "unread replies of one client: past half of this (at most 16mb) its requests wait "
     "until it reads; past this, it is disconnected (256mb)"},
    {"maxmemory-clients", NULL, OPT_SIZE, F(maxmemory_clients), 0, 0,
     "query-buffer bytes of all clients together; the client that would pass it is "
     "disconnected, 0: no cap (2gb)"},
    {"auto-aof-rewrite-min-size", NULL, OPT_SIZE, F(auto_rewrite_min), 0, 0,
     "compact the log once past this size (64mb)"},
    {"auto-aof-rewrite-percentage", NULL, OPT_U32, F(auto_rewrite_pct), 0, 0x7fffffff,
     "... and grown by this percentage since the last compaction (100)"},
    {"map-threshold", NULL, OPT_SIZE, F(map_threshold), 0, 0,
     "filters larger than this are mapped from the snapshot at start (64mb)"},
    {"repair-aof", NULL, OPT_BOOL, F(repair_aof), 0, 1,
     "truncate a corrupt log at the bad record and start (no)"},
    {"snapshot-timeout", NULL, OPT_U64, F(snapshot_timeout), 0, 0,
     "seconds a background snapshot may run before it is killed and retried, 0: no "
     "limit (3600)"},
    {"snapshot-stall-timeout", NULL, OPT_U64, F(snapshot_stall_timeout), 0, 0,
     "seconds a background snapshot may go without progress (no byte written, no CPU "
     "used, not in disk wait) before it is killed and retried, 0: never (60)"},
    {"rebuild-manifest", NULL, OPT_BOOL, F(rebuild_manifest), 0, 1,
     "CURRENT missing or damaged: rebuild it from the newest complete snapshot (no)"},
    {"bf-growable", NULL, OPT_BOOL, F(bf_growable), 0, 1,
     "a BF key that an add creates with the default capacity at ~1% or more is a growable "
     "filter, one cache line per lookup however large it grows; no: a chain of Bloom "
     "filters sized as RedisBloom's (yes)"},
    {"cf-growable", NULL, OPT_BOOL, F(cf_growable), 0, 1,
     "a CF key that an add creates without CAPACITY is a growable filter that doubles "
     "(never full, rate under 1%); no: RedisBloom's chain of 1024-item stages (yes)"},
    /* Redis 8's names and ranges (RedisBloom's src/config.c); they set the
     * filters created without settings, from the next command on */
    {"bf-error-rate", NULL, OPT_R8_RATE, F(bf_error_rate), 0, 1,
     "error rate of BF keys created without one; above 0.25 is taken as 0.25 (0.01)"},
    {"bf-initial-size", NULL, OPT_R8_INT, F(bf_initial_size), 1, 1LL << 30,
     "capacity of BF keys created without one (100)"},
    {"bf-expansion-factor", NULL, OPT_R8_INT, F(bf_expansion_factor), 0, 32768,
     "growth of BF keys created without EXPANSION, 0: NONSCALING (2)"},
    {"cf-bucket-size", NULL, OPT_R8_INT, F(cf_bucket_size), 1, 255,
     "bucket size of CF keys created without BUCKETSIZE; bloomkit takes 2, 4 or 8 (2)"},
    {"cf-initial-size", NULL, OPT_R8_INT, F(cf_initial_size), 4, 1LL << 30,
     "capacity of CF keys created without one, at least 2 x cf-bucket-size (1024)"},
    {"cf-max-iterations", NULL, OPT_R8_INT, F(cf_max_iterations), 1, 65535,
     "kicks of CF keys created without MAXITERATIONS (20)"},
    {"cf-expansion-factor", NULL, OPT_R8_INT, F(cf_expansion_factor), 0, 32768,
     "growth of CF keys created without EXPANSION (1)"},
    {"cf-max-expansions", NULL, OPT_R8_INT, F(cf_max_expansions), 1, 65536,
     "stages a CF key may grow to; bloomkit holds at most 32 (32)"},
    {"loglevel", NULL, OPT_LOGLEVEL, F(loglevel), 0, 0,
     "debug | verbose | notice | warning (notice)"},
    {"logfile", NULL, OPT_STR, F(logfile), 0, 0, "log file, \"\": stderr (\"\")"},
    {"slowlog-log-slower-than", NULL, OPT_INT, F(slowlog_log_slower_than), -1, 0x7fffffff,
     "SLOWLOG: commands taking at least this many microseconds, -1 none (10000)"},
    {"slowlog-max-len", NULL, OPT_U32, F(slowlog_max_len), 0, 0x7fffffff,
     "SLOWLOG: entries kept (128)"},
};
#define NOPTIONS (sizeof options / sizeof options[0])

void bks_config_defaults(bks_config *c)
{
    memset(c, 0, sizeof *c);
    strcpy(c->bind, "127.0.0.1");
    c->port = 6380;
    strcpy(c->dir, "./data");
    c->protected_mode = 1;
    c->bf_growable = 1;
    c->cf_growable = 1;
    c->bf_error_rate = 0.01;
    c->bf_initial_size = 100;
    c->bf_expansion_factor = 2;
    c->cf_bucket_size = 2;
    c->cf_initial_size = 1024;
    c->cf_max_iterations = 20;
    c->cf_expansion_factor = 1;
    c->cf_max_expansions = 32;
    c->appendfsync = BKS_FSYNC_EVERYSEC;
    c->appendonly = 1;
    c->threads = 0;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    c->maxmemory = (pages > 0 && psize > 0) ? (uint64_t)pages * (uint64_t)psize / 2
                                            : (uint64_t)1 << 30;
    c->max_bulk_len = 512ULL << 20;
    c->max_args = 1048576;
    c->max_inline_len = 64 * 1024;
    c->max_query_buffer = 1ULL << 30;
    c->maxclients = 10000;
    c->max_output_buffer = 256ULL << 20;
    c->maxmemory_clients = 2ULL << 30;
    c->snapshot_timeout = 3600;
    c->snapshot_stall_timeout = 60;
    c->auto_rewrite_min = 64ULL << 20;
    c->auto_rewrite_pct = 100;
    c->map_threshold = 64ULL << 20;
    c->repair_aof = 0;
    c->loglevel = BKS_LOG_INFO;
    c->slowlog_log_slower_than = 10000;
    c->slowlog_max_len = 128;
}

static const opt *find_option(const char *name)
{
    for (size_t i = 0; i < NOPTIONS; i++) {
        if (!strcasecmp(options[i].name, name) ||
            (options[i].alias && !strcasecmp(options[i].alias, name)))
            return &options[i];
    }
    /* accept underscores for dashes: --max_args */
    char tmp[64];
    size_t n = strlen(name);
    if (n >= sizeof tmp)
        return NULL;
    for (size_t i = 0; i <= n; i++)
        tmp[i] = name[i] == '_' ? '-' : name[i];
    if (strcmp(tmp, name))
        return find_option(tmp);
    return NULL;
}

/* "100", "64kb", "1gb", "2m": bytes. */
static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s))
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    uint64_t mul = 1;
    if (*end) {
        static const struct { const char *u; uint64_t m; } units[] = {
            {"k", 1000ULL}, {"kb", 1024ULL}, {"m", 1000000ULL}, {"mb", 1ULL << 20},
            {"g", 1000000000ULL}, {"gb", 1ULL << 30}, {"b", 1}};
        size_t i;
        for (i = 0; i < sizeof units / sizeof units[0]; i++)
            if (!strcasecmp(end, units[i].u))
                break;
        if (i == sizeof units / sizeof units[0])
            return -1;
        mul = units[i].m;
    }
    if (v > UINT64_MAX / mul)
        return -1;
    *out = v * mul;
    return 0;
}

static int set_option(bks_config *c, const opt *o, const char *value, char *err,
                      size_t errlen)
{
    char *field = (char *)c + o->offset;
    switch (o->type) {
    case OPT_STR:
        if (strlen(value) >= o->size) {
            snprintf(err, errlen, "value of '%s' is too long", o->name);
            return -1;
        }
        strcpy(field, value);
        return 0;
    case OPT_U32: {
        uint64_t v;
        if (parse_size(value, &v) < 0 || v < (uint64_t)o->min || v > (uint64_t)o->max) {
            snprintf(err, errlen, "'%s' must be a number in [%lld, %lld], not '%s'",
                     o->name, o->min, o->max, value);
            return -1;
        }
        *(uint32_t *)field = (uint32_t)v;
        return 0;
    }
    case OPT_INT: {
        char *end;
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (errno || end == value || *end || v < o->min || v > o->max) {
            snprintf(err, errlen, "'%s' must be an integer in [%lld, %lld], not '%s'",
                     o->name, o->min, o->max, value);
            return -1;
        }
        *(int *)field = (int)v;
        return 0;
    }
    case OPT_U64: {   /* a plain count (seconds): no units */
        char *end;
        errno = 0;
        unsigned long long v = strtoull(value, &end, 10);
        if (errno || end == value || *end || value[0] == '-' || v < (uint64_t)o->min) {
            snprintf(err, errlen, "'%s' must be a whole number (0 or more), not '%s'", o->name,
                     value);
            return -1;
        }
        *(uint64_t *)field = (uint64_t)v;
        return 0;
    }
    case OPT_SIZE: {
        uint64_t v;
        if (parse_size(value, &v) < 0 || v < (uint64_t)o->min) {
            snprintf(err, errlen, "'%s' must be a size (like 100, 64kb, 1gb)%s, not '%s'",
                     o->name, o->min > 0 ? " above 0" : "", value);
            return -1;
        }
        *(uint64_t *)field = v;
        return 0;
    }
    case OPT_R8_RATE: {
        char *end;
        errno = 0;
        double v = strtod(value, &end);
        if (errno || end == value || *end) {
            snprintf(err, errlen, "Invalid value for `%s`", o->name);
            return -1;
        }
        if (!(v > (double)o->min && v < (double)o->max)) {
            snprintf(err, errlen, "Value for `%s` must be in the range (%f, %f)", o->name,
                     (double)o->min, (double)o->max);
            return -1;
        }
        if (v > 0.25) v = 0.25; /* Redis 8 caps the default error rate */
        *(double *)field = v;
        return 0;
    }
    case OPT_R8_INT: {
        char *end;
        errno = 0;
        long long v = strtoll(value, &end, 10);
        long long min = o->min, max = o->max;
        /* Redis 8: the two CF sizes bound each other */
        if (!strcmp(o->name, "cf-initial-size")) min = 2 * (long long)c->cf_bucket_size;
        if (!strcmp(o->name, "cf-bucket-size") && (long long)c->cf_initial_size / 2 < max)
            max = (long long)c->cf_initial_size / 2;
        if (errno || end == value || *end) {
            snprintf(err, errlen, "Invalid value for `%s`", o->name);
            return -1;
        }
        if (v < min || v > max) {
            snprintf(err, errlen, "Value for `%s` must be in the range [%lld, %lld]", o->name,
                     min, max);
            return -1;
        }
        if (!strcmp(o->name, "cf-bucket-size") && v != 2 && v != 4 && v != 8) {
            snprintf(err, errlen, "Value for `%s` must be 2, 4 or 8 (bloomkit's cuckoo "
                                  "filters)", o->name);
            return -1;
        }
        *(uint64_t *)field = (uint64_t)v;
        return 0;
    }
    case OPT_BOOL:
        if (!strcasecmp(value, "yes") || !strcmp(value, "1") || !strcasecmp(value, "on"))
            *(int *)field = 1;
        else if (!strcasecmp(value, "no") || !strcmp(value, "0") || !strcasecmp(value, "off"))
            *(int *)field = 0;
        else {
            snprintf(err, errlen, "'%s' must be yes or no, not '%s'", o->name, value);
            return -1;
        }
        return 0;
    case OPT_FSYNC:
        if (!strcasecmp(value, "always"))
            c->appendfsync = BKS_FSYNC_ALWAYS;
        else if (!strcasecmp(value, "everysec"))
            c->appendfsync = BKS_FSYNC_EVERYSEC;
        else if (!strcasecmp(value, "no"))
            c->appendfsync = BKS_FSYNC_NO;
        else {
            snprintf(err, errlen, "'appendfsync' must be always, everysec or no, not '%s'",
                     value);
            return -1;
        }
        return 0;
    case OPT_LOGLEVEL:
        if (!strcasecmp(value, "debug"))
            c->loglevel = BKS_LOG_DEBUG;
        else if (!strcasecmp(value, "verbose") || !strcasecmp(value, "notice") ||
                 !strcasecmp(value, "info"))
            c->loglevel = BKS_LOG_INFO;
        else if (!strcasecmp(value, "warning"))
            c->loglevel = BKS_LOG_WARNING;
        else if (!strcasecmp(value, "error"))
            c->loglevel = BKS_LOG_ERROR;
        else {
            snprintf(err, errlen,
                     "'loglevel' must be debug, verbose, notice or warning, not '%s'", value);
            return -1;
        }
        return 0;
    }
    return -1;
}

static void option_value(const bks_config *c, const opt *o, char *buf, size_t cap)
{
    const char *field = (const char *)c + o->offset;
    switch (o->type) {
    case OPT_STR: snprintf(buf, cap, "%s", field); break;
    case OPT_INT: snprintf(buf, cap, "%d", *(const int *)field); break;
    case OPT_U32: snprintf(buf, cap, "%u", *(const uint32_t *)field); break;
    case OPT_U64:
    case OPT_SIZE:
        snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)field);
        break;
    case OPT_BOOL: snprintf(buf, cap, "%s", *(const int *)field ? "yes" : "no"); break;
    case OPT_R8_RATE: { /* the shortest form that reads back the same */
        double v = *(const double *)field;
        for (int digits = 1; digits <= 17; digits++) {
            snprintf(buf, cap, "%.*g", digits, v);
            if (strtod(buf, NULL) == v) break;
        }
        break;
    }
    case OPT_R8_INT:
        snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)field);
        break;
    case OPT_FSYNC:
        snprintf(buf, cap, "%s", c->appendfsync == BKS_FSYNC_ALWAYS ? "always"
                                 : c->appendfsync == BKS_FSYNC_NO ? "no" : "everysec");
        break;
    case OPT_LOGLEVEL: {
        static const char *names[] = {"debug", "notice", "warning", "error"};
        snprintf(buf, cap, "%s", names[c->loglevel]);
        break;
    }
    }
}

/*==========================================================================
 * Loading: file, then flags
 *==========================================================================*/

/* Split a config line into name and value (the rest, unquoted). */
static int split_line(char *line, char **name, char **value)
{
    char *s = line;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s || *s == '#')
        return 0;
    *name = s;
    while (*s && !isspace((unsigned char)*s))
        s++;
    if (*s)
        *s++ = '\0';
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    if (e - s >= 2 && ((*s == '"' && e[-1] == '"') || (*s == '\'' && e[-1] == '\''))) {
        e[-1] = '\0';
        s++;
    }
    *value = s;
    return 1;
}

static int load_file(bks_config *c, const char *file, char *err, size_t errlen)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        snprintf(err, errlen, "cannot open config file '%s': %s", file, strerror(errno));
        return -1;
    }
    char line[4096];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *name, *value;
        if (!split_line(line, &name, &value))
            continue;
        const opt *o = find_option(name);
        char msg[512];
        if (!o) {
            snprintf(err, errlen, "%s:%d: unknown option '%s'", file, lineno, name);
            fclose(f);
            return -1;
        }
        if (set_option(c, o, value, msg, sizeof msg) < 0) {
            snprintf(err, errlen, "%s:%d: %s", file, lineno, msg);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

int bks_config_load(bks_config *c, const char *file, int argc, char **argv,
                    char *err, size_t errlen)
{
    if (file && load_file(c, file, err, errlen) < 0)
        return -1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2)) {
            snprintf(err, errlen, "unexpected argument '%s' (flags are --name value)", a);
            return -1;
        }
        char name[128];
        const char *value = NULL;
        const char *eq = strchr(a + 2, '=');
        size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (n >= sizeof name) {
            snprintf(err, errlen, "unknown flag '%s'", a);
            return -1;
        }
        memcpy(name, a + 2, n);
        name[n] = '\0';
        const opt *o = find_option(name);
        if (!o) {
            snprintf(err, errlen, "unknown flag '--%s' (see --help)", name);
            return -1;
        }
        if (eq) {
            value = eq + 1;
        } else if (o->type == OPT_BOOL &&
                   (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2))) {
            value = "yes";   /* --repair-aof alone */
        } else {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "flag '--%s' needs a value", name);
                return -1;
            }
            value = argv[++i];
        }
        char msg[512];
        if (set_option(c, o, value, msg, sizeof msg) < 0) {
            snprintf(err, errlen, "--%s: %s", name, msg);
            return -1;
        }
    }
    if (c->port == 0 && !c->unixsocket[0]) {
        snprintf(err, errlen, "nothing to listen on: port is 0 and there is no unixsocket");
        return -1;
    }
    if (!c->dir[0]) {
        snprintf(err, errlen, "'dir' must not be empty");
        return -1;
    }
    return 0;
}

void bks_config_usage(FILE *out)
{
    fprintf(out,
            "Usage: bloomkit-server [config-file] [--option value ...]\n"
            "\n"
            "A Redis-protocol server for bloomkit's filters (RedisBloom's BF.* and CF.*\n"
            "commands). The config file holds \"option value\" lines; flags override it.\n"
            "Sizes take units: 1k=1000, 1kb=1024, m/mb, g/gb.\n"
            "\n"
            "Options (default in parentheses):\n");
    for (size_t i = 0; i < NOPTIONS; i++) {
        char flag[80];
        snprintf(flag, sizeof flag, "--%s%s", options[i].name,
                 options[i].type == OPT_BOOL ? " yes|no" : " <value>");
        fprintf(out, "  %-38s %s\n", flag, options[i].help);
    }
    fprintf(out, "  %-38s %s\n", "--help", "show this help and exit");
    fprintf(out, "  %-38s %s\n", "--version", "show the version and exit");
    fprintf(out, "  %-38s %s\n", "--check-data",
            "verify the data directory (--dir) fully, report, exit 0 sound / 1 damaged");
    fprintf(out,
            "\nExample: bloomkit-server --port 6380 --dir ./data, then\n"
            "         redis-cli -p 6380 BF.ADD f x\n");
}

void bks_config_get(const bks_config *c, const char *pattern, size_t plen,
                    void (*fn)(void *arg, const char *name, const char *value),
                    void *arg)
{
    for (size_t i = 0; i < NOPTIONS; i++) {
        const opt *o = &options[i];
        if (!bks_glob_match(pattern, plen, o->name, strlen(o->name), 1))
            continue;
        char value[1100];
        option_value(c, o, value, sizeof value);
        fn(arg, o->name, value);
    }
    /* settings that clients (redis-benchmark) ask for and we do not have */
    static const char *fixed[][2] = {{"save", ""}, {"databases", "1"}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (bks_glob_match(pattern, plen, fixed[i][0], strlen(fixed[i][0]), 1))
            fn(arg, fixed[i][0], fixed[i][1]);
}

/* The settings of filters created without them (bkc_defaults_in_force)
 * from the configuration: at start and after CONFIG SET of one of Redis
 * 8's names (the server is paused then, so no command reads them
 * meanwhile). */
void bks_config_apply_bloom(const bks_config *c)
{
    bkc_defaults d = bkc_defaults_in_force;
    d.bf_growable = (uint32_t)c->bf_growable;
    d.cf_growable = (uint32_t)c->cf_growable;
    d.bf_error_rate = c->bf_error_rate;
    d.bf_initial_size = c->bf_initial_size;
    d.bf_expansion = (uint32_t)c->bf_expansion_factor;
    d.cf_bucket_size = (uint32_t)c->cf_bucket_size;
    d.cf_initial_size = c->cf_initial_size;
    d.cf_max_iterations = (uint32_t)c->cf_max_iterations;
    d.cf_expansion = (uint32_t)c->cf_expansion_factor;
    d.cf_max_expansions = (uint32_t)(c->cf_max_expansions > 32 ? 32 : c->cf_max_expansions);
    bkc_defaults_in_force = d;
}

/* The log's state (the Log section below; CONFIG SET loglevel too). */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_file;                    /* NULL: stderr */
static _Atomic int log_level = BKS_LOG_INFO;

/*==========================================================================
 * CONFIG SET and CONFIG REWRITE
 *==========================================================================*/

/* The options CONFIG SET may change, and how a new value takes effect.
 * The server is paused meanwhile, so commands (the only readers of most
 * of these) see the old value or the new one; the few that net.c reads
 * outside commands are read with atomic loads. */
static int apply_runtime(const opt *o, const bks_config *nc)
{
    bks_config *c = &g_srv.cfg;
    if (!strcmp(o->name, "loglevel")) {
        c->loglevel = nc->loglevel;
        atomic_store(&log_level, nc->loglevel);
    } else if (!strcmp(o->name, "maxmemory")) {
        __atomic_store_n(&c->maxmemory, nc->maxmemory, __ATOMIC_RELAXED);
        bks_keyspace_set_maxmemory(g_srv.ks, nc->maxmemory);
    } else if (!strcmp(o->name, "requirepass")) {
        /* net.c reads the first byte outside commands (atomically): store it last */
        memcpy(c->requirepass + 1, nc->requirepass + 1, sizeof c->requirepass - 1);
        __atomic_store_n(&c->requirepass[0], nc->requirepass[0], __ATOMIC_RELAXED);
    } else if (!strcmp(o->name, "maxclients")) {
        __atomic_store_n(&c->maxclients, nc->maxclients, __ATOMIC_RELAXED);
    } else if (!strcmp(o->name, "slowlog-log-slower-than")) {
        __atomic_store_n(&c->slowlog_log_slower_than, nc->slowlog_log_slower_than,
                         __ATOMIC_RELAXED);
    } else if (!strcmp(o->name, "appendfsync")) {
        if (bks_persist_set_fsync(g_srv.persist, nc->appendfsync) < 0)
            return -1;
        c->appendfsync = nc->appendfsync;
    } else if (!strcmp(o->name, "slowlog-max-len")) {
        __atomic_store_n(&c->slowlog_max_len, nc->slowlog_max_len, __ATOMIC_RELAXED);
    } else if (o->type == OPT_R8_RATE || o->type == OPT_R8_INT) {
        memcpy((char *)c + o->offset, (const char *)nc + o->offset, o->size);
        bks_config_apply_bloom(c);
    } else {
        return -1;
    }
    return 0;
}

static int runtime_settable(const opt *o)
{
    static const char *names[] = {"loglevel", "maxmemory", "requirepass", "maxclients",
                                  "slowlog-log-slower-than", "slowlog-max-len",
                                  "appendfsync"};
    if (o->type == OPT_R8_RATE || o->type == OPT_R8_INT)
        return 1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(o->name, names[i]))
            return 1;
    return 0;
}

int bks_config_set(const char *name, const char *value, char *err, size_t errlen)
{
    const opt *o = find_option(name);
    if (!o) {
        if (!strcasecmp(name, "save") && !value[0])
            return 0;   /* no save points to clear: snapshots follow the log's growth */
        snprintf(err, errlen, "ERR Unknown option or number of arguments for CONFIG SET - '%s'",
                 name);
        return -1;
    }
    if (!runtime_settable(o)) {
        snprintf(err, errlen,
                 "ERR CONFIG SET failed (possibly related to argument '%s') - can't set "
                 "immutable config (restart with the new value)",
                 o->name);
        return -1;
    }
    static bks_config nc;   /* ~6 KB: not on a worker's stack; the server is paused */
    nc = g_srv.cfg;
    char msg[512];
    if (set_option(&nc, o, value, msg, sizeof msg) < 0) {
        snprintf(err, errlen, "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
                 o->name, msg);
        return -1;
    }
    if (apply_runtime(o, &nc) < 0) {
        snprintf(err, errlen, "ERR CONFIG SET failed (possibly related to argument '%s') - "
                              "cannot apply it (see the server log)", o->name);
        return -1;
    }
    bks_log(BKS_LOG_INFO, "CONFIG SET %s", o->name);
    return 0;
}

/* A value as a config file line needs it: quoted when empty or with blanks. */
static void write_option(FILE *f, const opt *o)
{
    char value[1100];
    option_value(&g_srv.cfg, o, value, sizeof value);
    if (!value[0] || strpbrk(value, " \t#\"'"))
        fprintf(f, "%s \"%s\"\n", o->name, value);
    else
        fprintf(f, "%s %s\n", o->name, value);
}

int bks_config_rewrite(const char *file, char *err, size_t errlen)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.rewrite-tmp", file);
    FILE *in = fopen(file, "r");
    FILE *out = fopen(tmp, "w");
    int written[NOPTIONS] = {0};
    bks_config defaults;
    bks_config_defaults(&defaults);
    if (!out) {
        snprintf(err, errlen, "ERR Rewriting config file: %s: %s", tmp, strerror(errno));
        if (in)
            fclose(in);
        return -1;
    }
    char line[4096];
    while (in && fgets(line, sizeof line, in)) {
        char copy[4096], *name, *value;
        memcpy(copy, line, sizeof copy);
        const opt *o = split_line(copy, &name, &value) ? find_option(name) : NULL;
        if (!o) {
            fputs(line, out);
            if (!strchr(line, '\n'))
                fputc('\n', out);
            continue;
        }
        size_t idx = (size_t)(o - options);
        if (!written[idx])
            write_option(out, o);   /* a repeated option keeps only its first line */
        written[idx] = 1;
    }
    int header = 0;
    for (size_t i = 0; i < NOPTIONS; i++) {
        if (written[i])
            continue;
        char now[1100], def[1100];
        option_value(&g_srv.cfg, &options[i], now, sizeof now);
        option_value(&defaults, &options[i], def, sizeof def);
        if (!strcmp(now, def))
            continue;
        if (!header++)
            fprintf(out, "# Generated by CONFIG REWRITE\n");
        write_option(out, &options[i]);
    }
    int bad = ferror(out) != 0;
    if (in)
        fclose(in);
    if (fflush(out) != 0 || fsync(fileno(out)) != 0)
        bad = 1;
    if (fclose(out) != 0)
        bad = 1;
    if (bad || rename(tmp, file) != 0) {
        snprintf(err, errlen, "ERR Rewriting config file: %s", strerror(errno));
        unlink(tmp);
        return -1;
    }
    bks_log(BKS_LOG_INFO, "CONFIG REWRITE executed with success.");
    return 0;
}

/*==========================================================================
 * Log
 *==========================================================================*/


void bks_log_open(const bks_config *c)
{
    pthread_mutex_lock(&log_lock);
    log_level = c->loglevel;
    if (c->logfile[0]) {
        FILE *f = fopen(c->logfile, "a");
        if (f) {
            if (log_file)
                fclose(log_file);
            log_file = f;
        } else {
            fprintf(stderr, "bloomkit-server: cannot open log file '%s': %s (logging to stderr)\n",
                    c->logfile, strerror(errno));
        }
    }
    pthread_mutex_unlock(&log_lock);
}

void bks_log_reopen(void)
{
    pthread_mutex_lock(&log_lock);
    if (g_srv.cfg.logfile[0]) {
        FILE *f = fopen(g_srv.cfg.logfile, "a");
        if (f) {
            if (log_file)
                fclose(log_file);
            log_file = f;
        }
        /* else: keep writing to the old file rather than lose lines */
    }
    pthread_mutex_unlock(&log_lock);
}

int bks_log_enabled(bks_log_level level)
{
    return (int)level >= atomic_load_explicit(&log_level, memory_order_relaxed);
}

void bks_log_close(void)
{
    pthread_mutex_lock(&log_lock);
    if (log_file)
        fclose(log_file);
    log_file = NULL;
    pthread_mutex_unlock(&log_lock);
}

void bks_log(bks_log_level level, const char *fmt, ...)
{
    if ((int)level < log_level)
        return;
    static const char marks[] = {'.', '*', '#', '!'};
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    time_t secs = tv.tv_sec;
    localtime_r(&secs, &tm);
    char when[64];
    size_t n = strftime(when, sizeof when, "%d %b %Y %H:%M:%S", &tm);
    snprintf(when + n, sizeof when - n, ".%03d", (int)(tv.tv_usec / 1000));
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&log_lock);
    FILE *out = log_file ? log_file : stderr;
    fprintf(out, "%d:M %s %c %s\n", (int)getpid(), when, marks[level], msg);
    fflush(out);
    pthread_mutex_unlock(&log_lock);
}
