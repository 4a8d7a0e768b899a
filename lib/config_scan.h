/* config_scan: the structure of /etc/smbtuned.conf checked before
 * libconfuse reads it.
 *
 * libconfuse accepts without a word what this scan refuses: a section whose
 * closing brace is missing (the end of the file closes it), a comment or
 * string left open (the rest of the file is ignored), a stray '}', a
 * section given twice (the two are merged) and ${VAR}, which it replaces
 * from the environment of the process that parses, so that `smbtuned -t`
 * from a shell would check another value than the service reads. None of
 * that can be switched off in libconfuse, so the text is checked first, by
 * the rules of libconfuse's own lexer. Pure.
 *
 * An option given twice inside a section is not found here but by
 * config.c while libconfuse reads the line (its message needs the
 * section's option names).
 */
#ifndef SMBTUNE_CONFIG_SCAN_H
#define SMBTUNE_CONFIG_SCAN_H

#include "err.h"

/* 0 when text (NUL-terminated, the contents of the file called name) has
 * none of the defects above; else -EINVAL with "name:LINE: what was
 * expected" in e, for the first defect in the text. */
int config_scan(const char *text, const char *name, struct err *e);

/* config_scan(), and out (strlen(text) + 1 bytes) gets a copy of text
 * whose comments are blanks, their newlines kept: libconfuse 3.3 counts
 * the newline that ends a comment twice, so that its line numbers drift
 * by one for every comment line above (a message about line 126 of the
 * shipped file said 344); without comments its count is right. */
int config_scan_blank(const char *text, const char *name, char *out, struct err *e);

#endif
