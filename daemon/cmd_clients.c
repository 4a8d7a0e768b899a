/* --clients: what smbd's real clients get (issue 13). sock_diag of smbd's
 * established connections (lib/conns) every 50 ms for --seconds, judged
 * by lib/clients: per connection what holds it back, in words or as one
 * JSON object. Read only. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clients.h"
#include "cmd.h"
#include "config.h"
#include "conns.h"
#include "jsonw.h"
#include "parse.h"
#include "smbd.h"

/* sock_diag every 50 ms: often enough to see the send queue's state in
 * most round trips of a wide-area client (issue 13), cheap enough (one
 * dump) on a server with many. */
#define SAMPLE_NS 50000000L
#define DEFAULT_SECONDS 2
#define MAX_SECONDS 3600

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Until t (CLOCK_MONOTONIC seconds): a late sample does not shift the
 * ones after it. */
static void sleep_until(double t)
{
    struct timespec ts = {.tv_sec = (time_t)t, .tv_nsec = (long)((t - floor(t)) * 1e9)};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* Snapshots every SAMPLE_NS for seconds, into c. */
static int observe(struct clients *c, const int *ports, int nports, long seconds, int *nsnap,
                   struct err *e)
{
    double t0 = now_s(), t = t0;
    int r = 0;

    for (long k = 0; r == 0; k++) {
        struct clients_sock *v = NULL;
        size_t n = 0;

        r = conns_read(ports, nports, &v, &n, e);
        if (r == 0) {
            r = clients_add(c, t, v, n);
            if (r < 0)
                err_set(e, r, "out of memory");
            (*nsnap)++;
        }
        free(v);
        if (r < 0 || t - t0 >= seconds)
            break;
        sleep_until(t0 + (double)(k + 1) * SAMPLE_NS / 1e9);
        t = now_s();
    }
    return r;
}

static const char *ports_str(const int *ports, int n, char *buf, size_t len)
{
    size_t at;

    at = (size_t)snprintf(buf, len, "%s ", n == 1 ? "port" : "ports");
    for (int i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? ", " : "", ports[i]);
    return buf;
}

static void print_text(const struct clients_conn *v, size_t n, const struct clients_summary *s,
                       const char *ports, double seconds, int nsnap, int listening)
{
    printf("smbd's connections on %s, over %.1f s (%d samples):\n", ports, seconds, nsnap);
    if (n == 0 && listening == 0)
        printf("  none established: nothing listens on %s in this network namespace "
               "(is smbd running, and does smb.conf name its ports?)\n",
               ports);
    else if (n == 0)
        printf("  none established\n");
    for (size_t i = 0; i < n; i++) {
        const struct clients_conn *c = &v[i];
        double cap = c->rtt_ms > 0 ? c->window / (c->rtt_ms / 1000) / 1e6 : 0;

        printf("\n%s -> %s\n", c->peer, c->local);
        printf("  Limited by      : %s\n", clients_limit_words(c->limited_by));
        printf("  Round trip      : %.1f ms\n", c->rtt_ms);
        printf("  Buffers         : receive %ld, send %ld bytes\n", c->rcvbuf, c->sndbuf);
        printf("  Sent, received  : %.2f, %.2f MB/s\n", c->sent_mbps, c->received_mbps);
        printf("  Send buffer     : full in %.0f%% of the %d samples with data in flight\n",
               100 * c->sndbuf_limited, c->in_flight);
        printf("  Client window   : the limit in %.0f%% of the busy time\n", 100 * c->rwnd_limited);
        printf("  Receive window  : %.0f bytes%s: at most %.2f MB/s over this round trip; "
               "%s\n",
               c->window, c->window_estimated ? " (estimated: no tcpi_rcv_wnd)" : "", cap,
               c->rcvbuf_limited                   ? "the client writes at that rate"
               : cap > 0 && c->received_mbps > cap ? "not the limit (more came: the round trip "
                                                     "of smbd's replies overstates the client's)"
                                                   : "not the limit");
        printf("  Unread by smbd  : %.0f bytes on average; more than half the window in %.0f%% "
               "of the samples\n",
               c->unread, 100 * c->unread_backlog);
    }
    printf("\nSummary: %d connection%s, %d limited by the server's buffers (send %d, receive "
           "%d), %d by smbd itself, %d by the client's window, %d by the network, %d idle\n",
           s->connections, s->connections == 1 ? "" : "s", s->limited_by_buffers,
           s->by[CLIENTS_SNDBUF], s->by[CLIENTS_RCVBUF], s->by[CLIENTS_SMBD],
           s->by[CLIENTS_CLIENT_WINDOW], s->by[CLIENTS_NETWORK], s->by[CLIENTS_IDLE]);
}

/* Rounded for people; the JSON carries no more digits than the figures
 * are worth. */
static json_t *real(double x, double unit)
{
    return json_real(round(x / unit) * unit);
}

/* The _new setters take over their value whatever happens, into a NULL
 * object too (then they fail and release it): one flag covers them. */
static int print_json(const struct clients_conn *v, size_t n, const struct clients_summary *s,
                      int listening)
{
    json_t *o = json_object(), *a = json_array(), *sum = json_object();
    int bad = o == NULL || a == NULL || sum == NULL;

    for (size_t i = 0; i < n && !bad; i++) {
        const struct clients_conn *c = &v[i];
        json_t *x = json_object();

        bad |= x == NULL;
#define SET(k, val) (bad |= json_object_set_new(x, k, val) < 0)
        SET("peer", jsonw_text(c->peer));
        SET("local", jsonw_text(c->local));
        SET("rtt_ms", real(c->rtt_ms, 0.01));
        SET("rcvbuf", json_integer(c->rcvbuf));
        SET("sndbuf", json_integer(c->sndbuf));
        SET("sent_mbps", real(c->sent_mbps, 0.001));
        SET("received_mbps", real(c->received_mbps, 0.001));
        SET("sndbuf_limited", real(c->sndbuf_limited, 0.001));
        SET("rwnd_limited", real(c->rwnd_limited, 0.001));
        SET("rcvbuf_limited", json_boolean(c->rcvbuf_limited));
        SET("unread_bytes", real(c->unread, 1));
        SET("unread_backlog", real(c->unread_backlog, 0.001));
        SET("limited_by", json_string(clients_limit_name(c->limited_by)));
#undef SET
        bad |= json_array_append_new(a, x) < 0;
    }
    bad |= json_object_set_new(sum, "connections", json_integer(s->connections)) < 0;
    bad |= json_object_set_new(sum, "limited_by_buffers", json_integer(s->limited_by_buffers)) < 0;
    bad |= json_object_set_new(sum, "listening", json_boolean(listening > 0)) < 0;
    bad |= json_object_set_new(o, "connections", a) < 0;
    bad |= json_object_set_new(o, "summary", sum) < 0;
    if (bad) {
        json_decref(o);
        o = NULL;
    }
    if (jsonw_print(stdout, o) < 0) {
        fprintf(stderr, "smbtuned: out of memory\n");
        return -ENOMEM;
    }
    return 0;
}

int cmd_clients(const struct opts *o)
{
    struct config cfg;
    struct tuner_opts t;
    struct err e = {{0}};
    struct clients *c;
    struct clients_conn *v = NULL;
    struct clients_summary sum;
    long long seconds = DEFAULT_SECONDS;
    int ports[SMBD_MAX_PORTS], nports, nsnap = 0, listening = 0, r;
    char pbuf[128];
    size_t n = 0;

    if (o->seconds != NULL && parse_long(o->seconds, 1, MAX_SECONDS, &seconds) < 0) {
        fprintf(stderr, "smbtuned: --seconds takes a whole number from 1 to %d, not '%s'\n",
                MAX_SECONDS, o->seconds);
        return CMD_EXIT_USAGE;
    }
    /* sock_diag would answer anyone, but smbd's clients are root's
     * business (their addresses), and the daemon that acts on them runs
     * as root: say so before reading anything. */
    if (geteuid() != 0) {
        fprintf(stderr, "smbtuned: --clients needs root: it reads the TCP state of smbd's "
                        "connections through sock_diag\n");
        return CMD_EXIT_FAILURE;
    }
    if (cmd_load_config(o, &cfg, &e) < 0 || config_fill(&cfg, &t, &e) < 0 ||
        smbd_ports(t.smb_conf, ports, &nports, &e) < 0) {
        fprintf(stderr, "smbtuned: %s\n", e.msg);
        return CMD_EXIT_CONFIG;
    }
    c = clients_new();
    if (c == NULL) {
        fprintf(stderr, "smbtuned: out of memory\n");
        return CMD_EXIT_FAILURE;
    }
    r = observe(c, ports, nports, (long)seconds, &nsnap, &e);
    if (r == 0 && (r = clients_result(c, &v, &n)) < 0)
        err_set(&e, r, "out of memory");
    /* After the samples: "no connection" and "no smbd" read alike in them. */
    if (r == 0)
        r = conns_listening(ports, nports, &listening, &e);
    clients_free(c);
    if (r < 0) {
        fprintf(stderr, "smbtuned: --clients: %s\n", e.msg);
        return CMD_EXIT_FAILURE;
    }
    clients_summarize(v, n, &sum);
    if (o->json)
        r = print_json(v, n, &sum, listening);
    else
        print_text(v, n, &sum, ports_str(ports, nports, pbuf, sizeof(pbuf)), (double)seconds, nsnap,
                   listening);
    free(v);
    fflush(stdout);
    return r < 0 ? CMD_EXIT_FAILURE : CMD_EXIT_OK;
}
