/*
 * module.c - bloomkit.so: the command layer (commands/) inside Redis.
 *
 * bloomkit-server and this module answer the same BF.*, CF.*, CBF.*, WF.*,
 * SF.* commands from the same code: commands/ is transport-free and reaches
 * its host through three small interfaces (commands/command.h). This file
 * is the Redis side of those interfaces, and nothing else:
 *
 *   bkc_reply      RedisModule_ReplyWith* (Redis itself encodes RESP2 or
 *                  RESP3: a map becomes an array of 2n in RESP2, a double
 *                  a bulk string);
 *   bkc_host_vt    Redis keys holding one of our module data types:
 *                  OpenKey / KeyType / ModuleTypeGetType / GetValue /
 *                  SetValue / DeleteKey; a successful write is replicated
 *                  (and logged to the AOF) verbatim, or as the command
 *                  layer rewrote it (a BF add that created its key);
 *   bkc_ctx        the calling client's protocol and Redis's clock.
 *
 * Every command of bkc_command_table that the layer implements (all but
 * the BKC_CMD_HOST entries, which Redis has natively) is registered with
 * its flags and key positions, so Redis Cluster routes it, and runs
 * through one callback, bkm_command, that hands argv to bkc_dispatch.
 *
 * Data types: one per bkc_kind, named by bkc_kind_type_name ("bkbloom--",
 * "bkcuckoo-", "bkcount--", "bkwindow-", "bkstatic-" (a static filter or
 * map, SF.*), "bkkeyset-" (RS.*), "bkttl----" (TF.*), and "bkloading" for a *.LOADCHUNK in
 * progress). Their RDB payload is the value's container
 * (bkc_value_encode, docs/COMMANDS.md "Value encoding"), the very bytes
 * bloomkit-server snapshots and SCANDUMP returns. Encoding version 2 (what
 * rdb_save writes) streams it: an unsigned total length, then strings of
 * at most BKM_RDB_PIECE bytes each, copied from the value piece by piece
 * through one fixed buffer. rdb_save cannot report a failure (Redis would
 * report the snapshot as written), so it must never need an allocation the
 * size of the filter. Version 1 (one string holding the whole container,
 * as earlier builds and bloomkit-server's DUMP write) is still read. The
 * type's encoding version is checked on load, and the container and
 * every filter image inside it carry their own version and checksums, so
 * a damaged payload is refused (rdb_load returns NULL; Redis reports the
 * load error) and never reaches a filter.
 *
 * Memory: the library's allocations (the filters) and the command layer's
 * (the values around them, and commands' buffers) go through
 * RedisModule_TryAlloc/Alloc, by bk_set_allocator and bkc_set_allocator,
 * so Redis counts them in used_memory and maxmemory applies. mem_usage
 * (MEMORY USAGE, --memkeys) is what those blocks take by
 * RedisModule_MallocSize, plus what Redis itself spends on a module key
 * and MEMORY USAGE does not count (BKM_REDIS_KEY_OVERHEAD): so a key's
 * MEMORY USAGE is what creating it added to used_memory.
 */
#include <errno.h>  /* strtod/strtoll range errors */
#include <stdio.h>  /* snprintf */
#include <stddef.h> /* offsetof */
#include <stdint.h> /* SIZE_MAX */
#include <stdlib.h> /* strtod, strtoll */
#include <string.h>
#include <strings.h> /* strncasecmp */

#include "bloomkit.h"
#include "command.h"
#include "redismodule_api.h"

#define BKM_NAME "bloomkit"
#define BKM_VERSION 1    /* MODULE LIST's "ver" */
#define BKM_ENCVER 2     /* RDB encoding version written (1 is still read) */
#define BKM_ENCVER_ONE_STRING 1 /* the whole container as one string */
#define BKM_RDB_PIECE (256u << 10) /* bytes per string of an encoding-2 payload */
#define BKM_MAX_PAYLOAD (1ull << 44) /* larger declared payloads are refused */
#define BKM_AOF_CHUNK (4u << 20) /* bytes of dump per *.LOADCHUNK in a rewrite */
#define BKM_ARGV_STACK 32

#define BKM_EXPORT __attribute__((visibility("default")))

/*==========================================================================
 * Data types
 *==========================================================================*/

/* The last kind with a data type of its own (bkc_kind numbers them 1..). */
#define BKM_LAST_KIND BKC_KIND_TTL

static RedisModuleType *bkm_types[BKM_LAST_KIND + 1];
/* RedisBloom's own types, MBbloom-- and MBbloomCF: values taken over from
 * RedisBloom (its RDB files, DUMP payloads, chunks) keep its layout and
 * its type, so they are saved as RedisBloom saves them and RedisBloom can
 * load them back. */
static RedisModuleType *bkm_rb_bloom, *bkm_rb_cuckoo;

/* The kind a Redis data type stands for (BKC_KIND_OTHER: not ours). */
static bkc_kind kind_of_type(const RedisModuleType *t)
{
    if (t == NULL) return BKC_KIND_OTHER;
    for (int k = BKC_KIND_BLOOM; k <= BKM_LAST_KIND; k++)
        if (bkm_types[k] != NULL && bkm_types[k] == t) return (bkc_kind)k;
    if (t == bkm_rb_bloom) return BKC_KIND_BLOOM;
    if (t == bkm_rb_cuckoo) return BKC_KIND_CUCKOO;
    return BKC_KIND_OTHER;
}

/* The data type that holds v: RedisBloom's for its layouts. */
static RedisModuleType *type_of_value(const bkc_value *v)
{
    if (v->kind < BKC_KIND_BLOOM || v->kind > BKM_LAST_KIND) return NULL;
    if (v->nfilters == 1 && (v->kind == BKC_KIND_BLOOM || v->kind == BKC_KIND_CUCKOO)) {
        bk_family fam = bk_filter_family(v->filters[0]);
        if (fam == BK_FAMILY_RBLOOM) return bkm_rb_bloom;
        if (fam == BK_FAMILY_RCUCKOO) return bkm_rb_cuckoo;
    }
    return bkm_types[v->kind];
}

/*==========================================================================
 * Memory: the library's allocator hook
 *==========================================================================*/

static void *bkm_malloc(void *opaque, size_t size)
{
    (void)opaque;
    /* TryAlloc returns NULL on failure (the library then reports
     * BK_ENOMEM); plain Alloc would stop Redis */
    return RedisModule_TryAlloc ? RedisModule_TryAlloc(size) : RedisModule_Alloc(size);
}

static void *bkm_calloc(void *opaque, size_t count, size_t size)
{
    (void)opaque;
    if (RedisModule_TryAlloc == NULL) return RedisModule_Calloc(count, size);
    if (size != 0 && count > SIZE_MAX / size) return NULL;
    void *p = RedisModule_TryAlloc(count * size);
    if (p != NULL) memset(p, 0, count * size);
    return p;
}

static void bkm_free(void *opaque, void *ptr)
{
    (void)opaque;
    if (ptr != NULL) RedisModule_Free(ptr);
}

static const bk_allocator bkm_allocator = {bkm_malloc, bkm_calloc, bkm_free, NULL};

/* The command layer's: the same functions, and realloc without stopping
 * Redis when memory is short (RedisModule_Realloc would). */
static void *bkm_realloc(void *opaque, void *ptr, size_t size)
{
    if (ptr == NULL) return bkm_malloc(opaque, size);
    if (RedisModule_TryAlloc == NULL || RedisModule_MallocSize == NULL)
        return RedisModule_Realloc(ptr, size);
    size_t have = RedisModule_MallocSize(ptr);
    if (size <= have) return ptr;
    void *p = RedisModule_TryAlloc(size);
    if (p == NULL) return NULL;
    memcpy(p, ptr, have);
    RedisModule_Free(ptr);
    return p;
}

/* What a block costs: Redis's allocator's size of it (what used_memory
 * counts). A Redis without RedisModule_MallocSize (before 6.0) gets no
 * size_fn (OnLoad): the bytes asked are counted instead. */
static size_t bkm_block_size(void *opaque, const void *ptr)
{
    (void)opaque;
    return RedisModule_MallocSize((void *)(uintptr_t)ptr);
}

static bkc_allocator bkm_command_allocator = {bkm_malloc, bkm_calloc, bkm_realloc, bkm_free,
                                              bkm_block_size, NULL};

/* What Redis itself spends on every key of a module type beyond what
 * MEMORY USAGE counts (mem_usage, the name's sds and sizeof(dictEntry),
 * 24): the robj holding the value and the moduleValue (type, value)
 * behind it, 16 bytes each; the dict entry's jemalloc block, 32 bytes and
 * not 24; the key's pointer in the keyspace's bucket array, 8 bytes (one
 * to two per key, by the table's load). */
#define BKM_REDIS_KEY_OVERHEAD (16 + 16 + (32 - 24) + 8)

/*==========================================================================
 * Replies
 *==========================================================================*/

#define RCTX(r) ((RedisModuleCtx *)(r)->impl)

static void rep_simple(bkc_reply *r, const char *s) { RedisModule_ReplyWithSimpleString(RCTX(r), s); }
/* Redis sends ReplyWithError's text as is: "ERR not found", "WRONGTYPE ..." */
static void rep_error(bkc_reply *r, const char *s) { RedisModule_ReplyWithError(RCTX(r), s); }
static void rep_integer(bkc_reply *r, long long v) { RedisModule_ReplyWithLongLong(RCTX(r), v); }
static void rep_bulk(bkc_reply *r, const void *p, size_t n)
{
    RedisModule_ReplyWithStringBuffer(RCTX(r), n ? (const char *)p : "", n);
}
static void rep_null(bkc_reply *r) { RedisModule_ReplyWithNull(RCTX(r)); }
static void rep_array(bkc_reply *r, size_t n) { RedisModule_ReplyWithArray(RCTX(r), (long)n); }
static void rep_map(bkc_reply *r, size_t pairs) { RedisModule_ReplyWithMap(RCTX(r), (long)pairs); }
static void rep_dbl(bkc_reply *r, double d) { RedisModule_ReplyWithDouble(RCTX(r), d); }
/* Redis renders it per protocol: #t/#f in RESP3, :1/:0 in RESP2 */
static void rep_bool(bkc_reply *r, int v) { RedisModule_ReplyWithBool(RCTX(r), v); }

static const bkc_reply_vt bkm_reply_vt = {rep_simple, rep_error,
                                          rep_integer, rep_bulk, rep_null, rep_array,
                                          rep_map, rep_dbl, rep_bool};

/*==========================================================================
 * The host: Redis keys
 *==========================================================================*/

typedef struct bkm_host {
    RedisModuleCtx *ctx;
    RedisModuleString **rargv; /* the command's arguments, as Redis gave them */
    const bkc_str *argv;       /* the same, as byte ranges */
    int argc;
} bkm_host;

struct bkc_key {
    RedisModuleCtx *ctx;
    RedisModuleKey *key;     /* NULL: opened for reading and missing */
    RedisModuleString *made; /* a name we created (freed at close), or NULL */
    int kind;                /* host_kind's answer, -1 until asked (and
                                again after host_set) */
};

/* The RedisModuleString of a name: the argument itself when the name is
 * one (always, for our commands), else a new string. */
static RedisModuleString *name_string(bkm_host *h, bkc_str name, RedisModuleString **made)
{
    *made = NULL;
    for (int i = 1; i < h->argc; i++)
        if (h->argv[i].ptr == name.ptr && h->argv[i].len == name.len) return h->rargv[i];
    *made = RedisModule_CreateString(h->ctx, name.ptr ? name.ptr : "", name.len);
    return *made;
}

/* Key handles come from a per-thread pool (bkc_pool) before
 * RedisModule_Alloc (Redis runs one command at a time). */
static _Thread_local bkc_pool key_pool;
_Static_assert(sizeof(bkc_key) <= BKC_POOL_BYTES, "a key handle fits a pool slot");

static bkc_key *key_alloc(void)
{
    bkc_key *k = bkc_pool_get(&key_pool);
    return k ? k : RedisModule_Alloc(sizeof(bkc_key));
}

static void key_free(bkc_key *k)
{
    if (!bkc_pool_put(&key_pool, k))
        RedisModule_Free(k);
}

static bkc_key *host_open(void *host, bkc_str name, bkc_open_mode mode)
{
    bkm_host *h = host;
    bkc_key *k = key_alloc();
    RedisModuleString *s = name_string(h, name, &k->made);
    /* Redis runs one command at a time: WHOLE is a READ here */
    int rmode = mode == BKC_OPEN_READ || mode == BKC_OPEN_WHOLE
                    ? REDISMODULE_READ
                    : REDISMODULE_READ | REDISMODULE_WRITE;
    k->ctx = h->ctx;
    k->kind = -1;
    k->key = RedisModule_OpenKey(h->ctx, s, rmode);
    return k;
}

/* Asked by every open and again by host_value: found once per key handle
 * (the command layer changes a key's value only through host_set). */
static bkc_kind host_kind(bkc_key *k)
{
    if (k->kind >= 0) return (bkc_kind)k->kind;
    bkc_kind kind;
    int t = k->key == NULL ? REDISMODULE_KEYTYPE_EMPTY : RedisModule_KeyType(k->key);
    if (t == REDISMODULE_KEYTYPE_EMPTY) kind = BKC_KIND_NONE;
    else if (t != REDISMODULE_KEYTYPE_MODULE) kind = BKC_KIND_OTHER;
    else kind = kind_of_type(RedisModule_ModuleTypeGetType(k->key));
    k->kind = (int)kind;
    return kind;
}

static bkc_value *host_value(bkc_key *k)
{
    bkc_kind kind = host_kind(k);
    if (kind == BKC_KIND_NONE || kind == BKC_KIND_OTHER) return NULL;
    return RedisModule_ModuleTypeGetValue(k->key);
}

/* Redis runs one command at a time (and forks to save), so the filters a
 * key holds never see two adds, or an add and a lookup, at once: plain
 * stores (bkc_value_single_writer) let consecutive adds overlap their
 * cache misses. A value finished by *.LOADCHUNK keeps the concurrent mode
 * (the same answers) until it is next stored or loaded. */
static int host_set(bkc_key *k, bkc_value *v)
{
    k->kind = -1;
    if (k->key == NULL) { /* opened for reading: the command layer never sets then */
        bkc_value_free(v);
        return BK_EINVAL;
    }
    if (v == NULL) {
        if (RedisModule_KeyType(k->key) != REDISMODULE_KEYTYPE_EMPTY)
            RedisModule_DeleteKey(k->key);
        return BK_OK;
    }
    RedisModuleType *type = type_of_value(v);
    if (type == NULL || RedisModule_ModuleTypeSetValue(k->key, type, v) != REDISMODULE_OK) {
        bkc_value_free(v);
        return BK_EINVAL;
    }
    bkc_value_single_writer(v);
    return BK_OK; /* Redis frees the previous value with its type's free */
}

static void host_resized(bkc_key *k)
{
    (void)k; /* Redis asks mem_usage when it needs the size */
}

static void host_close(bkc_key *k)
{
    if (k->key != NULL) RedisModule_CloseKey(k->key);
    if (k->made != NULL) RedisModule_FreeString(k->ctx, k->made);
    key_free(k);
}

/* Keyspace notifications (class "g", generic) for BF and CF writes, with
 * valkey-bloom's event names: what the command did by its name, plus the
 * creation when the layer rewrote the record (an add that created its key
 * is logged as the command that makes it). Other kinds notify nothing. */
static const struct {
    const char *cmd, *event, *created;
} events[] = {
    {"bf.add", "bloom.add", "bloom.reserve"},     {"bf.madd", "bloom.add", "bloom.reserve"},
    {"bf.insert", "bloom.add", "bloom.reserve"},  {"bf.reserve", "bloom.reserve", NULL},
    {"bf.loadchunk", "bloom.load", NULL},         {"cf.add", "cuckoo.add", "cuckoo.create"},
    {"cf.addnx", "cuckoo.add", "cuckoo.create"},  {"cf.insert", "cuckoo.insert", "cuckoo.create"},
    {"cf.insertnx", "cuckoo.insert", "cuckoo.create"}, {"cf.del", "cuckoo.del", NULL},
    {"cf.reserve", "cuckoo.reserve", NULL},       {"cf.loadchunk", "cuckoo.load", NULL},
};

/* events[] index of each bkc_command_table entry, -1 for none: found once
 * at load, so a write looks its event up in one step (the command's entry
 * is bkc_lookup's one-entry cache after the dispatch). */
static signed char *event_of;

static int events_index(void)
{
    event_of = RedisModule_Alloc(bkc_command_count ? bkc_command_count : 1);
    for (size_t i = 0; i < bkc_command_count; i++) {
        event_of[i] = -1;
        bkc_str name = {bkc_command_table[i].name, strlen(bkc_command_table[i].name)};
        for (size_t e = 0; e < sizeof events / sizeof events[0]; e++)
            if (bkc_streq(name, events[e].cmd)) event_of[i] = (signed char)e;
    }
    return REDISMODULE_OK;
}

static void notify_write(bkm_host *h, int rewritten)
{
    if (RedisModule_NotifyKeyspaceEvent == NULL || h->argc < 2) return;
    const bkc_command *cmd = bkc_lookup(h->argv[0]);
    int e = cmd ? event_of[cmd - bkc_command_table] : -1;
    if (e < 0) return;
    RedisModule_NotifyKeyspaceEvent(h->ctx, REDISMODULE_NOTIFY_GENERIC, events[e].event,
                                    h->rargv[1]);
    if (rewritten && events[e].created != NULL)
        RedisModule_NotifyKeyspaceEvent(h->ctx, REDISMODULE_NOTIFY_GENERIC, events[e].created,
                                        h->rargv[1]);
}

/* The command as sent is replicated verbatim; one the layer rewrote (a BF
 * add that created its key, cmd_bloom.c) as its arguments. */
static void host_wrote(void *host, int argc, const bkc_str *argv)
{
    bkm_host *h = host;
    notify_write(h, argv != h->argv);
    if (argv == h->argv || argc < 1) {
        RedisModule_ReplicateVerbatim(h->ctx);
        return;
    }
    char small[32];
    char *name = argv[0].len < sizeof(small) ? small : RedisModule_Alloc(argv[0].len + 1);
    memcpy(name, argv[0].ptr, argv[0].len);
    name[argv[0].len] = '\0';
    int n = argc - 1;
    RedisModuleString **args = RedisModule_Alloc((size_t)(n ? n : 1) * sizeof(*args));
    for (int i = 0; i < n; i++)
        args[i] = RedisModule_CreateString(h->ctx, argv[i + 1].ptr, argv[i + 1].len);
    RedisModule_Replicate(h->ctx, name, "v", args, (size_t)n);
    for (int i = 0; i < n; i++) RedisModule_FreeString(h->ctx, args[i]);
    RedisModule_Free(args);
    if (name != small) RedisModule_Free(name);
}

static size_t host_memory_left(void *host)
{
    bkm_host *h = host;
    /* used / maxmemory: 0 without a maxmemory (then there is no limit) */
    float ratio = RedisModule_GetUsedMemoryRatio();
    if (!(ratio > 0)) return SIZE_MAX;
    /* only creation commands ask, so INFO's cost does not matter */
    RedisModuleServerInfoData *info = RedisModule_GetServerInfo(h->ctx, "memory");
    if (info == NULL) return SIZE_MAX;
    int e1 = 0, e2 = 0;
    unsigned long long max = RedisModule_ServerInfoGetFieldUnsigned(info, "maxmemory", &e1);
    unsigned long long used = RedisModule_ServerInfoGetFieldUnsigned(info, "used_memory", &e2);
    RedisModule_FreeServerInfo(h->ctx, info);
    if (e1 || e2 || max == 0) return SIZE_MAX;
    if (used >= max) return 0;
    return max - used > SIZE_MAX - 1 ? SIZE_MAX - 1 : (size_t)(max - used);
}

static int host_resp(void *host)
{
    bkm_host *h = host;
    return (RedisModule_GetContextFlags(h->ctx) & REDISMODULE_CTX_FLAGS_RESP3) ? 3 : 2;
}

static const bkc_host_vt bkm_host_vt = {host_open, host_kind, host_value, host_set,
                                        host_resized, host_close, host_wrote,
                                        host_memory_left, NULL, host_resp};

/*==========================================================================
 * Commands
 *==========================================================================*/

/* Every registered command: argv as byte ranges, then bkc_dispatch. */
static int bkm_command(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    bkc_str stack[BKM_ARGV_STACK];
    bkc_str *args = stack;
    if (argc > BKM_ARGV_STACK) args = RedisModule_Alloc((size_t)argc * sizeof(*args));
    for (int i = 0; i < argc; i++) args[i].ptr = RedisModule_StringPtrLen(argv[i], &args[i].len);

    bkm_host host = {ctx, argv, args, argc};
    bkc_reply reply = {&bkm_reply_vt, ctx};
    /* resp 0: the protocol is asked of Redis only by a reply that needs it */
    bkc_ctx c = {&reply, &bkm_host_vt, &host, 0, (uint64_t)RedisModule_Milliseconds()};
    bkc_dispatch(&c, argc, args);

    if (args != stack) RedisModule_Free(args);
    return REDISMODULE_OK;
}

/* Redis's flag words for a table entry's flags. */
static void command_flags(unsigned flags, char *buf, size_t cap)
{
    static const struct {
        unsigned bit;
        const char *word;
    } words[] = {{BKC_CMD_WRITE, "write"},
                 {BKC_CMD_READONLY, "readonly"},
                 {BKC_CMD_DENYOOM, "deny-oom"},
                 {BKC_CMD_FAST, "fast"}};
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (!(flags & words[i].bit)) continue;
        size_t at = strlen(buf), n = strlen(words[i].word);
        if (at + n + 2 > cap) break;
        if (at > 0) buf[at++] = ' ';
        memcpy(buf + at, words[i].word, n + 1);
    }
}

static int register_commands(RedisModuleCtx *ctx)
{
    for (size_t i = 0; i < bkc_command_count; i++) {
        const bkc_command *cmd = &bkc_command_table[i];
        char flags[64];
        if ((cmd->flags & BKC_CMD_HOST) || cmd->handler == NULL) continue;
        command_flags(cmd->flags, flags, sizeof(flags));
        if (RedisModule_CreateCommand(ctx, cmd->name, bkm_command, flags, cmd->first_key,
                                      cmd->last_key, cmd->key_step) != REDISMODULE_OK) {
            RedisModule_Log(ctx, "warning",
                            "bloomkit: cannot register command '%s': the name is taken "
                            "(is RedisBloom or another module with BF.*/CF.* commands "
                            "loaded?). bloomkit cannot be loaded next to it; load only "
                            "one of them.",
                            cmd->name);
            return REDISMODULE_ERR;
        }
    }
    return REDISMODULE_OK;
}

/*==========================================================================
 * Type methods
 *==========================================================================*/

/* Read an encoding-2 payload (a total, then pieces) into one buffer from
 * RedisModule_Alloc. NULL (and a logged reason) when it is damaged. */
static char *rdb_load_pieces(RedisModuleIO *io, bkc_kind kind, size_t *len_out)
{
    uint64_t total = RedisModule_LoadUnsigned(io);
    if (RedisModule_IsIOError(io)) return NULL;
    if (total == 0 || total > BKM_MAX_PAYLOAD || total > SIZE_MAX) {
        RedisModule_LogIOError(io, "warning",
                               "bloomkit: %s value declares %llu bytes: refused",
                               bkc_kind_type_name(kind), (unsigned long long)total);
        return NULL;
    }
    char *buf = RedisModule_TryAlloc((size_t)total);
    if (buf == NULL) {
        RedisModule_LogIOError(io, "warning",
                               "bloomkit: no memory for a %s value of %llu bytes",
                               bkc_kind_type_name(kind), (unsigned long long)total);
        return NULL;
    }
    uint64_t got = 0;
    while (got < total) {
        size_t n = 0;
        char *piece = RedisModule_LoadStringBuffer(io, &n);
        if (RedisModule_IsIOError(io) || piece == NULL || n == 0 || n > total - got) {
            if (piece != NULL) RedisModule_Free(piece);
            RedisModule_LogIOError(io, "warning",
                                   "bloomkit: %s value truncated or malformed after %llu "
                                   "of %llu bytes: refused",
                                   bkc_kind_type_name(kind), (unsigned long long)got,
                                   (unsigned long long)total);
            RedisModule_Free(buf);
            return NULL;
        }
        memcpy(buf + got, piece, n);
        got += n;
        RedisModule_Free(piece);
    }
    *len_out = (size_t)total;
    return buf;
}

static void *rdb_load_kind(RedisModuleIO *io, int encver, bkc_kind kind)
{
    if (encver != BKM_ENCVER && encver != BKM_ENCVER_ONE_STRING) {
        RedisModule_LogIOError(io, "warning",
                               "bloomkit: %s value of encoding version %d, this module "
                               "reads versions %d and %d: refused",
                               bkc_kind_type_name(kind), encver, BKM_ENCVER_ONE_STRING,
                               BKM_ENCVER);
        return NULL;
    }
    size_t len = 0;
    char *buf;
    if (encver == BKM_ENCVER) {
        buf = rdb_load_pieces(io, kind, &len);
        if (buf == NULL) return NULL;
    } else {
        buf = RedisModule_LoadStringBuffer(io, &len);
        if (RedisModule_IsIOError(io) || buf == NULL) {
            if (buf != NULL) RedisModule_Free(buf);
            RedisModule_LogIOError(io, "warning", "bloomkit: %s value truncated: refused",
                                   bkc_kind_type_name(kind));
            return NULL;
        }
    }
    bkc_value *v = NULL;
    int rc = bkc_value_decode((const unsigned char *)buf, len, &v);
    RedisModule_Free(buf);
    if (rc != BK_OK) {
        RedisModule_LogIOError(io, "warning", "bloomkit: corrupt %s value (%s): refused",
                               bkc_kind_type_name(kind), bk_strerror(rc));
        return NULL;
    }
    if (v->kind != kind) {
        RedisModule_LogIOError(io, "warning",
                               "bloomkit: %s payload holds a %s value: refused",
                               bkc_kind_type_name(kind), bkc_kind_type_name(v->kind));
        bkc_value_free(v);
        return NULL;
    }
    bkc_value_single_writer(v);
    return v;
}

#define BKM_RDB_LOAD(suffix, kind)                                 \
    static void *rdb_load_##suffix(RedisModuleIO *io, int encver) \
    {                                                              \
        return rdb_load_kind(io, encver, kind);                    \
    }
BKM_RDB_LOAD(bloom, BKC_KIND_BLOOM)
BKM_RDB_LOAD(cuckoo, BKC_KIND_CUCKOO)
BKM_RDB_LOAD(counting, BKC_KIND_COUNTING)
BKM_RDB_LOAD(window, BKC_KIND_WINDOW)
BKM_RDB_LOAD(loading, BKC_KIND_LOADING)
BKM_RDB_LOAD(static, BKC_KIND_STATIC)
BKM_RDB_LOAD(keyset, BKC_KIND_KEYSET)
BKM_RDB_LOAD(ttl, BKC_KIND_TTL)
#undef BKM_RDB_LOAD

/* The one buffer rdb_save and digest stream through: Redis calls them from
 * its main thread or from a snapshot child, never two at once. */
static unsigned char bkm_piece[BKM_RDB_PIECE];

/* The container of v (total bytes) encoded in pieces of at most cap bytes
 * through buf, each handed to emit(arg, end offset, piece, length) as it
 * is made: BK_OK, or the library's error at a piece (not emitted, the
 * pieces before it were). */
static int encode_pieces(const bkc_value *v, uint64_t total, unsigned char *buf, size_t cap,
                         void (*emit)(void *arg, uint64_t end, const unsigned char *p, size_t n),
                         void *arg)
{
    for (uint64_t off = 0; off < total;) {
        size_t n = total - off < cap ? (size_t)(total - off) : cap;
        int rc = bkc_value_encode_range(v, off, buf, n);
        if (rc != BK_OK) return rc;
        emit(arg, off + n, buf, n);
        off += n;
    }
    return BK_OK;
}

static void rdb_piece(void *io, uint64_t end, const unsigned char *p, size_t n)
{
    (void)end;
    RedisModule_SaveStringBuffer(io, (const char *)p, n);
}

/* Encoding 2: the total, then pieces of the container. No allocation. */
static void rdb_save(RedisModuleIO *io, void *value)
{
    const bkc_value *v = value;
    uint64_t total = bkc_value_encoded_size(v);
    if (total == 0) {
        /* An RDB without the value would be silently incomplete: write a
         * zero length, which rdb_load refuses, so the loss is loud. */
        RedisModule_LogIOError(io, "warning", "bloomkit: cannot encode a %s value",
                               bkc_kind_type_name(v->kind));
        RedisModule_SaveUnsigned(io, 0);
        return;
    }
    RedisModule_SaveUnsigned(io, total);
    int rc = encode_pieces(v, total, bkm_piece, BKM_RDB_PIECE, rdb_piece, io);
    if (rc != BK_OK) {
        /* cannot happen for a live value; if it does, the payload ends
         * short, which rdb_load refuses */
        RedisModule_LogIOError(io, "warning", "bloomkit: cannot encode a %s value: %s",
                               bkc_kind_type_name(v->kind), bk_strerror(rc));
    }
}

/* The *.LOADCHUNK command that restores a kind. */
static const char *loadchunk_name(bkc_kind kind)
{
    switch (kind) {
    case BKC_KIND_CUCKOO: return "CF.LOADCHUNK";
    case BKC_KIND_COUNTING: return "CBF.LOADCHUNK";
    case BKC_KIND_WINDOW: return "WF.LOADCHUNK";
    case BKC_KIND_STATIC: return "SF.LOADCHUNK";
    case BKC_KIND_KEYSET: return "RS.LOADCHUNK";
    case BKC_KIND_TTL: return "TF.LOADCHUNK";
    default: return "BF.LOADCHUNK";
    }
}

/* A *.LOADCHUNK command of aof_rewrite. */
typedef struct aof_sink {
    RedisModuleIO *aof;
    RedisModuleString *key;
    const char *cmd;
} aof_sink;

static void aof_piece(void *arg, uint64_t end, const unsigned char *p, size_t n)
{
    const aof_sink *s = arg;
    RedisModule_EmitAOF(s->aof, s->cmd, "slb", s->key, (long long)end, (const char *)p, n);
}

/* The AOF gets the value as the *.LOADCHUNK commands that rebuild it,
 * each with at most BKM_AOF_CHUNK bytes of the dump, the iterator being
 * the end offset of the chunk (SCANDUMP's convention). A load in progress
 * is written as the chunks received so far, under the command of the kind
 * its header names (any kind before the header is complete: the kind is
 * only checked once it is). */
static void aof_rewrite(RedisModuleIO *aof, RedisModuleString *key, void *value)
{
    bkc_value *v = value;

    if (v->kind == BKC_KIND_LOADING) {
        const unsigned char *data = v->load_buf;
        size_t len = v->load_len;
        bkc_kind kind = BKC_KIND_BLOOM;
        if (len >= 8) {
            unsigned k = (unsigned)data[6] | (unsigned)data[7] << 8;
            if ((k >= BKC_KIND_BLOOM && k <= BKC_KIND_WINDOW) || k == BKC_KIND_STATIC ||
                k == BKC_KIND_KEYSET || k == BKC_KIND_TTL)
                kind = (bkc_kind)k;
        }
        const char *cmd = loadchunk_name(kind);
        for (size_t off = 0; off < len;) {
            size_t n = len - off < BKM_AOF_CHUNK ? len - off : BKM_AOF_CHUNK;
            RedisModule_EmitAOF(aof, cmd, "slb", key, (long long)(off + n),
                                (const char *)data + off, n);
            off += n;
        }
        return;
    }
    /* the container, one chunk at a time through a buffer of a fixed size
     * (like rdb_save, never one the size of the filter) */
    uint64_t total = bkc_value_encoded_size(v);
    unsigned char *chunk = total ? RedisModule_TryAlloc(BKM_AOF_CHUNK) : NULL;
    if (chunk == NULL) {
        RedisModule_LogIOError(aof, "warning", "bloomkit: cannot rewrite a %s value: %s",
                               bkc_kind_type_name(v->kind),
                               total ? "out of memory" : "not serialisable");
        return;
    }
    aof_sink sink = {aof, key, loadchunk_name(v->kind)};
    int rc = encode_pieces(v, total, chunk, BKM_AOF_CHUNK, aof_piece, &sink);
    if (rc != BK_OK)
        RedisModule_LogIOError(aof, "warning", "bloomkit: cannot rewrite a %s value: %s",
                               bkc_kind_type_name(v->kind), bk_strerror(rc));
    RedisModule_Free(chunk);
}

/*--------------------------------------------------------------------------
 * RedisBloom's types: its fields (bk_rbloom_load_fields / _save_fields)
 * through Redis's module I/O, so an RDB file RedisBloom wrote loads here
 * and one saved here loads in RedisBloom. A rewritten AOF holds RedisBloom's
 * chunks under BF.LOADCHUNK / CF.LOADCHUNK.
 *--------------------------------------------------------------------------*/

typedef struct rb_io {
    RedisModuleIO *io;
    char *last;   /* the last string read (freed at the next) */
} rb_io;

static int rb_get_unsigned(void *ctx, uint64_t *v)
{
    rb_io *r = ctx;
    *v = RedisModule_LoadUnsigned(r->io);
    return RedisModule_IsIOError(r->io) ? -1 : 0;
}

static int rb_get_double(void *ctx, double *v)
{
    rb_io *r = ctx;
    *v = RedisModule_LoadDouble(r->io);
    return RedisModule_IsIOError(r->io) ? -1 : 0;
}

static int rb_get_string(void *ctx, const void **p, size_t *len)
{
    rb_io *r = ctx;
    if (r->last != NULL) RedisModule_Free(r->last);
    r->last = RedisModule_LoadStringBuffer(r->io, len);
    if (RedisModule_IsIOError(r->io) || r->last == NULL) return -1;
    *p = r->last;
    return 0;
}

static int rb_put_unsigned(void *ctx, uint64_t v)
{
    RedisModule_SaveUnsigned(((rb_io *)ctx)->io, v);
    return 0;
}

static int rb_put_double(void *ctx, double v)
{
    RedisModule_SaveDouble(((rb_io *)ctx)->io, v);
    return 0;
}

static int rb_put_string(void *ctx, const void *p, size_t len)
{
    RedisModule_SaveStringBuffer(((rb_io *)ctx)->io, p, len);
    return 0;
}

static void *rb_load(RedisModuleIO *io, int encver, int bloom)
{
    rb_io r = {io, NULL};
    bk_rfields in = {.ctx = &r, .get_unsigned = rb_get_unsigned,
                     .get_double = rb_get_double, .get_string = rb_get_string};
    bk_rbloom *b = NULL;
    bk_rcuckoo *c = NULL;
    int rc = bloom ? bk_rbloom_load_fields(&b, encver, &in)
                   : bk_rcuckoo_load_fields(&c, encver, &in);
    if (r.last != NULL) RedisModule_Free(r.last);
    const char *type = bloom ? BK_RBLOOM_TYPE_NAME : BK_RCUCKOO_TYPE_NAME;
    if (rc != BK_OK) {
        RedisModule_LogIOError(io, "warning",
                               "bloomkit: RedisBloom %s value (encoding version %d) "
                               "refused: %s",
                               type, encver, bk_strerror(rc));
        return NULL;
    }
    bkc_value *v = bkc_value_with(bloom ? BKC_KIND_BLOOM : BKC_KIND_CUCKOO,
                                  b ? bk_rbloom_as_filter(b) : bk_rcuckoo_as_filter(c));
    if (v == NULL)
        RedisModule_LogIOError(io, "warning", "bloomkit: no memory for a RedisBloom %s value",
                               type);
    return v;
}

static void *rb_load_bloom(RedisModuleIO *io, int encver) { return rb_load(io, encver, 1); }
static void *rb_load_cuckoo(RedisModuleIO *io, int encver) { return rb_load(io, encver, 0); }

static void rb_save(RedisModuleIO *io, void *value)
{
    bkc_value *v = value;
    rb_io w = {io, NULL};
    bk_rfields out = {.ctx = &w, .put_unsigned = rb_put_unsigned,
                      .put_double = rb_put_double, .put_string = rb_put_string};
    bk_rbloom *b = bk_filter_as_rbloom(v->filters[0]);
    if (b != NULL) (void)bk_rbloom_save_fields(b, &out);
    else (void)bk_rcuckoo_save_fields(bk_filter_as_rcuckoo(v->filters[0]), &out);
}

static void rb_aof_rewrite(RedisModuleIO *aof, RedisModuleString *key, void *value)
{
    bkc_value *v = value;
    bk_rbloom *b = bk_filter_as_rbloom(v->filters[0]);
    bk_rcuckoo *c = b ? NULL : bk_filter_as_rcuckoo(v->filters[0]);
    const char *cmd = b ? "BF.LOADCHUNK" : "CF.LOADCHUNK";
    size_t n = b ? bk_rbloom_header(b, NULL, 0) : bk_rcuckoo_header(c, NULL, 0);
    char *hdr = RedisModule_TryAlloc(n ? n : 1);
    if (hdr == NULL) {
        RedisModule_LogIOError(aof, "warning", "bloomkit: cannot rewrite a %s value: out of memory",
                               b ? BK_RBLOOM_TYPE_NAME : BK_RCUCKOO_TYPE_NAME);
        return;
    }
    if (b) bk_rbloom_header(b, hdr, n);
    else bk_rcuckoo_header(c, hdr, n);
    RedisModule_EmitAOF(aof, cmd, "slb", key, 1LL, hdr, n);
    RedisModule_Free(hdr);
    for (uint64_t iter = 1;;) {
        uint64_t next = 0;
        const void *data = NULL;
        size_t len = 0;
        int rc = b ? bk_rbloom_chunk(b, iter, &next, &data, &len)
                   : bk_rcuckoo_chunk(c, iter, &next, &data, &len);
        if (rc != BK_OK || len == 0 || next == 0) break;
        RedisModule_EmitAOF(aof, cmd, "slb", key, (long long)next, (const char *)data, len);
        iter = next;
    }
}

static size_t mem_usage(const void *value)
{
    return bkc_value_bytes(value) + BKM_REDIS_KEY_OVERHEAD;
}

static void digest_piece(void *md, uint64_t end, const unsigned char *p, size_t n)
{
    (void)end;
    RedisModule_DigestAddStringBuffer(md, (const char *)p, n);
}

static void digest(RedisModuleDigest *md, void *value)
{
    uint64_t total = bkc_value_encoded_size(value);
    if (total == 0 ||
        encode_pieces(value, total, bkm_piece, BKM_RDB_PIECE, digest_piece, md) != BK_OK)
        RedisModule_DigestAddLongLong(md, -1);
    RedisModule_DigestEndSequence(md);
}

static void value_free(void *value)
{
    bkc_value_free(value);
}

static int create_types(RedisModuleCtx *ctx)
{
    void *(*loads[BKM_LAST_KIND + 1])(RedisModuleIO *, int) = {
        [BKC_KIND_BLOOM] = rdb_load_bloom,     [BKC_KIND_CUCKOO] = rdb_load_cuckoo,
        [BKC_KIND_COUNTING] = rdb_load_counting, [BKC_KIND_WINDOW] = rdb_load_window,
        [BKC_KIND_LOADING] = rdb_load_loading, [BKC_KIND_STATIC] = rdb_load_static,
        [BKC_KIND_KEYSET] = rdb_load_keyset,
        [BKC_KIND_TTL] = rdb_load_ttl};
    for (int bloom = 1; bloom >= 0; bloom--) {
        RedisModuleTypeMethods tm = {
            .version = BKM_TYPE_METHOD_VERSION,
            .rdb_load = bloom ? rb_load_bloom : rb_load_cuckoo,
            .rdb_save = rb_save,
            .aof_rewrite = rb_aof_rewrite,
            .mem_usage = mem_usage,
            .digest = digest,
            .free = value_free,
        };
        const char *name = bloom ? BK_RBLOOM_TYPE_NAME : BK_RCUCKOO_TYPE_NAME;
        RedisModuleType *t = RedisModule_CreateDataType(
            ctx, name, bloom ? bk_rbloom_encver() : bk_rcuckoo_encver(), &tm);
        if (t == NULL) {
            RedisModule_Log(ctx, "warning",
                            "bloomkit: cannot create the data type '%s' (RedisBloom is "
                            "loaded, or the module is loaded after startup)",
                            name);
            return REDISMODULE_ERR;
        }
        if (bloom) bkm_rb_bloom = t;
        else bkm_rb_cuckoo = t;
    }
    for (int k = BKC_KIND_BLOOM; k <= BKM_LAST_KIND; k++) {
        if (loads[k] == NULL) continue; /* a kind number not in use */
        RedisModuleTypeMethods tm = {
            .version = BKM_TYPE_METHOD_VERSION,
            .rdb_load = loads[k],
            .rdb_save = rdb_save,
            .aof_rewrite = aof_rewrite,
            .mem_usage = mem_usage,
            .digest = digest,
            .free = value_free,
        };
        const char *name = bkc_kind_type_name((bkc_kind)k);
        bkm_types[k] = RedisModule_CreateDataType(ctx, name, BKM_ENCVER, &tm);
        if (bkm_types[k] == NULL) {
            RedisModule_Log(ctx, "warning",
                            "bloomkit: cannot create the data type '%s' (the name is "
                            "taken, or the module is loaded after startup)",
                            name);
            return REDISMODULE_ERR;
        }
    }
    return REDISMODULE_OK;
}

/*==========================================================================
 * Loading
 *==========================================================================*/

/* RedisBloom's load arguments, so that a redis.conf written for it loads
 * this module: "name value" pairs setting the defaults of filters created
 * without settings (bkc_defaults_in_force). The names of RedisBloom 2.x
 * (ERROR_RATE, INITIAL_SIZE, CF_MAX_EXPANSIONS) and of Redis 8's
 * configuration (bf-error-rate ... cf-max-expansions), any case; and two of
 * bloomkit's own, BF_GROWABLE / bf-growable and CF_GROWABLE / cf-growable
 * (0 or 1). */
typedef enum { ARG_RATE, ARG_U64, ARG_U32 } arg_type;

static const struct load_arg {
    const char *name, *alias;
    arg_type type;
    size_t offset;
    double min, max;
} load_args[] = {
    {"ERROR_RATE", "bf-error-rate", ARG_RATE, offsetof(bkc_defaults, bf_error_rate), 0, 1},
    {"INITIAL_SIZE", "bf-initial-size", ARG_U64, offsetof(bkc_defaults, bf_initial_size), 1,
     1 << 30},
    {"EXPANSION", "bf-expansion-factor", ARG_U32, offsetof(bkc_defaults, bf_expansion), 0,
     32768},
    {"CF_INITIAL_SIZE", "cf-initial-size", ARG_U64, offsetof(bkc_defaults, cf_initial_size), 4,
     1 << 30},
    {"CF_BUCKET_SIZE", "cf-bucket-size", ARG_U32, offsetof(bkc_defaults, cf_bucket_size), 1,
     255},
    {"CF_MAX_ITERATIONS", "cf-max-iterations", ARG_U32,
     offsetof(bkc_defaults, cf_max_iterations), 1, 65535},
    {"CF_EXPANSION", "cf-expansion-factor", ARG_U32, offsetof(bkc_defaults, cf_expansion), 0,
     32768},
    {"CF_MAX_EXPANSIONS", "cf-max-expansions", ARG_U32,
     offsetof(bkc_defaults, cf_max_expansions), 1, 65536},
    /* bloomkit's own: 0 makes every BF key a chain (cmd_bloom.c) */
    {"BF_GROWABLE", "bf-growable", ARG_U32, offsetof(bkc_defaults, bf_growable), 0, 1},
    /* bloomkit's own: 0 makes a CF key an add creates RedisBloom's chain */
    {"CF_GROWABLE", "cf-growable", ARG_U32, offsetof(bkc_defaults, cf_growable), 0, 1},
};

static int parse_load_args(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    bkc_defaults d = bkc_defaults_in_force;
    if (argc % 2) {
        RedisModule_Log(ctx, "warning",
                        "bloomkit: load arguments come in pairs (NAME value), got %d", argc);
        return REDISMODULE_ERR;
    }
    for (int i = 0; i < argc; i += 2) {
        size_t nlen, vlen;
        const char *name = RedisModule_StringPtrLen(argv[i], &nlen);
        const char *value = RedisModule_StringPtrLen(argv[i + 1], &vlen);
        const struct load_arg *a = NULL;
        for (size_t j = 0; j < sizeof load_args / sizeof load_args[0] && !a; j++)
            if ((strlen(load_args[j].name) == nlen &&
                 !strncasecmp(load_args[j].name, name, nlen)) ||
                (strlen(load_args[j].alias) == nlen &&
                 !strncasecmp(load_args[j].alias, name, nlen)))
                a = &load_args[j];
        if (!a) {
            RedisModule_Log(ctx, "warning",
                            "bloomkit: unknown load argument '%.*s' (known: ERROR_RATE, "
                            "INITIAL_SIZE, EXPANSION, CF_INITIAL_SIZE, CF_BUCKET_SIZE, "
                            "CF_MAX_ITERATIONS, CF_EXPANSION, CF_MAX_EXPANSIONS, "
                            "BF_GROWABLE, CF_GROWABLE)",
                            (int)(nlen > 64 ? 64 : nlen), name);
            return REDISMODULE_ERR;
        }
        double x = 0;
        long long n = 0;
        char num[64], *end = NULL;
        int ok = vlen > 0 && vlen < sizeof num;
        if (ok) {
            memcpy(num, value, vlen);
            num[vlen] = '\0';
            errno = 0;
            if (a->type == ARG_RATE) {
                x = strtod(num, &end);
                ok = !errno && *end == '\0' && x > a->min && x < a->max;
            } else {
                n = strtoll(num, &end, 10);
                ok = !errno && *end == '\0' && n >= a->min && n <= a->max;
            }
        }
        if (!ok) {
            RedisModule_Log(ctx, "warning",
                            "bloomkit: load argument %s: '%.*s' is not %s %g and %g", a->name,
                            (int)(vlen > 64 ? 64 : vlen), value,
                            a->type == ARG_RATE ? "a number strictly between"
                                                : "an integer from",
                            a->min, a->max);
            return REDISMODULE_ERR;
        }
        char *field = (char *)&d + a->offset;
        if (a->type == ARG_RATE)
            memcpy(field, &x, sizeof x);
        else if (a->type == ARG_U64)
            *(uint64_t *)(void *)field = (uint64_t)n;
        else
            *(uint32_t *)(void *)field = (uint32_t)n;
    }
    if (d.cf_bucket_size != 2 && d.cf_bucket_size != 4 && d.cf_bucket_size != 8) {
        RedisModule_Log(ctx, "warning",
                        "bloomkit: load argument CF_BUCKET_SIZE: %u: bloomkit's cuckoo "
                        "filters take 2, 4 or 8",
                        d.cf_bucket_size);
        return REDISMODULE_ERR;
    }
    if (d.cf_initial_size < 2ull * d.cf_bucket_size) {
        RedisModule_Log(ctx, "warning",
                        "bloomkit: CF_INITIAL_SIZE %llu is below bucket size x 2 (%u)",
                        (unsigned long long)d.cf_initial_size, 2 * d.cf_bucket_size);
        return REDISMODULE_ERR;
    }
    if (d.cf_max_expansions > 32) {
        RedisModule_Log(ctx, "notice",
                        "bloomkit: CF_MAX_EXPANSIONS %u: a CF key has at most 32 "
                        "stages here",
                        d.cf_max_expansions);
        d.cf_max_expansions = 32;
    }
    bkc_defaults_in_force = d;
    return REDISMODULE_OK;
}


/*--------------------------------------------------------------------------
 * The same settings as module configurations (Redis 7.0 and later):
 * CONFIG GET / CONFIG SET / redis.conf under the load arguments' Redis 8
 * names. Redis 7.x names them "bloomkit.bf-error-rate"; Redis 8 lets a
 * module register them unprefixed (REDISMODULE_CONFIG_UNPREFIXED), as
 * its built-in Bloom types do: "bf-error-rate". A change applies to
 * filters created afterwards. Ranges and error texts are Redis 8's
 * (RedisBloom's src/config.c); Redis prefixes the text with
 * "ERR CONFIG SET failed (possibly related to argument '<name>') - ".
 *--------------------------------------------------------------------------*/

#define BKM_NARGS (sizeof load_args / sizeof load_args[0])
static RedisModuleString *config_shown[BKM_NARGS]; /* what CONFIG GET shows */

/* The current value of a as text (the shortest form that reads back). */
static void arg_text(const struct load_arg *a, char *buf, size_t cap)
{
    const char *field = (const char *)&bkc_defaults_in_force + a->offset;
    if (a->type == ARG_RATE) {
        double x;
        memcpy(&x, field, sizeof x);
        for (int digits = 1; digits <= 17; digits++) {
            snprintf(buf, cap, "%.*g", digits, x);
            if (strtod(buf, NULL) == x) break;
        }
    } else if (a->type == ARG_U64) {
        snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)(const void *)field);
    } else {
        snprintf(buf, cap, "%u", *(const uint32_t *)(const void *)field);
    }
}

static RedisModuleString *config_get(const char *name, void *privdata)
{
    const struct load_arg *a = privdata;
    size_t i = (size_t)(a - load_args);
    char buf[64];
    (void)name;
    arg_text(a, buf, sizeof buf);
    if (config_shown[i] != NULL) RedisModule_FreeString(NULL, config_shown[i]);
    config_shown[i] = RedisModule_CreateString(NULL, buf, strlen(buf));
    return config_shown[i];
}

static int config_error(RedisModuleString **err, const char *fmt, const char *name, double lo,
                        double hi, int rate)
{
    char msg[160];
    if (fmt == NULL)
        snprintf(msg, sizeof msg, rate ? "Value for `%s` must be in the range (%f, %f)"
                                       : "Value for `%s` must be in the range [%.0f, %.0f]",
                 name, lo, hi);
    else
        snprintf(msg, sizeof msg, fmt, name);
    *err = RedisModule_CreateString(NULL, msg, strlen(msg));
    return REDISMODULE_ERR;
}

static int config_set(const char *name, RedisModuleString *val, void *privdata,
                      RedisModuleString **err)
{
    const struct load_arg *a = privdata;
    const char *shown = a->alias; /* the name without Redis's prefix */
    size_t len;
    const char *text = RedisModule_StringPtrLen(val, &len);
    char num[64], *end = NULL;
    (void)name;
    if (len == 0 || len >= sizeof num) return config_error(err, "Invalid value for `%s`", shown, 0, 0, 0);
    memcpy(num, text, len);
    num[len] = '\0';
    errno = 0;
    char *field = (char *)&bkc_defaults_in_force + a->offset;
    if (a->type == ARG_RATE) {
        double x = strtod(num, &end);
        if (errno || *end) return config_error(err, "Invalid value for `%s`", shown, 0, 0, 1);
        if (!(x > a->min && x < a->max)) return config_error(err, NULL, shown, a->min, a->max, 1);
        if (x > 0.25) x = 0.25; /* Redis 8 caps the default error rate */
        memcpy(field, &x, sizeof x);
        return REDISMODULE_OK;
    }
    long long n = strtoll(num, &end, 10);
    double lo = a->min, hi = a->max;
    bkc_defaults *d = &bkc_defaults_in_force;
    /* Redis 8: the two CF sizes bound each other */
    if (!strcmp(a->name, "CF_INITIAL_SIZE")) lo = 2.0 * d->cf_bucket_size;
    if (!strcmp(a->name, "CF_BUCKET_SIZE") && d->cf_initial_size / 2 < hi)
        hi = (double)(d->cf_initial_size / 2);
    if (errno || *end) return config_error(err, "Invalid value for `%s`", shown, 0, 0, 0);
    if (n < lo || n > hi) return config_error(err, NULL, shown, lo, hi, 0);
    if (!strcmp(a->name, "CF_BUCKET_SIZE") && n != 2 && n != 4 && n != 8)
        return config_error(err, "Value for `%s` must be 2, 4 or 8 (bloomkit's cuckoo filters)",
                            shown, 0, 0, 0);
    if (!strcmp(a->name, "CF_MAX_EXPANSIONS") && n > 32) n = 32; /* at most 32 stages here */
    if (a->type == ARG_U64) *(uint64_t *)(void *)field = (uint64_t)n;
    else *(uint32_t *)(void *)field = (uint32_t)n;
    return REDISMODULE_OK;
}

/* Register every load argument as a configuration, its default what the
 * load arguments made it, and apply redis.conf's values. A Redis without
 * the API (before 7.0) has the load arguments only. */
static int register_configs(RedisModuleCtx *ctx)
{
    if (RedisModule_RegisterStringConfig == NULL || RedisModule_LoadConfigs == NULL)
        return REDISMODULE_OK;
    int version = RedisModule_GetServerVersion ? RedisModule_GetServerVersion() : 0;
    unsigned flags = version >= 0x080000 ? REDISMODULE_CONFIG_UNPREFIXED
                                         : REDISMODULE_CONFIG_DEFAULT;
    for (size_t i = 0; i < BKM_NARGS; i++) {
        char def[64];
        arg_text(&load_args[i], def, sizeof def);
        if (RedisModule_RegisterStringConfig(ctx, load_args[i].alias, def, flags, config_get,
                                             config_set, NULL,
                                             (void *)&load_args[i]) != REDISMODULE_OK) {
            RedisModule_Log(ctx, "warning", "bloomkit: cannot register the config '%s'",
                            load_args[i].alias);
            return REDISMODULE_ERR;
        }
    }
    if (RedisModule_LoadConfigs(ctx) != REDISMODULE_OK) {
        RedisModule_Log(ctx, "warning", "bloomkit: a configuration value was refused");
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}

BKM_EXPORT int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (bkm_init(ctx, BKM_NAME, BKM_VERSION, REDISMODULE_APIVER_1) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    if (parse_load_args(ctx, argv, argc) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    if (register_configs(ctx) != REDISMODULE_OK) return REDISMODULE_ERR;
    /* commands first: a clash with RedisBloom stops the load before any
     * data type exists */
    if (register_commands(ctx) != REDISMODULE_OK || events_index() != REDISMODULE_OK)
        return REDISMODULE_ERR;
    if (create_types(ctx) != REDISMODULE_OK) return REDISMODULE_ERR;
    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTIONS_HANDLE_IO_ERRORS);
    bk_set_allocator(&bkm_allocator);
    if (RedisModule_MallocSize == NULL) bkm_command_allocator.size_fn = NULL;
    bkc_set_allocator(&bkm_command_allocator);
    RedisModule_Log(ctx, "notice", "bloomkit %s: %s", bk_version_string(),
                    "BF.* CF.* CBF.* WF.* RS.* ready");
    return REDISMODULE_OK;
}
