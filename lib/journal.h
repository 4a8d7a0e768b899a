/* journal: what smbtuned does, for `journalctl -u smbtuned` and for a
 * terminal.
 *
 * Where the lines go is decided from stderr (journal_init()):
 * - stderr is the journal (JOURNAL_STREAM names stderr's device and inode,
 *   as systemd sets it for a service) and journald's socket is there:
 *   native entries through
 *   sd_journal_sendv(), with PRIORITY=, SYSLOG_IDENTIFIER=smbtuned and, for
 *   an event, MESSAGE_ID= and its fields;
 * - stderr is a terminal: plain lines, "warning: " or "error: " in front
 *   of those;
 * - anything else (a pipe, a file): "<N>message" lines, N the priority,
 *   the prefix journald understands on a stream (sd-daemon(3)); the tests
 *   read this form.
 * LOG_DEBUG lines are dropped unless journal_set_debug(true) (-d).
 *
 * Each event is logged as a pair where it matters: why ("write rate +12%
 * at SO_RCVBUF=524288, p=0.004"), then what ("socket options: A -> B"). */
#ifndef SMBTUNE_JOURNAL_H
#define SMBTUNE_JOURNAL_H

#include <stdbool.h>
#include <syslog.h>

#include "journal_ids.h"

enum journal_output {
    JOURNAL_PREFIX,   /* "<N>message" on stderr */
    JOURNAL_TERMINAL, /* plain lines on stderr */
    JOURNAL_NATIVE,   /* sd_journal_sendv() */
};

/* Decide the output again from stderr and JOURNAL_STREAM (main() calls it
 * first; a log call before it decides on its own). Returns the choice. */
enum journal_output journal_init(void);

/* A forked child that closed the descriptors it inherited (child_setup's
 * close_range): from now on its lines go to stderr ("<N>message" where
 * they went to the journal's socket). libsystemd opens its journal socket
 * once and keeps its number for the life of the process, subprocesses
 * included; once that is closed the number may name another descriptor,
 * and an entry sent through it would land there: on a TCP connection its
 * peer reads the entry as stream bytes (tests/unit/test_journal.c). The
 * stderr a child keeps is the daemon's, under systemd the journal's
 * stream, which keeps the priority; only an event's fields are lost. */
void journal_forked(void);

/* LOG_DEBUG lines are logged only after journal_set_debug(true). */
void journal_set_debug(bool on);

/* One line at priority prio (LOG_ERR ... LOG_DEBUG). A newline in the text
 * becomes a space: one event, one line. Any length. */
void journal_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One event: journal_log()'s line, and in the journal also
 * MESSAGE_ID=message_id (one of journal_ids.h), SMBTUNED_EVENT=<its name>
 * and every "NAME=value" string of fields (NULL-terminated; fields may be
 * NULL). NAME is upper case letters, digits and '_', not starting with
 * '_' (journald's rule); a string that breaks it is left out. Outside the
 * journal only the message is printed. The fields smbtuned uses:
 * SMBTUNED_RCVBUF, SMBTUNED_SNDBUF (bytes, or "auto"), SMBTUNED_WRITE_MBPS,
 * SMBTUNED_READ_MBPS, SMBTUNED_SAMPLES, SMBTUNED_SMB_CONF. */
void journal_event(const char *message_id, int prio, const char *const fields[], const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));

/* For tests only (production never calls it): every entry that is logged
 * (LOG_DEBUG ones only under journal_set_debug) is also handed to tap, with
 * its MESSAGE_ID (NULL for a journal_log line), priority, the fields as
 * given (NULL-terminated, or NULL) and the line, whatever the output. It
 * lets a unit test check an event's id and fields without a journald.
 * NULL stops it. Kept beside the output choice, the library's one piece of
 * mutable state, because it is the same kind: where lines go. */
typedef void (*journal_tap)(void *ctx, const char *message_id, int prio, const char *const fields[],
                            const char *line);
void journal_set_tap(journal_tap tap, void *ctx);

/* The SMBTUNED_EVENT name of a MESSAGE_ID of journal_ids.h, NULL for any
 * other string. */
const char *journal_event_name(const char *message_id);

#endif
