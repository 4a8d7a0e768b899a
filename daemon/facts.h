/* facts: what this machine and its running smbd are, for one cycle.
 *
 * facts_gather() asks the outside (the kernel's buffer limits, `smbd -V`,
 * testparm for smbd's ports and pid directory, sock_diag for its
 * listener): it may block for seconds, so the daemon runs it in a job
 * (lib/job.h), and a struct facts is plain bytes that cross the pipe. The
 * rest is pure: what the facts mean for the search. */
#ifndef SMBTUNED_FACTS_H
#define SMBTUNED_FACTS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "search.h"
#include "smbd.h"
#include "sockopts.h"
#include "tuner_opts.h"

struct facts {
    /* [SOCKOPTS_RCVBUF], [SOCKOPTS_SNDBUF] */
    bool caps_known;               /* kcap read from net.core.rmem_max/wmem_max */
    long kcap[2];                  /* the kernel's cap on an explicit size */
    bool mins_known;               /* kmin read from the kernel */
    long kmin[2];                  /* its smallest buffer */
    char kernel[256];              /* uname release */
    char samba[256];               /* `smbd -V`, "unknown" when it would not say */
    bool tcp_max_known;            /* tcp_max read from net.ipv4.tcp_rmem / tcp_wmem */
    long tcp_max[2];               /* their maximum: where autotuning stops growing a buffer */
    int smb_port;                  /* production smbd's first port, 0 unknown */
    int smb_ports[SMBD_MAX_PORTS]; /* all of them (smb.conf's `smb ports`) */
    int n_smb_ports;
    bool smbd_running; /* its pid file names a live smbd */
    pid_t smbd_pid;
    bool listener_rcv, listener_snd; /* sock_diag: its listener has explicit sizes */
    long listener_size[2];           /* and its sizes, by enum sockopts_buf (kernel's) */
    bool cmdline_override;           /* it runs with --option 'socket options=...' */
    char why[1024];                  /* the first fact that could not be read, or "" */
};

/* Gather the facts for the smbd that runs with smb_conf. Never fails: a
 * fact that cannot be read keeps its "unknown" value and its reason goes
 * to why. Blocks (helpers with deadlines up to 60 s). */
void facts_gather(const char *smb_conf, struct facts *f);

/* The search's start for a socket options value: what the kernel really
 * does with each buffer smbd passes it (see facts.c). */
struct search_config facts_config_of_value(const struct facts *f, const struct search_params *dflt,
                                           const char *value);

/* A kernel-cap entry (JOURNAL_ID_KERNEL_CAP) about one buffer: its cap in
 * SMBTUNED_RCVBUF or SMBTUNED_SNDBUF and the sysctl in SMBTUNED_SYSCTL.
 * outcome.c tells a winner at the cap the same way. */
void facts_cap_event(int prio, enum sockopts_buf which, long cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A notice, every cycle, for each buffer that smb.conf leaves to
 * autotuning while smbd's listener holds an explicit size. */
void facts_listener_notice(const struct facts *f, struct search_config inc0);

/* The search's bounds: the configured ones, capped at what the kernel
 * allows, with the rate mapping of the trials and AUTO left out while it
 * cannot take effect. *auto_blocked: AUTO is left out but can still be
 * measured after the search, for the admin's information. The caps and
 * the reason for leaving AUTO out go to the journal. */
void facts_search_bounds(const struct facts *f, const struct tuner_opts *o,
                         struct search_config inc0, struct search_params *p, bool *auto_blocked);

struct state;

/* What the measurements in st were made on (Samba's version, the kernel,
 * the smb.conf), against f and smb_conf: msg gets what changed ("Samba
 * 4.17 -> 4.18, kernel ..."), or "" when nothing did; st takes the new
 * fingerprint. */
void facts_fingerprint(const struct facts *f, struct state *st, const char *smb_conf, char *msg,
                       size_t len);

/* Whether new connections of the running smbd get an explicit size for
 * this buffer (so AUTO cannot reach them before smbd restarts). */
bool facts_listener_explicit(const struct facts *f, struct search_config inc0,
                             enum sockopts_buf which);

/* Whether the trials run on this machine's loopback: shadow trials, with
 * or without a url, whatever its host (the probe connects to the shadow
 * on 127.0.0.1); and client trials whose probe found its connection on
 * this machine (probe_loopback: a probe of the search said so,
 * probe_result.loopback), which a url of this machine by any name or
 * address gives. Loopback cannot rank sizes above the small-buffer cliff
 * (shared/FACTS.md: runs vary by 25%), which outcome.c takes into
 * account. */
bool facts_trials_on_loopback(const struct tuner_opts *o, bool probe_loopback);

#endif
