#!/usr/bin/env bash
# Regenerates the Swift code for the Handoff wire contract.
#
#   Proto/generate.sh           regenerate Sources/HandoffWire/*.pb.swift from Proto/**/*.proto
#   Proto/generate.sh --check   regenerate into a temp dir and fail if the committed files differ (CI)
#
# This is the only way generated code is produced. protoc-gen-swift is built from the exact
# swift-protobuf version pinned in Package.swift (`exact: "X"`), so the generated code always
# matches the runtime library. The build is cached in .build-protoc-gen-swift/ (gitignored) and
# reused while the pinned version stays the same. protoc comes from Debian's protobuf-compiler
# (installed with apt-get when missing). Works from any working directory.
set -euo pipefail

mode=write
case "${1:-}" in
    "") ;;
    --check) mode=check ;;
    -h | --help)
        sed -n '2,11s/^# \{0,1\}//p' "$0"
        exit 0
        ;;
    *)
        echo "usage: $0 [--check]" >&2
        exit 2
        ;;
esac

log() { echo "generate.sh: $*" >&2; }
die() {
    log "error: $*"
    exit 1
}

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

proto_dir=Proto
out_dir=Sources/HandoffWire
scratch="$repo_root/.build-protoc-gen-swift"

# --- The swift-protobuf version: read from Package.swift, the single source of truth. ---
[[ -f Package.swift ]] || die "no Package.swift in $repo_root"
version="$(sed -n 's|.*apple/swift-protobuf\(\.git\)\{0,1\}"[^)]*exact:[[:space:]]*"\([^"]*\)".*|\2|p' Package.swift | head -n 1)"
[[ -n "$version" ]] || die "could not find swift-protobuf's exact: \"X\" pin in Package.swift"

# --- protoc ---
if ! command -v protoc > /dev/null 2>&1; then
    log "protoc not found; installing protobuf-compiler with apt-get"
    sudo=()
    [[ "$(id -u)" -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends protobuf-compiler
fi

# --- protoc-gen-swift, built from swift-protobuf $version (cached per version). ---
plugin="$scratch/bin/protoc-gen-swift-$version"
plugin_version() { "$1" --version 2> /dev/null | awk '{print $NF}'; }
if [[ -x "$plugin" && "$(plugin_version "$plugin")" == "$version" ]]; then
    log "using cached protoc-gen-swift $version"
else
    src="$scratch/src"
    if [[ ! -d "$src/.git" ]] || [[ "$(git -C "$src" describe --tags --exact-match 2> /dev/null)" != "$version" ]]; then
        log "fetching swift-protobuf $version"
        rm -rf "$src"
        mkdir -p "$scratch"
        git -c advice.detachedHead=false clone --quiet --depth 1 --branch "$version" \
            https://github.com/apple/swift-protobuf.git "$src"
    fi
    [[ "$(git -C "$src" describe --tags --exact-match)" == "$version" ]] ||
        die "swift-protobuf checkout in $src is not at tag $version"
    log "building protoc-gen-swift $version (once per version)"
    build_log="$scratch/build.log"
    if ! swift build --package-path "$src" --scratch-path "$scratch/build" \
        --product protoc-gen-swift > "$build_log" 2>&1; then
        cat "$build_log" >&2
        die "building protoc-gen-swift failed"
    fi
    bin_path="$(swift build --package-path "$src" --scratch-path "$scratch/build" --show-bin-path)"
    mkdir -p "$scratch/bin"
    cp "$bin_path/protoc-gen-swift" "$plugin"
    [[ "$(plugin_version "$plugin")" == "$version" ]] ||
        die "built protoc-gen-swift reports version '$(plugin_version "$plugin")', expected $version"
fi

# --- Generate into a temp dir. ---
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

protos=()
while IFS= read -r -d '' f; do
    protos+=("${f#"$proto_dir"/}")
done < <(find "$proto_dir" -name '*.proto' -type f -print0 | LC_ALL=C sort -z)
((${#protos[@]} > 0)) || die "no .proto files under $proto_dir"

log "$(protoc --version), protoc-gen-swift $version: ${protos[*]}"
protoc \
    --plugin=protoc-gen-swift="$plugin" \
    --proto_path="$proto_dir" \
    --swift_out="$tmp" \
    --swift_opt=Visibility=Public \
    --swift_opt=FileNaming=PathToUnderscores \
    "${protos[@]}"

# Generated files, by name, in the temp dir and in the source tree.
generated_names() { find "$1" -maxdepth 1 -name '*.pb.swift' -type f -printf '%f\n' | LC_ALL=C sort; }
mapfile -t new_files < <(generated_names "$tmp")
mkdir -p "$out_dir"
mapfile -t old_files < <(generated_names "$out_dir")

if [[ "$mode" == check ]]; then
    stale=()
    for f in "${new_files[@]}"; do
        if [[ ! -f "$out_dir/$f" ]]; then
            stale+=("$out_dir/$f (missing)")
        elif ! cmp -s "$tmp/$f" "$out_dir/$f"; then
            stale+=("$out_dir/$f (differs)")
            diff -u "$out_dir/$f" "$tmp/$f" | head -n 40 >&2 || true
        fi
    done
    for f in "${old_files[@]}"; do
        [[ -f "$tmp/$f" ]] || stale+=("$out_dir/$f (no longer generated)")
    done
    if ((${#stale[@]} > 0)); then
        echo "generated code is stale: run Proto/generate.sh" >&2
        printf '  %s\n' "${stale[@]}" >&2
        exit 1
    fi
    log "generated code is up to date (${#new_files[@]} files)"
    exit 0
fi

# Write mode: replace generated files, drop ones no longer generated, leave hand-written files alone.
for f in "${old_files[@]}"; do
    if [[ ! -f "$tmp/$f" ]]; then
        rm -f "$out_dir/$f"
        log "removed $out_dir/$f"
    fi
done
for f in "${new_files[@]}"; do
    if ! cmp -s "$tmp/$f" "$out_dir/$f" 2> /dev/null; then
        cp "$tmp/$f" "$out_dir/$f"
        log "wrote $out_dir/$f"
    fi
done
log "done (${#new_files[@]} files in $out_dir)"
