/* Unit tests for lib/parse: outside numbers and PREFIX-PID names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

#include <cmocka.h>

#include "parse.h"

static void test_long(void **state)
{
    long long v = 0;

    (void)state;
    assert_int_equal(parse_long("42", 0, 100, &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(parse_long("0", 0, 100, &v), 0);
    assert_int_equal(v, 0);
    /* what strtoll would accept, an outside number must not */
    assert_int_equal(parse_long(" 42", 0, 100, &v), -EINVAL);
    assert_int_equal(parse_long("+42", 0, 100, &v), -EINVAL);
    assert_int_equal(parse_long("-1", -10, 100, &v), -EINVAL);
    assert_int_equal(parse_long("42x", 0, 100, &v), -EINVAL);
    assert_int_equal(parse_long("", 0, 100, &v), -EINVAL);
    assert_int_equal(parse_long(NULL, 0, 100, &v), -EINVAL);
    assert_int_equal(parse_long("101", 0, 100, &v), -ERANGE);
    assert_int_equal(parse_long("99999999999999999999", 0, LLONG_MAX, &v), -ERANGE);
    assert_int_equal(v, 0);
}

static void test_size(void **state)
{
    long long v = 0;

    (void)state;
    assert_int_equal(parse_size("262144", 0, LLONG_MAX, &v), 0);
    assert_int_equal(v, 262144);
    assert_int_equal(parse_size("256K", 0, LLONG_MAX, &v), 0);
    assert_int_equal(v, 262144);
    assert_int_equal(parse_size("1m", 0, LLONG_MAX, &v), 0);
    assert_int_equal(v, 1048576);
    assert_int_equal(parse_size("2G", 0, LLONG_MAX, &v), 0);
    assert_true(v == 2LL * 1024 * 1024 * 1024);
    assert_int_equal(parse_size("K", 0, LLONG_MAX, &v), -EINVAL);
    assert_int_equal(parse_size("1KB", 0, LLONG_MAX, &v), -EINVAL);
    assert_int_equal(parse_size("1T", 0, LLONG_MAX, &v), -EINVAL);
    assert_int_equal(parse_size("5M", 0, 4 * 1024 * 1024, &v), -ERANGE);
    /* the multiplication itself must not overflow */
    assert_int_equal(parse_size("9999999999999G", 0, LLONG_MAX, &v), -ERANGE);
}

static void test_pid_name(void **state)
{
    const char *rest = "unset";
    pid_t pid = 0;

    (void)state;
    assert_int_equal(parse_pid_name("shadow-4242-Ab12Cd", "shadow-", &pid, &rest), 0);
    assert_int_equal(pid, 4242);
    assert_string_equal(rest, "Ab12Cd");
    assert_int_equal(parse_pid_name("shadow-17", "shadow-", &pid, &rest), 0);
    assert_int_equal(pid, 17);
    assert_null(rest);
    /* an empty rest is still a rest: the caller judges its shape */
    assert_int_equal(parse_pid_name("shadow-17-", "shadow-", &pid, &rest), 0);
    assert_string_equal(rest, "");
    assert_int_equal(parse_pid_name("p-1-2-3", "p-", &pid, NULL), 0);
    assert_int_equal(pid, 1);

    pid = 99;
    assert_int_equal(parse_pid_name("other-4242-x", "shadow-", &pid, &rest), -EINVAL);
    assert_int_equal(parse_pid_name("shadow--4242", "shadow-", &pid, &rest), -EINVAL);
    assert_int_equal(parse_pid_name("shadow-+42", "shadow-", &pid, &rest), -EINVAL);
    assert_int_equal(parse_pid_name("shadow-42x", "shadow-", &pid, &rest), -EINVAL);
    assert_int_equal(parse_pid_name("shadow-", "shadow-", &pid, &rest), -EINVAL);
    assert_int_equal(parse_pid_name("shadow-0-x", "shadow-", &pid, &rest), -ERANGE);
    assert_int_equal(parse_pid_name("shadow-2147483648-x", "shadow-", &pid, &rest), -ERANGE);
    assert_int_equal(parse_pid_name("shadow-123456789012345678901-x", "shadow-", &pid, &rest),
                     -ERANGE);
    assert_int_equal(pid, 99);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long),
        cmocka_unit_test(test_size),
        cmocka_unit_test(test_pid_name),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
