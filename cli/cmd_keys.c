/*
 * cmd_keys.c - the subcommands that stream keys: create (no keys, but the
 * same sizing flags), add, check, remove and dedup.
 *
 * add may run on several threads (-j): each thread takes whole batches from
 * the shared reader (under a mutex) and adds them with bk_filter_add_batch,
 * which the lock-free families (bk_filter_info.lockfree_add) allow from any
 * number of threads. A Bloom filter's bits are the OR of every key's bits,
 * so they do not depend on the order of the adds: the saved bits are
 * identical to a one-thread run. The "items" count is not: it counts adds
 * that found one of their bits clear, which depends on the order (a key
 * whose bits were all set by others counts 0 in one order and 1 in another,
 * and two threads adding the same key at once may both count it). Other
 * families are filled from one thread, whatever -j says.
 */
#include <errno.h>    /* errno, ENOENT */
#include <limits.h>   /* PATH_MAX */
#include <math.h>     /* isfinite */
#include <pthread.h>  /* pthread_create, pthread_mutex_t */
#include <stdlib.h>   /* calloc, free */
#include <string.h>   /* strerror */
#include <sys/stat.h> /* stat */
#include <unistd.h>   /* sysconf */

#include "cli.h"

/*==========================================================================
 * Shared helpers
 *==========================================================================*/

static int create_filter(const char *path, const cli_options *o,
                         bk_filter **out)
{
    int rc = cli_window_create(&o->config, o->slots, out); /* a window's clock: now */
    if (rc == BK_EFPR && o->config.family == BK_FAMILY_GROWABLE && o->config.fpr > 0.0 &&
        o->config.fpr < BK_GROWABLE_MIN_FPR)
        cli_error("%s: cannot create a growable filter: --error %g is below the lowest "
                  "rate its 11-bit fingerprints reach (%g); use --type scalable",
                  path, o->config.fpr, BK_GROWABLE_MIN_FPR);
    else if (rc != BK_OK)
        cli_error("%s: cannot create a %s filter: %s", path,
                  cli_family_name(o->config.family), bk_strerror(rc));
    return rc;
}

/* Print one line followed by the terminator. */
static void put_line(const char *line, size_t len, char term)
{
    fwrite(line, 1, len, stdout);
    putchar(term);
}

/* Whether the family's add answers "certainly new" (1) exactly when the key
 * was absent, so that dedup can use one batched add per key. For the others
 * (a cuckoo filter stores duplicates, a scalable or window filter may
 * answer for one stage) dedup asks contains first and adds only the new. */
static int add_tells_new(bk_family family)
{
    switch (family) {
    case BK_FAMILY_BLOOM:
    case BK_FAMILY_BLOCKED:
    case BK_FAMILY_COUNTING:
    case BK_FAMILY_DELETABLE:
    case BK_FAMILY_TTL: /* 1: found in no live generation */
        return 1;
    default: return 0;
    }
}

/*==========================================================================
 * create
 *==========================================================================*/

int cmd_create(int argc, char **argv)
{
    cli_options o;
    bk_filter *f = NULL;
    int status = CLI_EXIT_ERROR;
    if (cli_parse_options("create", argc, argv, OPTS_SIZING | OPTBIT(OPT_QUIET),
                          &o) != 0)
        goto done;
    if (cli_wants_help(&o, "create")) {
        status = CLI_EXIT_OK;
        goto done;
    }
    if ((o.given & OPTBIT(OPT_TYPE)) &&
        (o.config.family == BK_FAMILY_STATIC || o.config.family == BK_FAMILY_BUMPED)) {
        status = cli_create_static(&o); /* built from keys: cmd_static.c */
        goto done;
    }
    if ((o.given & OPTBIT(OPT_TYPE)) && o.config.family == BK_FAMILY_MAP) {
        cli_error("create: --type map: maps are built from key<TAB>value lines "
                  "(see bloomkit build-map --help)");
        goto done;
    }
    const char *path = cli_one_file("create", &o);
    if (path == NULL) goto done;
    char resolved[PATH_MAX];
    if (cli_check_sizing("create", &o) != 0) goto done;
    if (cli_resolve_target(&path, resolved, sizeof(resolved)) != 0) goto done;
    if (cli_check_target(path) != 0) goto done;
    struct stat st;
    if (!o.force && stat(path, &st) == 0) {
        cli_error("%s: already exists (use --force to replace it)", path);
        goto done;
    }
    if (create_filter(path, &o, &f) != BK_OK) goto done;
    if (cli_save_filter(f, path) != BK_OK) goto done;
    status = CLI_EXIT_OK;
done:
    bk_filter_free(f);
    cli_options_free(&o);
    return status;
}

/*==========================================================================
 * add
 *==========================================================================*/

typedef struct add_job {
    bk_filter *f;
    const char *path;
    key_reader *reader;
    progress prog;
    pthread_mutex_t lock;
    int stop;          /* input exhausted or an error: threads finish */
    int failed;        /* an error was reported */
    uint64_t keys;     /* keys handed to the threads */
    uint64_t ttl_ms;   /* --ttl: a TTL filter's keys live this long */
} add_job;

static void *add_worker(void *arg)
{
    add_job *j = arg;
    key_batch b;
    if (key_batch_init(&b) != 0) {
        pthread_mutex_lock(&j->lock);
        j->stop = j->failed = 1;
        pthread_mutex_unlock(&j->lock);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&j->lock);
        if (j->stop) {
            pthread_mutex_unlock(&j->lock);
            break;
        }
        if (key_reader_fill(j->reader, &b) != 0) j->stop = j->failed = 1;
        else if (b.n == 0) j->stop = 1;
        j->keys += b.n;
        cli_window_tick(j->f); /* windows are not lock-free: one thread */
        progress_update(&j->prog, key_reader_bytes(j->reader),
                        key_reader_total(j->reader), j->keys);
        int stop = j->stop;
        pthread_mutex_unlock(&j->lock);
        if (stop) break;
        int64_t rc = cli_add_batch(j->f, b.keys, b.lens, b.n, NULL, j->ttl_ms);
        if (rc < 0) {
            pthread_mutex_lock(&j->lock);
            if (!j->failed)
                cli_error("%s: cannot add: %s; the file is unchanged", j->path,
                          bk_strerror((int)rc));
            j->stop = j->failed = 1;
            pthread_mutex_unlock(&j->lock);
            break;
        }
    }
    key_batch_free(&b);
    return NULL;
}

static unsigned online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1024 ? 1024 : (unsigned)n;
}

/* After an add: whether f is now past its capacity, or its measured
 * false-positive rate past 1.5 times its target (a Bloom filter at 1.1
 * times its capacity: (1 - 0.5^1.1)^k / 0.5^k = 1.07^k, about 1.5 at the
 * k = 7 of p = 1%; the margin keeps a filter filled to exactly its
 * capacity, whose measured rate wobbles around the target, quiet). If so,
 * say it once, with the rate now, as a warning, or with --strict as the
 * error that stops the save. Returns 1 when the save must not happen. A
 * window filter's items count several windows' generations, so only its
 * rate is compared (the library keeps that within target by rotating
 * early). */
static int over_capacity(const char *path, bk_filter *f, int strict)
{
    bk_filter_info in;
    if (bk_filter_get_info(f, &in) != BK_OK || in.capacity == 0) return 0;
    if (in.family == BK_FAMILY_AUTOCLEAR) return 0; /* it clears instead of filling */
    /* a window's and a TTL filter's items count keys they have let go */
    int items_over = in.family != BK_FAMILY_WINDOW && in.family != BK_FAMILY_TTL &&
                     in.items > in.capacity;
    int rate_over = in.target_fpr > 0 && in.fpr_now > 1.5 * in.target_fpr;
    if (!items_over && !rate_over) return 0;
    char what[200];
    if (items_over)
        snprintf(what, sizeof(what), "%llu items, past its capacity of %llu; "
                 "false-positive rate now %.3g (target %.3g)",
                 (unsigned long long)in.items,
                 (unsigned long long)in.capacity, in.fpr_now, in.target_fpr);
    else
        snprintf(what, sizeof(what), "false-positive rate now %.3g, past its "
                 "target %.3g (%llu items, capacity %llu)", in.fpr_now,
                 in.target_fpr, (unsigned long long)in.items,
                 (unsigned long long)in.capacity);
    if (strict)
        cli_error("%s: %s; nothing written (--strict): create a larger "
                  "filter or use --type scalable", path, what);
    else
        cli_error("%s: warning: %s: create a larger filter or use --type "
                  "scalable (--strict refuses such adds)", path, what);
    return strict;
}

/* --ttl given for a filter that is not a TTL filter, or longer than its
 * max TTL: says so (where: the file, or NULL). */
static int ttl_misplaced(const char *cmd, const char *where, const cli_options *o, bk_filter *f)
{
    if (!(o->given & OPTBIT(OPT_TTL))) return 0;
    bk_ttl *t = bk_filter_as_ttl(f);
    char at[PATH_MAX + 4] = "";
    if (where != NULL) snprintf(at, sizeof(at), " %s:", where);
    if (t == NULL)
        cli_error("%s:%s --ttl applies to a ttl filter (create --type ttl --max-ttl D), "
                  "not %s", cmd, at, cli_family_name(bk_filter_family(f)));
    else if (o->ttl_ms > bk_ttl_max_ttl(t))
        cli_error("%s:%s --ttl %llu ms is longer than the filter's max TTL, %llu ms", cmd, at,
                  (unsigned long long)o->ttl_ms, (unsigned long long)bk_ttl_max_ttl(t));
    else
        return 0;
    return 1;
}

/* Load path, or create it when it is missing and sizing flags were given. */
static int open_or_create(const char *cmd, const char *path,
                          const cli_options *o, bk_filter **f)
{
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT) {
        if (!cli_has_sizing(o)) {
            cli_error("%s: %s (give --capacity and --error to create it)",
                      path, strerror(ENOENT));
            return -1;
        }
        if (cli_check_sizing(cmd, o) != 0) return -1;
        return create_filter(path, o, f) == BK_OK ? 0 : -1;
    }
    return cli_load_filter(path, f) == BK_OK ? 0 : -1;
}

int cmd_add(int argc, char **argv)
{
    cli_options o;
    add_job j;
    memset(&j, 0, sizeof(j));
    pthread_mutex_init(&j.lock, NULL);
    pthread_t *threads = NULL;
    int status = CLI_EXIT_ERROR;
    int lock = -1;
    if (cli_parse_options("add", argc, argv,
                          (OPTS_SIZING & ~OPTBIT(OPT_FORCE)) | OPTS_INPUT |
                              OPTBIT(OPT_JOBS) | OPTBIT(OPT_STRICT) | OPTBIT(OPT_TTL),
                          &o) != 0)
        goto done;
    if (cli_wants_help(&o, "add")) {
        status = CLI_EXIT_OK;
        goto done;
    }
    if (o.nargs < 1) {
        cli_error("add: expected FILE [INPUT...] (see bloomkit add --help)");
        goto done;
    }
    j.path = o.args[0];
    char resolved[PATH_MAX];
    if (cli_resolve_target(&j.path, resolved, sizeof(resolved)) != 0) goto done;
    /* One writer at a time (lock.c): concurrent adds must not lose keys. */
    if (cli_check_target(j.path) != 0) goto done;
    if (cli_lock_file(j.path, &lock) != 0) goto done;
    if (open_or_create("add", j.path, &o, &j.f) != 0) goto done;
    if (ttl_misplaced("add", j.path, &o, j.f)) goto done;
    j.ttl_ms = o.ttl_ms;
    if (key_reader_open(&j.reader, o.args + 1, o.nargs - 1, &o) != 0) goto done;

    bk_filter_info info;
    unsigned nthreads = 1;
    if (bk_filter_get_info(j.f, &info) == BK_OK && info.lockfree_add)
        nthreads = o.jobs == 0 ? online_cpus() : o.jobs;
    progress_init(&j.prog, "adding", o.quiet);
    if (nthreads == 1) {
        bk_filter_set_single_writer(j.f, 1); /* one thread owns it: plain stores */
        add_worker(&j);
    } else {
        threads = calloc(nthreads, sizeof(*threads));
        if (threads == NULL) {
            cli_error("%s", bk_strerror(BK_ENOMEM));
            goto done;
        }
        unsigned started = 0;
        for (; started < nthreads; started++)
            if (pthread_create(&threads[started], NULL, add_worker, &j) != 0)
                break;
        if (started == 0) add_worker(&j); /* no thread at all: do it here */
        for (unsigned i = 0; i < started; i++) pthread_join(threads[i], NULL);
    }
    progress_finish(&j.prog, key_reader_bytes(j.reader),
                    key_reader_total(j.reader), j.keys);
    if (j.failed) goto done;
    if (over_capacity(j.path, j.f, o.strict)) goto done;
    if (cli_save_filter(j.f, j.path) != BK_OK) goto done;
    status = CLI_EXIT_OK;
done:
    free(threads);
    key_reader_free(j.reader);
    bk_filter_free(j.f);
    cli_unlock_file(lock);
    pthread_mutex_destroy(&j.lock);
    cli_options_free(&o);
    return status;
}

/*==========================================================================
 * check
 *==========================================================================*/

int cmd_check(int argc, char **argv)
{
    cli_options o;
    bk_filter *f = NULL;
    key_reader *r = NULL;
    key_batch b = {0};
    int status = CLI_EXIT_ERROR;
    if (cli_parse_options("check", argc, argv,
                          OPTS_INPUT | OPTBIT(OPT_INVERT) | OPTBIT(OPT_COUNT) |
                              OPTBIT(OPT_TOTAL),
                          &o) != 0)
        goto done;
    if (cli_wants_help(&o, "check")) {
        status = CLI_EXIT_OK;
        goto done;
    }
    if (o.nargs < 1) {
        cli_error("check: expected FILE [INPUT...] (see bloomkit check --help)");
        goto done;
    }
    if (o.count && (o.invert || o.total)) {
        cli_error("check: --count cannot be combined with %s",
                  o.invert ? "--invert" : "--total");
        goto done;
    }
    if (cli_open_readonly(o.args[0], &f, 0) != BK_OK) goto done;
    if (key_reader_open(&r, o.args + 1, o.nargs - 1, &o) != 0) goto done;
    if (key_batch_init(&b) != 0) goto done;
    char term = o.nul ? '\0' : '\n';
    progress prog;
    progress_init(&prog, "checking", o.quiet);
    uint64_t selected = 0, keys = 0;
    for (;;) {
        if (key_reader_fill(r, &b) != 0) goto done;
        if (b.n == 0) break;
        keys += b.n;
        if (o.count) {
            for (size_t i = 0; i < b.n; i++) {
                int64_t c = cli_count(f, b.keys[i], b.lens[i]);
                if (c < 0) {
                    cli_error("%s: %s", o.args[0], bk_strerror((int)c));
                    goto done;
                }
                selected += c > 0;
                printf("%lld\t", (long long)c);
                put_line(b.lines[i], b.line_lens[i], term);
            }
        } else {
            int64_t found = cli_contains_batch(f, b.keys, b.lens, b.n,
                                               b.results);
            if (found < 0) {
                cli_error("%s: %s", o.args[0], bk_strerror((int)found));
                goto done;
            }
            for (size_t i = 0; i < b.n; i++) {
                if (b.results[i] == (o.invert ? 0 : 1)) {
                    selected++;
                    if (!o.total) put_line(b.lines[i], b.line_lens[i], term);
                }
            }
        }
        fflush(stdout);
        progress_update(&prog, key_reader_bytes(r), key_reader_total(r), keys);
    }
    progress_finish(&prog, key_reader_bytes(r), key_reader_total(r), keys);
    if (o.total) printf("%llu\n", (unsigned long long)selected);
    status = selected > 0 ? CLI_EXIT_OK : CLI_EXIT_NONE;
done:
    key_batch_free(&b);
    key_reader_free(r);
    bk_filter_free(f);
    cli_options_free(&o);
    return status;
}

/*==========================================================================
 * remove
 *==========================================================================*/

int cmd_remove(int argc, char **argv)
{
    cli_options o;
    bk_filter *f = NULL;
    key_reader *r = NULL;
    key_batch b = {0};
    int status = CLI_EXIT_ERROR;
    int lock = -1;
    if (cli_parse_options("remove", argc, argv, OPTS_INPUT, &o) != 0) goto done;
    if (cli_wants_help(&o, "remove")) {
        status = CLI_EXIT_OK;
        goto done;
    }
    if (o.nargs < 1) {
        cli_error("remove: expected FILE [INPUT...] (see bloomkit remove --help)");
        goto done;
    }
    const char *path = o.args[0];
    char resolved[PATH_MAX];
    if (cli_resolve_target(&path, resolved, sizeof(resolved)) != 0) goto done;
    if (cli_check_target(path) != 0) goto done;
    if (cli_lock_file(path, &lock) != 0) goto done;
    if (cli_load_filter(path, &f) != BK_OK) goto done;
    bk_filter_info info;
    if (bk_filter_get_info(f, &info) != BK_OK || !info.can_remove) {
        cli_error("%s: cannot remove keys from a %s filter (use --type "
                  "counting, deletable, cuckoo, dleft, varcount, hier or "
                  "hybrid)", path,
                  cli_family_name(bk_filter_family(f)));
        goto done;
    }
    if (key_reader_open(&r, o.args + 1, o.nargs - 1, &o) != 0) goto done;
    if (key_batch_init(&b) != 0) goto done;
    progress prog;
    progress_init(&prog, "removing", o.quiet);
    uint64_t keys = 0, absent = 0, stuck = 0;
    for (;;) {
        if (key_reader_fill(r, &b) != 0) goto done;
        if (b.n == 0) break;
        keys += b.n;
        for (size_t i = 0; i < b.n; i++) {
            int rc = bk_filter_remove(f, b.keys[i], b.lens[i]);
            if (rc == BK_ENOTFOUND) absent++;
            else if (rc == BK_ENOTSUP) stuck++;
            else if (rc != BK_OK) {
                cli_error("%s: cannot remove: %s; the file is unchanged", path,
                          bk_strerror(rc));
                goto done;
            }
        }
        progress_update(&prog, key_reader_bytes(r), key_reader_total(r), keys);
    }
    progress_finish(&prog, key_reader_bytes(r), key_reader_total(r), keys);
    if (cli_save_filter(f, path) != BK_OK) goto done;
    status = CLI_EXIT_OK;
    if (absent > 0) {
        cli_error("%s: %llu of %llu keys were not in the filter", path,
                  (unsigned long long)absent, (unsigned long long)keys);
        status = CLI_EXIT_NONE;
    }
    if (stuck > 0) {
        cli_error("%s: %llu of %llu keys cannot be removed (their bits are "
                  "shared with other keys)", path, (unsigned long long)stuck,
                  (unsigned long long)keys);
        status = CLI_EXIT_NONE;
    }
done:
    key_batch_free(&b);
    key_reader_free(r);
    bk_filter_free(f);
    cli_unlock_file(lock);
    cli_options_free(&o);
    return status;
}

/*==========================================================================
 * dedup
 *==========================================================================*/

int cmd_dedup(int argc, char **argv)
{
    cli_options o;
    bk_filter *f = NULL;
    key_reader *r = NULL;
    key_batch b = {0};
    int status = CLI_EXIT_ERROR;
    uint64_t allowed = (OPTS_SIZING & ~OPTBIT(OPT_FORCE)) | OPTS_INPUT |
                       OPTBIT(OPT_SAVE) | OPTBIT(OPT_TTL);
    if (cli_parse_options("dedup", argc, argv, allowed, &o) != 0) goto done;
    if (cli_wants_help(&o, "dedup")) {
        status = CLI_EXIT_OK;
        goto done;
    }
    if (cli_check_sizing("dedup", &o) != 0) goto done;
    char resolved[PATH_MAX];
    if (o.save != NULL && cli_resolve_target(&o.save, resolved, sizeof(resolved)) != 0)
        goto done;
    if (o.save != NULL && cli_check_target(o.save) != 0) goto done;
    if (create_filter(o.save ? o.save : "dedup", &o, &f) != BK_OK) goto done;
    if (ttl_misplaced("dedup", NULL, &o, f)) goto done;
    bk_filter_set_single_writer(f, 1); /* one thread owns it: plain stores */
    if (key_reader_open(&r, o.args, o.nargs, &o) != 0) goto done;
    if (key_batch_init(&b) != 0) goto done;
    char term = o.nul ? '\0' : '\n';
    int batched = add_tells_new(o.config.family);
    progress prog;
    progress_init(&prog, "dedup", o.quiet);
    uint64_t keys = 0;
    for (;;) {
        if (key_reader_fill(r, &b) != 0) goto done;
        if (b.n == 0) break;
        keys += b.n;
        cli_window_tick(f);
        int64_t rc = 0;
        if (batched) {
            rc = cli_add_batch(f, b.keys, b.lens, b.n, b.results, o.ttl_ms);
        } else {
            for (size_t i = 0; i < b.n && rc >= 0; i++) {
                b.results[i] = 0;
                if (bk_filter_contains(f, b.keys[i], b.lens[i])) continue;
                rc = bk_filter_add(f, b.keys[i], b.lens[i]);
                b.results[i] = 1;
            }
        }
        if (rc < 0) {
            cli_error("dedup: cannot add: %s (raise --capacity)",
                      bk_strerror((int)rc));
            goto done;
        }
        for (size_t i = 0; i < b.n; i++)
            if (b.results[i] == 1) put_line(b.lines[i], b.line_lens[i], term);
        fflush(stdout);
        progress_update(&prog, key_reader_bytes(r), key_reader_total(r), keys);
    }
    progress_finish(&prog, key_reader_bytes(r), key_reader_total(r), keys);
    bk_filter_info info;
    if (bk_filter_get_info(f, &info) == BK_OK && info.capacity > 0 &&
        !(info.estimated_items <= 1.1 * (double)info.capacity)) {
        char about[64] = "far more";
        if (isfinite(info.estimated_items))
            snprintf(about, sizeof(about), "about %.0f",
                     info.estimated_items);
        cli_error("dedup: warning: %s distinct keys, more than --capacity "
                  "%llu: some new keys were probably dropped as duplicates",
                  about, (unsigned long long)info.capacity);
    }
    if (o.save != NULL && cli_save_filter(f, o.save) != BK_OK) goto done;
    status = CLI_EXIT_OK;
done:
    key_batch_free(&b);
    key_reader_free(r);
    bk_filter_free(f);
    cli_options_free(&o);
    return status;
}
