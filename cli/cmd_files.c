/*
 * cmd_files.c - the subcommands on whole filter files: info, merge and
 * intersect.
 */
#include <limits.h>   /* PATH_MAX */
#include <math.h>     /* isfinite */
#include <stdlib.h>   /* strtod */
#include <string.h>   /* strcmp */
#include <sys/stat.h> /* stat */

#include "cli.h"

/*==========================================================================
 * info
 *==========================================================================*/

/* A family's own parameters, beyond bk_filter_info, where the header gives
 * a way to read them. */
typedef struct param {
    const char *name;   /* JSON key */
    const char *label;  /* human label */
    uint64_t value;
} param;

static size_t family_params(bk_filter *f, param *out)
{
    size_t n = 0;
    bk_bloom *bloom = bk_filter_as_bloom(f);
    if (bloom != NULL) {
        out[n++] = (param){"bits", "bits", bk_bloom_bits(bloom)};
        out[n++] = (param){"hashes", "hashes", bk_bloom_hashes(bloom)};
    }
    bk_blocked *blocked = bk_filter_as_blocked(f);
    if (blocked != NULL) {
        out[n++] = (param){"bits", "bits", bk_blocked_bits(blocked)};
        out[n++] = (param){"blocks", "blocks", bk_blocked_blocks(blocked)};
        out[n++] = (param){"hashes", "hashes", bk_blocked_hashes(blocked)};
        /* only shown for the split layout (create --split) */
        if (bk_blocked_split(blocked)) out[n++] = (param){"split", "split layout", 1};
    }
    bk_autoclear *ac = bk_filter_as_autoclear(f);
    if (ac != NULL) { /* the ratio in thousandths, as params are integers */
        bk_autoclear_stats st;
        bk_autoclear_get_stats(ac, &st);
        out[n++] = (param){"auto_clear_permille", "auto-clear/1000",
                           (uint64_t)(st.ratio * 1000 + 0.5)};
        out[n++] = (param){"rotate", "rotate", (uint64_t)st.mode};
        out[n++] = (param){"clears", "clears", st.clears};
        out[n++] = (param){"units_set", "units set", st.units_set};
        out[n++] = (param){"clear_at", "clears at", st.clear_at};
    }
    bk_ttl *ttl = bk_filter_as_ttl(f);
    if (ttl != NULL) { /* the CLI's clock: wall-clock milliseconds (clock.c) */
        out[n++] = (param){"max_ttl_ms", "max TTL (ms)", bk_ttl_max_ttl(ttl)};
        out[n++] = (param){"granularity_ms", "granularity (ms)", bk_ttl_granularity(ttl)};
        out[n++] = (param){"table_layout", "table layout",
                           bk_ttl_layout(ttl) == BK_TTL_LAYOUT_TABLE};
        out[n++] = (param){"generations", "generations", bk_ttl_generations(ttl)};
        out[n++] = (param){"clock_ms", "clock (ms)", bk_ttl_now(ttl)};
    }
    bk_window *window = bk_filter_as_window(f);
    if (window != NULL) {
        /* time mode: wall-clock milliseconds (clock.c); count mode: adds */
        int by_time = bk_window_mode(window) == BK_WINDOW_TIME;
        out[n++] = (param){by_time ? "window_ms" : "window_adds",
                           by_time ? "window (ms)" : "window (adds)",
                           bk_window_window(window)};
        out[n++] = (param){"generations", "generations",
                           bk_window_generations(window)};
        out[n++] = (param){by_time ? "clock_ms" : "clock_adds",
                           by_time ? "clock (ms)" : "clock (adds)",
                           bk_window_now(window)};
    }
    return n;
}

/* The shortest "%.Ng" that reads back as the same double. */
static void fmt_double(char *buf, size_t cap, double v)
{
    if (!isfinite(v)) { /* JSON has no infinity: a saturated filter */
        snprintf(buf, cap, "null");
        return;
    }
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, cap, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) return;
    }
}

static void json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

int cmd_info(int argc, char **argv)
{
    cli_options o;
    bk_filter *f = NULL;
    int status = CLI_EXIT_ERROR;
    if (cli_parse_options("info", argc, argv, OPTBIT(OPT_JSON), &o) != 0)
        goto done;
    if (cli_wants_help(&o, "info")) {
        status = CLI_EXIT_OK;
        goto done;
    }
    const char *path = cli_one_file("info", &o);
    if (path == NULL) goto done;
    if (cli_open_readonly(path, &f, 1) != BK_OK) goto done;
    bk_filter_info in;
    int rc = bk_filter_get_info(f, &in);
    if (rc != BK_OK) {
        cli_error("%s: %s", path, bk_strerror(rc));
        goto done;
    }
    struct stat st;
    unsigned long long file_bytes = stat(path, &st) == 0 ? (unsigned long long)st.st_size : 0;
    param params[8];
    size_t nparams = family_params(f, params);
    const char *type = cli_family_name(in.family);
    if (o.json) {
        char fpr[32], est[32], fill[32], now[32], atcap[32];
        fmt_double(fpr, sizeof(fpr), in.target_fpr);
        fmt_double(est, sizeof(est), in.estimated_items);
        fmt_double(fill, sizeof(fill), in.fill);
        fmt_double(now, sizeof(now), in.fpr_now);
        fmt_double(atcap, sizeof(atcap), in.fpr_at_capacity);
        printf("{\"file\": ");
        json_string(path);
        printf(", \"type\": \"%s\"", type);
        for (size_t i = 0; i < nparams; i++)
            printf(", \"%s\": %llu", params[i].name,
                   (unsigned long long)params[i].value);
        printf(", \"capacity\": %llu, \"target_fpr\": %s, \"items\": %llu, "
               "\"estimated_items\": %s, \"fill\": %s, \"fpr_now\": %s, "
               "\"fpr_at_capacity\": %s, \"bytes\": %llu, \"file_bytes\": %llu, "
               "\"parts\": %u, \"seed\": \"0x%016llx\", \"can_remove\": %s, "
               "\"lockfree_add\": %s}\n",
               (unsigned long long)in.capacity, fpr,
               (unsigned long long)in.items, est, fill, now, atcap,
               (unsigned long long)in.bytes, file_bytes, in.parts,
               (unsigned long long)in.seed, in.can_remove ? "true" : "false",
               in.lockfree_add ? "true" : "false");
    } else {
        char label[64];
        printf("%-19s%s\n", "file:", path);
        printf("%-19s%s\n", "type:", type);
        for (size_t i = 0; i < nparams; i++) {
            snprintf(label, sizeof(label), "%s:", params[i].label);
            printf("%-19s%llu\n", label, (unsigned long long)params[i].value);
        }
        if (in.capacity > 0) {
            printf("%-19s%llu items\n", "capacity:",
                   (unsigned long long)in.capacity);
            printf("%-19s%.3g\n", "target error:", in.target_fpr);
        } else {
            printf("%-19s%s\n", "capacity:", "unknown");
        }
        printf("%-19s%llu\n", "items:", (unsigned long long)in.items);
        if (isfinite(in.estimated_items))
            printf("%-19s%.0f\n", "estimated items:", in.estimated_items);
        else
            printf("%-19s%s\n", "estimated items:", "unknown (saturated)");
        printf("%-19s%.2f%%\n", "fill:", 100.0 * in.fill);
        printf("%-19s%.3g\n", "error now:", in.fpr_now);
        if (in.capacity > 0)
            printf("%-19s%.3g\n", "error at capacity:", in.fpr_at_capacity);
        printf("%-19s%llu bytes\n", "memory:", (unsigned long long)in.bytes);
        printf("%-19s%llu bytes\n", "file size:", file_bytes);
        if (in.parts != 1) printf("%-19s%u\n", "parts:", in.parts);
        printf("%-19s0x%016llx\n", "seed:", (unsigned long long)in.seed);
        printf("%-19s%s\n", "removes keys:", in.can_remove ? "yes" : "no");
    }
    status = CLI_EXIT_OK;
done:
    bk_filter_free(f);
    cli_options_free(&o);
    return status;
}

/*==========================================================================
 * merge, intersect
 *==========================================================================*/

static int combine(const char *cmd, int argc, char **argv, int intersect)
{
    cli_options o;
    bk_filter *acc = NULL, *next = NULL;
    int status = CLI_EXIT_ERROR;
    int lock = -1;
    if (cli_parse_options(cmd, argc, argv, 0, &o) != 0) goto done;
    if (cli_wants_help(&o, cmd)) {
        status = CLI_EXIT_OK;
        goto done;
    }
    if (o.nargs < 2) {
        cli_error("%s: expected OUT IN... (see bloomkit %s --help)", cmd, cmd);
        goto done;
    }
    const char *out = o.args[0], *first = o.args[1];
    char resolved[PATH_MAX];
    if (cli_resolve_target(&out, resolved, sizeof(resolved)) != 0) goto done;
    if (cli_check_target(out) != 0) goto done;
    /* OUT may be an input, or the file of a concurrent add: one writer. */
    if (cli_lock_file(out, &lock) != 0) goto done;
    if (cli_load_filter(first, &acc) != BK_OK) goto done;
    for (size_t i = 2; i < o.nargs; i++) {
        const char *path = o.args[i];
        if (cli_load_filter(path, &next) != BK_OK) goto done;
        char why[256];
        bk_family fa = bk_filter_family(next), fb = bk_filter_family(acc);
        if (fa != fb)
            snprintf(why, sizeof(why), "types differ: %s vs %s",
                     cli_family_name(fa), cli_family_name(fb));
        else if (!bk_filter_incompatibility(next, acc, why, sizeof(why)))
            why[0] = '\0';
        if (why[0] != '\0') {
            cli_error("%s: cannot %s with %s: %s", path, cmd, first, why);
            goto done;
        }
        int rc = intersect ? bk_filter_intersect(acc, next)
                           : bk_filter_merge(acc, next);
        if (rc != BK_OK) {
            cli_error("%s: cannot %s with %s: %s", path, cmd, first,
                      bk_strerror(rc));
            goto done;
        }
        bk_filter_free(next);
        next = NULL;
    }
    if (cli_save_filter(acc, out) != BK_OK) goto done;
    status = CLI_EXIT_OK;
done:
    bk_filter_free(next);
    bk_filter_free(acc);
    cli_unlock_file(lock);
    cli_options_free(&o);
    return status;
}

int cmd_merge(int argc, char **argv) { return combine("merge", argc, argv, 0); }

int cmd_intersect(int argc, char **argv)
{
    return combine("intersect", argc, argv, 1);
}
