/* Unit tests for lib/sockopts: Samba's reading of a `socket options` value
 * and our edits of it. */
#include <errno.h>
#include <limits.h>
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

static struct sockopts_size get_size(const char *in, enum sockopts_buf which)
{
    struct sockopts so;
    struct sockopts_size z;

    assert_int_equal(sockopts_parse(in, &so), 0);
    z = sockopts_get(&so, which);
    sockopts_free(&so);
    z.token = NULL; /* it pointed into so */
    return z;
}

/* The int smbd passes; fails the test when the option is absent. */
static long get(const char *in, enum sockopts_buf which, bool *broken)
{
    struct sockopts_size z = get_size(in, which);

    assert_true(z.present);
    if (broken != NULL)
        *broken = z.broken;
    return z.value;
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
    /* absent: autotuning, and nothing else */
    assert_false(get_size("TCP_NODELAY", SOCKOPTS_RCVBUF).present);
    assert_false(get_size("TCP_NODELAY", SOCKOPTS_RCVBUF).broken);
    assert_false(get_size("", SOCKOPTS_SNDBUF).present);
    /* names are case-insensitive, commas and tabs separate */
    assert_int_equal(get("tcp_nodelay,so_rcvbuf=4096\tSO_SNDBUF=1", SOCKOPTS_RCVBUF, NULL), 4096);
    /* the last one wins, as Samba applies them in order */
    assert_int_equal(get("SO_RCVBUF=1000 SO_RCVBUF=2000", SOCKOPTS_RCVBUF, NULL), 2000);
    assert_int_equal(get("SO_RCVBUF=1000 SO_RCVBUF=64k", SOCKOPTS_RCVBUF, NULL), 64);
}

/* Every case of FACTS.md ("Added after the core chain") and the overflow
 * strings: the int Samba passes (glibc atoi), and whether the token says
 * what it does. */
static void test_get_as_samba(void **state)
{
    static const struct {
        const char *value;
        int want;
        bool broken;
    } cases[] = {
        {"SO_RCVBUF=0", 0, false}, /* explicit 0: present, not autotuning */
        {"SO_RCVBUF=1", 1, false},
        {"SO_RCVBUF=-1", -1, false},
        {"SO_RCVBUF=+5", 5, false},
        {"SO_RCVBUF=007", 7, false},
        {"SO_RCVBUF=2147483647", INT_MAX, false},
        {"SO_RCVBUF=-2147483648", INT_MIN, false},
        /* past an int: strtol's long is truncated to 32 bits */
        {"SO_RCVBUF=2147483648", INT_MIN, true},
        {"SO_RCVBUF=4294967295", -1, true},
        {"SO_RCVBUF=4294967296", 0, true},
        {"SO_RCVBUF=4294967297", 1, true},
        {"SO_RCVBUF=4295032832", 65536, true},
        {"SO_RCVBUF=-4294967297", -1, true},
        /* past a long: strtol saturates, then the truncation */
        {"SO_RCVBUF=9223372036854775807", -1, true},
        {"SO_RCVBUF=9223372036854775808", -1, true},
        {"SO_RCVBUF=99999999999999999999999", -1, true},
        {"SO_RCVBUF=-9223372036854775808", 0, true},
        {"SO_RCVBUF=-99999999999999999999999", 0, true},
        /* atoi stops at the first non-digit */
        {"SO_RCVBUF=65536abc", 65536, true},
        {"SO_RCVBUF=64k", 64, true},
        {"SO_RCVBUF=abc", 0, true},
        {"SO_RCVBUF=", 0, true},
        {"SO_RCVBUF=0x10000", 0, true},
        {"SO_RCVBUF=--5", 0, true},
        {"SO_RCVBUF=1e6", 1, true},
        /* `NAME = VALUE`: Samba sees NAME with its default 1, then junk */
        {"SO_RCVBUF = 65536", 1, true},
        {"SO_RCVBUF", 1, true},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sockopts_size z = get_size(cases[i].value, SOCKOPTS_RCVBUF);

        if (!z.present || z.value != cases[i].want || z.broken != cases[i].broken)
            fail_msg("%s: got present %d value %d broken %d, want %d broken %d", cases[i].value,
                     z.present, z.value, z.broken, cases[i].want, cases[i].broken);
    }
}

/* sockopts_atoi is glibc's atoi, byte for byte: compare on strings that
 * reach every branch of strtol. */
static void test_atoi_is_glibc(void **state)
{
    static const char *const cases[] = {
        "0",
        "1",
        "-1",
        "+1",
        " 42",
        "\t-7",
        "\v9",
        "12abc",
        "",
        "-",
        "+",
        "abc",
        "2147483647",
        "2147483648",
        "-2147483648",
        "-2147483649",
        "4294967295",
        "4294967296",
        "4294967297",
        "8589934591",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "184467440737095516160",
        "000000000000000000000000065536",
        "0x10",
        "1 2",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (sockopts_atoi(cases[i]) != atoi(cases[i]))
            fail_msg("'%s': %d, glibc atoi %d", cases[i], sockopts_atoi(cases[i]), atoi(cases[i]));
}

/* What Linux makes of it, as measured here (sockopts.h): a cap of
 * 4194304, minimums 2304 and 4608. */
static void test_kernel_effect(void **state)
{
    static const struct {
        int value;
        long min, request, bytes;
        enum sockopts_effect effect;
    } cases[] = {
        {0, 2304, 1, 2304, SOCKOPTS_AT_MIN},
        {1, 2304, 1, 2304, SOCKOPTS_AT_MIN},
        {1152, 2304, 1152, 2304, SOCKOPTS_AT_MIN},
        {1153, 2304, 1153, 2306, SOCKOPTS_AS_ASKED},
        {2304, 4608, 2304, 4608, SOCKOPTS_AT_MIN},
        {2305, 4608, 2305, 4610, SOCKOPTS_AS_ASKED},
        {65536, 2304, 65536, 131072, SOCKOPTS_AS_ASKED},
        {4194304, 2304, 4194304, 8388608, SOCKOPTS_AT_CAP},
        {4194305, 2304, 4194304, 8388608, SOCKOPTS_AT_CAP},
        {INT_MAX, 2304, 4194304, 8388608, SOCKOPTS_AT_CAP},
        {-1, 2304, 4194304, 8388608, SOCKOPTS_AT_CAP},
        {INT_MIN, 4608, 4194304, 8388608, SOCKOPTS_AT_CAP},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sockopts_kernel k = sockopts_kernel(cases[i].value, 4194304, cases[i].min);

        if (k.bytes != cases[i].bytes || k.effect != cases[i].effect ||
            (k.effect != SOCKOPTS_AT_MIN && k.request != cases[i].request))
            fail_msg("%d: got request %ld bytes %ld effect %d", cases[i].value, k.request, k.bytes,
                     (int)k.effect);
    }
    /* a cap of INT_MAX: the kernel keeps twice the size within an int */
    assert_int_equal(sockopts_kernel(-1, INT_MAX, 2304).bytes, (long)(INT_MAX / 2) * 2);
    assert_int_equal(sockopts_kernel(-1, INT_MAX, 2304).effect, SOCKOPTS_AT_CAP);
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
    /* ... after the last option Samba knows, not after words it ignores
     * (a would-be inline comment); absent with none known: first */
    check_edit("SO_SNDBUF=8192 ; tuned 2019", 65536, 65536,
               "SO_SNDBUF=65536 SO_RCVBUF=65536 ; tuned 2019");
    check_edit("TCP_NODELAY # old SO_KEEPALIVE x", 65536, SOCKOPTS_AUTO,
               "TCP_NODELAY # old SO_KEEPALIVE SO_RCVBUF=65536 x");
    check_edit("; tuned 2019", 65536, SOCKOPTS_AUTO, "SO_RCVBUF=65536 ; tuned 2019");
    /* the option last: replaced in its place */
    check_edit("TCP_NODELAY x SO_RCVBUF=1", 65536, SOCKOPTS_AUTO, "TCP_NODELAY x SO_RCVBUF=65536");
    /* duplicates collapse into one */
    check_edit("SO_RCVBUF=1 TCP_NODELAY SO_RCVBUF=2", 5, SOCKOPTS_AUTO, "SO_RCVBUF=5 TCP_NODELAY");
}

static void test_set_auto_and_empty(void **state)
{
    (void)state;
    check_edit("TCP_NODELAY SO_RCVBUF=8192 SO_SNDBUF=8192", SOCKOPTS_AUTO, SOCKOPTS_AUTO,
               "TCP_NODELAY");
    /* a value that would become empty is Samba's default, never empty */
    check_edit("SO_RCVBUF=8192 SO_SNDBUF=8192", SOCKOPTS_AUTO, SOCKOPTS_AUTO, "TCP_NODELAY");
}

/* An empty value as written is the admin's (TCP_NODELAY off): removing
 * nothing leaves it empty, and a size is added alone. The daemon's commit
 * and --set-buffers both go through sockopts_with. */
static void test_set_keeps_an_empty_value_empty(void **state)
{
    char *v;

    (void)state;
    check_edit("", SOCKOPTS_AUTO, SOCKOPTS_AUTO, "");
    check_edit("", 65536, SOCKOPTS_AUTO, "SO_RCVBUF=65536");
    check_edit("", 65536, 131072, "SO_RCVBUF=65536 SO_SNDBUF=131072");
    v = sockopts_with("", SOCKOPTS_AUTO, SOCKOPTS_AUTO);
    assert_non_null(v);
    assert_string_equal(v, "");
    free(v);
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

/* As --set-buffers calls it: sizes from 4096 */
static int parse_size(const char *s, long *v, struct err *e)
{
    return sockopts_parse_size(s, SOCKOPTS_RCVBUF, 4096, v, e);
}

static void test_parse_size(void **state)
{
    struct err e;
    long v;

    (void)state;
    assert_int_equal(parse_size("262144", &v, &e), 0);
    assert_int_equal(v, 262144);
    assert_int_equal(parse_size("256K", &v, &e), 0);
    assert_int_equal(v, 262144);
    assert_int_equal(parse_size("1m", &v, &e), 0);
    assert_int_equal(v, 1048576);
    assert_int_equal(parse_size("auto", &v, &e), 0);
    assert_int_equal(v, SOCKOPTS_AUTO);
    assert_true(parse_size("12x", &v, &e) < 0);
    assert_non_null(strstr(e.msg, "12x"));
    assert_true(parse_size("-5", &v, &e) < 0);
    assert_true(parse_size("0", &v, &e) < 0);
    assert_true(parse_size("", &v, &e) < 0);
    assert_true(parse_size("4G", &v, &e) < 0);
    assert_non_null(strstr(e.msg, "out of range"));
    assert_true(parse_size(" 5", &v, &e) < 0);
    /* the range said is the one taken, too large or too small */
    assert_int_equal(parse_size("2G", &v, &e), -ERANGE);
    assert_non_null(strstr(e.msg, "expected 4096 to 2147483647 bytes"));
    assert_int_equal(parse_size("0", &v, &e), -ERANGE);
    assert_non_null(strstr(e.msg, "expected 4096 to 2147483647 bytes"));
    assert_int_equal(parse_size("4095", &v, &e), -ERANGE);
    assert_non_null(strstr(e.msg, "SO_RCVBUF=4095 is below 4096 bytes"));
    assert_int_equal(parse_size("4096", &v, &e), 0);
    assert_int_equal(v, 4096);
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
        cmocka_unit_test(test_get_as_samba),
        cmocka_unit_test(test_atoi_is_glibc),
        cmocka_unit_test(test_kernel_effect),
        cmocka_unit_test(test_set_keeps_others),
        cmocka_unit_test(test_set_auto_and_empty),
        cmocka_unit_test(test_set_keeps_an_empty_value_empty),
        cmocka_unit_test(test_set_repairs_fragments),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_same),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
