/* tz: see tz.h. */
#include "tz.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

char *tz_set(const char *tz)
{
    char *was = getenv("TZ") ? strdup(getenv("TZ")) : NULL;

    setenv("TZ", tz, 1);
    tzset();
    return was;
}

void tz_restore(char *was)
{
    if (was != NULL)
        setenv("TZ", was, 1);
    else
        unsetenv("TZ");
    tzset();
    free(was);
}
