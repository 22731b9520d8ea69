/* Built against an installed bloomkit, by CMake and by pkg-config. */
#include <bloomkit.h>
#include <stdio.h>

int main(void)
{
    bk_bloom *f;
    if (bk_bloom_create(&f, 100, 0.01, BK_DEFAULT_SEED) != BK_OK) return 1;
    bk_bloom_add(f, "installed", 9);
    int ok = bk_bloom_contains(f, "installed", 9) == 1;
    bk_bloom_free(f);
    printf("installed bloomkit %s works\n", bk_version_string());
    return ok ? 0 : 1;
}
