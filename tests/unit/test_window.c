/* window: the time window's arithmetic (lib/window.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "tz.h"

#include "window.h"

/* start < 0: any time; [start, end): the start counts, the end does not;
 * 23:00-01:00 runs across midnight. */
static void test_contains(void **state)
{
    static const struct {
        int start, end, minute;
        bool in;
    } cases[] = {
        {-1, -1, 0, true},       {-1, -1, 719, true},    {-1, 60, 1439, true},
        {60, 300, 59, false},    {60, 300, 60, true},    {60, 300, 200, true},
        {60, 300, 299, true},    {60, 300, 300, false},  {60, 300, 1439, false},
        {60, 300, 0, false},     {0, 1, 0, true},        {0, 1, 1, false},
        {1380, 60, 1379, false}, {1380, 60, 1380, true}, {1380, 60, 1439, true},
        {1380, 60, 0, true},     {1380, 60, 59, true},   {1380, 60, 60, false},
        {1380, 60, 720, false},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (window_contains(cases[i].start, cases[i].end, cases[i].minute) != cases[i].in)
            fail_msg("[%d, %d) at %d: expected %d", cases[i].start, cases[i].end, cases[i].minute,
                     cases[i].in);
}

static struct tm at_hms(int h, int m, int sec)
{
    return (struct tm){.tm_hour = h, .tm_min = m, .tm_sec = sec, .tm_mday = 1, .tm_year = 124};
}

/* The wall-clock wait until the window opens: 0 inside it (its start
 * counts, its end does not), else up to the start, across midnight too,
 * and never 0 outside it (a leap second is :59). */
static void test_wait(void **state)
{
    static const struct {
        int start, end, h, m, sec;
        long wait;
    } cases[] = {
        {-1, -1, 12, 0, 0, 0},            /* no window: any time */
        {60, 300, 0, 0, 0, 3600},         /* 01:00-05:00 */
        {60, 300, 0, 59, 59, 1},          /* a second before it opens */
        {60, 300, 0, 59, 60, 1},          /* a leap second: not 0 */
        {60, 300, 1, 0, 0, 0},            /* its start: open */
        {60, 300, 4, 59, 59, 0},          /* its last second */
        {60, 300, 5, 0, 0, 20 * 3600},    /* its end: tomorrow's start */
        {60, 300, 11, 30, 0, 48600},      /* the reviewer's 11:30 */
        {60, 300, 23, 59, 59, 3601},      /* across midnight to its start */
        {1380, 60, 22, 59, 59, 1},        /* 23:00-01:00, across midnight */
        {1380, 60, 23, 0, 0, 0},          /* its start */
        {1380, 60, 0, 30, 0, 0},          /* after midnight, inside */
        {1380, 60, 0, 59, 59, 0},         /* its last second */
        {1380, 60, 1, 0, 0, 22 * 3600},   /* its end */
        {1380, 60, 12, 0, 0, 11 * 3600},  /* midday */
        {1440, 300, 23, 0, 0, 3600},      /* 24:00-05:00: the next midnight */
        {1440, 300, 0, 0, 0, 0},          /* which is open */
        {1320, 1440, 23, 59, 59, 0},      /* 22:00-24:00 */
        {1320, 1440, 0, 0, 0, 22 * 3600}, /* its end, midnight */
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct tm tm = at_hms(cases[i].h, cases[i].m, cases[i].sec);
        long w = window_wait(cases[i].start, cases[i].end, &tm);

        if (w != cases[i].wait)
            fail_msg("[%d, %d) at %02d:%02d:%02d: %ld s, expected %ld", cases[i].start,
                     cases[i].end, cases[i].h, cases[i].m, cases[i].sec, w, cases[i].wait);
    }
    /* every second of a day: 0 exactly inside; outside, the wait ends on
     * the start's minute, to the second, within a day */
    for (int sec = 0; sec < 86400; sec += 7) {
        struct tm tm = at_hms(sec / 3600, sec / 60 % 60, sec % 60);
        long w = window_wait(1380, 60, &tm);

        assert_int_equal(w == 0, window_contains(1380, 60, sec / 60));
        if (w > 0) {
            assert_true(w < 86400);
            assert_int_equal((sec + w) % 86400, 1380 * 60);
        }
    }
}

/* Real seconds across a DST change: the wall clock jumps, the wait does
 * not. UTC instants of 2024 (DST began 31 March at 01:00 UTC, ended 27
 * October at 01:00 UTC). */
static void test_opens_in_across_dst(void **state)
{
    static const struct {
        long now; /* unix seconds */
        int start, end;
        long wait;
    } cases[] = {
        /* 31 Mar 00:00 CET; 04:00-05:00 opens at 04:00 CEST, 02:00 UTC:
         * 3 h, not the wall clock's 4 */
        {1711839600L, 240, 300, 3 * 3600},
        /* 30 Mar 12:00 CET, the day before: 15 h, not 16 */
        {1711796400L, 240, 300, 15 * 3600},
        /* 31 Mar 00:00 CET; 02:30-05:00 starts in the hour that does not
         * exist: at 03:30 CEST, inside (not at 01:30 CET, outside) */
        {1711839600L, 150, 300, 150 * 60},
        /* 30 Mar 12:00 CET; 02:00-03:00 does not exist on 31 Mar: the
         * next day's, 1 Apr 02:00 CEST (00:00 UTC), 37 h */
        {1711796400L, 120, 180, 37 * 3600},
        /* 27 Oct 00:00 CEST; 04:00-05:00 opens at 04:00 CET, 03:00 UTC:
         * 5 h, not 4 */
        {1729980000L, 240, 300, 5 * 3600},
        /* 27 Oct 00:00 CEST; 02:30-03:00: the first 02:30, still CEST */
        {1729980000L, 150, 180, 150 * 60},
        /* a day without a change: the wall clock's wait */
        {1718748000L, 240, 300, 4 * 3600},
        /* inside: 0 */
        {1711839600L, 1380, 60, 0},
    };
    char *was = tz_set(TZ_CET);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        long w = window_opens_in(cases[i].start, cases[i].end, (time_t)cases[i].now);

        if (w != cases[i].wait) {
            tz_restore(was);
            fail_msg("[%d, %d) from %ld: %ld s, expected %ld", cases[i].start, cases[i].end,
                     cases[i].now, w, cases[i].wait);
        }
    }
    tz_restore(was);
}

/* As the config file gives it, midnight as 24:00 when it is the end. */
static void test_str(void **state)
{
    char buf[24];

    (void)state;
    window_str(60, 300, buf, sizeof(buf));
    assert_string_equal(buf, "01:00-05:00");
    window_str(1380, 1440, buf, sizeof(buf));
    assert_string_equal(buf, "23:00-24:00");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contains),
        cmocka_unit_test(test_str),
        cmocka_unit_test(test_wait),
        cmocka_unit_test(test_opens_in_across_dst),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
