/* conf_check: see conf_check.h. */
#include "conf_check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "creds.h"
#include "files.h"
#include "smbconf.h"

/* Under the unit's sandbox (ProtectSystem=strict) the service writes only
 * where ReadWritePaths= lets it: a socket options line in a file of
 * another directory (an include under /srv) would be found read-only at
 * the first commit, after a whole search. Said at the start, on SIGHUP
 * and by -t (which ExecReload= runs in the sandbox) instead; tune mode
 * only (advise writes nothing). The directory is the one the editor
 * writes in: the file's real path's (smb.conf may be a link). Only
 * EROFS: a permission error is the editor's to report, in its words. */
int conf_check_writable(const struct tuner_opts *o, const struct smbconf *c, struct err *e)
{
    const char *file;
    char *real, *slash;
    int r = 0;

    if (o->mode != TUNER_TUNE)
        return 0;
    file = c->found ? c->files[c->hit.file].path : o->smb_conf;
    real = realpath(file, NULL);
    if (real != NULL && (slash = strrchr(real, '/')) != NULL) {
        *(slash == real ? slash + 1 : slash) = '\0';
        if (access(real, W_OK) < 0 && errno == EROFS)
            r = err_set(e, -EROFS,
                        "%s: its directory %s is read-only here, so the socket options line "
                        "cannot be written: under systemd, add ReadWritePaths=%s in a drop-in "
                        "(systemctl edit smbtuned), or set tune { mode = \"advise\" }",
                        file, real, real);
    }
    free(real);
    return r;
}

/* One read of smb.conf for both checks: a file edited between two reads
 * could pass each on different bytes. */
int conf_check(const struct tuner_opts *o, struct err *e)
{
    struct smbconf c;
    int r;

    r = smbconf_load(&c, o->smb_conf, e);
    if (r < 0)
        return r;
    r = conf_check_writable(o, &c, e);
    smbconf_free(&c);
    return r;
}

/* What the job tells its parent. */
struct answer {
    int r;
    struct err e;
};

static int check_job(void *arg, int out_fd)
{
    const struct conf_check *c = arg;
    struct answer a = {0};

    a.r = conf_check(c->o, &a.e);
    /* (its own child parses it: no byte of a password reaches this one) */
    if (a.r == 0 && c->o->probe.credentials != NULL)
        a.r = creds_check(c->o->probe.credentials, 0, &a.e);
    return files_write_all(out_fd, &a, sizeof(a));
}

static void check_done(struct job *j, const struct job_result *jr, void *ud)
{
    struct conf_check *c = ud;
    const struct answer *a = (const void *)jr->data;
    char msg[sizeof(a->e.msg) + 256];
    int r;

    (void)j;
    c->job = NULL;
    if (jr->ok && jr->len == sizeof(*a)) {
        r = a->r;
        snprintf(msg, sizeof(msg), "%.*s", (int)sizeof(a->e.msg), a->e.msg);
    } else {
        r = jr->timed_out ? -ETIMEDOUT : jr->error < 0 ? jr->error : -EIO;
        snprintf(msg, sizeof(msg), "%s: checking it%s: the check %s", c->o->smb_conf,
                 c->o->probe.credentials != NULL ? " and the credentials file" : "",
                 jr->unreaped    ? "was killed and has not ended (a file it reads, an "
                                   "include, on a hung mount?)"
                 : jr->timed_out ? "did not finish within its deadline (a file it reads, an "
                                   "include, on a hung mount?)"
                 : jr->error < 0 ? "ended, its answer not collected"
                                 : "failed");
    }
    c->done(c->ud, r, msg);
}

int conf_check_start(struct conf_check *c, sd_event *ev, const struct tuner_opts *o,
                     double deadline_s, conf_check_fn done, void *ud, struct err *e)
{
    if (c->job != NULL)
        return err_set(e, -EBUSY, "checking %s: a check is under way", o->smb_conf);
    c->o = o;
    c->done = done;
    c->ud = ud;
    return job_start(ev, check_job, c, deadline_s, check_done, c, &c->job, e);
}

void conf_check_cancel(struct conf_check *c)
{
    job_cancel(c->job);
    c->job = NULL;
}
