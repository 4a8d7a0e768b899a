/* smbstatus: the count of open files in `smbstatus -L --json`'s text
 * (lib/smbstatus.c); the real smbstatus is run against a real smbd in
 * tests/integration/test_restart_open_files.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <string.h>
#include <cmocka.h>

#include "smbstatus.h"

/* What Samba 4.17's smbstatus -L --json printed, with none and with one
 * file open (its opens cut short). */
#define HEAD                                                                                       \
    "{\"timestamp\": \"2026-12-07T19:00:09.174480+0000\", \"version\": \"4.17.12\", "              \
    "\"smb_conf\": \"/etc/samba/smb.conf\", "

static void test_counts_files(void **state)
{
    struct err e = {{0}};
    long n = -1;

    (void)state;
    assert_int_equal(smbstatus_parse_open(HEAD "\"open_files\": {}}", &n, &e), 0);
    assert_int_equal(n, 0);
    assert_int_equal(smbstatus_parse_open(
                         HEAD "\"open_files\": {\"/srv/a/held.bin\": {\"service_path\": "
                              "\"/srv/a\", \"filename\": \"held.bin\", \"opens\": {\"30849/5\": "
                              "{\"uid\": 65534}}}, \"/srv/a/b\": {\"opens\": {}}}}",
                         &n, &e),
                     0);
    assert_int_equal(n, 2);
    /* smbd's locking database never made: no key, none open */
    n = -1;
    assert_int_equal(smbstatus_parse_open(HEAD "\"x\": 1}", &n, &e), 0);
    assert_int_equal(n, 0);
}

static void test_refuses_what_is_not_a_list(void **state)
{
    static const char *bad[] = {
        "",
        "Locked files:\nPid User(ID) DenyMode\n",
        HEAD "\"open_files\": []}",
        HEAD "\"open_files\": 3}",
        HEAD "\"open_files\": {}",
        "[]",
    };
    struct err e = {{0}};
    long n = 7;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        e.msg[0] = '\0';
        assert_int_equal(smbstatus_parse_open(bad[i], &n, &e), -EINVAL);
        assert_non_null(strstr(e.msg, "smbstatus --json: "));
        assert_int_equal(n, 7);
    }
    /* what it says names what it expected */
    assert_int_equal(smbstatus_parse_open(HEAD "\"open_files\": []}", &n, &e), -EINVAL);
    assert_string_equal(e.msg, "smbstatus --json: expected \"open_files\" to be an object, "
                               "found another type");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_files),
        cmocka_unit_test(test_refuses_what_is_not_a_list),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
