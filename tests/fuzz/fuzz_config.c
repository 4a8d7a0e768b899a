/* /etc/smbtuned.conf from a buffer (config_parse_string, libconfuse and
 * its pre-scan). Every error names the file. */
#include "fuzz.h"

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstring(data, size);
    struct config c;
    struct err e = {{0}};

    if (config_parse_string(text, "fuzz.conf", &c, &e) < 0)
        FUZZ_CHECK(strncmp(e.msg, "fuzz.conf:", strlen("fuzz.conf:")) == 0);
    free(text);
    return 0;
}
