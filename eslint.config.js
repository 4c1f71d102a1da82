// eslint.config.js: the TypeScript (and script) rules `npm run lint` holds the code to; layout is
// prettier's (.prettierrc.json), C++ layout clang-format's (.clang-format).
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'dist/',
      'build/',
      'bench/dist/',
      'bench/.tmp/',
      'prebuilds/',
      'examples/.build/',
      '.gpu/',
      '.gpu-check/',
      'build.kept-by-prebuild/',
      'src/native/tables.generated.ts',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node, gc: 'readonly' } },
    rules: {
      // A leading underscore names what is there on purpose and unused (a destructured field left out).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },
  {
    // CommonJS scripts (install, build, prebuild): require is their import.
    files: ['**/*.cjs', 'examples/custom-kernel/*.js'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Pages the training report and the browser test run in a browser.
    files: ['test/report-browser.test.ts', 'src/report/html.ts'],
    languageOptions: { globals: { ...globals.node, ...globals.browser } },
  },
);
