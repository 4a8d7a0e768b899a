/* Unit tests for lib/jsonw: JSON text that is always valid UTF-8. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jsonw.h"

/* Collect what jsonw_string writes. */
static char *json(const char *s)
{
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);

    jsonw_string(f, s);
    fclose(f);
    return out;
}

static void check_json(const char *in, const char *want)
{
    char *got = json(in);

    if (strcmp(got, want) != 0)
        fail_msg("JSON of '%s' is '%s', expected '%s'", in, got, want);
    free(got);
}

static void test_json_always_utf8(void **state)
{
    (void)state;
    check_json("a\"b\\c\n", "\"a\\\"b\\\\c\\u000a\"");
    /* well-formed UTF-8 passes unchanged: é, €, U+10348 */
    check_json("\xc3\xa9 \xe2\x82\xac \xf0\x90\x8d\x88",
               "\"\xc3\xa9 \xe2\x82\xac \xf0\x90\x8d\x88\"");
    /* a stray byte, a cut sequence, an overlong '/', a surrogate, above
     * U+10FFFF: each bad byte becomes U+FFFD */
    check_json("a\xff"
               "b",
               "\"a\\ufffdb\"");
    check_json("\xc3", "\"\\ufffd\"");
    check_json("\xe2\x82", "\"\\ufffd\\ufffd\"");
    check_json("\xc0\xaf", "\"\\ufffd\\ufffd\"");
    check_json("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
    check_json("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
}

static void check_clean(const char *in, const char *want)
{
    char *got = jsonw_sanitize(in);

    assert_non_null(got);
    if (strcmp(got, want) != 0)
        fail_msg("sanitized '%s' is '%s', expected '%s'", in, got, want);
    free(got);
}

/* What jansson is given: the same judgement of each byte as jsonw_string,
 * U+FFFD as its three UTF-8 bytes, nothing escaped. */
/* One line, keys in order, o released (valgrind sees no leak), and a
 * NULL object (a failed setter upstream) is -ENOMEM. */
static void test_print(void **state)
{
    json_t *o = json_object();
    char buf[256] = "";
    FILE *f = tmpfile();

    (void)state;
    assert_non_null(f);
    json_object_set_new(o, "b", json_real(0.93));
    json_object_set_new(o, "a", json_array());
    assert_int_equal(jsonw_print(f, o), 0);
    assert_int_equal(jsonw_print(f, NULL), -ENOMEM);
    rewind(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    assert_string_equal(buf, "{\"b\":0.93,\"a\":[]}\n");
    assert_null(fgets(buf, sizeof(buf), f));
    fclose(f);
}

static void test_sanitize(void **state)
{
    (void)state;
    check_clean("", "");
    check_clean("a\"b\n", "a\"b\n");
    check_clean("\xc3\xa9 \xe2\x82\xac \xf0\x90\x8d\x88", "\xc3\xa9 \xe2\x82\xac \xf0\x90\x8d\x88");
    check_clean("a\xff"
                "b",
                "a\xef\xbf\xbd"
                "b");
    check_clean("\xe2\x82", "\xef\xbf\xbd\xef\xbf\xbd");
    check_clean("\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_always_utf8),
        cmocka_unit_test(test_sanitize),
        cmocka_unit_test(test_print),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
