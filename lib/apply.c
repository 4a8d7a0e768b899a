/* apply: make smbd take the configuration now in smb.conf. */
#include "apply.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "child.h"
#include "smbd.h"

#define SMBCONTROL_TIMEOUT_S 30.0

static const char *const names[] = {
    [APPLY_NONE] = "none",
    [APPLY_SMBCONTROL] = "smbcontrol",
    [APPLY_SIGNAL] = "signal",
    [APPLY_SYSTEMD] = "systemd",
};

int apply_parse(const char *s, enum apply_method *m, struct err *e)
{
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(s, names[i]) == 0) {
            *m = (enum apply_method)i;
            return 0;
        }
    }
    return err_set(e, -EINVAL,
                   "unknown apply method '%s': expected smbcontrol, signal, systemd or none", s);
}

const char *apply_name(enum apply_method m)
{
    return names[m];
}

/* SIGHUP makes smbd's parent re-read smb.conf: connections accepted from
 * then on get the new options, existing ones only when their own process
 * notices the changed file (within about 3 minutes). */
static int apply_signal(const char *smb_conf, struct err *e)
{
    pid_t pid;
    int r = smbd_pid(smb_conf, &pid, e);

    if (r < 0)
        return r;
    if (kill(pid, SIGHUP) < 0)
        return err_set(e, -errno, "SIGHUP to smbd (pid %d): %s", (int)pid, strerror(errno));
    return 0;
}

/* The unit restart_smbd restarts. */
#define SMBD_UNIT "smbd.service"

/* ReloadUnit or TryRestartUnit of smbd.service over D-Bus, in "fail"
 * mode: a job already queued for smbd (an admin's `systemctl stop smbd
 * smbtuned` makes smbd's stop wait for ours) is left alone. In "replace"
 * mode systemd would cancel that stop and restart smbd, which would then
 * run on against the admin's command (seen under systemd 252 with a stop
 * job waiting). */
static int unit_call(sd_bus *bus, const char *method, const char *what, struct err *e)
{
    sd_bus_error be = SD_BUS_ERROR_NULL;
    int r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", method, &be, NULL, "ss",
                               SMBD_UNIT, "fail");

    if (r < 0 && sd_bus_error_has_name(&be, "org.freedesktop.systemd1.TransactionIsDestructive"))
        err_set(e, r,
                "systemd: " SMBD_UNIT "'s %s would cancel a job already queued (a stop of "
                "smbd?): that job is left to run (%s)",
                what, be.message ? be.message : strerror(-r));
    else if (r < 0)
        err_set(e, r, "systemd: %s of " SMBD_UNIT " failed: %s", method,
                be.message ? be.message : strerror(-r));
    sd_bus_error_free(&be);
    return r < 0 ? r : 0;
}

static int systemd_unit(const char *method, const char *what, struct err *e)
{
    sd_bus *bus = NULL;
    int r = sd_bus_open_system(&bus);

    if (r < 0)
        return err_set(e, r, "cannot reach systemd over D-Bus: %s", strerror(-r));
    r = unit_call(bus, method, what, e);
    sd_bus_unref(bus);
    return r;
}

/* smbd.service's main process, 0 when the unit is not running. */
static int unit_main_pid(sd_bus *bus, uint32_t *pid, struct err *e)
{
    sd_bus_error be = SD_BUS_ERROR_NULL;
    sd_bus_message *m = NULL;
    const char *path;
    int r =
        sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                           "org.freedesktop.systemd1.Manager", "LoadUnit", &be, &m, "s", SMBD_UNIT);

    if (r >= 0)
        r = sd_bus_message_read(m, "o", &path);
    if (r >= 0)
        r = sd_bus_get_property_trivial(bus, "org.freedesktop.systemd1", path,
                                        "org.freedesktop.systemd1.Service", "MainPID", &be, 'u',
                                        pid);
    if (r < 0)
        err_set(e, r, "systemd: cannot read " SMBD_UNIT "'s main process: %s",
                be.message ? be.message : strerror(-r));
    sd_bus_message_unref(m);
    sd_bus_error_free(&be);
    return r < 0 ? r : 0;
}

/* Only the smbd that runs with smb_conf, and only as smbd.service's main
 * process: an smbd started by hand or by another unit would not be
 * restarted by systemd (TryRestartUnit of an inactive unit does nothing,
 * and says so by succeeding), and its listener would keep the old sizes
 * while the line reads as autotuning. */
int apply_restart_check(const char *smb_conf, struct err *e)
{
    sd_bus *bus = NULL;
    uint32_t main_pid = 0;
    struct err pe;
    pid_t pid = 0;
    int rp = smbd_pid(smb_conf, &pid, &pe);
    int r = sd_bus_open_system(&bus);

    if (r < 0)
        return err_set(e, r, "cannot reach systemd over D-Bus: %s", strerror(-r));
    r = unit_main_pid(bus, &main_pid, e);
    sd_bus_unref(bus);
    if (r < 0)
        return r;
    /* no smbd, neither of smb_conf nor of the unit: it takes the line
     * when it starts */
    if (rp < 0 && main_pid == 0)
        return 1;
    if (rp < 0)
        return err_set(e, rp, "%s", pe.msg);
    if ((pid_t)main_pid != pid)
        return err_set(e, -ESRCH,
                       "the smbd of %s (pid %d) is not " SMBD_UNIT "'s main process (%s%u): "
                       "restart_smbd restarts only " SMBD_UNIT,
                       smb_conf, (int)pid, main_pid ? "pid " : "", main_pid);
    return 0;
}

/* TryRestartUnit, not RestartUnit: an smbd stopped since the check stays
 * stopped (it takes the line when it starts). */
int apply_restart_smbd(struct err *e)
{
    return systemd_unit("TryRestartUnit", "restart", e);
}

int apply_run(enum apply_method m, const char *smb_conf, struct err *e)
{
    return apply_run_timeout(m, smb_conf, SMBCONTROL_TIMEOUT_S, e);
}

int apply_run_timeout(enum apply_method m, const char *smb_conf, double timeout_s, struct err *e)
{
    char out[1024], errout[1024];
    /* SIGHUP would reach only smbd's parent; reload-config reaches every
     * child, so existing connections get the new buffers too. -s names
     * the config so that smbcontrol finds this smbd's pid directory. */
    char *argv[] = {"smbcontrol", "-s", (char *)smb_conf, "smbd", "reload-config", NULL};
    int status, r;

    if (m == APPLY_NONE)
        return 0;
    if (m == APPLY_SIGNAL)
        return apply_signal(smb_conf, e);
    if (m == APPLY_SYSTEMD)
        return systemd_unit("ReloadUnit", "reload", e);
    r = child_run(argv, timeout_s, out, sizeof(out), errout, sizeof(errout), &status);
    if (r < 0)
        return err_set(e, r, "cannot run smbcontrol: %s", strerror(-r));
    if (status != 0) {
        const char *why = errout[0] ? errout : out[0] ? out : "no output";

        /* its first line: the reason, without what follows */
        return err_set(e, -ESRCH, "smbcontrol -s %s smbd reload-config failed: %.*s", smb_conf,
                       (int)strcspn(why, "\n"), why);
    }
    return 0;
}
