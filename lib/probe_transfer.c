/* probe_transfer: the probe child's transfer (see probe_child.h): it
 * writes the probe file in calls fitted to the duration, pacing its
 * socket, then reads the file back and checks every block, publishing the
 * bytes and times of each direction in probe_shared as it goes. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "probe_child_int.h"

/* Every 4 KiB block of the probe file starts with its own offset (mixed
 * with a per-measurement tag), so no two blocks are equal: nothing on the
 * way can compress or deduplicate the data, and the read-back is checked. */
#define BLOCK 4096
#define STAMP_BYTES 8

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 2685821657736338717ULL;
}

/* Put the stamp of every block that starts inside buf[0..n) (file offset
 * off) in place. */
static void stamp(unsigned char *buf, size_t n, int64_t off, uint64_t tag)
{
    size_t i = (size_t)((BLOCK - off % BLOCK) % BLOCK);

    for (; i + STAMP_BYTES <= n; i += BLOCK) {
        uint64_t v = (uint64_t)(off + (int64_t)i) ^ tag;

        memcpy(buf + i, &v, STAMP_BYTES);
    }
}

static bool stamps_ok(const unsigned char *buf, size_t n, int64_t off, uint64_t tag, int64_t *bad)
{
    size_t i = (size_t)((BLOCK - off % BLOCK) % BLOCK);

    for (; i + STAMP_BYTES <= n; i += BLOCK) {
        uint64_t v = (uint64_t)(off + (int64_t)i) ^ tag, got;

        memcpy(&got, buf + i, STAMP_BYTES);
        if (got != v) {
            *bad = off + (int64_t)i;
            return false;
        }
    }
    return true;
}

/* The rate to fit a direction's next call with: since the end of its
 * start-up once a call has ended after it (the slow start's own rates
 * would size the calls too small, each costing a write an idle round
 * trip), else since its start. Bytes/s, 0 when nothing is known. */
static double fit_rate(int64_t off, int64_t t0, int64_t warm_bytes, int64_t warm_t)
{
    int64_t now = probe_mono_ns();

    if (warm_t != 0 && off > warm_bytes && now > warm_t)
        return (double)(off - warm_bytes) / ((double)(now - warm_t) / 1e9);
    return now > t0 ? (double)off / ((double)(now - t0) / 1e9) : 0;
}

/* A direction's next call, n bytes as its own rule would make it, cut to
 * the duration (the first call at most PROBE_FIRST_CALL, the others fitted
 * to the window left at fit_rate) and to the room the direction has. */
static long long next_call(const struct probe_params *p, long long n, int64_t off, double el,
                           double rtt, int64_t t0, int64_t warm_bytes, int64_t warm_t)
{
    if (p->duration_s > 0) {
        if (off == 0 && n > PROBE_FIRST_CALL)
            n = PROBE_FIRST_CALL;
        n = probe_call_fit(n, fit_rate(off, t0, warm_bytes, warm_t),
                           probe_call_window(p, el, rtt, warm_t != 0));
    }
    return n < probe_phase_room(p, off) ? n : probe_phase_room(p, off);
}

/* After a call of a direction with a duration that took call_ns on a
 * path of rtt: add its wait (probe_call_wait) to the direction's. Without
 * a duration the rates keep everything in, as before there was one (and
 * the deadline of such a probe, made from rates, still fits its wall
 * time: measure_cut_deadline). */
static void add_wait(int64_t *wait, int64_t call_ns, double rtt, bool timed)
{
    if (timed)
        publish(wait, *wait + (int64_t)(probe_call_wait((double)call_ns / 1e9, rtt) * 1e9));
}

/* After a call of a direction with a duration: mark the end of its
 * start-up once (probe_warmed), the bytes and the waits first, the time
 * last. */
static void warm_point(int64_t *bytes, int64_t *warm_wait, int64_t *t, int64_t t0, int64_t off,
                       int64_t wait, double rtt, bool timed)
{
    int64_t now = probe_mono_ns();

    if (!timed || *t != 0 || !probe_warmed((double)(now - t0) / 1e9, rtt))
        return;
    publish(bytes, off);
    publish(warm_wait, wait);
    publish(t, now);
}

/* After a write call of `bytes` in call_s: raise the pacing cap of the
 * probe's socket when probe_pace_cap says so. The read direction keeps it:
 * the client sends only requests there. */
static void pace_writes(struct child *c, double *cap, ssize_t bytes, double call_s, double rtt)
{
    double want = probe_pace_cap(*cap, (long long)bytes, c->own.request_size, call_s, rtt);

    if (!(want > *cap))
        return;
    *cap = want;
    publish(&c->sh->write_pace, (int64_t)probe_set_pacing(c->sock, want));
}

/* Write to f (the probe file, open for writing; closed here), read it back. */
enum probe_outcome probe_transfer(struct child *c, SMBCFILE *f, const char *file_url)
{
    smbc_open_fn open_fn = c->api->getFunctionOpen(c->ctx);
    smbc_write_fn write_fn = c->api->getFunctionWrite(c->ctx);
    smbc_read_fn read_fn = c->api->getFunctionRead(c->ctx);
    smbc_close_fn close_fn = c->api->getFunctionClose(c->ctx);
    const struct probe_params *p = &c->own;
    size_t req = (size_t)p->request_size, cap = req, i;
    uint64_t seed = (uint64_t)probe_mono_ns() ^ ((uint64_t)getpid() << 32), tag;
    unsigned char *buf;
    int64_t off, written, bad, wt;
    double rtt, wrate, pace = 0;
    /* With a duration, each direction ends by the clock or its start-up
     * rule (probe_phase_over); without, after exactly p->size bytes. */
    bool timed = p->duration_s > 0;

    buf = malloc(req);
    if (buf == NULL) {
        close_fn(c->ctx, f);
        return fail(c, PROBE_ERROR, "out of memory for a %zu-byte buffer", req);
    }
    for (i = 0; i + 8 <= req; i += 8) {
        uint64_t v = xorshift(&seed);

        memcpy(buf + i, &v, 8);
    }
    for (; i < req; i++)
        buf[i] = (unsigned char)xorshift(&seed);
    tag = xorshift(&seed);

    publish(&c->sh->write_t0, probe_mono_ns());
    for (off = 0;;) {
        double el = (double)(probe_mono_ns() - c->sh->write_t0) / 1e9;
        long long n;
        int64_t t;
        ssize_t w;

        rtt = probe_conn_min_rtt(c->sock);
        if (probe_phase_over(p, off, el, rtt))
            break;
        n = next_call(p, (long long)req, off, el, rtt, c->sh->write_t0, c->sh->write_warm_bytes,
                      c->sh->write_warm_t);
        stamp(buf, (size_t)n, off, tag);
        t = probe_mono_ns();
        w = write_fn(c->ctx, f, buf, (size_t)n);
        if (w <= 0) {
            int er = w < 0 ? errno : EIO;

            close_fn(c->ctx, f);
            free(buf);
            return fail(c, probe_classify_errno(er, false), "writing at offset %lld: %s",
                        (long long)off, strerror(er));
        }
        t = probe_mono_ns() - t;
        off += w;
        publish(&c->sh->write_bytes, off);
        add_wait(&c->sh->write_wait, t, rtt, timed);
        pace_writes(c, &pace, w, (double)t / 1e9, rtt);
        warm_point(&c->sh->write_warm_bytes, &c->sh->write_warm_wait, &c->sh->write_warm_t,
                   c->sh->write_t0, off, c->sh->write_wait, rtt, timed);
    }
    publish(&c->sh->write_t1, probe_mono_ns());
    /* Read calls are sized for the path (probe_next_read_call). */
    written = off;
    wt = c->sh->write_t1 - c->sh->write_t0;
    wrate = wt > 0 ? (double)written / ((double)wt / 1e9) : 0;
    rtt = probe_conn_min_rtt(c->sock);
    if (close_fn(c->ctx, f) < 0) {
        int er = errno;

        free(buf);
        return fail(c, probe_classify_errno(er, false), "closing the written file: %s",
                    strerror(er));
    }

    f = open_fn(c->ctx, file_url, O_RDONLY, 0);
    if (f == NULL) {
        int er = errno;

        free(buf);
        return fail(c, probe_classify_errno(er, false), "opening the probe file to read: %s",
                    strerror(er));
    }
    publish(&c->sh->read_t0, probe_mono_ns());
    for (off = 0; off < written;) {
        double el = (double)(probe_mono_ns() - c->sh->read_t0) / 1e9;
        double rrate = el > 0 ? (double)off / el : 0;
        size_t n;
        int64_t t;
        ssize_t got;

        if (probe_phase_over(p, off, el, rtt))
            break;
        n = probe_next_read_call(&buf, &cap, p->request_size, rtt, rrate > wrate ? rrate : wrate);
        n = (size_t)next_call(p, (long long)n, off, el, rtt, c->sh->read_t0, c->sh->read_warm_bytes,
                              c->sh->read_warm_t);
        n = (size_t)(written - off) < n ? (size_t)(written - off) : n;
        t = probe_mono_ns();
        got = read_fn(c->ctx, f, buf, n);
        t = probe_mono_ns() - t;

        if (got <= 0) {
            int er = got < 0 ? errno : 0;

            close_fn(c->ctx, f);
            free(buf);
            if (got == 0)
                return fail(c, PROBE_ERROR, "the file read back ends at %lld of %lld bytes",
                            (long long)off, (long long)written);
            return fail(c, probe_classify_errno(er, false), "reading at offset %lld: %s",
                        (long long)off, strerror(er));
        }
        if (!stamps_ok(buf, (size_t)got, off, tag, &bad)) {
            close_fn(c->ctx, f);
            free(buf);
            return fail(c, PROBE_ERROR, "the data read back differs at offset %lld",
                        (long long)bad);
        }
        off += got;
        publish(&c->sh->read_bytes, off);
        add_wait(&c->sh->read_wait, t, rtt, timed);
        warm_point(&c->sh->read_warm_bytes, &c->sh->read_warm_wait, &c->sh->read_warm_t,
                   c->sh->read_t0, off, c->sh->read_wait, rtt, timed);
    }
    publish(&c->sh->read_t1, probe_mono_ns());
    close_fn(c->ctx, f);
    free(buf);
    return PROBE_OK;
}
