/*
 * redismodule_api.h - the part of the Redis Modules API that bloomkit.so
 * uses, declared from Redis's public module documentation (the "Modules
 * API reference" and "Modules native types" pages), not copied from
 * redismodule.h.
 *
 * How a module reaches Redis: Redis dlopen()s the module and calls its
 * RedisModule_OnLoad(ctx, argv, argc). The first word of that context is a
 * pointer to Redis's lookup function, RedisModule_GetApi(name, &fnptr):
 * given "RedisModule_OpenKey" it stores the address of Redis's
 * implementation. bkm_init() (our RedisModule_Init) fills one function
 * pointer per API we call, then registers the module's name and version.
 *
 * Every declaration here is static: the header is meant for one
 * translation unit per module (module.c; the test module of
 * tests/module/). Values of the constants are those of the public API
 * and never change across Redis versions (they are part of the ABI).
 */
#ifndef BKM_REDISMODULE_API_H
#define BKM_REDISMODULE_API_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* uint64_t */

/*==========================================================================
 * Opaque handles (Redis owns them; we only pass the pointers back)
 *==========================================================================*/

typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleString RedisModuleString;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleType RedisModuleType;
typedef struct RedisModuleIO RedisModuleIO;
typedef struct RedisModuleDigest RedisModuleDigest;
typedef struct RedisModuleServerInfoData RedisModuleServerInfoData;

/*==========================================================================
 * Constants
 *==========================================================================*/

#define REDISMODULE_OK 0
#define REDISMODULE_ERR 1
#define REDISMODULE_APIVER_1 1

/* RedisModule_OpenKey modes */
#define REDISMODULE_READ (1 << 0)
#define REDISMODULE_WRITE (1 << 1)

/* RedisModule_KeyType results */
#define REDISMODULE_KEYTYPE_EMPTY 0
#define REDISMODULE_KEYTYPE_MODULE 6

/* RedisModule_GetContextFlags: the calling client speaks RESP3 */
#define REDISMODULE_CTX_FLAGS_RESP3 (1 << 22)

/* RedisModule_SetModuleOptions: rdb_load checks RedisModule_IsIOError
 * instead of Redis aborting on a short read */
#define REDISMODULE_OPTIONS_HANDLE_IO_ERRORS (1 << 0)

/* RedisModuleTypeMethods.version: 1 = the seven fields below only */
#define BKM_TYPE_METHOD_VERSION 1

/*==========================================================================
 * Data type methods (version 1 of the structure)
 *==========================================================================*/

typedef struct RedisModuleTypeMethods {
    uint64_t version;
    void *(*rdb_load)(RedisModuleIO *rdb, int encver);
    void (*rdb_save)(RedisModuleIO *rdb, void *value);
    void (*aof_rewrite)(RedisModuleIO *aof, RedisModuleString *key, void *value);
    size_t (*mem_usage)(const void *value);
    void (*digest)(RedisModuleDigest *md, void *value);
    void (*free)(void *value);
} RedisModuleTypeMethods;

typedef int (*RedisModuleCmdFunc)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* Module configurations (Redis 7.0): CONFIG GET/SET names of the module's
 * own, "<module>.<name>" unless registered UNPREFIXED (Redis 8.0). */
#define REDISMODULE_CONFIG_DEFAULT 0
#define REDISMODULE_CONFIG_UNPREFIXED (1u << 9) /* Redis 8.0 and later only */
typedef RedisModuleString *(*RedisModuleConfigGetStringFunc)(const char *name, void *privdata);
typedef int (*RedisModuleConfigSetStringFunc)(const char *name, RedisModuleString *val,
                                              void *privdata, RedisModuleString **err);
typedef int (*RedisModuleConfigApplyFunc)(RedisModuleCtx *ctx, void *privdata,
                                          RedisModuleString **err);

/* Keyspace notification classes (RedisModule_NotifyKeyspaceEvent) */
#define REDISMODULE_NOTIFY_GENERIC (1 << 2) /* g */

/*==========================================================================
 * The function pointers: X(return type, name, parameters)
 *==========================================================================*/

#define BKM_API_FUNCS(X)                                                               \
    X(void *, Alloc, (size_t bytes))                                                   \
    X(void *, Calloc, (size_t nmemb, size_t size))                                     \
    X(void *, Realloc, (void *ptr, size_t bytes))                                      \
    X(void, Free, (void *ptr))                                                         \
    X(int, CreateCommand, (RedisModuleCtx *ctx, const char *name,                      \
                           RedisModuleCmdFunc cmdfunc, const char *strflags,           \
                           int firstkey, int lastkey, int keystep))                    \
    X(void, SetModuleAttribs, (RedisModuleCtx *ctx, const char *name, int ver,         \
                               int apiver))                                            \
    X(const char *, StringPtrLen, (const RedisModuleString *str, size_t *len))        \
    X(RedisModuleString *, CreateString, (RedisModuleCtx *ctx, const char *ptr,        \
                                          size_t len))                                 \
    X(void, FreeString, (RedisModuleCtx *ctx, RedisModuleString *str))                 \
    X(void *, OpenKey, (RedisModuleCtx *ctx, RedisModuleString *keyname, int mode))    \
    X(void, CloseKey, (RedisModuleKey *kp))                                            \
    X(int, KeyType, (RedisModuleKey *kp))                                              \
    X(int, DeleteKey, (RedisModuleKey *key))                                           \
    X(RedisModuleType *, ModuleTypeGetType, (RedisModuleKey *key))                     \
    X(void *, ModuleTypeGetValue, (RedisModuleKey *key))                               \
    X(int, ModuleTypeSetValue, (RedisModuleKey *key, RedisModuleType *mt, void *value)) \
    X(RedisModuleType *, CreateDataType, (RedisModuleCtx *ctx, const char *name,       \
                                          int encver, void *typemethods))              \
    X(int, ReplyWithSimpleString, (RedisModuleCtx *ctx, const char *msg))              \
    X(int, ReplyWithError, (RedisModuleCtx *ctx, const char *err))                     \
    X(int, ReplyWithLongLong, (RedisModuleCtx *ctx, long long ll))                     \
    X(int, ReplyWithStringBuffer, (RedisModuleCtx *ctx, const char *buf, size_t len))  \
    X(int, ReplyWithNull, (RedisModuleCtx *ctx))                                       \
    X(int, ReplyWithArray, (RedisModuleCtx *ctx, long len))                            \
    X(int, ReplyWithMap, (RedisModuleCtx *ctx, long len))                              \
    X(int, ReplyWithBool, (RedisModuleCtx *ctx, int b))                                \
    X(int, ReplyWithDouble, (RedisModuleCtx *ctx, double d))                           \
    X(int, ReplicateVerbatim, (RedisModuleCtx *ctx))                                   \
    X(int, Replicate, (RedisModuleCtx *ctx, const char *cmdname, const char *fmt, ...))  \
    X(int, GetContextFlags, (RedisModuleCtx *ctx))                                     \
    X(long long, Milliseconds, (void))                                                 \
    X(float, GetUsedMemoryRatio, (void))                                               \
    X(RedisModuleServerInfoData *, GetServerInfo, (RedisModuleCtx *ctx,                \
                                                   const char *section))               \
    X(unsigned long long, ServerInfoGetFieldUnsigned, (RedisModuleServerInfoData *data, \
                                                       const char *field, int *out_err)) \
    X(void, FreeServerInfo, (RedisModuleCtx *ctx, RedisModuleServerInfoData *data))    \
    X(void, SetModuleOptions, (RedisModuleCtx *ctx, int options))                      \
    X(void, SaveUnsigned, (RedisModuleIO *io, uint64_t value))                         \
    X(uint64_t, LoadUnsigned, (RedisModuleIO *io))                                     \
    X(void, SaveStringBuffer, (RedisModuleIO *io, const char *str, size_t len))        \
    X(char *, LoadStringBuffer, (RedisModuleIO *io, size_t *lenptr))                   \
    X(void, SaveDouble, (RedisModuleIO *io, double value))                             \
    X(double, LoadDouble, (RedisModuleIO *io))                                         \
    X(int, IsIOError, (RedisModuleIO *io))                                             \
    X(void, EmitAOF, (RedisModuleIO *io, const char *cmdname, const char *fmt, ...))   \
    X(void, DigestAddStringBuffer, (RedisModuleDigest *md, const char *ele,            \
                                    size_t len))                                       \
    X(void, DigestAddLongLong, (RedisModuleDigest *md, long long ll))                  \
    X(void, DigestEndSequence, (RedisModuleDigest *md))                                \
    X(void, Log, (RedisModuleCtx *ctx, const char *level, const char *fmt, ...))       \
    X(void, LogIOError, (RedisModuleIO *io, const char *levelstr, const char *fmt, ...))

/* APIs that may be missing from an older Redis: looked up, never required. */
#define BKM_API_OPTIONAL(X)                                                            \
    X(void *, TryAlloc, (size_t bytes))                                                \
    X(size_t, MallocSize, (void *ptr))                                                 \
    X(int, IsModuleNameBusy, (const char *name))                                       \
    X(int, GetServerVersion, (void))                                                   \
    X(int, RegisterStringConfig, (RedisModuleCtx *ctx, const char *name,               \
                                  const char *default_val, unsigned int flags,         \
                                  RedisModuleConfigGetStringFunc getfn,                \
                                  RedisModuleConfigSetStringFunc setfn,                \
                                  RedisModuleConfigApplyFunc applyfn, void *privdata)) \
    X(int, LoadConfigs, (RedisModuleCtx *ctx))                                         \
    X(int, NotifyKeyspaceEvent, (RedisModuleCtx *ctx, int type, const char *event,     \
                                 RedisModuleString *key))

#define BKM_DECLARE(ret, name, params) \
    static ret(*RedisModule_##name) params __attribute__((unused)) = NULL;
BKM_API_FUNCS(BKM_DECLARE)
BKM_API_OPTIONAL(BKM_DECLARE)
#undef BKM_DECLARE

/*==========================================================================
 * Initialisation (our RedisModule_Init)
 *==========================================================================*/

/* Fill every pointer above from the context's GetApi, check the module
 * name is free, and register the module. REDISMODULE_OK, or
 * REDISMODULE_ERR when Redis lacks an API we need (or the name is taken). */
static int __attribute__((unused))
bkm_init(RedisModuleCtx *ctx, const char *name, int ver, int apiver)
{
    int (*get_api)(const char *, void *);
    void *fn = ((void **)ctx)[0]; /* the context's first word: GetApi */
    if (fn == NULL) return REDISMODULE_ERR;
    /* a data pointer to a function pointer: POSIX guarantees it works */
    *(void **)&get_api = fn;
#define BKM_GET(ret, name, params) \
    if (get_api("RedisModule_" #name, (void *)&RedisModule_##name) != REDISMODULE_OK) \
        return REDISMODULE_ERR;
    BKM_API_FUNCS(BKM_GET)
#undef BKM_GET
#define BKM_GET_OPT(ret, name, params) \
    if (get_api("RedisModule_" #name, (void *)&RedisModule_##name) != REDISMODULE_OK) \
        RedisModule_##name = NULL;
    BKM_API_OPTIONAL(BKM_GET_OPT)
#undef BKM_GET_OPT
    if (RedisModule_IsModuleNameBusy != NULL && RedisModule_IsModuleNameBusy(name))
        return REDISMODULE_ERR;
    RedisModule_SetModuleAttribs(ctx, name, ver, apiver);
    return REDISMODULE_OK;
}

#endif /* BKM_REDISMODULE_API_H */
