// Up next and the course page in a real browser: Debian's Chromium (/usr/bin/chromium) driven
// by playwright-core, headless. Run by cmd/api/course_page_e2e_test.go, which seeds a course,
// reports positions through the API, reads the events this script prints (one JSON object a
// line on stdout) and checks the database.
//
//   PLAYHEAD_URL    the server, http://127.0.0.1:port
//   PLAYHEAD_TOKEN  the member's token (passed to the page once, as #token=…)
//   PLAYHEAD_SHOTS  where to save the screenshots (a temporary folder; docs/img for `make screenshots`)
//   CHROMIUM        the browser, /usr/bin/chromium unless set
//
// Events: home (the continue-watching cards and the "Your courses" rows as the home page shows
// them), course (the course page reached from the home page: title, totals, resume button,
// lessons), opened (the player opened from the resume button: its address, and the POST
// /v1/playback request it sent with the answer's status), empty (the page of a course that
// does not exist), done (axe-core's violations on both pages, console errors,
// the notice). Any failure: an "error" event, and exit status 1.
//
// Timeouts only bound how long a step may wait before the script gives up.

import { join } from 'node:path';

import { accessibility, emit, env, run, withBrowser } from './harness.mjs';

const BASE = env('PLAYHEAD_URL');
const TOKEN = env('PLAYHEAD_TOKEN');
const SHOTS = env('PLAYHEAD_SHOTS');

const STEP_WAIT = 30_000;

// visibleText is what a reader sees of a node: its rendered text (hidden parts left out).
const visibleText = (page, selector) => page.$eval(selector, (n) => n.innerText.trim());

async function main() {
  const problems = [];
  let watching = true; // console errors count on the home and course pages
  await withBrowser({}, async (context) => {
    const result = { browser: context.browser() ? context.browser().version() : '' };
    const page = await context.newPage();
    page.on('console', (msg) => {
      if (watching && msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
    });
    page.on('pageerror', (err) => {
      if (watching) problems.push(`uncaught exception: ${err.message}`);
    });

    // 1. The home page: continue watching with its up-next card, and "Your courses".
    await page.goto(`${BASE}/#token=${encodeURIComponent(TOKEN)}`);
    await page.waitForSelector('#items li', { timeout: STEP_WAIT });
    await page.waitForSelector('#course-list li', { timeout: STEP_WAIT });
    const items = await page.$$eval('#items li', (lis) => lis.map((li) => ({
      mediaId: Number(li.dataset.mediaId),
      text: li.querySelector('.item-body').innerText.trim(),
      href: li.querySelector('.item-title').getAttribute('href'),
    })));
    const courses = await page.$$eval('#course-list li', (lis) => lis.map((li) => ({
      collection: li.dataset.collection,
      text: li.innerText.trim(),
      href: li.querySelector('.item-title').getAttribute('href'),
      resumeHref: li.querySelector('a.button') ? li.querySelector('a.button').getAttribute('href') : '',
    })));
    emit('home', { items, courses });
    await page.screenshot({ path: join(SHOTS, 'home-up-next.png'), fullPage: true });
    result.accessibility = await accessibility(page, 'the home page');

    // 2. The course page, reached from the home page.
    await page.click('#course-list li .item-title');
    await page.waitForSelector('#lessons li', { timeout: STEP_WAIT });
    const lessons = await page.$$eval('#lessons li', (lis) => lis.map((li) => ({
      mediaId: Number(li.dataset.mediaId),
      text: li.innerText.replace(/\s+/g, ' ').trim(),
    })));
    emit('course', {
      url: page.url(),
      title: await visibleText(page, '#course-title'),
      totals: await visibleText(page, '#totals'),
      resume: await page.$eval('#resume', (a) => (a.hidden ? '' : a.innerText.trim())),
      resumeHref: await page.$eval('#resume', (a) => a.getAttribute('href') || ''),
      lessons,
    });
    await page.screenshot({ path: join(SHOTS, 'course.png'), fullPage: true });
    result.accessibility.push(...await accessibility(page, 'the course page'));
    result.problems = problems;
    result.notice = await page.evaluate(() => {
      const n = document.getElementById('notice');
      return n.hidden ? '' : n.textContent.trim();
    });

    // 3. Resume: the player opens the lesson from this collection. The seeded lessons have no
    // video files, so only the open is looked at, not playback.
    watching = false;
    const opened = page.waitForResponse((r) => r.request().method() === 'POST' && new URL(r.url()).pathname.startsWith('/v1/playback/'),
      { timeout: STEP_WAIT });
    await page.click('#resume');
    const response = await opened;
    emit('opened', { url: page.url().slice(BASE.length), request: response.url().slice(BASE.length), status: response.status() });

    // 4. A course that does not exist reads as one without lessons.
    await page.goto(`${BASE}/course?${new URLSearchParams({ c: 'no such course' })}`);
    await page.waitForSelector('#finished:not([hidden])', { timeout: STEP_WAIT });
    emit('empty', { totals: await visibleText(page, '#totals'), resume: await page.$eval('#resume', (a) => (a.hidden ? '' : a.innerText.trim())),
      title: await visibleText(page, '#finished') });

    emit('done', result);
  });
}

run('course.mjs', main);
