/* Unit tests for lib/trial's pure parts: the shadow's config text, the
 * reading of /proc/PID/stat and of the run directory's trial.pid. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trial.h"

static char *render_share(const char *value, const char *own_share)
{
    struct trial_share own = {.dir = own_share, .name = "smbtuned-probe-0123abcd"};
    struct err e = {{0}};
    char *text = NULL;

    assert_int_equal(trial_shadow_render("/etc/samba/smb.conf", "/var/lib/smbtuned/shadow/r", 4455,
                                         value, own_share ? &own : NULL, &text, &e),
                     0);
    assert_non_null(text);
    return text;
}

static char *render_ok(const char *value)
{
    return render_share(value, NULL);
}

/* Position of the line `line` in text (it must be there, whole). */
static const char *line_at(const char *text, const char *line)
{
    size_t n = strlen(line);

    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return p;
    fail_msg("line '%s' not in:\n%s", line, text);
    return NULL;
}

static void test_render_include_then_overrides(void **state)
{
    char *t = render_ok("TCP_NODELAY SO_RCVBUF=262144");
    const char *inc, *second, *so;

    (void)state;
    /* Production first, then a fresh [global] with the overrides, so that
     * the last occurrence (ours) wins even after a share section. */
    inc = line_at(t, "\tinclude = /etc/samba/smb.conf");
    second = strstr(inc, "\n[global]\n");
    assert_non_null(second);
    so = line_at(t, "\tsocket options = TCP_NODELAY SO_RCVBUF=262144");
    assert_true(so > second);
    assert_true(line_at(t, "\tsmb ports = 4455") > second);
    assert_true(line_at(t, "\tinterfaces = 127.0.0.1") > second);
    assert_true(line_at(t, "\tbind interfaces only = yes") > second);
    assert_true(line_at(t, "\tpid directory = /var/lib/smbtuned/shadow/r/pid") > second);
    assert_true(line_at(t, "\tlock directory = /var/lib/smbtuned/shadow/r/lock") > second);
    /* Production's `clustering = yes` would open the lock directory's
     * databases through ctdbd, production's own. */
    assert_true(line_at(t, "\tclustering = no") > second);
    /* With a url, users and passwords, share ACLs: production's; and who
     * may connect, as production says. */
    assert_null(strstr(t, "private dir"));
    assert_null(strstr(t, "hosts allow"));
    assert_null(strstr(t, "hosts deny"));
    assert_null(strstr(t, "state directory"));
    /* Nothing after the overrides could reopen a section. */
    assert_null(strchr(second + 2, '['));
    free(t);
}

static void test_render_auto_and_empty(void **state)
{
    char *t;

    (void)state;
    t = render_ok("TCP_NODELAY");
    line_at(t, "\tsocket options = TCP_NODELAY");
    free(t);
    t = render_ok("");
    line_at(t, "\tsocket options = ");
    free(t);
}

static void test_render_refuses(void **state)
{
    struct err e = {{0}};
    char *text = NULL;
    const char *ok_conf = "/etc/samba/smb.conf", *ok_run = "/run/x";

    (void)state;
    /* A newline would add a parameter of the candidate's choosing. */
    assert_int_equal(
        trial_shadow_render(ok_conf, ok_run, 445, "TCP_NODELAY\nsmb ports = 445", NULL, &text, &e),
        -EINVAL);
    assert_int_equal(trial_shadow_render(ok_conf, ok_run, 445, "A\rB", NULL, &text, &e), -EINVAL);
    /* A final backslash continues the line. */
    assert_int_equal(trial_shadow_render(ok_conf, ok_run, 445, "TCP_NODELAY\\", NULL, &text, &e),
                     -EINVAL);
    /* Paths: absolute, no %-macros, no newline. */
    assert_int_equal(trial_shadow_render("smb.conf", ok_run, 445, "", NULL, &text, &e), -EINVAL);
    assert_int_equal(trial_shadow_render(ok_conf, "/run/%m", 445, "", NULL, &text, &e), -EINVAL);
    assert_int_equal(trial_shadow_render(ok_conf, "/run/a\nb", 445, "", NULL, &text, &e), -EINVAL);
    assert_int_equal(trial_shadow_render(NULL, ok_run, 445, "", NULL, &text, &e), -EINVAL);
    assert_int_equal(trial_shadow_render(ok_conf, ok_run, 445, NULL, NULL, &text, &e), -EINVAL);
    assert_int_equal(trial_shadow_render(ok_conf, ok_run, 0, "", NULL, &text, &e), -ERANGE);
    assert_int_equal(trial_shadow_render(ok_conf, ok_run, 65536, "", NULL, &text, &e), -ERANGE);
    assert_null(text);
    assert_true(strlen(e.msg) > 0);
}

/* Every line of lines[] is in the text from after on, whole (a line may
 * also be there before it). */
static void lines_after(const char *after, const char *const *lines, size_t n)
{
    for (size_t i = 0; i < n; i++)
        line_at(after, lines[i]);
}

/* No url: the shadow serves a directory of the daemon's as a guest share,
 * and every directory smbd writes is the run directory's. */
static void test_render_own_share(void **state)
{
    char *t = render_share("TCP_NODELAY", "/var/lib/smbtuned/share");
    const char *second, *share;
    static const char *const globals[] = {
        "\tpid directory = /var/lib/smbtuned/shadow/r/pid",
        "\tlock directory = /var/lib/smbtuned/shadow/r/lock",
        "\tcache directory = /var/lib/smbtuned/shadow/r/cache",
        "\tncalrpc dir = /var/lib/smbtuned/shadow/r/ncalrpc",
        "\tstate directory = /var/lib/smbtuned/shadow/r/state",
        "\tprivate dir = /var/lib/smbtuned/shadow/r/private",
        "\tpassdb backend = tdbsam:/var/lib/smbtuned/shadow/r/private/passdb.tdb",
        "\tclustering = no",
        "\tsecurity = user",
        "\tserver role = standalone server",
        "\tmap to guest = bad user",
        "\tsocket options = TCP_NODELAY",
    };
    static const char *const share_lines[] = {
        "\tpath = /var/lib/smbtuned/share",
        "\tguest only = yes",
        "\tforce user = root",
        "\thosts allow = 127.0.0.1",
        "\tbrowseable = no",
        "\tvfs objects = ",
        "\tread only = no",
        /* what a share copies from production's [global] */
        "\tvalid users = ",
        "\tinvalid users = ",
        "\tveto files = ",
    };

    (void)state;
    second = strstr(line_at(t, "\tinclude = /etc/samba/smb.conf"), "\n[global]\n");
    assert_non_null(second);
    /* Production's auth settings are overridden after the include; its
     * [global] hosts lists are not (that would open its shares on this
     * shadow to 127.0.0.1: trial_render.c). */
    lines_after(second, globals, sizeof(globals) / sizeof(globals[0]));
    assert_null(strstr(t, "hosts deny"));
    assert_true(strstr(t, "\thosts allow = 127.0.0.1") > line_at(t, "[smbtuned-probe-0123abcd]"));
    /* The share comes last, after every global override. */
    share = line_at(t, "[smbtuned-probe-0123abcd]");
    assert_true(share > line_at(t, "\tsocket options = TCP_NODELAY"));
    lines_after(share, share_lines, sizeof(share_lines) / sizeof(share_lines[0]));
    /* Nothing after it opens another section. */
    assert_null(strchr(share + 1, '['));
    free(t);
}

static void test_render_own_share_refuses(void **state)
{
    static const struct trial_share bad[] = {
        {"share", "smbtuned-probe-1"},
        {"/var/%U", "smbtuned-probe-1"},
        {"/a\nb", "smbtuned-probe-1"},
        {"/srv/p", "x]\n[global"},
        {"/srv/p", "smbtuned-probe-%U"},
        {"/srv/p", ""},
        {"/srv/p", NULL},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct err e = {{0}};
        char *text = NULL;

        assert_int_equal(
            trial_shadow_render("/etc/samba/smb.conf", "/run/x", 445, "", &bad[i], &text, &e),
            -EINVAL);
        assert_null(text);
        assert_non_null(strstr(e.msg, "own share"));
    }
}

static void test_owner_roundtrip(void **state)
{
    struct trial_owner o = {.owner_pid = 17,
                            .owner_start = 123456789012ULL,
                            .smbd_pid = 0,
                            .smbd_start = 0},
                       back;
    char buf[128];

    (void)state;
    assert_int_equal(trial_owner_format(&o, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "owner 17 123456789012\nsmbd 0 0\n");
    assert_int_equal(trial_owner_parse(buf, &back), 0);
    assert_int_equal(back.owner_pid, 17);
    assert_true(back.owner_start == 123456789012ULL);
    assert_int_equal(back.smbd_pid, 0);
    o.smbd_pid = 4242;
    o.smbd_start = 99;
    assert_int_equal(trial_owner_format(&o, buf, sizeof(buf)), 0);
    assert_int_equal(trial_owner_parse(buf, &back), 0);
    assert_int_equal(back.smbd_pid, 4242);
    assert_true(back.smbd_start == 99);
    assert_int_equal(trial_owner_format(&o, buf, 8), -ENOSPC);
}

static void test_owner_refuses(void **state)
{
    struct trial_owner o;

    (void)state;
    /* Numbers from a file: no signs, no junk, owner pid at least 1. */
    assert_int_equal(trial_owner_parse("owner -1 5\nsmbd 0 0\n", &o), -EINVAL);
    assert_int_equal(trial_owner_parse("owner 0 5\nsmbd 0 0\n", &o), -EINVAL);
    assert_int_equal(trial_owner_parse("owner 12x 5\nsmbd 0 0\n", &o), -EINVAL);
    assert_int_equal(trial_owner_parse("owner 12 5\nsmbd 99999999999 0\n", &o), -EINVAL);
    assert_int_equal(trial_owner_parse("owner 12 5\n", &o), -EINVAL);
    assert_int_equal(trial_owner_parse("", &o), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_include_then_overrides),
        cmocka_unit_test(test_render_auto_and_empty),
        cmocka_unit_test(test_render_refuses),
        cmocka_unit_test(test_render_own_share),
        cmocka_unit_test(test_render_own_share_refuses),
        cmocka_unit_test(test_owner_roundtrip),
        cmocka_unit_test(test_owner_refuses),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
