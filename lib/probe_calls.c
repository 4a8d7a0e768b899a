/* probe_calls: how large the probe child's calls are and when a direction
 * is over (see probe_child.h): the round trip of its connection, the rates
 * seen so far and the duration left decide, within the memory the child
 * can get. */
#include <linux/tcp.h> /* tcpi_min_rtt, which glibc's struct tcp_info lacks */
#include <limits.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "probe_child.h"

long long probe_read_call_size(long long request, double rtt_s, double rate_bps)
{
    double want = PROBE_READ_CALL_RTTS * rtt_s * rate_bps;
    long long max = PROBE_READ_CALL_MAX / request * request, n;

    if (!(want > (double)request)) /* also NaN */
        return request;
    if (want >= (double)max) /* max >= request: request <= PROBE_MAX_REQUEST_SIZE */
        return max;
    n = (long long)(want / (double)request) * request;
    return n < want ? n + request : n;
}

/* The most a direction with a duration moves: the cap, or the share's
 * room when that is less. */
static long long phase_cap(const struct probe_params *p)
{
    long long cap = p->size * PROBE_SIZE_CAP_FACTOR;

    return p->room > 0 && p->room < cap ? p->room : cap;
}

bool probe_phase_over(const struct probe_params *p, long long bytes, double elapsed_s, double rtt_s)
{
    if (!(p->duration_s > 0))
        return bytes >= p->size;
    if (bytes >= phase_cap(p) || elapsed_s >= p->duration_s)
        return true;
    return bytes >= p->size && elapsed_s >= PROBE_STARTUP_RTTS * rtt_s;
}

bool probe_warmed(double elapsed_s, double rtt_s)
{
    return elapsed_s > 0 && elapsed_s >= PROBE_WARMUP_RTTS * rtt_s;
}

double probe_call_window(const struct probe_params *p, double elapsed_s, double rtt_s, bool warm)
{
    double left = p->duration_s - elapsed_s;

    if (!warm && PROBE_WARMUP_RTTS * rtt_s - elapsed_s < left)
        left = PROBE_WARMUP_RTTS * rtt_s - elapsed_s;
    return left > 0 ? left : 0;
}

double probe_phase_rate(const struct probe_phase *ph, long long *startup_bytes, double *startup_s,
                        double *wait_s)
{
    long long bytes = ph->bytes;
    double secs = ph->secs, wait = ph->wait_s;

    *startup_bytes = 0;
    *startup_s = 0;
    *wait_s = 0;
    if (!(secs > 0) || bytes <= 0)
        return 0;
    if (ph->warm_bytes > 0 && ph->warm_s > 0 && ph->warm_s < secs &&
        2 * (bytes - ph->warm_bytes) >= bytes) {
        *startup_bytes = ph->warm_bytes;
        *startup_s = ph->warm_s;
        bytes -= ph->warm_bytes;
        secs -= ph->warm_s;
        wait -= ph->warm_wait_s;
    }
    if (wait > secs / 2)
        wait = secs / 2;
    if (wait > 0) {
        *wait_s = wait;
        secs -= wait;
    }
    return (double)bytes / secs;
}

double probe_call_wait(double call_s, double rtt_s)
{
    if (!(rtt_s > 0) || !(call_s > rtt_s)) /* also NaN */
        return 0;
    return rtt_s;
}

long long probe_phase_room(const struct probe_params *p, long long bytes)
{
    long long end = p->duration_s > 0 && bytes >= p->size ? phase_cap(p) : p->size;

    return bytes < end ? end - bytes : 0;
}

long long probe_room(unsigned long long avail, unsigned long long total, long long *reserve)
{
    unsigned long long r = total / 100 * PROBE_ROOM_RESERVE_PCT;

    if (r > (unsigned long long)PROBE_ROOM_RESERVE_MAX)
        r = (unsigned long long)PROBE_ROOM_RESERVE_MAX;
    *reserve = (long long)r;
    if (total <= PROBE_ROOM_UNSAID_MAX)
        return -1;
    if (avail <= r)
        return 0;
    /* a share of exabytes: more than any file of ours */
    return avail - r > (unsigned long long)LLONG_MAX ? LLONG_MAX : (long long)(avail - r);
}

long long probe_call_fit(long long n, double rate_bps, double left_s)
{
    double want = rate_bps * left_s;
    long long units;

    if (!(rate_bps > 0) || left_s < 0 || !(want < (double)n)) /* also NaN */
        return n;
    units = (long long)(want / (double)PROBE_CALL_UNIT) + 1;
    return units * PROBE_CALL_UNIT < n ? units * PROBE_CALL_UNIT : n;
}

double probe_pace_cap(double cap, long long bytes, long long request, double call_s, double rtt_s)
{
    double wire = call_s - rtt_s, want;

    /* A call shorter than a request is mostly its round trip; a wire time
     * of zero or less says nothing (timer or RTT estimate off). */
    if (!(rtt_s >= PROBE_PACE_MIN_RTT) || bytes < request || request <= 0 || !(wire > 0))
        return cap;
    want = PROBE_PACE_FACTOR * (double)bytes / wire;
    return want > cap ? want : cap;
}

double probe_set_pacing(int fd, double cap)
{
    /* unsigned int: a size every kernel takes (only newer ones read 64
     * bits); ~0U is "no cap". */
    unsigned int v = cap >= (double)UINT32_MAX ? ~0U : (unsigned int)cap;

    if (fd < 0 || !(cap > 0) || setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v, sizeof(v)) < 0)
        return 0;
    return v == ~0U ? 0 : (double)v;
}

/* The smallest round trip the kernel saw on the connection: the path's own.
 * The smoothed one includes the queueing of the writes just done, which on
 * loopback reaches milliseconds and gave 64 MiB calls that read 30% slower
 * there than one request per call. */
double probe_conn_min_rtt(int fd)
{
    struct tcp_info ti;
    socklen_t l = sizeof(ti);

    if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) < 0 ||
        l < offsetof(struct tcp_info, tcpi_min_rtt) + sizeof(ti.tcpi_min_rtt) ||
        ti.tcpi_min_rtt == UINT32_MAX) /* no sample yet */
        return 0;
    return ti.tcpi_min_rtt / 1e6;
}

size_t probe_next_read_call(unsigned char **buf, size_t *cap, long long request, double rtt_s,
                            double rate_bps)
{
    size_t n = (size_t)probe_read_call_size(request, rtt_s, rate_bps);
    unsigned char *b;

    if (n > *cap && (b = realloc(*buf, n)) != NULL) {
        *buf = b;
        *cap = n;
    }
    return n < *cap ? n : *cap;
}
