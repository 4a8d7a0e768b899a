/* smbconf_int: what the parts of the smb.conf reader share; private to
 * smbconf*.c (smbconf.h is the interface).
 *
 *   smbconf_lex.c      Samba's line rules: comments, `\` continuations,
 *                      collapsed blanks, `[section]` and `name = value`
 *   smbconf_include.c  `include =` read in place, %-includes checked
 *                      through the glob callback, the notes about them
 *   smbconf.c          the walk: sections, the line in force, refusals
 *   smbconf_edit.c     render and unrender an edit, chain and copy edits
 *   smbconf_disk.c     the files read from disk, testparm asked
 *   smbconf_io.c       the write: lock, backup, atomic replace, judge, undo
 */
#ifndef SMBTUNE_SMBCONF_INT_H
#define SMBTUNE_SMBCONF_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "smbconf.h"

/* Samba's own limit (lib/param/loadparm.c, "Maximum include depth (100)
 * exceeded!"): a chain of 100 nested includes loads, 101 does not. */
#define SMBCONF_MAX_INCLUDE_DEPTH 100

/* One logical line, as lib/util/tini.c reads it. */
struct smbconf_lline {
    size_t start;  /* first byte of the physical line */
    size_t cstart; /* first non-blank byte */
    size_t end;    /* line terminator of the last physical line */
    size_t next;   /* first byte after it */
    int line;
    char *text; /* blanks collapsed, continuations joined */
    size_t tlen;
};

struct smbconf_walk {
    struct smbconf *c;
    const struct smbconf_io *io;
    struct err *e;
    bool in_global;     /* lines go to the global section */
    bool section_known; /* false after an include that may open a section */
    long seq;           /* logical lines seen, in Samba's reading order */
    long hit_seq;
    long risk_seq; /* last %-include whose files may set the parameter */
    char *risk;    /* what that include (or one opening a section) does */
    bool seen_global_header;
    bool want_indent;
    long nread;                                  /* see MAX_FILES_READ */
    size_t stack[SMBCONF_MAX_INCLUDE_DEPTH + 1]; /* the files being walked, outermost first */
    /* Notes (c->notes) of %-includes: those before notes_open have a
     * section header after them; at the hit, the split was hit_closed and
     * hit_notes (see smbconf_finish_notes). */
    size_t notes_open, hit_closed, hit_notes;
};

/* ---- smbconf_lex.c ---- */

/* Samba's strwicmp: equal ignoring case and all whitespace. */
bool smbconf_wequal(const char *a, const char *b);

/* Read the next logical line of b[0, len) from *pos (*lineno is the line
 * number there): skip blank and comment lines (a comment ends at its
 * newline, even after a `\`), join `\` continuations, collapse blank runs
 * into their first character. 1: a line, 0: end of file, -ENOMEM. ll->text
 * is reused between calls (*cap is its size, 0 at first; free it after). */
int smbconf_next_lline(const char *b, size_t len, size_t *pos, int *lineno,
                       struct smbconf_lline *ll, size_t *cap);

enum smbconf_kind {
    SMBCONF_OTHER,   /* no `=`: tini ignores the line */
    SMBCONF_SECTION, /* `[name]`: *name is NULL when the `]` is missing */
    SMBCONF_PARAM,   /* `name = value`, each trimmed as tini does (may be "") */
};

/* What a logical line's text is, as tini reads it: split in place. */
enum smbconf_kind smbconf_split(char *text, char **name, char **value);

/* ---- smbconf_include.c ---- */

/* Read a file once (c->files); later includes of the same path share the
 * copy. The reason for a failure goes into re (it names the file). */
int smbconf_add_file(struct smbconf_walk *w, const char *path, size_t *idx, struct err *re);

/* `include = value` on line ll of file fi, at include depth depth: read
 * the file in place (smbconf_walk_file), or check a %-include's files. */
int smbconf_handle_include(struct smbconf_walk *w, size_t fi, const struct smbconf_lline *ll,
                           const char *value, int depth);

/* At the end of a walk: drop the notes that cannot matter, say what the
 * others could do. */
void smbconf_finish_notes(struct smbconf_walk *w);

/* ---- smbconf.c ---- */

/* Walk file fi (at include depth depth) line by line. */
int smbconf_walk_file(struct smbconf_walk *w, size_t fi, int depth);

/* smbconf_load as the take-back reads the file (smbconf_io's undo: see
 * struct smbconf_io's undo). */
int smbconf_load_undo(struct smbconf *c, const char *path, struct err *e);

#endif
