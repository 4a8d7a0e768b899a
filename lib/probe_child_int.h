/* probe_child_int: what probe_child.c, probe_transfer.c, probe_recycle.c
 * and probe_leftovers.c share; private to the probe child (probe_child.h
 * is what the parent sees). */
#ifndef SMBTUNE_PROBE_CHILD_INT_H
#define SMBTUNE_PROBE_CHILD_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "creds.h"
#include "probe_child.h"
#include "probe_made.h"
#include "smbc_api.h"
#include "url.h"

/* The child's own state: what the parent handed over, and what only the
 * child has. */
struct child {
    /* The parent's parameters, with the room the share leaves this
     * sample's file (check_room). */
    struct probe_params own;
    struct url url;
    struct probe_shared *sh;
    bool cleanup_only;
    double deadline; /* child_now() time of the parent's kill */
    /* libsmbclient, loaded in this child only (probe_child.c's) */
    const struct smbc_api *api;
    SMBCCTX *ctx;
    int sock; /* libsmbclient's TCP socket (read_client_buffers), -1: not found */
    char dir_url[4096];
    bool at_root;  /* dir_url is the share's root (no directory in it) */
    char host[64]; /* ours, as it appears in probe file names */
    /* The record of the probe files made (probe_made.h), open; -1: none
     * kept (no state directory) */
    int made;
    char made_dir[4096];
    /* Read by the child itself, after fork, so that the parent never
     * holds the password. */
    struct creds creds;
    bool have_creds;
};

/* Store v in a slot of probe_shared, for the parent (probe_shared_peek).
 * Static, as config_int.h's copy_str, so that both files keep the plain
 * names. */
static inline void publish(int64_t *slot, int64_t v)
{
    __atomic_store_n(slot, v, __ATOMIC_RELEASE);
}

__attribute__((format(printf, 3, 4))) static inline enum probe_outcome
fail(struct child *c, enum probe_outcome o, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(c->sh->cause, sizeof(c->sh->cause), fmt, ap);
    va_end(ap);
    return o;
}

/* The probe file name is gone from the share: forget its record. Static,
 * as publish is, so that probe_child.c and probe_leftovers.c keep the
 * plain name. */
static inline void forget(struct child *c, const char *name)
{
    if (c->made >= 0)
        probe_made_drop(c->made, name);
}

/* Write to f (the probe file, open for writing; closed here), read it
 * back (probe_transfer.c). */
enum probe_outcome probe_transfer(struct child *c, SMBCFILE *f, const char *file_url);

/* After the probe file `name` (in c->dir_url) was deleted: look for the
 * copy a recycle module may have kept, with stats of the places
 * probe_recycle_places gives (no listing), and delete it. A stat of
 * PROBE_RECYCLE_DIR comes first: a share without the repository costs
 * one call. Stops looking at `stop` (probe_mono_ns time). Returns what it
 * found; the share-relative path of a copy in where, and why one stays
 * in *why (an errno) (probe_recycle.c). */
enum probe_recycle probe_recycle_sweep(struct child *c, const char *name, int64_t stop, char *where,
                                       size_t wlen, int *why);

/* The measurement is over with outcome o and its file `name` deleted:
 * publish that, then sweep for a recycle copy within the deadline and put
 * what was found in probe_shared. Returns o (probe_recycle.c). */
enum probe_outcome probe_recycle_after_delete(struct child *c, enum probe_outcome o,
                                              const char *name);

/* A clean-up-only child, once the share is reached: remove the files of
 * killed probes that the record names, and say what stays
 * (probe_leftovers.c). */
enum probe_outcome probe_leftovers_remove(struct child *c);

#endif
