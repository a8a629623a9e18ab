#!/usr/bin/env bash
# layers.sh — checks that the engine's includes run only downward between its layers
# (engine/DESIGN.md, "The layers"): base < expr < code < mech < run < the facade
# (engine/*.c, engine.h). A file may include headers of its own layer and of the layers
# before it, never of a later layer, of the facade, or of the server. Prints each
# violation and exits 1 if there is one.
set -uo pipefail
cd "$(dirname "$0")/.."
layers=(base expr code mech run)
declare -A rank home
for i in "${!layers[@]}"; do
  rank[${layers[$i]}]=$i
  for h in engine/"${layers[$i]}"/*.h; do home[$(basename "$h")]=${layers[$i]}; done
done
rank[facade]=${#layers[@]}
for h in engine/*.h; do home[$(basename "$h")]=facade; done
bad=0
for l in "${layers[@]}"; do
  for f in engine/"$l"/*.[ch]; do
    while IFS= read -r inc; do
      h=${inc#\"}; h=${h%\"}
      to=${home[$(basename "$h")]:-}
      if [ -z "$to" ]; then
        [ -e "server/$(basename "$h")" ] && { echo "$f includes $h of the server"; bad=1; }
        continue
      fi
      if [ "${rank[$to]}" -gt "${rank[$l]}" ]; then
        echo "$f ($l) includes $h ($to): upward"
        bad=1
      fi
    done < <(grep -oE '^#include "[^"]+"' "$f" | sed 's/#include //')
  done
done
[ "$bad" -eq 0 ] && echo "layers: every include runs downward"
exit "$bad"
