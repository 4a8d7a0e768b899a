/* Unit tests for lib/config: the probe section of /etc/smbtuned.conf,
 * its defaults, and errors that name the file and the line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "probe.h"

static void test_empty_gives_defaults(void **state)
{
    struct config c;
    struct err e = {{0}};

    (void)state;
    assert_int_equal(config_parse_string("", "x.conf", &c, &e), 0);
    assert_string_equal(c.probe.url, "");
    assert_string_equal(c.probe.credentials, "");
    assert_int_equal(c.probe.size, PROBE_DEFAULT_SIZE);
    assert_int_equal(c.probe.request_size, PROBE_DEFAULT_REQUEST_SIZE);
    assert_int_equal(c.probe.deadline_s, (long long)PROBE_DEFAULT_DEADLINE_S);
    assert_string_equal(c.probe.directory, "");
    assert_string_equal(c.probe.socket_options, "TCP_NODELAY");

    /* An empty section is the same. */
    assert_int_equal(config_parse_string("probe {\n}\n", "x.conf", &c, &e), 0);
    assert_int_equal(c.probe.size, PROBE_DEFAULT_SIZE);
}

static void test_full_probe_section(void **state)
{
    struct config c;
    struct err e = {{0}};
    const char *text = "# smbtuned\n"
                       "probe {\n"
                       "    url = \"smb://fs.example.org:4455/data/bench\"\n"
                       "    credentials = /etc/smbtuned/credentials\n"
                       "    size = 256M\n"
                       "    request_size = 4M\n"
                       "    deadline = 30\n"
                       "    directory = \".smbtuned\"\n"
                       "    socket_options = \"TCP_NODELAY SO_RCVBUF=1048576\"\n"
                       "}\n";

    (void)state;
    assert_int_equal(config_parse_string(text, "x.conf", &c, &e), 0);
    assert_string_equal(c.probe.url, "smb://fs.example.org:4455/data/bench");
    assert_string_equal(c.probe.credentials, "/etc/smbtuned/credentials");
    assert_int_equal(c.probe.size, 256LL * 1024 * 1024);
    assert_int_equal(c.probe.request_size, 4LL * 1024 * 1024);
    assert_int_equal(c.probe.deadline_s, 30);
    assert_string_equal(c.probe.directory, ".smbtuned");
    assert_string_equal(c.probe.socket_options, "TCP_NODELAY SO_RCVBUF=1048576");
}

static void check_error(const char *text, const char *want)
{
    struct config c;
    struct err e = {{0}};

    assert_int_equal(config_parse_string(text, "/etc/smbtuned.conf", &c, &e), -EINVAL);
    if (strstr(e.msg, want) == NULL)
        fail_msg("error for\n%s\nis '%s', expected '%s'", text, e.msg, want);
}

static void test_errors_name_file_and_line(void **state)
{
    (void)state;
    check_error("probe {\n  size = 12Q\n}\n", "/etc/smbtuned.conf:2: probe: size '12Q'");
    check_error("probe {\n\n  size = 1K\n}\n", "/etc/smbtuned.conf:3: probe: size '1K'");
    check_error("probe {\n  request_size = 9M\n}\n", "/etc/smbtuned.conf:2: probe: request_size");
    check_error("probe {\n  deadline = 0\n}\n", "/etc/smbtuned.conf:2: probe: deadline '0'");
    check_error("probe {\n  deadline = 1.5\n}\n", ":2: probe: deadline");
    check_error("probe {\n  url = \"http://x/y\"\n}\n", ":2: probe: URL 'http://x/y'");
    check_error("probe {\n  url = \"smb://u:pw@x/y\"\n}\n", ":2: probe: URL must not carry");
    check_error("probe {\n  credentials = relative/path\n}\n", ":2: probe: credentials must be");
    check_error("probe {\n  directory = \"../x\"\n}\n", ":2: probe: directory");
    check_error("probe {\n  socket_options = \"\"\n}\n", ":2: probe: socket options");
    check_error("probe {\n  socket_options = \"TCP_NODELAY\\ninclude = /x\"\n}\n",
                ":2: probe: socket options");
    check_error("probe {\n  colour = blue\n}\n", ":2: no such option 'colour'");
    check_error("prob {\n}\n", ":1: no such option 'prob'");
    check_error("probe {\n  size = 1M\n}\n}\n", "/etc/smbtuned.conf:4:");
}

/* What libconfuse accepts without a word (issue 9, defect 6): each is an
 * error that names the file, the line and what was expected. */
static void test_broken_structure(void **state)
{
    (void)state;
    /* The end of the file closed the section. */
    check_error("probe {\n  size = 1M\n", "/etc/smbtuned.conf:1: '{' is not closed: expected '}'");
    check_error("probe {\n  size = 1M\n}\ntune {\n  mode = advise\n\n",
                "/etc/smbtuned.conf:4: '{' is not closed");
    /* The rest of the file was ignored, a wrong value with it. */
    check_error("probe {\n  size = 1M\n}\n/* old\ntune {\n  mode = bogus\n}\n",
                "/etc/smbtuned.conf:4: comment '/*' is not closed: expected '*/'");
    check_error("probe {\n  size = 1M\n}\n\"\n", "/etc/smbtuned.conf:4: string is not closed");
    check_error("probe {\n  url = 'smb://x/y\n}\n", "/etc/smbtuned.conf:2: string is not closed");
}

static void test_given_twice(void **state)
{
    (void)state;
    /* The two sections were merged, the last size won. */
    check_error("probe {\n  size = 1M\n}\n\nprobe {\n  size = 2M\n}\n",
                "/etc/smbtuned.conf:5: section probe is given twice (first at line 1)");
    check_error("tune{}probe{}\ntune {\n}\n", "/etc/smbtuned.conf:2: section tune is given twice");
    check_error("probe {\n  size = 1M\n  deadline = 5\n  size = 2M\n}\n",
                "/etc/smbtuned.conf:4: probe: size is given twice (first at line 2)");
    check_error("tune {\n  mode = advise\n  mode = \"tune\"\n}\n",
                "/etc/smbtuned.conf:3: tune: mode is given twice (first at line 2)");
}

static void test_no_environment(void **state)
{
    (void)state;
    /* libconfuse would put in the values of the caller's environment. */
    setenv("SMBTUNED_TEST_URL", "smb://127.0.0.1/share", 1);
    check_error("probe {\n  url = ${SMBTUNED_TEST_URL}\n}\n",
                "/etc/smbtuned.conf:2: '${' is not allowed");
    check_error("probe {\n\n  url = \"smb://${SMBTUNED_TEST_HOST:-127.0.0.1}/share\"\n}\n",
                "/etc/smbtuned.conf:3: '${' is not allowed");
    check_error("probe {\n  size = 1M${X}\n}\n", "/etc/smbtuned.conf:2: '${' is not allowed");
    unsetenv("SMBTUNED_TEST_URL");
}

/* The pre-scan reads the text as libconfuse's lexer does: what is inside
 * comments and strings is not structure. */
static void test_comments_and_strings(void **state)
{
    struct config c;
    struct err e = {{0}};
    const char *text = "/* probe {\n   a disabled section, ${X} */\n"
                       "probe { # {{ ${X}\n"
                       "    url = \"smb://127.0.0.1/a}b\" // }\n"
                       "    directory = 'x\\'${y}{'\n"
                       "    socket_options = \"TCP_NODELAY /* \\\" \\${z}\"\n"
                       "    credentials = /etc/a//b\n"
                       "}\n"
                       "tune {\n    smb_conf = \"/etc/samba/smb.conf\" /* } */\n}\n";

    (void)state;
    if (config_parse_string(text, "x.conf", &c, &e) != 0)
        fail_msg("%s", e.msg);
    assert_string_equal(c.probe.url, "smb://127.0.0.1/a}b");
    assert_string_equal(c.probe.directory, "x'${y}{");
    assert_string_equal(c.probe.socket_options, "TCP_NODELAY /* \" ${z}");
    assert_string_equal(c.probe.credentials, "/etc/a//b");
    assert_string_equal(c.tune.smb_conf, "/etc/samba/smb.conf");
}

/* config_load in a child that an alarm kills if open() waits for a
 * writer; returns the child's exit status (0: refused, naming the file). */
static int load_in_child(const char *path)
{
    int status;
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        struct config c;
        struct err e = {{0}};

        alarm(10);
        _exit(config_load(path, &c, &e) < 0 && strstr(e.msg, path) != NULL &&
                      strstr(e.msg, "regular files") != NULL
                  ? 0
                  : 1);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        fail_msg("config_load(%s) hung (killed by signal %d)", path, WTERMSIG(status));
    return WEXITSTATUS(status);
}

static void test_load_fifo(void **state)
{
    char dir[4096], path[4200];

    (void)state;
    snprintf(dir, sizeof(dir), "%s/test_config.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/smbtuned.conf", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(load_in_child(path), 0);
    assert_int_equal(load_in_child(dir), 0);
    unlink(path);
    rmdir(dir);
}

static void test_error_keeps_first(void **state)
{
    struct config c;
    struct err e = {{0}};

    (void)state;
    assert_int_equal(config_parse_string("probe {\n size = x\n deadline = y\n}\n", "f", &c, &e),
                     -EINVAL);
    assert_non_null(strstr(e.msg, "f:2: probe: size"));
}

static void test_load(void **state)
{
    char dir[4096], path[4200];
    struct config c;
    struct err e = {{0}};
    FILE *f;

    (void)state;
    snprintf(dir, sizeof(dir), "%s/test_config.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/smbtuned.conf", dir);

    assert_int_equal(config_load(path, &c, &e), -ENOENT);
    assert_non_null(strstr(e.msg, path));

    f = fopen(path, "w");
    assert_non_null(f);
    fputs("probe {\n  url = \"smb://127.0.0.1/share\"\n  size = banana\n}\n", f);
    fclose(f);
    memset(&e, 0, sizeof(e));
    assert_int_equal(config_load(path, &c, &e), -EINVAL);
    if (strncmp(e.msg, path, strlen(path)) != 0 || strstr(e.msg, ":3: ") == NULL)
        fail_msg("'%s' does not start with %s:3:", e.msg, path);

    f = fopen(path, "w");
    assert_non_null(f);
    fputs("probe {\n  url = \"smb://127.0.0.1/share\"\n  size = 1G\n}\n", f);
    fclose(f);
    assert_int_equal(config_load(path, &c, &e), 0);
    assert_string_equal(c.probe.url, "smb://127.0.0.1/share");
    assert_int_equal(c.probe.size, 1024LL * 1024 * 1024);

    unlink(path);
    rmdir(dir);
}

static void test_shipped_config_parses(void **state)
{
    struct config c, d;
    struct err e = {{0}};
    const char *src = getenv("SMBTUNED_SOURCE_ROOT");
    const char *me = __FILE__, *tail = strstr(me, "tests/unit/test_config.c");
    char path[4096];

    (void)state;
    /* meson compiles us as <source root>/tests/unit/test_config.c relative
     * to the build directory, where `meson test` runs us. */
    if (src != NULL)
        snprintf(path, sizeof(path), "%s/conf/smbtuned.conf", src);
    else if (tail != NULL)
        snprintf(path, sizeof(path), "%.*sconf/smbtuned.conf", (int)(tail - me), me);
    else
        skip();
    if (access(path, R_OK) != 0)
        skip();
    if (config_load(path, &c, &e) != 0)
        fail_msg("%s", e.msg);
    /* The documented file states the defaults; it must not change them. */
    config_defaults(&d);
    assert_int_equal(c.probe.size, d.probe.size);
    assert_int_equal(c.probe.request_size, d.probe.request_size);
    assert_int_equal(c.probe.deadline_s, d.probe.deadline_s);
    assert_string_equal(c.probe.socket_options, d.probe.socket_options);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_gives_defaults),
        cmocka_unit_test(test_full_probe_section),
        cmocka_unit_test(test_errors_name_file_and_line),
        cmocka_unit_test(test_broken_structure),
        cmocka_unit_test(test_given_twice),
        cmocka_unit_test(test_no_environment),
        cmocka_unit_test(test_comments_and_strings),
        cmocka_unit_test(test_load_fifo),
        cmocka_unit_test(test_error_keeps_first),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_shipped_config_parses),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
