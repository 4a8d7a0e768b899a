/* apply: make smbd take the configuration now in smb.conf. */
#include "apply.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SMBCONTROL_TIMEOUT_S 30.0

static const char *const names[] = {
    [APPLY_NONE] = "none",
    [APPLY_SMBCONTROL] = "smbcontrol",
};

int apply_parse(const char *s, enum apply_method *m, struct err *e)
{
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(s, names[i]) == 0) {
            *m = (enum apply_method)i;
            return 0;
        }
    }
    return err_set(e, -EINVAL, "unknown apply method '%s': expected smbcontrol or none", s);
}

const char *apply_name(enum apply_method m)
{
    return names[m];
}

int apply_run(enum apply_method m, const char *smb_conf, struct err *e)
{
    char out[1024], errout[1024];
    /* SIGHUP would reach only smbd's parent; reload-config reaches every
     * child, so existing connections get the new buffers too. -s names
     * the config so that smbcontrol finds this smbd's pid directory. */
    char *argv[] = {"smbcontrol", "-s", (char *)smb_conf, "smbd", "reload-config", NULL};
    int status, r;

    if (m == APPLY_NONE)
        return 0;
    r = util_run(argv, SMBCONTROL_TIMEOUT_S, out, sizeof(out), errout, sizeof(errout), &status);
    if (r < 0)
        return err_set(e, r, "cannot run smbcontrol: %s", strerror(-r));
    if (status != 0) {
        const char *why = errout[0] ? errout : out;

        return err_set(e, -ESRCH, "smbcontrol -s %s smbd reload-config failed: %.*s", smb_conf,
                       (int)strcspn(why, "\n"), why[0] ? why : "no output");
    }
    return 0;
}
