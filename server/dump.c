/*
 * dump.c - DUMP and RESTORE, so that a filter moves between bloomkit-server
 * and Redis with the bloomkit module (module/module.c) in either direction.
 * The payload format, its encoder and its validating decoder are in
 * dump_codec.c.
 *
 * A restored key is logged as RESTORE key 0 payload REPLACE, its expiry as
 * PEXPIREAT (keyspace.c), so a replay gives the same key with the same
 * absolute expiry.
 */
#include <stdlib.h>

#include "dump.h"
#include "ops.h"

/*==========================================================================
 * The commands
 *==========================================================================*/

void bks_cmd_dump(bks_client *c, bks_session *s, bkc_reply *r, int argc, const bkc_str *argv)
{
    (void)c;
    (void)argc;
    bkc_key *k = bks_host_vt.open(s, argv[1], BKC_OPEN_WHOLE);   /* no adds meanwhile */
    if (!k) {   /* a key found corrupt in its snapshot file says so */
        const char *why = bks_host_vt.open_error(s);
        r->vt->error(r, why ? why : "ERR out of memory");
        return;
    }
    bkc_value *v = bks_host_vt.value(k);
    if (!v || v->kind == BKC_KIND_LOADING) {
        bks_host_vt.close(k);
        r->vt->null(r);
        return;
    }
    bks_outbuf out = {0};
    int rc = bks_dump_encode(v, &out);
    bks_host_vt.close(k);
    if (rc < 0)
        r->vt->error(r, "ERR out of memory");
    else
        r->vt->bulk(r, out.p, out.len);
    bks_outbuf_free(&out);
}

/* RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f] */
void bks_cmd_restore(bks_client *c, bks_session *s, bkc_reply *r, int argc,
                     const bkc_str *argv)
{
    (void)c;
    int replace = 0, absttl = 0;
    long long ttl;
    for (int i = 4; i < argc; i++) {
        long long ignored;
        if (bkc_streq(argv[i], "REPLACE")) {
            replace = 1;
        } else if (bkc_streq(argv[i], "ABSTTL")) {
            absttl = 1;
        } else if ((bkc_streq(argv[i], "IDLETIME") || bkc_streq(argv[i], "FREQ")) &&
                   i + 1 < argc) {
            /* no LRU/LFU here: accepted (redis-cli --pipe, MIGRATE use them), ignored */
            if (!bkc_parse_ll(argv[++i], &ignored) || ignored < 0) {
                r->vt->error(r, "ERR Invalid IDLETIME or FREQ value, must be >= 0");
                return;
            }
        } else {
            r->vt->error(r, "ERR syntax error");
            return;
        }
    }
    if (!bkc_parse_ll(argv[2], &ttl)) {
        r->vt->error(r, "ERR value is not an integer or out of range");
        return;
    }
    if (ttl < 0) {
        r->vt->error(r, "ERR Invalid TTL value, must be >= 0");
        return;
    }
    char err[512];
    bkc_value *v = bks_restore_decode((const unsigned char *)argv[3].ptr, argv[3].len,
                                      g_srv.cfg.max_bulk_len, err, sizeof err);
    if (!v) {
        r->vt->error(r, err);
        return;
    }
    uint64_t now = bks_now_ms();
    uint64_t at = ttl == 0 ? 0 : absttl ? (uint64_t)ttl : now + (uint64_t)ttl;
    bkc_key *k = bks_host_vt.open(s, argv[1], BKC_OPEN_WRITE);
    if (!k) {
        const char *why = bks_host_vt.open_error(s);
        bkc_value_free(v);
        r->vt->error(r, why ? why : "ERR out of memory");
        return;
    }
    if (bks_host_vt.kind(k) != BKC_KIND_NONE && !replace) {
        bks_host_vt.close(k);
        bkc_value_free(v);
        r->vt->error(r, "BUSYKEY Target key name already exists.");
        return;
    }
    if (at && at <= now) {
        /* already expired: Redis deletes the old value (REPLACE) and stores nothing */
        int had = bks_host_vt.kind(k) != BKC_KIND_NONE;
        bkc_value_free(v);
        if (had) {
            bks_host_vt.set(k, NULL);
            bkc_str del[2] = {{"DEL", 3}, argv[1]};
            bks_host_vt.wrote(s, 2, del);
        }
        bks_host_vt.close(k);
        r->vt->simple(r, "OK");
        return;
    }
    int existed = bks_host_vt.kind(k) != BKC_KIND_NONE;
    int rc = bks_host_vt.set(k, v);
    if (rc != BK_OK) {
        bks_host_vt.close(k);
        r->vt->error(r, rc == BK_ELIMIT
                            ? "OOM command not allowed when used memory > 'maxmemory'."
                            : "ERR out of memory");
        return;
    }
    bkc_str logged[5] = {{"RESTORE", 7}, argv[1], {"0", 1}, argv[3], {"REPLACE", 7}};
    bks_host_vt.wrote(s, 5, logged);
    bks_host_vt.close(k);
    if (at && bks_ks_set_expire(s->ks, s, argv[1], at, 0) < 0) {
        /* no memory for the expiry: a key that outlives its TTL would be
         * wrong, so the restore is undone (logged as DEL) */
        bks_ks_delete(s->ks, s, argv[1]);
        r->vt->error(r, "ERR out of memory");
        return;
    }
    if (!at && existed)
        bks_ks_set_expire(s->ks, s, argv[1], 0, 0);   /* the old value's expiry goes */
    r->vt->simple(r, "OK");
}
