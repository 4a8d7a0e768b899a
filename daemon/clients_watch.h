/* clients_watch: what smbd's real connections get, once a cycle (issue
 * 13): the figures the tuner logs, shows in --status and weighs against
 * loopback trials (outcome.c). The summary is plain bytes, so that the
 * simulated world of tests/unit/test_tuner.c can hand one over as the
 * real world does. No client address is in it. */
#ifndef SMBTUNED_CLIENTS_WATCH_H
#define SMBTUNED_CLIENTS_WATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "clients.h"
#include "sockopts.h"

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
};

/* Pure: the summary of the connections v (lib/clients' result). */
void clients_watch_summarize(const struct clients_conn *v, size_t n,
                             struct clients_watch_summary *sum);

#endif
