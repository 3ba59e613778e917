// Drives the npm rate-limiter libraries of issue 14 against the server at
// argv[2] (host:port), through the sequence: limit 5 per 10 s, 7
// hits, then each library's get, penalty, reward, block and reset calls.
// It prints every decision the libraries report, one per line, leaving out
// what depends on the moment (milliseconds left), so two servers can be
// compared line by line (cmd/rlserver's TestRateLimiterLibraries does).
'use strict';
const Redis = require('ioredis');
const express = require('express');
const { rateLimit } = require('express-rate-limit');
const { RedisStore } = require('rate-limit-redis');
const { RateLimiterRedis } = require('rate-limiter-flexible');

const [host, port] = process.argv[2].split(':');

// rateLimiterFlexible: RateLimiterRedis over ioredis (EVALSHA, EVAL on
// NOSCRIPT), its consume, get, penalty, reward, block, delete.
async function rateLimiterFlexible(client) {
  const rl = new RateLimiterRedis({ storeClient: client, points: 5, duration: 10, keyPrefix: 'rlf' });
  let admitted = 0;
  for (let i = 0; i < 7; i++) {
    try {
      const r = await rl.consume('user1');
      admitted++;
      console.log(`rate-limiter-flexible hit ${i} allowed remaining=${r.remainingPoints} consumed=${r.consumedPoints}`);
    } catch (r) {
      if (r instanceof Error) throw r;
      console.log(`rate-limiter-flexible hit ${i} denied remaining=${r.remainingPoints} consumed=${r.consumedPoints}`);
    }
  }
  console.log('rate-limiter-flexible admitted', admitted);
  const points = (r) => (r === null ? 'null' : `consumed=${r.consumedPoints} remaining=${r.remainingPoints}`);
  console.log('rate-limiter-flexible get', points(await rl.get('user1')));
  console.log('rate-limiter-flexible penalty 2', points(await rl.penalty('user1', 2)));
  console.log('rate-limiter-flexible reward 1', points(await rl.reward('user1', 1)));
  console.log('rate-limiter-flexible block 20s', points(await rl.block('user1', 20)));
  console.log('rate-limiter-flexible delete', await rl.delete('user1'));
  console.log('rate-limiter-flexible get after delete', points(await rl.get('user1')));
}

// rateLimitRedis: express-rate-limit with the rate-limit-redis store
// (SCRIPT LOAD at start, then EVALSHA), behind a real express server.
async function rateLimitRedis(client) {
  const store = new RedisStore({ sendCommand: (command, ...args) => client.call(command, ...args), prefix: 'rl:' });
  const limiter = rateLimit({ windowMs: 10_000, limit: 5, standardHeaders: 'draft-8', legacyHeaders: false, store,
    keyGenerator: () => 'client1' });
  const app = express();
  app.use(limiter);
  app.get('/', (req, res) => res.send('ok'));
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  try {
    const url = `http://127.0.0.1:${server.address().port}/`;
    const codes = [];
    for (let i = 0; i < 7; i++) {
      const res = await fetch(url);
      codes.push(res.status);
      console.log(`rate-limit-redis hit ${i} status=${res.status} ratelimit=${(res.headers.get('ratelimit') || '').replace(/;\s*t=\d+/, '')}`);
    }
    console.log('rate-limit-redis admitted', codes.filter((c) => c === 200).length);
    console.log('rate-limit-redis get', (await limiter.getKey('client1')).totalHits);
    await store.decrement('client1');
    console.log('rate-limit-redis after decrement', (await store.get('client1')).totalHits);
    await limiter.resetKey('client1');
    console.log('rate-limit-redis after reset', String((await store.get('client1')).totalHits));
  } finally {
    server.close();
  }
}

(async () => {
  const client = new Redis({ host, port: Number(port), enableOfflineQueue: true, maxRetriesPerRequest: 1 });
  try {
    await rateLimiterFlexible(client);
    await rateLimitRedis(client);
  } finally {
    client.disconnect();
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
