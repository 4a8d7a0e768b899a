/* smbc_api: libsmbclient through dlopen (see smbc_api.h). */
#include "smbc_api.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>

/* Each entry: the table's slot and the library's name for it. */
#define SMBC_ENTRY(field, symbol)                                                                  \
    {                                                                                              \
        offsetof(struct smbc_api, field), #symbol                                                  \
    }

static const struct {
    size_t offset;
    const char *symbol;
} entries[] = {
    SMBC_ENTRY(new_context, smbc_new_context),
    SMBC_ENTRY(init_context, smbc_init_context),
    SMBC_ENTRY(free_context, smbc_free_context),
    SMBC_ENTRY(setDebug, smbc_setDebug),
    SMBC_ENTRY(setOptionDebugToStderr, smbc_setOptionDebugToStderr),
    SMBC_ENTRY(setOptionUseKerberos, smbc_setOptionUseKerberos),
    SMBC_ENTRY(setOptionFallbackAfterKerberos, smbc_setOptionFallbackAfterKerberos),
    SMBC_ENTRY(setOptionUseCCache, smbc_setOptionUseCCache),
    SMBC_ENTRY(setOptionNoAutoAnonymousLogin, smbc_setOptionNoAutoAnonymousLogin),
    SMBC_ENTRY(setOptionUserData, smbc_setOptionUserData),
    SMBC_ENTRY(getOptionUserData, smbc_getOptionUserData),
    SMBC_ENTRY(setFunctionAuthDataWithContext, smbc_setFunctionAuthDataWithContext),
    SMBC_ENTRY(setTimeout, smbc_setTimeout),
    SMBC_ENTRY(getFunctionOpen, smbc_getFunctionOpen),
    SMBC_ENTRY(getFunctionRead, smbc_getFunctionRead),
    SMBC_ENTRY(getFunctionWrite, smbc_getFunctionWrite),
    SMBC_ENTRY(getFunctionClose, smbc_getFunctionClose),
    SMBC_ENTRY(getFunctionStat, smbc_getFunctionStat),
    SMBC_ENTRY(getFunctionUnlink, smbc_getFunctionUnlink),
    SMBC_ENTRY(getFunctionOpendir, smbc_getFunctionOpendir),
    SMBC_ENTRY(getFunctionReaddir, smbc_getFunctionReaddir),
    SMBC_ENTRY(getFunctionClosedir, smbc_getFunctionClosedir),
    SMBC_ENTRY(getFunctionFstatVFS, smbc_getFunctionFstatVFS),
};

/* Every slot of the table has its entry above (a slot left out would be
 * NULL and crash at its first call). */
_Static_assert(sizeof(entries) / sizeof(entries[0]) * sizeof(void (*)(void)) ==
                   sizeof(struct smbc_api),
               "struct smbc_api and its entries differ");

int smbc_api_load(struct smbc_api *a, struct err *e)
{
    /* RTLD_NOW: a library that lacks a symbol it needs fails here, with
     * the loader's words, not in the middle of a measurement. */
    void *h = dlopen(SMBC_API_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    const char *why;

    if (h == NULL) {
        why = dlerror();
        return err_set(e, -ENOENT, "cannot load %s: %s", SMBC_API_LIBRARY,
                       why ? why : "unknown error");
    }
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
        void *f;

        dlerror();
        f = dlsym(h, entries[i].symbol);
        if (f == NULL) {
            why = dlerror();
            return err_set(e, -ENOENT, "%s has no %s: %s", SMBC_API_LIBRARY, entries[i].symbol,
                           why ? why : "NULL");
        }
        /* POSIX: a function's address from dlsym goes through a void *. */
        *(void **)((char *)a + entries[i].offset) = f;
    }
    return 0;
}
