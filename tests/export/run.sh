#!/bin/sh
# tests/export/run.sh — generated code (hamel export, engine/run/export.h) compiled and run
# against `hamel run`: for every shared case (and the numeric path of each, with
# HAMEL_NO_REDUCTION=1 for both), the C file built with
# `cc -O2 -DHAMEL_MAIN file.c -lgsl -lgslcblas -lm` prints every coordinate and speed at
# the request's sample times within 1e-9 (relative to max(1, |x|)) of hamel run; its
# Jacobian, and the Python module's, equal hamel linearize's A at the initial state to
# 1e-9; the Python module integrated by scipy (when /usr/bin/python3 has scipy) agrees
# with hamel run to 1e-9 (tolerances tightened to 1e-13); names and text of a hostile
# model reach the files only as identifiers, escaped strings and comments (the files
# compile and run and hold no such text outside comments).
# Prints one line per check and "N passed, N failed"; exits 1 if any failed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
hamel=${HAMEL_CLI_BIN:-$top/build/hamel}
cases=${HAMEL_CASES:-$top/../shared/cases}
py=/usr/bin/python3
here=$top/tests/export
[ -x "$hamel" ] || { echo "tests/export: no program at $hamel (make all)" >&2; exit 1; }
command -v jq >/dev/null 2>&1 || { echo "tests/export: jq is missing" >&2; exit 1; }
command -v cc >/dev/null 2>&1 || { echo "tests/export: cc is missing" >&2; exit 1; }
[ -x "$py" ] || { echo "tests/export: $py is missing" >&2; exit 1; }
scipy=1
"$py" -c 'import scipy.integrate, numpy' 2>/dev/null || scipy=0

work=$(mktemp -d "${TMPDIR:-/tmp}/hamel-export-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }

# check NAME FILE: the case (model + simulation) FILE, under the current environment
check() {
  name=$1 file=$2 d=$work/$1
  mkdir -p "$d"
  if ! "$hamel" run "$file" >"$d/res.json" 2>"$d/err"; then bad "$name: hamel run failed"; cat "$d/err"; return; fi
  # C: the baked request
  if ! "$hamel" export "$file" --lang c >"$d/gen.c" 2>"$d/err"; then bad "$name: export c failed"; cat "$d/err"; return; fi
  if ! cc -O2 -DHAMEL_MAIN "$d/gen.c" -o "$d/gen" -lgsl -lgslcblas -lm 2>"$d/cc.err"; then
    bad "$name: the C file does not compile"; head -20 "$d/cc.err"; return
  fi
  if "$d/gen" >"$d/c.csv" 2>"$d/err" && out=$("$py" "$here/compare.py" traj "$d/res.json" "$d/c.csv" 1e-9); then
    ok "$name: C file against hamel run: $out"
  else
    bad "$name: C file against hamel run: ${out:-} $(cat "$d/err")"
  fi
  # the Jacobians at the initial state against hamel linearize's A
  jq '{model: (.model // .), linearize: {t: (.simulation.initial.t // 0), q: .simulation.initial.q,
       speeds: .simulation.initial.speeds, parameters: (.simulation.parameters // {}), steady: false}}' \
     "$file" >"$d/lin.json.request"
  if ! "$hamel" linearize "$d/lin.json.request" >"$d/lin.json" 2>"$d/err"; then
    bad "$name: hamel linearize failed: $(head -c 300 "$d/err")"; return
  fi
  if cc -O2 -DGENERATED="\"$d/gen.c\"" "$here/jac_main.c" -o "$d/jac" -lm 2>"$d/cc.err"; then
    state=$("$py" "$here/compare.py" state "$d/lin.json" "$d/res.json")
    if echo "$state" | "$d/jac" >"$d/jac.txt" && out=$("$py" "$here/compare.py" jac "$d/lin.json" "$d/jac.txt" 1e-9); then
      ok "$name: C Jacobian against hamel linearize: $out"
    else
      bad "$name: C Jacobian against hamel linearize: ${out:-}"
    fi
  else
    bad "$name: the Jacobian driver does not compile"; head -20 "$d/cc.err"
  fi
  # Python
  if ! "$hamel" export "$file" --lang python >"$d/gen.py" 2>"$d/err"; then bad "$name: export python failed"; cat "$d/err"; return; fi
  if out=$("$py" "$here/compare.py" pyjac "$d/gen.py" "$d/lin.json" 1e-9); then
    ok "$name: Python jacobian() against hamel linearize: $out"
  else
    bad "$name: Python jacobian() against hamel linearize: $out"
  fi
  if [ $scipy = 1 ]; then
    sed -e 's/^RTOL = .*/RTOL = 1e-13/' -e 's/^ATOL = .*/ATOL = 1e-15/' "$d/gen.py" >"$d/tight.py"
    if "$py" "$d/tight.py" >"$d/py.csv" 2>"$d/err" &&
       out=$("$py" "$here/compare.py" traj "$d/res.json" "$d/py.csv" 1e-9); then
      ok "$name: Python module with solve_ivp against hamel run: $out"
    else
      bad "$name: Python module with solve_ivp against hamel run: ${out:-} $(tail -3 "$d/err")"
    fi
  else
    echo "skip $name: Python module with solve_ivp (no scipy for $py: apt install python3-scipy)"
  fi
}

for f in ${HAMEL_EXPORT_ONLY:-"$cases"/*.json}; do
  n=$(basename "$f" .json)
  jq '{model, simulation}' "$f" >"$work/$n.json"
  check "$n" "$work/$n.json"
  HAMEL_NO_REDUCTION=1 check "$n-numeric" "$work/$n.json"
done

# a model with position-level constraints, and the benchmark bicycle (n = 8, a contact
# constraint) in a weave at 5 m/s
jq '{model, simulation: del(.model)}' "$top/api/examples/simulation-position-request.json" >"$work/position.json"
check position "$work/position.json"
jq '{model, simulation: {initial: {t: 0, q: .linearize.q, speeds: {phid: 0.5, deltad: 0, thetaRd: -16.666666666666668}},
     t_end: 2, output: {samples: 21}, integrator: {method: "rk8pd", rtol: 1e-11, atol: 1e-13}}}' \
   "$top/api/examples/whipple-bicycle.json" >"$work/bicycle.json"
check bicycle "$work/bicycle.json"

# Models none of the shared cases is (tests/export/models: keywords as names, a start at
# t = 0.5 with a time-dependent force, a position-level contact, events that stop the
# run between sample times); their C files also
# compile cleanly under -Wall -Wextra -Werror.
for f in "$top"/tests/export/models/*.json; do
  n=$(basename "$f" .json)
  check "$n" "$f"
  if [ -s "$work/$n/gen.c" ] && cc -std=c11 -O2 -Wall -Wextra -Werror -DHAMEL_MAIN -c "$work/$n/gen.c" \
       -o "$work/$n/strict.o" 2>"$work/$n/strict.err"; then
    ok "$n: the C file compiles under -Wall -Wextra -Werror"
  else
    bad "$n: the C file under -Wall -Wextra -Werror: $(grep -m 3 'error' "$work/$n/strict.err")"
  fi
done

# Events (tests/export/models/disk-falls-over.json, sleigh-wall.json) on the numeric path
# too: the main stops where hamel run stops, with its last row at the event's time. An
# event that reads a constraint force is not carried (the file has no multipliers): the
# file says so and integrates to t_end.
HAMEL_NO_REDUCTION=1 check disk-falls-over-numeric "$top/tests/export/models/disk-falls-over.json"
jq '.simulation.events = [{name: "pull", expr: "lambda_knife - 0.1", action: "stop"}]' \
   "$top/tests/export/models/sleigh-wall.json" >"$work/lambda-event.json"
if "$hamel" export "$work/lambda-event.json" --lang c >"$work/lambda-event.c" &&
   grep -q "events are (they read constraint forces) not carried" "$work/lambda-event.c" &&
   ! grep -q "HAMEL_NEV" "$work/lambda-event.c" &&
   cc -O2 -DHAMEL_MAIN "$work/lambda-event.c" -o "$work/lambda-event" -lgsl -lgslcblas -lm &&
   [ "$("$work/lambda-event" | wc -l)" = 9 ]; then
  ok "an event on a constraint force: not carried, the file says so and integrates to t_end"
else
  bad "an event on a constraint force: the file does not say it is not carried, or does not run"
fi

# The request's stepper in the C main: the implicit and multistep ones read their control
# through a driver (unset, every step failed "invalid pointer" at the initial time), with
# events and without.
for meth in rk4imp msadams msbdf; do
  for m in sleigh sleigh-wall; do
    d=$work/$m-$meth out=
    mkdir -p "$d"
    jq --arg m "$meth" '.simulation.integrator = {method: $m, rtol: 1e-11, atol: 1e-13}' \
       "$top/tests/export/models/$m.json" >"$d/req.json"
    if "$hamel" run "$d/req.json" >"$d/res.json" 2>"$d/err" && "$hamel" export "$d/req.json" >"$d/gen.c" &&
       cc -O2 -DHAMEL_MAIN "$d/gen.c" -o "$d/gen" -lgsl -lgslcblas -lm 2>"$d/cc.err" &&
       "$d/gen" >"$d/c.csv" 2>"$d/err" && out=$("$py" "$here/compare.py" traj "$d/res.json" "$d/c.csv" 1e-9); then
      ok "$m with $meth: C file against hamel run: $out"
    else
      bad "$m with $meth: C file against hamel run: ${out:-} $(head -c 300 "$d/err")"
    fi
  done
done

# The Python module's p: a dict may leave names out but not name others; a sequence
# needs one value per parameter (a short list shifted every input before).
if [ -s "$work/sleigh/gen.py" ] && out=$("$py" - "$work/sleigh/gen.py" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("gen", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
y, said = mod.initial_state(), []
assert list(mod.rhs(0.5, y, {"m": 2.0})) == list(mod.rhs(0.5, y, None))
for p, kind in (({"mass": 2.0}, KeyError), ([1.0, 2.0], ValueError), (list(range(9)), ValueError)):
    try:
        mod.rhs(0.5, y, p)
    except kind as e:
        said.append(str(e))
print("ok" if len(said) == 3 and "mass" in said[0] and "2 parameter values" in said[1] else said)
PY
) && [ "$out" = ok ]; then
  ok "sleigh: the Python module refuses a parameter it does not have and a list of the wrong length"
else
  bad "sleigh: the Python module's parameters: ${out:-no module}"
fi

# A model whose default speeds stop determining q' along the run (a driven blade through
# 90 degrees: hamel run re-chooses them): the file cannot follow, and its header says so.
cat >"$work/blade.json" <<'JSON'
{"model": {"name": "driven-blade", "coordinates": ["x", "y", "phi"], "parameters": {"m": 1.2, "I": 0.2},
  "kinetic_energy": "1/2*m*(x'^2+y'^2)+1/2*I*phi'^2",
  "constraints": [{"name": "blade", "expr": "-x'*sin(phi)+y'*cos(phi)-0.3*sin(1.7*t)"}]},
 "simulation": {"initial": {"t": 0, "q": {"x": 0, "y": 0, "phi": 0.3}, "speeds": {"x'": 0.5, "phi'": 1}},
  "t_end": 5, "output": {"samples": 11}}}
JSON
if "$hamel" export "$work/blade.json" --lang c | grep -q "speeds are fixed here (the engine's default choice" &&
   "$hamel" export "$work/blade.json" --lang python | grep -q "hamel run chooses other velocities"; then
  ok "driven blade: the files say their speeds are fixed where hamel run re-chooses them"
else
  bad "driven blade: the files do not say that their speeds are fixed"
fi

# Hostile text: the model's name and the request's name and description try to close a
# comment, a string or a line and add code. The files must still compile and agree, and
# the text may appear only inside comments.
jq '.model.name = "x*/ int evil_c = system(\"touch pwned\"); /*\n#include <evil.h>\n__import__(\"os\").system(\"touch pwned\")"
    | .simulation.name = "\"\"\"\nevil_py = 1 #"
    | .simulation.description = "line\r\nevil_line = 1\n*/ evil_c2(); /* ??/\n\\"' \
   "$cases/greenwood-5.3-rolling-disk.json" >"$work/hostile.json"
check hostile "$work/hostile.json"
d=$work/hostile
if [ -s "$d/gen.c" ] && cc -fpreprocessed -dD -E -P "$d/gen.c" 2>/dev/null | grep -n 'evil\|pwned' >"$d/leak"; then
  bad "hostile: user text outside comments in the C file: $(head -3 "$d/leak")"
elif [ -s "$d/gen.c" ] && grep -q 'evil' "$d/gen.c"; then
  ok "hostile: the hostile names reach the C file only inside comments"
else
  bad "hostile: no C file, or the names were dropped altogether"
fi
if [ -s "$d/gen.py" ] && out=$("$py" - "$d/gen.py" <<'PY'
import io, sys, tokenize
src = open(sys.argv[1]).read()
bad = [t for t in tokenize.generate_tokens(io.StringIO(src).readline)
       if t.type != tokenize.COMMENT and ("evil" in t.string or "pwned" in t.string)]
seen = any(t.type == tokenize.COMMENT and "evil" in t.string
           for t in tokenize.generate_tokens(io.StringIO(src).readline))
print("leak: %r" % (bad[0].string[:80],) if bad else ("ok" if seen else "dropped"))
PY
) && [ "$out" = ok ]; then
  ok "hostile: the hostile names reach the Python file only inside comments"
else
  bad "hostile: Python file: ${out:-no file}"
fi
[ -e pwned ] || [ -e "$d/pwned" ] && bad "hostile: a command ran"

# errors: an unknown language, the multipliers formulation
if "$hamel" export "$cases/greenwood-5.3-rolling-disk.json" --lang fortran >/dev/null 2>"$work/err" &&
   false; then :; fi
if grep -q '"lang"' "$work/err"; then ok "export --lang fortran names lang"; else bad "export --lang fortran: $(cat "$work/err")"; fi
jq '.simulation.formulation = "multipliers"' "$cases/greenwood-5.3-rolling-disk.json" >"$work/mult.json"
if ! "$hamel" export "$work/mult.json" >/dev/null 2>"$work/err" && grep -q '"formulation"' "$work/err"; then
  ok "export of the multipliers formulation is a problem naming formulation"
else
  bad "export of the multipliers formulation: $(cat "$work/err")"
fi
# a bare model: no baked state, no main; the file still compiles as a translation unit
jq '.model' "$cases/greenwood-5.3-rolling-disk.json" >"$work/bare.json"
if "$hamel" export "$work/bare.json" >"$work/bare.c" && ! grep -q 'HAMEL_MAIN' "$work/bare.c" &&
   cc -O2 -c "$work/bare.c" -o "$work/bare.o" 2>"$work/err"; then
  ok "a bare model exports without a main and compiles"
else
  bad "a bare model: $(head -5 "$work/err")"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
