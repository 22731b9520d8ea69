/*
 * clash_module.c - a stand-in for RedisBloom in the module tests: a Redis
 * module that registers CF.ADD (a name bloomkit.so also registers, in the
 * middle of its table), so that loading bloomkit.so next to it must fail
 * cleanly. Its CF.ADD answers "+clash".
 */
#include "redismodule_api.h"

#define EXPORT __attribute__((visibility("default")))

static int clash_cf_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    (void)argv;
    (void)argc;
    return RedisModule_ReplyWithSimpleString(ctx, "clash");
}

EXPORT int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    (void)argv;
    (void)argc;
    if (bkm_init(ctx, "clash", 1, REDISMODULE_APIVER_1) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    return RedisModule_CreateCommand(ctx, "cf.add", clash_cf_add, "write", 1, 1, 1);
}
