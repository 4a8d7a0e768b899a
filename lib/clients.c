/* clients: see clients.h. */
#include "clients.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A sample's send buffer is "full" when the queued bytes are above 2/3 of
 * it: that is where the kernel stops waking a blocked writer
 * (sk_stream_write_space wakes it once the free space is half the queued
 * bytes, i.e. at queued <= 2/3 of sk_sndbuf), so above it smbd is waiting
 * for room. */
#define FULL_NUM 2
#define FULL_DEN 3
/* ... and it is the send buffer that holds the data back, not the
 * congestion window, when little of the queue is still unsent: at most a
 * quarter of it. A connection limited by the path keeps a full buffer too,
 * but most of it waits for the congestion window. */
#define UNSENT_DEN 4
/* Fewer samples in flight than this (150 ms at 50 ms) cannot make a
 * connection sndbuf-limited: one large reply into an otherwise idle
 * connection fills the buffer for a sample or two. */
#define MIN_IN_FLIGHT 3
/* Received at least this share of window / rtt: the window caps the
 * client's writes (issue 13; measured 1.0-1.04 for a put into
 * SO_RCVBUF=65536, FACTS.md). */
#define RCVBUF_SHARE 0.8
/* ... and at most this share: a window cannot carry more than itself per
 * round trip, so a rate well above window / rtt says the rtt is not the
 * one the client's data sees (tcpi_rtt times smbd's own replies, whose
 * ACKs can wait: 19.1 ms on loopback for a put smbd read slowly, at 25
 * times window / rtt) and the arithmetic says nothing about the window.
 * 1.25 leaves room above the 1.0-1.04 measured for a real limit (the
 * window is a mean, the rtt a smoothed one). */
#define RCVBUF_OVER 1.25
/* A sample's receive queue is backlogged when smbd has left more than
 * half the window unread. smbd reading as fast as data comes leaves what
 * arrived since its last read, a segment or a burst caught in passing,
 * and usually nothing; smbd reading behind (a slow disk, a busy CPU)
 * lets the queue grow until it closes the window, and the queue is then
 * as large as the window it took away. Half the window lies between the
 * two, each sample against its own window (the one the kernel last
 * advertised; 0 once the queue closed it). */
#define BACKLOG_DEN 2
/* smbd keeps up unless this share of the samples is backlogged. Not a
 * majority: a stalled smbd leaves the queue full for only part of a stall,
 * since the client, waiting for smbd's replies to its writes, soon has
 * nothing more to send (tests/integration/test_clients.py: 46-76% of the
 * samples with smbd stopped 80% of the time), while smbd keeping up shows
 * a backlog in almost none (0 of 41 for a put into SO_RCVBUF=65536 over
 * 40 ms, 106 bytes unread on average). A quarter keeps a margin of about
 * two both ways. */
#define BACKLOG_SHARE 0.25
/* A majority: of the samples in flight (sndbuf), of the busy time
 * (client_window), of the intervals (network against idle). */
#define MAJORITY 0.5

struct track {
    struct clients_sock first, last;
    double t_first, t_last;
    unsigned long epoch; /* the snapshot it was last seen in */
    size_t order;        /* its position in that snapshot */
    int samples, in_flight, full, intervals, active, backlog;
    double sum_rtt_us, sum_wnd, sum_unread;
    int n_rtt, n_wnd;
    bool wnd_estimated;
};

struct clients {
    struct track *v;
    size_t n, cap;
    size_t nsorted; /* v[0..nsorted) is sorted by cookie */
    unsigned long epoch;
    double t;
};

struct clients *clients_new(void)
{
    return calloc(1, sizeof(struct clients));
}

void clients_free(struct clients *c)
{
    if (c == NULL)
        return;
    free(c->v);
    free(c);
}

/* By cookie, and one socket seen twice in a snapshot by its first place. */
static int by_cookie(const void *a, const void *b)
{
    const struct track *p = a, *q = b;
    uint64_t x = p->first.cookie, y = q->first.cookie;

    if (x != y)
        return x < y ? -1 : 1;
    return p->order < q->order ? -1 : p->order > q->order;
}

/* The track of cookie among those of earlier snapshots, or NULL. */
static struct track *find(struct clients *c, uint64_t cookie)
{
    size_t lo = 0, hi = c->nsorted;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (c->v[mid].first.cookie == cookie)
            return &c->v[mid];
        if (c->v[mid].first.cookie < cookie)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Sort the tracks, the ones this snapshot added among them, and drop a
 * socket the snapshot held twice but once (its first place kept). The new
 * ones are not looked up while the snapshot is read: a linear look among
 * them made a first snapshot of many connections quadratic. */
static void settle(struct clients *c)
{
    size_t m = 0;

    /* qsort's array may not be NULL, even for no element (C11 7.22.5) */
    if (c->n > 0)
        qsort(c->v, c->n, sizeof(*c->v), by_cookie);
    for (size_t i = 0; i < c->n; i++)
        if (m == 0 || c->v[i].first.cookie != c->v[m - 1].first.cookie)
            c->v[m++] = c->v[i];
    c->n = m;
    c->nsorted = c->n;
}

static bool full(const struct clients_sock *s)
{
    return (s->have & CLIENTS_HAVE_MEM) && s->sndbuf > 0 &&
           (uint64_t)s->wmem_queued * FULL_DEN > (uint64_t)s->sndbuf * FULL_NUM &&
           (uint64_t)s->notsent_bytes * UNSENT_DEN <= s->wmem_queued;
}

/* smbd has left more than half the window unread (see BACKLOG_DEN); with
 * the window closed, anything unread. */
static bool backlogged(const struct clients_sock *s)
{
    return s->unread > 0 && (uint64_t)s->unread * BACKLOG_DEN > s->rcv_wnd;
}

/* Bytes moved between two samples, or data in flight now. */
static bool active(const struct clients_sock *p, const struct clients_sock *s)
{
    bool moved = (s->have & p->have & CLIENTS_HAVE_BYTES) &&
                 (s->bytes_acked > p->bytes_acked || s->bytes_received > p->bytes_received);

    return moved || s->unacked > 0;
}

static void observe(struct track *k, const struct clients_sock *s)
{
    k->samples++;
    if (s->unacked > 0) {
        k->in_flight++;
        k->full += full(s);
    }
    k->backlog += backlogged(s);
    k->sum_unread += s->unread;
    if (s->rtt_us > 0) {
        k->sum_rtt_us += s->rtt_us;
        k->n_rtt++;
    }
    if (s->rcv_wnd > 0) {
        k->sum_wnd += s->rcv_wnd;
        k->n_wnd++;
    }
    k->wnd_estimated |= !(s->have & CLIENTS_HAVE_RCV_WND);
}

/* Forget the connections the last snapshot no longer held: they closed,
 * and clients_result leaves them out anyway. The order, and so the sort,
 * is kept. */
static void forget_gone(struct clients *c)
{
    size_t m = 0;

    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].epoch == c->epoch)
            c->v[m++] = c->v[i];
    c->n = c->nsorted = m;
}

int clients_add(struct clients *c, double t, const struct clients_sock *v, size_t n)
{
    if (c->epoch > 0 && t < c->t)
        return -EINVAL;
    /* At the bound, room first: a flood of connections opened and closed
     * early in the window must not keep out the ones that come later. */
    if (c->n + n > CLIENTS_TRACK_MAX)
        forget_gone(c);
    c->epoch++;
    c->t = t;
    for (size_t i = 0; i < n; i++) {
        struct track *k = find(c, v[i].cookie);

        if (k == NULL) {
            /* beyond the bound, a new connection is not followed */
            if (c->n >= CLIENTS_TRACK_MAX)
                continue;
            if (c->n == c->cap) {
                size_t cap = c->cap ? c->cap * 2 : 16;
                struct track *nv = realloc(c->v, cap * sizeof(*nv));

                if (nv == NULL)
                    return -ENOMEM;
                c->v = nv;
                c->cap = cap;
            }
            k = &c->v[c->n++];
            *k = (struct track){.first = v[i], .last = v[i], .t_first = t};
        } else if (k->epoch == c->epoch) {
            continue; /* the same socket twice in one dump: keep the first */
        } else {
            k->intervals++;
            k->active += active(&k->last, &v[i]);
        }
        k->last = v[i];
        k->t_last = t;
        k->epoch = c->epoch;
        k->order = i;
        observe(k, &v[i]);
    }
    settle(c);
    return 0;
}

static double rate(uint64_t then, uint64_t now, double seconds)
{
    return seconds > 0 && now > then ? (double)(now - then) / seconds / 1e6 : 0;
}

static enum clients_limit limit_of(const struct track *k, const struct clients_conn *o)
{
    if (k->in_flight >= MIN_IN_FLIGHT && o->sndbuf_limited >= MAJORITY)
        return CLIENTS_SNDBUF;
    /* What came waits unread: smbd itself (its disk, its CPU) holds the
     * client back, whatever the rate says; a larger buffer would only
     * hold more of it unread. Before the receive buffer: a window that
     * smbd keeps closed looks like one too small. */
    if (o->unread_backlog >= BACKLOG_SHARE)
        return CLIENTS_SMBD;
    if (o->rcvbuf_limited)
        return CLIENTS_RCVBUF;
    if (o->rwnd_limited >= MAJORITY)
        return CLIENTS_CLIENT_WINDOW;
    if (k->intervals > 0 && k->active >= MAJORITY * k->intervals)
        return CLIENTS_NETWORK;
    return CLIENTS_IDLE;
}

static void conclude(const struct track *k, struct clients_conn *o)
{
    const struct clients_sock *a = &k->first, *b = &k->last;
    double secs = k->t_last - k->t_first;

    *o = (struct clients_conn){.seconds = secs, .samples = k->samples, .in_flight = k->in_flight};
    o->cookie = b->cookie;
    memcpy(o->local, b->local, sizeof(o->local));
    memcpy(o->peer, b->peer, sizeof(o->peer));
    o->rtt_ms = k->n_rtt ? k->sum_rtt_us / k->n_rtt / 1000.0 : 0;
    if (b->have & CLIENTS_HAVE_MEM) {
        o->rcvbuf = b->rcvbuf;
        o->sndbuf = b->sndbuf;
    }
    if (a->have & b->have & CLIENTS_HAVE_BYTES) {
        o->sent_mbps = rate(a->bytes_acked, b->bytes_acked, secs);
        o->received_mbps = rate(a->bytes_received, b->bytes_received, secs);
    }
    o->sndbuf_limited = k->in_flight ? (double)k->full / k->in_flight : 0;
    if ((a->have & b->have & CLIENTS_HAVE_BUSY) && b->busy_us > a->busy_us) {
        double busy = (double)(b->busy_us - a->busy_us);
        double rwnd = b->rwnd_limited_us > a->rwnd_limited_us
                          ? (double)(b->rwnd_limited_us - a->rwnd_limited_us)
                          : 0;

        o->rwnd_limited = rwnd < busy ? rwnd / busy : 1;
    }
    o->window = k->n_wnd ? k->sum_wnd / k->n_wnd : 0;
    o->window_estimated = k->wnd_estimated;
    o->unread = k->samples ? k->sum_unread / k->samples : 0;
    o->unread_backlog = k->samples ? (double)k->backlog / k->samples : 0;
    /* window / rtt is the most the client can send through our window;
     * received at (nearly) that rate, the window is what caps it. The
     * smoothed rtt of our own sends, not tcpi_rcv_rtt: on a put into
     * SO_RCVBUF=65536 over 40 ms (tests/integration/test_clients.py) the
     * rate was 0.91-0.95 of window / rtt (45-47 ms) but only 0.8 of
     * window / rcv_rtt (40 ms), too close to the line. Only while smbd
     * keeps up (BACKLOG_SHARE): a window it keeps closed is not one too
     * small; and not far above window / rtt (RCVBUF_OVER). */
    if (o->received_mbps > 0 && o->rtt_ms > 0 && o->window > 0 &&
        o->unread_backlog < BACKLOG_SHARE) {
        double ceiling = o->window / (o->rtt_ms / 1000);

        o->rcvbuf_limited = o->received_mbps * 1e6 >= RCVBUF_SHARE * ceiling &&
                            o->received_mbps * 1e6 <= RCVBUF_OVER * ceiling;
    }
    o->limited_by = limit_of(k, o);
}

static int by_order(const void *a, const void *b)
{
    size_t x = ((const struct track *)a)->order, y = ((const struct track *)b)->order;

    return x < y ? -1 : x > y;
}

int clients_result(const struct clients *c, struct clients_conn **v, size_t *n)
{
    struct track *last = NULL;
    size_t m = 0;

    *v = NULL;
    *n = 0;
    if (c->n > 0 && (last = malloc(c->n * sizeof(*last))) == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].epoch == c->epoch)
            last[m++] = c->v[i];
    if (m > 0) {
        qsort(last, m, sizeof(*last), by_order);
        *v = malloc(m * sizeof(**v));
        if (*v == NULL) {
            free(last);
            return -ENOMEM;
        }
        for (size_t i = 0; i < m; i++)
            conclude(&last[i], &(*v)[i]);
    }
    free(last);
    *n = m;
    return 0;
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

void clients_summarize(const struct clients_conn *v, size_t n, struct clients_summary *s)
{
    double *rtt = n ? malloc(n * sizeof(*rtt)) : NULL;

    *s = (struct clients_summary){.connections = (int)n};
    for (size_t i = 0; i < n; i++) {
        s->by[v[i].limited_by]++;
        if (rtt != NULL)
            rtt[i] = v[i].rtt_ms;
        if (v[i].rtt_ms > s->rtt_max_ms)
            s->rtt_max_ms = v[i].rtt_ms;
    }
    s->limited_by_buffers = s->by[CLIENTS_SNDBUF] + s->by[CLIENTS_RCVBUF];
    /* Out of memory only costs the median. */
    if (rtt != NULL) {
        qsort(rtt, n, sizeof(*rtt), by_double);
        s->rtt_median_ms = n % 2 ? rtt[n / 2] : (rtt[n / 2 - 1] + rtt[n / 2]) / 2;
    }
    free(rtt);
}

const char *clients_limit_name(enum clients_limit l)
{
    static const char *const names[CLIENTS_NLIMITS] = {
        [CLIENTS_IDLE] = "idle",       [CLIENTS_SNDBUF] = "sndbuf",
        [CLIENTS_RCVBUF] = "rcvbuf",   [CLIENTS_CLIENT_WINDOW] = "client_window",
        [CLIENTS_NETWORK] = "network", [CLIENTS_SMBD] = "smbd",
    };

    return (unsigned)l < CLIENTS_NLIMITS ? names[l] : "?";
}

const char *clients_limit_words(enum clients_limit l)
{
    static const char *const words[CLIENTS_NLIMITS] = {
        [CLIENTS_IDLE] = "idle: it moves little, nothing holds it back",
        [CLIENTS_SNDBUF] = "the server's send buffer (SO_SNDBUF): smbd waits for room while "
                           "what it queued is all in flight",
        [CLIENTS_RCVBUF] = "the server's receive buffer (SO_RCVBUF): the client writes as "
                           "fast as the window the server advertises lets it",
        [CLIENTS_CLIENT_WINDOW] = "the client's receive window: the client reads or "
                                  "advertises too little",
        [CLIENTS_NETWORK] = "the network (the path or congestion), the client, or smbd's disk "
                            "or CPU: not the buffers",
        [CLIENTS_SMBD] = "smbd itself (reading slowly: disk or CPU), not the buffers: what "
                         "the client sent waits unread in the server's receive queue",
    };

    return (unsigned)l < CLIENTS_NLIMITS ? words[l] : "?";
}
