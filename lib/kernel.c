/* kernel: /proc, /proc/sys and sock_diag. */
#include "kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

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
    r = util_parse_long(buf, 0, 1LL << 40, &x);
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

int kernel_proc_start(pid_t pid, unsigned long long *ticks)
{
    char path[64], buf[1024], *p;
    int r;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    r = read_small(path, buf, sizeof(buf));
    if (r < 0)
        return r;
    /* comm (field 2) may hold spaces and parentheses: count from the last
     * ')'. starttime is field 22, the 20th after it. */
    p = strrchr(buf, ')');
    if (p == NULL)
        return -EINVAL;
    for (int field = 2; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (p == NULL)
            return -EINVAL;
    }
    if (sscanf(p + 1, "%llu", ticks) != 1)
        return -EINVAL;
    return 0;
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

/* TCP states as sock_diag numbers them (include/net/tcp_states.h); the
 * userspace headers that name them clash with linux/tcp.h's tcp_info. */
#define STATE_ESTABLISHED 1
#define STATE_LISTEN 10

/* Visit every TCP socket of one family in the given states whose local
 * port is port, with the requested sock_diag extension. */
static int diag_dump(int family, int port, unsigned states, int ext,
                     void (*visit)(const struct inet_diag_msg *m, struct rtattr *a, void *ctx),
                     void *ctx)
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
    msg.req.idiag_ext = (unsigned char)(1 << (ext - 1));
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
            struct rtattr *a;
            unsigned alen;

            if (h->nlmsg_type == NLMSG_DONE)
                goto out;
            if (h->nlmsg_type == NLMSG_ERROR) {
                r = -EIO;
                goto out;
            }
            if (ntohs(m->id.idiag_sport) != port)
                continue;
            alen = h->nlmsg_len - NLMSG_LENGTH(sizeof(*m));
            for (a = (struct rtattr *)(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen))
                if (a->rta_type == ext)
                    visit(m, a, ctx);
        }
    }
out:
    close(fd);
    return r;
}

struct listener {
    long rcvbuf, sndbuf;
    bool found;
};

static void visit_meminfo(const struct inet_diag_msg *m, struct rtattr *a, void *ctx)
{
    struct listener *l = ctx;
    const unsigned *mem = RTA_DATA(a);

    if (l->found || RTA_PAYLOAD(a) < sizeof(unsigned) * SK_MEMINFO_VARS)
        return;
    l->rcvbuf = mem[SK_MEMINFO_RCVBUF];
    l->sndbuf = mem[SK_MEMINFO_SNDBUF];
    l->found = true;
}

int kernel_listener_buffers(int port, long *rcvbuf, long *sndbuf, struct err *e)
{
    struct listener l = {0};
    int r = diag_dump(AF_INET, port, 1 << STATE_LISTEN, INET_DIAG_SKMEMINFO, visit_meminfo, &l);

    if (r == 0 && !l.found)
        r = diag_dump(AF_INET6, port, 1 << STATE_LISTEN, INET_DIAG_SKMEMINFO, visit_meminfo, &l);
    if (r < 0)
        return err_set(e, r, "sock_diag: %s", strerror(-r));
    if (!l.found)
        return err_set(e, -ENOENT, "nothing listens on TCP port %d", port);
    *rcvbuf = l.rcvbuf;
    *sndbuf = l.sndbuf;
    return 0;
}

struct sockets {
    struct kernel_sock_bytes *v;
    size_t n, cap;
    int err;
};

static void visit_info(const struct inet_diag_msg *m, struct rtattr *a, void *ctx)
{
    struct sockets *ss = ctx;
    struct tcp_info ti = {0};
    size_t n = RTA_PAYLOAD(a) < sizeof(ti) ? RTA_PAYLOAD(a) : sizeof(ti);

    if (ss->n == ss->cap) {
        size_t cap = ss->cap ? ss->cap * 2 : 64;
        struct kernel_sock_bytes *nv = realloc(ss->v, cap * sizeof(*nv));

        if (nv == NULL) {
            ss->err = -ENOMEM;
            return;
        }
        ss->v = nv;
        ss->cap = cap;
    }
    /* Older kernels send a shorter tcp_info: what is missing stays 0. */
    memcpy(&ti, RTA_DATA(a), n);
    ss->v[ss->n].cookie = (uint64_t)m->id.idiag_cookie[0] | (uint64_t)m->id.idiag_cookie[1] << 32;
    ss->v[ss->n].bytes = ti.tcpi_bytes_acked + ti.tcpi_bytes_received;
    ss->n++;
}

int kernel_port_sockets(int port, struct kernel_sock_bytes **v, size_t *n, struct err *e)
{
    struct sockets ss = {0};
    int r;

    r = diag_dump(AF_INET, port, 1 << STATE_ESTABLISHED, INET_DIAG_INFO, visit_info, &ss);
    if (r == 0)
        r = diag_dump(AF_INET6, port, 1 << STATE_ESTABLISHED, INET_DIAG_INFO, visit_info, &ss);
    if (r == 0)
        r = ss.err;
    if (r < 0) {
        free(ss.v);
        return err_set(e, r, "sock_diag: %s", strerror(-r));
    }
    *v = ss.v;
    *n = ss.n;
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
