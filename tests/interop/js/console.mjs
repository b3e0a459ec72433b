// The strata web console in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core, pinned in package-lock.json), for tests/interop/test_console.py.
//   node console.mjs MODE 'JSON ARGS'
// prints ONE JSON line with what the pages showed (the Python test compares it with the Kafka
// API's answers) and exits 0; on a failure it prints {"error": ..., "partial": ...} and exits 1.
// Every wait is bounded (WAIT_MS); screenshots (full page) go to ARGS.shots/<page>.png.
// The data-testid names, hash routes and ready marks are the contract in
// target/notes/console-api.md ("Browser-test contract").
//
// Modes (ARGS.base is a console's origin, e.g. http://127.0.0.1:9644):
//   read      {base, shots, topics: [..], groups: [..]}: the cluster, topics, groups and
//             transactions pages, and each named topic's and group's page: every row and cell.
//   messages  {base, shots, topic, partition, offset, timestamp}: the message browser at an
//             offset (text, json and hex views) and at a timestamp.
//   charts    {base, shots, min_points}: the charts page until a chart has min_points points.
//   actions   {base, shots, login?, create?, alter?, reset?, delete?}: the console's forms,
//             each through its confirm dialog; reports the dialog's text and the outcome.
//   sasl      {base, shots, routes, alice, admin, wrong_password, secret_topic, secret_group,
//             alice_topic, alice_create, evil_url}: login required everywhere, a wrong password,
//             what alice sees, and a page on another origin POSTing with admin's cookie.
//   scale     {base, shots, pages: [{name, hash, ready}], loads}: per page one warm-up load,
//             then `loads` loads; each time is performance.getEntriesByName('strata:ready:<page>')
//             [0].startTime (ms from the navigation's start).
import { createRequire } from 'node:module'
import { mkdirSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

// ES modules ignore NODE_PATH: resolve playwright-core from scripts/interop.sh's install.
const here = dirname(fileURLToPath(import.meta.url))
const jsDir = process.env.STRATA_INTEROP_JS || resolve(here, '../../../target/interop-js')
const { chromium } = createRequire(join(jsDir, 'package.json'))('playwright-core')

const WAIT_MS = 15000
const LAUNCH_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic']

const [mode, argsText] = process.argv.slice(2)
const args = JSON.parse(argsText || '{}')
const result = { mode, page_errors: [], console_errors: [] }

function shotPath (name) {
  mkdirSync(args.shots, { recursive: true })
  return join(args.shots, name.replace(/[^A-Za-z0-9_.-]+/g, '_') + '.png')
}

async function shot (page, name) {
  await page.screenshot({ path: shotPath(name), fullPage: true, timeout: WAIT_MS })
}

async function newPage (context) {
  const page = await context.newPage()
  page.setDefaultTimeout(WAIT_MS)
  page.setDefaultNavigationTimeout(WAIT_MS)
  page.on('pageerror', e => result.page_errors.push(String(e && e.stack || e).slice(0, 500)))
  page.on('console', m => {
    if (m.type() === 'error') result.console_errors.push(m.text().slice(0, 500))
  })
  return page
}

async function waitReady (page, ready) {
  await page.waitForFunction(r => document.body && document.body.dataset.ready === r, ready,
    { timeout: WAIT_MS })
}

// A fresh document for every load (about:blank first: a hash change alone is no navigation),
// then the page's own ready mark.
async function open (page, hash, ready) {
  await page.goto('about:blank')
  await page.goto(args.base + '/#' + hash, { waitUntil: 'domcontentloaded' })
  if (ready) await waitReady(page, ready)
}

// Rows of a table: each row's data-* attributes and, per data-testid inside it, the cell's
// visible text and its data-* attributes (e.g. topic-size's data-bytes).
async function rows (page, rowTestid) {
  return page.$$eval(`[data-testid="${rowTestid}"]`, els => els.map(row => {
    const cells = {}
    for (const cell of row.querySelectorAll('[data-testid]')) {
      const id = cell.dataset.testid
      if (id in cells) continue
      cells[id] = { text: (cell.innerText || cell.textContent || '').trim(), ...cell.dataset }
      delete cells[id].testid
    }
    const attrs = { ...row.dataset }
    delete attrs.testid
    return { attrs, cells }
  }))
}

// The text of the first element with that data-testid, or null when there is none.
async function text (page, testid) {
  const el = await page.$(`[data-testid="${testid}"]`)
  return el ? (await el.innerText()).trim() : null
}

async function cellsOf (page, testids) {
  const out = {}
  for (const id of testids) out[id] = await text(page, id)
  return out
}

// Fills an input, or picks the option of a <select>, found by data-testid.
async function setField (page, testid, value) {
  const el = page.locator(`[data-testid="${testid}"]`).first()
  const tag = await el.evaluate(e => e.tagName)
  if (tag === 'SELECT') await el.selectOption(String(value))
  else await el.fill(String(value))
}

async function click (page, testid) {
  await page.locator(`[data-testid="${testid}"]`).first().click({ timeout: WAIT_MS })
}

// Logs in through the page's login form; waits for nav-user to name the user.
async function login (page, user, password) {
  await open(page, '/cluster')
  await page.locator('[data-testid="login-user"]').waitFor({ state: 'visible' })
  await setField(page, 'login-user', user)
  await setField(page, 'login-password', password)
  await click(page, 'login-submit')
  await page.waitForFunction(u => {
    const el = document.querySelector('[data-testid="nav-user"]')
    return el && el.innerText.trim() === u
  }, user, { timeout: WAIT_MS })
}

// ---- read ---------------------------------------------------------------------------------
async function readPages (page, tag) {
  const out = { topic: {}, group: {} }
  await open(page, '/cluster', 'cluster')
  out.cluster = {
    brokers: await rows(page, 'broker-row'),
    cells: await cellsOf(page, ['health-offline', 'health-leaderless', 'health-under-replicated',
      'health-topics', 'health-partitions', 'quorum-leader', 'cluster-controller']),
    nav_user: await text(page, 'nav-user')
  }
  await shot(page, tag + 'cluster')
  await open(page, '/topics', 'topics')
  out.topics = await rows(page, 'topic-row')
  await shot(page, tag + 'topics')
  for (const name of args.topics || []) {
    await open(page, '/topics/' + encodeURIComponent(name), 'topic')
    out.topic[name] = { partitions: await rows(page, 'partition-row'),
      configs: await rows(page, 'config-row'),
      producers: await rows(page, 'producer-row') }
    await shot(page, tag + 'topic-' + name)
  }
  await open(page, '/groups', 'groups')
  out.groups = await rows(page, 'group-row')
  out.groups_unanswered = await text(page, 'groups-unanswered')
  await shot(page, tag + 'groups')
  for (const id of args.groups || []) {
    await open(page, '/groups/' + encodeURIComponent(id), 'group')
    out.group[id] = { members: await rows(page, 'member-row'),
      offsets: await rows(page, 'offset-row'),
      lag_chart: (await page.$('[data-testid="lag-chart"]')) !== null }
    await shot(page, tag + 'group-' + id)
  }
  await open(page, '/transactions', 'transactions')
  out.transactions = await rows(page, 'txn-row')
  await shot(page, tag + 'transactions')
  return out
}

async function read (context) {
  const page = await newPage(context)
  Object.assign(result, await readPages(page, ''))
}

// ---- messages -----------------------------------------------------------------------------
async function valuesChange (page, before) {
  await page.waitForFunction(b => {
    const el = document.querySelector('[data-testid="message-row"] [data-testid="message-value"]')
    return el && el.innerText.trim() !== b
  }, before, { timeout: 5000 }).catch(() => {})
}

async function messages (context) {
  const page = await newPage(context)
  const where = `/topics/${encodeURIComponent(args.topic)}/messages/${args.partition}`
  await open(page, `${where}?offset=${args.offset}`, 'messages')
  const firstValue = async () => (await rows(page, 'message-row'))[0]?.cells['message-value']?.text
  const select = page.locator('[data-testid="value-format"]').first()
  const views = {}
  for (const format of ['text', 'json', 'hex']) {
    const before = await firstValue()
    const current = await select.inputValue()
    await select.selectOption(format)
    if (current !== format) await valuesChange(page, before)
    views[format] = await rows(page, 'message-row')
    await shot(page, 'messages-offset-' + format)
  }
  result.at_offset = views
  await open(page, `${where}?timestamp=${args.timestamp}`, 'messages')
  await setField(page, 'value-format', 'text').catch(() => {})
  result.at_timestamp = await rows(page, 'message-row')
  await shot(page, 'messages-timestamp')
}

// ---- charts -------------------------------------------------------------------------------
async function charts (context) {
  const page = await newPage(context)
  await open(page, '/charts', 'charts')
  const enough = await page.waitForFunction(min => {
    const c = window.__charts
    return c && Object.values(c).some(n => n >= min)
  }, args.min_points || 2, { timeout: WAIT_MS }).then(() => true, () => false)
  result.enough = enough
  result.charts = await page.evaluate(() => window.__charts || null)
  await shot(page, 'charts')
}

// ---- actions ------------------------------------------------------------------------------
const OUTCOME = /\bOK\b|[A-Z][A-Z0-9]*_[A-Z0-9_]+/

// Opens a form, fills it, submits, reads the confirm dialog, confirms, waits for the outcome.
async function act (page, name, fields) {
  await click(page, name + '-open')
  for (const [testid, value] of fields) {
    if (value !== undefined && value !== null) await setField(page, testid, value)
  }
  await click(page, name + '-submit')
  const dialog = page.locator('[data-testid="confirm"]').first()
  await dialog.waitFor({ state: 'visible' })
  const confirm = (await dialog.innerText()).trim()
  await shot(page, name + '-confirm')
  await click(page, 'confirm-ok')
  const done = await page.waitForFunction(re => {
    const el = document.querySelector('[data-testid="action-result"]')
    return el && new RegExp(re).test(el.innerText)
  }, OUTCOME.source, { timeout: WAIT_MS }).then(() => true, () => false)
  const outcome = await text(page, 'action-result')
  await shot(page, name + '-result')
  return { confirm, result: outcome, done }
}

async function actions (context) {
  const page = await newPage(context)
  if (args.login) await login(page, args.login.user, args.login.password)
  const a = args
  if (a.create) {
    await open(page, '/topics', 'topics')
    result.create = await act(page, 'create-topic', [['create-topic-name', a.create.name],
      ['create-topic-partitions', a.create.partitions], ['create-topic-rf', a.create.rf]])
  }
  if (a.alter) {
    await open(page, '/topics/' + encodeURIComponent(a.alter.topic), 'topic')
    result.alter = await act(page, 'alter-config', [['alter-config-name', a.alter.name],
      ['alter-config-value', a.alter.value]])
  }
  if (a.reset) {
    await open(page, '/groups/' + encodeURIComponent(a.reset.group), 'group')
    result.reset = await act(page, 'reset-offsets', [['reset-offsets-to', a.reset.to],
      ['reset-offsets-topic', a.reset.topic], ['reset-offsets-value', a.reset.value]])
  }
  if (a.delete) {
    await open(page, '/topics/' + encodeURIComponent(a.delete.topic), 'topic')
    result.delete = await act(page, 'delete-records', [['delete-records-partition', a.delete.partition],
      ['delete-records-offset', a.delete.offset]])
  }
}

// ---- sasl ---------------------------------------------------------------------------------
// Every /api/ answer a page got, to check none answered without a login.
function recordApi (page, into) {
  page.on('response', r => {
    const url = new URL(r.url())
    if (url.origin === args.base && url.pathname.startsWith('/api/')) {
      into.push({ method: r.request().method(), path: url.pathname + url.search, status: r.status() })
    }
  })
}

async function loggedOut (browser) {
  const context = await browser.newContext()
  const page = await newPage(context)
  const api = []
  recordApi(page, api)
  const routes = []
  for (const route of args.routes) {
    await page.goto('about:blank')
    await page.goto(args.base + '/#' + route, { waitUntil: 'domcontentloaded' })
    const form = await page.locator('[data-testid="login-user"]').waitFor({ state: 'visible' })
      .then(() => true, () => false)
    const dataRows = await page.$$eval('[data-testid$="-row"]', els => els.length)
    routes.push({ route, login_form: form, data_rows: dataRows })
    if (routes.length === 1) await shot(page, 'login')
  }
  // A wrong password: the form stays, with an error.
  await setField(page, 'login-user', args.alice.user)
  await setField(page, 'login-password', args.wrong_password)
  await click(page, 'login-submit')
  const error = await page.locator('[data-testid="login-error"]').waitFor({ state: 'visible' })
    .then(() => true, () => false)
  result.wrong_password = { error_shown: error, error: await text(page, 'login-error'),
    nav_user: await text(page, 'nav-user') }
  await shot(page, 'login-wrong-password')
  result.logged_out = { routes, api }
  await context.close()
}

async function asAlice (browser) {
  const context = await browser.newContext()
  const page = await newPage(context)
  await login(page, args.alice.user, args.alice.password)
  const seen = { nav_user: await text(page, 'nav-user') }
  await open(page, '/cluster', 'cluster')
  seen.cluster = await cellsOf(page, ['health-topics', 'health-partitions'])
  await shot(page, 'alice-cluster')
  await open(page, '/topics', 'topics')
  seen.topics = await rows(page, 'topic-row')
  await shot(page, 'alice-topics')
  await open(page, '/groups', 'groups')
  seen.groups = await rows(page, 'group-row')
  await shot(page, 'alice-groups')
  await open(page, `/topics/${encodeURIComponent(args.alice_topic)}/messages/0?offset=0`, 'messages')
  seen.messages = await rows(page, 'message-row')
  await shot(page, 'alice-messages')
  // What the ACLs hide, asked by the page's own (same-origin, cookie-carrying) fetch.
  seen.hidden = await page.evaluate(async ([topic, group]) => {
    const status = async path => (await fetch(path, { credentials: 'same-origin' })).status
    return {
      topic: await status('/api/topics/' + encodeURIComponent(topic)),
      messages: await status(`/api/topics/${encodeURIComponent(topic)}/partitions/0/messages?offset=0`),
      group: await status('/api/groups/' + encodeURIComponent(group))
    }
  }, [args.secret_topic, args.secret_group])
  await open(page, '/topics', 'topics')
  seen.create = await act(page, 'create-topic', [['create-topic-name', args.alice_create],
    ['create-topic-partitions', 1], ['create-topic-rf', 1]])
  result.alice = seen
  await context.close()
}

// The victim (admin) is logged in; a page on another origin of the same site (127.0.0.1 on
// another port: SameSite=Strict cookies go along) POSTs to the console three ways.
async function crossSite (browser) {
  const context = await browser.newContext()
  const page = await newPage(context)
  await login(page, args.admin.user, args.admin.password)
  const posts = []
  page.on('response', async r => {
    const request = r.request()
    const url = new URL(r.url())
    if (url.origin !== args.base || request.method() === 'GET') return
    const headers = await request.allHeaders().catch(() => ({}))
    posts.push({ method: request.method(), path: url.pathname, status: r.status(),
      kind: request.resourceType(), cookie: /strata_console=/.test(headers.cookie || ''),
      origin: headers.origin || null })
  })
  await page.goto(args.evil_url, { waitUntil: 'domcontentloaded' })
  await page.waitForFunction(() => document.title === 'done', null, { timeout: WAIT_MS })
  const fetches = await page.evaluate(() => window.__attempts || null)
  await shot(page, 'cross-site-page')
  await Promise.all([
    page.waitForURL(u => u.origin === args.base, { timeout: WAIT_MS }),
    page.evaluate(() => document.getElementById('attack').submit())
  ])
  const body = (await page.textContent('body').catch(() => '')) || ''
  await shot(page, 'cross-site-form-answer')
  await page.waitForTimeout(300) // the last response events
  result.cross_site = { posts, fetches, form_answer: body.trim().slice(0, 500) }
  await context.close()
}

async function sasl (browser) {
  await loggedOut(browser)
  await asAlice(browser)
  await crossSite(browser)
}

// ---- scale --------------------------------------------------------------------------------
async function readyAt (page, ready) {
  return page.evaluate(r => {
    const entries = performance.getEntriesByName('strata:ready:' + r)
    return entries.length ? entries[0].startTime : null
  }, ready)
}

async function scale (context) {
  const page = await newPage(context)
  result.pages = {}
  for (const p of args.pages) {
    await open(page, p.hash, p.ready) // warm-up
    const warmup = await readyAt(page, p.ready)
    const times = []
    for (let i = 0; i < (args.loads || 3); i++) {
      await open(page, p.hash, p.ready)
      times.push(await readyAt(page, p.ready))
    }
    const shown = await page.$$eval('[data-testid$="-row"]', els => els.length)
    // Where the last load's time went (ms from the navigation's start), to see what to speed up.
    const breakdown = await page.evaluate(() => {
      const nav = performance.getEntriesByType('navigation')[0]
      const resources = performance.getEntriesByType('resource')
      const api = resources.filter(r => new URL(r.name).pathname.startsWith('/api/'))
      const ended = list => Math.max(0, ...list.map(r => r.responseEnd))
      return { html: nav && nav.responseEnd, dom_content_loaded: nav && nav.domContentLoadedEventEnd,
        assets: resources.length - api.length, assets_loaded: ended(resources.filter(r => !api.includes(r))),
        api: api.map(r => [new URL(r.name).pathname, Math.round(r.startTime), Math.round(r.responseEnd)]) }
    })
    result.pages[p.name] = { warmup, times, rows: shown, breakdown }
    await shot(page, p.name)
  }
}

// ---- main ---------------------------------------------------------------------------------
const MODES = { read, messages, charts, actions, scale }
let browser
let status = 0
try {
  if (!MODES[mode] && mode !== 'sasl') throw new Error('unknown mode ' + mode)
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true,
    args: LAUNCH_ARGS, timeout: WAIT_MS })
  result.browser = browser.version()
  if (mode === 'sasl') {
    await sasl(browser)
  } else {
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } })
    await MODES[mode](context)
  }
} catch (e) {
  status = 1
  result.error = String(e && e.stack || e).slice(0, 4000)
  try {
    for (const context of browser ? browser.contexts() : []) {
      for (const page of context.pages()) {
        await page.screenshot({ path: shotPath('error-' + mode), fullPage: true, timeout: 5000 })
        result.error_url = page.url()
      }
    }
  } catch (_) {}
} finally {
  if (browser) await browser.close().catch(() => {})
}
process.stdout.write(JSON.stringify(result) + '\n')
process.exit(status)
