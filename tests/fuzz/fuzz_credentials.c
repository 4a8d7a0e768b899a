/* A credentials file's text (lib/creds.c: creds_parse). Errors carry the
 * file name first; an accepted file has a user name, with no '%' (the
 * username line's first '%' starts the password). */
#include "fuzz.h"

#include "creds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstring(data, size);
    struct creds c;
    struct err e = {{0}};

    memset(&c, 0, sizeof(c));
    if (creds_parse(text, "fuzz.cred", &c, &e) == 0) {
        FUZZ_CHECK(strlen(c.username) < sizeof(c.username));
        FUZZ_CHECK(c.username[0] != '\0' && strchr(c.username, '%') == NULL);
        FUZZ_CHECK(strlen(c.password) < sizeof(c.password));
        FUZZ_CHECK(strlen(c.domain) < sizeof(c.domain));
    } else {
        FUZZ_CHECK(strncmp(e.msg, "fuzz.cred", strlen("fuzz.cred")) == 0);
    }
    creds_clear(&c);
    free(text);
    return 0;
}
