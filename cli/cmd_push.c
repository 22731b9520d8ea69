/*
 * cmd_push.c - bloomkit push FILE SERVER KEY / bloomkit pull SERVER KEY FILE:
 * a static filter or map file into a server key (SF.*) and back.
 *
 * The server takes a static key through SF.LOADCHUNK, whose chunks are the
 * bytes of the *value container* (docs/COMMANDS.md, "Value encoding"), not
 * of the file: a 56-byte header (magic "BKCV", version 1, kind 6, total
 * length, one filter, a check of the header), the image's 8-byte length,
 * then the file image itself, unchanged. push loads and checks the file
 * (every checksum, and that it is a static filter or map), writes that
 * 64-byte prefix in front of it and sends the whole in chunks of at most
 * --chunk-size bytes, the iterator being each chunk's end offset (what
 * SF.SCANDUMP hands out). The server checks everything again and keeps the
 * old key when the first chunk is bad; a bad later chunk drops the load.
 *
 * A push of more than one chunk goes into a staging key and is renamed
 * over KEY at the end (RENAME with --replace, else RENAMENX): while the
 * chunks arrive a key holds a "loading" value whose lookups answer 0, and
 * readers of KEY must see the old filter until the new one is whole. The
 * staging key hashes to KEY's cluster slot (it carries KEY's {tag}, or KEY
 * itself as its tag), so the rename works in a Redis Cluster too; a key
 * with a '}' but no tag cannot be matched and is loaded in place.
 *
 * pull does the reverse: SF.SCANDUMP from 0 until the reply [0, ""],
 * checks the container, takes the image out of it, checks the image as a
 * load does, and saves it atomically as FILE (refusing to replace an
 * existing FILE without --force).
 *
 * SERVER is HOST:PORT (or the nodes of a Redis Cluster, as --nodes lists
 * are written; the key's node is found from the slot map).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h> /* stat */
#include <unistd.h>   /* getpid */

#include "cli.h"
#include "cluster.h"

#define PUSH_CHUNK_DEFAULT (4u << 20)
#define CONTAINER_HDR 56        /* the container's header */
#define CONTAINER_PREFIX 64     /* header and the image's length */
#define KIND_STATIC 6           /* bkc_kind of a static key (commands/command.h) */

typedef struct push_opts {
    const char *pos[3];
    int npos;
    int replace, force, quiet;
    size_t chunk;
} push_opts;

static void put_le(unsigned char *p, uint64_t x, int n)
{
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(x >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t x = 0;
    for (int i = n - 1; i >= 0; i--) x = (x << 8) | p[i];
    return x;
}

static int parse_push_args(const char *cmd, int argc, char **argv, push_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->chunk = PUSH_CHUNK_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--replace") == 0 && strcmp(cmd, "push") == 0) {
            o->replace = 1;
        } else if ((strcmp(a, "--force") == 0 || strcmp(a, "-f") == 0) &&
                   strcmp(cmd, "pull") == 0) {
            o->force = 1;
        } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
            o->quiet = 1;
        } else if (strcmp(a, "--chunk-size") == 0 && strcmp(cmd, "push") == 0) {
            char *end = NULL;
            unsigned long long n = i + 1 < argc ? strtoull(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || end == argv[i + 1] || *end != '\0' || n < CONTAINER_HDR ||
                n > (512ull << 20)) {
                cli_error("%s: --chunk-size takes bytes between %d and 536870912", cmd,
                          CONTAINER_HDR);
                return -1;
            }
            o->chunk = (size_t)n;
            i++;
        } else if (a[0] == '-' && a[1] != '\0') {
            cli_error("%s: unknown option '%s' (see bloomkit %s --help)", cmd, a, cmd);
            return -1;
        } else if (o->npos < 3) {
            o->pos[o->npos++] = a;
        } else {
            o->npos++;
        }
    }
    if (o->npos != 3) {
        cli_error(strcmp(cmd, "push") == 0
                      ? "push: expected FILE SERVER KEY (see bloomkit push --help)"
                      : "pull: expected SERVER KEY FILE (see bloomkit pull --help)");
        return -1;
    }
    return 0;
}

static int wants_help(const char *cmd, int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            cli_help(cmd, stdout);
            return 1;
        }
    return 0;
}

/* Run one command on the node of key; *reply is the reply (free it with
 * freeReplyObject). 0, or -1 after printing a transport problem. */
static int run_one(cluster *c, const char *key, size_t keylen, int argc, const char **argv,
                   const size_t *argvlen, redisReply **reply)
{
    cluster_cmd cmd = {cluster_key_slot(key, keylen), argc, argv, argvlen, NULL, NULL};
    if (cluster_run(c, &cmd, 1) != 0) {
        cluster_free_replies(&cmd, 1);
        return -1;
    }
    *reply = cmd.reply;
    return 0;
}

static int is_static(const bk_filter *f)
{
    bk_family fam = bk_filter_family(f);
    return fam == BK_FAMILY_STATIC || fam == BK_FAMILY_BUMPED || fam == BK_FAMILY_MAP;
}

/*==========================================================================
 * push
 *==========================================================================*/

/* TYPE of a static key, on bloomkit-server and in Redis with bloomkit.so */
#define STATIC_TYPE_NAME "bkstatic-"

/* Whether name has a hash tag: a '{' with a '}' after it and something
 * between (Redis Cluster's rule, on the first '{'). */
static int has_tag(const char *name)
{
    const char *open = strchr(name, '{');
    if (open == NULL) return 0;
    const char *close = strchr(open + 1, '}');
    return close != NULL && close > open + 1;
}

/* The staging key of key, in key's slot; NULL when there is none (a key
 * with a '}' and no tag). malloc'ed. */
static char *staging_key(const char *key)
{
    size_t cap = strlen(key) + 64;
    char *s = malloc(cap);
    if (s == NULL) return NULL;
    if (has_tag(key))
        snprintf(s, cap, "bloomkit-push:%ld:%s", (long)getpid(), key);
    else if (strchr(key, '}') == NULL)
        snprintf(s, cap, "{%s}:bloomkit-push:%ld", key, (long)getpid());
    else {
        free(s);
        return NULL;
    }
    return s;
}

/* Run argv[0] key [args] on key's node, expecting a status or an integer
 * reply; 0, or -1 after printing what went wrong. */
static int run_simple(cluster *c, const char *server, const char *key, int argc,
                      const char **argv, const size_t *argvlen, redisReply **r)
{
    if (run_one(c, key, strlen(key), argc, argv, argvlen, r) != 0) return -1;
    if ((*r)->type == REDIS_REPLY_ERROR) {
        cli_error("push: %s: %s: %s: %s", server, key, argv[0], (*r)->str);
        return -1;
    }
    return 0;
}

int cmd_push(int argc, char **argv)
{
    if (wants_help("push", argc, argv)) return CLI_EXIT_OK;
    push_opts o;
    if (parse_push_args("push", argc, argv, &o) != 0) return CLI_EXIT_ERROR;
    const char *path = o.pos[0], *server = o.pos[1], *key = o.pos[2];
    size_t keylen = strlen(key);
    bk_filter *f = NULL;
    unsigned char *buf = NULL;
    redisReply *r = NULL;
    char *staging = NULL;
    cluster c;
    memset(&c, 0, sizeof(c));
    int status = CLI_EXIT_ERROR;

    if (cluster_check_list("push", "SERVER", server) != 0) return CLI_EXIT_ERROR;
    if (cli_load_filter(path, &f) != BK_OK) goto done;
    if (!is_static(f)) {
        cli_error("%s: a %s filter, not a static filter or map (SF.* keys hold those made "
                  "by bloomkit create --type static and bloomkit build-map)",
                  path, cli_family_name(bk_filter_family(f)));
        goto done;
    }
    uint64_t image = bk_filter_serialized_size(f);
    uint64_t total = CONTAINER_PREFIX + image;
    if (image == 0 || total > SIZE_MAX || (buf = malloc((size_t)total)) == NULL) {
        cli_error("%s: %s", path, bk_strerror(image == 0 ? BK_ENOTSUP : BK_ENOMEM));
        goto done;
    }
    memset(buf, 0, CONTAINER_PREFIX);
    memcpy(buf, "BKCV", 4);
    put_le(buf + 4, 1, 2);             /* container version */
    put_le(buf + 6, KIND_STATIC, 2);
    put_le(buf + 8, total, 8);
    put_le(buf + 16, 1, 4);            /* one filter */
    put_le(buf + 48, bk_hash_key(buf, 48, 0).lo, 8);
    put_le(buf + 56, image, 8);
    int rc = bk_filter_serialize(f, buf + CONTAINER_PREFIX, (size_t)image);
    if (rc != BK_OK) {
        cli_error("%s: %s", path, bk_strerror(rc));
        goto done;
    }

    if (cluster_open(&c, "push", server) != 0) goto done;
    if (o.replace) {
        /* the rename below would replace a key of any kind: only a
         * static key may be replaced, as a load into it would say */
        const char *tv[2] = {"TYPE", key};
        size_t tl[2] = {4, keylen};
        if (run_simple(&c, server, key, 2, tv, tl, &r) != 0) goto done;
        if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "none") != 0 &&
            strcmp(r->str, STATIC_TYPE_NAME) != 0) {
            cli_error("push: %s: key '%s' holds a %s, not a static filter: WRONGTYPE "
                      "(--replace replaces a static key only)", server, key, r->str);
            goto done;
        }
        freeReplyObject(r);
        r = NULL;
    } else {
        const char *ev[2] = {"EXISTS", key};
        size_t el[2] = {6, keylen};
        if (run_one(&c, key, keylen, 2, ev, el, &r) != 0) goto done;
        if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
            cli_error("push: %s: key '%s' exists (--replace replaces a static key)", server,
                      key);
            goto done;
        }
        freeReplyObject(r);
        r = NULL;
    }
    /* more than one chunk: load a staging key, then rename it over KEY */
    const char *target = key;
    if (total > o.chunk) {
        staging = staging_key(key);
        if (staging != NULL) target = staging;
    }
    size_t target_len = strlen(target);
    size_t chunks = 0;
    for (uint64_t off = 0; off < total;) {
        size_t n = total - off < o.chunk ? (size_t)(total - off) : o.chunk;
        char iter[24];
        snprintf(iter, sizeof(iter), "%llu", (unsigned long long)(off + n));
        const char *lv[4] = {"SF.LOADCHUNK", target, iter, (const char *)buf + off};
        size_t ll[4] = {12, target_len, strlen(iter), n};
        if (run_one(&c, target, target_len, 4, lv, ll, &r) != 0) goto done;
        if (r->type != REDIS_REPLY_STATUS) {
            cli_error("push: %s: %s: SF.LOADCHUNK at byte %llu: %s", server, key,
                      (unsigned long long)off,
                      r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            goto done;
        }
        freeReplyObject(r);
        r = NULL;
        off += n;
        chunks++;
    }
    if (staging != NULL) {
        const char *rv[3] = {o.replace ? "RENAME" : "RENAMENX", staging, key};
        size_t rl[3] = {strlen(rv[0]), target_len, keylen};
        if (run_simple(&c, server, staging, 3, rv, rl, &r) != 0) goto done;
        if (r->type == REDIS_REPLY_INTEGER && r->integer == 0) {
            cli_error("push: %s: key '%s' was created during the push (--replace "
                      "replaces a static key)", server, key);
            goto done;
        }
        freeReplyObject(r);
        r = NULL;
        free(staging);
        staging = NULL;   /* renamed: nothing to clean up */
    }
    if (!o.quiet)
        printf("pushed %s to %s key %s: %llu bytes in %zu chunk%s\n", path, server, key,
               (unsigned long long)total, chunks, chunks == 1 ? "" : "s");
    status = CLI_EXIT_OK;
done:
    if (r) freeReplyObject(r);
    r = NULL;
    if (staging != NULL) {   /* a load that did not finish: no staging key left */
        const char *dv[2] = {"DEL", staging};
        size_t dl[2] = {3, strlen(staging)};
        if (c.nnodes > 0 && run_one(&c, staging, dl[1], 2, dv, dl, &r) == 0) freeReplyObject(r);
        free(staging);
    }
    free(buf);
    bk_filter_free(f);
    cluster_close(&c);
    return status;
}

/*==========================================================================
 * pull
 *==========================================================================*/

/* The filter inside a static key's container (len bytes), or NULL after
 * printing why not. */
static bk_filter *unwrap(const char *server, const char *key, const unsigned char *p,
                         size_t len)
{
    const char *why = NULL;
    if (len < CONTAINER_PREFIX || memcmp(p, "BKCV", 4) != 0)
        why = "not a bloomkit value";
    else if (get_le(p + 48, 8) != bk_hash_key(p, 48, 0).lo)
        why = "header check mismatch";
    else if (get_le(p + 4, 2) != 1)
        why = "unknown container version";
    else if (get_le(p + 6, 2) != KIND_STATIC)
        why = "not a static filter or map";
    else if (get_le(p + 8, 8) != len || get_le(p + 16, 4) != 1 ||
             get_le(p + 56, 8) != len - CONTAINER_PREFIX)
        why = "lengths do not add up";
    if (why != NULL) {
        cli_error("pull: %s: %s: %s", server, key, why);
        return NULL;
    }
    bk_filter *f = NULL;
    int rc = bk_filter_deserialize(&f, p + CONTAINER_PREFIX, len - CONTAINER_PREFIX);
    if (rc != BK_OK) {
        cli_error("pull: %s: %s: %s", server, key, bk_strerror(rc));
        return NULL;
    }
    if (!is_static(f)) {
        cli_error("pull: %s: %s: not a static filter or map", server, key);
        bk_filter_free(f);
        return NULL;
    }
    return f;
}

int cmd_pull(int argc, char **argv)
{
    if (wants_help("pull", argc, argv)) return CLI_EXIT_OK;
    push_opts o;
    if (parse_push_args("pull", argc, argv, &o) != 0) return CLI_EXIT_ERROR;
    const char *server = o.pos[0], *key = o.pos[1], *path = o.pos[2];
    size_t keylen = strlen(key);
    unsigned char *buf = NULL;
    size_t len = 0;
    bk_filter *f = NULL;
    redisReply *r = NULL;
    cluster c;
    memset(&c, 0, sizeof(c));
    int status = CLI_EXIT_ERROR;
    struct stat st;

    if (cluster_check_list("pull", "SERVER", server) != 0) return CLI_EXIT_ERROR;
    if (cli_check_target(path) != 0) return CLI_EXIT_ERROR;
    if (!o.force && stat(path, &st) == 0) {
        cli_error("%s: already exists (use --force to replace it)", path);
        return CLI_EXIT_ERROR;
    }
    if (cluster_open(&c, "pull", server) != 0) goto done;
    unsigned long long at = 0;
    for (;;) {
        char iter[24];
        snprintf(iter, sizeof(iter), "%llu", at);
        const char *sv[3] = {"SF.SCANDUMP", key, iter};
        size_t sl[3] = {11, keylen, strlen(iter)};
        if (run_one(&c, key, keylen, 3, sv, sl, &r) != 0) goto done;
        if (r->type == REDIS_REPLY_ERROR) {
            cli_error("pull: %s: %s: SF.SCANDUMP: %s", server, key, r->str);
            goto done;
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_INTEGER ||
            r->element[1]->type != REDIS_REPLY_STRING) {
            cli_error("pull: %s: %s: SF.SCANDUMP: unexpected reply", server, key);
            goto done;
        }
        long long next = r->element[0]->integer;
        size_t n = r->element[1]->len;
        if (next == 0 && n == 0) break;
        if (next <= 0 || (unsigned long long)next != at + n || n == 0) {
            cli_error("pull: %s: %s: SF.SCANDUMP: chunk out of order", server, key);
            goto done;
        }
        unsigned char *grown = realloc(buf, len + n);
        if (grown == NULL) {
            cli_error("%s", bk_strerror(BK_ENOMEM));
            goto done;
        }
        buf = grown;
        memcpy(buf + len, r->element[1]->str, n);
        len += n;
        at = (unsigned long long)next;
        freeReplyObject(r);
        r = NULL;
    }
    if ((f = unwrap(server, key, buf, len)) == NULL) goto done;
    if (cli_save_filter(f, path) != BK_OK) goto done;
    if (!o.quiet)
        printf("pulled %s key %s to %s: %llu bytes\n", server, key, path,
               (unsigned long long)bk_filter_serialized_size(f));
    status = CLI_EXIT_OK;
done:
    if (r) freeReplyObject(r);
    free(buf);
    bk_filter_free(f);
    cluster_close(&c);
    return status;
}
