/*
 * cluster.h - client-side routing of sharded filters over a Redis Cluster
 * (cluster.c), for `bloomkit cluster` (cmd_cluster.c).
 *
 * A sharded filter NAME of S pieces is the keys NAME{0} ... NAME{S-1}, each
 * an ordinary BF (or CF) key of bloomkit.so; an item lives in exactly one
 * piece, cluster_piece(). The key scheme is documented in docs/MODULE.md
 * ("Sharded filters"): another client must compute the same pieces.
 */
#ifndef BLOOMKIT_CLI_CLUSTER_H
#define BLOOMKIT_CLI_CLUSTER_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint32_t, uint64_t */

#include <hiredis/hiredis.h> /* redisContext, redisReply */

#include "bloomkit.h"

#define CLUSTER_SLOTS 16384
#define CLUSTER_MAX_SHARDS 16384
#define CLUSTER_DEFAULT_SHARDS 64
/* The routing hash's seed: BK_DEFAULT_SEED ^ "SHARD" (0x5348415244), so
 * that the piece is independent of the bits the filter sets inside it. */
#define CLUSTER_ROUTE_SEED (BK_DEFAULT_SEED ^ UINT64_C(0x5348415244))

/* HASH_SLOT of Redis Cluster: CRC16-XMODEM of the key (or of its hash tag,
 * the bytes between the first '{' and the next '}' when not empty) mod
 * 16384. */
unsigned cluster_key_slot(const void *key, size_t len);

/* The piece (0..shards-1) of an item:
 *   lo = low 64 bits of bk_hash_key(item, len, CLUSTER_ROUTE_SEED)
 *   piece = (lo * shards) >> 64                    ("fast range") */
uint32_t cluster_piece(const void *item, size_t len, uint32_t shards);

typedef struct cluster_node {
    char *host;
    int port;
    char name[300];          /* "host:port" for messages */
    redisContext *ctx;       /* NULL until first used */
} cluster_node;

typedef struct cluster {
    const char *cmd;              /* "cluster add", for messages */
    char **seed_hosts;            /* --nodes, in order */
    int *seed_ports;
    size_t nseeds;
    cluster_node **nodes;         /* every master seen (never removed) */
    size_t nnodes, cap;
    int32_t slot_node[CLUSTER_SLOTS]; /* index into nodes, -1: uncovered */
    int refreshed;                /* CLUSTER SLOTS re-read in this run */
    int defer;                    /* keep node problems in deferred */
    char *deferred;
    size_t deferred_len;
    int hold;                     /* keep the first node problem in problem */
    char problem[1024];           /* "host:port: what went wrong" (hold) */
} cluster;

/* Check a --nodes list ("host:port,host:port", IPv6 as "[::1]:7000")
 * without connecting. Prints the problem and returns -1 when it is bad. */
int cluster_check_nodes(const char *cmd, const char *list);
/* The same for a list another argument holds (what: its name in messages). */
int cluster_check_list(const char *cmd, const char *what, const char *list);

/* Connect to the first seed of --nodes that answers CLUSTER SLOTS and load
 * the slot map (a server without cluster support holds every slot).
 * Prints the problem of every seed and returns -1 when none answers. */
int cluster_open(cluster *c, const char *cmd, const char *list);
void cluster_close(cluster *c);

/* Number of masters that own at least one slot. */
size_t cluster_masters(const cluster *c);

/* One command of a pipeline: its slot, its arguments, and after
 * cluster_run its reply and the node that gave it. */
typedef struct cluster_cmd {
    unsigned slot;
    int argc;
    const char **argv;
    const size_t *argvlen;
    redisReply *reply;
    cluster_node *node;
} cluster_cmd;

/* Send cmds[0..n) pipelined, one pipeline per node, and read every reply,
 * following MOVED (re-reading CLUSTER SLOTS) and ASK redirections, at most
 * a few hops per command. Error replies other than redirections are left
 * in cmds[i].reply for the caller. Returns 0, or -1 after printing a
 * transport problem (node named; with c->hold set, kept in c->problem
 * instead). After -1, the commands whose reply is NULL (or still a
 * redirection) went unanswered; a node that left replies unread is
 * disconnected, and connected again when next used. Free the replies with
 * cluster_free_replies either way. */
int cluster_run(cluster *c, cluster_cmd *cmds, size_t n);
void cluster_free_replies(cluster_cmd *cmds, size_t n);

#endif /* BLOOMKIT_CLI_CLUSTER_H */
