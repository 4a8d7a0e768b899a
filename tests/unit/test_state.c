/* Unit tests for lib/state: the state file survives a round trip, bytes
 * and all; a damaged, partial or newer one is refused with its file and
 * line, and state_load keeps it aside and holds off. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "files.h"
#include "state.h"

static int parse(const char *text, struct state *s, struct err *e)
{
    return state_parse(text, strlen(text), "/var/lib/smbtuned/state", s, e);
}

static void test_round_trip(void **state)
{
    struct state a = {0}, b;
    struct err e;
    char *text;

    (void)state;
    a.have_incumbent = true;
    a.rcvbuf = 262144;
    a.write_mbps = 11.59;
    a.hold = true;
    a.cycles = 7;
    a.written_at = 1764590000;
    a.cycle_at = 1764593600;
    a.next_at = STATE_TIME_MAX;
    a.clients_at = 1764593598;
    a.clients = 3;
    a.clients_sndbuf_limited = 1;
    a.clients_network = 2;
    a.clients_smbd = 4;
    a.rtt_median_ms = 40.25;
    a.rtt_max_ms = 80.5;
    a.bdp_max = 65536;
    a.converged = true;
    a.ref_channels = 2;
    a.ref_rate[1] = 1;
    a.ref_mbps[0] = 1126.25;
    a.ref_n[0] = 5;
    a.ref_ss[1] = 0.125;
    a.ref_df[1] = 41;
    a.ref_reject[0] = 0.6875;
    assert_int_equal(state_set_str(&a.cycle_result, "committed SO_RCVBUF=262144\n(2 lines)"), 0);
    assert_int_equal(state_set_str(&a.last_written, "TCP_NODELAY SO_RCVBUF=262144"), 0);
    assert_int_equal(state_set_str(&a.hold_reason, "edited by hand\\ at line 3"), 0);
    a.pending = true;
    assert_int_equal(state_set_str(&a.pending_edit.file, "/etc/samba/smb.conf"), 0);
    assert_int_equal(
        state_set_str(&a.pending_edit.written, "[global]\r\n\tsocket options = A\t\x01\r\n"), 0);
    assert_int_equal(state_set_str(&a.pending_edit.original, ""), 0);
    a.pending_edit.line_off = 10;
    a.pending_edit.line_len = 21;
    assert_int_equal(state_set_str(&a.pending_edit.prev, "socket options = X\tY"), 0);

    text = state_format(&a);
    assert_non_null(text);
    assert_non_null(strstr(text, "\nversion 10\n"));
    /* cycles stays last: a file cut after a whole line lacks it */
    assert_non_null(strstr(text, "\ncycles 7\n"));
    assert_string_equal(strstr(text, "\ncycles 7\n"), "\ncycles 7\n");
    assert_int_equal(parse(text, &b, &e), 0);
    assert_true(b.have_incumbent);
    assert_int_equal(b.rcvbuf, 262144);
    assert_int_equal(b.sndbuf, 0);
    assert_true(b.write_mbps > 11.58 && b.write_mbps < 11.60);
    assert_true(b.hold);
    assert_int_equal(b.cycles, 7);
    assert_int_equal(b.written_at, 1764590000);
    assert_int_equal(b.cycle_at, 1764593600);
    assert_int_equal(b.next_at, STATE_TIME_MAX);
    assert_int_equal(b.clients_at, 1764593598);
    assert_int_equal(b.clients, 3);
    assert_int_equal(b.clients_sndbuf_limited, 1);
    assert_int_equal(b.clients_rcvbuf_limited, 0);
    assert_int_equal(b.clients_network, 2);
    assert_int_equal(b.clients_smbd, 4);
    assert_true(b.rtt_median_ms == 40.25 && b.rtt_max_ms == 80.5);
    assert_int_equal(b.bdp_max, 65536);
    assert_true(b.converged);
    assert_int_equal(b.ref_channels, 2);
    assert_int_equal(b.ref_rate[0], 0);
    assert_int_equal(b.ref_rate[1], 1);
    assert_true(b.ref_mbps[0] == 1126.25 && b.ref_n[0] == 5 && b.ref_ss[1] == 0.125);
    assert_true(b.ref_df[1] == 41 && b.ref_reject[0] == 0.6875);
    assert_string_equal(b.cycle_result, a.cycle_result);
    assert_string_equal(b.last_written, a.last_written);
    assert_string_equal(b.hold_reason, a.hold_reason);
    assert_string_equal(b.pending_edit.written, a.pending_edit.written);
    assert_string_equal(b.pending_edit.original, "");
    assert_int_equal(b.pending_edit.line_off, 10);
    assert_int_equal(b.pending_edit.line_len, 21);
    assert_string_equal(b.pending_edit.prev, "socket options = X\tY");
    assert_null(b.kernel);
    free(text);
    state_free(&a);
    state_free(&b);
}

/* A complete file of today's format, without its version line: what
 * smbtuned wrote before the format had one. */
static const char legacy[] = "# smbtuned state: written by smbtuned, read at start-up\n"
                             "have_incumbent yes\n"
                             "rcvbuf 262144\n"
                             "sndbuf 0\n"
                             "write_mbps 11.590000\n"
                             "read_mbps 0.000000\n"
                             "last_written TCP_NODELAY SO_RCVBUF=262144\n"
                             "hold no\n"
                             "pending no\n"
                             "pending_commit no\n"
                             "pending_line_off 0\n"
                             "pending_line_len 0\n"
                             "cycles 3\n";

/* legacy with its `from` line (1-based, after the comment) replaced by to
 * (NULL: removed; a string with several lines: inserted). */
static char *legacy_with(int line, const char *to)
{
    char *out = malloc(sizeof(legacy) + (to ? strlen(to) : 0) + 1), *p = out;
    const char *l = legacy;

    for (int n = 1; *l; n++) {
        const char *nl = strchr(l, '\n') + 1;

        if (n == line) {
            if (to != NULL)
                p += sprintf(p, "%s\n", to);
        } else {
            memcpy(p, l, (size_t)(nl - l));
            p += nl - l;
        }
        l = nl;
    }
    *p = '\0';
    return out;
}

static void assert_damaged(const char *text, size_t len, const char *want)
{
    struct state s;
    struct err e = {{0}};

    assert_int_equal(state_parse(text, len, "/var/lib/smbtuned/state", &s, &e), -EBADMSG);
    if (strstr(e.msg, want) == NULL)
        fail_msg("message '%s' lacks '%s'", e.msg, want);
    assert_null(s.hold_reason);
}

static void assert_damaged_str(const char *text, const char *want)
{
    assert_damaged(text, strlen(text), want);
}

/* legacy with one line replaced (legacy_with) is damaged, as want says. */
static void assert_legacy_damaged(int line, const char *to, const char *want)
{
    char *t = legacy_with(line, to);

    assert_damaged_str(t, want);
    free(t);
}

static void test_legacy_and_version(void **state)
{
    struct state s;
    struct err e = {{0}};
    char *t;

    (void)state;
    /* An upgrade keeps the state: no version line is version 1. */
    assert_int_equal(parse(legacy, &s, &e), 0);
    assert_int_equal(s.rcvbuf, 262144);
    assert_int_equal(s.cycles, 3);
    state_free(&s);
    t = legacy_with(1, "# smbtuned state\nversion 1");
    assert_int_equal(parse(t, &s, &e), 0);
    state_free(&s);
    free(t);
    assert_legacy_damaged(1, "version 11",
                          "state:1: format version 11, written by a newer smbtuned (expected "
                          "version 10 or older)");
    assert_legacy_damaged(1, "version 99999999999999999999", "state:1: bad value for version");
    assert_legacy_damaged(3, "version 1", "state:3: 'version' after other entries");
}

/* Version 2's keys (the times --status tells): a file of version 1 reads
 * without them, as zeros; one of version 2 must have every scalar; each
 * time is a whole number from 0 to STATE_TIME_MAX; version 1 never had
 * them, so one in a version 1 file is damage. */
static const char v2_times[] = "written_at 1764590000\n"
                               "cycle_at 1764593600\n"
                               "cycle_result committed SO_RCVBUF=262144\n"
                               "next_at 1764597200\n"
                               "cycles 3";

static void test_version2_times(void **state)
{
    struct state s;
    struct err e = {{0}};
    char *t, *u;

    (void)state;
    /* version 1 without them: zeros and NULL */
    t = legacy_with(1, "# smbtuned state\nversion 1");
    assert_int_equal(parse(t, &s, &e), 0);
    assert_int_equal(s.written_at, 0);
    assert_int_equal(s.cycle_at, 0);
    assert_int_equal(s.next_at, 0);
    assert_null(s.cycle_result);
    state_free(&s);
    free(t);
    /* version 2 with them */
    t = legacy_with(1, "# smbtuned state\nversion 2");
    u = strstr(t, "cycles 3");
    {
        char *v = malloc(strlen(t) + sizeof(v2_times) + 1);

        memcpy(v, t, (size_t)(u - t));
        sprintf(v + (u - t), "%s\n", v2_times);
        free(t);
        t = v;
    }
    assert_int_equal(parse(t, &s, &e), 0);
    assert_int_equal(s.written_at, 1764590000);
    assert_int_equal(s.cycle_at, 1764593600);
    assert_int_equal(s.next_at, 1764597200);
    assert_string_equal(s.cycle_result, "committed SO_RCVBUF=262144");
    state_free(&s);
    /* version 2 without one of its scalars: incomplete; the string is
     * optional, as every string */
    {
        char *v = strdup(t), *w = strstr(v, "cycle_at ");

        memmove(w, strchr(w, '\n') + 1, strlen(strchr(w, '\n') + 1) + 1);
        assert_damaged_str(v, "the file ends without 'cycle_at'");
        free(v);
        v = strdup(t);
        w = strstr(v, "cycle_result ");
        memmove(w, strchr(w, '\n') + 1, strlen(strchr(w, '\n') + 1) + 1);
        assert_int_equal(parse(v, &s, &e), 0);
        assert_null(s.cycle_result);
        state_free(&s);
        free(v);
    }
    /* ranges: 0 and STATE_TIME_MAX are in, one more and a sign are not */
    {
        static const struct {
            const char *from, *to;
            int ok;
        } cases[] = {
            {"next_at 1764597200", "next_at 0", 1},
            {"next_at 1764597200", "next_at 253402300799", 1},
            {"next_at 1764597200", "next_at 253402300800", 0},
            {"written_at 1764590000", "written_at -1", 0},
            {"cycle_at 1764593600", "cycle_at 1.5", 0},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            char *v = malloc(strlen(t) + 32), *w;

            strcpy(v, t);
            w = strstr(v, cases[i].from);
            assert_non_null(w);
            memmove(w + strlen(cases[i].to), w + strlen(cases[i].from),
                    strlen(w + strlen(cases[i].from)) + 1);
            memcpy(w, cases[i].to, strlen(cases[i].to));
            if (cases[i].ok) {
                assert_int_equal(parse(v, &s, &e), 0);
                state_free(&s);
            } else {
                assert_damaged_str(v, "bad value for ");
                assert_damaged_str(v, "(expected a whole number from 0 to 253402300799)");
            }
            free(v);
        }
    }
    free(t);
    /* in a version 1 file (or one without a version line) they are damage */
    assert_legacy_damaged(13, "written_at 5\ncycles 3",
                          "state:13: 'written_at' in a file of format version 1 (expected it "
                          "from version 2 on)");
    t = legacy_with(1, "version 1");
    {
        char *v = malloc(strlen(t) + 64), *w = strstr(t, "cycles 3");

        memcpy(v, t, (size_t)(w - t));
        strcpy(v + (w - t), "cycle_result ok\ncycles 3\n");
        assert_damaged_str(v, "'cycle_result' in a file of format version 1");
        free(v);
    }
    free(t);
}

/* Version 3's keys (the real connections' summary --status tells): a
 * file of version 2 reads without them, as zeros; one of version 3 must
 * have every one; in a version 2 file one is damage. */
static void test_version3_clients(void **state)
{
    static const char v3[] = "clients_at 1764593598\n"
                             "clients 2\n"
                             "clients_sndbuf_limited 1\n"
                             "clients_rcvbuf_limited 0\n"
                             "clients_client_window 0\n"
                             "clients_network 1\n"
                             "clients_idle 0\n"
                             "rtt_median_ms 20.500000\n"
                             "rtt_max_ms 40.100000\n"
                             "bdp_max 131072\n";
    struct state s;
    struct err e = {{0}};
    char *t, *v, *w;

    (void)state;
    t = legacy_with(1, "# smbtuned state\nversion 2");
    /* with version 2's keys: a version 2 file, no clients */
    w = strstr(t, "cycles 3");
    if (w == NULL) {
        fail();
        return;
    }
    v = malloc(strlen(t) + sizeof(v2_times) + sizeof(v3) + 1);
    memcpy(v, t, (size_t)(w - t));
    sprintf(v + (w - t), "%s\n", v2_times);
    free(t);
    assert_int_equal(parse(v, &s, &e), 0);
    assert_int_equal(s.clients_at, 0);
    assert_int_equal(s.bdp_max, 0);
    state_free(&s);
    /* the same with the clients' keys: damaged as version 2, read as 3 */
    w = strstr(v, "cycles 3");
    /* not only asserted: GCC's -Warray-bounds (with the sanitizers) must
     * see that w is not NULL */
    if (w == NULL) {
        fail();
        return;
    }
    memmove(w + strlen(v3), w, strlen(w) + 1);
    memcpy(w, v3, strlen(v3));
    assert_damaged_str(v, "'clients_at' in a file of format version 2 (expected it from version 3");
    memcpy(strstr(v, "version 2"), "version 3", 9);
    assert_int_equal(parse(v, &s, &e), 0);
    assert_int_equal(s.clients_at, 1764593598);
    assert_int_equal(s.clients, 2);
    assert_int_equal(s.clients_sndbuf_limited, 1);
    assert_int_equal(s.clients_network, 1);
    assert_true(s.rtt_max_ms > 40.09 && s.rtt_max_ms < 40.11);
    assert_int_equal(s.bdp_max, 131072);
    state_free(&s);
    /* version 3 without one of them: incomplete */
    w = strstr(v, "bdp_max ");
    memmove(w, strchr(w, '\n') + 1, strlen(strchr(w, '\n') + 1) + 1);
    assert_damaged_str(v, "the file ends without 'bdp_max'");
    free(v);
}

/* text (state_format's) with its version line saying v (at most
 * STATE_VERSION: no longer than it was). */
static void set_version(char *text, int v)
{
    char *from = strstr(text, "\nversion "), *to;
    char line[32];
    int n = snprintf(line, sizeof(line), "\nversion %d", v);

    assert_non_null(from);
    to = strchr(from + 1, '\n');
    assert_non_null(to);
    assert_true(n <= to - from);
    memmove(from + n, to, strlen(to) + 1);
    memcpy(from, line, (size_t)n);
}

/* Version 4's key (connections smbd itself held back): a version 3 file
 * reads without it, as 0; in a version 3 file it is damage; a version 4
 * file must have it. */
/* text (state_format's) as version 4 wrote it: without version 5's keys,
 * which run from converged to cycles. */
static void as_version4(char *text)
{
    char *from = strstr(text, "\nconverged "), *to = strstr(text, "\ncycles ");

    assert_non_null(from);
    assert_non_null(to);
    memmove(from, to, strlen(to) + 1);
    set_version(text, 4);
}

static void test_version4_clients_smbd(void **state)
{
    struct state a = {0}, s;
    struct err e = {{0}};
    char *text, *w;

    (void)state;
    a.clients_at = 1764593598;
    a.clients = 1;
    a.clients_smbd = 1;
    text = state_format(&a);
    assert_non_null(text);
    as_version4(text);
    w = strstr(text, "clients_smbd 1\n");
    if (w == NULL) {
        fail();
        return;
    }
    /* damaged as version 3 */
    memcpy(strstr(text, "version 4"), "version 3", 9);
    assert_damaged_str(text, "'clients_smbd' in a file of format version 3 (expected it from "
                             "version 4");
    /* a version 3 file as version 3 wrote it: read, 0 */
    memmove(w, strchr(w, '\n') + 1, strlen(strchr(w, '\n') + 1) + 1);
    assert_int_equal(parse(text, &s, &e), 0);
    assert_int_equal(s.clients_smbd, 0);
    assert_int_equal(s.clients, 1);
    state_free(&s);
    /* version 4 without it: incomplete */
    memcpy(strstr(text, "version 3"), "version 4", 9);
    assert_damaged_str(text, "the file ends without 'clients_smbd'");
    free(text);
}

/* text (state_format's) without the line of key. */
static void drop_key(char *text, const char *key)
{
    char *from = strstr(text, key), *to;

    assert_non_null(from);
    to = strchr(from + 1, '\n');
    assert_non_null(to);
    memmove(from, to, strlen(to) + 1);
}

/* text (state_format's) as version 9 wrote it: without the advice. */
static void as_version9(char *text)
{
    static const char *const keys[] = {"\nadvice ", "\nadvice_rcvbuf ", "\nadvice_sndbuf ",
                                       "\nadvised_from_rcvbuf ", "\nadvised_from_sndbuf "};

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strstr(text, keys[i]) != NULL)
            drop_key(text, keys[i]);
    set_version(text, 9);
}

/* text (state_format's) as version 8 wrote it: without rates_loopback. */
static void as_version8(char *text)
{
    as_version9(text);
    drop_key(text, "\nrates_loopback ");
    set_version(text, 8);
}

/* text (state_format's) as version 7 wrote it: without pending_unrestarted. */
static void as_version7(char *text)
{
    as_version8(text);
    drop_key(text, "\npending_unrestarted ");
    memcpy(strstr(text, "version 8"), "version 7", 9);
}

/* text (state_format's) as version 6 wrote it: without pending_restart. */
static void as_version6(char *text)
{
    as_version7(text);
    drop_key(text, "\npending_restart ");
    memcpy(strstr(text, "version 7"), "version 6", 9);
}

/* a's pending record in a file of version v, which added key (as_v: a's
 * text as version v wrote it; NULL for this version), is damaged as
 * version v - 1; as version v - 1 wrote it (as_older), it reads into s
 * (the caller frees it). */
static void assert_pending_key(const struct state *a, const char *key, int v, void (*as_v)(char *),
                               void (*as_older)(char *), struct state *s)
{
    struct err e = {{0}};
    char from[16], to[16], want[128];
    char *text = state_format(a);

    assert_non_null(text);
    if (as_v)
        as_v(text);
    snprintf(from, sizeof(from), "version %d", v);
    snprintf(to, sizeof(to), "version %d", v - 1);
    memcpy(strstr(text, from), to, strlen(to));
    snprintf(want, sizeof(want), "'%s' in a file of format version %d (expected it from version %d",
             key, v - 1, v);
    assert_damaged_str(text, want);
    free(text);
    text = state_format(a);
    assert_non_null(text);
    as_older(text);
    assert_int_equal(parse(text, s, &e), 0);
    free(text);
}

static void test_version5_reference(void **state)
{
    struct state a = {0}, s;
    struct err e = {{0}};
    char *text, *w, *end;

    (void)state;
    a.converged = true;
    a.ref_channels = 1;
    text = state_format(&a);
    assert_non_null(text);
    w = strstr(text, "converged yes\n");
    end = strstr(text, "\ncycles ");
    if (w == NULL || end == NULL) {
        fail();
        return;
    }
    /* no ref_settings (none set): a version 5 file as version 5 wrote it */
    assert_null(strstr(text, "ref_settings"));
    as_version6(text);
    memcpy(strstr(text, "version 6"), "version 5", 9);
    assert_int_equal(parse(text, &s, &e), 0);
    assert_true(s.converged);
    assert_null(s.ref_settings);
    state_free(&s);
    /* damaged as version 4 */
    memcpy(strstr(text, "version 5"), "version 4", 9);
    assert_damaged_str(text, "'converged' in a file of format version 4 (expected it from "
                             "version 5");
    /* a version 4 file as version 4 wrote it: read, not converged (w
     * and end found again: as_version6 moved what follows its keys) */
    w = strstr(text, "converged yes\n");
    end = strstr(text, "\ncycles ");
    assert_non_null(w);
    assert_non_null(end);
    memmove(w, end + 1, strlen(end + 1) + 1);
    assert_int_equal(parse(text, &s, &e), 0);
    assert_false(s.converged);
    assert_int_equal(s.ref_channels, 0);
    state_free(&s);
    /* version 5 without them: incomplete */
    memcpy(strstr(text, "version 4"), "version 5", 9);
    assert_damaged_str(text, "the file ends without 'converged'");
    free(text);
}

/* Version 6: the settings the reference was measured with, kept as
 * written, and damage in a file of version 5. */
static void test_version6_settings(void **state)
{
    struct state a = {0}, s;
    struct err e = {{0}};
    char *text;

    (void)state;
    a.converged = true;
    a.ref_channels = 1;
    assert_int_equal(state_set_str(&a.ref_settings, "url=- size=67108864 trials=shadow"), 0);
    text = state_format(&a);
    assert_non_null(text);
    assert_int_equal(parse(text, &s, &e), 0);
    assert_string_equal(s.ref_settings, a.ref_settings);
    state_free(&s);
    as_version6(text);
    memcpy(strstr(text, "version 6"), "version 5", 9);
    assert_damaged_str(text, "'ref_settings' in a file of format version 5 (expected it from "
                             "version 6");
    free(text);
    state_free(&a);
}

/* a, formatted, is damaged, and the message has want */
static void assert_format_damaged(const struct state *a, const char *want)
{
    char *text = state_format(a);

    assert_non_null(text);
    assert_damaged_str(text, want);
    free(text);
}

/* Version 7: whether a pending commit restarts smbd, kept as written; a
 * file of version 6 reads without it, as unknown (a start asks the kernel,
 * as version 6 did); in a version 6 file it is damage; it belongs to a
 * pending commit only. */
static void test_version7_pending_restart(void **state)
{
    struct state a = {0}, s;
    struct err e = {{0}};
    char *text, *w;

    (void)state;
    a.pending = a.pending_commit = true;
    a.pending_restart = STATE_RESTART_YES;
    assert_int_equal(state_set_str(&a.pending_edit.file, "/etc/samba/smb.conf"), 0);
    assert_int_equal(state_set_str(&a.pending_edit.written, "socket options = X\n"), 0);
    assert_int_equal(state_set_str(&a.pending_edit.original, ""), 0);
    text = state_format(&a);
    assert_non_null(text);
    assert_int_equal(parse(text, &s, &e), 0);
    assert_int_equal(s.pending_restart, STATE_RESTART_YES);
    state_free(&s);
    free(text);
    /* damaged as version 6; a version 6 file as version 6 wrote it:
     * read, unknown */
    assert_pending_key(&a, "pending_restart", 7, as_version7, as_version6, &s);
    assert_true(s.pending_commit);
    assert_int_equal(s.pending_restart, STATE_RESTART_UNKNOWN);
    state_free(&s);
    /* out of range, for a trial, with nothing pending */
    a.pending_restart = STATE_RESTART_YES + 1;
    assert_format_damaged(&a, "bad value for pending_restart");
    a.pending_restart = STATE_RESTART_NO;
    a.pending_commit = false;
    assert_format_damaged(&a, "pending_restart 1 for a pending trial (expected 0: only a commit "
                              "restarts smbd)");
    a.pending = false;
    smbconf_edit_free(&a.pending_edit);
    text = state_format(&a);
    assert_non_null(text);
    w = strstr(text, "\npending_restart 1\n");
    assert_non_null(w);
    assert_damaged_str(text, "parts of a pending edit, but 'pending no'");
    free(text);
    state_free(&a);
}

/* Version 8: a trial's record that was a commit whose restart of smbd
 * failed, kept as written; a file of version 7 reads without it (a trial's
 * record, as version 7 wrote it); in a version 7 file it is damage; it
 * belongs to a pending trial's record only. */
static void test_version8_pending_unrestarted(void **state)
{
    struct state a = {0}, s;
    struct err e = {{0}};
    char *text;

    (void)state;
    a.pending = a.pending_unrestarted = true;
    assert_int_equal(state_set_str(&a.pending_edit.file, "/etc/samba/smb.conf"), 0);
    assert_int_equal(state_set_str(&a.pending_edit.written, "socket options = X\n"), 0);
    assert_int_equal(state_set_str(&a.pending_edit.original, ""), 0);
    text = state_format(&a);
    assert_non_null(text);
    assert_non_null(strstr(text, "\npending_unrestarted yes\n"));
    assert_int_equal(parse(text, &s, &e), 0);
    assert_true(s.pending && s.pending_unrestarted);
    assert_false(s.pending_commit);
    state_free(&s);
    free(text);
    /* damaged as version 7; a version 7 file as version 7 wrote it:
     * read, a trial's record */
    assert_pending_key(&a, "pending_unrestarted", 8, as_version8, as_version7, &s);
    assert_true(s.pending);
    assert_false(s.pending_unrestarted);
    state_free(&s);
    /* for a commit, with nothing pending */
    a.pending_commit = true;
    assert_format_damaged(&a, "pending_unrestarted yes for a pending commit (expected it only "
                              "for a trial's record");
    a.pending = a.pending_commit = false;
    smbconf_edit_free(&a.pending_edit);
    assert_format_damaged(&a, "parts of a pending edit, but 'pending no'");
    state_free(&a);
}

/* Version 9: the incumbent's rates measured on loopback, kept; a file of
 * version 8 reads without it (false: --status says what it said before);
 * in a version 8 file it is damage. */
static void test_version9_rates_loopback(void **state)
{
    struct state a = {0}, s;
    struct err e = {{0}};
    char *text;

    (void)state;
    a.have_incumbent = a.rates_loopback = true;
    a.write_mbps = 100;
    text = state_format(&a);
    assert_non_null(text);
    assert_non_null(strstr(text, "\nrates_loopback yes\n"));
    assert_int_equal(parse(text, &s, &e), 0);
    assert_true(s.rates_loopback);
    state_free(&s);
    as_version8(text);
    assert_int_equal(parse(text, &s, &e), 0);
    assert_false(s.rates_loopback);
    assert_true(s.have_incumbent);
    state_free(&s);
    free(text);
    text = state_format(&a);
    assert_non_null(text);
    as_version9(text);
    set_version(text, 8);
    assert_damaged_str(text, "'rates_loopback' in a file of format version 8 (expected it from "
                             "version 9");
    free(text);
}

/* Version 10: advise mode's advice, with the line it was searched from,
 * kept beside its reference; a file of version 9 reads without it (no
 * advice); in a version 9 file it is damage, and so is advice without
 * its reference, or its buffers without advice. state_unconverge forgets
 * it with the reference. */
static void test_version10_advice(void **state)
{
    struct state a = {0}, s;
    struct err e = {{0}};
    char *text;

    (void)state;
    a.have_incumbent = a.converged = true;
    a.rcvbuf = a.advised_from_rcvbuf = 65536;
    a.ref_channels = 1;
    a.ref_mbps[0] = 100;
    a.advice_rcvbuf = 262144;
    a.advice_sndbuf = 0;
    assert_int_equal(state_set_str(&a.advice, "TCP_NODELAY SO_RCVBUF=262144"), 0);
    text = state_format(&a);
    assert_non_null(text);
    assert_non_null(strstr(text, "\nadvice TCP_NODELAY SO_RCVBUF=262144\n"));
    assert_int_equal(parse(text, &s, &e), 0);
    assert_string_equal(s.advice, "TCP_NODELAY SO_RCVBUF=262144");
    assert_int_equal(s.advice_rcvbuf, 262144);
    assert_int_equal(s.advice_sndbuf, 0);
    assert_int_equal(s.advised_from_rcvbuf, 65536);
    assert_int_equal(s.advised_from_sndbuf, 0);
    assert_true(s.converged);
    state_unconverge(&s);
    assert_null(s.advice);
    assert_int_equal(s.advice_rcvbuf + s.advised_from_rcvbuf, 0);
    state_free(&s);
    as_version9(text);
    assert_non_null(strstr(text, "\nversion 9\n"));
    assert_int_equal(parse(text, &s, &e), 0);
    assert_null(s.advice);
    assert_int_equal(s.advice_rcvbuf + s.advised_from_rcvbuf, 0);
    assert_true(s.converged);
    assert_int_equal(s.rcvbuf, 65536);
    state_free(&s);
    free(text);
    text = state_format(&a);
    assert_non_null(text);
    set_version(text, 9);
    assert_damaged_str(text, "'advice' in a file of format version 9 (expected it from version 10");
    free(text);
    a.converged = false;
    assert_format_damaged(&a, "advice, but 'converged no'");
    a.converged = true;
    state_set_str(&a.advice, NULL);
    assert_format_damaged(&a, "advice's buffers without advice");
    state_free(&a);
}

static void test_pending_incomplete(void **state)
{
    char *t;

    (void)state;
    /* The reproducer of the crash loop. */
    assert_damaged_str("pending yes\n", "state:1: the file ends without 'have_incumbent'");
    /* pending_written without pending_original */
    assert_legacy_damaged(9,
                          "pending yes\npending_file /etc/samba/smb.conf\n"
                          "pending_written [global]\\n\\tsocket options = X\\n",
                          "state:9: a pending edit without pending_original");
    assert_legacy_damaged(9, "pending yes\npending_written x\npending_original y",
                          "state:9: a pending edit without pending_file");
    assert_legacy_damaged(9,
                          "pending yes\npending_file smb.conf\npending_written x\n"
                          "pending_original ",
                          "not an absolute path");
    /* the line lies outside the bytes written */
    t = legacy_with(9, "pending yes\npending_file /s\npending_written abc\npending_original ");
    {
        char *u = strstr(t, "pending_line_len 0");

        memcpy(u, "pending_line_len 4", 18);
    }
    assert_damaged_str(t, "state:9: the pending edit's line (pending_line_off 0, "
                          "pending_line_len 4) lies outside its pending_written (3 bytes)");
    free(t);
    /* parts of an edit without pending yes */
    assert_legacy_damaged(9, "pending no\npending_original x",
                          "state:9: parts of a pending edit, but 'pending no'");
    assert_legacy_damaged(8, "hold no\nhold_reason why", "state:8: a hold_reason, but 'hold no'");
}

static void test_truncated(void **state)
{
    size_t cut = strstr(legacy, "pending_line_len") - legacy + 10;

    (void)state;
    /* cut inside a line: the line has no end */
    assert_damaged(legacy, cut, "state:12: 'pending_li' has no line end: the file was cut short");
    /* cut after a line: keys are missing */
    assert_damaged(legacy, strstr(legacy, "cycles") - legacy,
                   "state:12: the file ends without 'cycles'");
    assert_damaged("", 0, "state:1: the file ends without 'have_incumbent'");
    assert_damaged_str("keyonly\n", "state:1: 'keyonly': expected 'key value'");
}

static void test_bad_numbers(void **state)
{
    static const struct {
        int line;
        const char *to, *want;
    } cases[] = {
        {4, "sndbuf -3",
         "state:4: bad value for sndbuf: '-3' (expected a whole number from 0 "
         "to 2147483647)"},
        {3, "rcvbuf 2147483648", "state:3: bad value for rcvbuf"},
        {3, "rcvbuf 0x10", "state:3: bad value for rcvbuf"},
        {3, "rcvbuf  5", "state:3: bad value for rcvbuf"},
        {3, "rcvbuf ", "state:3: bad value for rcvbuf"},
        {13, "cycles 99999999999999999999", "state:13: bad value for cycles"},
        {11, "pending_line_off -1", "state:11: bad value for pending_line_off"},
        {5, "write_mbps nan", "state:5: bad value for write_mbps"},
        {5, "write_mbps -1.0", "state:5: bad value for write_mbps"},
        {5, "write_mbps 1e300", "state:5: bad value for write_mbps"},
        {5, "write_mbps 0x1p3", "state:5: bad value for write_mbps"},
        {8, "hold maybe", "state:8: bad value for hold: 'maybe' (expected yes or no)"},
        {7, "last_written a\\q", "state:7: bad value for last_written"},
        {7, "last_written a\\x00b", "state:7: bad value for last_written"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_legacy_damaged(cases[i].line, cases[i].to, cases[i].want);
}

static void test_unknown_duplicate_nul(void **state)
{
    char *t;
    size_t len;

    (void)state;
    assert_legacy_damaged(13, "cycles 3\nfuture_key whatever",
                          "state:14: unknown key 'future_key' (expected a key of format version "
                          "10)");
    assert_legacy_damaged(13, "cycles 3\nrcvbuf 5",
                          "state:14: 'rcvbuf' given twice (first at line 3; expected each key "
                          "once)");
    /* A NUL inside: what follows it on the line, and the lines after,
     * must not be dropped silently. */
    t = strdup(legacy);
    len = strlen(t);
    t[strstr(t, "hold no") - t + 4] = '\0';
    assert_damaged(t, len, "state:8: a NUL byte at column 5");
    /* and one after the last line */
    memcpy(t, legacy, len);
    t = realloc(t, len + 3);
    memcpy(t + len, "\0x\n", 3);
    assert_damaged(t, len + 3, "state:14: a NUL byte at column 1");
    free(t);
    assert_legacy_damaged(8, "hold no\r", "state:8: a control character at column 8");
}

/* ---- state_load on a directory of our own ---- */

static char *tmpdir(void)
{
    char *d = strdup("/tmp/smbtuned-test-state-XXXXXX");

    assert_non_null(mkdtemp(d));
    return d;
}

static void write_file(const char *dir, const char *name, const char *data, size_t len)
{
    char p[4096];
    FILE *f;

    snprintf(p, sizeof(p), "%s/%s", dir, name);
    f = fopen(p, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static char *read_back(const char *dir, const char *name)
{
    char p[4096], *buf;
    size_t len;

    snprintf(p, sizeof(p), "%s/%s", dir, name);
    assert_int_equal(files_read(p, &buf, &len, NULL), 0);
    return buf;
}

/* Names in dir starting with prefix, sorted, joined by spaces. */
static int count_prefixed(const char *dir, const char *prefix, char names[][256], int max)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort), k = 0;

    assert_true(n >= 0);
    for (int i = 0; i < n; i++) {
        if (strncmp(ents[i]->d_name, prefix, strlen(prefix)) == 0 && k < max)
            snprintf(names[k++], 256, "%s", ents[i]->d_name);
        free(ents[i]);
    }
    free(ents);
    return k;
}

static void rm_rf(const char *dir)
{
    char cmd[4200];

    snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_load_keeps_damaged_aside(void **state)
{
    char *dir = tmpdir(), names[4][256], *text, *t;
    struct state s;
    struct err e = {{0}};

    (void)state;
    /* a good file loads as it is */
    write_file(dir, "state", legacy, strlen(legacy));
    assert_int_equal(state_load(dir, &s, &e), 0);
    assert_false(s.hold);
    state_free(&s);
    assert_int_equal(count_prefixed(dir, "state.damaged-", names, 4), 0);

    /* The reproducer: held, with the kept file named; the file itself
     * unchanged under its new name. */
    write_file(dir, "state", "pending yes\n", 12);
    assert_int_equal(state_load(dir, &s, &e), 0);
    assert_true(s.hold);
    assert_false(s.pending);
    assert_int_equal(count_prefixed(dir, "state.damaged-", names, 4), 1);
    assert_non_null(strstr(s.hold_reason, names[0]));
    assert_non_null(strstr(s.hold_reason, "/state:1: the file ends without"));
    text = read_back(dir, names[0]);
    assert_string_equal(text, "pending yes\n");
    free(text);
    state_free(&s);
    /* the hold is on disk: a restart holds too, and keeps nothing more */
    assert_int_equal(state_load(dir, &s, &e), 0);
    assert_true(s.hold);
    assert_non_null(strstr(s.hold_reason, names[0]));
    state_free(&s);
    assert_int_equal(count_prefixed(dir, "state.damaged-", names, 4), 1);

    /* A second damaged file in the same second does not replace the
     * first copy. */
    t = legacy_with(1, "version 8");
    write_file(dir, "state", t, strlen(t));
    assert_int_equal(state_load(dir, &s, &e), 0);
    assert_true(s.hold);
    state_free(&s);
    write_file(dir, "state", "x\n", 2);
    assert_int_equal(state_load(dir, &s, &e), 0);
    state_free(&s);
    assert_int_equal(count_prefixed(dir, "state.damaged-", names, 4), 3);
    {
        int found = 0;

        for (int i = 0; i < 3; i++) {
            text = read_back(dir, names[i]);
            found |= strcmp(text, "pending yes\n") == 0 ? 1
                     : strcmp(text, t) == 0             ? 2
                     : strcmp(text, "x\n") == 0         ? 4
                                                        : 8;
            free(text);
        }
        assert_int_equal(found, 7);
    }
    free(t);
    rm_rf(dir);
    free(dir);
}

/* A FIFO or a directory where the state file should be: named for what it
 * is (not "Invalid argument"), kept aside untouched, and held, like a
 * damaged file; a FIFO without a writer never blocks the load. */
static void check_non_regular_held(int (*make)(const char *path), const char *kind, mode_t want)
{
    char *dir = tmpdir(), names[4][256], p[4200], want_msg[4300];
    struct state s;
    struct err e = {{0}};
    struct stat st;

    snprintf(p, sizeof(p), "%s/state", dir);
    assert_int_equal(make(p), 0);
    assert_int_equal(state_load(dir, &s, &e), 0);
    assert_true(s.hold);
    snprintf(want_msg, sizeof(want_msg), "%s/state%s", dir, kind);
    if (strstr(s.hold_reason, want_msg) == NULL)
        fail_msg("hold reason '%s' lacks '%s'", s.hold_reason, want_msg);
    assert_int_equal(count_prefixed(dir, "state.damaged-", names, 4), 1);
    assert_non_null(strstr(s.hold_reason, names[0]));
    state_free(&s);
    /* the kept one is still what it was; the state file is a regular one
     * now, and a restart holds */
    snprintf(p, sizeof(p), "%s/%s", dir, names[0]);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_mode & S_IFMT, want);
    assert_int_equal(state_load(dir, &s, &e), 0);
    assert_true(s.hold);
    state_free(&s);
    rm_rf(dir);
    free(dir);
}

static int make_fifo(const char *path)
{
    return mkfifo(path, 0600);
}

static int make_dir(const char *path)
{
    return mkdir(path, 0700);
}

/* Larger than any state file we write, sparse (no disk taken). */
static int make_big(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600), r;

    if (fd < 0)
        return -1;
    r = ftruncate(fd, (off_t)FILES_MAX_SIZE + 1);
    close(fd);
    return r;
}

static void test_load_non_regular(void **state)
{
    (void)state;
    check_non_regular_held(make_fifo, " is a FIFO", S_IFIFO);
    check_non_regular_held(make_dir, " is a directory", S_IFDIR);
    /* a damaged file too: it never stops a start */
    check_non_regular_held(make_big, ": larger than 64 MiB", S_IFREG);
}

/* A symbolic link where the state file should be, to a file that is none
 * of ours, whose first line would be quoted as damage if it were read: not
 * followed, not moved, not saved over; the start fails, naming it. */
static void test_load_refuses_a_link(void **state)
{
    char *dir = tmpdir(), p[4200], target[4300], names[4][256];
    struct state s;
    struct err e = {{0}};
    struct stat st;
    FILE *f;

    (void)state;
    snprintf(p, sizeof(p), "%s/state", dir);
    snprintf(target, sizeof(target), "%s/not-ours", dir);
    f = fopen(target, "w");
    assert_non_null(f);
    fputs("precious\n", f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(symlink(target, p), 0);
    assert_int_equal(state_load(dir, &s, &e), -ELOOP);
    assert_non_null(strstr(e.msg, "a symbolic link where smbtuned keeps a file of its own"));
    assert_null(strstr(e.msg, "precious"));
    assert_false(state_is_damage(state_peek(dir, &s, &e)));
    assert_null(strstr(e.msg, "precious"));
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(count_prefixed(dir, "state.damaged-", names, 4), 0);
    rm_rf(dir);
    free(dir);
}

/* A save waits while another process holds the lock (`--resume` between
 * its load and its save), and writes once it is let go; the holder's own
 * saves do not wait for themselves. */
static void test_save_waits_for_the_lock(void **state)
{
    char *dir = tmpdir(), path[PATH_MAX], go;
    struct state s = {0}, back;
    struct err e = {{0}};
    struct timespec pause = {0, 300 * 1000 * 1000};
    int p[2], status;
    pid_t pid;

    (void)state;
    snprintf(path, sizeof(path), "%s/state", dir);
    assert_int_equal(pipe(p), 0);
    /* forked before the lock is taken: a child is never the holder */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[1]);
        if (read(p[0], &go, 1) != 1)
            _exit(2);
        s.cycles = 7;
        _exit(state_save(dir, &s, &e) == 0 ? 0 : 1);
    }
    close(p[0]);
    assert_int_equal(state_lock(dir, &e), 0);
    assert_int_equal(state_lock(dir, &e), -EDEADLK);
    assert_int_equal(write(p[1], "g", 1), 1);
    nanosleep(&pause, NULL);
    /* still waiting: no file yet */
    assert_int_equal(waitpid(pid, &status, WNOHANG), 0);
    assert_int_equal(access(path, F_OK), -1);
    /* the holder's own load and save go through */
    s.cycles = 3;
    assert_int_equal(state_save(dir, &s, &e), 0);
    assert_int_equal(state_load(dir, &back, &e), 0);
    assert_int_equal(back.cycles, 3);
    state_free(&back);
    state_unlock();
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(state_load(dir, &back, &e), 0);
    assert_int_equal(back.cycles, 7);
    state_free(&back);
    close(p[1]);
    rm_rf(dir);
    free(dir);
}

/* A copy that stands for a file it could not read is never saved over
 * it: -ESTALE, the file as it was. */
static void test_save_refuses_an_unread_copy(void **state)
{
    char *dir = tmpdir();
    struct state s = {0}, back = {0};
    struct err e;

    (void)state;
    s.hold = true;
    s.cycles = 3;
    assert_int_equal(state_save(dir, &s, &e), 0);
    s.hold = false;
    s.cycles = 0;
    s.unread = true;
    assert_int_equal(state_save(dir, &s, &e), -ESTALE);
    assert_non_null(strstr(e.msg, "not saved: it could not be read this cycle"));
    assert_int_equal(state_load(dir, &back, &e), 0);
    assert_true(back.hold);
    assert_int_equal(back.cycles, 3);
    assert_false(back.unread);
    state_free(&back);
    rm_rf(dir);
    free(dir);
}

/* --resume: the hold and our record go, and the rates of the line before
 * it with them; what else the state holds stays. */
static void test_end_hold(void **state)
{
    struct state s = {0};

    (void)state;
    s.hold = s.converged = s.have_incumbent = true;
    assert_int_equal(state_set_str(&s.hold_reason, "edited by hand"), 0);
    assert_int_equal(state_set_str(&s.last_written, "TCP_NODELAY"), 0);
    s.written_at = 1000;
    s.cycles = 7;
    s.write_mbps = 12.5;
    s.read_mbps = 13.5;
    s.ref_channels = 1;
    s.ref_mbps[0] = 12.0;
    state_end_hold(&s);
    assert_false(s.hold || s.converged || s.have_incumbent);
    /* its rates and reference were of the line before the hold */
    assert_true(s.write_mbps == 0 && s.read_mbps == 0);
    assert_int_equal(s.ref_channels, 0);
    assert_null(s.hold_reason);
    assert_null(s.last_written);
    assert_int_equal(s.written_at, 0);
    assert_int_equal(s.cycles, 7);
    state_free(&s);
}

/* A state directory whose name leaves no room for "/state": refused,
 * never read or written as a truncated name (another file). */
static void test_state_dir_too_long(void **state)
{
    char dir[PATH_MAX];
    struct state st = {0};
    struct err e;
    size_t n = 0;

    (void)state;
    /* /tmp/xxxx.../xxxx...: components under NAME_MAX, 4092 bytes */
    n += (size_t)snprintf(dir, sizeof(dir), "/tmp");
    while (n < PATH_MAX - 4 - 100)
        n += (size_t)snprintf(dir + n, sizeof(dir) - n, "/%0100d", 0);
    memset(dir + n, 'x', PATH_MAX - 4 - n);
    dir[PATH_MAX - 4] = '\0';
    assert_int_equal(state_load(dir, &st, &e), -ENAMETOOLONG);
    assert_int_equal(strncmp(e.msg, "state directory /tmp/", 21), 0);
    /* (save stops at its lock file's name, longer than "state", first) */
    st.unread = false;
    assert_int_equal(state_save(dir, &st, &e), -ENAMETOOLONG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_end_hold),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_legacy_and_version),
        cmocka_unit_test(test_version2_times),
        cmocka_unit_test(test_version3_clients),
        cmocka_unit_test(test_version4_clients_smbd),
        cmocka_unit_test(test_version5_reference),
        cmocka_unit_test(test_version6_settings),
        cmocka_unit_test(test_version7_pending_restart),
        cmocka_unit_test(test_version8_pending_unrestarted),
        cmocka_unit_test(test_version9_rates_loopback),
        cmocka_unit_test(test_version10_advice),
        cmocka_unit_test(test_pending_incomplete),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_bad_numbers),
        cmocka_unit_test(test_unknown_duplicate_nul),
        cmocka_unit_test(test_load_keeps_damaged_aside),
        cmocka_unit_test(test_load_non_regular),
        cmocka_unit_test(test_load_refuses_a_link),
        cmocka_unit_test(test_save_waits_for_the_lock),
        cmocka_unit_test(test_save_refuses_an_unread_copy),
        cmocka_unit_test(test_state_dir_too_long),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
