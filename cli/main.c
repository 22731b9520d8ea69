/*
 * main.c - the bloomkit command: dispatch to the subcommands, and the
 * helpers they share for messages and filter files.
 *
 * Everything goes through include/bloomkit.h and the generic bk_filter
 * handle, so every family the library registers works here unchanged.
 * Exit status: 0 success, 1 "no key matched" (check only), 2 any error.
 * Errors are one line on stderr, "bloomkit: WHAT: problem", where WHAT is
 * the file (or subcommand and option) at fault.
 */
#include <errno.h>    /* errno */
#include <fcntl.h>    /* open */
#include <stdarg.h>   /* va_list */
#include <stdio.h>    /* fprintf */
#include <string.h>   /* strcmp, strerror */
#include <sys/stat.h> /* fstat */
#include <unistd.h>   /* close */

#include "cli.h"

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bloomkit: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_load_filter(const char *path, bk_filter **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        cli_error("%s: %s", path, strerror(errno));
        return BK_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        cli_error("%s: %s", path, strerror(EISDIR));
        return BK_EIO;
    }
    errno = 0;
    int rc = bk_filter_read_fd(out, fd);
    int saved_errno = errno;
    close(fd);
    if (rc != BK_OK) cli_report_load_error(path, rc, saved_errno); /* open.c */
    return rc;
}

int cli_save_filter(const bk_filter *f, const char *path)
{
    if (cli_check_target(path) != 0) return BK_EINVAL;
    errno = 0;
    int rc = bk_filter_save(f, path);
    if (rc != BK_OK) {
        if (rc == BK_EIO && errno != 0)
            cli_error("%s: cannot save: %s", path, strerror(errno));
        else
            cli_error("%s: cannot save: %s", path, bk_strerror(rc));
    }
    return rc;
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"create", cmd_create}, {"add", cmd_add},         {"check", cmd_check},
    {"dedup", cmd_dedup},   {"remove", cmd_remove},   {"info", cmd_info},
    {"merge", cmd_merge},   {"intersect", cmd_intersect},
    {"verify", cmd_verify},
    {"cluster", cmd_cluster}, {"copy", cmd_copy},
    {"push", cmd_push}, {"pull", cmd_pull},
    {"build-map", cmd_build_map}, {"get", cmd_get},
    {"diff", cmd_diff}, {"sync", cmd_sync},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        cli_help("", stderr);
        return CLI_EXIT_ERROR;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 ||
        strcmp(name, "help") == 0) {
        if (argc > 2 && strcmp(name, "help") == 0) {
            if (cli_help(argv[2], stdout) != 0) {
                cli_error("unknown command '%s' (see bloomkit --help)",
                          argv[2]);
                return CLI_EXIT_ERROR;
            }
            return CLI_EXIT_OK;
        }
        cli_help("", stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("bloomkit %d.%d.%d (libbloomkit %s)\n", BK_VERSION_MAJOR,
               BK_VERSION_MINOR, BK_VERSION_PATCH, bk_version_string());
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].name, name) == 0) {
            int rc = commands[i].run(argc - 1, argv + 1);
            if (fflush(stdout) != 0 || ferror(stdout)) {
                cli_error("standard output: %s", strerror(errno));
                return CLI_EXIT_ERROR;
            }
            return rc;
        }
    if (name[0] == '-') cli_error("unknown option '%s' (see bloomkit --help)", name);
    else cli_error("unknown command '%s' (see bloomkit --help)", name);
    return CLI_EXIT_ERROR;
}
