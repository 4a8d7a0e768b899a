/* probe: one throughput measurement of an SMB share with libsmbclient. */
#include "probe.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libsmbclient.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "files.h"
#include "kernel.h"
#include "parse.h"
#include "rmtree.h"

/* Every 4 KiB block of the probe file starts with its own offset (mixed
 * with a per-measurement tag), so no two blocks are equal: nothing on the
 * way can compress or deduplicate the data, and the read-back is checked. */
#define BLOCK 4096
#define STAMP_BYTES 8

/* How long a cleanup-only child may take after a timeout. */
#define CLEANUP_DEADLINE_S 15.0

/* Probe files left by killed probes are removed by later probes, within
 * bounds: anyone who can write to the share can plant files that look like
 * ours, and no number of them may stop a measurement. A measurement spends
 * at most LEFTOVER_QUICK_S and LEFTOVER_QUICK_MAX deletions on it, a
 * cleanup-only child (after a timeout, at the end of a cycle) more; both
 * look at no more than LEFTOVER_SCAN_MAX directory entries. */
#define LEFTOVER_SCAN_MAX 10000
#define LEFTOVER_QUICK_MAX 32
#define LEFTOVER_QUICK_S 2
#define LEFTOVER_THOROUGH_MAX 256
#define LEFTOVER_THOROUGH_S 10

/* A random name collides only when someone planted it on purpose after
 * reading ours, or by a 2^-64 chance: a few new names are enough. */
#define NAME_ATTEMPTS 8

static const char *const outcome_names[] = {
    [PROBE_OK] = "ok",
    [PROBE_TIMEOUT] = "timeout",
    [PROBE_CONNECT_REFUSED] = "connect_refused",
    [PROBE_NAME_NOT_FOUND] = "name_not_found",
    [PROBE_AUTH_FAILED] = "auth_failed",
    [PROBE_SHARE_NOT_FOUND] = "share_not_found",
    [PROBE_ACCESS_DENIED] = "access_denied",
    [PROBE_DISK_FULL] = "disk_full",
    [PROBE_ERROR] = "error",
};

const char *probe_outcome_name(enum probe_outcome o)
{
    if ((unsigned)o >= sizeof(outcome_names) / sizeof(outcome_names[0]))
        return "error";
    return outcome_names[o];
}

/* ---- URL and parameters (pure) ---- */

/* Characters that have a meaning of their own in a URL or that would make
 * the path ambiguous; a share or directory name with them is refused
 * rather than guessed at. */
static bool url_char_ok(char ch)
{
    return isprint((unsigned char)ch) && !strchr("?#@\\ \"<>", ch);
}

int probe_check_directory(const char *s, struct err *e)
{
    const char *seg = s;

    if (s[0] == '/')
        return err_set(e, -EINVAL, "directory '%s' must be relative to the share", s);
    while (*seg != '\0') {
        size_t n = strcspn(seg, "/");
        size_t i;

        if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return err_set(e, -EINVAL, "directory '%s' may not contain '.' or '..'", s);
        for (i = 0; i < n; i++) {
            if (!url_char_ok(seg[i]))
                return err_set(e, -EINVAL, "directory '%s' contains '%c', which URLs reserve", s,
                               isprint((unsigned char)seg[i]) ? seg[i] : '?');
        }
        seg += n;
        if (*seg == '/')
            seg++;
    }
    return 0;
}

int probe_check_socket_options(const char *s, struct err *e)
{
    size_t i, n = strlen(s);

    if (n == 0)
        return err_set(e, -EINVAL, "socket options may not be empty (use TCP_NODELAY)");
    for (i = 0; i < n; i++) {
        if (!isprint((unsigned char)s[i]) || s[i] == '\\')
            return err_set(e, -EINVAL, "socket options contain a control character or backslash");
    }
    return 0;
}

/* Append the path segments of src (dropping empty ones) to dst. */
static int join_segments(char *dst, size_t len, const char *src, struct err *e)
{
    while (*src != '\0') {
        size_t n = strcspn(src, "/");
        size_t used = strlen(dst);

        if (n > 0) {
            if (used + (used ? 1 : 0) + n >= len)
                return err_set(e, -ENAMETOOLONG, "path too long");
            if (used)
                dst[used++] = '/';
            memcpy(dst + used, src, n);
            dst[used + n] = '\0';
        }
        src += n;
        if (*src == '/')
            src++;
    }
    return 0;
}

int probe_parse_url(const char *url, struct probe_url *u, struct err *e)
{
    const char *p, *auth_end, *host_end, *share;
    size_t n;

    memset(u, 0, sizeof(*u));
    if (strncasecmp(url, "smb://", 6) != 0)
        return err_set(e, -EINVAL, "URL '%s' does not start with smb://", url);
    p = url + 6;
    auth_end = p + strcspn(p, "/");
    if (memchr(p, '@', (size_t)(auth_end - p)) != NULL)
        return err_set(e, -EINVAL, "URL must not carry a user or password: use a credentials file");
    if (*p == '[') {
        host_end = memchr(p, ']', (size_t)(auth_end - p));
        if (host_end == NULL)
            return err_set(e, -EINVAL, "URL '%s': unclosed '[' in host", url);
        n = (size_t)(host_end - p - 1);
        if (n == 0 || n >= sizeof(u->host))
            return err_set(e, -EINVAL, "URL '%s': bad host", url);
        memcpy(u->host, p + 1, n);
        host_end++;
    } else {
        host_end = p + strcspn(p, ":/");
        n = (size_t)(host_end - p);
        if (n == 0 || n >= sizeof(u->host))
            return err_set(e, -EINVAL, "URL '%s' has no host", url);
        memcpy(u->host, p, n);
    }
    for (n = 0; u->host[n] != '\0'; n++) {
        /* A bracket inside the host ("[[1]") would not survive a round
         * trip through probe_format_url (found by tests/fuzz/fuzz_url). */
        if (!url_char_ok(u->host[n]) || strchr("/[]", u->host[n]) != NULL)
            return err_set(e, -EINVAL, "URL '%s': bad character in host", url);
    }
    if (host_end < auth_end) {
        char port[8];
        long long v;

        if (*host_end != ':' || (size_t)(auth_end - host_end - 1) >= sizeof(port))
            return err_set(e, -EINVAL, "URL '%s': bad port", url);
        memcpy(port, host_end + 1, (size_t)(auth_end - host_end - 1));
        port[auth_end - host_end - 1] = '\0';
        if (parse_long(port, 1, 65535, &v) < 0)
            return err_set(e, -EINVAL, "URL '%s': port '%s' is not a number from 1 to 65535", url,
                           port);
        u->port = (unsigned)v;
    }
    share = auth_end;
    while (*share == '/')
        share++;
    n = strcspn(share, "/");
    if (n == 0)
        return err_set(e, -EINVAL, "URL '%s' names no share (smb://host/share)", url);
    if (n >= sizeof(u->share))
        return err_set(e, -EINVAL, "URL '%s': share name too long", url);
    memcpy(u->share, share, n);
    for (n = 0; u->share[n] != '\0'; n++) {
        if (!url_char_ok(u->share[n]))
            return err_set(e, -EINVAL, "URL '%s': bad character in share name", url);
    }
    p = share + n;
    if (probe_check_directory(*p == '/' ? p + 1 + strspn(p + 1, "/") : p, e) < 0)
        return -EINVAL;
    return join_segments(u->dir, sizeof(u->dir), p, e);
}

int probe_format_url(const struct probe_url *u, const char *extra, char *out, size_t outlen)
{
    char path[2048] = "";
    char port[16] = "";
    bool v6 = strchr(u->host, ':') != NULL;
    int n;

    if (join_segments(path, sizeof(path), u->dir, NULL) < 0 ||
        join_segments(path, sizeof(path), extra ? extra : "", NULL) < 0)
        return -ENAMETOOLONG;
    if (u->port)
        snprintf(port, sizeof(port), ":%u", u->port);
    n = snprintf(out, outlen, "smb://%s%s%s%s/%s%s%s", v6 ? "[" : "", u->host, v6 ? "]" : "", port,
                 u->share, path[0] ? "/" : "", path);
    return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

/* ---- credentials ---- */

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

int probe_parse_credentials(const char *text, const char *path, struct probe_creds *c,
                            struct err *e)
{
    const char *line = text;
    int lineno = 0, r = 0;

    memset(c, 0, sizeof(*c));
    while (*line != '\0' && r == 0) {
        size_t n = strcspn(line, "\n");
        char buf[1024], *key, *val, *eq;
        char *dst = NULL;
        size_t dstlen = 0;

        lineno++;
        if (n >= sizeof(buf)) {
            r = err_set(e, -EINVAL, "%s:%d: line too long", path, lineno);
            break;
        }
        memcpy(buf, line, n);
        buf[n] = '\0';
        line += n + (line[n] == '\n');
        key = trim(buf);
        if (*key == '\0' || *key == '#' || *key == ';') {
            explicit_bzero(buf, sizeof(buf));
            continue;
        }
        eq = strchr(key, '=');
        if (eq == NULL) {
            r = err_set(e, -EINVAL, "%s:%d: expected 'key = value'", path, lineno);
            explicit_bzero(buf, sizeof(buf));
            break;
        }
        *eq = '\0';
        val = trim(eq + 1);
        key = trim(key);
        if (strcasecmp(key, "username") == 0) {
            dst = c->username;
            dstlen = sizeof(c->username);
        } else if (strcasecmp(key, "password") == 0) {
            dst = c->password;
            dstlen = sizeof(c->password);
        } else if (strcasecmp(key, "domain") == 0) {
            dst = c->domain;
            dstlen = sizeof(c->domain);
        } else {
            /* Nothing of the line is shown, not even the key: in
             * `password S3cr3t=` the "key" is the password. */
            r = err_set(e, -EINVAL, "%s:%d: unknown key (the keys are username, password, domain)",
                        path, lineno);
            explicit_bzero(buf, sizeof(buf));
            break;
        }
        if (strlen(val) >= dstlen) {
            r = err_set(e, -EINVAL, "%s:%d: the value is too long (at most %zu bytes)", path,
                        lineno, dstlen - 1);
            explicit_bzero(buf, sizeof(buf));
            break;
        }
        memcpy(dst, val, strlen(val) + 1);
        explicit_bzero(buf, sizeof(buf));
    }
    if (r == 0 && c->username[0] == '\0')
        r = err_set(e, -EINVAL, "%s: no 'username = ...' line", path);
    if (r < 0)
        probe_creds_clear(c);
    return r;
}

void probe_creds_clear(struct probe_creds *c)
{
    explicit_bzero(c, sizeof(*c));
}

int probe_load_credentials(const char *path, uid_t owner_uid, struct probe_creds *c, struct err *e)
{
    char text[8192];
    struct stat st;
    size_t used = 0;
    int fd, r;

    /* Check and read the same open file, so that it cannot be swapped
     * between the check and the read. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return err_set(e, -errno, "credentials file %s: %s", path, strerror(errno));
    if (fstat(fd, &st) < 0) {
        r = err_set(e, -errno, "credentials file %s: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        r = err_set(e, -EINVAL, "credentials file %s is not a regular file", path);
        goto out;
    }
    if (st.st_uid != owner_uid) {
        r = err_set(e, -EPERM, "credentials file %s is owned by uid %u, not %u (root): refused",
                    path, (unsigned)st.st_uid, (unsigned)owner_uid);
        goto out;
    }
    if ((st.st_mode & 07777 & ~(mode_t)0600) != 0) {
        r = err_set(e, -EPERM,
                    "credentials file %s has mode %04o: refused, it must be 0600 or stricter "
                    "(chmod 600 %s)",
                    path, (unsigned)(st.st_mode & 07777), path);
        goto out;
    }
    for (;;) {
        ssize_t got = read(fd, text + used, sizeof(text) - 1 - used);

        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            r = err_set(e, -errno, "credentials file %s: %s", path, strerror(errno));
            goto out;
        }
        if (got == 0)
            break;
        used += (size_t)got;
        if (used == sizeof(text) - 1) {
            r = err_set(e, -EFBIG, "credentials file %s is larger than %zu bytes", path,
                        sizeof(text) - 1);
            goto out;
        }
    }
    text[used] = '\0';
    if (strlen(text) != used) {
        r = err_set(e, -EINVAL, "credentials file %s contains a NUL byte", path);
        goto out;
    }
    r = probe_parse_credentials(text, path, c, e);
out:
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
    struct probe_creds c;
    size_t done = 0;

    if (prctl(PR_SET_DUMPABLE, 0) < 0 || setrlimit(RLIMIT_CORE, &zero) < 0 ||
        child_setup(&spec) < 0)
        _exit(127);
    rep.r = probe_load_credentials(path, owner_uid, &c, &rep.e);
    probe_creds_clear(&c);
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
int probe_check_credentials(const char *path, uid_t owner_uid, struct err *e)
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

/* ---- outcome mapping (pure) ---- */

enum probe_outcome probe_classify_errno(int err, bool connecting)
{
    switch (err) {
    case ECONNREFUSED:
        return PROBE_CONNECT_REFUSED;
    /* libsmbclient reports a failed session setup as EPERM (it does not
     * fall back to anonymous: NoAutoAnonymousLogin is set when we have
     * credentials); NT_STATUS_ACCESS_DENIED maps to EACCES. */
    case EPERM:
        return connecting ? PROBE_AUTH_FAILED : PROBE_ACCESS_DENIED;
    case EACCES:
    case EROFS:
        return PROBE_ACCESS_DENIED;
    /* NT_STATUS_BAD_NETWORK_NAME: the tree connect found no such share. */
    case ENOENT:
    case ENODEV:
        return connecting ? PROBE_SHARE_NOT_FOUND : PROBE_ERROR;
    case ENOSPC:
    case EDQUOT:
        return PROBE_DISK_FULL;
    default:
        return PROBE_ERROR;
    }
}

/* ---- result ---- */

int probe_result_json(const struct probe_result *r, char *out, size_t outlen)
{
    int n = snprintf(out, outlen,
                     "{\"outcome\":\"%s\",\"write_mbps\":%.3f,\"read_mbps\":%.3f,"
                     "\"write_bytes\":%lld,\"read_bytes\":%lld,\"write_s\":%.6f,\"read_s\":%.6f,"
                     "\"client_rcvbuf\":%d,\"client_sndbuf\":%d}",
                     probe_outcome_name(r->outcome), r->write_mbps, r->read_mbps, r->write_bytes,
                     r->read_bytes, r->write_s, r->read_s, r->client_rcvbuf, r->client_sndbuf);

    return n < 0 || (size_t)n >= outlen ? -ENOSPC : 0;
}

void probe_params_default(struct probe_params *p)
{
    memset(p, 0, sizeof(*p));
    p->size = PROBE_DEFAULT_SIZE;
    p->request_size = PROBE_DEFAULT_REQUEST_SIZE;
    p->deadline_s = PROBE_DEFAULT_DEADLINE_S;
    p->socket_options = PROBE_DEFAULT_SOCKET_OPTIONS;
}

/* ---- the child ---- */

/* Shared between parent and child (MAP_SHARED | MAP_ANONYMOUS). The child
 * publishes progress as it goes, so that the parent can report a lower
 * bound when it has to kill the child at the deadline; times are
 * CLOCK_MONOTONIC nanoseconds, 0 = not yet. `done` is stored last, with
 * release order: once the parent sees it, the rest is complete. */
struct probe_shared {
    int64_t write_bytes, read_bytes;
    int64_t write_t0, write_t1, read_t0, read_t1;
    int done;
    int outcome;
    int client_rcvbuf, client_sndbuf;
    char cause[512];
};

struct child {
    const struct probe_params *p;
    struct probe_url url;
    struct probe_shared *sh;
    bool cleanup_only;
    SMBCCTX *ctx;
    char dir_url[4096];
    char host[64]; /* ours, as it appears in probe file names */
    /* Read by the child itself, after fork, so that the parent never
     * holds the password. */
    struct probe_creds creds;
    bool have_creds;
};

static int64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void publish(int64_t *slot, int64_t v)
{
    __atomic_store_n(slot, v, __ATOMIC_RELEASE);
}

static int64_t peek(const int64_t *slot)
{
    return __atomic_load_n(slot, __ATOMIC_ACQUIRE);
}

__attribute__((format(printf, 3, 4))) static enum probe_outcome
fail(struct child *c, enum probe_outcome o, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(c->sh->cause, sizeof(c->sh->cause), fmt, ap);
    va_end(ap);
    return o;
}

static void auth_fn(SMBCCTX *ctx, const char *srv, const char *shr, char *wg, int wglen, char *un,
                    int unlen, char *pw, int pwlen)
{
    const struct probe_creds *cr = smbc_getOptionUserData(ctx);

    (void)srv;
    (void)shr;
    /* Guest: an empty user and password give an anonymous session, which
     * the server maps to its guest account on a guest share. */
    snprintf(un, (size_t)unlen, "%s", cr ? cr->username : "");
    snprintf(pw, (size_t)pwlen, "%s", cr ? cr->password : "");
    if (cr && cr->domain[0])
        snprintf(wg, (size_t)wglen, "%s", cr->domain);
}

/* The TCP socket libsmbclient connected (it does not expose it): the
 * stream socket with a peer among our descriptors. */
static void read_client_buffers(struct child *c)
{
    int fd;

    c->sh->client_rcvbuf = c->sh->client_sndbuf = -1;
    for (fd = 0; fd < 1024; fd++) {
        int dom, type, rcv, snd;
        socklen_t l = sizeof(int);
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);

        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0 ||
            (dom != AF_INET && dom != AF_INET6))
            continue;
        l = sizeof(int);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || type != SOCK_STREAM ||
            getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
            continue;
        l = sizeof(int);
        if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &l) < 0)
            continue;
        l = sizeof(int);
        if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &l) < 0)
            continue;
        c->sh->client_rcvbuf = rcv;
        c->sh->client_sndbuf = snd;
    }
}

/* A probe file of this host: PREFIX<host>-<pid>-<tag>, the tag 16 hex
 * digits (or, from older versions, a decimal counter). Returns its pid, or
 * -1 when the name is not exactly that (another host's, or not ours). */
static pid_t own_probe_pid(const struct child *c, const char *name)
{
    char prefix[sizeof(PROBE_FILE_PREFIX) + sizeof(c->host) + 1];
    const char *tag;
    pid_t pid;

    snprintf(prefix, sizeof(prefix), PROBE_FILE_PREFIX "%s-", c->host);
    if (parse_pid_name(name, prefix, &pid, &tag) < 0 || tag == NULL || strlen(tag) < 1 ||
        strlen(tag) > 16 || strspn(tag, "0123456789abcdef") != strlen(tag))
        return -1;
    return pid;
}

/* Remove this host's probe files whose process is gone (a probe killed at
 * its deadline leaves its file). Files of other hosts and of live probes
 * are left alone. A file still held open by the server for a connection
 * that just died cannot be deleted yet: a thorough pass retries a few
 * times. Bounded in entries read, files deleted and time (see
 * LEFTOVER_SCAN_MAX): what is left waits for the next probe. */
static void remove_leftovers(struct child *c, bool thorough)
{
    char(*names)[256];
    smbc_opendir_fn opendir_fn = smbc_getFunctionOpendir(c->ctx);
    smbc_readdir_fn readdir_fn = smbc_getFunctionReaddir(c->ctx);
    smbc_closedir_fn closedir_fn = smbc_getFunctionClosedir(c->ctx);
    smbc_unlink_fn unlink_fn = smbc_getFunctionUnlink(c->ctx);
    int max = thorough ? LEFTOVER_THOROUGH_MAX : LEFTOVER_QUICK_MAX;
    int attempts = thorough ? 10 : 1, i;
    int64_t stop = mono_ns() + (thorough ? LEFTOVER_THOROUGH_S : LEFTOVER_QUICK_S) * 1000000000LL;

    names = malloc(sizeof(*names) * (size_t)max);
    if (names == NULL)
        return;
    for (i = 0; i < attempts && mono_ns() < stop; i++) {
        int n = 0, busy = 0, k;
        long scanned = 0;
        struct smbc_dirent *d;
        SMBCFILE *dir = opendir_fn(c->ctx, c->dir_url);

        if (dir == NULL)
            break;
        while (n < max && scanned++ < LEFTOVER_SCAN_MAX && mono_ns() < stop &&
               (d = readdir_fn(c->ctx, dir)) != NULL) {
            pid_t pid = own_probe_pid(c, d->name);

            if (pid > 0 && !kernel_pid_alive(pid) && strlen(d->name) < sizeof(names[0]))
                snprintf(names[n++], sizeof(names[0]), "%s", d->name);
        }
        closedir_fn(c->ctx, dir);
        for (k = 0; k < n && mono_ns() < stop; k++) {
            char url[4352];

            snprintf(url, sizeof(url), "%s/%s", c->dir_url, names[k]);
            if (unlink_fn(c->ctx, url) < 0 && errno != ENOENT)
                busy++;
        }
        if (busy == 0)
            break;
        usleep(200 * 1000);
    }
    free(names);
}

/* PREFIX<host>-<pid>-<16 hex digits>: unpredictable, so that nobody can
 * plant the names of future probes (an exclusive create would fail on
 * each), and still carrying the pid for remove_leftovers(). */
static int probe_file_name(const struct child *c, char *out, size_t len)
{
    uint64_t tag;

    if (getrandom(&tag, sizeof(tag), 0) != (ssize_t)sizeof(tag))
        return -errno;
    if ((size_t)snprintf(out, len, "%s%s-%ld-%016llx", PROBE_FILE_PREFIX, c->host, (long)getpid(),
                         (unsigned long long)tag) >= len)
        return -ENAMETOOLONG;
    return 0;
}

/* Create the probe file under a fresh name, exclusively; a name that exists
 * is someone else's and gets another try. */
static enum probe_outcome create_probe_file(struct child *c, char *file_url, size_t len,
                                            SMBCFILE **f)
{
    smbc_open_fn open_fn = smbc_getFunctionOpen(c->ctx);
    char name[256];
    int i, er = EEXIST;

    for (i = 0; i < NAME_ATTEMPTS; i++) {
        int r = probe_file_name(c, name, sizeof(name));

        if (r < 0)
            return fail(c, PROBE_ERROR, "naming the probe file: %s", strerror(-r));
        if ((size_t)snprintf(file_url, len, "%s/%s", c->dir_url, name) >= len)
            return fail(c, PROBE_ERROR, "URL too long");
        *f = open_fn(c->ctx, file_url, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (*f != NULL)
            return PROBE_OK;
        er = errno;
        if (er != EEXIST)
            break;
    }
    file_url[0] = '\0';
    return fail(c, probe_classify_errno(er, false), "creating the probe file: %s%s", strerror(er),
                er == EEXIST ? " (every fresh name was taken)" : "");
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 2685821657736338717ULL;
}

/* Put the stamp of every block that starts inside buf[0..n) (file offset
 * off) in place. */
static void stamp(unsigned char *buf, size_t n, int64_t off, uint64_t tag)
{
    size_t i = (size_t)((BLOCK - off % BLOCK) % BLOCK);

    for (; i + STAMP_BYTES <= n; i += BLOCK) {
        uint64_t v = (uint64_t)(off + (int64_t)i) ^ tag;

        memcpy(buf + i, &v, STAMP_BYTES);
    }
}

static bool stamps_ok(const unsigned char *buf, size_t n, int64_t off, uint64_t tag, int64_t *bad)
{
    size_t i = (size_t)((BLOCK - off % BLOCK) % BLOCK);

    for (; i + STAMP_BYTES <= n; i += BLOCK) {
        uint64_t v = (uint64_t)(off + (int64_t)i) ^ tag, got;

        memcpy(&got, buf + i, STAMP_BYTES);
        if (got != v) {
            *bad = off + (int64_t)i;
            return false;
        }
    }
    return true;
}

/* Write to f (the probe file, open for writing; closed here), read it back. */
static enum probe_outcome transfer(struct child *c, SMBCFILE *f, const char *file_url)
{
    smbc_open_fn open_fn = smbc_getFunctionOpen(c->ctx);
    smbc_write_fn write_fn = smbc_getFunctionWrite(c->ctx);
    smbc_read_fn read_fn = smbc_getFunctionRead(c->ctx);
    smbc_close_fn close_fn = smbc_getFunctionClose(c->ctx);
    const struct probe_params *p = c->p;
    size_t req = (size_t)p->request_size, i;
    uint64_t seed = (uint64_t)mono_ns() ^ ((uint64_t)getpid() << 32), tag;
    unsigned char *buf;
    int64_t off, bad;

    buf = malloc(req);
    if (buf == NULL) {
        close_fn(c->ctx, f);
        return fail(c, PROBE_ERROR, "out of memory for a %zu-byte buffer", req);
    }
    for (i = 0; i + 8 <= req; i += 8) {
        uint64_t v = xorshift(&seed);

        memcpy(buf + i, &v, 8);
    }
    for (; i < req; i++)
        buf[i] = (unsigned char)xorshift(&seed);
    tag = xorshift(&seed);

    publish(&c->sh->write_t0, mono_ns());
    for (off = 0; off < p->size;) {
        size_t n = (size_t)(p->size - off) < req ? (size_t)(p->size - off) : req;
        ssize_t w;

        stamp(buf, n, off, tag);
        w = write_fn(c->ctx, f, buf, n);
        if (w <= 0) {
            int er = w < 0 ? errno : EIO;

            close_fn(c->ctx, f);
            free(buf);
            return fail(c, probe_classify_errno(er, false), "writing at offset %lld: %s",
                        (long long)off, strerror(er));
        }
        off += w;
        publish(&c->sh->write_bytes, off);
    }
    publish(&c->sh->write_t1, mono_ns());
    if (close_fn(c->ctx, f) < 0) {
        int er = errno;

        free(buf);
        return fail(c, probe_classify_errno(er, false), "closing the written file: %s",
                    strerror(er));
    }

    f = open_fn(c->ctx, file_url, O_RDONLY, 0);
    if (f == NULL) {
        int er = errno;

        free(buf);
        return fail(c, probe_classify_errno(er, false), "opening the probe file to read: %s",
                    strerror(er));
    }
    publish(&c->sh->read_t0, mono_ns());
    for (off = 0; off < p->size;) {
        size_t n = (size_t)(p->size - off) < req ? (size_t)(p->size - off) : req;
        ssize_t got = read_fn(c->ctx, f, buf, n);

        if (got <= 0) {
            int er = got < 0 ? errno : 0;

            close_fn(c->ctx, f);
            free(buf);
            if (got == 0)
                return fail(c, PROBE_ERROR, "the file read back ends at %lld of %lld bytes",
                            (long long)off, p->size);
            return fail(c, probe_classify_errno(er, false), "reading at offset %lld: %s",
                        (long long)off, strerror(er));
        }
        if (!stamps_ok(buf, (size_t)got, off, tag, &bad)) {
            close_fn(c->ctx, f);
            free(buf);
            return fail(c, PROBE_ERROR, "the data read back differs at offset %lld",
                        (long long)bad);
        }
        off += got;
        publish(&c->sh->read_bytes, off);
    }
    publish(&c->sh->read_t1, mono_ns());
    close_fn(c->ctx, f);
    free(buf);
    return PROBE_OK;
}

/* Say why the first contact failed. libsmbclient reports a refused logon
 * and a share that refuses the user alike (EACCES), so on that error the
 * IPC$ share, which every logged-on user may connect to, tells them
 * apart. */
static enum probe_outcome connect_failure(struct child *c, int er)
{
    const struct probe_creds *cr = c->have_creds ? &c->creds : NULL;
    const char *who = cr ? cr->username : "guest";
    struct probe_url ipc = c->url;
    char url[4096];
    struct stat st;
    enum probe_outcome o = probe_classify_errno(er, true);

    if (o == PROBE_ACCESS_DENIED || o == PROBE_AUTH_FAILED) {
        snprintf(ipc.share, sizeof(ipc.share), "IPC$");
        ipc.dir[0] = '\0';
        if (probe_format_url(&ipc, NULL, url, sizeof(url)) == 0 &&
            smbc_getFunctionStat(c->ctx)(c->ctx, url, &st) < 0 &&
            (errno == EACCES || errno == EPERM))
            return fail(c, PROBE_AUTH_FAILED, "the server refused the logon as %s (%s)", who,
                        cr ? "wrong user or password?" : "no guest access");
        return fail(c, PROBE_ACCESS_DENIED, "share '%s' refuses %s: %s", c->url.share, who,
                    strerror(er));
    }
    switch (o) {
    case PROBE_CONNECT_REFUSED:
        return fail(c, o, "nothing listens on %s port %u", c->url.host,
                    c->url.port ? c->url.port : 445);
    case PROBE_SHARE_NOT_FOUND:
        return fail(c, o, "the server has no share '%s'", c->url.share);
    default:
        return fail(c, o, "connecting: %s", strerror(er));
    }
}

static enum probe_outcome measure(struct child *c)
{
    smbc_stat_fn stat_fn;
    smbc_unlink_fn unlink_fn;
    const struct probe_params *p = c->p;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    struct probe_url share_only = c->url;
    char share_url[4096], file_url[4352];
    struct stat st;
    enum probe_outcome o;
    SMBCFILE *f = NULL;
    int r;

    /* Resolve the name ourselves first: libsmbclient reports an unknown
     * host with the same errno as an unknown share. Its own resolution is
     * limited to the same resolver (`name resolve order = host`). */
    r = getaddrinfo(c->url.host, NULL, &hints, &ai);
    if (r != 0)
        return fail(c, PROBE_NAME_NOT_FOUND, "cannot resolve host '%s': %s", c->url.host,
                    r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
    freeaddrinfo(ai);

    /* The password enters this process only here, right before the logon,
     * after child_main() made it undumpable. The file was checked by the
     * parent; it is checked again, as it may have changed since. */
    if (p->credentials != NULL) {
        struct err e = {{0}};

        if (probe_load_credentials(p->credentials, 0, &c->creds, &e) < 0)
            return fail(c, PROBE_ERROR, "%s", e.msg);
        c->have_creds = true;
    }

    c->ctx = smbc_new_context();
    if (c->ctx == NULL)
        return fail(c, PROBE_ERROR, "cannot create a libsmbclient context: %s", strerror(errno));
    smbc_setDebug(c->ctx, 0);
    smbc_setOptionDebugToStderr(c->ctx, 1);
    smbc_setOptionUseKerberos(c->ctx, 0);
    smbc_setOptionFallbackAfterKerberos(c->ctx, 0);
    smbc_setOptionUseCCache(c->ctx, 0);
    /* With credentials, a wrong password must fail, not turn into an
     * anonymous session that fails later for another reason. */
    smbc_setOptionNoAutoAnonymousLogin(c->ctx, c->have_creds);
    smbc_setOptionUserData(c->ctx, c->have_creds ? &c->creds : NULL);
    smbc_setFunctionAuthDataWithContext(c->ctx, auth_fn);
    /* The parent's deadline is the limit; libsmbclient's own per-request
     * timeout must not fire first and look like an error. */
    smbc_setTimeout(c->ctx, (int)(p->deadline_s * 1000) + 10000);
    if (smbc_init_context(c->ctx) == NULL)
        return fail(c, PROBE_ERROR, "cannot initialise libsmbclient: %s", strerror(errno));

    /* First contact: connection, session and tree connect, on the share's
     * root, so that a failure here is about the server, the user or the
     * share, and one later is about the directory or the file. */
    share_only.dir[0] = '\0';
    if (probe_format_url(&share_only, NULL, share_url, sizeof(share_url)) < 0)
        return fail(c, PROBE_ERROR, "URL too long");
    stat_fn = smbc_getFunctionStat(c->ctx);
    if (stat_fn(c->ctx, share_url, &st) < 0)
        return connect_failure(c, errno);
    read_client_buffers(c);
    if (c->dir_url[0] && strcmp(c->dir_url, share_url) != 0 &&
        stat_fn(c->ctx, c->dir_url, &st) < 0) {
        int er = errno;

        return fail(c, er == ENOENT ? PROBE_ERROR : probe_classify_errno(er, false),
                    "directory %s: %s", c->dir_url, strerror(er));
    }

    remove_leftovers(c, c->cleanup_only);
    if (c->cleanup_only)
        return PROBE_OK;

    o = create_probe_file(c, file_url, sizeof(file_url), &f);
    if (o != PROBE_OK)
        return o;
    o = transfer(c, f, file_url);
    unlink_fn = smbc_getFunctionUnlink(c->ctx);
    if (unlink_fn(c->ctx, file_url) < 0 && errno != ENOENT && o == PROBE_OK) {
        int er = errno;

        return fail(c, probe_classify_errno(er, false), "deleting the probe file: %s",
                    strerror(er));
    }
    return o;
}

static void own_host(char *out, size_t len)
{
    char h[256] = "";
    size_t i;

    if (gethostname(h, sizeof(h) - 1) < 0 || h[0] == '\0')
        snprintf(h, sizeof(h), "localhost");
    for (i = 0; h[i] && i + 1 < len; i++)
        out[i] = isalnum((unsigned char)h[i]) || h[i] == '.' || h[i] == '_' ? h[i] : '_';
    out[i] = '\0';
}

static void child_main(struct child *c, const char *workdir, int notify_fd, pid_t parent)
{
    struct rlimit no_core = {0, 0};

    /* This process will hold the password: no core dump of it, and no
     * ptrace or /proc/PID/mem by anyone but root (not dumpable). */
    if (prctl(PR_SET_DUMPABLE, 0) < 0 || setrlimit(RLIMIT_CORE, &no_core) < 0)
        _exit(1);
    /* Die with the parent; a clean signal mask and handlers (sd-event
     * blocks some). Nothing of ours may reach the caller's stdout
     * (--json): keep only the notify pipe as fd 3 and stderr for
     * libsmbclient's level-0 log. The private client configuration:
     * libsmbclient reads $HOME/.smb/smb.conf, and only when that fails
     * /etc/samba/smb.conf; an environment of our own also keeps out USER,
     * PASSWD, LIBSMB_PROG and the other variables it would honour. */
    struct child_spec spec = {.parent = parent,
                              .fd_in = -1,
                              .fd_out = -1,
                              .fd_err = CHILD_KEEP,
                              .fd_extra = notify_fd,
                              .home = workdir};

    if (child_setup(&spec) < 0)
        _exit(1);
    /* SIGPIPE would kill us on a reset connection; an error return is
     * what we want. */
    signal(SIGPIPE, SIG_IGN);

    c->sh->outcome = measure(c);
    if (c->ctx != NULL)
        smbc_free_context(c->ctx, 1);
    probe_creds_clear(&c->creds);
    __atomic_store_n(&c->sh->done, 1, __ATOMIC_RELEASE);
    if (write(3, "x", 1) < 0)
        _exit(1);
    _exit(0);
}

/* ---- the parent ---- */

/* Private directories are named smbtuned-probe-<pid of the parent>-XXXXXX;
 * remove those whose parent is gone (killed before probe_finish()). Only
 * ours: rmtree leaves alone a directory of someone else's (in /tmp anyone
 * can plant one with a dead pid in its name) and never follows a link. */
static void remove_stale_workdirs(int basefd)
{
    static const char prefix[] = PROBE_WORKDIR_PREFIX;
    int fd = fcntl(basefd, F_DUPFD_CLOEXEC, 0);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    struct dirent *de;

    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return;
    }
    while ((de = readdir(d)) != NULL) {
        const char *rest;
        pid_t pid;

        if (parse_pid_name(de->d_name, prefix, &pid, &rest) < 0 || rest == NULL ||
            kernel_pid_alive(pid))
            continue;
        rmtree_at(basefd, de->d_name, NULL);
    }
    closedir(d);
}

/* Where the private directories are made, open: <workdir_base>/probe,
 * which we create 0700 and accept only as a directory of ours that nobody
 * else can write (not a symlink); without a workdir_base, $TMPDIR or /tmp.
 * The path goes into out. */
static int open_workdir_base(const struct probe_params *p, char *out, size_t len, struct err *e)
{
    const char *tmp = getenv("TMPDIR");
    struct stat st;
    int fd, r;

    if (p->workdir_base == NULL || p->workdir_base[0] == '\0') {
        if (tmp == NULL || tmp[0] == '\0')
            tmp = "/tmp";
        if ((size_t)snprintf(out, len, "%s", tmp) >= len)
            return err_set(e, -ENAMETOOLONG, "TMPDIR too long");
        fd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
            return err_set(e, -errno, "%s: %s", out, strerror(errno));
        return fd;
    }
    r = files_mkdir_p(p->workdir_base);
    if (r < 0)
        return err_set(e, r, "cannot create %s: %s", p->workdir_base, strerror(-r));
    if ((size_t)snprintf(out, len, "%s/%s", p->workdir_base, PROBE_WORKDIR_SUBDIR) >= len)
        return err_set(e, -ENAMETOOLONG, "work directory name too long");
    if (mkdir(out, 0700) < 0 && errno != EEXIST)
        return err_set(e, -errno, "cannot create %s: %s", out, strerror(errno));
    fd = open(out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        r = -errno;
        if (r == -ELOOP || r == -ENOTDIR)
            return err_set(e, r, "%s is a symlink or not a directory: refused", out);
        return err_set(e, r, "%s: %s", out, strerror(-r));
    }
    if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
        r = err_set(e, -EPERM,
                    "%s is owned by uid %u with mode %04o: refused, it must be uid %u's and "
                    "writable by it only",
                    out, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        close(fd);
        return r;
    }
    return fd;
}

static int write_client_conf(const char *workdir, const char *socket_options, struct err *e)
{
    static const char *const subdirs[] = {".smb",    "lock", "state",  "cache",
                                          "private", "pid",  "ncalrpc"};
    char path[4200];
    FILE *f;
    size_t i;

    for (i = 0; i < sizeof(subdirs) / sizeof(subdirs[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", workdir, subdirs[i]);
        if (mkdir(path, 0700) < 0)
            return err_set(e, -errno, "%s: %s", path, strerror(errno));
    }
    snprintf(path, sizeof(path), "%s/.smb/smb.conf", workdir);
    f = fopen(path, "wx");
    if (f == NULL)
        return err_set(e, -errno, "%s: %s", path, strerror(errno));
    /* Everything the client would otherwise take from a system file:
     * socket options (the point), name resolution limited to the system
     * resolver (no NetBIOS broadcasts), SMB2 or later (large requests),
     * and its state directories under our private directory. */
    fprintf(f,
            "[global]\n"
            "   socket options = %s\n"
            "   name resolve order = host\n"
            "   disable netbios = yes\n"
            "   client min protocol = SMB2\n"
            "   load printers = no\n"
            "   lock directory = %s/lock\n"
            "   state directory = %s/state\n"
            "   cache directory = %s/cache\n"
            "   private dir = %s/private\n"
            "   pid directory = %s/pid\n"
            "   ncalrpc dir = %s/ncalrpc\n",
            socket_options, workdir, workdir, workdir, workdir, workdir, workdir);
    /* fclose flushes the buffered text: a full disk shows here, and the
     * journal must say so (errno is the failed write's). */
    if (fclose(f) != 0)
        return err_set(e, -errno, "%s: write failed: %s", path, strerror(errno));
    return 0;
}

static int start(const struct probe_params *p, bool cleanup_only, struct probe_job *job,
                 struct err *e)
{
    char base[4096];
    const char *so = p->socket_options ? p->socket_options : PROBE_DEFAULT_SOCKET_OPTIONS;
    struct child c;
    int fds[2], r, basefd;
    pid_t parent = getpid();

    memset(job, 0, sizeof(*job));
    job->fd = -1;
    job->pid = -1;
    memset(&c, 0, sizeof(c));
    c.p = p;
    c.cleanup_only = cleanup_only;
    if (p->url == NULL || p->url[0] == '\0')
        return err_set(e, -EINVAL, "no URL to probe");
    r = probe_parse_url(p->url, &c.url, e);
    if (r < 0)
        return r;
    if (p->directory != NULL) {
        r = probe_check_directory(p->directory, e);
        if (r < 0)
            return r;
    }
    if (probe_format_url(&c.url, p->directory, c.dir_url, sizeof(c.dir_url)) < 0)
        return err_set(e, -ENAMETOOLONG, "URL too long");
    r = probe_check_socket_options(so, e);
    if (r < 0)
        return r;
    if (p->size < 1 || p->request_size < 1 || p->request_size > PROBE_MAX_REQUEST_SIZE)
        return err_set(e, -EINVAL, "size must be positive, request size from 1 to %lld",
                       PROBE_MAX_REQUEST_SIZE);
    if (!(p->deadline_s > 0))
        return err_set(e, -EINVAL, "the deadline must be positive");
    own_host(c.host, sizeof(c.host));

    basefd = open_workdir_base(p, base, sizeof(base), e);
    if (basefd < 0)
        return basefd;
    remove_stale_workdirs(basefd);
    close(basefd);
    if ((size_t)snprintf(job->workdir, sizeof(job->workdir), "%s/%s%ld-XXXXXX", base,
                         PROBE_WORKDIR_PREFIX, (long)parent) >= sizeof(job->workdir))
        return err_set(e, -ENAMETOOLONG, "work directory name too long");
    /* mkdir with a random name, exclusive, mode 0700: safe in /tmp too. */
    if (mkdtemp(job->workdir) == NULL) {
        r = err_set(e, -errno, "cannot make a private directory in %s: %s", base, strerror(errno));
        job->workdir[0] = '\0';
        return r;
    }
    r = write_client_conf(job->workdir, so, e);
    if (r < 0)
        goto fail;
    job->shm = mmap(NULL, sizeof(struct probe_shared), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (job->shm == MAP_FAILED) {
        job->shm = NULL;
        r = err_set(e, -errno, "mmap: %s", strerror(errno));
        goto fail;
    }
    c.sh = job->shm;
    if (pipe2(fds, O_CLOEXEC) < 0) {
        r = err_set(e, -errno, "pipe: %s", strerror(errno));
        goto fail;
    }
    job->deadline = child_now() + p->deadline_s;
    job->pid = fork();
    if (job->pid < 0) {
        r = err_set(e, -errno, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        goto fail;
    }
    if (job->pid == 0) {
        close(fds[0]);
        child_main(&c, job->workdir, fds[1], parent);
    }
    close(fds[1]);
    job->fd = fds[0];
    return 0;
fail:
    if (job->shm != NULL)
        munmap(job->shm, sizeof(struct probe_shared));
    job->shm = NULL;
    rmtree_path(job->workdir, NULL);
    return r;
}

int probe_start(const struct probe_params *p, struct probe_job *job, struct err *e)
{
    return start(p, false, job, e);
}

static double span(int64_t t0, int64_t t1)
{
    return t0 > 0 && t1 > t0 ? (double)(t1 - t0) / 1e9 : 0.0;
}

int probe_finish(struct probe_job *job, struct probe_result *r, struct err *e)
{
    struct probe_shared *sh = job->shm;
    bool done, late;
    int64_t end;
    int ws = 0;

    memset(r, 0, sizeof(*r));
    r->client_rcvbuf = r->client_sndbuf = -1;
    if (job->pid <= 0 || sh == NULL)
        return err_set(e, -EINVAL, "no probe running");
    done = __atomic_load_n(&sh->done, __ATOMIC_ACQUIRE);
    late = child_now() >= job->deadline;
    end = mono_ns();
    /* Done or not, the child has nothing left to do for us: SIGKILL is
     * harmless after `done` and the deadline's enforcement before it. */
    kill(job->pid, SIGKILL);
    while (waitpid(job->pid, &ws, 0) < 0 && errno == EINTR)
        ;
    if (done) {
        r->outcome = (enum probe_outcome)sh->outcome;
        snprintf(r->cause, sizeof(r->cause), "%s", sh->cause);
    } else if (late) {
        r->outcome = PROBE_TIMEOUT;
        snprintf(r->cause, sizeof(r->cause), "the deadline passed while %s",
                 peek(&sh->read_t0)    ? "reading"
                 : peek(&sh->write_t0) ? "writing"
                                       : "connecting");
    } else {
        r->outcome = PROBE_ERROR;
        if (WIFSIGNALED(ws) && WTERMSIG(ws) != SIGKILL)
            snprintf(r->cause, sizeof(r->cause), "the probe process died of signal %d",
                     WTERMSIG(ws));
        else
            snprintf(r->cause, sizeof(r->cause), "the probe process ended without a result");
    }
    r->write_bytes = peek(&sh->write_bytes);
    r->read_bytes = peek(&sh->read_bytes);
    r->write_s = span(peek(&sh->write_t0), peek(&sh->write_t1) ? peek(&sh->write_t1) : end);
    r->read_s = span(peek(&sh->read_t0), peek(&sh->read_t1) ? peek(&sh->read_t1) : end);
    if (r->outcome != PROBE_OK && r->outcome != PROBE_TIMEOUT) {
        /* A failed measurement has no rate; its byte counts stay as a
         * record of how far it got. */
        r->write_s = r->read_s = 0;
    }
    r->write_mbps = r->write_s > 0 ? (double)r->write_bytes / r->write_s / 1e6 : 0;
    r->read_mbps = r->read_s > 0 ? (double)r->read_bytes / r->read_s / 1e6 : 0;
    r->client_rcvbuf = sh->client_rcvbuf ? sh->client_rcvbuf : -1;
    r->client_sndbuf = sh->client_sndbuf ? sh->client_sndbuf : -1;

    close(job->fd);
    munmap(sh, sizeof(*sh));
    rmtree_path(job->workdir, NULL);
    job->fd = -1;
    job->shm = NULL;
    job->pid = -1;
    return 0;
}

static int wait_job(struct probe_job *job)
{
    for (;;) {
        struct pollfd pfd = {job->fd, POLLIN, 0};
        double left = job->deadline - child_now();
        int n;

        if (left <= 0)
            return 0;
        n = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

int probe_cleanup(const struct probe_params *p, struct err *e)
{
    struct probe_params q = *p;
    struct probe_result r;
    struct probe_job job;
    int ret;

    q.deadline_s = CLEANUP_DEADLINE_S;
    ret = start(&q, true, &job, e);
    if (ret < 0)
        return ret;
    wait_job(&job);
    ret = probe_finish(&job, &r, e);
    /* A clean-up that never reached the share (a peer gone from the
     * network) removed nothing: the caller must be able to say so. */
    if (ret == 0 && r.outcome != PROBE_OK)
        ret = err_set(e, -EIO,
                      "the share could not be reached (%s): a probe file may be left "
                      "there until a later probe removes it",
                      r.cause);
    return ret;
}

int probe_run(const struct probe_params *p, struct probe_result *r, struct err *e)
{
    struct probe_job job;
    struct err e2;
    int ret;

    ret = probe_start(p, &job, e);
    if (ret < 0)
        return ret;
    wait_job(&job);
    ret = probe_finish(&job, r, e);
    /* The killed child left its file behind: remove it now rather than at
     * the next measurement. Best effort, bounded. */
    if (ret == 0 && r->outcome == PROBE_TIMEOUT)
        probe_cleanup(p, &e2);
    return ret;
}
