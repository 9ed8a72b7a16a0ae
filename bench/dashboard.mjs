// Page render time and bytes in headless Chromium next to the same data fetched as JSON, in one
// run (bench/dashboard.sh). Usage: node dashboard.mjs BASE_URL CASCADE_JOB_ID RUNS
import {createRequire} from 'node:module';
const require = createRequire(new URL('../tests/browser/package.json', import.meta.url));
const puppeteer = require('puppeteer-core');

const [base, cascade, runsArg] = process.argv.slice(2);
const runs = Number(runsArg || 5);
const browser = await puppeteer.launch({executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
                                        args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage']});

// Time from navigation to the page saying its data is rendered, and bytes over the wire.
async function page(url) {
  const p = await browser.newPage();
  await p.setViewport({width: 1400, height: 900});
  const cdp = await p.createCDPSession();
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', {cacheDisabled: true});
  let bytes = 0;
  cdp.on('Network.loadingFinished', (e) => { bytes += e.encodedDataLength; });
  const t0 = performance.now();
  await p.goto(url, {waitUntil: 'load'});
  await p.waitForSelector('body[data-ready="1"]', {timeout: 120000});
  const ms = performance.now() - t0;
  await p.close();
  return {ms, bytes};
}

// The same data as JSON, fetched and parsed by the browser (no rendering).
async function json(url) {
  const p = await browser.newPage();
  await p.goto(new URL('/healthz', url).href);  // same origin as the data
  const r = await p.evaluate(async (u) => {
    const t0 = performance.now();
    const res = await fetch(u, {cache: 'no-store'});
    const text = await res.text();
    JSON.parse(text);
    return {ms: performance.now() - t0, bytes: text.length};
  }, url);
  await p.close();
  return r;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function measure(name, ui, api) {
  const u = [], a = [];
  let ub = 0, ab = 0;
  for (let i = 0; i < runs; ++i) {
    const x = await page(ui); u.push(x.ms); ub = x.bytes;
    const y = await json(api); a.push(y.ms); ab = y.bytes;
  }
  const um = median(u), am = median(a);
  console.log(`${name.padEnd(28)} page ${um.toFixed(0).padStart(6)} ms ${String(ub).padStart(10)} B   ` +
              `json ${am.toFixed(0).padStart(6)} ms ${String(ab).padStart(10)} B   ratio page/json ${(um / am).toFixed(2)}`);
}

await measure('jobs page (100,000 jobs)', `${base}/ui/`, `${base}/jobs?state=failed&limit=50`);
await measure('job page (1,024-node cascade)', `${base}/ui/jobs/${cascade}`, `${base}/jobs/${cascade}/diagnosis`);
await browser.close();
