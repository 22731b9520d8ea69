/*
 * fuzz_loader.c - libFuzzer target for the chunked import (BF.LOADCHUNK):
 * the input is cut into chunks whose sizes come from its first bytes, and
 * fed with cursors that are sometimes wrong; any sequence gives a filter or
 * an error, never a crash, a leak or a half-built filter.
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
    if (size < 2) return 0;
    unsigned char *copy = malloc(size);
    if (copy == NULL) abort();
    memcpy(copy, data, size);
    reseal(copy + 2, size - 2); /* after the two control bytes */
    try_input(copy, size);
    free(copy);
    return 0;
}

static int try_input(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    size_t chunk = (size_t)data[0] * 7 + 1; /* 1 .. 1786 bytes */
    int skew = data[1] & 3;                 /* 0: honest cursors */
    data += 2;
    size -= 2;

    bk_loader *l;
    if (bk_loader_create(&l, UINT64_C(1) << 28) != BK_OK) abort();
    uint64_t fed = 0;
    int rc = BK_OK;
    while (rc == BK_OK && fed < size) {
        size_t n = size - fed < chunk ? (size_t)(size - fed) : chunk;
        uint64_t cursor = fed + n;
        if (skew == 3 && fed > 0) cursor += 1; /* a wrong cursor */
        rc = bk_loader_feed(l, cursor, data + fed, n);
        fed += n;
    }
    bk_filter *f = NULL;
    int frc = bk_loader_finish(l, &f);
    if ((frc == BK_OK) != (f != NULL)) abort();
    if (frc == BK_OK && rc != BK_OK) abort(); /* an error is sticky */
    if (f != NULL) {
        bk_filter_info info;
        if (bk_filter_get_info(f, &info) != BK_OK) abort();
        bk_filter_contains(f, "x", 1);
    }
    bk_filter_free(f);
    bk_loader_free(l);
    return 0;
}
