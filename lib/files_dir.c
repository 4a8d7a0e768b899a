/* files_dir: the directories smbtuned makes, and the check that the state
 * directory is private before anything is written into it. */
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Whether a directory on the way to a private one is safe: only root or
 * we may have made it, and no one else may rename what is in it (not
 * writable by group or others, unless sticky as /tmp is). */
static bool safe_on_the_way(const struct stat *st)
{
    return S_ISDIR(st->st_mode) && (st->st_uid == 0 || st->st_uid == geteuid()) &&
           ((st->st_mode & 022) == 0 || (st->st_mode & S_ISVTX) != 0);
}

/* Who may own what is on the way, in words: "root's", or "root's or uid
 * N's" when we are not root. */
static const char *owners(char *buf, size_t len)
{
    if (geteuid() == 0)
        return "root's";
    snprintf(buf, len, "root's or uid %u's", (unsigned)geteuid());
    return buf;
}

static int refuse_on_the_way(const char *d, const char *dir, const struct stat *st, struct err *e)
{
    char who[48];

    return err_set(e, -EPERM,
                   "the directory %s on the way to %s is owned by uid %u with mode %04o: "
                   "refused, each must be %s and writable by its owner only (or sticky)",
                   d, dir, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777),
                   owners(who, sizeof(who)));
}

/* Every directory above real (a resolved path; not real itself) is
 * safe_on_the_way: else whoever owns or may write one could move the
 * private directory away between our check and our write, and put their
 * own tree in its place. dir is the path as configured, for the words. */
static int check_ancestors(const char *real, const char *dir, struct err *e)
{
    char buf[PATH_MAX];
    struct stat st;
    size_t n = strlen(real);

    if (n >= sizeof(buf))
        return err_set(e, -ENAMETOOLONG, "%s: name too long", real);
    memcpy(buf, real, n + 1);
    for (char *p = strrchr(buf, '/'); p != NULL; p = strrchr(buf, '/')) {
        const char *d;

        *p = '\0';
        d = buf[0] ? buf : "/";
        if (stat(d, &st) < 0)
            return err_set(e, -errno, "%s: %s", d, strerror(errno));
        if (!safe_on_the_way(&st))
            return refuse_on_the_way(d, dir, &st, e);
        if (buf[0] == '\0')
            break;
    }
    return 0;
}

/* Every link on dir's path as configured, itself included: it must be
 * root's or ours (in a sticky directory its owner may still repoint it),
 * and the directory it lies in, with all above that, safe. Components
 * that are no links ("..", directories) are judged where they really are
 * (files_check_way). */
static int check_links(const char *dir, struct err *e)
{
    char buf[PATH_MAX], real[PATH_MAX], where[2 * PATH_MAX + 2], who[48];
    size_t n = strlen(dir);
    struct stat st;

    if (n >= sizeof(buf))
        return err_set(e, -ENAMETOOLONG, "%s: name too long", dir);
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        const char *base;
        char *slash;
        int r;

        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        buf[i] = '\0';
        if (lstat(buf, &st) < 0)
            return err_set(e, -errno, "%s: %s", buf, strerror(errno));
        if (S_ISLNK(st.st_mode)) {
            if (st.st_uid != 0 && st.st_uid != geteuid())
                return err_set(e, -EPERM,
                               "the link %s on the way to %s is uid %u's: refused, only %s are "
                               "followed",
                               buf, dir, (unsigned)st.st_uid, owners(who, sizeof(who)));
            /* where it lies: its directory, resolved, with the link's name */
            slash = strrchr(buf, '/');
            base = slash ? slash + 1 : buf;
            if (slash == buf)
                snprintf(real, sizeof(real), "/");
            else if (slash != NULL) {
                *slash = '\0';
                if (realpath(buf, real) == NULL) {
                    r = -errno;
                    return err_set(e, r, "%s: %s", buf, strerror(-r));
                }
                *slash = '/';
            } else if (realpath(".", real) == NULL) {
                return err_set(e, -errno, ".: %s", strerror(errno));
            }
            if ((size_t)snprintf(where, sizeof(where), "%s/%s", strcmp(real, "/") ? real : "",
                                 base) >= sizeof(where))
                return err_set(e, -ENAMETOOLONG, "%s: name too long", buf);
            r = check_ancestors(where, dir, e);
            if (r < 0)
                return r;
        }
        buf[i] = dir[i];
    }
    return 0;
}

/* The links on dir's path as configured (check_links), and every directory
 * above where it really is. */
int files_check_way(const char *dir, struct err *e)
{
    char real[PATH_MAX];
    int r = check_links(dir, e);

    if (r < 0)
        return r;
    if (realpath(dir, real) == NULL)
        return err_set(e, -errno, "%s: %s", dir, strerror(errno));
    return check_ancestors(real, dir, e);
}

/* Before the missing part of dir is made: the deepest directory of it
 * that exists, and the way to it, pass files_check_way, and it is itself
 * safe_on_the_way, so that nothing is made where the check after would
 * refuse it (root's empty directories left under another user's). */
/* dir into buf (PATH_MAX bytes), to be cut at its slashes. */
static int path_copy(const char *dir, char *buf, struct err *e)
{
    size_t n = strlen(dir);

    if (n >= PATH_MAX)
        return err_set(e, -ENAMETOOLONG, "%s: name too long", dir);
    memcpy(buf, dir, n + 1);
    return 0;
}

static int check_before_making(const char *dir, struct err *e)
{
    char buf[PATH_MAX];
    struct stat st;

    if (path_copy(dir, buf, e) < 0)
        return -ENAMETOOLONG;
    if (stat(buf, &st) == 0)
        return 0; /* nothing to make: judged as it is, after */
    for (char *p = strrchr(buf, '/'); p != NULL; p = strrchr(buf, '/')) {
        const char *d;

        *p = '\0';
        d = buf[0] ? buf : "/";
        if (stat(d, &st) < 0) {
            if (errno == ENOENT && buf[0] != '\0')
                continue;
            return err_set(e, -errno, "%s: %s", d, strerror(errno));
        }
        if (!safe_on_the_way(&st))
            return refuse_on_the_way(d, dir, &st, e);
        return files_check_way(d, e);
    }
    return 0; /* a relative name: made in the working directory */
}

/* What files_mkdir_p meets on the way to dir that stat() calls absent: a
 * link to nothing. mkdir does not follow it (EEXIST), so the step after
 * it, or the open after all, fails. */
static int check_no_dead_link(const char *dir, struct err *e)
{
    char buf[PATH_MAX];
    struct stat st;
    size_t n = strlen(dir);

    if (path_copy(dir, buf, e) < 0)
        return -ENAMETOOLONG;
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        buf[i] = '\0';
        if (lstat(buf, &st) == 0 && S_ISLNK(st.st_mode) && stat(buf, &st) < 0 && errno == ENOENT)
            return err_set(e, -ENOENT,
                           "%s: No such file or directory: the link %s leads to nothing, and "
                           "what it names is not made",
                           dir, buf);
        buf[i] = dir[i];
    }
    return 0;
}

int files_judge_private_dir(const char *dir, struct err *e)
{
    struct stat st;
    int fd, r;

    if (stat(dir, &st) < 0 && errno == ENOENT) {
        r = check_before_making(dir, e);
        if (r == 0)
            r = check_no_dead_link(dir, e);
        return r < 0 ? r : 1;
    }
    fd = files_private_dir(dir, 0, e);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

int files_private_dir(const char *dir, unsigned flags, struct err *e)
{
    bool own = flags & FILES_DIR_OWN;
    struct stat st;
    int fd, r;

    if (flags & FILES_DIR_MAKE) {
        r = check_before_making(dir, e);
        if (r < 0)
            return r;
        r = files_mkdir_p(dir);
        if (r < 0)
            return err_set(e, r, "cannot create %s: %s", dir, strerror(-r));
    }
    /* The configured path may reach the directory through a link the
     * admin made; a directory of ours inside it never does. */
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK | (own ? O_NOFOLLOW : 0));
    if (fd < 0) {
        r = -errno;
        if (own && (r == -ELOOP || r == -ENOTDIR))
            return err_set(e, r, "%s is a symlink or not a directory: refused, left as it is", dir);
        return err_set(e, r, "%s: %s", dir, strerror(-r));
    }
    /* Whoever else may write in it may have put a link where a backup or
     * the state file goes, and root would write through it. */
    if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
        r = err_set(e, -EPERM,
                    "%s is owned by uid %u with mode %04o: refused, it must be uid %u's and "
                    "writable by it only",
                    dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        close(fd);
        return r;
    }
    r = files_check_way(dir, e);
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}
