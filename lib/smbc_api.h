/* smbc_api: the libsmbclient calls of the probe child, loaded with
 * dlopen() in that child only.
 *
 * Linked into smbtuned, libsmbclient and the forty-odd Samba libraries it
 * pulls in stay mapped in the daemon for its whole life: about 15 MB of
 * its 18 MB resident set after 50 cycles (bench/daemon-footprint), for a
 * library that only the short-lived probe child calls. Loaded after the
 * fork, they live and die with that child. The prototypes still come
 * from libsmbclient.h, so a call through the table is checked by the
 * compiler as a direct call would be.
 */
#ifndef SMBTUNE_SMBC_API_H
#define SMBTUNE_SMBC_API_H

#include <libsmbclient.h>

#include "err.h"

/* The library's name as Debian ships it (libsmbclient's SONAME). */
#define SMBC_API_LIBRARY "libsmbclient.so.0"

struct smbc_api {
    __typeof__(&smbc_new_context) new_context;
    __typeof__(&smbc_init_context) init_context;
    __typeof__(&smbc_free_context) free_context;
    __typeof__(&smbc_setDebug) setDebug;
    __typeof__(&smbc_setOptionDebugToStderr) setOptionDebugToStderr;
    __typeof__(&smbc_setOptionUseKerberos) setOptionUseKerberos;
    __typeof__(&smbc_setOptionFallbackAfterKerberos) setOptionFallbackAfterKerberos;
    __typeof__(&smbc_setOptionUseCCache) setOptionUseCCache;
    __typeof__(&smbc_setOptionNoAutoAnonymousLogin) setOptionNoAutoAnonymousLogin;
    __typeof__(&smbc_setOptionUserData) setOptionUserData;
    __typeof__(&smbc_getOptionUserData) getOptionUserData;
    __typeof__(&smbc_setFunctionAuthDataWithContext) setFunctionAuthDataWithContext;
    __typeof__(&smbc_setTimeout) setTimeout;
    __typeof__(&smbc_getFunctionOpen) getFunctionOpen;
    __typeof__(&smbc_getFunctionRead) getFunctionRead;
    __typeof__(&smbc_getFunctionWrite) getFunctionWrite;
    __typeof__(&smbc_getFunctionClose) getFunctionClose;
    __typeof__(&smbc_getFunctionStat) getFunctionStat;
    __typeof__(&smbc_getFunctionUnlink) getFunctionUnlink;
    __typeof__(&smbc_getFunctionOpendir) getFunctionOpendir;
    __typeof__(&smbc_getFunctionReaddir) getFunctionReaddir;
    __typeof__(&smbc_getFunctionClosedir) getFunctionClosedir;
    __typeof__(&smbc_getFunctionFstatVFS) getFunctionFstatVFS;
};

/* Load the library and fill every entry of a; -ENOENT with the loader's
 * words in e when the library or one of its calls is missing. The library
 * stays loaded until the process exits. */
int smbc_api_load(struct smbc_api *a, struct err *e);

#endif
