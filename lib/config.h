/* config: /etc/smbtuned.conf (libconfuse) -> struct config.
 *
 * The file is made of sections, one per part of smbtuned; today only
 * `probe { ... }` exists. Every section is optional and every option has a
 * default, so an empty file (or, when the caller allows it, no file) is a
 * valid configuration. Errors name the file and the line.
 *
 * To add a section (daemon: interval, trials, mode, apply, state_dir ...):
 * a struct config_<name> in struct config, its defaults in
 * config_defaults(), its option table, validators and extraction in
 * config.c, next to the probe's. Numbers are written as plain strings in
 * the file and parsed with util_parse_long / util_parse_size, so that a
 * size may be written 64M and every number gets a range check.
 */
#ifndef SMBTUNE_CONFIG_H
#define SMBTUNE_CONFIG_H

#include <stdbool.h>

#include "err.h"

struct config_probe {
    char url[1024];            /* smb://host[:port]/share[/dir]; "" = none */
    char credentials[4096];    /* path of the credentials file; "" = guest */
    long long size;            /* bytes written and read back */
    long long request_size;    /* bytes per write/read call */
    long long deadline_s;      /* hard limit on one measurement, seconds */
    char directory[1024];      /* directory inside the URL's path; "" = none */
    char socket_options[1024]; /* the probe client's `socket options` */
};

#define CONFIG_DEFAULT_SMB_CONF "/etc/samba/smb.conf"
#define CONFIG_DEFAULT_STATE_DIR "/var/lib/smbtuned"

struct config_tune {
    char smb_conf[4096];  /* the smb.conf tuned */
    char state_dir[4096]; /* state file, backups, lock, shadow run dirs */
    bool advise;          /* measure and report, never write smb.conf */
    char trials[16];      /* auto, shadow, client, live */
    char apply[16];       /* smbcontrol, none */
    long long interval_s; /* between cycles */
    long long min_size, max_size; /* the search's bounds (max capped by the kernel) */
    double min_gain;      /* a move must gain this much */
    double abort_ratio;   /* a trial sample below this share of the incumbent ends it */
    long long max_samples; /* per configuration in one comparison */
    long long max_bytes;  /* moved by one cycle's probes; 0: no limit */
    long long busy_rate;  /* client bytes/s that defer a cycle; 0: never */
    int window_start, window_end; /* minutes after midnight; -1: any time */
    bool tied;            /* SO_RCVBUF = SO_SNDBUF, moved together */
    bool restart_smbd;    /* may restart smbd.service to make AUTO take effect */
};

struct config {
    struct config_probe probe;
    struct config_tune tune;
};

struct probe_params;

/* The probe's parameters from the probe section (its work directories in
 * the state directory); the credentials file, when one is set, is checked
 * but not kept in memory (the probe child reads it). The strings point
 * into c. */
int config_probe_params(const struct config *c, struct probe_params *p, struct err *e);

/* Set one option from its text, as if the file said it (the command line
 * overrides the file this way). Errors have no file or line. */
int config_set(struct config *c, const char *section, const char *name, const char *value,
               struct err *e);

/* The built-in defaults (what an empty file gives). */
void config_defaults(struct config *c);

/* Parse text as the contents of a file called name (used in messages).
 * On error c is left with unspecified values. */
int config_parse_string(const char *text, const char *name, struct config *c, struct err *e);

/* Read and parse path. -ENOENT (with a message) when it does not exist, so
 * that a caller that was not given the path explicitly can use defaults. */
int config_load(const char *path, struct config *c, struct err *e);

#endif
