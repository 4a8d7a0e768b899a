/* jsonw: JSON that smbtuned writes, always valid UTF-8. Output built as an
 * object goes through jansson (cmd_edit's --show --json); jansson refuses
 * a string that is not UTF-8, so outside text is sanitized first. The
 * JSON built as jansson objects takes outside text through jsonw_text. */
#ifndef SMBTUNE_JSONW_H
#define SMBTUNE_JSONW_H

#include <jansson.h>
#include <stdio.h>

/* Write s as a JSON string literal, always valid UTF-8: bytes that are
 * not well-formed UTF-8 are written as U+FFFD. */
void jsonw_string(FILE *f, const char *s);

/* A malloc'ed copy of s in which every byte that is not part of a
 * well-formed UTF-8 sequence is U+FFFD: what jansson accepts. NULL when
 * out of memory. */
char *jsonw_sanitize(const char *s);

/* A string from outside (a path, a value, a note) as a jansson string:
 * sanitized first, since jansson takes only UTF-8; json_null() for NULL.
 * NULL when out of memory. */
json_t *jsonw_text(const char *s);

/* o as one compact line on f, keys in their order, reals with 12 digits;
 * o is released. 0, or -ENOMEM when o is NULL or cannot be dumped (a
 * caller that built o with _new setters passes NULL when one failed). */
int jsonw_print(FILE *f, json_t *o);

#endif
