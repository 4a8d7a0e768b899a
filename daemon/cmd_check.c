/* -t: the configuration checked as the daemon's start checks it, and
 * smb.conf as a configuration too (the editor's reading, testparm's, a
 * shadow's, the state directory, smbd's unit); nothing is written. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#include "apply.h"
#include "cmd.h"
#include "conf_check.h"
#include "config.h"
#include "files.h"
#include "smbconf.h"

int cmd_check(const struct opts *o)
{
    struct config cfg;
    struct tuner_opts t;
    struct smbconf c;
    struct err e = {{0}};
    char *v = NULL;
    int r;

    if (cmd_load_config(o, &cfg, &e) < 0 || cmd_opts(o, &cfg, &t, CMD_FILL_START, &e) < 0) {
        fprintf(stderr, "smbtuned: %s\n", e.msg);
        return CMD_EXIT_CONFIG;
    }
    /* -t checks smb.conf as a configuration too: one it refuses is one */
    if (smbconf_load(&c, t.smb_conf, &e) < 0) {
        fprintf(stderr, "smbtuned: %s\n", e.msg);
        return CMD_EXIT_CONFIG;
    }
    /* and smb.conf as Samba reads it: every write of smbtuned's is judged
     * by testparm, so a file it cannot load is one no cycle could change
     * (the start does not wait for testparm; each cycle says so). */
    if (smbconf_testparm(t.smb_conf, "socket options", &v, &e) < 0) {
        fprintf(stderr, "smbtuned: %s\n", e.msg);
        smbconf_free(&c);
        return CMD_EXIT_CONFIG;
    }
    free(v);
    /* and that a shadow smbd can run it: with a url, shadows run
     * production's smb.conf, and on an AD DC smbd refuses to run without
     * the samba that starts it (every cycle would fail in the shadow's
     * log). The own share's shadow is a standalone server of its own. */
    if (t.trials == TUNER_SHADOW && !t.own_share) {
        if (smbconf_testparm(t.smb_conf, "server role", &v, &e) < 0) {
            fprintf(stderr, "smbtuned: %s\n", e.msg);
            smbconf_free(&c);
            return CMD_EXIT_CONFIG;
        }
        r = strcasecmp(v, "active directory domain controller") == 0;
        free(v);
        if (r) {
            const char *where = cfg.tune.trials_where;

            fprintf(stderr,
                    "smbtuned: %s%sshadow trials with a url run %s, and this smbd is an AD DC's "
                    "(server role = active directory domain controller), which smbd refuses to "
                    "run without samba: measure smbtuned's own share (no url) or a peer's "
                    "share (trials = \"client\")\n",
                    where, where[0] ? ": tune: trials: " : "", t.smb_conf);
            smbconf_free(&c);
            return CMD_EXIT_CONFIG;
        }
    }
    /* and where the line would be written, as the start judges it */
    if (conf_check_writable(&t, &c, &e) < 0) {
        fprintf(stderr, "smbtuned: %s\n", e.msg);
        smbconf_free(&c);
        return CMD_EXIT_CONFIG;
    }
    /* and the state directory as the start judges it (the start refuses
     * it with exit 1; here it is a configuration found wanting), made by
     * neither: -t changes nothing. */
    r = files_judge_private_dir(t.state_dir, &e);
    if (r < 0) {
        /* judged for this user, where the daemon runs as root: say so */
        fprintf(stderr, "smbtuned: state directory: %s%s\n", e.msg,
                geteuid() != 0 && (r == -EACCES || r == -EPERM)
                    ? " (-t judges it for the user running it: run it as the daemon's user, root)"
                    : "");
        smbconf_free(&c);
        return CMD_EXIT_CONFIG;
    }
    /* and, where smbtuned would ask systemd for it, that systemd has the
     * unit named: a misspelt smbd_unit otherwise shows at the first commit.
     * Not known (no systemd here, or no answer: a container, a build
     * machine): not refused, and said. */
    if (t.restart_smbd || t.apply == APPLY_SYSTEMD) {
        const char *where = cfg.tune.smbd_unit_where;

        r = apply_unit_known(t.smbd_unit, &e);
        if (r < 0) {
            fprintf(stderr, "smbtuned: %s%s%s\n", where, where[0] ? ": tune: " : "", e.msg);
            smbconf_free(&c);
            return CMD_EXIT_CONFIG;
        }
        if (r > 0)
            fprintf(stderr, "smbtuned: smbd_unit %s not checked: %s\n", t.smbd_unit, e.msg);
    }
    /* Silence would leave the admin to guess which files were read (the
     * default config file may be absent: the built-in defaults). */
    printf("configuration OK: %s%s, %s%s%sand %s ", o->config_file,
           access(o->config_file, F_OK) == 0 ? "" : " (absent: the built-in defaults)",
           t.probe.credentials ? "credentials " : "",
           t.probe.credentials ? t.probe.credentials : "", t.probe.credentials ? ", " : "",
           t.smb_conf);
    if (c.found)
        printf("(socket options at %s:%d)\n", c.files[c.hit.file].path, c.hit.line);
    else
        printf("(no socket options line: Samba's default)\n");
    smbconf_free(&c);
    return 0;
}
