/* tuner_opts: what one run of the tuner is asked to do, as typed values.
 *
 * config_fill() (lib/config) builds it from /etc/smbtuned.conf and the one
 * set of defaults; the tuner (daemon/tuner) only reads it. It lives in lib/
 * so that config, which fills it, needs no daemon header: the flow is
 * config -> tuner, never back. */
#ifndef SMBTUNE_TUNER_OPTS_H
#define SMBTUNE_TUNER_OPTS_H

#include <stdbool.h>

#include "apply.h"
#include "probe.h"
#include "search.h"

/* Where a candidate is tried. The config's "auto" is no value of its own:
 * config_fill() resolves it from the probe's URL (no URL: shadow). */
enum tuner_trials { TUNER_SHADOW, TUNER_CLIENT, TUNER_LIVE };
enum tuner_mode { TUNER_TUNE, TUNER_ADVISE };

/* With busy_rate, how long a search runs between two watches of the
 * clients' traffic (seconds): clients that start work while it runs meet
 * at most this much of it, a few samples, before it stops. */
#define BUSY_RECHECK_S 60.0

struct tuner_opts {
    const char *smb_conf;
    const char *state_dir;
    enum tuner_trials trials;
    enum tuner_mode mode;
    enum apply_method apply;
    struct probe_params probe; /* url, credentials, size ...; socket_options: the client's */
    /* No url configured: the probe measures the daemon's own share,
     * STATE_DIR/share, served by each shadow smbd as [TRIAL_OWN_SHARE]
     * (lib/trial.h); probe.url is then NULL and trials TUNER_SHADOW. */
    bool own_share;
    struct search_params search;
    long long max_bytes; /* moved by probes in one cycle; 0: no limit */
    double interval_s;   /* between cycles */
    double busy_mbps;    /* defer while clients move more than this; 0: never */
    /* a search watches the clients again between samples once this has
     * passed since the last watch (BUSY_RECHECK_S; 0: before every one) */
    double busy_recheck_s;
    int window_start; /* minutes after midnight; -1: any time */
    int window_end;
    bool restart_smbd;     /* may restart smbd_unit so that AUTO takes effect */
    const char *smbd_unit; /* the systemd unit that runs smbd (apply = systemd too) */
    /* set by the tuner, never by the config: a restart of smbd failed, and
     * restart_smbd is off until a reload (tuner_restart_failed) */
    bool restart_off;
    bool once; /* one cycle, then leave the loop (command line only) */
    /* --once --dry-run: the cycle's end saves nothing, so that the
     * daemon's schedule, search and reference stay as they were; a hold
     * or a recovery, which are about smb.conf, are saved as ever. */
    bool dry_run;
    bool json;     /* --once: the before/after object on stdout (command line only) */
    bool progress; /* --once: a line per sample on stderr (command line only) */
};

#endif
