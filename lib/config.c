/* config: /etc/smbtuned.conf (libconfuse) -> struct config. */
#include "config.h"

#include <confuse.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_scan.h"
#include "files.h"
#include "parse.h"
#include "probe.h"

/* Limits of the probe's numbers. The size must be at least one request so
 * that the rate means something; 64 GiB is far more than any deadline
 * allows. */
#define SIZE_MIN 4096LL
#define SIZE_MAX_ (64LL * 1024 * 1024 * 1024)
#define DEADLINE_MAX_S 86400LL

/* The loop's own defaults; the probe's and the search's come from their
 * _params_default(), so that each value is defined once. */
#define DEFAULT_INTERVAL_S (6 * 3600.0)
#define DEFAULT_TRIALS_AUTO true
#define DEFAULT_APPLY APPLY_SMBCONTROL
#define DEFAULT_MODE TUNER_TUNE

void config_defaults(struct config *c)
{
    struct probe_params p;
    struct search_params s;

    probe_params_default(&p);
    search_params_default(&s);
    memset(c, 0, sizeof(*c));
    c->probe.size = p.size;
    c->probe.request_size = p.request_size;
    c->probe.deadline_s = p.deadline_s;
    snprintf(c->probe.socket_options, sizeof(c->probe.socket_options), "%s", p.socket_options);

    snprintf(c->tune.smb_conf, sizeof(c->tune.smb_conf), "%s", CONFIG_DEFAULT_SMB_CONF);
    snprintf(c->tune.state_dir, sizeof(c->tune.state_dir), "%s", CONFIG_DEFAULT_STATE_DIR);
    c->tune.mode = DEFAULT_MODE;
    c->tune.trials_auto = DEFAULT_TRIALS_AUTO;
    c->tune.trials = TUNER_SHADOW; /* not used while trials_auto */
    c->tune.apply = DEFAULT_APPLY;
    c->tune.interval_s = DEFAULT_INTERVAL_S;
    /* The file has one max_size for both buffers: the search's defaults
     * agree (search_params_default), and test_config holds them to it. */
    c->tune.min_size = s.min_size;
    c->tune.max_size = s.max_rcvbuf;
    c->tune.min_gain = s.min_gain;
    c->tune.abort_ratio = s.abort_ratio;
    c->tune.max_samples = s.max_samples;
    c->tune.tied = s.tied;
    c->tune.max_bytes = 0;
    c->tune.busy_rate = 0;
    c->tune.window_start = c->tune.window_end = -1;
    c->tune.restart_smbd = false;
}

/* One parser per option, shared by the validators (which run while
 * libconfuse reads the line, so the message carries that line) and by the
 * extraction afterwards. Each returns 0 or -errno with a message without
 * file or line. */
typedef int (*value_parser)(const char *s, struct config *c, struct err *e);

static int copy_str(char *dst, size_t len, const char *s, const char *what, struct err *e)
{
    if (strlen(s) >= len)
        return err_set(e, -ENAMETOOLONG, "%s is too long (at most %zu characters)", what, len - 1);
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

static int parse_url(const char *s, struct config *c, struct err *e)
{
    struct config_probe *p = &c->probe;
    struct probe_url u;
    int r;

    if (s[0] != '\0') {
        r = probe_parse_url(s, &u, e);
        if (r < 0)
            return r;
    }
    return copy_str(p->url, sizeof(p->url), s, "url", e);
}

static int parse_credentials(const char *s, struct config *c, struct err *e)
{
    struct config_probe *p = &c->probe;
    if (s[0] != '\0' && s[0] != '/')
        return err_set(e, -EINVAL, "credentials must be an absolute path, not '%s'", s);
    return copy_str(p->credentials, sizeof(p->credentials), s, "credentials", e);
}

static int parse_probe_size(const char *s, struct config *c, struct err *e)
{
    struct config_probe *p = &c->probe;
    if (parse_size(s, SIZE_MIN, SIZE_MAX_, &p->size) < 0)
        return err_set(e, -EINVAL, "size '%s' is not a byte count from 4K to 64G", s);
    return 0;
}

static int parse_request_size(const char *s, struct config *c, struct err *e)
{
    struct config_probe *p = &c->probe;
    if (parse_size(s, 1, PROBE_MAX_REQUEST_SIZE, &p->request_size) < 0)
        return err_set(e, -EINVAL,
                       "request_size '%s' is not a byte count from 1 to 8M (SMB2's largest "
                       "request)",
                       s);
    return 0;
}

static int parse_deadline(const char *s, struct config *c, struct err *e)
{
    long long v;

    if (parse_long(s, 1, DEADLINE_MAX_S, &v) < 0)
        return err_set(e, -EINVAL, "deadline '%s' is not a whole number of seconds from 1 to %lld",
                       s, DEADLINE_MAX_S);
    c->probe.deadline_s = (double)v;
    return 0;
}

static int parse_directory(const char *s, struct config *c, struct err *e)
{
    struct config_probe *p = &c->probe;
    int r = probe_check_directory(s, e);

    if (r < 0)
        return r;
    return copy_str(p->directory, sizeof(p->directory), s, "directory", e);
}

static int parse_socket_options(const char *s, struct config *c, struct err *e)
{
    struct config_probe *p = &c->probe;
    int r = probe_check_socket_options(s, e);

    if (r < 0)
        return r;
    return copy_str(p->socket_options, sizeof(p->socket_options), s, "socket_options", e);
}

struct field {
    const char *name;
    value_parser parse;
};

static const struct field probe_fields[] = {
    {"url", parse_url},
    {"credentials", parse_credentials},
    {"size", parse_probe_size},
    {"request_size", parse_request_size},
    {"deadline", parse_deadline},
    {"directory", parse_directory},
    {"socket_options", parse_socket_options},
};

/* ---- tune { ... }: the tuning loop ---- */

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
    if (parse_ratio(s, 0.001, 1.0, &c->tune.min_gain) < 0)
        return err_set(e, -EINVAL, "min_gain '%s' is not a share from 0.1%% to 100%%", s);
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

    if (parse_long(s, 3, 1000, &v) < 0)
        return err_set(e, -EINVAL, "max_samples '%s' is not a number from 3 to 1000", s);
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
        parse_hhmm(s + 6, &c->tune.window_end) < 0 || c->tune.window_start == c->tune.window_end)
        return err_set(e, -EINVAL, "window '%s' is not HH:MM-HH:MM (e.g. 01:00-05:00)", s);
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

static const struct field tune_fields[] = {
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
};

struct section {
    const char *name;
    const struct field *fields;
    size_t n;
};

#define SECTION(name, f)                                                                           \
    {                                                                                              \
        name, f, sizeof(f) / sizeof(f[0])                                                          \
    }

static const struct section sections[] = {
    SECTION("probe", probe_fields),
    SECTION("tune", tune_fields),
};

static const struct field *find_field(const char *section, const char *name)
{
    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
        if (strcmp(sections[i].name, section) != 0)
            continue;
        for (size_t j = 0; j < sections[i].n; j++)
            if (strcmp(sections[i].fields[j].name, name) == 0)
                return &sections[i].fields[j];
    }
    return NULL;
}

int config_set(struct config *c, const char *section, const char *name, const char *value,
               struct err *e)
{
    const struct field *f = find_field(section, name);
    struct err fe;
    int r;

    if (f == NULL)
        return err_set(e, -ENOENT, "no option %s in section %s", name, section);
    r = f->parse(value, c, &fe);
    if (r < 0)
        return err_set(e, r, "%s", fe.msg);
    return 0;
}

/* libconfuse's error callback has no user-data pointer, so the state of
 * the parse in progress goes through this per-thread pointer; it is set
 * only for the duration of one config_parse_string() call. */
struct parse_ctx {
    struct err *e;
    const char *name;
    /* The options set so far and their lines: libconfuse lets the last of
     * two `size = ...` win without a word. Sections cannot repeat (the
     * scan refuses that: config_scan.h), so a field names its section too. */
    const struct field *set[64];
    int set_line[64];
    size_t nset;
};

static __thread struct parse_ctx *parse_ctx;

/* The attribute lets clang check the vsnprintf below (-Wformat-nonliteral). */
__attribute__((format(printf, 2, 0))) static void on_error(cfg_t *cfg, const char *fmt, va_list ap)
{
    char msg[sizeof(parse_ctx->e->msg)];

    if (parse_ctx == NULL)
        return;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    /* Keep the first error: later ones are usually its consequences. */
    if (parse_ctx->e->msg[0] != '\0')
        return;
    if (cfg != NULL && cfg->line > 0)
        err_set(parse_ctx->e, -EINVAL, "%s:%d: %s", parse_ctx->name, cfg->line, msg);
    else
        err_set(parse_ctx->e, -EINVAL, "%s: %s", parse_ctx->name, msg);
}

/* Runs while libconfuse reads the line, so that the message has it. */
static int validate(cfg_t *cfg, cfg_opt_t *opt)
{
    struct config scratch;
    struct err e = {{0}};
    const char *v = cfg_opt_getnstr(opt, cfg_opt_size(opt) - 1);
    const struct field *f = find_field(cfg_name(cfg), cfg_opt_name(opt));
    struct parse_ctx *ctx = parse_ctx;

    for (size_t i = 0; f != NULL && ctx != NULL && i < ctx->nset; i++) {
        if (ctx->set[i] == f) {
            cfg_error(cfg, "%s: %s is given twice (first at line %d): give it once", cfg_name(cfg),
                      f->name, ctx->set_line[i]);
            return -1;
        }
    }
    if (f != NULL && ctx != NULL && ctx->nset < sizeof(ctx->set) / sizeof(ctx->set[0])) {
        ctx->set[ctx->nset] = f;
        ctx->set_line[ctx->nset++] = cfg->line;
    }
    config_defaults(&scratch);
    if (f != NULL && f->parse(v ? v : "", &scratch, &e) < 0) {
        cfg_error(cfg, "%s: %s", cfg_name(cfg), e.msg);
        return -1;
    }
    return 0;
}

int config_parse_string(const char *text, const char *name, struct config *c, struct err *e)
{
    /* Every option is a string without a libconfuse default: an option
     * left out keeps config_defaults()'s value, and every value goes
     * through our own parser (sizes with suffixes, ranges, words). */
    cfg_opt_t sec_opts[2][20];
    cfg_opt_t opts[3];
    struct err local = {{0}};
    struct parse_ctx ctx = {.e = &local, .name = name};
    cfg_t *cfg;
    int r;

    config_defaults(c);
    r = config_scan(text, name, e);
    if (r < 0)
        return r;
    for (size_t i = 0; i < 2; i++) {
        size_t j;

        for (j = 0; j < sections[i].n; j++)
            sec_opts[i][j] =
                (cfg_opt_t)CFG_STR((char *)sections[i].fields[j].name, NULL, CFGF_NODEFAULT);
        sec_opts[i][j] = (cfg_opt_t)CFG_END();
        opts[i] = (cfg_opt_t)CFG_SEC((char *)sections[i].name, sec_opts[i], CFGF_NONE);
    }
    opts[2] = (cfg_opt_t)CFG_END();
    cfg = cfg_init(opts, CFGF_NONE);
    if (cfg == NULL)
        return err_set(e, -ENOMEM, "%s: out of memory", name);
    cfg_set_error_function(cfg, on_error);
    for (size_t i = 0; i < 2; i++) {
        for (size_t j = 0; j < sections[i].n; j++) {
            char path[64];

            snprintf(path, sizeof(path), "%s|%s", sections[i].name, sections[i].fields[j].name);
            cfg_set_validate_func(cfg, path, validate);
        }
    }

    parse_ctx = &ctx;
    if (cfg_parse_buf(cfg, text) != CFG_SUCCESS)
        r = local.msg[0] ? err_set(e, -EINVAL, "%s", local.msg)
                         : err_set(e, -EINVAL, "%s: cannot be parsed", name);
    parse_ctx = NULL;

    for (size_t i = 0; r == 0 && i < 2; i++) {
        cfg_t *sec = cfg_getsec(cfg, sections[i].name);

        for (size_t j = 0; sec != NULL && r == 0 && j < sections[i].n; j++) {
            const char *v = cfg_getstr(sec, sections[i].fields[j].name);
            struct err fe;

            if (v == NULL)
                continue;
            /* Already validated line by line; this cannot fail but for a bug. */
            r = sections[i].fields[j].parse(v, c, &fe);
            if (r < 0)
                err_set(e, r, "%s: %s: %s", name, sections[i].name, fe.msg);
        }
    }
    if (r == 0 && c->tune.min_size > c->tune.max_size)
        r = err_set(e, -EINVAL, "%s: tune: min_size is above max_size", name);
    cfg_free(cfg);
    return r;
}

/* A target on this machine is served by the local smbd: its candidates can
 * run on a shadow smbd. A peer's share can only be tuned from our side of
 * the connection: the probe's own client socket. */
static bool url_is_local(const char *url)
{
    struct probe_url u;

    if (probe_parse_url(url, &u, NULL) < 0)
        return false;
    return strcmp(u.host, "127.0.0.1") == 0 || strcmp(u.host, "localhost") == 0 ||
           strcmp(u.host, "::1") == 0;
}

int config_fill(const struct config *c, struct tuner_opts *t, struct err *e)
{
    struct probe_params *p = &t->probe;
    struct search_params *s = &t->search;

    memset(t, 0, sizeof(*t));
    if (c->probe.url[0] == '\0')
        return err_set(e, -EINVAL,
                       "no URL: give --url smb://host/share or set url in the "
                       "probe section of the config file");

    probe_params_default(p);
    p->url = c->probe.url;
    p->directory = c->probe.directory[0] ? c->probe.directory : NULL;
    p->credentials = c->probe.credentials[0] ? c->probe.credentials : NULL;
    p->size = c->probe.size;
    p->request_size = c->probe.request_size;
    p->deadline_s = c->probe.deadline_s;
    p->socket_options = c->probe.socket_options;
    p->workdir_base = c->tune.state_dir;

    search_params_default(s);
    s->min_size = (long)c->tune.min_size;
    s->max_rcvbuf = s->max_sndbuf = (long)c->tune.max_size;
    s->min_gain = c->tune.min_gain;
    s->abort_ratio = c->tune.abort_ratio;
    s->max_samples = c->tune.max_samples;
    s->tied = c->tune.tied;

    t->smb_conf = c->tune.smb_conf;
    t->state_dir = c->tune.state_dir;
    t->mode = c->tune.mode;
    /* Advice must not write smb.conf, and a live trial is a write that
     * reaches every client: in advise mode live becomes what auto picks. */
    if (c->tune.trials_auto || (c->tune.mode == TUNER_ADVISE && c->tune.trials == TUNER_LIVE))
        t->trials = url_is_local(c->probe.url) ? TUNER_SHADOW : TUNER_CLIENT;
    else
        t->trials = c->tune.trials;
    t->apply = c->tune.apply;
    t->restart_smbd = c->tune.restart_smbd;
    t->max_bytes = c->tune.max_bytes;
    t->interval_s = c->tune.interval_s;
    t->busy_mbps = (double)c->tune.busy_rate / 1e6;
    t->window_start = c->tune.window_start;
    t->window_end = c->tune.window_end;
    return 0;
}

int config_load(const char *path, struct config *c, struct err *e)
{
    char *text;
    size_t len;
    int r;

    /* files_read opens non-blocking and reads only a regular file:
     * a FIFO in place of the file would otherwise block -t and SIGHUP for
     * ever. The message names the file. */
    r = files_read(path, &text, &len, e);
    if (r < 0)
        return r;
    if (strlen(text) != len) {
        free(text);
        return err_set(e, -EINVAL, "%s: contains a NUL byte", path);
    }
    r = config_parse_string(text, path, c, e);
    free(text);
    return r;
}
