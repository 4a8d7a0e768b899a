/* tuner: see tuner.h. Only the order of a cycle lives here and in
 * tuner_search.c: one state (tuner_int.h), the events that move it, and
 * what each step asks of its parts (world.h for facts, placement and
 * measurement; owned.h for our line; outcome.h and report.h for what a
 * search comes to and what is told). This part: the API, the schedule
 * and a cycle's end; tuner_begin.c: its start and checks. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "child.h"
#include "journal.h"
#include "smbconf.h"
#include "tuner_int.h"
#include "window.h"

void tuner_set_status(struct tuner *t, const char *fmt, ...)
{
    char was[sizeof(t->status)];
    va_list ap;

    int n;

    memcpy(was, t->status, sizeof(was));
    va_start(ap, fmt);
    n = vsnprintf(t->status, sizeof(t->status), fmt, ap);
    va_end(ap);
    /* Too long (a commit's reasons): cut at a word and say so, rather
     * than mid-word; the journal has the whole of it. */
    if (n >= (int)sizeof(t->status)) {
        char *sp = memrchr(t->status, ' ', sizeof(t->status) - 5);

        strcpy(sp != NULL ? sp : t->status + sizeof(t->status) - 5, " ...");
    }
    if (t->status_fn != NULL && strcmp(was, t->status) != 0)
        t->status_fn(t->status_ud, t->status);
}

void tuner_on_status(struct tuner *t, void (*fn)(void *ud, const char *status), void *ud)
{
    t->status_fn = fn;
    t->status_ud = ud;
}

const char *tuner_status(const struct tuner *t)
{
    return t->status;
}

int tuner_exit_code(const struct tuner *t)
{
    return t->failed ? 1 : 0;
}

void tuner_set_opts(struct tuner *t, const struct tuner_opts *o)
{
    char now[STATE_SETTINGS_LEN];
    bool changed;

    /* A reload that changes what the probe measures, or the sizes the
     * search may take: the winner's reference no longer holds. */
    tuner_settings_words(o, now, sizeof(now));
    changed = strcmp(t->settings, now) != 0;
    memcpy(t->settings, now, sizeof(now));
    t->o = *o;
    /* a reload searches again, open files or not (tuner_files.c) */
    t->files_wait = false;
    if (t->converged && changed) {
        journal_log(LOG_INFO, "the probe or search settings changed: the next cycle searches "
                              "again");
        tuner_unconverge(t);
    }
}

/* A restart that failed once (smbd's unit masked or missing, D-Bus
 * down, an smbd systemd does not run) would likely fail at every cycle,
 * each time after a search and two writes of smb.conf: until a reload,
 * restart_smbd counts as off, and the searches choose among explicit
 * sizes, which smbd takes without a restart. */
void tuner_restart_failed(struct tuner *t)
{
    const char *why = owned_restart_failure(t->line);

    if (why == NULL || !t->o.restart_smbd)
        return;
    t->o.restart_smbd = false;
    t->o.restart_off = true;
    /* (the reload's settings lack the mark: they differ, and the tuner
     * searches again, as a start does from a reference with it) */
    tuner_settings_words(&t->o, t->settings, sizeof(t->settings));
    journal_log(LOG_WARNING,
                "smbd could not be restarted (%s): until `systemctl reload smbtuned`, which "
                "searches again, smbtuned chooses among explicit sizes, as with restart_smbd = no",
                why);
}

bool tuner_busy(const struct tuner *t)
{
    return t->state != T_IDLE;
}

void tuner_save(struct tuner *t)
{
    owned_save(&t->o, &t->st);
}

/* A time as the status and the journal say it: the hour within a day of
 * now, the date too further off. */
void tuner_when_str(time_t at, time_t now, char *buf, size_t len)
{
    struct tm tm;

    localtime_r(&at, &tm);
    strftime(buf, len, labs((long)(at - now)) < 86400 ? "%H:%M" : "%Y-%m-%d %H:%M", &tm);
}

static int on_timer(sd_event_source *src, uint64_t usec, void *ud)
{
    struct tuner *t = ud;

    t->timer = sd_event_source_disable_unref(t->timer);
    tuner_cycle_begin(t);
    return 0;
}

/* Nothing of the cycle is left: wait for the next one. */
/* Between cycles `systemctl status` says when the next one is (next) and
 * what is in force, or why nothing is done. */
static void idle_status(struct tuner *t, time_t next)
{
    struct search_config c = {t->st.rcvbuf, t->st.sndbuf};
    char when[32], cs[96], last[sizeof(t->status)];
    /* restarts turned off by a failure (tuner_restart_failed) change what
     * the searches may choose until a reload: said where an admin looks,
     * before the words a long status may lose */
    const char *off = t->o.restart_off ? " (restarts of smbd off until a reload)" : "";

    tuner_when_str(next, time(NULL), when, sizeof(when));
    snprintf(last, sizeof(last), "%s", t->status);
    if (t->st.hold)
        tuner_set_status(t, "holding off: %s (checked again at %s)",
                         t->st.hold_reason ? t->st.hold_reason : "by request", when);
    else if (t->st.have_incumbent && !t->failed && strncmp(last, "deferred", 8) != 0 &&
             strncmp(last, "waiting", 7) != 0)
        /* the probe's rates, not smbd's clients' (`smbtuned --clients`) */
        tuner_set_status(t, "idle: next cycle at %s%s, %s, probe write %.1f read %.1f MB/s", when,
                         off, search_config_str(c, cs, sizeof(cs)), t->st.write_mbps,
                         t->st.read_mbps);
    else if (t->failed)
        /* what the state file's cycle_result says too: a failure must not
         * read like the progress of a search (the journal says why) */
        tuner_set_status(t, "idle: next cycle at %s%s; last cycle failed during: %s", when, off,
                         last);
    else
        tuner_set_status(t, "idle: next cycle at %s%s; last: %s", when, off, last);
}

/* One entry per cycle: how it ended, what is in force and its rates. */
static void cycle_told(const struct tuner *t, bool held)
{
    struct search_config c = {t->st.rcvbuf, t->st.sndbuf};
    char bytes[48];
    /* what the cycle's probes moved, write+read: the price of the cycle */
    snprintf(bytes, sizeof(bytes), "SMBTUNED_BYTES=%lld", t->tally.bytes);
    /* A hold is no failure (nothing failed: the admin's line is left
     * alone), and what is in force is then the admin's, not our record. */
    const char *result = held ? "held" : t->failed ? "failed" : "done";
    char res[32];
    snprintf(res, sizeof(res), "SMBTUNED_RESULT=%s", result);
    const char *more[] = {res, bytes, NULL};
    struct event_fields f = {.smb_conf = t->o.smb_conf,
                             .c = t->st.have_incumbent && !held ? &c : NULL,
                             .samples = t->tally.samples,
                             .write_mbps = t->st.write_mbps,
                             .read_mbps = t->st.read_mbps,
                             .more = more};

    report_event(JOURNAL_ID_CYCLE, LOG_INFO, &f, "cycle %s after %d samples: %s", result,
                 t->tally.samples, t->status);
}

/* --once --json: a cycle that ends without its report (a hold, a
 * failure; stop: a signal cut it short) still gives one object, saying
 * why: the hold's reason (held, NULL without a hold), the first failure
 * told, or (told only as a line) why the cycle's read or take-back of
 * smb.conf failed (owned_last_error: not read again here, in the loop's
 * process), both when both failed (a failure or a stop, then its
 * take-back), or what the cycle was doing. */
static void once_failed(struct tuner *t, const char *stop, const char *held)
{
    const char *why = report_first_error(), *owned = owned_last_error(t->line);
    char during[sizeof(t->status) + 32];
    char both[4096];

    if (!t->o.once || !t->o.json || t->tally.reported)
        return;
    if (held != NULL) {
        why = held;
    } else if (stop != NULL && owned[0] != '\0') {
        /* the stop's take-back failed: a trial may still be in smb.conf */
        snprintf(both, sizeof(both), "%s; then %s", stop, owned);
        why = both;
    } else if (stop != NULL) {
        why = stop;
    } else if (why[0] == '\0' && owned[0] != '\0') {
        why = owned;
    } else if (owned[0] != '\0' && strcmp(why, owned) != 0) {
        /* a failure, then a take-back that failed too (a trial may still
         * be in smb.conf): both */
        snprintf(both, sizeof(both), "%s; then %s", why, owned);
        why = both;
    } else if (why[0] == '\0') {
        snprintf(during, sizeof(during), "failed during: %s", t->status);
        why = during;
    }
    report_print_failure(stdout, &t->tally, held != NULL ? "held" : "failed", why,
                         t->o.mode == TUNER_ADVISE ? "advise" : "tune", child_now());
}

static const char *hold_why(const struct tuner *t)
{
    return t->st.hold_reason ? t->st.hold_reason : "by request";
}

/* The next cycle in wait_s seconds. A second's slack lets the kernel
 * batch wake-ups, a tenth of short waits (tests) keeps them short. On the
 * wall clock, as next_at and the window are: after a suspend, or a clock
 * set right by NTP after boot, the cycle comes when the state file and
 * the status say, not an interval of the monotonic clock later. */
static int arm(struct tuner *t, double wait_s)
{
    t->timer = sd_event_source_disable_unref(t->timer);
    if (sd_event_add_time_relative(t->ev, &t->timer, CLOCK_REALTIME, (uint64_t)(wait_s * 1e6),
                                   (uint64_t)fmin(1e6, wait_s * 1e5) + 1, on_timer, t) < 0) {
        /* no later cycle would ever start: let systemd restart us */
        journal_log(LOG_CRIT, "cannot arm the next cycle's timer: leaving");
        sd_event_exit(t->ev, 1);
        return -1;
    }
    return 0;
}

static void cycle_done(struct tuner *t)
{
    /* the cycle's hold, told as its result even if --resume ends it now */
    char *held = NULL;
    struct err e;
    double wait;

    /* --once leaves right after: no job may be left to finish it. */
    t->w.ops->measure_tidy(t->w.ctx, t->o.once);
    /* a hold taken in this cycle: its words, not the last cycle's */
    if (t->st.hold) {
        tuner_set_status(t, "holding off: %s", hold_why(t));
        held = strdup(hold_why(t));
    }
    /* The state file always tells how the last cycle left things, and
     * when (what `smbtuned --status` shows; next_at 0: --once, none),
     * and how many cycles ended, whatever their end (a verification, a
     * hold, a failure: not only the searches). */
    t->st.cycle_at = (long)time(NULL);
    t->st.cycles++;
    {
        /* a hold taken in the cycle (an edit by hand) says why; a failure
         * says what the cycle was doing (the journal says why) */
        const char *pre = t->st.hold ? "holding off: " : t->failed ? "failed during: " : "";
        char *res = NULL;

        if (asprintf(&res, "%s%s", pre, t->st.hold ? hold_why(t) : t->status) >= 0)
            state_set_str(&t->st.cycle_result, res);
        free(res);
    }
    /* An interval after this one, or at the window's start when this one
     * was deferred by it; and a time outside the window moves on to its
     * next start, where the cycle would be deferred to anyway (so that
     * the status and --status say when it really runs). */
    wait = t->window_deferred ? 0 : t->o.interval_s;
    wait += (double)window_opens_in(t->o.window_start, t->o.window_end,
                                    (time_t)t->st.cycle_at + (time_t)wait);
    /* not at once after a deferral, should the window have opened since
     * (at its start's second): a loop of deferrals could not be told from
     * a busy one */
    if (t->window_deferred && wait < 1)
        wait = 1;
    t->st.next_at = t->o.once ? 0 : t->st.cycle_at + (long)wait;
    /* The admin may have run --resume since the hold was saved (or read
     * at the cycle's start): saving ours would take the hold again. The
     * lock keeps a --resume from coming between the look and the save (it
     * holds it for a load and a save). */
    if (t->o.dry_run) {
        /* a look, not a cycle of the daemon's (tuner_opts.h) */
    } else if (state_lock(t->o.state_dir, &e) < 0) {
        /* not saved: a second wait in the save would only stall the loop
         * longer; the next cycle's end saves */
        journal_log(LOG_ERR, "%s", e.msg);
    } else {
        if (owned_resumed(t->line)) {
            tuner_resumed_told(t,
                               "during the cycle; the next cycle searches from the line in force");
            tuner_unconverge(t);
            tuner_set_status(t, "hold ended by --resume (it held off: %s)", held ? held : "?");
        }
        tuner_save(t);
        state_unlock();
    }
    t->state = T_IDLE;
    cycle_told(t, held != NULL);
    if (t->o.once) {
        if (t->failed || held != NULL)
            once_failed(t, NULL, held);
        free(held);
        sd_event_exit(t->ev, t->failed ? 1 : 0);
        return;
    }
    free(held);
    idle_status(t, (time_t)t->st.next_at);
    arm(t, wait);
}

static void on_ended(void *ud, int r)
{
    tuner_restart_failed(ud);
    cycle_done(ud);
}

/* The end of every cycle: nothing it put up (shadow, live trial, probe
 * file) outlives it (a shadow's stop may finish after: place.c). */
void tuner_cycle_end(struct tuner *t, bool ok)
{
    if (!ok)
        t->failed = true;
    t->timer = sd_event_source_disable_unref(t->timer);
    t->w.ops->measure_kill(t->w.ctx);
    t->w.ops->place_down(t->w.ctx);
    /* (not after a settling step that just failed: it would only run
     * again at once) */
    if (t->st.pending && !t->st.hold && !owned_busy(t->line) && t->state != T_SETTLING) {
        t->state = T_ENDING;
        /* a commit whose job died after its write stays, confirmed */
        if (owned_take_back(t->line, true, on_ended, t) == 0)
            return;
    }
    cycle_done(t);
}

/* The latest next cycle a cycle ending now would schedule (cycle_done):
 * an interval away, or the window's first start after that. */
static double furthest_wait(const struct tuner *t, time_t now)
{
    return t->o.interval_s + (double)window_opens_in(t->o.window_start, t->o.window_end,
                                                     now + (time_t)t->o.interval_s);
}

bool tuner_keep_schedule(struct tuner *t)
{
    time_t now = time(NULL), next = (time_t)t->st.next_at;
    char last[32], when[32];

    /* A pending edit (settled by tuner_recover, or not: a cycle retries
     * it) means a cycle was cut: it starts again now. A hold: the cycle
     * costs nothing (no probe) and says so at once. No next_at (never
     * ran, --once), one passed (it was due while we were down), or one
     * later than a cycle ending now would schedule (the clock went back,
     * interval or window was changed): now. */
    if (t->recovered || t->st.pending || t->st.hold || t->st.cycle_at <= 0 || next <= now ||
        (double)(next - now) > furthest_wait(t, now))
        return false;
    if (arm(t, (double)(next - now)) < 0)
        return false;
    tuner_when_str((time_t)t->st.cycle_at, now, last, sizeof(last));
    tuner_when_str(next, now, when, sizeof(when));
    journal_log(LOG_INFO,
                "last cycle at %s; next cycle at %s as scheduled (systemctl reload smbtuned "
                "starts one now)",
                last, when);
    tuner_set_status(t, "idle: next cycle at %s as scheduled; last cycle at %s: %s", when, last,
                     t->st.cycle_result ? t->st.cycle_result : "?");
    return true;
}

void tuner_kick(struct tuner *t)
{
    if (t->state != T_IDLE)
        return;
    t->timer = sd_event_source_disable_unref(t->timer);
    tuner_cycle_begin(t);
}

int tuner_recover(struct tuner *t, struct err *e)
{
    struct err swept = {{0}};
    int rs, r;

    /* A sweep that fails (a shadow base directory refused) fails the
     * start, but only after the live trial a killed run left in smb.conf
     * is taken back: that must not wait for the admin's fix. */
    rs = t->w.ops->sweep(t->w.ctx, &swept);
    r = state_load(t->o.state_dir, &t->st, e);
    if (r >= 0 && t->st.pending) {
        t->recovered = true;
        journal_log(LOG_NOTICE, "a run that did not finish left a %s of %s pending%s: settling it",
                    t->st.pending_commit || t->st.pending_unrestarted ? "change" : "live trial",
                    t->st.pending_edit.file,
                    t->st.pending_unrestarted ? " (its restart of smbd failed or was not made)"
                                              : "");
        /* Before the loop runs: nothing else waits yet. */
        owned_recover(t->line);
        tuner_restart_failed(t);
    }
    if (rs < 0) {
        *e = swept;
        return rs;
    }
    return r;
}

/* A cycle that a signal ended: --status shows it as the last cycle, with
 * what it was doing; the count and the schedule stay (it came to no
 * result). Saved as a cycle's end saves (cycle_done): under the lock, and
 * a --resume given meanwhile kept, not undone by our hold. A stop may wait
 * for the lock: the loop is ending. */
static void stop_recorded(struct tuner *t)
{
    struct err e;
    char *res = NULL;

    if (t->o.dry_run)
        return;
    t->st.cycle_at = (long)time(NULL);
    if (asprintf(&res, "stopped by a signal during: %s", t->status) >= 0)
        state_set_str(&t->st.cycle_result, res);
    free(res);
    if (state_lock(t->o.state_dir, &e) < 0) {
        journal_log(LOG_ERR, "%s", e.msg);
        return;
    }
    owned_resumed(t->line);
    tuner_save(t);
    state_unlock();
}

bool tuner_stop(struct tuner *t)
{
    bool cut = t->state != T_IDLE, left;

    t->w.ops->measure_kill(t->w.ctx);
    tuner_files_forget(t);
    /* First what real clients may feel: a live trial in smb.conf.
     * Stopping: blocking is all right, the loop is about to end. A
     * commit that reached the disk stays, as after a kill -9: the search
     * had decided it (unless it needs a restart outside the window:
     * owned_back.c, back_plan). */
    left = owned_take_back_now(t->line, true);
    t->w.ops->cancel(t->w.ctx);
    t->w.ops->place_down(t->w.ctx);
    t->w.ops->measure_tidy(t->w.ctx, true);
    t->timer = sd_event_source_disable_unref(t->timer);
    t->state = T_IDLE;
    if (cut) {
        tuner_end_stopped(t);
        stop_recorded(t);
        once_failed(t, "stopped by a signal before the cycle ended",
                    t->st.hold ? hold_why(t) : NULL);
    }
    return left;
}

int tuner_new_in(sd_event *ev, const struct tuner_opts *o, const struct world *w, struct tuner **tp,
                 struct err *e)
{
    struct tuner *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return err_set(e, -ENOMEM, "out of memory");
    t->ev = sd_event_ref(ev);
    t->o = *o;
    tuner_settings_words(&t->o, t->settings, sizeof(t->settings));
    if (w != NULL)
        t->w = *w;
    else if (world_real_new(ev, &t->o, &t->w) < 0)
        goto oom;
    if (owned_new(ev, &t->o, &t->st, &t->line) < 0)
        goto oom;
    tuner_set_status(t, "starting");
    *tp = t;
    return 0;
oom:
    if (t->w.ops)
        t->w.ops->free(t->w.ctx);
    sd_event_unref(t->ev);
    free(t);
    return err_set(e, -ENOMEM, "out of memory");
}

int tuner_new(sd_event *ev, const struct tuner_opts *o, struct tuner **tp, struct err *e)
{
    return tuner_new_in(ev, o, NULL, tp, e);
}

void tuner_free(struct tuner *t)
{
    if (t == NULL)
        return;
    tuner_stop(t);
    owned_free(t->line);
    t->w.ops->free(t->w.ctx);
    state_free(&t->st);
    verify_free(t->v);
    search_free(t->s);
    free(t->value0);
    outcome_free(&t->out);
    sd_event_unref(t->ev);
    free(t);
}
