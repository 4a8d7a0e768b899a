/* place: see place.h. */
#include "place.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "child.h"
#include "journal.h"
#include "report.h"
#include "probe.h"
#include "probe_made.h"
#include "sockopts.h"
#include "trial.h"
#include "url.h"

/* A shadow smbd must serve within this; a healthy one takes about 1 s. */
#define SHADOW_READY_S 30.0
/* How often a starting shadow is asked whether it serves. */
#define SHADOW_POLL_S 0.1
/* How often a stopping shadow is looked at; a healthy one takes tens of ms. */
#define SHADOW_STOP_POLL_S 0.02
/* ... and one that even SIGKILL has not ended yet. */
#define SHADOW_STUCK_POLL_S 1.0
/* Shadows still stopping (each up to about 2 x TRIAL_STOP_TIMEOUT_S when
 * smbd does not heed SIGTERM) beyond which no new one is started: a
 * machine where smbd hangs would otherwise gain one per candidate. */
#define RETIRING_MAX 3

/* A shadow on its way out. It is stopped in steps from a timer: one that
 * does not heed SIGTERM (stopped, hung in I/O) would otherwise hold the
 * loop, and the watchdog, for TRIAL_STOP_TIMEOUT_S and more. The next
 * shadow does not wait for it: it has a port and run directory of its own. */
struct retiring {
    struct retiring *next;
    struct place *place;
    struct trial_shadow shadow;
    sd_event_source *timer;
    bool stuck_said;
};

struct place {
    sd_event *ev;
    const struct tuner_opts *o;
    struct trial_shadow shadow;
    bool up;       /* shadow runs (and serves, unless starting) */
    bool starting; /* spawned, not yet serving */
    int attempt;
    double deadline;
    char *value;  /* the starting shadow's socket options */
    char *client; /* a client trial's socket options */
    struct search_config cfg;
    sd_event_source *timer;
    struct retiring *retiring;
    place_fn done;
    void *ud;
    char url[2048];
};

static char *shadow_base(const struct tuner_opts *o)
{
    char *b;

    return asprintf(&b, "%s/" TRIAL_BASE_DIR, o->state_dir) < 0 ? NULL : b;
}

/* The own share's directory (tuner_opts.h), NULL when out of memory. */
static char *own_share_dir(const struct tuner_opts *o)
{
    char *d;

    return asprintf(&d, "%s/" PLACE_OWN_SHARE_DIR, o->state_dir) < 0 ? NULL : d;
}

/* The own share's directory, open, when it is ours: a directory (not a
 * link) of our uid that nobody else may enter, as own_share_make() makes
 * it. tune.state_dir may name any directory of root's (/srv, say), and
 * STATE_DIR/share there may be a real share: smbtuned never serves it to
 * a shadow nor removes a file from it. -ENOENT (no message) when missing. */
static int own_share_open(const char *dir, struct err *e)
{
    struct stat st;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK), r;

    if (fd < 0) {
        r = -errno;
        if (r == -ENOENT)
            return r;
        if (r == -ELOOP || r == -ENOTDIR)
            return err_set(e, r,
                           "%s is a symlink or not a directory: not smbtuned's own share, "
                           "left as it is",
                           dir);
        return err_set(e, r, "cannot open %s: %s", dir, strerror(-r));
    }
    if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        r = err_set(e, -EPERM,
                    "%s is owned by uid %u with mode %04o: not smbtuned's own share (uid %u's, "
                    "mode 0700), left as it is; give tune.state_dir a directory of its own",
                    dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        close(fd);
        return r;
    }
    return fd;
}

/* Made at each shadow's start, so that a tidy or a hand that removed it
 * does not break the next trial. 0700 like the state directory: only the
 * shadow's forced root user writes there (lib/trial_render.c). One that
 * is there already must be ours (own_share_open()). */
static int own_share_make(const char *dir, struct err *e)
{
    int fd;

    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return err_set(e, -errno, "cannot create %s: %s", dir, strerror(errno));
    fd = own_share_open(dir, e);
    if (fd == -ENOENT)
        return err_set(e, fd, "cannot create %s: it went away", dir);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

int place_new(sd_event *ev, const struct tuner_opts *o, struct place **pp)
{
    struct place *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return -ENOMEM;
    p->ev = sd_event_ref(ev);
    p->o = o;
    *pp = p;
    return 0;
}

/* The end of a retiring shadow's stop: r from trial_shadow_stop_step(). */
static void retired(struct place *p, struct retiring *s, int r, const struct err *e)
{
    struct retiring **pp = &p->retiring;

    if (r < 0)
        journal_log(LOG_WARNING, "stopping the shadow smbd: %s", e->msg);
    /* (a stuck one was said when it stuck) */
    if (s->shadow.stop.killed && !s->shadow.stop.stuck)
        journal_log(LOG_WARNING,
                    "shadow smbd (%s) did not stop within %.0f s of SIGTERM: it was killed",
                    s->shadow.conf, TRIAL_STOP_TIMEOUT_S);
    else if (s->shadow.stop.killed_rest)
        journal_log(LOG_INFO, "shadow smbd (%s): processes that outlived it were killed",
                    s->shadow.conf);
    while (*pp != s)
        pp = &(*pp)->next;
    *pp = s->next;
    sd_event_source_disable_unref(s->timer);
    free(s);
}

/* The retiring shadow's stop goes on until its processes are gone; if
 * the timer cannot be armed again, the rest of the stop blocks. */
static int on_retire(sd_event_source *src, uint64_t usec, void *ud)
{
    struct retiring *s = ud;
    struct err e;
    int r = trial_shadow_stop_step(&s->shadow, &e);

    if (r == 0) {
        double next = SHADOW_STOP_POLL_S;

        /* Not even SIGKILL ended it yet: said once, then looked at
         * seldom; it stays on the list (and counts against the cap)
         * until it exits and is reaped. */
        if (s->shadow.stop.stuck) {
            if (!s->stuck_said)
                journal_log(LOG_WARNING,
                            "shadow smbd (pid %d, %s) did not end even %.0f s after SIGKILL "
                            "(stuck in the kernel?): waiting for it",
                            (int)s->shadow.pid, s->shadow.conf, TRIAL_STOP_TIMEOUT_S);
            s->stuck_said = true;
            next = SHADOW_STUCK_POLL_S;
        }
        r = sd_event_source_set_time_relative(src, (uint64_t)(next * 1e6));
        if (r >= 0)
            r = sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
        if (r >= 0)
            return 0;
        r = trial_shadow_stop(&s->shadow, &e);
    }
    retired(s->place, s, r, &e);
    return 0;
}

static int retiring_count(const struct place *p)
{
    int n = 0;

    for (const struct retiring *s = p->retiring; s != NULL; s = s->next)
        n++;
    return n;
}

/* Hand the shadow, up or starting, to a stop in steps; p->shadow is free
 * for the next one. Without memory for that, the stop blocks. */
static void retire(struct place *p)
{
    struct retiring *s;
    struct err e;
    int r;

    if (!p->up)
        return;
    p->up = false;
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        if (trial_shadow_stop(&p->shadow, &e) < 0)
            journal_log(LOG_WARNING, "stopping the shadow smbd: %s", e.msg);
        return;
    }
    s->place = p;
    s->shadow = p->shadow;
    /* Only the copy may stop it now. */
    memset(&p->shadow, 0, sizeof(p->shadow));
    s->next = p->retiring;
    p->retiring = s;
    trial_shadow_stop_begin(&s->shadow);
    r = sd_event_add_time_relative(p->ev, &s->timer, CLOCK_MONOTONIC,
                                   (uint64_t)(SHADOW_STOP_POLL_S * 1e6), 5000, on_retire, s);
    if (r < 0) {
        r = trial_shadow_stop(&s->shadow, &e);
        retired(p, s, r, &e);
    }
}

static void shadow_stop(struct place *p)
{
    p->timer = sd_event_source_disable_unref(p->timer);
    free(p->value);
    p->value = NULL;
    p->starting = false;
    retire(p);
}

bool place_denied(const struct place *p)
{
    return p->up && !p->starting && trial_shadow_denied(&p->shadow);
}

void place_down(struct place *p)
{
    shadow_stop(p);
    free(p->client);
    p->client = NULL;
    p->done = NULL; /* whoever waited gave up */
}

void place_free(struct place *p)
{
    if (p == NULL)
        return;
    place_down(p);
    /* At the end, the loop is done with: what is still stopping is
     * finished here, blocking. */
    while (p->retiring != NULL) {
        struct err e;
        int r = trial_shadow_stop(&p->retiring->shadow, &e);

        retired(p, p->retiring, r, &e);
    }
    sd_event_unref(p->ev);
    free(p);
}

int place_sweep(const struct tuner_opts *o, struct err *e)
{
    char *base = shadow_base(o);
    int r;

    if (base == NULL)
        return err_set(e, -ENOMEM, "out of memory");
    r = trial_shadow_sweep(base, e);
    free(base);
    return r;
}

int place_tidy(const struct tuner_opts *o, struct err *e)
{
    static const char prefix[] = PROBE_FILE_PREFIX;
    char *dir;
    struct dirent *de;
    DIR *d;
    int fd, r = 0;

    if (!o->own_share)
        return 0;
    dir = own_share_dir(o);
    if (dir == NULL)
        return err_set(e, -ENOMEM, "out of memory");
    fd = own_share_open(dir, e);
    d = fd < 0 ? NULL : fdopendir(fd);
    if (d == NULL) {
        if (fd >= 0) {
            r = err_set(e, -errno, "cannot read %s: %s", dir, strerror(errno));
            close(fd);
        } else {
            r = fd == -ENOENT ? 0 : fd;
        }
        free(dir);
        return r;
    }
    /* Only what a probe makes: a regular file of ours under a probe's
     * name. Anything else there was put by someone else; it stays. */
    while ((de = readdir(d)) != NULL) {
        struct stat st;

        if (strncmp(de->d_name, prefix, sizeof(prefix) - 1) != 0 ||
            fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT && r == 0)
            r = err_set(e, -errno, "cannot remove %s/%s: %s", dir, de->d_name, strerror(errno));
    }
    closedir(d);
    free(dir);
    /* what the records of those files say is now done */
    if (r == 0 && (r = probe_made_forget_dead(o->state_dir, PROBE_PLACE_OWN_SHARE)) < 0)
        r = err_set(e, r, "forgetting killed probes' files in %s/%s/%s: %s", o->state_dir,
                    PROBE_WORKDIR_SUBDIR, PROBE_MADE_SUBDIR, strerror(-r));
    return r;
}

/* The shadow serves the same shares on its own port of 127.0.0.1, and
 * the own share when there is no URL. */
static int shadow_url(struct place *p)
{
    struct url u;
    struct err e;
    int n;

    if (p->o->own_share) {
        n = snprintf(p->url, sizeof(p->url), "smb://127.0.0.1:%d/%s", p->shadow.port,
                     p->shadow.share);
        return n < 0 || (size_t)n >= sizeof(p->url) ? -ENAMETOOLONG : 0;
    }
    if (url_parse(p->o->probe.url, &u, &e) < 0)
        return -EINVAL;
    snprintf(u.host, sizeof(u.host), "127.0.0.1");
    u.port = (unsigned)p->shadow.port;
    return url_format(&u, "", p->url, sizeof(p->url)) < 0 ? -ENAMETOOLONG : 0;
}

static void told(struct place *p, int r)
{
    place_fn done = p->done;

    p->done = NULL;
    done(p->ud, r, p->url, p->client);
    free(p->client);
    p->client = NULL;
}

static int spawn(struct place *p)
{
    char *base = shadow_base(p->o), *share = p->o->own_share ? own_share_dir(p->o) : NULL;
    struct err e;
    int r;

    r = base == NULL || (p->o->own_share && share == NULL) ? err_set(&e, -ENOMEM, "out of memory")
                                                           : 0;
    if (r == 0 && share != NULL)
        r = own_share_make(share, &e);
    if (r == 0)
        r = trial_shadow_spawn(p->o->smb_conf, base, p->value, share, &p->shadow, &e);
    free(base);
    free(share);
    if (r < 0) {
        report_error("shadow", NULL, "shadow smbd: %s", e.msg);
        return r;
    }
    p->up = true;
    p->starting = true;
    p->deadline = child_now() + SHADOW_READY_S;
    return 0;
}

static int on_poll(sd_event_source *src, uint64_t usec, void *ud)
{
    struct place *p = ud;
    struct err e;
    int r;

    r = trial_shadow_poll(&p->shadow, &e);
    if (r == 0 && child_now() < p->deadline) {
        /* a timer that fired is off: arm it again */
        r = sd_event_source_set_time_relative(src, (uint64_t)(SHADOW_POLL_S * 1e6));
        if (r >= 0)
            r = sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
        if (r >= 0)
            return 0;
        /* the waiter must hear of it, or it waits for ever */
        report_error("shadow", NULL, "shadow smbd: cannot poll it: %s", strerror(-r));
        p->timer = sd_event_source_disable_unref(p->timer);
        shadow_stop(p);
        told(p, r);
        return 0;
    }
    p->timer = sd_event_source_disable_unref(p->timer);
    if (r == 1) {
        p->starting = false;
        free(p->value);
        p->value = NULL;
        told(p, shadow_url(p));
        return 0;
    }
    if (r == 0)
        r = err_set(&e, -ETIMEDOUT,
                    "shadow smbd (%s, port %d) not listening after %.0f s (its log: %s)",
                    p->shadow.conf, p->shadow.port, SHADOW_READY_S, p->shadow.log);
    retire(p);
    /* The port picked was taken meanwhile: another one. spawn() reports
     * its own failure. */
    if (r == -EADDRINUSE && ++p->attempt < TRIAL_PORT_ATTEMPTS) {
        r = spawn(p);
        if (r < 0) {
            shadow_stop(p);
            told(p, r);
            return 0;
        }
        r = sd_event_add_time_relative(p->ev, &p->timer, CLOCK_MONOTONIC,
                                       (uint64_t)(SHADOW_POLL_S * 1e6), 10000, on_poll, p);
        if (r >= 0)
            return 0;
        err_set(&e, r, "cannot poll it: %s", strerror(-r));
    }
    /* The last attempt's port clash, too, is said. */
    report_error("shadow", NULL, "shadow smbd: %s", e.msg);
    shadow_stop(p);
    told(p, r);
    return 0;
}

/* Deliver a placement that needed nothing started, from the loop. */
static int on_ready(sd_event_source *src, uint64_t usec, void *ud)
{
    struct place *p = ud;

    p->timer = sd_event_source_disable_unref(p->timer);
    told(p, 0);
    return 0;
}

/* on_ready from the loop, at once: an accuracy of 0 would be sd-event's
 * default of 250 ms. */
static int soon(struct place *p)
{
    return sd_event_add_time_relative(p->ev, &p->timer, CLOCK_MONOTONIC, 0, 1, on_ready, p);
}

int place_put(struct place *p, const char *base, struct search_config c, place_fn done, void *ud)
{
    int r;

    if (p->done != NULL)
        return -EBUSY;
    p->done = done;
    p->ud = ud;
    if (p->o->trials == TUNER_CLIENT) {
        const char *cbase =
            p->o->probe.socket_options ? p->o->probe.socket_options : PROBE_DEFAULT_SOCKET_OPTIONS;

        /* the probe's own client socket carries c */
        snprintf(p->url, sizeof(p->url), "%s", p->o->probe.url);
        p->client = sockopts_with(cbase, c.rcvbuf, c.sndbuf);
        r = p->client ? soon(p) : -ENOMEM;
        if (r < 0)
            place_down(p);
        return r;
    }
    if (p->up && !p->starting && p->cfg.rcvbuf == c.rcvbuf && p->cfg.sndbuf == c.sndbuf) {
        r = shadow_url(p);
        if (r < 0) {
            p->done = NULL;
            return r;
        }
        return soon(p);
    }
    shadow_stop(p);
    if (retiring_count(p) >= RETIRING_MAX) {
        report_error("shadow", NULL,
                     "%d shadow smbds have not stopped yet (smbd does not heed SIGTERM, or hangs "
                     "in I/O): no new one until they are gone",
                     retiring_count(p));
        p->done = NULL;
        return -EAGAIN;
    }
    p->value = sockopts_with(base, c.rcvbuf, c.sndbuf);
    p->cfg = c;
    p->attempt = 0;
    r = p->value ? spawn(p) : -ENOMEM;
    if (r == 0)
        r = sd_event_add_time_relative(p->ev, &p->timer, CLOCK_MONOTONIC,
                                       (uint64_t)(SHADOW_POLL_S * 1e6), 10000, on_poll, p);
    if (r < 0)
        place_down(p);
    return r;
}
