/* conf_check: what the start, -t and a SIGHUP refuse in smb.conf before
 * any cycle would only fail on it: a file that cannot be read or that the
 * editor refuses (a registry backend, a relative include...), and a line
 * that could not be written where it stands (a read-only directory under
 * the unit's sandbox). The start and -t check in place; a SIGHUP, in a
 * job: reading smb.conf and its includes may block on a hung mount, and
 * the event loop must not. The job checks the credentials file too
 * (creds_check, up to CREDS_CHECK_DEADLINE_S), which the start checks in
 * cmd_fill. */
#ifndef SMBTUNED_CONF_CHECK_H
#define SMBTUNED_CONF_CHECK_H

#include <systemd/sd-event.h>

#include "err.h"
#include "job.h"
#include "smbconf.h"
#include "tuner.h"

/* smb.conf read as the editor reads it, and in tune mode the directory of
 * the file that holds (or would hold) the socket options line writable
 * here: 0, or -EINVAL (the read: file and line) or -EROFS (the reason and
 * the fix) with the reason in e. One read of smb.conf serves both. */
int conf_check(const struct tuner_opts *o, struct err *e);

/* The second check alone, on smb.conf as c holds it (read by the caller):
 * 0, or -EROFS with the reason and the fix in e. */
int conf_check_writable(const struct tuner_opts *o, const struct smbconf *c, struct err *e);

/* A SIGHUP's check's bound: the read of smb.conf and its includes, which
 * takes milliseconds unless a mount hangs, and the credentials check
 * (bound at about 11 s: its own deadline, then a second to reap). */
#define CONF_CHECK_DEADLINE_S 30.0

/* Called once from the loop: r 0 (both checks passed) or -errno, and why
 * (a job that failed or timed out says so). */
typedef void (*conf_check_fn)(void *ud, int r, const char *msg);

/* A check under way, in the caller's keeping (job NULL: none). */
struct conf_check {
    struct job *job;
    const struct tuner_opts *o;
    conf_check_fn done;
    void *ud;
};

/* Both checks of o, and the check of o's credentials file (when it names
 * one), in a job with deadline_s: 0 (c->job set until done is called), or
 * -errno with the reason in e (done is never called). o is read in the
 * job only (a forked copy). */
int conf_check_start(struct conf_check *c, sd_event *ev, const struct tuner_opts *o,
                     double deadline_s, conf_check_fn done, void *ud, struct err *e);

/* Give up a check under way (a stop): done is never called. */
void conf_check_cancel(struct conf_check *c);

#endif
