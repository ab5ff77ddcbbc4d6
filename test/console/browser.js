// Drives the web console in headless Chromium, as a user would, for console_test.go, which
// starts the cluster and the console and answers this script's calls to CONTROL_URL (consume
// and commit with a group client, stop a broker). Each step checks what the page shows and
// writes a screenshot to SCREENSHOTS. Exits non-zero, naming the step, on the first failure.
"use strict";
const { chromium } = require("playwright-core");
const path = require("path");

const base = process.env.CONSOLE_URL;
const control = process.env.CONTROL_URL;
const shots = process.env.SCREENSHOTS;
const topic = process.env.TOPIC;
const group = process.env.GROUP;

function check(cond, what) {
  if (!cond) throw new Error(what);
}

async function call(what) {
  const res = await fetch(control + what, { method: "POST" });
  const body = await res.text();
  check(res.ok, `control ${what}: ${res.status} ${body}`);
}

// until calls cond (which may reload the page) until it is true, at most 15 s, 200 ms apart.
async function until(cond, what) {
  const deadline = Date.now() + 15000;
  while (!(await cond())) {
    check(Date.now() < deadline, what);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(shots, name + ".png"), fullPage: true });
}

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
  });
  let step = "start";
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(20000);
  try {
    step = "overview shows three brokers online and the active controller";
    await page.goto(base + "/");
    await page.locator("#brokers tbody tr").nth(2).waitFor();
    check((await page.locator("#brokers tbody tr").count()) === 3, "three broker rows");
    check((await page.locator("#brokers td.status", { hasText: "offline" }).count()) === 0, "no broker offline");
    check(/^[123]$/.test((await page.locator("#controller").textContent()).trim()), "an active controller");
    await shot(page, "overview");

    step = "create a topic from the form";
    await page.goto(base + "/topics");
    await page.fill("#create-topic input[name=name]", topic);
    await page.fill("#create-topic input[name=partitions]", "3");
    await page.fill("#create-topic input[name=replication]", "3");
    await page.fill("#create-topic textarea[name=configs]", "retention.ms=3600000");
    await page.click("#create-topic button");
    await page.waitForURL("**/topics/" + topic);
    check((await page.locator("#partitions tbody tr").count()) === 3, "three partitions");
    check((await page.locator('#configs tr[data-config="retention.ms"] td').nth(2).textContent()) === "topic", "retention.ms from the topic");
    await shot(page, "topic");

    step = "Kafka's validation error for a topic that exists";
    await page.goto(base + "/topics");
    await page.fill("#create-topic input[name=name]", topic);
    await page.click("#create-topic button");
    check((await page.locator("#error").textContent()).includes("TOPIC_ALREADY_EXISTS"), "TOPIC_ALREADY_EXISTS shown");

    step = "produce three records from the form";
    await page.goto(base + "/topics/" + topic + "/messages");
    for (const i of [1, 2, 3]) {
      await page.fill("#produce input[name=key]", "key-" + i);
      await page.fill("#produce textarea[name=headers]", "source=console");
      await page.fill("#produce textarea[name=value]", JSON.stringify({ order: i, item: "widget" }));
      await page.click("#produce button");
      await page.locator("#msg").waitFor();
      check((await page.locator("#msg").textContent()).startsWith("produced to partition"), "produced " + i);
    }

    step = "the message browser finds each record by key";
    for (const i of [1, 2, 3]) {
      await page.goto(base + "/topics/" + topic + "/messages?key=key-" + i + "&fmt=json");
      const rows = page.locator("#messages tbody tr[data-key]");
      check((await rows.count()) === 1, "one record with key-" + i);
      check((await rows.first().getAttribute("data-key")) === "key-" + i, "its key");
      const text = await rows.first().textContent();
      check(text.includes('"order": ' + i) && text.includes("source=console"), "its pretty JSON value and header");
    }
    await page.goto(base + "/topics/" + topic + "/messages");
    await page.selectOption("#browse select[name=fmt]", "json");
    await page.click("#browse button");
    check((await page.locator("#messages tbody tr[data-key]").count()) === 3, "all three from the newest");
    await shot(page, "messages");

    step = "a group that consumed them has lag 0";
    await call("/consume");
    await page.goto(base + "/groups");
    await page.click(`#groups a:text-is("${group}")`);
    await page.waitForURL("**/groups/" + group);
    check((await page.locator("#total-lag").textContent()) === "0", "total lag 0");
    const committed = await page.locator("#lag tbody tr[data-tp] td:nth-child(3)").allTextContents();
    check(committed.reduce((a, b) => a + Number(b), 0) === 3, "committed offsets add up to 3, got " + committed);
    await shot(page, "group");

    step = "a group with a member shows it, and refuses a reset";
    await call("/join");
    await page.goto(base + "/groups/" + group);
    check((await page.locator("#members tbody tr").first().textContent()).includes("console-test-member"), "the member's client id");
    await page.selectOption("#reset select[name=mode]", "earliest");
    await page.click('#reset button[value="preview"]');
    check((await page.locator("#error").textContent()).includes("active member"), "reset refused while the group has a member");
    check((await page.locator("#preview").count()) === 0, "no preview");
    await shot(page, "group-members");
    await call("/leave");

    step = "reset the group's offsets to earliest: preview, apply, lag 3";
    await page.goto(base + "/groups/" + group);
    await page.selectOption("#reset select[name=mode]", "earliest");
    await page.click('#reset button[value="preview"]');
    await page.locator("#preview").waitFor();
    const newLags = await page.locator("#preview tbody tr td:nth-child(6)").allTextContents();
    check(newLags.reduce((a, b) => a + Number(b), 0) === 3, "preview: new lag 3 in all, got " + newLags);
    check((await page.locator("#total-lag").textContent()) === "0", "nothing applied by the preview");
    await shot(page, "group-reset-preview");
    await page.click("#apply");
    await page.locator("#msg").waitFor();
    check((await page.locator("#total-lag").textContent()) === "3", "total lag 3 after the reset");
    await shot(page, "group-reset");

    step = "delete the topic";
    await page.goto(base + "/topics/" + topic);
    page.once("dialog", (d) => d.accept());
    await page.click("#delete-topic button");
    await page.waitForURL("**/topics?deleted=*");
    // Brokers apply the deletion from the metadata log as they catch up: the list drops
    // the topic once the broker the console asks has.
    await until(async () => {
      if ((await page.locator(`#topics tr[data-topic="${topic}"]`).count()) === 0) return true;
      await page.reload();
      return false;
    }, "topic gone from the list");

    step = "a deleted topic's page says it does not exist";
    let res;
    await until(async () => (res = await page.goto(base + "/topics/" + topic)).status() === 404,
      "the deleted topic's page answers 404");
    check((await page.locator("#not-found").textContent()).includes(topic), "not found names the topic");
    await shot(page, "topic-not-found");

    step = "a broker stopped while the overview is open shows offline and under-replicated";
    await page.goto(base + "/");
    await call("/stop");
    // The overview reloads itself (each sample interval): check each load until it shows
    // broker 3 offline with under-replicated partitions, or the deadline passes.
    const deadline = Date.now() + 30000;
    for (;;) {
      const st = await page.locator('#brokers tr[data-broker="3"] .status').textContent().catch(() => "");
      const ur = Number(await page.locator("#under-replicated").textContent().catch(() => "0"));
      if (st === "offline" && ur > 0) break;
      check(Date.now() < deadline, `broker 3 ${st}, ${ur} under-replicated`);
      await page.waitForEvent("load", { timeout: 10000 });
    }
    await shot(page, "overview-broker-stopped");
  } catch (e) {
    console.error(`step "${step}": ${e.message}`);
    try { await shot(page, "failed"); } catch (_) {}
    await browser.close();
    process.exit(1);
  }
  await browser.close();
})();
