/* config: /etc/smbtuned.conf (libconfuse) -> struct config, typed.
 *
 * The file is made of sections, one per part of smbtuned: `probe { ... }`
 * and `tune { ... }`. Every section is optional and every option has a
 * default, so an empty file (or, when the caller allows it, no file) is a
 * valid configuration. Errors name the file and the line.
 *
 * The text becomes typed values here, once: words become the enums of
 * tuner_opts.h and apply.h, sizes long long bytes, durations double
 * seconds, yes/no booleans. config_fill() then builds the probe's, the
 * search's and the tuner's parameters from them.
 *
 * One set of defaults: what the probe and the search are given when nobody
 * says otherwise is defined once, by probe_params_default() (probe.h's
 * PROBE_DEFAULT_*) and search_params_default(); config_defaults() takes
 * those, and defines only the loop's own (interval, trials, apply ...).
 * conf/smbtuned.conf documents the same values (test_config checks it).
 *
 * To add an option: a field in struct config_<section>, its default in
 * config_defaults() (or in the part's own _params_default), a parser in
 * the section's table (config_probe.c for probe, config_tune.c for tune),
 * and its use in config_fill(). Numbers are written as plain strings in the
 * file and parsed with parse_long / parse_size, so that a size may be
 * written 64M and every number gets a range check.
 */
#ifndef SMBTUNE_CONFIG_H
#define SMBTUNE_CONFIG_H

#include <stdbool.h>

#include "apply.h"
#include "build.h"
#include "tuner_opts.h"
#include "err.h"

/* "FILE:LINE": a path of up to 4096 bytes and a line number */
#define CONFIG_WHERE_MAX 4160

struct config_probe {
    char url[1024];         /* smb://host[:port]/share[/dir]; "" = the own share */
    char credentials[4096]; /* path of the credentials file; "" = guest */
    long long size;         /* bytes written and read back */
    long long request_size; /* bytes per write/read call */
    double deadline_s;      /* hard limit on one measurement (whole seconds in the file) */
    double duration_s;      /* most seconds each way (whole in the file); 0: none */
    /* "FILE:LINE" of each, for the message that refuses a deadline too
     * short for the duration; "" when it did not come from a file. */
    char deadline_where[CONFIG_WHERE_MAX], duration_where[CONFIG_WHERE_MAX];
    char directory[1024]; /* directory inside the URL's path; "" = none */
    /* "FILE:LINE" of the directory key, for the message that refuses it
     * without a URL; "" when it did not come from a file. */
    char directory_where[CONFIG_WHERE_MAX];
    char socket_options[1024]; /* the probe client's `socket options` */
};

#define CONFIG_DEFAULT_SMB_CONF "/etc/samba/smb.conf"
/* the build's statedir (meson_options.txt), as --help and the unit say */
#define CONFIG_DEFAULT_STATE_DIR SMBTUNED_STATE_DIR

struct config_tune {
    char smb_conf[4096];  /* the smb.conf tuned */
    char state_dir[4096]; /* state file, backups, lock, shadow run dirs */
    /* "FILE:LINE" of the state_dir key, for the message that refuses a
     * change of it on SIGHUP; "" when it did not come from a file. */
    char state_dir_where[CONFIG_WHERE_MAX];
    enum tuner_mode mode; /* tune, or advise: measure and report, never write smb.conf */
    /* "auto": shadow for a URL on this machine or no URL, else client;
     * config_fill() decides, since --url may still change the URL after
     * the file. When true, trials is not used. */
    bool trials_auto;
    enum tuner_trials trials; /* shadow, client, live */
    /* "FILE:LINE" of the trials key, for the message that refuses client
     * or live trials without a URL; "" when it did not come from a file. */
    char trials_where[CONFIG_WHERE_MAX];
    enum apply_method apply;      /* smbcontrol, signal, systemd, none */
    double interval_s;            /* between cycles */
    long long min_size, max_size; /* the search's bounds (max capped by the kernel) */
    double min_gain;              /* a move must gain this much */
    double abort_ratio;           /* a trial sample below this share of the incumbent ends it */
    int max_samples;              /* per configuration in one comparison */
    long long max_bytes;          /* moved by one cycle's probes; 0: no limit */
    long long busy_rate;          /* client bytes/s that defer a cycle; 0: never */
    int window_start, window_end; /* minutes after midnight; -1: any time */
    bool tied;                    /* SO_RCVBUF = SO_SNDBUF, moved together */
    bool restart_smbd;            /* may restart smbd's unit to make AUTO take effect */
    char smbd_unit[256];          /* the systemd unit that runs smbd (apply_unit_check) */
    /* "FILE:LINE" of the smbd_unit key, for -t's check that systemd has
     * the unit; "" when it did not come from a file. */
    char smbd_unit_where[CONFIG_WHERE_MAX];
};

struct config {
    struct config_probe probe;
    struct config_tune tune;
    bool from_file; /* config_load read a file; false: the built-in defaults */
};

/* Whether c's probe deadline is no longer than both directions of its
 * duration, with msg saying so (the files and lines of both): a warning
 * for the start, -t and SIGHUP to give. */
bool config_deadline_short(const struct config *c, char *msg, size_t len);

/* Whether c has live trials (tune mode) with a url whose host is no
 * loopback address, with msg saying why that likely measures nothing the
 * line changes: a warning for the start, -t and SIGHUP to give. */
bool config_live_far(const struct config *c, char *msg, size_t len);

/* Everything a run needs from c, from the one set of defaults:
 * t->probe (probe_params_default() with the probe section over it, work
 * directories in the state directory), t->search (search_params_default()
 * with the tune section's bounds, gain, abort ratio, samples and tied over
 * it) and the tuner's own fields. trials = auto becomes shadow or client
 * from the URL, and advise mode never runs live trials (the same choice).
 * Without a URL the probe measures the daemon's own share (t->own_share,
 * t->probe.url NULL) on shadow smbds: trials = client or live is then
 * -EINVAL, naming the trials line. The command-line-only fields (once,
 * json, progress) are left false. The strings point into c. Pure: the
 * credentials file, when one is set, is not read here (see creds_check()). */
int config_fill(const struct config *c, struct tuner_opts *t, struct err *e);

/* Set one option from its text, as if the file said it (the command line
 * overrides the file this way). Errors have no file or line. */
int config_set(struct config *c, const char *section, const char *name, const char *value,
               struct err *e);

/* The built-in defaults (what an empty file gives). */
void config_defaults(struct config *c);

/* The largest config file read: the shipped one, every key documented, is about
 * 10 KiB. libconfuse's lexer (flex) takes time quadratic in the length of
 * one token, and a run of blanks is one: a 16 MiB comment line took -t
 * 195 s, and a SIGHUP that long would starve the watchdog. */
#define CONFIG_MAX_BYTES (256 * 1024)

/* Parse text as the contents of a file called name (used in messages).
 * On error c is left with unspecified values. */
int config_parse_string(const char *text, const char *name, struct config *c, struct err *e);

/* Read and parse path. -ENOENT (with a message) when it does not exist, so
 * that a caller that was not given the path explicitly can use defaults. */
int config_load(const char *path, struct config *c, struct err *e);

#endif
