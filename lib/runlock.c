/* runlock: one cycle runner per state directory (see runlock.h). */
#include "runlock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "parse.h"

int runlock_format_pid(pid_t pid, char *buf, size_t size)
{
    int n;

    if (pid < 1)
        return -EINVAL;
    n = snprintf(buf, size, "%ld\n", (long)pid);
    if (n < 0 || (size_t)n >= size)
        return -ENOSPC;
    return n;
}

int runlock_parse_pid(const char *text, size_t len, pid_t *pid)
{
    char buf[RUNLOCK_PID_TEXT];
    long long v;
    int r;

    if (len > 0 && text[len - 1] == '\n')
        len--;
    if (len == 0 || len >= sizeof(buf))
        return -EINVAL;
    /* A NUL inside would end the copy early and hide what follows it. */
    if (memchr(text, '\0', len) != NULL)
        return -EINVAL;
    memcpy(buf, text, len);
    buf[len] = '\0';
    r = parse_long(buf, 1, INT_MAX, &v);
    if (r < 0)
        return r;
    *pid = (pid_t)v;
    return 0;
}

/* The file open as fd must be one smbtuned made: a regular file of ours,
 * that no one else can write (its text is the pid we name), with no other
 * name (we truncate it: a hard link to some other file of root's would
 * lose that file's bytes). */
static int check_file(int fd, const char *path, struct err *e)
{
    struct stat st;

    if (fstat(fd, &st) < 0)
        return err_set(e, -errno, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return err_set(e, -EINVAL, "%s is not a regular file: refused, left as it is", path);
    if (st.st_uid != geteuid())
        return err_set(e, -EPERM, "%s is owned by uid %u, not %u: refused, left as it is", path,
                       (unsigned)st.st_uid, (unsigned)geteuid());
    if ((st.st_mode & 022) != 0)
        return err_set(e, -EPERM,
                       "%s has mode %04o: refused, it must be writable by uid %u only "
                       "(smbtuned makes it 0600)",
                       path, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
    if (st.st_nlink != 1)
        return err_set(e, -EPERM, "%s has %lu names (hard links): refused, left as it is", path,
                       (unsigned long)st.st_nlink);
    return 0;
}

/* The pid the holder wrote, 0 when there is none (yet). */
static pid_t read_holder(int fd)
{
    char text[RUNLOCK_PID_TEXT];
    ssize_t n;
    pid_t pid;

    do
        n = pread(fd, text, sizeof(text), 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0 || runlock_parse_pid(text, (size_t)n, &pid) < 0)
        return 0;
    return pid;
}

/* Our pid, in place of whatever text a runner before us left. Only for the
 * next runner's message: the lock is the flock, so a failure here (a full
 * disk) does not stop us; that runner then says it does not know the pid. */
static void write_pid(int fd)
{
    char text[RUNLOCK_PID_TEXT];
    int n = runlock_format_pid(getpid(), text, sizeof(text));

    if (n < 0 || ftruncate(fd, 0) < 0)
        return;
    while (pwrite(fd, text, (size_t)n, 0) < 0 && errno == EINTR)
        ;
}

int runlock_take(const char *state_dir, pid_t *holder, struct err *e)
{
    char path[PATH_MAX];
    int fd, r;

    *holder = 0;
    if ((size_t)snprintf(path, sizeof(path), "%s/" RUNLOCK_NAME, state_dir) >= sizeof(path))
        return err_set(e, -ENAMETOOLONG, "state directory %s: name too long", state_dir);
    /* O_NOFOLLOW: a symlink planted at the name is refused, not followed,
     * and O_CREAT makes nothing at its target. O_NONBLOCK: opening a FIFO
     * or a device put there must not hang; it is refused after fstat. */
    fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0600);
    if (fd < 0) {
        r = -errno;
        if (r == -ELOOP)
            return err_set(e, r, "%s is a symlink: refused, not followed", path);
        return err_set(e, r, "cannot open %s: %s", path, strerror(-r));
    }
    r = check_file(fd, path, e);
    if (r < 0) {
        close(fd);
        return r;
    }
    /* Started with stdin, stdout or stderr closed, the lock would take its
     * number: our messages would go into it, and a child given that
     * stream would hold the lock. */
    if (fd < 3) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);

        if (high < 0) {
            r = -errno;
            close(fd);
            return err_set(e, r, "%s: %s", path, strerror(-r));
        }
        close(fd);
        fd = high;
    }
    while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        r = -errno;
        if (r == -EINTR)
            continue;
        if (r == -EWOULDBLOCK) {
            *holder = read_holder(fd);
            close(fd);
            if (*holder > 0)
                return err_set(e, -EBUSY, "%s is held by pid %ld", path, (long)*holder);
            return err_set(e, -EBUSY, "%s is held by another process", path);
        }
        close(fd);
        return err_set(e, r, "cannot lock %s: %s", path, strerror(-r));
    }
    write_pid(fd);
    return fd;
}

bool runlock_locks_line(const char *line, dev_t dev, ino_t ino, pid_t named, pid_t *pid)
{
    char type[16], mode[16], access[16];
    unsigned int maj, min;
    unsigned long long id, i;
    int p, n = 0;

    /* "ID: " first; a waiter's "->" comes next, and it holds nothing */
    if (sscanf(line, "%llu: %n", &id, &n) != 1 || n == 0 || strncmp(line + n, "->", 2) == 0)
        return false;
    if (sscanf(line + n, "%15s %15s %15s %d %x:%x:%llu", type, mode, access, &p, &maj, &min, &i) !=
        7)
        return false;
    if (strcmp(type, "FLOCK") != 0 || i != (unsigned long long)ino || p < 1)
        return false;
    /* The kernel prints the file system's device; stat() gives a btrfs
     * subvolume's own (and overlayfs its own too), so the device alone
     * would miss a holder there. The pid that run.lock names, holding a
     * flock on a file of that inode number, is the holder all the same. */
    if ((maj != major(dev) || min != minor(dev)) && (named < 1 || p != named))
        return false;
    *pid = (pid_t)p;
    return true;
}

bool runlock_status_euid(const char *text, uid_t *euid)
{
    const char *l = text;
    unsigned long real, eff;

    for (; l != NULL && *l != '\0'; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (strncmp(l, "Uid:", 4) == 0)
            break;
    if (l == NULL || *l == '\0' || sscanf(l + 4, "%lu %lu", &real, &eff) != 2 ||
        eff > (unsigned long)(uid_t)-1)
        return false;
    *euid = (uid_t)eff;
    return true;
}

/* Whether pid runs with uid as its effective user: read from its status,
 * which a process cannot make look like root's (the owner of its /proc
 * directory becomes root when it makes itself non-dumpable). */
static bool runs_as(pid_t pid, uid_t uid)
{
    char path[64], text[4096];
    ssize_t n;
    uid_t eu;
    int fd;

    snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return false;
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return false;
    text[n] = '\0';
    return runlock_status_euid(text, &eu) && eu == uid;
}

int runlock_holder(const char *state_dir, pid_t *pid, struct err *e)
{
    char path[PATH_MAX], *line = NULL;
    size_t cap = 0;
    struct stat st;
    pid_t named = 0;
    FILE *f;
    int fd, r = 0;

    *pid = 0;
    if ((size_t)snprintf(path, sizeof(path), "%s/" RUNLOCK_NAME, state_dir) >= sizeof(path))
        return err_set(e, -ENAMETOOLONG, "state directory %s: name too long", state_dir);
    /* Only looked at: lstat, as runlock_take never follows a link there */
    if (lstat(path, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        return err_set(e, -errno, "%s: %s", path, strerror(errno));
    }
    if (!S_ISREG(st.st_mode))
        return 0; /* runlock_take refuses it: no run can hold it */
    /* the pid its holder wrote (opened as runlock_take opens it: no link
     * followed, no wait) */
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd >= 0) {
        named = read_holder(fd);
        close(fd);
    }
    /* Line by line: on a file server it lists every byte-range lock of
     * smbd's databases too, thousands of lines. */
    f = fopen("/proc/locks", "re");
    if (f == NULL)
        return err_set(e, -errno, "cannot read /proc/locks: %s", strerror(errno));
    /* A line of run.lock's device is run.lock's. One of another device
     * (btrfs, overlayfs) counts only when its pid is the one run.lock
     * names and runs as run.lock's owner (runlock_take makes it ours):
     * once a run has ended, anyone whose process is given that pid again
     * could flock a file of the same inode number elsewhere (tmpfs
     * numbers its files in order) and make --status call smbtuned
     * running, and a trial it left in force "in flight". */
    while (r == 0 && getline(&line, &cap, f) > 0) {
        if (runlock_locks_line(line, st.st_dev, st.st_ino, 0, pid))
            r = 1;
        else if (runlock_locks_line(line, st.st_dev, st.st_ino, named, pid) &&
                 runs_as(*pid, st.st_uid))
            r = 1;
        else
            *pid = 0;
    }
    free(line);
    fclose(f);
    return r;
}
