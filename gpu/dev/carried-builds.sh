# Sourced by the gpu/dev scripts that run builds made here and carried to the device xz-compressed.
# unpack_carried DEST FILE.xz...: each FILE.xz decompressed to DEST/FILE, executable (missing files skipped).
unpack_carried() {
  local dest=$1 f b
  shift
  mkdir -p "$dest"
  for f in "$@"; do
    [ -f "$f" ] || continue
    b=$(basename "$f" .xz)
    xz -dc "$f" > "$dest/$b" && chmod +x "$dest/$b"
  done
}
# cvla_parts CVLA T [SECONDS]: the parts in which the chunked forward's driver CVLA launches (8, 4, T, 32);
# empty for a build older than its `parts` mode, whose `all` mode the timeout (default 20 s) stops.
cvla_parts() {
  timeout "${3:-20}" "$1" 1 parts "$2" 2>/dev/null | awk '/^parts/ {print $2}'
}
