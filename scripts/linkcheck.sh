#!/usr/bin/env bash
# make linkcheck: every relative link and anchor of the Markdown docs (README.md,
# CONTRIBUTING.md, SECURITY.md, CHANGELOG.md and docs/**/*.md) must lead somewhere in the
# repository. markdown-link-check (npm, pinned in package-lock.json) checks that each linked
# file exists and each #anchor of the same file is a heading or an id, with
# .markdown-link-check.json: links to public sites (http, https, mailto) are allowed but not
# fetched, so the check needs no network; docs/api/reference.html, which make api-html writes and
# git ignores, is the one relative link it does not require. scripts/linkcheck.mjs adds what the tool does not
# check: anchors into other Markdown files, and links that leave the repository by a relative
# path or name an absolute one. A failing run ends with a FAIL line, which make test's summary
# lists.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

mlc=node_modules/.bin/markdown-link-check
if [ ! -x "$mlc" ]; then
	echo "markdown-link-check is missing: run make web (npm ci)" >&2
	echo "FAIL linkcheck (markdown-link-check is not installed)"
	exit 1
fi

files=(README.md CONTRIBUTING.md SECURITY.md CHANGELOG.md)
while IFS= read -r -d '' f; do files+=("$f"); done < <(find docs -name '*.md' -print0 | sort -z)

failed=0
"$mlc" --quiet --config .markdown-link-check.json "${files[@]}" || failed=1
node scripts/linkcheck.mjs "${files[@]}" || failed=1
if [ "$failed" -ne 0 ]; then
	echo "FAIL linkcheck (dead links above)"
	exit 1
fi
echo "ok linkcheck: ${#files[@]} files, every relative link and anchor leads somewhere in the repository"
