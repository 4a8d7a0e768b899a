/* creds: the credentials file reader (see creds.h). */
#include "creds.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "files.h"

/* The rules are smbclient's: Samba's cli_credentials_parse_file() and
 * cli_credentials_parse_string() (auth/credentials/credentials.c) and the
 * line splitting of file_lines_load() (lib/util/util_file.c), as in Samba
 * 4.17, which Debian 12 ships (unchanged up to 4.24 and master). What
 * smbclient reads, this reads alike; where smbclient silently skips a line
 * that is almost surely a mistake (no '=', an unknown key such as a
 * misspelt `pasword`, which would log on with no password), this refuses
 * the file and says why. What this accepts, it reads as smbclient does,
 * but for one corner case said in set_username(). */

/* Samba's key comparison, strwicmp(), skips isspace() bytes; smbclient runs
 * it on single bytes, where only these ASCII ones are spaces. */
static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r';
}

/* Whether key, the text before the line's first '=', names name (lower
 * case): smbclient ignores ASCII case and every space anywhere in the
 * key, so ` User Name ` is username. No byte beyond ASCII can match (its
 * upper case is never an ASCII letter), and toupper() would depend on the
 * locale: the folding is by hand. */
static bool key_is(const char *key, const char *name)
{
    for (;;) {
        char k;

        while (is_space(*key))
            key++;
        k = (*key >= 'A' && *key <= 'Z') ? (char)(*key - 'A' + 'a') : *key;
        if (k != *name)
            return false;
        if (k == '\0')
            return true;
        key++;
        name++;
    }
}

/* Copy val into a field of size len, or say that it does not fit. */
static int set_field(char *dst, size_t len, const char *val, const char *what, const char *path,
                     int lineno, struct err *e)
{
    size_t n = strlen(val);

    if (n >= len)
        return err_set(e, -EINVAL, "%s:%d: %s is too long (at most %zu bytes)", path, lineno, what,
                       len - 1);
    memcpy(dst, val, n + 1);
    return 0;
}

/* The parse so far: the fields, and the last username line, kept raw,
 * because smbclient interprets it only after the whole file (it may
 * carry a domain and a password that win over the other lines). */
struct parse {
    const char *path;
    struct creds *c;
    char user[1024]; /* a line's rest: it fits */
    int user_line;   /* 0: no username line */
};

/* One line (its copy in buf, which the caller wipes). */
static int parse_line(char *buf, int lineno, struct parse *ps, struct err *e)
{
    struct creds *c = ps->c;
    size_t n = strlen(buf);
    char *key = buf, *eq, *val;

    /* smbclient ends a line at any CR, so CRLF files read as LF ones. */
    while (n > 0 && buf[n - 1] == '\r')
        buf[--n] = '\0';
    /* smbclient does not skip a byte order mark: to it the first key is
     * "\xEF\xBB\xBFusername", unknown, and the line is lost. */
    if (lineno == 1 && strncmp(buf, "\xEF\xBB\xBF", 3) == 0)
        return err_set(e, -EINVAL,
                       "%s:1: the file starts with a UTF-8 byte order mark, which smbclient "
                       "does not skip (it would ignore the line): remove it",
                       ps->path);
    while (is_space(*key))
        key++;
    /* Blank and comment lines: smbclient ignores them too (a comment's
     * "key" starts with '#' or ';', so it never names a key). */
    if (*key == '\0' || *key == '#' || *key == ';')
        return 0;
    /* A CR inside a line ends it for smbclient, which reads what follows
     * as nothing at all: a password can hold no CR, and an old Mac file
     * (CR only) is one line to it. Refused rather than cut. */
    if (strchr(key, '\r') != NULL)
        return err_set(e, -EINVAL,
                       "%s:%d: a carriage return inside the line (smbclient would ignore what "
                       "follows it): expected lines ending in LF or CRLF",
                       ps->path, lineno);
    eq = strchr(key, '=');
    /* smbclient skips a line with no '=' without a word; it is nearly
     * always `password secret`, which would log on with no password. */
    if (eq == NULL)
        return err_set(e, -EINVAL, "%s:%d: expected 'key = value'", ps->path, lineno);
    *eq = '\0';
    /* The value: everything after the '=' but the spaces and tabs right
     * after it. Nothing is cut at its end: smbclient keeps trailing
     * blanks, in a password they are part of it. */
    val = eq + 1;
    while (*val == ' ' || *val == '\t')
        val++;
    /* For each key, the last line wins, as in smbclient. */
    if (key_is(key, "username")) {
        memcpy(ps->user, val, strlen(val) + 1);
        ps->user_line = lineno;
        return 0;
    }
    /* An empty password is one ("password =" logs on with ""). */
    if (key_is(key, "password"))
        return set_field(c->password, sizeof(c->password), val, "the value", ps->path, lineno, e);
    /* An empty domain is none: smbclient then keeps its default, the
     * workgroup of smb.conf, and so does libsmbclient. */
    if (key_is(key, "domain"))
        return set_field(c->domain, sizeof(c->domain), val, "the value", ps->path, lineno, e);
    /* smbclient uses the realm for Kerberos only. The probe logs on with
     * NTLM (probe_child.c turns Kerberos off) and libsmbclient's logon
     * callback has no realm: accepted, so that a file made for smbclient
     * works, and ignored. */
    if (key_is(key, "realm"))
        return 0;
    /* Nothing of the line is shown, not even the key: in `password
     * S3cr3t=` the "key" is the password. */
    return err_set(e, -EINVAL,
                   "%s:%d: unknown key (the keys are username, password, domain, realm)", ps->path,
                   lineno);
}

/* The username line's value, as smbclient reads it (its -U syntax):
 * [DOMAIN\]NAME[%PASSWORD] or NAME@REALM[%PASSWORD]; '/' may stand for
 * '\'. What it holds wins over the password and domain lines. */
static int set_username(struct parse *ps, struct err *e)
{
    struct creds *c = ps->c;
    char *user = ps->user, *pct, *sep;
    int r;

    if (ps->user_line == 0)
        return err_set(e, -EINVAL, "%s: no 'username = ...' line", ps->path);
    /* smbclient's anonymous logon: the probe's own without a file. */
    if (strcmp(user, "%") == 0)
        return err_set(e, -EINVAL,
                       "%s:%d: 'username = %%' is an anonymous logon: leave the credentials "
                       "unset instead",
                       ps->path, ps->user_line);
    /* The first '%' ends the name; the rest, '%'s included, is the
     * password, even empty. */
    pct = strchr(user, '%');
    if (pct != NULL) {
        *pct = '\0';
        r = set_field(c->password, sizeof(c->password), pct + 1,
                      "the password after the user name's '%'", ps->path, ps->user_line, e);
        if (r < 0)
            return r;
    }
    if (strchr(user, '@') != NULL) {
        /* NAME@REALM: smbclient keeps the whole as the user name (a
         * principal, which NTLM sends as is) and clears the domain;
         * libsmbclient reads the name alike. A '\' is then no separator. */
        c->domain[0] = '\0';
    } else {
        /* DOMAIN\NAME, else DOMAIN/NAME: the first '\' wins over any '/'.
         * smbclient also splits at smb.conf's `winbind separator`; that
         * one is left in the name, where libsmbclient, which reads the
         * same smb.conf, splits it alike. "\NAME" gives an empty domain:
         * smbclient sends an empty one, the probe none, that is
         * libsmbclient's default (smb.conf's workgroup). */
        sep = strchr(user, '\\');
        if (sep == NULL)
            sep = strchr(user, '/');
        if (sep != NULL) {
            *sep = '\0';
            r = set_field(c->domain, sizeof(c->domain), user, "the user name's domain", ps->path,
                          ps->user_line, e);
            if (r < 0)
                return r;
            user = sep + 1;
        }
    }
    /* An empty name is an anonymous logon to smbclient: not a mistake we
     * let pass (see above). */
    if (*user == '\0')
        return err_set(e, -EINVAL, "%s:%d: the user name is empty", ps->path, ps->user_line);
    return set_field(c->username, sizeof(c->username), user, "the user name", ps->path,
                     ps->user_line, e);
}

int creds_parse(const char *text, const char *path, struct creds *c, struct err *e)
{
    struct parse ps = {.path = path, .c = c};
    const char *line = text;
    int lineno = 0, r = 0;

    memset(c, 0, sizeof(*c));
    /* Lines end at LF only (a CR is dealt with in the line). */
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
        r = parse_line(buf, lineno, &ps, e);
        explicit_bzero(buf, sizeof(buf));
    }
    if (r == 0)
        r = set_username(&ps, e);
    /* The raw username line may hold a password. */
    explicit_bzero(&ps, sizeof(ps));
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

/* The whole file into text (at most len - 1 bytes, NUL-terminated). A file
 * of exactly len - 1 bytes is whole: only a byte read past them makes it
 * too large. */
static int read_all(int fd, const char *path, char *text, size_t len, struct err *e)
{
    size_t used = 0;
    char more;

    for (;;) {
        bool full = used == len - 1;
        ssize_t got = full ? read(fd, &more, 1) : read(fd, text + used, len - 1 - used);

        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return err_set(e, -errno, "credentials file %s: %s", path, strerror(errno));
        if (got == 0)
            break;
        if (full)
            return err_set(e, -EFBIG, "credentials file %s is larger than %zu bytes", path,
                           len - 1);
        used += (size_t)got;
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
    /* A kernel interface is no credentials file: root's, mode 0400 and
     * "regular", /proc/kmsg passes every check below, and each read of it
     * takes messages out of the kernel log for good. Refused as files_read
     * refuses it: by name before open, by filesystem after (a link). */
    if (files_kernel_path(path))
        return err_set(e, -EINVAL,
                       "credentials file %s is in /proc or /sys: not a credentials file, "
                       "smbtuned does not read it",
                       path);
    /* The owner check below is of whatever the path reaches: whoever may
     * write a directory on the way (or owns a link on it) could put a link
     * there to another file of root's, 0600 too, and root would log on
     * with it. The way is judged as the state directory's is, before
     * anything is opened through it; a missing file is said by open. */
    r = files_check_way(path, e);
    if (r < 0 && r != -ENOENT) {
        struct err why = *e;

        return err_set(e, r, "credentials file %s: %s", path, why.msg);
    }
    /* Check and read the same open file, so that it cannot be swapped
     * between the check and the read. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return err_set(e, -errno, "credentials file %s: %s", path, strerror(errno));
    r = check_file(fd, path, owner_uid, e);
    if (r == 0 && files_kernel_fd(fd))
        r = err_set(e, -EINVAL,
                    "credentials file %s is in /proc, /sys or another kernel filesystem: not a "
                    "credentials file, smbtuned does not read it",
                    path);
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
    double deadline;
    bool late = false;

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
    deadline = child_now() + CREDS_CHECK_DEADLINE_S;
    while (got < sizeof(rep)) {
        struct pollfd pf = {p[0], POLLIN, 0};
        double left = deadline - child_now();
        ssize_t n;

        if (left <= 0 || (n = poll(&pf, 1, (int)(left * 1000) + 1)) == 0) {
            late = true;
            break;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        n = read(p[0], (char *)&rep + got, sizeof(rep) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(p[0]);
    if (late) {
        /* A file system that does not answer (a stalled network mount):
         * the child goes, and it is reaped once its I/O lets SIGKILL act;
         * if that takes longer than a moment, later (child.h). */
        kill(pid, SIGKILL);
        child_reap_within(pid, 1.0, NULL);
        return err_set(e, -ETIMEDOUT,
                       "credentials file %s: its check had no answer within %.0f s (a file "
                       "system that does not answer?)",
                       path, CREDS_CHECK_DEADLINE_S);
    }
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
