/*
 * gen_urls.c - URL-like lines for the dedup benchmark (bench/dedup.sh).
 *
 *     gen_urls LINES [REPEAT_FRACTION [SEED]] > urls.txt
 *
 * Writes LINES lines; each is, with probability REPEAT_FRACTION (default
 * 0.3), a repeat of a uniformly chosen earlier distinct URL, else a new one.
 * The output is a pure function of the arguments, and the number of
 * distinct lines is printed on stderr ("distinct N"): the exact answer the
 * dedup tools are measured against. Lines look like
 *     https://www17.example-342.com/a/9f1c2e0b7d3a5468/item?id=123456
 * (about 60 bytes).
 */
#include <stdint.h> /* uint64_t */
#include <stdio.h>  /* fwrite, fprintf */
#include <stdlib.h> /* strtoull, strtod */

/* splitmix64 (Steele, Lea & Flood 2014): a fast, well-mixed generator. */
static uint64_t mix(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static int url(char *buf, size_t cap, uint64_t id)
{
    uint64_t s = id;
    uint64_t h = mix(&s);
    return snprintf(buf, cap, "https://www%u.example-%u.com/a/%016llx/item?id=%llu\n",
                    (unsigned)(h % 32), (unsigned)((h >> 8) % 1000),
                    (unsigned long long)(h ^ (h >> 17)), (unsigned long long)id);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gen_urls LINES [REPEAT_FRACTION [SEED]]\n");
        return 2;
    }
    uint64_t lines = strtoull(argv[1], NULL, 10);
    double repeat = argc > 2 ? strtod(argv[2], NULL) : 0.3;
    uint64_t state = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    uint64_t threshold = (uint64_t)(repeat * 18446744073709551615.0);
    static char out[1 << 20];
    size_t used = 0;
    uint64_t distinct = 0;
    for (uint64_t i = 0; i < lines; i++) {
        uint64_t r = mix(&state), id;
        if (distinct > 0 && r < threshold)
            id = mix(&state) % distinct;     /* a repeat */
        else
            id = distinct++;
        if (sizeof(out) - used < 128) {
            fwrite(out, 1, used, stdout);
            used = 0;
        }
        used += (size_t)url(out + used, sizeof(out) - used, id);
    }
    fwrite(out, 1, used, stdout);
    fprintf(stderr, "distinct %llu\n", (unsigned long long)distinct);
    return ferror(stdout) ? 1 : 0;
}
