/*
 * cmd_internal.h - what the command files share, private to commands/.
 *
 * Every handler follows one shape: parse all arguments first (so that a
 * bad argument never leaves a half-done change), open the key through the
 * host with the weakest mode that is enough, check its kind, work with the
 * library, reply, call wrote() once when something changed, close.
 */
#ifndef BKC_INTERNAL_H
#define BKC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "command.h"

/*==========================================================================
 * Error texts shared by several families (docs/COMMANDS.md lists them all)
 *==========================================================================*/

#define BKC_ERR_WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"
#define BKC_ERR_NOT_FOUND "ERR not found"
#define BKC_ERR_ITEM_EXISTS "ERR item exists"
#define BKC_ERR_MAXMEMORY "ERR filter would exceed maxmemory"
#define BKC_ERR_TOO_LARGE "ERR filter would exceed the memory of this machine"
/* RedisBloom's text for a *.RESERVE (or an add that creates) whose filter
 * cannot be allocated on this machine */
#define BKC_ERR_CREATE_MEM "ERR Insufficient memory to create filter"
#define BKC_ERR_UNKNOWN_ARG "Unknown argument received"
#define BKC_ERR_OPEN "ERR cannot open key"
#define BKC_ERR_OOM "ERR out of memory"

/*==========================================================================
 * Replies
 *==========================================================================*/

static inline void bkc__ok(bkc_ctx *c) { c->reply->vt->simple(c->reply, "OK"); }
static inline void bkc__err(bkc_ctx *c, const char *s) { c->reply->vt->error(c->reply, s); }
static inline void bkc__int(bkc_ctx *c, long long v) { c->reply->vt->integer(c->reply, v); }
static inline void bkc__array(bkc_ctx *c, size_t n) { c->reply->vt->array(c->reply, n); }
static inline void bkc__simple(bkc_ctx *c, const char *s) { c->reply->vt->simple(c->reply, s); }
/* A yes/no answer: #t/#f in RESP3 where RedisBloom sends a boolean, :1/:0
 * in RESP2 (the host renders it). */
static inline void bkc__bool(bkc_ctx *c, int v)
{
    if (c->reply->vt->boolean) c->reply->vt->boolean(c->reply, v != 0);
    else c->reply->vt->integer(c->reply, v != 0);
}

/* One field of a *.INFO reply: the keyword that asks for it alone and the
 * label of the whole reply. */
typedef struct bkc__info_field {
    const char *keyword, *label;
} bkc__info_field;

/* The reply of *.INFO key [FIELD] for an open value: with argv[2], that
 * field alone as a one-element array (or "Invalid information value");
 * without, every field as label/value pairs (a map in RESP3). value()
 * writes field i of src. */
/* n replies, booleans (as_bool) or integers 0/1: whether f (NULL: an
 * empty key) may hold each item, looked up in batches (the library
 * overlaps their cache misses); a time-window or TTL filter at the
 * command's clock (c->now_ms). */
void bkc__reply_contains_many(bkc_ctx *c, const bk_filter *f, const bkc_str *items, size_t n,
                              int as_bool);

/* *.MEXISTS key item...: an array of bkc__reply_contains_many for a key of
 * `kind` (a missing key, or one of another kind, answers 0 for each item,
 * as the single lookups do). */
void bkc__cmd_mexists(bkc_ctx *c, int argc, const bkc_str *argv, bkc_kind kind, int as_bool);
/* The same for *.EXISTS key item (array 0: one reply, not an array) and
 * *.MEXISTS (array 1). */
void bkc__cmd_lookups(bkc_ctx *c, int argc, const bkc_str *argv, bkc_kind kind, int array,
                      int as_bool);

/* *.COUNT key item: the copies a key of `kind` counts (0: missing key,
 * another kind, or none). */
void bkc__cmd_count(bkc_ctx *c, int argc, const bkc_str *argv, bkc_kind kind);

/* The client's protocol: 2 or 3 (asks the host once when c->resp is 0). */
int bkc__resp(bkc_ctx *c);

void bkc__reply_info(bkc_ctx *c, int argc, const bkc_str *argv,
                     const bkc__info_field *fields, int nfields,
                     void (*value)(bkc_ctx *c, const void *src, int field),
                     const void *src);

/* "ERR <bk_strerror(rc)>" for a library error without a better text. */
void bkc__lib_error(bkc_ctx *c, int rc);

/* A new value of `kind` holding f, or NULL after replying (out of memory;
 * f is then freed). */
bkc_value *bkc__value_of(bkc_ctx *c, bkc_kind kind, bk_filter *f);

/* host set(k, v): 1, or 0 after replying (maxmemory, out of memory). */
int bkc__store(bkc_ctx *c, bkc_key *k, bkc_value *v);

/* BF.RESERVE's parsing of an error rate and a capacity, with its error
 * texts (also used by CBF.* and WF.*). Return 1, or 0 after replying. */
int bkc__arg_error_rate(bkc_ctx *c, bkc_str s, double *out);
int bkc__arg_capacity(bkc_ctx *c, bkc_str s, uint64_t *out);

/* The wrong-arity error of argv[0]'s table entry. */
void bkc__arity_error(bkc_ctx *c, const bkc_str *argv);

/* One option of a command at argv[*i]: moves *i past the option's values
 * and returns 1, or replies an error and returns 0. */
typedef int (*bkc__option_fn)(bkc_ctx *c, int argc, const bkc_str *argv, int *i, void *opts);

/* The options of an INSERT-style command (BF.INSERT, CF.INSERT[NX]): the
 * words from argv[2] up to ITEMS. NOCREATE sets *nocreate; every other word
 * goes to option(). Returns the index of the first item, or 0 after
 * replying (an option's error, or arity: no ITEMS, or nothing after it).
 * cmd_common.c. */
int bkc__insert_options(bkc_ctx *c, int argc, const bkc_str *argv, int *nocreate,
                        bkc__option_fn option, void *opts);

/* Auto-clear (lib/autoclear.c) on BF.RESERVE, BF.INSERT and CBF.RESERVE:
 * `AUTOCLEAR ratio` (in (0, 1]) and `ROTATE`. */
typedef struct bkc__autoclear_opts {
    double ratio; /* 0: not asked for */
    int rotate;
} bkc__autoclear_opts;

/* argv[*i] is AUTOCLEAR (its ratio taken: *i moves past it) or ROTATE:
 * returns 1; another word: 0; a bad or missing ratio: -1 (replied). */
int bkc__parse_autoclear(bkc_ctx *c, int argc, const bkc_str *argv, int *i,
                         bkc__autoclear_opts *o);
/* ROTATE without AUTOCLEAR: replies and returns 0. */
int bkc__autoclear_valid(bkc_ctx *c, const bkc__autoclear_opts *o);
/* f wrapped as o asks (f itself when o asks for nothing); NULL after
 * replying (f is then freed). */
bk_filter *bkc__autoclear_wrap(bkc_ctx *c, bk_filter *f, const bkc__autoclear_opts *o);
/* The argv words that ask for o again (a logged creation): at most 3. */
int bkc__autoclear_argv(const bkc__autoclear_opts *o, char ratio[32], bkc_str *out);

/* The *.INFO fields of an auto-clear filter, after a kind's own: ratio,
 * mode and clears so far. */
#define BKC__AUTOCLEAR_FIELDS 3
extern const bkc__info_field bkc__autoclear_fields[BKC__AUTOCLEAR_FIELDS];
void bkc__autoclear_info_value(bkc_ctx *c, const bk_autoclear *a, int field);

/*==========================================================================
 * Keys
 *==========================================================================*/

/* Results of bkc__open. */
#define BKC__FOUND 1     /* *v holds a value of the wanted kind */
#define BKC__MISSING 0   /* no such key; *k is open (WRITE: may be set) */
#define BKC__WRONG (-1)  /* another kind (or LOADING); *k is open, nothing replied */
#define BKC__FAILED (-2) /* the host could not open it; replied, nothing open */

/* Open name with mode and classify what it holds against want. */
int bkc__open(bkc_ctx *c, bkc_str name, bkc_open_mode mode, bkc_kind want,
              bkc_key **k, bkc_value **v);

static inline void bkc__close(bkc_ctx *c, bkc_key *k) { c->host_vt->close(k); }

/* Open name to read for a lookup: its value when it holds one of `want`,
 * else NULL (missing, or another kind: lookups answer 0 there); *st is
 * bkc__open's result (BKC__FAILED: replied, nothing open; otherwise close
 * *k). */
bkc_value *bkc__open_lookup(bkc_ctx *c, bkc_str name, bkc_kind want, bkc_key **k, int *st);

/* Open name for a command that needs the key to exist (INFO, DEBUG): its
 * value, or NULL after replying `ERR not found` / WRONGTYPE (the key then
 * closed again) or the host's error. */
bkc_value *bkc__open_found(bkc_ctx *c, bkc_str name, bkc_open_mode mode, bkc_kind want,
                           bkc_key **k);

/* *.RESERVE and the like: open name to write a new value of `kind`. 1
 * when the key is missing (*k open), else 0 after replying "item exists"
 * (or WRONGTYPE for a key of another kind, when wrongtype; CBF.RESERVE and
 * WF.RESERVE answer "item exists" there too) and closing it. */
int bkc__open_new(bkc_ctx *c, bkc_str name, bkc_kind kind, int wrongtype, bkc_key **k);

/* Store nv (NULL: the maker already replied) in k, answer OK and log the
 * command; then close k. */
void bkc__store_new(bkc_ctx *c, int argc, const bkc_str *argv, bkc_key *k, bkc_value *nv);

/* *.INFO key [FIELD]: the arity check (at most one field), then as
 * bkc__open_found, to read. */
bkc_value *bkc__open_info(bkc_ctx *c, int argc, const bkc_str *argv, bkc_kind want,
                          bkc_key **k);

/* Tell the host the change is done (the original argv, once). */
static inline void bkc__wrote(bkc_ctx *c, int argc, const bkc_str *argv)
{
    c->host_vt->wrote(c->host, argc, argv);
}

/* Tell the host the change is done as another command: head[0 .. nhead)
 * then items[0 .. n), one record (an add that created its key, logged as
 * the command that makes the same filter under any settings). Without
 * memory for the list, the command as sent (argc, sent). */
void bkc__wrote_as(bkc_ctx *c, int argc, const bkc_str *sent, const bkc_str *head, int nhead,
                   const bkc_str *items, size_t n);

/*==========================================================================
 * Memory
 *==========================================================================*/

/* The command layer's allocations, through bkc_set_allocator's functions
 * (value.c). Counts of zero are allowed (a 1-byte block). */
void *bkc__malloc(size_t size);
void *bkc__calloc(size_t count, size_t size);
void *bkc__realloc(void *ptr, size_t size);
void bkc__free(void *ptr);

/* What a block of the command layer's costs: the allocator's size_fn, or
 * `asked` without one. The visitor of bkc__keyset_allocations. */
size_t bkc__block_bytes(const void *ptr, size_t asked);
typedef void (*bkc__visit_fn)(void *ctx, const void *ptr, size_t asked);

/* The most bytes a value may grow by now: the host's memory_left, and never
 * more than the machine's physical memory. */
uint64_t bkc__memory_budget(bkc_ctx *c);

/* 1 when a new value (or growth) of `bytes` fits; otherwise replies
 * BKC_ERR_MAXMEMORY / BKC_ERR_TOO_LARGE and returns 0. */
int bkc__fits(bkc_ctx *c, uint64_t bytes);
/* The same for a BF/CF filter being created: BKC_ERR_CREATE_MEM for
 * either limit (RedisBloom's text). */
int bkc__fits_create(bkc_ctx *c, uint64_t bytes);
/* Whether a new filter of `bytes` (UINT64_MAX: too large to make at all)
 * may be made now: 1, or 0 after replying (cmd_common.c). */
int bkc__may_make(bkc_ctx *c, uint64_t bytes);
/* A whole-number option of a command: `NAME value`, the value in
 * [lo, hi] (else "ERR <label> must be between lo and hi"). */
typedef struct bkc__int_option {
    const char *name;  /* as sent, any case: "GENERATIONS" */
    const char *label; /* in the range error: "generations" */
    long long lo, hi;
    long long *value;  /* set when given (left as it is otherwise) */
    int given;         /* set to 1 when given */
} bkc__int_option;
/* argv[from ..] as `NAME value` pairs of the options opts[0 .. n) (WF.RESERVE's
 * GENERATIONS, TF.RESERVE's GENERATIONS and SLOTS): 1, or 0 after replying
 * (an unknown name, a missing value, a value out of range). */
int bkc__arg_int_options(bkc_ctx *c, int argc, const bkc_str *argv, int from,
                         bkc__int_option *opts, size_t n);
/* The value of a filter the library made with result rc, or NULL after
 * replying rc's error (BK_ESIZE: BKC_ERR_TOO_LARGE). */
bkc_value *bkc__made(bkc_ctx *c, int rc, bkc_kind kind, bk_filter *f);

/*==========================================================================
 * Values
 *==========================================================================*/

/* The largest number of stages of a CF filter. */
#define BKC_CF_MAX_STAGES 32

/* Chunk size of SCANDUMP (4 MiB; tests lower it). */
extern size_t bkc__scandump_chunk;

/* A CF filter of one stage, stage `stage` of v's sizing (capacity, bucket
 * size, max iterations from v): the filter, or a library error. */
int bkc__cf_stage_create(const bkc_value *v, uint32_t stage, bk_filter **out);
/* Bytes a CF stage of that capacity will take (for the memory check). */
uint64_t bkc__cf_stage_bytes(uint64_t capacity, uint32_t bucket_size);

/*==========================================================================
 * Shared command bodies: SCANDUMP / LOADCHUNK for every kind (value.c)
 *==========================================================================*/

/* v's filter when it is in one of RedisBloom's layouts (bk_rbloom,
 * bk_rcuckoo), else NULL. */
bk_filter *bkc__rb_filter(const bkc_value *v);
/* A CF value holding a bk_rcuckoo: its settings block copied from the
 * filter (the container and CF.INFO read it). Anything else: unchanged. */
void bkc__cf_settings_sync(bkc_value *v);

void bkc__scandump(bkc_ctx *c, int argc, const bkc_str *argv, bkc_kind kind);
void bkc__loadchunk(bkc_ctx *c, int argc, const bkc_str *argv, bkc_kind kind);

/*==========================================================================
 * Handlers (one file per family)
 *==========================================================================*/

#define BKC__HANDLER(name) void name(bkc_ctx *c, int argc, const bkc_str *argv)

BKC__HANDLER(bkc_cmd_bf_add);
BKC__HANDLER(bkc_cmd_bf_card);
BKC__HANDLER(bkc_cmd_bf_debug);
BKC__HANDLER(bkc_cmd_bf_exists);
BKC__HANDLER(bkc_cmd_bf_info);
BKC__HANDLER(bkc_cmd_bf_insert);
BKC__HANDLER(bkc_cmd_bf_loadchunk);
BKC__HANDLER(bkc_cmd_bf_madd);
BKC__HANDLER(bkc_cmd_bf_merge);
BKC__HANDLER(bkc_cmd_bf_mexists);
BKC__HANDLER(bkc_cmd_bf_reserve);
BKC__HANDLER(bkc_cmd_bf_scandump);

BKC__HANDLER(bkc_cmd_cf_add);
BKC__HANDLER(bkc_cmd_cf_addnx);
BKC__HANDLER(bkc_cmd_cf_count);
BKC__HANDLER(bkc_cmd_cf_debug);
BKC__HANDLER(bkc_cmd_cf_del);
BKC__HANDLER(bkc_cmd_cf_exists);
BKC__HANDLER(bkc_cmd_cf_info);
BKC__HANDLER(bkc_cmd_cf_insert);
BKC__HANDLER(bkc_cmd_cf_insertnx);
BKC__HANDLER(bkc_cmd_cf_loadchunk);
BKC__HANDLER(bkc_cmd_cf_mexists);
BKC__HANDLER(bkc_cmd_cf_reserve);
BKC__HANDLER(bkc_cmd_cf_scandump);

BKC__HANDLER(bkc_cmd_cbf_add);
BKC__HANDLER(bkc_cmd_cbf_count);
BKC__HANDLER(bkc_cmd_cbf_del);
BKC__HANDLER(bkc_cmd_cbf_exists);
BKC__HANDLER(bkc_cmd_cbf_info);
BKC__HANDLER(bkc_cmd_cbf_loadchunk);
BKC__HANDLER(bkc_cmd_cbf_madd);
BKC__HANDLER(bkc_cmd_cbf_mexists);
BKC__HANDLER(bkc_cmd_cbf_reserve);
BKC__HANDLER(bkc_cmd_cbf_scandump);

BKC__HANDLER(bkc_cmd_wf_add);
BKC__HANDLER(bkc_cmd_wf_exists);
BKC__HANDLER(bkc_cmd_wf_info);
BKC__HANDLER(bkc_cmd_wf_loadchunk);
BKC__HANDLER(bkc_cmd_wf_madd);
BKC__HANDLER(bkc_cmd_wf_mexists);
BKC__HANDLER(bkc_cmd_wf_reserve);
BKC__HANDLER(bkc_cmd_wf_scandump);

BKC__HANDLER(bkc_cmd_tf_add);
BKC__HANDLER(bkc_cmd_tf_addat);
BKC__HANDLER(bkc_cmd_tf_exists);
BKC__HANDLER(bkc_cmd_tf_info);
BKC__HANDLER(bkc_cmd_tf_loadchunk);
BKC__HANDLER(bkc_cmd_tf_madd);
BKC__HANDLER(bkc_cmd_tf_mexists);
BKC__HANDLER(bkc_cmd_tf_reserve);
BKC__HANDLER(bkc_cmd_tf_scandump);

BKC__HANDLER(bkc_cmd_sf_build);
BKC__HANDLER(bkc_cmd_sf_buildmap);
BKC__HANDLER(bkc_cmd_sf_exists);
BKC__HANDLER(bkc_cmd_sf_get);
BKC__HANDLER(bkc_cmd_sf_info);
BKC__HANDLER(bkc_cmd_sf_loadchunk);
BKC__HANDLER(bkc_cmd_sf_mexists);
BKC__HANDLER(bkc_cmd_sf_mget);
BKC__HANDLER(bkc_cmd_sf_scandump);

/* RS.*: the set of items of a BKC_KIND_KEYSET value (cmd_keyset.c). Its
 * byte form is the body of the value's container (docs/COMMANDS.md, "Value
 * encoding"): body_size bytes, any range of which body_range copies;
 * body_decode validates everything and builds a new set. */
typedef struct bkc_keyset bkc_keyset;
void bkc__keyset_free(bkc_keyset *s);
/* Every block the set holds (itself, its table, its records), with the
 * bytes asked for it. */
void bkc__keyset_allocations(const bkc_keyset *s, bkc__visit_fn visit, void *ctx);
uint64_t bkc__keyset_body_size(const bkc_keyset *s);
int bkc__keyset_body_range(const bkc_keyset *s, uint64_t from, unsigned char *out, size_t n);
int bkc__keyset_body_decode(const unsigned char *p, size_t n, bkc_keyset **out);

BKC__HANDLER(bkc_cmd_rs_add);
BKC__HANDLER(bkc_cmd_rs_card);
BKC__HANDLER(bkc_cmd_rs_diff);
BKC__HANDLER(bkc_cmd_rs_estimate);
BKC__HANDLER(bkc_cmd_rs_getids);
BKC__HANDLER(bkc_cmd_rs_iblt);
BKC__HANDLER(bkc_cmd_rs_info);
BKC__HANDLER(bkc_cmd_rs_ismember);
BKC__HANDLER(bkc_cmd_rs_loadchunk);
BKC__HANDLER(bkc_cmd_rs_rem);
BKC__HANDLER(bkc_cmd_rs_reserve);
BKC__HANDLER(bkc_cmd_rs_scandump);
BKC__HANDLER(bkc_cmd_rs_strata);

#endif /* BKC_INTERNAL_H */
