/* window: see window.h. */
#include "window.h"

#include <stdio.h>

void window_str(int start, int end, char *buf, size_t len)
{
    snprintf(buf, len, "%02d:%02d-%02d:%02d", start / 60, start % 60, end / 60, end % 60);
}

bool window_contains(int start, int end, int m)
{
    if (start < 0)
        return true;
    if (start <= end)
        return m >= start && m < end;
    return m >= start || m < end; /* across midnight */
}

long window_wait(int start, int end, const struct tm *now)
{
    /* tm_sec is 60 in a leap second: as :59, so that the wait outside the
     * window is never 0 (the minute is then not start's) */
    long sec = now->tm_hour * 3600L + now->tm_min * 60L + (now->tm_sec > 59 ? 59 : now->tm_sec);

    if (window_contains(start, end, now->tm_hour * 60 + now->tm_min))
        return 0;
    /* start may be 24:00, which is the next midnight */
    return ((long)start * 60 - sec + 2 * 86400L) % 86400L;
}

static int minute_of(time_t at, struct tm *tm)
{
    localtime_r(&at, tm);
    return tm->tm_hour * 60 + tm->tm_min;
}

/* window_opens_in for one wall-clock wait, corrected by the
 * offset change on the way; its end may still be outside the window. */
static long opens_once(int start, int end, time_t now)
{
    struct tm tm, then;
    long w, real;

    minute_of(now, &tm);
    w = window_wait(start, end, &tm);
    if (w == 0)
        return 0;
    /* The wall clock jumps at a DST change: an hour ahead in spring, so
     * that the wall-clock wait reaches the start an hour late, an hour
     * back in autumn (an hour early). The offset at the end of the wait
     * against now's corrects it, unless that lands outside the window:
     * in spring, when the start is in the hour that does not exist, the
     * wall-clock wait ends inside the window (up to an hour after it
     * opened). The next cycle checks the window anyway, recomputed from
     * localtime. */
    minute_of(now + w, &then);
    real = w - (then.tm_gmtoff - tm.tm_gmtoff);
    if (real != w && real >= 1 && window_contains(start, end, minute_of(now + real, &then)))
        w = real;
    return w;
}

long window_opens_in(int start, int end, time_t now)
{
    struct tm tm;
    long total = 0;

    /* A window wholly in the hour that does not exist (02:00-03:00 on
     * the spring day, in Europe) is missed by the wait to its start:
     * from there, wait again, for the next day's. Twice is enough: a
     * day has at most one change. */
    for (int i = 0; i < 3; i++) {
        long w = opens_once(start, end, now + total);

        if (w == 0)
            break;
        total += w;
        if (window_contains(start, end, minute_of(now + total, &tm)))
            break;
    }
    return total;
}
