/* sim: the search against synthetic noisy objectives. Shared by the unit
 * test (tests/unit/test_search.c), which asserts quality limits, and the
 * benchmark (bench/search_sim.c), which prints them. Deterministic: its
 * own PRNG, seeded per run. */
#ifndef SMBTUNE_SIM_H
#define SMBTUNE_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "search.h"

/* xoshiro256** seeded through splitmix64: the same stream everywhere. */
struct sim_rng {
    uint64_t s[4];
};
void sim_rng_seed(struct sim_rng *r, uint64_t seed);
uint64_t sim_rng_next(struct sim_rng *r);
double sim_rng_uniform(struct sim_rng *r); /* [0, 1) */
double sim_rng_normal(struct sim_rng *r);  /* N(0, 1) */

enum sim_kind {
    SIM_WAN100,      /* 100 Mbit/s, 40 ms: min(11.6, 1.19 buffer / RTT) MB/s */
    SIM_CONSTRAINED, /* the same path, autotuning capped at 128 KiB */
    SIM_WAN1G,       /* 1 Gbit/s, 40 ms: AUTO reaches 66%, 4 MiB the link */
    SIM_CLIFF,       /* 1 Gbit/s, 10 ms, sizes below 64 KiB stall and time out */
    SIM_INTERIOR,    /* a single peak at 512 KiB, 15% lower one step away */
    SIM_FLAT,        /* loopback-like: every configuration equal */
    SIM_DRIFT,       /* wan-100 whose link rate steps down 20% */
    SIM_LOOPBACK,    /* the probe on loopback: reads peak at 256-512 KiB */
};

struct sim_objective {
    const char *name;
    enum sim_kind kind;
    bool auto_loses; /* AUTO is at least 10% below the optimum */
};

extern const struct sim_objective sim_objectives[];
extern const int sim_nobjectives;
const struct sim_objective *sim_objective_find(const char *name);

/* Noiseless rates (MB/s) of a server configuration: the write rate depends
 * on rcvbuf, the read rate on sndbuf (separable, as measured). link is the
 * link rate relative to the start (drift). A stalled direction times out
 * whatever the deadline. */
struct sim_truth {
    double write, read;
    bool write_stall, read_stall;
};
void sim_truth(const struct sim_objective *o, struct search_config c, double link,
               struct sim_truth *t);

struct sim_spec {
    const struct sim_objective *obj;
    struct search_params params; /* sim_spec_init: defaults, min 8 KiB, cap 4 MiB */
    struct search_config start;
    double sigma;          /* lognormal spread of each rate */
    double outlier_rate;   /* 0.02 */
    double outlier_factor; /* 0.1: an outlier runs at a tenth of the rate */
    uint64_t seed;
    int verify_pre;  /* verification samples before the drift step (20) */
    int verify_post; /* and after it (20); the step is only in SIM_DRIFT */
    FILE *trace;     /* when set: every sample of the first search and the
                      * search's decisions, one line each */
};

void sim_spec_init(struct sim_spec *sp, const struct sim_objective *o, double sigma,
                   struct search_config start, uint64_t seed);

struct sim_result {
    struct search_config end;
    int samples;       /* until the search converged */
    int ndims;         /* 1 tied, 2 untied */
    double quality[2]; /* per dim: true ranked rate of the end / best candidate */
    int wrong_moves;   /* moves to a level truly worse by more than min_gain */
    int moves;
    double worst_trial;   /* lowest true ranked rate of a trial / its incumbent's */
    int sweep;            /* samples of the exhaustive sweep: 5 per grid point + AUTO */
    int alarm;            /* verification: the first alarm at the step or after:
                           * k > 0 the k-th sample after it, 0 none */
    int early_alarms;     /* alarms before the step, each followed by a new
                           * search (false ones: the link had not changed) */
    int research_samples; /* the samples of those searches */
    bool small_or_auto;   /* every dim ended at AUTO or at the smallest size
                           * within 0.5% of its best (flat) */
};

int sim_run(const struct sim_spec *sp, struct sim_result *res);

/* Seeds and base seed for the suites: SMBTUNED_SIM_SEEDS (default 200)
 * and SMBTUNED_SIM_SEED (default 1). */
int sim_env_seeds(void);
uint64_t sim_env_seed(void);

#endif
