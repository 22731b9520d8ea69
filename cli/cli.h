/*
 * cli.h - shared pieces of the bloomkit command: options, messages, the key
 * reader and the progress line. The command uses only include/bloomkit.h.
 */
#ifndef BLOOMKIT_CLI_H
#define BLOOMKIT_CLI_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* FILE */
#include <sys/types.h> /* ssize_t */

#include "bloomkit.h"

/* Exit status, as grep's: check uses 1 for "no key matched". */
#define CLI_EXIT_OK 0
#define CLI_EXIT_NONE 1
#define CLI_EXIT_ERROR 2

/*==========================================================================
 * Messages (main.c)
 *==========================================================================*/

/* "bloomkit: " + formatted message + newline, on stderr. */
void cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* The CLI's name of a family: "classic" for BK_FAMILY_BLOOM, else the
 * library's name; "unknown" for anything else. */
const char *cli_family_name(bk_family family);

/* Load the filter at path into memory, reporting any failure as
 * "bloomkit: PATH: problem". Returns BK_OK or the error. */
int cli_load_filter(const char *path, bk_filter **out);

/* Open a filter file for lookups only: mapped read-only (BK_MAP_VERIFY
 * when verify: the payload checksum too), or loaded when the path is not a
 * regular file or its family cannot be mapped. Reports failure like
 * cli_load_filter. Returns BK_OK or the error. (open.c) */
int cli_open_readonly(const char *path, bk_filter **out, int verify);

/* Print why loading path failed with rc ("not a bloomkit filter file" for
 * a file without the magic, whatever rc said). (open.c) */
void cli_report_load_error(const char *path, int rc, int saved_errno);

/* Save atomically, reporting failure. Returns BK_OK or the error. */
int cli_save_filter(const bk_filter *f, const char *path);

/*==========================================================================
 * Locks and targets (lock.c)
 *==========================================================================*/

/* 0 when path is missing, a regular file or a directory; -1 after printing
 * "PATH: is a character device, not a regular file: refusing to replace
 * it" for anything else a save would replace. */
int cli_check_target(const char *path);

/* A write to *path that is a symbolic link goes to the file it points to:
 * *path then points at buf (cap bytes) holding that file's path. 0, or -1
 * after an error (a link to nothing, one that cannot be resolved). Call
 * before cli_check_target and cli_lock_file. */
int cli_resolve_target(const char **path, char *buf, size_t cap);

/* Take an exclusive lock for a read-modify-write of path (the file, or its
 * directory while the file does not exist), held until cli_unlock_file.
 * Returns 0 with *fd the lock (-1: none could be taken, the command goes on
 * unlocked; a warning was printed when locks are unsupported), or -1 after
 * printing the problem. */
int cli_lock_file(const char *path, int *fd);
void cli_unlock_file(int fd);

/*==========================================================================
 * Options (options.c)
 *==========================================================================*/

enum cli_opt {
    OPT_HELP, OPT_QUIET, OPT_CAPACITY, OPT_ERROR, OPT_TYPE, OPT_SEED,
    OPT_COUNTER_BITS, OPT_REGIONS, OPT_BUCKET_SIZE, OPT_FINGERPRINT_BITS,
    OPT_MAX_KICKS, OPT_EXPANSION, OPT_NONSCALING, OPT_WINDOW,
    OPT_GENERATIONS, OPT_WINDOW_BY_COUNT, OPT_NUL, OPT_FIELD, OPT_DELIMITER,
    OPT_SKIP_EMPTY, OPT_JOBS, OPT_INVERT, OPT_COUNT, OPT_TOTAL, OPT_JSON,
    OPT_FORCE, OPT_SAVE, OPT_NODES, OPT_SHARDS, OPT_CLUSTER_TYPE,
    OPT_STRICT, OPT_NO_DECOMPRESS, OPT_SPLIT, OPT_AUTO_CLEAR, OPT_ROTATE,
    OPT_MAX_TTL, OPT_TTL, OPT_SLOTS,
    OPT__COUNT
};

#define OPTBIT(o) (UINT64_C(1) << (o))
/* The sizing flags of create, add and dedup. */
#define OPTS_SIZING                                                            \
    (OPTBIT(OPT_CAPACITY) | OPTBIT(OPT_ERROR) | OPTBIT(OPT_TYPE) |             \
     OPTBIT(OPT_SEED) | OPTBIT(OPT_COUNTER_BITS) | OPTBIT(OPT_REGIONS) |       \
     OPTBIT(OPT_BUCKET_SIZE) | OPTBIT(OPT_FINGERPRINT_BITS) |                  \
     OPTBIT(OPT_MAX_KICKS) | OPTBIT(OPT_EXPANSION) | OPTBIT(OPT_NONSCALING) |  \
     OPTBIT(OPT_WINDOW) | OPTBIT(OPT_GENERATIONS) |                            \
     OPTBIT(OPT_WINDOW_BY_COUNT) | OPTBIT(OPT_SPLIT) | OPTBIT(OPT_FORCE) |     \
     OPTBIT(OPT_AUTO_CLEAR) | OPTBIT(OPT_ROTATE) | OPTBIT(OPT_MAX_TTL) |      \
     OPTBIT(OPT_SLOTS))
/* The key-input flags of add, check, dedup and remove. */
#define OPTS_INPUT                                                             \
    (OPTBIT(OPT_NUL) | OPTBIT(OPT_FIELD) | OPTBIT(OPT_DELIMITER) |             \
     OPTBIT(OPT_SKIP_EMPTY) | OPTBIT(OPT_QUIET) | OPTBIT(OPT_NO_DECOMPRESS))

typedef struct cli_options {
    uint64_t given;            /* OPTBIT of every option on the command line */
    bk_filter_config config;   /* sizing flags, family options */
    int nul;                   /* -0: keys (and dedup output) end in NUL */
    uint32_t field;            /* --field N (1-based), 0: the whole line */
    char delimiter;            /* --delimiter C, default tab */
    int skip_empty;            /* --skip-empty */
    int quiet;                 /* --quiet: no progress */
    unsigned jobs;             /* -j N; 0: all cores */
    int invert, count, total, json, force;
    int strict;                /* add --strict: over capacity is an error */
    int no_decompress;         /* --no-decompress: compressed input as bytes */
    const char *window_arg;    /* --window as given (clock.c parses it) */
    uint64_t ttl_ms;           /* add/dedup --ttl D into a ttl filter; 0:
                                  the filter's max TTL */
    uint32_t slots;            /* --slots S of a ttl table, 0: the default */
    const char *save;          /* dedup --save FILE */
    const char *nodes;         /* cluster --nodes HOST:PORT,... */
    uint32_t shards;           /* cluster --shards S, 0: not given */
    int cluster_cuckoo;        /* cluster --type cuckoo (else bloom) */
    const char **args;         /* positional arguments (argv order) */
    size_t nargs;
} cli_options;

/* Parse argv[1..argc) of subcommand `cmd`, accepting only the options in
 * `allowed` (OPTBIT set). Positional arguments land in opts->args ("-" is a
 * positional; "--" ends the options). Prints the problem and returns -1 on
 * a bad flag or value; free opts->args with cli_options_free either way. */
int cli_parse_options(const char *cmd, int argc, char **argv, uint64_t allowed,
                      cli_options *opts);
void cli_options_free(cli_options *opts);

/* A whole number as the options take it (digits, k/M/G/T suffixes, "1e6",
 * 0x-hex when hex_ok). Returns 0, or -1 when s is not one. */
int cli_parse_u64(const char *s, int hex_ok, uint64_t *out);

/* Check the sizing flags for creating a filter: --capacity and --error
 * given, the family options belong to --type. Prints the problem. */
int cli_check_sizing(const char *cmd, const cli_options *opts);

/* Whether any sizing flag (--capacity, --error, --type or a family option)
 * was given. */
int cli_has_sizing(const cli_options *opts);

/* The one FILE argument of cmd, or NULL when there are none or several
 * (said). */
const char *cli_one_file(const char *cmd, const cli_options *opts);

/*==========================================================================
 * Wall clock of window filters (clock.c)
 *==========================================================================*/

/* Milliseconds since 1970-01-01 UTC: the time unit of the CLI's windows. */
uint64_t cli_now_ms(void);

/* Set opts->config.window from opts->window_arg: a duration with a unit
 * ("10m") or, with --window-by-count, a number. Prints the problem. */
int cli_parse_window(const char *cmd, cli_options *opts);

/* A duration with a unit, ms, s, m, h or d ("10m", "250ms"), in
 * milliseconds, 1ms to 36525d: 0, or -1 after printing the problem
 * (cmd: option name). */
int cli_parse_duration(const char *cmd, const char *option, const char *s, uint64_t *ms);

/* bk_filter_create, except that a time window's or a TTL filter's clock
 * starts now (a TTL filter's max TTL is config.window). */
int cli_window_create(const bk_filter_config *c, uint32_t slots, bk_filter **out);

/* Move a time window's or a TTL filter's clock to now (nothing for other
 * filters). */
void cli_window_tick(bk_filter *f);

/* Adds at the present: a TTL filter's keys live ttl_ms (0: its max TTL)
 * from now; other filters as bk_filter_add_batch. */
int64_t cli_add_batch(bk_filter *f, const void *const *keys, const size_t *lens, size_t n,
                      uint8_t *results, uint64_t ttl_ms);

/* Lookups at the present: a time window and a TTL filter answer for now,
 * without moving their clock; other filters as bk_filter_contains_batch /
 * bk_filter_count. */
int64_t cli_contains_batch(bk_filter *f, const void *const *keys,
                           const size_t *lens, size_t n, uint8_t *results);
int64_t cli_count(bk_filter *f, const void *key, size_t len);

/*==========================================================================
 * Compressed input (decompress.c)
 *==========================================================================*/

/* A reader of fd (not owned) that decompresses gzip and zstd input, found
 * by its magic bytes when detect is set. name is for messages. */
typedef struct cli_source cli_source;
int cli_source_open(cli_source **out, int fd, const char *name, int detect);
/* Up to cap bytes of (decompressed) input; 0 at the end; -1 after printing
 * the problem (a read error, corrupt or truncated compressed data). */
ssize_t cli_source_read(cli_source *s, void *buf, size_t cap);
/* Bytes read from fd so far (compressed bytes for compressed input). */
uint64_t cli_source_consumed(const cli_source *s);
void cli_source_close(cli_source *s);

/*==========================================================================
 * Keys (input.c)
 *
 * Keys are read from files (or standard input) in batches. A key is a line
 * without its terminator ('\n', or NUL with -0), or with --field N the N-th
 * field of the line. Lines are at most CLI_MAX_LINE bytes.
 *==========================================================================*/

#define CLI_MAX_LINE ((size_t)1 << 20)  /* 1 MiB, terminator excluded */
#define CLI_BATCH_KEYS 16384

typedef struct key_batch {
    char *buf;              /* the bytes the keys point into */
    size_t len, cap;
    const void **keys;      /* key i: keys[i], lens[i] */
    size_t *lens;
    const char **lines;     /* the whole line of key i (for printing) */
    size_t *line_lens;
    uint8_t *results;       /* scratch for the batch calls */
    size_t n;
} key_batch;

typedef struct key_reader key_reader;

/* Read keys from paths[0..npaths) in order ("-" or no path: standard
 * input). Files are opened as they are reached. */
int key_reader_open(key_reader **out, const char *const *paths, size_t npaths,
                    const cli_options *opts);
void key_reader_free(key_reader *r);

/* Fill b with the next keys (at least one unless the input is exhausted:
 * b->n == 0 then). Returns 0, or -1 after printing the problem ("bloomkit:
 * FILE: No such file or directory", "bloomkit: FILE:LINE: line longer
 * than ..."). */
int key_reader_fill(key_reader *r, key_batch *b);

/* Bytes consumed so far, and the total when every input is a regular file
 * (else 0). */
uint64_t key_reader_bytes(const key_reader *r);
uint64_t key_reader_total(const key_reader *r);

int key_batch_init(key_batch *b);
void key_batch_free(key_batch *b);

/*==========================================================================
 * Progress (progress.c)
 *
 * A line on stderr, rewritten with '\r' at most four times a second, only
 * when stderr is a terminal and --quiet was not given.
 *==========================================================================*/

typedef struct progress {
    int enabled;
    int shown;              /* something was printed: finish ends the line */
    const char *what;       /* "adding", "checking" ... */
    double start, last;     /* seconds, monotonic */
} progress;

void progress_init(progress *p, const char *what, int quiet);
void progress_update(progress *p, uint64_t bytes, uint64_t total,
                     uint64_t keys);
void progress_finish(progress *p, uint64_t bytes, uint64_t total,
                     uint64_t keys);

/*==========================================================================
 * Subcommands
 *==========================================================================*/

int cmd_create(int argc, char **argv);
int cmd_add(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_remove(int argc, char **argv);
int cmd_dedup(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_intersect(int argc, char **argv);
int cmd_cluster(int argc, char **argv);
int cmd_verify(int argc, char **argv);   /* cmd_verify.c */
int cmd_copy(int argc, char **argv);
int cmd_push(int argc, char **argv);    /* cmd_push.c */
int cmd_pull(int argc, char **argv);
/* cmd_static.c: static sets and maps, reconciliation */
int cmd_build_map(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_sync(int argc, char **argv);
/* create --type static: the filter of the key files after FILE */
int cli_create_static(const cli_options *opts);

/* Help texts (help.c): print the man-page-like text of a subcommand ("" for
 * the top level) to f. Returns 0, or -1 for an unknown name. */
int cli_help(const char *cmd, FILE *f);

/* When o asks for --help: print cmd's help to standard output and return
 * 1; else 0. */
int cli_wants_help(const cli_options *o, const char *cmd);

#endif /* BLOOMKIT_CLI_H */
