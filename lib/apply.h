/* apply: make smbd take the configuration now in smb.conf. */
#ifndef SMBTUNE_APPLY_H
#define SMBTUNE_APPLY_H

#include "err.h"

enum apply_method {
    APPLY_NONE,       /* leave it to smbd's own re-read of a changed file */
    APPLY_SMBCONTROL, /* `smbcontrol smbd reload-config`: reaches existing connections */
    APPLY_SIGNAL,     /* SIGHUP to smbd: its parent only (new connections) */
    APPLY_SYSTEMD,    /* ReloadUnit smbd.service over D-Bus (Debian's: a SIGHUP too) */
};

int apply_parse(const char *s, enum apply_method *m, struct err *e);
const char *apply_name(enum apply_method m);

/* Tell the smbd that runs with config file smb_conf to reload it. */
int apply_run(enum apply_method m, const char *smb_conf, struct err *e);

/* apply_run with smbcontrol given timeout_s seconds instead of 30 (a test
 * of a hung smbcontrol need not wait that long). Past it smbcontrol is
 * killed and the apply fails like a refusal. */
int apply_run_timeout(enum apply_method m, const char *smb_conf, double timeout_s, struct err *e);

/* Restart smbd.service through systemd: the only way to give its listener,
 * and so new connections, autotuning back. Only when the admin asked for
 * it (tune { restart_smbd = yes }), and only when the smbd that runs with
 * smb_conf is that unit's main process (else an error says why). */
int apply_restart_smbd(const char *smb_conf, struct err *e);

#endif
