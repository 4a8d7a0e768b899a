/* owned: see owned.h. This file: the module's state, the hold, and the
 * put of a trial or a commit in a job. The take-back and the confirm are
 * in owned_back.c (the revert in owned_revert.c), smbd's restart for a
 * commit in owned_restart.c, the read of the line in owned_read.c. */
#include "owned.h"
#include "owned_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apply.h"
#include "files.h"
#include "job.h"
#include "journal.h"
#include "smbconf.h"
#include "smbstatus.h"
#include "window.h"

int owned_new(sd_event *ev, const struct tuner_opts *o, struct state *st, struct owned **op)
{
    struct owned *w = calloc(1, sizeof(*w));

    if (w == NULL)
        return -ENOMEM;
    w->ev = sd_event_ref(ev);
    w->o = o;
    w->st = st;
    *op = w;
    return 0;
}

void owned_free(struct owned *w)
{
    if (w == NULL)
        return;
    job_cancel(w->job);
    sd_event_source_disable_unref(w->defer);
    free(w->live_value);
    free(w->keep_value);
    sd_event_unref(w->ev);
    free(w);
}

const char *owned_live_value(const struct owned *w)
{
    return w->live_value;
}

bool owned_busy(const struct owned *w)
{
    return w->job != NULL || w->defer != NULL || owned_still_stuck(w);
}

const char *owned_restart_failure(struct owned *w)
{
    if (!w->restart_failed_new)
        return NULL;
    w->restart_failed_new = false;
    return w->restart_failed;
}

void owned_error(struct owned *w, int prio, const char *fmt, ...)
{
    va_list ap, again;
    char *msg;
    int n;

    va_start(ap, fmt);
    va_copy(again, ap);
    n = vasprintf(&msg, fmt, ap);
    va_end(ap);
    if (n < 0) {
        /* no memory for the whole line: the part that fits */
        vsnprintf(w->error, sizeof(w->error), fmt, again);
        va_end(again);
        journal_log(prio, "%s", w->error);
        return;
    }
    va_end(again);
    /* the journal has it whole; --once --json's object, cut at a byte */
    journal_log(prio, "%s", msg);
    snprintf(w->error, sizeof(w->error), "%s", msg);
    free(msg);
}

int owned_refuse_while_stuck(const struct owned *w)
{
    if (w->job != NULL || !owned_still_stuck(w))
        return 0;
    journal_log(LOG_WARNING,
                "%s: left alone: a job of ours that was killed (pid %d) has not "
                "ended (stuck in the kernel: a hung mount?)",
                w->o->smb_conf, (int)w->stuck_pid);
    return -EBUSY;
}

void owned_pending_clear(struct state *st)
{
    st->pending = false;
    st->pending_commit = false;
    st->pending_restart = STATE_RESTART_UNKNOWN;
    st->pending_unrestarted = false;
    smbconf_edit_free(&st->pending_edit);
}

int owned_save(const struct tuner_opts *o, const struct state *st)
{
    struct err e;

    if (state_save(o->state_dir, st, &e) < 0) {
        journal_log(LOG_ERR, "%s", e.msg);
        return -1;
    }
    return 0;
}

/* Take the hold; keep_record: the pending edit's record stays (its
 * outcome is not known yet), for the take-back of the next start or of
 * the first cycle after `--resume`. */
static void hold(struct owned *w, const char *why, bool keep_record)
{
    const char *f[] = {NULL, NULL};
    char conf[4200];

    snprintf(conf, sizeof(conf), "SMBTUNED_SMB_CONF=%s", w->o->smb_conf);
    f[0] = conf;
    journal_event(JOURNAL_ID_HOLD, LOG_WARNING, f, "%s", why);
    journal_log(LOG_WARNING, "hands off smb.conf until `smbtuned --resume`");
    w->st->hold = true;
    state_set_str(&w->st->hold_reason, why);
    if (!keep_record)
        owned_pending_clear(w->st);
    w->hold_on_disk = owned_save(w->o, w->st) == 0;
}

void owned_hold(struct owned *w, const char *why)
{
    hold(w, why, false);
}

void owned_hold_read(struct owned *w)
{
    w->hold_on_disk = w->st->hold;
}

/* A hold that never reached the file (its save failed) is not ended by a
 * file without one: only a hold the file held can have been resumed. */
bool owned_resumed(struct owned *w)
{
    struct state disk = {0};
    struct err e;
    bool resumed;

    if (!w->st->hold || !w->hold_on_disk)
        return false;
    if (state_load(w->o->state_dir, &disk, &e) < 0) {
        journal_log(LOG_ERR, "%s", e.msg);
        return false;
    }
    resumed = !disk.hold;
    state_free(&disk);
    if (!resumed)
        return false;
    /* what cmd_resume writes */
    state_end_hold(w->st);
    w->hold_on_disk = false;
    return true;
}

/* How smbd is told of a trial or a take-back: at once, whatever the
 * configured way, since the next measurement depends on it. */
enum apply_method owned_trial_apply(const struct tuner_opts *o)
{
    return o->apply == APPLY_NONE ? APPLY_SMBCONTROL : o->apply;
}

/* A job may have recorded its edit in the state file (it does so before
 * it writes smb.conf, and may have been killed after): the record on disk
 * is the truth now. Only the record: what else the tuner holds in memory
 * and has not saved yet (a fingerprint, the incumbent) is newer than the
 * copy the job was forked with, which is all the job could have saved. */
void owned_reload(struct owned *w)
{
    struct state disk = {0};
    struct smbconf_edit ed;
    struct err e;

    if (state_load(w->o->state_dir, &disk, &e) < 0) {
        journal_log(LOG_ERR, "%s", e.msg);
        /* The job's record is on disk, unread: ours must not replace it
         * (the next cycle reads it and settles the step). */
        w->st->unread = true;
        return;
    }
    ed = w->st->pending_edit;
    w->st->pending = disk.pending;
    w->st->pending_commit = disk.pending_commit;
    w->st->pending_restart = disk.pending_restart;
    w->st->pending_unrestarted = disk.pending_unrestarted;
    w->st->pending_edit = disk.pending_edit;
    disk.pending_edit = ed;
    if (disk.hold && !w->st->hold) {
        /* the file could not be read (kept aside as damaged): hold */
        w->st->hold = true;
        state_set_str(&w->st->hold_reason, disk.hold_reason);
        w->hold_on_disk = true;
    }
    state_free(&disk);
}

/* ---- put ---- */

/* Whether the time window is shut now (--once ignores it). */
bool owned_outside_window(const struct tuner_opts *o)
{
    return !o->once && window_opens_in(o->window_start, o->window_end, time(NULL)) > 0;
}

/* -ETIME: a commit that restarts smbd met the window shut; what: how far
 * it got. */
static int window_shut(const struct owned *w, struct err *e, const char *what)
{
    char win[24];

    window_str(w->o->window_start, w->o->window_end, win, sizeof(win));
    return err_set(e, -ETIME,
                   "%s: the time window %s closed before smbd could be restarted "
                   "(restart_smbd = yes)",
                   what, win);
}

/* -ETXTBSY: a commit that restarts smbd found files open on it, or could
 * not tell: a restart cuts every one of them off (a client's unsaved
 * work, a backup's write), which no buffer size is worth. Asked right
 * before the write (or, for a killed run's commit, before its restart),
 * as the window is; only the count is said. what: how far it got. */
int owned_files_open(const struct tuner_opts *o, struct err *e)
{
    struct err se = {{0}};
    long n = 0;

    if (smbstatus_open_files(o->smb_conf, &n, &se) < 0)
        return err_set(e, -ETXTBSY,
                       "smbd would be restarted (restart_smbd = yes), which cuts off every file "
                       "open on it, and whether any is open is not known: %s",
                       se.msg);
    if (n > 0)
        return err_set(e, -ETXTBSY,
                       "smbd would be restarted (restart_smbd = yes), which would cut off the %ld "
                       "file%s open on it (smbstatus -L lists them)",
                       n, n == 1 ? "" : "s");
    return 0;
}

/* e's message after what: how far a commit got. */
static int prefixed(struct err *e, const char *what)
{
    struct err m = *e;

    return err_set(e, -ETXTBSY, "%s: %s", what, m.msg);
}

/* Record an edit in the state file before it reaches the disk (between
 * smbconf_prepare and smbconf_write): a trial, which a restart takes back,
 * or a commit, which it keeps. Runs in the job. */
static int record(struct owned *w, const struct smbconf_edit *ed)
{
    struct state *st = w->st;
    struct smbconf_edit next;
    struct err e;
    int r;

    if (st->pending && !st->pending_commit)
        /* a later value (trial or commit) replaces a trial: one record
         * undoes both, from either step (smbconf_edit_chain) */
        r = smbconf_edit_chain(&st->pending_edit, ed, &next);
    else
        r = smbconf_edit_copy(ed, &next);
    if (r < 0)
        return r;
    smbconf_edit_free(&st->pending_edit);
    st->pending_edit = next;
    st->pending = true;
    st->pending_commit = w->kind == OWNED_COMMIT;
    /* the search's decision (outcome.c), for a start that finds the
     * commit in force after a kill (back_plan) */
    st->pending_restart = !st->pending_commit ? STATE_RESTART_UNKNOWN
                          : w->restart        ? STATE_RESTART_YES
                                              : STATE_RESTART_NO;
    st->pending_unrestarted = false;
    r = state_save(w->o->state_dir, st, &e);
    if (r < 0)
        journal_log(LOG_ERR, "%s", e.msg);
    return r;
}

static int put_job(void *arg, int out_fd)
{
    struct owned *w = arg;
    /* Over a trial of ours (recorded: the write is chained to it), no
     * backup: backup/ keeps the bytes before the first trial. */
    struct smbconf_change ch = {.expect = w->expect,
                                .rcvbuf = w->c.rcvbuf,
                                .sndbuf = w->c.sndbuf,
                                .over_trial = w->st->pending && !w->st->pending_commit};
    struct smbconf_result res;
    struct smbconf_plan pl;
    struct reply *rep;
    struct err e = {{0}}, ae = {{0}};
    size_t vlen;
    int r;

    r = smbconf_prepare(w->o->smb_conf, w->o->state_dir, &ch, &pl, &res, &e);
    /* The window may have closed while prepare's testparm ran (up to a
     * minute) since the search checked it (tuner_search.c,
     * restart_too_late): a commit that restarts smbd is then not written,
     * as it would not be then. */
    if (r == 0 && w->restart && owned_outside_window(w->o))
        r = window_shut(w, &e, "not written");
    if (r == 0 && w->restart)
        r = owned_files_open(w->o, &e) < 0 ? prefixed(&e, "not written") : 0;
    if (r == 0 && res.changed && (r = record(w, &res.edit)) < 0)
        err_set(&e, r, "not written: recording the change failed: %s", strerror(-r));
    if (r == 0)
        r = smbconf_write(&pl, &res, &e);
    smbconf_plan_free(&pl);
    vlen = r == 0 && res.new_value ? strlen(res.new_value) : 0;
    rep = calloc(1, sizeof(*rep) + vlen + 1);
    if (rep == NULL)
        return -ENOMEM;
    rep->r = r;
    memcpy(rep->msg, e.msg, sizeof(rep->msg));
    if (r == 0) {
        rep->line = res.line;
        snprintf(rep->file, sizeof(rep->file), "%s", res.file ? res.file : "");
        memcpy(rep + 1, res.new_value, vlen);
        if (w->kind == OWNED_TRIAL) {
            rep->apply_r = apply_run(owned_trial_apply(w->o), w->o->smb_conf, w->o->smbd_unit, &ae);
        } else if (w->restart) {
            /* The check after the write (testparm, up to a minute) and
             * owned_smbd_restart's own may run past the window's end: no
             * restart then. The record stays (with pending_restart yes),
             * and the cycle's end takes the commit back (BACK_LATE), or
             * the next start if we are killed first. */
            r = owned_smbd_restart(w, rep);
            if (r == -ETIME) {
                rep->r = window_shut(w, &e, "written, to be taken back");
                memcpy(rep->msg, e.msg, sizeof(rep->msg));
            } else if (r == -ETXTBSY) {
                /* files opened since the check before the write (up to a
                 * minute: testparm after it): taken back at once, as a
                 * killed run's commit is (confirm()). Left to the cycle's
                 * end, a restart then would only meet the same question,
                 * and a commit kept then would read as nothing changed. */
                owned_files_back(w, rep);
            }
        } else {
            rep->apply_r = apply_run(w->o->apply, w->o->smb_conf, w->o->smbd_unit, &ae);
            memcpy(rep->apply_msg, ae.msg, sizeof(rep->apply_msg));
        }
    }
    smbconf_result_free(&res);
    r = files_write_all(out_fd, rep, sizeof(*rep) + vlen + 1);
    free(rep);
    return r;
}

/* An editing job killed that did not die (stuck in the kernel: smb.conf
 * or an include on a hung mount): it may still finish the write or rename
 * it is in, so nothing more is written until an admin has looked. The
 * record of the edit (if it made one) stays, for the take-back of the
 * next start or of the first cycle after `--resume`. */
void owned_stuck(struct owned *w, pid_t pid, const char *doing)
{
    char why[256];

    snprintf(why, sizeof(why),
             "%s: the job was killed and has not ended (stuck in the kernel: smb.conf or an "
             "include on a hung mount?); it may still change the file",
             doing);
    w->stuck_pid = pid;
    hold(w, why, true);
}

/* Whether a job of ours that was killed may still be running. */
bool owned_still_stuck(const struct owned *w)
{
    return w->stuck_pid > 0 && job_is_stuck(w->stuck_pid);
}

static void put_done(struct job *j, const struct job_result *jr, void *ud)
{
    struct owned *w = ud;
    const struct reply *rep = (const void *)jr->data;
    struct owned_put_result res = {0};
    int r;

    w->job = NULL;
    owned_reload(w);
    if (jr->unreaped) {
        /* It may still finish the write or the rename it is stuck in:
         * what smb.conf will hold cannot be known from here. */
        w->live_sure = false;
        owned_stuck(w, job_pid(j), "writing smb.conf");
        res.msg = "the editing job did not end";
        w->put_done(w->ud, -ETIMEDOUT, &res);
        return;
    }
    if (!jr->ok || jr->len < sizeof(*rep) + 1 || jr->data[jr->len - 1] != '\0') {
        r = jr->timed_out ? -ETIMEDOUT : jr->error < 0 ? jr->error : -EIO;
        w->live_sure = false; /* what it did before it died is unknown */
        journal_log(LOG_ERR, "writing smb.conf: the editing job %s",
                    jr->timed_out ? "did not finish within its deadline" : "failed");
        res.msg = "the editing job failed";
        w->put_done(w->ud, r, &res);
        return;
    }
    if (rep->unrestarted || rep->files_open) {
        /* written, smbd not restarted (it failed, or files are open on
         * it), and taken back in the job (no trial of ours is sure to be
         * in force after that). A take-back that met an admin's line
         * holds (owned_settle): that, not the files, is what the cycle
         * comes to. */
        w->live_sure = false;
        r = owned_settle(w, rep);
        res.msg = r == -ECANCELED ? rep->msg : rep->restart_msg;
        w->put_done(w->ud,
                    rep->unrestarted  ? -EREMOTEIO
                    : r == -ECANCELED ? -ECANCELED
                                      : -ETXTBSY,
                    &res);
        return;
    }
    r = rep->r;
    res.msg = rep->msg;
    if (r == -ECANCELED) {
        /* Someone else's line is in force. With a trial of ours still on
         * record (the last one written), the hold waits for the cycle's
         * end to take it back (owned_settle() holds then): a trial line left
         * under an admin's line added below it would come back into
         * force the day theirs goes. Held at once, the record was
         * dropped and the trial stayed in the file. */
        if (!w->st->pending)
            owned_hold(w, rep->msg);
        w->put_done(w->ud, r, &res);
        return;
    }
    if (r < 0) {
        /* (a failed write put back what it replaced, as far as it could:
         * -ECANCELED above wrote nothing, so the trial stays sure) */
        w->live_sure = false;
        w->put_done(w->ud, r, &res);
        return;
    }
    res.new_value = (const char *)(rep + 1);
    res.file = rep->file[0] ? rep->file : NULL;
    res.line = rep->line;
    res.restarted = rep->restarted;
    if (w->kind == OWNED_TRIAL) {
        free(w->live_value);
        w->live_value = strdup(res.new_value);
        w->live_sure = w->live_value != NULL;
        if (rep->apply_r < 0) {
            journal_log(LOG_ERR, "live trial: %s", rep->apply_msg);
            r = -ESRCH;
        }
    } else {
        state_set_str(&w->st->last_written, res.new_value);
        w->st->written_at = (long)time(NULL); /* for --status: in force since */
        owned_pending_clear(w->st);
        free(w->live_value);
        w->live_value = NULL;
        w->live_sure = false;
        owned_save(w->o, w->st);
        /* (a restart that failed was taken back: rep->unrestarted) */
        if (rep->apply_r < 0)
            journal_log(LOG_WARNING, "written, but smbd was not told: %s", rep->apply_msg);
        if (rep->not_running)
            journal_log(rep->down_after ? LOG_WARNING : LOG_NOTICE,
                        "%s: it takes socket options = %s when it starts", rep->restart_msg,
                        res.new_value);
    }
    w->put_done(w->ud, r, &res);
}

int owned_put(struct owned *w, const char *expect, struct search_config c, enum owned_kind kind,
              bool restart, owned_put_fn done, void *ud)
{
    struct err e;
    int r;

    if (owned_refuse_while_stuck(w) < 0 || owned_busy(w))
        return -EBUSY;
    w->expect = expect ? expect : w->live_value;
    w->c = c;
    w->kind = kind;
    w->restart = restart;
    w->put_done = done;
    w->ud = ud;
    r = job_start(w->ev, put_job, w, OWNED_JOB_DEADLINE_S, put_done, w, &w->job, &e);
    if (r < 0)
        journal_log(LOG_ERR, "writing smb.conf: %s", e.msg);
    return r;
}
