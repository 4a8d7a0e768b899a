/* tuner_search: the samples of a search or of a verification, and the
 * order of a search (see tuner_int.h); tuner_end.c: what a search comes
 * to, its commit and what stops it early. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "journal.h"
#include "tuner_int.h"
#include "url.h"

/* Samples of AUTO taken after a search that could not offer it. */
#define AUTO_CHECKS 3

static void step(struct tuner *t);

static const char *trials_name(enum tuner_trials tr)
{
    return tr == TUNER_SHADOW ? "shadow smbd" : tr == TUNER_CLIENT ? "client socket" : "live";
}

/* ---- one sample ---- */

/* The search's decisions, one entry each, so that a reader of the journal
 * (or of --once's stderr, one line an entry) sees each on a line of its
 * own: "SO_RCVBUF 65536 -> 131072: write +12% ..." is a move, with the
 * sizes now in force as fields; "stays", "converged", "trial ended" are
 * plain entries. */
static void why_told(struct tuner *t)
{
    struct search_config now = search_incumbent(t->s);
    const char *w = search_why(t->s);

    for (int i = 0; *w; i++) {
        int n = (int)strcspn(w, "\n");

        if (search_why_move(t->s, i))
            report_event(JOURNAL_ID_MOVE, LOG_INFO,
                         &(struct event_fields){
                             .smb_conf = t->o.smb_conf, .c = &now, .samples = t->tally.samples},
                         "%.*s", n, w);
        else
            journal_log(LOG_INFO, "%.*s", n, w);
        w += n + (w[n] == '\n');
    }
}

/* One entry per sample ("tried ..." in a search, auto checks included;
 * "verified ..." of a winner): the sizes, their rates, the sample's
 * number. */
static void sample_told(struct tuner *t, const struct probe_result *r, const char *id,
                        const char *word, const char *cs)
{
    report_event(id, LOG_INFO,
                 &(struct event_fields){.smb_conf = t->o.smb_conf,
                                        .c = &t->probe_cfg,
                                        .samples = t->tally.samples,
                                        .write_mbps = r->write_mbps,
                                        .read_mbps = r->read_mbps,
                                        .measured = true},
                 "%s %s: write %.2f MB/s, read %.2f MB/s%s", word, cs, r->write_mbps, r->read_mbps,
                 r->outcome == PROBE_TIMEOUT ? " (deadline: lower bound)" : "");
}

/* What a verified sample was of, when not the line in force: the advice
 * (advise mode), or the trials' winner where the loopback rules kept or
 * advised another value (outcome_decide), which the search's rates rest
 * on. */
static const char *verified_words(const struct tuner *t)
{
    if (search_config_eq(t->probe_cfg, t->inc0))
        return "";
    if (tuner_advice_is(t, t->probe_cfg))
        return " (the advice; smb.conf not changed)";
    return " (the search's winner, not the line in force)";
}

/* A client trial's probe that stayed on this machine: the url names it by
 * a name or address other than loopback (trials = auto would have made
 * them shadow trials otherwise). Said once a search, when first seen: the
 * outcome weighs them as loopback trials (facts_trials_on_loopback). */
static void note_loopback(struct tuner *t, const struct probe_result *r)
{
    if (!r->loopback || t->probe_loopback)
        return;
    t->probe_loopback = true;
    if (t->o.trials == TUNER_CLIENT)
        journal_log(LOG_NOTICE,
                    "client trials to %s run on this machine's loopback (the probe's connection "
                    "stayed on this machine): weighed as loopback trials, an explicit size only "
                    "where real connections ask for one",
                    t->o.probe.url);
}

static void tell(struct tuner *t, const struct probe_result *r)
{
    struct search_sample x;
    char cs[96];
    int res;

    note_loopback(t, r);
    measure_sample(r, &x);
    tally_add(&t->tally, t->probe_cfg, &x, r->write_bytes + r->read_bytes, t->kind == S_AUTO);
    search_config_str(t->probe_cfg, cs, sizeof(cs));
    if (t->o.progress)
        report_progress(stderr, t->tally.samples, cs, r->write_mbps, r->read_mbps,
                        r->outcome == PROBE_TIMEOUT);
    if (t->fp_change[0] != '\0')
        report_fingerprint_change(t->fp_change, &t->st, r->write_mbps, r->read_mbps,
                                  !t->fp_other_rates);
    t->fp_change[0] = '\0';
    switch (t->kind) {
    case S_VERIFY:
        res = verify_tell(t->v, &x);
        if (verify_why(t->v)[0])
            journal_log(LOG_INFO, "%s", verify_why(t->v));
        if (res == VERIFY_RESEARCH) {
            report_event(JOURNAL_ID_DRIFT, LOG_NOTICE,
                         &(struct event_fields){.smb_conf = t->o.smb_conf, .c = &t->probe_cfg},
                         "the rates at %s drifted: searching again", cs);
            tuner_unconverge(t);
        } else {
            /* One line per cycle, so that the journal shows the winner
             * being watched, not only when it fails; and the cycle's end
             * says this, not the idle words of the cycle before. */
            sample_told(t, r, JOURNAL_ID_VERIFY, "verified", cs);
            tuner_set_status(t, "verified %s%s: write %.1f read %.1f MB/s, no drift", cs,
                             verified_words(t), r->write_mbps, r->read_mbps);
            /* the reference as this sample left it: a restart goes on
             * from there, not from the search's few samples */
            {
                struct search_reference ref;

                if (verify_reference(t->v, &ref) == 0)
                    tuner_ref_store(t, &ref, t->v);
            }
        }
        break;
    case S_AUTO: {
        double iw, ir, ratio = t->o.search.abort_ratio;

        sample_told(t, r, JOURNAL_ID_TRIAL, "tried", cs);
        t->auto_checks++;
        /* Like a trial of the search, the check ends at a sample far below
         * the sizes chosen (abort_ratio): the report needs no more to say
         * that autotuning is far behind, and each further sample would
         * run a poor configuration for nothing. */
        report_rates(t->s, &t->tally, search_incumbent(t->s), &iw, &ir);
        if (t->auto_checks < AUTO_CHECKS &&
            (x.write < ratio * iw || (x.read >= 0 && x.read < ratio * ir))) {
            journal_log(LOG_INFO,
                        "autotuning's check ended after %d sample%s: far below the sizes chosen",
                        t->auto_checks, t->auto_checks == 1 ? "" : "s");
            t->auto_checks = AUTO_CHECKS;
        }
        break;
    }
    case S_SEARCH:
        sample_told(t, r, JOURNAL_ID_TRIAL, "tried", cs);
        res = search_tell(t->s, t->probe_cfg, &x);
        why_told(t);
        if (res == SEARCH_ABORTED)
            journal_log(LOG_INFO, "trial of %s ended early: far below the incumbent", cs);
        {
            double iw, ir;
            char rd[32] = "not measured";

            /* what `systemctl status` shows while the search runs; a read
             * not reached (the write ran out of time) is not a rate. Where
             * the trial is: a live one is in production's smb.conf, and an
             * admin looking at `systemctl status` must see that first. */
            if (x.read >= 0)
                snprintf(rd, sizeof(rd), "%.1f", x.read);
            report_rates(t->s, &t->tally, search_incumbent(t->s), &iw, &ir);
            tuner_set_status(t,
                             "searching: sample %d, %s %s write %.1f read %s MB/s vs "
                             "%.1f %.1f",
                             t->tally.samples,
                             t->o.trials == TUNER_LIVE     ? "live trial in smb.conf:"
                             : t->o.trials == TUNER_SHADOW ? "shadow trial"
                                                           : "client trial",
                             cs, x.write, rd, iw, ir);
        }
        break;
    }
}

/* A probe that measured nothing ends the cycle (its trial goes back). The
 * line names what was probed: a shadow smbd's failure is not production's.
 * refused: it failed before any transfer (not a deadline), when the
 * shadow's log may say that it refused the connection. */
static void probe_failed(struct tuner *t, bool refused, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void probe_failed(struct tuner *t, bool refused, const char *fmt, ...)
{
    const char *what = t->o.own_share ? "smbtuned's own share" : t->probe_url;
    char why[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    /* The own share's name is what keeps others off it while a shadow
     * serves it: not for the journal (what). The shadow's own word for a
     * refusal the probe sees only as a connection that closed ("Invalid
     * argument") or a share that refuses it: smb.conf's hosts lists,
     * which a shadow keeps (lib/trial_render.c says why), refuse
     * 127.0.0.1. Asked before the cycle's end stops the shadow. */
    if (refused && t->o.trials == TUNER_SHADOW && t->w.ops->place_denied(t->w.ctx))
        report_error("probe", t->o.smb_conf,
                     "probe of %s failed: %s (a trial's shadow smbd, which refused the "
                     "connection from 127.0.0.1: the hosts allow and hosts deny of %s%s, which "
                     "the shadows keep, refuse it; %s)",
                     what, why, t->o.smb_conf,
                     t->o.own_share ? " ([global])" : " ([global], or the share's own)",
                     t->o.own_share ? "admit 127.0.0.1 in hosts allow, or give probe { url }"
                                    : "admit 127.0.0.1 in the hosts allow that refuses it");
    else
        report_error("probe", t->o.smb_conf, "probe of %s failed: %s%s", what, why,
                     t->o.trials == TUNER_SHADOW ? " (a trial's shadow smbd)" : "");
    tuner_cycle_end(t, false);
}

static void on_measured(void *ud, int ret, const struct probe_result *r, const char *why)
{
    struct tuner *t = ud;

    if (ret < 0 || (r->outcome != PROBE_OK && r->outcome != PROBE_TIMEOUT)) {
        probe_failed(t, ret >= 0 && r->write_bytes == 0, "%s", why);
        return;
    }
    /* The whole deadline passed before the transfer began: the server took
     * the connection and never answered (a hung smbd). That is no rate of
     * this candidate, and each later sample would wait out its deadline in
     * silence with a trial in force: the cycle ends, the trial goes back.
     * Under a deadline cut short for a poor trial, a slow log-on may be
     * all it was: that stays a lower bound, as before. */
    if (r->outcome == PROBE_TIMEOUT && r->write_s == 0 && r->write_bytes == 0 && !t->probe_cut) {
        probe_failed(t, false, "no answer within its deadline of %.0f s (%s)",
                     t->o.probe.deadline_s, r->cause);
        return;
    }
    /* Live trials write this machine's smb.conf and tell its smbd; a probe
     * whose connection left this machine measured another server, whose
     * rates no trial moves, while every local client would get each trial
     * value. The start can only warn (config_live_far: a name is not
     * resolved there); the probe's socket is the proof. Its first sample
     * is the line in force, so no trial is written before this; any other
     * sample's trial goes back at the cycle's end. A socket not found
     * (client_rcvbuf -1: a server that cut the connection the probe
     * looked at, which libsmbclient then made again) proves nothing, and
     * counts as leaving unless the url is loopback as written: a peer
     * must not be able to keep live trials going that way. */
    if (t->o.trials == TUNER_LIVE && !r->loopback &&
        (r->client_rcvbuf >= 0 || !url_text_is_loopback(t->o.probe.url))) {
        report_error("live-trial", t->o.smb_conf,
                     "live trials refused: the probe's connection to %s %s, so its rates may be "
                     "another server's and no trial in %s would move them; name this machine's "
                     "own share (127.0.0.1, ::1, localhost or one of its addresses), or use "
                     "trials = client for a peer",
                     t->o.probe.url,
                     r->client_rcvbuf >= 0 ? "left this machine"
                                           : "could not be looked at, and the url names no "
                                             "loopback address",
                     t->o.smb_conf);
        tuner_cycle_end(t, false);
        return;
    }
    tell(t, r);
    if (t->kind != S_VERIFY)
        step(t);
    else if (!t->converged)
        tuner_cycle_search(t);
    else
        tuner_cycle_end(t, true);
}

/* The candidate is in place: measure it. */
static void on_placed(void *ud, int r, const char *url, const char *client)
{
    struct tuner *t = ud;
    struct probe_params p = t->o.probe;
    double wmin = 0, rmin = 0;

    if (r < 0) {
        tuner_cycle_end(t, false);
        return;
    }
    p.url = url;
    /* one place, whichever port of it a trial probes (probe_made.h) */
    p.place = t->o.own_share ? PROBE_PLACE_OWN_SHARE : t->o.probe.url;
    p.seq = ++t->seq;
    if (client != NULL)
        p.socket_options = client;
    if (t->kind == S_SEARCH)
        search_abort_rates(t->s, t->probe_cfg, &wmin, &rmin);
    t->probe_cut = measure_cut_deadline(&p, wmin, rmin);
    snprintf(t->probe_url, sizeof(t->probe_url), "%s", url);
    t->state = T_PROBING;
    if (t->w.ops->measure(t->w.ctx, &p, on_measured, t) < 0)
        tuner_cycle_end(t, false);
}

static void on_live_placed(void *ud, int r, const struct owned_put_result *res)
{
    struct tuner *t = ud;

    if (r < 0) {
        /* -ECANCELED: the line is not what our last trial wrote (an
         * admin's edit, which the cycle's take-back then holds for) */
        if (r == -ECANCELED)
            journal_log(LOG_WARNING, "live trial not written, the cycle ends: %s", res->msg);
        else if (r != -ESRCH)
            report_error("live-trial", t->o.smb_conf, "live trial: %s", res->msg);
        tuner_cycle_end(t, false);
        return;
    }
    on_placed(t, 0, t->o.probe.url, NULL);
}

/* Put c where the next probe measures it, then measure it. */
static void sample(struct tuner *t, enum sample_kind kind, struct search_config c)
{
    const char *live;
    int r;

    t->kind = kind;
    t->probe_cfg = c;
    t->state = T_PLACING;
    if (t->o.trials != TUNER_LIVE) {
        r = t->w.ops->place(t->w.ctx, t->value0, c, on_placed, t);
    } else {
        live = owned_live_value(t->line);
        if (live != NULL &&
            search_config_eq(facts_config_of_value(&t->facts, &t->o.search, live), c)) {
            on_placed(t, 0, t->o.probe.url, NULL);
            return;
        }
        r = owned_put(t->line, live ? live : t->value0, c, OWNED_TRIAL, false, on_live_placed, t);
    }
    if (r < 0)
        tuner_cycle_end(t, false);
}

/* The clients' traffic between a search's samples (busy_rate), as the
 * cycle's start watched it: a search runs for minutes, and clients may
 * start work meanwhile. No probe traffic runs then (a shadow's and a
 * peer's ports are not smbd's, and a live trial's probe is idle between
 * samples). More than busy_rate stops the search there, keeping the line
 * it started from (a live trial goes back at the cycle's end), as the
 * window's end does; so does a watch that fails: nothing then says the
 * clients are quiet. */
static void busy_unwatched(struct tuner *t, const char *why)
{
    /* why is NULL when the watch said it already, as when it cannot start */
    journal_log(LOG_WARNING,
                "%s%s%sthe search stops after %d samples, keeping %s: busy_rate asks for quiet "
                "clients, and nothing tells whether they are",
                why ? "cannot watch client traffic (" : "", why ? why : "", why ? "): " : "",
                search_samples(t->s), t->value0);
    tuner_stop_early(t, "client traffic cannot be watched");
}

static void on_busy_rechecked(void *ud, int r, double mbps, const char *why)
{
    struct tuner *t = ud;

    tuner_busy_watched_now(t);
    if (r < 0) {
        busy_unwatched(t, why);
    } else if (mbps > t->o.busy_mbps) {
        /* a warning, as the window's stop: a search that clients always
         * stop never ends, and the admin has to choose the hours */
        journal_log(LOG_WARNING,
                    "clients move %.1f MB/s (more than %.1f): the search stops after %d "
                    "samples, keeping %s; the next cycle searches again (where clients are "
                    "busy at every cycle, a window at quieter hours lets a search end)",
                    mbps, t->o.busy_mbps, search_samples(t->s), t->value0);
        tuner_stop_early(t, "clients busy");
    } else {
        sample(t, S_SEARCH, t->busy_next);
    }
}

/* Whether the clients are being watched before the next sample, this
 * one (then on_busy_rechecked takes it): once busy_recheck_s has passed
 * since the last watch. */
static bool busy_rechecking(struct tuner *t, struct search_config c)
{
    uint64_t now;

    if (!tuner_busy_watched(t) || sd_event_now(t->ev, CLOCK_MONOTONIC, &now) < 0 ||
        now < t->busy_at + (uint64_t)(t->o.busy_recheck_s * 1e6))
        return false;
    t->busy_next = c;
    if (tuner_busy_watch(t, on_busy_rechecked) < 0)
        busy_unwatched(t, NULL);
    return true;
}

static void step(struct tuner *t)
{
    struct search_config c;

    if (t->o.max_bytes > 0 && t->tally.bytes >= t->o.max_bytes) {
        journal_log(LOG_NOTICE,
                    "byte budget of %lld spent before the search converged: "
                    "keeping %s",
                    t->o.max_bytes, t->value0);
        tuner_stop_early(t, "budget spent");
        return;
    }
    if (t->kind == S_AUTO || search_ask(t->s, &c) == SEARCH_DONE) {
        if (!t->auto_blocked || t->auto_checks >= AUTO_CHECKS) {
            tuner_finish_search(t);
            return;
        }
        /* no busy watch: the search has converged, and a stop here
         * would throw its result away for a few checks of AUTO */
        if (!tuner_window_closed(t))
            sample(t, S_AUTO, (struct search_config){SEARCH_AUTO, SEARCH_AUTO});
        return;
    }
    if (!tuner_window_closed(t) && !busy_rechecking(t, c))
        sample(t, S_SEARCH, c);
}

/* Real connections held back by the server's own buffers, and more can
 * be given (why says which). */
static bool clients_ask_more(const struct tuner *t, char *why, size_t len)
{
    const struct facts *f = &t->facts;
    long cap[2] = {t->o.search.max_rcvbuf, t->o.search.max_sndbuf};

    for (int b = 0; b < 2 && f->caps_known; b++)
        if (f->kcap[b] < cap[b])
            cap[b] = f->kcap[b];
    return clients_watch_asks_more(&t->real, t->inc0.rcvbuf, t->inc0.sndbuf, cap,
                                   f->tcp_max_known ? f->tcp_max : NULL, why, len);
}

void tuner_cycle_search(struct tuner *t)
{
    struct search_params p;
    char cs[96];

    facts_search_bounds(&t->facts, &t->o, t->inc0, &p, &t->auto_blocked);
    t->auto_checks = 0;
    t->probe_loopback = false;
    /* a new search: the old one, the watch on its winner and kept advice go */
    if (t->st.advice != NULL)
        state_unconverge(&t->st);
    verify_free(t->v);
    t->v = NULL;
    search_free(t->s);
    if (search_new(&p, t->inc0, &t->s) < 0) {
        report_error("search", t->o.smb_conf, "search: bad parameters (min/max sizes?)");
        tuner_cycle_end(t, false);
        return;
    }
    t->searched_from = t->inc0;
    /* A search that begins with real clients held back at the value in
     * force has them in its outcome: it counts as that value's steer.
     * Where the line stays (advice, or nothing better), they stay held
     * back, and a search for them again would come to the same; clients
     * that need twice their product steer again (steer). */
    {
        char why[512];

        if (clients_ask_more(t, why, sizeof(why))) {
            t->steered = true;
            t->steered_from = t->inc0;
            t->steered_bdp = t->real.bdp_max;
        }
    }
    report_event(JOURNAL_ID_SEARCH_START, LOG_INFO,
                 &(struct event_fields){.smb_conf = t->o.smb_conf, .c = &t->inc0},
                 "tuning cycle: searching from %s (%s trials)",
                 search_config_str(t->inc0, cs, sizeof(cs)), trials_name(t->o.trials));
    why_told(t);
    tuner_set_status(t, "searching from %s", cs);
    t->kind = S_SEARCH;
    step(t);
}

/* Real connections held back by the server's own buffers, and more can
 * be given: a new search though verification sees no drift (a new
 * population of clients, further away). Once for each value in force and
 * the clients a search for it saw (cycle_search marks it), unless clients
 * need more than twice their product. */
static bool steer(struct tuner *t)
{
    char why[512];

    /* Twice the product: a product is measured from round trips and
     * rates that move from cycle to cycle, and a search per cycle for the
     * same clients would cost more than it could find. */
    if (t->steered && search_config_eq(t->steered_from, t->inc0) &&
        !(t->real.bdp_max > 2 * t->steered_bdp))
        return false;
    if (!clients_ask_more(t, why, sizeof(why)))
        return false;
    /* (the search it starts marks the value: cycle_search) */
    report_event(JOURNAL_ID_STEER, LOG_NOTICE,
                 &(struct event_fields){.smb_conf = t->o.smb_conf, .c = &t->inc0},
                 "%s: searching again", why);
    return true;
}

/* After the checks: verify the winner, or search. */
void tuner_cycle_go(struct tuner *t)
{
    /* said whether the cycle searches or verifies */
    facts_listener_notice(&t->facts, t->inc0);
    if (!t->converged && tuner_ref_restore(t))
        t->converged = true;
    if (t->converged && steer(t))
        tuner_unconverge(t);
    /* Advice rests on the line it was searched from (whether autotuning
     * can take effect, where the search began): one changed by hand since
     * gets advice of its own (searched_from: a restored one's too). */
    if (t->converged)
        tuner_advice_outdated(t, t->searched_from);
    if (!t->converged) {
        tuner_files_then_search(t);
        return;
    }
    /* verification: one sample of the winner */
    if (t->v == NULL && verify_of_search(t->s, &t->v) < 0) {
        tuner_cycle_end(t, false);
        return;
    }
    /* restored (no search in memory): the line in force, or the advice */
    {
        char cs[96];

        tuner_set_status(t, "verifying %s", search_config_str(tuner_verified(t), cs, sizeof(cs)));
    }
    sample(t, S_VERIFY, tuner_verified(t));
}
