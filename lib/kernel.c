/* kernel: /proc and /proc/sys: the only room that reads /proc (sock_diag, the
 * kernel's view of sockets, is in kernel_diag.c). */
#include "kernel.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "parse.h"

static int read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return -errno;
    n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return (int)n;
}

int kernel_sysctl_triple(const char *name, long v[3], struct err *e)
{
    char path[256], buf[128];
    int r;

    snprintf(path, sizeof(path), "/proc/sys/%s", name);
    r = read_small(path, buf, sizeof(buf));
    if (r < 0)
        return err_set(e, r, "cannot read %s: %s", path, strerror(-r));
    if (sscanf(buf, "%ld %ld %ld", &v[0], &v[1], &v[2]) != 3 || v[0] <= 0 || v[2] < v[0])
        return err_set(e, -EINVAL, "%s: expected three sizes, got '%s'", path, buf);
    return 0;
}

int kernel_sysctl_long(const char *name, long *v, struct err *e)
{
    char path[256], buf[64];
    long long x;
    int r;

    snprintf(path, sizeof(path), "/proc/sys/%s", name);
    r = read_small(path, buf, sizeof(buf));
    if (r < 0)
        return err_set(e, r, "cannot read %s: %s", path, strerror(-r));
    buf[strcspn(buf, "\n")] = '\0';
    r = parse_long(buf, 0, 1LL << 40, &x);
    if (r < 0)
        return err_set(e, r, "%s: expected a number, got '%s'", path, buf);
    *v = (long)x;
    return 0;
}

int kernel_buffer_caps(long *rcv_max, long *snd_max, struct err *e)
{
    int r = kernel_sysctl_long("net/core/rmem_max", rcv_max, e);

    return r < 0 ? r : kernel_sysctl_long("net/core/wmem_max", snd_max, e);
}

/* The buffer a zero request gets, read back from a TCP socket of our own:
 * the minimum is compiled into the kernel (SOCK_MIN_RCVBUF, twice that for
 * sending; it follows the size of struct sk_buff), so ask it. */
int kernel_buffer_mins(long *rcv_min, long *snd_min, struct err *e)
{
    int opts[2] = {SO_RCVBUF, SO_SNDBUF}, zero = 0, got[2];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return err_set(e, -errno,
                       "cannot open a TCP socket to read the kernel's minimum "
                       "buffer sizes: %s",
                       strerror(errno));
    for (int i = 0; i < 2; i++) {
        socklen_t len = sizeof(got[i]);

        if (setsockopt(fd, SOL_SOCKET, opts[i], &zero, sizeof(zero)) < 0 ||
            getsockopt(fd, SOL_SOCKET, opts[i], &got[i], &len) < 0) {
            int r = -errno;

            close(fd);
            return err_set(e, r, "cannot read the kernel's minimum buffer sizes: %s", strerror(-r));
        }
    }
    close(fd);
    *rcv_min = got[0];
    *snd_min = got[1];
    return 0;
}

int kernel_release(char *buf, size_t len)
{
    struct utsname u;

    if (uname(&u) < 0)
        return -errno;
    snprintf(buf, len, "%s", u.release);
    return 0;
}

int kernel_proc_parse(const char *stat_text, struct kernel_proc *p)
{
    const char *s = strrchr(stat_text, ')');
    unsigned long long start = 0;
    int pgrp, session, field;

    /* The command name (field 2) is in parentheses and may hold anything,
     * blanks and ')' included: the fields we want follow the last ')'. */
    if (s == NULL || sscanf(s + 1, " %c %*d %d %d", &p->state, &pgrp, &session) != 3)
        return -EINVAL;
    s++;
    for (field = 3; field < 22; field++) {
        s = strchr(s + 1, ' ');
        if (s == NULL)
            return -EINVAL;
    }
    if (sscanf(s, " %llu", &start) != 1)
        return -EINVAL;
    p->pgrp = (pid_t)pgrp;
    p->session = (pid_t)session;
    p->start_time = start;
    return 0;
}

int kernel_proc_read(pid_t pid, struct kernel_proc *p)
{
    char path[64], buf[1024];
    int r;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    r = read_small(path, buf, sizeof(buf));
    if (r < 0)
        return r;
    return r == 0 ? -EIO : kernel_proc_parse(buf, p);
}

int kernel_proc_start(pid_t pid, unsigned long long *ticks)
{
    struct kernel_proc p;
    int r = kernel_proc_read(pid, &p);

    if (r == 0)
        *ticks = p.start_time;
    return r;
}

/* A zombie counts as gone: a process killed with its parent (PDEATHSIG)
 * stays a zombie until whoever inherits it reaps it, and an init that
 * reaps slowly (a container's took ~2 s here) made the probe's clean-up
 * keep a dead probe's file. */
static bool gone(const struct kernel_proc *p)
{
    return p->state == 'Z' || p->state == 'X';
}

bool kernel_pid_alive(pid_t pid)
{
    struct kernel_proc p;

    if (pid <= 0 || (kill(pid, 0) < 0 && errno != EPERM))
        return false;
    return kernel_proc_read(pid, &p) < 0 || !gone(&p);
}

bool kernel_pid_is(pid_t pid, unsigned long long start_time)
{
    struct kernel_proc p;

    return pid > 0 && kernel_proc_read(pid, &p) == 0 && !gone(&p) && p.start_time == start_time;
}

/* name starts with one of prefixes (NULL-terminated) */
static bool named_one_of(const char *name, const char *const prefixes[])
{
    for (size_t i = 0; prefixes[i] != NULL; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

/* The live (not zombie) members of process group pgid, walked in /proc:
 * PGRP_NONE none, PGRP_ONLY some and (comms given) every one in `session`
 * with a name that starts with one of comms, PGRP_OTHER some not so; -1
 * /proc cannot be read. Without comms it stops at the first member. */
enum { PGRP_NONE, PGRP_ONLY, PGRP_OTHER };
static int pgrp_members(pid_t pgid, pid_t session, const char *const comms[])
{
    struct dirent *de;
    int found = PGRP_NONE;
    DIR *d;

    if (pgid <= 0 || (kill(-pgid, 0) < 0 && errno == ESRCH))
        return PGRP_NONE;
    d = opendir("/proc");
    if (d == NULL)
        return -1;
    while (found != PGRP_OTHER && (found == PGRP_NONE || comms != NULL) &&
           (de = readdir(d)) != NULL) {
        struct kernel_proc p;
        char name[64];
        long long pid;

        if (parse_long(de->d_name, 1, INT_MAX, &pid) < 0 || kernel_proc_read((pid_t)pid, &p) < 0 ||
            p.pgrp != pgid || gone(&p))
            continue;
        found = PGRP_ONLY;
        /* one that cannot be named is not known to be what we want */
        if (comms != NULL &&
            (p.session != session || kernel_proc_comm((pid_t)pid, name, sizeof(name)) < 0 ||
             !named_one_of(name, comms)))
            found = PGRP_OTHER;
    }
    closedir(d);
    return found;
}

bool kernel_pgrp_alive(pid_t pgid)
{
    /* unreadable /proc: alive, so that nothing is taken for gone */
    return pgrp_members(pgid, 0, NULL) != PGRP_NONE;
}

bool kernel_pgrp_only(pid_t pgid, pid_t session, const char *const comms[])
{
    return pgrp_members(pgid, session, comms) == PGRP_ONLY;
}

int kernel_proc_comm(pid_t pid, char *buf, size_t len)
{
    char path[64];
    int r;

    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    r = read_small(path, buf, len);
    if (r < 0)
        return r;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

bool kernel_pid_has_socket(pid_t pid, unsigned long inode)
{
    char dir[64], want[64], path[PATH_MAX], link[64];
    struct dirent *de;
    bool found = false;
    DIR *d;

    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    d = opendir(dir);
    if (d == NULL)
        return false;
    while (!found && (de = readdir(d)) != NULL) {
        ssize_t n;

        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        n = readlink(path, link, sizeof(link) - 1);
        if (n <= 0)
            continue;
        link[n] = '\0';
        found = strcmp(link, want) == 0;
    }
    closedir(d);
    return found;
}

int kernel_proc_cmdline(pid_t pid, char *buf, size_t len)
{
    char path[64];
    int fd, n;

    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    n = (int)read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    for (int i = 0; i < n - 1; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    return 0;
}
