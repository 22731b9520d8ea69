/*
 * dump.h - DUMP / RESTORE payloads (dump_codec.c): Redis's serialization
 * format of one bloomkit value, shared by the commands (dump.c) and the
 * fuzz target (fuzz/fuzz_restore.c).
 */
#ifndef BKS_DUMP_H
#define BKS_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "command.h" /* bkc_value */
#include "resp.h"    /* bks_outbuf */

/* CRC-64/Jones as Redis computes it (reflected, polynomial
 * 0xad93d23594c935a9, init 0, no final xor), continued from crc over
 * p[0..n). Thread-safe. */
uint64_t bks_crc64(uint64_t crc, const unsigned char *p, size_t n);

/* The DUMP payload of v, written into out (empty: the CRC covers all of
 * out): 0, or -1 (out of memory, or a value that cannot be encoded). */
int bks_dump_encode(const bkc_value *v, bks_outbuf *out);

/* Decode a RESTORE payload p[0..len) into a new value (the caller frees it
 * with bkc_value_free), checking the trailer (version, CRC-64), every
 * length and the container. Strings, once decompressed, are at most
 * max_string_len bytes. NULL when the payload is refused, with the error
 * reply's text in err (Redis's wording where Redis has one). Never reads
 * outside p[0..len), whatever the bytes. */
bkc_value *bks_restore_decode(const unsigned char *p, size_t len, uint64_t max_string_len,
                              char *err, size_t errlen);

#endif /* BKS_DUMP_H */
