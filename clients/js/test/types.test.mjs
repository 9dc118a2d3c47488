// The package's declarations as a TypeScript user meets them: a typical
// use compiles, and the mistakes marked @ts-expect-error in
// types/usage.ts are caught.
import { execFile } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

test("calls are typed from the OpenAPI document: right ones compile, wrong ones do not", async () => {
  const tsc = fileURLToPath(new URL("../node_modules/typescript/bin/tsc", import.meta.url));
  await promisify(execFile)(process.execPath, [tsc, "-p", fileURLToPath(new URL("types/tsconfig.json", import.meta.url))])
    .catch((err) => { throw new Error(`tsc: ${err.stdout}${err.stderr}`); });
});
