/**
 * The second process of the `multiprocess` workload:
 * `node dist/MultiprocessContender.js <file> <lock|pingpong> <count>`. It maps the coordination
 * file, waits for the start word, runs its loop and prints the milliseconds it took.
 */
import * as fs from 'node:fs';
import { awaitStart, lockLoop, openCoordination, pingPong } from './LockLoop';

const [file = '', mode = '', count = '0'] = process.argv.slice(2);
const fd = fs.openSync(file, 'r+');
const c = openCoordination(fd, file);
fs.closeSync(fd);
awaitStart(c);
const ms = mode === 'lock' ? lockLoop(c, Number(count)) : pingPong(c, 1, Number(count));
process.stdout.write(`${JSON.stringify({ ms })}\n`);
