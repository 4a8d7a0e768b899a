/* Unit tests for lib/smbconf: which line Samba uses, and that a rewrite
 * touches nothing else. Files live in memory (struct smbconf_io). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "smbconf.h"

struct mem_file {
    const char *path;
    const char *text;
};

static int mem_read(void *ctx, const char *path, char **buf, size_t *len, struct err *e)
{
    (void)e;
    for (const struct mem_file *f = ctx; f->path; f++) {
        if (strcmp(f->path, path) == 0) {
            *buf = strdup(f->text);
            *len = strlen(f->text);
            return 0;
        }
    }
    return -ENOENT;
}

static int mem_glob(void *ctx, const char *pattern, char ***paths, size_t *n)
{
    *paths = calloc(16, sizeof(char *));
    *n = 0;
    for (const struct mem_file *f = ctx; f->path; f++)
        if (fnmatch(pattern, f->path, 0) == 0)
            (*paths)[(*n)++] = strdup(f->path);
    return 0;
}

static int parse(struct mem_file *files, struct smbconf *c, struct err *e)
{
    struct smbconf_io io = {mem_read, mem_glob, files, false};

    return smbconf_parse(c, files[0].path, &io, e);
}

/* The value in force and its place, for a one-file config. */
static void check_hit(const char *text, const char *value, int line)
{
    struct mem_file files[] = {{"/etc/smb.conf", text}, {NULL, NULL}};
    struct smbconf c;
    struct err e = {{0}};

    assert_int_equal(parse(files, &c, &e), 0);
    assert_string_equal(c.value, value);
    if (line == 0) {
        assert_false(c.found);
    } else {
        assert_true(c.found);
        assert_int_equal(c.hit.line, line);
    }
    smbconf_free(&c);
}

static void test_sections(void **state)
{
    (void)state;
    check_hit("[global]\n socket options = A\n", "A", 2);
    check_hit("socket options = A\n[share]\n path = /x\n", "A", 1);
    check_hit("[ Global ]\nsocket options = A\n[GLOBALS]\nsocket options = B\n", "B", 4);
    /* a share section's copy is ignored; the last global one wins */
    check_hit("[global]\nsocket options = A\n[share]\nsocket options = B\n", "A", 2);
    check_hit("[global]\nsocket options = A\n[share]\n[global]\nsocket options = C\n", "C", 5);
    check_hit("[share]\nsocket options = B\n", "TCP_NODELAY", 0);
}

static void test_names_and_comments(void **state)
{
    (void)state;
    check_hit("[global]\nSocketOptions=A\n", "A", 2);
    check_hit("[global]\n  SOCKET   options =  A  \n", "A", 2);
    check_hit("[global]\nsocket_options = A\n", "TCP_NODELAY", 0);
    check_hit("[global]\n# socket options = A\n; socket options = B\n", "TCP_NODELAY", 0);
    /* text after a value is part of it */
    check_hit("[global]\nsocket options = A # comment\n", "A # comment", 2);
    /* CRLF and tabs */
    check_hit("[global]\r\n\tsocket options\t=\tA\tB\r\n", "A\tB", 2);
}

static void test_continuation(void **state)
{
    (void)state;
    check_hit("[global]\nsocket options = A \\\n   B\nx = 1\n", "A B", 2);
    check_hit("[global]\nsocket options = A\\\nB\n", "AB", 2);
    /* a comment line does not continue */
    check_hit("[global]\n# x \\\nsocket options = A\n", "A", 3);
    /* a continued line before ours shifts the line number */
    check_hit("[global]\nfoo = 1 \\\n 2\nsocket options = A\n", "A", 4);
}

static void test_include(void **state)
{
    struct mem_file files[] = {
        {"/etc/smb.conf", "[global]\nsocket options = A\ninclude = /etc/inc.conf\n"
                          "include = /etc/missing.conf\n"},
        {"/etc/inc.conf", "# included\nsocket options = B\n"},
        {NULL, NULL},
    };
    struct smbconf c;
    struct err e;

    (void)state;
    assert_int_equal(parse(files, &c, &e), 0);
    assert_string_equal(c.value, "B");
    assert_string_equal(c.files[c.hit.file].path, "/etc/inc.conf");
    assert_int_equal(c.hit.line, 2);
    smbconf_free(&c);

    /* a quoted line that a later one overrides is not in force */
    files[0].text = "[global]\nsocket options = \"A B\"\ninclude = /etc/inc.conf\n";
    files[1].text = "socket options = B\n";
    assert_int_equal(parse(files, &c, &e), 0);
    assert_string_equal(c.value, "B");
    smbconf_free(&c);

    /* an include that opens a share section leaves us in it */
    files[0].text = "[global]\ninclude = /etc/inc.conf\nsocket options = A\n";
    files[1].text = "[share]\npath = /x\n";
    assert_int_equal(parse(files, &c, &e), 0);
    assert_string_equal(c.value, "TCP_NODELAY");
    smbconf_free(&c);
}

static void check_refused(struct mem_file *files, const char *needle)
{
    struct smbconf c;
    struct err e = {{0}};

    assert_true(parse(files, &c, &e) < 0);
    if (strstr(e.msg, needle) == NULL)
        fail_msg("message '%s' lacks '%s'", e.msg, needle);
}

static void test_refusals(void **state)
{
    struct mem_file f[] = {{"/etc/smb.conf", ""}, {"/etc/smb.conf.host1", ""}, {NULL, NULL}};

    (void)state;
    f[0].text = "[global]\nconfig backend = registry\n";
    check_refused(f, "/etc/smb.conf:2: 'config backend = registry'");
    f[0].text = "[global]\nsocket options = A\ninclude = registry\n";
    check_refused(f, "/etc/smb.conf:3: 'include = registry'");
    f[0].text = "[global]\nconfig file = /etc/other.conf\n";
    check_refused(f, "/etc/smb.conf:2: 'config file' makes smbd switch");
    check_refused(f, "(config file = /etc/other.conf)");
    f[0].text = "[global]\ninclude = inc.conf\n";
    check_refused(f, "relative path");
    f[0].text = "[global]\n[share\n";
    check_refused(f, "/etc/smb.conf:2: section header without ']'");
    f[0].text = "= x\n";
    check_refused(f, "without a name");
    /* Samba groups quoted words into one option: the line in force is
     * refused, wherever the quote sits */
    f[0].text = "[global]\nsocket options = \"TCP_NODELAY SO_RCVBUF=65536\"\n";
    check_refused(f, "/etc/smb.conf:2: 'socket options' holds a double quote");
    f[0].text = "[global]\nsocket options = TCP_NODELAY \"SO_RCVBUF=8192\"\n";
    check_refused(f, "/etc/smb.conf:2: 'socket options' holds a double quote");
    f[0].text = "[global]\nsocket options = SO_RCVBUF=A\nsocket options = SO_RCVBUF=\"8192\"\n";
    check_refused(f, "/etc/smb.conf:3: 'socket options' holds a double quote");
    /* a backslash before a dropped comma would end the line written and
     * join [share] to it */
    f[0].text = "[global]\nsocket options = SO_RCVBUF=65536 x\\,\n[share]\n";
    check_refused(f, "/etc/smb.conf:2: 'socket options' holds a backslash");

    /* a %-include after our line that can name a file setting it */
    f[0].text = "[global]\nsocket options = A\ninclude = /etc/smb.conf.%m\n";
    f[1].text = "socket options = B\n";
    check_refused(f, "cannot know which socket options are in force: /etc/smb.conf:3: this "
                     "include depends on the client");
    check_refused(f, "(include = /etc/smb.conf.%m)");
    /* ... or opening a section before our line */
    f[0].text = "[global]\ninclude = /etc/smb.conf.%m\nsocket options = A\n";
    f[1].text = "[share]\n";
    check_refused(f, "cannot tell which section");

    /* %$(VAR) comes from smbd's environment: the glob would name nothing
     * and call it harmless while smbd reads a file that overrides us */
    f[0].text = "[global]\nsocket options = A\ninclude = /etc/smb.conf.%$(SITE)\n";
    f[1].text = "workgroup = X\n";
    check_refused(f, "/etc/smb.conf:3: an include with %$(...) names a file from smbd's "
                     "environment");
    check_refused(f, "(include = /etc/smb.conf.%$(SITE))");
    f[0].text = "[s]\ninclude = /etc/%m.%$(SITE)\n[global]\nsocket options = A\n";
    check_refused(f, "/etc/smb.conf:2: an include with %$(...)");

    /* a relative %-include would be globbed in our working directory,
     * not smbd's */
    f[0].text = "[global]\nsocket options = A\ninclude = smb.conf.%m\n";
    check_refused(f, "/etc/smb.conf:3: a relative path in an include");
    /* each part a client can make "", "." or ".." triples the patterns */
    f[0].text = "[global]\ninclude = /%m/%m/%m/%m/%U/smb.conf\n";
    check_refused(f, "/etc/smb.conf:2: cannot check the files a client-dependent include can "
                     "name: more than 4 parts of its path");
}

static void test_harmless_percent_include(void **state)
{
    struct mem_file f[] = {
        {"/etc/smb.conf", "[global]\nsocket options = A\ninclude = /etc/smb.conf.%m\n"},
        {"/etc/smb.conf.host1", "workgroup = X\n"},
        {NULL, NULL},
    };
    struct smbconf c;
    struct err e;

    (void)state;
    assert_int_equal(parse(f, &c, &e), 0);
    assert_string_equal(c.value, "A");
    smbconf_free(&c);
}

/* An accepted %-include is said, with its file and line and what a file
 * it names later could do. */
static void check_note(const char *text, const char *what, int line)
{
    struct mem_file f[] = {
        {"/etc/smb.conf", text}, {"/etc/smb.conf.host1", "workgroup = X\n"}, {NULL, NULL}};
    struct smbconf c;
    struct err e = {{0}};

    assert_int_equal(parse(f, &c, &e), 0);
    if (what == NULL) {
        assert_int_equal(c.nnotes, 0);
    } else {
        assert_int_equal(c.nnotes, 1);
        assert_string_equal(c.notes[0].file, "/etc/smb.conf");
        assert_int_equal(c.notes[0].line, line);
        assert_string_equal(c.notes[0].include, "/etc/smb.conf.%m");
        if (strstr(c.notes[0].what, what) == NULL)
            fail_msg("note '%s' lacks '%s'", c.notes[0].what, what);
    }
    smbconf_free(&c);
}

static void test_percent_include_notes(void **state)
{
    (void)state;
    /* after the line in force, or with no line at all: it could override */
    check_note("[global]\nsocket options = A\ninclude = /etc/smb.conf.%m\n",
               "could override socket options for some clients", 3);
    check_note("[global]\ninclude = /etc/smb.conf.%m\n",
               "could override socket options for some clients", 2);
    /* in a share section after it: a file can open [global] again */
    check_note("[global]\nsocket options = A\n[s]\ninclude = /etc/smb.conf.%m\n",
               "could override socket options", 4);
    /* right before it: it could move the line out of [global] */
    check_note("[global]\ninclude = /etc/smb.conf.%m\nsocket options = A\n", "open a section", 2);
    /* before a header that comes before the line: it can do neither */
    check_note("[s]\ninclude = /etc/smb.conf.%m\n[global]\nsocket options = A\n", NULL, 0);
    check_note("[global]\nsocket options = A\n", NULL, 0);
}

/* files[0] = /c/0 including /c/1 ... /c/n, which sets the value. */
static struct mem_file *chain(int n)
{
    struct mem_file *f = calloc((size_t)n + 2, sizeof(*f));
    char *p, *t;

    for (int i = 0; i <= n; i++) {
        assert_true(asprintf(&p, "/c/%d", i) > 0);
        if (i < n)
            assert_true(asprintf(&t, "[global]\ninclude = /c/%d\n", i + 1) > 0);
        else
            assert_true(asprintf(&t, "socket options = DEPTH%d\n", n) > 0);
        f[i].path = p;
        f[i].text = t;
    }
    return f;
}

static void chain_free(struct mem_file *f)
{
    for (struct mem_file *g = f; g->path; g++) {
        free((char *)g->path);
        free((char *)g->text);
    }
    free(f);
}

/* Samba loads 100 nested includes and refuses 101 (checked with testparm
 * 4.17); a deep chain without a loop is not called a loop. */
static void test_include_depth(void **state)
{
    static const int ok[] = {17, 50, 99, 100};
    struct smbconf c;
    struct err e = {{0}};
    struct mem_file *f;

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char want[32];

        f = chain(ok[i]);
        if (parse(f, &c, &e) != 0)
            fail_msg("a %d-deep chain: %s", ok[i], e.msg);
        snprintf(want, sizeof(want), "DEPTH%d", ok[i]);
        assert_string_equal(c.value, want);
        smbconf_free(&c);
        chain_free(f);
    }
    f = chain(101);
    check_refused(f, "/c/100:2: includes nested more than 100 deep, Samba's limit");
    assert_null(strstr(e.msg, "loop"));
    chain_free(f);

    /* a real loop is named as one */
    {
        struct mem_file loop[] = {
            {"/c/a", "include = /c/b\n"}, {"/c/b", "include = /c/a\n"}, {NULL, NULL}};

        check_refused(loop, "/c/b:1: an include loop: /c/a is already being read");
    }
}

/* 8 includes per file over 14 levels: 8^14 reads unless bounded. */
static void test_include_fanout(void **state)
{
    struct mem_file f[16] = {{0}};
    char *texts[15], *paths[15];

    (void)state;
    for (int i = 0; i < 15; i++) {
        assert_true(asprintf(&paths[i], "/f/%d", i) > 0);
        if (i < 14) {
            char one[32];
            size_t n = 0;

            texts[i] = calloc(8, sizeof(one));
            snprintf(one, sizeof(one), "include = /f/%d\n", i + 1);
            for (int k = 0; k < 8; k++)
                n += (size_t)sprintf(texts[i] + n, "%s", one);
        } else {
            texts[i] = strdup("workgroup = W\n");
        }
        f[i].path = paths[i];
        f[i].text = texts[i];
    }
    check_refused(f, "more than 10000 files read through includes");
    for (int i = 0; i < 15; i++) {
        free(paths[i]);
        free(texts[i]);
    }
}

/* Backup names: every path its own, so backups never overwrite another's. */
static void test_backup_name(void **state)
{
    static const char *const paths[][2] = {
        {"/a/b.conf", "a%2Fb.conf"},
        {"/a_b.conf", "a_b.conf"},
        {"/a%2Fb.conf", "a%252Fb.conf"},
        {"/etc/samba/smb.conf", "etc%2Fsamba%2Fsmb.conf"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        char *n = smbconf_backup_name(paths[i][0]);

        assert_string_equal(n, paths[i][1]);
        free(n);
    }
}

/* Render value into a one-file config and compare the whole result. */
static void check_render(const char *text, const char *value, const char *want)
{
    struct mem_file files[] = {{"/etc/smb.conf", text}, {NULL, NULL}};
    struct smbconf c, c2;
    struct smbconf_edit ed;
    struct err e = {{0}};
    char *out, *back;
    size_t outlen, backlen;

    assert_int_equal(parse(files, &c, &e), 0);
    assert_int_equal(smbconf_render(&c, value, &out, &outlen, &ed, &e), 0);
    assert_string_equal(out, want);
    assert_int_equal(outlen, strlen(want));

    /* the new file reads back as the value, and the edit can be undone */
    files[0].text = out;
    assert_int_equal(parse(files, &c2, &e), 0);
    assert_string_equal(c2.value, value);
    assert_int_equal(smbconf_unrender(&c2, &ed, &back, &backlen, &e), 0);
    assert_string_equal(back, text);
    free(back);
    smbconf_free(&c2);
    smbconf_edit_free(&ed);
    smbconf_free(&c);
    free(out);
}

static void test_render(void **state)
{
    (void)state;
    check_render("# c\n[global]\n   socket options = TCP_NODELAY  \nx=1", "TCP_NODELAY SO_RCVBUF=1",
                 "# c\n[global]\n   socket options = TCP_NODELAY SO_RCVBUF=1\nx=1");
    check_render("[global]\r\n\tSocket Options=A \\\r\n B\r\n[s]\r\n", "C",
                 "[global]\r\n\tSocket Options=C\r\n[s]\r\n");
    /* added under the first global header, with the next line's indent */
    check_render("[share]\n  path = /x\n[global]\n   workgroup = W\n", "TCP_NODELAY",
                 "[share]\n  path = /x\n[global]\n   socket options = TCP_NODELAY\n"
                 "   workgroup = W\n");
    /* no global header: created at the top, in the file's line ending */
    check_render("[share]\r\npath = /x\r\n", "V",
                 "[global]\r\n\tsocket options = V\r\n[share]\r\npath = /x\r\n");
    /* a header at the very end without a newline: still no final newline */
    check_render("x = 1\n[global]", "V", "x = 1\n[global]\n\tsocket options = V");
    check_render("", "V", "[global]\n\tsocket options = V\n");
    /* A lone carriage return in an indent (Samba skips it as a blank) is
     * not copied into the line written, which could not be undone. */
    check_render("[global]\n\r\tsocket options = TCP_NODELAY\n", "V",
                 "[global]\n\tsocket options = V\n");
    check_render("[global]\n\r\tworkgroup = W\n", "V",
                 "[global]\n\tsocket options = V\n\r\tworkgroup = W\n");
}

/* Render value on before, then take it back from after (an admin's
 * edit of the rendered file; inc: an included file's text, or NULL):
 * the code, and the bytes back for the main file when it is not < 0. */
static int unrender_after(const char *before, const char *value, const char *after, const char *inc,
                          const char *want)
{
    struct mem_file files[] = {{"/etc/smb.conf", before}, {"/etc/inc.conf", ""}, {NULL, NULL}};
    struct smbconf c, c2;
    struct smbconf_edit ed;
    struct err e = {{0}};
    char *out, *back = NULL;
    size_t outlen, backlen;
    int r;

    assert_int_equal(parse(files, &c, &e), 0);
    assert_int_equal(smbconf_render(&c, value, &out, &outlen, &ed, &e), 0);
    files[0].text = after;
    files[1].text = inc ? inc : "";
    assert_int_equal(parse(files, &c2, &e), 0);
    r = smbconf_unrender(&c2, &ed, &back, &backlen, &e);
    if (r >= 0) {
        assert_string_equal(ed.file, "/etc/smb.conf");
        assert_string_equal(back, want);
        free(back);
    }
    smbconf_free(&c2);
    smbconf_edit_free(&ed);
    smbconf_free(&c);
    free(out);
    return r;
}

/* An admin's later line is in force over ours: ours goes back to what it
 * replaced (or goes, if we added it), theirs stays, in force. Where ours
 * cannot be told apart or is not one line, nothing is taken back. */
static void test_unrender_shadowed_line(void **state)
{
    (void)state;
    /* a second line later in [global] */
    assert_int_equal(unrender_after("[global]\nsocket options = A\n", "B",
                                    "[global]\nsocket options = B\nsocket options = ADMIN\n", NULL,
                                    "[global]\nsocket options = A\nsocket options = ADMIN\n"),
                     SMBCONF_UNDONE_SHADOWED);
    /* in a file included after ours */
    assert_int_equal(unrender_after("[global]\nsocket options = A\ninclude = /etc/inc.conf\n", "B",
                                    "[global]\nsocket options = B\ninclude = /etc/inc.conf\n",
                                    "[global]\nsocket options = ADMIN\n",
                                    "[global]\nsocket options = A\ninclude = /etc/inc.conf\n"),
                     SMBCONF_UNDONE_SHADOWED);
    /* a line we added inside [global] goes */
    assert_int_equal(
        unrender_after("[global]\nworkgroup = W\n", "B",
                       "[global]\nsocket options = B\nworkgroup = W\nsocket options = ADMIN\n",
                       NULL, "[global]\nworkgroup = W\nsocket options = ADMIN\n"),
        SMBCONF_UNDONE_SHADOWED);
    /* the admin pasted their old line back below ours: theirs is in
     * force and holds what ours replaced, but ours, left, would come back
     * the day theirs goes as a duplicate */
    assert_int_equal(unrender_after("[global]\nsocket options = A\n", "B",
                                    "[global]\nsocket options = B\nsocket options = A\n", NULL,
                                    "[global]\nsocket options = A\nsocket options = A\n"),
                     SMBCONF_UNDONE_SHADOWED);
    /* nothing of ours left: nothing to undo */
    assert_int_equal(unrender_after("[global]\nsocket options = A\n", "B",
                                    "[global]\nsocket options = A\n", NULL, NULL),
                     -EALREADY);
    assert_int_equal(
        unrender_after("[global]\nworkgroup = W\n", "B", "[global]\nworkgroup = W\n", NULL, NULL),
        -EALREADY);
    /* ours twice (the admin copied it): whose is which is unknown */
    assert_int_equal(unrender_after("[global]\nsocket options = A\n", "B",
                                    "[global]\nsocket options = B\nsocket options = B\n"
                                    "socket options = ADMIN\n",
                                    NULL, NULL),
                     -ECANCELED);
    /* ours edited, theirs later: theirs, and what they made of ours, stand */
    assert_int_equal(unrender_after("[global]\nsocket options = A\n", "B",
                                    "[global]\nsocket options = B2\nsocket options = ADMIN\n", NULL,
                                    NULL),
                     -ECANCELED);
    /* ours came with a [global] header of its own: taking both back could
     * move the admin's line under another section */
    assert_int_equal(unrender_after("[share]\npath = /x\n", "B",
                                    "[global]\n\tsocket options = B\n[share]\npath = /x\n"
                                    "[global]\nsocket options = ADMIN\n",
                                    NULL, NULL),
                     -ECANCELED);
}

/* files, parsed, take ed back to want. */
static void undo_gives(struct mem_file *files, const struct smbconf_edit *ed, const char *want)
{
    struct smbconf c;
    struct err e = {{0}};
    char *back;
    size_t backlen;

    assert_int_equal(parse(files, &c, &e), 0);
    assert_int_equal(smbconf_unrender(&c, ed, &back, &backlen, &e), 0);
    assert_string_equal(back, want);
    free(back);
    smbconf_free(&c);
}

/* A line we added in a file that is no longer part of the configuration
 * (smb_conf points at another file since): not "not there" (the record
 * would be dropped, our line left where smbd may still read it), but
 * -ECANCELED, on which the caller looks in that file itself. */
static void test_unrender_file_no_longer_read(void **state)
{
    struct mem_file files[] = {{"/etc/smb.conf", "[global]\nworkgroup = W\n"}, {NULL, NULL}};
    struct mem_file other[] = {{"/etc/other.conf", "[global]\nworkgroup = W\n"}, {NULL, NULL}};
    struct smbconf c, c2;
    struct smbconf_edit ed;
    struct err e = {{0}};
    char *out, *back = NULL;
    size_t outlen, backlen;

    (void)state;
    assert_int_equal(parse(files, &c, &e), 0);
    assert_int_equal(smbconf_render(&c, "B", &out, &outlen, &ed, &e), 0);
    assert_string_equal(ed.original, "");
    assert_int_equal(parse(other, &c2, &e), 0);
    assert_int_equal(smbconf_unrender(&c2, &ed, &back, &backlen, &e), -ECANCELED);
    assert_null(back);
    smbconf_free(&c2);
    /* read in its own file, it is taken back */
    files[0].text = out;
    undo_gives(files, &ed, "[global]\nworkgroup = W\n");
    smbconf_edit_free(&ed);
    smbconf_free(&c);
    free(out);
}

static void test_unrender_refuses_foreign_edit(void **state)
{
    struct mem_file files[] = {{"/etc/smb.conf", "[global]\nsocket options = A\n"}, {NULL, NULL}};
    struct smbconf c, c2;
    struct smbconf_edit ed;
    struct err e = {{0}};
    char *out, *back;
    size_t outlen, backlen;

    (void)state;
    assert_int_equal(parse(files, &c, &e), 0);
    assert_int_equal(smbconf_render(&c, "B", &out, &outlen, &ed, &e), 0);
    /* an admin changed our line meanwhile: theirs stands */
    files[0].text = "[global]\nsocket options = ADMIN\n";
    assert_int_equal(parse(files, &c2, &e), 0);
    assert_int_equal(smbconf_unrender(&c2, &ed, &back, &backlen, &e), -ECANCELED);
    /* the reason (a hold's) says what the line holds and what was ours */
    assert_string_equal(e.msg, "/etc/smb.conf:2: the socket options line was changed since "
                               "smbtuned wrote it: it holds 'ADMIN' where smbtuned wrote 'B'; "
                               "leaving it as it is");
    smbconf_free(&c2);
    /* an admin's edit elsewhere is kept by the undo */
    files[0].text = "# admin was here\n[global]\nsocket options = B\nnew = 1\n";
    undo_gives(files, &ed, "# admin was here\n[global]\nsocket options = A\nnew = 1\n");
    smbconf_edit_free(&ed);
    smbconf_free(&c);
    free(out);
}

/* Successive trial values chain into one edit whose undo gives back the
 * bytes before the first; an undone edit reports -EALREADY. */
static void test_edit_chain(void **state)
{
    const char *orig = "[share]\npath = /x\n";
    struct mem_file files[] = {{"/etc/smb.conf", orig}, {NULL, NULL}};
    struct smbconf c1, c2, c3;
    struct smbconf_edit e1, e2, chained;
    struct err e = {{0}};
    char *out1, *out2, *back;
    size_t n1, n2, nb;

    (void)state;
    assert_int_equal(parse(files, &c1, &e), 0);
    assert_int_equal(smbconf_render(&c1, "V1", &out1, &n1, &e1, &e), 0);
    files[0].text = out1;
    assert_int_equal(parse(files, &c2, &e), 0);
    assert_int_equal(smbconf_render(&c2, "V2 SO_RCVBUF=1", &out2, &n2, &e2, &e), 0);
    assert_int_equal(smbconf_edit_chain(&e1, &e2, &chained), 0);
    /* an edit that does not follow the first is refused */
    assert_int_equal(smbconf_edit_chain(&e2, &e1, &(struct smbconf_edit){0}), -EINVAL);

    /* the second step recorded but not (or no longer) on disk: the file
     * holds the first step's bytes, and the undo still gives back orig */
    files[0].text = out1;
    assert_int_equal(parse(files, &c3, &e), 0);
    assert_int_equal(smbconf_unrender(&c3, &chained, &back, &nb, &e), 0);
    assert_string_equal(back, orig);
    free(back);
    smbconf_free(&c3);
    /* neither step's line: someone else's, which stands */
    files[0].text = "[global]\n\tsocket options = V3\n[share]\npath = /x\n";
    assert_int_equal(parse(files, &c3, &e), 0);
    assert_int_equal(smbconf_unrender(&c3, &chained, &back, &nb, &e), -ECANCELED);
    smbconf_free(&c3);

    files[0].text = out2;
    assert_int_equal(parse(files, &c3, &e), 0);
    assert_int_equal(smbconf_unrender(&c3, &chained, &back, &nb, &e), 0);
    assert_string_equal(back, orig);
    smbconf_free(&c3);

    files[0].text = back;
    assert_int_equal(parse(files, &c3, &e), 0);
    assert_int_equal(smbconf_unrender(&c3, &chained, &out2, &nb, &e), -EALREADY);
    smbconf_free(&c3);

    free(back);
    free(out1);
    free(out2);
    smbconf_edit_free(&e1);
    smbconf_edit_free(&e2);
    smbconf_edit_free(&chained);
    smbconf_free(&c1);
    smbconf_free(&c2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sections),
        cmocka_unit_test(test_names_and_comments),
        cmocka_unit_test(test_continuation),
        cmocka_unit_test(test_include),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_harmless_percent_include),
        cmocka_unit_test(test_percent_include_notes),
        cmocka_unit_test(test_include_depth),
        cmocka_unit_test(test_include_fanout),
        cmocka_unit_test(test_backup_name),
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_unrender_refuses_foreign_edit),
        cmocka_unit_test(test_unrender_shadowed_line),
        cmocka_unit_test(test_unrender_file_no_longer_read),
        cmocka_unit_test(test_edit_chain),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
