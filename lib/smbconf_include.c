/* smbconf_include: `include = FILE` as Samba reads it (the file in place,
 * missing files and directories skipped, depth and loops bounded), and %-includes, whose
 * name depends on the client: every file their pattern names today is
 * checked through the glob callback, and what one could do later is
 * noted for the admin. Pure: files come through struct smbconf_io. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smbconf_int.h"

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

/* Does Samba skip an include that reads with error r? It reads a file
 * only when stat() succeeds and finds a regular file or a FIFO
 * (file_exist() in lib/util), and skips anything else without a word:
 * a missing file, a directory (`include = /etc/samba/conf.d`), a device
 * or a socket (`include = /dev/null`: -ENODEV, the io's word for it), a
 * path through a file, too long a name, a loop of links. Read as an
 * error, any of them would refuse every edit and every take-back while
 * Samba loads the configuration happily. A file that exists but cannot be
 * read, a FIFO (Samba reads it; smbtuned will not block on it) and one of
 * 64 MiB and more stay errors: what Samba reads there is unknown. */
static bool samba_skips(int r)
{
    return r == -ENOENT || r == -EISDIR || r == -ENODEV || r == -ENOTDIR || r == -ENAMETOOLONG ||
           r == -ELOOP;
}

/* Count one more file read; -E2BIG past MAX_FILES_READ. */
static int count_read(struct smbconf_walk *w, const char *fpath, int line)
{
    if (++w->nread <= MAX_FILES_READ)
        return 0;
    return err_set(w->e, -E2BIG,
                   "%s:%d: more than %d files read through includes: smbtuned stops there "
                   "(an include fan-out?)",
                   fpath, line, MAX_FILES_READ);
}

int smbconf_add_file(struct smbconf_walk *w, const char *path, size_t *idx, struct err *re)
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
static int include_risk(struct smbconf_walk *w, const char *path, bool *opens_section, bool *sets,
                        struct err *re)
{
    char *buf;
    size_t len, pos = 0, cap = 0;
    int lineno = 1, r;
    struct smbconf_lline ll = {0};

    r = w->io->read(w->io->ctx, path, &buf, &len, re);
    if (samba_skips(r))
        return 0;
    if (r < 0)
        return r;
    while ((r = smbconf_next_lline(buf, len, &pos, &lineno, &ll, &cap)) > 0) {
        char *name, *value;
        enum smbconf_kind kind = smbconf_split(ll.text, &name, &value);

        if (kind == SMBCONF_SECTION)
            *opens_section = true; /* with or without its ']' */
        else if (kind == SMBCONF_PARAM &&
                 (smbconf_wequal(name, "socket options") || smbconf_wequal(name, "include") ||
                  smbconf_wequal(name, "config file") || smbconf_wequal(name, "config backend")))
            *sets = true;
    }
    free(ll.text);
    free(buf);
    return r == -ENOMEM ? err_set(re, r, "out of memory") : r;
}

/* Remember a %-include that was accepted: what it could do later is
 * decided when the parse knows where the line in force is. */
static int add_note(struct smbconf_walk *w, const char *fpath, int line, const char *value)
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
void smbconf_finish_notes(struct smbconf_walk *w)
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

/* Characters glob() reads as pattern, which Samba reads as themselves:
 * each is escaped with a backslash (glob() without GLOB_NOESCAPE reads
 * "\[" as "["). */
static const char glob_special[] = "[]*?\\";

/* Components of a %-include that a macro can make "", "." or "..": each
 * one triples the patterns globbed, so past this many the include is
 * refused (a real per-client layout has one: /etc/samba/%m/smb.conf). */
#define MAX_VANISHING 4

/* The glob pattern for one component of a %-include (len bytes at s, no
 * '/'): literal characters escaped, each macro a '*' (with GLOB_PERIOD,
 * a '*' also matches a leading '.', which %m and %U can start with).
 * out has room for 2 * len. Returns the bytes written; *can_vanish says
 * whether Samba can make it "", "." or "..": a macro and at most two
 * literal dots (%m is "" or ".." for a client that says so). */
static size_t component_pattern(const char *s, size_t len, char *out, bool *can_vanish)
{
    size_t o = 0, dots = 0, others = 0;
    bool macro = false;

    for (size_t i = 0; i < len; i++) {
        /* Samba reads "%%m" as a literal '%' and then %m, and a '%' last
         * in a component as itself (there is no "%/"). Any other "%X" is
         * a '*': it also covers a "%X" Samba does not know and leaves. */
        if (s[i] == '%' && i + 1 < len && s[i + 1] != '%') {
            out[o++] = '*';
            macro = true;
            i++;
            continue;
        }
        if (strchr(glob_special, s[i]) != NULL)
            out[o++] = '\\';
        out[o++] = s[i];
        if (s[i] == '.')
            dots++;
        else
            others++;
    }
    *can_vanish = macro && others == 0 && dots <= 2;
    return o;
}

/* Write into out (room for 2 * strlen(value) + 1) variant `variant` of
 * the glob pattern for a %-include's path: each component that can
 * vanish is, by the variant's base-3 digits, its wildcard, "." (for ""
 * too: a//b is a/./b) or "..", which glob's '*' never matches. The last
 * component is left alone: as "", "." or ".." it names a directory, not
 * a file Samba could read. Returns how many components can vanish. */
static int include_pattern(const char *value, unsigned variant, char *out)
{
    static const char *const alt[] = {NULL, ".", ".."};
    const char *s = value;
    size_t o = 0;
    int k = 0;

    for (;;) {
        size_t len = strcspn(s, "/");
        bool vanish;
        size_t n = component_pattern(s, len, out + o, &vanish);

        if (vanish && s[len] == '/') {
            unsigned d = variant % 3;

            variant /= 3;
            k++;
            if (d > 0) {
                n = strlen(alt[d]); /* fits: the component is "%m" or longer */
                memcpy(out + o, alt[d], n);
            }
        }
        o += n;
        if (s[len] == '\0')
            break;
        out[o++] = '/';
        s += len + 1;
    }
    out[o] = '\0';
    return k;
}

/* Check every file that pat names today: count them, and note whether
 * one opens a section or sets what we must not miss. */
static int check_pattern(struct smbconf_walk *w, const char *pat, const char *fpath, int line,
                         bool *opens, bool *sets, struct err *re)
{
    char **paths = NULL;
    size_t n = 0;
    int r = w->io->glob(w->io->ctx, pat, &paths, &n);

    if (r < 0)
        err_set(re, r, "%s", strerror(-r));
    for (size_t k = 0; r >= 0 && k < n; k++) {
        r = count_read(w, fpath, line);
        if (r < 0)
            break;
        r = include_risk(w, paths[k], opens, sets, re);
    }
    for (size_t k = 0; k < n; k++)
        free(paths[k]);
    free(paths);
    return r;
}

/* Check the files every variant of a %-include's pattern names. */
static int check_variants(struct smbconf_walk *w, const char *fpath, int line, const char *value,
                          bool *opens, bool *sets, struct err *re)
{
    char *pat = malloc(2 * strlen(value) + 1);
    unsigned nvariants = 1;
    int k, r = 0;

    if (pat == NULL)
        return err_set(re, -ENOMEM, "out of memory");
    k = include_pattern(value, 0, pat);
    if (k > MAX_VANISHING) {
        free(pat);
        return err_set(re, -ENOTSUP,
                       "more than %d parts of its path can be made \"\", \".\" or \"..\" by "
                       "a client",
                       MAX_VANISHING);
    }
    for (int i = 0; i < k; i++)
        nvariants *= 3;
    for (unsigned v = 0; r >= 0 && v < nvariants; v++) {
        include_pattern(value, v, pat);
        r = check_pattern(w, pat, fpath, line, opens, sets, re);
    }
    free(pat);
    return r;
}

/* A %-include: the name depends on the client (%m, %U ...), so every
 * file the pattern can name today must be harmless; what it names later
 * is only noted. */
static int handle_percent_include(struct smbconf_walk *w, const char *fpath, int line,
                                  const char *value)
{
    bool opens = false, sets = false;
    struct err re = {{0}};
    int r = check_variants(w, fpath, line, value, &opens, &sets, &re);

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

int smbconf_handle_include(struct smbconf_walk *w, size_t fi, const struct smbconf_lline *ll,
                           const char *value, int depth)
{
    const char *fpath = w->c->files[fi].path;
    struct err re = {{0}};
    size_t idx;
    int r;

    if (w->in_global && smbconf_wequal(value, "registry"))
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
    /* Before the %-include: a relative one would be globbed against our
     * working directory, not smbd's. */
    if (value[0] != '/')
        return err_set(w->e, -ENOTSUP,
                       "%s:%d: a relative path in an include: smbd resolves it against its working "
                       "directory, which smbtuned cannot know (include = %s)",
                       fpath, ll->line, value);
    if (strchr(value, '%') != NULL)
        return handle_percent_include(w, fpath, ll->line, value);
    for (int k = 0; k <= depth; k++)
        if (strcmp(w->c->files[w->stack[k]].path, value) == 0)
            return err_set(w->e, -ELOOP,
                           "%s:%d: an include loop: %s is already being read, so it would "
                           "include itself for ever (Samba refuses it at depth %d)",
                           fpath, ll->line, value, SMBCONF_MAX_INCLUDE_DEPTH);
    if (depth >= SMBCONF_MAX_INCLUDE_DEPTH)
        return err_set(w->e, -ELOOP,
                       "%s:%d: includes nested more than %d deep, Samba's limit: Samba cannot "
                       "load this file (include = %s)",
                       fpath, ll->line, SMBCONF_MAX_INCLUDE_DEPTH, value);
    r = count_read(w, fpath, ll->line);
    if (r < 0)
        return r;
    r = smbconf_add_file(w, value, &idx, &re);
    if (samba_skips(r))
        return 0;
    if (r < 0)
        return err_set(w->e, r, "%s:%d: cannot read an included file: %s", fpath, ll->line, re.msg);
    w->stack[depth + 1] = idx;
    return smbconf_walk_file(w, idx, depth + 1);
}
