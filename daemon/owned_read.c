/* owned_read: the line in force, read in a job (a part of the owned
 * module, see owned.h).
 *
 * smb.conf and its includes are read as Samba reads them, which opens
 * every file an include names and globs %-includes: on a hung NFS or
 * FUSE mount that blocks in the kernel, where no signal reaches it. In the
 * loop's own process it would stop the daemon (and its watchdog pings)
 * for as long as the mount hangs; in a job, the job is killed at its
 * deadline and the cycle fails, said. A read job writes nothing, so one
 * that does not end when killed takes no hold: the job module reaps it
 * later. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "job.h"
#include "journal.h"
#include "owned_int.h"
#include "smbconf.h"
#include "sockopts.h"

/* In the job: the value in force, where its line is, or why the files
 * could not be read. */
static int read_job(void *arg, int out_fd)
{
    struct owned *w = arg;
    struct smbconf c;
    struct err e = {{0}};
    struct reply *rep;
    size_t vlen = 0;
    int r;

    r = smbconf_load(&c, w->o->smb_conf, &e);
    if (r == 0)
        vlen = strlen(c.value);
    rep = calloc(1, sizeof(*rep) + vlen + 1);
    if (rep == NULL) {
        if (r == 0)
            smbconf_free(&c);
        return -ENOMEM;
    }
    rep->r = r;
    memcpy(rep->msg, e.msg, sizeof(rep->msg));
    if (r == 0) {
        if (c.found) {
            snprintf(rep->file, sizeof(rep->file), "%s", c.files[c.hit.file].path);
            rep->line = c.hit.line;
        }
        memcpy(rep + 1, c.value, vlen);
        smbconf_free(&c);
    }
    r = files_write_all(out_fd, rep, sizeof(*rep) + vlen + 1);
    free(rep);
    return r;
}

/* Our line as we last wrote it, or a hold: an admin's edit stands. */
static int check_ours(struct owned *w, const struct reply *rep, const char *value)
{
    char *why = NULL;
    int r;

    if (w->st->last_written == NULL || sockopts_same(value, w->st->last_written))
        return 0;
    /* Where and why first, the values (of any length) last: a reader or a
     * cut line keeps the reason. */
    if (rep->file[0] != '\0')
        r = asprintf(&why,
                     "%s:%d: socket options edited by hand: it is '%s', not '%s' as smbtuned "
                     "wrote it",
                     rep->file, rep->line, value, w->st->last_written);
    else
        r = asprintf(&why,
                     "%s: socket options edited by hand: it is '%s', not '%s' as smbtuned "
                     "wrote it",
                     w->o->smb_conf, value, w->st->last_written);
    owned_hold(w, r < 0 ? "socket options edited by hand (out of memory for the details)" : why);
    free(why);
    return -EPERM;
}

static void read_done(struct job *j, const struct job_result *jr, void *ud)
{
    struct owned *w = ud;
    const struct reply *rep = (const void *)jr->data;
    const char *value = NULL;
    char where[sizeof(rep->file) + 16];
    int r;

    (void)j;
    w->job = NULL;
    w->reading = false;
    where[0] = '\0';
    if (!jr->ok || jr->len < sizeof(*rep) + 1 || jr->data[jr->len - 1] != '\0') {
        r = jr->timed_out ? -ETIMEDOUT : jr->error < 0 ? jr->error : -EIO;
        owned_error(w, LOG_ERR, "%s: reading it: the job %s", w->o->smb_conf,
                    jr->unreaped    ? "was killed and has not ended (a file it reads, an "
                                      "include, on a hung mount?)"
                    : jr->timed_out ? "did not finish within its deadline (a file it reads, "
                                      "an include, on a hung mount?)"
                                    : "failed");
    } else if (rep->r < 0) {
        r = rep->r;
        owned_error(w, LOG_ERR, "%s", rep->msg);
    } else {
        value = (const char *)(rep + 1);
        r = check_ours(w, rep, value);
        if (rep->file[0] != '\0')
            snprintf(where, sizeof(where), "%s:%d", rep->file, rep->line);
        else
            snprintf(where, sizeof(where), "%s", w->o->smb_conf);
    }
    w->read_done(w->ud, r, r == 0 ? value : NULL, r == 0 ? where : NULL);
}

int owned_read(struct owned *w, owned_read_fn done, void *ud)
{
    struct err e;
    int r;

    w->error[0] = '\0';
    if (owned_refuse_while_stuck(w) < 0 || owned_busy(w))
        return -EBUSY;
    w->read_done = done;
    w->ud = ud;
    w->reading = true;
    r = job_start(w->ev, read_job, w, OWNED_JOB_DEADLINE_S, read_done, w, &w->job, &e);
    if (r < 0) {
        w->reading = false;
        owned_error(w, LOG_ERR, "reading %s: %s", w->o->smb_conf, e.msg);
    }
    return r;
}

const char *owned_last_error(const struct owned *w)
{
    return w->error;
}
