#!/usr/bin/env node
// pile-native-build: builds @pile/native from source where no prebuilt binary serves the platform.
// Nothing runs this on install (an install script would make pnpm refuse the package until its
// builds are approved); the loader's error tells users to run it.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const addon = path.join(root, 'addon');

function onPath(cmd) {
  return (process.env.PATH || '').split(path.delimiter).some((d) => d !== '' && fs.existsSync(path.join(d, cmd)));
}

const missing = [];
if (!['c++', 'g++', 'clang++'].some(onPath)) missing.push('a C++17 compiler (g++ 8+ or clang 7+)');
if (!['make', 'gmake'].some(onPath)) missing.push('make');
if (!['python3', 'python'].some(onPath)) missing.push('python3');
if (missing.length > 0) {
  console.error(
    `pile-native-build: can not build @pile/native for ${process.platform}-${process.arch}: ${missing.join(', ')} not found.\n` +
      'Install them (Debian/Ubuntu: apt-get install g++ make python3; Fedora: dnf install gcc-c++ make python3; ' +
      'Alpine: apk add g++ make python3; macOS: xcode-select --install), then run this again.',
  );
  process.exit(1);
}

/** node-gyp: npm's own copy when npm runs us, else the one installed beside Node's npm, else npx. */
function nodeGyp() {
  const candidates = [
    process.env.npm_config_node_gyp,
    path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
  ];
  try {
    candidates.push(require.resolve('node-gyp/bin/node-gyp.js', { paths: [root] }));
  } catch {
    /* not installed */
  }
  const found = candidates.find((c) => c !== undefined && fs.existsSync(c));
  return found !== undefined ? [process.execPath, found] : [process.platform === 'win32' ? 'npx.cmd' : 'npx', '-y', 'node-gyp'];
}

// Node's own headers when they are installed beside it: no download from nodejs.org.
const env = { ...process.env };
const prefix = path.join(path.dirname(process.execPath), '..');
if (env.npm_config_nodedir === undefined && fs.existsSync(path.join(prefix, 'include', 'node', 'node_api.h')))
  env.npm_config_nodedir = prefix;
const [cmd, ...args] = nodeGyp();
const r = spawnSync(cmd, [...args, 'rebuild', '--release'], { cwd: addon, stdio: 'inherit', env });
if (r.status !== 0) {
  console.error(`pile-native-build: node-gyp failed (exit ${r.status}); its output above says why.`);
  process.exit(1);
}
const check = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(path.join(addon, 'build', 'Release', 'pile_native.node'))})`], {
  encoding: 'utf8',
});
if (check.status !== 0) {
  console.error(`pile-native-build: the build does not load: ${check.stderr}`);
  process.exit(1);
}
console.log(`pile-native-build: built ${path.join(addon, 'build', 'Release', 'pile_native.node')}`);
