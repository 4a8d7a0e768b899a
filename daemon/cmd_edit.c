/* --show and --set-buffers: the smb.conf editor from the command line. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "cmd.h"
#include "config.h"
#include "jsonw.h"
#include "kernel.h"
#include "smbconf.h"
#include "sockopts.h"
#include "state.h"

static int fail(const char *msg)
{
    fprintf(stderr, "smbtuned: %s\n", msg);
    return 1;
}

/* The int smbd passes to setsockopt; null only when no token names it. */
static json_t *size_json(struct sockopts_size z)
{
    return z.present ? json_integer(z.value) : json_null();
}

/* What smbd passes and what the kernel makes of it (sockopts_kernel):
 * cap < 0 when rmem_max/wmem_max cannot be read, min 0 when the minimum
 * is unknown. */
static void print_size(enum sockopts_buf which, struct sockopts_size z, long cap, long min)
{
    const char *name = sockopts_name(which);
    const char *sysctl = which == SOCKOPTS_RCVBUF ? "net.core.rmem_max" : "net.core.wmem_max";
    struct sockopts_kernel k;

    if (!z.present) {
        printf("  %s: auto (no explicit size: the kernel autotunes)\n", name);
        return;
    }
    printf("  %s: %d (explicit: autotuning is off for it)", name, z.value);
    k = sockopts_kernel(z.value, cap < 0 ? LONG_MAX : cap, min);
    if (k.effect == SOCKOPTS_AT_MIN && min > 0)
        printf(": the kernel's minimum, %ld bytes\n", k.bytes);
    else if (k.effect == SOCKOPTS_AT_MIN)
        printf(": the kernel's minimum\n");
    else if (k.effect == SOCKOPTS_AT_CAP)
        printf(": the kernel's cap, %s = %ld (%ld bytes)%s\n", sysctl, cap, k.bytes,
               z.value < 0 ? "; a negative size is taken as a huge one" : "");
    else if (cap < 0)
        printf(": the kernel gives twice that, at most twice %s (unreadable)\n", sysctl);
    else
        printf(": the kernel gives %ld bytes (twice the size)\n", k.bytes);
    if (z.broken && strchr(z.token, '=') == NULL)
        printf("  warning: '%s' is not written as %s=BYTES, so Samba passes %d\n", z.token, name,
               z.value);
    else if (z.broken)
        printf("  warning: Samba reads '%s' with C atoi into an int: it passes %d\n", z.token,
               z.value);
}

/* The %-includes that were accepted, and what a file they name later
 * could do: the admin should know the judgement holds only for today. */
static void print_notes(const struct smbconf_note *n, size_t count)
{
    for (size_t i = 0; i < count; i++)
        printf("note: %s:%d: include = %s: %s\n", n[i].file, n[i].line, n[i].include, n[i].what);
}

static json_t *notes_json(const struct smbconf_note *n, size_t count)
{
    json_t *a = json_array();

    for (size_t i = 0; a != NULL && i < count; i++) {
        json_t *o = json_object();

        /* The _new setters take over their value, NULL included (then
         * they fail): one check of the finished object covers them. */
        if (o == NULL || json_object_set_new(o, "file", jsonw_text(n[i].file)) < 0 ||
            json_object_set_new(o, "line", json_integer(n[i].line)) < 0 ||
            json_object_set_new(o, "include", jsonw_text(n[i].include)) < 0 ||
            json_object_set_new(o, "note", jsonw_text(n[i].what)) < 0 ||
            json_array_append_new(a, o) < 0) {
            json_decref(o);
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* --show --json: one object on one line, keys in this order. */
static int print_show_json(const struct smbconf *c, const char *file, struct sockopts_size rcv,
                           struct sockopts_size snd)
{
    json_t *o = json_object();
    char *text = NULL;

    if (o != NULL && json_object_set_new(o, "file", jsonw_text(file)) == 0 &&
        json_object_set_new(o, "line", file ? json_integer(c->hit.line) : json_null()) == 0 &&
        json_object_set_new(o, "value", jsonw_text(c->value)) == 0 &&
        json_object_set_new(o, "rcvbuf", size_json(rcv)) == 0 &&
        json_object_set_new(o, "sndbuf", size_json(snd)) == 0 &&
        json_object_set_new(o, "notes", notes_json(c->notes, c->nnotes)) == 0)
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (text == NULL)
        return -ENOMEM;
    printf("%s\n", text);
    free(text);
    return 0;
}

/* --show refused (smb.conf refused, out of memory): the line on stderr,
 * and with --json one object on stdout all the same, so that a script
 * always has a line to read: result "error" (as --once's and --probe's
 * refusals say) and error, the line's message. */
static int show_failed(const struct opts *o, const char *msg)
{
    if (o->json)
        jsonw_print(stdout, json_pack("{s:s, s:o}", "result", "error", "error", jsonw_text(msg)));
    return fail(msg);
}

/* The smb.conf and state directory the daemon uses: the config file's
 * (the default one may be absent: the built-in paths), unless
 * --smb-conf or --state-dir say otherwise. So --set-buffers takes the
 * daemon's own edit lock, and the two never interleave. */
static int edit_paths(const struct opts *o, struct config *cfg, const char **smb_conf,
                      const char **state_dir, struct err *e)
{
    if (cmd_load_config(o, cfg, e) < 0)
        return -1;
    *smb_conf = cfg->tune.smb_conf;
    *state_dir = cfg->tune.state_dir;
    return 0;
}

int cmd_show(const struct opts *o)
{
    struct smbconf c;
    struct sockopts so;
    struct config cfg;
    struct err e = {{0}};
    struct sockopts_size rcv, snd;
    long cap[2] = {-1, -1}, min[2] = {0, 0};
    const char *file = NULL, *smb_conf, *state_dir;

    if (edit_paths(o, &cfg, &smb_conf, &state_dir, &e) < 0) {
        show_failed(o, e.msg);
        return CMD_EXIT_CONFIG;
    }
    if (smbconf_load(&c, smb_conf, &e) < 0)
        return show_failed(o, e.msg);
    if (sockopts_parse(c.value, &so) < 0) {
        smbconf_free(&c);
        return show_failed(o, "out of memory");
    }
    rcv = sockopts_get(&so, SOCKOPTS_RCVBUF);
    snd = sockopts_get(&so, SOCKOPTS_SNDBUF);
    /* What the kernel makes of the sizes is told, not needed: unreadable
     * limits only shorten the text. */
    if (kernel_buffer_caps(&cap[0], &cap[1], &e) < 0)
        cap[0] = cap[1] = -1;
    if (kernel_buffer_mins(&min[0], &min[1], &e) < 0)
        min[0] = min[1] = 0;
    if (c.found)
        file = c.files[c.hit.file].path;
    if (o->json) {
        if (print_show_json(&c, file, rcv, snd) < 0) {
            sockopts_free(&so);
            smbconf_free(&c);
            return show_failed(o, "out of memory");
        }
    } else {
        printf("socket options = %s\n", c.value);
        if (file)
            printf("  from %s line %d\n", file, c.hit.line);
        else
            printf("  not set in %s: Samba's default\n", smb_conf);
        print_size(SOCKOPTS_RCVBUF, rcv, cap[0], min[0]);
        print_size(SOCKOPTS_SNDBUF, snd, cap[1], min[1]);
        print_notes(c.notes, c.nnotes);
    }
    sockopts_free(&so);
    smbconf_free(&c);
    return 0;
}

/* The smallest size --set-buffers writes. */
#define SET_BUFFERS_MIN 4096

/* "RCV,SND": each a size or `auto`. */
static int parse_pair(const char *s, struct smbconf_change *ch, struct err *e)
{
    const char *comma = strchr(s, ',');
    char rcv[64];
    int r;

    if (comma == NULL || strchr(comma + 1, ',') != NULL || (size_t)(comma - s) >= sizeof(rcv))
        return err_set(e, -EINVAL,
                       "--set-buffers '%s': expected RCV,SND, e.g. 262144,262144 "
                       "or auto,1M",
                       s);
    memcpy(rcv, s, (size_t)(comma - s));
    rcv[comma - s] = '\0';
    /* The search never goes below SET_BUFFERS_MIN either; a hand edit
     * still can. */
    r = sockopts_parse_size(rcv, SOCKOPTS_RCVBUF, SET_BUFFERS_MIN, &ch->rcvbuf, e);
    if (r == 0)
        r = sockopts_parse_size(comma + 1, SOCKOPTS_SNDBUF, SET_BUFFERS_MIN, &ch->sndbuf, e);
    if (r < 0) {
        char m[sizeof(e->msg)];

        snprintf(m, sizeof(m), "%s", e->msg);
        err_set(e, r, "--set-buffers '%s': %s", s, m);
    }
    return r;
}

/* Does the change hand a buffer back to the kernel's autotuning? Linux
 * keeps autotuning off on a socket once it had an explicit size, and smbd
 * sets its listener only at start-up: the admin should know. */
static bool autotuning_back(const char *old_value, const char *new_value)
{
    struct sockopts a, b;
    bool back = false;

    if (sockopts_parse(old_value, &a) < 0)
        return false;
    if (sockopts_parse(new_value, &b) == 0) {
        for (int w = SOCKOPTS_RCVBUF; w <= SOCKOPTS_SNDBUF; w++)
            if (sockopts_get(&a, w).present && !sockopts_get(&b, w).present)
                back = true;
        sockopts_free(&b);
    }
    sockopts_free(&a);
    return back;
}

/* A size above net.core.rmem_max or wmem_max is capped by the kernel
 * without a word to smbd: say so, as --show does, or the admin believes
 * the buffer is what the line says. Unreadable caps: nothing to say. */
static void print_capped(const struct smbconf_change *ch)
{
    long cap[2], min[2] = {0, 0}, size[2] = {ch->rcvbuf, ch->sndbuf};
    struct err e;

    if (kernel_buffer_caps(&cap[0], &cap[1], &e) < 0)
        return;
    if (kernel_buffer_mins(&min[0], &min[1], &e) < 0)
        min[0] = min[1] = 0;
    for (int w = SOCKOPTS_RCVBUF; w <= SOCKOPTS_SNDBUF; w++) {
        struct sockopts_kernel k;

        if (size[w] == SOCKOPTS_AUTO || size[w] <= cap[w])
            continue;
        k = sockopts_kernel((int)size[w], cap[w], min[w]);
        printf("note: %s=%ld is above %s = %ld: the kernel caps it there and gives %ld bytes "
               "(raise the sysctl for more)\n",
               sockopts_name(w), size[w],
               w == SOCKOPTS_RCVBUF ? "net.core.rmem_max" : "net.core.wmem_max", cap[w], k.bytes);
    }
}

/* Whether the line in force is a live trial of the daemon's: its record
 * in the state file (read under the edit lock, which the plan holds, so
 * no take-back or trial can come between) names that file, and the line
 * is the trial's, byte for byte. The value asked for is then in force
 * only until the trial's cycle takes it back. */
static bool trial_holds(const char *state_dir, const struct smbconf *c)
{
    const struct smbconf_edit *ed;
    const struct smbconf_file *f;
    struct state st;
    bool holds = false;

    if (!c->found || state_peek(state_dir, &st, NULL) < 0)
        return false;
    ed = &st.pending_edit;
    f = &c->files[c->hit.file];
    holds = st.pending && !st.pending_commit && strcmp(ed->file, f->path) == 0 &&
            c->hit.end - c->hit.start == ed->line_len &&
            memcmp(f->buf + c->hit.start, ed->written + ed->line_off, ed->line_len) == 0;
    state_free(&st);
    return holds;
}

int cmd_set_buffers(const struct opts *o)
{
    struct smbconf_change ch = {.expect = o->expect};
    struct smbconf_result res;
    struct smbconf_plan pl;
    enum apply_method m = APPLY_NONE;
    struct config cfg;
    struct err e = {{0}};
    const char *smb_conf, *state_dir;
    bool changed;
    int r;

    /* Bad values on the command line are a bad command line (64), as
     * smbtuned(8) files them, not a refused edit (1). */
    if (parse_pair(o->set_buffers, &ch, &e) < 0 ||
        (o->apply != NULL && apply_parse(o->apply, &m, &e) < 0)) {
        fail(e.msg);
        return CMD_EXIT_USAGE;
    }
    if (edit_paths(o, &cfg, &smb_conf, &state_dir, &e) < 0) {
        fail(e.msg);
        return CMD_EXIT_CONFIG;
    }
    r = smbconf_prepare(smb_conf, state_dir, &ch, &pl, &res, &e);
    if (r == 0) {
        bool over_trial = trial_holds(state_dir, &pl.c);

        /* The line holds the value asked for as a live trial of the
         * running daemon: left as "unchanged", the trial's end would take
         * it back, and the admin's setting with it. */
        if (!res.changed && over_trial)
            r = err_set(&e, -EBUSY,
                        "%s:%d: socket options = %s holds what you ask for, but as a live "
                        "trial of the running smbtuned (recorded in %s), which puts the line "
                        "back when its cycle ends: nothing written; run this again once the "
                        "cycle is over (smbtuned --status)",
                        res.file, res.line, res.new_value, state_dir);
        else {
            /* Written over a live trial, the bytes replaced are the
             * trial's: backup/ keeps those from before it (smbconf.h's
             * over_trial), the admin's own, as a daemon's write would. */
            pl.over_trial = over_trial;
            r = smbconf_write(&pl, &res, &e);
        }
        smbconf_plan_free(&pl);
    }
    if (r < 0) {
        smbconf_result_free(&res);
        return fail(e.msg);
    }
    if (!res.changed)
        printf("%s: socket options = %s (unchanged)\n", res.file ? res.file : smb_conf,
               res.new_value);
    else
        printf("%s:%d: socket options = %s (was %s)\n", res.file ? res.file : smb_conf, res.line,
               res.new_value, res.old_value);
    print_notes(res.notes, res.nnotes);
    /* An empty value would set no option at all, so a line of sizes
     * alone becomes Samba's default (sockopts.h): say so, it is an
     * option the line did not have. */
    if (res.changed && strcmp(res.new_value, SOCKOPTS_DEFAULT) == 0 &&
        strstr(res.old_value, SOCKOPTS_DEFAULT) == NULL)
        printf("note: no option but the sizes was left, and an empty line would set none: "
               "Samba's default, %s, is written in their place\n",
               SOCKOPTS_DEFAULT);
    if (res.changed && autotuning_back(res.old_value, res.new_value))
        printf("note: connections made before smbd restarts keep explicit buffers: only a "
               "restart of smbd gives autotuning back (its listening socket keeps them)\n");
    print_capped(&ch);
    changed = res.changed;
    smbconf_result_free(&res);
    /* An unchanged line is still applied when --apply asks: running the
     * same command again is how an admin retries an apply that failed
     * (the line was written then). Only the words differ. */
    if (apply_run(m, smb_conf, cfg.tune.smbd_unit, &e) < 0) {
        fprintf(stderr, "smbtuned: %s, but smbd was not told: %s\n",
                changed ? "written" : "unchanged", e.msg);
        return 1;
    }
    return 0;
}
