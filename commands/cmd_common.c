/*
 * cmd_common.c - argument parsing that more than one kind's commands share
 * (declared in cmd_internal.h).
 */
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
