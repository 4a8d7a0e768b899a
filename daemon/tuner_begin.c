/* tuner_begin: a cycle's start and its checks (see tuner.c): the state
 * file read again, what a killed run left settled, the line in force
 * read, the facts and smbd's real connections looked at, the busy check;
 * then tuner_cycle_go (tuner_search.c) verifies or searches. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "child.h"
#include "journal.h"
#include "smbconf.h"
#include "tuner_int.h"
#include "window.h"

/* How long the busy check watches the clients' traffic. */
#define BUSY_SAMPLE_S 1.0
/* How long smbd's real connections are watched once a cycle: some 40
 * snapshots, enough round trips of a client far away. */
#define CLIENTS_WATCH_S 2.0

/* busy_rate asks for a cycle only while the clients are quiet: where
 * their traffic cannot be watched, nothing says they are, so the cycle
 * is deferred as a busy one is (and the journal says why each time; why
 * is NULL when the watch said it already, as it does when it cannot
 * start). */
#define BUSY_UNKNOWN                                                                               \
    "tuning deferred: busy_rate asks for quiet clients, and nothing tells whether they are"

static void busy_unknown(struct tuner *t, const char *why)
{
    if (why != NULL)
        journal_log(LOG_WARNING, "cannot watch client traffic (%s): " BUSY_UNKNOWN, why);
    else
        journal_log(LOG_WARNING, BUSY_UNKNOWN);
    tuner_set_status(t, "deferred: client traffic cannot be watched");
    tuner_cycle_end(t, true);
}

bool tuner_busy_watched(const struct tuner *t)
{
    const struct facts *f = &t->facts;

    /* No smbd running, no client to spare: no check. */
    return !t->o.once && t->o.busy_mbps > 0 && f->smbd_running && f->smb_port > 0;
}

int tuner_busy_watch(struct tuner *t, world_busy_fn done)
{
    const struct facts *f = &t->facts;

    t->state = T_BUSY_CHECK;
    return t->w.ops->busy(t->w.ctx, f->smb_ports, f->n_smb_ports, BUSY_SAMPLE_S, done, t);
}

void tuner_busy_watched_now(struct tuner *t)
{
    if (sd_event_now(t->ev, CLOCK_MONOTONIC, &t->busy_at) < 0)
        t->busy_at = 0;
}

static void on_busy_checked(void *ud, int r, double mbps, const char *why)
{
    struct tuner *t = ud;

    tuner_busy_watched_now(t);
    if (r < 0) {
        busy_unknown(t, why);
        return;
    }
    if (mbps > t->o.busy_mbps) {
        journal_log(LOG_INFO, "clients move %.1f MB/s (more than %.1f): tuning deferred", mbps,
                    t->o.busy_mbps);
        tuner_set_status(t, "deferred: clients busy (%.1f MB/s)", mbps);
        tuner_cycle_end(t, true);
        return;
    }
    tuner_cycle_go(t);
}

/* Seconds until the window opens, 0 while it is open or without one. */
long tuner_window_wait(const struct tuner *t)
{
    return window_opens_in(t->o.window_start, t->o.window_end, time(NULL));
}

/* The window as the config file gives it: HH:MM-HH:MM. */
void tuner_window_str(const struct tuner *t, char *buf, size_t len)
{
    window_str(t->o.window_start, t->o.window_end, buf, len);
}

/* What was measured before was measured on something else: say what
 * changed and search again. */
static void fingerprint(struct tuner *t)
{
    char msg[512], f[4][300];

    /* before: what the state kept, which facts_fingerprint replaces */
    snprintf(f[0], sizeof(f[0]), "SMBTUNED_SAMBA_BEFORE=%s", t->st.samba ? t->st.samba : "");
    snprintf(f[1], sizeof(f[1]), "SMBTUNED_KERNEL_BEFORE=%s", t->st.kernel ? t->st.kernel : "");
    snprintf(f[2], sizeof(f[2]), "SMBTUNED_SAMBA_AFTER=%s", t->facts.samba);
    snprintf(f[3], sizeof(f[3]), "SMBTUNED_KERNEL_AFTER=%s", t->facts.kernel);
    facts_fingerprint(&t->facts, &t->st, t->o.smb_conf, msg, sizeof(msg));
    if (msg[0]) {
        const char *more[] = {f[0], f[1], f[2], f[3], NULL};

        report_event(JOURNAL_ID_UPGRADE, LOG_NOTICE,
                     &(struct event_fields){.smb_conf = t->o.smb_conf, .more = more},
                     "%s: searching again", msg);
        if (t->st.have_incumbent)
            snprintf(t->fp_change, sizeof(t->fp_change), "%s", msg);
        /* before the reference that says how they were computed goes */
        t->fp_other_rates = tuner_ref_other_rates(&t->st);
        tuner_unconverge(t);
    }
}

static void cycle_checks(struct tuner *t);

static void on_clients(void *ud, int r, const struct clients_watch_summary *sum, const char *why)
{
    struct tuner *t = ud;

    if (r < 0) {
        journal_log(LOG_WARNING, "cannot watch smbd's connections: %s", why);
        memset(&t->real, 0, sizeof(t->real));
    } else {
        struct clients_watch_compare cmp;

        t->real = *sum;
        if (t->have_before)
            clients_watch_compare(&t->real_before, &t->real, &cmp);
        clients_watch_tell(&t->real, t->have_before ? &cmp : NULL, t->o.smb_conf);
        clients_watch_keep(&t->real, (long)time(NULL), &t->st);
    }
    cycle_checks(t);
}

static void on_facts(void *ud, int r, const struct facts *f)
{
    struct tuner *t = ud;

    /* Without the facts the search would start from guesses (caps, the
     * listener) and the fingerprint would claim a new machine. */
    if (r < 0) {
        tuner_cycle_end(t, false);
        return;
    }

    t->facts = *f;
    if (!f->mins_known)
        journal_log(LOG_WARNING, "%s", f->why);
    if (f->cmdline_override)
        journal_log(LOG_WARNING,
                    "smbd (pid %d) runs with --option 'socket options=...': "
                    "it overrides smb.conf, so nothing smbtuned writes there takes effect "
                    "until smbd runs without it",
                    (int)f->smbd_pid);
    t->inc0 = facts_config_of_value(f, &t->o.search, t->value0);
    fingerprint(t);
    /* What smbd's real clients get, once a cycle: logged, kept for
     * --status, and weighed against loopback trials (outcome.c). No smbd
     * running: it has no connection. */
    if (!f->smbd_running) {
        struct clients_watch_summary none = {.valid = true};

        on_clients(t, 0, &none, "");
    } else if (f->n_smb_ports == 0) {
        on_clients(t, -ENOENT, NULL, "smbd's ports are not known");
    } else {
        t->state = T_CLIENTS;
        if (t->w.ops->clients(t->w.ctx, f->smb_ports, f->n_smb_ports, CLIENTS_WATCH_S, on_clients,
                              t) < 0)
            on_clients(t, -EIO, NULL, "the watch could not start");
    }
}

/* The facts are in and the real connections watched: the time window,
 * the busy check, then the search or the verification. */
static void cycle_checks(struct tuner *t)
{
    long wait;

    if (!t->o.once && (wait = tuner_window_wait(t)) > 0) {
        char win[48], at[32];

        tuner_window_str(t, win, sizeof(win));
        tuner_when_str(time(NULL) + wait, time(NULL), at, sizeof(at));
        /* the next try at the window's start (cycle_done), not an interval
         * later: that could miss the window for ever (6h, 01:00-05:00,
         * from 11:30) */
        t->window_deferred = true;
        journal_log(LOG_INFO, "outside the time window %s: cycle deferred to its start at %s", win,
                    at);
        tuner_set_status(t, "waiting for the time window %s", win);
        tuner_cycle_end(t, true);
        return;
    }
    if (tuner_busy_watched(t)) {
        /* Watch the clients' traffic for a moment before adding ours. */
        if (tuner_busy_watch(t, on_busy_checked) < 0)
            busy_unknown(t, NULL); /* the watch said why */
        return;
    }
    tuner_cycle_go(t);
}

static void on_read(void *ud, int r, const char *value, const char *where)
{
    struct tuner *t = ud;

    if (r < 0 || (t->value0 = strdup(value)) == NULL) {
        tuner_cycle_end(t, false);
        return;
    }
    t->state = T_FACTS;
    if (t->w.ops->facts(t->w.ctx, on_facts, t) < 0)
        tuner_cycle_end(t, false);
}

/* Nothing is pending any more: read our line (in a job), then the facts. */
static void cycle_read(struct tuner *t)
{
    free(t->value0);
    t->value0 = NULL;
    t->state = T_READING;
    if (owned_read(t->line, on_read, t) < 0)
        tuner_cycle_end(t, false);
}

static void on_settled(void *ud, int r)
{
    struct tuner *t = ud;

    tuner_restart_failed(t);
    /* A take-back that fails again (lock held, disk full) skips the cycle. */
    if (t->st.pending || t->st.hold) {
        tuner_cycle_end(t, false);
        return;
    }
    cycle_read(t);
}

/* The hold ended (`smbtuned --resume`, or the state file replaced) while
 * we ran: the journal's resume event comes from the daemon, under its
 * unit, where `journalctl -u smbtuned` finds it (the --resume command's
 * own event goes to its terminal when run from a shell). */
void tuner_resumed_told(const struct tuner *t, const char *what)
{
    report_event(JOURNAL_ID_RESUME, LOG_NOTICE, &(struct event_fields){.smb_conf = t->o.smb_conf},
                 "the hold is gone from the state file (smbtuned --resume): %s", what);
}

void tuner_cycle_begin(struct tuner *t)
{
    struct err e;
    bool held = t->st.hold; /* the last cycle's, taken or found */
    /* whether a line of ours was on record: --resume after an edit by
     * hand that no cycle held off for yet ends the record instead */
    bool had_written = t->st.last_written != NULL;

    tally_begin(&t->tally, child_now());
    /* what a failure before the search or the verification says it was
     * doing (cycle_done), not the last cycle's idle words */
    tuner_set_status(t, "starting: smb.conf, the state and the facts");
    t->failed = false;
    t->window_deferred = false;
    /* fp_change stays until a sample tells it: a cycle deferred (busy,
     * the window) or failed before its first sample has saved the new
     * versions, so no later cycle would find the change again */
    state_free(&t->st);
    if (state_load(t->o.state_dir, &t->st, &e) < 0) {
        report_error("state", t->o.smb_conf, "%s", e.msg);
        t->st.unread = true; /* the cycle's end must not save a blank over it */
        tuner_cycle_end(t, false);
        return;
    }
    owned_hold_read(t->line);
    /* The hold was ended (`smbtuned --resume`) while we ran: the line in
     * force is the admin's now, and the search starts from it, as
     * smbtuned(8) says; the winner of before is no longer what to verify. */
    if (held && !t->st.hold) {
        tuner_resumed_told(t, "tuning again from the line in force");
        if (t->converged)
            tuner_unconverge(t);
    } else if (had_written && t->st.last_written == NULL && !t->st.hold) {
        /* `smbtuned --resume` right after an edit by hand (cmd_resume.c),
         * or the state file removed: the winner of before is not what is
         * in force, nor what to verify */
        report_event(JOURNAL_ID_RESUME, LOG_NOTICE,
                     &(struct event_fields){.smb_conf = t->o.smb_conf},
                     "the line smbtuned wrote is gone from the state file (smbtuned --resume "
                     "after an edit by hand?): tuning from the line in force");
        if (t->converged)
            tuner_unconverge(t);
    }
    if (t->st.hold) {
        /* The reason says why: an edit by hand, a damaged state file. */
        tuner_set_status(t, "holding off: %s",
                         t->st.hold_reason ? t->st.hold_reason : "by request");
        journal_log(LOG_NOTICE,
                    "not tuning: holding off: %s; `smbtuned --resume` hands control back",
                    t->st.hold_reason ? t->st.hold_reason : "by request");
        tuner_cycle_end(t, false);
        return;
    }
    if (!t->st.pending) {
        cycle_read(t);
        return;
    }
    /* What an earlier step left pending first: a take-back that failed
     * (lock held, disk full), or a commit in force not yet confirmed
     * (its check found the edit lock busy), which is confirmed. */
    t->state = T_SETTLING;
    if (owned_take_back(t->line, true, on_settled, t) < 0)
        tuner_cycle_end(t, false);
}
