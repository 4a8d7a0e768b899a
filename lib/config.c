/* config: /etc/smbtuned.conf (libconfuse) -> struct config (each
 * section's parsers: config_probe.c, config_tune.c). */
#include "config.h"

#include <confuse.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_int.h"
#include "config_scan.h"
#include "files.h"
#include "probe.h"
#include "trial.h"
#include "url.h"

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
    c->probe.duration_s = p.duration_s;
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
    snprintf(c->tune.smbd_unit, sizeof(c->tune.smbd_unit), "%s", APPLY_DEFAULT_UNIT);
}

/* The sections' tables are in config_probe.c and config_tune.c. */
static const struct config_section *const sections[] = {&config_probe_section,
                                                        &config_tune_section};

#define NSECTIONS (sizeof(sections) / sizeof(sections[0]))

static const struct config_field *find_field(const char *section, const char *name)
{
    for (size_t i = 0; i < NSECTIONS; i++) {
        if (strcmp(sections[i]->name, section) != 0)
            continue;
        for (size_t j = 0; j < sections[i]->n; j++)
            if (strcmp(sections[i]->fields[j].name, name) == 0)
                return &sections[i]->fields[j];
    }
    return NULL;
}

int config_set(struct config *c, const char *section, const char *name, const char *value,
               struct err *e)
{
    const struct config_field *f = find_field(section, name);
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
    const struct config_field *set[64];
    int set_line[64];
    size_t nset;
};

static __thread struct parse_ctx *parse_ctx;

#define NO_SUCH "no such option "
_Static_assert(NSECTIONS == 2, "on_error names the sections");

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
    /* At the top level only sections may stand: libconfuse's word for an
     * unknown one is "no such option 'NAME'". */
    if (cfg != NULL && cfg->line > 0 && strcmp(cfg_name(cfg), "root") == 0 &&
        strncmp(msg, NO_SUCH, strlen(NO_SUCH)) == 0)
        err_set(parse_ctx->e, -EINVAL,
                "%s:%d: no such section %s: the sections are %s and %s, and options go "
                "inside them",
                parse_ctx->name, cfg->line, msg + strlen(NO_SUCH), sections[0]->name,
                sections[1]->name);
    else if (cfg != NULL && cfg->line > 0)
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
    const struct config_field *f = find_field(cfg_name(cfg), cfg_opt_name(opt));
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
    cfg_opt_t sec_opts[NSECTIONS][CONFIG_MAX_FIELDS + 1];
    cfg_opt_t opts[NSECTIONS + 1];
    struct err local = {{0}};
    struct parse_ctx ctx = {.e = &local, .name = name};
    cfg_t *cfg;
    char *plain;
    int r;

    config_defaults(c);
    if (strlen(text) > CONFIG_MAX_BYTES)
        return err_set(e, -EFBIG,
                       "%s: %zu bytes: larger than %d KiB, too large for smbtuned's "
                       "configuration (the installed one, every key documented, is about 10 KiB)",
                       name, strlen(text), CONFIG_MAX_BYTES / 1024);
    plain = malloc(strlen(text) + 1);
    if (plain == NULL)
        return err_set(e, -ENOMEM, "%s: out of memory", name);
    /* libconfuse reads the text without its comments, so that the lines
     * it counts are the file's (config_scan.h). */
    r = config_scan_blank(text, name, plain, e);
    if (r < 0) {
        free(plain);
        return r;
    }
    for (size_t i = 0; i < NSECTIONS; i++) {
        size_t j;

        for (j = 0; j < sections[i]->n; j++)
            sec_opts[i][j] =
                (cfg_opt_t)CFG_STR((char *)sections[i]->fields[j].name, NULL, CFGF_NODEFAULT);
        sec_opts[i][j] = (cfg_opt_t)CFG_END();
        opts[i] = (cfg_opt_t)CFG_SEC((char *)sections[i]->name, sec_opts[i], CFGF_NONE);
    }
    opts[NSECTIONS] = (cfg_opt_t)CFG_END();
    cfg = cfg_init(opts, CFGF_NONE);
    if (cfg == NULL) {
        free(plain);
        return err_set(e, -ENOMEM, "%s: out of memory", name);
    }
    cfg_set_error_function(cfg, on_error);
    for (size_t i = 0; i < NSECTIONS; i++) {
        for (size_t j = 0; j < sections[i]->n; j++) {
            char path[64];

            snprintf(path, sizeof(path), "%s|%s", sections[i]->name, sections[i]->fields[j].name);
            cfg_set_validate_func(cfg, path, validate);
        }
    }

    parse_ctx = &ctx;
    if (cfg_parse_buf(cfg, plain) != CFG_SUCCESS)
        r = local.msg[0] ? err_set(e, -EINVAL, "%s", local.msg)
                         : err_set(e, -EINVAL, "%s: cannot be parsed", name);
    parse_ctx = NULL;

    for (size_t i = 0; r == 0 && i < NSECTIONS; i++) {
        cfg_t *sec = cfg_getsec(cfg, sections[i]->name);

        for (size_t j = 0; sec != NULL && r == 0 && j < sections[i]->n; j++) {
            const char *v = cfg_getstr(sec, sections[i]->fields[j].name);
            struct err fe;

            if (v == NULL)
                continue;
            /* Already validated line by line; this cannot fail but for a bug. */
            r = sections[i]->fields[j].parse(v, c, &fe);
            if (r < 0)
                err_set(e, r, "%s: %s: %s", name, sections[i]->name, fe.msg);
        }
    }
    if (r == 0 && c->tune.min_size > c->tune.max_size) {
        /* named at the line of the later of the two (a default has none) */
        int line = 0;

        for (size_t i = 0; i < ctx.nset; i++)
            if ((ctx.set[i] == find_field("tune", "min_size") ||
                 ctx.set[i] == find_field("tune", "max_size")) &&
                ctx.set_line[i] > line)
                line = ctx.set_line[i];
        if (line > 0)
            r = err_set(e, -EINVAL, "%s:%d: tune: min_size %lld is above max_size %lld", name, line,
                        c->tune.min_size, c->tune.max_size);
        else
            r = err_set(e, -EINVAL, "%s: tune: min_size %lld is above max_size %lld", name,
                        c->tune.min_size, c->tune.max_size);
    }
    /* Where the keys that later messages name were set: "FILE:LINE". */
    for (size_t i = 0; r == 0 && i < ctx.nset; i++) {
        const struct {
            const char *section, *key;
            char *where;
        } at[] = {
            {"tune", "trials", c->tune.trials_where},
            {"tune", "state_dir", c->tune.state_dir_where},
            {"tune", "smbd_unit", c->tune.smbd_unit_where},
            {"probe", "directory", c->probe.directory_where},
            {"probe", "deadline", c->probe.deadline_where},
            {"probe", "duration", c->probe.duration_where},
        };

        for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++)
            if (ctx.set[i] == find_field(at[k].section, at[k].key))
                snprintf(at[k].where, CONFIG_WHERE_MAX, "%s:%d", name, ctx.set_line[i]);
    }
    cfg_free(cfg);
    free(plain);
    return r;
}

/* Without a URL the target is the own share, which only the shadow smbds
 * serve: a client or live trial would have nothing to measure. */
static int own_share_trials(const struct config *c, struct err *e)
{
    const char *word = c->tune.trials == TUNER_LIVE ? "live" : "client";

    if (c->tune.trials_auto || c->tune.trials == TUNER_SHADOW ||
        (c->tune.mode == TUNER_ADVISE && c->tune.trials == TUNER_LIVE))
        return 0;
    if (c->tune.trials_where[0] != '\0')
        return err_set(e, -EINVAL,
                       "%s: tune: trials = %s needs a url in the probe section (or --url): "
                       "without one smbtuned measures a share of its own that only its "
                       "shadow smbds serve (trials = shadow or auto)",
                       c->tune.trials_where, word);
    return err_set(e, -EINVAL,
                   "--trials %s needs a url (--url, or url in the probe section of the config "
                   "file): without one smbtuned measures a share of its own that only its "
                   "shadow smbds serve (trials shadow or auto)",
                   word);
}

/* A measurement runs each way for up to duration, and needs time besides
 * to log on, open, wait for its last request and delete its file: a
 * deadline of no more than both durations kills every measurement on a
 * path where a direction runs its whole duration, and every rate the
 * search ranks there is a lower bound. Said, not refused: where the size
 * ends each direction first (a LAN, loopback) such a deadline is fine, and
 * a refusal would leave a service that ran before an upgrade down. */
bool config_deadline_short(const struct config *c, char *msg, size_t len)
{
    const struct config_probe *p = &c->probe;
    double both = 2 * p->duration_s;
    long long most = ((long long)p->deadline_s - 1) / 2;
    char alt[64] = "";

    if (!(p->duration_s > 0) || p->deadline_s > both)
        return false;
    if (most >= 1)
        snprintf(alt, sizeof(alt), ", or a duration of at most %lld", most);
    snprintf(msg, len,
             "%s%sprobe: deadline = %.0f is no longer than both directions of duration = %.0f%s%s: "
             "on a path where a direction runs its whole duration every measurement is killed "
             "at the deadline; give a deadline of more than %.0f%s",
             p->deadline_where, p->deadline_where[0] ? ": " : "", p->deadline_s, p->duration_s,
             p->duration_where[0] ? " at " : "", p->duration_where, both, alt);
    return true;
}

/* Live trials write this machine's smb.conf and tell this smbd, while the
 * probe measures the url's server: for a peer's share, rates that do not
 * move with the line, and every local client gets each trial value. Said,
 * not refused: a name or address of this machine other than loopback is
 * this smbd too (and a refusal would leave a service that ran before an
 * upgrade down). */
bool config_live_far(const struct config *c, char *msg, size_t len)
{
    const char *where = c->tune.trials_where;
    struct url u;

    /* (a url that does not parse is refused elsewhere, and is never
     * quoted: it may hold a password) */
    if (c->tune.trials_auto || c->tune.trials != TUNER_LIVE || c->tune.mode != TUNER_TUNE ||
        c->probe.url[0] == '\0' || url_parse(c->probe.url, &u, NULL) != 0 || url_is_loopback(&u))
        return false;
    snprintf(msg, len,
             "%s%strials = live with url = %s: live trials write this machine's smb.conf and "
             "tell its smbd, but the probe measures the url's server; unless that is this "
             "machine, the rates do not move with the line while every local client gets each "
             "trial value, and a cycle whose probe's connection leaves this machine refuses "
             "them (name this machine's share by 127.0.0.1, ::1 or localhost, or use "
             "trials = client for a peer)",
             where, where[0] ? ": tune: " : "", c->probe.url);
    return true;
}

int config_fill(const struct config *c, struct tuner_opts *t, struct err *e)
{
    struct probe_params *p = &t->probe;
    struct search_params *s = &t->search;

    memset(t, 0, sizeof(*t));
    t->own_share = c->probe.url[0] == '\0';
    if (t->own_share && own_share_trials(c, e) < 0)
        return -EINVAL;
    /* The own share holds nothing but probe files, and a killed probe's
     * leftovers are cleared from it: no directory of the admin's. */
    if (t->own_share && c->probe.directory[0] != '\0')
        return err_set(e, -EINVAL,
                       "%s%sprobe: directory = %s needs a url: without one the probe files go "
                       "into smbtuned's own share",
                       c->probe.directory_where, c->probe.directory_where[0] ? ": " : "",
                       c->probe.directory);

    probe_params_default(p);
    p->url = t->own_share ? NULL : c->probe.url;
    p->directory = c->probe.directory[0] ? c->probe.directory : NULL;
    p->credentials = c->probe.credentials[0] ? c->probe.credentials : NULL;
    p->size = c->probe.size;
    p->request_size = c->probe.request_size;
    p->deadline_s = c->probe.deadline_s;
    p->duration_s = c->probe.duration_s;
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
     * reaches every client: in advise mode live becomes what auto picks.
     * A target on this machine is served by the local smbd: its
     * candidates can run on a shadow smbd. A peer's share can only be
     * tuned from our side of the connection: the probe's own client
     * socket. */
    if (c->tune.trials_auto || (c->tune.mode == TUNER_ADVISE && c->tune.trials == TUNER_LIVE))
        t->trials =
            t->own_share || url_text_is_loopback(c->probe.url) ? TUNER_SHADOW : TUNER_CLIENT;
    else
        t->trials = c->tune.trials;
    /* Refused here, not at the first trial: -t, the start and SIGHUP
     * then say it with the line, where every cycle would fail. */
    if (t->trials == TUNER_SHADOW && strlen(c->tune.state_dir) > TRIAL_STATE_DIR_MAX)
        return err_set(e, -EINVAL,
                       "%s%stune: state_dir = %s is %zu bytes: shadow trials need %d at most (a "
                       "shadow smbd's socket lives below it, and a Unix socket path holds 107 "
                       "bytes)",
                       c->tune.state_dir_where, c->tune.state_dir_where[0] ? ": " : "",
                       c->tune.state_dir, strlen(c->tune.state_dir), TRIAL_STATE_DIR_MAX);
    t->apply = c->tune.apply;
    t->restart_smbd = c->tune.restart_smbd;
    t->smbd_unit = c->tune.smbd_unit;
    t->max_bytes = c->tune.max_bytes;
    t->interval_s = c->tune.interval_s;
    t->busy_mbps = (double)c->tune.busy_rate / 1e6;
    t->busy_recheck_s = BUSY_RECHECK_S;
    t->window_start = c->tune.window_start;
    t->window_end = c->tune.window_end;
    return 0;
}

int config_load(const char *path, struct config *c, struct err *e)
{
    struct stat st;
    char *text;
    size_t len;
    int r;

    /* files_read_stat opens non-blocking and reads only a regular file:
     * a FIFO in place of the file would otherwise block -t and SIGHUP for
     * ever. The message names the file. */
    r = files_read_stat(path, &text, &len, &st, e);
    if (r < 0)
        return r;
    /* Root acts on what the file names: the smb.conf it rewrites, the
     * url it logs on to with the credentials file's password. One that
     * someone else may write is refused, as the credentials file and the
     * state directory are: another user's, or writable by others (or by
     * a group other than root's). The fstat of the file read, not a
     * second look-up of the path: whoever owns a directory on it could
     * put a root-owned file there in between. A user who runs smbtuned
     * (--probe, --status) may keep a file of their own writable by their
     * own group: with user private groups and umask 002 (Ubuntu's
     * default) every file they write is. */
    {
        uid_t me = geteuid();
        bool owner_ok = st.st_uid == 0 || st.st_uid == me;
        bool group_ok = (st.st_mode & S_IWGRP) == 0 || st.st_gid == 0 ||
                        (me != 0 && st.st_uid == me && st.st_gid == getegid());

        if (!owner_ok || (st.st_mode & S_IWOTH) != 0 || !group_ok) {
            char who[48] = "root's";

            if (me != 0)
                snprintf(who, sizeof(who), "root's or uid %u's", (unsigned)me);
            free(text);
            return err_set(e, -EPERM,
                           "%s is owned by uid %u, group %u, with mode %04o: refused, it names "
                           "the files smbtuned edits and the credentials it sends, so it must "
                           "be %s and writable by no one else (%s%s%schmod go-w %s)",
                           path, (unsigned)st.st_uid, (unsigned)st.st_gid,
                           (unsigned)(st.st_mode & 07777), who, owner_ok ? "" : "chown root:root ",
                           owner_ok ? "" : path, owner_ok ? "" : "; ", path);
        }
    }
    if (strlen(text) != len) {
        int line = 1;

        for (const char *q = text; *q != '\0'; q++)
            line += *q == '\n';
        free(text);
        return err_set(e, -EINVAL,
                       "%s:%d: contains a NUL byte: expected text (the file may be damaged or "
                       "not a configuration)",
                       path, line);
    }
    r = config_parse_string(text, path, c, e);
    free(text);
    c->from_file = r == 0;
    return r;
}
