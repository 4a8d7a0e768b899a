/* creds: the credentials file reader (see creds.h). */
#include "creds.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"

static char *trim(char *s)
{
    char *end;

    while (isspace((unsigned char)*s))
        s++;
    end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1]))
        *--end = '\0';
    return s;
}

/* Where the value of key goes, and its size; NULL for an unknown key. */
static char *field_of(struct creds *c, const char *key, size_t *len)
{
    if (strcasecmp(key, "username") == 0) {
        *len = sizeof(c->username);
        return c->username;
    }
    if (strcasecmp(key, "password") == 0) {
        *len = sizeof(c->password);
        return c->password;
    }
    if (strcasecmp(key, "domain") == 0) {
        *len = sizeof(c->domain);
        return c->domain;
    }
    return NULL;
}

/* One line (its copy in buf, which the caller wipes). */
static int parse_line(char *buf, const char *path, int lineno, struct creds *c, struct err *e)
{
    char *key = trim(buf), *val, *eq, *dst;
    size_t dstlen = 0;

    if (*key == '\0' || *key == '#' || *key == ';')
        return 0;
    eq = strchr(key, '=');
    if (eq == NULL)
        return err_set(e, -EINVAL, "%s:%d: expected 'key = value'", path, lineno);
    *eq = '\0';
    val = trim(eq + 1);
    key = trim(key);
    dst = field_of(c, key, &dstlen);
    /* Nothing of the line is shown, not even the key: in `password
     * S3cr3t=` the "key" is the password. */
    if (dst == NULL)
        return err_set(e, -EINVAL, "%s:%d: unknown key (the keys are username, password, domain)",
                       path, lineno);
    if (strlen(val) >= dstlen)
        return err_set(e, -EINVAL, "%s:%d: the value is too long (at most %zu bytes)", path, lineno,
                       dstlen - 1);
    memcpy(dst, val, strlen(val) + 1);
    return 0;
}

int creds_parse(const char *text, const char *path, struct creds *c, struct err *e)
{
    const char *line = text;
    int lineno = 0, r = 0;

    memset(c, 0, sizeof(*c));
    while (*line != '\0' && r == 0) {
        size_t n = strcspn(line, "\n");
        char buf[1024];

        lineno++;
        if (n >= sizeof(buf)) {
            r = err_set(e, -EINVAL, "%s:%d: line too long", path, lineno);
            break;
        }
        memcpy(buf, line, n);
        buf[n] = '\0';
        line += n + (line[n] == '\n');
        r = parse_line(buf, path, lineno, c, e);
        explicit_bzero(buf, sizeof(buf));
    }
    if (r == 0 && c->username[0] == '\0')
        r = err_set(e, -EINVAL, "%s: no 'username = ...' line", path);
    if (r < 0)
        creds_clear(c);
    return r;
}

void creds_clear(struct creds *c)
{
    explicit_bzero(c, sizeof(*c));
}

/* The open file fd of path: regular, owner_uid's, 0600 or stricter. */
static int check_file(int fd, const char *path, uid_t owner_uid, struct err *e)
{
    struct stat st;

    if (fstat(fd, &st) < 0)
        return err_set(e, -errno, "credentials file %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return err_set(e, -EINVAL, "credentials file %s is not a regular file", path);
    if (st.st_uid != owner_uid)
        return err_set(e, -EPERM, "credentials file %s is owned by uid %u, not %u (root): refused",
                       path, (unsigned)st.st_uid, (unsigned)owner_uid);
    if ((st.st_mode & 07777 & ~(mode_t)0600) != 0)
        return err_set(e, -EPERM,
                       "credentials file %s has mode %04o: refused, it must be 0600 or stricter "
                       "(chmod 600 %s)",
                       path, (unsigned)(st.st_mode & 07777), path);
    return 0;
}

/* The whole file into text (len bytes, NUL-terminated). */
static int read_all(int fd, const char *path, char *text, size_t len, struct err *e)
{
    size_t used = 0;

    for (;;) {
        ssize_t got = read(fd, text + used, len - 1 - used);

        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return err_set(e, -errno, "credentials file %s: %s", path, strerror(errno));
        if (got == 0)
            break;
        used += (size_t)got;
        if (used == len - 1)
            return err_set(e, -EFBIG, "credentials file %s is larger than %zu bytes", path,
                           len - 1);
    }
    text[used] = '\0';
    if (strlen(text) != used)
        return err_set(e, -EINVAL, "credentials file %s contains a NUL byte", path);
    return 0;
}

int creds_load(const char *path, uid_t owner_uid, struct creds *c, struct err *e)
{
    char text[8192];
    int fd, r;

    memset(c, 0, sizeof(*c));
    /* Check and read the same open file, so that it cannot be swapped
     * between the check and the read. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return err_set(e, -errno, "credentials file %s: %s", path, strerror(errno));
    r = check_file(fd, path, owner_uid, e);
    if (r == 0)
        r = read_all(fd, path, text, sizeof(text), e);
    if (r == 0)
        r = creds_parse(text, path, c, e);
    explicit_bzero(text, sizeof(text));
    close(fd);
    return r;
}

/* What the checking child sends back: the result and the reason, never
 * a byte of the file (the reasons name only the path and the line). */
struct creds_report {
    int r;
    struct err e;
};

/* In the checking child: nothing of it may be dumped or traced (its memory
 * holds the password for a moment), then the check, then the report on
 * fd 3. */
static void __attribute__((noreturn))
check_child(const char *path, uid_t owner_uid, int fd, pid_t parent)
{
    const struct child_spec spec = {
        .parent = parent, .fd_in = -1, .fd_out = -1, .fd_err = CHILD_KEEP, .fd_extra = fd};
    const struct rlimit zero = {0, 0};
    struct creds_report rep = {.r = -EIO};
    struct creds c;
    size_t done = 0;

    if (prctl(PR_SET_DUMPABLE, 0) < 0 || setrlimit(RLIMIT_CORE, &zero) < 0 ||
        child_setup(&spec) < 0)
        _exit(127);
    rep.r = creds_load(path, owner_uid, &c, &rep.e);
    creds_clear(&c);
    while (done < sizeof(rep)) {
        ssize_t w = write(3, (char *)&rep + done, sizeof(rep) - done);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(1);
        done += (size_t)w;
    }
    _exit(0);
}

/* The daemon checks the file on every config load, long before a probe
 * needs it: the parse runs in a short-lived child so that the password
 * never enters the long-lived parent's memory, not even for a moment
 * (wiping it afterwards leaves it in freed stack, in a core dump, in
 * /proc/PID/mem meanwhile). Only the probe's measuring child holds it,
 * right before it logs on. */
int creds_check(const char *path, uid_t owner_uid, struct err *e)
{
    struct creds_report rep;
    size_t got = 0;
    int p[2], status = 0, r;
    pid_t parent = getpid(), pid;

    if (pipe2(p, O_CLOEXEC) < 0)
        return err_set(e, -errno, "credentials file %s: cannot check it: pipe: %s", path,
                       strerror(errno));
    pid = fork();
    if (pid < 0) {
        r = -errno;
        close(p[0]);
        close(p[1]);
        return err_set(e, r, "credentials file %s: cannot check it: fork: %s", path, strerror(-r));
    }
    if (pid == 0)
        check_child(path, owner_uid, p[1], parent);
    close(p[1]);
    while (got < sizeof(rep)) {
        ssize_t n = read(p[0], (char *)&rep + got, sizeof(rep) - got);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(p[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got < sizeof(rep))
        return err_set(e, -EIO,
                       "credentials file %s: the checking child ended without an "
                       "answer (status %d)",
                       path, status);
    /* The child's reason, bounded: its last byte is ours. */
    rep.e.msg[sizeof(rep.e.msg) - 1] = '\0';
    if (rep.r >= 0)
        return 0;
    return err_set(e, rep.r < -4095 ? -EIO : rep.r, "%s", rep.e.msg);
}
