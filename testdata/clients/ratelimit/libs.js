// Drives the npm rate-limiter libraries of issue 14 (rate-limiter-flexible,
// rate-limit-redis, redis-rate-limiter, ratelimiter) against the server at
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
const redisRateLimiter = require('redis-rate-limiter');
const Limiter = require('ratelimiter');

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

// redisRateLimiter: redis-rate-limiter's fixed window, one MULTI of SETEX,
// RENAMENX, INCR and TTL a hit; it has no peek or reset of its own, so the
// window is read back and cleared with the commands an app would use.
async function redisRateLimiterHits(client) {
  const limit = redisRateLimiter.create({ redis: client, key: (x) => x.id, limit: 5, window: 10 });
  const hit = (req) => new Promise((resolve, reject) => limit(req, (err, rate) => (err ? reject(err) : resolve(rate))));
  let admitted = 0;
  for (let i = 0; i < 7; i++) {
    const rate = await hit({ id: 'user1' });
    if (!rate.over) admitted++;
    console.log(`redis-rate-limiter hit ${i} ${rate.over ? 'denied' : 'allowed'} current=${rate.current} limit=${rate.limit} window=${rate.window}`);
  }
  console.log('redis-rate-limiter admitted', admitted);
  const ttl = await client.ttl('ratelimit:user1');
  console.log('redis-rate-limiter window set', ttl > 0 && ttl <= 10, 'temp key left', await client.exists('ratelimittemp:user1'));
  console.log('redis-rate-limiter reset', await client.del('ratelimit:user1'));
  const after = await hit({ id: 'user1' });
  console.log(`redis-rate-limiter after reset current=${after.current} over=${after.over}`);
}

// ratelimiter: the sorted-set sliding log (a MULTI of ZREMRANGEBYSCORE,
// ZCARD, ZADD, ZRANGE, ZREMRANGEBYRANK and PEXPIRE each get); a hit is
// admitted while remaining > 0, as its README's middleware does.
async function ratelimiterHits(client) {
  const limiter = new Limiter({ id: 'user1', db: client, max: 5, duration: 10_000 });
  const get = () => new Promise((resolve, reject) => limiter.get((err, info) => (err ? reject(err) : resolve(info))));
  let admitted = 0;
  for (let i = 0; i < 7; i++) {
    const info = await get();
    if (info.remaining > 0) admitted++;
    const resetIn = info.resetMs - Date.now();
    console.log(`ratelimiter hit ${i} ${info.remaining > 0 ? 'allowed' : 'denied'} remaining=${info.remaining} total=${info.total} reset within window ${resetIn > 0 && resetIn <= 10_000}`);
  }
  console.log('ratelimiter admitted', admitted);
  console.log('ratelimiter log entries', await client.zcard('limit:user1'));
  const pttl = await client.pttl('limit:user1');
  console.log('ratelimiter log expires', pttl > 0 && pttl <= 10_000);
  console.log('ratelimiter reset', await client.del('limit:user1'));
  console.log('ratelimiter after reset remaining', (await get()).remaining);
}

(async () => {
  const client = new Redis({ host, port: Number(port), enableOfflineQueue: true, maxRetriesPerRequest: 1 });
  try {
    await rateLimiterFlexible(client);
    await rateLimitRedis(client);
    await redisRateLimiterHits(client);
    await ratelimiterHits(client);
  } finally {
    client.disconnect();
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
