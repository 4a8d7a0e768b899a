/* trial: a shadow's stop in steps never waits for a process that does not
 * heed SIGTERM; SIGKILL ends it and its group after the grace, the leader
 * stays an unreaped zombie (its number ours) until its group is gone, and
 * the run directory goes. Forked stand-ins play smbd (a session of their
 * own, a second process in the group, as smbd's children are); no smbd. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "child.h"
#include "kernel.h"
#include "trial.h"

/* A generous bound on a whole stop, so that a broken one fails, not hangs. */
#define STOP_BOUND_S 30.0

/* The stand-ins of the test that runs, killed by teardown if it failed;
 * the write end of the pipe whose end also ends the member (it has no
 * PDEATHSIG of ours: it must outlive its leader in one test). */
static pid_t leader, member;
static int hold = -1;

/* Gone: no such process, or a zombie. */
static bool gone(pid_t pid)
{
    struct kernel_proc p;

    return kernel_proc_read(pid, &p) < 0 || p.state == 'Z';
}

static bool zombie(pid_t pid)
{
    struct kernel_proc p;

    return kernel_proc_read(pid, &p) == 0 && p.state == 'Z';
}

static int teardown(void **state)
{
    (void)state;
    /* still in the stand-in's group: not a process that took its number */
    if (member > 0 && !gone(member)) {
        struct kernel_proc p;

        if (kernel_proc_read(member, &p) == 0 && p.pgrp == leader)
            kill(member, SIGKILL);
    }
    /* still our child (unreaped): not a process that took its number */
    if (leader > 0 && waitpid(leader, NULL, WNOHANG) == 0) {
        kill(leader, SIGKILL);
        waitpid(leader, NULL, 0);
    }
    leader = member = 0;
    if (hold >= 0)
        close(hold);
    hold = -1;
    return 0;
}

/* A stand-in smbd: its own session, one more process in its group; each
 * ignores SIGTERM when told. The leader dies with the test (PDEATHSIG). */
static void stand_in(bool deaf_leader, bool deaf_member)
{
    int fds[2], end[2];
    pid_t pid, m = 0;

    assert_int_equal(pipe(fds), 0);
    assert_int_equal(pipe(end), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        setsid();
        close(end[1]);
        signal(SIGTERM, deaf_member ? SIG_IGN : SIG_DFL);
        m = fork();
        if (m == 0) {
            char c;

            close(fds[1]);
            /* until a signal, or the test's end (EOF) */
            while (read(end[0], &c, 1) < 0)
                ;
            _exit(0);
        }
        close(end[0]);
        signal(SIGTERM, deaf_leader ? SIG_IGN : SIG_DFL);
        /* ready: SIGTERM's disposition is set in both */
        if (write(fds[1], &m, sizeof(m)) != (ssize_t)sizeof(m))
            _exit(1);
        for (;;)
            pause();
    }
    close(fds[1]);
    close(end[0]);
    hold = end[1];
    assert_int_equal(read(fds[0], &m, sizeof(m)), (ssize_t)sizeof(m));
    close(fds[0]);
    leader = pid;
    member = m;
}

static void shadow_of(struct trial_shadow *t, double grace_s)
{
    memset(t, 0, sizeof(*t));
    t->pid = leader;
    t->stop_grace_s = grace_s;
    snprintf(t->run_dir, sizeof(t->run_dir), "/tmp/test_trial_stop.XXXXXX");
    assert_non_null(mkdtemp(t->run_dir));
}

/* Steps until the stop is over (watch: called after each step that did
 * not end it); returns
 * the steps it took. */
static int steps_until_done(struct trial_shadow *t, void (*watch)(void))
{
    double deadline = child_now() + STOP_BOUND_S;
    struct err e;
    int r, n = 0;

    for (;;) {
        r = trial_shadow_stop_step(t, &e);
        if (r != 0)
            break;
        if (watch != NULL)
            watch();
        assert_true(child_now() < deadline);
        n++;
        usleep(10000);
    }
    assert_int_equal(r, 1);
    return n;
}

/* All of it gone, the leader reaped by the stop (not left a zombie of
 * ours), the run directory removed. */
static void assert_stopped(const struct trial_shadow *t, const char *dir)
{
    struct stat st;
    int ws;

    assert_true(gone(leader));
    assert_true(gone(member));
    assert_int_equal(waitpid(leader, &ws, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
    assert_int_equal(lstat(dir, &st), -1);
    assert_int_equal(t->pid, 0);
    assert_string_equal(t->run_dir, "");
}

static void test_deaf_shadow_does_not_hold_the_caller(void **state)
{
    struct trial_shadow t, copy;
    char dir[PATH_MAX];
    double t0;
    int ws;

    (void)state;
    stand_in(true, true);
    shadow_of(&t, 3.0);
    snprintf(dir, sizeof(dir), "%s", t.run_dir);
    trial_shadow_stop_begin(&t);
    /* As place.c does: the stop goes on in a copy. */
    copy = t;
    /* The first look comes back while the process still ignores its
     * SIGTERM, long before the grace is out: a blocking stop would
     * return only after SIGKILL. (A loose bound, half the grace.) */
    t0 = child_now();
    assert_int_equal(trial_shadow_stop_step(&copy, NULL), 0);
    assert_true(child_now() - t0 < 1.5);
    assert_false(gone(leader));
    assert_int_equal(waitpid(leader, &ws, WNOHANG), 0);
    assert_true(steps_until_done(&copy, NULL) > 0);
    assert_true(copy.stop.killed);
    assert_stopped(&copy, dir);
}

/* The leader's exit while its group lives on: it must stay a zombie, so
 * that its number, which SIGKILL -pgid names, cannot be anyone else's. */
static bool zombie_seen, member_alive_then;

static void watch_leader(void)
{
    if (zombie(leader) && !gone(member)) {
        zombie_seen = true;
        member_alive_then = true;
    }
}

static void test_leader_kept_while_its_group_lives(void **state)
{
    struct trial_shadow t;
    char dir[PATH_MAX];

    (void)state;
    stand_in(false, true);
    shadow_of(&t, 20.0);
    snprintf(dir, sizeof(dir), "%s", t.run_dir);
    zombie_seen = member_alive_then = false;
    trial_shadow_stop_begin(&t);
    steps_until_done(&t, watch_leader);
    assert_true(zombie_seen && member_alive_then);
    assert_false(t.stop.killed);
    assert_true(t.stop.killed_rest);
    assert_stopped(&t, dir);
}

static void test_heeding_shadow_is_not_killed(void **state)
{
    struct trial_shadow t;
    char dir[PATH_MAX];

    (void)state;
    stand_in(false, false);
    shadow_of(&t, 20.0);
    snprintf(dir, sizeof(dir), "%s", t.run_dir);
    trial_shadow_stop_begin(&t);
    steps_until_done(&t, NULL);
    assert_false(t.stop.killed);
    assert_false(t.stop.killed_rest);
    assert_stopped(&t, dir);
}

/* A stop begun in steps and finished blocking (place_free at exit). */
static void test_blocking_stop_finishes_one_under_way(void **state)
{
    struct trial_shadow t;
    char dir[PATH_MAX];

    (void)state;
    stand_in(true, true);
    shadow_of(&t, 0.3);
    snprintf(dir, sizeof(dir), "%s", t.run_dir);
    trial_shadow_stop_begin(&t);
    assert_int_equal(trial_shadow_stop_step(&t, NULL), 0);
    assert_int_equal(trial_shadow_stop(&t, NULL), 0);
    assert_true(t.stop.killed);
    assert_stopped(&t, dir);
    /* and again: nothing left to do */
    assert_int_equal(trial_shadow_stop(&t, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_deaf_shadow_does_not_hold_the_caller, teardown),
        cmocka_unit_test_teardown(test_leader_kept_while_its_group_lives, teardown),
        cmocka_unit_test_teardown(test_heeding_shadow_is_not_killed, teardown),
        cmocka_unit_test_teardown(test_blocking_stop_finishes_one_under_way, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
