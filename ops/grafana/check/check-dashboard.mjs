// Type-checks Grafana dashboard JSON files against Grafana's published schema (schema.ts) with the
// TypeScript compiler: `node check-dashboard.mjs FILE.json...` (after `npm ci` in this folder).
// Each file becomes `const board: Board = <its JSON>;` so tsc checks the literal field by field.
// Prints tsc's diagnostics and exits 1 if any, else one line per file and exits 0.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const here = dirname(fileURLToPath(import.meta.url));
const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node check-dashboard.mjs DASHBOARD.json...");
  process.exit(2);
}
const work = mkdtempSync(join(here, ".check-"));
let failed = 0;
try {
  const sources = files.map((file, i) => {
    const json = JSON.parse(readFileSync(file, "utf8")); // not JSON at all: fails here
    const ts_file = join(work, `board${i}.ts`);
    writeFileSync(ts_file, `import type { Board } from "../schema";\n` +
      `// ${basename(file)}\nexport const board: Board = ${JSON.stringify(json, null, 2)};\n`);
    return { file, ts_file };
  });
  const program = ts.createProgram(sources.map((s) => s.ts_file), {
    strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler, skipLibCheck: false, types: [],
  });
  const diagnostics = ts.getPreEmitDiagnostics(program);
  const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => here, getNewLine: () => "\n" };
  for (const { file, ts_file } of sources) {
    const mine = diagnostics.filter((d) => d.file && resolve(d.file.fileName) === resolve(ts_file));
    if (mine.length) {
      failed += 1;
      console.log(`${file}: ${mine.length} error(s) against Grafana's dashboard schema`);
      console.log(ts.formatDiagnostics(mine, host));
    } else {
      console.log(`${file}: matches Grafana's dashboard schema (@grafana/schema ${schemaVersion()})`);
    }
  }
  const other = diagnostics.filter((d) => !d.file || !sources.some((s) => resolve(d.file.fileName) === resolve(s.ts_file)));
  if (other.length) {
    failed += 1;
    console.log(ts.formatDiagnostics(other, host));
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);

function schemaVersion() {
  return JSON.parse(readFileSync(join(here, "node_modules", "@grafana", "schema", "package.json"), "utf8")).version;
}
