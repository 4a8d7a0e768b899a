/* smbconf: find the `socket options` line that Samba really uses, and
 * replace just its value.
 *
 * The parse follows Samba's own reader (lib/util/tini.c, source3/param):
 * whole-line comments, `\` continuations, collapsed blanks, parameter names
 * compared without case or whitespace, every spelling of the global
 * section, last occurrence wins, `include = FILE` read in place. Whatever
 * the editor cannot change safely (a registry backend, `config file =`, an
 * include whose name depends on the client and may carry the parameter) is
 * refused with the file and line, never guessed.
 *
 * The reader and the renderer are pure: files come through a reader
 * callback. smbconf.c walks the files (the line rules in smbconf_lex.c,
 * includes in smbconf_include.c, all three sharing smbconf_int.h);
 * smbconf_edit.c renders and takes back an edit. The part that touches the
 * disk (lock, backup, atomic write, testparm) is smbconf_io.c. */
#ifndef SMBTUNE_SMBCONF_H
#define SMBTUNE_SMBCONF_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/* How the parser reaches files. read: whole file, -ENOENT when missing
 * (Samba skips missing includes), the reason in e (naming the file) for
 * any failure. glob: the existing paths matching a shell pattern (for
 * includes with %-substitutions), '\' escaping the next character and a
 * '*' matching a leading '.' too. */
struct smbconf_io {
    int (*read)(void *ctx, const char *path, char **buf, size_t *len, struct err *e);
    int (*glob)(void *ctx, const char *pattern, char ***paths, size_t *n);
    void *ctx;
    /* Parsed to take our own change back: an include that leaves unknown
     * which line is in force is no refusal then. The undo only puts the
     * recorded bytes back where the file still holds ours
     * (smbconf_unrender), which is right whatever else is in force; a
     * trial refused that way would stay in smbd for every client. */
    bool undo;
};

struct smbconf_file {
    char *path; /* as named: the main path, or an include's value */
    char *buf;
    size_t len;
};

/* One logical line (a parameter with its continuation lines). */
struct smbconf_span {
    size_t file;  /* index into files */
    size_t start; /* first byte of its first physical line (indent included) */
    size_t end;   /* first byte of its line terminator, or the file's end */
    int line;     /* 1-based number of its first physical line */
};

/* A %-include that was accepted because no file it names today sets
 * socket options, opens a section or includes more: said to the admin,
 * since a file it names later could change that. */
struct smbconf_note {
    char *file; /* where the include is, as named */
    int line;
    char *include;    /* its value */
    const char *what; /* what a file it names later could do */
};

struct smbconf {
    struct smbconf_file *files; /* files[0] is the main file */
    size_t nfiles;
    bool found;
    struct smbconf_span hit; /* the occurrence in force, when found */
    char *value;             /* the value in force (Samba's default when none) */
    /* Where a new line goes when there is none: in the main file. */
    size_t insert_at;
    bool insert_header; /* no global section header: create `[global]` */
    /* What makes a new `[global]` header a mistake: no section header in
     * any file read, and lines in the main file that are neither a
     * parameter nor a comment: no smb.conf, a wrong path (/etc/hosts,
     * smbtuned's own config). */
    bool any_section; /* a `[section]` line in some file read */
    int other_line;   /* the first such line of files[0], 0: none */
    char indent[16];
    char eol[3];
    struct smbconf_note *notes; /* in reading order */
    size_t nnotes;
};

/* A change as it was made: enough to take it back later (also from a
 * state file after a crash) without touching anything else. */
struct smbconf_edit {
    char *file;      /* path of the changed file, as named */
    char *written;   /* the bytes put in */
    char *original;  /* the bytes they replaced ("" when a line was added) */
    size_t line_off; /* where the parameter line starts inside written */
    size_t line_len; /* and how long it is (without its line end) */
    /* A chained edit's line before its last step (NULL: none). A step is
     * recorded before it is written, so until then, or when it failed,
     * the file still holds this line where written has its own. */
    char *prev;
};

int smbconf_parse(struct smbconf *c, const char *path, const struct smbconf_io *io, struct err *e);
void smbconf_free(struct smbconf *c);

/* A copy of c's notes, for a result that outlives c. */
int smbconf_notes_copy(const struct smbconf *c, struct smbconf_note **out, size_t *n);
void smbconf_notes_free(struct smbconf_note *notes, size_t n);

/* New bytes for the file that carries (or will carry) the line, holding
 * `value`; *ed describes the change. */
int smbconf_render(const struct smbconf *c, const char *value, char **out, size_t *outlen,
                   struct smbconf_edit *ed, struct err *e);

/* New bytes for ed->file with the edit taken back, computed on a fresh
 * parse: 0 while the line in force is still exactly what we wrote (or,
 * for a chained edit, what its previous step wrote: ed->prev).
 * SMBCONF_UNDONE_SHADOWED (with out, and why in e) when another line is
 * in force (someone added a later one) and ours is still in the file as
 * we wrote it, once, a single parameter line: it is put back to what it
 * replaced (theirs stays in force; ours would otherwise come back into
 * force the day theirs goes). -EALREADY when the file holds the original
 * again (nothing to undo: the edit never reached the disk, or was
 * undone); -ECANCELED otherwise (our line was edited: theirs stands). */
#define SMBCONF_UNDONE_SHADOWED 1
int smbconf_unrender(const struct smbconf *c, const struct smbconf_edit *ed, char **out,
                     size_t *outlen, struct err *e);

/* Whether c's copy of ed->file holds the line ed wrote, as written, once
 * and as a whole line (wherever the line in force is). */
bool smbconf_holds_ours(const struct smbconf *c, const struct smbconf_edit *ed);

/* The value the line ed wrote sets (malloc'ed), or NULL. */
char *smbconf_edit_value(const struct smbconf_edit *ed);

void smbconf_edit_free(struct smbconf_edit *ed);

/* One edit that does what `first` then `next` did, when next rewrote the
 * line first had written (successive trial values): undoing it gives back
 * the bytes before first. out->prev is first's line. */
int smbconf_edit_chain(const struct smbconf_edit *first, const struct smbconf_edit *next,
                       struct smbconf_edit *out);

int smbconf_edit_copy(const struct smbconf_edit *src, struct smbconf_edit *dst);

/* Index of the file named `path` in c, or -1. */
int smbconf_file_index(const struct smbconf *c, const char *path);

/* --- on disk (smbconf_io.c) --- */

/* Parse the files as they are on disk now. */
int smbconf_load(struct smbconf *c, const char *path, struct err *e);

/* The name under STATE_DIR/backup/ of the backup of the file at real (an
 * absolute path): an injective encoding of the whole path. malloc'ed. */
char *smbconf_backup_name(const char *real);

/* The edit lock (STATE_DIR/smbconf.lock), which every write of smb.conf
 * by smbtuned holds, for a reader that must not see one half-way (a
 * commit written and its restart not yet decided): the fd to close, or
 * <0 with e set (-ENOENT: no state directory). Waits up to 10 s. */
int smbconf_lock(const char *state_dir, struct err *e);

/* Remove the temporary files a backup killed between its write and its
 * rename left in STATE_DIR/backup and backup/first (files.h), under the
 * edit lock; nothing when an editor holds it. */
void smbconf_backup_sweep(const char *state_dir);

/* The value of a global parameter according to Samba's own parser
 * (testparm), e.g. "socket options", "pid directory", "smb ports". */
int smbconf_testparm(const char *path, const char *param, char **value, struct err *e);

struct smbconf_change {
    const char *expect; /* the value the caller believes is in force; NULL: any */
    long rcvbuf;        /* SOCKOPTS_AUTO or a size */
    long sndbuf;
    /* The line in force is a trial of ours, recorded: the write keeps no
     * backup, so that backup/ keeps the bytes before the first trial. */
    bool over_trial;
};

struct smbconf_result {
    char *file; /* where the line is (as named); NULL: nowhere (Samba's default) */
    int line;
    char *old_value;
    char *new_value;
    bool changed;
    struct smbconf_edit edit;   /* valid when changed */
    struct smbconf_note *notes; /* the configuration's notes, as in struct smbconf */
    size_t nnotes;
};

/* Setting the buffers is two steps, so that a caller can record what it is
 * about to do between them (a crash after the write must find the record)
 * and nothing calls back up:
 *
 *   smbconf_prepare  under the lock in state_dir: read the files, check
 *                    that Samba's testparm reads the line as we do and that
 *                    it holds ch->expect, render the new bytes. res then
 *                    says what would change (res->changed, res->edit).
 *   smbconf_write    write them (a backup in state_dir, an atomic
 *                    replace), check with testparm after, restoring our
 *                    line when that check fails. Nothing to do when
 *                    !res->changed.
 *   smbconf_plan_free  releases the lock; after a failed prepare too.
 *
 * -ECANCELED: the value in force is not ch->expect; -ESTALE: a file
 * changed while we worked. Nothing is written in either case. */
struct smbconf_plan {
    int lock;
    bool loaded;
    struct smbconf c;
    char *out;
    size_t outlen;
    const char *path, *state_dir;
    bool over_trial; /* smbconf_change's */
};

int smbconf_prepare(const char *path, const char *state_dir, const struct smbconf_change *ch,
                    struct smbconf_plan *pl, struct smbconf_result *res, struct err *e);
int smbconf_write(struct smbconf_plan *pl, struct smbconf_result *res, struct err *e);
void smbconf_plan_free(struct smbconf_plan *pl);

/* Take an edit back (compare-and-set, see smbconf_unrender; returns
 * SMBCONF_UNDONE_SHADOWED, e saying why, when ours was taken back out of
 * force). When the configuration is now one the parse refuses or cannot
 * read (someone added a relative include, a registry backend, ...:
 * smbconf_refused),
 * our line, where ed->file still holds it as we wrote it, is put back all
 * the same: SMBCONF_UNDONE_UNREAD, e saying why; -ECANCELED when it is
 * not there as we wrote it (or ed->file is gone); -EALREADY when a line
 * the edit added is not there. */
#define SMBCONF_UNDONE_UNREAD 2
int smbconf_revert(const char *path, const char *state_dir, const struct smbconf_edit *ed,
                   struct err *e);

/* Whether smbconf_load's error r leaves the configuration one smbtuned
 * cannot follow: a refusal of what the files say (smbconf.h's head), or a
 * file of it that cannot be read (an include made unreadable, or too
 * large); anything but running out of memory. It only ever sends the undo
 * to the file it wrote, and reading that file fails on its own where it
 * is the one at fault. */
bool smbconf_refused(int r);

/* The value of the line ed wrote where ed->file still holds it as written
 * (smbconf_holds_ours), read without the rest of the configuration: for a
 * commit to be confirmed (testparm judges it) when the configuration is
 * one the parse refuses. malloc'ed, or NULL. */
char *smbconf_ours_value(const struct smbconf_edit *ed);

/* smbconf_write's check after the write, for a write whose writer died
 * or stopped before it: Samba's testparm must read value, the line our
 * edit ed put in path, or the edit is taken back. 0, or the error;
 * *checked when the check ran (not when the edit lock could not be had),
 * *undone when ours is taken back, *how saying how (smbconf_revert's
 * return: 0 or -EALREADY, the old line in force again; or
 * SMBCONF_UNDONE_SHADOWED / _UNREAD: another line, or one the parse
 * refuses, stands, which is an admin's edit). */
int smbconf_confirm(const char *path, const char *state_dir, const struct smbconf_edit *ed,
                    const char *value, bool *checked, bool *undone, int *how, struct err *e);

void smbconf_result_free(struct smbconf_result *res);

#endif
