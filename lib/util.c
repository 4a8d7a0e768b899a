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
#include <time.h>
#include <unistd.h>

int err_set(struct err *e, int code, const char *fmt, ...)
{
    va_list ap;

    if (e != NULL) {
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
        va_end(ap);
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

int util_read_file(const char *path, char **buf, size_t *len)
{
    FILE *f;
    struct stat st;
    char *b = NULL;
    size_t n = 0, cap = 0;
    int r = 0, fd;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        close(fd);
        return r;
    }
    f = fdopen(fd, "r");
    if (f == NULL) {
        r = -errno;
        close(fd);
        return r;
    }
    for (;;) {
        size_t got;

        if (cap - n < 4096) {
            char *nb;

            /* smb.conf files are small; refuse absurd sizes rather than
             * exhaust memory on a wrong path such as a device. */
            if (cap > 64 * 1024 * 1024) {
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
        return r;
    }
    if (b == NULL) {
        b = malloc(1);
        if (b == NULL)
            return -ENOMEM;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

double util_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Append what is readable on fd to buf (keeping it NUL-terminated and
 * dropping what does not fit); returns false at end of file. */
static bool drain(int fd, char *buf, size_t len, size_t *used)
{
    char tmp[4096];
    ssize_t got = read(fd, tmp, sizeof(tmp));

    if (got < 0)
        return errno == EINTR || errno == EAGAIN;
    if (got == 0)
        return false;
    if (buf != NULL && len > 0) {
        size_t room = len - 1 - *used;
        size_t take = (size_t)got < room ? (size_t)got : room;

        memcpy(buf + *used, tmp, take);
        *used += take;
        buf[*used] = '\0';
    }
    return true;
}

int util_run(char *const argv[], double timeout_s, char *out, size_t outlen, char *errout,
             size_t errlen, int *status)
{
    int po[2], pe[2];
    size_t uo = 0, ue = 0;
    bool open_o = true, open_e = true, killed = false;
    double deadline = util_now() + timeout_s;
    pid_t pid;
    int ws;

    if (out && outlen)
        out[0] = '\0';
    if (errout && errlen)
        errout[0] = '\0';
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
            open_o = drain(po[0], out, outlen, &uo);
        if (open_e && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
            open_e = drain(pe[0], errout, errlen, &ue);
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
     * admin's tools) may rely on its owner and mode. */
    if (like != NULL) {
        if (fchmod(fd, like->st_mode & 07777) < 0 ||
            fchown(fd, like->st_uid, like->st_gid) < 0) {
            r = -errno;
            goto out;
        }
    }
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
    if (rename(tmp, path) < 0) {
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

void util_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;

        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
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
