/* clients_watch: see clients_watch.h. */
#include "clients_watch.h"

#include <string.h>

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
