#!/usr/bin/env node
// Builds the prebuilt binary into prebuilds/<platform>-<arch>/ (prebuildify --napi: one binary
// serves every Node version with Node-API 8, so Node 20, 22, 24 and 26, and Bun and Deno), then
// records the hash of the C++ sources it was built from (see source-hash.js), so that a test can
// tell when a committed binary is older than the source.
//
//   node scripts/prebuild.js                 this machine's platform and arch (linux-x64 here)
//   node scripts/prebuild.js --arch arm64    linux-arm64 (glibc), cross-compiled on a linux-x64
//                                            Debian/Ubuntu host: apt-get install g++-aarch64-linux-gnu
//
// Node's headers are the same for every arch, so a cross build uses the headers of the Node that
// runs this; node-gyp is told the target arch, and the compiler, linker and strip are the cross ones.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const prebuildify = require('prebuildify');
const { writeSourceHash, sourceHash } = require('./source-hash');

const CROSS = {
  // target arch -> the GNU triplet of Debian's cross toolchain (gcc-<triplet>, g++-<triplet>)
  arm64: 'aarch64-linux-gnu',
};

const args = process.argv.slice(2);
const archAt = args.indexOf('--arch');
const arch = archAt >= 0 ? args[archAt + 1] : process.arch;
if (archAt >= 0 && arch === undefined) {
  console.error('usage: prebuild.js [--arch arm64]');
  process.exit(2);
}

const root = path.join(__dirname, '..');
// Build against the headers of the Node that runs this when they are installed beside it (a
// distribution's nodejs-dev, or an official tarball): no download from nodejs.org.
const localHeaders = path.join(path.dirname(process.execPath), '..', 'include', 'node', 'node_api.h');
const env = { ...process.env };
if (env.npm_config_nodedir === undefined && fs.existsSync(localHeaders))
  env.npm_config_nodedir = path.join(path.dirname(process.execPath), '..');

let stripBin = 'strip';
if (arch !== process.arch) {
  if (process.platform !== 'linux' || process.arch !== 'x64' || CROSS[arch] === undefined) {
    console.error(
      `prebuild: no cross build from ${process.platform}-${process.arch} to linux-${arch} (known: ${Object.keys(CROSS).join(', ')})`,
    );
    process.exit(2);
  }
  const triplet = CROSS[arch];
  const cxx = `${triplet}-g++`;
  if (spawnSync(cxx, ['--version']).status !== 0) {
    console.error(`prebuild: ${cxx} not found (Debian/Ubuntu: apt-get install g++-${triplet})`);
    process.exit(1);
  }
  Object.assign(env, { CC: `${triplet}-gcc`, CXX: cxx, LINK: cxx, AR: `${triplet}-ar` });
  stripBin = `${triplet}-strip`;
}
Object.assign(process.env, env);

prebuildify(
  {
    cwd: path.join(root, 'addon'),
    out: root,
    name: '@pile/native',
    napi: true,
    strip: true,
    stripBin,
    arch,
    targets: [process.versions.node],
  },
  (err) => {
    if (err) {
      console.error(`prebuild failed: ${err.message}`);
      process.exit(1);
    }
    fs.rmSync(path.join(root, 'addon', 'build'), { recursive: true, force: true });
    writeSourceHash();
    console.log(`prebuilt ${process.platform}-${arch} from source ${sourceHash()}`);
  },
);
