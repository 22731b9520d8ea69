/*
 * bench_fork.c - what a fork (a background snapshot) costs the writers of a
 * large filter: random writes by 1 and by 2 threads over one large
 * allocation, before a fork, while the child lives (copy-on-write) and after
 * it has exited; then the same with BF adds into a bloomkit filter of that
 * size. No peer: the floor is the "before" row of each.
 *
 * Usage: bench_fork [--mib N] [--child-s S]
 *   --mib N      size of the allocation / the filter's bits, MiB (1200)
 *   --child-s S  seconds the child lives (3)
 *
 * Each row is the rate over 2 s. bloomkit-server snapshots by fork; this
 * isolates what the kernel does to the parent's writers around it.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bloomkit.h"

typedef struct job {
    uint64_t *words;     /* raw mode: the allocation */
    size_t nwords;
    bk_filter *filter;   /* filter mode */
    int id;
    _Atomic int *stop;
    _Atomic uint64_t done;
} job;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void *writer(void *arg)
{
    job *j = arg;
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(j->id + 1);
    char keys[100][24];
    const void *kp[100];
    size_t kl[100];
    while (!*j->stop) {
        if (j->filter == NULL) {
            for (int i = 0; i < 1000; i++)
                __atomic_fetch_or(&j->words[next(&x) % j->nwords], 1, __ATOMIC_RELAXED);
            j->done += 1000;
        } else {
            for (int i = 0; i < 100; i++) {
                kl[i] = (size_t)snprintf(keys[i], sizeof(keys[i]), "%llu",
                                         (unsigned long long)next(&x));
                kp[i] = keys[i];
            }
            bk_filter_add_batch(j->filter, kp, kl, 100, NULL);
            j->done += 100;
        }
    }
    return NULL;
}

static uint64_t total(job *jobs, int n)
{
    uint64_t t = 0;
    for (int i = 0; i < n; i++) t += jobs[i].done;
    return t;
}

static double rate(job *jobs, int n)
{
    uint64_t a = total(jobs, n);
    double t = now_s();
    sleep(2);
    return (double)(total(jobs, n) - a) / (now_s() - t);
}

/* One run: n threads on words or filter; the rates before, during, after. */
static void run(const char *what, int n, uint64_t *words, size_t nwords, bk_filter *filter,
                unsigned child_s)
{
    _Atomic int stop = 0;
    job jobs[2];
    pthread_t t[2];
    for (int i = 0; i < n; i++) {
        jobs[i] = (job){words, nwords, filter, i, &stop, 0};
        pthread_create(&t[i], NULL, writer, &jobs[i]);
    }
    double before = rate(jobs, n);
    pid_t child = fork();
    if (child == 0) {
        sleep(child_s);
        _exit(0);
    }
    double during = rate(jobs, n);
    waitpid(child, NULL, 0);
    double after = rate(jobs, n), after2 = rate(jobs, n), after3 = rate(jobs, n);
    stop = 1;
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    printf("| %-26s | %d | %12.0f | %12.0f | %12.0f | %12.0f | %12.0f |\n", what, n, before,
           during, after, after2, after3);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    size_t mib = 1200;
    unsigned child_s = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc) mib = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--child-s") == 0 && i + 1 < argc)
            child_s = (unsigned)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_fork [--mib N] [--child-s S]\n");
            return 2;
        }
    }
    size_t bytes = mib << 20;
    printf("bench_fork: %zu MiB, child lives %u s; rates per second over 2 s\n\n", mib, child_s);
    printf("| %-26s | threads | %12s | %12s | %12s | %12s | %12s |\n", "writes", "before fork",
           "child alive", "after exit", "+2 s", "+4 s");
    printf("|---|---:|---:|---:|---:|---:|---:|\n");
    for (int n = 1; n <= 2; n++) {
        uint64_t *w = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (w == MAP_FAILED) return 1;
        memset(w, 1, bytes);
        run("random 8-byte atomic ORs", n, w, bytes / 8, NULL, child_s);
        munmap(w, bytes);
    }
    for (int n = 1; n <= 2; n++) {
        bk_filter_config c;
        bk_filter_config_init(&c);
        c.family = BK_FAMILY_SCALABLE;
        c.nonscaling = 1;
        c.fpr = 0.01;
        c.capacity = (uint64_t)bytes * 8 / 10;   /* about 9.6 bits a key at 1% */
        bk_filter *f;
        if (bk_filter_create(&f, &c) != BK_OK) return 1;
        run("BF adds (scalable, 1%)", n, NULL, 0, f, child_s);
        bk_filter_free(f);
    }
    return 0;
}
