// Runs Vectorize cases through the fake (fake_vectorize.mjs) for a parity test with the project's
// reference index (tests/pyodide/test_worker_pyodide.py::
// test_fake_vectorize_matches_the_local_reference_index).
// stdin: {dimensions, metadataIndexes?, records: [{id, values, namespace?, metadata?}],
//         queries: [{vector, options}], deletes?: [ids]} (deletes run after the queries, then
//         the queries run again)
// stdout: {before: [result | {error}], after: [...]}

import { VectorizeIndexImpl } from "./fake_vectorize.mjs";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const cases = JSON.parse(input);
const index = new VectorizeIndexImpl({ dimensions: cases.dimensions, metadataIndexes: cases.metadataIndexes });
for (let start = 0; start < cases.records.length; start += 1000) {
  await index.upsert(cases.records.slice(start, start + 1000));
}

async function runAll() {
  const out = [];
  for (const { vector, options } of cases.queries) {
    try {
      out.push(await index.query(vector, options));
    } catch (error) {
      out.push({ error: String(error.message) });
    }
  }
  return out;
}

const before = await runAll();
if (cases.deletes?.length) await index.deleteByIds(cases.deletes);
const after = await runAll();
process.stdout.write(JSON.stringify({ before, after, describe: await index.describe() }));
