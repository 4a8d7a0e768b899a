/* Unit tests for lib/sockopts: Samba's reading of a `socket options` value
 * and our edits of it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sockopts.h"

/* Parse `in`, set both buffers, return the formatted value (caller frees). */
static char *edit(const char *in, long rcv, long snd)
{
    struct sockopts so;
    char *out;

    assert_int_equal(sockopts_parse(in, &so), 0);
    assert_int_equal(sockopts_set(&so, SOCKOPTS_RCVBUF, rcv), 0);
    assert_int_equal(sockopts_set(&so, SOCKOPTS_SNDBUF, snd), 0);
    out = sockopts_format(&so);
    assert_non_null(out);
    sockopts_free(&so);
    return out;
}

static void check_edit(const char *in, long rcv, long snd, const char *want)
{
    char *out = edit(in, rcv, snd);

    assert_string_equal(out, want);
    free(out);
}

static long get(const char *in, enum sockopts_buf which, bool *broken)
{
    struct sockopts so;
    long v;

    assert_int_equal(sockopts_parse(in, &so), 0);
    v = sockopts_get(&so, which, broken);
    sockopts_free(&so);
    return v;
}

static void test_get_plain(void **state)
{
    bool broken;

    (void)state;
    assert_int_equal(get("TCP_NODELAY SO_RCVBUF=8192 SO_SNDBUF=16384", SOCKOPTS_RCVBUF, &broken),
                     8192);
    assert_false(broken);
    assert_int_equal(get("TCP_NODELAY SO_RCVBUF=8192 SO_SNDBUF=16384", SOCKOPTS_SNDBUF, &broken),
                     16384);
    assert_int_equal(get("TCP_NODELAY", SOCKOPTS_RCVBUF, &broken), SOCKOPTS_AUTO);
    assert_false(broken);
    /* names are case-insensitive, commas and tabs separate */
    assert_int_equal(get("tcp_nodelay,so_rcvbuf=4096\tSO_SNDBUF=1", SOCKOPTS_RCVBUF, NULL), 4096);
    /* the last one wins, as Samba applies them in order */
    assert_int_equal(get("SO_RCVBUF=1000 SO_RCVBUF=2000", SOCKOPTS_RCVBUF, NULL), 2000);
}

static void test_get_broken(void **state)
{
    bool broken;

    (void)state;
    /* `NAME = VALUE`: Samba sees NAME with its default 1, then junk */
    assert_int_equal(get("SO_RCVBUF = 65536", SOCKOPTS_RCVBUF, &broken), 1);
    assert_true(broken);
    /* atoi: 64k is 64, abc is 0 */
    assert_int_equal(get("SO_RCVBUF=64k", SOCKOPTS_RCVBUF, &broken), 64);
    assert_true(broken);
    assert_int_equal(get("SO_SNDBUF=abc", SOCKOPTS_SNDBUF, &broken), 0);
    assert_true(broken);
    assert_int_equal(get("SO_SNDBUF=0", SOCKOPTS_SNDBUF, &broken), 0);
    assert_true(broken);
}

static void test_set_keeps_others(void **state)
{
    (void)state;
    check_edit("TCP_NODELAY IPTOS_LOWDELAY SO_KEEPALIVE SO_RCVBUF=8192 SO_SNDBUF=8192", 262144,
               1048576,
               "TCP_NODELAY IPTOS_LOWDELAY SO_KEEPALIVE SO_RCVBUF=262144 SO_SNDBUF=1048576");
    /* order kept: the size takes the place of the first token */
    check_edit("SO_SNDBUF=1 TCP_NODELAY SO_RCVBUF=2 SO_KEEPALIVE", 3, 4,
               "SO_SNDBUF=4 TCP_NODELAY SO_RCVBUF=3 SO_KEEPALIVE");
    /* absent: appended */
    check_edit("TCP_NODELAY", 65536, SOCKOPTS_AUTO, "TCP_NODELAY SO_RCVBUF=65536");
    /* duplicates collapse into one */
    check_edit("SO_RCVBUF=1 TCP_NODELAY SO_RCVBUF=2", 5, SOCKOPTS_AUTO,
               "SO_RCVBUF=5 TCP_NODELAY");
}

static void test_set_auto_and_empty(void **state)
{
    (void)state;
    check_edit("TCP_NODELAY SO_RCVBUF=8192 SO_SNDBUF=8192", SOCKOPTS_AUTO, SOCKOPTS_AUTO,
               "TCP_NODELAY");
    /* a value that would become empty is Samba's default, never empty */
    check_edit("SO_RCVBUF=8192 SO_SNDBUF=8192", SOCKOPTS_AUTO, SOCKOPTS_AUTO, "TCP_NODELAY");
    check_edit("", SOCKOPTS_AUTO, SOCKOPTS_AUTO, "TCP_NODELAY");
}

static void test_set_repairs_fragments(void **state)
{
    (void)state;
    check_edit("TCP_NODELAY SO_RCVBUF = 65536 SO_KEEPALIVE", 131072, SOCKOPTS_AUTO,
               "TCP_NODELAY SO_RCVBUF=131072 SO_KEEPALIVE");
    check_edit("SO_RCVBUF =65536 SO_SNDBUF= 65536 TCP_NODELAY", 2048, 4096,
               "SO_RCVBUF=2048 SO_SNDBUF=4096 TCP_NODELAY");
    check_edit("SO_RCVBUF= TCP_NODELAY", SOCKOPTS_AUTO, SOCKOPTS_AUTO, "TCP_NODELAY");
    /* a known option after a bare name is not eaten as its value */
    check_edit("SO_RCVBUF TCP_NODELAY", 4096, SOCKOPTS_AUTO, "SO_RCVBUF=4096 TCP_NODELAY");
    /* other options' values are kept, even odd ones */
    check_edit("TCP_KEEPIDLE=60 SO_RCVBUF=64k", 65536, SOCKOPTS_AUTO,
               "TCP_KEEPIDLE=60 SO_RCVBUF=65536");
}

static void test_parse_size(void **state)
{
    struct err e;
    long v;

    (void)state;
    assert_int_equal(sockopts_parse_size("262144", &v, &e), 0);
    assert_int_equal(v, 262144);
    assert_int_equal(sockopts_parse_size("256K", &v, &e), 0);
    assert_int_equal(v, 262144);
    assert_int_equal(sockopts_parse_size("1m", &v, &e), 0);
    assert_int_equal(v, 1048576);
    assert_int_equal(sockopts_parse_size("auto", &v, &e), 0);
    assert_int_equal(v, SOCKOPTS_AUTO);
    assert_true(sockopts_parse_size("12x", &v, &e) < 0);
    assert_non_null(strstr(e.msg, "12x"));
    assert_true(sockopts_parse_size("-5", &v, &e) < 0);
    assert_true(sockopts_parse_size("0", &v, &e) < 0);
    assert_true(sockopts_parse_size("", &v, &e) < 0);
    assert_true(sockopts_parse_size("4G", &v, &e) < 0);
    assert_non_null(strstr(e.msg, "out of range"));
    assert_true(sockopts_parse_size(" 5", &v, &e) < 0);
}

static void test_same(void **state)
{
    (void)state;
    assert_true(sockopts_same("TCP_NODELAY  SO_RCVBUF=1", " TCP_NODELAY\tSO_RCVBUF=1 "));
    assert_false(sockopts_same("TCP_NODELAY SO_RCVBUF=1", "TCP_NODELAY SO_RCVBUF=12"));
    assert_false(sockopts_same("TCP_NODELAY", "TCP_NODELAY X"));
    assert_true(sockopts_same("", "  "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_plain),
        cmocka_unit_test(test_get_broken),
        cmocka_unit_test(test_set_keeps_others),
        cmocka_unit_test(test_set_auto_and_empty),
        cmocka_unit_test(test_set_repairs_fragments),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_same),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
