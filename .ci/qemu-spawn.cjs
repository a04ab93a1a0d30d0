// Loaded with --require into Node under qemu-user (see .ci/arm64-check). qemu-user runs one
// program and does not follow execve: a child that the emulated Node spawns from process.execPath
// (an arm64 binary) would fail with ENOEXEC where no binfmt_misc handler is registered. This routes
// such spawns through qemu again, with the same sysroot; the emulated process can run host
// programs, and a signal sent to the child's pid reaches qemu, which ends the emulated program.
'use strict';
const cp = require('node:child_process');
const qemu = process.env.PILE_QEMU;
const sysroot = process.env.PILE_QEMU_SYSROOT;
if (qemu !== undefined && sysroot !== undefined) {
  const wrap = (file, args) => (file === process.execPath ? [qemu, ['-L', sysroot, file, ...args]] : [file, args]);
  const spawn = cp.ChildProcess.prototype.spawn;
  cp.ChildProcess.prototype.spawn = function (options) {
    if (options.file === process.execPath) {
      const [file, args] = wrap(options.file, options.args.slice(1));
      options = { ...options, file, args: [file, ...args] };
    }
    return spawn.call(this, options);
  };
  const spawnSync = cp.spawnSync;
  cp.spawnSync = function (file, args, options) {
    if (!Array.isArray(args)) return spawnSync.call(this, ...wrap(file, []), args);
    return spawnSync.call(this, ...wrap(file, args), options);
  };
}
