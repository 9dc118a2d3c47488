// The PostgreSQL the tests make their databases on: TEST_DATABASE_URL, or
// localhost:5432 as user postgres. Without one the run stops with one line
// that says so (npm test runs this file first, as its pretest).
import { fileURLToPath } from "node:url";
import pg from "pg";

export const adminURL = process.env.TEST_DATABASE_URL || "postgres://postgres@localhost:5432/postgres";

// adminClient connects to it, or ends the process with one line.
export async function adminClient() {
  const c = new pg.Client({ connectionString: adminURL, connectionTimeoutMillis: 5000 });
  try {
    await c.connect();
  } catch (err) {
    process.stderr.write(`no PostgreSQL at ${new URL(adminURL).host} (${err.code || err.message}): start one there (Debian: apt-get install postgresql), or set TEST_DATABASE_URL\n`);
    process.exit(1);
  }
  return c;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await (await adminClient()).end();
}
