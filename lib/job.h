/* job: run a function of ours in a forked child while the sd-event loop
 * goes on. The blocking steps of a cycle (an smb.conf edit with its
 * testparm checks, smbcontrol, `smbd -V`) keep their synchronous code and
 * run inside a job; the loop only waits on descriptors: a pipe for the
 * function's result bytes, a child source for its exit, and a timer for
 * its deadline. */
#ifndef SMBTUNE_JOB_H
#define SMBTUNE_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "err.h"

/* The most result bytes a job may write; more is a failure (-EFBIG), never
 * half an answer. */
#define JOB_MAX_OUTPUT (1024 * 1024)

struct job;

/* What a job came to, handed to its done function. */
struct job_result {
    bool ok;        /* exited with status 0 before its deadline, its bytes collected whole */
    bool timed_out; /* the deadline passed: its process group was killed */
    /* killed (at its deadline, or for output that could not be
     * collected), and its process outlived SIGKILL by JOB_KILL_GRACE_S:
     * stuck in the kernel (a hung mount). It may still finish the system
     * call it is in (a write, a rename); this module reaps it later. */
    bool unreaped;
    int status; /* its exit status (0-255) when it exited, else -1 */
    int signal; /* the signal that ended it (SIGKILL after a timeout), else 0 */
    int error;  /* 0, or -errno: its bytes could not be collected (-EFBIG: over the bound) */
    /* the bytes it wrote, NUL-terminated ("" on error); when len > 0 in a
     * malloc'ed buffer, aligned for any struct they hold; valid during done */
    const char *data;
    size_t len;
};

/* Runs in the child, after child_setup (it dies with the parent, has a
 * process group of its own, stdin is /dev/null, stdout and stderr are the
 * parent's, every other descriptor is closed but out_fd). It writes its
 * result to out_fd (blocking writes); what it returns becomes the exit
 * status: 0-255 as it is, a negative errno its absolute value (so that the
 * parent reads -status back), anything else 255. Everything it starts is
 * killed with its process group when it ends: a process that must outlive
 * the job (a shadow smbd) is started by the parent, not in a job. */
typedef int (*job_fn)(void *arg, int out_fd);

/* Called exactly once per job, from the loop, never from inside job_start.
 * j is freed right after done returns (or, unreaped, kept by this module
 * until its child can be reaped): forget it there, and do not job_cancel
 * it. */
typedef void (*job_done_fn)(struct job *j, const struct job_result *r, void *ud);

/* Seconds a killed child is given to be reaped before done is told
 * without it (unreaped): SIGKILL ends a process at once unless it is
 * stuck in an uninterruptible wait (an `include` on a hung NFS or FUSE
 * mount), which no signal ends; the loop does not wait for that. */
#define JOB_KILL_GRACE_S 5.0

/* The most such stuck children kept at once (each looked at once a
 * second until it can be reaped); job_start refuses more (-EAGAIN): one
 * stuck cycle after another would otherwise pile them up. */
#define JOB_STUCK_MAX 8

/* Fork a child that runs fn(arg, out_fd) and watch it from ev. After
 * deadline_s seconds the child's process group is killed and done reports
 * timed_out (and unreaped, when it will not die). SIGCHLD must be blocked
 * in the calling thread (sd-event's child sources need it): -EBUSY
 * otherwise. 0 and *jp, or -errno with the reason in e (nothing is left
 * running then, and done is never called). */
int job_start(sd_event *ev, job_fn fn, void *arg, double deadline_s, job_done_fn done, void *ud,
              struct job **jp, struct err *e);

/* The child's pid, which is also its process group (before done). */
pid_t job_pid(const struct job *j);

/* Kill the child's process group, reap the child and free j without
 * calling done (for SIGTERM). The wait after SIGKILL is at most
 * JOB_CANCEL_WAIT_S: a child that outlives it is left to be reaped later,
 * as a stuck one (see unreaped), and false is returned: it may still
 * finish the system call it is in. true otherwise; NULL is fine (true). */
#define JOB_CANCEL_WAIT_S 2.0
bool job_cancel(struct job *j);

/* How many killed children are still waited for (see unreaped). */
int job_stuck_count(void);

/* Whether pid (a job's, from job_pid before its end) is one of them. */
bool job_is_stuck(pid_t pid);

/* Forget the stuck children (at exit: the loop goes, and they are
 * reparented once this process ends): one last look reaps the ones that
 * have died. */
void job_stuck_free(void);

#endif
