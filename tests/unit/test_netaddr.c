/* netaddr: loopback addresses and a connection's two ends on one machine
 * (lib/netaddr.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "netaddr.h"

/* An address as getsockname gives one: sockaddr_in for a dotted quad,
 * sockaddr_in6 otherwise (v4-mapped ones included). */
static struct sockaddr_storage addr(const char *text, unsigned short port)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;

    memset(&ss, 0, sizeof(ss));
    if (inet_pton(AF_INET, text, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(port);
    } else {
        assert_int_equal(inet_pton(AF_INET6, text, &a6->sin6_addr), 1);
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(port);
    }
    return ss;
}

#define SA(ss) ((const struct sockaddr *)&(ss))

static void test_loopback(void **state)
{
    static const struct {
        const char *a;
        bool loopback;
    } cases[] = {
        {"127.0.0.1", true},
        {"127.255.1.2", true},
        {"127.0.0.0", true},
        {"128.0.0.1", false},
        {"126.255.255.255", false},
        {"10.127.0.1", false},
        {"0.0.0.0", false},
        {"::1", true},
        {"::", false},
        {"::2", false},
        {"::ffff:127.0.0.1", true},
        {"::ffff:127.9.8.7", true},
        {"::ffff:10.0.0.1", false},
        {"::ffff:128.0.0.1", false},
        {"fe80::1", false},
        {"2001:db8::1", false},
        {"::127.0.0.1", false}, /* v4-compatible, not mapped */
    };
    struct sockaddr_storage un;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sockaddr_storage ss = addr(cases[i].a, 445);

        if (netaddr_loopback(SA(ss)) != cases[i].loopback)
            fail_msg("%s: expected %s", cases[i].a, cases[i].loopback ? "loopback" : "not");
    }
    memset(&un, 0, sizeof(un));
    un.ss_family = AF_UNIX;
    assert_false(netaddr_loopback(SA(un)));
    assert_false(netaddr_loopback(NULL));
}

static void test_same_host(void **state)
{
    static const struct {
        const char *self, *peer;
        bool same;
    } cases[] = {
        /* this machine by a non-loopback address: the kernel answers from it */
        {"192.168.1.5", "192.168.1.5", true},
        {"2001:db8::5", "2001:db8::5", true},
        {"::ffff:192.168.1.5", "::ffff:192.168.1.5", true},
        {"fe80::5", "fe80::5", true},
        /* loopback peers, whatever the source */
        {"127.0.0.1", "127.0.0.1", true},
        {"127.0.0.2", "127.0.0.1", true},
        {"::1", "::1", true},
        {"::ffff:127.0.0.1", "::ffff:127.0.0.1", true},
        /* another machine */
        {"192.168.1.5", "192.168.1.6", false},
        {"10.0.0.1", "10.0.0.2", false},
        {"2001:db8::5", "2001:db8::6", false},
        {"::ffff:192.168.1.5", "::ffff:192.168.1.6", false},
        {"fe80::5", "fe80::6", false},
        /* one address in two families is no match: a connection has one */
        {"192.168.1.5", "::ffff:192.168.1.5", false},
        {"::ffff:192.168.1.5", "192.168.1.5", false},
        /* a loopback source says nothing of the peer */
        {"127.0.0.1", "192.168.1.6", false},
        {"::1", "2001:db8::6", false},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        /* the ports differ, as a connection's two ends do */
        struct sockaddr_storage self = addr(cases[i].self, 51234);
        struct sockaddr_storage peer = addr(cases[i].peer, 445);

        if (netaddr_same_host(SA(self), SA(peer)) != cases[i].same)
            fail_msg("%s -> %s: expected %s", cases[i].self, cases[i].peer,
                     cases[i].same ? "this machine" : "another");
    }
    {
        struct sockaddr_storage a = addr("192.168.1.5", 1);

        assert_false(netaddr_same_host(NULL, SA(a)));
        assert_false(netaddr_same_host(SA(a), NULL));
    }
}

/* The same of real sockets: a connection over loopback is this machine's;
 * a socket that is not connected has no answer. */
static void test_fd(void **state)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    (void)state;
    assert_true(l >= 0 && c >= 0);
    assert_int_equal(netaddr_fd_same_host(c), -ENOTCONN);
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &al), 0);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(netaddr_fd_same_host(c), 1);
    assert_int_equal(netaddr_fd_same_host(-1), -EBADF);
    close(c);
    close(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loopback),
        cmocka_unit_test(test_same_host),
        cmocka_unit_test(test_fd),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
