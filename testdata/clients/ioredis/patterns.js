// Runs the client patterns of docs/compatibility.md against rlserver with
// ioredis. The server is at $RLSERVER_ADDR, started by
// internal/resp/clients_test.go with a frozen clock and a rule "five"
// (fixed_window, 5 per minute). Exits non-zero, listing what failed.
'use strict';
const assert = require('node:assert');
const Redis = require('ioredis');

const [host, port] = process.env.RLSERVER_ADDR.split(':');
const failures = [];

function check(name, got, want) {
  try {
    assert.deepStrictEqual(got, want);
  } catch {
    failures.push(`${name}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}

async function expectError(name, promise, text) {
  try {
    await promise;
    failures.push(`${name}: no error`);
  } catch (e) {
    if (!(e instanceof Redis.ReplyError)) failures.push(`${name}: ${e} is not a ReplyError`);
    else if (!e.message.includes(text)) failures.push(`${name}: error ${e.message} lacks ${text}`);
  }
}

async function main() {
  const r = new Redis({ host, port: Number(port), maxRetriesPerRequest: 0 });

  // The Redis docs' INCR rate limiter, in a transaction.
  check('MULTI 1', await r.multi().incr('ip:1').expire('ip:1', 10).exec(), [[null, 1], [null, 1]]);
  check('MULTI 2', await r.multi().incr('ip:1').expire('ip:1', 10).exec(), [[null, 2], [null, 1]]);
  check('TTL after the transaction', await r.ttl('ip:1'), 10);

  // ... and its other form: EXPIRE only when INCR returned 1.
  check('INCR new key', await r.incr('ip:2'), 1);
  check('EXPIRE at count 1', await r.expire('ip:2', 10), 1);
  check('INCR again', await r.incr('ip:2'), 2);
  check('TTL kept', await r.ttl('ip:2'), 10);

  // SET NX PX.
  check('SET NX PX new', await r.set('lock:1', 'holder', 'PX', 1500, 'NX'), 'OK');
  check('SET NX PX taken', await r.set('lock:1', 'other', 'PX', 1500, 'NX'), null);
  check('PTTL', await r.pttl('lock:1'), 1500);

  // CL.THROTTLE, as redis-cell answers it.
  check('CL.THROTTLE user123', await r.call('CL.THROTTLE', 'user123', 15, 30, 60), [0, 16, 15, -1, 2]);
  check('CL.THROTTLE k first', await r.call('CL.THROTTLE', 'k', 0, 1, 2, 1), [0, 1, 0, -1, 2]);
  check('CL.THROTTLE k again', await r.call('CL.THROTTLE', 'k', 0, 1, 2, 1), [1, 1, 0, 2, 2]);
  check('CL.THROTTLE k2', await r.call('CL.THROTTLE', 'k2', 5, 5, 3600), [0, 6, 5, -1, 720]);

  // Pipelined RL.ALLOW: seven at a limit of five.
  const p = r.pipeline();
  for (let i = 0; i < 7; i++) p.call('RL.ALLOW', 'client:1', 'five');
  const replies = (await p.exec()).map(([err, v]) => (err ? String(err) : v));
  check('pipelined allowed', replies.map((v) => v[0]), [1, 1, 1, 1, 1, 0, 0]);
  check('pipelined remaining', replies.map((v) => v[2]), [4, 3, 2, 1, 0, 0, 0]);

  // Errors arrive as the client's error type.
  await expectError('unknown command', r.call('NOSUCHCMD', 'x'), "unknown command 'NOSUCHCMD'");
  await expectError('bad cost', r.call('RL.ALLOW', 'k', 'five', 'abc'), 'value is not an integer or out of range');
  await expectError('bad CL.THROTTLE', r.call('CL.THROTTLE', 'k', 'x', 1, 1), "Couldn't parse as integer: x");

  r.disconnect();
  if (failures.length) {
    console.log(failures.join('\n'));
    process.exit(1);
  }
  console.log('ioredis: all patterns passed');
}

main().catch((e) => {
  console.error(e);
  process.exit(2);
});
