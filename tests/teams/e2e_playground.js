// End-to-end through the Microsoft 365 Agents Playground in headless Chromium (Debian's), driven by
// playwright-core. Run by tests/teams/test_e2e_playground.py, which starts the bot.
// Env: PLAYGROUND_URL, PLAYWRIGHT (path to playwright-core), CHROMIUM (/usr/bin/chromium), SHOTS (dir),
//      E2E_TOKEN (makes this run's URL unique in a Playground conversation that may hold older runs).
// Prints PASS/FAIL lines and "N passed, N failed"; exit code 0 only if every check passed.
const path = require('path');
const fs = require('fs');
const { chromium } = require(process.env.PLAYWRIGHT);

const URL_ = process.env.PLAYGROUND_URL;
const SHOTS = process.env.SHOTS;
const TOKEN = process.env.E2E_TOKEN || String(Date.now());
const TARGET = `https://example.com/data-${TOKEN}.csv`;
const WAIT = 30000;

let passed = 0;
let failed = 0;
function check(name, cond, detail = '') {
  if (cond) { passed++; console.log(`PASS ${name}`); } else { failed++; console.log(`FAIL ${name} ${detail}`); }
}

(async () => {
  fs.mkdirSync(SHOTS, { recursive: true });
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  const shot = async (name) => { await page.screenshot({ path: path.join(SHOTS, name) }); console.log(`screenshot ${name}`); };
  try {
    // Nothing leaves the machine: the UI's only outside requests (fonts, an animation) are blocked.
    await page.route('**/*', (route) => {
      const u = route.request().url();
      if (/^(https?|wss?):\/\/(localhost|127\.0\.0\.1)(:\d+)?\//.test(u) || /^(data|blob):/.test(u)) return route.continue();
      return route.abort();
    });
    page.on('pageerror', (e) => console.log('PAGEERROR', e.message));
    // The composer is the Lexical editor; the log panel is contenteditable too, so be specific.
    const composer = page.locator('[data-lexical-editor="true"][role="textbox"]').first();
    const send = async (text) => {
      await composer.click();
      await page.keyboard.type(text);
      await page.getByRole('button', { name: 'Send Message' }).click();
    };

    await page.goto(URL_, { waitUntil: 'networkidle' });
    await page.getByText('Personal Chat').first().waitFor({ timeout: WAIT });
    await page.waitForTimeout(1500); // the Playground starts the conversation when the UI connects
    await shot('01-playground.png');

    async function approveAndRevoke() {
      // 1. A message naming a URL -> the approval card
      await send(`please fetch ${TARGET}`);
      const card = page.locator('.ac-adaptiveCard', { hasText: 'Approval needed' }).filter({ hasText: TARGET });
      await card.first().waitFor({ timeout: WAIT });
      await shot('02-approval-card.png');
      // The card alone, cropped to its box: scripts/card-pictures copies it to docs/img/teams-card.png.
      await card.first().screenshot({ path: path.join(SHOTS, 'card-download.png') });
      console.log('screenshot card-download.png');
      check('approval card shows the URL with Approve and Deny',
        (await card.getByRole('button', { name: 'Approve' }).count()) === 1 &&
        (await card.getByRole('button', { name: 'Deny' }).count()) === 1);

      // 2. Approve -> the card is replaced, the agent's reply appears
      await card.getByRole('button', { name: 'Approve' }).click();
      const outcome = page.locator('.ac-adaptiveCard', { hasText: 'Approved by' }).filter({ hasText: TARGET });
      await outcome.first().waitFor({ timeout: WAIT });
      check('card replaced by its outcome', (await card.count()) === 0, `still ${await card.count()} question card(s)`);
      let replied = false;
      for (let i = 0; i < 60 && !replied; i++) {
        // the agent's reply is a plain message (outside any card) that names the approved site
        replied = await page.evaluate((tok) => Array.from(document.querySelectorAll('p, span, div, a'))
          .some((el) => !el.closest('.ac-adaptiveCard') && (el.textContent || '').includes(`data-${tok}`)
            && /^Approved: /.test((el.closest('p, div') || el).textContent || '')), TOKEN);
        if (!replied) await page.waitForTimeout(500);
      }
      await shot('03-approved-and-reply.png');
      check("the agent's reply is shown", replied);

      // 3. `approvals` -> the grants card; Revoke -> the grant is gone
      await send('approvals');
      const grants = page.locator('.ac-adaptiveCard', { hasText: 'Your approvals' }).filter({ hasText: 'example.com' }).last();
      await grants.waitFor({ timeout: WAIT });
      await shot('04-approvals.png');
      const revoke = grants.getByRole('button', { name: 'Revoke', exact: true });
      check('grants card lists example.com with a Revoke button', (await revoke.count()) === 1, `revoke buttons: ${await revoke.count()}`);
      await revoke.first().click();
      const revoked = page.locator('.ac-adaptiveCard', { hasText: 'Revoked: example.com.' }).last();
      await revoked.waitFor({ timeout: WAIT });
      await shot('05-revoked.png');
      check('after Revoke the card says the grant is gone',
        (await revoked.getByText('You have no approvals in this chat.').count()) === 1);
    }

    if (process.env.E2E_FLOW === 'group-approver') {
      // Issue 13 in the Playground's Group Chat. The Playground's UI always acts as its current user
      // (Alex Wilber, the requester); the policy says an approver must answer. The second member of
      // the group chat (Megan Bowen, an approver) answers through the Playground's own invoke API
      // (/_conversation/v1/invoke, the call its UI makes for a card click, which accepts any member
      // of the conversation as `from`): the Playground builds and sends her invoke to the bot.
      const CORP = `https://files.corp.example.com/data-${TOKEN}.csv`;
      await page.getByText('Group Chat', { exact: true }).first().click();
      await page.waitForTimeout(1500);
      await shot('11-group-chat.png');
      // In a group chat the bot hears only messages that @mention it (as in Teams).
      await composer.click();
      await page.keyboard.type('@Test');
      await page.waitForTimeout(1500); // the Playground's mention menu searches members after 500 ms
      await shot('11b-mention-menu.png');
      await page.getByText('Test Bot', { exact: true }).last().click(); // the menu's entry: the bot
      check('the composer holds a mention of the bot', (await page.locator('[data-lexical-editor="true"] .mention').count()) === 1);
      await page.keyboard.type(` please fetch ${CORP}`);
      await page.getByRole('button', { name: 'Send Message' }).click();
      const card = page.locator('.ac-adaptiveCard', { hasText: 'Approval needed' }).filter({ hasText: CORP });
      await card.first().waitFor({ timeout: WAIT });
      await shot('12-group-card.png');
      check('the group chat card says an approver must answer',
        (await card.getByText('An approver must answer', { exact: false }).count()) >= 1);
      // 1. The requester clicks Approve: refused, read-only; capture the click the UI sent.
      const sent = page.waitForRequest((r) => r.url().includes('/v1/invoke') && r.method() === 'POST', { timeout: WAIT });
      await card.getByRole('button', { name: 'Approve' }).click();
      const click = await sent;
      const refused = page.locator('.ac-adaptiveCard', { hasText: 'Not yours to answer' }).filter({ hasText: CORP });
      await refused.first().waitFor({ timeout: WAIT });
      await shot('13-requester-refused.png');
      check('the requester is refused with a read-only card',
        (await refused.first().getByRole('button').count()) === 0);
      // 2. Megan Bowen, the second member of the group chat, clicks Approve on the same card.
      const body = JSON.parse(click.postData());
      check('the UI sent the click as its own user', body.from && body.from.id === 'user-id-0', JSON.stringify(body.from));
      const res = await page.evaluate(async ([u, b]) => {
        const r = await fetch(u, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(b) });
        return { status: r.status, text: await r.text() };
      }, [click.url(), { ...body, from: { id: 'user-id-1' } }]);
      check("the Playground sent the second member's click", res.status === 200, `${res.status} ${res.text.slice(0, 300)}`);
      check('the answer to her click is the outcome, approved by Megan Bowen', res.text.includes('Approved by Megan Bowen'),
        res.text.slice(0, 300));
      // the bot updates the group chat's card for everyone (the Playground shows the update live)
      const outcome = page.locator('.ac-adaptiveCard', { hasText: 'Approved by Megan Bowen' }).filter({ hasText: CORP });
      await outcome.first().waitFor({ timeout: WAIT });
      await shot('14-approved-by-second-user.png');
      check('the card in the group chat shows the outcome for everyone', (await outcome.count()) >= 1);
    } else if (process.env.E2E_FLOW === 'note') {
      // Issue 14: a gated tool. `save a note: …` -> a tool card -> Approve once -> the note is saved.
      const NOTE = `hello-${TOKEN}`;
      await send(`save a note: ${NOTE}`);
      const tcard = page.locator('.ac-adaptiveCard', { hasText: 'Approval needed' }).filter({ hasText: NOTE });
      await tcard.first().waitFor({ timeout: WAIT });
      await shot('02-tool-card.png');
      check('tool card names save_note and offers Approve once, Approve for this chat and Deny',
        (await tcard.getByText('save_note').count()) >= 1 &&
        (await tcard.getByRole('button', { name: 'Approve once', exact: true }).count()) === 1 &&
        (await tcard.getByRole('button', { name: 'Approve for this chat', exact: true }).count()) === 1 &&
        (await tcard.getByRole('button', { name: 'Deny', exact: true }).count()) === 1);
      await tcard.getByRole('button', { name: 'Approve once', exact: true }).click();
      const tdone = page.locator('.ac-adaptiveCard', { hasText: 'Approved once by' }).filter({ hasText: NOTE });
      await tdone.first().waitFor({ timeout: WAIT });
      let saved = false;
      for (let i = 0; i < 60 && !saved; i++) {
        saved = await page.evaluate((note) => Array.from(document.querySelectorAll('p, span, div'))
          .some((el) => !el.closest('.ac-adaptiveCard') && (el.textContent || '').includes(`Saved the note: ${note}`)), NOTE);
        if (!saved) await page.waitForTimeout(500);
      }
      await shot('03-note-saved.png');
      check('the agent says the note was saved', saved);
    } else if (process.env.E2E_FLOW === 'batch') {
      // Issue 32: two gated calls in one step -> one batch card; decide each (once / deny) and send.
      const A = `first-${TOKEN}`;
      const B = `second-${TOKEN}`;
      await send(`save two notes: ${A} | ${B}`);
      const bcard = page.locator('.ac-adaptiveCard', { hasText: '2 requests in one step' }).filter({ hasText: A });
      await bcard.first().waitFor({ timeout: WAIT });
      await shot('31-batch-card.png');
      await bcard.first().screenshot({ path: path.join(SHOTS, 'card-batch.png') });
      const selects = bcard.first().getByRole('combobox');  // a compact ChoiceSet: the Playground's dropdown
      check('the batch card lists both calls, each with its own decision',
        (await bcard.getByText(B).count()) >= 1 && (await selects.count()) === 2, `choices: ${await selects.count()}`);
      const choose = async (n, label) => {
        await selects.nth(n).click();
        await page.getByRole('option', { name: label, exact: true }).last().click();
      };
      await choose(0, 'Approve once');
      await choose(1, 'Deny');
      await bcard.getByRole('button', { name: 'Decide each', exact: true }).click();
      await bcard.getByRole('textbox').first().fill('not this one');
      await shot('32-batch-decided.png');
      await bcard.getByRole('button', { name: 'Send these decisions', exact: true }).click();
      const bdone = page.locator('.ac-adaptiveCard', { hasText: 'Partly approved by' }).filter({ hasText: A });
      await bdone.first().waitFor({ timeout: WAIT });
      let reply = null;
      for (let i = 0; i < 60 && !reply; i++) {
        reply = await page.evaluate((a) => Array.from(document.querySelectorAll('p, span, div'))
          .filter((el) => !el.closest('.ac-adaptiveCard')).map((el) => el.textContent || '')
          .find((t) => t.includes(`Saved the note: ${a}`) && t.includes('Not saved: you denied the note (not this one).')) || null, A);
        if (!reply) await page.waitForTimeout(500);
      }
      await shot('33-batch-answered.png');
      check('the first note is saved and the second denied with its reason', reply !== null);
    } else if (process.env.E2E_FLOW === 'demo') {
      // Issue 28: the offline demo. data.example.test is the local demo origin behind the real gate.
      const DATA = `http://data.example.test/data.csv?run=${TOKEN}`;
      const plainText = async (pred) => {
        for (let i = 0; i < 60; i++) {
          const found = await page.evaluate((src) => Array.from(document.querySelectorAll('p, span, div'))
            .filter((el) => !el.closest('.ac-adaptiveCard')).map((el) => el.textContent || '')
            .find((t) => new Function('t', `return ${src}`)(t)) || null, pred);
          if (found) return found;
          await page.waitForTimeout(500);
        }
        return null;
      };
      await send(`please fetch ${DATA}`);
      const card = page.locator('.ac-adaptiveCard', { hasText: 'Approval needed' }).filter({ hasText: TOKEN });
      await card.first().waitFor({ timeout: WAIT });
      await card.first().screenshot({ path: path.join(SHOTS, 'card-download.png') });
      await shot('21-demo-card.png');
      const cardText = (await card.first().textContent()) || '';
      check('the card says who asked, what Approve allows and until when, and Answer by',
        cardText.includes('Requested by Alex Wilber') && cardText.includes('Allow data.example.test in this chat for 8 h')
          && cardText.includes('Answer by'), cardText.slice(0, 400));
      await card.getByRole('button', { name: 'Approve', exact: true }).click();
      const rows = await plainText(`t.startsWith('Downloaded http://data.example.test/data.csv?run=${TOKEN}: 12 rows')`);
      await shot('22-demo-rows.png');
      check('after Approve the agent reports the rows it downloaded through the gate', rows !== null);

      const NOTE = `hello-${TOKEN}`;
      await send(`save a note: ${NOTE}`);
      const tcard = page.locator('.ac-adaptiveCard', { hasText: 'Approval needed' }).filter({ hasText: NOTE });
      await tcard.first().waitFor({ timeout: WAIT });
      await tcard.first().screenshot({ path: path.join(SHOTS, 'card-tool.png') });
      await tcard.getByRole('button', { name: 'Approve once', exact: true }).click();
      const saved = await plainText(`t.includes('Saved the note: ${NOTE}')`);
      await shot('23-note-saved.png');
      check('Approve once saves the note', saved !== null);

      const NOPE = `nope-${TOKEN}`;
      await send(`save a note: ${NOPE}`);
      const dcard = page.locator('.ac-adaptiveCard', { hasText: 'Approval needed' }).filter({ hasText: NOPE });
      await dcard.first().waitFor({ timeout: WAIT });
      await dcard.getByRole('button', { name: 'Deny', exact: true }).click(); // opens the reason, next to Deny
      const reason = dcard.getByRole('textbox').first();
      await reason.waitFor({ timeout: WAIT });
      await reason.fill('not on Fridays');
      await shot('24-deny-reason.png');
      await dcard.getByRole('button', { name: 'Confirm deny', exact: true }).click();
      const denied = await plainText("t.startsWith('Not saved: you denied the note (not on Fridays).')");
      await shot('25-denied.png');
      check('a deny with a reason shows the reason, not the model\'s instruction',
        denied !== null && !denied.includes('Do not try'), String(denied));
    } else if (process.env.E2E_FLOW === 'reminder') {
      // Issue 33: a card nobody answers; the test moves the server's clock past `remind_after` once
      // the card exists, and the reminder appears in the chat, mentioning the requester.
      await send(`please fetch ${TARGET}`);
      const card = page.locator('.ac-adaptiveCard', { hasText: 'Approval needed' }).filter({ hasText: TARGET });
      await card.first().waitFor({ timeout: WAIT });
      let reminder = null;
      for (let i = 0; i < 120 && !reminder; i++) {
        reminder = await page.evaluate(() => Array.from(document.querySelectorAll('p, span, div'))
          .filter((el) => !el.closest('.ac-adaptiveCard')).map((el) => el.textContent || '')
          .find((t) => t.startsWith('Reminder for')) || null);
        if (!reminder) await page.waitForTimeout(500);
      }
      await shot('31-reminder.png');
      check('the reminder appears in the chat', reminder !== null);
      check('it names the requester, who has not answered, and a readable time',
        (reminder || '').includes('Alex Wilber') && (reminder || '').includes(' UTC') && !(reminder || '').includes('{{'),
        String(reminder));
      check('the card is still answerable', (await card.getByRole('button', { name: 'Approve' }).count()) === 1);
    } else if (process.env.E2E_FLOW === 'packages') {
      // A card asking for two packages: untick one, Approve; the client merges the choice into the data.
      await send(`analyse the table ${TOKEN}`);
      const pcard = page.locator('.ac-adaptiveCard', { hasText: 'Packages to allow' }).last();
      await pcard.waitFor({ timeout: WAIT });
      check('package card offers each package', (await pcard.getByRole('checkbox').count()) === 2);
      await pcard.getByRole('checkbox', { name: 'numpy' }).uncheck();
      await shot('02-package-choice.png');
      await pcard.getByRole('button', { name: 'Approve' }).click();
      const done = page.locator('.ac-adaptiveCard', { hasText: 'Approved by Alex Wilber' }).filter({ hasText: 'Not allowed: numpy' });
      await done.first().waitFor({ timeout: WAIT });
      await shot('03-packages-approved.png');
      check('outcome names only the chosen package', (await done.count()) >= 1);
    } else {
      await approveAndRevoke();
    }
  } catch (e) {
    failed++;
    console.log(`FAIL exception ${e.stack || e}`);
    await page.screenshot({ path: path.join(SHOTS, '99-failure.png') }).catch(() => {});
  } finally {
    await browser.close();
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
})();
