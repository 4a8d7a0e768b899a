/* tuner_end: what a search comes to (see tuner_int.h and tuner_search.c):
 * the outcome recorded and told, its commit (a restart of smbd only inside
 * the window and over no open file), and a search stopped early. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "journal.h"
#include "sockopts.h"
#include "tuner_int.h"

/* Record what the search came to in the state (saved at the cycle's end,
 * with whatever the end takes back). */
static void search_record(struct tuner *t)
{
    struct outcome *out = &t->out;

    if (t->failed || out->kind == OUTCOME_STOPPED)
        return;
    t->converged = outcome_record(out, t->s, &t->tally, t->inc0, &t->st);
    /* whose rates they are, for --status: the probe found out, and
     * --status resolves nothing */
    t->st.rates_loopback = facts_trials_on_loopback(&t->o, t->probe_loopback);
    tuner_ref_keep(t);
}

void tuner_end_stopped(struct tuner *t)
{
    /* stopped while the line was read again (kept_read): the search had
     * come to its result, which stays (the read would only have found an
     * edit, which the next cycle finds) */
    if (t->reading_after)
        search_record(t);
    t->reading_after = false;
}

/* Record and tell what the search came to, then end the cycle. */
static void search_done(struct tuner *t)
{
    struct outcome *out = &t->out;
    bool committed = out->kind == OUTCOME_COMMIT && !t->failed;

    t->reading_after = false;
    search_record(t);
    tuner_set_status(t, "%s", out->what);
    if (t->o.once) {
        struct report_in in = {.before = t->value0,
                               .after = out->after,
                               .inc0 = t->inc0,
                               .rated = out->w,
                               .committed = committed,
                               .advise = t->o.mode == TUNER_ADVISE,
                               .what = out->what,
                               .now = child_now()};

        report_print(stdout, t->o.json, t->s, &t->tally, &in);
    }
    outcome_free(out);
    tuner_cycle_end(t, !t->failed);
}

/* The line read again after a search that writes nothing (kept_read). */
static void kept_checked(void *ud, int r, const char *value, const char *where)
{
    struct tuner *t = ud;
    char *why = NULL;

    if (r == 0 && !sockopts_same(value, t->value0)) {
        if (asprintf(&why,
                     "%s: socket options edited by hand during the cycle: it is '%s', not '%s' "
                     "as the cycle began",
                     where, value, t->value0) < 0)
            why = NULL;
        owned_hold(t->line, why ? why
                                : "socket options edited by hand during the cycle (out of memory "
                                  "for the details)");
        free(why);
        r = -EPERM;
    }
    /* (a read that failed said why; the result stands as measured) */
    if (r == -EPERM) {
        outcome_failed(&t->out, "socket options edited by hand during the cycle (see the hold)");
        t->failed = true;
    }
    search_done(t);
}

/* A search that writes nothing, converged or stopped early, reports the
 * line it began with as the one in force ("kept ..."). An edit by hand
 * made during the cycle would make that false, and only a write (its
 * compare-and-set: on_committed) or the next cycle would find it. So the
 * line is read again, in a job (owned_read: a hung mount must not stop
 * the loop), and an edit holds off now, as a commit that meets one does,
 * told in the cycle's result. Not over a record of ours (a live trial, a
 * commit written: the take-back or check at the cycle's end compares),
 * and not in advise mode, which never writes and never holds. */
static void kept_read(struct tuner *t)
{
    if (t->o.mode == TUNER_ADVISE || t->st.pending || t->st.hold ||
        owned_live_value(t->line) != NULL) {
        search_done(t);
        return;
    }
    t->reading_after = true;
    t->state = T_READING;
    tuner_set_status(t, "reading the socket options line again: %s", t->out.what);
    if (owned_read(t->line, kept_checked, t) < 0)
        search_done(t); /* owned_read said why */
}

/* The search ends before it converged, keeping the line it started from
 * (a live trial goes back at the cycle's end); why: in the status. */
void tuner_stop_early(struct tuner *t, const char *why)
{
    if (outcome_stopped(&t->out, t->value0, t->inc0, why) < 0) {
        outcome_free(&t->out);
        tuner_cycle_end(t, false);
        return;
    }
    kept_read(t);
}

/* Whether the time window is open (always with --once, or without one). */
static bool window_open(const struct tuner *t)
{
    return t->o.once || tuner_window_wait(t) == 0;
}

/* The window has closed before what `before` says: the search stops
 * there, keeping the line it started from (why: in the status). The next
 * cycle searches again, from the start; a search that never fits the
 * window says so every night (a warning), as the window or max_samples
 * must then change. */
static void window_stop(struct tuner *t, const char *before, const char *why)
{
    char win[48];

    tuner_window_str(t, win, sizeof(win));
    journal_log(LOG_WARNING,
                "the time window %s closed before %s: keeping %s; the next cycle searches again "
                "(a search that never fits needs a wider window or a smaller max_samples)",
                win, before, t->value0);
    tuner_stop_early(t, why);
}

/* Has the time window closed before another sample? Then the search stops
 * there: the window is the admin's promise to their users (cycles only at
 * night), and a search, up to a few hundred samples, could run into the
 * morning. Checked only before a sample: a search that has converged
 * ends as it would have (but see restart_too_late). */
bool tuner_window_closed(struct tuner *t)
{
    char before[96];

    if (window_open(t))
        return false;
    snprintf(before, sizeof(before), "the search converged (%d samples)", search_samples(t->s));
    window_stop(t, before, "time window closed");
    return true;
}

/* A restart moves every client off smbd: never outside the time window.
 * A search whose last sample ended after the window closed keeps the
 * line it started from when its commit needs smbd restarted, as a search
 * still sampling would; so does one whose edit met the window shut
 * (owned.h: -ETIME; a line written is taken back at the cycle's end). A
 * commit that only tells smbd goes on: it moves no client off, and it is
 * the cycle's last act. */
static void restart_stop(struct tuner *t, struct outcome *out)
{
    char *before;

    if (asprintf(&before, "smbd could be restarted for socket options = %s (restart_smbd = yes)",
                 out->after) < 0)
        before = NULL;
    outcome_free(out);
    window_stop(t, before ? before : "smbd could be restarted (restart_smbd = yes)",
                "time window closed before smbd's restart");
    free(before);
}

static bool restart_too_late(struct tuner *t, struct outcome *out)
{
    if (window_open(t))
        return false;
    restart_stop(t, out);
    return true;
}

/* The commit needed smbd restarted, the restart failed, and the job took
 * the line back (owned_restart.c: unrestarted; owned_settle told how that
 * went). The
 * cycle fails, keeping what it started from (a hold, when the take-back
 * found an admin's line, says so itself). */
static void unrestarted(struct tuner *t)
{
    struct outcome *out = &t->out;

    tuner_restart_failed(t);
    snprintf(out->what, sizeof(out->what), "smbd could not be restarted for socket options = %s",
             out->after);
    out->kind = OUTCOME_KEEP;
    t->failed = true;
    search_done(t);
}

static void on_committed(void *ud, int r, const struct owned_put_result *res)
{
    struct tuner *t = ud;

    if (r == -EREMOTEIO) {
        unrestarted(t);
        return;
    }
    if (r == -ETIME) {
        /* the edit met the window shut (owned.h): whether it wrote */
        journal_log(LOG_NOTICE, "commit: %s", res->msg);
        restart_stop(t, &t->out);
        return;
    }
    if (r == -ETXTBSY) {
        /* files open on smbd (owned.h): nothing written, or taken back at
         * once (opened after the write). The line stays,
         * and the next cycles ask smbstatus before they search again
         * (tuner_files.c): a busy server may have files open all day. */
        journal_log(LOG_WARNING,
                    "commit of socket options = %s: %s; keeping %s, and the next cycles wait "
                    "until no file is open before searching again",
                    t->out.after, res->msg, t->value0);
        outcome_free(&t->out);
        t->files_wait = true;
        t->files_from = t->inc0;
        tuner_stop_early(t, "files open on smbd, which its restart would cut off");
        return;
    }
    if (r < 0) {
        if (r != -ECANCELED)
            report_error("commit", t->o.smb_conf, "commit: %s", res->msg);
        outcome_failed(&t->out, res->msg);
        t->failed = true;
    } else {
        double wr, rr;

        /* The commit carries the search's rates and samples too: the one
         * entry an admin looks for says what the new line is worth. */
        report_rates(t->s, &t->tally, t->out.w, &wr, &rr);
        /* From what the cycle began with: after live trials the file's old
         * value is the last trial's, often the winner itself. */
        report_event(JOURNAL_ID_COMMIT, LOG_NOTICE,
                     &(struct event_fields){.smb_conf = res->file ? res->file : t->o.smb_conf,
                                            .c = &t->out.w,
                                            .samples = search_samples(t->s),
                                            .write_mbps = wr,
                                            .read_mbps = rr},
                     "socket options: %s -> %s (%s:%d)", t->value0, res->new_value,
                     res->file ? res->file : t->o.smb_conf, res->line);
        if (res->restarted)
            report_event(JOURNAL_ID_RESTART, LOG_NOTICE,
                         &(struct event_fields){.smb_conf = t->o.smb_conf, .c = &t->out.w},
                         "smbd restarted so that autotuning reaches new connections "
                         "(restart_smbd = yes): its listener had the old explicit sizes");
        outcome_written(&t->out, res->new_value);
        /* what real clients had before it: later cycles compare the
         * connections opened since with these */
        t->have_before = t->real.valid;
        t->real_before = t->real;
    }
    search_done(t);
}

void tuner_finish_search(struct tuner *t)
{
    struct outcome *out = &t->out;
    const char *expect;

    t->w.ops->place_down(t->w.ctx);
    if (outcome_decide(out, t->s, &t->tally, &t->facts, &t->o, t->value0, t->inc0, t->auto_blocked,
                       &t->real, t->probe_loopback) < 0) {
        outcome_free(out);
        tuner_cycle_end(t, false);
        return;
    }
    {
        double wr, rr;
        char cs[96], bytes[48];

        /* the search's winner, as measured: the outcome may end with
         * another (outcome.c: after loopback trials), which it tells */
        struct search_config won = search_incumbent(t->s);

        report_rates(t->s, &t->tally, won, &wr, &rr);
        /* the bytes the cycle's probes moved so far, write+read */
        snprintf(bytes, sizeof(bytes), "SMBTUNED_BYTES=%lld", t->tally.bytes);
        report_event(JOURNAL_ID_SEARCH_END, LOG_INFO,
                     &(struct event_fields){.smb_conf = t->o.smb_conf,
                                            .c = &won,
                                            .samples = search_samples(t->s),
                                            .write_mbps = wr,
                                            .read_mbps = rr,
                                            .more = (const char *const[]){bytes, NULL}},
                     "search finished after %d samples: %s, write %.1f read %.1f MB/s",
                     search_samples(t->s), search_config_str(won, cs, sizeof(cs)), wr, rr);
    }
    /* Kept or advised: a live trial goes back at the cycle's end. */
    if (out->kind != OUTCOME_COMMIT) {
        kept_read(t);
        return;
    }
    if (out->restart && restart_too_late(t, out))
        return;
    /* Over a live trial, compare with what the trial wrote. */
    expect = owned_live_value(t->line) ? NULL : t->value0;
    t->state = T_COMMITTING;
    if (owned_put(t->line, expect, out->w, OWNED_COMMIT, out->restart, on_committed, t) < 0) {
        outcome_failed(out, "cannot start the edit");
        t->failed = true;
        search_done(t);
    }
}
