/* measure: a probe's result as the search's sample (a timeout in either
 * half) and the deadline of a trial far below the incumbent; the event
 * sources' bookkeeping without a probe. No smbd, no network. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "measure.h"

#define SIZE 64000000LL

static struct probe_result result(enum probe_outcome o, bool wdone, long long wbytes,
                                  long long rbytes)
{
    return (struct probe_result){.outcome = o,
                                 .write_done = wdone,
                                 .write_bytes = wbytes,
                                 .read_bytes = rbytes,
                                 .write_mbps = 40.5,
                                 .read_mbps = 12.25};
}

/* A probe that ended well: both rates, neither a timeout. */
static void test_sample_ok(void **state)
{
    struct probe_result r = result(PROBE_OK, true, SIZE, SIZE);
    struct search_sample x;

    memset(&x, 0xff, sizeof(x)); /* every field is set, whatever was there */
    measure_sample(&r, &x);
    assert_true(x.write == 40.5);
    assert_true(x.read == 12.25);
    assert_false(x.write_timeout);
    assert_false(x.read_timeout);
}

/* The deadline struck while writing: the write rate is a lower bound and
 * there was no read at all. The byte count does not say it: with a
 * duration a direction may run past the size. */
static void test_sample_timeout_in_write(void **state)
{
    struct probe_result r = result(PROBE_TIMEOUT, false, SIZE + 1, 0);
    struct search_sample x;

    measure_sample(&r, &x);
    assert_true(x.write == 40.5);
    assert_true(x.write_timeout);
    assert_true(x.read < 0); /* unmeasured: the search ignores it */
    assert_false(x.read_timeout);
}

/* The writing ended (here by its duration, short of the size), the
 * deadline struck while reading back: the write is a full measurement,
 * the read a lower bound. */
static void test_sample_timeout_in_read(void **state)
{
    struct probe_result r = result(PROBE_TIMEOUT, true, SIZE / 3, SIZE / 4);
    struct search_sample x;

    measure_sample(&r, &x);
    assert_true(x.write == 40.5);
    assert_false(x.write_timeout);
    assert_true(x.read == 12.25);
    assert_true(x.read_timeout);
}

/* Only a timeout marks a bound: another failure's rates pass as they are
 * (the tuner tells none of them to the search). */
static void test_sample_other_outcome(void **state)
{
    struct probe_result r = result(PROBE_ERROR, false, 0, 0);
    struct search_sample x;

    measure_sample(&r, &x);
    assert_true(x.write == 40.5);
    assert_true(x.read == 12.25);
    assert_false(x.write_timeout);
    assert_false(x.read_timeout);
}

static struct probe_params params(double deadline)
{
    struct probe_params p;

    probe_params_default(&p);
    p.size = 100000000;
    p.deadline_s = deadline;
    p.duration_s = 0;
    return p;
}

/* The incumbent would need 100 MB / 10 MB/s + 100 MB / 20 MB/s = 15 s:
 * a longer deadline is cut to that. */
static void test_cut_deadline(void **state)
{
    struct probe_params p = params(60);

    assert_true(measure_cut_deadline(&p, 10, 20));
    assert_true(p.deadline_s > 15 - 1e-9 && p.deadline_s < 15 + 1e-9);
    /* the other way round: the same sum */
    p = params(60);
    assert_true(measure_cut_deadline(&p, 20, 10));
    assert_true(p.deadline_s > 15 - 1e-9 && p.deadline_s < 15 + 1e-9);
}

/* With a duration each direction lasts about that long at any rate: the
 * cut deadline is three times it (both directions and the log-on), still
 * only when both rates are known and never longer than the deadline. */
static void test_cut_deadline_with_duration(void **state)
{
    struct probe_params p = params(60);

    p.duration_s = 2;
    assert_true(measure_cut_deadline(&p, 10, 20));
    assert_true(p.deadline_s == 6);
    p = params(60);
    p.duration_s = 2;
    assert_false(measure_cut_deadline(&p, 0, 20));
    assert_true(p.deadline_s == 60);
    p = params(5);
    p.duration_s = 2;
    assert_false(measure_cut_deadline(&p, 10, 20));
    assert_true(p.deadline_s == 5);
}

/* A deadline at or below that time stays. */
static void test_cut_deadline_never_lengthens(void **state)
{
    struct probe_params p = params(15);

    assert_false(measure_cut_deadline(&p, 10, 20));
    assert_true(p.deadline_s == 15);
    p = params(5);
    assert_false(measure_cut_deadline(&p, 10, 20));
    assert_true(p.deadline_s == 5);
}

/* No rate for a direction (0: it is on no trial) leaves the probe's own
 * hard limit: nothing is cut. */
static void test_cut_deadline_needs_both_rates(void **state)
{
    struct probe_params p = params(60);

    assert_false(measure_cut_deadline(&p, 0, 20));
    assert_true(p.deadline_s == 60);
    assert_false(measure_cut_deadline(&p, 10, 0));
    assert_true(p.deadline_s == 60);
    assert_false(measure_cut_deadline(&p, -1, -1));
    assert_true(p.deadline_s == 60);
    /* a negative one is none too, not a negative time */
    assert_false(measure_cut_deadline(&p, 10, -1));
    assert_true(p.deadline_s == 60);
    assert_false(measure_cut_deadline(&p, -1, 10));
    assert_true(p.deadline_s == 60);
}

/* Without a probe: nothing runs, a kill and a tidy of a clean one do
 * nothing, and it frees. */
static void test_idle_measure(void **state)
{
    struct probe_params p = params(60);
    struct measure *m = NULL;
    sd_event *ev;

    assert_int_equal(sd_event_new(&ev), 0);
    assert_int_equal(measure_new(ev, &m), 0);
    assert_non_null(m);
    assert_false(measure_running(m));
    measure_kill(m);
    assert_false(measure_running(m));
    /* not dirty: no clean-up, so no share is ever contacted */
    p.url = "smb://192.0.2.1/none";
    measure_tidy(m, &p, true);
    measure_tidy(m, &p, false);
    assert_int_equal(sd_event_run(ev, 0), 0); /* no source was added */
    measure_free(m);
    measure_free(NULL);
    sd_event_unref(ev);
}

/* The children of this process (its only thread's): a tidy job's. */
static int children(void)
{
    char path[64], buf[256] = "";
    FILE *f;
    int n = 0;

    snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
    f = fopen(path, "r");
    assert_non_null(f);
    if (fgets(buf, sizeof(buf), f) != NULL)
        for (char *tok = strtok(buf, " \n"); tok != NULL; tok = strtok(NULL, " \n"))
            n++;
    fclose(f);
    return n;
}

/* A tidy whose job could not start leaves the file to the next tidy: here
 * job_start refuses (SIGCHLD not blocked, as sd-event's child sources
 * need), then starts. */
static void test_tidy_that_did_not_start_is_kept(void **state)
{
    struct probe_params p = params(60);
    struct measure *m = NULL;
    sigset_t chld, old;
    sd_event *ev;

    (void)state;
    /* a closed port: the job fails at once, whatever it finds */
    p.url = "smb://127.0.0.1:1/none";
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    assert_int_equal(sd_event_new(&ev), 0);
    assert_int_equal(measure_new(ev, &m), 0);
    measure_dirty(m);
    assert_int_equal(sigprocmask(SIG_UNBLOCK, &chld, &old), 0);
    measure_tidy(m, &p, false);
    assert_int_equal(children(), 0);
    assert_int_equal(sigprocmask(SIG_BLOCK, &chld, NULL), 0);
    measure_tidy(m, &p, false);
    assert_int_equal(children(), 1);
    measure_free(m);
    assert_int_equal(children(), 0);
    sd_event_unref(ev);
    assert_int_equal(sigprocmask(SIG_SETMASK, &old, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_ok),
        cmocka_unit_test(test_sample_timeout_in_write),
        cmocka_unit_test(test_sample_timeout_in_read),
        cmocka_unit_test(test_sample_other_outcome),
        cmocka_unit_test(test_cut_deadline),
        cmocka_unit_test(test_cut_deadline_never_lengthens),
        cmocka_unit_test(test_cut_deadline_with_duration),
        cmocka_unit_test(test_cut_deadline_needs_both_rates),
        cmocka_unit_test(test_idle_measure),
        cmocka_unit_test(test_tidy_that_did_not_start_is_kept),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
