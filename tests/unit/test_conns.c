/* Unit tests for lib/conns: one sock_diag answer as struct clients_sock,
 * whole and as older kernels send it (a shorter tcp_info, each cut where
 * a kernel release ended the struct), and a live read of a loopback
 * connection of the test's own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "conns.h"

/* Where tcpi_rcv_wnd sits (Linux 6.2: right after tcpi_snd_wnd), for
 * headers that predate it, as conns.c has it. */
#define RCV_WND_OFF (offsetof(struct tcp_info, tcpi_snd_wnd) + sizeof(uint32_t))
#define FULL_INFO (RCV_WND_OFF + 2 * sizeof(uint32_t)) /* with tcpi_rehash */

/* The message as the kernel lays it out, built with memcpy only (stores
 * through struct pointers into a byte array broke under -O2's aliasing
 * rules). */
struct msg {
    size_t len;
    union {
        struct inet_diag_msg d; /* aligns the bytes */
        unsigned char buf[1024];
    };
};

static void add_attr(struct msg *m, int type, const void *data, size_t len)
{
    struct rtattr a = {.rta_len = (unsigned short)RTA_LENGTH(len),
                       .rta_type = (unsigned short)type};

    memcpy(m->buf + m->len, &a, sizeof(a));
    memcpy(m->buf + m->len + RTA_LENGTH(0), data, len);
    m->len += RTA_ALIGN(a.rta_len);
}

/* An answer for 10.199.0.2:445 <- 10.199.0.1:50000 with a tcp_info of
 * info_len bytes and a skmeminfo of mem_len bytes (0: none). */
static struct msg answer(size_t info_len, size_t mem_len)
{
    struct msg m = {0};
    struct inet_diag_msg *d = &m.d;
    unsigned char raw[512] = {0};
    struct tcp_info ti = {0};
    uint32_t mem[SK_MEMINFO_VARS] = {0}, rcv_wnd = 65000;

    d->idiag_family = AF_INET;
    d->idiag_state = 1;
    d->id.idiag_sport = htons(445);
    d->id.idiag_dport = htons(50000);
    inet_pton(AF_INET, "10.199.0.2", d->id.idiag_src);
    inet_pton(AF_INET, "10.199.0.1", d->id.idiag_dst);
    d->id.idiag_cookie[0] = 0x1234;
    d->id.idiag_cookie[1] = 0x1;
    d->idiag_rqueue = 30000;
    m.len = NLMSG_ALIGN(sizeof(*d));
    ti.tcpi_rtt = 40200;
    ti.tcpi_unacked = 10;
    ti.tcpi_snd_mss = 1448;
    ti.tcpi_rcv_ssthresh = 64000;
    ti.tcpi_bytes_acked = 1000000;
    ti.tcpi_bytes_received = 2000;
    ti.tcpi_notsent_bytes = 500;
    ti.tcpi_busy_time = 300000;
    ti.tcpi_rwnd_limited = 1000;
    memcpy(raw, &ti, sizeof(ti));
    memcpy(raw + RCV_WND_OFF, &rcv_wnd, sizeof(rcv_wnd));
    add_attr(&m, INET_DIAG_INFO, raw, info_len);
    mem[SK_MEMINFO_RCVBUF] = 131072;
    mem[SK_MEMINFO_SNDBUF] = 262144;
    mem[SK_MEMINFO_WMEM_QUEUED] = 100000;
    if (mem_len)
        add_attr(&m, INET_DIAG_SKMEMINFO, mem, mem_len);
    return m;
}

static void test_whole(void **state)
{
    struct msg m = answer(FULL_INFO, sizeof(uint32_t) * SK_MEMINFO_VARS);
    struct clients_sock s;

    (void)state;
    assert_int_equal(conns_parse(&m.d, m.len, &s), 0);
    assert_int_equal(s.have, CLIENTS_HAVE_BYTES | CLIENTS_HAVE_NOTSENT | CLIENTS_HAVE_BUSY |
                                 CLIENTS_HAVE_RCV_WND | CLIENTS_HAVE_MEM);
    assert_string_equal(s.local, "10.199.0.2:445");
    assert_string_equal(s.peer, "10.199.0.1:50000");
    assert_true(s.cookie == (0x1ULL << 32 | 0x1234));
    assert_int_equal(s.rtt_us, 40200);
    assert_int_equal(s.unacked, 10);
    assert_true(s.bytes_acked == 1000000 && s.bytes_received == 2000);
    assert_int_equal(s.notsent_bytes, 500);
    assert_true(s.busy_us == 300000 && s.rwnd_limited_us == 1000);
    assert_int_equal(s.rcv_wnd, 65000);
    assert_int_equal(s.rcvbuf, 131072);
    assert_int_equal(s.sndbuf, 262144);
    assert_int_equal(s.wmem_queued, 100000);
    assert_int_equal(s.unread, 30000);
}

/* Linux 4.10 to 6.1: no tcpi_rcv_wnd; the window is rcv_ssthresh. */
static void test_no_rcv_wnd(void **state)
{
    struct msg m = answer(RCV_WND_OFF, sizeof(uint32_t) * SK_MEMINFO_VARS);
    struct clients_sock s;

    (void)state;
    assert_int_equal(conns_parse(&m.d, m.len, &s), 0);
    assert_false(s.have & CLIENTS_HAVE_RCV_WND);
    assert_true(s.have & CLIENTS_HAVE_BUSY);
    assert_int_equal(s.rcv_wnd, 64000);
    /* one byte short of the field is no field either */
    m = answer(RCV_WND_OFF + 3, sizeof(uint32_t) * SK_MEMINFO_VARS);
    assert_int_equal(conns_parse(&m.d, m.len, &s), 0);
    assert_false(s.have & CLIENTS_HAVE_RCV_WND);
    assert_int_equal(s.rcv_wnd, 64000);
}

/* Linux 4.6 to 4.9: no busy time; 4.1 to 4.5: no notsent bytes either,
 * estimated from the queue and the segments in flight. */
static void test_older(void **state)
{
    struct msg m = answer(offsetof(struct tcp_info, tcpi_busy_time), 24);
    struct clients_sock s;

    (void)state;
    assert_int_equal(conns_parse(&m.d, m.len, &s), 0);
    assert_int_equal(s.have, CLIENTS_HAVE_BYTES | CLIENTS_HAVE_NOTSENT | CLIENTS_HAVE_MEM);
    assert_true(s.busy_us == 0 && s.rwnd_limited_us == 0);
    assert_int_equal(s.notsent_bytes, 500);

    m = answer(offsetof(struct tcp_info, tcpi_notsent_bytes), 24);
    assert_int_equal(conns_parse(&m.d, m.len, &s), 0);
    assert_int_equal(s.have, CLIENTS_HAVE_BYTES | CLIENTS_HAVE_MEM);
    assert_int_equal(s.notsent_bytes, 100000 - 10 * 1448);

    m = answer(offsetof(struct tcp_info, tcpi_bytes_acked), 24);
    assert_int_equal(conns_parse(&m.d, m.len, &s), 0);
    assert_int_equal(s.have, CLIENTS_HAVE_MEM);
    assert_true(s.bytes_acked == 0 && s.bytes_received == 0);
    assert_int_equal(s.rtt_us, 40200);
    assert_int_equal(s.rcv_wnd, 64000);
}

/* A tcp_info cut before rcv_ssthresh: half the receive buffer. */
static void test_shortest(void **state)
{
    struct msg m = answer(offsetof(struct tcp_info, tcpi_rcv_ssthresh), 24);
    struct clients_sock s;

    (void)state;
    assert_int_equal(conns_parse(&m.d, m.len, &s), 0);
    assert_int_equal(s.rcv_wnd, 131072 / 2);
    assert_int_equal(s.rtt_us, 0);
    /* without skmeminfo nothing is made up */
    m = answer(offsetof(struct tcp_info, tcpi_rcv_ssthresh), 0);
    assert_int_equal(conns_parse(&m.d, m.len, &s), 0);
    assert_int_equal(s.have, 0);
    assert_int_equal(s.rcv_wnd, 0);
    assert_int_equal(s.notsent_bytes, 0);
    /* a skmeminfo too short for the queue is none */
    m = answer(FULL_INFO, 20);
    assert_int_equal(conns_parse(&m.d, m.len, &s), 0);
    assert_false(s.have & CLIENTS_HAVE_MEM);
    assert_int_equal(s.sndbuf, 0);
}

/* A longer tcp_info than any known (a newer kernel) is fine. */
static void test_longer(void **state)
{
    struct msg m = answer(400, sizeof(uint32_t) * SK_MEMINFO_VARS);
    struct clients_sock s;

    (void)state;
    assert_int_equal(conns_parse(&m.d, m.len, &s), 0);
    assert_true(s.have & CLIENTS_HAVE_RCV_WND);
    assert_int_equal(s.rcv_wnd, 65000);
}

static void test_malformed(void **state)
{
    struct msg m = answer(FULL_INFO, 0);
    struct clients_sock s;

    (void)state;
    /* no tcp_info at all */
    assert_int_equal(conns_parse(&m.d, NLMSG_ALIGN(sizeof(struct inet_diag_msg)), &s), -EINVAL);
    assert_int_equal(conns_parse(&m.d, 10, &s), -EINVAL);
    /* an attribute longer than the message is not read */
    assert_int_equal(conns_parse(&m.d, m.len - 8, &s), -EINVAL);
}

/* The last attribute's length fills the message but is not a multiple of
 * 4: the step past it (its aligned length) goes beyond the end. What lies
 * there (here a whole tcp_info) is not read: it is not in the message. */
static void test_unaligned_last_attribute(void **state)
{
    struct msg full = answer(FULL_INFO, 0), m = {0};
    size_t hdr = NLMSG_ALIGN(sizeof(struct inet_diag_msg));
    struct rtattr odd = {.rta_len = RTA_LENGTH(1), .rta_type = 99};
    struct clients_sock s;

    (void)state;
    memcpy(m.buf, full.buf, hdr);
    memcpy(m.buf + hdr, &odd, sizeof(odd));
    /* past the odd one's aligned end, outside the length given */
    memcpy(m.buf + hdr + RTA_ALIGN(odd.rta_len), full.buf + hdr, full.len - hdr);
    assert_int_equal(conns_parse(&m.d, hdr + odd.rta_len, &s), -EINVAL);
}

static void test_ipv6(void **state)
{
    struct msg m = answer(FULL_INFO, 0);
    struct inet_diag_msg *d = &m.d;
    struct clients_sock s;

    (void)state;
    d->idiag_family = AF_INET6;
    inet_pton(AF_INET6, "2001:db8::2", d->id.idiag_src);
    inet_pton(AF_INET6, "::1", d->id.idiag_dst);
    assert_int_equal(conns_parse(d, m.len, &s), 0);
    assert_string_equal(s.local, "[2001:db8::2]:445");
    assert_string_equal(s.peer, "[::1]:50000");
    /* an IPv4 client of a dual-stack listener */
    inet_pton(AF_INET6, "::ffff:10.199.0.1", d->id.idiag_dst);
    assert_int_equal(conns_parse(d, m.len, &s), 0);
    assert_string_equal(s.peer, "10.199.0.1:50000");
}

/* The real thing: a connection of our own on loopback, from the side that
 * accepted it, with the bytes it received: unread (idiag_rqueue) until it
 * reads them, none after. */
static void test_live(void **state)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0), s, port;
    struct clients_sock *v = NULL;
    char data[5000] = {0}, buf[5000];
    struct err e = {{0}};
    size_t n = 0, got = 0;

    (void)state;
    assert_true(l >= 0 && c >= 0);
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &alen), 0);
    port = ntohs(a.sin_port);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
    s = accept(l, NULL, NULL);
    assert_true(s >= 0);
    assert_int_equal(write(c, data, sizeof(data)), (ssize_t)sizeof(data));
    {
        int ports[1] = {port};

        /* loopback delivers within the write, as a rule; a few tries in
         * case a softirq runs late */
        for (int i = 0; i < 100; i++) {
            assert_int_equal(conns_read(ports, 1, &v, &n, &e), 0);
            assert_int_equal(n, 1);
            if (v[0].bytes_received == sizeof(data))
                break;
            free(v);
            v = NULL;
            usleep(10000);
        }
        assert_true(v != NULL && v[0].bytes_received == sizeof(data));
        assert_int_equal(v[0].unread, sizeof(data));
        free(v);
    }
    while (got < sizeof(data)) {
        ssize_t r = read(s, buf, sizeof(buf));

        assert_true(r > 0);
        got += (size_t)r;
    }
    {
        int ports[2] = {1, port}; /* the port list, not only its first */

        assert_int_equal(conns_read(ports, 2, &v, &n, &e), 0);
    }
    /* the accepted side only: the client's local port is another */
    assert_int_equal(n, 1);
    assert_true(v[0].bytes_received == sizeof(data));
    assert_int_equal(v[0].unread, 0);
    assert_true(v[0].have & CLIENTS_HAVE_MEM);
    assert_true(v[0].rcvbuf > 0 && v[0].sndbuf > 0);
    assert_true(strstr(v[0].local, "127.0.0.1:") == v[0].local);
    free(v);
    close(c);
    close(s);
    close(l);
    {
        int ports[1] = {port};

        assert_int_equal(conns_read(ports, 1, &v, &n, &e), 0);
    }
    /* closed at both ends: no longer established */
    assert_int_equal(n, 0);
    free(v);
}

/* A dual-stack listener (::) and an IPv4 client: the AF_INET6 dump finds
 * it, and names both ends as IPv4. */
static void test_live_dual_stack(void **state)
{
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a6);
    int l = socket(AF_INET6, SOCK_STREAM, 0), c, s, off = 0;
    struct clients_sock *v = NULL;
    struct err e = {{0}};
    int port[1];
    size_t n = 0;

    (void)state;
    if (l < 0)
        skip(); /* no IPv6 in this kernel */
    assert_int_equal(setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)), 0);
    assert_int_equal(bind(l, (struct sockaddr *)&a6, sizeof(a6)), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a6, &alen), 0);
    port[0] = ntohs(a6.sin6_port);
    a.sin_port = a6.sin6_port;
    c = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
    s = accept(l, NULL, NULL);
    assert_true(s >= 0);
    assert_int_equal(conns_read(port, 1, &v, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_true(strstr(v[0].local, "127.0.0.1:") == v[0].local);
    assert_true(strstr(v[0].peer, "127.0.0.1:") == v[0].peer);
    free(v);
    close(c);
    close(s);
    close(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole),
        cmocka_unit_test(test_no_rcv_wnd),
        cmocka_unit_test(test_older),
        cmocka_unit_test(test_shortest),
        cmocka_unit_test(test_longer),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_unaligned_last_attribute),
        cmocka_unit_test(test_ipv6),
        cmocka_unit_test(test_live),
        cmocka_unit_test(test_live_dual_stack),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
