/* smbconf_io: the write side of the editor. Lock, backup, atomic replace,
 * and Samba's own parser (testparm, smbconf_disk.c) as the judge before
 * and after. */
#include "child.h"
#include "files.h"
#include "journal.h"
#include "smbconf.h"
#include "smbconf_int.h"
#include "sockopts.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCK_NAME "smbconf.lock"
#define LOCK_WAIT_S 10.0

/* Serialise editors on a file of our own: a lock on smb.conf itself would
 * be lost at the rename. Released by the kernel when we die. make: the
 * state directory is made when missing (the backups go in it, and root
 * writes them); without it, -ENOENT. */
static int take_lock(const char *state_dir, bool make, struct err *e)
{
    char path[PATH_MAX];
    int r;

    r = files_private_dir(state_dir, make ? FILES_DIR_MAKE : 0, e);
    if (r < 0)
        return r;
    close(r);
    snprintf(path, sizeof(path), "%s/" LOCK_NAME, state_dir);
    return files_lock(path, LOCK_WAIT_S, e);
}

int smbconf_lock(const char *state_dir, struct err *e)
{
    return take_lock(state_dir, false, e);
}

/* A file name for the backup of the file at real (an absolute path): the
 * path with `%` written as %25 and `/` as %2F (after the leading one), as
 * in a URL. Every `%` starts an escape, so the encoding can be read back
 * and two paths never share a name (`/a/b.conf` is a%2Fb.conf,
 * `/a_b.conf` is a_b.conf). NULL when out of memory. */
char *smbconf_backup_name(const char *real)
{
    size_t n = 0;
    char *out, *o;

    for (const char *s = real + 1; *s; s++)
        n += *s == '/' || *s == '%' ? 3 : 1;
    out = malloc(n + 1);
    if (out == NULL)
        return NULL;
    o = out;
    for (const char *s = real + 1; *s; s++) {
        if (*s == '/' || *s == '%') {
            sprintf(o, "%%%02X", (unsigned char)*s);
            o += 3;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
    return out;
}

void smbconf_backup_sweep(const char *state_dir)
{
    char path[PATH_MAX];
    struct err e;
    int lock;

    /* Under the edit lock, not waited for: an editor holding it (an
     * `smbtuned --set-buffers`) may be writing a backup right now, and
     * the next start sweeps what this one leaves. */
    if ((size_t)snprintf(path, sizeof(path), "%s/" LOCK_NAME, state_dir) >= sizeof(path))
        return;
    lock = files_lock(path, 0, &e);
    if (lock < 0)
        return;
    if ((size_t)snprintf(path, sizeof(path), "%s/backup/first", state_dir) < sizeof(path)) {
        files_sweep_tmp_dir(path);
        path[strlen(path) - strlen("/first")] = '\0';
        files_sweep_tmp_dir(path);
    }
    close(lock);
}

/* The previous bytes of a file, kept in the state directory under a name
 * made from the file's path: in backup/ those before our last write that
 * replaced no line of ours on trial, and in backup/first/ those before
 * our first, never overwritten (the last alone would lose the admin's own
 * line at our second write). A take-back, a trial after a trial and the
 * commit after trials keep none (replace_file's `ours`): the bytes they
 * replace are a trial's, and backup/ keeps those before the first. */
static int backup(const char *state_dir, const char *real, const struct smbconf_file *f,
                  struct err *e)
{
    char path[PATH_MAX], first[PATH_MAX], *name;
    struct stat sb;
    size_t n;
    int r;

    /* backup/ and backup/first/ are ours: never through a link. */
    snprintf(path, sizeof(path), "%s/backup", state_dir);
    r = files_private_dir(path, FILES_DIR_MAKE | FILES_DIR_OWN, e);
    if (r < 0)
        return r;
    close(r);
    n = (size_t)snprintf(path, sizeof(path), "%s/backup/first", state_dir);
    r = files_private_dir(path, FILES_DIR_MAKE | FILES_DIR_OWN, e);
    if (r < 0)
        return r;
    close(r);
    name = smbconf_backup_name(real);
    if (name == NULL)
        return err_set(e, -ENOMEM, "out of memory");
    if (n + strlen(name) + 2 >= sizeof(path) || strlen(name) > NAME_MAX) {
        free(name);
        return err_set(e, -ENAMETOOLONG,
                       "cannot back up %s: its path is too long for a file "
                       "name in %s",
                       real, path);
    }
    if (snprintf(first, sizeof(first), "%s/%s", path, name) >= (int)sizeof(first)) {
        free(name); /* not reached: checked above */
        return err_set(e, -ENAMETOOLONG, "cannot back up %s: its path is too long", real);
    }
    n -= strlen("/first");
    snprintf(path + n, sizeof(path) - n, "/%s", name);
    free(name);
    r = files_write_atomic(path, f->buf, f->len, NULL);
    if (r < 0)
        return err_set(e, r, "cannot write backup %s: %s", path, strerror(-r));
    /* Anything already there (even a link: not followed) is the first. */
    if (lstat(first, &sb) < 0 && errno == ENOENT) {
        r = files_write_atomic(first, f->buf, f->len, NULL);
        if (r < 0)
            return err_set(e, r, "cannot write backup %s: %s", first, strerror(-r));
    }
    return 0;
}

/* files_target_sweep's report of a temporary file it kept next to the
 * target ctx: someone else's file under our name, most likely the admin's
 * edit that a run of ours, killed between its exchange and the exchange
 * back, left there (files.h, FILES_TMP_PREFIX). Only the admin can tell
 * which bytes are right, so it is said, not resolved; again at every
 * edit and every undo (sweep_edited) until the file is gone. */
static void say_kept(void *ctx, const char *name)
{
    const struct files_target *t = ctx;

    journal_log(LOG_WARNING,
                "%s: kept %.*s%s, left by an interrupted edit of smbtuned's but holding a "
                "file that is not smbtuned's (perhaps an edit of yours): compare it with %s "
                "and remove it",
                t->path, (int)(t->base - t->path), t->path, name, t->path);
}

/* Replace f's file with data, but only while it still holds the bytes we
 * parsed (compare-and-set against an admin's editor). A symlink is written
 * through: its target is replaced, the link stays. The path is resolved
 * once and every step after it (the check, the sweep, the write) is
 * relative to the file's directory, opened without following links: a
 * user who owns a directory on an include's path cannot swap in a symlink
 * and make root write elsewhere (files_target). With ours (taking our own
 * change back, or a write over a trial of ours) no backup is written: the
 * bytes it replaces are ours (the state file records them), and a backup
 * now would overwrite the admin's original bytes, kept by the first
 * trial's write, with a trial's. */
static int replace_file(const char *state_dir, const struct smbconf_file *f, const char *data,
                        size_t len, bool ours, struct err *e)
{
    struct files_target t;
    char *now;
    size_t nowlen;
    int r;

    r = files_target_open(&t, f->path, e);
    if (r < 0)
        return r;
    /* A new file renamed over one name of a hard-linked file would leave
     * the other names with the old bytes: smbd and the admin would read
     * different files. Refuse before anything is written. */
    if (t.st.st_nlink > 1) {
        r = err_set(e, -EMLINK,
                    "%s has %ju hard links: smbtuned replaces the file by a rename, which "
                    "would split them (the other names would keep the old bytes): nothing "
                    "written; make it a single file or a symlink",
                    t.path, (uintmax_t)t.st.st_nlink);
        goto out;
    }
    r = files_target_read(&t, &now, &nowlen, e);
    if (r < 0)
        goto out;
    r = nowlen == f->len && memcmp(now, f->buf, nowlen) == 0;
    free(now);
    if (!r) {
        r = err_set(e, -ESTALE, "%s changed on disk while smbtuned was editing it: nothing written",
                    f->path);
        goto out;
    }
    /* A run of ours killed mid-write left its temp file here; only here,
     * once the file is known to be the one we parsed: files we only read
     * are not ours to clean (the lock is ours). What it keeps is not told
     * again: every write follows sweep_edited of the same file, in the
     * same prepare or revert, which told it (once an edit, not twice). */
    files_target_sweep(&t, NULL, NULL);
    if (!ours && (r = backup(state_dir, t.path, f, e)) < 0)
        goto out;
    r = files_target_replace(&t, data, len, f->buf, f->len);
    if (r == -ESTALE)
        r = err_set(e, r,
                    "%s was replaced or changed on disk while smbtuned was editing it: "
                    "nothing written",
                    t.path);
    else if (r == FILES_SWAPPED_OUT)
        r = err_set(
            e, r,
            "%s changed on disk while smbtuned was writing it, and putting the changed "
            "file back failed: it holds smbtuned's new bytes, and the changed file (perhaps "
            "an edit of yours) is kept next to it as " FILES_TMP_PREFIX "%s.*: compare "
            "the two",
            t.path, t.base);
    else if (r < 0)
        r = err_set(e, r,
                    "cannot replace %s (nothing written: it keeps its old bytes, "
                    "owner, mode and extended attributes): %s",
                    t.path, strerror(-r));
out:
    files_target_close(&t);
    return r;
}

static int write_edit(const char *state_dir, const struct smbconf *c, const char *file,
                      const char *data, size_t len, bool ours, struct err *e)
{
    int i = smbconf_file_index(c, file);

    if (i < 0)
        return err_set(e, -ENOENT, "%s is not part of the configuration", file);
    return replace_file(state_dir, &c->files[i], data, len, ours, e);
}

/* A run of ours killed between the exchange and the unlink leaves the old
 * file as a temp file next to the file it edits, which may already hold
 * the new bytes (then nothing is written again): sweep next to the file
 * that holds our line (or, with none, the main file), the file an edit
 * writes. Never next to files we only read: they are not ours to clean. */
static void sweep_edited(const struct smbconf *c)
{
    struct files_target t;

    if (c->nfiles == 0 ||
        files_target_open(&t, c->files[c->found ? c->hit.file : 0].path, NULL) < 0)
        return;
    files_target_sweep(&t, say_kept, &t);
    files_target_close(&t);
}

bool smbconf_refused(int r)
{
    return r < 0 && r != -ENOMEM;
}

/* The configuration as the undo sees it when its parse refused it (why):
 * ed->file alone, with no line known to be in force. */
static int load_unread(struct smbconf *c, const struct smbconf_edit *ed, struct err *e)
{
    int r;

    memset(c, 0, sizeof(*c));
    c->files = calloc(1, sizeof(*c->files));
    if (c->files == NULL)
        return err_set(e, -ENOMEM, "out of memory");
    c->nfiles = 1;
    c->files[0].path = strdup(ed->file);
    if (c->files[0].path == NULL) {
        smbconf_free(c);
        return err_set(e, -ENOMEM, "out of memory");
    }
    r = files_read(ed->file, &c->files[0].buf, &c->files[0].len, e);
    if (r < 0)
        smbconf_free(c);
    return r;
}

char *smbconf_ours_value(const struct smbconf_edit *ed)
{
    struct smbconf c;
    char *v = NULL;

    if (load_unread(&c, ed, NULL) < 0)
        return NULL;
    if (smbconf_holds_ours(&c, ed))
        v = smbconf_edit_value(ed);
    smbconf_free(&c);
    return v;
}

static int revert_locked(const char *path, const char *state_dir, const struct smbconf_edit *ed,
                         struct err *e)
{
    struct smbconf c;
    struct err why = {{0}};
    bool unread = false;
    char *out = NULL;
    size_t outlen;
    int r;

    r = smbconf_load_undo(&c, path, e);
    /* Someone made the configuration one the editor refuses since our
     * edit (a relative include, a registry backend, a line Samba cannot
     * load): which line is in force is unknown, but ours, where ed->file
     * still holds it as we wrote it, goes back to what it replaced all the
     * same, as a shadowed one does: that is right whatever is in force,
     * and left there a trial would stay in smbd for every client, the
     * take-back failing the same way at every cycle. The caller holds off
     * (SMBCONF_UNDONE_UNREAD): the file is the admin's to put right. The
     * same where a file of it cannot be read (smbconf_refused). */
    if (smbconf_refused(r)) {
        if (e != NULL)
            why = *e;
        unread = true;
        r = load_unread(&c, ed, e);
        if (r == -ENOENT)
            r = err_set(e, -ECANCELED,
                        "%s, where smbtuned wrote its socket options line, is gone; the "
                        "configuration now holds what smbtuned cannot follow: %s",
                        ed->file, why.msg);
    }
    if (r < 0)
        return r;
    /* A run killed between the temp file and its rename left the temp
     * file: the undo finds the old bytes (-EALREADY) and writes nothing,
     * so it sweeps here, as an edit does. */
    sweep_edited(&c);
    r = smbconf_unrender(&c, ed, &out, &outlen, e);
    if (unread && r == SMBCONF_UNDONE_SHADOWED) {
        r = SMBCONF_UNDONE_UNREAD;
        err_set(e, 0,
                "%s: the socket options line smbtuned wrote was taken back; the configuration "
                "now holds what smbtuned cannot follow: %s",
                ed->file, why.msg);
    } else if (unread && r == -ECANCELED) {
        err_set(e, r,
                "%s: the socket options line smbtuned wrote is not there as it wrote it: "
                "leaving the file as it is; the configuration now holds what smbtuned cannot "
                "follow: %s",
                ed->file, why.msg);
    }
    if (r >= 0) {
        struct err said = {{0}};
        int w;

        if (e != NULL)
            said = *e;
        w = write_edit(state_dir, &c, ed->file, out, outlen, true, e);
        /* the shadowed (or unread) take-back's reason stays, once written */
        if (w < 0)
            r = w;
        else if (r > 0 && e != NULL)
            *e = said;
    }
    free(out);
    smbconf_free(&c);
    return r;
}

int smbconf_revert(const char *path, const char *state_dir, const struct smbconf_edit *ed,
                   struct err *e)
{
    int lock = take_lock(state_dir, true, e);
    int r;

    if (lock < 0)
        return lock;
    r = revert_locked(path, state_dir, ed, e);
    close(lock);
    return r;
}

/* The first step, under the lock: read, agree with Samba, compare, render. */
static int prepare_locked(struct smbconf_plan *pl, const struct smbconf_change *ch,
                          struct smbconf_result *res, struct err *e)
{
    struct smbconf *c = &pl->c;
    char *judge = NULL;
    int r;

    r = smbconf_load(c, pl->path, e);
    if (r < 0)
        return r;
    pl->loaded = true;
    sweep_edited(c);
    res->old_value = strdup(c->value);
    if (smbconf_notes_copy(c, &res->notes, &res->nnotes) < 0) {
        r = err_set(e, -ENOMEM, "out of memory");
        goto out;
    }
    if (c->found) {
        res->file = strdup(c->files[c->hit.file].path);
        res->line = c->hit.line;
    }
    /* Our reading must be Samba's: otherwise we would edit the wrong line. */
    r = smbconf_testparm(pl->path, "socket options", &judge, e);
    if (r < 0)
        goto out;
    if (!sockopts_same(judge, c->value)) {
        r = err_set(e, -EPROTO,
                    "%s: Samba's testparm reads socket options differently from smbtuned: not "
                    "changing anything; smbtuned reads '%s'%s, testparm reports '%s'",
                    pl->path, c->value, c->found ? " from the line it found" : " (none set)",
                    judge);
        goto out;
    }
    if (ch->expect != NULL && !sockopts_same(ch->expect, c->value)) {
        if (c->found)
            r = err_set(e, -ECANCELED,
                        "%s:%d: socket options is not the expected value (edited by someone "
                        "else?): nothing written; it is '%s', expected '%s'",
                        c->files[c->hit.file].path, c->hit.line, c->value, ch->expect);
        else
            r = err_set(e, -ECANCELED,
                        "%s: socket options is not the expected value (edited by someone "
                        "else?): nothing written; it is '%s' (not set), expected '%s'",
                        pl->path, c->value, ch->expect);
        goto out;
    }
    res->new_value = sockopts_with(c->value, ch->rcvbuf, ch->sndbuf);
    if (res->new_value == NULL || res->old_value == NULL) {
        r = err_set(e, -ENOMEM, "out of memory");
        goto out;
    }
    /* Already so (or, with no line, Samba's default): leave every byte. */
    if (strcmp(res->new_value, c->value) == 0)
        goto out;
    r = smbconf_render(c, res->new_value, &pl->out, &pl->outlen, &res->edit, e);
    if (r == 0)
        res->changed = true; /* to be: smbconf_write makes it so, or clears it */
out:
    free(judge);
    return r;
}

int smbconf_prepare(const char *path, const char *state_dir, const struct smbconf_change *ch,
                    struct smbconf_plan *pl, struct smbconf_result *res, struct err *e)
{
    int r;

    memset(res, 0, sizeof(*res));
    memset(pl, 0, sizeof(*pl));
    pl->path = path;
    pl->state_dir = state_dir;
    pl->over_trial = ch->over_trial;
    pl->lock = take_lock(state_dir, true, e);
    if (pl->lock < 0) {
        r = pl->lock;
        pl->lock = -1;
        return r;
    }
    r = prepare_locked(pl, ch, res, e);
    if (r < 0)
        smbconf_plan_free(pl);
    return r;
}

/* The check after a write, under the lock: Samba's testparm must read
 * value from path, or our line is taken back. 0, or the check's error with
 * e saying what happened to smb.conf first (the reason after it may carry
 * long values and be cut); *undone when the old line is back. */
static int judge_or_undo(const char *path, const char *state_dir, const struct smbconf_edit *ed,
                         const char *value, bool *undone, int *how, struct err *e)
{
    char *judge = NULL;
    struct err why, e2 = {{0}};
    int r, r2;

    *undone = false;
    r = smbconf_testparm(path, "socket options", &judge, e);
    if (r == 0 && !sockopts_same(judge, value))
        r = err_set(e, -EPROTO,
                    "%s: after the change Samba's testparm reports '%s' instead of "
                    "'%s'",
                    path, judge, value);
    free(judge);
    if (r == 0)
        return 0;
    why = *e;
    r2 = revert_locked(path, state_dir, ed, &e2);
    /* SMBCONF_UNDONE_SHADOWED: someone added a line of their own after
     * ours while testparm ran (or, _UNREAD, made the file one the editor
     * refuses); ours went back to what it replaced all the same. */
    *undone = r2 == 0 || r2 == -EALREADY || r2 > 0;
    *how = r2;
    if (r2 > 0)
        err_set(e, r, "the change was taken back (%s): %s", e2.msg, why.msg);
    else if (*undone)
        err_set(e, r, "the change was taken back, the old line is restored: %s", why.msg);
    else
        err_set(e, r, "the change was written and restoring the old line failed (%s): %s", e2.msg,
                why.msg);
    return r;
}

int smbconf_write(struct smbconf_plan *pl, struct smbconf_result *res, struct err *e)
{
    bool undone;
    int r, how;

    if (!res->changed)
        return 0; /* nothing to write */
    res->changed = false;
    r = write_edit(pl->state_dir, &pl->c, res->edit.file, pl->out, pl->outlen, pl->over_trial, e);
    if (r < 0)
        return r;
    res->changed = true;
    r = judge_or_undo(pl->path, pl->state_dir, &res->edit, res->new_value, &undone, &how, e);
    if (r < 0) {
        res->changed = !undone;
        return r;
    }
    if (!pl->c.found) {
        /* Report where the line went: parse what we wrote. */
        struct smbconf c2;

        if (smbconf_load(&c2, pl->path, NULL) == 0 && c2.found) {
            free(res->file);
            res->file = strdup(c2.files[c2.hit.file].path);
            res->line = c2.hit.line;
        }
        if (c2.nfiles)
            smbconf_free(&c2);
    }
    return 0;
}

int smbconf_confirm(const char *path, const char *state_dir, const struct smbconf_edit *ed,
                    const char *value, bool *checked, bool *undone, int *how, struct err *e)
{
    int lock = take_lock(state_dir, true, e);
    int r;

    *checked = *undone = false;
    *how = 0;
    if (lock < 0)
        return lock;
    *checked = true;
    r = judge_or_undo(path, state_dir, ed, value, undone, how, e);
    close(lock);
    return r;
}

void smbconf_plan_free(struct smbconf_plan *pl)
{
    free(pl->out);
    pl->out = NULL;
    if (pl->loaded)
        smbconf_free(&pl->c);
    pl->loaded = false;
    if (pl->lock >= 0)
        close(pl->lock);
    pl->lock = -1;
}

void smbconf_result_free(struct smbconf_result *res)
{
    smbconf_notes_free(res->notes, res->nnotes);
    free(res->file);
    free(res->old_value);
    free(res->new_value);
    smbconf_edit_free(&res->edit);
    memset(res, 0, sizeof(*res));
}
