/* trial_int: what trial.c, trial_render.c and trial_stop.c share; private to
 * trial. */
#ifndef SMBTUNE_TRIAL_INT_H
#define SMBTUNE_TRIAL_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/* what (a path) is absolute and holds no `%` or newline: Samba would
 * substitute a %-macro, and a newline would end the parameter. */
int trial_path_check(const char *what, const char *p, struct err *e);

/* dir/name into buf; -ENAMETOOLONG when it does not fit. */
int trial_path_join(char *buf, size_t len, const char *dir, const char *name);

/* The base directory opened (made first with make) and checked ours
 * alone: owned by our uid, writable by it only, no link at its name
 * (files_private_dir). Everything under it is reached by path, by root,
 * and the sweep removes and signals by what it finds there: a directory
 * someone else may write in (a state_dir whose `shadow` an admin's user
 * owns) would let them swap a run directory for a link, or plant a record
 * that names a process to kill. Read and search bits for others let no
 * one do either (a 0755 state directory is accepted the same way). The
 * fd, or <0 with e set (-ENOENT: it is not there). */
int trial_open_base(const char *base_dir, bool make, struct err *e);

#endif
