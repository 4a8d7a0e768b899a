/* parse: every number that comes from outside (a config file, a pid file,
 * /proc, the command line), and the PREFIX-PID[-REST] names of the
 * directories and files a run of ours leaves behind. Pure. */
#ifndef SMBTUNE_PARSE_H
#define SMBTUNE_PARSE_H

#include <sys/types.h>

/* Parse a whole decimal integer in [min, max]; no sign games, no trailing
 * junk. -EINVAL when it is not a number, -ERANGE when out of range. */
int parse_long(const char *s, long long min, long long max, long long *out);

/* Parse a byte count: decimal digits with an optional K, M or G suffix
 * (binary multiples, case-insensitive), e.g. 262144, 256K, 1M. */
int parse_size(const char *s, long long min, long long max, long long *out);

/* A name of the shape PREFIX<pid> or PREFIX<pid>-<rest>, the pid decimal
 * in [1, INT_MAX]: *pid gets it, *rest (when not NULL) points at what
 * follows the '-', or is NULL when nothing follows the pid. -EINVAL when
 * name does not start with prefix, has no pid there, or the pid is
 * followed by anything but the end or '-'; -ERANGE for a pid out of
 * range. The caller checks the shape of rest (a mkdtemp suffix, a tag). */
int parse_pid_name(const char *name, const char *prefix, pid_t *pid, const char **rest);

#endif
