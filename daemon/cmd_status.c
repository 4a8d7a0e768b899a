/* --status: what an admin asks first, like `chronyc tracking`: the line in
 * force and since when, whether smbtuned wrote it, its rates, the last
 * cycle and the next, a hold and why, a step in flight, and what the
 * baseline was measured on.
 *
 * Read only: the state file is read with files_read_own and state_parse, not
 * state_load, which keeps a damaged file aside and saves a hold; a status
 * must change nothing, so a damaged file is reported where it is. smb.conf
 * is read with smbconf_load (no lock, no write). Whether a run holds the
 * state directory is asked of the kernel, without taking its lock. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "config.h"
#include "files.h"
#include "jsonw.h"
#include "runlock.h"
#include "search.h"
#include "smbconf.h"
#include "sockopts.h"
#include "state.h"

/* A live trial recorded by a run that no longer runs, against the line in
 * force: what the next start does with it (smbconf_unrender, as the
 * start's take-back decides). While a run holds the state directory, the
 * trial is its step in flight, and none of these applies. */
enum left {
    LEFT_NONE,    /* no such trial, or it cannot be told (a file not read) */
    LEFT_HOLDS,   /* the line is the trial's: the next start takes it back */
    LEFT_UNDONE,  /* the line is what the trial replaced: the record goes */
    LEFT_CHANGED, /* the line was changed since: left as it is, a hold */
    /* another line is in force (the admin's, after ours): ours is taken
     * back, theirs stands, and a hold (owned_settle) */
    LEFT_SHADOWED,
};

/* What --status found. */
struct status {
    char path[PATH_MAX];
    const char *smb_conf;
    const char *state_word; /* "ok", "missing", "damaged", "unreadable" */
    struct err state_err;   /* damaged, unreadable: why */
    bool denied;            /* unreadable: permission denied */
    struct state st;        /* zeros unless "ok" */
    bool conf_ok;
    struct smbconf c;
    struct err conf_err;
    const char *line_word; /* who put the line in force (see line_of) */
    const struct tuner_opts *t;
    int running;        /* runlock_holder's answer: 1, 0, or <0 (unknown) */
    pid_t runner;       /* running: its pid */
    struct err run_err; /* running < 0: why */
    enum left left;     /* a recorded live trial a stopped run left */
};

/* Who put the value in force there, as far as the state file knows. */
static const char *line_of(const struct status *s)
{
    const struct state *st = &s->st;

    if (!s->conf_ok)
        return "unknown";
    if (strcmp(s->state_word, "missing") == 0)
        return "not_written"; /* no cycle has run with this state directory */
    if (strcmp(s->state_word, "ok") != 0)
        return "unknown";
    if (st->last_written != NULL && sockopts_same(s->c.value, st->last_written))
        return "smbtuned";
    /* a trial left by a stopped run whose line someone changed since:
     * the next start leaves that line, and holds off */
    if (s->left == LEFT_CHANGED || s->left == LEFT_SHADOWED)
        return "edited_by_hand";
    /* a trial in force, or a step recorded before its write: see pending
     * (before anything was committed, too: a first cycle's live trial) */
    if (st->pending)
        return "pending";
    if (st->last_written == NULL)
        return "not_written"; /* never, or `--resume` made it the admin's */
    return "edited_by_hand";
}

static void read_state(struct status *s, const char *dir)
{
    char *text;
    size_t len;
    int r;

    r = snprintf(s->path, sizeof(s->path), "%s/state", dir);
    if (r < 0 || (size_t)r >= sizeof(s->path)) {
        err_set(&s->state_err, -ENAMETOOLONG, "state directory %s: name too long", dir);
        s->state_word = "unreadable";
        return;
    }
    r = files_read_own(s->path, &text, &len, &s->state_err);
    if (r == -ENOENT) {
        s->state_word = "missing";
        return;
    }
    if (r < 0) {
        /* what state_load keeps aside as damage (a FIFO or directory in
         * its place, a file too large to be ours) is damage here too */
        s->state_word = state_is_damage(r) ? "damaged" : "unreadable";
        s->denied = r == -EACCES || r == -EPERM;
        return;
    }
    r = state_parse(text, len, s->path, &s->st, &s->state_err);
    free(text);
    s->state_word = r == 0 ? "ok" : r == -EBADMSG ? "damaged" : "unreadable";
}

static enum left left_trial(const struct status *s)
{
    const struct state *st = &s->st;
    struct err e = {{0}};
    char *out = NULL;
    size_t outlen;
    int r;

    if (s->running != 0 || !s->conf_ok || strcmp(s->state_word, "ok") != 0 || !st->pending ||
        st->pending_commit || st->pending_unrestarted)
        return LEFT_NONE;
    r = smbconf_unrender(&s->c, &st->pending_edit, &out, &outlen, &e);
    free(out);
    /* As the start does (owned_revert): when smb_conf no longer leads to
     * the file the record names (changed since the run stopped), the
     * trial's bytes are looked for in that file. */
    if (r == -ECANCELED && strcmp(st->pending_edit.file, s->smb_conf) != 0) {
        struct smbconf c2;

        if (smbconf_load(&c2, st->pending_edit.file, &e) == 0) {
            out = NULL;
            r = smbconf_unrender(&c2, &st->pending_edit, &out, &outlen, &e);
            free(out);
            smbconf_free(&c2);
        }
    }
    if (r == SMBCONF_UNDONE_SHADOWED)
        return LEFT_SHADOWED;
    if (r >= 0)
        return LEFT_HOLDS;
    return r == -EALREADY ? LEFT_UNDONE : r == -ECANCELED ? LEFT_CHANGED : LEFT_NONE;
}

/* ---- text ---- */

/* What the next start does with a left trial, after "a live trial in
 * FILE, left by a run that stopped". */
static const char *const left_words[] = {
    [LEFT_HOLDS] = ": the next start takes it back",
    [LEFT_UNDONE] = "; the line already holds what it replaced: the next start only clears the "
                    "record",
    [LEFT_CHANGED] = ", and the line was changed since: the next start leaves it as it is and "
                     "holds off",
    [LEFT_SHADOWED] = ", and another line is in force since: the next start takes the trial's "
                      "back, leaves the line in force as it is and holds off",
};

/* The kind of step a pending record stands for. */
static const char *pending_kind(const struct state *st)
{
    return st->pending_commit        ? "commit"
           : st->pending_unrestarted ? "commit whose restart of smbd failed or was not made"
                                     : "live trial";
}

static const char *when(long t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;

    localtime_r(&tt, &tm);
    strftime(buf, len, "%Y-%m-%d %H:%M:%S %Z", &tm);
    return buf;
}

static const char *rate_text(double mbps, char *buf, size_t len)
{
    if (mbps > 0)
        snprintf(buf, len, "%.2f MB/s", mbps);
    else
        snprintf(buf, len, "not measured");
    return buf;
}

/* Advice a search converged on in advise mode (state format 10): the
 * value to put in smb.conf, and the line it was searched from, which its
 * verification rests on. */
/* The buffers the line in force sets (SOCKOPTS_AUTO: none), as the
 * daemon reads them; false when it cannot be read. */
static bool line_buffers(const struct status *s, struct search_config *c)
{
    struct sockopts so;
    struct sockopts_size r, d;

    if (!s->conf_ok || sockopts_parse(s->c.value, &so) < 0)
        return false;
    r = sockopts_get(&so, SOCKOPTS_RCVBUF);
    d = sockopts_get(&so, SOCKOPTS_SNDBUF);
    c->rcvbuf = r.present ? r.value : SOCKOPTS_AUTO;
    c->sndbuf = d.present ? d.value : SOCKOPTS_AUTO;
    sockopts_free(&so);
    return true;
}

static void print_advice(const struct status *s)
{
    const struct state *st = &s->st;
    struct search_config w = {st->advice_rcvbuf, st->advice_sndbuf};
    struct search_config from = {st->advised_from_rcvbuf, st->advised_from_sndbuf}, now;
    bool same = line_buffers(s, &now) && search_config_eq(now, from);
    /* the admin's other options as they are now, the advice's buffers */
    char *value = same ? sockopts_with(s->c.value, w.rcvbuf, w.sndbuf) : NULL;
    char a[96], b[96];

    if (st->advice == NULL)
        return;
    printf("Advice          : socket options = %s (%s; advise mode: smb.conf not changed, %s)\n",
           value ? value : st->advice, search_config_str(w, a, sizeof(a)),
           /* a reference of advise mode: tune mode searches again */
           !same                        ? "the line in force changed since: the next cycle "
                                          "searches again"
           : s->t->mode == TUNER_ADVISE ? "verified each cycle"
                                        : "and mode = tune now: the next cycle searches again");
    printf("Advised from    : %s (the line in force when it was searched: a change of it "
           "searches again)\n",
           search_config_str(from, b, sizeof(b)));
    free(value);
}

static void print_text(const struct status *s)
{
    const struct state *st = &s->st;
    char a[64], cs[96];

    printf("State file      : %s (%s)\n", s->path, s->state_word);
    if (s->running > 0)
        printf("Running         : yes, pid %ld holds %s/" RUNLOCK_NAME "\n", (long)s->runner,
               s->t->state_dir);
    else if (s->running == 0)
        printf("Running         : no (no run of smbtuned holds %s/" RUNLOCK_NAME ")\n",
               s->t->state_dir);
    else
        printf("Running         : unknown: %s\n", s->run_err.msg);
    if (strcmp(s->state_word, "missing") == 0)
        printf("Note            : no state file: no cycle has run with this state directory\n");
    else if (strcmp(s->state_word, "damaged") == 0)
        printf("Damage          : %s (left as it is; the daemon keeps it aside and holds off "
               "at its next cycle)\n",
               s->state_err.msg);
    else if (strcmp(s->state_word, "unreadable") == 0)
        printf("Error           : %s%s\n", s->state_err.msg, s->denied ? " (run it as root)" : "");
    if (!s->conf_ok)
        printf("Socket options  : unknown: %s\n", s->conf_err.msg);
    else if (s->c.found)
        printf("Socket options  : %s\nWhere           : %s:%d\n", s->c.value,
               s->c.files[s->c.hit.file].path, s->c.hit.line);
    else
        printf("Socket options  : %s\nWhere           : no line in %s: Samba's default\n",
               s->c.value, s->smb_conf);
    if (strcmp(s->line_word, "smbtuned") == 0)
        printf("Written         : by smbtuned%s%s\n", st->written_at ? " at " : "",
               st->written_at ? when(st->written_at, a, sizeof(a)) : "");
    else if (strcmp(s->line_word, "edited_by_hand") == 0 &&
             (s->left == LEFT_CHANGED || s->left == LEFT_SHADOWED))
        printf("Written         : edited by hand since smbtuned wrote a live trial there (see "
               "Pending); it holds off %suntil `smbtuned --resume`\n",
               st->hold ? "(see Hold) " : "at its next start ");
    else if (strcmp(s->line_word, "edited_by_hand") == 0)
        printf("Written         : edited by hand since smbtuned wrote '%s'; it holds off %suntil "
               "`smbtuned --resume`\n",
               st->last_written, st->hold ? "(see Hold) " : "at its next cycle ");
    else if (strcmp(s->line_word, "pending") == 0 && st->last_written == NULL)
        /* a first cycle's live trial: nothing committed yet */
        printf("Written         : a step in flight (see Pending); smbtuned has written no "
               "line of its own yet\n");
    else if (strcmp(s->line_word, "pending") == 0)
        printf("Written         : a step in flight (see Pending); smbtuned last wrote '%s'\n",
               st->last_written);
    else if (strcmp(s->line_word, "not_written") == 0)
        /* during a hold it starts from nothing until --resume */
        printf("Written         : not by smbtuned (%s)\n",
               st->hold ? "it holds off: see Hold" : "it starts from this line");
    if (strcmp(s->state_word, "ok") != 0)
        return;
    if (st->have_incumbent) {
        printf("Incumbent       : %s\n",
               search_config_str((struct search_config){st->rcvbuf, st->sndbuf}, cs, sizeof(cs)));
        /* 0: the line in force was chosen without a sample of its own
         * (outcome.c: autotuning for a buffer trials cannot rank) */
        if (st->write_mbps > 0 || st->read_mbps > 0) {
            /* 0 is a rate never measured (outcome_record): every sample
             * of that direction timed out, or it had none of its own */
            char w[48], r[48];

            rate_text(st->write_mbps, w, sizeof(w));
            rate_text(st->read_mbps, r, sizeof(r));
            /* whose rates: loopback's are no client's over the network,
             * and shadow trials run on loopback with a url too. The state
             * says only whether they were on loopback (rates_loopback,
             * from format 9), not which trials measured them: rates off
             * loopback are no shadow's, whatever trials says now (a
             * --once with --trials live, or trials changed since); an
             * older file does not say, and trials is taken at its word. */
            if (s->t->trials == TUNER_SHADOW && (st->rates_loopback || st->version < 9))
                printf("Rates           : write %s, read %s (the probe's, on loopback to "
                       "shadow smbds%s%s: not what a client over the network gets)\n",
                       w, r, s->t->own_share ? "" : " serving the share of ",
                       s->t->own_share ? "" : s->t->probe.url);
            else if (st->rates_loopback)
                /* client trials whose probe found its connection on this
                 * machine: the url names it by another name or address */
                printf("Rates           : write %s, read %s (the probe's, to %s, on this "
                       "machine's loopback: not what a client over the network gets)\n",
                       w, r, s->t->own_share ? "smbtuned's own share" : s->t->probe.url);
            else
                printf("Rates           : write %s, read %s (the probe's, to %s)\n", w, r,
                       s->t->own_share ? "smbtuned's own share" : s->t->probe.url);
        } else
            printf("Rates           : not measured (chosen without a sample of its own)\n");
    } else {
        printf("Incumbent       : none measured yet\n");
    }
    print_advice(s);
    printf("Cycles          : %ld\n", st->cycles);
    if (st->cycle_at)
        printf("Last cycle      : %s: %s\n", when(st->cycle_at, a, sizeof(a)),
               st->cycle_result ? st->cycle_result : "(no result recorded)");
    else if (st->cycles > 0)
        /* cycles ran, but the file's format (1) predates these fields */
        printf("Last cycle      : not recorded (a state file from an older smbtuned)\n");
    else
        printf("Last cycle      : none recorded\n");
    if (st->next_at)
        printf("Next cycle      : %s (if the daemon runs)\n", when(st->next_at, a, sizeof(a)));
    else if (st->cycles > 0 && !st->cycle_at)
        printf("Next cycle      : not recorded (a state file from an older smbtuned)\n");
    else
        printf("Next cycle      : none scheduled (the last cycle was --once, or none ran)\n");
    /* what the last cycle that watched them saw of smbd's real clients */
    if (st->clients_at && st->clients)
        printf("Real clients    : %s: %ld connection%s, held back by the server's send buffer "
               "%ld, by its receive buffer %ld, by smbd's own reading %ld, by the client's window "
               "%ld, by the network %ld, idle %ld; round trip median %.1f ms, max %.1f ms; largest "
               "bandwidth-delay "
               "product of a buffer-limited one %ld bytes\n",
               when(st->clients_at, a, sizeof(a)), st->clients, st->clients == 1 ? "" : "s",
               st->clients_sndbuf_limited, st->clients_rcvbuf_limited, st->clients_smbd,
               st->clients_client_window, st->clients_network, st->clients_idle, st->rtt_median_ms,
               st->rtt_max_ms, st->bdp_max);
    else if (st->clients_at)
        printf("Real clients    : %s: no connection to smbd\n", when(st->clients_at, a, sizeof(a)));
    else
        printf("Real clients    : none watched yet\n");
    printf("Hold            : %s%s\n", st->hold ? "yes: " : "no",
           st->hold ? (st->hold_reason ? st->hold_reason : "by request") : "");
    if (st->pending && s->left != LEFT_NONE)
        printf("Pending         : a live trial in %s, left by a run that stopped%s\n",
               st->pending_edit.file, left_words[s->left]);
    else if (st->pending && s->running > 0)
        printf("Pending         : a %s in %s, a step in flight of the run that holds the state "
               "directory: %s\n",
               pending_kind(st), st->pending_edit.file,
               st->pending_commit        ? "it checks it with testparm and tells smbd"
               : st->pending_unrestarted ? "it settles it"
                                         : "by the end of its cycle it takes it back or commits "
                                           "it, and a stop takes it back");
    else if (st->pending)
        printf("Pending         : a %s in %s (a step in flight, or left by a run that stopped: the "
               "next start %s)\n",
               pending_kind(st), st->pending_edit.file,
               st->pending_commit ? "or cycle checks it with testparm and tells smbd if it is "
                                    "in force, else takes it back"
                                  : "takes it back");
    else
        printf("Pending         : none\n");
    printf("Baseline        : Samba %s, kernel %s, smb.conf %s\n", st->samba ? st->samba : "?",
           st->kernel ? st->kernel : "?", st->smb_conf ? st->smb_conf : "?");
}

/* ---- JSON ---- */

/* The last summary of smbd's real connections, or null before any. */
static json_t *clients_json(const struct state *st)
{
    json_t *o;

    if (st->clients_at == 0)
        return json_null();
    o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:I}", "at",
                  (json_int_t)st->clients_at, "connections", (json_int_t)st->clients,
                  "sndbuf_limited", (json_int_t)st->clients_sndbuf_limited, "rcvbuf_limited",
                  (json_int_t)st->clients_rcvbuf_limited, "smbd", (json_int_t)st->clients_smbd,
                  "client_window", (json_int_t)st->clients_client_window, "network",
                  (json_int_t)st->clients_network, "idle", (json_int_t)st->clients_idle,
                  "rtt_median_ms", st->rtt_median_ms, "rtt_max_ms", st->rtt_max_ms, "bdp_max",
                  (json_int_t)st->bdp_max);
    /* out of memory: the key still has a value of its type */
    return o ? o : json_null();
}

static json_t *time_json(long t)
{
    return t ? json_integer(t) : json_null();
}

static json_t *size_json(bool have, long v)
{
    return !have || v == SEARCH_AUTO ? json_null() : json_integer(v);
}

/* v when the state is known, else null (v freed) */
static json_t *known_or_null(bool known, json_t *v)
{
    if (known)
        return v;
    json_decref(v);
    return json_null();
}

/* One object; every key always there (null when unknown), so that a
 * script needs no key checks. The _new setters take over their value,
 * NULL included (then they fail): one check covers them. */
static int print_json(const struct status *s)
{
    const struct state *st = &s->st;
    bool ok = strcmp(s->state_word, "ok") == 0, found = s->conf_ok && s->c.found;
    /* A missing file is known: no cycle ran. A damaged or unreadable one
     * says nothing: its keys are null, not the zeros of an empty state (a
     * damaged file even becomes a hold at the daemon's next cycle). */
    bool known = ok || strcmp(s->state_word, "missing") == 0;
    const char *pend = !st->pending ? "none" : st->pending_commit ? "commit" : "trial";
    json_t *o = json_object();
    char *text;
    int bad = o == NULL;

#define SET(k, v) (bad |= json_object_set_new(o, k, v) < 0)
#define K(v) known_or_null(known, v)
    SET("state_file", jsonw_text(s->path));
    SET("running", s->running < 0 ? json_null() : json_boolean(s->running > 0));
    SET("runner_pid", s->running > 0 ? json_integer(s->runner) : json_null());
    SET("state", json_string(s->state_word));
    SET("state_error",
        jsonw_text(ok || strcmp(s->state_word, "missing") == 0 ? NULL : s->state_err.msg));
    SET("smb_conf", jsonw_text(s->smb_conf));
    SET("smb_conf_error", jsonw_text(s->conf_ok ? NULL : s->conf_err.msg));
    SET("socket_options", jsonw_text(s->conf_ok ? s->c.value : NULL));
    SET("file", jsonw_text(found ? s->c.files[s->c.hit.file].path : NULL));
    SET("line", found ? json_integer(s->c.hit.line) : json_null());
    SET("written_by", json_string(s->line_word));
    SET("last_written", jsonw_text(ok ? st->last_written : NULL));
    SET("written_at", K(time_json(st->written_at)));
    SET("have_incumbent", K(json_boolean(st->have_incumbent)));
    SET("rcvbuf", K(size_json(st->have_incumbent, st->rcvbuf)));
    SET("sndbuf", K(size_json(st->have_incumbent, st->sndbuf)));
    /* each null when not measured (0 in the state file), as the text
     * says "not measured": a 0.0 would read as a measured stall */
    SET("write_mbps", K(st->write_mbps > 0 ? json_real(st->write_mbps) : json_null()));
    SET("read_mbps", K(st->read_mbps > 0 ? json_real(st->read_mbps) : json_null()));
    SET("cycles", K(json_integer(st->cycles)));
    SET("cycle_at", K(time_json(st->cycle_at)));
    SET("cycle_result", K(jsonw_text(st->cycle_result)));
    SET("next_at", K(time_json(st->next_at)));
    SET("clients", K(clients_json(st)));
    SET("hold", K(json_boolean(st->hold)));
    SET("hold_reason", K(jsonw_text(st->hold_reason)));
    SET("pending", K(json_string(pend)));
    SET("pending_file", K(jsonw_text(st->pending ? st->pending_edit.file : NULL)));
    SET("samba", K(jsonw_text(st->samba)));
    SET("kernel", K(jsonw_text(st->kernel)));
    SET("measured_smb_conf", K(jsonw_text(st->smb_conf)));
    /* advise mode's advice (null: none; a buffer null: autotuning) */
    SET("advice", K(jsonw_text(st->advice)));
    SET("advice_rcvbuf", K(size_json(st->advice != NULL, st->advice_rcvbuf)));
    SET("advice_sndbuf", K(size_json(st->advice != NULL, st->advice_sndbuf)));
    SET("advised_from_rcvbuf", K(size_json(st->advice != NULL, st->advised_from_rcvbuf)));
    SET("advised_from_sndbuf", K(size_json(st->advice != NULL, st->advised_from_sndbuf)));
#undef K
#undef SET
    text = bad ? NULL : json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    json_decref(o);
    if (text == NULL) {
        fprintf(stderr, "smbtuned: out of memory\n");
        return -ENOMEM;
    }
    printf("%s\n", text);
    free(text);
    return 0;
}

int cmd_status(const struct opts *o)
{
    struct status s = {0};
    struct config cfg;
    struct tuner_opts t;
    struct err e = {{0}};
    int r;

    if (cmd_load_config(o, &cfg, &e) < 0 || config_fill(&cfg, &t, &e) < 0) {
        fprintf(stderr, "smbtuned: %s\n", e.msg);
        return CMD_EXIT_CONFIG;
    }
    s.smb_conf = t.smb_conf;
    s.t = &t;
    read_state(&s, t.state_dir);
    s.conf_ok = smbconf_load(&s.c, t.smb_conf, &s.conf_err) == 0;
    s.running = runlock_holder(t.state_dir, &s.runner, &s.run_err);
    s.left = left_trial(&s);
    s.line_word = line_of(&s);
    if (o->json)
        r = print_json(&s);
    else
        print_text(&s), r = 0;
    fflush(stdout);
    if (strcmp(s.state_word, "damaged") == 0 || strcmp(s.state_word, "unreadable") == 0)
        fprintf(stderr, "smbtuned: %s\n", s.state_err.msg);
    state_free(&s.st);
    if (s.conf_ok)
        smbconf_free(&s.c);
    /* A hold is still a status read; a state file we cannot read is not. */
    if (r < 0 || strcmp(s.state_word, "damaged") == 0 || strcmp(s.state_word, "unreadable") == 0)
        return CMD_EXIT_FAILURE;
    return CMD_EXIT_OK;
}
