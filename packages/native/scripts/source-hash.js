'use strict';
// The hash of everything the binary is compiled from: the addon's sources and build file, and the
// node-addon-api headers' version. Written beside the prebuilds when they are made; a test checks
// that the committed prebuilds were built from the sources as they are now.
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const addonDir = path.join(root, 'addon');
const HASH_FILE = path.join(root, 'prebuilds', 'SOURCE-SHA256');

function sourceHash() {
  const h = crypto.createHash('sha256');
  for (const name of fs
    .readdirSync(addonDir)
    .filter((n) => /\.(cc|h|gyp)$/.test(n))
    .sort()) {
    h.update(`${name}\0`);
    h.update(fs.readFileSync(path.join(addonDir, name)));
  }
  h.update(`node-addon-api\0${require('node-addon-api/package.json').version.split('.')[0]}`);
  return h.digest('hex');
}

function writeSourceHash() {
  fs.mkdirSync(path.dirname(HASH_FILE), { recursive: true });
  fs.writeFileSync(HASH_FILE, `${sourceHash()}\n`);
}

function recordedHash() {
  try {
    return fs.readFileSync(HASH_FILE, 'utf8').trim();
  } catch {
    return undefined;
  }
}

module.exports = { sourceHash, writeSourceHash, recordedHash, HASH_FILE };
