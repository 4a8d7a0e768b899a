/* apply: make smbd take the configuration now in smb.conf. */
#include "apply.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

/* systemd's rule for a unit's name (unit_name_is_valid): at most 255
 * bytes of ASCII letters, digits and ":-_.\\", an instance after the
 * first '@'.
 * Only a service has a main process to check and restart. Checked when
 * the config is read, so that a typo is named with its line instead of
 * failing at the first commit as a D-Bus error. The bytes are checked
 * first, so that the messages after echo only printable ones. */
int apply_unit_check(const char *unit, struct err *e)
{
    static const char suffix[] = ".service";
    size_t n = strlen(unit), s = sizeof(suffix) - 1;
    const char *at = strchr(unit, '@');

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)unit[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr(":-_.\\@", c)))
            return err_set(e, -EINVAL,
                           "not a unit name: byte %zu (0x%02x) is none of a unit name's "
                           "letters, digits and \":-_.\\@\"",
                           i + 1, c);
    }
    if (n > 255)
        return err_set(e, -EINVAL, "'%.40s...' is longer than a unit name may be (255 bytes)",
                       unit);
    if (n <= s || strcmp(unit + n - s, suffix) != 0)
        return err_set(e, -EINVAL,
                       "'%s' is not a service unit: expected a name such as "
                       "smbd.service",
                       unit);
    /* the first '@' starts the instance, which may hold more of them */
    if (at == unit || (at && at + 1 == unit + n - s))
        return err_set(e, -EINVAL,
                       "'%s' is not a unit name: a '@' needs a name before it and an instance "
                       "after it (smbd@INSTANCE.service)",
                       unit);
    return 0;
}

/* ReloadUnit or TryRestartUnit of smbd's unit over D-Bus, in "fail"
 * mode: a job already queued for smbd (an admin's `systemctl stop smbd
 * smbtuned` makes smbd's stop wait for ours) is left alone. In "replace"
 * mode systemd would cancel that stop and restart smbd, which would then
 * run on against the admin's command (seen under systemd 252 with a stop
 * job waiting). */
static int unit_call(sd_bus *bus, const char *unit, const char *method, const char *what,
                     char **job, struct err *e)
{
    sd_bus_error be = SD_BUS_ERROR_NULL;
    sd_bus_message *m = NULL;
    const char *path;
    int r =
        sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                           "org.freedesktop.systemd1.Manager", method, &be, &m, "ss", unit, "fail");

    if (r < 0 && sd_bus_error_has_name(&be, "org.freedesktop.systemd1.TransactionIsDestructive"))
        r = err_set(e, -EBUSY,
                    "systemd: %s's %s would cancel a job already queued (a stop of "
                    "smbd?): that job is left to run (%s)",
                    unit, what, be.message ? be.message : strerror(-r));
    else if (r < 0)
        err_set(e, r, "systemd: %s of %s failed: %s", method, unit,
                be.message ? be.message : strerror(-r));
    /* the job's object path: its JobRemoved signal names it */
    if (r >= 0 && job) {
        r = sd_bus_message_read(m, "o", &path);
        if (r >= 0 && !(*job = strdup(path)))
            r = -ENOMEM;
        if (r < 0)
            err_set(e, r, "systemd: no job for the %s of %s: %s", what, unit, strerror(-r));
    }
    sd_bus_message_unref(m);
    sd_bus_error_free(&be);
    return r < 0 ? r : 0;
}

/* unit's main process (0 when it is not running) and, when state is not
 * NULL, its ActiveState. LoadUnit succeeds for a name systemd has no file
 * for (LoadState "not-found", no main process): that is a misspelt
 * smbd_unit, said as such rather than as an smbd the unit does not run. */
static int unit_get(sd_bus *bus, const char *unit, uint32_t *pid, char *state, size_t len,
                    struct err *e)
{
    sd_bus_error be = SD_BUS_ERROR_NULL;
    sd_bus_message *m = NULL;
    const char *path, *what = "load state";
    char *active = NULL, *load = NULL;
    int r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "LoadUnit", &be, &m, "s", unit);

    if (r >= 0)
        r = sd_bus_message_read(m, "o", &path);
    if (r >= 0)
        r = sd_bus_get_property_string(bus, "org.freedesktop.systemd1", path,
                                       "org.freedesktop.systemd1.Unit", "LoadState", &be, &load);
    if (r >= 0 && strcmp(load, "not-found") == 0) {
        r = err_set(e, -ENOENT,
                    "systemd has no unit %s (LoadState not-found): smbd_unit names the unit "
                    "that runs smbd",
                    unit);
        goto out;
    }
    if (r >= 0) {
        what = "main process";
        r = sd_bus_get_property_trivial(bus, "org.freedesktop.systemd1", path,
                                        "org.freedesktop.systemd1.Service", "MainPID", &be, 'u',
                                        pid);
    }
    if (r >= 0 && state) {
        what = "state";
        r = sd_bus_get_property_string(bus, "org.freedesktop.systemd1", path,
                                       "org.freedesktop.systemd1.Unit", "ActiveState", &be,
                                       &active);
    }
    if (r >= 0 && state)
        snprintf(state, len, "%s", active);
    if (r < 0)
        err_set(e, r, "systemd: cannot read %s's %s: %s", unit, what,
                be.message ? be.message : strerror(-r));
out:
    free(load);
    free(active);
    sd_bus_message_unref(m);
    sd_bus_error_free(&be);
    return r < 0 ? r : 0;
}

/* Whether the smbd that runs with smb_conf is unit's main process, for
 * a restart or a reload of it (what). 0, 1 when no smbd runs (neither of
 * smb_conf nor of the unit), else an error that says why not. */
static int unit_runs_smbd(const char *smb_conf, const char *unit, const char *what, struct err *e)
{
    sd_bus *bus = NULL;
    uint32_t main_pid = 0;
    struct err pe;
    pid_t pid = 0;
    int rp = smbd_pid(smb_conf, &pid, &pe);
    int r = sd_bus_open_system(&bus);

    if (r < 0)
        return err_set(e, r, "cannot reach systemd over D-Bus: %s", strerror(-r));
    r = unit_get(bus, unit, &main_pid, NULL, 0, e);
    sd_bus_unref(bus);
    if (r < 0)
        return r;
    /* no smbd, neither of smb_conf nor of the unit: it takes the line
     * when it starts */
    if (rp < 0 && main_pid == 0)
        return err_set(e, 1, "smbd is not running (nothing to %s)", what);
    if (rp < 0)
        return err_set(e, rp, "%s", pe.msg);
    if ((pid_t)main_pid != pid)
        return err_set(e, -ESRCH,
                       "the smbd of %s (pid %d) is not %s's main process (%s%u): a %s of that "
                       "unit would not reach it (smbd_unit names smbd's unit)",
                       smb_conf, (int)pid, unit, main_pid ? "pid " : "", main_pid, what);
    return 0;
}

int apply_unit_known(const char *unit, struct err *e)
{
    sd_bus *bus = NULL;
    uint32_t pid = 0;
    int r = sd_bus_open_system(&bus);

    if (r < 0)
        return err_set(e, 1, "cannot reach systemd over D-Bus: %s", strerror(-r));
    r = unit_get(bus, unit, &pid, NULL, 0, e);
    sd_bus_unref(bus);
    if (r == -ENOENT)
        return r;
    return r < 0 ? 1 : 0;
}

/* Only the smbd that runs with smb_conf, and only as its unit's main
 * process: an smbd started by hand or by another unit would not be
 * restarted by systemd (TryRestartUnit of an inactive unit does nothing,
 * and says so by succeeding), and its listener would keep the old sizes
 * while the line reads as autotuning. */
int apply_restart_check(const char *smb_conf, const char *unit, struct err *e)
{
    return unit_runs_smbd(smb_conf, unit, "restart", e);
}

/* ActiveState: smbd runs (a reload keeps its main process; "refreshing"
 * is systemd 256's). */
static bool running(const char *active)
{
    return strcmp(active, "active") == 0 || strcmp(active, "reloading") == 0 ||
           strcmp(active, "refreshing") == 0;
}

int apply_restart_verdict(const char *unit, const char *result, const char *before,
                          const char *after, uint32_t old_pid, uint32_t new_pid, struct err *e)
{
    /* "canceled": another job for smbd replaced ours (an admin's stop or
     * restart); what the unit does now says what came of it */
    if (strcmp(result, "done") != 0 && strcmp(result, "canceled") != 0)
        return err_set(e, -EIO,
                       "systemd's restart of %s ended \"%s\", and the unit is %s "
                       "(`systemctl status %s` says why)",
                       unit, result, after, unit);
    /* The same main process, not on its way out: the smbd that read the
     * old line goes on serving with its listener (running, or still
     * starting: an smbd that read the line before our write, whose start
     * our restart merged into). A dying one (deactivating) is not. */
    if ((running(after) && new_pid == 0) ||
        (new_pid != 0 && new_pid == old_pid && strcmp(after, "deactivating") != 0))
        return err_set(e, -ESRCH,
                       "systemd's restart of %s ended \"%s\", but its main "
                       "process is %u (before it: %u, the unit %s): not restarted",
                       unit, result, new_pid, old_pid, after);
    if (running(after))
        return 0;
    /* Not running now, and not the smbd of before: the smbd that starts
     * next reads the line in force, so the commit stands, whatever stopped
     * smbd. systemd makes a try-restart of a unit already stopping (an
     * admin's stop under way) nothing, "done"; a stop queued after ours
     * cancels it. */
    if (strcmp(before, "deactivating") == 0 || strcmp(before, "inactive") == 0 ||
        strcmp(before, "failed") == 0)
        return err_set(e, 1, "%s is %s: its restart did nothing (systemd: \"%s\")", unit, after,
                       result);
    if (strcmp(result, "canceled") == 0)
        return err_set(e, 1,
                       "%s is %s: another job for it (a stop?) replaced the restart "
                       "(systemd: \"canceled\")",
                       unit, after);
    /* smbd ran before, and does not now: an admin's stop between our
     * reads and the restart, or a restart whose start was skipped (a
     * Condition) or whose smbd died at once. From here they cannot be
     * told apart; smbd may be down for the restart we asked for, so
     * this one is said as a warning (2), with where to look. */
    return err_set(e, 2,
                   "%s is %s after its restart (systemd: \"%s\"; `systemctl status %s` says "
                   "why)",
                   unit, after, result, unit);
}

struct job_wait {
    char *job;       /* our job, once systemd has it */
    char result[32]; /* its result, once it is removed */
    bool removed;
};

static int job_removed(sd_bus_message *m, void *ud, sd_bus_error *ret_error)
{
    struct job_wait *rw = ud;
    const char *path, *unit, *result;
    uint32_t id;

    (void)ret_error;
    if (sd_bus_message_read(m, "uoss", &id, &path, &unit, &result) < 0)
        return 0;
    if (rw->job && strcmp(path, rw->job) == 0) {
        snprintf(rw->result, sizeof(rw->result), "%s", result);
        rw->removed = true;
    }
    return 0;
}

static uint64_t now_usec(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Until systemd removes rw's job, or timeout_s passes (-ETIMEDOUT). */
static int wait_removed(sd_bus *bus, struct job_wait *rw, double timeout_s)
{
    uint64_t end = now_usec() + (uint64_t)(timeout_s * 1e6);

    for (;;) {
        int r = sd_bus_process(bus, NULL);
        uint64_t t;

        if (r < 0)
            return r;
        if (rw->removed)
            return 0;
        t = now_usec();
        if (t >= end)
            return -ETIMEDOUT;
        if (r > 0)
            continue;
        r = sd_bus_wait(bus, end - t);
        if (r < 0 && r != -EINTR)
            return r;
    }
}

/* systemd sends JobRemoved only to subscribers, so the match and the
 * subscription come before the call that makes the job. */
static int follow_jobs(sd_bus *bus, struct job_wait *jw, const char *unit, const char *what,
                       struct err *e)
{
    sd_bus_error be = SD_BUS_ERROR_NULL;
    int r = sd_bus_match_signal(bus, NULL, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                "org.freedesktop.systemd1.Manager", "JobRemoved", job_removed, jw);

    if (r >= 0)
        r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "Subscribe", &be, NULL, NULL);
    if (r < 0)
        err_set(e, r, "systemd: cannot follow the %s of %s: %s", what, unit,
                be.message ? be.message : strerror(-r));
    sd_bus_error_free(&be);
    return r < 0 ? r : 0;
}

/* ReloadUnit reaches the unit's main process only (Debian's smbd.service:
 * SIGHUP to it). An smbd that is not that process, such as the one of
 * samba-ad-dc.service (whose main process is samba), is not sure to be
 * told: refused, with why; so is no smbd at all, as smbcontrol would say
 * it. The reload's job is queued, not waited for: smbtuned.service is
 * ordered after smbd's unit, so during a stop or restart of smbtuned
 * (whose take-back of a live trial tells smbd from the loop) systemd
 * holds the reload until smbtuned has gone, and a wait would only run
 * out. An ExecReload that fails is therefore not seen here. */
static int systemd_reload(const char *smb_conf, const char *unit, struct err *e)
{
    sd_bus *bus = NULL;
    int r = unit_runs_smbd(smb_conf, unit, "reload", e);

    if (r != 0)
        return r > 0 ? -ESRCH : r;
    r = sd_bus_open_system(&bus);
    if (r < 0)
        return err_set(e, r, "cannot reach systemd over D-Bus: %s", strerror(-r));
    r = unit_call(bus, unit, "ReloadUnit", "reload", NULL, e);
    sd_bus_unref(bus);
    return r;
}

/* TryRestartUnit, not RestartUnit: an smbd stopped since the check stays
 * stopped (it takes the line when it starts). The call returns when the
 * job is queued; the restart is judged when systemd has ended it, from
 * the job's result and the unit's main process: a restart that did
 * nothing (smbd was stopping) or failed (smbd did not start again) is not
 * reported as done. */
int apply_restart_smbd(const char *unit, double timeout_s, void (*queued)(void *arg), void *arg,
                       struct err *e)
{
    sd_bus *bus = NULL;
    struct job_wait rw = {0};
    uint32_t old_pid = 0, new_pid = 0;
    char before[32] = "", after[32] = "";
    int r = sd_bus_open_system(&bus);

    if (r < 0)
        return err_set(e, r, "cannot reach systemd over D-Bus: %s", strerror(-r));
    r = follow_jobs(bus, &rw, unit, "restart", e);
    if (r >= 0)
        r = unit_get(bus, unit, &old_pid, before, sizeof(before), e);
    if (r >= 0)
        r = unit_call(bus, unit, "TryRestartUnit", "restart", &rw.job, e);
    if (r < 0)
        goto out;
    if (queued)
        queued(arg);
    r = wait_removed(bus, &rw, timeout_s);
    if (r == -ETIMEDOUT)
        err_set(e, r,
                "systemd's restart of %s had not ended after %.0f s (systemd goes on with it)",
                unit, timeout_s);
    else if (r < 0)
        err_set(e, r, "systemd: lost the restart of %s: %s", unit, strerror(-r));
    if (r >= 0)
        r = unit_get(bus, unit, &new_pid, after, sizeof(after), e);
    if (r >= 0)
        r = apply_restart_verdict(unit, rw.result, before, after, old_pid, new_pid, e);
out:
    free(rw.job);
    sd_bus_unref(bus);
    return r;
}

int apply_run(enum apply_method m, const char *smb_conf, const char *unit, struct err *e)
{
    return apply_run_timeout(m, smb_conf, unit, SMBCONTROL_TIMEOUT_S, e);
}

int apply_run_timeout(enum apply_method m, const char *smb_conf, const char *unit, double timeout_s,
                      struct err *e)
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
        return systemd_reload(smb_conf, unit, e);
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
