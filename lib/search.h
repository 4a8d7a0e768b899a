/* search: the noise-aware hill climber that picks SO_RCVBUF / SO_SNDBUF.
 *
 * Ask/tell, no I/O: search_ask() names the configuration to measure next,
 * search_tell() is given the measurement, until the search has converged.
 * Then its winner's reference (search_reference) is what lib/verify.c
 * watches for drift. The same code runs in the daemon, in --once and in
 * the simulator that tests it (tests/unit/sim.c). struct search is opaque:
 * search_new() makes one, the accessors below read it.
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

#define SEARCH_AUTO 0L       /* no SO_RCVBUF/SO_SNDBUF token */
#define SEARCH_MAX_LEVELS 34 /* AUTO, up to 32 lattice sizes, an off-lattice start */
#define SEARCH_LEVEL_CAP 128 /* samples kept per configuration (oldest dropped) */
#define SEARCH_WHY_LEN 1024
/* No throughput measurement is better than 0.5%: a spread estimated below
 * that from a few equal samples would make any difference significant
 * (the search's comparisons and verify's scores alike). */
#define SEARCH_SIGMA_FLOOR 0.005

/* The rate that ranks a buffer. */
enum search_rate {
    SEARCH_RATE_WRITE,
    SEARCH_RATE_READ,
    SEARCH_RATE_BOTH, /* tied: the harmonic mean of both */
};

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

/* What a converged search knows of its winner, for verification: one
 * channel per buffer (one when tied), each the rate that ranks it. */
struct search_reference {
    int nch;
    struct search_channel {
        enum search_rate rate;
        double mean;   /* mean log rate of the winner's samples since it won */
        int n;         /* the samples that mean rests on (stalls left out) */
        double ss, df; /* pooled squares and degrees of freedom of the spread
                        * of log rates, over every configuration (0, 0: none) */
        double reject; /* stall bound: a log rate this far from a mean is one */
    } ch[2];
};

/* A configuration's rates as the search estimates them: exp of the robust
 * mean of the log rates (a geometric mean, stalls left out), NAN when it
 * has none; each rate from the level of the buffer it ranks. */
struct search_estimate {
    double write, read;
    int nwrite, nread; /* samples they rest on */
};

struct search;

/* The defaults above; max_rcvbuf/max_sndbuf are 16 MiB, min_size 4 KiB
 * (config_defaults() takes them: conf/smbtuned.conf documents them). */
void search_params_default(struct search_params *p);

/* Start a search from the incumbent (the configuration in force now; a
 * size off the lattice is allowed, a size above the cap counts as the
 * cap) into *sp. Returns 0, or -EINVAL for inconsistent parameters,
 * -ERANGE for a lattice too large, -ENOMEM; *sp is NULL on failure. */
int search_new(const struct search_params *p, struct search_config incumbent, struct search **sp);

/* NULL is allowed. */
void search_free(struct search *s);

/* The parameters it runs with (bounded as given to search_new). */
const struct search_params *search_params_of(const struct search *s);

/* A size for people: "auto" or the number of bytes. Returns buf. */
const char *search_size_str(long size, char *buf, size_t len);

/* "SO_RCVBUF auto SO_SNDBUF 262144". Returns buf. */
const char *search_config_str(struct search_config c, char *buf, size_t len);

bool search_config_eq(struct search_config a, struct search_config b);

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

/* Has it converged (search_ask says SEARCH_DONE)? */
bool search_converged(const struct search *s);

/* Samples told so far. */
int search_samples(const struct search *s);

/* The decisions taken by the last search_tell (and search_new), one line
 * each: why, then what. Empty when none. */
const char *search_why(const struct search *s);

/* Did line `line` (from 0) of search_why move an incumbent? */
bool search_why_move(const struct search *s, int line);

/* The rates of cfg as estimated from its samples so far. Returns 0, or
 * -EINVAL when cfg is not a configuration of this search. */
int search_estimate(const struct search *s, struct search_config cfg, struct search_estimate *est);

/* The winner's reference, as it was when the search converged. Returns 0,
 * or -EINVAL before convergence. */
int search_reference(const struct search *s, struct search_reference *ref);

/* The log of the rate r of x, as the search ranks its buffers by it (NAN
 * when not measured; a rate of 0 counts as a tiny one). */
double search_sample_rate(const struct search_sample *x, enum search_rate r);

/* "write", "read", "write+read". */
const char *search_rate_name(enum search_rate r);

#endif
