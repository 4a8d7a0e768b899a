/* logcap: what the journal says during a test. journal_log writes to
 * stderr outside the journal; logcap_begin points stderr at a temporary
 * file, logcap_end points it back and returns what was written there.
 * Tests match substrings: the line's prefix depends on what stderr was
 * when journal.c first decided. For the daemon's room tests. */
#ifndef SMBTUNED_LOGCAP_H
#define SMBTUNED_LOGCAP_H

void logcap_begin(void);

/* malloc'ed text (never NULL: the test fails first). */
char *logcap_end(void);

/* The events (journal_event, whatever the output) between the last
 * logcap_begin and logcap_end, through journal_set_tap: a line each,
 * "MESSAGE_ID PRIORITY NAME=value NAME=value ...", so that a test finds
 * an event's id and fields in the order given. Owned by logcap, valid
 * until the next logcap_begin; "" when there was none. */
const char *logcap_events(void);

#endif
