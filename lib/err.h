/* err: why something failed, for the caller to log or print. */
#ifndef SMBTUNE_ERR_H
#define SMBTUNE_ERR_H

/* Functions return 0 or a negative errno; the human-readable reason goes
 * into a struct err supplied by the caller (never to stdout). */
struct err {
    char msg[1024];
};

/* Format the reason into e (when e is not NULL) and return code, so that a
 * failure path reads `return err_set(e, -EINVAL, "...", ...);`. A reason
 * too long for msg ends in "...": reasons come first, so what is cut is a
 * value or a path. */
int err_set(struct err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
