/* conns: see conns.h. The dump itself is kernel_diag_dump's (lib/kernel). */
#include "conns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kernel.h"

/* The kernel sent at least up to and including field. */
#define HAS(len, field)                                                                            \
    ((len) >= offsetof(struct tcp_info, field) + sizeof(((struct tcp_info *)0)->field))

/* tcpi_rcv_wnd (Linux 6.2) comes right after tcpi_snd_wnd; this build's
 * linux/tcp.h may predate it (Debian 12's does) while the kernel running
 * sends it: the struct only ever grows at its end, so the offset holds. */
#define RCV_WND_OFF (offsetof(struct tcp_info, tcpi_snd_wnd) + sizeof(uint32_t))
/* More than any kernel's tcp_info so far (6.18: 280 bytes). */
#define INFO_MAX 512

static void addr_str(int family, const __be32 *a, __be16 port, char *out, size_t len)
{
    char ip[INET6_ADDRSTRLEN] = "?";

    /* An IPv4 client of a dual-stack listener: as IPv4, the way the
     * admin knows the client. */
    if (family == AF_INET6 && IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)a)) {
        family = AF_INET;
        a += 3;
    }
    inet_ntop(family, a, ip, sizeof(ip));
    if (family == AF_INET6)
        snprintf(out, len, "[%s]:%u", ip, (unsigned)ntohs(port));
    else
        snprintf(out, len, "%s:%u", ip, (unsigned)ntohs(port));
}

static void take_info(struct clients_sock *s, const void *data, size_t got)
{
    unsigned char raw[INFO_MAX] = {0};
    size_t len = got < sizeof(raw) ? got : sizeof(raw);
    struct tcp_info ti;
    uint32_t rcv_wnd;

    /* Older kernels send a shorter tcp_info (newer ones a longer one):
     * copy what came into zeroed bytes and note what is there. */
    memcpy(raw, data, len);
    memcpy(&ti, raw, sizeof(ti));
    memcpy(&rcv_wnd, raw + RCV_WND_OFF, sizeof(rcv_wnd));
    s->rtt_us = HAS(len, tcpi_rtt) ? ti.tcpi_rtt : 0;
    s->unacked = HAS(len, tcpi_unacked) ? ti.tcpi_unacked : 0;
    if (HAS(len, tcpi_bytes_received)) {
        s->have |= CLIENTS_HAVE_BYTES;
        s->bytes_acked = ti.tcpi_bytes_acked;
        s->bytes_received = ti.tcpi_bytes_received;
    }
    if (HAS(len, tcpi_notsent_bytes)) {
        s->have |= CLIENTS_HAVE_NOTSENT;
        s->notsent_bytes = ti.tcpi_notsent_bytes;
    }
    if (HAS(len, tcpi_rwnd_limited)) {
        s->have |= CLIENTS_HAVE_BUSY;
        s->busy_us = ti.tcpi_busy_time;
        s->rwnd_limited_us = ti.tcpi_rwnd_limited;
    }
    if (len >= RCV_WND_OFF + sizeof(rcv_wnd)) {
        s->have |= CLIENTS_HAVE_RCV_WND;
        s->rcv_wnd = rcv_wnd;
    } else if (HAS(len, tcpi_rcv_ssthresh)) {
        /* No tcpi_rcv_wnd (before 6.2): the window we advertise is
         * min(free receive space, rcv_ssthresh) (__tcp_select_window), and
         * smbd drains its socket at once, so rcv_ssthresh, in every
         * kernel's tcp_info, is the window itself. */
        s->rcv_wnd = ti.tcpi_rcv_ssthresh;
    }
    s->snd_mss = HAS(len, tcpi_snd_mss) ? ti.tcpi_snd_mss : 0;
}

static void take_mem(struct clients_sock *s, const uint32_t *mem, size_t len)
{
    /* SK_MEMINFO_VARS grew over the years; we need the first six. */
    if (len < (SK_MEMINFO_WMEM_QUEUED + 1) * sizeof(uint32_t))
        return;
    s->have |= CLIENTS_HAVE_MEM;
    s->rcvbuf = mem[SK_MEMINFO_RCVBUF];
    s->sndbuf = mem[SK_MEMINFO_SNDBUF];
    s->wmem_queued = mem[SK_MEMINFO_WMEM_QUEUED];
}

int conns_parse(const struct inet_diag_msg *m, size_t len, struct clients_sock *s)
{
    const struct rtattr *a;
    int alen; /* signed: RTA_NEXT past an unaligned last attribute goes below 0 */
    bool info = false;

    if (len < NLMSG_ALIGN(sizeof(*m)))
        return -EINVAL;
    memset(s, 0, sizeof(*s));
    s->cookie = (uint64_t)m->id.idiag_cookie[0] | (uint64_t)m->id.idiag_cookie[1] << 32;
    addr_str(m->idiag_family, m->id.idiag_src, m->id.idiag_sport, s->local, sizeof(s->local));
    addr_str(m->idiag_family, m->id.idiag_dst, m->id.idiag_dport, s->peer, sizeof(s->peer));
    /* For an established TCP socket the kernel's rcv_nxt - copied_seq
     * (tcp_diag_get_info): bytes in order, received, not yet read by smbd;
     * in every kernel's inet_diag_msg, no attribute needed. */
    s->unread = m->idiag_rqueue;
    alen = (int)(len - NLMSG_ALIGN(sizeof(*m)));
    for (a = (const struct rtattr *)(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
        if (a->rta_type == INET_DIAG_INFO) {
            take_info(s, RTA_DATA(a), RTA_PAYLOAD(a));
            info = true;
        } else if (a->rta_type == INET_DIAG_SKMEMINFO) {
            take_mem(s, RTA_DATA(a), RTA_PAYLOAD(a));
        }
    }
    if (!info)
        return -EINVAL;
    if (!(s->have & CLIENTS_HAVE_RCV_WND) && s->rcv_wnd == 0 && (s->have & CLIENTS_HAVE_MEM))
        /* Not even rcv_ssthresh: half the buffer, the window's share of
         * it under tcp_adv_win_scale=1 (the default before 6.6). */
        s->rcv_wnd = s->rcvbuf / 2;
    if (!(s->have & CLIENTS_HAVE_NOTSENT) && (s->have & CLIENTS_HAVE_MEM)) {
        /* No tcpi_notsent_bytes (before 4.6): what is queued beyond the
         * segments in flight. The queue counts its buffers' overhead too,
         * a few percent with full-sized segments. */
        uint64_t flight = (uint64_t)s->unacked * s->snd_mss;

        s->notsent_bytes = s->wmem_queued > flight ? (uint32_t)(s->wmem_queued - flight) : 0;
    }
    return 0;
}

struct gather {
    struct clients_sock *v;
    size_t n, cap;
    int err;
};

static void visit(const struct inet_diag_msg *m, size_t len, void *ctx)
{
    struct gather *g = ctx;

    if (g->err < 0 || g->n >= CLIENTS_TRACK_MAX)
        return;
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 32;
        struct clients_sock *nv = realloc(g->v, cap * sizeof(*nv));

        if (nv == NULL) {
            g->err = -ENOMEM;
            return;
        }
        g->v = nv;
        g->cap = cap;
    }
    /* A socket without tcp_info (it just closed) is left out. */
    if (conns_parse(m, len, &g->v[g->n]) == 0)
        g->n++;
}

/* The IPv4 and IPv6 sockets in states on ports, to visit; the reason in e
 * when sock_diag refuses. */
static int dump(unsigned states, unsigned exts, const int *ports, int nports,
                void (*fn)(const struct inet_diag_msg *m, size_t len, void *ctx), void *ctx,
                struct err *e)
{
    int r = kernel_diag_dump(AF_INET, states, exts, ports, nports, fn, ctx);

    if (r == 0) {
        r = kernel_diag_dump(AF_INET6, states, exts, ports, nports, fn, ctx);
        /* A kernel without IPv6 has no AF_INET6 dump: IPv4 is all. */
        if (r == -ENOENT || r == -EAFNOSUPPORT)
            r = 0;
    }
    if (r == -EPROTONOSUPPORT || r == -EAFNOSUPPORT || r == -ENOENT)
        return err_set(e, r,
                       "sock_diag is not available (a kernel without NETLINK_SOCK_DIAG "
                       "or the tcp_diag module): %s",
                       strerror(-r));
    if (r < 0)
        return err_set(e, r, "sock_diag: %s", strerror(-r));
    return 0;
}

int conns_read(const int *ports, int nports, struct clients_sock **v, size_t *n, struct err *e)
{
    const unsigned exts = 1U << (INET_DIAG_INFO - 1) | 1U << (INET_DIAG_SKMEMINFO - 1);
    struct gather g = {0};
    int r;

    r = dump(1U << KERNEL_TCP_ESTABLISHED, exts, ports, nports, visit, &g, e);
    if (r == 0 && g.err < 0)
        r = err_set(e, g.err, "sock_diag: %s", strerror(-g.err));
    if (r < 0) {
        free(g.v);
        return r;
    }
    *v = g.v;
    *n = g.n;
    return 0;
}

static void count(const struct inet_diag_msg *m, size_t len, void *ctx)
{
    (void)m;
    (void)len;
    (*(int *)ctx)++;
}

int conns_listening(const int *ports, int nports, int *n, struct err *e)
{
    *n = 0;
    return dump(1U << KERNEL_TCP_LISTEN, 0, ports, nports, count, n, e);
}
