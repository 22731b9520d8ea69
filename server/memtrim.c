/*
 * memtrim.c - giving freed memory back to the system.
 *
 * glibc's malloc keeps what is freed for reuse. A block freed inside a
 * heap (the main brk heap, or one of the 64 MiB heaps of a worker thread's
 * arena) stays resident until the space above it is free too; and once a
 * block that was mapped on its own (past M_MMAP_THRESHOLD, 128 KiB at
 * first) is freed, glibc raises the threshold to that block's size (up to
 * 32 MiB), so that later blocks of that size come from the heaps and stay
 * resident after free. Measured before this file: a server that had
 * received one 512 MiB request kept 515 MiB resident for good (the log's
 * append buffer), one that had sent a 223 MiB reply kept the reply buffer
 * while the client stayed connected, and FLUSHALL of a million small keys
 * left 256 MiB resident with used_memory at 0 (docs/COMMANDS.md,
 * "Memory given back").
 *
 * What bloomkit-server does about it:
 *
 * - Buffers that grew for one large request or reply are freed once they
 *   are empty: a client's query buffer past QBUF_KEEP at once, its reply
 *   buffers past OUT_KEEP once it has been idle for a second (net.c's
 *   sweep), the log's append buffer past LOG_BUF_KEEP once written
 *   (persist_commit.c). Each such free is reported here
 *   (bks_mem_released); so is a fall of used_memory (keys deleted).
 * - The thresholds are fixed at start (which stops glibc's dynamic ones):
 *   blocks of MMAP_THRESHOLD or more are mapped on their own and unmapped
 *   by free(), as glibc does once its threshold has risen all the way;
 *   free() gives a heap's free top back past TRIM_THRESHOLD (glibc's
 *   dynamic one rises to 64 MiB). Smaller blocks stay in the heaps, where
 *   reuse costs no page faults (on the machine of the numbers below a
 *   fresh 4 MiB costs 14.7 ms of page faults, a reused one 0.12 ms).
 * - Worker 0's 100 ms timer calls bks_mem_tick, which runs malloc_trim(0)
 *   once at least BKS_MEM_BIG bytes were released and RSS is more than
 *   TRIM_SLACK above used_memory and the query buffers: it returns the free
 *   pages inside every arena's heaps (madvise) and the free top of the
 *   main heap. It walks every arena's free lists under the arena's lock:
 *   0.4-2 ms with a million small keys, 12 ms after FLUSHALL of them, but
 *   90-135 ms once deleting every other key has left half a million small
 *   holes (and then it wins nothing). So it never runs on the request
 *   path, not while keys are being deleted (used_memory fell during the
 *   last tick), at most once a second (the next tick after TRIM_SOON bytes
 *   or more), never more than 1% of the time (the next trim waits 100
 *   times as long as the last one took), and, while trims give nothing
 *   back, twice as long each time (up to TRIM_BACKOFF_MAX_MS).
 *
 * INFO memory shows mem_trims and mem_trim_last_usec. Sanitizer builds
 * have their own allocators: mallopt is then ignored, and malloc_trim
 * trims glibc's (unused) heaps.
 */
#include <malloc.h>       /* mallopt, malloc_trim */
#include <stdatomic.h>
#include <stdio.h>        /* /proc/self/statm */
#include <unistd.h>       /* sysconf */

#include "ops.h"          /* bks_ops_clock_us */
#include "server_int.h"

#define MMAP_THRESHOLD (32 << 20)          /* blocks this large are mapped on their own */
#define TRIM_THRESHOLD (16 << 20)          /* free() trims a heap's top past this */
#define TRIM_SLACK ((uint64_t)32 << 20)    /* RSS above the known use that a trim may win */
#define TRIM_SOON ((uint64_t)32 << 20)     /* released bytes that trim at the next tick */
#define TRIM_EVERY_MS 1000                 /* otherwise at most this often */
#define TRIM_BACKOFF_MAX_MS 64000          /* the longest wait after trims that won nothing */

/* Bytes released in big blocks since the last trim (any thread). */
static _Atomic uint64_t g_released;
static _Atomic uint64_t g_trims, g_trim_last_us;

/* Worker 0's timer only. */
static uint64_t used_last;        /* used_memory at the previous tick */
static uint64_t used_mark;        /* used_memory since it last went down */
static uint64_t last_trim_ms, next_trim_ms;
static unsigned futile;           /* trims in a row that gave back less than BKS_MEM_BIG */

void bks_mem_init(void)
{
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD);
}

void bks_mem_released(size_t bytes)
{
    atomic_fetch_add_explicit(&g_released, bytes, memory_order_relaxed);
}

uint64_t bks_mem_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long long size = 0, resident = 0;
    int n = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return n == 2 && page > 0 ? resident * (uint64_t)page : 0;
}

void bks_mem_tick(uint64_t used_memory, uint64_t now_ms)
{
    /* keys deleted: their blocks went back to the heaps */
    int deleting = used_memory + BKS_MEM_BIG <= used_last;
    used_last = used_memory;
    if (used_memory >= used_mark) {
        used_mark = used_memory;
    } else if (used_mark - used_memory >= BKS_MEM_BIG) {
        bks_mem_released(used_mark - used_memory);
        used_mark = used_memory;
    }
    uint64_t released = atomic_load_explicit(&g_released, memory_order_relaxed);
    if (released < BKS_MEM_BIG || deleting || now_ms < next_trim_ms)
        return;
    if (released < TRIM_SOON && now_ms - last_trim_ms < TRIM_EVERY_MS)
        return;
    atomic_fetch_sub_explicit(&g_released, released, memory_order_relaxed);
    uint64_t rss = bks_mem_rss();
    if (rss <= used_memory + bks_net_client_query_bytes() + TRIM_SLACK)
        return;   /* nothing worth a walk of the heaps */

    uint64_t start = bks_ops_clock_us();
    malloc_trim(0);
    uint64_t took_us = bks_ops_clock_us() - start, after = bks_mem_rss();
    atomic_store_explicit(&g_trim_last_us, took_us, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_trims, 1, memory_order_relaxed);

    uint64_t wait_ms = took_us / 10;   /* 100 times as long: at most 1% of the time */
    if (after + BKS_MEM_BIG > rss) {
        if (futile < 6)
            futile++;
        if (wait_ms < (uint64_t)TRIM_EVERY_MS << futile)
            wait_ms = (uint64_t)TRIM_EVERY_MS << futile;
        if (wait_ms > TRIM_BACKOFF_MAX_MS)
            wait_ms = TRIM_BACKOFF_MAX_MS;
    } else {
        futile = 0;
    }
    last_trim_ms = now_ms;
    next_trim_ms = now_ms + wait_ms;
}

uint64_t bks_mem_trims(void) { return atomic_load(&g_trims); }
uint64_t bks_mem_trim_last_us(void) { return atomic_load(&g_trim_last_us); }
