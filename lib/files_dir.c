/* files_dir: the directories smbtuned makes, and the check that the state
 * directory is private before anything is written into it. */
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
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

int files_private_dir(const char *dir, unsigned flags, struct err *e)
{
    bool own = flags & FILES_DIR_OWN;
    struct stat st;
    int fd, r;

    if (flags & FILES_DIR_MAKE) {
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
    return fd;
}
