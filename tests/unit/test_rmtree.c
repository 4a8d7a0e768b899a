/* Unit tests for lib/rmtree: what is ours goes, nothing else, never through
 * a link. Each test works in a directory of its own under $TMPDIR or /tmp;
 * the tests that need another owner (chown) or a bind mount skip when not
 * root. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "rmtree.h"

#define NOBODY 65534

static char base[PATH_MAX];

static int setup(void **state)
{
    const char *t = getenv("TMPDIR");

    (void)state;
    snprintf(base, sizeof(base), "%s/test_rmtree-XXXXXX", t && t[0] ? t : "/tmp");
    return mkdtemp(base) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    char cmd[PATH_MAX + 32];

    (void)state;
    /* Whatever a test left (on purpose: someone else's files). */
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *at(const char *rel)
{
    static char buf[4][PATH_MAX];
    static int i;

    i = (i + 1) % 4;
    if ((size_t)snprintf(buf[i], sizeof(buf[i]), "%s/%s", base, rel) >= sizeof(buf[i]))
        fail_msg("path too long: %s", rel);
    return buf[i];
}

static void mk(const char *rel)
{
    assert_int_equal(mkdir(at(rel), 0700), 0);
}

static void put(const char *rel)
{
    int fd = open(at(rel), O_WRONLY | O_CREAT | O_EXCL, 0600);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, "x", 1), 1);
    close(fd);
}

static bool exists(const char *rel)
{
    struct stat st;

    return lstat(at(rel), &st) == 0;
}

static void skip_unless_root(void)
{
    if (geteuid() != 0)
        skip();
}

static void test_removes_a_tree_of_ours(void **state)
{
    struct err e = {{0}};

    (void)state;
    mk("t");
    mk("t/a");
    mk("t/a/b");
    put("t/f");
    put("t/a/b/g");
    assert_int_equal(mkfifo(at("t/a/fifo"), 0600), 0);
    assert_int_equal(symlink("/nonexistent", at("t/dangling")), 0);
    assert_int_equal(rmtree_path(at("t"), &e), 0);
    assert_false(exists("t"));
}

static void test_missing_is_no_error(void **state)
{
    struct err e = {{0}};

    (void)state;
    assert_int_equal(rmtree_path(at("nothing"), &e), 0);
    assert_int_equal(rmtree_path(at("nothing/below"), &e), 0);
}

static void test_symlink_at_top_is_left_alone(void **state)
{
    struct err e = {{0}};

    (void)state;
    mk("target");
    put("target/keep");
    assert_int_equal(symlink(at("target"), at("link")), 0);
    assert_int_equal(rmtree_path(at("link"), &e), -ELOOP);
    assert_non_null(strstr(e.msg, "symlink"));
    assert_true(exists("link"));
    assert_true(exists("target/keep"));
    /* The same through rmtree_at, and with a trailing slash. */
    assert_int_equal(rmtree_path(at("link/"), &e), -ELOOP);
    assert_true(exists("target/keep"));
}

static void test_symlink_inside_goes_its_target_stays(void **state)
{
    struct err e = {{0}};

    (void)state;
    mk("target");
    put("target/one");
    put("target/two");
    mk("t");
    mk("t/sub");
    assert_int_equal(symlink(at("target"), at("t/sub/link")), 0);
    assert_int_equal(symlink(at("target/one"), at("t/filelink")), 0);
    assert_int_equal(rmtree_path(at("t"), &e), 0);
    assert_false(exists("t"));
    assert_true(exists("target/one"));
    assert_true(exists("target/two"));
}

static void test_someone_elses_subdir_stays(void **state)
{
    struct err e = {{0}};

    (void)state;
    skip_unless_root();
    mk("t");
    mk("t/mine");
    put("t/mine/f");
    mk("t/a");
    mk("t/a/theirs");
    put("t/a/theirs/f");
    put("t/a/theirfile");
    assert_int_equal(chown(at("t/a/theirs"), NOBODY, NOBODY), 0);
    assert_int_equal(rmtree_path(at("t"), &e), -EPERM);
    assert_non_null(strstr(e.msg, "owned by uid 65534"));
    /* Theirs and what holds it stay; the rest is gone. */
    assert_true(exists("t/a/theirs/f"));
    assert_false(exists("t/mine"));
    assert_false(exists("t/a/theirfile"));
}

static void test_someone_elses_file_stays(void **state)
{
    struct err e = {{0}};

    (void)state;
    skip_unless_root();
    mk("t");
    put("t/theirs");
    assert_int_equal(lchown(at("t/theirs"), NOBODY, NOBODY), 0);
    assert_int_equal(symlink("/etc/passwd", at("t/theirlink")), 0);
    assert_int_equal(lchown(at("t/theirlink"), NOBODY, NOBODY), 0);
    assert_int_equal(rmtree_path(at("t"), &e), -EPERM);
    assert_true(exists("t/theirs"));
    assert_true(exists("t/theirlink"));
}

static void test_someone_elses_top_is_not_entered(void **state)
{
    struct err e = {{0}};

    (void)state;
    skip_unless_root();
    mk("t");
    mk("t/sub");
    put("t/sub/f");
    assert_int_equal(chown(at("t"), NOBODY, NOBODY), 0);
    assert_int_equal(rmtree_path(at("t"), &e), -EPERM);
    assert_true(exists("t/sub/f"));
}

static void test_not_a_directory_at_top(void **state)
{
    struct err e = {{0}};
    int fd;

    (void)state;
    put("file");
    assert_int_equal(rmtree_path(at("file"), &e), -ENOTDIR);
    assert_true(exists("file"));
    fd = open(base, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    assert_int_equal(rmtree_at(fd, "a/b", &e), -EINVAL);
    assert_int_equal(rmtree_at(fd, "..", &e), -EINVAL);
    assert_int_equal(rmtree_at(fd, "file", &e), -ENOTDIR);
    close(fd);
}

/* A chain of `levels` directories below t, each with a file. */
static void chain(int levels)
{
    char rel[PATH_MAX] = "t";

    mk(rel);
    for (int i = 0; i < levels; i++) {
        char f[PATH_MAX];

        strcat(rel, "/d");
        mk(rel);
        if ((size_t)snprintf(f, sizeof(f), "%s/f", rel) >= sizeof(f))
            fail();
        put(f);
    }
}

static void test_deep_tree(void **state)
{
    struct err e = {{0}};
    int fd;

    (void)state;
    chain(RMTREE_MAX_DEPTH);
    fd = open(base, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    assert_int_equal(rmtree_at(fd, "t", &e), 0);
    assert_false(exists("t"));
    /* Deeper than the bound: what is below it stays, and what holds it;
     * nothing is removed by path instead. */
    chain(RMTREE_MAX_DEPTH + 3);
    assert_int_equal(rmtree_at(fd, "t", &e), -ELOOP);
    assert_true(exists("t/d/d"));
    assert_false(exists("t/d/f"));
    close(fd);
}

static void test_mount_point_is_not_entered(void **state)
{
    struct err e = {{0}};

    (void)state;
    skip_unless_root();
    mk("src");
    put("src/keep");
    mk("t");
    mk("t/mnt");
    put("t/f");
    /* A bind mount of the same file system: st_dev alone would not see it. */
    if (mount(at("src"), at("t/mnt"), "none", MS_BIND, NULL) < 0)
        skip();
    assert_int_equal(rmtree_path(at("t"), &e), -EXDEV);
    assert_non_null(strstr(e.msg, "mount point"));
    assert_int_equal(umount2(at("t/mnt"), MNT_DETACH), 0);
    assert_true(exists("src/keep"));
    assert_false(exists("t/f"));
    assert_true(exists("t/mnt"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_removes_a_tree_of_ours, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_is_no_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_at_top_is_left_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_inside_goes_its_target_stays, setup, teardown),
        cmocka_unit_test_setup_teardown(test_someone_elses_subdir_stays, setup, teardown),
        cmocka_unit_test_setup_teardown(test_someone_elses_file_stays, setup, teardown),
        cmocka_unit_test_setup_teardown(test_someone_elses_top_is_not_entered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_directory_at_top, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deep_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mount_point_is_not_entered, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
