/* util: helpers shared by every module. */
#include "util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

int err_set(struct err *e, int code, const char *fmt, ...)
{
    va_list ap;

    if (e != NULL) {
        va_start(ap, fmt);
        int n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);

        va_end(ap);
        /* A message that does not fit says so at its end; messages put
         * their reason first, so what is cut is a value or a path. */
        if (n >= (int)sizeof(e->msg))
            memcpy(e->msg + sizeof(e->msg) - 4, "...", 4);
    }
    return code;
}

int util_parse_long(const char *s, long long min, long long max, long long *out)
{
    char *end;
    long long v;

    /* strtoll accepts leading blanks and a sign: an outside number must be
     * plain digits, so check the first character ourselves. */
    if (s == NULL || !isdigit((unsigned char)s[0]))
        return -EINVAL;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (*end != '\0')
        return -EINVAL;
    if (errno == ERANGE || v < min || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

int util_parse_size(const char *s, long long min, long long max, long long *out)
{
    char digits[32];
    size_t n;
    long long v, mult = 1;
    int r;

    if (s == NULL)
        return -EINVAL;
    n = strlen(s);
    if (n == 0 || n >= sizeof(digits))
        return -EINVAL;
    memcpy(digits, s, n + 1);
    switch (toupper((unsigned char)digits[n - 1])) {
    case 'K':
        mult = 1024;
        break;
    case 'M':
        mult = 1024 * 1024;
        break;
    case 'G':
        mult = 1024LL * 1024 * 1024;
        break;
    default:
        break;
    }
    if (mult != 1)
        digits[n - 1] = '\0';
    r = util_parse_long(digits, 0, LLONG_MAX / mult, &v);
    if (r < 0)
        return r;
    v *= mult;
    if (v < min || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

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

int util_read_file_err(const char *path, char **buf, size_t *len, struct err *e)
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
            if (cap > UTIL_MAX_FILE) {
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

int util_read_file(const char *path, char **buf, size_t *len)
{
    return util_read_file_err(path, buf, len, NULL);
}

double util_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Where a child's output goes: a caller's fixed buffer (grow false: what
 * does not fit is dropped), or a heap buffer that grows up to max. */
struct sink {
    char *buf;
    size_t used, cap, max;
    bool grow;
    bool cut; /* a growing sink dropped output (at max, or out of memory) */
};

/* Append what is readable on fd to the sink (keeping it NUL-terminated);
 * returns false at end of file. */
static bool drain(int fd, struct sink *k)
{
    char tmp[4096];
    ssize_t got = read(fd, tmp, sizeof(tmp));
    size_t take;

    if (got < 0)
        return errno == EINTR || errno == EAGAIN;
    if (got == 0)
        return false;
    if (k->grow && k->cap - k->used <= (size_t)got && k->cap < k->max) {
        size_t ncap = k->cap ? k->cap : 8192;
        char *nb;

        while (ncap - k->used <= (size_t)got && ncap < k->max)
            ncap *= 2;
        if (ncap > k->max)
            ncap = k->max;
        nb = realloc(k->buf, ncap);
        if (nb != NULL) {
            k->buf = nb;
            k->cap = ncap;
        }
    }
    if (k->buf == NULL || k->cap == 0) {
        k->cut = true;
        return true;
    }
    take = k->cap - 1 - k->used;
    if ((size_t)got < take)
        take = (size_t)got;
    else if ((size_t)got > take)
        k->cut = true;
    memcpy(k->buf + k->used, tmp, take);
    k->used += take;
    k->buf[k->used] = '\0';
    return true;
}

static int run(char *const argv[], double timeout_s, struct sink *ko, struct sink *ke, int *status)
{
    int po[2], pe[2];
    bool open_o = true, open_e = true, killed = false;
    double deadline = util_now() + timeout_s;
    pid_t pid;
    int ws;

    if (pipe2(po, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(pe, O_CLOEXEC) < 0) {
        int r = -errno;

        close(po[0]);
        close(po[1]);
        return r;
    }
    pid = fork();
    if (pid < 0) {
        int r = -errno;

        close(po[0]);
        close(po[1]);
        close(pe[0]);
        close(pe[1]);
        return r;
    }
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);

        if (nul < 0 || dup2(nul, 0) < 0 || dup2(po[1], 1) < 0 || dup2(pe[1], 2) < 0)
            _exit(127);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    while (open_o || open_e) {
        struct pollfd p[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
        double left = deadline - util_now();
        int n;

        if (left <= 0) {
            kill(pid, SIGKILL);
            killed = true;
            break;
        }
        if (!open_o)
            p[0].fd = -1;
        if (!open_e)
            p[1].fd = -1;
        n = poll(p, 2, (int)(left * 1000) + 1);
        if (n < 0 && errno != EINTR)
            break;
        if (open_o && (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            open_o = drain(po[0], ko);
        if (open_e && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
            open_e = drain(pe[0], ke);
    }
    close(po[0]);
    close(pe[0]);
    /* Past the output's end the program may still linger; the deadline
     * covers that too. */
    for (;;) {
        pid_t w = waitpid(pid, &ws, WNOHANG);

        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return -errno;
        if (!killed && util_now() > deadline) {
            kill(pid, SIGKILL);
            killed = true;
        }
        usleep(10000);
    }
    if (killed || !WIFEXITED(ws))
        *status = -1;
    else
        *status = WEXITSTATUS(ws);
    return 0;
}

int util_run(char *const argv[], double timeout_s, char *out, size_t outlen, char *errout,
             size_t errlen, int *status)
{
    struct sink ko = {out, 0, out ? outlen : 0, 0, false, false};
    struct sink ke = {errout, 0, errout ? errlen : 0, 0, false, false};

    if (out && outlen)
        out[0] = '\0';
    if (errout && errlen)
        errout[0] = '\0';
    return run(argv, timeout_s, &ko, &ke, status);
}

int util_run_alloc(char *const argv[], double timeout_s, size_t max, char **out, char **errout,
                   int *status)
{
    struct sink ko = {NULL, 0, 0, max, true, false}, ke = {NULL, 0, 0, max, true, false};
    int r;

    *out = NULL;
    if (errout != NULL)
        *errout = NULL;
    r = run(argv, timeout_s, &ko, &ke, status);
    /* Always hand back strings, "" when the program said nothing. */
    if (r == 0 && ko.buf == NULL)
        ko.buf = calloc(1, 1);
    if (r == 0 && ke.buf == NULL)
        ke.buf = calloc(1, 1);
    if (r == 0 && (ko.buf == NULL || ke.buf == NULL))
        r = -ENOMEM;
    /* Half an answer would be read as a different answer. */
    if (r == 0 && (ko.cut || ke.cut))
        r = -EFBIG;
    if (r < 0 || errout == NULL) {
        free(ke.buf);
        ke.buf = NULL;
    }
    if (r < 0) {
        free(ko.buf);
        return r;
    }
    *out = ko.buf;
    if (errout != NULL)
        *errout = ke.buf;
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

int util_write_atomic(const char *path, const char *data, size_t len, const struct stat *like)
{
    char *dir = NULL, *tmp = NULL;
    const char *base;
    int fd = -1, dfd = -1, r = 0;
    size_t off = 0;

    base = strrchr(path, '/');
    dir = base ? strndup(path, base == path ? 1 : (size_t)(base - path)) : strdup(".");
    base = base ? base + 1 : path;
    if (dir == NULL || asprintf(&tmp, "%s/" UTIL_TMP_PREFIX "%s.XXXXXX", dir, base) < 0) {
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

void util_sweep_tmp(const char *path)
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
    snprintf(prefix, sizeof(prefix), UTIL_TMP_PREFIX "%s.", base);
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

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), 0 when it is not one.
 * s is NUL-terminated, and a NUL fails every continuation test, so no
 * byte past it is read. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if (c == 0xe0)
            lo = 0xa0;
        if (c == 0xed)
            hi = 0x9f;
        return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (c == 0xf0)
            lo = 0x90;
        if (c == 0xf4)
            hi = 0x8f;
        return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80 ? 4 : 0;
    }
    return 0;
}

/* JSON text must be UTF-8, and smb.conf (a path, a value) may hold any
 * bytes. Each byte that is not part of a well-formed sequence becomes
 * U+FFFD, the replacement character, as a decoder would show it: the
 * output stays valid for every consumer (jansson would refuse such a
 * string instead, and \u escapes cannot carry raw bytes), and the
 * exact bytes stay readable in the file itself. */
void util_json_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    fputc('"', f);
    while (*p) {
        size_t n = utf8_len(p);

        if (n == 0) {
            fputs("\\ufffd", f);
            p++;
        } else if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p);
            p++;
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p);
            p++;
        } else {
            fwrite(p, 1, n, f);
            p += n;
        }
    }
    fputc('"', f);
}

int util_mkdir_p(const char *dir)
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
