/* child: the one child setup, and the helper runner: a pidfd and the
 * output pipes in one poll with the deadline, no sleeping loop. */
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "journal.h"

/* Where the descriptors to be placed at 0-3 are parked first, so that a
 * source that is itself one of 0-3 is not overwritten before it is used. */
#define PARK_FD 10

int child_setup(const struct child_spec *spec)
{
    int src[4] = {spec->fd_in, spec->fd_out, spec->fd_err, spec->fd_extra};
    sigset_t none;
    int nul = -1;

    /* A helper must not outlive smbtuned, even one killed with SIGKILL.
     * If the parent died before prctl, the signal would never come. */
    if (spec->parent > 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != spec->parent))
        return -ESRCH;
    /* sd-event blocks the signals it handles (signalfd), and a blocked or
     * ignored signal survives exec: smbd would ignore SIGTERM, a helper
     * would not die at its deadline's SIGTERM. Start clean. */
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
        return -errno;
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            signal(s, SIG_DFL); /* fails harmlessly for libc's reserved ones */
    if (spec->new_session && setsid() < 0)
        return -errno;
    for (int i = 0; i < 4; i++) {
        if (src[i] == -1 && i < 3) {
            if (nul < 0)
                nul = open("/dev/null", O_RDWR | O_NOCTTY);
            if (nul < 0)
                return -errno;
            src[i] = nul;
        }
        if (src[i] >= 0 && (src[i] = fcntl(src[i], F_DUPFD, PARK_FD)) < 0)
            return -errno;
    }
    for (int i = 0; i < 4; i++)
        if (src[i] >= 0 && dup2(src[i], i) < 0)
            return -errno;
    /* No descriptor of the daemon (journal, sd-event, probe files, the
     * parked copies) leaks into the child. */
    close_range(spec->fd_extra >= 0 ? 4 : 3, ~0U, 0);
    journal_forked();
    /* An environment of our own keeps out what the daemon's had, and what
     * a library in the child would honour (libsmbclient: USER, PASSWD,
     * LIBSMB_PROG). Not async-signal-safe: fine, smbtuned forks from one
     * thread. */
    if (spec->home != NULL && (clearenv() != 0 || setenv("HOME", spec->home, 1) < 0 ||
                               setenv("PATH", CHILD_SAFE_PATH, 1) < 0))
        return -ENOMEM;
    /* systemd's messages are the daemon's own: a shadow smbd (Type=notify
     * itself) would tell our unit READY=1 and its STATUS= otherwise. */
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_PID");
    unsetenv("WATCHDOG_USEC");
    return 0;
}

static pid_t strays[CHILD_STRAYS_MAX];

int child_reap_strays(void)
{
    int left = 0;

    for (int i = 0; i < CHILD_STRAYS_MAX; i++) {
        if (strays[i] > 0 && waitpid(strays[i], NULL, WNOHANG) != 0)
            strays[i] = 0;
        left += strays[i] > 0;
    }
    return left;
}

bool child_reap_within(pid_t pid, double wait_s, int *status)
{
    double end = child_now() + wait_s;
    int ws = 0;
    pid_t w;

    child_reap_strays();
    /* SIGKILL usually acts at once: the first look reaps it */
    while ((w = waitpid(pid, &ws, WNOHANG)) == 0 || (w < 0 && errno == EINTR)) {
        if (child_now() >= end) {
            for (int i = 0; i < CHILD_STRAYS_MAX; i++)
                if (strays[i] <= 0) {
                    strays[i] = pid;
                    break;
                }
            return false;
        }
        usleep(5000);
    }
    if (status != NULL)
        *status = ws;
    return true;
}

double child_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Where a child's output goes: a caller's fixed buffer (grow false: what
 * does not fit is dropped), or a heap buffer that grows up to max. */
struct sink {
    char *buf;
    size_t used, cap, max;
    bool grow;
    bool cut; /* a growing sink dropped output (at max, or out of memory) */
};

/* Append what is readable on fd to the sink (keeping it NUL-terminated);
 * returns false at end of file. */
static bool drain(int fd, struct sink *k)
{
    char tmp[4096];
    ssize_t got = read(fd, tmp, sizeof(tmp));
    size_t take;

    if (got < 0)
        return errno == EINTR || errno == EAGAIN;
    if (got == 0)
        return false;
    if (k->grow && k->cap - k->used <= (size_t)got && k->cap < k->max) {
        size_t ncap = k->cap ? k->cap : 8192;
        char *nb;

        while (ncap - k->used <= (size_t)got && ncap < k->max)
            ncap *= 2;
        if (ncap > k->max)
            ncap = k->max;
        nb = realloc(k->buf, ncap);
        if (nb != NULL) {
            k->buf = nb;
            k->cap = ncap;
        }
    }
    if (k->buf == NULL || k->cap == 0) {
        k->cut = true;
        return true;
    }
    take = k->cap - 1 - k->used;
    if ((size_t)got < take)
        take = (size_t)got;
    else if ((size_t)got > take)
        k->cut = true;
    memcpy(k->buf + k->used, tmp, take);
    k->used += take;
    k->buf[k->used] = '\0';
    return true;
}

static void close_pair(int p[2])
{
    if (p[0] >= 0)
        close(p[0]);
    if (p[1] >= 0)
        close(p[1]);
}

/* Seconds between looks for the exit when there is no pidfd. */
#define CHILD_EXIT_POLL_S 0.02

static int run(char *const argv[], double timeout_s, struct sink *ko, struct sink *ke, int *status)
{
    int po[2] = {-1, -1}, pe[2] = {-1, -1}, pidfd, ws, r = 0;
    bool open_o = true, open_e = true, exited = false, killed = false;
    double deadline = child_now() + timeout_s;
    pid_t parent = getpid(), pid;

    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
        r = -errno;
        close_pair(po);
        close_pair(pe);
        return r;
    }
    pid = fork();
    if (pid < 0) {
        r = -errno;
        close_pair(po);
        close_pair(pe);
        return r;
    }
    if (pid == 0) {
        struct child_spec spec = {
            .parent = parent, .fd_in = -1, .fd_out = po[1], .fd_err = pe[1], .fd_extra = -1};

        if (child_setup(&spec) == 0)
            execvp(argv[0], argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    /* The child's end as a descriptor: one poll waits for output, the
     * exit and the deadline together, with no SIGCHLD handler (sd-event
     * may own SIGCHLD) and no sleeping loop. Linux 5.3 and later. */
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    /* Without pidfd_open (ENOSYS: an older kernel, or valgrind 3.19, which
     * does not know the call), the exit is looked for between short
     * polls of the pipes instead. */
    if (pidfd < 0 && errno != ENOSYS) {
        r = -errno;
        kill(pid, SIGKILL);
        waitpid(pid, &ws, 0);
        close(po[0]);
        close(pe[0]);
        return r;
    }
    /* Past the output's end the program may still linger, and a program
     * it left behind may hold the output open after it exited: the
     * deadline covers both. */
    while (open_o || open_e || !exited) {
        struct pollfd p[3] = {{open_o ? po[0] : -1, POLLIN, 0},
                              {open_e ? pe[0] : -1, POLLIN, 0},
                              {exited ? -1 : pidfd, POLLIN, 0}};
        double left = deadline - child_now();
        int n;

        if (left <= 0) {
            kill(pid, SIGKILL);
            killed = true;
            break;
        }
        if (pidfd < 0 && !exited) {
            siginfo_t si = {0};

            /* WNOWAIT: the waitpid below still reaps it */
            if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                si.si_pid == pid) {
                /* look at the loop's condition again: with the output
                 * closed, a poll now would sleep until the deadline */
                exited = true;
                continue;
            }
            if (left > CHILD_EXIT_POLL_S)
                left = CHILD_EXIT_POLL_S;
        }
        n = poll(p, 3, (int)(left * 1000) + 1);
        if (n < 0 && errno != EINTR) {
            r = -errno;
            kill(pid, SIGKILL);
            break;
        }
        if (n <= 0)
            continue;
        if (open_o && (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            open_o = drain(po[0], ko);
        if (open_e && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
            open_e = drain(pe[0], ke);
        if (p[2].revents & (POLLIN | POLLHUP | POLLERR))
            exited = true;
    }
    close(po[0]);
    close(pe[0]);
    if (pidfd >= 0)
        close(pidfd);
    /* It has exited or was just sent SIGKILL: this does not wait long. */
    while (waitpid(pid, &ws, 0) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    if (r < 0)
        return r;
    if (killed || !WIFEXITED(ws))
        *status = -1;
    else
        *status = WEXITSTATUS(ws);
    /* -d: every program run, how it ended and how long it took (argv
     * holds paths and options, never a secret) */
    journal_log(LOG_DEBUG, "ran %s%s (pid %d): %s %d after %.3f s", argv[0], argv[1] ? " ..." : "",
                (int)pid, killed ? "killed at its deadline, status" : "status", *status,
                child_now() - (deadline - timeout_s));
    return 0;
}

int child_run(char *const argv[], double timeout_s, char *out, size_t outlen, char *errout,
              size_t errlen, int *status)
{
    struct sink ko = {out, 0, out ? outlen : 0, 0, false, false};
    struct sink ke = {errout, 0, errout ? errlen : 0, 0, false, false};

    if (out && outlen)
        out[0] = '\0';
    if (errout && errlen)
        errout[0] = '\0';
    return run(argv, timeout_s, &ko, &ke, status);
}

int child_run_alloc(char *const argv[], double timeout_s, size_t max, char **out, char **errout,
                    int *status)
{
    struct sink ko = {NULL, 0, 0, max, true, false}, ke = {NULL, 0, 0, max, true, false};
    int r;

    *out = NULL;
    if (errout != NULL)
        *errout = NULL;
    r = run(argv, timeout_s, &ko, &ke, status);
    /* Always hand back strings, "" when the program said nothing. */
    if (r == 0 && ko.buf == NULL)
        ko.buf = calloc(1, 1);
    if (r == 0 && ke.buf == NULL)
        ke.buf = calloc(1, 1);
    if (r == 0 && (ko.buf == NULL || ke.buf == NULL))
        r = -ENOMEM;
    /* Half an answer would be read as a different answer. */
    if (r == 0 && (ko.cut || ke.cut))
        r = -EFBIG;
    if (r < 0 || errout == NULL) {
        free(ke.buf);
        ke.buf = NULL;
    }
    if (r < 0) {
        free(ko.buf);
        return r;
    }
    *out = ko.buf;
    if (errout != NULL)
        *errout = ke.buf;
    return 0;
}
