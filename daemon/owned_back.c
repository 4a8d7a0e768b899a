/* owned_back: what smbtuned wrote and did not finish, settled: a live
 * trial or an unfinished commit taken back, or a commit a run left in
 * force confirmed, in a job or in place (a part of the owned module, see
 * owned.h). This file: which of the two (back_plan), the confirm, and the
 * job or the place they run in; the revert and what it comes to are in
 * owned_revert.c. */
#include "owned.h"
#include "owned_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apply.h"
#include "files.h"
#include "job.h"
#include "journal.h"
#include "report.h"
#include "smbconf.h"
#include "smbd.h"
#include "sockopts.h"

/* Whether the line in force is the one the pending edit wrote: its value
 * (malloc'ed), else NULL. */
static char *pending_on_disk(struct owned *w)
{
    const struct smbconf_edit *ed = &w->st->pending_edit;
    const char *line = ed->written + ed->line_off;
    struct smbconf c;
    struct err e;
    char *value = NULL;
    int r = smbconf_load(&c, w->o->smb_conf, &e);

    /* A configuration the parse now refuses (an admin's relative include,
     * say): ours where it stands as written, for testparm to judge
     * (confirm); README: a commit is kept once testparm reads it. */
    if (r < 0)
        return smbconf_refused(r) ? smbconf_ours_value(ed) : NULL;
    if (c.found && strcmp(c.files[c.hit.file].path, ed->file) == 0 &&
        c.hit.end - c.hit.start == ed->line_len &&
        memcmp(c.files[c.hit.file].buf + c.hit.start, line, ed->line_len) == 0)
        value = strdup(c.value);
    smbconf_free(&c);
    return value;
}

/* A commit found in force is ours from now on. */
static void kept(struct owned *w, const char *value)
{
    state_set_str(&w->st->last_written, value);
    w->st->written_at = (long)time(NULL); /* found in force now */
    owned_pending_clear(w->st);
    owned_save(w->o, w->st);
}

/* The sizes a value we wrote sets, as the search names them (absent:
 * SEARCH_AUTO); -1 when it cannot be parsed. */
static int written_config(const char *value, struct search_config *c)
{
    struct sockopts so;
    struct sockopts_size rcv, snd;

    if (sockopts_parse(value, &so) < 0)
        return -1;
    rcv = sockopts_get(&so, SOCKOPTS_RCVBUF);
    snd = sockopts_get(&so, SOCKOPTS_SNDBUF);
    c->rcvbuf = rcv.present ? rcv.value : SEARCH_AUTO;
    c->sndbuf = snd.present ? snd.value : SEARCH_AUTO;
    sockopts_free(&so);
    return 0;
}

/* What the record says of a restart for its commit: 1 needed, 0 not
 * (or restart_smbd is off now), -1 it does not say (before version 7). */
static int recorded_restart(const struct owned *w)
{
    if (!w->o->restart_smbd)
        return 0;
    if (w->st->pending_restart == STATE_RESTART_UNKNOWN)
        return -1;
    return w->st->pending_restart == STATE_RESTART_YES;
}

/* Whether a commit in force that its run never finished needs smbd
 * restarted: as that run decided (the record's pending_restart), while
 * restart_smbd is still on. A record of a version before 7 does not say:
 * then by outcome.c's rule as far as it can be seen now, restart_smbd is
 * on and smbd's listener holds an explicit size for a buffer the commit
 * leaves to autotuning (the kernel cannot tell an explicit
 * SO_RCVBUF=65536 from the autotuning start size, hence the record). */
static bool restart_wanted(const struct owned *w, const char *value)
{
    struct search_config c;
    struct smbd_listener l;
    struct err e;
    int ports[SMBD_MAX_PORTS], n = 0;
    bool rcv_auto, snd_auto;
    pid_t pid;
    int rec = recorded_restart(w);

    if (rec >= 0)
        return rec;
    if (written_config(value, &c) < 0)
        return false;
    rcv_auto = c.rcvbuf == SEARCH_AUTO;
    snd_auto = c.sndbuf == SEARCH_AUTO;
    if ((!rcv_auto && !snd_auto) || smbd_pid(w->o->smb_conf, &pid, &e) < 0 ||
        smbd_ports(w->o->smb_conf, ports, &n, &e) < 0 || n == 0 ||
        smbd_listener_explicit(ports[0], &l, &e) < 0)
        return false;
    return (rcv_auto && l.rcv) || (snd_auto && l.snd);
}

/* A commit in force that its run never finished (killed, stopped, or its
 * job died after the write): the check its write would have made after it
 * (testparm reads the line as written, else it is taken back), then smbd
 * told as that run would have told it. In a job, or at start-up in place. */
static void confirm(struct owned *w, struct reply *rep)
{
    struct err e = {{0}}, ae = {{0}};
    bool checked, undone, restart;

    memset(rep, 0, sizeof(*rep));
    rep->r = smbconf_confirm(w->o->smb_conf, w->o->state_dir, &w->st->pending_edit, w->keep_value,
                             &checked, &undone, &rep->undo, &e);
    rep->checked = checked;
    rep->undone = undone;
    memcpy(rep->msg, e.msg, sizeof(rep->msg));
    /* --dry-run settles what a killed run left in smb.conf, as the man
     * page says, but restarts nothing: a restart drops every client, and
     * an admin asking for a dry run expects none. smbd is told as `apply`
     * says; autotuning reaches new connections once smbd restarts. The
     * window was open when back_plan asked, but smbconf_confirm's
     * testparm may have run past its end: then the commit is taken back
     * after all (BACK_LATE says why). Never under --dry-run, which comes
     * with --once, which ignores the window. */
    restart = rep->r == 0 && w->wants_restart;
    if (restart && owned_outside_window(w->o)) {
        owned_revert(w, rep);
        rep->late = true;
        return;
    }
    rep->not_restarted = restart && w->o->dry_run;
    if (restart && !w->o->dry_run) {
        int r = owned_smbd_restart(w, rep);

        if (r == -ETIME) {
            /* its checks ran past the window's end */
            owned_revert(w, rep);
            rep->late = true;
        } else if (r == -ETXTBSY) {
            /* Files open on smbd: no restart cuts them off, and without
             * one the listener keeps the old sizes while the line reads
             * as autotuning, with no later cycle to restart it: taken
             * back, as a late one is (restart_msg says why). */
            owned_files_back(w, rep);
        }
        if (r < 0)
            return;
    } else if (rep->r == 0) {
        rep->apply_r = apply_run(w->o->apply, w->o->smb_conf, w->o->smbd_unit, &ae);
    } else if (undone) {
        rep->apply_r = apply_run(owned_trial_apply(w->o), w->o->smb_conf, w->o->smbd_unit, &ae);
    }
    memcpy(rep->apply_msg, ae.msg, sizeof(rep->apply_msg));
}

/* What a confirm came to, in the parent: 0 settled (kept, or taken back),
 * else the record stays and the next cycle confirms again. */
static int confirmed(struct owned *w, const struct reply *rep)
{
    const struct smbconf_edit *ed = &w->st->pending_edit;
    struct event_fields fields = {.smb_conf = ed->file};
    struct search_config c;
    char how[sizeof(rep->apply_msg) + 64];

    if (rep->r < 0 && rep->undone) {
        struct reply back = *rep;

        owned_error(w, LOG_ERR, "%s: checking the change a run that did not finish wrote: %s",
                    ed->file, rep->msg);
        /* taken back, with another line (or one we refuse) standing: an
         * admin's edit, held (owned_settle) */
        back.r = rep->undo > 0 ? rep->undo : 0;
        return owned_settle(w, &back);
    }
    if (rep->r < 0) {
        /* not checked (the edit lock was busy), or taken back and that
         * failed: as it is, until the next cycle */
        owned_error(w, rep->checked ? LOG_ERR : LOG_WARNING,
                    "%s: the change a run that did not finish wrote is %s: %s; the next cycle "
                    "checks it again",
                    ed->file, rep->checked ? "still in force, its check failed" : "not checked yet",
                    rep->msg);
        free(w->live_value);
        w->live_value = NULL;
        w->live_sure = false;
        return rep->r;
    }
    if (rep->apply_r < 0) /* (a restart that failed was taken back: settle) */
        snprintf(how, sizeof(how), "telling smbd failed: %s", rep->apply_msg);
    else if (rep->not_running)
        snprintf(how, sizeof(how), "%s: it takes the line when it starts", rep->restart_msg);
    else if (rep->restarted)
        snprintf(how, sizeof(how),
                 "smbd is restarted now, so that autotuning reaches new "
                 "connections (restart_smbd = yes)");
    else if (rep->not_restarted && w->o->apply == APPLY_NONE)
        snprintf(how, sizeof(how),
                 "smbd is neither told (apply = none) nor restarted (--dry-run): autotuning "
                 "reaches new connections once smbd restarts");
    else if (rep->not_restarted)
        snprintf(how, sizeof(how),
                 "smbd is told (apply = %s) but not restarted (--dry-run): autotuning "
                 "reaches new connections once smbd restarts",
                 apply_name(w->o->apply));
    else if (w->o->apply == APPLY_NONE)
        snprintf(how, sizeof(how),
                 "smbd takes it at its next reload-config or restart "
                 "(apply = none)");
    else
        snprintf(how, sizeof(how), "smbd is told now (apply = %s)", apply_name(w->o->apply));
    /* The commit event, with the fields its catalog entry names (the
     * sizes as written: absent is "auto") */
    if (written_config(w->keep_value, &c) == 0)
        fields.c = &c;
    report_event(JOURNAL_ID_COMMIT, rep->apply_r < 0 || rep->down_after ? LOG_WARNING : LOG_NOTICE,
                 &fields, "%s: %.*s: written by a run that did not finish, checked and kept: %s",
                 ed->file, (int)ed->line_len, ed->written + ed->line_off, how);
    kept(w, w->keep_value);
    free(w->live_value);
    w->live_value = NULL;
    w->live_sure = false;
    return 0;
}

/* What a take-back is to do. With keep, a commit in force stays, once
 * confirmed (w->keep_value: its value); anything else pending is
 * reverted. The blocking take-backs (a stop, the start) decide in place;
 * owned_take_back in its job (back_job): reading smb.conf may block. */
enum back_plan { BACK_NOTHING, BACK_REVERT, BACK_CONFIRM, BACK_LATE };

/* BACK_LATE: a commit in force that needs smbd restarted (restart_wanted,
 * asked once, here: w->wants_restart), outside the time window (a start
 * after a crash, at noon; --once ignores the window). A restart moves
 * every client off, which the window keeps to its hours, and without one
 * smbd's listener would keep the old sizes with no later cycle to restart
 * it (the line already reads as autotuning). It is taken back, as a
 * search that converges after the window closed keeps the line it
 * started from (tuner_search.c): the next cycle, in the window, searches
 * again. judge: whether to ask (not at a stop, which leaves a commit to
 * confirm to the next start, and must not wait for smbd; a stop goes by
 * the record alone). */

static enum back_plan back_plan(struct owned *w, bool keep, bool judge)
{
    if (!w->st->pending)
        return BACK_NOTHING;
    free(w->keep_value);
    w->keep_value = NULL;
    w->wants_restart = false;
    if (keep && w->st->pending_commit && (w->keep_value = pending_on_disk(w)) != NULL) {
        /* A stop asks smbd nothing about its listener, but the record
         * is at hand: a commit recorded as needing a restart, outside
         * the window (its write met the window shut), goes back now, as
         * the next start would take it (a revert, as a live trial's at
         * a stop: the edit lock, smbcontrol), so that a run stopped for
         * good leaves none. */
        if (!judge)
            return recorded_restart(w) == 1 && owned_outside_window(w->o) ? BACK_LATE
                                                                          : BACK_CONFIRM;
        w->wants_restart = restart_wanted(w, w->keep_value);
        return w->wants_restart && owned_outside_window(w->o) ? BACK_LATE : BACK_CONFIRM;
    }
    return BACK_REVERT;
}

/* In the job: whether a commit to keep is in force (its line read as the
 * record wrote it, pending_on_disk: reading smb.conf may block on a hung
 * mount, so not in the loop's process) decides between its check and the
 * revert. The reply says which (confirmed), the kept value after it. */
static int back_job(void *arg, int out_fd)
{
    struct owned *w = arg;
    struct reply *rep;
    /* (the child's copy of w: keep_value is set here for confirm()) */
    enum back_plan plan = back_plan(w, w->confirming, true);
    bool keep = plan == BACK_CONFIRM;
    size_t vlen = keep ? strlen(w->keep_value) : 0;
    int r;

    rep = calloc(1, sizeof(*rep) + vlen + 1);
    if (rep == NULL)
        return -ENOMEM;
    if (keep) {
        confirm(w, rep);
        rep->confirmed = !rep->late && !rep->unrestarted && !rep->files_open;
        memcpy(rep + 1, w->keep_value, vlen);
    } else {
        owned_revert(w, rep);
        rep->late = plan == BACK_LATE;
    }
    r = files_write_all(out_fd, rep, sizeof(*rep) + vlen + 1);
    free(rep);
    return r;
}

static void back_done(struct job *j, const struct job_result *jr, void *ud)
{
    struct owned *w = ud;
    const struct reply *rep = (const void *)jr->data;
    int r;

    w->job = NULL;
    /* The job writes the state only when a confirm restarted smbd, or
     * did not (restart_done, unrestarted, owned_files_back): what the
     * record says now, also when the job died before its reply. */
    owned_reload(w);
    if (jr->unreaped) {
        owned_stuck(w, job_pid(j),
                    w->confirming ? "checking our change" : "taking our change back");
        r = -ETIMEDOUT;
    } else if (!jr->ok || jr->len < sizeof(*rep) + 1 || jr->data[jr->len - 1] != '\0') {
        owned_error(w, LOG_ERR, "%s our change failed: the job %s",
                    w->confirming ? "checking" : "taking back",
                    jr->timed_out ? "did not finish within its deadline" : "failed");
        r = jr->timed_out ? -ETIMEDOUT : -EIO;
    } else if (rep->confirmed) {
        free(w->keep_value);
        w->keep_value = strdup((const char *)(rep + 1));
        r = w->keep_value != NULL ? confirmed(w, rep) : -ENOMEM;
    } else {
        r = owned_settle(w, rep);
    }
    /* (a take-back that died may have written anything: settled or not,
     * no trial of ours is sure to be in force now) */
    w->live_sure = false;
    w->back_done(w->ud, r);
}

/* Deliver "nothing to take back" from the loop, as a job would. */
static int on_nothing(sd_event_source *src, void *ud)
{
    struct owned *w = ud;

    w->defer = sd_event_source_disable_unref(w->defer);
    w->back_done(w->ud, 0);
    return 0;
}

int owned_take_back(struct owned *w, bool keep, owned_back_fn done, void *ud)
{
    struct err e;
    int r;

    w->error[0] = '\0';
    if (owned_refuse_while_stuck(w) < 0 || owned_busy(w))
        return -EBUSY;
    w->back_done = done;
    w->ud = ud;
    if (!w->st->pending)
        return sd_event_add_defer(w->ev, &w->defer, on_nothing, w);
    /* a commit to keep, if the job finds it in force (back_job) */
    w->confirming = keep && w->st->pending_commit;
    r = job_start(w->ev, back_job, w, OWNED_JOB_DEADLINE_S, back_done, w, &w->job, &e);
    if (r < 0)
        owned_error(w, LOG_ERR, "taking our change back: %s", e.msg);
    return r;
}

/* A take-back in the loop's own process (a stop, a start), settled at
 * once; late: BACK_LATE (back_plan). */
static int revert_in_place(struct owned *w, bool late)
{
    struct reply rep;

    owned_revert(w, &rep);
    rep.late = late;
    return owned_settle(w, &rep);
}

bool owned_take_back_now(struct owned *w, bool keep)
{
    const struct smbconf_edit *ed = &w->st->pending_edit;
    enum back_plan plan;
    int r;

    w->error[0] = '\0';
    if (w->job != NULL && w->reading) {
        /* it writes nothing: one that outlives its SIGKILL only reads */
        job_cancel(w->job);
        w->job = NULL;
        w->reading = false;
    } else if (w->job != NULL) {
        pid_t pid = job_pid(w->job);
        bool gone = job_cancel(w->job);

        /* a put killed half-way may have recorded its edit already, and
         * a take-back may have written the original back: whatever the
         * line holds now may be ours (owned_settle) */
        w->job = NULL;
        w->live_sure = false;
        owned_reload(w);
        if (!gone)
            owned_stuck(w, pid, "stopping");
    }
    w->defer = sd_event_source_disable_unref(w->defer);
    if (owned_still_stuck(w) && w->st->pending) {
        /* A job of ours that did not die may still write smb.conf after
         * a take-back (which would likely hang on the same mount): the
         * record stays, for the next start. */
        journal_log(LOG_ERR,
                    "stopping: a job editing %s did not end when killed (stuck in the "
                    "kernel: a hung mount?); what it wrote is taken back at the next "
                    "start",
                    w->o->smb_conf);
        return true;
    }
    plan = back_plan(w, keep, false);
    switch (plan) {
    case BACK_NOTHING:
        return false;
    case BACK_CONFIRM:
        /* A stop does not wait for testparm and smbd (a hung smbcontrol
         * may be why it came): the record stays, and the next start
         * confirms the commit (owned_recover), which is when the commit
         * event is told. */
        journal_log(LOG_NOTICE,
                    "%s: %.*s: written, but smbtuned stopped before it was checked and smbd was "
                    "told: the next start checks it and tells smbd (or, outside the time "
                    "window, takes back one that needs smbd restarted)",
                    ed->file, (int)ed->line_len, ed->written + ed->line_off);
        return false;
    case BACK_REVERT:
    case BACK_LATE:
        r = revert_in_place(w, plan == BACK_LATE);
        /* -ECANCELED: the line in force is someone else's now (held) */
        return r < 0 && r != -ECANCELED;
    }
    return false;
}

/* (live_sure is false here: a trial's line found holding what it
 * replaced ends its record without a hold, owned_settle says why; the
 * journal's "live trial ... pending: settling it" came before) */
void owned_recover(struct owned *w)
{
    struct reply rep;

    enum back_plan plan = back_plan(w, true, true);

    switch (plan) {
    case BACK_NOTHING:
        return;
    case BACK_CONFIRM:
        confirm(w, &rep);
        if (rep.late || rep.unrestarted || rep.files_open)
            owned_settle(w, &rep);
        else
            confirmed(w, &rep);
        return;
    case BACK_REVERT:
    case BACK_LATE:
        revert_in_place(w, plan == BACK_LATE);
    }
}
