/* Unit tests for lib/state: the state file survives a round trip, bytes
 * and all, and a damaged one is refused with its line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "state.h"

static void test_round_trip(void **state)
{
    struct state a = {0}, b;
    struct err e;
    char *text;

    (void)state;
    a.have_incumbent = true;
    a.rcvbuf = 262144;
    a.write_mbps = 11.59;
    a.hold = true;
    a.cycles = 7;
    assert_int_equal(state_set_str(&a.last_written, "TCP_NODELAY SO_RCVBUF=262144"), 0);
    assert_int_equal(state_set_str(&a.hold_reason, "edited by hand\\ at line 3"), 0);
    a.pending = true;
    assert_int_equal(state_set_str(&a.pending_edit.file, "/etc/samba/smb.conf"), 0);
    assert_int_equal(state_set_str(&a.pending_edit.written,
                                   "[global]\r\n\tsocket options = A\t\x01\r\n"), 0);
    assert_int_equal(state_set_str(&a.pending_edit.original, ""), 0);
    a.pending_edit.line_off = 10;
    a.pending_edit.line_len = 21;
    assert_int_equal(state_set_str(&a.pending_edit.prev, "socket options = X\tY"), 0);

    text = state_format(&a);
    assert_non_null(text);
    assert_int_equal(state_parse(text, "state", &b, &e), 0);
    assert_true(b.have_incumbent);
    assert_int_equal(b.rcvbuf, 262144);
    assert_int_equal(b.sndbuf, 0);
    assert_true(b.write_mbps > 11.58 && b.write_mbps < 11.60);
    assert_true(b.hold);
    assert_int_equal(b.cycles, 7);
    assert_string_equal(b.last_written, a.last_written);
    assert_string_equal(b.hold_reason, a.hold_reason);
    assert_string_equal(b.pending_edit.written, a.pending_edit.written);
    assert_string_equal(b.pending_edit.original, "");
    assert_int_equal(b.pending_edit.line_off, 10);
    assert_int_equal(b.pending_edit.line_len, 21);
    assert_string_equal(b.pending_edit.prev, "socket options = X\tY");
    assert_null(b.kernel);
    free(text);
    state_free(&a);
    state_free(&b);
}

static void test_bad_files(void **state)
{
    struct state s;
    struct err e = {{0}};

    (void)state;
    assert_int_equal(state_parse("# c\nfuture_key whatever\nrcvbuf 5\n", "f", &s, &e), 0);
    assert_int_equal(s.rcvbuf, 5);
    state_free(&s);
    assert_true(state_parse("rcvbuf 5\nsndbuf -3\n", "/var/lib/smbtuned/state", &s, &e) < 0);
    assert_string_equal(e.msg, "/var/lib/smbtuned/state:2: bad value for sndbuf: '-3'");
    assert_true(state_parse("hold maybe\n", "f", &s, &e) < 0);
    assert_true(state_parse("keyonly\n", "f", &s, &e) < 0);
    assert_non_null(strstr(e.msg, "f:1: expected 'key value'"));
    assert_true(state_parse("last_written a\\q\n", "f", &s, &e) < 0);
    assert_true(state_parse("write_mbps nan\n", "f", &s, &e) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bad_files),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
