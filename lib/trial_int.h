/* trial_int: what trial.c and trial_render.c share; private to trial. */
#ifndef SMBTUNE_TRIAL_INT_H
#define SMBTUNE_TRIAL_INT_H

#include "err.h"

/* what (a path) is absolute and holds no `%` or newline: Samba would
 * substitute a %-macro, and a newline would end the parameter. */
int trial_path_check(const char *what, const char *p, struct err *e);

#endif
