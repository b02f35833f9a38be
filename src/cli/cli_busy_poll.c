/* cli_busy_poll: see cli_busy_poll.h. */
#include "cli_busy_poll.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_busy_poll_parse(const char *cmd, const char *v, long *us) {
    if (!v || !strcmp(v, "auto")) {
        *us = -1;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!*v || *end || errno || n < 0 || n > 1000000) {
        fprintf(stderr, "posy %s: --busy-poll-us takes 'auto' or microseconds from 0 to 1000000, got '%s'\n", cmd, v);
        return -1;
    }
    *us = n;
    return 0;
}

int cli_busy_poll_resolve(long us, int engine_on_gpu) {
    if (us >= 0) return (int)us;
    return engine_on_gpu && sysconf(_SC_NPROCESSORS_ONLN) >= CLI_BUSY_POLL_MIN_CORES ? CLI_BUSY_POLL_GPU_US : 0;
}
