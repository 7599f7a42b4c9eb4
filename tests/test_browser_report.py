"""End to end in a real browser: report.html built from a small database, rendered by headless
Chromium (Debian package `chromium`; `.ci/run` installs it): every image loads, no console error.

    .venv/bin/python -m pytest -q tests/test_browser_report.py

The page under test is report.html plus a probe script (the report itself has no script): it
records console.error calls, uncaught errors and failed resource loads from the first byte, and on
`load` writes a JSON verdict into the DOM, read back with --dump-dom. Chromium's own console log on
stderr (--enable-logging=stderr) is checked too. A deliberately broken page shows both checks fail.
"""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from llmbench.results import ResultsDB

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs it)")

PROBE_HEAD = """<script>
window.__errors = [];
(function () {
  var orig = console.error;
  console.error = function () {
    window.__errors.push('console.error: ' + Array.prototype.join.call(arguments, ' '));
    orig.apply(console, arguments);
  };
  window.addEventListener('error', function (e) {
    var t = e.target || {};
    window.__errors.push(t.src || t.href ? 'failed to load ' + (t.src || t.href) : 'uncaught: ' + e.message);
  }, true);
})();
</script>"""
PROBE_TAIL = """<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var broken = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                   .map(function (i) { return i.getAttribute('src'); });
  var d = document.createElement('pre'); d.id = 'llmbench-verdict';
  d.textContent = JSON.stringify({images: imgs.length, broken: broken, errors: window.__errors});
  document.body.appendChild(d);
});
</script>"""


def _fill_small_db(path: Path) -> Path:
    spec = importlib.util.spec_from_file_location("_report_tests", Path(__file__).with_name("test_report.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.fill_small_db(path)


def chromium(args: list[str], profile: Path, timeout: float = 90) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--hide-scrollbars",
           "--virtual-time-budget=10000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def render(page: Path, tmp: Path) -> tuple[dict, list[str]]:
    """Load `page` with the probe; returns (verdict, console lines Chromium logged)."""
    html = page.read_text()
    probe = page.with_name(f"probe-{page.name}")
    probed = html.replace("<head>", "<head>" + PROBE_HEAD, 1).replace("</body>", PROBE_TAIL + "</body>")
    probe.write_text(probed)
    out = chromium(["--dump-dom", probe.as_uri()], tmp / "profile")
    m = re.search(r'<pre id="llmbench-verdict">(.*?)</pre>', out.stdout, re.S)
    assert m, f"no verdict in the DOM (rc {out.returncode}): {out.stderr[-2000:]}"
    verdict = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    console = [ln for ln in out.stderr.splitlines() if ":CONSOLE" in ln]
    return verdict, console


@pytest.fixture(scope="module")
def built_report(tmp_path_factory):
    from llmbench.report.html import report

    tmp = tmp_path_factory.mktemp("browser")
    with ResultsDB(_fill_small_db(tmp / "small.db")) as db:
        summary = report(db, tmp / "out", log=lambda m: None)
    return Path(summary["report"]), tmp


def test_every_image_loads_and_no_console_error(built_report):
    page, tmp = built_report
    verdict, console = render(page, tmp)
    assert verdict["images"] == page.read_text().count('<img src="img/') >= 10
    assert verdict["broken"] == []
    assert verdict["errors"] == []
    assert console == []


def test_screenshot_is_not_blank(built_report):
    import matplotlib.image as mpimg

    page, tmp = built_report
    shot = tmp / "shot.png"
    out = chromium([f"--screenshot={shot}", "--window-size=1280,1800", page.as_uri()], tmp / "profile2")
    assert shot.exists(), out.stderr[-2000:]
    pixels = mpimg.imread(shot)
    assert pixels.shape[:2] == (1800, 1280)
    assert pixels[..., :3].std() > 0.05  # text, plots and colour, not an empty page


def test_the_check_fails_on_a_broken_page(tmp_path):
    """The probe is not vacuous: a missing image and a script error are both caught."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
                    '<img src="img/missing.png"><script>console.error("boom"); undefinedCall();</script>'
                    "</body></html>")
    verdict, console = render(page, tmp_path)
    assert verdict["broken"] == ["img/missing.png"]
    assert any("failed to load" in e and "missing.png" in e for e in verdict["errors"])
    assert any("boom" in e for e in verdict["errors"])
    assert any("undefinedCall" in e for e in verdict["errors"])
    assert any("boom" in ln for ln in console)


SVG_PROBE = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>%s
<script>
window.addEventListener('load', function () {
  var out = {};
  Array.prototype.forEach.call(document.querySelectorAll('object'), function (o) {
    var d = o.contentDocument, boxes = [], overlaps = [];
    if (!d) { out[o.id] = {error: 'not loaded'}; return; }
    Array.prototype.forEach.call(d.querySelectorAll('g[id^="text_"], g[id^="legend_"] g[id^="text_"]'),
      function (g) { var r = g.getBoundingClientRect(); if (r.width > 0) boxes.push([g.id, r]); });
    for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) {
      var a = boxes[i][1], b = boxes[j][1];
      var w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      var h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      var small = Math.min(a.width * a.height, b.width * b.height);
      if (w > 0 && h > 0 && w * h > 0.3 * small) overlaps.push(boxes[i][0] + ' / ' + boxes[j][0]);
    }
    out[o.id] = {texts: boxes.length, overlaps: overlaps, unfit: d.querySelectorAll('[id^="unfit-"]').length};
  });
  var p = document.createElement('pre'); p.id = 'svg-verdict'; p.textContent = JSON.stringify(out);
  document.body.appendChild(p);
});
</script></body></html>"""


@pytest.fixture(scope="module")
def oom_report(tmp_path_factory):
    """A report whose predictions include points that do not fit (GPT-2 XL GAS on a POD16, GPT-3
    30B on an A100, the sparsity and sequence-length sweeps): the studies' own predict sections."""
    from llmbench.report.html import report
    from llmbench.studies.predict import predict_all
    from llmbench.studies.spec import studies

    tmp = tmp_path_factory.mktemp("oom")
    with ResultsDB(tmp / "oom.db") as db:
        predict_all(db, [studies()[s] for s in ("gas", "sparsity", "gpt2-seq-length")], log=lambda m: None)
        summary = report(db, tmp / "out", log=lambda m: None)
    return Path(summary["report"]).parent, tmp


def svg_verdict(img_dir: Path, names: list[str], tmp: Path) -> dict:
    objs = "".join(f'<object id="{n}" data="img/{n}.svg" type="image/svg+xml"></object>' for n in names)
    page = img_dir.parent / "svg-probe.html"
    page.write_text(SVG_PROBE % objs)
    out = chromium(["--allow-file-access-from-files", "--dump-dom", page.as_uri()], tmp / "profile-svg")
    m = re.search(r'<pre id="svg-verdict">(.*?)</pre>', out.stdout, re.S)
    assert m, out.stderr[-2000:]
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def test_points_that_do_not_fit_are_hollow_and_no_label_overlaps(oom_report):
    out, tmp = oom_report
    v = svg_verdict(out / "img", ["gas", "sparsity", "seq_length"], tmp)
    for n in ("gas", "sparsity", "seq_length"):
        assert v[n].get("unfit", 0) > 0, (n, v[n])  # predicted oom: drawn hollow, in Chromium's DOM
        assert v[n]["texts"] > 10 and v[n]["overlaps"] == [], (n, v[n]["overlaps"])


@pytest.fixture(scope="module")
def user_report(tmp_path_factory):
    """`llmbench report --db` on a three-row user database (tests/test_report_user.py fills it:
    predict train --db, predict infer --db and one measured CPU run)."""
    from llmbench.cli import main

    spec = importlib.util.spec_from_file_location("_user_tests", Path(__file__).with_name("test_report_user.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tmp = tmp_path_factory.mktemp("user")

    def cli(*argv):
        import contextlib
        import io
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as e:
                code = e.code
        return code or 0, out.getvalue(), err.getvalue()

    page, _ = mod.build(tmp, cli)
    return page, tmp


def test_user_report_renders_exactly_its_rows_in_chromium(user_report):
    page, tmp = user_report
    verdict, console = render(page, tmp)
    assert verdict["images"] == 1 and verdict["broken"] == [] and verdict["errors"] == [] and console == []
    out = chromium(["--dump-dom", page.as_uri()], tmp / "profile-user")
    dom = out.stdout
    i = dom.index('id="t-mine"')
    mine = dom[i:dom.index("</section>", i)]
    assert mine.count("<tr>") == 4 and "gpt2-small" in mine and "llama-3.1-8b" in mine and "gpt2-xl" in mine
    assert "not measured / not available" not in dom and "No data" not in dom
    v = svg_verdict(page.parent / "img", ["mine"], tmp)
    assert v["mine"]["texts"] >= 6 and v["mine"]["overlaps"] == [], v["mine"]
