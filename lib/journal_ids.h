/* journal_ids: the MESSAGE_ID of each kind of event smbtuned logs with
 * journal_event(). One 128-bit id per kind (made with `systemd-id128 new`),
 * never reused for another meaning: `journalctl MESSAGE_ID=...` finds every
 * entry of that kind on any machine, and systemd/smbtuned.catalog explains
 * each one (`journalctl -x`). A new kind gets a new id here and an entry
 * in the catalog. */
#ifndef SMBTUNE_JOURNAL_IDS_H
#define SMBTUNE_JOURNAL_IDS_H

/* socket options changed: the winner of a search written into smb.conf
 * and applied. */
#define JOURNAL_ID_COMMIT "93824c0bab924f0eb00965246bfb06d3"

/* A trial value taken back out of smb.conf (end of a live trial, a stop,
 * or recovery after a crash). */
#define JOURNAL_ID_TAKE_BACK "ebdcd335fb1147cf82b7ffdf9c486473"

/* Hands off: the socket options line no longer holds what smbtuned wrote
 * (edited by hand) or the state file is damaged; nothing is changed until
 * `smbtuned --resume`. */
#define JOURNAL_ID_HOLD "ec5b93e10bf14673b8d0108819ff6f92"

/* A search started from the configuration in force. */
#define JOURNAL_ID_SEARCH_START "c6c98c2c92274ac387f46b898d8362ad"

/* A search finished: a winner was found (a commit follows when it is not
 * the configuration in force) or the configuration in force was kept. */
#define JOURNAL_ID_SEARCH_END "7ac5b4501c044507ac18324062b6164b"

/* The rates of the configuration in force drifted from those it was
 * chosen with: a search starts again. */
#define JOURNAL_ID_DRIFT "bd2fa9426ee443f2872e1f4331cee8a1"

#endif
