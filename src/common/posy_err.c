/* posy_err: formatting of error messages into the fixed buffer of posy_err.h. */
#include "posy_err.h"

#include <stdio.h>
#include <string.h>

int posy_err_set(posy_err *err, posy_status code, const char *fmt, ...) {
    if (!err) return (int)code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->code = code;
    return (int)code;
}

int posy_err_wrap(posy_err *err, const char *fmt, ...) {
    if (!err) return 0;
    char prefix[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t pl = strlen(prefix);
    if (pl > sizeof err->msg - 3) pl = sizeof err->msg - 3;
    memcpy(err->msg, prefix, pl);
    memcpy(err->msg + pl, ": ", 2);
    size_t room = sizeof err->msg - pl - 3, ol = strlen(old);
    if (ol > room) ol = room;
    memcpy(err->msg + pl + 2, old, ol);
    err->msg[pl + 2 + ol] = '\0';
    return (int)err->code;
}
