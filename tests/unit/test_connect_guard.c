/* Unit tests for lib/connect_guard: off, connect() is the C library's;
 * on, an IPv4 or IPv6 connection goes only to an allowed address and
 * port, and everything else is left to the kernel. The guard cannot be
 * turned off again: the test that needs it off runs first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "connect_guard.h"

/* connect() to addr on a new nonblocking socket of its family (nothing
 * waits for a peer): 0 or the errno. */
static int try_connect(const void *addr, socklen_t len)
{
    int fd = socket(((const struct sockaddr *)addr)->sa_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int r, er;

    assert_true(fd >= 0);
    errno = 0;
    r = connect(fd, addr, len);
    er = errno;
    close(fd);
    return r == 0 ? 0 : er;
}

static struct sockaddr_in v4(const char *a, unsigned port)
{
    struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};

    assert_int_equal(inet_pton(AF_INET, a, &s.sin_addr), 1);
    return s;
}

static struct sockaddr_in6 v6(const char *a, unsigned scope, unsigned port)
{
    struct sockaddr_in6 s = {
        .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_scope_id = scope};

    assert_int_equal(inet_pton(AF_INET6, a, &s.sin6_addr), 1);
    return s;
}

/* Arm the guard for the one address sa (as getaddrinfo() would give it). */
static void guard_on(void *sa, socklen_t len, unsigned port)
{
    struct addrinfo ai = {.ai_family = ((struct sockaddr *)sa)->sa_family,
                          .ai_socktype = SOCK_STREAM,
                          .ai_addrlen = len,
                          .ai_addr = sa};

    assert_int_equal(connect_guard_on(&ai, port), 0);
    assert_null(connect_guard_refused());
}

static void test_off_is_the_c_library(void **state)
{
    struct sockaddr_un un = {.sun_family = AF_UNIX, .sun_path = "/nonexistent/socket"};
    struct sockaddr_in a = v4("127.0.0.2", 445);

    (void)state;
    assert_int_equal(try_connect(&un, sizeof(un)), ENOENT);
    assert_int_not_equal(try_connect(&a, sizeof(a)), EACCES);
    assert_int_equal(connect(-1, (struct sockaddr *)&a, sizeof(a)), -1);
    assert_int_equal(errno, EBADF);
    assert_null(connect_guard_refused());
}

static void test_other_host_or_port_refused(void **state)
{
    struct sockaddr_in ok = v4("127.0.0.1", 0), a;

    (void)state;
    guard_on(&ok, sizeof(ok), 0);
    /* no port in the url: libsmbclient's 445 and 139 */
    a = v4("127.0.0.1", 445);
    assert_int_not_equal(try_connect(&a, sizeof(a)), EACCES);
    a = v4("127.0.0.1", 139);
    assert_int_not_equal(try_connect(&a, sizeof(a)), EACCES);
    assert_null(connect_guard_refused());
    a = v4("127.0.0.1", 446);
    assert_int_equal(try_connect(&a, sizeof(a)), EACCES);
    assert_string_equal(connect_guard_refused(), "127.0.0.1 port 446");
    a = v4("127.0.0.2", 445);
    assert_int_equal(try_connect(&a, sizeof(a)), EACCES);
    /* the first refusal is the one named */
    assert_string_equal(connect_guard_refused(), "127.0.0.1 port 446");

    /* a port in the url: that one only */
    guard_on(&ok, sizeof(ok), 4450);
    a = v4("127.0.0.1", 4450);
    assert_int_not_equal(try_connect(&a, sizeof(a)), EACCES);
    a = v4("127.0.0.1", 445);
    assert_int_equal(try_connect(&a, sizeof(a)), EACCES);
}

static void test_same_host_in_another_form_refused(void **state)
{
    struct sockaddr_in ok = v4("127.0.0.1", 0), a = v4("127.0.0.1", 445);
    struct sockaddr_in6 m = v6("::ffff:127.0.0.1", 0, 445);

    (void)state;
    guard_on(&ok, sizeof(ok), 0);
    /* IPv4-mapped: an IPv6 socket to the IPv4 host is not the address
     * that was resolved */
    assert_int_equal(try_connect(&m, sizeof(m)), EACCES);
    /* too short to hold a port and address: refused, not guessed at */
    assert_int_equal(try_connect(&a, 8), EACCES);
}

/* After a refusal, the refused address is looked for in a fresh look-up
 * of the url's host: there, the name moved; not there, it was a referral.
 * The port does not count. */
static void test_refused_among(void **state)
{
    struct sockaddr_in ok = v4("127.0.0.1", 0), a = v4("127.0.0.3", 445);
    struct sockaddr_in one = v4("127.0.0.1", 0), three = v4("127.0.0.3", 0);
    struct sockaddr_in6 six = v6("::1", 0, 0);
    struct addrinfo ai3 = {
        .ai_family = AF_INET, .ai_addrlen = sizeof(three), .ai_addr = (void *)&three};
    struct addrinfo ai6 = {
        .ai_family = AF_INET6, .ai_addrlen = sizeof(six), .ai_addr = (void *)&six};
    struct addrinfo ai1 = {
        .ai_family = AF_INET, .ai_addrlen = sizeof(one), .ai_addr = (void *)&one};

    (void)state;
    guard_on(&ok, sizeof(ok), 0);
    assert_false(connect_guard_refused_among(&ai1)); /* nothing refused yet */
    assert_int_equal(try_connect(&a, sizeof(a)), EACCES);
    assert_string_equal(connect_guard_refused(), "127.0.0.3 port 445");
    ai1.ai_next = &ai6;
    assert_false(connect_guard_refused_among(&ai1));
    ai6.ai_next = &ai3;
    assert_true(connect_guard_refused_among(&ai1));
    assert_false(connect_guard_refused_among(NULL));
}

static void test_other_families_left_to_the_kernel(void **state)
{
    struct sockaddr_in ok = v4("127.0.0.1", 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX, .sun_path = "/nonexistent/socket"};

    (void)state;
    guard_on(&ok, sizeof(ok), 0);
    assert_int_equal(try_connect(&un, sizeof(un)), ENOENT);
    assert_null(connect_guard_refused());
}

static void test_link_local_needs_its_interface(void **state)
{
    struct sockaddr_in6 ok = v6("fe80::1", 1, 0), a;

    (void)state;
    guard_on(&ok, sizeof(ok), 0);
    a = v6("fe80::1", 1, 445);
    assert_int_not_equal(try_connect(&a, sizeof(a)), EACCES);
    assert_null(connect_guard_refused());
    /* the same address on another link is another host */
    a = v6("fe80::1", 2, 445);
    assert_int_equal(try_connect(&a, sizeof(a)), EACCES);
    assert_string_equal(connect_guard_refused(), "fe80::1 port 445");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off_is_the_c_library),
        cmocka_unit_test(test_other_host_or_port_refused),
        cmocka_unit_test(test_same_host_in_another_form_refused),
        cmocka_unit_test(test_refused_among),
        cmocka_unit_test(test_other_families_left_to_the_kernel),
        cmocka_unit_test(test_link_local_needs_its_interface),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
