/* delayline: a userspace wide-area link between two network namespaces.
 *
 * This kernel has neither netem nor fq, so the emulated path is built here:
 * a TUN device in each namespace, and this process carrying IP packets
 * between them. Each direction is one bottleneck link:
 *
 *   arrival -> tail-drop queue (queue bytes) -> serialiser (rate, plus the
 *   per-packet Ethernet framing overhead) -> fixed one-way delay -> out
 *
 * which is what a WAN router's outgoing interface plus propagation delay
 * does. The model is computed, not simulated with timers per packet: a
 * packet's departure time is max(arrival, link free) + wire time, and it is
 * written to the other TUN at departure + delay. Delivery times are
 * monotonic per direction, so each direction is a FIFO ring.
 *
 * Usage: delayline --ns-a NS --ns-b NS [--dev NAME] --delay-ms D
 *                  --rate-mbit R [--queue-bytes Q] [--overhead B]
 *                  [--slots N] [--max-seconds S]
 *
 * It creates the device NAME (default wan0) in both namespaces, prints
 * "ready" on stdout once both exist, and runs until SIGTERM/SIGINT, its
 * parent's death (PR_SET_PDEATHSIG) or --max-seconds (default 3600), so
 * that it always stops by itself. The devices vanish with the process.
 * Addresses and routes are the caller's job (tests/netem/wan.py).
 * Statistics go to stderr at exit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/* Larger than any packet on a 1500-byte MTU link; bigger ones are dropped
 * and counted (the devices are created with MTU 1500 by wan.py). */
#define SLOT_BYTES 2048

/* Upper bound on the wake-up lateness we compensate for. */
#define EARLY_MAX_NS 200000ull

struct slot {
    uint64_t due_ns;
    uint32_t len;
    unsigned char data[SLOT_BYTES];
};

struct dir {
    const char *name;
    int in_fd, out_fd;
    struct slot *ring;
    size_t nslots, head, count;
    uint64_t link_free_ns; /* when the serialiser finishes its backlog */
    uint64_t fwd, drop_queue, drop_ring, drop_big, write_err;
};

struct cfg {
    double rate_bps;      /* bits per second */
    uint64_t delay_ns;    /* one way */
    uint64_t queue_bytes; /* tail-drop limit of the bottleneck queue */
    unsigned overhead;    /* bytes of framing charged per packet */
};

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "delayline: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Open a TUN device named dev inside the namespace /run/netns/ns. The fd
 * stays usable after we return to our own namespace: a TUN fd belongs to
 * the device, not to the caller's namespace. */
static int tun_in_ns(const char *ns, const char *dev)
{
    char path[256];
    struct ifreq ifr;
    int self, target, fd;

    self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0)
        die("open /proc/self/ns/net");
    snprintf(path, sizeof(path), "/run/netns/%s", ns);
    target = open(path, O_RDONLY | O_CLOEXEC);
    if (target < 0)
        die(path);
    if (setns(target, CLONE_NEWNET) < 0)
        die("setns");
    fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        die("open /dev/net/tun");
    memset(&ifr, 0, sizeof(ifr));
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0)
        die("TUNSETIFF");
    if (setns(self, CLONE_NEWNET) < 0)
        die("setns back");
    close(target);
    close(self);
    return fd;
}

/* Take one packet that arrived now into the link, or drop it. */
static void enqueue(struct dir *d, const struct cfg *c, const unsigned char *pkt, size_t len,
                    uint64_t now)
{
    uint64_t start, wire_ns, backlog_bytes;
    struct slot *s;

    if (len > SLOT_BYTES) {
        d->drop_big++;
        return;
    }
    if (d->count == d->nslots) {
        d->drop_ring++;
        return;
    }
    start = d->link_free_ns > now ? d->link_free_ns : now;
    /* Bytes still waiting for the serialiser when this packet arrives. */
    backlog_bytes = (uint64_t)((double)(start - now) * c->rate_bps / 8e9);
    if (backlog_bytes + len > c->queue_bytes) {
        d->drop_queue++;
        return;
    }
    wire_ns = (uint64_t)((double)(len + c->overhead) * 8e9 / c->rate_bps);
    d->link_free_ns = start + wire_ns;
    s = &d->ring[(d->head + d->count) % d->nslots];
    s->due_ns = d->link_free_ns + c->delay_ns;
    s->len = (uint32_t)len;
    memcpy(s->data, pkt, len);
    d->count++;
}

static void deliver_due(struct dir *d, uint64_t now)
{
    while (d->count > 0 && d->ring[d->head].due_ns <= now) {
        struct slot *s = &d->ring[d->head];

        /* A TUN write hands the packet to the other namespace's stack; it
         * does not block. A failure is a lost packet, as on a real link. */
        if (write(d->out_fd, s->data, s->len) == (ssize_t)s->len)
            d->fwd++;
        else
            d->write_err++;
        d->head = (d->head + 1) % d->nslots;
        d->count--;
    }
}

/* Read what the TUN has queued, at most a batch, so that due packets of the
 * other direction are not held up by a burst. */
static void read_batch(struct dir *d, const struct cfg *c)
{
    unsigned char buf[65536];
    int i;

    for (i = 0; i < 64; i++) {
        ssize_t n = read(d->in_fd, buf, sizeof(buf));

        if (n <= 0)
            return;
        enqueue(d, c, buf, (size_t)n, now_ns());
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: delayline --ns-a NS --ns-b NS [--dev NAME] --delay-ms D "
                    "--rate-mbit R [--queue-bytes Q] [--overhead B] [--slots N] "
                    "[--max-seconds S]\n");
    exit(2);
}

static double num_arg(const char *s, double min, double max)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= min && v <= max)) {
        fprintf(stderr, "delayline: bad number '%s' (range %g..%g)\n", s, min, max);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"ns-a", required_argument, NULL, 'a'},
        {"ns-b", required_argument, NULL, 'b'},
        {"dev", required_argument, NULL, 'd'},
        {"delay-ms", required_argument, NULL, 'D'},
        {"rate-mbit", required_argument, NULL, 'r'},
        {"queue-bytes", required_argument, NULL, 'q'},
        {"overhead", required_argument, NULL, 'o'},
        {"slots", required_argument, NULL, 's'},
        {"max-seconds", required_argument, NULL, 'm'},
        {NULL, 0, NULL, 0},
    };
    const char *ns_a = NULL, *ns_b = NULL, *dev = "wan0";
    double delay_ms = -1, rate_mbit = -1, max_s = 3600;
    long long queue = -1, slots = 32768;
    struct cfg c = {.overhead = 38}; /* preamble 8 + header 14 + FCS 4 + gap 12 */
    struct dir dirs[2];
    struct sigaction sa;
    uint64_t end_ns, early_ns = 0;
    pid_t parent = getppid();
    int opt, i;

    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 'a':
            ns_a = optarg;
            break;
        case 'b':
            ns_b = optarg;
            break;
        case 'd':
            dev = optarg;
            break;
        case 'D':
            delay_ms = num_arg(optarg, 0, 10000);
            break;
        case 'r':
            rate_mbit = num_arg(optarg, 0.001, 100000);
            break;
        case 'q':
            queue = (long long)num_arg(optarg, 1500, 1e9);
            break;
        case 'o':
            c.overhead = (unsigned)num_arg(optarg, 0, 1000);
            break;
        case 's':
            slots = (long long)num_arg(optarg, 16, 1 << 22);
            break;
        case 'm':
            max_s = num_arg(optarg, 0.1, 86400);
            break;
        default:
            usage();
        }
    }
    if (ns_a == NULL || ns_b == NULL || delay_ms < 0 || rate_mbit < 0 || optind != argc)
        usage();
    c.rate_bps = rate_mbit * 1e6;
    c.delay_ns = (uint64_t)(delay_ms * 1e6);
    /* Default queue: one bandwidth-delay product of the round trip, the
     * classic router buffer rule; never below 64 packets. */
    if (queue < 0) {
        queue = (long long)(c.rate_bps / 8 * 2 * delay_ms / 1000);
        if (queue < 64 * 1500)
            queue = 64 * 1500;
    }
    c.queue_bytes = (uint64_t)queue;

    /* Die with the helper that started us, and never outlive max_s. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
        return 1;
    /* Wake-ups within microseconds of the due time, not the default 50 us
     * slack: the RTT must be accurate to well under a millisecond. */
    prctl(PR_SET_TIMERSLACK, 1UL);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    memset(dirs, 0, sizeof(dirs));
    dirs[0].name = "a->b";
    dirs[1].name = "b->a";
    dirs[0].in_fd = dirs[1].out_fd = tun_in_ns(ns_a, dev);
    dirs[1].in_fd = dirs[0].out_fd = tun_in_ns(ns_b, dev);
    for (i = 0; i < 2; i++) {
        dirs[i].nslots = (size_t)slots;
        dirs[i].ring = calloc(dirs[i].nslots, sizeof(struct slot));
        if (dirs[i].ring == NULL)
            die("calloc");
    }
    printf("ready\n");
    fflush(stdout);

    end_ns = now_ns() + (uint64_t)(max_s * 1e9);
    while (!stop_flag) {
        struct pollfd pfd[2] = {{dirs[0].in_fd, POLLIN, 0}, {dirs[1].in_fd, POLLIN, 0}};
        uint64_t now = now_ns(), next = end_ns;
        struct timespec ts;

        if (now >= end_ns)
            break;
        for (i = 0; i < 2; i++) {
            if (dirs[i].count > 0 && dirs[i].ring[dirs[i].head].due_ns < next)
                next = dirs[i].ring[dirs[i].head].due_ns;
        }
        /* Wake-ups from a sleep come late (tens of microseconds on a VM,
         * measured below): aim that much early and deliver what is due by
         * then, so that the mean delivery time is the due time, without
         * spinning. */
        if (next > now + early_ns) {
            uint64_t want = next - early_ns;
            int n;

            ts.tv_sec = (time_t)((want - now) / 1000000000ull);
            ts.tv_nsec = (long)((want - now) % 1000000000ull);
            n = ppoll(pfd, 2, &ts, NULL);
            if (n < 0 && errno != EINTR)
                die("ppoll");
            now = now_ns();
            if (n == 0 && now >= want) {
                uint64_t late = now - want;

                if (late > EARLY_MAX_NS)
                    late = EARLY_MAX_NS;
                /* Moving average over about 8 wake-ups. */
                early_ns = (early_ns * 7 + late) / 8;
            }
        }
        now = now_ns();
        for (i = 0; i < 2; i++)
            deliver_due(&dirs[i], now + early_ns);
        for (i = 0; i < 2; i++)
            read_batch(&dirs[i], &c);
    }

    for (i = 0; i < 2; i++)
        fprintf(stderr,
                "delayline: %s forwarded %llu, dropped: queue %llu, ring %llu, "
                "oversize %llu, write errors %llu\n",
                dirs[i].name, (unsigned long long)dirs[i].fwd,
                (unsigned long long)dirs[i].drop_queue, (unsigned long long)dirs[i].drop_ring,
                (unsigned long long)dirs[i].drop_big, (unsigned long long)dirs[i].write_err);
    return 0;
}
