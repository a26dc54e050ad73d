// A local stand-in for the Workers AI binding (`env.AI`), for the Pyodide test layer.
//
// Why a fake: Workers AI is remote only. This class answers `run(model, inputs)` with the shapes
// the hosted models return, deterministically and offline:
//
//   * text-embedding models (`@cf/baai/bge-*`, `@cf/google/embeddinggemma-300m`, ...):
//     inputs {text: string | string[]} (≤ 100 texts) → {shape: [n, dims], data: number[][],
//     pooling: "mean"}; the vectors are hashed character trigrams, L2-normalised, so texts that
//     share fragments are close (a test signal, not a semantic model);
//   * text-generation models (anything else under `@cf/`): inputs {prompt} or {messages} →
//     {response: string, usage}; the response is a fixed, recognisable echo of the last message;
//   * the reranker `@cf/baai/bge-reranker-base`: inputs {query, contexts: [{text}], top_k} →
//     {response: [{id, score}]}, best first, at most top_k rows; the score is the share of the
//     query's words the context holds (folded), plus a little for earlier contexts on ties.
//
// Every call is recorded in `calls` ({model, kind, count}), so a test can assert, for instance,
// that a package embedded with a local model never reaches AI.

export const EMBEDDING_MODELS = {
  "@cf/baai/bge-small-en-v1.5": 384,
  "@cf/baai/bge-base-en-v1.5": 768,
  "@cf/baai/bge-large-en-v1.5": 1024,
  "@cf/baai/bge-m3": 1024,
  "@cf/google/embeddinggemma-300m": 768,
  "@cf/qwen/qwen3-embedding-0.6b": 1024,
  "@cf/pfnet/plamo-embedding-1b": 2048,
};

const MAX_TEXTS = 100;
export const RERANK_MODELS = new Set(["@cf/baai/bge-reranker-base"]);

function fold(text) {
  return text
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, " ")
    .trim();
}

function fnv1a(text) {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

export function fakeEmbedding(text, dimensions) {
  const values = new Array(dimensions).fill(0);
  for (const word of fold(text).split(" ").filter(Boolean)) {
    const padded = ` ${word} `;
    for (let i = 0; i + 3 <= padded.length; i++) {
      const bucket = fnv1a(padded.slice(i, i + 3));
      values[bucket % dimensions] += bucket & 0x80000000 ? 1 : -1;
    }
  }
  const length = Math.sqrt(values.reduce((sum, v) => sum + v * v, 0)) || 1;
  return values.map((v) => v / length);
}

function aiError(message) {
  const error = new Error(`AiError: ${message}`);
  error.name = "AiError";
  return error;
}

export class Ai {
  #embeddingModels;

  constructor({ embeddingModels = {} } = {}) {
    this.#embeddingModels = { ...EMBEDDING_MODELS, ...embeddingModels };
    this.calls = [];
  }

  async run(model, inputs, _options) {
    if (typeof model !== "string" || !model.startsWith("@cf/")) {
      throw aiError(`No such model ${model}`);
    }
    if (inputs === null || typeof inputs !== "object") throw aiError("inputs must be an object");
    const dimensions = this.#embeddingModels[model];
    if (dimensions !== undefined) {
      const texts = typeof inputs.text === "string" ? [inputs.text] : inputs.text;
      if (!Array.isArray(texts) || texts.length === 0 || texts.some((t) => typeof t !== "string")) {
        throw aiError(`${model}: inputs.text must be a string or a non-empty list of strings`);
      }
      if (texts.length > MAX_TEXTS) throw aiError(`${model}: at most ${MAX_TEXTS} texts per call`);
      this.calls.push({ model, kind: "embedding", count: texts.length });
      return {
        shape: [texts.length, dimensions],
        data: texts.map((t) => fakeEmbedding(t, dimensions)),
        pooling: "mean",
      };
    }
    if (RERANK_MODELS.has(model)) return this.#rerank(model, inputs);
    if (/embed|bge/i.test(model)) throw aiError(`No such model ${model}`);
    let last = "";
    if (Array.isArray(inputs.messages) && inputs.messages.length > 0) {
      last = String(inputs.messages[inputs.messages.length - 1].content ?? "");
    } else if (typeof inputs.prompt === "string") {
      last = inputs.prompt;
    } else {
      throw aiError(`${model}: inputs need "prompt" or "messages"`);
    }
    this.calls.push({ model, kind: "generation", count: 1 });
    return {
      response: `[fake ${model}] ${last.slice(0, 200)}`,
      usage: { prompt_tokens: Math.ceil(last.length / 4), completion_tokens: 16, total_tokens: 16 },
    };
  }

  #rerank(model, inputs) {
    const { query, contexts } = inputs;
    if (typeof query !== "string" || !Array.isArray(contexts) || contexts.length === 0) {
      throw aiError(`${model}: inputs need "query" and a non-empty "contexts" list`);
    }
    if (contexts.some((c) => c === null || typeof c !== "object" || typeof c.text !== "string")) {
      throw aiError(`${model}: each context must be {text: string}`);
    }
    const topK = inputs.top_k ?? contexts.length;
    const words = new Set(fold(query).split(" ").filter(Boolean));
    const scored = contexts.map((c, id) => {
      const held = new Set(fold(c.text).split(" "));
      const share = words.size ? [...words].filter((w) => held.has(w)).length / words.size : 0;
      return { id, score: share + 1e-3 / (id + 1) };
    });
    scored.sort((a, b) => b.score - a.score);
    this.calls.push({ model, kind: "rerank", count: contexts.length });
    return { response: scored.slice(0, topK) };
  }
}

export function createFakeAi(options) {
  return new Ai(options);
}
