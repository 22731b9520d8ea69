/*
 * clock.c - the wall clock of time-window filters in the CLI.
 *
 * The library's window filter takes its time from the caller, in any unit.
 * The CLI's unit is the millisecond of the wall clock (CLOCK_REALTIME,
 * milliseconds since 1970-01-01 UTC), and that clock is what the file
 * records (FORMAT.md, family 7: the latest time seen and each generation's
 * start). So a filter made by `bloomkit create --window 10m` at 12:00
 * forgets a key added at 12:01 between 12:11 and 12:11 plus one slice
 * (10m / (generations - 1)), whichever command, process or machine (with a
 * synchronised clock) looks at it. add and dedup advance the filter to the
 * present before each batch; check asks at the present without writing.
 *
 * --window takes a duration with a unit, ms, s, m, h or d ("10m", "1.5h",
 * "250ms"); with --window-by-count it is a number of insertions instead.
 */
#include <errno.h>  /* errno */
#include <math.h>   /* isfinite */
#include <stdlib.h> /* strtod */
#include <string.h> /* strcmp */
#include <time.h>   /* clock_gettime */

#include "cli.h"

uint64_t cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static const struct {
    const char *unit;
    double ms;
} units[] = {
    {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000},
};

/* The longest duration accepted (a window, a TTL): 100 years, far below
 * where the clock arithmetic (now + g * slice) could overflow 64 bits. */
#define MAX_WINDOW_MS (100.0 * 365.25 * 86400000.0)

int cli_parse_window(const char *cmd, cli_options *o)
{
    const char *s = o->window_arg;
    if (!o->config.window_by_count) return cli_parse_duration(cmd, "window", s, &o->config.window);
    uint64_t n;
    if (cli_parse_u64(s, 0, &n) != 0 || n == 0) {
        cli_error("%s: --window: '%s' is not a number of insertions "
                  "(with --window-by-count, --window N counts adds)",
                  cmd, s);
        return -1;
    }
    o->config.window = n;
    return 0;
}

int cli_parse_duration(const char *cmd, const char *option, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || s[0] == '-' || s[0] == '+' || s[0] == ' ' ||
        !isfinite(v)) {
        cli_error("%s: --%s: '%s' is not a duration (a number and a "
                  "unit: ms, s, m, h or d, e.g. --%s 10m)", cmd, option, s, option);
        return -1;
    }
    if (*end == '\0') {
        int window = strcmp(option, "window") == 0;
        cli_error("%s: --%s: '%s' has no unit (write --%s %ss for "
                  "seconds, or ms, m, h, d%s)", cmd, option, s, option, s,
                  window ? "; with --window-by-count it counts insertions" : "");
        return -1;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].unit) != 0) continue;
        double ms = v * units[i].ms;
        if (!(ms >= 1) || ms > MAX_WINDOW_MS) {
            cli_error("%s: --%s: '%s' is out of range (1ms to 36525d)",
                      cmd, option, s);
            return -1;
        }
        *out = (uint64_t)(ms + 0.5);
        return 0;
    }
    cli_error("%s: --%s: '%s': unknown unit '%s' (ms, s, m, h or d)", cmd,
              option, s, end);
    return -1;
}

/* The time-mode window filter behind f, or NULL. */
static bk_window *time_window(bk_filter *f)
{
    bk_window *w = bk_filter_as_window(f);
    return w != NULL && bk_window_mode(w) == BK_WINDOW_TIME ? w : NULL;
}

int cli_window_create(const bk_filter_config *c, uint32_t slots, bk_filter **out)
{
    if (c->family == BK_FAMILY_TTL) {
        bk_ttl *t;
        int rc = c->generations != 0
                     ? bk_ttl_create(&t, c->capacity, c->fpr, c->window, c->generations,
                                     cli_now_ms(), c->seed)
                     : bk_ttl_create_table(&t, c->capacity, c->fpr, c->window, slots,
                                           cli_now_ms(), c->seed);
        if (rc == BK_OK) *out = bk_ttl_as_filter(t);
        return rc;
    }
    if (c->family != BK_FAMILY_WINDOW || c->window_by_count)
        return bk_filter_create(out, c);
    bk_window *w;
    int rc = bk_window_create(&w, c->capacity, c->fpr, c->window,
                              c->generations, cli_now_ms(), c->seed);
    if (rc == BK_OK) *out = bk_window_as_filter(w);
    return rc;
}

void cli_window_tick(bk_filter *f)
{
    bk_window *w = time_window(f);
    bk_ttl *t = bk_filter_as_ttl(f);
    if (w != NULL) bk_window_advance(w, cli_now_ms());
    if (t != NULL) bk_ttl_advance(t, cli_now_ms());
}

int64_t cli_add_batch(bk_filter *f, const void *const *keys, const size_t *lens, size_t n,
                      uint8_t *results, uint64_t ttl_ms)
{
    bk_ttl *t = bk_filter_as_ttl(f);
    if (t == NULL) return bk_filter_add_batch(f, keys, lens, n, results);
    return bk_ttl_add_batch(t, keys, lens, n, ttl_ms ? ttl_ms : bk_ttl_max_ttl(t), cli_now_ms(),
                            results);
}

int64_t cli_contains_batch(bk_filter *f, const void *const *keys,
                           const size_t *lens, size_t n, uint8_t *results)
{
    bk_ttl *t = bk_filter_as_ttl(f);
    if (t != NULL) return bk_ttl_contains_batch(t, keys, lens, n, cli_now_ms(), results);
    bk_window *w = time_window(f);
    if (w != NULL)
        return bk_window_contains_batch(w, keys, lens, n, cli_now_ms(),
                                        results);
    return bk_filter_contains_batch(f, keys, lens, n, results);
}

int64_t cli_count(bk_filter *f, const void *key, size_t len)
{
    bk_ttl *t = bk_filter_as_ttl(f);
    if (t != NULL) return bk_ttl_contains(t, key, len, cli_now_ms());
    bk_window *w = time_window(f);
    if (w != NULL) return bk_window_contains(w, key, len, cli_now_ms());
    return bk_filter_count(f, key, len);
}
