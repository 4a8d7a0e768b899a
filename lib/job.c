/* job: a function of ours in a forked child, watched by three sd-event
 * sources: an io source on the pipe of its result bytes, a child source for
 * its exit, a timer for its deadline (and, once the pipe is closed, a
 * timer that looks for the exit itself). The job ends when the child is
 * reaped and its pipe is closed; then done is called once and the job is
 * freed. A child killed at its deadline that is not reaped within
 * JOB_KILL_GRACE_S is stuck in the kernel: done is told so (unreaped),
 * and the job lives on, on the stuck list, only to reap it. */
#include "job.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"

struct job {
    pid_t pid; /* > 0 until reaped */
    int fd;    /* the pipe's read end, -1 once it is closed */
    sd_event *ev;
    sd_event_source *child_src, *io_src, *timer_src, *reap_src;
    char *buf;
    size_t len, cap;
    bool timed_out;
    int error;
    int status, signal; /* how it ended, once reaped */
    job_done_fn done;
    void *ud;
    bool stuck;       /* done was told (or cancelled): only the reap is left */
    struct job *next; /* on the stuck list */
};

/* The stuck jobs (see job.h): they outlive their callers, so they are
 * kept here, for job_stuck_free. */
static struct job *stuck_list;
static int stuck_n;

/* Seconds between looks for the exit once the pipe is closed: soon after
 * a kill; once a second for a stuck child. */
#define JOB_REAP_POLL_S 0.05
#define JOB_STUCK_POLL_S 1.0

/* The status the child exits with for what fn returned (see job.h). */
static int exit_status(int r)
{
    if (r >= 0 && r <= 255)
        return r;
    if (r < 0 && r >= -255)
        return -r;
    return 255;
}

static void close_pipe(struct job *j)
{
    j->io_src = sd_event_source_disable_unref(j->io_src);
    if (j->fd >= 0)
        close(j->fd);
    j->fd = -1;
}

/* The whole group: what the function started (testparm under child_run
 * stays in its group) goes with it. The leader is still unreaped here, so
 * the group id cannot have been reused. */
static void kill_group(struct job *j)
{
    if (j->pid <= 0)
        return;
    killpg(j->pid, SIGKILL);
    /* A child that has not reached its setsid yet has no group: the
     * leader itself, and it has started nothing yet. */
    kill(j->pid, SIGKILL);
}

static void job_free(struct job *j)
{
    close_pipe(j);
    j->child_src = sd_event_source_disable_unref(j->child_src);
    j->timer_src = sd_event_source_disable_unref(j->timer_src);
    j->reap_src = sd_event_source_disable_unref(j->reap_src);
    free(j->buf);
    free(j);
}

static void stuck_unlink(struct job *j)
{
    for (struct job **p = &stuck_list; *p != NULL; p = &(*p)->next) {
        if (*p == j) {
            *p = j->next;
            stuck_n--;
            return;
        }
    }
}

/* Tell done what the job came to. */
static void tell(struct job *j)
{
    struct job_result r = {0};

    r.timed_out = j->timed_out;
    r.unreaped = j->pid > 0;
    r.status = r.unreaped ? -1 : j->status;
    r.signal = r.unreaped ? 0 : j->signal;
    r.error = j->error;
    r.data = j->error == 0 && j->buf != NULL ? j->buf : "";
    r.len = j->error == 0 ? j->len : 0;
    r.ok = !r.timed_out && r.error == 0 && r.status == 0;
    j->done(j, &r, j->ud);
}

/* Once the child is reaped and the pipe closed: report and free. */
static void maybe_finish(struct job *j)
{
    if (j->pid > 0 || j->fd >= 0)
        return;
    if (j->stuck)
        stuck_unlink(j);
    else
        tell(j);
    job_free(j);
}

/* Put j on the stuck list: nothing is told any more, the reap frees it. */
static void make_stuck(struct job *j)
{
    j->stuck = true;
    j->next = stuck_list;
    stuck_list = j;
    stuck_n++;
}

/* Append what the pipe holds until it would block (0), or until its end,
 * an error or the bound (1). The buffer keeps one byte for the NUL. */
static int drain(struct job *j)
{
    for (;;) {
        ssize_t got;

        /* Room for one byte past the bound, to see that it was passed;
         * while len <= the bound, at least one byte can be read. */
        if (j->cap - j->len < 4096 + 1 && j->cap < JOB_MAX_OUTPUT + 2) {
            size_t ncap = j->cap ? j->cap * 2 : 8192;
            char *nb;

            if (ncap > JOB_MAX_OUTPUT + 2)
                ncap = JOB_MAX_OUTPUT + 2;
            nb = realloc(j->buf, ncap);
            if (nb == NULL) {
                j->error = -ENOMEM;
                return 1;
            }
            j->buf = nb;
            j->cap = ncap;
            j->buf[j->len] = '\0';
        }
        got = read(j->fd, j->buf + j->len, j->cap - 1 - j->len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == EAGAIN)
            return 0;
        if (got < 0) {
            j->error = -errno;
            return 1;
        }
        if (got == 0)
            return 1; /* end of file: every writer is gone */
        j->len += (size_t)got;
        j->buf[j->len] = '\0';
        if (j->len > JOB_MAX_OUTPUT) {
            j->error = -EFBIG;
            return 1;
        }
    }
}

/* The child has exited, unreaped (WNOWAIT): si says how. */
static void reap(struct job *j, const siginfo_t *si)
{
    siginfo_t reaped = {0};

    /* Kill what it left behind first, which also lets go of the pipe if
     * they hold it. */
    kill_group(j);
    if (si->si_code == CLD_EXITED) {
        j->status = si->si_status;
    } else {
        j->status = -1;
        j->signal = si->si_status;
    }
    /* Reaped here, not left to sd-event, so that nothing depends on when
     * it does; its own waitid afterwards finds nothing and is ignored. */
    while (waitid(P_PID, (id_t)j->pid, &reaped, WEXITED) < 0 && errno == EINTR)
        ;
    j->pid = 0;
    j->child_src = sd_event_source_disable_unref(j->child_src);
    j->reap_src = sd_event_source_disable_unref(j->reap_src);
    maybe_finish(j);
}

static int on_child_exit(sd_event_source *s, const siginfo_t *si, void *ud)
{
    (void)s;
    reap(ud, si);
    return 0;
}

static int on_reap_poll(sd_event_source *s, uint64_t usec, void *ud)
{
    struct job *j = ud;
    siginfo_t si = {0};

    (void)usec;
    if (waitid(P_PID, (id_t)j->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == j->pid) {
        reap(j, &si);
        return 0;
    }
    if (sd_event_source_set_time_relative(
            s, (uint64_t)((j->stuck ? JOB_STUCK_POLL_S : JOB_REAP_POLL_S) * 1e6)) < 0 ||
        sd_event_source_set_enabled(s, SD_EVENT_ONESHOT) < 0)
        j->reap_src = sd_event_source_disable_unref(j->reap_src);
    return 0;
}

/* The pipe is closed (its end, or the deadline's kill): the exit comes
 * soon, and is looked for here too, not only through the child source.
 * A child traced by another process (an admin's `strace -p`) reports its
 * exit to the tracer first; when the tracer lets go of it, sd-event's
 * child source is not told again, and the job would wait on a zombie for
 * good (seen with a tracer the job itself started, as the fault tests'
 * is). Without the timer, the child source alone. */
static void watch_exit(struct job *j)
{
    if (j->pid <= 0 || j->reap_src != NULL)
        return;
    if (sd_event_add_time_relative(j->ev, &j->reap_src, CLOCK_MONOTONIC,
                                   (uint64_t)(JOB_REAP_POLL_S * 1e6), 10000, on_reap_poll, j) < 0)
        j->reap_src = NULL;
}

static int on_grace(sd_event_source *s, uint64_t usec, void *ud);

/* After a kill: a child that SIGKILL does not end (stuck in an
 * uninterruptible wait) is given a grace, in place of its deadline, then
 * done is told without its exit. */
static void arm_grace(struct job *j)
{
    j->timer_src = sd_event_source_disable_unref(j->timer_src);
    if (j->pid > 0 &&
        sd_event_add_time_relative(j->ev, &j->timer_src, CLOCK_MONOTONIC,
                                   (uint64_t)(JOB_KILL_GRACE_S * 1e6), 10000, on_grace, j) < 0)
        j->timer_src = NULL;
}

static int on_output(sd_event_source *s, int fd, uint32_t revents, void *ud)
{
    struct job *j = ud;

    (void)s;
    (void)fd;
    (void)revents;
    if (drain(j) == 0)
        return 0;
    close_pipe(j);
    watch_exit(j);
    /* A job whose answer cannot be collected has nothing left to do. */
    if (j->error < 0) {
        kill_group(j);
        arm_grace(j);
    }
    maybe_finish(j);
    return 0;
}

/* The killed child is still not reaped: stuck in the kernel. Tell done
 * now (the loop and the cycle go on); the reap comes later, from the
 * stuck list. On the list first: done may start another job, and the cap
 * counts this one. */
static int on_grace(sd_event_source *s, uint64_t usec, void *ud)
{
    struct job *j = ud;

    (void)s;
    (void)usec;
    j->timer_src = sd_event_source_disable_unref(j->timer_src);
    if (j->pid <= 0)
        return 0;
    make_stuck(j);
    tell(j);
    return 0;
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *ud)
{
    struct job *j = ud;

    (void)s;
    (void)usec;
    j->timed_out = true;
    j->timer_src = sd_event_source_disable_unref(j->timer_src);
    kill_group(j);
    /* What it wrote before is kept, for the caller's message. A process
     * that escaped the group (setsid) may still hold the pipe: the
     * deadline covers the output too. The exit comes soon: SIGKILL. */
    if (j->fd >= 0)
        drain(j);
    close_pipe(j);
    watch_exit(j);
    arm_grace(j);
    maybe_finish(j);
    return 0;
}

static bool sigchld_blocked(void)
{
    sigset_t cur;

    return sigprocmask(SIG_BLOCK, NULL, &cur) == 0 && sigismember(&cur, SIGCHLD) == 1;
}

_Noreturn static void child_main(struct job *j, job_fn fn, void *arg, int rfd, int wfd,
                                 pid_t parent)
{
    struct child_spec spec = {.parent = parent,
                              .new_session = true,
                              .fd_in = -1,
                              .fd_out = CHILD_KEEP,
                              .fd_err = CHILD_KEEP,
                              .fd_extra = wfd};

    /* The parent's bookkeeping; freed here so that a leak checker in the
     * child (valgrind follows a fork) does not count it as lost. */
    free(j);
    close(rfd);
    if (child_setup(&spec) < 0)
        _exit(127);
    /* _exit, not exit: the parent's atexit handlers and stdio buffers are
     * not the child's to run or flush. */
    _exit(exit_status(fn(arg, 3)));
}

int job_start(sd_event *ev, job_fn fn, void *arg, double deadline_s, job_done_fn done, void *ud,
              struct job **jp, struct err *e)
{
    struct job *j;
    pid_t parent = getpid();
    int p[2], r;

    *jp = NULL;
    if (!(deadline_s > 0) || !isfinite(deadline_s) || deadline_s > 86400.0)
        return err_set(e, -EINVAL, "job deadline out of range: %g s", deadline_s);
    if (stuck_n >= JOB_STUCK_MAX)
        return err_set(e, -EAGAIN,
                       "%d earlier jobs were killed and are not gone yet (stuck in the kernel: "
                       "a hung mount?); no new one starts until they go",
                       stuck_n);
    /* sd-event refuses child sources otherwise (it reads exits through a
     * signalfd when pidfds are missing, e.g. under valgrind); refused here,
     * before anything is started, with the reason. */
    if (!sigchld_blocked())
        return err_set(e, -EBUSY, "SIGCHLD must be blocked to watch a job from sd-event");
    j = calloc(1, sizeof(*j));
    if (j == NULL)
        return err_set(e, -ENOMEM, "out of memory");
    j->fd = -1;
    j->ev = ev;
    j->done = done;
    j->ud = ud;
    if (pipe2(p, O_CLOEXEC) < 0) {
        r = err_set(e, -errno, "pipe: %s", strerror(errno));
        free(j);
        return r;
    }
    /* Only the read end: the child writes with plain blocking writes. */
    if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
        r = err_set(e, -errno, "fcntl: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        free(j);
        return r;
    }
    /* What is buffered would otherwise be written twice, once by each. */
    fflush(stdout);
    fflush(stderr);
    j->pid = fork();
    if (j->pid < 0) {
        r = err_set(e, -errno, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        free(j);
        return r;
    }
    if (j->pid == 0)
        child_main(j, fn, arg, p[0], p[1], parent);
    close(p[1]);
    j->fd = p[0];
    r = sd_event_add_io(ev, &j->io_src, j->fd, EPOLLIN, on_output, j);
    if (r >= 0)
        r = sd_event_add_child(ev, &j->child_src, j->pid, WEXITED, on_child_exit, j);
    if (r >= 0)
        r = sd_event_add_time_relative(ev, &j->timer_src, CLOCK_MONOTONIC,
                                       (uint64_t)(deadline_s * 1e6), 1000, on_deadline, j);
    if (r < 0) {
        err_set(e, r, "sd-event: cannot watch a job: %s", strerror(-r));
        job_cancel(j);
        return r;
    }
    *jp = j;
    return 0;
}

pid_t job_pid(const struct job *j)
{
    return j->pid;
}

/* Whether pid has exited, reaping it then (never blocks). */
static bool reaped_now(pid_t pid)
{
    siginfo_t si = {0};

    return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG) == 0 && si.si_pid == pid;
}

bool job_cancel(struct job *j)
{
    double until = child_now() + JOB_CANCEL_WAIT_S;

    if (j == NULL)
        return true;
    kill_group(j);
    /* After SIGKILL the exit is a matter of the kernel tearing it down,
     * unless the child is stuck in an uninterruptible wait: bounded. */
    while (j->pid > 0 && !reaped_now(j->pid)) {
        if (child_now() >= until) {
            close_pipe(j);
            j->timer_src = sd_event_source_disable_unref(j->timer_src);
            watch_exit(j);
            make_stuck(j);
            return false;
        }
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    j->pid = 0;
    job_free(j);
    return true;
}

int job_stuck_count(void)
{
    return stuck_n;
}

bool job_is_stuck(pid_t pid)
{
    for (const struct job *j = stuck_list; j != NULL; j = j->next)
        if (j->pid == pid)
            return pid > 0;
    return false;
}

void job_stuck_free(void)
{
    while (stuck_list != NULL) {
        struct job *j = stuck_list;

        stuck_list = j->next;
        stuck_n--;
        if (j->pid > 0)
            reaped_now(j->pid);
        job_free(j);
    }
}
