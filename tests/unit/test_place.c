/* place: the tidy of the own share removes a killed probe's files and
 * nothing else, and only from a directory of smbtuned's own. A temporary
 * directory stands for STATE_DIR; no smbd. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "err.h"
#include "place.h"
#include "probe.h"
#include "rmtree.h"
#include "tuner_opts.h"

static char state_dir[64];
static char share[128];

static int setup(void **state)
{
    (void)state;
    snprintf(state_dir, sizeof(state_dir), "/tmp/test_place.XXXXXX");
    if (mkdtemp(state_dir) == NULL)
        return -1;
    snprintf(share, sizeof(share), "%s/" PLACE_OWN_SHARE_DIR, state_dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return rmtree_path(state_dir, NULL) < 0 ? -1 : 0;
}

static void put(const char *name)
{
    char path[256];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", share, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("x", f);
    assert_int_equal(fclose(f), 0);
}

static bool there(const char *name)
{
    char path[256];
    struct stat st;

    snprintf(path, sizeof(path), "%s/%s", share, name);
    return lstat(path, &st) == 0;
}

static struct tuner_opts opts(void)
{
    return (struct tuner_opts){.state_dir = state_dir, .own_share = true};
}

#define PROBE_FILE PROBE_FILE_PREFIX "127.0.0.1-99999-0123456789abcdef"

/* A probe's file goes; a file of another name, a directory and a link
 * under a probe's name stay. */
static void test_tidy_removes_probe_files_only(void **state)
{
    struct tuner_opts o = opts();
    char path[256];
    struct err e;

    (void)state;
    assert_int_equal(mkdir(share, 0700), 0);
    put(PROBE_FILE);
    put("report.pdf");
    snprintf(path, sizeof(path), "%s/" PROBE_FILE_PREFIX "dir", share);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/" PROBE_FILE_PREFIX "link", share);
    assert_int_equal(symlink("report.pdf", path), 0);

    assert_int_equal(place_tidy(&o, &e), 0);
    assert_false(there(PROBE_FILE));
    assert_true(there("report.pdf"));
    assert_true(there(PROBE_FILE_PREFIX "dir"));
    assert_true(there(PROBE_FILE_PREFIX "link"));
}

/* STATE_DIR/share that is not smbtuned's (mode 0755: with state_dir =
 * /srv, /srv/share may be a real share): nothing in it is touched, and
 * the error names it. */
static void test_tidy_leaves_a_share_not_ours(void **state)
{
    struct tuner_opts o = opts();
    struct err e;

    (void)state;
    assert_int_equal(mkdir(share, 0700), 0);
    assert_int_equal(chmod(share, 0755), 0);
    put(PROBE_FILE);
    assert_true(place_tidy(&o, &e) < 0);
    assert_non_null(strstr(e.msg, "not smbtuned's own share"));
    assert_non_null(strstr(e.msg, share));
    assert_true(there(PROBE_FILE));
}

/* A link in its place is not followed. */
static void test_tidy_refuses_a_link(void **state)
{
    struct tuner_opts o = opts();
    char target[128];
    struct err e;

    (void)state;
    snprintf(target, sizeof(target), "%s/elsewhere", state_dir);
    assert_int_equal(mkdir(target, 0700), 0);
    assert_int_equal(symlink("elsewhere", share), 0);
    snprintf(share, sizeof(share), "%s/elsewhere", state_dir);
    put(PROBE_FILE);
    snprintf(share, sizeof(share), "%s/" PLACE_OWN_SHARE_DIR, state_dir);
    assert_true(place_tidy(&o, &e) < 0);
    assert_non_null(strstr(e.msg, "symlink"));
    snprintf(share, sizeof(share), "%s/elsewhere", state_dir);
    assert_true(there(PROBE_FILE));
    snprintf(share, sizeof(share), "%s/" PLACE_OWN_SHARE_DIR, state_dir);
}

/* No directory yet: nothing to do. */
static void test_tidy_without_the_directory(void **state)
{
    struct tuner_opts o = opts();
    struct err e;

    (void)state;
    assert_int_equal(place_tidy(&o, &e), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tidy_removes_probe_files_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tidy_leaves_a_share_not_ours, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tidy_refuses_a_link, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tidy_without_the_directory, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
