/* util: small helpers shared by every module: error reporting, checked
 * number parsing, whole-file reads and running a helper program. */
#ifndef SMBTUNE_UTIL_H
#define SMBTUNE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

/* Functions return 0 or a negative errno; the human-readable reason goes
 * into a struct err supplied by the caller (never to stdout). */
struct err {
    char msg[1024];
};

/* Format the reason into e (when e is not NULL) and return code, so that a
 * failure path reads `return err_set(e, -EINVAL, "...", ...);`. */
int err_set(struct err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parse a whole decimal integer in [min, max]; no sign games, no trailing
 * junk. -EINVAL when it is not a number, -ERANGE when out of range. */
int util_parse_long(const char *s, long long min, long long max, long long *out);

/* Parse a byte count: decimal digits with an optional K, M or G suffix
 * (binary multiples, case-insensitive), e.g. 262144, 256K, 1M. */
int util_parse_size(const char *s, long long min, long long max, long long *out);

/* The largest file util_read_file reads, and the most output util_run_alloc
 * collects: far above any configuration file, low enough that a wrong
 * path cannot exhaust memory. */
#define UTIL_MAX_FILE (64 * 1024 * 1024)

/* Read a whole regular file into a NUL-terminated malloc'ed buffer. It is
 * opened non-blocking, so that a FIFO or a device is refused (-EINVAL,
 * -EISDIR for a directory) instead of blocking for ever; e gets a reason
 * that names the file. */
int util_read_file_err(const char *path, char **buf, size_t *len, struct err *e);

/* util_read_file_err without the reason. */
int util_read_file(const char *path, char **buf, size_t *len);

/* Monotonic clock in seconds. */
double util_now(void);

/* Run argv[0] (searched in PATH) with stdin from /dev/null, collect up to
 * outlen-1 bytes of its stdout (and, when errout is given, its stderr),
 * kill it after timeout_s seconds. *status gets the exit status, or -1
 * when it was killed or died by a signal. Returns 0 when the program ran,
 * a negative errno when it could not be started or waited for. */
int util_run(char *const argv[], double timeout_s, char *out, size_t outlen, char *errout,
             size_t errlen, int *status);

/* util_run with output of any length up to max bytes each, in malloc'ed
 * strings (*errout may be NULL when not wanted): for output that carries
 * a value of unknown length. -EFBIG when the program said more than max. */
int util_run_alloc(char *const argv[], double timeout_s, size_t max, char **out, char **errout,
                   int *status);

/* Temporary files of ours start with this, next to the file they replace:
 * `.smbtuned-NAME.XXXXXX`. */
#define UTIL_TMP_PREFIX ".smbtuned-"

/* Replace path atomically: a temporary file in the same directory, fsync,
 * rename, fsync of the directory. With like (path's fstat as the caller
 * judged it): owner, every mode bit and every extended attribute (ACLs,
 * SELinux label) of the file at path, -ESTALE when path is no longer
 * that file; a failure to copy them writes nothing. path must not be a
 * symlink (resolve it first). */
int util_write_atomic(const char *path, const char *data, size_t len, const struct stat *like);

/* Remove temporary files that util_write_atomic left next to path when a
 * process was killed between mkstemp and rename. */
void util_sweep_tmp(const char *path);

/* mkdir -p; the last component gets mode 0700 when created. */
int util_mkdir_p(const char *dir);

/* Write s as a JSON string literal, always valid UTF-8: bytes that are
 * not well-formed UTF-8 are written as U+FFFD. */
void util_json_string(FILE *f, const char *s);

#endif
