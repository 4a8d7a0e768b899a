/* files: regular files only, read without blocking; an atomic replace that
 * keeps owner, mode and extended attributes; the sweep of temporary files
 * a killed run left; mkdir -p. */
#include "files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
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

int files_read(const char *path, char **buf, size_t *len, struct err *e)
{
    FILE *f;
    struct stat st;
    char *b = NULL;
    size_t n = 0, cap = 0;
    int r = 0, fd;

    /* O_NONBLOCK: open() of a FIFO without a writer (or of some devices)
     * blocks for ever, before fstat could tell us what it is. Once we
     * know it is a regular file the flag changes nothing, but clear it
     * anyway so that reads mean what they say. */
    fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return err_set(e, -errno, "%s: %s", path, strerror(errno));
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
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
        r = -errno;
        close(fd);
        return err_set(e, r, "%s: %s", path, strerror(-r));
    }
    f = fdopen(fd, "r");
    if (f == NULL) {
        r = -errno;
        close(fd);
        return err_set(e, r, "%s: %s", path, strerror(-r));
    }
    for (;;) {
        size_t got;

        if (cap - n < 4096) {
            char *nb;

            /* smb.conf files are small; refuse absurd sizes rather than
             * exhaust memory on a wrong path. */
            if (cap > FILES_MAX_SIZE) {
                r = -EFBIG;
                break;
            }
            cap = cap ? cap * 2 : 8192;
            nb = realloc(b, cap + 1);
            if (nb == NULL) {
                r = -ENOMEM;
                break;
            }
            b = nb;
        }
        got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f))
                r = -EIO;
            break;
        }
    }
    fclose(f);
    if (r < 0) {
        free(b);
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
    return 0;
}

/* The names of f's extended attributes, as flistxattr gives them (NUL
 * after each); *n 0 and *names NULL when it has none or the filesystem
 * has none (ENOTSUP). */
static int list_xattrs(int fd, char **names, size_t *n)
{
    *names = NULL;
    *n = 0;
    for (;;) {
        ssize_t want = flistxattr(fd, NULL, 0), got;
        char *b;

        if (want < 0)
            return errno == ENOTSUP ? 0 : -errno;
        if (want == 0)
            return 0;
        b = malloc((size_t)want);
        if (b == NULL)
            return -ENOMEM;
        got = flistxattr(fd, b, (size_t)want);
        if (got >= 0) {
            *names = b;
            *n = (size_t)got;
            return 0;
        }
        free(b);
        if (errno != ERANGE) /* ERANGE: one was added meanwhile, ask again */
            return -errno;
    }
}

static bool has_name(const char *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i += strlen(names + i) + 1)
        if (strcmp(names + i, name) == 0)
            return true;
    return false;
}

/* Give dst exactly src's extended attributes: user.*, security.* (SELinux
 * label, capabilities), trusted.* and the POSIX ACLs, which are the
 * system.posix_acl_access/default attributes. dst's own ones go first: a
 * new file inherits the directory's default ACL, which the old file may
 * not have had. */
static int copy_xattrs(int src, int dst)
{
    char *names = NULL, *mine = NULL, *val = NULL;
    size_t n, nmine, cap = 0;
    int r;

    r = list_xattrs(src, &names, &n);
    if (r == 0)
        r = list_xattrs(dst, &mine, &nmine);
    for (size_t i = 0; r == 0 && i < nmine; i += strlen(mine + i) + 1)
        if (!has_name(names, n, mine + i) && fremovexattr(dst, mine + i) < 0 && errno != ENODATA)
            r = -errno;
    for (size_t i = 0; r == 0 && i < n; i += strlen(names + i) + 1) {
        const char *name = names + i;
        ssize_t len = fgetxattr(src, name, NULL, 0);

        if (len < 0) {
            r = errno == ENODATA ? 0 : -errno; /* removed meanwhile */
            continue;
        }
        if ((size_t)len > cap) {
            char *nv = realloc(val, (size_t)len);

            if (nv == NULL) {
                r = -ENOMEM;
                break;
            }
            val = nv;
            cap = (size_t)len;
        }
        len = fgetxattr(src, name, val, cap);
        if (len < 0) {
            r = -errno; /* ERANGE: it grew meanwhile; fail rather than guess */
            break;
        }
        if (fsetxattr(dst, name, val, (size_t)len, 0) < 0)
            r = -errno;
    }
    free(val);
    free(mine);
    free(names);
    return r;
}

/* Make fd the file like describes in all but its bytes: owner, every mode
 * bit, every extended attribute of the file at path now. */
static int copy_meta(int fd, const char *path, const struct stat *like)
{
    struct stat st;
    int src, r;

    src = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (src < 0)
        return -errno;
    if (fstat(src, &st) < 0) {
        r = -errno;
        close(src);
        return r;
    }
    /* Not the file the caller judged: someone replaced it meanwhile. */
    if (st.st_dev != like->st_dev || st.st_ino != like->st_ino) {
        close(src);
        return -ESTALE;
    }
    /* fchown first: a change of owner clears the setuid and setgid bits
     * (and the security.capability attribute), so the mode and the
     * attributes come after it. The mode last: fsetxattr of an access ACL
     * rewrites the group bits, fchmod makes every bit the old file's. */
    r = 0;
    if (fchown(fd, like->st_uid, like->st_gid) < 0)
        r = -errno;
    if (r == 0)
        r = copy_xattrs(src, fd);
    if (r == 0 && fchmod(fd, like->st_mode & 07777) < 0)
        r = -errno;
    close(src);
    return r;
}

/* Put tmp in place of path, but only while path is still the file `like`
 * describes: an admin's editor may rename its own file over path at any
 * moment up to ours, and a plain rename would throw that file away. The
 * two names are exchanged atomically, the one that came out is checked, and
 * exchanged back when it is not the file the caller judged (-ESTALE). On
 * return tmp names the old file, or ours (both for the caller to remove),
 * unless *keep is set: then it names nothing, or a file that is not ours.
 * A filesystem without RENAME_EXCHANGE gets the plain rename. */
static int swap_in(const char *tmp, const char *path, const struct stat *like, bool *keep)
{
    struct stat st;

    *keep = false;
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) < 0) {
        if (errno != EINVAL && errno != ENOSYS)
            return -errno;
        *keep = true;
        return rename(tmp, path) < 0 ? -errno : 0;
    }
    if (lstat(tmp, &st) == 0 && st.st_dev == like->st_dev && st.st_ino == like->st_ino)
        return 0;
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) < 0) {
        *keep = true; /* the other file is at tmp now: never remove it */
        return -errno;
    }
    return -ESTALE;
}

int files_write_atomic(const char *path, const char *data, size_t len, const struct stat *like)
{
    char *dir = NULL, *tmp = NULL;
    const char *base;
    int fd = -1, dfd = -1, r = 0;
    size_t off = 0;

    base = strrchr(path, '/');
    dir = base ? strndup(path, base == path ? 1 : (size_t)(base - path)) : strdup(".");
    base = base ? base + 1 : path;
    if (dir == NULL || asprintf(&tmp, "%s/" FILES_TMP_PREFIX "%s.XXXXXX", dir, base) < 0) {
        tmp = NULL;
        r = -ENOMEM;
        goto out;
    }
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        r = -errno;
        free(tmp);
        tmp = NULL;
        goto out;
    }
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
    if (like != NULL && (r = copy_meta(fd, path, like)) < 0)
        goto out;
    /* Data on disk before the name points at it, so that a crash leaves
     * the old file or the new one, never an empty one. */
    if (fsync(fd) < 0) {
        r = -errno;
        goto out;
    }
    if (close(fd) < 0) {
        fd = -1;
        r = -errno;
        goto out;
    }
    fd = -1;
    if (like != NULL) {
        bool keep;

        r = swap_in(tmp, path, like, &keep);
        if (keep) {
            free(tmp);
            tmp = NULL;
        }
        if (r < 0)
            goto out;
        if (tmp != NULL)
            unlink(tmp); /* the old file */
    } else if (rename(tmp, path) < 0) {
        r = -errno;
        goto out;
    }
    free(tmp);
    tmp = NULL;
    /* Make the rename itself durable. */
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) < 0)
        r = -errno;
out:
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    if (tmp != NULL) {
        unlink(tmp);
        free(tmp);
    }
    free(dir);
    return r;
}

void files_sweep_tmp(const char *path)
{
    char *dir;
    const char *base = strrchr(path, '/');
    DIR *d;
    struct dirent *de;
    size_t plen;
    char prefix[512];

    dir = base ? strndup(path, base == path ? 1 : (size_t)(base - path)) : strdup(".");
    base = base ? base + 1 : path;
    if (dir == NULL)
        return;
    snprintf(prefix, sizeof(prefix), FILES_TMP_PREFIX "%s.", base);
    plen = strlen(prefix);
    d = opendir(dir);
    if (d == NULL) {
        free(dir);
        return;
    }
    while ((de = readdir(d)) != NULL) {
        /* Only names of exactly our shape: prefix plus mkstemp's six. */
        if (strncmp(de->d_name, prefix, plen) == 0 && strlen(de->d_name) == plen + 6)
            unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
    free(dir);
}

int files_mkdir_p(const char *dir)
{
    char buf[PATH_MAX];
    size_t n = strlen(dir);

    if (n == 0 || n >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, dir, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    /* the last one is ours: private */
    if (mkdir(buf, 0700) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}
