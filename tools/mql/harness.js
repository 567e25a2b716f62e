#!/usr/bin/env node
// Runs the cases mongodb/mql_test.go writes (one canonical Extended JSON
// document per line) with mingo, an independent implementation of
// MongoDB's query language, and writes one result per line, in canonical
// Extended JSON, for the Go test to compare with its own evaluator.
//
//   node harness.js cases.jsonl results.jsonl
//   node harness.js --serve   (a case a line on stdin, its result on stdout)
//
// A case is {name, kind: "aggregate" | "find" | "update", docs: [...],
// colls: {name: [...]}, pipeline, filter, projection, sort, update,
// upsert, now, native}; a result {name, docs: [...], matched, dupKey}
// or {name, error}.
//
// The adapter: where mingo lacks something the server has, and only there.
//  - Numbers. mingo has one number type; the server has int, long and
//    double. Inputs are converted to JS numbers, and each input document
//    keeps its typed twin (WeakMap). $type and $bsonSize take a number's
//    BSON type from the twin when their argument is a path of an input
//    document ("$a.b", or "$$v.k" of a variable bound to one, including
//    the {k, v} documents $objectToArray makes of one); a computed number
//    is an int when whole and within int32, a long when whole, else a
//    double.
//  - $type names BSON types: mingo says "objectid" and "bsonsymbol" and
//    decides int/long/double by value.
//  - $bsonSize: missing in mingo; the bson package's calculateObjectSize
//    of the typed value.
//  - Symbols are strings (the server compares a symbol as the string);
//    $type still says "symbol" through the twin.
//  - $$NOW: replaced by {$literal: now} in the statement, the one value the
//    server binds for a whole statement.
//  - upsert: mingo's updateOne has none; on no match the seed document is
//    the filter's top-level equality fields (dotted ones nested), a
//    duplicate _id is the server's duplicate key error, and the update
//    runs on the seed.
//  - Where mingo differs from the server (each found by make test-mql and
//    checked against the server's source or docs), the operator is
//    replaced: see replacements, each with the mingo behaviour it works
//    around and a probe in mongodb/mql_probe_test.go that fails once
//    mingo gets it right.
//  - Types out: an update's own values keep their BSON type; other
//    values take their input's (writtenValues, retype).
//  - Output: a missing field is left out (EJSON.stringify would write
//    null).
"use strict";

const fs = require("fs");
const { EJSON, BSON, ObjectId, Timestamp, Int32, Double, Long, BSONSymbol } = require("bson");
const { Context, evalExpr } = require("mingo/core");
const { Query } = require("mingo/query");
const { Aggregator } = require("mingo/aggregator");
const { updateOne } = require("mingo/updater");
const { Lazy } = require("mingo/lazy");
const { compare, resolve } = require("mingo/util");
const accumulatorOperators = require("mingo/operators/accumulator");
const expressionOperators = require("mingo/operators/expression");
const pipelineOperators = require("mingo/operators/pipeline");
const projectionOperators = require("mingo/operators/projection");
const queryOperators = require("mingo/operators/query");

// twins maps each plain object or array made from an input to its typed
// original.
let twins = new WeakMap();

function isPlainObject(v) {
  return v !== null && typeof v === "object" && v.constructor === Object;
}

// toPlain converts a typed value (EJSON.parse, relaxed: false) to what
// mingo computes on, remembering the typed twin of every object and array.
function toPlain(v) {
  if (v instanceof Int32 || v instanceof Double) return v.valueOf();
  if (v instanceof Timestamp) return v; // a Long underneath: kept as is
  if (v instanceof Long) return v.toNumber();
  if (v instanceof BSONSymbol) return v.valueOf();
  if (Array.isArray(v)) {
    const out = v.map(toPlain);
    twins.set(out, v);
    return out;
  }
  if (isPlainObject(v)) {
    const out = {};
    for (const k of Object.keys(v)) out[k] = toPlain(v[k]);
    twins.set(out, v);
    return out;
  }
  return v; // null, string, boolean, Date, ObjectId, Timestamp, ...
}

// typeOfTyped is the BSON type name of a typed value; a plain number is
// typed by defaultNumber.
function typeOfTyped(v) {
  if (v === undefined) return "missing";
  if (v === null) return "null";
  if (v instanceof Int32) return "int";
  if (v instanceof Long) return "long";
  if (v instanceof Double) return "double";
  if (v instanceof BSONSymbol) return "symbol";
  if (v instanceof ObjectId) return "objectId";
  if (v instanceof Timestamp) return "timestamp";
  if (v instanceof Date) return "date";
  if (Array.isArray(v)) return "array";
  switch (typeof v) {
    case "string":
      return "string";
    case "boolean":
      return "bool";
    case "number":
      return typeOfTyped(defaultNumber(v));
  }
  if (isPlainObject(v)) return "object";
  throw new Error("no BSON type for " + String(v));
}

function defaultNumber(n) {
  if (Number.isInteger(n) && n >= -2147483648 && n <= 2147483647) return new Int32(n);
  if (Number.isInteger(n)) return Long.fromNumber(n);
  return new Double(n);
}

// typed returns the typed form of a plain value: its twin, else built
// from its parts, numbers by defaultNumber.
function typed(v) {
  if (v !== null && typeof v === "object" && twins.has(v)) return twins.get(v);
  if (typeof v === "number") return defaultNumber(v);
  if (Array.isArray(v)) return v.map(typed);
  if (isPlainObject(v)) {
    const out = {};
    for (const k of Object.keys(v)) out[k] = typed(v[k]);
    return out;
  }
  return v;
}

// walkTyped follows a dotted path through typed documents; undefined when
// it leaves them (an array on the way: the caller uses mingo's value).
function walkTyped(v, path) {
  for (const p of path) {
    if (!isPlainObject(v)) return { ok: Array.isArray(v) ? false : true, v: undefined };
    v = v[p];
  }
  return { ok: true, v };
}

// variable returns the value mingo binds to $$name for obj.
function variable(name, obj, options) {
  const local = options.local && options.local.variables;
  if (local && Object.prototype.hasOwnProperty.call(local, name)) return local[name];
  if (name === "this") return obj;
  return options.variables && options.variables[name];
}

// typedEval evaluates expr as mingo does, but returns the typed value when
// expr is a path of an input document (see the adapter notes above).
function typedEval(obj, expr, options) {
  if (typeof expr === "string" && expr.startsWith("$") && !expr.startsWith("$$")) {
    const root = options.local && options.local.root;
    if (root && twins.has(root)) {
      const r = walkTyped(twins.get(root), expr.slice(1).split("."));
      if (r.ok) return r.v;
    }
  } else if (typeof expr === "string" && expr.startsWith("$$") && !/^\$\$(ROOT|CURRENT|NOW|REMOVE)\b/.test(expr)) {
    const [name, ...path] = expr.slice(2).split(".");
    const base = variable(name, obj, options);
    if (base !== null && typeof base === "object" && twins.has(base)) {
      const r = walkTyped(twins.get(base), path);
      if (r.ok) return r.v;
    }
  } else if (isPlainObject(expr) && !Object.keys(expr).some((k) => k.startsWith("$"))) {
    const out = {};
    for (const k of Object.keys(expr)) {
      const v = typedEval(obj, expr[k], options);
      if (v !== undefined) out[k] = v;
    }
    return out;
  }
  return typed(evalExpr(obj, expr, options));
}

const adapter = {
  $type(obj, expr, options) {
    return typeOfTyped(typedEval(obj, expr, options));
  },
  $bsonSize(obj, expr, options) {
    const v = typedEval(obj, expr, options);
    if (v === undefined || v === null) return null;
    if (!isPlainObject(v)) throw new Error("$bsonSize requires a document, not " + typeOfTyped(v));
    const n = BSON.calculateObjectSize(v);
    // bson 6.10 counted an Int32 as a document (24 bytes for {v: 5}):
    // hold the size function to the serializer's bytes.
    if (n !== BSON.serialize(v).length) throw new Error(`calculateObjectSize ${n} != serialized ${BSON.serialize(v).length}`);
    return n;
  },
  $objectToArray(obj, expr, options) {
    const out = expressionOperators.$objectToArray(obj, expr, options);
    const input = evalExpr(obj, expr, options); // the same object mingo converted: its twin types the values
    if (Array.isArray(out) && input !== null && typeof input === "object" && twins.has(input)) {
      const t = twins.get(input);
      for (const kv of out) twins.set(kv, { k: kv.k, v: t[kv.k] });
    }
    return out;
  },
};

// bsonCompare orders values as the server does where mingo does not:
// documents field by field in their stored order (the value's type, the
// field name, the value), where mingo compares the sorted field names
// first; arrays element by element (for equality). Everything else is
// mingo's compare.
function bsonCompare(a, b) {
  if (isPlainObject(a) && isPlainObject(b)) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    for (let i = 0; i < ka.length && i < kb.length; i++) {
      const ta = typeRank(a[ka[i]]);
      const tb = typeRank(b[kb[i]]);
      if (ta !== tb) return ta < tb ? -1 : 1;
      if (ka[i] !== kb[i]) return ka[i] < kb[i] ? -1 : 1;
      const c = bsonCompare(a[ka[i]], b[kb[i]]);
      if (c !== 0) return c;
    }
    return Math.sign(ka.length - kb.length);
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < a.length && i < b.length; i++) {
      const c = bsonCompare(a[i], b[i]);
      if (c !== 0) return c;
    }
    return Math.sign(a.length - b.length);
  }
  return Math.sign(compare(unbox(a), unbox(b)));
}

// isTypedNumber: an update's own values keep their BSON number type
// (writtenValues), so what a write stores can be checked.
function isTypedNumber(v) {
  return v instanceof Int32 || v instanceof Double || (v instanceof Long && !(v instanceof Timestamp));
}

function unbox(v) {
  if (v instanceof Long && !(v instanceof Timestamp)) return v.toNumber();
  return isTypedNumber(v) ? v.valueOf() : v;
}

// typeRank is the server's canonical type order (bsontypes.h
// canonicalizeBSONType) for the types the cases hold.
function typeRank(v) {
  if (v === undefined || v === null) return 5;
  if (typeof v === "number" || isTypedNumber(v)) return 10;
  if (typeof v === "string") return 15;
  if (Array.isArray(v)) return 25;
  if (isPlainObject(v)) return 20;
  if (v instanceof ObjectId) return 35;
  if (typeof v === "boolean") return 40;
  if (v instanceof Date) return 45;
  if (v instanceof Timestamp) return 47;
  throw new Error("no canonical type for " + String(v));
}

// sortCompare is bsonCompare for two documents, else mingo's compare,
// with a missing value equal to null as the server sorts it (mingo puts
// missing first).
function sortCompare(a, b) {
  if (a === undefined) a = null;
  if (b === undefined) b = null;
  return isPlainObject(a) && isPlainObject(b) ? bsonCompare(a, b) : Math.sign(compare(a, b));
}

// exprCompare orders values as the aggregation comparisons do: different
// types by the BSON comparison order, missing before null. mingo applies
// a query's type bracketing to $lt, $lte, $gt and $gte, so there
// {$lte: [<missing>, <date>]} is false; the server says true.
function exprCompare(a, b) {
  const ra = a === undefined ? 0 : typeRank(a);
  const rb = b === undefined ? 0 : typeRank(b);
  if (ra !== rb) return ra < rb ? -1 : 1;
  return sortCompare(a, b);
}

function comparison(test) {
  return (obj, expr, options) => {
    const [a, b] = evalExpr(obj, expr, options);
    return test(exprCompare(a, b));
  };
}

// queryPathValues returns the values a query path reaches in v: through
// documents, and through arrays both to the element a numeric component
// indexes and into every element that is a document.
function queryPathValues(v, path) {
  if (path.length === 0) return [v];
  if (isPlainObject(v)) {
    return Object.prototype.hasOwnProperty.call(v, path[0]) ? queryPathValues(v[path[0]], path.slice(1)) : [];
  }
  if (Array.isArray(v)) {
    const out = [];
    if (/^\d+$/.test(path[0]) && Number(path[0]) < v.length) out.push(...queryPathValues(v[Number(path[0])], path.slice(1)));
    for (const el of v) if (isPlainObject(el)) out.push(...queryPathValues(el, path));
    return out;
  }
  return [];
}

// $exists by queryPathValues: mingo resolves a path ending in a number as
// an index into the values reached, so {"a.b.2": {$exists: true}} matched
// {a: [{b: {"1": 0}}]}, which has no field "2".
function existsQuery(selector, value) {
  const path = selector.split(".");
  return (o) => (queryPathValues(o, path).length > 0) === !!value;
}

// $sort comparing the whole sort key, each field by sortCompare (stable,
// as mingo's). mingo sorts by one field at a time, grouping the documents
// by that field's value, so documents whose values differ but compare
// equal (["b"] and "b") are never interleaved by the next field.
function sortStage(coll, sortKeys, options) {
  const keys = Object.keys(sortKeys);
  return coll.transform((xs) => {
    const out = xs.slice();
    out.sort((x, y) => {
      for (const k of keys) {
        const c = sortCompare(resolve(x, k), resolve(y, k)) * (sortKeys[k] < 0 ? -1 : 1);
        if (c !== 0) return c;
      }
      return 0;
    });
    return Lazy(out);
  });
}

// $min with bsonCompare; null and missing are ignored.
function minAccumulator(coll, expr, options) {
  let min = null;
  for (const root of coll) {
    const v = evalExpr(root, expr, options.constructor.init(options).update({ root }));
    if (v === undefined || v === null) continue;
    if (min === null || sortCompare(v, min) < 0) min = v;
  }
  return min;
}

// addToSet applies {$addToSet: {path: value | {$each: [...]}}} to doc as
// the server's AddToSetNode does: the values deduplicated among
// themselves, then each appended unless an element equals it (by
// bsonCompare: numbers by value, documents field by field in order); a
// missing field becomes the deduplicated array. mingo's $addToSet
// compares documents ignoring their field order, does not deduplicate
// $each into a missing field, and adds nothing when the array already
// holds two equal elements.
function addToSet(doc, spec) {
  for (const path of Object.keys(spec)) {
    const val = spec[path];
    const each = isPlainObject(val) && Object.keys(val)[0] === "$each" ? val.$each : [val];
    const values = [];
    for (const v of each) if (!values.some((x) => bsonCompare(x, v) === 0)) values.push(v);
    const parts = path.split(".");
    let parent = doc;
    for (const p of parts.slice(0, -1)) {
      if (parent[p] === undefined) parent[p] = {};
      if (!isPlainObject(parent[p])) throw new Error("Cannot create field in " + p);
      parent = parent[p];
    }
    const last = parts[parts.length - 1];
    const cur = parent[last];
    if (cur === undefined) {
      parent[last] = values;
    } else if (!Array.isArray(cur)) {
      throw new Error("Cannot apply $addToSet to non-array field " + path);
    } else {
      for (const v of values) if (!cur.some((x) => bsonCompare(x, v) === 0)) cur.push(v);
    }
  }
}

// applyUpdate runs an update on docs[0..] matching filter (the first),
// $addToSet by the adapter, everything else by mingo.
function applyUpdate(docs, filter, update, options) {
  if (isPlainObject(update) && update.$addToSet && !options.native.includes("$addToSet")) {
    const { $addToSet, ...rest } = update;
    const q = new Query(filter, options);
    const i = docs.findIndex((d) => q.test(d));
    if (i < 0) return 0;
    if (Object.keys(rest).length > 0) updateOne([docs[i]], {}, rest, {}, options);
    addToSet(docs[i], $addToSet);
    return 1;
  }
  return updateOne(docs, filter, update, {}, options).matchedCount;
}

// replacements are the operators the harness runs instead of mingo's,
// each named for TestMQLReplacementsStillDiffer (mongodb/mql_probe_test.go):
// a case's native list turns them off, and that test fails once mingo's
// own operator agrees with the server, so the replacement can go. The
// mingo behaviour each works around (mingo 7.2.7, the newest):
//  - compare: $lt/$lte/$gt/$gte apply a query's type bracketing, so
//    {$lte: [<missing>, <date>]} and {$gt: ["a", 5]} are false (exprCompare);
//  - $sort: sorts by one field at a time, grouping the documents by its
//    value, so values that differ but compare equal (["b"] and "b") are
//    never ordered by the next field; the server compares the whole key
//    (sortStage); documents by sorted field names (bsonCompare);
//  - $min: compares documents by sorted field names, not in stored order;
//  - $push: pushes null for a missing value and for $$REMOVE;
//  - $exists: a path ending in a number indexes into the values reached
//    ({"a.b.2": {$exists: true}} matches {a: [{b: {"1": 0}}]});
//  - $addToSet: ignores documents' field order, does not deduplicate
//    $each into a missing field, adds nothing to an array already holding
//    two equal elements;
//  - $type: says "objectid", "bsonsymbol" and types numbers by value
//    (with $bsonSize and $objectToArray: numbers keep their BSON type).
const replacements = {
  compare: {
    expression: {
      $lt: comparison((c) => c < 0),
      $lte: comparison((c) => c <= 0),
      $gt: comparison((c) => c > 0),
      $gte: comparison((c) => c >= 0),
    },
  },
  $sort: { pipeline: { $sort: sortStage } },
  $min: { accumulator: { $min: minAccumulator } },
  $push: { accumulator: { $push: pushSkippingMissing } },
  $exists: { query: { $exists: existsQuery } },
  $type: { expression: adapter },
};

function context(native) {
  const ops = {
    accumulator: { ...accumulatorOperators },
    expression: { ...expressionOperators },
    pipeline: { ...pipelineOperators },
    projection: { ...projectionOperators },
    query: { ...queryOperators },
  };
  for (const name of Object.keys(replacements)) {
    if (native && native.includes(name)) continue;
    for (const kind of Object.keys(replacements[name])) Object.assign(ops[kind], replacements[name][kind]);
  }
  return Context.init(ops);
}

// pushSkippingMissing is $push as the server runs it: a missing value is
// not pushed (mingo pushes null).
function pushSkippingMissing(coll, expr, options) {
  const out = [];
  for (const root of coll) {
    // As mingo's own $push evaluates (options is its ComputeOptions).
    const v = evalExpr(root, expr, options.constructor.init(options).update({ root }));
    if (v !== undefined) out.push(v);
  }
  return out;
}

// bindNow replaces "$$NOW" by {$literal: now}.
function bindNow(v, now) {
  if (v === "$$NOW") return { $literal: now };
  if (Array.isArray(v)) return v.map((x) => bindNow(x, now));
  if (isPlainObject(v)) {
    const out = {};
    for (const k of Object.keys(v)) out[k] = bindNow(v[k], now);
    return out;
  }
  return v;
}

// upsertSeed is the document an upsert inserts before applying the
// update: the filter's equality fields.
function upsertSeed(filter) {
  const seed = {};
  for (const k of Object.keys(filter)) {
    if (k.startsWith("$")) continue;
    const v = filter[k];
    if (isPlainObject(v) && Object.keys(v).length > 0 && Object.keys(v)[0].startsWith("$")) continue;
    const path = k.split(".");
    let cur = seed;
    for (const p of path.slice(0, -1)) {
      if (!isPlainObject(cur[p])) cur[p] = {};
      cur = cur[p];
    }
    cur[path[path.length - 1]] = v;
  }
  return seed;
}

// sameId: the unique _id index compares by value (5 and NumberLong(5)
// collide).
function sameId(a, b) {
  return bsonCompare(a, b) === 0;
}

// run runs case c (its numbers plain); typedUpdate is its update with
// the values it writes still typed.
function run(c, typedUpdate) {
  const native = c.native || [];
  const options = {
    native,
    context: context(native),
    collectionResolver: (name) => (c.colls && c.colls[name] ? c.colls[name] : []),
  };
  const docs = c.docs || [];
  switch (c.kind) {
    case "aggregate":
      return { docs: new Aggregator(c.pipeline, options).run(docs) };
    case "find": {
      if (!c.sort) return { docs: new Query(c.filter, options).find(docs, c.projection).all() };
      // filter, sort (the adapter's), then project
      const matched = new Query(c.filter, options).find(docs).all();
      const sorted = new Aggregator([{ $sort: c.sort }], options).run(matched);
      return { docs: new Query({}, options).find(sorted, c.projection).all() };
    }
    case "update": {
      const filter = bindNow(c.filter, c.now);
      const update = bindNow(typedUpdate === undefined ? c.update : typedUpdate, c.now);
      const matched = applyUpdate(docs, filter, update, options);
      if (matched > 0 || !c.upsert) return { docs, matched, dupKey: false };
      const seed = upsertSeed(filter);
      if (docs.some((d) => sameId(d._id, seed._id))) return { docs, matched: 0, dupKey: true };
      const inserted = [seed];
      applyUpdate(inserted, {}, update, options);
      return { docs: docs.concat(inserted), matched: 0, dupKey: false };
    }
  }
  throw new Error("unknown kind " + c.kind);
}

// dropMissing removes the fields whose value is undefined (mingo's
// missing), which EJSON.stringify would write as null; in an array a
// missing value is null, as the server makes it.
function dropMissing(v) {
  if (v === undefined) return null;
  if (Array.isArray(v)) return v.map(dropMissing);
  if (isPlainObject(v)) {
    const out = {};
    for (const k of Object.keys(v)) if (v[k] !== undefined) out[k] = dropMissing(v[k]);
    return out;
  }
  return v;
}

// writtenValues converts an update to what mingo computes on, except the
// values it writes: those of $set and $addToSet in an update document,
// and every $literal of a pipeline, keep their BSON number type, so the
// documents an update leaves show the types it wrote.
function writtenValues(u, native) {
  if (Array.isArray(u)) return u.map(keepLiterals);
  if (!isPlainObject(u)) return toPlain(u);
  const out = {};
  for (const op of Object.keys(u)) {
    // mingo's own $addToSet compares plain values only
    const typed = op === "$set" || (op === "$addToSet" && !native.includes("$addToSet"));
    out[op] = typed ? u[op] : toPlain(u[op]);
  }
  return out;
}

function keepLiterals(v) {
  if (isPlainObject(v) && Object.keys(v).length === 1 && "$literal" in v) return v;
  if (Array.isArray(v)) return v.map(keepLiterals);
  if (isPlainObject(v)) {
    const out = {};
    for (const k of Object.keys(v)) out[k] = keepLiterals(v[k]);
    return out;
  }
  return toPlain(v);
}

// retype gives a result the BSON types the server would keep: a typed
// number as it is; a plain number or string as its input's twin (t, or
// the twin of the object holding it) when the value is unchanged, else a
// number by defaultNumber. An object without a twin (a projection's copy
// of an input document) takes that of the input document of the same
// _id holding all its fields (source).
function retype(v, t, source) {
  if (typeof v === "number") {
    if (isTypedNumber(t) && unbox(t) === v) return t;
    return defaultNumber(v);
  }
  if (typeof v === "string" && t instanceof BSONSymbol && t.valueOf() === v) return t;
  if (Array.isArray(v)) {
    const tw = twins.get(v) || (Array.isArray(t) ? t : undefined);
    return v.map((x, i) => retype(x, tw && tw[i], source));
  }
  if (isPlainObject(v)) {
    const tw = twins.get(v) || (isPlainObject(t) ? t : undefined) || source(v);
    const out = {};
    for (const k of Object.keys(v)) out[k] = retype(v[k], tw && tw[k], source);
    return out;
  }
  return v;
}

// sourceOf returns the source function of retype over a case's inputs.
function sourceOf(c) {
  const inputs = (c.docs || []).concat(...Object.values(c.colls || {}));
  return (v) => {
    if (!("_id" in v)) return undefined;
    const d = inputs.find((x) => isPlainObject(x) && sortCompare(x._id, v._id) === 0 && Object.keys(v).every((k) => k in x));
    return d && twins.get(d);
  };
}

// answer runs one line of input and returns one line of output.
function answer(line) {
  const typedCase = EJSON.parse(line, { relaxed: false });
  twins = new WeakMap();
  const c = toPlain(typedCase);
  const source = sourceOf(c); // the inputs before an update replaces them
  let res;
  try {
    res = run(c, typedCase.update === undefined ? undefined : writtenValues(typedCase.update, c.native || []));
    if (res.docs) res.docs = res.docs.map((d) => retype(d, undefined, source));
  } catch (e) {
    res = { error: String(e && e.message ? e.message : e) };
  }
  return EJSON.stringify(dropMissing({ name: c.name, ...res }), { relaxed: false });
}

// main: `harness.js in out` answers a file of cases; `harness.js
// --serve` answers stdin line by line, one line each, as they come.
function main() {
  const args = process.argv.slice(2);
  if (args[0] === "--serve") {
    const rl = require("readline").createInterface({ input: process.stdin, crlfDelay: Infinity });
    rl.on("line", (line) => {
      if (line.length > 0) process.stdout.write(answer(line) + "\n");
    });
    return;
  }
  const [input, output] = args;
  const lines = fs.readFileSync(input, "utf8").split("\n").filter((l) => l.length > 0);
  fs.writeFileSync(output, lines.map(answer).join("\n") + "\n");
}

if (require.main === module) main();
module.exports = { run, toPlain, context };
