/*
 * common.c - version, error strings and the allocator hook.
 *
 * Errors are one X-macro list in bloomkit.h (BK_ERRNO_MAP, after libuv's
 * UV_ERRNO_MAP); this file expands it into the two lookup functions.
 *
 * The allocator is a process-wide table of three function pointers. Aligned
 * allocations are built on top of it because replacement allocators (Redis's
 * RedisModule_Alloc among them) offer no alignment guarantee beyond malloc's.
 */
#include <stdlib.h> /* malloc, calloc, free */
#include <sys/mman.h> /* madvise */

#include "internal.h"

/*==========================================================================
 * CPU features (internal.h)
 *==========================================================================*/

int bk__cpu_bits = -1;

int bk__cpu_find(void)
{
    int v = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    v |= __builtin_cpu_supports("avx512f") ? BK_CPU_AVX512F : 0;
    v |= __builtin_cpu_supports("avx512bw") ? BK_CPU_AVX512BW : 0;
    v |= __builtin_cpu_supports("avx512vl") ? BK_CPU_AVX512VL : 0;
    v |= __builtin_cpu_supports("avx512vpopcntdq") ? BK_CPU_AVX512VPOPCNTDQ : 0;
    v |= __builtin_cpu_supports("bmi2") ? BK_CPU_BMI2 : 0;
#endif
    __atomic_store_n(&bk__cpu_bits, v, __ATOMIC_RELAXED);
    return v;
}

/*==========================================================================
 * Version
 *==========================================================================*/

#define BK__STR2(x) #x
#define BK__STR(x) BK__STR2(x)

const char *bk_version_string(void)
{
    return BK__STR(BK_VERSION_MAJOR) "." BK__STR(BK_VERSION_MINOR) "."
           BK__STR(BK_VERSION_PATCH);
}

unsigned bk_version_number(void)
{
    return BK_VERSION_NUMBER;
}

/*==========================================================================
 * Errors
 *==========================================================================*/

const char *bk_strerror(int err)
{
    switch (err) {
#define BK__ERR_TEXT(name, value, text) case BK_##name: return text;
        BK_ERRNO_MAP(BK__ERR_TEXT)
#undef BK__ERR_TEXT
    default: return "unknown error";
    }
}

const char *bk_errname(int err)
{
    switch (err) {
#define BK__ERR_NAME(name, value, text) case BK_##name: return #name;
        BK_ERRNO_MAP(BK__ERR_NAME)
#undef BK__ERR_NAME
    default: return "UNKNOWN";
    }
}

/*==========================================================================
 * Allocator
 *==========================================================================*/

static void *default_malloc(void *opaque, size_t size)
{
    (void)opaque;
    return malloc(size);
}

static void *default_calloc(void *opaque, size_t count, size_t size)
{
    (void)opaque;
    return calloc(count, size);
}

static void default_free(void *opaque, void *ptr)
{
    (void)opaque;
    free(ptr);
}

static bk_allocator allocator = {default_malloc, default_calloc, default_free,
                                 NULL};

void bk_set_allocator(const bk_allocator *a)
{
    if (a == NULL || a->malloc_fn == NULL || a->calloc_fn == NULL ||
        a->free_fn == NULL) {
        allocator.malloc_fn = default_malloc;
        allocator.calloc_fn = default_calloc;
        allocator.free_fn = default_free;
        allocator.opaque = NULL;
        return;
    }
    allocator = *a;
}

void *bk__malloc(size_t size)
{
    return allocator.malloc_fn(allocator.opaque, size ? size : 1);
}

void *bk__calloc(size_t count, size_t size)
{
    if (count == 0 || size == 0) count = size = 1;
    return allocator.calloc_fn(allocator.opaque, count, size);
}

void bk__free(void *ptr)
{
    if (ptr != NULL) allocator.free_fn(allocator.opaque, ptr);
}

void bk__advise_huge(void *p, size_t len)
{
#if defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (p == NULL || len < 2 * huge) return;
    uintptr_t start = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t end = ((uintptr_t)p + len) & ~(huge - 1);
    if (end > start) madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)p;
    (void)len;
#endif
}

void *bk__calloc_aligned(size_t size)
{
    size_t total;
    /* room for the padding (up to 63 bytes, whatever the hook's alignment)
     * and the raw pointer kept below the aligned block */
    if (__builtin_add_overflow(size, (size_t)BK_CACHE_LINE + sizeof(void *),
                               &total))
        return NULL;
    /* calloc, not malloc + memset: for large sizes the C library maps fresh
     * zero pages and the filter costs memory only as it fills. */
    unsigned char *raw = bk__calloc(1, total);
    if (raw == NULL) return NULL;
    uintptr_t addr = (uintptr_t)raw + sizeof(void *);
    addr = (addr + BK_CACHE_LINE - 1) & ~(uintptr_t)(BK_CACHE_LINE - 1);
    void **slot = (void **)addr - 1; /* at least sizeof(void*) above raw */
    *slot = raw;
    bk__advise_huge((void *)addr, size);
    return (void *)addr;
}

void bk__free_aligned(void *ptr)
{
    if (ptr == NULL) return;
    bk__free(((void **)ptr)[-1]);
}
