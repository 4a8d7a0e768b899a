/* facts: see facts.h. */
#include "facts.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

#include "child.h"
#include "journal.h"
#include "kernel.h"
#include "smbd.h"

/* `smbd -V` answers at once; a wedged one is not worth a cycle. */
#define SMBD_VERSION_TIMEOUT_S 10

static void why(struct facts *f, const char *msg)
{
    if (f->why[0] == '\0')
        snprintf(f->why, sizeof(f->why), "%s", msg);
}

static void samba_version(struct facts *f)
{
    char out[256], errout[64], *argv[] = {"smbd", "-V", NULL};
    int status;

    if (child_run(argv, SMBD_VERSION_TIMEOUT_S, out, sizeof(out), errout, sizeof(errout), &status) <
            0 ||
        status != 0)
        snprintf(out, sizeof(out), "unknown");
    out[strcspn(out, "\n")] = '\0';
    /* `smbd -V` says "Version 4.17.12-Debian" */
    snprintf(f->samba, sizeof(f->samba), "%s", strncmp(out, "Version ", 8) == 0 ? out + 8 : out);
}

void facts_gather(const char *smb_conf, struct facts *f)
{
    int ports[SMBD_MAX_PORTS], n;
    char cmdline[8192];
    struct err e;

    memset(f, 0, sizeof(*f));
    f->caps_known =
        kernel_buffer_caps(&f->kcap[SOCKOPTS_RCVBUF], &f->kcap[SOCKOPTS_SNDBUF], &e) == 0;
    if (!f->caps_known)
        why(f, e.msg);
    f->mins_known =
        kernel_buffer_mins(&f->kmin[SOCKOPTS_RCVBUF], &f->kmin[SOCKOPTS_SNDBUF], &e) == 0;
    if (!f->mins_known) {
        why(f, e.msg);
        f->kmin[SOCKOPTS_RCVBUF] = f->kmin[SOCKOPTS_SNDBUF] = 0;
    }
    {
        long r[3], w[3];

        /* only for the words of outcome.c: no reason kept when unreadable */
        f->tcp_max_known = kernel_sysctl_triple("net/ipv4/tcp_rmem", r, &e) == 0 &&
                           kernel_sysctl_triple("net/ipv4/tcp_wmem", w, &e) == 0;
        if (f->tcp_max_known) {
            f->tcp_max[SOCKOPTS_RCVBUF] = r[2];
            f->tcp_max[SOCKOPTS_SNDBUF] = w[2];
        }
    }
    kernel_release(f->kernel, sizeof(f->kernel));
    samba_version(f);
    if (smbd_ports(smb_conf, ports, &n, &e) == 0 && n > 0) {
        f->smb_port = ports[0];
        f->n_smb_ports = n < SMBD_MAX_PORTS ? n : SMBD_MAX_PORTS;
        memcpy(f->smb_ports, ports, sizeof(int) * (size_t)f->n_smb_ports);
    }
    /* No smbd running: it will start with whatever smb.conf says, AUTO
     * included. */
    f->smbd_running = smbd_pid(smb_conf, &f->smbd_pid, &e) == 0;
    if (f->smbd_running && f->smb_port > 0) {
        struct smbd_listener l;

        if (smbd_listener_explicit(f->smb_port, &l, &e) == 0) {
            f->listener_rcv = l.rcv;
            f->listener_snd = l.snd;
            f->listener_size[SOCKOPTS_RCVBUF] = l.rcvbuf;
            f->listener_size[SOCKOPTS_SNDBUF] = l.sndbuf;
        }
    }
    f->cmdline_override = f->smbd_running &&
                          kernel_proc_cmdline(f->smbd_pid, cmdline, sizeof(cmdline)) == 0 &&
                          smbd_cmdline_overrides(cmdline);
}

/* Where the search starts for one buffer of the value in force: what the
 * kernel really does with what smbd passes it (sockopts_kernel). An absent
 * token is AUTO. Any explicit size, 0 included, turns autotuning off: a
 * size the kernel raises to its minimum starts from 1, the smallest
 * request, which it raises the same way (so the incumbent measured on a
 * shadow is the buffer production has); a negative size, or one at or over
 * the cap, from the cap; any other from itself. Unreadable caps: the
 * configured maximum stands in (the search is bounded by it anyway); an
 * unknown minimum: 0, so that only 0 counts as at the minimum. */
static long start_of(const struct facts *f, const struct search_params *dflt,
                     struct sockopts_size z, enum sockopts_buf which)
{
    long cap = f->caps_known ? f->kcap[which]
                             : (which == SOCKOPTS_RCVBUF ? dflt->max_rcvbuf : dflt->max_sndbuf);
    struct sockopts_kernel k;

    if (!z.present)
        return SEARCH_AUTO;
    k = sockopts_kernel(z.value, cap, f->mins_known ? f->kmin[which] : 0);
    return k.effect == SOCKOPTS_AT_MIN ? 1 : k.request;
}

struct search_config facts_config_of_value(const struct facts *f, const struct search_params *dflt,
                                           const char *value)
{
    struct sockopts so;
    struct search_config c = {SEARCH_AUTO, SEARCH_AUTO};

    if (sockopts_parse(value, &so) == 0) {
        c.rcvbuf = start_of(f, dflt, sockopts_get(&so, SOCKOPTS_RCVBUF), SOCKOPTS_RCVBUF);
        c.sndbuf = start_of(f, dflt, sockopts_get(&so, SOCKOPTS_SNDBUF), SOCKOPTS_SNDBUF);
        sockopts_free(&so);
    }
    return c;
}

bool facts_listener_explicit(const struct facts *f, struct search_config inc0,
                             enum sockopts_buf which)
{
    /* smbd's listener got its buffers when smbd started and hands them to
     * every new connection. The kernel's numbers cannot tell SO_SNDBUF=8192
     * or SO_RCVBUF=65536 from the autotuning start sizes, so an explicit
     * size in smb.conf counts too (the file smbd most likely started
     * with). */
    if (which == SOCKOPTS_RCVBUF)
        return f->smbd_running && (f->listener_rcv || inc0.rcvbuf != SEARCH_AUTO);
    return f->smbd_running && (f->listener_snd || inc0.sndbuf != SEARCH_AUTO);
}

void facts_cap_event(int prio, enum sockopts_buf which, long cap, const char *fmt, ...)
{
    bool rcv = which == SOCKOPTS_RCVBUF;
    char size[64], *msg = NULL;
    const char *fields[] = {
        size, rcv ? "SMBTUNED_SYSCTL=net.core.rmem_max" : "SMBTUNED_SYSCTL=net.core.wmem_max",
        NULL};
    va_list ap;

    /* only the buffer the cap is about: the other has its own */
    snprintf(size, sizeof(size), "%s=%ld", rcv ? "SMBTUNED_RCVBUF" : "SMBTUNED_SNDBUF", cap);
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    journal_event(JOURNAL_ID_KERNEL_CAP, prio, fields, "%s", msg ? msg : "(out of memory)");
    free(msg);
}

void facts_listener_notice(const struct facts *f, struct search_config inc0)
{
    /* The file says autotuning, the running smbd does not: it started
     * with a size (a hand edit, or a line taken out without a restart),
     * and its new connections get that size until it restarts. */
    for (int b = 0; b < 2; b++) {
        bool rcv = b == SOCKOPTS_RCVBUF;

        if (f->smbd_running && (rcv ? f->listener_rcv : f->listener_snd) &&
            (rcv ? inc0.rcvbuf : inc0.sndbuf) == SEARCH_AUTO)
            journal_log(LOG_NOTICE,
                        "smb.conf names no %s, but smbd's listener holds an explicit one (%ld "
                        "bytes in the kernel, twice the size asked for): its new connections "
                        "get that, not autotuning, until smbd restarts",
                        rcv ? "SO_RCVBUF" : "SO_SNDBUF", f->listener_size[b]);
    }
}

void facts_search_bounds(const struct facts *f, const struct tuner_opts *o,
                         struct search_config inc0, struct search_params *p, bool *auto_blocked)
{
    bool lrcv = facts_listener_explicit(f, inc0, SOCKOPTS_RCVBUF);
    bool lsnd = facts_listener_explicit(f, inc0, SOCKOPTS_SNDBUF);

    *p = o->search;
    *auto_blocked = false;
    if (!f->caps_known) {
        journal_log(LOG_WARNING, "%s: keeping the configured maximum", f->why);
    } else {
        if (f->kcap[SOCKOPTS_RCVBUF] < p->max_rcvbuf) {
            facts_cap_event(LOG_INFO, SOCKOPTS_RCVBUF, f->kcap[SOCKOPTS_RCVBUF],
                            "SO_RCVBUF sizes capped at %ld by net.core.rmem_max",
                            f->kcap[SOCKOPTS_RCVBUF]);
            p->max_rcvbuf = f->kcap[SOCKOPTS_RCVBUF];
        }
        if (f->kcap[SOCKOPTS_SNDBUF] < p->max_sndbuf) {
            facts_cap_event(LOG_INFO, SOCKOPTS_SNDBUF, f->kcap[SOCKOPTS_SNDBUF],
                            "SO_SNDBUF sizes capped at %ld by net.core.wmem_max",
                            f->kcap[SOCKOPTS_SNDBUF]);
            p->max_sndbuf = f->kcap[SOCKOPTS_SNDBUF];
        }
    }
    /* The probe's client socket is the one tuned: rates rank it swapped. */
    p->mapping = o->trials == TUNER_CLIENT ? SEARCH_RANK_CLIENT : SEARCH_RANK_SERVER;
    /* While smbd's listener carries explicit sizes, AUTO written into
     * smb.conf would not reach a single new connection before smbd
     * restarts (Linux keeps autotuning off on a socket that had a size,
     * and accepted sockets inherit the listener's): it is no candidate.
     * Live, it could not even be measured. Shadow and client trials
     * measure it after the search, for the admin's information. */
    if ((lrcv || lsnd) && (o->trials == TUNER_LIVE || !o->restart_smbd)) {
        p->auto_observable = false;
        *auto_blocked = o->trials != TUNER_LIVE;
    }
}

bool facts_trials_on_loopback(const struct tuner_opts *o, bool probe_loopback)
{
    /* Whatever the url's host: the probe of a shadow trial connects to
     * 127.0.0.1 and the shadow's port (place.c, shadow_url()), also for
     * `url = smb://fileserver/data` on fileserver itself. A client
     * trial's probe connects to the url's host: loopback when that is
     * this machine, which only the connection can tell (a name, or an
     * address of a local interface, is no loopback address as written).
     * Live trials keep their rates as they were (the url is this smbd's
     * by their rule, and they are not recommended). */
    return o->trials == TUNER_SHADOW || (o->trials == TUNER_CLIENT && probe_loopback);
}

void facts_fingerprint(const struct facts *f, struct state *st, const char *smb_conf, char *msg,
                       size_t len)
{
    size_t n;

    msg[0] = '\0';
    if (st->samba && strcmp(st->samba, f->samba) != 0)
        snprintf(msg, len, "Samba %s -> %s", st->samba, f->samba);
    n = strlen(msg);
    if (st->kernel && strcmp(st->kernel, f->kernel) != 0)
        snprintf(msg + n, len - n, "%skernel %s -> %s", n ? ", " : "", st->kernel, f->kernel);
    n = strlen(msg);
    if (st->smb_conf && strcmp(st->smb_conf, smb_conf) != 0)
        snprintf(msg + n, len - n, "%ssmb.conf %s -> %s", n ? ", " : "", st->smb_conf, smb_conf);
    state_set_str(&st->samba, f->samba);
    state_set_str(&st->kernel, f->kernel);
    state_set_str(&st->smb_conf, smb_conf);
}
