#!/usr/bin/env bash
# Builds Gitea from its Go module for TestForgeReviewsGitea (the review cycle
# against a real Gitea on 127.0.0.1) and prints the binary's path. The build
# (about 5 minutes on 2 cores) is cached outside the repository, in
# $STACKD_CACHE_DIR (default ~/.cache/stackd), beside the options/ and
# templates/ directories Gitea reads at run time (no bindata: the web assets
# are not in the module). Exits non-zero, saying why, when it cannot build.
set -euo pipefail

version=${STACKD_GITEA_VERSION:-v1.26.0}
cache=${STACKD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stackd}/gitea-$version
if [ -x "$cache/gitea" ] && [ -d "$cache/options" ]; then
  echo "$cache/gitea"
  exit 0
fi
if ! command -v gcc >/dev/null; then
  # Gitea's SQLite driver (mattn/go-sqlite3) needs cgo.
  apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends gcc libc6-dev >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export GOFLAGS=-mod=mod CGO_ENABLED=1 GOWORK=off
start=$(date +%s)
# `go install code.gitea.io/gitea@version` refuses a module whose go.mod has
# replace directives (Gitea's has some), so a throwaway module requires it
# and repeats them.
go mod download -json "code.gitea.io/gitea@$version" >mod.json
gomod=$(sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p' mod.json)
src=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' mod.json)
{
  echo 'module stackd.invalid/giteabuild'
  grep '^go ' "$gomod"
  echo "require code.gitea.io/gitea $version"
  grep '^replace ' "$gomod" || true
} >go.mod
go get "code.gitea.io/gitea@$version" >&2
go build -trimpath -tags 'sqlite sqlite_unlock_notify' -ldflags "-X main.Version=${version#v}" -o gitea code.gitea.io/gitea >&2
mkdir -p "$cache"
rm -rf "$cache/options" "$cache/templates"
cp -r "$src/options" "$src/templates" "$cache/"
chmod -R u+w "$cache/options" "$cache/templates"
mv gitea "$cache/gitea"
echo "built Gitea $version in $(($(date +%s) - start))s: $cache/gitea" >&2
echo "$cache/gitea"
