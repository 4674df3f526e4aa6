// What markdown-link-check does not check, for make linkcheck (scripts/linkcheck.sh): the
// anchor of a link into another Markdown file of the repository (`other.md#section`), and
// that no relative link leaves the repository (`../shared/…`) or names an absolute path. The
// links are read and the anchors matched by markdown-link-check itself (its link extraction
// and its heading rules), so both checks agree on what a link and a heading are.
//
//   node scripts/linkcheck.mjs README.md docs/api/README.md …
import { readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const markdownLinkCheck = require("markdown-link-check");

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

// check runs markdown-link-check on markdown with opts and resolves to its results.
function check(markdown, opts) {
  return new Promise((resolve, reject) =>
    markdownLinkCheck(markdown, opts, (err, results) => (err ? reject(err) : resolve(results))));
}

// links returns every link of the Markdown file at file, as markdown-link-check reads them.
async function links(file) {
  const results = await check(readFileSync(file, "utf8"), { ignorePatterns: [{ pattern: "." }] });
  return results.map((r) => r.link);
}

// missingAnchors returns those of anchors (without #) the Markdown file at file does not have.
async function missingAnchors(file, anchors) {
  const probe = anchors.map((a) => `[probe](#${a})`).join("\n");
  const results = await check(`${readFileSync(file, "utf8")}\n\n${probe}\n`, {
    ignorePatterns: [{ pattern: "^[^#]" }],
  });
  const dead = new Set(results.filter((r) => r.status === "dead").map((r) => r.link.slice(1)));
  return anchors.filter((a) => dead.has(a));
}

const problems = [];
const anchorsOf = new Map(); // target .md file → Map(anchor → the links that name it)

for (const file of process.argv.slice(2)) {
  for (const link of await links(file)) {
    if (/^(https?|mailto):/i.test(link) || link.startsWith("#")) continue; // external, or checked by markdown-link-check
    if (/^[a-z][a-z0-9+.-]*:/i.test(link) || link.startsWith("/")) {
      problems.push(`${file}: ${link}: not a relative link into the repository`);
      continue;
    }
    const [rawPath, anchor] = link.split("#", 2);
    let target;
    try {
      target = path.resolve(path.dirname(file), decodeURIComponent(rawPath));
    } catch {
      problems.push(`${file}: ${link}: cannot be decoded`);
      continue;
    }
    const inside = path.relative(root, target);
    if (inside.startsWith("..") || path.isAbsolute(inside)) {
      problems.push(`${file}: ${link}: leaves the repository`);
      continue;
    }
    if (anchor === undefined || !target.endsWith(".md")) continue;
    try {
      if (!statSync(target).isFile()) continue;
    } catch {
      continue; // a missing file is markdown-link-check's to report
    }
    if (!anchorsOf.has(target)) anchorsOf.set(target, new Map());
    const named = anchorsOf.get(target);
    if (!named.has(anchor)) named.set(anchor, []);
    named.get(anchor).push(`${file}: ${link}`);
  }
}

for (const [target, named] of anchorsOf) {
  for (const anchor of await missingAnchors(target, [...named.keys()])) {
    for (const where of named.get(anchor)) {
      problems.push(`${where}: ${path.relative(root, target)} has no heading or id "${anchor}"`);
    }
  }
}

for (const p of problems) console.error(`  [✖] ${p}`);
if (problems.length > 0) {
  console.error(`\n  ERROR: ${problems.length} link${problems.length === 1 ? "" : "s"} into other files or out of the repository`);
  process.exit(1);
}
