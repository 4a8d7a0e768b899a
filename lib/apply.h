/* apply: make smbd take the configuration now in smb.conf. */
#ifndef SMBTUNE_APPLY_H
#define SMBTUNE_APPLY_H

#include <stdint.h>

#include "err.h"

enum apply_method {
    APPLY_NONE,       /* leave it to smbd's own re-read of a changed file */
    APPLY_SMBCONTROL, /* `smbcontrol smbd reload-config`: reaches existing connections */
    APPLY_SIGNAL,     /* SIGHUP to smbd: its parent only (new connections) */
    APPLY_SYSTEMD,    /* ReloadUnit smbd's unit over D-Bus (Debian's: a SIGHUP too) */
};

int apply_parse(const char *s, enum apply_method *m, struct err *e);
const char *apply_name(enum apply_method m);

/* The default of smbd_unit: Debian's name for smbd's unit. */
#define APPLY_DEFAULT_UNIT "smbd.service"

/* Whether unit is a name systemd takes for a service (smbd_unit): 0, or
 * -EINVAL with e saying what is wrong. Pure. */
int apply_unit_check(const char *unit, struct err *e);

/* Tell the smbd that runs with config file smb_conf to reload it; unit
 * is the systemd unit that runs it (APPLY_SYSTEMD queues its reload, and
 * only when that smbd is its main process). 0, or an error says why. */
int apply_run(enum apply_method m, const char *smb_conf, const char *unit, struct err *e);

/* apply_run with smbcontrol given timeout_s seconds instead of 30 (a test
 * of a hung smbcontrol need not wait that long). Past it smbcontrol is
 * killed and the apply fails like a refusal. */
int apply_run_timeout(enum apply_method m, const char *smb_conf, const char *unit, double timeout_s,
                      struct err *e);

/* Whether restart_smbd can restart the smbd that runs with smb_conf: 0
 * when it is unit's main process, 1 when no smbd runs (neither
 * of smb_conf nor of the unit: nothing to restart), else an error says
 * why (not the unit's, no system bus). Reads the pid file (testparm) and
 * asks systemd, which may take a while: a time window is checked after. */
int apply_restart_check(const char *smb_conf, const char *unit, struct err *e);

/* For -t: whether systemd has unit. 0 it has; -ENOENT (e says so) it has
 * no such unit (LoadState not-found); 1 not known (no system bus, or
 * systemd did not answer: e says why), which -t does not refuse. */
int apply_unit_known(const char *unit, struct err *e);

/* Restart unit, smbd's, through systemd (once apply_restart_check said
 * 0): the only way to give its listener, and so new connections,
 * autotuning back. Only when the admin asked for it (tune { restart_smbd
 * = yes }). queued(arg), when not NULL, is called once systemd has the
 * restart's job; then the job's end is waited for, up to timeout_s. 0:
 * smbd restarted (a new main process); 1: the unit was stopping, so
 * the restart did nothing; 2: smbd ran before and does not now (stopped
 * since, or its start skipped or failed while systemd says "done"), a
 * warning: for both the line reaches the next smbd that starts (e says
 * the unit's state); else the restart failed (systemd says so), left the
 * smbd of before running, or had not ended in time (e says which);
 * -EBUSY among them: systemd refused it for a job already queued for
 * smbd (a stop, left to run). */
int apply_restart_smbd(const char *unit, double timeout_s, void (*queued)(void *arg), void *arg,
                       struct err *e);

/* The judgement apply_restart_smbd makes once systemd removed its job:
 * result is the job's ("done", "canceled", "failed"...), before and
 * after unit's ActiveState when the restart was asked for and
 * then, old_pid and new_pid its MainPID then. Returns as
 * apply_restart_smbd does. */
int apply_restart_verdict(const char *unit, const char *result, const char *before,
                          const char *after, uint32_t old_pid, uint32_t new_pid, struct err *e);

#endif
