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
