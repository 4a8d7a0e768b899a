/* config_int: what config.c, config_probe.c and config_tune.c share;
 * private to config.
 *
 * Each section of the file is a table of options, each option one parser
 * shared by the validators (which run while libconfuse reads the line, so
 * the message carries that line), by the extraction afterwards and by
 * config_set() (the command line). */
#ifndef SMBTUNE_CONFIG_INT_H
#define SMBTUNE_CONFIG_INT_H

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "config.h"

/* Parse s into c. 0, or -errno with a message without file or line. */
typedef int (*config_value_parser)(const char *s, struct config *c, struct err *e);

struct config_field {
    const char *name;
    config_value_parser parse;
};

struct config_section {
    const char *name;
    const struct config_field *fields;
    size_t n;
};

/* The most options a section may have (libconfuse's tables are built on
 * the stack from this). */
#define CONFIG_MAX_FIELDS 24

/* Define the section `var`, named `name`, from its table of options
 * `fields`, held to CONFIG_MAX_FIELDS: each section's file ends with one. */
#define CONFIG_SECTION(var, name, fields)                                                          \
    _Static_assert(sizeof(fields) / sizeof((fields)[0]) <= CONFIG_MAX_FIELDS,                      \
                   "raise CONFIG_MAX_FIELDS");                                                     \
    const struct config_section var = {name, fields, sizeof(fields) / sizeof((fields)[0])}

/* probe { ... }, the probe's options (config_probe.c). */
extern const struct config_section config_probe_section;

/* tune { ... }, the tuning loop's options (config_tune.c). */
extern const struct config_section config_tune_section;

/* Copy s into dst of len bytes; -ENAMETOOLONG, naming what, when it does
 * not fit. Static so that each section's file keeps its own parsers'
 * plain names. */
static inline int copy_str(char *dst, size_t len, const char *s, const char *what, struct err *e)
{
    if (strlen(s) >= len)
        return err_set(e, -ENAMETOOLONG, "%s is too long (at most %zu characters)", what, len - 1);
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

#endif
