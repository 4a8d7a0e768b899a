/* files: the disk side of smbtuned's own files and of smb.conf: regular
 * files only, read without blocking; an atomic replace keeping owner,
 * mode and extended attributes; temp-file sweeps; mkdir -p. */
#ifndef SMBTUNE_FILES_H
#define SMBTUNE_FILES_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "err.h"

/* The largest file files_read reads, and the most output child_run_alloc
 * collects: far above any configuration file, low enough that a wrong
 * path cannot exhaust memory. */
#define FILES_MAX_SIZE (64 * 1024 * 1024)

/* Read a whole regular file into a NUL-terminated malloc'ed buffer. It is
 * opened and read non-blocking, so that a FIFO or a device is refused
 * (-EINVAL, -EISDIR for a directory) and a file that would block on read
 * gives -EAGAIN, instead of blocking for ever; a file under /proc or /sys
 * (or on tracefs, debugfs) is refused (-EINVAL); e (may be NULL) gets a
 * reason that names the file. */
int files_read(const char *path, char **buf, size_t *len, struct err *e);
/* files_read, with the fstat of the file it read into *st: a check of the
 * owner or mode of that very file, not of whatever the path names at a
 * second look-up (a directory's owner may swap it in between). */
int files_read_stat(const char *path, char **buf, size_t *len, struct stat *st, struct err *e);
/* files_read of a file smbtuned keeps in a directory of its own (the
 * state file, a shadow's pid file): a symbolic link there is none of
 * ours, and is refused (-ELOOP), never followed. */
int files_read_own(const char *path, char **buf, size_t *len, struct err *e);

/* The two refusals of files_read, for readers of their own (creds.c, which
 * keeps a secret out of malloc'ed memory): whether path names something
 * under /proc or /sys (checked before open: opening some kernel files has
 * effects), and whether the open fd is on a kernel filesystem (proc,
 * sysfs, tracefs, debugfs: a read may drain the kernel log or block). */
bool files_kernel_path(const char *path);
bool files_kernel_fd(int fd);

/* Temporary files of ours start with this, next to the file they replace:
 * `.smbtuned-NAME.XXXXXX` (six random letters or digits), or, for a
 * replace that exchanges names (with like), `.smbtuned-NAME.N-L-M-S.XXXXXX`:
 * N the inode number of our new file, L that of the file the caller
 * judged, M its mtime then (nanoseconds) and S its size, each in
 * lowercase hex. Those are the only two files that may be under it (the
 * judged one only as it was judged: inode, mtime and size); anything else
 * under such a name came in by someone's rename over NAME during an
 * exchange that a kill cut short (or is the judged file edited in place
 * since), and no sweep removes it. */
#define FILES_TMP_PREFIX ".smbtuned-"

/* Replace path atomically: a temporary file in the same directory, fsync,
 * rename, fsync of the directory. With like (path's fstat as the caller
 * judged it): owner, every mode bit and every extended attribute (ACLs,
 * SELinux label) of the file at path, -ESTALE when path is no longer
 * that file; a failure to copy them writes nothing. path must not be a
 * symlink (resolve it first). Its directory is resolved once and opened
 * without following links (see files_target); every step is relative to
 * it. */
int files_write_atomic(const char *path, const char *data, size_t len, const struct stat *like);

/* A file to replace, held by its directory: the path is resolved once
 * (realpath: a symlinked smb.conf is written through to its target), the
 * directory opened by walking each component from "/" without following
 * links, the file opened in it O_NOFOLLOW. Every later step is relative to
 * those descriptors, so a user who owns a directory on the path cannot
 * redirect a write of root's by swapping in a symlink: a component that is
 * a symlink at open is refused (-ELOOP), naming the file. */
struct files_target {
    int dfd;                         /* the file's directory, O_RDONLY */
    int fd;                          /* the file, O_RDONLY | O_NONBLOCK | O_NOFOLLOW */
    struct stat st;                  /* fd's fstat: what files_target_replace replaces */
    char *path;                      /* the resolved path, for messages */
    const char *base;                /* its last component, inside path */
    const struct files_hooks *hooks; /* files_target_open_hooked's, or NULL */
};

/* Open path as a target; e names the file on failure. A file under /proc
 * or /sys is refused. */
int files_target_open(struct files_target *t, const char *path, struct err *e);
/* The target's bytes as files_read reads them. */
int files_target_read(struct files_target *t, char **buf, size_t *len, struct err *e);
/* files_write_atomic on the target, relative to its directory. expect, if
 * not NULL: the elen bytes the target must still hold as the new file takes
 * its name, checked after the atomic exchange and undone by a second one
 * (-ESTALE, the target as it is) when they differ: a change written in
 * place up to that moment is never thrown away. FILES_SWAPPED_OUT when
 * that second exchange failed: the target holds data, and the file it held
 * (changed since it was judged) is kept next to it under a temporary name
 * of ours, which the next edit's sweep names to the admin. */
#define FILES_SWAPPED_OUT (-ENOTRECOVERABLE)
int files_target_replace(struct files_target *t, const char *data, size_t len, const char *expect,
                         size_t elen);
/* A temporary name of the exchange's shape that a sweep kept because it
 * holds neither file the name records (FILES_TMP_PREFIX), whatever it
 * holds (a file of any owner, a symlink): someone else's, perhaps the
 * admin's edit that a killed run of ours moved there. name is the entry
 * in the target's directory. */
typedef void (*files_kept_fn)(void *ctx, const char *name);

/* files_sweep_tmp next to the target; kept (may be NULL) is called for
 * each file it keeps, for the caller to tell the admin. */
void files_target_sweep(struct files_target *t, files_kept_fn kept, void *ctx);
void files_target_close(struct files_target *t);

/* Steps a test can run code at, to make a race deterministic (NULL, or a
 * NULL member: none). resolved: called with the resolved path right after
 * it is resolved, before anything is opened, so that a test can swap a
 * directory for a symlink there (the race a hostile owner of a directory
 * runs). exchanged: called right after the exchange that puts the new
 * file in place, before the check that may exchange it back, so that a
 * test can kill the process there (what the sweep must then clean).
 * Passed in, never global: only the test's own call sees it. */
struct files_hooks {
    void (*resolved)(void *ctx, const char *real);
    void (*exchanged)(void *ctx);
    void *ctx;
};

/* files_write_atomic and files_target_open with hooks (tests); a target
 * opened with hooks keeps h (which must outlive it) for its replace. */
int files_write_atomic_hooked(const char *path, const char *data, size_t len,
                              const struct stat *like, const struct files_hooks *h);
int files_target_open_hooked(struct files_target *t, const char *path, const struct files_hooks *h,
                             struct err *e);

/* Remove temporary files that files_write_atomic left next to path when a
 * process was killed between creating and renaming them: only regular
 * files, never through a link; under a random name only files of our own
 * uid (someone else's file of that shape in a shared directory is
 * theirs), under a name of the exchange's shape only the two files it
 * records, whoever owns them (FILES_TMP_PREFIX).
 * Nothing is told of a file kept: smbtuned's own files are written
 * without like, under random names, so none of that shape is expected
 * here (files_target_sweep tells). */
void files_sweep_tmp(const char *path);

/* The same for every target in dir, a directory of ours (reached without
 * a link at its name): where the names of the targets vary (backups). */
void files_sweep_tmp_dir(const char *dir);

/* mkdir -p; the last component gets mode 0700 when created. */
int files_mkdir_p(const char *dir);

/* dir opened and checked private: owned by our uid and writable by it
 * alone, so that no one else can have put a link where we write. With
 * FILES_DIR_MAKE made first (files_mkdir_p); with FILES_DIR_OWN never
 * reached through a link (a directory smbtuned names inside a private
 * one; the configured path may go through the admin's links). The open
 * fd, or <0 with e set (-ENOENT: no such directory). */
#define FILES_DIR_MAKE 1U
#define FILES_DIR_OWN 2U
int files_private_dir(const char *dir, unsigned flags, struct err *e);

/* dir judged as files_private_dir(dir, FILES_DIR_MAKE) would judge it, and
 * nothing made: 0 it is private, 1 it is absent and may be made, <0 with e
 * set it would be refused (-t checks what the start would refuse). */
int files_judge_private_dir(const char *dir, struct err *e);

/* The way to path (a directory or a file), as files_private_dir judges
 * it: every link on it root's or ours, every directory above where it
 * really is root's or ours and writable by its owner only (or sticky), so
 * that no one else can swap what the path names. 0, or <0 with e set. */
int files_check_way(const char *path, struct err *e);

/* Write all len bytes to fd (a pipe: a job's answer), retrying short
 * writes and EINTR. 0 or -errno. */
int files_write_all(int fd, const void *buf, size_t len);

/* A lock file of ours at path (made 0600, never through a link), held
 * with flock(LOCK_EX) until the fd is closed or we die. Tried every 20 ms
 * for at most wait_s seconds, so that a holder that hangs cannot hang us:
 * the fd, or <0 with e set (-EBUSY: still held at the end). */
int files_lock(const char *path, double wait_s, struct err *e);

#endif
