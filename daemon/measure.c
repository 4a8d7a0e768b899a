/* measure: see measure.h. */
#include "measure.h"

#include <errno.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "job.h"
#include "journal.h"
#include "report.h"

/* probe_cleanup's own bound is a few seconds. */
#define TIDY_DEADLINE_S 60.0
/* The tidy job's exit status when it could not reach the share to look. */
#define TIDY_UNLOOKED 2

struct measure {
    sd_event *ev;
    struct probe_job job;
    bool running;
    bool dirty;        /* a probe's file may be in the share */
    bool ours;         /* of a probe of ours that made one, not only a predecessor's */
    bool tidy_ours;    /* ours, for the tidy job that runs */
    bool unlooked;     /* a clean-up could not reach the share: a probe that does calls for one */
    bool failed;       /* the last clean-up failed, and no probe has run since */
    bool recycle_said; /* a recycle copy the probe removed: said once a run */
    char url[4096];    /* the running probe's target, for its words */
    sd_event_source *io, *timer;
    struct job *tidy;
    struct probe_params tidy_p;
    measure_fn done;
    void *ud;
};

int measure_new(sd_event *ev, struct measure **mp)
{
    struct measure *m = calloc(1, sizeof(*m));

    if (m == NULL)
        return -ENOMEM;
    m->ev = sd_event_ref(ev);
    *mp = m;
    return 0;
}

static void sources_off(struct measure *m)
{
    m->io = sd_event_source_disable_unref(m->io);
    m->timer = sd_event_source_disable_unref(m->timer);
}

void measure_kill(struct measure *m)
{
    struct probe_result r;
    struct err e;

    if (!m->running)
        return;
    sources_off(m);
    kill(m->job.pid, SIGKILL);
    probe_finish(&m->job, &r, &e);
    m->running = false;
    /* killed: whether it began its create is not worth the risk */
    m->dirty = m->ours = true;
}

void measure_free(struct measure *m)
{
    if (m == NULL)
        return;
    measure_kill(m);
    job_cancel(m->tidy);
    sd_event_unref(m->ev);
    free(m);
}

bool measure_running(const struct measure *m)
{
    return m->running;
}

void measure_dirty(struct measure *m)
{
    m->dirty = true;
}

static int on_done(sd_event_source *src, int fd, uint32_t revents, void *ud)
{
    struct measure *m = ud;
    struct probe_result r;
    struct err e;
    int ret;

    sources_off(m);
    m->running = false;
    m->failed = false;
    ret = probe_finish(&m->job, &r, &e);
    /* Only a probe that ended well by itself removed its file and its
     * record (a failed delete is a failure: probe.c); one that failed
     * before it sent its create (no connection, no logon, no share) made
     * none. */
    if (ret < 0 || ((r.outcome != PROBE_OK || r.killed) && r.stage >= PROBE_STAGE_CREATING))
        m->dirty = m->ours = true;
    /* The share is in reach again: the look a clean-up could not make
     * (a predecessor's file) is made at the next tidy. */
    if (ret == 0 && m->unlooked && r.stage >= PROBE_STAGE_REACHED) {
        m->unlooked = false;
        m->dirty = true;
    }
    /* A share that keeps deleted files: a copy the probe removed is said
     * once a run, not once a sample (the admin's fix is the exclude line).
     * A copy it could not remove fails the measurement: every further
     * sample would leave its file in the share for good, so the cycle
     * ends there (one file a cycle, with an error each cycle) rather than
     * fill a production share with a search's worth of them. */
    if (ret == 0 && r.recycle == PROBE_RECYCLE_REMOVED && !m->recycle_said) {
        char note[1024];

        if (probe_recycle_text(m->url, &r, note, sizeof(note)) == 0)
            journal_log(LOG_WARNING, "%s", note);
        m->recycle_said = true;
    } else if (ret == 0 && r.recycle == PROBE_RECYCLE_LEFT &&
               (r.outcome == PROBE_OK || r.outcome == PROBE_TIMEOUT) &&
               probe_recycle_text(m->url, &r, r.cause, sizeof(r.cause)) == 0) {
        /* (a measurement that failed keeps its own cause: it ends the
         * cycle all the same) */
        r.outcome = PROBE_ERROR;
    }
    m->done(m->ud, ret, ret < 0 ? NULL : &r, ret < 0 ? e.msg : r.cause);
    return 0;
}

static int on_deadline(sd_event_source *src, uint64_t usec, void *ud)
{
    struct measure *m = ud;
    double kill_at = probe_kill_time(&m->job);

    /* Measured, and looking for a recycle copy: its grace. */
    if (child_now() < kill_at &&
        sd_event_source_set_time(m->timer, (uint64_t)(kill_at * 1e6) + 1000) >= 0 &&
        sd_event_source_set_enabled(m->timer, SD_EVENT_ONESHOT) >= 0)
        return 0;
    /* probe_finish kills the child and counts what it moved. */
    return on_done(src, -1, 0, ud);
}

int measure_start(struct measure *m, const struct probe_params *p, measure_fn done, void *ud)
{
    struct err e;
    int r;

    if (m->running)
        return -EBUSY;
    m->failed = false;
    r = probe_start(p, &m->job, &e);
    if (r < 0) {
        report_error("probe", NULL, "probe: %s", e.msg);
        return r;
    }
    m->running = true;
    snprintf(m->url, sizeof(m->url), "%s", p->url);
    m->done = done;
    m->ud = ud;
    /* The deadline to the millisecond: a cut one may be 30 ms, and an
     * accuracy of 0 would be sd-event's default of 250 ms. */
    r = sd_event_add_io(m->ev, &m->io, m->job.fd, EPOLLIN, on_done, m);
    if (r >= 0)
        r = sd_event_add_time(m->ev, &m->timer, CLOCK_MONOTONIC,
                              (uint64_t)(m->job.deadline * 1e6) + 1000, 1000, on_deadline, m);
    if (r < 0) {
        measure_kill(m);
        report_error("probe", NULL, "probe: cannot watch it: %s", strerror(-r));
    }
    return r;
}

/* What a failed clean-up was to remove is still to be removed. */
static void still_dirty(struct measure *m, bool ours)
{
    m->dirty = true;
    m->ours = m->ours || ours;
}

/* A clean-up that failed, said (in the job, or in place when waiting).
 * At a start only a killed predecessor's file may be there, if one was
 * killed at all: a share out of reach then removed nothing and looked for
 * nothing, and is no news (the probe that follows says so); the first
 * probe that reaches the share calls for the look (on_done). Otherwise
 * a file stays, ours or found: the end of the next cycle tries again
 * (measure_tidy), and says so again while it stays. */
static void tidy_failed(struct measure *m, bool ours, int r, const struct err *e)
{
    if (!ours && r == -ENOTCONN) {
        m->unlooked = true;
        journal_log(LOG_INFO,
                    "no look for a file a killed predecessor's probe may have left: %s; a "
                    "clean-up looks once a probe reaches the share",
                    e->msg);
        return;
    }
    /* In the job m is the job's copy: tidy_done does this from its end. */
    still_dirty(m, ours);
    journal_log(LOG_WARNING, "removing a killed probe's file: %s%s", e->msg,
                r == -ENOTCONN ? ": the file stays there until a later clean-up, at the end of a "
                                 "cycle, removes it"
                               : "");
}

static int tidy_job(void *arg, int out_fd)
{
    struct measure *m = arg;
    struct err e;
    int r = probe_cleanup(&m->tidy_p, &e);

    if (r < 0) {
        tidy_failed(m, m->tidy_ours, r, &e);
        /* what to do again: its exit status says (tidy_done) */
        return r == -ENOTCONN && !m->tidy_ours ? TIDY_UNLOOKED : 1;
    }
    return 0;
}

static void tidy_done(struct job *j, const struct job_result *r, void *ud)
{
    struct measure *m = ud;

    m->tidy = NULL;
    m->failed = !r->ok;
    if (r->timed_out)
        journal_log(LOG_WARNING, "removing a killed probe's file: no end within %.0f s",
                    TIDY_DEADLINE_S);
    if (r->status == TIDY_UNLOOKED)
        m->unlooked = true;
    else if (!r->ok)
        still_dirty(m, m->tidy_ours);
}

void measure_tidy(struct measure *m, const struct probe_params *p, bool wait)
{
    struct err e;

    if (wait && m->tidy != NULL) {
        /* Stopping while one runs: it goes, and the clean-up below, whose
         * start sweeps work directories of dead processes, removes its
         * private directory too. */
        job_cancel(m->tidy);
        m->tidy = NULL;
        still_dirty(m, m->tidy_ours);
    }
    /* A stop (or --once's end) right after a clean-up that failed, with
     * no probe between, would fail the same way and say so once more: the
     * next start's clean-up tries again. */
    if (!m->dirty || (wait && m->failed))
        return;
    m->dirty = false;
    if (wait) {
        bool ours = m->ours;
        int r;

        m->ours = false;
        r = probe_cleanup(p, &e);
        m->failed = r < 0;
        if (r < 0)
            tidy_failed(m, ours, r, &e);
        return;
    }
    if (m->tidy != NULL)
        return; /* one runs: it removes every leftover of this host */
    /* The job's copy of p is its own (taken at the fork). */
    m->tidy_p = *p;
    m->tidy_ours = m->ours;
    if (job_start(m->ev, tidy_job, m, TIDY_DEADLINE_S, tidy_done, m, &m->tidy, &e) < 0) {
        /* Nothing ran: the file is still to be removed, by the next tidy. */
        journal_log(LOG_WARNING, "removing a killed probe's file: %s", e.msg);
        still_dirty(m, m->tidy_ours);
        return;
    }
    m->ours = false;
}

bool measure_cut_deadline(struct probe_params *p, double write_min, double read_min)
{
    double d;

    if (write_min <= 0 || read_min <= 0)
        return false;
    d = p->size / (write_min * 1e6) + p->size / (read_min * 1e6);
    /* With a duration a direction lasts about that long whatever its rate
     * (and a good trial on a long path runs past `size` for its start-up):
     * the deadline then only ends a trial that hangs, at half as much
     * again as both directions may take, which leaves the log-on time. */
    if (p->duration_s > 0)
        d = 3 * p->duration_s;
    if (d >= p->deadline_s)
        return false;
    p->deadline_s = d;
    return true;
}

void measure_sample(const struct probe_result *r, struct search_sample *x)
{
    *x = (struct search_sample){r->write_mbps, r->read_mbps, false, false};
    if (r->outcome != PROBE_TIMEOUT)
        return;
    if (!r->write_done) {
        x->write_timeout = true;
        x->read = -1;
    } else {
        x->read_timeout = true;
    }
}
