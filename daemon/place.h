/* place: where a shadow or client trial runs, so that the probe measures
 * a candidate without touching production's connections.
 *
 *   shadow  a private smbd (lib/trial.h) with the candidate's socket
 *           options, serving the same shares on its own port of 127.0.0.1:
 *           started without blocking (spawned, then polled from a timer)
 *   client  the probe's own client socket carries the candidate: nothing
 *           to start, the probe gets the socket options
 *
 * Without a URL (tuner_opts.own_share) every shadow serves the daemon's own
 * share too, STATE_DIR/PLACE_OWN_SHARE_DIR, and the probe measures that.
 *
 * A live trial is an edit of our line: daemon/owned.h. */
#ifndef SMBTUNED_PLACE_H
#define SMBTUNED_PLACE_H

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "err.h"
#include "search.h"
#include "tuner_opts.h"

struct place;

/* r: 0, with the URL the probe measures and, for client trials, the
 * socket options of its client socket (NULL: its usual ones); both valid
 * during the call. Or -errno, the reason logged. */
typedef void (*place_fn)(void *ud, int r, const char *url, const char *client_sockopts);

int place_new(sd_event *ev, const struct tuner_opts *o, struct place **pp);
void place_free(struct place *p); /* stops the shadows, blocking */

/* Make the next probe measure c, whose other tokens are those of base
 * (the value in force). done is called from the loop. -EBUSY while a
 * shadow starts; -EAGAIN (reported) while too many earlier shadows are
 * still stopping. A shadow replaced or put down is stopped in steps from
 * the loop (it may outlive this call by up to 2 x TRIAL_STOP_TIMEOUT_S);
 * place_free() finishes what is left, blocking. */
int place_put(struct place *p, const char *base, struct search_config c, place_fn done, void *ud);

/* Stop the shadow, if one runs (or starts). */
void place_down(struct place *p);

/* Whether the shadow in place refused a connection from 127.0.0.1 by
 * smb.conf's hosts lists (trial_shadow_denied); false without one. */
bool place_denied(const struct place *p);

/* The own share's directory, in the state directory. */
#define PLACE_OWN_SHARE_DIR "share"

/* Remove the shadows a killed run left. */
int place_sweep(const struct tuner_opts *o, struct err *e);

/* With the own share: remove a killed probe's files from its directory,
 * and nothing else (only regular files of ours under a probe's name, and
 * only from a directory of ours, mode 0700: tune.state_dir may be any
 * directory of root's); nothing to do otherwise. Blocks for a directory
 * listing only. */
int place_tidy(const struct tuner_opts *o, struct err *e);

#endif
