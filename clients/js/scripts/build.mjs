// build bundles src/ into dist/index.js (one ES module with no imports, so
// a browser loads it as it is) beside tsc's declarations, and copies the
// bundle to web/static/assets/orderd-client.js, where orderd's own pages
// load it from the binary. Both are committed: serving needs no build, and
// the tests fail when either differs from what this script makes of src/.
//
//   node scripts/build.mjs
import * as esbuild from "esbuild";
import { execFileSync } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const here = new URL("..", import.meta.url);
export const webCopy = new URL("../../web/static/assets/orderd-client.js", here);

// bundle returns dist/index.js as the build makes it.
export async function bundle() {
  const out = await esbuild.build({
    entryPoints: [fileURLToPath(new URL("src/index.ts", here))],
    bundle: true,
    format: "esm",
    target: "es2020",
    platform: "neutral",
    write: false,
    legalComments: "none",
    banner: { js: "// @orderd/client: built by scripts/build.mjs from src/. Do not edit." },
  });
  return out.outputFiles[0].text;
}

// tsc type-checks src/ and writes its declarations to outDir.
function tsc(outDir) {
  execFileSync(process.execPath, [fileURLToPath(new URL("node_modules/typescript/bin/tsc", here)), "-p", fileURLToPath(here), "--outDir", outDir], { stdio: "inherit" });
}

// declarations returns the .d.ts files as the build makes them, by name.
export async function declarations() {
  const dir = await mkdtemp(join(tmpdir(), "orderd-client-dts-"));
  try {
    tsc(dir);
    const out = {};
    for (const name of await readdir(dir)) out[name] = await readFile(join(dir, name), "utf8");
    return out;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  tsc(fileURLToPath(new URL("dist", here)));
  const js = await bundle();
  await writeFile(new URL("dist/index.js", here), js);
  await writeFile(webCopy, js);
}
