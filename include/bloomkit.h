/*
 * bloomkit.h - the one public header of libbloomkit.
 *
 * A family of approximate-membership filters ("definitely not in the set /
 * probably in the set") sharing one hashing scheme, one error convention and
 * one allocator hook.
 *
 * Conventions, for every function below:
 *   - Keys are byte strings: (const void *key, size_t len). len may be 0.
 *   - Functions that can fail return an int: BK_OK (0) or a negative BK_E*
 *     code; bk_strerror() turns it into a sentence. The library never aborts,
 *     exits or prints.
 *   - Handles are opaque, created by bk_*_create*() and released by
 *     bk_*_free(), which accepts NULL.
 *   - Counts that can exceed 2^32 are uint64_t; byte sizes are size_t.
 *   - "Thread-safe" means: may be called concurrently with any other function
 *     marked thread-safe on the same handle, without external locking.
 *
 * How to read it: PART 1 (common types and errors), PART 2 (any filter:
 * bk_filter, created by family and options, and the file functions), then
 * PART 3 (one section per dynamic family) and PART 4 (static filters and
 * reconciliation). Start with PART 2; go to a family's section for what
 * only that family can do.
 *
 * Copyright the bloomkit authors. Licensed under the MIT licence.
 */
#ifndef BLOOMKIT_H
#define BLOOMKIT_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t, uint32_t, uint8_t */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(BK_SHARED_BUILD)
#  define BK_API __declspec(dllexport)
#elif defined(__GNUC__)
#  define BK_API __attribute__((visibility("default")))
#else
#  define BK_API
#endif

/***************************************************************************
 * PART 1. Common: version, errors, memory, hashing
 *
 * What every other part uses. Stable: these names and codes keep their
 * meaning across releases (error codes and BK_DEFAULT_SEED are stored or
 * compared by callers).
 **************************************************************************/

/*==========================================================================
 * Version
 *==========================================================================*/

#define BK_VERSION_MAJOR 0
#define BK_VERSION_MINOR 1
#define BK_VERSION_PATCH 0
#define BK_VERSION_NUMBER \
    (BK_VERSION_MAJOR * 10000 + BK_VERSION_MINOR * 100 + BK_VERSION_PATCH)

/* The library's version as "MAJOR.MINOR.PATCH" (of the library linked, which
 * may differ from the BK_VERSION_* macros of the header compiled against). */
BK_API const char *bk_version_string(void);

/* BK_VERSION_NUMBER of the linked library. */
BK_API unsigned bk_version_number(void);

/*==========================================================================
 * Errors
 *
 * One list generates the codes, bk_strerror() and bk_errname(). Numeric
 * values are pinned: a published code never changes meaning, new codes are
 * appended.
 *==========================================================================*/

#define BK_ERRNO_MAP(X)                                                        \
    X(OK,         0,  "success")                                               \
    X(EINVAL,    -1,  "invalid argument")                                      \
    X(ENOMEM,    -2,  "out of memory")                                         \
    X(EFPR,      -3,  "false-positive rate must be a number in (0, 1)")        \
    X(ECAPACITY, -4,  "capacity must be at least 1")                           \
    X(EHASHES,   -5,  "number of hash functions out of range")                 \
    X(ESIZE,     -6,  "filter size out of range")                              \
    X(EINCOMPAT, -7,  "filters are incompatible (size, hash count or seed differ)") \
    X(EFULL,     -8,  "filter is full")                                        \
    X(ENOTFOUND, -9,  "item is not in the filter")                             \
    X(ENOTSUP,   -10, "operation not supported by this filter")                \
    X(EREADONLY, -11, "filter is read-only")                                   \
    X(EIO,       -12, "input/output error")                                    \
    X(EMAGIC,    -13, "not a bloomkit file (bad magic)")                       \
    X(EVERSION,  -14, "unsupported file format version")                      \
    X(EFAMILY,   -15, "unknown or unexpected filter family")                   \
    X(ETRUNC,    -16, "data is truncated")                                     \
    X(ECHECKSUM, -17, "checksum mismatch: data is corrupt")                    \
    X(ECORRUPT,  -18, "inconsistent or impossible parameters: data is corrupt") \
    X(ECHUNK,    -19, "chunk out of order or malformed")                       \
    X(ELIMIT,    -20, "configured limit reached")                              \
    X(EPARAM,    -21, "parameter out of range")                             \
    X(ECOPIES,   -22, "too many copies of one item (cuckoo: at most 2 x bucket size)") \
    X(EUNDELETABLE, -23, "item cannot be removed: all its bits are shared with other items") \
    X(ESTATIC,   -24, "static filter or map: built once from all its keys, it cannot add or change (rebuild it)") \
    X(ECONFLICT, -25, "a key appears twice with different values")          \
    X(EBUILD,    -26, "construction failed with every seed tried (too many attempts)") \
    X(EDECODE,   -27, "set difference too large for the table: decoding incomplete")

enum bk_error {
#define BK__ERR_ENUM(name, value, text) BK_##name = (value),
    BK_ERRNO_MAP(BK__ERR_ENUM)
#undef BK__ERR_ENUM
    BK__ERR_LAST = -27
};

/* A sentence describing err ("filter is full"). Never NULL; unknown codes
 * give "unknown error". Thread-safe. */
BK_API const char *bk_strerror(int err);

/* The code's name without prefix ("EFULL"), or "UNKNOWN". Thread-safe. */
BK_API const char *bk_errname(int err);

/* Any filter, whatever its family (see "Any filter" near the end). */
typedef struct bk_filter bk_filter;

/*==========================================================================
 * Memory
 *
 * What a filter costs: bk_filter_get_info(f).bytes (and each family's
 * *_bytes) counts the bytes asked of the allocator. Each family's section
 * below states its "memory beyond the bits": those bytes minus the payload
 * its file image stores (its bits, counters or fingerprints, with the
 * padding that section names), that is the handle, alignment reserve and
 * per-stage bookkeeping. The figures do not depend on the size of the
 * filter; tests/test_filter.c checks every one.
 *==========================================================================*/

/* A replacement for the C allocator. Every allocation the library makes goes
 * through it (the Redis module build routes memory through Redis, tests
 * inject failures). calloc_fn must return zeroed memory. Any function may
 * return NULL: the library then returns BK_ENOMEM and leaks nothing. */
typedef struct bk_allocator {
    void *(*malloc_fn)(void *opaque, size_t size);
    void *(*calloc_fn)(void *opaque, size_t count, size_t size);
    void (*free_fn)(void *opaque, void *ptr);
    void *opaque;
} bk_allocator;

/* Install an allocator (NULL restores malloc/calloc/free). Process-wide; call
 * it before creating any filter, never while filters made with the previous
 * allocator are alive. Not thread-safe. */
BK_API void bk_set_allocator(const bk_allocator *allocator);

/*==========================================================================
 * Hashing
 *
 * Every filter hashes a key once: XXH3-128 of the key bytes with the filter's
 * 64-bit seed. bk_hash is that value, so a caller that checks one key against
 * many filters with the same seed (the stages of a scalable filter, the
 * shards of a cluster) hashes it once and passes the bk_hash to the *_hash
 * variants. Probe positions are derived from it by enhanced double hashing
 * and reduced to [0, m) with a 64-bit multiply-high, so filters of any size
 * (beyond 2^32 bits too) keep their accuracy. The value for a given key and
 * seed never changes across versions or platforms.
 *==========================================================================*/

typedef struct bk_hash {
    uint64_t lo; /* low 64 bits of XXH3-128 */
    uint64_t hi; /* high 64 bits of XXH3-128 */
} bk_hash;

/* The default seed of filters created without one. */
#define BK_DEFAULT_SEED UINT64_C(0x9E3779B97F4A7C15)

/* Hash a key. O(len). Thread-safe. */
BK_API bk_hash bk_hash_key(const void *key, size_t len, uint64_t seed);

/***************************************************************************
 * PART 2. Any filter: the generic handle and files
 *
 * The face most callers need, and the stable one: create any family by its
 * id or name and options (bk_filter_config), then add, look up, remove,
 * count, batch, merge, inspect, save, load and map it through bk_filter.
 * The CLI, the server and the Redis module use nothing else for the
 * filters they hold. Family ids and the file format (docs/FORMAT.md) are
 * pinned: files written by one release load in the next.
 **************************************************************************/

/*==========================================================================
 * Any filter: the generic handle
 *
 * Every family's handle is also a bk_filter: bk_<family>_as_filter() views
 * it as one (no copy) and bk_filter_as_<family>() gets the family handle
 * back (NULL for another family). Front ends (the CLI, the server, the
 * Redis module) hold bk_filter pointers and call the functions below, which
 * dispatch through a small per-family table. The file format works on
 * bk_filter, so one set of save/load functions serves every family.
 *==========================================================================*/

/* Family identifiers. Pinned: they are stored in files. */
typedef enum bk_family {
    BK_FAMILY_BLOOM = 1,     /* classic Bloom filter (bk_bloom) */
    BK_FAMILY_BLOCKED = 2,   /* cache-blocked Bloom filter (bk_blocked) */
    BK_FAMILY_COUNTING = 3,  /* counting Bloom filter (bk_counting) */
    BK_FAMILY_DELETABLE = 4, /* deletable Bloom filter (bk_deletable) */
    BK_FAMILY_CUCKOO = 5,    /* cuckoo filter (bk_cuckoo) */
    BK_FAMILY_SCALABLE = 6,  /* scalable Bloom filter (bk_scalable) */
    BK_FAMILY_WINDOW = 7,    /* time-window filter (bk_window) */
    BK_FAMILY_DLEFT = 8,     /* d-left counting Bloom filter (bk_dleft) */
    BK_FAMILY_VARCOUNT = 9,  /* variable-length counters (bk_varcount) */
    BK_FAMILY_HIER = 10,     /* hierarchical counting filter (bk_hier) */
    BK_FAMILY_HYBRID = 11,   /* hybrid bits + counters (bk_hybrid) */
    BK_FAMILY_MORRIS = 12,   /* Morris-counter frequency filter (bk_morris) */
    BK_FAMILY_STATIC = 16,   /* static filter, binary fuse (bk_static) */
    BK_FAMILY_MAP = 17,      /* static map, Bloomier filter (bk_map) */
    BK_FAMILY_GROWABLE = 18, /* growable fingerprint table (bk_growable) */
    BK_FAMILY_BUMPED = 19,   /* static filter, one line per lookup (bk_bumped) */
    BK_FAMILY_RBLOOM = 20,   /* RedisBloom's scalable Bloom filter (bk_rbloom) */
    BK_FAMILY_RCUCKOO = 21,  /* RedisBloom's cuckoo filter (bk_rcuckoo) */
    BK_FAMILY_AUTOCLEAR = 22, /* a filter that clears itself (bk_autoclear) */
    BK_FAMILY_TTL = 23        /* per-item TTL filter (bk_ttl) */
} bk_family;

/* "bloom", "blocked", "counting", "deletable", "cuckoo", "scalable",
 * "window", "dleft", "varcount", "hier", "hybrid", "morris" (and the
 * families numbered from 16); NULL for an unknown value. */
BK_API const char *bk_family_name(bk_family family);

/* The family with that name, or 0 when there is none. */
BK_API bk_family bk_family_from_name(const char *name);

/* What bk_filter_create builds. bk_filter_config_init fills the defaults;
 * set capacity and fpr, and the family's options you care about (0 keeps a
 * field's default). */
typedef struct bk_filter_config {
    bk_family family;          /* default BK_FAMILY_BLOCKED */
    uint64_t capacity;         /* items (per window for the window family) */
    double fpr;                /* target false-positive rate */
    uint64_t seed;             /* default BK_DEFAULT_SEED */
    uint32_t counter_bits;     /* counting: 4 or 8 */
    uint64_t regions;          /* deletable: collision regions */
    uint32_t bucket_size;      /* cuckoo: 2, 4 or 8 */
    uint32_t fingerprint_bits; /* cuckoo: 0 chooses from fpr */
    uint32_t max_kicks;        /* cuckoo: relocations before "full" */
    uint32_t expansion;        /* scalable: growth factor of each new stage */
    int nonscaling;            /* scalable: refuse adds when full */
    uint64_t window;           /* window: span (caller's time unit) or, with
                                  window_by_count, a number of insertions */
    uint32_t generations;      /* window: sub-filters in the ring
                                  (ttl: generations; cfg.window is the
                                  longest TTL) */
    int window_by_count;       /* window: expire by insertions, not time */
    int single_writer;         /* blocked, counting, scalable, growable: 1
                                  for the single-writer mode (see "Write
                                  modes" under the blocked filter); other
                                  families ignore it */
    int blocked_split;         /* blocked: 1 for the split layout
                                  (bk_blocked_create_split) */
    double auto_clear;         /* bloom, blocked, counting: a fill ratio in
                                  (0, 1] at which the filter clears itself
                                  (bk_autoclear_wrap; the filter's family is
                                  then BK_FAMILY_AUTOCLEAR); 0: never */
    int auto_clear_mode;       /* with auto_clear: BK_AUTOCLEAR_CLEAR (0) or
                                  BK_AUTOCLEAR_ROTATE */
} bk_filter_config;

/* Fill *cfg with the defaults: blocked family, BK_DEFAULT_SEED, every option
 * 0 (the family's default); capacity and fpr 0 (must be set). */
BK_API void bk_filter_config_init(bk_filter_config *cfg);

/* Create a filter of any family from a config. Returns BK_OK, BK_EINVAL (a
 * NULL pointer), BK_EFAMILY (unknown family) or the family constructor's
 * own error (BK_EFPR, BK_ECAPACITY, BK_EPARAM, BK_ENOMEM ...). */
BK_API int bk_filter_create(bk_filter **out, const bk_filter_config *cfg);

/* A copy of f (memory only: never mapped). Returns BK_OK, BK_EINVAL,
 * BK_ENOMEM or BK_ENOTSUP. */
BK_API int bk_filter_clone(bk_filter **out, const bk_filter *f);

/* Forget every item. Returns BK_OK, BK_EINVAL, BK_EREADONLY or BK_ENOTSUP.
 * Not thread-safe with other use. */
BK_API int bk_filter_clear(bk_filter *f);

/* dst becomes the union (merge) or intersection of dst and src, which must
 * be of the same family with the same shape and seed. Returns BK_OK,
 * BK_EINVAL, BK_EINCOMPAT (different family, size, hashes or seed: the
 * message of bk_filter_incompatibility says which), BK_EREADONLY or
 * BK_ENOTSUP (a family without the operation). Not thread-safe with adds. */
BK_API int bk_filter_merge(bk_filter *dst, const bk_filter *src);
BK_API int bk_filter_intersect(bk_filter *dst, const bk_filter *src);

/* Why a and b cannot be merged, in words ("family differs: bloom vs
 * cuckoo", "sizes differ: 9585059 vs 100 bits", "seeds differ"), written
 * into buf (cap bytes, NUL-terminated). Returns 0 when they are compatible,
 * 1 when they are not. */
BK_API int bk_filter_incompatibility(const bk_filter *a, const bk_filter *b,
                                     char *buf, size_t cap);

/* The family of f. */
BK_API bk_family bk_filter_family(const bk_filter *f);

/* Release any filter (the same as its family's free). Accepts NULL. */
BK_API void bk_filter_free(bk_filter *f);

/* Add, look up, remove and count a key through the family's own function.
 * add returns 1 (stored as certainly new), 0 (may have been present) or an
 * error (BK_EFULL, BK_EREADONLY for a read-only mapping, ...); the cuckoo
 * filter stores a copy on every successful add, so it always answers 1. remove returns
 * BK_OK, BK_ENOTFOUND or BK_ENOTSUP for families that cannot delete.
 * count returns the family's count estimate (contains for the Bloom
 * families). Thread-safety is the family's. */
BK_API int bk_filter_add(bk_filter *f, const void *key, size_t len);
BK_API int bk_filter_contains(const bk_filter *f, const void *key, size_t len);
BK_API int bk_filter_remove(bk_filter *f, const void *key, size_t len);
BK_API int64_t bk_filter_count(const bk_filter *f, const void *key, size_t len);

/* Batched add and lookup through the family's batch functions (hashing
 * ahead and prefetching where the family has them). results[i] (may be
 * NULL) gets what the single-key call returns for key i (add: 1, 0;
 * contains: 1, 0). Returns the number of 1s, or a negative error: for add,
 * the first error stops the batch (results before it are filled). */
BK_API int64_t bk_filter_add_batch(bk_filter *f, const void *const *keys,
                                   const size_t *lens, size_t n,
                                   uint8_t *results);
BK_API int64_t bk_filter_contains_batch(const bk_filter *f,
                                        const void *const *keys,
                                        const size_t *lens, size_t n,
                                        uint8_t *results);

/* The seed keys are hashed with (for bk_hash_key). */
BK_API uint64_t bk_filter_seed(const bk_filter *f);

typedef struct bk_filter_info {
    bk_family family;
    uint64_t seed;
    uint64_t capacity;        /* items it was sized for (0 if unknown) */
    double target_fpr;        /* rate it was sized for (0 if unknown) */
    uint64_t items;           /* the family's item count */
    double estimated_items;   /* distinct items estimated from its state */
    double fpr_now;           /* expected false-positive rate now */
    double fpr_at_capacity;   /* expected rate when full (0 if unknown) */
    double fill;              /* bits set / slots used, 0..1 */
    size_t bytes;             /* memory held */
    uint32_t parts;           /* sub-filters (stages, generations); 1 otherwise */
    int can_remove;           /* 1 when bk_filter_remove is supported */
    int lockfree_add;         /* 1 when threads may add concurrently */
    int mapped;               /* 1 when the payload lives in a mapped file */
    int read_only;            /* 1 when adds are refused (read-only mapping) */
    int single_writer;        /* 1 in the single-writer mode (plain stores:
                                 one writer, no concurrent use); then
                                 lockfree_add is 0 */
} bk_filter_info;

/* Fill *out. Cost is the family's statistics cost (O(size) for most).
 * Returns BK_OK or BK_EINVAL. */
BK_API int bk_filter_get_info(const bk_filter *f, bk_filter_info *out);

/* As bk_filter_get_info, in O(1) where the family can: family, seed,
 * capacity, target_fpr, items, fpr_at_capacity, bytes, parts and the flags
 * are as there; the fields that need a pass over the table (fill, fpr_now,
 * estimated_items) may be 0. For CBF.INFO-like callers that report sizes
 * and counts of large filters often. The counting filter answers in O(1);
 * other families answer as bk_filter_get_info. */
BK_API int bk_filter_get_summary(const bk_filter *f, bk_filter_info *out);

/* What f costs the allocator: the sum over every block of memory it holds
 * of usable(ctx, ptr), ptr as the allocator returned it (malloc_usable_size,
 * RedisModule_MallocSize ...), or of the bytes asked when usable is NULL.
 * Memory f shares with other filters (parameters kept once for many) is
 * not counted. A family that cannot list its blocks answers its
 * bk_filter_info.bytes. 0 for NULL. */
BK_API size_t bk_filter_memory_usage(const bk_filter *f,
                                     size_t (*usable)(void *ctx, const void *ptr), void *ctx);

/* The bytes of the file f uses in place (bk_filter_map: outside the
 * allocator, in RAM as far as it is read); 0 when f is not mapped or its
 * family copied the payload. O(1). */
BK_API size_t bk_filter_mapped_bytes(const bk_filter *f);

/* Choose the write mode of f (see "Write modes" under the blocked filter):
 * 1 single-writer, 0 concurrent (the default of every created, loaded,
 * mapped or cloned filter; not stored in files). Returns BK_OK, BK_EINVAL
 * or BK_ENOTSUP (a family with one mode only: its adds stay as they are).
 * Not thread-safe: call before other threads use f. */
BK_API int bk_filter_set_single_writer(bk_filter *f, int single_writer);

/*==========================================================================
 * Files (docs/FORMAT.md)
 *
 * One portable format for every family: a 128-byte little-endian header,
 * one 64-byte descriptor per sub-filter, then the payload, 64-byte aligned
 * so that a mapped file is used in place. Header and payload each carry an
 * XXH3-64 checksum. Every field is validated on load; a damaged file gives
 * an error (BK_EMAGIC, BK_EVERSION, BK_EFAMILY, BK_ETRUNC, BK_ECHECKSUM,
 * BK_ECORRUPT, BK_EIO ...) and never a crash or an allocation sized by an
 * unchecked field. Saving while other threads add is not supported.
 *==========================================================================*/

/* Exact size in bytes of f's serialised form. */
BK_API uint64_t bk_filter_serialized_size(const bk_filter *f);

/* Serialise f into buf (cap bytes, at least bk_filter_serialized_size).
 * Returns BK_OK, BK_EINVAL or BK_ESIZE (buf too small). */
BK_API int bk_filter_serialize(const bk_filter *f, void *buf, size_t cap);

/* Write f to an open file descriptor at its current position (no fsync).
 * Returns BK_OK or BK_EIO (errno says why). */
BK_API int bk_filter_write_fd(const bk_filter *f, int fd);

/* Save f to path atomically: written to a temporary file in the same
 * directory, fsynced, renamed over path, and the directory fsynced. A crash
 * leaves either the old file or the new one, never a mix. Returns BK_OK,
 * BK_EINVAL or BK_EIO. */
BK_API int bk_filter_save(const bk_filter *f, const char *path);

/* Rebuild a filter from len bytes at buf (copied: buf may be freed after).
 * Returns BK_OK and *out, or a format error, BK_ENOMEM. */
BK_API int bk_filter_deserialize(bk_filter **out, const void *buf, size_t len);

/* Read a filter from an open descriptor, from its current position to end
 * of file. Returns BK_OK or a format error, BK_EIO, BK_ENOMEM. */
BK_API int bk_filter_read_fd(bk_filter **out, int fd);

/* Load the filter saved at path into memory. */
BK_API int bk_filter_load(bk_filter **out, const char *path);

/* Flags of bk_filter_map. */
#define BK_MAP_READONLY 0u  /* lookups only: adds answer BK_EREADONLY */
#define BK_MAP_WRITABLE 1u  /* changes land in the file (see bk_filter_sync) */
#define BK_MAP_VERIFY 2u    /* also check the payload checksum (reads it all) */
#define BK_MAP_PRIVATE 4u   /* copy-on-write: adds allowed, kept in memory,
                               never written to the file (not with WRITABLE) */

/* Memory-map the file at path and use it in place: the filter is usable at
 * once, whatever its size, and pages are read as lookups touch them. The
 * header and descriptors are always validated; the payload checksum only
 * with BK_MAP_VERIFY. With BK_MAP_WRITABLE adds write into the file's pages;
 * bk_filter_sync() updates the header (counts, checksums) and flushes.
 * A writable mapped filter cannot change shape (a scalable filter cannot
 * add a stage: bk_filter_sync answers BK_ENOTSUP; nor can a growable
 * filter double, nor hold more items while it is a list). A family that
 * copies its payload when loaded (the growable filter, a cuckoo filter of
 * several stages) is read into memory by a read-only or private mapping:
 * the file is not kept mapped (bk_filter_info.mapped 0). Writable, it keeps
 * the mapping, and bk_filter_sync copies its parts back into the file.
 * Returns BK_OK, a format error, BK_EIO. */
BK_API int bk_filter_map(bk_filter **out, const char *path, unsigned flags);

/* Flush a writable mapping: header fields and checksums are rewritten and
 * the file is msync'ed. BK_OK for a filter that is not mapped (nothing to
 * do), BK_EREADONLY for a read-only mapping, BK_ENOTSUP for a private one
 * (it never writes back), BK_EIO. Not thread-safe with adds. */
BK_API int bk_filter_sync(bk_filter *f);

/* Chunked export (backs BF.SCANDUMP): copies the next at most cap bytes of
 * f's serialised form into buf. *cursor is 0 on the first call and is set
 * to the offset after the chunk; at the end *len is 0 and *cursor 0. The
 * filter must not change between calls. Returns BK_OK or BK_EINVAL. */
BK_API int bk_filter_dump_chunk(const bk_filter *f, uint64_t *cursor,
                                void *buf, size_t cap, size_t *len);

/* Chunked import (backs BF.LOADCHUNK): feed the chunks of a dump in order,
 * each with the cursor the dump returned for it; finish yields the filter.
 * The header is validated as soon as it is complete and the payload is then
 * allocated, at most max_bytes (0: no limit; BK_ELIMIT beyond); the payload
 * checksum is checked by finish. Any error leaves the loader unusable
 * (free it); nothing half-built escapes. */
typedef struct bk_loader bk_loader;
BK_API int bk_loader_create(bk_loader **out, uint64_t max_bytes);
BK_API int bk_loader_feed(bk_loader *l, uint64_t cursor, const void *data,
                          size_t len);
BK_API int bk_loader_finish(bk_loader *l, bk_filter **out);
BK_API void bk_loader_free(bk_loader *l);

/***************************************************************************
 * PART 3. The families, one section each (advanced)
 *
 * Each family's own constructor and knobs (sizing, layouts, write modes,
 * statistics), for callers that want one family's particular abilities:
 * the classic filter and its sizing maths, cache-blocked, counting,
 * deletable, cuckoo, scalable, growable, RedisBloom's own layouts, the
 * time window, the counting variants of seed 002 (d-left, variable-length,
 * hierarchical, hybrid) and Morris counters. Every handle here is also a
 * bk_filter (bk_<family>_as_filter), so PART 2 works on it. Advanced: the
 * shapes of these calls may still change before 1.0; their files do not.
 **************************************************************************/

/*==========================================================================
 * Sizing maths of the classic Bloom filter
 *
 * For n items in m bits with k hash functions the false-positive rate is
 *     p = (1 - e^(-k n / m))^k,
 * minimised at k = (m / n) ln 2, which gives m = -n ln p / (ln 2)^2.
 *==========================================================================*/

/* Largest number of hash functions a classic filter accepts. */
#define BK_MAX_HASHES 64
/* Largest classic filter, in bits (2^48 bits = 32 TiB). */
#define BK_MAX_BITS (UINT64_C(1) << 48)

/* Optimal size for n items at false-positive rate p:
 *   m = ceil(-n ln p / (ln 2)^2) bits, k = round((m / n) ln 2), at least 1.
 * Either output may be NULL. Returns BK_OK, BK_ECAPACITY (n = 0), BK_EFPR
 * (p not in (0, 1), NaN), BK_ESIZE (m above BK_MAX_BITS) or BK_EHASHES
 * (k above BK_MAX_HASHES). */
BK_API int bk_bloom_optimal(uint64_t n, double p, uint64_t *m_bits,
                            uint32_t *k);

/* Expected false-positive rate (1 - e^(-k n / m))^k of m bits and k hashes
 * holding n items. Returns NaN when m = 0 or k = 0. */
BK_API double bk_bloom_fpr(uint64_t n, uint64_t m_bits, uint32_t k);

/* The most items m_bits can hold at false-positive rate p or better, using
 * the optimal k for each candidate n. Returns BK_OK, BK_EFPR, BK_ESIZE
 * (m_bits = 0 or above BK_MAX_BITS) or BK_ECAPACITY (not even one item fits).
 * To size from a memory budget in bytes pass 8 * bytes. */
BK_API int bk_bloom_capacity(uint64_t m_bits, double p, uint64_t *n);

/*==========================================================================
 * Classic Bloom filter
 *
 * m bits, k probes per key anywhere in the array. Adds and lookups are
 * lock-free: bits are set with atomic OR on 64-bit words and read with relaxed
 * loads, so any number of threads may add and look up at once. A lookup that
 * races with the add of the same key may answer either way; once an add has
 * returned, every later lookup (in any thread that synchronises with it)
 * finds the key. On large filters every probe is a cache miss; the blocked
 * filter (one cache line per key) is faster and is the default elsewhere.
 *
 * Memory beyond the bits: 176 bytes (a 104-byte handle, and 72 bytes the
 * cache-line-aligned bit array reserves: up to 64 of alignment and the
 * block's pointer). The bits are ceil(m / 64) 64-bit words.
 *==========================================================================*/

typedef struct bk_bloom bk_bloom;

/* Create a filter sized for `capacity` items at false-positive rate `fpr`
 * (see bk_bloom_optimal), hashing with `seed`. The bit array is zeroed and
 * 64-byte aligned. Returns BK_OK and sets *out, or an error of
 * bk_bloom_optimal, BK_EINVAL (out is NULL) or BK_ENOMEM. O(m) memory. */
BK_API int bk_bloom_create(bk_bloom **out, uint64_t capacity, double fpr,
                           uint64_t seed);

/* Create a filter of exactly m_bits bits and k hash functions. Its capacity
 * is unknown (0), so statistics give no "FPR at capacity". Returns BK_OK, BK_EINVAL,
 * BK_ESIZE (m_bits = 0 or above BK_MAX_BITS), BK_EHASHES (k = 0 or above
 * BK_MAX_HASHES) or BK_ENOMEM. */
BK_API int bk_bloom_create_mk(bk_bloom **out, uint64_t m_bits, uint32_t k,
                              uint64_t seed);

/* Release a filter. Accepts NULL. Not thread-safe with any other use. */
BK_API void bk_bloom_free(bk_bloom *f);

/* Add a key. Returns 1 when at least one of its bits was clear (the key was
 * certainly new), 0 when all were set (it may have been added before).
 * O(k), k cache misses on a large filter. Thread-safe. */
BK_API int bk_bloom_add(bk_bloom *f, const void *key, size_t len);

/* 1 if the key is probably present, 0 if certainly absent. Thread-safe. */
BK_API int bk_bloom_contains(const bk_bloom *f, const void *key, size_t len);

/* Add the key only if it is not probably present: returns 1 when it was
 * added (certainly new), 0 when it was found and nothing was written.
 * Unlike bk_bloom_add, a present key costs no writes. Thread-safe; two
 * threads adding the same new key at once may both get 1. */
BK_API int bk_bloom_add_if_absent(bk_bloom *f, const void *key, size_t len);

/* The same three operations on a key hashed beforehand with
 * bk_hash_key(key, len, bk_bloom_seed(f)). */
BK_API int bk_bloom_add_hash(bk_bloom *f, bk_hash h);
BK_API int bk_bloom_contains_hash(const bk_bloom *f, bk_hash h);
BK_API int bk_bloom_add_if_absent_hash(bk_bloom *f, bk_hash h);

/* Batch add of n keys (keys[i] of lens[i] bytes). If results is not NULL,
 * results[i] is what bk_bloom_add returned for key i. Hashes ahead and
 * prefetches, so it is faster than n single calls on large filters.
 * Returns the number of keys that were certainly new (>= 0), or BK_EINVAL
 * when a needed pointer is NULL. Thread-safe. */
BK_API int64_t bk_bloom_add_batch(bk_bloom *f, const void *const *keys,
                                  const size_t *lens, size_t n,
                                  uint8_t *results);

/* Batch lookup: results[i] = bk_bloom_contains(keys[i]). results may be NULL
 * when only the count is wanted. Returns the number of keys found (>= 0) or
 * BK_EINVAL. Thread-safe. */
BK_API int64_t bk_bloom_contains_batch(const bk_bloom *f,
                                       const void *const *keys,
                                       const size_t *lens, size_t n,
                                       uint8_t *results);

/* Clear every bit and the item count. O(m). Not thread-safe with adds. */
BK_API void bk_bloom_clear(bk_bloom *f);

/* dst |= src: dst then answers "present" for every key added to either.
 * dst's item count becomes the cardinality estimate of the union.
 * Returns BK_OK, BK_EINVAL or BK_EINCOMPAT (m, k or seed differ).
 * O(m). Not thread-safe with adds to dst. */
BK_API int bk_bloom_union(bk_bloom *dst, const bk_bloom *src);

/* dst &= src: dst then answers "present" for every key added to both (and,
 * as always, for some others: the intersection of two filters has a higher
 * FPR than a filter built from the common keys). Item count becomes the
 * cardinality estimate. Returns BK_OK, BK_EINVAL or BK_EINCOMPAT. O(m). */
BK_API int bk_bloom_intersect(bk_bloom *dst, const bk_bloom *src);

/* Create a copy (same parameters and bits). Returns BK_OK, BK_EINVAL or
 * BK_ENOMEM. Not thread-safe with adds to src. */
BK_API int bk_bloom_clone(bk_bloom **out, const bk_bloom *src);

typedef struct bk_bloom_stats {
    uint64_t bits;            /* m */
    uint32_t hashes;          /* k */
    uint64_t seed;
    uint64_t capacity;        /* n it was sized for; 0 if created from (m, k) */
    double target_fpr;        /* p it was sized for; 0 if created from (m, k) */
    uint64_t items;           /* adds that returned 1 (certainly new keys) */
    uint64_t bits_set;        /* t, by population count */
    double fill;              /* t / m */
    double estimated_items;   /* -(m / k) ln(1 - t / m); +inf when full */
    double fpr_now;           /* fill^k: probability an absent key is found */
    double fpr_at_capacity;   /* bk_bloom_fpr(capacity, m, k); 0 if unknown */
    size_t bytes;             /* memory held by the filter, struct included */
} bk_bloom_stats;

/* Fill *out. O(m) (counts bits). Thread-safe; with concurrent adds the
 * counts are a snapshot taken while they run. Returns BK_OK or BK_EINVAL. */
BK_API int bk_bloom_get_stats(const bk_bloom *f, bk_bloom_stats *out);

/* 1 when a and b have the same parameters (m, k, seed) and identical bits,
 * 0 otherwise (or when either is NULL). O(m). */
BK_API int bk_bloom_equal(const bk_bloom *a, const bk_bloom *b);

/* Cheap accessors. Thread-safe. */
BK_API uint64_t bk_bloom_bits(const bk_bloom *f);
BK_API uint32_t bk_bloom_hashes(const bk_bloom *f);
BK_API uint64_t bk_bloom_seed(const bk_bloom *f);
BK_API uint64_t bk_bloom_items(const bk_bloom *f);

/* Estimated number of distinct keys added: -(m / k) ln(1 - t / m), where t
 * is the number of bits set (Swamidass & Baldi, 2007). O(m). Thread-safe. */
BK_API double bk_bloom_estimate_items(const bk_bloom *f);

/* This filter as a bk_filter, and back (NULL for another family). */
BK_API bk_filter *bk_bloom_as_filter(bk_bloom *f);
BK_API bk_bloom *bk_filter_as_bloom(bk_filter *f);

/*==========================================================================
 * Cache-blocked Bloom filter (Putze, Sanders & Singler, 2007)
 *
 * The default filter. Each key picks one 512-bit block (one 64-byte cache
 * line) by fast range on its hash and sets or tests k bits inside it, so a
 * lookup costs one cache miss instead of k. Keys fall into blocks unevenly,
 * which raises the rate for a given size: for n keys in b blocks
 *     p = sum_i C(n, i) b^-i (1 - 1/b)^(n-i) r_k(i),
 * r_k(i) the exact rate of a 512-bit block holding i keys (close to
 * (1 - (1 - 1/512)^(i k))^k), and sizing uses this formula, not the classic
 * one: 9.9 bits per key at 1% instead of 9.6, 15.5 at 0.1% instead of 14.4. Adds and lookups are lock-free, as for the classic
 * filter. The bits a key sets never depend on the CPU: the scalar, AVX2 and
 * AVX-512 paths (chosen at run time) build identical filters.
 *
 * Memory beyond the bits: 328 bytes (a 256-byte handle and 72 bytes of
 * alignment reserve for the block array). The bits are whole 64-byte
 * blocks.
 *==========================================================================*/

/* Bits in a block: one 64-byte cache line. Filter sizes are multiples. */
#define BK_BLOCKED_BLOCK_BITS 512
/* Largest number of bits per key a blocked filter accepts. */
#define BK_BLOCKED_MAX_HASHES 16

/* Optimal size for n items at false-positive rate p: the smallest number of
 * blocks for which some k in 1..BK_BLOCKED_MAX_HASHES gives bk_blocked_fpr
 * <= p, and that k (the one with the lowest rate). m_bits is a multiple of
 * 512. Either output may be NULL. Returns BK_OK, BK_ECAPACITY (n = 0),
 * BK_EFPR (p not in (0, 1), NaN) or BK_ESIZE (m above BK_MAX_BITS).
 * O(log m * mean keys per block) time (about a millisecond); the answers
 * for the 16 most recent (n, p) pairs are remembered, so a repeated pair
 * (many filters of one shape) costs well under a microsecond. Thread-safe. */
BK_API int bk_blocked_optimal(uint64_t n, double p, uint64_t *m_bits,
                              uint32_t *k);

/* Expected false-positive rate of a blocked filter of m_bits bits (rounded
 * up to whole blocks) and k bits per key holding n items: the sum above,
 * with the exact binomial block load. Returns NaN when m_bits = 0, k = 0 or
 * k > BK_BLOCKED_MAX_HASHES; 0 when n = 0. O(n / blocks) time. Thread-safe. */
BK_API double bk_blocked_fpr(uint64_t n, uint64_t m_bits, uint32_t k);

/* The most items m_bits (rounded up to whole blocks) can hold at rate p or
 * better, with the best k for each candidate n. Returns BK_OK, BK_EFPR,
 * BK_ESIZE (m_bits = 0 or above BK_MAX_BITS) or BK_ECAPACITY (not even one
 * item fits). Thread-safe. */
BK_API int bk_blocked_capacity(uint64_t m_bits, double p, uint64_t *n);

typedef struct bk_blocked bk_blocked;

/* Create a filter sized for `capacity` items at false-positive rate `fpr`
 * (see bk_blocked_optimal), hashing with `seed`. The blocks are zeroed and
 * 64-byte aligned. Returns BK_OK and sets *out, or an error of
 * bk_blocked_optimal, BK_EINVAL (out is NULL) or BK_ENOMEM. O(m) memory. */
BK_API int bk_blocked_create(bk_blocked **out, uint64_t capacity, double fpr,
                             uint64_t seed);

/* Create a filter of m_bits bits, rounded up to a multiple of 512, and k
 * bits per key. Its capacity is unknown (0). Returns BK_OK, BK_EINVAL,
 * BK_ESIZE (m_bits = 0 or above BK_MAX_BITS), BK_EHASHES (k = 0 or above
 * BK_BLOCKED_MAX_HASHES) or BK_ENOMEM. */
BK_API int bk_blocked_create_mk(bk_blocked **out, uint64_t m_bits, uint32_t k,
                                uint64_t seed);

/* The split layout, for fast single-key calls.
 *
 * A key sets one bit in each of the eight 64-bit words of its block: bit
 * (x * SALT[i]) >> 26 of word i, k = 8 always (the split-block design of
 * Impala, Kudu and Parquet, in 512-bit lines). Keys are hashed with XXH3-64
 * of the key and the seed: the block by fast range on its 64 bits, x its
 * low 32 bits. Its mask costs four vector instructions where the default
 * layout's k free positions cost about five per probe, and its hash about
 * half of XXH3-128, so single adds and lookups on a filter far larger than
 * the caches run about 1.6x (lookups) and 2x (adds) as fast
 * (bench/HISTORY.md section 13). The price is bits: 10.1 per key at 1%
 * (9.9 for the default), 15.7 at 0.1% (15.5), 23.6 at 0.01% (about 21).
 * Everything else (write modes, batches, set operations between two split
 * filters, statistics, the file format with `hash algorithm` 2) works as
 * for the default layout; BK_EINCOMPAT between layouts. */
#define BK_BLOCKED_SPLIT_HASHES 8

/* Create a split-layout filter for `capacity` items at rate `fpr` (see
 * bk_blocked_optimal_split). Returns as bk_blocked_create. */
BK_API int bk_blocked_create_split(bk_blocked **out, uint64_t capacity,
                                   double fpr, uint64_t seed);

/* The smallest split-layout filter for n items at rate p, by the exact
 * binomial block load with (1 - (63/64)^i)^8 for a block of i keys.
 * Returns BK_OK, BK_ECAPACITY, BK_EFPR or BK_ESIZE. Thread-safe. */
BK_API int bk_blocked_optimal_split(uint64_t n, double p, uint64_t *m_bits);

/* Expected rate of a split-layout filter of m_bits bits holding n items.
 * NaN when m_bits = 0, 0 when n = 0. Thread-safe. */
BK_API double bk_blocked_split_fpr(uint64_t n, uint64_t m_bits);

/* 1 for the split layout, 0 for the default one. Thread-safe. */
BK_API int bk_blocked_split(const bk_blocked *f);

/* The key's hash as f's layout defines it: bk_hash_key(key, len, seed)
 * for the default layout; XXH3-64 in both halves for the split one. This
 * is what the _hash functions below take. Thread-safe. */
BK_API bk_hash bk_blocked_hash_key(const bk_blocked *f, const void *key,
                                   size_t len);

/* Release a filter. Accepts NULL. Not thread-safe with any other use. */
BK_API void bk_blocked_free(bk_blocked *f);

/* Add a key. Returns 1 when at least one of its bits was clear (the key was
 * certainly new), 0 when all were set. O(k) register work, one cache line
 * read, and written only when a bit changes. Thread-safe in the concurrent
 * write mode (the default; see "Write modes" below). */
BK_API int bk_blocked_add(bk_blocked *f, const void *key, size_t len);

/* 1 if the key is probably present, 0 if certainly absent. One cache line
 * read. Thread-safe. */
BK_API int bk_blocked_contains(const bk_blocked *f, const void *key,
                               size_t len);

/* Add the key only if it is not probably present: 1 when it was added
 * (certainly new), 0 when it was found and nothing was written.
 * Thread-safe; two threads adding the same new key at once may both get 1. */
BK_API int bk_blocked_add_if_absent(bk_blocked *f, const void *key,
                                    size_t len);

/* The same three on a key hashed beforehand with bk_blocked_hash_key(f,
 * key, len), which for the default layout is bk_hash_key(key, len,
 * bk_blocked_seed(f)). Thread-safe. */
BK_API int bk_blocked_add_hash(bk_blocked *f, bk_hash h);
BK_API int bk_blocked_contains_hash(const bk_blocked *f, bk_hash h);
BK_API int bk_blocked_add_if_absent_hash(bk_blocked *f, bk_hash h);

/* Batch add of n keys (keys[i] of lens[i] bytes); results[i] (if results is
 * not NULL) is what bk_blocked_add returned for key i. Keys are hashed
 * ahead and their blocks prefetched so that many cache misses are in flight
 * at once: on a filter larger than the caches this is several times faster
 * than n single calls. Returns the number of keys that were certainly new
 * (>= 0), or BK_EINVAL when a needed pointer is NULL. Thread-safe. */
BK_API int64_t bk_blocked_add_batch(bk_blocked *f, const void *const *keys,
                                    const size_t *lens, size_t n,
                                    uint8_t *results);

/* Batch lookup: results[i] = bk_blocked_contains(keys[i]); results may be
 * NULL when only the count is wanted. Returns the number of keys found
 * (>= 0) or BK_EINVAL. Thread-safe. */
BK_API int64_t bk_blocked_contains_batch(const bk_blocked *f,
                                         const void *const *keys,
                                         const size_t *lens, size_t n,
                                         uint8_t *results);

/* Clear every bit and the item count. O(m). Not thread-safe with adds. */
BK_API void bk_blocked_clear(bk_blocked *f);

/* dst |= src; dst's item count becomes the cardinality estimate of the
 * union. Returns BK_OK, BK_EINVAL or BK_EINCOMPAT (size, k, seed or
 * layout differ).
 * O(m). Not thread-safe with adds to dst. */
BK_API int bk_blocked_union(bk_blocked *dst, const bk_blocked *src);

/* dst &= src: dst answers "present" for every key added to both (and for
 * more others than a filter built from the common keys would). Item count
 * becomes the cardinality estimate. Returns BK_OK, BK_EINVAL or
 * BK_EINCOMPAT. O(m). Not thread-safe with adds to dst. */
BK_API int bk_blocked_intersect(bk_blocked *dst, const bk_blocked *src);

/* Create a copy (same parameters and bits). Returns BK_OK, BK_EINVAL or
 * BK_ENOMEM. Not thread-safe with adds to src. */
BK_API int bk_blocked_clone(bk_blocked **out, const bk_blocked *src);

typedef struct bk_blocked_stats {
    uint64_t bits;            /* m = 512 * blocks */
    uint64_t blocks;          /* b */
    uint32_t hashes;          /* k, bits per key */
    uint32_t fullest_block_bits; /* bits set in the fullest block */
    uint64_t seed;
    uint64_t capacity;        /* n it was sized for; 0 if created from (m, k) */
    double target_fpr;        /* p it was sized for; 0 if created from (m, k) */
    uint64_t items;           /* adds that returned 1 (certainly new keys) */
    uint64_t bits_set;        /* t, by population count */
    double fill;              /* t / m */
    double estimated_items;   /* sum over blocks of -(512/k) ln(1 - t_j/512);
                                 +inf when a block is full (split layout:
                                 per block the mean over its 8 words of
                                 ln(1 - t_w/64) / ln(63/64)) */
    double fpr_now;           /* mean over blocks of (t_j / 512)^k: the exact
                                 rate of an absent key now (split layout:
                                 of the product of its words' t_w / 64) */
    double fpr_at_capacity;   /* bk_blocked_fpr(capacity, m, k), or
                                 bk_blocked_split_fpr; 0 if unknown */
    size_t bytes;             /* memory held by the filter, struct included */
} bk_blocked_stats;

/* Fill *out. O(m) (counts bits per block). Thread-safe; with concurrent
 * adds the counts are a snapshot taken while they run. Returns BK_OK or
 * BK_EINVAL. */
BK_API int bk_blocked_get_stats(const bk_blocked *f, bk_blocked_stats *out);

/* Cheap accessors. Thread-safe. */
BK_API uint64_t bk_blocked_bits(const bk_blocked *f);
BK_API uint64_t bk_blocked_blocks(const bk_blocked *f);
BK_API uint32_t bk_blocked_hashes(const bk_blocked *f);
BK_API uint64_t bk_blocked_seed(const bk_blocked *f);
BK_API uint64_t bk_blocked_items(const bk_blocked *f);

/* Estimated number of distinct keys added: the sum over blocks of
 * -(512 / k) ln(1 - t_j / 512), t_j the bits set in block j (Swamidass &
 * Baldi per block, which accounts for the uneven load; the split layout
 * averages the estimates of a block's eight words instead). +inf when a
 * block is full. O(m). Thread-safe. */
BK_API double bk_blocked_estimate_items(const bk_blocked *f);

/* SIMD levels of the blocked filter's code paths (the counting filter's
 * lookups follow the same process-wide level: AVX-512 when it is set and
 * the CPU also has AVX512CD, else portable C). */
enum bk_simd_level {
    BK_SIMD_SCALAR = 0, /* portable C: the reference */
    BK_SIMD_AVX2 = 1,   /* x86-64 with AVX2 */
    BK_SIMD_AVX512 = 2  /* x86-64 with AVX-512F */
};

/* The best level this CPU (and OS) supports. Thread-safe. */
BK_API int bk_blocked_simd_best(void);

/* The level in use: the best one unless set. Thread-safe. */
BK_API int bk_blocked_simd_level(void);

/* "scalar", "avx2", "avx512" or "unknown". Thread-safe. */
BK_API const char *bk_blocked_simd_name(int level);

/* Force a level for the whole process (tests and benchmarks compare the
 * paths; bk_blocked_set_simd_level(bk_blocked_simd_best()) restores the
 * default). Every level sets and tests exactly the same bits, so this
 * changes speed, never answers. Returns the previous level (>= 0),
 * BK_EINVAL (not a BK_SIMD_* value) or BK_ENOTSUP (the CPU lacks it).
 * Thread-safe: calls in flight finish on either path. */
BK_API int bk_blocked_set_simd_level(int level);

/* Write modes (blocked, counting, scalable and growable filters, the
 * growable filter's in its own terms at bk_growable_set_single_writer;
 * bk_filter_set_single_writer, bk_filter_config.single_writer,
 * bk_filter_info.single_writer):
 *   concurrent (the default): adds change memory with atomic operations
 *     (an atomic OR per 64-bit word that misses bits; nothing when the
 *     line already holds the key), so any number of threads may add and
 *     look up at once without locks. Each atomic is a full barrier on x86:
 *     consecutive adds cannot overlap their cache misses.
 *   single-writer: adds use plain loads and stores and write only the
 *     words that change, so consecutive adds overlap like lookups (several
 *     times faster). The caller guarantees that while an add runs no other
 *     thread adds to, or reads, the filter: one thread owns it, or adds
 *     hold an exclusive lock that lookups also respect.
 * Answers and stored bits are the same in both modes. Who uses which:
 *   - the CLI's dedup, and bloomkit add when it adds from one thread (-j 1,
 *     one CPU, or a family without lock-free adds), own their filter (add
 *     holds the file's lock) and nothing else touches it: single-writer;
 *     add on several threads keeps the concurrent mode;
 *   - bloomkit-server runs BF adds under the key's exclusive lock, and
 *     the Redis module runs one command at a time: both set single-writer
 *     on the filters their keys hold (scalable chains and growable
 *     filters too: bk_scalable_set_single_writer,
 *     bk_growable_set_single_writer);
 *   - a library caller that serialises all use of a filter with its own
 *     lock (or uses it from one thread): single-writer. */

/* Set the write mode: 1 single-writer, 0 concurrent (the default). Returns
 * BK_OK or BK_EINVAL. Not thread-safe: call before sharing f. */
BK_API int bk_blocked_set_single_writer(bk_blocked *f, int single_writer);

/* 1 in the single-writer mode, 0 in the concurrent one. Thread-safe. */
BK_API int bk_blocked_single_writer(const bk_blocked *f);

/* This filter as a bk_filter, and back (NULL for another family). */
BK_API bk_filter *bk_blocked_as_filter(bk_blocked *f);
BK_API bk_blocked *bk_filter_as_blocked(bk_filter *f);

/*==========================================================================
 * Counting Bloom filter
 *
 * A Bloom filter whose cells are small counters (4 bits by default, or 8),
 * so that keys can be removed. Cache-blocked: a key's k counters all lie in
 * one 64-byte block (128 counters of 4 bits or 64 of 8 bits), chosen by the
 * key's hash, so an add, remove or lookup touches one cache line. Blocking
 * costs some accuracy (blocks receive unequal numbers of keys), which the
 * sizing functions account for, together with the counter width.
 *
 * A counter that reaches its maximum (15 or 255) sticks there: it is never
 * decremented again, so overflow can never cause a false negative (it only
 * leaves that counter set for ever). At the optimal k a counter is that high
 * with probability about 1e-17 per 4-bit counter (seed 002).
 *
 * HAZARD: remove only keys that were added. Removing a key that was never
 * added but which the filter reports as present (a false positive)
 * decrements counters that belong to other keys, and later lookups of those
 * keys may then answer "absent": the one way a counting filter can produce
 * false negatives. bk_counting_remove refuses keys that are certainly absent
 * (BK_ENOTFOUND), but it cannot tell a false positive from a real key.
 *
 * Concurrency (the default, concurrent write mode; bk_counting_set_single_
 * writer switches to plain stores for a filter one thread owns): adds,
 * removes and lookups are lock-free. Counters are changed
 * by compare-and-swap on 64-bit words, so any number of threads may add,
 * remove and look up at once. Each word is updated atomically, a key's
 * update as a whole is not: a lookup racing with the add or remove of the
 * same key may answer either way. A remove racing with the add of the same
 * key sees it present or absent; one that follows (happens after) the add
 * always finds it.
 *
 * Memory beyond the counters: 336 bytes (a 264-byte handle and 72 bytes of
 * alignment reserve). The counters are whole 64-byte blocks.
 *==========================================================================*/

typedef struct bk_counting bk_counting;

/* Counter widths, in bits, and the default. */
#define BK_COUNTING_DEFAULT_COUNTER_BITS 4
/* Largest number of counters per key (k). */
#define BK_COUNTING_MAX_HASHES 32
/* Bytes per block: one cache line. */
#define BK_COUNTING_BLOCK_BYTES 64
/* Largest counting filter, in blocks (2^40 blocks = 64 TiB). */
#define BK_COUNTING_MAX_BLOCKS (UINT64_C(1) << 40)

/* Smallest filter holding n keys at false-positive rate p with counters of
 * counter_bits (4 or 8; 0 means 4): the number of 64-byte blocks and the
 * number of counters per key k that minimise memory, from the blocked
 * false-positive formula of bk_counting_fpr. Either output may be NULL.
 * Returns BK_OK, BK_ECAPACITY (n = 0), BK_EFPR, BK_EPARAM (counter_bits) or
 * BK_ESIZE (more than BK_COUNTING_MAX_BLOCKS). Costs about a millisecond
 * (a search over k and the block count). Thread-safe. */
BK_API int bk_counting_optimal(uint64_t n, double p, uint32_t counter_bits,
                               uint64_t *blocks, uint32_t *k);

/* Expected false-positive rate of n keys in `blocks` blocks of counters of
 * counter_bits bits, k counters per key:
 *     sum over i of Poisson(i; n / blocks) * (1 - (1 - k/C)^i)^k,
 * C = 512 / counter_bits counters per block (Putze, Sanders & Singler 2007).
 * Returns NaN for invalid arguments. Thread-safe. */
BK_API double bk_counting_fpr(uint64_t n, uint64_t blocks,
                              uint32_t counter_bits, uint32_t k);

/* Create a filter for `capacity` keys at false-positive rate `fpr` with
 * counters of counter_bits (4 or 8; 0 means 4), sized by
 * bk_counting_optimal. Returns BK_OK and sets *out, an error of
 * bk_counting_optimal, BK_EINVAL (out is NULL) or BK_ENOMEM. */
BK_API int bk_counting_create(bk_counting **out, uint64_t capacity,
                              double fpr, uint32_t counter_bits,
                              uint64_t seed);

/* Create a filter of exactly `blocks` blocks, counter_bits-bit counters and
 * k counters per key. Returns BK_OK, BK_EINVAL, BK_ESIZE (blocks = 0 or
 * above BK_COUNTING_MAX_BLOCKS), BK_EPARAM (counter_bits not 4 or 8),
 * BK_EHASHES (k = 0 or above BK_COUNTING_MAX_HASHES) or BK_ENOMEM. */
BK_API int bk_counting_create_params(bk_counting **out, uint64_t blocks,
                                     uint32_t counter_bits, uint32_t k,
                                     uint64_t seed);

/* Release a filter. Accepts NULL. Not thread-safe with any other use. */
BK_API void bk_counting_free(bk_counting *f);

/* Set the write mode (see "Write modes" under the blocked filter): 1
 * single-writer (plain loads and stores instead of a compare-and-swap per
 * touched word; one writer and no concurrent use), 0 concurrent (the
 * default). Returns BK_OK or BK_EINVAL. Not thread-safe: call before
 * sharing f. */
BK_API int bk_counting_set_single_writer(bk_counting *f, int single_writer);

/* 1 in the single-writer mode, 0 in the concurrent one. Thread-safe. */
BK_API int bk_counting_single_writer(const bk_counting *f);

/* Create a copy. Returns BK_OK, BK_EINVAL or BK_ENOMEM. O(size). A copy
 * taken during concurrent writes holds each word as it was at some moment. */
BK_API int bk_counting_clone(bk_counting **out, const bk_counting *src);

/* Zero every counter and the item count. O(size). Not thread-safe with
 * adds or removes. */
BK_API void bk_counting_clear(bk_counting *f);

/* Add a key: increment its k counters (saturated ones stay at the maximum).
 * Returns 1 when one of them was zero (the key was certainly new), else 0.
 * One cache line. Thread-safe (lock-free). */
BK_API int bk_counting_add(bk_counting *f, const void *key, size_t len);

/* Remove a key: decrement its k counters (saturated ones stay). Returns
 * BK_OK, or BK_ENOTFOUND when one of its counters is zero: the key is
 * certainly absent and nothing is changed. See the HAZARD above: never
 * remove a key that was not added. One cache line. Thread-safe. */
BK_API int bk_counting_remove(bk_counting *f, const void *key, size_t len);

/* 1 if the key is probably present, 0 if certainly absent. Thread-safe. */
BK_API int bk_counting_contains(const bk_counting *f, const void *key,
                                size_t len);

/* Estimated number of times the key is present: the smallest of its
 * counters. Never below the true count unless removes of false positives
 * happened; above it when other keys share all its counters; the counter
 * maximum (15 or 255) means "at least that many". Thread-safe. */
BK_API uint32_t bk_counting_count(const bk_counting *f, const void *key,
                                  size_t len);

/* Add the key only when it is not probably present: 1 when added, 0 when
 * found (nothing written). Thread-safe; two threads adding the same new key
 * at once may both add it. */
BK_API int bk_counting_add_if_absent(bk_counting *f, const void *key,
                                     size_t len);

/* The same operations on a key hashed beforehand with
 * bk_hash_key(key, len, bk_counting_seed(f)). */
BK_API int bk_counting_add_hash(bk_counting *f, bk_hash h);
BK_API int bk_counting_remove_hash(bk_counting *f, bk_hash h);
BK_API int bk_counting_contains_hash(const bk_counting *f, bk_hash h);
BK_API uint32_t bk_counting_count_hash(const bk_counting *f, bk_hash h);
BK_API int bk_counting_add_if_absent_hash(bk_counting *f, bk_hash h);

/* Batch add of n keys (keys[i] of lens[i] bytes); results[i], when results
 * is not NULL, is what bk_counting_add returned. Hashes ahead and
 * prefetches. Returns the number of certainly new keys or BK_EINVAL.
 * Thread-safe. */
BK_API int64_t bk_counting_add_batch(bk_counting *f, const void *const *keys,
                                     const size_t *lens, size_t n,
                                     uint8_t *results);

/* Batch lookup: results[i] = bk_counting_contains(keys[i]) (results may be
 * NULL). Returns the number found or BK_EINVAL. Thread-safe. */
BK_API int64_t bk_counting_contains_batch(const bk_counting *f,
                                          const void *const *keys,
                                          const size_t *lens, size_t n,
                                          uint8_t *results);

typedef struct bk_counting_stats {
    uint64_t blocks;            /* 64-byte blocks */
    uint64_t counters;          /* blocks * counters per block */
    uint32_t counter_bits;      /* 4 or 8 */
    uint32_t hashes;            /* k: counters per key */
    uint64_t seed;
    uint64_t capacity;          /* n it was sized for; 0 if from parameters */
    double target_fpr;          /* p it was sized for; 0 if from parameters */
    uint64_t items;             /* adds that returned 1, minus removes */
    uint64_t counters_nonzero;
    uint64_t counters_saturated; /* stuck at the maximum for ever */
    double fill;                /* counters_nonzero / counters */
    double fpr_now;             /* mean over blocks of P(k nonzero counters) */
    double fpr_at_capacity;     /* bk_counting_fpr(capacity, ...); 0 if unknown */
    size_t bytes;               /* memory held, struct included */
    double bytes_per_item;      /* counter bytes / items; 0 when empty */
    double bytes_per_capacity_item; /* counter bytes / capacity; 0 if unknown */
} bk_counting_stats;

/* Fill *out. O(size). Returns BK_OK or BK_EINVAL. Thread-safe (a snapshot
 * when writes run concurrently). */
BK_API int bk_counting_get_stats(const bk_counting *f, bk_counting_stats *out);

/* Cheap accessors. Thread-safe. */
BK_API uint64_t bk_counting_blocks(const bk_counting *f);
BK_API uint32_t bk_counting_counter_bits(const bk_counting *f);
BK_API uint32_t bk_counting_hashes(const bk_counting *f);
BK_API uint64_t bk_counting_seed(const bk_counting *f);
BK_API uint64_t bk_counting_items(const bk_counting *f);
/* Memory held by the filter, struct included. */
BK_API size_t bk_counting_bytes(const bk_counting *f);

/* This filter as a bk_filter, and back (NULL for another family). */
BK_API bk_filter *bk_counting_as_filter(bk_counting *f);
BK_API bk_counting *bk_filter_as_counting(bk_filter *f);

/*==========================================================================
 * Deletable Bloom filter (Rothenberg, Macapuna, Verdi & Magalhaes, 2010)
 *
 * A classic Bloom filter of m bits whose bit array is split into r regions
 * of equal size, with one collision flag per region. An add that finds one
 * of its bits already set marks that bit's region as collided. A bit in a
 * region without collisions was set by exactly one key, so a remove may
 * clear it: a key can be removed when at least one of its bits lies in a
 * collision-free region, and removing it clears exactly those bits. Bits in
 * collided regions stay set for ever (until clear). The false-positive rate
 * is the classic filter's (bk_bloom_fpr); the flags cost r extra bits.
 * Removing a key never added (a false positive) can clear another key's
 * only bit: the same hazard as the counting filter. A key added twice is
 * never removable (its second add marks all its regions).
 *
 * Concurrency: adds and lookups are lock-free and may run concurrently with
 * each other (atomic OR on 64-bit words). A remove clears bits and needs
 * external serialisation against adds and other removes; lookups may run
 * concurrently with it.
 *
 * Memory beyond the bits: 208 bytes (a 136-byte handle and 72 bytes of
 * alignment reserve). The bits are ceil(m / 64) words plus ceil(r / 64)
 * words of collision flags.
 *==========================================================================*/

typedef struct bk_deletable bk_deletable;

/* Region size, in bits, of filters created with regions = 0: r = ceil(m/4),
 * which costs m/4 extra bits and leaves ~85-90% of keys removable at
 * capacity at 1% (8-bit regions: ~64%; see lib/deletable.c). */
#define BK_DELETABLE_DEFAULT_REGION_BITS 4

/* Create a filter for `capacity` keys at false-positive rate `fpr`: m and k
 * from bk_bloom_optimal, plus `regions` collision flags (0: one per
 * BK_DELETABLE_DEFAULT_REGION_BITS bits). Returns BK_OK, an error of
 * bk_bloom_optimal, BK_EINVAL, BK_EPARAM (regions above m) or BK_ENOMEM. */
BK_API int bk_deletable_create(bk_deletable **out, uint64_t capacity,
                               double fpr, uint64_t regions, uint64_t seed);

/* Create a filter of exactly m_bits bits, k hashes and `regions` regions
 * (0: default). Regions hold ceil(m / regions) bits each, so the effective
 * number can be slightly lower (see bk_deletable_regions). Returns BK_OK,
 * BK_EINVAL, BK_ESIZE, BK_EHASHES (as bk_bloom_create_mk), BK_EPARAM or
 * BK_ENOMEM. */
BK_API int bk_deletable_create_params(bk_deletable **out, uint64_t m_bits,
                                      uint32_t k, uint64_t regions,
                                      uint64_t seed);

/* Release a filter. Accepts NULL. */
BK_API void bk_deletable_free(bk_deletable *f);

/* Create a copy. Returns BK_OK, BK_EINVAL or BK_ENOMEM. Not thread-safe
 * with writes to src. */
BK_API int bk_deletable_clone(bk_deletable **out, const bk_deletable *src);

/* Clear every bit, every collision flag and the item count. O(m). Not
 * thread-safe with writes. */
BK_API void bk_deletable_clear(bk_deletable *f);

/* Add a key. Returns 1 when one of its bits was clear (certainly new), 0
 * otherwise. O(k). Thread-safe with adds and lookups. */
BK_API int bk_deletable_add(bk_deletable *f, const void *key, size_t len);

/* Remove a key: clear its bits that lie in collision-free regions.
 * Returns BK_OK (removed: a lookup now answers "absent"), BK_ENOTFOUND (one
 * of its bits is clear: certainly absent) or BK_EUNDELETABLE (every one of
 * its bits is in a collided region: it cannot be removed and stays present).
 * Nothing changes unless BK_OK. Never remove a key that was not added.
 * O(k). Needs external serialisation against adds and removes. */
BK_API int bk_deletable_remove(bk_deletable *f, const void *key, size_t len);

/* 1 if the key is probably present, 0 if certainly absent. Thread-safe. */
BK_API int bk_deletable_contains(const bk_deletable *f, const void *key,
                                 size_t len);

/* 1 when bk_deletable_remove would remove the key now (it is present and
 * one of its bits is in a collision-free region), else 0. Thread-safe. */
BK_API int bk_deletable_removable(const bk_deletable *f, const void *key,
                                  size_t len);

/* The same on keys hashed with bk_hash_key(key, len, bk_deletable_seed(f)). */
BK_API int bk_deletable_add_hash(bk_deletable *f, bk_hash h);
BK_API int bk_deletable_remove_hash(bk_deletable *f, bk_hash h);
BK_API int bk_deletable_contains_hash(const bk_deletable *f, bk_hash h);
BK_API int bk_deletable_removable_hash(const bk_deletable *f, bk_hash h);

/* Batch add and lookup, as bk_bloom_add_batch / bk_bloom_contains_batch. */
BK_API int64_t bk_deletable_add_batch(bk_deletable *f,
                                      const void *const *keys,
                                      const size_t *lens, size_t n,
                                      uint8_t *results);
BK_API int64_t bk_deletable_contains_batch(const bk_deletable *f,
                                           const void *const *keys,
                                           const size_t *lens, size_t n,
                                           uint8_t *results);

typedef struct bk_deletable_stats {
    uint64_t bits;              /* m */
    uint32_t hashes;            /* k */
    uint64_t regions;           /* r, effective */
    uint64_t region_bits;       /* bits per region (the last may be shorter) */
    uint64_t seed;
    uint64_t capacity;          /* 0 if created from parameters */
    double target_fpr;          /* 0 if created from parameters */
    uint64_t items;             /* adds that returned 1, minus removes */
    uint64_t bits_set;
    double fill;                /* bits_set / m */
    uint64_t collided_regions;
    uint64_t occupied_regions;  /* regions holding at least one set bit */
    /* Estimated fraction of stored keys that remain removable: 1 - c^k,
     * c = the share of set bits lying in collided regions. */
    double removable_fraction;
    double fpr_now;             /* fill^k */
    double fpr_at_capacity;     /* bk_bloom_fpr(capacity, m, k); 0 if unknown */
    size_t bytes;               /* memory held, struct and flags included */
} bk_deletable_stats;

/* Fill *out. O(m). Returns BK_OK or BK_EINVAL. Thread-safe (snapshot). */
BK_API int bk_deletable_get_stats(const bk_deletable *f,
                                  bk_deletable_stats *out);

/* Cheap accessors. Thread-safe. */
BK_API uint64_t bk_deletable_bits(const bk_deletable *f);
BK_API uint32_t bk_deletable_hashes(const bk_deletable *f);
BK_API uint64_t bk_deletable_regions(const bk_deletable *f);
BK_API uint64_t bk_deletable_seed(const bk_deletable *f);
BK_API uint64_t bk_deletable_items(const bk_deletable *f);

/* This filter as a bk_filter, and back (NULL for another family). */
BK_API bk_filter *bk_deletable_as_filter(bk_deletable *f);
BK_API bk_deletable *bk_filter_as_deletable(bk_filter *f);

/*==========================================================================
 * Cuckoo filter (Fan, Andersen, Kaminsky & Mitzenmacher, 2014)
 *
 * A power-of-two number of buckets of b slots (2, 4 or 8) holding f-bit
 * fingerprints (8, 12 or 16 bits, or any width from 4 to 32 when given
 * explicitly), bit-packed: a 12-bit fingerprint costs 12 bits. A key lives
 * in bucket i1 = hash & mask or i2 = i1 XOR hash(fingerprint) (partial-key
 * cuckoo hashing), so both buckets are found from the fingerprint alone and
 * stored fingerprints can be moved without the keys. False-positive rate
 * about 2 b load / 2^f. Supports removal and counting of duplicates (up to
 * 2b copies of one key). Buckets of 2 slots of 8 bits (RedisBloom's shape)
 * are stored in 15 bits as an unordered pair (fingerprints 1..254).
 *
 * Stages: a filter may hold several tables ("stages", bk_cuckoo_add_stage;
 * RedisBloom's CF grows this way). Adds go to the newest stage; lookups and
 * counts cover every stage; a remove takes one copy from the newest stage
 * holding the key. All stages share the bucket size, fingerprint width,
 * seed and max kicks.
 *
 * Memory beyond the bits (bk_cuckoo_bytes, bytes asked of the allocator):
 * a 104-byte handle, 8 bytes of padding after the newest table (both:
 * BK_CUCKOO_OVERHEAD_BYTES), and 8 bytes per stage after the first (its
 * bucket count and items; BK_CUCKOO_STAGE_BYTES); tables are packed back
 * to back (bits rounded up to whole bytes per stage). Beyond the file's
 * payload (which holds the padding) that is 104 + 8 per later stage. So one
 * stage of 512 buckets of two 8-bit fingerprints (RedisBloom's
 * CF.RESERVE k 1000) is 104 + 960 + 8 = 1072 bytes, and 32 stages of 32
 * such buckets 104 + 32 x 60 + 8 + 31 x 8 = 2280. A relocation keeps its
 * undo log on the stack (up to 512 kicks; more are allocated per add).
 *
 * An add into two full buckets relocates fingerprints up to max_kicks times
 * (default 500). When that fails the relocations are undone and the add
 * returns BK_EFULL: every key stored before is still stored, the new one is
 * not. The table reaches about 95% load with b = 4 before that happens.
 *
 * HAZARD: as with any filter that deletes, remove only keys that were added;
 * removing a false positive removes another key's fingerprint.
 *
 * Concurrency: lookups (contains, count, contains_batch, get_stats) write
 * nothing and never block each other: any number may run at once. Writers
 * (add, add_unique, remove, add_batch, clear) need external serialisation,
 * against each other and against readers: a reader-writer lock, where
 * readers share, is the intended use.
 *==========================================================================*/

typedef struct bk_cuckoo bk_cuckoo;

#define BK_CUCKOO_DEFAULT_BUCKET_SIZE 4
#define BK_CUCKOO_DEFAULT_MAX_KICKS 500
/* Largest max_kicks accepted. */
#define BK_CUCKOO_MAX_KICKS 65536
/* Largest table, in buckets (2^40). */
#define BK_CUCKOO_MAX_BUCKETS (UINT64_C(1) << 40)
/* Most stages a filter may have. */
#define BK_CUCKOO_MAX_STAGES 128
/* Bytes of a filter beyond its packed tables: the handle and the padding,
 * plus BK_CUCKOO_STAGE_BYTES per stage after the first (64-bit builds; the
 * other figures of "memory beyond the bits" in this header are too). */
#define BK_CUCKOO_OVERHEAD_BYTES 112
#define BK_CUCKOO_STAGE_BYTES 8

/* Options of bk_cuckoo_create; a zero field (or a NULL pointer to the whole
 * struct) means the default. */
typedef struct bk_cuckoo_options {
    uint32_t bucket_size;      /* 2, 4 or 8; default 4 */
    uint32_t fingerprint_bits; /* 4..32; default: from the target fpr */
    uint32_t max_kicks;        /* 1..BK_CUCKOO_MAX_KICKS; default 500 */
} bk_cuckoo_options;

/* Sizing: the number of buckets (a power of two) holding n keys at the
 * largest load that is reliably reached with that bucket size (84% for
 * b = 2, 95% for b = 4, 97% for b = 8), and, when fingerprint_bits is 0,
 * the smallest of 8, 12, 16 (or, if 16 is not enough, 17..32) whose
 * bk_cuckoo_fpr at that load is at most p. Either output may be NULL.
 * Returns BK_OK, BK_ECAPACITY, BK_EFPR (p invalid, or beyond 32-bit
 * fingerprints), BK_EPARAM (bucket_size or fingerprint_bits) or BK_ESIZE.
 * Thread-safe. */
BK_API int bk_cuckoo_optimal(uint64_t n, double p, uint32_t bucket_size,
                             uint32_t fingerprint_bits, uint64_t *buckets,
                             uint32_t *fingerprint_bits_out);

/* Expected false-positive rate of n keys in `buckets` buckets of
 * bucket_size slots with f-bit fingerprints:
 *     1 - (1 - 1 / (2^f - 1))^(2 b load),   load = n / (buckets b),
 * the chance that one of the fingerprints in a key's two buckets matches
 * (Fan et al. 2014, section 5.1). NaN for invalid arguments. Thread-safe. */
BK_API double bk_cuckoo_fpr(uint64_t n, uint64_t buckets,
                            uint32_t bucket_size, uint32_t fingerprint_bits);

/* Create a filter for `capacity` keys at false-positive rate `fpr`, sized
 * by bk_cuckoo_optimal; opts may be NULL. Returns BK_OK, an error of
 * bk_cuckoo_optimal, BK_EINVAL, BK_EPARAM (max_kicks) or BK_ENOMEM. */
BK_API int bk_cuckoo_create(bk_cuckoo **out, uint64_t capacity, double fpr,
                            const bk_cuckoo_options *opts, uint64_t seed);

/* Create a filter of exactly `buckets` buckets (a power of two), bucket_size
 * slots, fingerprint_bits-bit fingerprints and max_kicks relocations (0:
 * default). Returns BK_OK, BK_EINVAL, BK_ESIZE (buckets 0, not a power of
 * two or above BK_CUCKOO_MAX_BUCKETS), BK_EPARAM (bucket_size,
 * fingerprint_bits or max_kicks out of range) or BK_ENOMEM. */
BK_API int bk_cuckoo_create_params(bk_cuckoo **out, uint64_t buckets,
                                   uint32_t bucket_size,
                                   uint32_t fingerprint_bits,
                                   uint32_t max_kicks, uint64_t seed);

/* Release a filter. Accepts NULL. */
BK_API void bk_cuckoo_free(bk_cuckoo *f);

/* Add an empty stage of `buckets` buckets (a power of two): later adds go
 * there, and its evictions start from the generator state of a new filter
 * with the same seed. The tables are moved into one new allocation (the
 * old one is freed after the copy, so growth briefly holds both). Returns
 * BK_OK, BK_EINVAL, BK_ESIZE (buckets invalid, or BK_CUCKOO_MAX_STAGES
 * reached) or BK_ENOMEM (nothing changed). O(size). A writer. */
BK_API int bk_cuckoo_add_stage(bk_cuckoo *f, uint64_t buckets);

/* Append copies of all of src's stages after dst's, oldest first (src's
 * newest becomes dst's newest, with src's generator state): what turns a
 * chain of separate filters into one. Both must share bucket size,
 * fingerprint bits, pairing, seed and max kicks. Returns BK_OK, BK_EINVAL
 * (they differ, or dst == src), BK_ESIZE (too many stages) or BK_ENOMEM
 * (nothing changed). O(size). A writer on dst, a reader on src. */
BK_API int bk_cuckoo_append(bk_cuckoo *dst, const bk_cuckoo *src);

/* Create a copy. Returns BK_OK, BK_EINVAL or BK_ENOMEM. A reader. */
BK_API int bk_cuckoo_clone(bk_cuckoo **out, const bk_cuckoo *src);

/* Empty the table. O(size). A writer. */
BK_API void bk_cuckoo_clear(bk_cuckoo *f);

/* Add a key to the newest stage (a duplicate adds one more copy). Returns BK_OK, BK_EFULL (no
 * room within max_kicks relocations: nothing changed) or BK_ECOPIES (the
 * key's two buckets already hold 2b copies of its fingerprint, or b when
 * both candidate buckets are the same one: nothing changed), or BK_ENOMEM
 * (max_kicks above 512 and no memory for the relocation log: nothing
 * changed). O(1) expected, up to max_kicks relocations near full load. A
 * writer. */
BK_API int bk_cuckoo_add(bk_cuckoo *f, const void *key, size_t len);

/* Add the key (to the newest stage) only if no stage probably holds it. Returns 1 when added, 0
 * when found (nothing written), or BK_EFULL. A writer. */
BK_API int bk_cuckoo_add_unique(bk_cuckoo *f, const void *key, size_t len);

/* Remove one copy of the key's fingerprint from the newest stage that
 * holds it. Returns BK_OK or BK_ENOTFOUND (certainly absent; nothing
 * changed). Two buckets read per stage. A writer. */
BK_API int bk_cuckoo_remove(bk_cuckoo *f, const void *key, size_t len);

/* 1 if the key is probably present, 0 if certainly absent. Two buckets
 * read per stage (newest first, stopping at a hit). A reader. */
BK_API int bk_cuckoo_contains(const bk_cuckoo *f, const void *key,
                              size_t len);

/* Copies of the key's fingerprint in its two buckets of every stage: the number of times
 * it was added minus removed, plus other keys sharing the fingerprint and
 * a bucket. A reader. */
BK_API uint32_t bk_cuckoo_count(const bk_cuckoo *f, const void *key,
                                size_t len);

/* The same on keys hashed with bk_hash_key(key, len, bk_cuckoo_seed(f)). */
BK_API int bk_cuckoo_add_hash(bk_cuckoo *f, bk_hash h);
BK_API int bk_cuckoo_add_unique_hash(bk_cuckoo *f, bk_hash h);
BK_API int bk_cuckoo_remove_hash(bk_cuckoo *f, bk_hash h);
BK_API int bk_cuckoo_contains_hash(const bk_cuckoo *f, bk_hash h);
BK_API uint32_t bk_cuckoo_count_hash(const bk_cuckoo *f, bk_hash h);

/* A hint: start loading the two buckets of the newest stage that an add
 * of the key hashed to h reads, so that a caller adding keys one by one
 * (each answered on its own) can overlap their cache misses by hinting a
 * few keys ahead. Changes nothing. A reader. */
BK_API void bk_cuckoo_prefetch_hash(const bk_cuckoo *f, bk_hash h);

/* Batch add: results[i] (when results is not NULL) is what bk_cuckoo_add
 * returned for key i; keys after a failure are still tried. Returns the
 * number of keys added or BK_EINVAL. A writer. */
BK_API int64_t bk_cuckoo_add_batch(bk_cuckoo *f, const void *const *keys,
                                   const size_t *lens, size_t n,
                                   int *results);

/* Batch lookup: results[i] = bk_cuckoo_contains(keys[i]) (results may be
 * NULL). Returns the number found or BK_EINVAL. A reader. */
BK_API int64_t bk_cuckoo_contains_batch(const bk_cuckoo *f,
                                        const void *const *keys,
                                        const size_t *lens, size_t n,
                                        uint8_t *results);

typedef struct bk_cuckoo_stats {
    uint64_t buckets;
    uint32_t bucket_size;       /* b */
    uint32_t fingerprint_bits;  /* f */
    uint32_t max_kicks;
    uint64_t seed;
    uint64_t capacity;          /* 0 if created from parameters */
    double target_fpr;          /* 0 if created from parameters */
    uint64_t items;             /* fingerprints stored */
    uint64_t slots;             /* buckets * b */
    double load_factor;         /* items / slots */
    double fpr_now;             /* bk_cuckoo_fpr(items, ...) */
    uint64_t relocations;       /* fingerprints moved by adds, in total */
    size_t bytes;               /* memory held, struct included */
    double bits_per_item;       /* table bits / items; 0 when empty */
    uint32_t stages;            /* tables (bk_cuckoo_add_stage) */
} bk_cuckoo_stats;

/* Fill *out. O(1). Returns BK_OK or BK_EINVAL. A reader. */
BK_API int bk_cuckoo_get_stats(const bk_cuckoo *f, bk_cuckoo_stats *out);

/* Cheap accessors (buckets: all stages'). Readers. */
BK_API uint64_t bk_cuckoo_buckets(const bk_cuckoo *f);
BK_API uint32_t bk_cuckoo_stages(const bk_cuckoo *f);
/* Buckets and items of stage i (0 = oldest); 0 when i is out of range. */
BK_API uint64_t bk_cuckoo_stage_buckets(const bk_cuckoo *f, uint32_t stage);
BK_API uint64_t bk_cuckoo_stage_items(const bk_cuckoo *f, uint32_t stage);
BK_API uint32_t bk_cuckoo_bucket_size(const bk_cuckoo *f);
BK_API uint32_t bk_cuckoo_fingerprint_bits(const bk_cuckoo *f);
BK_API uint32_t bk_cuckoo_max_kicks(const bk_cuckoo *f);
BK_API uint64_t bk_cuckoo_seed(const bk_cuckoo *f);
BK_API uint64_t bk_cuckoo_items(const bk_cuckoo *f);
/* Memory held by the filter, struct included. */
BK_API size_t bk_cuckoo_bytes(const bk_cuckoo *f);

/* This filter as a bk_filter, and back (NULL for another family). */
BK_API bk_filter *bk_cuckoo_as_filter(bk_cuckoo *f);
BK_API bk_cuckoo *bk_filter_as_cuckoo(bk_filter *f);

/*==========================================================================
 * Auto-clear: a filter that empties itself at a fill ratio (seed 003)
 *
 * A classic, blocked (default layout) or counting filter wrapped so that it
 * never saturates: once `ratio` of its units (bits; nonzero counters for
 * the counting filter) are set, the next add first empties it (mode
 * BK_AUTOCLEAR_CLEAR, the seed's autoClearRate), or keeps it as the
 * previous generation and starts an empty one (BK_AUTOCLEAR_ROTATE), so a
 * clear never makes recent keys vanish at once: lookups test the current
 * and the previous generation. Units are counted as adds set them (no pass
 * over the filter), so an add costs about what the plain filter's
 * single-writer add does.
 *
 * Rates: a lookup in clear mode meets a filter at most `ratio` full (plus
 * one key's units), so a ratio at or under the fill the filter has at its
 * capacity (bk_autoclear_stats.fill_at_capacity: about 0.5 for the classic
 * filter at its optimal k, 0.40-0.47 for the blocked and counting filters,
 * whose sizing picks a smaller k) keeps the rate at or under the rate at
 * capacity for ever. Rotate mode tests two such generations: up to
 * 1 - (1 - r)^2 for a generation rate r (about 2r). A key added just
 * before a clear is forgotten at the clear (clear mode) or at the next
 * rotation (rotate mode); nothing else is ever forgotten, so there are no
 * false negatives between clears.
 *
 * Adds and removes need the filter to themselves (the unit count is one
 * plain counter); lookups may run together with each other. The generic
 * handle works (family BK_FAMILY_AUTOCLEAR, "autoclear"), and so do the
 * file format (docs/FORMAT.md family 22), clone and clear; merges do not.
 *==========================================================================*/

typedef struct bk_autoclear bk_autoclear;

enum { BK_AUTOCLEAR_CLEAR = 0, BK_AUTOCLEAR_ROTATE = 1 };

/* Wrap `inner` (a bloom, blocked or counting filter; the blocked filter in
 * its default layout, not mapped read-only) in an auto-clear filter that
 * clears at `ratio` in (0, 1] in `mode`. On success the wrapper owns inner
 * (bk_autoclear_free releases both) and its units are counted once; rotate
 * mode allocates a second, empty generation of the same shape. Returns
 * BK_OK, BK_EINVAL (NULL), BK_EPARAM (ratio outside (0, 1], unknown mode,
 * the split layout), BK_ENOTSUP (another family), BK_EREADONLY or
 * BK_ENOMEM; on failure inner is left to the caller. */
BK_API int bk_autoclear_wrap(bk_autoclear **out, bk_filter *inner, double ratio, int mode);
BK_API void bk_autoclear_free(bk_autoclear *f);

/* 1 when the key was new to the current generation, 0 when it was there
 * already, or BK_EINVAL. Clears (or rotates) first when the fill ratio was
 * reached. Not thread-safe. */
BK_API int bk_autoclear_add(bk_autoclear *f, const void *key, size_t len);
/* 1 when the key may be in the current or (rotate) previous generation,
 * 0 when it is certainly in neither. Thread-safe with other lookups. */
BK_API int bk_autoclear_contains(const bk_autoclear *f, const void *key, size_t len);
/* Counting filters only: remove one copy of the key from the newest
 * generation that holds it. BK_OK, BK_ENOTFOUND, BK_ENOTSUP or BK_EINVAL.
 * HAZARD as for bk_counting_remove: remove only keys that were added. */
BK_API int bk_autoclear_remove(bk_autoclear *f, const void *key, size_t len);

typedef struct bk_autoclear_stats {
    double ratio;          /* the fill ratio that clears */
    int mode;              /* BK_AUTOCLEAR_CLEAR or BK_AUTOCLEAR_ROTATE */
    bk_family inner;       /* BK_FAMILY_BLOOM, _BLOCKED or _COUNTING */
    uint64_t clears;       /* clears (rotations) so far */
    uint64_t units;        /* bits (counters) per generation */
    uint64_t units_set;    /* set (nonzero) in the current generation */
    uint64_t clear_at;     /* units_set that makes the next add clear */
    double fill;           /* units_set / units */
    uint64_t items;        /* the current generation's item count */
    uint64_t previous_items; /* the previous generation's (rotate), else 0 */
    uint64_t capacity;     /* of one generation */
    double target_fpr;     /* of one generation */
    double fill_at_capacity; /* the expected fill of a generation holding
                              `capacity` keys: a ratio at or under it keeps
                              the rate at or under the rate at capacity */
    size_t bytes;          /* memory held, both generations included */
} bk_autoclear_stats;

/* Returns BK_OK or BK_EINVAL. O(1). */
BK_API int bk_autoclear_get_stats(const bk_autoclear *f, bk_autoclear_stats *out);

/* The current generation, for its family's own calls that only read
 * (stats, info). */
BK_API const bk_filter *bk_autoclear_current(const bk_autoclear *f);

BK_API bk_filter *bk_autoclear_as_filter(bk_autoclear *f);
BK_API bk_autoclear *bk_filter_as_autoclear(bk_filter *f);

/*==========================================================================
 * Scalable Bloom filter (Almeida, Baquero, Preguica & Hutchison, 2007)
 *
 * A filter that grows: a chain of Bloom filters ("stages"). Stage i is
 * sized for capacity * expansion^i items (RedisBloom's capacities). When
 * the newest stage has received as many new items as it was sized for, the
 * next new item creates a stage. A key is hashed once with the filter's
 * seed for all stages. An add looks the key up in every stage first and
 * writes (and counts) it only when no stage has it, so items counts
 * distinct keys up to false positives: the semantics of RedisBloom's
 * BF.ADD / BF.CARD, whose BF.RESERVE parameters and defaults these are.
 *
 * False positives: a lookup is wrong when any stage is, so the rate is at
 * most the sum of the stage rates. With BK_SCALABLE_BOUNDED stage 0 takes
 * error / 2 and the later stages share the other half geometrically:
 * p_i = (error / 2)(1 - r) r^(i-1), r = BK_SCALABLE_TIGHTENING (0.9, as
 * Almeida et al. recommend), so the compound rate stays under `error` for
 * any number of stages, and each stage costs only ~0.22 bits per key more
 * than the one before. Without it the budget is error for stage 0 and
 * error for the rest (compound < 2 * error). A NONSCALING filter has one
 * stage at `error`. Stages are classic or cache-blocked (one cache line per
 * key), chosen per stage for memory (lib/scalable.c).
 *
 * Memory beyond the bits: 96 bytes for the handle and stage 0's record,
 * then 87 bytes per later stage (its 16-byte record, a pointer and 63 bytes
 * of alignment reserve) and the stage directory: 16 + 8 c bytes for each
 * of c = 4, 8, 16, ... up to the first c >= the stages (the smaller ones
 * are kept: lock-free readers may hold them), at most about 33 bytes a
 * stage (32.5 at 33 stages). A 100-item filter at 1% is 240 bytes.
 *
 * Limits: at most BK_SCALABLE_MAX_STAGES stages (lower with
 * bk_scalable_set_max_stages) and optionally a cap on total bytes. An add
 * that would need a stage beyond either limit returns BK_ELIMIT and changes
 * nothing; one whose stage cannot be allocated returns BK_ENOMEM and loses
 * nothing; a non-scaling filter refuses new keys once full with BK_EFULL.
 *
 * Concurrency: adds and lookups are lock-free, with each other and with
 * growth. Stages are reached through a directory of pointers published with
 * release/acquire atomics (a full one is replaced by a copy twice its size,
 * the old one kept until free); stages never move or change until clear or
 * free, so
 * a lookup always sees a consistent prefix of stages; two adds that both
 * find the newest stage full race to install the next one and the loser
 * frees its copy. Counts are relaxed atomics: with concurrent adds a stage
 * may receive a few more items than its capacity (one per racing thread),
 * and two threads adding the same new key at once may both get 1 (and both
 * count it). clear, free and the set_* functions need exclusive access.
 *==========================================================================*/

typedef struct bk_scalable bk_scalable;

/* Defaults of an auto-created filter (RedisBloom's BF.ADD on a missing key). */
#define BK_SCALABLE_DEFAULT_CAPACITY 100
#define BK_SCALABLE_DEFAULT_ERROR 0.01
#define BK_SCALABLE_DEFAULT_EXPANSION 2
/* The ratio r of the rates of consecutive stages after stage 1. Files
 * written with RedisBloom's 0.5 (before this schedule) keep theirs. */
#define BK_SCALABLE_TIGHTENING 0.9
/* Largest number of stages. */
#define BK_SCALABLE_MAX_STAGES 128
/* Largest expansion (RedisBloom takes up to 32768). */
#define BK_SCALABLE_MAX_EXPANSION 65535

/* Flags of bk_scalable_create. */
#define BK_SCALABLE_NONSCALING 1u /* one stage; new keys beyond it: BK_EFULL */
#define BK_SCALABLE_BOUNDED 2u    /* stage 0 at error / 2: compound <= error */

/* Create a filter whose first stage holds `capacity` items at rate `error`
 * (see BK_SCALABLE_BOUNDED), growing by `expansion` (>= 1; 1 keeps every
 * stage the same size). flags: 0 or BK_SCALABLE_* bits. The first stage
 * is allocated now. Returns BK_OK and sets *out, BK_EINVAL (out NULL),
 * BK_ECAPACITY (capacity 0), BK_EFPR (error not in (0, 1)), BK_EPARAM
 * (expansion 0 or above BK_SCALABLE_MAX_EXPANSION, unknown flag), BK_ESIZE
 * or BK_ENOMEM. O(first stage). */
BK_API int bk_scalable_create(bk_scalable **out, uint64_t capacity,
                              double error, uint32_t expansion,
                              unsigned flags, uint64_t seed);

/* Choose the ratio r of the schedule (default BK_SCALABLE_TIGHTENING): the
 * rates of stages 1, 2, ... are (error / 2)(1 - r) r^(i-1), so the compound
 * rate stays under `error` for any r in (0, 1); a small r spends the budget
 * early (valkey-bloom's TIGHTENING; RedisBloom's stages halve, r = 0.5), a
 * large one keeps later stages cheap. r is kept to a multiple of 1/65536
 * (bk_scalable_tightening gives it back) and saved with the filter. Call
 * before the second stage exists: BK_EINVAL after (its rate is fixed),
 * BK_EPARAM for r outside (0, 1), BK_ENOTSUP for a filter loaded from a
 * file of the schedule before this one. Not thread-safe. */
BK_API int bk_scalable_set_tightening(bk_scalable *f, double r);
BK_API double bk_scalable_tightening(const bk_scalable *f);

/* The bytes bk_scalable_create would allocate for these parameters (what
 * bk_scalable_bytes then reports), without allocating: for callers that
 * check a memory budget first. Returns BK_OK, BK_EINVAL (bytes NULL) or an
 * error of bk_scalable_create. Thread-safe. */
BK_API int bk_scalable_estimate_bytes(uint64_t capacity, double error,
                                      unsigned flags, size_t *bytes);

/* Release a filter and all its stages. Accepts NULL. Exclusive. */
BK_API void bk_scalable_free(bk_scalable *f);

/* Add a key. Returns 1 when no stage had it (it was written into the
 * newest stage and counted), 0 when some stage may have had it (nothing
 * written), or, for a new key: BK_EFULL (non-scaling filter full),
 * BK_ELIMIT (stage or memory limit), BK_ESIZE (the next stage would exceed
 * BK_MAX_BITS) or BK_ENOMEM (the next stage could not be allocated); on an
 * error nothing changed. One cache line per stage read; a growing add also
 * allocates and sizes the new stage. Thread-safe (see above). */
BK_API int bk_scalable_add(bk_scalable *f, const void *key, size_t len);

/* As bk_scalable_add, but never adds a stage: a new key that would need
 * one gets BK_EFULL and nothing changes. A caller that must check growth
 * against a budget of its own (bloomkit-server, under a shared per-key
 * lock) adds with this, and takes its exclusive path only on BK_EFULL.
 * Thread-safe (see above). */
BK_API int bk_scalable_add_nogrow(bk_scalable *f, const void *key, size_t len);

/* 1 if some stage probably holds the key, 0 if certainly absent. One cache
 * line per stage. Thread-safe. */
BK_API int bk_scalable_contains(const bk_scalable *f, const void *key,
                                size_t len);

/* The same on a key hashed with bk_hash_key(key, len, bk_scalable_seed(f)).
 * Thread-safe. */
BK_API int bk_scalable_add_hash(bk_scalable *f, bk_hash h);
BK_API int bk_scalable_contains_hash(const bk_scalable *f, bk_hash h);

/* Batch add: results[i] (when results is not NULL) is what
 * bk_scalable_add returned for key i; keys after an error are still tried
 * (a front end that must stop at the first error reads results). Returns
 * the number of keys that were new (>= 0) or BK_EINVAL. Thread-safe. */
BK_API int64_t bk_scalable_add_batch(bk_scalable *f, const void *const *keys,
                                     const size_t *lens, size_t n,
                                     int *results);

/* bk_scalable_add_nogrow of keys in order, hashed and prefetched a few
 * keys ahead so that their cache misses overlap: results[i] (not NULL) is
 * 1 (new) or 0 (present). Stops before the first key that needs a new
 * stage and returns how many keys it did (n when all), or BK_EINVAL. The
 * caller adds the rest with bk_scalable_add, exclusively. Thread-safe, as
 * bk_scalable_add_nogrow. */
BK_API int64_t bk_scalable_add_nogrow_batch(bk_scalable *f, const void *const *keys,
                                            const size_t *lens, size_t n, int *results);

/* Batch lookup: results[i] = bk_scalable_contains(keys[i]); results may be
 * NULL. Returns the number found or BK_EINVAL. Thread-safe. */
BK_API int64_t bk_scalable_contains_batch(const bk_scalable *f,
                                          const void *const *keys,
                                          const size_t *lens, size_t n,
                                          uint8_t *results);

/* Drop every stage but the first, clear it and zero the counts: the filter
 * is as created (limits kept). O(first stage). Exclusive. */
BK_API void bk_scalable_clear(bk_scalable *f);

/* Cap total memory (bytes as bk_scalable_bytes counts them; 0: no cap).
 * A cap below the current size is allowed: it only stops growth. Growth
 * is checked against it before allocating. Returns BK_OK or BK_EINVAL.
 * Exclusive. */
BK_API int bk_scalable_set_max_bytes(bk_scalable *f, size_t max_bytes);
BK_API size_t bk_scalable_max_bytes(const bk_scalable *f);

/* Lower the stage limit: 1..BK_SCALABLE_MAX_STAGES (the default); below
 * the current number of stages it only stops growth. Returns BK_OK,
 * BK_EINVAL or BK_EPARAM. Exclusive. */
BK_API int bk_scalable_set_max_stages(bk_scalable *f, uint32_t max_stages);
BK_API uint32_t bk_scalable_max_stages(const bk_scalable *f);

/* The write mode, as for blocked filters (bk_blocked_set_single_writer):
 * 0 concurrent (the default: adds may run on many threads at once, one
 * atomic OR per word that misses bits), 1 single-writer (plain stores;
 * the caller guarantees that no other thread adds to or reads f while an
 * add runs: the Redis module, whose commands run one at a time). Answers
 * and stored bits are the same. Returns BK_OK or BK_EINVAL. Not
 * thread-safe: call before sharing f. */
BK_API int bk_scalable_set_single_writer(bk_scalable *f, int single_writer);
BK_API int bk_scalable_single_writer(const bk_scalable *f);

typedef struct bk_scalable_stats {
    uint64_t seed;
    uint64_t initial_capacity;  /* capacity of stage 0, as created */
    double error;               /* error rate as created */
    uint32_t expansion;         /* growth factor; 0 for a non-scaling filter
                                   (BF.INFO answers nil) */
    int nonscaling;             /* 1 with BK_SCALABLE_NONSCALING */
    int bounded;                /* 1 with BK_SCALABLE_BOUNDED */
    uint32_t stages;            /* BF.INFO "Number of filters" */
    uint32_t max_stages;
    size_t max_bytes;           /* 0: no cap */
    uint64_t capacity;          /* sum of stage capacities (BF.INFO Capacity) */
    uint64_t items;             /* adds that returned 1 (BF.CARD) */
    double estimated_items;     /* sum of the stages' estimates */
    double fpr_bound;           /* 1 - prod(1 - p_i) over the stages' target
                                   rates: the rate when all are full */
    double fpr_limit;           /* the bound for any number of stages:
                                   p0 / (1 - r) (error, if bounded) */
    double fpr_now;             /* 1 - prod(1 - fpr_now_i) */
    size_t bytes;               /* memory held (BF.INFO Size) */
} bk_scalable_stats;

typedef struct bk_scalable_stage_stats {
    uint64_t capacity;          /* items it takes before the next stage */
    double target_fpr;          /* its error rate */
    uint64_t items;             /* new items written into it */
    uint64_t bits;
    uint32_t hashes;
    double fill;                /* bits set / bits */
    double estimated_items;
    double fpr_now;
    size_t bytes;
} bk_scalable_stage_stats;

/* Fill *out. O(total size) (counts bits in every stage). A snapshot when
 * adds run concurrently. Returns BK_OK or BK_EINVAL. Thread-safe. */
BK_API int bk_scalable_get_stats(const bk_scalable *f, bk_scalable_stats *out);

/* Statistics of stage i (0 = oldest, smallest). O(stage size). Returns
 * BK_OK, BK_EINVAL or BK_EPARAM (no such stage). Thread-safe. */
BK_API int bk_scalable_get_stage_stats(const bk_scalable *f, uint32_t i,
                                       bk_scalable_stage_stats *out);

/* Cheap accessors, O(stages) at most. Thread-safe. bk_scalable_capacity is
 * the sum of stage capacities; bk_scalable_items the BF.CARD count;
 * bk_scalable_expansion 0 for a non-scaling filter. */
BK_API uint64_t bk_scalable_seed(const bk_scalable *f);
BK_API uint32_t bk_scalable_stages(const bk_scalable *f);
BK_API uint64_t bk_scalable_capacity(const bk_scalable *f);
BK_API uint64_t bk_scalable_items(const bk_scalable *f);
BK_API uint32_t bk_scalable_expansion(const bk_scalable *f);
BK_API double bk_scalable_error(const bk_scalable *f);
BK_API size_t bk_scalable_bytes(const bk_scalable *f);

/* The generic handle (see "Any filter"). bk_filter_add on a scalable
 * filter returns what bk_scalable_add does. */
BK_API bk_filter *bk_scalable_as_filter(bk_scalable *f);
BK_API bk_scalable *bk_filter_as_scalable(bk_filter *f);

/*==========================================================================
 * Growable filter: a quotient filter that doubles
 *
 * For sets of unknown size, like the scalable filter, but every lookup
 * reads one cache line however often the filter grew (the scalable filter
 * reads one per stage: 17 for a filter grown from 100 keys to 1e7), in
 * fewer bytes: about 16 bits per key when a level is full, 24 on average.
 * A key's hash picks one of N = 75 x 2^level "minis" and an 11-bit
 * fingerprint; a mini's entries are kept together, so the mini is free
 * fingerprint bits. Level k holds 100 x 2^k keys: the sizes where
 * RedisBloom's chain from its defaults adds a stage, so that a filter
 * grown from 100 keys never holds more bytes than RedisBloom's and holds
 * 0.74x at 1e5, 0.56x at 1e6, 0.49x at 1e7 (bench/RESULTS.md). Up to 6,400
 * keys the filter is one packed list (96 bytes with one key, 240 with
 * 100, adds shift it); above, 64-byte blocks of 37 12-bit entries and 24
 * minis. When it doubles, each entry moves to one of its mini's two
 * children and gives up one fingerprint bit, so the rate grows slowly
 * with the doublings: about 0.065% for a full first level, then about
 * 0.033% more per doubling (0.6% after 17). The filter tracks that rate
 * exactly (bk_growable_fpr_now) and refuses to double past the rate it was
 * created for (BK_EFULL): at 1% it doubles 28 times (from 100 keys to
 * 2.7e10); lower rates grow fewer times, and below BK_GROWABLE_MIN_FPR it
 * cannot be created.
 *
 * Keys are hashed with XXH3-64 (as the blocked filter's split layout).
 * A bk_filter like the others (saved, loaded, `bloomkit create --type
 * growable`); what a BF key auto-created by BF.ADD / BF.MADD / BF.INSERT
 * holds in the server and the module (docs/COMMANDS.md). Files of the
 * first layout (16-bit entries) load, converted.
 *
 * Threads: lookups, statistics and bk_growable_add_nogrow may all run at
 * once (in the concurrent mode, the default; see
 * bk_growable_set_single_writer). bk_growable_add (and the batch add),
 * merges, saving, copying, clearing and freeing need the filter to
 * themselves. bloomkit-server and the Redis module hold a key alone while
 * they add to it, put the filter in the single-writer mode, and try
 * bk_growable_add_nogrow first, bk_growable_add only for what it refuses
 * (a new key of a list, a full block, a doubling).
 *==========================================================================*/

/* The lowest rate a growable filter takes: its first level full
 * (100 keys' 11-bit entries in 75 minis). */
#define BK_GROWABLE_MIN_FPR 0.00066

typedef struct bk_growable bk_growable;

/* Create a filter holding at least `capacity` keys before it first
 * doubles (the first level of 100 x 2^k keys that does), that grows while
 * its rate stays at or under `fpr`. Returns BK_OK, BK_EINVAL
 * (out NULL), BK_ECAPACITY (0), BK_EFPR (fpr not in [BK_GROWABLE_MIN_FPR,
 * 1)), BK_ESIZE or BK_ENOMEM. */
BK_API int bk_growable_create(bk_growable **out, uint64_t capacity, double fpr,
                              uint64_t seed);

/* The bytes bk_growable_create would allocate for `capacity` (what
 * bk_growable_bytes then reports), without allocating. Returns BK_OK,
 * BK_EINVAL (bytes NULL), BK_ECAPACITY (0) or BK_ESIZE. */
BK_API int bk_growable_estimate_bytes(uint64_t capacity, size_t *bytes);

/* How many times a filter created for `capacity` at `fpr` can double when
 * filled from empty: the rule that refuses a doubling (BK_EFULL), applied
 * ahead of time. It then holds about capacity x 2^reach keys (at 1% from
 * 100 keys: 28 doublings, ~2.7e10 keys). 0 for parameters
 * bk_growable_create refuses. A long stash (only hostile keys make one)
 * doubles the table early, so such a filter may stop growing sooner. */
BK_API uint32_t bk_growable_reach(uint64_t capacity, double fpr);
BK_API void bk_growable_free(bk_growable *f);

/* Cap the bytes the filter may hold (0: none); a doubling past it fails
 * with BK_ELIMIT and changes nothing. Returns BK_OK or BK_EINVAL. */
BK_API int bk_growable_set_max_bytes(bk_growable *f, size_t max_bytes);

/* Add a key: 1 when it was new, 0 when the filter (probably) held it
 * already (nothing written), or BK_EFULL (a doubling would pass the rate),
 * BK_ELIMIT (max_bytes, or the last level: 1e11 keys), BK_ENOMEM,
 * BK_EINVAL; on an error no key is added or lost (the filter may have
 * doubled). A doubling
 * moves every entry: O(n), amortised O(1) per add. */
BK_API int bk_growable_add(bk_growable *f, const void *key, size_t len);

/* As bk_growable_add, but safe to call from many threads at once (and
 * with lookups) in the concurrent mode (the default; see
 * bk_growable_set_single_writer), and it only adds to a block with room: a new key of a
 * list, of a full block, or one that needs a doubling gets BK_EFULL and
 * nothing changes; add it with bk_growable_add when no other call runs. Adders take turns for the few
 * stores of one add (a spin lock); keys already present are answered
 * without it. Keys added this way double the table after the same count as
 * bk_growable_add would. */
BK_API int bk_growable_add_nogrow(bk_growable *f, const void *key, size_t len);
BK_API int bk_growable_add_nogrow_hash(bk_growable *f, uint64_t h);

/* The write mode of bk_growable_add_nogrow (and its batch):
 *   concurrent (0, the default): as described there, adds take turns
 *     under a spin lock, look the key up again under it, and publish the
 *     block so that lookups running meanwhile start over;
 *   single-writer (1): the caller guarantees that while an add runs no
 *     other add, remove or lookup of f runs (one thread owns f, or adds
 *     hold an exclusive lock that lookups also respect): adds then look the
 *     key up once, take no lock, and write with plain stores.
 * Answers, counts and stored bytes are the same in both modes. Other adds
 * (bk_growable_add, inserts) need the filter to themselves in either. Not
 * kept by clone, load or map (a new filter starts concurrent), nor stored
 * in files. Returns BK_OK or BK_EINVAL (f NULL). Not thread-safe: call
 * before sharing f. */
BK_API int bk_growable_set_single_writer(bk_growable *f, int single_writer);

/* 1 in the single-writer mode, 0 in the concurrent one (and for NULL). */
BK_API int bk_growable_single_writer(const bk_growable *f);

/* 1 if the key may be present, 0 if it is certainly absent. */
BK_API int bk_growable_contains(const bk_growable *f, const void *key, size_t len);

/* bk_growable_add_nogrow of keys in order, hashed and their blocks
 * prefetched 32 keys ahead: results[i] (not NULL) is 1 (new) or 0
 * (present). Stops before the first key that needs the exclusive path (a
 * list, a full block, a doubling) and returns how many it did (n when all;
 * 0 for a list), or BK_EINVAL. Thread-safe as bk_growable_add_nogrow. */
BK_API int64_t bk_growable_add_nogrow_batch(bk_growable *f, const void *const *keys,
                                            const size_t *lens, size_t n, int *results);

/* Batches: results[i] as the single calls (results may be NULL). Return
 * the keys added (found), or BK_EINVAL. Lookups hash 32 keys ahead and
 * prefetch their blocks. Where the CPU has them, lookups use AVX-512 VBMI
 * or BMI2 (chosen once, when the library is loaded); the answers are the
 * same every way. */
BK_API int64_t bk_growable_add_batch(bk_growable *f, const void *const *keys,
                                     const size_t *lens, size_t n, int *results);
BK_API int64_t bk_growable_contains_batch(const bk_growable *f, const void *const *keys,
                                          const size_t *lens, size_t n, uint8_t *results);

/* Multisets: what a CF key an add creates holds (docs/COMMANDS.md). The
 * same filter, but a key may be there many times: bk_growable_insert adds
 * a copy whether or not one is there (BK_OK, or the errors of
 * bk_growable_add), bk_growable_count counts the entries that match the
 * key (its copies, and at the filter's rate others'), bk_growable_remove
 * takes one copy away (1, or 0 when none matches; BK_ENOTSUP on a set).
 * Removing a key that was never added can take away another key's entry
 * (as in every cuckoo filter); the longest matching entry goes, so a key
 * that was added is never lost to its own removal. bk_growable_add and
 * bk_growable_contains work on a multiset as on a set (add: only when
 * absent). Not merged (BK_ENOTSUP). Through the generic handle a multiset
 * adds copies, removes and counts. bk_growable_insert and
 * bk_growable_remove need the filter to themselves. bk_growable_fpr_now
 * counts every copy (copies of one key are one value several times), so
 * with copies it is an upper bound. */
BK_API int bk_growable_create_multiset(bk_growable **out, uint64_t capacity, double fpr,
                                       uint64_t seed);
BK_API int bk_growable_is_multiset(const bk_growable *f);
BK_API int bk_growable_insert(bk_growable *f, const void *key, size_t len);
BK_API int bk_growable_insert_hash(bk_growable *f, uint64_t h);
BK_API int64_t bk_growable_count(const bk_growable *f, const void *key, size_t len);
BK_API int bk_growable_remove(bk_growable *f, const void *key, size_t len);

/* The key hash (XXH3-64 of the key and the seed) and the calls on it. */
BK_API uint64_t bk_growable_hash_key(const bk_growable *f, const void *key, size_t len);
BK_API int bk_growable_add_hash(bk_growable *f, uint64_t h);
BK_API int bk_growable_contains_hash(const bk_growable *f, uint64_t h);

/* Statistics, O(1): keys added; keys it holds before the next doubling;
 * the capacity it was created for; doublings so far; the seed; the rate
 * asked; bytes held (the handle, the list or the table, the stash);
 * entries in the stash (those neither their block nor the next could
 * hold); and the expected rate of a lookup of an absent key now (the sum
 * of 2^-bits over the entries, per mini: an upper bound by the union
 * bound). */
BK_API uint64_t bk_growable_items(const bk_growable *f);
BK_API uint64_t bk_growable_capacity(const bk_growable *f);
BK_API uint64_t bk_growable_initial_capacity(const bk_growable *f);
BK_API uint32_t bk_growable_doublings(const bk_growable *f);
BK_API uint64_t bk_growable_seed(const bk_growable *f);
BK_API double bk_growable_error(const bk_growable *f);
BK_API size_t bk_growable_bytes(const bk_growable *f);
BK_API size_t bk_growable_stashed(const bk_growable *f);
BK_API double bk_growable_fpr_now(const bk_growable *f);

/* The generic handle (see "Any filter"): family BK_FAMILY_GROWABLE,
 * "growable". Saved and loaded like any filter (docs/FORMAT.md; a loaded
 * filter copies its payload, also from a mapping, since a doubling
 * replaces the table); no remove; bk_filter_set_single_writer sets
 * bk_growable_set_single_writer's mode; adds through the handle
 * (bk_growable_add) are not thread-safe in either mode. bk_filter_merge (union) takes two growable
 * filters of one seed whatever their sizes: the smaller is doubled to the
 * larger's level (the destination itself, or the source's entries as
 * they are read), then every entry of the source that the destination
 * does not hold joins it; BK_EFULL when the union would pass the
 * destination's rate, and then nothing changes. Intersection: BK_ENOTSUP. */
BK_API bk_filter *bk_growable_as_filter(bk_growable *f);
BK_API bk_growable *bk_filter_as_growable(bk_filter *f);

/*==========================================================================
 * RedisBloom's own layouts (taking over RedisBloom's data)
 *
 * bk_rbloom is RedisBloom's scalable Bloom filter (a chain of classic
 * filters) and bk_rcuckoo its cuckoo filter (a chain of 8-bit fingerprint
 * tables), hashed with MurmurHash64A and laid out byte for byte as
 * RedisBloom 2.x (and Redis 8's built-in Bloom and Cuckoo types, the same
 * code) makes them. A filter read from RedisBloom's SCANDUMP chunks, DUMP
 * payload or RDB file answers exactly what RedisBloom answered, false
 * positives included, and keeps taking adds (and cuckoo deletes) the way
 * RedisBloom would, new stages included. Written back out (chunks or
 * fields) an unchanged filter gives RedisBloom's bytes again. These are
 * not what bloomkit builds by default (its own families are smaller and
 * faster); they exist for data that came from RedisBloom. Formats:
 * docs/FORMAT.md, "RedisBloom's formats".
 *
 * Chunks: what BF.SCANDUMP / CF.SCANDUMP return. Iterator 0 gives the
 * header chunk (the chain's sizes, no bits); each iterator after that
 * names a data chunk; the last chunk is followed by iterator 0 and an
 * empty chunk. BF.LOADCHUNK / CF.LOADCHUNK take them back in order.
 *
 * Fields: a value as RedisBloom's rdb_save writes it, a sequence of
 * unsigned integers, doubles and strings (Redis's module RDB encoding,
 * which an RDB file and a DUMP payload carry), read or written through a
 * bk_rfields supplied by the caller (the module wraps RedisModuleIO, the
 * server a DUMP payload). encver is the module type's encoding version
 * (the low 10 bits of Redis's module type id).
 *
 * Memory beyond the tables is the chain's handle and one small record per
 * stage. Concurrency: none inside; a caller serialises adds, deletes and
 * loads against everything else (lookups may run together).
 *==========================================================================*/

typedef struct bk_rbloom bk_rbloom;
typedef struct bk_rcuckoo bk_rcuckoo;

/* A field reader or writer. A reader's get_* return 0 with the value, or
 * nonzero when the stream has no more fields or the next one is of another
 * type (the load then fails with BK_ECORRUPT or BK_ETRUNC). A string is
 * valid until the next call on the reader (the family copies it). A
 * writer's put_* return 0, or nonzero to stop the save (BK_EIO). Members
 * a direction does not use may be NULL. */
typedef struct bk_rfields {
    void *ctx;
    int (*get_unsigned)(void *ctx, uint64_t *v);
    int (*get_double)(void *ctx, double *v);
    int (*get_string)(void *ctx, const void **p, size_t *len);
    int (*put_unsigned)(void *ctx, uint64_t v);
    int (*put_double)(void *ctx, double v);
    int (*put_string)(void *ctx, const void *p, size_t len);
} bk_rfields;

/* RedisBloom's module type names and the encoding versions its current
 * release writes (what bk_rbloom_save_fields / bk_rcuckoo_save_fields
 * write). */
#define BK_RBLOOM_TYPE_NAME "MBbloom--"
#define BK_RCUCKOO_TYPE_NAME "MBbloomCF"
BK_API int bk_rbloom_encver(void);
BK_API int bk_rcuckoo_encver(void);

/*--- Bloom ---------------------------------------------------------------*/

/* A chain as RedisBloom's BF.RESERVE key error_rate capacity [EXPANSION e]
 * makes it; expansion 0 for NONSCALING. Returns BK_OK, BK_EFPR, BK_ECAPACITY,
 * BK_EPARAM or BK_ENOMEM. */
BK_API int bk_rbloom_create(bk_rbloom **out, uint64_t capacity, double error,
                            uint32_t expansion);
BK_API void bk_rbloom_free(bk_rbloom *f);

/* 1 when the item was new (bits changed), 0 when it may have been there;
 * BK_EFULL when a non-scaling chain is full (nothing added), BK_ENOMEM
 * when a new stage cannot be allocated (nothing added), BK_ELIMIT when a
 * new stage would pass bk_rbloom_set_max_bytes. As RedisBloom: the newest
 * stage takes the item unless an older stage holds it. */
BK_API int bk_rbloom_add(bk_rbloom *f, const void *item, size_t len);
/* 1 when some stage may hold the item, else 0. */
BK_API int bk_rbloom_contains(const bk_rbloom *f, const void *item, size_t len);
/* Cap on bytes (bk_rbloom_bytes) a new stage may bring the chain to;
 * 0 for no cap. */
BK_API void bk_rbloom_set_max_bytes(bk_rbloom *f, size_t max_bytes);

/* BF.INFO's values as RedisBloom reports them: summed capacity of the
 * stages, Size (RedisBloom's own count of bytes), number of stages, items
 * inserted, expansion (0 for a non-scaling chain). */
BK_API uint64_t bk_rbloom_capacity(const bk_rbloom *f);
BK_API uint64_t bk_rbloom_size(const bk_rbloom *f);
BK_API uint32_t bk_rbloom_stages(const bk_rbloom *f);
BK_API uint64_t bk_rbloom_items(const bk_rbloom *f);
BK_API uint32_t bk_rbloom_expansion(const bk_rbloom *f);
/* Bytes this process really holds for the filter. */
BK_API size_t bk_rbloom_bytes(const bk_rbloom *f);

/* One stage as RedisBloom keeps it (BF.DEBUG's lines). */
typedef struct bk_rbloom_stage {
    uint64_t bytes;    /* its bit array's bytes */
    uint64_t bits;     /* RedisBloom's bits field */
    uint64_t capacity; /* entries it was made for */
    uint64_t items;    /* items it took */
    double error;      /* its own rate */
    uint32_t hashes;
    uint32_t hash_bits; /* 64 for 64-bit hashing (FORCE64), else 32 */
} bk_rbloom_stage;

/* Stage i (0 the oldest) into *out. Returns BK_OK, BK_EINVAL or BK_EPARAM
 * (no such stage). bk_rbloom_error is the chain's rate as it was asked:
 * stage 0's, doubled for a scaling chain (its first stage is made at half). */
BK_API int bk_rbloom_stage_info(const bk_rbloom *f, uint32_t i, bk_rbloom_stage *out);
BK_API double bk_rbloom_error(const bk_rbloom *f);

/* Chunks. bk_rbloom_header writes the header chunk into buf when cap is
 * enough and returns its size either way. bk_rbloom_chunk gives the data
 * chunk at iterator iter (>= 1): a pointer into the filter, its length and
 * the next iterator (0 and length 0 after the last). BK_EINVAL for an
 * iterator that names no chunk. */
BK_API size_t bk_rbloom_header(const bk_rbloom *f, void *buf, size_t cap);
BK_API int bk_rbloom_chunk(const bk_rbloom *f, uint64_t iter, uint64_t *next,
                           const void **data, size_t *len);
/* A chain from a header chunk: the stages it declares, every bit clear.
 * BK_ETRUNC, BK_ECORRUPT (sizes that do not add up or could not come from
 * RedisBloom), BK_ESIZE (larger than this machine can hold) or BK_ENOMEM. */
BK_API int bk_rbloom_from_header(bk_rbloom **out, const void *data, size_t len);
/* Copy a data chunk to where iterator iter places it (the iterator
 * SCANDUMP returned with it). BK_ECHUNK when it does not fall inside the
 * stages; nothing is changed then. */
BK_API int bk_rbloom_load_chunk(bk_rbloom *f, uint64_t iter, const void *data, size_t len);

/* Fields. Returns BK_OK, BK_EVERSION (encver unknown), BK_ETRUNC,
 * BK_ECORRUPT, BK_ESIZE or BK_ENOMEM; BK_EIO from a writer. */
BK_API int bk_rbloom_load_fields(bk_rbloom **out, int encver, const bk_rfields *r);
BK_API int bk_rbloom_save_fields(const bk_rbloom *f, const bk_rfields *w);

/* The generic handle: family BK_FAMILY_RBLOOM, "rbloom"; saved and loaded
 * in bloomkit's own file format like any filter (docs/FORMAT.md). */
BK_API bk_filter *bk_rbloom_as_filter(bk_rbloom *f);
BK_API bk_rbloom *bk_filter_as_rbloom(bk_filter *f);

/*--- Cuckoo --------------------------------------------------------------*/

/* A filter as RedisBloom's CF.RESERVE key capacity [BUCKETSIZE b]
 * [MAXITERATIONS i] [EXPANSION e] makes it (expansion 0: never grows).
 * Returns BK_OK, BK_ECAPACITY, BK_EPARAM or BK_ENOMEM. */
BK_API int bk_rcuckoo_create(bk_rcuckoo **out, uint64_t capacity, uint32_t bucket_size,
                             uint32_t max_iterations, uint32_t expansion);
BK_API void bk_rcuckoo_free(bk_rcuckoo *f);

/* CF.ADD: 1 added; BK_EFULL when no stage takes it and the filter may not
 * grow ("Maximum expansions reached" / "filter is full" as RedisBloom
 * words it), BK_ENOMEM, BK_ELIMIT. */
BK_API int bk_rcuckoo_add(bk_rcuckoo *f, const void *item, size_t len);
/* CF.ADDNX: 1 added, 0 when it may be there already; errors as add. */
BK_API int bk_rcuckoo_add_unique(bk_rcuckoo *f, const void *item, size_t len);
BK_API int bk_rcuckoo_contains(const bk_rcuckoo *f, const void *item, size_t len);
/* CF.COUNT: copies of the item's fingerprint where it may be stored. */
BK_API uint64_t bk_rcuckoo_count(const bk_rcuckoo *f, const void *item, size_t len);
/* CF.DEL: 1 when one copy was removed, 0 when none was found. */
BK_API int bk_rcuckoo_remove(bk_rcuckoo *f, const void *item, size_t len);
BK_API void bk_rcuckoo_set_max_bytes(bk_rcuckoo *f, size_t max_bytes);

/* CF.INFO's values as RedisBloom reports them. */
BK_API uint64_t bk_rcuckoo_size(const bk_rcuckoo *f);
BK_API uint64_t bk_rcuckoo_buckets(const bk_rcuckoo *f);
BK_API uint32_t bk_rcuckoo_stages(const bk_rcuckoo *f);
BK_API uint64_t bk_rcuckoo_items(const bk_rcuckoo *f);
BK_API uint64_t bk_rcuckoo_deleted(const bk_rcuckoo *f);
BK_API uint32_t bk_rcuckoo_bucket_size(const bk_rcuckoo *f);
BK_API uint32_t bk_rcuckoo_expansion(const bk_rcuckoo *f);
BK_API uint32_t bk_rcuckoo_max_iterations(const bk_rcuckoo *f);
BK_API size_t bk_rcuckoo_bytes(const bk_rcuckoo *f);

/* Chunks and fields as for bk_rbloom. */
BK_API size_t bk_rcuckoo_header(const bk_rcuckoo *f, void *buf, size_t cap);
BK_API int bk_rcuckoo_chunk(const bk_rcuckoo *f, uint64_t iter, uint64_t *next,
                            const void **data, size_t *len);
BK_API int bk_rcuckoo_from_header(bk_rcuckoo **out, const void *data, size_t len);
BK_API int bk_rcuckoo_load_chunk(bk_rcuckoo *f, uint64_t iter, const void *data, size_t len);
BK_API int bk_rcuckoo_load_fields(bk_rcuckoo **out, int encver, const bk_rfields *r);
BK_API int bk_rcuckoo_save_fields(const bk_rcuckoo *f, const bk_rfields *w);

/* The generic handle: family BK_FAMILY_RCUCKOO, "rcuckoo". */
BK_API bk_filter *bk_rcuckoo_as_filter(bk_rcuckoo *f);
BK_API bk_rcuckoo *bk_filter_as_rcuckoo(bk_filter *f);

/*==========================================================================
 * Time-window filter
 *
 * Answers "was this key added within the last W?" and forgets older keys,
 * so an endless stream never fills it. A ring of g >= 2 generations, each
 * a cache-blocked filter; the current one takes the adds, lookups check
 * every live one. Time is the caller's: any uint64_t unit, passed to each
 * call (no hidden clock). The window is split into g - 1 slices of
 * s = ceil(W / (g - 1)); when the current generation's slice ends the
 * oldest generation is cleared and becomes current. In count mode the
 * clock is the number of insertions made: the window is the last N of them.
 *
 * Guarantee (lib/window.c proves it): a key added at time t is found at
 * every t' < t + (g - 1) s (>= t + W), and is gone, but for false
 * positives, from t' >= t + g s (= t + W + s when g - 1 divides W). It holds
 * while the stream keeps to the rate the filter was sized for: a generation
 * that receives its share (items_per_window * s / W, about
 * items_per_window / (g - 1), distinct keys) before its slice ends is
 * rotated early, which keeps the false-positive rate within target but
 * shortens the memory of older keys: when every rotation is early, a key
 * is still found until at least items_per_window later new keys.
 *
 * Sizing: each generation holds items_per_window / (g - 1) keys at rate
 * 1 - (1 - p)^(1/g), so that a lookup across g full generations stays
 * within p. More generations give finer expiry (keys outlive the window by
 * at most one slice, W / (g - 1)) and cost more memory (g / (g - 1) times
 * the keys of a window, each at a rate about p / g): 2.3x the bits of a
 * plain filter for one window's keys at g = 2, 1.8x at g = 4, 1.7x at
 * g = 6..8 (p = 1%, measured).
 *
 * Time going backwards: a time earlier than the latest one seen is taken
 * as the latest one (the clock never goes back). A jump forward by g s or
 * more clears every generation (in O(size), not O(jump)).
 *
 * Concurrency: adds, advance and clear are writers (a rotation clears a
 * generation in place): they need external serialisation, and a lookup
 * concurrent with a writer needs the caller's lock (a reader-writer lock
 * fits). Lookups, stats and accessors may run concurrently with each other.
 *
 * Memory beyond the bits: 160 bytes for the handle plus 208 per generation
 * (a blocked filter's handle and alignment reserve, its pointer, and
 * bookkeeping, less the 8-byte slice start time the file also stores). The
 * bits are each generation's whole 64-byte blocks; 4 generations cost
 * 160 + 4 x 208 = 992 bytes beyond them.
 *==========================================================================*/

typedef struct bk_window bk_window;

#define BK_WINDOW_MIN_GENERATIONS 2
#define BK_WINDOW_MAX_GENERATIONS 64
#define BK_WINDOW_DEFAULT_GENERATIONS 4

/* Modes, as reported by bk_window_stats.mode. */
#define BK_WINDOW_TIME 0  /* the window is a span of the caller's time */
#define BK_WINDOW_COUNT 1 /* the window is the last N insertions */

/* Create a time-window filter: keys added within the last `window` time
 * units are found, `items_per_window` distinct keys per window at rate
 * `fpr` at most, with `generations` generations (0: default 4) and the
 * clock starting at `now`. Returns BK_OK and *out, BK_EINVAL,
 * BK_ECAPACITY (items_per_window 0), BK_EFPR, BK_EPARAM (window 0,
 * generations out of 2..BK_WINDOW_MAX_GENERATIONS), BK_ESIZE or
 * BK_ENOMEM. Allocates all g generations now (the memory never changes). */
BK_API int bk_window_create(bk_window **out, uint64_t items_per_window,
                            double fpr, uint64_t window, uint32_t generations,
                            uint64_t now, uint64_t seed);

/* Create a count-window filter: keys among the last `window_insertions`
 * adds are found. The clock is the number of adds made; the `now`
 * arguments of the functions below are ignored. Same returns. */
BK_API int bk_window_create_count(bk_window **out, uint64_t window_insertions,
                                  double fpr, uint32_t generations,
                                  uint64_t seed);

/* Release a filter. Accepts NULL. Exclusive. */
BK_API void bk_window_free(bk_window *f);

/* Move the clock to `now` (no earlier than the latest time seen), clearing
 * the generations whose time is over. Returns the number of generations
 * cleared (>= 0; always 0 in count mode, where only adds move the clock)
 * or BK_EINVAL. O(size of the cleared ones). Writer. */
BK_API int bk_window_advance(bk_window *f, uint64_t now);

/* Add a key at time `now` (after advancing to it; a full current
 * generation is rotated first). Returns 1 when no live generation had the
 * key, 0 when one may have had it; either way the key is written into the
 * current generation, so re-adding refreshes it. BK_EINVAL for NULL f.
 * One cache line per live generation read, one written; a rotation costs
 * O(generation size). Writer. */
BK_API int bk_window_add(bk_window *f, const void *key, size_t len,
                         uint64_t now);

/* 1 if the key was probably added within the window ending at `now`, 0 if
 * certainly not. Does not move the clock: generations that advancing to
 * `now` would clear are skipped. One cache line per live generation.
 * Reader. */
BK_API int bk_window_contains(const bk_window *f, const void *key,
                              size_t len, uint64_t now);

/* The same on a key hashed with bk_hash_key(key, len, bk_window_seed(f)). */
BK_API int bk_window_add_hash(bk_window *f, bk_hash h, uint64_t now);
BK_API int bk_window_contains_hash(const bk_window *f, bk_hash h,
                                   uint64_t now);

/* Batch add of n keys at time `now`: results[i] (results may be NULL) is
 * what bk_window_add returned. Returns the number of keys that were new,
 * or BK_EINVAL. Writer. */
BK_API int64_t bk_window_add_batch(bk_window *f, const void *const *keys,
                                   const size_t *lens, size_t n,
                                   uint64_t now, uint8_t *results);

/* Batch lookup at time `now`; results may be NULL. Returns the number
 * found or BK_EINVAL. Reader. */
BK_API int64_t bk_window_contains_batch(const bk_window *f,
                                        const void *const *keys,
                                        const size_t *lens, size_t n,
                                        uint64_t now, uint8_t *results);

/* Clear every generation; the clock stays where it is and a new slice
 * starts there. O(size). Writer. */
BK_API void bk_window_clear(bk_window *f);

typedef struct bk_window_stats {
    int mode;                   /* BK_WINDOW_TIME or BK_WINDOW_COUNT */
    uint32_t generations;       /* g */
    uint64_t window;            /* W (time units or insertions) */
    uint64_t slice;             /* s = ceil(W / (g - 1)) */
    uint64_t items_per_window;  /* keys per window it was sized for */
    uint64_t generation_capacity; /* ceil(items_per_window * s / W) */
    double target_fpr;          /* p */
    double generation_fpr;      /* 1 - (1 - p)^(1/g) */
    uint64_t seed;
    uint64_t now;               /* the clock: latest time seen (count mode:
                                   insertions made) */
    uint64_t slice_start;       /* when the current generation started */
    uint64_t rotations;         /* generations cleared by time or fullness */
    uint64_t early_rotations;   /* of which because the current one was full */
    uint64_t items;             /* sum of the live generations' new-key
                                   counts (a key re-added in two generations
                                   counts twice) */
    double estimated_items;     /* sum of the live generations' estimates */
    double fpr_now;             /* 1 - prod(1 - fpr_now_i), live generations */
    double fpr_bound;           /* 1 - (1 - generation_fpr)^g: rate with all
                                   generations full, at most p */
    size_t bytes;               /* memory held */
} bk_window_stats;

typedef struct bk_window_generation_stats {
    uint64_t start;             /* time its slice started */
    int live;                   /* 0 once advancing to the clock would clear it */
    uint64_t items;             /* new keys written into it */
    uint64_t bits;
    uint32_t hashes;
    double fill;
    double estimated_items;
    double fpr_now;
    size_t bytes;
} bk_window_generation_stats;

/* Fill *out at the filter's clock. O(size). Returns BK_OK or BK_EINVAL.
 * Reader. */
BK_API int bk_window_get_stats(const bk_window *f, bk_window_stats *out);

/* Statistics of the generation of age `age` (0 = current, g - 1 = oldest).
 * O(generation size). Returns BK_OK, BK_EINVAL or BK_EPARAM. Reader. */
BK_API int bk_window_get_generation_stats(const bk_window *f, uint32_t age,
                                          bk_window_generation_stats *out);

/* Cheap accessors. Readers. bk_window_now is the clock (latest time seen;
 * count mode: insertions made). */
BK_API uint64_t bk_window_seed(const bk_window *f);
BK_API uint32_t bk_window_generations(const bk_window *f);
BK_API uint64_t bk_window_window(const bk_window *f);
BK_API uint64_t bk_window_slice(const bk_window *f);
BK_API uint64_t bk_window_now(const bk_window *f);
/* BK_WINDOW_TIME or BK_WINDOW_COUNT. */
BK_API int bk_window_mode(const bk_window *f);
BK_API size_t bk_window_bytes(const bk_window *f);

/* The generic handle (see "Any filter"). bk_filter_add and
 * bk_filter_contains use the filter's clock (the latest time given). */
BK_API bk_filter *bk_window_as_filter(bk_window *f);
BK_API bk_window *bk_filter_as_window(bk_filter *f);

/*==========================================================================
 * Per-item TTL filter
 *
 * Answers "was this key added with a time to live that has not yet run
 * out?": each key carries its own TTL d (1 <= d <= max_ttl), given with
 * its add. Time is the caller's (any uint64_t unit, milliseconds in the
 * server), passed to each call; a time earlier than the latest seen is
 * taken as the latest (the clock never goes back).
 *
 * Two layouts (lib/ttl.c), chosen at creation:
 *
 * The table (the default: bk_ttl_create with generations 0, or
 * bk_ttl_create_table): one table of fingerprints, each stored with its
 * expiry slot, 4 per bucket, two buckets per key (a cuckoo table of m =
 * ceil(capacity / 3.8) buckets, any m). Granularity gran = ceil(max_ttl /
 * S) for S slots (1..64, default 12). An entry takes f + x bits: the
 * least f with 7.6 / (2^f - 1) <= fpr, and x with 2^x >= S + ceil(S/4)
 * (f = 10, x = 4 at 1% and S = 12: 14.7 bits a key at capacity, about
 * 1.5x one blocked filter at the same rate). A lookup reads 2 buckets,
 * prefetched together. The memory is fixed at creation: an add that
 * finds no room among live keys (moving entries to their other bucket
 * along the shortest chain a search of up to 2048 buckets finds: first
 * at about 1.02 x capacity live keys, measured from 1e5 to 1e8) answers
 * BK_EFULL and adds nothing. Keys whose
 * slot ended free their entries for new keys at once; adds empty them in
 * steps of 16 buckets, or, when too few adds came for that, one pass over
 * the table at most every S / 4 slots (by an add or bk_ttl_advance). Rates down to about 8 / 2^(32 - x) (BK_EFPR below).
 *
 * The generations layout (bk_ttl_create with generations g >= 2): g
 * generations (2..64), each holding
 * the keys whose expiry falls in one slot of the granularity
 *     gran = ceil(max_ttl / (g - 1))
 * on a fixed grid (slot j is [j gran, (j + 1) gran)). A generation is a
 * list of cache-blocked filters ("segments") of capacity
 * c = ceil(capacity / (g - 1)) keys at rate p / (g - 1) each; it starts
 * with one and takes another when its last one has received c new keys. A
 * generation is live until the clock reaches its slot's end; its slot is
 * then reused (cleared) by the first add that expires g slots later. A
 * lookup hashes once, prefetches its line in every segment of every live,
 * non-empty generation, and tests them.
 *
 * Guarantee: a key added at time t with TTL d is found at every
 * t' < t + d, and is gone, but for false positives, from
 * t' >= t + d + gran - 1 (its slot ends in [t + d, t + d + gran - 1]).
 * Re-adding a key with a later expiry extends its life.
 *
 * Rate and memory: with L live keys (new-key counts of the live
 * generations) the rate is at most p * L / capacity, however the keys are
 * spread over generations and segments: at most p while L <= capacity
 * (lib/ttl.c proves it). Memory is g segments from creation plus one per
 * c keys a generation holds beyond its first c: between g and 2g - 1
 * segments at L = capacity (g when keys spread evenly, as a stream with
 * TTLs near max_ttl does; toward 2g - 1 when generations hold a little
 * more than c keys each). A segment of c keys at p / (g - 1) costs about
 * log2((g - 1) / p) / log2(1 / p) times the bits per key of one filter at
 * p: the filter holds 1.8x the bits of one blocked filter sized for
 * `capacity` keys at p at g = 17, 1.7x at g = 5..9, 2.0x at g = 2 (p = 1%,
 * measured by tests/test_ttl.c), up to about twice that in the worst
 * spread. `capacity` counts each key until its slot ends (up to gran
 * after its TTL): a stream of r keys per unit of time with TTLs up to
 * max_ttl needs about r * (max_ttl + gran). Past capacity, adds still succeed: segments are added,
 * the rate bound grows as p * L / capacity (bk_ttl_stats.fpr_bound), and
 * memory grows; an add that needs a segment beyond
 * bk_ttl_set_max_bytes' cap answers BK_ELIMIT, beyond BK_TTL_MAX_SEGMENTS
 * in all BK_EFULL. Generations whose slot has ended give back their extra
 * segments when the clock moves (any add, or bk_ttl_advance).
 *
 * Concurrency: adds, advance, clear and set_max_bytes are writers (they
 * clear and allocate segments): they need external serialisation, and a
 * lookup concurrent with a writer needs the caller's lock. Lookups, stats
 * and accessors may run concurrently with each other.
 *==========================================================================*/

typedef struct bk_ttl bk_ttl;

#define BK_TTL_LAYOUT_GENERATIONS 0
#define BK_TTL_LAYOUT_TABLE 1
#define BK_TTL_DEFAULT_SLOTS 12 /* table: granularity max_ttl / 12 */
#define BK_TTL_MAX_SLOTS 64
#define BK_TTL_MIN_GENERATIONS 2
#define BK_TTL_MAX_GENERATIONS 64
#define BK_TTL_DEFAULT_GENERATIONS 17 /* granularity max_ttl / 16 */
/* The longest max_ttl (so that clock + TTL never overflows in practice). */
#define BK_TTL_MAX_TTL (UINT64_C(1) << 62)
/* The most segments a filter holds (one file part each, plus one). */
#define BK_TTL_MAX_SEGMENTS 4095u

/* Create a TTL filter for `capacity` live keys at rate `fpr`, TTLs up to
 * `max_ttl`, the clock starting at `now`: the generations layout with
 * `generations` generations, or with 0 the table layout with
 * BK_TTL_DEFAULT_SLOTS slots (as bk_ttl_create_table). Returns BK_OK and *out, BK_EINVAL,
 * BK_ECAPACITY (capacity 0), BK_EFPR, BK_EPARAM (max_ttl 0 or above
 * BK_TTL_MAX_TTL, generations out of 2..BK_TTL_MAX_GENERATIONS), BK_ESIZE
 * or BK_ENOMEM. Allocates one segment per generation now. */
BK_API int bk_ttl_create(bk_ttl **out, uint64_t capacity, double fpr,
                         uint64_t max_ttl, uint32_t generations, uint64_t now,
                         uint64_t seed);

/* Create a TTL filter of the table layout with `slots` slots in the
 * longest TTL (0: BK_TTL_DEFAULT_SLOTS; granularity ceil(max_ttl /
 * slots)). Returns BK_OK and *out, BK_EINVAL, BK_ECAPACITY, BK_EFPR (fpr
 * out of (0, 1), or too low for 32-bit entries), BK_EPARAM (max_ttl 0 or
 * above BK_TTL_MAX_TTL, slots above BK_TTL_MAX_SLOTS), BK_ESIZE or
 * BK_ENOMEM. Allocates the whole table now. */
BK_API int bk_ttl_create_table(bk_ttl **out, uint64_t capacity, double fpr,
                               uint64_t max_ttl, uint32_t slots, uint64_t now,
                               uint64_t seed);

/* The bytes bk_ttl_create_table would hold for these parameters (0 when
 * they are invalid or too large): what a server checks against its
 * memory limit before making one. */
BK_API size_t bk_ttl_table_size(uint64_t capacity, double fpr, uint32_t slots);

/* Release a filter. Accepts NULL. Exclusive. */
BK_API void bk_ttl_free(bk_ttl *f);

/* Add a key at time `now` with time to live `ttl` (1..max_ttl): it expires
 * at max(now, clock) + ttl (bk_ttl_expiry). Returns 1 when no live
 * generation had the key, 0 when one may have had it (the key is then
 * written again if no generation that had it lives as long), or
 * BK_EINVAL, BK_EPARAM (ttl 0 or above max_ttl, or the clock so late that
 * the expiry overflows), BK_ENOMEM, BK_ELIMIT or BK_EFULL (a new segment
 * was needed and could not be had: nothing added). One cache line per live
 * segment read, one written; reusing a generation clears it (O(its size)).
 * Writer. */
BK_API int bk_ttl_add(bk_ttl *f, const void *key, size_t len, uint64_t ttl,
                      uint64_t now);

/* Add a key that expires at the absolute time `expires_at` (what a log
 * records, so that a replay at any later time keeps the expiry). An
 * expiry not after max(now, clock) adds nothing and returns 0; one more
 * than max_ttl after it returns BK_EPARAM. Otherwise as bk_ttl_add. */
BK_API int bk_ttl_add_until(bk_ttl *f, const void *key, size_t len,
                            uint64_t expires_at, uint64_t now);

/* 1 if the key was probably added with a TTL still running at `now`, 0 if
 * certainly not. Does not move the clock. One cache line per live
 * segment, all prefetched at once. Reader. */
BK_API int bk_ttl_contains(const bk_ttl *f, const void *key, size_t len,
                           uint64_t now);

/* The same on a key hashed with bk_hash_key(key, len, bk_ttl_seed(f)). */
BK_API int bk_ttl_add_hash(bk_ttl *f, bk_hash h, uint64_t ttl, uint64_t now);
BK_API int bk_ttl_add_until_hash(bk_ttl *f, bk_hash h, uint64_t expires_at,
                                 uint64_t now);
BK_API int bk_ttl_contains_hash(const bk_ttl *f, bk_hash h, uint64_t now);

/* Batch add of n keys with one TTL (or one absolute expiry) at time `now`:
 * results[i] (results may be NULL) is what the single add returned.
 * Returns the number of keys that were new, or the first error (which
 * stops the batch; results before it are filled). Writer. */
BK_API int64_t bk_ttl_add_batch(bk_ttl *f, const void *const *keys,
                                const size_t *lens, size_t n, uint64_t ttl,
                                uint64_t now, uint8_t *results);
BK_API int64_t bk_ttl_add_until_batch(bk_ttl *f, const void *const *keys,
                                      const size_t *lens, size_t n,
                                      uint64_t expires_at, uint64_t now,
                                      uint8_t *results);

/* Batch lookup at time `now`, keys hashed ahead and their lines in every
 * live segment prefetched; results may be NULL. Returns the number found
 * or BK_EINVAL. Reader. */
BK_API int64_t bk_ttl_contains_batch(const bk_ttl *f, const void *const *keys,
                                     const size_t *lens, size_t n,
                                     uint64_t now, uint8_t *results);

/* The absolute expiry an add with `ttl` at `now` gives a key:
 * max(now, clock) + ttl (UINT64_MAX when that overflows). Reader. */
BK_API uint64_t bk_ttl_expiry(const bk_ttl *f, uint64_t ttl, uint64_t now);

/* Move the clock to `now` (no earlier than the latest time seen) and give
 * back the extra segments of generations whose slot has ended. Returns
 * the number of segments freed (>= 0) or BK_EINVAL. Writer. */
BK_API int bk_ttl_advance(bk_ttl *f, uint64_t now);

/* Forget every key: each generation back to one empty segment; the clock
 * stays. O(size). Writer. */
BK_API void bk_ttl_clear(bk_ttl *f);

/* Cap the memory the filter may grow to (0: no cap): an add needing a
 * segment beyond it answers BK_ELIMIT. Returns BK_OK or BK_EINVAL.
 * Writer. */
BK_API int bk_ttl_set_max_bytes(bk_ttl *f, size_t max_bytes);
BK_API size_t bk_ttl_max_bytes(const bk_ttl *f);

typedef struct bk_ttl_stats {
    int layout;                 /* BK_TTL_LAYOUT_* */
    uint32_t slots;             /* slots in the longest TTL: S, or g - 1 */
    uint32_t generations;       /* g (table: 0) */
    uint64_t max_ttl;           /* longest TTL */
    uint64_t granularity;       /* gran = ceil(max_ttl / (g - 1)) */
    uint64_t capacity;          /* live keys it was sized for */
    uint64_t segment_capacity;  /* c = ceil(capacity / (g - 1)) */
    double target_fpr;          /* p */
    double segment_fpr;         /* p / (g - 1) */
    uint64_t seed;
    uint64_t now;               /* the clock: latest time seen */
    uint32_t live_generations;  /* non-empty generations whose slot has not
                                   ended at the clock */
    uint64_t live_items;        /* new-key counts of their segments (a key
                                   re-added with a later expiry counts in
                                   both generations) */
    uint64_t live_segments;     /* segments a lookup tests now */
    uint64_t segments;          /* segments held */
    uint64_t added;             /* adds that answered 1 since creation or
                                   the last clear */
    double fpr_now;             /* 1 - prod(1 - model rate of each live
                                   segment at its count) */
    double fpr_bound;           /* p * live_items / capacity (at most 1) */
    size_t bytes;               /* memory held */
    /* the table layout (0 in the other) */
    uint32_t fingerprint_bits;  /* f */
    uint32_t expiry_bits;       /* x */
    uint64_t buckets;           /* m, 4 entries each */
    uint64_t kicks;             /* entries moved to make room since the
                                   filter was made or loaded */
    uint64_t full_sweeps;       /* whole passes over the table (adds sweep
                                   in steps; a pass when they fell behind)
                                   since the filter was made or loaded */
} bk_ttl_stats;

/* Fill *out at the filter's clock. O(segments). Returns BK_OK or
 * BK_EINVAL. Reader. */
BK_API int bk_ttl_get_stats(const bk_ttl *f, bk_ttl_stats *out);
/* The same at time `now` (no earlier than the clock; the clock does not
 * move): the live fields as a lookup at `now` sees them. */
BK_API int bk_ttl_get_stats_at(const bk_ttl *f, uint64_t now, bk_ttl_stats *out);

/* Cheap accessors. Readers. bk_ttl_now is the clock (latest time seen). */
BK_API uint64_t bk_ttl_seed(const bk_ttl *f);
BK_API uint32_t bk_ttl_generations(const bk_ttl *f); /* table: 0 */
BK_API int bk_ttl_layout(const bk_ttl *f);            /* BK_TTL_LAYOUT_* */
BK_API uint64_t bk_ttl_max_ttl(const bk_ttl *f);
BK_API uint64_t bk_ttl_granularity(const bk_ttl *f);
BK_API uint64_t bk_ttl_now(const bk_ttl *f);
BK_API size_t bk_ttl_bytes(const bk_ttl *f);

/* The generic handle (see "Any filter"): family BK_FAMILY_TTL, "ttl".
 * bk_filter_create takes the longest TTL in cfg.window and the
 * generations in cfg.generations, the clock starting at 0.
 * bk_filter_add adds with the longest TTL at the filter's clock (the
 * latest time given), bk_filter_contains looks up at it. */
BK_API bk_filter *bk_ttl_as_filter(bk_ttl *f);
BK_API bk_ttl *bk_filter_as_ttl(bk_filter *f);

/*==========================================================================
 * Deleting and counting filters of issue 15: shared statistics
 *
 * The families below (d-left counting, variable-length counters,
 * hierarchical, hybrid, probabilistic counters) are used through the
 * generic handle: bk_<family>_create() makes one, bk_<family>_as_filter()
 * views it as a bk_filter, and bk_filter_add / _remove / _contains /
 * _count / _add_batch / _contains_batch (see "Any filter") do the work.
 * bk_filter_create() with the family id builds them too, and the file
 * format saves and loads them. Each family's own statistics fill one
 * struct, bk_delete_stats.
 *==========================================================================*/

typedef struct bk_delete_stats {
    uint64_t capacity;          /* n it was sized for */
    double target_fpr;          /* p it was sized for */
    uint64_t seed;
    uint32_t hashes;            /* k, or d (tables) for d-left */
    uint64_t items;             /* adds that returned 1, minus removes */
    uint64_t table_bits;        /* bits of the structure's payload */
    double bits_per_key;        /* table_bits / capacity */
    double fpr_at_capacity;     /* the sizing formula at capacity */
    double fpr_now;             /* the formula on the current state */
    uint64_t overflows;         /* overflow events so far (per family) */
    size_t bytes;               /* memory held, struct included */
} bk_delete_stats;

/*==========================================================================
 * d-left counting Bloom filter (Bonomi, Mitzenmacher, Panigrahy, Singh &
 * Varghese, ESA 2006)
 *
 * d = 4 subtables of B buckets, each bucket 8 cells of (r-bit fingerprint
 * remainder, w-bit counter). A key's fingerprint is permuted once per
 * subtable into (bucket, remainder); an add increments the counter of the
 * cell holding its remainder in one of its d buckets, or else takes a free
 * cell in the least loaded of the d buckets (the leftmost on a tie). The
 * permutations make a remainder in a given bucket mean one fingerprint, so
 * each fingerprint is stored at most once and a remove always finds the
 * cell its add used. Sized at 6 of 8 cells per bucket (75% load) and
 * r = the fewest bits with fpr <= p, where
 *     fpr = 1 - (1 - 2^-r)^(n / B)        (n/B cells examined per lookup)
 * so bits per key = (r + w) / 0.75: p = 1% gives r = 12, 18.7 bits per key
 * with w = 2; p = 0.1% r = 15, 22.7 bits per key.
 *
 * Remove of a never-added key: when none of its d buckets holds its
 * remainder (probability 1 - fpr) BK_ENOTFOUND and nothing changes; when
 * one does (a false positive) the other key's counter is decremented: that
 * key may later be reported absent. Remove only what was added.
 *
 * Overflow: (a) a counter at its maximum 2^w - 1 (3 with the default
 * w = 2) sticks there: adds leave it, removes leave it, the cell is never
 * freed (no false negative; it stays a false positive for ever). It needs
 * more than 3 copies of one fingerprint: repeated adds of one key, or
 * distinct keys sharing a fingerprint (probability ~ n / (B 2^r) each).
 * (b) A key whose d buckets are all full cannot be stored: the add returns
 * BK_EFULL and changes nothing. With d-left placement at 75% load this is
 * rare: measured 0 events for 1e6 keys at capacity and in 4 rounds of 1e6
 * remove-one-add-one churn, 1 in the 1.5e6 adds of bench_delete at 1%
 * (docs/DELETING.md). Saturated cells are never freed, so a
 * workload that adds keys more than 3 times and removes them leaks cells
 * until adds fail: use counter_bits 4 there (tests/test_dleft.c, model).
 * Both events are counted in bk_delete_stats.overflows.
 *
 * Threads: lookups may run concurrently with each other; adds and removes
 * need exclusive access (the server and the module take the key's lock).
 *
 * Memory beyond the cells: 168 bytes (a 104-byte handle and 64 bytes of
 * alignment reserve). The cells are ceil(4 B 8 (r + w) / 8) bytes plus 8
 * bytes of padding.
 *==========================================================================*/

typedef struct bk_dleft bk_dleft;

/* Default counter bits and the range accepted. */
#define BK_DLEFT_DEFAULT_COUNTER_BITS 2
#define BK_DLEFT_MAX_COUNTER_BITS 8
#define BK_DLEFT_TABLES 4         /* d */
#define BK_DLEFT_CELLS 8          /* cells per bucket */
/* Largest number of buckets per subtable. */
#define BK_DLEFT_MAX_BUCKETS (UINT64_C(1) << 36)

/* Buckets per subtable B and remainder bits r for n keys at rate p with
 * counters of counter_bits (0 means 2): the table takes
 * 4 B 8 (r + counter_bits) bits. Either output may be NULL. Returns BK_OK,
 * BK_ECAPACITY, BK_EFPR, BK_EPARAM or BK_ESIZE. Thread-safe. */
BK_API int bk_dleft_optimal(uint64_t n, double p, uint32_t counter_bits,
                            uint64_t *buckets, uint32_t *remainder_bits);

/* Create a filter for `capacity` keys at rate `fpr` with counters of
 * counter_bits (0 means 2; 1 ... 8). Returns BK_OK and *out, BK_EINVAL,
 * BK_ECAPACITY, BK_EFPR, BK_EPARAM (counter bits, or a rate needing more
 * than 32 - counter_bits remainder bits), BK_ESIZE or BK_ENOMEM. */
BK_API int bk_dleft_create(bk_dleft **out, uint64_t capacity, double fpr,
                           uint32_t counter_bits, uint64_t seed);

/* Release a filter. Accepts NULL. */
BK_API void bk_dleft_free(bk_dleft *f);

/* Fill *out. O(size). Returns BK_OK or BK_EINVAL. */
BK_API int bk_dleft_get_stats(const bk_dleft *f, bk_delete_stats *out);

/* Remainder bits r and buckets per subtable B. */
BK_API uint32_t bk_dleft_remainder_bits(const bk_dleft *f);
BK_API uint64_t bk_dleft_buckets(const bk_dleft *f);

BK_API bk_filter *bk_dleft_as_filter(bk_dleft *f);
BK_API bk_dleft *bk_filter_as_dleft(bk_filter *f);

/*==========================================================================
 * Counting Bloom filter with variable-length counters (seed 002)
 *
 * Blocks of 512 bits, one per key as in the blocked counting filter, each
 * holding C counters in a prefix code (unary: value v is v ones and a
 * zero), so a block costs C + (sum of its counters) bits: counters at 0
 * take one bit, hot ones as many as they need, and no single counter
 * saturates. An add or remove decodes and re-encodes the one block (one
 * cache line). Sizing picks k and C with the blocked formula
 *     fpr = sum_i Poisson(i; n / blocks) (1 - (1 - k/C)^i)^k
 * and keeps room: the probability that a block at capacity needs more
 * than its 511 stream bits is held below 1e-7. Bits per key for rate p:
 * 19.5 at 1% (k = 3, C = 336) and 32.1 at 0.1% (k = 5, C = 304), 0.44x and
 * 0.41x the 4-bit counting filter's (bk_varcount_optimal).
 *
 * Remove of a never-added key: BK_ENOTFOUND when one of its counters is 0
 * (probability 1 - fpr), nothing changed; otherwise (a false positive) its
 * counters are decremented and other keys sharing them may be reported
 * absent later. Remove only what was added.
 *
 * Overflow: a block whose counters would need more than 511 bits is
 * frozen: it turns into a plain 1-bit-per-counter Bloom block (counter
 * nonzero -> bit set) for good. Lookups stay exact (no false negative);
 * adds set bits; removes of keys whose bits are set return BK_OK but clear
 * nothing (the key stays a false positive); counts answer 1 or 0. Each
 * freeze is one event in bk_delete_stats.overflows; at capacity the
 * expected number is below 1e-7 per block, and it grows quickly past it:
 * measured for 1e5 keys at 1% (3802 blocks), 0 frozen blocks at 1.25x
 * capacity, 7 at 1.5x, 132 at 1.75x, 791 at 2x; many adds of one key
 * freeze its block too ((511 - C) / k copies fit in an empty block).
 *
 * Threads: lookups may run concurrently with each other; adds and removes
 * need exclusive access.
 *
 * Memory beyond the blocks: 168 bytes (a 104-byte handle and 64 bytes of
 * alignment reserve). The blocks are 64 bytes each.
 *==========================================================================*/

typedef struct bk_varcount bk_varcount;

#define BK_VARCOUNT_MAX_HASHES 16
#define BK_VARCOUNT_MAX_BLOCKS (UINT64_C(1) << 40)

/* The number of blocks, counters per block C and counters per key k that
 * hold n keys at rate p in the fewest blocks, as described above. Any
 * output may be NULL. Returns BK_OK, BK_ECAPACITY, BK_EFPR or BK_ESIZE.
 * Costs a few milliseconds (a search over k and C). Thread-safe. */
BK_API int bk_varcount_optimal(uint64_t n, double p, uint64_t *blocks,
                               uint32_t *counters, uint32_t *k);

/* Create a filter for `capacity` keys at rate `fpr`, sized by
 * bk_varcount_optimal. Returns BK_OK and *out, an error of
 * bk_varcount_optimal, BK_EINVAL or BK_ENOMEM. */
BK_API int bk_varcount_create(bk_varcount **out, uint64_t capacity,
                              double fpr, uint64_t seed);

/* Release a filter. Accepts NULL. */
BK_API void bk_varcount_free(bk_varcount *f);

/* Fill *out (overflows = blocks frozen). O(size). BK_OK or BK_EINVAL. */
BK_API int bk_varcount_get_stats(const bk_varcount *f, bk_delete_stats *out);

BK_API uint64_t bk_varcount_blocks(const bk_varcount *f);
BK_API uint32_t bk_varcount_counters(const bk_varcount *f);
BK_API uint32_t bk_varcount_hashes(const bk_varcount *f);

BK_API bk_filter *bk_varcount_as_filter(bk_varcount *f);
BK_API bk_varcount *bk_filter_as_varcount(bk_filter *f);

/*==========================================================================
 * Hierarchical counting Bloom filter (seed 002)
 *
 * Two layers over the same cells: a bit layer that is a bk_blocked filter
 * (sized and laid out by it; lookups, single and batch, run its code) and
 * alone answers lookups, and a layer of 4-bit
 * counters (512 per block, 256 bytes) touched only by adds, removes and
 * counts. A bit is set exactly when its counter is nonzero. Lookups cost
 * what a blocked Bloom filter's do (one cache line, no counter); the price
 * is memory: 5 bits per cell, 1.25x a 4-bit counting filter of the same
 * cells (49.6 bits per key at 1%, 77.7 at 0.1%; bk_hier_optimal gives
 * the blocks and k, those of bk_blocked_optimal).
 *
 * Remove of a never-added key: BK_ENOTFOUND when one of its bits is clear
 * (probability 1 - fpr), nothing changed; otherwise (a false positive) its
 * counters are decremented and other keys may be reported absent later.
 *
 * Overflow: a counter at 15 sticks (its bit is never cleared): no false
 * negative, a cell set for ever; each counter that sticks is one event in
 * bk_delete_stats.overflows (about 1e-17 per counter at capacity, so in
 * practice only keys added 15 times or more).
 *
 * Threads: lookups may run concurrently with each other; adds and removes
 * need exclusive access.
 *
 * Memory beyond the two layers: 312 bytes (a 184-byte handle and 64 bytes
 * of alignment reserve for each layer). The layers are 64 + 256 bytes a
 * block.
 *==========================================================================*/

typedef struct bk_hier bk_hier;

#define BK_HIER_MAX_HASHES 16
#define BK_HIER_MAX_BLOCKS (UINT64_C(1) << 40)

/* Blocks and bits per key k that hold n keys at rate p in the fewest
 * blocks. Either output may be NULL. Returns BK_OK, BK_ECAPACITY, BK_EFPR
 * or BK_ESIZE. Thread-safe. */
BK_API int bk_hier_optimal(uint64_t n, double p, uint64_t *blocks, uint32_t *k);

/* Create a filter for `capacity` keys at rate `fpr`. Returns BK_OK and
 * *out, an error of bk_hier_optimal, BK_EINVAL or BK_ENOMEM. */
BK_API int bk_hier_create(bk_hier **out, uint64_t capacity, double fpr,
                          uint64_t seed);

/* Release a filter. Accepts NULL. */
BK_API void bk_hier_free(bk_hier *f);

/* Fill *out (overflows = counters stuck at 15). O(size). */
BK_API int bk_hier_get_stats(const bk_hier *f, bk_delete_stats *out);

BK_API uint64_t bk_hier_blocks(const bk_hier *f);
BK_API uint32_t bk_hier_hashes(const bk_hier *f);

BK_API bk_filter *bk_hier_as_filter(bk_hier *f);
BK_API bk_hier *bk_filter_as_hier(bk_filter *f);

/*==========================================================================
 * Hybrid counting Bloom filter (seed 002, "Hybrid CBF")
 *
 * Low counts in a plain bit layer, high counts in counters: blocks of one
 * 512-bit bit line (which alone answers lookups) and L lines of 16-bit
 * counter slots. A cell at 0 or 1 is just its bit; when a second add
 * reaches a set cell, the cell migrates to a slot with count 2; removes
 * bring it back to a plain bit at 1. Counters exist only for the cells
 * that need them, so the sizing (bk_hybrid_optimal) trades k against slot
 * room: 38.6 bits per key at 1% (k = 2, L = 1), 59.9 at 0.1% (k = 3,
 * L = 1), 0.88x and 0.77x the 4-bit counting filter's, with counts exact
 * up to 127 instead of 15. The threshold is 2 per cell
 * (a bit holds 0 or 1; seed 002's example threshold of 3 needs more).
 *
 * Remove of a never-added key: BK_ENOTFOUND when one of its bits is clear
 * (probability 1 - fpr), nothing changed; otherwise other keys' cells are
 * decremented and those keys may later be reported absent.
 *
 * Overflow: a slot count at 127 sticks (counted). A cell that must
 * migrate when all of its block's slots are taken freezes the block into a
 * plain Bloom block: adds set bits, removes of keys whose bits are set
 * return BK_OK and clear nothing (the key stays a false positive), counts
 * answer 1 or 0; no false negative. Each freeze is one event in
 * bk_delete_stats.overflows. The sizing is for keys added once each (the
 * use that needs deletes: add on insert, remove on delete): slots then go
 * only to cells two keys share, and freezes stay below about 1e-7 per
 * block at capacity (measured: none for 1e5 keys at 1% even at 2x
 * capacity). A key added again takes a slot for each of its k cells, so
 * repeats eat the slots fast: at 1% (k = 2, 32 slots a block), 20000 keys
 * in a filter for 40000 with half of them added twice froze 1 block of
 * 1,600; every key added twice froze 307. For multisets with many
 * repeats, the counting filter (4-bit counters, exact to 15) or the
 * variable-length counters keep counting.
 *
 * Threads: lookups may run concurrently with each other; adds and removes
 * need exclusive access.
 *
 * Memory beyond the blocks: 168 bytes (a 104-byte handle and 64 bytes of
 * alignment reserve). A block is (1 + L) x 64 bytes.
 *==========================================================================*/

typedef struct bk_hybrid bk_hybrid;

#define BK_HYBRID_MAX_HASHES 16
#define BK_HYBRID_MAX_LINES 4     /* counter lines per block */
#define BK_HYBRID_MAX_BLOCKS (UINT64_C(1) << 38)

/* Blocks, bits per key k and counter lines per block L holding n keys at
 * rate p in the least memory. Any output may be NULL. Returns BK_OK,
 * BK_ECAPACITY, BK_EFPR or BK_ESIZE. Costs some milliseconds. Thread-safe. */
BK_API int bk_hybrid_optimal(uint64_t n, double p, uint64_t *blocks,
                             uint32_t *k, uint32_t *lines);

/* Create a filter for `capacity` keys at rate `fpr`. Returns BK_OK and
 * *out, an error of bk_hybrid_optimal, BK_EINVAL or BK_ENOMEM. */
BK_API int bk_hybrid_create(bk_hybrid **out, uint64_t capacity, double fpr,
                            uint64_t seed);

/* Release a filter. Accepts NULL. */
BK_API void bk_hybrid_free(bk_hybrid *f);

/* Fill *out (overflows = blocks frozen + slot counts stuck). O(size). */
BK_API int bk_hybrid_get_stats(const bk_hybrid *f, bk_delete_stats *out);

BK_API uint64_t bk_hybrid_blocks(const bk_hybrid *f);
BK_API uint32_t bk_hybrid_hashes(const bk_hybrid *f);
BK_API uint32_t bk_hybrid_counter_lines(const bk_hybrid *f);

BK_API bk_filter *bk_hybrid_as_filter(bk_hybrid *f);
BK_API bk_hybrid *bk_filter_as_hybrid(bk_filter *f);

/*==========================================================================
 * Frequency-estimating filter of probabilistic (Morris) counters
 * (seed 002, "Probabilistic Counting")
 *
 * "About how many times was x seen?" in 8 bits per counter: blocks of 64
 * one-byte counters, k per key (one cache line), each an exponent c
 * standing for (b^c - 1) / (b - 1) events, b = 1.08 by default. An add
 * raises the key's smallest counters together with probability b^-min
 * (conservative update); the count is the estimate of the minimum.
 *
 * Error bound: the minimum never falls below the Morris counter of the
 * key's own adds, so the estimate is at least an unbiased Morris estimate
 * of the true count x: relative standard deviation sqrt((b - 1)/2) = 20%
 * at b = 1.08 (bk_morris_relative_error), plus only upward error from
 * other keys sharing all k counters (count-min excess). Counts up to
 * (b^255 - 1)/(b - 1) = 4.3e9; a counter reaching 255 sticks (an overflow
 * event). Membership (all k counters nonzero) is exact for added keys, with
 * the false-positive rate of a blocked filter of 64 cells per block: about
 * 99 bits per key at 1%, 200 at 0.1% (bk_morris_optimal).
 *
 * Remove: not supported (BK_ENOTSUP). A probabilistic decrement is
 * unbiased on average but can zero a counter another present key relies
 * on (a false negative); the seed says as much ("deletion unreliable").
 *
 * Threads: lookups and counts may run concurrently with each other; adds
 * need exclusive access (the coin generator is shared state).
 *
 * Memory beyond the counters: 192 bytes (a 128-byte handle and 64 bytes of
 * alignment reserve). The counters are one byte each, 64 a block.
 *==========================================================================*/

typedef struct bk_morris bk_morris;

#define BK_MORRIS_DEFAULT_BASE 1.08
#define BK_MORRIS_MAX_HASHES 16
#define BK_MORRIS_MAX_BLOCKS (UINT64_C(1) << 40)

/* Blocks and counters per key k holding n keys at membership rate p in
 * the fewest blocks. Returns BK_OK, BK_ECAPACITY, BK_EFPR or BK_ESIZE. */
BK_API int bk_morris_optimal(uint64_t n, double p, uint64_t *blocks, uint32_t *k);

/* Create a filter for `capacity` keys at membership rate `fpr` with
 * counter base `base` (0 means BK_MORRIS_DEFAULT_BASE; 1 < base <= 2: a
 * smaller base is more precise and counts less far). Returns BK_OK and
 * *out, BK_EINVAL, BK_EPARAM (base), an error of bk_morris_optimal or
 * BK_ENOMEM. */
BK_API int bk_morris_create(bk_morris **out, uint64_t capacity, double fpr,
                            double base, uint64_t seed);

/* Release a filter. Accepts NULL. */
BK_API void bk_morris_free(bk_morris *f);

/* The key's estimated count as a real number (bk_filter_count rounds it).
 * 0 when the key is certainly absent. Thread-safe with other lookups. */
BK_API double bk_morris_estimate(const bk_morris *f, const void *key, size_t len);

/* sqrt((b - 1)/2): the relative standard deviation of an estimate. */
BK_API double bk_morris_relative_error(const bk_morris *f);

/* Fill *out (overflows = adds that found a counter at 255). O(size). */
BK_API int bk_morris_get_stats(const bk_morris *f, bk_delete_stats *out);

BK_API double bk_morris_base(const bk_morris *f);
BK_API uint64_t bk_morris_blocks(const bk_morris *f);
BK_API uint32_t bk_morris_hashes(const bk_morris *f);

BK_API bk_filter *bk_morris_as_filter(bk_morris *f);
BK_API bk_morris *bk_filter_as_morris(bk_filter *f);

/***************************************************************************
 * PART 4. Static filters and set reconciliation (advanced)
 *
 * Filters built once from a complete key set (binary fuse, bumped, the
 * Bloomier map), and the invertible tables that find the difference of two
 * sets. The static ones are bk_filter too, without adds.
 **************************************************************************/

/*==========================================================================
 * Static filter (binary fuse; Graf & Lemire, JEA 2022)
 *
 * For sets that are rebuilt rather than updated (a blocklist published
 * daily, the keys of an immutable table file): built once from the whole
 * key array, then read only. Each key's fingerprint (8, 12 or 16 bits) is the
 * XOR of three table cells, one in each of three consecutive segments, so
 * a lookup reads three cells. Memory ~1.125 x w bits per key from 10^6
 * keys up (more for small sets): 9.0 bits per key at 0.39% (w = 8), 13.5
 * at 0.024% (w = 12, cells packed), 18.0 at 0.0015% (w = 16), against
 * ~1.44 x log2(1/p) for Bloom filters. No
 * false negatives. Duplicate keys are allowed (a set: counted once).
 * Construction peels a random 3-hypergraph; an unlucky seed is retried
 * with another, at most 64 times (BK_EBUILD after that, never a hang).
 * Lookups are thread-safe; there is nothing to add or remove: rebuild.
 * For lookups of one cache line at about the same memory, see the bumped
 * static filter (bk_bumped, below).
 *
 * Through the generic handle (family BK_FAMILY_STATIC, "static") it is
 * saved, loaded and mapped like any filter; bk_filter_add answers
 * BK_ESTATIC, bk_filter_remove BK_ENOTSUP, bk_filter_create BK_ESTATIC.
 *
 * Memory beyond the cells: 184 bytes (a 112-byte handle and 72 bytes of
 * alignment reserve). The cells are m fingerprints of w bits.
 *==========================================================================*/

typedef struct bk_static bk_static;

/* Build a filter of the n keys (keys[i] of lens[i] bytes; duplicates
 * allowed) with fingerprints of fingerprint_bits (8, 12 or 16). The first
 * attempt hashes with `seed`, later ones with seeds derived from it.
 * Temporary memory: bk_static_build_memory(n) bytes besides the keys.
 * Returns BK_OK and *out, BK_EINVAL, BK_EPARAM (fingerprint bits),
 * BK_ESIZE (more than ~3.8e9 keys), BK_EBUILD (64 attempts failed) or
 * BK_ENOMEM. O(n) time. */
BK_API int bk_static_build(bk_static **out, const void *const *keys,
                           const size_t *lens, uint64_t n,
                           uint32_t fingerprint_bits, uint64_t seed);

/* Temporary memory bk_static_build takes for n keys, in bytes (~22.6 per
 * key: the hashes, and per cell a count, a hash XOR and a queue slot). */
BK_API uint64_t bk_static_build_memory(uint64_t n);

/* Release a filter. Accepts NULL. */
BK_API void bk_static_free(bk_static *f);

/* 1 if the key is probably in the set, 0 if certainly not. Three cell
 * reads. Thread-safe. */
BK_API int bk_static_contains(const bk_static *f, const void *key, size_t len);

/* The same on bk_hash_key(key, len, bk_static_seed(f)). */
BK_API int bk_static_contains_hash(const bk_static *f, bk_hash h);

/* Batch lookup: hashes ahead and prefetches; results[i] (may be NULL) as
 * bk_static_contains. Returns the number found or BK_EINVAL. Thread-safe. */
BK_API int64_t bk_static_contains_batch(const bk_static *f,
                                        const void *const *keys,
                                        const size_t *lens, size_t n,
                                        uint8_t *results);

typedef struct bk_static_stats {
    uint64_t items;           /* distinct keys */
    uint64_t duplicates;      /* keys dropped as duplicates (0 when loaded) */
    uint32_t fingerprint_bits;/* w */
    uint64_t cells;           /* table length */
    uint32_t segment_length;
    uint64_t seed;            /* of the key hash (the successful attempt's) */
    double fpr;               /* 2^-w (0 for the empty set) */
    double bits_per_key;      /* cells x w / items */
    uint32_t attempts;        /* construction attempts (0 when loaded) */
    uint64_t build_memory;    /* temporary bytes construction took (0 when
                                 loaded) */
    size_t bytes;             /* memory held, struct included */
} bk_static_stats;

/* Fill *out. O(1). Returns BK_OK or BK_EINVAL. */
BK_API int bk_static_get_stats(const bk_static *f, bk_static_stats *out);

/* Cheap accessors. */
BK_API uint64_t bk_static_seed(const bk_static *f);
BK_API uint64_t bk_static_items(const bk_static *f);

BK_API bk_filter *bk_static_as_filter(bk_static *f);
BK_API bk_static *bk_filter_as_static(bk_filter *f);

/*==========================================================================
 * Bumped static filter: one cache line per lookup
 *
 * A static filter (built once from its keys, then read only) whose lookup
 * reads one 64-byte line, like the blocked filter, at about the static
 * filter's memory: 8.9 bits per key at 0.39% (8-bit fingerprints), 18.2
 * at 0.0015% (16-bit), against 9.0 / 18.0 for bk_static (three reads) and
 * 12.1 / 28.2 for a blocked filter of the same rate (bench/RESULTS.md,
 * bench_static).
 *
 * A line holds the solution of a small linear system over GF(2): w planes
 * of 512/w bits (w = fingerprint bits), of which 512/w - 1 rows solve and
 * the planes' top bits hold the line's threshold. A key's hash picks its
 * line, a coefficient vector of 512/w - 1 bits, a fingerprint and a rank;
 * the key is kept in its line when its rank is below the threshold, and
 * the lookup then answers whether the parities of coefficients AND planes
 * equal the fingerprint (one AVX-512 AND, population count and test).
 * Construction fills each line with the keys of lowest rank that its
 * system can solve (about 60 of 63 rows at w = 8) and sets the threshold
 * above them; the others are "bumped" to a next, much smaller layer built
 * the same way from the bumped keys alone (Dillinger, Huebschle-Schneider,
 * Sanders & Walzer, "Fast Succinct Retrieval and Approximate Membership
 * using Ribbon", SEA 2022, bump keys the same way). A key below its
 * line's threshold is answered there; about 4% of absent keys (10% at
 * w = 16) read a second line, and a key bumped from the last layer is
 * absent.
 *
 * No false negatives; an absent key matches with probability 2^-w.
 * Duplicate keys are allowed (a set). Construction hashes and sorts the
 * keys and solves each line once: O(n), 8 bytes of temporary memory per
 * key; a seed that needs more than 24 layers (never seen) is retried with
 * another, at most 64 times (BK_EBUILD after that). Lookups are
 * thread-safe and a mapped file is used in place.
 *
 * Keys are hashed with XXH3-64. Through the generic handle (family
 * BK_FAMILY_BUMPED, "bumped"; `bloomkit create --type bumped`) it is
 * saved, loaded and mapped like any filter; bk_filter_add answers
 * BK_ESTATIC, bk_filter_remove BK_ENOTSUP, bk_filter_create BK_ESTATIC.
 *==========================================================================*/

typedef struct bk_bumped bk_bumped;

/* Build a filter of the n keys (keys[i] of lens[i] bytes; duplicates
 * allowed) with fingerprints of fingerprint_bits (8 or 16). The first
 * attempt hashes with `seed`, later ones with seeds derived from it.
 * Temporary memory: bk_bumped_build_memory(n) bytes besides the keys.
 * Returns BK_OK and *out, BK_EINVAL, BK_EPARAM (fingerprint bits),
 * BK_ESIZE (n too large for memory), BK_EBUILD (64 attempts failed) or
 * BK_ENOMEM. */
BK_API int bk_bumped_build(bk_bumped **out, const void *const *keys,
                           const size_t *lens, uint64_t n,
                           uint32_t fingerprint_bits, uint64_t seed);

/* Temporary memory bk_bumped_build takes for n keys, in bytes (8 per key,
 * the hashes, and 48 KB for the sort). */
BK_API uint64_t bk_bumped_build_memory(uint64_t n);

/* Release a filter. Accepts NULL. */
BK_API void bk_bumped_free(bk_bumped *f);

/* 1 if the key is probably in the set, 0 if certainly not. One line read
 * (two for a few percent of keys). Thread-safe. */
BK_API int bk_bumped_contains(const bk_bumped *f, const void *key, size_t len);

/* Batch lookup: hashes 32 keys ahead and prefetches their lines; results[i]
 * (may be NULL) as bk_bumped_contains. Returns the number found or
 * BK_EINVAL. Thread-safe. */
BK_API int64_t bk_bumped_contains_batch(const bk_bumped *f, const void *const *keys,
                                        const size_t *lens, size_t n,
                                        uint8_t *results);

/* The key hash (XXH3-64 of the key and the filter's seed) and the lookup
 * on it. */
BK_API uint64_t bk_bumped_hash_key(const bk_bumped *f, const void *key, size_t len);
BK_API int bk_bumped_contains_hash(const bk_bumped *f, uint64_t h);

typedef struct bk_bumped_stats {
    uint64_t items;           /* distinct keys */
    uint64_t duplicates;      /* keys dropped as duplicates (0 when loaded) */
    uint32_t fingerprint_bits;/* w */
    uint32_t layers;          /* the first and those of bumped keys */
    uint32_t load;            /* keys per line each layer was sized for */
    uint64_t lines;           /* in all layers */
    uint64_t first_layer_items; /* keys kept in the first layer */
    double second_reads;      /* share of absent keys that read a second line
                                 (from the first layer's thresholds) */
    uint64_t seed;            /* of the key hash (the successful attempt's) */
    double fpr;               /* 2^-w (0 for the empty set) */
    double bits_per_key;      /* lines x 512 / items */
    uint32_t attempts;        /* construction attempts (0 when loaded) */
    uint64_t build_memory;    /* temporary bytes construction took (0 when
                                 loaded) */
    size_t bytes;             /* memory held, struct included */
} bk_bumped_stats;

/* Fill *out: O(lines of the first layer). Returns BK_OK or BK_EINVAL. */
BK_API int bk_bumped_get_stats(const bk_bumped *f, bk_bumped_stats *out);

BK_API uint64_t bk_bumped_seed(const bk_bumped *f);
BK_API uint64_t bk_bumped_items(const bk_bumped *f);

BK_API bk_filter *bk_bumped_as_filter(bk_bumped *f);
BK_API bk_bumped *bk_filter_as_bumped(bk_filter *f);

/*==========================================================================
 * Static map: a Bloomier filter (Chazelle, Kilian, Rubinfeld & Tal, SODA
 * 2004), built by the static filter's peeling
 *
 * Maps each key of a fixed set to an r-bit value (1 <= r <= 32) in about
 * 1.125 x (r + c) bits per key: each cell holds c check bits and r value
 * bits, and a key's three cells XOR to (its check fingerprint, its value).
 * A key in the map always gets its own value back. Any other key is
 * reported absent unless its c check bits match by chance, probability
 * 2^-c (c = 7: 0.78%, costing 1.125 x 7 = 7.9 bits per key; c = 0: no
 * check, every key gets some value). Duplicate keys with equal values are
 * stored once; with different values construction fails with
 * BK_ECONFLICT and names the key. Lookups are thread-safe.
 *
 * Through the generic handle (family BK_FAMILY_MAP, "map") it is saved,
 * loaded and mapped like a filter; bk_filter_contains is the membership
 * check, bk_filter_add answers BK_ESTATIC.
 *
 * Memory beyond the cells: 128 bytes for a built map (a 56-byte handle
 * and 72 bytes of alignment reserve). The cells are ceil(m (r + c) / 8)
 * bytes plus 8 bytes of padding.
 *==========================================================================*/

typedef struct bk_map bk_map;

/* Largest value and check widths; r + c is at most 56. */
#define BK_MAP_MAX_VALUE_BITS 32
#define BK_MAP_MAX_CHECK_BITS 24

/* Build a map of keys[i] -> values[i] (i < n), values of value_bits bits,
 * with check_bits of non-member check. *conflict (may be NULL) receives,
 * on BK_ECONFLICT, the index of a key that appears twice with different
 * values. Temporary memory bk_map_build_memory(n). Returns BK_OK and *out,
 * BK_EINVAL, BK_EPARAM (widths, or a value too wide for value_bits: then
 * *conflict is its index), BK_ECONFLICT, BK_ESIZE, BK_EBUILD or
 * BK_ENOMEM. O(n) time. */
BK_API int bk_map_build(bk_map **out, const void *const *keys,
                        const size_t *lens, const uint32_t *values,
                        uint64_t n, uint32_t value_bits, uint32_t check_bits,
                        uint64_t seed, uint64_t *conflict);

/* Temporary bytes bk_map_build takes for n keys (~22 per key). */
BK_API uint64_t bk_map_build_memory(uint64_t n);

/* Release a map. Accepts NULL. */
BK_API void bk_map_free(bk_map *m);

/* Look a key up: 1 and *value set when the key passes the check (a member
 * always does), 0 when it is certainly not in the map. Thread-safe. */
BK_API int bk_map_get(const bk_map *m, const void *key, size_t len,
                      uint32_t *value);

/* The same on bk_hash_key(key, len, bk_map_seed(m)). */
BK_API int bk_map_get_hash(const bk_map *m, bk_hash h, uint32_t *value);

/* Batch lookup: found[i] (may be NULL) 1 or 0, values[i] the value when
 * found (0 otherwise). Returns the number found or BK_EINVAL. */
BK_API int64_t bk_map_get_batch(const bk_map *m, const void *const *keys,
                                const size_t *lens, size_t n,
                                uint32_t *values, uint8_t *found);

typedef struct bk_map_stats {
    uint64_t items;           /* distinct keys */
    uint64_t duplicates;      /* repeated (key, value) pairs dropped */
    uint32_t value_bits;      /* r */
    uint32_t check_bits;      /* c */
    uint64_t cells;
    uint32_t segment_length;
    uint64_t seed;
    double fpr;               /* non-member passes the check: 2^-c */
    double bits_per_key;      /* cells x (r + c) / items */
    double value_bits_per_key;/* cells x r / items */
    double check_bits_per_key;/* cells x c / items */
    uint32_t attempts;        /* 0 when loaded */
    uint64_t build_memory;    /* 0 when loaded */
    size_t bytes;
} bk_map_stats;

BK_API int bk_map_get_stats(const bk_map *m, bk_map_stats *out);
BK_API uint64_t bk_map_seed(const bk_map *m);
BK_API uint64_t bk_map_items(const bk_map *m);

BK_API bk_filter *bk_map_as_filter(bk_map *m);
BK_API bk_map *bk_filter_as_map(bk_filter *f);

/*==========================================================================
 * Set reconciliation: invertible Bloom lookup tables and the strata
 * estimator (Goodrich & Mitzenmacher 2011; Eppstein, Goodrich, Uyeda &
 * Varghese, "What's the Difference?", SIGCOMM 2011)
 *
 * Two sites with large sets find what each lacks while sending data in
 * proportion to the difference. Keys travel as 64-bit ids (the low half of
 * XXH3-128 of the key with the session's seed, bk_iblt_key_id); each side
 * maps ids back to its own full keys, of any length, so the tables never
 * hold keys. An IBLT cell holds a count, the XOR of its ids and the XOR of
 * a 32-bit check hash of each id: 16 bytes. Each id goes to one cell in
 * each of k sub-tables. Subtracting B's table from A's (same shape and
 * seed) leaves only the ids in one set and not the other, and peeling
 * "pure" cells (count +-1 whose check matches the id) lists them: count +1
 * = only in A, -1 = only in B. With k = 4 decoding succeeds w.h.p. when
 * the cells are at least ~1.3x the difference; bk_iblt_cells_for() adds
 * margin for the estimate's error.
 *
 * The strata estimator sizes the table: 32 strata, each a small IBLT
 * (80 cells, k = 4); an id goes to stratum = trailing zeros of its mixed
 * hash (stratum i takes 2^-(i+1) of the ids). Subtracting two estimators
 * and decoding from the sparsest stratum down gives the difference size
 * (the first stratum that fails to decode scales the count so far by
 * 2^(i+1)). 40 KB on the wire whatever the set sizes.
 *
 * Two distinct keys with equal ids (probability ~ n^2 / 2^65) look alike
 * to reconciliation. Wire formats are in docs/FORMAT.md. Tables are not
 * thread-safe for writes; decoding only reads.
 *==========================================================================*/

typedef struct bk_iblt bk_iblt;

/* The id of a key for reconciliation under `seed`. */
BK_API uint64_t bk_iblt_key_id(const void *key, size_t len, uint64_t seed);

/* Create an empty table of `cells` cells (rounded up to a multiple of k,
 * at least k) with k = hashes (3 ... 8; 0 means 4). Returns BK_OK,
 * BK_EINVAL, BK_EPARAM, BK_ESIZE (cells above 2^32) or BK_ENOMEM. */
BK_API int bk_iblt_create(bk_iblt **out, uint64_t cells, uint32_t hashes,
                          uint64_t seed);

/* Cells for a difference estimated at d: 2 d + 32, which absorbs the
 * estimator's usual error; callers retry with twice the cells when
 * decoding fails. */
BK_API uint64_t bk_iblt_cells_for(uint64_t d);

BK_API void bk_iblt_free(bk_iblt *t);

/* Insert or delete an id (a key through bk_iblt_key_id). O(k). */
BK_API void bk_iblt_insert(bk_iblt *t, uint64_t id);
BK_API void bk_iblt_delete(bk_iblt *t, uint64_t id);

/* a -= b. Returns BK_OK, BK_EINVAL or BK_EINCOMPAT (cells, k or seed
 * differ). */
BK_API int bk_iblt_subtract(bk_iblt *a, const bk_iblt *b);

/* List the ids of a (subtracted) table: only_a gets those with count +1,
 * only_b those with -1, each of room `cap` (the table's cells always
 * suffice). t is not changed. Returns BK_OK when the table decoded
 * completely, BK_EDECODE when peeling stopped with cells left (the lists
 * hold what was found: the table was too small for the difference),
 * BK_ESIZE (cap too small), BK_EINVAL or BK_ENOMEM. */
BK_API int bk_iblt_decode(const bk_iblt *t, uint64_t *only_a, size_t *n_a,
                          uint64_t *only_b, size_t *n_b, size_t cap);

BK_API uint64_t bk_iblt_cells(const bk_iblt *t);
BK_API uint32_t bk_iblt_hashes(const bk_iblt *t);
BK_API uint64_t bk_iblt_seed(const bk_iblt *t);

/* The table on the wire (docs/FORMAT.md, "Reconciliation messages"):
 * 32-byte header, 16 bytes per cell, 8-byte checksum. deserialize
 * validates everything and copies. */
BK_API size_t bk_iblt_serialized_size(const bk_iblt *t);
BK_API int bk_iblt_serialize(const bk_iblt *t, void *buf, size_t cap);
BK_API int bk_iblt_deserialize(bk_iblt **out, const void *buf, size_t len);

typedef struct bk_strata bk_strata;

#define BK_STRATA_COUNT 32
#define BK_STRATA_CELLS 80

BK_API int bk_strata_create(bk_strata **out, uint64_t seed);
BK_API void bk_strata_free(bk_strata *s);
BK_API void bk_strata_insert(bk_strata *s, uint64_t id);

/* Estimated size of the symmetric difference of the sets behind a and b
 * (same seed, else BK_EINCOMPAT). Returns BK_OK, BK_EINVAL, BK_ENOMEM. */
BK_API int bk_strata_estimate(const bk_strata *a, const bk_strata *b,
                              uint64_t *difference);

BK_API size_t bk_strata_serialized_size(const bk_strata *s);
BK_API int bk_strata_serialize(const bk_strata *s, void *buf, size_t cap);
BK_API int bk_strata_deserialize(bk_strata **out, const void *buf, size_t len);

/* The whole exchange between two sites A and B, simulated in one process
 * with every message serialised and parsed: A sends its strata estimator
 * (strata_bytes), B estimates d and sends an IBLT of bk_iblt_cells_for(d)
 * cells (iblt_bytes; doubled and resent while decoding fails: rounds), A
 * subtracts its own and decodes, then asks B for the keys it lacks by id
 * (request_bytes). What is left to send is the keys themselves: A's
 * only_a keys to B, B's only_b keys to A. */
typedef struct bk_reconcile_stats {
    uint64_t estimate;        /* the strata estimate of |A xor B| */
    uint64_t cells;           /* cells of the table that decoded */
    uint32_t rounds;          /* tables sent */
    size_t strata_bytes;
    size_t iblt_bytes;        /* all rounds */
    size_t request_bytes;     /* 8 per id A asks B for */
} bk_reconcile_stats;

/* Reconcile id sets A and B (each without repeats) under `seed`: only_a
 * (room na) gets the ids in A and not B, only_b (room nb) those in B and
 * not A. stats may be NULL. Returns BK_OK, BK_EINVAL, BK_EDECODE (no table
 * up to cells_for(na + nb) decoded: the ids repeat or collide) or
 * BK_ENOMEM. O(rounds x (na + nb)) time. */
BK_API int bk_reconcile(const uint64_t *ids_a, size_t na,
                        const uint64_t *ids_b, size_t nb, uint64_t seed,
                        uint64_t *only_a, size_t *n_only_a,
                        uint64_t *only_b, size_t *n_only_b,
                        bk_reconcile_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* BLOOMKIT_H */
