/*
 * open.c - opening filter files for reading, and saying why one is not.
 *
 * Read-only subcommands (check, info) map the file (bk_filter_map) instead
 * of reading it into memory: a lookup of a few keys touches a few pages,
 * so checking one key against a 10 GB filter costs milliseconds and almost
 * no memory. That is done for files above CLI_MAP_MIN_BYTES (16 MiB). A
 * smaller file is read and verified whole, as is a path that cannot be
 * mapped (a pipe, a process substitution, a character device): reading
 * 16 MiB and checking its checksum takes a few milliseconds, and a damaged
 * small filter is then always reported. A mapped filter's payload checksum
 * is checked only when asked (info does; check does not, since that reads
 * every page), while its header and descriptors always are.
 *
 * The library reports a short file as "data is truncated" before it looks
 * at the magic number (docs/FORMAT.md, validation order). For a person who
 * passed a text file or /dev/null that is the wrong hint, so when loading
 * fails with BK_ETRUNC or BK_EMAGIC the first bytes are read again here:
 * without the filter magic the message is "not a bloomkit filter file".
 */
#include <errno.h>    /* errno */
#include <fcntl.h>    /* open */
#include <string.h>   /* memcmp, strerror */
#include <sys/stat.h> /* stat */
#include <unistd.h>   /* read, close */

#include "cli.h"

#define CLI_MAP_MIN_BYTES ((uint64_t)16 << 20)

/* docs/FORMAT.md: the file header's first 8 bytes. */
static const unsigned char filter_magic[8] = {0x89, 'B',  'K',  'F',
                                              '\r', '\n', 0x1a, '\n'};

/* 1 when path (a regular file or a character device, which can be read
 * again without consuming anything) does not start with the magic; 2 when
 * it is empty; 0 when it does or cannot tell. */
static int lacks_magic(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode)))
        return 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    unsigned char head[sizeof(filter_magic)];
    size_t have = 0;
    while (have < sizeof(head)) {
        ssize_t got = read(fd, head + have, sizeof(head) - have);
        if (got <= 0) break;
        have += (size_t)got;
    }
    close(fd);
    if (have == 0) return 2;
    if (memcmp(head, filter_magic, have) != 0 || have < sizeof(head)) return 1;
    return 0;
}

void cli_report_load_error(const char *path, int rc, int saved_errno)
{
    if (rc == BK_ETRUNC || rc == BK_EMAGIC) {
        switch (lacks_magic(path)) {
        case 2:
            cli_error("%s: not a bloomkit filter file (it is empty; make one "
                      "with bloomkit create)", path);
            return;
        case 1:
            cli_error("%s: not a bloomkit filter file (it does not start "
                      "with the filter magic; make one with bloomkit create)",
                      path);
            return;
        default: break;
        }
    }
    if (rc == BK_EIO && saved_errno != 0)
        cli_error("%s: %s", path, strerror(saved_errno));
    else
        cli_error("%s: %s", path, bk_strerror(rc));
}

int cli_open_readonly(const char *path, bk_filter **out, int verify)
{
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size <= CLI_MAP_MIN_BYTES)
        return cli_load_filter(path, out); /* says why, or reads it all */
    errno = 0;
    int rc = bk_filter_map(out, path,
                           BK_MAP_READONLY | (verify ? BK_MAP_VERIFY : 0u));
    if (rc == BK_ENOTSUP) return cli_load_filter(path, out); /* not mappable */
    if (rc != BK_OK) {
        *out = NULL;
        cli_report_load_error(path, rc, errno);
    }
    return rc;
}
