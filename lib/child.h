/* child: one way to start a process of ours (a helper such as testparm or
 * smbcontrol, the probe's measuring child, a shadow smbd) and to wait for a
 * helper with a deadline. */
#ifndef SMBTUNE_CHILD_H
#define SMBTUNE_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The PATH a child with a clean environment gets. */
#define CHILD_SAFE_PATH "/usr/sbin:/usr/bin:/sbin:/bin"

/* A descriptor of child_spec that stays what the parent had there. */
#define CHILD_KEEP (-2)

/* What the child of a fork makes of itself before it execs (or, for the
 * probe, before it measures). */
struct child_spec {
    pid_t parent;     /* > 0: die with it (PDEATHSIG SIGKILL); exit if it is already gone */
    bool new_session; /* setsid: a process group of its own that can be signalled whole */
    int fd_in, fd_out, fd_err; /* become 0, 1, 2; -1: /dev/null, CHILD_KEEP: as it is */
    int fd_extra;              /* becomes 3 when >= 0 */
    const char *home; /* not NULL: an environment of only HOME=home and PATH=CHILD_SAFE_PATH */
};

/* In the child, right after fork: reset the signal mask and every handler,
 * PDEATHSIG, the descriptors (0-2, 3 when asked, every other one closed),
 * the session and the environment as spec says. 0, or -errno: the caller
 * then _exits. */
int child_setup(const struct child_spec *spec);

/* Reap pid, a child of ours that was sent SIGKILL, waiting at most
 * wait_s seconds: true when reaped (*status, when not NULL, its wait
 * status). A child whose I/O in the kernel does not let SIGKILL act (a
 * file system that does not answer: a hung NFS or FUSE mount) may take
 * any time: false, and it is kept and reaped, once it can go, by a later
 * call (of any caller), so that a stalled mount leaves no zombie per
 * call for good; more than CHILD_STRAYS_MAX at once are left to our
 * exit. */
#define CHILD_STRAYS_MAX 8
bool child_reap_within(pid_t pid, double wait_s, int *status);

/* Reap the kept children that can go now: how many are still kept. */
int child_reap_strays(void);

/* Monotonic clock in seconds: the clock every deadline is counted on. */
double child_now(void);

/* Run argv[0] (searched in PATH) with stdin from /dev/null, collect up to
 * outlen-1 bytes of its stdout (and, when errout is given, its stderr),
 * kill it after timeout_s seconds. *status gets the exit status, or -1
 * when it was killed or died by a signal. Returns 0 when the program ran,
 * a negative errno when it could not be started or waited for. */
int child_run(char *const argv[], double timeout_s, char *out, size_t outlen, char *errout,
              size_t errlen, int *status);

/* child_run with output of any length up to max bytes each, in malloc'ed
 * strings (*errout may be NULL when not wanted): for output that carries
 * a value of unknown length. -EFBIG when the program said more than max. */
int child_run_alloc(char *const argv[], double timeout_s, size_t max, char **out, char **errout,
                    int *status);

#endif
