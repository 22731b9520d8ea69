/*
 * cluster.c - talking to a Redis Cluster for `bloomkit cluster`: the --nodes
 * list, connections (Debian's hiredis), the slot map, key slots, the piece
 * of an item, and pipelines that follow redirections.
 *
 * Slot map. CLUSTER SLOTS answers ranges [start, end] with their master
 * first ([ip, port, id]); slot_node[] maps each of the 16384 slots to a
 * node. Nodes are only ever added (a node pointer stays valid for the whole
 * run), and connected when a command first goes to them. A server without
 * cluster support ("ERR This instance has cluster support disabled") holds
 * every slot, so a sharded filter also works on one standalone server.
 *
 * Key slot (Redis Cluster specification): HASH_SLOT = CRC16(key) mod 16384,
 * CRC16 being CRC-16/XMODEM (polynomial 0x1021, initial value 0, no
 * reflection, no final xor; CRC16("123456789") = 0x31C3), and when the key
 * holds a '{' followed later by a '}' with at least one byte between them,
 * only those bytes are hashed. Piece i of NAME, key NAME{i}, is in the slot
 * of the decimal string i.
 *
 * Pipelines. cluster_run appends every command to its node's connection
 * (redisAppendCommandArgv), then reads each node's replies in order
 * (redisGetReply): one round trip per node, whatever the number of
 * commands. A reply "MOVED slot host:port" means the slot map is stale: it
 * is re-read (once per run), the slot is pointed at the node named, and the
 * command is sent again; "ASK slot host:port" (a slot being migrated) sends
 * ASKING and the command to that node once, leaving the map alone. At most
 * MAX_HOPS redirections per command: more is reported as a redirection
 * loop.
 */
#include <stdarg.h>   /* va_list */
#include <stdlib.h>   /* calloc, free, getenv, strtol */
#include <string.h>   /* memchr, strchr, strrchr, strerror */
#include <sys/time.h> /* struct timeval */

#include "cli.h"
#include "cluster.h"

#define MAX_HOPS 5
#define CONNECT_TIMEOUT_S 5
#define COMMAND_TIMEOUT_S 60

/*==========================================================================
 * Slots and pieces
 *==========================================================================*/

static uint16_t crc16_xmodem(const unsigned char *p, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021)
                                 : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned cluster_key_slot(const void *key, size_t len)
{
    const unsigned char *k = key;
    const unsigned char *open = len ? memchr(k, '{', len) : NULL;
    if (open != NULL) {
        size_t rest = len - (size_t)(open - k) - 1;
        const unsigned char *close = memchr(open + 1, '}', rest);
        if (close != NULL && close > open + 1)
            return crc16_xmodem(open + 1, (size_t)(close - open - 1)) &
                   (CLUSTER_SLOTS - 1);
    }
    return crc16_xmodem(k, len) & (CLUSTER_SLOTS - 1);
}

uint32_t cluster_piece(const void *item, size_t len, uint32_t shards)
{
    bk_hash h = bk_hash_key(item, len, CLUSTER_ROUTE_SEED);
    return (uint32_t)(((unsigned __int128)h.lo * shards) >> 64);
}

/*==========================================================================
 * --nodes
 *==========================================================================*/

/* Split "host:port" or "[v6]:port" (entry of len bytes) into a new host
 * string and a port. Returns 0, or -1 when it is not of that form. */
static int parse_addr(const char *entry, size_t len, char **host, int *port)
{
    const char *colon = NULL, *h = entry;
    size_t hlen;
    if (len > 0 && entry[0] == '[') {
        const char *close = memchr(entry, ']', len);
        if (close == NULL || close + 1 >= entry + len || close[1] != ':')
            return -1;
        h = entry + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = memchr(entry, ':', len);
        if (colon == NULL || memchr(colon + 1, ':', len - (size_t)(colon - entry) - 1))
            return -1;
        hlen = (size_t)(colon - entry);
    }
    if (hlen == 0 || hlen > 255) return -1;
    const char *p = colon + 1, *end = entry + len;
    if (p == end || end - p > 5) return -1;
    long v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
    }
    if (v < 1 || v > 65535) return -1;
    if (host != NULL) {
        *host = strndup(h, hlen);
        if (*host == NULL) return -1;
    }
    *port = (int)v;
    return 0;
}

/* Walk the list; with c, store the seeds. what names the list in messages
 * ("--nodes", or copy's "SRC" / "DST"). */
static int parse_list(const char *cmd, const char *what, const char *list, cluster *c)
{
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char *host = NULL;
        int port;
        if (parse_addr(p, len, c ? &host : NULL, &port) != 0) {
            cli_error("%s: %s: '%.*s' is not HOST:PORT", cmd, what, (int)len, p);
            return -1;
        }
        if (c != NULL) {
            char **hosts = realloc(c->seed_hosts, (c->nseeds + 1) * sizeof(*hosts));
            int *ports = hosts ? realloc(c->seed_ports, (c->nseeds + 1) * sizeof(*ports)) : NULL;
            if (hosts) c->seed_hosts = hosts;
            if (ports) c->seed_ports = ports;
            if (hosts == NULL || ports == NULL) {
                free(host);
                cli_error("%s", bk_strerror(BK_ENOMEM));
                return -1;
            }
            c->seed_hosts[c->nseeds] = host;
            c->seed_ports[c->nseeds] = port;
            c->nseeds++;
        }
        if (comma == NULL) return 0;
        p = comma + 1;
    }
}

static int parse_nodes(const char *cmd, const char *list, cluster *c)
{
    return parse_list(cmd, "--nodes", list, c);
}

int cluster_check_list(const char *cmd, const char *what, const char *list)
{
    return parse_list(cmd, what, list, NULL);
}

int cluster_check_nodes(const char *cmd, const char *list)
{
    return parse_nodes(cmd, list, NULL);
}

/*==========================================================================
 * Nodes and connections
 *==========================================================================*/

/* A problem with a node: printed as cli_error does, or, while the seeds of
 * --nodes are tried (c->defer), kept until every seed has failed, or, with
 * c->hold, kept in c->problem for the caller to say what it was doing. */
static void say(cluster *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void say(cluster *c, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (c->hold) {
        /* the first problem, without the leading "cmd: " */
        size_t skip = strlen(c->cmd);
        if (strncmp(line, c->cmd, skip) != 0 || strncmp(line + skip, ": ", 2) != 0) skip = 0;
        else skip += 2;
        if (c->problem[0] == '\0') snprintf(c->problem, sizeof(c->problem), "%s", line + skip);
        return;
    }
    if (!c->defer) {
        cli_error("%s", line);
        return;
    }
    size_t len = strlen(line);
    char *d = realloc(c->deferred, c->deferred_len + len + 12);
    if (d == NULL) return; /* the message is lost, the failure is not */
    memcpy(d + c->deferred_len, "bloomkit: ", 10);
    memcpy(d + c->deferred_len + 10, line, len);
    d[c->deferred_len + 10 + len] = '\n';
    c->deferred_len += len + 11;
    d[c->deferred_len] = '\0';
    c->deferred = d;
}

static cluster_node *find_or_add_node(cluster *c, const char *host, int port,
                                      int32_t *index)
{
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i]->port == port && strcmp(c->nodes[i]->host, host) == 0) {
            if (index) *index = (int32_t)i;
            return c->nodes[i];
        }
    if (c->nnodes == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        cluster_node **nodes = realloc(c->nodes, cap * sizeof(*nodes));
        if (nodes == NULL) goto nomem;
        c->nodes = nodes;
        c->cap = cap;
    }
    cluster_node *n = calloc(1, sizeof(*n));
    if (n == NULL || (n->host = strdup(host)) == NULL) {
        free(n);
        goto nomem;
    }
    n->port = port;
    snprintf(n->name, sizeof(n->name), strchr(host, ':') ? "[%s]:%d" : "%s:%d",
             host, port);
    if (index) *index = (int32_t)c->nnodes;
    c->nodes[c->nnodes++] = n;
    return n;
nomem:
    cli_error("%s", bk_strerror(BK_ENOMEM));
    return NULL;
}

static void disconnect(cluster_node *n)
{
    if (n->ctx != NULL) redisFree(n->ctx);
    n->ctx = NULL;
}

/* A reply of the expected kind, or a message naming node and command.
 * Frees the reply on failure. */
static int reply_ok(cluster *c, const cluster_node *n, const char *what,
                    redisReply *r)
{
    if (r == NULL) {
        say(c, "%s: %s: %s: %s", c->cmd, n->name, what,
                  n->ctx && n->ctx->err ? n->ctx->errstr : "no reply");
        return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        say(c, "%s: %s: %s: %s", c->cmd, n->name, what, r->str);
        freeReplyObject(r);
        return -1;
    }
    return 0;
}

/* Connect n if it is not yet; AUTH with $REDISCLI_AUTH (redis-cli's
 * variable) when set. Returns 0, or -1 after printing the problem. */
static int connect_node(cluster *c, cluster_node *n)
{
    if (n->ctx != NULL) {
        if (n->ctx->err == 0) return 0;
        disconnect(n); /* broken by an earlier error: try afresh */
    }
    struct timeval tv = {CONNECT_TIMEOUT_S, 0};
    n->ctx = redisConnectWithTimeout(n->host, n->port, tv);
    if (n->ctx == NULL) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        return -1;
    }
    if (n->ctx->err) {
        say(c, "%s: %s: cannot connect: %s", c->cmd, n->name, n->ctx->errstr);
        disconnect(n);
        return -1;
    }
    tv.tv_sec = COMMAND_TIMEOUT_S;
    redisSetTimeout(n->ctx, tv);
    const char *password = getenv("REDISCLI_AUTH");
    if (password != NULL && password[0] != '\0') {
        const char *argv[] = {"AUTH", password};
        redisReply *r = redisCommandArgv(n->ctx, 2, argv, NULL);
        if (reply_ok(c, n, "AUTH", r) != 0) {
            disconnect(n);
            return -1;
        }
        freeReplyObject(r);
    }
    return 0;
}

/*==========================================================================
 * Slot map
 *==========================================================================*/

/* Load the slot map from node n. Returns 0, or -1 after printing. */
static int load_slots(cluster *c, cluster_node *n)
{
    if (connect_node(c, n) != 0) return -1;
    const char *argv[] = {"CLUSTER", "SLOTS"};
    redisReply *r = redisCommandArgv(n->ctx, 2, argv, NULL);
    if (r != NULL && r->type == REDIS_REPLY_ERROR &&
        (strstr(r->str, "cluster support disabled") != NULL ||
         strncmp(r->str, "ERR unknown command", 19) == 0)) {
        /* a standalone server (Redis says "cluster support disabled", an
         * older bloomkit-server has no CLUSTER command): every slot is its own */
        freeReplyObject(r);
        int32_t self;
        if (find_or_add_node(c, n->host, n->port, &self) == NULL) return -1;
        for (unsigned s = 0; s < CLUSTER_SLOTS; s++) c->slot_node[s] = self;
        return 0;
    }
    if (reply_ok(c, n, "CLUSTER SLOTS", r) != 0) return -1;
    int32_t map[CLUSTER_SLOTS];
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++) map[s] = -1;
    int status = -1;
    if (r->type != REDIS_REPLY_ARRAY) goto bad;
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *range = r->element[i];
        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
            range->element[0]->type != REDIS_REPLY_INTEGER ||
            range->element[1]->type != REDIS_REPLY_INTEGER)
            goto bad;
        long long lo = range->element[0]->integer;
        long long hi = range->element[1]->integer;
        redisReply *master = range->element[2];
        if (lo < 0 || hi >= CLUSTER_SLOTS || lo > hi ||
            master->type != REDIS_REPLY_ARRAY || master->elements < 2 ||
            master->element[0]->type != REDIS_REPLY_STRING ||
            master->element[1]->type != REDIS_REPLY_INTEGER)
            goto bad;
        /* an empty or "?" address means "the node you asked" */
        const char *host = master->element[0]->str;
        if (host[0] == '\0' || strcmp(host, "?") == 0) host = n->host;
        long long port = master->element[1]->integer;
        if (port < 1 || port > 65535) goto bad;
        int32_t index;
        if (find_or_add_node(c, host, (int)port, &index) == NULL) goto done;
        for (long long s = lo; s <= hi; s++) map[s] = index;
    }
    memcpy(c->slot_node, map, sizeof(map));
    status = 0;
    goto done;
bad:
    say(c, "%s: %s: CLUSTER SLOTS: unexpected reply", c->cmd, n->name);
done:
    freeReplyObject(r);
    return status;
}

/* Re-read the slot map from any node that answers. */
static int refresh_slots(cluster *c)
{
    c->refreshed = 1;
    for (size_t i = 0; i < c->nnodes; i++)
        if (load_slots(c, c->nodes[i]) == 0) return 0;
    return -1;
}

int cluster_open(cluster *c, const char *cmd, const char *list)
{
    memset(c, 0, sizeof(*c));
    c->cmd = cmd;
    for (unsigned s = 0; s < CLUSTER_SLOTS; s++) c->slot_node[s] = -1;
    if (parse_nodes(cmd, list, c) != 0) return -1;
    int status = -1;
    c->defer = 1;
    for (size_t i = 0; i < c->nseeds && status != 0; i++) {
        cluster_node *n = find_or_add_node(c, c->seed_hosts[i], c->seed_ports[i], NULL);
        if (n == NULL) break;
        status = load_slots(c, n);
    }
    c->defer = 0;
    if (status != 0 && c->deferred != NULL) fputs(c->deferred, stderr);
    free(c->deferred);
    c->deferred = NULL;
    c->deferred_len = 0;
    return status;
}

void cluster_close(cluster *c)
{
    for (size_t i = 0; i < c->nnodes; i++) {
        disconnect(c->nodes[i]);
        free(c->nodes[i]->host);
        free(c->nodes[i]);
    }
    free(c->nodes);
    for (size_t i = 0; i < c->nseeds; i++) free(c->seed_hosts[i]);
    free(c->seed_hosts);
    free(c->seed_ports);
    memset(c, 0, sizeof(*c));
}

size_t cluster_masters(const cluster *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        for (unsigned s = 0; s < CLUSTER_SLOTS; s++)
            if (c->slot_node[s] == (int32_t)i) {
                n++;
                break;
            }
    return n;
}

/* The node serving slot, connected; NULL after printing a problem. */
static cluster_node *node_for_slot(cluster *c, unsigned slot)
{
    int32_t i = c->slot_node[slot];
    if (i < 0) {
        say(c, "%s: slot %u is not served by any master (is the cluster "
                  "down?)", c->cmd, slot);
        return NULL;
    }
    return connect_node(c, c->nodes[i]) == 0 ? c->nodes[i] : NULL;
}

/*==========================================================================
 * Pipelines
 *==========================================================================*/

static int is_redirect(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_ERROR &&
           (strncmp(r->str, "MOVED ", 6) == 0 || strncmp(r->str, "ASK ", 4) == 0);
}

static int transport_error(cluster *c, const cluster_node *n)
{
    say(c, "%s: %s: %s", c->cmd, n->name,
              n->ctx && n->ctx->err ? n->ctx->errstr : "connection lost");
    return -1;
}

/* cmd->reply is MOVED or ASK: send the command where it says, until an
 * answer that is not a redirection, at most MAX_HOPS times. */
static int follow(cluster *c, cluster_cmd *cmd)
{
    for (int hop = 0; hop < MAX_HOPS && is_redirect(cmd->reply); hop++) {
        const char *text = cmd->reply->str;
        int ask = text[0] == 'A';
        /* "MOVED 3999 127.0.0.1:6381": the address after the second space;
         * its port after the last ':' (an IPv6 host is not bracketed) */
        const char *addr = strchr(strchr(text, ' ') + 1, ' ');
        const char *colon = addr ? strrchr(addr, ':') : NULL;
        char *end;
        long port = colon ? strtol(colon + 1, &end, 10) : 0;
        if (addr == NULL || colon == NULL || *end != '\0' || port < 1 ||
            port > 65535) {
            say(c, "%s: %s: bad redirection '%s'", c->cmd, cmd->node->name,
                      text);
            return -1;
        }
        char host[256];
        size_t hlen = (size_t)(colon - addr - 1);
        if (hlen == 0) snprintf(host, sizeof(host), "%s", cmd->node->host);
        else snprintf(host, sizeof(host), "%.*s", (int)hlen, addr + 1);
        int32_t index;
        cluster_node *target = find_or_add_node(c, host, (int)port, &index);
        if (target == NULL) return -1;
        if (!ask) {
            if (!c->refreshed) refresh_slots(c); /* best effort */
            c->slot_node[cmd->slot] = index;     /* trust the redirection */
        }
        if (connect_node(c, target) != 0) return -1;
        if (ask) {
            const char *asking[] = {"ASKING"};
            redisReply *r = redisCommandArgv(target->ctx, 1, asking, NULL);
            if (reply_ok(c, target, "ASKING", r) != 0) return -1;
            freeReplyObject(r);
        }
        redisReply *r = redisCommandArgv(target->ctx, cmd->argc, cmd->argv,
                                         cmd->argvlen);
        if (r == NULL) return transport_error(c, target);
        freeReplyObject(cmd->reply);
        cmd->reply = r;
        cmd->node = target;
    }
    if (is_redirect(cmd->reply)) {
        say(c, "%s: %s: slot %u: more than %d redirections (last: %s)",
                  c->cmd, cmd->node->name, cmd->slot, MAX_HOPS,
                  cmd->reply->str);
        return -1;
    }
    return 0;
}

/* After a failed run: a node some of whose commands went unanswered is
 * disconnected, so that the next run (which connects it again) does not
 * read those replies as its own. */
static int run_failed(cluster_cmd *cmds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (cmds[i].reply == NULL && cmds[i].node != NULL) disconnect(cmds[i].node);
    return -1;
}

int cluster_run(cluster *c, cluster_cmd *cmds, size_t n)
{
    c->refreshed = 0;
    for (size_t i = 0; i < n; i++) cmds[i].reply = NULL, cmds[i].node = NULL;
    for (size_t i = 0; i < n; i++) {
        cmds[i].node = node_for_slot(c, cmds[i].slot);
        if (cmds[i].node == NULL) return run_failed(cmds, n);
        if (redisAppendCommandArgv(cmds[i].node->ctx, cmds[i].argc,
                                   cmds[i].argv, cmds[i].argvlen) != REDIS_OK) {
            cli_error("%s", bk_strerror(BK_ENOMEM));
            return run_failed(cmds, n);
        }
    }
    /* Each node's replies come in the order its commands were appended. */
    for (size_t k = 0; k < c->nnodes; k++) {
        cluster_node *node = c->nodes[k];
        for (size_t i = 0; i < n; i++) {
            if (cmds[i].node != node) continue;
            void *r = NULL;
            if (redisGetReply(node->ctx, &r) != REDIS_OK || r == NULL) {
                transport_error(c, node);
                return run_failed(cmds, n);
            }
            cmds[i].reply = r;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (is_redirect(cmds[i].reply) && follow(c, &cmds[i]) != 0) return -1;
    return 0;
}

void cluster_free_replies(cluster_cmd *cmds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (cmds[i].reply != NULL) freeReplyObject(cmds[i].reply);
        cmds[i].reply = NULL;
    }
}
