/* logcap: see logcap.h. */
#include "logcap.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "journal.h"

static FILE *cap;
static int saved = -1;
static char *events;
static size_t events_len;

static void append(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b);

    events = realloc(events, events_len + n + 1);
    assert_non_null(events);
    sprintf(events + events_len, "%s%s", a, b);
    events_len += n;
}

static void tap(void *ctx, const char *message_id, int prio, const char *const fields[],
                const char *line)
{
    char p[16];

    (void)ctx;
    (void)line;
    if (message_id == NULL)
        return;
    snprintf(p, sizeof(p), " %d", prio);
    append(message_id, p);
    for (size_t i = 0; fields != NULL && fields[i] != NULL; i++)
        append(" ", fields[i]);
    append("\n", "");
}

const char *logcap_events(void)
{
    return events ? events : "";
}

void logcap_begin(void)
{
    assert_int_equal(saved, -1); /* one capture at a time */
    fflush(stderr);
    cap = tmpfile();
    assert_non_null(cap);
    saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(cap), STDERR_FILENO) >= 0);
    free(events);
    events = NULL;
    events_len = 0;
    journal_set_tap(tap, NULL);
}

char *logcap_end(void)
{
    long len;
    char *text;

    fflush(stderr);
    journal_set_tap(NULL, NULL);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    saved = -1;
    assert_int_equal(fseek(cap, 0, SEEK_END), 0);
    len = ftell(cap);
    assert_true(len >= 0);
    rewind(cap);
    text = malloc((size_t)len + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)len, cap), (size_t)len);
    text[len] = '\0';
    fclose(cap);
    cap = NULL;
    return text;
}
