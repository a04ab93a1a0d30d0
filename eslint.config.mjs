// Lint rules for every TypeScript and JavaScript file of the workspace (`pnpm lint`).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

export default tseslint.config(
  { ignores: ['**/node_modules/**', '**/dist/**', '**/build/**', '**/prebuilds/**', '**/.doc-snippets/**', 'benchmarks/results/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: { ...globals.node },
    },
    rules: {
      // Pile builds to CommonJS; require() loads msgpackr, the native addon and optional peers lazily, off the startup path.
      '@typescript-eslint/no-require-imports': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { ...globals.commonjs } },
    // A module's own `const crypto = require(...)` is not a clash with the global of that name.
    rules: { 'no-redeclare': ['error', { builtinGlobals: false }] },
  },
  {
    files: ['**/test/**'],
    languageOptions: { globals: { ...globals.mocha } },
  },
);
