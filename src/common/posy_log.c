/* posy_log: see posy_log.h.  The level is read from POSY_LOG once. */
#include "posy_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_level = -1;

int posy_log_parse_level(const char *s) {
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (s && strcmp(s, names[i]) == 0) return i;
    return -1;
}

void posy_log_set_level(posy_log_level level) { g_level = (int)level; }

posy_log_level posy_log_get_level(void) {
    if (g_level < 0) {
        int l = posy_log_parse_level(getenv("POSY_LOG"));
        g_level = l < 0 ? POSY_LOG_INFO : l;
    }
    return (posy_log_level)g_level;
}

void posy_log(posy_log_level level, const char *fmt, ...) {
    if ((int)level > (int)posy_log_get_level()) return;
    static const char *tags[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, tags[level]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && n < (int)sizeof line) n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof line - 1) n = (int)sizeof line - 2;
    line[n] = '\n';
    line[n + 1] = '\0';
    fputs(line, stderr);
}
