/* journal: priority-prefixed lines on stderr (journald reads the prefix). */
#include "journal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void journal_log(int prio, const char *fmt, ...)
{
    char fallback[2048], *msg = NULL;
    va_list ap;
    int n;

    /* A line of any length: smb.conf values and paths have no bound, and a
     * line cut at a fixed size loses what comes last (the file:line, the
     * reason). */
    va_start(ap, fmt);
    n = vasprintf(&msg, fmt, ap);
    va_end(ap);
    if (n < 0) {
        /* Out of memory: still log, cut with a visible marker. */
        msg = NULL;
        va_start(ap, fmt);
        n = vsnprintf(fallback, sizeof(fallback), fmt, ap);
        va_end(ap);
        if (n >= (int)sizeof(fallback))
            memcpy(fallback + sizeof(fallback) - 4, "...", 4);
    }
    char *line = msg ? msg : fallback;

    /* One event, one line: a newline inside would start an unprefixed
     * entry at the default priority. */
    for (char *p = line; (p = strchr(p, '\n')) != NULL;)
        *p = ' ';
    fprintf(stderr, "<%d>%s\n", prio & 7, line);
    free(msg);
}
