/* smbconf: locate and replace the `socket options` line in force.
 * Pure: every file is read through struct smbconf_io. */
#include "smbconf.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Samba has no limit, but a loop of includes would recurse for ever. */
#define MAX_INCLUDE_DEPTH 16

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
    long risk_seq; /* last include that may set the parameter */
    char risk_where[512];
    bool seen_global_header;
    bool want_indent;
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

/* Read a file once; later includes of the same path share the copy. */
static int add_file(struct walk *w, const char *path, size_t *idx)
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
    r = w->io->read(w->io->ctx, path, &buf, &len);
    if (r < 0)
        return r;
    nf = realloc(c->files, (c->nfiles + 1) * sizeof(*nf));
    if (nf == NULL) {
        free(buf);
        return -ENOMEM;
    }
    c->files = nf;
    nf[c->nfiles].path = strdup(path);
    if (nf[c->nfiles].path == NULL) {
        free(buf);
        return -ENOMEM;
    }
    nf[c->nfiles].buf = buf;
    nf[c->nfiles].len = len;
    *idx = c->nfiles++;
    return 0;
}

/* What a file named by a %-include could do to us: open a section, set
 * socket options, or pull in more files. Checked on the files that exist
 * now; a harmless one is one that only sets other parameters. */
static int include_risk(struct walk *w, const char *path, bool *opens_section, bool *sets)
{
    char *buf;
    size_t len, pos = 0, cap = 0;
    int lineno = 1, r;
    struct lline ll = {0};

    r = w->io->read(w->io->ctx, path, &buf, &len);
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
    return r;
}

static int walk_file(struct walk *w, size_t fi, int depth);

static int handle_include(struct walk *w, size_t fi, const struct lline *ll, const char *value,
                          int depth)
{
    const char *fpath = w->c->files[fi].path;
    size_t idx;
    int r;

    if (w->in_global && wequal(value, "registry"))
        return err_set(w->e, -ENOTSUP,
                       "%s:%d: 'include = registry' takes global settings from Samba's "
                       "registry, which smbtuned does not edit",
                       fpath, ll->line);
    if (strchr(value, '%') != NULL) {
        /* The name depends on the client (%m, %U ...): every existing file
         * the pattern can name must be harmless. */
        char pat[4096], **paths = NULL;
        size_t n = 0, j = 0;
        bool opens = false, sets = false;

        for (const char *s = value; *s && j < sizeof(pat) - 2; s++) {
            if (*s == '%' && s[1] != '\0') {
                pat[j++] = '*';
                s++;
            } else {
                pat[j++] = *s;
            }
        }
        pat[j] = '\0';
        r = w->io->glob(w->io->ctx, pat, &paths, &n);
        for (size_t k = 0; r >= 0 && k < n; k++)
            r = include_risk(w, paths[k], &opens, &sets);
        for (size_t k = 0; k < n; k++)
            free(paths[k]);
        free(paths);
        if (r < 0)
            return err_set(w->e, r, "%s:%d: cannot check the files 'include = %s' can name: %s",
                           fpath, ll->line, value, strerror(-r));
        if (opens || sets) {
            w->risk_seq = w->seq;
            snprintf(w->risk_where, sizeof(w->risk_where),
                     "%s:%d: 'include = %s' depends on the client, and a file it can name "
                     "%s",
                     fpath, ll->line, value,
                     sets ? "sets socket options (or includes or config files)"
                          : "opens a section");
        }
        if (opens)
            w->section_known = false;
        return 0;
    }
    if (value[0] != '/')
        return err_set(w->e, -ENOTSUP,
                       "%s:%d: 'include = %s' is a relative path: smbd resolves it against its "
                       "working directory, which smbtuned cannot know",
                       fpath, ll->line, value);
    if (depth >= MAX_INCLUDE_DEPTH)
        return err_set(w->e, -ELOOP, "%s:%d: includes nested more than %d deep (a loop?)", fpath,
                       ll->line, MAX_INCLUDE_DEPTH);
    r = add_file(w, value, &idx);
    if (r == -ENOENT)
        return 0; /* Samba skips a missing include silently. */
    if (r < 0)
        return err_set(w->e, r, "%s:%d: cannot read included file %s: %s", fpath, ll->line,
                       value, strerror(-r));
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
        return err_set(w->e, -EINVAL, "%s:%d: parameter without a name: Samba cannot load this "
                       "file", fpath, ll->line);
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
                       "%s:%d: 'config file = %s' makes smbd switch to that file: point smbtuned "
                       "at it with --smb-conf",
                       fpath, ll->line, value);
    if (!wequal(name, "socket options"))
        return 0;
    if (!w->section_known)
        return err_set(w->e, -ENOTSUP, "%s:%d: cannot tell which section this line is in: %s",
                       fpath, ll->line, w->risk_where);
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

int smbconf_parse(struct smbconf *c, const char *path, const struct smbconf_io *io,
                  struct err *e)
{
    struct walk w = {.c = c, .io = io, .e = e, .in_global = true, .section_known = true,
                     .hit_seq = -1, .risk_seq = -1};
    size_t idx;
    int r;

    memset(c, 0, sizeof(*c));
    strcpy(c->indent, "\t");
    strcpy(c->eol, "\n");
    c->insert_header = true;
    r = add_file(&w, path, &idx);
    if (r < 0) {
        err_set(e, r, "%s: cannot read: %s", path, strerror(-r));
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
    r = walk_file(&w, idx, 0);
    if (r == 0 && w.risk_seq > w.hit_seq)
        r = err_set(e, -ENOTSUP, "%s, so smbtuned cannot know which socket options are in force",
                    w.risk_where);
    if (r == 0 && !c->found) {
        c->value = strdup("TCP_NODELAY");
        if (c->value == NULL)
            r = err_set(e, -ENOMEM, "out of memory");
    }
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
    memset(c, 0, sizeof(*c));
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
static int splice(const struct smbconf_file *f, size_t at, size_t cut, const char *ins,
                  char **out, size_t *outlen)
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
        char *line = concat(c->indent, "socket options = ", value, "");
        bool at_eof_no_nl = c->insert_at == f->len && f->len > 0 && f->buf[f->len - 1] != '\n';

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
        memcmp(c->files[c->hit.file].buf + c->hit.start, ed->original,
               strlen(ed->original)) == 0)
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
    if (asprintf(&out->written, "%.*s%s%s", (int)first->line_off, w, next->written, w + tail) <
        0) {
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
