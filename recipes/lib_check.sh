# Checks of a recipe's variables, sourced by every recipes/*.sh before it does any work.
# Each check_* reads the variables it is given by name; a bad value exits 2 with
#   [recipe] error: NAME must be <what>, got '<value>'
# so a typo (SEEDS=one, MAX_EPOCH=ten) is named at once instead of failing later in a tool that
# does not know the variable. recipe_settings prints the values the recipe resolved in one line,
#   [recipe] settings: NAME=value NAME='a value with spaces' ...
# and, with DRY_RUN=1, stops the recipe there (exit 0). Documented in docs/recipes/*.md.

_check_fail() {  # _check_fail NAME WHAT VALUE: the error line on stderr, exit 2
  echo "[recipe] error: $1 must be $2, got '$3'" >&2
  exit 2
}
_CHECK_INT='^[0-9]+$'
_CHECK_NUMBER='^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$'

check_int() {  # check_int NAME...: each a whole number (0, 1, 2, ...)
  local name
  for name in "$@"; do
    [[ "${!name-}" =~ $_CHECK_INT ]] || _check_fail "$name" "a whole number" "${!name-}"
  done
}
check_positive_int() {  # check_positive_int NAME...: each a whole number >= 1
  local name
  for name in "$@"; do
    [[ "${!name-}" =~ $_CHECK_INT && "${!name}" =~ [1-9] ]] \
      || _check_fail "$name" "a whole number >= 1" "${!name-}"
  done
}
check_number() {  # check_number NAME...: each a number (1, 0.5, 1e-4, -2)
  local name
  for name in "$@"; do
    [[ "${!name-}" =~ $_CHECK_NUMBER ]] || _check_fail "$name" "a number" "${!name-}"
  done
}
check_nonneg_number() {  # check_nonneg_number NAME...: each a number >= 0
  local name
  for name in "$@"; do
    [[ "${!name-}" =~ $_CHECK_NUMBER && "${!name}" != -* ]] \
      || _check_fail "$name" "a number >= 0" "${!name-}"
  done
}
check_int_list() {  # check_int_list NAME...: each a non-empty list of whole numbers separated by
  # spaces (SEEDS="1 2 3")
  local name word n
  for name in "$@"; do
    n=0
    for word in ${!name-}; do
      [[ "$word" =~ $_CHECK_INT ]] || _check_fail "$name" "a list of whole numbers (e.g. '1 2 3')" "${!name-}"
      n=$((n + 1))
    done
    (( n > 0 )) || _check_fail "$name" "a list of whole numbers (e.g. '1 2 3')" "${!name-}"
  done
}
check_choice() {  # check_choice NAME ALLOWED...: the value is one of ALLOWED
  local name="$1" allowed; shift
  for allowed in "$@"; do [[ "${!name-}" == "$allowed" ]] && return 0; done
  _check_fail "$name" "$(IFS='|'; echo "$*")" "${!name-}"
}
check_choice_list() {  # check_choice_list NAME SEP ALLOWED...: every item of the value, split on
  # SEP (' ' or ','), is one of ALLOWED, and there is at least one
  local name="$1" sep="$2" item allowed ok n=0; shift 2
  local IFS="$sep"
  for item in ${!name-}; do
    [[ -z "$item" ]] && continue
    ok=0
    for allowed in "$@"; do [[ "$item" == "$allowed" ]] && ok=1; done
    (( ok )) || { IFS=' '; _check_fail "$name" "a '$sep'-separated list of $(IFS='|'; echo "$*")" "${!name-}"; }
    n=$((n + 1))
  done
  (( n > 0 )) || { IFS=' '; _check_fail "$name" "a '$sep'-separated list of $(IFS='|'; echo "$*")" "${!name-}"; }
}
check_outside_runs() {  # check_outside_runs NAME...: each, when set, a folder outside $RUNS/$PAIR (the
  # run.json copies a report or KEEP writes there would be read as runs)
  local name
  for name in "$@"; do
    case "${!name%/}/" in
      "${RUNS%/}/$PAIR/"*) _check_fail "$name" "outside RUNS/PAIR ($RUNS/$PAIR)" "${!name}" ;;
    esac
  done
  return 0
}
check_optional() {  # check_optional CHECK NAME... [-- ARGS]: run check_CHECK on each NAME that is set
  # and not empty (an empty value keeps the tool's own default)
  local check="check_$1" name; shift
  for name in "$@"; do
    [[ -n "${!name-}" ]] && "$check" "$name"
  done
  return 0
}
recipe_settings() {  # recipe_settings NAME...: one line "[recipe] settings: NAME=value ..." of the
  # resolved values (quoted where empty or holding spaces); DRY_RUN=1 then exits 0
  local name value line="[recipe] settings:"
  check_choice DRY_RUN 0 1
  for name in "$@"; do
    value="${!name-}"
    if [[ -z "$value" || "$value" =~ [[:space:]] ]]; then value="'$value'"; fi
    line+=" $name=$value"
  done
  echo "$line"
  if [[ "$DRY_RUN" == "1" ]]; then
    echo "[recipe] DRY_RUN=1: settings checked, nothing run"
    exit 0
  fi
}
DRY_RUN="${DRY_RUN:-0}"
