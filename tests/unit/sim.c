/* sim: see sim.h. The objectives come from the measurements in
 * shared/FACTS.md; each function says which table. Rates in MB/s. */
#include "sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verify.h"

/* ---- PRNG ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void sim_rng_seed(struct sim_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t sim_rng_next(struct sim_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double sim_rng_uniform(struct sim_rng *r)
{
    return (double)(sim_rng_next(r) >> 11) * 0x1.0p-53;
}

double sim_rng_normal(struct sim_rng *r)
{
    /* Marsaglia's polar method: no trigonometry. */
    double u, v, q;
    do {
        u = 2 * sim_rng_uniform(r) - 1;
        v = 2 * sim_rng_uniform(r) - 1;
        q = u * u + v * v;
    } while (q >= 1 || q == 0);
    return u * sqrt(-2 * log(q) / q);
}

/* ---- objectives ---- */

const struct sim_objective sim_objectives[] = {
    {"wan-100", SIM_WAN100, false},   {"constrained", SIM_CONSTRAINED, true},
    {"wan-1g", SIM_WAN1G, true},      {"cliff", SIM_CLIFF, true},
    {"interior", SIM_INTERIOR, true}, {"flat", SIM_FLAT, false},
    {"drift", SIM_DRIFT, false},      {"loopback", SIM_LOOPBACK, true},
};
const int sim_nobjectives = sizeof(sim_objectives) / sizeof(sim_objectives[0]);

const struct sim_objective *sim_objective_find(const char *name)
{
    for (int i = 0; i < sim_nobjectives; i++)
        if (strcmp(sim_objectives[i].name, name) == 0)
            return &sim_objectives[i];
    return NULL;
}

#define KIB 1024.0
/* A buffer-limited TCP flow moves about 1.19 buffers per round trip: Linux
 * grants twice the requested size and keeps part of it for overhead. The
 * factor fits FACTS.md's smbclient puts (40 ms: 16K 0.47, 64K 1.96, 256K
 * 7.79 MB/s; 10 ms: 64K 8.09, 256K 31.5) and its iperf3 runs. */
static double window_rate(long size, double rtt, double link)
{
    return fmin(link, 1.19 * (double)size / rtt / 1e6);
}

/* FACTS.md, 40 ms / 100 Mbit/s gets: a small SO_SNDBUF costs less.
 * Interpolated in log-log between the measured sizes. */
static double wan100_read(long size)
{
    static const double kib[] = {16, 64, 256, 1024, 4096};
    static const double rate[] = {4.12, 5.68, 8.48, 11.40, 11.58};
    double x = log2((double)size / KIB);
    int i = 0;
    if (x >= log2(kib[4]))
        return rate[4];
    while (i < 3 && x > log2(kib[i + 1]))
        i++;
    double f = (x - log2(kib[i])) / (log2(kib[i + 1]) - log2(kib[i]));
    return exp(log(rate[i]) + f * (log(rate[i + 1]) - log(rate[i])));
}

/* The probe's rates on loopback against an smbd with SO_RCVBUF = SO_SNDBUF
 * = size (bench/README.md, "Loopback's get peak": medians of 15 probes a
 * size, interleaved, 2 cores). Reads peak on a plateau at 256-512 KiB, 1
 * MiB is 9% below it, the cap and AUTO 15-21%; below 64 KiB they stall.
 * Writes are flat from 128 KiB up, within the noise of two levels the
 * scheduler makes. Indexed by log2(size / 8 KiB), 8K to 4M. */
static double loopback_rate(int dir, long size)
{
    static const double rd[] = {0, 0, 0, 1030, 1700, 2040, 2040, 1850, 1700, 1610};
    static const double wr[] = {190, 240, 240, 950, 1300, 1300, 1300, 1300, 1300, 1300};
    if (size == SEARCH_AUTO)
        return dir ? 1730 : 1300;
    int i = (int)floor(log2((double)size / (8 * KIB)));
    i = i < 0 ? 0 : i > 9 ? 9 : i;
    return dir ? rd[i] : wr[i];
}

/* One direction (0 write: ranked by rcvbuf, 1 read: by sndbuf). */
static double rate_of(const struct sim_objective *o, int dir, long size, double link, bool *stall)
{
    *stall = false;
    switch (o->kind) {
    case SIM_WAN100:
    case SIM_DRIFT:
        /* FACTS.md 40ms/100M: unset 11.59 put, 11.60 get */
        if (size == SEARCH_AUTO)
            return (dir ? 11.60 : 11.59) * link;
        return dir ? fmin(wan100_read(size), 11.6 * link) : window_rate(size, 0.040, 11.6 * link);
    case SIM_CONSTRAINED:
        /* FACTS.md constrained table: unset 1.94 put, 5.63 get */
        if (size == SEARCH_AUTO)
            return dir ? 5.63 : 1.94;
        return dir ? wan100_read(size) : window_rate(size, 0.040, 11.6);
    case SIM_WAN1G:
        /* FACTS.md raw TCP at 1 Gbit/s: autotuning 599, 4M 909 Mbit/s */
        if (size == SEARCH_AUTO)
            return 0.66 * 113.6;
        return window_rate(size, 0.040, 113.6);
    case SIM_CLIFF:
        /* FACTS.md 10ms/1G with constrained autotuning (unset 7.89 put,
         * 11.84 get); below 64 KiB one segment per delayed-ACK tick. */
        if (size == SEARCH_AUTO)
            return dir ? 11.84 : 7.89;
        if (size < 64 * 1024) {
            *stall = true;
            return 0.036 * (double)size / (8 * KIB);
        }
        return window_rate(size, 0.010, dir ? 116.0 : 113.6);
    case SIM_INTERIOR: {
        /* Peak at 512 KiB; one step away 15% lower; below that the window
         * halves the rate per halving, above it 15% per doubling. */
        if (size == SEARCH_AUTO)
            return 60;
        double k = log2((double)size / (512 * KIB));
        if (k < -1)
            return 100 * 0.85 * exp2(k + 1);
        return 100 * pow(0.85, fabs(k));
    }
    case SIM_FLAT:
        return 1000;
    case SIM_LOOPBACK: {
        double r = loopback_rate(dir, size);
        if (r > 0)
            return r;
        /* FACTS.md: a small SO_SNDBUF stalls loopback reads (2 MB/s) */
        *stall = true;
        return 2;
    }
    }
    return 0;
}

void sim_truth(const struct sim_objective *o, struct search_config c, double link,
               struct sim_truth *t)
{
    t->write = rate_of(o, 0, c.rcvbuf, link, &t->write_stall);
    t->read = rate_of(o, 1, c.sndbuf, link, &t->read_stall);
}

/* ---- one run ---- */

void sim_spec_init(struct sim_spec *sp, const struct sim_objective *o, double sigma,
                   struct search_config start, uint64_t seed)
{
    memset(sp, 0, sizeof(*sp));
    sp->obj = o;
    search_params_default(&sp->params);
    sp->params.min_size = 8192;
    sp->params.max_rcvbuf = 4194304;
    sp->params.max_sndbuf = 4194304;
    sp->start = start;
    sp->sigma = sigma;
    sp->outlier_rate = 0.02;
    sp->outlier_factor = 0.1;
    sp->seed = seed;
    sp->verify_pre = 20;
    sp->verify_post = 20;
}

/* The truth as the tuned socket sees it: with the client mapping the
 * client's sndbuf carries the writes and its rcvbuf the reads. */
static void truth_of(const struct sim_spec *sp, struct search_config c, double link,
                     struct sim_truth *t)
{
    if (sp->params.mapping == SEARCH_RANK_CLIENT)
        c = (struct search_config){c.sndbuf, c.rcvbuf};
    sim_truth(sp->obj, c, link, t);
}

/* The true rate that ranks dim k of configuration c. */
static double ranked_truth(const struct sim_spec *sp, int k, struct search_config c)
{
    struct sim_truth t;
    truth_of(sp, c, 1, &t);
    if (sp->params.tied)
        return 2 / (1 / t.write + 1 / t.read);
    bool write = (k == 0) == (sp->params.mapping == SEARCH_RANK_SERVER);
    return write ? t.write : t.read;
}

static double noisy(const struct sim_spec *sp, struct sim_rng *rng, double rate)
{
    double x = rate * exp(sp->sigma * sim_rng_normal(rng));
    if (sim_rng_uniform(rng) < sp->outlier_rate)
        x *= sp->outlier_factor;
    return x;
}

static void measure(const struct sim_spec *sp, struct sim_rng *rng, struct search_config c,
                    double link, double wmin, double rmin, struct search_sample *x)
{
    struct sim_truth t;
    truth_of(sp, c, link, &t);
    x->write = noisy(sp, rng, t.write);
    x->read = noisy(sp, rng, t.read);
    /* The probe's deadline is set from the abort rate: slower is a timeout,
     * reporting what it reached (at a constant rate, the rate itself). */
    x->write_timeout = t.write_stall || x->write < wmin;
    x->read_timeout = t.read_stall || x->read < rmin;
}

/* The sizes a dim can take: AUTO (if observable) and the lattice. */
static int candidates(const struct search_params *p, long cap, long *out)
{
    int n = 0;
    if (p->auto_observable)
        out[n++] = SEARCH_AUTO;
    long size = 1;
    while (size < p->min_size)
        size <<= 1;
    for (; size < cap; size <<= 1)
        out[n++] = size;
    out[n++] = cap;
    return n;
}

static struct search_config with(struct search_config c, int k, long size, bool tied,
                                 const struct search_params *p)
{
    if (tied) {
        c.rcvbuf = size != SEARCH_AUTO && size > p->max_rcvbuf ? p->max_rcvbuf : size;
        c.sndbuf = size != SEARCH_AUTO && size > p->max_sndbuf ? p->max_sndbuf : size;
    } else if (k == 0) {
        c.rcvbuf = size;
    } else {
        c.sndbuf = size;
    }
    return c;
}

static long dim_value(struct search_config c, int k)
{
    return k == 0 ? c.rcvbuf : c.sndbuf;
}

static void trace(FILE *f, const struct search *s, struct search_config c,
                  const struct search_sample *x)
{
    char buf[96];
    fprintf(f, "%4d %s: write %.4g%s read %.4g%s\n", search_samples(s),
            search_config_str(c, buf, sizeof(buf)), x->write, x->write_timeout ? " (timeout)" : "",
            x->read, x->read_timeout ? " (timeout)" : "");
    for (const char *w = search_why(s), *e; *w; w = *e ? e + 1 : e) {
        e = strchr(w, '\n');
        if (!e)
            e = w + strlen(w);
        fprintf(f, "     %.*s\n", (int)(e - w), w);
    }
}

/* Run search s to convergence on the link rate link. With res, the
 * moves and trials are judged against the truth (the first search). */
static int converge(const struct sim_spec *sp, struct search *s, struct sim_rng *rng, double link,
                    struct sim_result *res, struct search_config *end)
{
    const struct search_params *p = &sp->params;
    bool tied = p->tied;
    int ndims = tied ? 1 : 2;
    struct search_config cfg, inc = search_incumbent(s);

    while (search_ask(s, &cfg) == SEARCH_MEASURE) {
        double wmin, rmin;
        struct search_sample x;
        search_abort_rates(s, cfg, &wmin, &rmin);
        for (int k = 0; k < ndims && res; k++) {
            if (dim_value(cfg, k) == dim_value(inc, k))
                continue;
            double ratio = ranked_truth(sp, k, cfg) /
                           ranked_truth(sp, k, with(cfg, k, dim_value(inc, k), tied, p));
            res->worst_trial = fmin(res->worst_trial, ratio);
        }
        measure(sp, rng, cfg, link, wmin, rmin, &x);
        if (search_tell(s, cfg, &x) < 0)
            return -1;
        if (sp->trace && res)
            trace(sp->trace, s, cfg, &x);
        struct search_config now = search_incumbent(s);
        for (int k = 0; k < ndims && res; k++) {
            if (dim_value(now, k) == dim_value(inc, k))
                continue;
            res->moves++;
            double before = ranked_truth(sp, k, inc);
            double after = ranked_truth(sp, k, with(inc, k, dim_value(now, k), tied, p));
            if (after < before * (1 - p->min_gain))
                res->wrong_moves++;
        }
        inc = now;
    }
    *end = cfg;
    return 0;
}

int sim_run(const struct sim_spec *sp, struct sim_result *res)
{
    struct search *s = NULL;
    struct verify *v = NULL;
    struct sim_rng rng;
    const struct search_params *p = &sp->params;
    bool tied = p->tied;
    int ndims = tied ? 1 : 2;
    int rc;

    memset(res, 0, sizeof(*res));
    res->ndims = ndims;
    res->worst_trial = 1;
    sim_rng_seed(&rng, sp->seed);
    if ((rc = search_new(p, sp->start, &s)) < 0 ||
        (rc = converge(sp, s, &rng, 1, res, &res->end)) < 0)
        goto out;
    res->samples = search_samples(s);

    /* Quality: each dim's true ranked rate against the best it could take. */
    long cand[SEARCH_MAX_LEVELS];
    int ncand[2];
    res->small_or_auto = true;
    for (int k = 0; k < ndims; k++) {
        long cap = k == 0 ? p->max_rcvbuf : p->max_sndbuf;
        if (tied && p->max_sndbuf > cap)
            cap = p->max_sndbuf;
        int n = ncand[k] = candidates(p, cap, cand);
        double best = 0;
        for (int i = 0; i < n; i++)
            best = fmax(best, ranked_truth(sp, k, with(res->end, k, cand[i], tied, p)));
        double end = ranked_truth(sp, k, res->end);
        res->quality[k] = end / best;
        /* AUTO, or the smallest size within 0.5% of the best */
        long endv = dim_value(res->end, k);
        if (endv != SEARCH_AUTO) {
            for (int i = 0; i < n; i++) {
                if (cand[i] == SEARCH_AUTO)
                    continue;
                if (ranked_truth(sp, k, with(res->end, k, cand[i], tied, p)) >= best * 0.995) {
                    res->small_or_auto = res->small_or_auto && cand[i] == endv;
                    break;
                }
            }
        }
    }
    int grid = tied ? ncand[0] - p->auto_observable
                    : (ncand[0] - p->auto_observable) * (ncand[1] - p->auto_observable);
    res->sweep = 5 * (grid + 1);

    /* Verification of the winner, one sample per daemon cycle; the link
     * steps down in SIM_DRIFT after verify_pre of them. An alarm before the
     * step does what it does in the daemon: a new search from the winner,
     * within that cycle (minutes, where the cycles are hours apart), and
     * verification of its winner from the next cycle on. */
    struct search_config win = res->end;
    if ((rc = verify_of_search(s, &v)) < 0)
        goto out;
    for (int i = 0; i < sp->verify_pre + sp->verify_post && res->alarm == 0; i++) {
        bool after = i >= sp->verify_pre;
        double link = after && sp->obj->kind == SIM_DRIFT ? 0.8 : 1;
        struct search_sample x;
        measure(sp, &rng, win, link, 0, 0, &x);
        if (verify_tell(v, &x) != VERIFY_RESEARCH)
            continue;
        if (after) {
            res->alarm = i - sp->verify_pre + 1;
            break;
        }
        res->early_alarms++;
        search_free(s);
        verify_free(v);
        v = NULL;
        if ((rc = search_new(p, win, &s)) < 0 || (rc = converge(sp, s, &rng, 1, NULL, &win)) < 0 ||
            (rc = verify_of_search(s, &v)) < 0)
            goto out;
        res->research_samples += search_samples(s);
    }
out:
    verify_free(v);
    search_free(s);
    return rc;
}

static long env_long(const char *name, long def, long min, long max)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v)
        return def;
    long x = strtol(v, &end, 10);
    if (*end || x < min || x > max)
        return def;
    return x;
}

int sim_env_seeds(void)
{
    return (int)env_long("SMBTUNED_SIM_SEEDS", 200, 1, 100000);
}

uint64_t sim_env_seed(void)
{
    return (uint64_t)env_long("SMBTUNED_SIM_SEED", 1, 0, 0x7fffffffL);
}
