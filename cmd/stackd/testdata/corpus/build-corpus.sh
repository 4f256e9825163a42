#!/bin/sh
# build-corpus.sh MIRRORS OUT: lays out the public-corpus compatibility
# corpus (docs/compatibility.md) under OUT from Git repositories already
# on this machine (MIRRORS/OWNER+NAME/repo, bare or not), and builds the
# six HashiCorp providers it uses from those sources into OUT/plugins in
# the filesystem-mirror layout. Nothing of it is committed: the test
# TestPublicCorpus (corpus_e2e_test.go) reads OUT through STACKD_CORPUS.
#
# A configuration is a directory as `terraform plan` would be run in it:
# each example file of a provider's examples/ on its own (the way the
# provider's documentation shows it), each fixture directory of
# Terraform v1.11.4 that uses only those providers or none, and public
# modules (the root module and its examples/ directories). Files are
# copied verbatim; only .terraform/ (Terraform's working directory) and
# terraform.tfstate* (a state, not configuration) are left out.
set -eu
MIRRORS=$1
OUT=$2
mkdir -p "$OUT/configs" "$OUT/plugins"
MANIFEST=$OUT/manifest.tsv
: >"$MANIFEST"

# tree REPO REV PATH NAME SUB: copies PATH of REPO at REV to configs/NAME
# and lists it in the manifest; SUB is the configuration's directory
# inside the copy.
tree() {
	git_dir=$MIRRORS/$(echo "$1" | tr / +)/repo
	commit=$(git -C "$git_dir" rev-parse "$2^{commit}")
	dest=$OUT/configs/$4
	rm -rf "$dest" && mkdir -p "$dest"
	if [ "$3" = . ]; then
		git -C "$git_dir" archive "$commit" | tar -x -C "$dest"
	else
		git -C "$git_dir" archive "$commit" "$3" | tar -x -C "$dest" --strip-components=$(echo "$3" | awk -F/ '{print NF}')
	fi
	find "$dest" -name .terraform -type d -prune -exec rm -rf {} +
	find "$dest" -name 'terraform.tfstate*' -prune -exec rm -rf {} +
	printf '%s\t%s@%s:%s\t%s\t%s\n' "$4" "$1" "$(echo "$commit" | cut -c1-12)" "$3/$5" "configs/$4" "$5" >>"$MANIFEST"
}

# Provider examples: one configuration per example file.
for p in random null time tls archive local; do
	repo=hashicorp/terraform-provider-$p
	git_dir=$MIRRORS/hashicorp+terraform-provider-$p/repo
	git -C "$git_dir" ls-tree -r --name-only HEAD examples/ | grep '\.tf$' | while read -r f; do
		name=$p/$(echo "${f#examples/}" | sed 's/\.tf$//')
		dest=$OUT/configs/$name
		rm -rf "$dest" && mkdir -p "$dest"
		git -C "$git_dir" show "HEAD:$f" >"$dest/$(basename "$f")"
		printf '%s\t%s@%s:%s\t%s\t.\n' "$name" "$repo" "$(git -C "$git_dir" rev-parse --short=12 HEAD)" "$f" "configs/$name" >>"$MANIFEST"
	done
done

# Configurations that would reach the network whatever the proxy (a
# provider told to use a proxy by name, a certificate fetched by URL) are
# listed, excluded, and never run.
awk -F'\t' 'BEGIN { OFS = "\t" }
	$1 ~ /^tls\/provider\/provider_with_proxy/ { $5 = "reaches the network: the tls provider fetches a certificate from https://example.com through a proxy" }
	{ print }' "$MANIFEST" >"$MANIFEST.tmp" && mv "$MANIFEST.tmp" "$MANIFEST"

# Terraform's own fixtures (v1.11.4, the language stackd implements):
# directories whose resources, data sources and provider blocks are of
# random, null, time, tls, archive, local or terraform only.
TF=hashicorp/terraform
tf_git=$MIRRORS/hashicorp+terraform/repo
for d in $(git -C "$tf_git" ls-tree -d --name-only v1.11.4 internal/terraform/testdata/ internal/command/testdata/ internal/command/e2etest/testdata/); do
	text=$(git -C "$tf_git" grep -h -E '^[[:space:]]*(resource|data|ephemeral|provider)[[:space:]]+"' v1.11.4 -- "$d" 2>/dev/null | sed 's/^v1.11.4://' || true)
	files=$(git -C "$tf_git" ls-tree -r --name-only v1.11.4 "$d" | grep -c -E '\.tf(\.json)?$' || true)
	[ "$files" -gt 0 ] || continue
	if echo "$text" | grep -E '"' | grep -v -E '^[[:space:]]*(resource|data|ephemeral)[[:space:]]+"(random|null|time|tls|archive|local|terraform)_|^[[:space:]]*provider[[:space:]]+"(random|null|time|tls|archive|local|terraform)"' | grep -q .; then
		continue
	fi
	tree $TF v1.11.4 "$d" "terraform/${d#internal/}" .
done

# Public modules.
tree cloudposse/terraform-null-label HEAD . null-label/root .
tree cloudposse/terraform-null-label HEAD . null-label/examples-complete examples/complete
tree Azure/terraform-azurerm-naming HEAD . azurerm-naming/root .
tree Azure/terraform-azurerm-naming HEAD . azurerm-naming/examples examples
tree clouddrove/terraform-labels HEAD . clouddrove-labels/root .
tree clouddrove/terraform-labels HEAD . clouddrove-labels/example _example
tree cloudposse/terraform-yaml-config HEAD . yaml-config/root .
tree cloudposse/terraform-yaml-config HEAD . yaml-config/examples-complete examples/complete
for d in $(git -C "$MIRRORS/gruntwork-io+terratest/repo" ls-tree -d --name-only HEAD test/fixtures/ examples/ | grep -E 'terraform-(hello-world|basic|backend)-example$|fixtures/terraform-(output[a-z-]*|null|no-error|validation-valid|parallelism|not-idempotent|basic-configuration|workspace)$'); do
	tree gruntwork-io/terratest HEAD "$d" "terratest/$(basename "$d")" .
done

# The providers, built from the same sources (their latest tags);
# NO_PROVIDERS=1 skips this (they are built already).
[ -z "${NO_PROVIDERS:-}" ] || { wc -l "$MANIFEST"; exit 0; }
for p in random null time tls archive local; do
	git_dir=$MIRRORS/hashicorp+terraform-provider-$p/repo
	tag=$(git -C "$git_dir" tag | sort -V | tail -1)
	src=$OUT/src/$p
	rm -rf "$src" && mkdir -p "$src"
	git -C "$git_dir" archive "$tag" | tar -x -C "$src"
	bin=$OUT/plugins/registry.terraform.io/hashicorp/$p/${tag#v}/$(go env GOOS)_$(go env GOARCH)
	mkdir -p "$bin"
	[ -x "$bin/terraform-provider-${p}_$tag" ] || (cd "$src" && CGO_ENABLED=0 go build -o "$bin/terraform-provider-${p}_$tag" .)
done
wc -l "$MANIFEST"
