/* clients: what holds back each of smbd's real connections, from
 * snapshots of their TCP state taken every ~50 ms over a window (issue
 * 13). Pure: lib/conns reads the snapshots through sock_diag, and a
 * caller (smbtuned --clients, later the daemon's event loop) hands them
 * here one at a time with the time they were taken.
 *
 *     struct clients *c = clients_new();
 *     for each snapshot: clients_add(c, t, socks, n);
 *     clients_result(c, &conns, &nconns);
 *     clients_summarize(conns, nconns, &summary);
 */
#ifndef SMBTUNE_CLIENTS_H
#define SMBTUNE_CLIENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "IP:PORT", "[IPv6]:PORT" */
#define CLIENTS_ADDR_LEN 64

/* Which tcp_info figures the kernel sent: older kernels send a shorter
 * struct tcp_info (lib/conns copies only what came). */
enum {
    CLIENTS_HAVE_BYTES = 1 << 0,   /* tcpi_bytes_acked, tcpi_bytes_received (4.1) */
    CLIENTS_HAVE_NOTSENT = 1 << 1, /* tcpi_notsent_bytes (4.6) */
    CLIENTS_HAVE_BUSY = 1 << 2,    /* tcpi_busy_time, tcpi_rwnd_limited (4.10) */
    CLIENTS_HAVE_RCV_WND = 1 << 3, /* tcpi_rcv_wnd (6.2) */
    CLIENTS_HAVE_MEM = 1 << 4,     /* INET_DIAG_SKMEMINFO */
};

/* One connection at one instant. */
struct clients_sock {
    uint64_t cookie; /* the kernel's name for the socket */
    char local[CLIENTS_ADDR_LEN], peer[CLIENTS_ADDR_LEN];
    unsigned have;            /* CLIENTS_HAVE_* */
    uint32_t rtt_us;          /* smoothed round trip (tcpi_rtt) */
    uint32_t unacked;         /* segments in flight (tcpi_unacked) */
    uint32_t snd_mss;         /* bytes a segment (tcpi_snd_mss) */
    uint32_t notsent_bytes;   /* queued, not yet sent (estimated without HAVE_NOTSENT) */
    uint64_t bytes_acked;     /* sent and acknowledged so far */
    uint64_t bytes_received;  /* received so far */
    uint64_t busy_us;         /* time busy sending (tcpi_busy_time) */
    uint64_t rwnd_limited_us; /* of it, limited by the peer's window */
    uint32_t rcv_wnd;         /* the window we advertise (or the fallback, see conns.c) */
    uint32_t rcvbuf, sndbuf;  /* the socket's buffers now (sk_rcvbuf, sk_sndbuf) */
    uint32_t wmem_queued;     /* bytes queued for sending, sent or not (sk_wmem_queued) */
    uint32_t unread;          /* received, not yet read by smbd (idiag_rqueue) */
};

enum clients_limit {
    CLIENTS_IDLE = 0,      /* moves little: nothing holds it back */
    CLIENTS_SNDBUF,        /* the server's send buffer */
    CLIENTS_RCVBUF,        /* the server's receive buffer (the window it advertises) */
    CLIENTS_CLIENT_WINDOW, /* the client's receive window */
    CLIENTS_NETWORK,       /* busy and limited by none of those: the path, congestion, the
                            * client, or smbd's disk or CPU where nothing shows it */
    CLIENTS_SMBD,          /* smbd reads slowly (disk or CPU): what came waits unread */
    CLIENTS_NLIMITS
};

/* One connection over the window. */
struct clients_conn {
    uint64_t cookie; /* the kernel's name for the socket (tells a new one) */
    char local[CLIENTS_ADDR_LEN], peer[CLIENTS_ADDR_LEN];
    double rtt_ms;         /* mean smoothed round trip over the samples */
    long rcvbuf, sndbuf;   /* at the last sample */
    double sent_mbps;      /* 10^6 bytes/s acknowledged by the client */
    double received_mbps;  /* 10^6 bytes/s received from it */
    double sndbuf_limited; /* share of samples in flight with the send buffer full */
    double rwnd_limited;   /* share of busy time limited by the client's window */
    bool rcvbuf_limited;   /* received at 80-125% of our window / rtt, smbd keeping up */
    double window;         /* mean window we advertised (bytes) */
    double unread;         /* mean bytes received but not yet read by smbd */
    double unread_backlog; /* share of samples with more than half the window unread */
    bool window_estimated; /* no tcpi_rcv_wnd: the fallback of conns.c */
    enum clients_limit limited_by;
    double seconds;         /* the span it was observed over */
    int samples, in_flight; /* snapshots it was in; of those, with data in flight */
};

struct clients_summary {
    int connections;
    int limited_by_buffers;           /* sndbuf + rcvbuf */
    int by[CLIENTS_NLIMITS];          /* connections per cause */
    double rtt_median_ms, rtt_max_ms; /* 0 when there are no connections */
};

struct clients;

/* NULL when out of memory. */
struct clients *clients_new(void);
void clients_free(struct clients *c);

/* The most connections followed over a window: at it, those the last
 * snapshot did not hold (closed) are forgotten first; beyond it (a server of more, or a flood of
 * connections to smbd's port) a new connection is not followed, and
 * lib/conns reads no more a snapshot; memory and each snapshot's work
 * stay bounded. */
#define CLIENTS_TRACK_MAX 16384

/* One snapshot, taken at t seconds (any monotonic clock; t increases).
 * -ENOMEM, -EINVAL when t goes back. */
int clients_add(struct clients *c, double t, const struct clients_sock *v, size_t n);

/* The connections of the last snapshot (a connection that closed during
 * the window is left out: it is no longer smbd's; at most
 * CLIENTS_TRACK_MAX), malloc'ed, in the order of that snapshot. */
int clients_result(const struct clients *c, struct clients_conn **v, size_t *n);

void clients_summarize(const struct clients_conn *v, size_t n, struct clients_summary *s);

/* "sndbuf", "rcvbuf", "client_window", "network", "idle", "smbd" */
const char *clients_limit_name(enum clients_limit l);

/* What that means, in words, for the text output. */
const char *clients_limit_words(enum clients_limit l);

#endif
