/*
 * fuzz_deserialize.c - libFuzzer target: any bytes given to
 * bk_filter_deserialize() give a filter or an error, never a crash, a
 * leak or undefined behaviour. An accepted filter must also survive use and
 * a round trip to identical bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bloomkit.h"
#include "reseal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int try_input(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    try_input(data, size);
    unsigned char *copy = malloc(size ? size : 1);
    if (copy == NULL) abort();
    memcpy(copy, data, size);
    reseal(copy, size);
    try_input(copy, size);
    free(copy);
    return 0;
}

static int try_input(const uint8_t *data, size_t size)
{
    bk_filter *f = NULL;
    int rc = bk_filter_deserialize(&f, data, size);
    if (rc != BK_OK) {
        if (f != NULL || bk_strerror(rc)[0] == '\0') abort();
        return 0;
    }
    bk_filter_info info;
    if (bk_filter_get_info(f, &info) != BK_OK) abort();
    bk_filter_contains(f, data, size < 16 ? size : 16);
    bk_filter_add(f, "fuzz", 4);
    bk_filter_remove(f, "fuzz", 4); /* ENOTSUP for the Bloom families */
    if (!bk_filter_contains(f, "fuzz", 4) && bk_filter_family(f) == BK_FAMILY_BLOOM)
        abort(); /* no false negatives, even in a file we did not write */

    /* an accepted file re-serialises to a valid file (in fuzzing builds
     * checksums are not compared, so this also checks that whatever the
     * family accepted it can write back) */
    uint64_t n = bk_filter_serialized_size(f);
    unsigned char *buf = malloc(n ? (size_t)n : 1);
    if (buf == NULL) abort();
    if (bk_filter_serialize(f, buf, (size_t)n) != BK_OK) abort();
    bk_filter *g = NULL;
    if (bk_filter_deserialize(&g, buf, (size_t)n) != BK_OK) abort();
    bk_filter_free(g);
    free(buf);
    bk_filter_free(f);
    return 0;
}
