/* search: the noise-aware hill climber that picks SO_RCVBUF / SO_SNDBUF.
 *
 * Ask/tell, no I/O: search_ask() names the configuration to measure next,
 * search_tell() is given the measurement, and once the search has
 * converged search_verify_tell() watches the winner for drift. The same
 * code runs in the daemon, in --once and in the simulator that tests it
 * (tests/unit/sim.c).
 *
 * A configuration is (rcvbuf, sndbuf); each is SEARCH_AUTO (no token:
 * kernel autotuning) or a size from the lattice: the powers of two from
 * min_size up to the kernel's cap, plus the cap itself when it is not a
 * power of two (stock Debian: 212992). One probe measures a write rate and
 * a read rate; each rate ranks one buffer (the mapping), and both buffers
 * are searched at once from the same stream of samples (see search.c). */
#ifndef SMBTUNE_SEARCH_H
#define SMBTUNE_SEARCH_H

#include <stdbool.h>
#include <stddef.h>

#include "stats.h"

#define SEARCH_AUTO 0L          /* no SO_RCVBUF/SO_SNDBUF token */
#define SEARCH_MAX_LEVELS 34    /* AUTO, up to 32 lattice sizes, an off-lattice start */
#define SEARCH_LEVEL_CAP 128    /* samples kept per configuration (oldest dropped) */
#define SEARCH_VERIFY_WINDOW 10 /* verification samples not yet in the reference */
#define SEARCH_WHY_LEN 512

enum search_rank {
    /* The server's buffers are tuned: writes to the server rank its
     * SO_RCVBUF, reads from it rank its SO_SNDBUF. */
    SEARCH_RANK_SERVER,
    /* The local client socket is tuned: writes rank its SO_SNDBUF, reads
     * its SO_RCVBUF. */
    SEARCH_RANK_CLIENT,
};

struct search_params {
    long min_size;        /* smallest explicit size, rounded up to a power of two */
    long max_rcvbuf;      /* largest SO_RCVBUF: the configured bound capped at
                           * net.core.rmem_max (any integer; itself a candidate) */
    long max_sndbuf;      /* largest SO_SNDBUF, capped at net.core.wmem_max */
    bool auto_observable; /* AUTO can be measured; when not, it is no candidate */
    enum search_rank mapping;
    bool tied;          /* rcvbuf = sndbuf, moved together, ranked by both rates */
    double min_gain;    /* a move must gain this much (0.03) */
    double abort_ratio; /* a trial sample below this share of the incumbent ends it (0.5) */
    int min_samples;    /* per configuration before a comparison counts (3) */
    int max_samples;    /* per configuration in one comparison (40; twice that
                         * for a comparison leaning towards the candidate) */
    int max_total;      /* samples for the whole search (400) */
    double alpha;       /* false-move rate of one look of a gain test (0.001) */
    double drift_min;   /* verification: smallest drift worth a new search (0.10) */
};

struct search_config {
    long rcvbuf, sndbuf; /* SEARCH_AUTO or a size in bytes */
};

/* One probe: both rates in the same unit (bytes/s, say). A rate the probe
 * did not measure is negative and ignored. A direction that hit its
 * deadline is a timeout and its rate is what it reached before the
 * deadline (a lower bound). */
struct search_sample {
    double write, read;
    bool write_timeout, read_timeout;
};

enum search_step {
    SEARCH_MEASURE, /* measure *next, then search_tell() */
    SEARCH_DONE,    /* converged: *next is the winner */
};

enum search_tell_result {
    SEARCH_TOLD,    /* recorded */
    SEARCH_ABORTED, /* recorded; it ended a trial (too slow, or a timeout) */
};

enum search_verdict {
    SEARCH_VERIFY_OK,
    SEARCH_VERIFY_RESEARCH, /* the winner drifted: start a new search */
};

/* One configuration of one buffer, as the search knows it. Private. */
struct search_level {
    long size; /* SEARCH_AUTO or bytes */
    bool lattice;
    bool tabu;   /* has been the incumbent: never a candidate again */
    int strikes; /* trial samples in a row that ended a trial */
    int aborts;  /* samples that ended a trial */
    int timeouts;
    int since; /* samples it had when it became the incumbent */
    int n;
    double w[SEARCH_LEVEL_CAP], r[SEARCH_LEVEL_CAP]; /* log rates, NAN if not measured */
    /* refreshed after every sample */
    int kept;
    double mean;
    int fresh; /* samples since it became the incumbent */
};

/* One buffer (or, tied, both). Private. */
struct search_dim {
    const char *name; /* "SO_RCVBUF", "SO_SNDBUF", "SO_RCVBUF/SO_SNDBUF" */
    int rank;         /* 0: the write rate ranks it, 1: the read rate, 2: both */
    int nlevels;
    struct search_level lv[SEARCH_MAX_LEVELS];
    int inc;  /* incumbent level */
    int cand; /* candidate on trial, -1 none */
    int look; /* the comparison is judged when both sides have this many */
    int cap;  /* samples the candidate may take: max_samples, or twice */
    int queue[2 * SEARCH_MAX_LEVELS];
    bool queue_walk[2 * SEARCH_MAX_LEVELS];
    int nqueue;
    bool cand_walk; /* the candidate came from a walk down from the cap */
    int walk_best;  /* best rejected walk point so far, -1 none */
    bool walked;    /* the walk was queued for a broken incumbent */
    int last_dir;   /* +1 the last move went up, -1 down, 0 neither */
    bool done;
    double sigma; /* pooled spread of log rates (kept samples) */
    double df;
    double reject; /* outlier bound around a level's median */
};

struct search_verify {
    int nch;                              /* channels: one per dim, its ranked rate */
    int rank[2];                          /* 0 write, 1 read, 2 both (harmonic) */
    double mean[2];                       /* reference: mean of log rates */
    int n[2];                             /* and its samples */
    double ss[2], df[2];                  /* pooled squares and degrees of freedom of the spread */
    double reject[2];                     /* stall bound (from the search) */
    double pend[2][SEARCH_VERIFY_WINDOW]; /* recent samples, not yet in the reference */
    int npend;
    struct stats_cusum cusum;
    bool alarm;
};

struct search {
    struct search_params p;
    int ndims;
    struct search_dim dim[2]; /* untied: [0] rcvbuf, [1] sndbuf; tied: [0] */
    int total;
    bool done;
    struct search_verify v;
    char why[SEARCH_WHY_LEN];
};

/* The defaults above; max_rcvbuf/max_sndbuf are 4 MiB, min_size 4 KiB. */
void search_params_default(struct search_params *p);

/* Start a search from the incumbent (the configuration in force now; a
 * size off the lattice is allowed, a size above the cap counts as the
 * cap). Returns 0, or -EINVAL for inconsistent parameters, -ERANGE for a
 * lattice too large. */
int search_init(struct search *s, const struct search_params *p, struct search_config incumbent);

/* A size for people: "auto" or the number of bytes. Returns buf. */
const char *search_size_str(long size, char *buf, size_t len);

/* What to measure next, or the winner once converged. */
enum search_step search_ask(const struct search *s, struct search_config *next);

/* Rates below which a sample of cfg ends its trial, for the probe's
 * deadlines (deadline = bytes / rate). 0 for a direction that is on no
 * trial in cfg: the probe's own hard limit applies. */
void search_abort_rates(const struct search *s, struct search_config cfg, double *write_min,
                        double *read_min);

/* Record one measurement of cfg. Returns SEARCH_TOLD or SEARCH_ABORTED, or
 * -EINVAL when cfg is not a configuration of this search. */
int search_tell(struct search *s, struct search_config cfg, const struct search_sample *x);

/* The incumbent now (the winner once converged). */
struct search_config search_incumbent(const struct search *s);

/* Samples told so far. */
int search_samples(const struct search *s);

/* The decisions taken by the last search_tell / search_verify_tell (and
 * search_init), one line each: why, then what. Empty when none. */
const char *search_why(const struct search *s);

/* After convergence: one sample of the winner. Returns SEARCH_VERIFY_OK,
 * SEARCH_VERIFY_RESEARCH once a drift of at least drift_min is
 * significant (and from then on), or -EINVAL before convergence. */
int search_verify_tell(struct search *s, const struct search_sample *x);

#endif
