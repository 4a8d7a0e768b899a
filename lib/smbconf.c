/* smbconf: locate and replace the `socket options` line in force.
 * Pure: every file is read through struct smbconf_io. */
#include "smbconf.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Samba's own limit (lib/param/loadparm.c, "Maximum include depth (100)
 * exceeded!"): a chain of 100 nested includes loads, 101 does not. */
#define MAX_INCLUDE_DEPTH 100

/* Files read or walked for one parse: the main file, every include each
 * time Samba reads it (a file included twice is read twice) and every
 * file a %-include's pattern names today. Depth alone does not bound the
 * work: 8 includes per file over 14 levels is 8^14 reads. Only per-client
 * files (one `smb.conf.%m` per machine) make a real configuration name
 * many files; 10000 leaves room for a large site and still ends a
 * fan-out within a second. */
#define MAX_FILES_READ 10000

static const char note_override[] =
    "a file it names later could override socket options for some clients";
static const char note_section[] =
    "a file it names later could open a section for some clients, and the socket options "
    "line after it would then not be global for them";

/* One logical line, as lib/util/tini.c reads it. */
struct lline {
    size_t start;  /* first byte of the physical line */
    size_t cstart; /* first non-blank byte */
    size_t end;    /* line terminator of the last physical line */
    size_t next;   /* first byte after it */
    int line;
    char *text; /* blanks collapsed, continuations joined */
    size_t tlen;
};

struct walk {
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
    long nread;                          /* see MAX_FILES_READ */
    size_t stack[MAX_INCLUDE_DEPTH + 1]; /* the files being walked, outermost first */
    /* Notes (c->notes) of %-includes: those before notes_open have a
     * section header after them; at the hit, the split was hit_closed and
     * hit_notes (see finish_notes). */
    size_t notes_open, hit_closed, hit_notes;
};

/* Samba's strwicmp: equal ignoring case and all whitespace. */
static bool wequal(const char *a, const char *b)
{
    for (;;) {
        while (isspace((unsigned char)*a))
            a++;
        while (isspace((unsigned char)*b))
            b++;
        if (*a == '\0' || *b == '\0')
            return *a == *b;
        if (toupper((unsigned char)*a) != toupper((unsigned char)*b))
            return false;
        a++;
        b++;
    }
}

static int append(struct lline *ll, size_t *cap, char ch)
{
    if (ll->tlen + 1 >= *cap) {
        size_t ncap = *cap ? *cap * 2 : 128;
        char *nt = realloc(ll->text, ncap);

        if (nt == NULL)
            return -ENOMEM;
        ll->text = nt;
        *cap = ncap;
    }
    ll->text[ll->tlen++] = ch;
    ll->text[ll->tlen] = '\0';
    return 0;
}

/* Read the next logical line from *pos: skip blank and comment lines (a
 * comment ends at its newline, even after a `\`), join `\` continuations,
 * collapse blank runs into their first character. 1: a line, 0: end of
 * file, <0: error. ll->text is reused between calls. */
static int next_lline(const char *b, size_t len, size_t *pos, int *lineno, struct lline *ll,
                      size_t *cap)
{
    size_t p = *pos;

    for (;;) {
        size_t s = p;

        while (p < len && b[p] != '\n' && isspace((unsigned char)b[p]))
            p++;
        if (p >= len) {
            *pos = p;
            return 0;
        }
        if (b[p] == '#' || b[p] == ';') {
            /* A comment runs to its newline; a `\` at its end does not
             * continue it. */
            while (p < len && b[p] != '\n')
                p++;
        }
        if (p >= len) {
            *pos = p;
            return 0;
        }
        if (b[p] == '\n') {
            p++;
            (*lineno)++;
            continue;
        }
        ll->start = s;
        ll->cstart = p;
        ll->line = *lineno;
        ll->tlen = 0;
        /* Make sure text exists even when the line turns out empty. */
        if (append(ll, cap, 'x') < 0)
            return -ENOMEM;
        ll->tlen = 0;
        for (; p < len; p++) {
            unsigned char ch = (unsigned char)b[p];
            size_t n = ll->tlen;

            if (ch == '\n') {
                if (n > 0 && ll->text[n - 1] == '\\') {
                    ll->tlen -= 1;
                    (*lineno)++;
                    continue;
                }
                if (n > 1 && ll->text[n - 2] == '\\' && isspace((unsigned char)ll->text[n - 1])) {
                    ll->tlen -= 2;
                    (*lineno)++;
                    continue;
                }
                break;
            }
            if (n > 0 && isspace((unsigned char)ll->text[n - 1]) && isspace(ch))
                continue;
            if (append(ll, cap, (char)ch) < 0)
                return -ENOMEM;
        }
        ll->text[ll->tlen] = '\0';
        ll->end = p;
        /* Keep a CR of a CRLF ending out of the line: it is rewritten with
         * the rest of the terminator, untouched. */
        if (p > ll->cstart && b[p - 1] == '\r')
            ll->end = p - 1;
        if (p < len) {
            p++;
            (*lineno)++;
        }
        ll->next = p;
        *pos = p;
        return 1;
    }
}

/* tini's trim_one_space, in place; returns the new start. */
static char *trim_one(char *s)
{
    size_t n;

    if (isspace((unsigned char)s[0]))
        s++;
    n = strlen(s);
    if (n > 0 && isspace((unsigned char)s[n - 1]))
        s[n - 1] = '\0';
    return s;
}

int smbconf_file_index(const struct smbconf *c, const char *path)
{
    for (size_t i = 0; i < c->nfiles; i++)
        if (strcmp(c->files[i].path, path) == 0)
            return (int)i;
    return -1;
}

/* Count one more file read; -E2BIG past MAX_FILES_READ. */
static int count_read(struct walk *w, const char *fpath, int line)
{
    if (++w->nread <= MAX_FILES_READ)
        return 0;
    return err_set(w->e, -E2BIG,
                   "%s:%d: more than %d files read through includes: smbtuned stops there "
                   "(an include fan-out?)",
                   fpath, line, MAX_FILES_READ);
}

/* Read a file once; later includes of the same path share the copy. The
 * reason for a failure goes into re (it names the file). */
static int add_file(struct walk *w, const char *path, size_t *idx, struct err *re)
{
    struct smbconf *c = w->c;
    struct smbconf_file *nf;
    char *buf;
    size_t len;
    int i = smbconf_file_index(c, path);
    int r;

    if (i >= 0) {
        *idx = (size_t)i;
        return 0;
    }
    r = w->io->read(w->io->ctx, path, &buf, &len, re);
    if (r < 0)
        return r;
    nf = realloc(c->files, (c->nfiles + 1) * sizeof(*nf));
    if (nf == NULL) {
        free(buf);
        return err_set(re, -ENOMEM, "out of memory");
    }
    c->files = nf;
    nf[c->nfiles].path = strdup(path);
    if (nf[c->nfiles].path == NULL) {
        free(buf);
        return err_set(re, -ENOMEM, "out of memory");
    }
    nf[c->nfiles].buf = buf;
    nf[c->nfiles].len = len;
    *idx = c->nfiles++;
    return 0;
}

/* What a file named by a %-include could do to us: open a section, set
 * socket options, or pull in more files. Checked on the files that exist
 * now; a harmless one is one that only sets other parameters. */
static int include_risk(struct walk *w, const char *path, bool *opens_section, bool *sets,
                        struct err *re)
{
    char *buf;
    size_t len, pos = 0, cap = 0;
    int lineno = 1, r;
    struct lline ll = {0};

    r = w->io->read(w->io->ctx, path, &buf, &len, re);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    while ((r = next_lline(buf, len, &pos, &lineno, &ll, &cap)) > 0) {
        char *eq;

        if (ll.text[0] == '[') {
            *opens_section = true;
            continue;
        }
        eq = strchr(ll.text, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        if (wequal(ll.text, "socket options") || wequal(ll.text, "include") ||
            wequal(ll.text, "config file") || wequal(ll.text, "config backend"))
            *sets = true;
    }
    free(ll.text);
    free(buf);
    return r == -ENOMEM ? err_set(re, r, "out of memory") : r;
}

/* Remember a %-include that was accepted: what it could do later is
 * decided when the parse knows where the line in force is. */
static int add_note(struct walk *w, const char *fpath, int line, const char *value)
{
    struct smbconf *c = w->c;
    struct smbconf_note *nn = realloc(c->notes, (c->nnotes + 1) * sizeof(*nn));

    if (nn == NULL)
        return -ENOMEM;
    c->notes = nn;
    nn[c->nnotes].file = strdup(fpath);
    nn[c->nnotes].include = strdup(value);
    nn[c->nnotes].line = line;
    nn[c->nnotes].what = note_override;
    c->nnotes++;
    if (nn[c->nnotes - 1].file == NULL || nn[c->nnotes - 1].include == NULL)
        return -ENOMEM;
    return 0;
}

/* A %-include after the line in force could override it; one before it,
 * with no section header in between, could move it out of [global]; one
 * before a header can do neither and needs no note. */
static void finish_notes(struct walk *w)
{
    struct smbconf *c = w->c;
    size_t keep = 0;

    for (size_t i = 0; i < c->nnotes; i++) {
        struct smbconf_note n = c->notes[i];

        if (w->hit_seq >= 0 && i < w->hit_closed) {
            free(n.file);
            free(n.include);
            continue;
        }
        n.what = w->hit_seq >= 0 && i < w->hit_notes ? note_section : note_override;
        c->notes[keep++] = n;
    }
    c->nnotes = keep;
}

static int walk_file(struct walk *w, size_t fi, int depth);

/* A %-include: the name depends on the client (%m, %U ...), so every
 * file the pattern can name today must be harmless; what it names later
 * is only noted. */
static int handle_percent_include(struct walk *w, const char *fpath, int line, const char *value)
{
    char *pat, **paths = NULL;
    size_t n = 0, j = 0;
    bool opens = false, sets = false;
    struct err re = {{0}};
    int r;

    pat = malloc(strlen(value) + 1);
    if (pat == NULL)
        return err_set(w->e, -ENOMEM, "out of memory");
    for (const char *s = value; *s; s++) {
        if (*s == '%' && s[1] != '\0') {
            pat[j++] = '*';
            s++;
        } else {
            pat[j++] = *s;
        }
    }
    pat[j] = '\0';
    r = w->io->glob(w->io->ctx, pat, &paths, &n);
    free(pat);
    if (r < 0)
        err_set(&re, r, "%s", strerror(-r));
    for (size_t k = 0; r >= 0 && k < n; k++) {
        r = count_read(w, fpath, line);
        if (r < 0)
            break;
        r = include_risk(w, paths[k], &opens, &sets, &re);
    }
    for (size_t k = 0; k < n; k++)
        free(paths[k]);
    free(paths);
    if (r == -E2BIG)
        return r; /* count_read said why */
    if (r < 0)
        return err_set(w->e, r,
                       "%s:%d: cannot check the files a client-dependent include can "
                       "name: %s (include = %s)",
                       fpath, line, re.msg, value);
    if (opens || sets) {
        w->risk_seq = w->seq;
        free(w->risk);
        if (asprintf(&w->risk,
                     "%s:%d: this include depends on the client, and a file it can name %s "
                     "(include = %s)",
                     fpath, line,
                     sets ? "sets socket options (or includes or config files)" : "opens a section",
                     value) < 0) {
            w->risk = NULL;
            return err_set(w->e, -ENOMEM, "out of memory");
        }
    }
    if (opens)
        w->section_known = false;
    if (add_note(w, fpath, line, value) < 0)
        return err_set(w->e, -ENOMEM, "out of memory");
    return 0;
}

static int handle_include(struct walk *w, size_t fi, const struct lline *ll, const char *value,
                          int depth)
{
    const char *fpath = w->c->files[fi].path;
    struct err re = {{0}};
    size_t idx;
    int r;

    if (w->in_global && wequal(value, "registry"))
        return err_set(w->e, -ENOTSUP,
                       "%s:%d: 'include = registry' takes global settings from Samba's "
                       "registry, which smbtuned does not edit",
                       fpath, ll->line);
    /* %$(VAR) is replaced by smbd's environment variable VAR, which we
     * cannot see: globbing it as "*(VAR)" names files smbd never reads and
     * misses the one it does, so no file can be called harmless. Refused
     * wherever it is, like a relative path: any section can reopen
     * [global]. */
    if (strstr(value, "%$(") != NULL)
        return err_set(w->e, -ENOTSUP,
                       "%s:%d: an include with %%$(...) names a file from smbd's environment, "
                       "which smbtuned cannot know (include = %s)",
                       fpath, ll->line, value);
    if (strchr(value, '%') != NULL)
        return handle_percent_include(w, fpath, ll->line, value);
    if (value[0] != '/')
        return err_set(w->e, -ENOTSUP,
                       "%s:%d: a relative path in an include: smbd resolves it against its working "
                       "directory, which smbtuned cannot know (include = %s)",
                       fpath, ll->line, value);
    for (int k = 0; k <= depth; k++)
        if (strcmp(w->c->files[w->stack[k]].path, value) == 0)
            return err_set(w->e, -ELOOP,
                           "%s:%d: an include loop: %s is already being read, so it would "
                           "include itself for ever (Samba refuses it at depth %d)",
                           fpath, ll->line, value, MAX_INCLUDE_DEPTH);
    if (depth >= MAX_INCLUDE_DEPTH)
        return err_set(w->e, -ELOOP,
                       "%s:%d: includes nested more than %d deep, Samba's limit: Samba cannot "
                       "load this file (include = %s)",
                       fpath, ll->line, MAX_INCLUDE_DEPTH, value);
    r = count_read(w, fpath, ll->line);
    if (r < 0)
        return r;
    r = add_file(w, value, &idx, &re);
    if (r == -ENOENT)
        return 0; /* Samba skips a missing include silently. */
    if (r < 0)
        return err_set(w->e, r, "%s:%d: cannot read an included file: %s", fpath, ll->line, re.msg);
    w->stack[depth + 1] = idx;
    return walk_file(w, idx, depth + 1);
}

static void note_header(struct walk *w, int depth, const struct lline *ll, const char *b,
                        size_t len)
{
    struct smbconf *c = w->c;

    if (depth != 0 || !w->in_global || w->seen_global_header)
        return;
    w->seen_global_header = true;
    c->insert_at = ll->next;
    c->insert_header = false;
    if (ll->end < len && b[ll->end] == '\r')
        strcpy(c->eol, "\r\n");
    w->want_indent = true;
}

static void note_indent(struct walk *w, int depth, const struct lline *ll, const char *b)
{
    size_t n = ll->cstart - ll->start;

    if (depth != 0 || !w->want_indent)
        return;
    w->want_indent = false;
    if (n < sizeof(w->c->indent)) {
        memcpy(w->c->indent, b + ll->start, n);
        w->c->indent[n] = '\0';
    }
}

static int handle_param(struct walk *w, size_t fi, const struct lline *ll, int depth)
{
    struct smbconf *c = w->c;
    const char *fpath = c->files[fi].path;
    char *name, *value, *eq = strchr(ll->text, '=');

    if (eq == NULL)
        return 0; /* tini ignores a line without `=` */
    *eq = '\0';
    name = trim_one(ll->text);
    if (name[0] == '\0')
        return err_set(w->e, -EINVAL,
                       "%s:%d: parameter without a name: Samba cannot load this "
                       "file",
                       fpath, ll->line);
    value = trim_one(eq + 1);
    note_indent(w, depth, ll, c->files[fi].buf);

    if (wequal(name, "include"))
        return handle_include(w, fi, ll, value, depth);
    if (!w->in_global)
        return 0; /* global parameters in a share section are ignored */
    if (wequal(name, "config backend") && strcasecmp(value, "registry") == 0)
        return err_set(w->e, -ENOTSUP,
                       "%s:%d: 'config backend = registry': the global settings live in Samba's "
                       "registry (net conf), not in this file",
                       fpath, ll->line);
    if (wequal(name, "config file"))
        return err_set(w->e, -ENOTSUP,
                       "%s:%d: 'config file' makes smbd switch to another file: point smbtuned "
                       "at it with --smb-conf (config file = %s)",
                       fpath, ll->line, value);
    if (!wequal(name, "socket options"))
        return 0;
    if (!w->section_known)
        return err_set(w->e, -ENOTSUP, "%s:%d: cannot tell which section this line is in: %s",
                       fpath, ll->line, w->risk);
    free(c->value);
    c->value = strdup(value);
    if (c->value == NULL)
        return -ENOMEM;
    c->found = true;
    c->hit.file = fi;
    c->hit.start = ll->start;
    c->hit.end = ll->end;
    c->hit.line = ll->line;
    w->hit_seq = w->seq;
    w->hit_closed = w->notes_open;
    w->hit_notes = c->nnotes;
    return 0;
}

static int walk_file(struct walk *w, size_t fi, int depth)
{
    size_t pos = 0, cap = 0;
    int lineno = 1, r;
    struct lline ll = {0};

    /* Reallocation of c->files by nested includes moves the array, never
     * the buffers: take the buffer, not the struct. */
    const char *b = w->c->files[fi].buf;
    size_t len = w->c->files[fi].len;

    while ((r = next_lline(b, len, &pos, &lineno, &ll, &cap)) > 0) {
        w->seq++;
        if (ll.text[0] == '[') {
            char *close = strchr(ll.text, ']');

            if (close == NULL) {
                r = err_set(w->e, -EINVAL,
                            "%s:%d: section header without ']': Samba cannot load this file",
                            w->c->files[fi].path, ll.line);
                break;
            }
            *close = '\0';
            w->in_global = wequal(ll.text + 1, "global") || wequal(ll.text + 1, "globals");
            w->section_known = true;
            w->notes_open = w->c->nnotes;
            note_header(w, depth, &ll, b, len);
            continue;
        }
        r = handle_param(w, fi, &ll, depth);
        if (r < 0)
            break;
    }
    free(ll.text);
    if (r == -ENOMEM)
        return err_set(w->e, r, "out of memory");
    return r;
}

int smbconf_parse(struct smbconf *c, const char *path, const struct smbconf_io *io, struct err *e)
{
    struct walk w = {.c = c,
                     .io = io,
                     .e = e,
                     .in_global = true,
                     .section_known = true,
                     .hit_seq = -1,
                     .risk_seq = -1,
                     .nread = 1};
    struct err re = {{0}};
    size_t idx;
    int r;

    memset(c, 0, sizeof(*c));
    strcpy(c->indent, "\t");
    strcpy(c->eol, "\n");
    c->insert_header = true;
    r = add_file(&w, path, &idx, &re);
    if (r < 0) {
        err_set(e, r, "cannot read the configuration: %s", re.msg);
        smbconf_free(c);
        return r;
    }
    {
        /* A file without a global header gets `[global]` at its top, with
         * the file's own line ending. */
        const char *nl = memchr(c->files[0].buf, '\n', c->files[0].len);

        if (nl != NULL && nl > c->files[0].buf && nl[-1] == '\r')
            strcpy(c->eol, "\r\n");
    }
    w.stack[0] = idx;
    r = walk_file(&w, idx, 0);
    if (r == 0 && w.risk_seq > w.hit_seq)
        r = err_set(e, -ENOTSUP, "smbtuned cannot know which socket options are in force: %s",
                    w.risk);
    if (r == 0 && !c->found) {
        c->value = strdup("TCP_NODELAY");
        if (c->value == NULL)
            r = err_set(e, -ENOMEM, "out of memory");
    }
    free(w.risk);
    if (r == 0)
        finish_notes(&w);
    if (r < 0)
        smbconf_free(c);
    return r;
}

void smbconf_free(struct smbconf *c)
{
    for (size_t i = 0; i < c->nfiles; i++) {
        free(c->files[i].path);
        free(c->files[i].buf);
    }
    free(c->files);
    free(c->value);
    smbconf_notes_free(c->notes, c->nnotes);
    memset(c, 0, sizeof(*c));
}

void smbconf_notes_free(struct smbconf_note *notes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(notes[i].file);
        free(notes[i].include);
    }
    free(notes);
}

int smbconf_notes_copy(const struct smbconf *c, struct smbconf_note **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (c->nnotes == 0)
        return 0;
    *out = calloc(c->nnotes, sizeof(**out));
    if (*out == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < c->nnotes; i++) {
        (*out)[i].file = strdup(c->notes[i].file);
        (*out)[i].include = strdup(c->notes[i].include);
        (*out)[i].line = c->notes[i].line;
        (*out)[i].what = c->notes[i].what;
        *n = i + 1;
        if ((*out)[i].file == NULL || (*out)[i].include == NULL) {
            smbconf_notes_free(*out, *n);
            *out = NULL;
            *n = 0;
            return -ENOMEM;
        }
    }
    return 0;
}

void smbconf_edit_free(struct smbconf_edit *ed)
{
    free(ed->file);
    free(ed->written);
    free(ed->original);
    free(ed->prev);
    memset(ed, 0, sizeof(*ed));
}

/* out = buf[0, at) + ins + buf[at + cut, len) */
static int splice(const struct smbconf_file *f, size_t at, size_t cut, const char *ins, char **out,
                  size_t *outlen)
{
    size_t il = strlen(ins);
    size_t n = f->len - cut + il;
    char *o = malloc(n + 1);

    if (o == NULL)
        return -ENOMEM;
    memcpy(o, f->buf, at);
    memcpy(o + at, ins, il);
    memcpy(o + at + il, f->buf + at + cut, f->len - at - cut);
    o[n] = '\0';
    *out = o;
    *outlen = n;
    return 0;
}

static char *concat(const char *a, const char *b, const char *c2, const char *d)
{
    char *s;

    if (asprintf(&s, "%s%s%s%s", a, b, c2, d) < 0)
        return NULL;
    return s;
}

int smbconf_render(const struct smbconf *c, const char *value, char **out, size_t *outlen,
                   struct smbconf_edit *ed, struct err *e)
{
    const struct smbconf_file *f = &c->files[c->found ? c->hit.file : 0];
    size_t at, cut;
    int r;

    memset(ed, 0, sizeof(*ed));
    if (strchr(value, '\n') != NULL || strchr(value, '\r') != NULL)
        return err_set(e, -EINVAL, "a socket options value cannot span lines");
    /* The edit keeps the line as a C string (and so does the state file):
     * a NUL in it would be lost when the edit is taken back (found by
     * tests/fuzz/fuzz_smbconf). */
    if (c->found && memchr(f->buf + c->hit.start, '\0', c->hit.end - c->hit.start) != NULL)
        return err_set(e, -EINVAL, "%s:%d: the socket options line holds a NUL byte: remove it",
                       f->path, c->hit.line);
    ed->file = strdup(f->path);
    if (c->found) {
        /* Keep the line's own text up to its value: indent, the name as
         * the admin spelled it, `=` and the blanks after it. */
        const char *b = f->buf;
        size_t p = c->hit.start, q;
        char *prefix;

        while (p < c->hit.end && b[p] != '=' && b[p] != '\n')
            p++;
        if (p < c->hit.end && b[p] == '=') {
            q = p + 1;
            while (q < c->hit.end && (b[q] == ' ' || b[q] == '\t'))
                q++;
            prefix = strndup(b + c->hit.start, q - c->hit.start);
        } else {
            /* The name itself was split by a continuation: write it anew. */
            prefix = concat(c->indent, "socket options = ", "", "");
        }
        if (prefix == NULL) {
            smbconf_edit_free(ed);
            return err_set(e, -ENOMEM, "out of memory");
        }
        ed->written = concat(prefix, value, "", "");
        free(prefix);
        ed->original = strndup(b + c->hit.start, c->hit.end - c->hit.start);
        ed->line_off = 0;
        at = c->hit.start;
        cut = c->hit.end - c->hit.start;
    } else {
        char *line;
        bool at_eof_no_nl = c->insert_at == f->len && f->len > 0 && f->buf[f->len - 1] != '\n';
        size_t k = f->len;

        /* Inserting at the end of a file that ends in a `\` continuation
         * (of the [global] header's line): the new line would become part
         * of the header, and how many line ends the backslashes take is
         * Samba's guess. Refused (found by tests/fuzz/fuzz_smbconf). */
        while (!c->insert_header && c->insert_at == f->len && k > 0 &&
               isspace((unsigned char)f->buf[k - 1]))
            k--;
        if (!c->insert_header && c->insert_at == f->len && k > 0 && f->buf[k - 1] == '\\') {
            smbconf_edit_free(ed);
            return err_set(e, -EINVAL,
                           "%s: the [global] line ends the file with a '\\' continuation: a "
                           "line added after it would join it; remove the '\\'",
                           f->path);
        }
        line = concat(c->indent, "socket options = ", value, "");
        if (line == NULL) {
            smbconf_edit_free(ed);
            return err_set(e, -ENOMEM, "out of memory");
        }
        if (c->insert_header) {
            ed->written = concat("[global]", c->eol, line, c->eol);
            ed->line_off = strlen("[global]") + strlen(c->eol);
        } else if (at_eof_no_nl) {
            /* The file ends without a newline: keep it that way. */
            ed->written = concat(c->eol, line, "", "");
            ed->line_off = strlen(c->eol);
        } else {
            ed->written = concat(line, c->eol, "", "");
            ed->line_off = 0;
        }
        free(line);
        ed->original = strdup("");
        at = c->insert_header ? 0 : c->insert_at;
        cut = 0;
    }
    if (ed->file == NULL || ed->written == NULL || ed->original == NULL) {
        smbconf_edit_free(ed);
        return err_set(e, -ENOMEM, "out of memory");
    }
    ed->line_len = strcspn(ed->written + ed->line_off, "\r\n");
    r = splice(f, at, cut, ed->written, out, outlen);
    if (r < 0) {
        smbconf_edit_free(ed);
        return err_set(e, r, "out of memory");
    }
    return 0;
}

/* Whether f holds, from offset at, ed->written with its line replaced by
 * line (len bytes), and the line in force is exactly that line. */
static bool holds(const struct smbconf_file *f, size_t at, const struct smbconf_edit *ed,
                  const char *line, size_t len)
{
    size_t tail = ed->line_off + ed->line_len, wlen = strlen(ed->written), rest;

    if (tail > wlen) /* a corrupt record (the state file is ours, but checked) */
        return false;
    rest = wlen - tail;
    return ed->line_off + len + rest <= f->len - at &&
           memcmp(f->buf + at, ed->written, ed->line_off) == 0 &&
           memcmp(f->buf + at + ed->line_off, line, len) == 0 &&
           memcmp(f->buf + at + ed->line_off + len, ed->written + tail, rest) == 0;
}

int smbconf_unrender(const struct smbconf *c, const struct smbconf_edit *ed, char **out,
                     size_t *outlen, struct err *e)
{
    const struct smbconf_file *f;
    size_t wlen = strlen(ed->written), at, hit, cut = 0;

    if (!c->found && ed->original[0] == '\0')
        return err_set(e, -EALREADY, "%s: the line smbtuned added is not there", ed->file);
    if (c->found && strcmp(c->files[c->hit.file].path, ed->file) == 0 &&
        c->hit.end - c->hit.start == strlen(ed->original) &&
        memcmp(c->files[c->hit.file].buf + c->hit.start, ed->original, strlen(ed->original)) == 0)
        return err_set(e, -EALREADY, "%s:%d: the line holds its old value already", ed->file,
                       c->hit.line);
    if (!c->found || strcmp(c->files[c->hit.file].path, ed->file) != 0)
        return err_set(e, -ECANCELED,
                       "the socket options line smbtuned wrote in %s is no longer the one in "
                       "force: leaving the file as it is",
                       ed->file);
    f = &c->files[c->hit.file];
    hit = c->hit.end - c->hit.start;
    at = c->hit.start - ed->line_off;
    if (c->hit.start >= ed->line_off) {
        if (hit == ed->line_len && holds(f, at, ed, ed->written + ed->line_off, hit))
            cut = wlen;
        else if (ed->prev && hit == strlen(ed->prev) && holds(f, at, ed, ed->prev, hit))
            cut = wlen - ed->line_len + hit;
    }
    if (cut == 0)
        return err_set(e, -ECANCELED,
                       "%s:%d: the socket options line was changed since smbtuned wrote it: "
                       "leaving it as it is",
                       ed->file, c->hit.line);
    if (splice(f, at, cut, ed->original, out, outlen) < 0)
        return err_set(e, -ENOMEM, "out of memory");
    return 0;
}

int smbconf_edit_copy(const struct smbconf_edit *src, struct smbconf_edit *dst)
{
    *dst = *src;
    dst->file = strdup(src->file);
    dst->written = strdup(src->written);
    dst->original = strdup(src->original);
    dst->prev = src->prev ? strdup(src->prev) : NULL;
    if (dst->file == NULL || dst->written == NULL || dst->original == NULL ||
        (src->prev && dst->prev == NULL)) {
        smbconf_edit_free(dst);
        return -ENOMEM;
    }
    return 0;
}

int smbconf_edit_chain(const struct smbconf_edit *first, const struct smbconf_edit *next,
                       struct smbconf_edit *out)
{
    const char *w = first->written;
    size_t tail = first->line_off + first->line_len;
    int r;

    /* next replaced the line first wrote, and only it (line_off 0, the
     * whole line): splice its line into first's bytes. */
    if (next->line_off != 0 || strcmp(first->file, next->file) != 0 ||
        strlen(next->original) != first->line_len ||
        memcmp(next->original, w + first->line_off, first->line_len) != 0)
        return -EINVAL;
    r = smbconf_edit_copy(first, out);
    if (r < 0)
        return r;
    free(out->written);
    free(out->prev);
    out->prev = strndup(w + first->line_off, first->line_len);
    if (asprintf(&out->written, "%.*s%s%s", (int)first->line_off, w, next->written, w + tail) < 0) {
        out->written = NULL;
        smbconf_edit_free(out);
        return -ENOMEM;
    }
    if (out->prev == NULL) {
        smbconf_edit_free(out);
        return -ENOMEM;
    }
    out->line_len = strlen(next->written);
    return 0;
}
