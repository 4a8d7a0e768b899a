/* smbstatus: see smbstatus.h. */
#include "smbstatus.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"

int smbstatus_parse_open(const char *json, long *files, struct err *e)
{
    json_error_t je;
    json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &je);
    json_t *open;
    int r = 0;

    if (root == NULL)
        return err_set(e, -EINVAL, "smbstatus --json: not JSON at line %d: %s", je.line, je.text);
    /* "open_files": {} with none; no key at all where smbd's locking
     * database was never made (no client ever connected: smbstatus says
     * "not initialised" on stderr and exits 0), so none open either. */
    open = json_object_get(root, "open_files");
    if (!json_is_object(root))
        r = err_set(e, -EINVAL, "smbstatus --json: expected an object, found another type");
    else if (open != NULL && !json_is_object(open))
        r = err_set(e, -EINVAL,
                    "smbstatus --json: expected \"open_files\" to be an object, found another "
                    "type");
    else
        *files = open != NULL ? (long)json_object_size(open) : 0;
    json_decref(root);
    return r;
}

int smbstatus_open_files(const char *smb_conf, long *files, struct err *e)
{
    char *argv[] = {"smbstatus", "-s", (char *)smb_conf, "-L", "--json", NULL};
    char *out = NULL, *errout = NULL;
    int status, r;

    /* (its output grows with the open files: a bound, not a buffer) */
    r = child_run_alloc(argv, SMBSTATUS_TIMEOUT_S, 16 * 1024 * 1024, &out, &errout, &status);
    if (r < 0)
        return err_set(e, r, "cannot run smbstatus: %s",
                       r == -EFBIG ? "it printed more than 16 MiB" : strerror(-r));
    if (status != 0) {
        const char *why = errout[0] ? errout : out[0] ? out : "no output";

        r = status == -1
                ? err_set(e, -ETIMEDOUT, "smbstatus -s %s -L: killed after %.0f s or by a signal",
                          smb_conf, SMBSTATUS_TIMEOUT_S)
                : err_set(e, -EIO, "smbstatus -s %s -L failed (exit %d): %.*s", smb_conf, status,
                          (int)strcspn(why, "\n"), why);
    } else {
        r = smbstatus_parse_open(out, files, e);
    }
    free(out);
    free(errout);
    return r;
}
