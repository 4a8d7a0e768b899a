/* Unit tests for lib/apply: the method names, smbcontrol as apply_run
 * calls it (a fake smbcontrol first on PATH, in the test's own temporary
 * directory, records its arguments and exits as told), a hung smbcontrol
 * killed at its deadline, and SIGHUP to the smbd that smb.conf's pid
 * directory names (a child of the test's, called smbd, that waits for it).
 * The systemd method needs D-Bus and a unit: here only the judgement of
 * a restart's end (apply_restart_verdict); the calls are tested under
 * real systemd (tests/e2e). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "apply.h"
#include "files.h"
#include "rmtree.h"

/* smbd's unit in these tests: not the default, so that a message with
 * the default's name would show a name not passed through */
#define U "smb.service"

struct fixture {
    char dir[4096];    /* the test's temporary directory */
    char bin[4200];    /* dir/bin: first on PATH, holds the fake smbcontrol */
    char conf[4200];   /* dir/smb.conf */
    char piddir[4200]; /* dir/run: its pid directory */
    char old_path[8192];
};

static void write_text(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
}

/* What dir/name holds ("" when it does not exist), in buf. */
static const char *read_back(const struct fixture *fx, const char *name, char *buf, size_t len)
{
    char path[4300];
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "%s/%s", fx->dir, name);
    f = fopen(path, "r");
    buf[0] = '\0';
    if (f == NULL)
        return buf;
    n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The fake smbcontrol: its arguments one a line in dir/argv, dir/stdout
 * and dir/stderr (when there are) on its standard output and error, and dir/exit's number as its
 * exit code; with dir/hang it writes its pid to dir/pid and sleeps, as a
 * smbcontrol stuck on an smbd that does not answer. */
static const char fake_smbcontrol[] =
    "#!/bin/sh\n"
    "d=$(dirname \"$0\")/..\n"
    "printf '%s\\n' \"$@\" > \"$d/argv\"\n"
    "[ -f \"$d/stdout\" ] && cat \"$d/stdout\"\n"
    "[ -f \"$d/stderr\" ] && cat \"$d/stderr\" >&2\n"
    "if [ -f \"$d/hang\" ]; then echo $$ > \"$d/pid\"; exec sleep 30; fi\n"
    "exit $(cat \"$d/exit\" 2>/dev/null || echo 0)\n";

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    char path[4300], text[12800];
    const char *old = getenv("PATH");

    assert_non_null(fx);
    snprintf(fx->dir, sizeof(fx->dir), "%s/test_apply.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->bin, sizeof(fx->bin), "%s/bin", fx->dir);
    snprintf(fx->piddir, sizeof(fx->piddir), "%s/run", fx->dir);
    snprintf(fx->conf, sizeof(fx->conf), "%s/smb.conf", fx->dir);
    assert_int_equal(mkdir(fx->bin, 0700), 0);
    assert_int_equal(mkdir(fx->piddir, 0700), 0);
    snprintf(path, sizeof(path), "%s/smbcontrol", fx->bin);
    write_text(path, fake_smbcontrol, 0700);
    snprintf(text, sizeof(text), "[global]\n\tpid directory = %s\n", fx->piddir);
    write_text(fx->conf, text, 0600);
    snprintf(fx->old_path, sizeof(fx->old_path), "%s", old ? old : "/usr/bin:/bin");
    snprintf(text, sizeof(text), "%s:%s", fx->bin, fx->old_path);
    assert_int_equal(setenv("PATH", text, 1), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    setenv("PATH", fx->old_path, 1);
    assert_int_equal(rmtree_path(fx->dir, NULL), 0);
    free(fx);
    return 0;
}

static void set_file(const struct fixture *fx, const char *name, const char *text)
{
    char path[4300];

    snprintf(path, sizeof(path), "%s/%s", fx->dir, name);
    write_text(path, text, 0600);
}

static void test_names(void **state)
{
    static const char *const words[] = {"none", "smbcontrol", "signal", "systemd"};
    enum apply_method m;
    struct err e = {{0}};

    (void)state;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        assert_int_equal(apply_parse(words[i], &m, &e), 0);
        assert_string_equal(apply_name(m), words[i]);
    }
    assert_int_equal(apply_parse("smbcontrol", &m, &e), 0);
    assert_int_equal(m, APPLY_SMBCONTROL);
    assert_int_equal(apply_parse("signal", &m, &e), 0);
    assert_int_equal(m, APPLY_SIGNAL);
    assert_int_equal(apply_parse("SIGHUP", &m, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "unknown apply method 'SIGHUP'"));
    assert_int_equal(apply_parse("", &m, &e), -EINVAL);
    assert_int_equal(apply_parse("Signal", &m, &e), -EINVAL);
}

/* reload-config reaches every smbd process; -s names the config so that
 * smbcontrol finds this smbd's pid directory. */
static void test_smbcontrol_ok(void **state)
{
    struct fixture *fx = *state;
    struct err e = {{0}};
    char argv[8192], want[8192];

    assert_int_equal(apply_run(APPLY_SMBCONTROL, fx->conf, U, &e), 0);
    snprintf(want, sizeof(want), "-s\n%s\nsmbd\nreload-config\n", fx->conf);
    assert_string_equal(read_back(fx, "argv", argv, sizeof(argv)), want);
}

/* A refusal names the command and smbcontrol's first line. */
static void test_smbcontrol_fails(void **state)
{
    struct fixture *fx = *state;
    struct err e = {{0}};

    set_file(fx, "exit", "1\n");
    set_file(fx, "stderr", "Can't find pid for destination 'smbd'\nsecond line\n");
    assert_int_equal(apply_run(APPLY_SMBCONTROL, fx->conf, U, &e), -ESRCH);
    if (strstr(e.msg, "smbcontrol -s ") == NULL || strstr(e.msg, " smbd reload-config failed: "
                                                                 "Can't find pid for "
                                                                 "destination 'smbd'") == NULL)
        fail_msg("'%s'", e.msg);
    assert_null(strstr(e.msg, "second line"));

    /* without a word on stderr, its first line on stdout */
    set_file(fx, "stderr", "");
    set_file(fx, "stdout", "ERROR: no such message\n");
    assert_int_equal(apply_run(APPLY_SMBCONTROL, fx->conf, U, &e), -ESRCH);
    assert_non_null(strstr(e.msg, "reload-config failed: ERROR: no such message"));
    set_file(fx, "stdout", "");
    assert_int_equal(apply_run(APPLY_SMBCONTROL, fx->conf, U, &e), -ESRCH);
    if (strstr(e.msg, "reload-config failed: no output") == NULL)
        fail_msg("%s", e.msg);
}

/* Nothing is run for none. */
static void test_none_runs_nothing(void **state)
{
    struct fixture *fx = *state;
    struct err e = {{0}};
    char argv[64];

    assert_int_equal(apply_run(APPLY_NONE, fx->conf, U, &e), 0);
    assert_string_equal(read_back(fx, "argv", argv, sizeof(argv)), "");
}

/* A smbcontrol that hangs is killed at the deadline and the apply fails.
 * Without the deadline the fake would exit 0 after its sleep, and the
 * test would see a success. */
static void test_smbcontrol_timeout(void **state)
{
    struct fixture *fx = *state;
    struct err e = {{0}};
    char pid[64];
    long long v;

    set_file(fx, "hang", "");
    assert_int_equal(apply_run_timeout(APPLY_SMBCONTROL, fx->conf, U, 0.5, &e), -ESRCH);
    assert_non_null(strstr(e.msg, "reload-config failed"));
    /* it was killed and reaped: its pid names no process any more */
    read_back(fx, "pid", pid, sizeof(pid));
    pid[strcspn(pid, "\n")] = '\0';
    v = strtoll(pid, NULL, 10);
    assert_true(v > 1);
    assert_int_equal(kill((pid_t)v, 0), -1);
    assert_int_equal(errno, ESRCH);
}

/* A child called smbd that reports on ready_fd when it is ready and exits
 * 0 on the first SIGHUP (the default action would kill it by signal). */
static pid_t start_fake_smbd(int *ready_fd)
{
    int p[2];
    pid_t pid;

    assert_int_equal(pipe(p), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sigset_t hup, old;
        int sig = 0;

        close(p[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        prctl(PR_SET_NAME, "smbd");
        sigemptyset(&hup);
        sigaddset(&hup, SIGHUP);
        sigprocmask(SIG_BLOCK, &hup, &old);
        if (write(p[1], "r", 1) != 1)
            _exit(2);
        alarm(60); /* never outlive a broken test */
        if (sigwait(&hup, &sig) != 0 || sig != SIGHUP)
            _exit(3);
        _exit(0);
    }
    close(p[1]);
    *ready_fd = p[0];
    return pid;
}

static void test_signal(void **state)
{
    struct fixture *fx = *state;
    struct err e = {{0}};
    char path[4300], text[64], ch;
    int ready, status;
    pid_t pid = start_fake_smbd(&ready);

    assert_int_equal(read(ready, &ch, 1), 1);
    close(ready);
    snprintf(path, sizeof(path), "%s/smbd.pid", fx->piddir);
    snprintf(text, sizeof(text), "%d\n", (int)pid);
    write_text(path, text, 0644);
    if (apply_run(APPLY_SIGNAL, fx->conf, U, &e) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("apply_run(signal): %s", e.msg);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* the fake smbcontrol was not used */
    assert_string_equal(read_back(fx, "argv", text, sizeof(text)), "");
}

/* No pid file, or one naming a process that is not smbd (a stale file):
 * nobody is signalled. */
static void test_signal_no_smbd(void **state)
{
    struct fixture *fx = *state;
    struct err e = {{0}};
    char path[4300], text[64];

    assert_int_equal(apply_run(APPLY_SIGNAL, fx->conf, U, &e), -ESRCH);
    assert_non_null(strstr(e.msg, "smbd.pid"));
    snprintf(path, sizeof(path), "%s/smbd.pid", fx->piddir);
    snprintf(text, sizeof(text), "%d\n", (int)getpid());
    write_text(path, text, 0644);
    assert_int_equal(apply_run(APPLY_SIGNAL, fx->conf, U, &e), -ESRCH);
    assert_non_null(strstr(e.msg, "is not smbd"));
}

/* What a restart came to, once systemd removed its job: a new main
 * process is a restart; a unit that was stopping already, or whose stop
 * replaced the restart, got none, and its next smbd reads the line (1),
 * as does one not running after it for any other reason (2: a warning);
 * a job that failed, or the smbd of before going on, is a restart that
 * did not happen. */
static void test_restart_verdict(void **state)
{
    struct err e = {{0}};

    (void)state;
    assert_int_equal(apply_restart_verdict(U, "done", "active", "active", 100, 200, &e), 0);
    assert_int_equal(apply_restart_verdict(U, "done", "reloading", "reloading", 100, 200, &e), 0);
    /* an admin's restart that replaced ours is a restart too */
    assert_int_equal(apply_restart_verdict(U, "canceled", "active", "active", 100, 200, &e), 0);

    /* try-restart of a unit whose stop is running does nothing, "done" */
    assert_int_equal(apply_restart_verdict(U, "done", "deactivating", "deactivating", 100, 100, &e),
                     1);
    assert_string_equal(e.msg, "smb.service is deactivating: its restart did nothing (systemd: "
                               "\"done\")");
    assert_int_equal(apply_restart_verdict(U, "done", "deactivating", "inactive", 100, 0, &e), 1);
    assert_non_null(strstr(e.msg, "smb.service is inactive"));
    /* ours replaced by an admin's stop */
    assert_int_equal(apply_restart_verdict(U, "canceled", "active", "deactivating", 100, 100, &e),
                     1);
    assert_string_equal(e.msg, "smb.service is deactivating: another job for it (a stop?) "
                               "replaced the restart (systemd: \"canceled\")");

    /* the restart's start failed: smbd is down, and says why itself */
    assert_true(apply_restart_verdict(U, "failed", "active", "failed", 100, 0, &e) < 0);
    assert_string_equal(e.msg, "systemd's restart of smb.service ended \"failed\", and the unit "
                               "is failed (`systemctl status smb.service` says why)");
    assert_true(apply_restart_verdict(U, "timeout", "active", "inactive", 100, 0, &e) < 0);
    assert_true(apply_restart_verdict(U, "dependency", "active", "active", 100, 200, &e) < 0);
    /* "done", and a running smbd not running after it: a start skipped
     * by a Condition, an smbd that died at once, or an admin's stop
     * between the reads; which, it cannot tell: a warning (2), with
     * where to look. Its next start reads the line either way. */
    assert_int_equal(apply_restart_verdict(U, "done", "active", "inactive", 100, 0, &e), 2);
    assert_string_equal(e.msg, "smb.service is inactive after its restart (systemd: \"done\"; "
                               "`systemctl status smb.service` says why)");
    assert_int_equal(apply_restart_verdict(U, "done", "active", "failed", 100, 0, &e), 2);
    assert_int_equal(apply_restart_verdict(U, "done", "active", "deactivating", 100, 300, &e), 2);
    assert_non_null(strstr(e.msg, "is deactivating after its restart"));
    /* the smbd of before, dying: it serves no more */
    assert_int_equal(apply_restart_verdict(U, "done", "active", "deactivating", 100, 100, &e), 2);
    /* try-restart of an activating unit is a restart: not "did nothing" */
    assert_int_equal(apply_restart_verdict(U, "done", "activating", "inactive", 0, 0, &e), 2);
    assert_non_null(strstr(e.msg, "is inactive after its restart"));
    /* the smbd of before, going on (its start, which read the old line,
     * merged with ours and an admin cancelled it; a refresh): not
     * restarted, whatever the state's name */
    assert_true(apply_restart_verdict(U, "canceled", "activating", "activating", 100, 100, &e) < 0);
    assert_non_null(strstr(e.msg, "is 100 (before it: 100, the unit activating): not restarted"));
    assert_true(apply_restart_verdict(U, "canceled", "active", "refreshing", 100, 100, &e) < 0);
    assert_int_equal(apply_restart_verdict(U, "done", "active", "refreshing", 100, 200, &e), 0);
    /* running on as it was: no restart, whatever the job said */
    assert_true(apply_restart_verdict(U, "done", "active", "active", 100, 100, &e) < 0);
    assert_non_null(strstr(e.msg, "is 100 (before it: 100, the unit active): not restarted"));
    assert_true(apply_restart_verdict(U, "canceled", "active", "active", 100, 100, &e) < 0);
    assert_true(apply_restart_verdict(U, "done", "active", "active", 100, 0, &e) < 0);
}

/* smbd_unit's names: systemd's rule, services only, and a message that
 * says what is wrong without echoing a byte it cannot print. */
static void test_unit_check(void **state)
{
    static const char *const good[] = {"smbd.service",         "smb.service",
                                       "samba-ad-dc.service",  "smbd@a.service",
                                       "a:b_c\\x2d.d.service", "a@b@c.service"};
    static const char *const bad[] = {"",
                                      ".service",
                                      "smbd",
                                      "smbd.socket",
                                      "smbd.service ",
                                      "@a.service",
                                      "smbd@.service",
                                      "a@.service",
                                      "sm bd.service",
                                      "smbd\n.service",
                                      "sm\xc3\xa9"
                                      "bd.service",
                                      "../smbd.service"};
    char longname[300];
    struct err e = {{0}};

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (apply_unit_check(good[i], &e) != 0)
            fail_msg("'%s' refused: %s", good[i], e.msg);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        e.msg[0] = '\0';
        if (apply_unit_check(bad[i], &e) != -EINVAL)
            fail_msg("'%s' taken", bad[i]);
        assert_true(e.msg[0] != '\0');
        for (const char *c = e.msg; *c; c++)
            assert_true(*c >= 0x20 && *c < 0x7f);
    }
    assert_int_equal(apply_unit_check("smbd.socket", &e), -EINVAL);
    assert_string_equal(e.msg, "'smbd.socket' is not a service unit: expected a name such as "
                               "smbd.service");
    assert_int_equal(apply_unit_check("smbd\n.service", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "byte 5 (0x0a)"));
    memset(longname, 'a', sizeof(longname));
    snprintf(longname + 247, sizeof(longname) - 247, ".service"); /* 255 bytes */
    assert_int_equal(apply_unit_check(longname, &e), 0);
    snprintf(longname + 248, sizeof(longname) - 248, ".service"); /* 256 */
    assert_int_equal(apply_unit_check(longname, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "255 bytes"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_restart_verdict),
        cmocka_unit_test(test_unit_check),
        cmocka_unit_test_setup_teardown(test_smbcontrol_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_smbcontrol_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_none_runs_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_smbcontrol_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_no_smbd, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
