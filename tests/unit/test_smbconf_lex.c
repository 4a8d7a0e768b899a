/* Unit tests for lib/smbconf_lex: Samba's line rules (lib/util/tini.c) on
 * their own, with the byte offsets the editor rewrites by: where a logical
 * line starts, where its text starts, where its terminator is, and the
 * line numbers across comments and continuations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "smbconf_int.h"

struct want {
    const char *text;
    size_t start, cstart, end, next;
    int line;
};

/* Read every logical line of b and compare with want[0, n). */
static void check_lines(const char *b, const struct want *want, size_t n)
{
    struct smbconf_lline ll = {0};
    size_t pos = 0, cap = 0, i = 0;
    int lineno = 1, r;

    while ((r = smbconf_next_lline(b, strlen(b), &pos, &lineno, &ll, &cap)) > 0) {
        if (i >= n)
            fail_msg("line %zu '%s' of\n%s\nwas not expected", i, ll.text, b);
        assert_string_equal(ll.text, want[i].text);
        assert_int_equal(ll.tlen, strlen(want[i].text));
        assert_int_equal(ll.start, want[i].start);
        assert_int_equal(ll.cstart, want[i].cstart);
        assert_int_equal(ll.end, want[i].end);
        assert_int_equal(ll.next, want[i].next);
        assert_int_equal(ll.line, want[i].line);
        assert_int_equal(pos, want[i].next);
        i++;
    }
    assert_int_equal(r, 0);
    assert_int_equal(i, n);
    free(ll.text);
}

static void test_plain_lines(void **state)
{
    static const struct want w[] = {
        {"[global]", 0, 0, 8, 9, 1},
        {"a = b", 9, 11, 16, 17, 2},
        {"c=d", 17, 17, 20, 20, 3},
    };

    (void)state;
    check_lines("[global]\n  a = b\nc=d", w, 3);
    check_lines("", NULL, 0);
    check_lines("\n \t\n", NULL, 0);
}

/* Blank runs become their first character; the CR of a CRLF stays out of
 * the span (end points at it), so that a rewrite keeps the terminator; in
 * the text it is a trailing blank, which the split trims off the value. */
static void test_blanks_and_crlf(void **state)
{
    static const struct want w[] = {
        {"socket options =\tA B\r", 0, 0, 24, 26, 1},
        {"x = 1\r", 26, 26, 31, 33, 2},
    };

    (void)state;
    check_lines("socket   options =\t\tA  B\r\nx = 1\r\n", w, 2);
}

/* Comments are whole lines starting with # or ; after blanks, and end at
 * their newline even after a `\`. Text after a value is not a comment. */
static void test_comments(void **state)
{
    static const struct want w[] = {
        {"a = 1 # not a comment", 18, 18, 39, 40, 3},
        {"b = 2", 40, 40, 45, 46, 4},
    };

    (void)state;
    check_lines("# one \\\n  ; two \\\na = 1 # not a comment\nb = 2\n", w, 2);
    check_lines("#", NULL, 0);
    check_lines("  ;x\n#y", NULL, 0);
}

/* A `\` at the end of a line, or before blanks at its end, joins the
 * next line; the line number is the first physical line's, the end the
 * last one's terminator. */
static void test_continuations(void **state)
{
    static const struct want w[] = {
        {"a = x y", 0, 0, 12, 13, 1},
        {"b = z", 13, 13, 18, 19, 4},
        {"c = uv", 19, 19, 27, 27, 5},
    };

    (void)state;
    check_lines("a = x \\\n\\\n y\nb = z\nc = u\\\nv", w, 3);
    /* Blanks are collapsed before the check, so a run of them after the
     * `\` still continues (tini.c does the same); text after it does not. */
    {
        static const struct want w2[] = {
            {"a = x y", 0, 0, 11, 12, 1},
            {"b = \\ z", 12, 12, 19, 20, 3},
        };

        check_lines("a = x \\  \ny\nb = \\ z\n", w2, 2);
    }
}

static void check_split(const char *line, enum smbconf_kind kind, const char *name,
                        const char *value)
{
    char *text = strdup(line), *n, *v;

    assert_int_equal(smbconf_split(text, &n, &v), kind);
    if (name == NULL)
        assert_null(n);
    else
        assert_string_equal(n, name);
    if (value == NULL)
        assert_null(v);
    else
        assert_string_equal(v, value);
    free(text);
}

static void test_split(void **state)
{
    (void)state;
    check_split("[global]", SMBCONF_SECTION, "global", NULL);
    check_split("[ Global ] trailing", SMBCONF_SECTION, " Global ", NULL);
    check_split("[share", SMBCONF_SECTION, NULL, NULL);
    check_split("a = b", SMBCONF_PARAM, "a", "b");
    /* one blank is trimmed on each side, as tini's trim_one_space */
    check_split("a=b = c ", SMBCONF_PARAM, "a", "b = c");
    check_split("= x", SMBCONF_PARAM, "", "x");
    check_split("a =", SMBCONF_PARAM, "a", "");
    check_split("no equals sign", SMBCONF_OTHER, NULL, NULL);
}

static void test_wequal(void **state)
{
    (void)state;
    assert_true(smbconf_wequal("socket options", "SocketOptions"));
    assert_true(smbconf_wequal(" SOCKET\tOPTIONS ", "socket options"));
    assert_false(smbconf_wequal("socket_options", "socket options"));
    assert_false(smbconf_wequal("socket option", "socket options"));
    assert_false(smbconf_wequal("socket options", "socket option"));
    assert_true(smbconf_wequal("", "  "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_lines), cmocka_unit_test(test_blanks_and_crlf),
        cmocka_unit_test(test_comments),    cmocka_unit_test(test_continuations),
        cmocka_unit_test(test_split),       cmocka_unit_test(test_wequal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
