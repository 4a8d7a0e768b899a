/* Unit tests for lib/child: the helper runner (output of any length, the
 * deadline, a clean signal mask) and the one child setup. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "child.h"
#include "files.h"
#include "kernel.h"

static void test_run_alloc_long_output(void **state)
{
    char *argv[] = {"sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; echo err >&2", NULL};
    char *out, *errout;
    int status;

    (void)state;
    assert_int_equal(child_run_alloc(argv, 30, FILES_MAX_SIZE, &out, &errout, &status), 0);
    assert_int_equal(status, 0);
    assert_int_equal(strlen(out), 300000);
    assert_int_equal(strspn(out, "x"), 300000);
    assert_string_equal(errout, "err\n");
    free(out);
    free(errout);
    /* more than the bound: an error, never half an answer */
    assert_int_equal(child_run_alloc(argv, 30, 100000, &out, NULL, &status), -EFBIG);
}

static void test_run_status_and_fixed_buffers(void **state)
{
    char *argv[] = {"sh", "-c", "printf 'abcdefgh'; printf oops >&2; exit 3", NULL};
    char *missing[] = {"/nonexistent/smbtuned-helper", NULL};
    char out[5], errout[64];
    int status = 0;

    (void)state;
    assert_int_equal(child_run(argv, 30, out, sizeof(out), errout, sizeof(errout), &status), 0);
    assert_int_equal(status, 3);
    /* what does not fit a fixed buffer is dropped */
    assert_string_equal(out, "abcd");
    assert_string_equal(errout, "oops");
    /* a program that cannot be started exits 127 in the child */
    assert_int_equal(child_run(missing, 30, out, sizeof(out), NULL, 0, &status), 0);
    assert_int_equal(status, 127);
}

/* At the deadline the helper is killed and reaped, and says -1. The
 * deadline is far below the helper's own time, so the test does not
 * depend on the machine's speed. */
static void test_run_deadline(void **state)
{
    char *sleeper[] = {"sleep", "60", NULL};
    /* exits at once, but what it left behind holds the output open */
    char *holder[] = {"sh", "-c", "sleep 60 & echo $!", NULL};
    char out[64];
    int status = 0, left;

    (void)state;
    assert_int_equal(child_run(sleeper, 0.2, out, sizeof(out), NULL, 0, &status), 0);
    assert_int_equal(status, -1);
    assert_int_equal(child_run(holder, 2, out, sizeof(out), NULL, 0, &status), 0);
    assert_int_equal(status, -1);
    left = atoi(out);
    assert_true(left > 0);
    kill(left, SIGKILL);
    /* nothing of ours is left to reap */
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

/* A helper that closes its output before it exits is reaped when it
 * exits, not at the deadline. This is the order of a daemonizing helper,
 * and without pidfd_open (valgrind) the exit is found between polls: a
 * poll on no descriptor at all then slept to the deadline. The bound is
 * half the deadline, a hang detector far from the helper's 0.2 s. */
static void test_run_output_closed_first(void **state)
{
    char *argv[] = {"sh", "-c", "exec >&- 2>&-; sleep 0.2; exit 4", NULL};
    char out[16];
    int status = 0;
    double t0 = child_now();

    (void)state;
    assert_int_equal(child_run(argv, 60, out, sizeof(out), NULL, 0, &status), 0);
    assert_int_equal(status, 4);
    assert_true(child_now() - t0 < 30);
}

/* A helper does not outlive smbtuned, even one killed with SIGKILL: the
 * runner's parent dies, PDEATHSIG ends the helper. */
static void test_run_dies_with_parent(void **state)
{
    char dir[] = "/tmp/test_child.XXXXXX", file[64], *text = NULL;
    size_t len;
    pid_t mid, helper;
    int ws;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(file, sizeof(file), "%s/pid", dir);
    mid = fork();
    assert_true(mid >= 0);
    if (mid == 0) {
        char cmd[256];
        char *argv[] = {"sh", "-c", cmd, NULL};
        char out[16];
        int status;

        snprintf(cmd, sizeof(cmd), "echo $$ > %s.tmp && mv %s.tmp %s && exec sleep 60", file, file,
                 file);
        child_run(argv, 120, out, sizeof(out), NULL, 0, &status);
        _exit(0);
    }
    /* A hang fails the test instead of stalling the run. */
    alarm(30);
    while (files_read(file, &text, &len, NULL) < 0)
        usleep(10000);
    helper = atoi(text);
    free(text);
    assert_true(helper > 0);
    kill(mid, SIGKILL);
    assert_int_equal(waitpid(mid, &ws, 0), mid);
    /* Re-parented, it may stay a zombie for a while: that counts as gone. */
    while (kernel_pid_alive(helper))
        usleep(10000);
    alarm(0);
    unlink(file);
    rmdir(dir);
}

/* sd-event blocks the signals it handles; a helper must not inherit that. */
static void test_run_clean_signal_mask(void **state)
{
    char *argv[] = {"sh", "-c", "grep -E '^Sig(Blk|Ign)' /proc/self/status", NULL};
    char out[256];
    sigset_t block, old;
    int status;

    (void)state;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &old);
    signal(SIGHUP, SIG_IGN);
    assert_int_equal(child_run(argv, 30, out, sizeof(out), NULL, 0, &status), 0);
    sigprocmask(SIG_SETMASK, &old, NULL);
    signal(SIGHUP, SIG_DFL);
    assert_int_equal(status, 0);
    assert_string_equal(out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

/* The probe's shape: a private environment, fd 3 kept, 0-1 on /dev/null,
 * every other descriptor closed. */
static void test_setup_fds_and_env(void **state)
{
    char buf[512];
    int res[2], extra[2], ws;
    size_t got = 0;
    ssize_t n;
    pid_t pid;

    (void)state;
    assert_int_equal(pipe(res), 0);
    assert_int_equal(pipe(extra), 0);
    setenv("SMBTUNED_TEST_SECRET", "leak", 1);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct child_spec spec = {.parent = getppid(),
                                  .fd_in = -1,
                                  .fd_out = -1,
                                  .fd_err = res[1],
                                  .fd_extra = extra[1],
                                  .home = "/nonexistent/home"};
        char *argv[] = {"sh", "-c",
                        "echo \"$HOME $PATH ${SMBTUNED_TEST_SECRET:-none}\" >&2; "
                        "ls /proc/self/fd >&2; echo x >&3",
                        NULL};

        if (child_setup(&spec) < 0)
            _exit(1);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(res[1]);
    close(extra[1]);
    unsetenv("SMBTUNED_TEST_SECRET");
    while ((n = read(res[0], buf + got, sizeof(buf) - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = '\0';
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    /* ls's own directory descriptor is the one more it lists */
    assert_string_equal(buf, "/nonexistent/home " CHILD_SAFE_PATH " none\n0\n1\n2\n3\n4\n");
    n = read(extra[0], buf, sizeof(buf));
    assert_int_equal(n, 2);
    close(res[0]);
    close(extra[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_alloc_long_output),
        cmocka_unit_test(test_run_status_and_fixed_buffers),
        cmocka_unit_test(test_run_deadline),
        cmocka_unit_test(test_run_output_closed_first),
        cmocka_unit_test(test_run_clean_signal_mask),
        cmocka_unit_test(test_run_dies_with_parent),
        cmocka_unit_test(test_setup_fds_and_env),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
