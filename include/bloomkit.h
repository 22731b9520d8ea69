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
    X(ECOPIES,   -22, "too many copies of one item (cuckoo: at most 2 x bucket size)")

enum bk_error {
#define BK__ERR_ENUM(name, value, text) BK_##name = (value),
    BK_ERRNO_MAP(BK__ERR_ENUM)
#undef BK__ERR_ENUM
    BK__ERR_LAST = -22
};

/* A sentence describing err ("filter is full"). Never NULL; unknown codes
 * give "unknown error". Thread-safe. */
BK_API const char *bk_strerror(int err);

/* The code's name without prefix ("EFULL"), or "UNKNOWN". Thread-safe. */
BK_API const char *bk_errname(int err);

/*==========================================================================
 * Memory
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

/* @@BLOCKED-API@@ (issue 3: cache-blocked filter goes here) */

/* @@DELETABLE-API@@ (issue 4: counting, deletable and cuckoo filters go here) */

#ifdef __cplusplus
}
#endif

#endif /* BLOOMKIT_H */
