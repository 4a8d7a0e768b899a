/* window: the daily time window of `tune { window = "01:00-05:00" }`, as
 * arithmetic on the clock: whether a minute is in it, how long until it
 * opens. No I/O; the time zone is the process's, as localtime_r reads it.
 * A window is [start, end) in minutes after midnight, across midnight
 * when end < start; start < 0 is any time. */
#ifndef SMBTUNED_WINDOW_H
#define SMBTUNED_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* The window as the config file gives it: HH:MM-HH:MM. */
void window_str(int start, int end, char *buf, size_t len);

/* Whether minute_of_day is in the window. */
bool window_contains(int start, int end, int minute_of_day);

/* Seconds from now (a local time) until the window next opens, on the
 * wall clock: 0 while it is open, else at least 1 (a leap second counts
 * as :59). */
long window_wait(int start, int end, const struct tm *now);

/* The same from a clock time, in real seconds: a change of the UTC offset
 * (DST) on the way is taken off (see there). 0 while open, else >= 1. */
long window_opens_in(int start, int end, time_t now);

#endif
