/* report: the page (head, inline CSS and script, the sections in order) and HTML escaping. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <string.h>

#include "report.h"
#include "report_requirements.h"

/* Length of the UTF-8 sequence at p (1..4) when it is well formed, else 0. */
static size_t utf8_len(const unsigned char *p) {
  unsigned c = p[0];
  size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (!n || (n == 2 && c < 0xc2) || (n == 4 && c > 0xf4)) return n == 1 ? 1 : 0;
  for (size_t i = 1; i < n; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  if (n == 3 && c == 0xe0 && p[1] < 0xa0) return 0; /* overlong */
  if (n == 3 && c == 0xed && p[1] >= 0xa0) return 0; /* surrogate */
  if (n == 4 && c == 0xf0 && p[1] < 0x90) return 0;
  if (n == 4 && c == 0xf4 && p[1] >= 0x90) return 0;
  return n;
}

void pd_report_esc(FILE *out, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  if (!s) return;
  while (*p) { /* bounded by the NUL: each pass consumes at least one byte */
    const unsigned char *run = p;
    while (*p >= 0x20 && *p < 0x7f && !strchr("&<>\"'", *p)) p++;
    if (p > run) fwrite(run, 1, (size_t)(p - run), out);
    if (!*p) break;
    size_t n = utf8_len(p);
    switch (*p) {
    case '&': fputs("&amp;", out); break;
    case '<': fputs("&lt;", out); break;
    case '>': fputs("&gt;", out); break;
    case '"': fputs("&quot;", out); break;
    case '\'': fputs("&#39;", out); break;
    case '\n': fputs("\n", out); break;
    case '\t': fputs("\t", out); break;
    default:
      if (*p >= 0x80 && n > 1) fwrite(p, 1, n, out);
      else fputs("\xef\xbf\xbd", out); /* a control byte or a stray one: U+FFFD */
    }
    p += n > 1 ? n : 1;
  }
}

static const char css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1d2330;background:#fbfbfd}"
    "h1{font-size:1.6em;margin:.2em 0}h2{margin-top:1.6em;border-bottom:1px solid #ccd}"
    "table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #d4d7e0;padding:2px 6px;"
    "text-align:left;vertical-align:top}th{background:#eef0f6;position:sticky;top:0}"
    "td.s{font-family:ui-monospace,monospace;white-space:nowrap}"
    "td.cell{font:12px ui-monospace,monospace;min-width:5em}td.cell a{color:inherit;"
    "text-decoration:none;display:block}td.none{background:#f3f3f5}"
    ".v-expected{background:#cdebd0}.own-v{color:#9b1c1c;font-weight:600}.own-p{color:#2c5e32}"
    "tfoot td{font-size:11px;background:#eef0f6;vertical-align:top}"
    ".v-fail{background:#f29b9b;font-weight:bold}.v-not-exercised{background:#ffe08a}"
    ".v-error{background:#c4b0e8}.v-limit{background:#a9c8ec}.v-skipped{background:#e4e4e4}.legend span{display:inline-block;padding:1px 8px;margin-right:6px;"
    "border:1px solid #bbb}code,pre{font-family:ui-monospace,monospace;font-size:12px}"
    "pre{background:#f0f1f5;padding:6px;white-space:pre-wrap;word-break:break-all}"
    "details.row{margin:2px 0;border:1px solid #e0e2ea;background:#fff}"
    "details.row>summary{cursor:pointer;padding:2px 6px}details.row>div{padding:4px 12px}"
    "details.rows>summary{cursor:pointer;font-weight:bold;margin:.5em 0}"
    "details.row:target{outline:2px solid #3366cc}.charts{display:flex;flex-wrap:wrap;gap:12px}"
    "svg{background:#fff;border:1px solid #e0e2ea}svg text{font:11px system-ui,sans-serif}"
    ".note{color:#667}#js-errors{color:#b00;font-weight:bold}";

/* window.onerror writes a marker the browser test looks for; a cell's link opens its row. */
static const char script[] =
    "window.onerror=function(m,s,l){var d=document.getElementById('js-errors');"
    "d.hidden=false;d.textContent+='JS ERROR: '+m+' at line '+l+'\\n';};"
    "function pdOpen(){var h=location.hash.slice(1);var e=h&&document.getElementById(h);"
    "for(;e;e=e.parentElement){if(e.tagName==='DETAILS'){e.open=true;}}}"
    "window.addEventListener('hashchange',pdOpen);pdOpen();"
    "document.body.setAttribute('data-ready','1');";

static void head(FILE *out) {
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n"
        "<meta name=\"viewport\" content=\"width=device-width\">\n"
        "<title>pdref report</title>\n<style>",
        out);
  fputs(css, out);
  fputs("</style></head>\n<body>\n<pre id=\"js-errors\" hidden></pre>\n<h1>pdref report</h1>\n",
        out);
}

static void inputs_list(FILE *out, const pd_report_t *r) {
  fputs("<p>From ", out);
  for (size_t i = 0; i < r->n; i++) {
    fputs(i ? ", " : "", out);
    fputs("<code>", out);
    pd_report_esc(out, r->in[i].path);
    fprintf(out, "</code> (%s)", pd_report_kind_names[r->in[i].kind]);
  }
  fputs(".</p>\n", out);
}

static void legend(FILE *out) {
  fputs("<p class=\"legend\">A cell's colour is the row against its scenario's expectation: "
        "<span class=\"v-expected\">as expected</span>"
        "<span class=\"v-limit\">deployment limit: as expected, a limit no gateway can pass</span>"
        "<span class=\"v-fail\">UNEXPECTED: not as expected</span>"
        "<span class=\"v-not-exercised\">not exercised: tested nothing</span>"
        "<span class=\"v-skipped\">skipped</span>"
        "<span class=\"v-error\">error</span><br>Its text is the row's own verdict: "
        "<span class=\"own-p\">pass</span>, or <span class=\"own-v\">violates</span> and the "
        "invariants the run broke (for an upstream model, as expected, that is the bug its "
        "scenario shows). Click a cell for the row's description, reason and replay command; "
        "the last line gives each mode's totals.</p>\n",
        out);
}

static int has_kind(const pd_report_t *r, pd_report_kind_t k) {
  for (size_t i = 0; i < r->n; i++)
    if (r->in[i].kind == k) return 1;
  return 0;
}

/* Links to the sections the page has. */
static void nav(FILE *out, const pd_report_t *r) {
  static const struct {
    int kinds; /* bits of pd_report_kind_t */
    const char *html;
  } links[] = {{1 << PD_REPORT_SIM, "<a href=\"#matrix\">verdicts</a>"},
               {1 << PD_REPORT_SIM, "<a href=\"#ttft\">TTFT</a>"},
               {1 << PD_REPORT_SIM, "<a href=\"#capacity\">capacity over time</a>"},
               {1 << PD_REPORT_EXPLORE, "<a href=\"#explore\">exploration</a>"},
               {1 << PD_REPORT_CONFORM, "<a href=\"#conform\">conformance</a>"},
               {1 << PD_REPORT_SIM | 1 << PD_REPORT_CONFORM,
                "<a href=\"#requirements\">requirements</a>"},
               {1 << PD_REPORT_SIM_BENCH | 1 << PD_REPORT_GW_BENCH, "<a href=\"#bench\">benchmarks</a>"}};
  int have = 0, n = 0;
  for (size_t i = 0; i < r->n; i++) have |= 1 << r->in[i].kind;
  if (r->n_cases) have |= 1 << PD_REPORT_EXPLORE; /* shrunk cases alone have the section */
  fputs("<p class=\"nav\">", out);
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
    if (have & links[i].kinds) fprintf(out, "%s%s", n++ ? " &middot; " : "", links[i].html);
  fputs("</p>\n", out);
}

int pd_report_html(const pd_report_t *r, const pd_report_opts_t *o, FILE *out,
                   pd_report_stats_t *st) {
  memset(st, 0, sizeof *st);
  head(out);
  inputs_list(out, r);
  nav(out, r);
  if (has_kind(r, PD_REPORT_SIM)) {
    fputs("<h2 id=\"matrix\">Verdicts: scenario &times; mode</h2>\n", out);
    legend(out);
    for (size_t i = 0; i < r->n; i++)
      if (r->in[i].kind == PD_REPORT_SIM) pd_report_matrix(out, &r->in[i], i, o, st);
    pd_report_charts(out, r, st);
  }
  if (has_kind(r, PD_REPORT_EXPLORE) || r->n_cases) {
    fputs("<h2 id=\"explore\">Exploration: findings per invariant</h2>\n", out);
    for (size_t i = 0; i < r->n; i++)
      if (r->in[i].kind == PD_REPORT_EXPLORE) pd_report_explore(out, &r->in[i], st);
    pd_report_cases(out, r, o, st);
  }
  if (has_kind(r, PD_REPORT_CONFORM)) {
    fputs("<h2 id=\"conform\">Conformance: scenario &times; gateway</h2>\n", out);
    legend(out);
    for (size_t i = 0; i < r->n; i++)
      if (r->in[i].kind == PD_REPORT_CONFORM) pd_report_matrix(out, &r->in[i], i, o, st);
  }
  if (has_kind(r, PD_REPORT_SIM) || has_kind(r, PD_REPORT_CONFORM)) {
    fputs("<h2 id=\"requirements\">Requirements: requirement &times; gateway</h2>\n", out);
    if (pd_report_requirements_html(out, r, &st->req_rows, &st->req_cols))
      fputs("<p>The requirement matrix could not be drawn (said on stderr).</p>\n", out);
  }
  if (has_kind(r, PD_REPORT_SIM_BENCH) || has_kind(r, PD_REPORT_GW_BENCH)) {
    fputs("<h2 id=\"bench\">Benchmarks</h2>\n", out);
    for (size_t i = 0; i < r->n; i++)
      if (r->in[i].kind == PD_REPORT_SIM_BENCH || r->in[i].kind == PD_REPORT_GW_BENCH)
        pd_report_bench(out, &r->in[i], st);
  }
  fputs("<script>", out);
  fputs(script, out);
  fputs("</script>\n</body></html>\n", out);
  fflush(out);
  return ferror(out) ? -1 : 0;
}
