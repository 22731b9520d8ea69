/*
 * lock.c - one writer at a time per filter file, and what may be replaced.
 *
 * add and remove read a filter file, change it in memory and save it with
 * bk_filter_save (a temporary file renamed over the old one). Two such
 * commands on one file at once would each read the old file and the last
 * rename would win, silently losing the other's keys. So each holds an
 * exclusive flock(2) for the whole read-modify-write:
 *
 *   - on the file itself when it exists. The rename replaces the inode, so
 *     a waiter that finally gets the lock may hold it on the old, unlinked
 *     inode: after locking it compares the inode of its descriptor with the
 *     inode now at the path and starts again when they differ;
 *   - on the directory holding it when the file does not exist yet (add
 *     creates it), and again when, once locked, the file turns out to exist
 *     (someone created it meanwhile) it switches to the file's lock.
 *
 * No lock file is left behind. flock locks are advisory: they order
 * bloomkit commands among themselves, not other programs writing the file.
 * On file systems without flock (some NFS set-ups) the lock is refused
 * with ENOLCK/EOPNOTSUPP and the command proceeds unlocked with a warning.
 *
 * Targets: bk_filter_save replaces whatever is at the path by a regular
 * file. A character device, block device, FIFO or socket there is refused
 * instead (create --force onto /dev/null must not turn it into a file).
 * A symbolic link is resolved once, before the lock (cli_resolve_target):
 * the lock, the load and the rename then all work on the file it points
 * to, so the link stays a link and its target gets the keys. A link that
 * points nowhere is refused.
 */
#include <errno.h>    /* errno, EINTR */
#include <fcntl.h>    /* open */
#include <limits.h>   /* PATH_MAX */
#include <stdlib.h>   /* realpath */
#include <string.h>   /* strerror, strrchr */
#include <sys/file.h> /* flock */
#include <sys/stat.h> /* fstat, stat */
#include <unistd.h>   /* close */

#include "cli.h"

/*==========================================================================
 * Targets
 *==========================================================================*/

static const char *file_kind(mode_t mode)
{
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

int cli_resolve_target(const char **path, char *buf, size_t cap)
{
    struct stat st;
    if (lstat(*path, &st) != 0 || !S_ISLNK(st.st_mode)) return 0;
    char resolved[PATH_MAX];
    if (realpath(*path, resolved) == NULL) {
        if (errno == ENOENT)
            cli_error("%s: a symbolic link to a file that does not exist: refusing to "
                      "write through it (create the target, or give its path)", *path);
        else
            cli_error("%s: cannot resolve the symbolic link: %s", *path, strerror(errno));
        return -1;
    }
    if (strlen(resolved) >= cap) {
        cli_error("%s: %s", *path, strerror(ENAMETOOLONG));
        return -1;
    }
    memcpy(buf, resolved, strlen(resolved) + 1);
    *path = buf;
    return 0;
}

int cli_check_target(const char *path)
{
    struct stat st;
    /* A directory fails later with the system's own words ("Is a
     * directory"); nothing can replace it anyway. */
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
        return 0;
    cli_error("%s: is %s, not a regular file: refusing to replace it (give "
              "the path of a regular file)", path, file_kind(st.st_mode));
    return -1;
}

/*==========================================================================
 * Locks
 *==========================================================================*/

/* The directory of path ("." for a bare name) into buf. */
static int parent_dir(const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        snprintf(buf, cap, ".");
        return 0;
    }
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    if (len >= cap) return -1;
    memcpy(buf, path, len);
    buf[len] = '\0';
    return 0;
}

static int lock_fd(int fd)
{
    int rc;
    do rc = flock(fd, LOCK_EX);
    while (rc != 0 && errno == EINTR);
    return rc;
}

static int lock_unsupported(int err)
{
    return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS;
}

int cli_lock_file(const char *path, int *out)
{
    char dir[PATH_MAX];
    *out = -1;
    for (;;) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        int on_dir = 0;
        if (fd < 0 && errno == ENOENT) {
            if (parent_dir(path, dir, sizeof(dir)) != 0) {
                cli_error("%s: %s", path, strerror(ENAMETOOLONG));
                return -1;
            }
            fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            on_dir = 1;
        }
        if (fd < 0) return 0; /* the load that follows says why */
        if (lock_fd(fd) != 0) {
            int err = errno;
            close(fd);
            if (lock_unsupported(err)) {
                cli_error("%s: warning: cannot lock (%s): concurrent writers "
                          "may lose each other's keys", path, strerror(err));
                return 0;
            }
            cli_error("%s: cannot lock: %s", path, strerror(err));
            return -1;
        }
        struct stat held, now;
        int exists = stat(path, &now) == 0;
        if (on_dir) {
            if (!exists) {              /* still missing: we create it */
                *out = fd;
                return 0;
            }
        } else if (exists && fstat(fd, &held) == 0 &&
                   held.st_dev == now.st_dev && held.st_ino == now.st_ino) {
            *out = fd;                  /* the lock is on the current file */
            return 0;
        }
        close(fd);                      /* replaced or created meanwhile */
    }
}

void cli_unlock_file(int fd)
{
    if (fd >= 0) close(fd); /* closing the last descriptor releases flock */
}
