/* world: the real one (see world.h). */
#include "world.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conns.h"
#include "files.h"
#include "job.h"
#include "journal.h"
#include "probe_made.h"
#include "report.h"

/* facts_gather's helpers have deadlines of their own (testparm 60 s,
 * `smbd -V` 10 s); this bounds their sum. */
#define FACTS_DEADLINE_S 180.0

struct real {
    sd_event *ev;
    const struct tuner_opts *o;
    struct place *place;
    struct measure *measure;
    struct job *facts_job;
    world_facts_fn facts_done;
    void *facts_ud;
    /* the busy check: the connections at its start */
    struct kernel_sock_bytes *busy0;
    size_t nbusy0;
    int busy_ports[SMBD_MAX_PORTS], nbusy_ports;
    double busy_s;
    sd_event_source *busy_timer;
    world_busy_fn busy_done;
    void *busy_ud;
    struct clients_watch *clients;
    /* the place (probe_made_key) whose other places' records were told:
     * once a run for each configuration, not at its start and its stop */
    char others_told[PROBE_MADE_KEY_LEN + 1];
};

static int facts_job(void *arg, int out_fd)
{
    struct real *w = arg;
    struct facts f;

    facts_gather(w->o->smb_conf, &f);
    return files_write_all(out_fd, &f, sizeof(f));
}

static void facts_job_done(struct job *j, const struct job_result *r, void *ud)
{
    struct real *w = ud;
    struct facts f;

    w->facts_job = NULL;
    if (!r->ok || r->len != sizeof(f)) {
        report_error("facts", NULL, "gathering facts: the job %s: cycle skipped",
                     r->unreaped    ? "was killed and has not ended (testparm "
                                      "or smbd stuck in the kernel: an include on a hung mount?)"
                     : r->timed_out ? "did not finish within its deadline"
                                    : "failed");
        w->facts_done(w->facts_ud, r->timed_out ? -ETIMEDOUT : -EIO, NULL);
        return;
    }
    memcpy(&f, r->data, sizeof(f));
    f.why[sizeof(f.why) - 1] = '\0';
    f.kernel[sizeof(f.kernel) - 1] = '\0';
    f.samba[sizeof(f.samba) - 1] = '\0';
    w->facts_done(w->facts_ud, 0, &f);
}

static int real_facts(void *ctx, world_facts_fn done, void *ud)
{
    struct real *w = ctx;
    struct err e;
    int r;

    if (w->facts_job != NULL)
        return -EBUSY;
    w->facts_done = done;
    w->facts_ud = ud;
    r = job_start(w->ev, facts_job, w, FACTS_DEADLINE_S, facts_job_done, w, &w->facts_job, &e);
    if (r < 0)
        report_error("facts", NULL, "gathering facts: %s", e.msg);
    return r;
}

static int real_place(void *ctx, const char *base, struct search_config c, place_fn done, void *ud)
{
    return place_put(((struct real *)ctx)->place, base, c, done, ud);
}

static bool real_place_denied(void *ctx)
{
    return place_denied(((struct real *)ctx)->place);
}

static void real_place_down(void *ctx)
{
    place_down(((struct real *)ctx)->place);
}

static int real_measure(void *ctx, const struct probe_params *p, measure_fn done, void *ud)
{
    return measure_start(((struct real *)ctx)->measure, p, done, ud);
}

static void real_measure_kill(void *ctx)
{
    measure_kill(((struct real *)ctx)->measure);
}

static void say_other_place(const char *where, const char *records, int n, void *ud)
{
    (void)ud;
    journal_log(LOG_NOTICE,
                "%d%s file%s of killed probes at %s, which is probed no more, stay%s there: "
                "remove %s by hand (the names: ls -A %s), then that directory, which this "
                "notice reads",
                n, n == PROBE_MADE_COUNT_MAX ? " or more" : "", n == 1 ? "" : "s", where,
                n == 1 ? "s" : "", n == 1 ? "it" : "them", records);
}

static void real_measure_tidy(void *ctx, bool wait)
{
    struct real *w = ctx;
    const struct probe_params *p = &w->o->probe;
    struct err e;

    /* The own share is a directory of ours: a killed probe's file goes
     * from here, without an SMB client, and no shadow needs to be up (a
     * stopping one's open file is only unlinked). */
    if (w->o->own_share) {
        if (place_tidy(w->o, &e) < 0)
            journal_log(LOG_WARNING, "removing a killed probe's file: %s", e.msg);
    } else {
        measure_tidy(w->measure, p, wait);
    }
    /* At the start (and the stop, after a reload that moved the probe):
     * records no clean-up of this configuration visits (a url or
     * directory changed since). */
    if (wait) {
        const char *place = w->o->own_share ? PROBE_PLACE_OWN_SHARE : p->url;
        const char *dir = w->o->own_share ? NULL : p->directory;
        char key[PROBE_MADE_KEY_LEN + 1];

        probe_made_key(place, dir, key);
        if (strcmp(key, w->others_told) != 0) {
            memcpy(w->others_told, key, sizeof(key));
            probe_made_others(w->o->state_dir, place, dir, say_other_place, NULL);
        }
    }
}

static void busy_stop(struct real *w)
{
    w->busy_timer = sd_event_source_disable_unref(w->busy_timer);
    free(w->busy0);
    w->busy0 = NULL;
}

/* The bytes each of smbd's connections on ports has moved so far, for the
 * busy check: lib/conns reads them (one reader of smbd's connections). */
static int port_bytes(const int *ports, int nports, struct kernel_sock_bytes **v, size_t *n,
                      struct err *e)
{
    struct clients_sock *c;
    size_t nc;
    int r = conns_read(ports, nports, &c, &nc, e);

    if (r < 0)
        return r;
    *v = nc ? calloc(nc, sizeof(**v)) : NULL;
    if (nc && *v == NULL) {
        free(c);
        return err_set(e, -ENOMEM, "sock_diag: out of memory");
    }
    for (size_t i = 0; i < nc; i++)
        (*v)[i] = (struct kernel_sock_bytes){c[i].cookie, c[i].bytes_acked + c[i].bytes_received};
    *n = nc;
    free(c);
    return 0;
}

static int on_busy_sampled(sd_event_source *src, uint64_t usec, void *ud)
{
    struct real *w = ud;
    struct kernel_sock_bytes *now;
    size_t n;
    struct err e;
    double mbps;
    int r;

    r = port_bytes(w->busy_ports, w->nbusy_ports, &now, &n, &e);
    if (r == 0) {
        mbps = (double)kernel_bytes_since(w->busy0, w->nbusy0, now, n) / 1e6 / w->busy_s;
        free(now);
    }
    busy_stop(w);
    w->busy_done(w->busy_ud, r, r == 0 ? mbps : 0, r == 0 ? "" : e.msg);
    return 0;
}

static int real_busy(void *ctx, const int *ports, int nports, double seconds, world_busy_fn done,
                     void *ud)
{
    struct real *w = ctx;
    struct err e;
    int r;

    busy_stop(w);
    if (nports < 1 || nports > SMBD_MAX_PORTS)
        return -EINVAL;
    r = port_bytes(ports, nports, &w->busy0, &w->nbusy0, &e);
    if (r < 0) {
        journal_log(LOG_WARNING, "cannot watch client traffic: %s", e.msg);
        return r;
    }
    memcpy(w->busy_ports, ports, sizeof(*ports) * (size_t)nports);
    w->nbusy_ports = nports;
    w->busy_s = seconds;
    w->busy_done = done;
    w->busy_ud = ud;
    r = sd_event_add_time_relative(w->ev, &w->busy_timer, CLOCK_MONOTONIC,
                                   (uint64_t)(seconds * 1e6), 10000, on_busy_sampled, w);
    if (r < 0) {
        journal_log(LOG_WARNING, "cannot watch client traffic: its timer: %s", strerror(-r));
        busy_stop(w);
    }
    return r;
}

static int real_clients(void *ctx, const int *ports, int nports, double seconds,
                        world_clients_fn done, void *ud)
{
    return clients_watch_start(((struct real *)ctx)->clients, ports, nports, seconds, done, ud);
}

static int real_sweep(void *ctx, struct err *e)
{
    struct real *w = ctx;
    int r = place_sweep(w->o, e);

    if (r < 0)
        return r;
    /* A killed predecessor's probe may have left its file, still open on
     * the server for a moment: the cleanup child retries for a while
     * (measurements never look for such files). */
    measure_dirty(w->measure);
    real_measure_tidy(w, true);
    return 0;
}

static void real_cancel(void *ctx)
{
    struct real *w = ctx;

    job_cancel(w->facts_job);
    w->facts_job = NULL;
    busy_stop(w);
    clients_watch_stop(w->clients);
}

static void real_free(void *ctx)
{
    struct real *w = ctx;

    job_cancel(w->facts_job);
    busy_stop(w);
    clients_watch_free(w->clients);
    place_free(w->place);
    measure_free(w->measure);
    sd_event_unref(w->ev);
    free(w);
}

static const struct world_ops real_ops = {
    .facts = real_facts,
    .place = real_place,
    .place_down = real_place_down,
    .place_denied = real_place_denied,
    .measure = real_measure,
    .measure_kill = real_measure_kill,
    .measure_tidy = real_measure_tidy,
    .busy = real_busy,
    .clients = real_clients,
    .cancel = real_cancel,
    .sweep = real_sweep,
    .free = real_free,
};

int world_real_new(sd_event *ev, const struct tuner_opts *o, struct world *out)
{
    struct real *w = calloc(1, sizeof(*w));

    if (w == NULL)
        return -ENOMEM;
    w->ev = sd_event_ref(ev);
    w->o = o;
    if (place_new(ev, o, &w->place) < 0 || measure_new(ev, &w->measure) < 0 ||
        clients_watch_new(ev, &w->clients) < 0) {
        real_free(w);
        return -ENOMEM;
    }
    *out = (struct world){&real_ops, w};
    return 0;
}
