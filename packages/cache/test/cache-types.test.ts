import { expect } from 'chai';
import * as path from 'node:path';
import * as ts from 'typescript';

describe('cache types', () => {
  it('a table opened with a zod schema returns its inferred type from get, with no casts (compiled by tsc)', function () {
    this.timeout(120_000);
    const file = path.join(__dirname, 'types', 'typed-get.ts');
    const program = ts.createProgram([file], {
      strict: true,
      noEmit: true,
      noUnusedLocals: false,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.CommonJS,
      moduleResolution: ts.ModuleResolutionKind.Node10,
      esModuleInterop: true,
      skipLibCheck: true,
      types: ['node'],
    });
    const errors = ts.getPreEmitDiagnostics(program).map((d) => {
      const where =
        d.file !== undefined && d.start !== undefined
          ? `${path.basename(d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: `
          : '';
      return where + ts.flattenDiagnosticMessageText(d.messageText, '\n');
    });
    expect(errors).to.deep.equal([]);
  });
});
