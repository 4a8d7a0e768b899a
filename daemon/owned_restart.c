/* owned_restart: smbd restarted for a commit that needs it (restart_smbd
 * = yes), in the job that wrote or confirmed it, and what is done when
 * that fails or files are open on it (a part of the owned module, see
 * owned.h). */
#include "owned_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "apply.h"
#include "journal.h"

/* A commit whose restart of smbd failed: its record made a trial's, so
 * that whatever settles it takes it back and never keeps it, marked as
 * what it was (none to mark when the line held the value: the mark with
 * nothing pending would make the file damaged). */
void owned_demote(struct state *st)
{
    st->pending_commit = false;
    st->pending_restart = STATE_RESTART_UNKNOWN;
    st->pending_unrestarted = st->pending;
}

/* In the job: a commit in force whose restart of smbd is not made goes
 * back at once. The record is made a trial's first and saved, so that
 * whatever settles it should this revert fail (the cycle's end, the next
 * cycle or start) takes it back too, and never confirms it and tries the
 * restart again outside the cycle's checks; the reply is the revert's
 * (owned_settle says what came of it). */
static void back_unrestarted(struct owned *w, struct reply *rep)
{
    struct err se;

    owned_demote(w->st);
    if (state_save(w->o->state_dir, w->st, &se) < 0)
        journal_log(LOG_ERR, "%s", se.msg);
    owned_revert(w, rep);
}

/* In the job: files open on smbd, found by owned_smbd_restart right
 * before the restart a commit in force needs (restart_msg: how many).
 * Without the restart the listener keeps the old sizes while the line
 * reads as autotuning: back at once, as when the restart fails
 * (unrestarted), with files_open. */
void owned_files_back(struct owned *w, struct reply *rep)
{
    char why[sizeof(rep->restart_msg)];

    memcpy(why, rep->restart_msg, sizeof(why));
    back_unrestarted(w, rep);
    rep->files_open = true;
    snprintf(rep->restart_msg, sizeof(rep->restart_msg), "not kept: %s", why);
}

/* In the job: smbd could not be restarted for the commit in force (a
 * put's, or a confirm's; why: in e). Without the restart its listener
 * keeps the old sizes while the line reads as autotuning, and no later
 * search would write that line again and restart smbd: back at once. */
static void unrestarted(struct owned *w, struct reply *rep, const struct err *e)
{
    back_unrestarted(w, rep);
    rep->unrestarted = true;
    memcpy(rep->restart_msg, e->msg, sizeof(rep->restart_msg));
}

/* systemd has the restart (its job is queued), or no smbd runs: the
 * record says so at once, in the job, before the restart's end is waited
 * for. Its parent clears the record only when the reply comes; a run
 * killed before that, or a reply lost, would otherwise leave "restart
 * yes" to the next start, which would restart smbd a second time, or take
 * the commit back outside the window although it is in force. */
static void restart_done(void *arg)
{
    struct owned *w = arg;
    struct err e;

    /* only over this job's record (none when the line held the value) */
    if (!w->st->pending || !w->st->pending_commit)
        return;
    w->st->pending_restart = STATE_RESTART_NO;
    if (state_save(w->o->state_dir, w->st, &e) < 0)
        journal_log(LOG_ERR,
                    "smbd's restart is under way, but the state file still says the change "
                    "needs it (a start after a kill would restart it again): %s",
                    e.msg);
}

/* How long the job waits for smbd's restart to end: a stop and a start,
 * a second or two as Debian's smbd.service runs them. Counted in the
 * job's bound (OWNED_JOB_DEADLINE_S) and in the unit's TimeoutStartSec
 * (a start confirms a killed run's commit before READY=1). A job killed
 * during the wait (its bound, a stop) has recorded that systemd has the
 * restart: the next start keeps the commit without restarting again,
 * whatever the restart came to. */
#define RESTART_WAIT_S 45.0

/* In the job, after the write of a commit that needs smbd restarted
 * (its own, or a killed run's being confirmed): the check that the smbd
 * is its unit's (smbd_unit; apply_restart_check: its testparm and D-Bus
 * calls may take a while), then the time window, right before the
 * restart, then the restart, waited for. 0: restarted (rep->restarted),
 * or smbd is not running (rep->not_running, restart_msg says why: none
 * ran, it was stopping, or it is down after the restart, which
 * rep->down_after marks for a warning): it takes the line when it
 * starts; -ETIME: the window shut, nothing done; -ETXTBSY: files open on
 * smbd, or not known (restart_msg says), nothing done; else the restart failed,
 * left the smbd of before running, or could not be made, and the line
 * went back (unrestarted: the reply is the revert's). */
int owned_smbd_restart(struct owned *w, struct reply *rep)
{
    struct err ae = {{0}};
    bool queued = false;
    int r;

    /* Files open on smbd, asked again here: the check before a commit's
     * write may be a minute old (testparm after it), and a killed run's
     * commit had none. First, before the checks of the unit: they cannot
     * make a restart right over an open file. */
    if (owned_files_open(w->o, &ae) < 0) {
        memcpy(rep->restart_msg, ae.msg, sizeof(rep->restart_msg));
        return -ETXTBSY;
    }
    r = apply_restart_check(w->o->smb_conf, w->o->smbd_unit, &ae);
    if (r >= 0 && owned_outside_window(w->o))
        return -ETIME;
    if (r == 1)
        restart_done(w);
    if (r == 0) {
        r = apply_restart_smbd(w->o->smbd_unit, RESTART_WAIT_S, restart_done, w, &ae);
        queued = r == -EBUSY;
    }
    if (r < 0) {
        unrestarted(w, rep, &ae);
        rep->restart_queued = queued;
        return r;
    }
    rep->restarted = r == 0;
    rep->not_running = r > 0;
    rep->down_after = r == 2;
    if (r > 0)
        memcpy(rep->restart_msg, ae.msg, sizeof(rep->restart_msg));
    return 0;
}
