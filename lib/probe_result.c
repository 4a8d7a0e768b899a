/* probe_result: what a probe's result says: the outcome names, the
 * mapping of libsmbclient's errno to an outcome, the result as JSON and
 * the words on a recycle copy. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

static const char *const outcome_names[] = {
    [PROBE_OK] = "ok",
    [PROBE_TIMEOUT] = "timeout",
    [PROBE_CONNECT_REFUSED] = "connect_refused",
    [PROBE_NAME_NOT_FOUND] = "name_not_found",
    [PROBE_AUTH_FAILED] = "auth_failed",
    [PROBE_SHARE_NOT_FOUND] = "share_not_found",
    [PROBE_ACCESS_DENIED] = "access_denied",
    [PROBE_DISK_FULL] = "disk_full",
    [PROBE_ERROR] = "error",
};

const char *probe_outcome_name(enum probe_outcome o)
{
    if ((unsigned)o >= sizeof(outcome_names) / sizeof(outcome_names[0]))
        return "error";
    return outcome_names[o];
}

const char *probe_recycle_name(enum probe_recycle v)
{
    switch (v) {
    case PROBE_RECYCLE_REMOVED:
        return "removed";
    case PROBE_RECYCLE_LEFT:
        return "left";
    default:
        return "none";
    }
}

int probe_recycle_text(const char *url, const struct probe_result *r, char *out, size_t len)
{
    const char *what;

    switch (r->recycle) {
    case PROBE_RECYCLE_REMOVED:
        what = "and the probe deleted it there too";
        break;
    case PROBE_RECYCLE_LEFT:
        what = "and could not be deleted there";
        break;
    default:
        return -ENOENT;
    }
    /* The path and the reason come from the probe child, which made them
     * from our own names and strerror: no text of the server's. */
    /* The fix before the details: a long URL cuts the end off a cause of
     * 512 bytes. */
    snprintf(out, len,
             "%s keeps deleted files (Samba's recycle module): add '" PROBE_RECYCLE_EXCLUDE
             "' to that "
             "share, or probe a share without 'vfs objects = recycle'; the probe's file went to %s "
             "%s%s%s%s",
             url, r->recycle_path, what, r->recycle == PROBE_RECYCLE_LEFT ? " (" : "",
             r->recycle == PROBE_RECYCLE_LEFT ? r->recycle_why : "",
             r->recycle == PROBE_RECYCLE_LEFT ? "): every probe leaves its file there" : "");
    return 0;
}

enum probe_outcome probe_classify_errno(int err, bool connecting)
{
    switch (err) {
    case ECONNREFUSED:
        return PROBE_CONNECT_REFUSED;
    /* libsmbclient reports a failed session setup as EPERM (it does not
     * fall back to anonymous: NoAutoAnonymousLogin is set when we have
     * credentials); NT_STATUS_ACCESS_DENIED maps to EACCES. */
    case EPERM:
        return connecting ? PROBE_AUTH_FAILED : PROBE_ACCESS_DENIED;
    case EACCES:
    case EROFS:
        return PROBE_ACCESS_DENIED;
    /* NT_STATUS_BAD_NETWORK_NAME: the tree connect found no such share. */
    case ENOENT:
    case ENODEV:
        return connecting ? PROBE_SHARE_NOT_FOUND : PROBE_ERROR;
    case ENOSPC:
    case EDQUOT:
        return PROBE_DISK_FULL;
    default:
        return PROBE_ERROR;
    }
}

/* x with the given number of decimals, as a JSON real. The line used to
 * be printed with "%.3f" and "%.6f", and scripts compare its values: the
 * value is that decimal (printed, then read back), and JSON_REAL_PRECISION
 * (15) in probe_result_json prints it back as the same digits, without
 * the trailing zeros (2.0 for 2.000), since a double keeps 15 significant
 * decimal digits exactly. Rates and seconds of a probe stay far below
 * 10^9, so 15 digits hold them with their decimals. */
static json_t *fixed(double x, int decimals)
{
    char buf[64];

    snprintf(buf, sizeof(buf), "%.*f", decimals, x);
    return json_real(strtod(buf, NULL));
}

int probe_result_json(const struct probe_result *r, char *out, size_t outlen)
{
    json_t *o = json_object();
    char *text = NULL;
    int ret = -ENOMEM;

    /* The keys in this order (JSON_PRESERVE_ORDER): the line is read by
     * scripts and by people. The outcome is one of our names, so no text
     * from outside goes in (nothing to sanitize, see jsonw.h). */
    if (o != NULL &&
        json_object_set_new(o, "outcome", json_string(probe_outcome_name(r->outcome))) == 0 &&
        json_object_set_new(o, "write_mbps", fixed(r->write_mbps, 3)) == 0 &&
        json_object_set_new(o, "read_mbps", fixed(r->read_mbps, 3)) == 0 &&
        json_object_set_new(o, "write_bytes", json_integer(r->write_bytes)) == 0 &&
        json_object_set_new(o, "read_bytes", json_integer(r->read_bytes)) == 0 &&
        json_object_set_new(o, "write_s", fixed(r->write_s, 6)) == 0 &&
        json_object_set_new(o, "read_s", fixed(r->read_s, 6)) == 0 &&
        json_object_set_new(o, "write_startup_bytes", json_integer(r->write_startup_bytes)) == 0 &&
        json_object_set_new(o, "write_startup_s", fixed(r->write_startup_s, 6)) == 0 &&
        json_object_set_new(o, "read_startup_bytes", json_integer(r->read_startup_bytes)) == 0 &&
        json_object_set_new(o, "read_startup_s", fixed(r->read_startup_s, 6)) == 0 &&
        json_object_set_new(o, "write_wait_s", fixed(r->write_wait_s, 6)) == 0 &&
        json_object_set_new(o, "read_wait_s", fixed(r->read_wait_s, 6)) == 0 &&
        json_object_set_new(o, "write_pace_bps", json_integer(r->write_pace_bps)) == 0 &&
        json_object_set_new(o, "client_rcvbuf", json_integer(r->client_rcvbuf)) == 0 &&
        json_object_set_new(o, "client_sndbuf", json_integer(r->client_sndbuf)) == 0 &&
        json_object_set_new(o, "loopback", json_boolean(r->loopback)) == 0 &&
        json_object_set_new(o, "recycle", json_string(probe_recycle_name(r->recycle))) == 0)
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    json_decref(o);
    if (text != NULL) {
        ret = strlen(text) < outlen ? 0 : -ENOSPC;
        if (ret == 0)
            memcpy(out, text, strlen(text) + 1);
        free(text);
    }
    return ret;
}
