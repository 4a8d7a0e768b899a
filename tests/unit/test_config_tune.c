/* Unit tests for lib/config_tune: the tune { ... } section's options,
 * text to typed values (enums, byte counts, durations, shares, a time
 * window, booleans), through the file and through config_set (the command
 * line), with the ranges each parser enforces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "config.h"
#include "search.h"
#include "tuner_opts.h"

/* tune's name = value through config_set on the defaults: 0 and c, or
 * refused with want in the message. */
static void set_ok(struct config *c, const char *name, const char *value)
{
    struct err e = {{0}};

    config_defaults(c);
    if (config_set(c, "tune", name, value, &e) != 0)
        fail_msg("%s = '%s' refused: %s", name, value, e.msg);
}

static void set_refused(const char *name, const char *value, int want_r, const char *want)
{
    struct config c;
    struct err e = {{0}};

    config_defaults(&c);
    assert_int_equal(config_set(&c, "tune", name, value, &e), want_r);
    if (strstr(e.msg, want) == NULL)
        fail_msg("%s = '%s': '%s', expected '%s'", name, value, e.msg, want);
}

/* Words become the enums once, here; sizes, durations, booleans typed. */
static void test_typed_values(void **state)
{
    struct config c;
    struct err e = {{0}};
    const char *text = "probe {\n  deadline = 45\n}\n"
                       "tune {\n"
                       "  mode = advise\n  trials = live\n  apply = signal\n"
                       "  interval = 90m\n  min_size = 8K\n  max_size = 2M\n"
                       "  min_gain = 5%\n  abort_ratio = 0.25\n  max_samples = 12\n"
                       "  max_bytes = 1G\n  busy_rate = 10M\n  window = 23:30-04:15\n"
                       "  tied = yes\n  restart_smbd = yes\n  smbd_unit = samba-ad-dc.service\n"
                       "}\n";

    (void)state;
    if (config_parse_string(text, "x.conf", &c, &e) != 0)
        fail_msg("%s", e.msg);
    assert_true(c.probe.deadline_s == 45.0);
    assert_int_equal(c.tune.mode, TUNER_ADVISE);
    assert_false(c.tune.trials_auto);
    assert_int_equal(c.tune.trials, TUNER_LIVE);
    assert_int_equal(c.tune.apply, APPLY_SIGNAL);
    assert_true(c.tune.interval_s == 5400.0);
    assert_int_equal(c.tune.min_size, 8192);
    assert_int_equal(c.tune.max_size, 2 * 1024 * 1024);
    assert_true(c.tune.min_gain == 0.05);
    assert_true(c.tune.abort_ratio == 0.25);
    assert_int_equal(c.tune.max_samples, 12);
    assert_int_equal(c.tune.max_bytes, 1LL << 30);
    assert_int_equal(c.tune.busy_rate, 10 * 1024 * 1024);
    assert_int_equal(c.tune.window_start, 23 * 60 + 30);
    assert_int_equal(c.tune.window_end, 4 * 60 + 15);
    assert_true(c.tune.tied);
    assert_true(c.tune.restart_smbd);
    assert_string_equal(c.tune.smbd_unit, "samba-ad-dc.service");

    /* Each word of each enum, and auto. */
    static const struct {
        const char *text;
        bool automatic;
        int trials, apply, mode;
    } words[] = {
        {"tune {\n trials = shadow\n}\n", false, TUNER_SHADOW, APPLY_SMBCONTROL, TUNER_TUNE},
        {"tune {\n trials = client\n}\n", false, TUNER_CLIENT, APPLY_SMBCONTROL, TUNER_TUNE},
        {"tune {\n trials = auto\n}\n", true, -1, APPLY_SMBCONTROL, TUNER_TUNE},
        {"tune {\n apply = none\n}\n", true, -1, APPLY_NONE, TUNER_TUNE},
        {"tune {\n apply = systemd\n}\n", true, -1, APPLY_SYSTEMD, TUNER_TUNE},
        {"tune {\n apply = smbcontrol\n}\n", true, -1, APPLY_SMBCONTROL, TUNER_TUNE},
        {"tune {\n mode = tune\n}\n", true, -1, APPLY_SMBCONTROL, TUNER_TUNE},
    };
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (config_parse_string(words[i].text, "x.conf", &c, &e) != 0)
            fail_msg("%s", e.msg);
        assert_int_equal(c.tune.trials_auto, words[i].automatic);
        if (!words[i].automatic)
            assert_int_equal(c.tune.trials, words[i].trials);
        assert_int_equal(c.tune.apply, words[i].apply);
        assert_int_equal(c.tune.mode, words[i].mode);
    }

    set_refused("trials", "everywhere", -EINVAL, "trials (auto, shadow, client or live)");
    set_refused("apply", "reboot", -EINVAL, "unknown apply method 'reboot'");
    set_refused("mode", "Advise", -EINVAL, "mode (tune or advise)");
    set_refused("tied", "true", -EINVAL, "tied 'true' is not yes or no");
    set_refused("interval", "30s", -EINVAL, "interval '30s'");
    set_refused("max_samples", "2", -EINVAL, "max_samples '2'");
}

/* Seconds with s, m, h or d, from one minute to 366 days. */
static void test_interval(void **state)
{
    static const struct {
        const char *text;
        double s;
    } ok[] = {{"60", 60},    {"60s", 60},    {"1m", 60},
              {"6h", 21600}, {"2d", 172800}, {"366d", 31622400}};
    static const char *const bad[] = {"59",  "59s", "0m", "367d", "8785h", "1.5h",
                                      "6 h", "-1h", "h",  "",     "6w",    "99999999999999999999"};
    struct config c;

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        set_ok(&c, "interval", ok[i].text);
        assert_true(c.tune.interval_s == ok[i].s);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        set_refused("interval", bad[i], -EINVAL, "is not a duration from 60s to 366d");
}

/* A share as a fraction or a percentage, each in its own range. */
static void test_shares(void **state)
{
    struct config c;

    (void)state;
    set_ok(&c, "min_gain", "0.1%");
    assert_true(c.tune.min_gain == 0.001);
    set_ok(&c, "min_gain", "99%");
    assert_true(c.tune.min_gain == 0.99);
    set_refused("min_gain", "100%", -EINVAL, "is not a share from 0.1% to 99%");
    set_ok(&c, "abort_ratio", "0.99");
    assert_true(c.tune.abort_ratio == 0.99);
    set_refused("min_gain", "0.0009", -EINVAL, "min_gain '0.0009' is not a share");
    set_refused("min_gain", "101%", -EINVAL, "is not a share from 0.1% to 99%");
    set_refused("min_gain", "5%%", -EINVAL, "min_gain");
    set_refused("min_gain", "nan", -EINVAL, "min_gain");
    set_refused("min_gain", "", -EINVAL, "min_gain");
    set_refused("abort_ratio", "0.995", -EINVAL, "is not a share from 1% to 99%");
    set_refused("abort_ratio", "0.5x", -EINVAL, "abort_ratio");
}

/* HH:MM-HH:MM, 24:00 as the end of the day; "" is any time. */
static void test_window(void **state)
{
    static const char *const bad[] = {"1:00-05:00", "24:01-05:00", "01:60-02:00", "01:00 05:00",
                                      "01:00-5:00x", "25:00-01:00", "-1:00-02:00",
                                      /* two digits each, as the form says: no blank, no
                                       * sign where sscanf's %2d would take one */
                                      " 1:00-05:00", "+1:00-05:00", "-0:00-05:00", "01:+5-05:00",
                                      "01:00- 5:00"};
    struct config c;

    (void)state;
    set_ok(&c, "window", "22:00-24:00");
    assert_int_equal(c.tune.window_start, 22 * 60);
    assert_int_equal(c.tune.window_end, 24 * 60);
    set_ok(&c, "window", "00:00-24:00"); /* the whole day */
    assert_int_equal(c.tune.window_start, 0);
    assert_int_equal(c.tune.window_end, 24 * 60);
    set_ok(&c, "window", "24:00-05:00"); /* from midnight */
    assert_int_equal(c.tune.window_start, 0);
    assert_int_equal(c.tune.window_end, 5 * 60);
    set_ok(&c, "window", "00:00-00:01");
    assert_int_equal(c.tune.window_start, 0);
    assert_int_equal(c.tune.window_end, 1);
    set_ok(&c, "window", "");
    assert_int_equal(c.tune.window_start, -1);
    assert_int_equal(c.tune.window_end, -1);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        set_refused("window", bad[i], -EINVAL, "is not HH:MM-HH:MM");
    /* well formed, but empty: said as such, not as a bad form */
    set_refused("window", "01:00-01:00", -EINVAL, "window '01:00-01:00' starts where it ends");
    /* 24:00 is 00:00: this window would never open */
    set_refused("window", "24:00-00:00", -EINVAL, "window '24:00-00:00' starts where it ends");
    set_refused("window", "00:00-00:00", -EINVAL, "window '00:00-00:00' starts where it ends");
}

/* Sizes, counts and booleans with their ranges; paths absolute and
 * within their buffer. (That min_size is not above max_size is checked
 * once the whole file is read: test_config.) */
static void test_ranges_and_paths(void **state)
{
    char long_path[5000];
    struct config c;
    struct err e = {{0}};

    (void)state;
    set_ok(&c, "min_size", "1K");
    assert_int_equal(c.tune.min_size, 1024);
    set_ok(&c, "max_size", "1G");
    assert_int_equal(c.tune.max_size, 1LL << 30);
    set_refused("min_size", "1023", -EINVAL, "min_size '1023' is not a byte count from 1K to 1G");
    set_refused("max_size", "2G", -EINVAL, "max_size '2G'");
    set_ok(&c, "max_samples", "3");
    assert_int_equal(c.tune.max_samples, 3);
    set_ok(&c, "max_samples", "128");
    set_refused("max_samples", "129", -EINVAL, "from 3 to 128");
    set_ok(&c, "max_bytes", "0");
    assert_int_equal(c.tune.max_bytes, 0);
    set_ok(&c, "busy_rate", "0");
    set_refused("busy_rate", "-1", -EINVAL, "busy_rate '-1'");
    set_ok(&c, "tied", "no");
    assert_false(c.tune.tied);
    set_refused("restart_smbd", "1", -EINVAL, "restart_smbd '1' is not yes or no");
    set_ok(&c, "smbd_unit", "smbd@two.service");
    assert_string_equal(c.tune.smbd_unit, "smbd@two.service");
    /* refused: the value before stays */
    set_refused("smbd_unit", "smbd", -EINVAL,
                "smbd_unit: 'smbd' is not a service unit: expected a name such as smbd.service");
    set_refused("smbd_unit", "smbd/../x.service", -EINVAL, "smbd_unit: not a unit name: byte 5");
    assert_int_equal(config_set(&c, "tune", "smbd_unit", "smbd.socket", &e), -EINVAL);
    assert_string_equal(c.tune.smbd_unit, "smbd@two.service");
    /* from a file: its name and the line */
    assert_int_equal(
        config_parse_string("tune {\n  restart_smbd = yes\n  smbd_unit = \"smb d\"\n}\n", "x.conf",
                            &c, &e),
        -EINVAL);
    assert_non_null(strstr(e.msg, "x.conf:3"));
    assert_non_null(strstr(e.msg, "smbd_unit: not a unit name: byte 4 (0x20)"));
    /* systemd's escapes (\x2d for '-' in a path's unit) are kept as
     * written when unquoted; inside double quotes libconfuse reads
     * escapes, so a backslash is written twice there */
    assert_int_equal(
        config_parse_string("tune {\n  smbd_unit = smbd@a\\x2db.service\n}\n", "x.conf", &c, &e),
        0);
    assert_string_equal(c.tune.smbd_unit, "smbd@a\\x2db.service");
    assert_int_equal(config_parse_string("tune {\n  smbd_unit = \"smbd@a\\\\x2db.service\"\n}\n",
                                         "x.conf", &c, &e),
                     0);
    assert_string_equal(c.tune.smbd_unit, "smbd@a\\x2db.service");

    set_ok(&c, "state_dir", "/srv/smbtuned");
    assert_string_equal(c.tune.state_dir, "/srv/smbtuned");
    set_refused("smb_conf", "smb.conf", -EINVAL,
                "smb_conf must be an absolute path, not 'smb.conf'");
    memset(long_path, 'a', sizeof(long_path) - 1);
    long_path[0] = '/';
    long_path[sizeof(long_path) - 1] = '\0';
    set_refused("state_dir", long_path, -ENAMETOOLONG, "state_dir is too long (at most 4095");
    set_refused("colour", "blue", -ENOENT, "no option colour in section tune");
}

/* Whatever the parsers accept, a search can be made from, with any line
 * in force (none, both sizes, one named and one left to autotuning): a
 * value -t accepts must never make every cycle fail. Each option at
 * each end of its range, the others at their defaults. */
static void test_accepted_values_make_a_search(void **state)
{
    static const char *const ends[][3] = {
        {"min_size", "1K", "1G"},     {"max_size", "1K", "1G"},    {"min_gain", "0.1%", "99%"},
        {"abort_ratio", "1%", "99%"}, {"max_samples", "3", "128"}, {"tied", "no", "yes"},
    };
    static const struct search_config lines[] = {
        {SEARCH_AUTO, SEARCH_AUTO}, {65536, 131072}, {65536, SEARCH_AUTO}, {SEARCH_AUTO, 8192}};
    (void)state;
    for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
        for (int end = 1; end <= 2; end++)
            for (int tied = 0; tied < 2; tied++)
                for (size_t l = 0; l < sizeof(lines) / sizeof(lines[0]); l++) {
                    struct config c;
                    struct tuner_opts t;
                    struct search *s = NULL;
                    struct err e = {{0}};
                    int r;

                    set_ok(&c, ends[i][0], ends[i][end]);
                    if (tied)
                        assert_int_equal(config_set(&c, "tune", "tied", "yes", &e), 0);
                    if (config_fill(&c, &t, &e) < 0)
                        continue; /* refused with a reason: -t says so */
                    r = search_new(&t.search, lines[l], &s);
                    if (r < 0)
                        fail_msg("%s = %s%s, line %ld/%ld: search_new %d", ends[i][0], ends[i][end],
                                 tied ? ", tied" : "", lines[l].rcvbuf, lines[l].sndbuf, r);
                    search_free(s);
                }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted_values_make_a_search),
        cmocka_unit_test(test_typed_values),
        cmocka_unit_test(test_interval),
        cmocka_unit_test(test_shares),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_ranges_and_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
