/* Unit tests for lib/kernel: /proc/PID/stat, whether a process is alive,
 * the listener of a port as sock_diag and /proc/PID/fd see it, and the
 * test connection to it (in network namespaces of their own). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cmocka.h>

#include "kernel.h"

static void test_proc_parse(void **state)
{
    struct kernel_proc p;
    /* Fields 1-22 of a real line; the name may hold blanks and ')'. */
    const char *line = "4242 (smbd) x) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 "
                       "987654321 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17\n";

    (void)state;
    assert_int_equal(kernel_proc_parse(line, &p), 0);
    assert_int_equal(p.state, 'S');
    assert_int_equal(p.pgrp, 4242);
    assert_int_equal(p.session, 4242);
    assert_true(p.start_time == 987654321ULL);
    assert_int_equal(kernel_proc_parse("4242 (smbd) S 1 4242", &p), -EINVAL);
    assert_int_equal(kernel_proc_parse("no parenthesis", &p), -EINVAL);
    assert_int_equal(kernel_proc_parse("", &p), -EINVAL);
}

static void test_self(void **state)
{
    struct kernel_proc p;
    unsigned long long start;
    char comm[64];

    (void)state;
    assert_int_equal(kernel_proc_read(getpid(), &p), 0);
    assert_int_equal(p.state, 'R');
    assert_int_equal(p.pgrp, getpgrp());
    assert_int_equal(kernel_proc_start(getpid(), &start), 0);
    assert_true(start == p.start_time);
    assert_true(kernel_pid_alive(getpid()));
    assert_true(kernel_pid_is(getpid(), start));
    assert_false(kernel_pid_is(getpid(), start + 1));
    assert_true(kernel_pgrp_alive(getpgrp()));
    assert_int_equal(kernel_proc_comm(getpid(), comm, sizeof(comm)), 0);
    /* what the kernel says, read without kernel.c (under valgrind the
     * name is valgrind's, not test_kernel) */
    {
        char want[64] = "";
        FILE *f = fopen("/proc/self/comm", "r");

        assert_non_null(f);
        assert_non_null(fgets(want, sizeof(want), f));
        fclose(f);
        want[strcspn(want, "\n")] = '\0';
        assert_true(want[0] != '\0');
        assert_string_equal(comm, want);
    }
    assert_false(kernel_pid_alive(0));
    assert_false(kernel_pid_alive(-1));
}

/* A zombie is gone; a reaped child is gone. */
static void test_child_gone(void **state)
{
    unsigned long long start;
    struct kernel_proc p;
    int fds[2], ws;
    char c;
    pid_t pid;

    (void)state;
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        /* a group of its own, so that the group test is about it alone */
        setpgid(0, 0);
        if (write(fds[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], &c, 1), 1);
    assert_true(kernel_pid_alive(pid));
    assert_int_equal(kernel_proc_start(pid, &start), 0);
    assert_true(kernel_pid_is(pid, start));
    assert_true(kernel_pgrp_alive(pid));
    kill(pid, SIGKILL);
    /* a zombie until reaped: read until the pipe says it died */
    assert_int_equal(read(fds[0], &c, 1), 0);
    close(fds[0]);
    do
        assert_int_equal(kernel_proc_read(pid, &p), 0);
    while (p.state != 'Z' && p.state != 'X');
    assert_false(kernel_pid_alive(pid));
    assert_false(kernel_pid_is(pid, start));
    assert_false(kernel_pgrp_alive(pid));
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_false(kernel_pid_alive(pid));
    assert_int_equal(kernel_proc_read(pid, &p), -ENOENT);
}

/* A group is "only" what its live members all are: a session and a name. */
static void test_pgrp_only(void **state)
{
    static const char *const smbd[] = {"smbd", NULL};
    int fds[2], ws;
    char c;
    pid_t pid;

    (void)state;
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        if (setsid() < 0 || prctl(PR_SET_NAME, "smbd[test]") < 0 || write(fds[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], &c, 1), 1);
    assert_true(kernel_pgrp_only(pid, pid, smbd));
    assert_true(kernel_pgrp_only(pid, pid, (const char *const[]){"nmbd", "smbd[", NULL}));
    assert_false(kernel_pgrp_only(pid, pid, (const char *const[]){"nmbd", NULL}));
    assert_false(kernel_pgrp_only(pid, getsid(0), smbd));
    /* our own group holds this test, not an smbd */
    assert_false(kernel_pgrp_only(getpgrp(), getsid(0), smbd));
    kill(pid, SIGKILL);
    assert_int_equal(read(fds[0], &c, 1), 0);
    close(fds[0]);
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_false(kernel_pgrp_only(pid, pid, smbd));
}

static void test_loopback_listener(void **state)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    unsigned long inode = 0;
    int fd, port;

    (void)state;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    port = ntohs(a.sin_port);
    /* bound but not listening: nothing listens there yet */
    assert_int_equal(kernel_loopback_listener(port, &inode), -ENOENT);
    assert_int_equal(listen(fd, 1), 0);
    assert_int_equal(kernel_loopback_listener(port, &inode), 0);
    assert_true(inode > 0);
    assert_true(kernel_pid_has_socket(getpid(), inode));
    assert_false(kernel_pid_has_socket(getppid(), inode));
    close(fd);
    assert_int_equal(kernel_loopback_listener(port, &inode), -ENOENT);
}

/* The body of test_link_local_listener: 0 when the test connection
 * reached the listener, else the step that failed. */
static int link_local_child(void)
{
    struct sockaddr_in6 a = {.sin6_family = AF_INET6};
    socklen_t alen = sizeof(a);
    long rcv, snd, accepted;
    int size = 8192;
    struct err e;
    int fd;

    /* lo holds a link-local address as well as any device, in a
     * namespace no one else uses */
    if (system("ip link set lo up && ip addr add fe80::1/64 dev lo nodad") != 0)
        return 2;
    a.sin6_scope_id = if_nametoindex("lo");
    if (a.sin6_scope_id == 0 || inet_pton(AF_INET6, "fe80::1", &a.sin6_addr) != 1)
        return 3;
    fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    /* smbd's tuning guides' size: kept by what the listener accepts */
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) < 0)
        return 4;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 8) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) < 0)
        return 5;
    /* The address takes a moment to be reachable on a busy machine
     * (ENETUNREACH once in a parallel run): wait for a connection of the
     * test's own before judging kernel.c's. */
    for (int i = 0;; i++) {
        int c = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool up = c >= 0 && connect(c, (struct sockaddr *)&a, sizeof(a)) == 0;

        if (c >= 0)
            close(c);
        if (up)
            break;
        if (i == 200)
            return 9;
        usleep(10000);
    }
    if (kernel_listener_buffers(ntohs(a.sin6_port), &rcv, &snd, &e) < 0)
        return 6;
    if (kernel_accepted_sndbuf(ntohs(a.sin6_port), &accepted, &e) < 0) {
        fprintf(stderr, "kernel_accepted_sndbuf: %s\n", e.msg);
        return 7;
    }
    /* the explicit size stays as the listener had it */
    if (accepted != snd)
        return 8;
    close(fd);
    return 0;
}

/* Run body in a child of its own network namespace; its exit status, 77
 * (skipped) when there is no namespace or no ip(8) to set it up. */
static int in_netns(int (*body)(void))
{
    pid_t pid;
    int ws;

    pid = fork();
    assert_true(pid >= 0);
    /* skipped without a namespace of its own, or without ip(8) to set it
     * up (a build without iproute2, which only the tests need) */
    if (pid == 0)
        _exit(unshare(CLONE_NEWNET) < 0 || system("command -v ip >/dev/null") != 0 ? 77 : body());
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws));
    if (WEXITSTATUS(ws) == 77)
        skip();
    return WEXITSTATUS(ws);
}

/* A listener on an IPv6 link-local address (smbd with `interfaces` naming
 * one): the test connection needs the address's device. */
static void test_link_local_listener(void **state)
{
    (void)state;
    assert_int_equal(in_netns(link_local_child), 0);
}

/* The body of test_listener_of_another_user: 0 when a listener of
 * nobody's on smbd's port is not taken for smbd's, else the step that
 * failed. */
static int foreign_listener_child(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(4450)};
    int p[2], fd, nobody_size = 16384, root_size = 65536, want;
    socklen_t len = sizeof(want);
    long rcv, snd;
    struct err e = {{0}};
    pid_t pid;
    char c;

    if (system("ip link set lo up") != 0 || pipe(p) < 0)
        return 2;
    /* nobody's listener on 127.0.0.1:4450 */
    pid = fork();
    if (pid < 0)
        return 3;
    if (pid == 0) {
        /* a socket is its creator's: made after the setuid */
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (setgid(65534) < 0 || setuid(65534) < 0 ||
            (fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &nobody_size, sizeof(nobody_size)) < 0 ||
            bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1) < 0)
            _exit(1);
        (void)!write(p[1], "x", 1);
        pause();
        _exit(0);
    }
    close(p[1]);
    if (read(p[0], &c, 1) != 1) {
        waitpid(pid, NULL, 0);
        return 4;
    }
    if (kernel_listener_buffers(4450, &rcv, &snd, &e) != -ENOENT ||
        strstr(e.msg, "the listener there is uid 65534's, not smbd's") == NULL) {
        fprintf(stderr, "nobody's listener: %s\n", e.msg);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 5;
    }
    /* root's beside it, on 127.0.0.2: root's is the one read */
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &root_size, sizeof(root_size)) < 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, &len) < 0 ||
        kernel_listener_buffers(4450, &rcv, &snd, &e) < 0 || rcv != want) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 6;
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(fd);
    return 0;
}

/* smbd listens as root; another user's listener on its port (possible
 * above 1023, where smbd then could not bind) is not read as smbd's. */
static void test_listener_of_another_user(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    assert_int_equal(in_netns(foreign_listener_child), 0);
}

#define OTHERS 16

/* The body of test_other_clients_on_our_port: 0 when the test connection
 * read its own server side, else the step that failed. */
static int other_clients_child(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(4450)};
    int lfd, one = 1, explicit = 8192, other = 65536, fds[2 * OTHERS];
    long rcv, snd, accepted;
    struct err e;
    FILE *f;

    if (system("ip link set lo up") != 0)
        return 2;
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_SNDBUF, &explicit, sizeof(explicit)) < 0 ||
        bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 2 * OTHERS) < 0)
        return 3;
    /* One local port for every connection of this namespace: the test
     * connection gets the port the other clients have. */
    f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "w");
    if (f == NULL || fprintf(f, "40000 40000\n") < 0 || fclose(f) != 0)
        return 4;
    /* Clients of the listener from 127.0.0.2 and up, on that port, whose
     * server sides hold another send buffer than the listener's. */
    for (int i = 0; i < OTHERS; i++) {
        struct sockaddr_in from = {.sin_family = AF_INET};
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(4450)};

        from.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 2 + (unsigned)i);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fds[2 * i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        /* the port is chosen at connect(), where a port shared by other
         * addresses is allowed */
        if (fds[2 * i] < 0 ||
            setsockopt(fds[2 * i], IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one)) < 0 ||
            bind(fds[2 * i], (struct sockaddr *)&from, sizeof(from)) < 0 ||
            connect(fds[2 * i], (struct sockaddr *)&to, sizeof(to)) < 0)
            return 5;
        fds[2 * i + 1] = accept(lfd, NULL, NULL);
        if (fds[2 * i + 1] < 0 ||
            setsockopt(fds[2 * i + 1], SOL_SOCKET, SO_SNDBUF, &other, sizeof(other)) < 0)
            return 6;
    }
    if (kernel_listener_buffers(4450, &rcv, &snd, &e) < 0)
        return 7;
    if (kernel_accepted_sndbuf(4450, &accepted, &e) < 0) {
        fprintf(stderr, "kernel_accepted_sndbuf: %s\n", e.msg);
        return 8;
    }
    if (accepted != snd) {
        fprintf(stderr, "read %ld, the listener has %ld\n", accepted, snd);
        return 9;
    }
    return 0;
}

/* Other clients of smbd whose local port is the test connection's, from
 * other addresses: the test connection's server side is told from theirs
 * by the address too. */
static void test_other_clients_on_our_port(void **state)
{
    (void)state;
    assert_int_equal(in_netns(other_clients_child), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proc_parse),
        cmocka_unit_test(test_self),
        cmocka_unit_test(test_child_gone),
        cmocka_unit_test(test_pgrp_only),
        cmocka_unit_test(test_loopback_listener),
        cmocka_unit_test(test_link_local_listener),
        cmocka_unit_test(test_other_clients_on_our_port),
        cmocka_unit_test(test_listener_of_another_user),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
