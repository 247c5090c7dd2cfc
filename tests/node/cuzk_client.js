// A Node.js service using cuzk-tasks by name with celery-node (tools/node), as
// docs/client.md "Other languages" says: submit, status, result, cancel, an on_done callback
// consumed by a celery-node worker, and the proofs verified with snarkjs.
// Usage: node cuzk_client.js BROKER_URL RESULT_BACKEND_URL VKEY_JSON INPUT_JSON
// Prints one JSON line of what it saw; exits non-zero on any failure.
"use strict";
const path = require("path");
const fs = require("fs");
const modules = path.join(__dirname, "..", "..", "tools", "node", "node_modules");
const celery = require(path.join(modules, "celery-node"));
const snarkjs = require(path.join(modules, "snarkjs"));

const [broker, backend, vkeyPath, inputPath] = process.argv.slice(2);
const vkey = JSON.parse(fs.readFileSync(vkeyPath, "utf8"));
const input = JSON.parse(fs.readFileSync(inputPath, "utf8"));
const REPLY_MS = 30000;

const client = celery.createClient(broker, backend, "cuzk.cpu");
function call(task, kwargs) {  // a by-name request; its reply, or the worker's refusal
  return client.createTask(task).applyAsync([], kwargs).get(REPLY_MS);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const out = {};
  // the service's callback: a celery-node worker of our own queue
  const callbacks = [];
  const worker = celery.createWorker(broker, backend, "svc.callbacks");
  worker.register("svc.job_done", (kwargs) => { callbacks.push(kwargs); return "ok"; });
  worker.start();

  const jobId = await call("cuzk.submit", {
    circuit: "mulchain", partitions: [{input}, {input}],
    on_done: {task: "svc.job_done", queue: "svc.callbacks"}});
  out.job_id = jobId;
  out.first_status = (await call("cuzk.status", {job_id: jobId})).state;

  let result;
  for (let i = 0; i < 120; i++) {
    result = await call("cuzk.result", {job_id: jobId});
    if (result.state !== "pending" && result.state !== "running") break;
    await sleep(500);
  }
  out.result_state = result.state;
  out.verified = [];
  for (const item of result.proofs || []) {
    out.verified.push(await snarkjs.groth16.verify(vkey, item.public, item.proof));
  }

  for (let i = 0; i < 60 && !callbacks.some((c) => c.job_id === jobId); i++) await sleep(500);
  const cb = callbacks.find((c) => c.job_id === jobId);
  out.callback = cb ? {state: cb.state, proofs: (cb.proofs || []).length} : null;

  // cancel by name: a job still running, cancelled; again: idempotent
  const doomed = await call("cuzk.submit", {circuit: "slow", partitions: Array(4).fill({input})});
  out.cancel = await call("cuzk.cancel", {job_id: doomed, reason: "node client test"});
  out.cancel_again = await call("cuzk.cancel", {job_id: doomed});

  // what cannot succeed is refused at submit: the reply is the worker's error
  try {
    await call("cuzk.submit", {circuit: "nope", partitions: [{input}]});
    out.refusal = null;
  } catch (err) {  // Celery's JSON form of the worker's exception: exc_type, exc_message
    out.refusal = {type: err.exc_type, message: [].concat(err.exc_message).join(" ")};
  }
  console.log(JSON.stringify(out));
  await client.disconnect();
  process.exit(0);
}

main().catch((err) => { console.error(err && err.stack || err); process.exit(1); });
