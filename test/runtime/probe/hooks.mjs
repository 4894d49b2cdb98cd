// Module hooks of the probe (registered by probe.mjs with module.register): every module the
// ESM loader loads is appended to the log file, one URL a line, before it is evaluated.
import { appendFileSync } from 'node:fs';

let log;

export function initialize(data) {
  log = data.log;
}

export async function load(url, context, nextLoad) {
  appendFileSync(log, `${url}\n`);
  return nextLoad(url, context);
}
