/*
 * cmd_copy.c - bloomkit copy SRC DST [--pattern P] [--replace] [--chunks] [--quiet]:
 * copy keys between servers with DUMP and RESTORE.
 *
 * SRC and DST are each one server (bloomkit-server, Redis with bloomkit.so)
 * or the nodes of a Redis Cluster, written as --nodes lists are
 * (HOST:PORT[,HOST:PORT...]). The DUMP payload is Redis's format, which
 * bloomkit-server writes and reads too (server/dump.c), so a filter moves
 * from one machine to a cluster and back unchanged.
 *
 * How: cluster.c loads each side's slot map (a standalone server holds
 * every slot). On every master of SRC, SCAN (MATCH P, COUNT BATCH) yields
 * names; a pipeline per batch asks DUMP and PTTL of each; a pipeline of
 * RESTORE name ttl payload [REPLACE] goes to DST, each command routed by
 * its key's slot, MOVED and ASK followed (a slot migrating meanwhile is no
 * problem). A key that vanished between SCAN and DUMP is skipped; a key
 * DST refuses (BUSYKEY without --replace, a value DST cannot hold) is
 * reported by name and makes the exit status 2; the others are copied.
 * Keys keep their remaining time to live.
 *
 * RedisBloom's filters (TYPE MBbloom-- / MBbloomCF) are copied with their
 * chunks instead: BF.SCANDUMP / CF.SCANDUMP on SRC, each chunk given to
 * BF.LOADCHUNK / CF.LOADCHUNK on DST as it comes, then PEXPIRE. Chunks
 * carry no RDB version, so this works whatever Redis version SRC runs (a
 * DUMP payload of a newer Redis is refused by an older one), and the
 * destination (bloomkit-server, or the module) keeps RedisBloom's layout:
 * the filter answers exactly as it did. --chunks copies bloomkit's own BF
 * and CF keys that way too. A filter being written to while it is copied
 * this way may arrive torn (SCANDUMP is not a snapshot): stop its writers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cluster.h"

#define COPY_BATCH 256

typedef struct copy_opts {
    const char *src, *dst;
    const char *pattern;
    int replace;
    int quiet;
    int chunks;   /* --chunks: bloomkit's BF/CF keys by chunks too */
} copy_opts;

typedef struct copy_stats {
    unsigned long long copied, failed, vanished;
} copy_stats;

static int parse_copy_args(int argc, char **argv, copy_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->pattern = "*";
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

/* The command prefix ("BF" / "CF") of a key copied by chunks, or NULL for
 * one copied by DUMP. */
static const char *chunk_prefix(const copy_opts *o, const redisReply *type)
{
    if (type->type != REDIS_REPLY_STATUS && type->type != REDIS_REPLY_STRING) return NULL;
    if (strcmp(type->str, "MBbloom--") == 0) return "BF";
    if (strcmp(type->str, "MBbloomCF") == 0) return "CF";
    if (o->chunks && strcmp(type->str, "bkbloom--") == 0) return "BF";
    if (o->chunks && strcmp(type->str, "bkcuckoo-") == 0) return "CF";
    return NULL;
}

/* Run one command on the node owning name's slot; the reply (the caller
 * frees it with cluster_free_replies), or NULL after a transport problem. */
static int run_one(cluster *c, cluster_cmd *cmd, const redisReply *name, int argc,
                   const char **argv, size_t *argvlen)
{
    *cmd = (cluster_cmd){cluster_key_slot(name->str, name->len), argc, argv, argvlen, NULL,
                         NULL};
    return cluster_run(c, cmd, 1);
}

/* Copy one key by chunks. 1 copied, 0 refused (named on stderr), -1 a
 * transport problem. */
static int copy_chunks(cluster *src, cluster *dst, const copy_opts *o, const redisReply *name,
                       const char *prefix, long long ttl)
{
    char scan_cmd[16], load_cmd[16], iter[24], ttlbuf[24];
    cluster_cmd cmd;
    snprintf(scan_cmd, sizeof(scan_cmd), "%s.SCANDUMP", prefix);
    snprintf(load_cmd, sizeof(load_cmd), "%s.LOADCHUNK", prefix);
    const char *argv[4];
    size_t argvlen[4];
    argv[1] = name->str, argvlen[1] = name->len;
    /* a key DST holds: kept unless --replace (as RESTORE's BUSYKEY) */
    argv[0] = o->replace ? "DEL" : "EXISTS", argvlen[0] = strlen(argv[0]);
    if (run_one(dst, &cmd, name, 2, argv, argvlen) != 0) {
        cluster_free_replies(&cmd, 1);
        return -1;
    }
    int busy = !o->replace && cmd.reply->type == REDIS_REPLY_INTEGER && cmd.reply->integer > 0;
    cluster_free_replies(&cmd, 1);
    if (busy) {
        cli_error("copy: %.*s: exists on DST (--replace overwrites it)", (int)name->len,
                  name->str);
        return 0;
    }
    long long it = 0;
    for (;;) {
        snprintf(iter, sizeof(iter), "%lld", it);
        argv[0] = scan_cmd, argvlen[0] = strlen(scan_cmd);
        argv[2] = iter, argvlen[2] = strlen(iter);
        if (run_one(src, &cmd, name, 3, argv, argvlen) != 0) {
            cluster_free_replies(&cmd, 1);
            return -1;
        }
        redisReply *r = cmd.reply;
        /* (the end: [0, ""], or RedisBloom's CF [0, nil]) */
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_INTEGER ||
            (r->element[1]->type != REDIS_REPLY_STRING &&
             !(r->element[1]->type == REDIS_REPLY_NIL && r->element[0]->integer == 0))) {
            cli_error("copy: %.*s: %s: %s", (int)name->len, name->str, scan_cmd,
                      r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            cluster_free_replies(&cmd, 1);
            return 0;
        }
        long long next = r->element[0]->integer;
        if (next == 0) {
            cluster_free_replies(&cmd, 1);
            break;
        }
        snprintf(iter, sizeof(iter), "%lld", next);
        const char *largv[4] = {load_cmd, name->str, iter, r->element[1]->str};
        size_t llen[4] = {strlen(load_cmd), name->len, strlen(iter), r->element[1]->len};
        cluster_cmd load;
        int rc = run_one(dst, &load, name, 4, largv, llen);
        cluster_free_replies(&cmd, 1);
        if (rc != 0) {
            cluster_free_replies(&load, 1);
            return -1;
        }
        if (load.reply->type == REDIS_REPLY_ERROR) {
            cli_error("copy: %s: %.*s: %s: %s", load.node->name, (int)name->len, name->str,
                      load_cmd, load.reply->str);
            cluster_free_replies(&load, 1);
            return 0;
        }
        cluster_free_replies(&load, 1);
        if (next <= it) break;   /* a source that goes back: never loop */
        it = next;
    }
    if (ttl > 0) {
        snprintf(ttlbuf, sizeof(ttlbuf), "%lld", ttl);
        argv[0] = "PEXPIRE", argvlen[0] = 7;
        argv[2] = ttlbuf, argvlen[2] = strlen(ttlbuf);
        if (run_one(dst, &cmd, name, 3, argv, argvlen) != 0) {
            cluster_free_replies(&cmd, 1);
            return -1;
        }
        cluster_free_replies(&cmd, 1);
    }
    return 1;
}

/* One batch of names from a SCAN reply: TYPE + PTTL each on SRC; then
 * RedisBloom's filters by chunks (copy_chunks), the others with DUMP on SRC
 * and RESTORE on DST. Returns 0, or -1 on a transport problem (printed). */
static int copy_batch(cluster *src, cluster *dst, const copy_opts *o, redisReply **names,
                      size_t n, copy_stats *st)
{
    int status = -1;
    cluster_cmd *get = calloc(2 * n, sizeof(*get));
    cluster_cmd *put = calloc(n, sizeof(*put));
    const char **argv = calloc(2 * 2 * n + 6 * n, sizeof(*argv));
    size_t *argvlen = calloc(2 * 2 * n + 6 * n, sizeof(*argvlen));
    char (*ttls)[24] = calloc(n, sizeof(*ttls));
    size_t *which = calloc(n, sizeof(*which));
    size_t nput = 0;
    if (!get || !put || !argv || !argvlen || !ttls || !which) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned slot = cluster_key_slot(names[i]->str, names[i]->len);
        for (int k = 0; k < 2; k++) {
            size_t a = 4 * i + 2 * (size_t)k;
            argv[a] = k == 0 ? "TYPE" : "PTTL";
            argvlen[a] = 4;
            argv[a + 1] = names[i]->str;
            argvlen[a + 1] = names[i]->len;
            get[2 * i + (size_t)k] =
                (cluster_cmd){slot, 2, argv + a, argvlen + a, NULL, NULL};
        }
    }
    if (cluster_run(src, get, 2 * n) != 0) goto done;
    /* chunk copies now, one key at a time; DUMP asked for the rest */
    for (size_t i = 0; i < n; i++) {
        redisReply *type = get[2 * i].reply, *pttl = get[2 * i + 1].reply;
        const char *prefix = chunk_prefix(o, type);
        if (prefix == NULL || pttl->type != REDIS_REPLY_INTEGER || pttl->integer == -2) {
            argv[4 * i] = "DUMP";   /* (the name stays in argv[4i + 1]) */
            continue;
        }
        argv[4 * i] = NULL;
        int rc = copy_chunks(src, dst, o, names[i], prefix, pttl->integer);
        if (rc < 0) goto done;
        if (rc > 0) st->copied++;
        else st->failed++;
    }
    size_t ndump = 0;
    for (size_t i = 0; i < n; i++) {
        if (argv[4 * i] == NULL) continue;
        cluster_free_replies(&get[2 * i], 1);
        get[2 * i] = (cluster_cmd){cluster_key_slot(names[i]->str, names[i]->len), 2,
                                   argv + 4 * i, argvlen + 4 * i, NULL, NULL};
        ndump++;
    }
    /* the DUMPs (in place of the TYPE replies), pipelined */
    {
        cluster_cmd *batch = calloc(ndump ? ndump : 1, sizeof(*batch));
        size_t *slot_of = calloc(ndump ? ndump : 1, sizeof(*slot_of));
        if (!batch || !slot_of) {
            free(batch);
            free(slot_of);
            cli_error("%s", bk_strerror(BK_ENOMEM));
            goto done;
        }
        size_t b = 0;
        for (size_t i = 0; i < n; i++)
            if (argv[4 * i] != NULL) {
                batch[b] = get[2 * i];
                slot_of[b++] = i;
            }
        int rc = ndump ? cluster_run(src, batch, ndump) : 0;
        for (size_t j = 0; j < b; j++) get[2 * slot_of[j]] = batch[j];
        free(batch);
        free(slot_of);
        if (rc != 0) goto done;
    }
    const char **pargv = argv + 4 * n;
    size_t *plen = argvlen + 4 * n;
    for (size_t i = 0; i < n; i++) {
        if (argv[4 * i] == NULL) continue;   /* copied by chunks */
        redisReply *dump = get[2 * i].reply, *pttl = get[2 * i + 1].reply;
        if (dump->type == REDIS_REPLY_NIL ||
            (pttl->type == REDIS_REPLY_INTEGER && pttl->integer == -2)) {
            st->vanished++;    /* deleted or expired since SCAN */
            continue;
        }
        if (dump->type != REDIS_REPLY_STRING || pttl->type != REDIS_REPLY_INTEGER) {
            cli_error("copy: %s: %.*s: DUMP: %s", get[2 * i].node->name,
                      (int)names[i]->len, names[i]->str,
                      dump->type == REDIS_REPLY_ERROR ? dump->str : "unexpected reply");
            st->failed++;
            continue;
        }
        long long ttl = pttl->integer > 0 ? pttl->integer : 0;
        snprintf(ttls[i], sizeof(ttls[i]), "%lld", ttl);
        const char **a = pargv + 6 * nput;
        size_t *l = plen + 6 * nput;
        a[0] = "RESTORE", l[0] = 7;
        a[1] = names[i]->str, l[1] = names[i]->len;
        a[2] = ttls[i], l[2] = strlen(ttls[i]);
        a[3] = dump->str, l[3] = dump->len;
        a[4] = "REPLACE", l[4] = 7;
        put[nput] = (cluster_cmd){cluster_key_slot(names[i]->str, names[i]->len),
                                  o->replace ? 5 : 4, a, l, NULL, NULL};
        which[nput++] = i;
    }
    if (nput && cluster_run(dst, put, nput) != 0) goto done;
    for (size_t j = 0; j < nput; j++) {
        redisReply *r = put[j].reply;
        redisReply *name = names[which[j]];
        if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0) {
            st->copied++;
            continue;
        }
        st->failed++;
        cli_error("copy: %s: %.*s: RESTORE: %s%s", put[j].node->name, (int)name->len,
                  name->str, r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply",
                  r->type == REDIS_REPLY_ERROR && strncmp(r->str, "BUSYKEY", 7) == 0
                      ? " (--replace overwrites it)"
                      : "");
    }
    status = 0;
done:
    if (get) cluster_free_replies(get, 2 * n);
    if (put) cluster_free_replies(put, nput);
    free(get);
    free(put);
    free(argv);
    free(argvlen);
    free(ttls);
    free(which);
    return status;
}

/* Every key of one SRC master matching the pattern; slot: one it owns (SCAN
 * has no key: the slot only picks the node). */
static int copy_node(cluster *src, cluster *dst, const copy_opts *o, unsigned slot,
                     copy_stats *st)
{
    char cursor[32] = "0";
    do {
        const char *argv[] = {"SCAN", cursor, "MATCH", o->pattern, "COUNT", "256"};
        size_t argvlen[6];
        for (int i = 0; i < 6; i++) argvlen[i] = strlen(argv[i]);
        cluster_cmd scan = {slot, 6, argv, argvlen, NULL, NULL};
        if (cluster_run(src, &scan, 1) != 0) {
            cluster_free_replies(&scan, 1);
            return -1;
        }
        redisReply *r = scan.reply;
        if (r->type == REDIS_REPLY_ERROR || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING ||
            r->element[1]->type != REDIS_REPLY_ARRAY ||
            r->element[0]->len >= sizeof(cursor)) {
            cli_error("copy: %s: SCAN: %s", scan.node->name,
                      r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            cluster_free_replies(&scan, 1);
            return -1;
        }
        memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
        redisReply *keys = r->element[1];
        for (size_t i = 0; i < keys->elements; i++)
            if (keys->element[i]->type != REDIS_REPLY_STRING) {
                cli_error("copy: %s: SCAN: unexpected reply", scan.node->name);
                cluster_free_replies(&scan, 1);
                return -1;
            }
        for (size_t i = 0; i < keys->elements; i += COPY_BATCH) {
            size_t n = keys->elements - i < COPY_BATCH ? keys->elements - i : COPY_BATCH;
            if (copy_batch(src, dst, o, keys->element + i, n, st) != 0) {
                cluster_free_replies(&scan, 1);
                return -1;
            }
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
    cluster src, dst;
    memset(&src, 0, sizeof(src));
    memset(&dst, 0, sizeof(dst));
    int status = CLI_EXIT_ERROR;
    copy_stats st = {0, 0, 0};
    if (cluster_open(&src, "copy", o.src) != 0) goto done;
    if (cluster_open(&dst, "copy", o.dst) != 0) goto done;
    /* one SCAN per master of SRC, found through a slot it owns */
    for (size_t m = 0; m < src.nnodes; m++) {
        unsigned slot = CLUSTER_SLOTS;
        for (unsigned s = 0; s < CLUSTER_SLOTS && slot == CLUSTER_SLOTS; s++)
            if (src.slot_node[s] == (int32_t)m) slot = s;
        if (slot == CLUSTER_SLOTS) continue;
        if (copy_node(&src, &dst, &o, slot, &st) != 0) goto done;
    }
    if (!o.quiet)
        printf("copied %llu keys%s", st.copied, st.failed || st.vanished ? " (" : "\n");
    if (!o.quiet && (st.failed || st.vanished))
        printf("%llu failed, %llu deleted meanwhile)\n", st.failed, st.vanished);
    status = st.failed ? CLI_EXIT_ERROR : CLI_EXIT_OK;
done:
    cluster_close(&src);
    cluster_close(&dst);
    return status;
}
