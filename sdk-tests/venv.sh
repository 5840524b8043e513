# Sourced by run.sh and litellm/setup.sh: make_venv VENV REQUIREMENTS SECONDS makes (once) a
# Python venv at VENV with PYTHON (default python3) and installs REQUIREMENTS into it within
# SECONDS. Debian's python3 has no ensurepip without python3-venv: the venv is then made without
# pip and the system pip installs into it.
make_venv() {
  local venv="$1" requirements="$2" seconds="$3" python="${PYTHON:-python3}"
  if [ ! -x "$venv/bin/python" ]; then
    rm -rf "$venv"
    "$python" -m venv "$venv" 2>/dev/null || { rm -rf "$venv"; "$python" -m venv --without-pip "$venv"; }
  fi
  local pip
  if "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    pip=("$venv/bin/python" -m pip)
  else
    pip=("$python" -m pip --python "$venv/bin/python")
  fi
  timeout "$seconds" "${pip[@]}" install --quiet --disable-pip-version-check -r "$requirements"
}
