/* journal: what smbtuned does, for `journalctl -u smbtuned`.
 *
 * Under systemd stderr is a journal stream: a line starting with <N> gets
 * priority N (sd-daemon(3)). Each event is logged as a pair where it
 * matters: why ("write rate +12% at SO_RCVBUF=524288, p=0.004"), then what
 * ("socket options: A -> B"). */
#ifndef SMBTUNE_JOURNAL_H
#define SMBTUNE_JOURNAL_H

#include <syslog.h>

void journal_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
