// Runs @keyv/test-suite, which is written for vitest, against KeyvPile (test/keyv-test-suite.test.ts runs this under mocha).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: { include: ['test/suite/**/*.vitest.ts'], pool: 'forks', fileParallelism: false, testTimeout: 30000 },
});
