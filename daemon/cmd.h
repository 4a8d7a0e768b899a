/* The command-line entry points. main.c parses the options into struct opts
 * and hands them to one command; each command lives in its own file. */
#ifndef SMBTUNED_CMD_H
#define SMBTUNED_CMD_H

#include <stdbool.h>

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
    bool smb_conf_given;
    bool state_dir_given;
    bool json;    /* --json */
    bool show;    /* --show */
    bool probe;   /* --probe */
    bool once;    /* --once: one cycle in the foreground */
    bool dry_run; /* --dry-run: with --once, one advise cycle */
    bool check;   /* -t: check the config files and exit */
    bool resume;  /* --resume: hand control back after a hold */
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

int cmd_show(const struct opts *o);
int cmd_set_buffers(const struct opts *o);
int cmd_probe(const struct opts *o);
int cmd_run(const struct opts *o);
int cmd_check(const struct opts *o);
int cmd_resume(const struct opts *o);

#endif
