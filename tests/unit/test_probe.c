/* Unit tests for the pure parts of lib/probe: URL parsing and formatting,
 * credentials files (text and the owner/mode checks), the errno-to-outcome
 * mapping and the JSON line. The measurement itself is tested against a
 * real smbd in tests/integration/test_probe.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe.h"

static void check_url(const char *url, const char *host, unsigned port, const char *share,
                      const char *dir)
{
    struct probe_url u;
    struct err e = {{0}};

    assert_int_equal(probe_parse_url(url, &u, &e), 0);
    assert_string_equal(u.host, host);
    assert_int_equal(u.port, port);
    assert_string_equal(u.share, share);
    assert_string_equal(u.dir, dir);
}

static void check_bad_url(const char *url, const char *why)
{
    struct probe_url u;
    struct err e = {{0}};

    assert_int_equal(probe_parse_url(url, &u, &e), -EINVAL);
    if (strstr(e.msg, why) == NULL)
        fail_msg("message for '%s' is '%s', expected it to mention '%s'", url, e.msg, why);
}

static void test_url_ok(void **state)
{
    (void)state;
    check_url("smb://127.0.0.1/share", "127.0.0.1", 0, "share", "");
    check_url("smb://127.0.0.1:4455/share", "127.0.0.1", 4455, "share", "");
    check_url("smb://fileserver/data/", "fileserver", 0, "data", "");
    check_url("smb://fs.example.org/data/a/b", "fs.example.org", 0, "data", "a/b");
    check_url("smb://fs/data//a///b/", "fs", 0, "data", "a/b");
    check_url("SMB://fs/data", "fs", 0, "data", "");
    check_url("smb://[::1]:445/share/dir", "::1", 445, "share", "dir");
    check_url("smb://[fe80::1]/share", "fe80::1", 0, "share", "");
    check_url("smb://fs/data/.smbtuned", "fs", 0, "data", ".smbtuned");
}

static void test_url_bad(void **state)
{
    (void)state;
    check_bad_url("http://fs/share", "smb://");
    check_bad_url("fs/share", "smb://");
    check_bad_url("smb://", "no host");
    check_bad_url("smb://fs", "no share");
    check_bad_url("smb://fs/", "no share");
    check_bad_url("smb://:445/share", "no host");
    check_bad_url("smb://fs:0/share", "port");
    check_bad_url("smb://fs:65536/share", "port");
    check_bad_url("smb://fs:44x/share", "port");
    check_bad_url("smb://fs:/share", "port");
    check_bad_url("smb://fs:-1/share", "port");
    check_bad_url("smb://[::1/share", "unclosed");
    check_bad_url("smb://[::1]x/share", "port");
    check_bad_url("smb://user:secret@fs/share", "credentials file");
    check_bad_url("smb://fs/share/../etc", "'..'");
    check_bad_url("smb://fs/share/./x", "'.'");
    check_bad_url("smb://fs/sh are", "share name");
    check_bad_url("smb://fs/share?x=1", "share name");
    check_bad_url("smb://fs/share/d?x", "reserve");
}

static void test_url_message_never_shows_password(void **state)
{
    struct probe_url u;
    struct err e = {{0}};

    (void)state;
    assert_int_equal(probe_parse_url("smb://me:hunter2@fs/share", &u, &e), -EINVAL);
    assert_null(strstr(e.msg, "hunter2"));
}

static void check_format(const char *url, const char *extra, const char *want)
{
    struct probe_url u;
    struct err e = {{0}};
    char out[4096];

    assert_int_equal(probe_parse_url(url, &u, &e), 0);
    assert_int_equal(probe_format_url(&u, extra, out, sizeof(out)), 0);
    assert_string_equal(out, want);
}

static void test_format_url(void **state)
{
    (void)state;
    check_format("smb://fs/share", NULL, "smb://fs/share");
    check_format("smb://fs/share/", "", "smb://fs/share");
    check_format("smb://fs:4455/share/a/b/", NULL, "smb://fs:4455/share/a/b");
    check_format("smb://fs/share/a", "probe/x", "smb://fs/share/a/probe/x");
    check_format("smb://fs/share", "/probe/", "smb://fs/share/probe");
    check_format("smb://[::1]:99/s/d", NULL, "smb://[::1]:99/s/d");
}

static void test_check_directory_and_socket_options(void **state)
{
    struct err e;

    (void)state;
    assert_int_equal(probe_check_directory("", &e), 0);
    assert_int_equal(probe_check_directory("a/b/.probe", &e), 0);
    assert_int_equal(probe_check_directory("/abs", &e), -EINVAL);
    assert_int_equal(probe_check_directory("a/../b", &e), -EINVAL);
    assert_int_equal(probe_check_directory("a b", &e), -EINVAL);
    assert_int_equal(probe_check_socket_options("TCP_NODELAY SO_RCVBUF=262144", &e), 0);
    assert_int_equal(probe_check_socket_options("", &e), -EINVAL);
    /* A line break or a continuation would add parameters to the private
     * smb.conf: refused. */
    assert_int_equal(probe_check_socket_options("TCP_NODELAY\ninclude = /x", &e), -EINVAL);
    assert_int_equal(probe_check_socket_options("TCP_NODELAY \\", &e), -EINVAL);
}

static void test_parse_credentials(void **state)
{
    struct probe_creds c;
    struct err e = {{0}};

    (void)state;
    assert_int_equal(probe_parse_credentials("username = alice\npassword = p=ss word \n"
                                             "# comment\n\n  domain=WORK\n",
                                             "f", &c, &e),
                     0);
    assert_string_equal(c.username, "alice");
    assert_string_equal(c.password, "p=ss word");
    assert_string_equal(c.domain, "WORK");

    /* CRLF and no final newline. */
    assert_int_equal(probe_parse_credentials("username=bob\r\npassword=x", "f", &c, &e), 0);
    assert_string_equal(c.username, "bob");
    assert_string_equal(c.password, "x");
    assert_string_equal(c.domain, "");
}

static void check_bad_creds(const char *text, const char *want)
{
    struct probe_creds c;
    struct err e = {{0}};

    assert_int_equal(probe_parse_credentials(text, "/etc/cred", &c, &e), -EINVAL);
    if (strstr(e.msg, want) == NULL)
        fail_msg("message '%s' lacks '%s'", e.msg, want);
    /* A refused file leaves nothing behind in memory. */
    assert_string_equal(c.password, "");
    /* Nothing of the file's text is shown: a malformed line may be mostly
     * password. */
    assert_null(strstr(e.msg, "s3cret"));
    assert_null(strstr(e.msg, "S3cr3t"));
    assert_null(strstr(e.msg, "passwd"));
}

static void test_parse_credentials_errors(void **state)
{
    char longline[400];

    (void)state;
    check_bad_creds("username = a\npassword s3cret\n", "/etc/cred:2: expected 'key = value'");
    check_bad_creds("username = a\npasswd = s3cret\n", "/etc/cred:2: unknown key");
    /* The key of `password S3cr3t=` is "password S3cr3t". */
    check_bad_creds("username = a\n\npassword S3cr3t=\n", "/etc/cred:3: unknown key");
    check_bad_creds("username = a\npassword S3cr3t = x\n", "/etc/cred:2: unknown key");
    check_bad_creds("username = a\nS3cr3t\n", "/etc/cred:2: expected 'key = value'");
    check_bad_creds("username = a\n S3cr3t=password\n", "/etc/cred:2: unknown key");
    snprintf(longline, sizeof(longline), "username = a\npassword = S3cr3t%0300d\n", 0);
    check_bad_creds(longline, "/etc/cred:2: the value is too long");
    check_bad_creds("password = s3cret\n", "no 'username");
    check_bad_creds("", "no 'username");
}

/* A credentials file in a private temporary directory. */
static char *cred_file(const char *text, mode_t mode, char *dir, size_t dirlen)
{
    static char path[4200];
    int fd;

    snprintf(dir, dirlen, "%s/test_probe.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/cred", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
    return path;
}

static void remove_cred(const char *path, const char *dir)
{
    unlink(path);
    rmdir(dir);
}

static void test_load_credentials_checks(void **state)
{
    static const mode_t refused[] = {0640, 0604, 0644, 0700, 0660, 04600, 0666};
    char dir[4096];
    struct probe_creds c;
    struct err e = {{0}};
    uid_t me = geteuid();
    char *path;
    size_t i;

    (void)state;
    path = cred_file("username = u\npassword = s3cret\n", 0600, dir, sizeof(dir));
    /* The owner the file must have is a parameter so that the test runs
     * as any user; production passes 0 (root). */
    assert_int_equal(probe_load_credentials(path, me, &c, &e), 0);
    assert_string_equal(c.password, "s3cret");
    probe_creds_clear(&c);
    assert_string_equal(c.password, "");
    assert_int_equal(chmod(path, 0400), 0);
    assert_int_equal(probe_load_credentials(path, me, &c, &e), 0);

    for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        assert_int_equal(chmod(path, refused[i]), 0);
        memset(&e, 0, sizeof(e));
        assert_int_equal(probe_load_credentials(path, me, &c, &e), -EPERM);
        assert_non_null(strstr(e.msg, "0600 or stricter"));
        assert_null(strstr(e.msg, "s3cret"));
    }

    assert_int_equal(chmod(path, 0600), 0);
    memset(&e, 0, sizeof(e));
    assert_int_equal(probe_load_credentials(path, me + 1, &c, &e), -EPERM);
    assert_non_null(strstr(e.msg, "owned by uid"));

    memset(&e, 0, sizeof(e));
    assert_int_equal(probe_load_credentials(dir, me, &c, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "not a regular file"));

    /* The parent's check keeps nothing and says the same. */
    assert_int_equal(probe_check_credentials(path, me, &e), 0);
    assert_int_equal(probe_check_credentials(path, me + 1, &e), -EPERM);

    /* A FIFO is refused at once, never waited on (with no writer, a
     * blocking open would hang here until the test's timeout). */
    {
        char fifo[4200];

        snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
        assert_int_equal(mkfifo(fifo, 0600), 0);
        memset(&e, 0, sizeof(e));
        assert_int_equal(probe_load_credentials(fifo, me, &c, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "not a regular file"));
        assert_non_null(strstr(e.msg, fifo));
        assert_int_equal(probe_check_credentials(fifo, me, &e), -EINVAL);
        unlink(fifo);
    }
    remove_cred(path, dir);

    memset(&e, 0, sizeof(e));
    assert_int_equal(probe_load_credentials(path, me, &c, &e), -ENOENT);
    assert_non_null(strstr(e.msg, path));
}

static void test_classify(void **state)
{
    (void)state;
    assert_int_equal(probe_classify_errno(ECONNREFUSED, true), PROBE_CONNECT_REFUSED);
    assert_int_equal(probe_classify_errno(ENOENT, true), PROBE_SHARE_NOT_FOUND);
    assert_int_equal(probe_classify_errno(ENODEV, true), PROBE_SHARE_NOT_FOUND);
    assert_int_equal(probe_classify_errno(ENOENT, false), PROBE_ERROR);
    assert_int_equal(probe_classify_errno(EPERM, true), PROBE_AUTH_FAILED);
    assert_int_equal(probe_classify_errno(EPERM, false), PROBE_ACCESS_DENIED);
    assert_int_equal(probe_classify_errno(EACCES, false), PROBE_ACCESS_DENIED);
    assert_int_equal(probe_classify_errno(EROFS, false), PROBE_ACCESS_DENIED);
    assert_int_equal(probe_classify_errno(ENOSPC, false), PROBE_DISK_FULL);
    assert_int_equal(probe_classify_errno(EDQUOT, false), PROBE_DISK_FULL);
    assert_int_equal(probe_classify_errno(EIO, false), PROBE_ERROR);
    assert_int_equal(probe_classify_errno(ETIMEDOUT, true), PROBE_ERROR);
}

static void test_outcome_names(void **state)
{
    (void)state;
    /* Outside checks rely on these spellings. */
    assert_string_equal(probe_outcome_name(PROBE_OK), "ok");
    assert_string_equal(probe_outcome_name(PROBE_TIMEOUT), "timeout");
    assert_string_equal(probe_outcome_name(PROBE_CONNECT_REFUSED), "connect_refused");
    assert_string_equal(probe_outcome_name(PROBE_NAME_NOT_FOUND), "name_not_found");
    assert_string_equal(probe_outcome_name(PROBE_AUTH_FAILED), "auth_failed");
    assert_string_equal(probe_outcome_name(PROBE_SHARE_NOT_FOUND), "share_not_found");
    assert_string_equal(probe_outcome_name(PROBE_ACCESS_DENIED), "access_denied");
    assert_string_equal(probe_outcome_name(PROBE_DISK_FULL), "disk_full");
    assert_string_equal(probe_outcome_name(PROBE_ERROR), "error");
    assert_string_equal(probe_outcome_name((enum probe_outcome)99), "error");
}

static void test_json(void **state)
{
    struct probe_result r;
    char line[512];

    (void)state;
    memset(&r, 0, sizeof(r));
    r.outcome = PROBE_TIMEOUT;
    r.write_bytes = 1000000;
    r.write_s = 0.5;
    r.write_mbps = 2.0;
    r.client_rcvbuf = 524288;
    r.client_sndbuf = -1;
    assert_int_equal(probe_result_json(&r, line, sizeof(line)), 0);
    assert_string_equal(line, "{\"outcome\":\"timeout\",\"write_mbps\":2.000,\"read_mbps\":0.000,"
                              "\"write_bytes\":1000000,\"read_bytes\":0,\"write_s\":0.500000,"
                              "\"read_s\":0.000000,\"client_rcvbuf\":524288,"
                              "\"client_sndbuf\":-1}");
    assert_int_equal(probe_result_json(&r, line, 20), -ENOSPC);
}

static void test_start_refuses_bad_params(void **state)
{
    struct probe_params p;
    struct probe_job job;
    struct err e = {{0}};

    (void)state;
    probe_params_default(&p);
    assert_int_equal(probe_start(&p, &job, &e), -EINVAL);
    p.url = "smb://127.0.0.1/share";
    p.request_size = PROBE_MAX_REQUEST_SIZE + 1;
    assert_int_equal(probe_start(&p, &job, &e), -EINVAL);
    probe_params_default(&p);
    p.url = "smb://127.0.0.1/share";
    p.socket_options = "TCP_NODELAY\n[x]";
    assert_int_equal(probe_start(&p, &job, &e), -EINVAL);
    p.socket_options = NULL;
    p.directory = "../up";
    assert_int_equal(probe_start(&p, &job, &e), -EINVAL);
}

/* A pid no process has now. */
static long dead_pid(void)
{
    for (long pid = 4194303; pid > 300; pid--) {
        if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
            return pid;
    }
    fail_msg("no free pid");
    return -1;
}

/* dir/rel, in one of a few static buffers. */
static const char *in(const char *dir, const char *rel)
{
    static char buf[4][8192];
    static int i;

    i = (i + 1) % 4;
    if ((size_t)snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, rel) >= sizeof(buf[i]))
        fail_msg("path too long");
    return buf[i];
}

static bool exists_in(const char *dir, const char *rel)
{
    struct stat st;

    return lstat(in(dir, rel), &st) == 0;
}

static void mkdir_in(const char *dir, const char *rel, uid_t owner)
{
    assert_int_equal(mkdir(in(dir, rel), 0755), 0);
    assert_int_equal(lchown(in(dir, rel), owner, owner), 0);
}

static void file_in(const char *dir, const char *rel, uid_t owner)
{
    int fd = open(in(dir, rel), O_WRONLY | O_CREAT | O_EXCL, 0644);

    assert_true(fd >= 0);
    assert_int_equal(fchown(fd, owner, owner), 0);
    close(fd);
}

/* Without a state directory the probe works in $TMPDIR, where anyone can
 * plant a tree named like a dead probe's: someone else's stays, whole; one
 * of ours goes, but not what its links point to; the probe's own goes. */
static void test_tmpdir_sweep_removes_only_ours(void **state)
{
    char tmp[4096], theirs[128], theirs_sub[160], ours[128], link[160], cmd[4200];
    const char *old = getenv("TMPDIR");
    struct probe_params p;
    struct probe_result r;
    struct probe_job job;
    struct err e = {{0}};
    struct pollfd pfd;
    struct dirent *de;
    long pid = dead_pid();
    int n = 0;
    DIR *d;

    (void)state;
    if (geteuid() != 0)
        skip();
    snprintf(tmp, sizeof(tmp), "%s/test_probe_tmp.XXXXXX", old ? old : "/tmp");
    assert_non_null(mkdtemp(tmp));
    snprintf(theirs, sizeof(theirs), PROBE_WORKDIR_PREFIX "%ld-aaaaaa", pid);
    snprintf(theirs_sub, sizeof(theirs_sub), "%s/.smb", theirs);
    snprintf(ours, sizeof(ours), PROBE_WORKDIR_PREFIX "%ld-bbbbbb", pid);
    snprintf(link, sizeof(link), "%s/link", ours);
    mkdir_in(tmp, theirs, 65534);
    mkdir_in(tmp, theirs_sub, 65534);
    file_in(tmp, in(theirs_sub, "smb.conf"), 65534);
    mkdir_in(tmp, "precious", 0);
    file_in(tmp, "precious/f", 0);
    mkdir_in(tmp, ours, 0);
    assert_int_equal(symlink(in(tmp, "precious"), in(tmp, link)), 0);

    setenv("TMPDIR", tmp, 1);
    probe_params_default(&p);
    p.url = "smb://127.0.0.1:1/share"; /* refused at once */
    p.deadline_s = 30;
    assert_int_equal(probe_start(&p, &job, &e), 0);
    pfd.fd = job.fd;
    pfd.events = POLLIN;
    assert_int_equal(poll(&pfd, 1, 30000), 1);
    assert_int_equal(probe_finish(&job, &r, &e), 0);
    if (old)
        setenv("TMPDIR", old, 1);
    else
        unsetenv("TMPDIR");

    assert_int_equal(r.outcome, PROBE_CONNECT_REFUSED);
    assert_true(exists_in(tmp, in(theirs_sub, "smb.conf")));
    assert_false(exists_in(tmp, ours));
    assert_true(exists_in(tmp, "precious/f"));
    /* Nothing of this probe's own is left: theirs and precious only. */
    d = opendir(tmp);
    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    closedir(d);
    assert_int_equal(n, 2);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_ok),
        cmocka_unit_test(test_url_bad),
        cmocka_unit_test(test_url_message_never_shows_password),
        cmocka_unit_test(test_format_url),
        cmocka_unit_test(test_check_directory_and_socket_options),
        cmocka_unit_test(test_parse_credentials),
        cmocka_unit_test(test_parse_credentials_errors),
        cmocka_unit_test(test_load_credentials_checks),
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_outcome_names),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_start_refuses_bad_params),
        cmocka_unit_test(test_tmpdir_sweep_removes_only_ours),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
