/* A credentials file's text (probe_parse_credentials). Errors carry the
 * file name first. */
#include "fuzz.h"

#include "probe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstring(data, size);
    struct probe_creds c;
    struct err e = {{0}};

    memset(&c, 0, sizeof(c));
    if (probe_parse_credentials(text, "fuzz.cred", &c, &e) == 0) {
        FUZZ_CHECK(strlen(c.username) < sizeof(c.username));
        FUZZ_CHECK(strlen(c.password) < sizeof(c.password));
        FUZZ_CHECK(strlen(c.domain) < sizeof(c.domain));
    } else {
        FUZZ_CHECK(strncmp(e.msg, "fuzz.cred", strlen("fuzz.cred")) == 0);
    }
    probe_creds_clear(&c);
    free(text);
    return 0;
}
