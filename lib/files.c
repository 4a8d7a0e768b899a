/* files: regular files only, read without blocking; an atomic replace that
 * keeps owner, mode and extended attributes (copied by files_meta.c, its
 * temporary files named and swept by files_tmp.c); the edit lock. */
#include "files.h"
#include "files_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

static const char *file_kind(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    return "not a regular file";
}

/* Filesystems whose "regular" files are kernel interfaces, not
 * configuration: a read may block (/proc/kmsg, tracefs trace_pipe), drain
 * something (the kernel log) or never end. Samba configs never live there. */
#define FILES_SYSFS_MAGIC 0x62656572
#define FILES_TRACEFS_MAGIC 0x74726163
#define FILES_DEBUGFS_MAGIC 0x64626720

bool files_kernel_fd(int fd)
{
    struct statfs sf;

    if (fstatfs(fd, &sf) < 0)
        return false;
    return sf.f_type == PROC_SUPER_MAGIC || sf.f_type == FILES_SYSFS_MAGIC ||
           sf.f_type == FILES_TRACEFS_MAGIC || sf.f_type == FILES_DEBUGFS_MAGIC;
}

bool files_kernel_path(const char *path)
{
    return strncmp(path, "/proc/", 6) == 0 || strcmp(path, "/proc") == 0 ||
           strncmp(path, "/sys/", 5) == 0 || strcmp(path, "/sys") == 0;
}

/* Read the whole of fd, opened O_NONBLOCK, into a NUL-terminated malloc'ed
 * buffer; path names it in e; its fstat into *out (may be NULL). Closes
 * fd. */
static int read_fd(int fd, const char *path, char **buf, size_t *len, struct stat *out,
                   struct err *e)
{
    struct stat st;
    char *b = NULL;
    size_t n = 0, cap = 0;
    int r = 0;

    if (fstat(fd, &st) < 0) {
        r = -errno;
        close(fd);
        return err_set(e, r, "%s: %s", path, strerror(-r));
    }
    if (!S_ISREG(st.st_mode)) {
        r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        close(fd);
        return err_set(e, r, "%s is %s: smbtuned reads only regular files", path,
                       file_kind(st.st_mode));
    }
    if (files_kernel_fd(fd)) {
        close(fd);
        return err_set(e, -EINVAL,
                       "%s is in /proc, /sys or another kernel filesystem: not a "
                       "configuration file, smbtuned does not read it",
                       path);
    }
    /* O_NONBLOCK stays on: a "regular" file that blocks on read (a FUSE
     * file, a kernel interface on a filesystem we do not know) gives
     * EAGAIN, an error naming the file, instead of a hang. */
    for (;;) {
        ssize_t got;

        if (cap - n < 4096) {
            char *nb;

            cap = cap ? cap * 2 : 8192;
            nb = realloc(b, cap + 1);
            if (nb == NULL) {
                r = -ENOMEM;
                break;
            }
            b = nb;
        }
        got = read(fd, b + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            r = -errno;
            break;
        }
        if (got == 0)
            break;
        n += (size_t)got;
        /* smb.conf files are small; refuse absurd sizes rather than
         * exhaust memory on a wrong path (the bytes read, not the buffer:
         * a file of up to twice the limit once passed). */
        if (n > FILES_MAX_SIZE) {
            r = -EFBIG;
            break;
        }
    }
    close(fd);
    if (r < 0) {
        free(b);
        if (r == -EAGAIN)
            return err_set(e, r,
                           "%s: reading it would block (not an ordinary file): smbtuned "
                           "reads only files that are ready",
                           path);
        return err_set(e, r, "%s: %s", path,
                       r == -EFBIG ? "larger than 64 MiB: not a configuration file" : strerror(-r));
    }
    if (b == NULL) {
        b = malloc(1);
        if (b == NULL)
            return err_set(e, -ENOMEM, "out of memory");
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    if (out != NULL)
        *out = st;
    return 0;
}

static int read_path(const char *path, int flags, char **buf, size_t *len, struct stat *st,
                     struct err *e)
{
    struct stat lst;
    int fd, err;

    /* Refused before open: opening some kernel files has effects. Paths
     * that reach them otherwise (a symlink) are caught by fstatfs. */
    if (files_kernel_path(path))
        return err_set(e, -EINVAL,
                       "%s is in /proc or /sys: not a configuration file, smbtuned does not "
                       "read it",
                       path);
    /* O_NONBLOCK: open() of a FIFO without a writer (or of some devices)
     * blocks for ever, before fstat could tell us what it is. */
    fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | flags);
    err = errno;
    /* (ELOOP is also a loop of links in the directories on the way) */
    if (fd < 0 && err == ELOOP && (flags & O_NOFOLLOW) && lstat(path, &lst) == 0 &&
        S_ISLNK(lst.st_mode))
        return err_set(e, -ELOOP,
                       "%s: a symbolic link where smbtuned keeps a file of its own: not "
                       "followed",
                       path);
    if (fd < 0)
        return err_set(e, -err, "%s: %s", path, strerror(err));
    return read_fd(fd, path, buf, len, st, e);
}

int files_read_stat(const char *path, char **buf, size_t *len, struct stat *st, struct err *e)
{
    return read_path(path, 0, buf, len, st, e);
}

int files_read(const char *path, char **buf, size_t *len, struct err *e)
{
    return read_path(path, 0, buf, len, NULL, e);
}

int files_read_own(const char *path, char **buf, size_t *len, struct err *e)
{
    return read_path(path, O_NOFOLLOW, buf, len, NULL, e);
}

/* Does the file open at fd hold exactly len bytes, expect's? */
static bool holds_bytes(int fd, const char *expect, size_t len)
{
    char buf[65536];
    size_t off = 0;

    for (;;) {
        size_t want = len - off < sizeof(buf) ? len - off : sizeof(buf);
        /* one byte past the end: the file must end where expect does */
        ssize_t got = pread(fd, buf, want ? want : 1, (off_t)off);

        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return false;
        if (want == 0)
            return got == 0;
        if (got == 0 || memcmp(buf, expect + off, (size_t)got) != 0)
            return false;
        off += (size_t)got;
    }
}

/* Put tmp in place of base (both in dfd), but only while base is still the
 * file `like` describes: an admin's editor may rename its own file over it
 * at any moment up to ours, and a plain rename would throw that file away.
 * The two names are exchanged atomically, the one that came out is
 * checked, and exchanged back when it is not the file the caller judged
 * (-ESTALE). With expect, the file that came out (open at src) must also
 * still hold expect's elen bytes: an editor that saves in place (nano,
 * `echo >>`) changes the bytes but not the file, and its write in the
 * moments between the caller's compare and the exchange (backups and
 * fsyncs: tens of milliseconds) would be thrown away with the old file.
 * On return tmp names the old file, or ours (both for the caller to
 * remove), unless *keep is set: then it names nothing, or a file that is
 * not ours. A kill between the two exchanges leaves that other file
 * (an editor's, renamed over base just before the first) under tmp with
 * no one to keep it: tmp carries the inode numbers of ours and of like's,
 * with like's mtime and size (write_at names it so where it can), and the
 * sweep removes only those two files, like's only as it was judged
 * (sweep_at).
 * A filesystem without RENAME_EXCHANGE gets the checks, then a plain
 * rename. Everything is relative to dfd: no name is looked up again from
 * "/", so no directory swapped meanwhile can redirect it. */
static int swap_in(int dfd, const char *tmp, const char *base, const struct stat *like, int src,
                   const char *expect, size_t elen, const struct files_hooks *h, bool *keep)
{
    struct stat st;

    *keep = false;
    if (renameat2(dfd, tmp, dfd, base, RENAME_EXCHANGE) < 0) {
        if (errno != EINVAL && errno != ENOSYS)
            return -errno;
        /* No exchange here (OpenZFS before 2.2): the same checks, made
         * right before a plain rename, leave a window of microseconds
         * where the exchange leaves none; the caller's compare came tens
         * of milliseconds (backups, fsyncs) earlier. */
        if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != like->st_dev ||
            st.st_ino != like->st_ino || (expect != NULL && !holds_bytes(src, expect, elen)))
            return -ESTALE;
        /* a rename that failed leaves tmp ours, for the caller to remove */
        if (renameat(dfd, tmp, dfd, base) < 0)
            return -errno;
        *keep = true; /* tmp names nothing now */
        return 0;
    }
    if (h != NULL && h->exchanged != NULL)
        h->exchanged(h->ctx);
    if (fstatat(dfd, tmp, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == like->st_dev &&
        st.st_ino == like->st_ino && (expect == NULL || holds_bytes(src, expect, elen)))
        return 0;
    if (renameat2(dfd, tmp, dfd, base, RENAME_EXCHANGE) < 0) {
        /* the other file is at tmp now: never remove it; and base holds
         * the new bytes, which the caller must not call "nothing written" */
        *keep = true;
        return FILES_SWAPPED_OUT;
    }
    return -ESTALE;
}

/* Open the directory dir (absolute, already resolved: no symlink, no "."
 * or "..") by walking each component from "/" with O_NOFOLLOW. A component
 * that is a symlink now (ELOOP/ENOTDIR) means someone swapped a directory
 * since the path was resolved: -ELOOP, and nothing may be written. The
 * last one is opened O_RDONLY (fsync, readdir), the others O_PATH. Not
 * openat2(RESOLVE_NO_SYMLINKS): valgrind 3.19 does not know it. */
static int open_dir(const char *dir)
{
    char buf[PATH_MAX];
    char *p, *save = NULL, *next;
    int fd, r;
    size_t n = strlen(dir);

    if (dir[0] != '/' || n >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, dir, n + 1);
    p = strtok_r(buf, "/", &save);
    fd = open("/", (p == NULL ? O_RDONLY : O_PATH) | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    for (; p != NULL; p = next) {
        int nfd;

        next = strtok_r(NULL, "/", &save);
        if (strcmp(p, ".") == 0 || strcmp(p, "..") == 0) {
            close(fd);
            return -EINVAL;
        }
        nfd = openat(fd, p, (next ? O_PATH : O_RDONLY) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        r = -errno;
        close(fd);
        if (nfd < 0)
            return r == -ENOTDIR ? -ELOOP : r;
        fd = nfd;
    }
    return fd;
}

/* Split path into its directory, resolved by realpath (a symlinked state
 * directory such as /var/run is fine: it is resolved once, here) and then
 * opened by open_dir, and its last component. *base points into path. */
int files_open_parent(const char *path, const char **base, const struct files_hooks *h)
{
    char real[PATH_MAX], *dir;
    const char *slash = strrchr(path, '/');
    int r;

    dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (dir == NULL)
        return -ENOMEM;
    *base = slash ? slash + 1 : path;
    if (realpath(dir, real) == NULL) {
        r = -errno;
    } else {
        if (h != NULL && h->resolved != NULL)
            h->resolved(h->ctx, real);
        r = open_dir(real);
    }
    free(dir);
    if (r >= 0 && (**base == '\0' || strcmp(*base, ".") == 0 || strcmp(*base, "..") == 0)) {
        close(r);
        r = -EINVAL;
    }
    return r;
}

/* files_write_atomic's work, all of it relative to dfd. src: base opened
 * O_NOFOLLOW by the caller (the file like describes), or -1 to open it
 * here; expect (with like only): the bytes it must still hold (swap_in). */
static int write_at(int dfd, const char *base, const char *data, size_t len,
                    const struct stat *like, int src, const char *expect, size_t elen,
                    const struct files_hooks *h)
{
    char tmp[NAME_MAX + 1];
    bool have_tmp = false;
    int fd = -1, own_src = -1, r = 0;
    size_t off = 0;

    for (int tries = 0;; tries++) {
        r = files_tmp_name(tmp, sizeof(tmp), base);
        if (r < 0)
            return r;
        fd = openat(dfd, tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0)
            break;
        if (errno != EEXIST || tries == 100)
            return -errno;
    }
    have_tmp = true;
    /* The exchange can leave another file under the temporary name (a
     * kill between swap_in's two exchanges): its name must say which
     * files are ours to sweep. Its inode number is known only now that
     * it exists, hence a second name. A plain rename leaves nothing but
     * ours under it: the random name does. */
    if (like != NULL && (r = files_tmp_name_by_inodes(dfd, fd, tmp, sizeof(tmp), base, like)) < 0)
        goto out;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            r = -errno;
            goto out;
        }
        off += (size_t)w;
    }
    /* The new file must be the old one in all but its bytes: smbd (or an
     * admin's tools) may rely on its owner, mode, ACLs and labels. After
     * the data: a write clears setuid bits and file capabilities. */
    if (like != NULL) {
        if (src < 0) {
            own_src = openat(dfd, base, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
            if (own_src < 0) {
                r = -errno;
                goto out;
            }
            src = own_src;
        }
        if ((r = files_copy_meta(fd, src, like)) < 0)
            goto out;
    }
    /* Data on disk before the name points at it, so that a crash leaves
     * the old file or the new one, never an empty one. */
    if (fsync(fd) < 0) {
        r = -errno;
        goto out;
    }
    r = close(fd) < 0 ? -errno : 0;
    fd = -1;
    if (r < 0)
        goto out;
    if (like != NULL) {
        bool keep;

        r = swap_in(dfd, tmp, base, like, src, expect, elen, h, &keep);
        if (keep)
            have_tmp = false;
        if (r < 0)
            goto out;
    } else if (renameat(dfd, tmp, dfd, base) < 0) {
        r = -errno;
        goto out;
    } else {
        have_tmp = false;
    }
    if (have_tmp)
        unlinkat(dfd, tmp, 0); /* the old file */
    have_tmp = false;
    /* Make the rename itself durable. Its failure is not returned: the
     * new file is in place all the same, and a caller told "failed" would
     * say "nothing written" of a file that now holds the new bytes. A
     * crash before the directory reaches the disk brings back the old
     * file, whole (rename's own promise); the daemon then finds a line
     * it did not write, and holds off. */
    (void)fsync(dfd);
out:
    if (fd >= 0)
        close(fd);
    if (own_src >= 0)
        close(own_src);
    if (have_tmp)
        unlinkat(dfd, tmp, 0);
    return r;
}

int files_write_atomic(const char *path, const char *data, size_t len, const struct stat *like)
{
    return files_write_atomic_hooked(path, data, len, like, NULL);
}

int files_write_atomic_hooked(const char *path, const char *data, size_t len,
                              const struct stat *like, const struct files_hooks *h)
{
    const char *base;
    int dfd = files_open_parent(path, &base, h), r;

    if (dfd < 0)
        return dfd;
    r = write_at(dfd, base, data, len, like, -1, NULL, 0, h);
    close(dfd);
    return r;
}

int files_target_open(struct files_target *t, const char *path, struct err *e)
{
    return files_target_open_hooked(t, path, NULL, e);
}

int files_target_open_hooked(struct files_target *t, const char *path, const struct files_hooks *h,
                             struct err *e)
{
    char real[PATH_MAX];
    const char *slash;
    int r;

    memset(t, 0, sizeof(*t));
    t->dfd = -1;
    t->fd = -1;
    /* Resolved once: a symlinked smb.conf is written through to its
     * target. From here on nothing is looked up by path again. */
    if (realpath(path, real) == NULL)
        return err_set(e, -errno, "%s: %s", path, strerror(errno));
    if (files_kernel_path(real))
        return err_set(e, -EINVAL,
                       "%s is in /proc or /sys: not a configuration file, smbtuned does not "
                       "write it",
                       real);
    if (h != NULL && h->resolved != NULL)
        h->resolved(h->ctx, real);
    t->path = strdup(real);
    if (t->path == NULL)
        return err_set(e, -ENOMEM, "out of memory");
    slash = strrchr(t->path, '/');
    t->base = slash + 1;
    {
        char *dir = strndup(t->path, slash == t->path ? 1 : (size_t)(slash - t->path));

        r = dir == NULL ? -ENOMEM : open_dir(dir);
        free(dir);
    }
    if (r == -ELOOP) {
        r = err_set(e, r,
                    "%s: a directory on its path is a symlink (or no directory) now: it "
                    "was replaced while smbtuned was editing it; nothing written",
                    t->path);
        goto fail;
    }
    if (r < 0) {
        r = err_set(e, r, "%s: cannot open its directory: %s", t->path, strerror(-r));
        goto fail;
    }
    t->dfd = r;
    t->fd = openat(t->dfd, t->base, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (t->fd < 0) {
        r = -errno;
        r = err_set(e, r, "%s: %s", t->path,
                    r == -ELOOP ? "it is a symlink now (replaced while smbtuned was editing "
                                  "it): nothing written"
                                : strerror(-r));
        goto fail;
    }
    if (fstat(t->fd, &t->st) < 0) {
        r = err_set(e, -errno, "%s: %s", t->path, strerror(errno));
        goto fail;
    }
    t->hooks = h;
    return 0;
fail:
    files_target_close(t);
    return r;
}

int files_target_read(struct files_target *t, char **buf, size_t *len, struct err *e)
{
    /* read_fd closes what it reads: a second descriptor of the same open
     * file, so that t->fd stays the source of the metadata. */
    int fd = fcntl(t->fd, F_DUPFD_CLOEXEC, 0);

    if (fd < 0)
        return err_set(e, -errno, "%s: %s", t->path, strerror(errno));
    if (lseek(fd, 0, SEEK_SET) < 0) {
        close(fd);
        return err_set(e, -errno, "%s: %s", t->path, strerror(errno));
    }
    return read_fd(fd, t->path, buf, len, NULL, e);
}

int files_target_replace(struct files_target *t, const char *data, size_t len, const char *expect,
                         size_t elen)
{
    return write_at(t->dfd, t->base, data, len, &t->st, t->fd, expect, elen, t->hooks);
}

void files_target_close(struct files_target *t)
{
    if (t->fd >= 0)
        close(t->fd);
    if (t->dfd >= 0)
        close(t->dfd);
    free(t->path);
    memset(t, 0, sizeof(*t));
    t->dfd = -1;
    t->fd = -1;
}

int files_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t w = write(fd, p, len);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int files_lock(const char *path, double wait_s, struct err *e)
{
    struct timespec now;
    double until;
    int fd, r;

    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return err_set(e, -errno, "cannot open lock file %s: %s", path, strerror(errno));
    clock_gettime(CLOCK_MONOTONIC, &now);
    until = (double)now.tv_sec + (double)now.tv_nsec / 1e9 + wait_s;
    while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        r = -errno;
        if (r == -EWOULDBLOCK || r == -EINTR) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if ((double)now.tv_sec + (double)now.tv_nsec / 1e9 <= until) {
                usleep(20000);
                continue;
            }
            r = err_set(e, -EBUSY, "%s is held by another smbtuned for over %.0f s", path, wait_s);
        } else {
            r = err_set(e, r, "cannot lock %s: %s", path, strerror(-r));
        }
        close(fd);
        return r;
    }
    return fd;
}
