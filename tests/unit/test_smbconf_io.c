/* smbconf_io on real files in a temporary directory (testparm judges
 * them): the two steps of a write, the undo, and the undo of a write that
 * was killed between its temp file and its rename. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "files.h"
#include "journal.h"
#include "rmtree.h"
#include "smbconf.h"

#define LEGACY "TCP_NODELAY SO_RCVBUF=8192 SO_SNDBUF=8192"

struct fix {
    char dir[256], conf[300], state_dir[300], tmp[400];
};

/* Not inlined: GCC 12 then takes the returned buffer for its local
 * pointer and warns of a dangling one at every strlen of it. */
__attribute__((noinline)) static char *read_all(const char *path)
{
    char *buf;
    size_t len;

    assert_int_equal(files_read(path, &buf, &len, NULL), 0);
    return buf;
}

static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof(*f));
    FILE *c;

    snprintf(f->dir, sizeof(f->dir), "/tmp/smbtuned-test-smbconf-io-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->conf, sizeof(f->conf), "%s/smb.conf", f->dir);
    snprintf(f->state_dir, sizeof(f->state_dir), "%s/state", f->dir);
    /* what files.c's tmp_name makes: the prefix, the name, six letters */
    snprintf(f->tmp, sizeof(f->tmp), "%s/" FILES_TMP_PREFIX "smb.conf.Ab3dE9", f->dir);
    assert_int_equal(mkdir(f->state_dir, 0700), 0);
    c = fopen(f->conf, "w");
    assert_non_null(c);
    fprintf(c, "[global]\n   workgroup = IO\n   socket options = %s\n\n[s]\n   path = %s\n", LEGACY,
            f->dir);
    assert_int_equal(fclose(c), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;

    assert_int_equal(rmtree_path(f->dir, NULL), 0);
    free(f);
    return 0;
}

/* prepare renders without writing; write writes; revert gives back every
 * byte. */
static void test_prepare_write_revert(void **state)
{
    struct fix *f = *state;
    struct smbconf_change ch = {.expect = LEGACY, .rcvbuf = 262144, .sndbuf = 262144};
    char *before = read_all(f->conf), *mid, *after;
    struct smbconf_result res;
    struct smbconf_plan pl;
    struct err e;

    assert_int_equal(smbconf_prepare(f->conf, f->state_dir, &ch, &pl, &res, &e), 0);
    assert_true(res.changed);
    mid = read_all(f->conf);
    assert_string_equal(mid, before); /* nothing written yet */
    free(mid);
    assert_int_equal(smbconf_write(&pl, &res, &e), 0);
    smbconf_plan_free(&pl);
    mid = read_all(f->conf);
    assert_non_null(strstr(mid, "SO_RCVBUF=262144 SO_SNDBUF=262144"));
    assert_int_equal(smbconf_revert(f->conf, f->state_dir, &res.edit, &e), 0);
    after = read_all(f->conf);
    assert_string_equal(after, before);
    smbconf_result_free(&res);
    free(before);
    free(mid);
    free(after);
}

/* A write killed after its temp file and before its rename: the record
 * says the edit, the file holds the old bytes, the temp file lies next to
 * it. The undo has nothing to write (-EALREADY) and removes the temp
 * file. */
static void test_revert_sweeps_a_killed_write(void **state)
{
    struct fix *f = *state;
    struct smbconf_change ch = {.expect = LEGACY, .rcvbuf = 65536, .sndbuf = 65536};
    char *before = read_all(f->conf), *after;
    struct smbconf_result res;
    struct smbconf_plan pl;
    struct err e;
    FILE *t;

    assert_int_equal(smbconf_prepare(f->conf, f->state_dir, &ch, &pl, &res, &e), 0);
    smbconf_plan_free(&pl); /* killed before it wrote */
    t = fopen(f->tmp, "w");
    assert_non_null(t);
    fputs("the new bytes, never renamed\n", t);
    assert_int_equal(fclose(t), 0);
    assert_int_equal(smbconf_revert(f->conf, f->state_dir, &res.edit, &e), -EALREADY);
    assert_int_equal(access(f->tmp, F_OK), -1);
    after = read_all(f->conf);
    assert_string_equal(after, before);
    smbconf_result_free(&res);
    free(before);
    free(after);
}

/* The journal's warnings that a sweep kept a file, as the tap sees them. */
struct warned {
    int n;
    char last[1024];
};

static void warn_tap(void *ctx, const char *message_id, int prio, const char *const fields[],
                     const char *line)
{
    struct warned *w = ctx;

    (void)message_id;
    (void)fields;
    if (prio != LOG_WARNING || strstr(line, ": kept ") == NULL)
        return;
    w->n++;
    snprintf(w->last, sizeof(w->last), "%s", line);
}

/* A temporary name of the exchange's shape next to smb.conf that holds
 * neither file its numbers name: what an editor's file is, moved there by
 * a run of ours killed between its exchange and the exchange back. The
 * edit's sweep keeps it and says so, naming both files; the edit and its
 * undo go on, and still keep it. Told once by each: not again by the
 * write that follows the sweep. */
static void test_sweep_tells_of_a_kept_file(void **state)
{
    struct fix *f = *state;
    struct smbconf_change ch = {.expect = LEGACY, .rcvbuf = 65536, .sndbuf = 65536};
    struct warned w = {0};
    struct smbconf_result res;
    struct smbconf_plan pl;
    char kept[500], plain[400];
    struct err e;
    struct stat st;

    snprintf(plain, sizeof(plain), "%s/edit", f->dir);
    assert_int_equal(close(open(plain, O_WRONLY | O_CREAT | O_EXCL, 0600)), 0);
    assert_int_equal(stat(plain, &st), 0);
    snprintf(kept, sizeof(kept),
             "%s/" FILES_TMP_PREFIX "smb.conf.%" PRIx64 "-%" PRIx64 "-%" PRIx64 "-%" PRIx64
             ".Ab3dE9",
             f->dir, (uint64_t)st.st_ino + 1, (uint64_t)st.st_ino + 2, (uint64_t)0, (uint64_t)0);
    assert_int_equal(rename(plain, kept), 0);
    journal_set_tap(warn_tap, &w);
    assert_int_equal(smbconf_prepare(f->conf, f->state_dir, &ch, &pl, &res, &e), 0);
    assert_int_equal(w.n, 1);
    assert_non_null(strstr(w.last, f->conf));
    assert_non_null(strstr(w.last, kept));
    assert_non_null(strstr(w.last, "perhaps an edit of yours"));
    /* told once an edit: by the prepare, not again by its write */
    assert_int_equal(smbconf_write(&pl, &res, &e), 0);
    assert_int_equal(w.n, 1);
    smbconf_plan_free(&pl);
    assert_int_equal(smbconf_revert(f->conf, f->state_dir, &res.edit, &e), 0);
    journal_set_tap(NULL, NULL);
    assert_int_equal(w.n, 2);
    assert_int_equal(stat(kept, &st), 0);
    smbconf_result_free(&res);
}

/* Our live trial in force, and then the admin adds an include that
 * leaves unknown which line is in force (a client-dependent file that
 * opens [global] and sets socket options): an edit is refused, but the
 * take-back still puts the admin's bytes back, and keeps the include. */
static void test_revert_past_an_uncertain_include(void **state)
{
    struct fix *f = *state;
    struct smbconf_change ch = {.expect = LEGACY, .rcvbuf = 4194304, .sndbuf = 4194304};
    char *before = read_all(f->conf), *mid, *after, inc[400], line[500], *want;
    const char *ours = "SO_SNDBUF=4194304\n", *theirs = "SO_SNDBUF=8192\n";
    struct smbconf_result res;
    struct smbconf_plan pl;
    struct smbconf c;
    struct err e;
    size_t cut;
    FILE *w;

    assert_int_equal(smbconf_prepare(f->conf, f->state_dir, &ch, &pl, &res, &e), 0);
    assert_int_equal(smbconf_write(&pl, &res, &e), 0);
    smbconf_plan_free(&pl);
    snprintf(inc, sizeof(inc), "%s/inc.ws01.conf", f->dir);
    w = fopen(inc, "w");
    assert_non_null(w);
    fputs("[global]\nsocket options = TCP_NODELAY SO_RCVBUF=65536\n", w);
    assert_int_equal(fclose(w), 0);
    snprintf(line, sizeof(line), "   include = %s/inc.%%m.conf\n", f->dir);
    /* the admin's line, right after ours, in the trial's file and in the
     * bytes expected back */
    mid = read_all(f->conf);
    assert_non_null(strstr(mid, ours));
    cut = strlen(mid) - strlen(strstr(mid, ours)) + strlen(ours);
    w = fopen(f->conf, "w");
    assert_non_null(w);
    fprintf(w, "%.*s%s%s", (int)cut, mid, line, mid + cut);
    assert_int_equal(fclose(w), 0);
    assert_non_null(strstr(before, theirs));
    cut = strlen(before) - strlen(strstr(before, theirs)) + strlen(theirs);
    assert_true(asprintf(&want, "%.*s%s%s", (int)cut, before, line, before + cut) > 0);
    /* an edit is refused */
    assert_true(smbconf_load(&c, f->conf, &e) < 0);
    assert_non_null(strstr(e.msg, "depends on the client"));
    assert_int_equal(smbconf_revert(f->conf, f->state_dir, &res.edit, &e), 0);
    after = read_all(f->conf);
    assert_string_equal(after, want);
    smbconf_result_free(&res);
    free(before);
    free(mid);
    free(after);
    free(want);
}

/* A %-include and one file, both relative to a directory of their own:
 * whether Samba could read the file for some client, so that its
 * `socket options` must make the include refused. */
struct percent_case {
    const char *include, *file;
    bool refused;
};

static const struct percent_case percent_cases[] = {
    {"inc/%m.conf", "inc/.ws01.conf", true},        /* %m can start with '.' */
    {"inc/[ab]%m.conf", "inc/[ab]ws01.conf", true}, /* Samba reads [ab] as is */
    {"inc/[ab]%m.conf", "inc/aws01.conf", false},   /* ... so never this one */
    {"inc/*%m.conf", "inc/x.conf", false},
    {"inc/%%m.conf", "inc/%ws01.conf", true},   /* a literal '%', then %m */
    {"inc%/%m.conf", "inc%/ws01.conf", true},   /* "%/" is no macro */
    {"inc/%m/p.conf", "inc/p.conf", true},      /* %m = "" or "." */
    {"inc/%m/p.conf", "p.conf", true},          /* %m = ".." */
    {"inc/%m/p.conf", "inc/a/b/p.conf", false}, /* %m holds no '/' */
    /* a macro last: "inc/.", "inc/.." and a directory are no files Samba
     * reads (glob's '*' with GLOB_PERIOD matches them all) */
    {"inc/%m", "elsewhere/ws01", false},
    {"inc/%m", "inc/sub/ws01", false},
};

/* Create every directory on the way to path (not path itself). */
static void make_parents(const char *path)
{
    char buf[600];

    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = strchr(buf + 1, '/'); p != NULL; p = strchr(p + 1, '/')) {
        *p = '\0';
        assert_true(mkdir(buf, 0700) == 0 || access(buf, F_OK) == 0);
        *p = '/';
    }
}

static void write_file(const char *path, const char *text)
{
    FILE *c;

    make_parents(path);
    c = fopen(path, "w");
    assert_non_null(c);
    fputs(text, c);
    assert_int_equal(fclose(c), 0);
}

/* Every file a %-include can name is checked on disk, named as Samba
 * would name it: with a leading '.', through "." and "..", and with the
 * path's own characters taken as they are. */
static void test_percent_include_names(void **state)
{
    struct fix *f = *state;

    for (size_t i = 0; i < sizeof(percent_cases) / sizeof(percent_cases[0]); i++) {
        const struct percent_case *pc = &percent_cases[i];
        char d[400], conf[500], file[500], text[600];
        struct smbconf c;
        struct err e = {{0}};
        int r;

        snprintf(d, sizeof(d), "%s/case%zu", f->dir, i);
        snprintf(conf, sizeof(conf), "%s/smb.conf", d);
        snprintf(text, sizeof(text), "[global]\nsocket options = TCP_NODELAY\ninclude = %s/%s\n", d,
                 pc->include);
        write_file(conf, text);
        /* inc/.. leads somewhere only when inc is there, for Samba too */
        snprintf(file, sizeof(file), "%s/inc/", d);
        make_parents(file);
        snprintf(file, sizeof(file), "%s/%s", d, pc->file);
        write_file(file, "socket options = SO_RCVBUF=1\n");
        r = smbconf_load(&c, conf, &e);
        if (pc->refused && (r >= 0 || strstr(e.msg, "depends on the client") == NULL))
            fail_msg("include = %s with %s: not refused (%d: %s)", pc->include, pc->file, r,
                     r < 0 ? e.msg : "");
        if (!pc->refused && r < 0)
            fail_msg("include = %s with %s: refused: %s", pc->include, pc->file, e.msg);
        if (r >= 0)
            smbconf_free(&c);
    }
}

/* A testparm that cannot be started says nothing about smb.conf: the error
 * names the program, not the file as one Samba cannot read. */
static void test_testparm_not_run(void **state)
{
    struct fix *f = *state;
    struct err e = {{0}};
    char *v = NULL;

    assert_int_equal(setenv("SMBTUNED_TESTPARM", "/nonexistent/testparm", 1), 0);
    assert_true(smbconf_testparm(f->conf, "socket options", &v, &e) < 0);
    assert_int_equal(unsetenv("SMBTUNED_TESTPARM"), 0);
    assert_null(v);
    assert_non_null(strstr(e.msg, "cannot run /nonexistent/testparm"));
    assert_null(strstr(e.msg, "cannot read"));
    /* the real one reads it */
    assert_int_equal(smbconf_testparm(f->conf, "socket options", &v, &e), 0);
    assert_string_equal(v, LEGACY);
    free(v);
}

/* Appends text to the file at path. */
static void append(const char *path, const char *text)
{
    FILE *c = fopen(path, "a");

    assert_non_null(c);
    fputs(text, c);
    assert_int_equal(fclose(c), 0);
}

/* An admin makes the file one the editor refuses after our write (a
 * relative include): the undo cannot tell which line is in force, but
 * puts ours back where it is as we wrote it (SMBCONF_UNDONE_UNREAD),
 * saying why; the admin's lines stay. Where ours was changed too, it
 * leaves the file alone (-ECANCELED). */
static void test_revert_in_a_refused_file(void **state)
{
    struct fix *f = *state;
    struct smbconf_change ch = {.expect = LEGACY, .rcvbuf = 262144, .sndbuf = 262144};
    char *before, *after, *want;
    struct smbconf_result res;
    struct smbconf_plan pl;
    struct err e = {{0}};
    FILE *c;

    assert_int_equal(smbconf_prepare(f->conf, f->state_dir, &ch, &pl, &res, &e), 0);
    assert_int_equal(smbconf_write(&pl, &res, &e), 0);
    smbconf_plan_free(&pl);
    append(f->conf, "[other]\n   include = local.conf\n");
    assert_int_equal(smbconf_revert(f->conf, f->state_dir, &res.edit, &e), SMBCONF_UNDONE_UNREAD);
    assert_non_null(strstr(e.msg, "taken back"));
    assert_non_null(strstr(e.msg, "a relative path in an include"));
    after = read_all(f->conf);
    assert_non_null(strstr(after, "   socket options = " LEGACY "\n"));
    assert_non_null(strstr(after, "include = local.conf\n"));
    smbconf_result_free(&res);
    /* ours changed by hand as well: the file is left as it is */
    assert_int_equal(truncate(f->conf, (off_t)(strstr(after, "[other]") - after)), 0);
    free(after);
    assert_int_equal(smbconf_prepare(f->conf, f->state_dir, &ch, &pl, &res, &e), 0);
    assert_int_equal(smbconf_write(&pl, &res, &e), 0);
    smbconf_plan_free(&pl);
    append(f->conf, "[other]\n   include = local.conf\n");
    before = read_all(f->conf);
    want = strstr(before, "SO_RCVBUF=262144");
    assert_non_null(want);
    want[strlen("SO_RCVBUF=")] = '3'; /* 362144 */
    c = fopen(f->conf, "w");
    assert_non_null(c);
    fputs(before, c);
    assert_int_equal(fclose(c), 0);
    assert_int_equal(smbconf_revert(f->conf, f->state_dir, &res.edit, &e), -ECANCELED);
    assert_non_null(strstr(e.msg, "not there as it wrote it"));
    after = read_all(f->conf);
    assert_string_equal(after, before);
    free(after);
    smbconf_result_free(&res);
    free(before);
}

/* Includes Samba skips without a word (a directory, a path through a
 * file): the editor skips them too, so an edit and its take-back go on as
 * before, every byte back. Read as errors, they made the take-back fail at
 * every cycle, a live trial's value left in force. */
static void test_includes_samba_skips(void **state)
{
    struct fix *f = *state;
    struct smbconf_change ch = {.expect = LEGACY, .rcvbuf = 262144, .sndbuf = 262144};
    char *before, *after, line[700], dir[300];
    struct smbconf_result res;
    struct smbconf_plan pl;
    struct err e = {{0}};

    snprintf(dir, sizeof(dir), "%s/conf.d", f->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    /* a directory, a name under a file (ENOTDIR), a device (never opened) */
    snprintf(line, sizeof(line),
             "[global]\n   include = %s\n   include = %s/x.conf\n   include = /dev/null\n", dir,
             f->conf);
    assert_int_equal(smbconf_prepare(f->conf, f->state_dir, &ch, &pl, &res, &e), 0);
    assert_int_equal(smbconf_write(&pl, &res, &e), 0);
    smbconf_plan_free(&pl);
    append(f->conf, line);
    before = read_all(f->conf);
    assert_int_equal(smbconf_revert(f->conf, f->state_dir, &res.edit, &e), 0);
    after = read_all(f->conf);
    assert_non_null(strstr(after, "   socket options = " LEGACY "\n"));
    assert_non_null(strstr(after, line));
    assert_int_equal(strlen(after), strlen(before) - strlen("SO_RCVBUF=262144 SO_SNDBUF=262144") +
                                        strlen("SO_RCVBUF=8192 SO_SNDBUF=8192"));
    smbconf_result_free(&res);
    /* and a new edit reads past them */
    ch.expect = LEGACY;
    assert_int_equal(smbconf_prepare(f->conf, f->state_dir, &ch, &pl, &res, &e), 0);
    assert_true(res.changed);
    smbconf_plan_free(&pl);
    smbconf_result_free(&res);
    free(before);
    free(after);
}

/* An include added after our write that Samba may read but smbtuned
 * cannot (here: larger than 64 MiB): which line is in force is unknown,
 * and ours goes back all the same (SMBCONF_UNDONE_UNREAD), saying why,
 * as for a configuration the parse refuses. */
static void test_revert_past_an_unreadable_include(void **state)
{
    struct fix *f = *state;
    struct smbconf_change ch = {.expect = LEGACY, .rcvbuf = 262144, .sndbuf = 262144};
    char big[400], line[500], *after;
    struct smbconf_result res;
    struct smbconf_plan pl;
    struct err e = {{0}};
    int fd;

    snprintf(big, sizeof(big), "%s/big.conf", f->dir);
    fd = open(big, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)FILES_MAX_SIZE + 1), 0);
    assert_int_equal(close(fd), 0);
    assert_int_equal(smbconf_prepare(f->conf, f->state_dir, &ch, &pl, &res, &e), 0);
    assert_int_equal(smbconf_write(&pl, &res, &e), 0);
    smbconf_plan_free(&pl);
    snprintf(line, sizeof(line), "[global]\n   include = %s\n", big);
    append(f->conf, line);
    assert_int_equal(smbconf_revert(f->conf, f->state_dir, &res.edit, &e), SMBCONF_UNDONE_UNREAD);
    assert_non_null(strstr(e.msg, "taken back"));
    assert_non_null(strstr(e.msg, "larger than 64 MiB"));
    after = read_all(f->conf);
    assert_non_null(strstr(after, "   socket options = " LEGACY "\n"));
    assert_non_null(strstr(after, line));
    free(after);
    smbconf_result_free(&res);
}

/* Someone adds a socket options line of their own after ours while the
 * check after our write runs (a testparm that makes that edit before it
 * reads, the second time it is run: the first is prepare's): ours goes
 * back to what it replaced, theirs stays in force, and the error says the
 * change was taken back, not that restoring it failed. */
static void test_write_check_sees_a_line_added_after_ours(void **state)
{
    struct fix *f = *state;
    struct smbconf_change ch = {.expect = LEGACY, .rcvbuf = 262144, .sndbuf = 262144};
    char wrapper[400], *after;
    struct smbconf_result res;
    struct smbconf_plan pl;
    struct err e = {{0}};
    FILE *w;

    snprintf(wrapper, sizeof(wrapper), "%s/testparm", f->dir);
    w = fopen(wrapper, "w");
    assert_non_null(w);
    fprintf(w,
            "#!/bin/sh\n"
            "n=$(cat '%s/calls' 2>/dev/null || echo 0); n=$((n + 1)); echo $n > '%s/calls'\n"
            "[ $n = 2 ] && sed -i '/socket options/a\\   socket options = TCP_NODELAY' '%s'\n"
            "exec testparm \"$@\"\n",
            f->dir, f->dir, f->conf);
    assert_int_equal(fclose(w), 0);
    assert_int_equal(chmod(wrapper, 0755), 0);
    assert_int_equal(setenv("SMBTUNED_TESTPARM", wrapper, 1), 0);
    assert_int_equal(smbconf_prepare(f->conf, f->state_dir, &ch, &pl, &res, &e), 0);
    assert_true(res.changed);
    assert_true(smbconf_write(&pl, &res, &e) < 0);
    assert_int_equal(unsetenv("SMBTUNED_TESTPARM"), 0);
    smbconf_plan_free(&pl);
    assert_false(res.changed); /* taken back: nothing of ours is written */
    assert_non_null(strstr(e.msg, "the change was taken back"));
    assert_null(strstr(e.msg, "failed"));
    after = read_all(f->conf);
    assert_non_null(strstr(after, "   socket options = " LEGACY "\n"
                                  "   socket options = TCP_NODELAY\n"));
    assert_null(strstr(after, "262144"));
    smbconf_result_free(&res);
    free(after);
}

/* backup/'s copy of f->conf (malloc'ed). */
static char *backup_of(struct fix *f)
{
    char path[700], *name = smbconf_backup_name(f->conf), *b;

    assert_non_null(name);
    snprintf(path, sizeof(path), "%s/backup/%s", f->state_dir, name);
    free(name);
    b = read_all(path);
    return b;
}

/* One trial's step: the buffers, over what is in force. */
static void step(struct fix *f, const char *expect, long size, bool over_trial)
{
    struct smbconf_change ch = {
        .expect = expect, .rcvbuf = size, .sndbuf = size, .over_trial = over_trial};
    struct smbconf_result res;
    struct smbconf_plan pl;
    struct err e = {{0}};

    assert_int_equal(smbconf_prepare(f->conf, f->state_dir, &ch, &pl, &res, &e), 0);
    assert_true(res.changed);
    assert_int_equal(smbconf_write(&pl, &res, &e), 0);
    smbconf_plan_free(&pl);
    smbconf_result_free(&res);
}

/* A write over a trial of ours (the daemon's chained trials, and the
 * commit after them) keeps no backup: backup/ keeps the bytes before the
 * first trial, the admin's. Any other write keeps the bytes it replaces. */
static void test_backup_keeps_the_bytes_before_the_first_trial(void **state)
{
    struct fix *f = *state;
    char *admin = read_all(f->conf), *b, *second;

    step(f, LEGACY, 262144, false);
    b = backup_of(f);
    assert_string_equal(b, admin);
    free(b);
    step(f, "TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144", 1048576, true);
    step(f, "TCP_NODELAY SO_RCVBUF=1048576 SO_SNDBUF=1048576", 65536, true);
    b = backup_of(f);
    assert_string_equal(b, admin);
    free(b);
    /* not over a trial: what it replaces */
    second = read_all(f->conf);
    step(f, "TCP_NODELAY SO_RCVBUF=65536 SO_SNDBUF=65536", 131072, false);
    b = backup_of(f);
    assert_string_equal(b, second);
    free(b);
    free(second);
    free(admin);
}

/* The start's sweep of the backups' temporary files: taken while no
 * editor holds the edit lock, left while one does (its backup may be
 * under way). */
static void test_backup_sweep_waits_for_no_editor(void **state)
{
    struct fix *f = *state;
    char first[400], tmp[500], lockp[400];
    struct err e = {{0}};
    struct stat st;
    int lock, fd;

    snprintf(first, sizeof(first), "%s/backup/first", f->state_dir);
    assert_int_equal(files_mkdir_p(first), 0);
    snprintf(tmp, sizeof(tmp), "%s/" FILES_TMP_PREFIX "x%%2Fsmb.conf.Ab3dE9", first);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    close(fd);
    snprintf(lockp, sizeof(lockp), "%s/smbconf.lock", f->state_dir);
    lock = files_lock(lockp, 0, &e);
    assert_true(lock >= 0);
    smbconf_backup_sweep(f->state_dir);
    assert_int_equal(stat(tmp, &st), 0);
    close(lock);
    smbconf_backup_sweep(f->state_dir);
    assert_int_equal(stat(tmp, &st), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_prepare_write_revert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_backup_sweep_waits_for_no_editor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_backup_keeps_the_bytes_before_the_first_trial, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_revert_sweeps_a_killed_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_revert_past_an_uncertain_include, setup, teardown),
        cmocka_unit_test_setup_teardown(test_percent_include_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_includes_samba_skips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_revert_past_an_unreadable_include, setup, teardown),
        cmocka_unit_test_setup_teardown(test_testparm_not_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_check_sees_a_line_added_after_ours, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_revert_in_a_refused_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_tells_of_a_kept_file, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
