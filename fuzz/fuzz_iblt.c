/*
 * fuzz_iblt.c - libFuzzer target for the reconciliation messages
 * (docs/FORMAT.md): any bytes given to bk_iblt_deserialize() or
 * bk_strata_deserialize() give a table or an error, never a crash, a leak,
 * a hang or undefined behaviour; an accepted table decodes (completely or
 * with BK_EDECODE, never listing more ids than it has cells) and
 * serialises back to the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bloomkit.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether an input was refused with rc, which must then have made nothing
 * and name an error with a message (abort otherwise). */
static int refused(int rc, const void *made)
{
    if (rc == BK_OK) return 0;
    if (made != NULL || bk_strerror(rc)[0] == '\0') abort();
    return 1;
}

static void try_iblt(const uint8_t *data, size_t size)
{
    bk_iblt *t = NULL;
    int rc = bk_iblt_deserialize(&t, data, size);
    if (refused(rc, t)) return;
    size_t cells = (size_t)bk_iblt_cells(t);
    if (cells <= (size_t)1 << 20) { /* decoding copies the table */
        uint64_t *a = malloc(cells * sizeof(uint64_t));
        uint64_t *b = malloc(cells * sizeof(uint64_t));
        if (a == NULL || b == NULL) abort();
        size_t na = 0, nb = 0;
        rc = bk_iblt_decode(t, a, &na, b, &nb, cells);
        if ((rc != BK_OK && rc != BK_EDECODE) || na + nb > cells) abort();
        free(a);
        free(b);
    }
    size_t len = bk_iblt_serialized_size(t);
    unsigned char *out = malloc(len);
    if (out == NULL || bk_iblt_serialize(t, out, len) != BK_OK) abort();
    /* fuzzing builds skip the checksum: compare what precedes it */
    if (len != size || memcmp(out, data, len - 8) != 0) abort();
    free(out);
    bk_iblt_free(t);
}

static void try_strata(const uint8_t *data, size_t size)
{
    bk_strata *s = NULL;
    int rc = bk_strata_deserialize(&s, data, size);
    if (refused(rc, s)) return;
    uint64_t d = 0;
    if (bk_strata_estimate(s, s, &d) != BK_OK || d != 0) abort(); /* A - A */
    bk_strata *empty;
    if (bk_strata_create(&empty, 0) != BK_OK) abort();
    bk_strata_estimate(s, empty, &d); /* BK_OK or BK_EINCOMPAT */
    bk_strata_free(empty);
    bk_strata_free(s);
}

/* Replay builds compare checksums: try a copy with the trailer fixed too,
 * so that saved inputs reach the checks behind it. */
static void reseal(unsigned char *b, size_t n)
{
    if (n < 8) return;
    uint64_t sum = XXH3_64bits(b, n - 8);
    for (int i = 0; i < 8; i++) b[n - 8 + i] = (unsigned char)(sum >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    try_iblt(data, size);
    try_strata(data, size);
    unsigned char *copy = malloc(size ? size : 1);
    if (copy == NULL) abort();
    memcpy(copy, data, size);
    reseal(copy, size);
    try_iblt(copy, size);
    try_strata(copy, size);
    free(copy);
    return 0;
}
