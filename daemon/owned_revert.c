/* owned_revert: what smbtuned wrote and did not finish taken back: the
 * revert of a live trial or an unfinished commit and smbd told, in a job
 * or in place, and what it came to in the parent (owned_settle): the
 * record ended, a hold for an edit by hand, or the record kept for the
 * next try (a part of the owned module, see owned.h). */
#include "owned.h"
#include "owned_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "journal.h"
#include "smbconf.h"
#include "window.h"

/* Whether the record's last step is the live trial known to be in force
 * (live_sure: its put said it wrote it, and nothing of ours wrote since). */
static bool last_step_sure(const struct owned *w)
{
    const struct smbconf_edit *ed = &w->st->pending_edit;
    char *value;
    bool same;

    if (!w->live_sure || w->live_value == NULL || ed->prev == NULL || w->st->pending_commit)
        return false;
    value = smbconf_edit_value(ed);
    same = value != NULL && strcmp(value, w->live_value) == 0;
    free(value);
    return same;
}

/* The revert and telling smbd, in the job or, at a stop, in place. */
void owned_revert(struct owned *w, struct reply *rep)
{
    struct err e = {{0}}, ae = {{0}};
    struct smbconf_edit ed = w->st->pending_edit; /* (a shallow copy: owns nothing) */

    memset(rep, 0, sizeof(*rep));
    /* A chained record takes the line of its step before (ed.prev) for
     * ours: until the last step is written, or when it failed, the file
     * holds that line. Once that step is known to be in force, the line
     * before it found there again is an admin's edit (a value smbtuned
     * wrote a while ago, set by hand), which stands and holds as any
     * other (-ECANCELED), rather than being taken back as ours. */
    if (last_step_sure(w))
        ed.prev = NULL;
    rep->r = smbconf_revert(w->o->smb_conf, w->o->state_dir, &ed, &e);
    /* The record names the file our bytes were written in. When the
     * config's smb_conf no longer leads there (it was changed before a
     * restart after a kill -9), that file is still where they are: the
     * undo checks them there, rather than dropping the record. */
    if (rep->r == -ECANCELED && strcmp(w->st->pending_edit.file, w->o->smb_conf) != 0)
        rep->r = smbconf_revert(w->st->pending_edit.file, w->o->state_dir, &ed, &e);
    memcpy(rep->msg, e.msg, sizeof(rep->msg));
    /* (also after a shadowed take-back: smbd may not have read the line
     * now in force yet) */
    if (rep->r >= 0)
        rep->apply_r = apply_run(owned_trial_apply(w->o), w->o->smb_conf, w->o->smbd_unit, &ae);
    memcpy(rep->apply_msg, ae.msg, sizeof(rep->apply_msg));
}

/* The take-back's journal event; after: what the line holds now. */
static void taken_back(struct owned *w, const struct reply *rep, const char *after)
{
    char conf[4200];
    const char *f[] = {conf, NULL};

    snprintf(conf, sizeof(conf), "SMBTUNED_SMB_CONF=%s", w->st->pending_edit.file);
    journal_event(JOURNAL_ID_TAKE_BACK, LOG_NOTICE, f, "%s taken back in %s: %s",
                  w->st->pending_commit || w->st->pending_unrestarted || rep->unrestarted
                      ? "unfinished change"
                      : "live trial",
                  w->st->pending_edit.file, after);
    if (rep->apply_r < 0)
        journal_log(LOG_WARNING, "%s", rep->apply_msg);
}

/* Our take-back found the line holding what the live trial replaced
 * (or, where the trial added the line, none: -EALREADY). At a start that
 * is what a run killed between its own take-back's write and the save of
 * the state that ends the record leaves, as does a job of ours killed,
 * cancelled at a stop or ended without its reply half-way through one:
 * nothing tells our write of the original from an admin's, and a hold
 * there would stop tuning for good after a mere kill -9
 * (tests/faults/test_kill.py), so the record just ends. While the
 * daemon runs with its trial known to be in force as written and nothing
 * of ours written since (live_sure), only someone else can have put the
 * original back: an edit by hand, which holds as any other does (README:
 * it does not fight your edits); the cycles after it would otherwise run
 * live trials again over the admin's line. */
static bool set_back_by_hand(const struct owned *w, const struct reply *rep)
{
    return rep->r == -EALREADY && w->live_sure && w->live_value != NULL && !rep->unrestarted &&
           !rep->late && !rep->files_open && w->st->pending && !w->st->pending_commit &&
           !w->st->pending_unrestarted;
}

/* What a revert came to, in the parent. */
int owned_settle(struct owned *w, const struct reply *rep)
{
    int r = rep->r;

    if (rep->unrestarted) {
        journal_log(LOG_WARNING, "smbd could not be restarted for the change: %s",
                    rep->restart_msg);
        if (rep->restart_queued) {
            /* An admin's stop of smbd passes; the smbd that starts
             * after it reads the line in force then. Turning restarts
             * off until a reload (tuner_restart_failed) is for a fault
             * of the unit's that would come back every cycle. */
            journal_log(LOG_NOTICE,
                        "restart_smbd stays on: a job queued for smbd (a stop of it?) is no "
                        "fault of %s",
                        w->o->smbd_unit);
        } else {
            snprintf(w->restart_failed, sizeof(w->restart_failed), "%s", rep->restart_msg);
            w->restart_failed_new = true;
        }
    }
    /* a trial's record, should the job's save of it have failed: taken
     * back, never confirmed (owned_restart.c: unrestarted, and
     * owned_files_back for files open on smbd) */
    if ((rep->unrestarted || rep->files_open) && w->st->pending && w->st->pending_commit) {
        owned_demote(w->st);
        owned_save(w->o, w->st);
    }
    if (set_back_by_hand(w, rep)) {
        char *why;

        /* what the line holds and where first (rep->msg), then the trial */
        if (asprintf(&why,
                     "%s: an edit by hand during smbtuned's live trial of '%s' (smbtuned "
                     "did not take it back)",
                     rep->msg, w->live_value) < 0)
            why = NULL;
        owned_hold(w, why ? why
                          : "socket options set back by hand during a live trial (out of memory "
                            "for the details)");
        free(why);
        r = -ECANCELED;
    } else if (r == 0 || r == -EALREADY) {
        if (r == 0 && rep->unrestarted) {
            taken_back(w, rep,
                       "the socket options line holds what it held before: the change needs "
                       "smbd restarted (restart_smbd = yes), and the restart failed");
        } else if (r == 0 && rep->files_open) {
            char why[sizeof(rep->restart_msg) + 100];

            snprintf(why, sizeof(why), "the socket options line holds what it held before: %s",
                     rep->restart_msg);
            taken_back(w, rep, why);
        } else if (r == 0 && rep->late) {
            char win[24], late[200];

            window_str(w->o->window_start, w->o->window_end, win, sizeof(win));
            snprintf(late, sizeof(late),
                     "the socket options line holds what it held before: the change needs smbd "
                     "restarted (restart_smbd = yes), never done outside the time window %s",
                     win);
            taken_back(w, rep, late);
        } else if (r == 0) {
            taken_back(w, rep, "the socket options line holds what it held before");
        } else {
            /* not "taken back": nothing here says who put it there */
            journal_log(LOG_INFO, "%s: nothing to take back", rep->msg);
        }
        owned_pending_clear(w->st);
        owned_save(w->o, w->st);
        r = 0;
    } else if (r == SMBCONF_UNDONE_SHADOWED || r == SMBCONF_UNDONE_UNREAD) {
        /* ours is gone from the file, and the line in force is someone
         * else's, or the file is now one we refuse: a hand edit, held as
         * any other */
        taken_back(w, rep,
                   r == SMBCONF_UNDONE_SHADOWED
                       ? "another socket options line is in force"
                       : "the configuration now holds what smbtuned cannot follow");
        owned_hold(w, rep->msg);
        r = -ECANCELED;
    } else if (r == -ECANCELED) {
        owned_hold(w, rep->msg);
    } else {
        /* the record stays: the next cycle, or the next start, tries again */
        owned_error(w, LOG_ERR, "taking our change back failed: %s", rep->msg);
    }
    free(w->live_value);
    w->live_value = NULL;
    w->live_sure = false;
    return r;
}
