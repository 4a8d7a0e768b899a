/* clients_watch's pure half: the summary of real connections (the
 * bandwidth-delay product of the buffer-limited ones, per buffer) and
 * whether they ask for more than the value in force gives (steering).
 * The watch on the loop runs here on loopback sockets of the test's own
 * (its window: with a connection, without one); what it reads from a real
 * smbd is left to the integration tests (test_journal_events.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "clients_watch.h"

static struct clients_conn conn(enum clients_limit l, double rtt_ms, double sent, double received,
                                long rcvbuf, long sndbuf)
{
    return (struct clients_conn){.limited_by = l,
                                 .rtt_ms = rtt_ms,
                                 .sent_mbps = sent,
                                 .received_mbps = received,
                                 .rcvbuf = rcvbuf,
                                 .sndbuf = sndbuf};
}

/* The product of a buffer-limited connection is its round trip times the
 * rate in the direction that buffer limits; the others count in the
 * summary but not in the products. */
static void test_summarize(void **state)
{
    struct clients_conn v[] = {
        /* a get held back by the send buffer: 40 ms x 1.6 MB/s */
        conn(CLIENTS_SNDBUF, 40, 1.6, 0.01, 131072, 131072),
        /* a put held back by the receive buffer: 10 ms x 6.5 MB/s */
        conn(CLIENTS_RCVBUF, 10, 0.01, 6.5, 131072, 87040),
        /* fast and far, but the network's: no product of ours */
        conn(CLIENTS_NETWORK, 80, 100, 0, 6291456, 4194304),
        conn(CLIENTS_IDLE, 1, 0, 0, 131072, 16384),
    };
    struct clients_watch_summary sum;

    (void)state;
    clients_watch_summarize(v, 4, &sum);
    assert_true(sum.valid);
    assert_int_equal(sum.s.connections, 4);
    assert_int_equal(sum.s.by[CLIENTS_SNDBUF], 1);
    assert_int_equal(sum.s.by[CLIENTS_RCVBUF], 1);
    assert_int_equal(sum.s.limited_by_buffers, 2);
    assert_true(sum.bdp[SOCKOPTS_SNDBUF] > 63999 && sum.bdp[SOCKOPTS_SNDBUF] < 64001);
    assert_true(sum.bdp[SOCKOPTS_RCVBUF] > 64999 && sum.bdp[SOCKOPTS_RCVBUF] < 65001);
    assert_true(sum.bdp_max == sum.bdp[SOCKOPTS_RCVBUF]);
    assert_int_equal(sum.buf_max[SOCKOPTS_SNDBUF], 131072);
    assert_int_equal(sum.buf_max[SOCKOPTS_RCVBUF], 131072);
    assert_true(sum.s.rtt_max_ms == 80);
    /* none at all: valid, zeros */
    clients_watch_summarize(NULL, 0, &sum);
    assert_true(sum.valid);
    assert_int_equal(sum.s.connections, 0);
    assert_true(sum.bdp_max == 0);
}

/* Steering: an explicit size below the cap for a buffer that holds some
 * back asks for more; at the cap it cannot. Under autotuning, only those
 * held back at its ceiling, and only where an explicit size (doubled by
 * the kernel) goes above it. Not read, or none held back: nothing. */
static void test_asks_more(void **state)
{
    const long cap[2] = {4194304, 4194304}, tcp_max[2] = {6291456, 4194304};
    const long low_tcp[2] = {131072, 131072};
    struct clients_watch_summary sum = {.valid = true};
    char why[512];

    (void)state;
    sum.s.connections = 2;
    sum.s.by[CLIENTS_NETWORK] = 2;
    assert_false(clients_watch_asks_more(&sum, 65536, 65536, cap, tcp_max, why, sizeof(why)));
    assert_string_equal(why, "");
    sum.s.by[CLIENTS_NETWORK] = 1;
    sum.s.by[CLIENTS_SNDBUF] = 1;
    sum.bdp[SOCKOPTS_SNDBUF] = 64000;
    sum.buf_max[SOCKOPTS_SNDBUF] = 131072;
    assert_true(clients_watch_asks_more(&sum, 65536, 65536, cap, tcp_max, why, sizeof(why)));
    assert_string_equal(why, "1 real connection held back by the server's send buffer "
                             "(SO_SNDBUF=65536, below the largest allowed 4194304; "
                             "bandwidth-delay product up to 64000 bytes)");
    /* the send buffer at the cap gives no more; the receive buffer holds
     * none back, so its size does not matter */
    assert_false(clients_watch_asks_more(&sum, 65536, 4194304, cap, tcp_max, why, sizeof(why)));
    /* autotuning, below its ceiling: not the buffer's fault to fix */
    assert_false(clients_watch_asks_more(&sum, 0, 0, cap, tcp_max, why, sizeof(why)));
    assert_false(clients_watch_asks_more(&sum, 0, 0, cap, NULL, why, sizeof(why)));
    /* at a low ceiling: an explicit size can do better */
    assert_true(clients_watch_asks_more(&sum, 0, 0, cap, low_tcp, why, sizeof(why)));
    assert_non_null(strstr(why, "under autotuning, at net.ipv4.tcp_wmem's maximum (131072)"));
    /* not even that when the cap is lower still (stock Debian: 212992 /
     * 2 is below a ceiling of 4194304) */
    sum.buf_max[SOCKOPTS_SNDBUF] = 4194304;
    assert_false(clients_watch_asks_more(&sum, 0, 0, (const long[]){212992, 212992}, tcp_max, why,
                                         sizeof(why)));
    /* a cap of 3 MiB asks for a 6 MiB buffer: above a 4 MiB ceiling */
    assert_true(clients_watch_asks_more(&sum, 0, 0, (const long[]){3145728, 3145728}, tcp_max, why,
                                        sizeof(why)));
    sum.valid = false;
    assert_false(clients_watch_asks_more(&sum, 65536, 65536, cap, tcp_max, why, sizeof(why)));
}

/* A put that smbd reads slowly (disk, CPU; lib/clients' CLIENTS_SMBD):
 * fast, with a small receive buffer, but no buffer holds it back. It
 * counts apart, gives no bandwidth-delay product, asks for no larger
 * SO_RCVBUF (the reviewer's loopback put at 137 MB/s into
 * SO_RCVBUF=65536 had the daemon raise it to the kernel's cap), and after
 * a commit it is busy, not held back. */
static void test_slow_smbd_asks_nothing(void **state)
{
    const long cap[2] = {4194304, 4194304}, tcp_max[2] = {6291456, 4194304};
    struct clients_conn v[] = {
        conn(CLIENTS_SMBD, 19.1, 0.01, 136.82, 131072, 131072),
        conn(CLIENTS_SMBD, 19.1, 0.01, 136.82, 131072, 131072),
        conn(CLIENTS_SMBD, 19.1, 0.01, 136.82, 131072, 131072),
    };
    struct clients_watch_summary sum, before;
    struct clients_watch_compare cmp;
    char why[512];

    (void)state;
    for (int i = 0; i < 3; i++)
        v[i].cookie = 10 + (uint64_t)i;
    clients_watch_summarize(v, 3, &sum);
    assert_int_equal(sum.s.connections, 3);
    assert_int_equal(sum.s.by[CLIENTS_SMBD], 3);
    assert_int_equal(sum.s.by[CLIENTS_RCVBUF], 0);
    assert_int_equal(sum.s.limited_by_buffers, 0);
    assert_true(sum.bdp_max == 0 && sum.bdp[SOCKOPTS_RCVBUF] == 0);
    assert_int_equal(sum.buf_max[SOCKOPTS_RCVBUF], 0);
    assert_false(clients_watch_asks_more(&sum, 65536, 65536, cap, tcp_max, why, sizeof(why)));
    assert_string_equal(why, "");
    assert_false(clients_watch_asks_more(&sum, 0, 0, cap, tcp_max, why, sizeof(why)));
    /* before: three others, none held back; now these three, busy and
     * not held back either: no worse for the buffers' share */
    memset(&before, 0, sizeof(before));
    before.valid = true;
    for (int i = 0; i < 3; i++)
        before.conns[before.nconns++] =
            (struct clients_watch_conn){1 + (uint64_t)i, CLIENTS_NETWORK, 136.82};
    clients_watch_compare(&before, &sum, &cmp);
    assert_int_equal(cmp.new_busy, 3);
    assert_int_equal(cmp.new_held, 0);
    assert_int_equal(cmp.verdict, CLIENTS_WATCH_SAME);
}

/* A summary of connections (cookie, cause, rate). */
static void with(struct clients_watch_summary *s, int n, const uint64_t *cookie,
                 const enum clients_limit *l, double mbps)
{
    memset(s, 0, sizeof(*s));
    s->valid = true;
    for (int i = 0; i < n; i++)
        s->conns[s->nconns++] = (struct clients_watch_conn){cookie[i], l[i], mbps};
}

/* After a commit: the connections opened since (cookies not seen before)
 * against those before it; too few busy ones on a side say nothing; the
 * share held back by the server's buffers decides, the rates only when it
 * did not move. */
static void test_compare(void **state)
{
    const enum clients_limit held4[] = {CLIENTS_SNDBUF, CLIENTS_RCVBUF, CLIENTS_SNDBUF,
                                        CLIENTS_NETWORK};
    const enum clients_limit net4[] = {CLIENTS_NETWORK, CLIENTS_NETWORK, CLIENTS_IDLE,
                                       CLIENTS_NETWORK};
    const uint64_t old[] = {1, 2, 3, 4}, fresh[] = {5, 6, 7, 8}, mixed[] = {1, 2, 3, 9};
    struct clients_watch_summary before, now;
    struct clients_watch_compare c;

    (void)state;
    with(&before, 4, old, held4, 2);
    /* three new busy ones, none held back: better */
    with(&now, 4, fresh, net4, 2);
    clients_watch_compare(&before, &now, &c);
    assert_int_equal(c.before_busy, 4);
    assert_int_equal(c.before_held, 3);
    assert_int_equal(c.new_busy, 3);
    assert_int_equal(c.new_held, 0);
    assert_int_equal(c.verdict, CLIENTS_WATCH_BETTER);
    assert_string_equal(clients_watch_verdict_name(c.verdict), "better");
    /* the same connections as before are no new ones: too few */
    with(&now, 4, mixed, net4, 2);
    clients_watch_compare(&before, &now, &c);
    assert_int_equal(c.new_busy, 1);
    assert_int_equal(c.verdict, CLIENTS_WATCH_TOO_FEW);
    /* the other way round: worse */
    with(&before, 4, old, net4, 2);
    with(&now, 4, fresh, held4, 2);
    clients_watch_compare(&before, &now, &c);
    assert_int_equal(c.verdict, CLIENTS_WATCH_WORSE);
    /* the same share: the rates speak, only when far apart */
    with(&now, 4, fresh, net4, 2.2);
    clients_watch_compare(&before, &now, &c);
    assert_int_equal(c.verdict, CLIENTS_WATCH_SAME);
    with(&now, 4, fresh, net4, 3);
    clients_watch_compare(&before, &now, &c);
    assert_int_equal(c.verdict, CLIENTS_WATCH_BETTER);
    assert_true(c.new_mbps == 3 && c.before_mbps == 2);
    with(&now, 4, fresh, net4, 1);
    clients_watch_compare(&before, &now, &c);
    assert_int_equal(c.verdict, CLIENTS_WATCH_WORSE);
    /* nothing busy before: nothing to compare with */
    with(&before, 0, old, net4, 0);
    clients_watch_compare(&before, &now, &c);
    assert_int_equal(c.verdict, CLIENTS_WATCH_TOO_FEW);
}

struct watched {
    int r, nconns, snapshots;
    bool done;
    double stall_s; /* > 0: the loop stalls this long once, 0.1 s in */
};

static void on_watched(void *ud, int r, const struct clients_watch_summary *sum, const char *why)
{
    struct watched *w = ud;

    (void)why;
    w->r = r;
    w->nconns = sum != NULL ? sum->nconns : -1;
    w->snapshots = sum != NULL ? sum->snapshots : -1;
    w->done = true;
}

/* Something else on the loop that takes long once (a slow dump, a busy
 * machine). */
static int on_stall(sd_event_source *s, uint64_t usec, void *ud)
{
    const struct watched *w = ud;

    (void)s;
    (void)usec;
    nanosleep(&(struct timespec){(time_t)w->stall_s,
                                 (long)((w->stall_s - (double)(time_t)w->stall_s) * 1e9)},
              NULL);
    return 0;
}

/* A listener on a loopback port of the kernel's choice; its port. */
static int listener(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Watch port for seconds on a loop of its own; the loop's time it took. */
static double watch(int port, double seconds, struct watched *w)
{
    sd_event *ev = NULL;
    sd_event_source *stall = NULL;
    struct clients_watch *cw = NULL;
    uint64_t t0, t1;

    assert_true(sd_event_new(&ev) >= 0);
    assert_int_equal(clients_watch_new(ev, &cw), 0);
    *w = (struct watched){.stall_s = w->stall_s};
    assert_true(sd_event_now(ev, CLOCK_MONOTONIC, &t0) >= 0);
    if (w->stall_s > 0)
        assert_true(
            sd_event_add_time(ev, &stall, CLOCK_MONOTONIC, t0 + 100000, 1000, on_stall, w) >= 0);
    assert_int_equal(clients_watch_start(cw, &port, 1, seconds, on_watched, w), 0);
    assert_false(w->done); /* from the loop, never from inside the call */
    while (!w->done)
        assert_true(sd_event_run(ev, UINT64_MAX) >= 0);
    assert_true(sd_event_now(ev, CLOCK_MONOTONIC, &t1) >= 0);
    sd_event_source_disable_unref(stall);
    clients_watch_free(cw);
    sd_event_unref(ev);
    return (double)(t1 - t0) / 1e6;
}

/* With a connection the watch takes its whole window; with none it ends
 * at its first snapshot (no cycle waits for a client that is not there).
 * The bound is a quarter of a 4 s window against one 50 ms tick. */
static void test_window(void **state)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct watched w = {0};
    int port, lfd, cfd, afd;
    double took;

    (void)state;
    lfd = listener(&port);
    took = watch(port, 4.0, &w);
    assert_int_equal(w.r, 0);
    assert_int_equal(w.nconns, 0);
    assert_true(took < 1.0);

    cfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(cfd >= 0);
    a.sin_port = htons((uint16_t)port);
    assert_int_equal(connect(cfd, (struct sockaddr *)&a, sizeof(a)), 0);
    afd = accept(lfd, NULL, NULL);
    assert_true(afd >= 0);
    took = watch(port, 0.3, &w);
    assert_int_equal(w.r, 0);
    assert_int_equal(w.nconns, 1);
    assert_true(took >= 0.3);
    assert_true(w.snapshots >= 2 && w.snapshots <= 8); /* 0.3 s at 50 ms: 7 */

    /* A loop stalled 0.6 s of a 1 s window: the snapshots go on on the
     * grid after it, the missed ones skipped (about 11; taken back to
     * back they were 21). */
    w.stall_s = 0.6;
    took = watch(port, 1.0, &w);
    assert_int_equal(w.r, 0);
    assert_true(took >= 1.0);
    assert_true(w.snapshots >= 4 && w.snapshots <= 15);
    close(afd);
    close(cfd);
    close(lfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summarize),
        cmocka_unit_test(test_asks_more),
        cmocka_unit_test(test_slow_smbd_asks_nothing),
        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_window),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
