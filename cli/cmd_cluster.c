/*
 * cmd_cluster.c - `bloomkit cluster create|add|check|info`: one logical
 * filter sharded over every master of a Redis Cluster running bloomkit.so.
 *
 * A sharded filter NAME of S pieces is the keys NAME{0} ... NAME{S-1}, each
 * a BF (or CF) key sized for about N/S items. An item lives in exactly one
 * piece, cluster_piece(item) (cluster.h), so all its probes hit one key on
 * one node, and the union of the pieces has the false-positive rate of one
 * piece. Redis Cluster hashes only the hash tag of NAME{i}, the decimal
 * string i: the pieces spread over the slots of "0" ... "S-1", and so over
 * the masters (docs/MODULE.md, "Sharded filters").
 *
 * Each batch of keys from the reader (input.c) is routed to pieces, grouped
 * per piece into commands of at most ITEMS_PER_COMMAND items, and sent as
 * one pipeline per node (cluster_run). S is not stored anywhere: add, check
 * and info take the same --shards as create, and check the shape first
 * (piece S-1 exists, piece S does not), so a wrong S is an error instead of
 * silently misrouted items.
 */
#include <math.h>   /* ceil, sqrt */
#include <stdlib.h> /* calloc, free */
#include <string.h> /* strcmp, strchr */

#include "cli.h"
#include "cluster.h"

#define ITEMS_PER_COMMAND 1000
#define ACTIONS "create, add, check or info"

typedef struct sharded {
    cluster c;
    const char *cmd;        /* "cluster add" */
    const char *name;
    uint32_t shards;
    int cuckoo;             /* the pieces are CF keys (else BF) */
    char **keys;            /* NAME{i}, i = 0..shards (one past the end) */
    size_t *key_lens;
    unsigned *slots;
} sharded;

/*==========================================================================
 * Pieces
 *==========================================================================*/

static int sharded_init(sharded *s, const char *cmd, const char *name,
                        uint32_t shards)
{
    memset(s, 0, sizeof(*s));
    s->cmd = cmd;
    s->name = name;
    s->shards = shards;
    s->keys = calloc((size_t)shards + 1, sizeof(*s->keys));
    s->key_lens = calloc((size_t)shards + 1, sizeof(*s->key_lens));
    s->slots = calloc((size_t)shards + 1, sizeof(*s->slots));
    if (s->keys == NULL || s->key_lens == NULL || s->slots == NULL) goto nomem;
    for (uint32_t i = 0; i <= shards; i++) {
        int len = asprintf(&s->keys[i], "%s{%u}", name, i);
        if (len < 0) {
            s->keys[i] = NULL;
            goto nomem;
        }
        s->key_lens[i] = (size_t)len;
        s->slots[i] = cluster_key_slot(s->keys[i], s->key_lens[i]);
    }
    return 0;
nomem:
    cli_error("%s", bk_strerror(BK_ENOMEM));
    return -1;
}

static void sharded_free(sharded *s)
{
    if (s->keys != NULL)
        for (uint32_t i = 0; i <= s->shards; i++) free(s->keys[i]);
    free(s->keys);
    free(s->key_lens);
    free(s->slots);
    cluster_close(&s->c);
}

/* One command per piece i of [0, n): argv[0] = verb, argv[1] = key i,
 * then the extra arguments. */
static int per_piece(sharded *s, uint32_t n, const char *verb,
                     const char *const *extra, int nextra, cluster_cmd **out)
{
    int argc = 2 + nextra;
    cluster_cmd *cmds = calloc(n, sizeof(*cmds));
    const char **argv = calloc((size_t)n * (size_t)argc, sizeof(*argv));
    size_t *lens = calloc((size_t)n * (size_t)argc, sizeof(*lens));
    if (cmds == NULL || argv == NULL || lens == NULL) {
        free(cmds);
        free(argv);
        free(lens);
        cli_error("%s", bk_strerror(BK_ENOMEM));
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        const char **a = argv + (size_t)i * (size_t)argc;
        size_t *l = lens + (size_t)i * (size_t)argc;
        a[0] = verb;
        a[1] = s->keys[i];
        for (int j = 0; j < nextra; j++) a[2 + j] = extra[j];
        for (int j = 0; j < argc; j++) l[j] = strlen(a[j]);
        l[1] = s->key_lens[i];
        cmds[i].slot = s->slots[i];
        cmds[i].argc = argc;
        cmds[i].argv = a;
        cmds[i].argvlen = l;
    }
    *out = cmds;
    return 0;
}

static void per_piece_free(cluster_cmd *cmds, uint32_t n)
{
    if (cmds == NULL) return;
    cluster_free_replies(cmds, n);
    free((void *)cmds[0].argv);
    free((void *)cmds[0].argvlen);
    free(cmds);
}

/* An error reply to a command on piece `key`: report it, naming the node.
 * Returns 1 when r is an error (reported), else 0. */
static int reply_error(const sharded *s, const cluster_cmd *cmd,
                       const char *key, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ERROR) return 0;
    cli_error("%s: %s: %s: %s", s->cmd, cmd->node->name, key, r->str);
    return 1;
}

/* Check the filter has exactly s->shards pieces (piece S-1 exists, piece S
 * does not) and learn their type from piece S-1. */
static int check_shape(sharded *s)
{
    uint32_t last = s->shards - 1;
    const char *type_argv[] = {"TYPE", s->keys[last]};
    const char *exists_argv[] = {"EXISTS", s->keys[s->shards]};
    size_t type_lens[] = {4, s->key_lens[last]};
    size_t exists_lens[] = {6, s->key_lens[s->shards]};
    cluster_cmd cmds[2] = {
        {.slot = s->slots[last], .argc = 2, .argv = type_argv, .argvlen = type_lens},
        {.slot = s->slots[s->shards], .argc = 2, .argv = exists_argv, .argvlen = exists_lens},
    };
    int status = -1;
    if (cluster_run(&s->c, cmds, 2) != 0) goto done;
    redisReply *type = cmds[0].reply, *exists = cmds[1].reply;
    if (reply_error(s, &cmds[0], s->keys[last], type) ||
        reply_error(s, &cmds[1], s->keys[s->shards], exists))
        goto done;
    if (type->type != REDIS_REPLY_STATUS || exists->type != REDIS_REPLY_INTEGER) {
        cli_error("%s: %s: unexpected reply to TYPE or EXISTS", s->cmd, s->name);
        goto done;
    }
    if (strcmp(type->str, "none") == 0) {
        cli_error("%s: %s: piece %s does not exist (create the filter with "
                  "'bloomkit cluster create'; give the --shards it was "
                  "created with)", s->cmd, s->name, s->keys[last]);
        goto done;
    }
    if (strcmp(type->str, "bkbloom--") == 0) s->cuckoo = 0;
    else if (strcmp(type->str, "bkcuckoo-") == 0) s->cuckoo = 1;
    else {
        cli_error("%s: %s: piece %s is of type '%s', not a bloomkit BF or CF "
                  "filter", s->cmd, s->name, s->keys[last], type->str);
        goto done;
    }
    if (exists->integer != 0) {
        cli_error("%s: %s: piece %s exists: the filter has more than %u "
                  "pieces (give the --shards it was created with)", s->cmd,
                  s->name, s->keys[s->shards], s->shards);
        goto done;
    }
    status = 0;
done:
    cluster_free_replies(cmds, 2);
    return status;
}

/*==========================================================================
 * Routing a batch of keys
 *==========================================================================*/

typedef struct route {
    uint32_t *counts;       /* keys per piece, then prefix sums (shards + 1) */
    uint32_t *piece_of;     /* piece of each key of the batch */
    size_t *order;          /* key indices grouped by piece, input order kept */
    cluster_cmd *cmds;
    uint32_t *cmd_piece;
    size_t *cmd_first;      /* index into order of the command's first key */
    const char **argv;
    size_t *argvlen;
    size_t ncmds;
    int nprefix;            /* arguments between the key and the items */
} route;

static int route_init(route *r, uint32_t shards)
{
    size_t max_cmds = CLI_BATCH_KEYS / ITEMS_PER_COMMAND + 1 + shards;
    size_t max_args = CLI_BATCH_KEYS + 4 * max_cmds;
    memset(r, 0, sizeof(*r));
    r->counts = calloc((size_t)shards + 1, sizeof(*r->counts));
    r->piece_of = calloc(CLI_BATCH_KEYS, sizeof(*r->piece_of));
    r->order = calloc(CLI_BATCH_KEYS, sizeof(*r->order));
    r->cmds = calloc(max_cmds, sizeof(*r->cmds));
    r->cmd_piece = calloc(max_cmds, sizeof(*r->cmd_piece));
    r->cmd_first = calloc(max_cmds, sizeof(*r->cmd_first));
    r->argv = calloc(max_args, sizeof(*r->argv));
    r->argvlen = calloc(max_args, sizeof(*r->argvlen));
    if (!r->counts || !r->piece_of || !r->order || !r->cmds || !r->cmd_piece ||
        !r->cmd_first || !r->argv || !r->argvlen) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        return -1;
    }
    return 0;
}

static void route_free(route *r)
{
    if (r->cmds != NULL) cluster_free_replies(r->cmds, r->ncmds);
    free(r->counts);
    free(r->piece_of);
    free(r->order);
    free(r->cmds);
    free(r->cmd_piece);
    free(r->cmd_first);
    free((void *)r->argv);
    free(r->argvlen);
}

/* Build the commands for the keys of b: for each piece holding keys,
 * "verb KEY [prefix...] item..." of at most ITEMS_PER_COMMAND items. */
static void route_batch(route *r, const sharded *s, const key_batch *b,
                        const char *verb, const char *const *prefix,
                        int nprefix)
{
    /* counting sort of the keys by piece, stable */
    memset(r->counts, 0, ((size_t)s->shards + 1) * sizeof(*r->counts));
    for (size_t k = 0; k < b->n; k++) {
        r->piece_of[k] = cluster_piece(b->keys[k], b->lens[k], s->shards);
        r->counts[r->piece_of[k] + 1]++;
    }
    for (uint32_t p = 0; p < s->shards; p++) r->counts[p + 1] += r->counts[p];
    /* r->counts[p] is now the start of piece p in order */
    for (size_t k = 0; k < b->n; k++) r->order[r->counts[r->piece_of[k]]++] = k;
    /* counts[p] is now the end of piece p, i.e. the start of piece p + 1 */
    size_t nargs = 0, start = 0;
    r->ncmds = 0;
    r->nprefix = nprefix;
    for (uint32_t p = 0; p < s->shards; p++) {
        size_t end = r->counts[p];
        for (size_t first = start; first < end; first += ITEMS_PER_COMMAND) {
            size_t n = end - first < ITEMS_PER_COMMAND ? end - first
                                                        : ITEMS_PER_COMMAND;
            cluster_cmd *cmd = &r->cmds[r->ncmds];
            const char **a = r->argv + nargs;
            size_t *l = r->argvlen + nargs;
            int argc = 0;
            a[argc] = verb;
            l[argc++] = strlen(verb);
            a[argc] = s->keys[p];
            l[argc++] = s->key_lens[p];
            for (int j = 0; j < nprefix; j++) {
                a[argc] = prefix[j];
                l[argc++] = strlen(prefix[j]);
            }
            for (size_t j = 0; j < n; j++) {
                size_t k = r->order[first + j];
                a[argc] = b->keys[k];
                l[argc++] = b->lens[k];
            }
            cmd->slot = s->slots[p];
            cmd->argc = argc;
            cmd->argv = a;
            cmd->argvlen = l;
            cmd->reply = NULL;
            r->cmd_piece[r->ncmds] = p;
            r->cmd_first[r->ncmds] = first;
            r->ncmds++;
            nargs += (size_t)argc;
        }
        start = end;
    }
}

/* Send the batch's commands and store each key's integer answer in
 * values[key]. Returns 0, or -1 after reporting the first problem. */
static int route_run(route *r, sharded *s, long long *values)
{
    int status = -1;
    if (cluster_run(&s->c, r->cmds, r->ncmds) != 0) goto done;
    for (size_t i = 0; i < r->ncmds; i++) {
        cluster_cmd *cmd = &r->cmds[i];
        const char *key = s->keys[r->cmd_piece[i]];
        redisReply *rep = cmd->reply;
        if (reply_error(s, cmd, key, rep)) goto done;
        size_t nitems = (size_t)(cmd->argc - 2 - r->nprefix);
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements > nitems) {
            cli_error("%s: %s: %s: unexpected reply", s->cmd, cmd->node->name,
                      key);
            goto done;
        }
        for (size_t e = 0; e < rep->elements; e++) {
            redisReply *el = rep->element[e];
            if (reply_error(s, cmd, key, el)) goto done;
            if (el->type != REDIS_REPLY_INTEGER) {
                cli_error("%s: %s: %s: unexpected reply", s->cmd,
                          cmd->node->name, key);
                goto done;
            }
            values[r->order[r->cmd_first[i] + e]] = el->integer;
        }
        if (rep->elements < nitems) {  /* only after an error element */
            cli_error("%s: %s: %s: %zu answers for %zu items", s->cmd,
                      cmd->node->name, key, rep->elements, nitems);
            goto done;
        }
    }
    status = 0;
done:
    cluster_free_replies(r->cmds, r->ncmds);
    return status;
}

/*==========================================================================
 * create
 *==========================================================================*/

/* Items per piece: the mean N/S plus 4 standard deviations of the binomial
 * count of a piece, so that the fullest piece (of up to 16384) very likely
 * stays within its capacity: BF pieces then keep one stage, and none grows
 * (a grown BF stage is twice the size of the first). */
static uint64_t piece_capacity(uint64_t n, uint32_t shards, int cuckoo)
{
    double mean = (double)n / shards;
    double c = ceil(mean + 4 * sqrt(mean * (1 - 1.0 / shards)));
    uint64_t cap = c >= 9.2e18 ? UINT64_C(9200000000000000000) : (uint64_t)c;
    if (cap < 1) cap = 1;
    if (cuckoo && cap < 4) cap = 4; /* CF.RESERVE: at least 2 x bucket size */
    return cap;
}

static int check_create(const cli_options *o)
{
    if (!(o->given & OPTBIT(OPT_CAPACITY))) {
        cli_error("cluster create: --capacity is required to create a filter");
        return -1;
    }
    if (!o->cluster_cuckoo && !(o->given & OPTBIT(OPT_ERROR))) {
        cli_error("cluster create: --error is required for --type bloom");
        return -1;
    }
    if (o->cluster_cuckoo && (o->given & OPTBIT(OPT_ERROR))) {
        cli_error("cluster create: --error does not apply to --type cuckoo "
                  "(the module sizes its fingerprints for at most 1%%)");
        return -1;
    }
    return 0;
}

static int run_create(sharded *s, const cli_options *o)
{
    cluster_cmd *exists = NULL, *reserve = NULL;
    int status = CLI_EXIT_ERROR;
    s->cuckoo = o->cluster_cuckoo;
    uint64_t cap = piece_capacity(o->config.capacity, s->shards, s->cuckoo);
    char cap_text[32], error_text[40];
    snprintf(cap_text, sizeof(cap_text), "%llu", (unsigned long long)cap);
    snprintf(error_text, sizeof(error_text), "%.17g", o->config.fpr);

    /* Refuse before anything is created when a piece exists. */
    if (per_piece(s, s->shards, "EXISTS", NULL, 0, &exists) != 0) goto done;
    if (cluster_run(&s->c, exists, s->shards) != 0) goto done;
    for (uint32_t i = 0; i < s->shards; i++) {
        redisReply *r = exists[i].reply;
        if (reply_error(s, &exists[i], s->keys[i], r)) goto done;
        if (r->type == REDIS_REPLY_INTEGER && r->integer != 0) {
            cli_error("%s: %s: piece %s already exists (on %s)", s->cmd,
                      s->name, s->keys[i], exists[i].node->name);
            goto done;
        }
    }

    const char *bf_extra[] = {error_text, cap_text};
    const char *cf_extra[] = {cap_text};
    if (per_piece(s, s->shards, s->cuckoo ? "CF.RESERVE" : "BF.RESERVE",
                  s->cuckoo ? cf_extra : bf_extra, s->cuckoo ? 1 : 2,
                  &reserve) != 0)
        goto done;
    if (cluster_run(&s->c, reserve, s->shards) != 0) goto done;
    for (uint32_t i = 0; i < s->shards; i++)
        if (reply_error(s, &reserve[i], s->keys[i], reserve[i].reply))
            goto done;

    /* Every master should hold a piece, else it does no share of the work. */
    size_t holding = 0;
    for (size_t m = 0; m < s->c.nnodes; m++) {
        const cluster_node *node = s->c.nodes[m];
        uint32_t pieces = 0;
        for (uint32_t i = 0; i < s->shards; i++) pieces += reserve[i].node == node;
        int master = 0;
        for (unsigned slot = 0; slot < CLUSTER_SLOTS && !master; slot++)
            master = s->c.slot_node[slot] == (int32_t)m;
        holding += pieces > 0;
        if (master && pieces == 0)
            cli_error("%s: warning: master %s holds none of the %u pieces of "
                      "%s (more --shards spread it further)", s->cmd,
                      node->name, s->shards, s->name);
    }
    if (!o->quiet)
        cli_error("%s: %s: %u %s pieces of capacity %s on %zu masters", s->cmd,
                  s->name, s->shards, s->cuckoo ? "cuckoo" : "bloom", cap_text,
                  holding);
    status = CLI_EXIT_OK;
done:
    per_piece_free(exists, s->shards);
    per_piece_free(reserve, s->shards);
    return status;
}

/*==========================================================================
 * add, check
 *==========================================================================*/

/* Stream the keys of the INPUTs through verb (BF.INSERT ... or
 * BF.MEXISTS), calling `done_batch` with each batch and its answers. */
typedef int (*batch_fn)(sharded *s, const cli_options *o, const key_batch *b,
                        const route *r, const long long *values, void *state);

static int stream_keys(sharded *s, const cli_options *o, const char *verb,
                       const char *const *prefix, int nprefix,
                       const char *what, batch_fn done_batch, void *state)
{
    key_reader *reader = NULL;
    key_batch b = {0};
    route r = {0};
    long long *values = NULL;
    int status = -1;
    if (key_reader_open(&reader, o->args + 1, o->nargs - 1, o) != 0) goto done;
    if (key_batch_init(&b) != 0 || route_init(&r, s->shards) != 0) goto done;
    values = calloc(CLI_BATCH_KEYS, sizeof(*values));
    if (values == NULL) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        goto done;
    }
    progress prog;
    progress_init(&prog, what, o->quiet);
    uint64_t keys = 0;
    for (;;) {
        if (key_reader_fill(reader, &b) != 0) goto done;
        if (b.n == 0) break;
        keys += b.n;
        route_batch(&r, s, &b, verb, prefix, nprefix);
        if (route_run(&r, s, values) != 0) goto done;
        if (done_batch(s, o, &b, &r, values, state) != 0) goto done;
        progress_update(&prog, key_reader_bytes(reader),
                        key_reader_total(reader), keys);
    }
    progress_finish(&prog, key_reader_bytes(reader), key_reader_total(reader),
                    keys);
    status = 0;
done:
    free(values);
    route_free(&r);
    key_batch_free(&b);
    key_reader_free(reader);
    return status;
}

typedef struct add_state {
    uint64_t items, fresh;
} add_state;

static int add_batch(sharded *s, const cli_options *o, const key_batch *b,
                     const route *r, const long long *values, void *state)
{
    add_state *st = state;
    (void)o;
    for (size_t k = 0; k < b->n; k++) {
        if (values[k] < 0) { /* CF.INSERT: no room, even after growing */
            cli_error("%s: %s: piece %s is full: an item was not added",
                      s->cmd, s->name, s->keys[r->piece_of[k]]);
            return -1;
        }
        st->fresh += values[k] == 1;
    }
    st->items += b->n;
    return 0;
}

static int run_add(sharded *s, const cli_options *o)
{
    static const char *const prefix[] = {"NOCREATE", "ITEMS"};
    add_state st = {0, 0};
    if (check_shape(s) != 0) return CLI_EXIT_ERROR;
    if (stream_keys(s, o, s->cuckoo ? "CF.INSERT" : "BF.INSERT", prefix, 2,
                    "adding", add_batch, &st) != 0)
        return CLI_EXIT_ERROR;
    if (!o->quiet)
        cli_error("%s: %s: %llu items added, %llu new (%u pieces on %zu "
                  "masters)", s->cmd, s->name, (unsigned long long)st.items,
                  (unsigned long long)st.fresh, s->shards,
                  cluster_masters(&s->c));
    return CLI_EXIT_OK;
}

static int check_batch(sharded *s, const cli_options *o, const key_batch *b,
                       const route *r, const long long *values, void *state)
{
    uint64_t *selected = state;
    char term = o->nul ? '\0' : '\n';
    (void)s;
    (void)r;
    for (size_t k = 0; k < b->n; k++) {
        if ((values[k] != 0) == (o->invert != 0)) continue;
        (*selected)++;
        if (!o->total) {
            fwrite(b->lines[k], 1, b->line_lens[k], stdout);
            putchar(term);
        }
    }
    fflush(stdout);
    return 0;
}

static int run_check(sharded *s, const cli_options *o)
{
    uint64_t selected = 0;
    if (check_shape(s) != 0) return CLI_EXIT_ERROR;
    if (stream_keys(s, o, s->cuckoo ? "CF.MEXISTS" : "BF.MEXISTS", NULL, 0,
                    "checking", check_batch, &selected) != 0)
        return CLI_EXIT_ERROR;
    if (o->total) printf("%llu\n", (unsigned long long)selected);
    return selected > 0 ? CLI_EXIT_OK : CLI_EXIT_NONE;
}

/*==========================================================================
 * info
 *==========================================================================*/

/* The integer after the field `name` of a flat *.INFO reply, or -1. */
static long long info_field(const redisReply *r, const char *name)
{
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *v = r->element[i + 1];
        if ((k->type == REDIS_REPLY_STRING || k->type == REDIS_REPLY_STATUS) &&
            strcmp(k->str, name) == 0)
            return v->type == REDIS_REPLY_INTEGER ? v->integer : -1;
    }
    return -1;
}

typedef struct piece_info {
    long long capacity, items, filters, bytes;
} piece_info;

static int run_info(sharded *s, const cli_options *o)
{
    cluster_cmd *cmds = NULL;
    piece_info *pi = NULL;
    int status = CLI_EXIT_ERROR;
    (void)o;
    if (check_shape(s) != 0) goto done;
    if (per_piece(s, s->shards, s->cuckoo ? "CF.INFO" : "BF.INFO", NULL, 0,
                  &cmds) != 0)
        goto done;
    pi = calloc(s->shards, sizeof(*pi));
    if (pi == NULL) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        goto done;
    }
    if (cluster_run(&s->c, cmds, s->shards) != 0) goto done;
    unsigned long long capacity = 0, items = 0, filters = 0, bytes = 0;
    for (uint32_t i = 0; i < s->shards; i++) {
        redisReply *r = cmds[i].reply;
        if (reply_error(s, &cmds[i], s->keys[i], r)) goto done;
        if (r->type != REDIS_REPLY_ARRAY) goto bad;
        if (s->cuckoo) {
            long long buckets = info_field(r, "Number of buckets");
            long long bucket_size = info_field(r, "Bucket size");
            pi[i].capacity = buckets < 0 || bucket_size < 0 ? -1
                                                            : buckets * bucket_size;
        } else {
            pi[i].capacity = info_field(r, "Capacity");
        }
        pi[i].items = info_field(r, "Number of items inserted");
        pi[i].filters = info_field(r, "Number of filters");
        pi[i].bytes = info_field(r, "Size");
        if (pi[i].capacity < 0 || pi[i].items < 0 || pi[i].filters < 0 ||
            pi[i].bytes < 0)
            goto bad;
        capacity += (unsigned long long)pi[i].capacity;
        items += (unsigned long long)pi[i].items;
        filters += (unsigned long long)pi[i].filters;
        bytes += (unsigned long long)pi[i].bytes;
        continue;
    bad:
        cli_error("%s: %s: %s: unexpected %s reply", s->cmd, cmds[i].node->name,
                  s->keys[i], s->cuckoo ? "CF.INFO" : "BF.INFO");
        goto done;
    }
    size_t holding = 0;
    for (size_t m = 0; m < s->c.nnodes; m++)
        for (uint32_t i = 0; i < s->shards; i++)
            if (cmds[i].node == s->c.nodes[m]) {
                holding++;
                break;
            }
    printf("name:      %s\n", s->name);
    printf("type:      %s\n", s->cuckoo ? "cuckoo" : "bloom");
    printf("pieces:    %u (%s ... %s)\n", s->shards, s->keys[0],
           s->keys[s->shards - 1]);
    printf("masters:   %zu of %zu\n", holding, cluster_masters(&s->c));
    printf("capacity:  %llu items\n", capacity);
    printf("items:     %llu\n", items);
    printf("filters:   %llu\n", filters);
    printf("size:      %llu bytes\n", bytes);
    printf("\n%-24s %7s %12s %14s\n", "master", "pieces", "items", "bytes");
    for (size_t m = 0; m < s->c.nnodes; m++) {
        unsigned long long n = 0, it = 0, by = 0;
        for (uint32_t i = 0; i < s->shards; i++)
            if (cmds[i].node == s->c.nodes[m]) {
                n++;
                it += (unsigned long long)pi[i].items;
                by += (unsigned long long)pi[i].bytes;
            }
        if (n > 0)
            printf("%-24s %7llu %12llu %14llu\n", s->c.nodes[m]->name, n, it, by);
    }
    printf("\n%-24s %-24s %5s %12s %12s %7s %12s\n", "piece", "master", "slot",
           "capacity", "items", "filters", "bytes");
    for (uint32_t i = 0; i < s->shards; i++)
        printf("%-24s %-24s %5u %12lld %12lld %7lld %12lld\n", s->keys[i],
               cmds[i].node->name, s->slots[i], pi[i].capacity, pi[i].items,
               pi[i].filters, pi[i].bytes);
    status = CLI_EXIT_OK;
done:
    free(pi);
    per_piece_free(cmds, s->shards);
    return status;
}

/*==========================================================================
 * Dispatch
 *==========================================================================*/

static const struct {
    const char *name;
    const char *cmd;                /* for messages */
    uint64_t allowed;
    int inputs;                     /* NAME [INPUT...], else just NAME */
    int (*check)(const cli_options *o);
    int (*run)(sharded *s, const cli_options *o);
} actions[] = {
    {"create", "cluster create",
     OPTBIT(OPT_NODES) | OPTBIT(OPT_SHARDS) | OPTBIT(OPT_CAPACITY) |
         OPTBIT(OPT_ERROR) | OPTBIT(OPT_CLUSTER_TYPE) | OPTBIT(OPT_QUIET),
     0, check_create, run_create},
    {"add", "cluster add", OPTBIT(OPT_NODES) | OPTBIT(OPT_SHARDS) | OPTS_INPUT,
     1, NULL, run_add},
    {"check", "cluster check",
     OPTBIT(OPT_NODES) | OPTBIT(OPT_SHARDS) | OPTS_INPUT | OPTBIT(OPT_INVERT) |
         OPTBIT(OPT_TOTAL),
     1, NULL, run_check},
    {"info", "cluster info", OPTBIT(OPT_NODES) | OPTBIT(OPT_SHARDS), 0, NULL,
     run_info},
};

int cmd_cluster(int argc, char **argv)
{
    if (argc < 2) {
        cli_error("cluster: expected an action: " ACTIONS
                  " (see bloomkit cluster --help)");
        return CLI_EXIT_ERROR;
    }
    const char *action = argv[1];
    if (strcmp(action, "--help") == 0 || strcmp(action, "-h") == 0) {
        cli_help("cluster", stdout);
        return CLI_EXIT_OK;
    }
    size_t a = 0, nactions = sizeof(actions) / sizeof(actions[0]);
    while (a < nactions && strcmp(actions[a].name, action) != 0) a++;
    if (a == nactions) {
        if (action[0] == '-')
            cli_error("cluster: unknown option '%s' (see bloomkit cluster "
                      "--help)", action);
        else
            cli_error("cluster: unknown action '%s' (" ACTIONS ")", action);
        return CLI_EXIT_ERROR;
    }
    const char *cmd = actions[a].cmd;
    cli_options o;
    sharded s;
    memset(&s, 0, sizeof(s));
    int status = CLI_EXIT_ERROR;
    if (cli_parse_options(cmd, argc - 1, argv + 1, actions[a].allowed, &o) != 0)
        goto done;
    if (cli_wants_help(&o, "cluster")) {
        status = CLI_EXIT_OK;
        goto done;
    }
    if (actions[a].inputs ? o.nargs < 1 : o.nargs != 1) {
        cli_error("%s: expected %s, got %zu arguments (see bloomkit cluster "
                  "--help)", cmd, actions[a].inputs ? "NAME [INPUT...]" : "one NAME",
                  o.nargs);
        goto done;
    }
    if (o.nodes == NULL) {
        cli_error("%s: --nodes is required (HOST:PORT of cluster nodes, "
                  "comma-separated)", cmd);
        goto done;
    }
    if (cluster_check_nodes(cmd, o.nodes) != 0) goto done;
    const char *name = o.args[0];
    if (name[0] == '\0' || strchr(name, '{') != NULL || strchr(name, '}') != NULL) {
        cli_error("%s: '%s': a NAME is not empty and holds no '{' or '}' (the "
                  "piece number is the hash tag of its keys)", cmd, name);
        goto done;
    }
    if (actions[a].check != NULL && actions[a].check(&o) != 0) goto done;
    uint32_t shards = o.shards ? o.shards : CLUSTER_DEFAULT_SHARDS;
    if (sharded_init(&s, cmd, name, shards) != 0) goto done;
    if (cluster_open(&s.c, cmd, o.nodes) != 0) goto done;
    status = actions[a].run(&s, &o);
done:
    sharded_free(&s);
    cli_options_free(&o);
    return status;
}
