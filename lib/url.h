/* url: the SMB URL of a probe target, smb://host[:port]/share[/dir...].
 *
 * The one grammar of the project: the config checks a URL with it, the
 * probe connects with what it gives, the trial placement rewrites its host
 * and port. Everything here is pure (no I/O, no allocation).
 *
 * The grammar, as url_parse() reads it:
 *   - the scheme is "smb://", in any case;
 *   - no user or password (no '@' anywhere; checked first, and the
 *     message does not quote the URL): credentials come from a
 *     credentials file, never from a URL that ends up in a log;
 *   - the host is a name or an IPv4 literal, or an IPv6 literal in
 *     brackets (a zone after its '%', not empty, and short enough for
 *     Samba's name of the address: url_format_smbc()); it may not be
 *     empty, nor hold '[', ']' or a character that URLs reserve (see
 *     url_check_directory()), '%' included: libsmbclient decodes escapes;
 *   - an optional port, ":N" with N a number from 1 to 65535;
 *   - a share name, not empty, without reserved characters;
 *   - an optional directory inside the share (url_check_directory());
 *     runs of '/' count as one and a leading or trailing '/' is dropped.
 */
#ifndef SMBTUNE_URL_H
#define SMBTUNE_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

struct url {
    char host[256]; /* as written, without the brackets of an IPv6 literal */
    unsigned port;  /* 0 when the URL names none */
    char share[256];
    char dir[1024]; /* path inside the share without leading or trailing '/'; may be "" */
};

/* Parse smb://host[:port]/share[/dir...] into u. -EINVAL with the reason
 * in e (which never shows a user or password the URL carried). */
int url_parse(const char *s, struct url *u, struct err *e);

/* The same target as a URL, with dir joined to extra (either may be "",
 * extra may be NULL), e.g. smb://[::1]:4455/share/dir/extra: what
 * url_parse() reads back to the same parts. -ENAMETOOLONG when out is too
 * small. */
int url_format(const struct url *u, const char *extra, char *out, size_t outlen);

/* As url_format(), in the form libsmbclient reads: the same, except that
 * an IPv6 literal host is written as Samba takes one, its eight groups in
 * hex, e.g. smb://0-0-0-0-0-0-0-1.ipv6-literal.net:4455/share for [::1]
 * (libsmbclient refuses brackets). For libsmbclient only: it is no name a
 * resolver knows, and url_parse() does not read it back to the literal. */
int url_format_smbc(const struct url *u, const char *extra, char *out, size_t outlen);

/* A directory inside the share: relative, '/'-separated, no "." or ".."
 * segment, no character that URLs reserve ("?#@\\ \"<>" and
 * non-printable ones). "" is valid (none). */
int url_check_directory(const char *s, struct err *e);

/* Whether the host is this machine's loopback (127.0.0.0/8, ::1, an
 * IPv4-mapped 127.x, localhost in any case), as written: no name is
 * resolved. */
bool url_is_loopback(const struct url *u);

/* url_is_loopback of the text s; false for one that does not parse. */
bool url_text_is_loopback(const char *s);

#endif
