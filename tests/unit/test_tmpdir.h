/* test_tmpdir: a scratch model directory for the unit tests that write
 * model files byte by byte (test_config, test_static): g_dir, made fresh
 * per case, files written relative to it (one folder level created on the
 * way), and removed with everything in it at the end.  Include after
 * posy_test.h (CHECK_MSG). */
#ifndef TEST_TMPDIR_H
#define TEST_TMPDIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[64];

static void put_bytes(const char *rel, const void *data, size_t n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, rel);
    char *slash = strrchr(p, '/');
    if (slash > p + strlen(g_dir)) {
        *slash = 0;
        mkdir(p, 0700);
        *slash = '/';
    }
    FILE *f = fopen(p, "wb");
    if (!f) { CHECK_MSG(0, "cannot write %s", p); return; }
    fwrite(data, 1, n, f);
    fclose(f);
}

static void put(const char *rel, const char *text) { put_bytes(rel, text, strlen(text)); }

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static void fresh_dir(void) {
    if (g_dir[0]) nftw(g_dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
    snprintf(g_dir, sizeof g_dir, "/tmp/posy_test_XXXXXX");
    if (!mkdtemp(g_dir)) CHECK_MSG(0, "mkdtemp failed");
}

/* The last case: the scratch directory goes, and is checked gone. */
static void test_cleanup(void) {
    char was[sizeof g_dir];
    snprintf(was, sizeof was, "%s", g_dir);
    if (g_dir[0]) nftw(g_dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
    g_dir[0] = 0;
    CHECK_MSG(!was[0] || access(was, F_OK) != 0, "%s is still there", was);
}

#endif
