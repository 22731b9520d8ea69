/*
 * command.h - the transport-free command layer: BF.*, CF.*, CBF.*, WF.*,
 * SF.* and the generic Redis commands, written once for bloomkit-server
 * and for the Redis module build.
 *
 * A command is a function of (arguments, keys it opens, a reply sink).
 * It never touches sockets, event loops, files or locks: the *host* (the
 * server, or the Redis module) supplies three small interfaces:
 *
 *   bkc_reply      where replies go (RESP2/RESP3 encoder in the server,
 *                  RedisModule_ReplyWith* in the module);
 *   bkc_host_vt    how named keys are opened, read, replaced and closed
 *                  (the server's keyspace with per-key locks; Redis keys
 *                  holding module types), and how a write is propagated
 *                  (the server's append-only log; Redis replication/AOF);
 *   bkc_ctx        one command's context: the two above plus the client's
 *                  protocol version and the clock.
 *
 * How a BF.ADD travels: the host parses a request into argv, looks the
 * name up in bkc_command_table (bkc_lookup), checks arity (bkc_check_arity
 * gives Redis's error text), and calls the handler. The handler opens its
 * key through ctx->host, works on the bkc_value it holds with the library's
 * public API, writes its reply through ctx->reply, calls ctx->host->wrote()
 * when it changed something, and closes the key.
 *
 * Only include/bloomkit.h is used from the library.
 */
#ifndef BKC_COMMAND_H
#define BKC_COMMAND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomkit.h"

#ifdef __cplusplus
extern "C" {
#endif

/*==========================================================================
 * Strings: arguments are binary-safe byte ranges owned by the host
 *==========================================================================*/

typedef struct bkc_str {
    const char *ptr;
    size_t len;
} bkc_str;

/*==========================================================================
 * Replies
 *==========================================================================*/

typedef struct bkc_reply bkc_reply;

/* Commands say what kind of reply they give (RedisBloom's RESP3 types: a
 * boolean for yes/no answers, a map for *.INFO); the host renders each kind
 * in the client's protocol, so a RESP2 client sees :1/:0 and flat arrays. */
typedef struct bkc_reply_vt {
    void (*simple)(bkc_reply *r, const char *s);          /* +s */
    void (*error)(bkc_reply *r, const char *s);           /* -s, s is the whole
                                                             text: "ERR not found" */
    void (*integer)(bkc_reply *r, long long v);           /* :v */
    void (*bulk)(bkc_reply *r, const void *p, size_t n);  /* $n p */
    void (*null)(bkc_reply *r);                           /* $-1 / _ */
    void (*array)(bkc_reply *r, size_t n);                /* *n, n replies follow */
    void (*map)(bkc_reply *r, size_t pairs);              /* RESP3 %n, RESP2 *2n */
    void (*dbl)(bkc_reply *r, double d);                  /* RESP3 ,d; RESP2 bulk */
    void (*boolean)(bkc_reply *r, int v);                 /* RESP3 #t/#f; RESP2 :1/:0
                                                             (NULL: integer is used) */
} bkc_reply_vt;

struct bkc_reply {
    const bkc_reply_vt *vt;
    void *impl;       /* the host's encoder state */
};

/*==========================================================================
 * Values: what a key holds
 *==========================================================================*/

/* The kinds of value a key can hold. Their type names (TYPE, the module's
 * data types) are 9 characters, our own: never RedisBloom's. */
typedef enum bkc_kind {
    BKC_KIND_NONE = 0,
    BKC_KIND_BLOOM = 1,     /* BF.*: scalable filter of blocked stages  "bkbloom--" */
    BKC_KIND_CUCKOO = 2,    /* CF.*: cuckoo filter of stages            "bkcuckoo-" */
    BKC_KIND_COUNTING = 3,  /* CBF.*: counting filter                   "bkcount--" */
    BKC_KIND_WINDOW = 4,    /* WF.*: time-window filter                 "bkwindow-" */
    BKC_KIND_LOADING = 5,   /* a *.LOADCHUNK in progress (load_* below) "bkloading"
                               hosts hide it from EXISTS/KEYS/SCAN/DBSIZE/TYPE */
    BKC_KIND_STATIC = 6,    /* SF.*: static filter or static map (read-only)
                                                                        "bkstatic-" */
    BKC_KIND_KEYSET = 7,    /* RS.*: a set of items for reconciliation  "bkkeyset-"
                               (keyset below; no filters) */
    BKC_KIND_TTL = 8,       /* TF.*: per-item TTL filter                "bkttl----" */
    BKC_KIND_OTHER = 99     /* a key of the host's own (module: any other Redis type) */
} bkc_kind;

/* The 9-character type name of a kind ("bkbloom--"), or NULL. */
const char *bkc_kind_type_name(bkc_kind kind);

/* A CF key's settings and counters (CF.INFO), beside its filter. */
typedef struct bkc_cf_settings {
    uint64_t capacity;        /* capacity of the first stage */
    uint64_t deleted;         /* successful CF.DEL */
    uint32_t bucket_size;
    uint32_t max_iterations;
    uint32_t expansion;
} bkc_cf_settings;

/* A key's value: one bloomkit filter (a CF's stages are inside its cuckoo
 * filter), an RS set, or a dump being loaded. Owned by whoever holds the
 * key; freed with bkc_value_free.
 *
 * It is small (32 bytes) because a Redis user may keep millions of small
 * keys: what only some kinds need is in a union by kind, and a CF key's
 * settings are a block of their own. Read a member only for its kind. */
typedef struct bkc_value {
    bkc_kind kind;
    uint32_t nfilters;        /* 1 once the filter is in (0 for LOADING and
                                 KEYSET, and for a key whose snapshot was
                                 found corrupt) */
    union {
        struct {              /* BLOOM, CUCKOO, COUNTING, WINDOW, STATIC, TTL */
            bk_filter *filters[1];
            bkc_cf_settings *cf;   /* CUCKOO: never NULL; other kinds: NULL */
        };
        struct {              /* LOADING: the bytes of a dump received so far;
                                 the value is replaced by the filter once the
                                 last chunk is in. load_buf is the command
                                 layer's (bkc_allocator). */
            unsigned char *load_buf;
            size_t load_len;
            size_t load_cap;
        };
        struct bkc_keyset *keyset;  /* KEYSET: the items and their ids
                                       (cmd_keyset.c) */
    };
} bkc_value;

/* An empty value of a kind (NULL when out of memory; a CUCKOO value comes
 * with its settings block, zeroed), and its filter put in it (taking
 * ownership; BK_OK, or BK_ENOMEM, or BK_EINVAL for a filter whose family
 * the kind cannot hold, a second filter for a kind that holds one, or an
 * older CF stage that cannot join the key's filter: the filter is then
 * still the caller's). For a CF value that already has its filter, the new
 * one's stages join it (the stage lists saved before stages existed) and
 * the filter is freed; BK_EINVAL / BK_ESIZE when they cannot join. A
 * filter in RedisBloom's layout (bk_rbloom in a BLOOM value, bk_rcuckoo in
 * a CUCKOO value) brings its own CF settings. Hosts
 * that rebuild values (the server's snapshot loader) use these, so the
 * value's accounting stays the command layer's. */
bkc_value *bkc_value_new(bkc_kind kind);
int bkc_value_push(bkc_value *v, bk_filter *f);
/* Both: a new value of a kind holding f, or NULL when out of memory or the
 * push refuses f (f is then freed). */
bkc_value *bkc_value_with(bkc_kind kind, bk_filter *f);

void bkc_value_free(bkc_value *v);

/* Put the filters v holds in the library's single-writer mode (plain
 * stores, bk_filter_set_single_writer); families with one mode, keysets
 * and values being loaded stay as they are. For hosts whose adds to a key
 * hold its exclusive lock (the Redis module runs one command at a time,
 * the server takes ADD opens exclusively): then no add runs beside
 * another add or a lookup of the same filter. Call only while nothing
 * else uses v. */
void bkc_value_single_writer(bkc_value *v);

/* What the value costs its allocators (MEMORY USAGE, maxmemory
 * accounting): over every block it holds, its own (bkc_allocator) and its
 * filter's (bk_filter_memory_usage), the allocator's size_fn of the block,
 * or the bytes asked without one. 0 for NULL. O(blocks). */
size_t bkc_value_bytes(const bkc_value *v);

/* A value as one byte string and back: the unit of SCANDUMP/LOADCHUNK, of
 * the server's snapshot records and of the module's RDB payload (encode's
 * *out comes from malloc: the caller frees it with free()). Layout
 * (docs/COMMANDS.md): a small little-endian header (magic, kind, CF
 * settings, nfilters) followed by each filter's bloomkit file image with
 * its length. Decoding validates everything (bk_filter_deserialize for
 * each image) and never crashes on bad input. */
int bkc_value_encode(const bkc_value *v, unsigned char **out, size_t *len);
int bkc_value_decode(const unsigned char *buf, size_t len, bkc_value **out);

/* The same encoding without building it: its size (0 when a filter cannot
 * be serialised) and any byte range [from, from + n) of it, copied into
 * out. What streams a large value (the module's RDB save, AOF rewrite)
 * with a buffer of a fixed size instead of one the size of the value.
 * BK_OK, or an error (BK_EINVAL for a range past the end). */
uint64_t bkc_value_encoded_size(const bkc_value *v);
int bkc_value_encode_range(const bkc_value *v, uint64_t from, unsigned char *out, size_t n);

/*==========================================================================
 * Memory: the command layer's allocator
 *==========================================================================*/

/* Where the command layer's own memory comes from: values (bkc_value and
 * what it holds besides its filter: a CF key's settings, a load's buffer,
 * an RS set) and the buffers of commands. A host routes it through its
 * allocator (the module: Redis's, so that used_memory and maxmemory see
 * it), and the library's through the same one with bk_set_allocator (that
 * is the filters). Any function but free_fn may return NULL: the command
 * replies "out of memory". size_fn (optional) says what a block costs the
 * allocator: its usable size and the allocator's own overhead for it (the
 * module: RedisModule_MallocSize; the server: glibc's usable size plus its
 * chunk header). bkc_value_bytes applies it to the filter's blocks too, so
 * it must answer for the library's allocator's blocks as well. */
typedef struct bkc_allocator {
    void *(*malloc_fn)(void *opaque, size_t size);
    void *(*calloc_fn)(void *opaque, size_t count, size_t size);
    void *(*realloc_fn)(void *opaque, void *ptr, size_t size);
    void (*free_fn)(void *opaque, void *ptr);
    size_t (*size_fn)(void *opaque, const void *ptr); /* NULL: bytes asked */
    void *opaque;
} bkc_allocator;

/* malloc, calloc, realloc and free, no size_fn: the default, and a base
 * for a host that only adds a size_fn. */
extern const bkc_allocator bkc_std_allocator;

/* Install an allocator (NULL: bkc_std_allocator).
 * Process-wide; before any value exists (values made with the previous
 * one must not be freed with this one). Not thread-safe. */
void bkc_set_allocator(const bkc_allocator *a);

/*==========================================================================
 * The host: keys, propagation, limits
 *==========================================================================*/

typedef struct bkc_key bkc_key; /* the host's open-key handle */

/* How a command opens a key:
 *   READ   - lookups only. Many readers at once, also while ADD opens
 *            change the value (a lookup sees an add or not yet).
 *   ADD    - lock-free updates of an existing value (adds to a family
 *            whose bk_filter_info.lockfree_add is 1): many at once, but
 *            never together with a WRITE or WHOLE open of the same key.
 *   WHOLE  - reads the whole value at one instant (DUMP, SCANDUMP, a
 *            merge's sources, DEBUG OBJECT): nothing changes it while it
 *            is open. An image taken while adds run would hold a checksum
 *            of bytes that changed under it (or, for a table that moves
 *            entries, a torn table). A host may make it exclusive.
 *   WRITE  - anything: create, replace, delete, grow, non-lock-free adds.
 *            Exclusive per key.
 * A command that opened with READ or ADD and finds it needs more closes the
 * key and reopens it with WRITE (and must re-check what it found). */
typedef enum bkc_open_mode {
    BKC_OPEN_READ = 0,
    BKC_OPEN_ADD = 1,
    BKC_OPEN_WRITE = 2,
    BKC_OPEN_WHOLE = 3
} bkc_open_mode;

typedef struct bkc_host_vt {
    /* Open name. Never fails for a missing key (the value is then NULL);
     * returns NULL only when the host cannot open it at all. */
    bkc_key *(*open)(void *host, bkc_str name, bkc_open_mode mode);
    /* The kind held (BKC_KIND_NONE when missing, OTHER for a foreign type). */
    bkc_kind (*kind)(bkc_key *k);
    /* The value held, or NULL (missing or foreign). */
    bkc_value *(*value)(bkc_key *k);
    /* Store v under the key (WRITE mode), taking ownership and freeing any
     * previous value; v = NULL deletes the key. Returns BK_OK or an error
     * (BK_ELIMIT when the host's memory limit would be exceeded: v is then
     * freed and the key is unchanged). */
    int (*set)(bkc_key *k, bkc_value *v);
    /* Tell the host that the open value changed size (a stage was added),
     * for memory accounting. */
    void (*resized)(bkc_key *k);
    void (*close)(bkc_key *k);
    /* A write command succeeded and changed the keyspace: the host logs or
     * replicates it (the server appends argv to its append-only log; the
     * module calls RedisModule_ReplicateVerbatim). */
    void (*wrote)(void *host, int argc, const bkc_str *argv);
    /* Bytes a new value may still take (SIZE_MAX: no limit): creation
     * commands refuse filters that would not fit, with an error instead of
     * an allocation that could kill the process. */
    size_t (*memory_left)(void *host);
    /* Optional (NULL: not provided): after open returned NULL, the error
     * reply to give, or NULL for the generic one ("ERR cannot open key").
     * The server names a corrupt snapshot file here. */
    const char *(*open_error)(void *host);
    /* Optional: the client's protocol (2 or 3), for a context made with
     * resp 0 (the module: asking Redis costs more than most commands,
     * and few replies depend on it). */
    int (*resp)(void *host);
} bkc_host_vt;

/*==========================================================================
 * One command's context
 *==========================================================================*/

typedef struct bkc_ctx {
    bkc_reply *reply;
    const bkc_host_vt *host_vt;
    void *host;
    int resp;            /* protocol version of the client: 2 or 3; 0 until
                            asked (host_vt->resp): read it with bkc__resp */
    uint64_t now_ms;     /* the host's clock (WF.* and expiry use it) */
} bkc_ctx;

/*==========================================================================
 * The command table
 *==========================================================================*/

/* Command flags: for the host (locking, Redis module registration). */
#define BKC_CMD_WRITE    (1u << 0)  /* may change the keyspace */
#define BKC_CMD_READONLY (1u << 1)
#define BKC_CMD_DENYOOM  (1u << 2)  /* may allocate: refuse when out of memory */
#define BKC_CMD_FAST     (1u << 3)  /* O(1) or O(items in the command) */
#define BKC_CMD_HOST     (1u << 4)  /* implemented by the host, not here
                                       (PING, AUTH, SAVE ...): the table entry
                                       carries arity and docs only */

typedef void (*bkc_handler)(bkc_ctx *c, int argc, const bkc_str *argv);

typedef struct bkc_command {
    const char *name;        /* lower case: "bf.add" */
    int arity;               /* Redis convention: N exact, -N at least N (argv[0] counted) */
    unsigned flags;
    int first_key, last_key, key_step; /* key positions (Redis Cluster routing) */
    bkc_handler handler;     /* NULL for BKC_CMD_HOST entries */
    const char *summary;     /* one line, for COMMAND DOCS and --help */
    const char *syntax;      /* "BF.ADD key item" */
} bkc_command;

/* The table, sorted by name; bkc_command_count entries. */
extern const bkc_command bkc_command_table[];
extern const size_t bkc_command_count;

/* What n CF.ADD (nx: CF.ADDNX) requests would do, argvs[i] being each one's
 * three arguments, all naming the same key: n replies and the same state,
 * with the key opened once (a host's pipelines; bloomkit-server's
 * batches). The adds to an existing key are logged (bkc_host_vt.wrote) as
 * one "CF.INSERT[NX] key NOCREATE ITEMS ..." record per 64 attempted items,
 * which replays as those adds in order; a lone one as its own CF.ADD. */
void bkc_cf_add_many(bkc_ctx *c, const bkc_str *const *argvs, size_t n, int nx);

/* A few objects of at most BKC_POOL_BYTES each, kept for reuse by one
 * thread: the hosts' key handles (a command holds one or two at a time)
 * without an allocation per command. bkc_pool_get returns NULL when all are
 * out (the caller allocates); bkc_pool_put returns 0 for an object that is
 * not the pool's (the caller frees it). */
#define BKC_POOL_SLOTS 4
#define BKC_POOL_BYTES 64
typedef struct bkc_pool {
    unsigned used;  /* bit i: slot i is out */
    _Alignas(16) unsigned char slot[BKC_POOL_SLOTS][BKC_POOL_BYTES];
} bkc_pool;
void *bkc_pool_get(bkc_pool *p);
int bkc_pool_put(bkc_pool *p, void *obj);

/* Case-insensitive lookup; NULL for an unknown command. */
const bkc_command *bkc_lookup(bkc_str name);

/* A case-insensitive hash index over a table of structs whose first member
 * is a lower-case name (const char *): the command tables of the command
 * layer and of bloomkit-server's host. Built on first use, by whichever
 * thread gets there first (the others wait for it); a lookup hashes the
 * name once and compares it with one entry, usually. At most
 * BKC_NAMES_MAX entries. Define one as a static with BKC_NAMES_INIT(table)
 * where the table's size is known. */
#define BKC_NAMES_MAX 256
#define BKC_NAMES_SLOTS 1024
typedef struct bkc_names {
    const void *table;
    size_t stride, count;
    _Atomic int state;                  /* 0 not built, 1 building, 2 ready */
    uint16_t slot[BKC_NAMES_SLOTS];     /* entry index + 1; 0: empty */
} bkc_names;
#define BKC_NAMES_INIT(table) \
    {(table), sizeof (table)[0], sizeof (table) / sizeof (table)[0], 0, {0}}

/* The index of the entry named name (any case), or -1. */
long bkc_names_find(bkc_names *ix, bkc_str name);

/* 1 when argc fits cmd's arity; else writes Redis's error
 * "ERR wrong number of arguments for 'bf.add' command" and returns 0. */
int bkc_check_arity(bkc_ctx *c, const bkc_command *cmd, int argc);

/* Redis's text for an unknown command:
 * "ERR unknown command 'FOO', with args beginning with: 'a' 'b' " */
void bkc_reply_unknown(bkc_ctx *c, int argc, const bkc_str *argv);

/* Run argv through the table: lookup, arity, handler. The host calls this
 * for everything but its own BKC_CMD_HOST commands. */
void bkc_dispatch(bkc_ctx *c, int argc, const bkc_str *argv);

/* The settings of filters created without them: auto-created by BF.ADD /
 * CF.ADD / *.INSERT, or options left out of BF.RESERVE / CF.RESERVE.
 * Initially RedisBloom's defaults (bf: 0.01, 100, expansion 2; cf: 1024,
 * bucket 2, 20 iterations, expansion 1, 32 stages), and growable BF and CF
 * keys on. The module sets them from its load arguments (ERROR_RATE,
 * INITIAL_SIZE, CF_MAX_EXPANSIONS, BF_GROWABLE, CF_GROWABLE ...), the
 * server bf_growable and cf_growable from --bf-growable and --cf-growable,
 * before any command runs. Redis 8's configuration names (bf-error-rate
 * ... cf-max-expansions) change them afterwards through CONFIG SET: the
 * server while paused, the module between commands; a change applies to
 * keys created after it. bf_expansion 0 means NONSCALING (Redis 8). */
typedef struct bkc_defaults {
    double bf_error_rate;
    uint64_t bf_initial_size;
    uint32_t bf_expansion;
    uint64_t cf_initial_size;
    uint32_t cf_bucket_size;
    uint32_t cf_max_iterations;
    uint32_t cf_expansion;
    uint32_t cf_max_expansions;   /* stages a CF key may have (at most 32) */
    uint32_t bf_growable;         /* 1: a BF key an add creates with the
                                     default capacity may be a growable
                                     filter (cmd_bloom.c); 0: always a chain */
    uint32_t cf_growable;         /* 1: a CF key an add creates without
                                     CAPACITY is a growable multiset
                                     (cmd_cuckoo.c); 0: RedisBloom's chain */
} bkc_defaults;
extern bkc_defaults bkc_defaults_in_force;

/*==========================================================================
 * Argument parsing helpers (Redis's rules and error texts)
 *==========================================================================*/

/* Strict integer / double parsing of a whole argument. Return 1 on success. */
int bkc_parse_ll(bkc_str s, long long *out);
int bkc_parse_u64(bkc_str s, uint64_t *out);
int bkc_parse_double(bkc_str s, double *out);
/* Case-insensitive comparison with a NUL-terminated keyword. */
int bkc_streq(bkc_str s, const char *keyword);

#ifdef __cplusplus
}
#endif

#endif /* BKC_COMMAND_H */
