// A local stand-in for a Cloudflare Vectorize (V2) index binding, for the Pyodide test layer.
//
// Why a fake: Vectorize has no local mode (wrangler only proxies it to a remote index), so the
// Worker's vector fallback is tested against this class, which follows the documented semantics
// of the Workers binding and the project's own reference index (src/router/adapters/local/
// vector_index.py + src/router/vectors/metadata_filter.py):
//
//   * cosine similarity over float32 values, best first, ties broken by id;
//   * a query searches one namespace (or every vector when no namespace is given);
//   * metadata filters: implicit $eq, $eq $ne $in $nin $lt $lte $gt $gte, dotted keys, one range
//     per key, type-strict matching, $ne/$nin match a missing field; filters are validated;
//   * topK 1..100, or at most 20 with returnValues or returnMetadata "all";
//   * ids and namespaces ≤ 64 bytes, metadata ≤ 10 KiB of JSON, ≤ 1000 vectors per insert/upsert,
//     the index's dimension on every vector; insert keeps existing ids, upsert replaces them;
//   * mutations return {mutationId}; unlike the hosted index they apply immediately.
//
// `metadataIndexes` (optional) lists the metadata properties that have a metadata index
// (`wrangler vectorize create-metadata-index`). The hosted index filters only on those, and
// silently matches nothing otherwise; this fake throws instead, so a missing index is found here.

const MAX_TOP_K = 100;
const MAX_TOP_K_WITH_PAYLOAD = 20;
const MAX_BATCH = 1000;
const MAX_ID_BYTES = 64;
const MAX_NAMESPACE_BYTES = 64;
const MAX_METADATA_BYTES = 10 * 1024;
const MAX_FILTER_JSON_BYTES = 2048;
const MAX_FILTER_KEY_CHARS = 512;
const MAX_DIMENSIONS = 1536;
const OPERATORS = new Set(["$eq", "$ne", "$in", "$nin", "$lt", "$lte", "$gt", "$gte"]);
const LOWER = new Set(["$gt", "$gte"]);
const UPPER = new Set(["$lt", "$lte"]);
const ABSENT = Symbol("absent");

const encoder = new TextEncoder();
const byteLength = (text) => encoder.encode(text).length;

function fail(operation, message) {
  const error = new Error(`${operation}: ${message}`);
  error.name = "VectorizeError";
  throw error;
}

function checkText(operation, value, what, maxBytes) {
  if (typeof value !== "string" || value.length === 0) {
    fail(operation, `${what} must be a non-empty string, got ${JSON.stringify(value)}`);
  }
  if (byteLength(value) > maxBytes) fail(operation, `${what} ${value} is longer than ${maxBytes} bytes`);
}

function kind(value) {
  if (value === null) return "null";
  if (typeof value === "boolean") return "boolean";
  if (typeof value === "number") return "number";
  if (typeof value === "string") return "string";
  return "other";
}

// --- filters ------------------------------------------------------------------------------------

function validateScalar(op, key, operand) {
  const k = kind(operand);
  if (k === "number" && !Number.isFinite(operand)) fail(op, `${key} takes a finite number`);
  if (k === "other") fail(op, `filter on ${key} takes a string, number, boolean or null`);
}

function validateFilter(filter, indexed) {
  const op = "VECTOR_QUERY_ERROR";
  if (filter === null || typeof filter !== "object" || Array.isArray(filter)) {
    fail(op, "filter must be an object");
  }
  const keys = Object.keys(filter);
  if (keys.length === 0) fail(op, "filter must be a non-empty object");
  for (const key of keys) {
    if (!key || key.length > MAX_FILTER_KEY_CHARS) fail(op, `bad filter key ${JSON.stringify(key)}`);
    if (key.startsWith("$")) fail(op, `filter key ${key} starts with '$' ($and/$or are not supported)`);
    if (key.includes('"') || key.split(".").includes("")) fail(op, `bad filter key ${key}`);
    if (indexed && !indexed.has(key)) {
      fail(
        op,
        `no metadata index on ${JSON.stringify(key)}: the hosted index would match nothing ` +
          `(create it with \`wrangler vectorize create-metadata-index <index> --property-name=${key}\`)`,
      );
    }
    const condition = filter[key];
    if (condition === null || typeof condition !== "object" || Array.isArray(condition)) {
      validateScalar(op, key, condition);
      continue;
    }
    const ops = Object.keys(condition);
    if (ops.length === 0) fail(op, `filter on ${key} has no operator`);
    for (const operator of ops) {
      const operand = condition[operator];
      if (!OPERATORS.has(operator)) fail(op, `unknown filter operator ${operator} on ${key}`);
      if (operator === "$eq" || operator === "$ne") validateScalar(op, key, operand);
      else if (operator === "$in" || operator === "$nin") {
        if (!Array.isArray(operand) || operand.length === 0) {
          fail(op, `${operator} on ${key} takes a non-empty list`);
        }
        for (const item of operand) validateScalar(op, key, item);
      } else {
        const k = kind(operand);
        if (k !== "number" && k !== "string") fail(op, `${operator} on ${key} takes a number or a string`);
        if (k === "number" && !Number.isFinite(operand)) fail(op, `${operator} on ${key} takes a finite number`);
      }
    }
    if (ops.length > 1) {
      const lower = ops.filter((o) => LOWER.has(o));
      const upper = ops.filter((o) => UPPER.has(o));
      if (ops.length !== 2 || lower.length !== 1 || upper.length !== 1) {
        fail(op, `filter on ${key} combines ${ops.join(", ")}; one operator, or one range`);
      }
      if (kind(condition[lower[0]]) !== kind(condition[upper[0]])) {
        fail(op, `range on ${key} mixes a number and a string`);
      }
    }
  }
  if (byteLength(JSON.stringify(filter)) >= MAX_FILTER_JSON_BYTES) {
    fail(op, `filter must be under ${MAX_FILTER_JSON_BYTES} bytes of JSON`);
  }
}

function lookup(metadata, dottedKey) {
  let value = metadata;
  for (const part of dottedKey.split(".")) {
    if (value === null || typeof value !== "object" || Array.isArray(value) || !(part in value)) {
      return ABSENT;
    }
    value = value[part];
  }
  return value;
}

function equal(value, operand) {
  const k = kind(value);
  return k !== "other" && k === kind(operand) && value === operand;
}

function apply(operator, value, operand) {
  if (operator === "$ne") return value === ABSENT || !equal(value, operand);
  if (operator === "$nin") return value === ABSENT || !operand.some((item) => equal(value, item));
  if (value === ABSENT) return false;
  if (operator === "$eq") return equal(value, operand);
  if (operator === "$in") return operand.some((item) => equal(value, item));
  const k = kind(value);
  if ((k !== "number" && k !== "string") || k !== kind(operand)) return false;
  if (operator === "$lt") return value < operand;
  if (operator === "$lte") return value <= operand;
  if (operator === "$gt") return value > operand;
  return value >= operand;
}

export function matchesFilter(metadata, filter) {
  return Object.entries(filter).every(([key, condition]) => {
    const value = lookup(metadata, key);
    if (condition === null || typeof condition !== "object" || Array.isArray(condition)) {
      return apply("$eq", value, condition);
    }
    return Object.entries(condition).every(([operator, operand]) => apply(operator, value, operand));
  });
}

// --- the index ----------------------------------------------------------------------------------

function toFloat32(operation, values, dimensions, what) {
  if (!(Array.isArray(values) || ArrayBuffer.isView(values))) {
    fail(operation, `${what} must be a list of numbers`);
  }
  if (values.length !== dimensions) {
    fail(operation, `${what} has ${values.length} dimensions; this index has ${dimensions}`);
  }
  const out = new Float32Array(dimensions);
  for (let i = 0; i < dimensions; i++) {
    const v = values[i];
    if (typeof v !== "number" || !Number.isFinite(v) || !Number.isFinite(Math.fround(v))) {
      fail(operation, `${what} contains a value that is not a finite float32`);
    }
    out[i] = v;
  }
  return out;
}

function norm(values) {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i] * values[i];
  return Math.sqrt(sum);
}

function copyMetadata(operation, id, metadata) {
  if (metadata === undefined || metadata === null) return {};
  if (typeof metadata !== "object" || Array.isArray(metadata)) {
    fail(operation, `metadata of ${id} must be an object`);
  }
  const check = (value) => {
    if (value !== null && typeof value === "object") {
      for (const [key, inner] of Object.entries(value)) {
        if (!Array.isArray(value) && (!key || key.includes(".") || key.includes('"') || key.startsWith("$"))) {
          fail(operation, `metadata key ${JSON.stringify(key)} of ${id} is empty or has '.', '"' or a leading '$'`);
        }
        check(inner);
      }
    }
  };
  check(metadata);
  let encoded;
  try {
    encoded = JSON.stringify(metadata);
  } catch (error) {
    fail(operation, `metadata of ${id} is not JSON: ${error.message}`);
  }
  if (byteLength(encoded) > MAX_METADATA_BYTES) {
    fail(operation, `metadata of ${id} is larger than ${MAX_METADATA_BYTES} bytes of JSON`);
  }
  return JSON.parse(encoded);
}

let mutationCounter = 0;

export class VectorizeIndexImpl {
  #dimensions;
  #metric;
  #indexed;
  #vectors = new Map(); // id → {id, namespace, values: Float32Array, norm, metadata}

  constructor({ dimensions, metric = "cosine", metadataIndexes = null } = {}) {
    if (!Number.isInteger(dimensions) || dimensions < 1 || dimensions > MAX_DIMENSIONS) {
      throw new Error(`dimensions must be an integer between 1 and ${MAX_DIMENSIONS}`);
    }
    if (metric !== "cosine") throw new Error("only the cosine metric is emulated");
    this.#dimensions = dimensions;
    this.#metric = metric;
    this.#indexed = metadataIndexes ? new Set(metadataIndexes) : null;
    this.calls = { query: 0, upsert: 0, insert: 0, deleteByIds: 0, getByIds: 0 };
  }

  async describe() {
    return {
      vectorCount: this.#vectors.size,
      dimensions: this.#dimensions,
      metric: this.#metric,
      processedUpToDatetime: new Date().toISOString(),
      processedUpToMutation: String(mutationCounter),
    };
  }

  async insert(vectors) {
    this.calls.insert++;
    return this.#write("VECTOR_INSERT_ERROR", vectors, false);
  }

  async upsert(vectors) {
    this.calls.upsert++;
    return this.#write("VECTOR_UPSERT_ERROR", vectors, true);
  }

  #write(operation, vectors, replace) {
    if (!Array.isArray(vectors)) fail(operation, "vectors must be a list");
    if (vectors.length > MAX_BATCH) {
      fail(operation, `at most ${MAX_BATCH} vectors per call through the Workers binding, got ${vectors.length}`);
    }
    const prepared = vectors.map((vector) => {
      if (vector === null || typeof vector !== "object") fail(operation, "each vector must be an object");
      checkText(operation, vector.id, "vector id", MAX_ID_BYTES);
      const namespace = vector.namespace ?? null;
      if (namespace !== null) checkText(operation, namespace, "namespace", MAX_NAMESPACE_BYTES);
      const values = toFloat32(operation, vector.values, this.#dimensions, `vector ${vector.id}`);
      return {
        id: vector.id,
        namespace,
        values,
        norm: norm(values),
        metadata: copyMetadata(operation, vector.id, vector.metadata),
      };
    });
    for (const record of prepared) {
      if (!replace && this.#vectors.has(record.id)) continue;
      this.#vectors.set(record.id, record);
    }
    mutationCounter++;
    return { mutationId: `fake-${mutationCounter}` };
  }

  async query(vector, options = {}) {
    this.calls.query++;
    const operation = "VECTOR_QUERY_ERROR";
    const opts = options ?? {};
    const topK = opts.topK ?? 5;
    const returnValues = Boolean(opts.returnValues);
    let returnMetadata = opts.returnMetadata ?? "none";
    if (returnMetadata === true) returnMetadata = "all";
    if (returnMetadata === false) returnMetadata = "none";
    if (!["none", "indexed", "all"].includes(returnMetadata)) {
      fail(operation, `returnMetadata must be "none", "indexed" or "all"`);
    }
    if (!Number.isInteger(topK) || topK < 1 || topK > MAX_TOP_K) {
      fail(operation, `topK must be an integer between 1 and ${MAX_TOP_K}, got ${topK}`);
    }
    if ((returnValues || returnMetadata === "all") && topK > MAX_TOP_K_WITH_PAYLOAD) {
      fail(operation, `topK is at most ${MAX_TOP_K_WITH_PAYLOAD} with returnValues or returnMetadata "all", got ${topK}`);
    }
    const query = toFloat32(operation, vector, this.#dimensions, "query vector");
    const namespace = opts.namespace ?? null;
    if (namespace !== null) checkText(operation, namespace, "namespace", MAX_NAMESPACE_BYTES);
    const filter = opts.filter ?? null;
    if (filter !== null) validateFilter(filter, this.#indexed);
    const queryNorm = norm(query);
    const scored = [];
    for (const record of this.#vectors.values()) {
      if (namespace !== null && record.namespace !== namespace) continue;
      if (filter !== null && !matchesFilter(record.metadata, filter)) continue;
      let dot = 0;
      for (let i = 0; i < query.length; i++) dot += query[i] * record.values[i];
      const denominator = queryNorm * record.norm;
      const score = denominator > 0 ? Math.max(-1, Math.min(1, dot / denominator)) : 0;
      scored.push({ record, score });
    }
    scored.sort((a, b) => b.score - a.score || (a.record.id < b.record.id ? -1 : a.record.id > b.record.id ? 1 : 0));
    const matches = scored.slice(0, topK).map(({ record, score }) => {
      const match = { id: record.id, score };
      if (record.namespace !== null) match.namespace = record.namespace;
      if (returnValues) match.values = Array.from(record.values);
      if (returnMetadata === "all") match.metadata = structuredClone(record.metadata);
      if (returnMetadata === "indexed") {
        match.metadata = Object.fromEntries(
          Object.entries(record.metadata).filter(([key]) => !this.#indexed || this.#indexed.has(key)),
        );
      }
      return match;
    });
    return { count: matches.length, matches };
  }

  async queryById(id, options = {}) {
    const record = this.#vectors.get(id);
    if (!record) return { count: 0, matches: [] };
    return this.query(Array.from(record.values), options);
  }

  async getByIds(ids) {
    this.calls.getByIds++;
    if (!Array.isArray(ids)) fail("VECTOR_GET_ERROR", "ids must be a list");
    return ids
      .filter((id) => this.#vectors.has(id))
      .map((id) => {
        const record = this.#vectors.get(id);
        const out = { id, values: Array.from(record.values), metadata: structuredClone(record.metadata) };
        if (record.namespace !== null) out.namespace = record.namespace;
        return out;
      });
  }

  async deleteByIds(ids) {
    this.calls.deleteByIds++;
    if (!Array.isArray(ids)) fail("VECTOR_DELETE_ERROR", "ids must be a list");
    if (ids.length > MAX_BATCH) fail("VECTOR_DELETE_ERROR", `at most ${MAX_BATCH} ids per call`);
    for (const id of ids) this.#vectors.delete(id);
    mutationCounter++;
    return { mutationId: `fake-${mutationCounter}` };
  }
}

export function createFakeVectorize(options) {
  return new VectorizeIndexImpl(options);
}
