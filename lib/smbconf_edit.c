/* smbconf_edit: the rewrite of the line in force. render gives new bytes
 * holding a value (the admin's spelling of the line kept, a line or a
 * `[global]` header added when there is none) and the edit that undoes
 * them; unrender takes an edit back by compare-and-set; edits chain and
 * copy. Pure: the file's bytes come from a parse. */
#include "smbconf.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        /* A carriage return before the value (a lone one in the indent,
         * which Samba skips as a blank) would end the edit's line early
         * for everything that finds it again (line_len below, the undo):
         * such a line is written anew too. */
        if (p < c->hit.end && b[p] == '=' && !memchr(b + c->hit.start, '\r', p - c->hit.start)) {
            q = p + 1;
            while (q < c->hit.end && (b[q] == ' ' || b[q] == '\t'))
                q++;
            prefix = strndup(b + c->hit.start, q - c->hit.start);
        } else {
            /* The name itself was split by a continuation, or a carriage
             * return comes before it: write it anew. */
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
        /* A `[global]` header put on top of a file that has content but no
         * section anywhere: /etc/hosts or smbtuned's own config named by
         * mistake, which Samba would load all the same (it ignores lines
         * without '='), so testparm's check after the write passes. */
        if (c->insert_header && !c->any_section && c->other_line > 0) {
            smbconf_edit_free(ed);
            return err_set(e, -EINVAL,
                           "%s does not look like an smb.conf (a wrong --smb-conf or smb_conf?): "
                           "no [section] line, no socket options line, and line %d is neither "
                           "a parameter nor a comment; nothing written. If it is one, add a "
                           "[global] line to it",
                           f->path, c->other_line);
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

/* Whether written is one parameter line, with at most its line end: its
 * removal or replacement cannot move another line into another section. */
static bool one_line(const struct smbconf_edit *ed)
{
    const char *end = ed->written + ed->line_len;

    return ed->line_off == 0 && strcspn(ed->written, "\r\n") == ed->line_len &&
           (strcmp(end, "") == 0 || strcmp(end, "\n") == 0 || strcmp(end, "\r\n") == 0);
}

/* ed->file among c's files (the first, if it is included twice). */
static const struct smbconf_file *shadowed_file(const struct smbconf *c,
                                                const struct smbconf_edit *ed)
{
    for (size_t i = 0; i < c->nfiles; i++)
        if (strcmp(c->files[i].path, ed->file) == 0)
            return &c->files[i];
    return NULL;
}

/* Our line where it is not the line in force (someone put a later one in
 * [global], or in a file included after it): its one place in ed->file,
 * found as a whole line holding what we wrote (or, chained, what the step
 * before wrote). Its file, with *at and *cut, when there is exactly one
 * such place; NULL when there is none or more than one (then whose is
 * which is unknown). */
static const struct smbconf_file *
find_shadowed(const struct smbconf *c, const struct smbconf_edit *ed, size_t *at, size_t *cut)
{
    size_t wlen = strlen(ed->written), plen = ed->prev ? strlen(ed->prev) : 0, found = 0;
    const struct smbconf_file *f = shadowed_file(c, ed);

    if (f == NULL || !one_line(ed))
        return NULL;
    for (size_t a = 0; a < f->len; a++) {
        if (a > 0 && f->buf[a - 1] != '\n')
            continue;
        /* a whole line: what follows it is a line end or the file's end */
        if (holds(f, a, ed, ed->written, ed->line_len) &&
            (a + ed->line_len == f->len || strchr("\r\n", f->buf[a + ed->line_len]))) {
            *at = a;
            *cut = wlen;
            found++;
        } else if (ed->prev && holds(f, a, ed, ed->prev, plen) &&
                   (a + plen == f->len || strchr("\r\n", f->buf[a + plen]))) {
            *at = a;
            *cut = wlen - ed->line_len + plen;
            found++;
        }
    }
    return found == 1 ? f : NULL;
}

bool smbconf_holds_ours(const struct smbconf *c, const struct smbconf_edit *ed)
{
    size_t at, cut;

    /* (the line as written, not a chained edit's line before it) */
    return find_shadowed(c, ed, &at, &cut) != NULL && cut == strlen(ed->written);
}

char *smbconf_edit_value(const struct smbconf_edit *ed)
{
    const char *line = ed->written + ed->line_off, *end = line + ed->line_len;
    const char *v = memchr(line, '=', ed->line_len);

    if (v == NULL)
        return NULL;
    for (v++; v < end && (*v == ' ' || *v == '\t'); v++)
        ;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        end--;
    return strndup(v, (size_t)(end - v));
}

int smbconf_unrender(const struct smbconf *c, const struct smbconf_edit *ed, char **out,
                     size_t *outlen, struct err *e)
{
    const struct smbconf_file *f;
    size_t wlen = strlen(ed->written), at, hit, cut = 0;
    bool ours_file = c->found && strcmp(c->files[c->hit.file].path, ed->file) == 0;
    char *mine;
    int r;

    /* Nothing to undo: the line we added is not in its file, or the line
     * in force holds what ours replaced. Only where ours is nowhere else
     * in the file: an admin who pasted their old line below our trial's
     * put it in force, but ours, left above, would come back the day
     * theirs is removed as a duplicate (taken back below, as shadowed).
     * And only where ed->file is still part of the configuration: one
     * that no longer is (smb_conf pointed elsewhere since) has not been
     * read, and the caller looks in ed->file itself (-ECANCELED below). */
    if (shadowed_file(c, ed) != NULL && find_shadowed(c, ed, &at, &cut) == NULL) {
        if (!c->found && ed->original[0] == '\0')
            return err_set(e, -EALREADY, "%s: the line smbtuned added is not there", ed->file);
        if (ours_file && c->hit.end - c->hit.start == strlen(ed->original) &&
            memcmp(c->files[c->hit.file].buf + c->hit.start, ed->original, strlen(ed->original)) ==
                0)
            return err_set(e, -EALREADY,
                           "%s:%d: socket options holds what smbtuned's edit replaced, '%s'",
                           ed->file, c->hit.line, c->value);
    }
    if (ours_file) {
        f = &c->files[c->hit.file];
        hit = c->hit.end - c->hit.start;
        at = c->hit.start - ed->line_off;
        cut = 0;
        if (c->hit.start >= ed->line_off) {
            if (hit == ed->line_len && holds(f, at, ed, ed->written + ed->line_off, hit))
                cut = wlen;
            else if (ed->prev && hit == strlen(ed->prev) && holds(f, at, ed, ed->prev, hit))
                cut = wlen - ed->line_len + hit;
        }
        if (cut > 0)
            return splice(f, at, cut, ed->original, out, outlen) < 0
                       ? err_set(e, -ENOMEM, "out of memory")
                       : 0;
    }
    /* The line in force is not ours as we wrote it: someone else's later
     * line wins (in [global], or in a file included after ours), or ours
     * was changed. Ours, where it is still there as we wrote it, goes back
     * to what it replaced: theirs stays in force, and ours cannot come
     * back into force the day theirs is removed. */
    f = find_shadowed(c, ed, &at, &cut);
    if (f != NULL) {
        if (splice(f, at, cut, ed->original, out, outlen) < 0)
            return err_set(e, -ENOMEM, "out of memory");
        if (c->found)
            err_set(e, 0,
                    "%s:%d: this socket options line, not the one smbtuned wrote in %s, is in "
                    "force: smbtuned's was taken back, this one stands",
                    c->files[c->hit.file].path, c->hit.line, ed->file);
        else
            err_set(e, 0,
                    "%s: the socket options line smbtuned wrote was no longer in force: it was "
                    "taken back",
                    ed->file);
        return SMBCONF_UNDONE_SHADOWED;
    }
    if (!ours_file)
        return err_set(e, -ECANCELED,
                       "the socket options line smbtuned wrote in %s is no longer the one in "
                       "force: leaving the file as it is",
                       ed->file);
    /* Both values, so that a hold's reason shows the admin what was
     * found against what smbtuned had put there (a value is no secret). */
    mine = smbconf_edit_value(ed);
    r = err_set(e, -ECANCELED,
                "%s:%d: the socket options line was changed since smbtuned wrote it: it holds "
                "'%s' where smbtuned wrote '%s'; leaving it as it is",
                ed->file, c->hit.line, c->value, mine ? mine : "?");
    free(mine);
    return r;
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
