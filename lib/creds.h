/* creds: the credentials file the probe logs on with, read as `smbclient
 * -A` reads it (Samba 4.17's cli_credentials_parse_file()): lines
 * `username = [DOMAIN\]NAME[%PASSWORD]` (or NAME@REALM), `password =
 * SECRET`, `domain = NAME`, `realm = REALM` (accepted, unused: the probe
 * does no Kerberos); keys in any case, spaces anywhere in them ignored;
 * the value is the rest of the line after the '=' and the spaces and tabs
 * that follow it, trailing blanks kept; the last line of a key wins; blank
 * lines and `#` or `;` comments. Stricter than smbclient, which skips them
 * silently: a line without '=', an unknown key, a CR inside a line, a
 * byte order mark, and a username that is missing, empty or `%`, are
 * refused.
 *
 * The file holds a password, so: it must be a regular file owned by root
 * with mode 0600 or stricter; errors name the file and the line number,
 * never anything the line holds (a malformed line may be mostly password);
 * only a process that cannot be dumped or traced reads it (the probe's
 * measuring child, and creds_check()'s short-lived child). */
#ifndef SMBTUNE_CREDS_H
#define SMBTUNE_CREDS_H

#include <sys/types.h>

#include "err.h"

struct creds {
    char username[256];
    char password[256];
    char domain[256];
};

/* Parse a credentials file's text; path is for the messages only
 * ("PATH:LINE: ..."). On an error c holds nothing. Pure. */
int creds_parse(const char *text, const char *path, struct creds *c, struct err *e);

/* Open, check and parse the file: regular, owned by owner_uid (0 in
 * production; a parameter so that tests run as any user), mode 0600 or
 * stricter, at most 8 KiB, no NUL byte. It is opened non-blocking, so
 * that a FIFO is refused rather than waited on. */
int creds_load(const char *path, uid_t owner_uid, struct creds *c, struct err *e);

/* How long creds_check() waits for its child: reading a small file takes
 * milliseconds; a stalled network mount would take for ever. */
#define CREDS_CHECK_DEADLINE_S 10.0

/* creds_load() in a short-lived undumpable child that keeps nothing: for
 * the parent (config load, -t, the daemon), which checks the file but must
 * never hold the password. Same result and reason as creds_load(), or
 * -ETIMEDOUT when the child has not answered within
 * CREDS_CHECK_DEADLINE_S (it is killed). */
int creds_check(const char *path, uid_t owner_uid, struct err *e);

/* Overwrite the secret in memory. */
void creds_clear(struct creds *c);

#endif
