/* smbconf: locate the `socket options` line in force, as Samba reads the
 * files: the walk through sections and includes, in Samba's order, and
 * what the editor refuses. Pure: every file is read through struct
 * smbconf_io. The line rules are in smbconf_lex.c, includes in
 * smbconf_include.c, the rewrite in smbconf_edit.c. */
#include "smbconf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "smbconf_int.h"

int smbconf_file_index(const struct smbconf *c, const char *path)
{
    for (size_t i = 0; i < c->nfiles; i++)
        if (strcmp(c->files[i].path, path) == 0)
            return (int)i;
    return -1;
}

static void note_header(struct smbconf_walk *w, int depth, const struct smbconf_lline *ll,
                        const char *b, size_t len)
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

static void note_indent(struct smbconf_walk *w, int depth, const struct smbconf_lline *ll,
                        const char *b)
{
    size_t n = ll->cstart - ll->start;

    if (depth != 0 || !w->want_indent)
        return;
    w->want_indent = false;
    /* Blanks and tabs only: Samba skips a lone carriage return (or a form
     * feed) as a blank too, but copied into a new line it would end that
     * line for whatever reads lines. The default indent stays then. */
    if (n < sizeof(w->c->indent) && strspn(b + ll->start, " \t") >= n) {
        memcpy(w->c->indent, b + ll->start, n);
        w->c->indent[n] = '\0';
    }
}

/* `name = value` on line ll of file fi. */
static int handle_param(struct smbconf_walk *w, size_t fi, const struct smbconf_lline *ll,
                        const char *name, const char *value, int depth)
{
    struct smbconf *c = w->c;
    const char *fpath = c->files[fi].path;

    if (name[0] == '\0')
        return err_set(w->e, -EINVAL,
                       "%s:%d: parameter without a name: Samba cannot load this "
                       "file",
                       fpath, ll->line);
    note_indent(w, depth, ll, c->files[fi].buf);

    if (smbconf_wequal(name, "include"))
        return smbconf_handle_include(w, fi, ll, value, depth);
    if (!w->in_global)
        return 0; /* global parameters in a share section are ignored */
    if (smbconf_wequal(name, "config backend") && strcasecmp(value, "registry") == 0)
        return err_set(w->e, -ENOTSUP,
                       "%s:%d: 'config backend = registry': the global settings live in Samba's "
                       "registry (net conf), not in this file",
                       fpath, ll->line);
    if (smbconf_wequal(name, "config file"))
        return err_set(w->e, -ENOTSUP,
                       "%s:%d: 'config file' makes smbd switch to another file: point smbtuned "
                       "at it with --smb-conf (config file = %s)",
                       fpath, ll->line, value);
    if (!smbconf_wequal(name, "socket options"))
        return 0;
    if (!w->section_known && !w->io->undo)
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

/* A UTF-8 byte order mark, then nothing, a comment or blanks: testparm
 * loads such a first line as what follows the mark, so it says nothing
 * against the file being an smb.conf (smbconf_render's guard). */
static bool bom_comment(const char *t)
{
    if (strncmp(t, "\xef\xbb\xbf", 3) != 0)
        return false;
    t += 3;
    t += strspn(t, " \t");
    return *t == '\0' || *t == '#' || *t == ';';
}

int smbconf_walk_file(struct smbconf_walk *w, size_t fi, int depth)
{
    size_t pos = 0, cap = 0;
    int lineno = 1, r;
    struct smbconf_lline ll = {0};

    /* Reallocation of c->files by nested includes moves the array, never
     * the buffers: take the buffer, not the struct. */
    const char *b = w->c->files[fi].buf;
    size_t len = w->c->files[fi].len;

    while ((r = smbconf_next_lline(b, len, &pos, &lineno, &ll, &cap)) > 0) {
        char *name, *value;
        enum smbconf_kind kind = smbconf_split(ll.text, &name, &value);

        w->seq++;
        /* A header behind a UTF-8 byte order mark is no header to Samba,
         * but it shows the file is meant as one with sections. */
        if (kind == SMBCONF_OTHER && strncmp(ll.text, "\xef\xbb\xbf[", 4) == 0)
            w->c->any_section = true;
        else if (kind == SMBCONF_OTHER && depth == 0 && w->c->other_line == 0 &&
                 !bom_comment(ll.text))
            w->c->other_line = ll.line;
        if (kind == SMBCONF_OTHER)
            continue; /* tini ignores a line without `=` */
        if (kind == SMBCONF_SECTION) {
            if (name == NULL) {
                r = err_set(w->e, -EINVAL,
                            "%s:%d: section header without ']': Samba cannot load this file",
                            w->c->files[fi].path, ll.line);
                break;
            }
            w->in_global = smbconf_wequal(name, "global") || smbconf_wequal(name, "globals");
            w->section_known = true;
            w->c->any_section = true;
            w->notes_open = w->c->nnotes;
            note_header(w, depth, &ll, b, len);
            continue;
        }
        r = handle_param(w, fi, &ll, name, value, depth);
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
    struct smbconf_walk w = {.c = c,
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
    r = smbconf_add_file(&w, path, &idx, &re);
    if (r < 0) {
        err_set(e, r, "cannot read the Samba configuration (smb.conf): %s", re.msg);
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
    r = smbconf_walk_file(&w, idx, 0);
    if (r == 0 && w.risk_seq > w.hit_seq && !io->undo)
        r = err_set(e, -ENOTSUP, "smbtuned cannot know which socket options are in force: %s",
                    w.risk);
    /* Samba's tokenizer (next_token) drops a double quote and keeps the
     * blanks between two as part of one option: `"TCP_NODELAY
     * SO_RCVBUF=65536"` is one unknown option, `SO_RCVBUF="8192"` sets
     * 8192. smbtuned's tokens are split on blanks and commas alone, so
     * such a line is refused rather than misread or edited into one with
     * an unbalanced quote. */
    if (r == 0 && c->found && strchr(c->value, '"') != NULL)
        r = err_set(e, -ENOTSUP,
                    "%s:%d: 'socket options' holds a double quote, which Samba reads as grouping "
                    "words into one option; smbtuned does not read or edit such a line: remove "
                    "the quotes",
                    c->files[c->hit.file].path, c->hit.line);
    /* No socket option has a backslash in it, and one left at the end of
     * a token (`x\,`: the comma is a separator smbtuned drops) would end
     * the line written and join the next one to it, a section header
     * included. A continuation's own backslash is not in the value. */
    if (r == 0 && c->found && strchr(c->value, '\\') != NULL)
        r = err_set(e, -ENOTSUP,
                    "%s:%d: 'socket options' holds a backslash, which no socket option has; "
                    "smbtuned does not read or edit such a line: remove it",
                    c->files[c->hit.file].path, c->hit.line);
    if (r == 0 && !c->found) {
        c->value = strdup("TCP_NODELAY");
        if (c->value == NULL)
            r = err_set(e, -ENOMEM, "out of memory");
    }
    free(w.risk);
    if (r == 0)
        smbconf_finish_notes(&w);
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
