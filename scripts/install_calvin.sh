#!/usr/bin/env bash
# Installs CALVIN's simulator and language annotations, which no package registry serves, beside the
# locked environment (`make setup` runs it after `uv sync`):
#   - calvin_env from CALVIN_ENV_SRC (git+URL@commit, or a folder holding a copy of that repository)
#     into third_party/calvin_env, installed editable and without dependencies into the project's
#     venv: its scenes (data/) and configs (conf/) live beside its package, not inside it, so only a
#     checkout installed in place finds them. Its run-time dependencies are the `calvin` extra of
#     vlarl-envs, in uv.lock; calvin_env itself is outside the lock, so syncs must be --inexact.
#   - calvin's annotation files (new_playtable_validation.yaml, new_playtable.yaml) from
#     CALVIN_ANNOTATIONS_SRC (a URL prefix or a folder) into third_party/calvin_annotations, where
#     vlarl_envs.calvin looks for them beside the calvin_env checkout.
# A second run with the same sources only checks that calvin_env imports.
set -euo pipefail
cd "$(dirname "$0")/.."

UV=${UV:-uv}
env_src=${CALVIN_ENV_SRC:-git+https://github.com/mees/calvin_env@797142c588c21e76717268b7b430958dbd13bf48}
annotations_src=${CALVIN_ANNOTATIONS_SRC:-https://raw.githubusercontent.com/mees/calvin/fa03f01f19c65920e18cf37398a9ce859274af76/calvin_models/conf/annotations}
checkout=third_party/calvin_env
annotations=third_party/calvin_annotations
annotation_files=(new_playtable_validation.yaml new_playtable.yaml)
stamp=third_party/.calvin-sources

wanted="$env_src $annotations_src"
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ] || [ ! -d "$checkout/data" ]; then
  rm -rf "$checkout" "$annotations" "$stamp"
  mkdir -p "$annotations"
  case "$env_src" in
    git+*)
      url=${env_src#git+}
      commit=${url##*@}
      url=${url%@*}
      git init -q "$checkout"
      git -C "$checkout" fetch -q --depth 1 "$url" "$commit"
      git -C "$checkout" -c advice.detachedHead=false checkout -q FETCH_HEAD
      ;;
    *)
      # A copy, not the folder itself: the editable install writes its metadata into the source.
      cp -r "$env_src" "$checkout"
      chmod -R u+w "$checkout"
      ;;
  esac
  for name in "${annotation_files[@]}"; do
    case "$annotations_src" in
      http://*|https://*) curl -fsSL "$annotations_src/$name" -o "$annotations/$name" ;;
      *) cp "$annotations_src/$name" "$annotations/$name" ;;
    esac
  done
  $UV pip install --quiet --no-deps --editable "$checkout"
  echo "$wanted" > "$stamp"
fi
$UV run --no-sync python -c "import calvin_env" \
  || { echo "install_calvin: calvin_env does not import; run 'make setup' again" >&2; exit 1; }
echo "install_calvin: calvin_env from $env_src in $checkout, annotations in $annotations"
