/*
 * cmd_copy.c - bloomkit copy SRC DST [--pattern P] [--replace] [--chunks]
 * [--chunk-threshold SIZE] [--quiet]: copy keys between servers.
 *
 * SRC and DST are each one server (bloomkit-server, Redis with bloomkit.so)
 * or the nodes of a Redis Cluster, written as --nodes lists are
 * (HOST:PORT[,HOST:PORT...]). The DUMP payload is Redis's format, which
 * bloomkit-server writes and reads too (server/dump.c), so a filter moves
 * from one machine to a cluster and back unchanged.
 *
 * How: cluster.c loads each side's slot map (a standalone server holds
 * every slot). On every master of SRC, SCAN (MATCH P, COUNT BATCH) yields
 * names; a pipeline per batch asks TYPE, PTTL and MEMORY USAGE of each; a
 * pipeline of DUMPs (a group of keys of at most --chunk-threshold bytes
 * together) goes to SRC, then one of RESTORE name ttl payload [REPLACE] to
 * DST, each command routed by its key's slot, MOVED and ASK followed (a
 * slot migrating meanwhile is no problem). A key that vanished between
 * SCAN and DUMP is skipped; a key DST refuses (BUSYKEY without --replace, a
 * value DST cannot hold) is reported by name and makes the exit status 2;
 * the others are copied. Keys keep their remaining time to live.
 *
 * By chunks: RedisBloom's filters (TYPE MBbloom-- / MBbloomCF) always, and
 * bloomkit's keys of a kind that has SCANDUMP (BF, CF, CBF, WF, SF, RS:
 * chunk_kinds[]) when MEMORY USAGE says they are larger than
 * --chunk-threshold (or always, with --chunks): X.SCANDUMP on SRC, each
 * chunk given to X.LOADCHUNK on DST, then PEXPIRE. One DUMP reply of a big
 * key is one buffer on both servers and in the CLI: bloomkit-server
 * closes a client whose unread replies pass client-output-buffer-limit
 * (256 MiB), Redis refuses a RESTORE argument over proto-max-bulk-len (512
 * MB). Chunks are at most 4 MiB (16 MiB for RedisBloom's), whatever the
 * filter's size, and a thread fetches the next chunk from SRC while DST
 * loads the last one (CHUNKS_AHEAD). Chunks carry no RDB version, so
 * RedisBloom's filters move whatever Redis version SRC runs (a DUMP payload
 * of a newer Redis is refused by an older one), and DST keeps RedisBloom's
 * layout: the filter answers exactly as it did. A filter being written to
 * while it is copied this way may arrive torn (SCANDUMP is not a
 * snapshot): stop its writers.
 *
 * Errors name the key (or the keys of a pipeline cut short), the side (SRC
 * or DST) and the node. A connection that breaks loses the keys whose
 * replies did not come; it is opened again for the next keys, and the
 * exit status is 2.
 */
#include <pthread.h> /* the chunk fetcher */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cluster.h"

#define COPY_BATCH 256
/* --chunk-threshold default: well under bloomkit-server's 256 MiB
 * client-output-buffer-limit (less its 16 MiB hold) and Redis's 512 MB
 * proto-max-bulk-len, and the most DUMP payloads the CLI holds at once */
#define COPY_DEFAULT_THRESHOLD (UINT64_C(64) << 20)
#define CHUNKS_AHEAD 2     /* SCANDUMP replies fetched before DST loads them */
#define NAMES_SHOWN 5      /* keys named in a message about a pipeline */

typedef struct copy_opts {
    const char *src, *dst;
    const char *pattern;
    int replace;
    int quiet;
    int chunks;               /* --chunks: every key of a chunk kind by chunks */
    uint64_t chunk_threshold; /* by chunks above this MEMORY USAGE */
} copy_opts;

typedef struct copy_stats {
    unsigned long long copied, failed, vanished;
    int broken;               /* a master of SRC could not be scanned to the end */
} copy_stats;

/* One side of the copy: its servers, and its name in messages. */
typedef struct copy_side {
    cluster c;
    const char *label;        /* "SRC" / "DST" */
} copy_side;

/* The kinds copied by chunks: TYPE name, command prefix, and whether only
 * when big (bloomkit's own) or always (RedisBloom's: no DUMP payload of
 * theirs is sure to load elsewhere). */
static const struct chunk_kind {
    const char *type, *prefix;
    int always;
} chunk_kinds[] = {
    {"MBbloom--", "BF", 1},  {"MBbloomCF", "CF", 1},  {"bkbloom--", "BF", 0},
    {"bkcuckoo-", "CF", 0},  {"bkcount--", "CBF", 0}, {"bkwindow-", "WF", 0},
    {"bkstatic-", "SF", 0},  {"bkkeyset-", "RS", 0},
    {"bkttl----", "TF", 0},
};

/*==========================================================================
 * Options
 *==========================================================================*/

/* SIZE: bytes, or a number with K, M or G (KiB, MiB, GiB). */
static int parse_size(const char *text, uint64_t *out)
{
    char digits[32];
    size_t len = strlen(text), shift = 0;
    if (len > 0) {
        switch (text[len - 1]) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        default: break;
        }
    }
    if (shift) len--;
    if (len == 0 || len >= sizeof(digits)) return -1;
    memcpy(digits, text, len);
    digits[len] = '\0';
    uint64_t n;
    if (cli_parse_u64(digits, 0, &n) != 0 || n > (UINT64_MAX >> shift)) return -1;
    *out = n << shift;
    return 0;
}

static int parse_copy_args(int argc, char **argv, copy_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->pattern = "*";
    o->chunk_threshold = COPY_DEFAULT_THRESHOLD;
    const char *pos[2];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--pattern") == 0 || strcmp(a, "-p") == 0) {
            if (i + 1 >= argc) {
                cli_error("copy: %s needs a glob pattern (like 'users:*')", a);
                return -1;
            }
            o->pattern = argv[++i];
        } else if (strncmp(a, "--pattern=", 10) == 0) {
            o->pattern = a + 10;
        } else if (strcmp(a, "--chunk-threshold") == 0 ||
                   strncmp(a, "--chunk-threshold=", 18) == 0) {
            const char *v = a[17] == '=' ? a + 18 : i + 1 < argc ? argv[++i] : NULL;
            if (v == NULL || parse_size(v, &o->chunk_threshold) != 0) {
                cli_error("copy: --chunk-threshold needs a size in bytes (like 64M; "
                          "K, M, G: KiB, MiB, GiB)");
                return -1;
            }
        } else if (strcmp(a, "--replace") == 0) {
            o->replace = 1;
        } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
            o->quiet = 1;
        } else if (strcmp(a, "--chunks") == 0) {
            o->chunks = 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            cli_error("copy: unknown option '%s' (see bloomkit copy --help)", a);
            return -1;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            cli_error("copy: unexpected argument '%s' (expected SRC DST)", a);
            return -1;
        }
    }
    if (npos != 2) {
        cli_error("copy: expected SRC DST (HOST:PORT[,...] each), got %d of them "
                  "(see bloomkit copy --help)", npos);
        return -1;
    }
    o->src = pos[0];
    o->dst = pos[1];
    return 0;
}

/*==========================================================================
 * Running commands, naming what failed
 *==========================================================================*/

/* cluster_run on one side, its problem kept in s->c.problem (not printed):
 * the caller names the keys. */
static int side_run(copy_side *s, cluster_cmd *cmds, size_t n)
{
    s->c.hold = 1;
    s->c.problem[0] = '\0';
    int rc = cluster_run(&s->c, cmds, n);
    s->c.hold = 0;
    if (rc != 0 && s->c.problem[0] == '\0')
        snprintf(s->c.problem, sizeof(s->c.problem), "the command failed");
    return rc;
}

/* A command left unanswered by a failed run. */
static int unanswered(const cluster_cmd *cmd)
{
    const redisReply *r = cmd->reply;
    return r == NULL || (r->type == REDIS_REPLY_ERROR &&
                         (strncmp(r->str, "MOVED ", 6) == 0 || strncmp(r->str, "ASK ", 4) == 0));
}

static unsigned name_slot(const redisReply *name)
{
    return cluster_key_slot(name->str, name->len);
}

/* "a, b, c and 4 more keys": names[idx[0..n)] (idx NULL: names[0..n)). */
static void key_list(char *out, size_t cap, redisReply *const *names, const size_t *idx,
                     size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t j = 0; j < n && j < NAMES_SHOWN && len < cap; j++) {
        const redisReply *name = names[idx ? idx[j] : j];
        int shown = name->len > 200 ? 200 : (int)name->len;
        int w = snprintf(out + len, cap - len, "%s%.*s%s", j ? ", " : "", shown, name->str,
                         (size_t)shown < name->len ? "..." : "");
        if (w > 0) len += (size_t)w;
    }
    if (n > NAMES_SHOWN && len < cap)
        snprintf(out + len, cap - len, " and %zu more keys", n - NAMES_SHOWN);
}

/* The keys a broken run of `what` on side s lost, named with the problem:
 * "copy: a, b: SRC 127.0.0.1:6380: Server closed the connection (DUMP)". */
static void say_lost(const copy_side *s, const char *what, redisReply *const *names,
                     const size_t *idx, size_t n)
{
    char keys[1400];
    key_list(keys, sizeof(keys), names, idx, n);
    cli_error("copy: %s: %s %s (%s)", keys, s->label, s->c.problem, what);
}

/* One key refused with an error reply (or an unexpected one). */
static void say_refused(const copy_side *s, const cluster_cmd *cmd, const redisReply *name,
                        const char *what, const char *hint)
{
    const redisReply *r = cmd->reply;
    cli_error("copy: %.*s: %s %s: %s: %s%s", (int)name->len, name->str, s->label,
              cmd->node ? cmd->node->name : "?", what,
              r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply", hint);
}

/* Run one command about key name on side s. 0 with cmd->reply set (free
 * it with cluster_free_replies), or -1 after naming the key and the side. */
static int run_one(copy_side *s, cluster_cmd *cmd, const redisReply *name, int argc,
                   const char **argv, const size_t *argvlen)
{
    *cmd = (cluster_cmd){name_slot(name), argc, argv, argvlen, NULL, NULL};
    if (side_run(s, cmd, 1) == 0) return 0;
    redisReply *names[1] = {(redisReply *)name};
    say_lost(s, argv[0], names, NULL, 1);
    cluster_free_replies(cmd, 1);
    return -1;
}

/*==========================================================================
 * By chunks
 *==========================================================================*/

/* The SRC half of a chunk copy, on its own thread: X.SCANDUMP from 0 to
 * the end, each reply queued for the loader (at most CHUNKS_AHEAD). */
typedef struct chunk_feed {
    copy_side *src;
    const redisReply *name;
    const char *scan_cmd;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    redisReply *queue[CHUNKS_AHEAD]; /* [next, data] replies, oldest at head */
    size_t head, count;
    int end;                         /* 1 after the last chunk, -1 after a problem */
    int stop;                        /* the loader gave up */
    char error[1400];                /* the problem (end -1) */
} chunk_feed;

/* A SCANDUMP reply: [next, data], or the end ([0, ""], RedisBloom's CF
 * [0, nil] too). */
static int scandump_reply_ok(const redisReply *r)
{
    return r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
           r->element[0]->type == REDIS_REPLY_INTEGER &&
           (r->element[1]->type == REDIS_REPLY_STRING ||
            (r->element[1]->type == REDIS_REPLY_NIL && r->element[0]->integer == 0));
}

static void *feed_chunks(void *arg)
{
    chunk_feed *f = arg;
    const redisReply *name = f->name;
    long long it = 0;
    int end = 1;
    for (;;) {
        pthread_mutex_lock(&f->mu);
        while (f->count == CHUNKS_AHEAD && !f->stop) pthread_cond_wait(&f->cv, &f->mu);
        int stop = f->stop;
        pthread_mutex_unlock(&f->mu);
        if (stop) break;
        char iter[24];
        snprintf(iter, sizeof(iter), "%lld", it);
        const char *argv[3] = {f->scan_cmd, name->str, iter};
        size_t argvlen[3] = {strlen(f->scan_cmd), name->len, strlen(iter)};
        cluster_cmd cmd = {name_slot(name), 3, argv, argvlen, NULL, NULL};
        if (side_run(f->src, &cmd, 1) != 0) {
            snprintf(f->error, sizeof(f->error), "%s %s (%s)", f->src->label,
                     f->src->c.problem, f->scan_cmd);
            cluster_free_replies(&cmd, 1);
            end = -1;
            break;
        }
        redisReply *r = cmd.reply;
        if (!scandump_reply_ok(r)) {
            snprintf(f->error, sizeof(f->error), "%s %s: %s: %s", f->src->label,
                     cmd.node->name, f->scan_cmd,
                     r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            cluster_free_replies(&cmd, 1);
            end = -1;
            break;
        }
        long long next = r->element[0]->integer;
        if (next == 0) {
            cluster_free_replies(&cmd, 1);
            break;
        }
        pthread_mutex_lock(&f->mu);
        f->queue[(f->head + f->count) % CHUNKS_AHEAD] = r;
        f->count++;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        if (next <= it) break; /* a source that goes back: never loop */
        it = next;
    }
    pthread_mutex_lock(&f->mu);
    f->end = end;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* The next queued chunk, or NULL once the feed ended. */
static redisReply *next_chunk(chunk_feed *f)
{
    pthread_mutex_lock(&f->mu);
    while (f->count == 0 && f->end == 0) pthread_cond_wait(&f->cv, &f->mu);
    redisReply *r = NULL;
    if (f->count > 0) {
        r = f->queue[f->head];
        f->head = (f->head + 1) % CHUNKS_AHEAD;
        f->count--;
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    return r;
}

/* Copy one key by chunks. 1 copied, 0 failed (named on stderr), 2 SRC
 * gave no chunk at all (a CF without items: [0, nil]), DUMP it instead. */
static int copy_chunks(copy_side *src, copy_side *dst, const copy_opts *o,
                       const redisReply *name, const char *prefix, long long ttl)
{
    char scan_cmd[16], load_cmd[16];
    cluster_cmd cmd;
    snprintf(scan_cmd, sizeof(scan_cmd), "%s.SCANDUMP", prefix);
    snprintf(load_cmd, sizeof(load_cmd), "%s.LOADCHUNK", prefix);
    const char *argv[3] = {o->replace ? "DEL" : "EXISTS", name->str, NULL};
    size_t argvlen[3] = {strlen(argv[0]), name->len, 0};
    /* a key DST holds: kept unless --replace (as RESTORE's BUSYKEY) */
    if (run_one(dst, &cmd, name, 2, argv, argvlen) != 0) return 0;
    int busy = !o->replace && cmd.reply->type == REDIS_REPLY_INTEGER && cmd.reply->integer > 0;
    cluster_free_replies(&cmd, 1);
    if (busy) {
        cli_error("copy: %.*s: %s %s: exists (--replace overwrites it)", (int)name->len,
                  name->str, dst->label, cmd.node->name);
        return 0;
    }
    chunk_feed feed;
    memset(&feed, 0, sizeof(feed));
    feed.src = src, feed.name = name, feed.scan_cmd = scan_cmd;
    pthread_t fetcher;
    pthread_mutex_init(&feed.mu, NULL);
    pthread_cond_init(&feed.cv, NULL);
    if (pthread_create(&fetcher, NULL, feed_chunks, &feed) != 0) {
        cli_error("copy: %.*s: cannot start a thread to read its chunks", (int)name->len,
                  name->str);
        pthread_cond_destroy(&feed.cv);
        pthread_mutex_destroy(&feed.mu);
        return 0;
    }
    int status = 1;
    unsigned long long loaded = 0;
    redisReply *r;
    while ((r = next_chunk(&feed)) != NULL) {
        char iter[24];
        snprintf(iter, sizeof(iter), "%lld", r->element[0]->integer);
        const char *largv[4] = {load_cmd, name->str, iter, r->element[1]->str};
        size_t llen[4] = {strlen(load_cmd), name->len, strlen(iter), r->element[1]->len};
        cluster_cmd load;
        int rc = run_one(dst, &load, name, 4, largv, llen);
        freeReplyObject(r);
        if (rc != 0) {
            status = 0;
            break;
        }
        if (load.reply->type == REDIS_REPLY_ERROR) {
            say_refused(dst, &load, name, load_cmd, "");
            cluster_free_replies(&load, 1);
            status = 0;
            break;
        }
        cluster_free_replies(&load, 1);
        loaded++;
    }
    pthread_mutex_lock(&feed.mu);
    feed.stop = 1;
    pthread_cond_broadcast(&feed.cv);
    pthread_mutex_unlock(&feed.mu);
    pthread_join(fetcher, NULL);
    for (; feed.count > 0; feed.count--, feed.head = (feed.head + 1) % CHUNKS_AHEAD)
        freeReplyObject(feed.queue[feed.head]);
    pthread_cond_destroy(&feed.cv);
    pthread_mutex_destroy(&feed.mu);
    if (status == 1 && feed.end < 0) {
        cli_error("copy: %.*s: %s", (int)name->len, name->str, feed.error);
        status = 0;
    }
    if (status == 1 && loaded == 0) return 2;
    if (status == 0 && loaded > 0) {
        /* the part loaded is no copy: best effort, taken away */
        argv[0] = "DEL", argvlen[0] = 3;
        cmd = (cluster_cmd){name_slot(name), 2, argv, argvlen, NULL, NULL};
        side_run(dst, &cmd, 1);
        cluster_free_replies(&cmd, 1);
        return 0;
    }
    if (status == 1 && ttl > 0) {
        char ttlbuf[24];
        snprintf(ttlbuf, sizeof(ttlbuf), "%lld", ttl);
        argv[0] = "PEXPIRE", argvlen[0] = 7;
        argv[2] = ttlbuf, argvlen[2] = strlen(ttlbuf);
        if (run_one(dst, &cmd, name, 3, argv, argvlen) != 0) return 0;
        cluster_free_replies(&cmd, 1);
    }
    return status;
}

/*==========================================================================
 * DUMP and RESTORE
 *==========================================================================*/

/* The keys names[idx[0..n)] (ttls: their PTTL, -1 none) with one pipeline
 * of DUMP on SRC and one of RESTORE on DST. */
static void dump_restore(copy_side *src, copy_side *dst, const copy_opts *o,
                         redisReply **names, const size_t *idx, const long long *ttls,
                         size_t n, copy_stats *st)
{
    cluster_cmd *dump = calloc(n, sizeof(*dump));
    cluster_cmd *put = calloc(n, sizeof(*put));
    const char **argv = calloc(2 * n + 5 * n, sizeof(*argv));
    size_t *argvlen = calloc(2 * n + 5 * n, sizeof(*argvlen));
    char (*ttlbuf)[24] = calloc(n, sizeof(*ttlbuf));
    size_t *which = calloc(n, sizeof(*which)), *lost = calloc(n, sizeof(*lost));
    size_t nput = 0, nlost = 0;
    if (!dump || !put || !argv || !argvlen || !ttlbuf || !which || !lost) {
        cli_error("copy: %s", bk_strerror(BK_ENOMEM));
        st->failed += n;
        goto done;
    }
    for (size_t j = 0; j < n; j++) {
        const redisReply *name = names[idx[j]];
        argv[2 * j] = "DUMP", argvlen[2 * j] = 4;
        argv[2 * j + 1] = name->str, argvlen[2 * j + 1] = name->len;
        dump[j] = (cluster_cmd){name_slot(name), 2, argv + 2 * j, argvlen + 2 * j, NULL, NULL};
    }
    int broken = side_run(src, dump, n) != 0;
    const char **pargv = argv + 2 * n;
    size_t *plen = argvlen + 2 * n;
    for (size_t j = 0; j < n; j++) {
        const redisReply *name = names[idx[j]];
        redisReply *r = dump[j].reply;
        if (broken && unanswered(&dump[j])) {
            lost[nlost++] = idx[j];
            continue;
        }
        if (r->type == REDIS_REPLY_NIL) {
            st->vanished++; /* deleted or expired since SCAN */
            continue;
        }
        if (r->type != REDIS_REPLY_STRING) {
            say_refused(src, &dump[j], name, "DUMP", "");
            st->failed++;
            continue;
        }
        snprintf(ttlbuf[j], sizeof(ttlbuf[j]), "%lld", ttls[j] > 0 ? ttls[j] : 0);
        const char **a = pargv + 5 * nput;
        size_t *l = plen + 5 * nput;
        a[0] = "RESTORE", l[0] = 7;
        a[1] = name->str, l[1] = name->len;
        a[2] = ttlbuf[j], l[2] = strlen(ttlbuf[j]);
        a[3] = r->str, l[3] = r->len;
        a[4] = "REPLACE", l[4] = 7;
        put[nput] = (cluster_cmd){name_slot(name), o->replace ? 5 : 4, a, l, NULL, NULL};
        which[nput++] = idx[j];
    }
    if (nlost) {
        say_lost(src, "DUMP", names, lost, nlost);
        st->failed += nlost;
        nlost = 0;
    }
    broken = nput && side_run(dst, put, nput) != 0;
    for (size_t j = 0; j < nput; j++) {
        redisReply *r = put[j].reply;
        const redisReply *name = names[which[j]];
        if (broken && unanswered(&put[j])) {
            lost[nlost++] = which[j];
            continue;
        }
        if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0) {
            st->copied++;
            continue;
        }
        st->failed++;
        say_refused(dst, &put[j], name, "RESTORE",
                    r->type == REDIS_REPLY_ERROR && strncmp(r->str, "BUSYKEY", 7) == 0
                        ? " (--replace overwrites it)"
                        : "");
    }
    if (nlost) {
        say_lost(dst, "RESTORE", names, lost, nlost);
        st->failed += nlost;
    }
done:
    if (dump) cluster_free_replies(dump, n);
    if (put) cluster_free_replies(put, nput);
    free(dump);
    free(put);
    free(argv);
    free(argvlen);
    free(ttlbuf);
    free(which);
    free(lost);
}

/*==========================================================================
 * Batches of SCAN
 *==========================================================================*/

/* The chunk prefix of a key ("BF", "CBF", ...), or NULL: DUMP it. */
static const char *chunk_prefix(const copy_opts *o, const redisReply *type,
                                const redisReply *usage)
{
    if (type->type != REDIS_REPLY_STATUS && type->type != REDIS_REPLY_STRING) return NULL;
    /* (MEMORY USAGE unanswered, as by a server without it: not big) */
    uint64_t bytes = usage->type == REDIS_REPLY_INTEGER && usage->integer > 0
                         ? (uint64_t)usage->integer
                         : 0;
    for (size_t k = 0; k < sizeof(chunk_kinds) / sizeof(chunk_kinds[0]); k++)
        if (strcmp(type->str, chunk_kinds[k].type) == 0)
            return chunk_kinds[k].always || o->chunks || bytes > o->chunk_threshold
                       ? chunk_kinds[k].prefix
                       : NULL;
    return NULL;
}

/* One batch of names from a SCAN reply: TYPE, PTTL and MEMORY USAGE of
 * each on SRC; the big filters by chunks, the others with DUMP and RESTORE
 * in groups of at most chunk_threshold bytes. */
static void copy_batch(copy_side *src, copy_side *dst, const copy_opts *o,
                       redisReply **names, size_t n, copy_stats *st)
{
    enum { GET_TYPE, GET_PTTL, GET_USAGE, GETS };
    static const char *const verbs[GETS][2] = {{"TYPE", NULL}, {"PTTL", NULL},
                                               {"MEMORY", "USAGE"}};
    cluster_cmd *get = calloc(GETS * n, sizeof(*get));
    const char **argv = calloc(7 * n, sizeof(*argv));
    size_t *argvlen = calloc(7 * n, sizeof(*argvlen));
    size_t *lost = calloc(n, sizeof(*lost)), *dumps = calloc(n, sizeof(*dumps));
    long long *ttls = calloc(n, sizeof(*ttls));
    size_t ndump = 0, nlost = 0;
    if (!get || !argv || !argvlen || !lost || !dumps || !ttls) {
        cli_error("copy: %s", bk_strerror(BK_ENOMEM));
        st->failed += n;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const char **a = argv + 7 * i;
        size_t *l = argvlen + 7 * i;
        for (int k = 0, at = 0; k < GETS; k++) {
            cluster_cmd *c = &get[GETS * i + (size_t)k];
            *c = (cluster_cmd){name_slot(names[i]), 0, a + at, l + at, NULL, NULL};
            for (int w = 0; w < 2 && verbs[k][w]; w++, c->argc++, at++)
                a[at] = verbs[k][w], l[at] = strlen(verbs[k][w]);
            a[at] = names[i]->str, l[at] = names[i]->len, c->argc++, at++;
        }
    }
    int broken = side_run(src, get, GETS * n) != 0;
    for (size_t i = 0; i < n; i++) {
        cluster_cmd *g = &get[GETS * i];
        if (broken && (unanswered(&g[GET_TYPE]) || unanswered(&g[GET_PTTL]) ||
                       unanswered(&g[GET_USAGE]))) {
            lost[nlost++] = i;
            continue;
        }
        redisReply *pttl = g[GET_PTTL].reply;
        if (pttl->type == REDIS_REPLY_INTEGER && pttl->integer == -2) {
            st->vanished++; /* deleted or expired since SCAN */
            continue;
        }
        if (pttl->type != REDIS_REPLY_INTEGER) {
            say_refused(src, &g[GET_PTTL], names[i], "PTTL", "");
            st->failed++;
            continue;
        }
        const char *prefix = chunk_prefix(o, g[GET_TYPE].reply, g[GET_USAGE].reply);
        int rc = prefix ? copy_chunks(src, dst, o, names[i], prefix, pttl->integer) : 2;
        if (rc == 1) {
            st->copied++;
        } else if (rc == 0) {
            st->failed++;
        } else {
            ttls[ndump] = pttl->integer;
            dumps[ndump++] = i;
        }
    }
    if (nlost) {
        say_lost(src, "TYPE, PTTL, MEMORY USAGE", names, lost, nlost);
        st->failed += nlost;
    }
    /* DUMP/RESTORE in groups of at most chunk_threshold bytes together
     * (one key at least), so that the payloads in flight stay bounded */
    for (size_t first = 0; first < ndump;) {
        size_t m = 0;
        uint64_t total = 0;
        while (first + m < ndump) {
            const redisReply *u = get[GETS * dumps[first + m] + GET_USAGE].reply;
            uint64_t b = u->type == REDIS_REPLY_INTEGER && u->integer > 0
                             ? (uint64_t)u->integer
                             : 0;
            if (m > 0 && total + b > o->chunk_threshold) break;
            total += b;
            m++;
        }
        dump_restore(src, dst, o, names, dumps + first, ttls + first, m, st);
        first += m;
    }
done:
    if (get) cluster_free_replies(get, GETS * n);
    free(get);
    free(argv);
    free(argvlen);
    free(lost);
    free(dumps);
    free(ttls);
}

/* SCAN from cursor, once more after a broken connection (opened again). */
static int scan_once(copy_side *src, cluster_cmd *scan)
{
    for (int attempt = 0;; attempt++) {
        if (side_run(src, scan, 1) == 0) return 0;
        if (attempt == 1) return -1;
        cluster_free_replies(scan, 1);
    }
}

/* Every key of one SRC master matching the pattern; slot: one it owns (SCAN
 * has no key: the slot only picks the node). 0, or -1 when SCAN failed
 * (named): the keys not reached yet are not copied. */
static int copy_node(copy_side *src, copy_side *dst, const copy_opts *o, unsigned slot,
                     copy_stats *st)
{
    char cursor[32] = "0";
    do {
        const char *argv[] = {"SCAN", cursor, "MATCH", o->pattern, "COUNT", "256"};
        size_t argvlen[6];
        for (int i = 0; i < 6; i++) argvlen[i] = strlen(argv[i]);
        cluster_cmd scan = {slot, 6, argv, argvlen, NULL, NULL};
        if (scan_once(src, &scan) != 0) {
            cli_error("copy: %s %s (SCAN): keys not reached are not copied", src->label,
                      src->c.problem);
            cluster_free_replies(&scan, 1);
            return -1;
        }
        redisReply *r = scan.reply;
        if (r->type == REDIS_REPLY_ERROR || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING ||
            r->element[1]->type != REDIS_REPLY_ARRAY ||
            r->element[0]->len >= sizeof(cursor)) {
            cli_error("copy: %s %s: SCAN: %s", src->label, scan.node->name,
                      r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            cluster_free_replies(&scan, 1);
            return -1;
        }
        memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
        redisReply *keys = r->element[1];
        for (size_t i = 0; i < keys->elements; i++)
            if (keys->element[i]->type != REDIS_REPLY_STRING) {
                cli_error("copy: %s %s: SCAN: unexpected reply", src->label, scan.node->name);
                cluster_free_replies(&scan, 1);
                return -1;
            }
        for (size_t i = 0; i < keys->elements; i += COPY_BATCH) {
            size_t n = keys->elements - i < COPY_BATCH ? keys->elements - i : COPY_BATCH;
            copy_batch(src, dst, o, keys->element + i, n, st);
        }
        cluster_free_replies(&scan, 1);
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

int cmd_copy(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            cli_help("copy", stdout);
            return CLI_EXIT_OK;
        }
    copy_opts o;
    if (parse_copy_args(argc, argv, &o) != 0) return CLI_EXIT_ERROR;
    if (cluster_check_list("copy", "SRC", o.src) != 0 ||
        cluster_check_list("copy", "DST", o.dst) != 0)
        return CLI_EXIT_ERROR;
    copy_side src, dst;
    memset(&src, 0, sizeof(src));
    memset(&dst, 0, sizeof(dst));
    src.label = "SRC", dst.label = "DST";
    int status = CLI_EXIT_ERROR;
    copy_stats st;
    memset(&st, 0, sizeof(st));
    if (cluster_open(&src.c, "copy: SRC", o.src) != 0) goto done;
    if (cluster_open(&dst.c, "copy: DST", o.dst) != 0) goto done;
    /* one SCAN per master of SRC, found through a slot it owns */
    for (size_t m = 0; m < src.c.nnodes; m++) {
        unsigned slot = CLUSTER_SLOTS;
        for (unsigned s = 0; s < CLUSTER_SLOTS && slot == CLUSTER_SLOTS; s++)
            if (src.c.slot_node[s] == (int32_t)m) slot = s;
        if (slot == CLUSTER_SLOTS) continue;
        if (copy_node(&src, &dst, &o, slot, &st) != 0) st.broken = 1;
    }
    if (!o.quiet)
        printf("copied %llu keys%s", st.copied, st.failed || st.vanished ? " (" : "\n");
    if (!o.quiet && (st.failed || st.vanished))
        printf("%llu failed, %llu deleted meanwhile)\n", st.failed, st.vanished);
    status = st.failed || st.broken ? CLI_EXIT_ERROR : CLI_EXIT_OK;
done:
    cluster_close(&src.c);
    cluster_close(&dst.c);
    return status;
}
