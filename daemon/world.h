/* world: what the tuner asks of the outside, as a table of operations, so
 * that the whole tuner can run against a simulated world in a unit test
 * (tests/unit/test_tuner.c), the way chrony simulates its daemon.
 *
 * The real world (world.c) gathers facts in a job, places trials with
 * daemon/place, measures with daemon/measure and reads the clients'
 * traffic through sock_diag. smb.conf and the state file are not part of
 * it: daemon/owned edits the real files in both worlds (a simulation's in
 * its temporary directory), so that a kill between any two steps is
 * settled by the same code that settles it in production.
 *
 * Every operation that ends later calls its done function from the loop,
 * never from inside the call. */
#ifndef SMBTUNED_WORLD_H
#define SMBTUNED_WORLD_H

#include <stdbool.h>
#include <stddef.h>
#include <systemd/sd-event.h>

#include "clients_watch.h"
#include "facts.h"
#include "kernel.h"
#include "measure.h"
#include "place.h"
#include "probe.h"
#include "tuner_opts.h"

/* r: 0 with the facts, or -errno (logged) when they could not be had */
typedef void (*world_facts_fn)(void *ud, int r, const struct facts *f);
/* r: 0 with the rate, or -errno and why */
typedef void (*world_busy_fn)(void *ud, int r, double mbps, const char *why);
/* r: 0 with the summary, or -errno and why */
typedef void (*world_clients_fn)(void *ud, int r, const struct clients_watch_summary *sum,
                                 const char *why);

struct world_ops {
    /* facts_gather for o->smb_conf */
    int (*facts)(void *ctx, world_facts_fn done, void *ud);
    /* see place_put, place_down */
    int (*place)(void *ctx, const char *base, struct search_config c, place_fn done, void *ud);
    void (*place_down)(void *ctx);
    /* see place_denied */
    bool (*place_denied)(void *ctx);
    /* see measure_start, measure_kill, measure_tidy */
    int (*measure)(void *ctx, const struct probe_params *p, measure_fn done, void *ud);
    void (*measure_kill)(void *ctx);
    void (*measure_tidy)(void *ctx, bool wait);
    /* the MB/s the TCP connections on local ports (smbd's `smb ports`:
     * the clients') move over the next seconds */
    int (*busy)(void *ctx, const int *ports, int nports, double seconds, world_busy_fn done,
                void *ud);
    /* what smbd's real connections on ports (its `smb ports`) get over the
     * next seconds (daemon/clients_watch) */
    int (*clients)(void *ctx, const int *ports, int nports, double seconds, world_clients_fn done,
                   void *ud);
    /* stop a facts job, a busy check or a clients watch under way, without
     * their done */
    void (*cancel)(void *ctx);
    /* at start-up: remove what a killed run left (shadows, a probe's file) */
    int (*sweep)(void *ctx, struct err *e);
    void (*free)(void *ctx);
};

struct world {
    const struct world_ops *ops;
    void *ctx;
};

/* The real one; o is the tuner's and outlives it. */
int world_real_new(sd_event *ev, const struct tuner_opts *o, struct world *w);

#endif
