/* Unit tests for daemon/conf_check: what a SIGHUP refuses in smb.conf,
 * checked in a job: a good file passes, a refused one is refused with its
 * file and line, and one whose include hangs (a FUSE mount of the test's
 * that never answers) leaves the loop turning until the check's deadline,
 * which then says why. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "child.h"
#include "conf_check.h"
#include "files.h"
#include "rmtree.h"
#include "stuck.h"

struct fix {
    char dir[64], conf[128];
    struct tuner_opts o;
    sd_event *ev;
    sd_event_source *tick;
    int ticks;      /* of the loop, while the check runs */
    int calls;      /* of done */
    int r;          /* done's */
    char msg[2048]; /* done's */
};

static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof(*f));
    sigset_t ss;

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/smbtuned-test-conf-check-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->conf, sizeof(f->conf), "%s/smb.conf", f->dir);
    f->o.smb_conf = f->conf;
    f->o.mode = TUNER_TUNE;
    /* jobs watch their children with child sources */
    sigemptyset(&ss);
    sigaddset(&ss, SIGCHLD);
    sigprocmask(SIG_BLOCK, &ss, NULL);
    assert_int_equal(sd_event_new(&f->ev), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;

    sd_event_source_disable_unref(f->tick);
    sd_event_unref(f->ev);
    assert_int_equal(rmtree_path(f->dir, NULL), 0);
    free(f);
    return 0;
}

static void write_conf(const struct fix *f, const char *text)
{
    FILE *c = fopen(f->conf, "w");

    assert_non_null(c);
    fputs(text, c);
    assert_int_equal(fclose(c), 0);
}

static void on_done(void *ud, int r, const char *msg)
{
    struct fix *f = ud;

    f->calls++;
    f->r = r;
    snprintf(f->msg, sizeof(f->msg), "%s", msg);
}

static int on_tick(sd_event_source *s, uint64_t usec, void *ud)
{
    struct fix *f = ud;

    (void)usec;
    f->ticks += f->calls == 0;
    assert_int_equal(sd_event_source_set_time_relative(s, 100000), 0);
    assert_int_equal(sd_event_source_set_enabled(s, SD_EVENT_ONESHOT), 0);
    return 0;
}

/* Start the check and turn the loop until done is told (at most 60 s). */
static void check(struct fix *f, double deadline_s)
{
    struct conf_check c = {0};
    struct err e;
    double t0 = child_now();

    assert_int_equal(
        sd_event_add_time_relative(f->ev, &f->tick, CLOCK_MONOTONIC, 100000, 1, on_tick, f), 0);
    assert_int_equal(conf_check_start(&c, f->ev, &f->o, deadline_s, on_done, f, &e), 0);
    assert_non_null(c.job);
    while (f->calls == 0 && child_now() - t0 < 60)
        assert_true(sd_event_run(f->ev, 100000) >= 0);
    assert_int_equal(f->calls, 1);
    assert_null(c.job);
}

static void test_good_file_passes(void **state)
{
    struct fix *f = *state;
    char text[256];

    snprintf(text, sizeof(text), "[global]\n   socket options = TCP_NODELAY\n[s]\n   path = %s\n",
             f->dir);
    write_conf(f, text);
    check(f, 30);
    assert_int_equal(f->r, 0);
}

static void test_refused_file_is_refused(void **state)
{
    struct fix *f = *state;
    char want[256];

    write_conf(f, "[global]\n   workgroup = X\n   config backend = registry\n");
    check(f, 30);
    assert_true(f->r < 0);
    snprintf(want, sizeof(want), "%s:3: ", f->conf);
    if (strncmp(f->msg, want, strlen(want)) != 0 || strstr(f->msg, "registry") == NULL)
        fail_msg("not refused with file and line: %s", f->msg);
}

static void test_missing_file_is_refused(void **state)
{
    struct fix *f = *state;

    check(f, 30);
    assert_true(f->r < 0);
    assert_non_null(strstr(f->msg, f->conf));
}

static struct stuck mnt;

static int on_fuse(sd_event_source *s, int fd, uint32_t revents, void *ud)
{
    (void)s;
    (void)fd;
    (void)revents;
    *(int *)ud += stuck_take(&mnt);
    return 0;
}

/* An include on a mount that never answers: the check waits in its job
 * while the loop turns (its ticks go on, and so does the FUSE server,
 * which is this loop), and the deadline tells done why. Checked in the
 * loop's own process, the start would not return: the alarm then ends
 * the test, failed. */
static void test_hung_include_waits_in_a_job(void **state)
{
    struct fix *f = *state;
    sd_event_source *fuse = NULL;
    char text[PATH_MAX + 64];
    int requests = 0;

    stuck_mount_or_skip(&mnt);
    assert_int_equal(sd_event_add_io(f->ev, &fuse, mnt.fd, EPOLLIN, on_fuse, &requests), 0);
    snprintf(text, sizeof(text), "[global]\n   include = %s/local.conf\n", mnt.dir);
    write_conf(f, text);
    alarm(45);
    check(f, 1);
    alarm(0);
    assert_true(requests >= 1); /* the job's read reached the mount */
    assert_true(f->ticks >= 5); /* the loop turned for the deadline, and the grace */
    assert_int_equal(f->r, -ETIMEDOUT);
    if (strstr(f->msg, f->conf) == NULL || strstr(f->msg, "hung mount") == NULL)
        fail_msg("the deadline does not say why: %s", f->msg);
    stuck_release(&mnt);
    for (double t0 = child_now(); job_stuck_count() > 0 && child_now() - t0 < 10;)
        assert_true(sd_event_run(f->ev, 100000) >= 0);
    assert_int_equal(job_stuck_count(), 0);
    sd_event_source_disable_unref(fuse);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_good_file_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_file_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_file_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hung_include_waits_in_a_job, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
