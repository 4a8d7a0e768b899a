/* Unit tests for lib/config: /etc/smbtuned.conf to typed values, the one
 * set of defaults (and conf/smbtuned.conf's documentation of it), the
 * parameters config_fill() builds, and errors that name the file and the
 * line. */
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
#include "files.h"
#include "probe.h"
#include "search.h"
#include "trial.h"

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
    assert_true(c.probe.deadline_s == PROBE_DEFAULT_DEADLINE_S);
    assert_true(c.probe.duration_s == PROBE_DEFAULT_DURATION_S);
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
                       "    duration = 5\n"
                       "    directory = \".smbtuned\"\n"
                       "    socket_options = \"TCP_NODELAY SO_RCVBUF=1048576\"\n"
                       "}\n";

    (void)state;
    assert_int_equal(config_parse_string(text, "x.conf", &c, &e), 0);
    assert_string_equal(c.probe.url, "smb://fs.example.org:4455/data/bench");
    assert_string_equal(c.probe.credentials, "/etc/smbtuned/credentials");
    assert_int_equal(c.probe.size, 256LL * 1024 * 1024);
    assert_int_equal(c.probe.request_size, 4LL * 1024 * 1024);
    assert_true(c.probe.deadline_s == 30.0);
    assert_true(c.probe.duration_s == 5.0);
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
    check_error("probe {\n  duration = -1\n}\n", "/etc/smbtuned.conf:2: probe: duration '-1'");
    check_error("probe {\n  duration = 3601\n}\n", ":2: probe: duration '3601' is not a whole");
    check_error("probe {\n  url = \"http://x/y\"\n}\n", ":2: probe: URL 'http://x/y'");
    check_error("probe {\n  url = \"smb://u:pw@x/y\"\n}\n", ":2: probe: URL must not carry");
    check_error("probe {\n  credentials = relative/path\n}\n", ":2: probe: credentials must be");
    check_error("probe {\n  directory = \"../x\"\n}\n", ":2: probe: directory");
    check_error("probe {\n  socket_options = \"\"\n}\n", ":2: probe: socket options");
    check_error("probe {\n  socket_options = \"TCP_NODELAY\\ninclude = /x\"\n}\n",
                ":2: probe: socket options");
    check_error("probe {\n  socket_options = \"TCP_NODELAY SO_RCVBUF=256K\"\n}\n",
                "/etc/smbtuned.conf:2: probe: socket options: Samba reads 'SO_RCVBUF=256K'");
    check_error("probe {\n  colour = blue\n}\n", ":2: no such option 'colour'");
    check_error("prob {\n}\n", ":1: no such section 'prob': the sections are probe and tune");
    check_error("\nsize = 1M\n", ":2: no such section 'size': the sections are probe and tune, "
                                 "and options go inside them");
    check_error("probe {\n  size = 1M\n}\n}\n", "/etc/smbtuned.conf:4:");
    /* Comment lines above count once (libconfuse alone counted each twice). */
    check_error("# a\n// b\n/* c\n*/\nprobe {\n  # d\n  size = 12Q # e\n}\n",
                "/etc/smbtuned.conf:7: probe: size '12Q'");
    /* the two bounds, once the whole file is read */
    check_error("tune {\n  min_size = 2M\n  max_size = 1M\n}\n",
                "/etc/smbtuned.conf:3: tune: min_size 2097152 is above max_size 1048576");
    /* against the default maximum: the line of the one given */
    check_error("tune {\n\n  min_size = 1G\n}\n",
                "/etc/smbtuned.conf:3: tune: min_size 1073741824 is above max_size ");
}

/* What libconfuse accepts without a word (issue 9, defect 6) is refused
 * by config_scan before libconfuse reads the text; its cases are in
 * test_config_scan.c. These show that the parse runs it. */
static void test_broken_structure(void **state)
{
    (void)state;
    /* The end of the file closed the section. */
    check_error("probe {\n  size = 1M\n", "/etc/smbtuned.conf:1: '{' is not closed: expected '}'");
    /* The rest of the file was ignored, a wrong value with it. */
    check_error("probe {\n  size = 1M\n}\n/* old\ntune {\n  mode = bogus\n}\n",
                "/etc/smbtuned.conf:4: comment '/*' is not closed: expected '*/'");
}

static void test_given_twice(void **state)
{
    (void)state;
    /* The two sections were merged, the last size won. */
    check_error("probe {\n  size = 1M\n}\n\nprobe {\n  size = 2M\n}\n",
                "/etc/smbtuned.conf:5: section probe is given twice (first at line 1)");
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
    unsetenv("SMBTUNED_TEST_URL");
}

/* config_scan reads the text as libconfuse's lexer does: what is inside
 * comments and strings is not structure, and libconfuse gives it back. */
static void test_comments_and_strings(void **state)
{
    struct config c;
    struct err e = {{0}};
    const char *text = "/* probe {\n   a disabled section, ${X} */\n"
                       "probe { # {{ ${X}\n"
                       "    url = \"smb://127.0.0.1/a}b\" // }\n"
                       "    directory = 'x\\'${y}{'\n"
                       "    socket_options = \"TCP_NODELAY /* \\${z}\"\n"
                       "    credentials = /etc/a//b\n"
                       "}\n"
                       "tune {\n    smb_conf = \"/etc/samba/smb\\\".conf\" /* } */\n}\n";

    (void)state;
    if (config_parse_string(text, "x.conf", &c, &e) != 0)
        fail_msg("%s", e.msg);
    assert_string_equal(c.probe.url, "smb://127.0.0.1/a}b");
    assert_string_equal(c.probe.directory, "x'${y}{");
    assert_string_equal(c.probe.socket_options, "TCP_NODELAY /* ${z}");
    assert_string_equal(c.probe.credentials, "/etc/a//b");
    assert_string_equal(c.tune.smb_conf, "/etc/samba/smb\".conf");
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

/* libconfuse's lexer takes time quadratic in a token's length, blanks
 * included: a 16 MiB comment line held -t (and a SIGHUP, the event loop
 * with it) for minutes. A file beyond any real configuration is refused
 * by its size, at once. */
static void test_too_large(void **state)
{
    size_t n = CONFIG_MAX_BYTES + 2;
    char *text = malloc(n + 1);
    struct config c;
    struct err e = {{0}};

    (void)state;
    assert_non_null(text);
    memset(text, ' ', n);
    text[0] = '#';
    text[n - 1] = '\n';
    text[n] = '\0';
    assert_int_equal(config_parse_string(text, "/etc/smbtuned.conf", &c, &e), -EFBIG);
    if (strstr(e.msg, "/etc/smbtuned.conf: ") == NULL || strstr(e.msg, "larger than") == NULL)
        fail_msg("error is '%s'", e.msg);
    /* one byte less than the limit still parses */
    text[CONFIG_MAX_BYTES - 1] = '\n';
    text[CONFIG_MAX_BYTES] = '\0';
    memset(&e, 0, sizeof(e));
    assert_int_equal(config_parse_string(text, "/etc/smbtuned.conf", &c, &e), 0);
    free(text);
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

    /* A NUL byte is named with its line, as every other error. */
    f = fopen(path, "w");
    assert_non_null(f);
    fwrite("probe {\n  size = 1G\n}\n\0tune {}\n", 1, 29, f);
    fclose(f);
    memset(&e, 0, sizeof(e));
    assert_int_equal(config_load(path, &c, &e), -EINVAL);
    if (strncmp(e.msg, path, strlen(path)) != 0 || strstr(e.msg, ":4: contains a NUL byte") == NULL)
        fail_msg("'%s' does not start with %s:4: contains a NUL byte", e.msg, path);

    f = fopen(path, "w");
    assert_non_null(f);
    fputs("probe {\n  url = \"smb://127.0.0.1/share\"\n  size = 1G\n}\n", f);
    fclose(f);
    assert_int_equal(config_load(path, &c, &e), 0);
    assert_string_equal(c.probe.url, "smb://127.0.0.1/share");
    assert_int_equal(c.probe.size, 1024LL * 1024 * 1024);
    /* read from a file, which a SIGHUP then may not find gone */
    assert_true(c.from_file);
    config_defaults(&c);
    assert_false(c.from_file);

    unlink(path);
    rmdir(dir);
}

/* conf/smbtuned.conf in the source tree, or false when it cannot be found. */
static bool shipped_config_path(char *path, size_t len)
{
    const char *src = getenv("SMBTUNED_SOURCE_ROOT");
    const char *me = __FILE__, *tail = strstr(me, "tests/unit/test_config.c");

    /* meson compiles us as <source root>/tests/unit/test_config.c relative
     * to the build directory, where `meson test` runs us. */
    if (src != NULL)
        snprintf(path, len, "%s/conf/smbtuned.conf", src);
    else if (tail != NULL)
        snprintf(path, len, "%.*sconf/smbtuned.conf", (int)(tail - me), me);
    else
        return false;
    return access(path, R_OK) == 0;
}

/* Two configurations agree field by field; the first difference is named. */
static void assert_same_config(const struct config *a, const struct config *b, const char *what)
{
#define SAME_NUM(f)                                                                                \
    do {                                                                                           \
        if (a->f != b->f)                                                                          \
            fail_msg("%s: " #f " is %.17g, the code's default %.17g", what, (double)a->f,          \
                     (double)b->f);                                                                \
    } while (0)
#define SAME_STR(f)                                                                                \
    do {                                                                                           \
        if (strcmp(a->f, b->f) != 0)                                                               \
            fail_msg("%s: " #f " is '%s', the code's default '%s'", what, a->f, b->f);             \
    } while (0)
    SAME_STR(probe.url);
    SAME_STR(probe.credentials);
    SAME_NUM(probe.size);
    SAME_NUM(probe.request_size);
    SAME_NUM(probe.deadline_s);
    SAME_NUM(probe.duration_s);
    SAME_STR(probe.directory);
    SAME_STR(probe.socket_options);
    SAME_STR(tune.smb_conf);
    SAME_STR(tune.state_dir);
    SAME_NUM(tune.mode);
    SAME_NUM(tune.trials_auto);
    if (!a->tune.trials_auto)
        SAME_NUM(tune.trials);
    SAME_NUM(tune.apply);
    SAME_NUM(tune.interval_s);
    SAME_NUM(tune.min_size);
    SAME_NUM(tune.max_size);
    SAME_NUM(tune.min_gain);
    SAME_NUM(tune.abort_ratio);
    SAME_NUM(tune.max_samples);
    SAME_NUM(tune.max_bytes);
    SAME_NUM(tune.busy_rate);
    SAME_NUM(tune.window_start);
    SAME_NUM(tune.window_end);
    SAME_NUM(tune.tied);
    SAME_NUM(tune.restart_smbd);
    SAME_STR(tune.smbd_unit);
#undef SAME_NUM
#undef SAME_STR
}

static void test_shipped_config_parses(void **state)
{
    struct config c, d;
    struct err e = {{0}};
    char path[4096];

    (void)state;
    if (!shipped_config_path(path, sizeof(path)))
        skip();
    if (config_load(path, &c, &e) != 0)
        fail_msg("%s", e.msg);
    /* The documented file states the defaults; it must not change them. */
    config_defaults(&d);
    assert_same_config(&c, &d, path);
}

/* Every option of both sections, as the shipped file must document it. */
static const char *const documented[] = {
    "url",       "directory", "credentials",    "size",         "request_size",
    "deadline",  "duration",  "socket_options", "smb_conf",     "state_dir",
    "mode",      "trials",    "apply",          "interval",     "min_size",
    "max_size",  "min_gain",  "abort_ratio",    "max_samples",  "max_bytes",
    "busy_rate", "window",    "tied",           "restart_smbd", "smbd_unit",
};

/* conf/smbtuned.conf says "the values below are those defaults": each
 * option is documented by a line `    # NAME = VALUE` (one blank after the
 * '#'; examples are indented further). Uncommented, the file must give
 * exactly the code's defaults, and name every option once. */
static void test_documented_defaults(void **state)
{
    struct config c, d;
    struct err e = {{0}};
    char path[4096], *text, *out, *line, *next;
    size_t len, n = 0;
    int seen[sizeof(documented) / sizeof(documented[0])] = {0};

    (void)state;
    if (!shipped_config_path(path, sizeof(path)))
        skip();
    assert_int_equal(files_read(path, &text, &len, &e), 0);
    out = calloc(1, len + 1);
    assert_non_null(out);
    /* Line by line, keeping the line numbers for the parser's messages:
     * a documented default loses its "# ", every other line stays. */
    for (line = text; *line != '\0'; line = next) {
        const char *p = line + strspn(line, " ");
        bool comment = p[0] == '#' && p[1] == ' ';
        size_t name_len = comment ? strspn(p + 2, "abcdefghijklmnopqrstuvwxyz_") : 0;

        next = strchr(line, '\n');
        next = next ? next + 1 : line + strlen(line);
        if (name_len > 0 && strncmp(p + 2 + name_len, " = ", 3) == 0) {
            for (size_t i = 0; i < sizeof(documented) / sizeof(documented[0]); i++)
                if (strlen(documented[i]) == name_len &&
                    strncmp(p + 2, documented[i], name_len) == 0)
                    seen[i]++;
            memcpy(out + n, line, (size_t)(p - line));
            n += (size_t)(p - line);
            p += 2;
        } else {
            p = line;
        }
        memcpy(out + n, p, (size_t)(next - p));
        n += (size_t)(next - p);
    }
    out[n] = '\0';
    for (size_t i = 0; i < sizeof(documented) / sizeof(documented[0]); i++)
        if (seen[i] != 1)
            fail_msg("%s documents %s %d times, not once", path, documented[i], seen[i]);
    if (config_parse_string(out, path, &c, &e) != 0)
        fail_msg("%s uncommented: %s", path, e.msg);
    config_defaults(&d);
    assert_same_config(&c, &d, path);
    free(out);
    free(text);
}

/* The command line overrides the file through the same conversion. */
static void test_set_overrides(void **state)
{
    struct config c;
    struct err e = {{0}};

    (void)state;
    assert_int_equal(
        config_parse_string("tune {\n trials = shadow\n mode = advise\n}\n", "x.conf", &c, &e), 0);
    assert_int_equal(config_set(&c, "tune", "trials", "client", &e), 0);
    assert_int_equal(c.tune.trials, TUNER_CLIENT);
    assert_int_equal(config_set(&c, "tune", "trials", "auto", &e), 0);
    assert_true(c.tune.trials_auto);
    assert_int_equal(config_set(&c, "tune", "mode", "tune", &e), 0);
    assert_int_equal(c.tune.mode, TUNER_TUNE);
    assert_int_equal(config_set(&c, "tune", "apply", "none", &e), 0);
    assert_int_equal(c.tune.apply, APPLY_NONE);
    assert_int_equal(config_set(&c, "tune", "apply", "smbd", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "'smbd'"));
    assert_int_equal(c.tune.apply, APPLY_NONE); /* a refused value changes nothing */
    assert_int_equal(config_set(&c, "tune", "trials", "nowhere", &e), -EINVAL);
    assert_int_equal(c.tune.trials_auto, true);
    assert_int_equal(config_set(&c, "probe", "url", "smb://h/s", &e), 0);
    assert_string_equal(c.probe.url, "smb://h/s");
}

/* config_fill from the defaults gives the probe's and the search's own
 * defaults: one set, not two that may disagree. */
static void test_fill_defaults(void **state)
{
    struct config c;
    struct tuner_opts t;
    struct probe_params p;
    struct search_params s;
    struct err e = {{0}};

    (void)state;
    config_defaults(&c);
    /* No url: the own share, on shadow smbds (trials = auto). */
    assert_int_equal(config_fill(&c, &t, &e), 0);
    assert_true(t.own_share);
    assert_null(t.probe.url);
    assert_int_equal(t.trials, TUNER_SHADOW);

    assert_int_equal(config_set(&c, "probe", "url", "smb://127.0.0.1/share", &e), 0);
    assert_int_equal(config_fill(&c, &t, &e), 0);
    probe_params_default(&p);
    assert_string_equal(t.probe.url, "smb://127.0.0.1/share");
    assert_false(t.own_share);
    assert_null(t.probe.directory);
    assert_null(t.probe.credentials);
    assert_int_equal(t.probe.size, p.size);
    assert_int_equal(t.probe.request_size, p.request_size);
    assert_true(t.probe.deadline_s == p.deadline_s);
    assert_true(t.probe.duration_s == p.duration_s);
    assert_string_equal(t.probe.socket_options, p.socket_options);
    assert_string_equal(t.probe.workdir_base, CONFIG_DEFAULT_STATE_DIR);

    search_params_default(&s);
    assert_int_equal(t.search.min_size, s.min_size);
    assert_int_equal(t.search.max_rcvbuf, s.max_rcvbuf);
    assert_int_equal(t.search.max_sndbuf, s.max_sndbuf);
    assert_int_equal(t.search.max_rcvbuf, 16 * 1024 * 1024); /* conf/smbtuned.conf: 16M */
    assert_true(t.search.min_gain == s.min_gain);
    assert_true(t.search.abort_ratio == s.abort_ratio);
    assert_int_equal(t.search.min_samples, s.min_samples);
    assert_int_equal(t.search.max_samples, s.max_samples);
    assert_int_equal(t.search.max_total, s.max_total);
    assert_true(t.search.alpha == s.alpha);
    assert_true(t.search.drift_min == s.drift_min);
    assert_int_equal(t.search.tied, s.tied);
    assert_int_equal(t.search.mapping, s.mapping);
    assert_int_equal(t.search.auto_observable, s.auto_observable);

    assert_string_equal(t.smb_conf, CONFIG_DEFAULT_SMB_CONF);
    assert_string_equal(t.state_dir, CONFIG_DEFAULT_STATE_DIR);
    assert_int_equal(t.mode, TUNER_TUNE);
    assert_int_equal(t.trials, TUNER_SHADOW); /* auto, a local URL */
    assert_int_equal(t.apply, APPLY_SMBCONTROL);
    assert_true(t.interval_s == 6 * 3600.0);
    assert_int_equal(t.max_bytes, 0);
    assert_true(t.busy_mbps == 0);
    assert_int_equal(t.window_start, -1);
    assert_int_equal(t.window_end, -1);
    assert_false(t.restart_smbd);
    assert_string_equal(t.smbd_unit, "smbd.service");
    assert_false(t.once || t.json || t.progress);
}

/* What the file says reaches every parameter struct. */
static void test_fill_from_file(void **state)
{
    struct config c;
    struct tuner_opts t;
    struct err e = {{0}};
    const char *text = "probe {\n  url = \"smb://fs.example.org/data\"\n"
                       "  credentials = /etc/smbtuned/cred\n  directory = bench\n"
                       "  size = 16M\n  request_size = 1M\n  deadline = 20\n  duration = 0\n"
                       "  socket_options = \"TCP_NODELAY SO_KEEPALIVE\"\n}\n"
                       "tune {\n  smb_conf = /srv/smb.conf\n  state_dir = /srv/st\n"
                       "  apply = none\n  interval = 2h\n  min_size = 64K\n  max_size = 1M\n"
                       "  min_gain = 10%\n  abort_ratio = 30%\n  max_samples = 20\n"
                       "  max_bytes = 4G\n  busy_rate = 5M\n  window = 01:00-05:00\n"
                       "  tied = yes\n  restart_smbd = yes\n  smbd_unit = smb.service\n}\n";

    (void)state;
    if (config_parse_string(text, "x.conf", &c, &e) != 0)
        fail_msg("%s", e.msg);
    /* Pure: the credentials file does not exist, and is not read here. */
    assert_int_equal(config_fill(&c, &t, &e), 0);
    assert_string_equal(t.probe.url, "smb://fs.example.org/data");
    assert_string_equal(t.probe.credentials, "/etc/smbtuned/cred");
    assert_string_equal(t.probe.directory, "bench");
    assert_int_equal(t.probe.size, 16 * 1024 * 1024);
    assert_int_equal(t.probe.request_size, 1024 * 1024);
    assert_true(t.probe.deadline_s == 20.0);
    assert_true(t.probe.duration_s == 0);
    assert_string_equal(t.probe.socket_options, "TCP_NODELAY SO_KEEPALIVE");
    assert_string_equal(t.probe.workdir_base, "/srv/st");
    assert_int_equal(t.search.min_size, 65536);
    assert_int_equal(t.search.max_rcvbuf, 1024 * 1024);
    assert_int_equal(t.search.max_sndbuf, 1024 * 1024);
    assert_true(t.search.min_gain == 0.10);
    assert_true(t.search.abort_ratio == 0.30);
    assert_int_equal(t.search.max_samples, 20);
    assert_true(t.search.tied);
    assert_string_equal(t.smb_conf, "/srv/smb.conf");
    assert_string_equal(t.state_dir, "/srv/st");
    assert_int_equal(t.trials, TUNER_CLIENT); /* auto, a peer's share */
    assert_int_equal(t.apply, APPLY_NONE);
    assert_true(t.interval_s == 7200.0);
    assert_int_equal(t.max_bytes, 4LL << 30);
    assert_true(t.busy_mbps == 5 * 1024 * 1024 / 1e6);
    assert_int_equal(t.window_start, 60);
    assert_int_equal(t.window_end, 300);
    assert_true(t.restart_smbd);
    assert_string_equal(t.smbd_unit, "smb.service");
}

/* trials: auto picks from the URL; advise mode never runs live trials;
 * an explicit choice is kept otherwise. Live trials (tune mode) with a url
 * to another host are said (config_live_far), with no line here (from
 * config_set, as the command line sets them). */
static void test_fill_trials(void **state)
{
    static const struct {
        const char *url, *trials, *mode;
        enum tuner_trials want;
        bool far;
    } cases[] = {
        {"smb://127.0.0.1/s", "auto", "tune", TUNER_SHADOW, false},
        {"smb://localhost:4455/s", "auto", "tune", TUNER_SHADOW, false},
        {"smb://[::1]/s", "auto", "tune", TUNER_SHADOW, false},
        {"smb://peer/s", "auto", "tune", TUNER_CLIENT, false},
        {"smb://peer/s", "shadow", "tune", TUNER_SHADOW, false},
        {"smb://peer/s", "client", "tune", TUNER_CLIENT, false},
        {"smb://127.0.0.1/s", "client", "advise", TUNER_CLIENT, false},
        {"smb://127.0.0.1/s", "live", "tune", TUNER_LIVE, false},
        {"smb://[::1]/s", "live", "tune", TUNER_LIVE, false},
        {"smb://localhost/s", "live", "tune", TUNER_LIVE, false},
        {"smb://peer/s", "live", "tune", TUNER_LIVE, true},
        {"smb://10.0.0.5:4445/s/d", "live", "tune", TUNER_LIVE, true},
        {"smb://127.0.0.1/s", "live", "advise", TUNER_SHADOW, false},
        {"smb://peer/s", "live", "advise", TUNER_CLIENT, false},
    };
    char msg[2048];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct config c;
        struct tuner_opts t;
        struct err e = {{0}};

        config_defaults(&c);
        assert_int_equal(config_set(&c, "probe", "url", cases[i].url, &e), 0);
        assert_int_equal(config_set(&c, "tune", "trials", cases[i].trials, &e), 0);
        assert_int_equal(config_set(&c, "tune", "mode", cases[i].mode, &e), 0);
        assert_int_equal(config_fill(&c, &t, &e), 0);
        if (t.trials != cases[i].want)
            fail_msg("%s, trials %s, mode %s: trials %d, expected %d", cases[i].url,
                     cases[i].trials, cases[i].mode, (int)t.trials, (int)cases[i].want);
        if (config_live_far(&c, msg, sizeof(msg)) != cases[i].far)
            fail_msg("%s, trials %s, mode %s: far %d", cases[i].url, cases[i].trials, cases[i].mode,
                     !cases[i].far);
        if (cases[i].far) {
            assert_int_equal(strncmp(msg, "trials = live with url = ", 25), 0);
            assert_non_null(strstr(msg, cases[i].url));
        }
    }
}

/* A deadline no longer than both directions of the duration kills every
 * measurement where a direction runs its whole duration: said with both
 * lines (from the command line, config_set, without a line), and not
 * refused: where the size ends a direction first it is fine. */
static void test_deadline_short_for_the_duration(void **state)
{
    struct config c;
    struct tuner_opts t;
    struct err e = {{0}};
    char msg[1024];

    (void)state;
    assert_int_equal(config_parse_string("probe {\n  duration = 40\n}\n", "d.conf", &c, &e), 0);
    assert_true(config_deadline_short(&c, msg, sizeof(msg)));
    assert_non_null(strstr(msg, "probe: deadline = 60 is no longer than both directions of "
                                "duration = 40 at d.conf:2"));
    assert_non_null(strstr(msg, "more than 80, or a duration of at most 29"));
    assert_int_equal(config_fill(&c, &t, &e), 0);
    assert_int_equal(
        config_parse_string("probe {\n  duration = 5\n\n  deadline = 10\n}\n", "d.conf", &c, &e),
        0);
    assert_true(config_deadline_short(&c, msg, sizeof(msg)));
    assert_non_null(strstr(msg, "d.conf:4: probe: deadline = 10 is no longer than both "
                                "directions of duration = 5 at d.conf:2"));
    /* the least that fits, and no duration at all */
    assert_int_equal(config_set(&c, "probe", "deadline", "11", &e), 0);
    assert_false(config_deadline_short(&c, msg, sizeof(msg)));
    assert_int_equal(config_set(&c, "probe", "deadline", "2", &e), 0);
    assert_true(config_deadline_short(&c, msg, sizeof(msg)));
    assert_null(strstr(msg, "d.conf:4"));
    assert_null(strstr(msg, "at most"));
    assert_int_equal(config_set(&c, "probe", "duration", "0", &e), 0);
    assert_false(config_deadline_short(&c, msg, sizeof(msg)));
    /* the defaults fit */
    assert_int_equal(config_parse_string("", "e.conf", &c, &e), 0);
    assert_false(config_deadline_short(&c, msg, sizeof(msg)));
}

/* Live trials with a url to another host, from a file: said with the
 * line of trials (the cases are in test_fill_trials). */
static void test_live_far(void **state)
{
    struct config c;
    struct err e = {{0}};
    char msg[2048];

    (void)state;
    assert_int_equal(config_parse_string("probe {\n  url = \"smb://peer/data\"\n}\n"
                                         "tune {\n  trials = \"live\"\n}\n",
                                         "l.conf", &c, &e),
                     0);
    assert_true(config_live_far(&c, msg, sizeof(msg)));
    assert_non_null(strstr(msg, "l.conf:5: tune: trials = live with url = smb://peer/data: "));
}

/* No url: client and live trials have nothing to measure (only shadows
 * serve the own share); the error names the file and line of trials, or
 * the option when it came from the command line. */
static void test_fill_no_url_trials(void **state)
{
    struct config c;
    struct tuner_opts t;
    struct err e = {{0}};

    (void)state;
    assert_int_equal(
        config_parse_string("probe {\n}\ntune {\n  trials = client\n}\n", "x.conf", &c, &e), 0);
    assert_int_equal(config_fill(&c, &t, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "x.conf:4: tune: trials = client needs a url"));
    assert_int_equal(config_parse_string("tune {\n  trials = live\n}\n", "y.conf", &c, &e), 0);
    assert_int_equal(config_fill(&c, &t, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "y.conf:2: tune: trials = live needs a url"));
    /* advise turns live into what auto picks: shadow */
    assert_int_equal(config_set(&c, "tune", "mode", "advise", &e), 0);
    assert_int_equal(config_fill(&c, &t, &e), 0);
    assert_int_equal(t.trials, TUNER_SHADOW);
    /* The command line's --trials overrides the file: no line then. */
    assert_int_equal(config_set(&c, "tune", "trials", "client", &e), 0);
    assert_int_equal(config_fill(&c, &t, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "--trials client needs a url"));
    assert_null(strstr(e.msg, "y.conf"));
    assert_int_equal(config_set(&c, "tune", "trials", "shadow", &e), 0);
    assert_int_equal(config_fill(&c, &t, &e), 0);
    assert_true(t.own_share);
    /* A directory is one of a url's share. */
    assert_int_equal(config_set(&c, "probe", "directory", "bench", &e), 0);
    assert_int_equal(config_fill(&c, &t, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "directory = bench needs a url"));
    assert_null(strstr(e.msg, "y.conf"));
    /* from a file: its line */
    assert_int_equal(config_parse_string("probe {\n\n  directory = bench\n}\n", "z.conf", &c, &e),
                     0);
    assert_int_equal(config_fill(&c, &t, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "z.conf:3: probe: directory = bench needs a url"));
    assert_int_equal(config_set(&c, "probe", "directory", "bench", &e), 0);
    /* A url makes client trials fine again. */
    assert_int_equal(config_set(&c, "tune", "trials", "client", &e), 0);
    assert_int_equal(config_set(&c, "probe", "url", "smb://peer/s", &e), 0);
    assert_int_equal(config_fill(&c, &t, &e), 0);
    assert_false(t.own_share);
    assert_int_equal(t.trials, TUNER_CLIENT);
}

/* A state_dir too long for a shadow smbd's socket is refused where shadow
 * trials would run (56 bytes pass, 57 do not), naming its line, and kept
 * where they never run (client trials on a peer's share). */
static void test_fill_state_dir_too_long_for_shadows(void **state)
{
    char text[256], dir[64];
    struct config c;
    struct tuner_opts t;
    struct err e = {{0}};

    (void)state;
    assert_int_equal(TRIAL_STATE_DIR_MAX, 56);
    snprintf(dir, sizeof(dir), "/%055d", 0);
    snprintf(text, sizeof(text), "tune {\n  state_dir = \"%s\"\n}\n", dir);
    assert_int_equal(config_parse_string(text, "x.conf", &c, &e), 0);
    assert_int_equal(config_fill(&c, &t, &e), 0);
    snprintf(dir, sizeof(dir), "/%056d", 0);
    snprintf(text, sizeof(text), "tune {\n  state_dir = \"%s\"\n}\n", dir);
    assert_int_equal(config_parse_string(text, "x.conf", &c, &e), 0);
    assert_int_equal(config_fill(&c, &t, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "x.conf:2: tune: state_dir = /0000"));
    assert_non_null(strstr(e.msg, "is 57 bytes: shadow trials need 56 at most"));
    /* a local url runs shadow trials too; the command line has no line */
    assert_int_equal(config_set(&c, "probe", "url", "smb://127.0.0.1/s", &e), 0);
    assert_int_equal(config_set(&c, "tune", "state_dir", dir, &e), 0);
    assert_int_equal(config_fill(&c, &t, &e), -EINVAL);
    assert_true(strncmp(e.msg, "tune: state_dir = /", 19) == 0);
    /* a peer's share: client trials, no shadow below state_dir */
    assert_int_equal(config_set(&c, "probe", "url", "smb://peer/s", &e), 0);
    assert_int_equal(config_fill(&c, &t, &e), 0);
    assert_int_equal(t.trials, TUNER_CLIENT);
}

/* Where state_dir was set, for the SIGHUP that refuses a change of it
 * (cmd_run.c): "FILE:LINE" from a file, "" for the default and for the
 * command line's --state-dir. */
static void test_state_dir_where(void **state)
{
    struct config c;
    struct err e = {{0}};

    (void)state;
    assert_int_equal(config_parse_string("probe {\n}\ntune {\n  mode = advise\n"
                                         "  state_dir = /srv/st\n}\n",
                                         "x.conf", &c, &e),
                     0);
    assert_string_equal(c.tune.state_dir, "/srv/st");
    assert_string_equal(c.tune.state_dir_where, "x.conf:5");
    assert_int_equal(config_parse_string("tune {\n  mode = advise\n}\n", "y.conf", &c, &e), 0);
    assert_string_equal(c.tune.state_dir, CONFIG_DEFAULT_STATE_DIR);
    assert_string_equal(c.tune.state_dir_where, "");
    config_defaults(&c);
    assert_string_equal(c.tune.state_dir_where, "");
    /* The command line's --state-dir overrides the file: no line then. */
    assert_int_equal(config_parse_string("tune {\n  state_dir = /srv/st\n}\n", "z.conf", &c, &e),
                     0);
    assert_string_equal(c.tune.state_dir_where, "z.conf:2");
    assert_int_equal(config_set(&c, "tune", "state_dir", "/srv/other", &e), 0);
    assert_string_equal(c.tune.state_dir, "/srv/other");
    assert_string_equal(c.tune.state_dir_where, "");
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
        cmocka_unit_test(test_too_large),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_shipped_config_parses),
        cmocka_unit_test(test_documented_defaults),
        cmocka_unit_test(test_set_overrides),
        cmocka_unit_test(test_fill_defaults),
        cmocka_unit_test(test_fill_from_file),
        cmocka_unit_test(test_fill_trials),
        cmocka_unit_test(test_deadline_short_for_the_duration),
        cmocka_unit_test(test_live_far),
        cmocka_unit_test(test_fill_no_url_trials),
        cmocka_unit_test(test_fill_state_dir_too_long_for_shadows),
        cmocka_unit_test(test_state_dir_where),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
