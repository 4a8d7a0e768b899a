/* clients_watch: see clients_watch.h. */
#include "clients_watch.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conns.h"
#include "err.h"
#include "journal.h"
#include "report.h"
#include "smbd.h"
#include "state.h"

/* sock_diag every 50 ms: often enough to see the send queue's state in
 * most round trips of a wide-area client (as --clients does), cheap
 * enough (one dump) on a server with many. */
#define SAMPLE_US 50000ULL

struct clients_watch {
    sd_event *ev;
    sd_event_source *timer;
    struct clients *c;
    int ports[SMBD_MAX_PORTS], nports;
    uint64_t t0, end; /* CLOCK_MONOTONIC microseconds */
    unsigned k;       /* snapshots so far */
    bool capped;      /* a snapshot held CLIENTS_TRACK_MAX: said once */
    clients_watch_fn done;
    void *ud;
};

/* The bandwidth-delay product of a connection that a buffer holds back is
 * estimated as its round trip times the rate it moved in the direction
 * that buffer limits (sent for the send buffer, received for the receive
 * buffer): the bytes it had in flight per round trip. Not the path's
 * bandwidth times the round trip: the path's bandwidth cannot be seen
 * on a connection the buffer holds back (it moves what the buffer allows,
 * not what the path could carry), and the best delivery rate of the
 * window is the same capped figure. So this is a lower bound of what the
 * path needs: outcome.c asks for more than it (twice, one lattice step),
 * and a connection still held back the next cycle raises it again. The
 * round trip is the smoothed one, which includes queueing: a little more,
 * never less, than the path's. */
static double bdp_of(const struct clients_conn *c)
{
    double mbps = c->limited_by == CLIENTS_SNDBUF ? c->sent_mbps : c->received_mbps;

    return c->rtt_ms / 1e3 * mbps * 1e6;
}

void clients_watch_summarize(const struct clients_conn *v, size_t n,
                             struct clients_watch_summary *sum)
{
    memset(sum, 0, sizeof(*sum));
    sum->valid = true;
    clients_summarize(v, n, &sum->s);
    for (size_t i = 0; i < n; i++) {
        enum sockopts_buf b;
        double bdp;

        if (sum->nconns < CLIENTS_WATCH_MAX)
            sum->conns[sum->nconns++] = (struct clients_watch_conn){
                v[i].cookie, v[i].limited_by, v[i].sent_mbps + v[i].received_mbps};

        if (v[i].limited_by == CLIENTS_SNDBUF)
            b = SOCKOPTS_SNDBUF;
        else if (v[i].limited_by == CLIENTS_RCVBUF)
            b = SOCKOPTS_RCVBUF;
        else
            continue;
        bdp = bdp_of(&v[i]);
        if (bdp > sum->bdp[b])
            sum->bdp[b] = bdp;
        if (bdp > sum->bdp_max)
            sum->bdp_max = bdp;
        {
            long buf = b == SOCKOPTS_SNDBUF ? v[i].sndbuf : v[i].rcvbuf;

            if (buf > sum->buf_max[b])
                sum->buf_max[b] = buf;
        }
    }
}

/* Busy connections on each side before a verdict: with fewer, one client
 * more or less held back swings the share by a third or more. */
#define COMPARE_MIN_BUSY 3
/* A change in the share held back by the server's buffers worth a word:
 * one connection in four. */
#define COMPARE_SHARE 0.25
/* Otherwise, a change of the mean rate worth a word (clients differ:
 * only a large one says anything). */
#define COMPARE_RATE 1.25

static bool busy(enum clients_limit l)
{
    return l != CLIENTS_IDLE;
}

static bool held(enum clients_limit l)
{
    return l == CLIENTS_SNDBUF || l == CLIENTS_RCVBUF;
}

static bool seen_in(const struct clients_watch_summary *s, uint64_t cookie)
{
    for (int i = 0; i < s->nconns; i++)
        if (s->conns[i].cookie == cookie)
            return true;
    return false;
}

void clients_watch_compare(const struct clients_watch_summary *before,
                           const struct clients_watch_summary *now,
                           struct clients_watch_compare *cmp)
{
    double bshare, nshare;

    memset(cmp, 0, sizeof(*cmp));
    for (int i = 0; i < before->nconns; i++) {
        const struct clients_watch_conn *c = &before->conns[i];

        if (!busy(c->limited_by))
            continue;
        cmp->before_busy++;
        cmp->before_held += held(c->limited_by);
        cmp->before_mbps += c->mbps;
    }
    for (int i = 0; i < now->nconns; i++) {
        const struct clients_watch_conn *c = &now->conns[i];

        /* opened since: the kernel names a socket once, for good */
        if (!busy(c->limited_by) || seen_in(before, c->cookie))
            continue;
        cmp->new_busy++;
        cmp->new_held += held(c->limited_by);
        cmp->new_mbps += c->mbps;
    }
    if (cmp->before_busy)
        cmp->before_mbps /= cmp->before_busy;
    if (cmp->new_busy)
        cmp->new_mbps /= cmp->new_busy;
    if (cmp->before_busy < COMPARE_MIN_BUSY || cmp->new_busy < COMPARE_MIN_BUSY) {
        cmp->verdict = CLIENTS_WATCH_TOO_FEW;
        return;
    }
    /* The share held back by the server's buffers is what a buffer size
     * changes; the rates depend on the clients too, so they only speak
     * when the share did not move. */
    bshare = (double)cmp->before_held / cmp->before_busy;
    nshare = (double)cmp->new_held / cmp->new_busy;
    if (nshare <= bshare - COMPARE_SHARE)
        cmp->verdict = CLIENTS_WATCH_BETTER;
    else if (nshare >= bshare + COMPARE_SHARE)
        cmp->verdict = CLIENTS_WATCH_WORSE;
    else if (cmp->new_mbps >= cmp->before_mbps * COMPARE_RATE)
        cmp->verdict = CLIENTS_WATCH_BETTER;
    else if (cmp->new_mbps * COMPARE_RATE <= cmp->before_mbps)
        cmp->verdict = CLIENTS_WATCH_WORSE;
    else
        cmp->verdict = CLIENTS_WATCH_SAME;
}

const char *clients_watch_verdict_name(enum clients_watch_verdict v)
{
    static const char *const names[] = {"too_few", "better", "worse", "same"};

    return (unsigned)v < sizeof(names) / sizeof(names[0]) ? names[v] : "?";
}

/* The words of a comparison, "" without one. */
static void compare_words(const struct clients_watch_compare *cmp, char *buf, size_t len)
{
    static const char *const says[] = {
        [CLIENTS_WATCH_TOO_FEW] = "too few to tell yet",
        [CLIENTS_WATCH_BETTER] = "real clients got better",
        [CLIENTS_WATCH_WORSE] = "real clients got worse",
        [CLIENTS_WATCH_SAME] = "no change for real clients",
    };

    buf[0] = '\0';
    if (cmp == NULL)
        return;
    snprintf(buf, len,
             "; since the last commit %d busy connection%s opened, %d held back by the server's "
             "buffers, %.1f MB/s on average (before it: %d of %d, %.1f MB/s): %s",
             cmp->new_busy, cmp->new_busy == 1 ? "" : "s", cmp->new_held, cmp->new_mbps,
             cmp->before_held, cmp->before_busy, cmp->before_mbps, says[cmp->verdict]);
}

void clients_watch_tell(const struct clients_watch_summary *sum,
                        const struct clients_watch_compare *cmp, const char *smb_conf)
{
    const struct clients_summary *c = &sum->s;
    char f[13][64], words[256];
    const char *more[] = {f[0], f[1], f[2], f[3],  f[4],  f[5],  f[6],
                          f[7], f[8], f[9], f[10], f[11], f[12], NULL};

    snprintf(f[0], sizeof(f[0]), "SMBTUNED_CLIENTS=%d", c->connections);
    snprintf(f[1], sizeof(f[1]), "SMBTUNED_CLIENTS_SNDBUF_LIMITED=%d", c->by[CLIENTS_SNDBUF]);
    snprintf(f[2], sizeof(f[2]), "SMBTUNED_CLIENTS_RCVBUF_LIMITED=%d", c->by[CLIENTS_RCVBUF]);
    snprintf(f[3], sizeof(f[3]), "SMBTUNED_CLIENTS_CLIENT_WINDOW=%d", c->by[CLIENTS_CLIENT_WINDOW]);
    snprintf(f[4], sizeof(f[4]), "SMBTUNED_CLIENTS_NETWORK=%d", c->by[CLIENTS_NETWORK]);
    snprintf(f[5], sizeof(f[5]), "SMBTUNED_CLIENTS_IDLE=%d", c->by[CLIENTS_IDLE]);
    snprintf(f[6], sizeof(f[6]), "SMBTUNED_RTT_MEDIAN_MS=%.1f", c->rtt_median_ms);
    snprintf(f[7], sizeof(f[7]), "SMBTUNED_RTT_MAX_MS=%.1f", c->rtt_max_ms);
    snprintf(f[8], sizeof(f[8]), "SMBTUNED_BDP_MAX=%.0f", sum->bdp_max);
    /* held back by smbd's own reading (disk, CPU), not by a buffer: no
     * buffer size helps them, and none is asked for them */
    snprintf(f[9], sizeof(f[9]), "SMBTUNED_CLIENTS_SMBD=%d", c->by[CLIENTS_SMBD]);
    if (cmp != NULL) {
        snprintf(f[10], sizeof(f[10]), "SMBTUNED_CLIENTS_SINCE_COMMIT=%s",
                 clients_watch_verdict_name(cmp->verdict));
        snprintf(f[11], sizeof(f[11]), "SMBTUNED_CLIENTS_NEW=%d", cmp->new_busy);
        snprintf(f[12], sizeof(f[12]), "SMBTUNED_CLIENTS_NEW_HELD=%d", cmp->new_held);
    } else {
        more[10] = NULL;
    }
    compare_words(cmp, words, sizeof(words));
    if (c->connections == 0) {
        report_event(JOURNAL_ID_CLIENTS, LOG_INFO,
                     &(struct event_fields){.smb_conf = smb_conf, .more = more},
                     "real clients: no connection to smbd%s", words);
        return;
    }
    report_event(JOURNAL_ID_CLIENTS, LOG_INFO,
                 &(struct event_fields){.smb_conf = smb_conf, .more = more},
                 "real clients: %d connection%s, held back by the server's send buffer %d, by "
                 "its receive buffer %d, by smbd itself (reading slowly) %d, by the client's "
                 "window %d, by the network %d, idle %d; round trip median %.1f ms, max %.1f ms; "
                 "largest bandwidth-delay product of a buffer-limited one %.0f bytes%s",
                 c->connections, c->connections == 1 ? "" : "s", c->by[CLIENTS_SNDBUF],
                 c->by[CLIENTS_RCVBUF], c->by[CLIENTS_SMBD], c->by[CLIENTS_CLIENT_WINDOW],
                 c->by[CLIENTS_NETWORK], c->by[CLIENTS_IDLE], c->rtt_median_ms, c->rtt_max_ms,
                 sum->bdp_max, words);
}

bool clients_watch_asks_more(const struct clients_watch_summary *sum, long in_rcvbuf,
                             long in_sndbuf, const long cap[2], const long *tcp_max, char *why,
                             size_t len)
{
    static const char *const opt[2] = {"SO_RCVBUF", "SO_SNDBUF"};
    static const char *const words[2] = {"receive buffer", "send buffer"};
    static const char *const sysctl[2] = {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"};
    const long in[2] = {in_rcvbuf, in_sndbuf};

    why[0] = '\0';
    if (!sum->valid)
        return false;
    for (int b = SOCKOPTS_RCVBUF; b <= SOCKOPTS_SNDBUF; b++) {
        int held = sum->s.by[b == SOCKOPTS_RCVBUF ? CLIENTS_RCVBUF : CLIENTS_SNDBUF];

        if (held == 0)
            continue;
        /* AUTO is 0 (search.h) */
        if (in[b] != 0 && in[b] < cap[b]) {
            snprintf(why, len,
                     "%d real connection%s held back by the server's %s (%s=%ld, below the "
                     "largest allowed %ld; bandwidth-delay product up to %.0f bytes)",
                     held, held == 1 ? "" : "s", words[b], opt[b], in[b], cap[b], sum->bdp[b]);
            return true;
        }
        /* Under autotuning they are held back only at its ceiling, and an
         * explicit size can do better only above it (the kernel doubles a
         * size asked for: the socket's buffer is twice the request, as
         * autotuning's ceiling is counted). */
        if (in[b] == 0 && tcp_max != NULL && sum->buf_max[b] >= tcp_max[b] &&
            2 * cap[b] > tcp_max[b]) {
            snprintf(why, len,
                     "%d real connection%s held back by the server's %s under autotuning, at "
                     "%s's maximum (%ld), below the largest explicit size allowed (%ld)",
                     held, held == 1 ? "" : "s", words[b], sysctl[b], tcp_max[b], cap[b]);
            return true;
        }
    }
    return false;
}

void clients_watch_keep(const struct clients_watch_summary *sum, long now, struct state *st)
{
    const struct clients_summary *c = &sum->s;

    st->clients_at = now;
    st->clients = c->connections;
    st->clients_sndbuf_limited = c->by[CLIENTS_SNDBUF];
    st->clients_rcvbuf_limited = c->by[CLIENTS_RCVBUF];
    st->clients_client_window = c->by[CLIENTS_CLIENT_WINDOW];
    st->clients_network = c->by[CLIENTS_NETWORK];
    st->clients_idle = c->by[CLIENTS_IDLE];
    st->clients_smbd = c->by[CLIENTS_SMBD];
    /* the state file takes finite digits only (nan would damage it) */
    st->rtt_median_ms = isfinite(c->rtt_median_ms) ? c->rtt_median_ms : 0;
    st->rtt_max_ms = isfinite(c->rtt_max_ms) ? c->rtt_max_ms : 0;
    st->bdp_max = isfinite(sum->bdp_max) ? (long)sum->bdp_max : 0;
}

int clients_watch_new(sd_event *ev, struct clients_watch **cwp)
{
    struct clients_watch *cw = calloc(1, sizeof(*cw));

    if (cw == NULL)
        return -ENOMEM;
    cw->ev = sd_event_ref(ev);
    *cwp = cw;
    return 0;
}

void clients_watch_stop(struct clients_watch *cw)
{
    if (cw == NULL)
        return;
    cw->timer = sd_event_source_disable_unref(cw->timer);
    clients_free(cw->c);
    cw->c = NULL;
}

void clients_watch_free(struct clients_watch *cw)
{
    if (cw == NULL)
        return;
    clients_watch_stop(cw);
    sd_event_unref(cw->ev);
    free(cw);
}

/* The end of the watch, well (r 0) or not: the summary, or why. */
static void finish(struct clients_watch *cw, int r, const char *why)
{
    struct clients_watch_summary sum = {0};
    struct clients_conn *v = NULL;
    clients_watch_fn done = cw->done;
    size_t n = 0;

    if (r == 0) {
        r = clients_result(cw->c, &v, &n);
        if (r < 0)
            why = "out of memory";
        else
            clients_watch_summarize(v, n, &sum);
        sum.snapshots = (int)cw->k;
        free(v);
    }
    clients_watch_stop(cw);
    done(cw->ud, r, r == 0 ? &sum : NULL, r == 0 ? "" : why);
}

/* The first slot of the watch's grid after the clock's now (or, without
 * a clock, after the tick's time). */
static uint64_t next_slot(const struct clients_watch *cw, uint64_t tick)
{
    struct timespec ts;
    uint64_t now = tick;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
        now = (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
    if (now < cw->t0)
        return cw->t0 + SAMPLE_US;
    return cw->t0 + ((now - cw->t0) / SAMPLE_US + 1) * SAMPLE_US;
}

static int on_tick(sd_event_source *src, uint64_t usec, void *ud)
{
    struct clients_watch *cw = ud;
    struct clients_sock *v = NULL;
    uint64_t now;
    size_t n = 0;
    struct err e;
    int r;

    if (sd_event_now(cw->ev, CLOCK_MONOTONIC, &now) < 0)
        now = usec;
    r = conns_read(cw->ports, cw->nports, &v, &n, &e);
    if (r == 0 && n >= CLIENTS_TRACK_MAX && !cw->capped) {
        cw->capped = true;
        journal_log(LOG_NOTICE, "smbd has %zu connections or more: the first %d are watched", n,
                    CLIENTS_TRACK_MAX);
    }
    if (r == 0) {
        r = clients_add(cw->c, (double)(now - cw->t0) / 1e6, v, n);
        if (r < 0)
            err_set(&e, r, "out of memory");
    }
    free(v);
    cw->k++;
    /* No connection at the first snapshot: that is the answer, and the
     * cycle does not wait out the window for one that may come (every
     * cycle on a server without clients, and every test, would pay it). */
    if (r < 0 || now >= cw->end || (cw->k == 1 && n == 0)) {
        finish(cw, r, e.msg);
        return 0;
    }
    /* The next slot of the grid from t0 after this moment: a late tick
     * does not shift the ones after it, and the slots a slow dump (or a
     * stalled loop) missed are skipped, not taken back to back. */
    r = sd_event_source_set_time(src, next_slot(cw, now));
    if (r >= 0)
        r = sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
    if (r < 0)
        finish(cw, r, "cannot arm the next snapshot's timer");
    return 0;
}

int clients_watch_start(struct clients_watch *cw, const int *ports, int nports, double seconds,
                        clients_watch_fn done, void *ud)
{
    int r;

    clients_watch_stop(cw);
    if (nports <= 0 || nports > SMBD_MAX_PORTS || seconds < 0)
        return -EINVAL;
    cw->c = clients_new();
    if (cw->c == NULL)
        return -ENOMEM;
    memcpy(cw->ports, ports, sizeof(int) * (size_t)nports);
    cw->nports = nports;
    cw->done = done;
    cw->ud = ud;
    cw->k = 0;
    cw->capped = false;
    r = sd_event_now(cw->ev, CLOCK_MONOTONIC, &cw->t0);
    if (r >= 0) {
        cw->end = cw->t0 + (uint64_t)(seconds * 1e6);
        /* the first snapshot at once, from the loop; 1 ms of slack */
        r = sd_event_add_time(cw->ev, &cw->timer, CLOCK_MONOTONIC, cw->t0, 1000, on_tick, cw);
    }
    if (r < 0)
        clients_watch_stop(cw);
    return r;
}
