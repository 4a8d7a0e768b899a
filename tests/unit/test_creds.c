/* Unit tests for lib/creds: the credentials file's text, read as `smbclient
 * -A` reads it (Samba 4.17's cli_credentials_parse_file(); the expected
 * values of test_parse_smbclient are what python3-samba 4.17.12's
 * Credentials.parse_file() gives for the same text), and the checks of the
 * file itself (owner, mode, type, size). Every refusal names the file, and
 * the line when there is one; none shows what the file holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "child.h"
#include "creds.h"

/* Words that the test files use as secrets: no message may show them. */
static void assert_no_secret(const char *msg)
{
    static const char *const secrets[] = {"s3cret", "S3cr3t", "passwd", "hunter2"};

    for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++)
        if (strstr(msg, secrets[i]) != NULL)
            fail_msg("message '%s' shows '%s'", msg, secrets[i]);
}

static void check_creds(const char *text, const char *user, const char *pass, const char *domain)
{
    struct creds c;
    struct err e = {{0}};

    if (creds_parse(text, "f", &c, &e) != 0)
        fail_msg("refused: %s", e.msg);
    assert_string_equal(c.username, user);
    assert_string_equal(c.password, pass);
    assert_string_equal(c.domain, domain);
    creds_clear(&c);
}

static void test_parse(void **state)
{
    char text[1024];
    struct creds c;
    struct err e = {{0}};

    (void)state;
    check_creds("username = alice\npassword = p=ss word \n# comment\n\n  domain=WORK\n", "alice",
                "p=ss word ", "WORK");
    /* CRLF and no final newline. */
    check_creds("username=bob\r\npassword=x", "bob", "x", "");
    /* ';' comments too, blanks anywhere, keys in any case; the blanks
     * after the '=' go, those at the end stay. */
    check_creds("; smbclient -A\n\t\n USERNAME\t=\tcarol \nPassWord = y\nDOMAIN = D\n", "carol ",
                "y", "D");
    /* A password may be empty, and the last line of a key wins. */
    check_creds("username = a\npassword =\n", "a", "", "");
    check_creds("username = a\nusername = b\n", "b", "", "");
    /* The longest value that fits (255 bytes). */
    snprintf(text, sizeof(text), "username = %0255d\n", 0);
    assert_int_equal(creds_parse(text, "f", &c, &e), 0);
    assert_int_equal(strlen(c.username), 255);
}

/* What smbclient -A reads differently from a plain `key = value` file
 * with both ends of the value trimmed (smbtuned's reading until then):
 * each of these failed with it, but the last three, which pin down what
 * stayed the same. */
static void test_parse_smbclient(void **state)
{
    (void)state;
    /* Trailing blanks are the password's: smbclient logs on with them. */
    check_creds("username = daemon\npassword = pw trail \n", "daemon", "pw trail ", "");
    check_creds("username = daemon\npassword = x \t\r\n", "daemon", "x \t", "");
    /* Only spaces and tabs after the '=' are skipped, not other blanks. */
    check_creds("username = a\npassword =\t \vx\n", "a", "\vx", "");
    /* realm is a key of smbclient's: accepted, and unused (no Kerberos). */
    check_creds("username = bob\npassword = x\nrealm = EXAMPLE.COM\n", "bob", "x", "");
    check_creds("REALM=\nusername = bob\n", "bob", "", "");
    /* A key's spaces are ignored wherever they are. */
    check_creds("user name = bob\n Pass Word \t=\t\tx y\n\vDo Main\f= D\n", "bob", "x y", "D");
    /* The username line is read as smbclient's -U: NAME%PASSWORD (from
     * the first '%'), whatever the order of the lines. */
    check_creds("username = bob%se%cret\npassword = other\n", "bob", "se%cret", "");
    check_creds("password = other\nusername = bob%sec\npassword = later\n", "bob", "sec", "");
    check_creds("username = bob%\npassword = other\n", "bob", "", "");
    /* DOMAIN\NAME or DOMAIN/NAME: the first '\' is the separator if there
     * is one; the domain wins over the domain line. */
    check_creds("username = DOM\\bob\ndomain = OTHER\npassword = p\n", "bob", "p", "DOM");
    check_creds("username = DOM/bob%p\n", "bob", "p", "DOM");
    check_creds("username = a/b\\c\n", "c", "", "a/b");
    check_creds("domain = D\nusername = \\bob\n", "bob", "", "");
    /* NAME@REALM stays whole (a principal) and clears the domain; a '\'
     * before the '@' is then part of the name. */
    check_creds("username = bob@EXAMPLE.COM\ndomain = D\n", "bob@EXAMPLE.COM", "", "");
    check_creds("username = DOM\\bob@R.COM%pw\n", "DOM\\bob@R.COM", "pw", "");
    /* The last domain line wins even when empty: no domain. */
    check_creds("username = a\ndomain = D\ndomain =\n", "a", "", "");
    /* A value of blanks only is empty. */
    check_creds("username = a\npassword = x\npassword =  \t \n", "a", "", "");
    /* A CR in a comment is harmless: smbclient ignores the line either
     * way. */
    check_creds("# a\rb = c\nusername = a\n", "a", "", "");
}

static void check_bad_creds(const char *text, const char *want)
{
    struct creds c;
    struct err e = {{0}};

    assert_int_equal(creds_parse(text, "/etc/cred", &c, &e), -EINVAL);
    if (strncmp(e.msg, want, strlen(want)) != 0)
        fail_msg("message '%s' does not start with '%s'", e.msg, want);
    /* A refused file leaves nothing behind in memory. */
    assert_string_equal(c.username, "");
    assert_string_equal(c.password, "");
    assert_string_equal(c.domain, "");
    /* Nothing of the file's text is shown: a malformed line may be mostly
     * password. */
    assert_no_secret(e.msg);
}

/* Each error of the text, with its file:line. */
static void test_parse_errors(void **state)
{
    char text[2048];

    (void)state;
    check_bad_creds("username = a\npassword s3cret\n", "/etc/cred:2: expected 'key = value'");
    check_bad_creds("username = a\nS3cr3t\n", "/etc/cred:2: expected 'key = value'");
    check_bad_creds("username = a\npasswd = s3cret\n", "/etc/cred:2: unknown key");
    /* The key of `password S3cr3t=` is "password S3cr3t". */
    check_bad_creds("username = a\n\npassword S3cr3t=\n", "/etc/cred:3: unknown key");
    check_bad_creds("username = a\npassword S3cr3t = x\n", "/etc/cred:2: unknown key");
    check_bad_creds("username = a\n S3cr3t=password\n", "/etc/cred:2: unknown key");
    /* A comment counts as a line; CRLF lines count once. */
    check_bad_creds("# x\r\n\r\nusername = a\r\n= s3cret\r\n", "/etc/cred:4: unknown key");
    snprintf(text, sizeof(text), "username = a\npassword = S3cr3t%0300d\n", 0);
    check_bad_creds(text, "/etc/cred:2: the value is too long (at most 255 bytes)");
    snprintf(text, sizeof(text), "username = %0256d\n", 0);
    check_bad_creds(text, "/etc/cred:1: the user name is too long (at most 255 bytes)");
    snprintf(text, sizeof(text), "\n\n\ndomain = %0256d\n", 0);
    check_bad_creds(text, "/etc/cred:4: the value is too long");
    /* A line of 1024 bytes or more, whatever it holds. */
    snprintf(text, sizeof(text), "username = a\n#%01023d\n", 0);
    check_bad_creds(text, "/etc/cred:2: line too long");
    snprintf(text, sizeof(text), "username = a\n#%01022d\n", 0);
    {
        struct creds c;
        struct err e = {{0}};

        assert_int_equal(creds_parse(text, "/etc/cred", &c, &e), 0);
    }
    /* No username: the file, without a line. */
    check_bad_creds("password = s3cret\n", "/etc/cred: no 'username");
    check_bad_creds("", "/etc/cred: no 'username");
    check_bad_creds("username =\n", "/etc/cred:1: the user name is empty");
    /* The error stops the parse: what came before is wiped too. */
    check_bad_creds("username = a\npassword = s3cret\ndomain\n", "/etc/cred:3: expected");
}

/* What smbclient skips or cuts without a word, and the username forms
 * that are no logon of a user: refused, naming the line. */
static void test_parse_errors_smbclient(void **state)
{
    char text[2048];

    (void)state;
    /* smbclient ends a line at a CR: it would log on with "ab". */
    check_bad_creds("username = a\npassword = ab\rs3cret\n",
                    "/etc/cred:2: a carriage return inside the line");
    /* A CR-only (old Mac) file is one line to smbclient. */
    check_bad_creds("username = a\rpassword = s3cret\r",
                    "/etc/cred:1: a carriage return inside the line");
    /* smbclient would take "\xEF\xBB\xBFusername" for an unknown key. */
    check_bad_creds("\xEF\xBB\xBFusername = a\npassword = s3cret\n",
                    "/etc/cred:1: the file starts with a UTF-8 byte order mark");
    /* A misspelt key, which smbclient ignores, and one it does not know. */
    check_bad_creds("username = a\npasword = s3cret\n",
                    "/etc/cred:2: unknown key (the keys are username, password, domain, realm)");
    check_bad_creds("username = a\nworkgroup = W\n", "/etc/cred:2: unknown key");
    /* Anonymous or empty names, at the (last) username line. */
    check_bad_creds("password = s3cret\nusername = %\n",
                    "/etc/cred:2: 'username = %' is an anonymous logon");
    check_bad_creds("username = %s3cret\n", "/etc/cred:1: the user name is empty");
    check_bad_creds("username = DOM\\%s3cret\n", "/etc/cred:1: the user name is empty");
    check_bad_creds("username = a\n\nusername = DOM/\npassword = s3cret\n",
                    "/etc/cred:3: the user name is empty");
    /* Each part of the username line has the room of its field. */
    snprintf(text, sizeof(text), "username = a%%s3cret%0300d\n", 0);
    check_bad_creds(text, "/etc/cred:1: the password after the user name's '%' is too long (at "
                          "most 255 bytes)");
    snprintf(text, sizeof(text), "username = %0256d\\a\n", 0);
    check_bad_creds(text, "/etc/cred:1: the user name's domain is too long (at most 255 bytes)");
    snprintf(text, sizeof(text), "username = %0256d@R%%s3cret\n", 0);
    check_bad_creds(text, "/etc/cred:1: the user name is too long");
}

/* A credentials file in a private temporary directory: dir and path. */
struct cred_file {
    char dir[4096];
    char path[4200];
};

static void make_cred(struct cred_file *f, const char *text, size_t len, mode_t mode)
{
    int fd;

    snprintf(f->dir, sizeof(f->dir), "%s/test_creds.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/cred", f->dir);
    fd = open(f->path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static void remove_cred(const struct cred_file *f)
{
    unlink(f->path);
    rmdir(f->dir);
}

/* creds_load and creds_check give the same result and reason. */
static void check_load(const char *path, uid_t owner, int code, const char *want)
{
    struct creds c;
    struct err e = {{0}}, e2 = {{0}};

    assert_int_equal(creds_load(path, owner, &c, &e), code);
    assert_int_equal(creds_check(path, owner, &e2), code);
    if (code == 0) {
        creds_clear(&c);
        return;
    }
    if (strstr(e.msg, want) == NULL)
        fail_msg("message '%s' lacks '%s'", e.msg, want);
    assert_string_equal(e.msg, e2.msg);
    assert_string_equal(c.password, "");
    assert_no_secret(e.msg);
}

static void test_load(void **state)
{
    struct cred_file f;
    struct creds c;
    struct err e = {{0}};
    uid_t me = geteuid();
    const char *text = "username = u\npassword = s3cret\n";

    (void)state;
    make_cred(&f, text, strlen(text), 0600);
    /* The owner the file must have is a parameter so that the test runs
     * as any user; production passes 0 (root). */
    assert_int_equal(creds_load(f.path, me, &c, &e), 0);
    assert_string_equal(c.username, "u");
    assert_string_equal(c.password, "s3cret");
    creds_clear(&c);
    assert_string_equal(c.password, "");
    assert_int_equal(chmod(f.path, 0400), 0);
    check_load(f.path, me, 0, NULL);
    assert_int_equal(chmod(f.path, 0), 0);
    if (me == 0) /* root reads a mode 0 file; others cannot */
        check_load(f.path, me, 0, NULL);
    remove_cred(&f);

    /* A file made for smbclient -A, with a realm and a password ending in
     * a blank: the checking child (the config's check) accepts it too. */
    text = "username = u\r\npassword = s3cret \r\nrealm = EXAMPLE.COM\r\n";
    make_cred(&f, text, strlen(text), 0600);
    assert_int_equal(creds_load(f.path, me, &c, &e), 0);
    assert_string_equal(c.password, "s3cret ");
    creds_clear(&c);
    check_load(f.path, me, 0, NULL);
    remove_cred(&f);
}

/* Each refusal of the file itself, naming it. */
static void test_load_refusals(void **state)
{
    static const mode_t refused[] = {0640, 0604, 0644, 0700, 0660, 04600, 02600, 01600, 0666};
    struct cred_file f;
    char fifo[4300], big[9000], want[4400], way[8400];
    uid_t me = geteuid();
    const char *text = "username = u\npassword = s3cret\n";

    (void)state;
    make_cred(&f, text, strlen(text), 0600);
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        struct stat st;

        assert_int_equal(chmod(f.path, refused[i]), 0);
        /* Not root, chmod may drop the setgid bit: test what it made. */
        assert_int_equal(stat(f.path, &st), 0);
        if ((st.st_mode & 07777) == 0600)
            continue;
        snprintf(want, sizeof(want), "credentials file %s has mode %04o: refused", f.path,
                 (unsigned)(st.st_mode & 07777));
        check_load(f.path, me, -EPERM, want);
    }
    assert_int_equal(chmod(f.path, 0600), 0);
    snprintf(want, sizeof(want), "credentials file %s is owned by uid %u", f.path, (unsigned)me);
    check_load(f.path, me + 1, -EPERM, want);

    snprintf(want, sizeof(want), "credentials file %s is not a regular file", f.dir);
    check_load(f.dir, me, -EINVAL, want);
    /* A FIFO is refused at once, never waited on (with no writer, a
     * blocking open would hang here until the test's timeout). */
    snprintf(fifo, sizeof(fifo), "%s/fifo", f.dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    snprintf(want, sizeof(want), "credentials file %s is not a regular file", fifo);
    check_load(fifo, me, -EINVAL, want);
    unlink(fifo);
    remove_cred(&f);

    snprintf(want, sizeof(want), "credentials file %s: No such file", f.path);
    check_load(f.path, me, -ENOENT, want);

    /* 8191 bytes are the most it reads: a file of 8191 loads, 8192 not
     * (comment lines of 64 bytes). */
    memset(big, '#', sizeof(big));
    memcpy(big, "username = u\n", 13);
    for (size_t i = 13 + 63; i < sizeof(big); i += 64)
        big[i] = '\n';
    make_cred(&f, big, 8191, 0600);
    check_load(f.path, me, 0, NULL);
    remove_cred(&f);
    make_cred(&f, big, 8192, 0600);
    snprintf(want, sizeof(want), "credentials file %s is larger than 8191 bytes", f.path);
    check_load(f.path, me, -EFBIG, want);
    remove_cred(&f);

    make_cred(&f, "username = u\n\0password = s3cret\n", 32, 0600);
    snprintf(want, sizeof(want), "credentials file %s contains a NUL byte", f.path);
    check_load(f.path, me, -EINVAL, want);
    remove_cred(&f);

    /* A kernel interface is never read (/proc/kmsg is root's, 0400 and
     * "regular", and a read drains the kernel log): by name, and through
     * a link, by its filesystem. /proc/self/environ stands for it here:
     * it is the reader's own at any uid. */
    snprintf(want, sizeof(want), "credentials file /proc/self/environ is in /proc or /sys");
    check_load("/proc/self/environ", me, -EINVAL, want);
    make_cred(&f, "", 0, 0600);
    unlink(f.path);
    assert_int_equal(symlink("/proc/self/environ", f.path), 0);
    snprintf(want, sizeof(want), "credentials file %s is in /proc, /sys or another kernel", f.path);
    check_load(f.path, me, -EINVAL, want);
    remove_cred(&f);

    /* In a directory someone else may write (not sticky), the file could
     * be swapped for a link to another file of the owner's: refused, as a
     * state directory there is. */
    make_cred(&f, text, strlen(text), 0600);
    assert_int_equal(chmod(f.dir, 0777), 0);
    snprintf(way, sizeof(way), "the directory %s on the way to %s is owned by uid %u", f.dir,
             f.path, (unsigned)me);
    check_load(f.path, me, -EPERM, way);
    remove_cred(&f);

    /* A text error read from a file names its path and line, also when
     * the checking child found it. */
    text = "username = u\npassword S3cr3t\n";
    make_cred(&f, text, strlen(text), 0600);
    snprintf(want, sizeof(want), "%s:2: expected 'key = value'", f.path);
    check_load(f.path, me, -EINVAL, want);
    remove_cred(&f);
}

/* Answer every permission event still pending: on a kernel where the
 * killed child still waits for one, its open goes on and it ends. */
static void allow_pending(int fan)
{
    char buf[4096] __attribute__((aligned(8)));
    struct pollfd pf = {fan, POLLIN, 0};
    ssize_t n;

    while (poll(&pf, 1, 0) == 1 && (n = read(fan, buf, sizeof(buf))) > 0) {
        for (struct fanotify_event_metadata *m = (struct fanotify_event_metadata *)buf;
             FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n)) {
            struct fanotify_response ok = {.fd = m->fd, .response = FAN_ALLOW};

            if (write(fan, &ok, sizeof(ok)) < 0)
                break;
            if (m->fd >= 0)
                close(m->fd);
        }
    }
}

/* A file whose open never returns, as on a stalled network mount: an
 * fanotify listener (root only) that never answers the open's permission
 * event. creds_check gives up within its deadline, kills its child and
 * says why; it does not hang. */
static void test_check_has_a_deadline(void **state)
{
    struct cred_file f;
    struct err e = {{0}};
    const char *text = "username = u\npassword = s3cret\n";
    double t0;
    int fan;

    (void)state;
    fan = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY);
    if (fan < 0)
        skip(); /* not root, or no fanotify in this kernel */
    make_cred(&f, text, strlen(text), 0600);
    if (fanotify_mark(fan, FAN_MARK_ADD, FAN_OPEN_PERM, AT_FDCWD, f.path) < 0) {
        close(fan);
        remove_cred(&f);
        skip(); /* a file system without permission events */
    }
    t0 = child_now();
    assert_int_equal(creds_check(f.path, geteuid(), &e), -ETIMEDOUT);
    /* bounded: the deadline and the moment given to the kill, not a
     * measure of speed */
    assert_true(child_now() - t0 < CREDS_CHECK_DEADLINE_S + 5);
    assert_non_null(strstr(e.msg, "no answer within"));
    assert_non_null(strstr(e.msg, f.path));
    allow_pending(fan);
    close(fan);
    remove_cred(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_smbclient),
        cmocka_unit_test(test_parse_errors_smbclient),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_load_refusals),
        cmocka_unit_test(test_check_has_a_deadline),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
