/*
 * main.c - bloomkit-server: start-up, the wait, and a clean shutdown.
 *
 *   bloomkit-server [config-file] [--option value ...]
 *
 * Start-up: configuration (file, then flags), the log, the data directory
 * (created if missing), the keyspace, persistence (which loads the last
 * snapshot and replays the log; nothing expires meanwhile), then the
 * workers. Shutdown (SIGTERM, SIGINT, SHUTDOWN [SAVE|NOSAVE]): the workers
 * stop and close their clients, a final snapshot is written unless NOSAVE,
 * and everything is freed (so that a sanitizer build exits without leaks).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops.h"
#include "server_int.h"

/* mkdir -p */
static int make_dirs(const char *path)
{
    char tmp[1024];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    /* the data directory itself: its owner only (snapshots, logs) */
    if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
        return -1;
    struct stat st;
    return stat(tmp, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

int main(int argc, char **argv)
{
    bks_mem_init();   /* before any allocation that could raise the mmap threshold */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);   /* until net.c's handler (reopen the log) is in place */
    const char *file = NULL;
    int first_flag = 1;
    int check_data = 0;
    /* --check-data: verify the data directory (the other flags still say
     * where it is: --dir, or the config file) and exit 0 sound / 1 not. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check-data")) {
            check_data = 1;
            for (int j = i; j + 1 < argc; j++)
                argv[j] = argv[j + 1];
            argc--;
            i--;
        }
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            bks_config_usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-v")) {
            printf("bloomkit-server %s (bloomkit %s)\n", BKS_VERSION, bk_version_string());
            return 0;
        }
    }
    if (argc > 1 && strncmp(argv[1], "--", 2)) {
        file = argv[1];
        first_flag = 2;
    }
    bks_config_defaults(&g_srv.cfg);
    char err[1024];
    if (bks_config_load(&g_srv.cfg, file, argc - first_flag, argv + first_flag, err,
                        sizeof err) < 0) {
        fprintf(stderr, "bloomkit-server: %s\n", err);
        return 1;
    }
    g_srv.config_file = file;
    bks_config_apply_bloom(&g_srv.cfg);
    if (check_data) {
#ifdef BKS_HAVE_PERSIST
        return bks_persist_check_data(&g_srv.cfg, stdout) == 0 ? 0 : 1;
#else
        fprintf(stderr, "bloomkit-server: built without persistence: nothing to check\n");
        return 1;
#endif
    }
    if (!realpath("/proc/self/exe", g_srv.executable))
        snprintf(g_srv.executable, sizeof g_srv.executable, "%s", argv[0]);
    bks_log_open(&g_srv.cfg);
    g_srv.start_ms = bks_now_ms();

    int rc = 1;
    if (make_dirs(g_srv.cfg.dir) < 0) {
        bks_log(BKS_LOG_ERROR, "cannot create the data directory '%s': %s", g_srv.cfg.dir,
                strerror(errno));
        goto out;
    }
    if (bks_keyspace_create(&g_srv.ks, g_srv.cfg.maxmemory) != BK_OK) {
        bks_log(BKS_LOG_ERROR, "out of memory");
        goto out;
    }
    bks_log(BKS_LOG_INFO, "bloomkit-server %s starting, pid %d, data in %s", BKS_VERSION,
            (int)getpid(), g_srv.cfg.dir);
#ifdef BKS_HAVE_PERSIST
    if (bks_persist_open(&g_srv.persist, &g_srv.cfg, g_srv.ks) < 0) {
        bks_log(BKS_LOG_ERROR, "cannot load the data directory '%s' (see above)",
                g_srv.cfg.dir);
        g_srv.persist = NULL;
        goto out;
    }
#else
    bks_log(BKS_LOG_WARNING, "built without persistence: nothing is saved");
#endif
    bks_keyspace_loaded(g_srv.ks);
    if (bks_net_start() < 0)
        goto out;
    bks_log(BKS_LOG_INFO, "Ready to accept connections");
    bks_net_run();
    bks_net_stop();
    rc = 0;
    if (g_srv.persist && atomic_load(&g_srv.shutdown_mode) != BKS_SHUTDOWN_NOSAVE) {
        bks_log(BKS_LOG_INFO, "Saving the final snapshot...");
        if (bks_persist_save_final(g_srv.persist) < 0) {
            bks_log(BKS_LOG_ERROR, "the final snapshot failed: the log still has every write");
            rc = 1;
        }
    }
out:
    bks_net_stop();
#ifdef BKS_HAVE_PERSIST
    if (g_srv.persist)
        bks_persist_close(g_srv.persist);
#endif
    g_srv.persist = NULL;
    bks_net_free();
    bks_ops_free();
    bks_keyspace_free(g_srv.ks);
    if (g_srv.cfg.unixsocket[0])
        unlink(g_srv.cfg.unixsocket);
    bks_log(BKS_LOG_INFO, rc == 0 ? "bloomkit-server is now ready to exit, bye bye..."
                                  : "bloomkit-server stopped");
    bks_log_close();
    return rc;
}
