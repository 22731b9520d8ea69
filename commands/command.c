/*
 * command.c - the command table, dispatch, and the helpers every family
 * uses: Redis's argument parsing rules and error texts, key opening with
 * kind checks, the memory budget.
 *
 * The table is the one description of every command the server answers:
 * our BF/CF/CBF/WF/SF handlers and, with BKC_CMD_HOST, the generic commands
 * the host implements itself (their entries carry arity, flags, key
 * positions and docs, so COMMAND, COMMAND COUNT and COMMAND DOCS are
 * answered from here). It is sorted by name (strcmp order of the lower
 * case names) and searched by bisection, case-insensitively.
 */
#define _DEFAULT_SOURCE /* sysconf(_SC_PHYS_PAGES) */

#include <errno.h>  /* strtod's ERANGE */
#include <limits.h> /* INT_MAX */
#include <math.h>   /* isnan */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* strtod */
#include <string.h>
#include <unistd.h> /* sysconf */

#include "cmd_internal.h"

/*==========================================================================
 * The table
 *==========================================================================*/

#define W BKC_CMD_WRITE
#define R BKC_CMD_READONLY
#define M BKC_CMD_DENYOOM
#define F BKC_CMD_FAST
#define H BKC_CMD_HOST

const bkc_command bkc_command_table[] = {
    {"auth", -2, H | F, 0, 0, 0, NULL,
     "Authenticate the connection", "AUTH [username] password"},
    {"bf.add", 3, W | M | F, 1, 1, 1, bkc_cmd_bf_add,
     "Add an item to a Bloom filter, creating it with defaults if missing",
     "BF.ADD key item"},
    {"bf.card", 2, R | F, 1, 1, 1, bkc_cmd_bf_card,
     "Number of items added to a Bloom filter", "BF.CARD key"},
    {"bf.debug", 2, R, 1, 1, 1, bkc_cmd_bf_debug,
     "RedisBloom's debugging view of a Bloom filter's stages", "BF.DEBUG key"},
    {"bf.exists", 3, R | F, 1, 1, 1, bkc_cmd_bf_exists,
     "Whether an item may be in a Bloom filter", "BF.EXISTS key item"},
    {"bf.info", -2, R | F, 1, 1, 1, bkc_cmd_bf_info,
     "Information about a Bloom filter",
     "BF.INFO key [CAPACITY | SIZE | FILTERS | ITEMS | EXPANSION]"},
    {"bf.insert", -4, W | M, 1, 1, 1, bkc_cmd_bf_insert,
     "Add items to a Bloom filter, creating it with the given options if missing",
     "BF.INSERT key [CAPACITY capacity] [ERROR error] [EXPANSION expansion] "
     "[NOCREATE] [NONSCALING] ITEMS item [item ...]"},
    {"bf.loadchunk", 4, W | M, 1, 1, 1, bkc_cmd_bf_loadchunk,
     "Restore a Bloom filter from the chunks of BF.SCANDUMP",
     "BF.LOADCHUNK key iterator data"},
    {"bf.madd", -3, W | M | F, 1, 1, 1, bkc_cmd_bf_madd,
     "Add items to a Bloom filter, creating it with defaults if missing",
     "BF.MADD key item [item ...]"},
    {"bf.merge", -3, W | M, 1, -1, 1, bkc_cmd_bf_merge,
     "Make a Bloom filter the union of compatible Bloom filters",
     "BF.MERGE destkey sourcekey [sourcekey ...]"},
    {"bf.mexists", -3, R | F, 1, 1, 1, bkc_cmd_bf_mexists,
     "Whether each item may be in a Bloom filter", "BF.MEXISTS key item [item ...]"},
    {"bf.reserve", -4, W | M, 1, 1, 1, bkc_cmd_bf_reserve,
     "Create a Bloom filter",
     "BF.RESERVE key error_rate capacity [EXPANSION expansion] [NONSCALING]"},
    {"bf.scandump", 3, R, 1, 1, 1, bkc_cmd_bf_scandump,
     "Dump a Bloom filter in chunks", "BF.SCANDUMP key iterator"},
    {"bgsave", -1, H, 0, 0, 0, NULL,
     "Save a snapshot in the background", "BGSAVE [SCHEDULE]"},
    {"cbf.add", 3, W | M | F, 1, 1, 1, bkc_cmd_cbf_add,
     "Add an item to a counting Bloom filter, creating it with defaults if missing",
     "CBF.ADD key item"},
    {"cbf.count", 3, R | F, 1, 1, 1, bkc_cmd_cbf_count,
     "Estimated number of times an item is in a counting Bloom filter",
     "CBF.COUNT key item"},
    {"cbf.del", 3, W | F, 1, 1, 1, bkc_cmd_cbf_del,
     "Remove one occurrence of an item from a counting Bloom filter",
     "CBF.DEL key item"},
    {"cbf.exists", 3, R | F, 1, 1, 1, bkc_cmd_cbf_exists,
     "Whether an item may be in a counting Bloom filter", "CBF.EXISTS key item"},
    {"cbf.info", -2, R | F, 1, 1, 1, bkc_cmd_cbf_info,
     "Information about a counting Bloom filter",
     "CBF.INFO key [CAPACITY | SIZE | ITEMS | ERROR]"},
    {"cbf.loadchunk", 4, W | M, 1, 1, 1, bkc_cmd_cbf_loadchunk,
     "Restore a counting Bloom filter from the chunks of CBF.SCANDUMP",
     "CBF.LOADCHUNK key iterator data"},
    {"cbf.madd", -3, W | M | F, 1, 1, 1, bkc_cmd_cbf_madd,
     "Add items to a counting Bloom filter, creating it with defaults if missing",
     "CBF.MADD key item [item ...]"},
    {"cbf.mexists", -3, R | F, 1, 1, 1, bkc_cmd_cbf_mexists,
     "Whether each item may be in a counting Bloom filter",
     "CBF.MEXISTS key item [item ...]"},
    {"cbf.reserve", -4, W | M, 1, 1, 1, bkc_cmd_cbf_reserve,
     "Create a counting Bloom filter",
     "CBF.RESERVE key error_rate capacity [COUNTERBITS 4|8]"},
    {"cbf.scandump", 3, R, 1, 1, 1, bkc_cmd_cbf_scandump,
     "Dump a counting Bloom filter in chunks", "CBF.SCANDUMP key iterator"},
    {"cf.add", 3, W | M | F, 1, 1, 1, bkc_cmd_cf_add,
     "Add an item to a cuckoo filter, creating it with defaults if missing",
     "CF.ADD key item"},
    {"cf.addnx", 3, W | M | F, 1, 1, 1, bkc_cmd_cf_addnx,
     "Add an item to a cuckoo filter unless it may be present", "CF.ADDNX key item"},
    {"cf.count", 3, R | F, 1, 1, 1, bkc_cmd_cf_count,
     "Approximate number of copies of an item in a cuckoo filter", "CF.COUNT key item"},
    {"cf.debug", 2, R, 1, 1, 1, bkc_cmd_cf_debug,
     "RedisBloom's debugging view of a cuckoo filter", "CF.DEBUG key"},
    {"cf.del", 3, W | F, 1, 1, 1, bkc_cmd_cf_del,
     "Remove one copy of an item from a cuckoo filter", "CF.DEL key item"},
    {"cf.exists", 3, R | F, 1, 1, 1, bkc_cmd_cf_exists,
     "Whether an item may be in a cuckoo filter", "CF.EXISTS key item"},
    {"cf.info", 2, R | F, 1, 1, 1, bkc_cmd_cf_info,
     "Information about a cuckoo filter", "CF.INFO key"},
    {"cf.insert", -4, W | M, 1, 1, 1, bkc_cmd_cf_insert,
     "Add items to a cuckoo filter, creating it if missing",
     "CF.INSERT key [CAPACITY capacity] [NOCREATE] ITEMS item [item ...]"},
    {"cf.insertnx", -4, W | M, 1, 1, 1, bkc_cmd_cf_insertnx,
     "Add items that may not be present to a cuckoo filter, creating it if missing",
     "CF.INSERTNX key [CAPACITY capacity] [NOCREATE] ITEMS item [item ...]"},
    {"cf.loadchunk", 4, W | M, 1, 1, 1, bkc_cmd_cf_loadchunk,
     "Restore a cuckoo filter from the chunks of CF.SCANDUMP",
     "CF.LOADCHUNK key iterator data"},
    {"cf.mexists", -3, R | F, 1, 1, 1, bkc_cmd_cf_mexists,
     "Whether each item may be in a cuckoo filter", "CF.MEXISTS key item [item ...]"},
    {"cf.reserve", -3, W | M, 1, 1, 1, bkc_cmd_cf_reserve,
     "Create a cuckoo filter",
     "CF.RESERVE key capacity [BUCKETSIZE bucketsize] [MAXITERATIONS maxiterations] "
     "[EXPANSION expansion]"},
    {"cf.scandump", 3, R, 1, 1, 1, bkc_cmd_cf_scandump,
     "Dump a cuckoo filter in chunks", "CF.SCANDUMP key iterator"},
    {"client", -2, H, 0, 0, 0, NULL,
     "Connection commands", "CLIENT SETNAME name | GETNAME | ID"},
    {"command", -1, H, 0, 0, 0, NULL,
     "Details about the commands", "COMMAND [COUNT | DOCS [command ...]]"},
    {"dbsize", 1, H | R | F, 0, 0, 0, NULL,
     "Number of keys", "DBSIZE"},
    {"del", -2, H | W, 1, -1, 1, NULL,
     "Delete keys", "DEL key [key ...]"},
    {"echo", 2, H | F, 0, 0, 0, NULL,
     "Return the given string", "ECHO message"},
    {"exists", -2, H | R | F, 1, -1, 1, NULL,
     "Number of the given keys that exist", "EXISTS key [key ...]"},
    {"expire", -3, H | W | F, 1, 1, 1, NULL,
     "Set a key's time to live in seconds", "EXPIRE key seconds [NX | XX | GT | LT]"},
    {"flushall", -1, H | W, 0, 0, 0, NULL,
     "Delete every key", "FLUSHALL [ASYNC | SYNC]"},
    {"hello", -1, H | F, 0, 0, 0, NULL,
     "Handshake: protocol version, authentication, client name",
     "HELLO [protover [AUTH username password] [SETNAME clientname]]"},
    {"info", -1, H, 0, 0, 0, NULL,
     "Information and statistics about the server", "INFO [section ...]"},
    {"keys", 2, H | R, 0, 0, 0, NULL,
     "Keys matching a pattern", "KEYS pattern"},
    {"lastsave", 1, H | F, 0, 0, 0, NULL,
     "Unix time of the last successful save", "LASTSAVE"},
    {"persist", 2, H | W | F, 1, 1, 1, NULL,
     "Remove a key's expiry", "PERSIST key"},
    {"pexpire", -3, H | W | F, 1, 1, 1, NULL,
     "Set a key's time to live in milliseconds",
     "PEXPIRE key milliseconds [NX | XX | GT | LT]"},
    {"ping", -1, H | F, 0, 0, 0, NULL,
     "Test the connection", "PING [message]"},
    {"pttl", 2, H | R | F, 1, 1, 1, NULL,
     "A key's time to live in milliseconds", "PTTL key"},
    {"quit", -1, H | F, 0, 0, 0, NULL,
     "Close the connection", "QUIT"},
    {"rename", 3, H | W, 1, 2, 1, NULL,
     "Rename a key", "RENAME key newkey"},
    /* RS.*: reconciliation sets (cmd_keyset.c) */
    {"rs.add", -3, W | M | F, 1, 1, 1, bkc_cmd_rs_add,
     "Add items to a reconciliation set, creating it if missing",
     "RS.ADD key item [item ...]"},
    {"rs.card", 2, R | F, 1, 1, 1, bkc_cmd_rs_card,
     "Number of items in a reconciliation set", "RS.CARD key"},
    {"rs.diff", 3, R, 1, 1, 1, bkc_cmd_rs_diff,
     "Items this set has and ids it lacks, from the other side's IBLT",
     "RS.DIFF key iblt"},
    {"rs.estimate", 3, R, 1, 1, 1, bkc_cmd_rs_estimate,
     "Estimated size of the difference from the other side's strata estimator",
     "RS.ESTIMATE key strata"},
    {"rs.getids", -3, R | F, 1, 1, 1, bkc_cmd_rs_getids,
     "The items of a reconciliation set with the given ids",
     "RS.GETIDS key id [id ...]"},
    {"rs.iblt", 3, R, 1, 1, 1, bkc_cmd_rs_iblt,
     "An invertible Bloom lookup table of a reconciliation set's ids",
     "RS.IBLT key cells"},
    {"rs.info", -2, R | F, 1, 1, 1, bkc_cmd_rs_info,
     "Information about a reconciliation set", "RS.INFO key [SEED | ITEMS | SIZE]"},
    {"rs.ismember", 3, R | F, 1, 1, 1, bkc_cmd_rs_ismember,
     "Whether an item is in a reconciliation set", "RS.ISMEMBER key item"},
    {"rs.loadchunk", 4, W | M, 1, 1, 1, bkc_cmd_rs_loadchunk,
     "Restore a reconciliation set from the chunks of RS.SCANDUMP",
     "RS.LOADCHUNK key iterator data"},
    {"rs.rem", -3, W | F, 1, 1, 1, bkc_cmd_rs_rem,
     "Remove items from a reconciliation set", "RS.REM key item [item ...]"},
    {"rs.reserve", -2, W | M, 1, 1, 1, bkc_cmd_rs_reserve,
     "Create an empty reconciliation set", "RS.RESERVE key [SEED seed]"},
    {"rs.scandump", 3, R, 1, 1, 1, bkc_cmd_rs_scandump,
     "Dump a reconciliation set in chunks", "RS.SCANDUMP key iterator"},
    {"rs.strata", 2, R, 1, 1, 1, bkc_cmd_rs_strata,
     "The strata estimator of a reconciliation set's ids", "RS.STRATA key"},
    {"save", 1, H, 0, 0, 0, NULL,
     "Save a snapshot now", "SAVE"},
    {"scan", -2, H | R, 0, 0, 0, NULL,
     "Iterate over the keys",
     "SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]"},
    {"select", 2, H | F, 0, 0, 0, NULL,
     "Select the database (only 0 exists)", "SELECT index"},
    {"sf.build", -4, W | M, 1, 1, 1, bkc_cmd_sf_build,
     "Build a static filter of the given items (replaces only with REPLACE)",
     "SF.BUILD key [ERROR error | BITS 8|12|16] [BUMPED] [REPLACE] ITEMS item [item ...]"},
    {"sf.buildmap", -5, W | M, 1, 1, 1, bkc_cmd_sf_buildmap,
     "Build a static map of the given item/value pairs (replaces only with REPLACE)",
     "SF.BUILDMAP key [VALUEBITS bits] [CHECKBITS bits] [REPLACE] ITEMS item value "
     "[item value ...]"},
    {"sf.exists", 3, R | F, 1, 1, 1, bkc_cmd_sf_exists,
     "Whether an item may be in a static filter or map", "SF.EXISTS key item"},
    {"sf.get", 3, R | F, 1, 1, 1, bkc_cmd_sf_get,
     "The value of an item in a static map, nil when certainly absent", "SF.GET key item"},
    {"sf.info", -2, R | F, 1, 1, 1, bkc_cmd_sf_info,
     "Information about a static filter or map",
     "SF.INFO key [TYPE | SIZE | ITEMS | BITS | ERROR | VALUEBITS | CHECKBITS]"},
    {"sf.loadchunk", 4, W | M, 1, 1, 1, bkc_cmd_sf_loadchunk,
     "Restore a static filter or map from the chunks of SF.SCANDUMP or bloomkit push",
     "SF.LOADCHUNK key iterator data"},
    {"sf.mexists", -3, R | F, 1, 1, 1, bkc_cmd_sf_mexists,
     "Whether each item may be in a static filter or map", "SF.MEXISTS key item [item ...]"},
    {"sf.mget", -3, R | F, 1, 1, 1, bkc_cmd_sf_mget,
     "The values of items in a static map, nil for each certainly absent",
     "SF.MGET key item [item ...]"},
    {"sf.scandump", 3, R, 1, 1, 1, bkc_cmd_sf_scandump,
     "Dump a static filter or map in chunks", "SF.SCANDUMP key iterator"},
    {"shutdown", -1, H, 0, 0, 0, NULL,
     "Stop the server", "SHUTDOWN [NOSAVE | SAVE]"},
    {"tf.add", 4, W | M | F, 1, 1, 1, bkc_cmd_tf_add,
     "Add an item to a TTL filter with its own time to live", "TF.ADD key item ttl_ms"},
    {"tf.addat", -4, W | M | F, 1, 1, 1, bkc_cmd_tf_addat,
     "Add items to a TTL filter expiring at an absolute time (what adds are logged as)",
     "TF.ADDAT key unix_time_ms item [item ...]"},
    {"tf.exists", 3, R | F, 1, 1, 1, bkc_cmd_tf_exists,
     "Whether an item may have been added with a TTL still running", "TF.EXISTS key item"},
    {"tf.info", -2, R | F, 1, 1, 1, bkc_cmd_tf_info,
     "Information about a TTL filter",
     "TF.INFO key [CAPACITY | SIZE | ITEMS | LIVE | ERROR | MAXTTL | GRANULARITY | "
     "GENERATIONS | SEGMENTS | BOUND]"},
    {"tf.loadchunk", 4, W | M, 1, 1, 1, bkc_cmd_tf_loadchunk,
     "Restore a TTL filter from the chunks of TF.SCANDUMP", "TF.LOADCHUNK key iterator data"},
    {"tf.madd", -4, W | M | F, 1, 1, 1, bkc_cmd_tf_madd,
     "Add items to a TTL filter, all with one time to live",
     "TF.MADD key ttl_ms item [item ...]"},
    {"tf.mexists", -3, R | F, 1, 1, 1, bkc_cmd_tf_mexists,
     "Whether each item may have been added with a TTL still running",
     "TF.MEXISTS key item [item ...]"},
    {"tf.reserve", -5, W | M, 1, 1, 1, bkc_cmd_tf_reserve,
     "Create a per-item TTL filter",
     "TF.RESERVE key error_rate capacity max_ttl_ms [GENERATIONS generations]"},
    {"tf.scandump", 3, R, 1, 1, 1, bkc_cmd_tf_scandump,
     "Dump a TTL filter in chunks", "TF.SCANDUMP key iterator"},
    {"ttl", 2, H | R | F, 1, 1, 1, NULL,
     "A key's time to live in seconds", "TTL key"},
    {"type", 2, H | R | F, 1, 1, 1, NULL,
     "The type of a key's value", "TYPE key"},
    {"unlink", -2, H | W | F, 1, -1, 1, NULL,
     "Delete keys", "UNLINK key [key ...]"},
    {"wf.add", 3, W | F, 1, 1, 1, bkc_cmd_wf_add,
     "Add an item to a time-window filter at the server's clock", "WF.ADD key item"},
    {"wf.exists", 3, R | F, 1, 1, 1, bkc_cmd_wf_exists,
     "Whether an item may have been added within the window", "WF.EXISTS key item"},
    {"wf.info", -2, R | F, 1, 1, 1, bkc_cmd_wf_info,
     "Information about a time-window filter",
     "WF.INFO key [CAPACITY | SIZE | ITEMS | ERROR | WINDOW | GENERATIONS]"},
    {"wf.loadchunk", 4, W | M, 1, 1, 1, bkc_cmd_wf_loadchunk,
     "Restore a time-window filter from the chunks of WF.SCANDUMP",
     "WF.LOADCHUNK key iterator data"},
    {"wf.madd", -3, W | F, 1, 1, 1, bkc_cmd_wf_madd,
     "Add items to a time-window filter at the server's clock",
     "WF.MADD key item [item ...]"},
    {"wf.mexists", -3, R | F, 1, 1, 1, bkc_cmd_wf_mexists,
     "Whether each item may have been added within the window",
     "WF.MEXISTS key item [item ...]"},
    {"wf.reserve", -5, W | M, 1, 1, 1, bkc_cmd_wf_reserve,
     "Create a time-window filter",
     "WF.RESERVE key error_rate capacity window_ms [GENERATIONS generations]"},
    {"wf.scandump", 3, R, 1, 1, 1, bkc_cmd_wf_scandump,
     "Dump a time-window filter in chunks", "WF.SCANDUMP key iterator"},
};

#undef W
#undef R
#undef M
#undef F
#undef H

const size_t bkc_command_count = sizeof(bkc_command_table) / sizeof(bkc_command_table[0]);

/*==========================================================================
 * Lookup, arity, dispatch
 *==========================================================================*/

static int lower(int ch)
{
    return (ch >= 'A' && ch <= 'Z') ? ch - 'A' + 'a' : ch;
}

/* A hash of a name, the same for every case of its letters: 8 bytes at a
 * time with bit 5 set in each (a letter's case bit), multiplied in; a
 * tail of 1 to 7 bytes read as two overlapping loads (the length is in the
 * hash, so they stand for exactly those bytes). Loads are in the machine's
 * order: the hash never leaves the process. The few other bytes that
 * differ only in bit 5 collide here and are told apart by names_equal. */
static uint64_t load64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);   /* native order: the hash stays in the process */
    return v;
}

static uint64_t load32(const char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t name_hash(bkc_str s)
{
    const uint64_t fold = 0x2020202020202020u;
    uint64_t h = 0x9E3779B97F4A7C15u ^ s.len;
    size_t i = 0;
    for (; i + 8 <= s.len; i += 8) {
        h = (h ^ (load64(s.ptr + i) | fold)) * 0xFF51AFD7ED558CCDu;
        h ^= h >> 32;
    }
    size_t n = s.len - i;
    if (n > 0) {
        const char *p = s.ptr + i;
        uint64_t w;
        if (n >= 4)
            w = load32(p) | load32(p + n - 4) << 32;
        else
            w = (uint64_t)(unsigned char)p[0] | (uint64_t)(unsigned char)p[n / 2] << 8 |
                (uint64_t)(unsigned char)p[n - 1] << 16;
        h = (h ^ (w | fold)) * 0xFF51AFD7ED558CCDu;
        h ^= h >> 32;
    }
    return h;
}

static const char *entry_name(const bkc_names *ix, size_t i)
{
    const char *name;
    memcpy(&name, (const char *)ix->table + i * ix->stride, sizeof name);
    return name;
}

static int names_equal(bkc_str s, const char *name)
{
    size_t i = 0;
    for (; i < s.len; i++)
        if (name[i] == '\0' || lower((unsigned char)s.ptr[i]) != (unsigned char)name[i])
            return 0;
    return name[i] == '\0';
}

static void names_build(bkc_names *ix)
{
    for (size_t i = 0; i < ix->count && i < BKC_NAMES_MAX; i++) {
        const char *name = entry_name(ix, i);
        size_t at = name_hash((bkc_str){name, strlen(name)}) % BKC_NAMES_SLOTS;
        while (ix->slot[at])
            at = (at + 1) % BKC_NAMES_SLOTS;
        ix->slot[at] = (uint16_t)(i + 1);
    }
}

long bkc_names_find(bkc_names *ix, bkc_str name)
{
    int st = atomic_load_explicit(&ix->state, memory_order_acquire);
    if (st != 2) {
        int zero = 0;
        if (atomic_compare_exchange_strong(&ix->state, &zero, 1)) {
            names_build(ix);
            atomic_store_explicit(&ix->state, 2, memory_order_release);
        } else {
            while (atomic_load_explicit(&ix->state, memory_order_acquire) != 2)
                ;   /* another thread builds it: a few microseconds, once */
        }
    }
    if (name.ptr == NULL)
        return -1;
    size_t at = name_hash(name) % BKC_NAMES_SLOTS;
    for (;;) {
        unsigned e = ix->slot[at];
        if (e == 0)
            return -1;
        if (names_equal(name, entry_name(ix, e - 1)))
            return (long)e - 1;
        at = (at + 1) % BKC_NAMES_SLOTS;
    }
}

_Static_assert(sizeof bkc_command_table / sizeof bkc_command_table[0] <= BKC_NAMES_MAX,
               "the command table outgrew its name index");
static bkc_names command_names = BKC_NAMES_INIT(bkc_command_table);

void *bkc_pool_get(bkc_pool *p)
{
    for (unsigned i = 0; i < BKC_POOL_SLOTS; i++) {
        if (!(p->used & 1u << i)) {
            p->used |= 1u << i;
            return p->slot[i];
        }
    }
    return NULL;
}

int bkc_pool_put(bkc_pool *p, void *obj)
{
    uintptr_t at = (uintptr_t)obj, lo = (uintptr_t)p->slot;
    if (at < lo || at >= lo + sizeof p->slot)
        return 0;
    p->used &= ~(1u << (unsigned)((at - lo) / BKC_POOL_BYTES));
    return 1;
}

const bkc_command *bkc_lookup(bkc_str name)
{
    /* Clients repeat a command: the last name each thread looked up, as
     * sent, is answered with one compare. */
    static _Thread_local char last[24];
    static _Thread_local size_t last_len;
    static _Thread_local const bkc_command *last_cmd;
    if (name.len == last_len && name.len && !memcmp(name.ptr, last, name.len))
        return last_cmd;
    long i = bkc_names_find(&command_names, name);
    const bkc_command *cmd = i < 0 ? NULL : &bkc_command_table[i];
    if (name.len < sizeof last && name.ptr) {
        memcpy(last, name.ptr, name.len);
        last_len = name.len;
        last_cmd = cmd;
    }
    return cmd;
}

int bkc_check_arity(bkc_ctx *c, const bkc_command *cmd, int argc)
{
    if ((cmd->arity > 0 && argc != cmd->arity) ||
        (cmd->arity < 0 && argc < -cmd->arity)) {
        char buf[128];
        snprintf(buf, sizeof(buf), "ERR wrong number of arguments for '%s' command",
                 cmd->name);
        bkc__err(c, buf);
        return 0;
    }
    return 1;
}

void bkc__arity_error(bkc_ctx *c, const bkc_str *argv)
{
    const bkc_command *cmd = bkc_lookup(argv[0]);
    char buf[128];
    snprintf(buf, sizeof(buf), "ERR wrong number of arguments for '%s' command",
             cmd ? cmd->name : "?");
    bkc__err(c, buf);
}

/* Append at most max bytes of s, stopping at a NUL as Redis's "%.*s" does. */
static size_t append_cstr(char *buf, size_t at, size_t cap, const char *s,
                          size_t len, size_t max)
{
    for (size_t i = 0; i < len && i < max && s[i] != '\0' && at + 1 < cap; i++)
        buf[at++] = s[i];
    buf[at] = '\0';
    return at;
}

void bkc_reply_unknown(bkc_ctx *c, int argc, const bkc_str *argv)
{
    /* Redis: "unknown command '%.128s', with args beginning with: " then
     * "'%.*s' " per argument while fewer than 128 bytes of arguments have
     * been written, each cut to what is left of those 128; newlines in the
     * text become spaces. */
    char buf[512];
    size_t at = 0;
    at = append_cstr(buf, at, sizeof(buf), "ERR unknown command '", 21, 21);
    if (argc > 0) at = append_cstr(buf, at, sizeof(buf), argv[0].ptr, argv[0].len, 128);
    at = append_cstr(buf, at, sizeof(buf), "', with args beginning with: ", 29, 29);
    size_t args_start = at;
    for (int i = 1; i < argc && at - args_start < 128; i++) {
        size_t room = 128 - (at - args_start);
        at = append_cstr(buf, at, sizeof(buf), "'", 1, 1);
        at = append_cstr(buf, at, sizeof(buf), argv[i].ptr, argv[i].len, room);
        at = append_cstr(buf, at, sizeof(buf), "' ", 2, 2);
    }
    for (size_t i = 0; i < at; i++)
        if (buf[i] == '\r' || buf[i] == '\n') buf[i] = ' ';
    bkc__err(c, buf);
}

bkc_defaults bkc_defaults_in_force = {
    BK_SCALABLE_DEFAULT_ERROR, BK_SCALABLE_DEFAULT_CAPACITY, BK_SCALABLE_DEFAULT_EXPANSION,
    1024, 2, 20, 1, BKC_CF_MAX_STAGES, 1, 1};

void bkc_dispatch(bkc_ctx *c, int argc, const bkc_str *argv)
{
    if (argc < 1) {
        bkc__err(c, "ERR empty command");
        return;
    }
    const bkc_command *cmd = bkc_lookup(argv[0]);
    if (cmd == NULL || cmd->handler == NULL) {
        bkc_reply_unknown(c, argc, argv);
        return;
    }
    if (!bkc_check_arity(c, cmd, argc)) return;
    cmd->handler(c, argc, argv);
}

/*==========================================================================
 * Parsing (Redis's string2ll / getDoubleFromObject rules)
 *==========================================================================*/

int bkc_parse_ll(bkc_str s, long long *out)
{
    /* Digits with an optional '-'; no '+', no spaces, no leading zeros
     * ("0" itself excepted), no "-0", within the range of long long. */
    if (s.ptr == NULL || s.len == 0 || s.len > 20) return 0;
    size_t i = 0;
    int neg = 0;
    if (s.ptr[0] == '-') {
        neg = 1;
        i = 1;
        if (s.len == 1) return 0;
    }
    if (s.ptr[i] == '0') {
        if (s.len == 1) {
            if (out) *out = 0;
            return 1;
        }
        return 0;
    }
    unsigned long long v = 0;
    for (; i < s.len; i++) {
        unsigned d = (unsigned char)s.ptr[i] - '0';
        if (d > 9) return 0;
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (unsigned long long)INT64_MAX + 1) return 0;
        if (out) *out = (v == (unsigned long long)INT64_MAX + 1) ? INT64_MIN : -(long long)v;
    } else {
        if (v > (unsigned long long)INT64_MAX) return 0;
        if (out) *out = (long long)v;
    }
    return 1;
}

int bkc_parse_u64(bkc_str s, uint64_t *out)
{
    if (s.ptr == NULL || s.len == 0 || s.len > 20) return 0;
    if (s.ptr[0] == '0' && s.len > 1) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < s.len; i++) {
        unsigned d = (unsigned char)s.ptr[i] - '0';
        if (d > 9) return 0;
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    if (out) *out = v;
    return 1;
}

int bkc_parse_double(bkc_str s, double *out)
{
    /* The whole argument must be a number strtod accepts: no leading
     * space, nothing after it, not NaN, not out of range. */
    char buf[128];
    if (s.ptr == NULL || s.len == 0 || s.len >= sizeof(buf)) return 0;
    memcpy(buf, s.ptr, s.len);
    buf[s.len] = '\0';
    if (buf[0] == ' ' || (buf[0] >= '\t' && buf[0] <= '\r')) return 0;
    if (memchr(buf, '\0', s.len) != NULL) return 0;
    char *end = NULL;
    errno = 0;
    double d = strtod(buf, &end);
    if (end != buf + s.len || isnan(d)) return 0;
    if (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || d == 0)) return 0;
    if (out) *out = d;
    return 1;
}

int bkc_streq(bkc_str s, const char *keyword)
{
    size_t n = strlen(keyword);
    if (s.len != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)s.ptr[i]) != lower((unsigned char)keyword[i])) return 0;
    return 1;
}

/*==========================================================================
 * Shared helpers
 *==========================================================================*/

void bkc__lib_error(bkc_ctx *c, int rc)
{
    char buf[160];
    if (rc == BK_ENOMEM) {
        bkc__err(c, BKC_ERR_OOM);
        return;
    }
    snprintf(buf, sizeof(buf), "ERR %s", bk_strerror(rc));
    bkc__err(c, buf);
}

void bkc__wrote_as(bkc_ctx *c, int argc, const bkc_str *sent, const bkc_str *head, int nhead,
                   const bkc_str *items, size_t n)
{
    bkc_str stack[32];
    size_t total = (size_t)nhead + n;
    bkc_str *argv = total <= 32 ? stack : bkc__malloc(total * sizeof(*argv));
    if (argv == NULL || total > INT_MAX) {
        bkc__wrote(c, argc, sent); /* the same under the same settings */
        if (argv != stack) bkc__free(argv);
        return;
    }
    memcpy(argv, head, (size_t)nhead * sizeof(*argv));
    if (n > 0) memcpy(argv + nhead, items, n * sizeof(*argv));
    bkc__wrote(c, (int)total, argv);
    if (argv != stack) bkc__free(argv);
}

bkc_value *bkc__value_of(bkc_ctx *c, bkc_kind kind, bk_filter *f)
{
    bkc_value *v = bkc_value_with(kind, f);
    if (v == NULL) bkc__err(c, BKC_ERR_OOM);
    return v;
}

int bkc__store(bkc_ctx *c, bkc_key *k, bkc_value *v)
{
    int rc = c->host_vt->set(k, v);
    if (rc == BK_OK) return 1;
    bkc__err(c, rc == BK_ELIMIT ? BKC_ERR_MAXMEMORY : BKC_ERR_OOM);
    return 0;
}

int bkc__open(bkc_ctx *c, bkc_str name, bkc_open_mode mode, bkc_kind want,
              bkc_key **k, bkc_value **v)
{
    *v = NULL;
    *k = c->host_vt->open(c->host, name, mode);
    if (*k == NULL) {
        const char *why = c->host_vt->open_error ? c->host_vt->open_error(c->host) : NULL;
        bkc__err(c, why ? why : BKC_ERR_OPEN);
        return BKC__FAILED;
    }
    bkc_kind kind = c->host_vt->kind(*k);
    if (kind == BKC_KIND_NONE) return BKC__MISSING;
    if (kind != want) return BKC__WRONG;
    *v = c->host_vt->value(*k);
    if (*v == NULL || (*v)->kind != want) {
        *v = NULL;
        return BKC__WRONG;
    }
    return BKC__FOUND;
}

bkc_value *bkc__open_lookup(bkc_ctx *c, bkc_str name, bkc_kind want, bkc_key **k, int *st)
{
    bkc_value *v;
    *st = bkc__open(c, name, BKC_OPEN_READ, want, k, &v);
    return *st == BKC__FOUND ? v : NULL;
}

bkc_value *bkc__open_found(bkc_ctx *c, bkc_str name, bkc_open_mode mode, bkc_kind want,
                           bkc_key **k)
{
    bkc_value *v;
    int st = bkc__open(c, name, mode, want, k, &v);
    if (st == BKC__FOUND) return v;
    if (st == BKC__FAILED) return NULL;
    bkc__err(c, st == BKC__MISSING ? BKC_ERR_NOT_FOUND : BKC_ERR_WRONGTYPE);
    bkc__close(c, *k);
    return NULL;
}

int bkc__open_new(bkc_ctx *c, bkc_str name, bkc_kind kind, int wrongtype, bkc_key **k)
{
    bkc_value *v;
    int st = bkc__open(c, name, BKC_OPEN_WRITE, kind, k, &v);
    if (st == BKC__MISSING) return 1;
    if (st == BKC__FAILED) return 0;
    bkc__err(c, st == BKC__WRONG && wrongtype ? BKC_ERR_WRONGTYPE : BKC_ERR_ITEM_EXISTS);
    bkc__close(c, *k);
    return 0;
}

void bkc__store_new(bkc_ctx *c, int argc, const bkc_str *argv, bkc_key *k, bkc_value *nv)
{
    if (nv != NULL && bkc__store(c, k, nv)) {
        bkc__ok(c);
        bkc__wrote(c, argc, argv);
    }
    bkc__close(c, k);
}

bkc_value *bkc__open_info(bkc_ctx *c, int argc, const bkc_str *argv, bkc_kind want,
                          bkc_key **k)
{
    if (argc > 3) {
        bkc__arity_error(c, argv);
        return NULL;
    }
    return bkc__open_found(c, argv[1], BKC_OPEN_READ, want, k);
}

static uint64_t physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0) return UINT64_MAX;
    return (uint64_t)pages * (uint64_t)size;
}

uint64_t bkc__memory_budget(bkc_ctx *c)
{
    size_t left = c->host_vt->memory_left(c->host);
    uint64_t phys = physical_memory();
    return (uint64_t)left < phys ? (uint64_t)left : phys;
}

static int fits(bkc_ctx *c, uint64_t bytes, const char *over_limit, const char *too_large)
{
    size_t left = c->host_vt->memory_left(c->host);
    if (left != SIZE_MAX && bytes > (uint64_t)left) {
        bkc__err(c, over_limit);
        return 0;
    }
    if (bytes > physical_memory()) {
        bkc__err(c, too_large);
        return 0;
    }
    return 1;
}

int bkc__fits(bkc_ctx *c, uint64_t bytes)
{
    return fits(c, bytes, BKC_ERR_MAXMEMORY, BKC_ERR_TOO_LARGE);
}

/* RedisBloom answers one text for a reserve over any limit */
int bkc__fits_create(bkc_ctx *c, uint64_t bytes)
{
    return fits(c, bytes, BKC_ERR_CREATE_MEM, BKC_ERR_CREATE_MEM);
}

int bkc__arg_error_rate(bkc_ctx *c, bkc_str s, double *out)
{
    if (!bkc_parse_double(s, out)) {
        bkc__err(c, "ERR bad error rate");
        return 0;
    }
    if (!(*out > 0 && *out < 1)) {
        bkc__err(c, "ERR (0 < error rate range < 1) ");
        return 0;
    }
    return 1;
}

int bkc__arg_capacity(bkc_ctx *c, bkc_str s, uint64_t *out)
{
    long long v;
    if (!bkc_parse_ll(s, &v)) {
        bkc__err(c, "ERR bad capacity");
        return 0;
    }
    if (v <= 0) {
        bkc__err(c, "ERR (capacity should be larger than 0)");
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

/*==========================================================================
 * *.INFO replies, shared by the families
 *==========================================================================*/

void bkc__reply_contains_many(bkc_ctx *c, const bk_filter *f, const bkc_str *items, size_t n,
                              int as_bool)
{
    enum { CHUNK = 64 };   /* the library prefetches ahead within a chunk */
    const void *keys[CHUNK];
    size_t lens[CHUNK];
    uint8_t found[CHUNK];
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t m = n - at < CHUNK ? n - at : CHUNK;
        for (size_t i = 0; i < m; i++) {
            keys[i] = items[at + i].ptr ? items[at + i].ptr : "";
            lens[i] = items[at + i].len;
            found[i] = 0;
        }
        /* the time-window and TTL filters answer at the command's clock */
        const bk_window *w = bk_filter_as_window((bk_filter *)f);
        const bk_ttl *t = bk_filter_as_ttl((bk_filter *)f);
        if (w != NULL) bk_window_contains_batch(w, keys, lens, m, c->now_ms, found);
        else if (t != NULL) bk_ttl_contains_batch(t, keys, lens, m, c->now_ms, found);
        else if (f != NULL && bk_filter_contains_batch(f, keys, lens, m, found) < 0)
            for (size_t i = 0; i < m; i++)
                found[i] = bk_filter_contains(f, keys[i], lens[i]) == 1;
        for (size_t i = 0; i < m; i++) {
            if (as_bool) bkc__bool(c, found[i] != 0);
            else bkc__int(c, found[i] != 0);
        }
    }
}

void bkc__cmd_count(bkc_ctx *c, int argc, const bkc_str *argv, bkc_kind kind)
{
    bkc_key *k;
    int st;
    (void)argc;
    bkc_value *v = bkc__open_lookup(c, argv[1], kind, &k, &st);
    if (st == BKC__FAILED) return;
    int64_t n = v ? bk_filter_count(v->filters[0], argv[2].ptr, argv[2].len) : 0;
    bkc__int(c, n > 0 ? n : 0);
    bkc__close(c, k);
}

void bkc__cmd_mexists(bkc_ctx *c, int argc, const bkc_str *argv, bkc_kind kind, int as_bool)
{
    bkc__cmd_lookups(c, argc, argv, kind, 1, as_bool);
}

void bkc__cmd_lookups(bkc_ctx *c, int argc, const bkc_str *argv, bkc_kind kind, int array,
                      int as_bool)
{
    bkc_key *k;
    int st;
    bkc_value *v = bkc__open_lookup(c, argv[1], kind, &k, &st);
    if (st == BKC__FAILED) return;
    size_t n = array ? (size_t)(argc - 2) : 1;
    if (array) bkc__array(c, n);
    bkc__reply_contains_many(c, v ? v->filters[0] : NULL, argv + 2, n, as_bool);
    bkc__close(c, k);
}

int bkc__resp(bkc_ctx *c)
{
    if (c->resp == 0 && c->host_vt->resp != NULL)
        c->resp = c->host_vt->resp(c->host);
    return c->resp >= 3 ? 3 : 2;
}

void bkc__reply_info(bkc_ctx *c, int argc, const bkc_str *argv,
                     const bkc__info_field *fields, int nfields,
                     void (*value)(bkc_ctx *c, const void *src, int field),
                     const void *src)
{
    if (argc == 3) {
        for (int f = 0; f < nfields; f++) {
            if (bkc_streq(argv[2], fields[f].keyword)) {
                /* RedisBloom: a one-pair map in RESP3, [value] in RESP2 */
                if (bkc__resp(c) >= 3) {
                    c->reply->vt->map(c->reply, 1);
                    bkc__simple(c, fields[f].label);
                } else {
                    bkc__array(c, 1);
                }
                value(c, src, f);
                return;
            }
        }
        bkc__err(c, "Invalid information value");
        return;
    }
    c->reply->vt->map(c->reply, (size_t)nfields);
    for (int f = 0; f < nfields; f++) {
        bkc__simple(c, fields[f].label);
        value(c, src, f);
    }
}

/*==========================================================================
 * Auto-clear options and INFO fields (BF.*, CBF.*)
 *==========================================================================*/

#define ERR_AUTOCLEAR "ERR bad AUTOCLEAR ratio: a fill ratio in (0, 1], such as 0.5"
#define ERR_ROTATE "ERR ROTATE needs AUTOCLEAR"

int bkc__parse_autoclear(bkc_ctx *c, int argc, const bkc_str *argv, int *i,
                         bkc__autoclear_opts *o)
{
    if (bkc_streq(argv[*i], "ROTATE")) {
        o->rotate = 1;
        return 1;
    }
    if (!bkc_streq(argv[*i], "AUTOCLEAR")) return 0;
    if (*i + 1 >= argc) {
        bkc__arity_error(c, argv);
        return -1;
    }
    double r;
    if (!bkc_parse_double(argv[*i + 1], &r) || !(r > 0 && r <= 1)) {
        bkc__err(c, ERR_AUTOCLEAR);
        return -1;
    }
    o->ratio = r;
    (*i)++;
    return 1;
}

int bkc__autoclear_valid(bkc_ctx *c, const bkc__autoclear_opts *o)
{
    if (o->rotate && o->ratio == 0) {
        bkc__err(c, ERR_ROTATE);
        return 0;
    }
    return 1;
}

bk_filter *bkc__autoclear_wrap(bkc_ctx *c, bk_filter *f, const bkc__autoclear_opts *o)
{
    if (o->ratio == 0) return f;
    bk_autoclear *a = NULL;
    int rc = bk_autoclear_wrap(&a, f, o->ratio, o->rotate ? BK_AUTOCLEAR_ROTATE
                                                           : BK_AUTOCLEAR_CLEAR);
    if (rc == BK_OK) return bk_autoclear_as_filter(a);
    bk_filter_free(f);
    if (rc == BK_ENOMEM) bkc__err(c, BKC_ERR_OOM);
    else bkc__lib_error(c, rc);
    return NULL;
}

int bkc__autoclear_argv(const bkc__autoclear_opts *o, char ratio[32], bkc_str *out)
{
    if (o->ratio == 0) return 0;
    snprintf(ratio, 32, "%.17g", o->ratio);
    out[0] = (bkc_str){"AUTOCLEAR", 9};
    out[1] = (bkc_str){ratio, strlen(ratio)};
    if (!o->rotate) return 2;
    out[2] = (bkc_str){"ROTATE", 6};
    return 3;
}

const bkc__info_field bkc__autoclear_fields[BKC__AUTOCLEAR_FIELDS] = {
    {"AUTOCLEAR", "Auto clear ratio"},
    {"AUTOCLEARMODE", "Auto clear mode"},
    {"CLEARS", "Clears"},
};

void bkc__autoclear_info_value(bkc_ctx *c, const bk_autoclear *a, int field)
{
    bk_autoclear_stats st;
    bk_autoclear_get_stats(a, &st);
    if (field == 0) c->reply->vt->dbl(c->reply, st.ratio);
    else if (field == 1) c->reply->vt->bulk(c->reply, st.mode ? "rotate" : "clear", st.mode ? 6 : 5);
    else bkc__int(c, (long long)st.clears);
}
