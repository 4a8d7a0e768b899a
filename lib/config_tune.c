/* config_tune: the tune { ... } section of /etc/smbtuned.conf, the tuning
 * loop's options: one parser per option, text to typed values (enums,
 * byte counts, seconds, minutes after midnight, booleans). */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "config_int.h"
#include "parse.h"
#include "search.h"

static int parse_path(const char *s, char *dst, size_t len, const char *what, struct err *e)
{
    if (s[0] != '/')
        return err_set(e, -EINVAL, "%s must be an absolute path, not '%s'", what, s);
    return copy_str(dst, len, s, what, e);
}

static int parse_smb_conf(const char *s, struct config *c, struct err *e)
{
    return parse_path(s, c->tune.smb_conf, sizeof(c->tune.smb_conf), "smb_conf", e);
}

static int parse_state_dir(const char *s, struct config *c, struct err *e)
{
    /* config_parse_string() sets it again for a value from a file. */
    c->tune.state_dir_where[0] = '\0';
    return parse_path(s, c->tune.state_dir, sizeof(c->tune.state_dir), "state_dir", e);
}

/* A word of a table indexed by the enum's values: the one conversion of
 * the text into the enum (the command line goes through config_set). */
static int parse_word(const char *s, const char *const *words, size_t n, int *out, const char *what,
                      struct err *e)
{
    for (size_t i = 0; i < n; i++) {
        if (words[i] != NULL && strcmp(s, words[i]) == 0) {
            *out = (int)i;
            return 0;
        }
    }
    return err_set(e, -EINVAL, "%s '%s' is not one of the words documented for it", what, s);
}

static int parse_mode(const char *s, struct config *c, struct err *e)
{
    static const char *const words[] = {[TUNER_TUNE] = "tune", [TUNER_ADVISE] = "advise"};
    int v = 0; /* err_set's negative return is not visible to gcc */
    int r = parse_word(s, words, sizeof(words) / sizeof(words[0]), &v, "mode (tune or advise)", e);

    if (r == 0)
        c->tune.mode = (enum tuner_mode)v;
    return r;
}

static int parse_trials(const char *s, struct config *c, struct err *e)
{
    static const char *const words[] = {
        [TUNER_SHADOW] = "shadow", [TUNER_CLIENT] = "client", [TUNER_LIVE] = "live"};
    int v = 0, r;

    /* config_parse_string() sets it again for a value from a file. */
    c->tune.trials_where[0] = '\0';
    if (strcmp(s, "auto") == 0) {
        c->tune.trials_auto = true;
        return 0;
    }
    r = parse_word(s, words, sizeof(words) / sizeof(words[0]), &v,
                   "trials (auto, shadow, client or live)", e);
    if (r == 0) {
        c->tune.trials_auto = false;
        c->tune.trials = (enum tuner_trials)v;
    }
    return r;
}

/* apply.c's names are the one list of the methods. */
static int parse_apply(const char *s, struct config *c, struct err *e)
{
    return apply_parse(s, &c->tune.apply, e);
}

/* Seconds, with an optional s, m, h or d. */
static int parse_interval(const char *s, struct config *c, struct err *e)
{
    char num[32];
    size_t n = strlen(s);
    long long mult = 1, v;

    if (n == 0 || n >= sizeof(num))
        goto bad;
    memcpy(num, s, n + 1);
    switch (num[n - 1]) {
    case 'd':
        mult *= 24; /* fall through */
    case 'h':
        mult *= 60; /* fall through */
    case 'm':
        mult *= 60; /* fall through */
    case 's':
        num[n - 1] = '\0';
        break;
    default:
        break;
    }
    if (parse_long(num, 1, 366LL * 86400, &v) < 0 || v * mult > 366LL * 86400 || v * mult < 60)
        goto bad;
    c->tune.interval_s = (double)(v * mult);
    return 0;
bad:
    return err_set(e, -EINVAL, "interval '%s' is not a duration from 60s to 366d (e.g. 6h)", s);
}

static int parse_min_size(const char *s, struct config *c, struct err *e)
{
    if (parse_size(s, 1024, 1LL << 30, &c->tune.min_size) < 0)
        return err_set(e, -EINVAL, "min_size '%s' is not a byte count from 1K to 1G", s);
    return 0;
}

static int parse_max_size(const char *s, struct config *c, struct err *e)
{
    if (parse_size(s, 1024, 1LL << 30, &c->tune.max_size) < 0)
        return err_set(e, -EINVAL, "max_size '%s' is not a byte count from 1K to 1G", s);
    return 0;
}

/* A share: 3% or 0.03. */
static int parse_ratio(const char *s, double lo, double hi, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (end == s || errno != 0)
        return -EINVAL;
    if (*end == '%') {
        v /= 100;
        end++;
    }
    if (*end != '\0' || !(v >= lo && v <= hi))
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_min_gain(const char *s, struct config *c, struct err *e)
{
    /* below 100%: a gain of all the rate, or more, no sample can show */
    if (parse_ratio(s, 0.001, 0.99, &c->tune.min_gain) < 0)
        return err_set(e, -EINVAL, "min_gain '%s' is not a share from 0.1%% to 99%%", s);
    return 0;
}

static int parse_abort_ratio(const char *s, struct config *c, struct err *e)
{
    if (parse_ratio(s, 0.01, 0.99, &c->tune.abort_ratio) < 0)
        return err_set(e, -EINVAL, "abort_ratio '%s' is not a share from 1%% to 99%%", s);
    return 0;
}

static int parse_max_samples(const char *s, struct config *c, struct err *e)
{
    long long v;

    /* the search keeps at most SEARCH_LEVEL_CAP samples a configuration */
    if (parse_long(s, 3, SEARCH_LEVEL_CAP, &v) < 0)
        return err_set(e, -EINVAL, "max_samples '%s' is not a number from 3 to %d", s,
                       SEARCH_LEVEL_CAP);
    c->tune.max_samples = (int)v;
    return 0;
}

static int parse_max_bytes(const char *s, struct config *c, struct err *e)
{
    if (parse_size(s, 0, 1LL << 50, &c->tune.max_bytes) < 0)
        return err_set(e, -EINVAL, "max_bytes '%s' is not a byte count (0: no limit)", s);
    return 0;
}

static int parse_busy_rate(const char *s, struct config *c, struct err *e)
{
    if (parse_size(s, 0, 1LL << 40, &c->tune.busy_rate) < 0)
        return err_set(e, -EINVAL, "busy_rate '%s' is not bytes per second (0: never defer)", s);
    return 0;
}

static int parse_hhmm(const char *s, int *minutes)
{
    int h, m, n = 0;

    /* %2d alone would take a blank or a sign: " 1:00", "+1:00", "01:+5" */
    if (!isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]) ||
        !isdigit((unsigned char)s[3]) || !isdigit((unsigned char)s[4]))
        return -EINVAL;
    if (sscanf(s, "%2d:%2d%n", &h, &m, &n) != 2 || n != 5 || h < 0 || h > 24 || m < 0 || m > 59 ||
        (h == 24 && m != 0))
        return -EINVAL;
    *minutes = h * 60 + m;
    return 0;
}

static int parse_window(const char *s, struct config *c, struct err *e)
{
    if (s[0] == '\0') {
        c->tune.window_start = c->tune.window_end = -1;
        return 0;
    }
    if (strlen(s) != 11 || s[5] != '-' || parse_hhmm(s, &c->tune.window_start) < 0 ||
        parse_hhmm(s + 6, &c->tune.window_end) < 0)
        return err_set(e, -EINVAL, "window '%s' is not HH:MM-HH:MM (e.g. 01:00-05:00)", s);
    /* 24:00 and 00:00 are the same moment: 24:00-00:00 would never open
     * (start > end: across midnight, from minute 1440 on). Only
     * 00:00-24:00, the whole day, keeps both. */
    if (c->tune.window_start % 1440 == c->tune.window_end % 1440 &&
        !(c->tune.window_start == 0 && c->tune.window_end == 1440))
        return err_set(e, -EINVAL,
                       "window '%s' starts where it ends: give a window of some length, or "
                       "\"\" for any time",
                       s);
    /* a start at 24:00 is the one at 00:00 */
    c->tune.window_start %= 1440;
    return 0;
}

static int parse_yes_no(const char *s, bool *v, const char *what, struct err *e)
{
    if (strcmp(s, "yes") != 0 && strcmp(s, "no") != 0)
        return err_set(e, -EINVAL, "%s '%s' is not yes or no", what, s);
    *v = strcmp(s, "yes") == 0;
    return 0;
}

static int parse_tied(const char *s, struct config *c, struct err *e)
{
    return parse_yes_no(s, &c->tune.tied, "tied", e);
}

static int parse_restart_smbd(const char *s, struct config *c, struct err *e)
{
    return parse_yes_no(s, &c->tune.restart_smbd, "restart_smbd", e);
}

/* The unit's name is checked here, so that a typo is named with its line.
 * Whether systemd has the unit, -t asks (apply_unit_known); the start
 * does not refuse a missing one (a unit may be installed after smbtuned
 * starts), and it is said when it is used. */
static int parse_smbd_unit(const char *s, struct config *c, struct err *e)
{
    struct err ue;

    /* config_parse_string() sets it again for a value from a file. */
    c->tune.smbd_unit_where[0] = '\0';
    if (apply_unit_check(s, &ue) < 0)
        return err_set(e, -EINVAL, "smbd_unit: %s", ue.msg);
    snprintf(c->tune.smbd_unit, sizeof(c->tune.smbd_unit), "%s", s);
    return 0;
}

static const struct config_field tune_fields[] = {
    {"smb_conf", parse_smb_conf},
    {"state_dir", parse_state_dir},
    {"mode", parse_mode},
    {"trials", parse_trials},
    {"apply", parse_apply},
    {"interval", parse_interval},
    {"min_size", parse_min_size},
    {"max_size", parse_max_size},
    {"min_gain", parse_min_gain},
    {"abort_ratio", parse_abort_ratio},
    {"max_samples", parse_max_samples},
    {"max_bytes", parse_max_bytes},
    {"busy_rate", parse_busy_rate},
    {"window", parse_window},
    {"tied", parse_tied},
    {"restart_smbd", parse_restart_smbd},
    {"smbd_unit", parse_smbd_unit},
};

CONFIG_SECTION(config_tune_section, "tune", tune_fields);
