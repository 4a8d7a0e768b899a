/* Unit tests for the pure parts of lib/smbd and lib/kernel: reading smbd's
 * command line, and client traffic from two socket snapshots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kernel.h"
#include "smbd.h"

static void test_cmdline_overrides(void **state)
{
    (void)state;
    assert_true(smbd_cmdline_overrides("/usr/sbin/smbd --foreground "
                                       "--option=socket options=SO_RCVBUF=65536"));
    assert_true(smbd_cmdline_overrides("smbd --option Socket  Options=TCP_NODELAY"));
    assert_true(smbd_cmdline_overrides("smbd --option=SOCKETOPTIONS = X"));
    assert_false(smbd_cmdline_overrides("smbd --option=log level=3 -s /etc/smb.conf"));
    assert_false(smbd_cmdline_overrides("smbd --foreground --no-process-group"));
    /* the words elsewhere, not as an --option */
    assert_false(smbd_cmdline_overrides("smbd -s /srv/socket options=.conf"));
}

static void test_bytes_since(void **state)
{
    struct kernel_sock_bytes then[] = {{1, 1000}, {2, 5000}, {3, 70}};
    /* 1 moved 500 more, 2 closed, 3 did nothing, 4 is new with 300 */
    struct kernel_sock_bytes now[] = {{1, 1500}, {3, 70}, {4, 300}};

    (void)state;
    assert_int_equal(kernel_bytes_since(then, 3, now, 3), 800);
    assert_int_equal(kernel_bytes_since(NULL, 0, now, 3), 1870);
    assert_int_equal(kernel_bytes_since(then, 3, NULL, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cmdline_overrides),
        cmocka_unit_test(test_bytes_since),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
