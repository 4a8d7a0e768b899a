/* probe_recycle: the copy of a deleted probe file that Samba's recycle
 * module keeps (see enum probe_recycle in probe.h): where it goes, and
 * its removal by the probe child after its own delete.
 *
 * Measured with Samba 4.17 (tests/integration/test_probe_recycle.py): with
 * `vfs objects = recycle` a delete moves the file to the repository,
 * `.recycle/<name>` by default; `recycle:repository = .recycle/%U` gives
 * the same place for the probe's anonymous guest (%U is empty) and
 * `.recycle/<user>/<name>` for a logged-on user; `%u` gives the guest
 * account (`.recycle/nobody`). A delete inside the session's own
 * repository is a real delete (the module does not recycle its bin), and
 * `recycle:exclude = .smbtuned-probe-*` makes the first delete a real
 * one. A repository elsewhere (another name, an absolute path) is not
 * found: the probe does not read the server's configuration, and a
 * listing is what a measurement never does (probe_child.c says why). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "probe_child_int.h"

/* The look needs a stat of the repository, up to PROBE_RECYCLE_PLACES
 * stats, a delete and a stat: 7 calls of a round trip or two, 0.6 s on a
 * 40 ms path. It has PROBE_LOOK_GRACE_S past the deadline (the parent
 * waits that long once `measured` is published), and starts no call later
 * than this before the grace ends, so that a kill in the middle of it
 * takes a server that stopped answering. */
#define RECYCLE_MARGIN_S 0.5

/* user as Samba's %U puts it into the repository's path (its
 * sanitized_username: alpha_strcpy with "._-$" allowed), into out; false
 * when it cannot be one path component. */
static bool user_component(const char *user, char *out, size_t len)
{
    size_t i, n;

    if (user == NULL || user[0] == '\0' || (n = strlen(user)) >= len)
        return false;
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)user[i];

        out[i] = (ch < 0x80 && (isalnum(ch) || strchr("._-$", ch))) ? (char)ch : '_';
    }
    out[n] = '\0';
    return strcmp(out, ".") != 0 && strcmp(out, "..") != 0;
}

int probe_recycle_places(const char *dir, const char *user, const char *name,
                         char (*out)[PROBE_RECYCLE_PATH])
{
    char u[256];
    bool have_user = user_component(user, u, sizeof(u));
    bool have_dir = dir != NULL && dir[0] != '\0';
    int n = 0;

    /* the repository itself, then the user's; each with the file's
     * directory kept (keeptree) when it has one */
    if ((size_t)snprintf(out[n], PROBE_RECYCLE_PATH, "%s/%s", PROBE_RECYCLE_DIR, name) <
        PROBE_RECYCLE_PATH)
        n++;
    if (have_user && (size_t)snprintf(out[n], PROBE_RECYCLE_PATH, "%s/%s/%s", PROBE_RECYCLE_DIR, u,
                                      name) < PROBE_RECYCLE_PATH)
        n++;
    if (have_dir && (size_t)snprintf(out[n], PROBE_RECYCLE_PATH, "%s/%s/%s", PROBE_RECYCLE_DIR, dir,
                                     name) < PROBE_RECYCLE_PATH)
        n++;
    if (have_dir && have_user &&
        (size_t)snprintf(out[n], PROBE_RECYCLE_PATH, "%s/%s/%s/%s", PROBE_RECYCLE_DIR, u, dir,
                         name) < PROBE_RECYCLE_PATH)
        n++;
    return n;
}

/* The probe file's directory inside the share: the URL's, joined with
 * the configured one. */
static void share_dir(const struct child *c, char *out, size_t len)
{
    const char *extra = c->own.directory ? c->own.directory : "";

    snprintf(out, len, "%s%s%s", c->url.dir, c->url.dir[0] && extra[0] ? "/" : "", extra);
}

enum probe_recycle probe_recycle_sweep(struct child *c, const char *name, int64_t stop, char *where,
                                       size_t wlen, int *why)
{
    smbc_stat_fn stat_fn = c->api->getFunctionStat(c->ctx);
    smbc_unlink_fn unlink_fn = c->api->getFunctionUnlink(c->ctx);
    char places[PROBE_RECYCLE_PLACES][PROBE_RECYCLE_PATH], dir[2048], url[4096];
    struct url share = c->url;
    enum probe_recycle v = PROBE_RECYCLE_NONE;
    struct stat st;
    int i, n;

    share.dir[0] = '\0';
    /* One stat decides for most shares: no repository, no copy. An error
     * other than "not there" (a repository we may not see) is no copy we
     * can find either. */
    if (probe_mono_ns() >= stop ||
        url_format_smbc(&share, PROBE_RECYCLE_DIR, url, sizeof(url)) < 0 ||
        stat_fn(c->ctx, url, &st) < 0 || !S_ISDIR(st.st_mode))
        return v;
    share_dir(c, dir, sizeof(dir));
    n = probe_recycle_places(dir, c->have_creds ? c->creds.username : PROBE_RECYCLE_GUEST, name,
                             places);
    for (i = 0; i < n && probe_mono_ns() < stop; i++) {
        if (url_format_smbc(&share, places[i], url, sizeof(url)) < 0 ||
            stat_fn(c->ctx, url, &st) < 0)
            continue;
        snprintf(where, wlen, "%s", places[i]);
        if (unlink_fn(c->ctx, url) < 0 && errno != ENOENT) {
            *why = errno;
            return PROBE_RECYCLE_LEFT;
        }
        /* Gone from here; a copy outside this session's repository is
         * moved on rather than deleted, to a later place (see
         * probe_recycle_places), so the look goes on. */
        if (stat_fn(c->ctx, url, &st) == 0) {
            *why = EEXIST;
            return PROBE_RECYCLE_LEFT;
        }
        v = PROBE_RECYCLE_REMOVED;
    }
    return v;
}

enum probe_outcome probe_recycle_after_delete(struct child *c, enum probe_outcome o,
                                              const char *name)
{
    struct probe_shared *sh = c->sh;
    int64_t stop = (int64_t)((c->deadline + PROBE_LOOK_GRACE_S - RECYCLE_MARGIN_S) * 1e9);
    int why = 0;

    sh->outcome = o;
    publish(&sh->measured, 1);
    sh->recycle =
        probe_recycle_sweep(c, name, stop, sh->recycle_path, sizeof(sh->recycle_path), &why);
    if (sh->recycle == PROBE_RECYCLE_LEFT)
        snprintf(sh->recycle_why, sizeof(sh->recycle_why), "%s",
                 why == EEXIST ? "it is still there after a delete" : strerror(why));
    return o;
}
