#!/usr/bin/env python3
"""Rename C identifiers and source files across the tree, driven by a map file.

Usage:  python3 scripts/rename-identifiers.py [--map FILE] [--check] [--dry-run]
                                              [--allow-existing]

The map (scripts/rename-identifiers.map by default) has one rule a line; `#` starts a comment:

  old new                  rename the identifier `old` (whole word) to `new`
  prefix old new           rename `old` itself and every identifier starting with `old_`
                           (`old_x` becomes `new_x`); the longest matching prefix wins, and
                           an exact rule wins over any prefix. Written `old_ new_`, it renames
                           only the identifiers starting with `old_`, not `old` itself
  file old/path new/path   `git mv` the file; the file's stem (`pd_gw_http` of
                           `pd_gw_http.c`) becomes an exact rule, and for a header its
                           include guard (`PD_GW_HTTP_H`) too
  known name               `name` is present and already means what a rule renames to (a
                           module named in a comment: `pd_mock_ledger:`), not a collision
  text old new             replace a literal string (no spaces) wherever it appears, for the
                           few places a name is spelled with a glob (`pd_gw_*.c`)

Identifiers are `[A-Za-z_][A-Za-z0-9_]*`, matched whole. The rules apply to every tracked
*.c, *.h, *.md, *.sh, *.py, CMakeLists.txt and Makefile, except this script and its map.

Safety:
  - The map must be a fixed point: no rule's result is renamed again by another rule, so a
    second run changes nothing (idempotent).
  - Refuses to run (exit 2) when a rule would rename a token that is present into a name that
    is already present as a different identifier (a collision), or when two different present
    tokens would become the same name. A token spelled as a file name (`pd_x.c`) does not
    count: a module's functions may share its file's name. --allow-existing accepts a present
    new name (a tree where part of the rename was already merged by hand).
  - A renamed line of C that grows past 100 columns is re-wrapped by clang-format (that line
    only, with the tree's .clang-format) when clang-format is installed.
  - --check changes nothing and exits 1 if any old identifier, prefix, literal or file is
    still present (new code written with the old names after the rename).
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

# A token right after a backslash is an escape sequence's tail (`\nb` in a string), not a name.
TOKEN = re.compile(r"(?<![\\A-Za-z0-9_])[A-Za-z0-9_]+", re.ASCII)
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z", re.ASCII)
FILE_SUFFIX = re.compile(r"\.(c|h|md|sh|py)\b")
EXTS = (".c", ".h", ".md", ".sh", ".py")
COLUMN_LIMIT = 100  # .clang-format's ColumnLimit
CLANG_FORMAT = "clang-format"
SELF = ("scripts/rename-identifiers.py", "scripts/rename-identifiers.map")


def die(msg, code=2):
    print("rename-identifiers: " + msg, file=sys.stderr)
    sys.exit(code)


class Rules:
    def __init__(self):
        self.exact = {}      # old -> new
        self.prefix = {}     # old -> new (matches old and old_*)
        self.text = []       # (old, new) literal strings
        self.files = []      # (old path, new path)
        self.stems = set()   # exact olds that come from file stems (file-name tokens)
        self.known = set()   # present names that mean what a rule renames to

    def rename(self, tok):
        """The new name of an identifier, or None when no rule applies."""
        if tok in self.exact:
            return self.exact[tok]
        best = None
        for old in self.prefix:
            if old.endswith("_"):
                hit = tok.startswith(old)
            else:
                hit = tok == old or tok.startswith(old + "_")
            if hit and (best is None or len(old) > len(best)):
                best = old
        if best is None:
            return None
        return self.prefix[best] + tok[len(best):]


def load_map(path):
    r = Rules()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            where = "%s:%d" % (path, n)
            if words[0] == "known" and len(words) == 2:
                if not IDENT.match(words[1]):
                    die("%s: `%s` is not an identifier" % (where, words[1]))
                r.known.add(words[1])
                continue
            if words[0] in ("prefix", "file", "text"):
                if len(words) != 3:
                    die("%s: `%s` takes two arguments" % (where, words[0]))
                kind, old, new = words
            elif len(words) == 2:
                kind, old, new = "exact", words[0], words[1]
            else:
                die("%s: expected `old new`, `prefix old new`, `file old new` or `text old new`" % where)
            if old == new:
                die("%s: `%s` renamed to itself" % (where, old))
            if kind in ("exact", "prefix"):
                for w in (old, new):
                    if not IDENT.match(w):
                        die("%s: `%s` is not an identifier" % (where, w))
                if kind == "prefix" and old.endswith("_") != new.endswith("_"):
                    die("%s: both or neither of `%s`, `%s` end with `_`" % (where, old, new))
                table = r.exact if kind == "exact" else r.prefix
                if old in table and table[old] != new:
                    die("%s: `%s` mapped twice" % (where, old))
                table[old] = new
            elif kind == "text":
                r.text.append((old, new))
            else:
                r.files.append((old, new))
                so, sn = stem(old), stem(new)
                if so != sn:
                    add_stem(r, so, sn, where)
                    if old.endswith(".h"):
                        add_stem(r, so.upper() + "_H", sn.upper() + "_H", where)
    # A fixed point: nothing a rule produces is renamed again.
    for old, new in list(r.exact.items()) + list(r.prefix.items()):
        again = r.rename(new)
        if again is not None and again != new:
            die("map is not idempotent: `%s` -> `%s` -> `%s`" % (old, new, again))
    for old, new in r.text:
        if old in new:
            die("map is not idempotent: text `%s` is part of its replacement `%s`" % (old, new))
    return r


def stem(path):
    return os.path.splitext(os.path.basename(path))[0]


def add_stem(r, old, new, where):
    if old in r.exact and r.exact[old] != new:
        die("%s: file stem `%s` already mapped to `%s`" % (where, old, r.exact[old]))
    r.exact[old] = new
    r.stems.add(old)


def git(*args):
    return subprocess.run(("git",) + args, check=True, capture_output=True, text=True).stdout


def tracked_files():
    out = []
    for p in git("ls-files", "-z").split("\0"):
        if not p or p in SELF or not os.path.isfile(p):
            continue
        base = os.path.basename(p)
        if base in ("CMakeLists.txt", "Makefile") or os.path.splitext(base)[1] in EXTS:
            out.append(p)
    return out


def scan(files):
    """Token -> count over the tree, and the set of tokens used as identifiers (not only as
    a file name such as `pd_x.c`)."""
    counts = collections.Counter()
    as_ident = set()
    for p in files:
        with open(p, encoding="utf-8", errors="surrogateescape") as f:
            s = f.read()
        for m in TOKEN.finditer(s):
            tok = m.group(0)
            if tok[0].isdigit():
                continue
            counts[tok] += 1
            if not FILE_SUFFIX.match(s, m.end()):
                as_ident.add(tok)
    return counts, as_ident


def collisions(rules, counts, as_ident, allow_existing):
    problems = []
    targets = collections.defaultdict(set)
    for tok in counts:
        new = rules.rename(tok)
        if new is None or new == tok:
            continue
        if tok not in rules.stems:
            targets[new].add(tok)
        if new in as_ident and rules.rename(new) in (None, new) and not allow_existing \
                and tok not in rules.stems and new not in rules.known:
            problems.append("`%s` -> `%s`: `%s` already exists as a different identifier"
                            % (tok, new, new))
    for new, olds in sorted(targets.items()):
        if len(olds) > 1:
            problems.append("%s would all become `%s`" % (", ".join(sorted(olds)), new))
    return problems


def rewrite(text, rules, per_rule):
    """The renamed text, and the numbers (1-based) of the lines that changed."""
    def sub(m):
        tok = m.group(0)
        if tok[0].isdigit():
            return tok
        new = rules.rename(tok)
        if new is None:
            return tok
        per_rule[(tok, new)] += 1
        return new
    out, changed = [], []
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        new = line
        for old, rep in rules.text:
            if old in new:
                per_rule[(old, rep)] += new.count(old)
                new = new.replace(old, rep)
        new = TOKEN.sub(sub, new)
        if new != line:
            changed.append(n)
        out.append(new)
    return "".join(out), changed


def reflow(path, text, changed):
    """Let clang-format (the tree's .clang-format) re-wrap the renamed lines of a C file that
    grew past the column limit, and only those: the rest of the file is left as it is."""
    if not path.endswith((".c", ".h")):
        return
    lines = text.splitlines()
    long_lines = [n for n in changed if len(lines[n - 1].expandtabs()) > COLUMN_LIMIT]
    if not long_lines:
        return
    if not shutil.which(CLANG_FORMAT):
        print("  (no %s: %d renamed line(s) of %s stay longer than %d columns)"
              % (CLANG_FORMAT, len(long_lines), path, COLUMN_LIMIT))
        return
    args = [CLANG_FORMAT, "-i"] + ["--lines=%d:%d" % (n, n) for n in long_lines] + [path]
    subprocess.run(args, check=True)


def move_files(rules, dry_run):
    moved = []
    for old, new in rules.files:
        has_old, has_new = os.path.exists(old), os.path.exists(new)
        if has_old and has_new:
            die("both %s and %s exist" % (old, new))
        if has_old:
            if not dry_run:
                git("mv", old, new)
            moved.append((old, new))
    return moved


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--map", default="scripts/rename-identifiers.map")
    ap.add_argument("--check", action="store_true",
                    help="change nothing; exit 1 if an old name is still present")
    ap.add_argument("--dry-run", action="store_true", help="print what would change")
    ap.add_argument("--allow-existing", action="store_true",
                    help="accept a new name that is already present (partly renamed tree)")
    a = ap.parse_args()
    top = git("rev-parse", "--show-toplevel").strip()
    os.chdir(top)
    rules = load_map(a.map)
    files = tracked_files()
    counts, as_ident = scan(files)

    if a.check:
        left = []
        for p in files:
            with open(p, encoding="utf-8", errors="surrogateescape") as f:
                for n, line in enumerate(f, 1):
                    hits = [m.group(0) for m in TOKEN.finditer(line)
                            if not m.group(0)[0].isdigit() and rules.rename(m.group(0))]
                    hits += [t for t, _ in rules.text if t in line]
                    if hits:
                        left.append("%s:%d: %s" % (p, n, ", ".join(sorted(set(hits)))))
        left += ["file %s still present" % o for o, _ in rules.files if os.path.exists(o)]
        for line in left:
            print(line)
        print("rename-identifiers --check: %s" % ("%d old name(s) left" % len(left) if left
                                                   else "no old name left"))
        return 1 if left else 0

    problems = collisions(rules, counts, as_ident, a.allow_existing)
    if problems:
        for p in problems:
            print("collision: " + p, file=sys.stderr)
        die("refusing to rename (%d collision(s))" % len(problems))

    moved = move_files(rules, a.dry_run)
    for old, new in moved:
        print("file  %s -> %s" % (old, new))
    if moved and not a.dry_run:
        files = tracked_files()
    per_rule = collections.Counter()
    changed = 0
    for p in files:
        with open(p, encoding="utf-8", errors="surrogateescape", newline="") as f:
            s = f.read()
        t, lines = rewrite(s, rules, per_rule)
        if t != s:
            changed += 1
            print("edit  %s" % p)
            if not a.dry_run:
                with open(p, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
                    f.write(t)
                reflow(p, t, lines)
    for (old, new), n in sorted(per_rule.items()):
        print("  %-40s -> %-40s %5d" % (old, new, n))
    print("rename-identifiers: %d identifier(s) renamed in %d file(s), %d file(s) moved%s"
          % (len(per_rule), changed, len(moved), " (dry run)" if a.dry_run else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
