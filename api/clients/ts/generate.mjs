// Generates the TypeScript types of Playhead's API with openapi-typescript (npm, pinned in the
// repository's package.json):
//
//   node api/clients/ts/generate.mjs OPENAPI.yaml OUT.ts
//
// cmd/api's TestGeneratedTSClient runs it on the document the running server serves, into a
// temporary folder beside a copy of flow.mts. The Node API rather than the CLI: a multipart file
// part (`format: binary`) is a string to openapi-typescript, and its documented way to make it
// a Blob, which FormData takes, is this transform.
import { readFile, writeFile } from "node:fs/promises";
import openapiTS, { astToString } from "openapi-typescript";
import ts from "typescript";

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error("usage: node generate.mjs OPENAPI.yaml OUT.ts");
  process.exit(2);
}
const BLOB = ts.factory.createTypeReferenceNode(ts.factory.createIdentifier("Blob"));
const ast = await openapiTS(await readFile(input, "utf8"), {
  transform(schema) {
    if (schema.format === "binary") {
      return BLOB;
    }
    return undefined;
  },
});
await writeFile(output, astToString(ast));
