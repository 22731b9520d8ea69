/*
 * cmd_verify.c - bloomkit verify FILE...: read filter files completely and
 * check every checksum (header and payload), without loading them into
 * memory (a read-only mapping with BK_MAP_VERIFY, read once from end to
 * end). The server's snapshot files (snap-<G>/<n>.bkf) are ordinary
 * filter files, so this checks them too.
 *
 * Exit status: 0 every file is sound, 1 at least one is corrupt (a format
 * or checksum error: the file is not what it should be), 2 an error that
 * says nothing about the data (missing file, permissions, usage).
 */
#include <errno.h>    /* errno */
#include <fcntl.h>    /* open */
#include <stdio.h>    /* printf */
#include <string.h>   /* strerror */
#include <sys/stat.h> /* fstat */
#include <unistd.h>   /* close */

#include "cli.h"

/* 0 sound, 1 corrupt, 2 cannot tell. */
static int verify_one(const char *path)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        cli_error("%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return CLI_EXIT_ERROR;
    }
    close(fd);
    if (!S_ISREG(st.st_mode)) {
        cli_error("%s: not a regular file", path);
        return CLI_EXIT_ERROR;
    }
    bk_filter *f = NULL;
    errno = 0;
#ifdef BK_MAP_VERIFY
    int rc = bk_filter_map(&f, path, BK_MAP_READONLY | BK_MAP_VERIFY);
#else
    int rc = bk_filter_load(&f, path);
#endif
    int saved = errno;
    if (rc == BK_OK) {
        bk_filter_info in;
        const char *type = bk_filter_get_info(f, &in) == BK_OK ? cli_family_name(in.family)
                                                                : "filter";
        printf("%s: ok (%s, %llu bytes, every checksum verified)\n", path, type,
               (unsigned long long)st.st_size);
        bk_filter_free(f);
        return CLI_EXIT_OK;
    }
    if (rc == BK_EIO || rc == BK_ENOMEM || rc == BK_EINVAL) {
        cli_error("%s: cannot verify: %s", path,
                  rc == BK_EIO && saved ? strerror(saved) : bk_strerror(rc));
        return CLI_EXIT_ERROR;
    }
    printf("%s: CORRUPT: %s%s\n", path,
           rc == BK_ECHECKSUM ? "checksum mismatch (header or payload)" : bk_strerror(rc),
           rc == BK_ECHECKSUM ? "" : " (not a sound bloomkit filter file)");
    return 1;
}

int cmd_verify(int argc, char **argv)
{
    cli_options o;
    int worst = CLI_EXIT_ERROR;
    if (cli_parse_options("verify", argc, argv, 0, &o) != 0) goto done;
    if (o.given & OPTBIT(OPT_HELP)) {
        cli_help("verify", stdout);
        worst = CLI_EXIT_OK;
        goto done;
    }
    if (o.nargs < 1) {
        cli_error("verify: expected at least one FILE (see bloomkit verify --help)");
        goto done;
    }
    worst = CLI_EXIT_OK;
    for (size_t i = 0; i < o.nargs; i++) {
        int rc = verify_one(o.args[i]);
        if (rc > worst) worst = rc;
    }
done:
    cli_options_free(&o);
    return worst;
}
