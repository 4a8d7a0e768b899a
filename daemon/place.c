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
#include "sockopts.h"
#include "trial.h"
#include "url.h"

/* A shadow smbd must serve within this; a healthy one takes about 1 s. */
#define SHADOW_READY_S 30.0
/* How often a starting shadow is asked whether it serves. */
#define SHADOW_POLL_S 0.1

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

static void shadow_stop(struct place *p)
{
    struct err e;

    p->timer = sd_event_source_disable_unref(p->timer);
    free(p->value);
    p->value = NULL;
    p->starting = false;
    if (!p->up)
        return;
    if (trial_shadow_stop(&p->shadow, &e) < 0)
        journal_log(LOG_WARNING, "stopping the shadow smbd: %s", e.msg);
    p->up = false;
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
    trial_shadow_stop(&p->shadow, NULL);
    p->up = false;
    /* The port picked was taken meanwhile: another one. */
    if (r == -EADDRINUSE && ++p->attempt < TRIAL_PORT_ATTEMPTS && spawn(p) == 0) {
        r = sd_event_add_time_relative(p->ev, &p->timer, CLOCK_MONOTONIC,
                                       (uint64_t)(SHADOW_POLL_S * 1e6), 10000, on_poll, p);
        if (r >= 0)
            return 0;
        report_error("shadow", NULL, "shadow smbd: cannot poll it: %s", strerror(-r));
    }
    if (r != -EADDRINUSE)
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
