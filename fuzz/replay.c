/*
 * replay.c - runs a fuzz target over saved inputs without libFuzzer, so
 * `make test` replays the corpus under gcc, ASan and UBSan (zstd does the
 * same). Usage: replay_<target> DIR_OR_FILE...
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (len == cap) buf = realloc(buf, cap *= 2);
        size_t r = fread(buf + len, 1, cap - len, fp);
        if (r == 0) break;
        len += r;
    }
    fclose(fp);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    long inputs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]) != 0) return 1;
            inputs++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            if (run_file(path) != 0) return 1;
            inputs++;
        }
        if (d) closedir(d);
    }
    if (inputs == 0) {
        fprintf(stderr, "replay: no inputs\n");
        return 1;
    }
    printf("replayed %ld inputs\n", inputs);
    return 0;
}
