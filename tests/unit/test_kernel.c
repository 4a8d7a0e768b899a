/* Unit tests for lib/kernel: /proc/PID/stat, whether a process is alive,
 * and the listener of a port as sock_diag and /proc/PID/fd see it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proc_parse),
        cmocka_unit_test(test_self),
        cmocka_unit_test(test_child_gone),
        cmocka_unit_test(test_loopback_listener),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
