/*
 * cmd_common.c - argument parsing and creation steps that more than one
 * kind's commands share (declared in cmd_internal.h).
 */
#include <stdio.h> /* snprintf */

#include "cmd_internal.h"

int bkc__insert_options(bkc_ctx *c, int argc, const bkc_str *argv, int *nocreate,
                        bkc__option_fn option, void *opts)
{
    int i;
    *nocreate = 0;
    for (i = 2; i < argc; i++) {
        if (bkc_streq(argv[i], "ITEMS")) {
            i++;
            break;
        }
        if (bkc_streq(argv[i], "NOCREATE"))
            *nocreate = 1;
        else if (!option(c, argc, argv, &i, opts))
            return 0;
    }
    if (i >= argc || !bkc_streq(argv[i - 1], "ITEMS")) {
        bkc__arity_error(c, argv); /* no ITEMS, or nothing after it */
        return 0;
    }
    return i;
}

int bkc__may_make(bkc_ctx *c, uint64_t bytes)
{
    if (bytes == UINT64_MAX) {
        bkc__err(c, BKC_ERR_TOO_LARGE);
        return 0;
    }
    return bkc__fits(c, bytes);
}

bkc_value *bkc__made(bkc_ctx *c, int rc, bkc_kind kind, bk_filter *f)
{
    if (rc == BK_OK) return bkc__value_of(c, kind, f);
    if (rc == BK_ESIZE) bkc__err(c, BKC_ERR_TOO_LARGE);
    else bkc__lib_error(c, rc);
    return NULL;
}

int bkc__arg_int_options(bkc_ctx *c, int argc, const bkc_str *argv, int from,
                         bkc__int_option *opts, size_t n)
{
    char msg[96];
    for (int i = from; i < argc; i += 2) {
        bkc__int_option *o = NULL;
        for (size_t j = 0; j < n && o == NULL; j++)
            if (bkc_streq(argv[i], opts[j].name)) o = &opts[j];
        if (o == NULL) {
            bkc__err(c, BKC_ERR_UNKNOWN_ARG);
            return 0;
        }
        if (i + 1 >= argc) {
            bkc__arity_error(c, argv);
            return 0;
        }
        long long v;
        if (!bkc_parse_ll(argv[i + 1], &v) || v < o->lo || v > o->hi) {
            snprintf(msg, sizeof(msg), "ERR %s must be between %lld and %lld", o->label, o->lo,
                     o->hi);
            bkc__err(c, msg);
            return 0;
        }
        *o->value = v;
        o->given = 1;
    }
    return 1;
}
