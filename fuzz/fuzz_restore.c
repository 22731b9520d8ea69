/*
 * fuzz_restore.c - libFuzzer target for RESTORE payloads
 * (server/dump_codec.c, bks_restore_decode): what a client sends as the
 * third argument of RESTORE, in Redis's DUMP format: RDB length
 * encodings, integer-encoded and LZF-compressed strings, module opcodes
 * (a single string, or the module's UINT total and string pieces), the
 * 2-byte version and the CRC-64 trailer, then the value container
 * (bkc_value_decode).
 *
 * The input is the payload. The CRC would stop almost every mutation at
 * once, so, as the file targets do with reseal.h, each input is also tried
 * with its checksums recomputed: those of every value container (BKCV)
 * and filter image stored uncompressed in it, then the trailer's CRC.
 * libFuzzer builds skip the inner checksums anyway; replay builds (make
 * test) compare them, and without the resealed copy a saved input would
 * stop at the first one instead of reaching what the fuzzer reached.
 *
 * Checked, for every input:
 *  - a refused payload has an error text ("ERR ..."), an accepted one a
 *    value of one of bloomkit's kinds (never a LOADING one);
 *  - an accepted value is usable (its memory, a lookup in each filter)
 *    and round-trips: its DUMP restores to the same kind, and dumping that
 *    gives the same bytes again.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bloomkit.h"
#include "dump.h"
#include "reseal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_STRING_LEN ((uint64_t)512 << 20) /* the server's proto-max-bulk-len */

#define FUZZ_NAME "fuzz_restore"
#include "fuzzcheck.h"

static void check_value(const bkc_value *v)
{
    CHECK(v->kind != BKC_KIND_NONE && v->kind != BKC_KIND_LOADING &&
          bkc_kind_type_name(v->kind) != NULL);
    (void)bkc_value_bytes(v);
    for (uint32_t i = 0; i < v->nfilters; i++) {
        CHECK(v->filters[i] != NULL);
        bk_filter_contains(v->filters[i], "x", 1);
    }
}

/* DUMP of v, RESTORE of that, DUMP again: the same kind and bytes. */
static void check_round_trip(const bkc_value *v)
{
    bks_outbuf first = {0}, second = {0};
    CHECK(bks_dump_encode(v, &first) == 0);
    char err[512] = "";
    bkc_value *again = bks_restore_decode((const unsigned char *)first.p, first.len,
                                          MAX_STRING_LEN, err, sizeof err);
    if (again == NULL) fprintf(stderr, "fuzz_restore: own DUMP refused: %s\n", err);
    CHECK(again != NULL);
    CHECK(again->kind == v->kind && again->nfilters == v->nfilters);
    CHECK(bks_dump_encode(again, &second) == 0);
    CHECK(second.len == first.len && memcmp(second.p, first.p, first.len) == 0);
    bkc_value_free(again);
    bks_outbuf_free(&first);
    bks_outbuf_free(&second);
}

static void try_payload(const unsigned char *p, size_t len)
{
    char err[512];
    err[0] = '\0';
    bkc_value *v = bks_restore_decode(p, len, MAX_STRING_LEN, err, sizeof err);
    if (v == NULL) {
        CHECK(strncmp(err, "ERR ", 4) == 0);
        return;
    }
    check_value(v);
    check_round_trip(v);
    bkc_value_free(v);
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* Reseal each value container found in b[0, n) (docs/COMMANDS.md "Value
 * encoding"): the images of its filters first, then its header check. */
static void reseal_containers(unsigned char *b, size_t n)
{
    for (size_t at = 0; at + 56 <= n; at++) {
        if (memcmp(b + at, "BKCV", 4) != 0) continue;
        uint64_t nfilters = get_le(b + at + 16, 4);
        size_t pos = at + 56;
        for (uint64_t i = 0; i < nfilters && i < 64 && pos + 8 <= n; i++) {
            uint64_t len = get_le(b + pos, 8);
            pos += 8;
            if (len > n - pos) break;
            reseal(b + pos, (size_t)len);
            pos += (size_t)len;
        }
        uint64_t check = bk_hash_key(b + at, 48, 0).lo;
        for (int i = 0; i < 8; i++) b[at + 48 + i] = (unsigned char)(check >> (8 * i));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    try_payload(data, size);
    if (size < 10) return 0;
    /* the same payload with a CRC that matches it */
    unsigned char *copy = malloc(size);
    CHECK(copy != NULL);
    memcpy(copy, data, size);
    reseal_containers(copy, size - 10); /* not the version and CRC trailer */
    uint64_t crc = bks_crc64(0, copy, size - 8);
    for (int i = 0; i < 8; i++) copy[size - 8 + i] = (unsigned char)(crc >> (8 * i));
    if (memcmp(copy, data, size) != 0) try_payload(copy, size);
    free(copy);
    return 0;
}
