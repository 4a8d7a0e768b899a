/* probe_made: the record of the probe files our probes made (see
 * probe_made.h). The probe child writes and reads it; the daemon forgets
 * the own share's and tells of other places'. */
#include "probe_made.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel.h"
#include "probe.h"

#define TAG_LEN 16

pid_t probe_made_pid(const char *name)
{
    size_t plen = strlen(PROBE_FILE_PREFIX), n = strlen(name);
    const char *tag, *p;
    char *end;
    long pid;

    /* from the end: the host part may hold '-' */
    if (strncmp(name, PROBE_FILE_PREFIX, plen) != 0 || n < plen + TAG_LEN + 4)
        return -1;
    tag = name + n - TAG_LEN;
    if (tag[-1] != '-' || strspn(tag, "0123456789abcdef") != TAG_LEN)
        return -1;
    for (p = tag - 2; p > name + plen && *p >= '0' && *p <= '9'; p--)
        ;
    /* p is the '-' before the pid, after a host of at least one byte */
    if (*p != '-' || p == name + plen || p + 1 == tag - 1 || p[1] == '0')
        return -1;
    errno = 0;
    pid = strtol(p + 1, &end, 10);
    if (errno != 0 || end != tag - 1 || pid <= 0 || pid > 0x3fffffff)
        return -1;
    return (pid_t)pid;
}

void probe_made_key(const char *place, const char *directory, char *out)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    const char *parts[] = {place, "\n", directory ? directory : ""};

    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        for (const unsigned char *c = (const unsigned char *)parts[i]; *c; c++)
            h = (h ^ *c) * 0x100000001b3ULL;
    snprintf(out, PROBE_MADE_KEY_LEN + 1, "%016llx", (unsigned long long)h);
}

int probe_made_open(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    return fd < 0 ? -errno : fd;
}

/* This boot's id (36 characters), or "" when it cannot be read. */
static void boot_id(char *out, size_t len)
{
    int f = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    ssize_t n = f < 0 ? -1 : read(f, out, len - 1);

    if (f >= 0)
        close(f);
    out[n > 0 ? n : 0] = '\0';
    out[strcspn(out, "\n")] = '\0';
}

int probe_made_add(int fd, const char *name)
{
    int f = openat(fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    unsigned long long start = 0;
    char boot[64];

    if (f < 0)
        return -errno;
    /* Who made it, beyond the pid in the name: after a power cut the pid
     * may be a long-lived process of the next boot, which would keep the
     * file for as long. Lost (an empty record), the pid alone judges. */
    boot_id(boot, sizeof(boot));
    if (boot[0] != '\0' && kernel_proc_start(getpid(), &start) == 0)
        dprintf(f, "boot=%s start=%llu\n", boot, start);
    /* its content too: a power cut within the writeback delay would
     * leave an empty record, judged by the pid alone */
    if (fsync(f) < 0) {
        int r = -errno;

        close(f);
        unlinkat(fd, name, 0);
        return r;
    }
    close(f);
    /* The name must outlive a power cut that the share's file outlives:
     * a record lost would leave that file for good. */
    if (fsync(fd) < 0) {
        int r = -errno;

        unlinkat(fd, name, 0);
        return r;
    }
    return 0;
}

int probe_made_drop(int fd, const char *name)
{
    return unlinkat(fd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
}

/* STATE_DIR/probe/made, or its directory key (not NULL), opened without
 * following a link on the way: the fd, or -errno. */
static int open_records(const char *state_dir, const char *key)
{
    const char *const way[] = {PROBE_WORKDIR_SUBDIR, PROBE_MADE_SUBDIR, key};
    size_t k, steps = key != NULL ? 3 : 2;
    int fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    for (k = 0; fd >= 0 && k < steps; k++) {
        int next = openat(fd, way[k], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int er = errno;

        close(fd);
        if (next < 0)
            return -er;
        fd = next;
    }
    return fd < 0 ? -errno : fd;
}

int probe_made_forget_dead(const char *state_dir, const char *place)
{
    char key[PROBE_MADE_KEY_LEN + 1];
    char names[64][256];
    int fd, n, i;

    probe_made_key(place, NULL, key);
    fd = open_records(state_dir, key);
    if (fd < 0)
        return fd == -ENOENT ? 0 : fd;
    /* a batch at a time: each pass sees only what is still there */
    while ((n = probe_made_dead(fd, names, 64)) > 0) {
        for (i = 0; i < n; i++)
            if (unlinkat(fd, names[i], 0) < 0 && errno != ENOENT) {
                n = -errno;
                break;
            }
        if (n < 0 || n < 64)
            break;
    }
    close(fd);
    return n < 0 ? n : 0;
}

/* Is the probe that recorded name (pid from the name) still running? By
 * the record's boot and start time when it has them, else by the pid. */
static bool recorder_alive(int fd, const char *name, pid_t pid, const char *boot)
{
    char buf[160], rboot[64];
    unsigned long long start;
    int f = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    ssize_t n = f < 0 ? -1 : read(f, buf, sizeof(buf) - 1);

    if (f >= 0)
        close(f);
    buf[n > 0 ? n : 0] = '\0';
    if (boot[0] != '\0' && sscanf(buf, "boot=%63s start=%llu", rboot, &start) == 2) {
        unsigned long long now;

        /* Gone only when known to be: of another boot, or a pid that is
         * no process or another one now. A stat we may not read (hidepid)
         * is a live probe's, whose file must not go. */
        if (strcmp(rboot, boot) != 0 || !kernel_pid_alive(pid))
            return false;
        return kernel_proc_start(pid, &now) < 0 || now == start;
    }
    return kernel_pid_alive(pid);
}

int probe_made_dead(int fd, char (*names)[256], int max)
{
    char boot[64];
    int dfd = dup(fd), n = 0;
    struct dirent *de;
    DIR *d;

    if (dfd < 0)
        return -errno;
    d = fdopendir(dfd);
    if (d == NULL) {
        int r = -errno;

        close(dfd);
        return r;
    }
    /* the fd's offset is shared with dfd: read from the start */
    rewinddir(d);
    boot_id(boot, sizeof(boot));
    while (n < max && (de = readdir(d)) != NULL) {
        pid_t pid = probe_made_pid(de->d_name);
        struct stat st;

        if (pid < 0 || strlen(de->d_name) >= sizeof(names[0]) ||
            fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
            recorder_alive(fd, de->d_name, pid, boot))
            continue;
        snprintf(names[n++], sizeof(names[0]), "%s", de->d_name);
    }
    closedir(d);
    return n;
}

/* A place's `place` file, one line of printable characters, into out. */
static void read_place(int dfd, char *out, size_t len)
{
    int f = openat(dfd, PROBE_MADE_PLACE_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    ssize_t n = f < 0 || fstat(f, &st) < 0 || !S_ISREG(st.st_mode) ? -1 : read(f, out, len - 1);

    if (f >= 0)
        close(f);
    if (n <= 0) {
        snprintf(out, len, "(a place not named)");
        return;
    }
    out[n] = '\0';
    out[strcspn(out, "\n")] = '\0';
    for (char *c = out; *c; c++)
        if (!isprint((unsigned char)*c))
            *c = '?';
}

int probe_made_others(const char *state_dir, const char *place, const char *directory,
                      probe_made_place_fn fn, void *ud)
{
    char key[PROBE_MADE_KEY_LEN + 1], where[1024], (*names)[256];
    struct dirent *de;
    DIR *d;
    int fd;

    probe_made_key(place, directory, key);
    names = malloc(sizeof(*names) * PROBE_MADE_COUNT_MAX);
    if (names == NULL)
        return -ENOMEM;
    fd = open_records(state_dir, NULL);
    d = fd < 0 ? NULL : fdopendir(fd);
    if (d == NULL) {
        int r = fd < 0 ? fd : -errno;

        if (fd >= 0)
            close(fd);
        free(names);
        return r == -ENOENT ? 0 : r;
    }
    while ((de = readdir(d)) != NULL) {
        int sub, n;

        if (strlen(de->d_name) != PROBE_MADE_KEY_LEN || strcmp(de->d_name, key) == 0 ||
            strspn(de->d_name, "0123456789abcdef") != PROBE_MADE_KEY_LEN)
            continue;
        sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            continue;
        n = probe_made_dead(sub, names, PROBE_MADE_COUNT_MAX);
        if (n > 0) {
            char records[4200];

            read_place(sub, where, sizeof(where));
            snprintf(records, sizeof(records), "%s/%s/%s/%s", state_dir, PROBE_WORKDIR_SUBDIR,
                     PROBE_MADE_SUBDIR, de->d_name);
            fn(where, records, n, ud);
        }
        close(sub);
    }
    closedir(d);
    free(names);
    return 0;
}
