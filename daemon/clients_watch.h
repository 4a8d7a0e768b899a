/* clients_watch: what smbd's real connections get, once a cycle (issue
 * 13): the figures the tuner logs, shows in --status and weighs against
 * loopback trials (outcome.c). The summary is plain bytes, so that the
 * simulated world of tests/unit/test_tuner.c can hand one over as the
 * real world does. No client address is in it.
 *
 * The watch itself runs on the tuner's sd-event loop: a timer every 50 ms
 * takes one sock_diag snapshot (lib/conns: one netlink dump, quick and
 * non-blocking enough for the loop) and hands it to lib/clients; at the
 * end of the window, the summary. The real world (world.c) runs it; the
 * tuner reaches it only through world.h. */
#ifndef SMBTUNED_CLIENTS_WATCH_H
#define SMBTUNED_CLIENTS_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "clients.h"
#include "sockopts.h"

/* Connections kept in a summary, to tell later which are new. */
#define CLIENTS_WATCH_MAX 256

struct clients_watch_summary {
    bool valid;               /* the connections were read this cycle */
    struct clients_summary s; /* count, per cause, round trips */
    /* The largest bandwidth-delay product among the buffer-limited ones
     * (bytes; 0: none is): overall, and [SOCKOPTS_RCVBUF] of the ones the
     * receive buffer holds back, [SOCKOPTS_SNDBUF] of the send buffer's.
     * See clients_watch_summarize for how it is estimated. */
    double bdp_max;
    double bdp[2];
    long buf_max[2]; /* the largest socket buffer (sk_rcvbuf, sk_sndbuf) among those */
    int snapshots;   /* of the watch that made it: taken in its window */
    /* each connection (the first CLIENTS_WATCH_MAX): its kernel cookie,
     * no address */
    int nconns;
    struct clients_watch_conn {
        uint64_t cookie;
        enum clients_limit limited_by;
        double mbps; /* sent + received */
    } conns[CLIENTS_WATCH_MAX];
};

/* After a commit: the connections opened since (not in the summary of
 * the commit's cycle) against those of that summary. */
enum clients_watch_verdict {
    CLIENTS_WATCH_TOO_FEW, /* too few busy connections on either side */
    CLIENTS_WATCH_BETTER,
    CLIENTS_WATCH_WORSE,
    CLIENTS_WATCH_SAME,
};

struct clients_watch_compare {
    int before_busy, before_held; /* busy ones, of them held back by the server's buffers */
    double before_mbps;           /* mean rate of the busy ones */
    int new_busy, new_held;
    double new_mbps;
    enum clients_watch_verdict verdict;
};

/* Pure: now's new connections against before's. */
void clients_watch_compare(const struct clients_watch_summary *before,
                           const struct clients_watch_summary *now,
                           struct clients_watch_compare *cmp);

/* "too_few", "better", "worse", "same" */
const char *clients_watch_verdict_name(enum clients_watch_verdict v);

/* Pure: the summary of the connections v (lib/clients' result). */
void clients_watch_summarize(const struct clients_conn *v, size_t n,
                             struct clients_watch_summary *sum);

/* The summary's journal entry (JOURNAL_ID_CLIENTS), with its fields
 * SMBTUNED_CLIENTS, SMBTUNED_CLIENTS_SNDBUF_LIMITED, _RCVBUF_LIMITED,
 * _CLIENT_WINDOW, _SMBD, _NETWORK, _IDLE, SMBTUNED_RTT_MEDIAN_MS, _MAX_MS and
 * SMBTUNED_BDP_MAX; no client address. With cmp (after a commit; NULL
 * before any): SMBTUNED_CLIENTS_SINCE_COMMIT (the verdict),
 * SMBTUNED_CLIENTS_NEW and SMBTUNED_CLIENTS_NEW_HELD, and the words. */
void clients_watch_tell(const struct clients_watch_summary *sum,
                        const struct clients_watch_compare *cmp, const char *smb_conf);

/* Pure: whether real connections held back by the server's own buffers
 * ask for more than in_force gives: an explicit size below cap[b] (the
 * largest explicit size the search may try) for a buffer that holds some
 * back, or autotuning that held them back at its ceiling tcp_max[b]
 * (net.ipv4.tcp_rmem / tcp_wmem's maximum; NULL: unknown) below cap[b].
 * why says which, in words. */
bool clients_watch_asks_more(const struct clients_watch_summary *sum, long in_rcvbuf,
                             long in_sndbuf, const long cap[2], const long *tcp_max, char *why,
                             size_t len);

struct state;

/* Keep the summary in st (format version 3), taken at now (unix s). */
void clients_watch_keep(const struct clients_watch_summary *sum, long now, struct state *st);

/* The watch: r 0 with the summary, or -errno and why (sock_diag not
 * there, not root, out of memory). */
typedef void (*clients_watch_fn)(void *ud, int r, const struct clients_watch_summary *sum,
                                 const char *why);

struct clients_watch;

/* -ENOMEM */
int clients_watch_new(sd_event *ev, struct clients_watch **cwp);

/* Watch the established connections on ports (smb.conf's `smb ports`)
 * for seconds, a snapshot every 50 ms (none at the first snapshot ends
 * the watch there); done from the loop, never from inside the call. A
 * watch under way is stopped first. -errno when the timer cannot be
 * armed. */
int clients_watch_start(struct clients_watch *cw, const int *ports, int nports, double seconds,
                        clients_watch_fn done, void *ud);

/* Stop a watch under way, without its done. */
void clients_watch_stop(struct clients_watch *cw);

/* NULL is allowed. */
void clients_watch_free(struct clients_watch *cw);

#endif
