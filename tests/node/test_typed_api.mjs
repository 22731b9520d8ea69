// test_typed_api.mjs - node-redis 5 (npm's `redis`, pinned in package-lock.json)
// drives every BF.* and CF.* command through its typed API (client.bf.add ...)
// over RESP3 and RESP2, and checks the typed answers: booleans where
// RedisBloom answers booleans, integers where it answers integers, INFO as
// an object, SCANDUMP/LOADCHUNK byte-exact, MULTI/EXEC through client.multi().
//
//     node tests/node/test_typed_api.mjs PORT
//
// Run by tests/server/test_node_redis.py against bloomkit-server and by
// tests/module/test_node_redis.py against redis-server with bloomkit.so.
// Exits 1 when a check fails.
import assert from 'node:assert/strict';
import { createClient, RESP_TYPES } from 'redis';

const port = Number(process.argv[2]);
let passed = 0;
let failed = 0;

async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}\n${e.stack}`);
  }
}

async function rejects(promise, text) {
  await assert.rejects(promise, (e) => {
    assert.ok(String(e.message).includes(text), `${e.message} lacks ${text}`);
    return true;
  });
}

// SCANDUMP the key into chunks (Buffers), LOADCHUNK them into dst.
async function copyByChunks(c, fam, key, dst) {
  const bin = c.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
  const chunks = [];
  let it = 0;
  for (;;) {
    const { iterator, chunk } = await bin[fam].scanDump(key, it);
    if (iterator === 0) break;
    chunks.push([iterator, chunk]);
    it = iterator;
  }
  assert.ok(chunks.length >= 1);
  for (const [i, data] of chunks) assert.equal(await bin[fam].loadChunk(dst, i, data), 'OK');
  return Buffer.concat(chunks.map(([, d]) => d));
}

for (const RESP of [3, 2]) {
  const c = createClient({ socket: { host: '127.0.0.1', port }, RESP });
  c.on('error', () => {});
  await c.connect();
  const p = `r${RESP}:`;

  await check(`RESP${RESP}: BF.* typed answers`, async () => {
    const k = `${p}bf`;
    assert.equal(await c.bf.reserve(k, 0.01, 1000), 'OK');
    await rejects(c.bf.reserve(k, 0.01, 1000), 'item exists');
    assert.equal(await c.bf.add(k, 'a'), true);
    assert.equal(await c.bf.add(k, 'a'), false);
    assert.equal(await c.bf.exists(k, 'a'), true);
    assert.equal(await c.bf.exists(k, 'never'), false);
    assert.equal(await c.bf.exists(`${p}missing`, 'a'), false);
    assert.deepEqual(await c.bf.mAdd(k, ['a', 'b']), [false, true]);
    assert.deepEqual(await c.bf.mExists(k, ['a', 'b', 'never']), [true, true, false]);
    assert.deepEqual(await c.bf.insert(`${p}bf2`, ['x', 'y', 'x'], { CAPACITY: 100, ERROR: 0.01 }),
      [true, true, false]);
    assert.deepEqual(await c.bf.insert(`${p}bf3`, ['x'], { NONSCALING: true }), [true]);
    await rejects(c.bf.insert(`${p}nope`, ['x'], { NOCREATE: true }), 'not found');
    assert.equal(await c.bf.card(k), 2);
    const info = await c.bf.info(k);
    assert.equal(info['Capacity'], 1000);
    assert.equal(info['Number of filters'], 1);
    assert.equal(info['Number of items inserted'], 2);
    assert.equal(info['Expansion rate'], 2);
    assert.equal(typeof info['Size'], 'number');
    assert.equal((await c.bf.info(`${p}bf3`))['Expansion rate'], null);
    // one field: a one-pair map in RESP3, [value] in RESP2 (RedisBloom)
    const cap = await c.sendCommand(['BF.INFO', k, 'CAPACITY']);
    assert.deepEqual(RESP === 3 ? { ...cap } : cap, RESP === 3 ? { Capacity: 1000 } : [1000]);
    const dump = await copyByChunks(c, 'bf', k, `${p}bfcopy`);
    assert.equal(await c.bf.exists(`${p}bfcopy`, 'b'), true);
    assert.equal(await c.bf.card(`${p}bfcopy`), 2);
    // a chunk that cannot start a dump leaves the key as it was
    await rejects(c.bf.loadChunk(`${p}bfcopy`, 4, 'abcd'), 'invalid chunk');
    assert.equal(await c.bf.exists(`${p}bfcopy`, 'b'), true);
    assert.ok(dump.length > 56);
  });

  await check(`RESP${RESP}: CF.* typed answers`, async () => {
    const k = `${p}cf`;
    assert.equal(await c.cf.reserve(k, 1000, { BUCKETSIZE: 2, MAXITERATIONS: 20, EXPANSION: 1 }), 'OK');
    assert.equal(await c.cf.add(k, 'a'), true);
    assert.equal(await c.cf.addNX(k, 'a'), false);
    assert.equal(await c.cf.addNX(k, 'b'), true);
    assert.deepEqual(await c.cf.insert(k, ['c', 'a']), [true, true]);
    // CF.INSERTNX answers integers in RESP3 (it has -1), as RedisBloom
    const nx = await c.cf.insertNX(k, ['a', 'd']);
    assert.deepEqual(nx, RESP === 3 ? [0, 1] : [false, true]);
    assert.equal(await c.cf.exists(k, 'a'), true);
    assert.equal(await c.cf.exists(k, 'never'), false);
    const m = await c.sendCommand(['CF.MEXISTS', k, 'a', 'never']);
    assert.deepEqual(m, RESP === 3 ? [true, false] : [1, 0]);
    assert.equal(await c.cf.count(k, 'a'), 2);
    assert.equal(await c.cf.del(k, 'a'), true);
    assert.equal(await c.cf.del(k, 'never'), false);
    assert.equal(await c.cf.count(k, 'a'), 1);
    await rejects(c.cf.del(`${p}missing`, 'a'), 'Not found');
    await rejects(c.cf.insert(k, ['z'], { CAPACITY: 3 }), 'Capacity must be at least');
    const info = await c.cf.info(k);
    assert.equal(info['Number of filters'], 1);
    assert.equal(info['Number of items inserted'], 4);
    assert.equal(info['Number of items deleted'], 1);
    assert.equal(info['Bucket size'], 2);
    assert.equal(info['Expansion rate'], 1);
    assert.equal(info['Max iterations'], 20);
    // a capacity whose power-of-two table is mostly empty: one more pair
    // ("Warning"), which node-redis's CF.INFO keeps beside the others
    const w = `${p}cfwaste`;
    assert.equal(await c.cf.reserve(w, 1100), 'OK');
    const winfo = await c.cf.info(w);
    assert.equal(winfo['Number of buckets'], 1024);
    assert.equal(winfo['Number of filters'], 1);
    assert.equal(winfo['Bucket size'], 2);
    assert.equal(winfo['Max iterations'], 20);
    assert.ok(String(winfo['Warning']).startsWith('capacity 1100 fills 53% of 2048 slots'),
              String(winfo['Warning']));
    assert.equal(info['Warning'], undefined);
    await copyByChunks(c, 'cf', k, `${p}cfcopy`);
    assert.equal(await c.cf.count(`${p}cfcopy`, 'd'), 1);
    await rejects(c.cf.loadChunk(`${p}cfcopy`, 4, 'abcd'), 'invalid chunk');
    assert.equal(await c.cf.exists(`${p}cfcopy`, 'd'), true);
  });

  await check(`RESP${RESP}: errors and other types`, async () => {
    await c.cf.add(`${p}cfkey`, 'x');
    await rejects(c.bf.reserve(`${p}cfkey`, 0.01, 10), 'WRONGTYPE');
    await rejects(c.bf.add(`${p}cfkey`, 'x'), 'WRONGTYPE');
    await c.bf.add(`${p}bfkey`, 'x');
    await rejects(c.cf.reserve(`${p}bfkey`, 100), 'WRONGTYPE');
    await rejects(c.bf.reserve(`${p}huge`, 0.000001, 1e15), 'Insufficient memory to create filter');
  });

  await check(`RESP${RESP}: MULTI/EXEC through client.multi()`, async () => {
    const k = `${p}tx`;
    const res = await c.multi().bf.add(k, 'q').bf.exists(k, 'q').cf.add(`${k}cf`, 'q')
      .bf.mExists(k, ['q', 'never']).exec();
    assert.deepEqual(res, [true, true, true, [true, false]]);
    // a command refused while queueing: EXECABORT, nothing runs
    await assert.rejects(c.multi().bf.add(k, 'r').addCommand(['NO.SUCH.COMMAND', k]).exec());
    assert.equal(await c.bf.exists(k, 'r'), false);
  });

  c.destroy();
}

console.log(`test_typed_api: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
