/* kernel_diag: sock_diag, the kernel's view of TCP sockets (a part of the
 * kernel module; /proc and /proc/sys are in kernel.c): smbd's listener,
 * its connections, and the server side of a connection of ours. */
#include "kernel.h"

#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int kernel_diag_dump(int family, unsigned states, unsigned exts, const int *ports, int nports,
                     void (*visit)(const struct inet_diag_msg *m, size_t len, void *ctx), void *ctx)
{
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 req;
    } msg = {0};
    char buf[32768];
    int fd, r = 0;

    fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return -errno;
    msg.nlh.nlmsg_len = sizeof(msg);
    msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    msg.req.sdiag_family = (unsigned char)family;
    msg.req.sdiag_protocol = IPPROTO_TCP;
    msg.req.idiag_states = states;
    msg.req.idiag_ext = (unsigned char)exts;
    if (send(fd, &msg, sizeof(msg), 0) < 0) {
        r = -errno;
        goto out;
    }
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        struct nlmsghdr *h = (struct nlmsghdr *)buf;

        if (n <= 0) {
            r = n < 0 ? -errno : 0;
            goto out;
        }
        /* n stays signed: NLMSG_NEXT past an unaligned last message
         * goes below 0, which NLMSG_OK refuses */
        for (; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
            struct inet_diag_msg *m = NLMSG_DATA(h);
            bool ours = false;

            if (h->nlmsg_type == NLMSG_DONE)
                goto out;
            if (h->nlmsg_type == NLMSG_ERROR) {
                /* The kernel's reason (ENOENT: no inet_diag for TCP). */
                const struct nlmsgerr *ne = NLMSG_DATA(h);

                r = h->nlmsg_len >= NLMSG_LENGTH(sizeof(*ne)) && ne->error < 0 ? ne->error : -EIO;
                goto out;
            }
            if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
                continue;
            for (int i = 0; i < nports && !ours; i++)
                ours = ntohs(m->id.idiag_sport) == ports[i];
            if (ours)
                visit(m, h->nlmsg_len - NLMSG_LENGTH(0), ctx);
        }
    }
out:
    close(fd);
    return r;
}

struct one_ext {
    int ext;
    void (*visit)(const struct inet_diag_msg *m, struct rtattr *a, void *ctx);
    void *ctx;
};

static void visit_one_ext(const struct inet_diag_msg *m, size_t len, void *ctx)
{
    const struct one_ext *o = ctx;
    /* signed: RTA_NEXT past an unaligned last attribute goes below 0 */
    int alen = (int)(len - NLMSG_ALIGN(sizeof(*m)));
    struct rtattr *a;

    for (a = (struct rtattr *)(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen))
        if (a->rta_type == o->ext)
            o->visit(m, a, o->ctx);
}

/* Visit the one extension ext of every TCP socket of one family in the
 * given states whose local port is port. */
static int diag_dump(int family, int port, unsigned states, int ext,
                     void (*visit)(const struct inet_diag_msg *m, struct rtattr *a, void *ctx),
                     void *ctx)
{
    struct one_ext o = {ext, visit, ctx};

    return kernel_diag_dump(family, states, 1U << (ext - 1), &port, 1, visit_one_ext, &o);
}

struct listener {
    long rcvbuf, sndbuf;
    bool found;
    uid_t me;         /* the caller: its own listeners count too */
    long foreign_uid; /* a listener of another user's seen, -1 none */
    int family;       /* of the first one found */
    uint32_t addr[4]; /* its address, network order */
    unsigned ifindex; /* the device it is bound to, 0 none */
};

static void visit_meminfo(const struct inet_diag_msg *m, struct rtattr *a, void *ctx)
{
    struct listener *l = ctx;
    const unsigned *mem = RTA_DATA(a);

    if (l->found || RTA_PAYLOAD(a) < sizeof(unsigned) * SK_MEMINFO_VARS)
        return;
    /* smbd listens as root. On a port above 1023 any user may listen
     * where smbd could not (smbd then serves nobody there): that socket's
     * sizes say nothing of smbd's, and a connection to it is no test of
     * smbd's. A caller that is not root (the unit tests) counts its own. */
    if (m->idiag_uid != 0 && m->idiag_uid != l->me) {
        l->foreign_uid = m->idiag_uid;
        return;
    }
    l->rcvbuf = mem[SK_MEMINFO_RCVBUF];
    l->sndbuf = mem[SK_MEMINFO_SNDBUF];
    l->family = m->idiag_family;
    memcpy(l->addr, m->id.idiag_src, sizeof(l->addr));
    l->ifindex = m->id.idiag_if;
    l->found = true;
}

static int find_listener(int port, struct listener *l, struct err *e)
{
    int r;

    l->me = geteuid();
    l->foreign_uid = -1;
    r = diag_dump(AF_INET, port, 1 << KERNEL_TCP_LISTEN, INET_DIAG_SKMEMINFO, visit_meminfo, l);

    if (r == 0 && !l->found)
        r = diag_dump(AF_INET6, port, 1 << KERNEL_TCP_LISTEN, INET_DIAG_SKMEMINFO, visit_meminfo,
                      l);
    if (r < 0)
        return err_set(e, r, "sock_diag: %s", strerror(-r));
    if (!l->found && l->foreign_uid >= 0)
        return err_set(e, -ENOENT,
                       "nothing of root's listens on TCP port %d: the listener there is uid "
                       "%ld's, not smbd's",
                       port, l->foreign_uid);
    if (!l->found)
        return err_set(e, -ENOENT, "nothing listens on TCP port %d", port);
    return 0;
}

int kernel_listener_buffers(int port, long *rcvbuf, long *sndbuf, struct err *e)
{
    struct listener l = {0};
    int r = find_listener(port, &l, e);

    if (r < 0)
        return r;
    *rcvbuf = l.rcvbuf;
    *sndbuf = l.sndbuf;
    return 0;
}

/* The server side of our connection: local port port (the dump's
 * filter), remote port and address ours (a client of smbd's whose port
 * happens to be our port, from another address, is not it). */
struct accepted {
    int ours;
    uint32_t addr[4]; /* network order; IPv4 in [0] */
    long sndbuf;
    bool found;
};

static void visit_accepted(const struct inet_diag_msg *m, struct rtattr *a, void *ctx)
{
    struct accepted *c = ctx;
    const unsigned *mem = RTA_DATA(a);
    size_t alen = m->idiag_family == AF_INET ? 4 : 16;

    if (c->found || ntohs(m->id.idiag_dport) != c->ours ||
        memcmp(m->id.idiag_dst, c->addr, alen) != 0 ||
        RTA_PAYLOAD(a) < sizeof(unsigned) * SK_MEMINFO_VARS)
        return;
    c->sndbuf = mem[SK_MEMINFO_SNDBUF];
    c->found = true;
}

/* Connect fd to addr within CONNECT_MS. */
#define CONNECT_MS 2000
static int connect_within(int fd, const struct sockaddr *addr, socklen_t len)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int err = 0, r;
    socklen_t elen = sizeof(err);

    if (connect(fd, addr, len) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return -errno;
    /* a signal does not end the wait early (the deadline restarts: it is
     * a bound, not a measure) */
    while ((r = poll(&p, 1, CONNECT_MS)) < 0 && errno == EINTR)
        ;
    if (r < 0)
        return -errno;
    if (r == 0)
        return -ETIMEDOUT;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
        return -errno;
    return -err;
}

int kernel_accepted_sndbuf(int port, long *sndbuf, struct err *e)
{
    struct listener l = {0};
    struct accepted c = {0};
    struct sockaddr_storage ss = {0};
    socklen_t len;
    int fd, r;

    r = find_listener(port, &l, e);
    if (r < 0)
        return r;
    /* The listener's own address, loopback for a wildcard one. */
    if (l.family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;

        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        a->sin_addr.s_addr = l.addr[0] ? l.addr[0] : htonl(INADDR_LOOPBACK);
        len = sizeof(*a);
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        memcpy(&a->sin6_addr, l.addr, sizeof(a->sin6_addr));
        if (IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr))
            a->sin6_addr = in6addr_loopback;
        /* A link-local address is one only with its device: connect()
         * refuses it without (EINVAL). The listener is bound to it. */
        if (IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr))
            a->sin6_scope_id = l.ifindex;
        len = sizeof(*a);
    }
    fd = socket(l.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return err_set(e, -errno, "socket: %s", strerror(errno));
    r = connect_within(fd, (struct sockaddr *)&ss, len);
    if (r == 0) {
        len = sizeof(ss);
        r = getsockname(fd, (struct sockaddr *)&ss, &len) < 0 ? -errno : 0;
        if (l.family == AF_INET) {
            c.ours = ntohs(((struct sockaddr_in *)&ss)->sin_port);
            memcpy(c.addr, &((struct sockaddr_in *)&ss)->sin_addr, 4);
        } else {
            c.ours = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
            memcpy(c.addr, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
        }
    }
    /* The server side is established once our connect returns on
     * loopback; a few tries cover a busy machine. */
    for (int i = 0; r == 0 && !c.found && i < 50; i++) {
        r = diag_dump(l.family, port, 1 << KERNEL_TCP_ESTABLISHED, INET_DIAG_SKMEMINFO,
                      visit_accepted, &c);
        if (r == 0 && !c.found)
            usleep(2000);
    }
    close(fd);
    if (r < 0)
        return err_set(e, r, "a test connection to port %d: %s", port, strerror(-r));
    if (!c.found)
        return err_set(e, -ENOENT, "a test connection to port %d: not seen by sock_diag", port);
    *sndbuf = c.sndbuf;
    return 0;
}

struct inode_of {
    unsigned long inode;
    bool found;
};

static void visit_inode(const struct inet_diag_msg *m, struct rtattr *a, void *ctx)
{
    struct inode_of *l = ctx;

    (void)a;
    /* The kernel gives the address in network order. */
    if (!l->found && m->id.idiag_src[0] == htonl(INADDR_LOOPBACK)) {
        l->inode = m->idiag_inode;
        l->found = true;
    }
}

int kernel_loopback_listener(int port, unsigned long *inode)
{
    struct inode_of l = {0};
    int r = diag_dump(AF_INET, port, 1 << KERNEL_TCP_LISTEN, INET_DIAG_SKMEMINFO, visit_inode, &l);

    if (r < 0)
        return r;
    if (!l.found)
        return -ENOENT;
    *inode = l.inode;
    return 0;
}

unsigned long long kernel_bytes_since(const struct kernel_sock_bytes *then, size_t nthen,
                                      const struct kernel_sock_bytes *now, size_t nnow)
{
    unsigned long long sum = 0;

    for (size_t i = 0; i < nnow; i++) {
        unsigned long long before = 0;

        /* A connection that was not there before moved all its bytes
         * since; one that closed meanwhile is not seen (clients keep
         * their SMB sessions open, so that is rare). */
        for (size_t j = 0; j < nthen; j++) {
            if (then[j].cookie == now[i].cookie) {
                before = then[j].bytes;
                break;
            }
        }
        if (now[i].bytes >= before)
            sum += now[i].bytes - before;
    }
    return sum;
}
