#!/usr/bin/env node
// Builds the prebuilt binary for this platform into prebuilds/<platform>-<arch>/ (prebuildify
// --napi: one binary serves every Node version with Node-API 8, so Node 20, 22 and 24), then
// records the hash of the C++ sources it was built from (see source-hash.js), so that a test can
// tell when the committed binary is older than the source.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const prebuildify = require('prebuildify');
const { writeSourceHash } = require('./source-hash');

const root = path.join(__dirname, '..');
// Build against the headers of the Node that runs this when they are installed beside it (a
// distribution's nodejs-dev, or an official tarball): no download from nodejs.org.
const localHeaders = path.join(path.dirname(process.execPath), '..', 'include', 'node', 'node_api.h');
const env = { ...process.env };
if (env.npm_config_nodedir === undefined && fs.existsSync(localHeaders))
  env.npm_config_nodedir = path.join(path.dirname(process.execPath), '..');
Object.assign(process.env, env);

prebuildify(
  {
    cwd: path.join(root, 'addon'),
    out: root,
    name: '@pile/native',
    napi: true,
    strip: true,
    targets: [process.versions.node],
  },
  (err) => {
    if (err) {
      console.error(`prebuild failed: ${err.message}`);
      process.exit(1);
    }
    fs.rmSync(path.join(root, 'addon', 'build'), { recursive: true, force: true });
    writeSourceHash();
    console.log(`prebuilt ${process.platform}-${process.arch} from source ${require('./source-hash').sourceHash()}`);
  },
);
