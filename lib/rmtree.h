/* rmtree: remove a directory tree that smbtuned created, and nothing else.
 *
 * smbtuned runs as root and removes its own work directories (the probe's
 * private client directory, a shadow smbd's run directory), some of them
 * left by a killed run in a directory that others can write (/tmp). A
 * removal by path (nftw + remove) can be steered by whoever swaps a
 * directory for a symlink during the walk. Here every step is relative to a
 * directory already open:
 *
 * - each directory is opened with O_NOFOLLOW | O_DIRECTORY relative to its
 *   parent's fd, then checked on that fd: owned by geteuid(), on the top's
 *   file system, not the root of a mount (statx, for bind mounts);
 * - entries are removed with unlinkat() relative to that fd, and only when
 *   owned by geteuid(); a symlink is unlinked itself, never followed;
 * - what is not ours (someone else's entry, a mount point, a directory
 *   deeper than RMTREE_MAX_DEPTH) is left alone, and so are its parents.
 */
#ifndef SMBTUNE_RMTREE_H
#define SMBTUNE_RMTREE_H

#include "err.h"

/* Our trees are a few levels deep; a bound keeps the walk to one open
 * descriptor per level. */
#define RMTREE_MAX_DEPTH 64

/* Remove the directory `name` in the directory open as dirfd (AT_FDCWD for
 * the working directory), with everything in it that is ours. The top must
 * be a directory owned by geteuid() on dirfd's file system, else nothing
 * is touched: -ELOOP for a symlink, -ENOTDIR, -EPERM for someone else's,
 * -EXDEV for a mount point. 0 when the tree is gone (or never was); else
 * the first reason something was left, its path in e. */
int rmtree_at(int dirfd, const char *name, struct err *e);

/* rmtree_at() for a path: its last component relative to its parent
 * directory (which may be reached through symlinks: it is the caller's
 * choice of place, e.g. $TMPDIR). */
int rmtree_path(const char *path, struct err *e);

#endif
