/* posy_err: the one error carrier used across modules.
 *
 * Two regimes (STYLE.md): at start-up an error is reported and the program
 * exits from main(); on the request path it travels back to the client.  In
 * both, the message must name the file, tensor, flag or field at fault, so
 * every fallible function takes a `posy_err *` and fills it on failure.
 * The struct is a fixed buffer: setting an error never allocates, so it
 * works on out-of-memory paths too.  A NULL `posy_err *` is allowed.
 */
#ifndef POSY_ERR_H
#define POSY_ERR_H

#include <stdarg.h>
#include <stddef.h>

typedef enum {
    POSY_OK = 0,
    POSY_E_INVALID = 1,   /* bad input from outside (flag, file, request) */
    POSY_E_IO = 2,        /* file system or network error                 */
    POSY_E_NOMEM = 3,     /* allocation failed                             */
    POSY_E_UNSUPPORTED = 4, /* valid input that posy does not handle       */
    POSY_E_TOO_LONG = 5,  /* input over a limit                            */
    POSY_E_BUSY = 6,      /* try again later (queue full)                  */
    POSY_E_INTERNAL = 7,  /* a bug or a device failure                     */
} posy_status;

typedef struct posy_err {
    posy_status code;
    char msg[512];
} posy_err;

/* Fill `err` (if not NULL) and return `code`, so callers can write
 * `return posy_err_set(err, POSY_E_IO, "open %s: %s", path, strerror(errno));` */
int posy_err_set(posy_err *err, posy_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix an existing message: "loading model.safetensors: <old message>". */
int posy_err_wrap(posy_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static inline void posy_err_clear(posy_err *err) {
    if (err) { err->code = POSY_OK; err->msg[0] = '\0'; }
}

#endif
