/* files_meta: a replacement file made the old one in all but its bytes:
 * owner, every mode bit and every extended attribute (POSIX ACLs, SELinux
 * labels, capabilities), in the order the kernel needs. */
#include "files_int.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

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

int files_copy_meta(int fd, int src, const struct stat *like)
{
    struct stat st;

    if (fstat(src, &st) < 0)
        return -errno;
    /* Not the file the caller judged: someone replaced it meanwhile. */
    if (st.st_dev != like->st_dev || st.st_ino != like->st_ino)
        return -ESTALE;
    /* The owner and mode it has now, as the attributes are read now: a
     * config tool's chmod or chown since the caller judged the file is
     * kept, not undone. fchown first: a change of owner clears the setuid
     * and setgid bits (and the security.capability attribute), so the
     * mode and the attributes come after it. The mode last: fsetxattr of
     * an access ACL rewrites the group bits, fchmod makes every bit the
     * old file's. */
    if (fchown(fd, st.st_uid, st.st_gid) < 0)
        return -errno;
    {
        int r = copy_xattrs(src, fd);

        if (r < 0)
            return r;
    }
    if (fchmod(fd, st.st_mode & 07777) < 0)
        return -errno;
    return 0;
}
