/*
 * damage.h - damaged file images for the format tests of a family: fields
 * overwritten and the image resealed (fuzz/reseal.h) so that the checksums
 * pass and only the family's own checks stand between the bytes and a
 * filter. Include after testutil.h.
 */
#ifndef BK_TEST_DAMAGE_H
#define BK_TEST_DAMAGE_H

#include "../fuzz/reseal.h"

/* A field of an image: `bytes` little-endian bytes at `off` set to value. */
typedef struct tu_damage {
    size_t off;
    uint64_t value;
    int bytes;
} tu_damage;

static inline void tu_put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Each case applied alone to a copy of good (len bytes), resealed: the
 * load must fail with BK_ECORRUPT and return no filter. */
static inline void tu_expect_corrupt(const unsigned char *good, size_t len,
                                     const tu_damage *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char *bad = malloc(len);
        assert_non_null(bad);
        memcpy(bad, good, len);
        tu_put_le(bad + cases[i].off, cases[i].value, cases[i].bytes);
        reseal(bad, len);
        bk_filter *g = NULL;
        int rc = bk_filter_deserialize(&g, bad, len);
        if (rc != BK_ECORRUPT) fail_msg("case %zu: got %s, want ECORRUPT", i, bk_errname(rc));
        assert_null(g);
        free(bad);
    }
}

#endif /* BK_TEST_DAMAGE_H */
