import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** A fresh directory under os.tmpdir(); the caller removes it with removeDir. */
export function makeTempDir(label: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `pile-bench-${label}-`));
}

export function removeDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}
