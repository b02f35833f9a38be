/* posy_log: one-line, timestamped log records on stderr.
 *
 * Servers log to stderr so that systemd, Docker and Kubernetes collect the
 * lines without configuration.  The level comes from POSY_LOG (error, warn,
 * info, debug; default info) or posy_log_set_level().  A record is written
 * with a single fputs so lines from several threads do not interleave.
 */
#ifndef POSY_LOG_H
#define POSY_LOG_H

typedef enum { POSY_LOG_ERROR = 0, POSY_LOG_WARN, POSY_LOG_INFO, POSY_LOG_DEBUG } posy_log_level;

void posy_log_set_level(posy_log_level level);
posy_log_level posy_log_get_level(void);
/* Parse "error" | "warn" | "info" | "debug"; returns -1 if unknown. */
int posy_log_parse_level(const char *s);
void posy_log(posy_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define POSY_ERROR(...) posy_log(POSY_LOG_ERROR, __VA_ARGS__)
#define POSY_WARN(...)  posy_log(POSY_LOG_WARN, __VA_ARGS__)
#define POSY_INFO(...)  posy_log(POSY_LOG_INFO, __VA_ARGS__)
#define POSY_DEBUG(...) do { if (posy_log_get_level() >= POSY_LOG_DEBUG) posy_log(POSY_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
