#!/usr/bin/env bash
# Regenerates the code for the Handoff wire contract: Swift for Handoff, C for C plugins.
#
#   Proto/generate.sh           regenerate Sources/HandoffWire/*.pb.swift from Proto/**/*.proto, and
#                               the protobuf-c code of C plugins (Plugins/Notes/generated/)
#   Proto/generate.sh --check   regenerate into a temp dir and fail if the committed files differ (CI)
#
# This is the only way generated code is produced. protoc-gen-swift is built from the exact
# swift-protobuf version pinned in Package.swift (`exact: "X"`), so the generated code always
# matches the runtime library. The build is cached in .build-protoc-gen-swift/ (gitignored) and
# reused while the pinned version stays the same. protoc and protoc-c come from Debian's
# protobuf-compiler and protobuf-c-compiler (installed with apt-get when missing; Debian 12 has
# protobuf-c 1.4.1). Works from any working directory.
set -euo pipefail

mode=write
case "${1:-}" in
    "") ;;
    --check) mode=check ;;
    -h | --help)
        sed -n '2,13s/^# \{0,1\}//p' "$0"
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

# protobuf-c code for C plugins, as "<output folder>=<.proto files under Proto/, space-separated>".
# protoc-c keeps each file's path under Proto/ (handoff/v1/activity.pb-c.{c,h}), so a plugin
# compiled with -I<output folder> includes "handoff/v1/activity.pb-c.h".
c_outputs=(
    "Plugins/Notes/generated=handoff/v1/activity.proto"
)

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

# --- protoc-c ---
if ! command -v protoc-c > /dev/null 2>&1; then
    log "protoc-c not found; installing protobuf-c-compiler with apt-get"
    sudo=()
    [[ "$(id -u)" -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends protobuf-c-compiler
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
mkdir -p "$tmp/swift"
protoc \
    --plugin=protoc-gen-swift="$plugin" \
    --proto_path="$proto_dir" \
    --swift_out="$tmp/swift" \
    --swift_opt=Visibility=Public \
    --swift_opt=FileNaming=PathToUnderscores \
    "${protos[@]}"

# Every generated set: "<temp dir>|<committed dir>|<find expression selecting its files>". Only files
# the expression selects are compared, written or removed: hand-written files next to them (like
# Sources/HandoffWire/WireProtocol.swift) are left alone.
sets=("$tmp/swift|$out_dir|-maxdepth 1 -name *.pb.swift")
c_version="$(protoc-c --version | sed -n 1p)" # sed reads it all: no SIGPIPE under pipefail
for i in "${!c_outputs[@]}"; do
    c_dir="${c_outputs[$i]%%=*}"
    read -r -a c_protos <<< "${c_outputs[$i]#*=}"
    for p in "${c_protos[@]}"; do
        [[ -f "$proto_dir/$p" ]] || die "c_outputs names $p, which is not under $proto_dir"
    done
    log "$c_version: ${c_protos[*]} -> $c_dir"
    mkdir -p "$tmp/c$i"
    protoc-c --proto_path="$proto_dir" --c_out="$tmp/c$i" "${c_protos[@]}"
    sets+=("$tmp/c$i|$c_dir|-name *.pb-c.[ch]")
done

# Generated files of a set, as paths relative to its folder (nothing when the folder is missing).
generated_names() {
    local dir="$1" expression="$2"
    [[ -d "$dir" ]] || return 0
    # $expression is split on purpose (find's arguments); globbing is off so *.pb.swift stays a pattern.
    (set -f && cd "$dir" && find . $expression -type f -printf '%P\n') | LC_ALL=C sort
}

stale=()
total=0
for set in "${sets[@]}"; do
    IFS='|' read -r new_dir dir expression <<< "$set"
    mapfile -t new_files < <(generated_names "$new_dir" "$expression")
    mapfile -t old_files < <(generated_names "$dir" "$expression")
    total=$((total + ${#new_files[@]}))

    if [[ "$mode" == check ]]; then
        for f in "${new_files[@]}"; do
            if [[ ! -f "$dir/$f" ]]; then
                stale+=("$dir/$f (missing)")
            elif ! cmp -s "$new_dir/$f" "$dir/$f"; then
                stale+=("$dir/$f (differs)")
                diff -u "$dir/$f" "$new_dir/$f" | head -n 40 >&2 || true
            fi
        done
        for f in "${old_files[@]}"; do
            [[ -f "$new_dir/$f" ]] || stale+=("$dir/$f (no longer generated)")
        done
        continue
    fi

    # Write mode: replace generated files, drop ones no longer generated, leave hand-written files alone.
    mkdir -p "$dir"
    for f in "${old_files[@]}"; do
        if [[ ! -f "$new_dir/$f" ]]; then
            rm -f "$dir/$f"
            log "removed $dir/$f"
        fi
    done
    for f in "${new_files[@]}"; do
        if ! cmp -s "$new_dir/$f" "$dir/$f" 2> /dev/null; then
            mkdir -p "$(dirname "$dir/$f")"
            cp "$new_dir/$f" "$dir/$f"
            log "wrote $dir/$f"
        fi
    done
    # C sets: folders emptied by removals (protoc-c's path layout), never $dir itself.
    [[ "$dir" == "$out_dir" ]] || find "$dir" -mindepth 1 -type d -empty -delete
    log "done (${#new_files[@]} files in $dir)"
done

if [[ "$mode" == check ]]; then
    if ((${#stale[@]} > 0)); then
        echo "generated code is stale: run Proto/generate.sh" >&2
        printf '  %s\n' "${stale[@]}" >&2
        exit 1
    fi
    log "generated code is up to date ($total files)"
fi
