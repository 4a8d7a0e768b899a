/* Unit tests for lib/journal: the three outputs (a pipe, a terminal, the
 * journal), which one JOURNAL_STREAM selects, lines of any length, and
 * LOG_DEBUG only when asked. Each case logs in a forked child whose stderr
 * is the pipe, pty or fake journal under test; the parent reads what came
 * out and checks it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pty.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "child.h"
#include "journal.h"

#define LONG_LEN 200000 /* far beyond any fixed buffer, and a pipe's 64 KiB */

typedef void (*logger)(void);

/* Everything fd returns until EOF (or EIO: a pty whose other side closed). */
static char *read_all(int fd)
{
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);

    assert_non_null(buf);
    for (;;) {
        ssize_t n;

        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return buf;
}

static void wait_ok(pid_t pid)
{
    int status;

    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Runs log in a child whose stderr is a pipe: what it wrote. When
 * stream_env is not NULL, JOURNAL_STREAM is set to it ("PIPE" for the
 * pipe's own dev:ino, "PIPE+1" for its device and another inode). */
static char *capture_pipe(logger log, const char *stream_env, enum journal_output *out)
{
    int p[2], q[2];
    char *text;
    pid_t pid;

    assert_int_equal(pipe(p), 0);
    assert_int_equal(pipe(q), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        enum journal_output o;
        struct stat st;
        char env[64];

        dup2(p[1], STDERR_FILENO);
        close(p[0]);
        close(p[1]);
        close(q[0]);
        unsetenv("JOURNAL_STREAM");
        if (stream_env != NULL && strncmp(stream_env, "PIPE", 4) == 0) {
            /* "PIPE+1": the pipe's device, another inode */
            fstat(STDERR_FILENO, &st);
            snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
                     (unsigned long long)st.st_ino + (stream_env[4] == '+'));
            setenv("JOURNAL_STREAM", env, 1);
        } else if (stream_env != NULL) {
            setenv("JOURNAL_STREAM", stream_env, 1);
        }
        o = journal_init();
        if (write(q[1], &o, sizeof(o)) != sizeof(o))
            _exit(1);
        log();
        _exit(0);
    }
    close(p[1]);
    close(q[1]);
    text = read_all(p[0]);
    assert_int_equal(read(q[0], out, sizeof(*out)), sizeof(*out));
    close(p[0]);
    close(q[0]);
    wait_ok(pid);
    return text;
}

/* Runs log in a child whose stderr is a pty: what the terminal showed,
 * with the terminal's \r taken out. */
static char *capture_pty(logger log, enum journal_output *out)
{
    int master, slave, q[2];
    char *text, *r, *w;
    pid_t pid;

    assert_int_equal(openpty(&master, &slave, NULL, NULL, NULL), 0);
    assert_int_equal(pipe(q), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        enum journal_output o;

        dup2(slave, STDERR_FILENO);
        close(slave);
        close(master);
        close(q[0]);
        unsetenv("JOURNAL_STREAM");
        o = journal_init();
        if (write(q[1], &o, sizeof(o)) != sizeof(o))
            _exit(1);
        log();
        _exit(0);
    }
    close(slave);
    close(q[1]);
    text = read_all(master);
    assert_int_equal(read(q[0], out, sizeof(*out)), sizeof(*out));
    close(master);
    close(q[0]);
    wait_ok(pid);
    for (r = w = text; *r != '\0'; r++)
        if (*r != '\r')
            *w++ = *r;
    *w = '\0';
    return text;
}

static void log_levels(void)
{
    journal_log(LOG_INFO, "cycle %d", 1);
    journal_log(LOG_WARNING, "kernel caps SO_RCVBUF at %d", 212992);
    journal_log(LOG_ERR, "probe failed");
    journal_log(LOG_DEBUG, "hidden detail");
    journal_log(LOG_NOTICE, "two\nlines");
}

static void log_debug_on(void)
{
    journal_set_debug(true);
    journal_log(LOG_DEBUG, "detail %s", "shown");
    journal_set_debug(false);
    journal_log(LOG_DEBUG, "detail hidden again");
}

static void log_long(void)
{
    char *big = malloc(LONG_LEN + 1);

    memset(big, 'v', LONG_LEN);
    big[LONG_LEN] = '\0';
    journal_log(LOG_WARNING, "long %s end", big);
    free(big);
}

static void log_event(void)
{
    const char *fields[] = {"SMBTUNED_RCVBUF=262144", "SMBTUNED_SNDBUF=auto", NULL};

    journal_event(JOURNAL_ID_COMMIT, LOG_NOTICE, fields, "socket options: %s -> %s", "A", "B");
}

static void test_pipe_prefixes(void **state)
{
    enum journal_output out;
    char *text;

    (void)state;
    text = capture_pipe(log_levels, NULL, &out);
    assert_int_equal(out, JOURNAL_PREFIX);
    assert_string_equal(text, "<6>cycle 1\n"
                              "<4>kernel caps SO_RCVBUF at 212992\n"
                              "<3>probe failed\n"
                              "<5>two lines\n");
    free(text);
    /* An event outside the journal is its message, without the fields. */
    text = capture_pipe(log_event, NULL, &out);
    assert_string_equal(text, "<5>socket options: A -> B\n");
    free(text);
}

static void test_terminal_plain(void **state)
{
    enum journal_output out;
    char *text;

    (void)state;
    text = capture_pty(log_levels, &out);
    assert_int_equal(out, JOURNAL_TERMINAL);
    assert_string_equal(text, "cycle 1\n"
                              "warning: kernel caps SO_RCVBUF at 212992\n"
                              "error: probe failed\n"
                              "two lines\n");
    free(text);
    text = capture_pty(log_debug_on, &out);
    assert_string_equal(text, "debug: detail shown\n");
    free(text);
}

static void test_debug_only_when_asked(void **state)
{
    enum journal_output out;
    char *text;

    (void)state;
    text = capture_pipe(log_debug_on, NULL, &out);
    assert_string_equal(text, "<7>detail shown\n");
    free(text);
}

static void check_long(const char *text, const char *prefix)
{
    size_t pl = strlen(prefix);

    assert_int_equal(strlen(text), pl + 5 + LONG_LEN + 5);
    assert_memory_equal(text, prefix, pl);
    assert_memory_equal(text + pl, "long ", 5);
    assert_int_equal(strspn(text + pl + 5, "v"), LONG_LEN);
    assert_string_equal(text + pl + 5 + LONG_LEN, " end\n");
}

static void test_long_lines_whole(void **state)
{
    enum journal_output out;
    char *text;

    (void)state;
    text = capture_pipe(log_long, NULL, &out);
    check_long(text, "<4>");
    free(text);
    text = capture_pty(log_long, &out);
    check_long(text, "warning: ");
    free(text);
}

/* JOURNAL_STREAM inherited from a service but naming another stream (or
 * garbage) is not the journal: stderr gets lines. */
static void test_foreign_journal_stream(void **state)
{
    const char *envs[] = {
        "1:1", "0:0", "", ":", "12", "abc:def", "-1:5", "5:-1", "99999999999999999999999:1"};
    enum journal_output out;
    char *text;

    (void)state;
    text = capture_pipe(log_event, "PIPE+1", &out);
    assert_int_equal(out, JOURNAL_PREFIX);
    free(text);
    for (size_t i = 0; i < sizeof(envs) / sizeof(envs[0]); i++) {
        text = capture_pipe(log_event, envs[i], &out);
        assert_int_equal(out, JOURNAL_PREFIX);
        assert_string_equal(text, "<5>socket options: A -> B\n");
        free(text);
    }
}

/* The child's end of the native case: in a mount namespace of its own, a
 * tmpfs over /run/systemd holds, when listen, a datagram socket where
 * sd_journal_sendv() sends (journal/socket); the datagram it gets goes to
 * out_fd. Without it journald is gone. JOURNAL_STREAM names stderr, or
 * with ino_delta another inode of its device. Exit 77 when namespaces are not
 * allowed here. */
static int fake_socket(bool listen, int ino_delta)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    char env[64];
    struct stat st;
    int s;

    if (unshare(CLONE_NEWNS) < 0)
        _exit(77);
    if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("tmpfs", "/run/systemd", "tmpfs", 0, "mode=0755") < 0)
        _exit(77);
    if (mkdir("/run/systemd/journal", 0755) < 0)
        _exit(2);
    s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    snprintf(a.sun_path, sizeof(a.sun_path), "/run/systemd/journal/socket");
    if (s < 0 || (listen && bind(s, (struct sockaddr *)&a, sizeof(a)) < 0))
        _exit(3);
    fstat(STDERR_FILENO, &st);
    snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino + (unsigned long long)ino_delta);
    setenv("JOURNAL_STREAM", env, 1);
    if (journal_init() != (listen && ino_delta == 0 ? JOURNAL_NATIVE : JOURNAL_PREFIX))
        _exit(4);
    return s;
}

static void fake_journald(int out_fd, void (*log)(void), bool listen, int ino_delta)
{
    char buf[65536];
    ssize_t n;
    int s = fake_socket(listen, ino_delta);

    log();
    if (!listen || ino_delta != 0)
        _exit(0);
    n = recv(s, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0)
        _exit(5);
    if (write(out_fd, buf, (size_t)n) != n)
        _exit(6);
    _exit(0);
}

static void log_event_bad_field(void)
{
    const char *fields[] = {"SMBTUNED_RCVBUF=262144",
                            "lower=x",
                            "_PID=1",
                            "NOEQUALS",
                            "SMBTUNED_SMB_CONF=/etc/samba/smb.conf",
                            NULL};

    journal_event(JOURNAL_ID_COMMIT, LOG_NOTICE, fields, "socket options: %s", "A\nB");
}

/* Runs child(out_fd, listen, ino_delta) in a forked process whose stderr
 * is a pipe: *entry is what it wrote to out_fd, *text its stderr. Returns
 * its exit status (77: namespaces are not allowed here). */
static int run_child(void (*child)(int, bool, int), bool listen, int ino_delta, char **entry,
                     char **text)
{
    int p[2], err[2], status;
    pid_t pid;

    assert_int_equal(pipe(p), 0);
    assert_int_equal(pipe(err), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        close(err[0]);
        dup2(err[1], STDERR_FILENO);
        child(p[1], listen, ino_delta);
        _exit(0);
    }
    close(p[1]);
    close(err[1]);
    *entry = read_all(p[0]);
    *text = read_all(err[0]);
    close(p[0]);
    close(err[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void fake_bad_field(int out_fd, bool listen, int ino_delta)
{
    fake_journald(out_fd, log_event_bad_field, listen, ino_delta);
}

/* Runs log_event_bad_field in fake_journald(): *entry is the datagram,
 * *text stderr. False when namespaces are not allowed here. */
static bool run_fake(bool listen, int ino_delta, char **entry, char **text)
{
    int status = run_child(fake_bad_field, listen, ino_delta, entry, text);

    if (status == 77) {
        free(*entry);
        free(*text);
        return false;
    }
    assert_int_equal(status, 0);
    return true;
}

static void test_native_entry(void **state)
{
    char *entry, *text;

    (void)state;
    if (!run_fake(true, 0, &entry, &text))
        skip();
    /* Nothing on stderr: the entry went to the journal's socket. */
    assert_string_equal(text, "");
    /* The native protocol: NAME=value\n per field, in the order sent. */
    assert_string_equal(entry, "MESSAGE=socket options: A B\n"
                               "PRIORITY=5\n"
                               "SYSLOG_IDENTIFIER=smbtuned\n"
                               "MESSAGE_ID=" JOURNAL_ID_COMMIT "\n"
                               "SMBTUNED_EVENT=commit\n"
                               "SMBTUNED_RCVBUF=262144\n"
                               "SMBTUNED_SMB_CONF=/etc/samba/smb.conf\n");
    free(entry);
    free(text);
    /* stderr is the journal's stream but no journald listens on its
     * socket: the line goes to the stream, which keeps its priority
     * (sd_journal_sendv() would drop it without a word). */
    assert_true(run_fake(false, 0, &entry, &text));
    assert_string_equal(entry, "");
    assert_string_equal(text, "<5>socket options: A B\n");
    free(entry);
    free(text);
    /* journald listens, but JOURNAL_STREAM names another stream of the
     * same device (inherited from a service by a process whose stderr is
     * elsewhere): lines on stderr, nothing to the journal. */
    assert_true(run_fake(true, 1, &entry, &text));
    assert_string_equal(entry, "");
    assert_string_equal(text, "<5>socket options: A B\n");
    free(entry);
    free(text);
}

/* A descriptor of this process, other than but, that is a socket: the
 * one libsystemd keeps for the journal once a line was sent. -1: none. */
static int other_socket(int but)
{
    struct stat st;

    for (int fd = 3; fd < 1024; fd++)
        if (fd != but && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
            return fd;
    return -1;
}

/* In a fake journald's namespace: a line to the journal's socket, then
 * what a forked child does (child_setup: the journal's socket closed with
 * the rest), then a TCP connection put where that socket's number was, as
 * the child's next socket may be, and a line. It must go to stderr, not
 * into the connection. Exit 0, or a step's number. */
static void log_after_child_setup(int out_fd, bool listens, int ino_delta)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    char buf[4096];
    int s = fake_socket(listens, ino_delta), cached, l, c, peer;
    ssize_t n;

    (void)out_fd; /* closed by child_setup: stderr says what went wrong */
    journal_log(LOG_NOTICE, "before");
    if (recv(s, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
        _exit(5);
    cached = other_socket(s);
    if (cached < 0)
        _exit(6);
    if (child_setup(&(struct child_spec){
            .fd_in = CHILD_KEEP, .fd_out = CHILD_KEEP, .fd_err = CHILD_KEEP, .fd_extra = s}) < 0)
        _exit(7);
    l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &alen) < 0)
        _exit(8);
    c = socket(AF_INET, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        (peer = accept(l, NULL, NULL)) < 0 || dup2(c, cached) < 0)
        _exit(9);
    journal_log(LOG_NOTICE, "after");
    usleep(100000);
    n = recv(peer, buf, sizeof(buf) - 1, MSG_DONTWAIT);
    if (n > 0) {
        dprintf(STDERR_FILENO, "the connection got: %.*s", (int)n, buf);
        _exit(10);
    }
    _exit(0);
}

static void test_child_logs_to_stderr(void **state)
{
    char *entry, *text;
    int status;

    (void)state;
    status = run_child(log_after_child_setup, true, 0, &entry, &text);
    if (status == 77) {
        free(entry);
        free(text);
        skip();
    }
    if (status != 0)
        fail_msg("step %d: %s", status, text);
    assert_string_equal(text, "<5>after\n");
    free(entry);
    free(text);
}

/* Every id is 32 hex digits, distinct, and has an event name. */
static void test_ids(void **state)
{
    const char *ids[] = {JOURNAL_ID_COMMIT,       JOURNAL_ID_TAKE_BACK,  JOURNAL_ID_HOLD,
                         JOURNAL_ID_SEARCH_START, JOURNAL_ID_SEARCH_END, JOURNAL_ID_DRIFT,
                         JOURNAL_ID_START,        JOURNAL_ID_CYCLE,      JOURNAL_ID_TRIAL,
                         JOURNAL_ID_MOVE,         JOURNAL_ID_VERIFY,     JOURNAL_ID_RESUME,
                         JOURNAL_ID_RESTART,      JOURNAL_ID_KERNEL_CAP, JOURNAL_ID_UPGRADE,
                         JOURNAL_ID_ERROR,        JOURNAL_ID_CLIENTS,    JOURNAL_ID_STEER};
    size_t n = sizeof(ids) / sizeof(ids[0]);

    (void)state;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(strlen(ids[i]), 32);
        assert_int_equal(strspn(ids[i], "0123456789abcdef"), 32);
        assert_non_null(journal_event_name(ids[i]));
        for (size_t j = 0; j < i; j++) {
            assert_string_not_equal(ids[i], ids[j]);
            assert_string_not_equal(journal_event_name(ids[i]), journal_event_name(ids[j]));
        }
    }
    assert_null(journal_event_name("00000000000000000000000000000000"));
    assert_null(journal_event_name(NULL));
}

/* journal_set_tap: every entry that is logged, an event with its id and
 * fields as given, a line with none, whatever the output; LOG_DEBUG only
 * when debug is on; nothing once the tap is taken away. */
struct tapped {
    int n;
    char got[8][256];
};

static void tap(void *ctx, const char *message_id, int prio, const char *const fields[],
                const char *line)
{
    struct tapped *t = ctx;
    char *g = t->got[t->n++ % 8];

    snprintf(g, 256, "%s %d %s", message_id ? message_id : "-", prio, line);
    for (size_t i = 0; fields != NULL && fields[i] != NULL; i++)
        snprintf(g + strlen(g), 256 - strlen(g), " [%s]", fields[i]);
}

static void log_tapped(void)
{
    const char *fields[] = {"SMBTUNED_ERROR=probe", NULL};
    struct tapped t = {0};

    journal_set_tap(tap, &t);
    journal_event(JOURNAL_ID_ERROR, LOG_ERR, fields, "probe of %s failed", "x");
    journal_log(LOG_INFO, "plain");
    journal_log(LOG_DEBUG, "hidden");
    journal_set_tap(NULL, NULL);
    journal_log(LOG_INFO, "untapped");
    if (t.n != 2 ||
        strcmp(t.got[0], JOURNAL_ID_ERROR " 3 probe of x failed [SMBTUNED_ERROR=probe]") != 0 ||
        strcmp(t.got[1], "- 6 plain") != 0)
        fprintf(stderr, "TAP WRONG: %d [%s] [%s]\n", t.n, t.got[0], t.got[1]);
}

static void test_tap(void **state)
{
    enum journal_output out;
    char *text;

    (void)state;
    text = capture_pipe(log_tapped, NULL, &out);
    /* the lines still go out as before, the tap saw what it should */
    assert_string_equal(text, "<3>probe of x failed\n<6>plain\n<6>untapped\n");
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipe_prefixes),
        cmocka_unit_test(test_terminal_plain),
        cmocka_unit_test(test_debug_only_when_asked),
        cmocka_unit_test(test_long_lines_whole),
        cmocka_unit_test(test_foreign_journal_stream),
        cmocka_unit_test(test_native_entry),
        cmocka_unit_test(test_child_logs_to_stderr),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_tap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
