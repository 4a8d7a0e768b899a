/* Unit tests for lib/url: the SMB URL grammar, one group of cases per rule
 * of url.h, and the formatting back into a URL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "url.h"

static void check_url(const char *url, const char *host, unsigned port, const char *share,
                      const char *dir)
{
    struct url u;
    struct err e = {{0}};

    if (url_parse(url, &u, &e) != 0)
        fail_msg("'%s' refused: %s", url, e.msg);
    assert_string_equal(u.host, host);
    assert_int_equal(u.port, port);
    assert_string_equal(u.share, share);
    assert_string_equal(u.dir, dir);
}

/* Refused, with a reason that mentions why. */
static void check_bad_url(const char *url, int code, const char *why)
{
    struct url u;
    struct err e = {{0}};

    assert_int_equal(url_parse(url, &u, &e), code);
    if (strstr(e.msg, why) == NULL)
        fail_msg("message for '%s' is '%s', expected it to mention '%s'", url, e.msg, why);
}

/* before, "x" n times, after: in one of two static buffers (two may be
 * arguments of one call). */
static const char *with_run(const char *before, size_t n, const char *after)
{
    static char buf[2][4096];
    static int i;
    char run[2048];

    assert_true(n < sizeof(run));
    memset(run, 'x', n);
    run[n] = '\0';
    i = !i;
    snprintf(buf[i], sizeof(buf[i]), "%s%s%s", before, run, after);
    return buf[i];
}

static void test_scheme(void **state)
{
    (void)state;
    check_url("smb://fs/data", "fs", 0, "data", "");
    check_url("SMB://fs/data", "fs", 0, "data", "");
    check_url("sMb://fs/data", "fs", 0, "data", "");
    check_bad_url("http://fs/share", -EINVAL, "smb://");
    check_bad_url("fs/share", -EINVAL, "smb://");
    check_bad_url("smb:/fs/share", -EINVAL, "smb://");
    check_bad_url("smbx://fs/share", -EINVAL, "smb://");
    check_bad_url("", -EINVAL, "smb://");
}

static void test_no_user_or_password(void **state)
{
    struct url u;
    struct err e = {{0}};

    (void)state;
    check_bad_url("smb://user:secret@fs/share", -EINVAL, "credentials file");
    check_bad_url("smb://user@fs/share", -EINVAL, "credentials file");
    check_bad_url("smb://@fs/share", -EINVAL, "credentials file");
    /* The message never quotes the URL: it holds the password. */
    assert_int_equal(url_parse("smb://me:hunter2@fs/share", &u, &e), -EINVAL);
    assert_null(strstr(e.msg, "hunter2"));
    /* Nor when the password holds a '/', which once made the rest look
     * like a port or a share name that the message quoted; nor when the
     * scheme is missing. */
    static const char *const hidden[] = {
        "smb://admin:S3cret/PW@fs/share",
        "smb://admin:123/x@fs/share",
        "admin:S3cret@fs/share",
        "smb://fs:S3cret/x@y/share",
    };
    for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++) {
        memset(&e, 0, sizeof(e));
        assert_int_equal(url_parse(hidden[i], &u, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "credentials file"));
        assert_null(strstr(e.msg, "S3cret"));
        assert_null(strstr(e.msg, "123"));
    }
    /* '@' is reserved everywhere else too: a share or directory with one
     * is refused the same way. */
    check_bad_url("smb://fs/sh@re", -EINVAL, "credentials file");
    check_bad_url("smb://fs/share/d@y", -EINVAL, "credentials file");
}

static void test_host(void **state)
{
    (void)state;
    check_url("smb://127.0.0.1/share", "127.0.0.1", 0, "share", "");
    check_url("smb://fs.example.org/data", "fs.example.org", 0, "data", "");
    check_url("smb://[::1]/share", "::1", 0, "share", "");
    check_url("smb://[fe80::1%eth0]/share", "fe80::1%eth0", 0, "share", "");
    /* a link-local address is one only with its interface */
    check_bad_url("smb://[fe80::1]/share", -EINVAL,
                  "fe80::1 is a link-local address: name its interface too, as in "
                  "smb://[fe80::1%eth0]/share");
    check_url(with_run("smb://", 255, "/s"), with_run("", 255, ""), 0, "s", "");
    check_bad_url("smb://", -EINVAL, "no host");
    check_bad_url("smb:///share", -EINVAL, "no host");
    check_bad_url("smb://:445/share", -EINVAL, "no host");
    check_bad_url(with_run("smb://", 256, "/s"), -EINVAL, "no host");
    check_bad_url("smb://[]/share", -EINVAL, "bad host");
    check_bad_url(with_run("smb://[", 256, "]/s"), -EINVAL, "bad host");
    check_bad_url("smb://[::1/share", -EINVAL, "unclosed");
    /* brackets hold an IPv6 address */
    check_bad_url("smb://[fs]/share", -EINVAL, "[fs] is no IPv6 address");
    check_bad_url("smb://[1:2:zz::1]/share", -EINVAL, "is no IPv6 address");
    check_bad_url("smb://[127.0.0.1]/share", -EINVAL, "is no IPv6 address");
    /* Brackets inside the host would not format back to the same URL. */
    check_bad_url("smb://[[1]/share", -EINVAL, "bad character in host");
    check_bad_url("smb://a]b/share", -EINVAL, "bad character in host");
    check_bad_url("smb://a[b/share", -EINVAL, "bad character in host");
    check_bad_url("smb://f s/share", -EINVAL, "bad character in host");
    check_bad_url("smb://f\"s/share", -EINVAL, "bad character in host");
    check_bad_url("smb://f\ts/share", -EINVAL, "bad character in host");
    check_bad_url("smb://fs?x/share", -EINVAL, "bad character in host");
    check_bad_url("smb://[fe80::1%]/share", -EINVAL, "no interface after the '%' of [fe80::1%]");
    check_bad_url("smb://[fe80::1%e:9]/share", -EINVAL, "an interface is named with letters");
    check_bad_url("smb://[fe80::1%e;x]/share", -EINVAL, "an interface is named with letters");
    check_url("smb://[fe80::1%br-lan.2_x]/share", "fe80::1%br-lan.2_x", 0, "share", "");
    /* Samba reads its name for an address (fe80-0-0-0-a8bb-ccff-fedd-eeff
     * and 's' and the zone) as one only below 46 characters; the 15 of
     * an interface named after its MAC address make 46. */
    check_url("smb://[fe80::a8bb:ccff:fedd:eeff%enx00112233445]/s",
              "fe80::a8bb:ccff:fedd:eeff%enx00112233445", 0, "s", "");
    check_bad_url("smb://[fe80::a8bb:ccff:fedd:eeff%enx001122334455]/s", -EINVAL,
                  "libsmbclient cannot connect to [fe80::a8bb:ccff:fedd:eeff%enx001122334455]: "
                  "the address and interface name are too long for it together; name the "
                  "interface by its number instead (ip link shows it), as in "
                  "smb://[fe80::a8bb:ccff:fedd:eeff%2]/share");
    check_url("smb://[fe80::a8bb:ccff:fedd:eeff%2]/s", "fe80::a8bb:ccff:fedd:eeff%2", 0, "s", "");
}

static void test_port(void **state)
{
    (void)state;
    check_url("smb://127.0.0.1:4455/share", "127.0.0.1", 4455, "share", "");
    check_url("smb://fs:1/share", "fs", 1, "share", "");
    check_url("smb://fs:65535/share", "fs", 65535, "share", "");
    check_url("smb://[::1]:445/share/dir", "::1", 445, "share", "dir");
    check_bad_url("smb://fs:0/share", -EINVAL, "from 1 to 65535");
    check_bad_url("smb://fs:65536/share", -EINVAL, "from 1 to 65535");
    check_bad_url("smb://fs:44x/share", -EINVAL, "no port from 1 to 65535");
    check_bad_url("smb://fs:/share", -EINVAL, "port");
    check_bad_url("smb://fs:-1/share", -EINVAL, "port");
    check_bad_url("smb://fs:+1/share", -EINVAL, "port");
    check_bad_url("smb://fs:1234567/share", -EINVAL, "port");
    check_bad_url("smb://fs:12345678/share", -EINVAL, "no port from 1 to 65535");
    check_bad_url("smb://[::1]x/share", -EINVAL, "no port from 1 to 65535");
    check_bad_url("smb://[::1]:/share", -EINVAL, "port");
}

/* A URL with a password cut before its '@' (an unquoted value ends at a
 * blank or '#'): smb://USER:PASSWORD. No piece of the password, which
 * stands where the port would, reaches the message. */
static void test_cut_password_not_shown(void **state)
{
    static const char *const cut[] = {"smb://admin:s3cr", "smb://admin:s3cr/et@fs/share",
                                      "smb://admin:hunter2", "smb://admin:pw/share"};
    struct url u;

    (void)state;
    for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
        struct err e = {{0}};
        const char *secret = strrchr(cut[i], ':') + 1;
        char piece[5];

        assert_int_equal(url_parse(cut[i], &u, &e), -EINVAL);
        snprintf(piece, sizeof(piece), "%s", secret);
        if (strstr(e.msg, piece) != NULL)
            fail_msg("message for '%s' shows '%s': %s", cut[i], piece, e.msg);
    }
}

static void test_share(void **state)
{
    (void)state;
    check_url("smb://fs/data/", "fs", 0, "data", "");
    check_url("smb://fs//data", "fs", 0, "data", "");
    check_url("smb://fs/IPC$", "fs", 0, "IPC$", "");
    check_url(with_run("smb://fs/", 255, ""), "fs", 0, with_run("", 255, ""), "");
    check_bad_url("smb://fs", -EINVAL, "no share");
    check_bad_url("smb://fs/", -EINVAL, "no share");
    check_bad_url("smb://fs:445", -EINVAL, "no share");
    check_bad_url(with_run("smb://fs/", 256, ""), -EINVAL, "share name too long");
    /* inner spaces and UTF-8 text, as Samba's share names have them */
    check_url("smb://fs/Public Files", "fs", 0, "Public Files", "");
    check_url("smb://fs/Donn\xc3\xa9"
              "es/\xe6\x97\xa5 \xf0\x9f\x93\x81",
              "fs", 0,
              "Donn\xc3\xa9"
              "es",
              "\xe6\x97\xa5 \xf0\x9f\x93\x81");
    check_bad_url("smb://fs/ share", -EINVAL,
                  "the share name contains a space at its start or end");
    check_bad_url("smb://fs/share /x", -EINVAL, "a space at its start or end");
    /* not UTF-8: a lone lead byte, a stray continuation, an overlong '/',
     * a surrogate, a C1 control */
    check_bad_url("smb://fs/a\xc3", -EINVAL, "a byte that is not UTF-8 text (0xc3)");
    check_bad_url("smb://fs/a\x80"
                  "b",
                  -EINVAL, "not UTF-8 text (0x80)");
    check_bad_url("smb://fs/a\xc0\xaf"
                  "b",
                  -EINVAL, "not UTF-8 text (0xc0)");
    check_bad_url("smb://fs/a\xed\xa0\x80", -EINVAL, "not UTF-8 text (0xed)");
    check_bad_url("smb://fs/a\xc2\x85", -EINVAL, "not UTF-8 text (0xc2)");
    check_bad_url("smb://fs/a\tb", -EINVAL, "a control character (0x09)");
    check_bad_url("smb://fs/share?x=1", -EINVAL, "share name");
    check_bad_url("smb://fs/share#top", -EINVAL, "share name");
    check_bad_url("smb://fs/a\\b", -EINVAL, "share name");
    check_bad_url("smb://fs/a<b>", -EINVAL, "share name");
}

static void test_directory_in_url(void **state)
{
    (void)state;
    check_url("smb://fs.example.org/data/a/b", "fs.example.org", 0, "data", "a/b");
    check_url("smb://fs/data//a///b/", "fs", 0, "data", "a/b");
    check_url("smb://fs/data/.smbtuned", "fs", 0, "data", ".smbtuned");
    check_url("smb://fs/data/..x/x..", "fs", 0, "data", "..x/x..");
    check_bad_url("smb://fs/share/../etc", -EINVAL, "'..'");
    check_bad_url("smb://fs/share/a/..", -EINVAL, "'..'");
    check_bad_url("smb://fs/share/./x", -EINVAL, "'.'");
    check_bad_url("smb://fs/share/d?x", -EINVAL, "reserve");
    check_url("smb://fs/share/d x", "fs", 0, "share", "d x");
    check_bad_url("smb://fs/share/ d", -EINVAL, "a space at its start or end");
    /* libsmbclient decodes escapes: "%2e%2e" would be "..", "%5c" a
     * backslash, past the checks above. */
    check_bad_url("smb://fs/share/%2e%2e/x", -EINVAL, "contains '%', which URLs reserve");
    check_bad_url("smb://fs/share/a%5cb", -EINVAL, "contains '%'");
    check_bad_url("smb://fs/sh%61re", -EINVAL, "the share name contains '%', which URLs reserve");
    check_bad_url("smb://f%73/share", -EINVAL, "bad character in host");
    check_bad_url("smb://[fe80::1%eth0%32]/share", -EINVAL, "bad character in host");
    check_bad_url(with_run("smb://fs/s/", 1024, ""), -ENAMETOOLONG, "too long");
}

static void test_check_directory(void **state)
{
    struct err e = {{0}};

    (void)state;
    assert_int_equal(url_check_directory("", &e), 0);
    assert_int_equal(url_check_directory("a/b/.probe", &e), 0);
    assert_int_equal(url_check_directory("a//b/", &e), 0);
    assert_int_equal(url_check_directory("/abs", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "relative"));
    assert_int_equal(url_check_directory("a/../b", &e), -EINVAL);
    assert_int_equal(url_check_directory("..", &e), -EINVAL);
    assert_int_equal(url_check_directory(".", &e), -EINVAL);
    assert_int_equal(url_check_directory("a b/c", &e), 0);
    assert_int_equal(url_check_directory("a /c", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "contains a space at its start or end"));
    assert_int_equal(url_check_directory("a#b", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "contains '#', which URLs reserve"));
    /* A character that cannot be shown is named by its code. */
    assert_int_equal(url_check_directory("a\tb", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "contains a control character (0x09)"));
}

typedef int (*format_fn)(const struct url *u, const char *extra, char *out, size_t outlen);

/* url parsed, then written by format with extra: want. */
static void check_format(format_fn format, const char *url, const char *extra, const char *want)
{
    struct url u;
    struct err e = {{0}};
    char out[4096];

    if (url_parse(url, &u, &e) != 0)
        fail_msg("'%s' refused: %s", url, e.msg);
    assert_int_equal(format(&u, extra, out, sizeof(out)), 0);
    assert_string_equal(out, want);
}

static void test_format(void **state)
{
    struct url u;
    struct err e = {{0}};
    char out[32];

    (void)state;
    check_format(url_format, "smb://fs/share", NULL, "smb://fs/share");
    check_format(url_format, "SMB://fs/share/", "", "smb://fs/share");
    check_format(url_format, "smb://fs:4455/share/a/b/", NULL, "smb://fs:4455/share/a/b");
    check_format(url_format, "smb://fs/share/a", "probe/x", "smb://fs/share/a/probe/x");
    check_format(url_format, "smb://fs/share", "/probe/", "smb://fs/share/probe");
    check_format(url_format, "smb://fs/share", "a//b", "smb://fs/share/a/b");
    check_format(url_format, "smb://[::1]:99/s/d", NULL, "smb://[::1]:99/s/d");
    check_format(url_format, "smb://[fe80::1%eth0]/s", NULL, "smb://[fe80::1%eth0]/s");

    /* Exactly as long as out holds, and one byte more. */
    assert_int_equal(url_parse("smb://fs/share/0123456789abcdef", &u, &e), 0);
    assert_int_equal(url_format(&u, NULL, out, sizeof(out)), 0);
    assert_string_equal(out, "smb://fs/share/0123456789abcdef");
    assert_int_equal(url_format(&u, "x", out, sizeof(out)), -ENAMETOOLONG);
}

/* What libsmbclient is given: the same URL, except an IPv6 literal,
 * which it refuses in brackets ("Invalid argument", nothing sent) and
 * reads as Samba's name for it. */
static void test_format_smbc(void **state)
{
    struct url u;
    struct err e = {{0}};
    char out[52];

    (void)state;
    check_format(url_format_smbc, "smb://fs:4455/share/a", "x", "smb://fs:4455/share/a/x");
    check_format(url_format_smbc, "smb://10.0.0.1/s", NULL, "smb://10.0.0.1/s");
    check_format(url_format_smbc, "smb://[::1]:99/s/d", NULL,
                 "smb://0-0-0-0-0-0-0-1.ipv6-literal.net:99/s/d");
    check_format(url_format_smbc, "smb://[fe80::1%eth0]/s", "",
                 "smb://fe80-0-0-0-0-0-0-1seth0.ipv6-literal.net/s");
    /* Samba reads hex digits and '-' only in such a name (any other is
     * looked up in DNS): an IPv4 tail is written as two hex groups. */
    check_format(url_format_smbc, "smb://[::ffff:127.0.0.1]:99/s", NULL,
                 "smb://0-0-0-0-0-ffff-7f00-1.ipv6-literal.net:99/s");
    check_format(url_format_smbc, "smb://[64:ff9b::192.0.2.1]/s", NULL,
                 "smb://64-ff9b-0-0-0-0-c000-201.ipv6-literal.net/s");
    check_format(url_format_smbc, "smb://[::1.2.3.4%eth0]/s", NULL,
                 "smb://0-0-0-0-0-0-102-304seth0.ipv6-literal.net/s");

    /* The longer host name must fit too. */
    assert_int_equal(url_parse("smb://[::1]/share", &u, &e), 0);
    assert_int_equal(url_format_smbc(&u, NULL, out, sizeof(out)), 0);
    assert_string_equal(out, "smb://0-0-0-0-0-0-0-1.ipv6-literal.net/share");
    assert_int_equal(url_format_smbc(&u, "0123456", out, sizeof(out)), -ENAMETOOLONG);
}

static void test_loopback(void **state)
{
    static const struct {
        const char *url;
        bool loopback;
    } cases[] = {
        {"smb://127.0.0.1/s", true},
        {"smb://localhost:4455/s", true},
        {"smb://[::1]/s", true},
        {"smb://peer/s", false},
        {"smb://127.0.0.2/s", true},
        {"smb://127.255.0.1/s", true},
        {"smb://128.0.0.1/s", false},
        {"smb://10.127.0.1/s", false},
        {"smb://LOCALHOST/s", true},
        {"smb://localhost.example/s", false},
        {"smb://[::ffff:127.0.0.1]/s", true},
        {"smb://[::ffff:10.0.0.1]/s", false},
        {"smb://[::2]/s", false},
    };
    struct err e = {{0}};

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct url u;

        assert_int_equal(url_parse(cases[i].url, &u, &e), 0);
        if (url_is_loopback(&u) != cases[i].loopback)
            fail_msg("%s: expected %s", cases[i].url, cases[i].loopback ? "loopback" : "not");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scheme),
        cmocka_unit_test(test_no_user_or_password),
        cmocka_unit_test(test_host),
        cmocka_unit_test(test_port),
        cmocka_unit_test(test_cut_password_not_shown),
        cmocka_unit_test(test_share),
        cmocka_unit_test(test_directory_in_url),
        cmocka_unit_test(test_check_directory),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_format_smbc),
        cmocka_unit_test(test_loopback),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
