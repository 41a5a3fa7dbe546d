#!/usr/bin/env python3
"""The browser test's look at each chart kind (tests/report_browser_test.sh).

  report_chart_check.py split DOM.html DIR   one page per chart kind: DIR/kind-<k>.html, the
                                              first chart of each kind alone, with a script
                                              that measures its layout in the browser
  report_chart_check.py check DIR            read DIR/kind-<k>.dom (Chromium's --dump-dom) and
                                              DIR/kind-<k>.png (its --screenshot at 1280 px)

A kind's page reports, measured by the browser: text outside the chart, legend entries over
the plot or over each other, axis tick labels over each other, swimlane lane labels running
into the bars. The screenshot must be a PNG of 1280 px width that shows the chart: enough
non-background pixels in several colours. Exit 1 naming each problem."""
import re
import struct
import sys
import zlib

KINDS = ["cdf", "goodput_rps", "ttft_ms_mean", "stranded_slots", "swimlane"]

MEASURE = r"""
(function () {
  var svg = document.querySelector('svg'), problems = [];
  if (!svg) { document.body.setAttribute('data-layout', 'no chart'); return; }
  var sb = svg.getBoundingClientRect();
  function ov(a, b) { return a.left < b.right - 0.5 && b.left < a.right - 0.5 &&
                             a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5; }
  var texts = Array.prototype.slice.call(svg.querySelectorAll('text'));
  texts.forEach(function (t) {
    var b = t.getBoundingClientRect();
    if (b.width && (b.left < sb.left - 1 || b.right > sb.right + 1 || b.top < sb.top - 1 ||
                    b.bottom > sb.bottom + 1))
      problems.push('text outside the chart: ' + t.textContent);
  });
  var plot = svg.querySelector('rect.plot');
  var legs = Array.prototype.slice.call(svg.querySelectorAll('g.legend-item'));
  legs.forEach(function (g, i) {
    var a = g.getBoundingClientRect();
    if (plot && ov(a, plot.getBoundingClientRect())) problems.push('legend over the plot: ' + g.textContent);
    legs.forEach(function (h, j) {
      if (j > i && ov(a, h.getBoundingClientRect()))
        problems.push('legend entries overlap: ' + g.textContent + ' / ' + h.textContent);
    });
  });
  var rows = {};  /* tick labels: centred texts on one line must keep apart */
  texts.forEach(function (t) {
    if (t.getAttribute('text-anchor') !== 'middle' || t.hasAttribute('transform')) return;
    var y = t.getAttribute('y');
    (rows[y] = rows[y] || []).push(t);
  });
  Object.keys(rows).forEach(function (y) {
    var r = rows[y];
    for (var i = 0; i < r.length; i++)
      for (var j = i + 1; j < r.length; j++)
        if (ov(r[i].getBoundingClientRect(), r[j].getBoundingClientRect()))
          problems.push('tick labels overlap: ' + r[i].textContent + ' / ' + r[j].textContent);
  });
  if (svg.classList.contains('swimlane')) {  /* lane labels stay left of the first bar */
    var bars = Array.prototype.slice.call(svg.querySelectorAll('rect.span'));
    var left = Math.min.apply(null, bars.map(function (b) { return b.getBoundingClientRect().left; }));
    texts.forEach(function (t) {
      if (t.getAttribute('x') === '4' && t.getBoundingClientRect().right > left + 1)
        problems.push('lane label runs into the bars: ' + t.textContent);
    });
    if (!bars.length) problems.push('no bars');
  }
  document.body.setAttribute('data-layout', problems.length ? problems.join('; ') : 'ok');
})();
"""


def split(dom_path, out_dir):
    dom = open(dom_path, encoding="utf-8").read()
    css = re.search(r"<style>(.*?)</style>", dom, re.S).group(1)
    missing = []
    for k in KINDS:
        pat = (r'<svg class="swimlane".*?</svg>' if k == "swimlane"
               else r'<svg class="chart" data-kind="%s".*?</svg>' % k)
        m = re.search(pat, dom, re.S)
        if not m:
            missing.append(k)
            continue
        page = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>%s</style></head>"
                "<body>%s<script>%s</script></body></html>" % (css, m.group(0), MEASURE))
        open("%s/kind-%s.html" % (out_dir, k), "w", encoding="utf-8").write(page)
    if missing:
        print("report_chart_check: no chart of kind %s in the report" % ", ".join(missing))
        return 1
    return 0


def png_pixels(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB/RGBA non-interlaced PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, t = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if t == b"IHDR":
            w, h, depth, ctype, _, _, inter = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or inter:
                raise ValueError("PNG type %d/%d not read here" % (ctype, depth))
            bpp = 3 if ctype == 2 else 4
        elif t == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, prev, rows, i = zlib.decompress(idat), w * bpp, None, [], 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x] if prev else 0
            c = prev[x - bpp] if prev and x >= bpp else 0
            if f == 1: line[x] = (line[x] + a) & 255
            elif f == 2: line[x] = (line[x] + b) & 255
            elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def check(out_dir):
    problems = []
    for k in KINDS:
        dom = open("%s/kind-%s.dom" % (out_dir, k), encoding="utf-8").read()
        m = re.search(r'<body[^>]*data-layout="([^"]*)"', dom)
        if not m:
            problems.append("%s: the layout script did not run" % k)
        elif m.group(1) != "ok":
            problems.append("%s: %s" % (k, m.group(1)))
        try:
            w, h, rows = png_pixels("%s/kind-%s.png" % (out_dir, k))
        except (OSError, ValueError) as e:
            problems.append("%s: screenshot: %s" % (k, e))
            continue
        bg = rows[0][0]
        ink = sum(1 for r in rows for p in r if p != bg)
        colours = len({p for r in rows for p in r})
        if w != 1280:
            problems.append("%s: screenshot %d px wide, not 1280" % (k, w))
        if ink < 0.01 * w * h or colours < 6:
            problems.append("%s: the screenshot shows no chart (%d drawn pixels, %d colours)" %
                            (k, ink, colours))
    for p in problems:
        print("report_chart_check: " + p)
    if not problems:
        print("report_chart_check: %d chart kinds at 1280 px: laid out apart, drawn (%s)" %
              (len(KINDS), ", ".join(KINDS)))
    return 1 if problems else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["split"]:
        sys.exit(split(sys.argv[2], sys.argv[3]))
    sys.exit(check(sys.argv[2]))
