/*
 * fuzzcheck.h - the fuzz targets' CHECK: a broken invariant prints the
 * target's name (FUZZ_NAME, defined before including this), the line and
 * the condition, then aborts, which libFuzzer and the corpus replay
 * (replay.c) report as a crash. Header-only.
 */
#ifndef BK_FUZZCHECK_H
#define BK_FUZZCHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, FUZZ_NAME ": check failed at line %d: %s\n", __LINE__, #cond); \
            abort();                                                                    \
        }                                                                               \
    } while (0)

#endif
