/* state: the state file on disk (see state.h): load it, keeping a
 * damaged one aside, save it, and the lock around a load-modify-save; and
 * the edits to a state that more than one caller makes. Its text is
 * state_text.c's. */
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "files.h"
#include "journal.h"

#define STATE_FILE "state"
/* How long a save waits for a --resume (or a daemon's end of cycle) that
 * holds the state lock: both hold it for a load and a save, milliseconds
 * (state_lock). */
#define STATE_LOCK_WAIT_S 10.0
#define STATE_LOCK_FILE "state.lock"
/* Copies of damaged files kept aside in one second before we give up. */
#define ASIDE_TRIES 1000

int state_set_str(char **dst, const char *src)
{
    char *c = NULL;

    if (src != NULL && (c = strdup(src)) == NULL)
        return -ENOMEM;
    free(*dst);
    *dst = c;
    return 0;
}

void state_unconverge(struct state *st)
{
    st->converged = false;
    st->ref_channels = 0;
    for (int i = 0; i < 2; i++) {
        st->ref_rate[i] = st->ref_n[i] = 0;
        st->ref_mbps[i] = st->ref_ss[i] = st->ref_df[i] = st->ref_reject[i] = 0;
    }
    state_set_str(&st->ref_settings, NULL);
    state_set_str(&st->ref_recent, NULL);
    state_set_str(&st->advice, NULL);
    st->advice_rcvbuf = st->advice_sndbuf = 0;
    st->advised_from_rcvbuf = st->advised_from_sndbuf = 0;
}

void state_end_hold(struct state *s)
{
    s->hold = false;
    state_set_str(&s->hold_reason, NULL);
    state_set_str(&s->last_written, NULL);
    s->written_at = 0;
    state_unconverge(s);
    s->have_incumbent = false;
    s->rcvbuf = s->sndbuf = 0;
    s->write_mbps = s->read_mbps = 0;
}

/* Keep path aside as path.damaged-STAMP[-N], under a name that no earlier
 * file has: a hard link, so that path itself is only replaced once the
 * hold that names the copy is saved (a crash in between finds the damaged
 * file again, and keeps another copy). Where links are not supported, a
 * rename that refuses to replace. */
static int keep_aside(const char *path, char *aside, size_t len)
{
    char stamp[32];
    struct tm tm;
    time_t now = time(NULL);
    int r = -EEXIST;

    localtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
    for (int n = 0; n < ASIDE_TRIES && r == -EEXIST; n++) {
        int w = n == 0 ? snprintf(aside, len, "%s.damaged-%s", path, stamp)
                       : snprintf(aside, len, "%s.damaged-%s-%d", path, stamp, n);

        if (w < 0 || (size_t)w >= len)
            return -ENAMETOOLONG;
        r = link(path, aside) == 0 ? 0 : -errno;
        if (r == -EPERM || r == -EOPNOTSUPP || r == -EMLINK)
            r = renameat2(AT_FDCWD, path, AT_FDCWD, aside, RENAME_NOREPLACE) == 0 ? 0 : -errno;
    }
    return r;
}

/* dir/STATE_FILE into path: a truncated name would be another file. */
static int state_path(const char *dir, char *path, size_t len, struct err *e)
{
    int n = snprintf(path, len, "%s/" STATE_FILE, dir);

    if (n < 0 || (size_t)n >= len)
        return err_set(e, -ENAMETOOLONG, "state directory %s: name too long", dir);
    return 0;
}

/* The state file at path into s (zeroed first): 0, also when there is
 * none; else files_read's error or state_parse's (-EBADMSG: damaged), why
 * saying it. */
static int state_read(const char *path, struct state *s, struct err *why)
{
    char *text;
    size_t len;
    int r;

    memset(s, 0, sizeof(*s));
    r = files_read_own(path, &text, &len, why);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    r = state_parse(text, len, path, s, why);
    free(text);
    return r;
}

int state_peek(const char *dir, struct state *s, struct err *e)
{
    char path[PATH_MAX];
    int r = state_path(dir, path, sizeof(path), e);

    if (r < 0)
        return r;
    return state_read(path, s, e);
}

bool state_is_damage(int r)
{
    return r == -EBADMSG || r == -EINVAL || r == -EISDIR || r == -EFBIG || r == -EAGAIN;
}

int state_load(const char *dir, struct state *s, struct err *e)
{
    char path[PATH_MAX], aside[PATH_MAX + 64], *reason = NULL;
    struct err why = {{0}};
    int r;

    memset(s, 0, sizeof(*s));
    r = state_path(dir, path, sizeof(path), e);
    if (r < 0)
        return r;
    r = state_read(path, s, &why);
    /* A FIFO, directory, socket or device where the state file should be
     * (-EINVAL, -EISDIR; files_read opened it non-blocking and read
     * nothing), a file larger than any we write (-EFBIG) or one whose read
     * would block (-EAGAIN) is treated like a damaged file (-EBADMSG):
     * named, kept aside and held (state.h: damage never stops a start).
     * Renaming it aside is safe for any kind: it sits in our own 0700 state
     * dir, where nothing but smbtuned has business, and is kept intact
     * under the .damaged name, never opened for writing or removed. */
    if (state_is_damage(r))
        r = -EBADMSG;
    if (r == 0)
        return 0;
    if (r != -EBADMSG)
        return err_set(e, r, "cannot read the state file: %s", why.msg);

    r = keep_aside(path, aside, sizeof(aside));
    if (r < 0)
        return err_set(e, r,
                       "%s; it cannot be kept aside (%s): not starting, smb.conf not "
                       "touched",
                       why.msg, strerror(-r));
    journal_log(LOG_ERR, "%s; kept as %s, smb.conf not touched", why.msg, aside);
    if (asprintf(&reason,
                 "the state file was damaged (%s); it is kept as %s. If a live "
                 "trial was under way, smb.conf may still hold its value: check the socket "
                 "options line, then `smbtuned --resume`",
                 why.msg, aside) < 0)
        return err_set(e, -ENOMEM, "out of memory");
    s->hold = true;
    s->hold_reason = reason;
    r = state_save(dir, s, e);
    if (r < 0)
        state_free(s);
    return r;
}

/* Held by this process (state_lock): a save inside does not lock again,
 * as a second flock through an open of its own would wait for ours. A
 * child forked meanwhile is not the holder: it locks for itself. */
static int held_fd = -1;
static pid_t held_pid;

static bool holding(void)
{
    return held_fd >= 0 && held_pid == getpid();
}

int state_lock(const char *dir, struct err *e)
{
    char path[PATH_MAX];
    int fd;

    if (holding())
        return err_set(e, -EDEADLK, "the state lock is taken twice");
    /* A file of its own: smbconf_io's edit lock cannot serve, since a job
     * saves the state while it holds that one; and not the directory,
     * which NFS cannot lock (its flock wants a file open for writing). */
    if ((size_t)snprintf(path, sizeof(path), "%s/" STATE_LOCK_FILE, dir) >= sizeof(path))
        return err_set(e, -ENAMETOOLONG, "state directory %s: name too long", dir);
    /* Not made here: no directory, no state (-ENOENT). */
    fd = files_private_dir(dir, 0, e);
    if (fd < 0)
        return fd;
    close(fd);
    fd = files_lock(path, STATE_LOCK_WAIT_S, e);
    if (fd < 0)
        return fd;
    held_fd = fd;
    held_pid = getpid();
    return 0;
}

int state_sweep_tmp(const char *dir, struct err *e)
{
    char path[PATH_MAX];
    int r = state_path(dir, path, sizeof(path), e);

    if (r < 0)
        return r;
    r = state_lock(dir, e);
    if (r < 0)
        return r;
    files_sweep_tmp(path);
    state_unlock();
    return 0;
}

void state_unlock(void)
{
    if (holding())
        close(held_fd);
    held_fd = -1;
}

int state_save(const char *dir, const struct state *s, struct err *e)
{
    char path[PATH_MAX], *text;
    bool mine = !holding();
    int r;

    if (s->unread)
        return err_set(e, -ESTALE,
                       "%s/" STATE_FILE " not saved: it could not be read this cycle, and what "
                       "it holds (a hold, a live trial's record) stays as it is",
                       dir);
    if (mine && (r = state_lock(dir, e)) < 0)
        return r;
    text = state_format(s);
    if (text == NULL) {
        r = err_set(e, -ENOMEM, "out of memory");
        goto out;
    }
    r = state_path(dir, path, sizeof(path), e);
    if (r == 0) {
        r = files_write_atomic(path, text, strlen(text), NULL);
        if (r < 0)
            err_set(e, r, "cannot write %s: %s", path, strerror(-r));
    }
    free(text);
out:
    if (mine)
        state_unlock();
    return r < 0 ? r : 0;
}
