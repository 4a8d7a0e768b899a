/* files: the disk side of smbtuned's own files and of smb.conf: regular
 * files only, read without blocking; an atomic replace keeping owner,
 * mode and extended attributes; temp-file sweeps; mkdir -p. */
#ifndef SMBTUNE_FILES_H
#define SMBTUNE_FILES_H

#include <stddef.h>
#include <sys/stat.h>

#include "err.h"

/* The largest file files_read reads, and the most output child_run_alloc
 * collects: far above any configuration file, low enough that a wrong
 * path cannot exhaust memory. */
#define FILES_MAX_SIZE (64 * 1024 * 1024)

/* Read a whole regular file into a NUL-terminated malloc'ed buffer. It is
 * opened non-blocking, so that a FIFO or a device is refused (-EINVAL,
 * -EISDIR for a directory) instead of blocking for ever; e (may be NULL)
 * gets a reason that names the file. */
int files_read(const char *path, char **buf, size_t *len, struct err *e);

/* Temporary files of ours start with this, next to the file they replace:
 * `.smbtuned-NAME.XXXXXX`. */
#define FILES_TMP_PREFIX ".smbtuned-"

/* Replace path atomically: a temporary file in the same directory, fsync,
 * rename, fsync of the directory. With like (path's fstat as the caller
 * judged it): owner, every mode bit and every extended attribute (ACLs,
 * SELinux label) of the file at path, -ESTALE when path is no longer
 * that file; a failure to copy them writes nothing. path must not be a
 * symlink (resolve it first). */
int files_write_atomic(const char *path, const char *data, size_t len, const struct stat *like);

/* Remove temporary files that files_write_atomic left next to path when a
 * process was killed between mkstemp and rename. */
void files_sweep_tmp(const char *path);

/* mkdir -p; the last component gets mode 0700 when created. */
int files_mkdir_p(const char *dir);

#endif
