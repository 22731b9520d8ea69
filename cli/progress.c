/*
 * progress.c - the progress line on stderr.
 *
 * Shown only when stderr is a terminal and --quiet was not given, so pipes,
 * logs and tests never see it. At most four updates a second, each
 * rewriting the line after '\r':
 *     adding: 1.21 GB of 6.40 GB (19%), ETA 0:41, 19.05 M keys, 4.01 M keys/s
 * The ETA (and the percentage) appear when the input size is known (every
 * input a regular file). finish() prints the final state and a newline.
 */
#include <stdio.h>  /* fprintf */
#include <time.h>   /* clock_gettime */
#include <unistd.h> /* isatty */

#include "cli.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1234567 -> "1.23 M", 532 -> "532" (decimal prefixes, as disk sizes). */
static void human(char *buf, size_t cap, double v)
{
    static const char *const prefixes[] = {"", "k", "M", "G", "T", "P"};
    size_t i = 0;
    while (v >= 1000 && i + 1 < sizeof(prefixes) / sizeof(prefixes[0])) {
        v /= 1000;
        i++;
    }
    if (i == 0) snprintf(buf, cap, "%.0f", v);
    else snprintf(buf, cap, "%.2f %s", v, prefixes[i]);
}

void progress_init(progress *p, const char *what, int quiet)
{
    p->enabled = !quiet && isatty(2);
    p->shown = 0;
    p->what = what;
    p->start = p->last = now_seconds();
}

static void draw(progress *p, double t, uint64_t bytes, uint64_t total,
                 uint64_t keys)
{
    char done[32], all[32], nkeys[32], rate[32], eta[128] = "";
    double elapsed = t - p->start;
    double keys_per_s = elapsed > 0 ? (double)keys / elapsed : 0;
    human(done, sizeof(done), (double)bytes);
    human(nkeys, sizeof(nkeys), (double)keys);
    human(rate, sizeof(rate), keys_per_s);
    if (total > 0 && bytes <= total) {
        human(all, sizeof(all), (double)total);
        double bytes_per_s = elapsed > 0 ? (double)bytes / elapsed : 0;
        unsigned long left = bytes_per_s > 0
            ? (unsigned long)((double)(total - bytes) / bytes_per_s + 0.5) : 0;
        snprintf(eta, sizeof(eta), " of %sB (%.0f%%), ETA %lu:%02lu", all,
                 100.0 * (double)bytes / (double)total, left / 60, left % 60);
    }
    fprintf(stderr, "\r%s: %sB%s, %s keys, %s keys/s\033[K", p->what, done,
            eta, nkeys, rate);
    fflush(stderr);
    p->shown = 1;
}

void progress_update(progress *p, uint64_t bytes, uint64_t total,
                     uint64_t keys)
{
    if (!p->enabled) return;
    double t = now_seconds();
    if (t - p->last < 0.25) return;
    p->last = t;
    draw(p, t, bytes, total, keys);
}

void progress_finish(progress *p, uint64_t bytes, uint64_t total,
                     uint64_t keys)
{
    if (!p->enabled || !p->shown) return;
    draw(p, now_seconds(), bytes, total, keys);
    fputc('\n', stderr);
}
