/* drift-bound: how often could any window test catch the drift objective's
 * step within 10 samples, if the winner's true mean and spread were known?
 * The strict reading of the requirement (no alarm in the 20 samples before
 * the step, one within the 10 after it) has this as its ceiling: the
 * verification (lib/verify.c) only ever knows an estimate of the reference.
 *
 * Each sample is the drift objective's: two rates (write, read), each
 * lognormal with spread sigma plus 2% stalls at a tenth of the rate; the
 * step is 20% down on both. The score is the one lib/verify.c uses: per
 * rate clipped at 2 spreads, summed; the test is the sum of the last 10
 * scores against its standard error, at thresholds from 2.0 to 3.4.
 *
 * usage: drift-bound [--sigma S] [--runs N] (defaults 0.25, 100000) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "verify.h"

#define WINDOW VERIFY_WINDOW
#define CLIP 2.0 /* verify.c's VERIFY_CLIP */
#define STEP 0.8 /* sim.c: the drift objective's link after the step */
#define MAX_SAMPLES 64

/* One rate's score in spreads: the simulator's noise (sim_spec_init) on
 * log rate shift from the true mean. */
static double score(const struct sim_spec *sp, struct sim_rng *rng, double shift)
{
    double u = sim_rng_normal(rng) + shift / sp->sigma;
    if (sim_rng_uniform(rng) < sp->outlier_rate)
        u += log(sp->outlier_factor) / sp->sigma;
    return fmax(-CLIP, fmin(CLIP, u));
}

int main(int argc, char **argv)
{
    double sigma = 0.25;
    int runs = 100000;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--sigma") == 0)
            sigma = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--runs") == 0)
            runs = atoi(argv[i + 1]);
        else
            runs = 0;
    }
    if (sigma <= 0 || runs < 1 || argc % 2 == 0) {
        fprintf(stderr, "usage: drift-bound [--sigma S] [--runs N]\n");
        return 2;
    }
    struct sim_spec sp;
    sim_spec_init(&sp, sim_objective_find("drift"), sigma, (struct search_config){0, 0}, 0);
    const int pre = sp.verify_pre;
    if (pre + WINDOW > MAX_SAMPLES) {
        fprintf(stderr, "drift-bound: %d samples before the step: at most %d\n", pre,
                MAX_SAMPLES - WINDOW);
        return 1;
    }

    /* the window sum's spread under no drift, measured rather than derived */
    struct sim_rng rng;
    double sum = 0, sum2 = 0;
    sim_rng_seed(&rng, 1);
    for (int i = 0; i < 1000000; i++) {
        double z = score(&sp, &rng, 0) + score(&sp, &rng, 0);
        sum += z;
        sum2 += z * z;
    }
    double mean = sum / 1e6, sd = sqrt(sum2 / 1e6 - mean * mean) * sqrt(WINDOW);

    printf("| threshold | caught within %d, none before | alarm before the step | late |\n",
           WINDOW);
    printf("|---|---|---|---|\n");
    for (double thr = 2.0; thr < 3.45; thr += 0.2) {
        int ok = 0, early = 0;
        sim_rng_seed(&rng, 2);
        for (int r = 0; r < runs; r++) {
            double z[MAX_SAMPLES];
            int alarm = 0;
            for (int i = 0; i < pre + WINDOW && !alarm; i++) {
                double shift = i >= pre ? log(STEP) : 0;
                z[i] = score(&sp, &rng, shift) + score(&sp, &rng, shift) - mean;
                if (i < WINDOW - 1)
                    continue;
                double w = 0;
                for (int j = i - WINDOW + 1; j <= i; j++)
                    w += z[j];
                if (fabs(w) > thr * sd)
                    alarm = i + 1;
            }
            early += alarm > 0 && alarm <= pre;
            ok += alarm > pre;
        }
        printf("| %.1f | %.1f%% | %.1f%% | %.1f%% |\n", thr, 100.0 * ok / runs,
               100.0 * early / runs, 100.0 * (runs - ok - early) / runs);
    }
    return 0;
}
