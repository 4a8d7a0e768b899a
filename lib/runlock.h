/* runlock: one cycle runner per state directory, STATE_DIR/run.lock.
 *
 * The daemon and `smbtuned --once` each search, trial and commit against
 * one state file and one smb.conf. Two at once would fight: the second's
 * compare-and-set fails on the first's commit and it writes a hold into the
 * shared state file, and with live trials each counts the other's probe as
 * a real client. So a runner takes an exclusive flock on run.lock for as
 * long as it lives, and writes its pid into the file for the message the
 * next one prints. The kernel drops the lock when the holder dies: a file
 * a dead runner left (its pid still in it) is simply taken over, and the
 * file is never removed (removing a lock file races with its next taker).
 *
 * flock locks belong to the open file description, not to the process: a
 * second open and flock in the same process conflicts as one in another
 * process would. A child that inherits the descriptor keeps the lock alive
 * after its parent dies: the descriptor is O_CLOEXEC, and the children
 * smbtuned forks without exec close it in child_setup (close_range).
 *
 * The pid text's format and parse are pure; runlock_take touches the disk. */
#ifndef SMBTUNE_RUNLOCK_H
#define SMBTUNE_RUNLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"

#define RUNLOCK_NAME "run.lock"
/* Room for a pid's text: up to 10 digits, a newline, the NUL. */
#define RUNLOCK_PID_TEXT 16

/* pid (>= 1) as the file holds it, "1234\n", into buf. The length, or
 * -EINVAL for a pid below 1, -ENOSPC when buf is too small. */
int runlock_format_pid(pid_t pid, char *buf, size_t size);

/* The pid in len bytes of a lock file's text: decimal digits in [1,
 * INT_MAX], one newline at most after them, nothing else. 0, or -EINVAL
 * (empty, junk: a file cut short, or not ours), -ERANGE. */
int runlock_parse_pid(const char *text, size_t len, pid_t *pid);

/* Take STATE_DIR/run.lock (the directory exists), without waiting: the
 * descriptor (>= 3, O_CLOEXEC), which the caller keeps open for as long as
 * it runs cycles. The file is opened without following a link and must be
 * a regular file of ours (geteuid()), writable by us only, with one name:
 * anything else is refused, left as it is, and named in e. -EBUSY when
 * another open file holds the lock: *holder is the pid its text names, or
 * 0 when it names none (the holder has not written it yet). */
int runlock_take(const char *state_dir, pid_t *holder, struct err *e);

/* Whether line, one line of /proc/locks, is a granted flock on the file
 * dev:ino ("1: FLOCK  ADVISORY  WRITE 1234 08:01:123456 0 EOF"; a waiter's
 * line has "->" before its type): then true, and the holder's pid in
 * *pid. The kernel prints the file system's device, which stat() does not
 * give on btrfs or overlayfs: a line of another device counts when its pid
 * is named (the pid run.lock's text names; 0: none). A holder the kernel
 * does not show to us (another pid namespace) is not found. Pure. */
bool runlock_locks_line(const char *line, dev_t dev, ino_t ino, pid_t named, pid_t *pid);

/* The effective uid in the text of /proc/PID/status (its "Uid:" line:
 * real, effective, saved, file system). Pure. */
bool runlock_status_euid(const char *text, uid_t *euid);

/* Whether a run holds STATE_DIR/run.lock now, asked of the kernel
 * (/proc/locks) without taking the lock: `--status` must never make a
 * start that comes at the same moment fail. 1 and *pid when held, 0 when
 * not (or there is no run.lock), <0 with e set when it cannot tell. */
int runlock_holder(const char *state_dir, pid_t *pid, struct err *e);

#endif
