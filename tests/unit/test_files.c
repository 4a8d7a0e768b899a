/* Unit tests for lib/files: reads that cannot hang, a replace that keeps
 * the file's metadata, the sweep of our temporary files, mkdir -p, the
 * private directory check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "files.h"

/* A hang must fail the test, not stall CI: SIGALRM ends the process. */
#define HANG_S 20

/* Short enough that path_in holds it with any name of NAME_LEN. */
static char dir[32];

/* Room for the test's names, the longest being a temporary name with
 * four 16-digit numbers (the compiler checks that path_in holds it). */
#define NAME_LEN 96

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/test_files.XXXXXX");
    return mkdtemp(dir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static char *path_in(const char *name)
{
    static char p[128];

    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return p;
}

static void test_read_fifo_refused(void **state)
{
    struct err e = {{0}};
    char *buf = NULL, *p = path_in("fifo");
    size_t len;

    (void)state;
    assert_int_equal(mkfifo(p, 0600), 0);
    alarm(HANG_S);
    assert_int_equal(files_read(p, &buf, &len, &e), -EINVAL);
    alarm(0);
    assert_non_null(strstr(e.msg, p));
    assert_non_null(strstr(e.msg, "is a FIFO"));
    assert_int_equal(files_read(p, &buf, &len, NULL), -EINVAL);
    assert_int_equal(files_read("/dev/null", &buf, &len, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "character device"));
    assert_int_equal(files_read(dir, &buf, &len, &e), -EISDIR);
    assert_null(buf);
}

/* Whether this filesystem keeps user xattrs (tmpfs and ext4 do). */
static bool xattrs_work(const char *p)
{
    return setxattr(p, "user.probe", "1", 1, 0) == 0;
}

/* A new file p holding "old\n", of the given mode. */
static void make_old(const char *p, mode_t mode)
{
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, mode);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, "old\n", 4), 4);
    close(fd);
}

static void test_write_atomic_keeps_metadata(void **state)
{
    char *p = path_in("conf"), *buf, val[16];
    struct stat st, st2;
    struct err e;
    size_t len;
    ssize_t n;

    (void)state;
    make_old(p, 0600);
    /* setuid and setgid survive only when the owner is set first */
    assert_int_equal(chmod(p, 06640), 0);
    if (!xattrs_work(p))
        skip();
    assert_int_equal(setxattr(p, "user.note", "kept", 4, 0), 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(files_write_atomic(p, "new\n", 4, &st), 0);
    assert_int_equal(stat(p, &st2), 0);
    assert_int_equal(st2.st_mode, st.st_mode);
    assert_int_equal(st2.st_uid, st.st_uid);
    assert_int_equal(st2.st_gid, st.st_gid);
    n = getxattr(p, "user.note", val, sizeof(val));
    assert_int_equal(n, 4);
    assert_memory_equal(val, "kept", 4);
    assert_int_equal(getxattr(p, "user.probe", val, sizeof(val)), 1);
    assert_int_equal(files_read(p, &buf, &len, &e), 0);
    assert_string_equal(buf, "new\n");
    free(buf);

    /* not the file the caller judged: nothing written */
    assert_int_equal(files_write_atomic(p, "newer\n", 6, &st), -ESTALE);
    assert_int_equal(files_read(p, &buf, &len, &e), 0);
    assert_string_equal(buf, "new\n");
    free(buf);
}

/* An owner and mode set in place after the caller judged the file (a
 * config tool's chmod and chown while smbtuned edits) are the ones the
 * new file gets: the judged stat names the file, not its metadata. */
static void test_write_atomic_keeps_metadata_set_since(void **state)
{
    char *p = path_in("conf2");
    struct stat st, st2;

    (void)state;
    make_old(p, 0644);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(chmod(p, 0640), 0);
    if (geteuid() == 0)
        assert_int_equal(chown(p, 1234, 4321), 0);
    assert_int_equal(files_write_atomic(p, "new\n", 4, &st), 0);
    assert_int_equal(stat(p, &st2), 0);
    assert_int_equal(st2.st_mode & 07777, 0640);
    if (geteuid() == 0) {
        assert_int_equal(st2.st_uid, 1234);
        assert_int_equal(st2.st_gid, 4321);
    }
}

/* Entries of d, as a count. */
static int count_in(const char *d)
{
    DIR *dd = opendir(d);
    struct dirent *de;
    int n = 0;

    assert_non_null(dd);
    while ((de = readdir(dd)) != NULL)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(dd);
    return n;
}

static int entries(void)
{
    return count_in(dir);
}

static void touch(const char *name)
{
    int fd = open(path_in(name), O_WRONLY | O_CREAT | O_EXCL, 0600);

    assert_true(fd >= 0);
    close(fd);
}

static void test_sweep_only_ours(void **state)
{
    struct stat st;

    (void)state;
    touch("smb.conf");
    /* what a run killed between mkstemp and rename leaves */
    touch(FILES_TMP_PREFIX "smb.conf.Ab12Cd");
    /* not of that shape, or another file's: kept */
    touch(FILES_TMP_PREFIX "smb.conf.Ab12C");
    touch(FILES_TMP_PREFIX "smb.conf.Ab12Cd7");
    touch(FILES_TMP_PREFIX "other.conf.Ab12Cd");
    files_sweep_tmp(path_in("smb.conf"));
    assert_int_equal(stat(path_in(FILES_TMP_PREFIX "smb.conf.Ab12Cd"), &st), -1);
    assert_int_equal(stat(path_in(FILES_TMP_PREFIX "smb.conf.Ab12C"), &st), 0);
    assert_int_equal(stat(path_in(FILES_TMP_PREFIX "smb.conf.Ab12Cd7"), &st), 0);
    assert_int_equal(stat(path_in(FILES_TMP_PREFIX "other.conf.Ab12Cd"), &st), 0);
    assert_int_equal(stat(path_in("smb.conf"), &st), 0);
    assert_int_equal(entries(), 4);
}

/* In a directory of ours whose targets vary (backups): every target's
 * temporary files go, nothing else, and never through a link. */
static void test_sweep_a_whole_directory(void **state)
{
    struct stat st;

    (void)state;
    touch("a%2Fsmb.conf");
    touch(FILES_TMP_PREFIX "a%2Fsmb.conf.Ab12Cd");
    touch(FILES_TMP_PREFIX "b.conf.zz99YY");
    /* not of that shape: kept */
    touch(FILES_TMP_PREFIX "b.conf.zz99Y");
    touch(FILES_TMP_PREFIX "Ab12Cd");
    touch("smbtuned-b.conf.Ab12Cd");
    assert_int_equal(symlink("a%2Fsmb.conf", path_in(FILES_TMP_PREFIX "c.conf.Qw12Er")), 0);
    assert_int_equal(mkdir(path_in(FILES_TMP_PREFIX "d.conf.Qw12Er"), 0700), 0);
    files_sweep_tmp_dir(dir);
    assert_int_equal(stat(path_in(FILES_TMP_PREFIX "a%2Fsmb.conf.Ab12Cd"), &st), -1);
    assert_int_equal(stat(path_in(FILES_TMP_PREFIX "b.conf.zz99YY"), &st), -1);
    assert_int_equal(stat(path_in(FILES_TMP_PREFIX "b.conf.zz99Y"), &st), 0);
    assert_int_equal(stat(path_in(FILES_TMP_PREFIX "Ab12Cd"), &st), 0);
    assert_int_equal(stat(path_in("smbtuned-b.conf.Ab12Cd"), &st), 0);
    assert_int_equal(lstat(path_in(FILES_TMP_PREFIX "c.conf.Qw12Er"), &st), 0);
    assert_int_equal(stat(path_in(FILES_TMP_PREFIX "d.conf.Qw12Er"), &st), 0);
    assert_int_equal(stat(path_in("a%2Fsmb.conf"), &st), 0);
    assert_int_equal(entries(), 6);
    assert_int_equal(rmdir(path_in(FILES_TMP_PREFIX "d.conf.Qw12Er")), 0);
}

static void make_file(const char *p, const char *text)
{
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* What files_target_sweep told of the files it kept. */
struct kept_list {
    char names[8][NAME_MAX + 1];
    int n;
};

static void note_kept(void *ctx, const char *name)
{
    struct kept_list *k = ctx;

    assert_true(k->n < 8);
    snprintf(k->names[k->n++], sizeof(k->names[0]), "%s", name);
}

static bool told(const struct kept_list *k, const char *name)
{
    for (int i = 0; i < k->n; i++)
        if (strcmp(k->names[i], name) == 0)
            return true;
    return false;
}

/* files_target_sweep next to dir/smb.conf, telling k. */
static void sweep_smb_conf(struct kept_list *k)
{
    struct files_target t;
    struct err e;

    assert_int_equal(files_target_open(&t, path_in("smb.conf"), &e), 0);
    files_target_sweep(&t, note_kept, k);
    files_target_close(&t);
}

/* files.c's reading of an mtime in a name: nanoseconds, wrapping. */
static uint64_t mtime_of(const struct stat *st)
{
    return (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
}

/* A new file of ours, made under a plain name with a few bytes: its
 * stat. Its inode number is known only once it exists; it is then given a
 * name that carries it (or not) by named(). */
static struct stat fresh(void)
{
    struct stat st;

    make_file(path_in("plain"), "bytes\n");
    assert_int_equal(stat(path_in("plain"), &st), 0);
    return st;
}

/* What is at plain (a file or a link), renamed to the exchange's
 * temporary name for target with the numbers n, l, m and s; that name
 * into out (NAME_LEN). */
static void named(char *out, const char *target, uint64_t n, uint64_t l, uint64_t m, uint64_t s,
                  const char *letters)
{
    char plain[160];

    snprintf(plain, sizeof(plain), "%s", path_in("plain"));
    assert_true(snprintf(out, NAME_LEN,
                         FILES_TMP_PREFIX "%s.%" PRIx64 "-%" PRIx64 "-%" PRIx64 "-%" PRIx64 ".%s",
                         target, n, l, m, s, letters) < NAME_LEN);
    assert_int_equal(rename(plain, path_in(out)), 0);
}

/* A name with the numbers (a replace by exchange) is swept only when it
 * holds one of the two files it names: ours (N), or the file the caller
 * judged (L) with the mtime (M) and the size (S) it had then. Each state
 * as a kill leaves it, built directly; every file here is of our uid, so
 * only the numbers decide. */
static void test_sweep_by_inodes(void **state)
{
    char ours[NAME_LEN], judged[NAME_LEN], edited[NAME_LEN], resized[NAME_LEN], theirs[NAME_LEN],
        other[NAME_LEN];
    struct kept_list k = {.n = 0};
    struct stat st, tg;

    (void)state;
    touch("smb.conf");
    assert_int_equal(stat(path_in("smb.conf"), &tg), 0);
    /* ours, exchanged back (or killed before the exchange): N is its
     * inode, L smb.conf's */
    st = fresh();
    named(ours, "smb.conf", st.st_ino, tg.st_ino, mtime_of(&tg), tg.st_size, "Ab12Cd");
    /* the judged file, exchanged out and left by a kill before its
     * unlink: N is at smb.conf now, L is its inode, M its mtime */
    st = fresh();
    named(judged, "smb.conf", tg.st_ino, st.st_ino, mtime_of(&st), st.st_size, "Ef34Gh");
    /* the judged file, written in place after the judgment (the
     * exchange back was killed): its mtime is not M */
    st = fresh();
    named(edited, "smb.conf", tg.st_ino, st.st_ino, mtime_of(&st) + 1, st.st_size, "Ij56Kl");
    /* the same, written in place within the tick of the clock that
     * stamped M: the mtime is M, the size is not S */
    st = fresh();
    named(resized, "smb.conf", tg.st_ino, st.st_ino, mtime_of(&st), st.st_size + 1, "Yz12Ab");
    /* an editor's file renamed over smb.conf just before the exchange,
     * left by a kill before the exchange back: neither number is its
     * inode (L, the file it replaced, is gone) */
    st = fresh();
    named(theirs, "smb.conf", tg.st_ino, st.st_ino + 1, mtime_of(&st), st.st_size, "Mn78Op");
    /* another target's: not this sweep's, not told */
    st = fresh();
    named(other, "other.conf", tg.st_ino, st.st_ino + 1, mtime_of(&st), st.st_size, "Qr90St");
    /* not a shape of ours (three numbers; 17 digits; upper case): kept,
     * not told */
    touch(FILES_TMP_PREFIX "smb.conf.1-2-3.Uv12Wx");
    touch(FILES_TMP_PREFIX "smb.conf.1-2-3-10000000000000000.Uv12Wx");
    touch(FILES_TMP_PREFIX "smb.conf.1-2-3-4A.Uv12Wx");

    sweep_smb_conf(&k);
    assert_int_equal(lstat(path_in(ours), &st), -1);
    assert_int_equal(lstat(path_in(judged), &st), -1);
    assert_int_equal(lstat(path_in(edited), &st), 0);
    assert_int_equal(lstat(path_in(resized), &st), 0);
    assert_int_equal(lstat(path_in(theirs), &st), 0);
    assert_int_equal(lstat(path_in(other), &st), 0);
    assert_int_equal(k.n, 3);
    assert_true(told(&k, edited));
    assert_true(told(&k, resized));
    assert_true(told(&k, theirs));
    assert_int_equal(entries(), 8);
    /* the sweeps by path keep them as well (and tell no one); the one of
     * a whole directory takes any target's random names, and the three
     * above are such names of targets called smb.conf.1-2-3 and so on */
    files_sweep_tmp(path_in("smb.conf"));
    assert_int_equal(entries(), 8);
    files_sweep_tmp_dir(dir);
    assert_int_equal(lstat(path_in(edited), &st), 0);
    assert_int_equal(lstat(path_in(resized), &st), 0);
    assert_int_equal(lstat(path_in(theirs), &st), 0);
    assert_int_equal(lstat(path_in(other), &st), 0);
    assert_int_equal(entries(), 5);
}

/* Under a name with the numbers, what is not removed is told, whatever it
 * is, and the numbers decide what is removed, whatever its owner. A
 * symlink (an editor may save one), never followed: its target is the
 * file N names. Files of another uid (an admin of a group that may write
 * the directory), as root only: it takes root to give a file away. */
static void test_sweep_tells_of_any_owner_and_type(void **state)
{
    char link[NAME_LEN], foreign[NAME_LEN], theirs_ours[NAME_LEN], victim[160];
    struct kept_list k = {.n = 0};
    struct stat st, tg, vi;

    (void)state;
    touch("smb.conf");
    assert_int_equal(stat(path_in("smb.conf"), &tg), 0);
    make_file(path_in("victim"), "bytes\n");
    assert_int_equal(stat(path_in("victim"), &vi), 0);
    snprintf(victim, sizeof(victim), "%s", path_in("victim"));
    assert_int_equal(symlink(victim, path_in("plain")), 0);
    named(link, "smb.conf", vi.st_ino, vi.st_ino + 1, mtime_of(&vi), vi.st_size, "Ab12Cd");
    if (geteuid() == 0) {
        st = fresh();
        assert_int_equal(chown(path_in("plain"), 65534, 65534), 0);
        named(foreign, "smb.conf", tg.st_ino, st.st_ino + 1, mtime_of(&st), st.st_size, "Ef34Gh");
        /* ours by its number, of an admin's uid (it took smb.conf's
         * owner): removed, whatever its owner */
        st = fresh();
        assert_int_equal(chown(path_in("plain"), 65534, 65534), 0);
        named(theirs_ours, "smb.conf", st.st_ino, tg.st_ino, 0, 0, "Ij56Kl");
    }
    sweep_smb_conf(&k);
    assert_int_equal(lstat(path_in(link), &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_true(told(&k, link));
    assert_int_equal(stat(victim, &st), 0);
    if (geteuid() == 0) {
        assert_int_equal(lstat(path_in(foreign), &st), 0);
        assert_true(told(&k, foreign));
        assert_int_equal(lstat(path_in(theirs_ours), &st), -1);
        assert_false(told(&k, theirs_ours));
    }
    assert_int_equal(k.n, geteuid() == 0 ? 2 : 1);
    assert_int_equal(entries(), geteuid() == 0 ? 4 : 3);
}

static void kill_self(void *ctx)
{
    (void)ctx;
    raise(SIGKILL);
}

/* What an admin's editor does between our open of smb.conf and our
 * exchange: nothing, rename dir/edit over it, or write into it (and then,
 * the same tick: the mtime put back as it was, long_ago). */
enum editor { NO_EDITOR, EDITOR_RENAMES, EDITOR_WRITES_IN_PLACE, EDITOR_WRITES_IN_THE_SAME_TICK };

/* smb.conf's mtime when it is opened: not within the tick that made the
 * file, so that a write in place changes it (timestamps are coarse). */
static const struct timespec long_ago[2] = {{1000000000, 0}, {1000000000, 0}};

/* A run killed right after the exchange that put "new\n" in place at
 * dir/smb.conf ("old\n" when the target was opened), the editor's step
 * (writing "admin's\n") before it. In a child: the kill is real. */
static void replace_killed(enum editor ed)
{
    int status;
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        const struct files_hooks h = {.exchanged = kill_self};
        struct files_target t;
        char p[160], edit[160];
        int fd;

        snprintf(p, sizeof(p), "%s", path_in("smb.conf"));
        snprintf(edit, sizeof(edit), "%s", path_in("edit"));
        if (files_target_open_hooked(&t, p, &h, NULL) < 0)
            _exit(1);
        if (ed == EDITOR_RENAMES && rename(edit, p) < 0)
            _exit(2);
        if (ed == EDITOR_WRITES_IN_PLACE || ed == EDITOR_WRITES_IN_THE_SAME_TICK) {
            fd = open(p, O_WRONLY | O_TRUNC);
            if (fd < 0 || write(fd, "admin's\n", 8) != 8 || close(fd) < 0)
                _exit(2);
        }
        if (ed == EDITOR_WRITES_IN_THE_SAME_TICK && utimensat(AT_FDCWD, p, long_ago, 0) < 0)
            _exit(2);
        files_target_replace(&t, "new\n", 4, "old\n", 4);
        _exit(3); /* not reached: killed at the exchange */
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
}

/* The one temporary file of smb.conf's in dir, into name. */
static void the_tmp(char *name, size_t size)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;

    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, FILES_TMP_PREFIX "smb.conf.", strlen(FILES_TMP_PREFIX) + 9) == 0) {
            assert_true(snprintf(name, size, "%s", de->d_name) < (int)size);
            n++;
        }
    closedir(d);
    assert_int_equal(n, 1);
}

static void assert_holds(const char *name, const char *text)
{
    char *buf;
    size_t len;

    assert_int_equal(files_read(path_in(name), &buf, &len, NULL), 0);
    assert_string_equal(buf, text);
    free(buf);
}

/* A kill right after our exchange, on the real path, with the editor's
 * step ed before it: our temporary name then holds left, and the sweep
 * at the next edit tells told_n files (keeping them) or removes it. */
static void sweep_after_a_kill(enum editor ed, const char *left, int told_n)
{
    struct kept_list k = {.n = 0};
    char tmp[NAME_LEN];

    unlink(path_in("smb.conf"));
    make_file(path_in("smb.conf"), "old\n");
    assert_int_equal(utimensat(AT_FDCWD, path_in("smb.conf"), long_ago, 0), 0);
    if (ed == EDITOR_RENAMES)
        make_file(path_in("edit"), "admin's\n");
    replace_killed(ed);
    assert_holds("smb.conf", "new\n");
    the_tmp(tmp, sizeof(tmp));
    assert_holds(tmp, left);
    sweep_smb_conf(&k);
    assert_int_equal(k.n, told_n);
    if (told_n == 0) {
        assert_int_equal(entries(), 1);
        return;
    }
    assert_true(told(&k, tmp));
    assert_holds(tmp, left);
    assert_int_equal(unlink(path_in(tmp)), 0);
}

/* The race the numbers in the name are for: an editor renames its file
 * over smb.conf (or writes into it, even within the mtime's tick: the size
 * tells), our exchange moves that file to our temporary name, and we are
 * killed before the exchange back. The sweep keeps it and tells. Killed
 * at the same step with no editor, what is left is the old file: swept,
 * nothing told. */
static void test_sweep_after_a_killed_exchange(void **state)
{
    (void)state;
    sweep_after_a_kill(EDITOR_RENAMES, "admin's\n", 1);
    sweep_after_a_kill(EDITOR_WRITES_IN_PLACE, "admin's\n", 1);
    sweep_after_a_kill(EDITOR_WRITES_IN_THE_SAME_TICK, "admin's\n", 1);
    sweep_after_a_kill(NO_EDITOR, "old\n", 0);
}

/* An editor's rename over the target after it was opened, no kill: the
 * exchange is undone, their file stays under the name, nothing of ours is
 * left. */
static void test_replace_after_a_rename_over_it(void **state)
{
    struct files_target t;
    struct err e;

    (void)state;
    make_file(path_in("smb.conf"), "old\n");
    make_file(path_in("edit"), "admin's\n");
    assert_int_equal(files_target_open(&t, path_in("smb.conf"), &e), 0);
    assert_int_equal(rename(path_in("edit"), t.path), 0);
    assert_int_equal(files_target_replace(&t, "new\n", 4, "old\n", 4), -ESTALE);
    files_target_close(&t);
    assert_holds("smb.conf", "admin's\n");
    assert_int_equal(entries(), 1);
}

/* Between the two exchanges, the file exchanged out (the admin's, renamed
 * over smb.conf before ours) goes to "moved": the exchange back fails. */
static void move_it_away(void *ctx)
{
    char name[NAME_LEN], from[128];

    (void)ctx;
    the_tmp(name, sizeof(name));
    snprintf(from, sizeof(from), "%s", path_in(name)); /* path_in's buffer is one */
    assert_int_equal(rename(from, path_in("moved")), 0);
}

/* The exchange back that fails: FILES_SWAPPED_OUT, not an error that says
 * nothing was written; smb.conf holds the new bytes, and files.c removes
 * no file it did not make. */
static void test_replace_whose_exchange_back_fails(void **state)
{
    const struct files_hooks h = {.exchanged = move_it_away};
    struct files_target t;
    struct err e;

    (void)state;
    make_file(path_in("smb.conf"), "old\n");
    make_file(path_in("edit"), "admin's\n");
    assert_int_equal(files_target_open_hooked(&t, path_in("smb.conf"), &h, &e), 0);
    assert_int_equal(rename(path_in("edit"), t.path), 0);
    assert_int_equal(files_target_replace(&t, "new\n", 4, "old\n", 4), FILES_SWAPPED_OUT);
    files_target_close(&t);
    assert_holds("smb.conf", "new\n");
    assert_holds("moved", "admin's\n");
    assert_int_equal(entries(), 2);
}

/* The race of a user who owns a directory on the path (att/sub), run
 * deterministically: right after the path is resolved, sub becomes a
 * symlink to a directory only root writes (vic). Nothing may be written in
 * vic, by name or by a temp file: the write is refused. */
struct swap {
    char sub[160], to[160];
    int calls;
};

static void swap_hook(void *ctx, const char *real)
{
    struct swap *sw = ctx;

    (void)real;
    sw->calls++;
    assert_int_equal(rename(sw->sub, path_in("att/sub.real")), 0);
    assert_int_equal(symlink(sw->to, sw->sub), 0);
}

static void test_swapped_directory_refused(void **state)
{
    char target[200], *buf;
    struct files_target t;
    struct stat st;
    struct err e = {{0}};
    size_t len;
    struct swap sw = {.calls = 0};
    const struct files_hooks hooks = {.resolved = swap_hook, .ctx = &sw};

    (void)state;
    assert_int_equal(mkdir(path_in("att"), 0755), 0);
    assert_int_equal(mkdir(path_in("att/sub"), 0755), 0);
    assert_int_equal(mkdir(path_in("vic"), 0700), 0);
    snprintf(sw.sub, sizeof(sw.sub), "%s", path_in("att/sub"));
    snprintf(sw.to, sizeof(sw.to), "%s", path_in("vic"));
    make_file(path_in("att/sub/target"), "theirs\n");
    make_file(path_in("vic/target"), "root's\n");
    snprintf(target, sizeof(target), "%s", path_in("att/sub/target"));
    assert_int_equal(stat(target, &st), 0);

    assert_int_equal(files_write_atomic_hooked(target, "evil\n", 5, &st, &hooks), -ELOOP);
    assert_int_equal(sw.calls, 1);
    assert_int_equal(files_read(path_in("vic/target"), &buf, &len, NULL), 0);
    assert_string_equal(buf, "root's\n");
    free(buf);
    assert_int_equal(count_in(path_in("vic")), 1);

    /* the editor's way in: refused at open, naming the file */
    assert_int_equal(unlink(sw.sub), 0);
    assert_int_equal(rename(path_in("att/sub.real"), sw.sub), 0);
    assert_int_equal(files_target_open_hooked(&t, target, &hooks, &e), -ELOOP);
    assert_int_equal(sw.calls, 2);
    assert_non_null(strstr(e.msg, target));
    assert_non_null(strstr(e.msg, "symlink"));
    assert_int_equal(count_in(path_in("vic")), 1);
    assert_int_equal(t.dfd, -1);
    assert_int_equal(t.fd, -1);

    /* no race: the target reads and replaces, relative to its directory */
    assert_int_equal(unlink(sw.sub), 0);
    assert_int_equal(rename(path_in("att/sub.real"), sw.sub), 0);
    assert_int_equal(files_target_open(&t, target, &e), 0);
    assert_int_equal(files_target_read(&t, &buf, &len, &e), 0);
    assert_string_equal(buf, "theirs\n");
    free(buf);
    assert_int_equal(files_target_replace(&t, "new\n", 4, "theirs\n", 7), 0);
    files_target_close(&t);
    assert_int_equal(files_read(target, &buf, &len, NULL), 0);
    assert_string_equal(buf, "new\n");
    free(buf);
    assert_int_equal(count_in(sw.sub), 1);
}

/* An editor that saves in place (the same file, new bytes) after the
 * caller compared them: the exchange is undone, their bytes stay under the
 * name and nothing of ours is left. Byte for byte, in length too. */
static void test_replace_changed_in_place(void **state)
{
    static const struct {
        const char *now; /* what the admin wrote in place after the compare */
    } cases[] = {{"old\nsocket options = SO_RCVBUF=1\n"}, {"old"}, {"olD\n"}, {""}};
    const char *p = path_in("smb.conf");
    struct files_target t;
    struct err e = {{0}};
    char *buf;
    size_t len;
    int fd;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "old\n", 4), 4);
        close(fd);
        assert_int_equal(files_target_open(&t, p, &e), 0);
        fd = open(p, O_WRONLY | O_TRUNC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, cases[i].now, strlen(cases[i].now)),
                         (ssize_t)strlen(cases[i].now));
        close(fd);
        assert_int_equal(files_target_replace(&t, "new\n", 4, "old\n", 4), -ESTALE);
        files_target_close(&t);
        assert_int_equal(files_read(p, &buf, &len, NULL), 0);
        assert_string_equal(buf, cases[i].now);
        free(buf);
        assert_int_equal(count_in(dir), 1);
    }
    /* unchanged: replaced */
    assert_int_equal(files_target_open(&t, p, &e), 0);
    assert_int_equal(files_target_replace(&t, "new\n", 4, "", 0), 0);
    files_target_close(&t);
    assert_int_equal(files_read(p, &buf, &len, NULL), 0);
    assert_string_equal(buf, "new\n");
    free(buf);
    assert_int_equal(count_in(dir), 1);
}

/* /proc and /sys are kernel interfaces, never a configuration: refused by
 * name, and through a symlink (fstatfs). /proc/kmsg is never read here:
 * it would drain the host's kernel log. */
static void test_read_proc_refused(void **state)
{
    struct err e = {{0}};
    char *buf = NULL;
    size_t len;

    (void)state;
    assert_int_equal(files_read("/proc/self/status", &buf, &len, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "/proc/self/status"));
    assert_non_null(strstr(e.msg, "/proc"));
    assert_int_equal(files_read("/sys/kernel/mm/transparent_hugepage/enabled", &buf, &len, &e),
                     -EINVAL);
    assert_int_equal(symlink("/proc/self/status", path_in("link")), 0);
    assert_int_equal(files_read(path_in("link"), &buf, &len, &e), -EINVAL);
    assert_non_null(strstr(e.msg, path_in("link")));
    assert_null(buf);
}

/* Someone else's file of our temp shape (a 1777 directory), or a symlink
 * of that shape, is not ours to remove. */
static void test_sweep_not_others(void **state)
{
    char victim[160];
    struct stat st;

    (void)state;
    if (geteuid() != 0)
        skip(); /* needs root to make a file of another uid */
    touch("extra.conf");
    touch(FILES_TMP_PREFIX "extra.conf.abcdef");
    assert_int_equal(chown(path_in(FILES_TMP_PREFIX "extra.conf.abcdef"), 65534, 65534), 0);
    touch("victim");
    snprintf(victim, sizeof(victim), "%s", path_in("victim"));
    assert_int_equal(symlink(victim, path_in(FILES_TMP_PREFIX "extra.conf.Zz9Zz9")), 0);
    touch(FILES_TMP_PREFIX "extra.conf.mine00");
    files_sweep_tmp(path_in("extra.conf"));
    assert_int_equal(lstat(path_in(FILES_TMP_PREFIX "extra.conf.abcdef"), &st), 0);
    assert_int_equal(lstat(path_in(FILES_TMP_PREFIX "extra.conf.Zz9Zz9"), &st), 0);
    assert_int_equal(stat(path_in("victim"), &st), 0);
    assert_int_equal(lstat(path_in(FILES_TMP_PREFIX "extra.conf.mine00"), &st), -1);
    assert_int_equal(entries(), 4);
}

static void test_mkdir_p(void **state)
{
    char deep[128];
    struct stat st;

    (void)state;
    snprintf(deep, sizeof(deep), "%s/a/b/c", dir);
    assert_int_equal(files_mkdir_p(deep), 0);
    assert_int_equal(stat(deep, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    /* the last one is private */
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(files_mkdir_p(deep), 0);
    assert_int_equal(files_mkdir_p(""), -EINVAL);
    touch("file");
    snprintf(deep, sizeof(deep), "%s/file/x", dir);
    assert_int_equal(files_mkdir_p(deep), -ENOTDIR);
}

static void test_private_dir(void **state)
{
    char priv[128], link[128];
    struct err e;
    struct stat st;
    int fd;

    (void)state;
    snprintf(priv, sizeof(priv), "%s/state", dir);
    /* not made without FILES_DIR_MAKE */
    assert_int_equal(files_private_dir(priv, 0, &e), -ENOENT);
    fd = files_private_dir(priv, FILES_DIR_MAKE, &e);
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    close(fd);
    /* readable by others is private enough; writable is not */
    assert_int_equal(chmod(priv, 0755), 0);
    fd = files_private_dir(priv, 0, &e);
    assert_true(fd >= 0);
    close(fd);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(chmod(priv, i == 0 ? 0770 : 0703), 0);
        assert_int_equal(files_private_dir(priv, FILES_DIR_MAKE, &e), -EPERM);
        assert_non_null(strstr(e.msg, i == 0 ? "with mode 0770: refused" : "with mode 0703"));
    }
    assert_int_equal(chmod(priv, 0700), 0);
    /* the admin's link to it is followed; none of ours is */
    snprintf(link, sizeof(link), "%s/link", dir);
    assert_int_equal(symlink(priv, link), 0);
    fd = files_private_dir(link, 0, &e);
    assert_true(fd >= 0);
    close(fd);
    /* ELOOP or ENOTDIR, as O_NOFOLLOW | O_DIRECTORY meets the link */
    assert_true(files_private_dir(link, FILES_DIR_MAKE | FILES_DIR_OWN, &e) < 0);
    assert_non_null(strstr(e.msg, "is a symlink or not a directory: refused"));
    /* another user's */
    if (geteuid() == 0) {
        assert_int_equal(chown(priv, 65534, 65534), 0);
        assert_int_equal(files_private_dir(priv, 0, &e), -EPERM);
        assert_non_null(strstr(e.msg, "is owned by uid 65534 with mode 0700: refused"));
    }
}

/* A directory on the way that someone else could change: the private
 * directory could be moved away and replaced between check and write. */
static void test_private_dir_on_the_way(void **state)
{
    char open_dir[128], priv[160], link[128];
    struct err e;
    int fd;

    (void)state;
    snprintf(open_dir, sizeof(open_dir), "%s/open", dir);
    snprintf(priv, sizeof(priv), "%s/open/sub/state", dir);
    assert_int_equal(mkdir(open_dir, 0700), 0);
    fd = files_private_dir(priv, FILES_DIR_MAKE, &e);
    assert_true(fd >= 0);
    close(fd);
    /* writable by others: refused, whichever level */
    assert_int_equal(chmod(open_dir, 0777), 0);
    assert_int_equal(files_private_dir(priv, FILES_DIR_MAKE, &e), -EPERM);
    assert_non_null(strstr(e.msg, "the directory "));
    assert_non_null(strstr(e.msg, "/open on the way to "));
    assert_non_null(strstr(e.msg, "/open/sub/state is owned by uid"));
    assert_non_null(strstr(e.msg, "with mode 0777: refused"));
    /* and what is missing is not made under it first */
    snprintf(priv, sizeof(priv), "%s/open/new/state", dir);
    assert_int_equal(files_private_dir(priv, FILES_DIR_MAKE, &e), -EPERM);
    assert_non_null(strstr(e.msg, "/open on the way to "));
    assert_non_null(strstr(e.msg, "/open/new/state is owned by uid"));
    snprintf(priv, sizeof(priv), "%s/open/new", dir);
    assert_int_equal(access(priv, F_OK), -1);
    snprintf(priv, sizeof(priv), "%s/open/sub/state", dir);
    /* ".." leads out of it: judged where the path really goes */
    snprintf(priv, sizeof(priv), "%s/open/../state2", dir);
    fd = files_private_dir(priv, FILES_DIR_MAKE, &e);
    assert_true(fd >= 0);
    close(fd);
    /* through a link that lies in a safe place: where it leads counts */
    snprintf(link, sizeof(link), "%s/link", dir);
    assert_int_equal(symlink("open/sub", link), 0);
    snprintf(priv, sizeof(priv), "%s/link/state", dir);
    assert_int_equal(files_private_dir(priv, 0, &e), -EPERM);
    assert_non_null(strstr(e.msg, "/open on the way to "));
    /* sticky, as /tmp: no one renames what is ours */
    assert_int_equal(chmod(open_dir, 01777), 0);
    fd = files_private_dir(priv, 0, &e);
    assert_true(fd >= 0);
    close(fd);
    if (geteuid() == 0) {
        char theirs[160];

        /* in a sticky directory a link's owner may still repoint it */
        snprintf(theirs, sizeof(theirs), "%s/open/theirs", dir);
        assert_int_equal(symlink("sub", theirs), 0);
        assert_int_equal(lchown(theirs, 65534, 65534), 0);
        snprintf(priv, sizeof(priv), "%s/open/theirs/state", dir);
        assert_int_equal(files_private_dir(priv, 0, &e), -EPERM);
        assert_non_null(strstr(e.msg, "/open/theirs on the way to "));
        assert_non_null(strstr(e.msg, "is uid 65534's: refused"));
        /* root's link there is followed */
        assert_int_equal(lchown(theirs, 0, 0), 0);
        fd = files_private_dir(priv, 0, &e);
        assert_true(fd >= 0);
        close(fd);
        snprintf(priv, sizeof(priv), "%s/link/state", dir);
    }
    /* another user's, not writable by others */
    if (geteuid() == 0) {
        assert_int_equal(chmod(open_dir, 0755), 0);
        assert_int_equal(chown(open_dir, 65534, 65534), 0);
        assert_int_equal(files_private_dir(priv, 0, &e), -EPERM);
        assert_non_null(strstr(e.msg, "is owned by uid 65534 with mode 0755: refused"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_read_fifo_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_atomic_keeps_metadata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_atomic_keeps_metadata_set_since, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sweep_a_whole_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_only_ours, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mkdir_p, setup, teardown),
        cmocka_unit_test_setup_teardown(test_private_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_private_dir_on_the_way, setup, teardown),
        cmocka_unit_test_setup_teardown(test_swapped_directory_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_proc_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_changed_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_not_others, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_by_inodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_tells_of_any_owner_and_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_after_a_killed_exchange, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_after_a_rename_over_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_whose_exchange_back_fails, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
