/* files: regular files only, read without blocking; an atomic replace that
 * keeps owner, mode and extended attributes (copied by files_meta.c); the
 * sweep of temporary files a killed run left; mkdir -p. */
#include "files.h"
#include "files_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/random.h>
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

int files_read_stat(const char *path, char **buf, size_t *len, struct stat *st, struct err *e)
{
    int fd;

    /* Refused before open: opening some kernel files has effects. Paths
     * that reach them otherwise (a symlink) are caught by fstatfs. */
    if (files_kernel_path(path))
        return err_set(e, -EINVAL,
                       "%s is in /proc or /sys: not a configuration file, smbtuned does not "
                       "read it",
                       path);
    /* O_NONBLOCK: open() of a FIFO without a writer (or of some devices)
     * blocks for ever, before fstat could tell us what it is. */
    fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return err_set(e, -errno, "%s: %s", path, strerror(errno));
    return read_fd(fd, path, buf, len, st, e);
}

int files_read(const char *path, char **buf, size_t *len, struct err *e)
{
    return files_read_stat(path, buf, len, NULL, e);
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
 * no one to keep it: tmp carries the inode numbers of ours and of like's
 * (write_at names it so where it can), and the sweep removes only those
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
        *keep = true;
        return renameat(dfd, tmp, dfd, base) < 0 ? -errno : 0;
    }
    if (h != NULL && h->exchanged != NULL)
        h->exchanged(h->ctx);
    if (fstatat(dfd, tmp, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == like->st_dev &&
        st.st_ino == like->st_ino && (expect == NULL || holds_bytes(src, expect, elen)))
        return 0;
    if (renameat2(dfd, tmp, dfd, base, RENAME_EXCHANGE) < 0) {
        *keep = true; /* the other file is at tmp now: never remove it */
        return -errno;
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
static int open_parent(const char *path, const char **base, const struct files_hooks *h)
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

/* What a temporary name of the exchange's shape records (files.h's
 * FILES_TMP_PREFIX): the only files that may legitimately be under it. */
struct tmp_ids {
    uint64_t ours;   /* N: our new file's inode number */
    uint64_t judged; /* L: the inode number of the file the caller judged */
    uint64_t mtime;  /* M: that file's mtime as the caller judged it (mtime_ns) */
};

/* st's mtime in nanoseconds. Unsigned, so that a time before 1970 wraps
 * the same way when the name is made and when it is checked: the number
 * is only ever compared for equality. */
static uint64_t mtime_ns(const struct stat *st)
{
    return (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
}

static const char tmp_set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/* A temporary name for base: the prefix, base, a dot and six random
 * letters or digits, as mkstemp made them; with ids, the numbers between
 * base and the letters (FILES_TMP_PREFIX's two shapes, sweep_at's). */
static int tmp_name(char *out, size_t size, const char *base, const struct tmp_ids *ids)
{
    unsigned char rnd[6];
    char suf[7];
    int n;

    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return -EIO;
    for (size_t i = 0; i < 6; i++)
        suf[i] = tmp_set[rnd[i] % (sizeof(tmp_set) - 1)];
    suf[6] = '\0';
    if (ids == NULL)
        n = snprintf(out, size, FILES_TMP_PREFIX "%s.%s", base, suf);
    else
        n = snprintf(out, size, FILES_TMP_PREFIX "%s.%" PRIx64 "-%" PRIx64 "-%" PRIx64 ".%s", base,
                     ids->ours, ids->judged, ids->mtime, suf);
    if (n < 0 || (size_t)n >= size || (size_t)n > NAME_MAX)
        return -ENAMETOOLONG;
    return 0;
}

/* Rename from to to in dfd, never over a file already at to: -EEXIST
 * then. A filesystem without RENAME_NOREPLACE (NFS, OpenZFS before 2.2,
 * FUSE before protocol 7.23) gets a link and an unlink, which never
 * replace either. */
static int rename_noreplace(int dfd, const char *from, const char *to)
{
    if (renameat2(dfd, from, dfd, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
        return -errno;
    if (linkat(dfd, from, dfd, to, 0) < 0)
        return -errno;
    if (unlinkat(dfd, from, 0) < 0) {
        int r = -errno;

        /* Two names for our new file would give the target two links
         * once it is swapped in: the new one is taken back, the file
         * keeps from. (Should that fail too, the edit after this one
         * refuses the hard-linked file, saying so: nothing is lost.) */
        unlinkat(dfd, to, 0);
        return r;
    }
    return 0;
}

/* Give our new file (fd, under tmp in dfd) the exchange's name, tmp
 * updated to it: the numbers of the only two files swap_in can leave
 * under it, ours and like's (see sweep_at). Made before anything is
 * written, so that a kill at any later step leaves a name of this shape.
 * When the name cannot be given (too long for NAME_MAX with the numbers,
 * or neither a rename without replacing nor a link works here), the
 * random name stays: the write goes on as it did before names carried
 * numbers, and a sweep after a kill between the two exchanges would
 * remove whatever the first one left there, as it did then. */
static int name_by_inodes(int dfd, int fd, char *tmp, size_t size, const char *base,
                          const struct stat *like)
{
    char named[NAME_MAX + 1];
    struct tmp_ids ids;
    struct stat st;
    int r;

    if (fstat(fd, &st) < 0)
        return -errno;
    ids.ours = st.st_ino;
    ids.judged = like->st_ino;
    ids.mtime = mtime_ns(like);
    for (int tries = 0; tries <= 100; tries++) {
        r = tmp_name(named, sizeof(named), base, &ids);
        if (r == -ENAMETOOLONG)
            return 0;
        if (r < 0)
            return r;
        r = rename_noreplace(dfd, tmp, named);
        if (r == 0) {
            snprintf(tmp, size, "%s", named);
            return 0;
        }
        /* -EEXIST: a file has that name already (the six letters
         * differ at each try). Any other failure is no reason to fail
         * the write: see above. */
        if (r != -EEXIST)
            return 0;
    }
    return 0;
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
        r = tmp_name(tmp, sizeof(tmp), base, NULL);
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
    if (like != NULL && (r = name_by_inodes(dfd, fd, tmp, sizeof(tmp), base, like)) < 0)
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
    int dfd = open_parent(path, &base, h), r;

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

/* A character of tmp_set's: a letter or a digit, in any locale. */
static bool tmp_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A digit of the numbers' "%" PRIx64: lowercase. */
static bool hex_digit(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Whether name (len bytes) ends the way a name of the exchange's shape
 * does, ".N-L-M.XXXXXX" (tmp_name with ids): then the numbers into *ids
 * and the length of what comes before that tail (the prefix and the
 * target's name); -1 otherwise. Read from the end: a target's name may
 * hold any character, the tail only lowercase hex digits, '-' and '.'. */
static ssize_t ids_tail(const char *name, size_t len, struct tmp_ids *ids)
{
    uint64_t *field[3] = {&ids->ours, &ids->judged, &ids->mtime};
    size_t i;

    if (len < 7 || name[len - 7] != '.')
        return -1;
    for (i = len - 6; i < len; i++)
        if (!tmp_char(name[i]))
            return -1;
    i = len - 7;
    for (int f = 2; f >= 0; f--) {
        size_t end = i;
        uint64_t v = 0;

        /* at most 16 digits: a 17th is left for the separator check */
        while (i > 0 && end - i < 16 && hex_digit(name[i - 1]))
            i--;
        if (i == end || i == 0 || name[i - 1] != (f > 0 ? '-' : '.'))
            return -1;
        for (size_t k = i; k < end; k++)
            v = v << 4 | (uint64_t)(name[k] <= '9' ? name[k] - '0' : name[k] - 'a' + 10);
        *field[f] = v;
        i--;
    }
    return (ssize_t)i;
}

/* Only next to the file being written, relative to its directory fd,
 * only regular files of our own uid, never following a link: a file of
 * that shape that someone else made (in a 1777 directory, say) is theirs.
 * base NULL: the temporary files of any target in the directory.
 *
 * A random name alone (`.smbtuned-BASE.XXXXXX`) only ever held our new
 * file: a kill before its rename or exchange left it (or an older
 * smbtuned's, whose names were all of that shape). It goes.
 *
 * A name with numbers (`.smbtuned-BASE.N-L-M.XXXXXX`) was under an
 * exchange, which can leave there any file someone renamed over BASE just
 * before it (swap_in). It goes only when it holds one of the two files
 * the name records: ours (inode N), or the one the caller judged and we
 * replaced (inode L, with the mtime M it had then; another mtime is an
 * edit made in place after the judgment, which the exchange back would
 * have kept). Any other file was alive, in the same directory, at the
 * same time as both of those (it came in by a rename over BASE before
 * the exchange, while ours was under the temporary name and the judged
 * one open in our hands): it cannot share their inode numbers, it is
 * someone else's (an admin's edit), and it stays: kept (may be NULL) is
 * told its name. A name of that shape is read as that shape even
 * where it could be a random name of a target whose own name ends in
 * ".N-L-M" (x.1-2-3): such a leftover is never removed as a random name,
 * only as its numbers allow, so that no target's sweep removes another
 * target's exchanged file by reading its name the other way. */
static void sweep_at(int dfd, const char *base, files_kept_fn kept, void *ctx)
{
    char stem[NAME_MAX + 16];
    struct dirent *de;
    size_t slen;
    DIR *d;
    int fd;

    if ((size_t)snprintf(stem, sizeof(stem), FILES_TMP_PREFIX "%s", base ? base : "") >=
        sizeof(stem))
        return;
    slen = strlen(stem);
    fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return;
    }
    while ((de = readdir(d)) != NULL) {
        struct tmp_ids ids;
        struct stat st;
        size_t len = strlen(de->d_name);
        ssize_t at;

        if (strncmp(de->d_name, stem, slen) != 0)
            continue;
        /* Only names of exactly our shapes: the stem (any target's: the
         * prefix and a name) then the numbers' tail, or a '.' and six
         * characters. */
        at = ids_tail(de->d_name, len, &ids);
        if (at >= 0 ? (base ? (size_t)at != slen : (size_t)at <= slen)
                    : (base ? len != slen + 7 || de->d_name[slen] != '.'
                            : len < slen + 8 || de->d_name[len - 7] != '.'))
            continue;
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        if (at >= 0 && st.st_ino != ids.ours &&
            (st.st_ino != ids.judged || mtime_ns(&st) != ids.mtime)) {
            if (kept != NULL)
                kept(ctx, de->d_name);
            continue;
        }
        unlinkat(dfd, de->d_name, 0);
    }
    closedir(d);
}

void files_target_sweep(struct files_target *t, files_kept_fn kept, void *ctx)
{
    if (t->dfd >= 0)
        sweep_at(t->dfd, t->base, kept, ctx);
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

void files_sweep_tmp_dir(const char *dir)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

    if (dfd < 0)
        return;
    sweep_at(dfd, NULL, NULL, NULL);
    close(dfd);
}

void files_sweep_tmp(const char *path)
{
    const char *base;
    int dfd = open_parent(path, &base, NULL);

    if (dfd < 0)
        return;
    sweep_at(dfd, base, NULL, NULL);
    close(dfd);
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
