/* Unit tests for lib/util: reads that cannot hang, output of any length,
 * a replace that keeps the file's metadata, JSON that is always UTF-8. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "util.h"

/* A hang must fail the test, not stall CI: SIGALRM ends the process. */
#define HANG_S 20

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/test_util.XXXXXX");
    return mkdtemp(dir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static char *path_in(const char *name)
{
    static char p[128];

    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return p;
}

static void test_read_fifo_refused(void **state)
{
    struct err e = {{0}};
    char *buf = NULL, *p = path_in("fifo");
    size_t len;

    (void)state;
    assert_int_equal(mkfifo(p, 0600), 0);
    alarm(HANG_S);
    assert_int_equal(util_read_file_err(p, &buf, &len, &e), -EINVAL);
    alarm(0);
    assert_non_null(strstr(e.msg, p));
    assert_non_null(strstr(e.msg, "is a FIFO"));
    assert_int_equal(util_read_file(p, &buf, &len), -EINVAL);
    assert_int_equal(util_read_file_err("/dev/null", &buf, &len, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "character device"));
    assert_int_equal(util_read_file_err(dir, &buf, &len, &e), -EISDIR);
    assert_null(buf);
}

static void test_run_alloc_long_output(void **state)
{
    char *argv[] = {"sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; echo err >&2", NULL};
    char *out, *errout;
    int status;

    (void)state;
    assert_int_equal(util_run_alloc(argv, 30, UTIL_MAX_FILE, &out, &errout, &status), 0);
    assert_int_equal(status, 0);
    assert_int_equal(strlen(out), 300000);
    assert_int_equal(strspn(out, "x"), 300000);
    assert_string_equal(errout, "err\n");
    free(out);
    free(errout);
    /* more than the bound: an error, never half an answer */
    assert_int_equal(util_run_alloc(argv, 30, 100000, &out, NULL, &status), -EFBIG);
}

static void test_err_cut_marked(void **state)
{
    struct err e;
    char big[2000];

    (void)state;
    memset(big, 'v', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    err_set(&e, -EINVAL, "the reason: %s", big);
    assert_int_equal(strlen(e.msg), sizeof(e.msg) - 1);
    assert_int_equal(strncmp(e.msg, "the reason: ", 12), 0);
    assert_string_equal(e.msg + sizeof(e.msg) - 4, "...");
}

/* Whether this filesystem keeps user xattrs (tmpfs and ext4 do). */
static bool xattrs_work(const char *p)
{
    return setxattr(p, "user.probe", "1", 1, 0) == 0;
}

static void test_write_atomic_keeps_metadata(void **state)
{
    char *p = path_in("conf"), *buf, val[16];
    struct stat st, st2;
    struct err e;
    size_t len;
    ssize_t n;
    int fd;

    (void)state;
    fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "old\n", 4), 4);
    close(fd);
    /* setuid and setgid survive only when the owner is set first */
    assert_int_equal(chmod(p, 06640), 0);
    if (!xattrs_work(p))
        skip();
    assert_int_equal(setxattr(p, "user.note", "kept", 4, 0), 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(util_write_atomic(p, "new\n", 4, &st), 0);
    assert_int_equal(stat(p, &st2), 0);
    assert_int_equal(st2.st_mode, st.st_mode);
    assert_int_equal(st2.st_uid, st.st_uid);
    assert_int_equal(st2.st_gid, st.st_gid);
    n = getxattr(p, "user.note", val, sizeof(val));
    assert_int_equal(n, 4);
    assert_memory_equal(val, "kept", 4);
    assert_int_equal(getxattr(p, "user.probe", val, sizeof(val)), 1);
    assert_int_equal(util_read_file_err(p, &buf, &len, &e), 0);
    assert_string_equal(buf, "new\n");
    free(buf);

    /* not the file the caller judged: nothing written */
    assert_int_equal(util_write_atomic(p, "newer\n", 6, &st), -ESTALE);
    assert_int_equal(util_read_file_err(p, &buf, &len, &e), 0);
    assert_string_equal(buf, "new\n");
    free(buf);
}

/* Collect what util_json_string writes. */
static char *json(const char *s)
{
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);

    util_json_string(f, s);
    fclose(f);
    return out;
}

static void check_json(const char *in, const char *want)
{
    char *got = json(in);

    if (strcmp(got, want) != 0)
        fail_msg("JSON of '%s' is '%s', expected '%s'", in, got, want);
    free(got);
}

static void test_json_always_utf8(void **state)
{
    (void)state;
    check_json("a\"b\\c\n", "\"a\\\"b\\\\c\\u000a\"");
    /* well-formed UTF-8 passes unchanged: é, €, U+10348 */
    check_json("\xc3\xa9 \xe2\x82\xac \xf0\x90\x8d\x88",
               "\"\xc3\xa9 \xe2\x82\xac \xf0\x90\x8d\x88\"");
    /* a stray byte, a cut sequence, an overlong '/', a surrogate, above
     * U+10FFFF: each bad byte becomes U+FFFD */
    check_json("a\xff"
               "b",
               "\"a\\ufffdb\"");
    check_json("\xc3", "\"\\ufffd\"");
    check_json("\xe2\x82", "\"\\ufffd\\ufffd\"");
    check_json("\xc0\xaf", "\"\\ufffd\\ufffd\"");
    check_json("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
    check_json("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_fifo_refused),
        cmocka_unit_test(test_run_alloc_long_output),
        cmocka_unit_test(test_err_cut_marked),
        cmocka_unit_test(test_write_atomic_keeps_metadata),
        cmocka_unit_test(test_json_always_utf8),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
