/* Unit tests for lib/job: a function in a forked child, watched from a real
 * sd-event loop: its bytes and exit status arrive, the deadline kills it,
 * the loop keeps turning meanwhile, cancel, the output bound, the
 * process group (what the function started dies with it), a job
 * traced by another process, and one that SIGKILL does not end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "child.h"
#include "files.h"
#include "job.h"
#include "stuck.h"

/* What a test's done function saw. */
struct seen {
    int calls;
    struct job_result r;
    char *data; /* a copy: r.data is only valid during done */
    int ticks_at_done;
};

/* The test's world: one loop, a ticking timer, one job's outcome. */
struct world {
    sd_event *ev;
    struct seen seen;
    int ticks;
    int kick_at;     /* > 0: at this tick, SIGUSR1 to the job */
    int cancel_at;   /* > 0: at this tick, job_cancel and leave the loop */
    struct job *job; /* while it runs */
};

static void on_done(struct job *j, const struct job_result *r, void *ud)
{
    struct world *w = ud;

    assert_ptr_equal(j, w->job);
    w->job = NULL;
    w->seen.calls++;
    w->seen.r = *r;
    w->seen.data = malloc(r->len + 1);
    assert_non_null(w->seen.data);
    memcpy(w->seen.data, r->data, r->len + 1);
    w->seen.r.data = w->seen.data;
    w->seen.ticks_at_done = w->ticks;
    sd_event_exit(w->ev, 0);
}

/* Trace pid (as `strace -p` does) until it exits: its exit goes to the
 * tracer first, then to its real parent. 0 once it traced the exit. */
static int trace_until_exit(pid_t pid)
{
    int ws;

    if (ptrace(PTRACE_SEIZE, pid, NULL, NULL) < 0)
        return 1;
    while (waitpid(pid, &ws, __WALL) == pid) {
        if (WIFEXITED(ws) || WIFSIGNALED(ws))
            return 0;
        /* a signal stop: pass the signal on */
        ptrace(PTRACE_CONT, pid, NULL, (void *)(long)(WIFSTOPPED(ws) ? WSTOPSIG(ws) : 0));
    }
    return 2;
}

static int on_tick(sd_event_source *s, uint64_t usec, void *ud)
{
    struct world *w = ud;

    (void)usec;
    w->ticks++;
    if (w->job != NULL && w->ticks == w->kick_at)
        kill(job_pid(w->job), SIGUSR1);
    if (w->job != NULL && w->ticks == w->cancel_at) {
        job_cancel(w->job);
        w->job = NULL;
        sd_event_exit(w->ev, 0);
    }
    sd_event_source_set_time_relative(s, 20000);
    sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
    return 0;
}

/* Run fn as a job until done (or a cancel) ends the loop. */
static void run_job(struct world *w, job_fn fn, void *arg, double deadline_s)
{
    sd_event_source *tick = NULL;
    struct err e = {{0}};
    int kick_at = w->kick_at, cancel_at = w->cancel_at;

    memset(w, 0, sizeof(*w));
    w->kick_at = kick_at;
    w->cancel_at = cancel_at;
    assert_int_equal(sd_event_new(&w->ev), 0);
    assert_int_equal(
        sd_event_add_time_relative(w->ev, &tick, CLOCK_MONOTONIC, 20000, 1000, on_tick, w), 0);
    assert_int_equal(job_start(w->ev, fn, arg, deadline_s, on_done, w, &w->job, &e), 0);
    assert_non_null(w->job);
    assert_int_equal(sd_event_loop(w->ev), 0);
    sd_event_source_disable_unref(tick);
    sd_event_unref(w->ev);
    w->ev = NULL;
}

static void world_free(struct world *w)
{
    free(w->seen.data);
    w->seen.data = NULL;
}

/* Every child of the test has been reaped: no zombie is left behind. */
static void assert_no_children(void)
{
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

struct say {
    const char *text;
    size_t repeat; /* the text this many times */
    int ret;
};

static int fn_say(void *arg, int out_fd)
{
    const struct say *s = arg;

    for (size_t i = 0; i < s->repeat; i++)
        if (files_write_all(out_fd, s->text, strlen(s->text)) < 0)
            return 99;
    return s->ret;
}

static void test_bytes_and_status(void **state)
{
    struct say hello = {"hello\n", 1, 0}, failed = {"no", 1, 3}, errnum = {"", 0, -ENOENT};
    struct world w = {0};

    (void)state;
    run_job(&w, fn_say, &hello, 30);
    assert_int_equal(w.seen.calls, 1);
    assert_true(w.seen.r.ok);
    assert_false(w.seen.r.timed_out);
    assert_int_equal(w.seen.r.status, 0);
    assert_int_equal(w.seen.r.signal, 0);
    assert_int_equal(w.seen.r.error, 0);
    assert_int_equal(w.seen.r.len, 6);
    assert_string_equal(w.seen.data, "hello\n");
    world_free(&w);

    /* a status other than 0 is not ok, and its bytes still arrive */
    run_job(&w, fn_say, &failed, 30);
    assert_false(w.seen.r.ok);
    assert_int_equal(w.seen.r.status, 3);
    assert_string_equal(w.seen.data, "no");
    world_free(&w);

    /* a negative errno comes back as its absolute value */
    run_job(&w, fn_say, &errnum, 30);
    assert_false(w.seen.r.ok);
    assert_int_equal(w.seen.r.status, ENOENT);
    assert_int_equal(w.seen.r.len, 0);
    assert_string_equal(w.seen.data, "");
    world_free(&w);
    assert_no_children();
}

/* Far more than a pipe holds, up to the bound exactly: all of it. One
 * byte more: a failure, and no half answer. */
static void test_output_bound(void **state)
{
    struct say full = {"0123456789abcdef", JOB_MAX_OUTPUT / 16, 0};
    struct say over = {"0123456789abcdef", JOB_MAX_OUTPUT / 16 + 1, 0};
    struct world w = {0};

    (void)state;
    run_job(&w, fn_say, &full, 60);
    assert_true(w.seen.r.ok);
    assert_int_equal(w.seen.r.len, JOB_MAX_OUTPUT);
    assert_memory_equal(w.seen.data + JOB_MAX_OUTPUT - 16, "0123456789abcdef", 16);
    world_free(&w);

    run_job(&w, fn_say, &over, 60);
    assert_int_equal(w.seen.calls, 1);
    assert_false(w.seen.r.ok);
    assert_int_equal(w.seen.r.error, -EFBIG);
    assert_int_equal(w.seen.r.len, 0);
    assert_false(w.seen.r.timed_out);
    world_free(&w);
    assert_no_children();
}

static int fn_sleep(void *arg, int out_fd)
{
    (void)arg;
    files_write_all(out_fd, "started", 7);
    sleep(60);
    return 0;
}

/* Far past the deadline: killed, reported as timed out, with what it said
 * before; the loop went on (done came from it, and the timer kept
 * ticking). */
static void test_deadline(void **state)
{
    struct world w = {0};

    (void)state;
    run_job(&w, fn_sleep, NULL, 0.3);
    assert_int_equal(w.seen.calls, 1);
    assert_false(w.seen.r.ok);
    assert_true(w.seen.r.timed_out);
    assert_int_equal(w.seen.r.status, -1);
    assert_int_equal(w.seen.r.signal, SIGKILL);
    assert_string_equal(w.seen.data, "started");
    assert_true(w.seen.ticks_at_done > 0);
    world_free(&w);
    assert_no_children();
}

static int fn_wait(void *arg, int out_fd)
{
    (void)arg;
    (void)out_fd;
    pause(); /* until a signal ends it */
    return 0;
}

/* The proof that the loop does not block while a job runs: the job can
 * only end because the loop's own timer, at its third tick, signals it.
 * Had job_start (or anything) blocked on the job, the ticks would never
 * come and the deadline would kill it instead. */
static void test_loop_turns_meanwhile(void **state)
{
    struct world w = {.kick_at = 3};

    (void)state;
    run_job(&w, fn_wait, NULL, 60);
    assert_int_equal(w.seen.calls, 1);
    assert_false(w.seen.r.timed_out);
    assert_int_equal(w.seen.r.signal, SIGUSR1);
    assert_int_equal(w.seen.r.status, -1);
    assert_false(w.seen.r.ok);
    assert_true(w.seen.ticks_at_done >= 3);
    world_free(&w);
    assert_no_children();
}

/* Cancel kills and reaps it, and done is never called. */
static void test_cancel(void **state)
{
    struct world w = {.cancel_at = 2};

    (void)state;
    run_job(&w, fn_wait, NULL, 60);
    assert_int_equal(w.seen.calls, 0);
    assert_null(w.job);
    assert_no_children();
    job_cancel(NULL);
}

/* A process the function started, not in a job of its own and without
 * PDEATHSIG, holding the output pipe open: it goes with the group, both
 * when the function returns and at the deadline. The test is a subreaper,
 * so the orphan comes back to it and its end can be read: SIGKILL. */
static int fn_grandchild(void *arg, int out_fd)
{
    const bool *linger = arg;
    char line[32];
    pid_t pid = fork();

    if (pid < 0)
        return 98;
    if (pid == 0) {
        execlp("sleep", "sleep", "60", (char *)NULL);
        _exit(127);
    }
    snprintf(line, sizeof(line), "%d", (int)pid);
    if (files_write_all(out_fd, line, strlen(line)) < 0)
        return 99;
    if (*linger)
        sleep(60);
    return 0;
}

static void assert_killed(pid_t pid)
{
    int ws = 0;

    assert_true(pid > 0);
    while (waitpid(pid, &ws, 0) < 0)
        assert_int_equal(errno, EINTR);
    assert_true(WIFSIGNALED(ws));
    assert_int_equal(WTERMSIG(ws), SIGKILL);
}

static void test_group_killed(void **state)
{
    struct world w = {0};
    bool linger = false;

    (void)state;
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    /* it returns at once: ok, and no wait for the grandchild's pipe */
    run_job(&w, fn_grandchild, &linger, 60);
    assert_true(w.seen.r.ok);
    assert_false(w.seen.r.timed_out);
    assert_killed((pid_t)atoi(w.seen.data));
    world_free(&w);

    linger = true;
    run_job(&w, fn_grandchild, &linger, 0.3);
    assert_true(w.seen.r.timed_out);
    assert_killed((pid_t)atoi(w.seen.data));
    world_free(&w);
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
    assert_no_children();
}

/* Two jobs on one loop at once, each writing more than a pipe holds:
 * each gets its own bytes, and the loop ends when both are done. */
struct pair {
    sd_event *ev;
    int left;
    struct seen seen[2];
};

static void on_pair_done(struct job *j, const struct job_result *r, void *ud)
{
    struct pair *p = ud;
    struct seen *s = &p->seen[r->len > 0 && r->data[0] == 'b'];

    (void)j;
    s->calls++;
    s->r = *r;
    s->data = strdup(r->data);
    assert_non_null(s->data);
    if (--p->left == 0)
        sd_event_exit(p->ev, 0);
}

static void test_two_at_once(void **state)
{
    struct say a = {"a", 200000, 0}, b = {"b", 300000, 0};
    struct pair p = {.left = 2};
    struct job *ja, *jb;
    struct err e = {{0}};

    (void)state;
    assert_int_equal(sd_event_new(&p.ev), 0);
    assert_int_equal(job_start(p.ev, fn_say, &a, 60, on_pair_done, &p, &ja, &e), 0);
    assert_int_equal(job_start(p.ev, fn_say, &b, 60, on_pair_done, &p, &jb, &e), 0);
    assert_int_equal(sd_event_loop(p.ev), 0);
    for (int i = 0; i < 2; i++) {
        size_t n = i == 0 ? 200000 : 300000;

        assert_int_equal(p.seen[i].calls, 1);
        assert_true(p.seen[i].r.ok);
        assert_int_equal(p.seen[i].r.len, n);
        assert_int_equal(strspn(p.seen[i].data, i == 0 ? "a" : "b"), n);
        free(p.seen[i].data);
    }
    sd_event_unref(p.ev);
    assert_no_children();
}

/* Without SIGCHLD blocked sd-event cannot watch the child: refused, and
 * nothing was started. A bad deadline is refused too. */
static void test_refusals(void **state)
{
    struct say hello = {"hello\n", 1, 0};
    struct job *j = (struct job *)&hello;
    struct err e = {{0}};
    sd_event *ev = NULL;
    sigset_t ss;

    (void)state;
    assert_int_equal(sd_event_new(&ev), 0);
    sigemptyset(&ss);
    sigaddset(&ss, SIGCHLD);
    assert_int_equal(sigprocmask(SIG_UNBLOCK, &ss, NULL), 0);
    assert_int_equal(job_start(ev, fn_say, &hello, 30, on_done, NULL, &j, &e), -EBUSY);
    assert_null(j);
    assert_non_null(strstr(e.msg, "SIGCHLD"));
    assert_int_equal(sigprocmask(SIG_BLOCK, &ss, NULL), 0);
    assert_int_equal(job_start(ev, fn_say, &hello, 0, on_done, NULL, &j, &e), -EINVAL);
    assert_int_equal(job_start(ev, fn_say, &hello, 1.0 / 0.0, on_done, NULL, &j, &e), -EINVAL);
    assert_null(j);
    sd_event_unref(ev);
    assert_no_children();
}

/* Whether pid is traced now. */
static bool traced(pid_t pid)
{
    char path[64], line[256];
    bool yes = false;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return false;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "TracerPid:", 10) == 0)
            yes = atoi(line + 10) != 0;
    fclose(f);
    return yes;
}

/* As the fault tests' hook does: a process the job started (orphaned, in
 * its group) traces the job until it exits; the job waits until it is
 * traced, then ends. */
static int fn_traced(void *arg, int out_fd)
{
    pid_t self = getpid(), c;
    const char *said;
    int ws;

    (void)arg;
    c = fork();
    if (c == 0) {
        if (fork() == 0)
            _exit(trace_until_exit(self));
        _exit(0);
    }
    waitpid(c, &ws, 0);
    for (int i = 0; i < 500 && !traced(self); i++)
        usleep(10 * 1000);
    said = traced(self) ? "traced" : "untraced";
    files_write_all(out_fd, said, strlen(said));
    usleep(100 * 1000);
    return 7;
}

/* A job traced by another process (an admin's `strace -p`, the fault
 * tests' slowed fsyncs) still ends when it exits, not never: its exit went
 * to the tracer first, and sd-event's child source did not hear of it
 * again (the daemon waited on a zombie job for good). A cancel at 5 s
 * ends the loop if done never comes. */
static void test_traced_job_ends(void **state)
{
    struct world w = {.cancel_at = 250};

    (void)state;
    run_job(&w, fn_traced, NULL, 60);
    assert_int_equal(w.seen.calls, 1);
    assert_string_equal(w.seen.data, "traced");
    assert_false(w.seen.r.timed_out);
    assert_int_equal(w.seen.r.status, 7);
    assert_true(w.seen.ticks_at_done < 250);
    world_free(&w);
    assert_no_children();
}

/* ---- a child that SIGKILL does not end ---- */

static struct stuck mnt = {.fd = -1};

static int stuck_teardown(void **state)
{
    (void)state;
    stuck_release(&mnt);
    job_stuck_free();
    return 0;
}

/* The deadline of the stuck jobs: long enough for each child, under
 * valgrind on a busy machine too, to reach its open and for the loop to
 * read its request before the kill (a request not yet read is dropped by
 * the kernel at the kill, and that child would just die). */
#define STUCK_DEADLINE_S 3.0

/* Open a file on the stuck mount: it never returns. */
static int fn_open_stuck(void *arg, int out_fd)
{
    const char *path = arg;

    (void)out_fd;
    return open(path, O_RDONLY) < 0 ? 1 : 0;
}

/* The loop's side of the stuck mount: every request read, none answered;
 * how many in *ud. */
static int on_fuse(sd_event_source *s, int fd, uint32_t revents, void *ud)
{
    (void)s;
    (void)fd;
    (void)revents;
    *(int *)ud += stuck_take(&mnt);
    return 0;
}

struct stuck_world {
    sd_event *ev;
    int requests;
    int done;
    struct job_result r[JOB_STUCK_MAX];
    pid_t pid[JOB_STUCK_MAX];
    double at[JOB_STUCK_MAX];
};

static void on_stuck_done(struct job *j, const struct job_result *r, void *ud)
{
    struct stuck_world *w = ud;

    (void)j;
    assert_true(w->done < JOB_STUCK_MAX);
    w->at[w->done] = child_now();
    w->r[w->done++] = *r;
}

/* Whether pid has not exited yet (a zombie has; never reaps). */
static bool exists(pid_t pid)
{
    siginfo_t si = {0};

    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
        return false;
    return si.si_pid != pid;
}

/* Turn the loop until the stuck list is empty, at most 10 s. */
static void run_until_reaped(sd_event *ev)
{
    double until = child_now() + 10;

    while (job_stuck_count() > 0 && child_now() < until)
        assert_true(sd_event_run(ev, 100000) >= 0);
    assert_int_equal(job_stuck_count(), 0);
}

/* Jobs stuck in an open that SIGKILL cannot end (a hung mount): their
 * deadline tells done within the grace, unreaped, while they still live,
 * instead of waiting for them for ever; at most JOB_STUCK_MAX are kept,
 * a job_start past it is refused; once the mount lets go, each is reaped
 * from the loop, and jobs start again. */
static void test_deadline_of_a_stuck_child(void **state)
{
    struct stuck_world w = {0};
    struct say hello = {"hello\n", 1, 0};
    sd_event_source *fuse = NULL;
    char path[JOB_STUCK_MAX][PATH_MAX + 16];
    struct job *j;
    struct err e = {{0}};
    double t0;

    (void)state;
    stuck_mount_or_skip(&mnt);
    assert_int_equal(sd_event_new(&w.ev), 0);
    assert_int_equal(sd_event_add_io(w.ev, &fuse, mnt.fd, EPOLLIN, on_fuse, &w.requests), 0);
    t0 = child_now();
    for (int i = 0; i < JOB_STUCK_MAX; i++) {
        snprintf(path[i], sizeof(path[i]), "%s/f%d", mnt.dir, i);
        assert_int_equal(
            job_start(w.ev, fn_open_stuck, path[i], STUCK_DEADLINE_S, on_stuck_done, &w, &j, &e),
            0);
        w.pid[i] = job_pid(j);
    }
    while (w.done < JOB_STUCK_MAX && child_now() - t0 < 60)
        assert_true(sd_event_run(w.ev, 100000) >= 0);
    assert_int_equal(w.done, JOB_STUCK_MAX);
    assert_int_equal(w.requests, JOB_STUCK_MAX); /* each in its open, read by us */
    for (int i = 0; i < JOB_STUCK_MAX; i++) {
        assert_true(w.r[i].timed_out);
        assert_true(w.r[i].unreaped);
        assert_false(w.r[i].ok);
        assert_int_equal(w.r[i].status, -1);
        /* the grace, not the stuck child, ended the wait (bound with room:
         * not a measure of speed) */
        assert_true(w.at[i] - t0 < STUCK_DEADLINE_S + JOB_KILL_GRACE_S + 5);
        assert_true(exists(w.pid[i]));
    }
    assert_int_equal(job_stuck_count(), JOB_STUCK_MAX);
    assert_int_equal(job_start(w.ev, fn_say, &hello, 30, on_stuck_done, &w, &j, &e), -EAGAIN);
    assert_non_null(strstr(e.msg, "stuck in the kernel"));
    assert_null(j);

    stuck_release(&mnt);
    run_until_reaped(w.ev);
    for (int i = 0; i < JOB_STUCK_MAX; i++)
        assert_false(exists(w.pid[i]));
    assert_no_children();
    assert_int_equal(job_start(w.ev, fn_say, &hello, 30, on_stuck_done, &w, &j, &e), 0);
    job_cancel(j);
    sd_event_source_disable_unref(fuse);
    sd_event_unref(w.ev);
}

/* job_cancel of a stuck child returns within its bound, says so (false),
 * and leaves the child to the stuck list, which reaps it once it can go. */
static void test_cancel_of_a_stuck_child(void **state)
{
    struct stuck_world w = {0};
    char path[PATH_MAX + 16];
    sd_event_source *fuse = NULL;
    struct job *j;
    struct err e = {{0}};
    double t0;
    pid_t pid;

    (void)state;
    stuck_mount_or_skip(&mnt);
    assert_int_equal(sd_event_new(&w.ev), 0);
    assert_int_equal(sd_event_add_io(w.ev, &fuse, mnt.fd, EPOLLIN, on_fuse, &w.requests), 0);
    snprintf(path, sizeof(path), "%s/f", mnt.dir);
    assert_int_equal(job_start(w.ev, fn_open_stuck, path, 60, on_stuck_done, &w, &j, &e), 0);
    pid = job_pid(j);
    t0 = child_now();
    while (w.requests == 0 && child_now() - t0 < 30)
        assert_true(sd_event_run(w.ev, 100000) >= 0);
    assert_int_equal(w.requests, 1);
    t0 = child_now();
    assert_false(job_cancel(j));
    assert_true(child_now() - t0 < JOB_CANCEL_WAIT_S + 3);
    assert_true(exists(pid));
    assert_int_equal(job_stuck_count(), 1);
    assert_int_equal(w.done, 0); /* a cancel never tells done */

    stuck_release(&mnt);
    run_until_reaped(w.ev);
    assert_false(exists(pid));
    assert_no_children();
    assert_true(job_cancel(NULL));
    sd_event_source_disable_unref(fuse);
    sd_event_unref(w.ev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_and_status),
        cmocka_unit_test(test_output_bound),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_loop_turns_meanwhile),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_group_killed),
        cmocka_unit_test(test_two_at_once),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_traced_job_ends),
        cmocka_unit_test_teardown(test_deadline_of_a_stuck_child, stuck_teardown),
        cmocka_unit_test_teardown(test_cancel_of_a_stuck_child, stuck_teardown),
    };
    sigset_t ss;

    /* As the daemon does: sd-event's child sources need SIGCHLD blocked. */
    sigemptyset(&ss);
    sigaddset(&ss, SIGCHLD);
    sigprocmask(SIG_BLOCK, &ss, NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
