/* rmtree: remove a directory tree that smbtuned created, and nothing else. */
#include "rmtree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct walk {
    uid_t uid;
    dev_t dev; /* the top's file system */
    int first; /* the first reason something was left, 0 = none */
    long kept; /* entries left so far: their parents stay too */
    struct err *e;
    char path[PATH_MAX]; /* the entry at hand, for messages */
};

__attribute__((format(printf, 3, 4))) static void keep(struct walk *w, int code, const char *fmt,
                                                       ...)
{
    char why[256];
    va_list ap;

    w->kept++;
    if (w->first != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    w->first = code;
    err_set(w->e, code, "%s: %s: left alone", w->path, why);
}

/* Whether the directory open as fd is the root of a mount. A bind mount of
 * the same file system has the parent's st_dev: only statx shows it (Linux
 * 5.8; before, the st_dev check is all there is). */
static bool mount_root(int fd)
{
    struct statx sx;

    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_TYPE, &sx) < 0)
        return false;
    return (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
           (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

static void remove_dir(struct walk *w, int parent, const char *name, int depth);

static void remove_entry(struct walk *w, int dirfd, const char *name, int depth)
{
    struct stat st;

    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            keep(w, -errno, "%s", strerror(errno));
        return;
    }
    if (st.st_uid != w->uid) {
        keep(w, -EPERM, "owned by uid %u, not %u", (unsigned)st.st_uid, (unsigned)w->uid);
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        remove_dir(w, dirfd, name, depth + 1);
        return;
    }
    /* A symlink, a file, a socket: the name goes, relative to a directory
     * we checked; unlinkat never follows anything. Should the name have
     * become a directory meanwhile, this fails (EISDIR) and it stays. */
    if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
        keep(w, -errno, "%s", strerror(errno));
}

static void empty_dir(struct walk *w, int fd, int depth)
{
    size_t plen = strlen(w->path);
    struct dirent *de;
    int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    DIR *d = dfd < 0 ? NULL : fdopendir(dfd);

    if (d == NULL) {
        if (dfd >= 0)
            close(dfd);
        keep(w, -errno, "cannot read it: %s", strerror(errno));
        return;
    }
    for (;;) {
        errno = 0;
        de = readdir(d);
        if (de == NULL)
            break;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(w->path + plen, sizeof(w->path) - plen, "/%s", de->d_name);
        remove_entry(w, fd, de->d_name, depth);
        w->path[plen] = '\0';
    }
    if (errno != 0)
        keep(w, -errno, "cannot read it: %s", strerror(errno));
    closedir(d);
}

static void remove_dir(struct walk *w, int parent, const char *name, int depth)
{
    struct stat st;
    long before = w->kept;
    int fd;

    if (depth > RMTREE_MAX_DEPTH) {
        keep(w, -ELOOP, "deeper than %d levels", RMTREE_MAX_DEPTH);
        return;
    }
    fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        /* ELOOP/ENOTDIR: it was swapped for a symlink or a file since
         * fstatat. Not ours to enter. */
        keep(w, -errno, "%s", strerror(errno));
        return;
    }
    /* Check what was opened, not what was looked at before. */
    if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != w->uid || st.st_dev != w->dev) {
        keep(w, -EPERM, "not a directory of uid %u on the same file system", (unsigned)w->uid);
        close(fd);
        return;
    }
    if (mount_root(fd)) {
        keep(w, -EXDEV, "a mount point");
        close(fd);
        return;
    }
    empty_dir(w, fd, depth);
    close(fd);
    if (w->kept == before && unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        keep(w, -errno, "%s", strerror(errno));
}

static int remove_top(struct walk *w, int dirfd, const char *name, const char *shown)
{
    struct stat st, pst;
    int r;

    snprintf(w->path, sizeof(w->path), "%s", shown);
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : err_set(w->e, -errno, "%s: %s", shown, strerror(errno));
    if (S_ISLNK(st.st_mode))
        return err_set(w->e, -ELOOP, "%s is a symlink: left alone", shown);
    if (!S_ISDIR(st.st_mode))
        return err_set(w->e, -ENOTDIR, "%s is not a directory: left alone", shown);
    if (st.st_uid != w->uid)
        return err_set(w->e, -EPERM, "%s is owned by uid %u, not %u: left alone", shown,
                       (unsigned)st.st_uid, (unsigned)w->uid);
    r = dirfd == AT_FDCWD ? stat(".", &pst) : fstat(dirfd, &pst);
    if (r < 0)
        return err_set(w->e, -errno, "%s: %s", shown, strerror(errno));
    if (st.st_dev != pst.st_dev)
        return err_set(w->e, -EXDEV, "%s is a mount point: left alone", shown);
    w->dev = st.st_dev;
    remove_dir(w, dirfd, name, 0);
    return w->first;
}

int rmtree_at(int dirfd, const char *name, struct err *e)
{
    struct walk w = {.uid = geteuid(), .e = e};

    /* One component: the parent is the caller's, checked by the caller. */
    if (name[0] == '\0' || strchr(name, '/') != NULL || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0)
        return err_set(e, -EINVAL, "'%s' is not a name in a directory", name);
    return remove_top(&w, dirfd, name, name);
}

int rmtree_path(const char *path, struct err *e)
{
    struct walk w = {.uid = geteuid(), .e = e};
    char dir[PATH_MAX], *slash;
    const char *name;
    size_t n = strlen(path);
    int fd, r;

    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n == 0 || n >= sizeof(dir))
        return err_set(e, -EINVAL, "'%s' is not a path to remove", path);
    memcpy(dir, path, n);
    dir[n] = '\0';
    slash = strrchr(dir, '/');
    if (slash == NULL) {
        name = dir;
        fd = AT_FDCWD;
    } else {
        *slash = '\0';
        name = slash + 1;
        fd = open(slash == dir ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
            return errno == ENOENT ? 0 : err_set(e, -errno, "%s: %s", path, strerror(errno));
    }
    if (name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        r = err_set(e, -EINVAL, "'%s' is not a path to remove", path);
    else
        r = remove_top(&w, fd, name, path);
    if (fd != AT_FDCWD)
        close(fd);
    return r;
}
