// End-to-end test of the `toolpulse demo --web` page in a real browser (Debian's chromium via
// playwright-core). run.sh starts the demo and passes its URL in DEMO_URL; SCREENSHOT names
// the PNG of the finished page (default target/demo.png).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const URL = process.env.DEMO_URL;
const SCREENSHOT = process.env.SCREENSHOT || 'target/demo.png';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
// What the scripted gateway's slow MCP call (4 s) answers, and the end of the final answer.
const SLOW_TOOL = 'github_search_issues';
const SLOW_OUTPUT = '3 open issues mention streaming';
const FINAL_TEXT = 'Filing the new issue failed: there is no repository acme/rockets.';

const row = (name) => `#timeline li.tool[data-name="${name}"]`;
// A running row says "in progress" until its tool reports a step.
const STATUS_RUNNING = /^(in progress|step [1-4]\/4: .+)$/;

async function runOnce(page, { keyboard }) {
  const run = page.getByRole('button', { name: 'Run' });
  if (keyboard) {
    await run.focus();
    await page.keyboard.press('Enter');
  } else {
    await run.click();
  }
  await page.waitForSelector('#run-form[data-state="running"]', { timeout: 5_000 });
}

async function waitForDone(page) {
  await page.waitForSelector('#run-form[data-state="done"]', { timeout: 30_000 });
}

test('the demo page shows tool progress from toolpulse events', { timeout: 120_000 }, async () => {
  assert.ok(URL, 'DEMO_URL is not set (run the test through run.sh)');
  const profile = await mkdtemp(path.join(tmpdir(), 'toolpulse-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width: 1200, height: 900 },
    deviceScaleFactor: 1,
    timeout: 60_000,
  });
  const errors = [];
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    page.on('console', (msg) => {
      if (msg.type() === 'error') errors.push(`console: ${msg.text()}`);
    });
    page.on('pageerror', (error) => errors.push(`page error: ${error.message}`));
    page.on('requestfailed', (r) => errors.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));

    await page.goto(URL, { waitUntil: 'load', timeout: 15_000 });
    assert.equal(await page.title(), 'toolpulse — live demo');
    assert.equal(await page.getAttribute('#timeline', 'aria-live'), 'polite');
    assert.ok(await page.isChecked('input[name="route"][value="through"]'));
    // Every "name state: status" the timeline's rows show, noted as they change: a state a row
    // passes through is checked whatever the timing of this test's own steps.
    await page.evaluate(() => {
      window.seenStates = [];
      const timeline = document.querySelector('#timeline');
      const note = () => {
        for (const li of timeline.querySelectorAll('li.tool')) {
          const status = li.querySelector('.status')?.textContent.trim();
          const seen = `${li.dataset.name} ${li.dataset.state}: ${status}`;
          if (!window.seenStates.includes(seen)) window.seenStates.push(seen);
        }
      };
      const all = { subtree: true, childList: true, characterData: true, attributes: true };
      new MutationObserver(note).observe(timeline, all);
    });

    // Through toolpulse, started from the keyboard.
    await runOnce(page, { keyboard: true });

    // The slow MCP call: in progress, with a spinner and a running clock, while the gateway
    // still holds its result (no function_call_output for it has reached the page).
    const slow = page.locator(row(SLOW_TOOL));
    await slow.waitFor({ timeout: 5_000 });
    assert.equal(await slow.getAttribute('data-state'), 'running');
    assert.equal(await slow.getAttribute('data-kind'), 'mcp_call');
    assert.match((await slow.locator('.status').textContent()).trim(), STATUS_RUNNING);
    assert.equal(await slow.locator('.spinner').count(), 1);
    assert.ok(!(await page.textContent('body')).includes(SLOW_OUTPUT), 'result already shown');
    // The tool's own progress (its MCP server's notifications, carried by toolpulse to this
    // stream and never to the gateway): the step's message and a bar on its row, before the
    // result.
    await page.waitForFunction(
      (selector) => /^step [1-4]\/4: /.test(document.querySelector(selector)?.textContent ?? ''),
      `${row(SLOW_TOOL)} .status`,
      { timeout: 5_000 },
    );
    assert.ok(!(await page.textContent('body')).includes(SLOW_OUTPUT), 'the message came first');
    const bar = slow.locator('progress.bar');
    assert.equal(await bar.getAttribute('max'), '4');
    assert.ok((await bar.evaluate((b) => b.value)) >= 1, 'the bar shows the steps done');
    const first = parseFloat(await slow.locator('.time').textContent());
    await mkdir(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT.replace(/\.png$/, '-running.png'), fullPage: true });
    // The parallel web search says "searching…" once its searching event came.
    const search = page.locator(row('web_search'));
    await search.waitFor({ timeout: 5_000 });
    assert.equal(await search.getAttribute('data-kind'), 'web_search_call');
    await page.waitForTimeout(700);
    const later = parseFloat(await slow.locator('.time').textContent());
    assert.ok(later > first, `the elapsed time runs: ${first} → ${later}`);
    assert.equal(await slow.getAttribute('data-state'), 'running');
    assert.ok(!(await page.textContent('body')).includes(SLOW_OUTPUT), 'result already shown');
    // The search runs 1.5 s, likely over by now: that it said "searching…" while it ran is
    // read from the notes, not from its row as it is now.
    await page
      .waitForFunction(() => window.seenStates.includes('web_search running: searching…'), null, {
        timeout: 5_000,
      })
      .catch(async () => {
        const seen = await page.evaluate(() => window.seenStates);
        assert.fail(`the search never said "searching…" while running: ${JSON.stringify(seen)}`);
      });

    // Then ✓ with the duration toolpulse measured (~4 s), and the result arrives after it.
    await page.waitForSelector(`${row(SLOW_TOOL)}[data-state="completed"]`, { timeout: 10_000 });
    assert.equal((await slow.locator('.icon').textContent()).trim(), '✓');
    assert.ok(await bar.isHidden(), 'the bar goes once the call is done');
    assert.match((await slow.locator('.time').textContent()).trim(), /^\d+\.\d s$/);
    assert.ok(Number(await slow.getAttribute('data-duration-ms')) >= 3500);

    await waitForDone(page);
    assert.ok((await page.textContent('body')).includes(SLOW_OUTPUT));
    const rows = await page.$$eval('#timeline li.tool', (lis) =>
      lis.map((li) => ({
        name: li.dataset.name,
        kind: li.dataset.kind,
        state: li.dataset.state,
        icon: li.querySelector('.icon').textContent.trim(),
        status: li.querySelector('.status').textContent.trim(),
        time: li.querySelector('.time').textContent.trim(),
      })),
    );
    assert.deepEqual(
      rows.map((r) => [r.name, r.kind, r.state, r.icon, r.status]),
      [
        ['web_search', 'web_search_call', 'completed', '✓', 'completed'],
        ['github_search_issues', 'mcp_call', 'completed', '✓', 'completed'],
        ['file_search', 'file_search_call', 'completed', '✓', 'completed'],
        ['github_create_issue', 'mcp_call', 'failed', '✗', 'failed'],
      ],
    );
    for (const r of rows) assert.match(r.time, /^\d+\.\d s$/, `${r.name} shows its duration`);
    const answer = await page.textContent('#answer');
    assert.ok(answer.endsWith(FINAL_TEXT), `final text: ${answer}`);
    assert.equal(await page.getAttribute('#answer', 'aria-busy'), 'false');
    assert.match(await page.textContent('#status'), /^Done in .* through toolpulse: \d+ events, 22 injected/);

    await page.evaluate(() => document.activeElement?.blur());
    await page.screenshot({ path: SCREENSHOT, fullPage: true });

    // Straight to the gateway (the switch is a radio group: arrow keys move it): the same
    // answer, and no tool events at all (dead air).
    await page.getByRole('radio', { name: 'through toolpulse' }).focus();
    await page.keyboard.press('ArrowRight');
    assert.ok(await page.isChecked('input[name="route"][value="direct"]'));
    await runOnce(page, { keyboard: false });
    await page.waitForTimeout(2_000);
    assert.equal(await page.locator('#timeline li').count(), 0, 'no tool rows without toolpulse');
    await waitForDone(page);
    assert.equal(await page.locator('#timeline li').count(), 0);
    assert.match(await page.textContent('#timeline-empty'), /dead air/);
    assert.ok((await page.textContent('#answer')).endsWith(FINAL_TEXT));
    assert.match(await page.textContent('#status'), /straight from the gateway: \d+ events, 0 injected/);

    // Phone width: one column, nothing wider than the screen.
    await page.setViewportSize({ width: 390, height: 844 });
    const overflow = await page.evaluate(
      () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
    );
    assert.ok(overflow <= 0, `page overflows a phone screen by ${overflow}px`);
    await page.screenshot({ path: SCREENSHOT.replace(/\.png$/, '-phone.png'), fullPage: true });

    assert.deepEqual(errors, [], 'the page logged no errors');
  } finally {
    await context.close();
    await rm(profile, { recursive: true, force: true });
  }
});
