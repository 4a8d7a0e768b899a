/* probe_leftovers: the probe child's clean-up (see probe_child.h): the
 * files of killed probes that its record names, removed from the share
 * with the copies a recycle module kept, and what stays said. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe_child_int.h"
#include "probe_made.h"

/* Probe files left by killed probes are removed by a cleanup-only child,
 * never by a measurement (whose time is its sample's: a file the server
 * still holds for a connection that just died takes retries), and only
 * those whose names our probes recorded before they made them
 * (probe_made.h): a clean-up lists nothing on the share (a listing is as
 * long as whoever can write there makes it, and its names are
 * anybody's). It deletes at most LEFTOVER_MAX files a pass and spends at
 * most LEFTOVER_S seconds. */
#define LEFTOVER_MAX 256
#define LEFTOVER_S 10

/* Remove the probe files our probes recorded (probe_made.h) whose
 * process is gone (a probe killed at its deadline leaves its file), and
 * forget them: those of live probes are left alone. A file still held
 * open by the server for a connection that just died cannot be deleted
 * yet: the pass is retried a few times. A record whose file is not there
 * (deleted after all, or never made: its create failed) is forgotten
 * too. Bounded (see LEFTOVER_MAX). Returns how many
 * stayed (the last pass's), or -1 when the record could not be read; *why
 * the errno of the last refusal; kept_at (PROBE_RECYCLE_PATH bytes) the
 * place of a recycle copy that stays, or "". */
static int remove_leftovers(struct child *c, int *why, char *kept_at)
{
    char(*names)[256];
    smbc_unlink_fn unlink_fn = c->api->getFunctionUnlink(c->ctx);
    smbc_stat_fn stat_fn = c->api->getFunctionStat(c->ctx);
    int max = LEFTOVER_MAX, attempts = 10, i, busy = 0, kept = 0;
    bool more = false; /* the last pass took a whole batch: more may wait */
    int64_t stop = probe_mono_ns() + LEFTOVER_S * 1000000000LL;

    if (c->made < 0)
        return 0; /* no state directory: nothing was recorded */
    names = malloc(sizeof(*names) * (size_t)max);
    if (names == NULL) {
        *why = ENOMEM;
        return -1;
    }
    for (i = 0; i < attempts && probe_mono_ns() < stop; i++) {
        int n = probe_made_dead(c->made, names, max), k;

        if (n < 0) {
            *why = -n;
            busy = -1;
            break;
        }
        busy = 0;
        for (k = 0; k < n && probe_mono_ns() < stop; k++) {
            char url[4352], where[PROBE_RECYCLE_PATH];
            struct stat st;
            int rwhy = 0;

            snprintf(url, sizeof(url), "%s/%s", c->dir_url, names[k]);
            /* What has the name now is not a file we made (libsmbclient's
             * unlink also removes an empty directory): not ours. */
            if (stat_fn(c->ctx, url, &st) == 0 && !S_ISREG(st.st_mode)) {
                forget(c, names[k]);
                continue;
            }
            if (unlink_fn(c->ctx, url) < 0 && errno != ENOENT) {
                *why = errno;
                busy++;
                continue;
            }
            /* Deleted (or gone already), or moved into a recycle
             * repository: its copy is looked for where
             * probe_recycle_places says, with stats. (The repository is
             * not listed: it holds every file the share's users
             * deleted.) A copy that stays is said, and not tried again. */
            if (probe_recycle_sweep(c, names[k], stop, where, sizeof(where), &rwhy) ==
                PROBE_RECYCLE_LEFT) {
                *why = rwhy;
                snprintf(kept_at, PROBE_RECYCLE_PATH, "%s", where);
                kept++;
            }
            forget(c, names[k]);
        }
        /* names the time bound left untried stay too */
        if (k < n) {
            busy += n - k;
            if (*why == 0)
                *why = ETIMEDOUT;
        }
        more = n == max;
        if (busy == 0 && !more)
            break;
        if (busy == 0)
            continue; /* a whole batch gone: the next */
        usleep(200 * 1000);
    }
    free(names);
    /* a bound ended it after a whole batch: untold ones stay */
    if (busy == 0 && more) {
        busy = 1;
        if (*why == 0)
            *why = ETIMEDOUT;
    }
    return busy < 0 ? busy : busy + kept;
}

/* A clean-up-only child's work, once the share is reached: the files of
 * killed probes removed (remove_leftovers). A clean-up says that files
 * stay, so that it is not taken for one that left nothing behind. A
 * measurement does not look (above). */
enum probe_outcome probe_leftovers_remove(struct child *c)
{
    char kept_at[PROBE_RECYCLE_PATH] = "";
    int left, why = 0;

    left = remove_leftovers(c, &why, kept_at);
    if (left < 0)
        return fail(c, PROBE_ERROR, "reading the record of probe files made in %s: %s", c->made_dir,
                    strerror(why));
    /* A copy in a recycle bin names the bin and the fix: "File exists"
     * (still there after its delete) would say neither. */
    if (left > 0 && kept_at[0] != '\0')
        return fail(c, PROBE_ERROR,
                    "%d file%s of killed probes could not be removed: the copy Samba's "
                    "recycle module kept at %s stays (%s); add '" PROBE_RECYCLE_EXCLUDE
                    "' to that share",
                    left, left == 1 ? "" : "s", kept_at,
                    why == EEXIST ? "still there after a delete" : strerror(why));
    if (left > 0 && why == ETIMEDOUT)
        return fail(c, PROBE_ERROR,
                    "at least %d file%s of killed probes stay%s: the clean-up's %d s were "
                    "over; the next clean-up goes on",
                    left, left == 1 ? "" : "s", left == 1 ? "s" : "", LEFTOVER_S);
    return left == 0 ? PROBE_OK
                     : fail(c, PROBE_ERROR, "%d file%s of killed probes could not be removed: %s",
                            left, left == 1 ? "" : "s", strerror(why));
}
