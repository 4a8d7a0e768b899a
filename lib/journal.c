/* journal: native journal entries, plain lines on a terminal, or
 * priority-prefixed lines on a pipe or file (journal.h). */
#include "journal.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define SD_JOURNAL_SUPPRESS_LOCATION /* CODE_FILE= etc. would name journal.c */
#include <systemd/sd-journal.h>

#include "parse.h"

#define MAX_FIELDS 32

/* The one piece of mutable state of the library: where stderr goes is a
 * property of the process, as stderr itself is. */
static struct {
    bool decided;
    bool debug;
    enum journal_output out;
    journal_tap tap; /* tests only: journal_set_tap() */
    void *tap_ctx;
} sink;

static const struct {
    const char *id, *name;
} events[] = {
    {JOURNAL_ID_COMMIT, "commit"},
    {JOURNAL_ID_TAKE_BACK, "take-back"},
    {JOURNAL_ID_HOLD, "hold"},
    {JOURNAL_ID_SEARCH_START, "search-start"},
    {JOURNAL_ID_SEARCH_END, "search-end"},
    {JOURNAL_ID_DRIFT, "drift"},
    {JOURNAL_ID_START, "start"},
    {JOURNAL_ID_CYCLE, "cycle"},
    {JOURNAL_ID_TRIAL, "trial"},
    {JOURNAL_ID_MOVE, "move"},
    {JOURNAL_ID_VERIFY, "verification"},
    {JOURNAL_ID_RESUME, "resume"},
    {JOURNAL_ID_RESTART, "restart-advice"},
    {JOURNAL_ID_KERNEL_CAP, "kernel-cap"},
    {JOURNAL_ID_UPGRADE, "upgrade"},
    {JOURNAL_ID_CLIENTS, "clients"},
    {JOURNAL_ID_STEER, "steer"},
    {JOURNAL_ID_ERROR, "error"},
};

const char *journal_event_name(const char *message_id)
{
    for (size_t i = 0; message_id != NULL && i < sizeof(events) / sizeof(events[0]); i++)
        if (strcmp(events[i].id, message_id) == 0)
            return events[i].name;
    return NULL;
}

/* JOURNAL_STREAM is "DEVICE:INODE" of the stream systemd connected to our
 * stdout and stderr (systemd.exec(5)). It is inherited by whatever we
 * start, so it counts only while stderr is that very stream: a shell
 * started from a service, or stderr redirected to a file, must get lines.
 * An inode beyond LLONG_MAX is no socket's (sockfs numbers are small) and
 * counts as not the journal. */
static bool stderr_is_journal(void)
{
    const char *env = getenv("JOURNAL_STREAM");
    const char *colon;
    char dev[32];
    long long d, i;
    struct stat st;

    if (env == NULL || (colon = strchr(env, ':')) == NULL || (size_t)(colon - env) >= sizeof(dev))
        return false;
    memcpy(dev, env, (size_t)(colon - env));
    dev[colon - env] = '\0';
    if (parse_long(dev, 0, LLONG_MAX, &d) < 0 || parse_long(colon + 1, 0, LLONG_MAX, &i) < 0)
        return false;
    if (fstat(STDERR_FILENO, &st) < 0)
        return false;
    return st.st_dev == (dev_t)d && st.st_ino == (ino_t)i;
}

/* sd_journal_sendv() drops an entry without a word when journald's socket
 * is absent (ENOENT): a process started with the service's JOURNAL_STREAM
 * where no journald listens (a container, journald's socket gone) writes
 * to the stream instead, which journald, if any, still reads. */
#define JOURNAL_SOCKET "/run/systemd/journal/socket"

enum journal_output journal_init(void)
{
    if (stderr_is_journal() && access(JOURNAL_SOCKET, F_OK) == 0)
        sink.out = JOURNAL_NATIVE;
    else if (isatty(STDERR_FILENO))
        sink.out = JOURNAL_TERMINAL;
    else
        sink.out = JOURNAL_PREFIX;
    sink.decided = true;
    return sink.out;
}

void journal_forked(void)
{
    if (!sink.decided)
        journal_init();
    if (sink.out == JOURNAL_NATIVE)
        sink.out = JOURNAL_PREFIX;
}

void journal_set_debug(bool on)
{
    sink.debug = on;
}

void journal_set_tap(journal_tap tap, void *ctx)
{
    sink.tap = tap;
    sink.tap_ctx = ctx;
}

/* A line of any length: smb.conf values and paths have no bound, and a
 * line cut at a fixed size loses what comes last (the file:line, the
 * reason). Out of memory, the line goes into fallback, cut with a visible
 * marker. Returns the line; *heap is what to free. */
__attribute__((format(printf, 4, 0))) static char *
format_line(char **heap, char *fallback, size_t len, const char *fmt, va_list ap)
{
    va_list copy;
    int n;

    va_copy(copy, ap);
    n = vasprintf(heap, fmt, copy);
    va_end(copy);
    if (n < 0) {
        *heap = NULL;
        n = vsnprintf(fallback, len, fmt, ap);
        if (n >= (int)len)
            memcpy(fallback + len - 4, "...", 4);
    }
    char *line = *heap ? *heap : fallback;

    /* One event, one line: on a stream a newline inside would start an
     * unprefixed entry at the default priority. */
    for (char *p = line; (p = strchr(p, '\n')) != NULL;)
        *p = ' ';
    return line;
}

static void print_line(enum journal_output out, int prio, const char *line)
{
    const char *word = "";

    if (out == JOURNAL_PREFIX) {
        fprintf(stderr, "<%d>%s\n", prio, line);
        return;
    }
    /* A person reads a terminal: the level word only where it matters. */
    if (prio <= LOG_ERR)
        word = "error: ";
    else if (prio == LOG_WARNING)
        word = "warning: ";
    else if (prio == LOG_DEBUG)
        word = "debug: ";
    fprintf(stderr, "%s%s\n", word, line);
}

/* journald's rule for a field name (journal-file.c, journal_field_valid):
 * upper case letters, digits and '_', not starting with '_' or a digit,
 * at most 64 characters. An entry with a bad name is dropped whole by
 * journald, so a bad field is left out here instead. */
static bool field_valid(const char *f)
{
    const char *eq = strchr(f, '=');
    size_t n = eq ? (size_t)(eq - f) : 0;

    if (n == 0 || n > 64 || f[0] == '_' || (f[0] >= '0' && f[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((f[i] >= 'A' && f[i] <= 'Z') || (f[i] >= '0' && f[i] <= '9') || f[i] == '_'))
            return false;
    return true;
}

static void send_native(int prio, const char *line, const char *message_id,
                        const char *const fields[])
{
    struct iovec iov[MAX_FIELDS + 5];
    char prio_field[16], *msg = NULL, *id = NULL, *event = NULL;
    const char *name = journal_event_name(message_id);
    size_t n = 0;

    snprintf(prio_field, sizeof(prio_field), "PRIORITY=%d", prio);
    if (asprintf(&msg, "MESSAGE=%s", line) < 0) {
        msg = NULL;
        goto fallback;
    }
    iov[n++] = (struct iovec){msg, strlen(msg)};
    iov[n++] = (struct iovec){prio_field, strlen(prio_field)};
    iov[n++] = (struct iovec){(char *)"SYSLOG_IDENTIFIER=smbtuned", 26};
    if (message_id != NULL) {
        if (asprintf(&id, "MESSAGE_ID=%s", message_id) < 0)
            id = NULL;
        else
            iov[n++] = (struct iovec){id, strlen(id)};
    }
    if (name != NULL) {
        if (asprintf(&event, "SMBTUNED_EVENT=%s", name) < 0)
            event = NULL;
        else
            iov[n++] = (struct iovec){event, strlen(event)};
    }
    for (size_t i = 0; fields != NULL && fields[i] != NULL && i < MAX_FIELDS; i++)
        if (field_valid(fields[i]))
            iov[n++] = (struct iovec){(char *)fields[i], strlen(fields[i])};
    if (sd_journal_sendv(iov, (int)n) >= 0)
        goto out;
fallback:
    /* The entry was refused (out of memory, a full socket buffer that
     * libsystemd could not work around): stderr is still the journal's
     * stream, and the stream keeps the priority. */
    print_line(JOURNAL_PREFIX, prio, line);
out:
    free(msg);
    free(id);
    free(event);
}

__attribute__((format(printf, 4, 0))) static void
emit(const char *message_id, int prio, const char *const fields[], const char *fmt, va_list ap)
{
    char fallback[2048], *heap = NULL;
    const char *line;

    prio &= 7;
    if (prio == LOG_DEBUG && !sink.debug)
        return;
    if (!sink.decided)
        journal_init();
    line = format_line(&heap, fallback, sizeof(fallback), fmt, ap);
    if (sink.tap != NULL)
        sink.tap(sink.tap_ctx, message_id, prio, fields, line);
    if (sink.out == JOURNAL_NATIVE)
        send_native(prio, line, message_id, fields);
    else
        print_line(sink.out, prio, line);
    free(heap);
}

void journal_log(int prio, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    emit(NULL, prio, NULL, fmt, ap);
    va_end(ap);
}

void journal_event(const char *message_id, int prio, const char *const fields[], const char *fmt,
                   ...)
{
    va_list ap;

    va_start(ap, fmt);
    emit(message_id, prio, fields, fmt, ap);
    va_end(ap);
}
