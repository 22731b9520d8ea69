/*
 * reseal.h - recompute both checksums of a bloomkit file image in place
 * (docs/FORMAT.md: payload checksum at 112, header checksum at 120).
 *
 * Replay builds compare checksums, so a saved input found by libFuzzer
 * (whose builds ignore them) would stop at the first one there; the file
 * targets try a resealed copy too, so the corpus exercises the checks
 * behind the checksums in every build. Inputs too short or with an
 * impossible part count are left as they are.
 */
#ifndef BK_FUZZ_RESEAL_H
#define BK_FUZZ_RESEAL_H

#include <stddef.h>
#include <stdint.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

static uint64_t reseal_get(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void reseal_put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void reseal(unsigned char *b, size_t n)
{
    if (n < 128) return;
    uint64_t nparts = reseal_get(b + 16, 4);
    uint64_t payload_offset = reseal_get(b + 96, 8);
    uint64_t payload_length = reseal_get(b + 104, 8);
    if (nparts == 0 || nparts > 4096 || 128 + 64 * nparts > n) return;
    if (payload_offset <= n && payload_length <= n - payload_offset)
        reseal_put64(b + 112, XXH3_64bits(b + payload_offset, (size_t)payload_length));
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, b, 120);
    XXH3_64bits_update(&st, b + 128, (size_t)(64 * nparts));
    reseal_put64(b + 120, XXH3_64bits_digest(&st));
}

#endif /* BK_FUZZ_RESEAL_H */
