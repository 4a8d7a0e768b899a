/* The command-line entry points. main.c parses the options into struct opts
 * and hands them to one command; each command lives in its own file. */
#ifndef SMBTUNED_CMD_H
#define SMBTUNED_CMD_H

#include <stdbool.h>

/* Exit status, in one place (smbtuned(8), EXIT STATUS). 1 stays what it
 * always was, a failure at run time; usage and config errors take the
 * sysexits.h numbers, so that they cannot be mistaken for --probe's own
 * 2 (a timeout: lower bounds), which scripts and tests rely on. */
enum cmd_exit {
    CMD_EXIT_OK = 0,
    CMD_EXIT_FAILURE = 1,       /* a cycle, a measurement, an edit failed; a hold */
    CMD_EXIT_PROBE_TIMEOUT = 2, /* --probe: the deadline passed */
    CMD_EXIT_USAGE = 64,        /* EX_USAGE: a bad command line */
    CMD_EXIT_CONFIG = 78,       /* EX_CONFIG: the config file (or -t's smb.conf) refused */
};

struct opts {
    const char *config_file; /* -c FILE, default SMBTUNED_CONF */
    bool config_given;       /* -c was on the command line */
    const char *smb_conf;    /* --smb-conf FILE */
    const char *state_dir;   /* --state-dir DIR */
    const char *set_buffers; /* --set-buffers RCV,SND */
    const char *apply;       /* --apply smbcontrol|signal|systemd|none */
    const char *url;         /* --url URL */
    const char *credentials; /* --credentials FILE */
    const char *expect;      /* --expect VALUE: compare-and-set guard */
    const char *mode;        /* --mode tune|advise */
    const char *trials;      /* --trials shadow|client|live */
    const char *seconds;     /* --seconds N: how long --clients observes */
    bool smb_conf_given;
    bool state_dir_given;
    bool json;    /* --json */
    bool show;    /* --show */
    bool probe;   /* --probe */
    bool once;    /* --once: one cycle in the foreground */
    bool dry_run; /* --dry-run: with --once, one advise cycle */
    bool check;   /* -t: check the config files and exit */
    bool resume;  /* --resume: hand control back after a hold */
    bool status;  /* --status: what the state file and smb.conf say now */
    bool clients; /* --clients: what limits smbd's connections */
};

struct config;
struct err;
struct tuner_opts;

/* The config file (the built-in defaults when the default file is absent;
 * a file given with -c must exist), then the command line over it. */
int cmd_load_config(const struct opts *o, struct config *c, struct err *e);

/* config_fill(), then a check of the credentials file (when one is set):
 * the parameters of a probe or of a run. The strings point into c. */
int cmd_fill(const struct config *c, struct tuner_opts *t, struct err *e);

/* How cmd_opts fills: at the start and for -t, with the credentials
 * file checked in place (cmd_fill); for a SIGHUP, without (its job checks
 * it, conf_check.h); again: the configuration a SIGHUP has just checked,
 * filled a second time into d itself (its strings must point into
 * d->cfg), and the notice not said twice. */
enum cmd_fill { CMD_FILL_START, CMD_FILL_RELOAD, CMD_FILL_AGAIN };

/* struct config -> struct tuner_opts, and what only the command line says.
 * The strings stay in c. */
int cmd_opts(const struct opts *o, const struct config *c, struct tuner_opts *t, enum cmd_fill how,
             struct err *e);

int cmd_show(const struct opts *o);
int cmd_set_buffers(const struct opts *o);
int cmd_probe(const struct opts *o);
int cmd_run(const struct opts *o);
int cmd_check(const struct opts *o);
int cmd_resume(const struct opts *o);
int cmd_status(const struct opts *o);
int cmd_clients(const struct opts *o);

#endif
