/* kernel: /proc, /proc/sys and sock_diag: the only room that reads /proc. */
#include "kernel.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <linux/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "parse.h"

static int read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return -errno;
    n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return (int)n;
}

int kernel_sysctl_triple(const char *name, long v[3], struct err *e)
{
    char path[256], buf[128];
    int r;

    snprintf(path, sizeof(path), "/proc/sys/%s", name);
    r = read_small(path, buf, sizeof(buf));
    if (r < 0)
        return err_set(e, r, "cannot read %s: %s", path, strerror(-r));
    if (sscanf(buf, "%ld %ld %ld", &v[0], &v[1], &v[2]) != 3 || v[0] <= 0 || v[2] < v[0])
        return err_set(e, -EINVAL, "%s: expected three sizes, got '%s'", path, buf);
    return 0;
}

int kernel_sysctl_long(const char *name, long *v, struct err *e)
{
    char path[256], buf[64];
    long long x;
    int r;

    snprintf(path, sizeof(path), "/proc/sys/%s", name);
    r = read_small(path, buf, sizeof(buf));
    if (r < 0)
        return err_set(e, r, "cannot read %s: %s", path, strerror(-r));
    buf[strcspn(buf, "\n")] = '\0';
    r = parse_long(buf, 0, 1LL << 40, &x);
    if (r < 0)
        return err_set(e, r, "%s: expected a number, got '%s'", path, buf);
    *v = (long)x;
    return 0;
}

int kernel_buffer_caps(long *rcv_max, long *snd_max, struct err *e)
{
    int r = kernel_sysctl_long("net/core/rmem_max", rcv_max, e);

    return r < 0 ? r : kernel_sysctl_long("net/core/wmem_max", snd_max, e);
}

/* The buffer a zero request gets, read back from a TCP socket of our own:
 * the minimum is compiled into the kernel (SOCK_MIN_RCVBUF, twice that for
 * sending; it follows the size of struct sk_buff), so ask it. */
int kernel_buffer_mins(long *rcv_min, long *snd_min, struct err *e)
{
    int opts[2] = {SO_RCVBUF, SO_SNDBUF}, zero = 0, got[2];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return err_set(e, -errno,
                       "cannot open a TCP socket to read the kernel's minimum "
                       "buffer sizes: %s",
                       strerror(errno));
    for (int i = 0; i < 2; i++) {
        socklen_t len = sizeof(got[i]);

        if (setsockopt(fd, SOL_SOCKET, opts[i], &zero, sizeof(zero)) < 0 ||
            getsockopt(fd, SOL_SOCKET, opts[i], &got[i], &len) < 0) {
            int r = -errno;

            close(fd);
            return err_set(e, r, "cannot read the kernel's minimum buffer sizes: %s", strerror(-r));
        }
    }
    close(fd);
    *rcv_min = got[0];
    *snd_min = got[1];
    return 0;
}

int kernel_release(char *buf, size_t len)
{
    struct utsname u;

    if (uname(&u) < 0)
        return -errno;
    snprintf(buf, len, "%s", u.release);
    return 0;
}

int kernel_proc_parse(const char *stat_text, struct kernel_proc *p)
{
    const char *s = strrchr(stat_text, ')');
    unsigned long long start = 0;
    int pgrp, session, field;

    /* The command name (field 2) is in parentheses and may hold anything,
     * blanks and ')' included: the fields we want follow the last ')'. */
    if (s == NULL || sscanf(s + 1, " %c %*d %d %d", &p->state, &pgrp, &session) != 3)
        return -EINVAL;
    s++;
    for (field = 3; field < 22; field++) {
        s = strchr(s + 1, ' ');
        if (s == NULL)
            return -EINVAL;
    }
    if (sscanf(s, " %llu", &start) != 1)
        return -EINVAL;
    p->pgrp = (pid_t)pgrp;
    p->session = (pid_t)session;
    p->start_time = start;
    return 0;
}

int kernel_proc_read(pid_t pid, struct kernel_proc *p)
{
    char path[64], buf[1024];
    int r;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    r = read_small(path, buf, sizeof(buf));
    if (r < 0)
        return r;
    return r == 0 ? -EIO : kernel_proc_parse(buf, p);
}

int kernel_proc_start(pid_t pid, unsigned long long *ticks)
{
    struct kernel_proc p;
    int r = kernel_proc_read(pid, &p);

    if (r == 0)
        *ticks = p.start_time;
    return r;
}

/* A zombie counts as gone: a process killed with its parent (PDEATHSIG)
 * stays a zombie until whoever inherits it reaps it, and an init that
 * reaps slowly (a container's took ~2 s here) made the probe's clean-up
 * keep a dead probe's file. */
static bool gone(const struct kernel_proc *p)
{
    return p->state == 'Z' || p->state == 'X';
}

bool kernel_pid_alive(pid_t pid)
{
    struct kernel_proc p;

    if (pid <= 0 || (kill(pid, 0) < 0 && errno != EPERM))
        return false;
    return kernel_proc_read(pid, &p) < 0 || !gone(&p);
}

bool kernel_pid_is(pid_t pid, unsigned long long start_time)
{
    struct kernel_proc p;

    return pid > 0 && kernel_proc_read(pid, &p) == 0 && !gone(&p) && p.start_time == start_time;
}

/* name starts with one of prefixes (NULL-terminated) */
static bool named_one_of(const char *name, const char *const prefixes[])
{
    for (size_t i = 0; prefixes[i] != NULL; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

/* The live (not zombie) members of process group pgid, walked in /proc:
 * PGRP_NONE none, PGRP_ONLY some and (comms given) every one in `session`
 * with a name that starts with one of comms, PGRP_OTHER some not so; -1
 * /proc cannot be read. Without comms it stops at the first member. */
enum { PGRP_NONE, PGRP_ONLY, PGRP_OTHER };
static int pgrp_members(pid_t pgid, pid_t session, const char *const comms[])
{
    struct dirent *de;
    int found = PGRP_NONE;
    DIR *d;

    if (pgid <= 0 || (kill(-pgid, 0) < 0 && errno == ESRCH))
        return PGRP_NONE;
    d = opendir("/proc");
    if (d == NULL)
        return -1;
    while (found != PGRP_OTHER && (found == PGRP_NONE || comms != NULL) &&
           (de = readdir(d)) != NULL) {
        struct kernel_proc p;
        char name[64];
        long long pid;

        if (parse_long(de->d_name, 1, INT_MAX, &pid) < 0 || kernel_proc_read((pid_t)pid, &p) < 0 ||
            p.pgrp != pgid || gone(&p))
            continue;
        found = PGRP_ONLY;
        /* one that cannot be named is not known to be what we want */
        if (comms != NULL &&
            (p.session != session || kernel_proc_comm((pid_t)pid, name, sizeof(name)) < 0 ||
             !named_one_of(name, comms)))
            found = PGRP_OTHER;
    }
    closedir(d);
    return found;
}

bool kernel_pgrp_alive(pid_t pgid)
{
    /* unreadable /proc: alive, so that nothing is taken for gone */
    return pgrp_members(pgid, 0, NULL) != PGRP_NONE;
}

bool kernel_pgrp_only(pid_t pgid, pid_t session, const char *const comms[])
{
    return pgrp_members(pgid, session, comms) == PGRP_ONLY;
}

int kernel_proc_comm(pid_t pid, char *buf, size_t len)
{
    char path[64];
    int r;

    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    r = read_small(path, buf, len);
    if (r < 0)
        return r;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

bool kernel_pid_has_socket(pid_t pid, unsigned long inode)
{
    char dir[64], want[64], path[PATH_MAX], link[64];
    struct dirent *de;
    bool found = false;
    DIR *d;

    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    d = opendir(dir);
    if (d == NULL)
        return false;
    while (!found && (de = readdir(d)) != NULL) {
        ssize_t n;

        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        n = readlink(path, link, sizeof(link) - 1);
        if (n <= 0)
            continue;
        link[n] = '\0';
        found = strcmp(link, want) == 0;
    }
    closedir(d);
    return found;
}

int kernel_proc_cmdline(pid_t pid, char *buf, size_t len)
{
    char path[64];
    int fd, n;

    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    n = (int)read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    for (int i = 0; i < n - 1; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    return 0;
}

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
        for (; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
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
    unsigned alen = (unsigned)(len - NLMSG_ALIGN(sizeof(*m)));
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
