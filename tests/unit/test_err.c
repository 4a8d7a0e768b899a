/* Unit tests for lib/err: the reason is kept first and a cut is marked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"

static void test_err_cut_marked(void **state)
{
    struct err e;
    char big[2000];

    (void)state;
    memset(big, 'v', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(err_set(&e, -EINVAL, "the reason: %s", big), -EINVAL);
    assert_int_equal(strlen(e.msg), sizeof(e.msg) - 1);
    assert_int_equal(strncmp(e.msg, "the reason: ", 12), 0);
    assert_string_equal(e.msg + sizeof(e.msg) - 4, "...");
}

static void test_err_fits_and_null(void **state)
{
    struct err e;

    (void)state;
    assert_int_equal(err_set(&e, -ENOENT, "%s: %d", "short", 7), -ENOENT);
    assert_string_equal(e.msg, "short: 7");
    /* A caller that does not want the reason passes NULL. */
    assert_int_equal(err_set(NULL, -EIO, "unused %s", "x"), -EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_err_cut_marked),
        cmocka_unit_test(test_err_fits_and_null),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
