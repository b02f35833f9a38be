/* posy_file: see posy_file.h. */
#include "posy_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int posy_map_open(posy_map *m, const char *path, posy_err *err) {
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return posy_err_set(err, POSY_E_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return posy_err_set(err, POSY_E_IO, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return posy_err_set(err, POSY_E_IO, "%s is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return 0;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return posy_err_set(err, POSY_E_IO, "cannot map %s: %s", path, strerror(e));
    m->data = p;
    m->size = (size_t)st.st_size;
    return 0;
}

void posy_map_close(posy_map *m) {
    if (m->data) munmap(m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

char *posy_file_read(const char *path, size_t max_bytes, size_t *size_out, posy_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        posy_err_set(err, POSY_E_IO, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            if (cap >= max_bytes) {
                free(buf);
                fclose(f);
                posy_err_set(err, POSY_E_TOO_LONG, "%s is larger than %zu bytes", path, max_bytes);
                return NULL;
            }
            cap = cap * 2 > max_bytes ? max_bytes : cap * 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) {
        posy_err_set(err, POSY_E_NOMEM, "out of memory reading %s", path);
        return NULL;
    }
    if (bad) {
        free(buf);
        posy_err_set(err, POSY_E_IO, "read error on %s", path);
        return NULL;
    }
    buf[n] = '\0';
    if (size_out) *size_out = n;
    return buf;
}

int posy_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int posy_path_join(char *out, size_t cap, const char *dir, const char *name) {
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--;
    int n = snprintf(out, cap, "%.*s/%s", (int)dl, dir, name);
    return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}
