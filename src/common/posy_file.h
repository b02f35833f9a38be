/* posy_file: whole-file reads and read-only memory maps.
 *
 * Model weights are memory-mapped (never copied when the on-disk dtype is
 * what the backend wants); small JSON files are read whole.  Both report
 * errors that name the path.
 */
#ifndef POSY_FILE_H
#define POSY_FILE_H

#include <stddef.h>
#include "posy_err.h"

typedef struct {
    void *data;
    size_t size;
} posy_map;

/* Map `path` read-only.  An empty file maps to data=NULL,size=0. */
int posy_map_open(posy_map *m, const char *path, posy_err *err);
void posy_map_close(posy_map *m);

/* Read a whole file into a NUL-terminated malloc'd buffer (size excludes the
 * NUL).  Files over `max_bytes` are refused. */
char *posy_file_read(const char *path, size_t max_bytes, size_t *size_out, posy_err *err);

int posy_file_exists(const char *path);

/* Join a directory and a relative name into `out` (size `cap`); returns 0 on
 * success, -1 if it does not fit. */
int posy_path_join(char *out, size_t cap, const char *dir, const char *name);

#endif
