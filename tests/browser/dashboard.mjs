// Drives Debian's Chromium (headless, DevTools protocol through puppeteer-core) over the
// dashboard of a real faultline-aggregator and over an offline `--html` report, and checks what a
// person would see. Usage: node dashboard.mjs PLAN.json
//
// PLAN (written by tests/aggregator/core/dashboard_browser_test.cpp):
//   base           http://127.0.0.1:PORT of the aggregator
//   screenshots    directory for PNGs of each page
//   failed_jobs    [{id, sub_domain, nodes: [..], cause}]  every failed job seeded
//   cascade        {id, root_node, root_rule, cascade_rule}
//   filter         {sub_domain, count}                 rows expected with that sub_domain filter
//   node_filter    {node, ids: [..]}                   jobs that blame that node
//   fleet_top      node expected first among repeat offenders
//   agents         {live: [..], stale: [..]}
//   hostile_job    id of a job whose evidence holds markup
//   hostile_unrecognized  the unrecognized error lines its live verdict lists (its agent shipped a
//                  template whose first line holds markup too)
//   html           [{file, sub_domain, cause, unrecognized}]  offline reports to open from disk
//                  (unrecognized: rows the "Unrecognized error lines" table must have)
// Prints one line per check; exits 1 when any failed.
import fs from 'node:fs';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

const plan = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const failures = [];
let checks = 0;
function check(ok, what) {
  checks++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
}

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
});

// A page that records console errors, failed requests and anything it tried to fetch.
async function openPage(offline = false) {
  const page = await browser.newPage();
  await page.setViewport({width: 1400, height: 900});
  page.problems = [];
  page.requested = [];
  page.on('console', (m) => { if (m.type() === 'error') page.problems.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => page.problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => page.problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on('response', (r) => { if (r.status() >= 400) page.problems.push(`HTTP ${r.status()}: ${r.url()}`); });
  if (offline) {
    await page.setRequestInterception(true);
    page.on('request', (r) => {
      page.requested.push(r.url());
      if (r.url().startsWith('file:') || r.url().startsWith('data:')) r.continue();
      else r.abort();
    });
  }
  return page;
}

async function ready(page) {
  await page.waitForSelector('body[data-ready="1"]', {timeout: 20000});
}

async function shot(page, name) {
  fs.mkdirSync(plan.screenshots, {recursive: true});
  await page.screenshot({path: path.join(plan.screenshots, `${name}.png`), fullPage: false});
}

function clean(page, what) {
  check(page.problems.length === 0, `${what}: no console errors or failed requests ${page.problems.join(' | ')}`);
}

async function jobRows(page) {
  return page.$$eval('#jobs tr[data-job-id]', (rows) => rows.map((r) => ({
    id: r.dataset.jobId,
    sub_domain: r.querySelector('td[data-col="sub_domain"]')?.textContent.trim(),
    node: r.querySelector('td[data-col="node"]')?.textContent.trim(),
    cause: r.querySelector('td[data-col="cause"]')?.textContent.trim(),
    link: r.querySelector('a[href]')?.getAttribute('href'),
  })));
}

// Waits until the table shows `pred` of its rows (filters re-render asynchronously).
async function waitRows(page, pred, what) {
  const deadline = Date.now() + 15000;
  let rows = [];
  while (Date.now() < deadline) {
    rows = await jobRows(page);
    if (pred(rows)) return rows;
    await new Promise((r) => setTimeout(r, 100));
  }
  check(false, `${what}: table never showed the expected rows (last: ${JSON.stringify(rows.map((r) => r.id))})`);
  return rows;
}

try {
  // --- Jobs ---------------------------------------------------------------------------------
  {
    const page = await openPage();
    await page.goto(`${plan.base}/ui/`, {waitUntil: 'load'});
    await ready(page);
    check(await page.$eval('#page', (m) => m.dataset.page) === 'jobs', 'jobs: the page says it is the jobs page');
    const rows = await jobRows(page);
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const j of plan.failed_jobs) {
      const r = byId.get(j.id);
      check(!!r, `jobs: failed job ${j.id} is listed`);
      if (!r) continue;
      check(r.sub_domain === j.sub_domain, `jobs: ${j.id} shows sub_domain ${j.sub_domain} (shown: ${r.sub_domain})`);
      for (const n of j.nodes) check(r.node.includes(n), `jobs: ${j.id} names ${n} (shown: ${r.node})`);
      check(!!r.link, `jobs: ${j.id} links to its page`);
    }
    const total = await page.$eval('#jobs-total', (e) => e.textContent);
    check(total.includes(String(plan.failed_jobs.length)), `jobs: the total says ${plan.failed_jobs.length} (shown: ${total.trim()})`);
    await shot(page, 'jobs');

    await page.select('#f-sub-domain', plan.filter.sub_domain);
    const filtered = await waitRows(page, (rs) => rs.length === plan.filter.count &&
        rs.every((r) => r.sub_domain === plan.filter.sub_domain), 'jobs filter by sub_domain');
    check(filtered.length === plan.filter.count, `jobs: filter sub_domain=${plan.filter.sub_domain} leaves ${plan.filter.count} rows (${filtered.length})`);
    await page.select('#f-sub-domain', '');
    await page.type('#f-node', plan.node_filter.node);
    const byNode = await waitRows(page, (rs) => rs.length === plan.node_filter.ids.length, 'jobs filter by node');
    check(JSON.stringify(byNode.map((r) => r.id).sort()) === JSON.stringify([...plan.node_filter.ids].sort()),
          `jobs: filter node=${plan.node_filter.node} leaves exactly its jobs`);
    clean(page, 'jobs');
    await page.close();
  }

  // --- Job: the cascade ---------------------------------------------------------------------
  {
    const c = plan.cascade;
    const page = await openPage();
    await page.goto(`${plan.base}/ui/jobs/${encodeURIComponent(c.id)}`, {waitUntil: 'load'});
    await ready(page);
    const field = (f) => page.$eval(`#verdict [data-field="${f}"]`, (e) => e.textContent.trim()).catch(() => '');
    check(await field('sub_domain') === 'hardware', `job ${c.id}: verdict card says hardware`);
    check((await field('responsible')).includes(c.root_node), `job ${c.id}: verdict card names ${c.root_node}`);
    check(await field('cause') === c.root_rule, `job ${c.id}: verdict card names ${c.root_rule}`);
    const root = await page.$(`#timeline g.lane[data-lane="${c.root_node}"] [data-role="root"][data-rule="${c.root_rule}"]`);
    check(!!root, `job ${c.id}: the timeline marks ${c.root_rule} as root in ${c.root_node}'s lane`);
    const lanes = await page.$$eval('#timeline g.lane', (ls) => ls.map((l) => ({lane: l.dataset.lane, collapsed: l.dataset.collapsed})));
    check(lanes.length >= 2, `job ${c.id}: the timeline has lanes (${lanes.length})`);
    check(lanes.some((l) => Number(l.collapsed) > 1), `job ${c.id}: nodes with the same symptoms collapse into one lane`);
    if (root) {
      const rootBox = await root.boundingBox();
      const rootT = Number(await root.evaluate((e) => e.dataset.t));
      const cascades = await page.$$eval(`#timeline [data-role="cascade"][data-rule="${c.cascade_rule}"]`,
        (ms) => ms.map((m) => ({t: Number(m.dataset.t), x: m.getBoundingClientRect().x})));
      check(cascades.length > 0, `job ${c.id}: ${c.cascade_rule} is drawn as cascade`);
      check(cascades.every((m) => m.t >= rootT && m.x >= rootBox.x - 1),
            `job ${c.id}: every ${c.cascade_rule} marker is downstream (right) of the root`);
    }
    const chainRoot = await page.$(`#chain tr[data-rule="${c.root_rule}"][data-role="root"]`);
    check(!!chainRoot, `job ${c.id}: the chain table lists the root`);
    check(!!(await page.$('#coverage')), `job ${c.id}: the coverage table is there`);
    check(!!(await page.$('#unrecognized-section')), `job ${c.id}: the unrecognized error lines section is there`);
    check(!!(await page.$('a#json')), `job ${c.id}: a link to the JSON`);
    await shot(page, 'job-cascade');
    clean(page, `job ${c.id}`);
    await page.close();
  }

  // --- Hostile input: markup in a log line stays text -----------------------------------------
  {
    const page = await openPage();
    await page.goto(`${plan.base}/ui/jobs/${encodeURIComponent(plan.hostile_job)}`, {waitUntil: 'load'});
    await ready(page);
    const pwned = await page.evaluate(() => window.__pwned);
    check(pwned === undefined, `hostile job: markup in evidence did not run (window.__pwned=${pwned})`);
    const text = await page.evaluate(() => document.body.innerText);
    check(text.includes('<script>'), 'hostile job: the evidence shows "<script>" as text');
    check(!(await page.$('img[src="x"]')), 'hostile job: no element was created from the evidence');
    // The live verdict's unrecognized error lines (issue 30: the agent's template), as text too.
    const rows = await page.$$eval('#unrecognized-table tbody tr', (rs) => rs.length).catch(() => 0);
    check(rows === plan.hostile_unrecognized,
          `hostile job: the live page lists ${plan.hostile_unrecognized} unrecognized error line(s) (${rows})`);
    const unrecognized = await page.$eval('#unrecognized-table', (t) => t.innerText).catch(() => '');
    check(unrecognized.includes('<iframe'), 'hostile job: the unrecognized first line shows "<iframe" as text');
    check(!(await page.$('iframe')), 'hostile job: no element was created from the unrecognized line');
    await page.close();
  }

  // --- Fleet ----------------------------------------------------------------------------------
  {
    const page = await openPage();
    await page.goto(`${plan.base}/ui/fleet`, {waitUntil: 'load'});
    await ready(page);
    const first = await page.$eval('#offenders tr[data-node]', (r) => r.dataset.node).catch(() => '');
    check(first === plan.fleet_top, `fleet: ${plan.fleet_top} is ranked first (shown: ${first})`);
    for (const id of ['#heatmap', '#patterns', '#breakdown']) check(!!(await page.$(id)), `fleet: ${id} is there`);
    await shot(page, 'fleet');
    clean(page, 'fleet');
    await page.close();
  }

  // --- Agents ---------------------------------------------------------------------------------
  {
    const page = await openPage();
    await page.goto(`${plan.base}/ui/agents`, {waitUntil: 'load'});
    await ready(page);
    const rows = await page.$$eval('#agents tr[data-node]', (rs) => rs.map((r) => [r.dataset.node, r.dataset.live]));
    const live = new Map(rows);
    for (const n of plan.agents.live) check(live.get(n) === 'true', `agents: ${n} is live`);
    for (const n of plan.agents.stale) check(live.get(n) === 'false', `agents: ${n} stands out as not live`);
    await shot(page, 'agents');
    clean(page, 'agents');
    await page.close();
  }

  // --- Offline reports from disk, no network ---------------------------------------------------
  for (const h of plan.html) {
    const page = await openPage(true);
    await page.goto(`file://${h.file}`, {waitUntil: 'load'});
    await ready(page);
    const sd = await page.$eval('#verdict [data-field="sub_domain"]', (e) => e.textContent.trim()).catch(() => '');
    const cause = await page.$eval('#verdict [data-field="cause"]', (e) => e.textContent.trim()).catch(() => '');
    check(sd === h.sub_domain && cause === h.cause, `html ${path.basename(h.file)}: shows ${h.sub_domain} ${h.cause} (${sd} ${cause})`);
    const external = page.requested.filter((u) => !u.startsWith('file:') && !u.startsWith('data:'));
    check(external.length === 0, `html ${path.basename(h.file)}: asks for nothing beyond the file (${external.join(' ')})`);
    check(!!(await page.$('#timeline g.lane')), `html ${path.basename(h.file)}: has the timeline`);
    const rows = await page.$$eval('#unrecognized-table tbody tr', (rs) => rs.length).catch(() => 0);
    check(!!(await page.$('#unrecognized-section')) && rows === h.unrecognized,
          `html ${path.basename(h.file)}: lists ${h.unrecognized} unrecognized error line(s) (${rows})`);
    await shot(page, `html-${path.basename(h.file, '.html')}`);
    clean(page, `html ${path.basename(h.file)}`);
    await page.close();
  }
} catch (e) {
  check(false, `exception: ${e.stack || e}`);
} finally {
  await browser.close();
}
console.log(`${checks - failures.length}/${checks} checks passed`);
process.exit(failures.length ? 1 : 0);
