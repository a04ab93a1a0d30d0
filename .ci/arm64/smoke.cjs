// Runs under qemu-user (.ci/arm64-check) with the linux-arm64 Node: the prebuild that loads, and a
// mapped pile put/get/close/reopen. Plain JS over the packages as npm installed them for linux-arm64.
'use strict';
const assert = require('node:assert');
const path = require('node:path');
const where = require('node-gyp-build').path(path.dirname(require.resolve('@pile/native/package.json')));
assert.match(where, /prebuilds[\\/]linux-arm64[\\/]@pile\+native\.node$/);
assert.strictEqual(process.arch, 'arm64');
const { openPile } = require('@pile/core');
const dir = process.argv[2];
let pile = openPile({ dir, segmentSize: 1 << 20 });
const ptrs = [];
for (let i = 0; i < 3000; i++) ptrs.push(pile.put({ i, name: `record ${i}` }));
const big = pile.put(Buffer.alloc(300000, 7));
pile.setRoot('first', ptrs[0]);
pile.close();
pile = openPile({ dir });
for (let i = 0; i < 3000; i++) assert.deepStrictEqual(pile.get(ptrs[i]), { i, name: `record ${i}` });
assert.strictEqual(pile.get(big).length, 300000);
assert.strictEqual(pile.getRoot('first'), ptrs[0]);
assert.strictEqual(pile.verify().ok, true);
pile.close();
console.log(`loaded ${where}; put/get/close/reopen ok`);
