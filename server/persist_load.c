/*
 * persist_load.c - start-up: loading the snapshot CURRENT names (inline
 * values decoded, large filters mapped copy-on-write from their .bkf
 * files) and replaying the logs after it through the command layer, with
 * the torn-tail and damage rules of docs/PERSISTENCE.md, "Reading a log at
 * start-up".
 */
#include <stdatomic.h>
#include <dirent.h>       /* fdopendir */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>     /* PRIu64 */
#include <limits.h>       /* PATH_MAX */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>     /* logs and manifests are read through mmap */
#include <sys/stat.h>
#include <unistd.h>

#include "persist_int.h"
#include "server_int.h" /* bks_execute: replaying the host's own commands */

/*==========================================================================
 * Snapshot: loading
 *==========================================================================*/

/* Load the filters of a split key frame (fields after the layout word);
 * inline images start at *off in the manifest. Mapped files are added to
 * *guard (created on the first), to be verified after start-up; with
 * check_only every file is verified now and nothing is kept. *origin is
 * the number of the file the key's filter was read from (0: inline), which
 * the next snapshot links while the key does not change. */
static int load_split(bks_persist *p, const char *sname, const char *mpath,
                      const unsigned char *base, size_t size, size_t *off,
                      fields *k, int check_only, bks_guard **guard, bkc_value **out,
                      uint64_t *origin, bkc_str name, char *err, size_t errlen)
{
    uint32_t kind = pst_fd_u32(k);
    uint64_t cf_capacity = pst_fd_u64(k);
    uint32_t cf_bucket = pst_fd_u32(k), cf_iter = pst_fd_u32(k), cf_exp = pst_fd_u32(k);
    uint64_t cf_deleted = pst_fd_u64(k);
    uint32_t nfilters = pst_fd_u32(k);
    if (k->bad || (k->n - k->pos) != (size_t)nfilters * 16) {
        pst_errf(err, errlen, "bad key frame");
        return -1;
    }
    bkc_value *v = bkc_value_new((bkc_kind)kind);
    if (v == NULL) {
        pst_errf(err, errlen, "out of memory");
        return -1;
    }
    if (v->cf != NULL) { /* a CF key's settings (zeros for other kinds) */
        v->cf->capacity = cf_capacity;
        v->cf->bucket_size = cf_bucket;
        v->cf->max_iterations = cf_iter;
        v->cf->expansion = cf_exp;
        v->cf->deleted = cf_deleted;
    }
    for (uint32_t i = 0; i < nfilters; i++) {
        uint64_t len = pst_fd_u64(k), file = pst_fd_u64(k);
        bk_filter *f = NULL;
        int lrc;
        if (file == 0) {
            if (len > size - *off) {
                pst_errf(err, errlen, "%s offset %zu: filter image runs past the end", mpath, *off);
                goto fail;
            }
            lrc = bk_filter_deserialize(&f, base + *off, (size_t)len);
            if (lrc != BK_OK) {
                pst_errf(err, errlen, "%s offset %zu: filter image: %s", mpath, *off, bk_strerror(lrc));
                goto fail;
            }
            *off += (size_t)len;
        } else {
            char fpath[PATH_MAX];
            struct stat fst;
            pst_errf(fpath, sizeof fpath, "%s/%s/%" PRIu64 ".bkf", p->dir, sname, file);
            if (stat(fpath, &fst) != 0) {
                pst_errf(err, errlen, "%s: %s", fpath, strerror(errno));
                goto fail;
            }
            if ((uint64_t)fst.st_size != len) {
                pst_errf(err, errlen, "%s: %s (%" PRIu64 " bytes, the manifest says %" PRIu64 ")",
                     fpath, bk_strerror((uint64_t)fst.st_size < len ? BK_ETRUNC : BK_ECORRUPT),
                     (uint64_t)fst.st_size, len);
                goto fail;
            }
            int mapped = 0;
#ifdef BK_MAP_PRIVATE
            /* Mapped copy-on-write: usable at once, read as it is touched,
             * changes stay in memory. The header is validated now; the
             * payload checksum after start-up (persist_verify.c): the key
             * is guarded until then. */
            if (check_only)
                lrc = bk_filter_map(&f, fpath, BK_MAP_READONLY | BK_MAP_VERIFY);
            else if (p->map_threshold > 0 && len > p->map_threshold)
                lrc = bk_filter_map(&f, fpath, BK_MAP_PRIVATE), mapped = 1;
            else
#endif
                lrc = bk_filter_load(&f, fpath);
            if (lrc != BK_OK && check_only && p->check_out != NULL) {
                /* --check-data: say it, and go on with the other files */
                fprintf(p->check_out, "BAD   %s: %s (a filter of key '%.*s')\n", fpath,
                        lrc == BK_ECHECKSUM ? "checksum mismatch" : bk_strerror(lrc),
                        (int)(name.len > 64 ? 64 : name.len), name.ptr);
                p->check_bad++;
                continue;
            }
            if (lrc != BK_OK) {
                pst_errf(err, errlen, "%s: %s", fpath, bk_strerror(lrc));
                goto fail;
            }
            if (mapped && *guard == NULL && (*guard = pst_guard_new(p, GUARD_UNVERIFIED)) == NULL) {
                bk_filter_free(f);
                pst_errf(err, errlen, "out of memory");
                goto fail;
            }
            if (mapped && pst_guard_add_path(*guard, fpath) != 0) {
                bk_filter_free(f);
                pst_errf(err, errlen, "out of memory");
                goto fail;
            }
            *origin = file;
        }
        int prc = bkc_value_push(v, f);
        if (prc != BK_OK) {
            bk_filter_free(f);
            if (prc == BK_ENOMEM)
                pst_errf(err, errlen, "out of memory");
            else /* a family the kind cannot hold, or old CF stages that do not join */
                pst_errf(err, errlen, "key '%.*s': filter %u does not fit a key of kind %u (%s)",
                         (int)(name.len > 64 ? 64 : name.len), name.ptr, i, kind,
                         bk_strerror(prc));
            goto fail;
        }
    }
    if (!check_only && v->nfilters != 1) { /* every split kind holds one filter */
        pst_errf(err, errlen, "key '%.*s': %u filters for a key of kind %u",
                 (int)(name.len > 64 ? 64 : name.len), name.ptr, v->nfilters, kind);
        goto fail;
    }
    *out = v;
    return 0;
fail:
    bkc_value_free(v);
    return -1;
}

/* Map the file name (name/leaf when leaf is not NULL) of the persistence
 * directory to read it, its full name in path (PATH_MAX bytes): 0, or -1
 * with err set (pst_map_file). */
static int map_in_dir(const bks_persist *p, const char *name, const char *leaf, char *path,
                      const unsigned char **base, size_t *size, char *err, size_t errlen)
{
    if (leaf != NULL)
        snprintf(path, PATH_MAX, "%s/%s/%s", p->dir, name, leaf);
    else
        snprintf(path, PATH_MAX, "%s/%s", p->dir, name);
    return pst_map_file(AT_FDCWD, path, path, base, size, err, errlen);
}

int pst_snapshot_load(bks_persist *p, uint64_t gen, int check_only, uint64_t *nkeys_out,
                      char *err, size_t errlen)
{
    char sname[64], mpath[PATH_MAX];
    pst_snap_name(sname, sizeof sname, gen);
    size_t size;
    const unsigned char *base;
    if (map_in_dir(p, sname, "manifest", mpath, &base, &size, err, errlen) != 0) return -1;

    int rc = -1;
    size_t off = 0, at;
    uint64_t nkeys = 0, created = 0;
    frame fr;
    bkc_value *v = NULL;
    bks_guard *guard = NULL;
    if (pst_frame_read(base, size, &off, &fr) != 0 || fr.magic != MAN_MAGIC_HEAD) {
        pst_errf(err, errlen, "%s offset 0: bad manifest header", mpath);
        goto done;
    }
    {
        fields h = {fr.body, fr.len, 0, 0};
        uint32_t version = pst_fd_u32(&h);
        pst_fd_u32(&h);
        uint64_t g = pst_fd_u64(&h);
        created = pst_fd_u64(&h);
        if (h.bad || version != MAN_VERSION || g != gen) {
            pst_errf(err, errlen, "%s offset 0: unsupported manifest version or wrong generation", mpath);
            goto done;
        }
    }
    for (;;) {
        at = off;
        if (pst_frame_read(base, size, &off, &fr) != 0) {
            pst_errf(err, errlen, "%s offset %zu: %s", mpath, at,
                     at == size ? "manifest ends before its end marker" : "damaged manifest frame");
            goto done;
        }
        if (fr.magic == MAN_MAGIC_END) {
            fields e = {fr.body, fr.len, 0, 0};
            uint64_t want = pst_fd_u64(&e);
            if (e.bad || want != nkeys || off != size) {
                pst_errf(err, errlen, "%s offset %zu: bad end marker (%" PRIu64 " keys announced, %"
                         PRIu64 " read)", mpath, at, want, nkeys);
                goto done;
            }
            break;
        }
        if (fr.magic != MAN_MAGIC_KEY) {
            pst_errf(err, errlen, "%s offset %zu: unknown frame", mpath, at);
            goto done;
        }
        fields k = {fr.body, fr.len, 0, 0};
        uint32_t name_len = pst_fd_u32(&k);
        if (k.bad || name_len > k.n - k.pos) {
            pst_errf(err, errlen, "%s offset %zu: bad key frame", mpath, at);
            goto done;
        }
        bkc_str name = {(const char *)k.p + k.pos, name_len};
        k.pos += name_len;
        uint64_t expire = pst_fd_u64(&k);
        uint32_t layout = pst_fd_u32(&k);
        guard = NULL;
        uint64_t origin = 0;
        if (!k.bad && layout == KEY_CORRUPT) {
            /* Found corrupt by an earlier run: still refused, with the
             * file and the reason found then; the value is an empty one
             * of its kind (TYPE, DEL and RENAME work on it). */
            uint32_t kind = pst_fd_u32(&k), flen = pst_fd_u32(&k);
            if (k.bad || flen > k.n - k.pos) {
                pst_errf(err, errlen, "%s offset %zu: bad key frame", mpath, at);
                goto done;
            }
            char file[512], why[160];
            snprintf(file, sizeof file, "%.*s", (int)flen, (const char *)k.p + k.pos);
            k.pos += flen;
            uint32_t wlen = pst_fd_u32(&k);
            if (k.bad || wlen != k.n - k.pos) {
                pst_errf(err, errlen, "%s offset %zu: bad key frame", mpath, at);
                goto done;
            }
            snprintf(why, sizeof why, "%.*s", (int)wlen, (const char *)k.p + k.pos);
            if (check_only && p->check_out != NULL) {
                fprintf(p->check_out, "BAD   %s offset %zu: key '%.*s' is recorded as corrupt "
                        "(snapshot file %s: %s)\n", mpath, at,
                        (int)(name.len > 64 ? 64 : name.len), name.ptr, file, why);
                p->check_bad++;
                nkeys++;
                continue;
            }
            if (check_only) {
                pst_errf(err, errlen, "%s offset %zu: key '%.*s' is recorded as corrupt "
                         "(snapshot file %s: %s)", mpath, at,
                         (int)(name.len > 64 ? 64 : name.len), name.ptr, file, why);
                goto done;
            }
            if ((v = bkc_value_new((bkc_kind)kind)) == NULL ||
                (guard = pst_guard_new(p, GUARD_CORRUPT)) == NULL) {
                pst_errf(err, errlen, "out of memory");
                goto done;
            }
            pst_guard_set_corrupt(guard, file, why);
            bks_log(BKS_LOG_WARNING, "persist: key '%.*s' is corrupt (snapshot file %s: %s): "
                    "it is refused until deleted or overwritten",
                    (int)(name.len > 64 ? 64 : name.len), name.ptr, file, why);
        } else if (!k.bad && layout == KEY_INLINE) {
            uint64_t len = pst_fd_u64(&k);
            if (k.bad || k.pos != k.n || len > size - off) {
                pst_errf(err, errlen, "%s offset %zu: bad key frame", mpath, at);
                goto done;
            }
            int drc = bkc_value_decode(base + off, (size_t)len, &v);
            if (drc != BK_OK) {
                pst_errf(err, errlen, "%s offset %zu: value of key '%.*s': %s", mpath, off,
                     (int)(name.len > 64 ? 64 : name.len), name.ptr, bk_strerror(drc));
                goto done;
            }
            off += (size_t)len;
        } else if (!k.bad && layout == KEY_SPLIT) {
            char why[600];
            if (load_split(p, sname, mpath, base, size, &off, &k, check_only, &guard, &v,
                           &origin, name, why, sizeof why) != 0) {
                pst_errf(err, errlen, "%s offset %zu: key '%.*s': %s", mpath, at,
                     (int)(name.len > 64 ? 64 : name.len), name.ptr, why);
                goto done;
            }
        } else {
            pst_errf(err, errlen, "%s offset %zu: bad key frame", mpath, at);
            goto done;
        }
        int krc = check_only ? BK_OK : bks_keyspace_load(p->ks, name, v, expire, guard, origin);
        if (check_only) bkc_value_free(v);
        if (krc != 0) {
            pst_errf(err, errlen, "%s offset %zu: cannot load key '%.*s': %s", mpath, at,
                     (int)(name.len > 64 ? 64 : name.len), name.ptr, bk_strerror(krc));
            goto done;
        }
        v = NULL;
        nkeys++;
    }
    if (nkeys_out != NULL) *nkeys_out = nkeys;
    rc = 0;
    if (check_only) goto done;
    p->snap_bytes = size;
    atomic_store(&p->lastsave, created / 1000);
    bks_log(BKS_LOG_INFO, "persist: loaded %" PRIu64 " keys from %s/%s", nkeys, p->dir, sname);
done:
    if (v != NULL) bkc_value_free(v);
    if (base != NULL) munmap((void *)base, size);
    return rc;
}

/*==========================================================================
 * Replay
 *==========================================================================*/

static void rs_simple(bkc_reply *r, const char *s) { (void)r; (void)s; }
static void rs_integer(bkc_reply *r, long long v) { (void)r; (void)v; }
static void rs_bulk(bkc_reply *r, const void *d, size_t n) { (void)r; (void)d; (void)n; }
static void rs_null(bkc_reply *r) { (void)r; }
static void rs_count(bkc_reply *r, size_t n) { (void)r; (void)n; }
static void rs_dbl(bkc_reply *r, double d) { (void)r; (void)d; }
static void rs_bool(bkc_reply *r, int v) { (void)r; (void)v; }

static void rs_error(bkc_reply *r, const char *s)
{
    replay_sink *k = r->impl;
    if (k->errors++ == 0) snprintf(k->first, sizeof k->first, "%s", s);
}

static const bkc_reply_vt replay_reply_vt = {
    .simple = rs_simple, .error = rs_error, .integer = rs_integer, .bulk = rs_bulk,
    .null = rs_null, .array = rs_count, .map = rs_count, .dbl = rs_dbl, .boolean = rs_bool,
};

/* Run one logged write. The command layer's commands get the record's
 * time as ctx->now_ms, so that WF.* (whose filters keep a clock) replay
 * exactly; the host's own writes (DEL, PEXPIREAT, PERSIST, RENAME,
 * FLUSHALL ...) go through bks_execute with no client. The keyspace does
 * not expire keys while it is loading: the log holds the DELs. */
void pst_replay_one(bks_persist *p, replay_sink *sink, uint64_t time_ms,
                       int argc, const bkc_str *argv)
{
    bks_session s = {p->ks, NULL, NULL};
    bkc_reply reply = {&replay_reply_vt, sink};
    const bkc_command *cmd = bkc_lookup(argv[0]);
    if (cmd == NULL || (cmd->flags & BKC_CMD_HOST)) {
        bks_execute(NULL, &s, &reply, 2, argc, argv);
    } else {
        bkc_ctx c = {&reply, &bks_host_vt, &s, 2, time_ms};
        bkc_dispatch(&c, argc, argv);
    }
}

/* Replay one log (last: whether it is the final one of the list). *stop is
 * set when a repair cut it short: the caller then empties the later logs. */
int pst_replay_log(bks_persist *p, uint64_t gen, int last, replay_sink *sink,
                      int *stop, uint64_t *size_out, char *err, size_t errlen)
{
    char name[64], path[PATH_MAX];
    pst_log_name(name, sizeof name, gen);
    size_t size;
    const unsigned char *base;
    if (map_in_dir(p, name, NULL, path, &base, &size, err, errlen) != 0) return -1;
    size_t mapped = size;
    if (base != NULL) madvise((void *)base, size, MADV_SEQUENTIAL);

    int rc = -1;
    uint64_t records = 0;
    size_t off = 0, cut = SIZE_MAX;
    const char *why = NULL;
    if (size < LOG_HEADER_SIZE || !pst_log_header_check(base, gen)) {
        why = size < LOG_HEADER_SIZE ? "truncated log header" : "bad log header";
        if (!p->repair) {
            pst_errf(err, errlen, "file %s offset 0: %s (start with --repair-aof to "
                     "empty it, losing its writes)", path, why);
            goto done;
        }
        cut = 0;
        *stop = 1;
    } else {
        off = LOG_HEADER_SIZE;
        for (;;) {
            record r;
            int argc = 0;
            bkc_str *argv = NULL;
            rec_status s = pst_record_scan(base, size, off, &r, &why);
            if (s == REC_END) break;
            if (s == REC_TORN && last) {
                bks_log(BKS_LOG_WARNING, "persist: file %s offset %zu: %s: dropping the "
                        "last %zu bytes (a write torn by a crash, never acknowledged)",
                        path, off, why, size - off);
                cut = off;
                break;
            }
            if (s == REC_TORN) why = "log ends inside a record, and later logs follow";
            if (s == REC_OK && pst_resp_decode(r.payload, r.payload_len, &argc, &argv) != 0) {
                s = REC_BAD;
                why = "record payload is not a RESP array of bulk strings";
            }
            if (s != REC_OK) {
                if (!p->repair) {
                    pst_errf(err, errlen, "file %s offset %zu: %s (start with --repair-aof "
                             "to truncate the log there, losing what follows)", path, off, why);
                    goto done;
                }
                cut = off;
                *stop = 1;
                break;
            }
            pst_replay_one(p, sink, r.time_ms, argc, argv);
            free(argv);
            records++;
            off += r.size;
        }
    }
    if (cut != SIZE_MAX) {
        /* A repair keeps a copy of what it cuts; a torn tail is dropped. */
        if ((*stop ? pst_log_cut(p, gen, cut, why, err, errlen)
                   : pst_log_truncate(p, gen, cut, err, errlen)) != 0)
            goto done;
        size = cut < LOG_HEADER_SIZE ? LOG_HEADER_SIZE : cut;
    }
    *size_out = size;
    if (records > 0)
        bks_log(BKS_LOG_INFO, "persist: replayed %" PRIu64 " writes from %s", records, path);
    rc = 0;
done:
    if (base != NULL) munmap((void *)base, mapped);
    return rc;
}

/* No usable CURRENT (missing, or damaged with --rebuild-manifest): a fresh
 * directory, a refusal naming the data files found, or (--rebuild-manifest)
 * a CURRENT rebuilt from them. Returns 1 when started fresh (done), 0 when
 * *snap and p->logs were rebuilt, -1 on refusal or error. */
static int no_current(bks_persist *p, int damaged, uint64_t *snap, char *err, size_t errlen)
{
    gen_list snaps = {NULL, 0, 0}, logs = {NULL, 0, 0}, data = {NULL, 0, 0};
    int rc = -1;
    if (pst_scan_dir(p, &snaps, &logs, &data) != 0) {
        pst_errf(err, errlen, "%s: cannot list the directory: %s", p->dir, strerror(errno));
        goto done;
    }
    if (!damaged && snaps.n == 0 && data.n == 0) {
        /* Fresh, or a first start that crashed before CURRENT: nothing here
         * holds a write (logs of a header at most). Those may go. */
        uint64_t max = pst_max_gen_on_disk(p);
        p->logs.n = 0;
        pst_remove_unreferenced(p, 0, &p->logs);
        uint64_t gen = max + 1;
        if (pst_log_create(p, gen, &p->fd, err, errlen) != 0) goto done;
        if (pst_gens_push(&p->logs, gen) != 0) {
            pst_errf(err, errlen, "out of memory");
            goto done;
        }
        if (pst_current_write(p, 0, &p->logs, err, errlen) != 0) goto done;
        p->snap_gen = 0;
        p->live_gen = gen;
        p->file_size = LOG_HEADER_SIZE;
        p->next_gen = gen + 1;
        atomic_store(&p->lastsave, pst_wall_ms() / 1000);
        bks_log(BKS_LOG_INFO, "persist: new data directory %s", p->dir);
        rc = 1;
        goto done;
    }
    if (!p->rebuild) {
        /* Starting empty would lose these files (and, as debris, delete
         * them): refuse, and say what is there. */
        char list[600];
        size_t n = 0;
        list[0] = '\0';
        for (size_t i = 0; i < snaps.n && n < sizeof list - 40; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%ssnap-%" PRIu64 "/",
                                  n ? ", " : "", snaps.gens[i]);
        for (size_t i = 0; i < logs.n && n < sizeof list - 40; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%sappendonly-%" PRIu64 ".log",
                                  n ? ", " : "", logs.gens[i]);
        if (n == 0) snprintf(list, sizeof list, "no snapshot and no log");
        if (!damaged)
            pst_errf(err, errlen, "%s/CURRENT (the manifest) is missing, but the directory "
                     "holds data files: %s. Refusing to start empty; nothing was changed. "
                     "Start with --rebuild-manifest to rebuild CURRENT from the newest "
                     "complete snapshot and the logs after it", p->dir, list);
        else {
            char prev[512];
            snprintf(prev, sizeof prev, "%s", err);
            pst_errf(err, errlen, "%s; the directory holds %s. Nothing was changed. Start "
                     "with --rebuild-manifest to rebuild CURRENT from the newest complete "
                     "snapshot and the logs after it", prev, list);
        }
        goto done;
    }
    rc = pst_rebuild_current(p, snap, err, errlen);
done:
    free(snaps.gens);
    free(logs.gens);
    free(data.gens);
    return rc;
}

/* Load CURRENT's snapshot and replay its logs; open the live log. */
int pst_recover(bks_persist *p, char *err, size_t errlen)
{
    uint64_t snap = 0;
    int have = pst_current_read(p, &snap, &p->logs, err, errlen);
    if (have <= 0) {
        int rc = no_current(p, have < 0, &snap, err, errlen);
        if (rc != 0) return rc > 0 ? 0 : -1;
        p->keep_debris = 1;
    } else if (p->rebuild) {
        bks_log(BKS_LOG_WARNING, "persist: --rebuild-manifest: %s/CURRENT is sound: "
                "used as it is", p->dir);
    }
    uint64_t max = pst_max_gen_on_disk(p);
    for (size_t i = 0; i < p->logs.n; i++)
        if (p->logs.gens[i] > max) max = p->logs.gens[i];
    if (snap > max) max = snap;
    p->next_gen = max + 1;
    /* A rebuilt CURRENT deletes nothing yet: the next snapshot does. */
    if (!p->keep_debris) pst_remove_unreferenced(p, snap, &p->logs);
    p->snap_gen = snap;
    atomic_store(&p->lastsave, pst_wall_ms() / 1000);
    if (snap != 0 && pst_snapshot_load(p, snap, 0, NULL, err, errlen) != 0) return -1;

    replay_sink sink;
    memset(&sink, 0, sizeof sink);
    int stop = 0;
    uint64_t size = 0;
    /* The logs after which no log holds a record: a torn tail there is a
     * write torn by a crash or a failed append (a failing log is followed
     * by the empty log of its recovery snapshot), not damage. */
    size_t tail_from = p->logs.n - 1;
    while (tail_from > 0) {
        char lname[64];
        struct stat st;
        pst_log_name(lname, sizeof lname, p->logs.gens[tail_from]);
        if (fstatat(p->dirfd, lname, &st, 0) != 0 || (uint64_t)st.st_size > LOG_HEADER_SIZE)
            break;
        tail_from--;
    }
    for (size_t i = 0; i < p->logs.n; i++) {
        int last = i >= tail_from;
        if (stop) {
            /* A repair cut an earlier log: what follows it is dropped. */
            if (pst_log_cut(p, p->logs.gens[i], 0, "an earlier log was cut", err,
                            errlen) != 0)
                return -1;
            size = LOG_HEADER_SIZE;
        } else if (pst_replay_log(p, p->logs.gens[i], last, &sink, &stop, &size, err, errlen) != 0) {
            return -1;
        }
        if (i + 1 < p->logs.n) p->older_log_bytes += size;
    }
    if (sink.errors > 0)
        bks_log(BKS_LOG_WARNING, "persist: %" PRIu64 " replayed writes answered an error "
                "(the first: %s)", sink.errors, sink.first);

    char lname[64];
    p->live_gen = p->logs.gens[p->logs.n - 1];
    pst_log_name(lname, sizeof lname, p->live_gen);
    p->fd = openat(p->dirfd, lname, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (p->fd < 0) {
        pst_errf(err, errlen, "%s/%s: %s", p->dir, lname, strerror(errno));
        return -1;
    }
    p->file_size = size;
    return 0;
}
