// The public header compiles as C++11 and links against the C library.
#include "bloomkit.h"

#include <cstdio>
#include <cstring>

int main()
{
    bk_bloom *f = nullptr;
    if (bk_bloom_create(&f, 1000, 0.01, BK_DEFAULT_SEED) != BK_OK) return 1;
    const char key[] = "c++";
    bk_bloom_add(f, key, std::strlen(key));
    int found = bk_bloom_contains(f, key, std::strlen(key));
    bk_bloom_free(f);
    if (found != 1) return 1;
    if (std::strcmp(bk_errname(BK_EFULL), "EFULL") != 0) return 1;
    std::printf("header compiles as C++ (bloomkit %s)\n", bk_version_string());
    return 0;
}
