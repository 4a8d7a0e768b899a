/* journal: priority-prefixed lines on stderr (journald reads the prefix). */
#include "journal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void journal_log(int prio, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* One event, one line: a newline inside would start an unprefixed
     * entry at the default priority. */
    for (char *p = msg; (p = strchr(p, '\n')) != NULL;)
        *p = ' ';
    fprintf(stderr, "<%d>%s\n", prio & 7, msg);
}
