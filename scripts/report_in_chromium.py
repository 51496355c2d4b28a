#!/usr/bin/env python3
"""Opens kneepoint's report.html in headless Chromium from a file URL, with networking cut off,
and checks that it renders: no console messages, no page requests beyond file: and data:, the
plots present in the DOM. Takes a screenshot (report.png beside each report) to look at.

Usage:
  scripts/report_in_chromium.py            # runs a small sweep and a recommendation first
  scripts/report_in_chromium.py DIR...     # checks the report.html of existing artifact folders

Needs Debian's chromium (apt-get install chromium). Exits non-zero on any failed check.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Chromium's own background requests (not made by the page).
BROWSER_HOSTS = ("google.com", "gstatic.com", "googleapis.com", "googleusercontent.com")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    # Networking disabled: every request would go to a proxy that is not there.
    "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
]


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("chromium not found: apt-get install chromium")


def run_kneepoint(args):
    exe = os.path.join(ROOT, "target", "debug", "kneepoint")
    subprocess.run([exe] + args, check=True, stdout=subprocess.DEVNULL)


def page_requests(netlog):
    with open(netlog) as f:
        log = json.load(f)
    names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    urls = set()
    for e in log["events"]:
        url = (e.get("params") or {}).get("url")
        if not url or names.get(e["type"]) != "URL_REQUEST_START_JOB":
            continue
        host = url.split("/")[2] if "://" in url else ""
        if url.startswith(("file:", "data:")) or host.endswith(BROWSER_HOSTS):
            continue
        urls.add(url)
    return sorted(urls)


# Runs in a copy of the page (the report itself has no scripts) and writes what it finds into
# a <pre id="layout-check"> that --dump-dom returns.
LAYOUT_CHECK = r"""
<script>
window.addEventListener('load', () => {
  const out = [];
  const overlap = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 &&
                            a.top < b.bottom - 1 && b.top < a.bottom - 1;
  document.querySelectorAll('svg').forEach((svg, i) => {
    const name = (svg.closest('figure') || {}).ariaLabel || ('plot ' + i);
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim());
    const boxes = texts.map(t => t.getBoundingClientRect());
    for (let a = 0; a < texts.length; a++)
      for (let b = a + 1; b < texts.length; b++)
        // the same label drawn twice on one spot reads as one
        if (overlap(boxes[a], boxes[b]) &&
            !(texts[a].textContent === texts[b].textContent &&
              Math.abs(boxes[a].left - boxes[b].left) < 2 && Math.abs(boxes[a].top - boxes[b].top) < 2))
          out.push(`overlap in ${name}: "${texts[a].textContent.trim()}" / "${texts[b].textContent.trim()}"`);
    // Marks of different series (colours) on one spot must differ in size, or the top one
    // hides the others; a scatter's points share one colour and may pile up.
    const spots = new Map();
    svg.querySelectorAll('circle').forEach(c => {
      const key = Math.round(+c.getAttribute('cx')) + ',' + Math.round(+c.getAttribute('cy'));
      const colour = (c.getAttribute('fill') || '') + '/' + (c.getAttribute('stroke') || '');
      const r = c.getAttribute('r');
      if (!spots.has(key)) spots.set(key, new Map());
      const sizes = spots.get(key);
      if (!sizes.has(r)) sizes.set(r, new Set());
      sizes.get(r).add(colour);
    });
    spots.forEach((sizes, key) => sizes.forEach((colours, r) => {
      if (colours.size > 1)
        out.push(`in ${name}: ${colours.size} series drawn alike (r=${r}) on one spot (${key})`);
    }));
  });
  const answer = document.querySelector('.answer');
  if (answer) answer.innerHTML.split(/<br\s*\/?>/).forEach(line => {
    const text = line.replace(/<[^>]+>/g, '').trim();
    if (text && !/[.)]$/.test(text)) out.push(`answer line not ended: "${text.slice(-60)}"`);
  });
  const pre = document.createElement('pre');
  pre.id = 'layout-check';
  pre.textContent = out.length ? out.join('\n') : 'OK';
  document.body.appendChild(pre);
});
</script>
"""


def layout_problems(html, browser, common, tmp):
    """Overlapping text in the plots, marks hidden under others, answer lines not ended."""
    with open(html) as f:
        page = f.read()
    probe = os.path.join(os.path.dirname(html), ".layout-check.html")
    with open(probe, "w") as f:
        f.write(page.replace("</body>", LAYOUT_CHECK + "</body>"))
    try:
        dom = subprocess.run([browser] + common + ["--window-size=1200,2200",
                                                   "--virtual-time-budget=5000",
                                                   "--dump-dom", "file://" + probe],
                             capture_output=True, text=True, timeout=120).stdout
    finally:
        os.remove(probe)
    start = dom.find('<pre id="layout-check">')
    if start < 0:
        return ["the layout check did not run"]
    body = dom[start + len('<pre id="layout-check">'):dom.find("</pre>", start)]
    body = body.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
    return [] if body.strip() == "OK" else body.strip().splitlines()


def check(folder, browser):
    html = os.path.join(os.path.abspath(folder), "report.html")
    if not os.path.isfile(html):
        return [f"{html} is missing"]
    url = "file://" + html
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        netlog = os.path.join(tmp, "net.json")
        shot = os.path.join(os.path.dirname(html), "report.png")
        common = FLAGS + ["--user-data-dir=" + os.path.join(tmp, "profile")]
        r = subprocess.run(
            [browser] + common + ["--enable-logging=stderr", "--v=0", "--log-net-log=" + netlog,
                                  "--window-size=1200,2200", "--screenshot=" + shot, url],
            capture_output=True, text=True, timeout=120)
        console = [l for l in r.stderr.splitlines() if ":CONSOLE" in l]
        problems += [f"console: {l}" for l in console]
        requests = page_requests(netlog)
        problems += [f"network request: {u}" for u in requests]
        if not os.path.isfile(shot) or os.path.getsize(shot) < 20_000:
            problems.append("no screenshot (or a blank one)")
        dom = subprocess.run([browser] + common + ["--dump-dom", url],
                             capture_output=True, text=True, timeout=120).stdout
        svgs = dom.count("<svg")
        if os.path.isfile(os.path.join(folder, "length_sweep.json")) and (
                "TTFT against the prompt" not in dom or "Prefill:" not in dom):
            problems.append("a length sweep's page lacks its curves or its prefill rate")
        if svgs < 1 or "Answer." not in dom:
            problems.append(f"the DOM lacks the plots or the answer ({svgs} svg)")
        problems += layout_problems(html, browser, common, tmp)
        print(f"{html}: {svgs} inline SVG plots, {len(console)} console messages, "
              f"{len(requests)} page requests; screenshot {shot}")
    return problems


def main():
    browser = chromium()
    folders = sys.argv[1:]
    if not folders:
        subprocess.run(["cargo", "build", "--quiet", "--bin", "kneepoint"], cwd=ROOT, check=True)
        work = tempfile.mkdtemp(prefix="kneepoint-report-")
        sweep = os.path.join(work, "sweep")
        run_kneepoint(["sweep", "--sim-profile", "fast", "--sim-time-scale", "1",
                       "--concurrency", "1,4,16,64", "--request-count", "64", "--isl", "128",
                       "--osl", "16", "--e2e-sla-ms", "120", "--quiet", "--artifact-dir", sweep])
        config = os.path.join(work, "rec.toml")
        with open(config, "w") as f:
            f.write("""objective = "cost"
[workload]
prompt_input_tokens_mean = 64
output_tokens_mean = 16
[sweep_params]
concurrency = [4, 16, 64]
request_count = 64
[fleet]
peak_concurrency = 400
[[candidates]]
name = "fast-expensive"
instance_type = "sim.8xlarge"
price_per_hour = 10.0
simulator = { profile = "fast", slowdown = 0.5, time_scale = 1.0 }
[[candidates]]
name = "slow-cheap"
instance_type = "sim.large"
price_per_hour = 1.0
simulator = { profile = "fast", slowdown = 2.0, time_scale = 1.0 }
""")
        rec = os.path.join(work, "recommend")
        run_kneepoint(["recommend", "--config", config, "--quiet", "--artifact-dir", rec])
        lengths = os.path.join(work, "lengths")
        run_kneepoint(["sweep", "--sim-profile", "fast", "--sim-time-scale", "2",
                       "--isl", "128,1024,4000", "--osl", "8", "--request-count", "8", "--quiet",
                       "--artifact-dir", lengths])
        folders = [sweep, rec, os.path.join(rec, "candidate_slow-cheap"), lengths]
    problems = []
    for folder in folders:
        problems += [f"{folder}: {p}" for p in check(folder, browser)]
    for p in problems:
        print("FAIL", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
