/* Unit tests for lib/config_scan: the structure of /etc/smbtuned.conf read
 * by libconfuse's lexer rules before libconfuse reads it. Each refusal
 * names the file, the line and what was expected; what is inside comments
 * and strings is not structure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "config_scan.h"

static void check_ok(const char *text)
{
    struct err e = {{0}};

    if (config_scan(text, "f.conf", &e) != 0)
        fail_msg("scan of\n%s\nrefused it: '%s'", text, e.msg);
}

static void check_refused(const char *text, const char *want)
{
    struct err e = {{0}};

    assert_int_equal(config_scan(text, "/etc/smbtuned.conf", &e), -EINVAL);
    if (strstr(e.msg, want) == NULL)
        fail_msg("error for\n%s\nis '%s', expected '%s'", text, e.msg, want);
}

static void test_well_formed(void **state)
{
    (void)state;
    check_ok("");
    check_ok("probe {\n  size = 1M\n}\ntune {\n  mode = advise\n}\n");
    check_ok("probe{}tune{}");
    /* A list's parentheses and commas are not structure. */
    check_ok("tune {\n  x = (a, b, \"c\")\n}\n");
    /* More sections than the scan remembers: libconfuse refuses the unknown ones. */
    check_ok("a{}b{}c{}d{}e{}f{}g{}h{}i{}j{}");
}

/* The end of the file would close the section; the rest of the file would
 * be ignored after an open comment or string. */
static void test_open_brace_comment_string(void **state)
{
    (void)state;
    check_refused("probe {\n  size = 1M\n",
                  "/etc/smbtuned.conf:1: '{' is not closed: expected '}'");
    check_refused("probe {\n  size = 1M\n}\ntune {\n  mode = advise\n\n",
                  "/etc/smbtuned.conf:4: '{' is not closed");
    check_refused("probe {\n  size = 1M\n}\n/* old\ntune {\n  mode = bogus\n}\n",
                  "/etc/smbtuned.conf:4: comment '/*' is not closed: expected '*/'");
    check_refused("probe {\n  size = 1M\n}\n\"\n", "/etc/smbtuned.conf:4: string is not closed");
    check_refused("probe {\n  url = 'smb://x/y\n}\n",
                  "/etc/smbtuned.conf:2: string is not closed: expected '");
    /* The line of an open string is where it starts. */
    check_refused("probe {\n  url = \"a\nb\nc\n", "/etc/smbtuned.conf:2: string is not closed");
    /* A backslash takes the closing quote along. */
    check_refused("probe {\n  url = \"a\\\"\n}\n", ":2: string is not closed");
}

static void test_stray_and_deep_braces(void **state)
{
    (void)state;
    check_refused("probe {\n  size = 1M\n}\n}\n",
                  "/etc/smbtuned.conf:4: '}' without a '{' before it");
    check_refused("}", "/etc/smbtuned.conf:1: '}' without a '{'");
    check_refused("a{b{c{d{e{f{g{h{\ni{}}}}}}}}}",
                  "/etc/smbtuned.conf:2: braces nested too deeply");
    /* Eight levels are still the scan's to count (libconfuse refuses them). */
    check_ok("a{b{c{d{e{f{g{h{}}}}}}}}");
}

static void test_section_twice(void **state)
{
    (void)state;
    check_refused("probe {\n  size = 1M\n}\n\nprobe {\n  size = 2M\n}\n",
                  "/etc/smbtuned.conf:5: section probe is given twice (first at line 1)");
    check_refused("tune{}probe{}\ntune {\n}\n",
                  "/etc/smbtuned.conf:2: section tune is given twice (first at line 1)");
    /* Blanks and line ends between the name and its brace keep the name. */
    check_refused("tune\n{\n}\ntune \t\n\n {}\n", ":4: section tune is given twice");
    /* A nested brace is not a section; nor is a word cut off by '='. */
    check_ok("probe {\n  x {\n  }\n  x {\n  }\n}\n");
    check_ok("probe {}\nprobe =\n{}\n");
    /* A prefix is another name. */
    check_ok("probe {}\nprob {}\n");
    /* libconfuse reads a quoted name as the same section (and merges the two). */
    check_refused("tune {\n  mode = advise\n}\n\"tune\" {\n}\n",
                  "/etc/smbtuned.conf:4: section tune is given twice (first at line 1)");
    check_refused("'probe' {}\nprobe {}\n", ":2: section probe is given twice (first at line 1)");
    /* A quoted value inside a section is not a section's name. */
    check_ok("probe {\n  url = \"tune\"\n}\ntune {}\n");
}

/* libconfuse would put in the values of the caller's environment. */
static void test_environment(void **state)
{
    (void)state;
    check_refused("probe {\n  url = ${SMBTUNED_TEST_URL}\n}\n",
                  "/etc/smbtuned.conf:2: '${' is not allowed");
    check_refused("probe {\n\n  url = \"smb://${SMBTUNED_TEST_HOST:-127.0.0.1}/share\"\n}\n",
                  "/etc/smbtuned.conf:3: '${' is not allowed");
    check_refused("probe {\n  size = 1M${X}\n}\n", "/etc/smbtuned.conf:2: '${' is not allowed");
    check_refused("${X} {\n}\n", "/etc/smbtuned.conf:1: '${' is not allowed");
    /* A $ alone is a character like any other. */
    check_ok("probe {\n  directory = a$b\n  url = \"$\"\n}\n");
}

/* What libconfuse would take without a word: section|option from the top
 * level (past the section's checks), a NUL escape that cuts a value
 * short, a section name whose escape hides a second one, a stray + or *. */
static void test_paths_nul_escapes_strays(void **state)
{
    (void)state;
    check_refused("tune {\n  max_size = 1M\n}\ntune|max_size = 2M\n",
                  "/etc/smbtuned.conf:4: 'tune|max_size': a name with '|' is not read here");
    check_refused("\"tune|trials\" = live\n", ":1: 'tune|trials': a name with '|'");
    check_refused("probe {\n  a|b {\n}\n", ":2: 'a|b': a name with '|'");
    /* in a value, '|' is a character like any other */
    check_ok("probe {\n  directory = \"a|b\"\n  url = x|y\n}\n");
    for (const char *const *v = (const char *const[]){"\\0", "\\00", "\\000", "\\0009", "\\x0",
                                                      "\\x00", "\\x001", NULL};
         *v != NULL; v++) {
        char text[128];

        snprintf(text, sizeof(text), "probe {\n\n  url = \"smb://h/s%sjunk\"\n}\n", *v);
        check_refused(text, "/etc/smbtuned.conf:3: a NUL byte");
    }
    /* escapes of other bytes, and a NUL escape in single quotes (no escapes there) */
    check_ok("probe {\n  url = \"\\01\\x0a\\x10\\\\0\"\n  directory = '\\0'\n}\n");
    check_refused("\"\\x70robe\" {\n}\nprobe {\n}\n", ":1: '\\x70robe': a name with a backslash");
    check_refused("tune {\n  max_size = +8M\n}\n", ":2: a stray '+'");
    check_refused("tune {\n  max_size = 8M*\n}\n", ":2: a stray '*'");
    check_ok("tune {\n  x += (a)\n}\n");
}

/* A url line with an '@': refused before libconfuse cuts an unquoted
 * value short (at '#', a blank, '=' or ','), never showing the line. */
static void test_url_with_a_password(void **state)
{
    static const char *const lines[] = {
        "  url = smb://admin:s3cr#et@fs/share\n", "  url = smb://admin:s3 cr@fs/share\n",
        "  url = smb://admin:p=w@fs/share\n",     "  url=\"smb://admin:pw@fs/share\"\n",
        "  \"url\" = smb://a:p,w@fs/share\n",     "  url = smb://fs/share # mail admin@fs\n",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        char text[256];
        struct err e = {{0}};

        snprintf(text, sizeof(text), "probe {\n%s}\n", lines[i]);
        check_refused(text, "/etc/smbtuned.conf:2: probe: URL must not carry a user or password");
        config_scan(text, "/etc/smbtuned.conf", &e);
        if (strstr(e.msg, "admin") != NULL || strstr(e.msg, "fs/") != NULL)
            fail_msg("error for\n%s\nshows the line: '%s'", text, e.msg);
    }
    /* an '@' on another line, or in another option's value, is not the url's */
    check_ok("probe {\n  url = smb://fs/share\n  # admin@fs\n  directory = a@b\n}\n");
}

/* Comments and strings hide braces and ${ from the scan, as from
 * libconfuse: a single-quoted string is never expanded, an escaped $ in a
 * double-quoted one is not either. */
static void test_comments_and_strings(void **state)
{
    (void)state;
    check_ok("/* tune {\n ${X} */ probe { # {{ ${X}\n}\n");
    check_ok("probe {\n  url = \"a}b{\" // }\n  x = 'x\\'${y}{'\n}\n");
    check_ok("probe {\n  x = \"/* \\\" \\${z}\" /* } */\n}\n");
    /* Lines inside a comment or a string still count. */
    check_refused("/*\n\n*/ probe {\n", "/etc/smbtuned.conf:3: '{' is not closed");
    check_refused("x = \"a\n\nb\" }", "/etc/smbtuned.conf:3: '}' without a '{'");
    /* A comment's end is not the start of another. */
    check_refused("/*/ {", ":1: comment '/*' is not closed");
    /* A // inside a word is not a comment; at a token's start it is. */
    check_refused("x = a//b }", ":1: '}' without a '{'");
    check_ok("x = //b }");
}

/* The copy libconfuse reads: comments are blanks, newlines and strings
 * (which may hold comment characters) stay. */
static void test_blank_comments(void **state)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"# a\n\n// b\ntune {\n}", "   \n\n    \ntune {\n}"},
        {"x = 1 # c\n", "x = 1    \n"},
        {"/* a\nb */x", "    \n    x"},
        {"u = \"# //\" /* \" */\n", "u = \"# //\"        \n"},
        {"x = a//b\n", "x = a//b\n"},
    };
    struct err e = {{0}};

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[64];

        assert_int_equal(config_scan_blank(cases[i].in, "x.conf", out, &e), 0);
        assert_string_equal(out, cases[i].out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_well_formed),
        cmocka_unit_test(test_open_brace_comment_string),
        cmocka_unit_test(test_stray_and_deep_braces),
        cmocka_unit_test(test_section_twice),
        cmocka_unit_test(test_environment),
        cmocka_unit_test(test_paths_nul_escapes_strays),
        cmocka_unit_test(test_url_with_a_password),
        cmocka_unit_test(test_comments_and_strings),
        cmocka_unit_test(test_blank_comments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
