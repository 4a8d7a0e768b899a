/* Unit tests for lib/runlock: one cycle runner per state directory. The
 * pid text is pure; the lock is tested on a state directory of the test's
 * own under /tmp: a second open conflicts (in this process too: flock
 * locks belong to the open file description), a holder in another process
 * is named, a dead holder's file is taken over, what smbtuned did not make
 * is refused and never followed, and a child forked the way smbtuned forks
 * its probe and job children does not keep the lock. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "child.h"
#include "runlock.h"

#define NOBODY 65534

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/test_runlock.XXXXXX");
    return mkdtemp(dir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *at(const char *rel)
{
    static char buf[4][PATH_MAX];
    static int i;

    i = (i + 1) % 4;
    snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, rel);
    return buf[i];
}

static void put(const char *rel, const char *text, mode_t mode)
{
    int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC, mode);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(chmod(at(rel), mode), 0);
}

static char *slurp(const char *rel)
{
    static char buf[256];
    int fd = open(at(rel), O_RDONLY);
    ssize_t n;

    assert_true(fd >= 0);
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    assert_true(n >= 0);
    buf[n] = '\0';
    return buf;
}

static const char *our_pid_text(void)
{
    static char buf[RUNLOCK_PID_TEXT];

    snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
    return buf;
}

static void skip_unless_root(void)
{
    if (geteuid() != 0)
        skip();
}

/* ---- the pid text (pure) ---- */

static void test_format_pid(void **state)
{
    char buf[RUNLOCK_PID_TEXT], small[4];

    (void)state;
    assert_int_equal(runlock_format_pid(1234, buf, sizeof(buf)), 5);
    assert_string_equal(buf, "1234\n");
    assert_int_equal(runlock_format_pid(INT_MAX, buf, sizeof(buf)), 11);
    assert_string_equal(buf, "2147483647\n");
    assert_int_equal(runlock_format_pid(0, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(runlock_format_pid(-5, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(runlock_format_pid(1234, small, sizeof(small)), -ENOSPC);
}

static void test_parse_pid(void **state)
{
    char buf[RUNLOCK_PID_TEXT];
    pid_t pid = 0;
    int n;

    (void)state;
    n = runlock_format_pid(4321, buf, sizeof(buf));
    assert_int_equal(runlock_parse_pid(buf, (size_t)n, &pid), 0);
    assert_int_equal(pid, 4321);
    assert_int_equal(runlock_parse_pid("77", 2, &pid), 0);
    assert_int_equal(pid, 77);
    assert_int_equal(runlock_parse_pid("2147483647\n", 11, &pid), 0);
    assert_int_equal(pid, INT_MAX);
}

static void test_parse_pid_refuses_junk(void **state)
{
    static const struct {
        const char *text;
        size_t len;
        int r;
    } bad[] = {
        {"", 0, -EINVAL},
        {"\n", 1, -EINVAL},
        {" 12\n", 4, -EINVAL},
        {"+12\n", 4, -EINVAL},
        {"-12\n", 4, -EINVAL},
        {"12 \n", 4, -EINVAL},
        {"12\n\n", 4, -EINVAL},
        {"12\n34", 5, -EINVAL},
        {"12\00034\n", 6, -EINVAL}, /* \000 then 34 */
        {"0x1f\n", 5, -EINVAL},
        {"pid 12\n", 7, -EINVAL},
        {"0\n", 2, -ERANGE},
        {"2147483648\n", 11, -ERANGE},
        {"123456789012345\n", 16, -ERANGE},
        {"1234567890123456\n", 17, -EINVAL},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pid_t pid = 99;

        if (runlock_parse_pid(bad[i].text, bad[i].len, &pid) != bad[i].r || pid != 99)
            fail_msg("%zu: '%.*s' gave pid %d", i, (int)bad[i].len, bad[i].text, (int)pid);
    }
}

/* ---- the lock ---- */

static void test_take_makes_a_private_file_with_our_pid(void **state)
{
    struct err e = {{0}};
    struct stat st;
    pid_t holder = -1;
    int fd = runlock_take(dir, &holder, &e), flags;

    (void)state;
    assert_true(fd >= 3);
    assert_int_equal(holder, 0);
    flags = fcntl(fd, F_GETFD);
    assert_true(flags >= 0 && (flags & FD_CLOEXEC));
    assert_int_equal(lstat(at(RUNLOCK_NAME), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_uid, geteuid());
    assert_string_equal(slurp(RUNLOCK_NAME), our_pid_text());
    close(fd);
}

/* flock locks belong to the open file description: a second open in the
 * same process is refused as one in another process would be. */
static void test_second_open_in_one_process_is_refused(void **state)
{
    struct err e = {{0}};
    pid_t holder = 0;
    int fd = runlock_take(dir, &holder, &e), fd2;

    (void)state;
    assert_true(fd >= 0);
    fd2 = runlock_take(dir, &holder, &e);
    assert_int_equal(fd2, -EBUSY);
    assert_int_equal(holder, getpid());
    assert_non_null(strstr(e.msg, "run.lock is held by pid"));
    /* the refused runner wrote nothing: the holder's text stays */
    assert_string_equal(slurp(RUNLOCK_NAME), our_pid_text());
    close(fd);
    /* gone with its descriptor: the next one takes it */
    fd2 = runlock_take(dir, &holder, &e);
    assert_true(fd2 >= 0);
    close(fd2);
}

/* A holder in another process is named by its pid; its death frees the
 * lock without anyone removing the file. */
static void test_holder_in_another_process(void **state)
{
    struct err e = {{0}};
    int p[2], fd, ws;
    pid_t pid, holder = 0;
    char c;

    (void)state;
    assert_int_equal(pipe(p), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct err ce;
        pid_t h;

        close(p[0]);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || runlock_take(dir, &h, &ce) < 0)
            _exit(1);
        if (write(p[1], "x", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    assert_int_equal(read(p[0], &c, 1), 1);
    close(p[0]);
    fd = runlock_take(dir, &holder, &e);
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_int_equal(fd, -EBUSY);
    assert_int_equal(holder, pid);
    /* the dead holder's pid is still in the file, and no lock on it */
    fd = runlock_take(dir, &holder, &e);
    assert_true(fd >= 0);
    assert_string_equal(slurp(RUNLOCK_NAME), our_pid_text());
    close(fd);
}

/* A file left by a runner that died: a dead pid, no lock. Taken over;
 * its text becomes our pid, exactly (longer junk is cut). */
static void test_stale_file_is_taken_over(void **state)
{
    struct err e = {{0}};
    pid_t dead, holder = -1;
    char text[64];
    int fd;

    (void)state;
    dead = fork();
    assert_true(dead >= 0);
    if (dead == 0)
        _exit(0);
    assert_int_equal(waitpid(dead, NULL, 0), dead);
    assert_int_equal(kill(dead, 0), -1);
    snprintf(text, sizeof(text), "%ld\n", (long)dead);
    put(RUNLOCK_NAME, text, 0600);
    fd = runlock_take(dir, &holder, &e);
    assert_true(fd >= 0);
    assert_int_equal(holder, 0);
    assert_string_equal(slurp(RUNLOCK_NAME), our_pid_text());
    close(fd);

    /* junk in it (not a pid) is no reason to refuse either */
    put(RUNLOCK_NAME, "12345678901234567890 and more\n", 0600);
    fd = runlock_take(dir, &holder, &e);
    assert_true(fd >= 0);
    assert_string_equal(slurp(RUNLOCK_NAME), our_pid_text());
    close(fd);
}

/* The lock is held by an open file that has not written its pid yet (or
 * whose text is damaged): refused all the same, with no pid to name. */
static void test_held_without_a_pid(void **state)
{
    struct err e = {{0}};
    pid_t holder = -1;
    int fd, r;

    (void)state;
    put(RUNLOCK_NAME, "", 0600);
    fd = open(at(RUNLOCK_NAME), O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    r = runlock_take(dir, &holder, &e);
    assert_int_equal(r, -EBUSY);
    assert_int_equal(holder, 0);
    assert_non_null(strstr(e.msg, "held by another process"));
    close(fd);
}

/* A symlink at run.lock, to a file or to nothing: refused, not followed,
 * nothing made or changed at its target, the link left as it is. */
static void test_symlink_is_refused_not_followed(void **state)
{
    struct err e = {{0}};
    struct stat st;
    pid_t holder;
    int fd;

    (void)state;
    put("target", "precious\n", 0600);
    assert_int_equal(symlink(at("target"), at(RUNLOCK_NAME)), 0);
    fd = runlock_take(dir, &holder, &e);
    assert_int_equal(fd, -ELOOP);
    assert_non_null(strstr(e.msg, "symlink"));
    assert_string_equal(slurp("target"), "precious\n");
    /* and its target is not locked either */
    fd = open(at("target"), O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    close(fd);
    assert_int_equal(lstat(at(RUNLOCK_NAME), &st), 0);
    assert_true(S_ISLNK(st.st_mode));

    /* a dangling one: O_CREAT must not create its target */
    assert_int_equal(unlink(at(RUNLOCK_NAME)), 0);
    assert_int_equal(symlink(at("made-through-the-link"), at(RUNLOCK_NAME)), 0);
    assert_int_equal(runlock_take(dir, &holder, &e), -ELOOP);
    assert_int_equal(lstat(at("made-through-the-link"), &st), -1);
    assert_int_equal(errno, ENOENT);
}

/* What smbtuned never makes there is refused and left as it is: a
 * directory, a FIFO (without hanging), a file others can write, a second
 * name of another file (the truncate would empty that file). */
static void test_not_ours_is_refused(void **state)
{
    struct err e = {{0}};
    struct stat st;
    pid_t holder;

    (void)state;
    assert_int_equal(mkdir(at(RUNLOCK_NAME), 0700), 0);
    assert_int_equal(runlock_take(dir, &holder, &e), -EISDIR);
    assert_int_equal(rmdir(at(RUNLOCK_NAME)), 0);

    assert_int_equal(mkfifo(at(RUNLOCK_NAME), 0600), 0);
    assert_int_equal(runlock_take(dir, &holder, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "not a regular file"));
    assert_int_equal(lstat(at(RUNLOCK_NAME), &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(unlink(at(RUNLOCK_NAME)), 0);

    put(RUNLOCK_NAME, "1\n", 0666);
    assert_int_equal(runlock_take(dir, &holder, &e), -EPERM);
    assert_non_null(strstr(e.msg, "mode 0666"));
    assert_string_equal(slurp(RUNLOCK_NAME), "1\n");
    assert_int_equal(unlink(at(RUNLOCK_NAME)), 0);

    put("other", "someone's bytes\n", 0600);
    assert_int_equal(link(at("other"), at(RUNLOCK_NAME)), 0);
    assert_int_equal(runlock_take(dir, &holder, &e), -EPERM);
    assert_non_null(strstr(e.msg, "hard links"));
    assert_string_equal(slurp("other"), "someone's bytes\n");
}

static void test_someone_elses_file_is_refused(void **state)
{
    struct err e = {{0}};
    pid_t holder;

    (void)state;
    skip_unless_root();
    put(RUNLOCK_NAME, "1\n", 0600);
    assert_int_equal(chown(at(RUNLOCK_NAME), NOBODY, NOBODY), 0);
    assert_int_equal(runlock_take(dir, &holder, &e), -EPERM);
    assert_non_null(strstr(e.msg, "owned by uid 65534"));
    assert_string_equal(slurp(RUNLOCK_NAME), "1\n");
}

/* Started with stdin closed, the lock must not become fd 0 (a child given
 * that stream would hold it, and it could be read as one). */
static void test_never_a_standard_stream(void **state)
{
    struct err e = {{0}};
    pid_t holder;
    int saved = fcntl(0, F_DUPFD_CLOEXEC, 10), fd;

    (void)state;
    assert_true(saved >= 0);
    assert_int_equal(close(0), 0);
    fd = runlock_take(dir, &holder, &e);
    assert_int_equal(fcntl(0, F_GETFD), -1);
    assert_int_equal(dup2(saved, 0), 0);
    close(saved);
    assert_true(fd >= 3);
    close(fd);
}

/* Why children matter: one forked with the descriptor keeps the lock after
 * the parent lets go. smbtuned's children without exec (the probe child,
 * jobs, the credentials check) all run child_setup first, which closes
 * every descriptor above the ones it hands over: then they do not. */
static pid_t fork_child(bool setup_first, int *ready)
{
    int p[2];
    pid_t parent = getpid(), pid;
    char c;

    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct child_spec spec = {.parent = parent,
                                  .new_session = true,
                                  .fd_in = -1,
                                  .fd_out = CHILD_KEEP,
                                  .fd_err = CHILD_KEEP,
                                  .fd_extra = p[1]};
        int w = setup_first ? 3 : p[1];

        close(p[0]);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
            _exit(127);
        if (setup_first && child_setup(&spec) < 0)
            _exit(127);
        if (write(w, "x", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    assert_int_equal(read(p[0], &c, 1), 1);
    *ready = p[0];
    return pid;
}

static void end_child(pid_t pid, int ready)
{
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    close(ready);
}

/* The lock at a number above those child_setup hands over (0-3), where
 * only its closing of the rest reaches it. */
static int take_high(void)
{
    struct err e = {{0}};
    pid_t holder;
    int fd = runlock_take(dir, &holder, &e), high;

    assert_true(fd >= 0);
    high = fcntl(fd, F_DUPFD_CLOEXEC, 20);
    assert_true(high >= 20);
    close(fd);
    return high;
}

static void test_forked_children(void **state)
{
    struct err e = {{0}};
    pid_t holder, pid;
    int fd, fd2, ready;

    (void)state;
    /* without child_setup: the child's copy holds the lock */
    fd = take_high();
    pid = fork_child(false, &ready);
    close(fd);
    fd2 = runlock_take(dir, &holder, &e);
    end_child(pid, ready);
    assert_int_equal(fd2, -EBUSY);

    /* with it, as smbtuned's forks do: the lock goes with our descriptor */
    fd = take_high();
    pid = fork_child(true, &ready);
    close(fd);
    fd2 = runlock_take(dir, &holder, &e);
    end_child(pid, ready);
    if (fd2 < 0)
        fail_msg("a child after child_setup keeps the lock: %s", e.msg);
    close(fd2);
}

static void test_locks_line(void **state)
{
    dev_t dev = makedev(0x103, 0x1f);
    pid_t pid = -5;

    (void)state;
    assert_true(runlock_locks_line("1: FLOCK  ADVISORY  WRITE 4321 103:1f:123456 0 EOF\n", dev,
                                   123456, 0, &pid));
    assert_int_equal(pid, 4321);
    /* another inode, another device, a byte-range lock, a waiter */
    assert_false(runlock_locks_line("1: FLOCK  ADVISORY  WRITE 4321 103:1f:123457 0 EOF\n", dev,
                                    123456, 0, &pid));
    assert_false(runlock_locks_line("1: FLOCK  ADVISORY  WRITE 4321 08:01:123456 0 EOF\n", dev,
                                    123456, 0, &pid));
    assert_false(runlock_locks_line("2: POSIX  ADVISORY  WRITE 4321 103:1f:123456 0 EOF\n", dev,
                                    123456, 0, &pid));
    assert_false(runlock_locks_line("1: -> FLOCK  ADVISORY  WRITE 99 103:1f:123456 0 EOF\n", dev,
                                    123456, 0, &pid));
    /* a holder the kernel cannot name here: no holder to report */
    assert_false(runlock_locks_line("7: FLOCK  ADVISORY  WRITE -1 103:1f:123456 0 EOF\n", dev,
                                    123456, 0, &pid));
    /* btrfs: the file system's device in the line, a subvolume's in stat:
     * the pid run.lock names holds it; another pid does not */
    pid = -5;
    assert_true(runlock_locks_line("1: FLOCK  ADVISORY  WRITE 4321 00:2a:123456 0 EOF\n", dev,
                                   123456, 4321, &pid));
    assert_int_equal(pid, 4321);
    assert_false(runlock_locks_line("1: FLOCK  ADVISORY  WRITE 4322 00:2a:123456 0 EOF\n", dev,
                                    123456, 4321, &pid));
    assert_false(runlock_locks_line("1: FLOCK  ADVISORY  WRITE 4321 00:2a:123457 0 EOF\n", dev,
                                    123456, 4321, &pid));
    assert_false(runlock_locks_line("", dev, 123456, 0, &pid));
    assert_false(runlock_locks_line("1: FLOCK", dev, 123456, 0, &pid));
    assert_false(runlock_locks_line("junk 103:1f:123456\n", dev, 123456, 0, &pid));
}

/* The effective uid of a process's status, which the holder of a line of
 * another device must run as (run.lock's owner). */
static void test_status_euid(void **state)
{
    uid_t u = 77;
    char own[64];

    (void)state;
    assert_true(runlock_status_euid("Name:\tsmbtuned\nUmask:\t0022\nState:\tS (sleeping)\n"
                                    "Uid:\t1000\t0\t0\t0\nGid:\t0\t0\t0\t0\n",
                                    &u));
    assert_int_equal(u, 0);
    assert_true(runlock_status_euid("Uid:\t0\t65534\t65534\t65534\n", &u));
    assert_int_equal(u, 65534);
    u = 77;
    assert_false(runlock_status_euid("Name:\tx\nGid:\t0\t0\t0\t0\n", &u));
    assert_false(runlock_status_euid("Uid:\t1000\n", &u));
    assert_false(runlock_status_euid("Uid:\tx\ty\n", &u));
    assert_false(runlock_status_euid("", &u));
    /* "Uid:" only at a line's start */
    assert_false(runlock_status_euid("Name:\tUid:\t1 2\n", &u));
    assert_int_equal(u, 77);
    /* this process's own, as the kernel writes it */
    snprintf(own, sizeof(own), "Uid:\t%u\t%u\t%u\t%u\n", getuid(), geteuid(), geteuid(), geteuid());
    assert_true(runlock_status_euid(own, &u));
    assert_int_equal(u, geteuid());
}

/* The holder as the kernel knows it, without taking the lock. */
static void test_holder(void **state)
{
    struct err e = {{0}};
    pid_t holder, pid = -5;
    int fd;

    (void)state;
    assert_int_equal(runlock_holder(dir, &pid, &e), 0); /* no run.lock */
    fd = runlock_take(dir, &holder, &e);
    assert_true(fd >= 0);
    assert_int_equal(runlock_holder(dir, &pid, &e), 1);
    assert_int_equal(pid, getpid());
    close(fd);
    assert_int_equal(runlock_holder(dir, &pid, &e), 0); /* the file stays, unlocked */
    /* and asking took nothing: a run still takes it */
    fd = runlock_take(dir, &holder, &e);
    assert_true(fd >= 0);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_pid),
        cmocka_unit_test(test_parse_pid),
        cmocka_unit_test(test_parse_pid_refuses_junk),
        cmocka_unit_test_setup_teardown(test_take_makes_a_private_file_with_our_pid, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_second_open_in_one_process_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_holder_in_another_process, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_file_is_taken_over, setup, teardown),
        cmocka_unit_test_setup_teardown(test_held_without_a_pid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_is_refused_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_ours_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_someone_elses_file_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_a_standard_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forked_children, setup, teardown),
        cmocka_unit_test(test_locks_line),
        cmocka_unit_test(test_status_euid),
        cmocka_unit_test_setup_teardown(test_holder, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
