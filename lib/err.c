/* err: the reason for a failure, cut with "..." when it is too long. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int err_set(struct err *e, int code, const char *fmt, ...)
{
    va_list ap;

    if (e != NULL) {
        va_start(ap, fmt);
        int n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);

        va_end(ap);
        /* A message that does not fit says so at its end; messages put
         * their reason first, so what is cut is a value or a path. */
        if (n >= (int)sizeof(e->msg))
            memcpy(e->msg + sizeof(e->msg) - 4, "...", 4);
    }
    return code;
}
