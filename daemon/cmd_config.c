/* The configuration of a command: the config file with the command line's
 * overrides and a credential passed by systemd (cmd_load_config), then the
 * options the tuner runs with (cmd_fill, cmd_opts). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "cmd.h"
#include "config.h"
#include "creds.h"
#include "journal.h"

/* A logon passed by systemd (LoadCredential=smbtuned-credentials:FILE in a
 * drop-in, systemd.exec(5)): systemd copies FILE into a private directory
 * named by $CREDENTIALS_DIRECTORY, readable by this service only. It fills
 * in only when neither --credentials nor the config file names a file: what
 * the admin wrote in smbtuned.conf is never overridden behind its back. The
 * file then goes through the same checks (owner, mode, syntax). */
#define SYSTEMD_CREDENTIAL "smbtuned-credentials"

static int systemd_credential(struct config *c, struct err *e)
{
    const char *dir = getenv("CREDENTIALS_DIRECTORY");
    char path[PATH_MAX];
    struct stat st;

    if (c->probe.credentials[0] != '\0' || dir == NULL || dir[0] != '/')
        return 0;
    if (snprintf(path, sizeof(path), "%s/" SYSTEMD_CREDENTIAL, dir) >= (int)sizeof(path))
        return err_set(e, -ENAMETOOLONG, "CREDENTIALS_DIRECTORY is too long");
    if (lstat(path, &st) < 0)
        return 0; /* credentials given for other purposes, not ours */
    return config_set(c, "probe", "credentials", path, e) < 0 ? -EINVAL : 0;
}

int cmd_load_config(const struct opts *o, struct config *c, struct err *e)
{
    int r = config_load(o->config_file, c, e);

    if (r == -ENOENT && !o->config_given) {
        config_defaults(c);
        r = 0;
    }
    if (r < 0)
        return r;
    {
        const struct {
            const char *option, *section, *name, *value;
        } over[] = {
            {"--url", "probe", "url", o->url},
            {"--credentials", "probe", "credentials", o->credentials},
            {"--smb-conf", "tune", "smb_conf", o->smb_conf_given ? o->smb_conf : NULL},
            {"--state-dir", "tune", "state_dir", o->state_dir_given ? o->state_dir : NULL},
            {"--apply", "tune", "apply", o->apply},
            {"--mode", "tune", "mode", o->mode},
            {"--trials", "tune", "trials", o->trials},
            {"--dry-run", "tune", "mode", o->dry_run ? "advise" : NULL},
        };
        struct err why;

        /* The message names the option given, not the config file's key
         * it stands for: the file was not where the value came from. */
        for (size_t i = 0; i < sizeof(over) / sizeof(over[0]); i++)
            if (over[i].value &&
                config_set(c, over[i].section, over[i].name, over[i].value, &why) < 0)
                return err_set(e, -EINVAL, "%s: %s", over[i].option, why.msg);
    }
    return systemd_credential(c, e);
}

int cmd_fill(const struct config *c, struct tuner_opts *t, struct err *e)
{
    int r = config_fill(c, t, e);

    if (r < 0)
        return r;
    /* Checked here (owner, mode, syntax) so that a bad file is refused at
     * once, by -t too, but never read here: the check parses it in a
     * short-lived child, and only the probe child keeps the password,
     * right before it logs on. */
    if (t->probe.credentials != NULL)
        return creds_check(t->probe.credentials, 0, e);
    return 0;
}

int cmd_opts(const struct opts *o, const struct config *c, struct tuner_opts *t, enum cmd_fill how,
             struct err *e)
{
    int r = how == CMD_FILL_START ? cmd_fill(c, t, e) : config_fill(c, t, e);
    char msg[sizeof(e->msg)];

    if (r < 0)
        return r;
    if (how != CMD_FILL_AGAIN && config_deadline_short(c, msg, sizeof(msg)))
        journal_log(LOG_WARNING, "%s", msg);
    if (how != CMD_FILL_AGAIN && config_live_far(c, msg, sizeof(msg)))
        journal_log(LOG_WARNING, "%s", msg);
    if (how != CMD_FILL_AGAIN && c->tune.mode == TUNER_ADVISE && !c->tune.trials_auto &&
        c->tune.trials == TUNER_LIVE)
        journal_log(LOG_NOTICE,
                    "advise mode writes no trial into smb.conf: trying candidates on %s "
                    "instead of live",
                    t->trials == TUNER_SHADOW ? "shadow smbds" : "the probe's client socket");
    t->once = o->once;
    t->dry_run = o->once && o->dry_run;
    t->json = o->json;
    /* A line per sample on stderr, unless the journal's "tried ..." lines
     * go there already (a terminal or a pipe: the same sample twice). */
    t->progress = o->once && !o->json && journal_init() == JOURNAL_NATIVE;
    return 0;
}
