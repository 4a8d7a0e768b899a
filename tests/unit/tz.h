/* tz: the tests' time zone, set and put back. */
#ifndef SMBTUNED_TEST_TZ_H
#define SMBTUNED_TEST_TZ_H

/* A POSIX TZ rule (no tzdata needed): Central Europe, DST from the last
 * Sunday of March 02:00 to the last Sunday of October 03:00. */
#define TZ_CET "CET-1CEST,M3.5.0,M10.5.0/3"

/* Set TZ; returns the old value (malloc'ed, NULL if unset) for tz_restore. */
char *tz_set(const char *tz);
void tz_restore(char *was);

#endif
